"""A run fenced off by `flightlog abort` says what `ls` says of it: ``paused`` (user pass, session 16: the
fenced process ended "cancelled (fenced off ...)" while `ls` and the README call that state paused, the seed
002 ``Paused``: stopped by the user, resumable)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flightlog.cli import app

runner = CliRunner()


def test_a_run_an_abort_fenced_off_prints_paused_as_ls_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "fenced.db"
    monkeypatch.setenv("CLI_AGENTS_DB", str(db))
    done = runner.invoke(
        app, ["--db", str(db), "run", "kernel.cli_agents:aborted_agent", "--goal", "go", "-q"]
    )
    assert done.exit_code == 1, done.output
    first, hint = done.stdout.splitlines()[:2]
    sid = first.split()[1].rstrip(":")
    assert first.startswith(
        f"session {sid}: paused (fenced off: session {sid}: writer holds authority epoch "
    )
    assert hint == f"  resumable: flightlog resume {sid}"
    (row,) = json.loads(runner.invoke(app, ["--db", str(db), "ls", "--json"]).stdout)
    assert row["session_id"] == sid and row["status"] == "paused"
