"""Opening a store while another connection holds the database's write lock waits for it (up to the busy
timeout) instead of failing: SQLite answers "database is locked" at once, without its busy handler, to the
``journal_mode = WAL`` switch every open makes. Two processes opening a new database together (one of them
creating and migrating it) made the other fail (seen in the two-writer LangGraph test under CI)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from flightlog.store import sqlite as sqlite_store


def test_open_waits_for_a_writer_holding_the_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "db.sqlite"
    holder = sqlite3.connect(path, isolation_level=None)  # a rollback-journal database, as a new one starts
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN IMMEDIATE")  # a writer mid-transaction, as the process creating the database is
    holder.execute("INSERT INTO t VALUES (1)")

    retrying = threading.Event()
    real_sleep = sqlite_store.time.sleep

    def sleep(seconds: float) -> None:  # the open is retrying: it found the lock taken and did not fail
        retrying.set()
        real_sleep(seconds)

    monkeypatch.setattr(sqlite_store.time, "sleep", sleep)
    outcome: list[object] = []

    def open_store() -> None:
        try:
            store = sqlite_store.SqliteStore(path, busy_timeout_ms=120_000)
        except Exception as exc:  # handed to the test thread, which fails with it
            outcome.append(exc)
            return
        outcome.append(store.schema_version())
        store.close()

    opener = threading.Thread(target=open_store)
    opener.start()
    while not retrying.wait(0.05):  # the state we need: the open has met the lock (or has failed)
        if not opener.is_alive():
            break
    assert not outcome, f"opening failed while the lock was held: {outcome!r}"
    holder.execute("COMMIT")
    opener.join(timeout=120)
    assert not opener.is_alive()
    holder.close()
    assert len(outcome) == 1 and isinstance(outcome[0], int) and outcome[0] > 0, outcome
