"""The ``runs`` projection against the verified ledgers: what ``flightlog verify`` / ``flightlog audit`` report.

No hash covers a ``runs`` row: anyone who can write the database can change its ``state``, ``outcome``,
``snapshot`` (tokens, title...), ``parent``, ``session_status`` or ``fold`` text, and ``runs``, ``ls`` and the
dashboard list it as truth until the run's next append rewrites it. The projection must stay consistent with
the ledger (seed 002: durable outranks live, nothing fabricated), so :class:`ProjectionCheck` folds each
session's rows **while the audit streams them** (:meth:`ProjectionCheck.tap`: the very rows the chain, tree
and signatures are checked on; a session that does not pass is never compared) with the projection's own
fold (:mod:`flightlog.runs.projection`), renders the row a rebuild would store, and compares every column
with the stored row:

* per session (:meth:`ProjectionCheck.session`): a differing column is a :data:`PROJECTION_MISMATCH`
  divergence naming the run, the column, the stored and the folded value; a session with events and no row
  is :data:`PROJECTION_MISSING`. The row's process entry (what a parent's ``agent_process_changed`` says of
  this run) is another session's: here it is taken as stored, and a note says ``--all`` checks it;
* over the whole store (:meth:`ProjectionCheck.store_findings`, ``--all``, once every session passed):
  each run's process entry is the latest any ledger holds, so rows of sub-agents (with or without a session
  of their own) are compared too, and a listed row that no ledger accounts for is ``projection_extra``.

A projection marked stale (``run_projection_version`` 0 after a failed projector, or another
:data:`~flightlog.runs.adapters.FOLD_VERSION`: the migration) is not compared: no reader uses it (they fold
the ledgers, :func:`~flightlog.runs.projection.projection_ready`), so it is one note,
``stale: run `flightlog runs --rebuild```, never a divergence.

Cost per session: the events the fold reads (:func:`~flightlog.runs.adapters.reads_event`) decoded once more
while streaming, one indexed read of its ``runs`` row and one of its ``sessions`` row; ``--all`` adds one
listing of the projection and memory for the process entries (one per sub-agent).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields
from typing import Any

from ..encoding import decode_stored
from ..errors import Divergence, EventDecodeError, SessionNotFound
from ..narration import short
from ..store.base import RunRow, SessionRecord, Store, StoredEvent
from .adapters import FOLD_VERSION, ProcessEntry, SessionFold, SessionHeader, reads_event
from .projection import _latest, _Parts, _row, is_run

__all__ = [
    "PROJECTION_EXTRA",
    "PROJECTION_MISMATCH",
    "PROJECTION_MISSING",
    "STALE_NOTE",
    "ProjectionCheck",
    "RunFinding",
]

PROJECTION_MISMATCH = "projection_mismatch"
"""Divergence reason / finding state: a column of a ``runs`` row differs from the verified ledger's fold."""

PROJECTION_MISSING = "projection_missing"
"""Divergence reason / finding state: the ledgers hold a run (or a session with events) the projection lacks."""

PROJECTION_EXTRA = "projection_extra"
"""Finding state: a listed ``runs`` row no verified ledger accounts for (no session with events, no process
entry names it)."""

STALE_NOTE = "stale: run `flightlog runs --rebuild`"
"""How a stale projection is reported (readers fold the ledgers meanwhile: nothing wrong is listed)."""

_COLUMNS = [f.name for f in fields(RunRow) if f.name != "run_id"]
_REBUILD = "`flightlog runs --rebuild` rewrites it from the ledgers"
_SHOWN = 60
"""Characters of a long JSON column shown around its first difference."""


@dataclass
class RunFinding:
    """A problem of the projection found over the whole store (:meth:`ProjectionCheck.store_findings`).

    Attributes:
        run_id: The run the row is (or should be) of.
        state: :data:`PROJECTION_MISMATCH`, :data:`PROJECTION_MISSING` or :data:`PROJECTION_EXTRA`.
        columns: For a mismatch, each differing column as ``{"stored": value, "folded": value}``.
        why: One line naming the run, the columns and the values.
    """

    run_id: str
    state: str
    why: str
    columns: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The ``verify --all --json`` row: ``session_id`` (the run id), ``ok`` False, ``state``,
        ``columns``, ``why``."""
        return {
            "session_id": self.run_id,
            "ok": False,
            "state": self.state,
            "columns": self.columns,
            "why": self.why,
        }


@dataclass
class _Folding:
    """One session's fold while its rows stream through the audit."""

    fold: SessionFold
    record: SessionRecord
    """The session row, read before the rows (its ``status`` is the row's ``session_status``)."""
    broken: bool = False


