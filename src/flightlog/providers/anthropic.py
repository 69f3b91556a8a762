"""Anthropic Messages API adapter (protocol ``anthropic.messages``) over the official ``anthropic`` SDK.

Rendering (neutral → request body):

* ``system_prompt`` → ``system`` (a string). A ``system`` message inside the transcript becomes user text
  (the API has no mid-conversation system role).
* ``user`` parts → ``text`` / ``image`` blocks (``data:`` URIs as base64, ``http(s)`` as URL sources; an
  artifact handle, which the model cannot fetch, as a text placeholder). ``tool`` messages (and any
  ``tool_result`` part) → ``tool_result`` blocks in a user turn (``content`` the output text, ``is_error``
  when the neutral part sets it). Consecutive turns of one role are merged into one, tool results first.
* ``assistant`` → ``thinking`` blocks (with their signature; an unsigned thinking part is dropped, as the
  API rejects it), ``redacted_thinking`` blocks (``data`` byte-exact), ``text`` blocks (empty text dropped)
  and ``tool_use`` blocks (``input`` parsed from the raw argument text; see
  :func:`~flightlog.providers._sdk.arguments_object`).
* **Native seed:** when ``request.native_seed`` pairs an assistant message with an ``anthropic.messages``
  payload whose blocks still parse to that message, the recorded ``native_blocks`` are sent verbatim
  instead (thinking signatures, redacted thinking, tool ``input`` objects byte-exact).
* Tools → ``{"name", "description"?, "input_schema"}``; ``max_tokens`` from the request; then
  ``request_options`` (e.g. ``thinking``, ``tool_choice``, top-level ``cache_control``) merged on top.

Parsing (response → neutral): ``text`` → :class:`TextPart`, ``thinking`` → :class:`ThinkingPart` with its
signature, ``redacted_thinking`` → :class:`RedactedThinkingPart`, ``tool_use`` → :class:`ToolCall` with
``arguments`` = ``json.dumps(input, ensure_ascii=False)`` (as the Claude Code importer writes it); other
blocks (server tools) stay in ``native_blocks`` only. ``ProviderReplay.native_blocks`` is the response
``content`` verbatim; usage maps ``input_tokens``/``output_tokens`` and ``cache_read_input_tokens`` /
``cache_creation_input_tokens`` to the cache fields.

Streaming uses the SDK's event stream and rebuilds the same ``content`` blocks from ``content_block_start``
plus ``text_delta`` / ``thinking_delta`` / ``signature_delta`` / ``input_json_delta`` / ``citations_delta``,
so a streamed call returns exactly what the same call unstreamed would; only ``text_delta`` text goes to
``on_token``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..events import ProviderReplay
from ..messages import (
    ContentPart,
    ImagePart,
    Message,
    RedactedThinkingPart,
    TextPart,
    ThinkingPart,
    ToolCall,
    ToolResultPart,
)
from ._adapter import SdkAdapter, StreamBuilder
from ._sdk import JsonObj, UsageFields, align_seed, arguments_object, merge_options, neutral_calls, same_turn
from .base import Capabilities, ModelRequest, ModelResponse, TokenCallback, ToolSpec

__all__ = [
    "DEFAULT_CAPABILITIES",
    "PROTOCOL",
    "AnthropicProvider",
    "parse_blocks",
    "render_messages",
    "response_from_message",
]

PROTOCOL = "anthropic.messages"
"""``ProviderReplay.protocol`` of this adapter's responses."""
DEFAULT_CAPABILITIES = Capabilities(
    strict_schema=False,
    parallel_tool_calls=True,
    streaming_tool_calls=True,
    prompt_caching=True,
    structured_output=False,
)
"""Declared defaults: parallel and streamed tool use and prompt caching; no strict schemas or structured
output mode relied on (validated locally instead)."""
_USAGE = UsageFields(
    input=("input_tokens",),
    output=("output_tokens",),
    cache_read=("cache_read_input_tokens",),
    cache_write=("cache_creation_input_tokens",),
)


