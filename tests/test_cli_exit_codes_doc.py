"""The README's exit-code paragraph, case by case, against the CLI: every case it lists under exit 1 and exit 2
is reproduced here and exits with the code the README gives it; a case listed without a reproduction (or a
reproduction the README does not list) fails, so the paragraph and the CLI cannot drift apart."""

from __future__ import annotations

import re
import shutil
import socket
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flightlog.cli import EXIT_CLOSED_PIPE, app
from flightlog.cli.kernel import EXIT_CODES

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "tests" / "data" / "samples" / "claude-code"
AGENT = "kernel.cli_agents:approval_agent"  # tests/ is on sys.path (rootdir conftest)
runner = CliRunner()


def _paragraph() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    [found] = re.findall(r"^Exit codes: (.+?)\n\n", text, flags=re.S | re.M)
    return " ".join(found.split())


def documented() -> dict[str, int]:
    """README: case -> exit code, for the codes that list their cases in parentheses after a name (``1 a
    problem found (divergence, refused resume, ...)``; not ``3 (run/resume only) ...``); a case's name is the
    text before its first colon."""
    cases: dict[str, int] = {}
    for code, listed in re.findall(r"(?:^|; )(\d+) \w[^;(]*\(([^)]*)\)", _paragraph()):
        for case in listed.split(", "):
            cases[case.split(":")[0].strip()] = int(code)
    return cases


@pytest.fixture
def user(tmp_path: Path) -> Iterator[Path]:
    """A database with two imported sessions (``claude-code:s1``, ``claude-code:5560...``)."""
    db = tmp_path / "e.db"
    for name in ("claudecodelog_dag_compact_after_rewind.jsonl", "spotter_short.jsonl"):
        done = runner.invoke(app, ["--db", str(db), "import", str(SAMPLES / name)])
        assert done.exit_code == 0, done.stderr
    yield db


def _tampered(db: Path) -> Path:
    copy = db.with_name("tampered.db")
    shutil.copy(db, copy)
    raw = sqlite3.connect(copy)
    try:
        raw.execute("DROP TRIGGER events_no_update")
        raw.execute(
            "UPDATE events SET event = replace(event, 'a', 'b') WHERE session_id = 'claude-code:s1' AND seq = 3"
        )
        raw.commit()
    finally:
        raw.close()
    return copy


def _junk(db: Path) -> Path:
    junk = db.with_name("junk.db")
    junk.write_bytes(b"not a database, " * 256)
    return junk


def _text(db: Path) -> Path:
    note = db.with_name("notes.jsonl")
    note.write_text('{"note": "a JSON line no importer reads"}\n', encoding="utf-8")
    return note


# case -> argv, given the prepared database and a loopback port a socket holds
REPRODUCE: dict[str, Callable[[Path, int], list[str]]] = {
    "divergence": lambda db, _: ["--db", str(_tampered(db)), "verify", "claude-code:s1", "--offline"],
    "refused resume": lambda db, _: ["--db", str(_tampered(db)), "resume", "claude-code:s1", "--spec", AGENT],
    "store error": lambda db, _: ["--db", str(_junk(db)), "ls"],
    "a port already taken": lambda db, port: ["--db", str(db), "ui", "--port", str(port)],
    "not a transcript": lambda db, _: [
        "--db",
        str(db),
        "import",
        str(_text(db)),
        str(SAMPLES / "spotter_tool_heavy.jsonl"),
    ],
    "bad option": lambda db, _: ["--db", str(db), "ls", "--no-such-option"],
    "unknown session": lambda db, _: ["--db", str(db), "show", "no-such-session"],
    "ambiguous session": lambda db, _: ["--db", str(db), "show", "claude-code"],
    "missing file": lambda db, _: ["--db", str(db), "import", str(db.with_name("missing.jsonl"))],
    "a non-empty bundle directory": lambda db, _: [  # the directory holds the database itself
        "--db",
        str(db),
        "export",
        "claude-code:s1",
        "--bundle",
        str(db.parent),
    ],
    "a session resumed elsewhere": lambda db, _: ["--db", str(_langgraph(db)), "resume", "langgraph:t1"],
    "a call answered elsewhere": lambda db, _: [
        "--db",
        str(_langgraph(db)),
        "deny",
        "langgraph:t1",
        "call_1",
    ],
    "a signal nothing would deliver": lambda db, _: [
        "--db",
        str(_langgraph(db)),
        "signal",
        "langgraph:t1",
        "--message",
        "stop",
    ],
    "an abort nothing would act on": lambda db, _: ["--db", str(_langgraph(db)), "abort", "langgraph:t1"],
    "bad agent spec": lambda db, _: [
        "--db",
        str(db),
        "run",
        "kernel.cli_agents:raising_factory",
        "--goal",
        "go",
    ],
}


def _langgraph(db: Path) -> Path:
    """``db`` with a LangGraph thread ``langgraph:t1`` (a session of source ``langgraph``, as the saver writes)."""
    from flightlog.events import Custom
    from flightlog.recorder import Recorder
    from flightlog.store import SqliteStore

    with SqliteStore(db) as store:
        Recorder.create(store, session_id="langgraph:t1", source="langgraph").append(
            Custom(custom_kind="x", payload={})
        )
    return db


def test_every_documented_case_has_a_reproduction_and_no_other() -> None:
    assert sorted(documented()) == sorted(REPRODUCE)


def test_the_paragraph_names_every_exit_code_the_cli_uses() -> None:
    codes = {int(c) for c in re.findall(r"(?:^|; )(\d+) ", _paragraph())}
    assert codes == {0, 1, 2, 3, EXIT_CLOSED_PIPE}
    assert set(EXIT_CODES.values()) <= codes and 3 in EXIT_CODES.values()  # 3: a run suspended


@pytest.mark.parametrize("case", sorted(REPRODUCE))
def test_each_case_exits_with_its_documented_code(
    case: str, user: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLIGHTLOG_UI_TOKEN", "a-long-secret-for-the-test")
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        done = runner.invoke(app, REPRODUCE[case](user, int(held.getsockname()[1])))
    expected = documented()[case]
    assert done.exit_code == expected, (case, done.exit_code, done.stderr)
    if expected == 2:  # "reported as one `flightlog: error: ...` line"
        assert done.stderr.startswith("flightlog: error: "), (case, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1, (case, done.stderr)
        # click's "Invalid value for SPEC" names the argument it refuses; a bare "Invalid value:" names nothing
        assert "Invalid value:" not in done.stderr, (case, done.stderr)


def test_not_a_transcript_still_imports_the_other_files(user: Path) -> None:
    """What the README says of exit 1 for import: the file no format takes is named; the others are imported."""
    done = runner.invoke(app, REPRODUCE["not a transcript"](user, 0))
    assert done.exit_code == 1
    assert "notes.jsonl: not a transcript of a supported format" in done.stderr
    assert "events from spotter_tool_heavy.jsonl" in done.stdout
