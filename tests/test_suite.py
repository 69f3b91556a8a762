"""The suite's own settings (tests/conftest.py) and helpers (tests/child_lines.py): what keeps it passing
on a slow, loaded machine."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

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


_KERNEL_TAKES_CTRL_C = '''
import asyncio

from flightlog.kernel import Agent, Kernel, tool
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.store import SqliteStore


@tool(effect="read_only")
async def wait_for_ctrl_c(text: str) -> str:
    """Wait for the operator's Ctrl-C.

    Args:
        text: Anything.
    """
    print("READY", flush=True)
    await asyncio.sleep(60)
    return text


def test_a_kernel_run_with_its_default_signal_handling(tmp_path):
    script = [calls(call("wait_for_ctrl_c", {"text": "x"}, id="w")), reply("done")]
    agent = Agent(name="waits", route=[ScriptedProvider(script, by_turn=True)], tools=[wait_for_ctrl_c])
    with SqliteStore(tmp_path / "k.db") as store:
        result = Kernel(store, agent, notary=None).run_sync("wait")
    assert result.status == "cancelled"  # the kernel took the Ctrl-C and cancelled its run cleanly


def test_the_next_one():
    print("THE NEXT TEST RAN", flush=True)
'''


def test_the_first_ctrl_c_stops_the_suite_even_when_a_kernel_takes_it(tmp_path: Path) -> None:
    """The README's test command went on after a Ctrl-C that landed in a kernel run with default signal
    handling (the kernel cancels cleanly, the test passes or fails, the next one runs). With the suite's
    conftest, the session stops after that test: exit 2 (pytest's "interrupted"), the next test not run."""
    (tmp_path / "test_ctrl_c.py").write_text(_KERNEL_TAKES_CTRL_C, encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    repo = Path(__file__).resolve().parents[1]
    argv = [sys.executable, "-m", "pytest", "-s", "-q", "-p", "tests.conftest", "--rootdir", str(tmp_path)]
    argv += ["-c", str(tmp_path / "pytest.ini"), "-p", "no:cacheprovider", str(tmp_path / "test_ctrl_c.py")]
    proc = subprocess.Popen(argv, cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with proc:
        try:
            while "READY" not in read_line(proc, "the READY line of the kernel's tool"):
                pass
            proc.send_signal(signal.SIGINT)  # what a terminal's Ctrl-C sends
            out, _ = proc.communicate(timeout=LINE_WAIT_S)
        finally:
            proc.kill()
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out
    assert "THE NEXT TEST RAN" not in out and "stopping the suite" in out
