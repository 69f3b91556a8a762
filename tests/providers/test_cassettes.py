"""Every vendored cassette, replayed through the real SDK adapters against the loopback replay server.

For each recorded request the test rebuilds a neutral :class:`ModelRequest` from the recorded body (assistant
turns replaced by what the adapter itself returned for the earlier responses, seeded back through
``native_seed``), sends it with the official SDK, and requires the server to see the recorded request (no
mismatch: thinking signatures, redacted thinking, encrypted reasoning and call ids come back byte-exact).
Each response is checked against the recording, read independently of the adapters' parsers: texts,
thinking with signature, redacted data, tool calls (id, name, argument text), usage; streamed text deltas
reach ``on_token``. Error cassettes must raise :class:`ProviderError` with the recorded status and
``retryable=False``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from flightlog.events import ProviderReplay
from flightlog.messages import Message, RedactedThinkingPart, TextPart, ThinkingPart
from flightlog.providers.anthropic import AnthropicProvider, response_from_message
from flightlog.providers.base import ModelRequest, ModelResponse, ProviderError
from flightlog.providers.cassette import Interaction
from flightlog.providers.openai_chat import OpenAIChatProvider, response_from_completion
from flightlog.providers.openai_responses import OpenAIResponsesProvider, response_from_response, seed_items
from flightlog.providers.replay_server import (
    ReplayServer,
    RequestProfile,
    cassette_profile,
    packaged_cassettes,
    replay_provider,
)

from .recorded import CASSETTES, Expected, expected, transcript

# The SDKs warn about the (real, now deprecated) models the cassettes were recorded with.
pytestmark = pytest.mark.filterwarnings(r"ignore:The model .* is deprecated:DeprecationWarning")

ADAPTERS: dict[str, Any] = {
    "anthropic.messages": AnthropicProvider,
    "openai.chat": OpenAIChatProvider,
    "openai.responses": OpenAIResponsesProvider,
}
REASONING_400 = CASSETTES / "openai-responses" / "error-400-reasoning-replay-without-following-item.yaml"
CHAIN = CASSETTES / "openai-responses" / "previous-response-id-chain.yaml"
SPECIAL = {REASONING_400, CHAIN}
ALL = sorted(CASSETTES.glob("*/*.yaml"))
GENERIC = [path for path in ALL if path not in SPECIAL]
# Neutral rendering (no native seed) reproduces the recorded follow-ups exactly where the protocol can carry
# every part neutrally: Anthropic (signed thinking, redacted thinking) and Chat Completions, except a
# follow-up that sends OpenRouter's reasoning_details back (a neutral message has no place for them).
DETAILS_ROUNDTRIP = CASSETTES / "openai-chat" / "openrouter-reasoning-details-roundtrip.yaml"
NEUTRAL = [
    path for path in GENERIC if path.parent.name in ("anthropic", "openai-chat") and path != DETAILS_ROUNDTRIP
]


def _id(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


def provider_for(profile: RequestProfile, server: ReplayServer, **kwargs: Any) -> Any:
    """The adapter configured as the recording client was, pointed at the replay server."""
    options = dict(profile.request_options)
    if profile.max_tokens is not None:
        options.pop(profile.output_cap_key, None)  # rendered from ModelRequest.max_tokens instead
    adapter = ADAPTERS[profile.protocol]
    return adapter(
        profile.model,
        api_key="test-key",
        base_url=server.base_url,
        request_options=options,
        capabilities=profile.capabilities(adapter.default_capabilities),
        **kwargs,
    )


def check_turn(response: ModelResponse, want: Expected, tokens: list[str], profile: RequestProfile) -> None:
    """The adapter's response says exactly what the recording says."""
    content = response.message.content
    assert [p.text for p in content if isinstance(p, TextPart)] == want.texts
    assert [(p.thinking, p.signature) for p in content if isinstance(p, ThinkingPart)] == want.thinking
    assert [p.data for p in content if isinstance(p, RedactedThinkingPart)] == want.redacted
    assert [(c.id, c.name, c.arguments) for c in response.message.tool_calls] == want.calls
    usage = response.usage
    assert (
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
    ) == want.usage
    assert tokens == ([delta for delta in want.text_deltas if delta] if profile.stream else [])
    assert response.provider_replay is not None and response.provider_replay.protocol == profile.protocol
    if want.final is None:
        return
    if profile.protocol == "openai.responses" and want.done_items is not None:
        _check_streamed_response(response, want.final, want.done_items)
    else:  # streamed == what the unstreamed path makes of the same content
        parse = (
            response_from_message if profile.protocol == "anthropic.messages" else response_from_completion
        )
        assert response == parse(want.final)


