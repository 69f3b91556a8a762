"""Owner adapters (seed 002 contract): every state mapping, outcomes, budgets never invented, logical refs."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

import pydantic_core
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flightlog import events as ev
from flightlog.events import Event
from flightlog.importers import import_file
from flightlog.messages import ToolResult
from flightlog.runs import (
    AgentRunSnapshot,
    ProcessEntry,
    ReceiptKind,
    RunSource,
    RunState,
    SessionFold,
    SessionHeader,
    TerminalOutcome,
    combine,
    list_runs,
    outcome_for_reason,
    process_snapshot,
    refine_with_status,
    session_snapshot,
)
from flightlog.runs.adapters import (
    _FOLD_CHECKS,
    _HEADER_CHECKS,
    _HEADER_FIELDS,
    _SCALARS,
    FAILURE_CHARS,
    MAX_REFS,
    is_logical_ref,
    process_state,
)
from flightlog.runs.adapters import SessionFold as Fold
from flightlog.store import SessionRecord, SqliteStore

from .conftest import (
    FOLD_EVENTS,
    cancelled,
    checkpoint,
    completed,
    custom,
    denied,
    gated,
    llm,
    requested,
    resumed,
    started,
    suspended,
    terminal,
)

HANDLE = "sha256:" + "ab" * 32
SAMPLES = Path(__file__).resolve().parent.parent / "data" / "samples"


def fold(events: Sequence[Event], header: SessionHeader | None = None) -> SessionFold:
    return Fold(header or SessionHeader("s1")).feed_all(
        (seq, 1_000 + 10 * seq, event) for seq, event in enumerate(events)
    )


def snap(events: Sequence[Event], header: SessionHeader | None = None) -> AgentRunSnapshot:
    snapshot = fold(events, header).snapshot()
    assert snapshot.is_coherent()
    return snapshot


def wire(snapshot: AgentRunSnapshot) -> dict[str, object]:
    return json.loads(snapshot.model_dump_json())


# ─── state mapping (module docstring table) ───────────────────────────────────────────────────

STATE_CASES: list[tuple[str, list[Event], RunState]] = [
    ("events before run_started", [custom("import_source", {})], RunState.INITIALIZING),
    ("run_started", [started()], RunState.RUNNING),
    ("checkpoint before the model call", [started(), checkpoint()], RunState.WAITING_MODEL),
    ("model answered", [started(), checkpoint(), llm()], RunState.RUNNING),
    ("tool requested", [started(), llm(1, "c1"), requested("c1")], RunState.WAITING_TOOL),
    ("tool completed", [started(), requested("c1"), completed("c1")], RunState.RUNNING),
    ("one of two results", [started(), requested("c1", "c2"), completed("c1")], RunState.WAITING_TOOL),
    ("tool denied", [started(), requested("c1"), denied("c1")], RunState.RUNNING),
    ("tool gated", [started(), requested("c1"), gated("c1")], RunState.WAITING_INPUT),
    (
        "gate approved, tool runs",
        [started(), requested("c1"), gated("c1"), resumed(["c1"])],
        RunState.WAITING_TOOL,
    ),
    (
        "permission requested",
        [started(), ev.PermissionRequested(turn=1, tool="rm", arguments="{}")],
        RunState.WAITING_INPUT,
    ),
    (
        "permission resolved",
        [
            started(),
            ev.PermissionRequested(turn=1, tool="rm", arguments="{}"),
            ev.PermissionResolved(turn=1, approved=True, responder="user"),
        ],
        RunState.RUNNING,
    ),
    ("suspended for approval", [started(), suspended("awaiting approval", "c1")], RunState.WAITING_INPUT),
    ("suspended asking the user", [started(), suspended("question for the user")], RunState.WAITING_INPUT),
    ("suspended otherwise", [started(), suspended("rate limit backoff")], RunState.PAUSED),
    ("resumed", [started(), suspended("rate limit backoff"), resumed()], RunState.RUNNING),
    ("cancel requested", [started(), requested("c1"), cancelled("c1")], RunState.STOPPING),
    ("cancel beats a suspension", [started(), suspended("backoff"), cancelled()], RunState.STOPPING),
    ("progress after a cancel", [started(), cancelled(), checkpoint(2)], RunState.WAITING_MODEL),
    (
        "rollback drops the turn",
        [
            started(),
            checkpoint(),
            llm(1, "c1"),
            requested("c1"),
            ev.Rollbacked(turn=1, checkpoint_history_len=1),
        ],
        RunState.RUNNING,
    ),
    ("run_terminal", [started(), terminal()], RunState.TERMINAL),
    ("terminal after a cancel", [started(), cancelled(), terminal("aborted")], RunState.TERMINAL),
    ("events after the end", [started(), terminal(), custom("note", {})], RunState.TERMINAL),
    ("a new run after the end", [started(), terminal(), started("r2")], RunState.RUNNING),
    ("cancel after the end changes nothing", [started(), terminal(), cancelled()], RunState.TERMINAL),
]


@pytest.mark.parametrize(("name", "events", "expected"), STATE_CASES, ids=[c[0] for c in STATE_CASES])
def test_state_mapping(name: str, events: list[Event], expected: RunState) -> None:
    assert snap(events).state is expected


@pytest.mark.parametrize(
    ("reason", "outcome"),
    [
        ("completed", TerminalOutcome.COMPLETED),
        ("end_turn", TerminalOutcome.COMPLETED),
        ("failed", TerminalOutcome.FAILED),
        ("provider_failure", TerminalOutcome.FAILED),
        ("aborted", TerminalOutcome.CANCELLED),
        ("rewound", TerminalOutcome.CANCELLED),
        ("Cancelled", TerminalOutcome.CANCELLED),
        ("incomplete", TerminalOutcome.INTERRUPTED),
        ("interrupted", TerminalOutcome.INTERRUPTED),
        ("budget_exhausted", TerminalOutcome.BUDGET_EXHAUSTED),
        ("max_turns", TerminalOutcome.BUDGET_EXHAUSTED),
        ("context_overflow", TerminalOutcome.FAILED),
        ("something new", TerminalOutcome.FAILED),
    ],
)
def test_terminal_reason_maps_to_outcome_and_keeps_the_reason_as_detail(
    reason: str, outcome: TerminalOutcome
) -> None:
    snapshot = snap([started(), terminal(reason)])
    assert snapshot.terminal is not None
    assert snapshot.terminal.outcome is outcome
    assert snapshot.terminal.detail == reason


def test_unknown_reason_after_budget_exceeded_is_budget_exhausted() -> None:
    exceeded = ev.BudgetExceeded(turn=3, operation_id="op", budget="tokens")
    snapshot = snap([started(), exceeded, terminal("stopped by scheduler")])
    assert snapshot.terminal is not None
    assert snapshot.terminal.outcome is TerminalOutcome.BUDGET_EXHAUSTED
    assert snapshot.terminal.detail == "stopped by scheduler (tokens budget exceeded)"
    assert outcome_for_reason("whatever", budget_exceeded=True) is TerminalOutcome.BUDGET_EXHAUSTED


def test_context_overflow_is_a_failure_word_even_after_a_budget_exceeded() -> None:
    """The kernel's ``context_overflow`` (a request that cannot fit the window) is a known failed reason, not
    an unknown one that a recorded ``budget_exceeded`` would turn into ``budget_exhausted``."""
    assert outcome_for_reason("context_overflow", budget_exceeded=True) is TerminalOutcome.FAILED


def test_detail_is_one_short_line() -> None:
    snapshot = snap([started(), terminal("x" * 500 + "\n" + "secret-looking trace")])
    assert snapshot.terminal is not None and snapshot.terminal.detail is not None
    assert len(snapshot.terminal.detail) <= 120
    assert "\n" not in snapshot.terminal.detail


def _rolled(reason: ev.RollbackReasonT | None = None) -> ev.Rollbacked:
    return ev.Rollbacked(turn=1, checkpoint_history_len=1, reason=reason)


def _provider(error: str) -> ev.RollbackReasonT:
    return ev.RollbackReason.ProviderFailure(error=error)


def _fatal_turn(*, is_error: bool = True) -> ev.ToolCompleted:
    """The kernel's ``tool_completed`` of a turn committed after a fatal tool error (kernel.execution)."""
    return ev.ToolCompleted(
        turn=1,
        results=[
            ToolResult(call_id="c1", output="charged 500"),
            ToolResult(call_id="b1", output="FatalToolError: disk full", is_error=is_error),
        ],
    )


