"""The ``flightlog`` command end to end on the real sample transcripts: outputs and exit codes."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
import rfc8785
from typer.testing import CliRunner

from flightlog import LedgerIntegrityError, Recorder, open_store
from flightlog.cli import app
from flightlog.cli.demo import tamper_one_byte
from flightlog.ledger import GENESIS, chain_hash

SAMPLES = Path(__file__).parent / "data" / "samples"

runner = CliRunner()


def run(db: Path, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["--db", str(db), *args])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def user_dirs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One key and head directory for the whole module: imports are signed with the user's log key, and
    every later command must find that key (the module-scoped ``imported`` runs before per-test fixtures)."""
    home = tmp_path_factory.mktemp("cli-user")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FLIGHTLOG_KEY_DIR", str(home / "keys"))
        patch.setenv("FLIGHTLOG_HEAD_DIR", str(home / "heads"))
        yield home


@pytest.fixture(autouse=True)
def _same_user(user_dirs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLIGHTLOG_KEY_DIR", str(user_dirs / "keys"))
    monkeypatch.setenv("FLIGHTLOG_HEAD_DIR", str(user_dirs / "heads"))


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory, user_dirs: Path) -> Path:
    db = tmp_path_factory.mktemp("cli") / "ledger.db"
    code, _, err = run(db, "import", str(SAMPLES / "claude-code"), str(SAMPLES / "codex"))
    assert code == 0, err
    return db


@pytest.fixture
def db_copy(imported: Path, tmp_path: Path) -> Path:
    target = tmp_path / "copy.db"
    src, dst = sqlite3.connect(imported), sqlite3.connect(target)
    src.backup(dst)
    src.close()
    dst.close()
    return target


def _sessions(db: Path) -> list[dict[str, object]]:
    """The transcripts' sessions (a folder import's own ``core_job`` run left out)."""
    code, out, _ = run(db, "ls", "--json")
    assert code == 0
    return [row for row in json.loads(out) if row["source"] != "core_job"]


def _jobs(db: Path) -> list[dict[str, object]]:
    code, out, _ = run(db, "ls", "--json")
    assert code == 0
    return [row for row in json.loads(out) if row["source"] == "core_job"]


def test_import_prints_a_line_per_file_and_every_session_verifies(imported: Path) -> None:
    rows = _sessions(imported)
    files = list((SAMPLES / "claude-code").glob("*.jsonl")) + list((SAMPLES / "codex").glob("*.jsonl"))
    top_level = [r for r in rows if not r["parent_session_id"]]
    assert files and len(top_level) == len(files)
    for row in rows:
        assert {"session_id", "task", "status", "events", "head", "created_at"} <= set(row)
        assert isinstance(row["events"], int) and row["events"] > 0
        assert len(str(row["head"])) == 64
    code, out, _ = run(imported, "verify", "--all", "--record")
    assert code == 0, out
    assert out.count("ok") >= len(rows)
    # core_job runs, newest first as ls lists: this verify sweep (recorded once done), then the folder import
    jobs = _jobs(imported)
    assert [(j["status"], str(j["session_id"]).split(":")[1]) for j in jobs] == [
        ("completed", "verify"),
        ("completed", "import"),
    ]


def test_reimport_records_nothing_new(imported: Path) -> None:
    before = _sessions(imported)
    code, out, _ = run(imported, "import", str(SAMPLES / "codex"))
    assert code == 0
    assert "already imported" in out
    assert _sessions(imported) == before


def test_import_json_reports_warnings_with_line_numbers(tmp_path: Path) -> None:
    code, out, _ = run(
        tmp_path / "x.db",
        "import",
        "--json",
        str(SAMPLES / "codex" / "claudecodelog_malformed_rollout-66666666.jsonl"),
    )
    assert code == 0
    [result] = json.loads(out)
    assert result["format"] == "codex"
    assert any(":" in w and "malformed" in w for w in result["warnings"])


