"""Runs the ``sessions`` row ends while their ledger waits: put back in the state their events give.

The runs read model lets a session's ``status`` settle a run its events leave in flight
(:func:`flightlog.runs.refine_with_status`: a plain ``Recorder.finish(status)`` writes no ``run_terminal``,
so the row is the only record of how such a session ended). The row is not hashed, though: an edit to
``completed`` must not end a run whose verified events hold an open wait (seed 002: durable outranks
live, nothing fabricated). :func:`held_by_ledger` is the check the surfaces that list runs (``flightlog
runs``, the dashboard) apply to what the read model gives: a run the row settled terminal whose ledger
waits, as :func:`flightlog.kernel.approvals.waiting_calls` (``flightlog pending``) decides it, is shown in
the state its events give, never as ended; ``flightlog verify`` reports the row as ``row_mismatch``.

The filters agree with the unfiltered list: :func:`held_runs` finds the runs a state filter run in SQL on
the projection (which follows the row's status) would leave out, without folding every run: the rows the
status settles, the pass :func:`~flightlog.kernel.rowcheck.sessions_may_wait` over their events, a fold of
those that may wait. ``flightlog ls`` (sessions, not runs) reads :func:`held_sessions`: the same, or the
store-wide pass without a projection.

A candidate whose stored events do not decode (a tampered or corrupt row) cannot be decided: each function
takes an ``undecodable`` list as :func:`flightlog.runs.compute_runs` does; given one, such a session is
appended to it (with the error naming the seq) and left out, so one bad session does not fail the listing
of the rest (the surfaces name it: ``flightlog runs``/``ls`` warn and exit 1, the dashboard lists it under
``unreadable``); without one, the error is raised.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import replace

from ..errors import EventDecodeError, SessionNotFound
from ..live import RunView
from ..runs import AgentRunSnapshot, RunState, SessionFold, SessionHeader, projection_ready
from ..runs.adapters import STATUS_STATES
from ..runs.projection import Undecodable, pass_over
from ..sessions import iter_events
from ..store.base import NOT_A_RUN, RunRow, SessionRecord, Store
from .rowcheck import sessions_may_wait

__all__ = [
    "LEDGER_STATUS",
    "SETTLED_BY_ROW",
    "held_by_ledger",
    "held_in",
    "held_runs",
    "held_sessions",
    "held_state",
    "ledger_snapshot",
    "ledger_state",
    "listed_with_held",
    "with_held",
]

LEDGER_STATUS = "suspended"
"""The session status the ledger fixes for a run whose wait is open (what the kernel writes with the
``suspended`` event; :mod:`flightlog.kernel.rowcheck`): what ``flightlog ls`` shows for a held session."""

SETTLED_BY_ROW = "session marked "
"""How the ``detail`` of a terminal the row's status made begins (:func:`flightlog.runs.refine_with_status`)."""


def held_by_ledger(
    store: Store, views: list[RunView], *, undecodable: Undecodable | None = None
) -> tuple[list[RunView], set[str]]:
    """``views`` with every run the row's status settled terminal while its ledger holds an open wait put
    back in the state its events give (the session refolded, no status refinement), and the ids of those runs.

    Only a terminal whose ``detail`` begins with :data:`SETTLED_BY_ROW` is a candidate (a ``run_terminal``
    the events hold is the ledger's own); each candidate costs :func:`~flightlog.kernel.approvals.waiting_calls`
    (two stored rows decoded when the run ended, else a byte search, then one fold when it may wait), and one
    more fold when it is held.

    Args:
        store: The store.
        views: A runs listing (its order is kept).
        undecodable: When given, a candidate whose stored events do not decode is left out of the answer
            and appended to it, ``(run id, error naming the seq)``: whether its ledger waits is unknown.

    Raises:
        EventDecodeError: a candidate's stored event does not decode (names its seq) and ``undecodable``
            is None.
    """
    out: list[RunView] = []
    held: set[str] = set()
    for view in views:
        snapshot = view.snapshot
        terminal = snapshot.terminal
        if terminal is None or not (terminal.detail or "").startswith(SETTLED_BY_ROW):
            out.append(view)
            continue
        try:
            ledger = ledger_snapshot(store, snapshot)
        except EventDecodeError as exc:
            pass_over(undecodable, snapshot.run_id, exc)
            continue
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
    state = ledger_state(store, record)
    if state is None:
        return None
    return snapshot.model_copy(update={"state": state, "terminal": None})


def ledger_state(store: Store, record: SessionRecord) -> RunState | None:
    """The state the events of ``record``'s session give, when its ledger holds an open wait
    (:func:`~flightlog.kernel.approvals.waiting_calls`) and its events leave the run in flight; else None.

    Raises:
        EventDecodeError: a stored event does not decode (names its seq).
    """
    from .approvals import waiting_calls  # local: approvals loads the audit; only a candidate needs it

    if waiting_calls(store, record) is None:
        return None
    fold = SessionFold(SessionHeader.of(record)).feed_all(
        (row.seq, row.recorded_at_ms, event) for row, event in iter_events(store, record.session_id)
    )
    state = fold.snapshot().state
    return None if state is RunState.TERMINAL else state


