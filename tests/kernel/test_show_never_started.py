"""``show`` of a sub-agent its parent spawned but never started (found by the runtime attack pass)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from flightlog.cli.demo_subagents import GOAL, NOTES_ENV, SPEC
from flightlog.store import open_store
from flightlog.testing.crashpoints import ENV


def flightlog(db: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "flightlog", "--db", str(db), *args]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)


def test_show_of_a_child_that_never_started_says_who_spawned_it(tmp_path: Path) -> None:
    """SIGKILL right after the parent recorded the spawn (crash point ``subagent.spawned``): ``runs`` lists the
    child from the parent's process table only; ``show <child>`` named no session (exit 2, "no session
    matches") and now also says who spawned it, at which seq, and that it never started."""
    db = tmp_path / "tree.db"
    env = {**os.environ, NOTES_ENV: str(tmp_path / "notes"), ENV: "subagent.spawned:1"}
    (tmp_path / "notes").mkdir()
    killed = flightlog(db, env, "run", SPEC, "--goal", GOAL, "-q")
    assert killed.returncode == -9, killed.stderr
    with open_store(db) as store:
        sessions = {s.session_id for s in store.list_sessions()}
    env.pop(ENV)
    runs = json.loads(flightlog(db, env, "runs", "--json").stdout)
    (child,) = [r for r in runs if r.get("parent") and r["run_id"] not in sessions]
    parent = child["parent"]

    shown = flightlog(db, env, "show", child["run_id"])

    assert shown.returncode == 2 and shown.stdout == ""
    assert f"no session matches {child['run_id']!r}" in shown.stderr  # the usage error stays
    assert f"{child['run_id']} is a sub-agent" in shown.stderr and f"that {parent} spawned" in shown.stderr
    assert "it never started, so it has no session to show" in shown.stderr
    assert f"flightlog show {parent}" in shown.stderr
    missing = flightlog(db, env, "show", "0" * 32)  # an id nothing names: the plain usage error
    assert missing.returncode == 2 and "sub-agent" not in missing.stderr
