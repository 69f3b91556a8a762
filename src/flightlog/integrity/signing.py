"""A recorder's signing state for one session (:class:`SessionNotary`): created for a new session,
rebuilt by :func:`resume` for an existing one, then asked by the recorder to checkpoint and seal.

It implements :class:`flightlog.notarization.SessionSigner`, the interface the recorder is written
against; the keys, the cadence and the heads come from :class:`flightlog.integrity.notary.Notary`.

**Cadence.** A recorder with a :class:`~flightlog.integrity.notary.Notary` signs a checkpoint, in the same transaction as the
events it covers, at the end of an ``append_many`` once ``every`` (default 64) events have accumulated
since the last one, whenever ``Recorder.checkpoint()`` is called (the kernel calls it in the transaction that records a
side effect's intent, before the tool runs), and when the session is sealed. Ed25519 signing costs ~50 µs, so at the default
cadence it adds < 1 µs per event. Events after the last checkpoint are the *unanchored tail*: chained
and Merkle-hashed like every event, but with no signature over them yet; verification reports them as such.

**Seal.** ``Recorder.finish(status)`` appends a ``Custom`` event ``session_sealed`` with payload
``{"size": n, "root": <hex root over seqs [0, n)>, "status": status}`` at seq n and a checkpoint over
n + 1 events. A sealed session refuses appends; an event after a seal is a divergence.

**Resume.** ``Recorder.attach(..., notary=n)`` verifies in full by default (:func:`~flightlog.integrity.verify.audit_session`,
streaming, O(n)). ``full=False`` verifies the latest checkpoint's signature, its consistency with the
retained head, rebuilds the compact range from the frontier stored with the checkpoint (a cache, checked
against the signed root) and verifies only the rows after it: O(log n) + tail. When the retained head is
older than the latest checkpoint, consistency is checked by folding the events between the two into the
frontier kept at the retained size (equivalent to an RFC 9162 §2.1.4 consistency proof, and cheaper).
Whatever the frontiers cannot settle (none stored, damaged) falls back to the full path. Cheap resume
does not re-read rows the checkpoint covers, so an edit to them is only caught by a full verify; that is
why full stays the default. A retained head older than the latest checkpoint is caught up (written) by a
resume that goes on writing; a read (``resume(..., retain=False)``, the LangGraph saver's reads) writes
nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import (
    Divergence,
    EventDecodeError,
    FlightlogError,
    LedgerIntegrityError,
)
from ..ledger import CompactRange, chain_hash, kind_mismatch, leaf_hash
from ..notarization import Anchor
from .checkpoints import (
    Checkpoint,
    SignedCheckpoint,
    decode_frontier,
    encode_frontier,
    open_checkpoint,
    origin_for,
)
from .heads import copy_hint, extension_problem, prefix_root
from .indexlog import append_to_index
from .notes import NoteError, parse_note
from .verify import audit_session, open_retained, seal_payload

if TYPE_CHECKING:
    from ..store.base import Store, StoredEvent
    from .notary import Notary

__all__ = [
    "SessionNotary",
    "resume",
]

log = logging.getLogger("flightlog.integrity.signing")


@dataclass
class SessionNotary:
    """A recorder's checkpoint state for one session (internal to the recorder)."""

    notary: Notary
    ledger_id: str
    session_id: str
    latest: SignedCheckpoint | None = None
    sealed: bool = False
    pending: SignedCheckpoint | None = None
    proved: dict[int, bytes] = field(default_factory=dict)
    """Roots of this writer's tree by size (32 bytes each) that the retained head was checked against."""

    @property
    def origin(self) -> str:
        """The session's checkpoint origin."""
        return origin_for(self.ledger_id, self.session_id)

    @property
    def anchored(self) -> int:
        """Events covered by the latest signed checkpoint."""
        return self.latest.size if self.latest else 0

    def due(self, size: int) -> bool:
        """Whether the cadence calls for a checkpoint at ``size`` events."""
        return size - self.anchored >= self.notary.every

    def snapshot(self) -> tuple[SignedCheckpoint | None, bool, SignedCheckpoint | None]:
        """State to restore when a transaction rolls back."""
        return self.latest, self.sealed, self.pending

    def restore(self, saved: tuple[SignedCheckpoint | None, bool, SignedCheckpoint | None]) -> None:
        """Undo to :meth:`snapshot`."""
        self.latest, self.sealed, self.pending = saved

    @classmethod
    def for_new_session(cls, store: Store, session_id: str, notary: Notary) -> SessionNotary:
        """State for a session about to be created.

        Raises:
            LedgerIntegrityError: a head is already retained for this session id in this ledger: the
                database was rolled back to before the session existed.
        """
        ledger_id = store.ledger_id()
        head = notary.heads.load(ledger_id, session_id)
        if head is not None:
            raise LedgerIntegrityError(
                session_id=session_id,
                seq=0,
                reason=f"rollback: a head of this session is retained at {head.path}, "
                "but the database has no such session",
            )
        return cls(notary, ledger_id, session_id)

    def _hook(self, store: Store) -> None:
        """Retain after the outermost commit; undo this state if it rolls back."""
        saved = self.snapshot()
        store.call_after_commit(self.retain)
        store.call_after_rollback(lambda: self.restore(saved))

    def checkpoint(self, store: Store, tree: CompactRange, chain: str) -> SignedCheckpoint | None:
        """Sign and store a checkpoint over ``tree`` (inside the caller's transaction); None when empty.

        Returns the latest checkpoint unchanged when it already covers ``tree.size`` events. The head
        store is written only after the outermost transaction commits.
        """
        if tree.size == 0:
            return None
        if self.latest is not None and self.latest.size == tree.size:
            return self.latest
        proved = self._extends_retained(store, tree)
        self._hook(store)
        self.proved = proved
        signed = self.notary.sign(self.origin, tree.size, tree.root(), chain)
        checkpoint_id = store.record_checkpoint(self.session_id, tree.size, signed.root.hex(), signed.note)
        store.record_checkpoint_frontier(checkpoint_id, encode_frontier(tree))
        if self.notary.index:
            append_to_index(store, self.notary, self.ledger_id, self.session_id, checkpoint_id, signed)
        self.latest = self.pending = signed
        return signed

    def _extends_retained(self, store: Store, tree: CompactRange) -> dict[int, bytes]:
        """Check, inside the transaction, that ``tree`` extends the session's retained head, so a checkpoint
        never moves the head onto a fork (another copy of the database went on).

        Returns:
            Roots of ``tree`` by size known to match: the latest checkpoint's and the retained head's.

        Raises:
            LedgerIntegrityError: ``rollback`` (the head covers more events than ``tree``) or ``fork`` (its
                root differs from ``tree``'s at its size), naming the seq.
            NoteError: the head file is unreadable.
        """
        known = {} if self.latest is None else {self.latest.size: self.latest.root}
        head = self.notary.heads.load(self.ledger_id, self.session_id)
        if head is None:
            return known
        cp = Checkpoint.parse(parse_note(head.note).text)
        root = known.get(cp.size)
        if root is None:
            root = prefix_root(tree, cp.size, self._frontier(store, cp.size), self._leaf_hashes(store))
        problem = extension_problem("the retained head", "events", cp.size, cp.root, tree.size, root)
        if problem is not None:
            raise _refuse(self.session_id, [problem])
        return {**known, cp.size: cp.root}

    def _frontier(self, store: Store, size: int) -> CompactRange | None:
        record = store.latest_checkpoint(self.session_id, max_size=size)
        blob = store.checkpoint_frontier(record.checkpoint_id) if record and record.size == size else None
        try:
            return decode_frontier(size, blob) if blob is not None else None
        except ValueError:
            return None

    def _leaf_hashes(self, store: Store) -> Callable[[int, int], Iterator[bytes]]:
        def hashes(start: int, stop: int) -> Iterator[bytes]:
            for row in store.read_events(self.session_id, start=start, stop=stop):
                yield leaf_hash(row.event_bytes)

        return hashes

    def seal(self, store: Store) -> None:
        """Mark the session sealed (inside the caller's transaction; undone if it rolls back)."""
        self._hook(store)
        self.sealed = True

    def retain(self) -> None:
        """After commit: write the pending checkpoint to the head store. A failure (the head file is a
        folder or a FIFO, the disk is full, no file locking here) logs one warning line naming the file and
        the OS error, and the commit goes on: a lagging retained head is safe, a raised error would make a
        committed append look failed."""
        if self.pending is None:
            return
        signed, self.pending = self.pending, None
        try:
            self.notary.heads.save(
                self.ledger_id, self.session_id, signed, sealed=self.sealed, roots=self.proved
            )
        except (OSError, FlightlogError) as exc:
            log.warning(
                "could not retain the head of session %s at size %d (it lags until a later commit): %s",
                self.session_id,
                signed.size,
                str(exc).replace("\n", " "),
            )


