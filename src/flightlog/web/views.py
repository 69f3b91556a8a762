"""What the dashboard shows, as plain display-safe dicts built from a store.

Everything here is independent of the web framework: the routes render these dicts with Jinja2 (autoescaped)
and the server-sent events carry them as JSON to ``app.js`` (which only ever sets ``textContent``).

Event content is untrusted. Every string taken from a ledger passes through :func:`show`: cut to a display
limit (the full value stays one click away, as raw JSON), then :func:`visible`, which replaces control,
bidirectional-override, zero-width and tag characters by a visible ``[U+XXXX]`` so text cannot pretend to
be something else on screen. HTML escaping is the renderer's job (Jinja2 autoescape, ``textContent``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import operator
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import islice
from typing import Any, NamedTuple
from urllib.parse import quote, urlencode

from ..encoding import decode_stored
from ..errors import ArtifactIntegrityError, EventDecodeError, FlightlogError, SessionNotFound
from ..events import (
    Custom,
    EntropyAlert,
    EntropySample,
    LlmCompleted,
    RunStarted,
    SessionEvent,
    ToolCompleted,
    ToolDenied,
    ToolGated,
    ToolRequested,
    decode_event,
)
from ..importers.base import TASK_CHARS
from ..kernel.approvals import (
    LANGGRAPH_SOURCE,
    PendingCall,
    abandoned_in_doubt_words,
    continue_hint,
    paused_in_doubt,
    resume_hint,
    session_in_doubt,
    tree_of,
    waiting_calls,
)
from ..kernel.approvals import resume_command as spec_resume
from ..kernel.rowcheck import row_warning, sessions_may_wait
from ..kernel.rowheld import held_by_ledger, held_in, listed_with_held
from ..kernel.state import KERNEL_SOURCE, active_time
from ..live import RunView, list_run_views, live_records, merge, wall_ms
from ..messages import (
    ImagePart,
    Message,
    RedactedThinkingPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from ..narration import narrate, state_word
from ..runs import (
    AgentRunSnapshot,
    RunSource,
    RunState,
    TerminalOutcome,
    TerminalSummary,
    build_tree,
    refine_with_status,
    unlisted_parents,
)
from ..runs.context import PROMPT_PROGRAM_INVOKED, ContextUse
from ..runs.projection import RunNode, Undecodable, context_uses, projection_ready
from ..sessions import created_at
from ..store.base import NOT_A_RUN, RUNNABLE_STATUSES, SessionRecord, Store, StoredEvent
from ..store.links import LINKING_PREFIX, Linked, LinkWalk, linking_refs
from .budget import budget_label

__all__ = [
    "ARTIFACT_PAGE",
    "EVENT_PAGE",
    "QUEUE_PAGE",
    "RAW_PREVIEW",
    "SET_PASS",
    "Exact",
    "PendingCache",
    "Queue",
    "SessionPage",
    "VerificationCache",
    "clip",
    "event_row",
    "not_listed",
    "pending_rows",
    "queue_nav",
    "raw_event",
    "resume_command",
    "run_goal",
    "run_now",
    "run_tree",
    "sanitize",
    "session_goal",
    "session_href",
    "session_page",
    "session_status",
    "show",
    "state_text",
    "unreadable_rows",
    "unreadable_waits",
    "verification",
    "visible",
]

log = logging.getLogger("flightlog.web")

EVENT_PAGE = 300
"""Timeline rows per page."""
ARTIFACT_PAGE = 100
"""Artifacts table rows per page (``artifacts_from=`` pages it)."""

QUEUE_PAGE = 100
"""Sessions that may wait folded and shown per page of the approvals queue (``queue_from=`` pages it)."""
KEEP_DIVERGENCES = 100
"""Divergences the session page's Verification table lists (the first by seq; the rest are counted, and
``flightlog verify SESSION --json`` lists them all)."""
VIA_SHOWN = 3
"""Link-path steps the "linked from" cell spells out; a longer path shows its first and last step and how
many lie between (the cell is bounded, whatever the chain's depth)."""
RAW_PREVIEW = 4000
"""Characters of an event's pretty-printed JSON shown inline (the rest behind "show more")."""
TEXT_LIMIT = 2000
"""Characters of one argument, result, thinking block or message part shown inline."""
LINE_LIMIT = 400
"""Characters of a narrated line or any other one-line field."""
KEEP_CALLS = 200
KEEP_BLOCKS = 100
KEEP_CONTEXT = 20
"""Model calls whose recorded window fill the session page lists (the latest)."""
MAX_RUNS = 500
"""Runs listed at most (the most recently updated)."""

_INVISIBLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f"
    "\ufe00-\ufe0f\ufeff\ufff9-\ufffb\U000e0000-\U000e007f]"
)
_HANDLE = re.compile(rb"(salted:)?sha256:([0-9a-f]{64})")


# ─── text ─────────────────────────────────────────────────────────────────────────────────────


class Exact(str):
    """A string posted back verbatim (a session or call id in a form): rendered escaped but not rewritten
    by :func:`visible`, so a decision names exactly the gate it was shown for."""

    __slots__ = ()


def visible(text: str) -> str:
    """``text`` with control, bidi, zero-width, variation-selector and tag characters shown as ``[U+XXXX]``.

    Tab and newline are kept. Idempotent.
    """
    return _INVISIBLE.sub(lambda m: f"[U+{ord(m.group()):04X}]", text)


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, saying how many more there were."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"… [{len(text) - limit:,} more characters]"


def show(text: object, limit: int = LINE_LIMIT) -> str:
    """Any value as display text: ``str()``, :func:`clip` to ``limit``, then :func:`visible`."""
    return visible(clip(text if isinstance(text, str) else str(text), limit))


def task_text(task: str, source: str, limit: int) -> str:
    """A session's task as display text, cut to ``limit`` characters, saying truthfully what is missing.

    An import records only its source's first :data:`flightlog.importers.base.TASK_CHARS` characters as the
    task (the prompt itself is in the run's ``run_started``), and not how long the prompt was: a task of an
    import that long is marked ``… [cut at import to 200 characters]`` (cut here too when ``limit`` is
    shorter), never with a count of the characters left, which would count only the rest of the stub. Any
    other task is :func:`show` (its count is the true one).
    """
    if not source.startswith("import:") or len(task) < TASK_CHARS:
        return show(task, limit)
    return visible(f"{task[:limit]}… [cut at import to {TASK_CHARS} characters]")


