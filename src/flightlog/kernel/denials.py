"""A policy denial that rolls the turn back (``Policy.on_deny = "rollback"``): ``GovernanceDenied``.

By default a denied call gets an error result and its turn goes on. With ``on_deny="rollback"`` a turn whose
model answer asks for a denied call is undone instead: after the answer's ``llm_completed``, ``model_usage``,
``tool_requested``, ``tool_decisions`` and the denial (``permission_resolved``, ``tool_denied``), the same
transaction records ``rollbacked(turn, checkpoint_history_len, reason=GovernanceDenied(tool_name, reason))``
for the first denied call, then ``Custom("kernel_note", {turn, text})``, a ``user`` message that
:mod:`flightlog.replay` puts in the history after the rollback (upstream's model-facing rollback note,
``scheduler/rollback.rs``): ``Action `<tool>` was not allowed (<reason>). Please choose a different approach.``
The turn is then taken again without the refused answer. A turn rolled back ``Agent.max_retries`` times this
way (or by failed model calls) answers denied calls with error results again, so a model that insists cannot
loop forever.
"""

from __future__ import annotations

from ..events import Custom, Event, PermissionRequested, Rollbacked, RollbackReason, Suspended, ToolGated
from ..replay import KERNEL_NOTE
from .agent import Agent
from .planning import TurnPlan
from .state import KernelState

__all__ = ["denial_rollback", "rollback_note"]


def rollback_note(tool_name: str, reason: str) -> str:
    """Upstream's note for a ``GovernanceDenied`` rollback."""
    return f"Action `{tool_name}` was not allowed ({reason}). Please choose a different approach."


def denial_rollback(turn: int, plan: TurnPlan, agent: Agent, state: KernelState) -> list[Event] | None:
    """The events after the answer when the turn rolls back for a denial (module docs); None when it goes on.

    Returns:
        The plan's events without its approval gates, then ``rollbacked`` and the ``kernel_note``.
    """
    denied = [p for p in plan.plans if p.decision == "deny"]
    if agent.policy.on_deny != "rollback" or not denied or state.attempts >= agent.max_retries:
        return None
    first = denied[0]
    reason = RollbackReason.GovernanceDenied(tool_name=first.tool, reason=first.reason)
    kept = [e for e in plan.events if not isinstance(e, ToolGated | PermissionRequested | Suspended)]
    note = {"turn": turn, "text": rollback_note(first.tool, first.reason)}
    return [
        *kept,
        Rollbacked(turn=turn, checkpoint_history_len=state.checkpoint_len, reason=reason),
        Custom(custom_kind=KERNEL_NOTE, payload=note),
    ]
