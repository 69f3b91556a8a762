"""Long-term memory in the kernel: the built-in ``memory_write``/``memory_query`` tools, write validation,
asynchronous retrieval through an external service, and memories injected at run start (issue 14 item 3).

Enabled by ``Agent.memory`` (:class:`MemoryPolicy`); memory lives in the run's store
(:mod:`flightlog.kernel.memory_bank`), so it survives across runs and sessions of the same scope.

**Writes** (``memory_write(name, content, kind, description)``; the scope is the policy's, the model
cannot choose another). Checked in upstream's host order with its error strings (UPSTREAM.md §8; Node
``runner.ts:752-785``, Python ``runner.py:~600-620``): ``memory name must not be empty``, ``memory name
exceeds 100 characters``, ``memory content exceeds 10000 bytes`` (UTF-8 bytes; the limits are the
policy's), then flightlog's own: ``memory description exceeds 1000 bytes`` (the record, description
included, is copied into every recall's ``memory_retrieval_result``), an unknown kind (``invalid
memory kind 'x'``, upstream's ``invalid_kind``) and secrets found by Yelp's ``detect-secrets`` (its
keyword and token detectors: AWS, GitHub, Slack, Stripe, private keys, JWTs, ``password = ...``…; the
high-entropy detectors are left out, as every ordinary sentence trips them) in the name, description
or content: ``memory content contains a secret (<detector names>)`` (the secret itself is never
repeated). A rejected write records ``memory_validation_failed{turn, record_id, error}``
(``record_id``: the stored record's id when the key exists, else the proposed name, as upstream's
kernel does for a failed write) and the tool answers an error; an accepted one upserts
(:func:`flightlog.kernel.memory_bank.remember`) and records
``memory_written{turn, record_id, scope, memory_kind, name, size_bytes}``.

**Order in the ledger.** What a memory tool did (``memory_written``, ``memory_validation_failed``,
``memory_queried``) is recorded during its call, in the transaction of the store write it describes: the
upsert (and the erasure of an overwritten text) commits with its ``memory_written``, a query's recall
counts with its ``memory_queried``, or neither does. So a memory the store holds, which later runs recall,
is on record however the turn ends: completed, rolled back by a ``FatalToolError`` (before the
``rollbacked``), stopped by a sub-agent call (before the ``suspended``), out of wall clock or cancelled
(before ``operation_cancelled``), left by an exception, or SIGKILLed (the crash points ``memory.stored``
and ``memory.recorded`` of ``flightlog.testing.crashpoints`` bracket the commit;
``tests/kernel/test_memory_record.py``, and ``tests/postgres/test_memory.py`` on PostgreSQL). The tools
run on the event loop (``in_thread=False``), where the activation's other appends run. What a query
brought back (``memory_retrieval_result``, ``memory_already_in_history``, a memory ``suspended``) is
staged and recorded just after the turn's ``tool_completed``, in its transaction: it enters the history
only with the tool results, so a turn that does not complete records none of it (its ``memory_queried``
stays: the query was made), and the staged events die with the turn's context (each turn, and each
retry of it, gets a fresh one). A turn that is run again (resumed after a crash, a cancel, a sub-agent
wait; retried after a rollback) runs its ``memory_write`` again: the same ``(scope, kind, name)``
upserts the same record (same ``record_id``), and that write is recorded too, so the ledger may hold two
``memory_written`` of one call, one per store write. On the normal path the order is as before: what the
calls did, then ``tool_completed``, then what they brought back; with several calls in a turn, each call's
events sit where the call ran, among the other calls' records (``external_effect_*``, sub-agent events).
Runs recorded before 2026-12-05 have the first group after ``tool_completed``; no reader depends on it
(``memory_queried`` and ``memory_written`` add no message), so they replay as recorded.

**Queries** (``memory_query(query, top_k, kinds)``): ``k = clamp(top_k, 1, policy.top_k)`` (upstream
``retrieval_top_k``, default 5). In-store retrieval records ``memory_queried{…, requires_async_response:
false}`` and ``memory_retrieval_result{hits}``; each
hit then enters the history as a user message ``[MEMORY record_id=<id> kind=<kind>] <text>`` (upstream's
host form; :func:`flightlog.replay.memory_message`), so a live run, a resumed one and ``replay`` show the
same. A hit whose message (same record, same content handle) is already in the run's current history, such
as a memory injected at run start, is left out of ``memory_retrieval_result`` (the tool's answer names it
as already above), so the model is not given the same memory twice; the ledger says so with
``custom:memory_already_in_history{turn, record_ids}`` (:data:`MEMORY_ALREADY_IN_HISTORY`, right after the
``memory_retrieval_result``; the seed's event has no field for it), so an empty ``hits`` is not read as
"nothing recalled". Hits in the ledger carry the text's salted handle, never the text (:mod:`flightlog.integrity.erasure`).

**Asynchronous retrieval.** With ``policy.service`` (a :class:`MemoryService`), the query is submitted
under a durable id (``<run_id>:turn-<turn>:memory-<n>``), ``memory_queried`` records
``requires_async_response: true``, and the run suspends (``suspended{reason: "memory_retrieval",
pending_calls: [query id]}``). ``Kernel.resume`` (from any process, with an agent whose service answers
for the same ids) polls the service: not ready, the run stays suspended and nothing is written; ready,
``resumed`` and ``memory_retrieval_result`` (texts stored as salted artifacts first) are recorded and the
run goes on with the hits in its history; a hit already in the history (same record id, kind and text) is
left out, as for an in-store query, and named by a ``memory_already_in_history`` after the result. The
answer is checked first as upstream's ``validate_hits`` (at most ``requested_k`` hits, the policy's scope,
unique ids, scores in [0, 1], kinds among those asked for) plus the write-side ``max_content_bytes``; an
answer that breaks one is rejected whole (``collect``): the resume raises ``KernelError`` naming the
hit and the rule, nothing is recorded, and the run stays suspended until the service answers within it.

**Injection at run start** (``policy.inject`` > 0): the goal is the query; the hits are recorded after
``run_started`` (``memory_queried`` turn 0, then ``memory_retrieval_result``), in the start's transaction.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..events import (
    CheckpointTaken,
    Custom,
    Event,
    LlmCompleted,
    MemoryKind,
    MemoryQueried,
    MemoryRecall,
    MemoryRetrievalResult,
    MemoryScope,
    MemoryTrustLevel,
    MemoryValidationFailed,
    MemoryWritten,
    Suspended,
)
from ..integrity.notary import Notary
from ..messages import ToolCall
from ..narration import plural
from ..replay import memory_message
from ..salted import put_personal_artifact
from ..testing.crashpoints import crash_point
from .memory_bank import MEDIA_TYPE, recall, remember
from .paging import current_access
from .tools import Tool, tool

if TYPE_CHECKING:
    from ..store.base import Store
    from .state import KernelState

__all__ = [
    "MEMORY_ALREADY_IN_HISTORY",
    "MEMORY_QUERY",
    "MEMORY_SUSPENSION",
    "MEMORY_WRITE",
    "MemoryPolicy",
    "MemoryQuery",
    "MemoryService",
    "SpoolMemoryService",
    "find_secrets",
    "memory_tools",
    "validate_write",
]

MEMORY_WRITE = "memory_write"
"""Name of the built-in tool that writes a memory."""
MEMORY_QUERY = "memory_query"
"""Name of the built-in tool that queries memory."""
MEMORY_SUSPENSION = "memory_retrieval"
"""``suspended.reason`` of a run waiting for an asynchronous memory retrieval."""
MEMORY_ALREADY_IN_HISTORY = "memory_already_in_history"
"""``Custom`` kind naming the recalled memories left out of a ``memory_retrieval_result`` because their
``[MEMORY ...]`` message is already in the run's history: payload ``{"turn": int, "record_ids": [str]}``
(record ids in the order recalled)."""


@dataclass(frozen=True)
class MemoryQuery:
    """A scoped recall request (upstream ``MemoryQuery``, ``mm/memory.rs:284-297``).

    Attributes:
        scope: Where to search.
        query: Free text (non-blank).
        top_k: At most this many hits (> 0).
        kinds: Only these kinds (empty: any).
        min_score: Drop hits below this score (in [0, 1]).
    """

    scope: MemoryScope
    query: str
    top_k: int = 5
    kinds: tuple[MemoryKind, ...] = ()
    min_score: float | None = None

    def to_wire(self) -> dict[str, Any]:
        """Upstream's serde form (``kinds`` and ``min_score`` omitted when empty/None)."""
        wire: dict[str, Any] = {"scope": self.scope.to_wire(), "query": self.query, "top_k": self.top_k}
        if self.kinds:
            wire["kinds"] = [k.value for k in self.kinds]
        if self.min_score is not None:
            wire["min_score"] = self.min_score
        return wire


