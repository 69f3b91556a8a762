"""OpenAI Chat Completions adapter (protocol ``openai.chat``) over the official ``openai`` SDK.

Rendering (neutral → request body):

* ``system_prompt`` → a first ``{"role": "system"}`` message; transcript ``system`` messages likewise.
* ``user`` → ``content`` as a string (one text part) or as ``text`` / ``image_url`` parts.
* ``assistant`` → ``{"role": "assistant", "content": <text or null>, "tool_calls": [...]}`` with each call's
  ``arguments`` the raw text; thinking parts are dropped (Chat Completions takes no reasoning back).
* ``tool`` messages (and any ``tool_result`` part) → one ``{"role": "tool", "tool_call_id", "content"}`` per
  result.
* **Native seed:** when ``request.native_seed`` pairs an assistant message with an ``openai.chat`` payload
  whose ``native_message`` still parses to that message, that message is sent verbatim instead (null-valued
  keys left out: the API treats them as absent). So ``reasoning_details`` (OpenRouter, MiniMax) goes back
  unmodified, as OpenRouter's reasoning docs ask; the message's ``reasoning`` text, OpenRouter's plain
  rendering of those same details, is then left out (the recorded OpenRouter follow-up in
  ``openai-chat/openrouter-reasoning-details-roundtrip`` sends ``reasoning_details`` alone).
* Tools → ``{"type": "function", "function": {"name", "description"?, "parameters", "strict"}}``;
  ``strict`` is true only when the route declares ``strict_schema`` and the schema already satisfies strict
  mode (:func:`~flightlog.providers._sdk.strict_compatible`). ``max_completion_tokens`` from the request;
  when streaming, ``stream_options.include_usage`` (usage arrives in the last chunk). Then
  ``request_options`` are merged on top (None removes a key).

Parsing: the first choice's ``message``: ``content`` (or a ``refusal``) → :class:`TextPart`,
``reasoning_content`` (DeepSeek-style) → :class:`ThinkingPart`, ``tool_calls`` → :class:`ToolCall` with
the ``arguments`` text verbatim. ``ProviderReplay.native_message`` is that message verbatim (``tool_calls``
also copied to ``ProviderReplay.tool_calls``, ``reasoning_content`` to ``ProviderReplay.reasoning_content``
and a non-empty ``reasoning_details``, as OpenRouter and MiniMax return it, to
``ProviderReplay.reasoning_details``); usage maps ``prompt_tokens``/``completion_tokens`` and
``prompt_tokens_details.cached_tokens``; ``stop_reason`` is ``finish_reason``.

Streaming uses the SDK's chunk stream: content deltas go to ``on_token``; role, content, refusal,
``reasoning_content``, ``reasoning``, annotations and tool-call deltas (by ``index``: id, name, argument
fragments) are assembled into the same message object the unstreamed call returns. ``reasoning_details``
deltas (lists of ``{"type", "index", ...}`` fragments) are merged per ``(type, index)``: the ``text``,
``summary``, ``data`` and ``signature`` strings are concatenated, any other key keeps its first non-null
value (recorded shape: ``openai-chat/openrouter-stream-reasoning-details``, where Anthropic thinking arrives
as ``reasoning.text`` fragments and its signature in a later fragment of the same index).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from ..events import ProviderReplay
from ..messages import (
    ContentPart,
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCall,
    ToolResultPart,
)
from ._adapter import SdkAdapter, StreamBuilder
from ._sdk import JsonObj, UsageFields, align_seed, merge_options, neutral_calls, same_turn, strict_compatible
from .base import Capabilities, ModelRequest, ModelResponse, TokenCallback, ToolSpec

__all__ = [
    "DEFAULT_CAPABILITIES",
    "PROTOCOL",
    "OpenAIChatProvider",
    "parse_message",
    "render_messages",
    "response_from_completion",
]

PROTOCOL = "openai.chat"
"""``ProviderReplay.protocol`` of this adapter's responses."""
DEFAULT_CAPABILITIES = Capabilities(
    strict_schema=True,
    parallel_tool_calls=True,
    streaming_tool_calls=True,
    prompt_caching=True,
    structured_output=True,
)
"""Declared defaults: strict function schemas, parallel and streamed tool calls, automatic prompt caching
and structured output are all offered by Chat Completions."""
_USAGE = UsageFields(
    input=("prompt_tokens",),
    output=("completion_tokens",),
    cache_read=("prompt_tokens_details", "cached_tokens"),
)


