"""Failures: SDK exceptions mapped to ProviderError (retryable, retry hint, status), missing SDKs and pyyaml.

HTTP failures go through the real SDKs against the replay server with synthetic interactions whose
request is exactly what the adapter sends (so only the response is invented).
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any

import pytest

from flightlog.messages import Message
from flightlog.providers._sdk import provider_error, retry_after_seconds
from flightlog.providers.anthropic import AnthropicProvider
from flightlog.providers.base import ModelRequest, ProviderError
from flightlog.providers.cassette import Interaction, RecordedRequest, RecordedResponse, load_cassette
from flightlog.providers.openai_chat import OpenAIChatProvider
from flightlog.providers.openai_responses import OpenAIResponsesProvider
from flightlog.providers.replay_server import ReplayServer

from .recorded import CASSETTES

pytestmark = pytest.mark.filterwarnings(r"ignore:The model .* is deprecated:DeprecationWarning")

REQUEST = ModelRequest("Be brief.", [Message.text("user", "Hello")], max_tokens=64)
ADAPTERS: list[tuple[Any, str, str]] = [
    (AnthropicProvider, "/v1/messages", ""),
    (OpenAIChatProvider, "/v1/chat/completions", "/v1"),
    (OpenAIResponsesProvider, "/v1/responses", "/v1"),
]


def _answering(
    adapter: Any, path: str, status: int, headers: dict[str, str], body: bytes = b"", stream: bool = False
) -> ReplayServer:
    """A replay server whose one interaction expects exactly this adapter's request and answers as given."""
    request = ModelRequest(REQUEST.system_prompt, REQUEST.messages, max_tokens=64, stream=stream)
    sent = adapter("model-x", api_key="k").request_body(request)
    recorded = RecordedRequest("POST", "api.example.com", path, (), sent, json.dumps(sent))
    content_type = "text/event-stream" if stream else "application/json"
    payload = body or json.dumps({"error": {"type": "error", "message": f"synthetic {status}"}}).encode()
    response = RecordedResponse(status, "X", (("Content-Type", content_type), *headers.items()), payload)
    return ReplayServer([Interaction(recorded, response, "vcrpy")])


async def _fail(adapter: Any, server: ReplayServer, api_root: str, stream: bool = False) -> ProviderError:
    async with adapter("model-x", api_key="k", base_url=server.root_url + api_root) as provider:
        request = ModelRequest(REQUEST.system_prompt, REQUEST.messages, max_tokens=64, stream=stream)
        with pytest.raises(ProviderError) as info:
            await provider.complete(request)
    server.assert_clean()
    return info.value


@pytest.mark.parametrize(("adapter", "path", "root"), ADAPTERS, ids=lambda v: getattr(v, "__name__", v))
@pytest.mark.parametrize(
    ("status", "headers", "retryable", "retry_after"),
    [
        (429, {"retry-after-ms": "1500", "retry-after": "9"}, True, 1.5),
        (429, {"retry-after": "7"}, True, 7.0),
        (500, {}, True, None),
        (529, {"retry-after": "2"}, True, 2.0),
        (503, {"x-should-retry": "false"}, False, None),
        (400, {}, False, None),
        (401, {}, False, None),
        (403, {}, False, None),
        (404, {"x-should-retry": "false"}, False, None),
    ],
)
def test_http_failures_map_to_provider_error(
    adapter: Any,
    path: str,
    root: str,
    status: int,
    headers: dict[str, str],
    retryable: bool,
    retry_after: Any,
) -> None:
    with _answering(adapter, path, status, headers) as server:
        error = asyncio.run(_fail(adapter, server, root))
    assert (error.status, error.retryable, error.retry_after_s) == (status, retryable, retry_after)
    assert f"HTTP {status}" in str(error) and f"synthetic {status}" in str(error)


def test_retry_after_forms() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    date = format_datetime(datetime(2026, 1, 1, 0, 0, 30, tzinfo=UTC), usegmt=True)
    assert retry_after_seconds({"retry-after": date}, now=now) == 30.0
    assert retry_after_seconds({"retry-after": "0.25"}) == 0.25
    assert retry_after_seconds({"retry-after-ms": "20"}) == 0.02
    assert retry_after_seconds({"retry-after": "-3"}) == 0.0
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({"retry-after-ms": "nan", "retry-after": "4"}) == 4.0
    assert retry_after_seconds({}) is None


@pytest.fixture
def closed_port() -> Iterator[int]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    yield port


