"""Human approval: ask → suspend (the process may exit) → approve/deny from elsewhere → resume."""

from __future__ import annotations

from pathlib import Path

import pytest

from flightlog.events import (
    PermissionRequested,
    PermissionResolved,
    Resumed,
    Suspended,
    ToolCompleted,
    ToolDenied,
    ToolGated,
)
from flightlog.kernel import Kernel, NotPending, PendingCall, Policy, Rule, approve, deny, pending, tool
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.messages import ToolResult
from flightlog.recorder import verify_session
from flightlog.store import SqliteStore

from .helpers import agent, customs, echo, events, kinds, of

written: list[str] = []


@tool(effect="side_effect")
def write_note(text: str) -> str:
    """Write a note somewhere that matters."""
    written.append(text)
    return f"wrote {text!r}"


def _script() -> list[object]:
    return [
        calls(
            call("echo", {"text": "look"}, id="r1"),
            call("write_note", {"text": "hello"}, id="w1"),
            call("echo", {"text": "secret"}, id="d1"),
        ),
        reply("all done"),
    ]


POLICY = Policy(
    rules=(
        Rule("deny", tool="echo", arg="text", path="secret", reason="no secrets"),
        Rule("ask", tool="write_*", reason="writes need a human"),
    )
)


def _kernel(store: SqliteStore) -> Kernel:
    # by_turn: a fresh provider in a fresh "process" answers the same turn the same way
    provider = ScriptedProvider(_script(), by_turn=True)  # type: ignore[arg-type]
    return Kernel(store, agent(provider, tools=[echo, write_note], policy=POLICY))


@pytest.fixture(autouse=True)
def _reset() -> None:
    written.clear()


def test_ask_suspends_the_run_with_gates_and_nothing_runs(store: SqliteStore) -> None:
    result = _kernel(store).run_sync("write a note")
    sid = result.session_id
    assert (result.status, result.pending_calls, result.detail) == ("suspended", ("w1",), "approval")
    assert store.get_session(sid).status == "suspended"
    assert written == [] and of(store, sid, ToolCompleted) == []
    assert kinds(store, sid)[-8:] == [
        "tool_requested",
        "custom:tool_decisions",
        "permission_resolved",
        "permission_resolved",
        "tool_denied",
        "tool_gated",
        "permission_requested",
        "suspended",
    ]
    assert of(store, sid, ToolGated) == [
        ToolGated(turn=1, call_id="w1", tool="write_note", reason="writes need a human")
    ]
    assert of(store, sid, PermissionRequested) == [
        PermissionRequested(
            turn=1, tool="write_note", arguments='{"text": "hello"}', reason="writes need a human"
        )
    ]
    assert of(store, sid, Suspended) == [Suspended(turn=1, reason="approval", pending_calls=["w1"])]
    assert of(store, sid, ToolDenied) == [
        ToolDenied(turn=1, call_id="d1", tool_name="echo", reason="no secrets")
    ]
    assert [(p.approved, p.responder) for p in of(store, sid, PermissionResolved)] == [
        (True, "policy_gate"),
        (False, "policy_gate"),
    ]
    assert pending(store) == [
        PendingCall(sid, 1, "w1", "write_note", '{"text": "hello"}', "writes need a human", "approval")
    ]


def test_approval_in_one_process_and_resume_in_another(db_path: Path) -> None:
    with SqliteStore(db_path) as first:  # process 1 runs until it must ask, then exits
        sid = _kernel(first).run_sync("write a note").session_id
    with SqliteStore(db_path) as second:  # process 2: a human approves
        verdict = approve(second, sid, "w1", responder="alice")
        assert (verdict.approved, verdict.gate, verdict.responder) == (True, "approval", "alice")
        assert pending(second) == []
    assert written == []
    with SqliteStore(db_path) as third:  # process 3 resumes
        result = _kernel(third).resume_sync(sid)
        assert (result.status, result.final_message) == ("completed", "all done")
        assert written == ["hello"]
        tail = kinds(third, sid)
        i = tail.index("suspended")
        assert tail[i + 1 : i + 4] == ["permission_resolved", "custom:approval_decision", "resumed"]
        assert of(third, sid, PermissionResolved)[-1] == PermissionResolved(
            turn=1, approved=True, responder="user"
        )  # seed 000: "user" | "policy_gate"; the operator's name is in approval_decision
        assert customs(third, sid, "approval_decision") == [
            {"turn": 1, "call_id": "w1", "gate": "approval", "approved": True, "responder": "alice"}
        ]
        assert of(third, sid, Resumed) == [Resumed(turn=1, approved=["w1"], denied=[])]
        (completed,) = of(third, sid, ToolCompleted)
        assert completed.results == [
            ToolResult(call_id="r1", output="look"),
            ToolResult(call_id="w1", output="wrote 'hello'"),
            ToolResult(call_id="d1", output="denied by policy: no secrets", is_error=True),
        ]
        assert verify_session(third, sid).ok
        assert third.get_session(sid).status == "completed"


