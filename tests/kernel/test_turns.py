"""The turn transaction: event order and fields, history from the ledger, native seeding, execution."""

from __future__ import annotations

import asyncio

from flightlog.events import (
    CheckpointTaken,
    LlmCompleted,
    PermissionResolved,
    ProviderReplay,
    RunStarted,
    RunTerminal,
    ToolArgumentRepaired,
    ToolCompleted,
    ToolRequested,
)
from flightlog.kernel import Agent, Kernel, tool
from flightlog.kernel.requests import check_requests, program_of
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.messages import ImagePart, Message, TextPart, ToolCall, ToolResult
from flightlog.providers.base import Capabilities, ModelResponse, Usage
from flightlog.recorder import verify_session
from flightlog.sessions import replay_session
from flightlog.store import SqliteStore

from .helpers import agent, customs, events, kernel, kinds, of


def test_a_run_records_each_turn_transaction_in_order(store: SqliteStore) -> None:
    provider = ScriptedProvider(
        [
            calls(
                call("add", {"a": 1, "b": 2}, id="c1"), call("echo", {"text": "hi"}, id="c2"), text="working"
            ),
            reply("3 and hi", usage=Usage(input_tokens=40, output_tokens=7)),
        ],
        by_turn=False,
    )
    result = kernel(store, provider, system_prompt="be brief").run_sync("add 1 and 2", criteria=["exact"])

    sid = result.session_id
    assert kinds(store, sid) == [
        "run_started",
        "custom:provider_capability_evidence",
        "custom:budget_limits",
        "checkpoint_taken",
        "custom:prompt_program_compiled",
        "custom:prompt_program_invoked",
        "llm_completed",
        "custom:model_usage",
        "tool_requested",
        "custom:tool_decisions",
        "permission_resolved",
        "permission_resolved",
        "tool_completed",
        "entropy_sample",  # one per completed turn, in its transaction (kernel.entropy)
        "checkpoint_taken",
        "custom:prompt_program_invoked",
        "llm_completed",
        "custom:model_usage",
        "run_terminal",
        "custom:session_sealed",  # the default notary (the user's log key) seals a finished run
    ]
    (compiled,) = customs(store, sid, "prompt_program_compiled")
    first_call, second_call = customs(store, sid, "prompt_program_invoked")
    sent = [program_of("scripted", "scripted-model", request) for request in provider.requests]
    assert [first_call["request_digest"], second_call["request_digest"]] == [p.request_digest for p in sent]
    assert compiled["digest"] == first_call["platform_digest"] == sent[0].platform_digest
    assert compiled["route"] == {"adapter": "scripted", "model": "scripted-model", "route_position": 0}
    assert [t["name"] for t in compiled["tools"]] == ["add", "echo"]
    assert compiled["tool_spec_hash"] == first_call["tool_spec_hash"] == sent[0].tool_spec_hash
    assert {key: first_call[key] for key in ("actor", "turn", "invocation_digest", "domain_digest")} == {
        "actor": "kernel",
        "turn": 1,
        "invocation_digest": sent[0].invocation_digest,
        "domain_digest": sent[0].domain_digest,
    }
    assert second_call["sections"] == [
        {"id": "system_prompt", "origin": "run_started", "messages": 0},
        {"id": "goal", "origin": "run_started", "seq_range": [0, 0], "messages": 1},
        {"id": "history", "origin": "llm_completed", "seq_range": [6, 12], "messages": 3},
    ]
    assert second_call["context"] == {
        "fill_tokens": second_call["context"]["fill_tokens"],
        "basis": "reported+estimate",
    }
    assert check_requests(list(enumerate(events(store, sid)))).checked == 2
    (started,) = of(store, sid, RunStarted)
    assert started.goal == "add 1 and 2" and started.criteria == ["exact"]
    assert started.agent_id == "test-agent" and started.system_prompt == "be brief"
    assert len(started.run_id) == 32 and started.attachments == []
    assert [(c.turn, c.history_len) for c in of(store, sid, CheckpointTaken)] == [(1, 1), (2, 4)]
    first, second = of(store, sid, LlmCompleted)
    assert first.turn == 1 and first.message.text_content() == "working"
    assert first.provider_replay == ProviderReplay(
        protocol="scripted", provider="scripted", native_message=first.message.to_wire()
    )
    assert second.turn == 2 and second.message.text_content() == "3 and hi"
    (requested,) = of(store, sid, ToolRequested)
    assert requested.turn == 1
    assert requested.calls == [
        ToolCall(id="c1", name="add", arguments='{"a": 1, "b": 2}'),
        ToolCall(id="c2", name="echo", arguments='{"text": "hi"}'),
    ]
    assert [(p.turn, p.approved, p.responder) for p in of(store, sid, PermissionResolved)] == [
        (1, True, "policy_gate"),
        (1, True, "policy_gate"),
    ]
    (completed,) = of(store, sid, ToolCompleted)
    assert completed.turn == 1
    assert completed.results == [ToolResult(call_id="c1", output="3"), ToolResult(call_id="c2", output="hi")]
    assert of(store, sid, RunTerminal) == [RunTerminal(reason="completed", turns_used=2, total_tokens=62)]
    assert customs(store, sid, "budget_limits") == [{}]
    assert customs(store, sid, "tool_decisions") == [
        {
            "turn": 1,
            "calls": [
                {
                    "call_id": "c1",
                    "tool": "add",
                    "effect": "read_only",
                    "decision": "allow",
                    "reason": "policy default (allow)",
                    "arguments": {"a": 1, "b": 2},
                },
                {
                    "call_id": "c2",
                    "tool": "echo",
                    "effect": "read_only",
                    "decision": "allow",
                    "reason": "policy default (allow)",
                    "arguments": {"text": "hi"},
                },
            ],
        }
    ]
    assert customs(store, sid, "model_usage") == [
        {
            "turn": 1,
            "model": "scripted-model",
            "protocol": "scripted",
            "route_position": 0,
            "input_tokens": 10,
            "output_tokens": 5,
            "total_tokens": 15,
            "reserved_tokens": 4096,
        },
        {
            "turn": 2,
            "model": "scripted-model",
            "protocol": "scripted",
            "route_position": 0,
            "input_tokens": 40,
            "output_tokens": 7,
            "total_tokens": 47,
            "reserved_tokens": 4096,
        },
    ]
    assert (result.status, result.final_message, result.turns, result.tokens) == (
        "completed",
        "3 and hi",
        2,
        62,
    )
    assert store.get_session(sid).status == "completed"
    assert store.get_session(sid).source == "kernel"
    assert store.get_session(sid).metadata == {"agent": "test-agent"}
    assert verify_session(store, sid).ok


