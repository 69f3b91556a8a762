"""A scripted model provider: a fake behind the provider seam, for tests, demos and benchmarks.

``ScriptedProvider(script=[...])`` answers each :meth:`~ScriptedProvider.complete` with a script item: a
:class:`~flightlog.providers.base.ModelResponse` (returned), an exception such as
:class:`~flightlog.providers.base.ProviderError` (raised), or a callable ``request -> ModelResponse``
(sync or async; called). By default the item is chosen by the request's turn (the number of assistant
messages in its history), so a fresh process resuming a session gets the same answer for the same turn and
a resumed run never asks again for a tool call it already made (restart-safe, as a real model answering the
recorded history is). ``by_turn=False`` plays the items in call order instead, counting every call of this
instance: what a script needs whose answers do not follow the history (a retried or failed-over call
answered differently the second time, a summarizer sharing the instance, a history compacted or renewed);
such a script restarts from its first item in a new process.

:func:`reply` and :func:`calls` build responses whose ``provider_replay`` carries the neutral message as
the native payload (protocol ``scripted``), so resume can seed it back like a real adapter's.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from ..events import ProviderReplay
from ..messages import Message, TextPart, ToolCall, ToolResultPart
from ..providers.base import Capabilities, ModelRequest, ModelResponse, ProviderError, TokenCallback, Usage
from .requests import program_of

__all__ = ["ScriptItem", "ScriptedProvider", "StepProvider", "SummaryProvider", "call", "calls", "reply"]

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
        by_turn: Pick the item by the number of assistant messages in the request (default: restart-safe);
            False: by call count in this instance (the script restarts in a new process).
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
        by_turn: bool = True,
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
        """Script items after the furthest one asked for so far (the next by call count, or the one for the
        highest turn asked), in this instance: how much of the script has not been reached."""
        return max(0, len(self._script) - self._next)

    def _pick(self, request: ModelRequest) -> ScriptItem:
        index = sum(1 for m in request.messages if m.role == "assistant") if self._by_turn else self._next
        self._next = max(self._next, index + 1)
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


# ─── long runs: a provider that works through numbered steps, and a summarizer ───────────────────

_DONE = re.compile(r"step (\d+) done")


def _steps_done(request: ModelRequest) -> int:
    """The highest ``step N done`` in the request's texts and tool results (0 when none)."""
    found = 0
    for message in request.messages:
        texts = [message.text_content()]
        texts += [p.output for p in message.content if isinstance(p, ToolResultPart)]
        for text in texts:
            for match in _DONE.finditer(text):
                found = max(found, int(match.group(1)))
    return found


def _request_tokens(request: ModelRequest, protocol: str, model: str) -> int:
    """The request's size as a tokenizer of 4 characters a token would count it."""
    return -(-program_of(protocol, model, request).request_chars // 4)


class StepProvider:
    """A model that calls ``tool(step=N)`` for N = 1..``steps`` (the next after the highest ``step N done``
    it can see in its request), then answers ``all N steps done``.

    It decides from the request alone, so it continues correctly after a crash, a compaction (the summary
    must say ``step N done``) or a context renewal (so must the handoff). Usage: ``input_tokens`` is the
    request's canonical JSON size / 4, ``output_tokens`` 20. With ``window`` it answers a request above
    ``window - max_tokens`` tokens as Anthropic does: HTTP 400 ``invalid_request_error`` "prompt is too
    long" (a :class:`ProviderError` with ``context_overflow``).

    Args:
        steps: Number of steps.
        tool: The tool it calls.
        window: Context window in tokens it enforces (None: none).
        model: Model id.
        narrate_every: Every this many steps (0: never) its text carries ``narration_chars`` more
            characters of narration (long assistant texts, what upstream's snip tier cuts).
        narration_chars: Size of that narration, in characters.

    Attributes:
        calls: Requests answered, in order (for assertions); ``peak_tokens`` the largest request seen.
    """

    protocol = "scripted"

    def __init__(
        self,
        steps: int,
        *,
        tool: str = "work",
        window: int | None = None,
        model: str = "step-model",
        narrate_every: int = 0,
        narration_chars: int = 0,
    ) -> None:
        self.steps = steps
        self.narrate_every = narrate_every
        self.narration_chars = narration_chars
        self.tool = tool
        self.window = window
        self.model = model
        self.calls = 0
        self.peak_tokens = 0
        self.overflows = 0

    def capabilities(self) -> Capabilities:
        """Nothing declared."""
        return Capabilities()

    async def complete(
        self, request: ModelRequest, *, on_token: TokenCallback | None = None
    ) -> ModelResponse:
        """Answer the next step (see the class docs).

        Raises:
            ProviderError: the request does not fit ``window`` (``context_overflow``).
        """
        tokens = _request_tokens(request, self.protocol, self.model)
        if self.window is not None and tokens > self.window - request.max_tokens:
            self.overflows += 1
            raise ProviderError(
                f"{self.model}: HTTP 400: prompt is too long: {tokens} tokens > "
                f"{self.window - request.max_tokens} maximum",
                retryable=False,
                status=400,
                context_overflow=True,
            )
        self.calls += 1
        self.peak_tokens = max(self.peak_tokens, tokens)
        usage = Usage(input_tokens=tokens, output_tokens=20)
        done = _steps_done(request)
        if done >= self.steps:
            return reply(f"all {self.steps} steps done", usage=usage, model=self.model)
        step = done + 1
        text = f"working on step {step}"
        if self.narrate_every and step % self.narrate_every == 0:
            text += ": " + ("considering the options " * self.narration_chars)[: self.narration_chars]
        return calls(
            call(self.tool, {"step": step}, id=f"step-{step}"),
            text=text,
            usage=usage,
            model=self.model,
        )


class SummaryProvider:
    """A summarizer for :class:`StepProvider` runs: a six-slot summary naming the last ``step N done`` it
    was shown (deterministic; usage = request size / 4 in, summary size / 4 out)."""

    protocol = "scripted"
    """Wire protocol identity (``ProviderReplay.protocol``)."""

    def __init__(self, *, model: str = "summary-model") -> None:
        self.model = model
        self.calls = 0

    def capabilities(self) -> Capabilities:
        """Nothing declared."""
        return Capabilities()

    async def complete(
        self, request: ModelRequest, *, on_token: TokenCallback | None = None
    ) -> ModelResponse:
        """Summarize (see the class docs)."""
        self.calls += 1
        done = _steps_done(request)
        text = "\n".join(
            [
                "constraints:\n- none",
                f"decisions:\n- worked through the steps in order; step {done} done",
                "artifacts:\n- none",
                "open_questions:\n- none",
                "failures:\n- none",
                f"next_actions:\n- continue with step {done + 1}",
            ]
        )
        tokens = _request_tokens(request, self.protocol, self.model)
        return reply(
            text, usage=Usage(input_tokens=tokens, output_tokens=-(-len(text) // 4)), model=self.model
        )
