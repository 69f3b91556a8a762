"""The SQLite backend: the shared Store contract, plus what only SQLite has.

SQLite-specific pins: WAL + ``synchronous=FULL`` by default and ``NORMAL`` selectable (read back with
PRAGMA), the busy timeout, the ``schema_migrations`` rows, the append-only triggers on ``events``, the
``open_store`` URL forms (and that a password never reaches an error), read-only opens of missing files,
two connections racing for the same seq, and the upgrade that carries the fleet's old ``fleet_leases``
table over into ``leases`` (migration 6).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path

import pytest

from flightlog.errors import AppendConflict, ReadOnlyStore, StoreError, StoreUnavailable
from flightlog.events import Custom
from flightlog.live import HolderWatch, LiveRegistry, other_holder
from flightlog.recorder import Recorder, verify_session
from flightlog.store import SessionRecord, SqliteStore, Store, open_store
from flightlog.store import sqlite as sqlite_module
from flightlog.store.base import LeaseClaim, LeaseRecord, LiveRunRecord, NewEvent
from flightlog.store.sqlite import MIGRATIONS
from flightlog.testing.store_contract import StoreContract, chained_rows


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "flightlog.db"


@pytest.fixture
def opened() -> Iterator[list[Store]]:
    """Stores a test opens; all closed at teardown (unclosed sqlite handles must not leak)."""
    stores: list[Store] = []
    yield stores
    for store in stores:
        store.close()


class TestSqliteStore(StoreContract):
    @pytest.fixture
    def store(self, db_path: Path) -> Iterator[Store]:
        with closing(SqliteStore(db_path)) as store:
            yield store

    @pytest.fixture
    def store_past_head(self) -> Callable[[Store, str, NewEvent], None]:
        def _insert(store: Store, session_id: str, row: NewEvent) -> None:
            assert isinstance(store, SqliteStore)
            with store.transaction():
                store._conn.execute(
                    "INSERT INTO events (session_id, seq, kind, event, prev_hash, hash, recorded_at_ms)"
                    " VALUES (?, ?, ?, ?, ?, ?, 0)",
                    (session_id, row.seq, row.kind, row.event_bytes, row.prev_hash, row.hash),
                )

        return _insert

    @pytest.fixture
    def store_alter_artifact(self) -> Callable[[Store, str, bytes], None]:
        def _alter(store: Store, sha256: str, content: bytes) -> None:
            assert isinstance(store, SqliteStore)
            with store.transaction():
                store._conn.execute("UPDATE artifacts SET content = ? WHERE sha256 = ?", (content, sha256))

        return _alter

    @pytest.fixture
    def store_null_id(self) -> Callable[[Store, int, str], None]:
        def _insert(store: Store, created_at_ms: int, status: str) -> None:
            assert isinstance(store, SqliteStore)
            with store.transaction():
                store._conn.execute(
                    "INSERT INTO sessions (session_id, status, source, created_at_ms, updated_at_ms)"
                    " VALUES (NULL, ?, 'x', ?, ?)",
                    (status, created_at_ms, created_at_ms),
                )

        return _insert

    @pytest.fixture
    def store_odd_id(self) -> Callable[[Store, str, bytes, bool], None]:
        def _rekey(store: Store, session_id: str, raw: bytes, as_text: bool) -> None:
            assert isinstance(store, SqliteStore)
            value = "CAST(? AS TEXT)" if as_text else "?"
            with store.transaction():
                store._conn.execute(
                    f"UPDATE sessions SET session_id = {value} WHERE session_id = ?", (raw, session_id)
                )

        return _rekey

    @pytest.fixture
    def reopen(self, opened: list[Store]) -> Callable[[Store], Store]:
        def _reopen(store: Store) -> Store:
            assert isinstance(store, SqliteStore)
            again = SqliteStore(store.path)
            opened.append(again)
            return again

        return _reopen

    @pytest.fixture
    def reopen_read_only(self, opened: list[Store]) -> Callable[[Store], Store]:
        def _reopen(store: Store) -> Store:
            assert isinstance(store, SqliteStore)
            again = SqliteStore(store.path, read_only=True)
            opened.append(again)
            return again

        return _reopen


class TestSqliteStoreWithoutGroupCommit(TestSqliteStore):
    """The same contract with every transaction committing on its own (``group_commit=False``)."""

    @pytest.fixture
    def store(self, db_path: Path) -> Iterator[Store]:
        with closing(SqliteStore(db_path, group_commit=False)) as store:
            yield store


def _pragma(store: SqliteStore, name: str) -> object:
    return store._conn.execute(f"PRAGMA {name}").fetchone()[0]


# ─── durability settings ──────────────────────────────────────────────────────────────────
def test_wal_and_synchronous_full_by_default(db_path: Path) -> None:
    with closing(SqliteStore(db_path)) as store:
        assert _pragma(store, "journal_mode") == "wal"
        assert _pragma(store, "synchronous") == 2  # FULL


@pytest.mark.parametrize(("name", "value"), [("NORMAL", 1), ("normal", 1), ("FULL", 2), ("EXTRA", 3)])
def test_synchronous_is_selectable(db_path: Path, name: str, value: int) -> None:
    with closing(SqliteStore(db_path, synchronous=name)) as store:
        assert _pragma(store, "synchronous") == value
        assert _pragma(store, "journal_mode") == "wal"


def test_open_store_passes_synchronous(db_path: Path) -> None:
    with open_store(db_path, synchronous="NORMAL") as store:
        assert isinstance(store, SqliteStore)
        assert _pragma(store, "synchronous") == 1


def test_unknown_synchronous_is_refused(db_path: Path) -> None:
    with pytest.raises(ValueError, match="OFF"):
        SqliteStore(db_path, synchronous="OFF")
    assert not db_path.exists()


def test_busy_timeout_is_set(db_path: Path) -> None:
    with closing(SqliteStore(db_path)) as store:
        assert _pragma(store, "busy_timeout") == 5000
    with closing(SqliteStore(db_path, busy_timeout_ms=1234)) as store:
        assert _pragma(store, "busy_timeout") == 1234
    with closing(SqliteStore(db_path, read_only=True)) as store:
        assert _pragma(store, "busy_timeout") == 5000
        assert _pragma(store, "query_only") == 1


# ─── schema ───────────────────────────────────────────────────────────────────────────────
def test_schema_migrations_rows(db_path: Path) -> None:
    with closing(SqliteStore(db_path)) as store:
        rows = store._conn.execute("SELECT version, description FROM schema_migrations ORDER BY version")
        expected = [(i, description) for i, (description, _) in enumerate(MIGRATIONS, start=1)]
        assert rows.fetchall() == expected
        assert store.schema_version() == len(MIGRATIONS)
    with closing(SqliteStore(db_path)) as store:  # migrating again adds no row
        count = store._conn.execute("SELECT COUNT(*) FROM schema_migrations").fetchone()[0]
        assert count == len(MIGRATIONS)


_OLD_FLEET_LEASES = """
CREATE TABLE IF NOT EXISTS fleet_leases (
    session_id TEXT PRIMARY KEY,
    holder TEXT,
    epoch INTEGER NOT NULL DEFAULT 0,
    expires_at_ms INTEGER NOT NULL DEFAULT 0,
    acquired_at_ms INTEGER NOT NULL DEFAULT 0,
    parked_seq INTEGER NOT NULL DEFAULT -2,
    queued_at_ms INTEGER NOT NULL
)
"""
"""The table the fleet's SQLite lease adapter created on first use before migration 6 (verbatim)."""


