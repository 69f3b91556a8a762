"""A ``FatalToolError`` after an irreversible call of its turn: the turn is committed, never rolled back.

From the attack pass (``attack/fatal_rollback_{effect,subagent,waiting_child}.py``, branch h-attack): a turn
that charged (a ``side_effect``) or ran a child, then hit a fatal error, was rolled back and retried; the
retried request no longer showed the charge, so the model (answering with new call ids, as real models do)
charged again. The models here are *informed*: they redo a step only when their request does not show it
done, which is what a rolled-back history invites and a committed one prevents.
"""

from __future__ import annotations

from typing import Any

import pytest

from flightlog.events import Rollbacked, RunTerminal, ToolCompleted
from flightlog.kernel import Agent, Budgets, FatalToolError, Kernel, Policy, Rule, approve, pending, tool
from flightlog.kernel.requests import check_session
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.kernel.subagents import subagent
from flightlog.messages import ToolResultPart
from flightlog.narration import narrate
from flightlog.providers.base import ModelRequest, ModelResponse
from flightlog.recorder import verify_session
from flightlog.sessions import replay_session
from flightlog.store import SqliteStore

from .helpers import customs, events, kinds, of

charges: list[int] = []
notes: list[str] = []
fatal_once: list[str] = []


@pytest.fixture(autouse=True)
def _reset() -> None:
    charges.clear()
    notes.clear()
    fatal_once.clear()


@tool(effect="side_effect")
def charge(amount_cents: int) -> str:
    """Charge the customer.

    Args:
        amount_cents: Amount in cents.
    """
    charges.append(amount_cents)
    return f"charged {amount_cents}"


@tool(effect="side_effect")
def note(text: str) -> str:
    """Append a note.

    Args:
        text: The note.
    """
    notes.append(text)
    return f"noted {text}"


@tool(effect="read_only")
def boom(x: int) -> str:
    """Fail fatally the first time.

    Args:
        x: anything.
    """
    if not fatal_once:
        fatal_once.append("x")
        raise FatalToolError("disk vanished")
    return "ok"


@tool(effect="idempotent")
def tidy(x: int) -> str:
    """Would run after the fatal call.

    Args:
        x: anything.
    """
    return "tidied"


def _results(request: ModelRequest) -> list[ToolResultPart]:
    return [p for m in request.messages for p in m.content if isinstance(p, ToolResultPart)]


def _shown(request: ModelRequest, prefix: str) -> bool:
    return any(part.output.startswith(prefix) for part in _results(request))


def _informed(step: str, prefix: str, **args: Any) -> Any:
    """A model that does ``step`` (with ``boom``) unless its request shows a result starting ``prefix``; new
    call ids on every answer, as real models give."""
    answers = iter(range(100))

    def answer(request: ModelRequest) -> ModelResponse:
        n = next(answers)
        if _shown(request, "ok"):
            return reply("done")
        if _shown(request, prefix):
            return calls(call("boom", {"x": 1}, id=f"b{n}"))
        return calls(call(step, args, id=f"s{n}"), call("boom", {"x": 1}, id=f"b{n}"))

    return answer


def _model(step: str, prefix: str, **args: Any) -> ScriptedProvider:
    return ScriptedProvider([_informed(step, prefix, **args)] * 4, by_turn=False)


def _check(store: SqliteStore, sid: str) -> None:
    assert verify_session(store, sid).ok
    check = check_session(store, sid)
    assert check.ok, check


def test_a_fatal_error_after_a_completed_charge_commits_the_turn_and_charges_once(store: SqliteStore) -> None:
    model = _model("charge", "charged", amount_cents=500)
    agent = Agent("pay", [model], tools=[charge, boom], parallel_read_only=False)
    result = Kernel(store, agent).run_sync("charge once")
    sid = result.session_id
    assert (result.status, charges) == ("completed", [500])
    assert of(store, sid, Rollbacked) == []
    first = of(store, sid, ToolCompleted)[0]
    assert [(r.call_id, r.output, bool(r.is_error)) for r in first.results] == [
        ("s0", "charged 500", False),
        ("b0", "FatalToolError: disk vanished", True),
    ]
    assert _shown(model.requests[1], "charged 500")  # the next request shows the charge done
    assert _shown(model.requests[1], "FatalToolError: disk vanished")
    _check(store, sid)


