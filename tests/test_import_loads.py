"""``importers.base._loads`` (the JSONL reader's parse of a line, issue 19) calls the decoder's C scanner
directly when it can; it must give what ``json.loads`` gives for every text: the same value, or an error of
the same type with the same message."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from flightlog.importers.base import _loads

VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=12,
)
SPACE = st.sampled_from(["", " ", "\t", "\r", "\n", " \r\n", "\ufeff", "x", ",", "}", "]"])


def _outcome(parse: Any, text: str) -> tuple[str, str]:
    try:
        return "value", repr(parse(text))  # repr: NaN compares unequal to itself
    except (ValueError, RecursionError) as exc:
        return type(exc).__name__, str(exc)


@settings(max_examples=500, deadline=None)
@given(VALUES, SPACE, SPACE, st.integers(0, 12), st.booleans())
def test_loads_is_json_loads(value: Any, before: str, after: str, cut: int, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    for candidate in (text, before + text + after, text[: max(0, len(text) - cut)], before, text + text):
        assert _outcome(_loads, candidate) == _outcome(json.loads, candidate)


def test_loads_is_json_loads_on_nesting_too_deep() -> None:
    text = "[" * 100_000 + "]" * 100_000
    assert _outcome(_loads, text) == _outcome(json.loads, text)


OBJECTS = st.dictionaries(st.text(max_size=3), VALUES, max_size=3)
LINE_PARTS = st.sampled_from(
    ["", " ", "\r", "\x00", "\x00\x00", "\\ud800", "\\udc00", '"\\u00e9"', "\xff", "\udcff", "x", "{", "[1]"]
)
DEPTHS = st.sampled_from([0, 0, 126, 127, 128, 200])
"""Lists nested this deep inside a line's object (0: none); the reader refuses objects nested deeper than
``MAX_LINE_DEPTH`` (128) as lines that are no JSON object."""
AROUND = st.just("") | LINE_PARTS
"""What a line holds before or after its object (nothing, half the time)."""
INNER = st.sampled_from(["", "\\ud800", "x\\udc00", "\\u00e9", "\\ud83d\\ude00", "\x00", "\udcff", "\\\\u"])
"""JSON string text put inside a line's object (escapes of lone and paired surrogates, a NUL, an invalid
byte, an escaped backslash before ``u``)."""


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(OBJECTS, AROUND, AROUND, st.booleans(), INNER, DEPTHS), max_size=6), st.booleans())
def test_read_jsonl_fast_path_is_the_general_path(
    tmp_path_factory: Any, lines: list[tuple[dict[str, Any], str, str, bool, str, int]], bom: bool
) -> None:
    """``read_jsonl`` yields the same records, raw bytes and warnings whether or not its fast path for
    plain object lines (``_plain_object``) is taken: objects with whitespace, NULs, surrogate escapes,
    invalid UTF-8 (``\\udcff`` written back as the byte 0xFF), garbage and bare values around or inside,
    and nesting around the reader's depth limit."""
    from flightlog.importers import base

    data = b"\xef\xbb\xbf" if bom else b""
    for value, before, after, ascii_only, inner, depth in lines:
        body = json.dumps(value, ensure_ascii=ascii_only)
        body = '{"s": "' + inner + '"' + (", " + body[1:] if value else "}")
        body = '{"d": ' + "[" * depth + "]" * depth + ", " + body[1:] if depth else body
        text = before + body + after
        data += text.encode("utf-8", "surrogateescape" if "\udcff" in text else "surrogatepass") + b"\n"
    path = tmp_path_factory.mktemp("jsonl") / "t.jsonl"
    path.write_bytes(data)

    def read() -> tuple[list[Any], list[Any]]:
        warnings: list[Any] = []
        items = [(i.line, repr(i.value), i.raw) for i in base.read_jsonl(path, warnings, keep_unparsed=True)]
        return items, warnings

    fast = read()
    real = base._plain_object
    try:
        base._plain_object = lambda line: None  # type: ignore[assignment]
        general = read()
    finally:
        base._plain_object = real
    assert fast == general
