"""OpenAI Responses API adapter (protocol ``openai.responses``) over the official ``openai`` SDK.

Rendering (neutral → request body):

* ``system_prompt`` → ``instructions``; transcript ``system`` messages → ``{"role": "developer"}`` items.
* ``user`` → ``{"role": "user", "content": <text>}`` (one text part) or ``input_text`` / ``input_image``
  parts; ``tool`` messages (and any ``tool_result`` part) → ``function_call_output`` items.
* ``assistant`` (no usable seed) → one item per part, in order: thinking as assistant text
  ``"<think>\\n...\\n</think>"`` (reasoning cannot be replayed without its encrypted item, so the model
  sees it as text), text as ``{"role": "assistant", "content": <text>}``, calls as ``function_call`` items
  (``call_id``, ``name``, raw ``arguments``); redacted thinking is dropped (no item id to send it with).
* **Native seed:** when ``request.native_seed`` pairs an assistant message with an ``openai.responses``
  payload whose items still parse to that message, the recorded output items are sent verbatim instead:
  ``reasoning`` items (``id``, ``encrypted_content``, summaries) immediately followed by the items they
  produced (``message``, ``function_call``...). A reasoning item must travel with the item after it: the API
  answers 400 ``"Item 'rs_...' of type 'reasoning' was provided without its required following item"``
  (cassette ``error-400-reasoning-replay-without-following-item``), so a trailing reasoning item with
  nothing after it is left out.
* **Chaining** (``chain_responses=True``): when the input rendered for this call starts with exactly the
  input plus output items of this adapter's previous call, only the new items are sent, with
  ``previous_response_id`` and ``store: true`` (so the chain can go on from this response too). Any
  rollback or edit breaks the prefix and the full input is sent again.
* Tools → ``{"type": "function", "name", "description"?, "parameters", "strict"}`` (``strict`` as for Chat
  Completions); ``max_output_tokens`` from the request; then ``request_options`` merged on top (e.g.
  ``reasoning``, ``include: ["reasoning.encrypted_content"]``, ``tool_choice``; None removes a key).

Parsing: ``output`` items → ``reasoning``: one :class:`ThinkingPart` per summary (then raw content) text,
else a :class:`RedactedThinkingPart` holding ``encrypted_content`` (as the Codex importer maps them);
``message``: a :class:`TextPart` per ``output_text`` (or ``refusal``); ``function_call``: a
:class:`ToolCall` (``call_id``, ``name``, ``arguments`` verbatim). ``ProviderReplay.native_blocks`` is
``output`` verbatim; usage maps ``input_tokens``/``output_tokens`` and ``input_tokens_details.cached_tokens``;
``stop_reason`` is ``status`` (or ``incomplete_details.reason``).

Streaming uses the SDK's event stream: ``response.output_text.delta`` text goes to ``on_token``; items are
assembled from ``output_item.added`` plus text, refusal, reasoning-summary and
``function_call_arguments.delta`` deltas, and replaced by the complete ``output_item.done`` item when it
arrives, so the result equals the unstreamed call's. The stream's ``error`` event (sent with HTTP 200,
e.g. ``context_length_exceeded`` after ``response.created``) fails the response as ``response.failed``
does: :class:`ProviderError`, a context overflow for ``context_length_exceeded``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Unpack

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
from ._adapter import SdkAdapter, SdkOptions, StreamBuilder
from ._sdk import (
    OVERFLOW_CODES,
    JsonObj,
    UsageFields,
    align_seed,
    merge_options,
    neutral_calls,
    same_turn,
    strict_compatible,
)
from .base import Capabilities, ModelRequest, ModelResponse, ProviderError, TokenCallback, ToolSpec

__all__ = [
    "DEFAULT_CAPABILITIES",
    "PROTOCOL",
    "OpenAIResponsesProvider",
    "parse_items",
    "render_input",
    "response_from_response",
    "seed_items",
]

PROTOCOL = "openai.responses"
"""``ProviderReplay.protocol`` of this adapter's responses."""
DEFAULT_CAPABILITIES = Capabilities(
    strict_schema=True,
    parallel_tool_calls=True,
    streaming_tool_calls=True,
    prompt_caching=True,
    structured_output=True,
)
"""Declared defaults: as Chat Completions (strict schemas, parallel and streamed calls, automatic prompt
caching, structured output)."""

