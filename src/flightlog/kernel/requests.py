"""Provable model requests: what each model call carried, recorded so the ledger can rebuild it.

Seed 003 (perspt recorder) ledgers a compiled prompt program (``prompt_program_compiled``) when it
changes and one ``prompt_program_invoked`` per model call. flightlog keeps those names and fields and
makes the digests RFC 8785 digests of the request the kernel handed its provider:

* **platform** = ``{protocol, model, system_prompt, tools, stream}`` (route, prompt, tool surface);
* **domain** = ``{messages, native_seed}`` (the history and the native payloads seeded back);
* **request body** = platform + domain + ``max_tokens``: exactly the fields of the
  :class:`~flightlog.providers.base.ModelRequest` the provider received, messages and payloads in their
  wire form.

``digest(x) = sha256(RFC 8785 bytes of x)`` as lowercase hex. ``platform_digest``, ``domain_digest``,
``invocation_digest = digest({"platform": platform_digest, "domain": domain_digest})`` (the seed's
"invocation = H(platform, domain)"), ``tool_spec_hash = digest(tools)``, ``request_digest =
digest(request body)``. An SDK adapter renders the body it sends over HTTP from that request with pure
code (``request_body``), so the same request always gives the same HTTP body.

``prompt_program_compiled`` ``{actor, turn, stage, route: {adapter, model, route_position}, dialect:
{id, version}, sections, dropped_sections, tool_spec_hash, digest, tools, stream}``: recorded before the
first call of an actor and again whenever its platform digest changes (failover, a new tool surface);
``tools`` holds the full specs so the ledger alone rebuilds requests. Actors: ``kernel`` (a turn's call),
``compactor`` (a summary call), ``milestone_judge`` (a :class:`~flightlog.kernel.milestones.ModelJudge`
call: its compiled record also holds ``system_prompt``, the rubric being the user's, and its invoked
record's ``criteria`` section the phase's ``items``; the judged answer is the history's last assistant
message, so its request is rebuilt from the ledger like the others).

``prompt_program_invoked`` ``{actor, turn, platform_digest, domain_digest, invocation_digest,
tool_spec_hash, request_digest, request_chars, max_tokens, sections, dropped_sections, context}``: one per
model call, appended before the call (write-ahead). ``sections`` says where each part of the request came
from, ``dropped_sections`` what earlier history the request no longer carries, ``context`` the window
fill (:class:`~flightlog.kernel.context.Fill`).

:func:`check_requests` rebuilds every recorded request from the ledger (the same fold the kernel used)
and compares digests: ``flightlog replay SESSION --check``. The tools of a turn's request are rebuilt from
the capability changes (:class:`~flightlog.kernel.capabilities.SurfaceFold`): the agent's own tools (those
of the first call, less anything mounted before it) followed by every mounted capability's tools in mount
order; a ``prompt_program_compiled`` whose tools differ from that surface is a mismatch (a tool offered
that no ``capability_changed`` put there, or one still offered after its unmount).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..encoding import canonical_json
from ..events import Compressed, ContextRenewed, Custom, PageOut, ProviderReplay, RunStarted, SessionEvent
from ..providers.base import ModelRequest, ToolSpec
from ..replay import IN_PLACE_ACTIONS, ArchiveLoader, Rebuilder
from ..sessions import archive_loader, iter_events
from ..store.base import Store
from .capabilities import SurfaceFold
from .compaction import COMPACTION_STARTED, summary_request
from .records import JUDGE_ACTOR, PROMPT_PROGRAM_COMPILED, PROMPT_PROGRAM_INVOKED, judge_request

__all__ = [
    "DIALECT_VERSION",
    "Dropped",
    "Mismatch",
    "Program",
    "RequestCheck",
    "check_requests",
    "check_session",
    "digest",
    "native_seed_of",
    "program_of",
    "sections_of",
    "tool_wire",
]

DIALECT_VERSION = 1
"""Version of the request form the digests cover (``prompt_program_compiled.dialect.version``)."""


def digest(value: Any) -> str:
    """sha256 of the RFC 8785 bytes of a JSON-ready value, lowercase hex (64 chars)."""
    return hashlib.sha256(canonical_json(value)).hexdigest()


def tool_wire(spec: ToolSpec) -> dict[str, Any]:
    """A tool spec as JSON: ``{name, description, parameters}``."""
    return {"name": spec.name, "description": spec.description, "parameters": spec.parameters}


@dataclass(frozen=True)
class Program:
    """The digests and sizes of one request (see the module docs for each rule)."""

    platform: dict[str, Any]
    domain: dict[str, Any]
    max_tokens: int

    @property
    def platform_digest(self) -> str:
        """digest(platform)."""
        return digest(self.platform)

    @property
    def domain_digest(self) -> str:
        """digest(domain)."""
        return digest(self.domain)

    @property
    def invocation_digest(self) -> str:
        """digest({"platform": platform_digest, "domain": domain_digest})."""
        return digest({"platform": self.platform_digest, "domain": self.domain_digest})

    @property
    def tool_spec_hash(self) -> str:
        """digest(platform["tools"]): the offered tool surface."""
        return digest(self.platform["tools"])

    @property
    def body(self) -> dict[str, Any]:
        """The request body: platform + domain + ``max_tokens``."""
        return {**self.platform, **self.domain, "max_tokens": self.max_tokens}

    @property
    def body_bytes(self) -> bytes:
        """RFC 8785 bytes of :attr:`body`."""
        return canonical_json(self.body)

    @property
    def request_digest(self) -> str:
        """sha256 of :attr:`body_bytes`, lowercase hex."""
        return hashlib.sha256(self.body_bytes).hexdigest()

    @property
    def request_chars(self) -> int:
        """Size of the canonical body in characters (what the fill estimate scales)."""
        return len(self.body_bytes.decode("utf-8"))


def program_of(protocol: str, model: str, request: ModelRequest) -> Program:
    """The :class:`Program` of a request sent to ``protocol``/``model``."""
    seed = request.native_seed
    platform = {
        "protocol": protocol,
        "model": model,
        "system_prompt": request.system_prompt,
        "tools": [tool_wire(spec) for spec in request.tools],
        "stream": request.stream,
    }
    domain = {
        "messages": [message.to_wire() for message in request.messages],
        "native_seed": None if seed is None else [replay.to_wire() for replay in seed],
    }
    return Program(platform, domain, request.max_tokens)


def native_seed_of(rebuilder: Rebuilder, protocol: str) -> list[ProviderReplay] | None:
    """The surviving ``llm_completed`` payloads when every one is of ``protocol``, else None."""
    replays = [entry.replay for entry in rebuilder.entries if entry.seq is not None]
    if any(replay is None or replay.protocol != protocol for replay in replays):
        return None
    return [replay for replay in replays if replay is not None]


# ─── provenance ───────────────────────────────────────────────────────────────────────────────


_ORIGIN_SECTION = {
    "run_started": "goal",
    "llm_completed": "history",
    "tool_completed": "history",
    "compressed": "summary",
    "context_renewed": "handoff",
    "custom": "note",  # signal_message and kernel_note, the custom kinds that add a message (flightlog.replay)
}


def sections_of(origins: Sequence[int], kinds: Sequence[str]) -> list[dict[str, Any]]:
    """Where each message of a request came from, as runs of consecutive messages.

    Args:
        origins: For each message, the seq of the event that put it in the history.
        kinds: Event kind by seq (``kinds[seq]``).

    Returns:
        ``[{id, origin, seq_range: [first, last], messages}]``: ``id`` is ``goal`` (``run_started``),
        ``history`` (``llm_completed``/``tool_completed``), ``summary`` (``compressed``) or ``handoff``
        (``context_renewed``); ``seq_range`` the origin seqs of the run (inclusive).
    """
    sections: list[dict[str, Any]] = []
    for origin in origins:
        kind = kinds[origin] if 0 <= origin < len(kinds) else "unknown"
        name = _ORIGIN_SECTION.get(kind, kind)
        last = sections[-1] if sections else None
        if last is not None and last["id"] == name and name == "history":
            last["seq_range"][1] = origin
            last["messages"] += 1
        else:
            sections.append({"id": name, "origin": kind, "seq_range": [origin, origin], "messages": 1})
    return sections


@dataclass
class Dropped:
    """What the current sprint's history no longer carries (``dropped_sections``), folded in order."""

    items: list[dict[str, Any]] = field(default_factory=list)

    def feed(self, seq: int, event: SessionEvent) -> None:
        """Fold one event (``compressed``, ``page_out`` add an item, ``rewritten`` for an in-place
        ``compressed``; ``context_renewed`` restarts)."""
        if isinstance(event, Compressed):
            low, high = event.archived_seq_range
            name = "rewritten" if event.action in IN_PLACE_ACTIONS else "archived"
            item: dict[str, Any] = {"id": name, "origin": "compressed", "seq": seq, "seq_range": [low, high]}
            if event.action is not None:
                item["action"] = event.action
            self.items.append(item)
        elif isinstance(event, PageOut):
            paged: dict[str, Any] = {"id": "paged_out", "origin": "page_out", "seq": seq}
            if event.archive_ref:
                paged["archive_ref"] = event.archive_ref
            self.items.append(paged)
        elif isinstance(event, ContextRenewed):
            self.items = [{"id": "previous_sprint", "origin": "context_renewed", "seq": seq}]

    def wire(self) -> list[dict[str, Any]]:
        """A copy of the list, JSON-ready."""
        return [dict(item) for item in self.items]


