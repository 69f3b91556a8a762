"""The ``runs`` projection over PostgreSQL: kept current per append (compare-and-set of the row the recorder
last wrote, else the general path), equal to a rebuild, and a failed row write never fails the append."""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from flightlog import events as ev
from flightlog import recorder as recorder_module
from flightlog.errors import StoreError
from flightlog.messages import Message, ToolCall, ToolResult
from flightlog.recorder import Recorder
from flightlog.runs import list_runs, projection_ready, rebuild_projection
from flightlog.store import Store
from flightlog.store.base import RunRow
from flightlog.store.postgres import PostgresStore
from runs.projection_races import (
    check_a_refold_locks_every_row_it_writes_at_once,
    check_an_edited_row_is_rewritten_by_the_next_append,
    check_concurrent_writers_lose_nothing,
)

from .server import blocked_by, database_url


def started() -> ev.RunStarted:
    return ev.RunStarted(run_id="r1", goal="do the thing")


def checkpoint() -> ev.CheckpointTaken:
    return ev.CheckpointTaken(turn=1, history_len=1)


def llm(turn: int, call: str) -> ev.LlmCompleted:
    message = Message.text("assistant", "ok").model_copy(
        update={"tool_calls": [ToolCall(id=call, name="sh")]}
    )
    return ev.LlmCompleted(turn=turn, message=message)


def requested(call: str) -> ev.ToolRequested:
    return ev.ToolRequested(turn=1, calls=[ToolCall(id=call, name="sh", arguments="{}")])


def completed(call: str) -> ev.ToolCompleted:
    return ev.ToolCompleted(turn=1, results=[ToolResult(call_id=call, output="done")])


def process(agent_id: str, state: str, parent: str) -> ev.AgentProcessChanged:
    return ev.AgentProcessChanged(
        turn=1,
        agent_id=agent_id,
        parent_session_id=parent,
        role="worker",
        isolation="none",
        context_inheritance="none",
        state=state,
    )


def _rows(store: Store) -> dict[str, RunRow]:
    return store.get_run_rows([listing.run_id for listing in store.query_runs()])


