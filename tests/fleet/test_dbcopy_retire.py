"""``db copy`` leaves one live store per ledger (issue 10, item 8).

A copy used to leave two writable stores with one ledger id; once the copy recorded more, the source
failed ``verify --all`` with false "rolled back" / "missing" alarms (retained heads are kept per ledger
id). Now a whole copy retires its source (a partial copy, its destination) with a record signed by the
log key that pins what the retired store holds: it refuses writes naming the live store, and ``verify``
says "stale copy" for what went on elsewhere, while a retired store changed after the copy, or a forged
record, still fails with the real reason.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flightlog.cli import app
from flightlog.errors import LedgerRetired, StoreError
from flightlog.fleet import Worker
from flightlog.importers import import_file
from flightlog.integrity.heads import HeadStore
from flightlog.integrity.keys import LogSigner
from flightlog.integrity.notary import Notary
from flightlog.integrity.retirement import Pin, Retirement, sign_retirement
from flightlog.ops.dbcopy import copy_store
from flightlog.recorder import Recorder
from flightlog.store import SqliteStore, open_store
from postgres.server import database_url, fresh_schema, schema_url

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "samples" / "claude-code"
runner = CliRunner()


def cli(db: str | Path, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["--db", str(db), *args])
    return result.exit_code, result.stdout, result.stderr


def _rows(out: str) -> list[dict[str, object]]:
    rows = json.loads(out)
    assert isinstance(rows, list)
    return rows


@pytest.fixture
def ledger(tmp_path: Path) -> tuple[Path, list[str]]:
    """A signed SQLite ledger: two imported (sealed) sessions and one open session with signed checkpoints."""
    path = tmp_path / "src.db"
    notary = Notary.from_env(every=4)
    with SqliteStore(path) as store:
        for sample in sorted(SAMPLES.glob("spotter_*.jsonl"))[:2]:
            import_file(store, sample, notary=notary)
        recorder = Recorder.create(store, session_id="open-run", notary=notary)
        for i in range(6):
            recorder.record_custom("step", {"i": i})
        recorder.checkpoint()
        ids = [s.session_id for s in store.list_sessions()]
    assert len(ids) >= 3 and ids[-1] == "open-run"
    return path, ids


def _go_on_in(db: str | Path) -> None:
    """The live store records more: the open session goes on and a new session starts (both signed)."""
    notary = Notary.from_env(every=2)
    with open_store(str(db)) as store:
        recorder = Recorder.attach(store, "open-run", notary=notary)
        for i in range(3):
            recorder.record_custom("later", {"i": i})
        recorder.checkpoint()
        fresh = Recorder.create(store, session_id="after-the-move", notary=notary)
        for i in range(3):
            fresh.record_custom("new", {"i": i})
        fresh.finish("completed")


def test_verify_says_stale_copy_not_rolled_back_or_missing(
    ledger: tuple[Path, list[str]], tmp_path: Path
) -> None:
    src, ids = ledger
    dst = tmp_path / "dst.db"
    code, out, err = cli(src, "db", "copy", str(src), str(dst))
    assert code == 0, out + err
    assert f"the source is now read-only: moved to {dst.resolve()} at " in out

    # Nothing went on yet: the source is intact, and says it is read-only and where the ledger went.
    code, out, err = cli(src, "verify", "--all")
    assert code == 0, out + err
    assert out.count(f"read-only: moved to {dst.resolve()}") == len(ids) + 1  # sessions and index log

    _go_on_in(dst)
    code, out, err = cli(dst, "verify", "--all")
    assert code == 0, out + err  # the live store

    code, out, err = cli(src, "verify", "--all")
    assert code == 1, out + err
    assert "rollback" not in out and "rolled back" not in out and "MISSING" not in out
    assert (
        "seq 6: stale_copy (stale copy: the retained head covers 9 events; this database holds the 6" in out
    )
    assert "STALE     after-the-move  stale copy: a head is retained" in out
    assert "STALE     open-run  6 events" in out and "STALE     index log" in out  # not DIVERGES
    assert "DIVERGES" not in out
    assert re.search(r"leaf \d+: stale_copy \(stale copy: the retained index head covers \d+ leaves", out)

    code, out, err = cli(src, "verify", "--all", "--json")
    assert code == 1
    rows = _rows(out)
    by_id = {r["session_id"]: r for r in rows}
    open_run = by_id["open-run"]
    assert [(d["seq"], d["reason"]) for d in open_run["divergences"]] == [(6, "stale_copy")]  # type: ignore[union-attr, index]
    assert str(open_run["retired"]).startswith(f"moved to {dst.resolve()} at ")
    assert by_id["after-the-move"]["state"] == "stale_copy"
    assert open_run["verdict"] == "stale_copy"
    assert {by_id[sid]["verdict"] for sid in ids if sid != "open-run"} == {"ok"}
    assert all(by_id[sid]["ok"] for sid in ids if sid != "open-run")  # the sealed ones did not go on
    # show prints what the retired store holds, as its retirement record pins it: no warning for that
    code, out, err = cli(src, "show", "open-run")
    assert code == 0 and out.startswith("session open-run")
    note = f"flightlog: note: this store was moved to {dst.resolve()} at "  # said once; no warning
    assert err.startswith(note) and err.endswith(f"read-only stale copy; write to {dst.resolve()}\n")
    assert err.count("\n") == 1
    index = rows[-1]
    assert index["state"] == "index"
    assert [d["reason"] for d in index["divergences"]] == ["stale_copy"]  # type: ignore[union-attr, index]
    assert index["verdict"] == "stale_copy"

    code, out, _ = cli(src, "audit", "open-run")  # one session: the same answer
    assert code == 1 and "stale_copy" in out and "rollback" not in out


def _retired_in_the_file_alone(db: Path, tmp_path: Path) -> bool:
    """Whether ``db``'s main file, without its WAL, holds the retirement (what `db repair --discard-wal`
    would leave)."""
    alone = tmp_path / "alone" / "file.db"
    alone.parent.mkdir()
    shutil.copyfile(db, alone)
    conn = sqlite3.connect(alone)
    try:
        return conn.execute("SELECT 1 FROM ledger_meta WHERE key = 'retired'").fetchone() is not None
    finally:
        conn.close()


def test_the_retirement_reaches_the_database_file_while_a_reader_holds_it_open(
    ledger: tuple[Path, list[str]], tmp_path: Path
) -> None:
    """The user's repro: a dashboard (a read-only reader) open on SRC during `db copy`. The retirement was
    left only in SRC's WAL (the reader kept the copy's close from checkpointing, and the reader cannot), so
    `db repair --discard-wal` dropped it and SRC was writable again beside DST. The copy now checkpoints
    SRC after retiring it: an idle reader does not stop that."""
    src, _ = ledger
    dst = tmp_path / "dst.db"
    with SqliteStore(src, read_only=True) as reader:
        assert reader.list_sessions()  # it has read, and holds the database open
        code, out, err = cli(src, "db", "copy", str(src), str(dst))
        assert code == 0, out + err
        assert "not in the database file yet" not in out + err
        assert Path(f"{src}-wal").stat().st_size == 0  # folded in and truncated
        assert reader.retirement() is not None
    assert _retired_in_the_file_alone(src, tmp_path)
    code, out, err = cli(src, "db", "repair", "--discard-wal")
    assert code == 0 and out.startswith(f"nothing to repair: {src} has an empty WAL"), out + err
    code, out, err = cli(src, "import", str(sorted(SAMPLES.glob("*.jsonl"))[-1]))
    assert code == 1 and f"was moved to {dst.resolve()} at " in err


def test_a_reader_on_an_older_snapshot_keeps_the_retirement_in_the_wal_and_repair_refuses_to_drop_it(
    ledger: tuple[Path, list[str]], tmp_path: Path
) -> None:
    """A reader inside a read transaction begun before the copy pins an older snapshot, so the checkpoint
    cannot copy the retirement's frames (SQLite waits for it up to the busy timeout, then gives up): the
    copy says so, the record stays durable in the WAL, and `db repair --discard-wal` refuses to drop it,
    with or without a ledger change since."""
    src, _ = ledger
    dst = tmp_path / "dst.db"
    reader = sqlite3.connect(src.resolve().as_uri() + "?mode=ro", uri=True, isolation_level=None)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM events").fetchone()  # the snapshot before the copy
        with SqliteStore(src, busy_timeout_ms=100) as source, SqliteStore(dst) as target:
            report = copy_store(source, target)
        assert report.retired == "source"
        [note] = [n for n in report.notes if "not in the database file yet" in n]
        assert note.startswith(f"the retirement of {source.url} is committed in its WAL, but a reader held")
        reader.execute("COMMIT")
    finally:
        reader.close()  # read-only: its close cannot checkpoint, so the WAL stays as the user found it
    assert Path(f"{src}-wal").stat().st_size > 0
    assert not _retired_in_the_file_alone(src, tmp_path)
    code, out, err = cli(src, "db", "repair", "--discard-wal")
    assert code == 2, out + err
    message = " ".join(err.split())
    assert (
        "the retirement record `flightlog db copy` wrote, which the database file does not hold yet"
        in message
    )
    assert "split brain" in message and "--force discards it anyway" in message
    assert not list(tmp_path.glob("src.db.repair-*"))
    code, out, err = cli(src, "import", str(sorted(SAMPLES.glob("*.jsonl"))[-1]))
    assert code == 1 and f"was moved to {dst.resolve()} at " in err  # still retired


def test_a_retired_store_refuses_writes_naming_the_live_store(
    ledger: tuple[Path, list[str]], tmp_path: Path
) -> None:
    src, ids = ledger
    dst = tmp_path / "dst.db"
    with SqliteStore(src) as store:
        held = Recorder.attach(store, "open-run", notary=Notary.from_env())  # a writer attached before
        with SqliteStore(dst) as target:
            report = copy_store(store, target)
        assert report.retired == "source" and report.retirement is not None
        assert report.retirement.startswith(f"moved to {dst.resolve()} at ")
        with pytest.raises(
            LedgerRetired, match=f"was moved to {dst.resolve()} at .*write to {dst.resolve()}"
        ):
            held.record_custom("too late", {})
        with pytest.raises(LedgerRetired) as info:
            Recorder.create(store, session_id="new-here")
        assert (info.value.state, info.value.peer) == ("moved", str(dst.resolve()))
        with pytest.raises(LedgerRetired):
            Recorder.attach(store, "open-run")
        assert [s.session_id for s in store.list_sessions()] == ids
        assert store.get_session("open-run").events == 6  # 6 steps and nothing after the copy

    code, out, err = cli(src, "import", str(sorted(SAMPLES.glob("*.jsonl"))[-1]))
    assert code == 1 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith("flightlog: error: store ")
    assert f"was moved to {dst.resolve()} at " in err and f"write to {dst.resolve()}" in err

    code, _, err = cli(src, "db", "copy", str(src), str(tmp_path / "again.db"))
    assert code == 1 and len(err.splitlines()) == 1
    assert f"is retired (moved to {dst.resolve()}" in err and f"copy from {dst.resolve()}" in err
    assert not (tmp_path / "again.db").exists()  # the refused copy removes the file it created

    code, out, _ = cli(src, "show", "open-run")  # reading goes on
    assert code == 0 and "step" in out


def test_a_retired_store_changed_after_the_copy_still_fails_with_the_real_reason(
    ledger: tuple[Path, list[str]], tmp_path: Path
) -> None:
    src, _ = ledger
    dst = tmp_path / "dst.db"
    assert cli(src, "db", "copy", str(src), str(dst))[0] == 0
    _go_on_in(dst)
    # An attacker truncates the stale copy's open session (and fixes up its session row).
    raw = sqlite3.connect(src)
    raw.execute("DROP TRIGGER IF EXISTS events_no_delete")
    raw.execute("DELETE FROM events WHERE session_id = 'open-run' AND seq >= 4")
    row = raw.execute(
        "SELECT seq, hash FROM events WHERE session_id = 'open-run' ORDER BY seq DESC LIMIT 1"
    ).fetchone()
    raw.execute(
        "UPDATE sessions SET head_seq = ?, head_hash = ?, merkle_root = '' WHERE session_id = 'open-run'", row
    )
    raw.commit()
    raw.close()
    code, out, _ = cli(src, "verify", "open-run", "--json")
    assert code == 1
    reasons = [d["reason"] for d in _rows(out)[0]["divergences"]]  # type: ignore[union-attr]
    assert "retired_mismatch" in reasons and "rollback" in reasons and "stale_copy" not in reasons


def test_a_forged_retirement_hides_nothing(ledger: tuple[Path, list[str]], tmp_path: Path) -> None:
    """A rolled-back live store with a retirement record the attacker signed: ``bad_retirement``, and the
    rollback is still called a rollback."""
    src, _ = ledger
    backup = tmp_path / "backup.db"
    shutil.copy(src, backup)  # the attacker's old copy
    _go_on_in(src)
    shutil.copy(backup, src)  # ... put back over the live store
    with SqliteStore(src) as store:
        forged = Retirement(store.ledger_id(), "moved", "/elsewhere.db", 1, Pin(0, b"\0" * 32), {})
        attacker = Notary.for_signer(LogSigner.generate("attacker"), HeadStore(tmp_path / "h"))
        note = sign_retirement(forged, attacker)
        store.retire(forged.summary(), note)
    code, out, _ = cli(src, "verify", "--all")
    assert code == 1
    assert "bad_retirement" in out and "no signature by a trusted key" in out
    assert "rollback" in out and "stale_copy" not in out


def test_the_live_store_replaced_by_its_stale_source_does_not_pass(
    ledger: tuple[Path, list[str]], tmp_path: Path
) -> None:
    src, _ = ledger
    dst = tmp_path / "dst.db"
    assert cli(src, "db", "copy", str(src), str(dst))[0] == 0
    _go_on_in(dst)
    shutil.copy(src, dst)  # the attacker rolls the live store back to what it was moved from
    for suffix in ("-wal", "-shm"):
        Path(str(dst) + suffix).unlink(missing_ok=True)
    code, out, _ = cli(dst, "verify", "--all")
    assert code == 1 and "stale_copy" in out and f"moved to {dst.resolve()}" in out


def test_a_partial_copy_retires_the_destination(ledger: tuple[Path, list[str]], tmp_path: Path) -> None:
    src, ids = ledger
    part = tmp_path / "part.db"
    with SqliteStore(src) as store, SqliteStore(part) as target:
        report = copy_store(store, target, sessions=["open-run"])
        assert report.retired == "destination" and report.retirement is not None
        assert report.retirement.startswith(f"a partial copy of {src.resolve()} made at ")
        assert store.retirement() is None
        with pytest.raises(LedgerRetired, match=f"partial copy of {src.resolve()}"):
            Recorder.create(target, session_id="x")
    _go_on_in(src)  # the source is the live store
    code, out, _ = cli(src, "verify", "--all")
    assert code == 0, out
    code, out, _ = cli(part, "verify", "--all", "--json")
    assert code == 1
    rows = _rows(out)
    states = {
        r["session_id"]: (r["state"], [d["reason"] for d in r.get("divergences", [])]) for r in rows[:-1]
    }  # type: ignore[union-attr]
    assert states["open-run"] == ("open", ["stale_copy"])
    assert {sid: states[sid][0] for sid in [*ids, "after-the-move"] if sid != "open-run"} == {
        sid: "stale_copy" for sid in [*ids, "after-the-move"] if sid != "open-run"
    }
    assert [d["reason"] for d in rows[-1]["divergences"]] == ["stale_copy"]  # type: ignore[index, union-attr]


def test_a_writer_racing_the_copy_is_held_then_refused_sqlite(
    ledger: tuple[Path, list[str]], tmp_path: Path
) -> None:
    """While the copy runs it holds the source's write lock: another writer cannot commit; after it, the
    writer is refused (so no acknowledged append is left behind in the retired store)."""
    src, _ = ledger
    seen: list[str] = []

    def during(session_id: str, events: int) -> None:
        with pytest.raises(StoreError, match="locked"), SqliteStore(src, busy_timeout_ms=50) as other:
            Recorder.create(other, session_id=f"racer-{len(seen)}")  # (or the open's migration check) fails
        seen.append(session_id)

    with SqliteStore(src) as store, SqliteStore(tmp_path / "dst.db") as target:
        copy_store(store, target, on_session=during)
    assert seen
    with SqliteStore(src) as other, pytest.raises(LedgerRetired):
        Recorder.create(other, session_id="racer-late")


def test_a_worker_on_a_retired_store_stops(
    ledger: tuple[Path, list[str]], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker left running against the moved store stops (naming where the ledger went) instead of
    failing every claim forever."""
    src, _ = ledger
    with SqliteStore(src) as store, SqliteStore(tmp_path / "dst.db") as target:
        copy_store(store, target)
    with SqliteStore(src) as store:
        worker = Worker(store, concurrency=1, poll_s=0.05)
        thread = threading.Thread(target=worker.run)  # no idle exit: only the retirement ends it
        thread.start()
        thread.join(60)
        stopped = not thread.is_alive()
        worker.stop()
        thread.join(60)
    assert stopped
    assert f"stopping: store sqlite:///{src} was moved to {(tmp_path / 'dst.db').resolve()}" in caplog.text


