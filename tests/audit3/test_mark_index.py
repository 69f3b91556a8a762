"""The approvals queue's pass reads the ``events_suspended`` partial index (the database's own index of the
events whose stored bytes hold :data:`SUSPENDED_MARK`, ``store/ddl.py``) instead of a byte search of every
stored event, on SQLite and PostgreSQL: the planner uses it (EXPLAIN), an in-place edit of a row's bytes
moves it (the database keeps it), a store migrated from before it gets it, and a store without it (a
read-only handle on an old store, the index dropped by hand) answers the same by the full search."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from typing import Any

import pytest

from flightlog.encoding import canonical_bytes
from flightlog.events import Custom, RunStarted
from flightlog.kernel.rowcheck import SUSPENDED_MARK, sessions_may_wait
from flightlog.store import Store, ddl, open_store, postgres, sqlite
from flightlog.store.sql import SqlStore
from flightlog.web import views

from .helpers import connect, execute, suspended_run
from .test_wait_pass import end, record, suspend


def pass_sql(
    store: SqlStore, needle: bytes = SUSPENDED_MARK, among: list[str] | None = None
) -> tuple[str, Any]:
    """The pass's statement and parameters as :meth:`SqlStore.marked_ends` runs them (captured)."""
    seen: list[tuple[str, Any]] = []
    run = store._all

    def capture(sql: str, params: Any = ()) -> list[Any]:
        seen.append((sql, params))
        return run(sql, params)

    store._all = capture  # type: ignore[method-assign]
    try:
        store.marked_ends(needle, among)
    finally:
        del store._all
    [found] = [(sql, params) for sql, params in seen if "WITH m AS" in sql]
    return found


def pass_plan(store: SqlStore, url: str, among: list[str] | None = None) -> str:
    """The plan of the pass's statement (:meth:`SqlStore.marked_ends` for ``SUSPENDED_MARK``), as text:
    SQLite's ``EXPLAIN QUERY PLAN`` details; PostgreSQL's ``EXPLAIN`` with sequential scans priced out
    (a tiny table is cheaper to scan: the question is whether the planner may use the index at all)."""
    sql, params = pass_sql(store, among=among)
    if "://" not in url:
        return "\n".join(str(row[3]) for row in store._all("EXPLAIN QUERY PLAN " + sql, params))
    raw = connect(url)
    try:
        raw.execute("SET enable_seqscan = off")
        return "\n".join(row[0] for row in raw.execute("EXPLAIN " + sql.replace("?", "%s"), params))
    finally:
        raw.rollback()
        raw.close()


def has_index(url: str) -> bool:
    """Whether the store at ``url`` has the ``events_suspended`` index (its catalogue, read raw)."""
    if "://" in url:
        import psycopg

        base, _, schema = url.partition("?schema=")
        with psycopg.connect(base, options=f"-c search_path={schema}") as conn:
            row = conn.execute("SELECT to_regclass('events_suspended')").fetchone()
            return row is not None and row[0] is not None
    with closing(sqlite3.connect(url)) as raw:
        return (
            raw.execute("SELECT 1 FROM sqlite_master WHERE name = 'events_suspended'").fetchone() is not None
        )


def waits_and_ends(url: str) -> str:
    """A store holding one wait (the approval agent's), one ended run and one run that never suspended."""
    waits = suspended_run(url)
    with open_store(url) as store:
        record(store, "ended", RunStarted(run_id="ended", goal="g"), suspend(), end())
        record(store, "never", RunStarted(run_id="never", goal="g"), Custom(custom_kind="note", payload={}))
    return waits


def test_the_pass_reads_the_partial_index(url: str) -> None:
    waits = waits_and_ends(url)
    assert has_index(url)
    with open_store(url, read_only=True) as store:
        assert isinstance(store, SqlStore)
        assert "events_suspended" in pass_plan(store, url)
        assert sessions_may_wait(store) == {waits}
        assert store.marked_ends(SUSPENDED_MARK) == Store.marked_ends(store, SUSPENDED_MARK)
        among = [waits, "ended", "never", "gone"]
        assert store.marked_ends(SUSPENDED_MARK, among) == Store.marked_ends(store, SUSPENDED_MARK, among)
        assert sessions_may_wait(store, among) == {waits}
        assert "events_suspended" in pass_plan(store, url, among)
        other = b'"kind":"run_started"'  # any other needle: the byte search of every event, bound
        assert other in pass_sql(store, other)[1]
        assert store.marked_ends(other) == Store.marked_ends(store, other)