# ─── resume ───────────────────────────────────────────────────────────────────────────────────


def _refuse(session_id: str, divergences: list[Divergence]) -> LedgerIntegrityError:
    first = divergences[0]
    hint = copy_hint(divergences)
    reason = f"{first.reason}: {first.detail}" if first.detail else first.reason
    return LedgerIntegrityError(
        session_id=session_id,
        seq=first.seq,
        reason=f"{reason}; {hint}" if hint else reason,
        divergences=divergences,
    )


def resume(
    store: Store, session_id: str, notary: Notary, *, full: bool = True, retain: bool = True
) -> Anchor:
    """Verify a session for resuming under ``notary`` and return where to continue.

    Args:
        store: The store.
        session_id: The session (exact id).
        notary: Keys and retained heads.
        full: Verify every row (default). False: the O(log n) + tail path described in the module
            docstring; falls back to full when the session has no checkpoint or no stored frontier.
        retain: When the retained head lags the database's latest (verified) checkpoint (a crash before
            the head file was written), write it now (default: a writer resuming). False for a read: nothing
            is written; the anchor's state keeps it pending (``state.pending``), so the first commit of a
            writer that goes on with it retains it.

    Raises:
        SessionNotFound: no such session.
        LedgerIntegrityError: empty ledger, or any divergence (names the first seq and reason).
    """
    if not full:
        anchor = _cheap_resume(store, session_id, notary, retain=retain)
        if anchor is not None:
            return anchor
    report = audit_session(store, session_id, keyring=notary.keyring, heads=notary.heads)
    if report.events == 0:
        raise LedgerIntegrityError(session_id=session_id, reason="session has no durable ledger to resume")
    if not report.ok:
        raise _refuse(session_id, report.divergences)
    if report.ledger_id is None:
        raise LedgerIntegrityError(session_id=session_id, reason="the database has no ledger id")
    state = SessionNotary(notary, report.ledger_id, session_id, report.latest, report.seal_seq is not None)
    retained, _ = open_retained(notary.heads, report.ledger_id, session_id, notary.keyring)
    _catch_up(state, retained if retained and retained.size == report.retained else None, retain=retain)
    return Anchor(report.events, report.head, report.tree, state)


