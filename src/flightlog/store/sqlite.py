"""The embedded default backend: one SQLite file in WAL mode (stdlib ``sqlite3``).

Durability: ``journal_mode=WAL`` and ``synchronous=FULL`` by default, so every commit is fsynced to the
WAL before ``append`` returns (``NORMAL`` is selectable: durable against process crashes, not power loss).
Writes use ``BEGIN IMMEDIATE`` so a second writer waits (``busy_timeout``) and then either appends after
the first or fails on the ``(session_id, seq)`` primary key with ``AppendConflict``; it never forks a chain.
Triggers make ``events`` append-only at the database level (ARCHITECTURE.md invariant 1).

One connection serves every thread of the process, behind a gate (:mod:`flightlog.store.group`): an open
transaction belongs to the thread that opened it, and any other thread's call waits for it to end. The
statements and write steps live in :class:`flightlog.store.sql.SqlStore`; this module keeps the
connection, the transactions, the migrations runner and the SQLite-only paths (the runs projection's
in-place updates, freeing erased pages).

Read-only mode opens the file with ``mode=ro`` and ``query_only``; writes raise ``ReadOnlyStore``.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import Any

from ..errors import (
    AppendConflict,
    ReadOnlyStore,
    StoreError,
    StoreUnavailable,
)
from ..testing.crashpoints import crash_point
from .base import NO_SCHEMA, NewEvent, RunRow, SessionHead, row_stamps
from .ddl import (
    LIVE_RUNS_OWNER,
    RUNS_FOLD_2,
    RUNS_FOLD_3,
    RUNS_FOLD_4,
    RUNS_FOLD_5,
    RUNS_FOLD_6,
    RUNS_FOLD_7,
    SQLITE_EVENTS_SUSPENDED,
    SQLITE_MIGRATIONS,
    SQLITE_RUNS_LIST,
)
from .group import CommitGroup, Gate
from .memory_sqlite import MIGRATION as MEMORY_MIGRATION
from .memory_sqlite import SqliteMemory
from .rows import consecutive, now_ms, run_tuple
from .signals import SQLITE_MIGRATION as SIGNALS_MIGRATION
from .sql import (
    HEAD_FOR_APPEND,
    INSERT_EVENT,
    RUN_UPSERT,
    UPDATE_HEAD,
    SqlStore,
    append_refusal,
    run_swap_params,
)

__all__ = ["MIGRATIONS", "SqliteStore", "now_ms"]

MIGRATIONS: list[tuple[str, str]] = [
    *SQLITE_MIGRATIONS,
    MEMORY_MIGRATION,
    SIGNALS_MIGRATION,
    SQLITE_RUNS_LIST,
    RUNS_FOLD_2,
    RUNS_FOLD_3,
    RUNS_FOLD_4,
    RUNS_FOLD_5,
    RUNS_FOLD_6,
    RUNS_FOLD_7,
    SQLITE_EVENTS_SUSPENDED,
    LIVE_RUNS_OWNER,
]
"""Ordered migrations (:data:`flightlog.store.ddl.SQLITE_MIGRATIONS`, then long-term memory's, then the signal queue's, then the paged runs list's, then the fold rules' :data:`flightlog.store.ddl.RUNS_FOLD_2`, then :data:`flightlog.store.ddl.RUNS_FOLD_3`, then :data:`flightlog.store.ddl.RUNS_FOLD_4`, then :data:`flightlog.store.ddl.RUNS_FOLD_5`, then :data:`flightlog.store.ddl.RUNS_FOLD_6`, then :data:`flightlog.store.ddl.RUNS_FOLD_7`, then :data:`flightlog.store.ddl.SQLITE_EVENTS_SUSPENDED`, then :data:`flightlog.store.ddl.LIVE_RUNS_OWNER`): list index + 1
is the schema version."""


_ident = threading.get_ident


class _Exclusive:
    """``with store._lock:`` for calls outside a block: takes the gate, committing an open group first."""

    __slots__ = ("_store",)

    def __init__(self, store: SqliteStore) -> None:
        self._store = store

    def __enter__(self) -> None:
        self._store._exclusive()

    def __exit__(self, *exc: object) -> None:
        self._store._gate.release()


def _enable_wal(conn: sqlite3.Connection, busy_timeout_ms: int) -> str:
    """``PRAGMA journal_mode = WAL``, retried for up to ``busy_timeout_ms`` while another connection holds
    the lock it needs; returns the journal mode SQLite reports.

    SQLite answers ``SQLITE_BUSY`` ("database is locked") at once, without calling the busy handler, when a
    journal-mode change would wait on another connection's write lock: two processes opening a new database
    together (one of them creating and migrating it) made the other fail to open.

    Raises:
        sqlite3.OperationalError: still locked after ``busy_timeout_ms``, or any other error at once.
    """
    deadline = time.monotonic() + busy_timeout_ms / 1000
    delay_s = 0.001
    while True:
        try:
            return str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(delay_s)  # what SQLite's own busy handler does between attempts
        delay_s = min(delay_s * 2, 0.05)


class SqliteStore(SqlStore):
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

    LIKE_ESCAPE = " ESCAPE '\\'"
    INSERT_ORDER = "rowid"
    NULL_SAFE_EQ = "IS"

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
        self._tables: set[str] = set()
        self._columns: set[tuple[str, str]] = set()
        """Columns seen to exist (:meth:`_has_column`), as (table, column)."""
        """Tables seen to exist (:meth:`_has_table`)."""
        self._indexes: dict[str, bool] = {}
        """Whether each index asked about exists (:meth:`_has_index`), asked once per handle."""
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
        self._run = self._conn.cursor().execute
        """``execute`` of one cursor kept for the statements of the write path whose result is read at
        once (BEGIN, COMMIT, the append's and the runs row's writes): it spares a cursor object per
        statement. Used with the gate held only, and never handed out."""
        try:
            if not read_only:
                self._migrate()
                self._guard_retired = True
            elif self.schema_version() == 0:
                raise StoreUnavailable(url=self.url, reason=NO_SCHEMA)
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
                mode = _enable_wal(conn, busy_timeout_ms)
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

    def transaction(self) -> AbstractContextManager[None]:
        """One ``BEGIN IMMEDIATE`` transaction; a nested block is a SAVEPOINT. Rolls back on any exception.

        With group commit (the default), blocks of several threads that end while others wait for this
        store share one ``COMMIT`` (see :mod:`flightlog.store.group`); the block still returns only once
        its writes are durable, and a failed ``COMMIT`` fails every block of the group.

        Returns a context manager for one ``with`` (a :class:`_Transaction`; a class rather than a
        generator: every append enters one).
        """
        return _Transaction(self)

    def _translate_error(self, exc: BaseException) -> BaseException:
        """``exc`` in the flightlog error tree when it is a driver error, else ``exc`` itself."""
        return _translate(exc, self.url) if isinstance(exc, sqlite3.Error) else exc

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
                self._run("COMMIT")
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
        return self._owner == _ident()  # None (no transaction open) never equals an ident

    def call_after_commit(self, callback: Callable[[], None]) -> None:
        if self._owner != _ident():  # not this thread's transaction (_in_own_transaction, inline)
            raise RuntimeError("call_after_commit outside a transaction")
        self._after_commit.append(callback)

    def call_after_rollback(self, callback: Callable[[], None]) -> None:
        if self._owner != _ident():  # not this thread's transaction (_in_own_transaction, inline)
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

    # ─── SqlStore primitives ─────────────────────────────────────────────────────────────
    def _one(self, sql: str, params: Sequence[Any] = ()) -> Any:
        if self._in_own_transaction():  # this thread holds the gate already
            return self._fetch(self._execute(sql, params).fetchone)
        with self._lock:
            return self._fetch(self._execute(sql, params).fetchone)

    def _all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._lock:
            rows: list[Any] = self._fetch(self._execute(sql, params).fetchall)
            return rows

    def _fetch(self, fetch: Callable[[], Any]) -> Any:
        """``fetch()`` with its driver error translated as :meth:`_execute`'s (a row's TEXT that is not
        UTF-8, written outside flightlog, fails here: a named ``StoreError``, not a traceback)."""
        try:
            return fetch()
        except sqlite3.Error as exc:
            raise _translate(exc, self.url) from exc

    def _joined(self) -> AbstractContextManager[Any]:
        return contextlib.nullcontext() if self._in_own_transaction() else self.transaction()

    def _write(self, sql: str, params: Sequence[Any] = ()) -> int:
        with self._joined():
            return int(self._execute(sql, params).rowcount)

    _guarded = _write
    """A failed SQLite statement undoes its own changes and leaves the transaction usable."""

    def _insert_unique(self, sql: str, params: Sequence[Any]) -> bool:
        with self._joined():
            try:
                self._conn.execute(sql, params)
            except sqlite3.IntegrityError:
                return False
            except sqlite3.Error as exc:
                raise _translate(exc, self.url) from exc
            return True

    def append_events(
        self,
        session_id: str,
        rows: Sequence[NewEvent],
        head: SessionHead,
        *,
        epoch: int | None = None,
        recorded_at_ms: Sequence[int] | None = None,
        deferrable: bool = False,
    ) -> int:
        """:meth:`SqlStore.append_events` inside this thread's transaction (``deferrable`` is not used:
        written at once); outside one, the shared path runs (it opens one).

        One row: one ``INSERT ... SELECT`` that writes it only where the session's stored head is the one it
        extends and its authority epoch is ``epoch`` (``_INSERT_CHECKED``: the fencing token checked inside
        the write), then the head moves; when it writes nothing, :meth:`_refusal` reads the head and epoch
        and names the error. Two statements, where the shared path takes three.

        Rows with consecutive seqs (a recorder's batch): one read of the head, the epoch and any stored
        row at those seqs (``_HEAD_AND_TAKEN``), decided as the shared path decides, then a plain
        ``executemany`` of the rows and the head's move. The check runs once per batch, not once per row:
        under the transaction's write lock (``BEGIN IMMEDIATE``) and this thread's hold on the connection
        (the gate), nothing else writes between the read and the rows, and the rows themselves change
        neither the head nor the epoch, so a check repeated on every row (as ``_INSERT_CHECKED`` over
        ``executemany`` did) gives the same answer as the first; and since no stored row holds any of
        their seqs, the insert cannot stop halfway on a taken key. Any refusal is raised before the first
        write, so an enclosing block needs no savepoint for it.

        Raises:
            SessionNotFound, StaleWriter, AppendConflict: as :meth:`Store.append_events` (AppendConflict
                names the lowest seq that cannot be written).
        """
        if not rows or self._owner != _ident():  # not this thread's transaction (inline)
            return super().append_events(session_id, rows, head, epoch=epoch, recorded_at_ms=recorded_at_ms)
        first = rows[0]
        if len(rows) > 1:
            if not consecutive(rows):
                return super().append_events(
                    session_id, rows, head, epoch=epoch, recorded_at_ms=recorded_at_ms
                )
            return self._append_batch(session_id, rows, head, epoch, recorded_at_ms)
        stamp = now_ms()
        at = stamp if recorded_at_ms is None else row_stamps(rows, recorded_at_ms, stamp)[0]
        seq, kind, data, prev = first.seq, first.kind, first.event_bytes, first.prev_hash
        params = (session_id, seq, kind, data, prev, first.hash, at, session_id, seq - 1, prev)
        execute = self._run
        try:
            if epoch is None:
                written = execute(_INSERT_CHECKED_ANY_EPOCH, params)
            else:
                written = execute(_INSERT_CHECKED, (*params, epoch))
        except sqlite3.IntegrityError as exc:
            raise AppendConflict(session_id=session_id, seq=seq) from exc
        except sqlite3.Error as exc:
            raise _translate(exc, self.url) from exc
        if written.rowcount == 0:
            raise self._refusal(session_id, first, epoch)
        try:
            execute(UPDATE_HEAD, (head.seq, head.hash, head.root, stamp, session_id))
        except sqlite3.Error as exc:
            raise _translate(exc, self.url) from exc
        return stamp

    def _append_batch(
        self,
        session_id: str,
        rows: Sequence[NewEvent],
        head: SessionHead,
        epoch: int | None,
        recorded_at_ms: Sequence[int] | None,
    ) -> int:
        """:meth:`append_events` of rows with consecutive seqs, in this thread's transaction: every check in
        one read (``_HEAD_AND_TAKEN``) before the first write, then the rows and the head."""
        stamp = now_ms()
        stamps = row_stamps(rows, recorded_at_ms, stamp)
        first = rows[0]
        found = self._execute(_HEAD_AND_TAKEN, (first.seq, rows[-1].seq, session_id)).fetchone()
        problem = append_refusal(session_id, None if found is None else found[:3], first, epoch)
        if problem is not None:
            raise problem
        if found[3] is not None:  # a row past the head: only in a store edited outside flightlog
            raise AppendConflict(session_id=session_id, seq=int(found[3]))
        self._insert_events(session_id, rows, head, stamp, found[2], stamps)
        return stamp

    def _refusal(self, session_id: str, first: NewEvent, epoch: int | None) -> StoreError:
        """Why a guarded insert (:meth:`append_events`) wrote nothing, read and decided as the shared path
        decides it (:func:`~flightlog.store.sql.append_refusal`)."""
        found = self._execute(HEAD_FOR_APPEND, (session_id,)).fetchone()
        problem = append_refusal(session_id, found, first, epoch)
        if problem is not None:
            return problem
        return AppendConflict(session_id=session_id, seq=min(first.seq, found[0] + 1))

    def _insert_events(
        self,
        session_id: str,
        rows: Sequence[NewEvent],
        head: SessionHead,
        stamp: int,
        epoch: int,
        stamps: Sequence[int],
    ) -> None:
        try:
            self._conn.executemany(
                INSERT_EVENT,
                [
                    (session_id, r.seq, r.kind, r.event_bytes, r.prev_hash, r.hash, at)
                    for r, at in zip(rows, stamps, strict=True)
                ],
            )
        except sqlite3.IntegrityError as exc:
            raise AppendConflict(session_id=session_id, seq=self._first_taken(session_id, rows)) from exc
        except sqlite3.Error as exc:
            raise _translate(exc, self.url) from exc
        self._execute(UPDATE_HEAD, (head.seq, head.hash, head.root, stamp, session_id))

    def _first_taken(self, session_id: str, rows: Sequence[NewEvent]) -> int:
        """The lowest seq of ``rows`` already stored (the one that conflicted)."""
        seqs = [r.seq for r in rows]
        marks = ",".join("?" * len(seqs))
        found = self._execute(
            f"SELECT MIN(seq) FROM events WHERE session_id = ? AND seq IN ({marks})", (session_id, *seqs)
        ).fetchone()
        return int(found[0]) if found and found[0] is not None else (seqs[0] if seqs else -1)

    def _has_table(self, name: str) -> bool:
        """Asked once per table until it exists (no migration drops a table this is asked about)."""
        if name in self._tables:
            return True
        found = (
            self._one("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)) is not None
        )
        if found:
            self._tables.add(name)
        return found

    def _has_column(self, table: str, column: str) -> bool:
        """Asked once per column until it exists (``PRAGMA table_info``; no migration drops a column this is
        asked about)."""
        if (table, column) in self._columns:
            return True
        found = any(row[1] == column for row in self._all(f"PRAGMA table_info({table})"))
        if found:
            self._columns.add((table, column))
        return found

    def _has_index(self, name: str) -> bool:
        """Asked once per index and handle (``sqlite_master``): a migration run by another handle meanwhile
        is seen by the next handle, and an index dropped by hand while this one is open is still named
        (an ``INDEXED BY`` it fails with "no such index"; a statement the planner chose it for is planned
        again by SQLite without it)."""
        found = self._indexes.get(name)
        if found is None:
            row = self._one("SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?", (name,))
            found = self._indexes[name] = row is not None
        return found

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

    # ─── runs projection: in-place updates ───────────────────────────────────────────────
    def replace_run_row(self, row: RunRow, expected: RunRow) -> bool:
        """:meth:`SqlStore.replace_run_row`; inside this thread's transaction (an append's) the one
        statement runs directly, without the joined-block wrapper (a failed SQLite statement undoes its
        own changes and leaves the transaction usable)."""
        if row.run_id != expected.run_id or self._owner != _ident():  # not this thread's transaction (inline)
            return super().replace_run_row(row, expected)
        try:
            return self._run(*run_swap_params(row, expected, self.NULL_SAFE_EQ)).rowcount == 1
        except sqlite3.Error as exc:
            raise _translate(exc, self.url) from exc

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
            execute = self._run
            moved = (r.updated_at_ms, r.last_seq, r.snapshot, r.fold)
            kept = (r.run_id, r.parent, r.source, r.outcome, r.session_status)
            if execute(_RUN_UPDATE_SAME_STATE, (*moved, *kept, r.state)).rowcount:
                return
            if execute(_RUN_UPDATE, (r.state, *moved, *kept)).rowcount == 0:
                execute(RUN_UPSERT, run_tuple(r))
        except sqlite3.Error as exc:
            raise _translate(exc, self.url) from exc

    # ─── index log, erasures, retirement ─────────────────────────────────────────────────
    def lock_index(self) -> None:
        return  # BEGIN IMMEDIATE already serialises every writer of the file

    def hold_run_rows(self) -> None:
        return  # BEGIN IMMEDIATE already serialises every writer of the file

    @property
    def memory(self) -> SqliteMemory:
        """The long-term memory index in this database (:mod:`flightlog.store.memory`)."""
        return SqliteMemory(self)

    def purge_freed_pages(self) -> None:
        """Copy the WAL into the file and truncate it (``PRAGMA wal_checkpoint(TRUNCATE)``; ``secure_delete``
        zeroes freed pages as they are written), so erased content leaves the journal; nothing for a
        read-only or in-memory store, or inside a transaction (the erasure calls it after the commit).

        Best effort against other connections only: a reader on an older snapshot or a writer keeps the WAL
        until the next checkpoint (the pragma reports ``busy``; ``SQLITE_BUSY``/``SQLITE_LOCKED`` raised, an
        open statement of this connection, say, is the same), https://sqlite.org/pragma.html#pragma_wal_checkpoint.

        Raises:
            StoreError: SQLite failed otherwise (an I/O error, a damaged file: translated, naming the
                store; its note says the purge failed, after what called it committed).
        """
        if self.read_only or self.path == ":memory:":
            return
        with self._lock:
            if self._depth:
                return
            try:
                self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            except sqlite3.Error as exc:
                if _busy(exc):
                    return  # the next checkpoint copies and truncates it
                error = _translate(exc, self.url)
                error.add_note("while purging freed pages from the WAL (PRAGMA wal_checkpoint(TRUNCATE))")
                raise error from exc

    def checkpoint_wal(self) -> tuple[int, int]:
        """Copy every committed WAL frame into the database file and empty the WAL: ``PRAGMA
        wal_checkpoint(TRUNCATE)``, which (in SQLite's FULL/RESTART/TRUNCATE modes) calls the busy handler,
        so it waits up to ``busy_timeout_ms`` for a writer to finish and for readers on an older snapshot
        to move on, as SQLite intends (https://sqlite.org/pragma.html#pragma_wal_checkpoint).

        Returns:
            ``(frames, copied)``: frames in the WAL and frames now in the database file; ``copied <
            frames`` when a reader still held an older snapshot at the timeout (those frames stay durable
            in the WAL and reach the file at a later checkpoint). ``(0, 0)`` for ``":memory:"``.

        Raises:
            ReadOnlyStore: opened read-only.
            StoreError: SQLite failed otherwise (translated).
        """
        if self.read_only:
            raise ReadOnlyStore(url=self.url)
        if self.path == ":memory:":
            return (0, 0)
        with self._lock:
            try:
                _busy, frames, copied = self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            except sqlite3.Error as exc:
                raise _translate(exc, self.url) from exc
        return (int(frames), int(copied)) if frames >= 0 else (0, 0)


class _Transaction:
    """One block of :meth:`SqliteStore.transaction` (enter once): the outermost opens the transaction (or
    joins the open commit group in a savepoint), a nested one is a ``SAVEPOINT``; ``__exit__`` commits,
    releases or rolls back as the block ended. The gate is held from ``__enter__`` until the block's own
    part ends; a successful outermost block waits for its group's commit after releasing it."""

    __slots__ = ("_group", "_joined", "_savepoint", "_store")

    def __init__(self, store: SqliteStore) -> None:
        self._store = store
        self._savepoint: str | None = None
        self._group: CommitGroup | None = None
        self._joined = False

    def __enter__(self) -> None:
        store = self._store
        gate = store._gate
        gate.acquire()
        try:
            if store._depth:
                name = f"flightlog_sp{store._depth}"
                store._execute(f"SAVEPOINT {name}")
                store._depth += 1
                self._savepoint = name
                return
            store._check_writable()
            group = gate.group
            joined = group is not None
            try:
                store._run("SAVEPOINT flightlog_member" if joined else "BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise _translate(exc, store.url) from exc
        except BaseException:
            gate.release()
            raise
        if group is None:
            group = gate.group = CommitGroup()
        store._depth, store._owner = 1, _ident()
        store._after_commit, store._after_rollback = [], []
        self._group, self._joined = group, joined
        if store._guard_retired:  # under the write lock: a retirement commits before or not at all
            try:
                store.refuse_if_retired()
            except BaseException as exc:
                self._fail(exc)  # rolls back and releases the gate
                raise

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        store = self._store
        if self._savepoint is not None:
            self._end_savepoint(exc)
            return
        group = self._group
        assert group is not None, "__exit__ of a block that was not entered"
        if exc is not None:
            self._fail(exc)
            return  # the block's exception propagates
        if self._joined:
            try:
                store._run("RELEASE flightlog_member")
            except BaseException as failed:
                self._fail(failed)
                raise
        gate = store._gate
        try:
            store._depth, store._owner = 0, None
            after_commit, after_rollback = store._after_commit, store._after_rollback
            store._after_commit, store._after_rollback = [], []
            defer = gate.end_member(group, store._commit_group)
        finally:
            gate.release()
        gate.conclude(
            group,
            deferred=defer,
            commit=store._commit_group,
            after_commit=after_commit,
            after_rollback=after_rollback,
            translate=store._translate_error,
        )

    def _end_savepoint(self, exc: BaseException | None) -> None:
        """End a nested block (gate held): release its savepoint, or roll back to it on ``exc``."""
        store = self._store
        name = self._savepoint
        try:
            store._depth -= 1
            if exc is not None:
                store._conn.execute(f"ROLLBACK TO {name}")
                store._conn.execute(f"RELEASE {name}")
                return  # the caller's exception propagates
            store._execute(f"RELEASE {name}")
        finally:
            store._gate.release()

    def _fail(self, exc: BaseException) -> None:
        """Undo a failed outermost block (gate held; released here) and run its rollback callbacks (newest
        first); ``exc`` (why it failed) is raised here translated when it is a driver error, else the
        caller lets it propagate."""
        store = self._store
        group = self._group
        assert group is not None
        try:
            store._depth, store._owner = 0, None
            callbacks, store._after_rollback, store._after_commit = store._after_rollback, [], []
            store._abandon(group, self._joined)
            for callback in reversed(callbacks):
                callback()
        finally:
            store._gate.release()
        if isinstance(exc, sqlite3.Error):
            raise _translate(exc, store.url) from exc


_CHECKED_HEAD = (
    " FROM sessions s JOIN authority_epochs a ON a.session_id = s.session_id"
    " WHERE s.session_id = ? AND s.head_seq = ? AND s.head_hash = ?"
)
_INSERT_CHECKED_ANY_EPOCH = (
    "INSERT INTO events (session_id, seq, kind, event, prev_hash, hash, recorded_at_ms)"
    " SELECT ?, ?, ?, ?, ?, ?, ?" + _CHECKED_HEAD
)
"""One event row, written only when the session's head is ``(head_seq, head_hash)``: params are the row's
(``INSERT_EVENT``'s), then ``(session_id, head_seq, head_hash)``."""
_INSERT_CHECKED = _INSERT_CHECKED_ANY_EPOCH + " AND a.epoch = ?"
""":data:`_INSERT_CHECKED_ANY_EPOCH`, also only while the authority epoch is the last param."""
_HEAD_AND_TAKEN = (
    "SELECT s.head_seq, s.head_hash, a.epoch,"
    " (SELECT MIN(e.seq) FROM events e WHERE e.session_id = s.session_id AND e.seq BETWEEN ? AND ?)"
    " FROM sessions s JOIN authority_epochs a ON a.session_id = s.session_id WHERE s.session_id = ?"
)
"""A session's ``(head_seq, head_hash, authority epoch)`` (:data:`~flightlog.store.sql.HEAD_FOR_APPEND`'s
row) and the lowest stored seq in ``[first, last]`` (None when none is): params ``(first, last, session_id)``."""

_RUN_UPDATE = (
    "UPDATE runs SET state = ?, updated_at_ms = ?, last_seq = ?, snapshot = ?, fold = ? "
    "WHERE run_id = ? AND parent IS ? AND source = ? AND outcome IS ? AND session_status IS ?"
)
_RUN_UPDATE_SAME_STATE = (
    "UPDATE runs SET updated_at_ms = ?, last_seq = ?, snapshot = ?, fold = ? "
    "WHERE run_id = ? AND parent IS ? AND source = ? AND outcome IS ? AND session_status IS ? AND state = ?"
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


def _busy(exc: sqlite3.Error) -> bool:
    """Whether SQLite answered ``SQLITE_BUSY`` or ``SQLITE_LOCKED`` (any extended code of either: the low
    byte, https://sqlite.org/rescode.html): another connection, or an open statement, holds what it
    needed."""
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


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