def _ends_run(status: str | None) -> bool:
    """Whether a session status settles a run its events leave in flight as ended
    (:data:`~flightlog.runs.STATUS_STATES`: ``completed``, ``failed``...; not ``cancelled``: paused)."""
    return STATUS_STATES.get(status or "") is RunState.TERMINAL


def held_state(store: Store, record: SessionRecord) -> RunState | None:
    """The state the events give to ``record``'s run when its row's status ends the run while its ledger
    holds an open wait (a session :func:`held_sessions` names, shown ``suspended``, :data:`LEDGER_STATUS`,
    by ``flightlog ls``); else None. Costs nothing for a row that does not end the run, otherwise
    :func:`ledger_state` (the wait check, then one fold when it may wait).

    Raises:
        EventDecodeError: a stored event read to decide does not decode (names its seq).
    """
    return ledger_state(store, record) if _ends_run(record.status) else None


def held_sessions(store: Store, *, undecodable: Undecodable | None = None) -> dict[str, RunState]:
    """Every session whose row's status ends its run while its ledger holds an open wait, mapped to the
    state its events give (:func:`ledger_state`), found without folding every session: with the runs
    projection, the candidates :func:`held_runs` reads (the rows the status settles, the pass over their
    events); without it (missing or stale), the row's status of every session
    (:meth:`~flightlog.store.base.Store.session_keys`: no metadata decoded), then the store-wide pass
    :func:`~flightlog.kernel.rowcheck.sessions_may_wait`, and only a session in both is read again (its
    current row) and folded.

    Args:
        store: The store.
        undecodable: When given, a candidate whose stored events do not decode is left out and appended to
            it, ``(session id, error naming the seq)``: whether its ledger waits is unknown.

    Raises:
        EventDecodeError: a row read to decide does not decode (names its seq) and ``undecodable`` is None.
    """
    if projection_ready(store):
        return {row.run_id: snapshot.state for row, snapshot in held_runs(store, undecodable=undecodable)}
    ending = {key[0] for key in store.session_keys() if _ends_run(key[1])}
    held: dict[str, RunState] = {}
    # keys first: a row ended since is read below
    for sid in sorted(_may_wait(store, ending, undecodable, scan_all=True)):
        try:
            record = store.get_session(sid)
        except SessionNotFound:
            continue  # deleted since the pass: nothing left to list
        try:
            # None too when its row no longer ends it (changed since the keys)
            state = held_state(store, record)
        except EventDecodeError as exc:
            pass_over(undecodable, sid, exc)
            continue
        if state is not None:
            held[sid] = state
    return held


def held_runs(
    store: Store, state: RunState | str | None = None, *, undecodable: Undecodable | None = None
) -> list[tuple[RunRow, AgentRunSnapshot]]:
    """The ``runs`` projection rows of the runs :func:`held_by_ledger` puts back (the row's status settles
    the run terminal, its ledger holds an open wait), each with the snapshot it is listed with (the events'
    snapshot, in the state the ledger gives, ``terminal`` dropped), only those in ``state`` when given;
    newest ``updated_at_ms`` first, then ``run_id``. What a state filter run on the projection (which the
    row's status refines) leaves out of ``state`` (a non-terminal one) and keeps in ``terminal``.

    Without folding every run: the candidates are the rows the status settles terminal while their
    events hold the run in flight (in ``state`` when given: :meth:`~flightlog.store.base.Store.settled_runs`,
    indexed; none in an honest store but the sessions ``Recorder.finish`` ended), the pass
    (:func:`~flightlog.kernel.rowcheck.sessions_may_wait`, its search of the candidates' events only)
    keeps those whose ledger may wait, and only those are read again and folded (:func:`ledger_state`:
    the state listed is the fold's). ``undecodable`` as :func:`held_by_ledger` takes it.

    Raises:
        EventDecodeError: a stored event read to decide does not decode (names its seq) and ``undecodable``
            is None.
    """
    wanted = None if state is None else RunState(state)
    ending = [status for status in STATUS_STATES if _ends_run(status)]
    candidates = store.settled_runs(ending, None if wanted is None else wanted.value)
    if not candidates:
        return []
    found: list[tuple[RunRow, AgentRunSnapshot]] = []
    for run_id, row in sorted(store.get_run_rows(_may_wait(store, candidates, undecodable)).items()):
        if row.state in (RunState.TERMINAL.value, NOT_A_RUN) or not _ends_run(row.session_status):
            continue  # changed since the candidates were read: the row no longer settles it
        try:
            record = store.get_session(run_id)
        except SessionNotFound:
            continue  # deleted since: nothing left to list
        try:
            got = ledger_state(store, record)
        except EventDecodeError as exc:
            pass_over(undecodable, run_id, exc)
            continue
        if got is None or (wanted is not None and got is not wanted):
            continue
        snapshot = AgentRunSnapshot.model_validate_json(row.snapshot)
        found.append((row, snapshot.model_copy(update={"state": got, "terminal": None})))
    found.sort(key=lambda item: (-item[0].updated_at_ms, item[0].run_id))
    return found


