"""The SQL both backends share, written once: :class:`SqlStore` holds every statement and the steps of
each write (the append transaction's checks, effects, artifacts, checkpoints, the runs projection, the
index log, leases, retirement) over a handful of primitives each backend supplies.

A backend (:mod:`flightlog.store.sqlite`, :mod:`flightlog.store.postgres`) keeps only what differs:
how it connects and runs a transaction (SQLite: one shared connection behind a gate; PostgreSQL: a pooled
connection per thread), its migrations (types), its placeholders, its locking and its wake-ups.

Statements here use ``?`` placeholders (SQLite's ``qmark`` style); the PostgreSQL backend rewrites them to
``%s`` where it runs them (:func:`flightlog.store.postgres.native`). They contain no literal ``?`` or
``%``: values always travel as parameters. What the dialects spell differently is a class attribute
(``FOR_UPDATE``, ``NULL_SAFE_EQ``, ...) or a primitive (:meth:`SqlStore._any`).

Primitives (abstract here):

* ``_one`` / ``_all``: a read, in this thread's open transaction if any, else on its own.
* ``_joined()``: this thread's open transaction (joined without a savepoint), else a new one.
* ``_write``: one statement in ``_joined()``; its rowcount.
* ``_guarded``: ``_write`` whose failure leaves the caller's transaction usable (a savepoint on
  PostgreSQL, where a failed statement aborts the transaction; a plain statement on SQLite).
* ``_insert_unique``: a guarded ``INSERT``; False (nothing written) when a key is taken.
* ``_insert_events``: the append's write step (rows plus the session's new head).
* ``_notify``: queue a wake-up for a session's listeners, sent with the commit (PostgreSQL ``NOTIFY``).

Source: ARCHITECTURE.md invariants 1-4 (append-only events, head moves in the append's transaction);
STYLE.md (d) (SQL and row mapping live once).
"""

from __future__ import annotations

import abc
import json
import operator
import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, ClassVar

from ..encoding import SUSPENDED_MARK
from ..errors import AppendConflict, EffectConflict, SessionNotFound, StaleWriter, StoreError
from . import rows as R
from .base import (
    NOT_A_RUN,
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
    RunPageQuery,
    RunRow,
    SaltedArtifactRecord,
    SessionHead,
    SessionRecord,
    Store,
    StoredEvent,
    UnnamedSessionRow,
    check_session_id,
    row_stamps,
)

__all__ = ["INSERT_EVENT", "RUN_UPSERT", "UPDATE_HEAD", "SqlStore", "marks", "run_swap", "run_swap_params"]

_SECOND = operator.itemgetter(1)
"""A row's second column (``event`` in ``read_chain``'s rows)."""

INSERT_EVENT = "INSERT INTO events (session_id, seq, kind, event, prev_hash, hash, recorded_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?)"
"""One event row: ``(session_id, seq, kind, event bytes, prev_hash, hash, recorded_at_ms)``."""

UPDATE_HEAD = (
    "UPDATE sessions SET head_seq = ?, head_hash = ?, merkle_root = ?, updated_at_ms = ? WHERE session_id = ?"
)
"""Move a session's head: ``(head seq, head hash, merkle root, updated_at_ms, session_id)``."""

RUN_UPSERT = (
    f"INSERT INTO runs ({R.RUN_COLUMNS}) VALUES ({','.join('?' * len(R.RUN_FIELDS))}) "
    "ON CONFLICT (run_id) DO UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in R.RUN_FIELDS[1:])
)
"""Insert or overwrite a run row; params in ``RUN_COLUMNS`` order (:func:`flightlog.store.rows.run_tuple`)."""

_ARTIFACT_BATCH = 500
"""Handles per ``SELECT ... IN (...)`` of :meth:`SqlStore.get_artifacts` (SQLite allows 32766 variables)."""
HEAD_FOR_APPEND = (
    "SELECT s.head_seq, s.head_hash, a.epoch FROM sessions s "
    "JOIN authority_epochs a ON a.session_id = s.session_id WHERE s.session_id = ?"
)
"""A session's ``(head_seq, head_hash, authority epoch)`` for an append's checks (:func:`append_refusal`)."""

_RUN_SWAPS: dict[tuple[tuple[int, ...], str], str] = {}


def append_refusal(
    session_id: str, found: tuple[int, str, int] | None, first: NewEvent | None, epoch: int | None
) -> StoreError | None:
    """Why rows whose first is ``first`` cannot extend the session whose ``(head_seq, head_hash, epoch)``
    row is ``found`` (:data:`HEAD_FOR_APPEND`): ``SessionNotFound``, ``StaleWriter`` (``epoch`` given and
    not the session's), ``AppendConflict`` (``first`` does not extend the head, naming the first seq
    that cannot be written); None when nothing stands in the way."""
    if found is None:
        return SessionNotFound(session_id=session_id, exact=True)
    head_seq, head_hash, current = found
    if epoch is not None and current != epoch:
        return StaleWriter(session_id=session_id, epoch=epoch, current_epoch=current)
    if first is not None and (first.seq != head_seq + 1 or first.prev_hash != head_hash):
        return AppendConflict(session_id=session_id, seq=min(first.seq, head_seq + 1))
    return None


def run_swap(changed: tuple[int, ...], null_safe_eq: str) -> str:
    """``replace_run_row``'s UPDATE setting the columns at ``changed`` (indexes into ``RUN_FIELDS``),
    guarded by every column (compared with ``null_safe_eq``): params are the new values of ``changed``,
    then the expected row's values (``run_id`` first). Setting only what changed leaves an unchanged
    column's index alone.

    ``session_status`` and ``fold`` alone would do against flightlog's own writers: a ``runs`` row is a
    function of them (:mod:`flightlog.runs.projection` computes every other column from its ``fold`` text,
    which holds the session's fold and its parent's process entry, and ``session_status``), and every
    writer that changes a row moves one of them (an append moves the fold's ``last_seq``, a parent's
    process entry its ``process``, the ``sessions.status`` trigger the status). The appendproj pass
    (bebf6ae) guarded on those two only; then a row edited outside flightlog (``state``, ``outcome``,
    ``parent``, ``source`` or ``snapshot`` changed, its fold and status left alone) passed the guard and,
    the swap setting only the columns the recorder's row changed, kept the edit through every later append
    (this session's attack pass). Guarded on every column, such a row misses and the projector's general
    path rewrites it from the fold, as before bebf6ae.

    Measured (``bench/append_instructions.py --workload idle``, callgrind, bench/HISTORY.md's appendproj
    entry), per idle append: two-column guard 470.9k instructions; every column guarded 484.0k (+13.1k);
    the two-column guard setting every column 502.8k (an unchanged indexed column set still rewrites its
    index entries); the two columns plus only the columns not set 483.6k (no cheaper within the noise,
    and more code)."""
    key = (changed, null_safe_eq)
    sql = _RUN_SWAPS.get(key)
    if sql is None:
        sets = ", ".join(f"{R.RUN_FIELDS[i]} = ?" for i in changed)
        guard = " AND ".join(f"{c} {null_safe_eq} ?" for c in R.RUN_FIELDS[1:])
        sql = _RUN_SWAPS[key] = f"UPDATE runs SET {sets} WHERE run_id = ? AND {guard}"
    return sql


def run_swap_params(row: RunRow, expected: RunRow, null_safe_eq: str) -> tuple[str, tuple[Any, ...]]:
    """The compare-and-set of ``expected`` to ``row`` (:func:`run_swap`) and its params."""
    old, new = R.run_tuple(expected), R.run_tuple(row)
    changed = tuple([i for i in _RUN_VALUE_INDEXES if new[i] != old[i]]) or _RUN_LAST
    return run_swap(changed, null_safe_eq), (*[new[i] for i in changed], *old)


_RUN_VALUE_INDEXES = range(1, len(R.RUN_FIELDS))
"""Indexes of a run row's columns that a compare-and-set may set (all but ``run_id``)."""
_RUN_LAST = (len(R.RUN_FIELDS) - 1,)
"""What a compare-and-set of an unchanged row sets (its last column, to itself)."""


_NOT_ASCII = f"*[^{chr(1)}-{chr(127)}]*"
"""A ``GLOB`` pattern matching text that holds a character past ASCII (an id that may not be UTF-8)."""


def _key(row: Sequence[Any]) -> tuple[str, str, int, str]:
    """A :meth:`SqlStore.session_keys` row as the driver gives it, the id and status as text
    (:func:`spelled`)."""
    sid, status, head_seq, head_hash = row
    return spelled(sid), spelled(status), head_seq, head_hash


def spelled(value: Any) -> Any:
    """A text column's value as the listings spell it: bytes (SQLite's ``CAST(... AS BLOB)``, PostgreSQL's
    ``convert_to``) decoded as UTF-8 with ``backslashreplace`` (a byte that is not UTF-8 as ``\\xHH``),
    anything else as it is."""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", "backslashreplace")
    return value


_SPELLED_BYTE = re.compile(r"\\x([89a-f][0-9a-f])")
"""What ``backslashreplace`` writes for a byte that is not UTF-8 (always 0x80 or above)."""