@pytest.fixture
def pg_url() -> Iterator[str]:
    database_url()
    with fresh_schema("retire") as schema:
        yield schema_url(schema)


def test_a_postgres_source_is_retired_and_a_racing_writer_refused(
    ledger: tuple[Path, list[str]], tmp_path: Path, pg_url: str
) -> None:
    """On PostgreSQL the copy holds SHARE locks on the ledger tables: a writer's append waits for the copy
    (observed in pg_locks, no timer), and once the copy commits the writer is refused."""
    src, ids = ledger
    assert cli(src, "db", "copy", str(src), pg_url)[0] == 0  # the ledger now lives in PostgreSQL
    outcome: list[BaseException | None] = []
    with open_store(pg_url) as other:
        recorder = Recorder.attach(other, "open-run")  # a writer holding the session before the copy

        def append() -> None:
            try:
                recorder.record_custom("racing", {})
                outcome.append(None)
            except BaseException as exc:  # the assertion below names it
                outcome.append(exc)

        thread = threading.Thread(target=append)

        def during(session_id: str, events: int) -> None:
            if thread.ident is not None:
                return
            thread.start()
            waiting = False
            with open_store(pg_url) as watcher:  # wait (60 s at most) until the append waits for our locks
                deadline = time.monotonic() + 60  # (not 6000 waits: any commit on the server ends one early)
                while time.monotonic() < deadline:
                    waiting = _waits_for_lock(watcher)
                    if outcome or waiting:
                        break
                    watcher.wait_for_events(0.01)
            assert waiting and not outcome, outcome  # it cannot commit while the copy holds the tables

        back = tmp_path / "back.db"
        with open_store(pg_url) as pg, SqliteStore(back) as target:
            report = copy_store(pg, target, on_session=during)
            assert report.retired == "source"
        thread.join(60)
    assert len(outcome) == 1 and isinstance(outcome[0], LedgerRetired), outcome
    assert f"write to {back.resolve()}" in str(outcome[0])
    with open_store(pg_url) as pg:
        assert pg.get_session("open-run").events == 6
        with pytest.raises(LedgerRetired):
            Recorder.create(pg, session_id="later")
    code, out, _ = cli(pg_url, "verify", "--all")
    assert code == 0 and out.count(f"read-only: moved to {back.resolve()}") == len(ids) + 1