def test_deny_tells_the_model_and_never_runs_the_call(store: SqliteStore, other_store: SqliteStore) -> None:
    sid = _kernel(store).run_sync("write a note").session_id
    verdict = deny(other_store, sid, "w1", responder="bob", reason="too risky")
    assert (verdict.approved, verdict.reason) == (False, "too risky")
    result = _kernel(other_store).resume_sync(sid)
    assert result.status == "completed" and written == []
    assert of(other_store, sid, ToolDenied)[-1] == ToolDenied(
        turn=1, call_id="w1", tool_name="write_note", reason="too risky"
    )
    assert of(other_store, sid, PermissionResolved)[-1] == PermissionResolved(
        turn=1, approved=False, responder="user"
    )
    assert customs(other_store, sid, "approval_decision")[-1]["responder"] == "bob"
    assert of(other_store, sid, Resumed) == [Resumed(turn=1, approved=[], denied=["w1"])]
    (completed,) = of(other_store, sid, ToolCompleted)
    assert completed.results[1] == ToolResult(call_id="w1", output="denied by bob: too risky", is_error=True)


def test_deny_without_reason_records_a_default(store: SqliteStore) -> None:
    sid = _kernel(store).run_sync("write a note").session_id
    deny(store, sid, "w1")
    assert of(store, sid, ToolDenied)[-1].reason == "denied by user"


def test_resume_before_a_decision_stays_suspended_and_writes_nothing(store: SqliteStore) -> None:
    sid = _kernel(store).run_sync("write a note").session_id
    before = len(events(store, sid))
    epoch = store.authority_epoch(sid)
    result = _kernel(store).resume_sync(sid)
    assert (result.status, result.pending_calls) == ("suspended", ("w1",))
    assert len(events(store, sid)) == before and store.authority_epoch(sid) == epoch


def test_decisions_on_calls_that_do_not_wait_are_refused_without_side_effects(store: SqliteStore) -> None:
    sid = _kernel(store).run_sync("write a note").session_id
    epoch = store.authority_epoch(sid)
    for call_id in ("nope", "r1", "d1"):
        with pytest.raises(NotPending, match=call_id):
            approve(store, sid, call_id)
    assert store.authority_epoch(sid) == epoch  # nothing fenced
    approve(store, sid, "w1", responder="alice")
    with pytest.raises(NotPending, match="'w1' was already approved by alice"):
        deny(store, sid, "w1")  # already decided: the error says how and by whom
    _kernel(store).resume_sync(sid)
    with pytest.raises(NotPending):
        approve(store, sid, "w1")  # the run has moved on


def test_pending_lists_waiting_calls_across_sessions(store: SqliteStore) -> None:
    a = _kernel(store).run_sync("first").session_id
    b = _kernel(store).run_sync("second").session_id
    done = Kernel(store, agent(ScriptedProvider([reply("x")], by_turn=False))).run_sync("third").session_id
    assert [(p.session_id, p.call_id) for p in pending(store)] == [(a, "w1"), (b, "w1")]
    assert pending(store, b)[0].session_id == b
    assert pending(store, done) == []


def _two_notes_kernel(store: SqliteStore) -> Kernel:
    script = [
        calls(call("write_note", {"text": "one"}, id="w1"), call("write_note", {"text": "two"}, id="w2")),
        reply("both handled"),
    ]
    provider = ScriptedProvider(script, by_turn=True)  # type: ignore[arg-type]
    return Kernel(store, agent(provider, tools=[echo, write_note], policy=POLICY))


def test_resuming_an_aborted_wait_reopens_it_so_status_and_pending_agree(store: SqliteStore) -> None:
    from flightlog.kernel import abort
    from flightlog.runs import list_runs

    sid = _two_notes_kernel(store).run_sync("write two notes").session_id
    assert abort(store, sid, requested_by="ops")
    assert store.get_session(sid).status == "cancelled" and pending(store) == []
    approve(store, sid, "w1", responder="alice")  # decided while cancelled: the decision is kept
    result = _two_notes_kernel(store).resume_sync(sid)
    assert (result.status, result.pending_calls, result.detail) == ("suspended", ("w2",), "approval")
    assert store.get_session(sid).status == "suspended"  # the status the result states
    assert kinds(store, sid)[-3:] == ["tool_gated", "permission_requested", "suspended"]
    assert of(store, sid, ToolGated)[-1] == ToolGated(
        turn=1, call_id="w2", tool="write_note", reason="writes need a human"
    )
    assert of(store, sid, Suspended)[-1] == Suspended(turn=1, reason="approval", pending_calls=["w2"])
    rows = pending(store, decided=True)
    assert [(p.call_id, p.decision, p.decided_by) for p in rows] == [
        ("w2", None, None),
        ("w1", "approved", "alice"),
    ]
    (run,) = [r for r in list_runs(store) if r.run_id == sid]
    assert run.state.value == "waiting_input"
    before = len(events(store, sid))
    again = _two_notes_kernel(store).resume_sync(sid)  # still waiting, no longer cancelled: writes nothing
    assert again.status == "suspended" and len(events(store, sid)) == before
    deny(store, sid, "w2", responder="bob")
    done = _two_notes_kernel(store).resume_sync(sid)
    assert (done.status, done.final_message) == ("completed", "both handled")
    assert of(store, sid, Resumed) == [Resumed(turn=1, approved=["w1"], denied=["w2"])]
    assert written == ["one"]
    assert verify_session(store, sid).ok