def spelled_bytes(text: str) -> bytes | None:
    """The bytes :func:`spelled` writes as ``text`` when they are not UTF-8 (an id a raw write stored,
    listed by :meth:`SqlStore.session_keys` under this spelling), else None (``text`` spells no such bytes:
    it is found as itself).

    Each ``\\xHH`` (HH 80 to ff) is read as that byte: an id whose own text holds such a spelling beside
    bytes that are not UTF-8 spells like another row, and only the reading where every one is a byte is
    looked up."""
    if "\\x" not in text:
        return None
    parts = _SPELLED_BYTE.split(text)
    raw = b"".join(
        bytes.fromhex(part) if i % 2 else part.encode("utf-8", "surrogatepass")
        for i, part in enumerate(parts)
    )
    return raw if len(parts) > 1 and spelled(raw) == text else None


LISTED = "session_id IS NOT NULL"
"""The ``sessions`` rows the listings count and list (:meth:`SqlStore.session_keys`, ``session_keys_among``,
``session_positions``, ``list_sessions``): all but a row with a NULL id, which SQLite's ``TEXT PRIMARY KEY``
accepts (a raw write; flightlog never writes one: :func:`~flightlog.store.base.check_session_id`) and which
names no session (``get_session`` cannot find it). Leaving it out of every listing alike keeps their
positions in step (the approvals queue's pages); PostgreSQL's primary key refuses NULL."""


def marks(values: Collection[Any]) -> str:
    """``?,?,...``: one placeholder per value."""
    return ",".join("?" * len(values))


