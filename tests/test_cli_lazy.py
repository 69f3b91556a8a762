"""The lazily built command tree (cli/lazy.py) is typer's eager tree, built one command at a time.

Compared on what a user sees: the help of the root and of every command and command group, the order of
the listing, usage mistakes, and a command's output; and ``--version`` builds no command at all.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main
import typer.testing
from typer.testing import CliRunner

from flightlog.cli import app
from flightlog.cli.lazy import LazyCommands, lazy_command

runner = CliRunner()


def _paths(group: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for name, command in group.commands.items():
        yield (*prefix, name)
        if hasattr(command, "commands"):
            yield from _paths(command, (*prefix, name))


EAGER_PATHS = [(), *_paths(typer.main.get_command(app))]


def _invoke(monkeypatch: pytest.MonkeyPatch, build: Any, args: list[str], **kw: Any) -> Any:
    monkeypatch.setattr(typer.testing, "_get_command", build)
    return runner.invoke(app, args, prog_name="flightlog", **kw)


def test_the_eager_tree_has_every_command() -> None:
    assert len(EAGER_PATHS) > 38
    assert ("audit",) in EAGER_PATHS and ("db", "repair") in EAGER_PATHS


@pytest.mark.parametrize("path", EAGER_PATHS, ids=lambda p: " ".join(p) or "root")
def test_help_is_identical_to_the_eager_build(monkeypatch: pytest.MonkeyPatch, path: tuple[str, ...]) -> None:
    eager = _invoke(monkeypatch, typer.main.get_command, [*path, "--help"])
    lazy = _invoke(monkeypatch, lazy_command, [*path, "--help"])
    assert eager.exit_code == 0, eager.output
    assert (lazy.exit_code, lazy.output) == (eager.exit_code, eager.output)


@pytest.mark.parametrize("args", [["nope"], ["lss"], ["ls", "--nope"], ["db"], ["verify"], []])
def test_usage_mistakes_read_the_same(monkeypatch: pytest.MonkeyPatch, args: list[str]) -> None:
    eager = _invoke(monkeypatch, typer.main.get_command, args)
    lazy = _invoke(monkeypatch, lazy_command, args)
    assert (lazy.exit_code, lazy.output) == (eager.exit_code, eager.output)


def test_a_command_runs_the_same(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    args = [
        "--db",
        str(tmp_path / "x.db"),
        "import",
        str(Path(__file__).parent / "data" / "samples" / "codex"),
    ]
    eager = _invoke(monkeypatch, typer.main.get_command, args)
    listing = ["--db", str(tmp_path / "x.db"), "ls", "--json"]
    lazy = _invoke(monkeypatch, lazy_command, listing)
    assert eager.exit_code == 0 and lazy.exit_code == 0, (eager.output, lazy.output)
    assert lazy.output == _invoke(monkeypatch, typer.main.get_command, listing).output
    assert len(json.loads(lazy.output)) >= 1


def test_version_builds_no_command(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[Any] = []

    def build(typer_app: Any) -> Any:
        built.append(lazy_command(typer_app))
        return built[-1]

    result = _invoke(monkeypatch, build, ["--version"])
    assert result.exit_code == 0 and result.output.startswith("flightlog ")
    commands = built[0].commands
    assert isinstance(commands, LazyCommands)
    assert list(commands) == [p[0] for p in EAGER_PATHS if len(p) == 1]  # every name, in order
    assert commands._built == {}


def test_the_console_script_runs_the_lazy_tree() -> None:
    """``flightlog`` (``main()`` -> ``app()``) answers ``--version`` and a command in a real process."""
    for args, expect in ((["--version"], "flightlog "), (["ls", "--help"], "ls [OPTIONS]")):
        done = subprocess.run(
            [sys.executable, "-c", "from flightlog.cli import main; main()", *args],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert expect in done.stdout
