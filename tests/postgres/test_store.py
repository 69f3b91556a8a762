"""The PostgreSQL backend: the shared Store contract, plus what only PostgreSQL has.

PostgreSQL-specific pins: ``open_store`` routes ``postgresql://`` URLs here (passwords never in errors),
``schema_migrations`` rows, append-only triggers that RAISE on UPDATE/DELETE/TRUNCATE of ``events``,
read-only connections, driver errors translated to :mod:`flightlog.errors`, savepoints keeping an outer
transaction usable after a conflict, the recorder's attach/verify and fencing over PostgreSQL, per-session
row locks (two writers of one session: one wins; two processes appending to different sessions at once),
the epoch recorded per event, and LISTEN/NOTIFY wake-ups.
"""

from __future__ import annotations

import multiprocessing
import threading
import uuid
from collections.abc import Callable, Iterator

import psycopg
import pytest
from psycopg import errors as pg_errors

from flightlog.errors import (
    AppendConflict,
    LedgerIntegrityError,
    ReadOnlyStore,
    StaleWriter,
    StoreError,
    StoreUnavailable,
)
from flightlog.events import Custom
from flightlog.recorder import Recorder, verify_session
from flightlog.store import Store, open_store
from flightlog.store.base import NewEvent
from flightlog.store.postgres import MIGRATIONS, PostgresStore, translate
from flightlog.testing.store_contract import StoreContract, chained_rows

from .server import blocked_by


class TestPostgresStore(StoreContract):
    @pytest.fixture
    def store(self, pg_store: PostgresStore) -> Iterator[Store]:
        yield pg_store

    @pytest.fixture
    def store_past_head(self) -> Callable[[Store, str, NewEvent], None]:
        def _insert(store: Store, session_id: str, row: NewEvent) -> None:
            assert isinstance(store, PostgresStore)
            with _raw(store) as raw:
                raw.execute(
                    "INSERT INTO events (session_id, seq, kind, event, prev_hash, hash, recorded_at_ms, epoch)"
                    " VALUES (%s, %s, %s, %s, %s, %s, 0, 0)",
                    (session_id, row.seq, row.kind, row.event_bytes, row.prev_hash, row.hash),
                )

        return _insert

    @pytest.fixture
    def store_alter_artifact(self) -> Callable[[Store, str, bytes], None]:
        def _alter(store: Store, sha256: str, content: bytes) -> None:
            assert isinstance(store, PostgresStore)
            with _raw(store) as raw:
                raw.execute("UPDATE artifacts SET content = %s WHERE sha256 = %s", (content, sha256))

        return _alter

    @pytest.fixture
    def reopen(self, open_pg: Callable[..., PostgresStore]) -> Callable[[Store], Store]:
        return lambda _store: open_pg()

    @pytest.fixture
    def reopen_read_only(self, open_pg: Callable[..., PostgresStore]) -> Callable[[Store], Store]:
        return lambda _store: open_pg(read_only=True)


class TestPostgresStoreGroupCommit(TestPostgresStore):
    """The same contract with group commit: every transaction on one writer connection."""

    @pytest.fixture
    def store(self, open_pg: Callable[..., PostgresStore]) -> Iterator[Store]:
        yield open_pg(group_commit=True)

    @pytest.fixture
    def reopen(self, open_pg: Callable[..., PostgresStore]) -> Callable[[Store], Store]:
        return lambda _store: open_pg(group_commit=True)


def _custom(i: int) -> Custom:
    return Custom(custom_kind="t", payload={"i": i})


def _raw(store: PostgresStore) -> psycopg.Connection[object]:
    return psycopg.connect(store._conninfo, autocommit=True, options=f"-c search_path={store.schema}")


# ─── URLs, passwords, schema ─────────────────────────────────────────────────────────────────
def test_open_store_routes_postgres_urls(pg_url: str) -> None:
    with open_store(pg_url) as store:
        assert isinstance(store, PostgresStore)
        assert store.schema_version() == len(MIGRATIONS)
    with open_store(pg_url, read_only=True) as again:
        assert isinstance(again, PostgresStore) and again.read_only


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://user:s3cret-pw@127.0.0.1:1/flightlog",
        "postgres://user:s3cret-pw@127.0.0.1:1/flightlog?sslmode=disable",
    ],
)
def test_unreachable_server_is_unavailable_without_the_password(url: str) -> None:
    with pytest.raises(StoreUnavailable) as info:
        open_store(url)
    err = info.value
    for text in (str(err), err.url, err.reason, repr(err.args)):
        assert "s3cret-pw" not in text
    assert "***" in err.url


