"""Replay folds: message reconstruction rules, pending calls, OS snapshot, provider seeds, truncation."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import flightlog.replay as replay_module
from flightlog.events import (
    KERNEL_OS_KINDS,
    SEED_KINDS,
    AgentProcessChanged,
    BudgetExceeded,
    BudgetUsageReported,
    CancellationReason,
    CapabilityChanged,
    CheckpointTaken,
    Compressed,
    ContextRenewed,
    Custom,
    EntropyAlert,
    EntropySample,
    LlmCompleted,
    MemoryKind,
    MemoryQueried,
    MemoryRetrievalResult,
    MemoryScope,
    MemoryValidationFailed,
    MemoryWritten,
    MilestoneAdvanced,
    MilestoneBlocked,
    OperationCancelled,
    PageIn,
    PageOut,
    PermissionRequested,
    PermissionResolved,
    ProviderReplay,
    Resumed,
    Rollbacked,
    RunStarted,
    RunTerminal,
    SessionEvent,
    SignalDeliveryDisposed,
    Suspended,
    ToolArgumentRepaired,
    ToolCompleted,
    ToolDenied,
    ToolGated,
    ToolRequested,
)
from flightlog.messages import (
    ImagePart,
    Message,
    RedactedThinkingPart,
    TextPart,
    ThinkingPart,
    ToolCall,
    ToolCallPart,
    ToolResult,
    ToolResultPart,
)
from flightlog.replay import (
    AGENTS_CLEAR,
    AGENTS_ITEM,
    AGENTS_POP,
    AGENTS_SESSION,
    TRUNCATION_SUFFIX,
    Rebuilder,
    agents_item_message,
    pending_tool_calls,
    provider_replay_seed,
    reconstruct,
    replay_is_native,
    system_prompt,
    truncate_utf8,
)

SCOPE = MemoryScope(tenant_id="t", namespace="n")
SUFFIX_BYTES = len(TRUNCATION_SUFFIX.encode())

# One minimal valid event of every seed kind, plus custom.
MINIMAL: dict[str, SessionEvent] = {
    "run_started": RunStarted(run_id="r", goal="g"),
    "llm_completed": LlmCompleted(turn=1, message=Message.text("assistant", "hi")),
    "tool_requested": ToolRequested(turn=1, calls=[ToolCall(id="c", name="t")]),
    "tool_completed": ToolCompleted(turn=1, results=[ToolResult(call_id="c")]),
    "compressed": Compressed(turn=1, archived_seq_range=(0, 1)),
    "page_out": PageOut(turn=1),
    "page_in": PageIn(turn=1, entry_count=1),
    "run_terminal": RunTerminal(reason="done", turns_used=1, total_tokens=1),
    "tool_argument_repaired": ToolArgumentRepaired(
        turn=1, tool="t", original_arguments="{", repaired_arguments="{}"
    ),
    "permission_requested": PermissionRequested(turn=1, tool="t", arguments="{}"),
    "permission_resolved": PermissionResolved(turn=1, approved=True, responder="user"),
    "tool_denied": ToolDenied(turn=1, call_id="c", tool_name="t", reason="no"),
    "capability_changed": CapabilityChanged(turn=1),
    "context_renewed": ContextRenewed(turn=1, sprint=1, handoff_ref="h"),
    "suspended": Suspended(turn=1, reason="wait"),
    "resumed": Resumed(turn=1),
    "tool_gated": ToolGated(turn=1, call_id="c", tool="t", reason="r"),
    "signal_delivery_disposed": SignalDeliveryDisposed(
        turn=1, operation_id="o", delivery_id="d", attempt=1, signal_id="s", disposition="x", queue_depth=0
    ),
    "budget_exceeded": BudgetExceeded(turn=1, operation_id="o", budget="tokens"),
    "budget_usage_reported": BudgetUsageReported(
        turn=1, operation_id="o", reservation_id="r", tokens=1, subagents=0, rounds=1
    ),
    "operation_cancelled": OperationCancelled(turn=1, operation_id="o", reason=CancellationReason.USER),
    "checkpoint_taken": CheckpointTaken(turn=1, history_len=0),
    "entropy_sample": EntropySample(
        turn=1,
        score=0.1,
        rho=0.0,
        repeat_pressure=0.0,
        failure_rate=0.0,
        rollbacks_in_window=0,
        window_turns=1,
    ),
    "entropy_alert": EntropyAlert(turn=1, score=0.9, threshold=0.5),
    "rollbacked": Rollbacked(turn=1, checkpoint_history_len=99),
    "agent_process_changed": AgentProcessChanged(
        turn=1,
        agent_id="a",
        parent_session_id="p",
        role="worker",
        isolation="none",
        context_inheritance="none",
        state="running",
    ),
    "milestone_advanced": MilestoneAdvanced(turn=1, phase_id="p1"),
    "milestone_blocked": MilestoneBlocked(turn=1, phase_id="p2", reason="tests fail"),
    "memory_written": MemoryWritten(
        turn=1, record_id="m", scope=SCOPE, memory_kind=MemoryKind.USER, name="n", size_bytes=1
    ),
    "memory_queried": MemoryQueried(
        turn=1, scope=SCOPE, query="q", requested_k=1, requires_async_response=False
    ),
    "memory_validation_failed": MemoryValidationFailed(turn=1, record_id="m", error="bad"),
    "memory_retrieval_result": MemoryRetrievalResult(hits=[]),
    "custom": Custom(custom_kind="x", payload={"a": 1}),
}

RULE_KINDS = {
    "run_started",
    "llm_completed",
    "tool_completed",
    "compressed",
    "context_renewed",
    "rollbacked",
    "milestone_advanced",
    "milestone_blocked",
}
SILENT_KINDS = sorted(set(MINIMAL) - RULE_KINDS)


def seqd(*events: SessionEvent, start: int = 0) -> list[tuple[int, SessionEvent]]:
    """Number events from ``start``."""
    return list(enumerate(events, start=start))


def test_system_prompt_is_the_last_run_started_s_as_of_at() -> None:
    events = seqd(
        RunStarted(run_id="a", goal="g", system_prompt="Be terse."),
        llm(1, "ok"),
        RunStarted(run_id="b", goal="h"),
        RunStarted(run_id="c", goal="i", system_prompt="Be kind."),
    )
    assert [system_prompt(events, at=at) for at in (0, 1, 2, 3)] == [
        "Be terse.",
        "Be terse.",
        None,
        "Be kind.",
    ]
    assert system_prompt(events) == "Be kind." and system_prompt(seqd(llm(1, "x"))) is None
    with pytest.raises(ValueError, match="ascending"):
        system_prompt([(1, llm(1, "x")), (0, llm(1, "y"))])


def llm(turn: int, text: str, replay: ProviderReplay | None = None) -> LlmCompleted:
    return LlmCompleted(turn=turn, message=Message.text("assistant", text), provider_replay=replay)


def texts(messages: Sequence[Message]) -> list[str]:
    """Each message's text, or its tool result output for tool messages."""
    return [
        "".join(p.output for p in m.content if isinstance(p, ToolResultPart))
        if m.role == "tool"
        else m.text_content()
        for m in messages
    ]


