"""The current wait, folded once (``KernelState.current_wait``, ``wait_closed``, ``gate_openings``): on any
sequence of the events that open, close, cancel and re-open a wait, each answer equals the backward scan of
``KernelState.events`` it replaced (kept here as the reference)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from flightlog.events import (
    CancellationReason,
    CheckpointTaken,
    OperationCancelled,
    PermissionRequested,
    Resumed,
    Rollbacked,
    RunStarted,
    SessionEvent,
    Suspended,
    ToolCompleted,
    ToolGated,
)
from flightlog.kernel.records import Verdict
from flightlog.kernel.state import _WAIT_STARTS, KernelState, fold

CALLS = ("a", "b", "c")
TOOLS = ("read", "write")


def _events() -> st.SearchStrategy[SessionEvent]:
    call, tool = st.sampled_from(CALLS), st.sampled_from(TOOLS)
    reason = st.sampled_from(["approval", "effect_in_doubt"])
    return st.one_of(
        st.builds(lambda c, t: ToolGated(turn=1, call_id=c, tool=t, reason="ask"), call, tool),
        st.builds(lambda t: PermissionRequested(turn=1, tool=t, arguments="{}"), tool),
        st.builds(
            lambda r, p: Suspended(turn=1, reason=r, pending_calls=p), reason, st.lists(call, max_size=3)
        ),
        st.just(OperationCancelled(turn=1, operation_id="op", reason=CancellationReason.USER)),
        st.builds(lambda c, ok: Verdict(c, "approval", ok, "alice").to_event(1), call, st.booleans()),
        st.just(Resumed(turn=1)),
        st.just(CheckpointTaken(turn=1, history_len=1)),
        st.just(ToolCompleted(turn=1, results=[])),
        st.just(Rollbacked(turn=1, checkpoint_history_len=0)),
        st.just(RunStarted(run_id="r", goal="g")),
    )


def _current_wait(state: KernelState) -> list[tuple[int, Suspended]]:
    if state.phase != "suspended":
        return []
    found = []
    for index in range(len(state.events) - 1, -1, -1):
        event = state.events[index][1]
        if event.kind in _WAIT_STARTS:
            break
        if isinstance(event, Suspended):
            found.append((index, event))
    return found[::-1]


def _wait_closed(state: KernelState) -> bool:
    if state.phase != "suspended":
        return False
    for _seq, event in reversed(state.events):
        if isinstance(event, Suspended):
            return False
        if isinstance(event, OperationCancelled):
            return True
    return False


def _gate_openings(state: KernelState) -> list[SessionEvent]:
    opened: dict[str, list[SessionEvent]] = {}
    events = [event for _, event in state.events]
    for index, event in enumerate(events):
        if isinstance(event, ToolGated) and event.call_id in state.gates:
            after = events[index + 1] if index + 1 < len(events) else None
            asked = [after] if isinstance(after, PermissionRequested) and after.tool == event.tool else []
            opened[event.call_id] = [event, *asked]
    return [e for call_id in state.gates for e in opened.get(call_id, [])]


@settings(max_examples=400, deadline=None)
@given(st.lists(_events(), max_size=30))
def test_the_folded_wait_equals_the_backward_scans(events: list[SessionEvent]) -> None:
    state = KernelState("s")
    for seq, event in enumerate(events):
        state.apply(seq, 1_000 + seq, event)
        assert state.current_wait() == _current_wait(state)
        assert state.wait_closed() == _wait_closed(state)
        assert state.wait_cancelled() == (bool(state.gates) and _wait_closed(state))
        assert state.gate_openings() == _gate_openings(state)


def test_an_aborted_wait_reopened_twice_is_one_wait_with_its_gates_openings() -> None:
    gated = ToolGated(turn=1, call_id="w1", tool="write", reason="ask")
    asked = PermissionRequested(turn=1, tool="write", arguments="{}")
    suspended = Suspended(turn=1, reason="approval", pending_calls=["w1"])
    cancelled = OperationCancelled(turn=1, operation_id="op", reason=CancellationReason.USER)
    rows = [RunStarted(run_id="r", goal="g"), CheckpointTaken(turn=1, history_len=1), gated, asked]
    rows += [suspended, cancelled, gated, asked, suspended]
    state = fold("s", ((seq, 0, event) for seq, event in enumerate(rows)))
    assert [index for index, _ in state.current_wait()] == [4, 8]
    assert not state.wait_cancelled()
    assert state.gate_openings() == [gated, asked]
    state.apply(len(rows), 0, cancelled)
    assert state.wait_cancelled()
