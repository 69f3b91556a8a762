"""Argument repair: each whitelisted heuristic alone, combinations, refusals, and valid JSON untouched."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flightlog.kernel.repair import REPAIRS, repair_arguments


def test_the_whitelist_is_exactly_four_repairs_in_order() -> None:
    assert [name for name, _ in REPAIRS] == [
        "code_fence",
        "json_in_string",
        "trailing_commas",
        "single_quotes",
    ]


def test_code_fence() -> None:
    outcome = repair_arguments('```json\n{"path": "a.txt"}\n```')
    assert outcome.arguments == {"path": "a.txt"}
    assert outcome.steps == ("code_fence",)
    assert outcome.repaired_text == '{"path": "a.txt"}'
    assert repair_arguments('```\n{"a": 1}```').arguments == {"a": 1}


def test_json_string_inside_a_string() -> None:
    outcome = repair_arguments(json.dumps(json.dumps({"a": [1, 2]})))
    assert outcome.arguments == {"a": [1, 2]}
    assert outcome.steps == ("json_in_string",)
    assert outcome.repaired_text == '{"a": [1, 2]}'


def test_trailing_commas_outside_strings_only() -> None:
    outcome = repair_arguments('{"a": [1, 2,], "b": "x,}",}')
    assert outcome.arguments == {"a": [1, 2], "b": "x,}"}
    assert outcome.steps == ("trailing_commas",)


def test_single_quotes_with_escapes_and_embedded_double_quotes() -> None:
    outcome = repair_arguments("{'cmd': 'echo \"hi\"', 'who': 'it\\'s me', \"ok\": \"don't\"}")
    assert outcome.arguments == {"cmd": 'echo "hi"', "who": "it's me", "ok": "don't"}
    assert outcome.steps == ("single_quotes",)


def test_repairs_compose_in_order() -> None:
    outcome = repair_arguments("```json\n{'a': 1,}\n```")
    assert outcome.arguments == {"a": 1}
    assert outcome.steps == ("code_fence", "trailing_commas", "single_quotes")


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("{a: 1}", "not valid JSON"),  # unquoted keys: not in the whitelist
        ("{'a': True}", "not valid JSON"),  # Python literals: not guessed at
        ('{"a": 1', "not valid JSON"),  # truncated
        ("[1, 2]", "must be a JSON object, not list"),
        ('"just a string"', "must be a JSON object, not str"),
    ],
)
def test_what_the_whitelist_does_not_cover_is_refused(text: str, error: str) -> None:
    outcome = repair_arguments(text)
    assert outcome.arguments is None and outcome.repaired_text is None
    assert error in (outcome.error or "")


@pytest.mark.parametrize(
    ("text", "field", "reason"),
    [
        ('{"content": "bad \\ud800 text"}', "$.content", "lone surrogate"),
        ('{"a": [1, {"\\udfff": 2}]}', "$.a[1].\\udfff", "lone surrogate"),  # the key, as escape text
        ('{"n": NaN}', "$.n", "not representable"),
        ('{"n": -Infinity}', "$.n", "not representable"),
        ('{"n": 9007199254740992}', "$.n", "beyond"),
        ("{'c': 'x \\ud83d'}", "$.c", "lone surrogate"),  # also after a repair (single quotes)
    ],
)
def test_an_object_the_ledger_cannot_hold_is_refused_naming_the_field(
    text: str, field: str, reason: str
) -> None:
    outcome = repair_arguments(text)
    assert outcome.arguments is None and outcome.repaired_text is None
    assert f"arguments cannot be recorded: {field}: " in (outcome.error or ""), outcome.error
    assert reason in (outcome.error or "")


def test_a_valid_surrogate_pair_is_one_character_and_kept() -> None:
    assert repair_arguments('{"c": "\\ud83d\\ude00"}').arguments == {"c": "\U0001f600"}


def test_blank_arguments_mean_no_arguments_without_a_repair() -> None:
    assert repair_arguments("") == repair_arguments("  \n") == repair_arguments("{}")
    assert repair_arguments("").arguments == {} and not repair_arguments("").repaired


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53 - 1), 2**53 - 1)  # what a ledger holds (longer ones: the test below)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=12,
)


@given(
    value=st.dictionaries(st.text(), _json, max_size=5),
    indent=st.none() | st.integers(0, 3),
    ascii_only=st.booleans(),
)
def test_valid_json_objects_are_never_changed(
    value: dict[str, Any], indent: int | None, ascii_only: bool
) -> None:
    text = json.dumps(value, indent=indent, ensure_ascii=ascii_only)
    outcome = repair_arguments(text)
    assert outcome.steps == () and outcome.repaired_text is None and outcome.error is None
    assert outcome.arguments == json.loads(text)
