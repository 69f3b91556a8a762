"""Copies of a database that share its ledger id and retained heads (new-user pass H1, H2, L9/L15).

A copy made outside ``flightlog db copy`` (here ``sqlite3 .backup``) keeps the ledger id, so writing to it
moves the retained heads the original is checked against. The original is then refused (the check is
right), with a message saying what happened and what to do; a later write to the original must never move
the retained index head onto its fork (H2); ``db accept-restore`` is the deliberate way out, on record.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from flightlog.errors import LedgerIntegrityError
from flightlog.integrity.checkpoints import origin_for
from flightlog.integrity.heads import ACCEPT_FORK_STEP, ACCEPT_RESTORE_STEP, HEADS_AHEAD, HeadStore
from flightlog.integrity.keys import LogSigner
from flightlog.integrity.notary import Notary
from flightlog.ops.restore import RESTORE_LOG
from flightlog.store import SqliteStore

from .helpers import SPEC, backup, cli, head_files, suspended_run


def refused_for_heads(db: Path, *args: str, reason: str) -> str:
    """Run a command the retained heads make refuse: exit 1, the refusal said in a few lines of at most 100
    columns (it was one line of 700 characters): the session and what the heads mean first, then what was
    found (``reason``), then the next step, ``ls`` and ``pending``'s words (for a fork, ``--accept-fork``). Returns the lines joined."""
    code, out, err = cli(db, *args)
    assert code == 1, (code, out, err)
    lines = err.rstrip("\n").splitlines()
    assert lines[0].startswith(f"flightlog: error: refusing to act on session {args[1]}: "), err
    assert 5 <= len(lines) <= 14 and max(map(len, lines)) <= 100, err
    said = " ".join(line.strip() for line in lines)
    assert "found: at seq " in said and f": {reason}: " in said, err
    # a fork: plain accept-restore refuses it, so the step names --accept-fork and what it means
    step = ACCEPT_FORK_STEP if reason == "fork" else ACCEPT_RESTORE_STEP
    assert f"next: {step} (it records that decision" in said, err
    assert ("--accept-fork" in said) == (reason == "fork"), err
    return said


@pytest.fixture
def copies(tmp_path: Path) -> tuple[Path, Path, str]:
    """``a.db`` holding a run waiting on ``n1``; ``b.db`` its ``.backup`` copy, written to (``n1`` approved
    there), so the retained heads are ``b.db``'s."""
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    sid = suspended_run(a)
    backup(a, b)
    assert cli(b, "approve", sid, "n1", "--as", "bob")[0] == 0
    return a, b, sid


def test_a_new_run_in_the_original_never_moves_the_index_head_onto_its_fork(
    copies: tuple[Path, Path, str],
) -> None:
    a, _, _ = copies
    code, _, err = cli(a, "verify", "--all", "--offline")
    assert code == 1
    before = head_files()

    code, _, err = cli(a, "run", SPEC, "--goal", "another note", "--quiet")
    assert code == 1, err
    assert "index log leaf" in err and "rollback" in err, err
    assert head_files() == before  # the evidence stays
    code, out, _ = cli(a, "verify", "--all", "--offline")
    assert code == 1
    assert "DIVERGES  index log" in out and "retained index head" in out, out


def test_a_checkpoint_that_would_retain_a_fork_is_refused(tmp_path: Path) -> None:
    notary = Notary.for_signer(LogSigner.generate("test.example/log"), HeadStore(tmp_path / "heads"))
    lid = "ab" * 16
    ours = notary.sign(origin_for(lid, "s"), 8, bytes([1]) * 32, None)
    theirs = notary.sign(origin_for(lid, "s"), 4, bytes([2]) * 32, None)
    assert notary.heads.save(lid, "s", theirs, sealed=False)
    kept = notary.heads.path(lid, "s").read_bytes()
    with pytest.raises(LedgerIntegrityError, match=r"diverges at sequence 3: fork"):
        notary.heads.save(lid, "s", ours, sealed=False, roots={4: bytes([3]) * 32})
    assert not notary.heads.save(lid, "s", ours, sealed=False)  # no proof it extends it: left as it is
    assert notary.heads.path(lid, "s").read_bytes() == kept
    assert notary.heads.save(lid, "s", ours, sealed=False, roots={4: bytes([2]) * 32})

    index_ours = notary.sign("o/index", 3, bytes([1]) * 32, None)
    index_theirs = notary.sign("o/index", 3, bytes([2]) * 32, None)
    assert notary.heads.save_index(lid, index_theirs)
    with pytest.raises(LedgerIntegrityError, match=r"\(index log\) diverges at sequence 2: fork"):
        notary.heads.save_index(lid, index_ours)


