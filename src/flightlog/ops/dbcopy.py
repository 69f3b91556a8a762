"""``flightlog db copy SRC DST``: move a whole ledger from one store to another, verifying on arrival.

A copy is the same ledger in another store, not a new one: every signed checkpoint names its ledger in its
origin (``flightlog.local/<ledger id>/<session>``, :func:`flightlog.integrity.checkpoints.origin_for`), and the
retained heads outside the database are filed under that id. So:

* **Ledger id.** A destination that holds no session (and no index leaf) yet takes the source's ledger id
  (:meth:`~flightlog.store.base.Store.adopt_ledger_id`). A destination that already holds sessions of
  another ledger is refused (``StoreError``, nothing written): merging two ledgers would leave every copied
  checkpoint's signed origin naming a ledger the destination is not, and re-signing them would need the
  log key and would forge history.
* **Per session:** the session row (task, status, source, parent, metadata, creation time); the events
  (stored bytes, chain hashes and ``recorded_at_ms`` verbatim, streamed in batches; the chain and the
  RFC 9162 tree are recomputed from the source rows as they stream, so a source row that does not link is
  refused before it is written); grant policies; external effects (intent, then completion when
  completed), each row checked first against the effect events of the rows just verified
  (:func:`~flightlog.integrity.effects.table_divergences`): a row the source's ledger does not record or
  contradicts refuses the copy naming its key (:class:`CopyNotVerified`, the source's row at fault), and
  so, for a whole copy, do rows under a session id the source has no session of; signed checkpoints with their frontiers; witness cosignatures of its origin; import
  records; the artifacts and salted (erasable) artifacts its events reference, with erasure records, and
  every artifact those artifacts link to, transitively, by a link format declared in
  :mod:`flightlog.store.links` (a LangGraph thread's content-linked list deltas). A linked artifact the
  source does not hold refuses the copy (:class:`CopyNotVerified`), and so does one a LangGraph record
  names (the saver stores it with the record). Any other ``sha256:<hex>`` an event quotes that names no
  artifact of the source is copied as the event holds it (event text may quote a digest that was never
  an artifact: an image's, a file's the agent hashed), and reported: one note per such session in
  :attr:`CopyReport.notes` (how many, the first by seq), printed by ``flightlog db copy``.
* **The index log** (when every source session is copied): its leaves in order (their ``checkpoint_id``
  column mapped to the destination's checkpoint ids), its signed checkpoints (frontiers recomputed from
  the leaves) and the cosignatures of its origin.
* **Long-term memory** (a whole copy: the source retires, so its memories move with the ledger): every
  record of :mod:`flightlog.store.memory` (its ``record_json`` verbatim, re-indexed for search in the
  destination) and its salted text, unless a session's copy carried it already. Read back at the end:
  each record must equal the source's byte for byte, each text and salt too, and each text must hash to
  its handle in the source; a destination already holding memories is refused (``StoreError``). A
  partial copy leaves them in the source, which stays live.
* **Verified on arrival** with the check ``flightlog verify --all`` makes (:func:`audit_session` per
  session: chain, tree, signed checkpoints against the trusted keys, seal, retained head, witness
  cosignatures, salted artifacts; then every artifact copied for the session, and every one they link to,
  read back from the destination and hashed; then :func:`~flightlog.integrity.indexlog.audit_index` and
  the sessions the index log or a retained head knows but the copy lacks), inside the destination
  transaction.

Everything happens in **one destination transaction**: a refusal or a copy that does not verify
(:class:`CopyNotVerified`) leaves the destination as it was. Not copied: authority epochs (a new database
starts every session at epoch 0; fencing tokens are per database), fleet leases and live heartbeats. Effect
and index-leaf timestamps are the copy's. The destination's ``runs`` projection is rebuilt from its ledgers
after the commit (the copied rows bypass the recorder's projector).

Copying a subset (``sessions=``) copies no index log (it covers the whole ledger) and checks only those
sessions.

**One live store per ledger** (:mod:`flightlog.integrity.retirement`). Two writable stores of one ledger would make
each other look rolled back (they share the retained heads). So a copy retires one of them, in the same
transactions, with a record signed by the log key that pins what the retired store holds:

* a whole copy *moves* the ledger: the source is retired (``moved`` to the destination). The copy runs
  inside a source transaction that keeps every other writer out (SQLite ``BEGIN IMMEDIATE``; PostgreSQL
  SHARE locks on the ledger tables, :meth:`~flightlog.store.base.Store.hold_writers`), so nothing is
  written to the source between what is copied and the retirement; the destination commits first, then
  the source. The source must be opened writable; a retired source is refused (copy from where it went).
* a partial copy leaves the source live and retires the destination (``partial`` copy of the source).

A retired store refuses writes (``LedgerRetired``, naming the live store) and ``verify`` reports heads that
went on in the live store as ``stale_copy``, not ``rollback`` / ``missing``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ArtifactIntegrityError, Divergence, FlightlogError, LedgerIntegrityError, StoreError
from ..integrity.checkpoints import encode_frontier, origin_for
from ..integrity.effects import EffectFold, table_divergences
from ..integrity.heads import HeadStore, WitnessedHead
from ..integrity.indexlog import audit_index, index_origin
from ..integrity.keys import Keyring, load_keyring, now_ms
from ..integrity.notary import Notary
from ..integrity.retirement import Pin, Retirement, sign_retirement
from ..integrity.verify import audit_session, missing_sessions
from ..integrity.witness_client import TrustedWitness, load_witnesses, witnessed_heads
from ..ledger import GENESIS, CompactRange, leaf_hash, link_problem
from ..salted import SALTED_PREFIX
from ..store.base import (
    EffectRecord,
    ImportRecord,
    SessionHead,
    SessionRecord,
    Store,
    StoredEvent,
    retired_error,
)
from ..store.links import LINKING_PREFIX, LinkWalk, artifact_links, linking_refs
from ..store.memory import MemoryIndex, row_of
from ..store.sqlite import SqliteStore

__all__ = ["CopyNotVerified", "CopyReport", "copy_session", "copy_store"]

_HANDLE = re.compile(rb"(salted:)?sha256:([0-9a-f]{64})")
_BATCH = 512
_INDEX_ID = "(index log)"


@dataclass
class CopyReport:
    """What a copy moved and checked.

    Attributes:
        sessions: Session ids copied, in order.
        events: Event rows copied.
        artifacts: Artifacts copied (plain + salted).
        effects: External effects copied.
        checkpoints: Session checkpoints copied.
        ledger_id: The ledger id both stores now share (None: the source has none).
        index_leaves: Index log leaves copied.
        index_checkpoints: Signed index checkpoints copied.
        cosignatures: Witness cosignatures copied (sessions and index log).
        verified: Sessions that passed the full check on arrival.
        index_verified: The index log passed its check on arrival (False when it was not copied).
        notes: What the check could not look at (an unreachable witness), and per session the ``sha256:``
            digests its events quote that name no artifact of the source, one line each.
        retired: Which store the copy retired (``source`` after a whole copy, ``destination`` after a
            partial one; None when the ledger has no id to name in a record).
        retirement: How (``moved to <url> at <time>``, ``a partial copy of <url> made at <time>``).
        memories: Long-term memory records copied (a whole copy only), each read back byte for byte.
        needed: Per session, the plain artifacts (sha256 hex) its events name that the copy carried, where
            the arrival check starts following artifact links.
    """

    sessions: list[str] = field(default_factory=list)
    events: int = 0
    artifacts: int = 0
    effects: int = 0
    checkpoints: int = 0
    ledger_id: str | None = None
    index_leaves: int = 0
    index_checkpoints: int = 0
    cosignatures: int = 0
    verified: int = 0
    index_verified: bool = False
    notes: list[str] = field(default_factory=list)
    retired: str | None = None
    retirement: str | None = None
    memories: int = 0
    needed: dict[str, list[str]] = field(default_factory=dict, repr=False)


class CopyNotVerified(LedgerIntegrityError):
    """The copy (or the source it was taken from) does not pass ``verify``; nothing was written."""

    def __init__(
        self,
        *,
        session_id: str,
        reason: str,
        seq: int | None = None,
        divergences: Sequence[Divergence] = (),
    ) -> None:
        where = f" at {'leaf' if session_id == _INDEX_ID else 'sequence'} {seq}" if seq is not None else ""
        more = f" (+{len(divergences) - 1} more divergent)" if len(divergences) > 1 else ""
        FlightlogError.__init__(
            self,
            f"db copy: {session_id} does not verify{where}: {reason}{more}; nothing copied",
            session_id=session_id,
            seq=seq,
            reason=reason,
            divergences=tuple(Divergence(*d) for d in divergences),
        )


@dataclass
class _Checks:
    """What the arrival check needs: trusted log keys, retained heads, trusted witnesses."""

    keyring: Keyring
    heads: HeadStore | None
    witnesses: list[TrustedWitness]
    online: bool

    def witnessed(self, store: Store, origin: str | None, report: CopyReport) -> list[WitnessedHead]:
        if not self.witnesses or origin is None:
            return []
        found, notes = witnessed_heads(
            store, origin, keyring=self.keyring, witnesses=self.witnesses, online=self.online
        )
        report.notes.extend(notes)
        return found


def copy_store(
    src: Store,
    dst: Store,
    *,
    sessions: Sequence[str] | None = None,
    on_session: Callable[[str, int], None] | None = None,
    keyring: Keyring | None = None,
    heads: HeadStore | None = None,
    witnesses: Sequence[TrustedWitness] | None = None,
    online: bool = False,
    notary: Notary | None = None,
) -> CopyReport:
    """Copy the ledger (every session by default) from ``src`` to ``dst``, retiring one; see the module docs.

    Args:
        src: The source store (read only).
        dst: The destination store (writable).
        sessions: Session ids to copy (default: every session, oldest first, and the index log).
        on_session: Called after each session is staged with its id and event count (progress; the
            copy commits only once everything verified).
        keyring: Trusted log keys for the arrival check (default :func:`~flightlog.integrity.keys.load_keyring`).
        heads: Retained heads (default :meth:`HeadStore.default`).
        witnesses: Trusted witnesses (default :func:`~flightlog.integrity.witness_client.load_witnesses`).
        online: Also ask witnesses with a URL for their latest heads (default: stored cosignatures only).
        notary: Signs the retirement record (default :meth:`Notary.from_env`, the user's log key).

    Raises:
        StoreError: the destination already has one of the sessions, holds sessions of another ledger or an
            index log of its own, or cannot keep what the source has; the source is retired already
            (nothing written).
        ReadOnlyStore: a whole copy from a source opened read-only (it is retired by the copy).
        CopyNotVerified: a source session or the copy does not pass the ``verify --all`` check (nothing
            written).
        KeyManifestError: the log key cannot sign the retirement record now (nothing written).
    """
    checks = _Checks(
        load_keyring() if keyring is None else keyring,
        HeadStore.default() if heads is None else heads,
        load_witnesses() if witnesses is None else list(witnesses),
        online,
    )
    _refuse_retired(src)
    every = [r.session_id for r in src.list_sessions()]
    ids = list(sessions) if sessions is not None else every
    whole = set(ids) >= set(every)
    report = CopyReport()
    tables = _tables(dst)
    with src.transaction() if whole else nullcontext():
        if whole:  # the source is retired by this copy: no other writer gets in until it is
            src.hold_writers()
            _refuse_retired(src)
            every = [r.session_id for r in src.list_sessions()]
            ids = list(sessions) if sessions is not None else every
            whole = set(ids) >= set(every)
        with dst.transaction():
            if whole:  # the source retires: rows no session of it holds would be left behind unnamed
                _refuse_stray_effects(src)
            existing = [sid for sid in ids if _exists(dst, sid)]
            if existing:
                more = f" (+{len(existing) - 1} more)" if len(existing) > 1 else ""
                raise StoreError(f"{dst.url} already has session {existing[0]}{more}; refusing to overwrite")
            report.ledger_id = _adopt_ledger(src, dst)
            index = whole and report.ledger_id is not None and _index_wanted(src, dst)
            pins: dict[str, Pin] = {}
            for sid in ids:
                pins[sid] = _copy_one(src, dst, tables, sid, report)
                if on_session is not None:
                    on_session(sid, src.get_session(sid).events)
            index_pin = Pin(0, CompactRange().root())
            if index:
                assert report.ledger_id is not None
                index_pin = _copy_index(src, dst, report.ledger_id, report)
            _verify(dst, ids, whole, index, checks, report)
            if whole:  # the source retires: its memories go with the ledger (a partial copy leaves them live)
                report.memories = _copy_memories(src, dst)
            if report.ledger_id is not None:
                _retire(
                    src,
                    dst,
                    whole,
                    report,
                    Retirement(
                        report.ledger_id,
                        "moved" if whole else "partial",
                        _where(dst if whole else src),
                        now_ms(),
                        index_pin,
                        pins,
                    ),
                    notary,
                )
    if report.retired is not None:
        _fold_retirement(src if report.retired == "source" else dst, report)
    if ids and report.retired != "destination":  # a retired destination built it before retiring
        from ..runs import rebuild_projection  # local: the read model builds on the core

        rebuild_projection(dst)
    return report


def _where(store: Store) -> str:
    """How a retirement record names the other store: an SQLite file by its absolute path, any other
    store by its URL (password removed)."""
    if isinstance(store, SqliteStore) and store.path != ":memory:":
        return str(Path(store.path).resolve())
    return store.url


def _refuse_retired(src: Store) -> None:
    """A retired store is no source: a copy of it would be a second writable store of a ledger that lives
    elsewhere (its live store is named)."""
    summary = src.retirement()
    if summary is not None:
        error = retired_error(src.url, summary)
        where = f"moved to {error.peer}" if error.state == "moved" else f"a partial copy of {error.peer}"
        raise StoreError(
            f"{src.url} is retired ({where}, flightlog db copy): copy from {error.peer}, the live store"
        )


def _retire(
    src: Store, dst: Store, whole: bool, report: CopyReport, record: Retirement, notary: Notary | None
) -> None:
    """Sign the record and retire the source (whole copy, in the source transaction) or the destination
    (partial copy, in the destination transaction, after its runs projection is built)."""
    note = sign_retirement(record, notary if notary is not None else Notary.from_env())
    if whole:
        src.retire(record.summary(), note)
    else:
        from ..runs import rebuild_projection  # local: the read model builds on the core

        if report.sessions:
            rebuild_projection(dst)  # a retired store takes no more writes, not even its projection
        dst.retire(record.summary(), note)
    report.retired = "source" if whole else "destination"
    report.retirement = record.describe()


def _fold_retirement(retired: Store, report: CopyReport) -> None:
    """Checkpoint a retired SQLite store, so its retirement lives in the database file and not only in its
    WAL (where ``db repair --discard-wal`` could set it aside, making the store writable again next to
    the live one). A reader holding an older snapshot past the busy timeout keeps frames in the WAL: the
    record is durable there (the commit was fsynced) and reaches the file at a later checkpoint; a note
    says so."""
    if not isinstance(retired, SqliteStore):
        return
    frames, copied = retired.checkpoint_wal()
    if copied < frames:
        report.notes.append(
            f"the retirement of {retired.url} is committed in its WAL, but a reader held an older snapshot, "
            f"so {frames - copied} of {frames} WAL frames are not in the database file yet (SQLite copies "
            "them at its next checkpoint; `db repair --discard-wal` refuses to drop them)"
        )


def copy_session(
    src: Store,
    dst: Store,
    session_id: str,
    report: CopyReport | None = None,
    *,
    keyring: Keyring | None = None,
    heads: HeadStore | None = None,
    witnesses: Sequence[TrustedWitness] | None = None,
) -> CopyReport:
    """Copy one session (no index log) and check it on arrival, in one destination transaction.

    Unless the session is the source's only one (a whole copy, which retires the source), the destination
    is retired as a partial copy: to copy several sessions into one store, give them all to
    :func:`copy_store` (``sessions=``) at once.

    Raises:
        StoreError: the destination has the session already, or sessions of another ledger.
        LedgerRetired: the destination is retired already (a partial copy takes no more sessions).
        CopyNotVerified: the source rows or the copy do not verify (nothing written).
    """
    done = copy_store(src, dst, sessions=[session_id], keyring=keyring, heads=heads, witnesses=witnesses)
    if report is None:
        return done
    report.sessions += done.sessions
    for name in ("events", "artifacts", "effects", "checkpoints", "cosignatures", "verified"):
        setattr(report, name, getattr(report, name) + getattr(done, name))
    report.ledger_id = done.ledger_id
    report.notes += done.notes
    return report


def _exists(store: Store, session_id: str) -> bool:
    try:
        store.get_session(session_id)
    except LookupError:
        return False
    return True


def _ledger_of(store: Store) -> str | None:
    try:
        return store.ledger_id()
    except (StoreError, NotImplementedError):
        return None


def _adopt_ledger(src: Store, dst: Store) -> str | None:
    """Give ``dst`` the source's ledger id (refusing when it holds sessions of another ledger)."""
    source_id = _ledger_of(src)
    if source_id is None:
        return None  # no ledger id, so no checkpoint can name one
    target_id = _ledger_of(dst)
    if target_id == source_id:
        return source_id
    if next(iter(dst.list_sessions()), None) is not None:
        raise StoreError(
            f"{dst.url} already holds sessions of ledger {target_id}, the source's belong to ledger "
            f"{source_id}: every signed checkpoint names its ledger in its origin, so merging them would "
            "leave the copied checkpoints failing verification; copy into an empty database"
        )
    try:
        dst.adopt_ledger_id(source_id)
    except NotImplementedError:
        raise StoreError(f"{dst.url}: this backend has no ledger id to take ledger {source_id}") from None
    return source_id


def _index_wanted(src: Store, dst: Store) -> bool:
    """Whether the source has an index log to copy; refuses a destination that cannot take it whole."""
    if not src.index_supported() or src.index_size() == 0:
        return False
    if not dst.index_supported():
        raise StoreError(f"{dst.url} keeps no index log; it cannot take the source's")
    if dst.index_size():
        raise StoreError(f"{dst.url} already has an index log; refusing to merge another into it")
    return True


def _copy_one(src: Store, dst: Store, tables: _Tables, session_id: str, report: CopyReport) -> Pin:
    """Copy one session; its pin (size and root as copied, verified link by link)."""
    record = src.get_session(session_id)
    handles: dict[tuple[bool, str], int] = {}  # (salted, sha256 hex) -> first seq quoting it
    linking: set[str] = set()  # what LangGraph records name (store.links.linking_refs)
    dst.create_session(
        SessionRecord(
            session_id=record.session_id,
            task=record.task,
            status=record.status,
            source=record.source,
            created_at_ms=record.created_at_ms,
            parent_session_id=record.parent_session_id,
            metadata=record.metadata,
            merkle_root=CompactRange().root().hex(),
        )
    )
    pin = Pin(0, CompactRange().root())
    # Before the events: every row read was committed with its intent, so the events read hold it.
    effect_rows = src.session_effects(session_id)
    effects = EffectFold()
    for batch, head in _verified_batches(src, record, handles, linking, effects):
        tables.append_copied(session_id, batch, head)
        report.events += len(batch)
        pin = Pin(head.seq + 1, bytes.fromhex(head.root))
    _copy_effects(dst, session_id, _proven_effects(record, effects, effect_rows), report)
    _copy_side_tables(src, dst, tables, session_id, handles, linking, report)
    if report.ledger_id is not None:
        report.cosignatures += _copy_cosignatures(src, dst, origin_for(report.ledger_id, session_id))
    report.sessions.append(session_id)
    return pin


def _copy_cosignatures(src: Store, dst: Store, origin: str) -> int:
    try:
        records = src.cosignatures(origin)
    except NotImplementedError:
        return 0
    for record in records:
        dst.record_cosignature(record)
    return len(records)


def _copy_index(src: Store, dst: Store, ledger_id: str, report: CopyReport) -> Pin:
    """The index log: leaves in order (checkpoint ids mapped to the destination's), then its signed
    checkpoints with frontiers recomputed from the leaves, then the cosignatures of its origin; its pin."""
    records = list(src.index_checkpoints())
    wanted = {r.size for r in records}
    frontiers: dict[int, bytes] = {0: b""} if 0 in wanted else {}
    mapped: dict[str, dict[bytes, int]] = {}
    tree = CompactRange()
    for leaf in src.read_index_leaves():
        if leaf.idx != tree.size:
            raise CopyNotVerified(session_id=_INDEX_ID, seq=tree.size, reason="gap: an index leaf is missing")
        ids = mapped.get(leaf.session_id)
        if ids is None:
            ids = mapped[leaf.session_id] = _checkpoint_ids(dst, leaf.session_id)
        dst.append_index_leaf(leaf.idx, leaf.session_id, ids.get(leaf.leaf, leaf.checkpoint_id), leaf.leaf)
        tree.append(leaf_hash(leaf.leaf))
        if tree.size in wanted:
            frontiers[tree.size] = encode_frontier(tree)
        report.index_leaves += 1
    for record in records:
        dst.record_index_checkpoint(record.size, record.root, record.body, frontiers.get(record.size, b""))
        report.index_checkpoints += 1
    report.cosignatures += _copy_cosignatures(src, dst, index_origin(ledger_id))
    return Pin(tree.size, tree.root())


def _checkpoint_ids(dst: Store, session_id: str) -> dict[bytes, int]:
    """The destination's checkpoints of a session by note text (an index leaf's bytes)."""
    from ..integrity.notes import NoteError, parse_note

    out: dict[bytes, int] = {}
    if not _exists(dst, session_id):
        return out  # a session the source's index knows but the source lost: the check reports it
    for checkpoint in dst.checkpoints(session_id):
        try:
            out.setdefault(parse_note(checkpoint.body).text.encode("utf-8"), checkpoint.checkpoint_id)
        except NoteError:
            continue
    return out


def _verify(
    dst: Store, ids: list[str], whole: bool, index: bool, checks: _Checks, report: CopyReport
) -> None:
    """The ``verify --all`` check on the staged copy (inside the destination transaction)."""
    ledger_id = report.ledger_id
    for sid in ids:
        witnessed = checks.witnessed(dst, origin_for(ledger_id, sid) if ledger_id else None, report)
        _check_artifacts(dst, sid, report.needed.get(sid, []))  # first: it says what went missing in the copy
        audit = audit_session(dst, sid, keyring=checks.keyring, heads=checks.heads, witnessed=witnessed)
        report.notes.extend(audit.notes)
        if not audit.ok:
            first = audit.divergences[0]
            reason = f"{first.reason} ({first.detail})" if first.detail else first.reason
            raise CopyNotVerified(session_id=sid, seq=first.seq, reason=reason, divergences=audit.divergences)
        report.verified += 1
    if not whole or ledger_id is None:
        return
    if index:
        witnessed = checks.witnessed(dst, index_origin(ledger_id), report)
        log = audit_index(dst, keyring=checks.keyring, heads=checks.heads, witnessed=witnessed)
        if log.divergences:
            first = log.divergences[0]
            reason = f"{first.reason} ({first.detail})" if first.detail else first.reason
            raise CopyNotVerified(
                session_id=_INDEX_ID, seq=first.seq, reason=reason, divergences=log.divergences
            )
        gone = {m.session_id: f"leaf {m.leaf} of the signed index log" for m in log.missing}
        report.index_verified = True
    else:
        gone = {}
    if checks.heads is not None:
        for head in missing_sessions(dst, checks.heads):
            gone.setdefault(head.session_id, f"a retained head ({head.path})")
    if gone:
        sid, why = sorted(gone.items())[0]
        raise CopyNotVerified(
            session_id=sid,
            reason=f"missing: {why} names it, but the source database no longer holds it",
        )


def _verified_batches(
    src: Store,
    record: SessionRecord,
    handles: dict[tuple[bool, str], int],
    linking: set[str],
    effects: EffectFold,
) -> Iterator[tuple[list[StoredEvent], SessionHead]]:
    """The source rows in batches with the head each moves to, checked link by link as they stream; fills
    ``handles`` (every ``[salted:]sha256:<hex>`` the rows quote, with its first seq) and ``linking``, and
    folds the effect events into ``effects`` (each row once it links)."""
    tree, prev, expected = CompactRange(), GENESIS, 0
    batch: list[StoredEvent] = []
    for row in src.read_events(record.session_id):
        problem = link_problem(row, expected, prev)
        if problem is not None:
            raise CopyNotVerified(session_id=record.session_id, seq=row.seq, reason=problem)
        tree.append(leaf_hash(row.event_bytes))
        for m in _HANDLE.finditer(row.event_bytes):
            handles.setdefault((bool(m.group(1)), m.group(2).decode()), row.seq)
        if row.event_bytes.startswith(LINKING_PREFIX):
            linking.update(linking_refs(row.event_bytes))
        effects.feed_row(row)
        batch.append(row)
        prev, expected = row.hash, row.seq + 1
        if len(batch) >= _BATCH:
            yield batch, SessionHead(row.seq, row.hash, tree.root().hex())
            batch = []
    if expected != record.events or (record.events and prev != record.head_hash):
        raise CopyNotVerified(session_id=record.session_id, seq=expected, reason="truncated or head mismatch")
    if record.merkle_root and expected and tree.root().hex() != record.merkle_root:
        raise CopyNotVerified(session_id=record.session_id, seq=expected - 1, reason="tree head mismatch")
    if batch:
        last = batch[-1]
        yield batch, SessionHead(last.seq, last.hash, tree.root().hex())


def _copy_side_tables(
    src: Store,
    dst: Store,
    tables: _Tables,
    session_id: str,
    handles: dict[tuple[bool, str], int],
    linking: set[str],
    report: CopyReport,
) -> None:
    for policy_id, policy_json in src.grant_policies(session_id):
        dst.record_grant_policy(session_id, policy_id, policy_json)
    for checkpoint in src.checkpoints(session_id):
        new_id = dst.record_checkpoint(session_id, checkpoint.size, checkpoint.root, checkpoint.body)
        frontier = src.checkpoint_frontier(checkpoint.checkpoint_id)
        if frontier is not None:
            dst.record_checkpoint_frontier(new_id, frontier)
        report.checkpoints += 1
    for record in _tables(src).imports_of(session_id):
        if dst.find_import(record.source_sha256) is None:
            dst.record_import(record)
    report.artifacts += _copy_artifacts(src, dst, session_id, handles, linking, report)


def _proven_effects(
    record: SessionRecord, effects: EffectFold, rows: list[EffectRecord]
) -> list[EffectRecord]:
    """The session's effect rows once each is checked against its verified ledger (``effects``: the fold of
    the rows the copy verified link by link; :func:`~flightlog.integrity.effects.table_divergences`, the
    full check's comparison): every row, as the ledger records it.

    Raises:
        CopyNotVerified: a row the ledger does not record, or contradicts (another intent or result, a
            completion it never recorded), or an intent without its row: the source's row is at fault, so
            it is named (session, seq, key) and nothing is copied, rather than carry a row the ledger does
            not prove into the copy (whose arrival check would then call the copy divergent) or leave it
            behind unnamed.
    """
    found = table_divergences(effects, rows, through=record.head_seq, head=record.events - 1)
    if found:
        first = found[0]
        raise CopyNotVerified(
            session_id=record.session_id,
            seq=first.seq,
            reason=f"{first.reason} ({first.detail}): the source's external_effects rows are copied only "
            f"as its verified ledger records them (see `flightlog audit {record.session_id}` on the source)",
            divergences=found,
        )
    return rows


def _copy_effects(dst: Store, session_id: str, rows: list[EffectRecord], report: CopyReport) -> None:
    """Write the checked effect rows (intent, then completion when completed)."""
    for effect in rows:
        dst.record_intent(session_id, effect.idempotency_key, effect.intent_hash, effect.intent_json)
        if effect.status == "completed":
            dst.complete_effect(session_id, effect.idempotency_key, effect.result_json or "")
        report.effects += 1


def _refuse_stray_effects(src: Store) -> None:
    """A whole copy retires the source: ``external_effects`` rows under a session id no ``sessions`` row of
    it has (:meth:`~flightlog.store.base.Store.orphan_effects`) would stay behind in a read-only store, so
    the copy refuses naming the first id.

    Raises:
        CopyNotVerified: such rows exist (nothing written).
    """
    stray = src.orphan_effects()
    if stray:
        sid, rows = stray[0]
        more = f" (and {len(stray) - 1} more session id(s))" if len(stray) > 1 else ""
        raise CopyNotVerified(
            session_id=sid,
            reason=f"orphan_effects ({rows} external_effects row(s) of session id {sid!r}{more} with no "
            "sessions row in the source: no ledger records these effects, and the source retires with the "
            "copy, so they would be left behind; `flightlog verify --all` names them)",
        )


def _copy_artifacts(
    src: Store,
    dst: Store,
    session_id: str,
    handles: dict[tuple[bool, str], int],
    linking: set[str],
    report: CopyReport,
) -> int:
    """Copy the artifacts the session's events name and, transitively, the artifacts they link to
    (:func:`~flightlog.store.links.artifact_links`); how many were copied. The plain ones the events name
    that the source holds go to ``report.needed`` for the arrival check. A ``sha256:<hex>`` an event
    quotes that names no artifact of the source is copied as the event holds it, with one note per session
    in ``report.notes`` (how many, the first by seq): event text may quote a digest (an image, a file the
    agent hashed) that was never an artifact, so it does not refuse the copy.

    Raises:
        CopyNotVerified: a linked artifact, or one a LangGraph record names
            (:func:`~flightlog.store.links.linking_refs`: stored with the record, never merely quoted), is
            missing from the source, or stored bytes do not hash to the digest that names them.
    """
    count = 0
    roots: list[str] = []
    unstored: list[tuple[int, str]] = []
    pending: list[tuple[str, str | None]] = []  # (digest, the artifact linking to it; None: an event)
    for salted, digest in sorted(handles):
        if salted:
            count += _copy_salted(src, dst, session_id, digest)
        else:
            pending.append((digest, None))
    pending.reverse()
    seen: set[str] = set()
    while pending:
        digest, parent = pending.pop()
        if digest in seen:
            continue
        seen.add(digest)
        info = src.artifact_info(digest)
        try:
            content = src.get_artifact(digest) if info is not None else None
        except ArtifactIntegrityError as exc:  # the source's bytes hash otherwise: never carried on
            raise CopyNotVerified(
                session_id=session_id,
                seq=handles.get((False, digest)),
                reason=f"artifact sha256:{digest} in the source {exc.reason}",
            ) from exc
        if info is None or content is None:
            seq = handles.get((False, digest))
            if parent is None and seq is not None and digest not in linking:
                unstored.append((seq, digest))  # an event quoting a digest the source never stored
                continue
            if parent is None:
                raise CopyNotVerified(
                    session_id=session_id,
                    seq=seq,
                    reason=f"artifact sha256:{digest}, named by the record at seq {seq}, is missing from the "
                    "source",
                )
            raise CopyNotVerified(
                session_id=session_id,
                reason=f"artifact sha256:{digest}, linked from artifact sha256:{parent}, is missing "
                "from the source",
            )
        stored = dst.put_artifact(content, info.media_type)
        if stored.sha256 != digest:
            raise CopyNotVerified(
                session_id=session_id,
                reason=f"artifact sha256:{digest} in the source holds bytes of sha256 {stored.sha256}",
            )
        count += 1
        if parent is None:
            roots.append(digest)
        pending.extend((link, digest) for link in reversed(artifact_links(content)) if link not in seen)
    report.needed[session_id] = roots
    if unstored:
        seq, digest = min(unstored)
        report.notes.append(
            f"{session_id}: its events quote {len(unstored)} sha256 digest(s) that name no artifact of the "
            f"source (the first at seq {seq}: sha256:{digest}); copied as the events hold them, nothing "
            "to carry"
        )
    return count


def _check_artifacts(dst: Store, session_id: str, roots: Sequence[str]) -> None:
    """The arrival check of a session's plain artifacts: each of ``roots`` and every artifact they link to
    (transitively) is in ``dst`` and hashes to its name.

    Raises:
        CopyNotVerified: naming the session and the first artifact missing or not matching its digest.
    """
    for item in LinkWalk(dst, dict.fromkeys(roots, 0)):  # a batch of contents in memory at a time
        if item.state != "present":
            why = "an event" if item.parent is None else f"artifact sha256:{item.parent}"
            state = "missing" if item.state == "missing" else "corrupt (its bytes hash otherwise)"
            raise CopyNotVerified(
                session_id=session_id,
                reason=f"artifact {item.handle} (named by {why}) is {state} in the copy",
            )


def _copy_salted(src: Store, dst: Store, session_id: str, digest: str) -> int:
    if not src.index_supported() or not dst.index_supported():
        return 0
    try:
        stored = src.get_salted_artifact(digest)
    except ArtifactIntegrityError as exc:
        raise CopyNotVerified(
            session_id=session_id, reason=f"artifact {exc.handle} in the source {exc.reason}"
        ) from exc
    info = src.salted_artifact_info(digest)
    if stored is not None and info is not None:
        dst.put_salted_artifact(digest, stored[1], stored[0], info.media_type, session_id=session_id)
    erased = src.erasure(digest)
    if erased is not None:
        dst.erase_salted_artifact(erased)
    return int(stored is not None)


def _memory_of(store: Store) -> MemoryIndex | None:
    try:
        return store.memory
    except NotImplementedError:  # a backend that keeps no memory index
        return None


def _copy_memories(src: Store, dst: Store) -> int:
    """Copy every long-term memory record of ``src`` (:mod:`flightlog.store.memory`) with its salted text,
    then read them all back from ``dst``: each ``record_json`` must equal the source's byte for byte, and
    each text and salt too, hashing to the record's handle. How many were copied.

    Raises:
        StoreError: ``dst`` keeps no memory index or no salted artifacts while ``src`` has memories, or
            already holds memories (a copy never merges them).
        CopyNotVerified: a record's text is not in the source (erased, never stored) or does not hash to
            its handle, or a record or text reads back otherwise from ``dst``; ``session_id`` names the
            record (``memory <record_id>``).
    """
    source = _memory_of(src)
    if source is None or not source.stored_page("", 1):
        return 0
    target = _memory_of(dst)
    if target is None or not dst.index_supported():
        raise StoreError(f"{dst.url} keeps no long-term memory (salted artifacts); the source has memories")
    if target.stored_page("", 1):
        raise StoreError(f"{dst.url} already holds long-term memories; refusing to merge the source's")
    count = 0
    for record_id, stored in source.stored():
        record = row_of(stored).record
        content, salt = _memory_text(src, record_id, record.content)
        digest = record.content.removeprefix(SALTED_PREFIX)
        info = src.salted_artifact_info(digest)
        if dst.get_salted_artifact(digest) is None and info is not None:  # a session's copy may carry it
            dst.put_salted_artifact(digest, salt, content, info.media_type)
        target.put(record, content.decode("utf-8"))
        count += 1
    copied = target.stored()
    for record_id, stored in source.stored():
        arrived = next(copied, None)
        record = row_of(stored).record
        if arrived != (record_id, stored):
            raise CopyNotVerified(
                session_id=f"memory {record_id}",
                reason="the record reads back otherwise from the copy"
                if arrived is None or arrived[0] == record_id
                else f"the copy holds memory {arrived[0]!r} in its place",
            )
        if dst.get_salted_artifact(record.content.removeprefix(SALTED_PREFIX)) != src.get_salted_artifact(
            record.content.removeprefix(SALTED_PREFIX)
        ):
            raise CopyNotVerified(
                session_id=f"memory {record_id}", reason=f"its text {record.content} differs in the copy"
            )
    extra = next(copied, None)
    if extra is not None:
        raise CopyNotVerified(
            session_id=f"memory {extra[0]}", reason="the copy holds it, the source does not"
        )
    return count


def _memory_text(src: Store, record_id: str, handle: str) -> tuple[bytes, bytes]:
    """``(content, salt)`` of a memory's text in ``src``, checked against its handle.

    Raises:
        CopyNotVerified: not a salted handle, not in the source, not UTF-8, or not hashing to the handle.
    """
    where = f"memory {record_id}"
    if not handle.startswith(SALTED_PREFIX):
        raise CopyNotVerified(session_id=where, reason=f"its content {handle[:80]!r} is not a salted handle")
    try:
        stored = src.get_salted_artifact(handle.removeprefix(SALTED_PREFIX))
    except ArtifactIntegrityError as exc:  # the store's read checks the digest
        raise CopyNotVerified(
            session_id=where, reason=f"its text does not hash to {handle} in the source"
        ) from exc
    if stored is None:
        raise CopyNotVerified(
            session_id=where, reason=f"its text {handle} is not in the source (erased or never stored)"
        )
    content, salt = stored
    try:
        content.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CopyNotVerified(session_id=where, reason=f"its text {handle} is not UTF-8: {exc}") from None
    return content, salt


# ─── verbatim appends and listings the Store API does not offer (yet) on every backend ─────────


class _Tables:
    """Backend access a copy needs beyond ``Store``: append rows with their original timestamps, and
    list a session's import records. PostgreSQL offers both; SQLite goes through its connection."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def append_copied(self, session_id: str, rows: Sequence[StoredEvent], head: SessionHead) -> None:
        native = getattr(self.store, "append_copied", None)
        if native is not None:
            native(session_id, rows, head)
            return
        store = self.store
        assert isinstance(store, SqliteStore)
        store._conn.executemany(
            "INSERT INTO events (session_id, seq, kind, event, prev_hash, hash, recorded_at_ms) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(session_id, r.seq, r.kind, r.event_bytes, r.prev_hash, r.hash, r.recorded_at_ms) for r in rows],
        )
        store._execute(
            "UPDATE sessions SET head_seq = ?, head_hash = ?, merkle_root = ?, updated_at_ms = ? "
            "WHERE session_id = ?",
            (head.seq, head.hash, head.root, rows[-1].recorded_at_ms, session_id),
        )

    def imports_of(self, session_id: str) -> list[ImportRecord]:
        native = getattr(self.store, "imports_of", None)
        if native is not None:
            return list(native(session_id))
        store = self.store
        assert isinstance(store, SqliteStore)
        rows = store._all(
            "SELECT source_sha256, session_id, importer, importer_version, source_name, imported_at_ms "
            "FROM imports WHERE session_id = ? ORDER BY imported_at_ms",
            (session_id,),
        )
        return [ImportRecord(*row) for row in rows]


def _tables(store: Store) -> _Tables:
    if not hasattr(store, "append_copied") and not isinstance(store, SqliteStore):
        raise StoreError(f"{store.url}: this backend cannot take a verbatim copy")
    return _Tables(store)
