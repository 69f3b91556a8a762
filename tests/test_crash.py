"""Crash consistency: SIGKILL a writer process at random moments; nothing acknowledged is ever lost.

A helper script (written to ``tmp_path``, run with ``sys.executable``) opens the store, attaches to the
session (creating it on the first run), and appends in a loop, printing ``ACK <seq>`` to stdout only after
``append``/``append_many`` has returned. The test reads those lines, SIGKILLs the process after a random
delay (seeded, so a failure reproduces), and then checks, every time: ``Recorder.attach`` succeeds (the
whole chain recomputes), seqs are contiguous from 0, and every acknowledged seq is stored with the bytes the
writer meant for it. A process kill is not a power loss, so ``synchronous=NORMAL`` must hold up too.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from flightlog.encoding import decode_stored
from flightlog.events import Custom
from flightlog.recorder import Recorder, verify_session
from flightlog.store import open_store

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


@dataclass
class Run:
    """What one writer process acknowledged before it was killed."""

    ready_at: int | None = None
    acked: list[int] = field(default_factory=list)


def _run_and_kill(
    script: Path,
    db: Path,
    errlog: Path,
    *,
    session_id: str,
    synchronous: str,
    seed: int,
    mode: str,
    delay: float,
    after_ack: bool,
) -> Run:
    run = Run()
    started = threading.Event()
    with (
        errlog.open("wb") as stderr,
        subprocess.Popen(
            [sys.executable, str(script), str(db), session_id, synchronous, str(seed), mode],
            stdout=subprocess.PIPE,
            stderr=stderr,
        ) as proc,
    ):
        assert proc.stdout is not None
        stdout = proc.stdout

        def read() -> None:
            for line in stdout:
                if not line.endswith(b"\n"):
                    break  # a torn final line is not an acknowledgement
                word, number = line.split()
                if word == b"READY":
                    run.ready_at = int(number)
                    if not after_ack:
                        started.set()
                elif word == b"ACK":
                    run.acked.append(int(number))
                    started.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        if not started.wait(timeout=30):
            proc.kill()
            proc.wait()
            pytest.fail(f"writer never started: {errlog.read_text()}")
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        returncode = proc.wait(timeout=30)
        reader.join(timeout=30)
    assert returncode == -signal.SIGKILL, f"writer exited on its own ({returncode}): {errlog.read_text()}"
    return run


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
        if i % SESSIONS_EVERY == 0:
            acked, checked = set(), 0
        run = _run_and_kill(
            script,
            db,
            tmp_path / "writer.err",
            session_id=sid,
            synchronous=synchronous,
            seed=rng.randrange(2**32),
            mode="single" if i % 3 == 0 else "batch",
            delay=rng.uniform(0.005, 0.150),
            after_ack=i % SESSIONS_EVERY == 0,  # a creating run must leave a non-empty ledger to attach to
        )
        runs.append(run)
        if run.acked:
            assert run.acked == list(range(run.acked[0], run.acked[0] + len(run.acked)))
            assert run.ready_at is None or run.acked[0] == run.ready_at
        acked.update(run.acked)
        with open_store(db) as store:
            resumed = Recorder.attach(store, sid)  # recomputes the whole chain or raises
            assert run.ready_at is None or resumed.next_seq >= run.ready_at
            assert all(seq < resumed.next_seq for seq in acked), (i, max(acked), resumed.next_seq)
            for row in store.read_events(sid, start=checked):
                event = decode_stored(row.event_bytes, seq=row.seq)
                assert isinstance(event, Custom)
                assert event.payload["seq"] == row.seq
            checked = resumed.next_seq
            assert verify_session(store, sid).ok
    assert sum(len(run.acked) for run in runs) > iterations, "the kills landed before any work"
    return runs


@pytest.mark.slow
def test_sigkill_never_loses_an_acknowledged_append(tmp_path: Path) -> None:
    runs = _torture(tmp_path, synchronous="FULL", iterations=36, seed=20260601)
    assert sum(1 for run in runs if run.acked) >= 24  # most kills landed mid-stream


@pytest.mark.slow
def test_sigkill_with_synchronous_normal(tmp_path: Path) -> None:
    runs = _torture(tmp_path, synchronous="NORMAL", iterations=12, seed=7)
    assert sum(1 for run in runs if run.acked) >= 6
