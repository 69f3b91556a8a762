"""Run trees under the fleet: a sub-agent tree submitted with ``flightlog submit`` and driven by real
``flightlog worker`` processes (``python -m flightlog.fleet``), on SQLite and PostgreSQL.

A tree's children run inside the process of the worker holding the root's lease (issue 13 item 6 as built:
the root's lease covers its whole tree; each child's recorder takes the child's authority epoch when the
holder creates or resumes it, so a takeover fences the dead holder's child writers the same way as the
root's). Checked here:

* a worker finishes a tree: every chain verifies, each side effect once, budgets add up;
* a worker SIGKILLed mid-tree at a named crash point: a second worker takes the root over once the lease
  expires (the test expires it: ``lease_lost``, exactly once) and finishes the tree: no child session
  duplicated, each side effect once;
* fencing: a writer still holding a child session from before the takeover cannot append (``StaleWriter``),
  and the child's chain does not fork;
* a child waiting for approval parks the tree; approving it wakes the parked root (``Store.wake_lease``) and a
  worker (in process, and a running worker process) resumes the tree to the end.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from flightlog.errors import AppendConflict, StaleWriter
from flightlog.events import ToolRequested
from flightlog.fleet import Worker, submit
from flightlog.kernel import approve, pending
from flightlog.kernel.state import load_state
from flightlog.recorder import Recorder, verify_session
from flightlog.store import Store, open_store
from flightlog.testing.crashpoints import ENV
from kernel.helpers import check_child_settled

from . import fleet_tree_agent

SPEC = "fleet.fleet_tree_agent:tree"
GATED_SPEC = "fleet.fleet_tree_agent:gated_tree"
TESTS = Path(__file__).resolve().parents[1]
LEASE_S = 60.0
"""Every worker's lease: far above any renewal stall (renewed every 20 s), so no worker loses a lease it is
still renewing. A dead worker's lease is expired by the test (``_expire``), not by a timer."""
WAIT_S = 120.0
"""Overall limit on any wait for an observable state (a hang, not a slow machine)."""


def _worker(
    url: str, *, crash_at: str | None = None, idle_exit: float | None = None
) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != ENV}
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])
    if crash_at is not None:
        env[ENV] = crash_at
    argv = [sys.executable, "-m", "flightlog.fleet", "--db", url, "--lease", str(LEASE_S), "--poll", "0.05"]
    if idle_exit is not None:
        argv += ["--idle-exit", str(idle_exit)]
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_until(what: str, check: Callable[[], bool], proc: subprocess.Popen[str] | None = None) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        if proc is not None and proc.poll() is not None and not check():
            _out, err = proc.communicate()
            pytest.fail(f"worker exited {proc.returncode} before {what}:\n{err[-4000:]}")
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)  # poll interval of an observable state, not a timer the test races


def _expire(store: Store, sid: str, holder: str) -> None:
    """End ``holder``'s lease on ``sid`` now (a renewal with no time left): the next claim is a takeover."""
    assert store.renew_lease(sid, holder, ttl_ms=0), f"{holder} no longer holds {sid}"


def _stop(proc: subprocess.Popen[str]) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=WAIT_S)
    return err


def _status(url: str, sid: str) -> str:
    with open_store(url) as store:
        return store.get_session(sid).status


def _children(store: Store, sid: str) -> set[str]:
    return {s.session_id for s in store.list_sessions() if s.parent_session_id == sid}


def _check_tree(store: Store, lead: str) -> None:
    """The whole finished tree: each child once (the id derived from its call), budgets add up, chains
    verify, each side effect exactly once."""
    ledger = [e for _, e in load_state(store, lead).events]
    state = load_state(store, lead)
    delegating = [
        (e.turn, c.id)
        for e in ledger
        if isinstance(e, ToolRequested)
        for c in e.calls
        if c.name in fleet_tree_agent.CHILDREN
    ]
    derived = {
        hashlib.sha256(f"flightlog-subagent:{lead}:{t}:{c}".encode()).hexdigest()[:32] for t, c in delegating
    }
    kids = _children(store, lead)
    assert len(kids) == 2 and kids == derived == set(state.delegation.grants)
    total = state.tokens_used
    for kid in kids:
        child = load_state(store, kid)
        assert child.terminal is not None and store.get_session(kid).status == "completed"
        check_child_settled(ledger, state, child, kid)
        total += child.tokens_used
        assert child.tokens_used > 0
    assert state.tokens_used + sum(u.tokens for u in state.delegation.released.values()) == total
    assert all(verify_session(store, sid).ok for sid in (lead, *kids))
    keys = fleet_tree_agent.effect_keys()
    expected = {f"{kid}:1:x1" for kid in kids} | {f"{lead}:2:l1"}
    assert sorted(keys) == sorted(expected), keys  # each side effect exactly once


