"""The event vocabulary pinned against seed 000: wire names, omission rules, strictness, partitions."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flightlog import events as ev
from flightlog.encoding import canonical_bytes, decode_stored
from flightlog.errors import EventDecodeError
from flightlog.messages import Message, TextPart, ThinkingPart, ToolCall, ToolResult

SEED = Path(__file__).resolve().parents[1] / "tests" / "data" / "seed_000_session.rs"

# Minimal valid instance of every seed kind (required fields only).
MINIMAL: dict[str, dict[str, Any]] = {
    "run_started": {"run_id": "r", "goal": "g"},
    "llm_completed": {"turn": 1, "message": {"role": "assistant"}},
    "tool_requested": {"turn": 1, "calls": [{"id": "c", "name": "n", "arguments": "{}"}]},
    "tool_completed": {"turn": 1, "results": [{"call_id": "c", "output": "o"}]},
    "compressed": {"turn": 1, "archived_seq_range": [0, 3]},
    "page_out": {"turn": 1},
    "page_in": {"turn": 1, "entry_count": 2},
    "run_terminal": {"reason": "completed", "turns_used": 1, "total_tokens": 10},
    "tool_argument_repaired": {"turn": 1, "tool": "t", "original_arguments": "{", "repaired_arguments": "{}"},
    "permission_requested": {"turn": 1, "tool": "t", "arguments": "{}"},
    "permission_resolved": {"turn": 1, "approved": True, "responder": "user"},
    "tool_denied": {"turn": 1, "call_id": "c", "tool_name": "t", "reason": "no"},
    "capability_changed": {"turn": 1},
    "context_renewed": {"turn": 1, "sprint": 2, "handoff_ref": "h"},
    "suspended": {"turn": 1, "reason": "approval"},
    "resumed": {"turn": 1},
    "tool_gated": {"turn": 1, "call_id": "c", "tool": "t", "reason": "ask"},
    "signal_delivery_disposed": {
        "turn": 1,
        "operation_id": "o",
        "delivery_id": "d",
        "attempt": 1,
        "signal_id": "s",
        "disposition": "deliver",
        "queue_depth": 0,
    },
    "budget_exceeded": {"turn": 1, "operation_id": "o", "budget": "tokens"},
    "budget_usage_reported": {
        "turn": 1,
        "operation_id": "o",
        "reservation_id": "r",
        "tokens": 5,
        "subagents": 0,
        "rounds": 1,
    },
    "operation_cancelled": {"turn": 1, "operation_id": "o", "reason": "deadline"},
    "checkpoint_taken": {"turn": 1, "history_len": 3},
    "entropy_sample": {
        "turn": 1,
        "score": 0.5,
        "rho": 0.1,
        "repeat_pressure": 0.2,
        "failure_rate": 0.0,
        "rollbacks_in_window": 0,
        "window_turns": 8,
    },
    "entropy_alert": {"turn": 1, "score": 0.9, "threshold": 0.8},
    "rollbacked": {"turn": 1, "checkpoint_history_len": 2},
    "agent_process_changed": {
        "turn": 1,
        "agent_id": "a",
        "parent_session_id": "p",
        "role": "worker",
        "isolation": "none",
        "context_inheritance": "none",
        "state": "running",
    },
    "milestone_advanced": {"turn": 1, "phase_id": "p1"},
    "milestone_blocked": {"turn": 1, "phase_id": "p1", "reason": "tests fail"},
    "memory_written": {
        "turn": 1,
        "record_id": "m",
        "scope": {"tenant_id": "t", "namespace": "n"},
        "memory_kind": "user",
        "name": "pref",
        "size_bytes": 12,
    },
    "memory_queried": {
        "turn": 1,
        "scope": {"tenant_id": "t", "namespace": "n"},
        "query": "q",
        "requested_k": 3,
        "requires_async_response": False,
    },
    "memory_validation_failed": {"turn": 1, "record_id": "m", "error": "too big"},
    "memory_retrieval_result": {"hits": []},
}


def _seed_kinds() -> list[str]:
    """Kind strings parsed from the vendored seed 000 source (``Self::X { .. } => "x"``)."""
    text = SEED.read_text(encoding="utf-8")
    return re.findall(r'=> "([a-z_]+)",', text)


def _seed_kernel_kinds() -> set[str]:
    text = SEED.read_text(encoding="utf-8")
    body = text[text.index("pub fn is_kernel_os_event") :]
    variants = re.findall(r"Self::([A-Za-z]+) \{ \.\. \}", body)
    return {re.sub(r"(?<!^)(?=[A-Z])", "_", v).lower() for v in variants}


def test_seed_kinds_are_exactly_the_32_seed_kinds_in_order() -> None:
    assert _seed_kinds() == list(ev.SEED_KINDS)
    assert len(ev.SEED_KINDS) == 32
    assert set(MINIMAL) == set(ev.SEED_KINDS)


def test_kernel_os_kinds_are_exactly_the_seeds_22() -> None:
    assert _seed_kernel_kinds() == ev.KERNEL_OS_KINDS
    assert len(ev.KERNEL_OS_KINDS) == 22
    for kind in ev.SEED_KINDS:
        event = ev.event_from_wire({"kind": kind, **MINIMAL[kind]})
        assert ev.is_kernel_os_event(event) is (kind in ev.KERNEL_OS_KINDS)
    assert not ev.is_kernel_os_event(ev.Custom(custom_kind="x"))


@pytest.mark.parametrize("kind", ev.SEED_KINDS)
def test_every_kind_round_trips_with_its_exact_wire_name(kind: str) -> None:
    event = ev.event_from_wire({"kind": kind, **MINIMAL[kind]})
    assert event.kind == kind
    data = canonical_bytes(event)
    assert json.loads(data)["kind"] == kind
    back = decode_stored(data)
    assert back == event
    assert canonical_bytes(back) == data


def test_categories_partition_every_kind_and_unknown_is_sched() -> None:
    allowed = {"syscall", "sched", "mm", "proc", "ipc"}
    seen = {ev.category(k) for k in ev.SEED_KINDS}
    assert seen == allowed
    assert ev.category("something_new") == "sched"
    assert ev.category(ev.Custom(custom_kind="x")) == "sched"
    assert ev.category("agent_process_changed") == "proc"
    assert ev.category("signal_delivery_disposed") == "ipc"
    assert ev.category("tool_requested") == "syscall"
    assert ev.category("page_out") == "mm"


def test_primitives_are_distinct_per_seed_kind() -> None:
    primitives = [ev.primitive(k) for k in ev.SEED_KINDS]
    assert len(set(primitives)) == 32
    assert ev.primitive("unknown_kind") == "custom"


def test_absent_optionals_follow_serde_and_serde_default_lists_written() -> None:
    """``Option`` without ``skip_serializing_if`` is ``null`` (as serde writes it), skipped ones are omitted.
    The full per-field check against the seed is ``test_wire_conformance.py``."""
    wire = ev.RunStarted(run_id="r", goal="g").to_wire()
    assert wire == {
        "kind": "run_started",
        "run_id": "r",
        "goal": "g",
        "criteria": [],
        "agent_id": None,
        "system_prompt": None,
    }
    assert "attachments" not in wire
    assert ev.PermissionRequested(turn=1, tool="t", arguments="{}").to_wire()["reason"] is None
    cancelled = ev.OperationCancelled(turn=1, operation_id="o", reason=ev.CancellationReason.USER).to_wire()
    assert cancelled["pending_call_ids"] == [] and cancelled["reason"] == "user"
    assert ev.PageOut(turn=1).to_wire() == {"kind": "page_out", "turn": 1, "message_count": 0}
    assert ev.Suspended(turn=1, reason="x").to_wire() == {"kind": "suspended", "turn": 1, "reason": "x"}
    assert ev.Resumed(turn=2).to_wire() == {"kind": "resumed", "turn": 2}
    assert "reservation_id" not in ev.BudgetExceeded(turn=1, operation_id="o", budget="t").to_wire()
    assert ev.MilestoneAdvanced(turn=1, phase_id="p").to_wire()["capabilities_unlocked"] == []
    assert "reason" not in ev.Rollbacked(turn=1, checkpoint_history_len=0).to_wire()


def test_defaults_are_applied_on_input() -> None:
    event = ev.event_from_wire(
        {"kind": "operation_cancelled", "turn": 1, "operation_id": "o", "reason": "user"}
    )
    assert isinstance(event, ev.OperationCancelled)
    assert event.pending_call_ids == []
    page = ev.event_from_wire({"kind": "page_out", "turn": 3})
    assert isinstance(page, ev.PageOut) and page.message_count == 0


def test_provider_replay_is_strict_and_requires_protocol() -> None:
    with pytest.raises(ValueError, match="schema_version"):
        ev.ProviderReplay.model_validate({"protocol": "anthropic.messages", "schema_version": 2})
    with pytest.raises(ValueError, match="protocol"):
        ev.ProviderReplay.model_validate({"provider": "anthropic"})
    with pytest.raises(EventDecodeError, match="schema_version"):
        ev.event_from_wire(
            {
                "kind": "llm_completed",
                "turn": 1,
                "message": {"role": "assistant"},
                "provider_replay": {"protocol": "p", "schema_version": 1},
            }
        )


def test_provider_replay_round_trips_byte_for_byte() -> None:
    native = [
        {"type": "thinking", "thinking": "Let me see.", "signature": "EqQBCkYIBxgCKkBz+/=="},
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
        {"type": "tool_use", "id": "toolu_01", "name": "bash", "input": {"cmd": "ls -la", "n": 1.5}},
    ]
    replay = ev.ProviderReplay(
        protocol="anthropic.messages",
        provider="anthropic",
        model="claude-x",
        native_blocks=native,
        reasoning_details={"a": [1, None, True]},
        native_message={"role": "assistant"},
        tool_calls=[{"id": "x"}],
    )
    event = ev.LlmCompleted(
        turn=3,
        message=Message(role="assistant", content=[ThinkingPart(thinking="Let me see.", signature="EqQB")]),
        provider_replay=replay,
    )
    data = canonical_bytes(event)
    back = decode_stored(data)
    assert isinstance(back, ev.LlmCompleted)
    assert back.provider_replay == replay
    assert canonical_bytes(back) == data
    assert back.provider_replay is not None and back.provider_replay.native_blocks == native


def test_rollback_reason_is_tagged_by_kind() -> None:
    cases = {
        "fatal_tool_error": ev.RollbackReason.FatalToolError(tool_name="t", error="boom"),
        "governance_denied": ev.RollbackReason.GovernanceDenied(tool_name="t", reason="policy"),
        "provider_failure": ev.RollbackReason.ProviderFailure(error="503"),
        "timeout": ev.RollbackReason.Timeout(),
        "user_interrupt": ev.RollbackReason.UserInterrupt(),
        "malformed_replay": ev.RollbackReason.MalformedReplay(reason="bad"),
    }
    for kind, reason in cases.items():
        event = ev.Rollbacked(turn=1, checkpoint_history_len=4, reason=reason)
        wire = json.loads(canonical_bytes(event))
        assert wire["reason"]["kind"] == kind
        assert decode_stored(canonical_bytes(event)) == event


def test_cancellation_reasons_and_memory_kinds_wire_names() -> None:
    assert [r.value for r in ev.CancellationReason] == ["user", "deadline", "lease_lost", "host_shutdown"]
    assert [k.value for k in ev.MemoryKind] == ["user", "feedback", "project", "reference"]


def test_memory_scope_is_strict_and_recall_has_record_score_why() -> None:
    with pytest.raises(ValueError, match="extra"):
        ev.MemoryScope.model_validate({"tenant_id": "t", "namespace": "n", "owner": "x"})
    with pytest.raises(ValueError, match="namespace"):
        ev.MemoryScope.model_validate({"tenant_id": "t"})
    hit = ev.MemoryRecall(
        record=ev.MemoryRecord(
            record_id="m1",
            scope=ev.MemoryScope(tenant_id="t", namespace="n"),
            name="style",
            kind=ev.MemoryKind.FEEDBACK,
            content="short answers",
            description="answer style",
            provenance=ev.MemoryProvenance(author=ev.MemoryAuthor.MODEL, trust=ev.MemoryTrustLevel.UNTRUSTED),
            created_at=1,
            updated_at=1,
            confidence=0.5,
        ),
        score=0.75,
        why="matched 'style'",
    )
    event = ev.MemoryRetrievalResult(hits=[hit])
    assert decode_stored(canonical_bytes(event)) == event


def test_unsigned_ranges_are_enforced() -> None:
    with pytest.raises(EventDecodeError, match="turn"):
        ev.event_from_wire({"kind": "checkpoint_taken", "turn": -1, "history_len": 0})
    with pytest.raises(EventDecodeError, match="turn"):
        ev.event_from_wire({"kind": "checkpoint_taken", "turn": 2**32, "history_len": 0})


def test_unknown_kind_is_a_decode_error_naming_the_seq() -> None:
    with pytest.raises(EventDecodeError, match="seq 7"):
        decode_stored(b'{"kind":"no_such_kind"}', seq=7)
    with pytest.raises(EventDecodeError, match="not JSON"):
        decode_stored(b"{torn", seq=1)


def test_custom_carries_any_json_payload() -> None:
    event = ev.Custom(custom_kind="provider_capability_evidence", payload={"model": "m", "route_position": 0})
    wire = json.loads(canonical_bytes(event))
    assert wire == {
        "kind": "custom",
        "custom_kind": "provider_capability_evidence",
        "payload": {"model": "m", "route_position": 0},
    }


def test_messages_tool_call_and_result_shapes() -> None:
    call = ToolCall(id="call_1", name="read", arguments='{"path": "a"}')
    assert call.to_wire() == {"id": "call_1", "name": "read", "arguments": '{"path": "a"}'}
    result = ToolResult(call_id="call_1", output="ok")
    assert result.to_wire() == {"call_id": "call_1", "output": "ok", "is_error": False}
    assert ToolResult(call_id="c", output="x", is_error=True, token_count=4).to_wire()["token_count"] == 4
    msg = Message(role="user", content=[TextPart(text="hi")])
    assert msg.to_wire() == {"role": "user", "content": [{"type": "text", "text": "hi"}]}


_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)


@given(goal=_text, criteria=st.lists(_text, max_size=4), agent=st.none() | _text)
def test_run_started_round_trips(goal: str, criteria: list[str], agent: str | None) -> None:
    event = ev.RunStarted(run_id="r", goal=goal, criteria=criteria, agent_id=agent)
    data = canonical_bytes(event)
    assert decode_stored(data) == event
    assert canonical_bytes(decode_stored(data)) == data


def test_custom_events_narrate_with_a_short_hint() -> None:
    """`flightlog show` prints a Custom event as its kind plus the payload's key, type or role."""
    from flightlog.events import Custom
    from flightlog.narration import narrate

    assert (
        narrate(Custom(custom_kind="app.note", payload={"role": "user", "content": "hi"})) == "app.note user"
    )
    assert narrate(Custom(custom_kind="app.note", payload={"type": "function_call"})).endswith(
        "function_call"
    )
    assert narrate(Custom(custom_kind="x", payload=[1, 2])) == "x"


