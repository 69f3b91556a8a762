"""Group commit on the SQLite store: blocks of several threads share one COMMIT, and nothing changes for a
caller: a block returns only once durable, a failed block undoes only itself, a failed COMMIT fails every
block of its group, and a read never sees a block that has not committed. See flightlog.store.group.

The interleavings are forced, not timed: a block holds the store until the other threads are seen waiting
for it (the gate's waiting count), so the grouping each test asserts is the only one possible.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from flightlog.errors import StoreError
from flightlog.events import Custom
from flightlog.recorder import Recorder, verify_session
from flightlog.store import SqliteStore, open_store
from flightlog.testing.concurrency import in_thread, until, until_waiting
from flightlog.testing.crashpoints import ENV


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    s = SqliteStore(tmp_path / "group.db")
    yield s
    s.close()


def _count_commits(store: SqliteStore) -> list[str]:
    seen: list[str] = []
    store._conn.set_trace_callback(lambda sql: seen.append(sql) if sql in ("COMMIT", "ROLLBACK") else None)
    return seen


def _custom(n: int) -> Custom:
    return Custom(custom_kind="g", payload={"n": n})


def _interleave(store: SqliteStore, first: Recorder, *others: Callable[[], object]) -> list[list[object]]:
    """Run a block appending to ``first`` that holds the store until each of ``others`` (started on their
    own threads) waits for it; returns each one's result list, ``first``'s (its next seq) first."""
    release = threading.Event()

    def held() -> object:
        with first.atomic():
            first.append(_custom(0))
            release.wait(60)
        return first.next_seq

    t0, out0 = in_thread(held)
    until(lambda: store._depth > 0)  # the first block is open and holds the store
    started = [in_thread(fn) for fn in others]
    until_waiting(store._gate, len(others))
    release.set()
    for thread, _ in [(t0, out0), *started]:
        thread.join(60)
    return [out0, *(out for _, out in started)]


def test_blocks_ending_together_share_one_commit(store: SqliteStore) -> None:
    recs = [Recorder.create(store, session_id=f"s{i}") for i in range(3)]
    commits = _count_commits(store)
    outs = _interleave(
        store, recs[0], lambda: recs[1].append(_custom(1)).seq, lambda: recs[2].append(_custom(2)).seq
    )
    assert outs == [[1], [0], [0]]
    assert commits == ["COMMIT"], "three blocks that ended together committed once"
    for r in recs:
        assert verify_session(store, r.session_id).ok
        assert store.get_session(r.session_id).head_seq == 0


def test_a_failed_block_in_a_group_undoes_only_itself(store: SqliteStore) -> None:
    ok, bad = Recorder.create(store, session_id="ok"), Recorder.create(store, session_id="bad")
    commits = _count_commits(store)

    def failing() -> object:
        with bad.atomic():
            bad.append(_custom(1))
            raise RuntimeError("tool crashed mid-turn")

    out_ok, out_bad = _interleave(store, ok, failing)
    assert out_ok == [1]
    assert isinstance(out_bad[0], RuntimeError)
    assert commits == ["COMMIT"]
    assert [e.seq for e in store.read_events("ok")] == [0]
    assert list(store.read_events("bad")) == []
    assert bad.next_seq == 0 and bad.head == "GENESIS", "the failed block's recorder head was restored"
    assert bad.append(_custom(2)).seq == 0, "and it appends again from there"


def test_a_failed_commit_fails_every_block_of_the_group(store: SqliteStore) -> None:
    a, b = Recorder.create(store, session_id="a"), Recorder.create(store, session_id="b")
    store._conn.execute("CREATE TEMP TABLE parent (id TEXT PRIMARY KEY)")
    store._conn.execute(
        "CREATE TEMP TABLE child (p TEXT REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED)"
    )
    heard: list[int] = []
    a.subscribe(lambda row, _e: heard.append(row.seq))
    b.subscribe(lambda row, _e: heard.append(row.seq))

    def poisons_the_commit() -> object:
        with b.atomic():
            b.append(_custom(1))
            # A deferred foreign key is checked at COMMIT: the shared COMMIT fails, for both blocks.
            store._conn.execute("INSERT INTO temp.child VALUES ('no such parent')")
        return b.next_seq

    out_a, out_b = _interleave(store, a, poisons_the_commit)
    assert isinstance(out_a[0], StoreError) and isinstance(out_b[0], StoreError), (out_a, out_b)
    assert list(store.read_events("a")) == [] and list(store.read_events("b")) == []
    assert (a.next_seq, b.next_seq) == (0, 0), "both recorders' heads were restored"
    assert heard == [], "no subscriber heard of an event that never committed"
    assert a.append(_custom(3)).seq == 0 and verify_session(store, "a").ok


def test_a_read_commits_the_open_group_before_it_reads(store: SqliteStore) -> None:
    rec = Recorder.create(store, session_id="r")
    commits = _count_commits(store)
    out_rec, out_read = _interleave(store, rec, lambda: [e.seq for e in store.read_events("r")])
    assert out_rec == [1]
    assert out_read == [[0]], "the reader saw the block, committed before its read"
    assert commits == ["COMMIT"]


def test_without_group_commit_every_block_commits_alone(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "solo.db", group_commit=False)
    recs = [Recorder.create(store, session_id=f"s{i}") for i in range(2)]
    commits = _count_commits(store)
    _interleave(store, recs[0], lambda: recs[1].append(_custom(1)))
    assert commits == ["COMMIT", "COMMIT"]
    store.close()


def test_many_threads_many_sessions_every_append_durable_and_chained(store: SqliteStore) -> None:
    sessions, per = 12, 40
    recorders = [Recorder.create(store, session_id=f"t{i}") for i in range(sessions)]
    commits = _count_commits(store)
    barrier = threading.Barrier(sessions)

    def work(r: Recorder) -> None:
        barrier.wait()
        for n in range(per):
            if n % 5 == 4:
                r.append_many([_custom(n), _custom(n)])
            else:
                r.append(_custom(n))

    threads = [threading.Thread(target=work, args=(r,)) for r in recorders]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    transactions = sessions * per
    assert 0 < commits.count("COMMIT") <= transactions
    for r in recorders:
        report = verify_session(store, r.session_id)
        assert report.ok and report.events == r.next_seq == per + per // 5


WRITER = r"""
import sys, threading
from flightlog.errors import SessionNotFound
from flightlog.events import Custom
from flightlog.recorder import Recorder
from flightlog.store import open_store