def test_capability_evidence_is_recorded_per_route_position_as_seed_003(store: SqliteStore) -> None:
    primary = ScriptedProvider(
        [reply("ok")], model="big", capabilities=Capabilities(strict_schema=True), by_turn=False
    )
    fallback = ScriptedProvider(
        [], model="small", capabilities=Capabilities(parallel_tool_calls=True), by_turn=False
    )
    result = Kernel(store, Agent(name="a", route=[primary, fallback])).run_sync("hi")
    assert customs(store, result.session_id, "provider_capability_evidence") == [
        {
            "model": "big",
            "route_position": 0,
            "source": "declared",
            "capabilities": {
                "strict_schema": True,
                "parallel_tool_calls": False,
                "streaming_tool_calls": False,
                "prompt_caching": False,
                "structured_output": False,
            },
            "degradations": [
                "parallel_tool_calls:sequential_execution",
                "streaming_tool_calls:turn_granular_progress",
                "prompt_caching:cache_cold_accounting",
                "structured_output:local_parse_and_validation",
            ],
        },
        {
            "model": "small",
            "route_position": 1,
            "source": "declared",
            "capabilities": {
                "strict_schema": False,
                "parallel_tool_calls": True,
                "streaming_tool_calls": False,
                "prompt_caching": False,
                "structured_output": False,
            },
            "degradations": [
                "strict_schema:local_validation",
                "streaming_tool_calls:turn_granular_progress",
                "prompt_caching:cache_cold_accounting",
                "structured_output:local_parse_and_validation",
            ],
        },
    ]


