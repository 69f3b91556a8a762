"""``flightlog watch`` as a user runs it: a real process following a folder while a transcript is written
line by line; SIGKILLed and restarted, it records every event exactly once. Waits are for a state, with a
generous overall timeout (never a fixed sleep)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from flightlog.cli import app
from flightlog.encoding import decode_stored
from flightlog.errors import StoreUnavailable
from flightlog.events import Custom, RunTerminal
from flightlog.importers import import_file
from flightlog.importers.watch import RECENT_S, Watcher, default_folders, release_abandoned
from flightlog.live import DEFAULT_LEASE_MS, LiveRegistry, list_run_views
from flightlog.recorder import Recorder
from flightlog.runs.model import RunState
from flightlog.store import SqliteStore
from flightlog.web.app import create_app
from flightlog.web.security import Auth

SAMPLE = Path(__file__).parent / "data" / "samples" / "claude-code" / "spotter_tool_heavy.jsonl"
SAMPLE_ID = "d6e0bada-1959-4eec-a9d2-0bfade768d8f"
SESSION = f"claude-code:{SAMPLE_ID}"
TIMEOUT_S = 120.0
"""The overall deadline of a wait for a state: only a hang reaches it (a loaded machine starts a watch slowly)."""
SILENT_AFTER_AN_HOUR = ("--silent-after", "3600")
"""Watch options for a test that must not race the 30 s window a session mid-turn is heard from."""


def wait_for(check: Callable[[], Any], what: str, proc: subprocess.Popen[bytes] | None = None) -> Any:
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"watch exited ({proc.returncode}) before {what}")
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def ledger(db: Path, session_id: str) -> list[bytes] | None:
    """The session's event bytes after its ``import_source`` header, or None while it does not exist."""
    try:
        store = SqliteStore(db, read_only=True)
    except StoreUnavailable:  # not created yet by the watch
        return None
    with store:
        if not any(s.session_id == session_id for s in store.list_sessions()):
            return None
        return [row.event_bytes for row in store.read_events(session_id, start=1)]


def expected(tmp_path: Path, data: bytes) -> list[bytes]:
    """What one import of ``data`` records for the session (after the header)."""
    scratch = tmp_path / f"expected-{len(data)}"
    scratch.mkdir()
    (scratch / SAMPLE.name).write_bytes(data)
    with SqliteStore(scratch / "db.sqlite") as store:
        import_file(store, scratch / SAMPLE.name)
        return [row.event_bytes for row in store.read_events(SESSION, start=1)]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "FLIGHTLOG_KEY_DIR": str(tmp_path / "keys"),
        "FLIGHTLOG_HEAD_DIR": str(tmp_path / "heads"),
        "PYTHONUNBUFFERED": "1",
    }


