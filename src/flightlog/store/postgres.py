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

The statements and write steps are :class:`flightlog.store.sql.SqlStore`'s (written with ``?``, run here
as ``%s``: :func:`native`); this module keeps the pool, the transactions, group commit on one writer
connection, the migrations runner, the row locks (``FOR UPDATE``, ``SKIP LOCKED``, table locks), the
one-statement append, ``NOTIFY``/``LISTEN`` and the driver's error translation.

Live wake-ups: every commit that appends to, creates or changes the status of a session sends
``NOTIFY flightlog_events, '<session id>'`` (a pooled transaction right after its ``COMMIT``, in the same
pipeline: commits of different sessions are then not serialised on PostgreSQL's notification-queue lock;
never for a rollback);
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

import functools
import logging
import re
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..errors import install_hint

try:
    import psycopg
    from psycopg import errors as pg_errors
    from psycopg.conninfo import conninfo_to_dict
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        f"the PostgreSQL backend needs the 'postgres' extra: {install_hint('postgres')} "
        f"(psycopg[binary] and psycopg_pool); {exc}"
    ) from exc

from ..errors import AppendConflict, ReadOnlyStore, SessionNotFound, StaleWriter, StoreError, StoreUnavailable
from ..testing.crashpoints import crash_point
from . import rows as R
from .base import (
    NO_SCHEMA,
    RUNNABLE_STATUSES,
    ImportRecord,
    NewEvent,
    RunRow,
    SessionHead,
    StoredEvent,
    row_stamps,
)
from .ddl import (
    LIVE_RUNS_OWNER,
    POSTGRES_EVENTS_SUSPENDED,
    POSTGRES_MIGRATIONS,
    POSTGRES_RUNS_HOT,
    POSTGRES_RUNS_LIST,
    RUNS_FOLD_2,
    RUNS_FOLD_3,
    RUNS_FOLD_4,
    RUNS_FOLD_5,
    RUNS_FOLD_6,
    RUNS_FOLD_7,
)
from .group import CommitGroup, Gate, run_all
from .memory_postgres import MIGRATION as MEMORY_MIGRATION
from .memory_postgres import PostgresMemory
from .pglisten import Listener
from .rows import IMPORT_COLUMNS, now_ms, run_tuple
from .signals import POSTGRES_MIGRATION as SIGNALS_MIGRATION
from .sql import INSERT_EVENT, RUN_UPSERT, UPDATE_HEAD, SqlStore, append_refusal, run_swap_params
from .urls import redact_url

__all__ = ["CHANNEL", "MIGRATIONS", "RUNNABLE_STATUSES", "PostgresStore", "native", "now_ms", "redact"]

log = logging.getLogger(__name__)

CHANNEL: Final = "flightlog_events"
"""The ``NOTIFY`` channel; the payload is the session id."""

MIGRATIONS: list[tuple[str, str]] = [
    *POSTGRES_MIGRATIONS,
    MEMORY_MIGRATION,
    SIGNALS_MIGRATION,
    POSTGRES_RUNS_LIST,
    POSTGRES_RUNS_HOT,
    RUNS_FOLD_2,
    RUNS_FOLD_3,
    RUNS_FOLD_4,
    RUNS_FOLD_5,
    RUNS_FOLD_6,
    RUNS_FOLD_7,
    POSTGRES_EVENTS_SUSPENDED,
    LIVE_RUNS_OWNER,
]
"""Ordered migrations (:data:`flightlog.store.ddl.POSTGRES_MIGRATIONS`, then long-term memory's, then the signal queue's, then the paged runs list's, then
:data:`flightlog.store.ddl.POSTGRES_RUNS_HOT`, then :data:`flightlog.store.ddl.RUNS_FOLD_2`, then :data:`flightlog.store.ddl.RUNS_FOLD_3`, then :data:`flightlog.store.ddl.RUNS_FOLD_4`, then :data:`flightlog.store.ddl.RUNS_FOLD_5`, then :data:`flightlog.store.ddl.RUNS_FOLD_6`, then :data:`flightlog.store.ddl.RUNS_FOLD_7`, then :data:`flightlog.store.ddl.POSTGRES_EVENTS_SUSPENDED`, then :data:`flightlog.store.ddl.LIVE_RUNS_OWNER`): list index + 1 is the
schema version."""

_MIGRATION_LOCK: Final = (
    0x466C6967_68746C67  # pg_advisory_xact_lock key serialising migrations ("Fligh" "tlg")
)


@functools.lru_cache(maxsize=1024)
def native(sql: str) -> str:
    """``sql`` with each ``?`` placeholder (:mod:`flightlog.store.sql`'s style) as psycopg's ``%s``.

    The shared statements hold no literal ``?`` or ``%`` (values travel as parameters), so the rewrite is
    exact; a statement already written with ``%s`` comes back unchanged.
    """
    return sql.replace("?", "%s")


_TAKEN_KEY = re.compile(r"\(session_id, seq\)=\((.*), (-?\d+)\)", re.DOTALL)
"""The key in a unique violation's detail on ``events``: ``Key (session_id, seq)=(<id>, <seq>) already
exists.`` (the key part is not translated, so this holds whatever ``lc_messages`` says)."""