_RETRYABLE_FAILURES = frozenset({"server_error", "rate_limit_exceeded"})
_USAGE = UsageFields(
    input=("input_tokens",), output=("output_tokens",), cache_read=("input_tokens_details", "cached_tokens")
)


class OpenAIResponsesProvider(SdkAdapter):
    """A ``ModelProvider`` for one model through ``openai.AsyncOpenAI().responses``.

    Constructor: see :class:`~flightlog.providers._adapter.SdkAdapter` (``model``, ``api_key``, ``base_url``
    including ``/v1``, ``max_retries``, ``client``, ``capabilities``, ``request_options``, e.g.
    ``{"reasoning": {"effort": "low"}, "include": ["reasoning.encrypted_content"]}``), plus
    ``chain_responses``. Not safe for concurrent conversations when chaining (it remembers its last call).

    Attributes: as :class:`~flightlog.providers._adapter.SdkAdapter`'s; ``protocol`` is ``openai.responses``.
    """

    protocol = PROTOCOL
    default_capabilities = DEFAULT_CAPABILITIES
    sdk_name = "openai"
    client_class = "AsyncOpenAI"
    endpoint = "responses"

    def __init__(self, model: str, *, chain_responses: bool = False, **options: Unpack[SdkOptions]) -> None:
        """Build the adapter (and the SDK client unless ``options`` give one).

        Args:
            model: Model id, e.g. ``gpt-5``.
            chain_responses: Send only new items with ``previous_response_id`` when the conversation
                extends this adapter's previous call (server-side state; needs ``store`` left on).
            **options: As for :class:`~flightlog.providers._adapter.SdkAdapter` (``api_key``, default the
                SDK's ``OPENAI_API_KEY`` lookup; ``base_url`` including ``/v1``; ``max_retries``; ``client``,
                a ready ``AsyncOpenAI``; ``capabilities``, default :data:`DEFAULT_CAPABILITIES`;
                ``request_options``).

        Raises:
            ImportError: The ``openai`` SDK is missing (``pip install 'flightlog[providers]'``).
            ProviderError: The SDK refused to build a client (e.g. no API key anywhere).
        """
        super().__init__(model, **options)
        self._chain = chain_responses
        self._previous: tuple[str, list[JsonObj]] | None = None

    def request_body(self, request: ModelRequest) -> JsonObj:
        """The JSON body :meth:`complete` sends for ``request`` (rendering rules: module docstring)."""
        return self._body(request, self._full_input(request))

    async def complete(
        self, request: ModelRequest, *, on_token: TokenCallback | None = None
    ) -> ModelResponse:
        """Call the Responses API.

        Args:
            request: The model call.
            on_token: Receives streamed output-text deltas when the request streams.

        Returns:
            The neutral message, ``ProviderReplay`` (output items), usage and status.

        Raises:
            ProviderError: The SDK call failed (HTTP status, timeout, connection, malformed response), or the
                response ended ``failed``.
        """
        full_input = self._full_input(request)
        payload = await self.send(self._body(request, full_input), on_token)
        result = self.parse(payload)
        self._remember(payload, full_input, result.provider_replay)
        return result

    def parse(self, payload: JsonObj) -> ModelResponse:
        """A Responses API response object → :class:`ModelResponse` (see :func:`response_from_response`).

        Raises:
            ProviderError: The response ended ``failed`` (retryable for server errors and rate limits).
        """
        _raise_if_failed(payload, f"{PROTOCOL} {self.model}")
        return response_from_response(payload)

    def _full_input(self, request: ModelRequest) -> list[JsonObj]:
        seeds = align_seed(request.messages, request.native_seed, PROTOCOL)
        return render_input(request.messages, seeds)

    def _body(self, request: ModelRequest, full_input: list[JsonObj]) -> JsonObj:
        body: JsonObj = {"model": self.model}
        if request.system_prompt:
            body["instructions"] = request.system_prompt
        body["input"] = full_input
        previous = self._previous if self._chain else None
        if previous is not None and _extends(full_input, previous[1]):
            body["previous_response_id"] = previous[0]
            body["store"] = True
            body["input"] = full_input[len(previous[1]) :]
        if request.tools:
            strict = self._capabilities.strict_schema
            body["tools"] = [_tool(spec, strict) for spec in request.tools]
        body["max_output_tokens"] = request.max_tokens
        if request.stream:
            body["stream"] = True
        return merge_options(body, self.request_options)

    def _remember(self, payload: JsonObj, full_input: list[JsonObj], replay: ProviderReplay | None) -> None:
        response_id = payload.get("id")
        if self._chain and isinstance(response_id, str) and replay is not None:
            self._previous = (response_id, full_input + seed_items(replay.native_blocks or []))

    def _stream_builder(self, on_token: TokenCallback | None) -> StreamBuilder:
        return _StreamedResponse(on_token)