def test_the_calls_a_fatal_error_stopped_are_answered_not_executed(store: SqliteStore) -> None:
    model = ScriptedProvider(
        [
            calls(
                call("charge", {"amount_cents": 5}, id="c1"),
                call("boom", {"x": 1}, id="b1"),
                call("tidy", {"x": 1}, id="t1"),
            ),
            reply("stopping"),
        ],
        by_turn=False,
    )
    agent = Agent("pay", [model], tools=[charge, boom, tidy], parallel_read_only=False)
    result = Kernel(store, agent).run_sync("go")
    (first,) = of(store, result.session_id, ToolCompleted)
    stopped = first.results[2]
    assert stopped.call_id == "t1" and stopped.is_error
    assert stopped.output.startswith("not executed: `boom` failed fatally (disk vanished)")
    _check(store, result.session_id)


@tool(effect="read_only")
def unplug(x: int) -> str:
    """Always fail fatally.

    Args:
        x: anything.
    """
    raise FatalToolError("cable cut")


def test_each_concurrent_call_that_raised_fatally_is_recorded_with_its_own_error(store: SqliteStore) -> None:
    """Two read-only calls of one concurrent group both raise: both ran, so neither is ``not executed``."""
    model = ScriptedProvider(
        [
            calls(
                call("charge", {"amount_cents": 5}, id="c1"),
                call("boom", {"x": 1}, id="b1"),
                call("unplug", {"x": 1}, id="u1"),
                call("tidy", {"x": 1}, id="t1"),
            ),
            reply("stopping"),
        ],
        by_turn=False,
    )
    agent = Agent("pay", [model], tools=[charge, boom, unplug, tidy])  # boom and unplug run concurrently
    result = Kernel(store, agent).run_sync("go")
    (first,) = of(store, result.session_id, ToolCompleted)
    assert [(r.call_id, r.output, bool(r.is_error)) for r in first.results] == [
        ("c1", "charged 5", False),
        ("b1", "FatalToolError: disk vanished", True),
        ("u1", "FatalToolError: cable cut", True),
        (
            "t1",
            "not executed: `boom` failed fatally (disk vanished) and stopped this turn before this call ran; "
            "it did not take effect",
            True,
        ),
    ]
    assert _shown(model.requests[1], "FatalToolError: cable cut")
    _check(store, result.session_id)


def test_with_on_fatal_fail_the_committed_turn_then_fails_the_run(store: SqliteStore) -> None:
    model = _model("charge", "charged", amount_cents=500)
    agent = Agent("pay", [model], tools=[charge, boom], parallel_read_only=False, on_fatal_tool_error="fail")
    result = Kernel(store, agent).run_sync("charge once")
    sid = result.session_id
    assert (result.status, result.detail, charges) == ("failed", "fatal_tool_error: disk vanished", [500])
    ends = ["tool_completed", "entropy_sample", "run_terminal", "custom:session_sealed"]
    assert kinds(store, sid)[-4:] == ends and "rollbacked" not in kinds(store, sid)
    assert of(store, sid, RunTerminal)[0].reason == "failed"
    history = replay_session(store, sid)
    assert any(p.output == "charged 500" for m in history for p in m.content if isinstance(p, ToolResultPart))
    _check(store, sid)


def test_a_fatal_error_with_nothing_irreversible_done_still_rolls_back(store: SqliteStore) -> None:
    model = _model("tidy", "tidied", x=1)
    agent = Agent("pay", [model], tools=[tidy, boom], parallel_read_only=False)
    result = Kernel(store, agent).run_sync("go")
    (rollback,) = of(store, result.session_id, Rollbacked)
    assert rollback.reason is not None and rollback.reason.kind == "fatal_tool_error"
    assert not _shown(model.requests[1], "tidied")  # an idempotent call may run again: rolled back
    _check(store, result.session_id)


NOTE = "The previous step failed (`boom`: disk vanished). Please try a different approach."
"""Upstream's note for a ``FatalToolError`` rollback (deepstrike ``scheduler/rollback.rs``)."""


def _told(request: ModelRequest) -> ModelResponse:
    """The retry after the rollback: its request is the user's message then the kernel's note, and no trace
    of the undone answer (it asked for ``boom``)."""
    texts = [(m.role, m.text_content()) for m in request.messages]
    assert texts == [("user", "go"), ("user", NOTE)], texts
    return reply("stopped: the disk is gone")