class ProjectionCheck:
    """Compare the ``runs`` projection with the folds of verified ledgers (module docs).

    Use: for each session, wrap the audit's row stream with :meth:`tap`, then call :meth:`session` with the
    finished report's verdict; with every session checked, :meth:`store_findings`.

    Args:
        store: The store (read-only is fine).
        whole: Every session will be checked and :meth:`store_findings` called (``--all``): no note on a
            session that its row's process entry is left to that pass.

    Attributes:
        version: The stored projection's fold version (None: the database has no projection).
        current: The projection is current (built by this :data:`FOLD_VERSION`, not marked stale).
    """

    def __init__(self, store: Store, *, whole: bool = False) -> None:
        self.store = store
        self.whole = whole
        self.version = store.run_projection_version()
        self.current = self.version == FOLD_VERSION
        self._folding: dict[str, _Folding] = {}
        self._entries: list[ProcessEntry] = []
        self._events: dict[str, int] = {}  # verified sessions -> events verified
        self._matched: set[str] = set()  # own rows equal to the fold with their stored process entry
        self._held: set[str] = set()  # ... of those, the rows that hold a process entry
        self._own: set[str] = set()  # run ids with a verified session with events
        self._uncompared: list[str] = []  # sessions whose process entries are unknown (failed, or moved)

    def stale_note(self) -> str | None:
        """The note for a projection marked stale (None when it is current or absent)."""
        if self.current or self.version is None:
            return None
        what = (
            "marked stale (a projection write failed)"
            if self.version == 0
            else f"built by fold version {self.version}, this flightlog folds version {FOLD_VERSION}"
        )
        return f"runs projection {what}: not compared with the ledgers; {STALE_NOTE}"

    def tap(self, record: SessionRecord, stream: Iterable[StoredEvent]) -> Iterator[StoredEvent]:
        """Wrap the audit's row stream of ``record``'s session (the session row it read before the rows:
        ``audit_session(tap=)``): fold each row as it passes, rows unchanged, same order. A row whose event
        does not decode leaves the fold unused (the audit reports it ``undecodable``)."""
        session_id = record.session_id
        if not self.current or not is_run(session_id):
            yield from stream
            return
        folding = self._folding[session_id] = _Folding(SessionFold(SessionHeader.of(record)), record)
        for row in stream:
            if not folding.broken:
                _feed(folding, row)
            yield row

    def session(self, session_id: str, *, ok: bool, events: int) -> tuple[list[Divergence], list[str]]:
        """Compare the session's stored row with the fold :meth:`tap` made, once its audit is done.

        Args:
            session_id: The session.
            ok: The audit passed (else nothing is compared: unverified events are no evidence).
            events: The rows the audit verified.

        Returns:
            ``(divergences, notes)``: a :data:`PROJECTION_MISMATCH` per differing column, or one
            :data:`PROJECTION_MISSING`, at seq ``events - 1``; notes on what was not compared.

        Raises:
            SessionNotFound: the session is gone.
        """
        folding = self._folding.pop(session_id, None)
        if folding is None:
            return [], []
        if not ok or folding.broken or folding.fold.last_seq != events - 1:
            self._uncompared.append(session_id)
            return [], []
        fold, record = folding.fold, folding.record
        entries = fold.take_processes()  # as a rebuild does, before the row is rendered
        found = self._compared(session_id, fold, record) if events else ([], None)
        if found[0]:  # before reporting: had the session moved since its rows were read?
            record = self.store.get_session(session_id)  # after the row: an append changes both at once
            if record.head_seq + 1 != events:
                self._uncompared.append(session_id)
                return [], [
                    f"runs projection: not compared, the session moved to seq {record.head_seq} meanwhile"
                ]
            if record.status != folding.record.status:  # the status changed (no event): compare again
                found = self._compared(session_id, fold, record)
        self._events[session_id] = events
        self._entries.extend(entries)
        if not events:
            return [], []  # no fold, no row of its own (a process entry may name it: store_findings)
        self._own.add(session_id)
        divergences, process = found
        if not divergences:
            self._matched.add(session_id)
        if process is None or divergences:
            return divergences, []
        self._held.add(session_id)
        return [], [] if self.whole else [
            f"runs projection: the row's process entry is written from session {process.recorded_by!r}'s "
            "ledger: `verify --all` / `audit --all` check it"
        ]

    def _compared(
        self, session_id: str, fold: SessionFold, record: SessionRecord
    ) -> tuple[list[Divergence], ProcessEntry | None]:
        """The stored row of ``session_id`` against the row its verified ``fold`` renders with ``record``'s
        status and the row's own process entry: ``(divergences, that process entry)``."""
        seq = fold.last_seq
        parent = record.parent_session_id
        if parent is not None and type(parent) is not str:  # SQLite keeps what a raw write gives (a BLOB)
            detail = (
                f"runs row {session_id!r}: not compared: the sessions row's parent_session_id holds "
                f"{short(repr(parent), 40)} ({type(parent).__name__}), not text, so no snapshot renders from it"
            )
            return [Divergence(seq, PROJECTION_MISMATCH, detail)], None
        stored = self.store.get_run_rows([session_id]).get(session_id)
        # The row renders: the fold is the verified ledger's (events hold no lone surrogate, the header's
        # texts are checked above or by SessionHeader.of) and a stored process entry is read only when
        # ProcessEntry.from_json finds every field one an entry holds.
        process, unreadable = _stored_process(stored)
        expected = _row(session_id, _Parts(fold, process, record.status))
        if stored is None:
            detail = (
                f"the runs projection has no row for run {session_id!r}: the verified ledger folds to state "
                f"{expected.state!r}; {_REBUILD}"
            )
            return [Divergence(seq, PROJECTION_MISSING, detail)], None
        found = [
            Divergence(seq, PROJECTION_MISMATCH, _says(session_id, d)) for d in _differences(stored, expected)
        ]
        if unreadable:  # the fold column differs then; say why no process entry was used
            detail = f"runs row {session_id!r}: {unreadable}: compared without a process entry"
            found.append(Divergence(seq, PROJECTION_MISMATCH, detail))
        return found, process

    def store_findings(self) -> tuple[list[RunFinding], list[str]]:
        """After every session was checked (``--all``): the rows a process entry shapes, compared with
        the latest entry the verified ledgers hold, and listed rows no ledger accounts for.

        Returns:
            ``(findings, notes)``; nothing is compared (one note says why) when the projection is not
            current or some session did not pass its audit or moved during it (its process entries are
            unknown).
        """
        if not self.current:
            return [], []
        uncompared = self._uncompared or self._moved_since()
        if uncompared:
            names = ", ".join(uncompared[:3]) + (" ..." if len(uncompared) > 3 else "")
            return [], [
                "runs projection: sub-agent rows and listed runs no ledger holds not compared: "
                f"{len(uncompared)} session(s) did not verify or moved during the check ({names})"
            ]
        latest = _latest(self._entries)
        findings: list[RunFinding] = []
        for run_id, entry in sorted(latest.items()):
            findings.extend(self._entry_finding(run_id, entry))
        for run_id in sorted(self._held - set(latest)):  # a process entry no verified ledger holds
            findings.extend(self._recheck(run_id, None))
        listed = {str(row[0]) for row in self.store.query_run_tuples()}
        for run_id in sorted(listed - self._own - set(latest)):
            findings.extend(self._extra(run_id))
        return findings, []

    # ─── the whole-store pass ──────────────────────────────────────────────────────────────
    def _moved_since(self) -> list[str]:
        """The sessions appended to (or recorded) since their audit, in listing order (one listing)."""
        moved = []
        for record in self.store.list_sessions():
            sid = record.session_id
            if is_run(sid) and record.head_seq + 1 != self._events.get(sid, 0):
                moved.append(sid)
        return moved

    def _entry_finding(self, run_id: str, entry: ProcessEntry) -> list[RunFinding]:
        if run_id in self._own:
            return self._recheck(run_id, entry) if run_id in self._matched else []  # else reported already
        stored = self.store.get_run_rows([run_id]).get(run_id)
        if stored is None:
            state = _row(run_id, _Parts(None, entry, None)).state
            why = (
                f"run {run_id!r}: the runs projection has no row; session {entry.recorded_by!r}'s verified "
                f"ledger names it at seq {entry.seq} (state {state!r}); {_REBUILD}"
            )
            return [RunFinding(run_id, PROJECTION_MISSING, why)]
        return self._compare(run_id, stored, _Parts(None, entry, None))

    def _recheck(self, run_id: str, entry: ProcessEntry | None) -> list[RunFinding]:
        """A run's own row (equal to its verified fold, :meth:`session`) rendered with ``entry``, the
        process entry the verified ledgers hold, instead of the one it stores."""
        stored = self.store.get_run_rows([run_id]).get(run_id)
        if stored is None:
            return []  # deleted since its own check (a rebuild): the next check compares it
        try:
            fold = _own_fold(stored)
        except (ValueError, KeyError, TypeError):
            return []  # rewritten since its own check matched it (a live writer): the next check compares it
        return self._compare(run_id, stored, _Parts(fold, entry, stored.session_status))

    def _compare(self, run_id: str, stored: RunRow, parts: _Parts) -> list[RunFinding]:
        differ = _differences(stored, _row(run_id, parts))
        if not differ:
            return []
        columns = {column: {"stored": was, "folded": folded} for column, was, folded in differ}
        return [RunFinding(run_id, PROJECTION_MISMATCH, "; ".join(_says(run_id, d) for d in differ), columns)]

    def _extra(self, run_id: str) -> list[RunFinding]:
        try:
            record = self.store.get_session(run_id)
        except SessionNotFound:
            record = None
        stored = self.store.get_run_rows([run_id]).get(run_id)
        if stored is None:
            return []  # deleted meanwhile
        why = (
            f"run {run_id!r}: a listed runs row (state {stored.state!r}) that no verified ledger holds "
            f"({'no session' if record is None else 'a session without events'}, no process entry names it); {_REBUILD}"
        )
        return [RunFinding(run_id, PROJECTION_EXTRA, why)]


