"""The conversation view (``/conversation``): a session's replayed transcript as a conversation, and a diff.

``GET /conversation?id=SESSION&at=SEQ&from=SEQ&before=INDEX``:

* the transcript as of ``at`` (inclusive; the head when absent), folded by the one replay fold
  (:class:`flightlog.replay.Rebuilder`, what ``flightlog replay`` and the kernel use; archives loaded
  by :func:`flightlog.sessions.archive_loader`), each part cut at :data:`PART_BYTES`; folded on from the
  nearest prefix a :class:`FoldCache` kept (read under the verification the page shows, so never before it);
* drawn :data:`MAX_MESSAGES` rows at a time: the latest, or the last before message index ``before``,
  with links to the earlier and the later rows;
* shown as turns: user, assistant and system messages; thinking collapsed; each tool call beside the
  result the history holds for it (the ``tool`` message answering it is not shown again); images; and,
  from the events up to ``at`` (replay does not carry them), each call's denial (``tool_denied``), its
  approval gate (``tool_gated``) and who decided it (``Custom("approval_decision")``); above them, folded,
  the system prompt the model had as of ``at`` (the last ``run_started.system_prompt``: the kernel sends
  it beside the history, so it is not one of the messages);
* with ``from``: the message-level diff from the transcript at ``from`` to the one at ``at``. A message
  is identified by the seq of the event that put it in the history and its position among that
  event's messages (so a compaction shows its archived messages *removed* and its summary *added*, a
  rollback the truncated tail *removed*, an in-place rewrite the message *changed*); the two key
  sequences are aligned with :class:`difflib.SequenceMatcher`.

A session that fails verification (:func:`flightlog.web.views.verification`, the session page's check,
reused while the session's head and ledger mark hold, up to 30 s: :class:`flightlog.web.views.VerificationCache`;
the page says when the check it shows was made, ``verified HH:MM:SS UTC (Ns ago)``, and when it is a kept
one) says so above the transcript, naming the first divergent seq, and marks each message, and each call's result,
that an event found divergent put in the history.

The page also lists the events that rewrote the history (``compressed``, ``rollbacked``,
``context_renewed``), each linked to the diff of what it changed (``from = seq - 1``, ``at = seq``).

``GET /api/conversation/image?id=&at=&m=&p=`` serves the image part ``p`` of message ``m`` of the
transcript at ``at``: a ``data:`` URI (base64) or a ``sha256:`` artifact handle whose bytes hash to the
handle (checked on every read), of a raster type in :data:`IMAGE_TYPES` only (never SVG, which can
carry script); the page's Content-Security-Policy (``img-src 'self'``) forbids ``data:`` images, so they
come through this route. Remote (``http(s):``) images are never fetched: the page names them as text.

Every string from the ledger goes through :func:`flightlog.web.views.show` and the autoescaping
templates: text stays text.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import copy
import difflib
import json
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Query, Response
from fastapi.responses import HTMLResponse, PlainTextResponse

from ..encoding import decode_stored
from ..errors import ArtifactIntegrityError, FlightlogError, SessionNotFound
from ..events import Custom, RunStarted, SessionEvent, ToolCompleted, ToolDenied, ToolGated
from ..messages import (
    ImagePart,
    Message,
    RedactedThinkingPart,
    TextPart,
    ThinkingPart,
    ToolCall,
    ToolCallPart,
    ToolResultPart,
)
from ..replay import Rebuilder
from ..runs import SessionFold, SessionHeader, TerminalSummary
from ..sessions import archive_loader, iter_events
from ..store.base import Store
from . import views

if TYPE_CHECKING:
    from .app import _Dashboard

__all__ = [
    "IMAGE_TYPES",
    "MAX_MESSAGES",
    "PART_BYTES",
    "FoldCache",
    "Prefixes",
    "Transcript",
    "conversation",
    "diff_rows",
    "image_bytes",
    "register",
]

PART_BYTES = 8192
"""Cap in UTF-8 bytes of each text, thinking and tool output part (the replay fold's ``max_part_bytes``)."""
MAX_MESSAGES = 200
"""Messages drawn at most on one page (the latest, or those before ``before``; the page links the
earlier and the later ones)."""
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""Media types the image route serves (raster only: an SVG can carry script)."""
DIFF_CONTEXT = 3
"""Unchanged messages a diff shows next to each change (the rest of a run of them is counted, not drawn)."""
HISTORY_KINDS = frozenset({"compressed", "rollbacked", "context_renewed"})
"""Event kinds that rewrite the history (listed with a link to their diff)."""

_DATA_URI = re.compile(r"data:([a-z0-9.+/-]+);base64,(.*)", re.S | re.I)
_HANDLE = re.compile(r"sha256:([0-9a-f]{64})")

Key = tuple[int, int]
"""A message's identity: (seq of the event that put it in the history, position among its messages)."""


@dataclass
class Transcript:
    """The history at one seq.

    Attributes:
        at: The seq it is as of.
        messages: ``(key, message)`` in history order (see :data:`Key`).
        system_prompt: The system prompt the model had as of ``at`` (the last ``run_started``'s
            ``system_prompt``, as :func:`flightlog.replay.system_prompt` gives it), or None.
    """

    at: int
    messages: list[tuple[Key, Message]] = field(default_factory=list)
    system_prompt: str | None = None


@dataclass
class _Fold:
    """What one pass over the events gathers besides the transcripts."""

    head: int = -1
    notes: dict[str, list[str]] = field(default_factory=dict)
    changes: list[dict[str, Any]] = field(default_factory=list)
    ended: TerminalSummary | None = None
    """How the session's latest run ended as of the largest seq folded (the runs read model's fold of the
    same events: :meth:`~flightlog.runs.SessionFold.terminal`); None while it is open (or none began)."""


def _keyed(rebuilder: Rebuilder, at: int, system_prompt: str | None = None) -> Transcript:
    counts: dict[int, int] = {}
    keyed: list[tuple[Key, Message]] = []
    for entry in rebuilder.entries:
        ordinal = counts.get(entry.origin, 0)
        counts[entry.origin] = ordinal + 1
        keyed.append(((entry.origin, ordinal), entry.message))
    return Transcript(at, keyed, system_prompt)


WAITING = "waiting for approval: "
"""A gated call's note while it waits (its gate's reason follows)."""
ASKED = "asked for approval: "
"""The same note once the wait is over: a decision, a denial or the call's result came after the gate."""


def _note(event: SessionEvent, notes: dict[str, list[str]]) -> None:
    """Denials, approval gates and decisions, by call id (what replay leaves out). A gate's note says
    :data:`WAITING` until a decision, a denial or a result of its call follows it, then :data:`ASKED`."""
    if isinstance(event, ToolDenied):
        _answered(notes, event.call_id)
        notes.setdefault(event.call_id, []).append(f"denied: {event.reason}")
    elif isinstance(event, ToolGated):
        notes.setdefault(event.call_id, []).append(f"{WAITING}{event.reason}")
    elif isinstance(event, ToolCompleted):
        for result in event.results:
            _answered(notes, result.call_id)
    elif isinstance(event, Custom) and event.custom_kind == "approval_decision":
        payload = event.payload if isinstance(event.payload, dict) else {}
        call_id = payload.get("call_id")
        if isinstance(call_id, str):
            _answered(notes, call_id)
            verb = "approved" if payload.get("approved") is True else "denied"
            notes.setdefault(call_id, []).append(f"{verb} by {payload.get('responder', '?')}")


def _answered(notes: dict[str, list[str]], call_id: str) -> None:
    """The call's :data:`WAITING` notes said as :data:`ASKED` (its wait is over)."""
    held = notes.get(call_id)
    if held:
        notes[call_id] = [ASKED + n.removeprefix(WAITING) if n.startswith(WAITING) else n for n in held]


def _change(seq: int, event: SessionEvent) -> dict[str, Any]:
    return {"seq": seq, "kind": event.kind, "turn": getattr(event, "turn", "")}


def transcripts(
    store: Store, session_id: str, ats: list[int], *, changes: bool = True, folds: Prefixes | None = None
) -> tuple[dict[int, Transcript], _Fold]:
    """The histories at each seq of ``ats`` (clamped to the head).

    Each is folded from the nearest folded prefix ``folds`` holds for the session (the empty history
    without it), reading only the events after it; the notes (denials, gates, decisions) are those up to
    the largest of ``ats``; with ``changes``, every history rewrite of the session (rows past the largest
    seq are decoded only when their kind is one of :data:`HISTORY_KINDS`).

    Args:
        folds: The session's prefixes to start from and to add to (:meth:`FoldCache.use`).

    Raises:
        SessionNotFound: no such session.
        EventDecodeError: a stored event does not decode (names its seq).
    """
    record = store.get_session(session_id)
    head = record.head_seq
    wanted = sorted({min(max(a, 0), head) for a in ats} if head >= 0 else set())
    found: dict[int, Transcript] = {}
    fold = _Fold(head=head)
    state: _State | None = None
    for seq in wanted:  # ascending: each fold goes on from the last one or from a later kept prefix
        kept = folds.nearest(seq) if folds is not None else None
        if kept is not None and (state is None or kept.seq > state.seq):
            state = kept.fork()
        if state is None:
            state = _State(
                -1,
                Rebuilder(archive_loader(store, session_id), PART_BYTES),
                SessionFold(SessionHeader.of(record)),
            )
        state = _fold_to(store, session_id, seq, folds, state)
        found[seq] = _keyed(state.rebuilder, seq, state.prompt)
        fold.notes, fold.ended = state.notes, state.run.terminal()
    if changes:
        fold.changes = folds.changes(store, session_id) if folds is not None else _changes(store, session_id)
    return {a: found[min(max(a, 0), head)] for a in ats if head >= 0}, fold


@dataclass
class _State:
    """The fold as of ``seq`` (-1: before any event): the history, the run's fold (the runs read model's:
    how its latest run ended), the last system prompt, the notes."""

    seq: int
    rebuilder: Rebuilder
    run: SessionFold
    prompt: str | None = None
    notes: dict[str, list[str]] = field(default_factory=dict)

    def fork(self) -> _State:
        """A copy that later feeds leave this one as it is."""
        notes = {call: list(n) for call, n in self.notes.items()}
        return _State(self.seq, self.rebuilder.fork(), copy.deepcopy(self.run), self.prompt, notes)


def _fold_to(store: Store, session_id: str, at: int, folds: Prefixes | None, state: _State) -> _State:
    """``state`` (fed here, so private to the caller) fed on to ``at`` (<= the head), keeping a copy in
    ``folds`` at every :data:`FoldCache.STRIDE`-th seq on the way."""
    for row, event in iter_events(store, session_id, start=state.seq + 1, stop=at + 1):
        if isinstance(event, RunStarted):
            state.prompt = event.system_prompt  # sent beside the history, not in it (replay.system_prompt)
        state.rebuilder.feed(row.seq, event)
        state.run.feed(row.seq, row.recorded_at_ms, event)
        _note(event, state.notes)
        state.seq = row.seq
        if folds is not None and (row.seq + 1) % FoldCache.STRIDE == 0 and row.seq < at:
            folds.keep(state.fork())
    return state


def _changes(store: Store, session_id: str) -> list[dict[str, Any]]:
    """Every history rewrite of the session (the denormalised kind column picks; the decoded bytes decide)."""
    found = []
    for row in store.read_events(session_id):
        if row.kind in HISTORY_KINDS:
            event = decode_stored(row.event_bytes, seq=row.seq)
            if event.kind in HISTORY_KINDS:
                found.append(_change(row.seq, event))
    return found


class Prefixes:
    """What :class:`FoldCache` keeps for one session under one key: the folds as of every
    :data:`FoldCache.STRIDE`-th seq a request folded past, and the session's history rewrites. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._states: dict[int, _State] = {}
        self._changes: list[dict[str, Any]] | None = None

    def nearest(self, at: int) -> _State | None:
        """The kept prefix with the largest seq <= ``at`` (shared: :meth:`_State.fork` it before feeding)."""
        with self._lock:
            seqs = [seq for seq in self._states if seq <= at]
            return self._states[max(seqs)] if seqs else None

    def keep(self, state: _State) -> None:
        """Keep ``state``, a prefix no one feeds any more."""
        with self._lock:
            self._states.setdefault(state.seq, state)

    def changes(self, store: Store, session_id: str) -> list[dict[str, Any]]:
        """The session's history rewrites (one scan of its rows, then kept)."""
        with self._lock:
            found = self._changes
        if found is None:
            found = _changes(store, session_id)
            with self._lock:
                self._changes = found
        return found


class FoldCache:
    """Folded prefixes of sessions (:class:`Prefixes`), kept in the process, so a move of the conversation
    page's seq slider folds at most ``STRIDE - 1`` events instead of the whole prefix (1.3 s for the 39,000
    events of a 10,000-turn session, measured in the commit that added this).

    Everything kept for a session was read under one key, :meth:`use`'s; a new key drops it. The page keys
    it on the verification it shows (:class:`flightlog.web.views.VerificationCache`'s ``checked_at``: a new
    check whenever the session's head or ledger mark moves, or the kept one is 30 s old), so what the page
    draws was never read before the check shown beside it. A prefix costs one list of pointers to messages
    shared with the others (:meth:`flightlog.replay.Rebuilder.fork`). At most :data:`SIZE` sessions are
    kept (least recently used dropped). Thread-safe: requests fold private copies; two that miss at once
    may both fold.
    """

    STRIDE = 1000
    """Seqs between kept prefixes (the most events a request folds past the nearest one)."""
    SIZE = 8
    """Sessions kept."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: OrderedDict[str, tuple[Any, Prefixes]] = OrderedDict()

    def use(self, session_id: str, key: Any) -> Prefixes:
        """What is kept for ``session_id`` under ``key`` (a fresh :class:`Prefixes` when the key moved)."""
        with self._lock:
            kept = self._kept.get(session_id)
            if kept is None or kept[0] != key:
                kept = self._kept[session_id] = (key, Prefixes())
            self._kept.move_to_end(session_id)
            while len(self._kept) > self.SIZE:
                self._kept.popitem(last=False)
            return kept[1]


# ─── display ───────────────────────────────────────────────────────────────────────────────────


def _pretty_arguments(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
    except ValueError:
        return arguments


def _image(part: ImagePart, href: str | None) -> dict[str, Any]:
    ref = part.ref
    if _DATA_URI.match(ref) or _HANDLE.fullmatch(ref):
        return {"type": "image", "src": href, "text": views.show(part.media_type or "image", 80)}
    return {"type": "image", "src": None, "text": views.show(f"remote image, not loaded: {ref}", 400)}


def _part(part: Any, href: str | None) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": views.show(part.text, PART_BYTES + 100)}
    if isinstance(part, ThinkingPart):
        return {"type": "thinking", "text": views.show(part.thinking, PART_BYTES + 100)}
    if isinstance(part, RedactedThinkingPart):
        return {
            "type": "redacted thinking",
            "text": f"(encrypted by the provider, {len(part.data):,} characters)",
        }
    if isinstance(part, ImagePart):
        return _image(part, href)
    if isinstance(part, ToolResultPart):
        return {
            "type": "tool result",
            "text": views.show(part.output, PART_BYTES + 100),
            "error": bool(part.is_error),
        }
    return {"type": "other", "text": views.show(part, views.TEXT_LIMIT)}


def _calls(message: Message) -> list[ToolCall]:
    calls = list(message.tool_calls)
    calls += [
        ToolCall(id=p.id, name=p.name, arguments=p.arguments)
        for p in message.content
        if isinstance(p, ToolCallPart)
    ]
    return calls


def _image_href(session_id: str, at: int, index: int, part: int) -> str:
    return views.session_href(session_id, at=at, m=index, p=part).replace(
        "/session?", "/api/conversation/image?", 1
    )


def _shorter(note: str, result: ToolResultPart | None) -> str:
    """A denial whose reason is the call's result says so instead of repeating it."""
    if result is not None and note == f"denied: {result.output}":
        return "denied (the reason is the result)"
    return note


def message_view(
    session_id: str,
    at: int,
    index: int,
    key: Key,
    message: Message,
    notes: dict[str, list[str]],
    results: dict[str, tuple[int, ToolResultPart]] | None = None,
) -> dict[str, Any]:
    """One message for display: ``role``, ``name``, ``origin`` (seq), ``parts`` and ``calls`` (each with
    its ``result`` and ``result_origin``, the seq of the event that put it in the history, from
    ``results``: call id -> (that seq, the result); and its ``notes``), every string display-safe.
    ``paired`` says whether results were looked up (None: a diff, which shows ``tool`` messages on their
    own)."""
    parts = []
    for number, part in enumerate(message.content):
        if isinstance(part, ToolCallPart):
            continue
        href = _image_href(session_id, at, index, number) if isinstance(part, ImagePart) else None
        parts.append(_part(part, href))
    calls = []
    for call in _calls(message):
        origin, result = (None, None) if results is None else results.get(call.id, (None, None))
        calls.append(
            {
                "id": views.show(call.id, 120),
                "name": views.show(call.name, 120),
                "arguments": views.show(_pretty_arguments(call.arguments), views.TEXT_LIMIT),
                "result": None if result is None else views.show(result.output, PART_BYTES + 100),
                "result_origin": origin,
                "error": bool(result and result.is_error),
                "notes": [views.show(_shorter(n, result), views.LINE_LIMIT) for n in notes.get(call.id, [])],
            }
        )
    return {
        "index": index,
        "role": message.role,
        "name": views.show(message.name, 120) if message.name else "",
        "origin": key[0],
        "parts": parts,
        "calls": calls,
        "paired": results is not None,
    }


def conversation_rows(
    session_id: str,
    transcript: Transcript,
    notes: dict[str, list[str]],
    limit: int = MAX_MESSAGES,
    before: int | None = None,
) -> tuple[list[dict[str, Any]], int, int | None]:
    """The transcript as conversation rows: the last ``limit`` of those before message index ``before``
    (None: the latest), how many shown rows come before them, and the ``before`` of the next page of later
    rows (None: the rows drawn are the latest; ``-1``: the next page is the latest).

    A ``tool`` message whose every result sits beside its call (an earlier assistant message's) is
    folded into that call; any other result is shown on its own.
    """
    results: dict[str, tuple[int, ToolResultPart]] = {}
    for key, message in transcript.messages:
        if message.role == "tool":
            for part in message.content:
                if isinstance(part, ToolResultPart):
                    results.setdefault(part.call_id, (key[0], part))
    called: set[str] = set()
    shown: list[int] = []
    for index, (_key, message) in enumerate(transcript.messages):
        if not (
            message.role == "tool"
            and message.content
            and all(isinstance(p, ToolResultPart) and p.call_id in called for p in message.content)
        ):
            shown.append(index)
        called.update(c.id for c in _calls(message))
    end = len(shown) if before is None else bisect.bisect_left(shown, before)
    first = max(0, end - limit) if limit else end
    later = None if end >= len(shown) else (shown[end + limit] if end + limit < len(shown) else -1)
    rows = [
        message_view(session_id, transcript.at, i, *transcript.messages[i], notes, results)
        for i in shown[first:end]
    ]
    return rows, first, later


def _diff_ops(old: Transcript, new: Transcript) -> list[tuple[str, int | None, int | None]]:
    """``(status, old index, new index)`` per message of the diff, in history order."""
    matcher = difflib.SequenceMatcher(
        a=[k for k, _ in old.messages], b=[k for k, _ in new.messages], autojunk=False
    )
    ops: list[tuple[str, int | None, int | None]] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for i, j in zip(range(i1, i2), range(j1, j2), strict=True):
                ops.append(("same" if old.messages[i][1] == new.messages[j][1] else "changed", i, j))
            continue
        ops += [("removed", i, None) for i in range(i1, i2)]
        ops += [("added", None, j) for j in range(j1, j2)]
    return ops


def _fold_unchanged(
    ops: list[tuple[str, int | None, int | None]], context: int
) -> list[tuple[str, int | None, int | None]]:
    """Runs of unchanged messages longer than ``2 * context + 1`` cut to ``context`` on each side of
    one ``("skipped", count, None)``."""
    out: list[tuple[str, int | None, int | None]] = []
    run: list[tuple[str, int | None, int | None]] = []
    for op in [*ops, ("end", None, None)]:
        if op[0] == "same":
            run.append(op)
            continue
        first = context if out else 0  # a leading run keeps only what leads into the first change
        last = context if op[0] != "end" else 0
        if len(run) > first + last + 1:
            out += [*run[:first], ("skipped", len(run) - first - last, None), *run[len(run) - last :]]
        else:
            out += run
        run = []
        if op[0] != "end":
            out.append(op)
    return out


def diff_rows(
    session_id: str,
    old: Transcript,
    new: Transcript,
    notes: dict[str, list[str]],
    context: int | None = DIFF_CONTEXT,
) -> list[dict[str, Any]]:
    """The message-level diff from ``old`` to ``new`` (see the module docs), in history order.

    Returns:
        Rows ``{status, old, new}``, ``status`` one of ``same``, ``changed``, ``added``, ``removed``
        (``old``/``new``: :func:`message_view` or None; ``same`` rows carry ``new`` only); with
        ``context``, each run of unchanged messages is cut to ``context`` messages next to a change and
        one ``{status: "skipped", count}`` row for the rest (None keeps every row).
    """
    ops = _diff_ops(old, new)
    if context is not None:
        ops = _fold_unchanged(ops, context)

    def view(t: Transcript, i: int | None) -> dict[str, Any] | None:
        return None if i is None else message_view(session_id, t.at, i, *t.messages[i], notes)

    rows: list[dict[str, Any]] = []
    for status, i, j in ops:
        if status == "skipped":
            rows.append({"status": status, "count": i, "old": None, "new": None})
        else:
            rows.append(
                {"status": status, "old": None if status == "same" else view(old, i), "new": view(new, j)}
            )
    return rows


def conversation(
    store: Store,
    session_id: str,
    at: int | None,
    since: int | None,
    *,
    before: int | None = None,
    folds: Prefixes | None = None,
) -> dict[str, Any]:
    """Everything the page shows (see the module docs), folded from ``folds``' prefixes when given.

    Returns:
        ``head``, ``at``, ``from`` (None without a diff), ``system_prompt`` (the one the model had as of
        ``at``, or None), ``count`` (messages), ``rows`` (conversation rows: the last
        :data:`MAX_MESSAGES` before message index ``before``, the latest when None), ``left_out`` (shown
        rows before them), ``earlier`` (the messages before them, ``count``'s unit: a result drawn
        beside its call is a message of its own; the ``before`` of the earlier page; 0 when none) and
        ``later`` (:func:`conversation_rows`); with ``since``, ``diff``
        (:func:`diff_rows`, unchanged runs folded) and ``summary`` (messages per diff status); and
        ``changes`` (the session's history rewrites with their diff links); ``ended`` (how the session's
        latest run ended as of ``at``, ``outcome`` and ``detail``, None while it is open).

    Raises:
        SessionNotFound: no such session.
        EventDecodeError: a stored event does not decode.
    """
    head = store.get_session(session_id).head_seq
    at_v = head if at is None else min(at, head)
    found, fold = transcripts(store, session_id, [at_v] + ([since] if since is not None else []), folds=folds)
    result: dict[str, Any] = {"head": head, "at": at_v, "from": None, "rows": [], "left_out": 0, "count": 0}
    result["earlier"] = 0
    result["ended"] = None
    result["later"] = None
    result["system_prompt"] = None
    result.update(diff=None, summary={}, changes=[_change_link(session_id, c) for c in fold.changes])
    if at_v < 0:
        return result
    transcript = found[at_v]
    prompt = transcript.system_prompt
    result["system_prompt"] = None if not prompt else views.show(prompt, PART_BYTES + 100)
    result["system_prompt_chars"] = len(prompt or "")
    result["count"] = len(transcript.messages)
    result["ended"] = _ended(fold.ended)
    if since is None:
        rows = conversation_rows(session_id, transcript, fold.notes, MAX_MESSAGES, before)
        result["rows"], result["left_out"], result["later"] = rows
        result["earlier"] = rows[0][0]["index"] if rows[0] else 0  # the messages before the first row drawn
        return result
    ops = _diff_ops(found[since], transcript)
    result["from"] = min(since, head)
    result["summary"] = {
        s: sum(1 for op in ops if op[0] == s) for s in ("same", "changed", "added", "removed")
    }
    result["diff"] = diff_rows(session_id, found[since], transcript, fold.notes)
    return result


def _ended(terminal: TerminalSummary | None) -> dict[str, str] | None:
    """How the run ended as the page says it: ``outcome`` (seed 002's word) and ``detail``
    (:func:`~flightlog.web.views.ended_detail`: "" when it says no more than the outcome), or None while
    it is open."""
    if terminal is None:
        return None
    return {"outcome": terminal.outcome.value, "detail": views.ended_detail(terminal)}


def _change_link(session_id: str, change: dict[str, Any]) -> dict[str, Any]:
    href = views.session_href(session_id, at=change["seq"]).replace("/session?", "/conversation?", 1)
    return {
        **change,
        "kind": views.show(change["kind"], 40),
        "href": f"{href}&from={max(change['seq'] - 1, 0)}",
    }


# ─── images ────────────────────────────────────────────────────────────────────────────────────


def image_bytes(store: Store, part: ImagePart) -> tuple[bytes, str] | None:
    """The bytes and media type of an image part the route may serve, or None (see the module docs).

    A ``data:`` URI must be base64 of an :data:`IMAGE_TYPES` type; an artifact handle must name stored
    bytes of such a type (the part's ``media_type``, else the artifact's).

    Raises:
        ArtifactIntegrityError: the stored bytes do not hash to the handle (altered in the store).
    """
    match = _DATA_URI.fullmatch(part.ref)
    if match is not None:
        media = match.group(1).lower()
        if media not in IMAGE_TYPES:
            return None
        try:
            return base64.b64decode(match.group(2), validate=True), media
        except (binascii.Error, ValueError):
            return None
    handle = _HANDLE.fullmatch(part.ref)
    if handle is None:
        return None
    digest = handle.group(1)
    data = store.get_artifact(digest)  # checked against the digest (ArtifactIntegrityError when altered)
    if data is None:
        return None
    info = store.artifact_info(digest)
    media = (part.media_type or (info.media_type if info is not None else "")).lower()
    return (data, media) if media in IMAGE_TYPES else None


def _image_part(store: Store, session_id: str, at: int, index: int, number: int) -> ImagePart | None:
    found, _fold = transcripts(store, session_id, [at], changes=False)
    transcript = found.get(at)
    if transcript is None or not 0 <= index < len(transcript.messages):
        return None
    content = transcript.messages[index][1].content
    part = content[number] if 0 <= number < len(content) else None
    return part if isinstance(part, ImagePart) else None


def _seq(value: str | None) -> int | None:
    """A seq or index from a query: None when absent; ValueError unless ``0 <= n < 2**53``."""
    if value is None or value == "":
        return None
    if not value.isascii() or not value.isdigit() or len(value) > 16 or int(value) >= 2**53:
        raise ValueError(value)
    return int(value)


def _origins(data: dict[str, Any]) -> set[int]:
    """The seqs of the events that put the drawn messages, and their calls' results, in the history."""
    drawn = [*data["rows"], *(r[side] for r in data["diff"] or () for side in ("old", "new") if r[side])]
    results = {c["result_origin"] for m in drawn for c in m["calls"]}
    return {m["origin"] for m in drawn} | (results - {None})


def register(app: FastAPI, dash: _Dashboard) -> None:
    """Add ``/conversation`` and ``/api/conversation/image`` to the dashboard."""

    folds = FoldCache()

    @app.get("/conversation", response_class=HTMLResponse)
    def conversation_view(
        id: str = "",
        at: str | None = None,
        since: str | None = Query(None, alias="from"),
        before: str | None = None,
    ) -> Response:
        """The transcript at ``at`` as a conversation (a page of it: ``before``); with ``since``, the diff
        since that seq."""
        try:
            at_v, since_v, before_v = _seq(at), _seq(since), _seq(before)
        except ValueError:
            return dash.error(400, "at, from and before must be integers >= 0")
        elsewhere = dash.resolve_page("/conversation", id, {"at": at, "from": since, "before": before})
        if elsewhere is not None:
            return elsewhere
        try:
            # kept while the head and the mark hold, up to 30 s; checked before the fold reads the rows
            verify = dash.verified.check(dash.reader, id, reuse=True)
            prefixes = folds.use(id, verify["checked_at"])
            data = conversation(dash.reader, id, at_v, since_v, before=before_v, folds=prefixes)
        except SessionNotFound:
            return dash.error(404, "no recorded session has this id")
        except FlightlogError as exc:
            return dash.error(409, f"cannot replay: {exc}")
        return dash.page(
            "conversation.html",
            title="Conversation",
            run=views.run_now(dash.reader, id),  # the header's: how the run stands now, on every page
            session_id=id,
            exact_id=views.Exact(id),
            session_href=views.session_href(id),
            data=data,
            verify=verify,
            marked=bool(_origins(data) & verify["marks"].keys()),
        )

    @app.get("/api/conversation/image")
    def conversation_image(id: str = "", at: str = "", m: str = "", p: str = "") -> Response:
        """An image part of the transcript at ``at`` (see the module docs)."""
        if not id:
            return PlainTextResponse(views.missing("id") + "\n", status_code=400)
        try:
            at_v, m_v, p_v = _seq(at), _seq(m), _seq(p)
        except ValueError:
            at_v = None
        if at_v is None or m_v is None or p_v is None:
            return PlainTextResponse("give at, m and p as integers >= 0\n", status_code=400)
        try:
            part = _image_part(dash.reader, id, at_v, m_v, p_v)
            served = None if part is None else image_bytes(dash.reader, part)
        except SessionNotFound:
            return PlainTextResponse("no such session\n", status_code=404)
        except ArtifactIntegrityError as exc:  # altered bytes are never served
            return PlainTextResponse(f"{exc}\n", status_code=409)
        if served is None:
            return PlainTextResponse(
                "no servable image there (remote, missing or not a raster image)\n", status_code=404
            )
        data, media = served
        return Response(data, media_type=media, headers={"Content-Disposition": "inline"})
