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
