"""The replay server and its request matcher: loading both dialects, serving bytes as recorded, mismatches,
and each tolerated difference (plus differences that must never be tolerated)."""

from __future__ import annotations

import gzip
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from flightlog.providers.cassette import (
    Interaction,
    RecordedRequest,
    RecordedResponse,
    load_cassette,
    pydantic_ai_normalise,
)
from flightlog.providers.replay_match import normalise_body, request_differences, shared_history
from flightlog.providers.replay_server import MISMATCH_STATUS, ReplayServer, cassette_profile, protocol_of

from .recorded import CASSETTES

CHAT_GZIP = CASSETTES / "openai-chat" / "parallel-tool-calls-roundtrip.yaml"
ANTHROPIC_SSE = CASSETTES / "anthropic" / "stream-redacted-thinking.yaml"
ANTHROPIC_PARSED = CASSETTES / "anthropic" / "thinking-tool-use-roundtrip.yaml"


def post(url: str, body: Any) -> tuple[int, dict[str, str], bytes]:
    """POST JSON with the stdlib (no content decoding), returning status, headers and raw bytes."""
    data = json.dumps(body).encode("utf-8")
    request = urllib.request.Request(
        url, data=data, method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, dict(response.headers.items()), response.read()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, dict(error.headers.items()), error.read()


def _interaction(body: Any, *, path: str = "/v1/messages", dialect: Any = "vcrpy") -> Interaction:
    request = RecordedRequest("POST", "api.example.com", path, (), body, json.dumps(body))
    response = RecordedResponse(200, "OK", (("Content-Type", "application/json"),), b'{"ok": true}')
    return Interaction(request, response, dialect)


# ─── Loading ─────────────────────────────────────────────────────────────────────────────────────


def test_both_dialects_load() -> None:
    stock = load_cassette(CHAT_GZIP)
    assert {i.dialect for i in stock} == {"vcrpy"}
    assert stock[0].request.host == "api.openai.com" and stock[0].request.path == "/v1/chat/completions"
    assert stock[0].response.header("content-encoding") == "gzip"  # !!binary gzip kept encoded
    assert json.loads(gzip.decompress(stock[0].response.body))["object"] == "chat.completion"

    parsed = load_cassette(ANTHROPIC_PARSED)
    assert {i.dialect for i in parsed} == {"pydantic-ai"}
    assert parsed[0].request.query == (("beta", "true"),)
    assert json.loads(parsed[0].response.body)["content"][2]["id"] == "toolu_01YGzqpRE16Vricda3Aqcejo"
    for interaction in stock + parsed:
        names = {name.lower() for name, _ in interaction.response.headers}
        assert not names & {"content-length", "transfer-encoding", "connection"}


def test_not_a_cassette_is_a_value_error(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("just: a mapping\n", encoding="utf-8")
    with pytest.raises(ValueError, match="not a VCR cassette"):
        load_cassette(path)


def test_pydantic_ai_normalisation_matches_its_serializer() -> None:
    assert pydantic_ai_normalise("I’ll “quote” — wait… ﬁne") == 'I\'ll "quote" -- wait... fine'
    token = "EqEECkYICxgCKkAo3UA4WwDbB8ihhpykVCsPx6iMzwNTNP8dePIgYjNpu2EWrt5J+/=="
    assert pydantic_ai_normalise(token) == token


# ─── Serving ─────────────────────────────────────────────────────────────────────────────────────


def test_base_url_follows_the_recorded_api() -> None:
    with (
        ReplayServer.from_cassette(CHAT_GZIP) as chat,
        ReplayServer.from_cassette(ANTHROPIC_SSE) as anthropic,
    ):
        assert chat.base_url.startswith("http://127.0.0.1:") and chat.base_url.endswith("/v1")
        assert anthropic.base_url == anthropic.root_url
    with pytest.raises(RuntimeError, match="not running"):
        _ = chat.base_url


def test_responses_are_served_byte_for_byte() -> None:
    recorded = load_cassette(CHAT_GZIP)[0]
    with ReplayServer.from_cassette(CHAT_GZIP) as server:
        status, headers, body = post(server.root_url + "/v1/chat/completions", recorded.request.body)
    assert status == 200 and body == recorded.response.body
    assert headers["Content-Encoding"] == "gzip" and headers["Content-Length"] == str(len(body))
    assert headers["x-request-id"] == "req_a4495e803ce3464eb64d1b23f8661a53"


def test_event_streams_are_served_as_recorded() -> None:
    recorded = load_cassette(ANTHROPIC_SSE)[0]
    with ReplayServer.from_cassette(ANTHROPIC_SSE) as server:
        status, headers, body = post(server.root_url + "/v1/messages", recorded.request.body)
        assert server.served == 1 and server.remaining == 0
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    assert body == recorded.response.body and body.startswith(b"event: message_start\ndata: ")


def test_a_mismatch_is_answered_599_recorded_and_not_consumed() -> None:
    recorded = load_cassette(ANTHROPIC_PARSED)[0]
    tampered = json.loads(json.dumps(recorded.request.body))
    tampered["messages"][0]["content"][0]["text"] = "What is the smallest city?"
    with ReplayServer.from_cassette(ANTHROPIC_PARSED) as server:
        status, _, body = post(server.root_url + "/v1/messages", tampered)
        assert status == MISMATCH_STATUS
        error = json.loads(body)["error"]
        assert error["type"] == "replay_mismatch"
        assert error["differences"] == [
            "$.messages[0].content[0].text: recorded 'What is the largest city in the user country?' "
            "!= sent 'What is the smallest city?'"
        ]
        assert [m.index for m in server.mismatches] == [0] and server.served == 0
        assert server.received == [tampered]
        # The expected interaction is still next: the right request is served.
        assert post(server.root_url + "/v1/messages", recorded.request.body)[0] == 200
        with pytest.raises(AssertionError, match="replay mismatches"):
            server.assert_clean(all_served=False)


def test_compare_as_maps_the_live_body_before_matching_only() -> None:
    """``compare_as`` (an example's written branch with a placeholder): the mapped body is matched, the
    received body and the answer are the live ones; without it the same request mismatches."""
    recorded = _interaction({"messages": [{"role": "user", "content": "denied by PLACEHOLDER"}]})
    sent = {"messages": [{"role": "user", "content": "denied by bob: not now"}]}

    def placeholder(body: bytes) -> bytes:
        return body.replace(b"bob: not now", b"PLACEHOLDER")

    with ReplayServer([recorded], compare_as=placeholder) as server:
        status, _, body = post(server.root_url + "/v1/messages", sent)
        assert (status, body) == (200, b'{"ok": true}') and server.received == [sent]
        server.assert_clean()
    with ReplayServer([recorded]) as server:
        assert post(server.root_url + "/v1/messages", sent)[0] == MISMATCH_STATUS


def test_requests_past_the_end_and_unserved_interactions_are_reported() -> None:
    body = {"model": "m", "messages": []}
    with ReplayServer([_interaction(body)]) as server:
        with pytest.raises(AssertionError, match="1 recorded interaction"):
            server.assert_clean()
        assert post(server.root_url + "/v1/messages", body)[0] == 200
        server.assert_clean()
        status, _, answer = post(server.root_url + "/v1/messages", body)
    assert status == MISMATCH_STATUS
    assert json.loads(answer)["error"]["differences"] == ["no recorded interaction left (1 served)"]


def test_method_path_and_query_are_compared() -> None:
    recorded = RecordedRequest("POST", "api.anthropic.com", "/v1/messages", (("beta", "true"),), {}, "{}")
    same = request_differences(recorded, "vcrpy", method="post", path="/v1/messages", query="", body=b"{}")
    assert same == []
    other = request_differences(recorded, "vcrpy", method="GET", path="/v1/models", query="x=1", body=b"{}")
    assert other == [
        "method: recorded POST != sent GET",
        "path: recorded /v1/messages != sent /v1/models",
        "query: recorded {'beta': 'true'} != sent 'x=1'",
    ]


# ─── Tolerated differences (replay_match rules 1-7) and what is never tolerated ─────────────────


def _same(recorded: Any, sent: Any, path: str, dialect: Any = "vcrpy") -> bool:
    return normalise_body(recorded, path, dialect) == normalise_body(sent, path, dialect)


def test_null_is_absent_and_stream_false_is_the_default() -> None:
    recorded = {"messages": [{"role": "assistant", "content": None, "tool_calls": []}], "stream": False}
    assert _same(recorded, {"messages": [{"role": "assistant", "tool_calls": []}]}, "/v1/chat/completions")
    assert not _same({"stream": True}, {}, "/v1/chat/completions")


def test_empty_tool_descriptions_are_absent() -> None:
    assert _same({"tools": [{"name": "t", "description": ""}]}, {"tools": [{"name": "t"}]}, "/v1/messages")
    chat = {"tools": [{"type": "function", "function": {"name": "t", "description": ""}}]}
    assert _same(chat, {"tools": [{"type": "function", "function": {"name": "t"}}]}, "/v1/chat/completions")
    assert not _same(
        {"tools": [{"name": "t", "description": "x"}]}, {"tools": [{"name": "t"}]}, "/v1/messages"
    )


def test_anthropic_string_shorthand_and_cache_breakpoints() -> None:
    recorded = {
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": "Hi"},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t", "content": "ok", "cache_control": None}
                ],
            },
        ],
        "tools": [{"name": "t", "cache_control": {"type": "ephemeral"}}],
        "cache_control": {"type": "ephemeral"},
    }
    sent = {
        "system": "Be brief.",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": "ok"}]}
                ],
            },
        ],
        "tools": [{"name": "t"}],
        "cache_control": {"type": "ephemeral"},
    }
    assert _same(recorded, sent, "/v1/messages")
    # Top-level automatic caching is a request option and is compared.
    assert not _same(recorded, {**sent, "cache_control": None}, "/v1/messages")
    # The shorthand rule is Anthropic's only.
    assert not _same({"input": "Hi"}, {"input": [{"type": "text", "text": "Hi"}]}, "/v1/responses")