def _obj(value: Any) -> JsonObj:
    return value if isinstance(value, dict) else {}


def _extends(full_input: Sequence[JsonObj], previous: Sequence[JsonObj]) -> bool:
    return len(full_input) > len(previous) and list(full_input[: len(previous)]) == list(previous)


def _raise_if_failed(response: JsonObj, where: str) -> None:
    """Raise for a response that ended ``failed`` (``context_length_exceeded``: a context overflow)."""
    if response.get("status") != "failed":
        return
    error = _obj(response.get("error"))
    code = str(error.get("code") or "")
    message = str(error.get("message") or "response failed")
    raise ProviderError(
        f"{where}: {code or 'failed'}: {message}",
        retryable=code in _RETRYABLE_FAILURES,
        context_overflow=code in OVERFLOW_CODES,
    )


# ─── Rendering ───────────────────────────────────────────────────────────────────────────────────


def render_input(messages: Sequence[Message], seeds: Sequence[ProviderReplay | None]) -> list[JsonObj]:
    """Neutral messages (with their aligned native payloads) → Responses API ``input`` items.

    Args:
        messages: The neutral transcript.
        seeds: One entry per message (:func:`~flightlog.providers._sdk.align_seed`).

    Returns:
        The input items, in order.
    """
    items: list[JsonObj] = []
    for message, seed in zip(messages, seeds, strict=True):
        if message.role == "assistant":
            native = _seeded_items(message, seed)
            items.extend(native if native is not None else _assistant_items(message))
        elif message.role == "system":
            items.append({"role": "developer", "content": message.text_content()})
        else:
            items.extend(_user_items(message))
    return items


def seed_items(blocks: Sequence[Any]) -> list[JsonObj]:
    """Recorded output items as they are sent back: verbatim, minus reasoning items nothing follows.

    Args:
        blocks: ``ProviderReplay.native_blocks`` of an ``openai.responses`` payload.

    Returns:
        Deep copies of the items to send.
    """
    items = [copy.deepcopy(block) for block in blocks if isinstance(block, dict)]
    while items and items[-1].get("type") == "reasoning":
        items.pop()
    return items


def _seeded_items(message: Message, seed: ProviderReplay | None) -> list[JsonObj] | None:
    if seed is None or not seed.native_blocks:
        return None
    parts, calls = parse_items(seed.native_blocks)
    return seed_items(seed.native_blocks) if same_turn(message, parts, calls) else None


