"""Test helpers: recorded request bodies → neutral requests, and recorded responses → expected turns.

The expectations are read straight from the cassette (JSON response bodies, or the raw server-sent events
replayed by hand here), independently of the adapters' own parsers, so the adapter tests compare against
the recording rather than against themselves.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flightlog.messages import ContentPart, ImagePart, Message, TextPart, ToolResultPart
from flightlog.providers.anthropic import parse_blocks
from flightlog.providers.base import ToolSpec
from flightlog.providers.cassette import RecordedResponse
from flightlog.providers.openai_chat import parse_message
from flightlog.providers.openai_responses import parse_items

CASSETTES = Path(__file__).resolve().parents[1] / "data" / "provider"

JsonObj = dict[str, Any]


# ─── Recorded request → neutral transcript ───────────────────────────────────────────────────────


@dataclass
class Transcript:
    """A recorded request body as a neutral transcript (assistant turns parsed from the native items)."""

    system_prompt: str | None
    messages: list[Message]
    tools: list[ToolSpec]


def transcript(protocol: str, body: JsonObj) -> Transcript:
    """The neutral transcript a recorded request body carries."""
    if protocol == "anthropic.messages":
        return _anthropic(body)
    if protocol == "openai.chat":
        return _chat(body)
    return _responses(body)


def _anthropic(body: JsonObj) -> Transcript:
    system = body.get("system")
    if isinstance(system, list):
        system = "".join(block["text"] for block in system)
    messages: list[Message] = []
    for message in body["messages"]:
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if message["role"] == "assistant":
            parts, calls = parse_blocks(blocks)
            messages.append(Message(role="assistant", content=parts, tool_calls=calls))
            continue
        for block in blocks:
            if block["type"] == "tool_result":
                result = ToolResultPart(
                    call_id=block["tool_use_id"],
                    output=_text(block["content"]),
                    is_error=block.get("is_error"),
                )
                messages.append(Message(role="tool", content=[result]))
        texts = [TextPart(text=block["text"]) for block in blocks if block["type"] == "text"]
        if texts:
            messages.append(Message(role="user", content=list(texts)))
    tools = [
        ToolSpec(t["name"], t.get("description") or "", t["input_schema"]) for t in body.get("tools", [])
    ]
    return Transcript(system, messages, tools)


def _chat(body: JsonObj) -> Transcript:
    rows = list(body["messages"])
    system = rows.pop(0)["content"] if rows and rows[0]["role"] == "system" else None
    messages: list[Message] = []
    for row in rows:
        if row["role"] == "assistant":
            parts, calls = parse_message(row)
            messages.append(Message(role="assistant", content=parts, tool_calls=calls))
        elif row["role"] == "tool":
            messages.append(
                Message(
                    role="tool", content=[ToolResultPart(call_id=row["tool_call_id"], output=row["content"])]
                )
            )
        else:
            messages.append(Message(role=row["role"], content=_user_parts(row["content"])))
    tools = [
        ToolSpec(t["function"]["name"], t["function"].get("description") or "", t["function"]["parameters"])
        for t in body.get("tools", [])
    ]
    return Transcript(system, messages, tools)


_ASSISTANT_ITEMS = frozenset({"reasoning", "function_call", "message"})


def _responses(body: JsonObj) -> Transcript:
    messages: list[Message] = []
    turn: list[JsonObj] = []
    for item in body["input"]:
        if item.get("type") in _ASSISTANT_ITEMS or item.get("role") == "assistant":
            turn.append(item)
            continue
        _flush(turn, messages)
        if item.get("type") == "function_call_output":
            messages.append(
                Message(role="tool", content=[ToolResultPart(call_id=item["call_id"], output=item["output"])])
            )
        elif item.get("role") in ("developer", "system"):
            messages.append(Message.text("system", item["content"]))
        else:
            messages.append(Message(role="user", content=_user_parts(item["content"])))
    _flush(turn, messages)
    tools = [ToolSpec(t["name"], t.get("description") or "", t["parameters"]) for t in body.get("tools", [])]
    return Transcript(body.get("instructions"), messages, tools)


def _flush(turn: list[JsonObj], messages: list[Message]) -> None:
    if turn:
        parts, calls = parse_items(turn)
        messages.append(Message(role="assistant", content=parts, tool_calls=calls))
        turn.clear()


def _user_parts(content: Any) -> list[ContentPart]:
    if isinstance(content, str):
        return [TextPart(text=content)]
    parts: list[ContentPart] = []
    for part in content:
        if part["type"] in ("text", "input_text"):
            parts.append(TextPart(text=part["text"]))
        elif part["type"] == "image_url":
            parts.append(ImagePart(ref=part["image_url"]["url"]))
        elif part["type"] == "input_image":
            parts.append(ImagePart(ref=part["image_url"]))
    return parts


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content)


# ─── Recorded response → expected neutral turn ───────────────────────────────────────────────────


@dataclass
class Expected:
    """What the recorded response says, read without the adapters' parsers."""

    texts: list[str] = field(default_factory=list)
    thinking: list[tuple[str, str | None]] = field(default_factory=list)
    redacted: list[str] = field(default_factory=list)
    calls: list[tuple[str, str, str]] = field(default_factory=list)
    usage: tuple[int, int, int | None, int | None] = (0, 0, None, None)
    text_deltas: list[str] = field(default_factory=list)
    final: JsonObj | None = None
    """For a stream: the response object it amounts to (Responses: the ``response.completed`` payload)."""
    done_items: list[JsonObj] | None = None