def test_minimal_events_cover_every_kind() -> None:
    assert set(MINIMAL) == set(SEED_KINDS) | {"custom"}
    assert all(MINIMAL[k].kind == k for k in MINIMAL)
    assert set(MINIMAL) >= KERNEL_OS_KINDS
    assert len(KERNEL_OS_KINDS) == 22


def test_module_is_pure() -> None:
    tree = ast.parse(Path(replay_module.__file__).read_text(encoding="utf-8"))
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    forbidden = ("sqlite3", "store", "recorder", "cli", "os", "io")
    assert not {name for name in imported for bad in forbidden if name.split(".")[-1] == bad}


# ─── run_started ──────────────────────────────────────────────────────────────────────────────


def test_run_started_goal_only() -> None:
    assert reconstruct(seqd(RunStarted(run_id="r", goal="Fix the bug"))) == [
        Message(role="user", content=[TextPart(text="Fix the bug")])
    ]


def test_run_started_with_criteria() -> None:
    event = RunStarted(run_id="r", goal="Fix it", criteria=["tests pass", "no lint"])
    assert reconstruct(seqd(event)) == [
        Message.text("user", "Fix it\n\nCriteria:\n1. tests pass\n2. no lint"),
    ]


def test_run_started_attachments_follow_the_text_in_the_same_message() -> None:
    image = ImagePart(ref="sha256:" + "0" * 64, media_type="image/png")
    event = RunStarted(run_id="r", goal="Look", criteria=["c"], attachments=[image, TextPart(text="note")])
    (message,) = reconstruct(seqd(event))
    assert message.role == "user"
    assert message.content == [TextPart(text="Look\n\nCriteria:\n1. c"), image, TextPart(text="note")]


def test_run_started_system_prompt_is_not_a_message() -> None:
    event = RunStarted(run_id="r", goal="g", system_prompt="You are terse.")
    assert texts(reconstruct(seqd(event))) == ["g"]


# ─── llm_completed, tool_completed ────────────────────────────────────────────────────────────


def test_llm_completed_message_as_is() -> None:
    message = Message(
        role="assistant",
        content=[ThinkingPart(thinking="hmm", signature="sig"), TextPart(text="ok")],
        tool_calls=[ToolCall(id="c1", name="ls", arguments='{"a":1}')],
    )
    assert reconstruct(seqd(LlmCompleted(turn=1, message=message))) == [message]


def test_tool_completed_one_tool_message_per_result() -> None:
    event = ToolCompleted(
        turn=1,
        results=[
            ToolResult(call_id="a", output="fine", token_count=3),
            ToolResult(call_id="b", output="boom", is_error=True),
        ],
    )
    assert reconstruct(seqd(event)) == [
        Message(role="tool", content=[ToolResultPart(call_id="a", output="fine", is_error=None)]),
        Message(role="tool", content=[ToolResultPart(call_id="b", output="boom", is_error=True)]),
    ]


class _Text(str):
    """A ``str`` subclass: validation stores a plain ``str``, so the assembled path must not take it."""


def _validated_tool_message(call_id: str, output: str, is_error: bool) -> Message:
    """The reference: what ``_tool_message`` built before it assembled its models (pydantic validation)."""
    part = ToolResultPart(call_id=call_id, output=output, is_error=True if is_error else None)
    return Message(role="tool", content=[part])