def test_wrong_password_is_unavailable_without_the_password(pg_database: str) -> None:
    url = pg_database.replace("postgresql://postgres@", "postgresql://nosuchuser:s3cret-pw@")
    with pytest.raises(StoreUnavailable) as info:
        PostgresStore(url)
    assert "s3cret-pw" not in str(info.value)


def test_a_bad_schema_name_is_refused(pg_database: str) -> None:
    with pytest.raises(StoreUnavailable, match="schema"):
        PostgresStore(pg_database + "?schema=Robert');DROP")


def test_read_only_open_without_schema_is_unavailable(pg_database: str) -> None:
    with pytest.raises(
        StoreUnavailable,
        match=r"no flightlog schema in this database yet \(the first command that writes creates it",
    ):
        PostgresStore(pg_database + "?schema=never_created_here", read_only=True)


def test_schema_migrations_rows(pg_store: PostgresStore, open_pg: Callable[..., PostgresStore]) -> None:
    with _raw(pg_store) as raw:
        rows = raw.execute("SELECT version, description FROM schema_migrations ORDER BY version").fetchall()
    assert rows == [(i, d) for i, (d, _) in enumerate(MIGRATIONS, start=1)]
    open_pg()
    open_pg()
    with _raw(pg_store) as raw:
        assert raw.execute("SELECT COUNT(*) FROM schema_migrations").fetchone() == (len(MIGRATIONS),)


def test_concurrent_first_opens_migrate_once(pg_url: str) -> None:
    errors: list[BaseException] = []

    def open_once() -> None:
        try:
            PostgresStore(pg_url).close()
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=open_once) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


# ─── append-only at the database level ───────────────────────────────────────────────────────
@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE events SET event = '\\x00' WHERE seq = 1",
        "UPDATE events SET hash = 'x'",
        "DELETE FROM events WHERE seq = 2",
        "DELETE FROM events",
        "TRUNCATE events",
    ],
)
def test_events_are_append_only_at_the_database_level(pg_store: PostgresStore, statement: str) -> None:
    Recorder.create(pg_store, session_id="s").append_many([_custom(i) for i in range(3)])
    before = list(pg_store.read_events("s"))
    with _raw(pg_store) as raw, pytest.raises(pg_errors.RestrictViolation, match="append-only"):
        raw.execute(statement)
    assert list(pg_store.read_events("s")) == before
    assert verify_session(pg_store, "s").ok


def test_trigger_errors_are_store_errors(pg_store: PostgresStore) -> None:
    Recorder.create(pg_store, session_id="s").record_custom("x", 1)
    with pytest.raises(StoreError, match="append-only"):
        pg_store._write("DELETE FROM events")


# ─── driver errors ───────────────────────────────────────────────────────────────────────────
@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (pg_errors.UniqueViolation("dup"), AppendConflict),
        (pg_errors.ReadOnlySqlTransaction("ro"), ReadOnlyStore),
        (pg_errors.LockNotAvailable("busy"), StoreUnavailable),
        (pg_errors.QueryCanceled("timeout"), StoreUnavailable),
        (psycopg.OperationalError("server closed the connection"), StoreUnavailable),
        (psycopg.InterfaceError("connection is closed"), StoreUnavailable),
        (pg_errors.RaiseException("flightlog events are append-only"), StoreError),
        (pg_errors.SerializationFailure("retry"), StoreError),
        (pg_errors.DeadlockDetected("deadlock"), StoreError),
        (pg_errors.UndefinedTable("no table"), StoreError),
        (psycopg.DataError("bad"), StoreError),
        (psycopg.ProgrammingError("bad sql"), StoreError),
    ],
)
def test_every_driver_error_is_translated(error: psycopg.Error, expected: type[StoreError]) -> None:
    mapped = translate(error, "postgresql://u:***@h/db", password="pw")
    assert type(mapped) is expected
    assert isinstance(mapped, StoreError)


def test_translation_removes_the_password() -> None:
    error = psycopg.OperationalError("connection to postgresql://u:hunter2@h/db failed; password hunter2")
    mapped = translate(error, "postgresql://u:***@h/db", password="hunter2")
    assert "hunter2" not in str(mapped)


def test_a_read_only_connection_refuses_writes_at_the_server(open_pg: Callable[..., PostgresStore]) -> None:
    writer = open_pg()
    Recorder.create(writer, session_id="s").record_custom("x", 1)
    reader = open_pg(read_only=True)
    with pytest.raises(ReadOnlyStore):
        reader._run(reader._pool.getconn(), "DELETE FROM live_runs")  # bypasses the Python-side check
    assert reader.authority_epoch("s") == 0


