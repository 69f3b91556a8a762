"""A sub-agent tree's depth bound and its token grants (the attack pass: an agent whose sub-agent is itself
created sessions until Python's RecursionError; with a token budget the tree overran it by one call)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flightlog.cli import app
from flightlog.errors import LedgerIntegrityError
from flightlog.events import Custom, ToolCompleted
from flightlog.kernel import Agent, Kernel, approve, pending
from flightlog.kernel.agent import DEFAULT_MAX_SPAWN_DEPTH
from flightlog.kernel.budgets import Budgets
from flightlog.kernel.effects import effect_key
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.kernel.spec import load_agent
from flightlog.kernel.state import KernelState, load_state
from flightlog.kernel.subagents import child_session_id, subagent
from flightlog.store import SqliteStore

from .cli_agents import tree_agent, tree_worker
from .helpers import Sleeps, customs, events, of

runner = CliRunner()


def recursive_agent(budgets: Budgets | None = None, **fields: object) -> Agent:
    """An agent whose one tool is itself as a sub-agent: each run delegates once, then answers."""
    model = ScriptedProvider([calls(call("deeper", {"task": "go deeper"}, id="d1")), reply("bottom")])
    agent = Agent(name="bomb", route=[model], budgets=budgets or Budgets(), **fields)  # type: ignore[arg-type]
    object.__setattr__(agent, "tools", (subagent(agent, name="deeper"),))
    return agent


def chain(store: SqliteStore, root: str) -> list[KernelState]:
    """The runs of a one-child-per-run tree, root first."""
    states = [load_state(store, root)]
    while grants := list(states[-1].delegation.grants.values()):
        states.append(load_state(store, grants[0].agent_id))
    return states


def customs_seq(store: SqliteStore, session_id: str, kind: str) -> int:
    """The seq of the session's first ``Custom`` of ``kind``."""
    return next(
        i for i, e in enumerate(events(store, session_id)) if isinstance(e, Custom) and e.custom_kind == kind
    )


def _refusal(state: KernelState) -> str:
    (completed,) = [e for _, e in state.events if isinstance(e, ToolCompleted)]
    (result,) = completed.results
    assert result.is_error
    return result.output


def test_a_self_recursive_agent_stops_at_the_default_depth_with_an_error_result(store: SqliteStore) -> None:
    result = Kernel(store, recursive_agent(), notary=None, sleep=Sleeps()).run_sync("go", session_id="root")
    assert result.status == "completed"
    states = chain(store, "root")
    assert len(states) == DEFAULT_MAX_SPAWN_DEPTH + 1 == 9  # the root and eight levels of children
    assert all(s.terminal is not None and s.terminal.reason == "completed" for s in states)
    deepest = states[-1]
    assert "depth 9, beyond the depth limit 8 of its run tree" in _refusal(deepest)
    assert deepest.delegation.grants == {} and customs(store, deepest.session_id, "budget_grant") == []


def test_the_roots_bound_holds_for_the_tree_and_a_childs_own_counts_below_its_own_run(
    store: SqliteStore,
) -> None:
    """Each agent's max_spawn_depth bounds the tree below its own run (Agent docs): the root's bounds the
    whole tree, a child's own narrows its subtree counted from the child, never from the root."""
    Kernel(store, recursive_agent(max_spawn_depth=2), notary=None, sleep=Sleeps()).run_sync(
        "go", session_id="r2"
    )
    states = chain(store, "r2")
    assert len(states) == 3 and "depth 3, beyond the depth limit 2" in _refusal(states[-1])

    inner = recursive_agent(max_spawn_depth=1)  # at depth 1: its sub-agents at depth 2, theirs too deep
    model = ScriptedProvider([calls(call("inner", {"task": "t"}, id="i1")), reply("top")])
    root = Agent(name="lead", route=[model], tools=[subagent(inner, name="inner")], max_spawn_depth=5)
    Kernel(store, root, notary=None, sleep=Sleeps()).run_sync("go", session_id="r3")
    states = chain(store, "r3")
    assert len(states) == 3 and "depth 3, beyond the depth limit 2" in _refusal(states[-1])
    assert [customs(store, s.session_id, "spawned_by")[0]["depth_limit"] for s in states[1:]] == [5, 2]

    # an inner bound looser than what is left of the root's changes nothing: the root's 2 holds
    loose = recursive_agent(max_spawn_depth=6)
    model = ScriptedProvider([calls(call("inner", {"task": "t"}, id="i1")), reply("top")])
    root = Agent(name="lead", route=[model], tools=[subagent(loose, name="inner")], max_spawn_depth=2)
    Kernel(store, root, notary=None, sleep=Sleeps()).run_sync("go", session_id="r4")
    states = chain(store, "r4")
    assert len(states) == 3 and "depth 3, beyond the depth limit 2" in _refusal(states[-1])