class OpenAIChatProvider(SdkAdapter):
    """A ``ModelProvider`` for one model through ``openai.AsyncOpenAI().chat.completions``.

    Constructor: see :class:`~flightlog.providers._adapter.SdkAdapter` (``model``, ``api_key``, ``base_url``
    including ``/v1``, ``max_retries``, ``client``, ``capabilities``, ``request_options``, e.g.
    ``{"tool_choice": "auto"}`` or ``{"max_completion_tokens": None}`` to send no output cap).

    Attributes: as :class:`~flightlog.providers._adapter.SdkAdapter`'s; ``protocol`` is ``openai.chat``.
    """

    protocol = PROTOCOL
    default_capabilities = DEFAULT_CAPABILITIES
    sdk_name = "openai"
    client_class = "AsyncOpenAI"
    endpoint = "chat.completions"

    def request_body(self, request: ModelRequest) -> JsonObj:
        """The JSON body :meth:`complete` sends for ``request`` (rendering rules: module docstring)."""
        seeds = align_seed(request.messages, request.native_seed, PROTOCOL)
        messages = render_messages(request.messages, seeds)
        if request.system_prompt:
            messages.insert(0, {"role": "system", "content": request.system_prompt})
        body: JsonObj = {"model": self.model, "messages": messages}
        body["max_completion_tokens"] = request.max_tokens
        if request.tools:
            strict = self._capabilities.strict_schema
            body["tools"] = [_tool(spec, strict) for spec in request.tools]
        if request.stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return merge_options(body, self.request_options)

    def parse(self, payload: JsonObj) -> ModelResponse:
        """A Chat Completions response object → :class:`ModelResponse` (see :func:`response_from_completion`)."""
        return response_from_completion(payload)

    def _stream_builder(self, on_token: TokenCallback | None) -> StreamBuilder:
        return _StreamedCompletion(on_token)


# ─── Rendering ───────────────────────────────────────────────────────────────────────────────────


def render_messages(messages: Sequence[Message], seeds: Sequence[ProviderReplay | None]) -> list[JsonObj]:
    """Neutral messages (with their aligned native payloads) → Chat Completions ``messages``.

    Args:
        messages: The neutral transcript.
        seeds: One entry per message (:func:`~flightlog.providers._sdk.align_seed`).

    Returns:
        The chat messages, in order.
    """
    rendered: list[JsonObj] = []
    for message, seed in zip(messages, seeds, strict=True):
        if message.role == "assistant":
            rendered.append(_seeded_message(message, seed) or _assistant_message(message))
        elif message.role == "system":
            rendered.append({"role": "system", "content": message.text_content()})
        else:
            rendered.extend(_user_messages(message))
    return rendered


def _seeded_message(message: Message, seed: ProviderReplay | None) -> JsonObj | None:
    native = seed.native_message if seed is not None else None
    if not isinstance(native, dict):
        return None
    parts, calls = parse_message(native)
    if not same_turn(message, parts, calls):
        return None
    drop = {"reasoning"} if _present(native.get("reasoning_details")) else set()
    return {
        key: copy.deepcopy(value) for key, value in native.items() if value is not None and key not in drop
    }


def _assistant_message(message: Message) -> JsonObj:
    text = "".join(part.text for part in message.content if isinstance(part, TextPart))
    rendered: JsonObj = {"role": "assistant", "content": text or None}
    calls = neutral_calls(message)
    if calls:
        rendered["tool_calls"] = [_tool_call(call) for call in calls]
    return rendered