def test_each_model_call_sees_the_replayed_ledger_and_the_native_seed(store: SqliteStore) -> None:
    provider = ScriptedProvider(
        [
            calls(call("add", {"a": 2, "b": 2}, id="c1")),
            calls(call("echo", {"text": "x"}, id="c2")),
            reply("4"),
        ],
        by_turn=False,
    )
    image = ImagePart(ref="sha256:" + "ab" * 32, media_type="image/png")
    result = kernel(store, provider, system_prompt="sys").run_sync("sum", attachments=[image])
    first, second, third = provider.requests
    assert first.system_prompt == "sys" and [t.name for t in first.tools] == ["add", "echo"]
    assert first.messages == [Message(role="user", content=[TextPart(text="sum"), image])]
    assert first.native_seed == [] and first.max_tokens == 4096 and not first.stream
    stored = replay_session(store, result.session_id)
    assert list(third.messages) == stored[:-1]  # everything but the final answer
    assert list(second.messages) == stored[:3]
    llm = of(store, result.session_id, LlmCompleted)
    assert third.native_seed == [e.provider_replay for e in llm[:2]]


def test_no_native_seed_when_a_recorded_turn_has_another_protocol(store: SqliteStore) -> None:
    foreign = ModelResponse(
        message=Message(
            role="assistant", tool_calls=[ToolCall(id="c1", name="echo", arguments='{"text":"a"}')]
        ),
        provider_replay=None,
    )
    provider = ScriptedProvider([foreign, reply("done")], by_turn=False)
    kernel(store, provider).run_sync("go")
    assert provider.requests[1].native_seed is None


def test_read_only_calls_of_a_turn_run_concurrently_and_results_keep_call_order(store: SqliteStore) -> None:
    started: list[str] = []
    both = asyncio.Event()

    @tool(effect="read_only")
    async def wait_for_peer(name: str) -> str:
        """Blocks until both calls are running (deadlocks when run one after the other)."""
        started.append(name)
        if len(started) == 2:
            both.set()
        await asyncio.wait_for(both.wait(), timeout=60)
        if name == "first":
            await asyncio.sleep(0.01)  # finishes last
        return name

    provider = ScriptedProvider(
        [
            calls(
                call("wait_for_peer", {"name": "first"}, id="a"),
                call("wait_for_peer", {"name": "second"}, id="b"),
            ),
            reply("ok"),
        ],
        by_turn=False,
    )
    result = kernel(store, provider, tools=[wait_for_peer]).run_sync("go")
    assert result.status == "completed"
    (completed,) = of(store, result.session_id, ToolCompleted)
    assert [r.output for r in completed.results] == ["first", "second"]


def test_side_effect_and_idempotent_calls_run_one_after_the_other(store: SqliteStore) -> None:
    order: list[str] = []

    @tool(effect="idempotent")
    async def step(name: str) -> str:
        """Records the order."""
        order.append(f"start {name}")
        await asyncio.sleep(0.005)
        order.append(f"end {name}")
        return name

    provider = ScriptedProvider(
        [calls(call("step", {"name": "a"}, id="a"), call("step", {"name": "b"}, id="b")), reply("ok")],
        by_turn=False,
    )
    kernel(store, provider, tools=[step]).run_sync("go")
    assert order == ["start a", "end a", "start b", "end b"]


