"""Helpers the SDK adapters share: lazy SDK import, error mapping, request assembly, seed alignment.

Nothing here imports an SDK at module import time. SDK objects are handled as ``Any`` and turned into plain
JSON values (:func:`to_json`) at the boundary, so the adapters parse exactly what went over the wire.
"""

from __future__ import annotations

import importlib
import inspect
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from types import ModuleType
from typing import Any

from ..errors import install_hint
from ..events import ProviderReplay
from ..messages import ContentPart, Message, ToolCall, ToolCallPart
from .base import ProviderError, Usage

__all__ = [
    "INSTALL_HINT",
    "OVERFLOW_CODES",
    "JsonObj",
    "UsageFields",
    "align_seed",
    "api_key_variable",
    "arguments_object",
    "call_sdk_method",
    "context_overflow",
    "import_sdk",
    "json_int",
    "merge_options",
    "neutral_calls",
    "provider_error",
    "retry_after_seconds",
    "same_turn",
    "strict_compatible",
    "to_json",
]

INSTALL_HINT = install_hint("providers")
"""How to get the SDKs; every missing-SDK ImportError names it."""

JsonObj = dict[str, Any]
"""A decoded JSON object."""

_RETRYABLE_STATUSES = frozenset({408, 409, 429})
_NO_CREDENTIALS = "Could not resolve authentication method"
"""How the anthropic SDK reports, as a TypeError at call time, that it found no credentials."""


def import_sdk(name: str) -> ModuleType:
    """Import an official SDK on first use.

    Args:
        name: ``openai`` or ``anthropic``.

    Returns:
        The SDK module.

    Raises:
        ImportError: The SDK is not installed; the message names the ``providers`` extra.
    """
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ImportError(f"the {name!r} SDK is not installed; install it with: {INSTALL_HINT}") from exc


