"""``flightlog db copy SRC DST``: stream every session from one store to another, verifying on arrival.

Per session, in one destination transaction (all of it or none of it):

* the session row (task, status, source, parent, metadata, creation time);
* the events: the stored bytes, chain hashes and ``recorded_at_ms`` verbatim, streamed in batches; the
  chain and the RFC 9162 tree are recomputed from the source rows as they stream (a source that does not
  verify is refused before anything of it is written), and the copy is verified again from the
  destination's rows before the transaction commits (``verify_session``, as ``Recorder.attach`` does);
* grant policies; external effects (intent, then completion when completed); checkpoints with their
  frontiers; import records; the artifacts and salted (erasable) artifacts its events reference, with
  erasure records.

Refuses (``StoreError``, nothing written) when the destination already holds any of the sessions. Not
copied: authority epochs (a new database starts every session at epoch 0; fencing tokens are per
database), fleet leases, live heartbeats, and the ledger-wide index log and its cosignatures (signed
statements about the source database). Effect timestamps are the copy's. The destination's ``runs``
projection is rebuilt from its ledgers at the end (the copied rows bypass the recorder's projector).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from .encoding import decode_stored
from .errors import LedgerIntegrityError, StoreError
from .events import Custom
from .ledger import GENESIS, CompactRange, chain_hash, leaf_hash
from .recorder import verify_session
from .store.base import EffectRecord, ImportRecord, SessionHead, SessionRecord, Store, StoredEvent
from .store.sqlite import SqliteStore

__all__ = ["CopyReport", "copy_session", "copy_store"]

_HANDLE = re.compile(rb"(salted:)?sha256:([0-9a-f]{64})")
_BATCH = 512


@dataclass
class CopyReport:
    """What a copy moved: sessions, events, artifacts (plain + salted), effects, checkpoints."""

    sessions: list[str] = field(default_factory=list)
    events: int = 0
    artifacts: int = 0
    effects: int = 0
    checkpoints: int = 0


def copy_store(
    src: Store,
    dst: Store,
    *,
    sessions: Sequence[str] | None = None,
    on_session: Callable[[str, int], None] | None = None,
) -> CopyReport:
    """Copy sessions (all by default) from ``src`` to ``dst``; see the module docs.

    Args:
        src: The source store (read only).
        dst: The destination store (writable).
        sessions: Session ids to copy (default: every session, oldest first).
        on_session: Called after each session with its id and event count (progress).

    Raises:
        StoreError: the destination already has one of the sessions (nothing written).
        LedgerIntegrityError: a source session does not verify (that session is not written; the ones
            before it stay copied).
    """
    ids = list(sessions) if sessions is not None else [r.session_id for r in src.list_sessions()]
    existing = [sid for sid in ids if _exists(dst, sid)]
    if existing:
        more = f" (+{len(existing) - 1} more)" if len(existing) > 1 else ""
        raise StoreError(f"{dst.url} already has session {existing[0]}{more}; refusing to overwrite")
    report = CopyReport()
    for sid in ids:
        copy_session(src, dst, sid, report)
        if on_session is not None:
            on_session(sid, src.get_session(sid).events)
    if ids:
        from .runs import rebuild_projection  # local: the read model builds on the core

        rebuild_projection(dst)
    return report


def copy_session(src: Store, dst: Store, session_id: str, report: CopyReport | None = None) -> CopyReport:
    """Copy one session and what belongs to it in one destination transaction (see the module docs).

    Raises:
        StoreError: the destination has the session already.
        LedgerIntegrityError: the source rows or the copy do not verify (nothing written).
    """
    report = report if report is not None else CopyReport()
    record = src.get_session(session_id)
    tables = _tables(dst)
    handles: set[tuple[bool, str]] = set()
    with dst.transaction():
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
        for batch, head in _verified_batches(src, record, handles):
            tables.append_copied(session_id, batch, head)
            report.events += len(batch)
        _copy_side_tables(src, dst, tables, session_id, handles, report)
        copied = verify_session(dst, session_id, decode=False)
        if not copied.ok:
            first = copied.divergences[0]
            raise LedgerIntegrityError(session_id=session_id, seq=first.seq, reason=f"copy: {first.reason}")
    report.sessions.append(session_id)
    return report


def _exists(store: Store, session_id: str) -> bool:
    try:
        store.get_session(session_id)
    except LookupError:
        return False
    return True


def _verified_batches(
    src: Store, record: SessionRecord, handles: set[tuple[bool, str]]
) -> Iterator[tuple[list[StoredEvent], SessionHead]]:
    """The source rows in batches with the head each moves to, checked link by link as they stream."""
    tree, prev, expected = CompactRange(), GENESIS, 0
    batch: list[StoredEvent] = []
    for row in src.read_events(record.session_id):
        problem = _problem(row, expected, prev)
        if problem is not None:
            raise LedgerIntegrityError(session_id=record.session_id, seq=row.seq, reason=problem)
        tree.append(leaf_hash(row.event_bytes))
        handles.update((bool(m.group(1)), m.group(2).decode()) for m in _HANDLE.finditer(row.event_bytes))
        batch.append(row)
        prev, expected = row.hash, row.seq + 1
        if len(batch) >= _BATCH:
            yield batch, SessionHead(row.seq, row.hash, tree.root().hex())
            batch = []
    if expected != record.events or (record.events and prev != record.head_hash):
        raise LedgerIntegrityError(
            session_id=record.session_id, seq=expected, reason="truncated or head mismatch"
        )
    if record.merkle_root and expected and tree.root().hex() != record.merkle_root:
        raise LedgerIntegrityError(
            session_id=record.session_id, seq=expected - 1, reason="tree head mismatch"
        )
    if batch:
        last = batch[-1]
        yield batch, SessionHead(last.seq, last.hash, tree.root().hex())


def _problem(row: StoredEvent, expected: int, prev: str) -> str | None:
    if row.seq != expected:
        return "gap"
    if row.prev_hash != prev:
        return "broken_link"
    if chain_hash(prev, row.seq, row.event_bytes) != row.hash:
        return "hash_mismatch"
    return None


def _copy_side_tables(
    src: Store,
    dst: Store,
    tables: _Tables,
    session_id: str,
    handles: set[tuple[bool, str]],
    report: CopyReport,
) -> None:
    for policy_id, policy_json in src.grant_policies(session_id):
        dst.record_grant_policy(session_id, policy_id, policy_json)
    for effect in _effects(src, session_id):
        dst.record_intent(session_id, effect.idempotency_key, effect.intent_hash, effect.intent_json)
        if effect.status == "completed":
            dst.complete_effect(session_id, effect.idempotency_key, effect.result_json or "")
        report.effects += 1
    for checkpoint in src.checkpoints(session_id):
        new_id = dst.record_checkpoint(session_id, checkpoint.size, checkpoint.root, checkpoint.body)
        frontier = src.checkpoint_frontier(checkpoint.checkpoint_id)
        if frontier is not None:
            dst.record_checkpoint_frontier(new_id, frontier)
        report.checkpoints += 1
    for record in _tables(src).imports_of(session_id):
        if dst.find_import(record.source_sha256) is None:
            dst.record_import(record)
    report.artifacts += _copy_artifacts(src, dst, session_id, handles)


def _effects(src: Store, session_id: str) -> list[EffectRecord]:
    """The session's effects: those its ledger names (``external_effect_intent``) and any pending one."""
    keys: dict[str, None] = {}
    for row in src.read_events(session_id):
        if row.kind == "custom" and b"external_effect_intent" in row.event_bytes:
            event = decode_stored(row.event_bytes, seq=row.seq)
            if isinstance(event, Custom) and event.custom_kind == "external_effect_intent":
                payload = event.payload if isinstance(event.payload, dict) else {}
                keys[str(payload.get("key"))] = None
    found = [e for k in keys if (e := src.get_effect(session_id, k)) is not None]
    seen = {e.idempotency_key for e in found}
    return found + [e for e in src.pending_effects(session_id) if e.idempotency_key not in seen]


def _copy_artifacts(src: Store, dst: Store, session_id: str, handles: Iterable[tuple[bool, str]]) -> int:
    count = 0
    for salted, digest in sorted(handles):
        if salted:
            count += _copy_salted(src, dst, session_id, digest)
            continue
        info = src.artifact_info(digest)
        content = src.get_artifact(digest) if info is not None else None
        if info is not None and content is not None:
            dst.put_artifact(content, info.media_type)
            count += 1
    return count


def _copy_salted(src: Store, dst: Store, session_id: str, digest: str) -> int:
    if not src.index_supported() or not dst.index_supported():
        return 0
    stored = src.get_salted_artifact(digest)
    info = src.salted_artifact_info(digest)
    if stored is not None and info is not None:
        dst.put_salted_artifact(digest, stored[1], stored[0], info.media_type, session_id=session_id)
    erased = src.erasure(digest)
    if erased is not None:
        dst.erase_salted_artifact(erased)
    return int(stored is not None)


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