def _same_model(made: Message | ToolResultPart, reference: Message | ToolResultPart) -> None:
    assert type(made) is type(reference)
    assert made == reference
    assert list(made.__dict__.items()) == list(reference.__dict__.items())  # values and field order
    assert {k: type(v) for k, v in made.__dict__.items()} == {
        k: type(v) for k, v in reference.__dict__.items()
    }
    assert made.model_fields_set == reference.model_fields_set
    assert (made.__pydantic_extra__, made.__pydantic_private__) == (None, None)
    assert made.model_dump() == reference.model_dump()
    assert made.model_dump_json() == reference.model_dump_json()


@given(call_id=st.text(), output=st.text(), is_error=st.booleans(), subclass=st.booleans())
def test_tool_messages_assembled_equal_validated_ones(
    call_id: str, output: str, is_error: bool, subclass: bool
) -> None:
    """``_tool_message`` assembles its two models from a validated result's values without validating them
    again: the message, its part, their fields-set, dumps, copies and pickles equal the validated ones."""
    import copy
    import pickle

    if subclass:
        call_id = _Text(call_id)
    reference = _validated_tool_message(call_id, output, is_error)
    made = replay_module._tool_message(call_id, output, is_error)
    _same_model(made, reference)
    _same_model(made.content[0], reference.content[0])
    assert type(made.content[0].call_id) is str  # a subclass took the validating constructors
    assert (
        made.tool_calls == []
        and made.tool_calls is not replay_module._tool_message("c", "o", False).tool_calls
    )
    _same_model(pickle.loads(pickle.dumps(made)), reference)
    _same_model(copy.deepcopy(made), reference)
    moved = made.model_copy(update={"name": "n"})
    _same_model(moved, reference.model_copy(update={"name": "n"}))
    assert made.model_fields_set == {"role", "content"}  # the copy's update did not touch the original


def test_tool_messages_are_assembled_on_this_pydantic() -> None:
    """The import-time probe found the layout pydantic's validation leaves (else the fast path is off)."""
    assert replay_module._ASSEMBLE is True
    assert replay_module._assembly_matches() is True


def test_feed_all_folds_as_feed_does_event_by_event() -> None:
    events = list(
        seqd(
            RunStarted(run_id="r", goal="g"),
            LlmCompleted(turn=0, message=Message.text("assistant", "a")),
            ToolCompleted(turn=0, results=[ToolResult(call_id="c", output="o")]),
            Rollbacked(turn=0, checkpoint_history_len=2),
        )
    )
    one, many = Rebuilder(), Rebuilder()
    for seq, event in events:
        one.feed(seq, event)
    many.feed_all(iter(events))
    assert many.entries == one.entries
    assert [m.role for m in many.messages()] == ["user", "assistant"]


# ─── compressed, page_out, page_in, context_renewed ───────────────────────────────────────────


def compressed(turn: int, summary: str | None = "sum", seq_range: tuple[int, int] = (0, 1)) -> Compressed:
    return Compressed(turn=turn, archived_seq_range=seq_range, summary=summary)


def test_compressed_alone_is_a_system_summary() -> None:
    assert reconstruct(seqd(compressed(2))) == [Message.text("system", "[compressed turn 2] sum")]


def test_compressed_without_summary_gets_a_placeholder() -> None:
    (message,) = reconstruct(seqd(compressed(2, None)))
    assert message.role == "system"
    assert message.text_content() == "[compressed turn 2] (no summary recorded)"


def test_compressed_replaces_its_archived_range_by_the_summary_in_place() -> None:
    events = seqd(
        RunStarted(run_id="r", goal="g"),
        llm(1, "a"),
        ToolCompleted(turn=1, results=[ToolResult(call_id="c1", output="o1")]),
        llm(2, "b"),
        ToolCompleted(turn=2, results=[ToolResult(call_id="c2", output="o2")]),
        compressed(3, seq_range=(1, 2)),
        llm(3, "c"),
    )
    assert texts(reconstruct(events)) == ["g", "[compressed turn 3] sum", "b", "o2", "c"]


def test_no_archived_message_appears_beside_its_summary() -> None:
    events = seqd(llm(1, "a"), llm(2, "b"), compressed(3, seq_range=(0, 1)), llm(3, "c"))
    assert texts(reconstruct(events)) == ["[compressed turn 3] sum", "c"]


def test_a_later_compression_archives_the_earlier_summary_too() -> None:
    events = seqd(
        llm(1, "a"),
        llm(2, "b"),
        compressed(3, "first", seq_range=(0, 0)),
        llm(3, "c"),
        compressed(4, "second", seq_range=(1, 3)),
        llm(4, "d"),
    )
    assert texts(reconstruct(events)) == ["[compressed turn 4] second", "d"]


def test_a_range_with_no_message_left_puts_the_summary_last() -> None:
    events = seqd(llm(1, "a"), MINIMAL["custom"], compressed(2, seq_range=(1, 1)))
    assert texts(reconstruct(events)) == ["a", "[compressed turn 2] sum"]


def test_rollback_after_a_compression_truncates_the_compacted_history() -> None:
    events = seqd(llm(1, "a"), llm(2, "b"), compressed(3, seq_range=(0, 0)), llm(3, "c"))
    events.append((4, Rollbacked(turn=3, checkpoint_history_len=2)))
    assert texts(reconstruct(events)) == ["[compressed turn 3] sum", "b"]


def test_replay_at_a_seq_before_the_compression_shows_the_full_history() -> None:
    events = seqd(llm(1, "a"), llm(2, "b"), compressed(3, seq_range=(0, 0)), llm(3, "c"))
    assert texts(reconstruct(events, at=1)) == ["a", "b"]
    assert texts(reconstruct(events, at=2)) == ["[compressed turn 3] sum", "b"]