_OVERFLOW = {
    "turn": 1,
    "model": "tiny",
    "route_position": 0,
    "overflow_kind": "fixed_context",
    "required_tokens": 10500,
    "max_tokens": 900,
}
"""A ``context_budget_exceeded`` payload as the kernel writes it (kernel.activation_context)."""


FAILURE_CASES: list[tuple[str, list[Event], str]] = [
    (
        "provider failed for good (the kernel's rollback, run_terminal failed)",
        [started(), checkpoint(), _rolled(_provider("ProviderError: no API key")), terminal("failed")],
        "failed: provider_failure: ProviderError: no API key",
    ),
    (
        "fatal tool error",
        [
            started(),
            llm(1, "c1"),
            _rolled(ev.RollbackReason.FatalToolError(tool_name="shell", error="disk full")),
            terminal("failed"),
        ],
        "failed: fatal_tool_error: disk full",
    ),
    (
        "fatal tool error in a turn the kernel committed (a side effect of it had completed)",
        [started(), llm(1, "c1", "b1"), _fatal_turn(), custom("entropy_sample", {}), terminal("failed")],
        "failed: fatal_tool_error: disk full",
    ),
    (
        "a committed fatal turn retried: the model answered after it",
        [started(), llm(1, "c1", "b1"), _fatal_turn(), checkpoint(2), llm(2), terminal("failed")],
        "failed",
    ),
    (
        "a tool_completed holding no fatal result keeps the rollback's reason",
        [started(), _rolled(_provider("503")), ev.ToolCompleted(turn=1, results=[]), terminal("failed")],
        "failed: provider_failure: 503",
    ),
    (
        "a result that merely reads like a fatal one, not an error, says nothing",
        [started(), llm(1, "c1"), _fatal_turn(is_error=False), terminal("failed")],
        "failed",
    ),
    (
        "a request that cannot fit (the kernel's context_budget_exceeded, run_terminal context_overflow)",
        [started(), custom("context_budget_exceeded", _OVERFLOW), terminal("context_overflow")],
        "context_overflow: the system prompt and tools need ~10500 tokens, tiny's window holds 900 input tokens",
    ),
    (
        "a context_budget_exceeded the fold cannot read says nothing (no model recorded)",
        [
            started(),
            custom("context_budget_exceeded", {**_OVERFLOW, "model": None}),
            terminal("context_overflow"),
        ],
        "context_overflow",
    ),
    (
        "model call timed out",
        [started(), _rolled(ev.RollbackReason.Timeout()), terminal("failed")],
        "failed: timeout",
    ),
    (
        "a retry answered: the earlier failure is not why the run failed later",
        [started(), _rolled(_provider("503")), checkpoint(), llm(), terminal("failed")],
        "failed",
    ),
    (
        "out of budget while a retry waited: the outcome says why",
        [started(), _rolled(_provider("503")), terminal("budget_exhausted")],
        "budget_exhausted",
    ),
    (
        "the owner's own words are kept alone (LangGraph)",
        [
            started(),
            _rolled(ev.RollbackReason.FatalToolError(tool_name="tools", error="boom")),
            terminal("error in node tools: boom"),
        ],
        "error in node tools: boom",
    ),
    (
        "a rollback without a reason says nothing",
        [started(), _rolled(_provider("x")), _rolled(), terminal("failed")],
        "failed",
    ),
    (
        "a new run forgets the last one's rollback",
        [started(), _rolled(_provider("x")), terminal("failed"), started("r2"), terminal("failed")],
        "failed",
    ),
]


