"""Rendering rules of the three adapters (neutral transcript → request body) and the seeding guards,
checked on the request body alone (``request_body`` makes no call)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from flightlog.events import ProviderReplay
from flightlog.messages import (
    ImagePart,
    Message,
    RedactedThinkingPart,
    TextPart,
    ThinkingPart,
    ToolCall,
    ToolCallPart,
    ToolResultPart,
)
from flightlog.providers._sdk import align_seed, arguments_object, merge_options, strict_compatible
from flightlog.providers.anthropic import AnthropicProvider
from flightlog.providers.base import Capabilities, ModelProvider, ModelRequest, ToolSpec
from flightlog.providers.openai_chat import OpenAIChatProvider
from flightlog.providers.openai_responses import OpenAIResponsesProvider, seed_items

STRICT_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}
LOOSE_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}}
TOOLS = [ToolSpec("weather", "Look up the weather.", STRICT_SCHEMA), ToolSpec("convert", "", LOOSE_SCHEMA)]
CALL = ToolCall(id="call_1", name="weather", arguments='{"city": "Oslo"}')


def transcript() -> list[Message]:
    """user → assistant (thinking, text, call) → tool result → user."""
    return [
        Message.text("user", "Weather in Oslo?"),
        Message(
            role="assistant",
            content=[ThinkingPart(thinking="Need the tool.", signature="sig-1"), TextPart(text="Checking.")],
            tool_calls=[CALL],
        ),
        Message(role="tool", content=[ToolResultPart(call_id="call_1", output="Rain, 4°C")]),
        Message.text("user", "Thanks. Tomorrow?"),
    ]


@pytest.fixture
def adapters() -> dict[str, Any]:
    return {
        "anthropic": AnthropicProvider("claude-x", api_key="k"),
        "chat": OpenAIChatProvider("gpt-x", api_key="k"),
        "responses": OpenAIResponsesProvider("gpt-x", api_key="k"),
    }


def test_adapters_are_model_providers_with_declared_capabilities(adapters: dict[str, Any]) -> None:
    assert {name: a.protocol for name, a in adapters.items()} == {
        "anthropic": "anthropic.messages",
        "chat": "openai.chat",
        "responses": "openai.responses",
    }
    for adapter in adapters.values():
        assert isinstance(adapter, ModelProvider)
    assert adapters["anthropic"].capabilities().degradations() == [
        "strict_schema:local_validation",
        "structured_output:local_parse_and_validation",
    ]
    assert adapters["chat"].capabilities().degradations() == []
    custom = Capabilities(parallel_tool_calls=True)
    assert OpenAIChatProvider("m", api_key="k", capabilities=custom).capabilities() is custom


# ─── Anthropic ───────────────────────────────────────────────────────────────────────────────────


def test_anthropic_body(adapters: dict[str, Any]) -> None:
    body = adapters["anthropic"].request_body(ModelRequest("Be brief.", transcript(), TOOLS, max_tokens=99))
    assert body["system"] == "Be brief." and body["max_tokens"] == 99 and "stream" not in body
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Oslo?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Need the tool.", "signature": "sig-1"},
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "call_1", "name": "weather", "input": {"city": "Oslo"}},
            ],
        },
        {  # the tool result and the next prompt share one user turn, results first
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "Rain, 4°C"},
                {"type": "text", "text": "Thanks. Tomorrow?"},
            ],
        },
    ]
    assert body["tools"] == [
        {"name": "weather", "description": "Look up the weather.", "input_schema": STRICT_SCHEMA},
        {"name": "convert", "input_schema": LOOSE_SCHEMA},
    ]


def test_anthropic_parts_without_a_native_form(adapters: dict[str, Any]) -> None:
    messages = [
        Message(
            role="user",
            content=[
                ImagePart(ref="data:image/png;base64,iVBORw0K"),
                ImagePart(ref="https://example.com/a.png"),
                ImagePart(ref="sha256:" + "0" * 64),
            ],
        ),
        Message.text("system", "[compressed turn 3] summary"),
        Message(
            role="assistant",
            content=[
                ThinkingPart(thinking="unsigned, from another provider"),
                RedactedThinkingPart(data="EtgB"),
                TextPart(text=""),
                ToolCallPart(id="t2", name="convert", arguments="not json"),
            ],
        ),
        Message(role="tool", content=[ToolResultPart(call_id="t2", output="boom", is_error=True)]),
    ]
    body = adapters["anthropic"].request_body(ModelRequest(None, messages, stream=True))
    user, assistant, tool = body["messages"]
    assert user["content"] == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0K"}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
        {"type": "text", "text": f"[image sha256:{'0' * 64} is not available to the model]"},
        {"type": "text", "text": "[compressed turn 3] summary"},
    ]
    assert assistant["content"] == [
        {"type": "redacted_thinking", "data": "EtgB"},
        {"type": "tool_use", "id": "t2", "name": "convert", "input": {"_raw_arguments": "not json"}},
    ]
    assert tool["content"] == [
        {"type": "tool_result", "tool_use_id": "t2", "content": "boom", "is_error": True}
    ]
    assert body["stream"] is True


def test_anthropic_seed_is_sent_verbatim_only_while_it_matches(adapters: dict[str, Any]) -> None:
    native = [
        {"type": "thinking", "thinking": "Need the tool.", "signature": "sig-1"},
        {"type": "text", "text": "Checking.", "citations": None},
        {"type": "tool_use", "id": "call_1", "name": "weather", "input": {"city": "Oslo"}},
    ]
    seed = ProviderReplay(protocol="anthropic.messages", native_blocks=native)
    messages = transcript()
    messages[1] = messages[1].model_copy(
        update={"tool_calls": [CALL.model_copy(update={"arguments": json.dumps({"city": "Oslo"})})]}
    )
    body = adapters["anthropic"].request_body(ModelRequest(None, messages, native_seed=[seed]))
    assert body["messages"][1]["content"] == native  # verbatim, citations key and all

    edited = messages[1].model_copy(update={"content": [TextPart(text="Checking again.")]})
    stale = adapters["anthropic"].request_body(ModelRequest(None, [messages[0], edited], native_seed=[seed]))
    assert stale["messages"][1]["content"][0] == {"type": "text", "text": "Checking again."}

    foreign = ProviderReplay(protocol="openai.responses", native_blocks=native)
    other = adapters["anthropic"].request_body(ModelRequest(None, messages, native_seed=[foreign]))
    assert other["messages"][1]["content"][1] == {"type": "text", "text": "Checking."}


# ─── Chat Completions ────────────────────────────────────────────────────────────────────────────


def test_chat_body(adapters: dict[str, Any]) -> None:
    body = adapters["chat"].request_body(
        ModelRequest("Be brief.", transcript(), TOOLS, max_tokens=99, stream=True)
    )
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Oslo?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "Rain, 4°C"},
        {"role": "user", "content": "Thanks. Tomorrow?"},
    ]
    assert body["max_completion_tokens"] == 99
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    # strict only where the schema is already strict-mode clean
    assert [t["function"]["strict"] for t in body["tools"]] == [True, False]
    assert "description" not in body["tools"][1]["function"]


def test_chat_multi_part_user_and_call_only_assistant(adapters: dict[str, Any]) -> None:
    messages = [
        Message(role="user", content=[TextPart(text="What is this?"), ImagePart(ref="https://x/y.png")]),
        Message(role="assistant", tool_calls=[CALL]),
    ]
    body = adapters["chat"].request_body(ModelRequest(None, messages))
    assert body["messages"][0]["content"] == [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
    ]
    assert body["messages"][1]["content"] is None


def test_chat_seed_drops_nulls_only(adapters: dict[str, Any]) -> None:
    native = {
        "role": "assistant",
        "content": "Checking.",
        "refusal": None,
        "annotations": [],
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
            }
        ],
    }
    seed = ProviderReplay(protocol="openai.chat", native_message=native)
    messages = transcript()
    messages[1] = messages[1].model_copy(update={"content": [TextPart(text="Checking.")]})
    body = adapters["chat"].request_body(ModelRequest(None, messages, native_seed=[seed]))
    assert body["messages"][1] == {k: v for k, v in native.items() if k != "refusal"}


# ─── Responses ───────────────────────────────────────────────────────────────────────────────────


def test_responses_body(adapters: dict[str, Any]) -> None:
    messages = [Message.text("system", "Use tools."), *transcript()]
    body = adapters["responses"].request_body(ModelRequest("Be brief.", messages, TOOLS, max_tokens=99))
    assert body["instructions"] == "Be brief." and body["max_output_tokens"] == 99
    assert body["input"] == [
        {"role": "developer", "content": "Use tools."},
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": "<think>\nNeed the tool.\n</think>"},
        {"role": "assistant", "content": "Checking."},
        {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": '{"city": "Oslo"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "Rain, 4°C"},
        {"role": "user", "content": "Thanks. Tomorrow?"},
    ]
    assert body["tools"][0] == {
        "type": "function",
        "name": "weather",
        "parameters": STRICT_SCHEMA,
        "description": "Look up the weather.",
        "strict": True,
    }
    loose = OpenAIResponsesProvider("m", api_key="k", capabilities=Capabilities())
    assert [t["strict"] for t in loose.request_body(ModelRequest(None, messages, TOOLS))["tools"]] == [
        False,
        False,
    ]


def test_responses_reasoning_travels_with_its_following_item() -> None:
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA"}
    call = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "c",
        "name": "n",
        "arguments": "{}",
        "status": "completed",
    }
    assert seed_items([reasoning, call]) == [reasoning, call]
    assert seed_items([reasoning, call, reasoning]) == [reasoning, call]
    assert seed_items([reasoning]) == []


def test_request_options_override_and_remove(adapters: dict[str, Any]) -> None:
    provider = OpenAIResponsesProvider(
        "m",
        api_key="k",
        request_options={"max_output_tokens": None, "reasoning": {"effort": "low"}, "model": "other"},
    )
    body = provider.request_body(ModelRequest(None, [Message.text("user", "hi")]))
    assert (
        "max_output_tokens" not in body
        and body["reasoning"] == {"effort": "low"}
        and body["model"] == "other"
    )
    assert merge_options({"a": 1, "b": 2}, {"a": None, "c": 3}) == {"b": 2, "c": 3}


# ─── Shared helpers ──────────────────────────────────────────────────────────────────────────────


def test_seed_alignment_runs_from_the_end() -> None:
    a = ProviderReplay(protocol="p", model="a")
    b = ProviderReplay(protocol="p", model="b")
    foreign = ProviderReplay(protocol="q")
    messages = [
        Message.text("assistant", "restored from a page-out archive"),
        Message.text("user", "u"),
        Message.text("assistant", "1"),
        Message.text("assistant", "2"),
    ]
    assert align_seed(messages, [a, b], "p") == [None, None, a, b]
    assert align_seed(messages, [a, foreign], "p") == [None, None, a, None]
    assert align_seed(messages, None, "p") == [None] * 4


def test_strict_compatibility() -> None:
    assert strict_compatible(STRICT_SCHEMA)
    assert not strict_compatible(LOOSE_SCHEMA)
    nested = {
        **STRICT_SCHEMA,
        "properties": {"city": {"type": "object", "properties": {"x": {"type": "string"}}}},
    }
    assert not strict_compatible(nested)
    listed = {"type": "array", "items": STRICT_SCHEMA}
    assert strict_compatible(listed)
    assert strict_compatible({"type": "object", "properties": {}, "additionalProperties": False})


def test_arguments_object() -> None:
    assert arguments_object("") == {}
    assert arguments_object('{"a": 1}') == {"a": 1}
    assert arguments_object("[1]") == {"_raw_arguments": "[1]"}
    assert arguments_object("{oops") == {"_raw_arguments": "{oops"}


def test_anthropic_tool_results_open_the_user_turn(adapters: dict[str, Any]) -> None:
    messages = [
        Message.text("user", "go"),
        Message(role="assistant", tool_calls=[CALL]),
        Message.text("user", "(the user typed while the tool ran)"),
        Message(role="tool", content=[ToolResultPart(call_id="call_1", output="done")]),
    ]
    body = adapters["anthropic"].request_body(ModelRequest(None, messages))
    assert [block["type"] for block in body["messages"][2]["content"]] == ["tool_result", "text"]
