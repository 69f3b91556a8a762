"""Crash consistency: SIGKILL a writer process mid-stream; nothing acknowledged is ever lost.

A helper script (written to ``tmp_path``, run with ``sys.executable``) opens the store, attaches to the
session (creating it on the first run), and appends in a loop, printing ``ACK <seq>`` to stdout only after
``append``/``append_many`` has returned. Each run is killed one of two ways, both decided by what the
writer did, never by a timer:

* by the test, after it has read a seeded number of ``ACK`` lines;
* by itself, at the n-th hit of a crash point (``$FLIGHTLOG_TEST_CRASH_AT``, see
  :mod:`flightlog.testing.crashpoints`): rows written but not committed (``append.written``,
  ``commit.before``), or committed but not acknowledged (``append.committed``, ``commit.after``).

Then, every time: ``Recorder.attach`` succeeds (the whole chain recomputes), seqs are contiguous from 0,
every acknowledged seq is stored with the bytes the writer meant for it, a kill before the commit left
nothing unacknowledged behind, and a kill after it left the committed batch. A process kill is not a power
loss, so ``synchronous=NORMAL`` must hold up too.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from flightlog.encoding import decode_stored
from flightlog.events import Custom
from flightlog.recorder import Recorder, verify_session
from flightlog.store import open_store
from flightlog.testing.crashpoints import ENV

SESSIONS_EVERY = 6
"""A fresh session every this many runs keeps each attach's full re-verification short."""

WRITER = r"""
import random
import sys

from flightlog.errors import SessionNotFound
from flightlog.events import Custom
from flightlog.recorder import Recorder
from flightlog.store import open_store

path, session_id, synchronous, seed, mode = sys.argv[1:6]
rng = random.Random(int(seed))
store = open_store(path, synchronous=synchronous)
try:
    recorder = Recorder.attach(store, session_id)
except SessionNotFound:
    recorder = Recorder.create(store, session_id=session_id)
out = sys.stdout
out.write(f"READY {recorder.next_seq}\n")
out.flush()
while True:
    seq = recorder.next_seq
    size = 1 if mode == "single" else rng.randint(1, 12)
    events = [
        Custom(custom_kind="crash", payload={"seq": seq + i, "pad": "x" * rng.randint(0, 3000)})
        for i in range(size)
    ]
    rows = [recorder.append(events[0])] if mode == "single" else recorder.append_many(events)
    out.write("".join(f"ACK {row.seq}\n" for row in rows))
    out.flush()
"""


KILLS = ("kill", "append.written", "append.committed", "commit.before", "commit.after")
"""How each run ends, in turn: killed by the test, or by the writer itself at a crash point."""
BEFORE_COMMIT = frozenset({"append.written", "commit.before"})
AFTER_COMMIT = frozenset({"append.committed", "commit.after"})
TIMEOUT_S = 120.0
"""Generous bound on waiting for a writer's output or exit (a hang fails the test, a slow machine does not)."""


@dataclass
class Run:
    """What one writer process acknowledged before it was killed."""

    ready_at: int | None = None
    acked: list[int] = field(default_factory=list)


