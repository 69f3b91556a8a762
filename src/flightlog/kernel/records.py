"""The kernel's ``Custom`` records: names, payload shapes and builders.

The seed vocabulary (seed 000) has no field for some facts the kernel must find again on resume; those
go into ``Custom(custom_kind, payload)`` events (seed 003 ``record_custom``), appended in the same
transaction as the seed events they complete:

========================================= ================================================================
``provider_capability_evidence``           per route position at run start, exactly as seed 003:
                                           ``{model, route_position, source: "declared", capabilities,
                                           degradations}``
``budget_limits``                          the run's limits (``Budgets.to_wire()``), at run start
``model_usage``                            usage of one model call (see :mod:`flightlog.kernel.budgets`)
``tool_decisions``                         ``{turn, calls: [CallPlan...], policy_digest?}``: each call's
                                           repaired arguments and governance decision (seed
                                           ``permission_resolved`` has no call id); ``policy_digest`` when
                                           the session runs under a signed grant
``approval_decision``                      ``{turn, call_id, gate, approved, responder, reason?,
                                           policy_digest?}``: a human decision on a gated call (``gate``:
                                           ``approval`` or ``effect_in_doubt``); built by
                                           :func:`flightlog.decisions.approval_decision`, shared with the
                                           integrations
``abort_requested``                        ``{turn, operation_id, requested_by}``: who asked for the abort
                                           (:func:`flightlog.kernel.abort`, written with its
                                           ``operation_cancelled`` when a requester is named)
``grant_policy``                           the signed grant at run start (:func:`flightlog.integrity.grants.record_grant`;
                                           see :mod:`flightlog.kernel.ceiling`)
``provider_retry``                         ``{turn, model, route_position, attempt, max_retries, delay_s,
                                           error, retry_after_s?}``: a failed call is retried after
                                           ``delay_s`` seconds, retry ``attempt`` of ``max_retries``
                                           (``Agent.max_retries``; absent before 2026-12-06)
``route_failover``                         ``{from_model, to_model, cause, from_position, to_position}``
                                           (seed 003 ``RouteFailover`` plus positions)
``effect_reconciled``                      ``{turn, call_id, key, outcome: "completed" | "not_done"}``
``prompt_program_compiled`` / ``_invoked`` seed 003 records of each model request (see
                                           :mod:`flightlog.kernel.requests`)
``compaction_started``                     ``{turn, action, trigger, archived_seq_range, message_count,
                                           archived_tokens, fill_tokens, preserved_refs}`` before a summary
                                           call (:mod:`flightlog.kernel.compaction`)
``compaction_failed``                      ``{turn, attempt, error, retry}``: a summary call failed
``context_overflow``                       ``{turn, model, route_position, error}``: the provider said the
                                           request does not fit; the turn is compacted and retried once
``context_budget_exceeded``                ``{turn, model, route_position, overflow_kind, required_tokens,
                                           max_tokens?}``: the request cannot fit the window and nothing
                                           left can shrink it; written with ``run_terminal(reason=
                                           "context_overflow")`` instead of a model call
                                           (:meth:`~flightlog.kernel.activation_context.ContextActivation.unfit`)
``kernel_note``                            ``{turn, text}``: what the model is told after a rollback,
                                           before the turn is taken again (``replay`` adds a ``user``
                                           message, :data:`flightlog.replay.KERNEL_NOTE`): a denial's
                                           (:mod:`flightlog.kernel.denials`), a ``FatalToolError``'s
                                           (:mod:`flightlog.kernel.execution`) or a model call
                                           timeout's (:mod:`flightlog.kernel.loop`, with its
                                           ``provider_retry``/``route_failover``), upstream's wording
``context_pin``                            ``{turn, call_ids}``: tool results the agent pinned (built-in
                                           ``pin`` tool); they survive compaction verbatim
``external_effect_intent`` / ``_completed`` written by :meth:`flightlog.recorder.Recorder.record_intent`
                                           and ``complete_effect``
========================================= ================================================================
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from ..decisions import APPROVAL_DECISION, GateKind, approval_decision
from ..events import Custom
from ..integrity.authorship import BUDGET_LIMITS, CAPABILITY_EVIDENCE
from ..messages import Message
from ..providers.base import ModelProvider, ModelRequest, Usage
from ..runs.context import CONTEXT_BUDGET_EXCEEDED

__all__ = [
    "ABORT_REQUESTED",
    "APPROVAL_DECISION",
    "BUDGET_LIMITS",
    "CAPABILITY_EVIDENCE",
    "COMPACTION_FAILED",
    "COMPACTION_STARTED",
    "CONTEXT_BUDGET_EXCEEDED",
    "CONTEXT_OVERFLOW",
    "CONTEXT_PIN",
    "EFFECT_RECONCILED",
    "GRANT_POLICY",
    "JUDGE_ACTOR",
    "MODEL_USAGE",
    "PROMPT_PROGRAM_COMPILED",
    "PROMPT_PROGRAM_INVOKED",
    "PROVIDER_RETRY",
    "ROUTE_FAILOVER",
    "TOOL_DECISIONS",
    "CallPlan",
    "GateKind",
    "Verdict",
    "capability_evidence",
    "judge_request",
    "model_usage",
    "route_failover",
]

PROMPT_PROGRAM_COMPILED = "prompt_program_compiled"
PROMPT_PROGRAM_INVOKED = "prompt_program_invoked"
JUDGE_ACTOR = "milestone_judge"
"""``actor`` of a :class:`~flightlog.kernel.milestones.ModelJudge` call's ``prompt_program_*`` records (also
``model_usage.purpose`` of its tokens)."""
CONTEXT_OVERFLOW = "context_overflow"
COMPACTION_STARTED = "compaction_started"
COMPACTION_FAILED = "compaction_failed"
CONTEXT_PIN = "context_pin"
MODEL_USAGE = "model_usage"
TOOL_DECISIONS = "tool_decisions"
ABORT_REQUESTED = "abort_requested"
PROVIDER_RETRY = "provider_retry"
ROUTE_FAILOVER = "route_failover"
EFFECT_RECONCILED = "effect_reconciled"
GRANT_POLICY = "grant_policy"

Disposition = Literal["allow", "deny", "ask", "invalid"]


@dataclass(frozen=True)
class CallPlan:
    """One requested call after argument repair and governance, as recorded in ``tool_decisions``.

    Attributes:
        call_id: The model's call id.
        tool: Tool name as requested.
        effect: The tool's effect class (None for an unknown tool).
        decision: ``allow``, ``deny``, ``ask``, or ``invalid`` (unknown tool, unusable arguments: the
            call is answered with an error result and never runs).
        reason: Why (policy rule or default, or the argument/tool error).
        rule: Index of the policy rule that decided, None for the default or ``invalid``.
        arguments: The repaired JSON arguments (None when they could not be parsed).
        ceiling: ``"grant"`` when the signed grant policy's ceiling changed the decision (None otherwise).
    """

    call_id: str
    tool: str
    effect: str | None
    decision: Disposition
    reason: str
    rule: int | None = None
    arguments: dict[str, Any] | None = None
    ceiling: str | None = None

    def to_wire(self) -> dict[str, Any]:
        """JSON-ready dict (None fields omitted)."""
        return {key: value for key, value in asdict(self).items() if value is not None}

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> CallPlan:
        """Inverse of :meth:`to_wire`."""
        return cls(
            call_id=data["call_id"],
            tool=data["tool"],
            effect=data.get("effect"),
            decision=data["decision"],
            reason=data.get("reason", ""),
            rule=data.get("rule"),
            arguments=data.get("arguments"),
            ceiling=data.get("ceiling"),
        )


@dataclass(frozen=True)
class Verdict:
    """A human decision on a gated call (``approval_decision``)."""

    call_id: str
    gate: GateKind
    approved: bool
    responder: str
    reason: str | None = None

    def to_event(self, turn: int, *, policy_digest: str | None = None) -> Custom:
        """The ``approval_decision`` record of this decision on the call's ``turn``
        (:func:`flightlog.decisions.approval_decision`); ``policy_digest`` names the signed grant the
        session runs under, if any."""
        return approval_decision(
            turn=turn,
            call_id=self.call_id,
            gate=self.gate,
            approved=self.approved,
            responder=self.responder,
            reason=self.reason,
            policy_digest=policy_digest,
        )

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> Verdict:
        """Inverse of :meth:`to_event`'s payload."""
        return cls(
            data["call_id"], data["gate"], bool(data["approved"]), data["responder"], data.get("reason")
        )


