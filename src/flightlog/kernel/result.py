"""What ``Kernel.run``/``resume`` return (:class:`RunResult`), and how a session's state reads as one
(:func:`result_of`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ..events import Custom, rollback_text
from .errors import FATAL_RESULT_PREFIX
from .records import CONTEXT_BUDGET_EXCEEDED

if TYPE_CHECKING:
    from .state import KernelState

__all__ = ["RunResult", "RunStatus", "result_of"]

RunStatus = Literal["completed", "suspended", "budget_exhausted", "failed", "cancelled"]
"""``completed`` (the model stopped), ``suspended`` (waiting for a human; resumable), ``budget_exhausted``
and ``failed`` (terminal), ``cancelled`` (signal, deadline-free interrupt or fenced off; resumable)."""


@dataclass(frozen=True)
class RunResult:
    """The outcome of one activation of a run.

    Attributes:
        session_id: The session (pass it to ``resume``).
        status: See :data:`RunStatus`; also the session's status in the store.
        final_message: Text of the last assistant message in the history, when there is one.
        turns: Turns used (turn transactions started; a retried turn counts once).
        tokens: Tokens used (input + output, all calls).
        cost: Cost used in the price unit, when prices are configured.
        pending_calls: Call ids waiting for a decision (``suspended``) or left without result
            (``cancelled``).
        detail: Why, for anything but ``completed``: the suspension reason, the exhausted budget axis,
            the failure, the cancellation reason.
    """

    session_id: str
    status: RunStatus
    final_message: str | None
    turns: int
    tokens: int
    cost: float | None = None
    pending_calls: tuple[str, ...] = ()
    detail: str | None = None

    def to_wire(self) -> dict[str, Any]:
        """JSON-ready dict (the CLI's ``--json`` output)."""
        return {
            "session_id": self.session_id,
            "status": self.status,
            "final_message": self.final_message,
            "turns": self.turns,
            "tokens": self.tokens,
            "cost": self.cost,
            "pending_calls": list(self.pending_calls),
            "detail": self.detail,
        }


TERMINAL_STATUS: dict[str, RunStatus] = {
    "completed": "completed",
    "budget_exhausted": "budget_exhausted",
    "failed": "failed",
    "context_overflow": "failed",
}
"""The run status of each ``run_terminal`` reason (any other reason reads as ``failed``)."""


def result_of(state: KernelState, *, fenced: str | None = None) -> RunResult:
    """Describe a session's state as a :class:`RunResult`: its last run's (a ``run_started`` begins a new
    run, :meth:`KernelState._on_run_started`); an ended run's turns and tokens are those its
    ``run_terminal`` recorded."""
    status: RunStatus
    pending: tuple[str, ...] = ()
    detail: str | None = None
    if state.terminal is not None:
        status = TERMINAL_STATUS.get(state.terminal.reason, "failed")
        detail = None if status == "completed" else _terminal_detail(state)
    elif state.phase == "suspended":
        status, pending = "suspended", tuple(state.gates)
        detail = state.suspension.reason if state.suspension is not None else None
    else:
        status = "cancelled"
        detail = f"fenced off: {fenced}" if fenced else _cancel_detail(state)
        pending = tuple(_cancel_pending(state))
    ended = state.terminal
    return RunResult(
        session_id=state.session_id,
        status=status,
        final_message=state.final_message(),
        # an ended run's own record (what `show` narrates), else the count folded so far
        turns=ended.turns_used if ended is not None else state.turn,
        tokens=ended.total_tokens if ended is not None else state.tokens_used,
        cost=state.cost_used if state.limits is not None and state.limits.cost is not None else None,
        pending_calls=pending,
        detail=detail,
    )


def _last(state: KernelState, kind: str) -> Any:
    for _seq, event in reversed(state.events):
        if event.kind == kind:
            return event
    return None


def _overflow_detail(state: KernelState) -> str | None:
    """What the run's ``context_budget_exceeded`` record (:mod:`flightlog.kernel.records`) says, with its
    sizes in tokens; None without one."""
    for _seq, event in reversed(state.events):
        if isinstance(event, Custom) and event.custom_kind == CONTEXT_BUDGET_EXCEEDED:
            p = event.payload
            room = f"{p['max_tokens']} input tokens" if "max_tokens" in p else "an unknown size"
            if p.get("overflow_kind") == "fixed_context":
                return (
                    f"context overflow: the system prompt and tools need ~{p['required_tokens']} tokens, "
                    f"{p['model']}'s window holds {room}"
                )
            return (
                f"context overflow: {p['model']} refused the request as too long (~{p['required_tokens']} "
                f"tokens estimated, window {room}) and nothing is left to archive"
            )
    return None


def _terminal_detail(state: KernelState) -> str | None:
    if state.terminal is not None and state.terminal.reason == "context_overflow":
        return _overflow_detail(state) or "context overflow"
    exceeded = _last(state, "budget_exceeded")
    if state.terminal is not None and state.terminal.reason == "budget_exhausted" and exceeded is not None:
        return f"budget exhausted: {exceeded.budget}"
    fatal = _committed_fatal(state)
    if fatal is not None:
        return f"fatal_tool_error: {fatal}"
    rollback = _last(state, "rollbacked")
    if rollback is not None and rollback.reason is not None:
        return rollback_text(rollback.reason)
    return state.terminal.reason if state.terminal is not None else None


def _committed_fatal(state: KernelState) -> str | None:
    """The error of a fatal call in a turn committed rather than rolled back (a ``side_effect`` of it had
    completed, :mod:`flightlog.kernel.execution`) that failed the run; None otherwise."""
    if state.terminal is None or state.terminal.reason != "failed":
        return None
    for _seq, event in reversed(state.events):
        if event.kind == "rollbacked":
            return None
        if event.kind == "tool_completed":
            errors = [
                r.output for r in event.results if r.is_error and r.output.startswith(FATAL_RESULT_PREFIX)
            ]
            return errors[0][len(FATAL_RESULT_PREFIX) :] if errors else None
    return None


def _cancel_detail(state: KernelState) -> str | None:
    cancelled = _last(state, "operation_cancelled")
    return f"cancelled ({cancelled.reason.value})" if cancelled is not None else "interrupted"


def _cancel_pending(state: KernelState) -> list[str]:
    cancelled = _last(state, "operation_cancelled")
    return list(cancelled.pending_call_ids) if cancelled is not None else []
