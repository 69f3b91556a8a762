"""The embedded default backend: one SQLite file in WAL mode (stdlib ``sqlite3``).

Durability: ``journal_mode=WAL`` and ``synchronous=FULL`` by default, so every commit is fsynced to the
WAL before ``append`` returns (``NORMAL`` is selectable: durable against process crashes, not power loss).
Writes use ``BEGIN IMMEDIATE`` so a second writer waits (``busy_timeout``) and then either appends after
the first or fails on the ``(session_id, seq)`` primary key with ``AppendConflict``; it never forks a chain.
Triggers make ``events`` append-only at the database level (ARCHITECTURE.md invariant 1).

Read-only mode opens the file with ``mode=ro`` and ``query_only``; writes raise ``ReadOnlyStore``.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import (
    AppendConflict,
    EffectConflict,
    ReadOnlyStore,
    SessionNotFound,
    StaleWriter,
    StoreError,
    StoreUnavailable,
)
from .base import (
    ArtifactRecord,
    CheckpointRecord,
    EffectRecord,
    ImportRecord,
    NewEvent,
    SessionHead,
    SessionRecord,
    Store,
    StoredEvent,
)

__all__ = ["MIGRATIONS", "SqliteStore", "now_ms"]


def now_ms() -> int:
    """Current wall-clock time in epoch milliseconds."""
    return time.time_ns() // 1_000_000


MIGRATIONS: list[tuple[str, str]] = [
    (
        "sessions, append-only events, epochs, grants, effects, artifacts, checkpoints, imports",
        """
        CREATE TABLE sessions (
            session_id TEXT PRIMARY KEY,
            task TEXT NOT NULL DEFAULT '',
            status TEXT NOT NULL,
            source TEXT NOT NULL,
            created_at_ms INTEGER NOT NULL,
            updated_at_ms INTEGER NOT NULL,
            head_seq INTEGER NOT NULL DEFAULT -1,
            head_hash TEXT NOT NULL DEFAULT 'GENESIS',
            merkle_root TEXT NOT NULL DEFAULT '',
            parent_session_id TEXT,
            metadata TEXT NOT NULL DEFAULT '{}'
        );
        CREATE INDEX sessions_parent ON sessions(parent_session_id);
        CREATE INDEX sessions_created ON sessions(created_at_ms);
        CREATE TABLE events (
            session_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            kind TEXT NOT NULL,
            event BLOB NOT NULL,
            prev_hash TEXT NOT NULL,
            hash TEXT NOT NULL,
            recorded_at_ms INTEGER NOT NULL,
            PRIMARY KEY (session_id, seq)
        );
        CREATE TRIGGER events_no_update BEFORE UPDATE ON events
            BEGIN SELECT RAISE(ABORT, 'flightlog events are append-only'); END;
        CREATE TRIGGER events_no_delete BEFORE DELETE ON events
            BEGIN SELECT RAISE(ABORT, 'flightlog events are append-only'); END;
        CREATE TABLE authority_epochs (
            session_id TEXT PRIMARY KEY,
            epoch INTEGER NOT NULL,
            updated_at_ms INTEGER NOT NULL
        );
        CREATE TABLE grant_policies (
            session_id TEXT NOT NULL,
            policy_id TEXT NOT NULL,
            policy_json TEXT NOT NULL,
            recorded_at_ms INTEGER NOT NULL,
            PRIMARY KEY (session_id, policy_id)
        );
        CREATE TABLE external_effects (
            session_id TEXT NOT NULL,
            idempotency_key TEXT NOT NULL,
            intent_hash TEXT NOT NULL,
            intent_json TEXT NOT NULL,
            status TEXT NOT NULL,
            result_json TEXT,
            created_at_ms INTEGER NOT NULL,
            completed_at_ms INTEGER,
            PRIMARY KEY (session_id, idempotency_key)
        );
        CREATE INDEX external_effects_pending ON external_effects(status);
        CREATE TABLE artifacts (
            sha256 TEXT PRIMARY KEY,
            media_type TEXT NOT NULL,
            size_bytes INTEGER NOT NULL,
            content BLOB NOT NULL,
            created_at_ms INTEGER NOT NULL
        );
        CREATE TABLE checkpoints (
            checkpoint_id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL,
            size INTEGER NOT NULL,
            root TEXT NOT NULL,
            body TEXT NOT NULL,
            created_at_ms INTEGER NOT NULL
        );
        CREATE INDEX checkpoints_session ON checkpoints(session_id, size);
        CREATE TABLE imports (
            source_sha256 TEXT PRIMARY KEY,
            session_id TEXT NOT NULL,
            importer TEXT NOT NULL,
            importer_version TEXT NOT NULL,
            source_name TEXT NOT NULL,
            imported_at_ms INTEGER NOT NULL
        );
        """,
    ),
]
"""Ordered migrations: list index + 1 is the schema version. Never edit one that has shipped; append."""


class SqliteStore(Store):
    """A :class:`Store` in one SQLite file.

    Args:
        path: Database file (created with its folder unless ``read_only``), or ``":memory:"``.
        read_only: Open with ``mode=ro``; every write raises ``ReadOnlyStore``.
        synchronous: ``"FULL"`` (default: fsync every commit) or ``"NORMAL"``.
        busy_timeout_ms: How long a writer waits for another's lock before failing, in ms.

    Raises:
        StoreUnavailable: the file cannot be opened, is not a database, or (read-only) has no schema.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        read_only: bool = False,
        synchronous: str = "FULL",
        busy_timeout_ms: int = 5000,
    ) -> None:
        if synchronous.upper() not in ("FULL", "NORMAL", "EXTRA"):
            raise ValueError(f"synchronous must be FULL, NORMAL or EXTRA, not {synchronous!r}")
        self.path = str(path)
        self.url = f"sqlite:///{self.path}"
        self.read_only = read_only
        self._lock = threading.RLock()
        self._depth = 0
        self._conn = self._connect(synchronous.upper(), busy_timeout_ms)
        if not read_only:
            self._migrate()
        elif self.schema_version() == 0:
            self._conn.close()
            raise StoreUnavailable(url=self.url, reason="no flightlog schema in this database")

    # ─── connection and transactions ──────────────────────────────────────────────────────
    def _connect(self, synchronous: str, busy_timeout_ms: int) -> sqlite3.Connection:
        try:
            if self.path == ":memory:":
                conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            elif self.read_only:
                uri = Path(self.path).resolve().as_uri() + "?mode=ro"
                conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
            else:
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            if self.read_only:
                conn.execute("PRAGMA query_only = ON")
            elif self.path != ":memory:":
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise StoreUnavailable(url=self.url, reason=f"cannot enable WAL (journal_mode={mode})")
            conn.execute(f"PRAGMA synchronous = {synchronous}")
            conn.execute("PRAGMA foreign_keys = ON")
            return conn
        except sqlite3.Error as exc:
            raise StoreUnavailable(url=self.url, reason=str(exc)) from exc

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One ``BEGIN IMMEDIATE`` transaction; a nested block is a SAVEPOINT. Rolls back on any exception."""
        with self._lock:
            if self._depth:
                name = f"flightlog_sp{self._depth}"
                self._execute(f"SAVEPOINT {name}")
                self._depth += 1
                try:
                    yield
                except BaseException:
                    self._conn.execute(f"ROLLBACK TO {name}")
                    self._conn.execute(f"RELEASE {name}")
                    raise
                finally:
                    self._depth -= 1
                self._execute(f"RELEASE {name}")
                return
            self._check_writable()
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise _translate(exc, self.url) from exc
            self._depth = 1
            try:
                yield
            except BaseException:
                self._depth = 0
                self._conn.execute("ROLLBACK")
                raise
            self._depth = 0
            try:
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise _translate(exc, self.url) from exc

    def _check_writable(self) -> None:
        if self.read_only:
            raise ReadOnlyStore(url=self.url)

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        try:
            return self._conn.execute(sql, params)
        except sqlite3.Error as exc:
            raise _translate(exc, self.url) from exc

    def _one(self, sql: str, params: Sequence[Any] = ()) -> Any:
        with self._lock:
            return self._execute(sql, params).fetchone()

    def _all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._lock:
            return self._execute(sql, params).fetchall()

    # ─── migrations ───────────────────────────────────────────────────────────────────────
    def schema_version(self) -> int:
        with self._lock:
            exists = self._execute(
                "SELECT 1 FROM sqlite_master WHERE type='table' AND name='schema_migrations'"
            ).fetchone()
            if not exists:
                return 0
            row = self._execute("SELECT MAX(version) FROM schema_migrations").fetchone()
            return int(row[0] or 0)

    def _migrate(self) -> None:
        with self.transaction():
            self._execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at_ms INTEGER NOT NULL)"
            )
            current = self.schema_version()
            for version, (description, sql) in enumerate(MIGRATIONS, start=1):
                if version <= current:
                    continue
                for statement in _statements(sql):
                    self._execute(statement)
                self._execute(
                    "INSERT INTO schema_migrations VALUES (?, ?, ?)", (version, description, now_ms())
                )

    # ─── sessions ─────────────────────────────────────────────────────────────────────────
    def create_session(self, record: SessionRecord) -> None:
        created = record.created_at_ms or now_ms()
        with self.transaction():
            try:
                self._conn.execute(
                    "INSERT INTO sessions (session_id, task, status, source, created_at_ms, updated_at_ms,"
                    " parent_session_id, metadata, merkle_root) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        record.session_id,
                        record.task,
                        record.status,
                        record.source,
                        created,
                        created,
                        record.parent_session_id,
                        json.dumps(record.metadata, sort_keys=True),
                        record.merkle_root,
                    ),
                )
            except sqlite3.IntegrityError as exc:
                raise AppendConflict(session_id=record.session_id, seq=-1) from exc
            self._execute("INSERT INTO authority_epochs VALUES (?, 0, ?)", (record.session_id, now_ms()))

    def get_session(self, session_id: str) -> SessionRecord:
        row = self._one(f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE session_id = ?", (session_id,))
        if row is None:
            raise SessionNotFound(session_id=session_id)
        return _session(row)

    def resolve_session(self, prefix: str) -> str:
        if not prefix:
            raise SessionNotFound(session_id=prefix)
        exact = self._one("SELECT session_id FROM sessions WHERE session_id = ?", (prefix,))
        if exact:
            return str(exact[0])
        after_colon = self._all(
            "SELECT session_id FROM sessions WHERE session_id LIKE ? ESCAPE '\\' LIMIT 2",
            ("%:" + _like_escape(prefix),),
        )
        if len(after_colon) == 1:
            return str(after_colon[0][0])
        pattern = _like_escape(prefix) + "%"
        rows = self._all(
            "SELECT session_id FROM sessions WHERE session_id LIKE ? ESCAPE '\\' "
            "OR session_id LIKE ? ESCAPE '\\' ORDER BY session_id LIMIT 6",
            (pattern, "%:" + pattern),
        )
        if len(rows) != 1:
            raise SessionNotFound(session_id=prefix, matches=[r[0] for r in rows])
        return str(rows[0][0])

    def list_sessions(self) -> Iterator[SessionRecord]:
        for row in self._all(f"SELECT {_SESSION_COLUMNS} FROM sessions ORDER BY created_at_ms, session_id"):
            yield _session(row)

    def set_session_status(self, session_id: str, status: str) -> None:
        with self.transaction():
            cur = self._execute(
                "UPDATE sessions SET status = ?, updated_at_ms = ? WHERE session_id = ?",
                (status, now_ms(), session_id),
            )
            if cur.rowcount == 0:
                raise SessionNotFound(session_id=session_id)

    # ─── events ───────────────────────────────────────────────────────────────────────────
    def append_events(
        self, session_id: str, rows: Sequence[NewEvent], head: SessionHead, *, epoch: int | None = None
    ) -> int:
        stamp = now_ms()
        with self.transaction():
            if epoch is not None:
                current = self.authority_epoch(session_id)
                if current != epoch:
                    raise StaleWriter(session_id=session_id, epoch=epoch, current_epoch=current)
            try:
                self._conn.executemany(
                    "INSERT INTO events (session_id, seq, kind, event, prev_hash, hash, recorded_at_ms) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [(session_id, r.seq, r.kind, r.event_bytes, r.prev_hash, r.hash, stamp) for r in rows],
                )
            except sqlite3.IntegrityError as exc:
                raise AppendConflict(session_id=session_id, seq=rows[0].seq if rows else -1) from exc
            except sqlite3.Error as exc:
                raise _translate(exc, self.url) from exc
            cur = self._execute(
                "UPDATE sessions SET head_seq = ?, head_hash = ?, merkle_root = ?, updated_at_ms = ? "
                "WHERE session_id = ?",
                (head.seq, head.hash, head.root, stamp, session_id),
            )
            if cur.rowcount == 0:
                raise SessionNotFound(session_id=session_id)
        return stamp

    def read_events(
        self, session_id: str, *, start: int = 0, stop: int | None = None, batch: int = 512
    ) -> Iterator[StoredEvent]:
        """Stream rows in ascending seq, ``batch`` rows per query (keyset pagination, bounded memory)."""
        upper = stop if stop is not None else 2**63 - 1
        position = start
        while True:
            rows = self._all(
                "SELECT seq, kind, event, prev_hash, hash, recorded_at_ms FROM events "
                "WHERE session_id = ? AND seq >= ? AND seq < ? ORDER BY seq LIMIT ?",
                (session_id, position, upper, batch),
            )
            for seq, kind, data, prev_hash, hash_, at in rows:
                yield StoredEvent(session_id, seq, kind, bytes(data), prev_hash, hash_, at)
            if len(rows) < batch:
                return
            position = rows[-1][0] + 1

    # ─── authority epochs ─────────────────────────────────────────────────────────────────
    def authority_epoch(self, session_id: str) -> int:
        row = self._one("SELECT epoch FROM authority_epochs WHERE session_id = ?", (session_id,))
        if row is None:
            raise SessionNotFound(session_id=session_id)
        return int(row[0])

    def bump_authority_epoch(self, session_id: str) -> int:
        with self.transaction():
            cur = self._execute(
                "UPDATE authority_epochs SET epoch = epoch + 1, updated_at_ms = ? WHERE session_id = ?",
                (now_ms(), session_id),
            )
            if cur.rowcount == 0:
                raise SessionNotFound(session_id=session_id)
            return self.authority_epoch(session_id)

    # ─── grants ───────────────────────────────────────────────────────────────────────────
    def record_grant_policy(self, session_id: str, policy_id: str, policy_json: str) -> None:
        with self.transaction():
            row = self._execute(
                "SELECT policy_json FROM grant_policies WHERE session_id = ? AND policy_id = ?",
                (session_id, policy_id),
            ).fetchone()
            if row is not None:
                if row[0] != policy_json:
                    raise StoreError(
                        f"grant policy {policy_id!r} of session {session_id} already recorded with other bytes"
                    )
                return
            self._execute(
                "INSERT INTO grant_policies VALUES (?, ?, ?, ?)",
                (session_id, policy_id, policy_json, now_ms()),
            )

    def grant_policies(self, session_id: str) -> list[tuple[str, str]]:
        rows = self._all(
            "SELECT policy_id, policy_json FROM grant_policies WHERE session_id = ? ORDER BY rowid",
            (session_id,),
        )
        return [(r[0], r[1]) for r in rows]

    # ─── external effects ─────────────────────────────────────────────────────────────────
    def record_intent(self, session_id: str, key: str, intent_hash: str, intent_json: str) -> bool:
        with self.transaction():
            existing = self.get_effect(session_id, key)
            if existing is not None:
                if existing.intent_hash != intent_hash:
                    raise EffectConflict(
                        idempotency_key=key, stored_hash=existing.intent_hash, new_hash=intent_hash
                    )
                return False
            self._execute(
                "INSERT INTO external_effects (session_id, idempotency_key, intent_hash, intent_json, status,"
                " created_at_ms) VALUES (?, ?, ?, ?, 'pending', ?)",
                (session_id, key, intent_hash, intent_json, now_ms()),
            )
            return True

    def complete_effect(self, session_id: str, key: str, result_json: str) -> bool:
        with self.transaction():
            existing = self.get_effect(session_id, key)
            if existing is None:
                raise LookupError(f"no intent recorded for effect {key!r} of session {session_id}")
            if existing.status == "completed":
                if existing.result_json != result_json:
                    raise EffectConflict(
                        idempotency_key=key,
                        stored_hash=_digest(existing.result_json or ""),
                        new_hash=_digest(result_json),
                    )
                return False
            self._execute(
                "UPDATE external_effects SET status = 'completed', result_json = ?, completed_at_ms = ? "
                "WHERE session_id = ? AND idempotency_key = ?",
                (result_json, now_ms(), session_id, key),
            )
            return True

    def get_effect(self, session_id: str, key: str) -> EffectRecord | None:
        row = self._one(
            f"SELECT {_EFFECT_COLUMNS} FROM external_effects WHERE session_id = ? AND idempotency_key = ?",
            (session_id, key),
        )
        return EffectRecord(*row) if row else None

    def pending_effects(self, session_id: str | None = None) -> list[EffectRecord]:
        sql = f"SELECT {_EFFECT_COLUMNS} FROM external_effects WHERE status = 'pending'"
        params: tuple[str, ...] = ()
        if session_id is not None:
            sql += " AND session_id = ?"
            params = (session_id,)
        return [EffectRecord(*r) for r in self._all(sql + " ORDER BY created_at_ms", params)]

    # ─── artifacts ────────────────────────────────────────────────────────────────────────
    def put_artifact(self, content: bytes, media_type: str) -> ArtifactRecord:
        digest = _digest_bytes(content)
        with self.transaction():
            self._execute(
                "INSERT OR IGNORE INTO artifacts VALUES (?, ?, ?, ?, ?)",
                (digest, media_type, len(content), content, now_ms()),
            )
        info = self.artifact_info(digest)
        assert info is not None
        return info

    def get_artifact(self, sha256: str) -> bytes | None:
        row = self._one("SELECT content FROM artifacts WHERE sha256 = ?", (_strip_handle(sha256),))
        return bytes(row[0]) if row else None

    def artifact_info(self, sha256: str) -> ArtifactRecord | None:
        row = self._one(
            "SELECT sha256, media_type, size_bytes, created_at_ms FROM artifacts WHERE sha256 = ?",
            (_strip_handle(sha256),),
        )
        return ArtifactRecord(*row) if row else None

    # ─── checkpoints ──────────────────────────────────────────────────────────────────────
    def record_checkpoint(self, session_id: str, size: int, root: str, body: str) -> int:
        with self.transaction():
            cur = self._execute(
                "INSERT INTO checkpoints (session_id, size, root, body, created_at_ms) VALUES (?, ?, ?, ?, ?)",
                (session_id, size, root, body, now_ms()),
            )
            return int(cur.lastrowid or 0)

    def checkpoints(self, session_id: str) -> list[CheckpointRecord]:
        rows = self._all(
            "SELECT session_id, checkpoint_id, size, root, body, created_at_ms FROM checkpoints "
            "WHERE session_id = ? ORDER BY checkpoint_id",
            (session_id,),
        )
        return [CheckpointRecord(*r) for r in rows]

    # ─── imports ──────────────────────────────────────────────────────────────────────────
    def find_import(self, source_sha256: str) -> ImportRecord | None:
        row = self._one("SELECT * FROM imports WHERE source_sha256 = ?", (source_sha256,))
        return ImportRecord(*row) if row else None

    def record_import(self, record: ImportRecord) -> None:
        with self.transaction():
            self._execute(
                "INSERT INTO imports VALUES (?, ?, ?, ?, ?, ?)",
                (
                    record.source_sha256,
                    record.session_id,
                    record.importer,
                    record.importer_version,
                    record.source_name,
                    record.imported_at_ms,
                ),
            )


_SESSION_COLUMNS = (
    "session_id, task, status, source, created_at_ms, updated_at_ms, head_seq, head_hash, merkle_root, "
    "parent_session_id, metadata"
)
_EFFECT_COLUMNS = "session_id, idempotency_key, intent_hash, intent_json, status, result_json, created_at_ms, completed_at_ms"


def _session(row: Sequence[Any]) -> SessionRecord:
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


def _statements(script: str) -> list[str]:
    """Split a migration script into statements, keeping trigger bodies (``BEGIN ... END;``) whole."""
    statements: list[str] = []
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        statements.append(buffer.strip())
    return statements


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _strip_handle(handle: str) -> str:
    return handle.removeprefix("sha256:")


def _digest_bytes(content: bytes) -> str:
    import hashlib

    return hashlib.sha256(content).hexdigest()


def _digest(text: str) -> str:
    return _digest_bytes(text.encode("utf-8"))


def _translate(exc: sqlite3.Error, url: str) -> StoreError:
    """Map a driver error to the flightlog error tree (the one place that knows sqlite3's messages)."""
    message = str(exc)
    if "readonly" in message or "read-only" in message:
        return ReadOnlyStore(url=url)
    if isinstance(exc, sqlite3.OperationalError) and "locked" in message:
        return StoreUnavailable(url=url, reason=f"database is locked by another writer ({message})")
    if isinstance(exc, sqlite3.DatabaseError) and ("not a database" in message or "malformed" in message):
        return StoreUnavailable(url=url, reason=f"{message}; try `flightlog db repair`")
    return StoreError(f"{url}: {message}", url=url, reason=message)
