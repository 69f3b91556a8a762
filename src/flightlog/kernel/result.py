"""What ``Kernel.run``/``resume`` return (:class:`RunResult`), and how a session's state reads as one
(:func:`result_of`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ..events import Custom, ToolCompleted, fatal_result_text, rollback_text
from ..runs.context import overflow_text
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
    """What the run's latest ``context_budget_exceeded`` record (:mod:`flightlog.kernel.records`) says, with
    its sizes in tokens (:func:`flightlog.runs.context.overflow_text`, as ``runs`` says it); None without
    one."""
    for _seq, event in reversed(state.events):
        if isinstance(event, Custom) and event.custom_kind == CONTEXT_BUDGET_EXCEEDED:
            text = overflow_text(event.payload) if isinstance(event.payload, dict) else None
            return None if text is None else f"context overflow: {text}"
    return None


def _terminal_detail(state: KernelState) -> str | None:
    if state.terminal is not None and state.terminal.reason == "context_overflow":
        return _overflow_detail(state) or "context overflow"
    exceeded = _last(state, "budget_exceeded")
    if state.terminal is not None and state.terminal.reason == "budget_exhausted" and exceeded is not None:
        return f"budget exhausted: {exceeded.budget}"
    fatal = _committed_fatal(state)
    if fatal is not None:
        return fatal
    rollback = _last(state, "rollbacked")
    if rollback is not None and rollback.reason is not None:
        return rollback_text(rollback.reason)
    return state.terminal.reason if state.terminal is not None else None


def _committed_fatal(state: KernelState) -> str | None:
    """``fatal_tool_error: <error>`` of a fatal call in a turn committed rather than rolled back (a
    ``side_effect`` of it had completed, :mod:`flightlog.kernel.execution`) that failed the run
    (:func:`~flightlog.events.fatal_result_text`); None otherwise."""
    if state.terminal is None or state.terminal.reason != "failed":
        return None
    for _seq, event in reversed(state.events):
        if event.kind == "rollbacked":
            return None
        if isinstance(event, ToolCompleted):
            return fatal_result_text(event.results)
    return None


def _cancel_detail(state: KernelState) -> str | None:
    cancelled = _last(state, "operation_cancelled")
    return f"cancelled ({cancelled.reason.value})" if cancelled is not None else "interrupted"


def _cancel_pending(state: KernelState) -> list[str]:
    cancelled = _last(state, "operation_cancelled")
    return list(cancelled.pending_call_ids) if cancelled is not None else []