def test_the_original_is_refused_with_what_it_means_then_accepted_on_record(
    copies: tuple[Path, Path, str],
) -> None:
    a, b, sid = copies
    said = refused_for_heads(a, "approve", sid, "n1", reason="rollback")
    for words in ("another copy of it", "restored from an older copy", "-wal", "flightlog db copy"):
        assert words in said, said
    assert "every session is refused" in said, said
    code, out, _ = cli(a, "verify", "--all", "--offline")
    assert code == 1 and "note: " in out and "flightlog db accept-restore" in out, out

    before = head_files()
    code, _, err = cli(a, "db", "accept-restore")
    assert code == 2 and "--reason" in err
    code, out, err = cli(
        a, "db", "accept-restore", "--reason", "a.db is production", "--as", "alice", "--json"
    )
    assert code == 0, err
    done = json.loads(out)
    assert {h["session_id"] for h in done["replaced"]} == {sid, None}
    assert done["log_session_id"] == RESTORE_LOG and done["reanchored"] == [sid]
    aside = Path(done["set_aside"])
    assert sorted(p.read_bytes() for p in aside.iterdir()) == sorted(
        data for name, data in before.items() if Path(name).name in {p.name for p in aside.iterdir()}
    )  # moved aside byte for byte, never deleted

    code, out, _ = cli(a, "show", RESTORE_LOG, "--json")
    assert code == 0
    [event] = [row for row in map(json.loads, out.splitlines()) if row["kind"] == "custom"]
    assert event["event"]["payload"]["reason"] == "a.db is production"
    assert event["event"]["payload"]["operator"] == "alice"
    assert cli(a, "verify", "--all", "--offline")[0] == 0
    assert cli(a, "approve", sid, "n1")[0] == 0
    code, out, _ = cli(a, "db", "accept-restore", "--reason", "again")
    assert code == 0 and "nothing to accept" in out

    refused_for_heads(b, "deny", sid, "n1", reason="fork")  # the copy is now the one behind


def test_accept_restore_refuses_a_tampered_database_and_moves_nothing(copies: tuple[Path, Path, str]) -> None:
    a, _, sid = copies
    raw = sqlite3.connect(a)
    raw.execute("DROP TRIGGER IF EXISTS events_no_update")
    raw.execute(
        "UPDATE events SET event = replace(event, 'take a note', 'take a NOTE') WHERE session_id = ? "
        "AND kind = 'run_started'",
        (sid,),
    )
    raw.commit()
    raw.close()
    before = head_files()
    code, _, err = cli(a, "db", "accept-restore", "--reason", "x")
    assert code == 1 and "hash_mismatch" in err and "consistent database only" in err, err
    assert head_files() == before
    assert not list(Path(os.environ["FLIGHTLOG_HEAD_DIR"]).rglob("replaced-*"))


def test_accept_restore_on_postgresql_after_a_dump_is_restored(tmp_path: Path) -> None:
    """The PostgreSQL case: a ``pg_dump`` of a schema taken before a decision, restored into another schema
    (same ledger id) while the original went on with the decision (the retained heads with it): the restored
    schema is refused as rolled back, then kept as the truth with ``db accept-restore`` (it verifies and
    acts again), and the original now reads as the fork."""
    import psycopg

    from postgres.server import backend_url, fresh_schema, schema_url

    pg_dump, psql = shutil.which("pg_dump"), shutil.which("psql")
    if pg_dump is None or psql is None:
        pytest.skip("needs pg_dump and psql on PATH (a dump restored is the PostgreSQL copy)")
    with backend_url("postgres", tmp_path / "unused.db", "copies") as a, fresh_schema("restored") as restored:
        sid = suspended_run(a)
        base, _, schema = a.partition("?schema=")
        dumped = subprocess.run([pg_dump, "--schema", schema, "--no-owner", base], capture_output=True)
        if dumped.returncode != 0:
            pytest.skip(f"pg_dump cannot dump this server: {dumped.stderr.decode(errors='replace')[-300:]}")
        assert cli(a, "approve", sid, "n1", "--as", "bob")[0] == 0  # the retained heads go past the dump
        script = dumped.stdout.replace(schema.encode(), restored.encode())  # a uuid-named schema: no clash
        subprocess.run([psql, "-q", "-v", "ON_ERROR_STOP=1", base], input=script, check=True)
        b = schema_url(restored)
        with psycopg.connect(base) as conn:  # the same ledger id: a copy, not a new ledger
            ids = {
                conn.execute(f"SELECT value FROM {name}.ledger_meta WHERE key = 'ledger_id'").fetchone()
                for name in (schema, restored)
            }
        [(ledger_id,)] = ids
        assert len(ledger_id) >= 8

        refused_for_heads(b, "approve", sid, "n1", reason="rollback")
        assert cli(b, "verify", "--all", "--offline")[0] == 1
        before = head_files()
        code, out, err = cli(b, "db", "accept-restore", "--reason", "restored last night's dump", "--json")
        assert code == 0, err
        assert f"warning: session {sid}: the replaced head covered " in err, err  # the decision's events
        done = json.loads(out)
        assert {h["session_id"] for h in done["replaced"]} == {sid, None}
        assert done["log_session_id"] == RESTORE_LOG and done["reanchored"] == [sid]
        aside = Path(done["set_aside"])
        assert {p.name: p.read_bytes() for p in aside.iterdir()} == {
            Path(name).name: data
            for name, data in before.items()
            if Path(name).name in {p.name for p in aside.iterdir()}
        }  # moved aside byte for byte
        assert cli(b, "verify", "--all", "--offline")[0] == 0
        assert cli(b, "approve", sid, "n1")[0] == 0
        code, out, _ = cli(b, "db", "accept-restore", "--reason", "again")
        assert code == 0 and "nothing to accept" in out

        refused_for_heads(a, "deny", sid, "n1", reason="fork")  # the original is now the one apart


