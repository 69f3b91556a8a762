"""Mistakes on the command line end in one ``flightlog: error: ...`` line (or a usage error), never a
traceback, and leave nothing behind; store URLs never print a password."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flightlog import sessions
from flightlog.cli import app
from flightlog.errors import install_hint
from flightlog.events import Custom
from flightlog.recorder import Recorder
from flightlog.store import SqliteStore, redact_url

runner = CliRunner()
SID = "sess-errors"


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLIGHTLOG_KEY_DIR", str(tmp_path / "keys"))
    monkeypatch.setenv("FLIGHTLOG_HEAD_DIR", str(tmp_path / "heads"))
    monkeypatch.delenv("FLIGHTLOG_LOG_KEY", raising=False)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.db"
    with SqliteStore(path) as store:
        rec = Recorder.create(store, session_id=SID)
        for i in range(3):
            rec.append(Custom(custom_kind="step", payload={"i": i}))
    return path


def run(db: Path | str, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["--db", str(db), *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, result.stdout, result.stderr


def _one_error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("flightlog: error: "), stderr
    return lines[0]


# ─── replay ───────────────────────────────────────────────────────────────────────────────────


def test_replay_negative_max_part_bytes_is_a_usage_error(db: Path) -> None:
    code, out, err = run(db, "replay", SID, "--max-part-bytes", "-5")
    assert code == 2 and out == "" and "--max-part-bytes" in err and "Traceback" not in err


def test_replay_at_past_the_head_is_a_usage_error(db: Path) -> None:
    code, out, err = run(db, "replay", SID, "--at", "99999")
    assert code == 2 and out == ""
    assert "seq 99999 is past the head (last seq 2)" in " ".join(err.replace("│", " ").split())
    assert run(db, "replay", SID, "--at", "2")[0] == 0


# ─── export ───────────────────────────────────────────────────────────────────────────────────


def test_export_to_a_directory_is_one_line_and_leaves_nothing(db: Path, tmp_path: Path) -> None:
    target = tmp_path / "outdir"
    target.mkdir()
    code, out, err = run(db, "export", SID, "-o", str(target))
    assert code == 2 and out == ""
    assert "is a directory" in _one_error_line(err)
    assert not (tmp_path / "outdir.partial").exists()


def test_export_into_a_missing_directory_is_one_line(db: Path, tmp_path: Path) -> None:
    code, _, err = run(db, "export", SID, "-o", str(tmp_path / "no" / "such" / "x.jsonl"))
    assert code == 2 and "no directory" in _one_error_line(err)
    assert not (tmp_path / "no").exists()


def test_export_bundle_onto_a_file_is_one_line(db: Path, tmp_path: Path) -> None:
    file = tmp_path / "hostname"
    file.write_text("x\n")
    code, _, err = run(db, "export", SID, "--bundle", str(file))
    assert code == 2 and "not a directory" in _one_error_line(err)
    assert file.read_text() == "x\n"


def test_export_write_failure_removes_the_partial_file(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing(store: object, sid: str, fh: object) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(sessions, "export_jsonl", failing)  # the command imports it when it runs
    target = tmp_path / "x.jsonl"
    code, _, err = run(db, "export", SID, "-o", str(target))
    assert code == 2 and "No space left on device" in _one_error_line(err)
    assert list(tmp_path.glob("x.jsonl*")) == []


def test_export_still_works(db: Path, tmp_path: Path) -> None:
    target = tmp_path / "x.jsonl"
    code, _, _ = run(db, "export", SID, "-o", str(target))
    assert code == 0 and len(target.read_text().splitlines()) == 3
    assert run(db, "export", SID, "--bundle", str(tmp_path / "new" / "bundle"))[0] == 0


# ─── --db ─────────────────────────────────────────────────────────────────────────────────────


def test_postgres_url_without_the_extra_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "flightlog.store.postgres", None)  # import fails: no extra
    code, _, err = run("postgresql://u:secret@127.0.0.1:1/db", "ls")
    line = _one_error_line(err)
    assert code == 1 and install_hint("postgres") in line and "secret" not in line


@pytest.mark.parametrize("how", ["path", "url"])
def test_db_that_is_a_directory_is_one_line(tmp_path: Path, how: str) -> None:
    directory = tmp_path / "dbdir"
    directory.mkdir()
    db = str(directory) if how == "path" else f"sqlite:///{directory}"
    for args in (["ls"], ["demo"]):
        code, _, err = run(db, *args)
        assert code == 2 and "is a directory" in _one_error_line(err)


def test_password_in_a_query_string_is_not_printed() -> None:
    code, _, err = run("postgresql://127.0.0.1:1/test?password=secret&connect_timeout=2", "ls")
    assert code == 1 and "secret" not in err and "password=***" in _one_error_line(err)


def test_password_in_a_keyword_string_is_not_printed() -> None:
    code, _, err = run("host=127.0.0.1 password=secret", "ls")
    assert code == 2 and "secret" not in err and "password=***" in err


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql://u:pw@h/db", "postgresql://u:***@h/db"),
        ("postgresql://:pw@h/db", "postgresql://:***@h/db"),
        ("postgresql://127.0.0.1:1/test?password=secret", "postgresql://127.0.0.1:1/test?password=***"),
        (
            "postgresql://h/db?sslmode=require&sslpassword=s3&x=1",
            "postgresql://h/db?sslmode=require&sslpassword=***&x=1",
        ),
        ("postgresql://h/db?PASSWORD=x&schema=a", "postgresql://h/db?PASSWORD=***&schema=a"),
        ("host=127.0.0.1 password=secret dbname=x", "host=127.0.0.1 password=*** dbname=x"),
        ("host=h password = 'se cr\\'et' user=u", "host=h password = *** user=u"),
        ("host=h sslpassword=k", "host=h sslpassword=***"),
        ("postgresql://h:5432/db?user=password", "postgresql://h:5432/db?user=password"),
        ("/home/u/flightlog.db", "/home/u/flightlog.db"),
    ],
)
def test_redact_url(url: str, expected: str) -> None:
    assert redact_url(url) == expected


@pytest.mark.parametrize("command", [["ls"], ["runs"], ["verify", "--all"], ["show", "x"]])
def test_a_missing_database_is_one_clear_line(tmp_path: Path, command: list[str]) -> None:
    """A new user's first `ls` before any import: say there is no database yet and how to make one (it used
    to read "no session matches '(no database at ...)'", even for `ls`), exit 2, create nothing."""
    missing = tmp_path / "fresh" / "flightlog.db"
    code, _, stderr = run(missing, *command)
    line = _one_error_line(stderr)
    assert code == 2 and f"no database at {missing} yet" in line and "flightlog import" in line
    assert not missing.exists()


def test_importing_a_folder_without_transcripts_fails(tmp_path: Path, db: Path) -> None:
    """Nothing to import is a mistake a script must see (it exited 0 before)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("not a transcript")
    code, _, stderr = run(db, "import", str(empty))
    assert code == 2 and "no transcripts" in _one_error_line(stderr)


