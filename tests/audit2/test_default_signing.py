"""Signing on by default where users work: ``import`` and ``demo`` sign and seal, ``verify`` is the full check."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from flightlog.cli import app
from flightlog.integrity.keys import key_dir
from flightlog.integrity.notary import Notary
from flightlog.integrity.witness import Cosigner
from flightlog.integrity.witness_client import trust_witness
from flightlog.recorder import Recorder
from flightlog.store import SqliteStore

from .conftest import SID, copy_db, record, step

runner = CliRunner()
SAMPLES = Path(__file__).resolve().parents[1] / "data" / "samples"


def run(db: Path, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["--db", str(db), *args])
    return result.exit_code, result.stdout, result.stderr


def test_import_signs_with_a_new_key_and_seals(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    assert not (key_dir() / "keys.json").exists()
    code, _, err = run(db, "import", str(SAMPLES / "codex"))
    assert code == 0, err
    assert (key_dir() / "keys.json").exists()  # the log key was created on first use
    code, out, _ = run(db, "verify", "--all", "--json")
    *rows, index = json.loads(out)  # open (a Codex rollout never says it ended), every event signed
    sessions = [r for r in rows if not r["session_id"].startswith("core_job:")]  # not the import's own run
    assert sessions and all(r["state"] == "open" and r["unanchored"] is None for r in sessions)
    assert all(r["ok"] and r["events"] == r["anchored"] for r in sessions)
    code, _, err = run(db, "import", "--seal", str(SAMPLES / "codex"))  # complete: record the ends, seal
    assert code == 0, err
    code, out, _ = run(db, "verify", "--all", "--json")
    assert code == 0
    *rows, index = json.loads(out)
    assert rows and all(r["state"] == "sealed" and r["unanchored"] is None for r in rows)  # jobs too
    sessions = [r for r in rows if not r["session_id"].startswith("core_job:")]
    assert all(r["retained"] == r["events"] == r["anchored"] for r in sessions)
    assert {"session_id", "ok", "events", "bytes", "head", "root", "divergences"} <= set(sessions[0])
    # one checkpoint per transcript session at each import (open, then sealed), and each folder import's
    # core_job run its own, each a leaf of the index log
    assert index["state"] == "index" and index["ok"] and index["leaves"] >= 2 * len(sessions) + 2
    code, out, _ = run(db, "verify", str(sessions[0]["session_id"]))
    assert code == 0 and "          sealed (" in out


def test_an_unsigned_session_verifies_as_open_with_its_whole_tail(
    tmp_path: Path, store: SqliteStore, db_path: Path
) -> None:
    rec = Recorder.create(store, session_id=SID)
    for i in range(3):
        rec.append(step(i))
    code, out, _ = run(db_path, "verify", SID)
    assert code == 0
    assert "open; 0 signed checkpoint(s), anchored through 0 event(s); unanchored tail: seqs 0..2" in out


def test_verify_catches_a_rollback_through_the_retained_head(
    tmp_path: Path, store: SqliteStore, notary: Notary, db_path: Path
) -> None:
    rec = record(store, notary, n=8)
    copy_db(db_path, tmp_path / "old.db")
    for i in range(8, 12):
        rec.append(step(i))
    code, out, _ = run(tmp_path / "old.db", "verify", SID)
    assert code == 1 and "seq 8: rollback (the retained head covers 12 events, the database holds 8" in out


def test_demo_signs_and_verify_all_passes(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    for _ in range(2):
        code, out, err = run(db, "demo")
        assert code == 0, out + err
    assert "sealed (" in out and "tampering detected at seq" in out
    code, out, _ = run(db, "verify", "--all")
    assert code == 0 and out.count("sealed (") >= 2 and "index log" in out


def test_verify_asks_trusted_witnesses_unless_offline(
    store: SqliteStore, notary: Notary, db_path: Path
) -> None:
    record(store, notary, n=4)
    trust_witness(str(Cosigner.generate().verifier), "http://127.0.0.1:9")
    code, out, _ = run(db_path, "verify", SID)
    assert code == 0 and "note: witness flightlog.local/witness not checked: unreachable" in out
    code, out, _ = run(db_path, "verify", SID, "--offline")
    assert code == 0 and "note:" not in out


def test_verify_all_lists_a_session_known_only_to_the_index(
    store: SqliteStore, notary: Notary, db_path: Path
) -> None:
    record(store, notary, n=9)
    record(store, notary, sid="keep", n=4)
    from .conftest import tamper

    tamper(
        db_path,
        f"DELETE FROM events WHERE session_id = '{SID}'",
        f"DELETE FROM checkpoints WHERE session_id = '{SID}'",
        f"DELETE FROM sessions WHERE session_id = '{SID}'",
    )
    shutil.rmtree(notary.heads.directory / store.ledger_id())  # the retained heads went too
    code, out, _ = run(db_path, "verify", "--all")
    assert code == 1
    assert (
        f"MISSING   {SID}  its checkpoint at size 8 is leaf 1 of the signed index log, "
        "but the database has no such session" in out
    )
