"""Erasure without breaking the chain: personal data as salted artifacts, the ledger holding only digests.

The ledger is append-only and every byte of it is hashed, so personal data must never be *in* it. Events
reference such data by a salted digest instead::

    salted:sha256:<hex of sha256(salt || content)>          salt: 32 random bytes

(putting and getting them: :mod:`flightlog.salted`, below the recorder; re-exported here)
The content and its salt are stored together in ``salted_artifacts``, outside the ledger (never in an
event, a checkpoint, an index leaf, an export or an offline bundle). A plain ``sha256:`` handle of a short
value (a name, an e-mail address) can be confirmed by guessing; a salted one cannot, and once the salt is
erased the digest left in the ledger is unlinkable to anything. Each put draws a fresh salt, so the same
value stored twice gets two unrelated handles (no deduplication, deliberately).

**Erasure** (:func:`erase_artifact`, ``flightlog erase HANDLE``), in one transaction:

1. the content and the salt are deleted (a store-level deletion: artifacts are not ledger rows; SQLite's
   ``secure_delete`` zeroes the freed pages), and an erasure record kept (digest, time, where ledgered);
2. a ``Custom`` event ``artifact_erased`` (payload: ``handle``, the ``sessions`` recorded as referencing it,
   ``reason``, ``erased_at_ms``) is appended to the ledger-wide **erasure log**, the session
   ``flightlog:erasures`` (hash-chained; signed, indexed and witnessable like any session when a notary is
   given; never sealed);

3. a long-term memory whose text this was is deleted with its full-text index rows
   (:mod:`flightlog.kernel.memory_bank`);

then the WAL is checkpointed (best effort) so the bytes leave the journal file too. The erasure log is one
session rather than an event in every referencing session because sealed sessions refuse appends, and
appending to a live session would take its authority epoch from the writer recording it. The events
table is never touched: every chain, tree head and signed checkpoint still verifies.

**Verification** (:func:`check_artifacts`, called by :func:`~flightlog.integrity.verify.audit_session`): every
salted handle a session's events mention is reported ``present`` (its content and salt hash to the
handle), ``erased`` (the erasure log event is read back and must name the handle), ``missing``: gone
without an erasure record, the divergence ``artifact_missing`` at the first referencing seq, or
``corrupt``: stored content or salt altered, the divergence ``artifact_corrupt``. The archives the kernel's
events name (``sha256:`` handles) are checked the same way (no erasure for them).

Source: ARCHITECTURE.md invariants 1 (append-only) and 8 (references are logical ids, never secrets).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ArtifactIntegrityError, Divergence, EventDecodeError, SessionNotFound, StoreError
from ..recorder import Recorder
from ..salted import (
    SALT_BYTES,
    SALTED_PREFIX,
    get_personal_artifact,
    parse_handle,
    put_personal_artifact,
    salted_digest,
)
from ..store.base import ErasureRecord
from .keys import now_ms

if TYPE_CHECKING:
    from ..store.base import Store
    from .notary import Notary
    from .verify import ArtifactRef, AuditReport

__all__ = [
    "ERASED_KIND",
    "ERASURE_LOG",
    "SALT_BYTES",
    "ArtifactNotFound",
    "check_artifacts",
    "erase_artifact",
    "get_personal_artifact",
    "parse_handle",
    "put_personal_artifact",
    "salted_digest",
]

ERASURE_LOG = "flightlog:erasures"
"""Session id of the ledger-wide erasure log."""

ERASED_KIND = "artifact_erased"
"""``Custom.custom_kind`` of an erasure event."""


class ArtifactNotFound(StoreError, LookupError):
    """No salted artifact (present or erased) has this handle."""

    handle: str

    def __init__(self, *, handle: str) -> None:
        super().__init__(f"no salted artifact {handle!r}", handle=handle)


def _erasure_log(store: Store, notary: Notary | None) -> Recorder:
    try:
        store.get_session(ERASURE_LOG)
    except SessionNotFound:
        return Recorder.create(
            store, session_id=ERASURE_LOG, task="erasure log", source="flightlog:erasure", notary=notary
        )
    return Recorder.attach(store, ERASURE_LOG, notary=notary)


def erase_artifact(
    store: Store, handle: str, *, reason: str = "", notary: Notary | None = None
) -> ErasureRecord:
    """Erase a salted artifact's content and salt, and ledger the erasure in the erasure log.

    Idempotent: erasing an erased artifact returns its record and writes nothing. Inside an open
    transaction the erasure joins it; the freed pages are purged from the journal (best effort,
    ``Store.purge_freed_pages``) once the outermost transaction commits.

    Args:
        store: The store.
        handle: ``salted:sha256:<hex>``.
        reason: Why (recorded in the ledger: never put personal data here).
        notary: Sign the erasure log's checkpoints (the CLI passes the user's); None records unsigned.

    Returns:
        The erasure record (erasure log session and seq).

    Raises:
        ValueError: a malformed handle.
        ArtifactNotFound: no such salted artifact.
        LedgerIntegrityError: the erasure log does not verify (nothing is erased then).
    """
    digest = parse_handle(handle)
    done = store.erasure(digest)
    if done is not None:
        return done
    if store.salted_artifact_info(digest) is None:
        raise ArtifactNotFound(handle=SALTED_PREFIX + digest)
    at = now_ms()
    payload = {
        "handle": SALTED_PREFIX + digest,
        "sessions": store.artifact_sessions(digest),
        "reason": reason,
        "erased_at_ms": at,
    }
    with store.transaction():
        row = _erasure_log(store, notary).record_custom(ERASED_KIND, payload)
        record = ErasureRecord(digest, at, ERASURE_LOG, row.seq)
        store.erase_salted_artifact(record)
        _forget_memories(store, SALTED_PREFIX + digest)
        # once the outermost transaction commits: inside one (the kernel's memory_write erases an
        # overwritten text in its write's transaction) the purge would be skipped, the old pages kept
        store.call_after_commit(store.purge_freed_pages)
    return record


def _forget_memories(store: Store, handle: str) -> None:
    """Delete the long-term memories whose text this was (:mod:`flightlog.kernel.memory_bank`): an erased memory
    must not stay searchable through its index rows."""
    try:
        index = store.memory
    except NotImplementedError:
        return
    index.delete_handle(handle)


def check_artifacts(store: Store, report: AuditReport) -> None:
    """Set the state of each artifact ``report`` lists (salted ones, and the archives kernel events name);
    a missing or corrupt one is a divergence at the first referencing seq.

    ``present``: stored, and its bytes hash to the handle (each is read once). ``erased`` (salted only): an
    erasure record whose erasure log event names the handle. ``missing``: neither (``artifact_missing``).
    ``corrupt``: stored bytes that hash otherwise (``artifact_corrupt``). ``unchecked``: the store keeps no
    salted artifacts.
    """
    for ref in report.artifacts:
        try:
            present = _stored(store, ref)
        except NotImplementedError:
            continue
        except ArtifactIntegrityError as exc:
            ref.state, ref.detail = "corrupt", exc.reason
            report.divergences.append(Divergence(ref.seq, "artifact_corrupt", f"{ref.handle}: {exc.reason}"))
            continue
        if present:
            ref.state = "present"
            continue
        if not ref.salted:
            ref.state, ref.detail = "missing", "not in the store"
            report.divergences.append(Divergence(ref.seq, "artifact_missing", f"{ref.handle}: {ref.detail}"))
            continue
        erasure = store.erasure(ref.digest)
        problem = _erasure_problem(store, ref.handle, erasure)
        if problem is None and erasure is not None:
            ref.state = "erased"
            ref.detail = f"erased at {erasure.log_session_id} seq {erasure.log_seq}"
            continue
        ref.state, ref.detail = "missing", problem or "gone without an erasure record"
        report.divergences.append(Divergence(ref.seq, "artifact_missing", f"{ref.handle}: {ref.detail}"))
    report.divergences.sort(key=lambda d: d.seq)


def _stored(store: Store, ref: ArtifactRef) -> bool:
    """Whether ``ref``'s artifact is stored; the store's read checks its bytes against the handle.

    Raises:
        ArtifactIntegrityError: stored bytes that hash otherwise.
        NotImplementedError: the store keeps no salted artifacts.
    """
    if ref.salted:
        return store.get_salted_artifact(ref.digest) is not None
    return store.get_artifact(ref.digest) is not None


def _erasure_problem(store: Store, handle: str, erasure: ErasureRecord | None) -> str | None:
    from ..encoding import decode_stored
    from ..events import Custom

    if erasure is None:
        return "gone without an erasure record"
    where = f"{erasure.log_session_id} seq {erasure.log_seq}"
    rows = store.read_events(erasure.log_session_id, start=erasure.log_seq, stop=erasure.log_seq + 1)
    row = next(iter(rows), None)
    try:
        event = decode_stored(row.event_bytes, seq=row.seq) if row is not None else None
    except EventDecodeError:
        event = None
    if (
        not isinstance(event, Custom)
        or event.custom_kind != ERASED_KIND
        or not isinstance(event.payload, dict)
        or event.payload.get("handle") != handle
    ):
        return f"the erasure record points at {where}, which does not record this erasure"
    return None
