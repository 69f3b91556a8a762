"""``flightlog demo``, sub-agent part: a run tree that is killed mid-tree, resumes, waits for a human in a
child, and finishes, every session verifying.

The agent (:func:`tree_agent`, spec ``flightlog.cli.demo_subagents:tree_agent``; also
``examples/subagents_agent.py``) is scripted, so it runs offline. The ``lead`` delegates two research tasks
to ``researcher`` sub-agents (one turn, so they run concurrently), then the report to a ``writer``, which
asks its own ``fact_checker`` sub-agent (a third level) before it publishes; publishing needs a human's
approval (the writer's policy). Every sub-agent records a finding: a side effect, appended with its effect
key to ``subagents-notes.txt`` in ``$FLIGHTLOG_SUBAGENTS_DIR`` (default: the working directory); each
effect's reconciler looks its key up there, so a crash never leaves a human to decide.

The demo runs the tree in a child process that is SIGKILLed right after the first researcher's usage is
settled in the lead's ledger (the test-only crash point ``subagent.settled``: a real SIGKILL, at a known
place), resumes the tree in this process (the finished researcher is not run again, the other continues
from its own ledger), approves the writer's ``publish`` (shown by ``pending`` with its parent), resumes
again to the end, prints the tree with each child's grant and usage, checks every side effect happened
once and verifies every chain.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from ..events import AgentProcessChanged, BudgetUsageReported
from ..kernel import Agent, Budgets, Kernel, Policy, Rule, approve, current_effect_key, pending, tool
from ..kernel.scripted import ScriptedProvider, call, calls, reply
from ..kernel.state import load_state
from ..kernel.subagents import subagent
from ..providers.base import ModelRequest, ModelResponse
from ..recorder import verify_session
from ..store import SqliteStore, Store
from ..testing.crashpoints import ENV as CRASH_ENV

__all__ = ["NOTES_ENV", "notes_file", "run_subagents_demo", "tree_agent"]

NOTES_ENV = "FLIGHTLOG_SUBAGENTS_DIR"
"""Directory of the notes file the sub-agents' side effects append to (default: the working directory)."""
GOAL = "research ledgers and hash chains, then publish a short report"
SPEC = "flightlog.cli.demo_subagents:tree_agent"


def notes_file() -> Path:
    """The file the side effects append ``<effect key>\\t<text>`` lines to."""
    return Path(os.environ.get(NOTES_ENV, ".")) / "subagents-notes.txt"


def _noted(key: str) -> str | None:
    path = notes_file()
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return next((line.split("\t", 1)[1] for line in lines if line.split("\t", 1)[0] == key), None)


def _note(text: str) -> str:
    key = current_effect_key() or "outside-a-run"
    path = notes_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(f"{key}\t{text}\n")
    return text


def _reconcile(intent: dict[str, Any]) -> str | None:
    """Done when the notes file has this effect's key (its text is the result), else not done."""
    return _noted(current_effect_key() or "")


@tool(effect="read_only")
def search(topic: str) -> str:
    """Search the (canned) library.

    Args:
        topic: What to look for.
    """
    return f"3 sources on {topic}"


@tool(effect="side_effect", reconcile=_reconcile)
def record_finding(text: str) -> str:
    """Record a finding (appended to the notes file).

    Args:
        text: The finding.
    """
    return _note(f"finding: {text}")


@tool(effect="side_effect", reconcile=_reconcile)
def publish(text: str) -> str:
    """Publish the report (appended to the notes file).

    Args:
        text: The report.
    """
    return _note(f"published: {text}")


Step = Callable[[str], ModelResponse]


def _scripted(*steps: Step) -> ScriptedProvider:
    """A restart-safe model: step n answers the n-th turn, given the run's goal (first user message)."""

    def item(step: Step) -> Callable[[ModelRequest], ModelResponse]:
        return lambda request: step(request.messages[0].text_content().split("\n")[0])

    return ScriptedProvider([item(s) for s in steps], by_turn=True)


def _fact_checker() -> Agent:
    model = _scripted(
        lambda goal: calls(call("search", {"topic": "the report's claims"}, id="s1")),
        lambda goal: calls(call("record_finding", {"text": "the claims check out"}, id="f1")),
        lambda goal: reply("all claims check out"),
    )
    return Agent("fact_checker", [model], tools=[search, record_finding], system_prompt="Check facts.")


def _writer() -> Agent:
    checker = subagent(_fact_checker(), role="verify", budgets=Budgets(tokens=200, turns=4))
    model = _scripted(
        lambda goal: calls(call("fact_checker", {"task": "check the report's claims"}, id="c1")),
        lambda goal: calls(call("publish", {"text": "ledgers chain hashes; sources agree"}, id="p1")),
        lambda goal: reply("report published"),
    )
    return Agent(
        "writer",
        [model],
        tools=[search, record_finding, publish, checker],
        policy=Policy(rules=(Rule("ask", tool="publish", reason="publishing needs a human"),)),
    )


def _researcher() -> Agent:
    model = _scripted(
        lambda goal: calls(call("search", {"topic": goal}, id="s1")),
        lambda goal: calls(call("record_finding", {"text": f"sources agree on {goal}"}, id="f1")),
        lambda goal: reply(f"two sources agree on {goal}"),
    )
    return Agent("researcher", [model], tools=[search, record_finding])


