"""LISTEN fan-out (flightlog.store.pglisten): several threads waiting on one PostgresStore each see every
commit they wait for. Before it, one shared connection handed each notification to whichever waiter held
it: a thread waiting for session B could swallow A's notification and the thread waiting for A slept to
its timeout. The timeouts below are generous; the assertions are on what each wait returned.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from flightlog.events import Custom
from flightlog.recorder import Recorder
from flightlog.store.postgres import PostgresStore
from flightlog.testing.concurrency import in_thread


def test_every_waiter_is_woken_by_its_own_session(open_pg: Callable[..., PostgresStore]) -> None:
    writer = open_pg()
    watcher = open_pg(read_only=True)
    recs = {sid: Recorder.create(writer, session_id=sid) for sid in ("a", "b", "c")}
    ready = threading.Barrier(4)

    def waiter(sid: str) -> object:
        assert watcher.wait_for_events(0.01, session_id=sid) is True  # a thread's first call: re-read
        ready.wait(10)
        return watcher.wait_for_events(20, session_id=sid)

    started = {sid: in_thread(lambda sid=sid: waiter(sid)) for sid in recs}  # type: ignore[misc]
    ready.wait(10)
    for sid in ("c", "b", "a"):
        recs[sid].append(Custom(custom_kind="t", payload={"sid": sid}))
    for sid, (thread, out) in started.items():
        thread.join(30)
        assert out == [True], f"the waiter of {sid} missed its commit: {out}"


def test_a_commit_between_two_calls_wakes_the_next_call(open_pg: Callable[..., PostgresStore]) -> None:
    writer, watcher = open_pg(), open_pg()
    rec = Recorder.create(writer, session_id="s")
    assert watcher.wait_for_events(0.01, session_id="s") is True
    assert watcher.wait_for_events(0.05, session_id="s") is False
    rec.append(Custom(custom_kind="t", payload={}))
    assert watcher.wait_for_events(20, session_id="s") is True
    assert watcher.wait_for_events(0.05, session_id="s") is False, "one commit, one wake-up"


def test_any_session_waiters_and_close(open_pg: Callable[..., PostgresStore]) -> None:
    writer, watcher = open_pg(), open_pg()
    rec = Recorder.create(writer, session_id="s")
    listening = threading.Event()

    def waits() -> object:
        first = watcher.wait_for_events(0.01)  # a thread's first call: re-read
        listening.set()
        return first, watcher.wait_for_events(20)

    t, out = in_thread(waits)
    listening.wait(10)
    rec.append(Custom(custom_kind="t", payload={}))
    t.join(30)
    assert out == [(True, True)]

    listening.clear()
    t, out = in_thread(waits)
    listening.wait(10)
    watcher.close()
    t.join(30)
    assert out == [(True, False)], "closing the store ends a wait"
