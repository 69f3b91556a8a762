"""A child process for the capability crash test: an agent that mounts the test MCP server and calls its
side-effecting ``append_note`` (run: ``python caps_agent.py DB SESSION TMPDIR [TOOL]``; the crash tests
set ``FLIGHTLOG_TEST_CRASH_AT``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent.parent / "src"))

from flightlog.kernel import Agent, Kernel  # noqa: E402
from flightlog.kernel.mcp import McpServer  # noqa: E402
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply  # noqa: E402
from flightlog.store import SqliteStore  # noqa: E402


def build(tmp: Path, *, reconcile: bool = False, tool: str = "append_note") -> Agent:
    """The agent: turn 1 appends a note through the server's ``tool`` (a side effect; ``block`` waits for
    ``TMP/release`` first), turn 2 answers. With ``reconcile``, an in-doubt ``append_note`` is settled by
    reading the notes file."""
    provider = ScriptedProvider(
        [calls(call(f"t__{tool}", {"note": "hello"}, id="c1")), reply("done")], by_turn=True
    )
    env = {
        "NOTES_FILE": str(tmp / "notes.txt"),
        "STARTS_FILE": str(tmp / "starts.txt"),
        "BLOCK_FILE": str(tmp / "block.txt"),
        "RELEASE_FILE": str(tmp / "release"),
    }
    notes = tmp / "notes.txt"

    def noted(intent: dict[str, Any]) -> str | None:
        lines = notes.read_text().splitlines() if notes.exists() else []
        return str(len(lines)) if intent["arguments"]["note"] in lines else None

    server = McpServer(
        id="t",
        command=sys.executable,
        args=[str(HERE / "mcp_server.py")],
        env=env,
        reconcile={"append_note": noted} if reconcile else {},
    )
    return Agent(name="caps-crash", route=[provider], capabilities=[server])


if __name__ == "__main__":
    db, session_id, tmp = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    with SqliteStore(db) as store:
        Kernel(store, build(tmp, tool=sys.argv[4] if len(sys.argv) > 4 else "append_note")).run_sync(
            "note it", session_id=session_id
        )