# ─── check ────────────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Mismatch:
    """A recorded request the ledger does not reproduce.

    Attributes:
        seq: Seq of its ``prompt_program_invoked``.
        turn: Its turn.
        actor: ``kernel`` (a turn's model call), ``compactor`` (a summary call) or ``milestone_judge`` (a
            :class:`~flightlog.kernel.milestones.ModelJudge` call).
        reason: What differs (``request_digest`` recorded vs rebuilt, or why it could not be rebuilt).
    """

    seq: int
    turn: int
    actor: str
    reason: str


@dataclass(frozen=True)
class RequestCheck:
    """Result of :func:`check_requests`.

    Attributes:
        checked: Number of recorded requests rebuilt.
        mismatches: Those that did not reproduce, in seq order.
    """

    checked: int
    mismatches: tuple[Mismatch, ...]

    @property
    def ok(self) -> bool:
        """True when every recorded request reproduced."""
        return not self.mismatches

    @property
    def first(self) -> Mismatch | None:
        """The first request that did not reproduce."""
        return self.mismatches[0] if self.mismatches else None


class _Checker:
    """Fold state of :func:`check_requests`."""

    def __init__(self, loader: ArchiveLoader | None) -> None:
        self.rebuilder = Rebuilder(loader)
        self.kinds: list[str] = []
        self.system_prompt: str | None = None
        self.compiled: dict[str, dict[str, Any]] = {}
        self.plan: dict[str, Any] | None = None
        self.surface = SurfaceFold()
        self.base: list[dict[str, Any]] | None = None
        self.checked = 0
        self.mismatches: list[Mismatch] = []

    def feed(self, seq: int, event: SessionEvent) -> None:
        while len(self.kinds) < seq:
            self.kinds.append("unknown")
        self.kinds.append(event.kind)
        if isinstance(event, RunStarted):
            self.system_prompt = event.system_prompt
        self.surface.feed(seq, event)
        if isinstance(event, Custom) and isinstance(event.payload, dict):
            self._custom(seq, event.custom_kind, event.payload)
        self.rebuilder.feed(seq, event)

    def _custom(self, seq: int, kind: str, payload: dict[str, Any]) -> None:
        if kind == PROMPT_PROGRAM_COMPILED:
            actor = str(payload.get("actor", "kernel"))
            self.compiled[actor] = payload
            if actor == "kernel":
                self._check_surface(seq, payload)
        elif kind == COMPACTION_STARTED:
            self.plan = payload
        elif kind == PROMPT_PROGRAM_INVOKED:
            self._check(seq, payload)

    def offered(self) -> list[dict[str, Any]] | None:
        """The kernel's tool surface the ledger gives now: the agent's own tools (the first turn's, less
        what was mounted before it) then each mounted capability's, in mount order (None before the
        first kernel call)."""
        if self.base is None:
            return None
        mounted = [
            {"name": spec["name"], "description": spec["description"], "parameters": spec["parameters"]}
            for spec in self.surface.tool_specs().values()
        ]
        return [*self.base, *mounted]

    def _check_surface(self, seq: int, payload: dict[str, Any]) -> None:
        """Every change of the offered tools must be a capability change the ledger records."""
        tools = payload.get("tools")
        if not isinstance(tools, list):
            return
        if self.base is None:
            mounted = set(self.surface.tool_specs())
            self.base = [t for t in tools if isinstance(t, dict) and t.get("name") not in mounted]
        expected = self.offered()
        if expected != tools:
            names = [t.get("name") for t in tools if isinstance(t, dict)]
            wanted = [t["name"] for t in expected or []]
            reason = (
                f"tools offered {names} are not the surface the capability changes give {wanted}"
                if names != wanted
                else "a tool's spec differs from the one its capability_changed mounted"
            )
            self.mismatches.append(Mismatch(seq, int(payload.get("turn", 0)), "kernel", reason))

    def _check(self, seq: int, payload: dict[str, Any]) -> None:
        actor = str(payload.get("actor", "kernel"))
        turn = int(payload.get("turn", 0))
        self.checked += 1
        try:
            rebuilt = self._rebuild(actor, payload)
        except (KeyError, TypeError, ValueError) as exc:
            self.mismatches.append(Mismatch(seq, turn, actor, f"cannot rebuild the request: {exc}"))
            return
        recorded = payload.get("request_digest")
        if rebuilt.request_digest != recorded:
            reason = f"request_digest recorded {recorded}, rebuilt {rebuilt.request_digest}"
            self.mismatches.append(Mismatch(seq, turn, actor, reason))

    def _answer(self) -> str | None:
        """The answer a milestone judge judged: the last assistant message's text (as
        :meth:`~flightlog.kernel.state.KernelState.final_message`)."""
        for message in reversed(self.rebuilder.messages()):
            if message.role == "assistant":
                return message.text_content() or None
        return None

    def _rebuild(self, actor: str, payload: dict[str, Any]) -> Program:
        compiled = self.compiled.get(actor)
        if compiled is None:
            raise ValueError(f"no prompt_program_compiled for actor {actor!r} before it")
        route = compiled["route"]
        offered = self.offered() if actor == "kernel" else None
        wire = offered if offered is not None else compiled["tools"]
        tools = [ToolSpec(t["name"], t["description"], t["parameters"]) for t in wire]
        max_tokens = int(payload["max_tokens"])
        if actor == "compactor":
            if self.plan is None:
                raise ValueError("no compaction_started before the summary call")
            request = summary_request(self.rebuilder, self.plan, max_tokens)
        elif actor == JUDGE_ACTOR:
            request = judge_request(
                str(compiled["system_prompt"]), _criteria(payload), self._answer(), max_tokens
            )
        else:
            request = ModelRequest(
                system_prompt=self.system_prompt,
                messages=self.rebuilder.messages(),
                tools=tools,
                native_seed=native_seed_of(self.rebuilder, route["adapter"]),
                max_tokens=max_tokens,
                stream=bool(compiled.get("stream", False)),
            )
        return program_of(route["adapter"], route["model"], request)


