"""The async recorder (issue 16, item 5): appends from coroutines never block the event loop for the commit,
keep the recorder's write-ahead guarantee, order and errors, and settle a cancelled append (never in doubt).

Every test runs on SQLite and on PostgreSQL (tests/postgres/server.py: skipped without a server, except in
CI). No test times anything: a store whose write blocks on a ``threading.Event`` that only the event loop
sets proves the loop ran meanwhile (were it blocked, the write would time out and the test fail).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from flightlog.errors import AppendConflict, StaleWriter
from flightlog.events import Custom, RunStarted
from flightlog.recorder import verify_session
from flightlog.recorder_async import AsyncRecorder
from flightlog.store import SqliteStore
from flightlog.store.base import Store
from postgres.server import database_url, fresh_schema, schema_url

SID = "async-1"
TIMEOUT_S = 30.0
"""Overall bound on any wait: generous, reached only when the behaviour under test is broken."""


@pytest.fixture(params=["sqlite", "postgres"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Store]]:
    """``open_store()``: a new handle on one fresh database of the parametrized backend."""
    opened: list[Store] = []
    if request.param == "sqlite":
        path = tmp_path / "flightlog.db"

        def _open_sqlite() -> Store:
            opened.append(SqliteStore(path))
            return opened[-1]

        yield _open_sqlite
    else:
        from flightlog.store.postgres import PostgresStore

        database_url()
        with fresh_schema() as schema:

            def _open_pg() -> Store:
                opened.append(PostgresStore(schema_url(schema)))
                return opened[-1]

            yield _open_pg
            for store in opened:
                store.close()
            opened.clear()
    for store in opened:
        store.close()


@pytest.fixture
def store(open_store: Callable[[], Store]) -> Store:
    return open_store()


def _event(i: int) -> Custom:
    return Custom(custom_kind="test.async", payload={"i": i})


def _payloads(rows: list[Any]) -> list[int]:
    from flightlog.encoding import decode_stored

    return [decode_stored(row.event_bytes).payload["i"] for row in rows]


class _Gate:
    """Makes ``store.append_events`` wait, on the worker thread, until the loop releases it."""

    def __init__(self, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.released_in_time = True
        original = store.append_events

        def blocking(*args: Any, **kwargs: Any) -> int:
            self.entered.set()
            if not self.release.wait(TIMEOUT_S):
                self.released_in_time = False
                raise AssertionError("the event loop never ran while the append was in flight")
            return original(*args, **kwargs)

        monkeypatch.setattr(store, "append_events", blocking)

    async def wait_entered(self) -> None:
        assert await asyncio.to_thread(self.entered.wait, TIMEOUT_S), "the append never reached the store"


def test_round_trip(open_store: Callable[[], Store]) -> None:
    store = open_store()

    async def main() -> None:
        async with await AsyncRecorder.create(store, session_id=SID, task="t") as arec:
            first = await arec.append(RunStarted(run_id="r", goal="g", criteria=[]))
            rows = await arec.append_many([_event(1), _event(2)])
            custom = await arec.record_custom("note", {"x": 1})
            assert [first.seq, *(r.seq for r in rows), custom.seq] == [0, 1, 2, 3]
            assert (arec.next_seq, arec.head) == (4, custom.hash)
            stored = await arec.events()
            assert [r.hash for r in stored] == [first.hash, rows[0].hash, rows[1].hash, custom.hash]
            assert [r.seq for r in await arec.events(start=2)] == [2, 3]
            record = await arec.session()
            assert (record.head_seq, record.head_hash, record.merkle_root) == (3, arec.head, arec.root)
            handle = await arec.put_artifact(b"bytes", "text/plain")
            assert await arec.get_artifact(handle) == b"bytes"
            await arec.finish("completed")
            assert (await arec.session()).status == "completed"
        async with await AsyncRecorder.attach(open_store(), SID) as again:
            assert (again.next_seq, again.head, again.epoch) == (4, custom.hash, 1)
            assert (await again.append(_event(4))).seq == 4

    asyncio.run(main())
    assert verify_session(store, SID).ok


def test_many_coroutines_on_many_sessions_and_one_session(store: Store) -> None:
    sessions, per_session = 12, 6

    async def writer(arec: AsyncRecorder) -> None:
        for i in range(per_session):
            await arec.append(_event(i))

    async def main() -> None:
        arecs = [await AsyncRecorder.create(store, session_id=f"s{n}") for n in range(sessions)]
        await asyncio.wait_for(asyncio.gather(*(writer(a) for a in arecs)), TIMEOUT_S)
        for arec in arecs:
            assert _payloads(await arec.events()) == list(range(per_session))
            await arec.aclose()
        # Many coroutines on ONE recorder: seqs follow the order the appends started, none lost.
        async with await AsyncRecorder.create(store, session_id="shared") as shared:
            rows = await asyncio.wait_for(
                asyncio.gather(*(shared.append(_event(i)) for i in range(20))), TIMEOUT_S
            )
            assert [r.seq for r in rows] == list(range(20))
            assert _payloads(await shared.events()) == list(range(20))

    asyncio.run(main())
    for sid in [*(f"s{n}" for n in range(sessions)), "shared"]:
        assert verify_session(store, sid).ok


def test_the_loop_runs_while_an_append_commits(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    async def main() -> None:
        async with await AsyncRecorder.create(store, session_id=SID) as arec:
            gate = _Gate(store, monkeypatch)
            task = asyncio.create_task(arec.append(_event(0)))
            await gate.wait_entered()
            assert not task.done() and arec.next_seq == 0  # not durable yet: not returned, head unmoved
            asyncio.get_running_loop().call_soon(gate.release.set)  # only a running loop can release it
            row = await asyncio.wait_for(task, TIMEOUT_S)
            assert gate.released_in_time and row.seq == 0 and arec.next_seq == 1

    asyncio.run(main())
    assert [r.seq for r in store.read_events(SID)] == [0]


def test_cancelled_mid_append_completes_and_says_so(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    heard: list[int] = []

    async def main() -> None:
        async with await AsyncRecorder.create(store, session_id=SID) as arec:
            arec.subscribe(lambda row, _event: heard.append(row.seq))
            gate = _Gate(store, monkeypatch)
            task = asyncio.create_task(arec.append(_event(0)))
            await gate.wait_entered()
            task.cancel()
            asyncio.get_running_loop().call_soon(gate.release.set)
            with pytest.raises(asyncio.CancelledError) as info:
                await asyncio.wait_for(task, TIMEOUT_S)
            # When the cancellation surfaces, the append has settled: durable, head moved, subscribers told.
            assert arec.next_seq == 1 and heard == [0]
            assert task.cancelled()
            assert any("completed durably: seq 0" in note for note in getattr(info.value, "__notes__", []))
            [outcome] = arec.cancelled_outcomes
            assert (outcome.operation, [r.seq for r in outcome.stored], outcome.error) == (
                "append",
                [0],
                None,
            )
            assert _payloads(await arec.events()) == [0]

    asyncio.run(main())
    assert verify_session(store, SID).ok


def test_cancelled_before_it_started_never_writes(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    async def main() -> None:
        async with await AsyncRecorder.create(store, session_id=SID) as arec:
            gate = _Gate(store, monkeypatch)
            first = asyncio.create_task(arec.append(_event(0)))
            await gate.wait_entered()
            queued = asyncio.create_task(arec.append(_event(1)))
            await asyncio.sleep(0)  # one loop step: the queued append is submitted behind the first
            queued.cancel()
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(queued, TIMEOUT_S)
            gate.release.set()
            assert (await asyncio.wait_for(first, TIMEOUT_S)).seq == 0
            assert arec.cancelled_outcomes == []
            assert _payloads(await arec.events()) == [0]  # the withdrawn append never ran
            assert (await arec.append(_event(2))).seq == 1

    asyncio.run(main())
    assert verify_session(store, SID).ok


def test_cancelled_mid_append_that_fails_writes_nothing(
    open_store: Callable[[], Store], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store()

    async def main() -> None:
        async with await AsyncRecorder.create(store, session_id=SID) as arec:
            await arec.append(_event(0))
            await asyncio.to_thread(open_store().bump_authority_epoch, SID)  # another writer fences it off
            gate = _Gate(store, monkeypatch)
            task = asyncio.create_task(arec.append(_event(1)))
            await gate.wait_entered()
            task.cancel()
            gate.release.set()
            with pytest.raises(asyncio.CancelledError) as info:
                await asyncio.wait_for(task, TIMEOUT_S)
            assert isinstance(info.value.__context__, StaleWriter)
            [outcome] = arec.cancelled_outcomes
            assert outcome.stored == [] and isinstance(outcome.error, StaleWriter)
            assert arec.next_seq == 1 and _payloads(await arec.events()) == [0]

    asyncio.run(main())
    assert verify_session(store, SID).ok


def test_errors_surface_unchanged(open_store: Callable[[], Store]) -> None:
    store = open_store()

    async def main() -> None:
        async with await AsyncRecorder.create(store, session_id=SID) as old:
            await old.append(_event(0))
            with pytest.raises(AppendConflict):
                await AsyncRecorder.create(store, session_id=SID)
            async with await AsyncRecorder.attach(open_store(), SID) as new:
                before = (old.next_seq, old.head, old.root)
                with pytest.raises(StaleWriter) as info:
                    await old.append(_event(1))
                assert (info.value.session_id, info.value.epoch, info.value.current_epoch) == (SID, 0, 1)
                with pytest.raises(StaleWriter):
                    await old.append_many([_event(1), _event(2)])
                assert (old.next_seq, old.head, old.root) == before
                assert (await new.append(_event(1))).seq == 1

    asyncio.run(main())
    assert [r.seq for r in store.read_events(SID)] == [0, 1]
    assert verify_session(store, SID).ok


def test_a_worker_thread_per_recorder_is_stopped_on_close(store: Store) -> None:
    async def main() -> set[str]:
        async with await AsyncRecorder.create(store, session_id=SID) as arec:
            names: set[str] = set()
            arec.subscribe(lambda _row, _event: names.add(threading.current_thread().name))
            await arec.append(_event(0))
            await arec.append(_event(1))
            return names

    names = asyncio.run(main())
    assert len(names) == 1 and next(iter(names)).startswith("flightlog-arecorder-")
    assert not any(t.name in names for t in threading.enumerate())
