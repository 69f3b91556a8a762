"""What a new user meets in the first hour of ``flightlog`` (issue 10, item 11): help text that keeps its
``[...]``, ``-h``, one-line usage errors, a quiet exit on a closed pipe, shell completion, a mistyped
``--db`` caught before anything is created."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from flightlog.cli import EXIT_CLOSED_PIPE, app

runner = CliRunner()
SAMPLES = Path(__file__).parent / "data" / "samples"
FLIGHTLOG = Path(sys.executable).parent / "flightlog"  # the console script of this environment


def commands(group: Any = None, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every (command path, click command) of the real tree, groups included, depth first."""
    group = group if group is not None else typer.main.get_command(app)
    yield path, group
    for name, sub in sorted(getattr(group, "commands", {}).items()):
        yield from commands(sub, (*path, name))


ALL = [path for path, _ in commands()]


def invoke(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


# ─── help ─────────────────────────────────────────────────────────────────────────────────────


def test_help_keeps_bracketed_text() -> None:
    """Rich markup ate "[env FLIGHTLOG_DB; default: user data dir]" ("Database path or URL .")."""
    code, out, _ = invoke("--help")
    assert code == 0
    assert "[env FLIGHTLOG_DB; default: user data dir]" in " ".join(out.split())
    code, out, _ = invoke("prove", "--help")
    assert "[default: latest signed checkpoint]" in " ".join(out.split())


@pytest.mark.parametrize("path", ALL, ids=lambda p: " ".join(p) or "flightlog")
def test_every_help_answers_to_dash_h_and_shows_no_bool_metavar(path: tuple[str, ...]) -> None:
    """``-h`` was refused ("No such option: -h"); flags were shown as ``--json <bool>``."""
    short = invoke(*path, "-h")
    long = invoke(*path, "--help")
    assert short[0] == 0 and long[0] == 0, (short, long)
    assert short[1] == long[1] and "Usage:" in short[1]
    assert "<bool>" not in short[1]
    assert "╭" not in short[1], "plain help, no panels"


# ─── usage errors ─────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["ls", "--bogus"], "No such option: --bogus (see 'flightlog ls --help')"),
        (["--bogus"], "No such option: --bogus"),
        (["no-such-command"], "No such command 'no-such-command'"),
        (["show"], "Missing argument"),
        (["keys", "nope"], "No such command 'nope'"),
        (["replay", "x", "--at", "many"], "--at"),
        (["verify"], "give a SESSION or --all"),
    ],
)
def test_usage_mistakes_are_one_line_exit_2(args: list[str], says: str) -> None:
    """They were a boxed rich panel of several lines (STYLE.md (f): one ``flightlog: error:`` line)."""
    code, out, err = invoke(*args)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("flightlog: error: "), err
    assert says in lines[0]


def test_a_group_without_a_command_still_shows_its_help() -> None:
    code, out, err = invoke("keys")
    assert code == 2 and "Usage:" in out + err and "show" in out + err


# ─── a closed pipe ────────────────────────────────────────────────────────────────────────────


def _closed_pipe_run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run flightlog with a stdout whose reader is already gone (what ``| head`` leaves behind)."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # before the child starts: its first write fails, deterministically
    try:
        return subprocess.run(
            [str(FLIGHTLOG), *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)


@pytest.fixture(scope="module")
def imported_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("pipe") / "ledger.db"
    code, _, err = invoke("--db", str(db), "import", str(SAMPLES / "codex"))
    assert code == 0, err
    return db


@pytest.mark.parametrize(
    "args",
    [["ls"], ["ls", "--json"], ["--help"], ["show", "--help"], ["--version"], ["show", "codex:019c8a70"]],
)
def test_a_closed_pipe_exits_141_without_a_word(args: list[str], imported_db: Path) -> None:
    """``flightlog ls | head -1`` exited 1 ("a problem found") with "Exception ignored ... BrokenPipeError"."""
    env = {**os.environ, "FLIGHTLOG_DB": str(imported_db)}
    done = _closed_pipe_run(args, env)
    assert done.returncode == EXIT_CLOSED_PIPE == 141, done.stderr
    assert done.stderr == ""


# ─── completion ───────────────────────────────────────────────────────────────────────────────


def test_shell_completion_script_and_answers() -> None:
    script = subprocess.run(
        [str(FLIGHTLOG), "--show-completion", "bash"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert script.returncode == 0 and "_FLIGHTLOG_COMPLETE" in script.stdout, script.stderr
    env = {
        **os.environ,
        "_FLIGHTLOG_COMPLETE": "complete_bash",
        "COMP_WORDS": "flightlog ver",
        "COMP_CWORD": "1",
    }
    words = subprocess.run(
        [str(FLIGHTLOG)], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert words.stdout.split() == ["verify", "verify-proof"], words.stderr


# ─── --db ─────────────────────────────────────────────────────────────────────────────────────


def test_db_in_a_missing_directory_is_refused_and_nothing_is_created(tmp_path: Path) -> None:
    """A mistyped directory used to get a brand-new empty ledger, silently."""
    db = tmp_path / "mistyped" / "ledger.db"
    code, _, err = invoke("--db", str(db), "import", str(SAMPLES / "codex"))
    assert code == 2
    assert err.strip() == (
        f"flightlog: error: no directory {db.parent} for --db {db} (a typo? create the directory first to "
        "start a new database there)"
    )
    assert not db.parent.exists()


def test_a_new_database_is_announced_once(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    code, _, err = invoke("--db", str(db), "import", str(SAMPLES / "codex"))
    assert code == 0 and f"flightlog: created a new database at {db}" in err.splitlines()
    code, _, err = invoke("--db", str(db), "import", str(SAMPLES / "codex"))
    assert code == 0 and "created a new database" not in err


def test_the_env_database_in_a_missing_directory_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLIGHTLOG_DB", str(tmp_path / "nope" / "f.db"))
    code, _, err = invoke("import", str(SAMPLES / "codex"))
    assert code == 2 and "no directory" in err