def to_json(value: Any) -> Any:
    """An SDK object (pydantic model, list, dict, scalar) as plain JSON values, fields as received.

    SDK models are dumped with ``to_dict(mode="json")`` (only the fields the API sent, API key names).
    """
    if hasattr(value, "to_dict"):
        return value.to_dict(mode="json")
    if isinstance(value, dict):
        return {str(key): to_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [to_json(item) for item in value]
    return value


def merge_options(body: JsonObj, options: Mapping[str, Any]) -> JsonObj:
    """``body`` with ``options`` merged on top: a key set to None is removed, any other value replaces.

    Args:
        body: The rendered request body (not modified).
        options: The adapter's ``request_options``.

    Returns:
        The merged body.
    """
    merged = dict(body)
    for key, value in options.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged


async def call_sdk_method(method: Callable[..., Any], body: JsonObj) -> Any:
    """Call a typed SDK ``create`` with a whole JSON body.

    Keys the method declares go as keyword arguments (the SDK validates and transforms them); any other key
    goes through ``extra_body`` unchanged, so newer API fields work with an older SDK.

    Args:
        method: e.g. ``client.messages.create`` or its ``with_raw_response`` variant.
        body: The complete request body.

    Returns:
        Whatever the SDK method returns (a model, a raw response or a stream).
    """
    known = _parameters(method)
    kwargs = {key: value for key, value in body.items() if key in known}
    extra = {key: value for key, value in body.items() if key not in known}
    if extra:
        kwargs["extra_body"] = extra
    return await method(**kwargs)


def _parameters(method: Callable[..., Any]) -> frozenset[str]:
    try:
        names = inspect.signature(method).parameters
    except (TypeError, ValueError):
        return frozenset()
    return frozenset(name for name in names if not name.startswith("extra_") and name != "timeout")


# ─── Errors ──────────────────────────────────────────────────────────────────────────────────────


def provider_error(exc: BaseException, sdk: ModuleType, where: str) -> ProviderError | None:
    """The :class:`ProviderError` for an SDK exception, or None when ``exc`` is not from the SDK.

    Mapping: an HTTP status error is retryable for 408, 409, 429 and 5xx, unless the server's
    ``x-should-retry`` header says otherwise (400, 401, 403, 404, 422 are not); ``retry_after_s`` comes
    from ``retry-after-ms`` / ``retry-after``. Timeouts and connection errors are retryable (no status).
    Any other SDK error (an unparseable response, a missing API key, including the TypeError the
    ``anthropic`` SDK raises when it finds no credentials) is not. A context overflow
    (:func:`context_overflow`; for an SDK error without status, such as a stream's error event, an error
    object with ``code`` ``context_length_exceeded``) is never retryable: the kernel compacts instead.

    Args:
        exc: The exception raised by the SDK call.
        sdk: The SDK module (``openai`` or ``anthropic``), for its exception classes.
        where: Context for the message, e.g. ``"anthropic.messages claude-sonnet-4-0"``.
    """
    if isinstance(exc, sdk.APIStatusError):
        status = int(exc.status_code)
        headers = _headers(getattr(exc, "response", None))
        overflow = context_overflow(status, getattr(exc, "body", None))
        return ProviderError(
            f"{where}: HTTP {status}: {exc}",
            retryable=_retryable(status, headers) and not overflow,
            retry_after_s=retry_after_seconds(headers),
            status=status,
            context_overflow=overflow,
        )
    if isinstance(exc, sdk.APITimeoutError):
        return ProviderError(f"{where}: request timed out", retryable=True)
    if isinstance(exc, sdk.APIConnectionError):
        return ProviderError(f"{where}: connection failed: {exc}", retryable=True)
    base = getattr(sdk, "OpenAIError", None) or getattr(sdk, "AnthropicError", None)
    if base is not None and isinstance(exc, base):
        # e.g. the error event of an HTTP 200 stream: the openai SDK raises APIError with its error object
        body = getattr(exc, "body", None)
        overflow = isinstance(body, dict) and str(body.get("code") or "") in OVERFLOW_CODES
        return ProviderError(f"{where}: {exc}", retryable=False, context_overflow=overflow)
    if isinstance(exc, TypeError) and _NO_CREDENTIALS in str(exc):
        variable = api_key_variable(sdk.__name__)
        return ProviderError(
            f"{where}: no API key: set {variable} (the environment variable the {sdk.__name__} SDK reads) "
            f"or pass api_key=: {exc}",
            retryable=False,
        )
    return None


def api_key_variable(sdk_name: str) -> str:
    """The environment variable an official SDK reads its API key from when none is passed:
    ``ANTHROPIC_API_KEY`` (``anthropic``), ``OPENAI_API_KEY`` (``openai``); as each SDK's client documents."""
    return f"{sdk_name.upper()}_API_KEY"


OVERFLOW_CODES = frozenset({"context_length_exceeded"})
"""Error ``code`` values meaning the request does not fit the context window (OpenAI)."""
_OVERFLOW_TEXT = (
    "prompt is too long",
    "exceed context limit",
    "exceeds the context window",
    "maximum context length",
)


def context_overflow(status: int, body: Any) -> bool:
    """Whether an error response says the request does not fit the model's context window.

    Shapes (as the APIs send them; the SDKs keep the decoded JSON as ``exc.body``):

    * Anthropic Messages: HTTP 400 ``{"type": "error", "error": {"type": "invalid_request_error",
      "message": "prompt is too long: 208310 tokens > 200000 maximum"}, "request_id": ...}``, or with
      "input length and `max_tokens` exceed context limit: 143653 + 64000 > 200000, ..." (the input
      plus the output cap do not fit); HTTP 413 ``request_too_large`` (the body exceeds the byte limit).
    * OpenAI Chat Completions and Responses: HTTP 400 with ``code: "context_length_exceeded"`` (the
      openai SDK hands over the inner ``error`` object; the raw body nests it under ``"error"``), message
      "This model's maximum context length is ..." or "Your input exceeds the context window of this
      model...".

    Args:
        status: HTTP status.
        body: The decoded error body (any JSON value; None when absent).

    Returns:
        True only for those shapes; any other 400 (a malformed request) is not an overflow.

    Source: the recorded responses in ``tests/data/provider/errors/context-overflow.json`` (each with
    the public report that quotes it).
    """
    error = body.get("error", body) if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return False
    kind = str(error.get("type") or "")
    if status == 413 and kind == "request_too_large":
        return True
    if status != 400:
        return False
    if str(error.get("code") or "") in OVERFLOW_CODES:
        return True
    message = str(error.get("message") or "").lower()
    return kind == "invalid_request_error" and any(text in message for text in _OVERFLOW_TEXT)


def _headers(response: Any) -> dict[str, str]:
    raw = getattr(response, "headers", None)
    if raw is None:
        return {}
    return {str(key).lower(): str(value) for key, value in raw.items()}


def _retryable(status: int, headers: Mapping[str, str]) -> bool:
    hint = headers.get("x-should-retry", "").lower()
    if hint in ("true", "false"):
        return hint == "true"
    return status in _RETRYABLE_STATUSES or status >= 500


def retry_after_seconds(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """The server's retry hint in seconds.

    ``retry-after-ms`` (milliseconds, float) wins over ``retry-after`` (seconds, or an HTTP date).

    Args:
        headers: Response headers with lower-case names.
        now: Current epoch seconds, for HTTP-date hints (default: the clock).

    Returns:
        Seconds (>= 0), or None when there is no parseable hint.
    """
    millis = _finite(headers.get("retry-after-ms"))
    if millis is not None:
        return max(millis / 1000.0, 0.0)
    value = headers.get("retry-after")
    if value is None:
        return None
    seconds = _finite(value)
    if seconds is not None:
        return max(seconds, 0.0)
    try:
        when = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
    return max(when - (time.time() if now is None else now), 0.0)


def _finite(text: str | None) -> float | None:
    try:
        number = float(text) if text is not None else math.nan
    except ValueError:
        return None
    return number if math.isfinite(number) else None


# ─── Transcript helpers ──────────────────────────────────────────────────────────────────────────


def align_seed(
    messages: Sequence[Message], seed: Sequence[ProviderReplay] | None, protocol: str
) -> list[ProviderReplay | None]:
    """Pair each assistant message with its recorded native payload.

    ``seed`` holds one payload per ``llm_completed`` still in the history, in order
    (:func:`flightlog.replay.provider_replay_seed`). Assistant messages that did not come from an
    ``llm_completed`` (e.g. restored from a page-out archive) can only precede those, so the pairing runs
    from the end: the last payload goes with the last assistant message. Payloads of another protocol are
    ignored.

    Args:
        messages: The neutral transcript.
        seed: ``ModelRequest.native_seed``.
        protocol: The adapter's protocol.

    Returns:
        One entry per message: its payload, or None (render it from the neutral message).
    """
    paired: list[ProviderReplay | None] = [None] * len(messages)
    if not seed:
        return paired
    assistants = [index for index, message in enumerate(messages) if message.role == "assistant"]
    for index, replay in zip(reversed(assistants), reversed(list(seed)), strict=False):
        if replay.protocol == protocol:
            paired[index] = replay
    return paired


def neutral_calls(message: Message) -> list[ToolCall]:
    """A message's tool calls: ``tool_calls`` plus ``tool_call`` content parts not already listed."""
    calls = list(message.tool_calls)
    seen = {call.id for call in calls}
    for part in message.content:
        if isinstance(part, ToolCallPart) and part.id not in seen:
            calls.append(ToolCall(id=part.id, name=part.name, arguments=part.arguments))
            seen.add(part.id)
    return calls


def same_turn(message: Message, parts: Sequence[ContentPart], calls: Sequence[ToolCall]) -> bool:
    """Whether a native payload (parsed to ``parts`` and ``calls``) still says what ``message`` says.

    A payload that no longer matches its neutral message (edited, repaired, clipped) is stale and must not
    be seeded: the neutral message wins.
    """
    content = [part for part in message.content if not isinstance(part, ToolCallPart)]
    return content == list(parts) and neutral_calls(message) == list(calls)


def strict_compatible(schema: Mapping[str, Any]) -> bool:
    """Whether a JSON Schema already satisfies OpenAI strict mode (so ``strict: true`` cannot break it).

    Every object must forbid additional properties and require all of its properties; checked recursively
    through ``properties``, ``items``, ``anyOf`` and ``$defs``.
    """
    if schema.get("type") == "object" or "properties" in schema:
        properties = schema.get("properties") or {}
        if schema.get("additionalProperties") is not False:
            return False
        if set(schema.get("required") or []) != set(properties):
            return False
        if not all(strict_compatible(sub) for sub in properties.values() if isinstance(sub, Mapping)):
            return False
    children: list[Any] = [schema.get("items"), *(schema.get("anyOf") or [])]
    children += list((schema.get("$defs") or {}).values())
    return all(strict_compatible(child) for child in children if isinstance(child, Mapping))


def arguments_object(arguments: str) -> Any:
    """Tool-call arguments text as the JSON object an API wants (``{}`` for empty text).

    Text that is not a JSON object is wrapped as ``{"_raw_arguments": text}`` so the turn can still be
    sent (the call and its result stay paired).
    """
    if not arguments.strip():
        return {}
    try:
        value = json.loads(arguments)
    except ValueError:
        return {"_raw_arguments": arguments}
    return value if isinstance(value, dict) else {"_raw_arguments": arguments}


def json_int(value: Any) -> int | None:
    """``value`` when it is a JSON integer (a bool is not one), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class UsageFields:
    """Where one protocol's ``usage`` object keeps each :class:`~flightlog.providers.base.Usage` count.

    Each field is a key path into the usage object (``("prompt_tokens_details", "cached_tokens")``); None
    when the protocol does not report that count. A missing or non-integer input/output count reads as 0,
    a missing cache count as None.
    """

    input: tuple[str, ...]
    output: tuple[str, ...]
    cache_read: tuple[str, ...] | None = None
    cache_write: tuple[str, ...] | None = None

    def read(self, usage: Any) -> Usage:
        """A response's ``usage`` value (any JSON; not an object → all zero) → :class:`Usage`."""
        if not isinstance(usage, dict):
            return Usage()
        return Usage(
            input_tokens=_at(usage, self.input) or 0,
            output_tokens=_at(usage, self.output) or 0,
            cache_read_tokens=_at(usage, self.cache_read),
            cache_write_tokens=_at(usage, self.cache_write),
        )


def _at(obj: JsonObj, path: tuple[str, ...] | None) -> int | None:
    value: Any = obj if path is not None else None
    for key in path or ():
        value = value.get(key) if isinstance(value, dict) else None
    return json_int(value)
