"""The PostgreSQL backend: many writers, many processes, one database (psycopg 3 + psycopg_pool).

Same schema semantics as :mod:`flightlog.store.sqlite`: ``events`` hold the canonical bytes (``BYTEA``) and
are append-only at the database level (triggers ``RAISE`` on ``UPDATE``, ``DELETE`` and ``TRUNCATE``), every
migration is a row of ``schema_migrations``, and the session head moves in the append's transaction.

Concurrency: a writer locks its session's row (``SELECT ... FOR UPDATE`` on ``sessions`` and
``authority_epochs``) inside ``append_events``, then checks the authority epoch (``StaleWriter``) and that
the rows extend the stored head (``AppendConflict``). Nothing is locked table-wide, so appends to
different sessions commit in parallel; two writers of one session queue on its row and the second fails
the head check, it never forks the chain. Each event row also keeps the authority epoch it was appended
under (``events.epoch``, not covered by any hash): who wrote what, for audits and the fleet's chaos test.

Transactions are per thread: ``transaction()`` takes a pooled connection for the outermost block (inner
blocks are ``SAVEPOINT`` s) and every store call on that thread joins it; calls outside one run on a pooled
connection in autocommit mode. ``call_after_commit``/``call_after_rollback`` behave as in SQLite.

Live wake-ups: every commit that appends to, creates or changes the status of a session sends
``NOTIFY flightlog_events, '<session id>'`` (delivered at commit, never for a rollback);
:meth:`PostgresStore.wait_for_events` ``LISTEN`` s on a dedicated connection, so ``tail -f`` and fleet
workers wake at once instead of polling.

Leases (issue 6, fleet workers): ``leases`` holds one row per fleet session (holder, epoch, expiry).
Claiming one bumps the session's authority epoch in the same transaction (the fencing token) and uses
``FOR UPDATE SKIP LOCKED`` so workers never wait on each other's candidates.

URL: any libpq URL (``postgresql://user:password@host:port/db?sslmode=...``) plus flightlog's own
``schema=NAME`` parameter (tables live in that schema, created on first open). Passwords never reach an
error message (:func:`flightlog.store.redact_url`).

Requires the ``postgres`` extra (``pip install 'flightlog[postgres]'``).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

try:
    import psycopg
    from psycopg import errors as pg_errors
    from psycopg.conninfo import conninfo_to_dict
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "the PostgreSQL backend needs the 'postgres' extra: pip install 'flightlog[postgres]' "
        f"(psycopg[binary] and psycopg_pool); {exc}"
    ) from exc

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
from .memory_postgres import MIGRATION as MEMORY_MIGRATION
from .memory_postgres import PostgresMemory
from .pglisten import Listener

__all__ = ["CHANNEL", "MIGRATIONS", "RUNNABLE_STATUSES", "PostgresStore", "now_ms", "redact"]

CHANNEL: Final = "flightlog_events"
"""The ``NOTIFY`` channel; the payload is the session id."""


_MIGRATION_LOCK: Final = (
    0x466C6967_68746C67  # pg_advisory_xact_lock key serialising migrations ("Fligh" "tlg")
)
_MAX_SEQ: Final = 2**63 - 1


def now_ms() -> int:
    """Current wall-clock time in epoch milliseconds."""
    return time.time_ns() // 1_000_000


def redact(url: str) -> str:
    """``url`` with any password (user part, ``password=`` parameters, keyword strings) replaced by ``***``.

    The one rule lives in :func:`flightlog.store.redact_url`.
    """
    from . import redact_url

    return redact_url(url)


MIGRATIONS: list[tuple[str, str]] = [
    (
        "sessions, append-only events, epochs, grants, effects, artifacts, checkpoints, imports, ledger id, "
        "frontiers, runs projection, live runs, index log, cosignatures, salted artifacts",
        """
        CREATE FUNCTION flightlog_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION 'flightlog % are append-only', TG_ARGV[0] USING ERRCODE = 'restrict_violation';
        END $$;
        CREATE TABLE sessions (
            session_id TEXT PRIMARY KEY,
            task TEXT NOT NULL DEFAULT '',
            status TEXT NOT NULL,
            source TEXT NOT NULL,
            created_at_ms BIGINT NOT NULL,
            updated_at_ms BIGINT NOT NULL,
            head_seq BIGINT NOT NULL DEFAULT -1,
            head_hash TEXT NOT NULL DEFAULT 'GENESIS',
            merkle_root TEXT NOT NULL DEFAULT '',
            parent_session_id TEXT,
            metadata TEXT NOT NULL DEFAULT '{}'
        );
        CREATE INDEX sessions_parent ON sessions(parent_session_id);
        CREATE INDEX sessions_created ON sessions(created_at_ms);
        CREATE INDEX sessions_id_pattern ON sessions(session_id text_pattern_ops);
        CREATE TABLE events (
            session_id TEXT NOT NULL,
            seq BIGINT NOT NULL,
            kind TEXT NOT NULL,
            event BYTEA NOT NULL,
            prev_hash TEXT NOT NULL,
            hash TEXT NOT NULL,
            recorded_at_ms BIGINT NOT NULL,
            epoch BIGINT NOT NULL DEFAULT 0,
            PRIMARY KEY (session_id, seq)
        );
        CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events
            FOR EACH ROW EXECUTE FUNCTION flightlog_append_only('events');
        CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events
            FOR EACH STATEMENT EXECUTE FUNCTION flightlog_append_only('events');
        CREATE TABLE authority_epochs (
            session_id TEXT PRIMARY KEY,
            epoch BIGINT NOT NULL,
            updated_at_ms BIGINT NOT NULL
        );
        CREATE TABLE grant_policies (
            session_id TEXT NOT NULL,
            policy_id TEXT NOT NULL,
            policy_json TEXT NOT NULL,
            recorded_at_ms BIGINT NOT NULL,
            ord BIGSERIAL,
            PRIMARY KEY (session_id, policy_id)
        );
        CREATE TABLE external_effects (
            session_id TEXT NOT NULL,
            idempotency_key TEXT NOT NULL,
            intent_hash TEXT NOT NULL,
            intent_json TEXT NOT NULL,
            status TEXT NOT NULL,
            result_json TEXT,
            created_at_ms BIGINT NOT NULL,
            completed_at_ms BIGINT,
            ord BIGSERIAL,
            PRIMARY KEY (session_id, idempotency_key)
        );
        CREATE INDEX external_effects_pending ON external_effects(status);
        CREATE TABLE artifacts (
            sha256 TEXT PRIMARY KEY,
            media_type TEXT NOT NULL,
            size_bytes BIGINT NOT NULL,
            content BYTEA NOT NULL,
            created_at_ms BIGINT NOT NULL
        );
        CREATE TABLE checkpoints (
            checkpoint_id BIGSERIAL PRIMARY KEY,
            session_id TEXT NOT NULL,
            size BIGINT NOT NULL,
            root TEXT NOT NULL,
            body TEXT NOT NULL,
            created_at_ms BIGINT NOT NULL
        );
        CREATE INDEX checkpoints_session ON checkpoints(session_id, size);
        CREATE TABLE imports (
            source_sha256 TEXT PRIMARY KEY,
            session_id TEXT NOT NULL,
            importer TEXT NOT NULL,
            importer_version TEXT NOT NULL,
            source_name TEXT NOT NULL,
            imported_at_ms BIGINT NOT NULL
        );
        CREATE TABLE ledger_meta (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL
        );
        INSERT INTO ledger_meta (key, value) VALUES ('ledger_id', replace(gen_random_uuid()::text, '-', ''));
        CREATE TABLE checkpoint_frontiers (
            checkpoint_id BIGINT PRIMARY KEY,
            hashes BYTEA NOT NULL
        );
        CREATE TABLE runs (
            run_id TEXT PRIMARY KEY,
            parent TEXT,
            source TEXT NOT NULL,
            state TEXT NOT NULL,
            outcome TEXT,
            updated_at_ms BIGINT NOT NULL,
            last_seq BIGINT NOT NULL,
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
            value BIGINT NOT NULL
        );
        INSERT INTO runs_meta (key, value) VALUES ('fold_version', 1);
        CREATE FUNCTION flightlog_runs_follow_status() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE runs SET session_status = NEW.status
                WHERE run_id = NEW.session_id AND session_status IS NOT NULL;
            RETURN NEW;
        END $$;
        CREATE TRIGGER runs_follow_session_status AFTER UPDATE OF status ON sessions
            FOR EACH ROW EXECUTE FUNCTION flightlog_runs_follow_status();
        CREATE TABLE live_runs (
            run_id TEXT PRIMARY KEY,
            state TEXT NOT NULL,
            heartbeat_at_ms BIGINT NOT NULL,
            changed_at_ms BIGINT NOT NULL,
            tokens_used BIGINT,
            steps_taken BIGINT,
            pid BIGINT
        );
        CREATE TABLE index_leaves (
            idx BIGINT PRIMARY KEY,
            session_id TEXT NOT NULL,
            checkpoint_id BIGINT NOT NULL,
            leaf BYTEA NOT NULL,
            recorded_at_ms BIGINT NOT NULL
        );
        CREATE INDEX index_leaves_session ON index_leaves(session_id, idx);
        CREATE TRIGGER index_leaves_append_only BEFORE UPDATE OR DELETE ON index_leaves
            FOR EACH ROW EXECUTE FUNCTION flightlog_append_only('index leaves');
        CREATE TRIGGER index_leaves_no_truncate BEFORE TRUNCATE ON index_leaves
            FOR EACH STATEMENT EXECUTE FUNCTION flightlog_append_only('index leaves');
        CREATE TABLE index_checkpoints (
            checkpoint_id BIGSERIAL PRIMARY KEY,
            size BIGINT NOT NULL,
            root TEXT NOT NULL,
            body TEXT NOT NULL,
            frontier BYTEA,
            created_at_ms BIGINT NOT NULL
        );
        CREATE INDEX index_checkpoints_size ON index_checkpoints(size);
        CREATE TABLE cosignatures (
            origin TEXT NOT NULL,
            size BIGINT NOT NULL,
            witness TEXT NOT NULL,
            root TEXT NOT NULL,
            note TEXT NOT NULL,
            created_at_ms BIGINT NOT NULL,
            PRIMARY KEY (origin, size, witness)
        );
        CREATE TABLE salted_artifacts (
            digest TEXT PRIMARY KEY,
            media_type TEXT NOT NULL,
            size_bytes BIGINT NOT NULL,
            content BYTEA NOT NULL,
            salt BYTEA NOT NULL,
            created_at_ms BIGINT NOT NULL
        );
        CREATE TABLE artifact_refs (
            digest TEXT NOT NULL,
            session_id TEXT NOT NULL,
            PRIMARY KEY (digest, session_id)
        );
        CREATE TABLE artifact_erasures (
            digest TEXT PRIMARY KEY,
            erased_at_ms BIGINT NOT NULL,
            log_session_id TEXT NOT NULL,
            log_seq BIGINT NOT NULL
        );
        """,
    ),
    (
        "fleet leases (holder, epoch, expiry per session)",
        """
        CREATE TABLE leases (
            session_id TEXT PRIMARY KEY,
            holder TEXT,
            epoch BIGINT NOT NULL DEFAULT 0,
            expires_at_ms BIGINT NOT NULL DEFAULT 0,
            acquired_at_ms BIGINT NOT NULL DEFAULT 0,
            parked_seq BIGINT NOT NULL DEFAULT -2,
            queued_at_ms BIGINT NOT NULL
        );
        CREATE INDEX leases_expiry ON leases(expires_at_ms);
        """,
    ),
    MEMORY_MIGRATION,
]
"""Ordered migrations: list index + 1 is the schema version. Never edit one that has shipped; append."""


_APPEND = (
    "WITH appended AS ("
    " INSERT INTO events (session_id, seq, kind, event, prev_hash, hash, recorded_at_ms, epoch)"
    " SELECT %(sid)s, r.seq, r.kind, r.event, r.prev_hash, r.hash, %(at)s, %(epoch)s"
    " FROM unnest(%(seqs)s::bigint[], %(kinds)s::text[], %(events)s::bytea[], %(prevs)s::text[],"
    " %(hashes)s::text[]) AS r(seq, kind, event, prev_hash, hash))"
    " UPDATE sessions SET head_seq = %(head_seq)s, head_hash = %(head_hash)s, merkle_root = %(root)s,"
    " updated_at_ms = %(at)s WHERE session_id = %(sid)s"
)
"""An append's rows and the session's new head in one statement (one round trip); a data-modifying
``WITH`` runs exactly once, and a taken ``(session_id, seq)`` fails the whole statement."""


def _commit(conn: psycopg.Connection[Any], notify: set[str]) -> None:
    """``NOTIFY`` the listeners of ``notify`` (session ids), then ``COMMIT``: PostgreSQL delivers the
    notifications only once the commit is durable. (Pipelining the two saved no measurable time.)"""
    if notify:
        conn.execute("SELECT pg_notify(%s, sid) FROM unnest(%s::text[]) AS sid", (CHANNEL, sorted(notify)))
    crash_point("commit.before")  # test-only fault injection (flightlog.testing.crashpoints)
    conn.execute("COMMIT")
    crash_point("commit.after")


class _Tx(threading.local):
    """This thread's open transaction on one store: its connection, depth and callbacks."""

    def __init__(self) -> None:
        self.conn: psycopg.Connection[Any] | None = None
        self.depth = 0
        self.after_commit: list[Callable[[], None]] = []
        self.after_rollback: list[Callable[[], None]] = []
        self.notify: set[str] = set()
        self.retiring = False
        """This transaction retires the store (its own commit is not refused)."""