@pytest.mark.parametrize(("name", "events", "detail"), FAILURE_CASES, ids=[c[0] for c in FAILURE_CASES])
def test_a_failed_run_says_the_rollback_reason_its_ledger_recorded(
    name: str, events: list[Event], detail: str
) -> None:
    snapshot = snap(events)
    assert snapshot.terminal is not None and snapshot.terminal.detail == detail
    assert wire(snapshot)["terminal"]["detail"] == detail  # type: ignore[index]


def test_the_fold_keeps_the_failure_verbatim_but_bounded() -> None:
    error = "line one\n  line two " + "y" * 1_000
    made = fold([started(), _rolled(_provider(error)), terminal("failed")])
    assert made.failure is not None and len(made.failure) == FAILURE_CHARS
    assert made.failure == ("provider_failure: " + error)[: FAILURE_CHARS - 1] + "…"  # newline kept
    assert json.loads(json.dumps(made.to_json()))["failure"] == made.failure
    detail = made.snapshot().terminal.detail  # type: ignore[union-attr]
    assert detail is not None and len(detail) <= 120 and "\n" not in detail
    assert detail.startswith("failed: provider_failure: line one line two yyy")


# ─── budgets: recorded facts only ─────────────────────────────────────────────────────────────


def test_unknown_budget_and_timestamps_stay_off_the_wire() -> None:
    data = wire(snap([started(), checkpoint()]))
    assert data == {
        "run_id": "s1",
        "source": "direct",
        "state": "waiting_model",
        "budget": {"steps_taken": 0},
    }
    for key in ("parent", "terminal", "refs"):
        assert key not in data
    before_start = wire(snap([custom("import_source", {})]))
    assert before_start["budget"] == {}


def test_budget_configured_and_usage_customs() -> None:
    events = [
        custom("budget_configured", {"token_budget": 50_000, "max_steps": 40}),
        started(),
        llm(1),
        custom("token_usage", {"input_tokens": 100, "output_tokens": 20}),
        llm(2),
        custom("token_usage", {"total_tokens": 30}),
    ]
    budget = snap(events).budget
    assert (budget.token_budget, budget.max_steps, budget.tokens_used, budget.steps_taken) == (
        50_000,
        40,
        150,
        2,
    )
    assert budget.duration_ms is None  # in flight: no duration


def test_kernel_budget_limits_and_model_usage_records() -> None:
    events = [
        started(),
        custom("budget_limits", {"tokens": 20_000, "turns": 12, "wall_clock_ms": 60_000}),
        llm(1),
        custom("model_usage", {"turn": 1, "input_tokens": 900, "output_tokens": 100, "total_tokens": 1000}),
    ]
    budget = snap(events).budget
    assert (budget.token_budget, budget.max_steps, budget.tokens_used) == (20_000, 12, 1000)
    events.append(custom("budget_limits", {"cost": 5}))  # a later record without token/turn limits
    assert snap(events).budget.token_budget is None and snap(events).budget.max_steps is None


def test_bad_budget_payloads_are_not_invented_into_numbers() -> None:
    events = [
        custom("budget_configured", {"token_budget": -5, "max_steps": "forty"}),
        started(),
        custom("token_usage", {"total_tokens": True}),
    ]
    budget = snap(events).budget
    assert budget.token_budget is None and budget.max_steps is None and budget.tokens_used is None


def test_terminal_totals_sum_over_runs_and_replace_open_usage() -> None:
    events = [
        started(),
        custom("token_usage", {"total_tokens": 40}),
        terminal("completed", turns=2, tokens=50),
        started("r2"),
        llm(3),
        custom("token_usage", {"total_tokens": 7}),
    ]
    budget = snap(events).budget
    assert budget.tokens_used == 57
    assert budget.steps_taken == 3
    events.append(terminal("completed", turns=1, tokens=9))
    assert snap(events).budget.tokens_used == 59


def _codex_count(total: int | None) -> Event:
    info = None if total is None else {"total_token_usage": {"input_tokens": 1, "total_tokens": total}}
    return custom("codex.event_msg.token_count", {"info": info, "rate_limits": {}})


def test_a_codex_imports_running_total_counts_toward_its_open_run() -> None:
    """An import without ``--seal`` leaves its last run open: the rollout's ``token_count`` running
    total still gives its tokens, counted as the importer counts a run it ends (codex rule 2)."""
    events = [_codex_count(10), started(), _codex_count(None)]  # a count before the run; "info": null
    assert snap(events).budget.tokens_used is None  # nothing counted in this run yet
    events += [_codex_count(110), _codex_count(110), llm(1), _codex_count(250)]  # Codex writes each twice
    assert snap(events).budget.tokens_used == 240
    events += [terminal("completed", tokens=240), started("r2"), _codex_count(400)]
    assert snap(events).budget.tokens_used == 240 + 150  # the run's growth, the ended one's total kept
    events += [
        _codex_count(30)
    ]  # the running total fell (a new Codex session): the latest total, as the importer
    assert snap(events).budget.tokens_used == 240 + 30


