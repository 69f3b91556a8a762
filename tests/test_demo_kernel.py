"""The kernel part of ``flightlog demo``: one run across five processes on the recorded-replay provider."""

from __future__ import annotations

import importlib.util
import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from flightlog.cli.demo_kernel import CASSETTE, RESPONDER, SPEC, run_kernel_demo
from flightlog.events import Custom, PermissionResolved, Resumed, RunTerminal, SessionEvent, Suspended
from flightlog.recorder import verify_session
from flightlog.sessions import iter_events
from flightlog.store import SqliteStore

CALL = "toolu_01YGzqpRE16Vricda3Aqcejo"


def _name(event: SessionEvent) -> str:
    return f"custom:{event.custom_kind}" if isinstance(event, Custom) else event.kind


def _in_order(names: list[str], wanted: list[str]) -> bool:
    """Whether ``wanted`` is a subsequence of ``names``."""
    rest = iter(names)
    return all(any(name == want for name in rest) for want in wanted)


def test_the_kernel_demo_suspends_approves_survives_a_kill_and_completes(tmp_path: Path) -> None:
    console = Console(file=io.StringIO(), width=200)
    work = tmp_path / "work"
    with SqliteStore(tmp_path / "demo.db") as store:
        code = run_kernel_demo(store, console, workdir=work)
        output = console.file.getvalue()  # type: ignore[attr-defined]
        assert code == 0, output

        (session,) = store.list_sessions()
        sid = session.session_id
        assert session.status == "completed"
        assert session.metadata["agent_spec"] == SPEC
        events = [event for _row, event in iter_events(store, sid)]
        report = verify_session(store, sid)
    names = [_name(e) for e in events]

    assert _in_order(
        names,
        [
            "run_started",
            "llm_completed",
            "tool_requested",
            "tool_gated",
            "permission_requested",
            "suspended",
            "permission_resolved",
            "custom:approval_decision",
            "resumed",
            "custom:external_effect_intent",
            "resumed",  # the process after the SIGKILL
            "custom:effect_reconciled",
            "custom:external_effect_completed",
            "tool_completed",
            "llm_completed",
            "run_terminal",
        ],
    ), names
    for once in (
        "custom:external_effect_intent",
        "custom:external_effect_completed",
        "custom:effect_reconciled",
        "tool_gated",
        "suspended",
        "run_terminal",
    ):
        assert names.count(once) == 1, (once, names)
    assert names.count("llm_completed") == 2 and names.count("resumed") == 2

    (suspended,) = [e for e in events if isinstance(e, Suspended)]
    assert (suspended.reason, list(suspended.pending_calls)) == ("approval", [CALL])
    (resolved,) = [e for e in events if isinstance(e, PermissionResolved)]
    assert (resolved.approved, resolved.responder) == (True, "user")  # seed 000: "user" | "policy_gate"
    (decision,) = [e for e in events if isinstance(e, Custom) and e.custom_kind == "approval_decision"]
    assert decision.payload["responder"] == RESPONDER  # the operator's name
    first, second = [e for e in events if isinstance(e, Resumed)]
    assert (list(first.approved), list(second.approved)) == ([CALL], [])
    (reconciled,) = [e for e in events if isinstance(e, Custom) and e.custom_kind == "effect_reconciled"]
    assert reconciled.payload["outcome"] == "completed"  # the lookup had happened: not run again
    (terminal,) = [e for e in events if isinstance(e, RunTerminal)]
    assert terminal.reason == "completed" and terminal.turns_used == 2
    assert report.ok and report.events == len(events)

    # The side effect happened exactly once, and every request of every process matched the recording.
    lookups = (work / "lookups.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lookups] == [{"key": f"{sid}:1:{CALL}", "country": "Mexico"}]
    journal = [json.loads(line) for line in (work / "replay.jsonl").read_text().splitlines()]
    assert [(e["index"], e["matched"], e["skipped"], e["differences"]) for e in journal] == [
        (0, True, [], []),
        (1, True, [0], []),
    ]
    assert journal[0]["pid"] != journal[1]["pid"]

    for step in ("a. run", "b. list", "c. approve", "d. resume", "e. resume again", "f. verify"):
        assert step in output
    assert CASSETTE in output and "killed (exit -9)" in output and "0 mismatches" in output


def test_the_kernel_demo_needs_a_database_file() -> None:
    console = Console(file=io.StringIO(), width=200)
    with SqliteStore(":memory:") as store:
        assert run_kernel_demo(store, console) == 0
    assert "skipped" in console.file.getvalue()  # type: ignore[attr-defined]


def test_the_kernel_demo_needs_the_providers_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    console = Console(file=io.StringIO(), width=200)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "anthropic" else real(name))
    with SqliteStore(tmp_path / "demo.db") as store:
        assert run_kernel_demo(store, console) == 0
        assert list(store.list_sessions()) == []
    assert "flightlog[providers]" in console.file.getvalue()  # type: ignore[attr-defined]


def test_the_demo_agent_runs_standalone_without_its_work_directory(tmp_path: Path) -> None:
    """``flightlog run flightlog.cli.demo_kernel:demo_agent`` (what ``flightlog demo`` prints) outside the
    demo, in its own process as a user runs it: before, the replay server could not write ``replay.jsonl``
    into the missing work directory, each request dumped a traceback and the run failed (exit 1); now the
    directory is made and the run goes to the approval it asks for (exit 3)."""
    import os
    import subprocess
    import sys

    from flightlog.cli.demo_kernel import DEMO_DIR_ENV, GOAL

    workdir = tmp_path / "not" / "made" / "yet"
    done = subprocess.run(
        [sys.executable, "-m", "flightlog", "--db", str(tmp_path / "x.db"), "run", SPEC, "--goal", GOAL],
        env={**os.environ, DEMO_DIR_ENV: str(workdir)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 3, output
    assert "Traceback" not in output and "waiting for approval" in output
    assert [json.loads(line)["matched"] for line in (workdir / "replay.jsonl").read_text().splitlines()] == [
        True
    ]


def test_the_demo_agent_names_a_work_directory_it_cannot_make(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from flightlog.cli import app
    from flightlog.cli.demo_kernel import DEMO_DIR_ENV, GOAL

    (tmp_path / "file").write_text("not a directory")
    workdir = tmp_path / "file" / "demo"
    result = CliRunner().invoke(
        app, ["--db", str(tmp_path / "x.db"), "run", SPEC, "--goal", GOAL], env={DEMO_DIR_ENV: str(workdir)}
    )
    assert result.exit_code == 2, result.stdout + result.stderr
    (line,) = result.stderr.splitlines()
    assert f"cannot create the demo's work directory {workdir}" in line and f"set {DEMO_DIR_ENV} to" in line


def test_a_replay_journal_in_a_missing_directory_is_refused_up_front(tmp_path: Path) -> None:
    from flightlog.providers.replay_server import ReplayServer

    journal = tmp_path / "gone" / "replay.jsonl"
    with pytest.raises(FileNotFoundError, match=f"replay journal {journal}: no directory {journal.parent}"):
        ReplayServer([], journal=journal)