@pytest.mark.parametrize(("adapter", "path", "root"), ADAPTERS, ids=lambda v: getattr(v, "__name__", v))
def test_connection_refused_is_retryable(adapter: Any, path: str, root: str, closed_port: int) -> None:
    async def call() -> ProviderError:
        async with adapter("m", api_key="k", base_url=f"http://127.0.0.1:{closed_port}{root}") as provider:
            with pytest.raises(ProviderError) as info:
                await provider.complete(REQUEST)
        return info.value

    error = asyncio.run(call())
    assert (error.retryable, error.status, error.retry_after_s) == (True, None, None)


def test_timeout_is_retryable() -> None:
    import openai

    with socket.socket() as silent:  # accepts connections (backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/v1"

        async def call() -> ProviderError:
            client = openai.AsyncOpenAI(api_key="k", base_url=url, max_retries=0, timeout=0.2)
            try:
                with pytest.raises(ProviderError) as info:
                    await OpenAIChatProvider("m", client=client).complete(REQUEST)
            finally:
                await client.close()
            return info.value

        error = asyncio.run(call())
    assert (error.retryable, error.status) == (True, None)
    assert "timed out" in str(error)


def test_a_failed_streamed_response_is_a_provider_error() -> None:
    failed = {
        "id": "resp_1",
        "status": "failed",
        "error": {"code": "server_error", "message": "boom"},
        "output": [],
    }
    body = f"event: response.failed\ndata: {json.dumps({'type': 'response.failed', 'response': failed})}\n\n"
    with _answering(OpenAIResponsesProvider, "/v1/responses", 200, {}, body.encode(), stream=True) as server:
        error = asyncio.run(_fail(OpenAIResponsesProvider, server, "/v1", stream=True))
    assert (error.retryable, error.status) == (True, None)
    assert "server_error: boom" in str(error)


def test_non_sdk_exceptions_are_not_masked() -> None:
    path = CASSETTES / "anthropic" / "stream-redacted-thinking.yaml"
    recorded = load_cassette(path)[0]

    def explode(_: str) -> None:
        raise KeyError("callback failed")

    async def call() -> None:
        with ReplayServer.from_cassette(path) as server:
            options = {"thinking": recorded.request.body["thinking"]}
            async with AnthropicProvider(
                "claude-sonnet-4-5-20250929", api_key="k", base_url=server.base_url, request_options=options
            ) as provider:
                text = recorded.request.body["messages"][0]["content"][0]["text"]
                with pytest.raises(KeyError, match="callback failed"):
                    await provider.complete(
                        ModelRequest(None, [Message.text("user", text)], stream=True), on_token=explode
                    )

    asyncio.run(call())
    assert provider_error(KeyError("x"), sys.modules["anthropic"], "w") is None


def test_missing_credentials_are_provider_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ProviderError, match="api_key") as info:
        OpenAIChatProvider("m")
    assert info.value.retryable is False and "OPENAI_API_KEY" in str(info.value)  # the SDK's own message

    async def call() -> ProviderError:
        async with AnthropicProvider("m", base_url="http://127.0.0.1:9") as provider:
            with pytest.raises(ProviderError) as caught:
                await provider.complete(REQUEST)
        return caught.value

    error = asyncio.run(call())
    assert error.retryable is False and "no API key" in str(error)
    # what to set, which the anthropic SDK's own TypeError does not say (found by a new-user pass)
    assert "set ANTHROPIC_API_KEY (the environment variable the anthropic SDK reads) or pass api_key=" in str(
        error
    )


# ─── Missing optional dependencies ───────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("module", "adapter"),
    [("openai", OpenAIChatProvider), ("openai", OpenAIResponsesProvider), ("anthropic", AnthropicProvider)],
)
def test_a_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch, module: str, adapter: Any) -> None:
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ImportError, match=r"pip install 'flightlog\[providers\]'") as info:
        adapter("m", api_key="k")
    assert module in str(info.value)


def test_missing_pyyaml_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "yaml", None)
    with pytest.raises(ImportError, match=r"flightlog\[providers\]"):
        load_cassette(CASSETTES / "openai-chat" / "cached-tokens.yaml")


def test_importing_the_adapters_does_not_import_an_sdk() -> None:
    import subprocess

    code = (
        "import sys; import flightlog.providers.anthropic, flightlog.providers.openai_chat, "
        "flightlog.providers.openai_responses, flightlog.providers.replay_server; "
        "print(sorted(m for m in ('openai', 'anthropic', 'yaml') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