def test_provider_retries_narrate_their_number_delay_and_error() -> None:
    """``provider_retry`` read as its kind alone (``provider_retry``) though it carries the attempt, the
    delay and the error; a record written before ``max_retries`` was gives no total; an untrusted payload
    of other types is not believed."""
    from flightlog.events import Custom
    from flightlog.narration import narrate

    def line(**payload: object) -> str:
        return narrate(Custom(custom_kind="provider_retry", payload=payload))

    full = {"turn": 3, "attempt": 2, "max_retries": 5, "delay_s": 1.2, "error": "503 overloaded"}
    assert line(**full) == "turn 3: retry 2/5 after 1.2 s (503 overloaded)"
    assert line(**{**full, "max_retries": None}) == "turn 3: retry 2 after 1.2 s (503 overloaded)"
    older = {k: v for k, v in full.items() if k != "max_retries"}
    assert line(**{**older, "delay_s": 0.125}) == "turn 3: retry 2 after 0.12 s (503 overloaded)"
    assert line(turn=1, attempt=True, delay_s="soon", error="x\x1b[2J") == (
        "turn 1: retry ? after ? s (x[U+001B][2J)"
    )
    assert line(**{**full, "error": "e" * 200}).endswith("e…)")


def test_run_started_leads_with_the_session_id_commands_take() -> None:
    """``show``/``tail`` led a run with its ``run_started.run_id`` (a kernel run's random hex), which no
    command takes; given the session, the line leads with it, whole."""
    from flightlog.events import RunStarted
    from flightlog.narration import narrate

    started = RunStarted(run_id="94fb2dbd2168467dbf050da1c1b2c3d4", goal="find it", criteria=["a", "b"])
    sid = "claude-code:55604662-cf2a-4331-851a-ec234028f8ca"
    assert narrate(started, sid) == f"run {sid} started: find it (2 criteria)"
    assert narrate(started) == "run 94fb2dbd2168467dbf050da… started: find it (2 criteria)"