def _may_wait(
    store: Store, among: Collection[str], undecodable: Undecodable | None, *, scan_all: bool = False
) -> set[str]:
    """Of ``among``, the sessions that may wait (:func:`~flightlog.kernel.rowcheck.sessions_may_wait`: its
    search of ``among``'s events only, or of every event with ``scan_all``, one pass). When a row
    the pass decodes does not decode and ``undecodable`` is given: every one of ``among`` (each is then
    decided on its own, so only a bad session is named).

    Raises:
        EventDecodeError: the pass fails and ``undecodable`` is None.
    """
    try:
        return sessions_may_wait(store, None if scan_all else among) & set(among)
    except EventDecodeError:
        if undecodable is None:
            raise
        return set(among)


def held_in(
    store: Store,
    state: str | None,
    *,
    source: str | None = None,
    parent: str | None = None,
    undecodable: Undecodable | None = None,
) -> list[tuple[RunRow, AgentRunSnapshot]]:
    """What a state filter on the projection leaves out of ``state`` (:func:`held_runs`), of ``source`` and
    ``parent`` when given: none without a filter (the listing puts such runs back itself:
    :func:`held_by_ledger`), for ``terminal`` (the filter keeps them there; :func:`with_held` drops them),
    or without a projection to read them from (a stale one is refolded by the listing).
    ``undecodable`` as :func:`held_by_ledger` takes it.

    Raises:
        EventDecodeError: a stored event read to decide does not decode (names its seq) and ``undecodable``
            is None.
    """
    if state is None or RunState(state).is_terminal() or not projection_ready(store):
        return []
    return [
        (row, snapshot)
        for row, snapshot in held_runs(store, state, undecodable=undecodable)
        if source in (None, row.source) and parent in (None, row.parent)
    ]


def with_held(
    store: Store,
    views: list[RunView],
    state: str | None,
    extra: list[tuple[RunRow, AgentRunSnapshot]],
    limit: int | None = None,
    *,
    undecodable: Undecodable | None = None,
) -> tuple[list[RunView], set[str]]:
    """``views`` (a listing filtered by ``state``, newest first) as the unfiltered listing shows its runs:
    every run the row settled terminal while its ledger waits in the state its events give
    (:func:`held_by_ledger`), dropped when that is not ``state``; ``extra`` (:func:`held_in`: those the
    filter left out) placed by their last event; at most ``limit``. Also the ids of the listed runs so
    held (each warned about by the surfaces). ``undecodable`` as :func:`held_by_ledger` takes it.

    Raises:
        EventDecodeError: a candidate's stored event does not decode (names its seq) and ``undecodable``
            is None.
    """
    views, held = held_by_ledger(store, views, undecodable=undecodable)
    if state is not None and held:  # a run the row ended that its ledger holds in another state
        views = [v for v in views if v.snapshot.run_id not in held or v.snapshot.state == state]
    listed = {v.snapshot.run_id for v in views}
    for row, snapshot in extra:
        if row.run_id in listed:
            continue  # listed by the filter after all (a row changed since): once
        view = RunView(snapshot, snapshot.state, None, False, row.updated_at_ms)
        key = (-row.updated_at_ms, row.run_id)
        at = next((i for i, v in enumerate(views) if (-(v.last_seen_ms or 0), v.snapshot.run_id) > key), None)
        views.insert(len(views) if at is None else at, view)
        held.add(row.run_id)
    views = views[:limit]
    return views, held & {v.snapshot.run_id for v in views}


def listed_with_held(
    store: Store,
    fetch: Callable[[int | None], list[RunView]],
    state: str | None,
    extra: list[tuple[RunRow, AgentRunSnapshot]],
    limit: int | None = None,
    *,
    undecodable: Undecodable | None = None,
) -> tuple[list[RunView], set[str]]:
    """:func:`with_held` over ``fetch(n)`` (a listing filtered by ``state``, newest first, of at most ``n``
    runs; None: all), with a full page: when the check leaves runs out of the first ``limit`` fetched (a run
    the row ended whose events do not decode, one its ledger holds in another state than ``state``), more
    are fetched (at least twice as many each time) until ``limit`` runs are listed or the listing has no
    more, so ``runs --limit N`` and the dashboard list N runs when the store holds N listable ones.
    Each fetch after the first repeats the check on the runs before (the sessions left out are reported
    once: ``undecodable`` gets those of the last fetch only). ``undecodable`` as :func:`held_by_ledger`
    takes it.

    Raises:
        EventDecodeError: a candidate's stored event does not decode (names its seq) and ``undecodable``
            is None.
    """
    want = limit
    while True:
        got = fetch(want)
        left: Undecodable | None = None if undecodable is None else []
        views, held = with_held(store, got, state, extra, limit, undecodable=left)
        if limit is None or want is None or len(views) >= limit or len(got) < want:
            if undecodable is not None and left is not None:
                undecodable.extend(left)
            return views, held
        want = max(2 * want, want + limit - len(views))  # runs were left out: fetch past them