def _tool_call(call: ToolCall) -> JsonObj:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


def _user_messages(message: Message) -> list[JsonObj]:
    results = [part for part in message.content if isinstance(part, ToolResultPart)]
    rendered: list[JsonObj] = [
        {"role": "tool", "tool_call_id": r.call_id, "content": r.output} for r in results
    ]
    parts = [_user_part(part) for part in message.content if isinstance(part, TextPart | ImagePart)]
    if parts:
        only_text = len(parts) == 1 and parts[0]["type"] == "text"
        rendered.append({"role": "user", "content": parts[0]["text"] if only_text else parts})
    return rendered


def _user_part(part: TextPart | ImagePart) -> JsonObj:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    return {"type": "image_url", "image_url": {"url": part.ref}}


def _tool(spec: ToolSpec, strict_route: bool) -> JsonObj:
    function: JsonObj = {"name": spec.name, "parameters": spec.parameters}
    if spec.description:
        function["description"] = spec.description
    function["strict"] = strict_route and strict_compatible(spec.parameters)
    return {"type": "function", "function": function}


# ─── Parsing ─────────────────────────────────────────────────────────────────────────────────────


def parse_message(message: Mapping[str, Any]) -> tuple[list[ContentPart], list[ToolCall]]:
    """A Chat Completions assistant message (decoded JSON) → neutral parts and tool calls.

    Args:
        message: ``choices[0].message`` (or a seeded copy of it).

    Returns:
        ``(parts, calls)``: a thinking part for ``reasoning_content``, a text part for ``content`` (else for
        ``refusal``), and the function tool calls with their argument text verbatim.
    """
    parts: list[ContentPart] = []
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning:
        parts.append(ThinkingPart(thinking=reasoning))
    text = message.get("content")
    if not isinstance(text, str) or not text:
        text = message.get("refusal")
    if isinstance(text, str) and text:
        parts.append(TextPart(text=text))
    calls: list[ToolCall] = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            arguments = function.get("arguments")
            calls.append(
                ToolCall(
                    id=str(call.get("id", "")),
                    name=str(function.get("name", "")),
                    arguments=arguments if isinstance(arguments, str) else "",
                )
            )
    return parts, calls


def response_from_completion(completion: Mapping[str, Any]) -> ModelResponse:
    """A Chat Completions response object (decoded JSON) → :class:`ModelResponse`.

    Args:
        completion: The response body (``{"choices": [...], "model", "usage", ...}``).

    Returns:
        The neutral message of the first choice, its ``ProviderReplay`` (``native_message`` verbatim),
        usage and ``finish_reason``.
    """
    choices = completion.get("choices")
    choice = _obj(choices[0]) if isinstance(choices, list) and choices else {}
    native = _obj(choice.get("message"))
    parts, calls = parse_message(native)
    model = completion.get("model")
    tool_calls = native.get("tool_calls")
    reasoning = native.get("reasoning_content")
    details = native.get("reasoning_details")
    replay = ProviderReplay(
        protocol=PROTOCOL,
        provider="openai",
        model=model if isinstance(model, str) else None,
        native_message=native,
        tool_calls=list(tool_calls) if isinstance(tool_calls, list) and tool_calls else None,
        reasoning_content=reasoning if isinstance(reasoning, str) else None,
        reasoning_details=copy.deepcopy(details) if _present(details) else None,
    )
    finish = choice.get("finish_reason")
    return ModelResponse(
        message=Message(role="assistant", content=parts, tool_calls=calls),
        provider_replay=replay,
        usage=_USAGE.read(completion.get("usage")),
        stop_reason=finish if isinstance(finish, str) else None,
    )


def _obj(value: Any) -> JsonObj:
    return value if isinstance(value, dict) else {}


def _present(value: Any) -> bool:
    """Whether a provider field carries something: not null, and not an empty list or object."""
    return value is not None and value != [] and value != {}


# ─── Streaming ───────────────────────────────────────────────────────────────────────────────────