@pytest.mark.parametrize("ref", ["arc-1", None])
def test_page_out_adds_nothing_and_never_calls_the_loader(ref: str | None) -> None:
    def loader(ref: str) -> list[Message]:
        raise AssertionError("called")

    events = seqd(llm(1, "a"), compressed(2, seq_range=(0, 0)), PageOut(turn=2, summary="p", archive_ref=ref))
    assert texts(reconstruct(events, archive_loader=loader)) == ["[compressed turn 2] sum"]


def test_page_in_adds_nothing_its_entries_arrive_as_the_tool_result() -> None:
    events = seqd(
        llm(1, "a"),
        ToolCompleted(turn=1, results=[ToolResult(call_id="p", output="[archive x] q / a")]),
        PageIn(turn=1, entry_count=2),
    )
    assert texts(reconstruct(events)) == ["a", "[archive x] q / a"]


def test_context_renewed_restarts_from_the_handoff() -> None:
    handoff = [Message.text("user", "handoff: goal g, progress p")]
    events = seqd(
        RunStarted(run_id="r", goal="g"),
        llm(1, "a"),
        ContextRenewed(turn=1, sprint=1, handoff_ref="sha256:h"),
        llm(2, "b"),
    )
    result = reconstruct(events, archive_loader={"sha256:h": handoff}.get)
    assert texts(result) == ["handoff: goal g, progress p", "b"]


def raise_key_error(ref: str) -> list[Message]:
    raise KeyError(ref)


def raise_lookup_error(ref: str) -> list[Message]:
    raise LookupError(ref)


@pytest.mark.parametrize(
    "loader",
    [None, lambda ref: None, lambda ref: [], raise_key_error, raise_lookup_error],
    ids=["no-loader", "returns-none", "returns-empty", "key-error", "lookup-error"],
)
def test_context_renewed_without_its_handoff_leaves_a_note(loader: object) -> None:
    events = seqd(llm(1, "a"), ContextRenewed(turn=4, sprint=2, handoff_ref="sha256:h"))
    assert reconstruct(events, archive_loader=loader) == [  # type: ignore[arg-type]
        Message.text("system", "[context renewed turn 4, sprint 2] handoff sha256:h (not loaded)")
    ]


def test_context_renewed_other_loader_errors_propagate() -> None:
    def loader(ref: str) -> list[Message]:
        raise RuntimeError("archive down")

    with pytest.raises(RuntimeError, match="archive down"):
        reconstruct(seqd(ContextRenewed(turn=1, sprint=1, handoff_ref="h")), archive_loader=loader)


# ─── rollbacked, ignored kinds ────────────────────────────────────────────────────────────────


def test_rollbacked_truncates_the_history() -> None:
    events = seqd(
        RunStarted(run_id="r", goal="g"),
        llm(1, "a"),
        ToolCompleted(turn=1, results=[ToolResult(call_id="c", output="o")]),
        Rollbacked(turn=1, checkpoint_history_len=1),
        llm(1, "retry"),
    )
    assert texts(reconstruct(events)) == ["g", "retry"]


def test_rollbacked_to_a_longer_length_changes_nothing() -> None:
    events = seqd(llm(1, "a"), Rollbacked(turn=1, checkpoint_history_len=5))
    assert texts(reconstruct(events)) == ["a"]


@pytest.mark.parametrize("kind", SILENT_KINDS)
def test_other_kinds_contribute_nothing(kind: str) -> None:
    base: list[SessionEvent] = [RunStarted(run_id="r", goal="g"), llm(1, "a")]
    assert reconstruct(seqd(*base, MINIMAL[kind], llm(1, "b"))) == reconstruct(seqd(*base, llm(1, "b")))


def test_all_kernel_os_kinds_but_the_rule_kinds_are_silent() -> None:
    assert set(SILENT_KINDS) >= KERNEL_OS_KINDS - RULE_KINDS
    assert {
        "compressed",
        "context_renewed",
        "rollbacked",
        "milestone_advanced",
        "milestone_blocked",
    } == KERNEL_OS_KINDS & RULE_KINDS


def test_a_judged_milestone_is_a_user_message_the_model_sees_next() -> None:
    events = seqd(
        RunStarted(run_id="r", goal="g"),
        llm(1, "a"),
        MilestoneBlocked(turn=1, phase_id="p", reason="tests fail"),
        llm(2, "b"),
        MilestoneAdvanced(turn=2, phase_id="p", capabilities_unlocked=["Tool:deploy", "McpServer:fs"]),
    )
    history = reconstruct(events)
    assert [m.role for m in history] == ["user", "assistant", "user", "assistant", "user"]
    assert texts(history)[2] == "[MILESTONE BLOCKED: p — tests fail. Address the criteria and try again.]"
    assert texts(history)[4] == "[MILESTONE PASSED: p — unlocked: Tool:deploy, McpServer:fs]"


# ─── at= and streaming ────────────────────────────────────────────────────────────────────────


