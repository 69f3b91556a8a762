"""Crash torture for run trees: SIGKILL the process running a three-level tree at named points, resume it
with ``flightlog resume LEAD``, again and again, until it finishes; then check the whole tree.

The tree is the demo's (:func:`flightlog.cli.demo_subagents.tree_agent`): a lead delegates to two researchers in
one turn (concurrently), then to a writer that delegates to its own fact checker, then publishes after a
human approves (the test plays the human when a run exits 3). Every sub-agent does a side effect that
appends ``<effect key>\\t<text>`` to a notes file (with a reconciler that looks the key up there).

Each process is a real ``python -m flightlog`` (``run`` the first time, ``resume LEAD`` after) that kills
itself at the n-th hit of a crash point drawn from a seeded generator (:mod:`flightlog.testing.crashpoints`:
model call, effect intent/ran, sub-agent spawned/settled, append written/committed). After every tree:

* every side effect happened exactly once (no key twice, the four expected keys);
* no child session is duplicated: each parent's children are exactly the sessions its ledger names, and each
  child's id is the one derived from the parent's delegating call;
* budgets add up: each ``budget_usage_reported`` equals the child's own tokens and turns plus what its own
  children reported; each child's recorded limits are the grant its parent recorded; the lead's own
  tokens plus its reports equal the tokens of every session of the tree;
* every chain verifies, and ``flightlog verify --all`` exits 0.
"""

from __future__ import annotations

import hashlib
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from flightlog.cli.demo_subagents import GOAL, NOTES_ENV, SPEC
from flightlog.events import ToolRequested
from flightlog.kernel import approve, pending
from flightlog.kernel.state import load_state
from flightlog.recorder import verify_session
from flightlog.store import Store, open_store
from flightlog.testing.crashpoints import ENV

from .helpers import check_child_settled, events

SEED = 20261202
MIN_KILLS = 50
POINTS = {  # point: the largest n drawn (how often the tree hits it, roughly)
    "model.call": 10,
    "effect.intent": 6,
    "effect.ran": 6,
    "subagent.spawned": 3,
    "subagent.settled": 3,
    "append.written": 60,
    "append.committed": 60,
}
SPAWNS = {"researcher", "writer", "fact_checker"}


def flightlog(db: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "flightlog", "--db", str(db), *args]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)


def lead_of(store: Store, before: set[str]) -> str | None:
    new = [s for s in store.list_sessions() if s.session_id not in before and s.parent_session_id is None]
    return new[0].session_id if new else None


def check_tree(store: Store, lead: str, notes: Path) -> int:
    """The invariants of the module docs for one finished tree; returns its session count."""
    keys = [line.split("\t", 1)[0] for line in notes.read_text(encoding="utf-8").splitlines()]
    assert len(keys) == len(set(keys)) == 4, keys  # 3 findings + 1 publish, each exactly once
    sessions = walk(store, lead)
    assert len(sessions) == 5
    assert all(verify_session(store, sid).ok for sid in sessions)
    total = sum(load_state(store, sid).tokens_used for sid in sessions)
    lead_state = load_state(store, lead)
    assert lead_state.tokens_used + sum(u.tokens for u in lead_state.delegation.released.values()) == total
    return len(sessions)


def walk(store: Store, sid: str) -> list[str]:
    """``sid`` and its descendants, checking each parent's children against its ledger."""
    ledger = events(store, sid)
    state = load_state(store, sid)
    delegating = [
        (e.turn, c.id) for e in ledger if isinstance(e, ToolRequested) for c in e.calls if c.name in SPAWNS
    ]
    derived = {
        hashlib.sha256(f"flightlog-subagent:{sid}:{t}:{c}".encode()).hexdigest()[:32] for t, c in delegating
    }
    kids = {s.session_id for s in store.list_sessions() if s.parent_session_id == sid}
    assert kids == derived == set(state.delegation.grants), (sid, kids, derived)
    found = [sid]
    for kid in sorted(kids):
        child = load_state(store, kid)
        check_child_settled(ledger, state, child, kid)
        found += walk(store, kid)
    return found


@pytest.mark.slow
def test_run_trees_survive_kill_9_at_named_points(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    db = tmp_path / "tree.db"
    kills = trees = 0
    killed_at: Counter[str] = Counter()
    while kills < MIN_KILLS:
        trees += 1
        notes_dir = tmp_path / f"tree-{trees}"
        notes_dir.mkdir()
        base = {**os.environ, NOTES_ENV: str(notes_dir)}
        base.pop(ENV, None)
        with open_store(db) as store:
            before = {s.session_id for s in store.list_sessions()}
        lead: str | None = None
        for _attempt in range(400):
            point = rng.choice(sorted(POINTS))
            env = {**base, ENV: f"{point}:{rng.randint(1, POINTS[point])}"}
            if lead is None:
                done = flightlog(db, env, "run", SPEC, "--goal", GOAL, "-q")
                with open_store(db) as store:
                    lead = lead_of(store, before)
                if lead is None:  # killed before the lead session existed: nothing to resume
                    assert done.returncode == -9, done.stderr
                    kills += 1
                    killed_at[point] += 1
                    continue
            else:
                done = flightlog(db, env, "resume", lead, "-q")
            if done.returncode == -9:
                kills += 1
                killed_at[point] += 1
                with open_store(db) as store:
                    assert all(verify_session(store, s.session_id).ok for s in store.list_sessions())
                continue
            assert done.returncode in (0, 3), done.stderr
            if done.returncode == 0:
                break
            with open_store(db) as store:  # suspended: the writer's publish waits for a human
                for row in pending(store):
                    assert row.root_session_id == lead and row.tool == "publish"
                    approve(store, row.session_id, row.call_id, responder="torture")
        else:
            pytest.fail(f"tree {trees} did not finish in 400 attempts")
        assert lead is not None
        with open_store(db) as store:
            assert store.get_session(lead).status == "completed"
            check_tree(store, lead, notes_dir / "subagents-notes.txt")
    verified = flightlog(db, {k: v for k, v in os.environ.items() if k != ENV}, "verify", "--all")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert kills >= MIN_KILLS and trees >= 2
    assert set(killed_at) == set(POINTS), killed_at  # every window was hit, the sub-agent ones included