@pytest.mark.parametrize(
    ("value", "error"), [(0, ValueError), (-1, ValueError), ("8", TypeError), (True, TypeError)]
)
def test_a_depth_bound_below_one_or_not_an_int_is_refused(value: object, error: type[Exception]) -> None:
    with pytest.raises(error, match="max_spawn_depth"):
        Agent(name="a", route=[ScriptedProvider([])], max_spawn_depth=value)  # type: ignore[arg-type]


def test_grants_never_exceed_the_parents_remainder_and_only_the_last_call_overruns(
    store: SqliteStore,
) -> None:
    """Each child's grant is its parent's limit minus what the parent used when it spawned; the whole tree
    overruns its 400 tokens by the leaf's one call only: admitted with 10 tokens left, its output reservation
    capped to those 10 (as upstream admits a call while any budget is left and charges what it used), the
    scripted model reports 15 (its prompt tokens cannot be known before the call)."""
    agent = recursive_agent(Budgets(tokens=400), max_spawn_depth=None)
    result = Kernel(store, agent, notary=None, sleep=Sleeps()).run_sync("go", session_id="b")
    assert result.status == "budget_exhausted"
    states = chain(store, "b")
    limits = [customs(store, s.session_id, "budget_limits")[0]["tokens"] for s in states]
    for parent, child_limit, state in zip(limits, limits[1:], states, strict=False):
        (first_call,) = customs(store, state.session_id, "model_usage")[:1]
        assert child_limit == parent - first_call["total_tokens"]  # the remainder, never more
    leaf = states[-1]
    (usage,) = customs(store, leaf.session_id, "model_usage")
    assert usage["reserved_tokens"] == limits[-1] == 10  # output capped to what was left
    spent = sum(int(u["total_tokens"]) for s in states for u in customs(store, s.session_id, "model_usage"))
    assert spent - 400 == usage["total_tokens"] - limits[-1] == 5  # the overrun is that call's excess alone
    assert of(store, "b", ToolCompleted)  # the root's delegating call was answered


SPEC = """
from flightlog.kernel import Agent
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.kernel.spec import load_agent
from flightlog.kernel.effects import effect_key
from flightlog.kernel.subagents import child_session_id, subagent

model = ScriptedProvider([calls(call("deeper", {"task": "go deeper"}, id="d1")), reply("bottom")])
agent = Agent(name="bomb", route=[model], max_spawn_depth=3)
object.__setattr__(agent, "tools", (subagent(agent, name="deeper"),))
"""


def test_the_cli_run_of_a_self_recursive_agent_ends_and_shows_the_refusal(
    store: SqliteStore, db_path: Path, tmp_path: Path
) -> None:
    spec = tmp_path / "bomb_agent.py"
    spec.write_text(SPEC)
    db = ["--db", str(db_path)]
    ran = runner.invoke(app, [*db, "run", f"{spec}:agent", "--goal", "g", "--session", "cli", "--json"])
    assert ran.exit_code == 0, ran.output
    assert json.loads(ran.stdout)["status"] == "completed"
    deepest = chain(store, "cli")[-1]
    assert len(chain(store, "cli")) == 4
    shown = runner.invoke(app, [*db, "show", "--json", deepest.session_id])
    assert shown.exit_code == 0 and "depth 4, beyond the depth limit 3" in shown.output