def response_text(response: RecordedResponse) -> str:
    """The recorded response body as text (gunzipped when it was recorded gzip)."""
    body = response.body
    if (response.header("content-encoding") or "").lower() == "gzip":
        body = gzip.decompress(body)
    return body.decode("utf-8")


def sse_events(text: str) -> list[JsonObj]:
    """The JSON ``data:`` payloads of a server-sent-events body, in order (``[DONE]`` skipped)."""
    events = []
    for line in text.splitlines():
        if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]"):
            events.append(json.loads(line[5:]))
    return events


def expected(protocol: str, response: RecordedResponse) -> Expected:
    """The neutral turn a recorded (successful) response carries."""
    text = response_text(response)
    if protocol == "anthropic.messages":
        return (
            _anthropic_sse(sse_events(text))
            if response.is_event_stream
            else _anthropic_json(json.loads(text))
        )
    if protocol == "openai.chat":
        return _chat_sse(sse_events(text)) if response.is_event_stream else _chat_json(json.loads(text))
    if response.is_event_stream:
        events = sse_events(text)
        final = next(e["response"] for e in reversed(events) if e["type"] == "response.completed")
        done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
        result = _responses_json(final, done)
        result.text_deltas = [e["delta"] for e in events if e["type"] == "response.output_text.delta"]
        result.final, result.done_items = final, done
        return result
    body = json.loads(text)
    return _responses_json(body, body["output"])


def _anthropic_json(body: JsonObj) -> Expected:
    result = Expected()
    for block in body["content"]:
        if block["type"] == "text":
            result.texts.append(block["text"])
        elif block["type"] == "thinking":
            result.thinking.append((block["thinking"], block["signature"]))
        elif block["type"] == "redacted_thinking":
            result.redacted.append(block["data"])
        elif block["type"] == "tool_use":
            result.calls.append((block["id"], block["name"], json.dumps(block["input"], ensure_ascii=False)))
    usage = body["usage"]
    result.usage = (
        usage["input_tokens"],
        usage["output_tokens"],
        usage.get("cache_read_input_tokens"),
        usage.get("cache_creation_input_tokens"),
    )
    return result


def _anthropic_sse(events: list[JsonObj]) -> Expected:
    body, raw_json = anthropic_unstreamed(events)
    result = _anthropic_json(body)
    result.calls = [(i, n, raw_json[i]) for i, n, _ in result.calls]  # the argument text as streamed
    result.text_deltas = [
        e["delta"]["text"]
        for e in events
        if e["type"] == "content_block_delta" and e["delta"]["type"] == "text_delta"
    ]
    result.final = body
    return result


def anthropic_unstreamed(events: list[JsonObj]) -> tuple[JsonObj, dict[str, str]]:
    """The Messages API response object a recorded event stream amounts to, and each tool call's raw
    argument text (``input_json_delta`` fragments joined), by call id."""
    message: JsonObj = {}
    blocks: dict[int, JsonObj] = {}
    fragments: dict[int, str] = {}
    for event in events:
        if event["type"] == "message_start":
            message = {**event["message"], "usage": dict(event["message"]["usage"])}
        elif event["type"] == "content_block_start":
            blocks[event["index"]] = dict(event["content_block"])
        elif event["type"] == "content_block_delta":
            block, delta = blocks[event["index"]], event["delta"]
            field = {"text_delta": "text", "thinking_delta": "thinking", "signature_delta": "signature"}
            if delta["type"] in field:
                key = field[delta["type"]]
                block[key] += delta[key]
            elif delta["type"] == "input_json_delta":
                fragments[event["index"]] = fragments.get(event["index"], "") + delta["partial_json"]
        elif event["type"] == "message_delta":
            message.update(event["delta"])
            message["usage"].update({k: v for k, v in event["usage"].items() if v is not None})
    for index, text in fragments.items():
        if text:
            blocks[index]["input"] = json.loads(text)
    message["content"] = [blocks[index] for index in sorted(blocks)]
    raw = {blocks[i]["id"]: fragments.get(i, "") for i in blocks if blocks[i]["type"] == "tool_use"}
    return message, raw