def taken_seq(exc: pg_errors.UniqueViolation, rows: Sequence[NewEvent] | Sequence[StoredEvent]) -> int:
    """The seq whose stored row stopped an insert of ``rows``: the one PostgreSQL names in the violation's
    detail when it is one of theirs, else (a detail without the key) the lowest seq of ``rows``."""
    found = _TAKEN_KEY.search(exc.diag.message_detail or "")
    seqs = {row.seq for row in rows}
    if found is not None and int(found.group(2)) in seqs:
        return int(found.group(2))
    return min(seqs)


def redact(url: str) -> str:
    """``url`` with any password (user part, ``password=`` parameters, keyword strings) replaced by ``***``.

    The one rule lives in :func:`flightlog.store.redact_url`.
    """
    return redact_url(url)


_APPEND = (
    "WITH appended AS ("
    " INSERT INTO events (session_id, seq, kind, event, prev_hash, hash, recorded_at_ms, epoch)"
    " SELECT %(sid)s, r.seq, r.kind, r.event, r.prev_hash, r.hash, r.at, %(epoch)s"
    " FROM unnest(%(seqs)s::bigint[], %(kinds)s::text[], %(events)s::bytea[], %(prevs)s::text[],"
    " %(hashes)s::text[], %(ats)s::bigint[]) AS r(seq, kind, event, prev_hash, hash, at))"
    " UPDATE sessions SET head_seq = %(head_seq)s, head_hash = %(head_hash)s, merkle_root = %(root)s,"
    " updated_at_ms = %(at)s WHERE session_id = %(sid)s"
)
"""An append's rows and the session's new head in one statement (one round trip); a data-modifying
``WITH`` runs exactly once, and a taken ``(session_id, seq)`` fails the whole statement."""


_HEAD = (
    "SELECT s.head_seq, s.head_hash, a.epoch FROM sessions s JOIN authority_epochs a"
    " ON a.session_id = s.session_id WHERE s.session_id = %(sid)s"
)
"""A session's head and authority epoch (one row, none when the session does not exist)."""

_LOCKED_HEAD = (
    f"WITH head AS ({_HEAD} FOR UPDATE),"
    " ok AS (SELECT head.epoch FROM head WHERE (%(epoch)s::bigint IS NULL OR head.epoch = %(epoch)s)"
    " AND head.head_seq = %(after)s AND head.head_hash = %(prev)s),"
    " appended AS ("
    " INSERT INTO events (session_id, seq, kind, event, prev_hash, hash, recorded_at_ms, epoch) {rows}),"
    " moved AS (UPDATE sessions SET head_seq = %(head_seq)s, head_hash = %(head_hash)s,"
    " merkle_root = %(root)s, updated_at_ms = %(at)s"
    " WHERE session_id = %(sid)s AND EXISTS (SELECT 1 FROM ok))"
    "{select}"
)
"""The one-statement append (:data:`_APPEND_CHECKED`) with its rows' ``SELECT`` left as ``{rows}``."""

_SELECT_HEAD = " SELECT head_seq, head_hash, epoch FROM head"

_APPEND_CHECKED = _LOCKED_HEAD.format(
    select=_SELECT_HEAD,
    rows="SELECT %(sid)s, r.seq, r.kind, r.event, r.prev_hash, r.hash, r.at, ok.epoch"
    " FROM ok, unnest(%(seqs)s::bigint[], %(kinds)s::text[], %(events)s::bytea[], %(prevs)s::text[],"
    " %(hashes)s::text[], %(ats)s::bigint[]) AS r(seq, kind, event, prev_hash, hash, at)",
)
"""An append in one statement, so one round trip: lock the session's row and its epoch (``FOR UPDATE``), and
only when the epoch is the writer's and the rows extend the head (``ok``), insert them and move the head.
It returns the head and epoch it locked, from which :meth:`PostgresStore.append_events` raises the same
errors as the shared checks (nothing is written then, and the transaction stays usable). Under READ
COMMITTED a writer that waited for the row lock sees the head the other writer committed."""

_STRICT = " SELECT 1 / count(*)::int FROM ok"
"""The tail that makes an append statement fail (division by zero) unless it wrote: an append sent with
other statements in one pipeline (a deferred one) must stop the pipeline when refused."""

_APPEND_ONE = _LOCKED_HEAD.format(
    select=_SELECT_HEAD,
    rows="SELECT %(sid)s, %(seq)s, %(kind)s, %(event)s, %(prev)s, %(hash)s, %(stamp)s, ok.epoch FROM ok",
)
""":data:`_APPEND_CHECKED` for one event, its values as scalars (no array to build on either side: most
appends are one event)."""

_STRICT_OF = {sql: sql.replace(_SELECT_HEAD, _STRICT) for sql in (_APPEND_CHECKED, _APPEND_ONE)}
"""Each append statement's variant that fails unless it wrote (:data:`_STRICT`)."""

_REFUSE_IF_RETIRED = "SELECT 1 / (1 - count(*)::int) FROM ledger_meta WHERE key = 'retired'"
"""Fails (division by zero) when the store is retired: sent ahead of ``COMMIT`` in one pipeline, it turns the
commit into a rollback without waiting for an answer first (:meth:`PostgresStore._finish`)."""