def test_chat_empty_annotations_on_assistant_messages() -> None:
    recorded = {"messages": [{"role": "assistant", "annotations": [], "content": "x"}]}
    assert _same(recorded, {"messages": [{"role": "assistant", "content": "x"}]}, "/v1/chat/completions")
    annotated = {"messages": [{"role": "assistant", "annotations": [{"type": "url"}], "content": "x"}]}
    assert not _same(annotated, {"messages": [{"role": "assistant", "content": "x"}]}, "/v1/chat/completions")


def test_responses_output_only_fields_of_replayed_items() -> None:
    recorded = {"input": [{"type": "message", "id": "m", "content": [{"type": "output_text", "text": "x"}]}]}
    sent = {
        "input": [
            {
                "type": "message",
                "id": "m",
                "status": "completed",
                "content": [{"type": "output_text", "text": "x", "logprobs": []}],
            }
        ]
    }
    assert _same(recorded, sent, "/v1/responses")
    reasoning = {"input": [{"type": "reasoning", "id": "rs", "summary": []}]}
    assert _same(reasoning, {"input": [{**reasoning["input"][0], "content": []}]}, "/v1/responses")
    assert not _same(
        reasoning, {"input": [{**reasoning["input"][0], "encrypted_content": "gA"}]}, "/v1/responses"
    )


