"""A SQLite store's open transaction belongs to the thread that opened it.

The store has one connection shared by every thread. A write from another thread made while that
transaction is open must wait for it to end, never slip into it: otherwise the write is acknowledged before
anything committed and vanishes if the transaction rolls back (found in an attack run: an ``append_events``
outside any block saw the other thread's depth and skipped its own transaction).

The interleaving is forced: the block holds the store open until the other thread has either finished its
write or is seen waiting for the store, then fails.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from flightlog.store import SqliteStore
from flightlog.store.base import SessionRecord
from flightlog.testing.concurrency import in_thread, until
from flightlog.testing.store_contract import chained_rows


@pytest.fixture(params=[True, False], ids=["group-commit", "no-group-commit"])
def store(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[SqliteStore]:
    s = SqliteStore(tmp_path / "owner.db", group_commit=request.param)
    yield s
    s.close()


class _Boom(Exception):
    pass


def _fail_while(store: SqliteStore, other: Callable[[], object]) -> list[object]:
    """Open a block on one thread, run ``other`` on a second one, and once ``other`` has returned or waits
    for the store, fail the block. Returns ``other``'s result list (its value or exception)."""
    opened = threading.Event()
    box: list[list[object]] = []

    def block() -> object:
        with store.transaction():
            store.append_events("mine", *chained_rows(["rolled back"]))
            opened.set()
            until(lambda: bool(box) and (bool(box[0]) or store._gate.waiting >= 1), what="the other write")
            raise _Boom

    holder, held = in_thread(block)
    assert opened.wait(60), "the block never opened"
    thread, out = in_thread(other)
    box.append(out)
    holder.join(60)
    thread.join(60)
    assert not holder.is_alive() and not thread.is_alive(), "a thread hung"
    assert len(held) == 1 and isinstance(held[0], _Boom), held
    return out


def test_an_append_outside_a_block_waits_for_another_threads_block(store: SqliteStore) -> None:
    for sid in ("mine", "theirs"):
        store.create_session(SessionRecord(session_id=sid))
    out = _fail_while(store, lambda: store.append_events("theirs", *chained_rows(["acknowledged"])))
    assert len(out) == 1 and isinstance(out[0], int), f"the append failed: {out}"
    assert [e.seq for e in store.read_events("theirs")] == [0], "an acknowledged append was rolled back"
    assert store.get_session("theirs").head_seq == 0
    assert list(store.read_events("mine")) == [] and store.get_session("mine").head_seq == -1


def test_a_write_block_of_another_thread_is_its_own_transaction(store: SqliteStore) -> None:
    for sid in ("mine", "theirs"):
        store.create_session(SessionRecord(session_id=sid))

    def other() -> object:
        with store.transaction():
            store.append_events("theirs", *chained_rows(["acknowledged"]))
        return "done"

    assert _fail_while(store, other) == ["done"]
    assert [e.seq for e in store.read_events("theirs")] == [0]


def test_after_commit_callbacks_of_another_thread_are_refused_outside_its_block(store: SqliteStore) -> None:
    """Registering outside one's own block fails, even while another thread's block is open (before, the
    callback joined that block and ran, or not, with its outcome)."""
    store.create_session(SessionRecord(session_id="mine"))
    ran: list[str] = []

    def register() -> object:
        for register in (store.call_after_commit, store.call_after_rollback):
            with pytest.raises(RuntimeError, match="outside a transaction"):
                register(lambda: ran.append("ran"))
        return "refused"

    assert _fail_while(store, register) == ["refused"]
    assert ran == []
