"""Writers of one ``runs`` row at once: what the projection must not lose, whichever writer's transaction
comes first (the append's compare-and-set of its row is guarded by the row's ``session_status`` and
``fold``; the general path locks the rows it reads, ``Store.lock_run_rows``, then upserts them; a rebuild
holds the ``runs`` table per chunk, ``Store.hold_run_rows``).

Run on SQLite (``tests/runs/test_runs_projection.py``), whose writers take the database's write lock for
their whole transaction, and on PostgreSQL (``tests/postgres/test_runs_projection.py``), where the row
locks serialise the writers. On PostgreSQL this scenario found (appendproj pass) and the pgrace pass fixed:
the general path's unlocked read and upsert let a child's append overwrite its parent's concurrent process
entry (4-5 of 10 runs lost a change); and a pipeline aborted by a missed swap left psycopg's
prepared-statement cache naming a statement the server skipped (``prepared statement "_pg3_2" does not
exist``; pinned by a deterministic test beside the PostgreSQL one)."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Collection

from flightlog import events as ev
from flightlog.recorder import Recorder
from flightlog.runs import projection_ready, rebuild_projection
from flightlog.store import Store
from flightlog.store.base import RunRow

from .conftest import checkpoint, process, started

_JOIN_S = 300.0
"""How long a writer thread may take (generous: a shared 2-core machine); nothing waits on a timer."""


def _rows(store: Store) -> dict[str, RunRow]:
    return store.get_run_rows(["p", "c"])


def _together(*works: Callable[[], None]) -> None:
    """Run each work in its own thread, started together; re-raise the first failure."""
    start = threading.Barrier(len(works))
    failures: list[BaseException] = []

    def body(work: Callable[[], None]) -> None:
        try:
            start.wait(timeout=_JOIN_S)
            work()
        except BaseException as exc:  # handed to the main thread below
            failures.append(exc)

    threads = [threading.Thread(target=body, args=(work,)) for work in works]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=_JOIN_S)
    assert not any(thread.is_alive() for thread in threads), "a writer thread did not finish"
    if failures:
        raise failures[0]


def check_concurrent_writers_lose_nothing(store: Store, *, rounds: int = 25, rebuilds: int = 0) -> None:
    """A child's recorder appends while its parent's recorder appends process entries naming it and its
    status flips (and ``rebuilds`` rebuilds run), each in its own thread. Each of those writers moves the
    child's row: its ``fold`` (the child's events; the parent's entry, in the fold's ``process``) or its
    ``session_status``. Afterwards the projection is current, the child's row holds its last event, its
    parent's last entry and its last status, and it equals a rebuild: no writer's change was lost."""
    parent = Recorder.create(store, session_id="p")
    child = Recorder.create(store, session_id="c", parent_session_id="p")
    parent.append(ev.RunStarted(run_id="p", goal="delegate"))
    child.append(ev.RunStarted(run_id="c", goal="work"))

    def parent_work() -> None:
        for n in range(rounds):
            parent.append(process("c", "running" if n % 2 else "paused"))
        parent.append(process("c", "running"))

    def child_work() -> None:
        for n in range(rounds):
            child.append(ev.CheckpointTaken(turn=n + 1, history_len=1))

    def status_work() -> None:
        for n in range(rounds):
            store.set_session_status("c", "suspended" if n % 2 else "running")
        store.set_session_status("c", "running")

    def rebuild_work() -> None:
        for _ in range(rebuilds):
            rebuild_projection(store)

    _together(parent_work, child_work, status_work, *([rebuild_work] if rebuilds else []))
    assert projection_ready(store)
    incremental = _rows(store)
    row = incremental["c"]
    assert row.last_seq == store.get_session("c").head_seq == rounds
    assert row.session_status == "running"
    assert '"state":"running"' in row.fold.split('"process":', 1)[1]
    assert row.state == "waiting_model"
    rebuild_projection(store)
    assert _rows(store) == incremental


def check_a_refold_locks_every_row_it_writes_at_once(store: Store) -> None:
    """A general path whose refold (its stored fold unreadable: another fold version) names a sub-agent its
    batch does not runs again locking the sub-agent's row with its own in one sorted statement (no second
    lock statement, so no lock-order exception); the rows it writes equal a rebuild."""
    parent = Recorder.create(store, session_id="p")
    Recorder.create(store, session_id="c", parent_session_id="p")
    parent.append(ev.RunStarted(run_id="p", goal="delegate"))
    parent.append(process("c", "running"))
    stored = store.get_run_rows(["p"])["p"]
    store.put_run_rows(
        [dataclasses.replace(stored, fold='{"v":0}')]
    )  # an older fold: the next append refolds
    locks: list[list[str]] = []
    lock = store.lock_run_rows

    def counted(run_ids: Collection[str]) -> dict[str, RunRow]:
        locks.append(sorted(run_ids))
        return lock(run_ids)

    store.lock_run_rows = counted  # type: ignore[method-assign]
    try:
        parent.append(ev.CheckpointTaken(turn=1, history_len=1))
    finally:
        del store.lock_run_rows
    assert locks == [["p"], ["c", "p"]]
    assert projection_ready(store)
    incremental = _rows(store)
    assert '"state":"running"' in incremental["c"].fold
    rebuild_projection(store)
    assert _rows(store) == incremental


ROW_EDITS = (
    "state = 'terminal', outcome = 'completed'",
    "parent = 'evil'",
    "source = 'evil'",
    "snapshot = replace(snapshot, 'waiting_model', 'terminal')",
)
"""SQL ``SET`` clauses that edit a ``runs`` row's computed columns, its ``fold`` and status left alone."""


def check_an_edited_row_is_rewritten_by_the_next_append(store: Store, run_sql: Callable[[str], int]) -> None:
    """An edit of a row's ``state``, ``outcome``, ``parent``, ``source`` or ``snapshot`` in SQL (``run_sql``
    runs one statement outside flightlog and returns its row count) makes the append's compare-and-set miss
    (it compares every column), so the general path rewrites the row from the fold: no edit survives the next
    append, and the row equals a rebuild (bebf6ae's two-column guard kept the edit, and ``runs`` listed an
    open session ``terminal``)."""
    recorder = Recorder.create(store, session_id="s1")
    recorder.append(started())
    recorder.append(checkpoint())
    for edit in ROW_EDITS:
        assert run_sql(f"UPDATE runs SET {edit} WHERE run_id = 's1'") == 1, edit
        recorder.append(checkpoint())
        incremental = store.get_run_rows(["s1"])
        row = incremental["s1"]
        assert (row.state, row.outcome, row.parent) == ("waiting_model", None, None), edit
        assert row.source != "evil" and "waiting_model" in row.snapshot, edit
        rebuild_projection(store)
        assert store.get_run_rows(["s1"]) == incremental, edit
