"""Two signed sessions appending to the one index log at once, from two connections, on PostgreSQL.

Every signed checkpoint is appended to the ledger-wide index log in its own transaction. On PostgreSQL
(READ COMMITTED) a writer that read the index head before another writer committed its leaf appended at a
taken position and failed its whole append with ``AppendConflict``; the index lock is now taken before the
head is read, so the second writer waits instead.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

import flightlog.integrity.indexlog as indexlog
from flightlog.events import Custom
from flightlog.integrity.indexlog import audit_index
from flightlog.integrity.notary import Notary
from flightlog.recorder import Recorder
from flightlog.store.postgres import PostgresStore

from .server import database_url

_WAITING = (
    "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
    "WHERE NOT l.granted AND c.relname = 'index_leaves'"
)


def _wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
    """Poll ``condition`` until it holds (a state, not a duration; the timeout only stops a hang)."""
    done = threading.Event()
    deadline = threading.Timer(timeout_s, done.set)
    deadline.start()
    try:
        while not condition():
            if done.wait(0.01):
                pytest.fail(f"gave up waiting for {what}")
    finally:
        deadline.cancel()


def test_a_writer_that_read_the_index_head_makes_the_other_wait(
    open_pg: Callable[..., PostgresStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    notary = Notary.from_env(every=1)  # a checkpoint, so an index leaf, per append
    first, second = open_pg(), open_pg()
    rec_a = Recorder.create(first, session_id="a", notary=notary)
    rec_b = Recorder.create(second, session_id="b", notary=notary)
    rec_a.append(Custom(custom_kind="step", payload=0))
    rec_b.append(Custom(custom_kind="step", payload=0))

    original = indexlog.index_tree
    b_done = threading.Event()
    b_errors: list[BaseException] = []
    main = threading.get_ident()

    def b_appends() -> None:
        try:
            rec_b.append(Custom(custom_kind="step", payload=1))
        except BaseException as exc:  # reported by the test thread
            b_errors.append(exc)
        finally:
            b_done.set()

    def b_waiting() -> bool:
        with psycopg.connect(database_url(), autocommit=True) as conn:
            row = conn.execute(_WAITING).fetchone()
        return bool(row and row[0])

    def a_reads_the_head(store: Any) -> Any:
        tree = original(store)
        if threading.get_ident() == main and not b_done.is_set() and not hasattr(a_reads_the_head, "ran"):
            a_reads_the_head.ran = True  # type: ignore[attr-defined]
            threading.Thread(target=b_appends).start()
            # B either commits its leaf now (A then appends at a taken position), or waits for A's lock.
            _wait_for(lambda: b_done.is_set() or b_waiting(), "B to commit or to wait for the index lock")
        return tree

    monkeypatch.setattr(indexlog, "index_tree", a_reads_the_head)
    rec_a.append(Custom(custom_kind="step", payload=1))  # raised AppendConflict before the lock moved
    _wait_for(b_done.is_set, "B to finish")
    assert b_errors == []
    report = audit_index(first, keyring=notary.keyring, heads=notary.heads)
    assert report.ok and report.leaves == 4