def test_a_rolled_back_fatal_turn_tells_the_model_why_before_the_retry(store: SqliteStore) -> None:
    model = ScriptedProvider([calls(call("boom", {"x": 1}, id="b1")), _told], by_turn=False)
    result = Kernel(store, Agent("pay", [model], tools=[boom])).run_sync("go")
    sid = result.session_id
    assert (result.status, result.final_message) == ("completed", "stopped: the disk is gone")
    assert [k for k in kinds(store, sid) if k in ("rollbacked", "custom:kernel_note")] == [
        "rollbacked",
        "custom:kernel_note",
    ]
    assert customs(store, sid, "kernel_note") == [{"turn": 1, "text": NOTE}]
    assert [m.text_content() for m in replay_session(store, sid)][:2] == ["go", NOTE]
    _check(store, sid)  # replay --check rebuilds the retried request, note included
    assert "turn 1: kernel told the model: " + NOTE in [narrate(e) for e in events(store, sid)]


def test_a_fatal_rollback_that_fails_the_run_tells_no_one(store: SqliteStore) -> None:
    model = ScriptedProvider([calls(call("boom", {"x": 1}, id="b1"))], by_turn=False)
    agent = Agent("pay", [model], tools=[boom], on_fatal_tool_error="fail")
    result = Kernel(store, agent).run_sync("go")
    assert (result.status, result.detail) == ("failed", "fatal_tool_error: disk vanished")
    assert customs(store, result.session_id, "kernel_note") == []  # no retry: no one to tell
    _check(store, result.session_id)


def _child(*, ask: bool = False) -> Agent:
    rules = (Rule("ask", tool="note", reason="check notes"),) if ask else ()
    script = [calls(call("note", {"text": "child-note"}, id="k1")), reply("child done")]
    return Agent(
        "child", [ScriptedProvider(script)], tools=[note], policy=Policy(rules=rules, default="allow")
    )


def _lead(model: ScriptedProvider, child: Agent, *, parallel: bool = False) -> Agent:
    return Agent(
        "lead",
        [model],
        tools=[note, boom, subagent(child, role="implement", budgets=Budgets(tokens=100_000))],
        budgets=Budgets(tokens=1_000_000),
        parallel_read_only=parallel,
    )


def _children(store: SqliteStore, sid: str) -> list[str]:
    return [s.session_id for s in store.list_sessions() if s.parent_session_id == sid]


def test_a_child_that_finished_before_a_fatal_error_is_spawned_once(store: SqliteStore) -> None:
    model = _model("child", "child done", task="note")
    result = Kernel(store, _lead(model, _child())).run_sync("go")
    sid = result.session_id
    assert (result.status, len(_children(store, sid)), notes) == ("completed", 1, ["child-note"])
    assert _shown(model.requests[1], "child done")
    _check(store, sid)


def test_a_child_waiting_for_approval_then_a_fatal_error_spawns_no_second_child(store: SqliteStore) -> None:
    model = _model("child", "child done", task="note")
    kernel = Kernel(store, _lead(model, _child(ask=True)))
    result = kernel.run_sync("go", handle_signals=False)
    for _ in range(3):
        if result.status != "suspended":
            break
        for row in pending(store):
            approve(store, row.session_id, row.call_id, responder="test")
        result = kernel.resume_sync(result.session_id, handle_signals=False)
    sid = result.session_id
    assert (result.status, len(_children(store, sid)), notes) == ("completed", 1, ["child-note"])
    assert pending(store) == []
    _check(store, sid)


def test_a_fatal_error_beside_a_waiting_child_suspends_rather_than_rolls_back(store: SqliteStore) -> None:
    # boom and the delegating call share a concurrent group; boom fails first in call order
    model = ScriptedProvider(
        [calls(call("boom", {"x": 1}, id="b1"), call("child", {"task": "note"}, id="s1")), reply("all done")],
        by_turn=False,
    )
    kernel = Kernel(store, _lead(model, _child(ask=True), parallel=True))
    result = kernel.run_sync("go", handle_signals=False)
    sid = result.session_id
    assert (result.status, result.detail) == ("suspended", "sub_agent_await")
    assert of(store, sid, Rollbacked) == []
    for row in pending(store):
        approve(store, row.session_id, row.call_id, responder="test")
    result = kernel.resume_sync(sid, handle_signals=False)
    assert (result.status, len(_children(store, sid)), notes) == ("completed", 1, ["child-note"])
    (done,) = of(store, sid, ToolCompleted)
    assert [r.output for r in done.results] == ["ok", "child done"]  # boom ran again on resume
    _check(store, sid)
