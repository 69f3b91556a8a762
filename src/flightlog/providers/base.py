"""The model-provider seam: what the kernel sends a model and what it gets back.

Every adapter (OpenAI Chat Completions, OpenAI Responses, Anthropic Messages, the scripted fake) implements
:class:`ModelProvider`. Requests carry the provider-neutral transcript plus, when the protocol matches, the
recorded provider-native payloads to seed back byte-exact (thinking signatures, encrypted reasoning).
Responses carry the neutral assistant :class:`~flightlog.messages.Message` and the native payload for
``llm_completed.provider_replay``.

Source: seed 000 (``ProviderReplay``), seed 003 (``transport.capabilities(model)`` and the degradations
recorded as ``provider_capability_evidence``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..events import ProviderReplay
from ..messages import Message

__all__ = [
    "Capabilities",
    "ModelProvider",
    "ModelRequest",
    "ModelResponse",
    "ProviderError",
    "TokenCallback",
    "ToolSpec",
    "Usage",
]


@dataclass(frozen=True)
class Capabilities:
    """What a route position declares it supports (seed 003 ``transport.capabilities``)."""

    strict_schema: bool = False
    parallel_tool_calls: bool = False
    streaming_tool_calls: bool = False
    prompt_caching: bool = False
    structured_output: bool = False

    def degradations(self) -> list[str]:
        """The seed's degradation strings for every capability this route lacks, in seed order."""
        pairs = [
            (self.strict_schema, "strict_schema:local_validation"),
            (self.parallel_tool_calls, "parallel_tool_calls:sequential_execution"),
            (self.streaming_tool_calls, "streaming_tool_calls:turn_granular_progress"),
            (self.prompt_caching, "prompt_caching:cache_cold_accounting"),
            (self.structured_output, "structured_output:local_parse_and_validation"),
        ]
        return [text for supported, text in pairs if not supported]


@dataclass(frozen=True)
class ToolSpec:
    """A tool as the model sees it: name, description and JSON Schema of its arguments (a dict)."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class Usage:
    """Token accounting of one model call (tokens; cache fields when the provider reports them)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None

    @property
    def total_tokens(self) -> int:
        """input + output tokens."""
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class ModelRequest:
    """One model call.

    Attributes:
        system_prompt: The system prompt, or None.
        messages: The neutral transcript (as :func:`flightlog.replay.reconstruct` produces it).
        tools: Tools the model may call.
        native_seed: Recorded native payloads of earlier assistant turns, in order, when their protocol
            equals this provider's (seeded back byte-exact); None means render from ``messages`` alone.
        max_tokens: Output cap, in tokens.
        stream: Ask for a streamed response (tokens go to the callback; the final message is returned).
    """

    system_prompt: str | None
    messages: Sequence[Message]
    tools: Sequence[ToolSpec] = ()
    native_seed: Sequence[ProviderReplay] | None = None
    max_tokens: int = 4096
    stream: bool = False


@dataclass(frozen=True)
class ModelResponse:
    """What a model call returned: the neutral message, its native payload, usage and stop reason."""

    message: Message
    provider_replay: ProviderReplay | None
    usage: Usage = field(default_factory=Usage)
    stop_reason: str | None = None


class ProviderError(Exception):
    """A model call failed.

    Attributes:
        retryable: True for transient failures (429, 5xx, timeouts, connection errors).
        retry_after_s: The provider's retry hint in seconds, when it sent one.
        status: HTTP status, when there was one.
        context_overflow: True when the provider refused the request for not fitting the model's
            context window ("prompt is too long", ``context_length_exceeded``): the kernel compacts the
            history and retries once instead of failing the run.
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        retry_after_s: float | None = None,
        status: int | None = None,
        context_overflow: bool = False,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after_s = retry_after_s
        self.status = status
        self.context_overflow = context_overflow


TokenCallback = Callable[[str], None]
"""Receives streamed text deltas (live only; never recorded)."""


@runtime_checkable
class ModelProvider(Protocol):
    """A model route position: one protocol, one model."""

    protocol: str
    """Wire protocol identity written to ``ProviderReplay.protocol``: ``openai.chat``, ``openai.responses``,
    ``anthropic.messages``, or ``scripted``."""
    model: str

    def capabilities(self) -> Capabilities:
        """Declared capabilities of this route position."""
        ...

    async def complete(
        self, request: ModelRequest, *, on_token: TokenCallback | None = None
    ) -> ModelResponse:
        """Call the model. Raises :class:`ProviderError` on failure."""
        ...