@runtime_checkable
class MemoryService(Protocol):
    """An external memory service that answers queries asynchronously (possibly after the process that
    asked is gone). Both calls are keyed by a durable query id the kernel records."""

    def submit(self, query_id: str, query: MemoryQuery) -> None:
        """Accept a query (idempotent per ``query_id``: a resumed run may submit again)."""
        ...

    def poll(self, query_id: str) -> Sequence[MemoryRecall] | None:
        """The hits (``record.content``: the text) once ready, else None."""
        ...


class SpoolMemoryService:
    """A :class:`MemoryService` over a directory: ``submit`` writes ``<id>.query.json`` (upstream's
    ``MemoryQuery`` form); whoever serves it writes ``<id>.hits.json`` (a JSON list of upstream
    ``MemoryRecall``), which ``poll`` reads. Ids are hex-digested into file names."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    def _path(self, query_id: str, suffix: str) -> Path:
        import hashlib

        return self.directory / f"{hashlib.sha256(query_id.encode()).hexdigest()[:32]}.{suffix}.json"

    def submit(self, query_id: str, query: MemoryQuery) -> None:
        """Write ``<id>.query.json`` (atomically; again on a repeated submit)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        target = self._path(query_id, "query")
        tmp = target.with_suffix(".tmp")
        tmp.write_text(json.dumps({"query_id": query_id, **query.to_wire()}), encoding="utf-8")
        tmp.replace(target)

    def pending(self) -> list[tuple[str, dict[str, Any]]]:
        """Submitted queries without hits yet: ``(query_id, query wire)``."""
        out: list[tuple[str, dict[str, Any]]] = []
        for path in sorted(self.directory.glob("*.query.json")):
            doc = json.loads(path.read_text(encoding="utf-8"))
            if not self._path(doc["query_id"], "hits").exists():
                out.append((doc["query_id"], doc))
        return out

    def answer(self, query_id: str, hits: Sequence[MemoryRecall]) -> None:
        """Write the hits of ``query_id`` (what the serving side calls)."""
        target = self._path(query_id, "hits")
        tmp = target.with_suffix(".tmp")
        tmp.write_text(json.dumps([h.to_wire() for h in hits]), encoding="utf-8")
        tmp.replace(target)

    def poll(self, query_id: str) -> list[MemoryRecall] | None:
        """The hits of ``<id>.hits.json``, None while it does not exist."""
        path = self._path(query_id, "hits")
        if not path.exists():
            return None
        return [MemoryRecall.model_validate(h) for h in json.loads(path.read_text(encoding="utf-8"))]