def _assistant_items(message: Message) -> list[JsonObj]:
    items: list[JsonObj] = []
    for part in message.content:
        if isinstance(part, ThinkingPart):
            items.append({"role": "assistant", "content": f"<think>\n{part.thinking}\n</think>"})
        elif isinstance(part, TextPart) and part.text:
            items.append({"role": "assistant", "content": part.text})
    for call in neutral_calls(message):
        items.append(
            {"type": "function_call", "call_id": call.id, "name": call.name, "arguments": call.arguments}
        )
    return items


def _user_items(message: Message) -> list[JsonObj]:
    results = [part for part in message.content if isinstance(part, ToolResultPart)]
    items: list[JsonObj] = [
        {"type": "function_call_output", "call_id": result.call_id, "output": result.output}
        for result in results
    ]
    parts = [part for part in message.content if isinstance(part, TextPart | ImagePart)]
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        items.append({"role": "user", "content": parts[0].text})
    elif parts:
        items.append({"role": "user", "content": [_input_part(part) for part in parts]})
    return items


def _input_part(part: TextPart | ImagePart) -> JsonObj:
    if isinstance(part, TextPart):
        return {"type": "input_text", "text": part.text}
    return {"type": "input_image", "image_url": part.ref}


def _tool(spec: ToolSpec, strict_route: bool) -> JsonObj:
    tool: JsonObj = {"type": "function", "name": spec.name, "parameters": spec.parameters}
    if spec.description:
        tool["description"] = spec.description
    tool["strict"] = strict_route and strict_compatible(spec.parameters)
    return tool


# ─── Parsing ─────────────────────────────────────────────────────────────────────────────────────


def parse_items(items: Sequence[Any]) -> tuple[list[ContentPart], list[ToolCall]]:
    """Responses API output items (decoded JSON) → neutral parts and tool calls.

    Args:
        items: ``output`` of a response (or a seeded copy of it).

    Returns:
        ``(parts, calls)`` (mapping: module docstring); item kinds without a neutral form are skipped.
    """
    parts: list[ContentPart] = []
    calls: list[ToolCall] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "reasoning":
            parts.extend(_reasoning_parts(item))
        elif kind == "message" or (kind is None and item.get("role") == "assistant"):
            parts.extend(_message_parts(item.get("content")))
        elif kind == "function_call":
            arguments = item.get("arguments")
            calls.append(
                ToolCall(
                    id=str(item.get("call_id", "")),
                    name=str(item.get("name", "")),
                    arguments=arguments if isinstance(arguments, str) else "",
                )
            )
    return parts, calls


def _reasoning_parts(item: JsonObj) -> list[ContentPart]:
    texts = _texts(item.get("summary")) + _texts(item.get("content"))
    if texts:
        return [ThinkingPart(thinking=text) for text in texts]
    encrypted = item.get("encrypted_content")
    return [RedactedThinkingPart(data=encrypted)] if isinstance(encrypted, str) else []


def _texts(values: Any) -> list[str]:
    if not isinstance(values, list):
        return []
    return [
        value["text"] for value in values if isinstance(value, dict) and isinstance(value.get("text"), str)
    ]


def _message_parts(content: Any) -> list[ContentPart]:
    if isinstance(content, str):
        return [TextPart(text=content)]
    parts: list[ContentPart] = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict):
            continue
        if part.get("type") in ("output_text", "input_text", "text") and isinstance(part.get("text"), str):
            parts.append(TextPart(text=part["text"]))
        elif part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
            parts.append(TextPart(text=part["refusal"]))
    return parts