def _check_streamed_response(
    response: ModelResponse, final: dict[str, Any], done: list[dict[str, Any]]
) -> None:
    """A Responses stream ends with the whole response: the streamed result is the unstreamed one.

    One exception, in the recording itself: ``encrypted_content`` of a reasoning item differs between its
    ``output_item.done`` event and ``response.completed`` (re-encrypted). The adapter keeps the item as the
    ``done`` event delivered it, which is what the recorded follow-up request sent back (and the API took).
    """
    assert response.provider_replay is not None
    assert response.provider_replay.native_blocks == done
    unstreamed = response_from_response(final)
    assert (response.usage, response.stop_reason) == (unstreamed.usage, unstreamed.stop_reason)
    assert unstreamed.provider_replay is not None and unstreamed.provider_replay.native_blocks is not None

    def without_encrypted(blocks: list[Any]) -> list[Any]:
        return [{k: v for k, v in block.items() if k != "encrypted_content"} for block in blocks]

    assert without_encrypted(done) == without_encrypted(unstreamed.provider_replay.native_blocks)
    redacted = [p for p in unstreamed.message.content if isinstance(p, RedactedThinkingPart)]
    if not redacted:
        assert response.message == unstreamed.message


def assert_seeded_verbatim(protocol: str, body: dict[str, Any], seed: list[ProviderReplay]) -> None:
    """The request carries each seeded payload as recorded (not a re-rendering that happens to match)."""
    if protocol == "anthropic.messages":
        sent = [m["content"] for m in body["messages"] if m["role"] == "assistant"]
        assert sent == [replay.native_blocks for replay in seed]
    elif protocol == "openai.chat":
        sent = [m for m in body["messages"] if m["role"] == "assistant"]
        assert sent == [_chat_seed(r.native_message or {}) for r in seed]
    else:
        for replay in seed:
            items = seed_items(replay.native_blocks or [])
            assert any(body["input"][i : i + len(items)] == items for i in range(len(body["input"])))


def _chat_seed(native: dict[str, Any]) -> dict[str, Any]:
    """A seeded chat message as sent: nulls left out, and OpenRouter's ``reasoning`` text too when the
    ``reasoning_details`` it renders go back (module docstring of ``flightlog.providers.openai_chat``)."""
    drop = {"reasoning"} if native.get("reasoning_details") else set()
    return {k: v for k, v in native.items() if v is not None and k not in drop}


async def replay(path: Path, *, native: bool) -> list[ModelResponse | ProviderError]:
    """Drive every interaction of a cassette through its adapter; returns each outcome."""
    outcomes: list[ModelResponse | ProviderError] = []
    with ReplayServer.from_cassette(path) as server:
        history: list[ModelResponse] = []
        for interaction in server.interactions:
            outcome = await _one(server, interaction, history, native=native)
            outcomes.append(outcome)
            if isinstance(outcome, ModelResponse):
                history.append(outcome)
        server.assert_clean()
    return outcomes


