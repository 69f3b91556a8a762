"""A running kernel publishes live state and heartbeats, so a slow model call or tool is not "abandoned".

Runs and the dashboard flag an in-flight run as abandoned when nothing was heard from it within the lease
(:func:`flightlog.live.is_abandoned`). The kernel's ledger is silent while a model call or a tool runs, so
only the heartbeat of a live process keeps such a run from being flagged; these tests read the live record
from a second store handle, as ``flightlog runs`` in another process would.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from flightlog.kernel import Kernel, RunResult, tool
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.live import LiveRegistry, LiveRunRecord, is_abandoned, list_run_views
from flightlog.providers.base import ModelRequest, ModelResponse
from flightlog.runs.model import RunState
from flightlog.store import SqliteStore

from .helpers import agent

SID = "live-1"
TIMEOUT_S = 60.0  # an upper bound for a loaded machine; every wait returns as soon as its state holds


def wait_for(check: Callable[[], Any], what: str) -> Any:
    """Poll ``check`` until it returns something truthy (then return it); fail after ``TIMEOUT_S``."""
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


class Blocked:
    """A gate the kernel's model call or tool waits at until the test releases it."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def wait(self) -> None:
        self.entered.set()
        assert self.release.wait(TIMEOUT_S), "never released"


def start(kernel: Kernel) -> tuple[threading.Thread, list[RunResult]]:
    results: list[RunResult] = []

    def run() -> None:
        results.append(kernel.run_sync("go", session_id=SID, handle_signals=False))

    thread = threading.Thread(target=run, name="kernel-under-test")
    thread.start()
    return thread, results


@pytest.fixture
def reader(db_path: Path, store: SqliteStore) -> Iterator[SqliteStore]:
    with SqliteStore(db_path) as other:
        yield other


def _beating(reader: SqliteStore) -> LiveRunRecord | None:
    """The run's live record once the background heartbeat has beaten after the last durable event (the
    record is published when the activation starts, before its events: only a heartbeat is later)."""
    records = [r for r in reader.live_runs() if r.run_id == SID]
    rows = list(reader.read_events(SID))
    if records and rows and records[0].heartbeat_at_ms > max(r.recorded_at_ms for r in rows):
        return records[0]
    return None


@pytest.mark.parametrize("phase", ["model", "tool"])
def test_a_driven_run_heartbeats_so_a_silent_ledger_is_not_abandoned(
    phase: str, store: SqliteStore, reader: SqliteStore
) -> None:
    gate = Blocked()

    async def slow_model(request: ModelRequest) -> ModelResponse:
        await asyncio.to_thread(gate.wait)
        return reply("done")

    @tool(effect="read_only")
    def slow_tool() -> str:
        """Take a while."""
        gate.wait()
        return "ok"

    if phase == "model":
        script: list[Any] = [slow_model]
        state = "waiting_model"
    else:
        script = [calls(call("slow_tool", {}, id="t1")), reply("done")]
        state = "waiting_tool"
    kernel = Kernel(
        store, agent(ScriptedProvider(script, by_turn=False), tools=[slow_tool]), heartbeat_s=0.02
    )
    thread, results = start(kernel)
    try:
        assert gate.entered.wait(TIMEOUT_S)
        live = wait_for(lambda: _beating(reader), "a heartbeat after the last durable event")
        # Published as the run started (nothing spent yet); the ledger has moved on since.
        assert (live.state, live.tokens_used, live.steps_taken, live.pid) == ("running", 0, 0, os.getpid())
        last_event_ms = max(r.recorded_at_ms for r in reader.read_events(SID))
        # A lease that the last durable event has outlived but the heartbeat has not:
        lease = live.heartbeat_at_ms - last_event_ms
        now = live.heartbeat_at_ms + lease
        (view,) = list_run_views(reader, now_ms=now, lease_ms=lease)
        assert view.snapshot.state is view.durable_state is RunState(state)  # the newer durable fact wins
        assert view.live is not None and not view.abandoned
        # ... which the ledger alone would have flagged abandoned:
        assert is_abandoned(view.durable_state, last_event_ms, now_ms=now, lease_ms=lease)
    finally:
        gate.release.set()
        thread.join(TIMEOUT_S)
    assert not thread.is_alive() and results[0].status == "completed"
    assert reader.live_runs() == []  # deleted when the activation stopped


def test_the_live_record_is_deleted_when_the_run_suspends(store: SqliteStore, reader: SqliteStore) -> None:
    from flightlog.kernel import Policy, Rule

    provider = ScriptedProvider([calls(call("echo", {"text": "x"}, id="e1"))], by_turn=False)
    ask = Policy(rules=(Rule("ask", tool="echo"),))
    result = Kernel(store, agent(provider, policy=ask), heartbeat_s=0.02).run_sync("go", session_id=SID)
    assert result.status == "suspended"
    assert reader.live_runs() == []  # waiting for a human needs no process: no heartbeat, not abandoned
    (view,) = list_run_views(reader, now_ms=10**15)
    assert (view.snapshot.state, view.abandoned) == (RunState.WAITING_INPUT, False)


