"""Stopping a run from outside: fence off its writer and record why.

``abort`` first bumps the session's authority epoch, so a kernel still running the session fails its next
append with ``StaleWriter`` and stops without writing; then it attaches (verifying the chain, taking
authority) and records ``operation_cancelled(turn, operation_id="{run_id}:abort", reason,
pending_call_ids)`` with the session status ``cancelled``. The run stays resumable (``Kernel.resume``).
"""

from __future__ import annotations

from ..events import CancellationReason, OperationCancelled
from ..recorder import Recorder
from ..store.base import Store
from .state import KernelState, load_state

__all__ = ["abort"]


def _unanswered(state: KernelState) -> list[str]:
    """Call ids of the current turn's plan (they have no result: a result clears the plan)."""
    return [plan.call_id for plan in state.plans]


def abort(store: Store, session_id: str, *, reason: CancellationReason = CancellationReason.USER) -> bool:
    """Fence off any running writer of the session and record the abort.

    Returns:
        True when recorded; False when the run had already ended (``run_terminal``): nothing written.

    Raises:
        SessionNotFound: no such session.
        LedgerIntegrityError: the ledger does not verify (the epoch is bumped all the same).
    """
    if load_state(store, session_id).phase == "terminal":
        return False
    store.bump_authority_epoch(session_id)
    recorder = Recorder.attach(store, session_id)
    state = load_state(store, session_id)
    if state.phase == "terminal":
        return False
    event = OperationCancelled(
        turn=state.turn,
        operation_id=f"{state.run_id}:abort",
        reason=reason,
        pending_call_ids=_unanswered(state),
    )
    with recorder.atomic():
        recorder.append(event)
        store.set_session_status(session_id, "cancelled")
    return True