@dataclass(frozen=True)
class _Target:
    """A parsed store URL: the libpq conninfo, the schema (or None), the redacted URL, the password."""

    conninfo: str
    schema: str | None
    redacted: str
    password: str


def _parse(url: str) -> _Target:
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((v for k, v in query if k == "schema"), None)
    rest = urlencode([(k, v) for k, v in query if k != "schema"])
    conninfo = urlunsplit(parts._replace(query=rest))
    if schema is not None and not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", schema):
        raise StoreUnavailable(
            url=redact(url), reason=f"schema must be a lowercase SQL identifier: {schema!r}"
        )
    try:
        password = str(conninfo_to_dict(conninfo).get("password") or "")
    except psycopg.ProgrammingError as exc:
        raise StoreUnavailable(url=redact(url), reason=_scrub(str(exc), parts.password or "")) from exc
    return _Target(conninfo, schema, redact(url), password)


def _scrub(message: str, password: str) -> str:
    message = redact(message)
    return message.replace(password, "***") if password else message


class PostgresStore(Store):
    """A :class:`Store` in a PostgreSQL database (see the module docs).

    Args:
        url: ``postgresql://...`` (or ``postgres://``) libpq URL; ``?schema=NAME`` selects a schema.
        read_only: Connections refuse writes (``default_transaction_read_only``); every write raises
            ``ReadOnlyStore``.
        schema: Schema for the tables (overrides the URL's ``schema=``); None: ``public``.
        min_size: Connections kept open in the pool.
        max_size: Most connections open at once (one per concurrent transaction or read).
        connect_timeout_s: How long to wait for the server, in seconds.
        synchronous_commit: ``on`` (default: each commit flushed to the WAL before it returns) or ``off``
            (durable against process crashes, a power loss may lose the last commits).
        group_commit: Run every transaction of this store object on one writer connection, where
            blocks of several threads that end together share one ``COMMIT``
            (:mod:`flightlog.store.group`): fewer round trips and commits per event when one process
            drives many sessions (``flightlog worker --concurrency N``). Default False: one pooled
            connection and commit per transaction.

    Raises:
        StoreUnavailable: the server cannot be reached or refuses us, or (read-only) has no schema.
    """

    def __init__(
        self,
        url: str,
        *,
        read_only: bool = False,
        schema: str | None = None,
        min_size: int = 1,
        max_size: int = 16,
        connect_timeout_s: float = 10.0,
        synchronous_commit: str = "on",
        group_commit: bool = False,
    ) -> None:
        if synchronous_commit not in ("on", "off", "local", "remote_write", "remote_apply"):
            raise ValueError(f"synchronous_commit must be on or off, not {synchronous_commit!r}")
        target = _parse(url)
        self.url = target.redacted
        self.read_only = read_only
        self.schema = schema or target.schema
        self._password = target.password
        self._conninfo = target.conninfo
        self._tx = _Tx()
        self._gate: Gate | None = Gate() if group_commit else None
        self._writer: psycopg.Connection[Any] | None = None
        self._notifications = Listener(self._connect, CHANNEL, self._translate)
        self._closed = False
        options = [f"-c synchronous_commit={synchronous_commit}"]
        if self.schema:
            options.append(f"-c search_path={self.schema}")
        if read_only:
            options.append("-c default_transaction_read_only=on")
        self._kwargs: dict[str, Any] = {
            "autocommit": True,
            "options": " ".join(options),
            "connect_timeout": max(1, round(connect_timeout_s)),
            "application_name": "flightlog",
        }
        self._prepare(connect_timeout_s)
        self._pool: ConnectionPool[Any] = ConnectionPool(
            self._conninfo,
            min_size=min_size,
            max_size=max(min_size, max_size),
            kwargs=self._kwargs,
            open=False,
            name="flightlog",
            timeout=max(connect_timeout_s, 30.0),
        )
        try:
            self._pool.open(wait=True, timeout=connect_timeout_s)
        except PoolTimeout as exc:
            self._pool.close()
            raise StoreUnavailable(url=self.url, reason="timed out opening the connection pool") from exc

    # ─── connections and transactions ─────────────────────────────────────────────────────
    def _connect(self) -> psycopg.Connection[Any]:
        try:
            return psycopg.connect(self._conninfo, **self._kwargs)
        except psycopg.Error as exc:
            raise StoreUnavailable(url=self.url, reason=_scrub(str(exc), self._password)) from exc

    def _prepare(self, timeout_s: float) -> None:
        """Check the server answers; migrate (writable) or check a schema exists (read-only)."""
        with self._connect() as conn:
            if self.read_only:
                if _schema_version(conn) == 0:
                    raise StoreUnavailable(url=self.url, reason="no flightlog schema in this database")
                return
            try:
                _migrate(conn, self.schema)
            except psycopg.Error as exc:
                raise self._translate(exc) from exc

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._notifications.close()
        if self._gate is not None:
            self._gate.acquire()  # a group still open commits (its blocks are waiting for it) first
            try:
                if self._gate.group is not None:
                    self._commit_group(self._gate.group)
                self._drop_writer()
            finally:
                self._gate.release()
        self._pool.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction on a pooled connection bound to this thread; a nested block is a SAVEPOINT.

        Rolls back on any exception. Notifications queued by the block are sent just before ``COMMIT``
        (so listeners hear of it only once it is durable).
        """
        tx = self._tx
        if tx.depth:
            yield from self._savepoint(tx)
            return
        self._check_writable()
        if self._gate is not None:
            yield from self._group_transaction(tx, self._gate)
            return
        conn = self._checkout()
        try:
            conn.execute("BEGIN")
        except psycopg.Error as exc:
            self._pool.putconn(conn)
            raise self._translate(exc) from exc
        tx.conn, tx.depth, tx.after_commit, tx.after_rollback, tx.notify = conn, 1, [], [], set()
        tx.retiring = False
        try:
            yield
            self._refuse_if_retired(conn, tx)
            _commit(conn, tx.notify)
        except BaseException as exc:
            callbacks = tx.after_rollback
            self._end(tx, conn, rollback=True)
            for callback in reversed(callbacks):
                callback()
            if isinstance(exc, psycopg.Error):
                raise self._translate(exc) from exc
            raise
        callbacks = tx.after_commit
        self._end(tx, conn, rollback=False)
        for callback in callbacks:
            callback()

    def _group_transaction(self, tx: _Tx, gate: Gate) -> Iterator[None]:
        """The outermost block with group commit: on the shared writer connection, opening the group
        (``BEGIN``) or joining it (``SAVEPOINT``); see :mod:`flightlog.store.group`."""
        gate.acquire()
        try:
            group = gate.group
            joined = group is not None
            conn = self._begin_member(joined, group)
            if group is None:
                group = gate.group = CommitGroup()
            tx.conn, tx.depth, tx.after_commit, tx.after_rollback, tx.notify = conn, 1, [], [], set()
            tx.retiring = False
            try:
                yield
                self._refuse_if_retired(conn, tx)
                if joined:
                    conn.execute("RELEASE SAVEPOINT flightlog_member")
            except BaseException as exc:
                callbacks = tx.after_rollback
                tx.conn, tx.depth, tx.after_commit, tx.after_rollback, tx.notify = None, 0, [], [], set()
                self._abandon(conn, group, joined)
                for callback in reversed(callbacks):
                    callback()
                if isinstance(exc, psycopg.Error):
                    raise self._translate(exc) from exc
                raise
            group.size += 1
            group.notify |= tx.notify
            after_commit, after_rollback = tx.after_commit, tx.after_rollback
            tx.conn, tx.depth, tx.after_commit, tx.after_rollback, tx.notify = None, 0, [], [], set()
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
            translate=lambda exc: self._translate(exc) if isinstance(exc, psycopg.Error) else exc,
        )

    def _begin_member(self, joined: bool, group: CommitGroup | None) -> psycopg.Connection[Any]:
        """``SAVEPOINT`` into the open group, or ``BEGIN`` a new one (gate held); the writer connection.

        A failed ``BEGIN`` (the idle writer connection was closed under us: server restart, a terminated
        backend) reconnects and retries once, as nothing was sent yet. A failed ``SAVEPOINT`` means the
        group's transaction is gone with its connection: the group fails (its waiting blocks raise) and so
        does this block, with ``StoreUnavailable``; the next block starts a fresh group.

        Raises:
            StoreUnavailable / StoreError: the server cannot be reached, or the group was lost.
        """
        if joined and group is not None and (self._writer is None or self._writer.closed):
            lost = StoreUnavailable(url=self.url, reason="the group-commit connection was lost")
            group.error = lost
            self._commit_group(group)
            raise lost
        for attempt in (1, 2):
            conn = self._writer_connection()
            try:
                conn.execute("SAVEPOINT flightlog_member" if joined else "BEGIN")
                return conn
            except psycopg.Error as exc:
                self._drop_writer()
                if joined and group is not None:
                    group.error = exc
                    self._commit_group(group)
                if joined or attempt == 2 or not isinstance(exc, psycopg.OperationalError):
                    raise self._translate(exc) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _writer_connection(self) -> psycopg.Connection[Any]:
        """The connection group-commit blocks share (gate held); (re)connected when missing or broken."""
        if self._writer is None or self._writer.closed:
            self._writer = self._connect()
        return self._writer

    def _drop_writer(self) -> None:
        if self._writer is not None:
            with suppress(psycopg.Error):
                self._writer.close()
            self._writer = None

    def _abandon(self, conn: psycopg.Connection[Any], group: CommitGroup, joined: bool) -> None:
        """Undo a failed outermost block: its savepoint when it joined a group, else the transaction."""
        gate = self._gate
        assert gate is not None
        if joined:

            def undo() -> None:
                conn.execute("ROLLBACK TO SAVEPOINT flightlog_member")
                conn.execute("RELEASE SAVEPOINT flightlog_member")

            gate.abandon_member(group, undo, self._commit_group)
            return
        gate.group = None
        try:
            conn.execute("ROLLBACK")
        except psycopg.Error:
            self._drop_writer()

    def _commit_group(self, group: CommitGroup) -> None:
        """NOTIFY and COMMIT the open group (gate held, no block running) and wake its blocks; never
        raises: a failure (or an earlier fatal one in ``group.error``) rolls back and reaches every block."""
        gate = self._gate
        assert gate is not None
        gate.group = None
        conn = self._writer
        try:
            if conn is None:
                raise StoreUnavailable(url=self.url, reason="the group-commit connection was lost")
            if group.error is None:
                _commit(conn, group.notify)
        except BaseException as exc:
            group.error = exc
        if group.error is not None:
            try:
                if conn is not None and not conn.closed:
                    conn.execute("ROLLBACK")
            except psycopg.Error:
                self._drop_writer()
        group.finished()

    def _savepoint(self, tx: _Tx) -> Iterator[None]:
        conn = tx.conn
        assert conn is not None
        name = f"flightlog_sp{tx.depth}"
        self._run(conn, f"SAVEPOINT {name}")
        tx.depth += 1
        try:
            yield
        except BaseException:
            with suppress(psycopg.Error):
                conn.execute(f"ROLLBACK TO SAVEPOINT {name}")
                conn.execute(f"RELEASE SAVEPOINT {name}")
            raise
        finally:
            tx.depth -= 1
        self._run(conn, f"RELEASE SAVEPOINT {name}")

    def _checkout(self) -> psycopg.Connection[Any]:
        try:
            conn: psycopg.Connection[Any] = self._pool.getconn()
        except PoolTimeout as exc:
            raise StoreUnavailable(url=self.url, reason="no database connection free in time") from exc
        return conn

    def _end(self, tx: _Tx, conn: psycopg.Connection[Any], *, rollback: bool) -> None:
        tx.conn, tx.depth, tx.after_commit, tx.after_rollback, tx.notify = None, 0, [], [], set()
        if rollback and not conn.closed:
            with suppress(psycopg.Error):
                conn.execute("ROLLBACK")
        self._pool.putconn(conn)

    def call_after_commit(self, callback: Callable[[], None]) -> None:
        if not self._tx.depth:
            raise RuntimeError("call_after_commit outside a transaction")
        self._tx.after_commit.append(callback)

    def call_after_rollback(self, callback: Callable[[], None]) -> None:
        if not self._tx.depth:
            raise RuntimeError("call_after_rollback outside a transaction")
        self._tx.after_rollback.append(callback)

    def _check_writable(self) -> None:
        if self.read_only:
            raise ReadOnlyStore(url=self.url)

    def _notify(self, session_id: str) -> None:
        """Queue a ``NOTIFY`` for ``session_id``, sent with the open transaction's commit."""
        self._tx.notify.add(session_id)

    @contextmanager
    def _conn(self) -> Iterator[psycopg.Connection[Any]]:
        """This thread's transaction connection, else a pooled one (autocommit) for one call."""
        if self._tx.conn is not None:
            yield self._tx.conn
            return
        try:
            with self._pool.connection() as conn:
                yield conn
        except PoolTimeout as exc:
            raise StoreUnavailable(url=self.url, reason="no database connection free in time") from exc

    def _run(self, conn: psycopg.Connection[Any], sql: str, params: Sequence[Any] | None = None) -> Any:
        try:
            return conn.execute(sql, params)
        except psycopg.Error as exc:
            raise self._translate(exc) from exc

    def _all(self, sql: str, params: Sequence[Any] | None = None) -> list[Any]:
        with self._conn() as conn:
            return list(self._run(conn, sql, params).fetchall())

    def _one(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        with self._conn() as conn:
            return self._run(conn, sql, params).fetchone()

    @contextmanager
    def _joined(self) -> Iterator[psycopg.Connection[Any]]:
        """This thread's open transaction (joined without a savepoint), else a new one; its connection.

        Store methods raise their own errors before writing, so they need no savepoint of their own; a
        statement that may violate a constraint inside a caller's transaction runs in ``_guarded``.
        """
        if self._tx.depth:
            assert self._tx.conn is not None
            yield self._tx.conn
            return
        with self.transaction():
            assert self._tx.conn is not None
            yield self._tx.conn

    def _write(self, sql: str, params: Sequence[Any] | None = None) -> int:
        """Run one write in this thread's transaction (one of its own when none is open); rowcount."""
        with self._joined() as conn:
            return int(self._run(conn, sql, params).rowcount)

    def _guarded(self, sql: str, params: Sequence[Any] | None = None) -> int:
        """``_write`` in a savepoint: a constraint violation leaves the caller's transaction usable."""
        with self._joined() as conn:
            try:
                with conn.transaction():
                    return int(conn.execute(sql, params).rowcount)
            except psycopg.Error as exc:
                raise self._translate(exc) from exc

    def _translate(self, exc: psycopg.Error) -> StoreError:
        return translate(exc, self.url, self._password)

    # ─── migrations ───────────────────────────────────────────────────────────────────────
    def schema_version(self) -> int:
        with self._conn() as conn:
            try:
                return _schema_version(conn)
            except psycopg.Error as exc:
                raise self._translate(exc) from exc

    # ─── sessions ─────────────────────────────────────────────────────────────────────────
    def create_session(self, record: SessionRecord) -> None:
        created = record.created_at_ms or now_ms()
        with self._joined() as conn:
            try:
                with conn.transaction():
                    conn.execute(
                        "INSERT INTO sessions (session_id, task, status, source, created_at_ms, updated_at_ms,"
                        " parent_session_id, metadata, merkle_root) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
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
            except pg_errors.UniqueViolation as exc:
                raise AppendConflict(session_id=record.session_id, seq=-1) from exc
            except psycopg.Error as exc:
                raise self._translate(exc) from exc
            self._run(
                conn,
                "INSERT INTO authority_epochs VALUES (%s, 0, %s)",
                (record.session_id, now_ms()),
            )
            self._notify(record.session_id)

    def get_session(self, session_id: str) -> SessionRecord:
        row = self._one(f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE session_id = %s", (session_id,))
        if row is None:
            raise SessionNotFound(session_id=session_id)
        return _session(row)

    def resolve_session(self, prefix: str) -> str:
        if not prefix:
            raise SessionNotFound(session_id=prefix)
        exact = self._one("SELECT session_id FROM sessions WHERE session_id = %s", (prefix,))
        if exact:
            return str(exact[0])
        after_colon = self._all(
            "SELECT session_id FROM sessions WHERE session_id LIKE %s LIMIT 2", ("%:" + _like_escape(prefix),)
        )
        if len(after_colon) == 1:
            return str(after_colon[0][0])
        pattern = _like_escape(prefix) + "%"
        rows = self._all(
            "SELECT session_id FROM sessions WHERE session_id LIKE %s OR session_id LIKE %s "
            "ORDER BY session_id LIMIT 6",
            (pattern, "%:" + pattern),
        )
        if len(rows) != 1:
            raise SessionNotFound(session_id=prefix, matches=[r[0] for r in rows])
        return str(rows[0][0])

    def list_sessions(self, batch: int = 500) -> Iterator[SessionRecord]:
        """Every session, oldest first (keyset pages of ``batch`` rows)."""
        after: tuple[int, str] = (-(2**63), "")
        while True:
            rows = self._all(
                f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE (created_at_ms, session_id) > (%s, %s) "
                "ORDER BY created_at_ms, session_id LIMIT %s",
                (*after, batch),
            )
            for row in rows:
                yield _session(row)
            if len(rows) < batch:
                return
            after = (rows[-1][4], rows[-1][0])

    def set_session_status(self, session_id: str, status: str) -> None:
        with self._joined():
            count = self._write(
                "UPDATE sessions SET status = %s, updated_at_ms = %s WHERE session_id = %s",
                (status, now_ms(), session_id),
            )
            if count == 0:
                raise SessionNotFound(session_id=session_id)
            self._notify(session_id)

    # ─── events ───────────────────────────────────────────────────────────────────────────
    def append_events(
        self, session_id: str, rows: Sequence[NewEvent], head: SessionHead, *, epoch: int | None = None
    ) -> int:
        stamp = now_ms()
        with self._joined() as conn:
            found = self._run(
                conn,
                "SELECT s.head_seq, s.head_hash, a.epoch FROM sessions s "
                "JOIN authority_epochs a ON a.session_id = s.session_id WHERE s.session_id = %s FOR UPDATE",
                (session_id,),
            ).fetchone()
            if found is None:
                raise SessionNotFound(session_id=session_id)
            head_seq, head_hash, current = found
            if epoch is not None and current != epoch:
                raise StaleWriter(session_id=session_id, epoch=epoch, current_epoch=current)
            if rows and (rows[0].seq != head_seq + 1 or rows[0].prev_hash != head_hash):
                raise AppendConflict(session_id=session_id, seq=min(rows[0].seq, head_seq + 1))
            taken = _taken(rows, head_seq)
            if taken is not None:
                raise AppendConflict(session_id=session_id, seq=taken)
            try:  # one round trip: the rows and the session's new head
                conn.execute(
                    _APPEND,
                    {
                        "sid": session_id,
                        "at": stamp,
                        "epoch": current,
                        "seqs": [r.seq for r in rows],
                        "kinds": [r.kind for r in rows],
                        "events": [r.event_bytes for r in rows],
                        "prevs": [r.prev_hash for r in rows],
                        "hashes": [r.hash for r in rows],
                        "head_seq": head.seq,
                        "head_hash": head.hash,
                        "root": head.root,
                    },
                )
            except pg_errors.UniqueViolation as exc:
                raise AppendConflict(session_id=session_id, seq=rows[0].seq) from exc
            except psycopg.Error as exc:
                raise self._translate(exc) from exc
            self._notify(session_id)
        return stamp

    def read_events(
        self, session_id: str, *, start: int = 0, stop: int | None = None, batch: int = 512
    ) -> Iterator[StoredEvent]:
        """Stream rows in ascending seq, ``batch`` rows per query (keyset pagination, bounded memory)."""
        upper = stop if stop is not None else _MAX_SEQ
        position = start
        while True:
            rows = self._all(
                "SELECT seq, kind, event, prev_hash, hash, recorded_at_ms FROM events "
                "WHERE session_id = %s AND seq >= %s AND seq < %s ORDER BY seq LIMIT %s",
                (session_id, position, upper, batch),
            )
            for seq, kind, data, prev_hash, hash_, at in rows:
                yield StoredEvent(session_id, seq, kind, bytes(data), prev_hash, hash_, at)
            if len(rows) < batch:
                return
            position = rows[-1][0] + 1

    def append_copied(self, session_id: str, rows: Sequence[StoredEvent], head: SessionHead) -> None:
        """Append rows copied from another store verbatim (bytes, hashes and ``recorded_at_ms`` kept),
        after the same head check as :meth:`append_events` (``flightlog db copy``; the caller verifies)."""
        if not rows:
            return
        with self._joined() as conn:
            found = self._run(
                conn,
                "SELECT head_seq, head_hash FROM sessions WHERE session_id = %s FOR UPDATE",
                (session_id,),
            ).fetchone()
            if found is None:
                raise SessionNotFound(session_id=session_id)
            if rows[0].seq != found[0] + 1 or rows[0].prev_hash != found[1]:
                raise AppendConflict(session_id=session_id, seq=min(rows[0].seq, found[0] + 1))
            with conn.cursor() as cur:
                try:
                    cur.executemany(
                        "INSERT INTO events (session_id, seq, kind, event, prev_hash, hash, recorded_at_ms) "
                        "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                        [
                            (session_id, r.seq, r.kind, r.event_bytes, r.prev_hash, r.hash, r.recorded_at_ms)
                            for r in rows
                        ],
                    )
                except pg_errors.UniqueViolation as exc:
                    raise AppendConflict(session_id=session_id, seq=rows[0].seq) from exc
                except psycopg.Error as exc:
                    raise self._translate(exc) from exc
            self._run(
                conn,
                "UPDATE sessions SET head_seq = %s, head_hash = %s, merkle_root = %s, updated_at_ms = %s "
                "WHERE session_id = %s",
                (head.seq, head.hash, head.root, rows[-1].recorded_at_ms, session_id),
            )
            self._notify(session_id)

    def event_epochs(self, session_id: str) -> list[tuple[int, int]]:
        """``(seq, authority epoch the row was appended under)`` for every event of a session, by seq."""
        rows = self._all("SELECT seq, epoch FROM events WHERE session_id = %s ORDER BY seq", (session_id,))
        return [(int(seq), int(epoch)) for seq, epoch in rows]

    # ─── live wake-ups ────────────────────────────────────────────────────────────────────
    def wait_for_events(self, timeout_s: float, *, session_id: str | None = None) -> bool:
        """Block until a commit touches ``session_id`` (any session when None), or ``timeout_s`` passes.

        One ``LISTEN`` ing connection per store, read by one thread and fanned out to every waiting thread
        (:mod:`flightlog.store.pglisten`), so concurrent waiters (the dashboard's streams) each see every
        commit and none queues behind another. A notification that arrives between two calls of one thread
        wakes its next call at once. A thread's first call returns True at once (re-read, then wait), so
        nothing committed before the ``LISTEN`` is missed.

        Returns:
            True when woken by a notification (or on a thread's first call), False on timeout. A True may
            be spurious (another schema's session with the same id); callers re-read either way.

        Raises:
            StoreUnavailable: the listening connection failed (the next call reconnects).
        """
        return self._notifications.wait(timeout_s, session_id)

    # ─── authority epochs ─────────────────────────────────────────────────────────────────
    def authority_epoch(self, session_id: str) -> int:
        row = self._one("SELECT epoch FROM authority_epochs WHERE session_id = %s", (session_id,))
        if row is None:
            raise SessionNotFound(session_id=session_id)
        return int(row[0])

    def bump_authority_epoch(self, session_id: str) -> int:
        with self._joined():
            row = self._one(
                "UPDATE authority_epochs SET epoch = epoch + 1, updated_at_ms = %s WHERE session_id = %s "
                "RETURNING epoch",
                (now_ms(), session_id),
            )
            if row is None:
                raise SessionNotFound(session_id=session_id)
            return int(row[0])

    # ─── grants ───────────────────────────────────────────────────────────────────────────
    def record_grant_policy(self, session_id: str, policy_id: str, policy_json: str) -> None:
        with self._joined():
            inserted = self._write(
                "INSERT INTO grant_policies (session_id, policy_id, policy_json, recorded_at_ms) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (session_id, policy_id) DO NOTHING",
                (session_id, policy_id, policy_json, now_ms()),
            )
            if inserted:
                return
            row = self._one(
                "SELECT policy_json FROM grant_policies WHERE session_id = %s AND policy_id = %s",
                (session_id, policy_id),
            )
            if row is not None and row[0] != policy_json:
                raise StoreError(
                    f"grant policy {policy_id!r} of session {session_id} already recorded with other bytes"
                )

    def grant_policies(self, session_id: str) -> list[tuple[str, str]]:
        rows = self._all(
            "SELECT policy_id, policy_json FROM grant_policies WHERE session_id = %s ORDER BY ord",
            (session_id,),
        )
        return [(r[0], r[1]) for r in rows]

    # ─── external effects ─────────────────────────────────────────────────────────────────
    def record_intent(self, session_id: str, key: str, intent_hash: str, intent_json: str) -> bool:
        with self._joined():
            inserted = self._write(
                "INSERT INTO external_effects (session_id, idempotency_key, intent_hash, intent_json, status,"
                " created_at_ms) VALUES (%s, %s, %s, %s, 'pending', %s) ON CONFLICT DO NOTHING",
                (session_id, key, intent_hash, intent_json, now_ms()),
            )
            if inserted:
                return True
            existing = self.get_effect(session_id, key)
            if existing is not None and existing.intent_hash != intent_hash:
                raise EffectConflict(
                    idempotency_key=key, stored_hash=existing.intent_hash, new_hash=intent_hash
                )
            return False

    def complete_effect(self, session_id: str, key: str, result_json: str) -> bool:
        with self._joined():
            row = self._one(
                "SELECT status, result_json FROM external_effects "
                "WHERE session_id = %s AND idempotency_key = %s FOR UPDATE",
                (session_id, key),
            )
            if row is None:
                raise LookupError(f"no intent recorded for effect {key!r} of session {session_id}")
            if row[0] == "completed":
                if row[1] != result_json:
                    raise EffectConflict(
                        idempotency_key=key, stored_hash=_digest(row[1] or ""), new_hash=_digest(result_json)
                    )
                return False
            self._write(
                "UPDATE external_effects SET status = 'completed', result_json = %s, completed_at_ms = %s "
                "WHERE session_id = %s AND idempotency_key = %s",
                (result_json, now_ms(), session_id, key),
            )
            return True

    def get_effect(self, session_id: str, key: str) -> EffectRecord | None:
        row = self._one(
            f"SELECT {_EFFECT_COLUMNS} FROM external_effects WHERE session_id = %s AND idempotency_key = %s",
            (session_id, key),
        )
        return EffectRecord(*row) if row else None

    def pending_effects(self, session_id: str | None = None) -> list[EffectRecord]:
        sql = f"SELECT {_EFFECT_COLUMNS} FROM external_effects WHERE status = 'pending'"
        params: tuple[str, ...] = ()
        if session_id is not None:
            sql += " AND session_id = %s"
            params = (session_id,)
        return [EffectRecord(*r) for r in self._all(sql + " ORDER BY created_at_ms, ord", params)]

    # ─── artifacts ────────────────────────────────────────────────────────────────────────
    def put_artifact(self, content: bytes, media_type: str) -> ArtifactRecord:
        digest = hashlib.sha256(content).hexdigest()
        with self._joined():
            self._write(
                "INSERT INTO artifacts VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                (digest, media_type, len(content), content, now_ms()),
            )
            info = self.artifact_info(digest)
        assert info is not None
        return info

    def get_artifact(self, sha256: str) -> bytes | None:
        row = self._one("SELECT content FROM artifacts WHERE sha256 = %s", (sha256.removeprefix("sha256:"),))
        return bytes(row[0]) if row else None

    def artifact_info(self, sha256: str) -> ArtifactRecord | None:
        row = self._one(
            "SELECT sha256, media_type, size_bytes, created_at_ms FROM artifacts WHERE sha256 = %s",
            (sha256.removeprefix("sha256:"),),
        )
        return ArtifactRecord(*row) if row else None

    # ─── checkpoints, ledger id, frontiers ────────────────────────────────────────────────
    def record_checkpoint(self, session_id: str, size: int, root: str, body: str) -> int:
        with self._joined():
            row = self._one(
                "INSERT INTO checkpoints (session_id, size, root, body, created_at_ms) "
                "VALUES (%s, %s, %s, %s, %s) RETURNING checkpoint_id",
                (session_id, size, root, body, now_ms()),
            )
            return int(row[0])

    def checkpoints(self, session_id: str) -> list[CheckpointRecord]:
        rows = self._all(
            f"SELECT {_CHECKPOINT_COLUMNS} FROM checkpoints WHERE session_id = %s ORDER BY checkpoint_id",
            (session_id,),
        )
        return [CheckpointRecord(*r) for r in rows]

    def ledger_id(self) -> str:
        row = self._one("SELECT value FROM ledger_meta WHERE key = 'ledger_id'")
        if row is None:
            raise StoreError(f"{self.url}: no ledger id")
        return str(row[0])

    def record_checkpoint_frontier(self, checkpoint_id: int, frontier: bytes) -> None:
        self._guarded("INSERT INTO checkpoint_frontiers VALUES (%s, %s)", (checkpoint_id, frontier))

    def checkpoint_frontier(self, checkpoint_id: int) -> bytes | None:
        row = self._one("SELECT hashes FROM checkpoint_frontiers WHERE checkpoint_id = %s", (checkpoint_id,))
        return bytes(row[0]) if row else None

    def latest_checkpoint(self, session_id: str, *, max_size: int | None = None) -> CheckpointRecord | None:
        row = self._one(
            f"SELECT {_CHECKPOINT_COLUMNS} FROM checkpoints WHERE session_id = %s AND size <= %s "
            "ORDER BY size DESC, checkpoint_id DESC LIMIT 1",
            (session_id, _MAX_SEQ if max_size is None else max_size),
        )
        return CheckpointRecord(*row) if row else None

    # ─── imports ──────────────────────────────────────────────────────────────────────────
    def find_import(self, source_sha256: str) -> ImportRecord | None:
        row = self._one(f"SELECT {_IMPORT_COLUMNS} FROM imports WHERE source_sha256 = %s", (source_sha256,))
        return ImportRecord(*row) if row else None

    def imports_of(self, session_id: str) -> list[ImportRecord]:
        """The import records of a session (files imported into it), oldest first."""
        rows = self._all(
            f"SELECT {_IMPORT_COLUMNS} FROM imports WHERE session_id = %s ORDER BY imported_at_ms",
            (session_id,),
        )
        return [ImportRecord(*row) for row in rows]

    def record_import(self, record: ImportRecord) -> None:
        self._guarded(
            f"INSERT INTO imports ({_IMPORT_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s)",
            (
                record.source_sha256,
                record.session_id,
                record.importer,
                record.importer_version,
                record.source_name,
                record.imported_at_ms,
            ),
        )

    # ─── runs projection ──────────────────────────────────────────────────────────────────
    def run_projection_version(self) -> int | None:
        row = self._one("SELECT value FROM runs_meta WHERE key = 'fold_version'")
        return int(row[0]) if row else 0

    def set_run_projection_version(self, version: int) -> None:
        self._write(
            "INSERT INTO runs_meta (key, value) VALUES ('fold_version', %s) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (version,),
        )

    def get_run_rows(self, run_ids: Collection[str]) -> dict[str, RunRow]:
        ids = list(dict.fromkeys(run_ids))
        if not ids:
            return {}
        rows = self._all(f"SELECT {_RUN_COLUMNS} FROM runs WHERE run_id = ANY(%s)", (ids,))
        return {row[0]: RunRow(*row) for row in rows}

    def put_run_rows(self, rows: Sequence[RunRow]) -> None:
        """Upsert rows (one statement per row; joins an open transaction)."""
        if not rows:
            return
        with self._joined() as conn:
            try:
                with conn.cursor() as cur:
                    cur.executemany(_RUN_UPSERT, [_run_values(r) for r in rows])
            except psycopg.Error as exc:
                raise self._translate(exc) from exc

    def replace_run_row(self, row: RunRow, expected: RunRow) -> bool:
        """One ``UPDATE`` guarded by every column of ``expected``, in a savepoint (``_guarded``): a failed
        statement aborts a PostgreSQL transaction, and the caller's (the append's) must stay usable."""
        if row.run_id != expected.run_id:
            raise ValueError(f"replace_run_row: row of {row.run_id!r} cannot replace {expected.run_id!r}")
        return self._guarded(_RUN_SWAP, (*_run_values(row)[1:], *_run_values(expected))) == 1

    def clear_run_rows(self) -> None:
        self._write("DELETE FROM runs")

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
                where.append(f"{column} = %s")
                params.append(value)
        sql = (
            "SELECT run_id, parent, source, state, updated_at_ms, session_status, snapshot FROM runs"
            + (" WHERE " + " AND ".join(where) if where else "")
            + " ORDER BY updated_at_ms DESC, run_id"
            + (f" LIMIT {max(0, int(limit))}" if limit is not None else "")
        )
        return [RunListing(*row) for row in self._all(sql, params)]

    # ─── live runs ────────────────────────────────────────────────────────────────────────
    def put_live_run(self, record: LiveRunRecord) -> None:
        self._write(
            "INSERT INTO live_runs (run_id, state, heartbeat_at_ms, changed_at_ms, tokens_used, steps_taken, pid)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (run_id) DO UPDATE SET state = excluded.state,"
            " heartbeat_at_ms = excluded.heartbeat_at_ms, changed_at_ms = excluded.changed_at_ms,"
            " tokens_used = excluded.tokens_used, steps_taken = excluded.steps_taken, pid = excluded.pid",
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
        self._write("DELETE FROM live_runs WHERE run_id = %s", (run_id,))

    def live_runs(self) -> list[LiveRunRecord]:
        rows = self._all(
            "SELECT run_id, state, heartbeat_at_ms, changed_at_ms, tokens_used, steps_taken, pid FROM live_runs"
            " ORDER BY run_id"
        )
        return [LiveRunRecord(*row) for row in rows]

    # ─── index log, cosignatures ──────────────────────────────────────────────────────────
    def index_supported(self) -> bool:
        return True

    def lock_index(self) -> None:
        with self._joined() as conn:
            # One log, one writer: taken before the index head is read (READ COMMITTED then sees the head
            # the previous holder committed), held until this transaction ends.
            self._run(conn, "LOCK TABLE index_leaves IN SHARE ROW EXCLUSIVE MODE")

    def append_index_leaf(self, idx: int, session_id: str, checkpoint_id: int, leaf: bytes) -> None:
        with self._joined() as conn:
            self._run(conn, "LOCK TABLE index_leaves IN SHARE ROW EXCLUSIVE MODE")  # one log, one writer
            if idx != self.index_size():
                raise AppendConflict(session_id="(index log)", seq=idx)
            self._run(
                conn,
                "INSERT INTO index_leaves VALUES (%s, %s, %s, %s, %s)",
                (idx, session_id, checkpoint_id, leaf, now_ms()),
            )

    def index_size(self) -> int:
        row = self._one("SELECT MAX(idx) FROM index_leaves")
        return 0 if row is None or row[0] is None else int(row[0]) + 1

    def read_index_leaves(
        self, *, start: int = 0, stop: int | None = None, batch: int = 512
    ) -> Iterator[IndexLeaf]:
        upper = stop if stop is not None else _MAX_SEQ
        position = start
        while True:
            rows = self._all(
                "SELECT idx, session_id, checkpoint_id, leaf, recorded_at_ms FROM index_leaves "
                "WHERE idx >= %s AND idx < %s ORDER BY idx LIMIT %s",
                (position, upper, batch),
            )
            for idx, sid, cid, leaf, at in rows:
                yield IndexLeaf(idx, sid, cid, bytes(leaf), at)
            if len(rows) < batch:
                return
            position = rows[-1][0] + 1

    def index_leaves_of(self, session_id: str) -> list[IndexLeaf]:
        rows = self._all(
            "SELECT idx, session_id, checkpoint_id, leaf, recorded_at_ms FROM index_leaves "
            "WHERE session_id = %s ORDER BY idx",
            (session_id,),
        )
        return [IndexLeaf(idx, sid, cid, bytes(leaf), at) for idx, sid, cid, leaf, at in rows]

    def record_index_checkpoint(self, size: int, root: str, body: str, frontier: bytes) -> int:
        with self._joined():
            row = self._one(
                "INSERT INTO index_checkpoints (size, root, body, frontier, created_at_ms) "
                "VALUES (%s, %s, %s, %s, %s) RETURNING checkpoint_id",
                (size, root, body, frontier, now_ms()),
            )
            return int(row[0])

    def latest_index_checkpoint(self, *, max_size: int | None = None) -> IndexCheckpointRecord | None:
        row = self._one(
            f"SELECT {_INDEX_CHECKPOINT_COLUMNS} FROM index_checkpoints WHERE size <= %s "
            "ORDER BY size DESC, checkpoint_id DESC LIMIT 1",
            (_MAX_SEQ if max_size is None else max_size,),
        )
        return _index_checkpoint(row) if row else None

    def index_checkpoints(self) -> Iterator[IndexCheckpointRecord]:
        for row in self._all(
            f"SELECT {_INDEX_CHECKPOINT_COLUMNS} FROM index_checkpoints ORDER BY checkpoint_id"
        ):
            yield _index_checkpoint(row)

    def record_cosignature(self, record: CosignatureRecord) -> None:
        self._write(
            "INSERT INTO cosignatures (origin, size, witness, root, note, created_at_ms) "
            "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (origin, size, witness) DO UPDATE SET "
            "root = excluded.root, note = excluded.note, created_at_ms = excluded.created_at_ms",
            (record.origin, record.size, record.witness, record.root, record.note, record.created_at_ms),
        )

    def cosignatures(self, origin: str) -> list[CosignatureRecord]:
        rows = self._all(
            "SELECT origin, size, root, witness, note, created_at_ms FROM cosignatures WHERE origin = %s "
            "ORDER BY size, witness",
            (origin,),
        )
        return [CosignatureRecord(*row) for row in rows]

    # ─── salted (erasable) artifacts ──────────────────────────────────────────────────────
    def put_salted_artifact(
        self, digest: str, salt: bytes, content: bytes, media_type: str, *, session_id: str | None = None
    ) -> SaltedArtifactRecord:
        stamp = now_ms()
        with self._joined():
            self._write(
                "INSERT INTO salted_artifacts VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                (digest, media_type, len(content), content, salt, stamp),
            )
            if session_id is not None:
                self._write(
                    "INSERT INTO artifact_refs VALUES (%s, %s) ON CONFLICT DO NOTHING", (digest, session_id)
                )
        return SaltedArtifactRecord(digest, media_type, len(content), stamp)

    def get_salted_artifact(self, digest: str) -> tuple[bytes, bytes] | None:
        row = self._one("SELECT content, salt FROM salted_artifacts WHERE digest = %s", (digest,))
        return (bytes(row[0]), bytes(row[1])) if row else None

    def salted_artifact_info(self, digest: str) -> SaltedArtifactRecord | None:
        row = self._one(
            "SELECT digest, media_type, size_bytes, created_at_ms FROM salted_artifacts WHERE digest = %s",
            (digest,),
        )
        return SaltedArtifactRecord(*row) if row else None

    def artifact_sessions(self, digest: str) -> list[str]:
        rows = self._all(
            "SELECT session_id FROM artifact_refs WHERE digest = %s ORDER BY session_id", (digest,)
        )
        return [str(r[0]) for r in rows]

    def erase_salted_artifact(self, record: ErasureRecord) -> bool:
        with self._joined():
            deleted = self._write("DELETE FROM salted_artifacts WHERE digest = %s", (record.digest,))
            self._write(
                "INSERT INTO artifact_erasures VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                (record.digest, record.erased_at_ms, record.log_session_id, record.log_seq),
            )
            return deleted > 0

    @property
    def memory(self) -> PostgresMemory:
        """The long-term memory index in this database (:mod:`flightlog.store.memory`)."""
        return PostgresMemory(self)

    def erasure(self, digest: str) -> ErasureRecord | None:
        row = self._one(
            "SELECT digest, erased_at_ms, log_session_id, log_seq FROM artifact_erasures WHERE digest = %s",
            (digest,),
        )
        return ErasureRecord(*row) if row else None

    # ─── fleet leases ─────────────────────────────────────────────────────────────────────
    def open_lease(self, session_id: str) -> None:
        with self._joined():
            self._write(
                "INSERT INTO leases (session_id, queued_at_ms) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                (session_id, now_ms()),
            )
            self._notify(session_id)

    def get_lease(self, session_id: str) -> LeaseRecord | None:
        row = self._one(f"SELECT {_LEASE_COLUMNS} FROM leases WHERE session_id = %s", (session_id,))
        return LeaseRecord(*row) if row else None

    def claim_sessions(
        self, holder: str, *, ttl_ms: int, limit: int = 1, session_id: str | None = None
    ) -> list[LeaseClaim]:
        """Claim up to ``limit`` runnable fleet sessions (oldest queued first), skipping rows another
        worker is claiming (``FOR UPDATE SKIP LOCKED``); bumps each one's authority epoch."""
        stamp = now_ms()
        only = "AND l.session_id = %s" if session_id is not None else ""
        params: list[Any] = [stamp, list(RUNNABLE_STATUSES)]
        if session_id is not None:
            params.append(session_id)
        params.append(limit)
        claims: list[LeaseClaim] = []
        with self._joined():
            rows = self._all(
                "SELECT l.session_id, l.holder, s.status FROM leases l JOIN sessions s USING (session_id) "
                "WHERE l.expires_at_ms < %s AND s.status = ANY(%s) AND s.head_seq <> l.parked_seq "
                f"{only} ORDER BY l.queued_at_ms, l.session_id LIMIT %s FOR UPDATE OF l SKIP LOCKED",
                params,
            )
            for sid, previous, status in rows:
                epoch = self.bump_authority_epoch(sid)
                self._write(
                    "UPDATE leases SET holder = %s, epoch = %s, expires_at_ms = %s, acquired_at_ms = %s, "
                    "parked_seq = -2 WHERE session_id = %s",
                    (holder, epoch, stamp + ttl_ms, stamp, sid),
                )
                claims.append(LeaseClaim(sid, epoch, previous, status))
        return claims

    def renew_lease(self, session_id: str, holder: str, *, ttl_ms: int) -> bool:
        return (
            self._write(
                "UPDATE leases SET expires_at_ms = %s WHERE session_id = %s AND holder = %s",
                (now_ms() + ttl_ms, session_id, holder),
            )
            > 0
        )

    def release_lease(self, session_id: str, holder: str, *, park: bool = False) -> bool:
        with self._joined():
            released = self._write(
                "UPDATE leases SET holder = NULL, expires_at_ms = 0, parked_seq = CASE WHEN %s THEN "
                "(SELECT head_seq FROM sessions WHERE session_id = %s) ELSE -2 END "
                "WHERE session_id = %s AND holder = %s",
                (park, session_id, session_id, holder),
            )
            if released:
                self._notify(session_id)
            return released > 0

    # ─── retirement (flightlog db copy) ───────────────────────────────────────────────────
    _LEDGER_TABLES = (
        "sessions, events, authority_epochs, grant_policies, external_effects, artifacts, checkpoints, "
        "checkpoint_frontiers, imports, index_leaves, index_checkpoints, cosignatures, salted_artifacts, "
        "artifact_refs, artifact_erasures, ledger_meta"
    )
    """What ``db copy`` reads (and the authority epochs an attach bumps): held in SHARE mode while a copy
    retires the store, so no write to them commits meanwhile."""

    def _refuse_if_retired(self, conn: psycopg.Connection[Any], tx: _Tx) -> None:
        """Checked just before a transaction commits (after its writes, so after any SHARE lock a retiring
        copy held: read committed reads the retirement it committed)."""
        if tx.retiring:
            return
        row = self._run(conn, "SELECT value FROM ledger_meta WHERE key = 'retired'").fetchone()
        if row is not None:
            raise retired_error(self.url, str(row[0]))

    def retirement(self) -> str | None:
        row = self._one("SELECT value FROM ledger_meta WHERE key = 'retired'")
        return None if row is None else str(row[0])

    def retirement_record(self) -> str | None:
        row = self._one("SELECT value FROM ledger_meta WHERE key = 'retired_record'")
        return None if row is None else str(row[0])

    def retire(self, summary: str, record: str) -> None:
        with self._joined() as conn:
            self._tx.retiring = True
            row = self._run(conn, "SELECT 1 FROM ledger_meta WHERE key = 'retired' FOR UPDATE").fetchone()
            if row is not None:
                raise StoreError(f"{self.url} is retired already")
            self._run(
                conn,
                "INSERT INTO ledger_meta (key, value) VALUES ('retired', %s), ('retired_record', %s)",
                (summary, record),
            )

    def hold_writers(self) -> None:
        with self._joined() as conn:
            self._run(conn, f"LOCK TABLE {self._LEDGER_TABLES} IN SHARE MODE")

    # ─── adopting another database's ledger id (flightlog db copy) ────────────────────────
    def adopt_ledger_id(self, ledger_id: str) -> None:
        if not 8 <= len(ledger_id) <= 64 or any(c not in "0123456789abcdef" for c in ledger_id):
            raise StoreError(f"ledger id {ledger_id[:70]!r} is not 8-64 lowercase hex")
        with self._joined() as conn:
            self._run(conn, "LOCK TABLE sessions IN SHARE MODE")  # no session created meanwhile
            self._run(conn, "LOCK TABLE index_leaves IN SHARE ROW EXCLUSIVE MODE")
            row = self._run(
                conn, "SELECT value FROM ledger_meta WHERE key = 'ledger_id' FOR UPDATE"
            ).fetchone()
            current = str(row[0]) if row is not None else None
            if current == ledger_id:
                return
            busy = self._run(
                conn,
                "SELECT EXISTS (SELECT 1 FROM sessions) OR EXISTS (SELECT 1 FROM index_leaves)",
            ).fetchone()
            if busy is not None and busy[0]:
                raise StoreError(
                    f"{self.url} holds sessions of ledger {current}; refusing to change its ledger id to "
                    f"{ledger_id} (their signed checkpoints name {current} in their origins)"
                )
            self._run(
                conn,
                "INSERT INTO ledger_meta (key, value) VALUES ('ledger_id', %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (ledger_id,),
            )


# ─── helpers ──────────────────────────────────────────────────────────────────────────────────

_SESSION_COLUMNS = (
    "session_id, task, status, source, created_at_ms, updated_at_ms, head_seq, head_hash, merkle_root, "
    "parent_session_id, metadata"
)
_EFFECT_COLUMNS = "session_id, idempotency_key, intent_hash, intent_json, status, result_json, created_at_ms, completed_at_ms"
_CHECKPOINT_COLUMNS = "session_id, checkpoint_id, size, root, body, created_at_ms"
_IMPORT_COLUMNS = "source_sha256, session_id, importer, importer_version, source_name, imported_at_ms"
_LEASE_COLUMNS = "session_id, holder, epoch, expires_at_ms, acquired_at_ms, parked_seq"
_INDEX_CHECKPOINT_COLUMNS = "checkpoint_id, size, root, body, frontier, created_at_ms"
_RUN_COLUMNS = (
    "run_id, parent, source, state, outcome, updated_at_ms, last_seq, session_status, snapshot, fold"
)
_RUN_UPSERT = (
    f"INSERT INTO runs ({_RUN_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
    "ON CONFLICT (run_id) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in _RUN_COLUMNS.split(", ")[1:])
)


_RUN_SWAP = (
    "UPDATE runs SET "
    + ", ".join(f"{c} = %s" for c in _RUN_COLUMNS.split(", ")[1:])
    + " WHERE run_id = %s AND "
    + " AND ".join(f"{c} IS NOT DISTINCT FROM %s" for c in _RUN_COLUMNS.split(", ")[1:])
)
"""``replace_run_row``: params are the new row's values but ``run_id``, then the expected row's values."""


def _run_values(r: RunRow) -> tuple[Any, ...]:
    return tuple(getattr(r, column) for column in _RUN_COLUMNS.split(", "))


def _index_checkpoint(row: Sequence[Any]) -> IndexCheckpointRecord:
    frontier = bytes(row[4]) if row[4] is not None else None
    return IndexCheckpointRecord(int(row[0]), int(row[1]), str(row[2]), str(row[3]), frontier, int(row[5]))


def _state_clause(states: list[str], refined: dict[str, str]) -> tuple[str, list[Any]]:
    """SQL for "the run's effective state is one of ``states``" (see ``Store.query_runs``)."""
    if not states:
        return "FALSE", []
    params: list[Any] = [states]
    clause = "(state = ANY(%s)"
    if refined:
        clause += " AND (state = 'terminal' OR session_status IS NULL OR NOT (session_status = ANY(%s)))"
        params.append(list(refined))
    clause += ")"
    forcing = [status for status, state in refined.items() if state in states]
    if forcing:
        clause += " OR (session_status = ANY(%s) AND state <> 'terminal')"
        params.append(forcing)
    return f"({clause})", params


def _taken(rows: Sequence[NewEvent], head_seq: int) -> int | None:
    """The lowest seq of ``rows`` already stored (``<= head_seq``) or repeated in the batch, else None."""
    seen: set[int] = set()
    clashes = []
    for row in rows:
        if row.seq <= head_seq or row.seq in seen:
            clashes.append(row.seq)
        seen.add(row.seq)
    return min(clashes) if clashes else None


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


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _schema_version(conn: psycopg.Connection[Any]) -> int:
    exists = conn.execute("SELECT to_regclass('schema_migrations')").fetchone()
    if not exists or exists[0] is None:
        return 0
    row = conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()
    return int(row[0] or 0) if row else 0


def _migrate(conn: psycopg.Connection[Any], schema: str | None) -> None:
    """Apply the missing migrations in one transaction, serialised across processes by an advisory lock."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        if schema:
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations "
            "(version BIGINT PRIMARY KEY, description TEXT NOT NULL, applied_at_ms BIGINT NOT NULL)"
        )
        current = _schema_version(conn)
        for version, (description, sql) in enumerate(MIGRATIONS, start=1):
            if version <= current:
                continue
            conn.execute(sql.encode())
            conn.execute(
                "INSERT INTO schema_migrations VALUES (%s, %s, %s)", (version, description, now_ms())
            )


_LOST_RACE: tuple[type[psycopg.Error], ...] = (
    pg_errors.TransactionRollback,
    pg_errors.SerializationFailure,
    pg_errors.DeadlockDetected,
)
_UNAVAILABLE: tuple[type[psycopg.Error], ...] = (
    psycopg.OperationalError,
    psycopg.InterfaceError,
)


def translate(exc: psycopg.Error, url: str, password: str = "") -> StoreError:
    """Map a driver error to the flightlog error tree (the one place that knows psycopg's classes).

    ``ReadOnlySqlTransaction`` → ``ReadOnlyStore``; a unique violation → ``AppendConflict`` (session and
    seq unknown here: callers that know them raise their own first); connection and server failures
    (``OperationalError``, ``InterfaceError``, pool timeouts) → ``StoreUnavailable``, except a
    serialization failure or deadlock (``TransactionRollback``: the transaction lost a race); anything else →
    ``StoreError`` with the server's message. Messages never carry the password.
    """
    message = _scrub(str(exc).strip() or type(exc).__name__, password)
    if isinstance(exc, pg_errors.ReadOnlySqlTransaction):
        return ReadOnlyStore(url=url)
    if isinstance(exc, pg_errors.UniqueViolation):
        return AppendConflict(session_id=_detail_key(exc), seq=-1)
    if isinstance(exc, _LOST_RACE):  # serialization failure, deadlock: the transaction lost a race
        return StoreError(f"{url}: {message}", url=url, reason=message)
    if isinstance(exc, pg_errors.LockNotAvailable | pg_errors.QueryCanceled):
        return StoreUnavailable(url=url, reason=f"database is busy ({message})")
    if isinstance(exc, _UNAVAILABLE):
        return StoreUnavailable(url=url, reason=message)
    return StoreError(f"{url}: {message}", url=url, reason=message)


def _detail_key(exc: psycopg.Error) -> str:
    diag = getattr(exc, "diag", None)
    detail = getattr(diag, "message_detail", None) or ""
    found = re.search(r"=\(([^,)]*)", detail)
    return found.group(1) if found else "?"