class AnthropicProvider(SdkAdapter):
    """A ``ModelProvider`` for one Claude model through ``anthropic.AsyncAnthropic().messages``.

    Constructor: see :class:`~flightlog.providers._adapter.SdkAdapter` (``model``, ``api_key``, ``base_url``,
    ``max_retries``, ``client``, ``capabilities``, ``request_options``, e.g. ``{"thinking": {"type":
    "enabled", "budget_tokens": 2048}}``). The default ``api_key`` is the SDK's ``ANTHROPIC_API_KEY``
    lookup; a missing one surfaces as a non-retryable :class:`ProviderError` at the first call.

    Attributes: as :class:`~flightlog.providers._adapter.SdkAdapter`'s; ``protocol`` is ``anthropic.messages``.
    """

    protocol = PROTOCOL
    default_capabilities = DEFAULT_CAPABILITIES
    sdk_name = "anthropic"
    client_class = "AsyncAnthropic"
    endpoint = "messages"

    def request_body(self, request: ModelRequest) -> JsonObj:
        """The JSON body :meth:`complete` sends for ``request`` (rendering rules: module docstring)."""
        body: JsonObj = {"model": self.model, "max_tokens": request.max_tokens}
        if request.system_prompt:
            body["system"] = request.system_prompt
        seeds = align_seed(request.messages, request.native_seed, PROTOCOL)
        body["messages"] = render_messages(request.messages, seeds)
        if request.tools:
            body["tools"] = [_tool(spec) for spec in request.tools]
        if request.stream:
            body["stream"] = True
        return merge_options(body, self.request_options)

    def parse(self, payload: JsonObj) -> ModelResponse:
        """A Messages API response object → :class:`ModelResponse` (see :func:`response_from_message`)."""
        return response_from_message(payload)

    def _stream_builder(self, on_token: TokenCallback | None) -> StreamBuilder:
        return _StreamedMessage(on_token)


# ─── Rendering ───────────────────────────────────────────────────────────────────────────────────


def render_messages(messages: Sequence[Message], seeds: Sequence[ProviderReplay | None]) -> list[JsonObj]:
    """Neutral messages (with their aligned native payloads) → Messages API ``messages``.

    Args:
        messages: The neutral transcript.
        seeds: One entry per message (:func:`~flightlog.providers._sdk.align_seed`).

    Returns:
        Alternating ``user`` / ``assistant`` turns (consecutive same-role turns merged).
    """
    turns: list[JsonObj] = []
    for message, seed in zip(messages, seeds, strict=True):
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _assistant_content(message, seed) if role == "assistant" else _user_blocks(message)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": list(blocks)})
    for turn in turns:
        if turn["role"] == "user":  # tool results must open the turn that answers the calls
            turn["content"].sort(key=lambda block: block.get("type") != "tool_result")
    return turns


def _assistant_content(message: Message, seed: ProviderReplay | None) -> list[JsonObj]:
    native = _seeded_blocks(message, seed)
    return native if native is not None else _assistant_blocks(message)


def _seeded_blocks(message: Message, seed: ProviderReplay | None) -> list[JsonObj] | None:
    if seed is None or not seed.native_blocks:
        return None
    blocks = [block for block in seed.native_blocks if isinstance(block, dict)]
    parts, calls = parse_blocks(blocks)
    return copy.deepcopy(blocks) if same_turn(message, parts, calls) else None


def _assistant_blocks(message: Message) -> list[JsonObj]:
    blocks: list[JsonObj] = []
    for part in message.content:
        if isinstance(part, ThinkingPart) and part.signature:
            blocks.append({"type": "thinking", "thinking": part.thinking, "signature": part.signature})
        elif isinstance(part, RedactedThinkingPart):
            blocks.append({"type": "redacted_thinking", "data": part.data})
        elif isinstance(part, TextPart) and part.text:
            blocks.append({"type": "text", "text": part.text})
    blocks.extend(_tool_use(call) for call in neutral_calls(message))
    return blocks


def _tool_use(call: ToolCall) -> JsonObj:
    return {"type": "tool_use", "id": call.id, "name": call.name, "input": arguments_object(call.arguments)}


def _user_blocks(message: Message) -> list[JsonObj]:
    blocks: list[JsonObj] = []
    for part in message.content:
        if isinstance(part, TextPart) and part.text:
            blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            blocks.append(_image(part))
        elif isinstance(part, ToolResultPart):
            blocks.append(_tool_result(part))
    return blocks


def _tool_result(part: ToolResultPart) -> JsonObj:
    block: JsonObj = {"type": "tool_result", "tool_use_id": part.call_id, "content": part.output}
    if part.is_error is not None:
        block["is_error"] = part.is_error
    return block


def _image(part: ImagePart) -> JsonObj:
    ref = part.ref
    if ref.startswith("data:") and ";base64," in ref:
        header, data = ref[5:].split(";base64,", 1)
        media_type = part.media_type or header or "image/png"
        return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}
    if ref.startswith(("http://", "https://")):
        return {"type": "image", "source": {"type": "url", "url": ref}}
    return {"type": "text", "text": f"[image {ref} is not available to the model]"}


def _tool(spec: ToolSpec) -> JsonObj:
    tool: JsonObj = {"name": spec.name, "input_schema": spec.parameters}
    if spec.description:
        tool["description"] = spec.description
    return tool


# ─── Parsing ─────────────────────────────────────────────────────────────────────────────────────


