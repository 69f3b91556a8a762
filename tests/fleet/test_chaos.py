"""Chaos: a real PostgreSQL server, worker processes SIGKILLed and restarted, 200 sessions.

Each session runs the fleet agent (``fleet_agent``: 2 turns, 2 non-idempotent side effects per turn, with
``reconcile``). Workers (``python -m flightlog.fleet``, 2 slots each) die with SIGKILL, so their leases
expire and other workers take their sessions over. Nothing waits on wall time:

* first, only workers told to kill themselves at a crash point (``$FLIGHTLOG_TEST_CRASH_AT``, see
  :mod:`flightlog.testing.crashpoints`) run, each replaced by the next of :data:`CRASHES` when it dies:
  every run kills a worker at each named window (a lease just claimed, a model call in flight, an effect's
  intent durable, a tool run without its completion, a commit about to happen, an append committed);
* then plain workers finish the work, and the test SIGKILLs one of them each time the number of completed
  sessions passes a mark in :data:`KILL_AT_DONE`, wherever it happens to be.

The test polls what it can observe (completed sessions, worker exits); it fails if nothing moves for
:data:`STALL_S`, never on how long the whole takes. At the end:

* every session completed;
* every side effect happened exactly once (each session's file holds each effect key once, in order);
* every chain verifies, and each session's replayed transcript equals an uninterrupted run's;
* no two writers' events interleave: the authority epoch recorded with each event never decreases along
  the session (a fenced writer never appended after its successor);
* no event was lost: every session's ledger is dense up to its recorded head, and holds every turn;
* each kill between an effect's intent and its completion was reconciled by the next holder, and each kill
  of a running session was recorded as a takeover (``lease_lost``).

Leases are 10 s (renewed every third): long enough that a live worker starved of CPU on a loaded machine
keeps its lease (a stolen lease of a *live* worker is the residual risk the worker's docs describe, not a
case this test pins), short enough that a dead worker's sessions move on.
"""

from __future__ import annotations

import itertools
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from flightlog.fleet import submit
from flightlog.kernel import Kernel
from flightlog.recorder import verify_session
from flightlog.sessions import replay_session
from flightlog.store import open_store
from flightlog.store.postgres import PostgresStore
from flightlog.testing.crashpoints import ENV
from postgres.server import database_url, fresh_schema, schema_url

from . import fleet_agent

SEED = 20261106
SESSIONS = 200
WORKERS = 4
LEASE_S = 10.0
STALL_S = 180.0
"""Fail when no session completes and no worker dies for this long (a hang, not a slow machine)."""
SPEC = "fleet.fleet_agent:agent"
TESTS = Path(__file__).resolve().parents[1]
POINTS = ("fleet.claimed", "model.call", "effect.intent", "effect.ran", "commit.before", "append.committed")
CRASHES = [f"{point}:{n}" for point, n in zip(POINTS * 2, [1, 2, 1, 3, 2, 5, 2, 1, 3, 1, 9, 2], strict=True)]
"""The self-kills of the first phase, in order (each worker dies within a few sessions: the queue of 200
never runs dry before the last one)."""
KILL_AT_DONE = (130, 150, 170)


@pytest.fixture
def chaos_url() -> Iterator[str]:
    database_url()
    with fresh_schema("chaos") as schema:
        yield schema_url(schema)


@dataclass
class _Slot:
    """A worker process and the crash point it was started with (None: a plain worker)."""

    proc: subprocess.Popen[bytes]
    crash_at: str | None


def _spawn(url: str, env: dict[str, str], log: Path, crash_at: str | None) -> _Slot:
    argv = [
        sys.executable,
        "-m",
        "flightlog.fleet",
        "--db",
        url,
        "--concurrency",
        "2",
        "--lease",
        str(LEASE_S),
    ]
    env = {k: v for k, v in env.items() if k != ENV}
    if crash_at is not None:
        env[ENV] = crash_at
    with log.open("ab") as err:
        proc = subprocess.Popen([*argv, "--poll", "0.2"], env=env, stdout=subprocess.DEVNULL, stderr=err)
    return _Slot(proc, crash_at)


