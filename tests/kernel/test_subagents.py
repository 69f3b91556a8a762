"""Sub-agents (flightlog.kernel.subagents): spawning, capabilities, grants, inheritance, waiting, cancelling."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from flightlog.events import (
    AgentProcessChanged,
    BudgetExceeded,
    BudgetUsageReported,
    OperationCancelled,
    RunStarted,
)
from flightlog.kernel import Agent, Budgets, Kernel, Policy, Rule, abort, approve, pending, tool
from flightlog.kernel.delegation import BUDGET_GRANT
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.kernel.state import load_state
from flightlog.kernel.subagents import SubAgent, spawner, subagent
from flightlog.messages import ToolResultPart
from flightlog.providers.base import ModelRequest, ModelResponse
from flightlog.recorder import verify_session
from flightlog.store import SqliteStore

from .helpers import customs, echo, events, of

WRITTEN: list[str] = []


@tool(effect="side_effect")
def write_note(text: str) -> str:
    """Write a note."""
    WRITTEN.append(text)
    return f"wrote {text}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    WRITTEN.clear()


def child_agent(*script: Any, name: str = "child", **fields: Any) -> Agent:
    fields.setdefault("tools", [echo])
    return Agent(name, [ScriptedProvider(list(script), by_turn=True)], **fields)


def parent_agent(*script: Any, tools: list[Any], **fields: Any) -> Agent:
    return Agent("parent", [ScriptedProvider(list(script), by_turn=True)], tools=tools, **fields)


def kernel(store: SqliteStore, agent: Agent) -> Kernel:
    return Kernel(store, agent, notary=None, heartbeat_s=None)


def children(store: SqliteStore, parent: str) -> list[str]:
    return [s.session_id for s in store.list_sessions() if s.parent_session_id == parent]


def results(store: SqliteStore, session_id: str) -> dict[str, ToolResultPart]:
    from flightlog.events import ToolCompleted

    return {r.call_id: r for e in of(store, session_id, ToolCompleted) for r in e.results}  # type: ignore[misc]


def test_parallel_children_run_concurrently_each_in_its_own_session(store: SqliteStore) -> None:
    started: list[str] = []
    both = asyncio.Event()

    async def answer(request: ModelRequest) -> ModelResponse:
        goal = request.messages[0].text_content()
        started.append(goal)
        if len(started) == 2:
            both.set()
        await asyncio.wait_for(both.wait(), 60)  # a child run after the other would wait here in vain
        return reply(f"answer to {goal}")

    helper = subagent(child_agent(answer), role="explore")
    first = calls(call("child", {"task": "A"}, id="a"), call("child", {"task": "B"}, id="b"))
    result = kernel(store, parent_agent(first, reply("done"), tools=[echo, helper])).run_sync(
        "go", session_id="p"
    )
    assert result.status == "completed"
    assert {k: v.output for k, v in results(store, "p").items()} == {"a": "answer to A", "b": "answer to B"}
    kids = children(store, "p")
    assert len(kids) == 2 and all(verify_session(store, k).ok for k in kids)
    assert {store.get_session(k).status for k in kids} == {"completed"}
    # every child session is named in full in the parent's ledger, with the states it passed
    states = [(e.agent_id, e.state) for e in of(store, "p", AgentProcessChanged)]
    for kid in kids:
        assert [s for a, s in states if a == kid] == ["spawned", "running", "joined"]


def test_a_child_never_has_more_capabilities_than_its_parent() -> None:
    greedy = subagent(child_agent(reply("x"), tools=[echo, write_note]), name="greedy")
    with pytest.raises(ValueError, match="capabilities its parent 'parent' lacks: write_note"):
        parent_agent(reply("x"), tools=[echo, greedy])


def test_a_child_mounts_only_the_servers_its_parent_was_given() -> None:
    """A child cannot smuggle in an MCP server: not one its parent lacks, nor its parent's id with another
    command (issue 14 item 4)."""
    from flightlog.kernel.mcp import McpServer

    given = McpServer(id="fs", command="fs-server", args=("--root", "/srv"))
    stranger = subagent(child_agent(reply("x"), capabilities=[McpServer(id="web", command="curl-server")]))
    with pytest.raises(ValueError, match="declares McpServer:web, which its parent 'parent' lacks"):
        parent_agent(reply("x"), tools=[echo, stranger], capabilities=[given])
    swapped = subagent(child_agent(reply("x"), capabilities=[McpServer(id="fs", command="/tmp/evil")]))
    with pytest.raises(ValueError, match="declares McpServer:fs unlike its parent 'parent' does"):
        parent_agent(reply("x"), tools=[echo, swapped], capabilities=[given])
    same = subagent(child_agent(reply("x"), capabilities=[given]))
    assert parent_agent(reply("x"), tools=[echo, same], capabilities=[given]).capabilities == (given,)


def test_readonly_isolation_leaves_only_read_only_tools(store: SqliteStore) -> None:
    provider = ScriptedProvider([reply("looked")], by_turn=True)
    helper = subagent(Agent("child", [provider], tools=[echo, write_note]), isolation="readonly")
    agent = parent_agent(
        calls(call("child", {"task": "look"}, id="c")), reply("ok"), tools=[echo, write_note, helper]
    )
    assert kernel(store, agent).run_sync("go", session_id="p").status == "completed"
    (entry, *_) = of(store, "p", AgentProcessChanged)
    assert (entry.isolation, entry.permitted_capability_ids) == ("readonly", ["echo"])
    assert [t.name for t in provider.requests[0].tools] == ["echo"]


def test_the_parent_policy_is_a_ceiling_for_the_child(store: SqliteStore) -> None:
    child = child_agent(calls(call("echo", {"text": "hi"}, id="e")), reply("tried"))
    agent = parent_agent(
        calls(call("child", {"task": "echo"}, id="c")),
        reply("ok"),
        tools=[echo, subagent(child)],
        policy=Policy(rules=(Rule("deny", tool="echo", reason="no echo here"),)),
    )
    assert kernel(store, agent).run_sync("go", session_id="p").status == "completed"
    (kid,) = children(store, "p")
    assert results(store, kid)["e"].output == "denied by policy: parent policy: no echo here"


def test_a_grant_is_capped_by_what_the_parent_has_left_and_exhausting_it_ends_the_child(
    store: SqliteStore,
) -> None:
    echoing = calls(call("echo", {"text": "x"}, id="e"))
    child = child_agent(echoing, echoing, echoing, reply("never"))
    helper = subagent(child, budgets=Budgets(tokens=10_000))  # asks for more than the parent has
    agent = parent_agent(
        calls(call("child", {"task": "work"}, id="c")),
        reply("ok"),
        tools=[echo, helper],
        budgets=Budgets(tokens=45),
    )
    result = kernel(store, agent).run_sync("go", session_id="p")
    (grant,) = customs(store, "p", BUDGET_GRANT)
    assert grant["tokens"] == 45 - 15  # the parent's first call used 15
    (kid,) = children(store, "p")
    assert store.get_session(kid).status == "budget_exhausted"
    assert [e.budget for e in of(store, kid, BudgetExceeded)] == ["tokens"]
    *_, exited = of(store, "p", AgentProcessChanged)
    assert (exited.state, exited.result_termination) == ("failed", "token_budget")
    (usage,) = of(store, "p", BudgetUsageReported)
    assert (usage.tokens, usage.rounds, usage.subagents) == (30, 2, 1)
    assert results(store, "p")["c"].is_error and "token_budget" in results(store, "p")["c"].output
    # the parent never overspends through its child: 15 (its call) + 30 (the child) = 45, nothing left
    assert result.status == "budget_exhausted" and result.tokens == 15
    assert [e.budget for e in of(store, "p", BudgetExceeded)] == ["tokens"]


def test_a_spawn_with_nothing_left_is_refused_with_budget_exceeded(store: SqliteStore) -> None:
    helper = subagent(child_agent(reply("x")))
    agent = parent_agent(
        calls(call("child", {"task": "t"}, id="c")), tools=[echo, helper], budgets=Budgets(turns=1)
    )
    result = kernel(store, agent).run_sync("go", session_id="p")
    assert children(store, "p") == [] and result.status == "budget_exhausted"
    run_id = of(store, "p", RunStarted)[0].run_id
    refused, ended = of(store, "p", BudgetExceeded)
    assert (refused.operation_id, refused.reservation_id, refused.budget) == (
        f"{run_id}:turn-1:agent-c",
        f"{run_id}:turn-1:grant-c",
        "turns",
    )
    assert ended.budget == "turns" and results(store, "p")["c"].is_error


@pytest.mark.parametrize(
    ("role", "inheritance", "system", "sees_parent"),
    [
        ("custom", "none", "child rules", False),
        ("explore", "systemonly", "parent rules\n\nchild rules", False),
        ("plan", "full", "parent rules\n\nchild rules", True),
    ],
)
def test_context_inheritance_follows_the_role(
    store: SqliteStore, role: str, inheritance: str, system: str, sees_parent: bool
) -> None:
    provider = ScriptedProvider([reply("planned")], by_turn=True)
    helper = subagent(Agent("child", [provider], system_prompt="child rules"), role=role)  # type: ignore[arg-type]
    agent = parent_agent(
        calls(call("child", {"task": "plan it"}, id="c"), text="I will delegate the plan"),
        reply("ok"),
        tools=[helper],
        system_prompt="parent rules",
    )
    assert kernel(store, agent).run_sync("the parent goal", session_id="p").status == "completed"
    assert of(store, "p", AgentProcessChanged)[0].context_inheritance == inheritance
    request = provider.requests[0]
    assert request.system_prompt == system
    first = request.messages[0].text_content()
    assert first.startswith("plan it")
    assert ("the parent goal" in first and "I will delegate the plan" in first) is sees_parent


def test_a_spawner_picks_the_child_by_role(store: SqliteStore) -> None:
    spawn = spawner(
        [
            SubAgent(child_agent(reply("explored"), name="scout"), role="explore"),
            SubAgent(child_agent(reply("verified"), name="checker"), role="verify"),
        ]
    )
    first = calls(
        call("spawn", {"role": "verify", "task": "check"}, id="v"),
        call("spawn", {"role": "nope", "task": "x"}, id="n"),
    )
    result = kernel(store, parent_agent(first, reply("ok"), tools=[echo, spawn])).run_sync(
        "go", session_id="p"
    )
    assert result.status == "completed"
    got = results(store, "p")
    assert got["v"].output == "verified"
    assert got["n"].is_error and "unknown role 'nope'" in got["n"].output
    assert [e.role for e in of(store, "p", AgentProcessChanged)] == ["verify"] * 3


def _asking_child() -> Agent:
    return child_agent(
        calls(call("write_note", {"text": "hello"}, id="w")),
        reply("written"),
        tools=[write_note],
        policy=Policy(rules=(Rule("ask", tool="write_note"),)),
    )


def _waiting_tree() -> Agent:
    return parent_agent(
        calls(call("child", {"task": "write"}, id="c")),
        reply("all done"),
        tools=[write_note, subagent(_asking_child())],
    )


def test_an_approval_inside_a_child_waits_in_the_tree_and_resuming_the_parent_writes_nothing(
    store: SqliteStore,
) -> None:
    assert kernel(store, _waiting_tree()).run_sync("go", session_id="p").status == "suspended"
    (kid,) = children(store, "p")
    (row,) = pending(store)
    assert (row.session_id, row.call_id, row.parent_session_id, row.root_session_id) == (kid, "w", "p", "p")
    before = len(events(store, "p"))
    assert kernel(store, _waiting_tree()).resume_sync("p").status == "suspended"
    assert len(events(store, "p")) == before  # nothing decided: the tree still waits, nothing is written
    approve(store, kid, "w")
    result = kernel(store, _waiting_tree()).resume_sync("p")
    assert (result.status, result.final_message, WRITTEN) == ("completed", "all done", ["hello"])
    assert children(store, "p") == [kid]  # resumed, not spawned again
    assert [e.state for e in of(store, "p", AgentProcessChanged)] == [
        "spawned",
        "running",
        "waiting_input",
        "running",
        "joined",
    ]


def test_abort_of_a_parent_cascades_to_its_children(store: SqliteStore) -> None:
    assert kernel(store, _waiting_tree()).run_sync("go", session_id="p").status == "suspended"
    (kid,) = children(store, "p")
    assert abort(store, "p", notary=None)
    assert [e.operation_id.endswith(":abort") for e in of(store, kid, OperationCancelled)] == [True]
    assert store.get_session(kid).status == "cancelled"
    killed = of(store, "p", AgentProcessChanged)[-1]
    assert (killed.agent_id, killed.state, killed.result_termination) == (kid, "killed", "user_abort")
    approve(store, kid, "w", notary=None)
    assert kernel(store, _waiting_tree()).resume_sync("p").status == "completed"
    assert WRITTEN == ["hello"] and of(store, "p", AgentProcessChanged)[-1].state == "joined"


def test_a_child_stopped_by_its_parents_abort_reads_paused_like_its_parent(tmp_path: Path) -> None:
    """``killed`` by a parent's abort is resumable (delegation.PROCESS_STATES): ``runs`` and ``ls`` show the
    child ``paused`` as its parent, never ``terminal``, and the stored rows still match a refold."""
    from typer.testing import CliRunner

    from flightlog.cli import app

    with SqliteStore(tmp_path / "t.db") as store:
        assert kernel(store, _waiting_tree()).run_sync("go", session_id="p").status == "suspended"
        (kid,) = children(store, "p")
        assert abort(store, "p", notary=None)
    runner = CliRunner()

    def flightlog(*args: str) -> Any:
        result = runner.invoke(app, ["--db", str(tmp_path / "t.db"), *args])
        assert result.exit_code == 0, result.stdout + result.stderr
        return json.loads(result.stdout) if "--json" in args else result.stdout

    runs = {row["run_id"]: row for row in flightlog("runs", "--json")}
    assert (runs["p"]["state"], runs[kid]["state"]) == ("paused", "paused")
    assert "terminal" not in runs[kid] and runs[kid]["parent"] == "p"
    statuses = {row["session_id"]: row["status"] for row in flightlog("ls", "--json")}
    assert (statuses["p"], statuses[kid]) == ("paused", "paused")
    tree = flightlog("runs", "--tree")
    assert "terminal" not in tree and tree.count("  paused  ") == 2  # the state cells (details say it too)
    flightlog("verify", "--all")  # the runs rows agree with a refold of the ledgers
    with SqliteStore(tmp_path / "t.db") as store:
        approve(store, kid, "w", notary=None)
        assert kernel(store, _waiting_tree()).resume_sync("p").status == "completed"
    assert WRITTEN == ["hello"]


def test_resuming_an_aborted_tree_reopens_the_childs_wait_and_the_parents(store: SqliteStore) -> None:
    from flightlog.events import PermissionRequested, Suspended, ToolGated
    from flightlog.runs import list_runs

    from .helpers import kinds

    assert kernel(store, _waiting_tree()).run_sync("go", session_id="p").status == "suspended"
    (kid,) = children(store, "p")
    assert abort(store, "p", notary=None)
    assert pending(store) == []  # both sessions cancelled
    result = kernel(store, _waiting_tree()).resume_sync("p")
    assert (result.status, result.detail, result.pending_calls) == ("suspended", "sub_agent_await", ())
    assert [store.get_session(s).status for s in ("p", kid)] == ["suspended", "suspended"]
    # the child's wait, re-opened as it was opened (seed 000)
    assert kinds(store, kid)[-4:] == [
        "operation_cancelled",
        "tool_gated",
        "permission_requested",
        "suspended",
    ]
    assert of(store, kid, ToolGated)[-1].call_id == "w"
    assert of(store, kid, PermissionRequested)[-1].tool == "write_note"
    assert of(store, kid, Suspended)[-1] == Suspended(turn=1, reason="approval", pending_calls=["w"])
    # the parent records what it records for a child waiting: the process entry, then its own suspension
    assert [e.state for e in of(store, "p", AgentProcessChanged)][-2:] == ["killed", "waiting_input"]
    assert kinds(store, "p")[-2:] == ["agent_process_changed", "suspended"]
    assert of(store, "p", Suspended)[-1] == Suspended(turn=1, reason="sub_agent_await", pending_calls=["c"])
    (row,) = pending(store)
    assert (row.session_id, row.call_id, row.parent_session_id, row.root_session_id) == (kid, "w", "p", "p")
    states = {r.run_id: r.state.value for r in list_runs(store)}
    assert (states["p"], states[kid]) == ("waiting_input", "waiting_input")
    before = (len(events(store, "p")), len(events(store, kid)))
    assert kernel(store, _waiting_tree()).resume_sync("p").status == "suspended"  # still waiting: no write
    assert (len(events(store, "p")), len(events(store, kid))) == before
    approve(store, kid, "w")
    done = kernel(store, _waiting_tree()).resume_sync("p")
    assert (done.status, done.final_message, WRITTEN) == ("completed", "all done", ["hello"])
    assert children(store, "p") == [kid] and of(store, "p", AgentProcessChanged)[-1].state == "joined"
    assert verify_session(store, "p").ok and verify_session(store, kid).ok


def test_an_aborted_tree_with_one_child_decided_runs_it_and_reopens_the_other(store: SqliteStore) -> None:
    from flightlog.events import Suspended
    from flightlog.kernel.effects import effect_key
    from flightlog.kernel.subagents import child_session_id

    def tree() -> Agent:
        both = calls(call("child", {"task": "a"}, id="a"), call("child", {"task": "b"}, id="b"))
        return parent_agent(both, reply("all done"), tools=[write_note, subagent(_asking_child())])

    assert kernel(store, tree()).run_sync("go", session_id="p").status == "suspended"
    assert {r.call_id for r in pending(store)} == {"w"} and len(pending(store)) == 2
    kid_a, kid_b = (child_session_id(effect_key("p", 1, c)) for c in ("a", "b"))
    assert sorted(children(store, "p")) == sorted([kid_a, kid_b])
    assert abort(store, "p", notary=None)
    approve(store, kid_a, "w")  # decided while cancelled
    result = kernel(store, tree()).resume_sync("p")
    assert (result.status, result.detail) == ("suspended", "sub_agent_await")
    assert WRITTEN == ["hello"] and store.get_session(kid_a).status == "completed"
    assert store.get_session(kid_b).status == "suspended"  # re-opened by its own resume
    assert of(store, kid_b, Suspended)[-1] == Suspended(turn=1, reason="approval", pending_calls=["w"])
    assert [(r.session_id, r.call_id) for r in pending(store)] == [(kid_b, "w")]
    assert of(store, "p", Suspended)[-1] == Suspended(turn=1, reason="sub_agent_await", pending_calls=["b"])
    approve(store, kid_b, "w")
    done = kernel(store, tree()).resume_sync("p")
    assert (done.status, WRITTEN) == ("completed", ["hello", "hello"])
    assert verify_session(store, "p").ok and verify_session(store, kid_b).ok


def test_cancelling_the_parent_cancels_its_running_child_and_resume_finishes_the_tree(
    store: SqliteStore,
) -> None:
    in_call = asyncio.Event()

    async def hang(request: ModelRequest) -> ModelResponse:
        in_call.set()
        await asyncio.Event().wait()  # until cancelled
        raise AssertionError("unreachable")

    def tree(first_child_turn: Any) -> Agent:
        helper = subagent(child_agent(first_child_turn))
        return parent_agent(calls(call("child", {"task": "t"}, id="c")), reply("done"), tools=[echo, helper])

    async def run_and_cancel() -> str:
        k = kernel(store, tree(hang))
        task = asyncio.create_task(k.run("go", session_id="p"))
        await asyncio.wait_for(in_call.wait(), 60)
        k.cancel()
        return (await task).status

    assert asyncio.run(run_and_cancel()) == "cancelled"
    (kid,) = children(store, "p")
    assert [e.reason.value for e in of(store, kid, OperationCancelled)] == ["user"]
    assert [e.reason.value for e in of(store, "p", OperationCancelled)] == ["user"]
    assert of(store, "p", AgentProcessChanged)[-1].state == "suspended"
    result = kernel(store, tree(reply("finished"))).resume_sync("p")
    assert result.status == "completed" and children(store, "p") == [kid]
    assert results(store, "p")["c"].output == "finished"


def test_the_demo_tree_is_killed_resumed_approved_and_verified(tmp_path: Path) -> None:
    from flightlog.cli.demo_subagents import run_subagents_demo

    console = Console(record=True, width=200)
    with SqliteStore(tmp_path / "demo.db") as store:
        assert run_subagents_demo(store, console) == 0, console.export_text()
        lead = next(s for s in store.list_sessions() if s.parent_session_id is None)
        tree = [s for s in store.list_sessions() if s.session_id != lead.session_id]
        assert len(tree) == 4 and all(verify_session(store, s.session_id).ok for s in tree)
    text = console.export_text()
    assert "4 side effects, each exactly once; 5 sessions, every chain verifies" in text


def test_sub_agent_declarations_refuse_what_flightlog_does_not_perform() -> None:
    with pytest.raises(ValueError, match="worktree and remote isolation are not performed"):
        SubAgent(child_agent(reply("x")), isolation="worktree")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="role must be one of"):
        SubAgent(child_agent(reply("x")), role="boss")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="one sub-agent per role"):
        spawner([SubAgent(child_agent(reply("x"))), SubAgent(child_agent(reply("y")))])
    assert dataclasses.is_dataclass(SubAgent)


def test_the_tree_from_the_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """run (exit 3: a child waits) → pending names the parent → approve the child → resume the child (the CLI
    resumes the root) → runs --tree shows spent/granted → show names each child in full → verify --all."""
    from typer.testing import CliRunner

    from flightlog.cli import app
    from flightlog.cli.demo_subagents import NOTES_ENV

    monkeypatch.setenv(NOTES_ENV, str(tmp_path))
    runner = CliRunner()

    def flightlog(*args: str) -> tuple[int, str, str]:
        result = runner.invoke(app, ["--db", str(tmp_path / "t.db"), *args])
        return result.exit_code, result.stdout, result.stderr

    code, out, err = flightlog(
        "run", "flightlog.cli.demo_subagents:tree_agent", "--goal", "go", "--json", "-q"
    )
    assert code == 3, out + err
    lead = json.loads(out)["session_id"]
    code, out, _ = flightlog("pending", "--json")
    (row,) = json.loads(out)
    assert (row["tool"], row["call_id"], row["root_session_id"]) == ("publish", "p1", lead)
    writer = row["session_id"]
    assert row["parent_session_id"] == lead
    code, out, _ = flightlog("approve", writer, "p1")
    assert code == 0 and f"continue with: flightlog resume {lead}" in out
    code, out, err = flightlog("resume", writer)
    assert code == 0 and f"resuming its run tree from {lead}" in err and "the report is published" in out
    code, out, _ = flightlog("runs", "--tree")
    lines = out.splitlines()
    # the lead's own tokens, then the tree's (its sub-agents' grants come out of its budget)
    assert lines[0].startswith(
        f"{lead}  terminal (completed)  tokens 45/2000 (with sub-agents 225/2000)  steps 3/30"
    )
    assert sum(1 for line in lines if "tokens 45/300  steps 3/5" in line) == 2  # the researchers' grants
    code, out, _ = flightlog("show", lead)
    assert f"sub-agent {writer} joined (completed)" in out
    assert flightlog("verify", "--all")[0] == 0
    assert len((tmp_path / "subagents-notes.txt").read_text().splitlines()) == 4


def test_a_wall_clock_grant_leaves_the_parent_time_to_settle(store: SqliteStore) -> None:
    from .helpers import FakeClock

    helper = subagent(child_agent(reply("quick")))
    agent = parent_agent(
        calls(call("child", {"task": "t"}, id="c")),
        reply("ok"),
        tools=[echo, helper],
        budgets=Budgets(wall_clock_ms=10_000),
    )
    k = Kernel(store, agent, notary=None, heartbeat_s=None, clock=FakeClock())  # no time passes
    assert k.run_sync("go", session_id="p").status == "completed"
    (grant,) = customs(store, "p", BUDGET_GRANT)
    assert grant["wall_clock_ms"] == 9_000  # 90% of what the parent has left
    (kid,) = children(store, "p")
    assert load_state(store, kid).limits == Budgets(wall_clock_ms=9_000)


def test_a_childs_cost_is_granted_from_and_charged_to_its_parent(store: SqliteStore) -> None:
    from flightlog.kernel import Prices

    prices = Prices(input_per_1k=1.0, output_per_1k=2.0)  # a scripted call: 10 in + 5 out = 0.02
    helper = subagent(child_agent(calls(call("echo", {"text": "x"}, id="e")), reply("done")))
    agent = parent_agent(
        calls(call("child", {"task": "t"}, id="c")),
        reply("ok"),
        tools=[echo, helper],
        budgets=Budgets(cost=0.1, prices=prices),
    )
    result = kernel(store, agent).run_sync("go", session_id="p")
    assert result.status == "completed"
    (grant,) = customs(store, "p", BUDGET_GRANT)
    assert grant["cost"] == pytest.approx(0.1 - 0.02)
    (released,) = customs(store, "p", "budget_grant_released")
    assert released["cost"] == pytest.approx(0.04)  # the child's two calls
    assert released["returned"]["cost"] == pytest.approx(0.08 - 0.04)
    (kid,) = children(store, "p")
    limits = load_state(store, kid).limits
    assert limits is not None and limits.cost == pytest.approx(0.08) and limits.prices == prices
    assert load_state(store, "p").delegation.charge().cost == pytest.approx(0.04)
