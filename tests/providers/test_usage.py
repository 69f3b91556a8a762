"""Usage mapping: each protocol's ``usage`` object → :class:`Usage` (tokens a budget relies on)."""

from __future__ import annotations

from typing import Any

import pytest

from flightlog.providers._sdk import UsageFields
from flightlog.providers.anthropic import response_from_message
from flightlog.providers.base import Usage
from flightlog.providers.openai_chat import response_from_completion
from flightlog.providers.openai_responses import response_from_response


def test_chat_completions_usage() -> None:
    completion: dict[str, Any] = {
        "choices": [{"message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 8}},
    }
    assert response_from_completion(completion).usage == Usage(12, 3, 8, None)


def test_responses_usage() -> None:
    response: dict[str, Any] = {
        "status": "completed",
        "output": [],
        "usage": {"input_tokens": 20, "output_tokens": 5, "input_tokens_details": {"cached_tokens": 0}},
    }
    assert response_from_response(response).usage == Usage(20, 5, 0, None)


def test_messages_usage() -> None:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": [{"type": "text", "text": "hi"}],
        "stop_reason": "end_turn",
        "usage": {
            "input_tokens": 7,
            "output_tokens": 2,
            "cache_read_input_tokens": 100,
            "cache_creation_input_tokens": 40,
        },
    }
    assert response_from_message(message).usage == Usage(7, 2, 100, 40)


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        (None, Usage()),
        ([1, 2], Usage()),
        ({}, Usage(0, 0, None, None)),
        ({"in": True, "out": 2.0, "details": {"cached": False}}, Usage(0, 0, None, None)),
        ({"in": 1, "out": 2, "details": [3]}, Usage(1, 2, None, None)),
        ({"in": 1, "out": 2, "details": {"cached": 3}, "made": 4}, Usage(1, 2, 3, 4)),
    ],
)
def test_usage_fields_reads_only_json_integers(usage: Any, expected: Usage) -> None:
    fields = UsageFields(
        input=("in",), output=("out",), cache_read=("details", "cached"), cache_write=("made",)
    )
    assert fields.read(usage) == expected
