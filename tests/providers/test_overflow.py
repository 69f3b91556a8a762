""" "The request does not fit": recorded provider answers, through the real SDKs, become context overflows.

Each response in ``tests/data/provider/errors/context-overflow.json`` was really sent by the provider and is
quoted verbatim in a public report (its ``source``). Served from the loopback replay server to the adapter
over HTTP, it must come out as a :class:`ProviderError` with ``context_overflow`` (not retryable: the kernel
compacts and retries once instead). The Responses API stream error arrives as an event of an HTTP 200
stream; the two events before it (``response.created``, ``response.in_progress``) are written here, the
error event is the recorded one. The real 400 and 404 cassettes are no overflow.
"""

from __future__ import annotations

import asyncio
import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from flightlog.providers._sdk import context_overflow
from flightlog.providers.anthropic import AnthropicProvider
from flightlog.providers.cassette import load_cassette
from flightlog.providers.openai_chat import OpenAIChatProvider
from flightlog.providers.openai_responses import OpenAIResponsesProvider

from .recorded import CASSETTES
from .test_errors import _answering, _fail

pytestmark = pytest.mark.filterwarnings(r"ignore:The model .* is deprecated:DeprecationWarning")

RECORDED = json.loads((CASSETTES / "errors" / "context-overflow.json").read_text())["responses"]
ADAPTERS: dict[str, tuple[Any, str, str]] = {
    "anthropic.messages": (AnthropicProvider, "/v1/messages", ""),
    "openai.chat": (OpenAIChatProvider, "/v1/chat/completions", "/v1"),
    "openai.responses": (OpenAIResponsesProvider, "/v1/responses", "/v1"),
}


def _sse(*events: dict[str, Any] | str) -> bytes:
    lines = []
    for event in events:
        data = event if isinstance(event, str) else json.dumps(event)
        kind = json.loads(data)["type"]
        lines.append(f"event: {kind}\ndata: {data}\n\n")
    return "".join(lines).encode()


def _stream_before_error() -> list[dict[str, Any]]:
    response = {
        "id": "resp_1",
        "object": "response",
        "status": "in_progress",
        "model": "model-x",
        "output": [],
    }
    return [
        {"type": "response.created", "sequence_number": 0, "response": response},
        {"type": "response.in_progress", "sequence_number": 1, "response": response},
    ]


@pytest.mark.parametrize("recorded", RECORDED, ids=[r["id"] for r in RECORDED])
def test_recorded_overflow_answers_are_context_overflows(recorded: dict[str, Any]) -> None:
    adapter, path, root = ADAPTERS[recorded["protocol"]]
    stream = recorded["stream"]
    body = _sse(*_stream_before_error(), recorded["body"]) if stream else recorded["body"].encode()
    with _answering(adapter, path, recorded["status"], {}, body, stream=stream) as server:
        error = asyncio.run(_fail(adapter, server, root, stream=stream))
    assert error.context_overflow and not error.retryable
    assert json.loads(recorded["body"]).get("error", {}).get("message", "")[:20] in str(error)
    if not stream:
        assert error.status == recorded["status"]
        assert context_overflow(recorded["status"], json.loads(recorded["body"]))


def test_a_failed_response_object_with_the_overflow_code_is_one() -> None:
    """``response.failed`` (a stream ending failed) carries the same error object as the error event."""
    (event,) = [json.loads(r["body"]) for r in RECORDED if r["stream"]]
    failed = {"id": "resp_1", "object": "response", "status": "failed", "model": "model-x", "output": []}
    failed["error"] = {k: v for k, v in event["error"].items() if k in ("code", "message")}
    body = _sse(
        *_stream_before_error(), {"type": "response.failed", "sequence_number": 2, "response": failed}
    )
    adapter, path, root = ADAPTERS["openai.responses"]
    with _answering(adapter, path, 200, {}, body, stream=True) as server:
        error = asyncio.run(_fail(adapter, server, root, stream=True))
    assert error.context_overflow and not error.retryable and "context_length_exceeded" in str(error)


@pytest.mark.parametrize(
    "cassette",
    [
        "openai-responses/error-400-reasoning-replay-without-following-item.yaml",
        "openai-chat/error-404-model-not-found.yaml",
        "anthropic/error-404-model-not-found.yaml",
        "openai-responses/error-401-invalid-api-key.yaml",
    ],
)
def test_other_recorded_errors_are_not_overflows(cassette: str) -> None:
    errors = [i.response for i in load_cassette(Path(CASSETTES / cassette)) if i.response.status >= 400]
    assert errors
    for response in errors:
        encoded = any(k.lower() == "content-encoding" and v == "gzip" for k, v in response.headers)
        body = json.loads(gzip.decompress(response.body) if encoded else response.body)
        assert "error" in body and not context_overflow(response.status, body)


def test_a_stream_error_event_the_sdk_hands_over_fails_the_response() -> None:
    """Should an SDK yield the error event instead of raising, the stream still ends failed (never an empty
    answer recorded as the turn)."""
    from flightlog.providers.base import ProviderError
    from flightlog.providers.openai_responses import OpenAIResponsesProvider, _StreamedResponse

    (event,) = [json.loads(r["body"]) for r in RECORDED if r["stream"]]
    builder = _StreamedResponse(None)
    for item in [*_stream_before_error(), event]:
        builder.feed(item)
    with pytest.raises(ProviderError) as info:
        OpenAIResponsesProvider("model-x", api_key="k").parse(builder.result())
    assert info.value.context_overflow and "Your input exceeds the context window" in str(info.value)