_NOTIFY = "SELECT pg_notify(%s, sid) FROM unnest(%s::text[]) AS sid"
_NOTIFY_ONE = "SELECT pg_notify(%s, %s)"
"""Wakes the listeners of the given session ids. A pooled transaction sends it right after its ``COMMIT``, in
the same pipeline (no extra round trip), where it runs in a transaction of its own: a transaction that
notifies holds PostgreSQL's one notification-queue lock per database from its pre-commit until it ends, so
a ``NOTIFY`` inside the writing transaction would serialise every commit in the database, WAL flush
included (measured: 26 of 32 writers waiting on that lock, ``Lock:object``). After the ``COMMIT`` the lock
is held only for the queue insert (nothing to flush). Listeners still hear only of durable commits and
never of a rolled-back one; a writer killed between its ``COMMIT`` and the ``NOTIFY`` leaves them to wake at
their timeout (they re-read either way, :meth:`PostgresStore.wait_for_events`)."""

_SWAP_POINT = "flightlog_swap"

_SWAP = "WITH swapped AS ({} RETURNING 1) SELECT 1 / count(*)::int FROM swapped"
"""A run-row compare-and-set that fails (division by zero) when it matched no row."""

_SWAP_OR_RETIRED = (
    "WITH swapped AS ({} RETURNING 1) SELECT 1 / (count(*)::int"
    " * (1 - (SELECT count(*) FROM ledger_meta WHERE key = 'retired')::int)) FROM swapped"
)
""":data:`_SWAP` that also fails when the store is retired: an append's last statement before ``COMMIT``,
so it is the retirement check too (:data:`_REFUSE_IF_RETIRED`, one statement fewer)."""

_PLACEHOLDER_FOLD = ""
"""The ``fold`` of a placeholder row (:data:`_LOCK_RUN_ROWS`): no row the projection writes has it (a fold
is JSON)."""

_LOCK_RUN_ROWS = (
    f"INSERT INTO runs ({R.RUN_COLUMNS}) SELECT id, NULL, '', '', NULL, 0, -1, NULL, '', '{_PLACEHOLDER_FOLD}'"
    " FROM unnest(%s::text[]) AS id ORDER BY id"
    " ON CONFLICT (run_id) DO UPDATE SET fold = runs.fold"
    f" RETURNING {R.RUN_COLUMNS}"
)
"""Lock the ``runs`` rows of the given ids (sorted, distinct) and return them: a stored row is locked by
the no-op ``DO UPDATE`` and returned as it is now (under READ COMMITTED the update applies to the row's
latest committed version, waiting for its writer), an absent id is inserted as a placeholder, which locks
its key (a concurrent insert of it waits for this transaction, or this one for it, then updates its row).
Rows are taken in ``ORDER BY id``, so writers of overlapping rows lock them in one order."""

_Params = Sequence[Any] | Mapping[str, Any]
"""A statement's parameters: positional, or named (``%(name)s``)."""


