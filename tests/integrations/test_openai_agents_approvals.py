"""``needs_approval`` across processes: an Agents SDK run interrupted in one process, decided in another
(through the SDK's RunState, or on the dashboard), resumed there; the gate, the decision with its approver
and the resume are in the ledger, so ``pending``, ``runs``, ``show`` and the dashboard see them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

import flightlog
from flightlog.cli import app
from flightlog.events import (
    Custom,
    PermissionRequested,
    Resumed,
    RunStarted,
    RunTerminal,
    Suspended,
    ToolGated,
)
from flightlog.integrations.openai_agents import APPROVAL_DECISION, session_id_for
from flightlog.kernel.records import APPROVAL_DECISION as KERNEL_APPROVAL_DECISION
from flightlog.recorder import verify_session
from flightlog.sessions import iter_events
from flightlog.store import SqliteStore
from flightlog.web.app import create_app
from flightlog.web.security import Auth

WORKER = Path(__file__).with_name("agents_approval_worker.py")
SID = session_id_for("support-1")
CALL = "call_refund_42"
TOKEN = "test-token-0123456789abcdef"
BASE = "http://127.0.0.1:8000"


def _step(db: Path, state: Path, *args: str, traced: bool = False) -> str:
    """Run one worker step in a fresh process; its last line (``final ...`` / ``suspended ...``)."""
    # traced: the worker replaces the SDK's processors by ours alone, so no export leaves the machine
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_AGENTS_DISABLE_TRACING"}
    done = subprocess.run(
        [sys.executable, str(WORKER), str(db), str(state), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "FLIGHTLOG_TEST_TRACED": "1"} if traced else None,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def _cli(db: Path, *args: str) -> str:
    result = CliRunner().invoke(app, ["--db", str(db), *args])
    assert result.exit_code == 0, result.output
    return result.output


def _events(db: Path) -> list[Any]:
    with flightlog.open_store(str(db)) as store:
        assert verify_session(store, SID).ok
        return [e for _row, e in iter_events(store, SID)]


def _run_state(db: Path) -> dict[str, Any]:
    (run,) = [r for r in json.loads(_cli(db, "runs", "--json")) if r["run_id"] == SID]
    return run  # type: ignore[no-any-return]


@pytest.fixture
def started(tmp_path: Path) -> tuple[Path, Path]:
    """A database holding a run interrupted on ``refund(order=42)``, and the saved RunState."""
    db, state = tmp_path / "agents.db", tmp_path / "state.json"
    assert _step(db, state, "start") == f"suspended {CALL}"
    return db, state


def test_the_gate_is_listed_by_pending_and_runs(started: tuple[Path, Path]) -> None:
    db, _ = started
    (row,) = json.loads(_cli(db, "pending", "--json"))
    assert (row["session_id"], row["call_id"], row["tool"], row["kind"]) == (SID, CALL, "refund", "approval")
    assert json.loads(row["arguments"]) == {"order": 42} and row["decision"] is None
    assert "refund" in _cli(db, "pending")
    assert _run_state(db)["state"] == "waiting_input"
    gated = [e for e in _events(db) if isinstance(e, ToolGated | PermissionRequested | Suspended)]
    assert [e.kind for e in gated] == ["tool_gated", "permission_requested", "suspended"]
    assert gated[2].reason == "approval" and gated[2].pending_calls == [CALL]


def test_approved_through_run_state_in_another_process(started: tuple[Path, Path]) -> None:
    db, state = started
    assert _step(db, state, "approve", "alice") == "final tool said: refunded order 42"
    events = _events(db)
    (decision,) = [e.payload for e in events if isinstance(e, Custom) and e.custom_kind == APPROVAL_DECISION]
    assert decision["call_id"] == CALL and decision["approved"] is True and decision["responder"] == "alice"
    (resumed,) = [e for e in events if isinstance(e, Resumed)]
    assert resumed.approved == [CALL] and resumed.denied == []
    assert [e.reason for e in events if isinstance(e, RunTerminal)] == ["completed"]
    assert json.loads(_cli(db, "pending", "--json")) == []
    run = _run_state(db)
    assert run["state"] == "terminal" and run["terminal"]["outcome"] == "completed"
    # one approval, one ref: the call's (its permission_requested is the same approval, seed 002)
    approvals = [(r["reference"], r["label"]) for r in run["refs"] if r["kind"] == "approval"]
    assert approvals == [(f"approval:{SID}:{CALL}", "refund: approved")]
    shown = _cli(db, "show", "support-1")
    assert f"call {CALL} approved by alice" in shown
    assert "refunded order 42" in shown  # the tool ran after the approval (its output is an item)


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_a_traced_run_decided_in_another_process_names_its_call(tmp_path: Path, decision: str) -> None:
    """Traced in both processes: the call is requested once (the gate) under the model's call id, its
    result recorded only when it ran (after an approval; a rejected call never runs), and the decision is
    anchored by a signed checkpoint; the finished session is ``completed``."""
    db, state = tmp_path / "agents.db", tmp_path / "state.json"
    assert _step(db, state, "start", traced=True) == f"suspended {CALL}"
    said = "refunded order 42" if decision == "approve" else "bob says no"
    assert _step(db, state, decision, "bob", traced=True) == f"final tool said: {said}"
    events = _events(db)
    assert [c.id for e in events if e.kind == "tool_requested" for c in e.calls] == [CALL]
    results = [(r.call_id, r.output) for e in events if e.kind == "tool_completed" for r in e.results]
    assert results == ([(CALL, "refunded order 42")] if decision == "approve" else [])
    assert [e.message.text_content() for e in events if e.kind == "llm_completed"] == [
        "",
        f"tool said: {said}",
    ]
    (report,) = json.loads(_cli(db, "audit", SID, "--json"))
    assert report["ok"] and report["unanchored"] is None, report
    (row,) = [r for r in json.loads(_cli(db, "ls", "--json")) if r["session_id"] == SID]
    assert row["status"] == "completed"


def test_denied_on_the_dashboard_then_resumed_in_another_process(started: tuple[Path, Path]) -> None:
    db, state = started

    def opener(read_only: bool) -> Any:
        return SqliteStore(db, read_only=read_only)

    auth = Auth(TOKEN)
    with TestClient(create_app(opener, token=TOKEN), base_url=BASE) as client:
        client.cookies.set("flightlog_ui_8000", auth.cookie_value)
        (pending,) = client.get("/api/runs").json()["pending"]
        assert (pending["session_id"], pending["call_id"], pending["tool"]) == (SID, CALL, "refund")
        decided = client.post(
            "/approvals/decide",
            data={
                "csrf": auth.csrf,
                "next": "/",
                "session_id": SID,
                "call_id": CALL,
                "decision": "deny",
                "operator": "Ada Lovelace",
                "reason": "not today",
            },
            headers={"Origin": BASE, "Accept": "application/json"},
        )
        assert decided.status_code == 200, decided.text
        # the hint names the SDK call that continues it (the app resumes it), not `flightlog resume`
        assert decided.json()["resume"] == "FlightlogSession.resume(state) in the Agents SDK app"
        waiting = client.get("/api/runs").json()["waiting"]
        assert [w["decisions"] for w in waiting] == [[f"{CALL} (refund) denied by Ada Lovelace"]]
        assert [w["command"] for w in waiting] == ["FlightlogSession.resume(state) in the Agents SDK app"]
    (row,) = json.loads(_cli(db, "pending", "--json"))
    assert (row["decision"], row["decided_by"]) == ("denied", "Ada Lovelace")
    assert "waiting for: FlightlogSession.resume(state) in the Agents SDK app" in _cli(db, "pending")

    assert _step(db, state, "resume") == "final tool said: not today"  # the SDK told the model the reason
    events = _events(db)
    (resumed,) = [e for e in events if isinstance(e, Resumed)]
    assert resumed.approved == [] and resumed.denied == [CALL]
    assert json.loads(_cli(db, "pending", "--json")) == []
    assert _run_state(db)["state"] == "terminal"
    assert "refunded order" not in _cli(db, "show", "support-1")  # the tool never ran


def test_rejected_through_run_state_records_the_approver_and_message(started: tuple[Path, Path]) -> None:
    db, state = started
    assert _step(db, state, "reject", "bob") == "final tool said: bob says no"
    events = _events(db)
    (denied,) = [e for e in events if e.kind == "tool_denied"]
    assert denied.reason == "bob says no" and denied.tool_name == "refund"
    (decision,) = [e.payload for e in events if isinstance(e, Custom) and e.custom_kind == APPROVAL_DECISION]
    assert (decision["approved"], decision["responder"]) == (False, "bob")


def test_resume_without_a_decision_refuses_and_writes_nothing(started: tuple[Path, Path]) -> None:
    db, state = started
    before = len(_events(db))
    done = subprocess.run(
        [sys.executable, str(WORKER), str(db), str(state), "resume"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert f"no decision recorded for call(s) {CALL}" in done.stderr
    assert len(_events(db)) == before


def test_the_record_kind_is_the_kernels() -> None:
    assert APPROVAL_DECISION == KERNEL_APPROVAL_DECISION


@pytest.fixture(autouse=True)
def _no_tracing_export(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")  # the workers make no network call
    yield


def test_a_state_loaded_again_after_its_resume_gets_the_same_decision(started: tuple[Path, Path]) -> None:
    """A process that recorded ``resumed`` and died before running: the next one resumes the saved state
    again; it gets the recorded decision and nothing is written twice."""
    import asyncio

    from agents import RunState

    from flightlog.integrations.openai_agents import FlightlogSession

    from .agents_approval_worker import AGENT

    db, state_file = started

    async def resume(approve: bool) -> bool | None:
        session = FlightlogSession("support-1", db)
        try:
            state: Any = await RunState.from_string(AGENT, state_file.read_text())
            (item,) = state.get_interruptions()
            if approve:
                await session.approve(state, item, by="carol")
            await session.resume(state)
            decided: bool | None = state._context.is_tool_approved("refund", CALL)
            return decided
        finally:
            session.close()

    assert asyncio.run(resume(approve=True)) is True
    count = len(_events(db))
    assert asyncio.run(resume(approve=False)) is True  # the ledger's decision, applied to the fresh state
    events = _events(db)
    assert len(events) == count
    assert len([e for e in events if isinstance(e, Resumed)]) == 1


def test_a_traced_runs_events_follow_its_run_started(tmp_path: Path) -> None:
    """The tracing processor records a run's model answers while it runs, before ``record_result``: the
    run is opened by its first traced event (goal: the input item the SDK added), so every run's events
    lie between its ``run_started`` and its end, across the processes that start, decide and rerun it."""
    db, state = tmp_path / "agents.db", tmp_path / "state.json"
    assert _step(db, state, "start", traced=True) == f"suspended {CALL}"
    assert _step(db, state, "approve", "bob", traced=True) == "final tool said: refunded order 42"
    # a second run of the session: the model sees the refund's result in the history and answers at once
    assert _step(db, state, "start", traced=True) == "final tool said: refunded order 42"
    events = _events(db)
    runs: list[list[str]] = []
    open_run = False
    for event in events:
        if isinstance(event, RunStarted):
            assert not open_run, "a run started inside another"
            open_run = True
            runs.append([event.goal])
        elif isinstance(event, RunTerminal):
            open_run = False
        elif not isinstance(event, Custom):
            assert open_run, f"{event.kind} outside a run"
            runs[-1].append(event.kind)
    assert [run[0] for run in runs] == ["Refund order 42", "Refund order 42"]
    assert runs[0][1:3] == ["llm_completed", "tool_requested"] and runs[1][1:] == ["llm_completed"]
