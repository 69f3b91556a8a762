"""flightlog's durable agent runtime: turn transactions over the hash-chained ledger.

Define an :class:`Agent` (route of model providers, tools made with :func:`tool`, a :class:`Policy`,
:class:`Budgets`), then ``Kernel(store, agent).run_sync(goal)``. Every step is an event in the session's
ledger, and the ledger is the only state: ``resume`` continues after a crash, a cancellation or a human
decision (:func:`approve` / :func:`deny`) from whatever the ledger says. Side-effect tools run exactly once
(intent before, result after; in doubt after a crash until reconciled or decided).

Modules: ``agent`` (definition), ``tools`` (``@tool``), ``policy`` (governance rules), ``repair``
(argument repair), ``budgets`` (accounting), ``planning`` (repair + governance per turn), ``execution``
(running a turn's calls), ``effects`` (exactly-once; :func:`current_effect_key` for tools and
reconcilers), ``approvals`` (human decisions), ``abort`` (fencing a run from outside), ``state`` (the
ledger fold), ``transcript`` (incremental ``reconstruct``), ``records`` (the kernel's ``Custom``
records), ``operations`` (what a cancel or deadline interrupts), ``signals`` (sync wrappers,
SIGINT/SIGTERM), ``loop`` (the ``Kernel``), ``result`` (``RunResult``), ``scripted`` (a fake provider),
``spec`` (loading an agent from ``module:attr`` or TOML), ``ceiling`` (the signed grant over
governance), ``confine`` (:func:`open_path`, :func:`resolve_path`, :func:`run_command`: paths and commands
checked against the grant when a tool opens or runs them), ``shell`` (:func:`parse_command`: one plain
command or a refusal naming the construct), ``subagents`` (:func:`subagent`, :func:`spawner`: child agents
as tools, each child its own session), ``delegation`` (the parent's fold of grants and process table).
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .abort import abort
    from .agent import Agent
    from .approvals import PendingCall, approve, check_operator, deny, operator_problem, pending
    from .attention import send_signal
    from .budgets import Budgets, Prices
    from .ceiling import current_ceiling
    from .confine import open_path, resolve_path, run_command
    from .effects import current_effect_key
    from .entropy import EntropyWatch
    from .errors import (
        AgentSpecError,
        CommandRefused,
        FatalToolError,
        InvalidOperator,
        KernelError,
        NotPending,
        OutsideCeiling,
        SignalRefused,
    )
    from .loop import Kernel
    from .policy import Decision, Policy, Rule
    from .repair import repair_arguments
    from .result import RunResult, RunStatus
    from .scripted import ScriptedProvider
    from .shell import parse_command
    from .spec import load_agent
    from .subagents import SubAgent, SubAgentTool, spawner, subagent
    from .tools import Effect, Tool, ToolArgumentsError, tool

# Names load on first use (PEP 562), not at ``import flightlog.kernel``: a submodule such as
# ``kernel.requests`` (which ``flightlog.runs`` and the CLI need) then costs only its own imports, not the
# whole runtime (loop, providers, sub-agents...): ``flightlog --version`` starts faster (issue 19).
_LAZY: dict[str, str] = {
    "Agent": "agent",
    "PendingCall": "approvals",
    "approve": "approvals",
    "check_operator": "approvals",
    "deny": "approvals",
    "operator_problem": "approvals",
    "pending": "approvals",
    "send_signal": "attention",
    "Budgets": "budgets",
    "Prices": "budgets",
    "current_ceiling": "ceiling",
    "open_path": "confine",
    "resolve_path": "confine",
    "run_command": "confine",
    "current_effect_key": "effects",
    "EntropyWatch": "entropy",
    "AgentSpecError": "errors",
    "CommandRefused": "errors",
    "DecidedByItsRuntime": "errors",
    "FatalToolError": "errors",
    "InvalidOperator": "errors",
    "KernelError": "errors",
    "NotPending": "errors",
    "OutsideCeiling": "errors",
    "SignalRefused": "errors",
    "Kernel": "loop",
    "Decision": "policy",
    "Policy": "policy",
    "Rule": "policy",
    "repair_arguments": "repair",
    "RunResult": "result",
    "RunStatus": "result",
    "ScriptedProvider": "scripted",
    "parse_command": "shell",
    "load_agent": "spec",
    "SubAgent": "subagents",
    "SubAgentTool": "subagents",
    "spawner": "subagents",
    "subagent": "subagents",
    "Effect": "tools",
    "Tool": "tools",
    "ToolArgumentsError": "tools",
    "tool": "tools",
}


class _Package(types.ModuleType):
    """This package's module type. ``abort`` is also the name of its submodule: importing
    ``flightlog.kernel.abort`` sets the package's attribute ``abort`` to that module (the import system's
    ``setattr(parent, child, module)``), which would hide the function (``kernel.abort(...)``: "'module'
    object is not callable"). Here that setattr binds the submodule's function instead, so ``abort`` can
    load lazily like every other name: the submodule imports the integrity audit and the kernel state,
    which the everyday read commands (``ls``, ``runs``, ``show``, ``pending``) do not need."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "abort" and isinstance(value, types.ModuleType):
            value = value.abort
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
_LAZY["abort"] = "abort"


def __getattr__(name: str) -> Any:
    """Import the submodule that defines ``name`` (a public name of this package) and return it."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "Agent",
    "AgentSpecError",
    "Budgets",
    "CommandRefused",
    "DecidedByItsRuntime",
    "Decision",
    "Effect",
    "EntropyWatch",
    "FatalToolError",
    "InvalidOperator",
    "Kernel",
    "KernelError",
    "NotPending",
    "OutsideCeiling",
    "PendingCall",
    "Policy",
    "Prices",
    "Rule",
    "RunResult",
    "RunStatus",
    "ScriptedProvider",
    "SignalRefused",
    "SubAgent",
    "SubAgentTool",
    "Tool",
    "ToolArgumentsError",
    "abort",
    "approve",
    "check_operator",
    "current_ceiling",
    "current_effect_key",
    "deny",
    "load_agent",
    "open_path",
    "operator_problem",
    "parse_command",
    "pending",
    "repair_arguments",
    "resolve_path",
    "run_command",
    "send_signal",
    "spawner",
    "subagent",
    "tool",
]