def capability_evidence(provider: ModelProvider, position: int) -> Custom:
    """Seed 003 ``provider_capability_evidence`` for one route position (declared capabilities)."""
    declared = provider.capabilities()
    return Custom(
        custom_kind=CAPABILITY_EVIDENCE,
        payload={
            "model": provider.model,
            "route_position": position,
            "source": "declared",
            "capabilities": asdict(declared),
            "degradations": declared.degradations(),
        },
    )


def route_failover(
    source: ModelProvider, target: ModelProvider, cause: str, from_position: int, to_position: int
) -> Custom:
    """Seed 003 ``RouteFailover {from_model, to_model, cause}`` plus the route positions."""
    return Custom(
        custom_kind=ROUTE_FAILOVER,
        payload={
            "from_model": source.model,
            "to_model": target.model,
            "cause": cause,
            "from_position": from_position,
            "to_position": to_position,
        },
    )


def model_usage(
    turn: int,
    provider: ModelProvider,
    position: int,
    usage: Usage,
    cost: float | None,
    reserved_tokens: int,
) -> Custom:
    """The durable usage record of one model call (tokens; ``cost`` in the price unit when priced)."""
    payload: dict[str, Any] = {
        "turn": turn,
        "model": provider.model,
        "protocol": provider.protocol,
        "route_position": position,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
        "reserved_tokens": reserved_tokens,
    }
    if usage.cache_read_tokens is not None:
        payload["cache_read_tokens"] = usage.cache_read_tokens
    if usage.cache_write_tokens is not None:
        payload["cache_write_tokens"] = usage.cache_write_tokens
    if cost is not None:
        payload["cost"] = cost
    return Custom(custom_kind=MODEL_USAGE, payload=payload)


def judge_request(
    system_prompt: str, criteria: list[str], answer: str | None, max_tokens: int
) -> ModelRequest:
    """A milestone judge's model request, from what its ``prompt_program_*`` records keep (no tools).

    Args:
        system_prompt: The rubric and reply format (``prompt_program_compiled.system_prompt``).
        criteria: The phase's criteria, in order (the ``criteria`` section of ``prompt_program_invoked``).
        answer: The judged answer: the text of the last assistant message, None when empty.
        max_tokens: Output cap, in tokens.

    Returns:
        ``system_prompt`` and one user message: the numbered criteria (``(none)``) and the answer
        (``(no answer)``).
    """
    listed = "\n".join(f"{i}. {c}" for i, c in enumerate(criteria, start=1)) or "(none)"
    text = f"Criteria:\n{listed}\n\nThe agent's answer:\n{answer or '(no answer)'}"
    return ModelRequest(
        system_prompt=system_prompt, messages=[Message.text("user", text)], tools=(), max_tokens=max_tokens
    )
