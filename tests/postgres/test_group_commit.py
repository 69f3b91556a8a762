"""Group commit on PostgreSQL (``PostgresStore(group_commit=True)``): blocks of several threads that end
together share one transaction (the rows carry the same ``xmin``), a failed block undoes only itself, a
failed COMMIT fails every block of its group and restores the recorders' heads, and listeners hear of a
group only after it commits. Interleavings are forced (a block holds the writer until the others are seen
waiting for it), not timed. See flightlog.store.group.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from flightlog.errors import StoreError
from flightlog.events import Custom
from flightlog.recorder import Recorder, verify_session
from flightlog.store.postgres import PostgresStore
from flightlog.testing.concurrency import in_thread, until, until_waiting


def _custom(n: int) -> Custom:
    return Custom(custom_kind="g", payload={"n": n})


def _held_first(store: PostgresStore, recorder: Recorder, release: threading.Event) -> threading.Thread:
    def first() -> None:
        with recorder.atomic():
            recorder.append(_custom(0))
            release.wait(60)

    t = threading.Thread(target=first)
    t.start()
    until(
        lambda: store._gate is not None and store._gate.group is not None
    )  # the first block opened the group
    return t


def _append_in_block(
    store: PostgresStore,
    recorder: Recorder,
    release: threading.Event | None = None,
    inside: threading.Event | None = None,
) -> int:
    """Append one event in a block; returns the block's top-level transaction id (txid_current() is the
    top-level id even inside a savepoint). With ``release``, the block stays open until it is set (and
    sets ``inside`` once it holds its transaction)."""
    with recorder.atomic():
        recorder.append(_custom(recorder.next_seq))
        assert store._tx.conn is not None
        xid = int(store._tx.conn.execute("SELECT txid_current()").fetchone()[0])
        if inside is not None:
            inside.set()
        if release is not None:
            release.wait(60)
    return xid


def test_blocks_ending_together_share_one_transaction(open_pg: Callable[..., PostgresStore]) -> None:
    store = open_pg(group_commit=True)
    recs = [Recorder.create(store, session_id=f"s{i}") for i in range(3)]
    release = threading.Event()
    t0, out0 = in_thread(lambda: _append_in_block(store, recs[0], release))
    until(
        lambda: store._gate is not None and store._gate.group is not None
    )  # the first block opened the group
    t1, out1 = in_thread(lambda: _append_in_block(store, recs[1]))
    t2, out2 = in_thread(lambda: _append_in_block(store, recs[2]))
    until_waiting(store._gate, 2)
    release.set()
    for t in (t0, t1, t2):
        t.join(60)
    assert len({*out0, *out1, *out2}) == 1, ("three blocks, one transaction", out0, out1, out2)
    for r in recs:
        assert verify_session(store, r.session_id).ok
        assert [e.seq for e in store.read_events(r.session_id)] == [0]


def test_without_group_commit_each_block_is_its_own_transaction(
    open_pg: Callable[..., PostgresStore],
) -> None:
    store = open_pg()
    recs = [Recorder.create(store, session_id=f"s{i}") for i in range(3)]
    release, inside = threading.Event(), threading.Event()
    t0, out0 = in_thread(lambda: _append_in_block(store, recs[0], release, inside))
    assert inside.wait(60)  # the first block holds its transaction open
    t1, out1 = in_thread(lambda: _append_in_block(store, recs[1]))
    t1.join(60)
    done_while_open = list(out1)
    release.set()
    t0.join(60)
    assert done_while_open, "the second block waited for the first one's transaction to end"
    assert out0 and out1[0] != out0[0], "blocks of two threads ran in two transactions at once"


def test_a_failed_block_undoes_only_itself(open_pg: Callable[..., PostgresStore]) -> None:
    store = open_pg(group_commit=True)
    ok, bad = Recorder.create(store, session_id="ok"), Recorder.create(store, session_id="bad")
    release = threading.Event()

    def failing() -> object:
        with bad.atomic():
            bad.append(_custom(1))
            raise RuntimeError("tool crashed mid-turn")

    t0 = _held_first(store, ok, release)
    t1, out1 = in_thread(failing)
    until_waiting(store._gate, 1)
    release.set()
    t0.join(60)
    t1.join(60)
    assert isinstance(out1[0], RuntimeError)
    assert [e.seq for e in store.read_events("ok")] == [0]
    assert list(store.read_events("bad")) == []
    assert (bad.next_seq, bad.head) == (0, "GENESIS")
    assert bad.append(_custom(2)).seq == 0


def test_a_failed_commit_fails_every_block(open_pg: Callable[..., PostgresStore]) -> None:
    store = open_pg(group_commit=True)
    a, b = Recorder.create(store, session_id="a"), Recorder.create(store, session_id="b")
    writer = store._writer_connection()
    writer.execute("CREATE TEMP TABLE parent (id text PRIMARY KEY)")
    writer.execute("CREATE TEMP TABLE child (p text REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED)")
    heard: list[int] = []
    a.subscribe(lambda row, _e: heard.append(row.seq))
    release = threading.Event()
    done_a: list[object] = []

    def first() -> None:
        try:
            with a.atomic():
                a.append(_custom(0))
                release.wait(60)
        except BaseException as exc:
            done_a.append(exc)

    def poisons_the_commit() -> object:
        with b.atomic():
            b.append(_custom(1))
            assert store._tx.conn is not None
            store._tx.conn.execute("INSERT INTO child VALUES ('no such parent')")  # checked at COMMIT
        return b.next_seq

    t0 = threading.Thread(target=first)
    t0.start()
    until(lambda: store._gate is not None and store._gate.group is not None)
    t1, out1 = in_thread(poisons_the_commit)
    until_waiting(store._gate, 1)
    release.set()
    t0.join(60)
    t1.join(60)
    assert isinstance(out1[0], StoreError) and len(done_a) == 1 and isinstance(done_a[0], StoreError)
    assert list(store.read_events("a")) == [] and list(store.read_events("b")) == []
    assert (a.next_seq, b.next_seq) == (0, 0) and heard == []
    assert a.append(_custom(3)).seq == 0 and verify_session(store, "a").ok


@pytest.mark.parametrize("sessions", [8])
def test_many_threads_every_append_durable_and_notified(
    open_pg: Callable[..., PostgresStore], sessions: int
) -> None:
    store = open_pg(group_commit=True, max_size=4)
    watcher = open_pg()
    recs = [Recorder.create(store, session_id=f"t{i}") for i in range(sessions)]
    barrier = threading.Barrier(sessions)

    def work(r: Recorder) -> None:
        barrier.wait()
        for n in range(25):
            r.append(_custom(n))

    woke, listening = threading.Event(), threading.Event()

    def listen() -> None:
        session = recs[0].session_id
        watcher.wait_for_events(0, session_id=session)  # the first call LISTENs (and returns at once)
        listening.set()
        if watcher.wait_for_events(60, session_id=session):
            woke.set()

    listener = threading.Thread(target=listen)
    listener.start()
    assert listening.wait(60)  # LISTENing before the first commit
    threads = [threading.Thread(target=work, args=(r,)) for r in recs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    listener.join(90)
    assert woke.is_set(), "a group's commit woke a LISTENer"
    for r in recs:
        report = verify_session(store, r.session_id)
        assert report.ok and report.events == 25
