"""``PipeConsole.print_lines`` (the ``runs`` and ``ls`` tables) writes exactly what ``print`` writes line by
line: terminal-unsafe characters shown as ``[U+XXXX]``, tabs expanded as rich expands them."""

from __future__ import annotations

import io

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flightlog.cli.console import PipeConsole

LINES = [
    "",
    "run-1  waiting_input          -  waiting for a decision on call-1 (flightlog pending)",
    "wide ☃ é 漢字 " * 30,
    "\x1b[2J clear \u202e reversed \x07 bell \r return \x9b csi",
    "a\tb\tc",
    "trailing   ",
    "[bold]not markup[/bold] :watch:",
]


def _console(file: io.StringIO) -> PipeConsole:
    return PipeConsole(file=file, highlight=False, markup=False, emoji=False, soft_wrap=True, width=20)


def _both(lines: list[str]) -> tuple[str, str]:
    one, many = io.StringIO(), io.StringIO()
    for line in lines:
        _console(one).print(line)
    _console(many).print_lines(iter(lines))
    return one.getvalue(), many.getvalue()


def test_print_lines_is_print_per_line() -> None:
    expected, got = _both(LINES * 700)  # crosses the 1,000-line chunks
    assert got == expected


@given(st.lists(st.text(), max_size=8))
def test_print_lines_matches_any_text(lines: list[str]) -> None:
    expected, got = _both(lines)
    assert got == expected


def test_print_lines_reports_a_closed_pipe() -> None:
    class Closed(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError

    with pytest.raises(BrokenPipeError):
        _console(Closed()).print_lines(["x"])
