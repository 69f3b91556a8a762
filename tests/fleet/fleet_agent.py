"""The agent of the fleet tests: side-effect tools that append a line to a per-session file.

``agent`` is a factory (a fresh restart-safe :class:`ScriptedProvider` per load): ``TURNS`` turns (env
``FLIGHTLOG_FLEET_TURNS``, default 2), each calling ``append_line`` twice, then a final answer. Each line is
the call's effect key (``session:turn:call``), written to ``$FLIGHTLOG_FLEET_OUT/<session>.txt`` with one
``write`` (atomic for O_APPEND), so the test can count every effect; ``reconcile`` looks the key up. The
pause inside the tool (env ``FLIGHTLOG_FLEET_PAUSE_S``) widens the window between intent and completion.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from flightlog.kernel import Agent, current_effect_key, tool
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply

GOAL = "append every line exactly once"


def turns() -> int:
    """Turns per run."""
    return int(os.environ.get("FLIGHTLOG_FLEET_TURNS", "2"))


def out_file(key: str) -> Path:
    """The file of the session an effect key belongs to."""
    session_id = key.rsplit(":", 2)[0]
    return Path(os.environ["FLIGHTLOG_FLEET_OUT"]) / f"{session_id}.txt"


def _already(intent: dict[str, Any]) -> str | None:
    key = current_effect_key()
    assert key is not None
    path = out_file(key)
    present = path.exists() and key in path.read_text().splitlines()
    return f"appended {intent['arguments']['line']}" if present else None


@tool(effect="side_effect", reconcile=_already, in_thread=False)
def append_line(line: str) -> str:
    """Append this call's effect key to the session's file (not idempotent)."""
    key = current_effect_key()
    assert key is not None
    pause = float(os.environ.get("FLIGHTLOG_FLEET_PAUSE_S", "0"))
    time.sleep(pause)
    fd = os.open(out_file(key), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{key}\n".encode())
    finally:
        os.close(fd)
    time.sleep(pause)
    return f"appended {line}"


def script(count: int) -> list[Any]:
    """Two calls per turn, then the final answer."""
    steps: list[Any] = [
        calls(
            call("append_line", {"line": f"t{t}-a"}, id=f"a{t}"),
            call("append_line", {"line": f"t{t}-b"}, id=f"b{t}"),
            text=f"turn {t}",
        )
        for t in range(count)
    ]
    return [*steps, reply("done")]


def agent() -> Agent:
    """A fresh agent (its provider picks answers by turn, so any worker resumes it the same way)."""
    provider = ScriptedProvider(script(turns()), by_turn=True)
    return Agent(name="fleet-test", route=[provider], tools=[append_line], model_timeout_s=30, max_retries=0)


def expected_lines(session_id: str) -> list[str]:
    """Every line a finished session's file holds, in order."""
    return [f"{session_id}:{t + 1}:{side}{t}" for t in range(turns()) for side in ("a", "b")]