@contextmanager
def _pipeline(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """``conn.pipeline()`` that raises the first error of its statements, and only that one.

    In pipeline mode psycopg raises a statement's error from a later ``execute`` inside the block; leaving
    the block then syncs the pipeline, whose statements after the failed one come back ``pipeline aborted``
    (:class:`psycopg.errors.PipelineAborted`), which psycopg logs as ``error ignored terminating
    <psycopg.Pipeline [INERROR]>: pipeline aborted`` on every refused deferred append or missed run-row
    swap, expected paths of this store. Here the first error is caught in the block (no more statements
    are sent), the pipeline is left normally, its ``pipeline aborted`` (the consequence) is dropped, and
    the first error is raised; any other error from leaving it is added to that error as a note.

    A failed pipeline also clears psycopg's prepared-statement cache (:func:`_forget_prepared`).

    Raises:
        psycopg.Error: the first statement that failed, else an error syncing the pipeline.
    """
    failed: psycopg.Error | None = None
    try:
        with conn.pipeline():
            try:
                yield
            except psycopg.Error as exc:
                failed = exc
    except pg_errors.PipelineAborted:
        _forget_prepared(conn)
        if failed is None:
            raise
    except psycopg.Error as exc:
        _forget_prepared(conn)
        if failed is None:
            raise
        failed.add_note(f"then, leaving the pipeline: {type(exc).__name__}: {exc}")
    if failed is not None:
        _forget_prepared(conn)
        raise failed


def _forget_prepared(conn: psycopg.Connection[Any]) -> None:
    """Clear psycopg's prepared-statement cache of ``conn`` (and deallocate every statement on the server,
    ``DEALLOCATE ALL``, which psycopg sends after the connection's next statement) after a failed pipeline.

    Why: psycopg prepares a statement on its ``prepare_threshold``-th use by queueing its ``Parse`` before
    the statement and names it prepared at once; in pipeline mode it checks the outcome only on a
    statement's first use (``PrepareManager.maybe_add_to_cache`` returns no key to validate for a counted
    statement; psycopg 3.2-3.3). When an earlier statement of the pipeline fails (a missed run-row swap, a
    refused deferred append: expected paths of this store), the server skips that ``Parse`` and the cache
    names a statement that does not exist: its next use failed with ``prepared statement "_pg3_N" does not
    exist`` (found by the appendproj pass's concurrent-writers scenario; pgrace pass). psycopg's own
    ``Connection.rollback()`` clears the cache the same way (our transactions are SQL ``BEGIN``/``ROLLBACK``
    on autocommit connections, whose ``ROLLBACK`` clears it only on the statement's first checked use).
    ``_prepared`` is psycopg's private attribute: a psycopg without it fails here, loudly (pinned by
    ``tests/postgres/test_runs_projection.py``)."""
    conn._prepared.clear()


def _commit(conn: psycopg.Connection[Any], notify: set[str]) -> None:
    """``NOTIFY`` the listeners of ``notify`` (session ids) and ``COMMIT``, in one pipeline (one round trip):
    PostgreSQL delivers the notifications only once the commit is durable."""
    crash_point("commit.before")  # test-only fault injection (flightlog.testing.crashpoints)
    with _pipeline(conn):
        if notify:
            conn.execute(*_notifying(notify))
        conn.execute("COMMIT")
    crash_point("commit.after")


def _committed(statements: Sequence[tuple[str, _Params]], cursors: Sequence[psycopg.Cursor[Any]]) -> bool:
    """Whether the ``COMMIT`` among ``statements`` (one pipeline, their ``cursors``) committed: a statement
    the server skipped after an earlier error has no ``COMMIT`` status (and a failed transaction's
    ``COMMIT`` answers ``ROLLBACK``)."""
    return any(
        sql == "COMMIT" and cur.statusmessage == "COMMIT"
        for (sql, _), cur in zip(statements, cursors, strict=False)
    )


def _notifying(sessions: set[str]) -> tuple[str, tuple[Any, ...]]:
    """The statement that notifies ``sessions`` (:data:`_NOTIFY`; one session without an array to plan)."""
    if len(sessions) == 1:
        return _NOTIFY_ONE, (CHANNEL, *sessions)
    return _NOTIFY, (CHANNEL, sorted(sessions))


def _undo_swap(conn: psycopg.Connection[Any]) -> bool:
    """After a failed pipeline that held a deferred swap: True when the swap is what failed (its savepoint
    is still open: rolled back and released, the transaction usable again), False when something else did
    (the savepoint was released before, or never made)."""
    try:
        conn.execute(f"ROLLBACK TO SAVEPOINT {_SWAP_POINT}")
        conn.execute(f"RELEASE SAVEPOINT {_SWAP_POINT}")
    except psycopg.Error:
        return False
    return True


@dataclass
class _Swap:
    """A deferred compare-and-set of a ``runs`` row (:meth:`PostgresStore.replace_run_row_or`): the
    ``UPDATE`` (sent as :data:`_SWAP` or :data:`_SWAP_OR_RETIRED`, failing when no row matched) and what to
    do instead when it fails."""

    sql: str
    params: Sequence[Any]
    fallback: Callable[[], None]


@dataclass
class _Pending:
    """An append not sent yet (``deferrable``, :meth:`PostgresStore.append_events`): its statement in the
    variant that fails unless it wrote (:data:`_STRICT`), what raises its refusal, and what sends it again
    in a new transaction (with its checks)."""

    sql: str
    values: Mapping[str, Any]
    refused: Callable[[psycopg.Connection[Any], psycopg.Error], Exception]
    redo: Callable[[], None]


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
        self.begun = True
        """``BEGIN`` was sent (else it goes out with the transaction's first statement, one round trip)."""
        self.swap: _Swap | None = None
        """A run-row compare-and-set not sent yet: it goes out with the next statement."""
        self.pending: _Pending | None = None
        """A deferred append: it goes out with the next statement or the commit."""
        self.refusal: Exception | None = None
        """The error of a deferred append refused mid-transaction: the transaction ends with it even when
        the statement that carried the append was inside code that swallows errors (a projector)."""
        self.redo: Callable[[], None] | None = None
        """When the transaction has sent one append and nothing else: sends it again (``BEGIN`` and the
        append, its checks) in a new transaction, so a compare-and-set sent without a savepoint can fail
        and the transaction still be redone whole (:meth:`PostgresStore._finish`)."""


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


class PostgresStore(SqlStore):
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
        self._columns: set[tuple[str, str]] = set()
        """Columns seen to exist (:meth:`_has_column`), as (table, column)."""
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
                    raise StoreUnavailable(url=self.url, reason=NO_SCHEMA)
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
        tx.conn, tx.depth, tx.after_commit, tx.after_rollback, tx.notify = conn, 1, [], [], set()
        tx.retiring, tx.begun, tx.swap, tx.redo, tx.pending = False, False, None, None, None
        tx.refusal = None
        try:
            yield
            self._finish(conn, tx)
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
        run_all(callbacks)  # every one runs, then the first failure is raised (a recorder's subscriber)

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
            tx.retiring, tx.begun, tx.swap, tx.redo, tx.pending = False, True, None, None, None
            try:
                yield
                if not tx.retiring:  # after its writes, so after any SHARE lock a retiring copy held
                    self.refuse_if_retired()  # on ``conn``: this thread's transaction (read committed)
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
            group.notify |= tx.notify
            after_commit, after_rollback = tx.after_commit, tx.after_rollback
            tx.conn, tx.depth, tx.after_commit, tx.after_rollback, tx.notify = None, 0, [], [], set()
            defer = gate.end_member(group, self._commit_group)
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
        self._run(conn, f"SAVEPOINT {name}")  # sends any deferred swap first: it belongs to the outer block
        tx.depth += 1
        try:
            yield
        except BaseException:
            tx.swap = None  # deferred inside this block: undone with it
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
        tx.swap, tx.redo, tx.pending, tx.refusal = None, None, None, None
        if rollback and not conn.closed and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            with suppress(psycopg.Error):
                conn.execute("ROLLBACK")
        self._pool.putconn(conn)

    def _finish(self, conn: psycopg.Connection[Any], tx: _Tx) -> None:
        """End a pooled transaction in one round trip: the deferred swap, the retirement check, ``COMMIT`` and
        ``NOTIFY`` (after the commit, :data:`_NOTIFY`) in one pipeline. A transaction that sent nothing has
        nothing to commit (its notifications go out on their own)."""
        if tx.refusal is not None:
            raise tx.refusal
        if not tx.begun and tx.swap is None and tx.pending is None:
            if tx.notify:
                self._run(conn, *_notifying(tx.notify))
            return
        crash_point("commit.before")  # test-only fault injection (flightlog.testing.crashpoints)
        try:
            if tx.pending is not None:
                self._finish_lone(conn, tx, tx.pending, tx.swap, tx.pending.redo)
            elif tx.redo is not None and tx.swap is not None:
                self._finish_lone(conn, tx, None, tx.swap, tx.redo)
            else:
                self._pipelined(conn, tx, self._tail(tx))
        except psycopg.Error as exc:
            if tx.retiring:
                raise
            with suppress(psycopg.Error):
                conn.execute("ROLLBACK")
            failed = exc
        else:
            crash_point("commit.after")
            return
        self.refuse_if_retired()  # retired (the pipeline's check failed): say where the ledger went
        raise failed  # any other failure stands

    @staticmethod
    def _tail(tx: _Tx, *, checked: bool = False) -> list[tuple[str, _Params]]:
        """What ends a transaction: the retirement check (unless ``checked`` or retiring), ``COMMIT``, then
        ``NOTIFY`` in a transaction of its own (:data:`_NOTIFY`)."""
        tail: list[tuple[str, _Params]] = []
        if not tx.retiring and not checked:
            tail.append((_REFUSE_IF_RETIRED, ()))
        tail.append(("COMMIT", ()))
        if tx.notify:
            tail.append(_notifying(tx.notify))
        return tail

    def _finish_lone(
        self,
        conn: psycopg.Connection[Any],
        tx: _Tx,
        pending: _Pending | None,
        swap: _Swap | None,
        redo: Callable[[], None],
    ) -> None:
        """Commit a transaction that holds one append (a lone ``Recorder.append``) and maybe its deferred
        run-row swap, in one pipeline: the append if it was deferred (``BEGIN`` and its statement, failing
        unless it wrote), the swap without a savepoint and with the retirement check
        (:data:`_SWAP_OR_RETIRED`), ``COMMIT``, ``NOTIFY``. A deferred append so makes one round trip.

        A refused append raises its error (named from the head read after the rollback). When the swap
        fails (it matched no row, the store is retired, or any error: a savepoint's ``ROLLBACK TO`` would
        have undone it too) the whole transaction is rolled back and redone: the append again (``redo``:
        ``BEGIN``, the statement and its checks, which raise as the first time), the swap's fallback (the
        projector's general path), then the usual end. Nothing else was sent in the transaction, so the
        redone transaction writes all it did.

        Raises:
            StaleWriter, AppendConflict, SessionNotFound: the deferred append was refused; nothing written.
            psycopg.Error: another statement failed (the transaction is aborted).
        """
        tx.pending = tx.swap = tx.redo = None
        tx.begun = True
        statements: list[tuple[str, _Params]] = []
        if pending is not None:
            statements += [("BEGIN", ()), (pending.sql, pending.values)]
        if swap is not None:
            statements.append(((_SWAP if tx.retiring else _SWAP_OR_RETIRED).format(swap.sql), swap.params))
        statements.extend(self._tail(tx, checked=swap is not None))
        cursors: list[psycopg.Cursor[Any]] = []
        try:
            with _pipeline(conn):
                for sql, params in statements:
                    cursors.append(conn.execute(native(sql), params or None))
        except psycopg.Error as exc:
            if _committed(statements, cursors):  # only the NOTIFY after it failed: the commit stands
                log.warning("NOTIFY after a durable commit failed (listeners wake at their timeout): %s", exc)
                return
            at = 0 if pending is None else 2  # the swap's cursor
            if pending is not None and (len(cursors) < 2 or cursors[1].pgresult is None):
                raise pending.refused(conn, exc) from exc
            if swap is None or len(cursors) <= at or cursors[at].pgresult is not None:
                raise  # the swap went through: something after it failed
            conn.execute("ROLLBACK")
            tx.begun = False
            redo()
            swap.fallback()
            self._pipelined(conn, tx, self._tail(tx))

    def _pipelined(
        self, conn: psycopg.Connection[Any], tx: _Tx, statements: Sequence[tuple[str, _Params]]
    ) -> list[psycopg.Cursor[Any]]:
        """Run ``statements`` in this thread's transaction after what it still owes (``BEGIN`` not sent yet,
        a deferred swap), all in one pipeline: one round trip. Their cursors, results fetched.

        A deferred swap runs in a savepoint and fails when no row matched; then the pipeline stops there,
        the savepoint is rolled back (the transaction is usable again), the swap's fallback runs and the
        statements are sent again. A failure after a ``COMMIT`` among ``statements`` that committed (only a
        ``NOTIFY`` follows one) is logged, not raised: the commit stands.

        Raises:
            psycopg.Error: a statement failed (the transaction is aborted).
        """
        swap, tx.swap, tx.redo = tx.swap, None, None
        pending, tx.pending = tx.pending, None
        begin, tx.begun = not tx.begun, True
        cursors: list[psycopg.Cursor[Any]] = []
        appended: psycopg.Cursor[Any] | None = None
        try:
            with _pipeline(conn):
                if begin:
                    conn.execute("BEGIN")
                if pending is not None:
                    appended = conn.execute(native(pending.sql), pending.values)
                if swap is not None:
                    conn.execute(f"SAVEPOINT {_SWAP_POINT}")
                    conn.execute(native(_SWAP.format(swap.sql)), swap.params)
                    conn.execute(f"RELEASE SAVEPOINT {_SWAP_POINT}")
                for sql, params in statements:
                    cursors.append(conn.execute(native(sql), params or None))
        except psycopg.Error as exc:
            if _committed(statements, cursors):  # only the NOTIFY after it failed: the commit stands
                log.warning("NOTIFY after a durable commit failed (listeners wake at their timeout): %s", exc)
                return cursors
            if pending is not None and (appended is None or appended.pgresult is None):
                refusal = tx.refusal = pending.refused(conn, exc)
                with suppress(
                    psycopg.Error
                ):  # what the block still sends goes into a transaction rolled back
                    conn.execute("BEGIN")
                raise refusal from exc
            if swap is None or not _undo_swap(conn):
                raise
            swap.fallback()
            return self._pipelined(conn, tx, statements) if statements else []
        return cursors

    def _send(self, conn: psycopg.Connection[Any], sql: str, params: _Params | None) -> Any:
        """One statement on ``conn``; in this thread's transaction it carries what the transaction still
        owes (:meth:`_pipelined`)."""
        tx = self._tx
        if conn is tx.conn:
            if not tx.begun or tx.swap is not None:
                return self._pipelined(conn, tx, [(sql, params or ())])[0]
            tx.redo = None
        return conn.execute(native(sql), params if params else None)

    def _settle(self, conn: psycopg.Connection[Any]) -> None:
        """Send what this thread's transaction still owes before a statement that bypasses :meth:`_send`."""
        tx = self._tx
        if conn is tx.conn:
            tx.redo = None
            if not tx.begun or tx.swap is not None:
                self._pipelined(conn, tx, [])

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
            return self._send(conn, sql, params)
        except psycopg.Error as exc:
            raise self._translate(exc) from exc

    def _translate(self, exc: psycopg.Error) -> StoreError:
        return translate(exc, self.url, self._password)

    # ─── SqlStore primitives ─────────────────────────────────────────────────────────────
    FOR_UPDATE = " FOR UPDATE"
    SKIP_LOCKED = " FOR UPDATE OF l SKIP LOCKED"
    INSERT_ORDER = "ord"
    ROW_MARK = "(e.xmin::text::bigint + octet_length(e.event))"
    """An ``UPDATE`` writes a new row version, with a new ``xmin`` (the transaction that wrote it). Rows
    rewritten in one transaction share it, so lengths chosen against the old ``xmin`` values keep the sum
    (:meth:`Store.ledger_marks`: not a verifier)."""
    NULL_SAFE_EQ = "IS NOT DISTINCT FROM"
    EVENT_TEXT = "convert_from(e.event, 'UTF8')"
    BYTES_CONTAIN = "position(?::bytea in event) > 0"
    MARK_CONTAINS = "position('\\x{hex}'::bytea in event) > 0"
    EVENT_BYTES_OF = "{column}"
    TEXT_BYTES_OF = "convert_to({column}, 'UTF8')"
    EVENTS_SCAN = "events"
    SESSIONS_BY_CREATED = "sessions"  # the planner picks its index itself
    SESSION_KEY_COLUMNS = "session_id, status, head_seq, head_hash"  # typed columns: str, str, int, str
    BLOB_ID = None  # a text column: every id is text

    def _text_match(self, column: str) -> str:
        return f"{column} ILIKE ?{self.LIKE_ESCAPE}"

    def _has_column(self, table: str, column: str) -> bool:
        """Asked once per column until it exists (``information_schema.columns`` of the schema the
        connection's ``search_path`` names first; no migration drops a column this is asked about)."""
        if (table, column) in self._columns:
            return True
        found = self._one(
            "SELECT 1 FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name = ? AND column_name = ?",
            (table, column),
        )
        if found is not None:
            self._columns.add((table, column))
        return found is not None

    def _all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._conn() as conn:
            return list(self._run(conn, sql, params).fetchall())

    def _one(self, sql: str, params: Sequence[Any] = ()) -> Any:
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

    def _write(self, sql: str, params: Sequence[Any] = ()) -> int:
        with self._joined() as conn:
            return int(self._run(conn, sql, params).rowcount)

    def _guarded(self, sql: str, params: Sequence[Any] = ()) -> int:
        """``_write`` in a savepoint: a failed statement leaves the caller's transaction usable."""
        with self._joined() as conn:
            try:
                self._settle(conn)
                with conn.transaction():
                    return int(conn.execute(native(sql), params if params else None).rowcount)
            except psycopg.Error as exc:
                raise self._translate(exc) from exc

    def _insert_unique(self, sql: str, params: Sequence[Any]) -> bool:
        try:
            self._guarded(sql, params)
        except StoreError as exc:
            if isinstance(exc.__cause__, pg_errors.UniqueViolation):
                return False
            raise
        return True

    def _insert_events(
        self,
        session_id: str,
        rows: Sequence[NewEvent],
        head: SessionHead,
        stamp: int,
        epoch: int,
        stamps: Sequence[int],
    ) -> None:
        """The rows and the session's new head in one statement (one round trip, :data:`_APPEND`)."""
        conn = self._tx.conn
        assert conn is not None, "called inside append_events' transaction"
        values = {
            "sid": session_id, "at": stamp, "epoch": epoch, "seqs": [r.seq for r in rows],
            "kinds": [r.kind for r in rows], "events": [r.event_bytes for r in rows],
            "prevs": [r.prev_hash for r in rows], "hashes": [r.hash for r in rows], "ats": list(stamps),
            "head_seq": head.seq, "head_hash": head.hash, "root": head.root,
        }  # fmt: skip
        try:
            self._send(conn, _APPEND, values)
        except pg_errors.UniqueViolation as exc:
            raise AppendConflict(session_id=session_id, seq=taken_seq(exc, rows)) from exc
        except psycopg.Error as exc:
            raise self._translate(exc) from exc

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
        """The shared checks and write (:meth:`SqlStore.append_events`) as one statement, one round trip
        (:data:`_APPEND_CHECKED`); the same errors, raised before anything is written.

        ``deferrable`` and the append would be the first statement of this thread's outermost pooled
        transaction: nothing is sent now; the statement goes out with the transaction's next statement or
        its commit (:meth:`_finish_lone`: a lone ``Recorder.append`` is then one round trip), and its
        errors are raised there."""
        if not rows or R.taken(rows, rows[0].seq - 1) is not None:
            return super().append_events(session_id, rows, head, epoch=epoch, recorded_at_ms=recorded_at_ms)
        stamp = now_ms()
        stamps = row_stamps(rows, recorded_at_ms, stamp)
        first = rows[0]
        values: dict[str, Any]
        if len(rows) == 1:
            sql = _APPEND_ONE
            values = {
                "sid": session_id, "epoch": epoch, "after": first.seq - 1, "prev": first.prev_hash,
                "seq": first.seq, "kind": first.kind, "event": first.event_bytes, "hash": first.hash,
                "stamp": stamps[0], "head_seq": head.seq, "head_hash": head.hash, "root": head.root, "at": stamp,
            }  # fmt: skip
        else:
            sql = _APPEND_CHECKED
            values = {
                "sid": session_id, "epoch": epoch, "after": first.seq - 1, "prev": first.prev_hash,
                "seqs": [r.seq for r in rows], "kinds": [r.kind for r in rows],
                "events": [r.event_bytes for r in rows], "prevs": [r.prev_hash for r in rows],
                "hashes": [r.hash for r in rows], "ats": list(stamps),
                "head_seq": head.seq, "head_hash": head.hash, "root": head.root, "at": stamp,
            }  # fmt: skip

        def check(found: Any) -> None:
            problem = append_refusal(session_id, found, first, epoch)
            if problem is not None:
                raise problem

        def checked(cursor: Callable[[], Any]) -> None:
            try:
                found = cursor().fetchone()
            except pg_errors.UniqueViolation as exc:
                raise AppendConflict(session_id=session_id, seq=taken_seq(exc, rows)) from exc
            except psycopg.Error as exc:
                raise self._translate(exc) from exc
            check(found)

        def refused(conn: psycopg.Connection[Any], exc: psycopg.Error) -> Exception:
            """The error of a deferred append that failed; its transaction is rolled back."""
            with suppress(psycopg.Error):
                conn.execute("ROLLBACK")
            if not isinstance(exc, pg_errors.DivisionByZero | pg_errors.UniqueViolation):
                return self._translate(exc)
            if isinstance(exc, pg_errors.UniqueViolation):
                return AppendConflict(session_id=session_id, seq=taken_seq(exc, rows))
            try:
                check(conn.execute(_HEAD, {"sid": session_id}).fetchone())
            except (SessionNotFound, StaleWriter, AppendConflict) as refusal:
                return refusal
            return AppendConflict(session_id=session_id, seq=first.seq)  # the head moved back: cannot be

        with self._joined() as conn:
            tx = self._tx
            opens = conn is tx.conn and not tx.begun and tx.swap is None and tx.pending is None
            if opens:  # nothing else sent yet: the transaction may be redone from here (_finish_lone)

                def redo() -> None:
                    checked(lambda: self._pipelined(conn, tx, [(sql, values)])[0])

            if opens and deferrable and tx.depth == 1 and self._gate is None:
                tx.pending = _Pending(_STRICT_OF[sql], values, refused, redo)
            else:
                checked(lambda: self._send(conn, sql, values))
                if opens:
                    tx.redo = redo
            self._notify(session_id)
        return stamp

    def replace_run_row_or(self, row: RunRow, expected: RunRow, fallback: Callable[[], None]) -> None:
        """In a pooled transaction, the compare-and-set is deferred to the transaction's next round trip
        (its commit, on an append's usual path: :meth:`_finish`); ``fallback`` runs then, before the
        commit, if it matched no row. Elsewhere as :meth:`SqlStore.replace_run_row_or`."""
        tx = self._tx
        if tx.depth == 0 or self._gate is not None:
            super().replace_run_row_or(row, expected, fallback)
            return
        if row.run_id != expected.run_id:
            raise ValueError(f"replace_run_row: row of {row.run_id!r} cannot replace {expected.run_id!r}")
        assert tx.conn is not None
        if tx.swap is not None:  # one swap outstanding at a time: its fallback sees the one before
            self._pipelined(tx.conn, tx, [])
        sql, params = run_swap_params(row, expected, self.NULL_SAFE_EQ)
        tx.swap = _Swap(sql, params, fallback)

    def _notify(self, session_id: str) -> None:
        """Queue a ``NOTIFY`` for ``session_id``, sent with the open transaction's commit."""
        self._tx.notify.add(session_id)

    @classmethod
    def _any(cls, column: str, values: Collection[Any]) -> tuple[str, list[Any]]:
        return f"{column} = ANY(?)", [list(values)]

    @classmethod
    def _in_values(cls, column: str, values: Collection[str]) -> tuple[str, list[Any]]:
        return cls._any(column, values)

    # ─── migrations ───────────────────────────────────────────────────────────────────────
    def schema_version(self) -> int:
        with self._conn() as conn:
            try:
                return _schema_version(conn)
            except psycopg.Error as exc:
                raise self._translate(exc) from exc

    # ─── events: copies, epochs, live wake-ups ───────────────────────────────────────────
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
                raise SessionNotFound(session_id=session_id, exact=True)
            if rows[0].seq != found[0] + 1 or rows[0].prev_hash != found[1]:
                raise AppendConflict(session_id=session_id, seq=min(rows[0].seq, found[0] + 1))
            copied = [
                (session_id, r.seq, r.kind, r.event_bytes, r.prev_hash, r.hash, r.recorded_at_ms)
                for r in rows
            ]
            with conn.cursor() as cur:
                try:
                    self._settle(conn)
                    cur.executemany(native(INSERT_EVENT), copied)
                except pg_errors.UniqueViolation as exc:
                    raise AppendConflict(session_id=session_id, seq=taken_seq(exc, rows)) from exc
                except psycopg.Error as exc:
                    raise self._translate(exc) from exc
            self._run(
                conn, UPDATE_HEAD, (head.seq, head.hash, head.root, rows[-1].recorded_at_ms, session_id)
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

    # ─── imports, runs projection, index log ─────────────────────────────────────────────
    @property
    def memory(self) -> PostgresMemory:
        """The long-term memory index in this database (:mod:`flightlog.store.memory`)."""
        return PostgresMemory(self)

    def imports_of(self, session_id: str) -> list[ImportRecord]:
        """The import records of a session (files imported into it), oldest first."""
        rows = self._all(
            f"SELECT {IMPORT_COLUMNS} FROM imports WHERE session_id = ? ORDER BY imported_at_ms",
            (session_id,),
        )
        return [ImportRecord(*row) for row in rows]

    def lock_run_rows(self, run_ids: Collection[str]) -> dict[str, RunRow]:
        """:meth:`Store.lock_run_rows` in one statement (:data:`_LOCK_RUN_ROWS`): every id's row is locked
        in sorted id order, an absent one inserted as a placeholder (``fold`` empty, left out of the
        result), so two writers of overlapping rows queue instead of deadlocking, and a writer of a row
        not stored yet waits for another's insert of it (then locks the row it committed).

        Raises:
            RuntimeError: outside a transaction (the locks and placeholders would not outlive the call).
        """
        if not self._tx.depth:
            raise RuntimeError("lock_run_rows outside a transaction")
        ids = sorted(set(run_ids))
        if not ids:
            return {}
        rows = self._all(_LOCK_RUN_ROWS, (ids,))
        return {row[0]: RunRow(*row) for row in rows if row[-1] != _PLACEHOLDER_FOLD}

    def hold_run_rows(self) -> None:
        """``LOCK TABLE runs IN EXCLUSIVE MODE`` (only plain reads go on) until the transaction ends."""
        with self._joined() as conn:
            self._run(conn, "LOCK TABLE runs IN EXCLUSIVE MODE")

    def put_run_rows(self, rows: Sequence[RunRow]) -> None:
        """Upsert rows (one statement per row; joins an open transaction)."""
        if not rows:
            return
        with self._joined() as conn:
            try:
                self._settle(conn)
                with conn.cursor() as cur:
                    cur.executemany(native(RUN_UPSERT), [run_tuple(r) for r in rows])
            except psycopg.Error as exc:
                raise self._translate(exc) from exc

    def lock_index(self) -> None:
        with self._joined() as conn:
            # One log, one writer: taken before the index head is read (READ COMMITTED then sees the head
            # the previous holder committed), held until this transaction ends.
            self._run(conn, "LOCK TABLE index_leaves IN SHARE ROW EXCLUSIVE MODE")

    # ─── retirement, ledger id adoption (flightlog db copy) ──────────────────────────────────
    _LEDGER_TABLES = (
        "sessions, events, authority_epochs, grant_policies, external_effects, artifacts, checkpoints, "
        "checkpoint_frontiers, imports, index_leaves, index_checkpoints, cosignatures, salted_artifacts, "
        "artifact_refs, artifact_erasures, ledger_meta"
    )
    """What ``db copy`` reads (and the authority epochs an attach bumps): held in SHARE mode while a copy
    retires the store, so no write to them commits meanwhile."""

    def _before_retire(self) -> None:
        self._tx.retiring = True

    def hold_writers(self) -> None:
        with self._joined() as conn:
            self._run(conn, f"LOCK TABLE {self._LEDGER_TABLES} IN SHARE MODE")

    def _hold_for_adoption(self) -> None:
        with self._joined() as conn:
            self._run(conn, "LOCK TABLE sessions IN SHARE MODE")  # no session created meanwhile
            self._run(conn, "LOCK TABLE index_leaves IN SHARE ROW EXCLUSIVE MODE")


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
