"""``ProviderReplay.reasoning_details``: produced where an OpenAI-compatible provider returns it, stored, and
sent back byte-exact, on real recorded OpenRouter exchanges.

* ``openai-chat/openrouter-reasoning-details-roundtrip``: ``openai/gpt-5-mini`` through OpenRouter returns
  a ``reasoning.summary`` and a ``reasoning.encrypted`` detail; the recorded follow-up sends them back.
* ``openai-chat/openrouter-stream-reasoning-details``: ``anthropic/claude-sonnet-4.5`` through OpenRouter
  streams its thinking as ``reasoning.text`` fragments of one index, the signature in a later fragment.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from flightlog.encoding import decode_stored, parse_json
from flightlog.events import LlmCompleted
from flightlog.messages import Message
from flightlog.providers import openai_chat
from flightlog.providers.base import ModelRequest, ModelResponse
from flightlog.providers.cassette import Interaction, load_cassette
from flightlog.providers.openai_chat import response_from_completion
from flightlog.providers.replay_server import replay_provider
from flightlog.recorder import Recorder
from flightlog.replay import provider_replay_seed
from flightlog.sessions import iter_events
from flightlog.store import SqliteStore

from .recorded import CASSETTES, response_text, sse_events, transcript

ROUNDTRIP = CASSETTES / "openai-chat" / "openrouter-reasoning-details-roundtrip.yaml"
STREAM = CASSETTES / "openai-chat" / "openrouter-stream-reasoning-details.yaml"


def _recorded_message(interaction: Interaction) -> dict[str, Any]:
    message: dict[str, Any] = json.loads(response_text(interaction.response))["choices"][0]["message"]
    return message


def test_an_unstreamed_response_keeps_its_reasoning_details_verbatim() -> None:
    first, second = load_cassette(ROUNDTRIP)
    recorded = _recorded_message(first)["reasoning_details"]
    assert [d["type"] for d in recorded] == ["reasoning.summary", "reasoning.encrypted"]
    replay = response_from_completion(json.loads(response_text(first.response))).provider_replay
    assert replay is not None
    assert replay.reasoning_details == recorded
    # What the recording client sent back is exactly this (it added "id": null to the summary).
    sent_back = second.request.body["messages"][1]["reasoning_details"]  # type: ignore[index]
    assert [{k: v for k, v in d.items() if v is not None} for d in sent_back] == recorded


async def _through_the_ledger(db: Path) -> tuple[list[Any], dict[str, Any]]:
    """Turn 1 from the provider, recorded as ``llm_completed``; turn 2 seeded from what the ledger holds."""
    provider, server = replay_provider(ROUNDTRIP)
    with server, SqliteStore(str(db)) as store:
        first_turn, second_turn = server.interactions
        asked = transcript("openai.chat", first_turn.request.body)  # type: ignore[arg-type]
        first: ModelResponse = await provider.complete(ModelRequest(None, asked.messages))
        rec = Recorder.create(store, session_id="s")
        row = rec.append(LlmCompleted(turn=1, message=first.message, provider_replay=first.provider_replay))
        stored = parse_json(row.event_bytes)

        pairs = ((r.seq, event) for r, event in iter_events(store, "s"))
        seed = [replay for _, replay in provider_replay_seed(pairs, "openai.chat")]
        message = decode_stored(row.event_bytes)
        assert isinstance(message, LlmCompleted)
        follow_up = transcript("openai.chat", second_turn.request.body)  # type: ignore[arg-type]
        follow_up.messages[1] = message.message
        await provider.complete(ModelRequest(None, follow_up.messages, native_seed=seed))
        await provider.aclose()  # type: ignore[attr-defined]
        server.assert_clean()
        return server.received, stored


def test_stored_reasoning_details_go_back_byte_exact(tmp_path: Path) -> None:
    received, stored = asyncio.run(_through_the_ledger(tmp_path / "ledger.db"))
    recorded = _recorded_message(load_cassette(ROUNDTRIP)[0])["reasoning_details"]
    assert stored["provider_replay"]["reasoning_details"] == recorded
    sent = received[1]["messages"][1]
    assert sent["reasoning_details"] == recorded  # encrypted data and all, as the provider returned them
    assert "reasoning" not in sent  # its plain-text twin is left out, as the recorded follow-up did


async def _streamed() -> ModelResponse:
    provider, server = replay_provider(STREAM)
    with server:
        response = await provider.complete(ModelRequest(None, [Message.text("user", "What is 2+2?")]))
        await provider.aclose()  # type: ignore[attr-defined]
        server.assert_clean()
    return response


def test_streamed_reasoning_details_are_joined_per_type_and_index() -> None:
    response = asyncio.run(_streamed())
    (interaction,) = load_cassette(STREAM)
    fragments = [
        fragment
        for event in sse_events(response_text(interaction.response))
        for choice in event["choices"]
        for fragment in choice["delta"].get("reasoning_details") or []
    ]
    assert len(fragments) == 6 and {(f["type"], f["index"]) for f in fragments} == {("reasoning.text", 0)}
    (signature,) = [f["signature"] for f in fragments if f.get("signature")]
    replay = response.provider_replay
    assert replay is not None
    assert replay.reasoning_details == [
        {
            "type": "reasoning.text",
            "text": "This is a simple arithmetic question. 2+2 equals 4.",
            "signature": signature,
            "format": "anthropic-claude-v1",
            "index": 0,
        }
    ]
    assert replay.native_message["reasoning"] == "This is a simple arithmetic question. 2+2 equals 4."
    assert response.message.text_content() == "2 + 2 = 4"


_piece = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=6)


@given(
    st.lists(st.lists(_piece, min_size=1, max_size=5), min_size=1, max_size=3),
    st.lists(_piece, max_size=3),
    st.randoms(use_true_random=False),
)
def test_any_fragmentation_and_interleaving_joins_back(
    texts: list[list[str]], signature: list[str], rng: Any
) -> None:
    """Each detail is rebuilt from its fragments whatever the chunking, and details of other indexes
    interleaved with it stay apart (a fold over the stream; the recorded case above is one instance)."""
    fragments: list[list[dict[str, Any]]] = [
        [{"type": "reasoning.text", "text": t, "format": "f", "index": i} for t in pieces]
        for i, pieces in enumerate(texts)
    ]
    fragments[0] += [{"type": "reasoning.text", "signature": s, "index": 0} for s in signature]
    queues = [list(f) for f in fragments]
    builder = openai_chat._StreamedCompletion(None)
    while any(queues):
        queue = rng.choice([q for q in queues if q])
        builder.feed({"choices": [{"index": 0, "delta": {"reasoning_details": [queue.pop(0)]}}]})
    replay = response_from_completion(builder.result()).provider_replay
    assert replay is not None
    expected = [
        {"type": "reasoning.text", "text": "".join(pieces), "format": "f", "index": i}
        for i, pieces in enumerate(texts)
    ]
    if signature:
        expected[0]["signature"] = "".join(signature)
    assert isinstance(replay.reasoning_details, list)
    assert (
        sorted(replay.reasoning_details, key=lambda d: d["index"]) == expected
    )  # in order of first fragment
