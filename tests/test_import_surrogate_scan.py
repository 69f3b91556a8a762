"""The importers' surrogate scan: ``clean_surrogates`` walks a record only when its text can hold a lone
surrogate (issue 19). The skip must be exact: a False from ``may_hold_surrogates`` means the walk would
have changed nothing."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from flightlog.importers.base import clean_surrogates, may_hold_surrogates

_TEXT = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=12)
_JSON: Any = st.recursive(
    st.none() | st.booleans() | st.integers() | _TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=12,
)


@given(_JSON, st.booleans())
def test_a_record_the_scan_skips_has_no_surrogate(value: Any, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    decoded = json.loads(text)
    if not may_hold_surrogates(text):
        assert clean_surrogates(decoded) == (decoded, 0)


def test_every_spelling_of_a_lone_surrogate_is_scanned() -> None:
    for text in ('"\\ud800"', '"\\uDFFF"', '"\\uDbff x"', '{"\\udc80": 1}', '"\udcff"'):
        assert may_hold_surrogates(text), text
        assert clean_surrogates(json.loads(text))[1] == 1
    assert not may_hold_surrogates('{"a": "\\u00e9 \\ud7ff \\ue000"}')
