"""What ``Kernel.run``/``resume`` return."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["RunResult", "RunStatus"]

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
