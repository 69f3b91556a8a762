"""Human decisions on gated calls, from any process: list what waits, approve, deny.

A suspended run has exited; its gates live only in the ledger. ``approve``/``deny`` attach to the session
(verifying the whole chain and taking authority, so a writer still holding the old epoch is fenced off)
and append, in one transaction:

* approve: ``permission_resolved(turn, approved=True, responder="user")`` and
  ``Custom("approval_decision", {turn, call_id, gate, approved, responder, policy_digest?})`` where
  ``responder`` there is the operator's name (``--as NAME``, default ``user``) and ``policy_digest`` the
  session's signed grant (:func:`flightlog.grants.session_policy_digest`), when it has one;
* deny: ``permission_resolved(turn, approved=False, responder="user")``, ``tool_denied(turn, call_id, tool_name,
  reason)`` and the ``approval_decision``.

Nothing runs here: a later ``Kernel.resume`` records ``resumed(approved=[...], denied=[...])`` and
executes the approved calls (for an in-doubt effect: approve runs it again, deny marks it failed).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..events import Custom, Event, PermissionResolved, ToolDenied
from ..grants import session_policy_digest
from ..recorder import Recorder
from ..store.base import Store
from .errors import NotPending
from .records import APPROVAL_DECISION, GateKind, Verdict
from .state import Gate, KernelState, load_state

__all__ = ["PendingCall", "approve", "deny", "pending"]


@dataclass(frozen=True)
class PendingCall:
    """A call waiting for a human decision.

    Attributes:
        session_id: Its session.
        turn: Its turn.
        call_id: The model's call id (what ``approve``/``deny`` take).
        tool: Tool name.
        arguments: Repaired arguments as JSON text.
        reason: Why it waits (policy rule, or the in-doubt effect).
        kind: ``approval`` or ``effect_in_doubt``.
    """

    session_id: str
    turn: int
    call_id: str
    tool: str
    arguments: str
    reason: str
    kind: GateKind

    def to_wire(self) -> dict[str, object]:
        """JSON-ready dict (the CLI's ``pending --json`` rows)."""
        return {
            "session_id": self.session_id,
            "turn": self.turn,
            "call_id": self.call_id,
            "tool": self.tool,
            "arguments": self.arguments,
            "reason": self.reason,
            "kind": self.kind,
        }


def pending(store: Store, session_id: str | None = None) -> list[PendingCall]:
    """Calls waiting for a decision, across sessions (status ``suspended``) or in one session.

    Returns:
        One entry per open gate, sessions oldest first, gates in request order.
    """
    if session_id is not None:
        ids = [session_id]
    else:
        ids = [s.session_id for s in store.list_sessions() if s.status == "suspended"]
    found: list[PendingCall] = []
    for sid in ids:
        state = load_state(store, sid)
        if state.phase != "suspended":
            continue
        for gate in state.gates.values():
            found.append(
                PendingCall(sid, gate.turn, gate.call_id, gate.tool, gate.arguments, gate.reason, gate.kind)
            )
    return found


HUMAN = "user"
"""``permission_resolved.responder`` of every human decision (seed 000: ``"user" | "policy_gate"``)."""


def approve(store: Store, session_id: str, call_id: str, *, responder: str = "user") -> Verdict:
    """Approve a gated call (for an in-doubt effect: allow running it again).

    Raises:
        NotPending: the session is not suspended on ``call_id`` (unknown, or already decided).
        SessionNotFound: no such session.
        LedgerIntegrityError: the ledger does not verify (nothing is written).
    """
    return _decide(store, session_id, call_id, approved=True, responder=responder, reason=None)


def deny(
    store: Store, session_id: str, call_id: str, *, responder: str = "user", reason: str | None = None
) -> Verdict:
    """Deny a gated call (for an in-doubt effect: mark it failed, never run it again).

    Raises:
        NotPending: the session is not suspended on ``call_id`` (unknown, or already decided).
        SessionNotFound: no such session.
        LedgerIntegrityError: the ledger does not verify (nothing is written).
    """
    return _decide(store, session_id, call_id, approved=False, responder=responder, reason=reason)


def _open_gate(state: KernelState, session_id: str, call_id: str) -> Gate:
    gate = state.gates.get(call_id) if state.phase == "suspended" else None
    if gate is None:
        raise NotPending(session_id=session_id, call_id=call_id)
    return gate


def _decide(
    store: Store, session_id: str, call_id: str, *, approved: bool, responder: str, reason: str | None
) -> Verdict:
    # Check before attaching: attaching takes authority, which would fence a run that is still going.
    state = load_state(store, session_id)
    _open_gate(state, session_id, call_id)
    recorder = Recorder.attach(store, session_id)
    if recorder.next_seq != len(state.events):  # someone appended in between: decide on the new state
        state = load_state(store, session_id)
    gate = _open_gate(state, session_id, call_id)
    if not approved and reason is None:
        reason = f"denied by {responder}"
    verdict = Verdict(call_id, gate.kind, approved, responder, reason)
    # Seed 000: responder is "user" for a human decision ("policy_gate" for automatic ones); the operator's
    # name goes into the approval_decision record beside it.
    events: list[Event] = [PermissionResolved(turn=gate.turn, approved=approved, responder=HUMAN)]
    if not approved:
        events.append(ToolDenied(turn=gate.turn, call_id=call_id, tool_name=gate.tool, reason=reason or ""))
    payload = verdict.to_wire(gate.turn)
    digest = session_policy_digest(store, session_id)
    if digest is not None:  # the session runs under a signed grant: name it in the decision
        payload["policy_digest"] = digest
    events.append(Custom(custom_kind=APPROVAL_DECISION, payload=payload))
    recorder.append_many(events)
    return verdict