def _chat_json(body: JsonObj) -> Expected:
    message = body["choices"][0]["message"]
    result = Expected(texts=[message["content"]] if message.get("content") else [])
    for call in message.get("tool_calls") or []:
        result.calls.append((call["id"], call["function"]["name"], call["function"]["arguments"]))
    result.usage = _chat_usage(body["usage"])
    return result


def _chat_sse(events: list[JsonObj]) -> Expected:
    body = chat_unstreamed(events)
    result = _chat_json(body)
    result.text_deltas = [
        c["delta"]["content"] for e in events for c in e["choices"] if c["delta"].get("content")
    ]
    result.final = body
    return result


def chat_unstreamed(events: list[JsonObj]) -> JsonObj:
    """The Chat Completions response object a recorded chunk stream amounts to, shaped as the unstreamed
    responses in the cassettes are (``content``, ``refusal``, ``annotations``, ``tool_calls`` when any;
    OpenRouter's ``reasoning`` text and ``reasoning_details`` when any, the details joined per
    ``(type, index)``)."""
    text, finish, usage, reasoning = "", None, None, None
    calls: dict[int, JsonObj] = {}
    details: dict[tuple[Any, Any], JsonObj] = {}
    for event in events:
        usage = event.get("usage") or usage
        for choice in event["choices"]:
            finish = choice.get("finish_reason") or finish
            delta = choice["delta"]
            text += delta.get("content") or ""
            if delta.get("reasoning") is not None:
                reasoning = (reasoning or "") + delta["reasoning"]
            for fragment in delta.get("reasoning_details") or []:
                joined = details.setdefault((fragment["type"], fragment.get("index")), {})
                for key, value in fragment.items():
                    if key in ("text", "summary", "data", "signature"):
                        joined[key] = joined.get(key, "") + value
                    else:
                        joined.setdefault(key, value)
            for call in delta.get("tool_calls") or []:
                entry = calls.setdefault(
                    call["index"], {"id": "", "type": "function", "function": {"arguments": ""}}
                )
                entry["id"] = call.get("id") or entry["id"]
                function = call.get("function", {})
                if function.get("name"):
                    entry["function"]["name"] = function["name"]
                entry["function"]["arguments"] += function.get("arguments") or ""
    message: JsonObj = {"role": "assistant", "content": text or None, "refusal": None, "annotations": []}
    if reasoning is not None:
        message["reasoning"] = reasoning
    if details:
        message["reasoning_details"] = list(details.values())
    if calls:
        message["tool_calls"] = [calls[index] for index in sorted(calls)]
    envelope = {
        key: events[0][key]
        for key in ("id", "created", "model", "system_fingerprint", "service_tier")
        if key in events[0]  # OpenRouter sends neither system_fingerprint nor service_tier
    }
    choice = {"index": 0, "message": message, "finish_reason": finish}
    return {**envelope, "object": "chat.completion", "choices": [choice], "usage": usage}


def _chat_usage(usage: JsonObj) -> tuple[int, int, int | None, int | None]:
    details = usage.get("prompt_tokens_details") or {}
    return usage["prompt_tokens"], usage["completion_tokens"], details.get("cached_tokens"), None


def _responses_json(body: JsonObj, output: list[JsonObj]) -> Expected:
    result = Expected()
    for item in output:
        if item["type"] == "reasoning":
            summaries = [s["text"] for s in item.get("summary", [])]
            result.thinking.extend((text, None) for text in summaries)
            if not summaries and "encrypted_content" in item:
                result.redacted.append(item["encrypted_content"])
        elif item["type"] == "message":
            result.texts.extend(part["text"] for part in item["content"] if part["type"] == "output_text")
        elif item["type"] == "function_call":
            result.calls.append((item["call_id"], item["name"], item["arguments"]))
    usage = body["usage"]
    result.usage = (
        usage["input_tokens"],
        usage["output_tokens"],
        (usage.get("input_tokens_details") or {}).get("cached_tokens"),
        None,
    )
    return result
