"""``flightlog run`` imports the agent spec (its module and the model SDK it builds: the Anthropic SDK alone
is about 1.5 s of CPU) before its first progress line: on a terminal it says so first, one stderr line; in a
pipe or a log it prints nothing more (new-user pass, session 18, item 3)."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flightlog.cli import app

from . import cli_agents

TESTS = Path(__file__).parents[1]
SPEC = "kernel.cli_agents:noting_agent"
LOADING = f"loading agent {SPEC} (importing its code and model SDK can take a few seconds)"


@pytest.fixture(autouse=True)
def _notes() -> Iterator[None]:
    cli_agents.NOTES.clear()  # the in-process run writes its note here
    yield
    cli_agents.NOTES.clear()


def _read_all(fd: int) -> str:
    """Everything written to the pty until its last writer closed it (EIO on Linux)."""
    chunks = []
    while True:
        try:
            data = os.read(fd, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks).decode(errors="replace")


def test_on_a_terminal_run_says_it_is_loading_the_agent_before_it_starts(tmp_path: Path) -> None:
    primary, secondary = pty.openpty()
    env = {
        **os.environ,
        "TERM": "xterm",
        "COLUMNS": "200",
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }
    argv = [sys.executable, "-m", "flightlog", "--db", str(tmp_path / "k.db"), "run", SPEC, "--goal", "note"]
    process = subprocess.Popen(
        argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=secondary
    )
    os.close(secondary)
    terminal = " ".join(_read_all(primary).split())
    os.close(primary)
    out, _ = process.communicate(timeout=300)
    assert process.returncode == 0, (out, terminal)
    assert LOADING in terminal, terminal
    assert terminal.index(LOADING) < terminal.index("started: note")


def test_in_a_pipe_run_prints_no_loading_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["--db", str(tmp_path / "k.db"), "run", SPEC, "--goal", "note"])
    assert result.exit_code == 0, result.stderr
    assert "loading agent" not in result.stderr and "started: note" in result.stderr