def test_ls_and_pending_say_first_that_acting_on_this_store_is_refused(
    copies: tuple[Path, Path, str],
) -> None:
    """``ls`` and ``pending`` listed the waiting ``n1`` of a store whose retained heads are ahead, and only
    ``approve`` then said (in 700 characters on one line) that it refuses: now both say it first, in the
    refusal's words (what the heads mean, the next step), every line within 100 columns; a store whose heads
    agree, and this one once accepted, get no such lines."""
    a, b, sid = copies
    warning = "flightlog: warning: approve, deny, resume and abort refuse every session of this database: "
    for command in (["ls"], ["pending"], ["pending", "--json"]):
        code, out, err = cli(a, *command)
        assert code == 0, err
        assert sid in out  # still listed: the store is read as it is
        lines = err.splitlines()
        assert lines[0].startswith(warning) and max(map(len, lines)) <= 100, err
        said = " ".join(line.strip() for line in lines)
        assert HEADS_AHEAD in said and f"next: {ACCEPT_RESTORE_STEP} " in said, err
    code, out, _ = cli(a, "pending")
    assert out.startswith(f"{sid}  turn 2  n1  note(")  # what approve would refuse, said above it
    for command in (["ls"], ["pending"]):
        assert "warning" not in cli(b, *command)[2]  # b wrote last: its heads agree
    assert cli(a, "db", "accept-restore", "--reason", "a.db is production")[0] == 0
    for command in (["ls"], ["pending"]):
        assert "warning" not in cli(a, *command)[2]


def test_pending_names_a_session_whose_own_head_is_ahead_when_the_index_agrees(tmp_path: Path) -> None:
    """Only the waiting session's retained head covers more than the database holds (its file replaced by
    a head of a larger size; the index log's head agrees): ``pending`` names that session, and approve
    refuses it, as said."""
    db = tmp_path / "one.db"
    sid = suspended_run(db)
    with SqliteStore(db, read_only=True) as store:
        ledger_id = store.ledger_id()
    heads = HeadStore(Path(os.environ["FLIGHTLOG_HEAD_DIR"]))
    path = heads.path(ledger_id, sid)
    doc = json.loads(path.read_text())
    notary = Notary.for_signer(LogSigner.generate("test.example/log"), HeadStore(tmp_path / "other"))
    doc["checkpoint"] = notary.sign(origin_for(ledger_id, sid), doc["size"] + 5, bytes(32), None).note
    path.write_text(json.dumps(doc))
    code, out, err = cli(db, "pending")
    assert code == 0 and out.startswith(f"{sid}  turn 2  n1  note("), err
    said = " ".join(line.strip() for line in err.splitlines())
    assert said.startswith(f"flightlog: warning: approve, deny, resume and abort refuse session {sid}: "), err
    assert HEADS_AHEAD in said and f"next: {ACCEPT_RESTORE_STEP}" in said, err
    assert cli(db, "approve", sid, "n1")[0] == 1


def test_pending_names_accept_fork_for_a_head_of_the_stores_size_with_another_root(tmp_path: Path) -> None:
    """A retained head of the session's own size but another root is a fork, which plain ``db
    accept-restore`` refuses: ``pending`` names ``--accept-fork`` as the next step (a head merely ahead, in the
    test above, names plain accept-restore), and approve's refusal says the same."""
    db = tmp_path / "one.db"
    sid = suspended_run(db)
    with SqliteStore(db, read_only=True) as store:
        ledger_id = store.ledger_id()
        events = store.get_session(sid).events
    heads = HeadStore(Path(os.environ["FLIGHTLOG_HEAD_DIR"]))
    path = heads.path(ledger_id, sid)
    doc = json.loads(path.read_text())
    notary = Notary.for_signer(LogSigner.generate("test.example/log"), HeadStore(tmp_path / "other"))
    doc["checkpoint"] = notary.sign(origin_for(ledger_id, sid), events, bytes(32), None).note
    path.write_text(json.dumps(doc))
    code, out, err = cli(db, "pending")
    assert code == 0 and out.startswith(f"{sid}  turn 2  n1  note("), err
    lines = err.splitlines()
    said = " ".join(line.strip() for line in lines)
    assert max(map(len, lines)) <= 100, err
    assert said.startswith(f"flightlog: warning: approve, deny, resume and abort refuse session {sid}: "), err
    assert f"next: {ACCEPT_FORK_STEP}" in said and "without --accept-fork it refuses a fork" in said, err
