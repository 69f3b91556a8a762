"""Test-only crash points (flightlog.testing.crashpoints): a process told to die at the n-th hit of a point
dies there, by SIGKILL, and not before; unset, nothing happens; a typo fails loudly; every documented point
is placed in the code."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import flightlog
from flightlog.recorder import verify_session
from flightlog.store import open_store
from flightlog.testing.crashpoints import ENV, POINTS, crash_point

APPENDER = r"""
import sys
from flightlog.events import Custom
from flightlog.recorder import Recorder
from flightlog.store import open_store

store = open_store(sys.argv[1])
recorder = Recorder.create(store, session_id="s")
for n in range(5):
    recorder.append(Custom(custom_kind="n", payload={"n": n}))
    print(f"ACK {n}", flush=True)
"""


def _append_five(tmp_path: Path, crash_at: str | None) -> tuple[int, list[str], str]:
    env = {k: v for k, v in os.environ.items() if k != ENV}
    if crash_at is not None:
        env[ENV] = crash_at
    done = subprocess.run(
        [sys.executable, "-c", APPENDER, str(tmp_path / "c.db")], env=env, capture_output=True, text=True
    )
    return done.returncode, done.stdout.splitlines(), done.stderr


@pytest.mark.parametrize(
    ("crash_at", "acked", "stored"),
    [
        ("append.written:3", 2, 2),  # the third append's rows were written, never committed
        ("append.committed:3", 2, 3),  # the third append committed, never acknowledged
        ("append.committed", 0, 1),  # n defaults to 1
    ],
)
def test_the_process_dies_at_the_nth_hit_of_the_named_point(
    tmp_path: Path, crash_at: str, acked: int, stored: int
) -> None:
    code, lines, err = _append_five(tmp_path, crash_at)
    assert code == -signal.SIGKILL, (code, err)
    assert lines == [f"ACK {n}" for n in range(acked)]
    with open_store(tmp_path / "c.db") as store:
        report = verify_session(store, "s")
        assert report.ok and report.events == stored


def test_unset_or_another_point_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, lines, err = _append_five(tmp_path, None)
    assert (code, len(lines)) == (0, 5), err
    monkeypatch.setenv(ENV, "model.call:1")
    crash_point("append.written")  # another point: returns


@pytest.mark.parametrize("spec", ["append.writen", "append.written:0", "append.written:x", "model.call:-1"])
def test_a_malformed_value_fails_loudly(monkeypatch: pytest.MonkeyPatch, spec: str) -> None:
    monkeypatch.setenv(ENV, spec)
    with pytest.raises(ValueError, match=ENV):
        crash_point("append.written")


def test_every_documented_point_is_placed_in_the_code() -> None:
    src = Path(flightlog.__file__).parent
    placed = {
        name
        for path in src.rglob("*.py")
        for name in re.findall(r"""crash_point\("([a-z.]+)"\)""", path.read_text())
    }
    assert placed == POINTS
