"""Row mapping shared by the SQL backends: column lists in the order the records take them, and the few
conversions a driver's row needs on the way to a frozen record (:mod:`flightlog.store.base`).

Pure functions, no driver import: :mod:`flightlog.store.sql` builds its statements from these lists, and
:mod:`flightlog.store.sqlite` / :mod:`flightlog.store.postgres` map their rows with them.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from ..errors import ArtifactIntegrityError
from .base import IndexCheckpointRecord, NewEvent, RunRow, SessionRecord

__all__ = [
    "CHECKPOINT_COLUMNS",
    "EFFECT_COLUMNS",
    "EVENT_COLUMNS",
    "IMPORT_COLUMNS",
    "INDEX_CHECKPOINT_COLUMNS",
    "INDEX_LEAF_COLUMNS",
    "LEASE_COLUMNS",
    "LIVE_RUN_COLUMNS",
    "LIVE_RUN_COLUMNS_BEFORE_OWNER",
    "MAX_SEQ",
    "RUN_COLUMNS",
    "RUN_FIELDS",
    "SESSION_COLUMNS",
    "as_bytes",
    "consecutive",
    "digest",
    "index_checkpoint",
    "like_escape",
    "now_ms",
    "run_row",
    "run_tuple",
    "session",
    "taken",
]

MAX_SEQ = 2**63 - 1
"""The largest seq (and size) a store holds: a signed 64-bit integer, SQLite's and PostgreSQL's BIGINT."""

SESSION_COLUMNS = (
    "session_id, task, status, source, created_at_ms, updated_at_ms, head_seq, head_hash, merkle_root, "
    "parent_session_id, metadata"
)
EVENT_COLUMNS = "seq, kind, {event}, prev_hash, hash, recorded_at_ms"
"""``read_events``' columns; ``{event}`` is the store's expression for the stored bytes (``SqlStore.EVENT_BYTES_OF``)."""
EFFECT_COLUMNS = "session_id, idempotency_key, intent_hash, intent_json, status, result_json, created_at_ms, completed_at_ms"
CHECKPOINT_COLUMNS = "session_id, checkpoint_id, size, root, body, created_at_ms"
IMPORT_COLUMNS = "source_sha256, session_id, importer, importer_version, source_name, imported_at_ms"
LEASE_COLUMNS = "session_id, holder, epoch, expires_at_ms, acquired_at_ms, parked_seq"
LIVE_RUN_COLUMNS_BEFORE_OWNER = "run_id, state, heartbeat_at_ms, changed_at_ms, tokens_used, steps_taken, pid"
"""``live_runs`` columns before ``ddl.LIVE_RUNS_OWNER`` added ``host`` and ``owner`` (a read-only handle on an
older database reads these)."""
LIVE_RUN_COLUMNS = f"{LIVE_RUN_COLUMNS_BEFORE_OWNER}, host, owner"
INDEX_LEAF_COLUMNS = "idx, session_id, checkpoint_id, leaf, recorded_at_ms"
INDEX_CHECKPOINT_COLUMNS = "checkpoint_id, size, root, body, frontier, created_at_ms"
RUN_COLUMNS = (
    "run_id, parent, source, state, outcome, updated_at_ms, last_seq, session_status, snapshot, fold"
)
RUN_FIELDS: tuple[str, ...] = tuple(RUN_COLUMNS.split(", "))
"""``runs`` columns in :class:`RunRow` field order (``run_id`` first)."""


def now_ms() -> int:
    """Current wall-clock time in epoch milliseconds."""
    return time.time_ns() // 1_000_000


def session(row: Sequence[Any]) -> SessionRecord:
    """A ``SESSION_COLUMNS`` row as a record (``metadata`` is stored as JSON text)."""
    return SessionRecord(
        session_id=row[0],
        task=row[1],
        status=row[2],
        source=row[3],
        created_at_ms=row[4],
        updated_at_ms=row[5],
        head_seq=row[6],
        head_hash=row[7],
        merkle_root=row[8],
        parent_session_id=row[9],
        metadata=json.loads(row[10] or "{}"),
    )


def index_checkpoint(row: Sequence[Any]) -> IndexCheckpointRecord:
    """An ``INDEX_CHECKPOINT_COLUMNS`` row as a record (a non-binary frontier reads as None)."""
    frontier = bytes(row[4]) if isinstance(row[4], bytes | bytearray | memoryview) else None
    return IndexCheckpointRecord(int(row[0]), int(row[1]), str(row[2]), str(row[3]), frontier, int(row[5]))


def run_tuple(r: RunRow) -> tuple[Any, ...]:
    """A row's values in ``RUN_COLUMNS`` order (spelled out: this runs on every append)."""
    return (
        r.run_id, r.parent, r.source, r.state, r.outcome, r.updated_at_ms, r.last_seq, r.session_status,
        r.snapshot, r.fold,
    )  # fmt: skip


if tuple(f.name for f in fields(RunRow)) != RUN_FIELDS or hasattr(RunRow, "__post_init__"):
    raise TypeError("run_row: RunRow's fields are no longer RUN_FIELDS, or it gained a __post_init__")
