"""``db copy`` moves a *signed* ledger: the destination takes the source's ledger id, the index log and the
witness cosignatures come along, and ``verify --all`` / ``audit --all`` pass on every copy.

Regression: the copy used to keep the destination's own ledger id (every checkpoint then failed with
``bad_checkpoint ... origin 'flightlog.local/<source id>/...' is not 'flightlog.local/<dest id>/...'``),
left the index log behind (0 leaves), and said "all verified" after checking the chains only.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flightlog.cli import app
from flightlog.errors import StoreError
from flightlog.importers import import_file
from flightlog.integrity.notary import Notary
from flightlog.integrity.witness import Witness, WitnessServer
from flightlog.integrity.witness_client import submit_index, submit_session, trust_witness
from flightlog.ops.dbcopy import CopyNotVerified, copy_store
from flightlog.recorder import Recorder
from flightlog.store import SqliteStore, open_store
from postgres.server import database_url, fresh_schema, schema_url

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "samples" / "claude-code"
runner = CliRunner()


def cli(db: str | Path, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["--db", str(db), *args])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def pg_url() -> Iterator[str]:
    database_url()
    with fresh_schema("ledger") as schema:
        yield schema_url(schema)


@pytest.fixture
def signed_db(tmp_path: Path) -> Iterator[tuple[Path, list[str]]]:
    """A SQLite ledger of imported, signed and sealed sessions, each session and the index log cosigned by
    a trusted witness (the user's key dir and head dir are the test's, see tests/conftest.py)."""
    notary = Notary.from_env(every=8)
    path = tmp_path / "src.db"
    witness = Witness.open(tmp_path / "witness", log_keys=[str(notary.signer.verifier)])
    with SqliteStore(path) as store, WitnessServer(witness, "127.0.0.1", 0) as server:
        for sample in sorted(SAMPLES.glob("*.jsonl")):
            import_file(store, sample, notary=notary, seal=True)
        ids = [s.session_id for s in store.list_sessions()]
        assert ids, f"no samples imported from {SAMPLES}"
        trust_witness(str(witness.cosigner.verifier))  # no URL: stored cosignatures only from here on
        for sid in ids:
            submit_session(store, sid, server.url, witness_key=witness.cosigner.verifier)
        submit_index(store, server.url, witness_key=witness.cosigner.verifier)
    yield path, ids


def _verified(db: str | Path, ids: list[str]) -> dict[str, dict[str, object]]:
    for command in ("verify", "audit"):
        code, out, err = cli(db, command, "--all", "--json")
        assert code == 0, out + err
    *sessions, index = json.loads(out)
    assert [s["session_id"] for s in sessions] == ids
    for report in sessions:
        assert report["ok"] and report["state"] == "sealed" and report["unanchored"] is None
        assert report["retained"] == report["events"] and report["witnessed"] is not None
    assert index["divergences"] == [] and index["leaves"] > 0 and index["witnessed"] is not None
    return {s["session_id"]: s for s in sessions} | {"(index)": index}


def test_a_signed_ledger_round_trips_sqlite_postgres_sqlite(
    signed_db: tuple[Path, list[str]], pg_url: str, tmp_path: Path
) -> None:
    src, ids = signed_db
    assert len(ids) >= 4
    before = _verified(src, ids)

    code, out, err = cli(src, "db", "copy", str(src), pg_url)
    assert code == 0, out + err
    assert "all verified" in out and "index log" in out
    with SqliteStore(src) as a, open_store(pg_url) as pg:
        assert pg.ledger_id() == a.ledger_id()
        assert pg.index_size() == a.index_size() > 0
        assert [leaf.leaf for leaf in pg.read_index_leaves()] == [leaf.leaf for leaf in a.read_index_leaves()]
        assert [c.body for c in pg.index_checkpoints()] == [c.body for c in a.index_checkpoints()]
    assert _verified(pg_url, ids) == before

    back = tmp_path / "back.db"
    code, out, err = cli(src, "db", "copy", pg_url, str(back), "--json")
    assert code == 0, out + err
    wire = json.loads(out)
    assert wire["sessions"] == len(ids) and wire["verified"] == len(ids) and wire["index_verified"]
    assert wire["cosignatures"] == len(ids) + 1 and wire["index_leaves"] == before["(index)"]["leaves"]
    assert _verified(back, ids) == before

    # The copy carries on as the same ledger: a new session recorded in it is signed and indexed there.
    with SqliteStore(back) as store:
        recorder = Recorder.create(store, session_id="after-copy", notary=Notary.from_env(every=2))
        for i in range(3):
            recorder.record_custom("step", {"i": i})
        recorder.finish("completed")
    code, out, err = cli(back, "verify", "--all")
    assert code == 0, out + err


def test_a_destination_holding_another_ledger_is_refused(
    signed_db: tuple[Path, list[str]], tmp_path: Path
) -> None:
    src, _ = signed_db
    other = tmp_path / "other.db"
    with SqliteStore(other) as store:
        Recorder.create(store, session_id="mine", notary=Notary.from_env()).record_custom("x", 1)
        own = store.ledger_id()
    code, out, err = cli(src, "db", "copy", str(src), str(other))
    assert code == 1 and "all verified" not in out
    assert len(err.strip().splitlines()) == 1
    assert "merging them would leave the copied checkpoints failing verification" in err
    with SqliteStore(src) as a:
        assert a.retirement() is None  # refused: the source stays live
    with SqliteStore(other) as store:
        assert store.ledger_id() == own
        assert [s.session_id for s in store.list_sessions()] == ["mine"]
        with (
            SqliteStore(src) as a,
            pytest.raises(StoreError, match="already holds sessions of ledger"),
        ):
            copy_store(a, store)
        with pytest.raises(StoreError, match="holds sessions of ledger"):
            store.adopt_ledger_id("ab" * 16)
    code, _, _ = cli(other, "verify", "--all")
    assert code == 0


def test_an_empty_destination_takes_the_ledger_id_and_a_second_copy_is_refused(
    signed_db: tuple[Path, list[str]], tmp_path: Path
) -> None:
    src, ids = signed_db
    dst = tmp_path / "dst.db"
    with SqliteStore(src) as a, SqliteStore(dst) as b:
        assert b.ledger_id() != a.ledger_id()
        report = copy_store(a, b)
        assert report.ledger_id == a.ledger_id() == b.ledger_id()
        assert report.verified == len(ids) and report.index_verified
        assert (report.retired, a.retirement() is not None, b.retirement()) == ("source", True, None)
        with pytest.raises(StoreError, match=r"is retired \(moved to .*dst\.db"):
            copy_store(a, b)
        b.adopt_ledger_id(a.ledger_id())  # the same id: a no-op, sessions or not


def test_a_source_failing_the_full_check_writes_nothing(
    signed_db: tuple[Path, list[str]], tmp_path: Path
) -> None:
    """The chains link, but a signed checkpoint was swapped: `verify` fails, so the copy must too."""
    src, _ = signed_db
    raw = sqlite3.connect(src)
    raw.execute("DROP TRIGGER IF EXISTS checkpoints_no_update")
    body = raw.execute("SELECT body FROM checkpoints ORDER BY checkpoint_id LIMIT 1").fetchone()[0]
    raw.execute(
        "UPDATE checkpoints SET body = ? WHERE checkpoint_id = (SELECT MAX(checkpoint_id) FROM checkpoints)",
        (body,),
    )
    raw.commit()
    raw.close()
    code, _, _ = cli(src, "verify", "--all")
    assert code == 1
    dst = tmp_path / "dst.db"
    with SqliteStore(src) as a, SqliteStore(dst) as b:
        own = b.ledger_id()
        with pytest.raises(CopyNotVerified, match="nothing copied"):
            copy_store(a, b)
        assert list(b.list_sessions()) == [] and b.index_size() == 0 and b.ledger_id() == own
        assert a.retirement() is None
    code, out, err = cli(src, "db", "copy", str(src), str(tmp_path / "dst2.db"))
    assert code == 1 and "all verified" not in out and "does not verify" in err


def test_db_copy_prints_a_repeated_note_once_with_its_count(
    signed_db: tuple[Path, list[str]], tmp_path: Path
) -> None:
    """A trusted witness that cannot be reached gives every session the same note (it names no session):
    `db copy` printed it once per session plus once for the index log; it prints it once, with the count.
    `--json` keeps the list as the report has it."""
    src, ids = signed_db
    other = Witness.open(tmp_path / "gone", log_keys=[])
    trust_witness(str(other.cosigner.verifier), url="http://127.0.0.1:9")  # nothing listens on port 9
    code, _, err = cli(src, "db", "copy", str(src), str(tmp_path / "dst.db"))
    assert code == 0, err
    notes = [line for line in err.splitlines() if line.startswith("note: ")]
    assert notes and len(notes) == len(set(notes)), notes
    unreachable = [n for n in notes if "unreachable" in n]
    assert len(unreachable) == 1 and unreachable[0].endswith(f" (x{len(ids) + 1})"), notes