def _feed(folding: _Folding, row: StoredEvent) -> None:
    try:
        event = (
            decode_stored(row.event_bytes, seq=row.seq) if reads_event(row.kind, row.event_bytes) else None
        )
    except EventDecodeError:
        folding.broken = True  # the audit's own decode reports it, naming the seq
        return
    folding.fold.feed_row(row.seq, row.recorded_at_ms, row.kind, event)


def _stored_process(row: RunRow | None) -> tuple[ProcessEntry | None, str | None]:
    """The process entry a stored row's fold text holds, or ``(None, why)`` when the text is unreadable."""
    if row is None:
        return None, None
    try:
        data = json.loads(row.fold)
        entry = data.get("process") if isinstance(data, dict) else None
        return (ProcessEntry.from_json(entry) if entry else None), None
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        return None, f"its fold text holds no readable process entry ({short(str(exc), 80)})"


def _own_fold(row: RunRow) -> SessionFold:
    """The session fold of a row :meth:`ProjectionCheck.session` found equal to the verified one."""
    return SessionFold.from_json(json.loads(row.fold)["session"])


def _differences(stored: RunRow, expected: RunRow) -> list[tuple[str, Any, Any]]:
    return [
        (column, getattr(stored, column), getattr(expected, column))
        for column in _COLUMNS
        if getattr(stored, column) != getattr(expected, column)
    ]


def _says(run_id: str, difference: tuple[str, Any, Any]) -> str:
    """``runs row RUN column C: stored X, the verified ledger folds to Y`` (long text cut around the
    first difference)."""
    column, stored, folded = difference
    shown_stored, shown_folded = _around(stored, folded)
    return f"runs row {run_id!r} column {column}: stored {shown_stored}, the verified ledger folds to {shown_folded}"


def _around(stored: Any, folded: Any) -> tuple[str, str]:
    if not (isinstance(stored, str) and isinstance(folded, str)) or max(len(stored), len(folded)) <= _SHOWN:
        return repr(stored), repr(folded)
    start = next((i for i, (a, b) in enumerate(zip(stored, folded, strict=False)) if a != b), None)
    if start is None:
        start = min(len(stored), len(folded))
    start = max(0, start - 20)
    return _cut(stored, start), _cut(folded, start)


def _cut(text: str, start: int) -> str:
    piece = text[start : start + _SHOWN]
    return ("…" if start else "") + repr(piece) + ("…" if start + _SHOWN < len(text) else "")
