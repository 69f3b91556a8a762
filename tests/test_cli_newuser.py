"""What a new user hit following the README from a fresh clone (session 18, task nu): each test pins the
exit code and the words a user reads."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console
from typer.testing import CliRunner

from flightlog.cli import app
from flightlog.cli.demo import _tamper_step, tamper_one_byte
from flightlog.importers import describe_difference
from flightlog.integrity.notary import Notary
from flightlog.store import SqliteStore

runner = CliRunner()
SAMPLES = Path(__file__).parent / "data" / "samples"


def invoke(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def _ledger(tmp_path: Path) -> Path:
    db = tmp_path / "src.db"
    code, _, err = invoke("--db", str(db), "import", str(SAMPLES / "codex"))
    assert code == 0, err
    return db


# ─── 1. db copy into a directory that does not exist ───────────────────────────────────────────


def test_db_copy_into_a_missing_directory_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    """It used to create the directory, copy, and retire the source ("moved to /nonexist/c.db")."""
    src = _ledger(tmp_path)
    dst = tmp_path / "nonexist" / "c.db"
    code, out, err = invoke("db", "copy", str(src), str(dst))
    assert code == 2, err
    assert err.strip() == (
        f"flightlog: error: no directory {dst.parent} for DST {dst} (a typo? create the directory first to "
        "start a new database there)"
    )
    assert out == "" and not dst.parent.exists()
    code, _, err = invoke("--db", str(src), "import", str(SAMPLES / "codex"))  # the source is not retired
    assert code == 0 and "moved to" not in err, err


def test_db_copy_from_a_missing_source_is_refused(tmp_path: Path) -> None:
    src, dst = tmp_path / "typo.db", tmp_path / "c.db"
    code, _, err = invoke("db", "copy", str(src), str(dst))
    assert code == 2 and err.startswith(f"flightlog: error: no database at {src} yet"), err
    assert not src.exists() and not dst.exists()


# ─── 4. demo step 5: attach's refusal, one short line ─────────────────────────────────────────


def test_demo_tamper_step_says_attach_refused_in_one_short_line(tmp_path: Path) -> None:
    """It printed the whole ~900-character refusal (restored-copy advice, --accept-fork) under the verify
    lines; now the first divergent seq, its reason and the count of the others."""
    db = _ledger(tmp_path)
    screen = io.StringIO()
    with SqliteStore(db) as store:
        sid = str(next(iter(store.list_sessions())).session_id)
        code = _tamper_step(store, sid, Console(file=screen, width=1000), Notary.from_env())
    assert code == 0
    lines = screen.getvalue().splitlines()
    (attach,) = [line for line in lines if line.startswith("   attach:")]
    first = next(line for line in lines if line.startswith("   verify: seq "))
    seq = first.split()[2].rstrip(":")
    assert attach.startswith(
        f"   attach: refused at seq {seq}: hash_mismatch: stored hash does not match the stored bytes"
    ), attach
    assert attach.endswith("; a tampered ledger is never resumed") and len(attach) <= 160, attach
    assert "accept-fork" not in attach and "accept-restore" not in attach


# ─── 5. ls --status with a word no status is ──────────────────────────────────────────────────


def test_ls_status_with_an_unknown_word_is_a_usage_error_listing_the_statuses(tmp_path: Path) -> None:
    db = _ledger(tmp_path)
    code, out, err = invoke("--db", str(db), "ls", "--status", "bogus")
    assert (code, out) == (2, ""), err
    said = " ".join(err.split())
    assert said.startswith(
        "flightlog: error: Invalid value for --status: 'bogus' is not a status (ls prints: "
    )
    assert "completed, failed, running, suspended, paused, cancelled, interrupted, queued" in said
    code, out, err = invoke("--db", str(db), "ls", "--status", "failed")  # a status no session has: a note
    assert (code, out) == (0, "") and "no session has status 'failed'" in err
    code, out, err = invoke("--db", str(db), "ls", "--status", "aborted")  # a stored spelling
    assert code == 0, err


# ─── 7. a changed transcript: what differs, and where in the file ─────────────────────────────


def test_a_changed_transcript_is_refused_naming_the_field_and_the_source_line(tmp_path: Path) -> None:
    """It said "(recorded custom, read now custom)": neither what changed nor where."""
    source = tmp_path / "t.jsonl"
    source.write_bytes((SAMPLES / "codex" / "claudecodelog_malformed_rollout-66666666.jsonl").read_bytes())
    db = tmp_path / "a.db"
    assert invoke("--db", str(db), "import", str(source))[0] == 0
    source.write_text(source.read_text().replace("{synthetic malformed json", "{synthetic malformed JSON"))
    code, _, err = invoke("--db", str(db), "import", str(source))
    assert code == 1
    said = " ".join(err.split())
    assert said.startswith(
        f"flightlog: error: {source}:3: codex:66666666-6666-4666-8666-666666666666 differs from this source "
        'at seq 3 (custom codex.unparsed_line, payload.text: recorded "{synthetic malformed json", read now '
        '"{synthetic malformed JSON"): the source changed what an earlier import recorded'
    ), said


def test_a_difference_in_kind_names_both_kinds_and_long_values_are_cut() -> None:
    recorded = b'{"custom_kind":"codex.session_meta","kind":"custom","payload":{}}'
    assert describe_difference(recorded, b'{"goal":"g","kind":"run_started"}') == (
        "recorded custom codex.session_meta, read now run_started"
    )
    long = '{"kind":"custom","custom_kind":"k","payload":{"text":"' + "x" * 100 + '"}}'
    said = describe_difference(long.encode(), b'{"kind":"custom","custom_kind":"k","payload":{}}')
    assert said == 'custom k, payload.text: recorded "' + "x" * 38 + "…, read now nothing"


# ─── 8. export --bundle into a directory that holds files ──────────────────────────────────────


def test_export_bundle_into_a_non_empty_directory_is_a_usage_error(tmp_path: Path) -> None:
    db = _ledger(tmp_path)
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine\n")
    code, out, err = invoke("--db", str(db), "export", "codex:6", "--bundle", str(taken))
    assert (code, out) == (2, ""), err
    assert " ".join(err.split()) == (
        f"flightlog: error: --bundle {taken} is not empty: a bundle is written into a directory of its own "
        "(name a new directory, which export creates, or an empty one)"
    )
    assert [p.name for p in taken.iterdir()] == ["notes.txt"]
    code, _, err = invoke("--db", str(db), "export", "codex:6", "--bundle", str(tmp_path / "new"))
    assert code == 0 and (tmp_path / "new" / "entries.jsonl").exists(), err


# ─── 9. import -f FORMAT of a file of another format ──────────────────────────────────────────


def test_import_with_the_wrong_format_creates_no_database_and_suggests_auto(tmp_path: Path) -> None:
    """It said "created a new database at f.db", then refused the file (exit 1): an empty ledger stayed."""
    source = SAMPLES / "codex" / "localpush_rollout-2026-02-23T20-34-25-019c8bfe.jsonl"
    db = tmp_path / "f.db"
    code, out, err = invoke("--db", str(db), "import", "-f", "gemini-cli", str(source))
    assert (code, out) == (1, ""), err
    assert " ".join(err.split()) == (
        f"flightlog: error: {source}: not a gemini-cli transcript: the gemini-cli importer recognises nothing "
        "of it (it reads as codex: `-f auto` (the default) imports it)"
    )
    assert not db.exists()
    code, out, err = invoke("--db", str(db), "import", "-f", "codex", str(source))
    assert code == 0 and "created a new database" in err, err


# ─── 10. verify on a tampered session counts its checkpoint truly ──────────────────────────────


def test_verify_counts_a_signed_checkpoint_that_does_not_match_the_rows(tmp_path: Path) -> None:
    """It said "0 signed checkpoint(s), anchored through 0 event(s)" over "seq N: checkpoint_mismatch"."""
    db = tmp_path / "a.db"
    source = SAMPLES / "codex" / "localpush_rollout-2026-02-23T20-34-25-019c8bfe.jsonl"
    assert invoke("--db", str(db), "import", str(source))[0] == 0
    sid = "codex:019c8bfe-ec25-79e0-97d7-bda6a9c575ff"
    tamper_one_byte(db, sid, 14)
    code, out, err = invoke("--db", str(db), "verify", sid)
    assert code == 1, err
    assert "; 1 signed checkpoint, not anchored: it does not match the rows; unanchored tail: seqs 0.." in out
    assert ": checkpoint_mismatch (signed root at size" in out
    code, out, _ = invoke("--db", str(db), "verify", sid, "--json")
    (report,) = json.loads(out)
    assert (report["checkpoints"], report["checkpoints_mismatched"], report["anchored"]) == (0, 1, 0)