def parse_blocks(blocks: Sequence[Any]) -> tuple[list[ContentPart], list[ToolCall]]:
    """Messages API content blocks → neutral parts and tool calls.

    Args:
        blocks: ``content`` of a Messages API response (decoded JSON).

    Returns:
        ``(parts, calls)``: text, thinking (with signature) and redacted-thinking parts in order, and one
        :class:`ToolCall` per ``tool_use`` block.
    """
    parts: list[ContentPart] = []
    calls: list[ToolCall] = []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append(TextPart(text=str(block.get("text", ""))))
        elif kind == "thinking":
            signature = block.get("signature")
            thinking = str(block.get("thinking", ""))
            parts.append(ThinkingPart(thinking=thinking, signature=signature if signature else None))
        elif kind == "redacted_thinking":
            parts.append(RedactedThinkingPart(data=str(block.get("data", ""))))
        elif kind == "tool_use":
            arguments = json.dumps(block.get("input", {}), ensure_ascii=False)
            calls.append(
                ToolCall(id=str(block.get("id", "")), name=str(block.get("name", "")), arguments=arguments)
            )
    return parts, calls


def response_from_message(message: Mapping[str, Any]) -> ModelResponse:
    """A Messages API response object (decoded JSON) → :class:`ModelResponse`.

    Args:
        message: The response body (``{"content": [...], "model", "usage", "stop_reason", ...}``).

    Returns:
        The neutral assistant message, its ``ProviderReplay`` (``native_blocks`` = ``content`` verbatim),
        usage and ``stop_reason``.
    """
    blocks = message.get("content")
    blocks = blocks if isinstance(blocks, list) else []
    parts, calls = parse_blocks(blocks)
    model = message.get("model")
    replay = ProviderReplay(
        protocol=PROTOCOL,
        provider="anthropic",
        model=model if isinstance(model, str) else None,
        native_blocks=list(blocks),
    )
    stop = message.get("stop_reason")
    return ModelResponse(
        message=Message(role="assistant", content=parts, tool_calls=calls),
        provider_replay=replay,
        usage=_USAGE.read(message.get("usage")),
        stop_reason=stop if isinstance(stop, str) else None,
    )


# ─── Streaming ───────────────────────────────────────────────────────────────────────────────────


class _StreamedMessage:
    """Rebuilds the unstreamed response object from Messages API stream events."""

    def __init__(self, on_token: TokenCallback | None) -> None:
        self._on_token = on_token
        self._message: JsonObj = {}
        self._blocks: dict[int, JsonObj] = {}
        self._json: dict[int, str] = {}

    def feed(self, event: Any) -> None:
        """Apply one event (decoded JSON); unknown event types are ignored."""
        if not isinstance(event, dict):
            return
        kind = event.get("type")
        if kind == "message_start" and isinstance(event.get("message"), dict):
            self._message = dict(event["message"])
        elif kind == "content_block_start" and isinstance(event.get("content_block"), dict):
            self._blocks[int(event.get("index", len(self._blocks)))] = dict(event["content_block"])
        elif kind == "content_block_delta" and isinstance(event.get("delta"), dict):
            self._delta(int(event.get("index", 0)), event["delta"])
        elif kind == "content_block_stop":
            self._finish_block(int(event.get("index", 0)))
        elif kind == "message_delta":
            self._message_delta(event)

    def _delta(self, index: int, delta: JsonObj) -> None:
        block = self._blocks.setdefault(index, {})
        kind = delta.get("type")
        if kind == "text_delta":
            text = str(delta.get("text", ""))
            block["text"] = str(block.get("text", "")) + text
            if self._on_token is not None and text:
                self._on_token(text)
        elif kind == "thinking_delta":
            block["thinking"] = str(block.get("thinking", "")) + str(delta.get("thinking", ""))
        elif kind == "signature_delta":
            block["signature"] = str(block.get("signature", "")) + str(delta.get("signature", ""))
        elif kind == "input_json_delta":
            self._json[index] = self._json.get(index, "") + str(delta.get("partial_json", ""))
        elif kind == "citations_delta" and "citation" in delta:
            citations = block.get("citations")
            block["citations"] = [*(citations if isinstance(citations, list) else []), delta["citation"]]

    def _finish_block(self, index: int) -> None:
        text = self._json.pop(index, "")
        block = self._blocks.get(index)
        if block is not None and text.strip():
            try:
                block["input"] = json.loads(text)
            except ValueError:
                block["input"] = {"_raw_arguments": text}

    def _message_delta(self, event: JsonObj) -> None:
        delta = event.get("delta")
        if isinstance(delta, dict):
            self._message.update(
                {key: value for key, value in delta.items() if key in ("stop_reason", "stop_sequence")}
            )
        usage = event.get("usage")
        if isinstance(usage, dict):
            merged = dict(self._message.get("usage") or {})
            merged.update({key: value for key, value in usage.items() if value is not None})
            self._message["usage"] = merged

    def result(self) -> JsonObj:
        """The assembled response object (``content`` in block-index order)."""
        for index in list(self._json):
            self._finish_block(index)
        message = dict(self._message)
        message["content"] = [self._blocks[index] for index in sorted(self._blocks)]
        return message
