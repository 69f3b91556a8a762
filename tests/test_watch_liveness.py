"""``flightlog watch`` heartbeats only what it hears from, and stops between files (closing note, session
16, "watch" items). A session mid-turn whose transcript stopped growing (its agent died) is no longer
heartbeated once ``silent_s`` passed, so the read model's lease rule flags it ``abandoned`` (seed 002:
nothing fabricated); it is live again when the file changes. A first poll over many files heartbeats and
stops between files, so Ctrl-C stops it promptly keeping each file it recorded. Waits are for a state
(a line printed, a row written) with a generous overall timeout; the silence is a fake clock."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from flightlog.errors import StoreUnavailable
from flightlog.importers import import_file
from flightlog.importers import watch as watch_module
from flightlog.importers.watch import Watcher, WatchReport
from flightlog.live import DEFAULT_LEASE_MS, list_run_views
from flightlog.runs.model import RunState
from flightlog.store import SqliteStore

SAMPLE = Path(__file__).parent / "data" / "samples" / "claude-code" / "spotter_tool_heavy.jsonl"
SAMPLE_ID = "d6e0bada-1959-4eec-a9d2-0bfade768d8f"
LINES = SAMPLE.read_bytes().splitlines(keepends=True)
TIMEOUT_S = 60.0


def transcript(folder: Path, number: int, lines: int) -> tuple[str, Path]:
    """The sample's first ``lines`` lines under its own session id (10: mid-turn; 19: idle, its run's end
    waiting for the next import); returns (session id, path)."""
    native = f"{number:08x}-1959-4eec-a9d2-0bfade768d8f"
    path = folder / f"{native}.jsonl"
    path.write_bytes(b"".join(LINES[:lines]).replace(SAMPLE_ID.encode(), native.encode()))
    return f"claude-code:{native}", path


def grow(path: Path, line: int, at_ns: int) -> None:
    """Append the sample's line ``line`` (0-based) to ``path``, its modification time set to ``at_ns``."""
    with path.open("ab") as out:
        out.write(LINES[line].replace(SAMPLE_ID.encode(), path.stem.encode()))
    os.utime(path, ns=(at_ns, at_ns))


