"""A run whose process was killed reads ``running`` until its lease lapses, then ``abandoned``: ``ls``,
``show`` and ``runs`` say so on stderr and name the command that continues it (``flightlog resume`` for a
kernel run), nothing for a run that is heard from."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
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
        rf"`flightlog resume {DEAD} --spec MODULE:ATTR` continues it from its ledger \(the run recorded no "
        r"agent spec, as a run started from Python does"  # recorded by hand here: no agent_spec custom
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


def _dead_runs(store: SqliteStore, count: int) -> None:
    """``count`` kernel runs ``dead-<n>`` that started a minute ago and were not heard from since."""
    minute_ago = wall_ms() - 60_000
    for n in range(count):
        sid = f"dead-{n}"
        recorder = Recorder.create(store, session_id=sid, task="work", source="kernel")
        recorder.append_many([ev.RunStarted(run_id=sid, goal="work")], recorded_at_ms=[minute_ago])


def test_many_abandoned_runs_are_named_a_few_and_counted(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    with SqliteStore(db) as store:
        _dead_runs(store, ABANDONED_NOTES + 2)
    code, _, err = invoke(db, "ls")
    assert code == 0
    assert err.count("is abandoned") == ABANDONED_NOTES and "2 more abandoned" in err


def test_the_notes_read_only_runs_a_process_drives_and_the_rows_they_print(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At 100,000 runs the notes parsed every run's snapshot and read every abandoned run's session row to
    print five (bench/README.md, runs section): only runs in a state a process drives can be abandoned, and
    only the named ones need their source."""
    import flightlog.live as live
    from flightlog.cli.options import abandoned_notes

    db = tmp_path / "db.sqlite"
    with SqliteStore(db) as store:
        _dead_runs(store, ABANDONED_NOTES + 3)
        for n in range(4):
            sid = f"done-{n}"
            recorder = Recorder.create(store, session_id=sid, task="work", source="kernel")
            recorder.append_many(
                [
                    ev.RunStarted(run_id=sid, goal="work"),
                    ev.RunTerminal(reason="completed", turns_used=1, total_tokens=10),
                ]
            )
    parsed: list[int] = []
    read: list[str] = []
    parse = live.parse_wires
    monkeypatch.setattr(live, "parse_wires", lambda wires: parsed.append(len(wires)) or parse(wires))
    with SqliteStore(db, read_only=True) as store:
        get = store.get_session
        monkeypatch.setattr(store, "get_session", lambda sid: read.append(sid) or get(sid))
        notes = abandoned_notes(store)
    assert parsed == [ABANDONED_NOTES + 3]  # the finished runs are not parsed
    assert len(read) == ABANDONED_NOTES
    assert len(notes) == ABANDONED_NOTES + 1 and notes[-1].startswith("flightlog: note: 3 more abandoned")