def response_from_response(response: Mapping[str, Any]) -> ModelResponse:
    """A Responses API response object (decoded JSON) → :class:`ModelResponse`.

    Args:
        response: The response body (``{"id", "output": [...], "model", "usage", "status", ...}``).

    Returns:
        The neutral message, its ``ProviderReplay`` (``native_blocks`` = ``output`` verbatim), usage and the
        stop reason (``status``, or the incomplete reason).
    """
    output = response.get("output")
    items = output if isinstance(output, list) else []
    parts, calls = parse_items(items)
    model = response.get("model")
    replay = ProviderReplay(
        protocol=PROTOCOL,
        provider="openai",
        model=model if isinstance(model, str) else None,
        native_blocks=list(items),
    )
    return ModelResponse(
        message=Message(role="assistant", content=parts, tool_calls=calls),
        provider_replay=replay,
        usage=_USAGE.read(response.get("usage")),
        stop_reason=_stop_reason(response),
    )


def _stop_reason(response: Mapping[str, Any]) -> str | None:
    details = response.get("incomplete_details")
    if isinstance(details, dict) and isinstance(details.get("reason"), str):
        return str(details["reason"])
    status = response.get("status")
    return status if isinstance(status, str) else None


# ─── Streaming ───────────────────────────────────────────────────────────────────────────────────


class _StreamedResponse:
    """Rebuilds the unstreamed response object from Responses API stream events."""

    def __init__(self, on_token: TokenCallback | None) -> None:
        self._on_token = on_token
        self._response: JsonObj = {}
        self._items: dict[int, JsonObj] = {}
        self._done: set[int] = set()

    def feed(self, event: Any) -> None:
        """Apply one event (decoded JSON); unknown event types are ignored."""
        if not isinstance(event, dict):
            return
        kind = str(event.get("type", ""))
        if isinstance(event.get("response"), dict):
            self._response = dict(event["response"])
        if kind == "error":  # the stream's error event (HTTP 200): the response failed with it
            self._response = {**self._response, "status": "failed", "error": _obj(event.get("error"))}
            return
        index = event.get("output_index")
        if not isinstance(index, int):
            return
        if kind == "response.output_item.added" and isinstance(event.get("item"), dict):
            self._items[index] = copy.deepcopy(event["item"])
        elif kind == "response.output_item.done" and isinstance(event.get("item"), dict):
            self._items[index] = event["item"]
            self._done.add(index)
        elif index not in self._done:
            self._delta(kind, self._items.setdefault(index, {}), event)

    def _delta(self, kind: str, item: JsonObj, event: JsonObj) -> None:
        delta = event.get("delta")
        if kind == "response.content_part.added" and isinstance(event.get("part"), dict):
            _slot(item, "content", event.get("content_index"), dict(event["part"]))
        elif kind == "response.reasoning_summary_part.added" and isinstance(event.get("part"), dict):
            _slot(item, "summary", event.get("summary_index"), dict(event["part"]))
        elif not isinstance(delta, str):
            return
        elif kind == "response.output_text.delta":
            _append(item, "content", event.get("content_index"), "text", delta)
            if self._on_token is not None and delta:
                self._on_token(delta)
        elif kind == "response.refusal.delta":
            _append(item, "content", event.get("content_index"), "refusal", delta)
        elif kind == "response.reasoning_summary_text.delta":
            _append(item, "summary", event.get("summary_index"), "text", delta)
        elif kind == "response.function_call_arguments.delta":
            item["arguments"] = str(item.get("arguments", "")) + delta

    def result(self) -> JsonObj:
        """The assembled response object (``output`` in output-index order)."""
        response = dict(self._response)
        response["output"] = [self._items[index] for index in sorted(self._items)]
        return response


def _slot(item: JsonObj, key: str, index: Any, value: JsonObj) -> None:
    values = item.setdefault(key, [])
    position = index if isinstance(index, int) else len(values)
    while len(values) <= position:
        values.append({})
    values[position] = value


def _append(item: JsonObj, key: str, index: Any, field: str, text: str) -> None:
    values = item.setdefault(key, [])
    position = index if isinstance(index, int) else max(len(values) - 1, 0)
    while len(values) <= position:
        values.append({})
    values[position][field] = str(values[position].get(field, "")) + text