def _criteria(payload: dict[str, Any]) -> list[str]:
    """The criteria a judge request listed (its invoked record's ``criteria`` section).

    Raises:
        ValueError: the record has no ``criteria`` section with a list of ``items``.
    """
    for section in payload.get("sections") or ():
        if (
            isinstance(section, dict)
            and section.get("id") == "criteria"
            and isinstance(section.get("items"), list)
        ):
            return [str(item) for item in section["items"]]
    raise ValueError("the judge request's record has no criteria section")


def check_requests(
    events: Iterable[tuple[int, SessionEvent]], *, loader: ArchiveLoader | None = None
) -> RequestCheck:
    """Rebuild every recorded model request of a session from its events and compare digests.

    Args:
        events: ``(seq, event)`` pairs in ascending seq (the whole session).
        loader: Resolves handoff refs (the store's artifacts), as the kernel did.

    Returns:
        How many requests were checked and which did not reproduce (first one first). A session with
        no ``prompt_program_invoked`` (imported, or recorded before requests were ledgered) checks 0.

    Source: seed 003 ``prompt_program_compiled`` / ``prompt_program_invoked``; the digest rules are
    flightlog's (module docs).
    """
    checker = _Checker(loader)
    for seq, event in events:
        checker.feed(seq, event)
    return RequestCheck(checker.checked, tuple(checker.mismatches))


def check_session(store: Store, session_id: str) -> RequestCheck:
    """:func:`check_requests` over a stored session, with the store's artifacts as the handoff loader.

    Raises:
        SessionNotFound: no such session.
        EventDecodeError: a stored event does not decode.
    """
    pairs = ((row.seq, event) for row, event in iter_events(store, session_id))
    return check_requests(pairs, loader=archive_loader(store, session_id))