def test_a_folder_without_transcripts_among_several_paths_is_named(tmp_path: Path, db: Path) -> None:
    """`import A B` where folder A holds no transcript imports B and names A in a warning (it was skipped
    without a word); exit 0, as B's transcript was imported."""
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("not a transcript")
    full = tmp_path / "full"
    full.mkdir()
    sample = Path(__file__).parent / "data" / "samples" / "claude-code" / "spotter_short.jsonl"
    (full / "one.jsonl").write_bytes(sample.read_bytes())
    code, _, stderr = run(db, "import", str(empty), str(full))
    assert code == 0
    warnings = [line for line in stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "no transcripts" in warnings[0] and str(empty) in warnings[0]
    assert ".aider.chat.history.md" in warnings[0]


@pytest.mark.parametrize("command", [["show"], ["replay"], ["export"], ["export", "-o", "OUT"]])
def test_printing_a_tampered_session_warns_and_exits_1(db: Path, tmp_path: Path, command: list[str]) -> None:
    """show / replay / export of a session whose stored bytes were edited print what is stored, then one
    warning naming the first divergent seq, and exit 1 (they exited 0 silently; only verify noticed)."""
    import sqlite3

    raw = sqlite3.connect(db)
    raw.execute("DROP TRIGGER IF EXISTS events_no_update")
    raw.execute(
        "UPDATE events SET event = CAST(REPLACE(CAST(event AS TEXT), '\"i\":1', '\"i\":7') AS BLOB) "
        "WHERE session_id = ? AND seq = 1",
        (SID,),
    )
    raw.commit()
    raw.close()
    args = [str(tmp_path / "out.jsonl") if a == "OUT" else a for a in command]
    code, _, stderr = run(db, args[0], SID, *args[1:])
    warning = [line for line in stderr.splitlines() if line.startswith("flightlog: warning:")]
    assert code == 1 and len(warning) == 1, stderr
    assert f"{SID} fails verification at seq 1 (hash_mismatch)" in warning[0]
    assert run(db, "show", "sess-errors")[0] == 1


def test_printing_an_intact_session_exits_0(db: Path) -> None:
    for command in ("show", "replay", "export"):
        code, _, stderr = run(db, command, SID)
        assert code == 0 and "warning" not in stderr, (command, stderr)


@pytest.mark.parametrize(
    ("source", "hint"),
    [
        ("langgraph", "graph.invoke(Command(resume=...), config) in the LangGraph app"),
        ("openai-agents", "FlightlogSession.resume(state) in the Agents SDK app"),
        ("pydantic-ai", "FlightlogHistory.run(agent, prompt) in the Pydantic AI app"),
    ],
)
def test_resume_of_an_integration_session_says_where_it_continues(
    tmp_path: Path, source: str, hint: str
) -> None:
    """Not "no agent spec recorded; give --spec": no spec exists, the framework's app resumes it."""
    path = tmp_path / "integrations.db"
    with SqliteStore(path) as store:
        Recorder.create(store, session_id=f"{source}:t1", source=source).append(
            Custom(custom_kind="x", payload={})
        )
    code, out, err = run(path, "resume", f"{source}:t1")
    assert code == 2 and out == ""
    assert hint in err and "not with flightlog resume" in err and "Traceback" not in err
    assert "--spec" not in err


def test_importing_a_fifo_says_it_is_not_a_regular_file(tmp_path: Path) -> None:
    """``import`` of a FIFO that exists said ``no such file or folder`` (user pass, session 10): it now says
    what it is not, and reads nothing from it (a read would block until a writer came)."""
    import os

    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    result = CliRunner().invoke(app, ["--db", str(tmp_path / "f.db"), "import", str(fifo)])
    assert result.exit_code == 2, result.output
    assert f"{fifo}: not a regular file or a folder" in result.output