def test_an_unsealed_codex_import_lists_the_tokens_its_rollout_counted(tmp_path: Path) -> None:
    rollout = SAMPLES / "codex" / "localpush_rollout-2026-02-23T20-34-25-019c8bfe.jsonl"
    tokens = []
    for seal in (False, True):
        with SqliteStore(tmp_path / f"seal-{seal}.db") as store:
            import_file(store, rollout, seal=seal)
            [run] = list_runs(store)
            tokens.append(run.budget.tokens_used)
    assert tokens == [299_496, 299_496]  # the sealed import's run_terminal.total_tokens, without it too


def test_duration_and_end_time_come_from_the_recorded_rows() -> None:
    snapshot = snap([custom("x", {}), started(), llm(), terminal()])
    assert snapshot.budget.duration_ms == 30  # rows stamped 1000, 1010, 1020, 1030
    assert snapshot.terminal is not None and snapshot.terminal.ended_at_ms == 1030


def test_imports_have_no_row_clock_only_their_own_duration() -> None:
    imported = SessionHeader("claude-code:x", imported=True)
    snapshot = snap([started(), terminal()], imported)
    assert snapshot.terminal is not None
    data = wire(snapshot)
    assert "duration_ms" not in data["budget"]  # type: ignore[operator]
    assert "ended_at_ms" not in data["terminal"]  # type: ignore[operator]
    hinted = snap([started(), terminal()], SessionHeader("c", imported=True, duration_hint_ms=38_799))
    assert hinted.budget.duration_ms == 38_799


# ─── refs: logical ids only ───────────────────────────────────────────────────────────────────


def test_approval_refs_follow_their_decisions() -> None:
    events = [
        started(),
        requested("c1", "c2", "c3", "c4"),
        gated("c1"),
        gated("c2"),
        gated("c3"),
        gated("c4"),
        resumed(["c1"], ["c2"]),
        denied("c3"),
        completed("c4"),
    ]
    refs = {r.reference: (r.kind, r.label) for r in snap(events).refs}
    assert refs == {
        "approval:s1:c1": (ReceiptKind.APPROVAL, "shell: approved"),
        "approval:s1:c2": (ReceiptKind.APPROVAL, "shell: denied"),
        "approval:s1:c3": (ReceiptKind.APPROVAL, "shell: denied"),
        "approval:s1:c4": (ReceiptKind.APPROVAL, "shell: resolved"),
    }


def test_permission_refs_are_decided_oldest_first() -> None:
    events = [
        started(),
        ev.PermissionRequested(turn=1, tool="rm", arguments="{}"),
        ev.PermissionRequested(turn=1, tool="mv", arguments="{}"),
        ev.PermissionResolved(turn=1, approved=False, responder="user"),
    ]
    assert [(r.reference, r.label) for r in snap(events).refs] == [
        ("approval:s1:permission-1", "rm: denied"),
        ("approval:s1:permission-2", "mv: pending"),
    ]


def test_artifact_gate_and_receipt_refs() -> None:
    events = [
        started(),
        ev.PageOut(turn=1, archive_ref=HANDLE, message_count=3),
        ev.PageOut(turn=1, archive_ref="/home/me/archive.json", message_count=3),
        ev.ContextRenewed(turn=2, sprint=2, handoff_ref="notes/handoff.md"),
        ev.MilestoneAdvanced(turn=2, phase_id="build"),
        ev.MilestoneBlocked(turn=3, phase_id="deploy", reason="tests red"),
        custom("external_effect_completed", {"key": "email-1", "result": {}}),
        custom("run_ref", {"kind": "receipt", "reference": "checkpoint:s1:7", "label": "signed checkpoint"}),
    ]
    refs = [(r.kind, r.reference, r.label) for r in snap(events).refs]
    assert refs == [
        (ReceiptKind.ARTIFACT, HANDLE, "page-out archive"),
        (ReceiptKind.GATE, "milestone:s1:build", "passed"),
        (ReceiptKind.GATE, "milestone:s1:deploy", "blocked"),
        (ReceiptKind.RECEIPT, "effect:s1:email-1", "effect completed"),
        (ReceiptKind.RECEIPT, "checkpoint:s1:7", "signed checkpoint"),
    ]


@pytest.mark.parametrize(
    "reference",
    ["/etc/passwd", "runs/a/result.md", "../up", "C:\\x", "~/.ssh/id", "has space", "", "a..b", "x" * 300],
)
def test_run_ref_that_looks_like_a_path_is_dropped(reference: str) -> None:
    assert not is_logical_ref(reference)
    events = [started(), custom("run_ref", {"kind": "artifact", "reference": reference})]
    assert snap(events).refs == []


def test_ids_with_separators_are_percent_encoded_never_paths() -> None:
    events = [started(), requested("a/b"), gated("a/b"), ev.MilestoneAdvanced(turn=1, phase_id="x\\y z")]
    refs = [r.reference for r in snap(events, SessionHeader("team/s 1")).refs]
    assert refs == ["approval:team%2Fs%201:a%2Fb", "milestone:team%2Fs%201:x%5Cy%20z"]
    assert all("/" not in r and "\\" not in r for r in refs)