def _catch_up(state: SessionNotary, retained: SignedCheckpoint | None, *, retain: bool) -> None:
    """Retain the database's latest checkpoint when the head file lags it (e.g. a crash before writing);
    with ``retain`` False only mark it pending (a read writes nothing). ``retained`` is the retained head the
    caller verified against the rows (None when there is none)."""
    if retained is not None:
        state.proved[retained.size] = retained.root
    if state.latest is not None and (retained is None or retained.size < state.latest.size):
        state.pending = state.latest
        if retain:
            state.retain()


def _cheap_resume(store: Store, session_id: str, notary: Notary, *, retain: bool) -> Anchor | None:
    record = store.get_session(session_id)
    ledger_id = store.ledger_id()
    origin = origin_for(ledger_id, session_id)
    latest_record = store.latest_checkpoint(session_id)
    if latest_record is None:
        return None
    where = max(latest_record.size - 1, 0)
    try:
        latest = open_checkpoint(latest_record.body, notary.keyring, origin=origin)
    except NoteError as exc:
        raise _refuse(
            session_id, [Divergence(where, "bad_checkpoint", f"latest checkpoint: {exc.reason}")]
        ) from exc
    tree = _stored_tree(store, latest_record.checkpoint_id, latest.size, latest.root)
    if tree is None:
        return None
    retained, problem = open_retained(notary.heads, ledger_id, session_id, notary.keyring)
    if problem is not None:
        raise _refuse(session_id, [problem])
    stored = record.head_seq + 1
    if retained is not None and not _cheap_consistency(store, session_id, retained, latest, stored):
        return None
    if latest.size > stored:
        raise _refuse(
            session_id,
            [
                Divergence(
                    stored,
                    "truncated",
                    f"a signed checkpoint covers {latest.size} events, the session {stored}",
                )
            ],
        )
    head, tail_last = _cheap_tail(store, session_id, latest, tree)
    if (record.head_seq, record.head_hash, record.merkle_root) != (tree.size - 1, head, tree.root().hex()):
        raise _refuse(
            session_id,
            [
                Divergence(
                    tree.size - 1, "head_mismatch", "the session row's head differs from the stored rows"
                )
            ],
        )
    state = SessionNotary(notary, ledger_id, session_id, latest, seal_payload(tail_last) is not None)
    _catch_up(state, retained, retain=retain)
    return Anchor(tree.size, head, tree, state)