def session() -> list[tuple[int, SessionEvent]]:
    """A small session touching every rule, seqs starting at 10."""
    return seqd(
        RunStarted(run_id="r", goal="g", criteria=["c"]),
        CheckpointTaken(turn=1, history_len=1),
        llm(1, "a"),
        ToolRequested(turn=1, calls=[ToolCall(id="c1", name="t")]),
        ToolCompleted(turn=1, results=[ToolResult(call_id="c1", output="o")]),
        compressed(2, seq_range=(12, 14)),
        llm(2, "b"),
        PageOut(turn=2, summary="p", archive_ref="arc"),
        compressed(3, "kept"),
        llm(3, "c"),
        Rollbacked(turn=3, checkpoint_history_len=4),
        llm(4, "d"),
        MINIMAL["custom"],
        start=10,
    )


def loader(ref: str) -> list[Message] | None:
    return [Message.text("user", "archived")] if ref == "arc" else None


@pytest.mark.parametrize("at", range(8, 25))
def test_at_equals_the_fold_of_the_prefix(at: int) -> None:
    events = session()
    prefix = [(seq, event) for seq, event in events if seq <= at]
    assert reconstruct(events, at=at, archive_loader=loader) == reconstruct(prefix, archive_loader=loader)


def test_full_session_reconstruction() -> None:
    assert texts(reconstruct(session(), archive_loader=loader)) == [
        "g\n\nCriteria:\n1. c",
        "[compressed turn 2] sum",
        "b",
        "[compressed turn 3] kept",
        "d",
    ]


def guarded(events: list[tuple[int, SessionEvent]], last: int) -> Iterator[tuple[int, SessionEvent]]:
    """Yield events, failing if anything past seq ``last`` is pulled."""
    for seq, event in events:
        if seq > last:
            raise AssertionError(f"pulled seq {seq} past {last}")
        yield seq, event


@pytest.mark.parametrize("at", [10, 15, 16, 22])
def test_folds_never_pull_past_at(at: int) -> None:
    events = session()
    assert reconstruct(guarded(events, at), at=at) == reconstruct(events, at=at)
    assert pending_tool_calls(guarded(events, at), at=at) == pending_tool_calls(events, at=at)
    assert provider_replay_seed(guarded(events, at), "p", at=at) == []


def test_at_between_seqs_stops_at_the_first_later_seq() -> None:
    events = seqd(llm(1, "a"), llm(1, "b"), llm(1, "c"), start=0)
    gappy = [(seq * 2, event) for seq, event in events]  # seqs 0, 2, 4
    assert texts(reconstruct(guarded(gappy, 2), at=1)) == ["a"]


def test_iterator_is_consumed_once_lazily() -> None:
    pulled: list[int] = []

    def source() -> Iterator[tuple[int, SessionEvent]]:
        for seq, event in session():
            pulled.append(seq)
            yield seq, event

    reconstruct(source(), at=12)
    assert pulled == [10, 11, 12]


POOL: list[SessionEvent] = [
    RunStarted(run_id="r", goal="g"),
    llm(1, "a"),
    llm(2, "b"),
    ToolCompleted(turn=2, results=[ToolResult(call_id="c", output="o")]),
    compressed(1, "c1", seq_range=(0, 3)),
    compressed(2, "c2", seq_range=(2, 9)),
    compressed(2, "c3", seq_range=(5, 5)),
    PageOut(turn=1, summary="p1", archive_ref="arc"),
    PageOut(turn=2, summary="p2-noref"),
    PageIn(turn=2, entry_count=1),
    ContextRenewed(turn=2, sprint=1, handoff_ref="arc"),
    ContextRenewed(turn=2, sprint=2, handoff_ref="missing"),
    Rollbacked(turn=2, checkpoint_history_len=2),
    MINIMAL["custom"],
    MINIMAL["run_terminal"],
    MINIMAL["checkpoint_taken"],
]


def reference_reconstruct(events: list[tuple[int, SessionEvent]]) -> list[str]:
    """Naive reference of the rules: a list of (origin seq, text), texts only."""
    history: list[tuple[int, str]] = []
    for seq, event in events:
        if isinstance(event, Compressed):
            low, high = event.archived_seq_range
            hit = [i for i, (origin, _text) in enumerate(history) if low <= origin <= high]
            kept = [item for item in history if not low <= item[0] <= high]
            kept.insert(
                hit[0] if hit else len(kept), (seq, f"[compressed turn {event.turn}] {event.summary}")
            )
            history = kept
        elif isinstance(event, ContextRenewed):
            handoff = loader(event.handoff_ref)
            note = f"[context renewed turn {event.turn}, sprint {event.sprint}] handoff {event.handoff_ref} (not loaded)"
            history = [(seq, text) for text in (texts(handoff) if handoff else [note])]
        elif isinstance(event, Rollbacked):
            del history[event.checkpoint_history_len :]
        else:
            history += [(seq, text) for text in texts(reconstruct([(0, event)]))]
    return [text for _origin, text in history]


@given(st.lists(st.sampled_from(POOL), max_size=25), st.integers(min_value=0, max_value=25))
def test_streaming_fold_matches_the_reference(events: list[SessionEvent], at: int) -> None:
    numbered = seqd(*events)
    prefix = [(seq, event) for seq, event in numbered if seq <= at]
    result = reconstruct(guarded(numbered, at), at=at, archive_loader=loader)
    assert result == reconstruct(prefix, archive_loader=loader)
    assert texts(result) == reference_reconstruct(prefix)


def test_seqs_must_ascend() -> None:
    with pytest.raises(ValueError, match="ascending"):
        reconstruct([(1, llm(1, "a")), (1, llm(1, "b"))])