def test_refs_are_capped_oldest_first() -> None:
    events: list[Event] = [started()]
    events += [gated(f"c{i}") for i in range(MAX_REFS + 5)]
    refs = snap(events).refs
    assert len(refs) == MAX_REFS
    assert refs[0].reference == "approval:s1:c5"


# ─── process-table entries, combination, status refinement ────────────────────────────────────


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ("queued", RunState.QUEUED),
        ("spawned", RunState.INITIALIZING),
        ("running", RunState.RUNNING),
        ("waiting_tool", RunState.WAITING_TOOL),
        ("Suspended", RunState.PAUSED),
        ("stopping", RunState.STOPPING),
        ("exited", RunState.TERMINAL),
        ("killed", RunState.TERMINAL),
        ("something-else", RunState.RUNNING),
    ],
)
def test_process_state_mapping(state: str, expected: RunState) -> None:
    assert process_state(state) is expected


def test_process_snapshot() -> None:
    exited = process_snapshot(ProcessEntry("child", "parent", 4, 10, "exited", "completed"))
    assert exited.parent == "parent" and exited.source is RunSource.DIRECT and exited.is_coherent()
    assert exited.terminal is not None
    assert (exited.terminal.outcome, exited.terminal.detail) == (
        TerminalOutcome.COMPLETED,
        "exited: completed",
    )
    killed = process_snapshot(ProcessEntry("child", "parent", 4, 10, "killed"))
    assert killed.terminal is not None and killed.terminal.outcome is TerminalOutcome.CANCELLED
    # the kernel's kill by a parent's abort is resumable: paused, alone or over the child's own ledger
    by_abort = ProcessEntry("child", "parent", 4, 10, "killed", result_termination="user_abort")
    assert (process_snapshot(by_abort).state, process_snapshot(by_abort).terminal) == (RunState.PAUSED, None)
    own = process_snapshot(ProcessEntry("child", "parent", 3, 9, "running")).model_copy(
        update={"parent": None}
    )
    assert combine(own, by_abort).state is RunState.RUNNING
    running = process_snapshot(ProcessEntry("child", "parent", 4, 10, "running"))
    assert wire(running) == {
        "run_id": "child",
        "parent": "parent",
        "source": "direct",
        "state": "running",
        "budget": {},
    }


def test_combine_child_ledger_decides_unless_the_parent_saw_it_end() -> None:
    child_running = snap([started()], SessionHeader("child"))
    child_done = snap([started(), terminal("failed")], SessionHeader("child", parent="p"))
    entry_running = ProcessEntry("child", "p", 1, 5, "running")
    entry_exited = ProcessEntry("child", "p", 2, 6, "exited", "completed")
    assert combine(child_running, entry_running).state is RunState.RUNNING
    assert combine(child_running, entry_running).parent == "p"
    ended = combine(child_running, entry_exited)
    assert ended.state is RunState.TERMINAL and ended.is_coherent()
    assert ended.terminal is not None and ended.terminal.outcome is TerminalOutcome.COMPLETED
    kept = combine(child_done, entry_exited)  # the child's own terminal outcome wins
    assert kept.terminal is not None and kept.terminal.outcome is TerminalOutcome.FAILED
    assert combine(None, entry_running).state is RunState.RUNNING
    assert combine(child_running, None) is child_running
    with pytest.raises(ValueError):
        combine(None, None)


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        ("completed", TerminalOutcome.COMPLETED),
        ("failed", TerminalOutcome.FAILED),
        ("aborted", TerminalOutcome.CANCELLED),
        ("incomplete", TerminalOutcome.INTERRUPTED),
        ("budget_exhausted", TerminalOutcome.BUDGET_EXHAUSTED),
        ("cancelled", None),
        ("running", None),
        ("suspended", None),
    ],
)
def test_status_refines_only_what_the_events_leave_in_flight(
    status: str, outcome: TerminalOutcome | None
) -> None:
    in_flight = snap([started(), requested("c1")])
    refined = refine_with_status(in_flight, status)
    assert refined.is_coherent()
    if status == "cancelled":  # the kernel's resumable stop: no process, continued by a resume
        assert refined.state is RunState.PAUSED and refined.terminal is None
    elif outcome is None:
        assert refined is in_flight
    else:
        assert refined.terminal is not None
        assert (refined.state, refined.terminal.outcome) == (RunState.TERMINAL, outcome)
        assert refined.terminal.ended_at_ms is None
        assert refined.terminal.detail == f"session marked {status}"
    ended = snap([started(), terminal("failed")])
    assert refine_with_status(ended, "completed") is ended  # events said it: status never overrides


def test_session_snapshot_from_a_record() -> None:
    record = SessionRecord(
        session_id="fleet-1",
        source="kernel",
        status="failed",
        parent_session_id="boss",
        metadata={"run_source": "fleet"},
    )
    snapshot = session_snapshot(record, [(0, 5, started()), (1, 6, llm())])
    assert (snapshot.run_id, snapshot.parent, snapshot.source) == ("fleet-1", "boss", RunSource.FLEET)
    assert snapshot.state is RunState.TERMINAL  # status refinement
    imported = SessionRecord(session_id="codex:1", source="import:codex", metadata={"run_source": "bogus"})
    assert SessionHeader.of(imported) == SessionHeader(
        "codex:1", "direct", None, True, None, from_import=True
    )
    assert SessionHeader.of(SessionRecord(session_id="t", source="task")).source == "task"


# ─── the fold: resumable, ordered, always coherent ───────────────────────────────────────────

EVENTS = st.sampled_from(FOLD_EVENTS)


