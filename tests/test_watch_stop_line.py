"""``flightlog watch`` stopped with Ctrl-C says what it left (user pass, session 16: it printed nothing, and
its run ended ``cancelled``). The line names its own run, ended ``cancelled`` (the user stopped it, seed 002
``Cancelled``; the next watch is a new run), and the sessions it followed in ``ls``'s words: a transcript whose
app may still be writing is left ``interrupted`` (not sealed, continued by the next import), never
``cancelled``. Waits are for a state, with a generous timeout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from flightlog.errors import StoreUnavailable
from flightlog.store import SqliteStore

SAMPLE = Path(__file__).parent / "data" / "samples" / "claude-code" / "spotter_tool_heavy.jsonl"
SESSION = "claude-code:d6e0bada-1959-4eec-a9d2-0bfade768d8f"
TIMEOUT_S = 60.0


def _status(db: Path) -> str | None:
    try:
        with SqliteStore(db, read_only=True) as store:
            found = [s.status for s in store.list_sessions() if s.session_id == SESSION]
    except StoreUnavailable:  # not created yet by the watch
        return None
    return str(found[0]) if found else None


def _mid_run(folder: Path, tmp_path: Path) -> dict[str, str]:
    """``folder`` holding the sample's first 10 lines (mid-run: the app is still writing it); the watch's
    environment, with keys and heads under ``tmp_path``."""
    folder.mkdir()
    lines = SAMPLE.read_bytes().splitlines(keepends=True)
    (folder / SAMPLE.name).write_bytes(b"".join(lines[:10]))
    return {
        **os.environ,
        "FLIGHTLOG_KEY_DIR": str(tmp_path / "keys"),
        "FLIGHTLOG_HEAD_DIR": str(tmp_path / "heads"),
    }


def test_ctrl_c_prints_one_line_naming_what_the_watch_left_in_which_state(tmp_path: Path) -> None:
    folder, db, log = tmp_path / "projects", tmp_path / "db.sqlite", tmp_path / "watch.log"
    env = _mid_run(folder, tmp_path)
    command = [sys.executable, "-m", "flightlog", "--db", str(db), "watch", str(folder), "--interval", "0.05"]
    with log.open("wb") as output:
        proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=output)
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while _status(db) != "running":
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=TIMEOUT_S) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    last = log.read_text(encoding="utf-8").splitlines()[-1]
    assert last.startswith("flightlog: stopped; run core_job:watch:") and " cancelled (" in last
    assert last.endswith(
        "events recorded); 1 followed session no longer live, now 1 interrupted (not sealed: a later import or "
        "watch continues where it stopped)"
    )
    assert _status(db) == "incomplete"  # `ls`: interrupted, as the line says


def test_ctrl_c_with_json_closes_stdout_with_one_object_saying_the_same(tmp_path: Path) -> None:
    """``--json``: the closing line's facts also end stdout as one JSON object after the import lines (keys
    as the import lines and ``ls --json`` name them), so a consumer of stdout alone learns the watch ended;
    the stderr line stays."""
    folder, db = tmp_path / "projects", tmp_path / "db.sqlite"
    stdout, stderr = tmp_path / "watch.out", tmp_path / "watch.log"
    env = _mid_run(folder, tmp_path)
    command = [
        *(sys.executable, "-m", "flightlog", "--db", str(db), "watch", str(folder)),
        *("--interval", "0.05", "--json"),
    ]
    with stdout.open("wb") as out, stderr.open("wb") as err:
        proc = subprocess.Popen(command, env=env, stdout=out, stderr=err)
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while not stdout.read_bytes().endswith(b"\n") or _status(db) != "running":  # the import's line
            assert proc.poll() is None and time.monotonic() < deadline, stderr.read_text()
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=TIMEOUT_S) == 0, stderr.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    *imports, last = [json.loads(line) for line in stdout.read_text(encoding="utf-8").splitlines()]
    assert [row["session_ids"][0] for row in imports] == [SESSION]
    events = sum(row["events"] for row in imports)
    assert last["stopped"] is True and last["run_id"].startswith("core_job:watch:"), last
    assert last == {
        "stopped": True,
        "run_id": last["run_id"],
        "status": "cancelled",
        "events": events,
        "session_ids": [SESSION],
        "statuses": {SESSION: "interrupted"},
    }
    said = stderr.read_text(encoding="utf-8").splitlines()[-1]
    assert said.startswith(f"flightlog: stopped; run {last['run_id']} cancelled ({events} events recorded)")