def tree_agent() -> Agent:
    """The demo's lead agent (module docs): two parallel researchers, then a writer with a fact checker."""
    researcher = subagent(_researcher(), role="explore", budgets=Budgets(tokens=300, turns=5))
    writer = subagent(_writer(), role="implement", budgets=Budgets(tokens=600, turns=10))
    model = _scripted(
        lambda goal: calls(
            call("researcher", {"task": "the history of ledgers"}, id="r1"),
            call("researcher", {"task": "hash chains"}, id="r2"),
        ),
        lambda goal: calls(call("writer", {"task": "write and publish a short report"}, id="w1")),
        lambda goal: reply("the report is published"),
    )
    return Agent(
        "lead",
        [model],
        system_prompt="You lead a small research team.",
        tools=[search, record_finding, publish, researcher, writer],
        budgets=Budgets(tokens=2000, turns=30),
    )


def _tree(store: Store, sid: str, console: Console, depth: int = 0) -> list[str]:
    """Print ``sid`` and its children (from its process table) with grants and usage; every session id."""
    state = load_state(store, sid)
    found = [sid]
    for agent_id, entry in state.delegation.processes.items():
        grant = state.delegation.grants.get(agent_id)
        usage: BudgetUsageReported | None = (
            state.delegation.released.get(grant.reservation_id) if grant else None
        )
        spent = f"used {usage.tokens}/{grant.tokens if grant else '?'} tokens" if usage else "open grant"
        console.print(
            f"   {'   ' * depth}└─ {agent_id}  {_label(entry)}  {spent}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        found += _tree(store, agent_id, console, depth + 1) if _exists(store, agent_id) else []
    return found


def _lead_line(store: Store, sid: str) -> str:
    """The tree's first line: the lead as its children are shown (role, state, tokens used/limit), from its
    own ledger (a child's line comes from the lead's process table)."""
    state = load_state(store, sid)
    if state.terminal is not None:
        where = f"terminal ({state.terminal.reason})"
    else:
        where = "suspended" if state.phase == "suspended" else "running"
    limit = state.limits.tokens if state.limits is not None and state.limits.tokens is not None else "?"
    return f"   {sid}  {'lead':<9} {where}  used {state.tokens_used}/{limit} tokens"


def _label(entry: AgentProcessChanged) -> str:
    ended = f" ({entry.result_termination})" if entry.result_termination else ""
    return f"{entry.role:<9} {entry.state}{ended}"


def _exists(store: Store, sid: str) -> bool:
    return any(s.session_id == sid for s in store.list_sessions())


def run_subagents_demo(store: Store, console: Console) -> int:
    """Run the sub-agent demo (module docs) against ``store``; returns 0 when it went as expected.

    Skipped (0) unless ``store`` is a SQLite file: the killed child process opens it too.
    """
    console.print("A run tree: parallel sub-agents, killed mid-tree, an approval inside a child")
    if not isinstance(store, SqliteStore) or store.path == ":memory:":
        console.print("   (skipped: the sub-agent demo needs a SQLite file database)")
        return 0
    with tempfile.TemporaryDirectory(prefix="flightlog-subagents-") as folder:
        os.environ[NOTES_ENV] = folder
        try:
            return _run(store, console, folder)
        finally:
            os.environ.pop(NOTES_ENV, None)


def _run(store: SqliteStore, console: Console, folder: str) -> int:
    env = {**os.environ, NOTES_ENV: folder, CRASH_ENV: "subagent.settled"}
    argv = [
        sys.executable,
        "-m",
        "flightlog",
        "--db",
        str(store.path),
        "run",
        SPEC,
        "--goal",
        GOAL,
        "--json",
        "-q",
    ]
    console.print(f"   $ {CRASH_ENV}=subagent.settled flightlog run {SPEC} --goal '{GOAL}'")
    done = subprocess.run(
        argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, check=False
    )
    lead = next(
        (s.session_id for s in store.list_sessions() if s.task == GOAL and s.status == "running"), None
    )
    if done.returncode != -9 or lead is None:
        console.print(
            f"   expected a SIGKILL mid-tree, got exit {done.returncode}: {done.stderr.strip()[-300:]}"
        )
        return 1
    console.print("   -> killed (SIGKILL) after the first researcher finished")
    console.print(_lead_line(store, lead), markup=False, highlight=False, soft_wrap=True)
    _tree(store, lead, console)
    kernel = Kernel(store, tree_agent())
    result = kernel.resume_sync(lead, handle_signals=False)
    console.print(f"   $ flightlog resume {lead[:12]}  -> {result.status} ({result.detail})")
    waiting = [row for row in pending(store) if row.root_session_id == lead]
    for row in waiting:
        console.print(
            f"   $ flightlog pending  -> {row.session_id} {row.call_id} {row.tool}: {row.reason} (sub-agent of {row.parent_session_id})"
        )
        approve(store, row.session_id, row.call_id, responder="demo")
        console.print(f"   $ flightlog approve {row.session_id[:12]} {row.call_id}")
    result = Kernel(store, tree_agent()).resume_sync(lead, handle_signals=False)
    console.print(f"   $ flightlog resume {lead[:12]}  -> {result.status}: {result.final_message!r}")
    console.print("   the tree, from the lead's ledger (its children: their grants and usage)")
    console.print(_lead_line(store, lead), markup=False, highlight=False, soft_wrap=True)
    sessions = _tree(store, lead, console)
    keys = [line.split("\t", 1)[0] for line in notes_file().read_text(encoding="utf-8").splitlines()]
    once = len(keys) == len(set(keys)) == 4
    intact = all(verify_session(store, sid).ok for sid in sessions)
    console.print(
        f"   {len(keys)} side effects, {'each exactly once' if once else 'NOT exactly once'}; "
        f"{len(sessions)} sessions, {'every chain verifies' if intact else 'A CHAIN DIVERGES'}"
    )
    return 0 if once and intact and result.status == "completed" and len(waiting) == 1 else 1
