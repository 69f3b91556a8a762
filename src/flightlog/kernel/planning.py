"""Planning a turn's tool calls: argument repair, validation and governance, as ledger events.

Pure: takes the requested calls and the agent, returns the plans and the events recording them. The
kernel appends those events in the same transaction as the ``llm_completed`` that requested the calls,
so after a crash a turn is either unplanned (the model is called again) or fully planned.

Event order for one turn::

    tool_requested(turn, calls)                      the calls as the model produced them
    tool_argument_repaired(turn, tool, original, repaired)   one per repaired call
    Custom("tool_decisions", {turn, calls: [CallPlan], policy_digest?})   digest of the signed grant, if any
    per call, in call order, for automatic decisions:
        allow: permission_resolved(turn, approved=True,  responder="policy_gate")
        deny:  permission_resolved(turn, approved=False, responder="policy_gate"), tool_denied(...)
    per ``ask`` call: tool_gated(turn, call_id, tool, reason), permission_requested(turn, tool, args, reason)
    suspended(turn, reason="approval", pending_calls=[ask call ids])      when any call asks

Calls the kernel cannot run at all (unknown tool, arguments that are not a JSON object even after repair,
arguments that do not fit the signature) are planned ``invalid``: no governance event, and an error result
tells the model what was wrong.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from ..events import (
    Custom,
    Event,
    PermissionRequested,
    PermissionResolved,
    Suspended,
    ToolArgumentRepaired,
    ToolDenied,
    ToolGated,
    ToolRequested,
)
from ..messages import Message, ToolCall, ToolCallPart
from .agent import Agent
from .ceiling import Ceiling
from .records import TOOL_DECISIONS, CallPlan
from .repair import repair_arguments
from .tools import Tool, ToolArgumentsError

__all__ = [
    "POLICY_GATE",
    "ToolSurface",
    "TurnPlan",
    "arguments_text",
    "calls_in",
    "gate_events",
    "plan_calls",
]

POLICY_GATE = "policy_gate"
"""The ``permission_resolved.responder`` of automatic decisions (seed 000)."""


class ToolSurface(Protocol):
    """The tools offered this turn: the agent's, or the agent's plus the mounted capabilities
    (:class:`~flightlog.kernel.capabilities.ToolSurface`)."""

    @property
    def tools(self) -> Sequence[Tool]:
        """Every offered tool."""
        ...

    def tool(self, name: str) -> Tool | None:
        """The offered tool called ``name``, or None."""
        ...


@dataclass(frozen=True)
class TurnPlan:
    """The planned calls of one turn and the events that record them (see the module docs)."""

    plans: tuple[CallPlan, ...]
    events: tuple[Event, ...]
    asks: tuple[str, ...]


def calls_in(message: Message) -> Iterator[ToolCall]:
    """The tool calls of an assistant message: its ``tool_calls``, then its ``tool_call`` parts."""
    yield from message.tool_calls
    for part in message.content:
        if isinstance(part, ToolCallPart):
            yield ToolCall(id=part.id, name=part.name, arguments=part.arguments)


def _plan_one(
    turn: int,
    call: ToolCall,
    agent: Agent,
    events: list[Event],
    ceiling: Ceiling | None,
    surface: ToolSurface,
) -> CallPlan:
    outcome = repair_arguments(call.arguments)
    if outcome.repaired_text is not None:
        events.append(
            ToolArgumentRepaired(
                turn=turn,
                tool=call.name,
                original_arguments=call.arguments,
                repaired_arguments=outcome.repaired_text,
            )
        )
    tool = surface.tool(call.name)
    if tool is None:
        known = ", ".join(t.name for t in surface.tools) or "none"
        reason = f"unknown tool {call.name!r} (tools: {known})"
        return CallPlan(call.id, call.name, None, "invalid", reason, arguments=outcome.arguments)
    if outcome.arguments is None:
        return CallPlan(call.id, call.name, tool.effect, "invalid", outcome.error or "unusable arguments")
    try:
        tool.validate(outcome.arguments)
    except ToolArgumentsError as exc:
        return CallPlan(call.id, call.name, tool.effect, "invalid", str(exc), arguments=outcome.arguments)
    decision = agent.policy.decide(tool.name, outcome.arguments, tool.effect)
    plan = CallPlan(
        call.id, call.name, tool.effect, decision.action, decision.reason, decision.rule, outcome.arguments
    )
    return plan if ceiling is None else ceiling.apply(plan, tool)


def arguments_text(plan: CallPlan) -> str:
    """A plan's arguments as compact JSON text (keys sorted), ``""`` when they did not parse."""
    if plan.arguments is None:
        return ""
    return json.dumps(plan.arguments, sort_keys=True, ensure_ascii=False)


def _governance(turn: int, plans: Iterable[CallPlan]) -> list[Event]:
    events: list[Event] = []
    for plan in plans:
        if plan.decision == "allow":
            events.append(PermissionResolved(turn=turn, approved=True, responder=POLICY_GATE))
        elif plan.decision == "deny":
            events.append(PermissionResolved(turn=turn, approved=False, responder=POLICY_GATE))
            events.append(
                ToolDenied(turn=turn, call_id=plan.call_id, tool_name=plan.tool, reason=plan.reason)
            )
    return events


def gate_events(
    turn: int, plans: Sequence[CallPlan], reason_kind: str, reasons: Sequence[str]
) -> list[Event]:
    """``tool_gated`` + ``permission_requested`` per plan, then ``suspended(reason_kind, ids)``."""
    events: list[Event] = []
    for plan, reason in zip(plans, reasons, strict=True):
        events.append(ToolGated(turn=turn, call_id=plan.call_id, tool=plan.tool, reason=reason))
        events.append(
            PermissionRequested(turn=turn, tool=plan.tool, arguments=arguments_text(plan), reason=reason)
        )
    events.append(Suspended(turn=turn, reason=reason_kind, pending_calls=[p.call_id for p in plans]))
    return events


def plan_calls(
    turn: int,
    calls: Sequence[ToolCall],
    agent: Agent,
    ceiling: Ceiling | None = None,
    surface: ToolSurface | None = None,
) -> TurnPlan:
    """Repair, validate and govern a turn's calls.

    Args:
        turn: The turn number.
        calls: The calls in the model's order.
        agent: Tools and policy.
        ceiling: The session's signed grant, applied over the agent's policy; its digest goes into
            ``tool_decisions`` as ``policy_digest`` (see :mod:`flightlog.kernel.ceiling`).
        surface: The tools offered this turn (default: the agent's own ``tools``).

    Returns:
        The plans (call order), every event to append after ``llm_completed`` (``tool_requested``
        first), and the ids of the calls that wait for approval.
    """
    events: list[Event] = [ToolRequested(turn=turn, calls=list(calls))]
    offered = surface if surface is not None else agent
    plans = [_plan_one(turn, call, agent, events, ceiling, offered) for call in calls]
    payload: dict[str, object] = {"turn": turn, "calls": [p.to_wire() for p in plans]}
    if ceiling is not None:
        payload["policy_digest"] = ceiling.digest
    events.append(Custom(custom_kind=TOOL_DECISIONS, payload=payload))
    events.extend(_governance(turn, plans))
    asks = [p for p in plans if p.decision == "ask"]
    if asks:
        events.extend(gate_events(turn, asks, "approval", [p.reason for p in asks]))
    return TurnPlan(tuple(plans), tuple(events), tuple(p.call_id for p in asks))