@settings(max_examples=150, deadline=None)
@given(st.lists(EVENTS, max_size=30), st.data())
def test_fold_resumes_from_json_exactly_and_stays_coherent(events: list[Event], data: st.DataObject) -> None:
    whole = fold(events)
    cut = data.draw(st.integers(0, len(events)))
    first = fold(events[:cut])
    resumed_fold = SessionFold.from_json(json.loads(json.dumps(first.to_json())))
    resumed_fold.feed_all((seq, 1_000 + 10 * seq, e) for seq, e in enumerate(events) if seq >= cut)
    assert resumed_fold.to_json() == whole.to_json()
    snapshot = whole.snapshot()
    assert snapshot.is_coherent()
    assert AgentRunSnapshot.model_validate_json(snapshot.model_dump_json()) == snapshot


def test_fold_refuses_out_of_order_events() -> None:
    f = fold([started()])
    with pytest.raises(ValueError, match="ascending seq"):
        f.feed(0, 1, llm())


# ─── the snapshot's wire form without the models (the projection's render) ───────────────────

_ODD_TEXT = st.text(alphabet=st.characters(max_codepoint=0x2FF), max_size=8) | st.text(max_size=8)
HEADERS = st.builds(
    SessionHeader,
    _ODD_TEXT,
    st.sampled_from([s.value for s in RunSource]),
    st.none() | _ODD_TEXT,
    st.booleans(),
    st.none() | st.integers(0, 2**64 - 1),
)
_EDGES = [-(2**63) - 1, -(2**63), -1, 0, 2**32 - 1, 2**32, 2**63 - 1, 2**63, 2**64 - 1, 2**64]
_INT = st.sampled_from(_EDGES) | st.integers(-(2**65), 2**65) | st.booleans()
"""Values at and beyond every field's range too (and bools): there the models validate (and refuse)."""
OVERRIDES = st.fixed_dictionaries(
    {},
    optional={
        "token_budget": st.none() | _INT,
        "closed_tokens": st.none() | _INT,
        "open_tokens": st.none() | _INT,
        "max_steps": st.none() | _INT,
        "closed_turns": _INT,
        "terminal_at_ms": st.none() | _INT,
        "terminal_reason": st.none() | _ODD_TEXT,
        "refs": st.dictionaries(
            _ODD_TEXT,
            st.tuples(
                st.sampled_from([*(k.value for k in ReceiptKind), "nope"]),
                st.none() | _ODD_TEXT | st.just(3),
            ).map(list),
            max_size=3,
        ),
    },
)


@settings(max_examples=400, deadline=None)
@given(HEADERS, st.lists(EVENTS, max_size=20), OVERRIDES)
def test_snapshot_wire_is_the_models_wire_byte_for_byte(
    header: SessionHeader, events: list[Event], overrides: dict[str, object]
) -> None:
    """``snapshot_wire`` (what the projection renders every append with) gives the models' wire dict,
    keys in order, and ``pydantic_core.to_json`` of it the models' JSON; it leaves to the models exactly
    the folds whose values they would have to validate, and every fold an event history makes is its."""
    made = fold(events, header)
    assert made.snapshot_wire() is not None  # histories always take the plain path
    for name, value in overrides.items():
        setattr(made, name, value)
    wire = made.snapshot_wire()
    try:
        snapshot = made.snapshot()
    except ValueError:  # pydantic's ValidationError, or an unknown ReceiptKind
        assert wire is None
        return
    if wire is None:  # left to the models: only a value they convert (a bool for an integer)
        assert any(type(value) is bool for value in overrides.values())
        return
    assert wire == snapshot.to_wire() and list(wire) == list(snapshot.to_wire())
    assert pydantic_core.to_json(wire).decode() == snapshot.model_dump_json()


def _reference_to_json(f: SessionFold) -> dict[str, object]:
    """``SessionFold.to_json`` as it was written before the dict display (every scalar field read by name in
    sorted order, then the header's fields and copies of the containers), then without each member whose
    value is exactly its field's default (same type, equal), but ``last_seq`` and the header's
    ``session_id`` (FOLD_VERSION 5)."""
    state: dict[str, object] = {name: getattr(f, name) for name in _SCALARS}
    header = {name: getattr(f.header, name) for name in _HEADER_FIELDS}
    state["tools"], state["gates"], state["permissions"] = list(f.tools), dict(f.gates), list(f.permissions)
    state["refs"] = {reference: list(entry) for reference, entry in f.refs.items()}
    state["context"] = dict(f.context) if f.context is not None else None
    state = {k: v for k, v in state.items() if k == "last_seq" or not _default(SessionFold, k, v)}
    state["header"] = {
        k: v for k, v in header.items() if k == "session_id" or not _default(SessionHeader, k, v)
    }
    order = [*_SCALARS, "header", "tools", "gates", "permissions", "refs", "context"]
    return {k: state[k] for k in order if k in state}


def _default(cls: type, name: str, value: object) -> bool:
    """Whether ``value`` is exactly the default of ``cls``'s field ``name`` (same type, equal)."""
    spec = {f.name: f for f in dataclasses.fields(cls)}.get(name)
    if spec is None:
        return False
    if spec.default is not dataclasses.MISSING:
        default: object = spec.default
    elif spec.default_factory is not dataclasses.MISSING:
        default = spec.default_factory()
    else:
        return False
    return type(value) is type(default) and value == default


