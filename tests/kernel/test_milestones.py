"""Milestone contracts (issue 15 item 2): a phased agent advances, is blocked, advances again and gets
the tool its phase unlocks; verdicts are recorded; phases are gate receipts in the run's snapshot."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from flightlog.events import (
    CapabilityChanged,
    MilestoneAdvanced,
    MilestoneBlocked,
    RunTerminal,
    ToolCompleted,
)
from flightlog.kernel import Agent, Kernel, tool
from flightlog.kernel.capabilities import ToolCapability
from flightlog.kernel.context import ContextPolicy, ContextWindow
from flightlog.kernel.milestones import (
    MILESTONE_VERDICT,
    JudgeInput,
    ModelJudge,
    Phase,
    Verdict,
    parse_verdict,
)
from flightlog.kernel.requests import check_requests, check_session
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.replay import reconstruct
from flightlog.runs import ReceiptKind, session_snapshot
from flightlog.sessions import iter_events
from flightlog.store import SqliteStore

from .helpers import customs, of, run


@tool(effect="idempotent")
def deploy(target: str) -> str:
    """Deploy to a target.

    Args:
        target: Where to deploy.
    """
    return f"deployed to {target}"


def planned(given: JudgeInput) -> Verdict:
    ok = given.answer is not None and given.answer.startswith("PLAN:")
    return Verdict(ok, () if ok else ("the answer must start with 'PLAN:'",))


def deployed(given: JudgeInput) -> bool:
    return any(
        isinstance(e, ToolCompleted) and "deployed" in e.results[0].output for _s, e in given.state.events
    )


def phased(provider: ScriptedProvider, **phase2: Any) -> Agent:
    return Agent(
        name="phased",
        route=[provider],
        capabilities=[ToolCapability(deploy)],  # locked by default
        milestones=[
            Phase("plan", judge=planned, criteria=["a plan"], unlocks=["deploy"]),
            Phase("ship", judge=phase2.pop("judge", deployed), criteria=["deployed"], **phase2),
        ],
    )


def test_a_phased_agent_advances_is_blocked_advances_again_and_gets_its_tool(store: SqliteStore) -> None:
    provider = ScriptedProvider(
        [
            reply("I think we should deploy"),  # turn 1: plan blocked
            reply("PLAN: deploy to prod"),  # turn 2: plan passes, deploy unlocked
            reply("done, I believe"),  # turn 3: ship blocked (nothing deployed)
            calls(call("deploy", {"target": "prod"}, id="c1")),  # turn 4: the unlocked tool
            reply("shipped"),  # turn 5: ship passes, the run completes
        ],
        by_turn=False,
    )
    result = run(Kernel(store, phased(provider), notary=None).run("ship it", session_id="m1"))
    assert result.status == "completed" and result.final_message == "shipped"
    blocked = of(store, "m1", MilestoneBlocked)
    assert [(b.turn, b.phase_id, b.reason) for b in blocked] == [
        (1, "plan", "the answer must start with 'PLAN:'"),
        (3, "ship", "milestone criteria not met"),
    ]
    advanced = of(store, "m1", MilestoneAdvanced)
    assert [(a.turn, a.phase_id, a.capabilities_unlocked) for a in advanced] == [
        (2, "plan", ["Tool:deploy"]),
        (5, "ship", []),
    ]
    [mount] = of(store, "m1", CapabilityChanged)
    assert (mount.turn, mount.added, mount.change_kind, mount.capability_id) == (
        2,
        ["Tool:deploy"],
        "mount",
        "deploy",
    )
    assert (mount.mounted_by, mount.mount_reason) == ("milestone:plan", "phase_advance")
    # The tool is offered only after the phase passed; the model was told why it was blocked.
    offered = [[s.name for s in r.tools] for r in provider.requests]
    assert offered == [[], [], ["deploy"], ["deploy"], ["deploy"]]
    told = provider.requests[1].messages[-1]
    assert told.role == "user"
    assert told.text_content() == (
        "[MILESTONE BLOCKED: plan — the answer must start with 'PLAN:'. Address the criteria and try again.]"
    )
    assert (
        provider.requests[2].messages[-1].text_content() == "[MILESTONE PASSED: plan — unlocked: Tool:deploy]"
    )
    assert of(store, "m1", ToolCompleted)[0].results[0].output == "deployed to prod"
    assert of(store, "m1", RunTerminal)[0].reason == "completed"
    verdicts = customs(store, "m1", MILESTONE_VERDICT)
    assert [(v["phase_id"], v["judge"], v["passed"]) for v in verdicts] == [
        ("plan", "function", False),
        ("plan", "function", True),
        ("ship", "function", False),
        ("ship", "function", True),
    ]
    # replay and replay --check see the same history the model saw.
    pairs = [(row.seq, e) for row, e in iter_events(store, "m1")]
    history = reconstruct(pairs)
    assert history[:-2] == list(provider.requests[-1].messages)
    assert [m.text_content() for m in history[-2:]] == [
        "shipped",
        "[MILESTONE PASSED: ship — unlocked: nothing]",
    ]
    assert check_session(store, "m1").ok
    # Each phase is a gate receipt of the run.
    rows = [(row.seq, row.recorded_at_ms, e) for row, e in iter_events(store, "m1")]
    refs = {r.reference: r for r in session_snapshot(store.get_session("m1"), rows).refs}
    assert refs["milestone:m1:plan"].kind == ReceiptKind.GATE and refs["milestone:m1:plan"].label == "passed"
    assert refs["milestone:m1:ship"].label == "passed"


def test_a_model_judge_records_its_verdict_and_reasons(store: SqliteStore) -> None:
    judge_model = ScriptedProvider(
        [
            reply('Verdict: {"passed": false, "reasons": ["no deployment yet"]}'),
            reply(json.dumps({"passed": True, "reasons": ["deployed"]})),
        ],
        model="judge-model",
        by_turn=False,
    )
    judge = ModelJudge(judge_model, rubric="Pass only when the agent reports a deployment.")
    provider = ScriptedProvider(
        [reply("PLAN: go"), reply("thinking"), reply("deployed everywhere")], by_turn=False
    )
    result = run(Kernel(store, phased(provider, judge=judge), notary=None).run("ship", session_id="m2"))
    assert result.status == "completed"
    verdicts = customs(store, "m2", MILESTONE_VERDICT)
    assert [(v["judge"], v["passed"], v["reasons"]) for v in verdicts[1:]] == [
        ("model", False, ["no deployment yet"]),
        ("model", True, ["deployed"]),
    ]
    assert verdicts[1]["model"] == "judge-model" and len(verdicts[1]["rubric_digest"]) == 64
    assert [b.reason for b in of(store, "m2", MilestoneBlocked)] == ["no deployment yet"]
    usage = [u for u in customs(store, "m2", "model_usage") if u.get("purpose") == "milestone_judge"]
    assert len(usage) == 2
    assert (
        judge_model.requests[0].system_prompt is not None
        and "Pass only when" in judge_model.requests[0].system_prompt
    )
    assert "thinking" in judge_model.requests[0].messages[0].text_content()


def test_a_model_judge_request_is_on_record_and_replay_check_rebuilds_it(store: SqliteStore) -> None:
    judge_model = ScriptedProvider(
        [reply('{"passed": false, "reasons": ["no"]}'), reply('{"passed": true}')],
        model="judge-model",
        by_turn=False,
    )
    judge = ModelJudge(judge_model, rubric="Pass only when the agent reports a deployment.")
    provider = ScriptedProvider(
        [reply("PLAN: go"), reply("thinking"), reply("deployed everywhere")], by_turn=False
    )
    agent = phased(provider, judge=judge)
    assert run(Kernel(store, agent, notary=None).run("ship", session_id="m5")).status == "completed"
    pairs = [(row.seq, e) for row, e in iter_events(store, "m5")]
    invoked = [
        (seq, e.payload)
        for seq, e in pairs
        if e.kind == "custom"
        and e.custom_kind == "prompt_program_invoked"  # type: ignore[union-attr]
        and e.payload["actor"] == "milestone_judge"  # type: ignore[union-attr]
    ]
    assert len(invoked) == 2 == len(judge_model.requests)  # one per judge call, before its model_usage
    first_usage = next(
        seq
        for seq, e in pairs
        if e.kind == "custom"
        and e.custom_kind == "model_usage"  # type: ignore[union-attr]
        and e.payload.get("purpose") == "milestone_judge"  # type: ignore[union-attr]
    )
    assert invoked[0][0] < first_usage
    assert invoked[0][1]["sections"][1]["items"] == ["deployed"]
    check = check_session(store, "m5")
    kernel_calls = len(provider.requests)
    assert check.ok and check.checked == kernel_calls + 2  # the judge's requests are checked too
    # a tampered criterion no longer rebuilds the request the judge was sent
    seq = invoked[1][0]
    tampered = json.loads(json.dumps(invoked[1][1]))
    tampered["sections"][1]["items"] = ["anything goes"]
    forged = [(s, e.model_copy(update={"payload": tampered}) if s == seq else e) for s, e in pairs]
    bad = check_requests(forged)
    assert [(m.seq, m.actor) for m in bad.mismatches] == [(seq, "milestone_judge")]


def test_retry_budget_exhausted_ends_the_run(store: SqliteStore) -> None:
    provider = ScriptedProvider([reply("PLAN: x"), reply("nope"), reply("still no")], by_turn=False)
    agent = phased(provider, max_attempts=2)
    result = run(Kernel(store, agent, notary=None).run("ship", session_id="m3"))
    assert result.status == "failed"
    assert [b.reason for b in of(store, "m3", MilestoneBlocked)] == [
        "milestone criteria not met",
        "retry budget exhausted: milestone criteria not met",
    ]
    assert of(store, "m3", RunTerminal)[0].reason == "milestone_exceeded"


def test_parse_verdict_needs_a_boolean_passed() -> None:
    assert parse_verdict('x {"passed": true} y') == Verdict(True)
    with pytest.raises(ValueError, match="no JSON verdict"):
        parse_verdict('{"passed": "yes"}')


def test_phases_must_unlock_declared_capabilities() -> None:
    with pytest.raises(ValueError, match="undeclared capabilities"):
        Agent(
            name="x",
            route=[ScriptedProvider(by_turn=False)],
            milestones=[Phase("p", judge=planned, unlocks=["nope"])],
        )


def test_a_model_judges_max_tokens_is_capped_by_its_windows_output_reserve(store: SqliteStore) -> None:
    """A judge's call asks for at most the ``output_reserve`` of the judge model's window in the agent's
    context policy (as a turn's and a summary's do), not its own 512."""
    judge_model = ScriptedProvider([reply('{"passed": true}')], model="judge-model", by_turn=False)
    provider = ScriptedProvider([reply("PLAN: go"), reply("deployed")], by_turn=False)
    agent = phased(provider, judge=ModelJudge(judge_model, rubric="r", max_tokens=512))
    windows = {"judge-model": ContextWindow(tokens=4000, output_reserve=40)}
    agent = dataclasses.replace(agent, context=ContextPolicy(windows=windows))
    result = run(Kernel(store, agent, notary=None).run("ship", session_id="m9"))
    assert result.status == "completed"
    assert [r.max_tokens for r in judge_model.requests] == [40]
    usage = [u for u in customs(store, "m9", "model_usage") if u.get("purpose") == "milestone_judge"]
    assert [u["reserved_tokens"] for u in usage] == [40]