path, threads, base = sys.argv[1], int(sys.argv[2]), sys.argv[3]
store = open_store(path)
out_lock = threading.Lock()
attached = threading.Barrier(threads)  # every COMMIT after the first `threads` ones is a group of appends

def work(i):
    sid = f"{base}-{i}"
    try:
        try:
            rec = Recorder.attach(store, sid)
        except SessionNotFound:
            rec = Recorder.create(store, session_id=sid)
    except BaseException:
        attached.abort()
        raise
    attached.wait()
    while True:
        row = rec.append(Custom(custom_kind="crash", payload={"sid": sid, "seq": rec.next_seq, "pad": "y" * 300}))
        with out_lock:
            sys.stdout.write(f"ACK {sid} {row.seq}\n")
            sys.stdout.flush()

for i in range(threads):
    threading.Thread(target=work, args=(i,), daemon=True).start()
threading.Event().wait()
"""


class _Writer:
    """The WRITER script in its own process; its ``ACK`` lines are read as they come (a reader thread), so
    the test waits for what the writer acknowledged, never for wall time. stderr goes to a file: it can be
    read in a failure message whatever state the process is in."""

    def __init__(self, script: Path, db: Path, errlog: Path, crash_at: str | None) -> None:
        env = {k: v for k, v in os.environ.items() if k != ENV}
        if crash_at is not None:
            env[ENV] = crash_at
        self.errlog = errlog
        with errlog.open("wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, str(script), str(db), "8", "g"], stdout=subprocess.PIPE, stderr=err, env=env
            )
        self.acks: list[tuple[str, int]] = []
        self._cond = threading.Condition()
        self._eof = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        try:
            for line in self.proc.stdout:
                if not line.endswith(b"\n"):
                    break  # a torn last line is not an acknowledgement
                _, sid, seq = line.decode().split()
                with self._cond:
                    self.acks.append((sid, int(seq)))
                    self._cond.notify_all()
        finally:
            with self._cond:
                self._eof = True
                self._cond.notify_all()

    def wait_for_acks(self, count: int, *, sessions: int = 1, timeout_s: float = 120.0) -> None:
        """Block until ``count`` appends, to at least ``sessions`` sessions, were acknowledged (fails if the
        writer ends first or never gets there)."""

        def enough() -> bool:
            return len(self.acks) >= count and len({sid for sid, _ in self.acks}) >= sessions

        with self._cond:
            self._cond.wait_for(lambda: enough() or self._eof, timeout=timeout_s)
            assert enough(), f"{len(self.acks)} of {count} acks; stderr: {self.stderr()}"

    def finish(self, timeout_s: float = 120.0) -> int:
        """Wait for the process to end and for every line it printed; returns its exit code."""
        try:
            code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the writer did not end within {timeout_s}s; stderr: {self.stderr()}")
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self._reader.join(timeout_s)
            assert self.proc.stdout is not None
            self.proc.stdout.close()
        return code

    def stderr(self) -> str:
        return self.errlog.read_text(errors="replace")[-3000:]


def _stored(db: Path, sessions: list[str]) -> dict[str, int]:
    """Events stored per session (every chain verified)."""
    with open_store(db) as check:
        found = {s.session_id for s in check.list_sessions()}
        counts: dict[str, int] = {}
        for sid in sessions:
            if sid not in found:
                counts[sid] = 0
                continue
            report = verify_session(check, sid)
            assert report.ok, report.divergences
            counts[sid] = report.events
        return counts


@pytest.mark.slow
def test_sigkill_during_group_commits_loses_no_acknowledged_append(tmp_path: Path) -> None:
    """8 threads append to 8 sessions through one store (group commits), SIGKILLed 12 times: by the test
    after a seeded number of acknowledgements, or by itself at a crash point (just before / just after a
    group's ``COMMIT``, after a block committed and before it returned). Every time, every append
    acknowledged before the kill is stored and every chain verifies; a kill after a ``COMMIT`` leaves at
    least one committed, unacknowledged row (the group's blocks had not returned)."""
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    db = tmp_path / "crash.db"
    sessions = [f"g-{i}" for i in range(8)]
    rng = random.Random(20261130)
    acked: dict[str, int] = {}
    stored = dict.fromkeys(sessions, 0)
    plan = ["kill", "commit.before", "commit.after", "append.committed"] * 3
    for i, how in enumerate(plan):
        # The first 8 commits of a run may be the threads' attaches (or creates): crash in the appends.
        crash_at = None if how == "kill" else f"{how}:{rng.randint(9, 80)}"
        writer = _Writer(script, db, tmp_path / f"writer-{i}.err", crash_at)
        if how == "kill":
            # The first run leaves every session with a durable event (an empty ledger cannot be attached).
            writer.wait_for_acks(rng.randint(1, 300), sessions=len(sessions) if i == 0 else 1)
            writer.proc.send_signal(signal.SIGKILL)
        code = writer.finish()
        assert code == -signal.SIGKILL, f"run {i} ({crash_at}) ended with {code}: {writer.stderr()}"
        assert "Traceback" not in writer.stderr(), writer.stderr()
        for sid, seq in writer.acks:
            acked[sid] = max(acked.get(sid, -1), seq)
        before, stored = stored, _stored(db, sessions)
        for sid, seq in acked.items():
            assert stored[sid] > seq, f"run {i} ({crash_at}): {sid} seq {seq} was acknowledged, not stored"
        new_rows = sum(stored.values()) - sum(before.values())
        assert new_rows >= len(writer.acks)
        if how in ("commit.after", "append.committed"):
            assert new_rows > len(writer.acks), f"run {i} ({crash_at}): the committed block was acknowledged"
    assert len(acked) == len(sessions)  # the first run acknowledged an append to each


@pytest.mark.parametrize("mode", ["same recorder", "other recorder"])
def test_a_block_holding_the_store_can_append_to_a_recorder_whose_last_block_waits(
    store: SqliteStore, mode: str
) -> None:
    """Lock order (found by an attack run): T1's block on R ends and waits for its group; T2 holds the store
    (`store.transaction()`, or another recorder's block) and appends to R. R's lock is not held while T1
    waits, so both finish (before, both threads hung)."""
    r1, r2 = Recorder.create(store, session_id="r1"), Recorder.create(store, session_id="r2")
    target = r1 if mode == "same recorder" else r2
    in_block = threading.Event()

    def first() -> object:
        with target.atomic():
            target.append(_custom(1))
            in_block.set()
            until_waiting(store._gate, 1)
        return "first"

    def second() -> object:
        in_block.wait(60)
        with store.transaction() if mode == "same recorder" else r1.atomic():
            target.append(_custom(2))
        return "second"

    (t1, out1), (t2, out2) = in_thread(first), in_thread(second)
    t1.join(60)
    t2.join(60)
    assert (out1, out2) == (["first"], ["second"]), "a thread hung or failed"
    report = verify_session(store, target.session_id)
    assert report.ok and report.events == 2 == target.next_seq


def test_an_interrupt_while_waiting_for_the_group_leaves_head_and_ledger_agreeing(store: SqliteStore) -> None:
    """Ctrl-C reaching a block that waits for its group (found by an attack run): the block cannot leave
    the group, so the interrupt is raised only after the group's outcome is known, with the recorder's
    head and subscribers matching the database (before, the head was restored while the row committed,
    and every later append conflicted)."""
    r1, r2 = Recorder.create(store, session_id="r1"), Recorder.create(store, session_id="r2")
    heard: list[int] = []
    r1.subscribe(lambda row, _e: heard.append(row.seq))
    original = store._gate.wait
    calls: list[int] = []

    def interrupted_wait(group: Any, commit: Any) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt  # lands while the group is still open (the other block holds it)
        original(group, commit)

    store._gate.wait = interrupted_wait  # type: ignore[method-assign]
    try:
        with pytest.raises(KeyboardInterrupt), r1.atomic():
            r1.append(_custom(1))
            th, out = in_thread(lambda: r2.append(_custom(0)).seq)
            until_waiting(store._gate, 1)  # r2's append waits for the store: r1's block will defer
        th.join(60)
    finally:
        store._gate.wait = original  # type: ignore[method-assign]
    assert out == [0] and len(calls) == 2, "the block kept waiting for its group after the interrupt"
    assert [e.seq for e in store.read_events("r1")] == [0]
    assert (r1.next_seq, heard) == (1, [0]), "head and subscribers agree with the committed row"
    assert r1.append(_custom(2)).seq == 1


def test_every_commit_callback_runs_when_one_fails(store: SqliteStore) -> None:
    """A block's commit callbacks all run, in order, after the commit, even when one raises (a purge of
    freed pages that fails); the first failure is raised after them, later ones noted on it. Before, the
    callbacks after a failing one never ran: a recorder appending later in the same transaction kept its
    old head over rows the database had committed."""
    ran: list[str] = []

    def fails(name: str) -> Callable[[], None]:
        def callback() -> None:
            ran.append(name)
            raise OSError(f"{name} failed")

        return callback

    recorder = Recorder.create(store, session_id="s")
    with pytest.raises(OSError, match=r"^first failed") as raised, store.transaction():
        store.call_after_commit(fails("first"))
        recorder.append(Custom(custom_kind="x", payload={}))  # its head moves after the commit
        store.call_after_commit(fails("second"))
        store.call_after_commit(lambda: ran.append("third"))
    assert ran == ["first", "second", "third"]
    assert raised.value.__notes__ == ["a later commit callback failed too: OSError('second failed')"]
    record = store.get_session("s")
    assert (record.head_seq, record.head_hash) == (0, recorder.head) and recorder.next_seq == 1
    recorder.append(Custom(custom_kind="y", payload={}))
    assert verify_session(store, "s").ok
