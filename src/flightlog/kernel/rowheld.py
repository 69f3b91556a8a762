"""Runs the ``sessions`` row ends while their ledger waits: put back in the state their events give.

The runs read model lets a session's ``status`` settle a run its events leave in flight
(:func:`flightlog.runs.refine_with_status`: a plain ``Recorder.finish(status)`` writes no ``run_terminal``,
so the row is the only record of how such a session ended). The row is not hashed, though: an edit to
``completed`` must not end a run whose verified events hold an open wait (seed 002: durable outranks
live, nothing fabricated). :func:`held_by_ledger` is the check the surfaces that list runs (``flightlog
runs``, the dashboard) apply to what the read model gives: a run the row settled terminal whose ledger
waits, as :func:`flightlog.kernel.approvals.waiting_calls` (``flightlog pending``) decides it, is shown in
the state its events give, never as ended; ``flightlog verify`` reports the row as ``row_mismatch``.
"""

from __future__ import annotations

from dataclasses import replace

from ..errors import SessionNotFound
from ..live import RunView
from ..runs import AgentRunSnapshot, RunState, SessionFold, SessionHeader
from ..sessions import iter_events
from ..store.base import Store
from .approvals import waiting_calls

__all__ = ["SETTLED_BY_ROW", "held_by_ledger", "ledger_snapshot"]

SETTLED_BY_ROW = "session marked "
"""How the ``detail`` of a terminal the row's status made begins (:func:`flightlog.runs.refine_with_status`)."""


def held_by_ledger(store: Store, views: list[RunView]) -> tuple[list[RunView], set[str]]:
    """``views`` with every run the row's status settled terminal while its ledger holds an open wait put
    back in the state its events give (the session refolded, no status refinement), and the ids of those runs.

    Only a terminal whose ``detail`` begins with :data:`SETTLED_BY_ROW` is a candidate (a ``run_terminal``
    the events hold is the ledger's own); each candidate costs :func:`~flightlog.kernel.approvals.waiting_calls`
    (two stored rows decoded when the run ended, else a byte search, then one fold when it may wait), and one
    more fold when it is held.

    Raises:
        EventDecodeError: a held session's stored event does not decode (names its seq).
    """
    out: list[RunView] = []
    held: set[str] = set()
    for view in views:
        snapshot = view.snapshot
        terminal = snapshot.terminal
        if terminal is None or not (terminal.detail or "").startswith(SETTLED_BY_ROW):
            out.append(view)
            continue
        ledger = ledger_snapshot(store, snapshot)
        if ledger is None:
            out.append(view)
            continue
        held.add(snapshot.run_id)
        out.append(replace(view, snapshot=ledger, durable_state=ledger.state))
    return out, held


def ledger_snapshot(store: Store, snapshot: AgentRunSnapshot) -> AgentRunSnapshot | None:
    """``snapshot`` in the state the events of its session give (``terminal`` dropped), when its ledger
    holds an open wait (:func:`~flightlog.kernel.approvals.waiting_calls`) and its events leave it in
    flight; else None (the row's end stands: no session of its own, no open wait, or an import whose
    waits its app decides).

    Raises:
        EventDecodeError: a stored event does not decode (names its seq).
    """
    try:
        record = store.get_session(snapshot.run_id)
    except SessionNotFound:
        return None  # a process entry with no session of its own: no ledger to outrank the row
    if waiting_calls(store, record) is None:
        return None
    fold = SessionFold(SessionHeader.of(record)).feed_all(
        (row.seq, row.recorded_at_ms, event) for row, event in iter_events(store, record.session_id)
    )
    ledger = fold.snapshot()
    if ledger.state is RunState.TERMINAL:
        return None
    return snapshot.model_copy(update={"state": ledger.state, "terminal": None})
