"""The run-tree agent of the fleet sub-agent tests: a lead delegating to two parallel sub-agents.

``tree`` (no approval anywhere): the lead calls ``worker_a`` and ``worker_b`` in one turn (they run
concurrently, each its own session), each child appends its effect key to ``$FLIGHTLOG_FLEET_OUT/effects.txt``
(one ``write``, O_APPEND; reconciled by looking the key up), then answers; the lead then appends its own
line and answers. ``gated_tree``: the same, but each child's side effect needs a human's approval (the
child's policy asks), so the tree parks until someone approves.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from flightlog.kernel import Agent, Budgets, Policy, Rule, current_effect_key, tool
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.kernel.subagents import subagent

GOAL = "delegate two appends, then append once more"
CHILDREN = ("worker_a", "worker_b")


def effects_file() -> Path:
    """Where every side effect of the tree lands, one effect key per line."""
    return Path(os.environ["FLIGHTLOG_FLEET_OUT"]) / "effects.txt"


def effect_keys() -> list[str]:
    """Every effect key written so far, in order (duplicates kept)."""
    path = effects_file()
    return path.read_text().splitlines() if path.exists() else []


def _already(intent: dict[str, Any]) -> str | None:
    key = current_effect_key()
    return f"appended {intent['arguments']['line']}" if key in effect_keys() else None


@tool(effect="side_effect", reconcile=_already, in_thread=False)
def append_line(line: str) -> str:
    """Append this call's effect key to the tree's effects file (not idempotent).

    Args:
        line: A label (the result names it).
    """
    key = current_effect_key()
    assert key is not None
    fd = os.open(effects_file(), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{key}\n".encode())
    finally:
        os.close(fd)
    return f"appended {line}"


def _child(name: str, *, gated: bool) -> Agent:
    model = ScriptedProvider(
        [calls(call("append_line", {"line": name}, id="x1")), reply(f"{name} done")], by_turn=True
    )
    policy = Policy(rules=(Rule("ask", tool="append_line", reason="a human approves"),)) if gated else None
    extra: dict[str, Any] = {"policy": policy} if policy is not None else {}
    return Agent(name, [model], tools=[append_line], model_timeout_s=30, max_retries=0, **extra)


def _lead(*, gated: bool) -> Agent:
    kids = [
        subagent(_child(n, gated=gated), role="implement", budgets=Budgets(tokens=300, turns=4))
        for n in CHILDREN
    ]
    model = ScriptedProvider(
        [
            calls(*(call(n, {"task": f"append for {n}"}, id=f"d{i}") for i, n in enumerate(CHILDREN))),
            calls(call("append_line", {"line": "lead"}, id="l1")),
            reply("tree done"),
        ],
        by_turn=True,
    )
    return Agent(
        "fleet-tree",
        [model],
        tools=[append_line, *kids],
        budgets=Budgets(tokens=2000, turns=20),
        model_timeout_s=30,
        max_retries=0,
    )


def tree() -> Agent:
    """The tree without approvals (a fresh restart-safe provider per load)."""
    return _lead(gated=False)


def gated_tree() -> Agent:
    """The tree whose children each wait for a human before their side effect."""
    return _lead(gated=True)