@settings(max_examples=200, deadline=None)
@given(HEADERS, st.lists(EVENTS, max_size=20), OVERRIDES)
def test_fold_to_json_keeps_every_field_in_its_stored_order(
    header: SessionHeader, events: list[Event], overrides: dict[str, object]
) -> None:
    """The stored fold text is ``to_json``'s JSON: its keys, their order and values are those of the
    field-by-name construction less the members at their defaults, for every field of the dataclass but
    ``processes``; it shares no container with the fold, and ``from_json`` of its JSON gives the fold back,
    every field of the same type, when every member holds what a fold can (else it refuses it, naming an
    edited member: a count ``False`` is not read back as ``0``, nor an unknown ref kind rendered later)."""
    made = fold(events, header)
    for name, value in overrides.items():
        setattr(made, name, value)
    state = made.to_json()
    reference = _reference_to_json(made)
    assert state == reference and list(state) == list(reference)
    assert list(state["header"]) == list(reference["header"])  # type: ignore[call-overload]
    assert json.dumps(state) == json.dumps(reference)
    for name in ("tools", "gates", "permissions", "refs"):
        if name in state:
            assert state[name] is not getattr(made, name)
    held = all(_a_fold_holds(name, value) for name, value in overrides.items())
    try:
        back = SessionFold.from_json(json.loads(json.dumps(state)))
    except ValueError as exc:
        assert not held, exc
        assert any(f"session fold field {name!r} holds " in str(exc) for name in overrides), exc
        return
    assert held and back == made
    for spec in dataclasses.fields(SessionFold):
        if spec.name != "processes":
            assert type(getattr(back, spec.name)) is type(getattr(made, spec.name)), spec.name


_RANGES = {
    "token_budget": (0, 2**64 - 1),
    "closed_tokens": (0, 2**64 - 1),
    "open_tokens": (0, 2**64 - 1),
    "closed_turns": (0, 2**64 - 1),
    "max_steps": (0, 2**32 - 1),
    "terminal_at_ms": (-(2**63), 2**63 - 1),
}
"""The values an event history can leave in each integer member :data:`OVERRIDES` sets (sums of events'
``U32``/``U64`` fields, a stored time)."""


def _a_fold_holds(name: str, value: object) -> bool:
    """Whether the fold of some event history can hold ``value`` in member ``name`` (of :data:`OVERRIDES`)."""
    if name == "refs":
        assert isinstance(value, dict)
        kinds = {k.value for k in ReceiptKind}
        return all(kind in kinds and (label is None or type(label) is str) for kind, label in value.values())
    if name == "terminal_reason" or (value is None and name != "closed_turns"):
        return True
    low, high = _RANGES[name]
    return type(value) is int and low <= value <= high


def test_fold_to_json_leaves_out_the_defaults() -> None:
    """A fresh fold stores its ``last_seq`` and session id only; what an event sets is stored."""
    empty = SessionFold(SessionHeader("s"))
    assert empty.to_json() == {"last_seq": -1, "header": {"session_id": "s"}}
    assert SessionFold.from_json(empty.to_json()) == empty
    made = fold([started(), checkpoint()], SessionHeader("s", RunSource.FLEET.value, "p"))
    stored = made.to_json()
    assert stored["phase"] == "open" and stored["awaiting_model"] is True
    assert stored["header"] == {"session_id": "s", "source": "fleet", "parent": "p"}
    assert "tools" not in stored and "context" not in stored and "stopping" not in stored


_STORED = {"last_seq": 3, "phase": "open", "header": {"session_id": "s"}}
"""A stored fold text's members (a run open at seq 3), for the edits below."""


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        ({"phase": 5}, "field 'phase' holds 5 (int), not str"),
        ({"phase": "opened"}, "field 'phase' holds 'opened' (str), not one of 'none', 'open', 'closed'"),
        ({"last_seq": True}, "field 'last_seq' holds True (bool), not int"),
        ({"closed_turns": -1}, "field 'closed_turns' holds -1 (int), not in 0..18446744073709551615"),
        ({"max_steps": 2**32}, "field 'max_steps' holds 4294967296 (int), not in 0..4294967295"),
        ({"open_tokens": 1.5}, "field 'open_tokens' holds 1.5 (float), not int or None"),
        ({"awaiting_model": 1}, "field 'awaiting_model' holds 1 (int), not bool"),
        ({"suspended": "asleep"}, "field 'suspended' holds 'asleep' (str), not one of 'input', 'paused'"),
        (
            {"terminal_reason": "\ud800"},
            "field 'terminal_reason' holds '\\ud800' (str), a string with a lone",
        ),
        ({"tools": "c1"}, "field 'tools' holds 'c1' (str), not a list"),
        ({"tools": ["c1", 2]}, "field 'tools' holds ['c1', 2] (list), item 1: not str"),
        ({"gates": {"c1": None}}, "field 'gates' holds {'c1': None} (dict), entry 'c1': not str"),
        ({"refs": {"r": "x"}}, "field 'refs' holds {'r': 'x'} (dict), entry 'r': not a [kind, label] pair"),
        ({"refs": {"r": ["nope", None]}}, "entry 'r': not one of 'artifact', 'gate', 'receipt', 'approval'"),
        ({"refs": {"r": ["gate", 3]}}, "field 'refs' holds {'r': ['gate', 3]} (dict), entry 'r': not str"),
        ({"context": {"turn": "1"}}, "field 'context' holds {'turn': '1'} (dict), not a context use"),
        ({"context": [1]}, "field 'context' holds [1] (list), not a context use"),
        ({"surprise": 1}, "session fold holds an unknown field 'surprise'"),
        ({"header": {"session_id": 7}}, "session fold header field 'session_id' holds 7 (int), not str"),
        (
            {"header": {"session_id": "s", "source": "nope"}},
            "header field 'source' holds 'nope' (str), not one of",
        ),
        (
            {"header": {"session_id": "s", "imported": "yes"}},
            "header field 'imported' holds 'yes' (str), not bool",
        ),
        ({"header": {"session_id": "s", "extra": 1}}, "session fold header holds an unknown field 'extra'"),
        ({"header": {"source": "fleet"}}, "session fold header lacks its 'session_id' field"),
        ({"header": "s"}, "session fold header is a str, not a JSON object"),
        ({"header": None}, "session fold header is a NoneType, not a JSON object"),
    ],
)
def test_a_stored_fold_that_no_history_makes_is_refused_naming_the_field(
    edit: dict[str, object], said: str
) -> None:
    """A stored fold text is unhashed (a raw write can change it): ``from_json`` refuses a member no event
    history leaves (the readers then fold the ledger: ``UnreadableRunRow``) instead of folding on from it
    and rendering, or failing, later."""
    assert Fold.from_json(dict(_STORED)).phase == "open"  # the unedited text reads
    with pytest.raises(ValueError, match=r"^session fold") as refused:
        Fold.from_json({**_STORED, **edit})
    assert said in str(refused.value)