def sanitize(value: Any) -> Any:
    """``value`` (JSON-ready) with :func:`visible` applied to every string in it, keys included."""
    if isinstance(value, Exact):
        return str(value)
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, dict):
        return {visible(str(k)): sanitize(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [sanitize(v) for v in value]
    return value


def missing(name: str) -> str:
    """The message for a request without its session parameter ``name`` (``id`` or ``session``)."""
    return f"missing query parameter {name}= (the session id)"


def api_session(session: str, alias: str) -> tuple[str, str | None]:
    """The session a JSON API request names: its ``session=``, or ``id=`` (the pages' name for it, taken
    as an alias so a page's query pastes onto an API). ``(session id, None)``, or ``("", the 400's
    message)`` when neither is given (:func:`missing`, saying ``id=`` works too) or the two name different
    sessions."""
    if session and alias and session != alias:
        return "", f"session={session!r} and id={alias!r} name different sessions: give one"
    if not (session or alias):
        return "", missing("session") + " (or id=, as the pages name it)"
    return session or alias, None


def session_href(session_id: str, **params: object) -> str:
    """The dashboard URL of a session page (the id is query-encoded, never part of a path)."""
    query = {"id": session_id, **{k: str(v) for k, v in params.items() if v is not None}}
    return "/session?" + urlencode(query, quote_via=quote)


def resume_command(store: Store | None, session_id: str) -> str:
    """How a session continues once its decisions are recorded (:func:`flightlog.kernel.approvals.continue_hint`:
    ``flightlog resume ROOT`` of its run tree, a fleet worker for a fleet run, or the SDK call for an
    integration's session); ``flightlog resume SESSION`` when no store is given."""
    return resume_hint("", session_id) if store is None else continue_hint(store, session_id)


def _clock(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def _pretty(data: bytes) -> str:
    """Stored event JSON, indented, with every invisible character written as its JSON ``\\u`` escape
    (the same JSON value, inert on screen)."""
    try:
        text = json.dumps(json.loads(data), indent=2, ensure_ascii=False)
    except ValueError:
        return visible(data.decode("utf-8", errors="replace"))
    return _INVISIBLE.sub(_json_escape, text)


# ─── runs ─────────────────────────────────────────────────────────────────────────────────────


def _duration(ms: int | None) -> str:
    if ms is None:
        return ""
    return f"{ms / 1000:.1f}s" if ms < 60_000 else f"{ms // 60_000}m{(ms % 60_000) // 1000:02d}s"


def _task(store: Store, run_id: str) -> tuple[str, str] | None:
    """The task and source of the run's session (a session recorded without a task, ``Recorder.create``
    given none: its first ``run_started``'s goal, :func:`ledger_goal`), or None when the run has no
    recorded session (a process entry)."""
    try:
        record = store.get_session(run_id)
    except SessionNotFound:
        return None
    return session_goal(store, record), record.source


def session_goal(store: Store, record: SessionRecord) -> str:
    """What a session is about, as every dashboard view names it: its row's task (what ``flightlog ls``
    lists), else (a session recorded without one, ``Recorder.create`` given none) its first ``run_started``'s
    goal (:func:`ledger_goal`); ``""`` when it has neither. Raw text: callers make it display-safe
    (:func:`task_text`)."""
    return record.task or ledger_goal(store, record.session_id)


def ledger_goal(store: Store, session_id: str) -> str:
    """The ``goal`` of the session's first ``run_started`` (seed 000's wire form), or ``""`` when its
    ledger holds none or that event does not decode (the session's fold fails on it too, and the pages
    name it there). Reads the rows up to that event (a run's is normally its first), decoding only it:
    no fold, so nothing stored (the runs projection, ``FOLD_VERSION``) changes."""
    for row in store.read_events(session_id):
        if row.kind == "run_started":
            try:
                event = decode_event(row.event_bytes, seq=row.seq)
            except EventDecodeError:
                return ""
            return event.goal if isinstance(event, RunStarted) else ""
    return ""


def run_goal(store: Store, run_id: str, limit: int = 160) -> str:
    """The run's goal as the runs tree shows it: its session's task (what ``flightlog ls`` lists; for a
    session recorded without one, its ``run_started``'s goal: :func:`ledger_goal`), display-safe and cut
    to ``limit`` characters (:func:`task_text`); ``""`` for a run with no recorded session (a process
    entry). The seed 002 snapshot carries no goal, so it comes from the ``sessions`` row or the ledger."""
    task = _task(store, run_id)
    return "" if task is None else task_text(*task, limit)


def context_cells(use: ContextUse | None) -> dict[str, str]:
    """Display cells of a run's context use: ``text`` (``2,980/3,800 (78%)``), ``turn``, ``basis``,
    ``window`` and ``model``; all empty when none was recorded (nothing is estimated here)."""
    if use is None:
        return {"text": "", "turn": "", "basis": "", "window": "", "model": ""}
    window = (
        ""
        if use.window_tokens is None
        else f"{use.window_tokens:,} tokens, {use.output_reserve:,} kept for output"
    )
    return {
        "text": use.label(),
        "turn": str(use.turn),
        "basis": show(use.basis, 40),
        "window": window,
        "model": show(use.model or "", 120),
    }


def session_context(store: Store, session_id: str) -> dict[str, str]:
    """:func:`context_cells` of a session's latest recorded context use (from the ledger)."""
    return context_cells(context_uses(store, [session_id]).get(session_id))


def _run_node(
    node: RunNode,
    views: dict[str, RunView],
    waiting: set[str],
    tasks: dict[str, tuple[str, str] | None],
    uses: dict[str, ContextUse],
    warnings: dict[str, str],
    unreadable: dict[str, str],
) -> dict[str, Any]:
    view = views[node.snapshot.run_id]
    s = view.snapshot
    terminal = s.terminal
    liveness = "abandoned" if view.abandoned else "live" if view.live is not None else ""
    return {
        "id": show(s.run_id, 160),
        "href": session_href(s.run_id) if tasks.get(s.run_id) is not None else "",
        "task": task_text(*(tasks.get(s.run_id) or ("", "")), 160),
        "state": s.state.value,
        "source": s.source.value,
        "outcome": terminal.outcome.value if terminal else "",
        "detail": show(state_word(terminal.detail), 200) if terminal and terminal.detail else "",
        "tokens": "" if s.budget.tokens_used is None else str(s.budget.tokens_used),
        "steps": "" if s.budget.steps_taken is None else str(s.budget.steps_taken),
        "duration": _duration(s.budget.duration_ms),
        "budget": budget_label(s.budget),
        "context": context_cells(uses.get(s.run_id))["text"],
        "liveness": liveness,
        "awaiting_resume": s.run_id in waiting,
        "row_warning": show(warnings.get(s.run_id, ""), LINE_LIMIT),
        "unreadable": show(unreadable.get(s.run_id, ""), LINE_LIMIT),
        "unlisted_parent": "",
        "parent_href": "",
        "children": [
            _run_node(child, views, waiting, tasks, uses, warnings, unreadable) for child in node.children
        ],
    }


def run_tree(
    store: Store,
    *,
    state: str | None = None,
    source: str | None = None,
    waiting: set[str] | None = None,
    warnings: dict[str, str] | None = None,
    limit: int = MAX_RUNS,
    marks: Callable[[Collection[str]], tuple[set[str], dict[str, str], dict[str, str]]] | None = None,
    unreadable: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The parent/child tree of runs matching the filters (durable merged with live; newest first).

    A root whose parent the listing leaves out (the filters, ``limit``) carries that parent's id in
    ``unlisted_parent`` and its session page in ``parent_href`` (both ``""`` on every other node); its
    siblings follow it (:func:`flightlog.runs.unlisted_parents`), so the page draws them under one
    ``(parent ID not listed)`` line.

    Args:
        store: The store.
        state: A ``RunState`` value to keep, or None.
        source: A ``RunSource`` value to keep, or None.
        waiting: Session ids whose decisions are recorded and that wait for a resume (flagged).
        warnings: Session id -> the warning its node carries (``row_warning``: a ``sessions`` row that
            contradicts the ledger's wait, :meth:`PendingCache.row_warnings`). A run the row ended while
            its ledger waits is shown in the state its events give (:func:`flightlog.kernel.rowheld.held_by_ledger`),
            under that state's filter too (:func:`flightlog.kernel.rowheld.held_in`).
        limit: At most this many runs.
        marks: Given the listed runs' ids, more ``(waiting, warnings, unreadable)`` to flag
            (:attr:`Queue.marks`: the waits off the approvals queue's page), merged with ``waiting``,
            ``warnings`` and ``unreadable``.
        unreadable: Session id -> the warning its node carries (``unreadable``) because its stored events
            do not decode (:attr:`Queue.unreadable`); filled in place with those ``marks`` finds and with
            the sessions a missing or stale projection's fold leaves out of the tree, or the check of a run
            the row ended (:func:`flightlog.kernel.rowheld.held_by_ledger`) cannot read
            (:func:`not_listed`), so the caller can name every one.

    Raises:
        ValueError: ``state`` or ``source`` is not a seed 002 value.
    """
    # a stale projection is folded, or a run the row ended may wait: the sessions whose events do not decode
    left_out: Undecodable = []
    extra = held_in(store, state, source=source, undecodable=left_out)  # the ledger's runs in state

    def fetch(most: int | None) -> list[RunView]:
        return list_run_views(store, state=state, source=source, limit=most, undecodable=left_out)

    views, _ = listed_with_held(store, fetch, state, extra, limit, undecodable=left_out)  # limit runs listed
    by_id = {v.snapshot.run_id: v for v in views}
    waiting, warnings = set(waiting or ()), dict(warnings or {})
    notes = {} if unreadable is None else unreadable
    notes.update((sid, not_listed(sid, exc)) for sid, exc in left_out)
    if marks is not None:
        more_waiting, more_warnings, more_unreadable = marks(list(by_id))
        waiting |= more_waiting
        warnings.update(more_warnings)
        notes.update(more_unreadable)
    tasks = {run_id: _task(store, run_id) for run_id in by_id}
    uses = context_uses(store, list(by_id))
    rows = []
    for parent, nodes in unlisted_parents(build_tree([v.snapshot for v in views])):
        for node in nodes:  # a child whose parent is left out: drawn under "(parent ID not listed)"
            row = _run_node(node, by_id, waiting, tasks, uses, warnings, notes)
            rows.append(
                row | {"unlisted_parent": show(parent, 160), "parent_href": session_href(parent)}
                if parent
                else row
            )
    return rows


def not_listed(session_id: str, error: EventDecodeError) -> str:
    """The warning for a session a fold of the ledgers left out of a runs listing (what ``flightlog runs``
    prints on a stale projection): ``error`` names the seq that does not decode."""
    return f"not listed: {error} (see `flightlog verify {session_id}`)"


def unreadable_waits(session_id: str, error: str) -> str:
    """The warning for a session whose waits cannot be folded (what ``flightlog pending`` prints):
    ``error`` names the seq that does not decode."""
    return f"its waits cannot be read: {error} (see `flightlog verify {session_id}`)"


def unreadable_rows(unreadable: dict[str, str]) -> list[dict[str, str]]:
    """The dashboard's list of sessions it cannot fully read (session id -> warning), sorted by id: each
    ``session``, ``href`` (its session page) and ``warning``."""
    return [
        {"session": show(sid, 160), "href": session_href(sid), "warning": show(text, LINE_LIMIT)}
        for sid, text in sorted(unreadable.items())
    ]


STATES: tuple[str, ...] = tuple(s.value for s in RunState)
SOURCES: tuple[str, ...] = tuple(s.value for s in RunSource)
OUTCOMES: tuple[str, ...] = tuple(o.value for o in TerminalOutcome)
"""Seed 002 ``TerminalOutcome``'s values: the ``outcome=`` filter of ``/runs`` (``flightlog runs --outcome``'s)."""


# ─── approvals ────────────────────────────────────────────────────────────────────────────────


SET_PASS = 200
"""Rows missing :class:`PendingCache` past which one store-wide pass decides which may wait (the events
holding the wait mark, read from the store's partial index of them) instead of reads per session (bench/runs.py's 100,000-run SQLite store, under cProfile:
the pass 0.7 s, the reads per session 6.4 s); also the count of sessions that may wait up to which the
queue folds them all (then its count is exact)."""


SessionKey = tuple[str, str, int, str]
"""``(session_id, status, head_seq, head_hash)``: :meth:`~flightlog.store.base.Store.session_keys`' rows."""
LedgerMark = tuple[int, int, str, int]
""":meth:`~flightlog.store.base.Store.ledger_marks`' values: what a session's ``events`` rows say."""

_FIRST = operator.itemgetter(0)


class _Found(NamedTuple):
    """The sessions one :meth:`PendingCache.queue` call pages: ``keys`` in listing order (those that may
    wait; with ``exact``, those folded as waiting), ``before`` of them listed before the page's ``start``,
    ``at`` their positions in the listing of every session when known (else :meth:`Store.session_positions`
    gives the few needed), the pass's answer ``may`` (None: none taken) and the folds made."""

    keys: list[SessionKey]
    before: int
    at: list[int] | None
    may: set[str] | None
    exact: bool
    folded: dict[str, list[PendingCall] | None]


class PendingCache:
    """Gates per session whose ledger waits (open ones, and those decided since it suspended), decided as
    ``flightlog pending`` decides them (:func:`flightlog.kernel.approvals.waiting_calls`: from the events,
    never from the row's status alone), refolded only when the session's head or status moves. Thread-safe.

    A cold cache (or one whose last pass found more than :data:`SET_PASS` sessions that may wait) takes the
    store-wide pass and reads the keys of only the sessions it finds (:meth:`Store.session_keys_among`): no
    row per session of the rest. When the last pass found at most :data:`SET_PASS`, the next call lists every
    session's key first, then takes the pass and caches every other session as not waiting; calls after it
    list the keys and fold only the sessions whose key moved, without a pass, while at most
    :data:`SET_PASS` of them miss the cache (a store of few waits polled by the dashboard)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._decided: dict[str, SessionKey] = {}
        """Session id -> the key its answer was decided at (a fold, or the pass's "cannot wait")."""
        self._gates: dict[str, list[PendingCall]] = {}
        """Session id -> its gates, for a session decided as waiting (absent: decided as not waiting)."""
        self._unread: dict[str, str] = {}
        """Session id -> why its gates could not be folded (the error, naming the seq), at its decided key."""
        self._list_keys = False
        """Whether the next call lists every session's key first (the last pass found few that may wait)."""
        self._settled: set[str] = set()
        """Sessions whose cached answer is the pass's "cannot wait" (:meth:`_settle`), not a fold's: a later
        pass that finds one may wait refolds it, whatever its row's key."""
        self._marks: dict[str, LedgerMark | None] = {}
        """Session id -> its ledger's mark (:meth:`Store.ledger_marks`) read before the fold that decided it:
        each call drops the answers whose ledger moved since (:meth:`_recheck`), the row's key or not."""

    def _of(
        self, store: Store, key: SessionKey, may: set[str] | None = None, record: SessionRecord | None = None
    ) -> list[PendingCall] | None:
        """The session's gates (None: no open wait), cached by ``key`` (``Store.session_keys``' tuple); a
        miss reads the row (``record`` when the caller holds it) and folds as ``flightlog pending`` does."""
        sid = key[0]
        with self._lock:
            # a session the pass settled that this call's pass finds may wait: its ledger moved, refold
            if self._decided.get(sid) == key and (may is None or sid not in may or sid not in self._settled):
                return self._gates.get(sid)
        error = None
        mark = None
        try:
            may_wait = None if may is None else sid in may
            row = record or store.get_session(sid)
            mark = store.ledger_marks([sid]).get(sid)  # before the fold: a row added during it moves it
            calls = waiting_calls(store, row, decided=True, may_wait=may_wait)
        except FlightlogError as exc:  # shown as the session's warning (:meth:`unreadable`), and logged
            log.exception("cannot fold the gates of %s", sid)
            calls, error = None, str(exc)
        with self._lock:
            self._decided[sid] = key
            self._marks[sid] = mark
            self._settled.discard(sid)
            if calls is None:
                self._gates.pop(sid, None)
            else:
                self._gates[sid] = calls
            if error is None:
                self._unread.pop(sid, None)
            else:
                self._unread[sid] = error
        return calls

    def unreadable(self, ids: Collection[str]) -> dict[str, str]:
        """Of ``ids``, the sessions whose gates the last fold could not read, each with its warning
        (:func:`unreadable_waits`: the error names the seq)."""
        with self._lock:
            return {sid: unreadable_waits(sid, self._unread[sid]) for sid in ids if sid in self._unread}

    def _settle(self, keys: list[SessionKey], candidates: list[tuple[int, SessionKey]]) -> None:
        """Cache every session of ``keys`` but the ``candidates`` as decided not to wait (what :meth:`_of`
        would cache: the pass proved it, :func:`~flightlog.kernel.approvals.waiting_calls` answers None
        without a read)."""
        settled = dict(zip(map(_FIRST, keys), keys, strict=True))
        for _, k in candidates:
            settled.pop(k[0], None)
        with self._lock:
            self._decided.update(settled)
            self._settled.update(settled)
            for sid in [sid for sid in self._marks if sid in settled]:
                del self._marks[sid]  # the pass read every byte: its answer is the current one
            for sid in [sid for sid in self._gates if sid in settled]:
                del self._gates[sid]
            for sid in [sid for sid in self._unread if sid in settled]:
                del self._unread[sid]

    def _recheck(self, store: Store) -> None:
        """Forget every answer a fold gave whose ledger moved since (:meth:`Store.ledger_marks`, one query
        over those sessions' rows): a row inserted past the recorded head, a row deleted, a re-chain or an
        edited row's bytes leave the ``sessions`` row's key as it was, and must not leave its old answer
        listed. Answers the store-wide pass gave without a fold (:meth:`_settle`) are not rechecked here:
        a later pass that finds such a session may wait refolds it (:meth:`_of`)."""
        with self._lock:
            held = dict(self._marks)
        if not held:
            return
        now = store.ledger_marks(list(held))
        moved = [sid for sid, mark in held.items() if now.get(sid) != mark]
        with self._lock:
            for sid in moved:
                if self._marks.get(sid) == held[sid]:  # not refolded by another thread since
                    self._decided.pop(sid, None)
                    self._gates.pop(sid, None)
                    self._unread.pop(sid, None)
                    del self._marks[sid]

    def _misses(self, keys: list[SessionKey]) -> int:
        """How many of ``keys`` the cache does not hold at that key."""
        with self._lock:
            decided = self._decided
            return (
                sum(map(operator.ne, map(decided.get, [k[0] for k in keys]), keys)) if decided else len(keys)
            )

    def _pass(self, store: Store) -> set[str] | None:
        """The sessions that may wait (:func:`~flightlog.kernel.rowcheck.sessions_may_wait`), or None when
        a row does not decode (then every session is read on its own, so only its session fails)."""
        try:
            return sessions_may_wait(store)
        except FlightlogError:
            log.exception("cannot decide the waits in one pass; reading per session")
            return None

    def _fold_all(self, store: Store, keys: list[SessionKey], at: list[int], may: set[str] | None) -> _Found:
        """``keys`` (at positions ``at``) folded (cached), those waiting kept: an exact answer."""
        folded = {k[0]: self._of(store, k, may) for k in keys}
        kept = [(i, k) for i, k in zip(at, keys, strict=True) if folded[k[0]] is not None]
        return _Found([k for _, k in kept], 0, [i for i, _ in kept], may, True, folded)

    def _listed(self, store: Store) -> _Found:
        """Every session's key (``Store.session_keys``: no metadata decoded), then, when more than
        :data:`SET_PASS` of them miss the cache, the store-wide pass (read after the keys: a session that
        moves in between is folded as it is then, and refolded when its key is next seen moved) and every
        session it rules out cached as not waiting; else every session folded (cached)."""
        keys = store.session_keys()
        may = self._pass(store) if self._misses(keys) > SET_PASS else None
        if may is None:
            return self._fold_all(store, keys, list(range(len(keys))), None)
        candidates = [(i, k) for i, k in enumerate(keys) if k[0] in may or k[1] == "suspended"]
        self._settle(keys, candidates)
        return self._candidates(store, [k for _, k in candidates], [i for i, _ in candidates], may)

    def _lazy(self, store: Store, start: int) -> _Found:
        """The store-wide pass, then the keys of only the sessions it finds and of those whose row says
        ``suspended``, in listing order (:meth:`Store.session_keys_among`, after the pass). The pass
        failing: :meth:`_listed`'s reads per session."""
        may = self._pass(store)
        if may is None:
            keys = store.session_keys()
            return self._fold_all(store, keys, list(range(len(keys))), None)
        before, keys = store.session_keys_among(may, "suspended", start)
        found = self._candidates(store, keys, None, may)
        if found.exact:  # those listed before the page, among the waits kept
            before = sum(1 for k in keys[:before] if found.folded[k[0]] is not None)
        return found._replace(before=before)

    def _candidates(
        self, store: Store, keys: list[SessionKey], at: list[int] | None, may: set[str]
    ) -> _Found:
        """The pass's candidates ``keys`` (listing order; ``at`` their positions when known): all folded,
        and the answer exact, when at most :data:`SET_PASS` of them miss the cache. Sets whether the next
        call lists every key first (:class:`PendingCache`)."""
        self._list_keys = len(keys) <= SET_PASS
        if self._misses(keys) > SET_PASS:
            return _Found(keys, 0, at, may, False, {})
        if at is not None:
            return self._fold_all(store, keys, at, may)
        folded = {k[0]: self._of(store, k, may) for k in keys}
        kept = [k for k in keys if folded[k[0]] is not None]
        return _Found(kept, 0, None, may, True, folded)

    def queue(
        self, store: Store, session_id: str | None = None, *, start: int = 0, limit: int | None = None
    ) -> Queue:
        """The approvals queue of every session (or of ``session_id``): open gates and decided calls by
        session whose ledger waits, and the row warnings; of every session, also the calls in doubt no gate
        lists yet (:attr:`Queue.in_doubt`: :func:`queue_in_doubt`, one indexed read when none is in doubt).

        Paged (``limit`` not None): of the sessions that may wait (:attr:`Queue.total` counts them), in
        :meth:`~flightlog.store.base.Store.list_sessions` order (oldest first), the first ``limit`` whose
        position in that listing is ``start`` or later are folded, and only those; one among them whose
        fold holds no open wait is left out, so a page lists at most ``limit`` sessions. ``start`` is a
        position among all sessions, not among those that may wait, so a page boundary does not move when
        the count changes between requests (exact once the folds are cached). Unpaged: every session.

        Args:
            store: The store.
            session_id: Only this session (``start``/``limit`` ignored).
            start: Position (in the listing of every session) the page starts at (past the end: none).
            limit: Sessions that may wait folded for this page, or None (all).

        Raises:
            SessionNotFound: ``session_id`` is gone.
        """
        paged = limit is not None and session_id is None
        start = max(0, start) if paged else 0
        self._recheck(store)  # what the ledger moved under an unmoved row is folded again
        if session_id is not None:
            r = store.get_session(session_id)
            key: SessionKey = (r.session_id, r.status, r.head_seq, r.head_hash)
            calls = self._of(store, key, record=r)
            kept = [key] if calls is not None else []
            found = _Found(kept, 0, [0] * len(kept), None, True, {session_id: calls})
        else:
            found = self._listed(store) if self._list_keys else self._lazy(store, start)
        keys, may, folded = found.keys, found.may, found.folded
        before = found.before if found.at is None else sum(1 for i in found.at if i < start)
        after = keys[before:]
        page = after[:limit] if paged else after
        for k in page:
            if k[0] not in folded:
                folded[k[0]] = self._of(store, k, may)
        shown = {k[0]: k for k in page}
        waits = {sid: calls for sid in shown if (calls := folded[sid]) is not None}
        by_id = {k[0]: k for k in keys}

        def marks(ids: Collection[str]) -> tuple[set[str], dict[str, str], dict[str, str]]:
            found = {sid: self._of(store, by_id[sid], may) for sid in ids if sid in by_id}
            return (
                {sid for sid, calls in found.items() if calls is not None and all(c.decision for c in calls)},
                {
                    sid: row_warning(sid, by_id[sid][1])
                    for sid, calls in found.items()
                    if calls is not None and by_id[sid][1] not in RUNNABLE_STATUSES
                },
                self.unreadable(found),
            )

        earlier = before - limit if paged and limit and before >= limit else None
        later = before + limit if paged and limit is not None and len(after) > limit else None
        at = self._positions(store, found, [i for i in (earlier, later) if i is not None])
        unread: Undecodable = []
        doubt = [] if session_id is not None else queue_in_doubt(store, unread)
        unreadable = self.unreadable(folded)
        for sid, exc in unread:
            unreadable.setdefault(sid, unreadable_waits(sid, str(exc)))
        return Queue(
            {sid: [c for c in calls if c.decision is None] for sid, calls in waits.items()},
            {sid: [c for c in calls if c.decision is not None] for sid, calls in waits.items()},
            {sid: row_warning(sid, shown[sid][1]) for sid in waits if shown[sid][1] not in RUNNABLE_STATUSES},
            len(keys),
            found.exact,
            before,
            len(page),
            at[earlier] if earlier is not None else (0 if before else None),
            at[later] if later is not None else None,
            marks,
            unreadable,
            doubt,
        )

    @staticmethod
    def _positions(store: Store, found: _Found, indices: list[int]) -> dict[int, int | None]:
        """Index among ``found.keys`` -> that session's position in the listing of every session (None: the
        session is gone since its key was read; the page then has no link that way)."""
        if found.at is not None:
            return {i: found.at[i] for i in indices}
        where = store.session_positions([found.keys[i][0] for i in indices])
        return {i: where.get(found.keys[i][0]) for i in indices}


class Queue(NamedTuple):
    """:meth:`PendingCache.queue`'s answer.

    Attributes:
        suspended: Open gates by session whose ledger waits (a session with none left waits for a resume).
        decided: Calls decided since each waiting session suspended, with who decided (``decided_by``).
        warnings: Sessions whose ledger waits while their ``sessions`` row says an ended status (not
            ``suspended``, ``running`` or ``queued``), each with the display warning ``flightlog pending``
            prints (:func:`flightlog.kernel.rowcheck.row_warning`): the dashboard lists the wait from the
            ledger and says the row contradicts it (``flightlog verify`` reports it as ``row_mismatch``).
        total: Sessions that may wait, across every page. With ``exact`` False an upper bound: the sessions
            whose row says ``suspended`` or whose stored events hold a wait mark not followed by the run's
            end (:func:`~flightlog.kernel.rowcheck.sessions_may_wait`, no fold); a counted session whose
            fold holds no open wait (an ``abort`` closed it) is left off its page. With ``exact`` True
            (every session that may wait folded: at most :data:`SET_PASS` of them missed the cache, or
            every session's key listed and at most :data:`SET_PASS` missed it): the waiting sessions.
        exact: Whether ``total`` counts folded waits (True) or sessions that may wait (False).
        before: Sessions among the ``total`` before this page.
        shown: Sessions among the ``total`` this page covers (those folded; the waits among them listed).
        earlier: ``start`` of the page before this one (None: this is the first).
        later: ``start`` of the page after this one (None: this is the last).
        marks: ``ids -> (waiting for a resume, row warnings, unreadable)`` for any sessions (the run
            tree's), each folded (cached) only when it may wait: a wait off this page is still flagged on
            its run.
        unreadable: Sessions folded for this answer whose stored events do not decode (a tampered or
            corrupt row), each with its warning naming the seq (:func:`unreadable_waits`): their waits are
            not listed, as ``flightlog pending`` passes over them.
        in_doubt: Of a store-wide call (no ``session_id``): the calls in doubt no gate lists yet, of
            abandoned or paused kernel runs (:func:`queue_in_doubt`, every page: they are not paged), as
            ``flightlog pending`` lists them; [] for one session's queue (its page lists its own).
    """

    suspended: dict[str, list[PendingCall]]
    decided: dict[str, list[PendingCall]]
    warnings: dict[str, str]
    total: int
    exact: bool
    before: int
    shown: int
    earlier: int | None
    later: int | None
    marks: Callable[[Collection[str]], tuple[set[str], dict[str, str], dict[str, str]]]
    unreadable: dict[str, str]
    in_doubt: list[PendingCall]


def queue_nav(queue: Queue, href: Callable[[int], str]) -> dict[str, Any]:
    """The queue's paging line: ``total`` (and whether it is ``exact``), the 1-based range of sessions this
    page covers (``first``, ``last``; 0 and 0 when none), ``more`` (sessions after this page) and the links
    ``earlier``/``later`` (``href(start)``; "" at either end)."""
    last = queue.before + queue.shown
    return {
        "total": queue.total,
        "exact": queue.exact,
        "first": queue.before + 1 if queue.shown else 0,
        "last": last,
        "more": queue.total - last,
        "earlier": "" if queue.earlier is None else href(queue.earlier),
        "later": "" if queue.later is None else href(queue.later),
    }


def pending_rows(calls: list[PendingCall], store: Store | None = None) -> list[dict[str, Any]]:
    """Display rows of waiting calls; ``session_id``/``call_id`` stay exact (they are posted back).

    ``answer_in`` is ``""`` for a call the dashboard decides, or, for a LangGraph thread's interrupt (which
    only ``Command(resume=...)`` in the graph answers: :class:`~flightlog.kernel.errors.DecidedByItsRuntime`),
    the call that answers it, shown instead of Approve/Deny (``store`` gives each session's source; without
    it every row is decidable)."""
    sources = {c.session_id: store.get_session(c.session_id).source for c in calls} if store else {}
    return [
        {
            "session_id": Exact(c.session_id),
            "session": show(c.session_id, 120),
            "href": session_href(c.session_id),
            "turn": c.turn,
            "call_id": Exact(c.call_id),
            "call": show(c.call_id, 120),
            "tool": show(c.tool, 120),
            "arguments": show(c.arguments, TEXT_LIMIT),
            "reason": show(c.reason, LINE_LIMIT),
            "kind": c.kind,
            "answer_in": show(resume_hint(source, c.session_id), 200)
            if (source := sources.get(c.session_id, "")) == LANGGRAPH_SOURCE
            else "",
        }
        for c in calls
    ]


def in_doubt_rows(store: Store, calls: list[PendingCall]) -> list[dict[str, Any]]:
    """Display rows of calls in doubt no gate lists (abandoned or paused runs: :func:`queue_in_doubt`,
    the session page's), each ``{session, href, call, said, todo, run}`` in ``flightlog pending``'s words
    (:func:`~flightlog.kernel.approvals.abandoned_in_doubt_words`, naming ``--spec`` for a run that recorded
    no agent spec: :func:`~flightlog.kernel.approvals.resume_command`; ``run`` is ``abandoned`` or ``paused``).

    Raises:
        SessionNotFound: a call's session is gone.
    """
    rows = []
    for c in calls:
        root = c.root_session_id or tree_of(store, c.session_id)[1]
        said, todo = abandoned_in_doubt_words(root, paused=c.run_paused, resume=spec_resume(store, root))
        rows.append(
            {
                "session": show(c.session_id, 120),
                "href": session_href(c.session_id),
                "call": show(f"{c.tool} {c.call_id} (turn {c.turn})", LINE_LIMIT),
                "said": show(said, LINE_LIMIT),
                "todo": show(todo, LINE_LIMIT),
                "run": "paused" if c.run_paused else "abandoned",
            }
        )
    return rows


def queue_in_doubt(store: Store, undecodable: Undecodable) -> list[PendingCall]:
    """The approvals queue's calls in doubt that no gate lists yet, as ``flightlog pending`` lists them: of
    kernel runs killed mid-call (abandoned: :func:`run_view`'s liveness at :func:`wall_ms`) or aborted
    mid-call (paused: :func:`~flightlog.kernel.approvals.paused_in_doubt`), ledger folded only for the
    sessions the ``external_effects_pending`` index names (:meth:`Store.pending_effects`: intents without
    a completion row), so a store of 100,000 runs with none in doubt reads one index range. That table is a
    pre-filter: the fold of the verified events decides what is listed (a pending row whose ledger holds
    the completion lists nothing). A session whose events do not decode is added to ``undecodable``.

    Returns:
        The calls, sessions oldest intent first, ``run_abandoned`` or ``run_paused`` set.
    """
    records = []
    for sid in dict.fromkeys(e.session_id for e in store.pending_effects()):
        try:
            records.append(store.get_session(sid))
        except SessionNotFound:  # an effect row whose session is gone: nothing to fold
            continue
    kernel = [r for r in records if r.source == KERNEL_SOURCE]
    found = paused_in_doubt(store, records=kernel, undecodable=undecodable)
    paused = {c.session_id for c in found}
    for record in kernel:
        sid = record.session_id
        if sid in paused:
            continue
        try:
            view = run_view(store, sid, undecodable=undecodable)
            calls = session_in_doubt(store, sid) if view is not None and view.abandoned else []
        except EventDecodeError as exc:
            undecodable.append((sid, exc))
            continue
        if calls:
            parent, root = tree_of(store, sid, record=record)
            found.extend(
                dataclasses.replace(c, parent_session_id=parent, root_session_id=root if parent else None)
                for c in calls
            )
    return found


def waiting_rows(
    suspended: dict[str, list[PendingCall]],
    decided: dict[str, list[PendingCall]] | None = None,
    store: Store | None = None,
) -> list[dict[str, Any]]:
    """Sessions whose every gate is decided, waiting for ``flightlog resume`` (or their runner), with the
    decisions (``decisions``: "call X approved by NAME", one per decided call)."""
    decided = decided or {}
    return [
        {
            "session": show(sid, 120),
            "href": session_href(sid),
            "command": show(resume_command(store, sid), 200),
            "decisions": [
                show(f"{c.call_id} ({c.tool}) {c.decision} by {c.decided_by}", LINE_LIMIT)
                for c in decided.get(sid, [])
            ],
        }
        for sid, calls in suspended.items()
        if not calls
    ]


# ─── one session ──────────────────────────────────────────────────────────────────────────────


def _decoded(row: StoredEvent) -> tuple[SessionEvent | None, str]:
    try:
        return decode_stored(row.event_bytes, seq=row.seq), ""
    except EventDecodeError as exc:
        return None, str(exc)


def _kind(row: StoredEvent, event: SessionEvent | None) -> str:
    if isinstance(event, Custom):
        return "custom:" + event.custom_kind
    return row.kind


def event_row(
    session_id: str, row: StoredEvent, event: SessionEvent | None, error: str = ""
) -> dict[str, Any]:
    """One timeline row: seq, time, kind, narration, raw JSON preview (with the size of the whole)."""
    pretty = _pretty(row.event_bytes)
    text = narrate(event, session_id) if event is not None else f"undecodable: {error}"
    return {
        "seq": row.seq,
        "time": _clock(row.recorded_at_ms),
        "kind": show(_kind(row, event), 80),
        "text": show(text, LINE_LIMIT),
        "raw": show(pretty, RAW_PREVIEW),
        "raw_size": len(row.event_bytes),
        "more": len(pretty) > RAW_PREVIEW,
        "raw_href": "/api/event?" + urlencode({"session": session_id, "seq": row.seq}, quote_via=quote),
        "replay_href": session_href(session_id, at=row.seq) + "#replay",
    }


def raw_event(store: Store, session_id: str, seq: int) -> str | None:
    """An event's stored JSON, pretty-printed (None when there is no such row)."""
    for row in store.read_events(session_id, start=seq, stop=seq + 1):
        return _pretty(row.event_bytes)
    return None


def _part(part: Any) -> dict[str, str]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": show(part.text, TEXT_LIMIT)}
    if isinstance(part, ThinkingPart):
        return {"type": "thinking", "text": show(part.thinking, TEXT_LIMIT)}
    if isinstance(part, RedactedThinkingPart):
        return {"type": "redacted thinking", "text": f"(opaque, {len(part.data):,} characters)"}
    if isinstance(part, ImagePart):
        return {"type": "image", "text": show(part.ref, 200)}
    if isinstance(part, ToolCallPart):
        return {"type": "tool call", "text": show(f"{part.name} [{part.id}] {part.arguments}", TEXT_LIMIT)}
    if isinstance(part, ToolResultPart):
        flag = " (error)" if part.is_error else ""
        return {"type": "tool result" + flag, "text": show(f"[{part.call_id}] {part.output}", TEXT_LIMIT)}
    return {"type": "part", "text": show(part, TEXT_LIMIT)}


def message_rows(messages: list[Message]) -> list[dict[str, Any]]:
    """Replayed messages for display: role, parts and tool calls, every text cut and made visible."""
    return [
        {
            "index": index,
            "role": message.role,
            "name": show(message.name, 120) if message.name else "",
            "parts": [_part(p) for p in message.content],
            "calls": [show(f"{c.name} [{c.id}] {c.arguments}", TEXT_LIMIT) for c in message.tool_calls],
        }
        for index, message in enumerate(messages)
    ]


@dataclass
class _Call:
    seq: int
    turn: int
    call_id: str
    name: str
    arguments: str
    result: str | None = None
    is_error: bool = False
    note: str = ""


@dataclass
class SessionPage:
    """Everything the session page shows besides replay and verification.

    Attributes:
        session_id: The exact id.
        record: Header fields (display-safe).
        head_seq: Last seq (-1 when empty).
        start: First seq of the timeline window.
        events: Timeline rows of the window.
        tool_calls: The latest tool calls with arguments and results.
        thinking: The latest thinking blocks.
        providers: The latest provider-native payloads (``provider_replay``).
        artifacts: One page (:data:`ARTIFACT_PAGE` rows from ``artifacts_from``) of: the artifacts the
            events reference (handle, size, media type, first seq, state, ``via`` empty), then the artifacts
            only a link inside a linking record's artifacts names (:func:`linked_artifacts`; ``via``: the
            link path, bounded). ``state`` is what the link walk found for every artifact it reached
            (``corrupt``: bytes of another sha256, ``missing``), else what the store says.
        artifacts_from: Index of the first row of ``artifacts`` among all rows.
        artifacts_total: All rows of the table (every page).
        state: The run's state (durable refined by live), when the projection knows it.
        budget: Tokens/steps/duration for the header.
        ended: How the run ended, when its terminal detail says more than its outcome (:func:`session_status`).
        context: The recorded window fill of the latest model calls (:func:`context_cells` each, plus
            ``seq``), oldest first, at most :data:`KEEP_CONTEXT`.
        entropy: The entropy watch's samples, oldest turn first: ``{turn, score (2 decimals), alert}``.
    """

    session_id: str
    record: dict[str, str]
    head_seq: int
    start: int
    events: list[dict[str, Any]] = field(default_factory=list)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    thinking: list[dict[str, Any]] = field(default_factory=list)
    providers: list[dict[str, Any]] = field(default_factory=list)
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    artifacts_from: int = 0
    artifacts_total: int = 0
    state: str = ""
    budget: dict[str, str] = field(default_factory=dict)
    ended: str = ""
    context: list[dict[str, str]] = field(default_factory=list)
    entropy: list[dict[str, Any]] = field(default_factory=list)

    @property
    def at_tail(self) -> bool:
        """True when the window ends at the head (the page then follows new events live)."""
        return self.start + EVENT_PAGE > self.head_seq

    @property
    def next_seq(self) -> int:
        """The seq after the last one shown."""
        return self.events[-1]["seq"] + 1 if self.events else self.start

    @property
    def artifacts_earlier(self) -> str:
        """The URL of the previous page of the Artifacts table ("" on the first)."""
        if not self.artifacts_from:
            return ""
        return session_href(self.session_id, artifacts_from=max(0, self.artifacts_from - ARTIFACT_PAGE))

    @property
    def artifacts_later(self) -> str:
        """The URL of the next page of the Artifacts table ("" on the last)."""
        after = self.artifacts_from + ARTIFACT_PAGE
        return session_href(self.session_id, artifacts_from=after) if after < self.artifacts_total else ""


def _header(store: Store, record: SessionRecord) -> dict[str, str]:
    """The session page's header cells; its task is :func:`session_goal`'s, as the runs list names the run."""
    return {
        "task": task_text(session_goal(store, record), record.source, 600),
        "status": show(state_word(record.status), 60),
        "source": show(record.source, 60),
        **_created(record),
        "head_hash": record.head_hash,
        "parent": show(record.parent_session_id, 160) if record.parent_session_id else "",
        "parent_href": session_href(record.parent_session_id) if record.parent_session_id else "",
    }


def _created(record: SessionRecord) -> dict[str, str]:
    """The header's creation cell: ``created_label`` (``created``, or ``imported`` for an import whose
    transcript gives no zone-aware time) and ``created`` (the time, and the transcript's own zoneless clock
    when it wrote one; :func:`flightlog.sessions.created_at`)."""
    when = _clock(record.created_at_ms) if record.created_at_ms else ""
    basis, clock = created_at(record)
    if basis != "import":
        return {"created_label": "created", "created": when}
    note = f"; the transcript's own clock: {show(clock, 60)}, zone not recorded" if clock else ""
    return {"created_label": "imported", "created": f"{when} (the import time{note})"}


def run_view(
    store: Store, session_id: str, *, undecodable: Undecodable | None = None, held: set[str] | None = None
) -> RunView | None:
    """One run of the runs read model, durable merged with live state (None: not in the read model, or its
    state unknown: the row's status ended it and its stored events, read to decide whether its ledger waits,
    do not decode, then appended to ``undecodable``; :func:`flightlog.kernel.rowheld.held_by_ledger`).
    ``held``, when given, gets ``session_id`` when the run is shown in the state its ledger gives, not the
    end its row's status gave.

    Raises:
        EventDecodeError: that read fails and ``undecodable`` is None (names the seq).
    """
    if not projection_ready(store):
        return None
    row = store.get_run_rows([session_id]).get(session_id)
    if row is None or row.state == NOT_A_RUN:  # a session that holds no run has no run state
        return None
    durable = refine_with_status(AgentRunSnapshot.model_validate_json(row.snapshot), row.session_status)
    view = merge(
        durable, live_records(store).get(session_id), now_ms=wall_ms(), last_durable_ms=row.updated_at_ms
    )
    kept, put_back = held_by_ledger(store, [view], undecodable=undecodable)  # its open wait outranks the row
    if held is not None:
        held |= put_back
    return kept[0] if kept else None


def session_status(
    store: Store, session_id: str, *, undecodable: Undecodable | None = None
) -> tuple[str, dict[str, str], str]:
    """The run's state (durable refined by live state; a terminal one with its outcome, as the runs list
    shows it: ``terminal · interrupted``; "" when unknown), its budget cells and how it ended.
    ``undecodable`` as :func:`run_view` takes it.

    Returns:
        ``(state, cells, ended)``: ``cells`` maps ``tokens``, ``steps``, ``duration`` to their text;
        ``ended`` is a terminal run's ``detail`` (seed 002 ``TerminalSummary.detail``, what its ledger says
        it ended with: ``failed: provider_failure: <the provider's error>``, at most 120 characters) when it
        says more than the outcome word, else "".

    Raises:
        EventDecodeError: as :func:`run_view` raises it.
    """
    view = run_view(store, session_id, undecodable=undecodable)
    if view is None:  # no run (a session that holds none, or the projection is stale): no cells known
        return "", {"tokens": "", "steps": "", "duration": ""}, ""
    b = view.snapshot.budget
    terminal = view.snapshot.terminal
    outcome = terminal is not None and view.snapshot.state.is_terminal()
    state = state_text(view)
    cells = {
        "tokens": "" if b.tokens_used is None else str(b.tokens_used),
        "steps": "" if b.steps_taken is None else str(b.steps_taken),
        "duration": _budget_time(store, session_id, b.duration_ms, undecodable),
    }
    return state, cells, ended_detail(terminal) if outcome else ""


def run_now(store: Store, session_id: str) -> dict[str, str] | None:
    """The run's state now (as of the session's head, not of a page's seq), for a page header.

    Returns:
        None when the session holds no run the read model knows (or its state is unknown: its events do not
        decode, which the page's fold names); else ``state`` (:func:`state_text`), and for a terminal run
        ``outcome`` (seed 002's word), ``detail`` (:func:`ended_detail`) and ``ended_at`` (``YYYY-MM-DD
        HH:MM:SS.mmm`` UTC, "" when the run's end recorded no time); all "" for a run still open.
    """
    view = run_view(store, session_id, undecodable=[])
    if view is None:
        return None
    terminal = view.snapshot.terminal if view.snapshot.state.is_terminal() else None
    ended_at = terminal.ended_at_ms if terminal is not None else None
    return {
        "state": state_text(view),
        "outcome": terminal.outcome.value if terminal is not None else "",
        "detail": ended_detail(terminal),
        "ended_at": _clock(ended_at) if ended_at is not None else "",
    }


def state_text(view: RunView) -> str:
    """A run's state as every dashboard page writes it: the seed 002 state, a terminal run's outcome after
    `` · `` (``terminal · interrupted``), `` (abandoned)`` after a run whose heartbeat lapsed
    (``running (abandoned)``), as ``flightlog runs`` prints it."""
    s = view.snapshot
    outcome = f" · {s.terminal.outcome.value}" if s.terminal and s.state.is_terminal() else ""
    return s.state.value + outcome + (" (abandoned)" if view.abandoned else "")


def ended_detail(terminal: TerminalSummary | None) -> str:
    """A terminal run's ``detail`` as the pages show it (:func:`~flightlog.narration.state_word`,
    display-safe, at most :data:`LINE_LIMIT` characters) when it says more than the outcome word, else
    ``""`` (none, or only the outcome again)."""
    if terminal is None or not terminal.detail or state_word(terminal.detail) == terminal.outcome.value:
        return ""
    return show(state_word(terminal.detail), LINE_LIMIT)


def _budget_time(
    store: Store, session_id: str, elapsed_ms: int | None, undecodable: Undecodable | None
) -> str:
    """The time cell of a run's budget row. A kernel run's wall-clock budget counts active time only
    (:func:`~flightlog.kernel.state.active_time`; not the time suspended, waiting for a human or dead
    after a crash), so its cell shows that, against its limit when one is recorded, then the elapsed time
    (the read model's ``duration_ms``, first event to the end): ``active 1.2s of 1m00s · elapsed 29.4s``.
    Any other run: its elapsed time (``29.4s``). When a row the limit is read from does not decode, the
    cell says the active time is unknown and the error goes to ``undecodable`` (raised when it is None).
    """
    elapsed = f"elapsed {_duration(elapsed_ms)}" if elapsed_ms is not None else ""
    if store.get_session(session_id).source != KERNEL_SOURCE:
        return _duration(elapsed_ms)
    try:
        active = active_time(store, session_id)
    except EventDecodeError as exc:
        if undecodable is None:
            raise
        undecodable.append((session_id, exc))
        return " · ".join(["active time unknown (an event does not decode)", *([elapsed] if elapsed else [])])
    limit = f" of {_duration(active.limit_ms)}" if active.limit_ms is not None else ""
    return " · ".join([f"active {_duration(active.used_ms)}{limit}", *([elapsed] if elapsed else [])])


ARTIFACT_STATES = {"present": "present and intact", "corrupt": "digest mismatch"}
"""How the Artifacts table words a digest check's result (:func:`_artifact`; the link walk's ``present`` and
``corrupt``); ``missing``, ``erased`` and ``unchecked`` (a store without salted artifacts) as they are."""


def _artifact(store: Store, salted: bool, digest: str, seq: int, *, check: bool = True) -> dict[str, Any]:
    """One row of the Artifacts table: its metadata, and its state from the digest check (``check``: the bytes
    read and hashed against the handle, as every reader does: ``present and intact``, ``digest mismatch``,
    ``missing``; a salted one gone with its erasure record: ``erased``). ``check=False``: the caller sets the
    state (the link walk hashed it already)."""
    handle = ("salted:" if salted else "") + "sha256:" + digest
    row: dict[str, Any] = {
        "handle": handle,
        "seq": seq,
        "size": "",
        "media_type": "",
        "state": "missing",
        "via": "",
    }
    try:
        if salted:
            info = store.salted_artifact_info(digest)
            if info is None and store.erasure(digest) is not None:
                row["state"] = "erased"
        else:
            info = store.artifact_info(digest)  # type: ignore[assignment]
    except NotImplementedError:
        row["state"] = "unchecked"
        return row
    if info is None:
        return row
    row.update(size=f"{info.size_bytes:,}", media_type=show(info.media_type, 80))
    row["state"] = _digest_state(store, salted, digest) if check else ARTIFACT_STATES["present"]
    return row


def _digest_state(store: Store, salted: bool, digest: str) -> str:
    """The state of a stored artifact's bytes: read and hashed against its handle (the store's checked
    reads); ``missing`` when it went between the metadata and the bytes."""
    try:
        found = store.get_salted_artifact(digest) if salted else store.get_artifact(digest)
    except ArtifactIntegrityError:
        return ARTIFACT_STATES["corrupt"]
    return ARTIFACT_STATES["present"] if found is not None else "missing"


def session_page(
    store: Store, session_id: str, *, start: int | None = None, artifacts_from: int = 0
) -> SessionPage:
    """Fold a session once for its page: the timeline window and the latest calls, thinking, payloads.

    Args:
        store: The store.
        session_id: The exact session id.
        start: First seq of the timeline window (None: the last :data:`EVENT_PAGE` events).
        artifacts_from: First row of the Artifacts table shown (:data:`ARTIFACT_PAGE` rows from it; past
            the end: the last page).

    Raises:
        SessionNotFound: no such session.
    """
    record = store.get_session(session_id)
    head = record.head_seq
    if start is None:
        start = max(0, head - EVENT_PAGE + 1)
    start = max(0, min(start, max(head, 0)))
    page = SessionPage(session_id, _header(store, record), head, start)
    # a run the row ended whose events do not decode: state unknown (the timeline names the seq)
    page.state, page.budget, page.ended = session_status(store, session_id, undecodable=[])
    calls: OrderedDict[str, _Call] = OrderedDict()
    thinking: list[dict[str, Any]] = []
    providers: list[dict[str, Any]] = []
    handles: dict[tuple[bool, str], int] = {}
    linking: dict[str, int] = {}
    for row in store.read_events(session_id):
        for match in _HANDLE.finditer(row.event_bytes):
            handles.setdefault((bool(match.group(1)), match.group(2).decode("ascii")), row.seq)
        if row.event_bytes.startswith(LINKING_PREFIX):
            for digest in linking_refs(row.event_bytes):
                linking.setdefault(digest, row.seq)
        event, error = _decoded(row)
        if start <= row.seq < start + EVENT_PAGE:
            page.events.append(event_row(session_id, row, event, error))
        if event is not None:
            _fold(row.seq, event, calls, thinking, providers)
            _context(row.seq, event, page.context)
            _entropy(event, page.entropy)
    page.tool_calls = [
        {
            "seq": c.seq,
            "turn": c.turn,
            "call_id": show(c.call_id, 120),
            "name": show(c.name, 120),
            "arguments": show(c.arguments, TEXT_LIMIT),
            "result": None if c.result is None else show(c.result, TEXT_LIMIT),
            "is_error": c.is_error,
            "note": show(c.note, LINE_LIMIT),
        }
        for c in calls.values()
    ]
    page.context = page.context[-KEEP_CONTEXT:]
    page.thinking = thinking[-KEEP_BLOCKS:]
    page.providers = providers[-KEEP_BLOCKS:]
    _artifact_page(store, page, handles, linking, max(0, artifacts_from))
    return page


def _artifact_page(
    store: Store, page: SessionPage, handles: dict[tuple[bool, str], int], linking: dict[str, int], first: int
) -> None:
    """Fill ``page.artifacts`` with the rows ``first`` .. ``first + ARTIFACT_PAGE`` of the table (none past
    its end): the handles events name, then what only links name (:func:`linked_artifacts`), each row's
    state the walk's hash result where it reached the artifact. Rows outside the page are counted, not
    built."""
    end = first + ARTIFACT_PAGE
    named = {digest for salted, digest in handles if not salted}
    window = (first - len(handles), end - len(handles))
    linked = linked_artifacts(store, linking, named, window=window) if linking else LinkedRows(0, {}, [])
    rows = [
        _artifact(store, salted, digest, seq)
        for (salted, digest), seq in islice(handles.items(), first, min(end, len(handles)))
    ]
    for row in rows:
        if not row["handle"].startswith("salted:"):
            walked = linked.states.get(row["handle"].removeprefix("sha256:"))
            row["state"] = row["state"] if walked is None else ARTIFACT_STATES.get(walked, walked)
    page.artifacts = rows + linked.rows
    page.artifacts_from, page.artifacts_total = first, len(handles) + linked.count


@dataclass
class LinkedRows:
    """What :func:`linked_artifacts` found.

    Attributes:
        count: Artifacts only links name (no event), all of them.
        states: The walk's result for each artifact an event names that it did not find ``present``
            (sha256 hex -> ``missing`` or ``corrupt``).
        rows: The rows of the requested window, in the order reached (:func:`linked_artifacts`).
    """

    count: int
    states: dict[str, str]
    rows: list[dict[str, Any]]


def linked_artifacts(
    store: Store, roots: dict[str, int], named: set[str], *, window: tuple[int, int] | None = None
) -> LinkedRows:
    """Walk the artifacts reached through links (:class:`~flightlog.store.links.LinkWalk` from ``roots``,
    sha256 hex -> first seq of the linking record naming it) and keep: the walk's state for each one an
    event names (``named``) that is not present, the number reached that no event names, and rows for
    those, in the order reached, within ``window`` (``(first, end)``: indices among them, end exclusive;
    None: all): ``handle``, ``seq`` (the record's), ``size``, ``media_type``, ``state`` (the walk's hash
    result as :data:`ARTIFACT_STATES` words it: ``present and intact``, ``missing`` or ``digest mismatch``)
    and ``via``: how it was reached, from the record's
    artifact down to the one linking to it (short handles joined by arrows; past :data:`VIA_SHOWN` steps
    the first and the last, with the number between: bounded, whatever the depth).

    Memory: the walk's (one batch of contents, one parent pointer per artifact reached) plus a depth and a
    root per artifact reached and the window's rows."""
    walk = LinkWalk(store, roots)
    lo, hi = window if window is not None else (0, -1)
    depth: dict[str, int] = {}
    root: dict[str, str] = {}
    states: dict[str, str] = {}
    rows: list[dict[str, Any]] = []
    count = 0
    for item in walk:
        if item.parent is None:
            depth[item.digest], root[item.digest] = 0, item.digest
        else:
            depth[item.digest], root[item.digest] = depth[item.parent] + 1, root[item.parent]
        if item.digest in named:
            if item.state != "present":
                states[item.digest] = item.state
            continue
        if lo <= count and (hi < 0 or count < hi):
            row = _artifact(store, False, item.digest, item.seq, check=False)  # the walk hashed it
            if item.state != "present":
                row["state"] = ARTIFACT_STATES.get(item.state, item.state)
            row["via"] = _via(walk, item, depth, root)
            rows.append(row)
        count += 1
    return LinkedRows(count, states, rows)


def _via(walk: LinkWalk, item: Linked, depth: dict[str, int], root: dict[str, str]) -> str:
    """The "linked from" cell of ``item``: its link path (:meth:`LinkWalk.path`), bounded."""
    if item.parent is None:
        return ""
    steps = depth[item.digest]  # artifacts on the path, the root through the parent
    if steps <= VIA_SHOWN:
        return " → ".join(f"sha256:{d[:12]}…" for d in walk.path(item.digest))
    between = steps - 2
    return f"sha256:{root[item.digest][:12]}… → ({between} more) → sha256:{item.parent[:12]}…"


def _entropy(event: SessionEvent, samples: list[dict[str, Any]]) -> None:
    """Collect ``entropy_sample`` scores and mark the turns whose sample alerted."""
    if isinstance(event, EntropySample):
        samples.append({"turn": event.turn, "score": f"{event.score:.2f}", "alert": False})
    elif isinstance(event, EntropyAlert) and samples and samples[-1]["turn"] == event.turn:
        samples[-1]["alert"] = True


def _fold(
    seq: int,
    event: SessionEvent,
    calls: OrderedDict[str, _Call],
    thinking: list[dict[str, Any]],
    providers: list[dict[str, Any]],
) -> None:
    if isinstance(event, ToolRequested):
        for c in event.calls:
            calls[c.id] = _Call(seq, event.turn, c.id, c.name, c.arguments)
            calls.move_to_end(c.id)
        while len(calls) > KEEP_CALLS:
            calls.popitem(last=False)
    elif isinstance(event, ToolCompleted):
        for result in event.results:
            call = calls.get(result.call_id)
            if call is not None:
                call.result, call.is_error = result.output, result.is_error
    elif isinstance(event, ToolDenied | ToolGated):
        call = calls.get(event.call_id)
        if call is not None:
            call.note = (
                f"denied: {event.reason}" if isinstance(event, ToolDenied) else f"gated: {event.reason}"
            )
    elif isinstance(event, LlmCompleted):
        for part in event.message.content:
            if isinstance(part, ThinkingPart | RedactedThinkingPart):
                thinking.append({"seq": seq, "turn": event.turn, **_part(part)})
        if event.provider_replay is not None:
            replay = event.provider_replay
            providers.append(
                {
                    "seq": seq,
                    "turn": event.turn,
                    "protocol": show(replay.protocol, 80),
                    "provider": show(replay.provider or "", 80),
                    "model": show(replay.model or "", 120),
                    "json": show(json.dumps(replay.to_wire(), indent=2, ensure_ascii=False), RAW_PREVIEW),
                }
            )
        for blocks in (thinking, providers):
            if len(blocks) > 2 * KEEP_BLOCKS:
                del blocks[:-KEEP_BLOCKS]


def _context(seq: int, event: SessionEvent, rows: list[dict[str, str]]) -> None:
    """Fold a model call's recorded window fill into the page's context rows (latest kept)."""
    if not isinstance(event, Custom) or event.custom_kind != PROMPT_PROGRAM_INVOKED:
        return
    use = ContextUse.from_invoked(event.payload) if isinstance(event.payload, dict) else None
    if use is not None:
        rows.append({"seq": str(seq), **context_cells(use)})
        if len(rows) > 2 * KEEP_CONTEXT:
            del rows[:-KEEP_CONTEXT]


def verification(store: Store, session_id: str) -> dict[str, Any]:
    """The full check of a session (:func:`flightlog.integrity.verify.audit_session`, offline: no witness is
    asked), falling back to the chain and tree check (:func:`flightlog.recorder.verify_session`) when the
    trusted keys cannot be loaded.

    Returns:
        ``ok``, ``summary``, ``events``, ``head``, ``root``, ``divergences`` (seq, reason, detail; the
        first :data:`KEEP_DIVERGENCES`), ``first`` (the first of them, or None), ``marks`` (seq -> its
        reasons joined by ``", "``, over those listed: what the timeline and the conversation mark),
        ``more`` (how many divergences that list leaves out) and ``notes``, display-safe. ``ok`` may be
        False with no divergence (a check that did not settle, the index log's own problems: ``summary``
        says which).

    Raises:
        SessionNotFound: no such session.
    """
    from ..integrity.heads import HeadStore
    from ..integrity.keys import load_keyring
    from ..integrity.verify import audit_session
    from ..recorder import verify_session

    notes: list[str] = []
    try:
        keyring = load_keyring()
    except FlightlogError as exc:
        keyring = None
        notes.append(f"signed checkpoints not checked: {exc}")
    if keyring is not None:
        report = audit_session(store, session_id, keyring=keyring, heads=HeadStore.default())
        summary, head, root = report.summary(), report.head, report.root
        divergences, notes = list(report.divergences), [*notes, *report.notes]
        events, ok = report.events, report.ok
    else:
        basic = verify_session(store, session_id)
        summary, head, root = "chain and tree head checked", basic.head, basic.root
        divergences, events, ok = list(basic.divergences), basic.events, basic.ok
    kept = divergences[:KEEP_DIVERGENCES]
    rows = [{"seq": d.seq, "reason": show(d.reason, 80), "detail": show(d.detail, LINE_LIMIT)} for d in kept]
    marks: dict[int, list[str]] = {}
    for d in kept:
        marks.setdefault(d.seq, []).append(d.reason)
    return {
        "ok": ok,
        "summary": show(summary, 600),
        "first": rows[0] if rows else None,
        "marks": {seq: show(", ".join(reasons), 200) for seq, reasons in marks.items()},
        "events": events,
        "head": head,
        "root": root,
        "divergences": rows,
        "more": max(0, len(divergences) - KEEP_DIVERGENCES),
        "notes": [show(n, LINE_LIMIT) for n in notes],
    }


class VerificationCache:
    """:func:`verification` results kept per session for the dashboard's lifetime, so each move of the
    conversation page's seq slider does not run the full check again (it reads every row: 1-2 s for a
    10,000-turn session, measured in the commit that added this) while nothing moved.

    The session page checks on every load (``reuse=False``) and keeps its result; the conversation page
    reuses one (``reuse=True``) only while its key is unchanged: the session row's head (seq and hash) and
    the ledger's own mark (:meth:`Store.ledger_marks`: row count, last seq and hash, a sum an edit of a
    row's bytes moves; one indexed query, ~80 ms for 40,001 rows), both read *before* the check, so a head
    that moved (an append, a rolled-back file, a re-chain) is checked again and never shown a stale
    "verified". An edit the mark cannot see (its docstring says which: one that keeps every row's length on
    SQLite) or a change outside the database (the retained heads, the trusted keys) is seen by the next
    session page load, or by the conversation page once the result is :data:`MAX_AGE_S` old; meanwhile the
    conversation page says how old the result it shows is (:meth:`check`'s ``checked`` and ``age_s``). At most
    :data:`SIZE` sessions are kept (least recently used dropped). Thread-safe; two requests that miss at
    once may both check."""

    MAX_AGE_S = 30.0
    """Seconds a result is reused for an unchanged key."""
    SIZE = 64
    """Sessions kept."""

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time
    ) -> None:
        self._clock = clock
        self._wall = wall
        self._lock = threading.Lock()
        self._kept: OrderedDict[str, tuple[tuple[Any, ...], float, dict[str, Any]]] = OrderedDict()

    def check(self, store: Store, session_id: str, *, reuse: bool) -> dict[str, Any]:
        """:func:`verification` of ``session_id``; with ``reuse``, the kept result while its key holds and it
        is younger than :data:`MAX_AGE_S` (class docstring). The result is kept either way.

        Returns:
            :func:`verification`'s dict plus ``checked_at`` (the wall-clock time the check started, Unix
            seconds), ``checked`` (it as ``HH:MM:SS`` UTC), ``age_s`` (whole seconds since then, by the
            monotonic clock) and ``reused`` (whether this call returned a kept result): what lets a page
            say how old a reused "verified" is; ``checked_at`` also identifies the check (a page may key
            what it read from the ledger on it).

        Raises:
            SessionNotFound: no such session.
        """
        record = store.get_session(session_id)
        key = (record.head_seq, record.head_hash, store.ledger_marks([session_id]).get(session_id))
        now = self._clock()
        with self._lock:
            kept = self._kept.get(session_id)
            if reuse and kept is not None and kept[0] == key and now - kept[1] < self.MAX_AGE_S:
                self._kept.move_to_end(session_id)
                return {**kept[2], "age_s": int(now - kept[1]), "reused": True}
        started = self._wall()
        result = verification(store, session_id)
        result.update(checked_at=started, checked=time.strftime("%H:%M:%S", time.gmtime(started)))
        with self._lock:
            self._kept[session_id] = (key, now, result)
            self._kept.move_to_end(session_id)
            while len(self._kept) > self.SIZE:
                self._kept.popitem(last=False)
        return {**result, "age_s": 0, "reused": False}


def new_events(store: Store, session_id: str, start: int, limit: int = 200) -> Iterator[dict[str, Any]]:
    """Timeline rows from ``start`` on (at most ``limit``), for the live stream."""
    for row in store.read_events(session_id, start=start, stop=start + limit):
        event, error = _decoded(row)
        yield event_row(session_id, row, event, error)