def _at_schema_5(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Create ``db_path`` as a version without migration 6 left it (the fleet added ``fleet_leases``)."""
    with monkeypatch.context() as patch:
        patch.setattr(sqlite_module, "MIGRATIONS", MIGRATIONS[:5])
        with closing(SqliteStore(db_path)) as old:
            assert old.schema_version() == 5
            for sid in ("held", "parked"):
                Recorder.create(old, session_id=sid).record_custom("started", sid)
                old.bump_authority_epoch(sid)  # the old adapter's claim
            old.set_session_status("held", "queued")
            old.set_session_status("parked", "suspended")
            with old.transaction():
                old._execute(_OLD_FLEET_LEASES)
                old._execute(
                    "INSERT INTO fleet_leases VALUES ('held', 'old-worker', 1, 5000, 2000, -2, 1000), "
                    "('parked', NULL, 1, 0, 2000, 0, 1001)"
                )


def test_an_upgrade_carries_fleet_leases_over(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _at_schema_5(db_path, monkeypatch)
    with closing(SqliteStore(db_path, read_only=True)) as before:
        assert before.get_lease("held") is None  # no ``leases`` table yet: reads see no lease
    with closing(SqliteStore(db_path)) as store:
        assert store.schema_version() == len(MIGRATIONS)
        tables = {r[0] for r in store._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert "leases" in tables and "fleet_leases" not in tables
        assert store.get_lease("held") == LeaseRecord("held", "old-worker", 1, 5000, 2000, -2)
        assert store.get_lease("parked") == LeaseRecord("parked", None, 1, 0, 2000, 0)
        # the held lease expired long ago: claimable, fencing the old holder; the parked one waits
        assert store.claim_sessions("new-worker", ttl_ms=60_000, limit=5) == [
            LeaseClaim("held", 2, "old-worker", "queued")
        ]
        assert store.authority_epoch("held") == 2
        Recorder.attach(store, "parked", take_authority=False).record_custom("decision", 1)
        (again,) = store.claim_sessions("new-worker", ttl_ms=60_000)
        assert again == LeaseClaim("parked", 2, None, "suspended")


def test_live_records_from_before_the_host_column_are_still_read(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record an older version wrote names no host and no owner: read (by a read-only handle before the
    upgrade, and after it), it counts as another holder until watched unchanged for a lease (where its pid
    lives is unknown), and no registry's clear deletes it; a later publication replaces it whole."""
    with monkeypatch.context() as patch:
        patch.setattr(sqlite_module, "MIGRATIONS", MIGRATIONS[: len(MIGRATIONS) - 1])
        with closing(SqliteStore(db_path)) as old:
            old._write(
                "INSERT INTO live_runs VALUES ('r', 'waiting_tool', 1000, 900, 5, 1, 2147483646)"
            )  # as the old code wrote it: seven columns
    legacy = LiveRunRecord("r", "waiting_tool", 1000, 900, 5, 1, 2147483646)
    with closing(SqliteStore(db_path, read_only=True)) as before:
        assert before.schema_version() == len(MIGRATIONS) - 1
        assert before.live_runs() == [legacy]
    with closing(SqliteStore(db_path)) as store:
        assert store.live_runs() == [legacy]  # host and owner NULL
        # pid free here, host unknown: alive until watched unchanged for a lease
        assert other_holder(store, "r", None, watch=HolderWatch()) == legacy
        registry = LiveRegistry(store)
        registry.clear("r")
        assert store.live_runs() == [legacy]
        published = registry.publish("r", "running")
        assert store.live_runs() == [published] and published.host is not None
        registry.clear("r")
        assert store.live_runs() == []


def test_an_upgrade_without_fleet_leases_creates_an_empty_lease_table(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as patch:
        patch.setattr(sqlite_module, "MIGRATIONS", MIGRATIONS[:5])
        with closing(SqliteStore(db_path)) as old:
            old.create_session(SessionRecord("q", status="queued"))
    with closing(SqliteStore(db_path)) as store:
        assert store.schema_version() == len(MIGRATIONS)
        assert store.get_lease("q") is None
        store.open_lease("q")
        assert [c.session_id for c in store.claim_sessions("w", ttl_ms=60_000)] == ["q"]


def _store_with_events(db_path: Path) -> SqliteStore:
    store = SqliteStore(db_path)
    recorder = Recorder.create(store, session_id="s")
    recorder.append_many([_custom(i) for i in range(3)])
    return store


def _custom(i: int) -> Custom:
    return Custom(custom_kind="t", payload={"i": i})


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE events SET event = x'00' WHERE seq = 1",
        "UPDATE events SET hash = 'x'",
        "DELETE FROM events WHERE seq = 2",
        "DELETE FROM events",
    ],
)
def test_events_are_append_only_at_the_database_level(db_path: Path, statement: str) -> None:
    with closing(_store_with_events(db_path)) as store:
        before = list(store.read_events("s"))
        raw = sqlite3.connect(db_path)
        try:
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                raw.execute(statement)
            raw.rollback()
        finally:
            raw.close()
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            store._conn.execute(statement)  # the backend's own connection too
        assert list(store.read_events("s")) == before
        assert verify_session(store, "s").ok


