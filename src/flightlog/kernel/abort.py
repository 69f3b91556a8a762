"""Stopping a run from outside: fence off its writer and record why.

``abort`` first runs the full check ``flightlog audit`` makes (:func:`flightlog.integrity.audit.require_intact`):
nothing the session's row or ledger says (its ``source`` included) is trusted before it passes, so a tampered
session is refused as tampered (``LedgerIntegrityError``, naming the first divergent seq), never by what a
forged ``source`` says; the check compares the row's ``source`` with who the first verified events say wrote
the session (:mod:`flightlog.integrity.authorship`), so a row whose ``source`` alone was edited is a
``row_mismatch`` refused the same way. Then it bumps the session's authority epoch, so a kernel still running the session
fails its next append with ``StaleWriter`` and stops without writing, runs the full check again on the now
settled ledger, and only then reads it, attaches (taking authority) and records ``operation_cancelled(turn,
operation_id="{run_id}:abort", reason, pending_call_ids)`` with the session status ``cancelled``, signed by
the notary (the user's log key by default). Given ``requested_by`` (the dashboard passes its operator name),
a ``Custom("abort_requested", {turn, operation_id, requested_by})`` in the same transaction records who
asked. The run stays resumable (``Kernel.resume``).

A run with unfinished sub-agents (:mod:`flightlog.kernel.subagents`) aborts each of them the same way first
(recursively, after fencing itself), then records, with its own ``operation_cancelled``, an
``agent_process_changed(state="killed", result_termination="user_abort")`` per child; resuming the parent
later resumes them.

Only a session the kernel runs (source ``kernel``) is aborted: any other (a LangGraph thread, an Agents SDK
or Pydantic AI session, an imported transcript) that passes the full check is refused before anything is
bumped or written (:func:`no_abort_target`, :class:`~flightlog.kernel.errors.AbortRefused`): its own app
runs it and would read neither the fence nor the ``operation_cancelled``, so recording one would say a run
stopped that did not. A session whose writer keeps appending through the first check (``SessionBusy``:
nothing diverged in what was read) is fenced off first and checked once it stands still, as an abort must
stop a runaway writer; a non-kernel one refused then has had its epoch bumped (its writer re-reads and
retries, or fails its next append).
"""

from __future__ import annotations

from ..errors import SessionBusy
from ..events import CancellationReason, Custom, OperationCancelled
from ..integrity.audit import Auditor, require_intact
from ..integrity.notary import USER_NOTARY, Notary, UserNotary, resolve_notary
from ..recorder import Recorder
from ..store.base import SessionRecord, Store
from .errors import AbortRefused
from .records import ABORT_REQUESTED
from .state import KernelState, load_state

__all__ = ["abort", "no_abort_target"]

_INSTEAD = {
    "langgraph": "stop it where it runs: the graph advances only inside your app's graph.invoke or "
    "graph.stream call, so stop that call (or its process); an interrupt() in the graph pauses it for a decision",
    "langgraph.subgraph": "stop its parent graph where it runs: it advances only inside your app's "
    "graph.invoke or graph.stream call",
    "openai-agents": "stop the Agents SDK app's Runner.run with this session where it runs",
    "pydantic-ai": "stop the Pydantic AI app's agent run (FlightlogHistory.run) where it runs",
}
"""What works instead of an abort, by the source of a session its own framework runs."""


def no_abort_target(record: SessionRecord) -> str | None:
    """Why an abort of ``record``'s session would stop nothing, with what works instead; None when the
    flightlog kernel runs it (source ``kernel``: ``Kernel.run``, a fleet ``submit``, a kernel sub-agent).
    One sentence, no trailing period (:func:`flightlog.kernel.elsewhere.run_elsewhere`)."""
    from .elsewhere import run_elsewhere

    return run_elsewhere(
        record,
        unread="the flightlog kernel does not run it, so an abort would fence off no writer of it and "
        "nothing would stop",
        instead=_INSTEAD,
        imported="stop that agent where it runs",
    )


