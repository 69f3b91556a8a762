"""How a live request is matched against a recorded one, and every difference that is tolerated.

Method and path must be equal; the host is ignored, and so is the ``beta`` query flag (pydantic-ai's
Anthropic client calls ``/v1/messages?beta=true``, the official client ``/v1/messages``); other query
parameters must be equal. JSON bodies are compared after both sides go through the same normalisation,
which removes exactly these differences (each one is a rendering choice of the recording client, never a
difference the API would act on):

1. **null is absent.** Object keys whose value is ``null`` are dropped (recording clients differ: one sends
   ``"content": null`` for a tool-call-only assistant message, another omits it; one sends
   ``"cache_control": null``).
2. **``"stream": false`` is absent** (pydantic-ai sends the API default explicitly).
3. **Empty tool descriptions are absent** (``""``, or ``null`` by rule 1).
4. **Anthropic Messages** (path ending ``/messages``): a string ``system`` or ``content`` (message or
   ``tool_result``) is the documented shorthand for one text block, so it is expanded to
   ``[{"type": "text", "text": ...}]``; ``"is_error": false`` on a ``tool_result`` is absent (the API
   default: pydantic-ai sends it, the official examples and Mirascope omit it); ``cache_control``
   breakpoints below the top level are ignored (they are the recording client's caching policy: they
   change billing, not the conversation).
5. **OpenAI Chat** (``/chat/completions``): an empty ``annotations`` list on an assistant message is
   absent (an output-only field some clients echo back).
6. **OpenAI Responses** (``/responses``): on ``input`` items, ``status`` is ignored, and so are
   ``logprobs`` inside content parts and an empty ``content`` list (output-only fields that pydantic-ai
   strips when it replays output items and other clients send back verbatim).
7. **pydantic-ai dialect only:** every string value is compared after
   :func:`~flightlog.providers.cassette.pydantic_ai_normalise` (that serializer rewrote the recorded
   text: smart quotes, dashes, NFKC); ids, signatures and encrypted content are ASCII and unaffected.

Nothing else is tolerated: key order never matters (JSON objects are compared as mappings), list order
always does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import parse_qsl

from .cassette import Dialect, RecordedRequest, pydantic_ai_normalise

__all__ = ["normalise_body", "request_differences", "shared_history"]

_IGNORED_QUERY = frozenset({"beta"})
_MAX_SHOWN = 160


def request_differences(
    recorded: RecordedRequest, dialect: Dialect, *, method: str, path: str, query: str, body: bytes
) -> list[str]:
    """Every difference between a live request and the recorded one, after the tolerated ones.

    Args:
        recorded: The request the cassette expects next.
        dialect: The cassette dialect of that interaction.
        method: Live HTTP method.
        path: Live URL path (no query).
        query: Live query string ("" when none).
        body: Live request body bytes.

    Returns:
        Human-readable differences, e.g. ``"$.messages[1].content[0].signature: recorded 'Eq..' != sent
        'Xy..'"``; empty when the request matches.
    """
    problems: list[str] = []
    if method.upper() != recorded.method:
        problems.append(f"method: recorded {recorded.method} != sent {method.upper()}")
    if path != recorded.path:
        problems.append(f"path: recorded {recorded.path} != sent {path}")
    if _query(query) != _query_pairs(recorded.query):
        problems.append(f"query: recorded {dict(recorded.query)} != sent {query!r}")
    problems.extend(_body_differences(recorded, dialect, path, body))
    return problems


def shared_history(
    recorded: RecordedRequest, dialect: Dialect, *, method: str, path: str, body: bytes
) -> int:
    """How far a live request's conversation follows a recorded one's: the number of leading items of the
    conversation list (``messages``: Anthropic Messages, OpenAI Chat; ``input``: OpenAI Responses) that are
    equal after normalisation (rules 1-7). A request that differs at its last item (a message added after
    a signal) shares all the others with the interaction it diverged at, fewer with earlier ones.

    Returns:
        The count (items), 0 when neither body has such a list; -1 when the method or path differ, or
        either body is not a JSON object (nothing shared).
    """
    if method.upper() != recorded.method or path != recorded.path or recorded.body is None:
        return -1
    try:
        sent = json.loads(body.decode("utf-8", errors="replace") or "null")
    except ValueError:
        return -1
    expected, actual = normalise_body(recorded.body, path, dialect), normalise_body(sent, path, dialect)
    if not isinstance(expected, dict) or not isinstance(actual, dict):
        return -1
    key = "input" if path.endswith("/responses") else "messages"
    ours, theirs = expected.get(key), actual.get(key)
    if not isinstance(ours, list) or not isinstance(theirs, list):
        return 0
    count = 0
    for mine, other in zip(ours, theirs, strict=False):
        if mine != other:
            break
        count += 1
    return count


def normalise_body(body: Any, path: str, dialect: Dialect) -> Any:
    """A JSON body with every tolerated difference (module docstring, rules 1-7) normalised away.

    Args:
        body: A decoded JSON request body.
        path: The URL path it was sent to (selects the API-specific rules).
        dialect: The cassette dialect (rule 7 applies to ``pydantic-ai`` only).

    Returns:
        A new, normalised value (the input is not modified).
    """
    value = _drop_nulls(body)
    if dialect == "pydantic-ai":
        value = _map_strings(value, pydantic_ai_normalise)
    if not isinstance(value, dict):
        return value
    if value.get("stream") is False:
        del value["stream"]
    _drop_empty_tool_descriptions(value)
    for suffix, rule in _API_RULES:
        if path.endswith(suffix):
            rule(value)
    return value


def _body_differences(recorded: RecordedRequest, dialect: Dialect, path: str, body: bytes) -> list[str]:
    text = body.decode("utf-8", errors="replace")
    if recorded.body is None:
        return (
            []
            if text == recorded.raw_body
            else [f"body: recorded {_show(recorded.raw_body)} != sent {_show(text)}"]
        )
    try:
        sent = json.loads(text) if text else None
    except ValueError:
        return [f"body: sent non-JSON {_show(text)}"]
    expected = normalise_body(recorded.body, path, dialect)
    actual = normalise_body(sent, path, dialect)
    return list(_diff(expected, actual, "$"))


def _query(query: str) -> list[tuple[str, str]]:
    return _query_pairs(tuple(parse_qsl(query, keep_blank_values=True)))


def _query_pairs(pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    return sorted((name, value) for name, value in pairs if name not in _IGNORED_QUERY)


# ─── Normalisation rules ─────────────────────────────────────────────────────────────────────────


def _drop_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _drop_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_drop_nulls(item) for item in value]
    return value


def _map_strings(value: Any, fn: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {key: _map_strings(item, fn) for key, item in value.items()}
    if isinstance(value, list):
        return [_map_strings(item, fn) for item in value]
    return value


def _drop_empty_tool_descriptions(body: dict[str, Any]) -> None:
    for tool in _dicts(body.get("tools")):
        holder = tool["function"] if isinstance(tool.get("function"), dict) else tool
        if holder.get("description") == "":
            del holder["description"]


def _anthropic_rules(body: dict[str, Any]) -> None:
    if "system" in body:
        body["system"] = _text_blocks(body["system"])
    for message in _dicts(body.get("messages")):
        if "content" in message:
            message["content"] = _text_blocks(message["content"])
        for block in _dicts(message.get("content")):
            if block.get("type") == "tool_result" and "content" in block:
                block["content"] = _text_blocks(block["content"])
            if block.get("type") == "tool_result" and block.get("is_error") is False:
                del block["is_error"]
    for holder in (
        body.get("system"),
        body.get("tools"),
        *(m.get("content") for m in _dicts(body.get("messages"))),
    ):
        for block in _dicts(holder):
            block.pop("cache_control", None)
            for inner in _dicts(block.get("content")):
                inner.pop("cache_control", None)


def _text_blocks(value: Any) -> Any:
    return [{"type": "text", "text": value}] if isinstance(value, str) else value


def _chat_rules(body: dict[str, Any]) -> None:
    for message in _dicts(body.get("messages")):
        if message.get("role") == "assistant" and message.get("annotations") == []:
            del message["annotations"]


def _responses_rules(body: dict[str, Any]) -> None:
    for item in _dicts(body.get("input")):
        item.pop("status", None)
        if item.get("content") == []:
            del item["content"]
        for part in _dicts(item.get("content")):
            part.pop("logprobs", None)


_API_RULES: tuple[tuple[str, Callable[[dict[str, Any]], None]], ...] = (
    ("/messages", _anthropic_rules),
    ("/chat/completions", _chat_rules),
    ("/responses", _responses_rules),
)


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


# ─── Structural diff ─────────────────────────────────────────────────────────────────────────────


def _diff(expected: Any, actual: Any, where: str) -> list[str]:
    if isinstance(expected, dict) and isinstance(actual, dict):
        return _diff_dicts(expected, actual, where)
    if isinstance(expected, list) and isinstance(actual, list):
        return _diff_lists(expected, actual, where)
    if type(expected) is not type(actual) or expected != actual:
        return [f"{where}: recorded {_show(expected)} != sent {_show(actual)}"]
    return []


def _diff_dicts(expected: dict[str, Any], actual: dict[str, Any], where: str) -> list[str]:
    problems: list[str] = []
    for key in expected.keys() - actual.keys():
        problems.append(f"{where}.{key}: missing (recorded {_show(expected[key])})")
    for key in actual.keys() - expected.keys():
        problems.append(f"{where}.{key}: not recorded (sent {_show(actual[key])})")
    for key in expected.keys() & actual.keys():
        problems.extend(_diff(expected[key], actual[key], f"{where}.{key}"))
    return sorted(problems)


def _diff_lists(expected: list[Any], actual: list[Any], where: str) -> list[str]:
    problems: list[str] = []
    if len(expected) != len(actual):
        problems.append(f"{where}: recorded {len(expected)} items != sent {len(actual)}")
    for index, (left, right) in enumerate(zip(expected, actual, strict=False)):
        problems.extend(_diff(left, right, f"{where}[{index}]"))
    return problems


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 3] + "..."