def test_a_session_whose_file_went_silent_mid_turn_is_not_heartbeated_and_reads_abandoned(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "projects"
    folder.mkdir()
    busy, busy_file = transcript(folder, 1, 10)  # mid-turn
    idle, _ = transcript(folder, 2, 19)  # idle between prompts: waiting_input needs no process
    now = [time.time_ns()]
    with SqliteStore(tmp_path / "db.sqlite") as store:
        watcher = Watcher(store, [folder], silent_s=30.0, clock=lambda: now[0])
        watcher.poll()
        task = f"{idle}:task:bae407b"  # the idle session's background shell: a child run, running
        states = {busy: "running", idle: "waiting_input", task: "running"}
        assert {r.run_id: r.state for r in store.live_runs()} == states
        published = {r.run_id: r.heartbeat_at_ms for r in store.live_runs()}
        now[0] += 20 * 10**9  # within the window: all heartbeated
        assert watcher.heartbeat() == 3

        now[0] += 11 * 10**9  # 31 s after the files last changed: no sign of life from the running ones
        before = {r.run_id: r.heartbeat_at_ms for r in store.live_runs()}
        assert watcher.heartbeat() == 1
        after = {r.run_id: r.heartbeat_at_ms for r in store.live_runs()}
        assert after[busy] == before[busy] and after[task] == before[task]
        assert after[idle] == now[0] // 1_000_000 > before[idle]
        assert store.get_session(busy).status == "running"  # still followed: ls says running
        views = {v.snapshot.run_id: v for v in list_run_views(store, now_ms=now[0] // 1_000_000)}
        assert views[busy].live is not None and not views[busy].abandoned  # the lease has not lapsed yet

        # once the lease lapses too, the read model's own rule flags it, in the state its events give
        later = before[busy] + DEFAULT_LEASE_MS + 1
        views = {v.snapshot.run_id: v for v in list_run_views(store, now_ms=later)}
        assert (views[busy].abandoned, views[busy].live, views[busy].snapshot.state) == (
            True,
            None,
            RunState.RUNNING,
        )
        assert views[busy].snapshot.terminal is None  # no outcome invented
        assert (views[idle].abandoned, views[idle].snapshot.state) == (False, RunState.WAITING_INPUT)
        assert views[task].abandoned  # nothing heard from its file either
        assert published[busy] < before[busy]  # it was heartbeated while heard from

        # the agent writes again: live again, heartbeated again
        now[0] += 5 * 10**9
        grow(busy_file, 10, now[0])
        (report,) = watcher.poll()
        assert report.result is not None and report.result.events > 0
        record = {r.run_id: r for r in store.live_runs()}[busy]
        assert (record.state, record.heartbeat_at_ms) == ("running", now[0] // 1_000_000)
        views = {v.snapshot.run_id: v for v in list_run_views(store, now_ms=now[0] // 1_000_000)}
        assert views[busy].live is not None and not views[busy].abandoned
        now[0] += 10**9
        watcher.heartbeat()
        beaten = {r.run_id for r in store.live_runs() if r.heartbeat_at_ms == now[0] // 1_000_000}
        assert beaten == {busy, f"{busy}:task:bae407b", idle}  # its new line started a task; the idle
        # session's task is still silent


def test_a_recent_file_already_silent_when_found_is_followed_but_not_published_live(tmp_path: Path) -> None:
    """Found at start with bytes no import recorded, modified 60 s ago (recent: followed, ``running``) but
    longer ago than the window: the watch has heard nothing from it, so it claims nothing live."""
    folder = tmp_path / "projects"
    folder.mkdir()
    session, path = transcript(folder, 3, 10)
    now = time.time_ns()
    os.utime(path, ns=(now - 60 * 10**9, now - 60 * 10**9))
    with SqliteStore(tmp_path / "db.sqlite") as store:
        watcher = Watcher(store, [folder], silent_s=30.0, clock=lambda: now)
        watcher.poll()
        assert store.get_session(session).status == "running"
        assert store.live_runs() == [] and watcher.heartbeat() == 0
        (view,) = [v for v in list_run_views(store, now_ms=now // 1_000_000) if v.snapshot.run_id == session]
        assert view.abandoned and view.snapshot.state is RunState.RUNNING
        watcher.release()
        assert store.get_session(session).status == "incomplete"


def test_run_heartbeats_and_stops_between_the_files_of_a_poll(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between two imports of one poll, a due heartbeat runs; once stopped, no further file is imported."""
    folder = tmp_path / "projects"
    folder.mkdir()
    sessions = [transcript(folder, number, 10)[0] for number in range(3)]
    monkeypatch.setattr(watch_module, "HEARTBEAT_S", 0.0)  # a heartbeat is due after every import
    stop, log = threading.Event(), []
    with SqliteStore(tmp_path / "db.sqlite") as store:
        watcher = Watcher(store, [folder])
        heartbeat = watcher.heartbeat

        def counted() -> int:
            log.append(f"beat {heartbeat()}")
            return 0

        def on_report(report: WatchReport) -> None:
            log.append(f"import {report.path.name}")
            if sum(entry.startswith("import") for entry in log) == 2:
                stop.set()

        monkeypatch.setattr(watcher, "heartbeat", counted)
        watcher.run(stop, on_report)
        names = sorted(p.name for p in folder.iterdir())
        assert log[:4] == [f"import {names[0]}", "beat 1", f"import {names[1]}", "beat 2"], log
        assert sum(entry.startswith("import") for entry in log) == 2
        recorded = {s.session_id for s in store.list_sessions() if s.source.startswith("import:")}
        assert recorded == set(sessions[:2])  # the third file is left for the next watch
        assert {store.get_session(sid).status for sid in recorded} == {"incomplete"}  # released
        assert store.live_runs() == []


def _imported(db: Path) -> dict[str, int]:
    """Imported sessions in ``db`` with their ledger lengths ({} before the watch created the store)."""
    try:
        with SqliteStore(db, read_only=True) as store:
            found = [s.session_id for s in store.list_sessions() if s.source.startswith("import:")]
            return {sid: len(list(store.read_events(sid))) for sid in found}
    except StoreUnavailable:
        return {}


def _watch(tmp_path: Path, *options: str) -> tuple[subprocess.Popen[bytes], Path, Path]:
    """A ``flightlog watch`` child over ``tmp_path/projects`` (stdout and stderr to files)."""
    env = {
        **os.environ,
        "FLIGHTLOG_KEY_DIR": str(tmp_path / "keys"),
        "FLIGHTLOG_HEAD_DIR": str(tmp_path / "heads"),
        "PYTHONUNBUFFERED": "1",
    }
    out, err = tmp_path / "watch.out", tmp_path / "watch.err"
    command = [sys.executable, "-m", "flightlog", "--db", str(tmp_path / "db.sqlite"), "watch"]
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = subprocess.Popen(
            [*command, str(tmp_path / "projects"), "--interval", "0.05", *options],
            env=env,
            stdout=stdout,
            stderr=stderr,
        )
    return proc, out, err


def _wait_for_line(proc: subprocess.Popen[bytes], path: Path, pattern: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not re.search(pattern, path.read_text(encoding="utf-8")):
        assert proc.poll() is None, f"watch exited ({proc.returncode}) before printing {pattern!r}"
        assert time.monotonic() < deadline, f"timed out waiting for {pattern!r}"
        time.sleep(0.05)


def test_ctrl_c_during_a_long_first_poll_stops_between_files_keeping_what_it_recorded(tmp_path: Path) -> None:
    """SIGINT once the first of 40 new files is recorded: the watch stops after the file it is importing,
    prints its stop line (exit 0), and every session it recorded is whole (one transaction per file) and set
    back to ``interrupted``; the files it did not reach hold nothing (the next watch imports them)."""
    folder = tmp_path / "projects"
    folder.mkdir()
    for number in range(40):
        transcript(folder, number, 10)
    proc, out, err = _watch(tmp_path)
    try:
        _wait_for_line(proc, out, r"\+\d+ events from ")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=TIMEOUT_S) == 0, err.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    printed = [line for line in out.read_text(encoding="utf-8").splitlines() if " events from " in line]
    print(len(printed), "of 40 files recorded before the stop")
    recorded = _imported(tmp_path / "db.sqlite")
    assert 1 <= len(recorded) == len(printed) < 40, (len(recorded), len(printed))
    with SqliteStore(tmp_path / "scratch.sqlite") as scratch:  # the same files imported whole, in order
        for path in sorted(folder.iterdir())[: len(recorded)]:
            import_file(scratch, path)
        assert recorded == {sid: len(list(scratch.read_events(sid))) for sid in recorded}
    with SqliteStore(tmp_path / "db.sqlite", read_only=True) as store:
        assert {store.get_session(sid).status for sid in recorded} == {"incomplete"}
        assert store.live_runs() == []
    last = err.read_text(encoding="utf-8").splitlines()[-1]
    n = len(recorded)
    assert last.startswith("flightlog: stopped; run core_job:watch:"), last
    assert f"; {n} followed session{'s' if n > 1 else ''} no longer live, now {n} interrupted (" in last, last


def test_silent_after_sets_the_window_of_a_real_watch(tmp_path: Path) -> None:
    """``--silent-after 1``: a transcript found with new bytes, last modified 5 s ago (recent), is followed
    (``running``) but not published live, as nothing was heard from it within the second."""
    folder = tmp_path / "projects"
    folder.mkdir()
    session, path = transcript(folder, 4, 10)
    back = time.time() - 5
    os.utime(path, (back, back))
    proc, out, err = _watch(tmp_path, "--silent-after", "1")
    try:
        _wait_for_line(proc, out, r"\+\d+ events from ")  # printed once the import and follow ended
        with SqliteStore(tmp_path / "db.sqlite", read_only=True) as store:
            assert store.get_session(session).status == "running"
            assert store.live_runs() == []
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=TIMEOUT_S) == 0, err.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