async def _one(
    server: ReplayServer, interaction: Interaction, history: list[ModelResponse], *, native: bool
) -> ModelResponse | ProviderError:
    profile = cassette_profile(interaction)
    recorded = transcript(profile.protocol, interaction.request.body)
    slots = [index for index, message in enumerate(recorded.messages) if message.role == "assistant"]
    ours = history[len(history) - len(slots) :] if slots else []
    for index, response in zip(slots, ours, strict=True):
        recorded.messages[index] = response.message
    seed = [r.provider_replay for r in ours if r.provider_replay is not None] if native and ours else None
    request = ModelRequest(
        recorded.system_prompt,
        recorded.messages,
        recorded.tools,
        native_seed=seed,
        max_tokens=profile.max_tokens or 4096,
        stream=profile.stream,
    )
    tokens: list[str] = []
    async with provider_for(profile, server) as provider:
        if seed:
            assert_seeded_verbatim(profile.protocol, provider.request_body(request), seed)
        if interaction.response.status >= 400:
            with pytest.raises(ProviderError) as info:
                await provider.complete(request, on_token=tokens.append)
            assert (info.value.status, info.value.retryable) == (interaction.response.status, False)
            return info.value
        response = await provider.complete(request, on_token=tokens.append)
    check_turn(response, expected(profile.protocol, interaction.response), tokens, profile)
    return response


@pytest.mark.parametrize("path", GENERIC, ids=_id)
def test_cassette_replays_with_native_seed(path: Path) -> None:
    outcomes = asyncio.run(replay(path, native=True))
    assert len(outcomes) == len(ReplayServer.from_cassette(path).interactions)


@pytest.mark.parametrize("path", NEUTRAL, ids=_id)
def test_cassette_replays_from_the_neutral_transcript(path: Path) -> None:
    asyncio.run(replay(path, native=False))


def test_every_cassette_is_covered() -> None:
    assert len(ALL) == 21
    assert {path.parent.name for path in ALL} == {"anthropic", "openai-chat", "openai-responses"}


# ─── Cassettes that need a scripted conversation ─────────────────────────────────────────────────


async def _reasoning_400() -> None:
    with ReplayServer.from_cassette(REASONING_400) as server:
        provider = provider_for(cassette_profile(server.interactions[0]), server)
        await _reasoning_400_steps(provider)
        await provider.aclose()
        server.assert_clean()


async def _reasoning_400_steps(provider: Any) -> None:
    """Answer, edit the answer, seed it back wrongly (400), then with the true (now stale) seed."""
    user = Message.text("user", "What is the meaning of life?")
    first = await provider.complete(ModelRequest(None, [user]))
    assert first.provider_replay is not None and first.provider_replay.native_blocks
    reasoning = first.provider_replay.native_blocks[0]
    assert reasoning["type"] == "reasoning" and reasoning["encrypted_content"].startswith("gAAAAA")
    thinking = [part for part in first.message.content if isinstance(part, ThinkingPart)]
    # The application edits the answer; the next request keeps the earlier reasoning.
    edited = Message(role="assistant", content=[*thinking, TextPart(text="The meaning of life is 42")])
    follow_up = Message.text("user", "Anything to add?")
    messages = [user, edited, follow_up]

    # A seed whose reasoning item is followed by a different item than the one it produced: the API's 400.
    forged = ProviderReplay(
        protocol="openai.responses",
        native_blocks=[reasoning, {"content": "The meaning of life is 42", "role": "assistant"}],
    )
    with pytest.raises(ProviderError) as info:
        await provider.complete(ModelRequest(None, messages, native_seed=[forged]))
    assert (info.value.status, info.value.retryable) == (400, False)
    assert "required following item" in str(info.value)

    # The true seed no longer says what the edited message says: it is stale, so the neutral message is
    # rendered (the reasoning summary as <think> text) and the call succeeds.
    third = await provider.complete(ModelRequest(None, messages, native_seed=[first.provider_replay]))
    assert third.message.text_content().startswith("Plenty.")


def test_reasoning_replayed_without_its_following_item_is_a_400_and_a_stale_seed_is_not_sent() -> None:
    asyncio.run(_reasoning_400())