@pytest.mark.slow
def test_a_worker_process_finishes_a_submitted_tree(store_url: str, out_dir: Path) -> None:
    with open_store(store_url) as store:
        lead = submit(store, SPEC, fleet_tree_agent.GOAL, session_id="tree-1")
    proc = _worker(store_url, idle_exit=1.0)
    _wait_until("the tree completes", lambda: _status(store_url, lead) == "completed", proc)
    err = _stop(proc)
    assert proc.returncode == 0, err
    with open_store(store_url) as store:
        _check_tree(store, lead)
        # children are driven by the root's holder: they are never fleet sessions of their own
        assert all(store.get_lease(kid) is None for kid in _children(store, lead))


CRASH_POINTS = [
    "subagent.spawned:1",
    "subagent.spawned:2",
    "effect.intent:1",
    "effect.ran:2",
    "subagent.settled:1",
]
WITH_CHILDREN = {"effect.ran:2", "subagent.settled:1"}
"""Points where the dead worker has certainly created a child session (so a stale child writer exists)."""


@pytest.mark.slow
@pytest.mark.parametrize("crash_at", CRASH_POINTS)
def test_a_second_worker_takes_a_killed_tree_over(store_url: str, out_dir: Path, crash_at: str) -> None:
    with open_store(store_url) as store:
        lead = submit(store, SPEC, fleet_tree_agent.GOAL, session_id="tree-k")
        first = _worker(store_url, crash_at=crash_at)
        first.communicate(timeout=WAIT_S)
        assert first.returncode == -signal.SIGKILL, f"{crash_at} was never reached"
        assert store.get_session(lead).status == "running"
        lease = store.get_lease(lead)
        assert lease is not None and lease.holder is not None  # the dead worker still holds it
        _expire(store, lead, lease.holder)  # as if its lease had run out (it renews nothing now)
        # a writer of the dead holder, attached to each child it left (fenced by the takeover below)
        stale = {kid: Recorder.attach(store, kid, take_authority=False) for kid in _children(store, lead)}
        assert stale or crash_at not in WITH_CHILDREN
        before = {kid: list(store.read_events(kid)) for kid in stale}
        second = _worker(store_url)
        try:
            _wait_until("the tree completes", lambda: _status(store_url, lead) == "completed", second)
        finally:
            err = _stop(second)
        assert second.returncode == 0, err
        cancelled = [e for _, e in load_state(store, lead).events if e.kind == "operation_cancelled"]
        assert [c.reason.value for c in cancelled] == ["lease_lost"]  # the second worker took it over
        _check_tree(store, lead)
        for kid, writer in stale.items():
            head = list(store.read_events(kid))
            assert head[: len(before[kid])] == before[kid]  # the takeover continued the chain
            with pytest.raises((StaleWriter, AppendConflict)):
                writer.record_custom("late", 1)
            assert list(store.read_events(kid)) == head  # nothing written: the chain does not fork
            assert verify_session(store, kid).ok


def test_an_approval_inside_a_child_parks_the_tree_until_approved(store_url: str, out_dir: Path) -> None:
    with open_store(store_url) as store:
        lead = submit(store, GATED_SPEC, fleet_tree_agent.GOAL, session_id="tree-g")
        stats = Worker(store, lease_ttl_s=10, poll_s=0.05).run(idle_exit_s=0.3)
        assert stats.results == {"suspended": 1}
        assert store.get_session(lead).status == "suspended"
        rows = pending(store)
        assert len(rows) == 2 and {r.root_session_id for r in rows} == {lead}
        assert fleet_tree_agent.effect_keys() == []
        # parked: nothing changed, no worker claims it
        assert Worker(store, lease_ttl_s=10, poll_s=0.05).run(idle_exit_s=0.2).claimed == 0
        for row in rows:
            approve(store, row.session_id, row.call_id, responder="fleet-test")
        # the decisions are in the children's ledgers: a worker wakes the tree and finishes it
        stats = Worker(store, lease_ttl_s=10, poll_s=0.05).run(idle_exit_s=0.3)
        assert stats.claimed >= 1 and store.get_session(lead).status == "completed", stats
        _check_tree(store, lead)


@pytest.mark.slow
def test_a_running_worker_resumes_a_tree_once_its_child_is_approved(store_url: str, out_dir: Path) -> None:
    with open_store(store_url) as store:
        lead = submit(store, GATED_SPEC, fleet_tree_agent.GOAL, session_id="tree-w")
        proc = _worker(store_url)
        try:
            _wait_until("the tree parks", lambda: len(pending(store)) == 2, proc)
            _wait_until("the lease is parked", lambda: _parked(store, lead), proc)
            for row in pending(store):
                approve(store, row.session_id, row.call_id, responder="fleet-test")
            _wait_until("the tree completes", lambda: _status(store_url, lead) == "completed", proc)
        finally:
            err = _stop(proc)
        assert proc.returncode == 0, err
        _check_tree(store, lead)


def _parked(store: Store, sid: str) -> bool:
    lease = store.get_lease(sid)
    return lease is not None and lease.holder is None and lease.parked_seq >= 0