# ─── transactions ────────────────────────────────────────────────────────────────────────────
def test_an_outer_transaction_survives_a_conflict_in_a_nested_block(pg_store: PostgresStore) -> None:
    pg_store.create_session(__import__("flightlog.store", fromlist=["SessionRecord"]).SessionRecord("s"))
    with pg_store.transaction():
        with pytest.raises(AppendConflict):
            pg_store.create_session(
                __import__("flightlog.store", fromlist=["SessionRecord"]).SessionRecord("s")
            )
        rows, head = chained_rows(["after"])
        pg_store.append_events("s", rows, head)
    assert [e.seq for e in pg_store.read_events("s")] == [0]


def test_transactions_are_per_thread(pg_store: PostgresStore) -> None:
    """A transaction open on one thread is invisible to another (its own connection), until commit."""
    from flightlog.store import SessionRecord

    seen: list[bool] = []
    with pg_store.transaction():
        pg_store.create_session(SessionRecord("t"))

        def look() -> None:
            seen.append(any(s.session_id == "t" for s in pg_store.list_sessions()))

        thread = threading.Thread(target=look)
        thread.start()
        thread.join()
    assert seen == [False]
    assert pg_store.get_session("t").session_id == "t"


# ─── recorder over PostgreSQL ────────────────────────────────────────────────────────────────
def test_attach_verifies_and_takes_authority(pg_store: PostgresStore) -> None:
    first = Recorder.create(pg_store, session_id="s")
    first.append_many([_custom(i) for i in range(5)])
    second = Recorder.attach(pg_store, "s")
    assert (second.next_seq, second.head, second.root) == (5, first.head, first.root)
    assert second.epoch == 1
    with pytest.raises(StaleWriter):
        first.record_custom("late", 1)
    second.record_custom("ok", 1)
    assert verify_session(pg_store, "s").ok
    assert pg_store.event_epochs("s") == [(i, 0) for i in range(5)] + [(5, 1)]


def test_attach_refuses_a_tampered_ledger(pg_store: PostgresStore) -> None:
    Recorder.create(pg_store, session_id="s").append_many([_custom(i) for i in range(4)])
    with _raw(pg_store) as raw:
        raw.execute("ALTER TABLE events DISABLE TRIGGER events_append_only")
        raw.execute("UPDATE events SET event = convert_to('{\"kind\":\"custom\"}', 'UTF8') WHERE seq = 2")
        raw.execute("ALTER TABLE events ENABLE TRIGGER events_append_only")
    with pytest.raises(LedgerIntegrityError) as info:
        Recorder.attach(pg_store, "s")
    assert info.value.seq == 2


def test_abort_fences_a_running_writer_and_records_nothing(pg_store: PostgresStore) -> None:
    writer = Recorder.create(pg_store, session_id="s")
    writer.record_custom("start", 0)
    other = PostgresStore(pg_store.url.replace("***", ""), schema=pg_store.schema)
    try:
        other.bump_authority_epoch("s")
    finally:
        other.close()
    before = list(pg_store.read_events("s"))
    with pytest.raises(StaleWriter):
        writer.append_many([_custom(1), _custom(2)])
    assert list(pg_store.read_events("s")) == before
    assert writer.next_seq == 1


def test_two_writers_of_one_session_race_one_wins(open_pg: Callable[..., PostgresStore]) -> None:
    one, two = open_pg(), open_pg()
    Recorder.create(one, session_id="race").record_custom("start", 0)
    a = Recorder.attach(one, "race")
    b = Recorder.attach(two, "race", take_authority=False)
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
    conflicts = [o for o in outcomes.values() if isinstance(o, AppendConflict)]
    assert len(conflicts) == 1, outcomes
    assert [e.seq for e in one.read_events("race")] == [0, 1]
    assert verify_session(two, "race").ok


def _append_many_in_a_process(url: str, session_id: str, count: int, ready: object, go: object) -> None:
    store = PostgresStore(url)
    try:
        recorder = Recorder.create(store, session_id=session_id)
        ready.set()  # type: ignore[attr-defined]
        go.wait(30)  # type: ignore[attr-defined]
        for i in range(count):
            recorder.record_custom("n", i)
    finally:
        store.close()