def test_every_stored_member_has_its_check() -> None:
    """A member added to the fold (or its header) is refused by ``from_json`` until its check is written."""
    assert set(_FOLD_CHECKS) == {f.name for f in dataclasses.fields(Fold)} - {"processes"}
    assert set(_HEADER_CHECKS) == set(_HEADER_FIELDS)


@pytest.mark.parametrize("missing", ["last_seq", "header"])
def test_a_stored_fold_lacking_a_required_member_is_refused(missing: str) -> None:
    with pytest.raises(ValueError, match=rf"^session fold lacks its '{missing}' field$"):
        Fold.from_json({k: v for k, v in _STORED.items() if k != missing})
    with pytest.raises(ValueError, match=r"^session fold is a list, not a JSON object$"):
        Fold.from_json([_STORED])  # type: ignore[arg-type]


def _asked(call_id: str) -> list[Event]:
    """What the kernel (and the Agents SDK integration) record for one gated call: ``tool_gated`` and its
    ``permission_requested`` (which names no call)."""
    return [
        gated(call_id),
        ev.PermissionRequested(turn=1, tool="shell", arguments="{}", reason="needs approval"),
    ]


def _decided(call_id: str, approved: bool) -> list[Event]:
    """What ``flightlog approve``/``deny`` record: ``permission_resolved``, a denial, the decision record."""
    out: list[Event] = [ev.PermissionResolved(turn=1, approved=approved, responder="user")]
    if not approved:
        out.append(denied(call_id))
    payload = {"turn": 1, "call_id": call_id, "gate": "approval", "approved": approved, "responder": "alice"}
    return [*out, custom("approval_decision", payload)]


def test_one_gated_call_is_one_approval_ref_decided_in_any_order() -> None:
    # seed 002: a ref is "an approval record"; the kernel's approval is named by its call id (approve SID
    # CALL), so the permission_requested beside a tool_gated is the same approval, not a second one
    events = [
        started(),
        requested("c1", "c2"),
        *_asked("c1"),
        *_asked("c2"),
        suspended("approval", "c1", "c2"),
        *_decided("c2", False),  # the later call decided first
        *_decided("c1", True),
        resumed(["c1"], ["c2"]),
        completed("c1"),
    ]
    refs = [(r.reference, r.label) for r in snap(events).refs]
    assert refs == [("approval:s1:c1", "shell: approved"), ("approval:s1:c2", "shell: denied")]
    assert snap(events).state is RunState.RUNNING


def test_an_unanswered_permission_beside_a_gate_still_waits_for_input() -> None:
    snapshot = snap([started(), requested("c1"), *_asked("c1"), suspended("approval", "c1")])
    assert snapshot.state is RunState.WAITING_INPUT
    assert [(r.reference, r.label) for r in snapshot.refs] == [("approval:s1:c1", "shell: pending")]


@pytest.mark.parametrize(
    ("closing", "label"),
    [
        ([cancelled("c1")], "shell: cancelled"),
        ([ev.Rollbacked(turn=1, checkpoint_history_len=1)], "shell: superseded"),
        ([started("r2")], "shell: superseded"),
        ([terminal("failed")], "shell: run ended"),
    ],
)
def test_a_gate_closed_without_a_decision_is_no_longer_pending(closing: list[Event], label: str) -> None:
    events = [started(), requested("c1"), *_asked("c1"), suspended("approval", "c1"), *closing]
    assert [(r.reference, r.label) for r in snap(events).refs] == [("approval:s1:c1", label)]


def test_a_cancelled_gate_decided_and_resumed_later_says_so() -> None:
    # a kernel abort keeps the run resumable: its gate can still be approved, and the resume runs the call
    events = [
        started(),
        requested("c1"),
        *_asked("c1"),
        suspended("approval", "c1"),
        cancelled("c1"),
        *_decided("c1", True),
        resumed(["c1"]),
    ]
    assert [(r.reference, r.label) for r in snap(events).refs] == [("approval:s1:c1", "shell: approved")]


def test_a_permission_without_a_gate_closed_by_the_run_end_is_not_pending() -> None:
    events = [started(), ev.PermissionRequested(turn=1, tool="rm", arguments="{}"), terminal()]
    assert [(r.reference, r.label) for r in snap(events).refs] == [
        ("approval:s1:permission-1", "rm: run ended")
    ]