def _waits_for_lock(store: object) -> bool:
    """Whether a backend waits for a lock on a table of this test's schema (pg_locks.granted = false)."""
    row = store._one(  # type: ignore[attr-defined]
        "SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE NOT l.granted AND n.nspname = current_schema())"
    )
    return bool(row[0])


def test_a_copy_onto_itself_is_refused_up_front(ledger: tuple[Path, list[str]], tmp_path: Path) -> None:
    """Before, ``db copy X X`` said "database is locked by another writer" (exit 1); now exit 2 naming the
    problem, through any spelling of the same file (relative, a symlink, a sqlite:/// URL)."""
    src, _ = ledger
    link = tmp_path / "link.db"
    link.symlink_to(src)
    for dst in (str(src), str(tmp_path / "x" / ".." / "src.db"), str(link), f"sqlite:///{src}"):
        code, out, err = cli(src, "db", "copy", str(src), dst)
        assert code == 2 and out == "", (dst, err)
        assert err.splitlines() == [
            f"flightlog: error: db copy: SRC and DST are the same database ({src}); name another DST (a new "
            "file or an empty database)"
        ], err
    assert cli(src, "verify", "--all", "--offline")[0] == 0  # untouched, not retired


def test_a_refused_copy_keeps_a_destination_file_that_existed(
    ledger: tuple[Path, list[str]], tmp_path: Path
) -> None:
    """The copy removes only what it created: an existing DST (here one holding a session of SRC, so the
    copy refuses) stays, byte for byte."""
    src, _ = ledger
    dst = tmp_path / "dst.db"
    assert cli(src, "db", "copy", str(src), str(dst))[0] == 0
    code, _, err = cli(dst, "db", "copy", str(dst), str(dst.with_name("dst-again.db")))
    assert code == 0, err
    before = dst.read_bytes()
    code, _, err = cli(dst, "db", "copy", str(dst.with_name("dst-again.db")), str(dst))
    assert code == 1 and err.startswith("flightlog: error: "), err
    assert dst.exists() and dst.read_bytes() == before