def test_import_keeps_the_heap_out_of_full_collections_only_while_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gc

    import flightlog.importers as importers

    seen: list[int] = []
    real = importers.import_file

    def spy(*args: object, **kwargs: object) -> object:
        seen.append(gc.get_freeze_count())
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(importers, "import_file", spy)
    before = gc.get_freeze_count()
    code, out, _ = run(tmp_path / "x.db", "import", str(SAMPLES / "codex"))
    assert code == 0, out
    assert seen and all(count > before for count in seen)  # what was loaded is frozen during the import
    assert gc.get_freeze_count() == before  # and given back: the CLI leaves its host's collector as it was


def test_tampered_event_makes_verify_exit_1_naming_the_seq(db_copy: Path) -> None:
    sid = str(_sessions(db_copy)[0]["session_id"])
    tamper_one_byte(db_copy, sid, 3)
    code, out, _ = run(db_copy, "verify", sid)
    assert code == 1
    assert "seq 3: hash_mismatch" in out
    code, out, _ = run(db_copy, "verify", "--all", "--json")
    assert code == 1
    bad = [r for r in json.loads(out) if not r["ok"]]
    assert [r["session_id"] for r in bad] == [sid]
    divergences = bad[0]["divergences"]
    assert {d["seq"] for d in divergences if d["reason"] == "hash_mismatch"} == {3}
    # the imported session is signed and sealed: every signed head and the seal covering seq 3 disagree too
    assert {d["reason"] for d in divergences if d["seq"] != 3} <= {"checkpoint_mismatch", "fork", "bad_seal"}
    assert all(d["seq"] > 3 for d in divergences if d["seq"] != 3)
    store = open_store(db_copy)
    try:
        with pytest.raises(LedgerIntegrityError) as info:
            Recorder.attach(store, sid)
        assert info.value.seq == 3
    finally:
        store.close()


def test_deleted_row_is_reported_as_a_gap(db_copy: Path) -> None:
    sid = str(_sessions(db_copy)[0]["session_id"])
    conn = sqlite3.connect(db_copy)
    conn.execute("DROP TRIGGER events_no_delete")
    conn.execute("DELETE FROM events WHERE session_id = ? AND seq = 2", (sid,))
    conn.commit()
    conn.close()
    code, out, _ = run(db_copy, "verify", sid)
    assert code == 1
    assert "seq 2: gap" in out
    assert "seq 3: broken_link" in out


def test_export_lines_embed_the_stored_bytes_and_rebuild_the_chain(imported: Path, tmp_path: Path) -> None:
    sid = str(_sessions(imported)[0]["session_id"])
    target = tmp_path / "out.jsonl"
    code, _, err = run(imported, "export", sid, "-o", str(target))
    assert code == 0, err
    store = open_store(imported, read_only=True)
    try:
        stored = {row.seq: row.event_bytes for row in store.read_events(sid)}
    finally:
        store.close()
    prev = GENESIS
    lines = target.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(stored)
    for line in lines:
        record = json.loads(line)
        assert set(record) == {"seq", "prev_hash", "hash", "event"}
        data = rfc8785.dumps(record["event"])
        assert data == stored[record["seq"]]
        assert record["prev_hash"] == prev
        assert chain_hash(prev, record["seq"], data) == record["hash"]
        prev = record["hash"]


def test_replay_at_and_json(imported: Path) -> None:
    claude = next(r for r in _sessions(imported) if str(r["session_id"]).startswith("claude-code:"))
    sid = str(claude["session_id"])
    code, out, _ = run(imported, "replay", sid, "--json")
    assert code == 0
    full = json.loads(out)["messages"]
    # a compacted session (the rewind-then-compact sample) starts from its summary, else from the prompt
    assert full and full[0]["role"] in ("user", "system")
    code, out, _ = run(imported, "replay", sid, "--at", "1", "--json")
    assert code == 0
    assert json.loads(out)["messages"][0]["role"] == "user"
    code, out, _ = run(imported, "replay", sid)
    assert code == 0 and f"[0] {full[0]['role']}" in out


def test_show_prints_a_narrated_timeline(imported: Path) -> None:
    sid = str(_sessions(imported)[0]["session_id"])
    code, out, _ = run(imported, "show", sid[:20])
    assert code == 0
    assert "import_source" in out
    assert "run_started" in out


def test_prefix_after_format_part_resolves(imported: Path) -> None:
    sid = next(str(r["session_id"]) for r in _sessions(imported) if str(r["session_id"]).startswith("codex:"))
    prefix = sid.split(":", 1)[1][:13]
    code, out, _ = run(imported, "verify", prefix)
    assert code == 0 and sid in out