def test_two_processes_append_to_different_sessions_concurrently(
    pg_url: str, pg_store: PostgresStore
) -> None:
    """Row locks, not a table lock: while one session's row is locked, another process appends freely."""
    from flightlog.store import SessionRecord

    ctx = multiprocessing.get_context("spawn")
    pg_store.create_session(SessionRecord("held"))
    with pg_store.transaction():
        rows, head = chained_rows(["held"])
        pg_store.append_events("held", rows, head)  # holds the "held" row lock until the block ends
        events = [(ctx.Event(), ctx.Event()) for _ in range(2)]
        procs = [
            ctx.Process(target=_append_many_in_a_process, args=(pg_url, f"p{i}", 50, r, g))
            for i, (r, g) in enumerate(events)
        ]
        for p in procs:
            p.start()
        for ready, _ in events:
            assert ready.wait(60)
        for _, go in events:
            go.set()
        for p in procs:
            p.join(120)  # with a table lock they would wait for this block to end: a hang, then exit None
        assert [p.exitcode for p in procs] == [0, 0]
    for i in range(2):
        assert [e.seq for e in pg_store.read_events(f"p{i}")] == list(range(50))
        assert verify_session(pg_store, f"p{i}").ok
    assert [e.seq for e in pg_store.read_events("held")] == [0]


def test_a_second_writer_waits_on_the_row_lock_then_conflicts(open_pg: Callable[..., PostgresStore]) -> None:
    one, two = open_pg(), open_pg()
    Recorder.create(one, session_id="s")
    outcome: list[object] = []
    with one.transaction():
        one.append_events("s", *chained_rows(["first"]))

        def rival() -> None:
            try:
                two.append_events("s", *chained_rows(["rival"]))
                outcome.append("wrote")
            except AppendConflict as exc:
                outcome.append(exc)

        thread = threading.Thread(target=rival)
        thread.start()
        assert one._tx.conn is not None
        blocked_by(one._tx.conn.info.backend_pid)  # the rival waits on a lock this transaction holds
        assert outcome == []  # blocked on the session row
    thread.join(60)
    assert len(outcome) == 1 and isinstance(outcome[0], AppendConflict)
    assert [e.event_bytes for e in one.read_events("s")] == [chained_rows(["first"])[0][0].event_bytes]


# ─── LISTEN / NOTIFY ─────────────────────────────────────────────────────────────────────────
# The channel is database-wide and other test runs may share the server: session ids are unique here, so
# only this test's commits can wake its waits. "No wake-up" is read with a zero timeout once a later
# commit's notification (a marker's) has arrived: notifications arrive in commit order, so an earlier one
# would have arrived first. No assertion depends on how long a short wait lasted.
def _unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:12]}"


def test_wait_for_events_wakes_on_commit_not_on_rollback(open_pg: Callable[..., PostgresStore]) -> None:
    reader, writer = open_pg(), open_pg()
    sid, marker = _unique("s"), _unique("marker")
    recorder, mark = Recorder.create(writer, session_id=sid), Recorder.create(writer, session_id=marker)
    assert reader.wait_for_events(0, session_id=sid) is True  # the first call starts listening
    assert reader.wait_for_events(0, session_id=marker) is True
    with pytest.raises(RuntimeError), writer.transaction():
        recorder.record_custom("dropped", 0)
        raise RuntimeError("roll back")
    mark.record_custom("after", 0)
    assert reader.wait_for_events(60, session_id=marker) is True
    assert reader.wait_for_events(0, session_id=sid) is False, "a rolled-back transaction woke a waiter"

    committer = threading.Thread(target=lambda: recorder.record_custom("kept", 1))
    committer.start()
    assert reader.wait_for_events(60, session_id=sid) is True  # woken by the commit, before or during
    committer.join(60)
    assert [e.seq for e in reader.read_events(sid)] == [0]


def test_wait_for_events_filters_by_session(open_pg: Callable[..., PostgresStore]) -> None:
    reader, writer = open_pg(), open_pg()
    mine, theirs, marker = _unique("mine"), _unique("other"), _unique("marker")
    other, mark = Recorder.create(writer, session_id=theirs), Recorder.create(writer, session_id=marker)
    Recorder.create(writer, session_id=mine)
    for sid in (mine, marker, None):
        assert reader.wait_for_events(0, session_id=sid) is True  # each filter's first call
    other.record_custom("x", 0)
    mark.record_custom("after", 0)
    assert reader.wait_for_events(60, session_id=marker) is True
    assert reader.wait_for_events(0, session_id=mine) is False, "another session's commit woke it"
    writer.set_session_status(mine, "completed")
    assert reader.wait_for_events(60, session_id=mine) is True
    assert reader.wait_for_events(60) is True  # any session: the commits since its first call
    other.record_custom("y", 1)
    assert reader.wait_for_events(60) is True
