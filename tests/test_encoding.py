"""The stdlib fast path of canonical_json writes exactly what RFC 8785 (rfc8785) writes."""

from __future__ import annotations

from typing import Any

import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from flightlog.encoding import MAX_SAFE_INTEGER, _plain, canonical_json

TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=20)
VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER)
    | TEXT
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=1500, deadline=None)
@given(VALUES)
def test_canonical_json_equals_rfc8785_on_every_value(value: Any) -> None:
    assert canonical_json(value) == rfc8785.dumps(value)


def test_fast_path_declines_what_it_cannot_match() -> None:
    assert _plain({"a": [1, "x", None, True]})
    assert not _plain({"a": 1.5})
    assert not _plain({"\U0001f99c": 1})  # astral key: UTF-16 order differs from code point order
    assert not _plain([2**53])
    assert canonical_json({"\ue000": 1, "\U0001f99c": 2}) == rfc8785.dumps({"\ue000": 1, "\U0001f99c": 2})
    assert canonical_json({"s": '\u2028\x7f\x00\x1f"\\'}) == rfc8785.dumps({"s": '\u2028\x7f\x00\x1f"\\'})