@pytest.fixture
def start_watch(tmp_path: Path, env: dict[str, str]) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """Starts ``flightlog watch`` on ``tmp_path/projects`` (``*extra``: more options), its output in
    ``watch<N>.log``; kills what is still running at the end."""
    started: list[subprocess.Popen[bytes]] = []

    def start(*extra: str) -> subprocess.Popen[bytes]:
        command = [sys.executable, "-m", "flightlog", "--db", str(tmp_path / "db.sqlite"), "watch"]
        log = tmp_path / f"watch{len(started)}.log"
        with log.open("wb") as output:  # a file, not a pipe nobody reads (a full pipe would block it)
            proc = subprocess.Popen(
                [*command, str(tmp_path / "projects"), "--interval", "0.05", *extra],
                env=env,
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def runs_of(db: Path, job: str) -> list[tuple[str, str, list[Any]]]:
    with SqliteStore(db, read_only=True) as store:
        found = [s for s in store.list_sessions() if s.source == "core_job" and s.metadata.get("job") == job]
        return [
            (s.session_id, s.status, [decode_stored(r.event_bytes) for r in store.read_events(s.session_id)])
            for s in found
        ]


def test_watch_records_a_live_transcript_and_survives_sigkill(
    tmp_path: Path, start_watch: Callable[[], subprocess.Popen[bytes]]
) -> None:
    data = SAMPLE.read_bytes()
    lines = data.splitlines(keepends=True)
    db = tmp_path / "db.sqlite"
    transcript = tmp_path / "projects" / "-home-dev-spotter" / SAMPLE.name
    transcript.parent.mkdir(parents=True)
    watch = start_watch()

    # 1. Lines land one write at a time, the last one torn: the watch records the complete lines.
    first = b"".join(lines[:12])
    torn = lines[12][: len(lines[12]) // 2]
    with transcript.open("wb") as fh:
        fh.write(first + torn)
    want = expected(tmp_path, first)
    wait_for(lambda: ledger(db, SESSION) == want, "the first 12 lines", watch)
    for number in range(13, 20):
        with transcript.open("ab") as fh:
            fh.write(lines[number - 1][len(torn) :] if number == 13 else lines[number - 1])
        want = expected(tmp_path, b"".join(lines[:number]))
        wait_for(lambda want=want: ledger(db, SESSION) == want, f"line {number}", watch)

    # 2. SIGKILL, lines land while it is down, restart: each event is recorded once.
    watch.send_signal(signal.SIGKILL)
    watch.wait()
    with transcript.open("ab") as fh:
        fh.write(b"".join(lines[19:30]))
    watch = start_watch()
    want = expected(tmp_path, b"".join(lines[:30]))
    wait_for(lambda: ledger(db, SESSION) == want, "the lines written while it was down", watch)
    with transcript.open("ab") as fh:
        fh.write(b"".join(lines[30:]))
    want = expected(tmp_path, data)
    wait_for(lambda: ledger(db, SESSION) == want, "the rest of the file", watch)

    # 3. Its own runs: the killed watch ended as interrupted (by the restart), the second one cancelled
    # by SIGTERM (exit 0).
    watch.send_signal(signal.SIGTERM)
    assert watch.wait(timeout=TIMEOUT_S) == 0, (tmp_path / "watch1.log").read_text()
    assert f"{SESSION}  +" in (log := (tmp_path / "watch1.log").read_text()) and "(continued)" in log
    runs = {status: events for _, status, events in runs_of(db, "watch")}
    assert sorted(runs) == ["cancelled", "interrupted"]
    for status, events in runs.items():
        assert isinstance(events[-1], Custom) and events[-1].custom_kind == "session_sealed"
        terminal = next(e for e in reversed(events) if isinstance(e, RunTerminal))
        assert terminal.reason == status


def test_watcher_polls_only_changed_files_and_reports_unreadable_ones_once(tmp_path: Path) -> None:
    folder = tmp_path / "projects"
    folder.mkdir()
    (folder / "notes.jsonl").write_text('{"hello": "not a transcript"}\n')
    transcript = folder / SAMPLE.name
    transcript.write_bytes(SAMPLE.read_bytes())
    with SqliteStore(tmp_path / "db.sqlite") as store:
        watcher = Watcher(store, [folder, tmp_path / "missing"])
        first = {r.path.name: r for r in watcher.poll()}
        assert first["notes.jsonl"].error and "no format recognises" in first["notes.jsonl"].error
        assert first[SAMPLE.name].result is not None and first[SAMPLE.name].result.events > 0
        assert watcher.poll() == []  # nothing changed: nothing read
        with transcript.open("ab") as fh:
            fh.write(b"\n")
        (again,) = watcher.poll()
        assert again.result is not None and again.result.events == 0  # an empty line adds nothing


def test_default_folders_follow_codex_home() -> None:
    folders = default_folders({"HOME": "/home/u", "CODEX_HOME": "/opt/codex"})
    assert folders[:2] == [Path("/home/u/.claude/projects"), Path("/opt/codex/sessions")]
    assert default_folders({"HOME": "/home/u"})[1] == Path("/home/u/.codex/sessions")


def test_watch_refuses_a_file_given_as_folder(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["--db", str(tmp_path / "db"), "watch", str(SAMPLE)])
    assert result.exit_code == 2 and "is not a folder" in result.stderr


@pytest.mark.parametrize(("lines", "state"), [(10, RunState.RUNNING), (19, RunState.WAITING_INPUT)])
def test_a_followed_session_is_live_while_watched_and_the_ledger_decides_after(
    tmp_path: Path, lines: int, state: RunState
) -> None:
    """While a watch follows a transcript whose ledger holds an open run, ``ls`` says ``running`` and
    ``runs`` the live state (``running`` mid-turn; ``waiting_input`` when the file shows the run ended,
    "[Request interrupted by user]" is line 18, its end waiting for the next import: a session idle
    between prompts), never ``abandoned`` although the transcript's own times are months old. When the
    watch stops, the row says what the ledger holds again: ``incomplete`` (``interrupted``), no live
    record left. A plain import of the same lines says ``incomplete`` from the start."""
    folder = tmp_path / "projects"
    folder.mkdir()
    source = folder / SAMPLE.name
    source.write_bytes(b"".join(SAMPLE.read_bytes().splitlines(keepends=True)[:lines]))
    with SqliteStore(tmp_path / "plain.sqlite") as store:
        assert store.get_session(import_file(store, source).session_ids[0]).status == "incomplete"
    with SqliteStore(tmp_path / "db.sqlite") as store:
        watcher = Watcher(store, [folder])
        watcher.poll()
        assert store.get_session(SESSION).status == "running"
        (view,) = [v for v in list_run_views(store) if v.snapshot.run_id == SESSION]
        assert (view.snapshot.state, view.abandoned, view.live is not None) == (state, False, True)
        stop = threading.Event()
        stop.set()
        watcher.run(stop)  # returns at once: releases what it follows
        assert store.get_session(SESSION).status == "incomplete"
        assert store.live_runs() == []
        (view,) = [v for v in list_run_views(store) if v.snapshot.run_id == SESSION]
        assert view.snapshot.state is RunState.TERMINAL

        # a watch started again over the same bytes (recent, but nothing new: no sign of life) does not
        # claim the run is live; once the file grows it follows it, in the state the file gives
        again = Watcher(store, [folder])
        (report,) = again.poll()
        assert report.result is not None and report.result.duplicate
        assert store.get_session(SESSION).status == "incomplete"
        assert store.live_runs() == []
        with source.open("ab") as out:
            out.write(SAMPLE.read_bytes().splitlines(keepends=True)[lines])
        again.poll()
        assert store.get_session(SESSION).status == "running"
        assert SESSION in {r.run_id for r in store.live_runs()}


def test_an_old_transcript_found_at_start_is_not_shown_live_until_it_grows(tmp_path: Path) -> None:
    """A watch started over old sessions (a transcript last written more than ``RECENT_S`` ago) imports
    them but does not publish them ``running``: the ledger decides (``incomplete``, no live record). When
    the file grows while watched, the session is followed live from then on."""
    folder = tmp_path / "projects"
    folder.mkdir()
    source = folder / SAMPLE.name
    lines = SAMPLE.read_bytes().splitlines(keepends=True)
    source.write_bytes(b"".join(lines[:10]))
    old = time.time() - RECENT_S - 60
    os.utime(source, (old, old))
    with SqliteStore(tmp_path / "db.sqlite") as store:
        watcher = Watcher(store, [folder])
        watcher.poll()
        assert store.get_session(SESSION).status == "incomplete"
        assert store.live_runs() == []
        with source.open("ab") as out:
            out.write(b"".join(lines[10:12]))
        watcher.poll()
        assert store.get_session(SESSION).status == "running"
        assert SESSION in {r.run_id for r in store.live_runs()}


def test_watch_warns_once_about_a_missing_folder_and_still_follows_it(
    tmp_path: Path, start_watch: Callable[[], subprocess.Popen[bytes]]
) -> None:
    """A mistyped (or not yet created) folder is named in one warning on stderr, and still followed: a
    transcript written once it appears is recorded."""
    log = tmp_path / "watch0.log"
    watch = start_watch()  # follows tmp_path / "projects", which does not exist yet
    wait_for(lambda: log.exists() and "flightlog: watching" in log.read_text(), "the watch to start", watch)
    warning = f"flightlog: warning: {tmp_path / 'projects'} does not exist (yet)"
    assert log.read_text().count(warning) == 1
    transcript = tmp_path / "projects" / "-home-dev-spotter" / SAMPLE.name
    transcript.parent.mkdir(parents=True)
    transcript.write_bytes(SAMPLE.read_bytes())
    wait_for(lambda: ledger(tmp_path / "db.sqlite", SESSION), "the transcript in the new folder", watch)
    watch.send_signal(signal.SIGTERM)
    assert watch.wait(timeout=TIMEOUT_S) == 0
    assert log.read_text().count(warning) == 1


def live_states(db: Path) -> dict[str, str]:
    """The live records' states by run id ({} while the watch has not created the store)."""
    try:
        store = SqliteStore(db, read_only=True)
    except StoreUnavailable:
        return {}
    with store:
        return {record.run_id: record.state for record in store.live_runs()}


def runs_json(db: Path) -> list[dict[str, Any]]:
    """The dashboard's runs (``GET /api/runs``), the tree flattened."""

    @contextmanager
    def open_db(read_only: bool) -> Iterator[SqliteStore]:
        with SqliteStore(db, read_only=read_only) as store:
            yield store

    token = "test-token-0123456789abcdef"
    with TestClient(create_app(open_db, token=token), base_url="http://127.0.0.1:8000") as client:
        client.cookies.set("flightlog_ui_8000", Auth(token).cookie_value)
        response = client.get("/api/runs")
    assert response.status_code == 200, response.text
    flat, todo = [], list(response.json()["runs"])
    while todo:
        node = todo.pop()
        flat.append(node)
        todo.extend(node.get("children", []))
    return flat


def test_a_killed_watch_reads_abandoned_after_the_lease_and_the_next_one_sets_it_back(
    tmp_path: Path, start_watch: Callable[..., subprocess.Popen[bytes]]
) -> None:
    """A watch killed with SIGKILL (no release) leaves the sessions it followed ``running``, their live
    records no longer heartbeated. Within the lease ``runs`` shows their live states; once it lapsed (the
    records are aged past the lease here rather than waited for) ``runs``, ``ls`` and the dashboard read
    them ``abandoned``, in the state their events give, no outcome invented. The next watch sets them back
    to what their ledgers hold (``interrupted``, no live record): their files are recent but hold nothing
    new, so it does not claim them live (the old code published both ``running``) until one grows.

    No wall time is raced: the busy session is heard from (published, heartbeated) only while its file
    changed within ``--silent-after`` of the watch's clock, 30 s by default, counted from when the test
    wrote it; a loaded machine may start the watch later than that (the test once failed so). The window
    here is an hour, so what is published is decided by the files, and the lease is judged at fixed clocks
    (the last heartbeat, then past the lease) or by records aged past it."""
    lines = SAMPLE.read_bytes().splitlines(keepends=True)
    project = tmp_path / "projects" / "-home-dev-spotter"
    project.mkdir(parents=True)
    (project / SAMPLE.name).write_bytes(b"".join(lines[:19]))  # its run ended, the end not recorded yet
    busy_id = "0badcafe-1959-4eec-a9d2-0bfade768d8f"
    busy, busy_file = f"claude-code:{busy_id}", project / f"{busy_id}.jsonl"
    busy_file.write_bytes(b"".join(lines[:10]).replace(SAMPLE_ID.encode(), busy_id.encode()))  # mid-turn
    # written 90 s "ago" (as a loaded machine may start the watch): past the default 30 s window, still recent
    written = time.time() - 90
    os.utime(busy_file, (written, written))
    db = tmp_path / "db.sqlite"
    followed = {SESSION: "waiting_input", busy: "running"}
    watch = start_watch(*SILENT_AFTER_AN_HOUR)
    wait_for(lambda: followed.items() <= live_states(db).items(), "both sessions published live", watch)
    watch.send_signal(signal.SIGKILL)
    watch.wait()

    with SqliteStore(db) as store:
        records = [r for r in store.live_runs() if r.run_id in followed]
        last_beat = max(r.heartbeat_at_ms for r in records)
        within = {v.snapshot.run_id: v for v in list_run_views(store, now_ms=last_beat)}
        after = {v.snapshot.run_id: v for v in list_run_views(store, now_ms=last_beat + DEFAULT_LEASE_MS + 1)}
        for sid, state in followed.items():
            assert store.get_session(sid).status == "running"
            assert (within[sid].snapshot.state.value, within[sid].abandoned) == (state, False)
            assert (after[sid].abandoned, after[sid].live, after[sid].snapshot.terminal) == (True, None, None)
        for record in records:  # the lease lapses: as if 30 s passed since the last heartbeat
            store.put_live_run(replace(record, heartbeat_at_ms=record.heartbeat_at_ms - DEFAULT_LEASE_MS - 1))
    runs = CliRunner().invoke(app, ["--db", str(db), "runs"])
    ls = CliRunner().invoke(app, ["--db", str(db), "ls"])
    for sid in followed:
        assert any(sid in line and "abandoned (last seen" in line for line in runs.stdout.splitlines())
        assert f"{sid} is abandoned" in ls.stderr
    dashboard = {node["id"]: node for node in runs_json(db)}
    assert {sid: dashboard[sid]["liveness"] for sid in followed} == dict.fromkeys(followed, "abandoned")

    fresh = "ffffffff-1959-4eec-a9d2-0bfade768d8f"  # a new file: its line is printed once a poll ended
    (project / f"{fresh}.jsonl").write_bytes(b"".join(lines[:10]).replace(SAMPLE_ID.encode(), fresh.encode()))
    watch = start_watch(*SILENT_AFTER_AN_HOUR)
    log = tmp_path / "watch1.log"
    wait_for(lambda: log.exists() and f"from {fresh}.jsonl" in log.read_text(), "the first poll", watch)
    with SqliteStore(db, read_only=True) as store:
        views = {v.snapshot.run_id: v for v in list_run_views(store)}
        for sid in followed:
            assert store.get_session(sid).status == "incomplete"
            assert views[sid].snapshot.terminal is not None and not views[sid].abandoned
        assert not followed.keys() & live_states(db).keys()
    # both sessions and the idle one's background task (a child run of its own, followed with it)
    assert "3 session(s) the killed watch followed" in log.read_text()
    with busy_file.open("ab") as out:  # the busy session goes on: followed live again
        out.write(lines[10].replace(SAMPLE_ID.encode(), busy_id.encode()))
    wait_for(lambda: live_states(db).get(busy) == "running", "the grown session published again", watch)
    watch.send_signal(signal.SIGTERM)
    assert watch.wait(timeout=TIMEOUT_S) == 0
    assert live_states(db) == {}


def test_release_abandoned_clears_only_the_imports_the_killed_processes_published(tmp_path: Path) -> None:
    """A live record of another process (another pid, or the same pid on another host), or of a session
    that is not an import (a kernel run), is not a killed watch's to set back."""
    folder = tmp_path / "projects"
    folder.mkdir()
    (folder / SAMPLE.name).write_bytes(b"".join(SAMPLE.read_bytes().splitlines(keepends=True)[:10]))
    with SqliteStore(tmp_path / "db.sqlite") as store:
        Watcher(store, [folder]).poll()  # followed, never released: as a killed watch leaves it
        Recorder.create(store, session_id="kernel-run", task="t", status="running")
        LiveRegistry(store).publish("kernel-run", RunState.WAITING_MODEL)
        mine = os.getpid()
        assert release_abandoned(store, [mine + 1]) == []
        (published,) = (r for r in store.live_runs() if r.run_id == SESSION)
        store.put_live_run(replace(published, host="elsewhere/boot/1"))  # the same pid on another host
        assert release_abandoned(store, [mine]) == []
        store.put_live_run(published)
        assert release_abandoned(store, [mine]) == [SESSION]
        assert store.get_session(SESSION).status == "incomplete"
        assert [r.run_id for r in store.live_runs()] == ["kernel-run"]


def test_a_heartbeat_round_is_one_transaction(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every followed session's heartbeat is written in one transaction per round (one commit: one fsync
    on SQLite), at one clock reading, not one transaction per session."""
    folder = tmp_path / "projects"
    folder.mkdir()
    head = b"".join(SAMPLE.read_bytes().splitlines(keepends=True)[:10])
    for number in range(3):
        other = f"{number:08x}-1959-4eec-a9d2-0bfade768d8f"
        (folder / f"{other}.jsonl").write_bytes(head.replace(SAMPLE_ID.encode(), other.encode()))
    with SqliteStore(tmp_path / "db.sqlite") as store:
        watcher = Watcher(store, [folder])
        watcher.poll()
        before = {r.run_id: r.heartbeat_at_ms for r in store.live_runs()}
        opened = []
        transaction = store.transaction

        def counted() -> AbstractContextManager[None]:
            opened.append(1)
            return transaction()

        monkeypatch.setattr(store, "transaction", counted)
        time.sleep(0.002)  # the next heartbeat is a later ms than the publication
        assert watcher.heartbeat() == 3
        assert len(opened) == 1
        beats = {r.run_id: r.heartbeat_at_ms for r in store.live_runs()}
        assert beats.keys() == before.keys() and len(set(beats.values())) == 1
        assert all(beats[sid] > before[sid] for sid in beats)
