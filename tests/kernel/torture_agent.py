"""The agent of the crash torture test: non-idempotent side effects that append lines to a file.

Imported by the test (reference run, in-process) and by the zygote process that forks the children the
test SIGKILLs. ``TURNS`` turns, each with two ``append_line`` side effects around a pure ``peek``; the model
is a restart-safe :class:`ScriptedProvider` (``by_turn``), so a resumed child gets the answer the killed
one got. Small sleeps inside the tool widen the window between the recorded intent and the completion,
so kills often leave an effect in doubt.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from flightlog.errors import SessionNotFound
from flightlog.kernel import Agent, Kernel, tool
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.store import open_store

TURNS = 8
GOAL = "append every line exactly once"


def lines(turns: int = TURNS) -> list[str]:
    """Every line the run appends, in order."""
    return [f"t{t}-{side}" for t in range(turns) for side in ("a", "b")]


def script(turns: int = TURNS) -> list[Any]:
    """One response per turn, then the final answer."""
    steps: list[Any] = [
        calls(
            call("append_line", {"line": f"t{t}-a"}, id=f"a{t}"),
            call("peek", {"n": t}, id=f"p{t}"),
            call("append_line", {"line": f"t{t}-b"}, id=f"b{t}"),
            text=f"turn {t}",
        )
        for t in range(turns)
    ]
    return [*steps, reply("all lines appended")]


def build(out: Path, *, reconcile: bool, pause_s: float = 0.002) -> Agent:
    """The agent writing to ``out``; with ``reconcile`` its side effect can tell whether it happened."""

    def already(intent: dict[str, Any]) -> str | None:
        line = intent["arguments"]["line"]
        present = out.exists() and line in out.read_text().splitlines()
        return f"appended {line}" if present else None

    @tool(effect="side_effect", reconcile=already if reconcile else None, in_thread=False)
    def append_line(line: str) -> str:
        """Append one line to the output file (not idempotent)."""
        time.sleep(pause_s)
        with out.open("a") as fh:
            fh.write(line + "\n")
        time.sleep(pause_s)
        return f"appended {line}"

    @tool(effect="read_only")
    def peek(n: int) -> str:
        """A pure read."""
        return f"peeked {n * n}"

    provider = ScriptedProvider(script(), by_turn=True, latency_s=0.001)
    return Agent(name="torture", route=[provider], tools=[append_line, peek], model_timeout_s=30)


def child_main(db: str, session_id: str, out: str, mode: str, synchronous: str = "FULL") -> int:
    """Run or resume the session; exit code 0 completed, 3 suspended, 1 anything else."""
    store = open_store(db, synchronous=synchronous)
    try:
        kernel = Kernel(store, build(Path(out), reconcile=mode == "reconcile"))
        try:
            store.get_session(session_id)
        except SessionNotFound:
            result = kernel.run_sync(GOAL, session_id=session_id, handle_signals=False)
        else:
            result = kernel.resume_sync(session_id, handle_signals=False)
        return {"completed": 0, "suspended": 3}.get(result.status, 1)
    finally:
        store.close()