# ─── max_part_bytes ───────────────────────────────────────────────────────────────────────────


def test_max_part_bytes_cuts_text_thinking_and_tool_output() -> None:
    long = "é" * 100  # 200 bytes
    message = Message(
        role="assistant",
        content=[
            ThinkingPart(thinking=long, signature="s" * 100),
            TextPart(text=long),
            RedactedThinkingPart(data="d" * 100),
            ToolCallPart(id="c", name="t", arguments="a" * 100),
        ],
        tool_calls=[ToolCall(id="c2", name="t", arguments="b" * 100)],
    )
    events = seqd(
        LlmCompleted(turn=1, message=message),
        ToolCompleted(turn=1, results=[ToolResult(call_id="c", output=long)]),
    )
    clipped_msg, clipped_tool = reconstruct(events, max_part_bytes=50)
    cut = truncate_utf8(long, 50)
    assert cut.endswith(TRUNCATION_SUFFIX) and len(cut.encode()) <= 50
    assert clipped_msg.content == [
        ThinkingPart(thinking=cut),  # the signature signs the whole text: a cut part carries none
        TextPart(text=cut),
        RedactedThinkingPart(data="d" * 100),
        ToolCallPart(id="c", name="t", arguments="a" * 100),
    ]
    assert clipped_msg.tool_calls == message.tool_calls
    assert clipped_tool.content == [ToolResultPart(call_id="c", output=cut)]


def test_max_part_bytes_leaves_short_messages_identical() -> None:
    event = llm(1, "short")
    (message,) = reconstruct(seqd(event), max_part_bytes=100)
    assert message is event.message


def test_max_part_bytes_applies_to_handoff_messages() -> None:
    events = seqd(ContextRenewed(turn=1, sprint=1, handoff_ref="x"))
    (message,) = reconstruct(
        events, archive_loader=lambda ref: [Message.text("user", "x" * 100)], max_part_bytes=30
    )
    assert message.text_content() == "x" * (30 - SUFFIX_BYTES) + TRUNCATION_SUFFIX


def test_negative_max_part_bytes_is_refused() -> None:
    with pytest.raises(ValueError):
        reconstruct([], max_part_bytes=-1)


# ─── truncate_utf8 ────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("text", "max_bytes", "expected"),
    [
        ("abc", 3, "abc"),
        ("", 0, ""),
        ("abcd", 3, "abc"),
        ("€€€", 5, "€"),  # 9 bytes; no room for the suffix, no half euro
        ("😀" * 10, 3, ""),
        ("x" * 30, SUFFIX_BYTES, TRUNCATION_SUFFIX),
        ("x" * 30, SUFFIX_BYTES + 2, "xx" + TRUNCATION_SUFFIX),
        ("€" * 30, SUFFIX_BYTES + 5, "€" + TRUNCATION_SUFFIX),
    ],
)
def test_truncate_utf8_examples(text: str, max_bytes: int, expected: str) -> None:
    assert truncate_utf8(text, max_bytes) == expected


def test_truncate_utf8_refuses_negative() -> None:
    with pytest.raises(ValueError):
        truncate_utf8("x", -1)


@given(st.text(), st.integers(min_value=0, max_value=200))
def test_truncate_utf8_properties(text: str, max_bytes: int) -> None:
    result = truncate_utf8(text, max_bytes)
    size = len(result.encode("utf-8"))  # encodes: valid UTF-8, no split character
    assert size <= max_bytes
    if len(text.encode("utf-8")) <= max_bytes:
        assert result == text
        return
    has_suffix = max_bytes >= SUFFIX_BYTES
    prefix = result.removesuffix(TRUNCATION_SUFFIX) if has_suffix else result
    assert result.endswith(TRUNCATION_SUFFIX) == has_suffix
    assert text.startswith(prefix)
    budget = max_bytes - (SUFFIX_BYTES if has_suffix else 0)
    next_char = text[len(prefix)]
    assert len((prefix + next_char).encode("utf-8")) > budget  # the longest prefix that fits


# ─── pending_tool_calls ───────────────────────────────────────────────────────────────────────


def call(call_id: str) -> ToolCall:
    return ToolCall(id=call_id, name="t", arguments="{}")


def test_pending_calls_from_requests_and_llm_messages_in_request_order() -> None:
    message = Message(
        role="assistant",
        content=[ToolCallPart(id="c3", name="t", arguments="{}")],
        tool_calls=[call("c1")],
    )
    events = seqd(
        LlmCompleted(turn=1, message=message),
        ToolRequested(turn=1, calls=[call("c1"), call("c2"), call("c3")]),
    )
    assert [c.id for c in pending_tool_calls(events)] == ["c1", "c3", "c2"]


def test_completed_and_denied_calls_are_not_pending() -> None:
    events = seqd(
        ToolRequested(turn=1, calls=[call("a"), call("b"), call("c"), call("d")]),
        ToolCompleted(turn=1, results=[ToolResult(call_id="a", output="ok")]),
        ToolCompleted(turn=1, results=[ToolResult(call_id="b", output="err", is_error=True)]),
        ToolDenied(turn=1, call_id="c", tool_name="t", reason="policy"),
    )
    assert pending_tool_calls(events) == [call("d")]