def _refuse_elsewhere(record: SessionRecord) -> None:
    """Raise :class:`~flightlog.kernel.errors.AbortRefused` when no flightlog kernel runs ``record``'s
    session (:func:`no_abort_target`); call it only once the session passed the full check."""
    elsewhere = no_abort_target(record)
    if elsewhere is not None:
        raise AbortRefused(session_id=record.session_id, source=record.source, reason=elsewhere)


def _unanswered(state: KernelState) -> list[str]:
    """Call ids of the current turn's plan (they have no result: a result clears the plan)."""
    return [plan.call_id for plan in state.plans]


def abort(
    store: Store,
    session_id: str,
    *,
    reason: CancellationReason = CancellationReason.USER,
    notary: Notary | UserNotary | None = USER_NOTARY,
    requested_by: str | None = None,
) -> bool:
    """Fence off any running writer of the session and record the abort.

    Args:
        requested_by: Who asked (an operator name), recorded as ``abort_requested`` beside the abort of this
            session (not repeated in its sub-agents); None records no requester.
        notary: Signs the record and supplies the keys and retained heads the full check trusts (default
            :data:`~flightlog.integrity.notary.USER_NOTARY`, the user's; None: unsigned, checked against the
            user's keys).

    Returns:
        True when recorded; False when the run had already ended (``run_terminal``): nothing written.

    Raises:
        SessionNotFound: no such session.
        LedgerRetired: ``flightlog db copy`` retired this store (a read-only stale copy): nothing written;
            checked first (:meth:`~flightlog.store.base.Store.refuse_if_retired`, the rule every write
            transaction there obeys), in the words every refused write there uses.
        LedgerIntegrityError: the session fails the full check, run before its row's ``source`` is read
            (the first check: nothing is bumped or written; the check after the fence: the epoch is
            bumped, whatever wrote it is fenced off, nothing is written).
        AbortRefused: the session passes the full check and no flightlog kernel runs it
            (:func:`no_abort_target`: an integration's session, an imported transcript); nothing is
            written, and nothing bumped unless its writer kept it busy through the first check.
        SessionBusy: a writer still appends after the fence (it does not heed the epoch).
    """
    store.get_session(session_id)  # SessionNotFound before anything else
    store.refuse_if_retired()  # the write would be refused: say where the ledger went, whatever runs it
    signer = resolve_notary(notary)
    auditor = Auditor.for_notary(signer)
    try:
        require_intact(store, session_id, auditor=auditor)  # before anything stored is trusted
    except SessionBusy:  # nothing diverged in what was read: fence the writer, check the settled ledger
        store.bump_authority_epoch(session_id)
        require_intact(store, session_id, auditor=auditor)
        _refuse_elsewhere(store.get_session(session_id))
    else:
        _refuse_elsewhere(store.get_session(session_id))  # before the fence: its app's writer ignores one
        store.bump_authority_epoch(session_id)
        require_intact(store, session_id, auditor=auditor)  # again: what the fenced writer appended meanwhile
    if load_state(store, session_id).phase == "terminal":
        return False
    recorder = Recorder.attach(store, session_id, notary=signer)
    state = load_state(store, session_id)
    if state.phase == "terminal":
        return False
    from .subagents import abort_children  # the delegation runtime loads only when a run is aborted

    killed = abort_children(
        store,
        state,
        lambda child: abort(store, child, reason=reason, notary=signer),
        lambda child: require_intact(store, child, auditor=auditor),  # a child whose row names no parent
    )
    event = OperationCancelled(
        turn=state.turn,
        operation_id=f"{state.run_id}:abort",
        reason=reason,
        pending_call_ids=_unanswered(state),
    )
    asked = (
        [
            Custom(
                custom_kind=ABORT_REQUESTED,
                payload={
                    "turn": state.turn,
                    "operation_id": event.operation_id,
                    "requested_by": requested_by,
                },
            )
        ]
        if requested_by is not None
        else []
    )
    with recorder.atomic():
        recorder.append_many([event, *asked, *killed])
        store.set_session_status(session_id, "cancelled")
        recorder.checkpoint()  # no-op without a notary
    return True