@pytest.mark.parametrize(
    "args",
    [
        ("verify", "no-such-session"),
        ("replay", "no-such-session"),
        ("verify",),
        ("verify", "x", "--all"),
        ("import", "/no/such/file.jsonl"),
        ("import", "--format", "bogus", str(SAMPLES / "codex")),
        ("replay", "x", "--at", "-1"),
        ("db", "repair"),
        ("no-such-command",),
    ],
)
def test_usage_mistakes_exit_2_with_one_line(imported: Path, args: tuple[str, ...]) -> None:
    code, out, err = run(imported, *args)
    assert code == 2, (out, err)
    assert err.strip(), "an error message on stderr"


def test_ambiguous_prefix_exits_2_listing_matches(imported: Path) -> None:
    code, _, err = run(imported, "verify", "c")
    assert code == 2
    assert "ambiguous" in err
    assert len(err.strip().splitlines()) == 1


def test_ambiguous_prefix_says_when_it_lists_only_some_matches(imported: Path) -> None:
    """Eight sessions start with ``c`` (four Claude Code files, three Codex sessions, the import's core job):
    the line names five of them and says there are more; the four Claude Code sessions are all named, with no
    "and more" and without their sub-agent and background task (each its parent's own stream)."""
    code, _, err = run(imported, "show", "c")
    assert code == 2
    [line] = err.strip().splitlines()
    assert line.count(", ") == 5  # five names, then ", and more"
    assert line.endswith(", and more (give a longer prefix)")
    code, _, err = run(imported, "show", "claude-code")
    assert code == 2
    [line] = err.strip().splitlines()
    assert line.count("claude-code:") == 4
    assert ":agent:" not in line and ":task:" not in line and "and more" not in line
    code, _, err = run(imported, "show", "codex")
    assert code == 2
    [line] = err.strip().splitlines()
    assert line.count("codex:") == 3
    assert "and more" not in line


def test_a_prefix_of_a_session_with_a_sub_agent_resolves_to_it(imported: Path) -> None:
    """The sample with a sub-agent: its id's first characters match its ``:agent:`` stream too, and name the
    parent; a prefix reaching into the stream's own id names the stream."""
    parent = "claude-code:491e126e-1e71-469c-ade2-fcc8af567c74"
    for prefix, session in (("491e", parent), (parent[12:] + ":agent", parent + ":agent:afb92ff")):
        code, out, err = run(imported, "show", prefix, "--json")
        assert code == 0, err
        first = json.loads(out.splitlines()[0])["event"]  # the import's record names the source key
        assert first["payload"]["native_key"] == session


def test_reading_a_missing_database_is_a_usage_error(tmp_path: Path) -> None:
    code, _, err = run(tmp_path / "nope.db", "ls")
    assert code == 2
    assert err.startswith("flightlog: error:")
    assert not (tmp_path / "nope.db").exists()


