"""A scripted model provider: a fake behind the provider seam, for tests, demos and benchmarks.

``ScriptedProvider(script=[...])`` answers each :meth:`~ScriptedProvider.complete` with the next script
item: a :class:`~flightlog.providers.base.ModelResponse` (returned), an exception such as
:class:`~flightlog.providers.base.ProviderError` (raised), or a callable ``request -> ModelResponse``
(sync or async; called). With ``by_turn=True`` the item is chosen by the number of assistant messages
in the request's history instead of by call count, so a fresh process resuming a session gets the same
answer for the same turn (what crash tests need).

:func:`reply` and :func:`calls` build responses whose ``provider_replay`` carries the neutral message as
the native payload (protocol ``scripted``), so resume can seed it back like a real adapter's.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from ..events import ProviderReplay
from ..messages import Message, TextPart, ToolCall
from ..providers.base import Capabilities, ModelRequest, ModelResponse, ProviderError, TokenCallback, Usage

__all__ = ["ScriptItem", "ScriptedProvider", "call", "calls", "reply"]

ScriptItem = (
    ModelResponse | BaseException | Callable[[ModelRequest], ModelResponse | Awaitable[ModelResponse]]
)
"""One scripted answer: a response, an exception to raise, or a function of the request."""

DEFAULT_USAGE = Usage(input_tokens=10, output_tokens=5)


def _replay(message: Message, protocol: str, model: str | None) -> ProviderReplay:
    return ProviderReplay(
        protocol=protocol, provider="scripted", model=model, native_message=message.to_wire()
    )


def reply(
    text: str, *, usage: Usage | None = None, protocol: str = "scripted", model: str | None = None
) -> ModelResponse:
    """A final assistant answer (no tool calls): the model stops."""
    message = Message.text("assistant", text)
    return ModelResponse(
        message=message,
        provider_replay=_replay(message, protocol, model),
        usage=usage or DEFAULT_USAGE,
        stop_reason="end_turn",
    )


def call(name: str, arguments: Mapping[str, Any] | str = "", *, id: str) -> ToolCall:
    """A tool call; dict arguments are JSON-encoded, strings are passed verbatim (malformed on purpose)."""
    text = arguments if isinstance(arguments, str) else json.dumps(dict(arguments), sort_keys=True)
    return ToolCall(id=id, name=name, arguments=text)


def calls(
    *tool_calls: ToolCall,
    text: str = "",
    usage: Usage | None = None,
    protocol: str = "scripted",
    model: str | None = None,
) -> ModelResponse:
    """An assistant message requesting ``tool_calls`` (with optional text)."""
    content = [TextPart(text=text)] if text else []
    message = Message(role="assistant", content=list(content), tool_calls=list(tool_calls))
    return ModelResponse(
        message=message,
        provider_replay=_replay(message, protocol, model),
        usage=usage or DEFAULT_USAGE,
        stop_reason="tool_use",
    )


class ScriptedProvider:
    """A :class:`~flightlog.providers.base.ModelProvider` that plays a script.

    Args:
        script: The answers, in order (see :data:`ScriptItem`).
        model: Model id it reports.
        protocol: Wire protocol identity (``scripted``).
        capabilities: What it declares (default: nothing, so every degradation is recorded).
        latency_s: Simulated latency per call, in seconds (0: none).
        by_turn: Pick the item by the number of assistant messages in the request (restart-safe).
        stream_chunk_chars: Size of the text chunks sent to ``on_token`` when the request streams.

    Attributes:
        requests: Every request received, in order (for assertions).
    """

    def __init__(
        self,
        script: Iterable[ScriptItem] = (),
        *,
        model: str = "scripted-model",
        protocol: str = "scripted",
        capabilities: Capabilities | None = None,
        latency_s: float = 0.0,
        by_turn: bool = False,
        stream_chunk_chars: int = 4,
    ) -> None:
        self.protocol = protocol
        self.model = model
        self._capabilities = capabilities or Capabilities()
        self._script: list[ScriptItem] = list(script)
        self._next = 0
        self._latency = latency_s
        self._by_turn = by_turn
        self._chunk = max(1, stream_chunk_chars)
        self.requests: list[ModelRequest] = []

    def capabilities(self) -> Capabilities:
        """The declared capabilities."""
        return self._capabilities

    @property
    def remaining(self) -> int:
        """Script items not played yet (call-count mode)."""
        return len(self._script) - self._next

    def _pick(self, request: ModelRequest) -> ScriptItem:
        index = sum(1 for m in request.messages if m.role == "assistant") if self._by_turn else self._next
        if not self._by_turn:
            self._next += 1
        if index >= len(self._script):
            raise ProviderError(f"script exhausted at item {index}", retryable=False)
        return self._script[index]

    async def complete(
        self, request: ModelRequest, *, on_token: TokenCallback | None = None
    ) -> ModelResponse:
        """Play the next script item (see the class docs).

        Raises:
            ProviderError: the script item is one, or the script is exhausted (not retryable).
            BaseException: any other exception the script holds.
        """
        self.requests.append(request)
        item = self._pick(request)
        if self._latency:
            await asyncio.sleep(self._latency)
        if isinstance(item, BaseException):
            raise item
        response = item if isinstance(item, ModelResponse) else await _call(item, request)
        if on_token is not None and request.stream:
            _stream(response.message, on_token, self._chunk)
        return response


async def _call(
    item: Callable[[ModelRequest], ModelResponse | Awaitable[ModelResponse]], request: ModelRequest
) -> ModelResponse:
    result = item(request)
    if inspect.isawaitable(result):
        return await result
    return result


def _stream(message: Message, on_token: TokenCallback, size: int) -> None:
    text = message.text_content()
    for start in range(0, len(text), size):
        on_token(text[start : start + size])