@dataclass(frozen=True)
class MemoryPolicy:
    """How an agent uses long-term memory (``Agent.memory``).

    Attributes:
        scope: The one scope the agent reads and writes (both parts non-empty: upstream
            ``MemoryQuery::validate``'s scope rule).
        tools: Offer ``memory_write`` and ``memory_query`` to the model.
        inject: At run start, recall up to this many memories relevant to the goal (0: none).
        top_k: Cap on hits per query (upstream ``retrieval_top_k``, default 5).
        max_name_length: Longest name, characters (upstream default 100).
        max_content_bytes: Largest content, UTF-8 bytes (upstream default 10000).
        max_description_bytes: Largest description, UTF-8 bytes (flightlog's own bound: upstream has
            none, and the record, description included, is copied into every recall's
            ``memory_retrieval_result``, so an unbounded one grows the ledger on each query).
        detect_secrets: Refuse writes in which ``detect-secrets`` finds a secret.
        trust: Trust recorded on what the model writes (provenance ``author`` is ``model``).
        service: An external asynchronous memory service; None: retrieve from the store, synchronously.
    """

    scope: MemoryScope
    tools: bool = True
    inject: int = 0
    top_k: int = 5
    max_name_length: int = 100
    max_content_bytes: int = 10_000
    max_description_bytes: int = 1_000
    detect_secrets: bool = True
    trust: MemoryTrustLevel = MemoryTrustLevel.UNTRUSTED
    service: MemoryService | None = field(default=None, compare=False)

    @classmethod
    def from_dict(cls, table: Mapping[str, Any], service: MemoryService | None = None) -> MemoryPolicy:
        """The ``[memory]`` table of ``agent.toml``: ``scope = "TENANT/NAMESPACE"`` (required), and any of
        ``tools``, ``inject``, ``top_k``, ``max_name_length``, ``max_content_bytes``,
        ``max_description_bytes``, ``detect_secrets``,
        ``trust`` (``service`` is resolved by the caller).

        Raises:
            ValueError: a missing or malformed scope, an unknown key, a bad value.
        """
        values = dict(table)
        values.pop("service", None)
        unknown = set(values) - {f.name for f in fields(cls)} - {"service"}
        if unknown:
            raise ValueError(f"unknown keys in [memory]: {', '.join(sorted(unknown))}")
        scope = values.pop("scope", None)
        tenant, _, namespace = str(scope or "").partition("/")
        if not tenant or not namespace:
            raise ValueError('[memory] needs scope = "TENANT/NAMESPACE"')
        if "trust" in values:
            values["trust"] = MemoryTrustLevel(values["trust"])
        for key in ("inject", "top_k", "max_name_length", "max_content_bytes", "max_description_bytes"):
            if key in values and (type(values[key]) is not int):
                raise ValueError(f"[memory] {key} must be an integer")
        for key in ("tools", "detect_secrets"):
            if key in values and type(values[key]) is not bool:
                raise ValueError(f"[memory] {key} must be true or false")
        return cls(scope=MemoryScope(tenant_id=tenant, namespace=namespace), service=service, **values)

    def __post_init__(self) -> None:
        if not self.scope.tenant_id or not self.scope.namespace:
            raise ValueError("memory scope tenant_id and namespace must be non-empty")
        if self.top_k < 1 or self.inject < 0:
            raise ValueError("memory top_k must be >= 1 and inject >= 0")


