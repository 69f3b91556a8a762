"""flightlog's own long jobs as runs of source ``core_job`` (seed 002, issue 17 item 5): a folder import,
``verify --all --record``, ``db copy --record`` and ``watch`` (tests/test_watch.py) each leave a run that
``flightlog runs`` lists with its state, outcome and steps; one killed before its end is closed as
``interrupted`` by the next job of its kind."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flightlog.cli import app
from flightlog.cli.options import progress_bar
from flightlog.encoding import decode_stored
from flightlog.events import RunTerminal
from flightlog.runs.host import host_id
from flightlog.runs.jobs import CoreJob, close_abandoned
from flightlog.store import SqliteStore

SAMPLES = Path(__file__).resolve().parent.parent / "data" / "samples"
runner = CliRunner()


def cli(db: Path, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["--db", str(db), *args])
    return result.exit_code, result.stdout, result.stderr


def core_jobs(db: Path) -> dict[str, dict[str, Any]]:
    """``flightlog runs --source core_job --json`` by job kind (the second part of the run id)."""
    code, out, err = cli(db, "runs", "--source", "core_job", "--json")
    assert code == 0, err
    return {row["run_id"].split(":")[1]: row for row in json.loads(out)}


def test_folder_import_verify_sweep_and_db_copy_are_core_job_runs(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    code, _, err = cli(db, "import", str(SAMPLES / "codex"))
    assert code == 0, err
    code, _, err = cli(db, "verify", "--all", "--record")
    assert code == 0, err
    jobs = core_jobs(db)
    assert sorted(jobs) == ["import", "verify"]
    for row in jobs.values():
        assert row["source"] == "core_job" and row["state"] == "terminal"
        assert row["terminal"]["outcome"] == "completed"
    assert jobs["import"]["budget"]["steps_taken"] == 3  # the three rollouts
    assert jobs["verify"]["budget"]["steps_taken"] == 4  # three transcripts and the import's own run
    code, _, err = cli(db, "db", "copy", str(db), str(tmp_path / "b.db"), "--record")
    assert code == 0, err
    moved = core_jobs(tmp_path / "b.db")  # recorded where the ledger went on
    assert sorted(moved) == ["db_copy", "import", "verify"]
    assert moved["db_copy"]["terminal"]["outcome"] == "completed"


def test_a_folder_import_with_bad_files_is_a_failed_run(tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "bad.jsonl").write_bytes(b'{"not": "a transcript"}\n')
    (folder / "good.jsonl").write_bytes((SAMPLES / "claude-code" / "spotter_short.jsonl").read_bytes())
    code, _, _ = cli(tmp_path / "a.db", "import", str(folder))
    assert code == 1
    job = core_jobs(tmp_path / "a.db")["import"]
    assert job["terminal"]["outcome"] == "failed" and job["budget"]["steps_taken"] == 2


def test_verify_record_needs_all(tmp_path: Path) -> None:
    code, _, err = cli(tmp_path / "a.db", "verify", "some-session", "--record")
    assert code == 2 and "--record" in err


def test_a_killed_job_is_closed_as_interrupted_by_the_next(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with SqliteStore(tmp_path / "a.db") as store:
        job = CoreJob.start(store, "watch", "watch 1 folder")  # its process will be the dead one
        mine = CoreJob.start(store, "watch", "watch 1 folder")  # this process: alive, left alone
    _set_pid(tmp_path / "a.db", job.session_id, dead.pid)
    with SqliteStore(tmp_path / "a.db") as store:
        assert close_abandoned(store, "watch") == [job.session_id]
        last = [decode_stored(r.event_bytes) for r in store.read_events(job.session_id)][-1]
        assert isinstance(last, RunTerminal) and last.reason == "interrupted"
        assert store.get_session(job.session_id).status == "interrupted"
        assert store.get_session(mine.session_id).status == "running"
        assert close_abandoned(store, "watch") == []


def test_a_job_of_another_host_id_is_not_closed_by_its_pid_and_an_old_rows_host_name_still_is(
    tmp_path: Path,
) -> None:
    """A job records :func:`host_id` (host name, boot, pid namespace): a run recorded under this host name
    but another boot or pid namespace (another container sharing the name) names a pid of another pid space,
    so a pid check here says nothing of it: it stays running. A row written before host ids (a bare host
    name) is still judged as it was."""
    import socket

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with SqliteStore(tmp_path / "a.db") as store:
        elsewhere = CoreJob.start(store, "watch", "watch 1 folder")
        old_row = CoreJob.start(store, "watch", "watch 1 folder")
        assert store.get_session(elsewhere.session_id).metadata["host"] == host_id()
    other = f"{socket.gethostname()}/another-boot/4026531999"
    assert other != host_id()
    _set_pid(tmp_path / "a.db", elsewhere.session_id, dead.pid, host=other)
    _set_pid(tmp_path / "a.db", old_row.session_id, dead.pid, host=socket.gethostname())
    with SqliteStore(tmp_path / "a.db") as store:
        assert close_abandoned(store, "watch") == [old_row.session_id]
        assert store.get_session(elsewhere.session_id).status == "running"
        assert store.get_session(old_row.session_id).status == "interrupted"


def _set_pid(db: Path, session_id: str, pid: int, host: str | None = None) -> None:
    """Make a job's recorded pid that of a process that has exited (the metadata column, not the ledger);
    ``host``: also its recorded host."""
    import sqlite3

    conn = sqlite3.connect(db)
    (raw,) = conn.execute("SELECT metadata FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    meta = json.loads(raw)
    meta["pid"] = pid
    if host is not None:
        meta["host"] = host
    conn.execute("UPDATE sessions SET metadata = ? WHERE session_id = ?", (json.dumps(meta), session_id))
    conn.commit()
    conn.close()


def test_finish_refuses_unknown_reasons_and_a_second_end(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "a.db") as store:
        job = CoreJob.start(store, "import", "import 1 transcript")
        with pytest.raises(ValueError, match="reason must be one of"):
            job.finish("done")
        job.finish("completed")
        with pytest.raises(ValueError, match="already ended"):
            job.finish("completed")


def test_progress_bar_shows_counts_and_eta_on_a_terminal_and_nothing_when_piped() -> None:
    terminal = io.StringIO()
    terminal.isatty = lambda: True  # type: ignore[method-assign]
    with progress_bar(3, "import", stream=terminal) as advance:
        for done in range(3):
            advance(1, events=10 * (done + 1))
    shown = terminal.getvalue()
    assert "import" in shown and "3/3" in shown and "30 events" in shown and "ETA" in shown
    piped = io.StringIO()
    with progress_bar(3, "import", stream=piped) as advance:
        advance(3, events=1)
    assert piped.getvalue() == ""
    quiet = io.StringIO()
    quiet.isatty = lambda: True  # type: ignore[method-assign]
    with progress_bar(3, "import", stream=quiet, quiet=True) as advance:
        advance(3, events=1)
    assert quiet.getvalue() == ""
