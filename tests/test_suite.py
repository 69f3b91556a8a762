"""The suite's own settings (tests/conftest.py) and helpers (tests/child_lines.py): what keeps it passing
on a slow, loaded machine."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import HealthCheck, settings

from child_lines import LINE_WAIT_S, read_line


def test_property_tests_never_time_the_machine() -> None:
    """No per-example deadline (Hypothesis's default is 200 ms) and no ``too_slow`` health check."""
    assert settings.default.deadline is None
    assert HealthCheck.too_slow in settings.default.suppress_health_check


def _child(code: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )


def test_read_line_reads_one_line_and_leaves_the_rest() -> None:
    """A line at a time, nothing read past it; the last line unterminated at end of file, then ""."""
    proc = _child("import sys; sys.stdout.write('one\\ntwo\\n'); sys.stdout.flush(); input()")
    with proc:
        assert read_line(proc, "the first line") == "one\n"
        out, _ = proc.communicate("\n", timeout=LINE_WAIT_S)
    assert out == "two\n"
    with _child("print('a b'); print('end', end='')") as proc:
        assert [read_line(proc, "a line") for _ in range(3)] == ["a b\n", "end", ""]


def test_read_line_fails_naming_what_it_waited_for_and_what_it_got() -> None:
    """A child stuck mid-line: the test fails after the deadline instead of hanging the run. (The child
    wrote ``ready`` and ``half`` at once and then waits: the half line is there before the deadline.)"""
    with _child("import sys; sys.stdout.write('ready\\nhalf'); sys.stdout.flush(); input()") as proc:
        try:
            assert read_line(proc, "the ready line") == "ready\n"
            with pytest.raises(pytest.fail.Exception) as failed:
                read_line(proc, "the answer", timeout_s=0.5)
        finally:
            proc.kill()
    said = str(failed.value)
    assert f"no line from pid {proc.pid} (still running) within 0.5 s, waiting for the answer" in said
    assert "the line so far: b'half'" in said