# ─── validation ───────────────────────────────────────────────────────────────────────────────


@cache
def _detectors() -> dict[str, Any]:
    """detect-secrets' plugin settings: every detector but the high-entropy ones."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    classes: list[type] = list(get_mapping_from_secret_type_to_class().values())
    names = sorted({c.__name__ for c in classes})
    return {"plugins_used": [{"name": n} for n in names if "HighEntropy" not in n]}


def find_secrets(text: str) -> list[str]:
    """The detect-secrets detector types that fire on ``text`` (e.g. ``AWS Access Key``), sorted, unique."""
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import transient_settings

    found: set[str] = set()
    with transient_settings(_detectors()):
        for line in text.splitlines() or [text]:
            found.update(secret.type for secret in scan_line(line))
    return sorted(found)


def validate_write(
    policy: MemoryPolicy, name: str, content: str, kind: str, description: str = ""
) -> str | None:
    """Why a write is refused (the ``memory_validation_failed.error``), or None (see the module docs)."""
    if not name.strip():
        return "memory name must not be empty"
    if len(name) > policy.max_name_length:
        return f"memory name exceeds {policy.max_name_length} characters"
    if len(content.encode("utf-8")) > policy.max_content_bytes:
        return f"memory content exceeds {policy.max_content_bytes} bytes"
    if len(description.encode("utf-8")) > policy.max_description_bytes:
        return f"memory description exceeds {policy.max_description_bytes} bytes"
    if kind not in {k.value for k in MemoryKind}:
        return f"invalid memory kind {kind!r}"
    if policy.detect_secrets:
        found = find_secrets("\n".join((name, description, content)))
        if found:
            return f"memory content contains a secret ({', '.join(found)})"
    return None


# ─── the tools ────────────────────────────────────────────────────────────────────────────────


class MemoryRejected(ValueError):
    """A memory write failed validation (the tool's error result)."""


@dataclass
class MemoryContext:
    """One turn's view for the memory tools: where to write, how to record what they do, and what they
    bring back for the kernel to append after the turn's ``tool_completed`` (``events``).

    ``record`` appends events to the run's ledger durably, in one transaction that joins an open
    ``store.transaction()`` (the activation's ``append``): what a tool did (``memory_written``,
    ``memory_validation_failed``, ``memory_queried``) is recorded with the store write it describes, during
    the call (see "Order in the ledger" in the module docs)."""

    store: Store
    policy: MemoryPolicy
    session_id: str
    run_id: str
    turn: int
    notary: Notary | None
    record: Callable[..., None]
    events: list[Event] = field(default_factory=list)
    queries: int = 0
    state: KernelState | None = None


def _context() -> MemoryContext:
    access = current_access().get()
    context = getattr(access, "memory_context", None)
    if not isinstance(context, MemoryContext):
        raise RuntimeError("memory tools only run inside a kernel turn of an agent with a memory policy")
    return context


@tool(effect="idempotent", in_thread=False)  # on the event loop: it appends to the ledger (module docs)
def memory_write(name: str, content: str, kind: str = "project", description: str = "") -> str:
    """Remember a fact for later runs (long-term memory). Writing the same kind and name again updates it.

    Args:
        name: Short unique name of the memory (at most 100 characters).
        content: The fact to remember (at most 10000 bytes; never secrets such as keys or passwords).
        kind: One of user, feedback, project, reference.
        description: One line saying what the memory is about (at most 1000 bytes).
    """
    ctx = _context()
    policy = ctx.policy
    error = validate_write(policy, name, content, kind, description)
    if error is not None:
        existing = ctx.store.memory.find(policy.scope, MemoryKind(kind), name) if kind in _KINDS else None
        record_id = existing.record.record_id if existing is not None else name
        ctx.record(MemoryValidationFailed(turn=ctx.turn, record_id=record_id, error=error))
        raise MemoryRejected(error)
    from ..events import MemoryAuthor

    with ctx.store.transaction():  # the upsert and its memory_written commit together, or neither does
        done = remember(
            ctx.store,
            scope=policy.scope,
            kind=MemoryKind(kind),
            name=name,
            content=content,
            description=description,
            author=MemoryAuthor.MODEL,
            trust=policy.trust,
            session_id=ctx.session_id,
            evidence_refs=[f"turn:{ctx.turn}"],
            notary=ctx.notary,
        )
        crash_point("memory.stored")  # test-only fault injection (flightlog.testing.crashpoints)
        record = done.record
        ctx.record(
            MemoryWritten(
                turn=ctx.turn,
                record_id=record.record_id,
                scope=record.scope,
                memory_kind=record.kind,
                name=record.name,
                size_bytes=len(content.encode("utf-8")),
            )
        )
    crash_point("memory.recorded")
    verb = "remembered" if done.inserted else "updated"
    return f"{verb} {record.kind.value} memory {name!r} ({record.record_id})"


_KINDS = {k.value for k in MemoryKind}


@tool(effect="read_only", in_thread=False)  # on the event loop: it appends to the ledger (module docs)
def memory_query(query: str, top_k: int = 5, kinds: list[str] | None = None) -> str:
    """Search long-term memory; the memories found are added to the conversation as [MEMORY ...] messages
    (those already in it are named, not repeated).

    Args:
        query: What to look for (words).
        top_k: How many memories at most.
        kinds: Only these kinds (user, feedback, project, reference); all when omitted.
    """
    ctx = _context()
    policy = ctx.policy
    if not query.strip():
        raise ValueError("memory query text must be non-empty")
    unknown = [k for k in kinds or [] if k not in _KINDS]
    if unknown:
        raise ValueError(f"invalid memory kind {unknown[0]!r}")
    k = max(1, min(top_k, policy.top_k))
    request = MemoryQuery(policy.scope, query, k, tuple(MemoryKind(x) for x in kinds or []))
    if policy.service is not None:
        ctx.queries += 1
        query_id = f"{ctx.run_id}:turn-{ctx.turn}:memory-{ctx.queries}"
        policy.service.submit(query_id, request)  # idempotent per id: a re-run call submits it again
        ctx.record(
            MemoryQueried(
                turn=ctx.turn, scope=policy.scope, query=query, requested_k=k, requires_async_response=True
            )
        )
        ctx.events.append(Suspended(turn=ctx.turn, reason=MEMORY_SUSPENSION, pending_calls=[query_id]))
        return f"memory query {query_id} submitted; the run waits for its result"
    with ctx.store.transaction():  # the recall counts and memory_queried commit together
        hits = recall(ctx.store, policy.scope, query, kinds=request.kinds, top_k=k)
        ctx.record(
            MemoryQueried(
                turn=ctx.turn, scope=policy.scope, query=query, requested_k=k, requires_async_response=False
            )
        )
    shown = in_history(ctx.state) if ctx.state is not None else set()
    new = [h for h in hits if (h.record.record_id, h.record.content) not in shown]
    above = [h.record.record_id for h in hits if h not in new]
    ctx.events += [MemoryRetrievalResult(hits=new), *already_in_history(ctx.turn, above)]
    if not hits:
        return "no memories matched"
    ids = ", ".join(h.record.record_id for h in hits)
    answer = f"{plural(len(hits), 'memory')} recalled ({ids})"
    if new:
        answer += f"; {', '.join(h.record.record_id for h in new)} follow as [MEMORY ...] messages"
    if above:
        answer += f"; already in the conversation above: {', '.join(above)}"
    return answer


def already_in_history(turn: int, record_ids: Sequence[str]) -> list[Event]:
    """The ``memory_already_in_history`` record of the hits left out of a ``memory_retrieval_result``
    (:data:`MEMORY_ALREADY_IN_HISTORY`); none when ``record_ids`` is empty."""
    if not record_ids:
        return []
    return [
        Custom(custom_kind=MEMORY_ALREADY_IN_HISTORY, payload={"turn": turn, "record_ids": list(record_ids)})
    ]


def in_history(state: KernelState) -> set[tuple[str, str]]:
    """``(record_id, content handle)`` of the recalled memories whose ``[MEMORY ...]`` message is in the
    run's current history (a compaction or a rollback may have taken one out: then it is not)."""
    recalled = [h for _, e in state.events if isinstance(e, MemoryRetrievalResult) for h in e.hits]
    if not recalled:
        return set()
    heads = {
        m.text_content().split("] ", 1)[0] + "]" for m in state.history() if m.role == "user" and m.content
    }
    return {
        (h.record.record_id, h.record.content)
        for h in recalled
        if f"[MEMORY record_id={h.record.record_id} kind={h.record.kind.value}]" in heads
    }


def _shown_texts(state: KernelState) -> set[str]:
    """The texts of the ``[MEMORY ...]`` user messages in the run's current history
    (:func:`flightlog.replay.memory_message`: the text behind each handle, as the model is given it)."""
    return {
        text
        for m in state.history()
        if m.role == "user" and (text := m.text_content()).startswith("[MEMORY record_id=")
    }


def memory_tools(existing: Sequence[Tool]) -> tuple[Tool, ...]:
    """The memory tools whose names the agent's own tools do not already take."""
    names = {t.name for t in existing}
    return tuple(t for t in (memory_write, memory_query) if t.name not in names)


# ─── kernel hooks ─────────────────────────────────────────────────────────────────────────────


def turn_context(activation: Any) -> MemoryContext | None:
    """The memory tools' context for the turn the activation is about to execute (None: no policy)."""
    policy = activation.agent.memory
    if policy is None:
        return None
    st = activation.state
    return MemoryContext(
        activation.kernel.store,
        policy,
        activation.session_id,
        st.run_id,
        st.turn,
        activation.kernel.notary,
        activation.append,
        state=st,
    )


def drain(context: MemoryContext | None) -> list[Event]:
    """What the memory tools brought back (appended after ``tool_completed``), emptied."""
    if context is None:
        return []
    events, context.events = context.events, []
    return events


def start_events(store: Store, policy: MemoryPolicy | None, goal: str) -> list[Event]:
    """Memories injected at run start (``policy.inject`` > 0; see the module docs)."""
    if policy is None or policy.inject < 1 or not goal.strip():
        return []
    k = min(policy.inject, policy.top_k)
    hits = recall(store, policy.scope, goal, top_k=k)
    if not hits:
        return [
            MemoryQueried(
                turn=0, scope=policy.scope, query=goal, requested_k=k, requires_async_response=False
            )
        ]
    return [
        MemoryQueried(turn=0, scope=policy.scope, query=goal, requested_k=k, requires_async_response=False),
        MemoryRetrievalResult(hits=hits),
    ]


def waiting_query(state: KernelState) -> str | None:
    """The id of the asynchronous memory query a suspended run waits for, or None."""
    suspension = state.suspension
    if state.phase != "suspended" or suspension is None or suspension.reason != MEMORY_SUSPENSION:
        return None
    return suspension.pending_calls[0] if suspension.pending_calls else None


def wait_detail(
    state: KernelState,
    answered_in: str | None = None,
    *,
    resume: str | None = None,
    waits_for: str | None = None,
) -> str | None:
    """What a suspended run waits for, in a few words (``flightlog runs``' detail column); None when it does
    not wait. A memory wait: ``waiting for memory retrieval <query id> (resume once the service answers)``;
    a wait on calls: ``waiting for a decision on <undecided call ids> (flightlog pending)``, or, given
    ``answered_in`` (where a runtime that decides its own waits answers them, a LangGraph interrupt's
    :func:`flightlog.kernel.approvals.resume_hint`, as ``pending`` says it), ``waiting for a decision on
    <call ids> (answered where it runs: <answered_in>)``; a wait an abort closed (the run paused, which
    ``pending`` lists too, :func:`flightlog.kernel.approvals.paused_waits`): ``waiting for a decision on
    <call ids> (paused by an abort: flightlog pending <session> lists it; <resume> continues the run)``; a
    wait whose every call is decided: ``decided <call ids>; waiting for: <waits_for> (flightlog pending
    <session> lists them)``, what ``pending`` says of it; else its reason.

    Args:
        state: The folded run.
        answered_in: Where a runtime that decides its own waits answers them, or None.
        resume: The command that continues the run tree
            (:func:`flightlog.kernel.approvals.resume_command`, ``--spec MODULE:ATTR`` when the run recorded
            no agent spec); default ``flightlog resume <session>``.
        waits_for: What a run whose every call is decided waits for, as ``pending`` says it
            (:func:`flightlog.kernel.approvals.continue_hint`); default ``resume``.
    """
    if state.phase != "suspended" or state.suspension is None:
        return None
    query = waiting_query(state)
    if query is not None:
        return f"waiting for memory retrieval {query} (resume once the service answers)"
    sid = state.session_id
    resume = resume or f"flightlog resume {sid}"
    calls = state.suspension.pending_calls
    undecided = [call for call in calls if call in state.gates]
    if calls and not undecided and answered_in is None:  # every gate decided: the run waits for a resume
        return (
            f"decided {', '.join(calls)}; waiting for: {waits_for or resume} "
            f"(flightlog pending {sid} lists them)"
        )
    if undecided and state.wait_closed() and answered_in is None:
        return (
            f"waiting for a decision on {', '.join(undecided)} (paused by an abort: flightlog pending {sid} "
            f"lists it; {resume} continues the run)"
        )
    if calls:
        where = "flightlog pending" if answered_in is None else f"answered where it runs: {answered_in}"
        return f"waiting for a decision on {', '.join(undecided or calls)} ({where})"
    return f"waiting: {state.suspension.reason}"


def _asked(
    state: KernelState | None, query_id: str, policy: MemoryPolicy
) -> tuple[int, tuple[MemoryKind, ...]]:
    """``(requested_k, kinds)`` of the asynchronous query ``query_id`` as the ledger has them: ``requested_k``
    from its ``memory_queried`` (the ``n``-th with ``requires_async_response`` of its turn, ``n`` from the id
    ``<run_id>:turn-<turn>:memory-<n>``), ``kinds`` from the arguments of the turn's ``memory_query`` call
    with that query text. Without a state or a match: ``policy.top_k`` (no query asks for more) and any kind.
    """
    head, _, number = query_id.rpartition(":memory-")
    turn_text = head.rpartition(":turn-")[2]
    if state is None or not number.isdigit() or not turn_text.isdigit():
        return policy.top_k, ()
    turn, n = int(turn_text), int(number)
    asked: list[MemoryQueried] = []
    calls: list[ToolCall] = []
    for _seq, event in state.events:
        if isinstance(event, CheckpointTaken) and event.turn == turn:
            asked, calls = [], []  # a retried turn submits its queries again, numbered from 1
        elif isinstance(event, MemoryQueried) and event.turn == turn and event.requires_async_response:
            asked.append(event)
        elif isinstance(event, LlmCompleted) and event.turn == turn:
            calls = [c for c in event.message.tool_calls if c.name == MEMORY_QUERY]
    if not 1 <= n <= len(asked):
        return policy.top_k, ()
    queried = asked[n - 1]
    for candidate in calls:
        try:
            arguments = json.loads(candidate.arguments or "{}")
        except ValueError:
            continue
        if isinstance(arguments, dict) and arguments.get("query") == queried.query:
            named = arguments.get("kinds") or []
            return queried.requested_k, tuple(MemoryKind(k) for k in named if k in _KINDS)
    return queried.requested_k, ()


def collect(
    store: Store,
    policy: MemoryPolicy | None,
    query_id: str,
    session_id: str,
    state: KernelState | None = None,
) -> list[Event] | None:
    """The ``memory_retrieval_result`` of an asynchronous query once the service has it (followed by a
    ``memory_already_in_history`` when it left hits out), else None.

    Hits are checked as upstream's ``MemoryQuery::validate_hits`` does (UPSTREAM.md §8): at most the
    ``requested_k`` the run's ``memory_queried`` recorded, the policy's scope, unique non-empty ids, scores
    finite in [0, 1], kinds among those the ``memory_query`` call asked for (any when it named none); and,
    flightlog's own rule, each text within ``policy.max_content_bytes`` (the bound a ``memory_write`` obeys:
    a service cannot put into the history what the run could not have written). As upstream's
    ``validate_hits`` does, one bad hit rejects the whole answer: nothing is recorded, the run stays
    suspended on the query, and the error names the hit and the rule, so the service can answer again and
    the run be resumed (or the run aborted). Their texts are stored as salted artifacts and the ledger gets
    the handles.
    As for an in-store ``memory_query``, a hit whose memory (same record id, kind and text) is already in
    ``state``'s current history, such as one injected at run start, is left out (its text is not stored),
    so the model is not given the same memory twice; every hit is checked all the same.

    Raises:
        KernelError: no service to ask (the agent lost its ``memory.service``), or invalid hits.
    """
    from .errors import KernelError

    if policy is None or policy.service is None:
        raise KernelError(f"the run waits for memory query {query_id} but the agent has no memory service")
    hits = policy.service.poll(query_id)
    if hits is None:
        return None
    requested_k, kinds = _asked(state, query_id, policy)
    if len(hits) > requested_k:
        raise KernelError(
            f"memory query {query_id}: the service answered {len(hits)} hits; the query asked for at most"
            f" {requested_k}"
        )
    seen: set[str] = set()
    stored: list[MemoryRecall] = []
    above: list[str] = []
    shown = _shown_texts(state) if state is not None else set()
    for hit in hits:
        rid = hit.record.record_id
        if kinds and hit.record.kind not in kinds:
            raise KernelError(
                f"memory recall {rid} is of kind {hit.record.kind.value!r}; the query asked for"
                f" {', '.join(k.value for k in kinds)}"
            )
        size = len(hit.record.content.encode("utf-8"))
        if size > policy.max_content_bytes:
            raise KernelError(
                f"memory recall {rid} content is {size} bytes; at most {policy.max_content_bytes}"
                " (the policy's max_content_bytes)"
            )
        if hit.record.scope != policy.scope:
            raise KernelError(f"memory recall {rid} escaped the requested scope")
        if not rid or rid in seen:
            raise KernelError("memory recall record_id must be non-empty and unique")
        if not 0.0 <= hit.score <= 1.0:
            raise KernelError(f"memory recall {rid} score must be finite and between zero and one")
        seen.add(rid)
    for hit in hits:
        if (
            memory_message(hit.record.record_id, hit.record.kind.value, hit.record.content).text_content()
            in shown
        ):
            above.append(hit.record.record_id)  # already in the conversation (the in-store rule, in_history)
            continue
        handle = put_personal_artifact(
            store, hit.record.content.encode("utf-8"), MEDIA_TYPE, session_id=session_id
        )
        stored.append(hit.model_copy(update={"record": hit.record.model_copy(update={"content": handle})}))
    turn = state.turn if state is not None else 0
    return [MemoryRetrievalResult(hits=stored), *already_in_history(turn, above)]