class _Output:
    """The writer's stdout, read line by line on a thread; the test waits on what it has seen."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.run = Run()
        self._cond = threading.Condition()
        self._eof = False
        assert proc.stdout is not None
        self._stdout = proc.stdout
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            for line in self._stdout:
                if not line.endswith(b"\n"):
                    break  # a torn final line is not an acknowledgement
                word, number = line.split()
                with self._cond:
                    if word == b"READY":
                        self.run.ready_at = int(number)
                    elif word == b"ACK":
                        self.run.acked.append(int(number))
                    self._cond.notify_all()
        finally:
            with self._cond:
                self._eof = True
                self._cond.notify_all()

    def wait_for_acks(self, count: int) -> bool:
        """Block until the writer is ready and acknowledged ``count`` seqs; False if it ended first."""
        with self._cond:
            return (
                self._cond.wait_for(
                    lambda: (self.run.ready_at is not None and len(self.run.acked) >= count) or self._eof,
                    timeout=TIMEOUT_S,
                )
                and len(self.run.acked) >= count
            )


def _run_and_kill(
    script: Path,
    db: Path,
    errlog: Path,
    *,
    session_id: str,
    synchronous: str,
    seed: int,
    mode: str,
    crash_at: str | None,
    kill_after_acks: int | None,
) -> Run:
    """Run the writer until it kills itself (``crash_at``) or the test has seen ``kill_after_acks`` ACKs."""
    env = {k: v for k, v in os.environ.items() if k != ENV}
    if crash_at is not None:
        env[ENV] = crash_at
    with (
        errlog.open("wb") as stderr,
        subprocess.Popen(
            [sys.executable, str(script), str(db), session_id, synchronous, str(seed), mode],
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
        ) as proc,
    ):
        output = _Output(proc)
        try:
            if kill_after_acks is not None:
                reached = output.wait_for_acks(kill_after_acks)
                assert reached, f"the writer never acknowledged {kill_after_acks}: {errlog.read_text()}"
                proc.send_signal(signal.SIGKILL)
            returncode = proc.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the writer did not die within {TIMEOUT_S}s: {errlog.read_text()}")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        output.thread.join(timeout=TIMEOUT_S)
    assert returncode == -signal.SIGKILL, f"writer exited on its own ({returncode}): {errlog.read_text()}"
    return output.run


def _torture(tmp_path: Path, *, synchronous: str, iterations: int, seed: int) -> list[Run]:
    rng = random.Random(seed)
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    db = tmp_path / "crash.db"
    acked: set[int] = set()
    checked = 0
    runs: list[Run] = []
    for i in range(iterations):
        sid = f"crash-{i // SESSIONS_EVERY}"
        creating = i % SESSIONS_EVERY == 0
        if creating:
            acked, checked = set(), 0
        how = KILLS[i % len(KILLS)]
        # A creating run must leave a non-empty ledger to attach to: at least one append is acknowledged,
        # or (crash points) committed: n >= 4 is past the commits of opening the store and of the session's
        # create/attach, and past the first append.
        crash_at = None if how == "kill" else f"{how}:{rng.randint(4, 40)}"
        run = _run_and_kill(
            script,
            db,
            tmp_path / "writer.err",
            session_id=sid,
            synchronous=synchronous,
            seed=rng.randrange(2**32),
            mode="single" if i % 3 == 0 else "batch",
            crash_at=crash_at,
            kill_after_acks=rng.randint(1 if creating else 0, 40) if how == "kill" else None,
        )
        runs.append(run)
        if run.acked:
            assert run.acked == list(range(run.acked[0], run.acked[0] + len(run.acked)))
            assert run.ready_at is None or run.acked[0] == run.ready_at
        # Every seq below this one was stored before the kill (acknowledged, or there when it started).
        floor = run.acked[-1] + 1 if run.acked else (run.ready_at if run.ready_at is not None else checked)
        acked.update(run.acked)
        with open_store(db) as store:
            resumed = Recorder.attach(store, sid)  # recomputes the whole chain or raises
            assert run.ready_at is None or resumed.next_seq >= run.ready_at
            assert all(seq < resumed.next_seq for seq in acked), (i, max(acked), resumed.next_seq)
            if how in BEFORE_COMMIT:
                assert resumed.next_seq == floor, f"run {i} ({crash_at}): uncommitted rows were stored"
            elif how in AFTER_COMMIT:
                assert resumed.next_seq > floor, f"run {i} ({crash_at}): the committed batch was lost"
            for row in store.read_events(sid, start=checked):
                event = decode_stored(row.event_bytes, seq=row.seq)
                assert isinstance(event, Custom)
                assert event.payload["seq"] == row.seq
            checked = resumed.next_seq
            assert verify_session(store, sid).ok
    return runs


@pytest.mark.slow
def test_sigkill_never_loses_an_acknowledged_append(tmp_path: Path) -> None:
    runs = _torture(tmp_path, synchronous="FULL", iterations=36, seed=20260601)
    assert runs[0].acked  # a creating run killed by the test acknowledged an append first


@pytest.mark.slow
def test_sigkill_with_synchronous_normal(tmp_path: Path) -> None:
    runs = _torture(tmp_path, synchronous="NORMAL", iterations=12, seed=7)
    assert runs[0].acked