def test_without_a_heartbeat_nothing_is_published(store: SqliteStore, reader: SqliteStore) -> None:
    gate = Blocked()

    @tool(effect="read_only")
    def slow_tool() -> str:
        """Take a while."""
        gate.wait()
        return "ok"

    script = [calls(call("slow_tool", {}, id="t1")), reply("done")]
    kernel = Kernel(
        store, agent(ScriptedProvider(script, by_turn=False), tools=[slow_tool]), heartbeat_s=None
    )
    assert kernel.live is None
    thread, results = start(kernel)
    try:
        assert gate.entered.wait(TIMEOUT_S)
        assert reader.live_runs() == []
    finally:
        gate.release.set()
        thread.join(TIMEOUT_S)
    assert results[0].status == "completed"
    with pytest.raises(ValueError, match="heartbeat_s"):
        Kernel(store, agent(ScriptedProvider([], by_turn=False)), heartbeat_s=0)


def test_a_resumed_activation_starts_in_the_state_of_its_phase(
    store: SqliteStore, reader: SqliteStore
) -> None:
    gate = Blocked()
    crash = {"once": True}

    @tool(effect="read_only", in_thread=False)
    def slow_tool() -> str:
        """Take a while (the first process dies in it)."""
        if crash.pop("once", False):
            raise SystemExit("killed in the tool")
        gate.wait()
        return "ok"

    def kernel() -> Kernel:
        script = [calls(call("slow_tool", {}, id="t1")), reply("done")]
        return Kernel(
            store, agent(ScriptedProvider(script, by_turn=True), tools=[slow_tool]), heartbeat_s=0.02
        )

    with pytest.raises(SystemExit):
        kernel().run_sync("go", session_id=SID, handle_signals=False)
    assert reader.live_runs() == []  # the dying activation still deleted its record on the way out
    results: list[RunResult] = []
    thread = threading.Thread(target=lambda: results.append(kernel().resume_sync(SID, handle_signals=False)))
    thread.start()
    try:
        assert gate.entered.wait(TIMEOUT_S)
        live = wait_for(lambda: _beating(reader), "a heartbeat after the last durable event")
        # Published after the activation's `resumed`, in the tools phase: waiting_tool, one turn and its
        # 15 tokens spent (a plain "running" here would have overridden the ledger's waiting_tool).
        assert (live.state, live.tokens_used, live.steps_taken) == ("waiting_tool", 15, 1)
        (view,) = list_run_views(reader, now_ms=live.heartbeat_at_ms)
        assert (view.snapshot.state, view.live is not None, view.abandoned) == (
            RunState.WAITING_TOOL,
            True,
            False,
        )
    finally:
        gate.release.set()
        thread.join(TIMEOUT_S)
    assert results[0].status == "completed" and reader.live_runs() == []


def test_a_fenced_holder_ending_leaves_the_new_holders_live_record(
    db_path: Path, store: SqliteStore, reader: SqliteStore
) -> None:
    """Kernel A runs a tool; kernel B (its own store handle, as another process) resumes the run, fencing A
    off, and runs the call again. A's heartbeat beats on while its tool runs, and does not take the stored
    record back; then A's tool returns, its completion is refused and its activation ends: its clear leaves
    B's record. Before: A's heartbeat overwrote B's record and A's clear deleted it (the run read as not
    live while B drove it)."""
    gates = [Blocked(), Blocked()]  # A's call, then B's
    calls_made = [0]

    @tool(effect="read_only", in_thread=True)
    def slow_tool() -> str:
        """Take a while."""
        gate = gates[calls_made[0]]
        calls_made[0] += 1
        gate.wait()
        return "ok"

    def kernel(handle: SqliteStore) -> Kernel:
        script = [calls(call("slow_tool", {}, id="t1")), reply("done")]
        return Kernel(
            handle, agent(ScriptedProvider(script, by_turn=True), tools=[slow_tool]), heartbeat_s=0.05
        )

    k_a = kernel(store)
    thread_a, results_a = start(k_a)
    with SqliteStore(db_path) as store_b:
        k_b = kernel(store_b)
        live_a, live_b = k_a.live, k_b.live
        assert live_a is not None and live_b is not None
        results_b: list[RunResult] = []
        thread_b = threading.Thread(
            target=lambda: results_b.append(k_b.resume_sync(SID, handle_signals=False))
        )
        try:
            assert gates[0].entered.wait(TIMEOUT_S)
            thread_b.start()
            assert gates[1].entered.wait(TIMEOUT_S)
            (taken,) = reader.live_runs()
            assert taken.owner == live_b.owner
            for _ in range(2):  # two beats of A after B's publication: the first one's write is done
                beat = _own_beat(live_a)
                wait_for(lambda beat=beat: _own_beat(live_a) > beat, "a heartbeat of the fenced holder")
            assert [r.owner for r in reader.live_runs()] == [live_b.owner]  # A's beats did not take it
            gates[0].release.set()
            thread_a.join(TIMEOUT_S)
            assert results_a[0].status == "cancelled" and results_a[0].detail.startswith("fenced off")
            assert [r.owner for r in reader.live_runs()] == [live_b.owner]  # A ended: B's record stays
        finally:
            for gate in gates:
                gate.release.set()
            thread_a.join(TIMEOUT_S)
            if thread_b.ident is not None:  # started
                thread_b.join(TIMEOUT_S)
        assert results_b[0].status == "completed" and reader.live_runs() == []


def _own_beat(registry: LiveRegistry) -> int:
    """The heartbeat (epoch ms) of ``registry``'s own record of the run (-1 once it has none)."""
    record = registry.get(SID)
    return -1 if record is None else record.heartbeat_at_ms
