"""Chaos: a real PostgreSQL server, 4 worker processes SIGKILLed and restarted at random, 200 sessions.

Each session runs the fleet agent (``fleet_agent``: 2 turns, 2 non-idempotent side effects per turn, with
``reconcile``). Workers (``python -m flightlog.fleet``, 2 slots each, 1.5 s leases) are killed with SIGKILL
at random (seeded) and restarted, so their leases expire and other workers take their sessions over. At the
end:

* every session completed;
* every side effect happened exactly once (each session's file holds each effect key once, in order);
* every chain verifies, and each session's replayed transcript equals an uninterrupted run's;
* no two writers' events interleave: the authority epoch recorded with each event never decreases along
  the session (a fenced writer never appended after its successor);
* no event was lost: every session's ledger is dense up to its recorded head, and holds every turn.

Scale: 200 sessions (the issue's number); bounded by ``DEADLINE_S`` (the test fails rather than hang).
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
from pathlib import Path

import pytest

from flightlog.fleet import submit
from flightlog.kernel import Kernel
from flightlog.recorder import verify_session
from flightlog.sessions import replay_session
from flightlog.store import open_store
from flightlog.store.postgres import PostgresStore
from postgres.server import database_url, fresh_schema, schema_url

from . import fleet_agent

SEED = 20261106
SESSIONS = 200
WORKERS = 4
DEADLINE_S = 150.0
SPEC = "fleet.fleet_agent:agent"
TESTS = Path(__file__).resolve().parents[1]


@pytest.fixture
def chaos_url() -> Iterator[str]:
    database_url()
    with fresh_schema("chaos") as schema:
        yield schema_url(schema)


def _spawn(url: str, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "flightlog.fleet", "--db", url, "--concurrency", "2", "--lease", "1.5"]
    with log.open("ab") as err:
        return subprocess.Popen([*argv, "--poll", "0.2"], env=env, stdout=subprocess.DEVNULL, stderr=err)


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
    procs: list[subprocess.Popen[bytes]] = []
    try:
        ids = [submit(store, SPEC, fleet_agent.GOAL, session_id=f"chaos-{i:03d}") for i in range(SESSIONS)]
        started = time.monotonic()
        procs = [_spawn(chaos_url, env, log) for _ in range(WORKERS)]
        kills = 0
        while True:
            done = sum(1 for r in store.list_sessions() if r.status == "completed")
            if done == SESSIONS:
                break
            assert time.monotonic() - started < DEADLINE_S, (
                f"only {done}/{SESSIONS} completed; {log.read_text()[-3000:]}"
            )
            time.sleep(rng.uniform(0.3, 1.2))
            if done < SESSIONS * 0.9:  # kill while most of the work is in flight, then let it finish
                victim = rng.randrange(WORKERS)
                procs[victim].send_signal(signal.SIGKILL)
                procs[victim].wait()
                kills += 1
                procs[victim] = _spawn(chaos_url, env, log)
        elapsed = time.monotonic() - started
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
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
            f"\nchaos: {SESSIONS} sessions, {WORKERS} workers, {kills} SIGKILLs, {takeovers} lease-lost takeovers, "
            f"{reconciled} in-doubt effects reconciled, {elapsed:.1f}s"
        )
        assert kills >= 5
    finally:
        store.close()
