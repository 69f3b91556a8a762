"""Seed 002 (``codewhale_protocol/agent_run.rs``) tests, ported one for one, plus wire-format edges."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from flightlog.runs import (
    AgentRunSnapshot,
    BudgetSummary,
    ReceiptKind,
    ReceiptRef,
    RunSource,
    RunState,
    TerminalOutcome,
    TerminalSummary,
)

ALL_STATES = [
    RunState.QUEUED,
    RunState.INITIALIZING,
    RunState.RUNNING,
    RunState.WAITING_MODEL,
    RunState.WAITING_TOOL,
    RunState.WAITING_INPUT,
    RunState.PAUSED,
    RunState.STOPPING,
    RunState.TERMINAL,
]


def full_snapshot() -> AgentRunSnapshot:
    return AgentRunSnapshot(
        run_id="agent_1234abcd",
        parent="agent_00ff00ff",
        source=RunSource.DIRECT,
        state=RunState.TERMINAL,
        budget=BudgetSummary(
            token_budget=50_000, tokens_used=12_345, steps_taken=7, max_steps=40, duration_ms=93_000
        ),
        terminal=TerminalSummary(
            outcome=TerminalOutcome.COMPLETED, ended_at_ms=1_800_000_000_000, detail="verified build"
        ),
        refs=[
            ReceiptRef(kind=ReceiptKind.ARTIFACT, reference="runs/agent_1234abcd/result.md", label="result")
        ],
    )


def minimal_snapshot() -> AgentRunSnapshot:
    return AgentRunSnapshot(run_id="job-42", source=RunSource.CORE_JOB, state=RunState.QUEUED)


def test_full_snapshot_round_trips() -> None:
    snapshot = full_snapshot()
    text = snapshot.model_dump_json()
    back = AgentRunSnapshot.model_validate_json(text)
    assert back == snapshot
    assert back.is_coherent()


def test_minimal_snapshot_round_trips_and_skips_empty_fields() -> None:
    snapshot = minimal_snapshot()
    text = snapshot.model_dump_json()
    # Optional/empty fields stay off the wire entirely.
    assert "parent" not in text
    assert "terminal" not in text
    assert "refs" not in text
    assert "token_budget" not in text
    back = AgentRunSnapshot.model_validate_json(text)
    assert back == snapshot
    assert back.is_coherent()


def test_enum_wire_names_are_snake_case_and_stable() -> None:
    assert json.dumps(RunSource.CORE_JOB) == '"core_job"'
    assert json.dumps(RunState.WAITING_MODEL) == '"waiting_model"'
    assert json.dumps(TerminalOutcome.BUDGET_EXHAUSTED) == '"budget_exhausted"'
    assert json.dumps(ReceiptKind.GATE) == '"gate"'
    # Every state deserializes back to itself.
    for state in ALL_STATES:
        text = json.dumps(state)
        assert RunState(json.loads(text)) is state
        wire = AgentRunSnapshot(run_id="r", source=RunSource.TASK, state=state).model_dump_json()
        assert AgentRunSnapshot.model_validate_json(wire).state is state


def test_run_state_status_trait_partitions_all_states() -> None:
    assert list(RunState) == ALL_STATES
    for state in ALL_STATES:
        classifications = [state.is_terminal(), state.is_active(), state.is_paused()]
        assert classifications.count(True) == 1, (
            f"state {state!r} must be exactly one of terminal/active/paused"
        )


def test_incoherent_snapshot_is_detectable() -> None:
    snapshot = minimal_snapshot().model_copy(
        update={"terminal": TerminalSummary(outcome=TerminalOutcome.COMPLETED)}
    )
    assert not snapshot.is_coherent()
    terminal_without_summary = minimal_snapshot().model_copy(update={"state": RunState.TERMINAL})
    assert not terminal_without_summary.is_coherent()


# ─── wire edges beyond the seed's tests ───────────────────────────────────────────────────────


def test_exact_wire_bytes_match_serde() -> None:
    """serde_json::to_string output: declaration order, compact, budget always present."""
    assert minimal_snapshot().model_dump_json() == (
        '{"run_id":"job-42","source":"core_job","state":"queued","budget":{}}'
    )
    assert full_snapshot().model_dump_json() == (
        '{"run_id":"agent_1234abcd","parent":"agent_00ff00ff","source":"direct","state":"terminal",'
        '"budget":{"token_budget":50000,"tokens_used":12345,"steps_taken":7,"max_steps":40,'
        '"duration_ms":93000},"terminal":{"outcome":"completed","ended_at_ms":1800000000000,'
        '"detail":"verified build"},"refs":[{"kind":"artifact","reference":"runs/agent_1234abcd/result.md",'
        '"label":"result"}]}'
    )


def test_budget_defaults_to_all_unknown_and_unknown_keys_are_ignored() -> None:
    snapshot = AgentRunSnapshot.model_validate_json(
        '{"run_id":"x","source":"fleet","state":"paused","future_field":1}'
    )
    assert snapshot.budget == BudgetSummary()
    assert snapshot.refs == []
    assert snapshot.state.is_paused()


@pytest.mark.parametrize(
    "text",
    [
        '{"run_id":"x","source":"nope","state":"queued"}',
        '{"run_id":"x","source":"direct","state":"Running"}',
        '{"run_id":"x","source":"direct","state":"queued","budget":{"steps_taken":-1}}',
        '{"run_id":"x","source":"direct","state":"queued","budget":{"steps_taken":4294967296}}',
        '{"source":"direct","state":"queued"}',
    ],
)
def test_invalid_wire_is_rejected(text: str) -> None:
    with pytest.raises(ValidationError):
        AgentRunSnapshot.model_validate_json(text)