def test_orphan_results_and_denials_are_ignored_and_settle_their_ids() -> None:
    events = seqd(
        ToolCompleted(turn=1, results=[ToolResult(call_id="ghost")]),
        ToolDenied(turn=1, call_id="phantom", tool_name="t", reason="r"),
        ToolRequested(turn=1, calls=[call("ghost"), call("live")]),
    )
    assert pending_tool_calls(events) == [call("live")]


def test_rollback_neither_cancels_nor_resurrects_calls() -> None:
    events = seqd(
        ToolRequested(turn=1, calls=[call("a"), call("b")]),
        ToolCompleted(turn=1, results=[ToolResult(call_id="a")]),
        Rollbacked(turn=1, checkpoint_history_len=0),
        ToolRequested(turn=1, calls=[call("a")]),
    )
    assert pending_tool_calls(events) == [call("b")]


def test_pending_calls_at_a_seq() -> None:
    events = seqd(
        ToolRequested(turn=1, calls=[call("a")]),
        ToolCompleted(turn=1, results=[ToolResult(call_id="a")]),
    )
    assert pending_tool_calls(events, at=0) == [call("a")]
    assert pending_tool_calls(events, at=1) == []


# ─── provider replay ──────────────────────────────────────────────────────────────────────────

ANTHROPIC = "anthropic.messages"


def native(text: str, protocol: str = ANTHROPIC) -> ProviderReplay:
    return ProviderReplay(protocol=protocol, native_blocks=[{"type": "text", "text": text}])


def test_provider_replay_seed_filters_by_protocol_with_seqs() -> None:
    events = seqd(
        RunStarted(run_id="r", goal="g"),
        llm(1, "a", native("a")),
        llm(2, "b", native("b", "openai.responses")),
        llm(3, "c", native("c")),
        llm(4, "d"),
    )
    assert provider_replay_seed(events, ANTHROPIC) == [(1, native("a")), (3, native("c"))]
    assert provider_replay_seed(events, ANTHROPIC, at=2) == [(1, native("a"))]
    assert provider_replay_seed(events, "openai.responses") == [(2, native("b", "openai.responses"))]


def test_provider_replay_seed_drops_rolled_back_turns() -> None:
    events = seqd(
        RunStarted(run_id="r", goal="g"),
        llm(1, "a", native("a")),
        llm(2, "b", native("b")),
        Rollbacked(turn=2, checkpoint_history_len=2),
        llm(2, "b2", native("b2")),
    )
    assert provider_replay_seed(events, ANTHROPIC) == [(1, native("a")), (4, native("b2"))]


def test_replay_is_native() -> None:
    all_native = seqd(RunStarted(run_id="r", goal="g"), llm(1, "a", native("a")), llm(2, "b", native("b")))
    assert replay_is_native(all_native, ANTHROPIC)
    assert not replay_is_native(all_native, "openai.responses")
    mixed = [*all_native, (3, llm(3, "c"))]
    assert not replay_is_native(mixed, ANTHROPIC)
    assert replay_is_native(mixed, ANTHROPIC, at=2)
    rolled_back = [*mixed, (4, Rollbacked(turn=3, checkpoint_history_len=3))]
    assert replay_is_native(rolled_back, ANTHROPIC)
    assert replay_is_native(seqd(RunStarted(run_id="r", goal="g")), ANTHROPIC)  # nothing to seed


def test_archived_messages_do_not_make_replay_neutral() -> None:
    events = seqd(llm(1, "a", native("a")), PageOut(turn=2, archive_ref="arc"))
    assert replay_is_native(events, ANTHROPIC, archive_loader=loader)


# ─── OpenAI Agents SDK sessions: the history is the session's items ──────────────────────────────────
def _agents_session(*records: tuple[str, object]) -> list[tuple[int, SessionEvent]]:
    events: list[SessionEvent] = [Custom(custom_kind=AGENTS_SESSION, payload={"session_id": "s"})]
    events += [Custom(custom_kind=kind, payload=payload) for kind, payload in records]
    return list(enumerate(events))


def test_agents_items_map_to_messages() -> None:
    assert agents_item_message({"role": "user", "content": "hi"}) == Message.text("user", "hi")
    assert agents_item_message(
        {
            "type": "message",
            "role": "developer",
            "content": [
                {"type": "input_text", "text": "be brief"},
                {"type": "input_image", "image_url": "https://x/y.png"},
                {"type": "input_file", "file_id": "f1"},
            ],
        }
    ) == Message(
        role="system",
        content=[
            TextPart(text="be brief"),
            ImagePart(ref="https://x/y.png"),
            TextPart(text='{"file_id": "f1", "type": "input_file"}'),
        ],
    )
    answer = {"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]}
    assert agents_item_message(answer) == Message.text("assistant", "no")
    call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}", "id": "fc_1"}
    assert agents_item_message(call) == Message(
        role="assistant", tool_calls=[ToolCall(id="c1", name="f", arguments="{}")]
    )
    shell = {"type": "shell_call", "call_id": "c2", "action": {"commands": ["ls"]}, "status": "completed"}
    assert agents_item_message(shell) == Message(
        role="assistant",
        tool_calls=[ToolCall(id="c2", name="shell_call", arguments='{"action": {"commands": ["ls"]}}')],
    )
    output = {
        "type": "function_call_output",
        "call_id": "c1",
        "output": [{"type": "input_text", "text": "x"}],
    }
    assert agents_item_message(output) == Message(
        role="tool", content=[ToolResultPart(call_id="c1", output='[{"text": "x", "type": "input_text"}]')]
    )
    thought = {"type": "reasoning", "id": "r1", "summary": [{"type": "summary_text", "text": "hmm"}]}
    assert agents_item_message(thought) == Message(role="assistant", content=[ThinkingPart(thinking="hmm")])
    for nothing in ({"type": "reasoning", "summary": []}, {"type": "web_search_call", "id": "w"}, "text", {}):
        assert agents_item_message(nothing) is None