class _StreamedCompletion:
    """Rebuilds the unstreamed response object from Chat Completions chunks (first choice only)."""

    def __init__(self, on_token: TokenCallback | None) -> None:
        self._on_token = on_token
        self._envelope: JsonObj = {}
        self._texts: dict[str, str] = {}
        self._role = "assistant"
        self._annotations: list[Any] = []
        self._details: list[JsonObj] = []
        self._calls: dict[int, JsonObj] = {}
        self._finish: Any = None
        self._usage: Any = None

    def feed(self, chunk: Any) -> None:
        """Apply one chunk (decoded JSON)."""
        if not isinstance(chunk, dict):
            return
        for key in ("id", "created", "model", "system_fingerprint", "service_tier"):
            if key in chunk:
                self._envelope[key] = chunk[key]
        if chunk.get("usage") is not None:
            self._usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                self._choice(choice)

    def _choice(self, choice: JsonObj) -> None:
        if choice.get("finish_reason") is not None:
            self._finish = choice["finish_reason"]
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            return
        if isinstance(delta.get("role"), str):
            self._role = delta["role"]
        for key in ("content", "refusal", "reasoning_content", "reasoning"):
            if isinstance(delta.get(key), str):
                self._texts[key] = self._texts.get(key, "") + delta[key]
        if self._on_token is not None and isinstance(delta.get("content"), str) and delta["content"]:
            self._on_token(delta["content"])
        if isinstance(delta.get("annotations"), list):
            self._annotations.extend(delta["annotations"])
        for fragment in delta.get("reasoning_details") or []:
            if isinstance(fragment, dict):
                self._detail_delta(fragment)
        for call in delta.get("tool_calls") or []:
            if isinstance(call, dict):
                self._call_delta(call)

    def _detail_delta(self, fragment: JsonObj) -> None:
        """Merge one ``reasoning_details`` fragment into the detail of the same ``(type, index)``."""
        key = (fragment.get("type"), fragment.get("index"))
        detail = next((d for d in self._details if (d.get("type"), d.get("index")) == key), None)
        if detail is None:
            self._details.append(copy.deepcopy(fragment))
            return
        for name, value in fragment.items():
            if name in _DETAIL_TEXT and isinstance(value, str) and isinstance(detail.get(name, ""), str):
                detail[name] = detail.get(name, "") + value
            elif detail.get(name) is None:
                detail[name] = copy.deepcopy(value)

    def _call_delta(self, delta: JsonObj) -> None:
        call = self._calls.setdefault(
            int(delta.get("index", len(self._calls))), {"function": {"arguments": ""}}
        )
        for key in ("id", "type"):
            if isinstance(delta.get(key), str):
                call[key] = delta[key]
        function = delta.get("function")
        if isinstance(function, dict):
            if isinstance(function.get("name"), str):
                call["function"]["name"] = function["name"]
            if isinstance(function.get("arguments"), str):
                call["function"]["arguments"] += function["arguments"]

    def result(self) -> JsonObj:
        """The assembled response object (one choice)."""
        message: JsonObj = {
            "role": self._role,
            "content": self._texts.get("content") or None,
            "refusal": self._texts.get("refusal") or None,
            "annotations": self._annotations,
        }
        for key in ("reasoning_content", "reasoning"):
            if key in self._texts:
                message[key] = self._texts[key]
        if self._details:
            message["reasoning_details"] = self._details
        if self._calls:
            message["tool_calls"] = [_ordered_call(self._calls[index]) for index in sorted(self._calls)]
        choice = {"index": 0, "message": message, "finish_reason": self._finish}
        return {**self._envelope, "object": "chat.completion", "choices": [choice], "usage": self._usage}


_DETAIL_TEXT = frozenset({"text", "summary", "data", "signature"})
"""``reasoning_details`` keys whose string fragments are concatenated across stream chunks."""


def _ordered_call(call: JsonObj) -> JsonObj:
    return {"id": call.get("id", ""), "type": call.get("type", "function"), "function": call["function"]}
