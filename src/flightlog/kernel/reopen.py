"""Re-opening waits an abort closed: a run, or a run tree, resumed while it still waits for a human.

An :func:`~flightlog.kernel.abort` of a run waiting for decisions records ``operation_cancelled`` and the
status ``cancelled``; its gates stay open, and a parent waiting on sub-agents aborts them first (each child
records its own ``operation_cancelled``; the parent records ``agent_process_changed(killed)`` per child). A
resume that finds the whole tree still waiting for humans drives nothing; it re-opens each closed wait, so
the sessions' status, ``flightlog pending``, the runs read model and the dashboard say the tree waits again:

* a run waiting on its own gates records the ``tool_gated`` + ``permission_requested`` that opened each
  still-open gate again, then ``suspended(turn, reason, pending_calls=<open gates>)`` (seed 000: a run
  "paused, waiting for human-in-the-loop interaction"); calls decided in the meantime keep their decision;
* a parent waiting on sub-agents first re-opens its awaited children's waits (bottom up, each in its own
  session), then records what it records when a child waits (:mod:`flightlog.kernel.subagents`):
  ``agent_process_changed(waiting_input)`` for each awaited child not already in that state, then its
  ``suspended(turn, "sub_agent_await", pending_calls)`` again.

Each re-opened session gets the status ``suspended`` in the same transaction and a signed checkpoint (no-op
without a notary). A re-opened wait is one wait: :meth:`KernelState.current_wait
<flightlog.kernel.state.KernelState.current_wait>` starts it at its first ``suspended``. Crash-safe: each
session is written in one transaction, children before parents, and a session whose wait is open again
needs nothing more, so a resume after a crash finishes what is left.
"""

from __future__ import annotations

from ..events import Event, Suspended
from ..integrity.notary import Notary
from ..recorder import Recorder
from ..store.base import Store
from .state import KernelState, load_state
from .subagents import SUB_AGENT_AWAIT, awaited_children, waiting_on_children

__all__ = ["needs_reopening", "reopen_children", "reopened_wait", "reopening"]


def reopened_wait(state: KernelState, suspension: Suspended) -> list[Event]:
    """What re-opens the wait of a run an abort cancelled while it waited on its own gates (module docs):
    the ``tool_gated`` and ``permission_requested`` that opened each still-open gate, recorded again as they
    were, then ``suspended(turn, reason, pending_calls=<open gates>)`` of ``suspension``."""
    reopened: list[Event] = list(state.gate_openings())  # folded: KernelState.gate_openings
    reopened.append(
        Suspended(turn=suspension.turn, reason=suspension.reason, pending_calls=list(state.gates))
    )
    return reopened


def reopening(state: KernelState) -> list[Event]:
    """The events that re-open ``state``'s own wait (module docs), or ``[]`` when an abort did not close it.

    For a parent, only its own records: its children's waits are re-opened by :func:`reopen_children`.
    """
    suspension = state.suspension
    if suspension is None or not state.wait_closed():
        return []
    if state.gates:
        return reopened_wait(state, suspension)
    if suspension.reason != SUB_AGENT_AWAIT:
        return []
    entries: list[Event] = []
    for agent_id in awaited_children(state):
        entry = state.delegation.processes.get(agent_id)
        if entry is not None and entry.state != "waiting_input":
            update = {"turn": state.turn, "state": "waiting_input", "result_termination": None}
            entries.append(entry.model_copy(update=update))  # as _Call.process("waiting_input") writes it
    return [
        *entries,
        Suspended(turn=suspension.turn, reason=SUB_AGENT_AWAIT, pending_calls=suspension.pending_calls),
    ]


def needs_reopening(store: Store, state: KernelState) -> bool:
    """Whether an abort closed a wait in ``state``'s tree (its own or a descendant's) while the whole tree
    waits for humans (reads only).

    Raises:
        SubAgentFailed: an awaited child id names a session that is not this parent's child.
    """
    if state.phase == "suspended" and state.gates:
        return bool(reopening(state))
    if not waiting_on_children(store, state):
        return False
    return bool(reopening(state)) or any(
        needs_reopening(store, load_state(store, agent_id)) for agent_id in awaited_children(state)
    )


def reopen_children(store: Store, state: KernelState, notary: Notary | None) -> None:
    """Re-open the closed waits of ``state``'s awaited descendants, bottom up, each in its own session: take
    authority (:meth:`Recorder.attach <flightlog.recorder.Recorder.attach>`, the full chain check without a
    notary, else the rows after the latest signed checkpoint: the caller ran the full audit of every
    unfinished descendant first), fold the session again, append :func:`reopening` with the status
    ``suspended`` in one transaction, sign a checkpoint. Writes nothing when nothing was closed.

    Raises:
        StaleWriter: another writer took a child's authority meanwhile (nothing of that child written).
        LedgerIntegrityError: a child's rows changed since they were checked.
    """
    if not waiting_on_children(store, state):
        return
    for agent_id in awaited_children(state):
        child = load_state(store, agent_id)
        if not needs_reopening(store, child):
            continue
        reopen_children(store, child, notary)
        if not reopening(child):
            continue  # its own wait is open: only further down was closed
        recorder = Recorder.attach(store, agent_id, notary=notary, full=notary is None)
        events = reopening(load_state(store, agent_id))  # what holds now that this writer has authority
        if events:
            with recorder.atomic():
                recorder.append_many(events)
                store.set_session_status(agent_id, "suspended")
                recorder.checkpoint()  # no-op without a notary