# ─── open_store URL forms ─────────────────────────────────────────────────────────────────
def test_open_store_sqlite_url_with_absolute_path(db_path: Path) -> None:
    with open_store(f"sqlite:///{db_path}") as store:
        assert isinstance(store, SqliteStore)
        assert Path(store.path) == db_path
        assert store.url == f"sqlite:///{db_path}"
    assert db_path.exists()


def test_open_store_relative_sqlite_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with open_store("sqlite://sub/rel.db") as store:
        assert isinstance(store, SqliteStore)
        assert store.path == "sub/rel.db"
    assert (tmp_path / "sub" / "rel.db").exists()


def test_open_store_plain_path_creates_folders(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "f.db"
    with open_store(path) as store:
        assert isinstance(store, SqliteStore)
        assert store.read_only is False
        assert store.schema_version() == len(MIGRATIONS)
    assert path.exists()
    with open_store(str(path), read_only=True) as again:
        assert again.read_only is True


def test_open_store_memory() -> None:
    with open_store(":memory:") as store:
        assert isinstance(store, SqliteStore)
        recorder = Recorder.create(store, session_id="m")
        recorder.record_custom("x", 1)
        assert verify_session(store, "m").ok


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://user:secret@db.example/flightlog",
        "postgres://user:secret@db.example:5432/flightlog?sslmode=require",
        "mysql://root:secret@localhost/x",
    ],
)
def test_unsupported_urls_are_unavailable_without_the_password(url: str) -> None:
    with pytest.raises(StoreUnavailable) as info:
        open_store(url)
    err = info.value
    assert "secret" not in str(err)
    assert "secret" not in err.url
    assert "secret" not in repr(err.args)
    assert "***" in err.url
    assert err.reason


