"""The ``sessions`` row against the ledger: what the unhashed row says must not outrank the verified events.

A session's row (``status``, ``task``, ``metadata``, ``parent_session_id``...) is a summary the backend keeps
beside the events; no chain hash, tree head or signature covers it, so anyone who can write the database
can change it without breaking any of them. Readers that act on a wait therefore decide from the ledger
(:func:`flightlog.kernel.pending` folds the events, :func:`session_may_wait` is its pre-filter), and
``flightlog verify`` / ``flightlog audit`` compare the row with what the verified ledger fixes
(:func:`row_divergences`), reporting a contradiction as a ``row_mismatch`` divergence.

What the ledger fixes about the status (the kernel changes the status in the transaction that appends
the events that change its fold, :meth:`flightlog.kernel.activation.Activation.append`, ``abort``,
``reopen``):

* a sealed session (a verified ``session_sealed`` event, :meth:`flightlog.recorder.Recorder.finish`):
  the status the seal names;
* a run whose latest wait is open (``suspended`` not followed by a resume or an ``operation_cancelled``):
  ``suspended``, or ``running``/``queued`` (a fleet run a worker may claim: ``RUNNABLE_STATUSES``), never
  an ended status such as ``completed``: that would hide its gates;
* a wait an ``abort`` closed: ``cancelled``, nothing else (the abort writes it in the transaction that
  closes the wait, and every later status change comes with the events that re-open the wait or end the
  run: :mod:`flightlog.kernel.reopen`, a resume's ``resumed``), so ``suspended``, ``running`` or
  ``queued`` there contradicts the ledger too.

The row's ``source`` is compared with the one the ledger's first events fix (a kernel run's start, an
import's ``import_source`` record: :mod:`flightlog.integrity.authorship`; the full check compares it too),
and a kernel run's ``parent_session_id`` with the parent its parent's ledger and its own ``spawned_by``
record prove (:mod:`flightlog.integrity.lineage`).

Anything else (the status of an imported session, whose first event is ``import_source``: the
document's, its waits decided in the app that wrote it; the task, the metadata, the parent of a session
that is not a kernel run) is not fixed by the events and is not compared: the row stays the only record
of it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from ..encoding import SUSPENDED_MARK, decode_stored, decodes_without
from ..errors import Divergence
from ..events import Custom, RunTerminal
from ..integrity.authorship import IMPORT_SOURCE, ROW_MISMATCH, source_divergence
from ..integrity.lineage import ParentVerifier, lineage_divergence
from ..notarization import SEAL_KIND
from ..store.base import RUNNABLE_STATUSES, SessionRecord, Store

if TYPE_CHECKING:  # the audit and the kernel's fold load with the check that needs them, not with `ls`
    from ..integrity.verify import AuditReport

__all__ = [
    "ROW_MISMATCH",
    "SUSPENDED_MARK",
    "row_divergences",
    "row_warning",
    "session_may_wait",
    "sessions_may_wait",
]


# SUSPENDED_MARK (from ``encoding``): what the canonical bytes of every ``suspended`` event hold (RFC 8785:
# sorted keys, no spaces). A session without it in any row has never waited, unless its bytes were rewritten
# to a non-canonical spelling and re-chained (the fold would read that wait; this byte search does not): a
# known limit, pinned by tests/audit3/test_queue_attacks.py.

_END_SPELLINGS = (str(RunTerminal.model_fields["kind"].default).encode(), SEAL_KIND.encode())
"""The strings an event that can end the run decodes with: ``run_terminal``'s kind, the seal's
``custom_kind``; a last row holding neither (:func:`~flightlog.encoding.decodes_without`) ends nothing."""
_IMPORT_SPELLING = (IMPORT_SOURCE.encode(),)
"""What a first row that is an ``import_source`` record holds (:func:`_is_import`)."""


def session_may_wait(store: Store, record: SessionRecord) -> bool:
    """Whether the ledger of ``record``'s session may hold an open wait, read from the stored bytes (which
    the chain hash covers), never from the row's status or the ``kind`` column. False proves the fold
    (:func:`~flightlog.kernel.state.load_state`) has no wait; True only says it may (fold it).

    False when the last stored event is a ``run_terminal`` (the fold's phase is then ``terminal``,
    whatever came before), or a ``session_sealed`` right after one (the seal changes no phase); when the
    first event is an ``import_source`` (an imported document: its waits are decided in the app that wrote
    it, never by ``flightlog approve``, and its status is the document's); else when no stored event
    holds :data:`SUSPENDED_MARK` (a run that never suspended has no wait). ``record`` only
    says where to start reading the tail (``head_seq - 1``); the rows read go to the end of what is
    stored, so an edited ``head_seq`` costs a longer read, never a wrong answer.

    Cost: the tail (the last row decoded; the one before it too when the last is a seal) for a run that
    ended; else one read of the session's rows, a byte search per row, the first row decoded.

    Raises:
        EventDecodeError: a row read to decide does not decode (names its seq): the last, the one before it
            when the last is a seal, the first when the tail does not end the run.
    """
    sid = record.session_id
    tail: deque[tuple[Any, ...]] = deque(maxlen=2)
    for page in store.read_chain(sid, start=max(0, record.head_seq - 1)):
        tail.extend(page)
    if _ended([(row[0], row[1]) for row in tail]):
        return False
    for page in store.read_chain(sid):
        for row in page:
            if row[0] == 0 and _is_import(0, row[1]):
                return False
            if SUSPENDED_MARK in row[1]:
                return True
    return False


def sessions_may_wait(store: Store, among: Collection[str] | None = None) -> set[str]:
    """The ids of every session (of ``among`` when given) for which :func:`session_may_wait` holds, found
    in one pass over the store (:meth:`~flightlog.store.base.Store.marked_ends`: the stored events holding
    :data:`SUSPENDED_MARK`, of ``among``'s only when given, then the first and last two rows of each
    session holding it), instead of reads per session. The same rule on the same bytes: a session not in
    the set provably has no wait; neither the row (its ``status``, its ``head_seq``) nor the ``kind``
    column is read. A SQL store finds the events holding the mark through its ``events_suspended`` partial
    index (:data:`flightlog.store.ddl.SQLITE_EVENTS_SUSPENDED`): the database's own index of those stored
    bytes, kept by the database on every insert, update and delete (an edit of a row behind flightlog's
    back moves it too; ``PRAGMA integrity_check`` compares its entries with the rows), so the answer is
    still decided from the bytes the chain covers; without that index (a read-only handle on a store from
    before its migration), by one byte search of every stored event.

    Cost: a read of the index's entries (else the byte search scans every stored event once); rows are
    decoded only for the sessions holding the mark: the last (the one before it too when the last is a
    seal), then the first when the run did not end.

    Raises:
        EventDecodeError: a row read to decide (as :func:`session_may_wait` reads them) does not decode
            (names its seq).
    """
    found: set[str] = set()
    for sid, rows in store.marked_ends(SUSPENDED_MARK, among).items():
        tail = rows[-2:]
        if len(tail) == 2 and tail[0][0] < tail[1][0] - 1:
            tail = tail[1:]  # never seq 0 across a gap
        if _ended(tail):
            continue
        seq, data = rows[0]
        if seq == 0 and _is_import(seq, data):
            continue
        found.add(sid)
    return found


def _ended(tail: list[tuple[int, bytes]]) -> bool:
    """Whether the last two stored rows (``(seq, bytes)``, ascending; fewer for a short session) end the
    run: a ``run_terminal`` last, or a ``session_sealed`` right after one (decoded, never the ``kind``). The
    row before the last is decoded only when the last is a seal: nothing else about it decides the end."""
    if not tail:
        return False
    seq, data = tail[-1]
    if decodes_without(data, _END_SPELLINGS):  # provably neither: nothing to decode
        return False
    last = decode_stored(data, seq=seq)
    if isinstance(last, RunTerminal):
        return True
    if len(tail) == 2 and isinstance(last, Custom) and last.custom_kind == SEAL_KIND:
        seq, data = tail[0]
        return isinstance(decode_stored(data, seq=seq), RunTerminal)
    return False


def row_warning(session_id: str, status: str) -> str:
    """What a reader that listed a wait from the ledger says when the session's row names another status
    (``flightlog pending``'s warning, the dashboard's note on the run): the row's status, and the command
    that reports the contradiction."""
    return (
        f"its sessions row says status {status!r}, its ledger waits (listed from the ledger; see "
        f"`flightlog verify {session_id}`)"
    )


def _is_import(seq: int, data: bytes) -> bool:
    """Whether the first row (``seq`` 0) is an ``import_source`` record (decoded, unless its bytes prove
    it is not: :func:`~flightlog.encoding.decodes_without`)."""
    if decodes_without(data, _IMPORT_SPELLING):
        return False
    event = decode_stored(data, seq=seq)
    return isinstance(event, Custom) and event.custom_kind == IMPORT_SOURCE


def row_divergences(
    store: Store, report: AuditReport, *, parents: ParentVerifier | None = None
) -> list[Divergence]:
    """Every field of the session's row that contradicts its verified ledger, as ``row_mismatch``
    divergences naming the field, the row's value and the ledger's, at the seq that fixes the ledger's.

    ``report`` is the session's audit (:func:`flightlog.integrity.verify.audit_session`); none when it
    does not pass (the fold of unverified events is no evidence either). A session whose head moved
    since it was audited (the row's ``head_seq + 1 != report.events``) is not compared: a live writer
    changes the status and the events in one transaction, and the next check sees them together.

    The row's ``source`` is compared first (:func:`~flightlog.integrity.authorship.source_divergence`, at
    the seq that fixes the ledger's; the full check ``Auditor.session`` compares it in its own pass, so a
    report from it that found a forged source does not pass and comes back here with nothing added).
    With ``parents`` (the quick check's, whose report did not compare it), a kernel run's
    ``parent_session_id`` next, proven by the parent's ledger checked with ``parents``
    (:func:`~flightlog.integrity.lineage.lineage_divergence`; the full check compares it in its own pass).

    Cost: the first rows (seq 0; a kernel run's start after it; with ``parents``, one check of a kernel
    sub-agent's parent); then none for a sealed session; otherwise :func:`session_may_wait` (two rows decoded for a run that
    ended, else a byte search of its rows), plus one fold when it may wait.

    Raises:
        SessionNotFound: the session is gone.
        EventDecodeError: a first row read to decide the source does not decode (names its seq).
    """
    if not report.ok:
        return []
    record = store.get_session(report.session_id)
    forged = source_divergence(store, record)
    found = [forged] if forged is not None else []
    moved = lineage_divergence(store, record, parents) if parents is not None else None
    found += [moved] if moved is not None else []
    return found + _status_divergences(store, record, report)


def _status_divergences(store: Store, record: SessionRecord, report: AuditReport) -> list[Divergence]:
    """:func:`row_divergences` of the row's status."""
    sid, status, events = record.session_id, record.status, report.events
    if record.head_seq + 1 != events:
        return []
    if report.sealed and report.seal_seq is not None:
        if status == report.seal_status:
            return []
        return [
            Divergence(
                report.seal_seq,
                ROW_MISMATCH,
                f"sessions row status {status!r}, the ledger's {report.seal_status!r}: the signed seal at "
                f"seq {report.seal_seq} names it",
            )
        ]
    if not session_may_wait(store, record):
        return []
    from .state import load_state  # local: the fold pulls in the kernel runtime (see the module imports)

    state = load_state(store, sid)
    wait = state.current_wait()
    if not wait or len(state.events) != events:
        return []
    closed = state.wait_closed()
    if status == "cancelled" if closed else status in RUNNABLE_STATUSES:
        return []
    start = state.events[wait[0][0]][0]
    gates = ", ".join(state.gates) or "none"
    ledger = "cancelled" if closed else "suspended"
    why = (
        f"an abort closed the wait opened at seq {start}"
        if closed
        else f"the wait opened at seq {start} is open"
    )
    return [
        Divergence(
            start,
            ROW_MISMATCH,
            f"sessions row status {status!r}, the ledger's {ledger!r}: {why} (gates: {gates})",
        )
    ]