def test_an_agent_toml_sets_the_depth_bound(tmp_path: Path) -> None:
    (tmp_path / "agent.toml").write_text(
        'name = "t"\nmax_spawn_depth = 2\nroute = ["flightlog.kernel.scripted:ScriptedProvider"]\n'
    )
    assert load_agent(str(tmp_path / "agent.toml")).max_spawn_depth == 2


def _waiting_tree(store: SqliteStore) -> tuple[str, str]:
    """``cli_agents.tree_agent`` run until its grandchild ``worker`` waits for ``n1``: (lead, worker) ids."""
    result = Kernel(store, tree_agent(), notary=None, sleep=Sleeps()).run_sync("go", session_id="t")
    assert result.status == "suspended"
    lead = child_session_id(effect_key("t", 1, "d1"))
    worker = child_session_id(effect_key(lead, 1, "w1"))
    assert [(p.session_id, p.call_id) for p in pending(store)] == [(worker, "n1")]
    return lead, worker


def test_a_child_resumed_from_python_keeps_its_depth_and_its_trees_bound(store: SqliteStore) -> None:
    """The attack pass: ``Kernel(store, agent).resume(child)`` ran the child at depth 0, so it could spawn
    ``max_spawn_depth`` more levels. Its depth now comes from the verified tree (2 proven parent links),
    its limit from its verified ``spawned_by`` record (the root's bound of 2)."""
    _, worker = _waiting_tree(store)
    approve(store, worker, "n1")
    kernel = Kernel(store, tree_worker(), notary=None, sleep=Sleeps())
    assert kernel.resume_sync(worker).status == "completed"
    assert (kernel.spawn_depth, kernel.depth_limit) == (2, 2)
    state = load_state(store, worker)
    refused = [
        r for e in state.events if isinstance(e[1], ToolCompleted) for r in e[1].results if r.call_id == "l1"
    ]
    assert len(refused) == 1 and refused[0].is_error
    assert "would run at depth 3, beyond the depth limit 2 of its run tree" in refused[0].output
    assert state.delegation.grants == {} and customs(store, worker, "budget_grant") == []
    assert [s.session_id for s in store.list_sessions() if s.parent_session_id == worker] == []
    # the same kernel then starts a new root: depth 0 again, no limit of the tree it resumed in
    assert kernel.run_sync("go", session_id="fresh").status == "suspended"  # its own note waits
    assert (kernel.spawn_depth, kernel.depth_limit) == (0, None)


def test_a_root_resumed_from_python_is_at_depth_zero_under_its_own_bound(store: SqliteStore) -> None:
    _, worker = _waiting_tree(store)
    approve(store, worker, "n1")
    kernel = Kernel(store, tree_agent(), notary=None, sleep=Sleeps())
    assert kernel.resume_sync("t").status == "completed"  # the tree, driven from its root
    assert (kernel.spawn_depth, kernel.depth_limit) == (0, None)
    assert "beyond the depth limit 2" in next(
        r.output
        for _, e in load_state(store, worker).events
        if isinstance(e, ToolCompleted)
        for r in e.results
        if r.call_id == "l1"
    )


def test_a_child_whose_row_names_no_parent_is_refused_never_resumed_as_a_root(
    store: SqliteStore, db_path: Path
) -> None:
    lead, worker = _waiting_tree(store)
    approve(store, worker, "n1")
    seq = customs_seq(store, worker, "spawned_by")
    before = store.get_session(worker).head_seq
    raw = sqlite3.connect(db_path)
    raw.execute("UPDATE sessions SET parent_session_id = NULL WHERE session_id = ?", (worker,))
    raw.commit()
    raw.close()
    with pytest.raises(LedgerIntegrityError) as raised:
        Kernel(store, tree_worker(), notary=None, sleep=Sleeps()).resume_sync(worker)
    assert (raised.value.session_id, raised.value.seq) == (worker, seq)
    assert raised.value.reason.startswith(
        f"row_mismatch: sessions row parent_session_id None, the ledger's {lead!r}: the spawned_by record at "
        f"seq {seq} names it (depth 2, the call 'w1' of its turn 1)"
    ), raised.value.reason
    assert store.get_session(worker).head_seq == before  # nothing written
