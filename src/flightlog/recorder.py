"""The durable recorder: one writer per session, write-ahead appends, refuse-to-resume on divergence.

Modelled on seed 003 (``Psp9Recorder``):

* ``create`` makes the session row and authority epoch 0.
* ``attach`` rebuilds the in-memory head from the durable rows, recomputing every chain hash and the tree
  head, and refuses (``LedgerIntegrityError`` naming the sequence) on an empty ledger or any divergence.
  It then takes authority: the epoch is bumped, so a writer still holding the old epoch is fenced off.
* ``append`` is write-ahead: stage (encode, hash) → persist durably in one transaction → only then advance
  the in-memory head. A failed write leaves the head unchanged and nothing half-written behind.
* Live subscribers hear of an event only after its durable commit; one that raises does not keep the others
  (nor the later events) from being delivered, and the first failure is then raised from the append, the
  events being durable (never swallowed: a subscriber folding the session, as the kernel's does, would
  otherwise go on without an event the ledger holds).

Thread-safe: one lock serialises appends of a recorder.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any

from .encoding import canonical_bytes, canonical_json, decode_stored
from .errors import EventDecodeError, LedgerIntegrityError, SessionBusy
from .events import Custom, Event, SessionEvent
from .ledger import GENESIS, ChainCheck, CompactRange, VerifyReport, chain_hash, check_head, leaf_hash
from .notarization import SEAL_KIND, Notarizer, SessionSealed, SessionSigner, SignedHead
from .salted import put_personal_artifact
from .store.base import (
    ArtifactRecord,
    EffectRecord,
    NewEvent,
    SessionHead,
    SessionRecord,
    Store,
    StoredEvent,
)
from .store.group import run_all
from .testing.crashpoints import crash_point

__all__ = [
    "DEFAULT_PROJECTORS",
    "EventReads",
    "Projector",
    "Recorder",
    "Subscriber",
    "intent_hash",
    "load_default_projectors",
    "register_projector",
    "verify_session",
]


Subscriber = Callable[[StoredEvent, SessionEvent], None]
"""Called with each durable row and its event, after commit, in append order."""

Projector = Callable[["Recorder", list[tuple[StoredEvent, Event | None]]], None]
"""Called inside the append transaction with the batch just staged (``(stored row, event)`` pairs, ascending
seq); its store writes commit (or roll back) together with the events. Used to keep read models current
(ARCHITECTURE.md: projections). The event is None only for a row whose event the projector declared it does
not read (``register_projector(..., reads=...)``) in an append of encoded events
(:meth:`Recorder.append_encoded`); it has the row (seq, kind, bytes, time) then, and is spared the decode."""

EventReads = Callable[[str, bytes], bool]
"""A projector's declaration of the events it reads: called with a row's ``kind`` and its canonical bytes;
False promises that the projector reads only the row of such an event (its seq, kind and time), never the
event itself, so it may be handed None for it (see :data:`Projector`)."""

_PROJECTORS: list[Projector] = []
_READS: dict[Projector, EventReads] = {}

DEFAULT_PROJECTORS: tuple[str, ...] = ("flightlog.runs.projection:project:reads_event",)
"""The projectors every recorder runs, named ``module:function`` (or ``module:function:reads``, ``reads``
naming the module's :data:`EventReads` for it) and loaded when the first recorder of a process is made
(:func:`load_default_projectors`): the ``runs`` read model (seed 002) must stay current in every append's
transaction whoever appends, so it cannot depend on someone having imported ``flightlog.runs`` first; and
the read model sits above the write path (ARCHITECTURE.md "Layers"), so the write path names it, as an
entry point would, instead of importing it."""

_defaults_loaded = False
_DEFAULTS_LOCK = threading.Lock()


def register_projector(projector: Projector, *, reads: EventReads | None = None) -> None:
    """Run ``projector`` in the transaction of every append of every recorder (idempotent per function).

    Args:
        projector: The projector.
        reads: Which events it reads (:data:`EventReads`); None: every event (it is never handed None).
    """
    if projector not in _PROJECTORS:
        _PROJECTORS.append(projector)
    if reads is not None:
        _READS[projector] = reads


def load_default_projectors() -> None:
    """Register :data:`DEFAULT_PROJECTORS` (once per process; every ``Recorder`` construction calls it).

    Raises:
        ImportError, AttributeError: a default projector cannot be loaded (a broken install): no recorder
            is made, rather than one appending without its read model.
    """
    global _defaults_loaded
    if _defaults_loaded:
        return
    with _DEFAULTS_LOCK:
        if _defaults_loaded:
            return
        for name in DEFAULT_PROJECTORS:
            module_name, function, *reads = name.split(":")
            module = importlib.import_module(module_name)
            register_projector(getattr(module, function), reads=getattr(module, reads[0]) if reads else None)
        _defaults_loaded = True


def intent_hash(intent: Any) -> str:
    """sha256 hex of an effect intent's RFC 8785 bytes (seed 003 ``content_hash``)."""
    return hashlib.sha256(canonical_json(intent)).hexdigest()


def verify_session(store: Store, session_id: str, *, decode: bool = True) -> VerifyReport:
    """Stream-verify a stored session against its chain rule, tree head and recorded head.

    Returns a :class:`~flightlog.ledger.VerifyReport` listing every divergent sequence. A session that a
    writer appends to meanwhile is re-verified against its newer recorded head (see :func:`_verified`).

    Raises:
        SessionNotFound: no such session.
    """
    report, _ = _verified(store, session_id, decode=decode, fold_tree=False)
    return report


_EXTENSIONS = 3
"""How many times a verify follows a session's head as it moves during the read (see :func:`_verified`)."""


def _verified(
    store: Store, session_id: str, *, decode: bool, fold_tree: bool
) -> tuple[VerifyReport, CompactRange | None]:
    """Verify a session's rows against the head and tree head its session row records; returns the report
    and, with ``fold_tree``, the tree the rows were folded into (for a recorder to go on from).

    The session row and the rows come from separate statements, and a writer may commit meanwhile. A row
    and the head that covers it commit together, so the session row is read *after* the rows: it then
    covers every row read, and a head short of the last row read is rows past the head (a real
    divergence). When the head has moved past the last row read, the rows appended since are read and
    verified too, up to 3 times: a head still ahead after a read that brought no new row is a truncated
    ledger (reported), one still ahead while rows keep coming is a live writer (the report covers the rows
    read, whose chain is checked as always). The recorded tree head is compared when the recorded head is
    the last row verified.
    """
    from .errors import Divergence

    store.get_session(session_id)  # SessionNotFound before anything else
    check = ChainCheck(session_id, decode=decode, tree=CompactRange() if fold_tree else None)
    start, before, chasing = 0, -2, True
    for _ in range(_EXTENSIONS + 1):
        for page in store.read_chain(session_id, start=start, kinds=decode):
            check.feed(page)
        record = store.get_session(session_id)
        last = check.next_seq - 1
        if record.head_seq <= last or last == before:
            chasing = False  # caught up, or no row came since the last read: compare with this head
            break
        start, before = last + 1, last
    # else: rows keep coming: a live writer is ahead of us, not a truncated ledger
    report = check.finish()
    last = check.next_seq - 1
    if record.head_seq >= 0 and not chasing:
        check_head(report, last + 1, (record.head_seq, record.head_hash))
    if (
        report.ok
        and record.merkle_root
        and report.events
        and record.head_seq == last
        and record.merkle_root != report.root
    ):
        report.divergences.append(
            Divergence(report.events - 1, "head_mismatch", "recorded tree head differs from the stored rows")
        )
    return report, check.tree if fold_tree else None


class Recorder:
    """Durable, hash-chained writer for one session. Build with :meth:`create` or :meth:`attach`."""

    def __init__(
        self,
        store: Store,
        session_id: str,
        *,
        next_seq: int,
        head: str,
        tree: CompactRange,
        epoch: int,
        notary: SessionSigner | None = None,
    ) -> None:
        load_default_projectors()
        self.store = store
        self._notary = notary
        self.session_id = session_id
        self._next_seq = next_seq
        self._head = head
        self._tree = tree
        self._epoch = epoch
        self._lock = threading.RLock()
        self._depth = 0
        self._queued: list[tuple[StoredEvent, Event]] = []
        self._subscribers: list[Subscriber] = []
        self.projector_state: dict[Projector, Any] = {}
        """What each projector keeps between this recorder's appends, keyed by the projector (the ``runs``
        projection: the row it last wrote and the fold behind it). A cache: a projector must give the same
        rows when its entry is missing, and takes its entry out before using it (a failed or rolled-back
        batch then leaves none behind). Lives and dies with the recorder."""

    # ─── construction ─────────────────────────────────────────────────────────────────────
    @classmethod
    def create(
        cls,
        store: Store,
        *,
        session_id: str | None = None,
        task: str = "",
        source: str = "api",
        parent_session_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        status: str = "running",
        created_at_ms: int | None = None,
        notary: Notarizer | None = None,
    ) -> Recorder:
        """Create a new, empty session and its recorder (authority epoch 0).

        Args:
            notary: Sign checkpoints (a :class:`~flightlog.integrity.notary.Notary`; see :mod:`flightlog.integrity.signing`), seal on ``finish`` and retain
                heads outside the database; None (default) records without signatures.

        Raises:
            AppendConflict: a session with this id exists already.
            LedgerIntegrityError: with a notary, a head of this session id is already retained (the
                database was rolled back to before the session existed).
        """
        sid = session_id or uuid.uuid4().hex
        state = notary.start(store, sid) if notary is not None else None
        store.create_session(
            SessionRecord(
                session_id=sid,
                task=task,
                status=status,
                source=source,
                parent_session_id=parent_session_id,
                metadata=metadata or {},
                created_at_ms=created_at_ms or 0,
                merkle_root=CompactRange().root().hex(),
            )
        )
        return cls(store, sid, next_seq=0, head=GENESIS, tree=CompactRange(), epoch=0, notary=state)

    @classmethod
    def attach(
        cls,
        store: Store,
        session_id: str,
        *,
        take_authority: bool = True,
        notary: Notarizer | None = None,
        full: bool = True,
        retain: bool = True,
    ) -> Recorder:
        """Resume writing an existing session after recomputing its whole chain.

        With ``take_authority=False, retain=False`` it is a verified view for reading: nothing is written
        (no epoch bump, no retained head), and it must not be used to append (it holds no authority: see
        the integrations' read paths, :mod:`flightlog.integrations.openai_agents`).

        Args:
            store: The store holding the session.
            session_id: Its id (exact).
            take_authority: Bump the authority epoch so an older writer is fenced off (default).
            notary: Also verify the signed checkpoints, the seal and the retained head (refusing a
                database older than, or inconsistent with, it), and keep signing; see
                :func:`flightlog.integrity.signing.resume`.
            full: With a notary, False resumes from the latest signed checkpoint in O(log n) + the rows
                after it, without re-reading the rows it covers (a full verify still catches edits to
                them). Default True: every row is recomputed.
            retain: With a notary, False writes no retained head that lags the latest checkpoint (for a
                read; default True: a writer resuming retains it).

        Raises:
            SessionNotFound: no such session.
            LedgerIntegrityError: the ledger is empty, or any row diverges (gap, broken link, hash
                mismatch, undecodable event, truncated or mismatched head); with a notary also a bad
                checkpoint, rollback, stale or forked head; names the first sequence. Only when the
                session's head stood still meanwhile: see ``SessionBusy``.
            SessionBusy: (taking authority) another writer appended while the rows were verified, or
                between the check and the epoch bump: a live process holds the session. The bump is made
                in one transaction with a look at the head, and rolled back when the head is not the one
                verified, so that writer is not fenced off and nothing is written.
            ValueError: ``full=False`` without a notary.
        """
        if notary is None and not full:
            raise ValueError("cheap resume (full=False) needs a notary to check signatures")
        if not take_authority:
            return cls._verified_at(store, session_id, notary, full=full, retain=retain, epoch=None)
        before = store.get_session(session_id).head_seq
        try:
            recorder = cls._verified_at(store, session_id, notary, full=full, retain=retain, epoch=-1)
        except LedgerIntegrityError as exc:
            moved = store.get_session(session_id).head_seq
            if moved != before:  # a live writer appended while the rows were read: not tampering
                raise SessionBusy(session_id=session_id, seq=moved) from exc
            raise
        # Take authority only over the head just verified, in one transaction: a writer that appended since
        # keeps the session (the bump rolls back), one that appends later is fenced off by the new epoch.
        with store.transaction():
            epoch = store.bump_authority_epoch(session_id)
            now = store.get_session(session_id)
            if (now.head_seq, now.head_hash) != (recorder._next_seq - 1, recorder._head):
                raise SessionBusy(session_id=session_id, seq=now.head_seq)
        recorder._epoch = epoch
        return recorder

    @classmethod
    def _verified_at(
        cls,
        store: Store,
        session_id: str,
        notary: Notarizer | None,
        *,
        full: bool,
        retain: bool,
        epoch: int | None,
    ) -> Recorder:
        """A recorder at the verified head of the session (:meth:`attach`'s checks); its epoch is ``epoch``,
        or the session's current one when None (a read)."""
        if notary is not None:
            anchor = notary.resume(store, session_id, full=full, retain=retain)
            return cls(
                store,
                session_id,
                next_seq=anchor.size,
                head=anchor.head,
                tree=anchor.tree,
                epoch=store.authority_epoch(session_id) if epoch is None else epoch,
                notary=anchor.state,
            )
        report, folded = _verified(store, session_id, decode=True, fold_tree=True)
        assert folded is not None
        tree = folded
        if report.events == 0:
            raise LedgerIntegrityError(
                session_id=session_id, reason="session has no durable ledger to resume"
            )
        if not report.ok:
            first = report.divergences[0]
            raise LedgerIntegrityError(
                session_id=session_id,
                seq=first.seq,
                reason=f"{first.reason}: {first.detail}" if first.detail else first.reason,
                divergences=report.divergences,
            )
        current = store.authority_epoch(session_id) if epoch is None else epoch
        return cls(store, session_id, next_seq=report.events, head=report.head, tree=tree, epoch=current)

    # ─── state ────────────────────────────────────────────────────────────────────────────
    @property
    def head(self) -> str:
        """Chain hash of the last durable event (``"GENESIS"`` when empty)."""
        return self._head

    @property
    def next_seq(self) -> int:
        """The seq the next append will take (= number of durable events)."""
        return self._next_seq

    @property
    def epoch(self) -> int:
        """The authority epoch (fencing token) this recorder writes under."""
        return self._epoch

    @property
    def root(self) -> str:
        """RFC 9162 tree head over all durable events, hex."""
        return self._tree.root().hex()

    # ─── appends ──────────────────────────────────────────────────────────────────────────
    def append(self, event: Event) -> StoredEvent:
        """Durably append one event (write-ahead) and return its stored row.

        Raises:
            EncodingError: the event cannot be canonically encoded (names the field); nothing written.
            AppendConflict: another writer took this seq; nothing written, head unchanged.
            StaleWriter: the session's authority epoch moved on (``abort`` or another attach).
        """
        return self._append_rows(_Batch([event.kind], None, (event,)), None)[0]

    def append_many(
        self,
        events: Sequence[Event],
        *,
        recorded_at_ms: Sequence[int] | None = None,
        encoded: Sequence[bytes] | None = None,
    ) -> list[StoredEvent]:
        """Durably append several events in one transaction (all or none), e.g. one turn's events.

        ``recorded_at_ms`` (one epoch-ms time per event) stamps the rows with their source's own times, for
        an imported transcript (:meth:`Store.append_events`); None stamps them with the time of the append.
        ``encoded`` (one per event) are the events' stored bytes when the caller holds them already: each
        must be ``canonical_bytes(events[i])``; None encodes the events. (A caller holding the bytes and
        not the events appends them with :meth:`append_encoded`, which decodes only what is read.)

        Raises:
            ValueError: ``encoded`` does not have one item per event (nothing written).
        """
        if encoded is not None and len(encoded) != len(events):
            raise ValueError(f"encoded has {len(encoded)} items for {len(events)} events")
        return self._append_rows(_Batch([e.kind for e in events], encoded, events), recorded_at_ms)

    def append_encoded(
        self, rows: Sequence[tuple[str, bytes]], *, recorded_at_ms: Sequence[int] | None = None
    ) -> list[StoredEvent]:
        """Durably append events given as their stored form, in one transaction (all or none).

        For a caller that holds each event's ``(kind, canonical bytes)`` and not the event (an importer's
        spool: the bytes are ``canonical_bytes`` of an event of that kind, made in this process): the bytes
        are recorded as they are, and decoded (:func:`~flightlog.encoding.decode_stored`) only for what
        reads the events: every event for the subscribers and for a projector without a ``reads``
        declaration, and for a projector with one, the events it says it reads (:data:`EventReads`).
        ``recorded_at_ms`` as for :meth:`append_many`.

        Each pair must agree before anything is written: the bytes' top-level ``"kind"`` is the given kind
        (what ``verify`` would otherwise flag afterwards as ``kind_mismatch``). The check decodes no event:
        a byte search for the top-level ``"kind":"<kind>"`` (:func:`_kind_agrees`); bytes where that is not
        sure (a nested ``"kind"`` before it or beside it, such as in a ``custom`` payload) are parsed as JSON.

        Raises:
            EventDecodeError: a pair's bytes are an event of another kind, or no JSON object (names the seq
                it would have taken, the kind given and what the bytes say); an event that is read is not a
                valid event (names its seq). Nothing written.
            AppendConflict, StaleWriter, SessionSealed: as :meth:`append_many`.
        """
        for index, (kind, data) in enumerate(rows):
            if not _kind_agrees(kind, data):
                _check_kind(kind, data, self._next_seq + index)
        return self._append_rows(
            _Batch([kind for kind, _ in rows], [data for _, data in rows], None), recorded_at_ms
        )

    def _append_rows(self, batch: _Batch, recorded_at_ms: Sequence[int] | None) -> list[StoredEvent]:
        """Stage, write and project ``batch`` (see :meth:`append_many`); the head moves only after the write."""
        if not batch.kinds:
            return []
        if self._notary is not None and self._notary.sealed:
            raise SessionSealed(session_id=self.session_id)
        with self.atomic():
            staged, tree = self._stage(batch)
            head = SessionHead(staged[-1].seq, staged[-1].hash, tree.root().hex())
            stamp = self.store.append_events(
                self.session_id,
                staged,
                head,
                epoch=self._epoch,
                recorded_at_ms=recorded_at_ms,
                deferrable=True,
            )
            crash_point("append.written")  # test-only fault injection (flightlog.testing.crashpoints)
            self._next_seq = head.seq + 1
            self._head = head.hash
            self._tree = tree
            sid = self.session_id
            if recorded_at_ms is None:
                stored = [
                    StoredEvent(sid, r.seq, r.kind, r.event_bytes, r.prev_hash, r.hash, stamp) for r in staged
                ]
            else:
                stored = [
                    StoredEvent(sid, r.seq, r.kind, r.event_bytes, r.prev_hash, r.hash, at)
                    for r, at in zip(staged, recorded_at_ms, strict=True)
                ]
            for projector in _PROJECTORS:
                projector(self, batch.pairs(stored, _READS.get(projector)))
            if self._subscribers:  # queued for them until the commit; nobody listening: nothing held
                self._queued.extend(batch.full(stored))
            if self._notary is not None and self._notary.due(self._next_seq):
                self._notary.checkpoint(self.store, self._tree, self._head)
        return stored

    def atomic(self) -> AbstractContextManager[None]:
        """Group appends and other store writes into one transaction.

        On any exception the block's writes roll back and the in-memory head returns to where it was.
        Subscribers hear of events only after the outermost *store* transaction commits, and the head is
        also restored if an enclosing transaction (``store.transaction()`` around this block) rolls back.

        Lock order: the store's transaction first, then this recorder's lock, and the lock is not held
        while the transaction commits (with group commit that may mean waiting for other threads' blocks):
        a thread that holds the store and appends to this recorder never waits on one that holds this
        recorder and waits for the store. Heads only ever move back on a rollback, and each block's commit
        notifies its own events, so two blocks of this recorder in one commit group settle correctly.

        Returns a context manager for one ``with`` (a class rather than a generator: every append enters
        one).
        """
        return _Atomic(self)

    def _rewind(self, saved: tuple[int, str, CompactRange]) -> None:
        """Move the head back to ``saved`` (lock held); never forward: when two blocks of one commit group
        roll back, whichever callback runs last, the head ends at the earlier block's start."""
        if saved[0] <= self._next_seq:
            self._next_seq, self._head, self._tree = saved

    def _restore(self, saved: tuple[int, str, CompactRange]) -> None:
        with self._lock:
            self._rewind(saved)
            self._queued = [item for item in self._queued if item[0].seq < saved[0]]

    def _flush(self, end: int, *, appended: bool) -> None:
        """Notify the events committed by a block: those queued with a seq below ``end`` (``appended``:
        the block appended events, queued or not: nothing is queued when nobody subscribes).

        An empty queue is read without the lock: what this block must notify was queued before its
        commit, so it is there by now unless taken already (by an earlier block's flush or a rollback)."""
        done: list[tuple[StoredEvent, Event]] = []
        if self._queued:  # nobody subscribes: nothing is ever queued
            with self._lock:
                queued = self._queued
                done = [item for item in queued if item[0].seq < end]
                if done:  # nothing done: nothing to split
                    self._queued = [item for item in queued if item[0].seq >= end]
        if appended:
            crash_point("append.committed")  # test-only fault injection (flightlog.testing.crashpoints)
        if done:
            self._notify(done)

    def _stage(self, batch: _Batch) -> tuple[list[NewEvent], CompactRange]:
        tree = self._tree.copy()
        prev, seq = self._head, self._next_seq
        staged: list[NewEvent] = []
        for kind, data in zip(batch.kinds, batch.encoded(), strict=True):
            digest = chain_hash(prev, seq, data)
            staged.append(NewEvent(seq, kind, data, prev, digest))
            tree.append(leaf_hash(data))
            prev, seq = digest, seq + 1
        return staged, tree

    def record_custom(self, kind: str, payload: Any) -> StoredEvent:
        """Append a ``Custom`` event (seed 003 ``record_custom``)."""
        return self.append(Custom(custom_kind=kind, payload=payload))

    def checkpoint(self) -> SignedHead | None:
        """Sign a checkpoint over every event now (the kernel calls this in the transaction that records a side
        effect's intent, so the intent is signed before the effect runs).

        Returns the latest checkpoint unchanged when it already covers every event; None without a
        notary or with no events. See :mod:`flightlog.integrity.checkpoints` for the format, :mod:`flightlog.integrity.signing` for the cadence.
        """
        if self._notary is None:
            return None
        with self.atomic():
            return self._notary.checkpoint(self.store, self._tree, self._head)

    def finish(self, status: str) -> None:
        """Set the session's status (``completed``, ``failed``, ``cancelled``...).

        With a notary the session is also sealed, in the same transaction: a ``Custom`` event
        ``session_sealed`` (payload: ``size`` = its seq, ``root`` over the events before it, ``status``)
        and a signed checkpoint covering it; later appends raise ``SessionSealed``. Without a notary (or
        when already sealed) only the status changes, which is not a ledger row.
        """
        if self._notary is None or self._notary.sealed:
            self.store.set_session_status(self.session_id, status)
            return
        with self.atomic():
            payload = {"size": self._next_seq, "root": self.root, "status": status}
            self.append(Custom(custom_kind=SEAL_KIND, payload=payload))
            self._notary.checkpoint(self.store, self._tree, self._head)
            self._notary.seal(self.store)
            self.store.set_session_status(self.session_id, status)

    # ─── live subscribers ─────────────────────────────────────────────────────────────────
    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        """Call ``subscriber`` after each durable append; returns a function that unsubscribes.

        An exception ``subscriber`` raises is raised from the append whose commit delivered the event (after
        every other subscriber heard of it; the event stays durable), never swallowed."""
        self._subscribers.append(subscriber)

        def unsubscribe() -> None:
            if subscriber in self._subscribers:
                self._subscribers.remove(subscriber)

        return unsubscribe

    def _notify(self, queued: Iterable[tuple[StoredEvent, Event]]) -> None:
        """Deliver each committed event to every subscriber, in order, even after one raised; then raise the
        first failure, noting the session and seq it failed on, that the events are durable, and each later
        failure (:func:`flightlog.store.group.run_all`, as for commit callbacks)."""
        run_all(
            (
                (
                    functools.partial(subscriber, row, event),  # type: ignore[arg-type]
                    f"subscriber {subscriber!r} failed on {self.session_id} seq {row.seq}",
                )
                for row, event in queued
                for subscriber in list(self._subscribers)
            ),
            first_note="the event is durable (committed before subscribers hear of it)",
        )

    # ─── artifacts ────────────────────────────────────────────────────────────────────────
    def put_artifact(self, content: bytes, media_type: str = "application/octet-stream") -> str:
        """Store bytes content-addressed; returns the handle ``sha256:<hex>`` to put in events."""
        record: ArtifactRecord = self.store.put_artifact(content, media_type)
        return record.handle

    def get_artifact(self, handle: str) -> bytes | None:
        """The bytes behind a handle (``sha256:<hex>`` or bare hex), or None.

        Raises:
            ArtifactIntegrityError: the stored bytes do not hash to the handle (altered in the store).
        """
        return self.store.get_artifact(handle)

    # ─── external effects (seed 003) ──────────────────────────────────────────────────────
    def record_intent(self, key: str, intent: Any, *, holder: dict[str, Any] | None = None) -> bool:
        """Durably record an external-effect intent before the effect runs, then ledger it.

        ``holder`` (the identity of the process about to run the effect,
        :meth:`flightlog.runs.host.ProcessId.to_wire`) is ledgered beside the intent in the event's payload
        when given; it is not part of the intent (nor of its hash, nor of the row), so the same call
        re-recorded by another process is the same intent.

        Returns True when new, False when this exact intent was already recorded (a no-op).

        Raises:
            EffectConflict: ``key`` was recorded with different intent bytes.
            StaleWriter: another writer took this session's authority (checked by the store before the
                intent row is written: a fenced-off recorder records nothing).
        """
        digest = intent_hash(intent)
        with self.atomic():
            created = self.store.record_intent(
                self.session_id, key, digest, canonical_json(intent).decode(), epoch=self._epoch
            )
            if created:
                payload: dict[str, Any] = {"key": key, "intent_hash": digest, "intent": intent}
                if holder is not None:
                    payload["holder"] = holder
                self.record_custom("external_effect_intent", payload)
        return created

    def complete_effect(self, key: str, result: Any) -> bool:
        """Record an effect's completion exactly once, then ledger it. False when already completed.

        Raises:
            EffectConflict: ``key`` was completed with a different result.
            LookupError: no intent was recorded for ``key``.
            StaleWriter: another writer took this session's authority (checked by the store before the
                row is touched: a fenced-off recorder never completes an effect, nor learns its result).
        """
        text = canonical_json(result).decode()
        with self.atomic():
            done = self.store.complete_effect(self.session_id, key, text, epoch=self._epoch)
            if done:
                self.record_custom("external_effect_completed", {"key": key, "result": result})
        return done

    def effect(self, key: str) -> EffectRecord | None:
        """The effect record for ``key`` in this session, or None.

        The row is not hashed: what an effect did is what the ledger's ``external_effect_intent`` /
        ``external_effect_completed`` events record. The kernel checks the row against them before deciding
        anything (:func:`flightlog.integrity.effects.effect_problem`), and ``verify``/``audit`` compare every
        row (``effect_mismatch``).
        """
        return self.store.get_effect(self.session_id, key)

    def pending_effects(self) -> list[EffectRecord]:
        """This session's intents without completion: *in doubt* after a crash, never silently re-run (rows,
        unhashed: see :meth:`effect`)."""
        return self.store.pending_effects(self.session_id)

    def record_grant_policy(
        self,
        policy_id: str,
        policy: Any,
        *,
        signed: bool = False,
        digest: str | None = None,
        durable: str | None = None,
        key: str | None = None,
    ) -> None:
        """Store a grant policy durably and ledger it as ``grant_policy`` (seed 003).

        Args:
            policy_id: The policy's id.
            policy: The policy (JSON-ready), as ledgered.
            signed: Whether it came signed.
            digest: ``sha256:<hex>`` of the policy's signed payload, ledgered when given
                (:func:`flightlog.integrity.grants.record_grant` passes it).
            durable: The text kept in ``grant_policies`` (default: the policy's JSON; a signed policy
                keeps its DSSE envelope, as seed 003 keeps the ``SignedGrantPolicy``).
            key: The verifier key that signed it, ledgered when given.
        """
        payload: dict[str, Any] = {"policy_id": policy_id, "policy": policy, "signed": signed}
        if digest is not None:
            payload["digest"] = digest
        if key is not None:
            payload["key"] = key
        with self.atomic():
            text = durable if durable is not None else json.dumps(policy, sort_keys=True)
            self.store.record_grant_policy(self.session_id, policy_id, text)
            self.record_custom("grant_policy", payload)

    def put_personal_artifact(self, content: bytes, media_type: str = "application/octet-stream") -> str:
        """Store personal data erasably for this session; returns ``salted:sha256:<hex>`` to put in events.

        See :mod:`flightlog.salted` and :mod:`flightlog.integrity.erasure`: the content and its salt never enter the ledger, and
        ``flightlog erase`` removes both without touching a ledger row.
        """
        return put_personal_artifact(self.store, content, media_type, session_id=self.session_id)


class _Atomic:
    """One block of :meth:`Recorder.atomic` (enter once): the store's transaction, then the recorder's
    lock; the outermost block of the recorder registers what its commit (notify its events) and its
    rollback (restore the head) do; any exception inside rewinds the head and drops what it queued."""

    __slots__ = ("_end", "_outer", "_queued_before", "_recorder", "_saved", "_transaction")

    def __init__(self, recorder: Recorder) -> None:
        self._recorder = recorder
        self._transaction = recorder.store.transaction()

    def __enter__(self) -> None:
        recorder = self._recorder
        transaction = self._transaction
        transaction.__enter__()
        try:
            recorder._lock.acquire()
        except BaseException as exc:
            transaction.__exit__(type(exc), exc, exc.__traceback__)
            raise
        self._saved = saved = (recorder._next_seq, recorder._head, recorder._tree)
        self._queued_before = len(recorder._queued)
        recorder._depth += 1
        self._outer = recorder._depth == 1
        if self._outer:
            self._end = saved[0]  # the block's end seq, set when it ends
            store = recorder.store
            try:
                store.call_after_commit(self._committed)
                store.call_after_rollback(self._rolled_back)
            except BaseException as exc:
                self.__exit__(type(exc), exc, exc.__traceback__)
                raise

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        recorder = self._recorder
        try:
            try:
                if exc is None:
                    if self._outer:
                        self._end = recorder._next_seq
                else:
                    recorder._rewind(self._saved)
                    del recorder._queued[self._queued_before :]
            finally:
                recorder._depth -= 1
                recorder._lock.release()
        except BaseException as failed:
            if not self._transaction.__exit__(type(failed), failed, failed.__traceback__):
                raise
            return True
        return bool(self._transaction.__exit__(kind, exc, tb))

    def _committed(self) -> None:
        self._recorder._flush(self._end, appended=self._end > self._saved[0])

    def _rolled_back(self) -> None:
        self._recorder._restore(self._saved)


_KIND_KEY = b'"kind":"'
"""How canonical bytes (RFC 8785) spell the start of a ``"kind"`` member: a ``"`` inside a string is
escaped, so these bytes occur only where some object has a member ``kind`` with a string value."""


_KIND_HEADS: dict[str, bytes] = {}
"""``{"kind":"<kind>"`` as canonical bytes, per kind seen (at most :data:`_KIND_HEADS_MAX` kept): how the
bytes of an event start when no key sorts before ``kind`` (most kinds)."""
_KIND_HEADS_MAX = 256


def _kind_agrees(kind: str, data: bytes) -> bool:
    """True when ``data`` (canonical bytes) surely has the top-level member ``"kind":"<kind>"``, by byte
    search; False when that is not sure (then :func:`_check_kind` parses it). Sure when it is a member of
    the top-level object: the bytes start with it (``{"kind":...``, most kinds sort no key before
    ``kind``), or no ``{``/``[`` comes before it (scalar members only, such as ``custom_kind``); or when it
    is the only ``"kind":"`` in the bytes."""
    head = _KIND_HEADS.get(kind)
    if head is None:
        head = b"{" + _KIND_KEY + kind.encode() + b'"'
        if len(_KIND_HEADS) < _KIND_HEADS_MAX:
            _KIND_HEADS[kind] = head
    if data.startswith(head):
        return True
    at = data.find(head[1:])
    if at < 1 or data[0] != 0x7B:  # "{"
        return False
    if data.find(b"{", 1, at) < 0 and data.find(b"[", 1, at) < 0:  # no nested value before it
        return True
    return data.count(_KIND_KEY) == 1


def _check_kind(kind: str, data: bytes, seq: int) -> None:
    """The slow half of :meth:`Recorder.append_encoded`'s check: parse ``data`` and compare its top-level
    ``kind`` with ``kind``.

    Raises:
        EventDecodeError: they differ, or ``data`` is no JSON object (names ``seq``, both kinds).
    """
    try:
        value = json.loads(data)
    except ValueError as exc:
        raise EventDecodeError(
            seq=seq, reason=f"kind {kind!r} given with bytes that are not JSON: {exc}"
        ) from None
    said = value.get("kind") if isinstance(value, dict) else None
    if said != kind:
        what = f"a {said!r} event" if isinstance(said, str) else "no event (no top-level string kind)"
        raise EventDecodeError(seq=seq, reason=f"kind {kind!r} given, but the bytes are {what}")


class _Batch:
    """One append's events: their kinds, their bytes (given, or encoded when first asked for), and the
    events themselves (given, or decoded from the bytes when, and only when, something reads them)."""

    def __init__(
        self, kinds: list[str], encoded: Sequence[bytes] | None, events: Sequence[Event] | None
    ) -> None:
        self.kinds = kinds
        self._encoded = encoded
        self._events: list[Event | None] = list(events) if events is not None else [None] * len(kinds)
        self._given: Sequence[Event] | None = events

    def encoded(self) -> Sequence[bytes]:
        """Each event's canonical bytes (``canonical_bytes`` of each given event, when none were given).

        Raises:
            EncodingError: an event cannot be canonically encoded (names the field).
        """
        if self._encoded is None:
            self._encoded = [canonical_bytes(event) for event in self._events if event is not None]
        return self._encoded

    def _event(self, index: int, row: StoredEvent) -> Event:
        event = self._events[index]
        if event is None:
            event = self._events[index] = decode_stored(row.event_bytes, seq=row.seq)
        return event

    def full(self, stored: list[StoredEvent]) -> list[tuple[StoredEvent, Event]]:
        """Every row with its event."""
        if self._given is not None:
            return list(zip(stored, self._given, strict=True))
        return [(row, self._event(i, row)) for i, row in enumerate(stored)]

    def pairs(
        self, stored: list[StoredEvent], reads: EventReads | None
    ) -> list[tuple[StoredEvent, Event | None]]:
        """Every row with its event, or None where the events were not given and ``reads`` says the
        projector does not read it."""
        if reads is None or self._given is not None:
            return list(self.full(stored))
        return [
            (row, self._event(i, row) if reads(row.kind, row.event_bytes) else None)
            for i, row in enumerate(stored)
        ]
