"""Round trips per append on PostgreSQL (issue 19: at most 2), counted, not timed.

libpq traces every protocol message the store's one pooled connection sends; a round trip is a message the
client then waits on (``Sync`` ends an extended-protocol batch or pipeline, ``Query`` is a simple query).
A lone ``Recorder.append`` sends one: its statement is deferred to the commit, which sends ``BEGIN``, the
check-and-insert (failing unless it wrote), the runs-row compare-and-set with the retirement check,
``COMMIT`` and ``NOTIFY`` in one pipeline. An append the store cannot defer (``Store.append_events`` called
directly, a transaction that already sent something) sends ``BEGIN`` with the check-and-insert first (the
head it locked comes back): two.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from psycopg import pq

from flightlog import events as ev
from flightlog.errors import AppendConflict, StaleWriter
from flightlog.recorder import Recorder
from flightlog.runs import list_runs, projection_ready, rebuild_projection
from flightlog.store import postgres
from flightlog.store.base import NewEvent, SessionHead
from flightlog.store.postgres import PostgresStore


@contextlib.contextmanager
def _trace(store: PostgresStore) -> Iterator[Callable[[], list[list[str]]]]:
    """Trace the store's single pooled connection; yields a function reading the trace's lines so far."""
    with tempfile.TemporaryDirectory() as tmp, (Path(tmp) / "trace").open("w") as sink:
        with store._pool.connection() as conn:
            pgconn = conn.pgconn
        pgconn.trace(sink.fileno())  # libpq writes it line-buffered
        pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        try:
            yield lambda: [line.split("\t") for line in Path(sink.name).read_text().splitlines()]
        finally:
            pgconn.untrace()


@contextlib.contextmanager
def traced(store: PostgresStore) -> Iterator[Callable[[], int]]:
    """Trace the store's single pooled connection; yields a function counting the round trips so far."""
    with _trace(store) as lines:
        yield lambda: sum(1 for parts in lines() if parts[0] == "F" and parts[2] in ("Sync", "Query"))


def test_a_lone_append_is_one_round_trip(open_pg: Callable[..., PostgresStore]) -> None:
    store = open_pg(min_size=1, max_size=1)
    recorder = Recorder.create(store, session_id="s1")
    recorder.append(ev.RunStarted(run_id="r1", goal="count round trips"))
    with traced(store) as round_trips:
        for turn in range(10):
            before = round_trips()
            recorder.append(ev.CheckpointTaken(turn=turn, history_len=turn))
            assert round_trips() - before == 1, f"append {turn}: {round_trips() - before} round trips"
        recorder.append_many([ev.CheckpointTaken(turn=n, history_len=n) for n in range(5)])
        assert round_trips() == 11
    assert store.get_session("s1").head_seq == 15
    assert projection_ready(store) and list_runs(store)[0].run_id == "s1"


def test_the_one_statement_append_refuses_as_the_shared_checks(
    open_pg: Callable[..., PostgresStore],
) -> None:
    """A stale epoch or a taken seq: the shared checks' error, nothing written, the transaction usable."""
    store = open_pg(min_size=1, max_size=1)
    recorder = Recorder.create(store, session_id="s1")
    recorder.append(ev.RunStarted(run_id="r1", goal="g"))
    rival = Recorder.attach(store, "s1")  # bumps the epoch: the first recorder is fenced
    with pytest.raises(StaleWriter):
        recorder.append(ev.CheckpointTaken(turn=1, history_len=1))
    rival.append(ev.CheckpointTaken(turn=1, history_len=1))
    stale_head = SessionHead(1, "1" * 64, rival.root)
    with store.transaction():
        with pytest.raises(AppendConflict) as conflict:
            store.append_events("s1", [NewEvent(1, "custom", b"{}", "0" * 64, "1" * 64)], stale_head)
        assert conflict.value.seq == 1
        rival.append(ev.CheckpointTaken(turn=2, history_len=2))  # the transaction goes on
    assert store.get_session("s1").head_seq == 2
    assert [(e.seq, e.kind) for e in store.read_events("s1")][1:] == [
        (1, "checkpoint_taken"),
        (2, "checkpoint_taken"),
    ]
    assert list_runs(store)[0].run_id == "s1" and projection_ready(store)


def _sent(store: PostgresStore, during: Callable[[], None]) -> list[str]:
    """The statements (``Parse`` and simple ``Query`` texts) the store's one connection sent while ``during``
    ran."""
    with _trace(store) as lines:
        during()
        sent = lines()
    texts = {"Parse": 3, "Query": 1}  # where the statement's text is among the message's quoted strings
    return [parts[3].split('"')[texts[parts[2]]] for parts in sent if parts[0] == "F" and parts[2] in texts]