def test_incremental_projection_equals_a_rebuild(
    pg_store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = pg_store
    swaps: list[bool] = []  # True per deferred compare-and-set, False per one that fell back
    replace = store.replace_run_row_or

    def counted(row: RunRow, old: RunRow, fallback: Any) -> None:
        swaps.append(True)
        replace(row, old, lambda: swaps.append(False) or fallback())

    monkeypatch.setattr(store, "replace_run_row_or", counted)
    parent = Recorder.create(store, session_id="p")
    child = Recorder.create(store, session_id="c", parent_session_id="p")
    parent.append(started())
    for event in [started(), checkpoint(), llm(1, "c1"), requested("c1")]:
        child.append(event)
    parent.append(process("c", "running", "p"))  # a row of another run: the general path
    child.append(completed("c1"))  # its row moved under it: the general path again
    with pytest.raises(KeyError), child.atomic():
        child.append_many([checkpoint(), llm(2, "c2")])
        raise KeyError("abort")
    child.append(checkpoint())  # after a rollback: the general path
    child.finish("suspended")
    child.append(checkpoint())  # after a status change: the general path
    child.append(checkpoint())
    with store.transaction():  # a swap deferred inside a nested block that rolls back is dropped with it
        child.append(checkpoint())
        with pytest.raises(KeyError), child.atomic():
            child.append(llm(3, "c3"))
            raise KeyError("abort")
    assert store.get_run_rows(["c"])["c"].last_seq == store.get_session("c").head_seq
    parent.append(process("c", "exited", "p"))
    child.append(checkpoint())  # the swap fails at the commit (the parent moved the row): _apply there
    assert True in swaps and False in swaps
    assert projection_ready(store)
    incremental = _rows(store)
    listed = list_runs(store)
    rebuild_projection(store)
    assert _rows(store) == incremental
    assert list_runs(store) == listed


def test_a_swap_deferred_in_a_block_that_rolls_back_is_dropped(
    pg_store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The compare-and-set waits for the transaction's next round trip; a nested block that fails after
    the projector (here: another projector) takes it back with its events, so the commit never sends it."""
    recorder = Recorder.create(pg_store, session_id="s1")
    recorder.append(started())

    def failing(_recorder: Any, _batch: Any) -> None:
        raise KeyError("after the runs projector")

    monkeypatch.setattr(recorder_module, "_PROJECTORS", [*recorder_module._PROJECTORS, failing])
    with pg_store.transaction(), pytest.raises(KeyError):
        recorder.append(checkpoint())
    monkeypatch.undo()
    assert pg_store.get_session("s1").head_seq == 0
    assert pg_store.get_run_rows(["s1"])["s1"].last_seq == 0
    recorder.append(checkpoint())
    assert pg_store.get_run_rows(["s1"])["s1"].last_seq == 1 and projection_ready(pg_store)


def test_a_failed_row_write_never_fails_the_append(
    pg_store: PostgresStore, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A failing statement aborts a PostgreSQL transaction: the compare-and-set runs in a savepoint, so the
    append's transaction goes on (and commits) after the projector's failure."""
    recorder = Recorder.create(pg_store, session_id="s1")
    recorder.append(started())
    replace, upsert = pg_store.replace_run_row_or, pg_store.put_run_rows

    def out_of_range(row: RunRow, expected: RunRow, fallback: Any) -> None:
        replace(dataclasses.replace(row, updated_at_ms=2**63), expected, fallback)  # bigint overflow

    def out_of_range_rows(rows: Any) -> None:
        upsert([dataclasses.replace(row, updated_at_ms=2**63) for row in rows])

    # the deferred compare-and-set fails at the commit, then its fallback (the general path) fails too
    monkeypatch.setattr(pg_store, "replace_run_row_or", out_of_range)
    monkeypatch.setattr(pg_store, "put_run_rows", out_of_range_rows)
    with caplog.at_level(logging.ERROR, logger="flightlog.runs"):
        recorder.append(checkpoint())
    assert "projection failed" in caplog.text
    assert pg_store.get_session("s1").head_seq == 1  # the append is durable
    assert not projection_ready(pg_store)
    monkeypatch.undo()
    recorder.append(checkpoint())
    rebuild_projection(pg_store)
    assert projection_ready(pg_store) and [s.run_id for s in list_runs(pg_store)] == ["s1"]


def test_replace_run_row_failure_leaves_the_transaction_usable(pg_store: PostgresStore) -> None:
    row = RunRow("r", None, "direct", "running", None, 1, 0, None, "{}", "{}")
    pg_store.put_run_rows([row])
    bad: Any = dataclasses.replace(row, updated_at_ms=2**63, fold='{"f":1}')
    with pg_store.transaction():
        with pytest.raises(StoreError):
            pg_store.replace_run_row(bad, row)
        assert pg_store.replace_run_row(dataclasses.replace(row, fold='{"f":2}'), row)
    assert pg_store.get_run_rows(["r"])["r"].fold == '{"f":2}'


def test_a_swap_that_waits_for_another_writer_of_its_row_sees_that_write(pg_store: PostgresStore) -> None:
    """The race the compare-and-set closes, on PostgreSQL: the child's deferred swap (guarded by the row's
    ``session_status`` and ``fold``) waits for the row lock of the parent's uncommitted process entry for
    it; once that commits, the swap's guard is evaluated again on the new row, misses (the entry is in the
    fold's ``process``, while ``last_seq`` did not move), and the general path writes a row holding both.
    Observed through ``pg_blocking_pids``, no timer. A swap guarded by ``last_seq`` would overwrite the
    parent's entry with the child's cached row (checked by mutation, appendproj pass)."""
    store = pg_store
    parent = Recorder.create(store, session_id="p")
    child = Recorder.create(store, session_id="c", parent_session_id="p")
    parent.append(started())
    child.append(started())
    child.append(checkpoint())  # the child's recorder now holds the row it wrote: its next append swaps
    holding, release = threading.Event(), threading.Event()
    holder: list[int] = []
    failures: list[BaseException] = []

    def parent_entry() -> None:
        try:
            with parent.atomic():
                parent.append(process("c", "running", "p"))  # writes the child's row, holds its lock
                conn = store._tx.conn
                assert conn is not None
                holder.append(conn.info.backend_pid)
                holding.set()
                assert release.wait(60), "never released"
        except BaseException as exc:  # raised below, in the test's thread
            failures.append(exc)
            holding.set()

    def child_append() -> None:
        try:
            child.append(llm(1, "c1"))
        except BaseException as exc:  # raised below
            failures.append(exc)

    first = threading.Thread(target=parent_entry)
    first.start()
    assert holding.wait(60) and not failures, failures
    second = threading.Thread(target=child_append)
    second.start()
    blocked_by(holder[0])  # the child's commit pipeline waits for the child row's lock
    release.set()
    first.join(60)
    second.join(60)
    assert not first.is_alive() and not second.is_alive() and not failures, failures
    row = store.get_run_rows(["c"])["c"]
    assert row.last_seq == store.get_session("c").head_seq == 2
    assert '"state":"running"' in row.fold.split('"process":', 1)[1]  # the parent's entry was kept
    incremental = _rows(store)
    rebuild_projection(store)
    assert _rows(store) == incremental


def test_concurrent_writers_of_one_row_lose_nothing(pg_store: PostgresStore) -> None:
    """The four-writer scenario of ``tests/runs/projection_races.py`` on PostgreSQL: a child's appends, its
    parent's process entries for it, its status flips and rebuilds, each in its own thread; no writer's
    change is lost (the general path locks the rows it reads, pgrace pass)."""
    check_concurrent_writers_lose_nothing(pg_store, rebuilds=3)


def test_a_missed_swap_leaves_no_statement_named_prepared_that_the_server_skipped(
    pg_store: PostgresStore, open_pg: Callable[..., PostgresStore]
) -> None:
    """A swap that misses stops its pipeline: the server skips the statements after it, so a statement that
    psycopg prepares on that use (its ``prepare_threshold``-th) is never prepared, while psycopg's cache
    names it prepared (in a pipeline it checks a statement's result only on its first use); its next use
    then failed with ``prepared statement "_pg3_N" does not exist``. The store clears that cache after a
    failed pipeline (pgrace pass). On a fresh connection (a handle with one), so psycopg's counts are known.
    Without the fix it failed in 19 of 20 runs; in the other the statement after the swap was prepared for
    real (likely the swap's error reached psycopg before that statement was queued: a timing not controlled
    here)."""
    recorder = Recorder.create(pg_store, session_id="s1")
    recorder.append(started())
    row = pg_store.get_run_rows(["s1"])["s1"]
    moved = dataclasses.replace(row, fold=row.fold.replace('"v":', '"moved":1,"v":'))
    store = open_pg(min_size=1, max_size=1)
    fell_back: list[int] = []
    with store.transaction():
        conn = store._tx.conn
        assert conn is not None and conn.prepare_threshold is not None
        # A first miss while psycopg has nothing prepared: its ROLLBACK TO (which, checked, would clear
        # psycopg's cache) is counted, so from its next use on it is not checked.
        store.replace_run_row_or(row, moved, lambda: fell_back.append(0))
        assert store.get_run_rows(["s1"])["s1"] == row
        for _ in range(conn.prepare_threshold):  # the statement's next use is the one psycopg prepares
            assert store.get_session("s1").head_seq == 0
        store.replace_run_row_or(
            dataclasses.replace(row, updated_at_ms=1), moved, lambda: fell_back.append(1)
        )
        assert (
            store.get_session("s1").head_seq == 0
        )  # sent after the swap, in its pipeline: skipped, sent again
        assert fell_back == [0, 1]
        assert store.get_session("s1").head_seq == 0
    assert store.get_run_rows(["s1"])["s1"] == row


def test_a_refold_locks_every_row_it_writes_at_once(pg_store: PostgresStore) -> None:
    check_a_refold_locks_every_row_it_writes_at_once(pg_store)


def test_a_runs_row_edited_outside_flightlog_is_rewritten_by_the_next_append(
    pg_store: PostgresStore, pg_url: str
) -> None:
    schema = pg_url.rsplit("?schema=", 1)[1]

    def run_sql(sql: str) -> int:
        with psycopg.connect(database_url(), autocommit=True) as conn:
            conn.execute(f"SET search_path TO {schema}")
            return conn.execute(sql).rowcount

    check_an_edited_row_is_rewritten_by_the_next_append(pg_store, run_sql)
