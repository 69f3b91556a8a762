"""A run whose process was killed reads ``running`` until its lease lapses, then ``abandoned``: ``ls``,
``show`` and ``runs`` say so on stderr and name the command that continues it (``flightlog resume`` for a
kernel run), nothing for a run that is heard from."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from flightlog import events as ev
from flightlog.cli import app
from flightlog.cli.options import ABANDONED_NOTES
from flightlog.live import LiveRegistry, wall_ms
from flightlog.recorder import Recorder
from flightlog.store import SqliteStore

DEAD = "kernel-dead"
ALIVE = "kernel-alive"


def invoke(db: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["--db", str(db), *args])
    return result.exit_code, result.stdout, result.stderr


def test_an_abandoned_kernel_run_says_how_to_resume_it(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    minute_ago = wall_ms() - 60_000
    with SqliteStore(db) as store:
        for sid in (DEAD, ALIVE):  # both last wrote a minute ago, mid-run (no run_terminal)
            recorder = Recorder.create(store, session_id=sid, task="work", source="kernel")
            recorder.append_many(
                [ev.RunStarted(run_id=sid, goal="work"), ev.CheckpointTaken(turn=1, history_len=1)],
                recorded_at_ms=[minute_ago, minute_ago],
            )
        LiveRegistry(store).publish(ALIVE, "waiting_tool")  # its process heartbeats: not abandoned
    hint = re.compile(
        rf"flightlog: note: {DEAD} is abandoned \(last seen 1m ago; killed or crashed\?\): "
        rf"`flightlog resume {DEAD}` continues it from its ledger"
    )
    for command in (["ls"], ["show", DEAD], ["runs"]):
        code, out, err = invoke(db, *command)
        assert code == 0, err
        assert hint.search(" ".join(err.split())), (command, err)
        assert ALIVE not in err and "resume" not in out
    code, out, err = invoke(db, "show", ALIVE)
    assert (code, err) == (0, "")
    code, out, err = invoke(db, "runs", "--json")
    assert code == 0 and err == ""


def test_many_abandoned_runs_are_named_a_few_and_counted(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    minute_ago = wall_ms() - 60_000
    with SqliteStore(db) as store:
        for n in range(ABANDONED_NOTES + 2):
            sid = f"dead-{n}"
            recorder = Recorder.create(store, session_id=sid, task="work", source="kernel")
            recorder.append_many([ev.RunStarted(run_id=sid, goal="work")], recorded_at_ms=[minute_ago])
    code, _, err = invoke(db, "ls")
    assert code == 0
    assert err.count("is abandoned") == ABANDONED_NOTES and "2 more abandoned" in err