def _reference(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[object]:
    out = tmp_path / "reference-out"
    out.mkdir()
    monkeypatch.setenv("FLIGHTLOG_FLEET_OUT", str(out))
    with open_store(tmp_path / "reference.db") as store:
        result = Kernel(store, fleet_agent.agent()).run_sync(
            fleet_agent.GOAL, session_id="ref", handle_signals=False
        )
        assert result.status == "completed"
        return list(replay_session(store, "ref"))


@pytest.mark.slow
def test_sigkilled_workers_finish_every_session_exactly_once(
    chaos_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(SEED)
    monkeypatch.setenv("FLIGHTLOG_FLEET_TURNS", "2")
    reference = _reference(tmp_path, monkeypatch)
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setenv("FLIGHTLOG_FLEET_OUT", str(out))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
        "FLIGHTLOG_FLEET_PAUSE_S": "0.01",
    }
    store = PostgresStore(chaos_url)
    log = tmp_path / "workers.log"
    schedule = list(CRASHES)
    crashed: list[str] = []
    kills = 0
    slots: list[_Slot] = []
    try:
        ids = [submit(store, SPEC, fleet_agent.GOAL, session_id=f"chaos-{i:03d}") for i in range(SESSIONS)]
        started = time.monotonic()
        slots = [_spawn(chaos_url, env, log, schedule.pop(0)) for _ in range(WORKERS)]
        marks = list(KILL_AT_DONE)
        last = (-1, -1, started)  # (completed, deaths) and when they last changed
        while True:
            done = sum(1 for r in store.list_sessions() if r.status == "completed")
            for i, slot in enumerate(slots):
                code = slot.proc.poll()
                if code is None:
                    continue
                assert slot.crash_at is not None and code == -signal.SIGKILL, (
                    f"a worker ({slot.crash_at}) exited with {code}: {log.read_text()[-3000:]}"
                )
                crashed.append(slot.crash_at)
                # Phase one: the next self-kill. Plain workers start once every crashing one is gone.
                slots[i] = _spawn(chaos_url, env, log, schedule.pop(0) if schedule else None)
            if not schedule and all(slot.crash_at is None for slot in slots):
                if marks and done >= marks[0]:
                    marks.pop(0)
                    victim = rng.randrange(WORKERS)
                    slots[victim].proc.send_signal(signal.SIGKILL)
                    slots[victim].proc.wait()
                    kills += 1
                    slots[victim] = _spawn(chaos_url, env, log, None)
                elif done == SESSIONS:
                    break
            now = time.monotonic()
            if (done, len(crashed) + kills) != last[:2]:
                last = (done, len(crashed) + kills, now)
            assert now - last[2] < STALL_S, (
                f"no progress for {STALL_S:.0f}s: {done}/{SESSIONS} completed, crashed at {crashed}; "
                f"{log.read_text()[-3000:]}"
            )
            time.sleep(0.2)  # a poll interval: every decision above is on observed state
        elapsed = time.monotonic() - started
    finally:
        for slot in slots:
            slot.proc.send_signal(signal.SIGTERM)
        for slot in slots:
            try:
                slot.proc.wait(60)
            except subprocess.TimeoutExpired:
                slot.proc.kill()
                slot.proc.wait()
    try:
        takeovers = reconciled = 0
        for sid in ids:
            record = store.get_session(sid)
            assert record.status == "completed", sid
            lines = (out / f"{sid}.txt").read_text().splitlines()
            assert Counter(lines) == Counter(fleet_agent.expected_lines(sid)), sid  # each effect exactly once
            assert verify_session(store, sid).ok, sid
            epochs = store.event_epochs(sid)
            assert [seq for seq, _ in epochs] == list(range(record.head_seq + 1)), sid  # dense: none lost
            assert all(a <= b for (_, a), (_, b) in itertools.pairwise(epochs)), sid
            assert replay_session(store, sid) == reference, sid
            assert store.pending_effects(sid) == []
            events = [e.event_bytes for e in store.read_events(sid)]
            takeovers += sum(1 for e in events if b'"lease_lost"' in e)
            reconciled += sum(1 for e in events if b'"effect_reconciled"' in e)
        print(
            f"\nchaos: {SESSIONS} sessions, {WORKERS} workers, {len(crashed)} self-kills at {crashed}, "
            f"{kills} SIGKILLs from the test, {takeovers} lease-lost takeovers, {reconciled} in-doubt "
            f"effects reconciled, {elapsed:.1f}s"
        )
        assert sorted(crashed) == sorted(CRASHES) and kills == len(KILL_AT_DONE)
        assert reconciled >= sum(1 for c in CRASHES if c.startswith("effect."))
        assert takeovers >= sum(1 for c in CRASHES if c.startswith(("model.call", "effect.")))
    finally:
        store.close()