(
    _set_run_id, _set_parent, _set_source, _set_state, _set_outcome, _set_updated_at_ms, _set_last_seq,
    _set_session_status, _set_snapshot, _set_fold,
) = [getattr(RunRow, name).__set__ for name in RUN_FIELDS]  # the slots' member descriptors  # fmt: skip
_new = object.__new__


def run_row(
    run_id: str,
    parent: str | None,
    source: str,
    state: str,
    outcome: str | None,
    updated_at_ms: int,
    last_seq: int,
    session_status: str | None,
    snapshot: str,
    fold: str,
) -> RunRow:
    """``RunRow(...)`` with the same arguments, at under half the cost (the runs projection builds one on
    every append: ~9k instructions against ~21k for the dataclass's ``__init__`` called by keyword).

    A frozen dataclass's generated ``__init__`` stores each field with ``object.__setattr__`` (its own
    ``__setattr__`` refuses); each of those calls ends in the field's slot descriptor. This calls the
    descriptors' ``__set__`` directly. The result is an ordinary ``RunRow``: equal to the one ``__init__``
    builds, frozen, and ``dataclasses.replace`` works on it. ``RunRow`` has no defaults, validation or
    ``__post_init__`` that this would skip; importing this module raises ``TypeError`` if it gains a
    ``__post_init__`` or its fields stop matching :data:`RUN_FIELDS`.
    """
    row = _new(RunRow)
    _set_run_id(row, run_id)
    _set_parent(row, parent)
    _set_source(row, source)
    _set_state(row, state)
    _set_outcome(row, outcome)
    _set_updated_at_ms(row, updated_at_ms)
    _set_last_seq(row, last_seq)
    _set_session_status(row, session_status)
    _set_snapshot(row, snapshot)
    _set_fold(row, fold)
    return row


def as_bytes(data: object) -> bytes:
    """A stored event value as bytes; a tampered TEXT/INTEGER value (SQLite columns take any type) is kept
    as its UTF-8 text so verification reports it as a hash mismatch instead of crashing."""
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    return str(data).encode("utf-8", "surrogatepass")


def taken(rows: Sequence[NewEvent], head_seq: int) -> int | None:
    """The lowest seq of ``rows`` already stored (``<= head_seq``) or repeated in the batch, else None."""
    seen: set[int] = set()
    clashes = []
    for row in rows:
        if row.seq <= head_seq or row.seq in seen:
            clashes.append(row.seq)
        seen.add(row.seq)
    return min(clashes) if clashes else None


def consecutive(rows: Sequence[NewEvent]) -> bool:
    """Whether the rows' seqs are ``rows[0].seq, rows[0].seq + 1, ...`` in order (True for no rows)."""
    return not rows or [row.seq for row in rows] == list(range(rows[0].seq, rows[0].seq + len(rows)))


def like_escape(text: str) -> str:
    """``text`` as a literal inside a ``LIKE`` pattern with ``\\`` as the escape character."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def digest(content: bytes | str) -> str:
    """sha256 of ``content`` (text as UTF-8), 64 lowercase hex chars."""
    data = content.encode("utf-8") if isinstance(content, str) else content
    return hashlib.sha256(data).hexdigest()


def checked_artifact(sha256: str, content: bytes) -> bytes:
    """``content`` read for the artifact of hex digest ``sha256``, when it hashes to it: the one check every
    backend's content-addressed read makes (:meth:`flightlog.store.base.Store.get_artifact`).

    Raises:
        ArtifactIntegrityError: ``content`` hashes otherwise (altered in the store); names ``sha256:<hex>``.
    """
    found = hashlib.sha256(content).hexdigest()
    if found != sha256:
        raise ArtifactIntegrityError(
            handle=f"sha256:{sha256}",
            reason=f"holds {len(content)} bytes of another sha256 (sha256:{found[:16]}...): altered in the store",
        )
    return content


SALT_BYTES = 32
"""Length of a salted artifact's salt, bytes: :data:`flightlog.salted.SALT_BYTES`, restated here because the
store does not import the layer beside it (tests/audit2/test_store_and_heads.py pins them equal)."""


def checked_salted(digest: str, content: bytes, salt: bytes) -> tuple[bytes, bytes]:
    """``(content, salt)`` read for the salted artifact of hex digest ``digest``, when the salt is
    :data:`SALT_BYTES` long and ``sha256(salt || content)`` is ``digest``
    (:meth:`flightlog.store.base.Store.get_salted_artifact`). The length is part of the check: without it, bytes
    moved from the front of the content into the salt hash the same and would read back as a shortened text.

    Raises:
        ArtifactIntegrityError: the salt is not :data:`SALT_BYTES` long, or they hash otherwise (altered in the
            store); names ``salted:sha256:<hex>``.
    """
    if len(salt) != SALT_BYTES:
        raise ArtifactIntegrityError(
            handle=f"salted:sha256:{digest}",
            reason=(
                f"has a salt of {len(salt)} bytes, not {SALT_BYTES} (bytes were moved between its salt and its "
                "content in the store)"
            ),
        )
    if hashlib.sha256(salt + content).hexdigest() != digest:
        raise ArtifactIntegrityError(
            handle=f"salted:sha256:{digest}",
            reason="does not match its digest (its content or salt was altered in the store)",
        )
    return content, salt
