"""``_safe_json`` (what a kept Claude Code record becomes in a ``Custom`` payload) takes a container's
unchanged leaves inline (issue 19); it must give what the one-call-per-value walk gave, with the same
counts of fixes. The reference below is that walk, as it was before the change."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from flightlog.importers.claude_code import _cut, _Fixes, _safe_json, _safe_number


def _reference(value: Any, max_chars: int | None, fixes: _Fixes) -> Any:
    kind = type(value)
    if kind is dict:
        return {str(k): _reference(v, max_chars, fixes) for k, v in value.items()}
    if kind is str:
        return value if max_chars is None or len(value) <= max_chars else _cut(value, max_chars, fixes)
    if kind is list:
        return [_reference(v, max_chars, fixes) for v in value]
    if isinstance(value, str):
        return _cut(value, max_chars, fixes)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return _safe_number(value, fixes)
    if isinstance(value, dict):
        return {str(k): _reference(v, max_chars, fixes) for k, v in value.items()}
    if isinstance(value, list):
        return [_reference(v, max_chars, fixes) for v in value]
    return str(value)


class _Text(str):
    """A ``str`` subclass (not what ``json.loads`` makes, but the walk accepts it)."""


LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(-(2**60), 2**60)
    | st.floats()
    | st.sampled_from([math.inf, -math.inf, 2**53, -(2**53) + 1])
    | st.text(max_size=12)
    | st.text(max_size=12).map(_Text)
    | st.tuples(st.integers())
)
KEYS = st.text(max_size=4) | st.integers(-3, 3) | st.none() | st.text(max_size=4).map(_Text)
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None)
@given(VALUES, st.none() | st.integers(0, 12))
def test_safe_json_equals_the_one_call_per_value_walk(value: Any, max_chars: int | None) -> None:
    expected_fixes, fixes = _Fixes(), _Fixes()
    expected = _reference(value, max_chars, expected_fixes)
    got = _safe_json(value, max_chars, fixes)
    assert repr(got) == repr(expected)  # repr: NaN compares unequal to itself; types of keys show
    assert [type(k) for k in _keys(got)] == [type(k) for k in _keys(expected)]
    assert fixes == expected_fixes


def _keys(value: Any) -> list[Any]:
    """Every dict key in ``value``, depth first."""
    if isinstance(value, dict):
        return [k for key, item in value.items() for k in (key, *_keys(item))]
    if isinstance(value, list):
        return [k for item in value for k in _keys(item)]
    return []