def test_agents_session_history_folds_items_pops_and_clears() -> None:
    events = _agents_session(
        (AGENTS_ITEM, {"role": "user", "content": "one"}),  # seq 1
        (AGENTS_ITEM, {"type": "web_search_call", "id": "w"}),  # seq 2: no message
        (AGENTS_ITEM, {"role": "assistant", "content": "two"}),  # seq 3
        (AGENTS_POP, {"seq": 3}),  # seq 4
        (AGENTS_POP, {"seq": 2}),  # seq 5: its item had no message
        (AGENTS_ITEM, {"role": "assistant", "content": "three"}),  # seq 6
    )
    assert [m.text_content() for m in reconstruct(events)] == ["one", "three"]
    assert [m.text_content() for m in reconstruct(events, at=3)] == ["one", "two"]
    events += [(7, Custom(custom_kind=AGENTS_CLEAR, payload={"count": 2}))]
    events += [(8, Custom(custom_kind=AGENTS_ITEM, payload={"role": "user", "content": "again"}))]
    assert [m.text_content() for m in reconstruct(events)] == ["again"]


def test_agents_session_ignores_what_tracing_and_record_result_wrote_beside_its_items() -> None:
    events = _agents_session((AGENTS_ITEM, {"role": "user", "content": "hi"}))
    events += [
        (2, RunStarted(run_id="r", goal="hi")),
        (3, LlmCompleted(turn=1, message=Message.text("assistant", "hello"))),
        (4, Custom(custom_kind=AGENTS_ITEM, payload={"role": "assistant", "content": "hello"})),
    ]
    assert [(m.role, m.text_content()) for m in reconstruct(events)] == [
        ("user", "hi"),
        ("assistant", "hello"),
    ]


def test_agents_items_outside_an_agents_session_add_nothing() -> None:
    """The RunState importer's ``openai_agents.item`` records (no ``openai_agents.session`` at seq 0) keep
    their meaning: its seed events carry the messages."""
    events: list[tuple[int, SessionEvent]] = [
        (0, RunStarted(run_id="r", goal="hi")),
        (1, Custom(custom_kind=AGENTS_ITEM, payload={"role": "user", "content": "hi"})),
        (2, Custom(custom_kind=AGENTS_SESSION, payload={"session_id": "late"})),
        (3, Custom(custom_kind=AGENTS_ITEM, payload={"role": "user", "content": "hi"})),
    ]
    assert [m.text_content() for m in reconstruct(events)] == ["hi"]


REPLAYS = [
    llm(3, "native a", ProviderReplay(protocol="p", provider="x", native_blocks=[{"type": "text"}])),
    llm(3, "native b", ProviderReplay(protocol="q")),
    llm(4, "neutral"),
]


@given(
    st.lists(st.sampled_from(POOL + REPLAYS), max_size=30),
    st.one_of(st.none(), st.integers(min_value=0, max_value=30)),
    st.one_of(st.none(), st.integers(min_value=0, max_value=40)),
)
def test_a_fold_that_keeps_no_provider_replay_gives_the_same_history(
    events: list[SessionEvent], at: int | None, cap: int | None
) -> None:
    """``keep_replay=False`` (what ``reconstruct`` and ``replay_session`` fold with, issue 19) changes
    nothing but the entries' ``replay``: same messages, same origins and seqs, in the same order."""
    numbered = seqd(*events)
    kept, bare = Rebuilder(loader, cap), Rebuilder(loader, cap, keep_replay=False)
    for seq, event in numbered:
        if at is not None and seq > at:
            break
        kept.feed(seq, event)
        bare.feed(seq, event)
        assert bare.messages() == kept.messages()
        assert [(e.origin, e.seq) for e in bare.entries] == [(e.origin, e.seq) for e in kept.entries]
        assert all(e.replay is None for e in bare.entries)
    assert reconstruct(numbered, at=at, archive_loader=loader, max_part_bytes=cap) == kept.messages()
    assert provider_replay_seed(numbered, "p", at=at, archive_loader=loader) == [
        (e.seq, e.replay) for e in kept.entries if e.replay is not None and e.replay.protocol == "p"
    ]


def test_overlapping_pauses_in_two_threads_leave_the_collector_on() -> None:
    """Two reads folding at once in two threads: the first to end must not turn the collector back on while
    the other still runs, and the last to end must (a plain save-and-restore gets one of the two wrong)."""
    import gc
    import threading

    from flightlog.replay import collector_paused

    entered, release, done = threading.Event(), threading.Event(), threading.Event()

    def other() -> None:
        with collector_paused():
            entered.set()
            release.wait(60)
        done.set()

    assert gc.isenabled()
    worker = threading.Thread(target=other)
    worker.start()
    assert entered.wait(60)
    with collector_paused():
        release.set()
        assert done.wait(60)  # the other read ended while this one still runs
        assert not gc.isenabled()
    worker.join(60)
    assert gc.isenabled()