def test_an_in_place_edit_of_the_bytes_moves_the_index(url: str) -> None:
    """The index is the database's, kept on every write: a row edited behind flightlog's back (triggers
    off) to hold the mark is found, and a wait's row edited to lose it is not, as the full search says."""
    waits = waits_and_ends(url)
    with open_store(url) as store:
        record(
            store, "planted", RunStarted(run_id="planted", goal="g"), Custom(custom_kind="note", payload={})
        )
        [(seq, data)] = [
            row[:2] for page in store.read_chain(waits) for row in page if SUSPENDED_MARK in row[1]
        ]
    hidden = data.replace(SUSPENDED_MARK, b'"kind":"suspendeD"')
    execute(
        url,
        f"UPDATE events SET event = {blob(url, hidden)} WHERE session_id = '{waits}' AND seq = {seq}",
        f"UPDATE events SET event = {blob(url, canonical_bytes(suspend()))} WHERE session_id = 'planted' AND seq = 1",
    )
    with open_store(url, read_only=True) as store:
        assert isinstance(store, SqlStore)
        assert "events_suspended" in pass_plan(store, url)
        found = store.marked_ends(SUSPENDED_MARK)
        assert found == Store.marked_ends(store, SUSPENDED_MARK)
        assert set(found) == {"planted", "ended"}
        assert sessions_may_wait(store) == {"planted"}


def blob(url: str, data: bytes) -> str:
    """``data`` as a SQL literal of the backend's bytes type."""
    return f"decode('{data.hex()}', 'hex')" if "://" in url else f"X'{data.hex()}'"


def test_a_store_without_the_index_answers_the_same(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read-only handle on a store from before the index's migration (the index dropped by hand stands
    in for it, and on SQLite the listing's ``sessions_created`` index too) finds the same waits by the
    byte search of every event, and the dashboard's queue lists them."""
    monkeypatch.setattr(views, "SET_PASS", 0)
    waits = waits_and_ends(url)
    execute(url, "DROP INDEX IF EXISTS events_suspended", "DROP INDEX sessions_created")
    with open_store(url, read_only=True) as store:
        assert isinstance(store, SqlStore)
        assert "events_suspended" not in pass_plan(store, url)
        assert store.marked_ends(SUSPENDED_MARK) == Store.marked_ends(store, SUSPENDED_MARK)
        assert sessions_may_wait(store) == {waits}
        queue = views.PendingCache().queue(store)
        assert [(c.session_id, c.call_id) for calls in queue.suspended.values() for c in calls] == [
            (waits, "n1")
        ]


def test_a_migrated_store_gets_the_index(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store recorded by the schema before the index's migration gets it (over the rows it holds) when a
    writable handle opens it; a read-only handle before that reads the store by the full search."""
    module: Any = postgres if "://" in url else sqlite
    current = list(module.MIGRATIONS)
    index = ddl.POSTGRES_EVENTS_SUSPENDED if "://" in url else ddl.SQLITE_EVENTS_SUSPENDED
    monkeypatch.setattr(module, "MIGRATIONS", current[: current.index(index)])
    with open_store(url):  # the schema before the index's migration
        pass
    # This code writes live records with the columns a later migration adds (ddl.LIVE_RUNS_OWNER): there
    # while the rows are written, gone again as that schema had them.
    live_columns = ("host", "owner")
    execute(url, *(f"ALTER TABLE live_runs ADD COLUMN {column} TEXT" for column in live_columns))
    waits = waits_and_ends(url)
    execute(url, *(f"ALTER TABLE live_runs DROP COLUMN {column}" for column in live_columns))
    assert not has_index(url)
    with open_store(url, read_only=True) as store:
        assert sessions_may_wait(store) == {waits}
    monkeypatch.setattr(module, "MIGRATIONS", current)
    with open_store(url) as store:
        assert isinstance(store, SqlStore)
        assert store.schema_version() == len(current)
    assert has_index(url)
    with open_store(url, read_only=True) as store:
        assert isinstance(store, SqlStore)
        assert "events_suspended" in pass_plan(store, url)
        assert sessions_may_wait(store) == {waits}


def test_an_index_redefined_to_leave_a_wait_out_is_not_read(url: str) -> None:
    """Whoever owns the database may replace the index with one under the same name that leaves a session
    out (its ``WHERE`` one condition longer): the pass's clause no longer implies that ``WHERE``, so the
    planner cannot read it, and the full search still finds the wait."""
    waits = waits_and_ends(url)
    contains = (postgres.PostgresStore if "://" in url else sqlite.SqliteStore).MARK_CONTAINS
    clause = contains.format(hex=SUSPENDED_MARK.hex())
    execute(
        url,
        "DROP INDEX events_suspended",
        f"CREATE INDEX events_suspended ON events(session_id, seq) WHERE {clause} AND session_id <> '{waits}'",
    )
    with open_store(url, read_only=True) as store:
        assert isinstance(store, SqlStore)
        assert "events_suspended" not in pass_plan(store, url)
        assert sessions_may_wait(store) == {waits}
        assert store.marked_ends(SUSPENDED_MARK) == Store.marked_ends(store, SUSPENDED_MARK)
