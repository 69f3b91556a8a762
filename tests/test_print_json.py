"""``print_json`` (every ``--json`` listing of the CLI) writes exactly what ``json.dumps(value, indent=2,
ensure_ascii=False)`` writes, whether an item takes its flat-object path or :mod:`json`'s encoder."""

from __future__ import annotations

import enum
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flightlog.cli.options import print_json


class Word(enum.StrEnum):
    A = "a"


CASES: list[Any] = [
    [],
    {},
    {"a": 1},
    "text",
    None,
    [{}],
    [{"session_id": "s1", "task": 'Fix "it"\n\tnow é ☃ \x1b[2J', "events": 3, "parent": None, "ok": True}],
    [{"a": 1}, {"b": False}, {"c": [1, {"d": None}]}, [], "x", 2, None],
    [{"f": 1.5}, {"nan": float("nan")}, {"inf": float("-inf")}],
    [{1: "int key"}, {None: "null key"}, {"e": Word.A}],
    [{"big": 10**30, "neg": -7}] * 2500,  # crosses the 1,000-item chunks
]


@pytest.mark.parametrize("value", CASES)
def test_print_json_is_json_dumps(value: Any, capsys: pytest.CaptureFixture[str]) -> None:
    print_json(value)
    assert capsys.readouterr().out == json.dumps(value, indent=2, ensure_ascii=False) + "\n"


scalars = st.none() | st.booleans() | st.integers() | st.text() | st.floats(allow_nan=False)
items = st.dictionaries(st.text(), scalars) | st.lists(scalars, max_size=3) | scalars


@given(st.lists(items, max_size=5))
def test_print_json_matches_any_list(value: list[Any]) -> None:
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        print_json(value)
    assert buffer.getvalue() == json.dumps(value, indent=2, ensure_ascii=False) + "\n"
