"""The embedded default backend: one SQLite file in WAL mode (stdlib ``sqlite3``).

Durability: ``journal_mode=WAL`` and ``synchronous=FULL`` by default, so every commit is fsynced to the
WAL before ``append`` returns (``NORMAL`` is selectable: durable against process crashes, not power loss).
Writes use ``BEGIN IMMEDIATE`` so a second writer waits (``busy_timeout``) and then either appends after
the first or fails on the ``(session_id, seq)`` primary key with ``AppendConflict``; it never forks a chain.
Triggers make ``events`` append-only at the database level (ARCHITECTURE.md invariant 1).

Read-only mode opens the file with ``mode=ro`` and ``query_only``; writes raise ``ReadOnlyStore``.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
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
from ..testing.crashpoints import crash_point
from .base import (
    RUNNABLE_STATUSES,
    ArtifactRecord,
    CheckpointRecord,
    CosignatureRecord,
    EffectRecord,
    ErasureRecord,
    ImportRecord,
    IndexCheckpointRecord,
    IndexLeaf,
    LeaseClaim,
    LeaseRecord,
    LiveRunRecord,
    NewEvent,
    RunListing,
    RunRow,
    SaltedArtifactRecord,
    SessionHead,
    SessionRecord,
    Store,
    StoredEvent,
    retired_error,
)
from .group import CommitGroup, Gate
from .memory_sqlite import MIGRATION as MEMORY_MIGRATION
from .memory_sqlite import SqliteMemory

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
    (
        "ledger id, checkpoint frontiers",
        """
        CREATE TABLE ledger_meta (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL
        );
        INSERT INTO ledger_meta (key, value) VALUES ('ledger_id', lower(hex(randomblob(16))));
        CREATE TABLE checkpoint_frontiers (
            checkpoint_id INTEGER PRIMARY KEY,
            hashes BLOB NOT NULL
        );
        """,
    ),
    (
        "runs projection (seed 002 AgentRunSnapshot read model), live run heartbeats",
        """
        CREATE TABLE runs (
            run_id TEXT PRIMARY KEY,
            parent TEXT,
            source TEXT NOT NULL,
            state TEXT NOT NULL,
            outcome TEXT,
            updated_at_ms INTEGER NOT NULL,
            last_seq INTEGER NOT NULL,
            session_status TEXT,
            snapshot TEXT NOT NULL,
            fold TEXT NOT NULL
        );
        CREATE INDEX runs_updated ON runs(updated_at_ms);
        CREATE INDEX runs_state ON runs(state, updated_at_ms);
        CREATE INDEX runs_source ON runs(source);
        CREATE INDEX runs_parent ON runs(parent);
        CREATE INDEX runs_outcome ON runs(outcome);
        CREATE INDEX runs_session_status ON runs(session_status);
        CREATE TABLE runs_meta (
            key TEXT PRIMARY KEY,
            value INTEGER NOT NULL
        );
        INSERT INTO runs_meta (key, value)
            VALUES ('fold_version', CASE WHEN EXISTS (SELECT 1 FROM events) THEN 0 ELSE 1 END);
        CREATE TRIGGER runs_follow_session_status AFTER UPDATE OF status ON sessions
            BEGIN
                UPDATE runs SET session_status = NEW.status
                WHERE run_id = NEW.session_id AND session_status IS NOT NULL;
            END;
        CREATE TABLE live_runs (
            run_id TEXT PRIMARY KEY,
            state TEXT NOT NULL,
            heartbeat_at_ms INTEGER NOT NULL,
            changed_at_ms INTEGER NOT NULL,
            tokens_used INTEGER,
            steps_taken INTEGER,
            pid INTEGER
        );
        """,
    ),
    (
        "index log of session checkpoints, witness cosignatures, salted artifacts and erasures",
        """
        CREATE TABLE index_leaves (
            idx INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL,
            checkpoint_id INTEGER NOT NULL,
            leaf BLOB NOT NULL,
            recorded_at_ms INTEGER NOT NULL
        );
        CREATE INDEX index_leaves_session ON index_leaves(session_id, idx);
        CREATE TRIGGER index_leaves_no_update BEFORE UPDATE ON index_leaves
            BEGIN SELECT RAISE(ABORT, 'flightlog index leaves are append-only'); END;
        CREATE TRIGGER index_leaves_no_delete BEFORE DELETE ON index_leaves
            BEGIN SELECT RAISE(ABORT, 'flightlog index leaves are append-only'); END;
        CREATE TABLE index_checkpoints (
            checkpoint_id INTEGER PRIMARY KEY AUTOINCREMENT,
            size INTEGER NOT NULL,
            root TEXT NOT NULL,
            body TEXT NOT NULL,
            frontier BLOB,
            created_at_ms INTEGER NOT NULL
        );
        CREATE INDEX index_checkpoints_size ON index_checkpoints(size);
        CREATE TABLE cosignatures (
            origin TEXT NOT NULL,
            size INTEGER NOT NULL,
            witness TEXT NOT NULL,
            root TEXT NOT NULL,
            note TEXT NOT NULL,
            created_at_ms INTEGER NOT NULL,
            PRIMARY KEY (origin, size, witness)
        );
        CREATE TABLE salted_artifacts (
            digest TEXT PRIMARY KEY,
            media_type TEXT NOT NULL,
            size_bytes INTEGER NOT NULL,
            content BLOB NOT NULL,
            salt BLOB NOT NULL,
            created_at_ms INTEGER NOT NULL
        );
        CREATE TABLE artifact_refs (
            digest TEXT NOT NULL,
            session_id TEXT NOT NULL,
            PRIMARY KEY (digest, session_id)
        );
        CREATE TABLE artifact_erasures (
            digest TEXT PRIMARY KEY,
            erased_at_ms INTEGER NOT NULL,
            log_session_id TEXT NOT NULL,
            log_seq INTEGER NOT NULL
        );
        """,
    ),
    (
        "runs: no index follows updated_at_ms, which every append moves (fewer WAL pages per commit)",
        """
        DROP INDEX IF EXISTS runs_state;
        CREATE INDEX runs_state ON runs(state);
        DROP INDEX IF EXISTS runs_outcome;
        DROP INDEX IF EXISTS runs_updated;
        """,
    ),
    (
        "fleet leases (holder, epoch, expiry per session), carried over from the fleet's fleet_leases",
        """
        CREATE TABLE IF NOT EXISTS fleet_leases (
            session_id TEXT PRIMARY KEY,
            holder TEXT,
            epoch INTEGER NOT NULL DEFAULT 0,
            expires_at_ms INTEGER NOT NULL DEFAULT 0,
            acquired_at_ms INTEGER NOT NULL DEFAULT 0,
            parked_seq INTEGER NOT NULL DEFAULT -2,
            queued_at_ms INTEGER NOT NULL
        );
        CREATE TABLE leases (
            session_id TEXT PRIMARY KEY,
            holder TEXT,
            epoch INTEGER NOT NULL DEFAULT 0,
            expires_at_ms INTEGER NOT NULL DEFAULT 0,
            acquired_at_ms INTEGER NOT NULL DEFAULT 0,
            parked_seq INTEGER NOT NULL DEFAULT -2,
            queued_at_ms INTEGER NOT NULL
        );
        CREATE INDEX leases_expiry ON leases(expires_at_ms);
        INSERT INTO leases (session_id, holder, epoch, expires_at_ms, acquired_at_ms, parked_seq, queued_at_ms)
            SELECT session_id, holder, epoch, expires_at_ms, acquired_at_ms, parked_seq, queued_at_ms
            FROM fleet_leases;
        DROP TABLE fleet_leases;
        """,
    ),
    MEMORY_MIGRATION,
]
"""Ordered migrations: list index + 1 is the schema version. Never edit one that has shipped; append."""


class _Exclusive:
    """``with store._lock:`` for calls outside a block: takes the gate, committing an open group first."""

    __slots__ = ("_store",)

    def __init__(self, store: SqliteStore) -> None:
        self._store = store

    def __enter__(self) -> None:
        self._store._exclusive()

    def __exit__(self, *exc: object) -> None:
        self._store._gate.release()


class SqliteStore(Store):
    """A :class:`Store` in one SQLite file.

    Args:
        path: Database file (created with its folder unless ``read_only``), or ``":memory:"``.
        read_only: Open with ``mode=ro``; every write raises ``ReadOnlyStore``.
        synchronous: ``"FULL"`` (default: fsync every commit) or ``"NORMAL"``.
        busy_timeout_ms: How long a writer waits for another's lock before failing, in ms.
        group_commit: Let transactions of several threads that end together share one commit
            (:mod:`flightlog.store.group`); False commits each on its own.

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
        group_commit: bool = True,
    ) -> None:
        if synchronous.upper() not in ("FULL", "NORMAL", "EXTRA"):
            raise ValueError(f"synchronous must be FULL, NORMAL or EXTRA, not {synchronous!r}")
        self.path = str(path)
        self.url = f"sqlite:///{self.path}"
        self.read_only = read_only
        self._gate = Gate(enabled=group_commit)
        self._lock = _Exclusive(self)
        """Held for every call outside a block; entering it commits an open group first."""
        self._depth = 0
        """Nesting of the open transaction (0: none); meaningful only to its owner, which holds the gate."""
        self._owner: int | None = None
        """``threading.get_ident()`` of the thread whose transaction is open (None: none is). The connection
        is shared, so a call of another thread must not mistake that transaction for its own: it waits
        for the gate instead of joining (its write would be acknowledged before any commit, and lost if
        that transaction rolled back)."""
        self._after_commit: list[Callable[[], None]] = []
        self._after_rollback: list[Callable[[], None]] = []
        self._guard_retired = False
        """Check every write transaction against a retirement (on once the schema has ``ledger_meta``)."""
        self._conn = self._connect(synchronous.upper(), busy_timeout_ms)
        try:
            if not read_only:
                self._migrate()
                self._guard_retired = True
            elif self.schema_version() == 0:
                raise StoreUnavailable(url=self.url, reason="no flightlog schema in this database")
        except BaseException:
            self._conn.close()
            raise

    # ─── connection and transactions ──────────────────────────────────────────────────────
    def _connect(self, synchronous: str, busy_timeout_ms: int) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = None
        try:
            if self.path == ":memory:":
                conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            elif self.read_only:
                uri = Path(self.path).resolve().as_uri() + "?mode=ro"
                conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
            else:
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
                if not Path(self.path).exists():
                    # Transcripts and tool outputs are private: the file (and the -wal/-shm files SQLite
                    # creates with the same mode) is readable by its owner only.
                    os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
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
            conn.execute("PRAGMA secure_delete = ON")  # erased artifacts leave zeroed pages, not their bytes
            return conn
        except BaseException as exc:
            if conn is not None:
                conn.close()
            if isinstance(exc, sqlite3.Error):
                raise StoreUnavailable(url=self.url, reason=str(exc)) from exc
            raise

    def close(self) -> None:
        with self._lock:  # commits an open group first
            self._conn.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One ``BEGIN IMMEDIATE`` transaction; a nested block is a SAVEPOINT. Rolls back on any exception.

        With group commit (the default), blocks of several threads that end while others wait for this
        store share one ``COMMIT`` (see :mod:`flightlog.store.group`); the block still returns only once
        its writes are durable, and a failed ``COMMIT`` fails every block of the group.
        """
        gate = self._gate
        gate.acquire()
        try:
            if self._depth:
                yield from self._savepoint()
                return
            self._check_writable()
            group = gate.group
            joined = group is not None
            try:
                self._conn.execute("SAVEPOINT flightlog_member" if joined else "BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise _translate(exc, self.url) from exc
            if group is None:
                group = gate.group = CommitGroup()
            self._depth, self._owner = 1, threading.get_ident()
            self._after_commit, self._after_rollback = [], []
            try:
                if self._guard_retired:  # under the write lock: a retirement commits before or not at all
                    self._refuse_if_retired()
                yield
                if joined:
                    self._conn.execute("RELEASE flightlog_member")
            except BaseException as exc:
                self._depth, self._owner = 0, None
                callbacks, self._after_rollback, self._after_commit = self._after_rollback, [], []
                self._abandon(group, joined)
                for callback in reversed(callbacks):
                    callback()
                if isinstance(exc, sqlite3.Error):
                    raise _translate(exc, self.url) from exc
                raise
            self._depth, self._owner = 0, None
            group.size += 1
            after_commit, after_rollback = self._after_commit, self._after_rollback
            self._after_commit, self._after_rollback = [], []
            defer = gate.should_defer(group)
            if not defer:
                self._commit_group(group)
        finally:
            gate.release()
        gate.conclude(
            group,
            deferred=defer,
            commit=self._commit_group,
            after_commit=after_commit,
            after_rollback=after_rollback,
            translate=lambda exc: _translate(exc, self.url) if isinstance(exc, sqlite3.Error) else exc,
        )

    def _savepoint(self) -> Iterator[None]:
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

    def _abandon(self, group: CommitGroup, joined: bool) -> None:
        """Undo a failed outermost block: its savepoint when it joined a group (the group goes on), else
        the whole transaction (it opened the group, so nobody else is in it yet)."""
        if joined:
            self._gate.abandon_member(group, self._undo_member, self._commit_group)
            return
        self._gate.group = None
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")

    def _undo_member(self) -> None:
        self._conn.execute("ROLLBACK TO flightlog_member")
        self._conn.execute("RELEASE flightlog_member")

    def _commit_group(self, group: CommitGroup) -> None:
        """COMMIT the open group (gate held, no block running) and wake its blocks; never raises: a
        failure (or an earlier fatal one in ``group.error``) rolls back and is reported to every block."""
        self._gate.group = None
        try:
            if group.error is None:
                crash_point("commit.before")  # test-only fault injection (flightlog.testing.crashpoints)
                self._conn.execute("COMMIT")
                crash_point("commit.after")
        except BaseException as exc:
            group.error = exc
        if group.error is not None and self._conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")
        group.finished()

    def _exclusive(self) -> None:
        """Take the gate for a call outside any block: commit an open group first (see
        :mod:`flightlog.store.group`), so the call neither reads nor joins uncommitted blocks."""
        gate = self._gate
        gate.acquire()
        if gate.group is not None and not self._depth:
            self._commit_group(gate.group)

    def _in_own_transaction(self) -> bool:
        """True when the calling thread has a transaction open (another thread's does not count)."""
        return self._depth > 0 and self._owner == threading.get_ident()

    def call_after_commit(self, callback: Callable[[], None]) -> None:
        if not self._in_own_transaction():
            raise RuntimeError("call_after_commit outside a transaction")
        self._after_commit.append(callback)

    def call_after_rollback(self, callback: Callable[[], None]) -> None:
        if not self._in_own_transaction():
            raise RuntimeError("call_after_rollback outside a transaction")
        self._after_rollback.append(callback)

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
        # Inside this thread's transaction (the recorder's), no savepoint of our own: every check below runs
        # before the first write, and the caller's block rolls back whole on any error. Another thread's
        # open transaction is not ours: then transaction() waits for it to end.
        with contextlib.nullcontext() if self._in_own_transaction() else self.transaction():
            row = self._execute(
                "SELECT s.head_seq, s.head_hash, a.epoch FROM sessions s "
                "JOIN authority_epochs a ON a.session_id = s.session_id WHERE s.session_id = ?",
                (session_id,),
            ).fetchone()
            if row is None:
                raise SessionNotFound(session_id=session_id)
            head_seq, head_hash, current = row
            if epoch is not None and current != epoch:
                raise StaleWriter(session_id=session_id, epoch=epoch, current_epoch=current)
            if rows and (rows[0].seq != head_seq + 1 or rows[0].prev_hash != head_hash):
                raise AppendConflict(session_id=session_id, seq=min(rows[0].seq, head_seq + 1))
            try:
                self._conn.executemany(
                    "INSERT INTO events (session_id, seq, kind, event, prev_hash, hash, recorded_at_ms) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [(session_id, r.seq, r.kind, r.event_bytes, r.prev_hash, r.hash, stamp) for r in rows],
                )
            except sqlite3.IntegrityError as exc:
                raise AppendConflict(session_id=session_id, seq=self._first_taken(session_id, rows)) from exc
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

    def _first_taken(self, session_id: str, rows: Sequence[NewEvent]) -> int:
        """The lowest seq of ``rows`` already stored (the one that conflicted)."""
        seqs = [r.seq for r in rows]
        marks = ",".join("?" * len(seqs))
        found = self._execute(
            f"SELECT MIN(seq) FROM events WHERE session_id = ? AND seq IN ({marks})", (session_id, *seqs)
        ).fetchone()
        return int(found[0]) if found and found[0] is not None else (seqs[0] if seqs else -1)

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
                yield StoredEvent(session_id, seq, kind, _as_bytes(data), prev_hash, hash_, at)
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

    def ledger_id(self) -> str:
        row = self._one("SELECT value FROM ledger_meta WHERE key = 'ledger_id'")
        if row is None:
            raise StoreError(f"{self.url}: no ledger id")
        return str(row[0])

    def record_checkpoint_frontier(self, checkpoint_id: int, frontier: bytes) -> None:
        with self.transaction():
            self._execute("INSERT INTO checkpoint_frontiers VALUES (?, ?)", (checkpoint_id, frontier))

    def checkpoint_frontier(self, checkpoint_id: int) -> bytes | None:
        row = self._one("SELECT hashes FROM checkpoint_frontiers WHERE checkpoint_id = ?", (checkpoint_id,))
        return bytes(row[0]) if row and isinstance(row[0], bytes) else None

    def latest_checkpoint(self, session_id: str, *, max_size: int | None = None) -> CheckpointRecord | None:
        row = self._one(
            "SELECT session_id, checkpoint_id, size, root, body, created_at_ms FROM checkpoints "
            "WHERE session_id = ? AND size <= ? ORDER BY size DESC, checkpoint_id DESC LIMIT 1",
            (session_id, 2**63 - 1 if max_size is None else max_size),
        )
        return CheckpointRecord(*row) if row else None

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

    # ─── runs projection (seed 002 read model) ────────────────────────────────────────────
    def _has_table(self, name: str) -> bool:
        return self._one("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)) is not None

    def run_projection_version(self) -> int | None:
        if not self._has_table("runs_meta"):
            return None
        row = self._one("SELECT value FROM runs_meta WHERE key = 'fold_version'")
        return int(row[0]) if row else 0

    def set_run_projection_version(self, version: int) -> None:
        with self.transaction():
            self._execute(
                "INSERT OR REPLACE INTO runs_meta (key, value) VALUES ('fold_version', ?)", (version,)
            )

    def get_run_rows(self, run_ids: Collection[str]) -> dict[str, RunRow]:
        ids = list(dict.fromkeys(run_ids))
        found: dict[str, RunRow] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for row in self._all(f"SELECT {_RUN_COLUMNS} FROM runs WHERE run_id IN ({marks})", chunk):
                found[row[0]] = RunRow(*row)
        return found

    def put_run_rows(self, rows: Sequence[RunRow]) -> None:
        """Upsert rows. An existing row whose parent, source, outcome and status are unchanged (every
        append but a few) is updated in place without touching the indexes on those columns, and one
        whose state is unchanged too without touching ``runs_state``: then the only page an append dirties
        here is the row's own (no index covers ``updated_at_ms``; listings sort, see migration 5)."""
        with self._lock:
            if len(rows) == 1 and self._in_own_transaction():
                # Inside this thread's open transaction one row needs no savepoint of its own: at most one
                # of the statements below changes anything, and a failed statement leaves nothing behind.
                self._put_run_row(rows[0])
                return
            with self.transaction():
                for r in rows:
                    self._put_run_row(r)

    def _put_run_row(self, r: RunRow) -> None:
        try:
            execute = self._conn.execute
            moved = (r.updated_at_ms, r.last_seq, r.snapshot, r.fold)
            kept = (r.run_id, r.parent, r.source, r.outcome, r.session_status)
            if execute(_RUN_UPDATE_SAME_STATE, (*moved, *kept, r.state)).rowcount:
                return
            if execute(_RUN_UPDATE, (r.state, *moved, *kept)).rowcount == 0:
                execute(_RUN_UPSERT, _run_values(r))
        except sqlite3.Error as exc:
            raise _translate(exc, self.url) from exc

    def replace_run_row(self, row: RunRow, expected: RunRow) -> bool:
        """One ``UPDATE`` guarded by every column of ``expected`` that sets only the columns that differ
        from it, so (as in :meth:`put_run_rows`) an unchanged indexed column leaves its index alone."""
        if row.run_id != expected.run_id:
            raise ValueError(f"replace_run_row: row of {row.run_id!r} cannot replace {expected.run_id!r}")
        old, new = _run_tuple(expected), _run_tuple(row)
        changed = tuple(i for i in range(1, len(new)) if new[i] != old[i]) or (len(new) - 1,)
        params = (*(new[i] for i in changed), *old)
        with self._lock:
            if self._in_own_transaction():
                # Inside this thread's open transaction: one statement, which writes nothing if it fails.
                return self._swap_run_row(changed, params)
            with self.transaction():
                return self._swap_run_row(changed, params)

    def _swap_run_row(self, changed: tuple[int, ...], params: tuple[Any, ...]) -> bool:
        try:
            return self._conn.execute(_run_swap(changed), params).rowcount == 1
        except sqlite3.Error as exc:
            raise _translate(exc, self.url) from exc

    def clear_run_rows(self) -> None:
        with self.transaction():
            self._execute("DELETE FROM runs")

    def query_runs(
        self,
        *,
        states: Collection[str] | None = None,
        source: str | None = None,
        parent: str | None = None,
        refined_statuses: Mapping[str, str] | None = None,
        limit: int | None = None,
    ) -> list[RunListing]:
        where: list[str] = []
        params: list[Any] = []
        if states is not None:
            clause, values = _state_clause(list(states), dict(refined_statuses or {}))
            where.append(clause)
            params.extend(values)
        for column, value in (("source", source), ("parent", parent)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        sql = (
            "SELECT run_id, parent, source, state, updated_at_ms, session_status, snapshot FROM runs"
            + (" WHERE " + " AND ".join(where) if where else "")
            + " ORDER BY updated_at_ms DESC, run_id"
            + (f" LIMIT {max(0, int(limit))}" if limit is not None else "")
        )
        if not self._has_table("runs"):
            return []
        return [RunListing(*row) for row in self._all(sql, params)]

    # ─── live runs ────────────────────────────────────────────────────────────────────────
    def put_live_run(self, record: LiveRunRecord) -> None:
        with self.transaction():
            self._execute(
                "INSERT OR REPLACE INTO live_runs (run_id, state, heartbeat_at_ms, changed_at_ms, tokens_used,"
                " steps_taken, pid) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    record.run_id,
                    record.state,
                    record.heartbeat_at_ms,
                    record.changed_at_ms,
                    record.tokens_used,
                    record.steps_taken,
                    record.pid,
                ),
            )

    def delete_live_run(self, run_id: str) -> None:
        with self.transaction():
            self._execute("DELETE FROM live_runs WHERE run_id = ?", (run_id,))

    def live_runs(self) -> list[LiveRunRecord]:
        if not self._has_table("live_runs"):
            return []
        rows = self._all(
            "SELECT run_id, state, heartbeat_at_ms, changed_at_ms, tokens_used, steps_taken, pid FROM live_runs"
            " ORDER BY run_id"
        )
        return [LiveRunRecord(*row) for row in rows]

    # ─── index log, cosignatures ──────────────────────────────────────────────────────────
    def index_supported(self) -> bool:
        return self._has_table("index_leaves")

    def lock_index(self) -> None:
        return  # BEGIN IMMEDIATE already serialises every writer of the file

    def append_index_leaf(self, idx: int, session_id: str, checkpoint_id: int, leaf: bytes) -> None:
        with self.transaction():
            if idx != self.index_size():
                raise AppendConflict(session_id="(index log)", seq=idx)
            try:
                self._conn.execute(
                    "INSERT INTO index_leaves VALUES (?, ?, ?, ?, ?)",
                    (idx, session_id, checkpoint_id, leaf, now_ms()),
                )
            except sqlite3.IntegrityError as exc:
                raise AppendConflict(session_id="(index log)", seq=idx) from exc
            except sqlite3.Error as exc:
                raise _translate(exc, self.url) from exc

    def index_size(self) -> int:
        if not self._has_table("index_leaves"):
            return 0
        row = self._one("SELECT MAX(idx) FROM index_leaves")
        return 0 if row is None or row[0] is None else int(row[0]) + 1

    def read_index_leaves(
        self, *, start: int = 0, stop: int | None = None, batch: int = 512
    ) -> Iterator[IndexLeaf]:
        if not self._has_table("index_leaves"):
            return
        upper = stop if stop is not None else 2**63 - 1
        position = start
        while True:
            rows = self._all(
                "SELECT idx, session_id, checkpoint_id, leaf, recorded_at_ms FROM index_leaves "
                "WHERE idx >= ? AND idx < ? ORDER BY idx LIMIT ?",
                (position, upper, batch),
            )
            for idx, sid, cid, leaf, at in rows:
                yield IndexLeaf(idx, sid, cid, _as_bytes(leaf), at)
            if len(rows) < batch:
                return
            position = rows[-1][0] + 1

    def index_leaves_of(self, session_id: str) -> list[IndexLeaf]:
        if not self._has_table("index_leaves"):
            return []
        rows = self._all(
            "SELECT idx, session_id, checkpoint_id, leaf, recorded_at_ms FROM index_leaves "
            "WHERE session_id = ? ORDER BY idx",
            (session_id,),
        )
        return [IndexLeaf(idx, sid, cid, _as_bytes(leaf), at) for idx, sid, cid, leaf, at in rows]

    def record_index_checkpoint(self, size: int, root: str, body: str, frontier: bytes) -> int:
        with self.transaction():
            cur = self._execute(
                "INSERT INTO index_checkpoints (size, root, body, frontier, created_at_ms) VALUES (?, ?, ?, ?, ?)",
                (size, root, body, frontier, now_ms()),
            )
            return int(cur.lastrowid or 0)

    def latest_index_checkpoint(self, *, max_size: int | None = None) -> IndexCheckpointRecord | None:
        if not self._has_table("index_checkpoints"):
            return None
        row = self._one(
            f"SELECT {_INDEX_CHECKPOINT_COLUMNS} FROM index_checkpoints WHERE size <= ? "
            "ORDER BY size DESC, checkpoint_id DESC LIMIT 1",
            (2**63 - 1 if max_size is None else max_size,),
        )
        return _index_checkpoint(row) if row else None

    def index_checkpoints(self) -> Iterator[IndexCheckpointRecord]:
        if not self._has_table("index_checkpoints"):
            return
        for row in self._all(
            f"SELECT {_INDEX_CHECKPOINT_COLUMNS} FROM index_checkpoints ORDER BY checkpoint_id"
        ):
            yield _index_checkpoint(row)

    def record_cosignature(self, record: CosignatureRecord) -> None:
        with self.transaction():
            self._execute(
                "INSERT OR REPLACE INTO cosignatures (origin, size, witness, root, note, created_at_ms) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (record.origin, record.size, record.witness, record.root, record.note, record.created_at_ms),
            )

    def cosignatures(self, origin: str) -> list[CosignatureRecord]:
        if not self._has_table("cosignatures"):
            return []
        rows = self._all(
            "SELECT origin, size, root, witness, note, created_at_ms FROM cosignatures WHERE origin = ? "
            "ORDER BY size, witness",
            (origin,),
        )
        return [CosignatureRecord(*row) for row in rows]

    # ─── salted (erasable) artifacts ──────────────────────────────────────────────────────
    def put_salted_artifact(
        self, digest: str, salt: bytes, content: bytes, media_type: str, *, session_id: str | None = None
    ) -> SaltedArtifactRecord:
        stamp = now_ms()
        with self.transaction():
            self._execute(
                "INSERT OR IGNORE INTO salted_artifacts VALUES (?, ?, ?, ?, ?, ?)",
                (digest, media_type, len(content), content, salt, stamp),
            )
            if session_id is not None:
                self._execute("INSERT OR IGNORE INTO artifact_refs VALUES (?, ?)", (digest, session_id))
        return SaltedArtifactRecord(digest, media_type, len(content), stamp)

    def get_salted_artifact(self, digest: str) -> tuple[bytes, bytes] | None:
        if not self._has_table("salted_artifacts"):
            return None
        row = self._one("SELECT content, salt FROM salted_artifacts WHERE digest = ?", (digest,))
        return (bytes(row[0]), bytes(row[1])) if row else None

    def salted_artifact_info(self, digest: str) -> SaltedArtifactRecord | None:
        if not self._has_table("salted_artifacts"):
            return None
        row = self._one(
            "SELECT digest, media_type, size_bytes, created_at_ms FROM salted_artifacts WHERE digest = ?",
            (digest,),
        )
        return SaltedArtifactRecord(*row) if row else None

    def artifact_sessions(self, digest: str) -> list[str]:
        if not self._has_table("artifact_refs"):
            return []
        rows = self._all(
            "SELECT session_id FROM artifact_refs WHERE digest = ? ORDER BY session_id", (digest,)
        )
        return [str(r[0]) for r in rows]

    def erase_salted_artifact(self, record: ErasureRecord) -> bool:
        with self.transaction():  # secure_delete (set on connect) zeroes the freed pages
            cur = self._execute("DELETE FROM salted_artifacts WHERE digest = ?", (record.digest,))
            self._execute(
                "INSERT OR IGNORE INTO artifact_erasures VALUES (?, ?, ?, ?)",
                (record.digest, record.erased_at_ms, record.log_session_id, record.log_seq),
            )
            return cur.rowcount > 0

    def erasure(self, digest: str) -> ErasureRecord | None:
        if not self._has_table("artifact_erasures"):
            return None
        row = self._one(
            "SELECT digest, erased_at_ms, log_session_id, log_seq FROM artifact_erasures WHERE digest = ?",
            (digest,),
        )
        return ErasureRecord(*row) if row else None

    @property
    def memory(self) -> SqliteMemory:
        """The long-term memory index in this database (:mod:`flightlog.store.memory`)."""
        return SqliteMemory(self)

    def purge_freed_pages(self) -> None:
        if self.read_only or self.path == ":memory:":
            return
        with self._lock:
            if self._depth:
                return
            try:
                self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            except sqlite3.Error:
                return  # best effort: a reader holding the WAL keeps it until the next checkpoint

    # ─── fleet leases (flightlog.fleet) ───────────────────────────────────────────────────
    # Claims run in one BEGIN IMMEDIATE transaction, which serialises claimers on the file (SQLite has one
    # writer anyway), so two workers never claim the same session; the epoch bump commits with the claim.
    def open_lease(self, session_id: str) -> None:
        with self.transaction():
            self._execute(
                "INSERT OR IGNORE INTO leases (session_id, queued_at_ms) VALUES (?, ?)",
                (session_id, now_ms()),
            )

    def get_lease(self, session_id: str) -> LeaseRecord | None:
        if not self._has_table("leases"):
            return None  # a read-only handle on a database from before migration 6
        row = self._one(f"SELECT {_LEASE_COLUMNS} FROM leases WHERE session_id = ?", (session_id,))
        return LeaseRecord(*row) if row else None

    def claim_sessions(
        self, holder: str, *, ttl_ms: int, limit: int = 1, session_id: str | None = None
    ) -> list[LeaseClaim]:
        stamp = now_ms()
        only = " AND l.session_id = ?" if session_id is not None else ""
        params: list[Any] = [stamp, *RUNNABLE_STATUSES]
        if session_id is not None:
            params.append(session_id)
        params.append(limit)
        claims: list[LeaseClaim] = []
        with self.transaction():
            rows = self._execute(
                "SELECT l.session_id, l.holder, s.status FROM leases l JOIN sessions s "
                "ON s.session_id = l.session_id WHERE l.expires_at_ms < ? AND s.status IN "
                f"({_marks(RUNNABLE_STATUSES)}) AND s.head_seq <> l.parked_seq{only} "
                "ORDER BY l.queued_at_ms, l.session_id LIMIT ?",
                params,
            ).fetchall()
            for sid, previous, status in rows:
                epoch = self.bump_authority_epoch(sid)
                self._execute(
                    "UPDATE leases SET holder = ?, epoch = ?, expires_at_ms = ?, acquired_at_ms = ?, "
                    "parked_seq = -2 WHERE session_id = ?",
                    (holder, epoch, stamp + ttl_ms, stamp, sid),
                )
                claims.append(LeaseClaim(sid, epoch, previous, status))
        return claims

    def renew_lease(self, session_id: str, holder: str, *, ttl_ms: int) -> bool:
        with self.transaction():
            cur = self._execute(
                "UPDATE leases SET expires_at_ms = ? WHERE session_id = ? AND holder = ?",
                (now_ms() + ttl_ms, session_id, holder),
            )
            return cur.rowcount > 0

    def release_lease(self, session_id: str, holder: str, *, park: bool = False) -> bool:
        with self.transaction():
            cur = self._execute(
                "UPDATE leases SET holder = NULL, expires_at_ms = 0, parked_seq = CASE WHEN ? THEN "
                "(SELECT head_seq FROM sessions WHERE session_id = ?) ELSE -2 END "
                "WHERE session_id = ? AND holder = ?",
                (park, session_id, session_id, holder),
            )
            return cur.rowcount > 0

    # ─── retirement (flightlog db copy) ───────────────────────────────────────────────────
    def _refuse_if_retired(self) -> None:
        row = self._conn.execute("SELECT value FROM ledger_meta WHERE key = 'retired'").fetchone()
        if row is not None:
            raise retired_error(self.url, str(row[0]))

    def retirement(self) -> str | None:
        if not self._has_table("ledger_meta"):
            return None  # a read-only handle on a database from before ledger ids
        row = self._one("SELECT value FROM ledger_meta WHERE key = 'retired'")
        return None if row is None else str(row[0])

    def retirement_record(self) -> str | None:
        if not self._has_table("ledger_meta"):
            return None
        row = self._one("SELECT value FROM ledger_meta WHERE key = 'retired_record'")
        return None if row is None else str(row[0])

    def retire(self, summary: str, record: str) -> None:
        with self.transaction():
            if self._one("SELECT 1 FROM ledger_meta WHERE key = 'retired'") is not None:
                raise StoreError(f"{self.url} is retired already")
            self._execute(
                "INSERT INTO ledger_meta (key, value) VALUES ('retired', ?), ('retired_record', ?)",
                (summary, record),
            )

    # ─── adopting another database's ledger id (flightlog db copy) ────────────────────────
    def adopt_ledger_id(self, ledger_id: str) -> None:
        if not 8 <= len(ledger_id) <= 64 or any(c not in "0123456789abcdef" for c in ledger_id):
            raise StoreError(f"ledger id {ledger_id[:70]!r} is not 8-64 lowercase hex")
        with self.transaction():
            row = self._one("SELECT value FROM ledger_meta WHERE key = 'ledger_id'")
            current = str(row[0]) if row is not None else None
            if current == ledger_id:
                return
            if self._one("SELECT 1 FROM sessions LIMIT 1") is not None or self.index_size():
                raise StoreError(
                    f"{self.url} holds sessions of ledger {current}; refusing to change its ledger id to "
                    f"{ledger_id} (their signed checkpoints name {current} in their origins)"
                )
            self._execute(
                "INSERT INTO ledger_meta (key, value) VALUES ('ledger_id', ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (ledger_id,),
            )


_SESSION_COLUMNS = (
    "session_id, task, status, source, created_at_ms, updated_at_ms, head_seq, head_hash, merkle_root, "
    "parent_session_id, metadata"
)
_EFFECT_COLUMNS = "session_id, idempotency_key, intent_hash, intent_json, status, result_json, created_at_ms, completed_at_ms"


_RUN_COLUMNS = (
    "run_id, parent, source, state, outcome, updated_at_ms, last_seq, session_status, snapshot, fold"
)
_RUN_UPDATE = (
    "UPDATE runs SET state = ?, updated_at_ms = ?, last_seq = ?, snapshot = ?, fold = ? "
    "WHERE run_id = ? AND parent IS ? AND source = ? AND outcome IS ? AND session_status IS ?"
)
_RUN_UPDATE_SAME_STATE = (
    "UPDATE runs SET updated_at_ms = ?, last_seq = ?, snapshot = ?, fold = ? "
    "WHERE run_id = ? AND parent IS ? AND source = ? AND outcome IS ? AND session_status IS ? AND state = ?"
)
_RUN_UPSERT = (
    f"INSERT INTO runs ({_RUN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in _RUN_COLUMNS.split(", ")[1:])
)


def _run_values(r: RunRow) -> tuple[Any, ...]:
    return tuple(getattr(r, column) for column in _RUN_COLUMNS.split(", "))


def _run_tuple(r: RunRow) -> tuple[Any, ...]:
    """A row's values in ``_RUN_COLUMNS`` order (``_run_values`` without its per-call lookups)."""
    return (
        r.run_id, r.parent, r.source, r.state, r.outcome, r.updated_at_ms, r.last_seq, r.session_status,
        r.snapshot, r.fold,
    )  # fmt: skip


_RUN_SWAPS: dict[tuple[int, ...], str] = {}


def _run_swap(changed: tuple[int, ...]) -> str:
    """``replace_run_row``'s UPDATE setting the columns at ``changed`` (indexes into ``_RUN_COLUMNS``),
    guarded by every column: params are the new values of ``changed``, then the expected row's values."""
    sql = _RUN_SWAPS.get(changed)
    if sql is not None:
        return sql
    columns = _RUN_COLUMNS.split(", ")
    sets = ", ".join(f"{columns[i]} = ?" for i in changed)
    guard = " AND ".join(f"{c} IS ?" for c in columns[1:])
    sql = _RUN_SWAPS[changed] = f"UPDATE runs SET {sets} WHERE run_id = ? AND {guard}"
    return sql


_INDEX_CHECKPOINT_COLUMNS = "checkpoint_id, size, root, body, frontier, created_at_ms"
_LEASE_COLUMNS = "session_id, holder, epoch, expires_at_ms, acquired_at_ms, parked_seq"


def _index_checkpoint(row: Sequence[Any]) -> IndexCheckpointRecord:
    frontier = bytes(row[4]) if isinstance(row[4], bytes | bytearray | memoryview) else None
    return IndexCheckpointRecord(int(row[0]), int(row[1]), str(row[2]), str(row[3]), frontier, int(row[5]))


def _state_clause(states: list[str], refined: dict[str, str]) -> tuple[str, list[Any]]:
    """SQL for "the run's effective state is one of ``states``" (see ``Store.query_runs``).

    Two OR'ed terms, each served by an index: rows the status does not override (``runs_state``), and
    in-flight rows whose status forces a wanted state (``runs_session_status``).
    """
    if not states:
        return "0", []
    params: list[Any] = list(states)
    clause = f"(state IN ({','.join('?' * len(states))})"
    if refined:
        clause += f" AND (state = 'terminal' OR session_status IS NULL OR session_status NOT IN ({_marks(refined)}))"
        params.extend(refined)
    clause += ")"
    forcing = [status for status, state in refined.items() if state in states]
    if forcing:
        clause += f" OR (session_status IN ({_marks(forcing)}) AND state != 'terminal')"
        params.extend(forcing)
    return f"({clause})", params


def _marks(values: Collection[Any]) -> str:
    return ",".join("?" * len(values))


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


def _as_bytes(data: object) -> bytes:
    """A stored event value as bytes; a tampered TEXT/INTEGER value is kept as its UTF-8 text so
    verification reports it as a hash mismatch instead of crashing."""
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    return str(data).encode("utf-8", "surrogatepass")


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
