"""Two ``flightlog resume`` processes racing on one crashed run tree (found by the runtime attack pass).

The tree is the demo's (:mod:`tests.kernel.test_subagents_torture`): a lead delegating to sub-agents that
each do a side effect. A first ``flightlog run`` kills itself at its second model call (a crash point, not a
timer); then two resumes of the lead start at once, a few times over. Whoever wins, each racing process
either carries the run on or stops cleanly: exit 0/1/3 and at most one ``flightlog: error:`` line, never a
traceback (before: a raw ``AppendConflict``/``EffectConflict``, or ``LedgerIntegrityError ... head_mismatch``
on an intact ledger). Sequential resumes (approving the publish) then finish the tree, and the tree's
invariants hold: every effect exactly once, each child settled in its parent (joined, usage reported, grant
released: before, a delegation could be recorded as ``is_error: "AppendConflict ..."`` with the child's
grant never returned), every chain verifying.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from flightlog.cli.demo_subagents import GOAL, NOTES_ENV, SPEC
from flightlog.events import ToolCompleted
from flightlog.kernel import approve, pending
from flightlog.store import open_store
from flightlog.testing.crashpoints import ENV

from .helpers import events
from .test_subagents_torture import check_tree, flightlog, lead_of, walk

TREES = 4


def _racing_resumes(db: Path, env: dict[str, str], lead: str) -> list[tuple[int, str]]:
    argv = [sys.executable, "-m", "flightlog", "--db", str(db), "resume", lead, "-q"]
    procs = [
        subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in "ab"
    ]
    return [(p.returncode, err) for p in procs for _out, err in [p.communicate(timeout=300)]]


@pytest.mark.slow
def test_two_resumes_racing_on_a_crashed_tree_stop_cleanly_and_leave_a_true_record(tmp_path: Path) -> None:
    db = tmp_path / "tree.db"
    for tree in range(TREES):
        notes_dir = tmp_path / f"tree-{tree}"
        notes_dir.mkdir()
        env = {**os.environ, NOTES_ENV: str(notes_dir)}
        env.pop(ENV, None)
        with open_store(db) as store:
            before = {s.session_id for s in store.list_sessions()}
        killed = flightlog(db, {**env, ENV: "model.call:2"}, "run", SPEC, "--goal", GOAL, "-q")
        assert killed.returncode == -9, killed.stderr
        with open_store(db) as store:
            lead = lead_of(store, before)
        assert lead is not None
        for code, err in _racing_resumes(db, env, lead):
            assert code in (0, 1, 3), err
            assert "Traceback" not in err, err
            lines = [line for line in err.splitlines() if line.strip()]
            assert len(lines) <= 1 and all(line.startswith("flightlog: error: ") for line in lines), err
        for _attempt in range(20):  # finish it: approve the publish when asked, resume until it ends
            with open_store(db) as store:
                for call in pending(store):
                    approve(store, call.session_id, call.call_id, responder="test")
            done = flightlog(db, env, "resume", lead, "-q")
            if done.returncode == 0:
                break
            assert done.returncode in (1, 3), done.stderr
        assert done.returncode == 0, done.stdout + done.stderr
        with open_store(db) as store:
            check_tree(store, lead, notes_dir / "subagents-notes.txt")
            for sid in walk(store, lead):
                for completed in (e for e in events(store, sid) if isinstance(e, ToolCompleted)):
                    for result in completed.results:
                        assert "AppendConflict" not in result.output and "StaleWriter" not in result.output
