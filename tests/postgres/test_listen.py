"""LISTEN fan-out (flightlog.store.pglisten): several threads waiting on one PostgresStore each see every
commit they wait for. Before it, one shared connection handed each notification to whichever waiter held
it: a thread waiting for session B could swallow A's notification and the thread waiting for A slept to
its timeout. The timeouts below are generous; the assertions are on what each wait returned. Session ids
are unique (the channel is database-wide, and other runs may share the server), and "no wake-up" is read
with a zero timeout once a later commit's notification has arrived (notifications arrive in commit order).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable

from flightlog.events import Custom
from flightlog.recorder import Recorder
from flightlog.store.postgres import PostgresStore
from flightlog.testing.concurrency import in_thread


def _unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:12]}"


def test_every_waiter_is_woken_by_its_own_session(open_pg: Callable[..., PostgresStore]) -> None:
    writer = open_pg()
    watcher = open_pg(read_only=True)
    recs = {sid: Recorder.create(writer, session_id=sid) for sid in map(_unique, ("a", "b", "c"))}
    ready = threading.Barrier(4)

    def waiter(sid: str) -> object:
        assert watcher.wait_for_events(0, session_id=sid) is True  # a thread's first call: re-read
        ready.wait(60)
        return watcher.wait_for_events(60, session_id=sid)

    started = {sid: in_thread(lambda sid=sid: waiter(sid)) for sid in recs}  # type: ignore[misc]
    ready.wait(60)
    for sid in reversed(recs):
        recs[sid].append(Custom(custom_kind="t", payload={"sid": sid}))
    for sid, (thread, out) in started.items():
        thread.join(90)
        assert out == [True], f"the waiter of {sid} missed its commit: {out}"


def test_a_commit_between_two_calls_wakes_the_next_call(open_pg: Callable[..., PostgresStore]) -> None:
    writer, watcher = open_pg(), open_pg()
    sid, marker = _unique("s"), _unique("marker")
    rec, mark = Recorder.create(writer, session_id=sid), Recorder.create(writer, session_id=marker)
    assert watcher.wait_for_events(0, session_id=sid) is True
    assert watcher.wait_for_events(0, session_id=marker) is True
    assert watcher.wait_for_events(0, session_id=sid) is False
    rec.append(Custom(custom_kind="t", payload={}))
    assert watcher.wait_for_events(60, session_id=sid) is True
    mark.append(Custom(custom_kind="t", payload={}))
    assert watcher.wait_for_events(60, session_id=marker) is True
    assert watcher.wait_for_events(0, session_id=sid) is False, "one commit, one wake-up"


def test_any_session_waiters_and_close(open_pg: Callable[..., PostgresStore]) -> None:
    writer, watcher = open_pg(), open_pg()
    sid = _unique("s")
    rec = Recorder.create(writer, session_id=sid)
    listening = threading.Event()

    def waits(session_id: str | None) -> object:
        first = watcher.wait_for_events(0, session_id=session_id)  # a thread's first call: re-read
        listening.set()
        return first, watcher.wait_for_events(60, session_id=session_id)

    t, out = in_thread(lambda: waits(None))
    assert listening.wait(60)
    rec.append(Custom(custom_kind="t", payload={}))
    t.join(90)
    assert out == [(True, True)]

    listening.clear()
    t, out = in_thread(lambda: waits(sid))  # a session no other run can commit to: only close ends it
    assert listening.wait(60)
    watcher.close()
    t.join(90)
    assert out == [(True, False)], "closing the store ends a wait"
