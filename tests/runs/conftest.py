"""Fixtures and event builders for the run-view tests (seed 002)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import flightlog.runs  # noqa: F401  (registers the projector)
from flightlog import events as ev
from flightlog.events import CancellationReason, Event
from flightlog.messages import Message, ToolCall, ToolResult
from flightlog.recorder import Recorder
from flightlog.store import SqliteStore


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "runs.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[SqliteStore]:
    with SqliteStore(db_path) as s:
        yield s


def record(store: SqliteStore, session_id: str, events: Sequence[Event], **create: Any) -> Recorder:
    """Create a session and append ``events`` one transaction each."""
    recorder = Recorder.create(store, session_id=session_id, **create)
    for event in events:
        recorder.append(event)
    return recorder


# ─── event builders ───────────────────────────────────────────────────────────────────────────


def started(run_id: str = "r1") -> ev.RunStarted:
    return ev.RunStarted(run_id=run_id, goal="do the thing")


def checkpoint(turn: int = 1) -> ev.CheckpointTaken:
    return ev.CheckpointTaken(turn=turn, history_len=1)


def llm(turn: int = 1, *calls: str) -> ev.LlmCompleted:
    message = Message.text("assistant", "ok").model_copy(
        update={"tool_calls": [ToolCall(id=c, name="shell") for c in calls]}
    )
    return ev.LlmCompleted(turn=turn, message=message)


def requested(*call_ids: str, turn: int = 1) -> ev.ToolRequested:
    return ev.ToolRequested(turn=turn, calls=[ToolCall(id=c, name="shell", arguments="{}") for c in call_ids])


def completed(*call_ids: str, turn: int = 1) -> ev.ToolCompleted:
    return ev.ToolCompleted(turn=turn, results=[ToolResult(call_id=c, output="done") for c in call_ids])


def denied(call_id: str, turn: int = 1) -> ev.ToolDenied:
    return ev.ToolDenied(turn=turn, call_id=call_id, tool_name="shell", reason="policy")


def gated(call_id: str, turn: int = 1) -> ev.ToolGated:
    return ev.ToolGated(turn=turn, call_id=call_id, tool="shell", reason="needs approval")


def suspended(reason: str, *pending: str) -> ev.Suspended:
    return ev.Suspended(turn=1, reason=reason, pending_calls=list(pending))


def resumed(approved: Sequence[str] = (), rejected: Sequence[str] = ()) -> ev.Resumed:
    return ev.Resumed(turn=1, approved=list(approved), denied=list(rejected))


def cancelled(*pending: str) -> ev.OperationCancelled:
    return ev.OperationCancelled(
        turn=1, operation_id="op", reason=CancellationReason.USER, pending_call_ids=list(pending)
    )


def terminal(reason: str = "completed", turns: int = 1, tokens: int = 100) -> ev.RunTerminal:
    return ev.RunTerminal(reason=reason, turns_used=turns, total_tokens=tokens)


def custom(kind: str, payload: Any) -> ev.Custom:
    return ev.Custom(custom_kind=kind, payload=payload)


def process(
    agent_id: str, state: str, parent: str = "p", termination: str | None = None
) -> ev.AgentProcessChanged:
    return ev.AgentProcessChanged(
        turn=1,
        agent_id=agent_id,
        parent_session_id=parent,
        role="worker",
        isolation="none",
        context_inheritance="none",
        state=state,
        result_termination=termination,
    )


FOLD_EVENTS: list[Event] = [
    started(),
    checkpoint(),
    llm(1, "c1"),
    requested("c1"),
    requested("c2"),
    completed("c1"),
    completed("c2"),
    denied("c2"),
    gated("c1"),
    resumed(["c1"]),
    resumed([], ["c2"]),
    suspended("approval", "c1"),
    suspended("backoff"),
    cancelled("c1"),
    ev.Rollbacked(turn=1, checkpoint_history_len=0),
    ev.Rollbacked(turn=1, checkpoint_history_len=0, reason=ev.RollbackReason.ProviderFailure(error="no key")),
    ev.BudgetExceeded(turn=1, operation_id="o", budget="turns"),
    ev.PermissionRequested(turn=1, tool="rm", arguments="{}"),
    ev.PermissionResolved(turn=1, approved=True, responder="policy_gate"),
    ev.PageOut(turn=1, archive_ref="sha256:" + "ab" * 32),
    custom("token_usage", {"total_tokens": 5}),
    custom("codex.event_msg.token_count", {"info": {"total_token_usage": {"total_tokens": 40}}}),
    custom("codex.event_msg.token_count", {"info": {"total_token_usage": {"total_tokens": 7}}}),  # fell
    custom("budget_configured", {"max_steps": 9}),
    process("kid", "exited", termination="completed"),
    terminal("completed"),
    terminal("failed"),
    terminal("weird"),
]
"""One event of each shape the fold handles, for generated sequences (hypothesis ``sampled_from``)."""