def _stored_tree(store: Store, checkpoint_id: int, size: int, root: bytes) -> CompactRange | None:
    """The compact range kept with a checkpoint, if present and matching its signed root.

    The frontier is a cache, not evidence: a missing or wrong one sends resume to the full path, which
    does not use it and decides from the rows themselves.
    """
    blob = store.checkpoint_frontier(checkpoint_id)
    try:
        tree = decode_frontier(size, blob) if blob is not None else None
    except ValueError:
        return None
    return tree if tree is not None and tree.root() == root else None


def _cheap_consistency(
    store: Store, session_id: str, retained: SignedCheckpoint, latest: SignedCheckpoint, stored: int
) -> bool:
    """Is the retained head a prefix of the latest checkpoint? O(log n) + the events between them.

    Raises on a definite answer against (rollback, stale head, two signed heads of one size that
    differ); returns False when the stored frontiers cannot settle it, so resume verifies in full.
    """
    size = retained.size
    if size > stored:
        raise _refuse(
            session_id,
            [
                Divergence(
                    stored,
                    "rollback",
                    f"the retained head covers {size} events, the database holds {stored}: "
                    "rolled back to an earlier copy or truncated",
                )
            ],
        )
    if size > latest.size:
        raise _refuse(
            session_id,
            [
                Divergence(
                    latest.size,
                    "stale_head",
                    f"the database's latest signed checkpoint covers {latest.size} events, older than the "
                    f"retained head at size {size}: newer checkpoints were removed or an old head replayed",
                )
            ],
        )
    if size == latest.size:
        if retained.root != latest.root:
            raise _refuse(
                session_id, [Divergence(size - 1, "fork", f"two signed heads at size {size} differ")]
            )
        return True
    at = store.latest_checkpoint(session_id, max_size=size)
    tree = _stored_tree(store, at.checkpoint_id, size, retained.root) if at and at.size == size else None
    if tree is None:
        return False
    for row in store.read_events(session_id, start=size, stop=latest.size):
        tree.append(leaf_hash(row.event_bytes))
    return tree.size == latest.size and tree.root() == latest.root


def _cheap_tail(
    store: Store, session_id: str, latest: SignedCheckpoint, tree: CompactRange
) -> tuple[str, StoredEvent]:
    """Verify the last anchored row's chain hash and every row after it, folding them into ``tree``."""
    from ..encoding import decode_stored

    size = latest.size
    last = next(iter(store.read_events(session_id, start=size - 1, stop=size)), None)
    if last is None:
        raise _refuse(
            session_id,
            [Divergence(size - 1, "truncated", f"the latest signed checkpoint covers {size} events")],
        )
    bad: list[Divergence] = []
    if chain_hash(last.prev_hash, last.seq, last.event_bytes) != last.hash or (
        latest.checkpoint.chain is not None and latest.checkpoint.chain != last.hash
    ):
        bad.append(
            Divergence(size - 1, "checkpoint_mismatch", "chain hash differs from the signed checkpoint")
        )
    prev, expected = last.hash, size
    for row in store.read_events(session_id, start=size):
        if row.seq != expected:
            bad.append(Divergence(expected, "gap", f"seqs {expected}..{row.seq - 1} missing"))
        if row.prev_hash != prev:
            bad.append(Divergence(row.seq, "broken_link", "prev_hash does not match the previous row's hash"))
        if chain_hash(row.prev_hash, row.seq, row.event_bytes) != row.hash:
            bad.append(Divergence(row.seq, "hash_mismatch", "stored hash does not match the stored bytes"))
        try:
            decoded = decode_stored(row.event_bytes, seq=row.seq).kind
        except EventDecodeError as exc:
            bad.append(Divergence(row.seq, "undecodable", exc.reason))
        else:
            if decoded != row.kind:
                bad.append(kind_mismatch(row.seq, row.kind, decoded))
        tree.append(leaf_hash(row.event_bytes))
        prev, expected, last = row.hash, row.seq + 1, row
    if bad:
        raise _refuse(session_id, bad)
    return prev, last