def test_text_normalisation_is_for_pydantic_ai_cassettes_only() -> None:
    recorded = {"input": [{"role": "assistant", "content": 'I\'ll check "PotatoLand."'}]}
    sent = {"input": [{"role": "assistant", "content": "I’ll check “PotatoLand.”"}]}
    assert _same(recorded, sent, "/v1/responses", "pydantic-ai")
    assert not _same(recorded, sent, "/v1/responses", "vcrpy")


def test_order_signatures_and_ids_are_never_tolerated() -> None:
    block = {"type": "thinking", "thinking": "t", "signature": "EqEE"}
    recorded = {"messages": [{"role": "assistant", "content": [block, {"type": "text", "text": "a"}]}]}
    swapped = {"messages": [{"role": "assistant", "content": [{"type": "text", "text": "a"}, block]}]}
    resigned = {
        "messages": [
            {"role": "assistant", "content": [{**block, "signature": "EqEF"}, {"type": "text", "text": "a"}]}
        ]
    }
    for sent in (swapped, resigned):
        assert not _same(recorded, sent, "/v1/messages", "pydantic-ai")


# ─── Profiles ────────────────────────────────────────────────────────────────────────────────────


def test_profile_separates_options_from_the_transcript() -> None:
    anthropic = cassette_profile(load_cassette(ANTHROPIC_PARSED)[0])
    assert anthropic.protocol == "anthropic.messages" and anthropic.model == "claude-sonnet-4-0"
    assert anthropic.request_options == {
        "thinking": {"budget_tokens": 3000, "type": "enabled"},
        "tool_choice": {"type": "auto"},
    }
    assert (anthropic.max_tokens, anthropic.output_cap_key, anthropic.stream) == (4096, "max_tokens", False)

    chat = cassette_profile(load_cassette(CHAT_GZIP)[0])
    assert chat.request_options == {"max_completion_tokens": None}  # none was sent: the adapter sends none
    assert (chat.max_tokens, chat.strict_tools) == (None, False)
    assert cassette_profile(load_cassette(CHAT_GZIP)[2]).strict_tools is True

    assert protocol_of("/v1/responses") == "openai.responses"
    with pytest.raises(ValueError, match="no provider protocol"):
        protocol_of("/v1/embeddings")


