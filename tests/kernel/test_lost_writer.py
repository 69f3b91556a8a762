"""What a run does when it loses a session it writes, and when its wall clock runs out during a side effect
that runs in a worker thread (found by the runtime attack pass: racing resumes, a deadline mid-effect).

* A ``StaleWriter`` or ``AppendConflict`` raised through a tool (a sub-agent's child session held by another
  process raises ``AppendConflict``/``SessionBusy`` through the delegating call) stops the activation fenced
  off: no tool result, no effect completion, nothing the model would read as the tool's answer.
* A wall-clock deadline during a worker-thread side effect: the kernel waits ``Kernel.effect_grace_s`` for
  the thread and records its completion before it ends the run; past the grace the run is suspended
  ``effect_in_doubt`` (listed by ``pending``), never sealed over an effect in doubt.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from flightlog.errors import AppendConflict, SessionBusy, StaleWriter
from flightlog.events import OperationCancelled, RunTerminal, SessionEvent, Suspended, ToolCompleted
from flightlog.kernel import Budgets, Kernel, deny, tool
from flightlog.kernel.approvals import pending
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.recorder import verify_session
from flightlog.store import SqliteStore, StoredEvent

from .helpers import FakeClock, agent, customs, kinds, logged, of

WAIT_S = 60.0
"""Generous bound on waiting for a state another thread reaches (never expected to run out)."""


@pytest.mark.parametrize(
    "lost",
    [
        AppendConflict(session_id="child-session", seq=7),
        SessionBusy(session_id="child-session", seq=7),
        StaleWriter(session_id="child-session", epoch=1, current_epoch=2),
    ],
    ids=["append_conflict", "session_busy", "stale_writer"],
)
def test_a_session_lost_through_a_tool_stops_the_run_fenced_off_with_the_effect_in_doubt(
    store: SqliteStore, lost: Exception
) -> None:
    """Before: the error became the call's result (``is_error``, "AppendConflict: session ... already has
    an event at seq 7"), the effect row was completed with it and the model was told so."""

    @tool(effect="side_effect", in_thread=False)
    def delegate(task: str) -> str:
        """Drives another session (as a sub-agent call does) and finds it taken by another process."""
        raise lost

    provider = ScriptedProvider([calls(call("delegate", {"task": "t"}, id="w1")), reply("never reached")])
    k = Kernel(store, agent(provider, tools=[delegate]), notary=None, heartbeat_s=None)
    result = k.run_sync("go", session_id="s", handle_signals=False)
    assert result.status == "cancelled" and result.detail == f"fenced off: {lost}"
    assert "tool_completed" not in kinds(store, "s") and len(provider.requests) == 1
    assert customs(store, "s", "external_effect_completed") == []
    (effect,) = store.pending_effects("s")  # in doubt: a resume settles it (reconcile or a human)
    assert effect.idempotency_key == "s:1:w1"
    assert verify_session(store, "s").ok


def test_a_deadline_during_a_thread_effect_waits_for_it_and_records_its_completion(
    store: SqliteStore, tmp_path: Path
) -> None:
    """The tool goes on until the kernel says it waits for it (so the deadline has certainly passed), then
    acts: its completion is recorded before ``operation_cancelled``, and only then is the run sealed.
    Before: sealed at once with the intent never completed, the effect done a moment after the seal."""
    out = tmp_path / "effect.txt"

    @tool(effect="side_effect")
    def slow(line: str) -> str:
        """Acts once the kernel waits for it (a worker thread: it cannot be stopped)."""
        assert waiting.wait(WAIT_S), "the kernel never said it waits for the running effect"
        out.write_text(line)
        return f"wrote {line}"

    provider = ScriptedProvider([calls(call("slow", {"line": "A"}, id="s1")), reply("done")])
    k = Kernel(
        store,
        agent(provider, tools=[slow], budgets=Budgets(wall_clock_ms=200)),
        clock=FakeClock(),
        notary=None,
        heartbeat_s=None,
    )
    with logged("waiting up to") as waiting:  # what ``slow`` waits for
        result = k.run_sync("go", session_id="s", handle_signals=False)
    assert result.status == "budget_exhausted" and out.read_text() == "A"
    assert store.pending_effects("s") == []
    order = kinds(store, "s")
    assert order.index("custom:external_effect_completed") < order.index("operation_cancelled")
    assert customs(store, "s", "external_effect_completed") == [
        {"key": "s:1:s1", "result": {"output": "wrote A", "is_error": False}}
    ]
    (cancelled,) = of(store, "s", OperationCancelled)
    assert cancelled.reason.value == "deadline" and cancelled.pending_call_ids == ["s1"]
    assert of(store, "s", RunTerminal)[0].reason == "budget_exhausted"
    assert verify_session(store, "s").ok


def test_a_thread_effect_still_running_after_the_grace_leaves_the_run_suspended_in_doubt(
    store: SqliteStore, tmp_path: Path
) -> None:
    """Past the grace the effect may or may not happen: the run is suspended ``effect_in_doubt`` (not
    sealed), ``pending`` lists the call, and nothing the thread does later is recorded by this run. A human
    denies it; the resume marks it failed and, the clock being out, ends the run ``budget_exhausted``."""
    out = tmp_path / "effect.txt"
    release = threading.Event()
    finished = threading.Event()

    @tool(effect="side_effect")
    def stuck(line: str) -> str:
        """Acts only once the test releases it, after the run has stopped."""
        release.wait(WAIT_S)
        out.write_text(line)
        finished.set()
        return f"wrote {line}"

    def on_event(row: StoredEvent, event: SessionEvent) -> None:
        if isinstance(event, Suspended):  # durable: the run has stopped; now the thread may act
            release.set()

    provider = ScriptedProvider([calls(call("stuck", {"line": "A"}, id="s1")), reply("done")])
    build = agent(provider, tools=[stuck], budgets=Budgets(wall_clock_ms=200))
    k = Kernel(store, build, clock=FakeClock(), notary=None, heartbeat_s=None, on_event=on_event)
    k.effect_grace_s = 0.05
    try:
        result = k.run_sync("go", session_id="s", handle_signals=False)
    finally:
        release.set()
    # run_sync's event loop joins its worker threads as it closes: the effect happened after the suspension
    assert finished.wait(WAIT_S) and out.read_text() == "A"
    assert (result.status, result.detail, result.pending_calls) == ("suspended", "effect_in_doubt", ("s1",))
    assert of(store, "s", RunTerminal) == [] and store.get_session("s").status == "suspended"
    (cancelled,) = of(store, "s", OperationCancelled)
    assert cancelled.reason.value == "deadline" and cancelled.pending_call_ids == ["s1"]
    (suspended,) = of(store, "s", Suspended)
    assert (suspended.reason, suspended.pending_calls) == ("effect_in_doubt", ["s1"])
    assert kinds(store, "s")[-1] == "suspended"
    assert [e.idempotency_key for e in store.pending_effects("s")] == ["s:1:s1"]
    (waiting,) = pending(store, "s")
    assert (waiting.call_id, waiting.kind) == ("s1", "effect_in_doubt")
    assert "wall-clock budget ran out while it ran" in waiting.reason
    assert verify_session(store, "s").ok

    deny(store, "s", "s1", reason="checked by hand: it did write", notary=None)
    again = Kernel(store, build, notary=None, heartbeat_s=None).resume_sync("s", handle_signals=False)
    assert again.status == "budget_exhausted"
    assert store.pending_effects("s") == []
    (completed,) = of(store, "s", ToolCompleted)
    assert completed.results[0].is_error and "not run again" in completed.results[0].output
    assert verify_session(store, "s").ok