async def _chain() -> list[ModelResponse]:
    responses: list[ModelResponse] = []
    with ReplayServer.from_cassette(CHAIN) as server:
        profile = cassette_profile(server.interactions[0])
        provider = provider_for(profile, server, chain_responses=True)
        messages: list[Message] = []
        for interaction in server.interactions:
            recorded = transcript(profile.protocol, interaction.request.body)
            messages += recorded.messages  # only the new items: the rest lives on the server
            seed = [r.provider_replay for r in responses if r.provider_replay is not None]
            response = await provider.complete(
                ModelRequest(None, list(messages), recorded.tools, native_seed=seed)
            )
            check_turn(response, expected(profile.protocol, interaction.response), [], profile)
            messages.append(response.message)
            responses.append(response)
        await provider.aclose()
        server.assert_clean()
    return responses


def test_previous_response_id_chain_sends_only_new_items() -> None:
    responses = asyncio.run(_chain())
    assert [call.arguments for r in responses for call in r.message.tool_calls] == [
        '{"city":"New York"}',
        '{"city":"NYC"}',
    ]
    assert responses[-1].message.text_content() == "The weather in New York is sunny and 72°F."


async def _chain_broken_by_rollback() -> None:
    with ReplayServer.from_cassette(CHAIN) as server:
        provider = provider_for(cassette_profile(server.interactions[0]), server, chain_responses=True)
        recorded = transcript(provider.protocol, server.interactions[0].request.body)
        first = await provider.complete(ModelRequest(None, recorded.messages, recorded.tools))
        assert first.message.text_content() == "Hello"
        # A different history (the first turn rolled back and replaced) must not chain: full input is sent.
        other = [Message.text("user", "What's the weather in New York?")]
        body = provider.request_body(ModelRequest(None, other, recorded.tools))
        assert body["input"] == [{"role": "user", "content": "What's the weather in New York?"}]
        assert "previous_response_id" not in body
        await provider.aclose()


def test_chaining_needs_the_previous_call_as_an_exact_prefix() -> None:
    asyncio.run(_chain_broken_by_rollback())


# ─── The convenience constructor, as the kernel and the demo use it ─────────────────────────────


async def _kernel_style_run(path: Path) -> list[ModelResponse]:
    """Drive a cassette as a kernel would: one provider, a growing transcript, every payload seeded back."""
    chain = {"chain_responses": True} if path.stem == "previous-response-id-chain" else {}
    provider, server = replay_provider(path, **chain)
    responses: list[ModelResponse] = []
    with server:
        messages: list[Message] = []
        for interaction in server.interactions:
            recorded = transcript(provider.protocol, interaction.request.body)
            assistants = [i for i, m in enumerate(recorded.messages) if m.role == "assistant"]
            messages += recorded.messages[assistants[-1] + 1 if assistants else 0 :]  # what is new
            seed = [r.provider_replay for r in responses if r.provider_replay is not None]
            request = ModelRequest(recorded.system_prompt, list(messages), recorded.tools, native_seed=seed)
            response = await provider.complete(request)  # default max_tokens/stream: the cassette's win
            messages.append(response.message)
            responses.append(response)
        await provider.aclose()  # type: ignore[attr-defined]
    server.assert_clean()
    return responses


@pytest.mark.parametrize("name", sorted(packaged_cassettes()))
def test_packaged_cassettes_replay_through_replay_provider(name: str) -> None:
    responses = asyncio.run(_kernel_style_run(packaged_cassettes()[name]))
    assert responses[-1].stop_reason in ("end_turn", "stop", "completed")
    assert any(r.message.tool_calls for r in responses) and not responses[-1].message.tool_calls


def test_packaged_cassettes_are_copies_of_tested_ones() -> None:
    packaged = packaged_cassettes()
    assert len(packaged) == 3
    for path in packaged.values():
        assert path.read_bytes() == (CASSETTES / path.parent.name / path.name).read_bytes()
    assert (next(iter(packaged.values())).parents[1] / "PROVENANCE.md").is_file()