def test_run_terminal_counts_steps_as_runs_does() -> None:
    """``run ended: ... after N turn(s)`` beside ``runs``' ``steps``: one word for ``turns_used``."""
    from flightlog.events import RunTerminal
    from flightlog.narration import narrate

    assert narrate(RunTerminal(reason="failed", turns_used=1, total_tokens=2)) == (
        "run ended: failed after 1 step, 2 tokens"
    )
    assert narrate(RunTerminal(reason="aborted", turns_used=3, total_tokens=1)) == (
        "run ended: cancelled after 3 steps, 1 token"
    )


def test_agents_sdk_items_narrate_their_content() -> None:
    """An Agents SDK session's items read as the conversation (flightlog.integrations.openai_agents)."""
    from flightlog.events import Custom
    from flightlog.narration import narrate

    def item(payload: dict[str, object]) -> str:
        return narrate(Custom(custom_kind="openai_agents.item", payload=payload))

    assert item({"role": "user", "content": "hi"}) == "item user: hi"
    parts = [{"type": "output_text", "text": "Sunny."}, {"type": "output_text", "text": "Warm."}]
    assert item({"type": "message", "role": "assistant", "content": parts}) == "item assistant: Sunny. Warm."
    assert item({"type": "function_call", "name": "f", "arguments": "{}"}) == "item call f({})"
    assert item({"type": "function_call_output", "call_id": "c1", "output": "ok"}) == "item result of c1: ok"
    assert item({"type": "reasoning", "summary": []}) == "item reasoning"
    assert narrate(Custom(custom_kind="openai_agents.pop", payload={"seq": 3})) == "item at seq 3 popped"
    guard = Custom(custom_kind="openai_agents.guardrail", payload={"name": "g", "triggered": True})
    assert narrate(guard) == "guardrail g: tripped"


def test_kernel_user_notes_narrate_what_the_model_was_told() -> None:
    """A delivered signal and a kernel note become user messages in replay; `show` says so, not "custom"."""
    from flightlog.events import Custom
    from flightlog.narration import narrate

    signal = {
        "signal_id": "s1",
        "kind": "steer",
        "sender": "ops",
        "disposition": "queue",
        "text": "stop looping",
    }
    assert narrate(Custom(custom_kind="signal_message", payload=signal)) == (
        "steer from ops delivered: stop looping"
    )
    note = {"turn": 3, "text": "The call was denied; try another way."}
    assert narrate(Custom(custom_kind="kernel_note", payload=note)) == (
        "turn 3: kernel told the model: The call was denied; try another way."
    )