def test_a_journal_that_cannot_be_written_is_refused_naming_it(tmp_path: Path) -> None:
    """A directory where the journal should be: refused when the server is made, one line naming the path
    and the OS error. Before, each request's journal write raised inside the server thread (a traceback on
    stderr) and the client saw the connection closed without a response."""
    journal = tmp_path / "journal"
    journal.mkdir()
    with pytest.raises(IsADirectoryError) as caught:
        ReplayServer([_interaction({"model": "m"})], journal=journal)
    assert str(caught.value) == f"replay journal {journal}: Is a directory (give a file path)"


def test_a_journal_write_that_fails_serves_nothing_and_says_why(tmp_path: Path) -> None:
    """The journal replaced by a directory after the server started: the request gets a 599
    ``replay_journal`` answer naming the path and the OS error, the position does not move (the same
    request is served once the journal can be written again), and ``assert_clean`` reports it."""
    body = {"model": "m", "messages": []}
    journal = tmp_path / "replay.jsonl"
    with ReplayServer([_interaction(body)], journal=journal) as server:
        journal.mkdir()  # nothing written yet: the path is free
        status, _, answer = post(server.root_url + "/v1/messages", body)
        assert status == MISMATCH_STATUS
        error = json.loads(answer)["error"]
        assert error["type"] == "replay_journal"
        assert (
            error["message"] == f"replay journal {journal}: not written: Is a directory; nothing was served"
        )
        assert server.served == 0 and server.remaining == 1
        journal.rmdir()
        assert post(server.root_url + "/v1/messages", body)[0] == 200
        assert server.served == 1
        with pytest.raises(AssertionError, match=f"replay journal {journal}: not written: Is a directory"):
            server.assert_clean()
    assert [json.loads(line)["matched"] for line in journal.read_text().splitlines()] == [True]


def test_a_resumed_process_names_the_interaction_its_request_diverged_at(tmp_path: Path) -> None:
    """A run resumed after a signal sends interaction #1's conversation plus the signal's message; the
    resuming process's server (``seek``) starts at #0 and reported the mismatch against #0 ("recorded 1
    items"). It names #1 now, with #1's differences, in the answer, ``mismatches`` and the journal."""
    recorded = load_cassette(ANTHROPIC_PARSED)
    signalled = json.loads(json.dumps(recorded[1].request.body))
    signalled["messages"].append({"role": "user", "content": [{"type": "text", "text": "[steer] stop"}]})
    journal = tmp_path / "replay.jsonl"
    with ReplayServer.from_cassette(ANTHROPIC_PARSED, seek=True, journal=journal) as server:
        status, _, answer = post(server.root_url + "/v1/messages", signalled)
        assert status == MISMATCH_STATUS
        error = json.loads(answer)["error"]
        assert error["message"].startswith("request does not match recorded interaction #1: ")
        assert error["differences"] == ["$.messages: recorded 3 items != sent 4"]
        assert [m.index for m in server.mismatches] == [1] and server.served == 0
        # nothing consumed: the recorded request is still served at #1, #0 skipped (another process's)
        assert post(server.root_url + "/v1/messages", recorded[1].request.body)[0] == 200
        assert server.skipped == [0]
    assert [json.loads(line)["index"] for line in journal.read_text().splitlines()] == [1, 1]
    # without seek the position is the one expected: a request diverging from it names it
    with ReplayServer.from_cassette(ANTHROPIC_PARSED) as server:
        assert post(server.root_url + "/v1/messages", signalled)[0] == MISMATCH_STATUS
        assert [m.index for m in server.mismatches] == [0]


def test_shared_history_counts_the_leading_equal_items() -> None:
    first, second = (i.request for i in load_cassette(ANTHROPIC_PARSED))
    body = json.dumps(second.body).encode()
    kwargs: dict[str, Any] = {"method": "POST", "path": "/v1/messages", "body": body}
    assert shared_history(second, "vcrpy", **kwargs) == 3
    assert shared_history(first, "vcrpy", **kwargs) == 1
    assert shared_history(first, "vcrpy", **{**kwargs, "path": "/v1/other"}) == -1
    assert shared_history(first, "vcrpy", **{**kwargs, "body": b"not json"}) == -1
