"""A run started from the Python API (``Kernel(...).run_sync``) records no agent spec: killed mid-call, every
hint that names its resume (``ls``'s abandoned note, ``pending``'s in-doubt block, ``approve``'s continue
line) names ``--spec MODULE:ATTR`` (a bare ``flightlog resume SESSION`` exits 2), and that refusal says runs
started from Python record none (new-user pass, session 18, item 2).

The run is killed in a subprocess at the test-only crash point ``effect.intent``; the lease is judged at a
fixed clock a minute after it died, never by waiting."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import flightlog.live
from flightlog.cli import app
from flightlog.kernel.approvals import NO_SPEC_NOTE
from flightlog.store import SqliteStore

TESTS = Path(__file__).parents[1]
SPEC = "kernel.cli_agents:noting_agent"
RUN = (
    "import sys; from flightlog.kernel import Kernel; from flightlog.store import SqliteStore; "
    "from kernel.cli_agents import noting_agent; "
    "Kernel(SqliteStore(sys.argv[1]), noting_agent()).run_sync('note', session_id='py-run')"
)


def flightlog_cli(db: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["--db", str(db), *args])
    return result.exit_code, result.stdout, result.stderr


def test_a_python_run_killed_mid_call_names_spec_in_every_resume_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "k.db"
    env = {
        **os.environ,
        "FLIGHTLOG_TEST_CRASH_AT": "effect.intent:1",
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(db)], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == -9, done.stderr  # SIGKILL at the crash point
    died = flightlog.live.wall_ms()
    with SqliteStore(db, read_only=True) as store:
        assert store.get_session("py-run").status == "running"
    monkeypatch.setattr(flightlog.live, "wall_ms", lambda: died + 60_000)  # a minute later: abandoned
    spec_hint = "flightlog resume py-run --spec MODULE:ATTR"

    code, _, err = flightlog_cli(db, "ls")
    assert code == 0, err
    assert f"`{spec_hint}` continues it from its ledger ({NO_SPEC_NOTE})" in " ".join(err.split())

    code, out, err = flightlog_cli(db, "pending")
    assert code == 0, err
    assert f"nothing to approve yet: `{spec_hint}` settles it" in " ".join(out.split())

    code, out, err = flightlog_cli(db, "resume", "py-run")  # what the hint used to say
    assert (code, out) == (2, ""), err
    said = " ".join(err.split())
    assert "no agent spec recorded for this session (a run started from Python" in said
    assert (
        "give --spec MODULE:ATTR, or resume it from Python: Kernel(store, agent).resume_sync('py-run')"
        in said
    )

    code, out, err = flightlog_cli(db, "resume", "py-run", "--spec", SPEC, "-q")  # what it says now works
    assert code == 3 and "suspended (effect_in_doubt)" in out, err
    code, out, err = flightlog_cli(db, "approve", "py-run", "n1")
    assert code == 0, err
    assert out.strip() == f"approved n1 of py-run; continue with: {spec_hint} ({NO_SPEC_NOTE})"