def test_read_only_open_of_a_missing_file_is_unavailable(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "missing.db"
    with pytest.raises(StoreUnavailable) as info:
        open_store(missing, read_only=True)
    assert "missing.db" in info.value.url
    with pytest.raises(StoreUnavailable):
        SqliteStore(missing, read_only=True)
    assert not missing.exists()
    assert not missing.parent.exists()


def test_read_only_open_of_a_database_without_schema_is_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    sqlite3.connect(path).close()
    with pytest.raises(
        StoreUnavailable,
        match=r"no flightlog schema in this database yet \(the first command that writes creates it",
    ):
        SqliteStore(path, read_only=True)


def test_opening_a_file_that_is_not_a_database_is_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "garbage.db"
    path.write_bytes(b"this is not a sqlite database, just text" * 100)
    with pytest.raises(StoreUnavailable):
        SqliteStore(path)


def test_read_only_store_refuses_writes_with_read_only_store(db_path: Path) -> None:
    with _store_with_events(db_path), SqliteStore(db_path, read_only=True) as ro:
        with pytest.raises(ReadOnlyStore):
            ro.bump_authority_epoch("s")
        assert ro.authority_epoch("s") == 0


# ─── two connections, one file ────────────────────────────────────────────────────────────
def test_two_connections_race_for_the_same_seq(db_path: Path) -> None:
    with SqliteStore(db_path) as first_store, SqliteStore(db_path) as second_store:
        Recorder.create(first_store, session_id="race").record_custom("start", 0)
        a = Recorder.attach(first_store, "race")
        b = Recorder.attach(second_store, "race", take_authority=False)  # same epoch: a real race
        assert a.next_seq == b.next_seq == 1
        assert a.epoch == b.epoch
        barrier = threading.Barrier(2)
        outcomes: dict[str, object] = {}

        def write(name: str, recorder: Recorder) -> None:
            barrier.wait()
            try:
                outcomes[name] = recorder.record_custom("writer", name)
            except Exception as exc:  # collected and asserted below
                outcomes[name] = exc

        threads = [threading.Thread(target=write, args=(n, r)) for n, r in (("a", a), ("b", b))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        conflicts = [n for n, o in outcomes.items() if isinstance(o, AppendConflict)]
        winners = [n for n, o in outcomes.items() if not isinstance(o, BaseException)]
        assert len(conflicts) == 1, outcomes
        assert len(winners) == 1, outcomes
        loser = a if conflicts[0] == "a" else b
        winner = b if loser is a else a
        err = outcomes[conflicts[0]]
        assert isinstance(err, AppendConflict)
        assert (err.session_id, err.seq) == ("race", 1)
        assert loser.next_seq == 1
        assert winner.next_seq == 2
        events = list(first_store.read_events("race"))
        assert [e.seq for e in events] == [0, 1]
        assert b'"payload":"' + winners[0].encode() + b'"' in events[1].event_bytes
        assert verify_session(second_store, "race").ok
        Recorder.attach(second_store, "race")


def test_a_second_writer_of_a_taken_seq_fails_whole_batch(db_path: Path) -> None:
    with SqliteStore(db_path) as one, SqliteStore(db_path) as two:
        Recorder.create(one, session_id="s")
        rows, head = chained_rows(["a", "b", "c"])
        one.append_events("s", *chained_rows(["a"]))
        with pytest.raises(AppendConflict):
            two.append_events("s", rows, head)
        assert [e.seq for e in two.read_events("s")] == [0]


# ─── streaming reads ──────────────────────────────────────────────────────────────────────
def test_read_events_pages_with_bounded_queries(db_path: Path) -> None:
    with closing(SqliteStore(db_path)) as store:
        Recorder.create(store, session_id="s").append_many([_custom(i) for i in range(95)])
        everything = list(store.read_events("s"))
        for batch in (1, 7, 10, 94, 95, 96, 512):
            assert list(store.read_events("s", batch=batch)) == everything, batch
        queries: list[str] = []
        store._conn.set_trace_callback(queries.append)
        try:
            stream = store.read_events("s", start=3, batch=10)
            first = [next(stream) for _ in range(25)]
            selects = [q for q in queries if q.lstrip().upper().startswith("SELECT")]
            assert len(selects) == 3  # 25 rows read in pages of 10: three queries, not the whole session
            assert [e.seq for e in first] == list(range(3, 28))
            stream.close()
        finally:
            store._conn.set_trace_callback(None)


def test_a_new_database_file_is_private(tmp_path: Path) -> None:
    import stat

    store = SqliteStore(tmp_path / "private.db")
    try:
        assert stat.S_IMODE((tmp_path / "private.db").stat().st_mode) == 0o600
    finally:
        store.close()


def test_an_id_holding_nul_is_found_by_the_lookups_of_many_ids(db_path: Path) -> None:
    """An id holding U+0000 (refused by ``check_session_id`` now; an older store or a raw write may hold
    one): ``session_keys_among`` and ``session_positions`` find it by its whole id, as ``session_keys``
    lists it. Before, their JSON parameter (``json_each``) cut it at the NUL, so it was not found."""
    ids = ["a", "b\x00", "b\x00c", "c"]
    with closing(SqliteStore(db_path)) as store:
        with store.transaction():
            for created, sid in enumerate(ids):
                store._conn.execute(
                    "INSERT INTO sessions (session_id, status, source, created_at_ms, updated_at_ms)"
                    " VALUES (?, 'running', 'x', ?, ?)",
                    (sid, created, created),
                )
        keys = store.session_keys()
        assert [k[0] for k in keys] == ids
        assert store.session_positions([*ids, "b", "nope"]) == {sid: i for i, sid in enumerate(ids)}
        for start in range(len(ids) + 1):
            found = store.session_keys_among(["b\x00", "c", "b"], "nothing", start)
            assert found == (sum(1 for i in (1, 3) if i < start), [keys[1], keys[3]]), start
        assert store.session_keys_among(["b\x00c"], "running", 0) == (0, keys)


def test_a_blob_id_is_found_by_its_text_as_the_listing_lists_it(db_path: Path) -> None:
    """A ``sessions`` row whose id is a BLOB (a raw write): ``session_keys`` lists it under its text, and
    ``session_keys_among``/``session_positions`` find it by that text, so the approvals queue counts (and
    names) it as the listing does. Before, the lookups missed it: the queue dropped it silently."""
    with closing(SqliteStore(db_path)) as store:
        for created, sid in enumerate(["a", "b", "c"]):
            store.create_session(SessionRecord(session_id=sid, created_at_ms=created + 1, status="running"))
        with store.transaction():
            store._conn.execute(
                "UPDATE sessions SET session_id = CAST(session_id AS BLOB) WHERE session_id = 'b'"
            )
        keys = store.session_keys()
        assert [k[0] for k in keys] == ["a", "b", "c"]
        assert store.session_positions(["a", "b", "c"]) == {"a": 0, "b": 1, "c": 2}
        for start in range(4):
            assert store.session_keys_among(["b", "c"], "nothing", start) == (
                sum(1 for i in (1, 2) if i < start),
                keys[1:],
            )
        assert store.session_keys_among(["b"], "running", 0) == (0, keys)  # by its status and its id: once


def test_session_keys_reads_a_status_that_is_not_utf8_and_pages_skip_a_blob_id(db_path: Path) -> None:
    """Beyond the contract's odd ids (``store_odd_id``): a status whose bytes are not UTF-8 is listed
    ``backslashreplace``-decoded by ``session_keys``, and ``list_sessions``' keyset pages leave a BLOB id
    out whatever the page size."""
    with closing(SqliteStore(db_path)) as store:
        for created, sid in enumerate(["a", "b", "c"]):
            store.create_session(SessionRecord(session_id=sid, created_at_ms=created + 1, status="running"))
        with store.transaction():
            store._conn.execute(
                "UPDATE sessions SET session_id = x'ff62', status = x'ff' WHERE session_id = 'b'"
            )
        assert [(k[0], k[1]) for k in store.session_keys()] == [
            ("a", "running"),
            ("\\xffb", "\\xff"),
            ("c", "running"),
        ]
        assert [r.session_id for r in store.list_sessions(batch=1)] == ["a", "c"]


def test_unnamed_sessions_names_null_and_blob_ids(db_path: Path) -> None:
    """``unnamed_sessions`` names every ``sessions`` row whose id is not text: a NULL id (no listing lists
    it) and a BLOB one (``get_session`` cannot find it), its text decoded even when it is not UTF-8, so
    ``verify --all`` can name each; a text id is never among them."""
    with closing(SqliteStore(db_path)) as store:
        for created, sid in enumerate(["a", "b", "c", "d"]):
            store.create_session(SessionRecord(session_id=sid, created_at_ms=created + 1, status="running"))
        assert store.unnamed_sessions() == []
        with store.transaction():
            store._conn.execute(
                "UPDATE sessions SET session_id = NULL, status = 'suspended' WHERE session_id = 'a'"
            )
            store._conn.execute(
                "UPDATE sessions SET session_id = CAST(session_id AS BLOB) WHERE session_id = 'c'"
            )
            store._conn.execute("UPDATE sessions SET session_id = X'64ff' WHERE session_id = 'd'")
        assert store.unnamed_sessions() == [
            (None, "null", 1, "suspended"),
            ("c", "blob", 3, "running"),
            ("d\\xff", "blob", 4, "running"),
        ]


class _FailingPragma:
    """The store's connection, but ``PRAGMA wal_checkpoint`` raises ``error`` (a real one SQLite gave)."""

    def __init__(self, conn: sqlite3.Connection, error: sqlite3.Error) -> None:
        self._conn, self._error = conn, error

    def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
        if sql.startswith("PRAGMA wal_checkpoint"):
            raise self._error
        return self._conn.execute(sql, *args)

    def __getattr__(self, name: str) -> object:
        return getattr(self._conn, name)


def _sqlite_error(sql: str) -> sqlite3.Error:
    """The error SQLite raises for ``sql`` on a fresh in-memory database (with its result code)."""
    with closing(sqlite3.connect(":memory:")) as conn:
        try:
            conn.execute(sql)
        except sqlite3.Error as exc:
            return exc
    raise AssertionError(f"{sql!r} did not fail")


def test_purge_freed_pages_passes_over_a_busy_wal_and_raises_any_other_error(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``purge_freed_pages`` is best effort against other holders of the WAL only: an open statement of its
    own connection (``SQLITE_LOCKED``, a real one) leaves the WAL for the next checkpoint; any other error
    is raised, translated and naming the store, where before every ``sqlite3.Error`` was swallowed."""
    with closing(SqliteStore(db_path)) as store:
        store.create_session(SessionRecord(session_id="a"))
        store.create_session(SessionRecord(session_id="b"))
        reading = store._conn.execute("SELECT session_id FROM sessions")
        reading.fetchone()  # the statement stays open: the checkpoint answers SQLITE_LOCKED
        store.purge_freed_pages()
        reading.close()
        store.purge_freed_pages()
        error = _sqlite_error("SELECT * FROM no_such_table")
        monkeypatch.setattr(store, "_conn", _FailingPragma(store._conn, error))
        with pytest.raises(StoreError, match="no such table: no_such_table") as raised:
            store.purge_freed_pages()
        assert raised.value.__cause__ is error and str(db_path) in str(raised.value)
        assert "while purging freed pages from the WAL" in "".join(raised.value.__notes__)