def test_a_lone_append_whose_row_swap_fails_is_redone_whole(open_pg: Callable[..., PostgresStore]) -> None:
    """A lone append sends its run-row compare-and-set without a savepoint; when the row moved under it
    (here: a status change) the transaction is rolled back and redone (the append, then the projector's
    general path), so the events are written once and the row equals a rebuild."""
    store = open_pg(min_size=1, max_size=1)
    recorder = Recorder.create(store, session_id="s1")
    recorder.append(ev.RunStarted(run_id="r1", goal="redo"))
    recorder.append(ev.CheckpointTaken(turn=0, history_len=0))
    store.set_session_status("s1", "suspended")  # the trigger moves the run row's session_status
    sent = _sent(store, lambda: recorder.append(ev.CheckpointTaken(turn=1, history_len=1)))
    assert "ROLLBACK" in sent and sent.count("BEGIN") == 2  # the swap failed; the transaction redone
    assert [e.seq for e in store.read_events("s1")] == [0, 1, 2]
    assert store.get_session("s1").head_seq == 2
    row = store.get_run_rows(["s1"])["s1"]
    assert row.last_seq == 2 and row.session_status == "suspended"
    recorder.append(ev.CheckpointTaken(turn=2, history_len=2))  # and the next one swaps again
    incremental = store.get_run_rows(["s1"])
    rebuild_projection(store)
    assert store.get_run_rows(["s1"]) == incremental and projection_ready(store)


def test_notify_goes_after_the_commit_and_its_failure_fails_no_append(
    open_pg: Callable[..., PostgresStore], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """``NOTIFY`` runs after ``COMMIT`` (in a transaction of its own, so commits of different sessions are not
    serialised on PostgreSQL's notification-queue lock); when it fails the append is durable and returns."""
    store = open_pg(min_size=1, max_size=1)
    recorder = Recorder.create(store, session_id="s1")
    recorder.append(ev.RunStarted(run_id="r1", goal="notify"))
    sent = _sent(store, lambda: recorder.append(ev.CheckpointTaken(turn=0, history_len=0)))
    assert sent.index("COMMIT") < next(i for i, sql in enumerate(sent) if "pg_notify" in sql)
    monkeypatch.setattr(postgres, "_NOTIFY_ONE", "SELECT pg_notify(%s, %s::int::text)")  # 's1'::int fails
    with caplog.at_level(logging.WARNING, logger="flightlog.store.postgres"):
        stored = recorder.append(ev.CheckpointTaken(turn=1, history_len=1))
    assert "NOTIFY after a durable commit failed" in caplog.text
    assert stored.seq == 2 and store.get_session("s1").head_seq == 2
    monkeypatch.undo()
    assert recorder.append(ev.CheckpointTaken(turn=2, history_len=2)).seq == 3
    assert store.get_run_rows(["s1"])["s1"].last_seq == 3


def test_a_deferred_append_refused_at_the_commit_writes_nothing(
    open_pg: Callable[..., PostgresStore], caplog: pytest.LogCaptureFixture
) -> None:
    """A stale writer's lone append (deferred to its commit) is refused there: ``StaleWriter``, no event, the
    run row not advanced (its compare-and-set was in the same pipeline, after the refused statement), the
    recorder's head back where it was, and no psycopg warning about the statements the refusal skipped
    (``postgres._pipeline``); the writer holding authority goes on."""
    store = open_pg(min_size=1, max_size=1)
    recorder = Recorder.create(store, session_id="s1")
    recorder.append(ev.RunStarted(run_id="r1", goal="g"))
    recorder.append(ev.CheckpointTaken(turn=0, history_len=0))
    row = store.get_run_rows(["s1"])["s1"]
    rival = Recorder.attach(store, "s1")
    with traced(store) as round_trips, caplog.at_level(logging.WARNING, logger="psycopg"):
        with pytest.raises(StaleWriter):
            recorder.append(ev.CheckpointTaken(turn=1, history_len=1))
        # the pipeline, its ROLLBACK, psycopg's DEALLOCATE ALL after a failed pipeline, the head's read
        assert round_trips() <= 4
    assert [r.getMessage() for r in caplog.records if r.name.startswith("psycopg")] == []
    assert store.get_session("s1").head_seq == 1 and recorder.next_seq == 2
    assert store.get_run_rows(["s1"])["s1"] == row
    rival.append(ev.CheckpointTaken(turn=1, history_len=1))
    assert [e.seq for e in store.read_events("s1")] == [0, 1, 2]
    assert store.get_run_rows(["s1"])["s1"].last_seq == 2 and projection_ready(store)


def test_a_failed_statement_in_a_pipeline_raises_itself_and_logs_nothing(
    pg_store: PostgresStore, caplog: pytest.LogCaptureFixture
) -> None:
    """A statement that fails in a pipeline (as a refused deferred append or a missed run-row swap does)
    is the error raised; the statements after it, which PostgreSQL skips ('pipeline aborted'), add no
    'error ignored terminating <psycopg.Pipeline>' warning (psycopg logged one on every such path); the
    connection is usable after it."""
    import psycopg
    from psycopg import errors as pg_errors

    with psycopg.connect(pg_store._conninfo, autocommit=True) as conn, caplog.at_level(logging.WARNING):
        with pytest.raises(pg_errors.DivisionByZero), postgres._pipeline(conn):
            conn.execute("SELECT 1 / 0")
            conn.execute("SELECT 2")
            conn.execute("SELECT 3")
        assert conn.execute("SELECT 4").fetchone() == (4,)
        # alone in its pipeline, the error surfaces only when the pipeline syncs
        with pytest.raises(pg_errors.DivisionByZero), postgres._pipeline(conn):
            conn.execute("SELECT 1 / 0")
    assert "error ignored" not in caplog.text
    assert [r for r in caplog.records if r.name.startswith("psycopg")] == []
