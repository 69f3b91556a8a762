"""The ``runs`` projection: :class:`AgentRunSnapshot` rows kept current in the append transaction (seed 002).

* :func:`project` is registered with :func:`flightlog.recorder.register_projector`: every append folds its
  batch into the session's row (and into the rows of the sub-agents its ``agent_process_changed`` events
  name) inside the same transaction, so a listing is one indexed query and never sees an event the
  projection missed. It resumes from the fold state stored in the row; when that is missing or behind
  (a session recorded before the projection existed) it refolds the session from its ledger first.
  Most appends skip the read: a recorder keeps the row it last wrote and the fold behind it, and writes
  the next row with one compare-and-set against it (``Store.replace_run_row``); anything else takes the
  general path, which locks the rows it reads until its upsert (``Store.lock_run_rows``), so a concurrent
  writer's change to them (a parent's process entry, the status trigger) is never overwritten. A failure
  in the projection never loses an append: its writes roll back (to a savepoint, or the one failed
  statement), the error is logged and the projection is marked stale (``run_projection_version`` 0), so
  readers fold the ledgers instead until :func:`rebuild_projection` runs.
* :func:`rebuild_projection` recomputes every row from the ledgers and produces exactly the rows
  incremental maintenance produces (the fold is deterministic and resumable; a hypothesis test pins it).
  It works in chunks of sessions, each its own short transaction holding the rows' writers off
  (``Store.hold_run_rows``) while it folds and writes: live writers wait for a chunk, not the rebuild.
* Queries: :func:`list_runs` (snapshots), :func:`list_runs_json` (the seed wire format, as stored),
  :func:`build_tree`. When the projection is missing or stale they fold the ledgers in memory
  (:func:`compute_runs`): slower, never wrong.

The session's ``status`` (``Recorder.finish``, not an event) is kept in the row by the backend as it
changes and refines the snapshot at read time (:func:`~flightlog.runs.adapters.refine_with_status`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import pydantic_core

from ..encoding import decode_stored
from ..errors import EventDecodeError, SessionNotFound
from ..events import AgentProcessChanged, Event
from ..narration import short, state_word
from ..replay import collector_paused
from ..store.base import NOT_A_RUN, RunListing, RunRow, SessionRecord, Store, StoredEvent
from ..store.rows import run_row
from .adapters import (
    FOLD_VERSION,
    STATUS_STATES,
    ProcessEntry,
    SessionFold,
    SessionHeader,
    combine,
    reads_event,
    refine_with_status,
)
from .context import ContextUse
from .model import AgentRunSnapshot, RunSource, RunState, snapshot_list_adapter

__all__ = [
    "INTERNAL_PREFIX",
    "RunEntry",
    "RunNode",
    "Undecodable",
    "UnreadableRunRow",
    "build_tree",
    "compute_runs",
    "context_uses",
    "folded_sessions",
    "is_run",
    "list_runs",
    "list_runs_json",
    "listed_word",
    "no_run_sessions",
    "parse_wires",
    "project",
    "projection_ready",
    "reads_event",
    "rebuild_projection",
    "resumable_sessions",
    "run_entries",
    "spawned_only",
    "unlisted_parents",
]

Undecodable = list[tuple[str, EventDecodeError]]
"""Sessions a pass over the ledgers left out because their stored events do not decode (a tampered or
corrupt row): ``(session id, error naming the seq)``, in the order met."""


def pass_over(undecodable: Undecodable | None, session_id: str, exc: EventDecodeError) -> None:
    """Leave ``session_id`` out of a pass, recording ``exc`` in ``undecodable``; re-raise ``exc`` when the
    caller takes no list (it wants the pass to fail on the first undecodable session).

    Raises:
        EventDecodeError: ``exc``, when ``undecodable`` is None.
    """
    if undecodable is None:
        raise exc
    undecodable.append((session_id, exc))


log = logging.getLogger("flightlog.runs")

INTERNAL_PREFIX = "flightlog:"
"""Session ids flightlog keeps for its own ledgers (the erasure log ``flightlog:erasures``, see
:mod:`flightlog.integrity.erasure`). They are hash-chained sessions but no unit of agent work, so they are never runs
(seed 002 projects units of agent work): neither projected nor listed."""


def is_run(session_id: str) -> bool:
    """Whether a session is a unit of agent work (not one of flightlog's own ledgers, :data:`INTERNAL_PREFIX`)."""
    return not session_id.startswith(INTERNAL_PREFIX)


_REFINED = {status: state.value for status, state in STATUS_STATES.items()}
_TERMINAL = RunState.TERMINAL.value
_CHUNK = 256  # sessions per rebuild transaction


# ─── row codec ────────────────────────────────────────────────────────────────────────────────


@dataclass
class _Parts:
    """What a row is computed from: the run's own session fold, its parent's process entry, its status."""

    fold: SessionFold | None = None
    process: ProcessEntry | None = None
    status: str | None = None
    rendered: tuple[Any, AgentRunSnapshot | None, str] | None = field(default=None, compare=False, repr=False)
    """What :func:`_row` last rendered from these parts: its render key (:func:`_plain_render`: the wire
    dict, with no snapshot), the snapshot and the snapshot JSON."""


class UnreadableRunRow(ValueError):
    """A stored ``runs`` row's ``fold`` text does not decode (not JSON, or a process entry or session fold
    of the wrong shape: a raw write to the database). The message names the run and what is wrong.

    The projector (an append) fails on it like on any other error, so the projection is marked stale and
    the readers fold the ledgers; a reader of a current projection (:func:`context_uses`,
    :func:`spawned_only`) logs a warning naming the row and reads the run's ledger instead;
    ``flightlog verify`` names the row (:mod:`flightlog.runs.check`) and ``flightlog runs --rebuild``
    rewrites it from the ledgers."""

    run_id: str

    def __init__(self, run_id: str, reason: str) -> None:
        super().__init__(f"runs row {run_id!r}: its fold text does not decode ({reason})")
        self.run_id = run_id


def _parts(row: RunRow | None) -> _Parts:
    """The parts a stored row was computed from.

    Raises:
        UnreadableRunRow: its ``fold`` text does not decode.
    """
    if row is None:
        return _Parts()
    try:
        data = json.loads(row.fold)
        if not isinstance(data, dict):
            raise ValueError(f"a {type(data).__name__}, not a JSON object")
        fold = None
        session = data.get("session")
        if data.get("v") == FOLD_VERSION and session is not None:
            fold = SessionFold.from_json(session)
        process = ProcessEntry.from_json(data["process"]) if data.get("process") else None
    except (ValueError, TypeError, KeyError) as exc:
        raise UnreadableRunRow(row.run_id, short(str(exc), 120)) from exc
    # A fold of another version (one stored before context use was folded among them) is not resumed
    # from: the session's next append refolds its ledger.
    return _Parts(fold, process, row.session_status if fold is not None else None)


def _unreadable(exc: UnreadableRunRow) -> None:
    log.warning("%s; read from its ledger instead (run `flightlog runs --rebuild`)", exc)


def spawned_only(store: Store, run_id: str) -> ProcessEntry | None:
    """The parent's process entry of ``run_id`` (exact id) when that is all the store knows of it: a
    sub-agent its parent recorded (``agent_process_changed``) that never got a session of its own (the
    parent died before starting it, say). None when the run has a session, no entry names it, or the
    projection is not current (:func:`projection_ready`; nothing is folded here)."""
    if not projection_ready(store):
        return None
    try:
        parts = _parts(store.get_run_rows([run_id]).get(run_id))
    except UnreadableRunRow as exc:  # as with a stale projection: the caller reads the ledgers
        _unreadable(exc)
        return None
    return parts.process if parts.fold is None else None


def _snapshot(parts: _Parts) -> AgentRunSnapshot:
    """The durable snapshot of a row's parts, before the status refinement."""
    return combine(parts.fold.snapshot() if parts.fold is not None else None, parts.process)


def _updated(parts: _Parts) -> int:
    """The latest of the fold's last event time and the process entry's time (epoch ms; a missing or zero
    stamp does not count), 0 when neither has one."""
    fold, process = parts.fold, parts.process
    folded = fold.last_at_ms if fold else None
    entered = process.at_ms if process else None
    if folded and entered:
        return max(folded, entered)
    return folded or entered or 0


_ENCODE = json.JSONEncoder(separators=(",", ":")).encode  # what json.dumps(..., separators=...) writes


def _encode(state: dict[str, Any]) -> str:
    """``_ENCODE(state)`` in about a quarter of its time (it runs on every append).

    ``pydantic_core.to_json`` writes the same compact JSON for JSON values (same key order, separators,
    escapes and integers), except that it writes non-ASCII characters and DEL raw instead of ``\\uXXXX``,
    fails on lone surrogates, and writes some floats differently (``1e-7`` for ``1e-07``; the fold holds
    none). Output with a character ``_ENCODE`` would escape, and any failure, take ``_ENCODE``: the text is
    exactly what ``_ENCODE`` writes, or for a float the same JSON value (the projection only parses the
    text and compares texts this function wrote).
    """
    try:
        text = pydantic_core.to_json(state).decode()
    except (pydantic_core.PydanticSerializationError, UnicodeDecodeError):
        return _ENCODE(state)
    return text if text.isascii() and "\x7f" not in text else _ENCODE(state)


_UNRENDERED = {"last_seq": None, "last_at_ms": None, "context": None}
"""Fold fields :meth:`SessionFold.snapshot` never reads (they move on every append; ``updated_at_ms`` and
``last_seq`` come from the first two, not the snapshot; ``context`` is served beside it)."""


_Render = tuple[str | None, str, str, str | None, str]
"""What a row shows of its snapshot: ``(parent, source, state, outcome, wire)``, the indexed columns and the
seed 002 wire JSON (a plain tuple: a named tuple's constructor is a Python call on every append)."""


def _row(run_id: str, parts: _Parts) -> RunRow:
    fold, process = parts.fold, parts.process
    session = fold.to_json() if fold is not None else None
    state: dict[str, Any] = {"v": FOLD_VERSION}  # then "session" and "process", each when there is one
    if session is not None:
        state["session"] = session
    if process is not None:
        state["process"] = process.to_json()
    parent, source, shown_state, outcome, wire = _plain_render(parts) or _model_render(parts, session)
    return run_row(  # RunRow(...) at under half the cost (runs on every append)
        run_id=run_id,
        parent=parent,
        source=source,
        state=shown_state if _holds_run(parts) else NOT_A_RUN,
        outcome=outcome,
        updated_at_ms=_updated(parts),
        last_seq=fold.last_seq if fold is not None else -1,
        session_status=parts.status if fold is not None else None,
        snapshot=wire,
        fold=_encode(state),  # key order is fixed by construction
    )


def _holds_run(parts: _Parts) -> bool:
    """Whether a row's parts describe a run: a parent's process entry names it, or its ledger held a
    ``run_started`` (:meth:`SessionFold.holds_run`). A session without either (an Agents SDK session used
    only for ``add_items``/``pop_item``) is stored as :data:`NOT_A_RUN`, never listed: calling it an
    ``initializing`` run would fabricate a spawn intent nothing recorded (seed 002)."""
    return parts.process is not None or (parts.fold is not None and parts.fold.holds_run())


def _plain_render(parts: _Parts) -> _Render | None:
    """The render of a run with its own session and no process entry (every append of a recorder's own
    run): :meth:`SessionFold.snapshot_wire` dumped by ``pydantic_core.to_json``, which is the snapshot
    model's ``model_dump_json`` byte for byte, without building the models. An unchanged wire dict reuses
    the last JSON. None where the models are needed (:func:`_model_render`)."""
    fold = parts.fold
    wire = fold.snapshot_wire() if fold is not None and parts.process is None else None
    if wire is None:
        return None
    rendered = parts.rendered
    if rendered is not None and rendered[0] == wire:
        text = rendered[2]
    else:
        text = pydantic_core.to_json(wire).decode()
        parts.rendered = (wire, None, text)
    terminal = wire.get("terminal")
    outcome = terminal["outcome"] if terminal is not None else None
    return wire.get("parent"), wire["source"], wire["state"], outcome, text


def _model_render(parts: _Parts, session: dict[str, Any] | None) -> _Render:
    """The render through the snapshot models (:func:`_snapshot`), for a process entry or a fold value
    :meth:`SessionFold.snapshot_wire` leaves to them."""
    process = parts.process
    # The snapshot is a function of the fold's persisted state but the _UNRENDERED fields, and of the
    # process entry: while those are equal, reuse the last snapshot and its JSON.
    key = ({**session, **_UNRENDERED} if session is not None else None, process)
    rendered = parts.rendered
    if rendered is not None and rendered[1] is not None and rendered[0] == key:
        snapshot, wire = rendered[1], rendered[2]
    else:
        snapshot = _snapshot(parts)
        # A changed fold often renders the same snapshot: keep its JSON. The enum compare spares the
        # models' ``__eq__`` when the state moved.
        last = rendered[1] if rendered is not None else None
        same = last is not None and last.state == snapshot.state and last == snapshot
        wire = rendered[2] if same and rendered is not None else snapshot.model_dump_json()
        parts.rendered = (key, snapshot, wire)
    outcome = snapshot.terminal.outcome.value if snapshot.terminal else None
    return snapshot.parent, snapshot.source.value, snapshot.state.value, outcome, wire


def _later(current: ProcessEntry | None, entry: ProcessEntry) -> ProcessEntry:
    return entry if current is None or entry.sort_key() >= current.sort_key() else current


def _latest(entries: Iterable[ProcessEntry]) -> dict[str, ProcessEntry]:
    latest: dict[str, ProcessEntry] = {}
    for entry in entries:
        latest[entry.agent_id] = _later(latest.get(entry.agent_id), entry)
    return latest


def _decoded(rows: Iterable[StoredEvent]) -> Iterator[tuple[int, int, Event]]:
    for row in rows:
        yield row.seq, row.recorded_at_ms, decode_stored(row.event_bytes, seq=row.seq)


def _fold_session(store: Store, record: SessionRecord, *, stop: int | None = None) -> SessionFold:
    fold = SessionFold(SessionHeader.of(record))
    return fold.feed_all(_decoded(store.read_events(record.session_id, stop=stop)))


# ─── incremental maintenance ──────────────────────────────────────────────────────────────────


def project(recorder: Any, batch: list[tuple[StoredEvent, Event | None]]) -> None:
    """The projector: fold an appended batch into the ``runs`` rows, in the append's transaction.

    Args:
        recorder: The :class:`~flightlog.recorder.Recorder` appending (its ``store`` and ``session_id``).
        batch: ``(stored row, event)`` pairs just staged, ascending seq; the event may be None where
            :func:`~flightlog.runs.adapters.reads_event` (this projector's declaration) says the fold does
            not read it.

    Never raises for a projection error (module docstring); the append goes on.

    Most appends take :func:`_advance`: fold the batch into the parts this recorder last wrote and
    compare-and-set its row (one statement, no read, no savepoint). Anything else (a first append, a row
    that moved under us, sub-agent rows to update) takes :func:`_apply` in a savepoint.

    Source: seed 002 (durable record → snapshot), kept current as ARCHITECTURE.md's read path.
    """
    if not batch or not is_run(recorder.session_id):
        return
    store: Store = recorder.store
    try:
        if _advance(store, recorder, batch):
            return
    except Exception:
        _failed(store, recorder.session_id)
        return
    _general(store, recorder, batch)


class _MoreRows(Exception):
    """:func:`_apply` must also lock these rows (a refold named sub-agents the batch does not): its savepoint
    is rolled back (its locks released) and it runs again locking them all in one statement."""

    def __init__(self, run_ids: set[str]) -> None:
        super().__init__(sorted(run_ids))
        self.run_ids = run_ids


def _general(store: Store, recorder: Any, batch: Sequence[tuple[StoredEvent, Event | None]]) -> None:
    """:func:`_apply` in a savepoint; a failure marks the projection stale (never raises).

    When a refold names sub-agents whose rows :func:`_apply` did not lock, it runs once more (a new
    savepoint) locking those too, so its rows are always locked in one sorted statement (no lock-order
    exception, no deadlock between two projectors); the refold reads the same ledger prefix again (the
    append holds its session's row), so a third run is never needed and is not made."""
    extra: set[str] = set()
    try:
        try:
            with store.transaction():
                _apply(store, recorder, batch, extra)
        except _MoreRows as more:
            with store.transaction():
                _apply(store, recorder, batch, more.run_ids)
    except Exception:
        _failed(store, recorder.session_id)


def _failed(store: Store, session_id: str) -> None:
    log.exception("runs projection failed for %s; marked stale (run `flightlog runs --rebuild`)", session_id)
    try:
        store.set_run_projection_version(0)
    except Exception:
        log.exception("could not mark the runs projection stale")


def _take(recorder: Any) -> tuple[RunRow, _Parts] | None:
    """The row this recorder last wrote and the parts behind it (its ``projector_state`` entry, a plain
    dict on the recorder: a weak-keyed dict cost ~10x its lookup per append), reused while the stored row
    is unchanged (no read, no parse per append). Popped before use, so a failed or rolled-back batch never
    leaves parts that are ahead of the database: the next batch finds the cache empty, or its row no
    longer stored. A recorder without ``projector_state`` has no cache."""
    state: dict[Any, Any] | None = getattr(recorder, "projector_state", None)
    return state.pop(project, None) if state is not None else None


def _remember(recorder: Any, row: RunRow, parts: _Parts) -> None:
    state: dict[Any, Any] | None = getattr(recorder, "projector_state", None)
    if state is not None:
        state[project] = (row, parts)


def _advance(store: Store, recorder: Any, batch: Sequence[tuple[StoredEvent, Event | None]]) -> bool:
    """The fast path: True when the batch is folded into the session's row, False (nothing written) when
    :func:`_apply` must do it.

    Correct because a row is a function of its ``fold`` text and ``session_status`` (the snapshot and every
    other column are computed from them), and the cached parts are exactly what parsing the cached row's
    fold gives: so while the stored row still equals the row this recorder last wrote, which the
    compare-and-set checks in the same statement that writes, resuming from the cached parts is resuming
    from the stored row, as :func:`_apply` would. A ``Python`` error here writes nothing; a failed statement
    writes nothing and leaves the transaction usable (``Store.replace_run_row``). When the stored row moved,
    :func:`_apply` runs instead (``Store.replace_run_row_or``'s fallback: on PostgreSQL the swap goes out
    with the commit, and the fallback runs there, still inside the append's transaction).
    """
    cached = _take(recorder)
    if cached is None:
        return False
    written, parts = cached
    fold = parts.fold
    if fold is None or fold.last_seq != batch[0][0].seq - 1:
        return False
    for stored, event in batch:
        fold.feed_row(stored.seq, stored.recorded_at_ms, stored.kind, event)
    session_id: str = recorder.session_id
    taken = fold.take_processes()
    if taken:  # almost no append has agent_process_changed entries: no call, no dict for those
        latest = _latest(taken)
        if session_id in latest:
            parts.process = _later(parts.process, latest.pop(session_id))
        if latest:  # sub-agent rows to read and update: _apply does it, from the stored row (parts spent)
            return False
    row = _row(session_id, parts)
    _remember(recorder, row, parts)  # a failed swap's fallback (_apply) remembers what it writes instead
    store.replace_run_row_or(row, written, lambda: _general(store, recorder, batch))
    return True


def _apply(
    store: Store, recorder: Any, batch: Sequence[tuple[StoredEvent, Event | None]], extra: set[str]
) -> None:
    """The general path (in a savepoint): lock and read the rows (``Store.lock_run_rows``: the session's,
    those of the sub-agents the batch names and ``extra``, in one sorted statement, so no other writer
    changes them before this upsert), resume from the stored fold, refold the ledger when that is missing
    or behind, write the session's row and its sub-agents' rows.

    Raises:
        _MoreRows: a refold named sub-agents whose rows were not locked (:func:`_general` runs it again
            with them in ``extra``); nothing is written.
    """
    session_id: str = recorder.session_id
    first = batch[0][0].seq
    named = {event.agent_id for _, event in batch if isinstance(event, AgentProcessChanged)}
    named |= extra
    locked = store.lock_run_rows(named | {session_id})
    parts = _parts(locked.get(session_id))
    if parts.fold is None or parts.fold.last_seq != first - 1:
        record = store.get_session(session_id)
        parts.fold, parts.status = _fold_session(store, record, stop=first), record.status
    fold = parts.fold
    for stored, event in batch:
        fold.feed_row(stored.seq, stored.recorded_at_ms, stored.kind, event)
    latest = _latest(fold.take_processes())
    if session_id in latest:
        parts.process = _later(parts.process, latest.pop(session_id))
    unlocked = set(latest) - named
    if unlocked:
        raise _MoreRows(named | unlocked)
    # Every locked id must be written (an absent one holds a placeholder until then): only an id of
    # ``extra`` the second run no longer refolds can be left, if a rebuild chunk wrote the session's row
    # between the two runs; such an absent row fails the projection (rolled back, marked stale).
    unwritten = named - set(latest) - set(locked) - {session_id}
    if unwritten:
        raise RuntimeError(f"runs projection: no row to write for the locked runs {sorted(unwritten)}")
    rows = [_row(session_id, parts)]
    for agent_id, entry in latest.items():
        child = _parts(locked.get(agent_id))
        child.process = _later(child.process, entry)
        rows.append(_row(agent_id, child))
    store.put_run_rows(rows)
    _remember(recorder, rows[0], parts)


def rebuild_projection(store: Store, *, undecodable: Undecodable | None = None) -> int:
    """Recompute every ``runs`` row from the ledgers (what incremental maintenance would have made).

    Clears the projection and marks it stale, refolds sessions in chunks of short transactions (appends
    that land meanwhile keep their rows current through :func:`project`), then marks it current.

    Args:
        store: The store.
        undecodable: When given, a session whose stored events do not decode (a tampered or corrupt row)
            gets no ``runs`` row and is added here as ``(session id, error naming the seq)``, and the
            others are still folded; when None, that error propagates and the projection is left stale.

    Returns:
        The number of sessions folded (those in ``undecodable`` included).

    Raises:
        ReadOnlyStore: the store is read-only.
        EventDecodeError: a session's events do not decode and ``undecodable`` is None.
    """
    with store.transaction():
        store.hold_run_rows()  # no append's row write interleaves with the delete (lock order)
        store.clear_run_rows()
        store.set_run_projection_version(0)
    ids = folded_sessions(store)
    for start in range(0, len(ids), _CHUNK):
        with store.transaction():
            # Before reading the ledgers: an append whose events this chunk does not see writes its row
            # after the chunk commits (resuming from the chunk's row), never before it (overwritten).
            store.hold_run_rows()
            _rebuild_chunk(store, ids[start : start + _CHUNK], undecodable)
    store.set_run_projection_version(FOLD_VERSION)
    return len(ids)


def folded_sessions(store: Store) -> list[str]:
    """The sessions :func:`rebuild_projection` folds: every session with events that is a run candidate
    (:func:`is_run`), in the store's listing order."""
    return [r.session_id for r in store.list_sessions() if r.head_seq >= 0 and is_run(r.session_id)]


def _rebuild_chunk(store: Store, session_ids: Sequence[str], undecodable: Undecodable | None) -> None:
    existing = store.get_run_rows(session_ids)
    rows: list[RunRow] = []
    entries: list[ProcessEntry] = []
    for session_id in session_ids:
        record = store.get_session(session_id)
        try:
            fold = _fold_session(store, record)
        except EventDecodeError as exc:
            pass_over(undecodable, session_id, exc)
            continue
        if fold.last_seq < 0:
            continue
        entries.extend(fold.take_processes())
        process = _parts(existing.get(session_id)).process
        rows.append(_row(session_id, _Parts(fold, process, record.status)))
    store.put_run_rows(rows)
    latest = _latest(entries)
    children = store.get_run_rows(list(latest))
    updated = []
    for agent_id, entry in latest.items():
        child = _parts(children.get(agent_id))
        child.process = _later(child.process, entry)
        updated.append(_row(agent_id, child))
    store.put_run_rows(updated)


# ─── reads ────────────────────────────────────────────────────────────────────────────────────


def projection_ready(store: Store) -> bool:
    """True when the stored projection is current (built by this fold version, not marked stale)."""
    return store.run_projection_version() == FOLD_VERSION


NO_RUN = "no run"
"""What ``flightlog ls`` shows as the status of a session :func:`no_run_sessions` names."""


def no_run_sessions(store: Store, records: Iterable[SessionRecord]) -> set[str]:
    """The sessions among ``records`` whose row says ``running`` but that hold no run (no ``run_started``;
    ``runs`` never lists them, seed 002 projects units of agent work): a session with no events, or one
    whose projection row is :data:`~flightlog.store.base.NOT_A_RUN` (a ``FlightlogSession`` used only for
    items, a Recorder session of custom events) or one of flightlog's own logs (:func:`is_run` false: the erasure
    and restore logs, never projected, never finished). ``running`` is the status every session is created
    with, so for these it says nothing about a run; other statuses (set by ``finish``) are kept.

    Reads the projection only when it is current (:func:`projection_ready`); with a stale one (an older
    fold, until ``runs --rebuild``) only the event-less sessions are named. One indexed read per 500 ids.
    """
    running = [r for r in records if r.status == "running"]
    found = {r.session_id for r in running if r.head_seq < 0 or not is_run(r.session_id)}
    if projection_ready(store):
        ids = [r.session_id for r in running if r.head_seq >= 0]
        found |= {i for i, row in store.get_run_rows(ids).items() if row.state == NOT_A_RUN}
    return found


def resumable_sessions(store: Store, records: Iterable[SessionRecord]) -> set[str]:
    """The sessions among ``records`` whose row says ``cancelled`` (or ``canceled``) while their events
    leave the run in flight (no ``run_terminal``): the kernel's status for a run ``flightlog abort`` or a
    cancellation stopped, which ``flightlog resume`` continues (:mod:`flightlog.kernel.abort`). The runs
    read model lists them ``paused`` (:data:`~flightlog.runs.adapters.STATUS_STATES`), and so do ``ls``,
    ``show`` and the dashboard (:func:`listed_word`); a run whose events ended it (an import whose transcript
    says it was cancelled) is not among them.

    Reads the current projection (:func:`projection_ready`), one indexed read per 500 ids; with a stale one
    it folds each such session's events (only rows that say ``cancelled``).

    Raises:
        EventDecodeError: with a stale projection, a stored event of such a session does not decode.
    """
    cancelled = [r for r in records if STATUS_STATES.get(r.status) is RunState.PAUSED and r.head_seq >= 0]
    if not cancelled:
        return set()
    if projection_ready(store):
        rows = store.get_run_rows([r.session_id for r in cancelled])
        return {i for i, row in rows.items() if row.state not in (RunState.TERMINAL.value, NOT_A_RUN)}
    found = set()
    for record in cancelled:
        fold = _fold_session(store, record)
        if fold.holds_run() and not fold.state().is_terminal():
            found.add(record.session_id)
    return found


def listed_word(record: SessionRecord, *, no_run: Collection[str], resumable: Collection[str]) -> str:
    """The status ``ls``, ``show`` and the dashboard's session header print for a session row: :data:`NO_RUN`
    for a session in ``no_run`` (:func:`no_run_sessions`), ``paused`` for one in ``resumable``
    (:func:`resumable_sessions`: aborted, resumable; ``runs`` says ``paused`` too), else the row's word
    through :func:`flightlog.narration.state_word` (``aborted`` → ``cancelled``, ``incomplete`` →
    ``interrupted``: the outcome ``runs`` gives). The caller handles a row its ledger contradicts
    (:mod:`flightlog.kernel.rowheld`)."""
    if record.session_id in no_run:
        return NO_RUN
    if record.session_id in resumable:
        return RunState.PAUSED.value
    return state_word(str(record.status))


def _states(state: RunState | str | None) -> list[str] | None:
    return None if state is None else [RunState(state).value]


def _source(source: RunSource | str | None) -> str | None:
    return None if source is None else RunSource(source).value


class RunEntry(NamedTuple):
    """One listed run: id, effective durable state, last event time (epoch ms), seed 002 wire JSON."""

    run_id: str
    state: str
    updated_at_ms: int
    wire: str


def run_entries(
    store: Store,
    *,
    states: Collection[str] | None = None,
    source: str | None = None,
    parent: str | None = None,
    limit: int | None = None,
    undecodable: Undecodable | None = None,
) -> list[RunEntry]:
    """Durable runs matching every filter given, most recently updated first, as wire JSON.

    One indexed query of the projection; rows the session status ends are refined here
    (:func:`~flightlog.runs.adapters.refine_with_status`). Folds the ledgers instead when the projection
    is missing or stale (:func:`compute_runs`).

    Args:
        store: Any store (read-only is fine).
        states: ``RunState`` values to keep (the status refinement included).
        source: A ``RunSource`` value to keep.
        parent: Keep the direct children of this run.
        limit: At most this many (the most recently updated); None for all.
        undecodable: When given and the ledgers are folded: each session whose stored events do not
            decode is left out and added here as ``(session id, error naming the seq)`` (:func:`compute_runs`).

    Raises:
        EventDecodeError: the ledgers are folded, a session's events do not decode and ``undecodable``
            is None.
    """
    if not projection_ready(store):
        runs = compute_runs(store, states=states, source=source, parent=parent, undecodable=undecodable)[
            :limit
        ]
        return [RunEntry(s.run_id, s.state.value, updated, s.model_dump_json()) for s, updated in runs]
    with collector_paused():
        listings = store.query_runs(
            states=states, source=source, parent=parent, refined_statuses=_REFINED, limit=limit
        )
        return [
            RunEntry(x.run_id, _REFINED[x.session_status or ""], x.updated_at_ms, _refined(x))
            if _settled_by_status(x)
            else RunEntry(x.run_id, x.state, x.updated_at_ms, x.snapshot)
            for x in listings
        ]


def _settled_by_status(listing: RunListing) -> bool:
    """True for a row the events leave in flight and the session status settles (another state)."""
    forced = _REFINED.get(listing.session_status or "")
    return forced is not None and listing.state != _TERMINAL and forced != listing.state


def _refined(listing: RunListing) -> str:
    """The wire JSON of a row :func:`_settled_by_status` holds, refined by the status."""
    snapshot = AgentRunSnapshot.model_validate_json(listing.snapshot)
    return refine_with_status(snapshot, listing.session_status).model_dump_json()


def parse_wires(wires: Sequence[str]) -> list[AgentRunSnapshot]:
    """Parse many seed 002 JSON snapshots in one call (one Rust-side parse of a JSON array)."""
    with collector_paused():
        return snapshot_list_adapter().validate_json("[" + ",".join(wires) + "]")


def list_runs(
    store: Store,
    state: RunState | str | None = None,
    source: RunSource | str | None = None,
    parent: str | None = None,
    *,
    limit: int | None = None,
) -> list[AgentRunSnapshot]:
    """Durable run snapshots matching every filter given, most recently updated first.

    Args:
        store: Any store (read-only is fine).
        state: Keep runs in this state (the session status refinement included).
        source: Keep runs of this source.
        parent: Keep the direct children of this run.
        limit: At most this many (the most recently updated); None for all.

    Raises:
        ValueError: ``state`` or ``source`` is not a seed 002 value.

    Source: seed 002 (durable record; live state is merged by :func:`flightlog.live.list_run_views`).
    """
    states, source_value = _states(state), _source(source)
    if not projection_ready(store):
        entries = run_entries(store, states=states, source=source_value, parent=parent, limit=limit)
        return parse_wires([entry.wire for entry in entries])
    return parse_wires(_wires(store, states, source_value, parent, limit))


def _wires(
    store: Store, states: list[str] | None, source: str | None, parent: str | None, limit: int | None
) -> list[str]:
    """The stored wire JSON of every matching row (the projection is current), refined where the session
    status settles a run: one indexed query, and per row one test and no object (100,000 runs take about
    the time of fetching the rows)."""
    with collector_paused():
        rows = store.query_run_tuples(
            states=states, source=source, parent=parent, refined_statuses=_REFINED, limit=limit
        )
        refined, terminal = _REFINED, _TERMINAL
        # row: RunListing fields (run_id, parent, source, state, updated_at_ms, session_status, snapshot);
        # the test is _settled_by_status's, inline
        return [
            _refined(RunListing(*row))
            if row[5] in refined and row[3] != terminal and refined[row[5]] != row[3]
            else row[6]
            for row in rows
        ]


def list_runs_json(
    store: Store,
    state: RunState | str | None = None,
    source: RunSource | str | None = None,
    parent: str | None = None,
    *,
    limit: int | None = None,
) -> str:
    """:func:`list_runs` as a JSON array in the seed 002 wire format (stored rows joined, not re-encoded)."""
    states, source_value = _states(state), _source(source)
    if not projection_ready(store):
        entries = run_entries(store, states=states, source=source_value, parent=parent, limit=limit)
        return "[" + ",".join(entry.wire for entry in entries) + "]"
    return "[" + ",".join(_wires(store, states, source_value, parent, limit)) + "]"


def compute_runs(
    store: Store,
    *,
    states: Collection[str] | None = None,
    source: str | None = None,
    parent: str | None = None,
    undecodable: Undecodable | None = None,
) -> list[tuple[AgentRunSnapshot, int]]:
    """Fold every ledger in memory: ``(snapshot, updated_at_ms)`` pairs, filtered, newest first.

    What the queries answer from when the projection is missing or stale (e.g. an older database opened
    read-only): the rows a rebuild would store, refined by the session status.

    Args:
        store: Any store (read-only is fine).
        states: ``RunState`` values to keep (the status refinement included).
        source: A ``RunSource`` value to keep.
        parent: Keep the direct children of this run.
        undecodable: When given, a session whose stored events do not decode (a tampered or corrupt row)
            is left out and added here as ``(session id, error naming the seq)``, in listing order, and the
            others are still folded (as :func:`rebuild_projection` does); when None, that error propagates.

    Raises:
        EventDecodeError: a session's events do not decode and ``undecodable`` is None.
    """
    parts: dict[str, _Parts] = {}
    entries: list[ProcessEntry] = []
    for record in store.list_sessions():
        if record.head_seq < 0 or not is_run(record.session_id):
            continue
        try:
            fold = _fold_session(store, record)
        except EventDecodeError as exc:
            pass_over(undecodable, record.session_id, exc)
            continue
        entries.extend(fold.take_processes())
        parts[record.session_id] = _Parts(fold, None, record.status)
    for agent_id, entry in _latest(entries).items():
        parts.setdefault(agent_id, _Parts()).process = entry
    runs: list[tuple[AgentRunSnapshot, int, str]] = []
    for run_id, part in parts.items():
        if not _holds_run(part):
            continue
        snapshot = refine_with_status(_snapshot(part), part.status if part.fold is not None else None)
        keep = (states is None or snapshot.state.value in states) and source in (None, snapshot.source.value)
        if keep and parent in (None, snapshot.parent):
            runs.append((snapshot, _updated(part), run_id))
    runs.sort(key=lambda item: (-item[1], item[2]))
    return [(snapshot, updated) for snapshot, updated, _ in runs]


def context_uses(store: Store, run_ids: Collection[str]) -> dict[str, ContextUse]:
    """The context use (:mod:`flightlog.runs.context`) of each run that recorded one, by run id.

    One read of the projection's rows when it is current (a row of another fold version counts as unknown
    until its session is appended to again or ``--rebuild``); otherwise each named session's ledger is
    folded, as is the ledger of a row whose fold text does not decode (:class:`UnreadableRunRow`, logged as
    a warning naming the row). Runs without a recorded session or without a record are left out.

    Raises:
        EventDecodeError: a ledger it folds holds an event that does not decode (names the seq).
    """
    uses: dict[str, ContextUse] = {}
    unread: list[str] = []
    if projection_ready(store):
        for run_id, row in store.get_run_rows(list(run_ids)).items():
            try:
                parts = _parts(row)
            except UnreadableRunRow as exc:
                _unreadable(exc)
                unread.append(run_id)
                continue
            use = parts.fold.context_use() if parts.fold is not None else None
            if use is not None:
                uses[run_id] = use
        run_ids = unread
    for run_id in run_ids:
        try:
            record = store.get_session(run_id)
        except SessionNotFound:
            continue
        use = _fold_session(store, record).context_use()
        if use is not None:
            uses[run_id] = use
    return uses


# ─── tree ─────────────────────────────────────────────────────────────────────────────────────


@dataclass
class RunNode:
    """A run and its children (in listing order)."""

    snapshot: AgentRunSnapshot
    children: list[RunNode] = field(default_factory=list)


def build_tree(snapshots: Sequence[AgentRunSnapshot]) -> list[RunNode]:
    """Arrange snapshots by ``parent``: roots are runs whose parent is absent from ``snapshots``.

    Keeps the given order among siblings. A run caught in a parent cycle becomes a root, so every snapshot
    appears exactly once.
    """
    nodes = {s.run_id: RunNode(s) for s in snapshots}
    roots: list[RunNode] = []
    for snapshot in snapshots:
        node = nodes[snapshot.run_id]
        parent = nodes.get(snapshot.parent) if snapshot.parent is not None else None
        if parent is None or parent is node:
            roots.append(node)
        else:
            parent.children.append(node)
    reached = _reach(roots, set())
    for snapshot in snapshots:
        if snapshot.run_id not in reached:
            node = nodes[snapshot.run_id]
            _detach(nodes, node)
            roots.append(node)
            _reach([node], reached)
    return roots


def _reach(tops: Sequence[RunNode], reached: set[str]) -> set[str]:
    """``reached`` with the run ids of ``tops`` and of every run under them added (returned)."""
    stack = list(tops)
    while stack:
        node = stack.pop()
        reached.add(node.snapshot.run_id)
        stack.extend(node.children)
    return reached


def unlisted_parents(roots: Sequence[RunNode]) -> list[tuple[str | None, list[RunNode]]]:
    """The roots of :func:`build_tree` grouped by a parent the listing left out.

    A root whose ``parent`` names a run not in the tree (a ``--limit``, ``--parent``, state or source filter
    left it out) is a child all the same: it is put in a group keyed by that parent id, at the place of the
    group's first root, its siblings after it in listing order. A root with no parent, or caught in a
    parent cycle (its parent is listed), is a group of its own keyed None. Every root appears once.

    Returns:
        ``(missing parent id or None, roots)`` in listing order.
    """
    listed = _reach(roots, set())
    groups: list[tuple[str | None, list[RunNode]]] = []
    by_parent: dict[str, list[RunNode]] = {}
    for node in roots:
        parent = node.snapshot.parent
        if parent is None or parent in listed:
            groups.append((None, [node]))
        elif parent in by_parent:
            by_parent[parent].append(node)
        else:
            by_parent[parent] = [node]
            groups.append((parent, by_parent[parent]))
    return groups


def _detach(nodes: dict[str, RunNode], node: RunNode) -> None:
    parent = nodes.get(node.snapshot.parent or "")
    if parent is not None and node in parent.children:
        parent.children.remove(node)