class SqlStore(Store):
    """A :class:`Store` over SQL tables: every shared statement and write step (see the module docs).

    Dialect attributes (class level): ``FOR_UPDATE`` locks the rows a write reads (PostgreSQL; SQLite
    serialises writers on the file), ``SKIP_LOCKED`` lets lease claimers pass each other's candidates,
    ``LIKE_ESCAPE`` names the ``LIKE`` escape character, ``INSERT_ORDER`` is the column that keeps insertion
    order, ``NULL_SAFE_EQ`` compares two values treating NULLs as equal.
    """

    FOR_UPDATE: ClassVar[str] = ""
    SKIP_LOCKED: ClassVar[str] = ""
    LIKE_ESCAPE: ClassVar[str] = ""
    INSERT_ORDER: ClassVar[str] = "rowid"
    NULL_SAFE_EQ: ClassVar[str] = "IS"
    EVENT_TEXT: ClassVar[str] = "CAST(e.event AS TEXT)"
    """An event row's stored bytes as text, for a ``LIKE`` (UTF-8: the canonical encoding's)."""
    BYTES_CONTAIN: ClassVar[str] = "instr(CAST(event AS BLOB), ?) > 0"
    """An ``events`` row's stored bytes contain the parameter (bytes); a row tampered to TEXT is compared
    as its UTF-8 bytes."""
    EVENT_BYTES_OF: ClassVar[str] = "CAST({column} AS BLOB)"
    """An ``events`` row's stored bytes as the readers select them, ``{column}`` the event column as the
    query names it (``event``, or ``e.event`` under an alias): SQLite hands a tampered TEXT value over as
    its bytes (the driver would decode it, and raise on bytes that are not UTF-8) and a BLOB unchanged."""
    TEXT_BYTES_OF: ClassVar[str] = "CAST({column} AS BLOB)"
    """A TEXT column's stored bytes, ``{column}`` the column: SQLite keeps whatever bytes a raw write gives
    (the driver raises on reading bytes that are not UTF-8 as text)."""
    EVENTS_SCAN: ClassVar[str] = "events NOT INDEXED"
    """The ``events`` table read whole for a byte search of every row: SQLite in rowid (storage) order, not
    through the primary key index (which would look each row up by rowid, in ``session_id`` order)."""
    MARK_INDEX: ClassVar[str] = "events_suspended"
    """The partial index of the ``events`` rows whose stored bytes hold ``SUSPENDED_MARK``
    (:data:`flightlog.store.ddl.SQLITE_EVENTS_SUSPENDED`, ``POSTGRES_EVENTS_SUSPENDED``), kept by the
    database on every write."""
    MARK_CONTAINS: ClassVar[str] = "instr(CAST(event AS BLOB), X'{hex}') > 0"
    """:attr:`BYTES_CONTAIN` with the needle as a literal (``{hex}``: its bytes in lower-case hex): for
    ``SUSPENDED_MARK``, word for word the :attr:`MARK_INDEX` index's ``WHERE``, which is what lets the
    planner read that index (a bound parameter would not: the planner cannot prove the index covers it)."""
    SESSIONS_CREATED: ClassVar[str] = "sessions_created"
    """The index of ``sessions`` by ``created_at_ms`` (the first migration's)."""
    SESSIONS_BY_CREATED: ClassVar[str] = "sessions INDEXED BY sessions_created"
    """The ``sessions`` table read in the listing's order (``created_at_ms, session_id``) to find the row at
    an offset: SQLite through the ``created_at_ms`` index, which stops at that row. Without it SQLite (no
    statistics) plans a ``WHERE`` over the table as a scan and sort of every row (bench/runs.py's
    100,000-run store: ~16 ms against ~0.01 ms for the first page's row). Named only while
    :attr:`SESSIONS_CREATED` exists (:meth:`_has_index`): a store whose index was dropped by hand is read
    by a plain scan (``INDEXED BY`` a missing index fails the statement: "no such index")."""
    ROW_MARK: ClassVar[str] = "length(e.event)"
    """What :meth:`ledger_marks` sums over an ``events`` row (aliased ``e``): a value an edit of the row's
    bytes moves; SQLite has no row version, so the length (read from the record header: no blob loaded).
    A sum of lengths is kept by compensating rewrites (:meth:`Store.ledger_marks`: not a verifier)."""
    SESSION_KEY_COLUMNS: ClassVar[str] = (
        "CAST(session_id AS BLOB), CAST(status AS BLOB), CAST(head_seq AS INTEGER), CAST(head_hash AS TEXT)"
    )
    """:meth:`session_keys`' columns, typed by the query (SQLite columns take any type): the id and status
    as their bytes, decoded by :func:`_key` (an id or status that is not UTF-8, a raw write, is read
    with ``backslashreplace``, never raised on)."""
    BLOB_ID: ClassVar[str | None] = "{column} >= X''"
    """The ``sessions`` rows whose id (``{column}``) is a BLOB (a raw write; SQLite orders every BLOB after
    every TEXT, so a range of the primary key's index) or None when the backend's ids are always text.
    :meth:`session_keys` lists such a row under its id cast to text; the lookups of many ids
    (:meth:`session_keys_among`, :meth:`session_positions`) find it by that text too, so it is counted as
    the listing counts it (the approvals queue then names it unreadable: ``get_session`` finds no such id)."""

    # ─── primitives (see the module docs) ────────────────────────────────────────────────
    @abc.abstractmethod
    def _one(self, sql: str, params: Sequence[Any] = ()) -> Any: ...

    @abc.abstractmethod
    def _all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...

    @abc.abstractmethod
    def _joined(self) -> AbstractContextManager[Any]: ...

    @abc.abstractmethod
    def _write(self, sql: str, params: Sequence[Any] = ()) -> int: ...

    @abc.abstractmethod
    def _guarded(self, sql: str, params: Sequence[Any] = ()) -> int: ...

    @abc.abstractmethod
    def _insert_unique(self, sql: str, params: Sequence[Any]) -> bool: ...

    @abc.abstractmethod
    def _insert_events(
        self,
        session_id: str,
        rows: Sequence[NewEvent],
        head: SessionHead,
        stamp: int,
        epoch: int,
        stamps: Sequence[int],
    ) -> None:
        """Write ``rows`` (each stamped with its ``stamps`` entry) and move the session to ``head``, its
        ``updated_at_ms`` set to ``stamp`` (the checks passed; ``epoch`` is the current one).

        Raises:
            AppendConflict: a seq of ``rows`` was taken meanwhile.
        """

    def _notify(self, session_id: str) -> None:
        """Wake ``session_id``'s listeners once the open transaction commits (default: nobody listens)."""

    def signal_sql(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """The signal queue's one hook (:mod:`flightlog.store.signals`), on the shared primitives."""
        if sql.startswith("SELECT"):
            return self._all(sql, params)
        self._write(sql, params)
        return []

    def _has_table(self, name: str) -> bool:
        """Whether ``name`` exists (a read-only handle may see a database from before its migration)."""
        return True

    def _has_column(self, table: str, column: str) -> bool:
        """Whether ``table`` (known to exist) has ``column`` (a read-only handle may see a database from
        before the migration that added it). Default True, as :meth:`_has_table`."""
        return True

    def _has_index(self, name: str) -> bool:
        """Whether the index ``name`` exists (a read-only handle may see a database from before the
        migration that added it; an index may be dropped by hand). Default True: a backend whose planner
        picks indexes itself runs the same statements with or without one (PostgreSQL)."""
        return True

    @classmethod
    def _any(cls, column: str, values: Collection[Any]) -> tuple[str, list[Any]]:
        """SQL for "``column`` is one of ``values``" and its params (default: an ``IN`` list)."""
        return f"{column} IN ({marks(values)})", list(values)

    @classmethod
    def _in_values(cls, column: str, values: Collection[str]) -> tuple[str, list[Any]]:
        """SQL for "``column`` is one of ``values``" with every value in one parameter, however many
        (no parameter limit to reach): by default a JSON array read by SQLite's ``json_each`` (the JSON
        functions are built in since SQLite 3.38, and in most builds before it), a primary-key lookup each.

        ``json_each`` cuts a string at U+0000 (its ``value`` ends there: SQLite 3.40 and 3.45 alike), so a
        value holding one (an id :func:`~flightlog.store.base.check_session_id` refuses now, but an older
        store or a raw write may hold) is matched by its UTF-8 bytes instead: ``hex(column)`` against a
        second JSON array of their hex spellings (``hex`` reads a TEXT value whole), a scan of the table
        read only when such a value is given."""
        plain = [v for v in values if "\x00" not in v]
        clause, params = f"{column} IN (SELECT value FROM json_each(?))", [json.dumps(plain)]
        cut = [v.encode("utf-8", "surrogatepass").hex().upper() for v in values if "\x00" in v]
        if not cut:
            return clause, params
        return f"({clause} OR hex({column}) IN (SELECT value FROM json_each(?)))", [*params, json.dumps(cut)]

    def _spelled_in(self, column: str, values: Collection[str]) -> tuple[str, list[Any]]:
        """SQL `` OR ...`` for "``column`` holds the bytes one of ``values`` spells" (:func:`spelled_bytes`:
        a BLOB or TEXT id that is not UTF-8, as :meth:`session_keys` lists it) and its params; ``""`` when no
        value spells such bytes (then nothing is added to a query). ``hex(column)`` against one JSON
        array of their hex spellings (``hex`` reads a TEXT or BLOB value whole): a scan of the index,
        made only when such a value is given."""
        raw = [b.hex().upper() for b in map(spelled_bytes, values) if b is not None]
        if not raw:
            return "", []
        return f" OR hex({column}) IN (SELECT value FROM json_each(?))", [json.dumps(raw)]

    def _one_in(self, table: str, sql: str, params: Sequence[Any] = ()) -> Any:
        """``_one``, or None when ``table`` does not exist (a read-only handle on a database from before
        the migration that added it)."""
        return self._one(sql, params) if self._has_table(table) else None

    def _insert_returning(self, sql: str, params: Sequence[Any]) -> int:
        """Run an ``INSERT`` into a table keyed by ``checkpoint_id`` (assigned by the database); that id."""
        with self._joined():
            return int(self._all(sql + " RETURNING checkpoint_id", params)[0][0])

    def _pages(
        self, sql: str, params: Sequence[Any], start: int, stop: int | None, batch: int
    ) -> Iterator[Any]:
        """Rows of ``sql`` (a SELECT whose first column is the ascending key, ending in ``key >= ? AND
        key < ? ORDER BY key LIMIT ?``) from ``start`` to ``stop``, ``batch`` rows per query (keyset
        pagination: bounded memory, and each page is one short read)."""
        for page in self._page_lists(sql, params, start, stop, batch):
            yield from page

    def _page_lists(
        self, sql: str, params: Sequence[Any], start: int, stop: int | None, batch: int
    ) -> Iterator[list[Any]]:
        """:meth:`_pages` a page at a time: each query's rows as the driver returns them (none empty)."""
        upper = stop if stop is not None else R.MAX_SEQ
        position = start
        while True:
            rows = self._all(sql, (*params, position, upper, batch))
            if rows:
                yield rows
            if len(rows) < batch:
                return
            position = rows[-1][0] + 1

    def _before_retire(self) -> None:
        """Inside the retiring transaction, before it writes the retirement (default: nothing)."""

    def _hold_for_adoption(self) -> None:
        """Inside ``adopt_ledger_id``'s transaction: keep sessions and index leaves from being added."""

    # ─── sessions ────────────────────────────────────────────────────────────────────────
    def create_session(self, record: SessionRecord) -> None:
        check_session_id(record.session_id)
        created = record.created_at_ms or R.now_ms()
        values = (
            record.session_id, record.task, record.status, record.source, created, created,
            record.parent_session_id, json.dumps(record.metadata, sort_keys=True), record.merkle_root,
        )  # fmt: skip
        with self._joined():
            if not self._insert_unique(
                "INSERT INTO sessions (session_id, task, status, source, created_at_ms, updated_at_ms,"
                " parent_session_id, metadata, merkle_root) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                values,
            ):
                raise AppendConflict(session_id=record.session_id, seq=-1)
            self._write("INSERT INTO authority_epochs VALUES (?, 0, ?)", (record.session_id, R.now_ms()))
            self._notify(record.session_id)

    def get_session(self, session_id: str) -> SessionRecord:
        row = self._one(f"SELECT {R.SESSION_COLUMNS} FROM sessions WHERE session_id = ?", (session_id,))
        if row is None:
            raise SessionNotFound(session_id=session_id, exact=True)  # says how to resolve a prefix
        return R.session(row)

    def resolve_session(self, prefix: str) -> str:
        if not prefix:
            raise SessionNotFound(session_id=prefix)
        exact = self._one("SELECT session_id FROM sessions WHERE session_id = ?", (prefix,))
        if exact:
            return str(exact[0])
        like = f"session_id LIKE ?{self.LIKE_ESCAPE}"
        after_colon = self._all(
            f"SELECT session_id FROM sessions WHERE {like} LIMIT 2", ("%:" + R.like_escape(prefix),)
        )
        if len(after_colon) == 1:
            return str(after_colon[0][0])
        pattern = R.like_escape(prefix) + "%"
        # A match that is another match's own stream (its parent, and its id is the parent's id + ":...",
        # as a Claude Code sub-agent's "<id>:agent:<x>" or background task's "<id>:task:<x>") does not
        # make the prefix ambiguous: the prefix names the parent.
        s_like, p_like = (f"{alias}.session_id LIKE ?{self.LIKE_ESCAPE}" for alias in "sp")
        rows = self._all(
            f"SELECT s.session_id FROM sessions s WHERE ({s_like} OR {s_like}) AND NOT EXISTS ("
            f"SELECT 1 FROM sessions p WHERE p.session_id = s.parent_session_id AND ({p_like} OR {p_like}) "
            "AND substr(s.session_id, 1, length(p.session_id) + 1) = p.session_id || ':'"
            ") ORDER BY s.session_id LIMIT 6",
            (pattern, "%:" + pattern, pattern, "%:" + pattern),
        )
        if not rows:
            return self._resolve_by_source_key(prefix)
        if len(rows) != 1:
            raise SessionNotFound(session_id=prefix, matches=[r[0] for r in rows])
        return str(rows[0][0])

    def _resolve_by_source_key(self, prefix: str) -> str:
        """``resolve_session``'s last resort: the session an import records a source session in, when the
        source's own key (its identity row ``source:<key>``, :func:`flightlog.importers.identity_key`)
        matches ``prefix`` as a session id would (from its start or after a ``:``), one session apart from
        its own streams. A Claude Code file imported before its ``sessionId`` line is recorded under its
        stem (``claude-code:<stem>``); its real id still finds it."""
        like = f"source_sha256 LIKE ?{self.LIKE_ESCAPE}"
        pattern = R.like_escape(prefix) + "%"
        rows = self._all(
            f"SELECT DISTINCT session_id FROM imports WHERE {like} OR {like} ORDER BY session_id LIMIT 6",
            ("source:" + pattern, "source:%:" + pattern),
        )
        ids = [str(r[0]) for r in rows]
        kept = [i for i in ids if not any(i.startswith(other + ":") for other in ids)]
        if len(kept) != 1:
            raise SessionNotFound(session_id=prefix, matches=kept)
        return kept[0]

    def session_keys(self) -> list[tuple[str, str, int, str]]:
        """``(session_id, status, head_seq, head_hash)`` of every session, oldest first, in one query (a row
        with a NULL id is no session: :data:`LISTED`).

        Every row with an id is counted, so positions agree with :meth:`session_keys_among` and
        :meth:`session_positions`: a BLOB id (:attr:`BLOB_ID`) and a TEXT id that is not UTF-8 (SQLite; a
        raw write) are listed under their bytes decoded with ``backslashreplace`` (``'\\xffc'``), always a
        ``str``, never raised on (the driver raised on the TEXT one, so the dashboard's approvals queue
        answered 500); ``get_session`` finds no such id, so the queue names the row unreadable.
        :meth:`list_sessions` leaves both out: it yields the sessions one can open."""
        rows = self._all(
            f"SELECT {self.SESSION_KEY_COLUMNS} FROM sessions WHERE {LISTED} ORDER BY created_at_ms, session_id"
        )
        return [_key(row) for row in rows]

    def session_keys_among(
        self, ids: Collection[str], status: str, start: int = 0
    ) -> tuple[int, list[tuple[str, str, int, str]]]:
        """One query: the sessions whose id is in ``ids`` (one parameter: :meth:`_in_values`, a primary-key
        lookup each) and the rest whose row says ``status`` (one scan of the rows), sorted by the listing's
        ``created_at_ms, session_id``, each flagged before the listing's row at ``start`` or not (that row
        found by ``OFFSET start`` in the listing order; none past the end: every one is before). Comparing
        the columns in SQL keeps the backend's own order (types, collation) for both. A row with a NULL id
        is neither found nor counted (:data:`LISTED`)."""
        among, values = self._in_values("session_id", ids)
        rows = f"SELECT created_at_ms, session_id, {self.SESSION_KEY_COLUMNS} FROM sessions WHERE "
        blobs, blob_values = "", list[Any]()
        if self.BLOB_ID is not None:  # a BLOB id found by its text, as session_keys lists it (an index range)
            by_text, found_by_text = self._in_values("CAST(session_id AS TEXT)", ids)
            odd, odd_values = self._spelled_in(
                "session_id", ids
            )  # bytes that are not UTF-8, by their spelling
            blobs = (
                f" UNION ALL {rows}({self.BLOB_ID.format(column='session_id')} AND {by_text}{odd})"
                " AND NOT coalesce(CAST(status AS TEXT) = ?, FALSE)"  # not the status branch's already
            )
            blob_values = [*found_by_text, *odd_values, status]
        found = self._all(
            f"WITH b(c, s) AS (SELECT created_at_ms, session_id FROM {self._sessions_by_created()} WHERE {LISTED} "
            "ORDER BY created_at_ms, session_id LIMIT 1 OFFSET ?), "
            f"k(c, s, sid, st, hs, hh) AS ({rows}{among} UNION ALL "
            f"{rows}CAST(status AS TEXT) = ? AND {LISTED} AND NOT ({among}){blobs}) "
            "SELECT (k.c, k.s) < (SELECT c, s FROM b), sid, st, hs, hh FROM k ORDER BY k.c, k.s",
            (max(0, start), *values, status, *values, *blob_values),
        )
        before = sum(1 for row in found if row[0] is None or row[0])
        return before, [_key(row[1:]) for row in found]

    def _sessions_by_created(self) -> str:
        """:attr:`SESSIONS_BY_CREATED` while its index exists, else the plain table."""
        return self.SESSIONS_BY_CREATED if self._has_index(self.SESSIONS_CREATED) else "sessions"

    def session_positions(self, ids: Collection[str]) -> dict[str, int]:
        """One query: per session of ``ids`` (a primary-key lookup each), the sessions created before it (a
        count over the ``created_at_ms`` index) plus those created in the same millisecond with a lower id,
        the listing's order compared in SQL; rows with a NULL id are not counted (:data:`LISTED`: taken
        off, a lookup of the primary key's NULL entries); a BLOB id is found by its text (:attr:`BLOB_ID`).
        Cost: a count of index entries up to each one's position (meant for a few ids)."""
        among, values = self._in_values("s.session_id", ids)
        if self.BLOB_ID is not None:
            by_text, blob_values = self._in_values("CAST(s.session_id AS TEXT)", ids)
            odd, odd_values = self._spelled_in("s.session_id", ids)
            among, values = (
                f"({among} OR ({self.BLOB_ID.format(column='s.session_id')} AND {by_text}){odd})",
                [*values, *blob_values, *odd_values],
            )
        rows = self._all(
            f"SELECT {self.TEXT_BYTES_OF.format(column='s.session_id')}, "
            "(SELECT count(*) FROM sessions x WHERE x.created_at_ms < s.created_at_ms) - "
            "(SELECT count(*) FROM sessions x WHERE x.session_id IS NULL AND x.created_at_ms < s.created_at_ms) + "
            "(SELECT count(*) FROM sessions x WHERE x.created_at_ms = s.created_at_ms "
            f"AND x.session_id < s.session_id) FROM sessions s WHERE {among}",
            values,
        )
        return {spelled(sid): int(position) for sid, position in rows}

    def list_sessions(self, batch: int = 500) -> Iterator[SessionRecord]:
        """Every session, oldest first (keyset pages of ``batch`` rows; a row with a NULL id is no session:
        :data:`LISTED`; nor is a BLOB id, :attr:`BLOB_ID`, which ``get_session`` cannot find (it was yielded
        as ``bytes``, against the ``str`` type; every caller skipped it); nor a TEXT id that is not UTF-8,
        which the driver cannot hand over as text: a page that fails is read again without those rows,
        :meth:`_undecodable_ids`, found only then). Each session's ``session_id`` is a ``str``. The rows
        left out are named by :meth:`unnamed_sessions` (``ls``, ``verify --all``) and counted, under their
        decoded bytes, by :meth:`session_keys`."""
        after: tuple[int, str] = (-(2**63), "")
        undecodable: list[bytes] | None = None
        while True:
            try:
                rows = self._session_page(after, batch, undecodable or [])
            except StoreError:
                if undecodable is not None or not (
                    undecodable := [raw for raw, _, _ in self._undecodable_ids()]
                ):
                    raise
                rows = self._session_page(after, batch, undecodable)
            for row in rows:
                yield R.session(row)
            if len(rows) < batch:
                return
            after = (rows[-1][4], rows[-1][0])

    def orphan_events(self) -> list[tuple[str, int]]:
        """:meth:`Store.orphan_events`: the events' ids grouped (their primary key's index, covering), each
        looked up in ``sessions``' primary key; an id is compared as stored (a BLOB id matches only a BLOB
        id)."""
        return self._orphans("events")

    def orphan_effects(self) -> list[tuple[str, int]]:
        """:meth:`Store.orphan_effects`: as :meth:`orphan_events`, over ``external_effects``."""
        return self._orphans("external_effects")

    def _orphans(self, table: str) -> list[tuple[str, int]]:
        """``(id as text, row count)`` per ``session_id`` of ``table`` (a constant of this module's callers)
        that no ``sessions`` row has, ordered by id."""
        ids = self.TEXT_BYTES_OF.format(column="g.sid")
        rows = self._all(
            f"SELECT {ids}, g.n FROM (SELECT session_id AS sid, count(*) AS n FROM {table} GROUP BY session_id) g "
            "WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.session_id = g.sid) ORDER BY g.sid"
        )
        return [(bytes(sid).decode("utf-8", "backslashreplace"), int(n)) for sid, n in rows]

    def _session_page(self, after: tuple[int, str], batch: int, skip: list[bytes]) -> list[Any]:
        """:meth:`list_sessions`' page after ``after``, leaving out the TEXT ids whose bytes are ``skip``."""
        left_out = (
            f" AND NOT (typeof(session_id) = 'text' AND CAST(session_id AS BLOB) IN ({marks(skip)}))"
            if skip
            else ""
        )
        if self.BLOB_ID is not None:  # a BLOB id names no session (list_sessions)
            left_out += f" AND NOT {self.BLOB_ID.format(column='session_id')}"
        return self._all(
            f"SELECT {R.SESSION_COLUMNS} FROM sessions WHERE (created_at_ms, session_id) > (?, ?) AND {LISTED}"
            f"{left_out} ORDER BY created_at_ms, session_id LIMIT ?",
            (*after, *skip, batch),
        )

    def ledger_marks(self, ids: Collection[str]) -> dict[str, tuple[int, int, str, int]]:
        """One query: per session of ``ids``, its rows' count, last seq, that row's stored hash and the sum
        of :attr:`ROW_MARK` over its rows (a range of the primary key's index per id, and each row's record
        header for the length)."""
        if not ids:
            return {}
        among, values = self._in_values("e.session_id", ids)
        rows = self._all(
            f"SELECT e.session_id, count(*), max(e.seq), sum({self.ROW_MARK}), (SELECT h.hash FROM events h "
            "WHERE h.session_id = e.session_id ORDER BY h.seq DESC LIMIT 1) "
            f"FROM events e WHERE {among} GROUP BY e.session_id",
            values,
        )
        return {str(sid): (int(n), int(last), str(digest), int(mark)) for sid, n, last, mark, digest in rows}

    def unnamed_sessions(self) -> list[UnnamedSessionRow]:
        """The rows :data:`LISTED` leaves out (a NULL id), those whose id is a BLOB (:attr:`BLOB_ID`) and
        those whose id is TEXT that is not UTF-8 (:meth:`_undecodable_ids`), oldest first: index lookups of
        the primary key's NULL entries and BLOB range, and the scan of ``_undecodable_ids``. A status that
        is not UTF-8 is decoded with ``backslashreplace``."""
        blob = "" if self.BLOB_ID is None else f" OR {self.BLOB_ID.format(column='session_id')}"
        status_bytes = self.TEXT_BYTES_OF.format(column="status")
        rows = self._all(
            f"SELECT session_id, created_at_ms, {status_bytes} FROM sessions WHERE session_id IS NULL{blob} "
            "ORDER BY created_at_ms"
        )
        found = [
            UnnamedSessionRow(
                None if sid is None else bytes(sid).decode("utf-8", "backslashreplace"),
                "null" if sid is None else "blob",
                created,
                None if status is None else bytes(status).decode("utf-8", "backslashreplace"),
            )
            for sid, created, status in rows
        ]
        found.extend(
            UnnamedSessionRow(spelled(raw), "text_not_utf8", created, status)
            for raw, created, status in self._undecodable_ids()
        )
        return sorted(found, key=lambda row: (row.created_at_ms is None, row.created_at_ms))

    def _undecodable_ids(self) -> list[tuple[bytes, Any, str | None]]:
        """``(id bytes, created_at_ms, status)`` of each row whose id is TEXT that is not UTF-8 (SQLite keeps
        whatever bytes a raw write gives, ``CAST(x'ff41' AS TEXT)``; the driver raises on reading them as
        text). One scan of the primary key's index for ids holding a character past ASCII (a ``GLOB``, in
        SQLite's C), each of those decoded here. None where every id is text the server checked
        (:attr:`BLOB_ID` None: PostgreSQL)."""
        if self.BLOB_ID is None:
            return []
        status_bytes = self.TEXT_BYTES_OF.format(column="status")
        rows = self._all(
            f"SELECT CAST(session_id AS BLOB), created_at_ms, {status_bytes} FROM sessions "
            "WHERE typeof(session_id) = 'text' AND session_id GLOB ?",
            (_NOT_ASCII,),
        )
        found: list[tuple[bytes, Any, str | None]] = []
        for sid, created, status in rows:
            try:
                bytes(sid).decode("utf-8")
            except UnicodeDecodeError:
                text = None if status is None else bytes(status).decode("utf-8", "backslashreplace")
                found.append((bytes(sid), created, text))
        return found

    def set_session_status(self, session_id: str, status: str) -> None:
        with self._joined():
            count = self._write(
                "UPDATE sessions SET status = ?, updated_at_ms = ? WHERE session_id = ?",
                (status, R.now_ms(), session_id),
            )
            if count == 0:
                raise SessionNotFound(session_id=session_id, exact=True)
            self._notify(session_id)

    def set_session_details(
        self, session_id: str, *, task: str, created_at_ms: int, metadata: Mapping[str, Any]
    ) -> None:
        with self._joined():
            count = self._write(
                "UPDATE sessions SET task = ?, created_at_ms = ?, metadata = ?, updated_at_ms = ? "
                "WHERE session_id = ?",
                (task, created_at_ms, json.dumps(dict(metadata), sort_keys=True), R.now_ms(), session_id),
            )
            if count == 0:
                raise SessionNotFound(session_id=session_id, exact=True)
            self._notify(session_id)

    # ─── events: the append transaction ─────────────────────────────────────────────────────
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
        """Check, then write, in this thread's transaction (or one of its own): the session exists, its
        authority epoch is ``epoch`` (``StaleWriter``), ``rows`` extend its head and none of their seqs is
        repeated or already stored, past the head too (``AppendConflict`` naming the lowest such seq; a
        row past the head is only in a store edited outside flightlog); then the rows and the new head
        (:meth:`_insert_events`). Every check runs before the first write, so a refused batch writes
        nothing and an enclosing block needs no savepoint for it. ``deferrable`` is not used here (written
        at once)."""
        stamp = R.now_ms()
        stamps = row_stamps(rows, recorded_at_ms, stamp)
        with self._joined():
            found = self._one(HEAD_FOR_APPEND + self.FOR_UPDATE, (session_id,))
            problem = append_refusal(session_id, found, rows[0] if rows else None, epoch)
            if problem is not None:
                raise problem
            head_seq, _, current = found
            clashes = [
                c
                for c in (R.taken(rows, head_seq), self._stored_past(session_id, rows, head_seq))
                if c is not None
            ]
            if clashes:
                raise AppendConflict(session_id=session_id, seq=min(clashes))
            self._insert_events(session_id, rows, head, stamp, current, stamps)
            self._notify(session_id)
        return stamp

    def _stored_past(self, session_id: str, rows: Sequence[NewEvent], head_seq: int) -> int | None:
        """The lowest seq of ``rows`` past ``head_seq`` that a stored row already holds, else None (one
        indexed range read of the primary key; empty unless the store was edited outside flightlog). Not
        read for one row: its insert is one statement that writes nothing when the seq is taken, and
        :meth:`_insert_events` names it."""
        seqs = {row.seq for row in rows if row.seq > head_seq}
        if len(rows) < 2 or not seqs:
            return None
        stored = self._all(
            "SELECT seq FROM events WHERE session_id = ? AND seq BETWEEN ? AND ?",
            (session_id, min(seqs), max(seqs)),
        )
        return min((int(seq) for (seq,) in stored if int(seq) in seqs), default=None)

    def read_events(
        self, session_id: str, *, start: int = 0, stop: int | None = None, batch: int = 512
    ) -> Iterator[StoredEvent]:
        """Stream rows in ascending seq, ``batch`` rows per query (keyset pagination, bounded memory)."""
        columns = R.EVENT_COLUMNS.format(event=self.EVENT_BYTES_OF.format(column="event"))
        sql = (
            f"SELECT {columns} FROM events WHERE session_id = ? AND seq >= ? AND seq < ? ORDER BY seq LIMIT ?"
        )
        for seq, kind, data, prev_hash, hash_, at in self._pages(sql, (session_id,), start, stop, batch):
            yield StoredEvent(session_id, seq, kind, R.as_bytes(data), prev_hash, hash_, at)

    def read_chain(
        self,
        session_id: str,
        *,
        start: int = 0,
        stop: int | None = None,
        batch: int = 512,
        kinds: bool = False,
    ) -> Iterator[list[tuple[Any, ...]]]:
        """Pages of ``(seq, event_bytes, prev_hash, hash)`` (with ``kinds``, the ``kind`` column fifth) as
        the driver returns them, ``batch`` rows per query (keyset pagination); a page holding a value that
        is not ``bytes`` (a tampered TEXT or INTEGER event in SQLite, a driver's memoryview) is mapped with
        :func:`rows.as_bytes`, as :meth:`read_events` maps every row."""
        columns = f"seq, {self.EVENT_BYTES_OF.format(column='event')}, prev_hash, hash" + (
            ", kind" if kinds else ""
        )
        sql = (
            f"SELECT {columns} FROM events WHERE session_id = ? AND seq >= ? AND seq < ? ORDER BY seq LIMIT ?"
        )
        for rows in self._page_lists(sql, (session_id,), start, stop, batch):
            if set(map(type, map(_SECOND, rows))) != {bytes}:
                rows = [(row[0], R.as_bytes(row[1]), *row[2:]) for row in rows]
            yield rows

    def marked_ends(
        self, needle: bytes, among: Collection[str] | None = None
    ) -> dict[str, list[tuple[int, bytes]]]:
        """One query, one row per session found: the sessions whose stored bytes hold ``needle``, each
        one's last stored seq (the primary key, covering), then its rows at that seq, the one before and
        seq 0 (three primary-key lookups). Only the rows every reader reads count (``0 <= seq <``
        ``rows.MAX_SEQ``, as :meth:`read_chain`): a row planted beyond them (or, in SQLite, with a TEXT seq)
        neither ends a run here nor breaks the pass. A store whose seqs have a gap before the last returns
        the last row without the one before it, which proves no end (the reader folds that session).

        How the rows holding ``needle`` are found: for ``SUSPENDED_MARK`` on a store with the
        :attr:`MARK_INDEX` partial index (every store migrated since
        :data:`~flightlog.store.ddl.SQLITE_EVENTS_SUSPENDED`), by reading that index: the database's own
        index of the same stored bytes, kept on every insert, update and delete, whose entries
        ``PRAGMA integrity_check`` compares with the rows (:attr:`MARK_CONTAINS`, the index's clause);
        otherwise (another needle, a read-only handle on a store from before that migration, the index
        dropped by hand) by one byte search of every stored event (:attr:`BYTES_CONTAIN`, in the table's
        own order: :attr:`EVENTS_SCAN`). Both answer the same rows.
        ``among``: only these sessions' events are searched (by the primary key), 500 a query."""
        if among is None:
            return self._marked_ends(needle, [])
        ids = list(dict.fromkeys(among))
        found: dict[str, list[tuple[int, bytes]]] = {}
        for start in range(0, len(ids), 500):
            found.update(self._marked_ends(needle, ids[start : start + 500]))
        return found

    def _marked_ends(self, needle: bytes, among: list[str]) -> dict[str, list[tuple[int, bytes]]]:
        """:meth:`marked_ends` in one query: every session when ``among`` is empty, else those."""
        event = self.EVENT_BYTES_OF.format(column="e.event")
        scan, restrict, values = self.EVENTS_SCAN, "", list[Any]()
        contain, needles = self.BYTES_CONTAIN, [needle]
        if needle == SUSPENDED_MARK and self._has_index(self.MARK_INDEX):
            scan, contain, needles = "events", self.MARK_CONTAINS.format(hex=needle.hex()), []
        if among:
            clause, values = self._any("session_id", among)
            scan, restrict = "events", clause + " AND "
        rows = self._all(
            f"WITH m AS MATERIALIZED (SELECT DISTINCT session_id FROM {scan} WHERE {restrict}"
            f"{contain} AND seq >= 0 AND seq < ?), "
            "t AS MATERIALIZED (SELECT session_id, (SELECT MAX(x.seq) FROM events x "
            "WHERE x.session_id = m.session_id AND x.seq >= 0 AND x.seq < ?) AS last FROM m) "
            "SELECT t.session_id, t.last, "
            f"(SELECT {event} FROM events e WHERE e.session_id = t.session_id AND e.seq = 0), "
            f"(SELECT {event} FROM events e WHERE e.session_id = t.session_id AND e.seq = t.last - 1), "
            f"(SELECT {event} FROM events e WHERE e.session_id = t.session_id AND e.seq = t.last) FROM t "
            "WHERE t.last IS NOT NULL",
            (*values, *needles, R.MAX_SEQ, R.MAX_SEQ),
        )
        found: dict[str, list[tuple[int, bytes]]] = {}
        for session_id, last, first, before, data in rows:
            ends = [(last, data if type(data) is bytes else R.as_bytes(data))]
            if before is not None and last > 0:
                ends.insert(0, (last - 1, before if type(before) is bytes else R.as_bytes(before)))
            if first is not None and last > 1:
                ends.insert(0, (0, first if type(first) is bytes else R.as_bytes(first)))
            found[str(session_id)] = ends
        return found

    # ─── authority epochs ────────────────────────────────────────────────────────────────
    def authority_epoch(self, session_id: str) -> int:
        row = self._one("SELECT epoch FROM authority_epochs WHERE session_id = ?", (session_id,))
        if row is None:
            raise SessionNotFound(session_id=session_id, exact=True)
        return int(row[0])

    def bump_authority_epoch(self, session_id: str) -> int:
        with self._joined():
            rows = self._all(
                "UPDATE authority_epochs SET epoch = epoch + 1, updated_at_ms = ? WHERE session_id = ? "
                "RETURNING epoch",
                (R.now_ms(), session_id),
            )
            if not rows:
                raise SessionNotFound(session_id=session_id, exact=True)
            return int(rows[0][0])

    # ─── grants ──────────────────────────────────────────────────────────────────────────
    def record_grant_policy(self, session_id: str, policy_id: str, policy_json: str) -> None:
        with self._joined():
            inserted = self._write(
                "INSERT INTO grant_policies (session_id, policy_id, policy_json, recorded_at_ms) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (session_id, policy_id) DO NOTHING",
                (session_id, policy_id, policy_json, R.now_ms()),
            )
            if inserted:
                return
            row = self._one(
                "SELECT policy_json FROM grant_policies WHERE session_id = ? AND policy_id = ?",
                (session_id, policy_id),
            )
            if row is not None and row[0] != policy_json:
                raise StoreError(
                    f"grant policy {policy_id!r} of session {session_id} already recorded with other bytes"
                )

    def grant_policies(self, session_id: str) -> list[tuple[str, str]]:
        rows = self._all(
            f"SELECT policy_id, policy_json FROM grant_policies WHERE session_id = ? ORDER BY {self.INSERT_ORDER}",
            (session_id,),
        )
        return [(r[0], r[1]) for r in rows]

    # ─── external effects ────────────────────────────────────────────────────────────────
    def _require_epoch(self, session_id: str, epoch: int | None) -> None:
        """Raise ``StaleWriter`` when ``epoch`` is given and not the session's authority epoch. Read with the
        rows an append locks (:data:`HEAD_FOR_APPEND`, in its order), under this write's transaction: a
        concurrent bump either waits for this write or is seen by it."""
        if epoch is None:
            return
        refusal = append_refusal(
            session_id, self._one(HEAD_FOR_APPEND + self.FOR_UPDATE, (session_id,)), None, epoch
        )
        if refusal is not None:
            raise refusal

    def record_intent(
        self, session_id: str, key: str, intent_hash: str, intent_json: str, *, epoch: int | None = None
    ) -> bool:
        with self._joined():
            self._require_epoch(session_id, epoch)
            inserted = self._write(
                "INSERT INTO external_effects (session_id, idempotency_key, intent_hash, intent_json, status,"
                " created_at_ms) VALUES (?, ?, ?, ?, 'pending', ?) ON CONFLICT DO NOTHING",
                (session_id, key, intent_hash, intent_json, R.now_ms()),
            )
            if inserted:
                return True
            existing = self.get_effect(session_id, key)
            if existing is not None and existing.intent_hash != intent_hash:
                raise EffectConflict(
                    idempotency_key=key, stored_hash=existing.intent_hash, new_hash=intent_hash
                )
            return False

    def complete_effect(
        self, session_id: str, key: str, result_json: str, *, epoch: int | None = None
    ) -> bool:
        with self._joined():
            self._require_epoch(session_id, epoch)
            row = self._one(
                "SELECT status, result_json FROM external_effects WHERE session_id = ? AND idempotency_key = ?"
                + self.FOR_UPDATE,
                (session_id, key),
            )
            if row is None:
                raise LookupError(f"no intent recorded for effect {key!r} of session {session_id}")
            if row[0] == "completed":
                if row[1] != result_json:
                    raise EffectConflict(
                        idempotency_key=key,
                        stored_hash=R.digest(row[1] or ""),
                        new_hash=R.digest(result_json),
                    )
                return False
            self._write(
                "UPDATE external_effects SET status = 'completed', result_json = ?, completed_at_ms = ? "
                "WHERE session_id = ? AND idempotency_key = ?",
                (result_json, R.now_ms(), session_id, key),
            )
            return True

    def get_effect(self, session_id: str, key: str) -> EffectRecord | None:
        row = self._one(
            f"SELECT {R.EFFECT_COLUMNS} FROM external_effects WHERE session_id = ? AND idempotency_key = ?",
            (session_id, key),
        )
        return EffectRecord(*row) if row else None

    def pending_effects(self, session_id: str | None = None) -> list[EffectRecord]:
        sql = f"SELECT {R.EFFECT_COLUMNS} FROM external_effects WHERE status = 'pending'"
        params: tuple[str, ...] = ()
        if session_id is not None:
            sql += " AND session_id = ?"
            params = (session_id,)
        return [
            EffectRecord(*r) for r in self._all(f"{sql} ORDER BY created_at_ms, {self.INSERT_ORDER}", params)
        ]

    def session_effects(self, session_id: str) -> list[EffectRecord]:
        sql = f"SELECT {R.EFFECT_COLUMNS} FROM external_effects WHERE session_id = ?"
        return [
            EffectRecord(*r)
            for r in self._all(f"{sql} ORDER BY created_at_ms, {self.INSERT_ORDER}", (session_id,))
        ]

    # ─── artifacts ───────────────────────────────────────────────────────────────────────
    def put_artifact(self, content: bytes, media_type: str) -> ArtifactRecord:
        sha256 = R.digest(content)
        with self._joined():
            self._write(
                "INSERT INTO artifacts VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (sha256, media_type, len(content), content, R.now_ms()),
            )
            info = self.artifact_info(sha256)
        assert info is not None
        return info

    def get_artifact(self, sha256: str) -> bytes | None:
        digest = sha256.removeprefix("sha256:")
        row = self._one("SELECT content FROM artifacts WHERE sha256 = ?", (digest,))
        return R.checked_artifact(digest, bytes(row[0])) if row else None

    def get_artifacts(self, handles: Sequence[str]) -> dict[str, bytes]:
        by_digest = {h.removeprefix("sha256:"): h for h in handles}
        digests = list(by_digest)
        found: dict[str, bytes] = {}
        for i in range(0, len(digests), _ARTIFACT_BATCH):
            batch = digests[i : i + _ARTIFACT_BATCH]
            marks = ", ".join("?" * len(batch))
            for digest, content in self._all(
                f"SELECT sha256, content FROM artifacts WHERE sha256 IN ({marks})", batch
            ):
                found[by_digest[digest]] = R.checked_artifact(digest, bytes(content))
        return found

    def artifact_info(self, sha256: str) -> ArtifactRecord | None:
        row = self._one(
            "SELECT sha256, media_type, size_bytes, created_at_ms FROM artifacts WHERE sha256 = ?",
            (sha256.removeprefix("sha256:"),),
        )
        return ArtifactRecord(*row) if row else None

    # ─── checkpoints, ledger id, frontiers ─────────────────────────────────────────────────
    def record_checkpoint(self, session_id: str, size: int, root: str, body: str) -> int:
        return self._insert_returning(
            "INSERT INTO checkpoints (session_id, size, root, body, created_at_ms) VALUES (?, ?, ?, ?, ?)",
            (session_id, size, root, body, R.now_ms()),
        )

    def checkpoints(self, session_id: str) -> list[CheckpointRecord]:
        rows = self._all(
            f"SELECT {R.CHECKPOINT_COLUMNS} FROM checkpoints WHERE session_id = ? ORDER BY checkpoint_id",
            (session_id,),
        )
        return [CheckpointRecord(*r) for r in rows]

    def ledger_id(self) -> str:
        row = self._one("SELECT value FROM ledger_meta WHERE key = 'ledger_id'")
        if row is None:
            raise StoreError(f"{self.url}: no ledger id")
        return str(row[0])

    def record_checkpoint_frontier(self, checkpoint_id: int, frontier: bytes) -> None:
        self._guarded("INSERT INTO checkpoint_frontiers VALUES (?, ?)", (checkpoint_id, frontier))

    def checkpoint_frontier(self, checkpoint_id: int) -> bytes | None:
        row = self._one("SELECT hashes FROM checkpoint_frontiers WHERE checkpoint_id = ?", (checkpoint_id,))
        return bytes(row[0]) if row and isinstance(row[0], bytes | bytearray | memoryview) else None

    def latest_checkpoint(self, session_id: str, *, max_size: int | None = None) -> CheckpointRecord | None:
        row = self._one(
            f"SELECT {R.CHECKPOINT_COLUMNS} FROM checkpoints WHERE session_id = ? AND size <= ? "
            "ORDER BY size DESC, checkpoint_id DESC LIMIT 1",
            (session_id, R.MAX_SEQ if max_size is None else max_size),
        )
        return CheckpointRecord(*row) if row else None

    # ─── imports ─────────────────────────────────────────────────────────────────────────
    def find_import(self, source_sha256: str) -> ImportRecord | None:
        row = self._one(f"SELECT {R.IMPORT_COLUMNS} FROM imports WHERE source_sha256 = ?", (source_sha256,))
        return ImportRecord(*row) if row else None

    def record_import(self, record: ImportRecord) -> None:
        self._guarded(
            f"INSERT INTO imports ({R.IMPORT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
            (
                record.source_sha256, record.session_id, record.importer, record.importer_version,
                record.source_name, record.imported_at_ms,
            ),
        )  # fmt: skip

    # ─── runs projection (seed 002 read model) ──────────────────────────────────────────────
    def run_projection_version(self) -> int | None:
        if not self._has_table("runs_meta"):
            return None  # a read-only handle on a database from before the runs projection
        row = self._one("SELECT value FROM runs_meta WHERE key = 'fold_version'")
        return int(row[0]) if row else 0

    def set_run_projection_version(self, version: int) -> None:
        self._write(
            "INSERT INTO runs_meta (key, value) VALUES ('fold_version', ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (version,),
        )

    def get_run_rows(self, run_ids: Collection[str]) -> dict[str, RunRow]:
        ids = list(dict.fromkeys(run_ids))
        found: dict[str, RunRow] = {}
        for start in range(0, len(ids), 500):
            clause, params = self._any("run_id", ids[start : start + 500])
            for row in self._all(f"SELECT {R.RUN_COLUMNS} FROM runs WHERE {clause}", params):
                found[row[0]] = RunRow(*row)
        return found

    def replace_run_row(self, row: RunRow, expected: RunRow) -> bool:
        """One ``UPDATE`` guarded by every column of ``expected`` that sets only the columns that differ
        from it (:func:`run_swap_params`), as a guarded statement: the caller's (the append's) transaction
        stays usable whatever happens to it."""
        if row.run_id != expected.run_id:
            raise ValueError(f"replace_run_row: row of {row.run_id!r} cannot replace {expected.run_id!r}")
        return self._guarded(*run_swap_params(row, expected, self.NULL_SAFE_EQ)) == 1

    def clear_run_rows(self) -> None:
        self._write("DELETE FROM runs")

    @classmethod
    def state_clause(cls, states: list[str], refined: dict[str, str]) -> tuple[str, list[Any]]:
        """SQL for "the run's effective state is one of ``states``" (see ``Store.query_runs``), and params.

        Two OR'ed terms, each served by an index: rows the status does not override (``runs_state``), and
        in-flight rows whose status forces a wanted state (``runs_session_status``).
        """
        if not states:
            return "1 = 0", []
        wanted, params = cls._any("state", states)
        clause = f"({wanted}"
        if refined:
            overriding, values = cls._any("session_status", list(refined))
            clause += f" AND (state = 'terminal' OR session_status IS NULL OR NOT ({overriding}))"
            params.extend(values)
        clause += ")"
        forcing = [status for status, state in refined.items() if state in states]
        if forcing:
            forced, values = cls._any("session_status", forcing)
            clause += f" OR ({forced} AND state <> 'terminal')"
            params.extend(values)
        return f"({clause})", params

    def query_runs(
        self,
        *,
        states: Collection[str] | None = None,
        source: str | None = None,
        parent: str | None = None,
        refined_statuses: Mapping[str, str] | None = None,
        limit: int | None = None,
    ) -> list[RunListing]:
        rows = self.query_run_tuples(
            states=states, source=source, parent=parent, refined_statuses=refined_statuses, limit=limit
        )
        return [RunListing(*row) for row in rows]

    def settled_runs(self, statuses: Collection[str], state: str | None = None) -> list[str]:
        if not self._has_table("runs") or not statuses:
            return []
        clause, params = self._any("session_status", list(statuses))
        where = f"{clause} AND state NOT IN ('terminal', ?)"
        params.append(NOT_A_RUN)
        if state is not None:
            where += " AND state = ?"
            params.append(state)
        return [str(row[0]) for row in self._all(f"SELECT run_id FROM runs WHERE {where}", params)]

    def query_run_tuples(
        self,
        *,
        states: Collection[str] | None = None,
        source: str | None = None,
        parent: str | None = None,
        refined_statuses: Mapping[str, str] | None = None,
        limit: int | None = None,
    ) -> list[tuple[Any, ...]]:
        if not self._has_table("runs"):
            return []
        where: list[str] = ["state <> ?"]  # a session that holds no run is never listed
        params: list[Any] = [NOT_A_RUN]
        if states is not None:
            clause, values = self.state_clause(list(states), dict(refined_statuses or {}))
            where.append(clause)
            params.extend(values)
        for column, value in (("source", source), ("parent", parent)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        sql = (
            "SELECT run_id, parent, source, state, updated_at_ms, session_status, snapshot FROM runs"
            + " WHERE "
            + " AND ".join(where)
            + " ORDER BY updated_at_ms DESC, run_id"
            + (f" LIMIT {max(0, int(limit))}" if limit is not None else "")
        )
        return self._all(sql, params)

    TEXT_KINDS: ClassVar[tuple[str, ...]] = ("run_started", "llm_completed", "tool_completed", "custom")
    """Event kinds a runs-list text search reads (goals and messages)."""

    def _text_match(self, column: str) -> str:
        """SQL: ``column`` (text or bytes) holds the ``?`` pattern, ASCII case folded (``LIKE`` in SQLite)."""
        return f"{column} LIKE ?{self.LIKE_ESCAPE}"

    def page_runs(self, query: RunPageQuery) -> list[tuple[Any, ...]]:
        if query.sort not in ("started", "updated"):
            raise ValueError(f"page_runs: sort must be 'started' or 'updated', not {query.sort!r}")
        if not self._has_table("runs"):
            return []
        key = f"r.{query.sort}_at_ms"
        where: list[str] = ["r.state <> ?"]  # a session that holds no run is never listed
        params: list[Any] = [NOT_A_RUN]
        if query.states is not None:
            clause, values = self.state_clause(list(query.states), dict(query.refined_statuses or {}))
            where.append(clause)
            params.extend(values)
        for clause, value in (
            ("r.source = ?", query.source),
            ("r.parent = ?", query.parent),
            ("r.started_at_ms >= ?", query.since_ms),
            ("r.started_at_ms < ?", query.until_ms),
        ):
            if value is not None:
                where.append(clause)
                params.append(value)
        if query.text:
            # the text as it appears inside a stored JSON string (canonical bytes escape quotes, backslashes
            # and control characters; everything else is stored as itself)
            needle = "%" + R.like_escape(json.dumps(query.text, ensure_ascii=False)[1:-1]) + "%"
            kinds, values = self._any("e.kind", self.TEXT_KINDS)
            where.append(
                f"(EXISTS (SELECT 1 FROM events e WHERE e.session_id = r.run_id AND {kinds} AND "
                f"{self._text_match(self.EVENT_TEXT)}) OR EXISTS (SELECT 1 FROM sessions s WHERE "
                f"s.session_id = r.run_id AND {self._text_match('s.task')}))"
            )
            params.extend([*values, needle, needle])
        if query.run_ids is not None:
            ids = list(query.run_ids)
            clause, values = self._any("r.run_id", ids) if ids else ("1 = 0", [])
            where.append(clause)
            params.extend(values)
        if query.after is not None:
            where.append(f"({key}, r.run_id) {'<' if query.descending else '>'} (?, ?)")
            params.extend(query.after)
        order = " DESC" if query.descending else ""
        sql = (
            "SELECT r.run_id, r.parent, r.source, r.state, r.updated_at_ms, r.session_status, r.snapshot, "
            "r.started_at_ms FROM runs r"
            + " WHERE "
            + " AND ".join(where)
            + f" ORDER BY {key}{order}, r.run_id{order} LIMIT {max(0, int(query.limit))}"
        )
        return self._all(sql, params)

    # ─── live runs ───────────────────────────────────────────────────────────────────────
    def put_live_run(self, record: LiveRunRecord, *, own_only: bool = False) -> bool:
        written = self._write(
            f"INSERT INTO live_runs ({R.LIVE_RUN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (run_id) DO UPDATE SET state = excluded.state, heartbeat_at_ms = excluded.heartbeat_at_ms,"
            " changed_at_ms = excluded.changed_at_ms, tokens_used = excluded.tokens_used,"
            " steps_taken = excluded.steps_taken, pid = excluded.pid, host = excluded.host, owner = excluded.owner"
            + (f" WHERE live_runs.owner {self.NULL_SAFE_EQ} excluded.owner" if own_only else ""),
            (
                record.run_id, record.state, record.heartbeat_at_ms, record.changed_at_ms, record.tokens_used,
                record.steps_taken, record.pid, record.host, record.owner,
            ),
        )  # fmt: skip
        return written > 0

    def delete_live_run(self, run_id: str, *, owner: str | None) -> None:
        self._write(
            f"DELETE FROM live_runs WHERE run_id = ? AND owner {self.NULL_SAFE_EQ} ?", (run_id, owner)
        )

    def live_runs(self) -> list[LiveRunRecord]:
        if not self._has_table("live_runs"):
            return []
        if self._has_column("live_runs", "owner"):
            rows = self._all(f"SELECT {R.LIVE_RUN_COLUMNS} FROM live_runs ORDER BY run_id")
        else:  # a read-only handle on a database from before ddl.LIVE_RUNS_OWNER: no host, no owner
            rows = self._all(f"SELECT {R.LIVE_RUN_COLUMNS_BEFORE_OWNER} FROM live_runs ORDER BY run_id")
        return [LiveRunRecord(*row) for row in rows]

    # ─── index log, cosignatures ─────────────────────────────────────────────────────────
    def index_supported(self) -> bool:
        return self._has_table("index_leaves")

    def append_index_leaf(self, idx: int, session_id: str, checkpoint_id: int, leaf: bytes) -> None:
        with self._joined():
            self.lock_index()  # one log, one writer
            if idx != self.index_size() or not self._insert_unique(
                f"INSERT INTO index_leaves ({R.INDEX_LEAF_COLUMNS}) VALUES (?, ?, ?, ?, ?)",
                (idx, session_id, checkpoint_id, leaf, R.now_ms()),
            ):
                raise AppendConflict(session_id="(index log)", seq=idx)

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
        sql = (
            f"SELECT {R.INDEX_LEAF_COLUMNS} FROM index_leaves WHERE idx >= ? AND idx < ? ORDER BY idx LIMIT ?"
        )
        for idx, sid, cid, leaf, at in self._pages(sql, (), start, stop, batch):
            yield IndexLeaf(idx, sid, cid, R.as_bytes(leaf), at)

    def index_leaves_of(self, session_id: str) -> list[IndexLeaf]:
        if not self._has_table("index_leaves"):
            return []
        rows = self._all(
            f"SELECT {R.INDEX_LEAF_COLUMNS} FROM index_leaves WHERE session_id = ? ORDER BY idx",
            (session_id,),
        )
        return [IndexLeaf(idx, sid, cid, R.as_bytes(leaf), at) for idx, sid, cid, leaf, at in rows]

    def record_index_checkpoint(self, size: int, root: str, body: str, frontier: bytes) -> int:
        return self._insert_returning(
            "INSERT INTO index_checkpoints (size, root, body, frontier, created_at_ms) VALUES (?, ?, ?, ?, ?)",
            (size, root, body, frontier, R.now_ms()),
        )

    def latest_index_checkpoint(self, *, max_size: int | None = None) -> IndexCheckpointRecord | None:
        row = self._one_in(
            "index_checkpoints",
            f"SELECT {R.INDEX_CHECKPOINT_COLUMNS} FROM index_checkpoints WHERE size <= ? "
            "ORDER BY size DESC, checkpoint_id DESC LIMIT 1",
            (R.MAX_SEQ if max_size is None else max_size,),
        )
        return R.index_checkpoint(row) if row else None

    def index_checkpoints(self) -> Iterator[IndexCheckpointRecord]:
        if not self._has_table("index_checkpoints"):
            return
        for row in self._all(
            f"SELECT {R.INDEX_CHECKPOINT_COLUMNS} FROM index_checkpoints ORDER BY checkpoint_id"
        ):
            yield R.index_checkpoint(row)

    def record_cosignature(self, record: CosignatureRecord) -> None:
        self._write(
            "INSERT INTO cosignatures (origin, size, witness, root, note, created_at_ms) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (origin, size, witness) DO UPDATE SET "
            "root = excluded.root, note = excluded.note, created_at_ms = excluded.created_at_ms",
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

    # ─── salted (erasable) artifacts ─────────────────────────────────────────────────────
    def put_salted_artifact(
        self, digest: str, salt: bytes, content: bytes, media_type: str, *, session_id: str | None = None
    ) -> SaltedArtifactRecord:
        stamp = R.now_ms()
        with self._joined():
            self._write(
                "INSERT INTO salted_artifacts VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (digest, media_type, len(content), content, salt, stamp),
            )
            if session_id is not None:
                self._write(
                    "INSERT INTO artifact_refs VALUES (?, ?) ON CONFLICT DO NOTHING", (digest, session_id)
                )
        return SaltedArtifactRecord(digest, media_type, len(content), stamp)

    def get_salted_artifact(self, digest: str) -> tuple[bytes, bytes] | None:
        row = self._one_in(
            "salted_artifacts", "SELECT content, salt FROM salted_artifacts WHERE digest = ?", (digest,)
        )
        return R.checked_salted(digest, bytes(row[0]), bytes(row[1])) if row else None

    def salted_artifact_info(self, digest: str) -> SaltedArtifactRecord | None:
        row = self._one_in(
            "salted_artifacts",
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
        with self._joined():
            deleted = self._write("DELETE FROM salted_artifacts WHERE digest = ?", (record.digest,))
            self._write(
                "INSERT INTO artifact_erasures VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (record.digest, record.erased_at_ms, record.log_session_id, record.log_seq),
            )
            return deleted > 0

    def erasure(self, digest: str) -> ErasureRecord | None:
        row = self._one_in(
            "artifact_erasures",
            "SELECT digest, erased_at_ms, log_session_id, log_seq FROM artifact_erasures WHERE digest = ?",
            (digest,),
        )
        return ErasureRecord(*row) if row else None

    # ─── fleet leases (flightlog.fleet) ────────────────────────────────────────────────────
    def open_lease(self, session_id: str) -> None:
        with self._joined():
            self._write(
                "INSERT INTO leases (session_id, queued_at_ms) VALUES (?, ?) ON CONFLICT DO NOTHING",
                (session_id, R.now_ms()),
            )
            self._notify(session_id)

    def get_lease(self, session_id: str) -> LeaseRecord | None:
        row = self._one_in(
            "leases", f"SELECT {R.LEASE_COLUMNS} FROM leases WHERE session_id = ?", (session_id,)
        )
        return LeaseRecord(*row) if row else None

    def claim_sessions(
        self, holder: str, *, ttl_ms: int, limit: int = 1, session_id: str | None = None
    ) -> list[LeaseClaim]:
        """Claim up to ``limit`` runnable fleet sessions (oldest queued first) in one transaction, bumping
        each one's authority epoch (the fencing token) with its claim; rows another claimer holds are
        skipped where the backend can (``SKIP_LOCKED``), else claimers queue on the write lock."""
        stamp = R.now_ms()
        runnable, params = self._any("s.status", RUNNABLE_STATUSES)
        only = " AND l.session_id = ?" if session_id is not None else ""
        claims: list[LeaseClaim] = []
        with self._joined():
            rows = self._all(
                "SELECT l.session_id, l.holder, s.status FROM leases l JOIN sessions s "
                f"ON s.session_id = l.session_id WHERE l.expires_at_ms < ? AND {runnable} "
                f"AND s.head_seq <> l.parked_seq{only} ORDER BY l.queued_at_ms, l.session_id LIMIT ?"
                + self.SKIP_LOCKED,
                [stamp, *params, *([session_id] if session_id is not None else []), limit],
            )
            for sid, previous, status in rows:
                epoch = self.bump_authority_epoch(sid)
                self._write(
                    "UPDATE leases SET holder = ?, epoch = ?, expires_at_ms = ?, acquired_at_ms = ?, "
                    "parked_seq = -2 WHERE session_id = ?",
                    (holder, epoch, stamp + ttl_ms, stamp, sid),
                )
                claims.append(LeaseClaim(sid, epoch, previous, status))
        return claims

    def renew_lease(self, session_id: str, holder: str, *, ttl_ms: int) -> bool:
        return (
            self._write(
                "UPDATE leases SET expires_at_ms = ? WHERE session_id = ? AND holder = ?",
                (R.now_ms() + ttl_ms, session_id, holder),
            )
            > 0
        )

    def release_lease(self, session_id: str, holder: str, *, park: bool = False) -> bool:
        with self._joined():
            released = self._write(
                "UPDATE leases SET holder = NULL, expires_at_ms = 0, parked_seq = CASE WHEN ? THEN "
                "(SELECT head_seq FROM sessions WHERE session_id = ?) ELSE -2 END "
                "WHERE session_id = ? AND holder = ?",
                (park, session_id, session_id, holder),
            )
            if released:
                self._notify(session_id)
            return released > 0

    def wake_lease(self, session_id: str) -> bool:
        with self._joined():
            woken = self._write("UPDATE leases SET parked_seq = -2 WHERE session_id = ?", (session_id,))
            if woken:
                self._notify(session_id)
            return woken > 0

    # ─── retirement, ledger id adoption (flightlog db copy) ──────────────────────────────────
    def retirement(self) -> str | None:
        return self._meta("retired")

    def retirement_record(self) -> str | None:
        return self._meta("retired_record")

    def _meta(self, key: str) -> str | None:
        row = self._one_in("ledger_meta", "SELECT value FROM ledger_meta WHERE key = ?", (key,))
        return None if row is None else str(row[0])

    def retire(self, summary: str, record: str) -> None:
        with self._joined():
            self._before_retire()
            if self._one("SELECT 1 FROM ledger_meta WHERE key = 'retired'" + self.FOR_UPDATE) is not None:
                raise StoreError(f"{self.url} is retired already")
            self._write(
                "INSERT INTO ledger_meta (key, value) VALUES ('retired', ?), ('retired_record', ?)",
                (summary, record),
            )

    def adopt_ledger_id(self, ledger_id: str) -> None:
        if not 8 <= len(ledger_id) <= 64 or any(c not in "0123456789abcdef" for c in ledger_id):
            raise StoreError(f"ledger id {ledger_id[:70]!r} is not 8-64 lowercase hex")
        with self._joined():
            self._hold_for_adoption()
            row = self._one("SELECT value FROM ledger_meta WHERE key = 'ledger_id'" + self.FOR_UPDATE)
            current = str(row[0]) if row is not None else None
            if current == ledger_id:
                return
            busy = self._one("SELECT EXISTS (SELECT 1 FROM sessions) OR EXISTS (SELECT 1 FROM index_leaves)")
            if busy is not None and busy[0]:
                raise StoreError(
                    f"{self.url} holds sessions of ledger {current}; refusing to change its ledger id to "
                    f"{ledger_id} (their signed checkpoints name {current} in their origins)"
                )
            self._write(
                "INSERT INTO ledger_meta (key, value) VALUES ('ledger_id', ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (ledger_id,),
            )
