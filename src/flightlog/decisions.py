"""The ``approval_decision`` record: who decided a gated call, built in one place.

A human decision on a gated call is written as seed 000's ``permission_resolved`` (whose ``responder`` is
only ``"user"`` or ``"policy_gate"``) followed by ``Custom("approval_decision", payload)`` naming the
operator. Three writers record it and all of them build it here, so their stored bytes cannot drift:

* the kernel (``flightlog approve``/``deny``, the dashboard: :mod:`flightlog.kernel.approvals`, through
  :meth:`flightlog.kernel.records.Verdict.to_wire`);
* the OpenAI Agents SDK session (:class:`flightlog.integrations.openai_agents.FlightlogSession`);
* the LangGraph saver's ``Command(resume=...)`` writes (:mod:`flightlog.integrations.langgraph`).

Payload (a JSON object; RFC 8785 sorts its keys when stored, so field order does not matter):

=================== ============================================================================
``turn``            int: the turn of the gated call
``call_id``         str: the gated call's id (a LangGraph interrupt id for the saver)
``gate``            ``"approval"`` (a policy gate) or ``"effect_in_doubt"`` (kernel only)
``approved``        bool
``responder``       str: the operator's name (rule: :func:`flightlog.narration.operator_problem`)
``reason``          str, omitted when None (every denial has one: ``"denied by <responder>"`` by default)
``policy_digest``   str, omitted when None: the signed grant the kernel session runs under
=================== ============================================================================
"""

from __future__ import annotations

from typing import Any, Literal

from .events import Custom

__all__ = ["APPROVAL_DECISION", "GateKind", "approval_decision", "denial_reason"]

APPROVAL_DECISION = "approval_decision"
"""``custom_kind`` of the record naming who decided a gated call."""

GateKind = Literal["approval", "effect_in_doubt"]
"""``gate`` of a decision: a policy gate (``approval``) or an effect whose outcome was in doubt."""


def denial_reason(responder: str) -> str:
    """The ``reason`` of a denial given without one: ``"denied by <responder>"``."""
    return f"denied by {responder}"


def approval_decision(
    *,
    turn: int,
    call_id: str,
    gate: GateKind,
    approved: bool,
    responder: str,
    reason: str | None = None,
    policy_digest: str | None = None,
) -> Custom:
    """``Custom(APPROVAL_DECISION, payload)``, the payload as in the module docstring (``reason`` and
    ``policy_digest`` omitted when None). Nothing is checked here: callers apply the operator-name rule
    (:func:`flightlog.narration.operator_problem`) before deciding."""
    payload: dict[str, Any] = {
        "turn": turn,
        "call_id": call_id,
        "gate": gate,
        "approved": approved,
        "responder": responder,
    }
    if reason is not None:
        payload["reason"] = reason
    if policy_digest is not None:
        payload["policy_digest"] = policy_digest
    return Custom(custom_kind=APPROVAL_DECISION, payload=payload)
