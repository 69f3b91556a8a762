"""``_safe_json`` (what a kept Claude Code record becomes in a ``Custom`` payload) takes a container's
unchanged leaves inline (issue 19); it must give what the one-call-per-value walk gave, with the same
counts of fixes. The reference below is that walk, as it was before the change."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from flightlog.encoding import _plain, canonical_bytes, custom_bytes
from flightlog.errors import EncodingError
from flightlog.events import Custom
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


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**60), 2**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None)
@given(VALUES, st.none() | st.integers(0, 12))
def test_a_walk_said_plain_gives_a_plain_value(value: Any, max_chars: int | None) -> None:
    """``_Fixes.plain`` lets a kept record's encoding skip the plain-JSON check: it must never say plain
    for a value the check refuses (it may refuse one the check takes: a NaN it wrote as text)."""
    fixes = _Fixes()
    got = _safe_json(value, max_chars, fixes)
    if fixes.plain:
        assert _plain(got)


@settings(max_examples=400, deadline=None)
@given(JSON_VALUES, st.text(max_size=6))
def test_on_json_values_the_walk_and_the_check_agree_and_the_bytes_are_the_events(
    value: Any, kind: str
) -> None:
    """What ``json.loads`` makes: plain exactly when the check says so, and a payload said plain encodes
    (without the check, without the event) to the bytes of the ``Custom`` event."""
    value = json.loads(json.dumps(value))
    fixes = _Fixes()
    got = _safe_json(value, None, fixes)
    assert fixes.plain == _plain(got)
    if fixes.plain:
        try:
            expected = canonical_bytes(Custom(custom_kind=kind, payload=got))
        except EncodingError:  # a lone surrogate in the kind or a string: both refuse
            assert custom_bytes(kind, got, plain=True) is None
        else:
            assert custom_bytes(kind, got, plain=True) == expected