def test_demo_runs_end_to_end_twice(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    for _ in range(2):
        code, out, err = run(db, "demo")
        assert code == 0, out + err
        assert "tampering detected at seq" in out
    assert "already imported" in out
    code, _, _ = run(db, "verify", "--all")
    assert code == 0, "the demo never touches the user's database"


def test_demo_help_names_every_step_where_it_records_and_why_its_imports_are_sealed(tmp_path: Path) -> None:
    """``demo --help`` describes all eleven steps, says which database the sessions go to (and how to keep
    them apart), and gives the event counts a user comparing with ``flightlog import`` sees: sealed (the
    demo passes --seal) and plain, as the bundled transcripts give them."""
    from flightlog.cli.demo import example_transcripts

    result = runner.invoke(app, ["demo", "--help"])
    text = " ".join(result.stdout.split())
    assert result.exit_code == 0
    for number in range(1, 12):
        assert f" {number}. " in text, number
    assert "--db /tmp/demo.db demo" in text and "$FLIGHTLOG_DB" in text and "with --seal" in text
    counts = {}
    for flags in (["--seal"], []):  # as the demo imports them (signed, sealed), and a plain import
        code, out, err = run(tmp_path / f"{len(flags)}.db", "import", "--json", *flags,
                             *map(str, example_transcripts()))  # fmt: skip
        assert code == 0, err
        counts[bool(flags)] = sorted((r["events"] for r in json.loads(out)), reverse=True)
    sealed, plain = counts[True], counts[False]
    assert f"({sealed[0]} and {sealed[1]} events)" in text
    assert f"({plain[0]} and {plain[1]} events, interrupted, not sealed)" in text


def test_every_command_has_help() -> None:
    for args in (
        ["--help"],
        ["demo", "--help"],
        ["import", "--help"],
        ["ls", "--help"],
        ["show", "--help"],
        ["replay", "--help"],
        ["verify", "--help"],
        ["export", "--help"],
        ["db", "repair", "--help"],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, args
        assert "Usage" in result.stdout


# ─── db repair ────────────────────────────────────────────────────────────────────────────────


def _poison_wal(db: Path, tmp_path: Path) -> bytes:
    """Give ``db`` a WAL holding valid frames from a different database: a real poisoned WAL."""
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("CREATE TABLE junk (x BLOB)")
    conn.execute("INSERT INTO junk VALUES (randomblob(20000))")
    conn.commit()
    holder = sqlite3.connect(other)  # keeps the WAL from being checkpointed away on close
    holder.execute("SELECT 1").fetchone()
    wal = Path(f"{other}-wal").read_bytes()
    holder.close()
    conn.close()
    Path(f"{db}-wal").write_bytes(wal)
    return wal


def test_db_repair_quarantines_a_poisoned_wal_and_keeps_the_ledger(db_copy: Path, tmp_path: Path) -> None:
    wal = _poison_wal(db_copy, tmp_path)
    code, out, err = run(db_copy, "db", "repair", "--discard-wal")
    assert code == 0, out + err
    assert hashlib.sha256(wal).hexdigest() in out
    backups = list(db_copy.parent.glob("copy.db.repair-*"))
    assert len(backups) == 1
    report = json.loads((backups[0] / "repair.json").read_text())
    assert report["wal_size_bytes"] == len(wal)
    assert report["wal_sha256"] == hashlib.sha256(wal).hexdigest()
    assert (backups[0] / "quarantine" / "copy.db-wal").read_bytes() == wal
    assert (backups[0] / "copy.db-wal").read_bytes() == wal
    code, _, _ = run(db_copy, "verify", "--all")
    assert code == 0


def test_db_repair_restores_originals_when_verification_fails(db_copy: Path, tmp_path: Path) -> None:
    sid = str(_sessions(db_copy)[0]["session_id"])
    tamper_one_byte(db_copy, sid, 1)
    wal = _poison_wal(db_copy, tmp_path)  # a WAL to set aside, so the repair runs and verifies
    original = db_copy.read_bytes()
    code, _, err = run(db_copy, "db", "repair", "--discard-wal")
    assert code == 1
    assert Path(f"{db_copy}-wal").read_bytes() == wal
    assert "restored" in err
    assert db_copy.read_bytes() == original
    assert list(db_copy.parent.glob("copy.db.repair-*"))  # backups kept, never deleted


@pytest.mark.parametrize("wal", [None, b""], ids=["no-wal", "empty-wal"])
def test_db_repair_with_nothing_to_repair_writes_nothing(db_copy: Path, wal: bytes | None) -> None:
    """No WAL frame to set aside: it wrote a backup folder, a repair.json and (by its read-only check) a
    ``-shm`` anyway; now it says so and leaves the folder as it was."""
    if wal is not None:
        Path(f"{db_copy}-wal").write_bytes(wal)
    before = {p.name: p.read_bytes() for p in db_copy.parent.iterdir() if p.is_file()}
    code, out, err = run(db_copy, "db", "repair", "--discard-wal")
    assert code == 0, err
    held = "no WAL" if wal is None else "an empty WAL"
    assert out.startswith(
        f"nothing to repair: {db_copy} has {held}, so no commit to set aside; nothing written"
    )
    assert {p.name: p.read_bytes() for p in db_copy.parent.iterdir()} == before


def _unchecked_wal(db: Path, sql: str, *params: object) -> None:
    """Commit ``sql`` to ``db`` and leave it only in the WAL (no checkpoint folds it into the file)."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA wal_autocheckpoint=0")
    reader = sqlite3.connect(db.resolve().as_uri() + "?mode=ro", uri=True)  # a read-only last close
    reader.execute("SELECT 1 FROM sessions").fetchone()  # cannot checkpoint: the WAL stays
    conn.execute(sql, params)
    conn.close()
    reader.close()
    assert Path(f"{db}-wal").stat().st_size > 0


def test_db_repair_refuses_a_healthy_wal_unless_forced(db_copy: Path) -> None:
    """A WAL SQLite reads and that passes integrity_check is not poisoned, only not yet checkpointed:
    discarding it would lose committed transactions, so it is refused (nothing written) unless --force."""
    _unchecked_wal(db_copy, "CREATE TABLE later (x)")
    wal = Path(f"{db_copy}-wal").read_bytes()
    before = sorted(p.name for p in db_copy.parent.iterdir())
    code, out, err = run(db_copy, "db", "repair", "--discard-wal")
    assert code == 2, out + err
    message = " ".join(err.split())
    assert "the WAL is not poisoned (SQLite reads it, integrity_check ok)" in message
    found = re.search(
        r"would lose (\d+) committed frames? changing (\d+) pages? of the database file", message
    )
    assert found and int(found.group(1)) >= 1 and int(found.group(2)) >= 1, message
    assert "--force discards them anyway" in message and "nothing written" in message
    assert sorted(p.name for p in db_copy.parent.iterdir()) == before  # no backup folder either
    assert Path(f"{db_copy}-wal").read_bytes() == wal

    code, out, err = run(db_copy, "db", "repair", "--discard-wal", "--force")
    assert code == 0, out + err
    assert "discarded" in err and "committed frame" in err
    assert "accept-restore" not in err  # no retained head covers a commit it discarded
    [backup] = db_copy.parent.glob("copy.db.repair-*")
    assert (backup / "quarantine" / "copy.db-wal").read_bytes() == wal
    report = json.loads((backup / "repair.json").read_text())
    assert report["wal"]["readable"] is True and report["wal"]["changed_pages"] >= 1


def test_db_repair_of_a_checkpointed_wal_loses_nothing_and_needs_no_force(db_copy: Path) -> None:
    """Frames already copied into the database file (a checkpoint that could not truncate the WAL) are
    not lost by discarding: no --force needed."""
    _checkpointed_wal(db_copy)
    code, out, err = run(db_copy, "db", "repair", "--discard-wal")
    assert code == 0, out + err
    assert "quarantined" in out and "warning" not in err.lower()


def _checkpointed_wal(db: Path) -> None:
    """Leave ``db`` a WAL whose committed frames are all in the database file (a checkpoint that could not
    truncate it: a reader held it)."""
    _unchecked_wal(db, "CREATE TABLE later (x)")
    conn = sqlite3.connect(db, isolation_level=None)
    reader = sqlite3.connect(db.resolve().as_uri() + "?mode=ro", uri=True)
    reader.execute("SELECT 1 FROM sessions").fetchone()
    _busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()  # no truncation
    assert frames == copied > 0
    conn.close()
    reader.close()
    assert Path(f"{db}-wal").stat().st_size > 0


@pytest.mark.parametrize("checkpointed", [False, True], ids=["commits-in-wal", "checkpointed"])
def test_db_repair_inspects_the_wal_on_one_copy_and_verifies_the_ledger_once(
    db_copy: Path, monkeypatch: pytest.MonkeyPatch, checkpointed: bool
) -> None:
    """``inspect_wal`` copies the database once into its scratch folder (it copied it twice: 2x the
    database's size of scratch disk), and verifies the ledger read with the WAL only when the WAL changes
    pages: one that changes none adds nothing, and the repair verifies that same file after the
    quarantine (it was verified twice). What it finds is unchanged: the frames, the pages they change."""
    from flightlog.ops import repair

    if checkpointed:
        _checkpointed_wal(db_copy)
    else:
        _unchecked_wal(db_copy, "CREATE TABLE later (x)")
    copies: list[str] = []
    verified: list[str] = []
    real_copy, real_verify = shutil.copyfile, repair.verify_session

    def copyfile(src: str | Path, dst: str | Path, **options: bool) -> object:
        if "flightlog-repair-" in str(dst):  # into inspect_wal's scratch folder (not the backups)
            copies.append(Path(src).name)
        return real_copy(src, dst, **options)

    def verify_session(store: object, session_id: str, **options: object) -> object:
        verified.append(session_id)
        return real_verify(store, session_id, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(repair.shutil, "copyfile", copyfile)
    monkeypatch.setattr(repair, "verify_session", verify_session)
    found = repair.inspect_wal(db_copy)
    assert sorted(copies) == ["copy.db", "copy.db-wal"]
    assert found.readable and found.integrity_check == "ok" and found.frames >= 1
    assert (found.changed_pages == 0) is checkpointed
    assert (verified == []) is checkpointed
    verified.clear()
    copies.clear()
    report = repair.repair_discard_wal(db_copy, discard_wal=True, force=True)
    assert report.sessions_verified >= 9 and sorted(copies) == ["copy.db", "copy.db-wal"]
    assert len(verified) == (1 if checkpointed else 2) * report.sessions_verified


def test_db_repair_refuses_a_poisoned_wal_holding_a_retirement_record(db_copy: Path, tmp_path: Path) -> None:
    """SQLite cannot vouch for a poisoned WAL's pages, so the retirement record's origin line is looked for
    in its raw bytes: dropping it would make a retired store writable again."""
    origin = b"flightlog.local/0123456789abcdef/_/retired\nstate moved\n"
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("CREATE TABLE junk (x BLOB)")
    conn.execute("INSERT INTO junk VALUES (?)", (origin * 40,))
    conn.commit()
    holder = sqlite3.connect(other)
    holder.execute("SELECT 1").fetchone()
    Path(f"{db_copy}-wal").write_bytes(Path(f"{other}-wal").read_bytes())
    holder.close()
    conn.close()
    code, out, err = run(db_copy, "db", "repair", "--discard-wal")
    assert code == 2, out + err
    message = " ".join(err.split())
    assert "the WAL holds the retirement record `flightlog db copy` wrote" in message
    assert "writable again" in message and "--force discards it anyway" in message
    assert not list(db_copy.parent.glob("copy.db.repair-*"))
    code, out, err = run(db_copy, "db", "repair", "--discard-wal", "--force")
    assert code == 0, out + err
    assert "WARNING: the discarded WAL held this store's retirement record" in " ".join(err.split())


def test_db_repair_that_drops_retained_commits_says_accept_restore_is_next(tmp_path: Path) -> None:
    """Commits only in the WAL, signed and retained (the heads outside the database moved with them), then
    discarded: the database now reads as rolled back and is refused until ``db accept-restore``; the
    repair's output says so in one line (it said nothing of it), and the way out it names works."""
    db = tmp_path / "ledger.db"
    assert run(db, "import", str(SAMPLES / "claude-code" / "spotter_short.jsonl"))[0] == 0
    reader = sqlite3.connect(db.resolve().as_uri() + "?mode=ro", uri=True)  # a read-only last close
    reader.execute("SELECT 1 FROM sessions").fetchone()  # keeps the WAL from being checkpointed
    code, _, err = run(db, "import", str(SAMPLES / "claude-code" / "spotter_tool_heavy.jsonl"))
    reader.close()
    assert code == 0, err
    assert Path(f"{db}-wal").stat().st_size > 0
    code, out, err = run(db, "db", "repair", "--discard-wal", "--force")
    assert code == 0, out + err
    [line] = [line for line in err.splitlines() if "accept-restore" in line]
    assert line.startswith("flightlog: warning: the retained heads cover discarded commits (session "), line
    assert " and the index log behind them): every session is refused as rolled back" in line, line
    assert "`flightlog db accept-restore --reason TEXT` keeps this database as the truth" in line, line
    assert run(db, "verify", "--all", "--offline")[0] == 1  # what the line warns of
    code, _, err = run(db, "db", "accept-restore", "--reason", "the WAL was poisoned", "--as", "ops")
    assert code == 0, err
    assert run(db, "verify", "--all", "--offline")[0] == 0


def test_db_repair_of_missing_file_fails_cleanly(tmp_path: Path) -> None:
    code, _, err = run(tmp_path / "absent.db", "db", "repair", "--discard-wal")
    assert code == 2
    assert "no such database file" in err
    assert not list(tmp_path.iterdir())


def test_one_bad_file_does_not_stop_the_others(tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "a-empty.jsonl").write_bytes(b"")
    shutil.copy(
        SAMPLES / "codex" / "localpush_rollout-2026-02-23T20-34-25-019c8bfe.jsonl", folder / "b.jsonl"
    )
    (folder / "c-bin.jsonl").write_bytes(bytes(range(256)) * 10)
    shutil.copy(SAMPLES / "claude-code" / "spotter_short.jsonl", folder / "d.jsonl")
    db = tmp_path / "mixed.db"
    code, out, err = run(db, "import", "--json", str(folder))
    assert code == 1, err
    results = json.loads(out)
    assert [Path(r["path"]).name for r in results] == ["a-empty.jsonl", "b.jsonl", "c-bin.jsonl", "d.jsonl"]
    assert "error" in results[0] and "error" in results[2]
    assert results[1]["session_ids"] and results[3]["session_ids"]
    assert "a-empty.jsonl" in err and "c-bin.jsonl" in err
    assert len(_sessions(db)) == 2
    (job,) = _jobs(db)  # the folder import is a core_job run, failed: two files could not be imported
    assert job["status"] == "failed" and job["task"] == "import 4 transcripts from 1 path"


def test_a_concurrent_import_of_the_same_file_reports_a_duplicate(tmp_path: Path) -> None:
    from flightlog.importers import import_file
    from flightlog.store import ImportRecord, SqliteStore

    path = SAMPLES / "codex" / "localpush_rollout-2026-02-23T20-34-25-019c8bfe.jsonl"
    db = tmp_path / "race.db"
    with SqliteStore(db) as first, SqliteStore(db) as second:
        real = second.find_import
        calls: list[str] = []

        def racing(sha: str) -> ImportRecord | None:
            calls.append(sha)
            if len(calls) == 1:  # our dedup check ran; the other process commits the same file right after
                import_file(first, path)
                return None
            return real(sha)

        second.find_import = racing  # type: ignore[method-assign]
        result = import_file(second, path)
        assert result.duplicate
        assert len(list(second.list_sessions())) == 1


def test_replay_check_of_an_imported_transcript_says_there_is_nothing_to_check(imported: Path) -> None:
    """An imported transcript records no model request digests: `--check` says so (exit 0) rather than
    "0 model requests rebuilt; all reproduce"."""
    code, out, err = run(imported, "replay", "55604662", "--check")
    assert code == 0, err
    assert "no prompt_program_invoked recorded" in out and "nothing to check" in out
    assert "all reproduce" not in out


def test_export_otlp_content_without_otlp_is_a_usage_mistake(imported: Path) -> None:
    """`--otlp-content` only shapes what `--otlp` sends: alone it used to print the JSONL export and exit
    0, the flag silently ignored."""
    code, out, err = run(imported, "export", "55604662", "--otlp-content")
    assert code == 2, err
    assert out == ""
    [line] = err.strip().splitlines()
    assert line.startswith("flightlog: error:") and "--otlp-content goes with --otlp URL" in line


def test_ls_columns_stay_aligned_with_a_long_imported_status(tmp_path: Path) -> None:
    """A mini-swe-agent trajectory's status is its exit status ("InternalServerError", 19 characters):
    the status column widens to it instead of pushing that row's events, head and task out of line. Ids
    shorter than the "session" header keep the header in line too."""
    db = tmp_path / "ls.db"
    with open_store(db) as store:
        Recorder.create(store, session_id="short", task="a")
        Recorder.create(store, session_id="long", task="b")
        store.set_session_status("long", "InternalServerError")
    code, out, err = run(db, "ls")
    assert code == 0, err
    header, *rows = out.splitlines()
    assert len(rows) == 2
    created, events_end = header.index("created (UTC)"), header.index("events") + len("events")
    for row in rows:
        assert row[events_end - 1] == "0" and row[events_end] == " ", row  # 0 events, right-aligned
        assert row[created - 2 : created] == "  " and row[created].isdigit(), row  # the created time