def test_tool_exceptions_become_error_results_and_the_run_goes_on(store: SqliteStore) -> None:
    @tool(effect="read_only")
    def explode(why: str) -> str:
        """Always fails."""
        raise ValueError(why)

    provider = ScriptedProvider(
        [calls(call("explode", {"why": "boom"}, id="x")), reply("recovered")], by_turn=False
    )
    result = kernel(store, provider, tools=[explode]).run_sync("go")
    assert result.status == "completed" and result.final_message == "recovered"
    (completed,) = of(store, result.session_id, ToolCompleted)
    assert completed.results == [ToolResult(call_id="x", output="ValueError: boom", is_error=True)]
    last_request = provider.requests[-1].messages[-1]
    assert (
        last_request.role == "tool" and "ValueError: boom" in last_request.to_wire()["content"][0]["output"]
    )


def test_unknown_tools_and_unusable_arguments_get_error_results_without_governance(
    store: SqliteStore,
) -> None:
    provider = ScriptedProvider(
        [
            calls(
                call("nope", {}, id="u"),
                call("add", "{a: 1}", id="j"),
                call("add", {"a": "one", "b": 2}, id="v"),
                call("add", {"a": 1, "b": 2}, id="ok"),
            ),
            reply("done"),
        ],
        by_turn=False,
    )
    result = kernel(store, provider).run_sync("go")
    sid = result.session_id
    decisions = customs(store, sid, "tool_decisions")[0]["calls"]
    assert [d["decision"] for d in decisions] == ["invalid", "invalid", "invalid", "allow"]
    assert len(of(store, sid, PermissionResolved)) == 1
    (completed,) = of(store, sid, ToolCompleted)
    errors = {r.call_id: r.output for r in completed.results if r.is_error}
    assert errors["u"].startswith("unknown tool 'nope' (tools: add, echo)")
    assert errors["j"].startswith("arguments are not valid JSON")
    assert errors["v"].startswith("invalid arguments for add: a: Input should be a valid integer")
    assert [r.call_id for r in completed.results] == ["u", "j", "v", "ok"]
    assert completed.results[-1] == ToolResult(call_id="ok", output="3")


def test_repaired_arguments_are_recorded_and_used(store: SqliteStore) -> None:
    provider = ScriptedProvider(
        [
            calls(
                call("add", "```json\n{'a': 20, 'b': 22,}\n```", id="r"),
                call("echo", '{"text": "ok"}', id="n"),
            ),
            reply("42"),
        ],
        by_turn=False,
    )
    result = kernel(store, provider).run_sync("go")
    assert of(store, result.session_id, ToolArgumentRepaired) == [
        ToolArgumentRepaired(
            turn=1,
            tool="add",
            original_arguments="```json\n{'a': 20, 'b': 22,}\n```",
            repaired_arguments='{"a": 20, "b": 22}',
        )
    ]
    (requested,) = of(store, result.session_id, ToolRequested)
    assert requested.calls[0].arguments == "```json\n{'a': 20, 'b': 22,}\n```"  # as the model wrote it
    (completed,) = of(store, result.session_id, ToolCompleted)
    assert completed.results[0].output == "42"


def test_streamed_tokens_reach_live_subscribers_only(store: SqliteStore) -> None:
    tokens: list[str] = []
    late: list[str] = []
    provider = ScriptedProvider([reply("streamed answer")], stream_chunk_chars=5, by_turn=False)
    k = Kernel(store, agent(provider, stream=True), on_token=tokens.append)
    unsubscribe = k.subscribe_tokens(late.append)
    result = k.run_sync("go")
    assert "".join(tokens) == "streamed answer" and len(tokens) == 3 and late == tokens
    assert provider.requests[0].stream
    kinds_seen = kinds(store, result.session_id)
    assert kinds_seen.count("llm_completed") == 1 and not any("token" in k for k in kinds_seen)
    unsubscribe()
    assert late == tokens


def test_live_event_subscriber_sees_every_durable_event(store: SqliteStore) -> None:
    seen: list[tuple[int, str]] = []
    provider = ScriptedProvider([calls(call("echo", {"text": "a"}, id="c")), reply("b")], by_turn=False)
    k = Kernel(store, agent(provider), on_event=lambda row, event: seen.append((row.seq, event.kind)))
    result = k.run_sync("go")
    assert [s for s, _ in seen] == list(range(len(kinds(store, result.session_id))))
