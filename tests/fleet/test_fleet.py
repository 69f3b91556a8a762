"""The worker fleet on both backends: submit, claim, drive, lease loss and takeover, fencing, parking."""

from __future__ import annotations

from pathlib import Path

import pytest

from flightlog.errors import StaleWriter
from flightlog.fleet import QUEUED, Worker, leases_for, submit
from flightlog.kernel import Kernel, approve
from flightlog.kernel.abort import abort
from flightlog.kernel.state import load_state
from flightlog.recorder import Recorder, verify_session
from flightlog.runs import list_runs, rebuild_projection
from flightlog.store import Store

from . import fleet_agent

SPEC = "fleet.fleet_agent:agent"


def _lines(out: Path, sid: str) -> list[str]:
    path = out / f"{sid}.txt"
    return path.read_text().splitlines() if path.exists() else []


def test_submit_queues_a_fleet_run(fleet_store: Store, out_dir: Path) -> None:
    sid = submit(fleet_store, SPEC, fleet_agent.GOAL, ["every line once"], session_id="q-1")
    record = fleet_store.get_session(sid)
    assert record.status == QUEUED
    assert record.metadata == {"agent": "fleet-test", "agent_spec": SPEC, "run_source": "fleet"}
    kinds = [e.kind for e in fleet_store.read_events(sid)]
    assert kinds[0] == "run_started" and kinds[-1] == "custom"
    lease = leases_for(fleet_store).get_lease(sid)
    assert lease is not None and lease.holder is None
    rebuild_projection(fleet_store)
    (run,) = list_runs(fleet_store)
    assert (run.run_id, run.source.value) == (sid, "fleet")


def test_a_worker_drives_every_queued_session_to_the_end(fleet_store: Store, out_dir: Path) -> None:
    ids = [submit(fleet_store, SPEC, fleet_agent.GOAL, session_id=f"s-{i}") for i in range(6)]
    stats = Worker(fleet_store, concurrency=3, lease_ttl_s=10, poll_s=0.05).run(idle_exit_s=0.3)
    assert stats.claimed == 6 and stats.results == {"completed": 6} and stats.errors == 0
    for sid in ids:
        assert fleet_store.get_session(sid).status == "completed"
        assert _lines(out_dir, sid) == fleet_agent.expected_lines(sid)
        assert verify_session(fleet_store, sid).ok
        lease = leases_for(fleet_store).get_lease(sid)
        assert lease is not None and lease.holder is None
    assert Worker(fleet_store, poll_s=0.05).run(idle_exit_s=0.2).claimed == 0  # nothing runnable


def test_a_claim_bumps_the_epoch_and_fences_the_previous_writer(fleet_store: Store, out_dir: Path) -> None:
    sid = submit(fleet_store, SPEC, fleet_agent.GOAL, session_id="f-1")
    leases = leases_for(fleet_store)
    # the lease mechanics themselves are pinned on every backend by the Store contract
    # (flightlog.testing.store_contract); here: the claim's epoch fences the recorder of the lost holder
    (first,) = leases.claim_sessions("w1", ttl_ms=60_000)
    assert (first.session_id, first.epoch, first.previous_holder, first.status) == (sid, 1, None, QUEUED)
    writer = Recorder.attach(fleet_store, sid, take_authority=False)
    assert writer.epoch == 1
    # w1's lease expires (ttl -1): w2 takes over, bumping the epoch; w1's next append writes nothing
    assert leases.renew_lease(sid, "w1", ttl_ms=-1)
    (taken,) = leases.claim_sessions("w2", ttl_ms=60_000)
    assert (taken.epoch, taken.previous_holder) == (2, "w1")
    before = list(fleet_store.read_events(sid))
    with pytest.raises(StaleWriter):
        writer.record_custom("late", 1)
    assert list(fleet_store.read_events(sid)) == before
    assert Recorder.attach(fleet_store, sid, take_authority=False).epoch == 2


def test_takeover_records_lease_lost_and_finishes_the_run(fleet_store: Store, out_dir: Path) -> None:
    sid = submit(fleet_store, SPEC, fleet_agent.GOAL, session_id="t-1")
    leases = leases_for(fleet_store)
    (_claim,) = leases.claim_sessions("dead-worker", ttl_ms=60_000)
    fleet_store.set_session_status(sid, "running")
    assert leases.renew_lease(sid, "dead-worker", ttl_ms=-1)  # it died: the lease runs out
    stats = Worker(fleet_store, poll_s=0.05).run(idle_exit_s=0.3)
    assert (stats.claimed, stats.takeovers, stats.results) == (1, 1, {"completed": 1})
    state = load_state(fleet_store, sid)
    cancelled = [e for _, e in state.events if e.kind == "operation_cancelled"]
    assert [c.reason.value for c in cancelled] == ["lease_lost"]
    assert _lines(out_dir, sid) == fleet_agent.expected_lines(sid)
    assert verify_session(fleet_store, sid).ok


def test_abort_stops_a_fleet_run_and_the_worker_lets_it_go(fleet_store: Store, out_dir: Path) -> None:
    sid = submit(fleet_store, SPEC, fleet_agent.GOAL, session_id="a-1")
    assert abort(fleet_store, sid)
    assert fleet_store.get_session(sid).status == "cancelled"
    assert Worker(fleet_store, poll_s=0.05).run(idle_exit_s=0.2).claimed == 0


def test_a_suspended_run_is_parked_until_a_decision_lands(fleet_store: Store, out_dir: Path) -> None:
    from flightlog.kernel import Agent, Policy
    from flightlog.kernel.policy import Rule

    base = fleet_agent.agent()
    gated = Agent(
        name=base.name,
        route=base.route,
        tools=base.tools,
        policy=Policy(rules=[Rule(action="ask", tool="*")]),
    )
    sid = submit(fleet_store, SPEC, fleet_agent.GOAL, session_id="p-1", agent=gated)
    leases = leases_for(fleet_store)
    (_claim,) = leases.claim_sessions("w", ttl_ms=60_000)
    result = Kernel(fleet_store, gated).resume_sync(sid, handle_signals=False)
    assert result.status == "suspended"
    assert leases.release_lease(sid, "w", park=True)
    assert leases.claim_sessions("w", ttl_ms=60_000) == []  # parked: nothing changed
    for call_id in result.pending_calls:
        approve(fleet_store, sid, call_id)
    (again,) = leases.claim_sessions("w", ttl_ms=60_000)
    assert (again.session_id, again.status) == (sid, "suspended")
