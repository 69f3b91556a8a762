"""The ``flightlog demo`` step for milestones and capabilities mounted at run time (issues 14 and 15).

A phased agent on a scripted model (offline, seconds): its first answer is judged and blocked
(``milestone_blocked``), its second passes phase ``plan`` (``milestone_advanced``), which mounts the
capability the phase unlocks (``capability_changed``): with the ``mcp`` extra installed, a real MCP
server over stdio (this module run as ``python -m flightlog.cli.demo_capabilities serve``, started by the
kernel) whose ``words__count`` tool the model then calls; without it, the same tool in Python. Phase
``ship`` then passes and the run completes. ``replay --check`` rebuilds every request, tools included.

``examples/phased_agent.py`` is the same agent for ``flightlog run``.
"""

from __future__ import annotations

import importlib.util
import sys

from rich.console import Console

from ..events import CapabilityChanged, MilestoneAdvanced, MilestoneBlocked, ToolCompleted
from ..kernel import Agent, Kernel, tool
from ..kernel.capabilities import Capability, ToolCapability
from ..kernel.mcp import McpServer
from ..kernel.milestones import JudgeInput, Phase, Verdict
from ..kernel.requests import check_session
from ..kernel.scripted import ScriptedProvider, call, calls, reply
from ..sessions import iter_events
from ..store import Store

__all__ = ["GOAL", "demo_agent", "run_capabilities_demo", "serve"]

GOAL = "count the words of the release note, after a plan"


@tool(effect="read_only", name="words__count")
def count_words(text: str) -> str:
    """Count the words of a text (the Python stand-in for the MCP server's tool).

    Args:
        text: The text.
    """
    return str(len(text.split()))


def planned(given: JudgeInput) -> Verdict:
    """Phase ``plan`` passes when the answer starts with ``PLAN:``."""
    ok = (given.answer or "").startswith("PLAN:")
    return Verdict(ok, () if ok else ("the answer must start with 'PLAN:'",))


def counted(given: JudgeInput) -> Verdict:
    """Phase ``ship`` passes once a word count came back."""
    ok = any(isinstance(e, ToolCompleted) for _s, e in given.state.events)
    return Verdict(ok, () if ok else ("no word count yet",))


def words_capability() -> Capability:
    """The MCP server when the ``mcp`` extra is installed, else the same tool in Python (both locked)."""
    if importlib.util.find_spec("mcp") is None:
        return ToolCapability(count_words)
    args = ["-m", "flightlog.cli.demo_capabilities", "serve"]
    return McpServer(
        id="words", command=sys.executable, args=args, effects={"count": "read_only"}, locked=True
    )


def demo_agent() -> Agent:
    """The phased demo agent (module docs)."""
    provider = ScriptedProvider(
        [
            reply("Let me just count."),
            reply("PLAN: count the words with the words tool."),
            calls(call("words__count", {"text": "flightlog records every step"}, id="c1")),
            reply("The note has 4 words."),
        ],
        by_turn=True,
    )
    capability = words_capability()
    return Agent(
        name="phased",
        route=[provider],
        capabilities=[capability],
        milestones=[
            Phase("plan", judge=planned, criteria=["a plan first"], unlocks=[capability.id]),
            Phase("ship", judge=counted, criteria=["a word count"]),
        ],
    )


def run_capabilities_demo(store: Store, console: Console) -> int:
    """Run the phased agent (module docs) against ``store``; returns 0 when it went as expected."""
    console.print("A phased agent unlocks a tool by passing its milestone (flightlog.cli.demo_capabilities)")
    agent = demo_agent()
    result = Kernel(store, agent).run_sync(GOAL, handle_signals=False)
    sid = result.session_id
    events = [e for _row, e in iter_events(store, sid)]
    for event in events:
        if isinstance(event, MilestoneBlocked):
            console.print(f"  turn {event.turn}: milestone {event.phase_id} blocked ({event.reason})")
        elif isinstance(event, MilestoneAdvanced):
            unlocked = ", ".join(event.capabilities_unlocked) or "nothing more"
            console.print(f"  turn {event.turn}: milestone {event.phase_id} passed, unlocked {unlocked}")
        elif isinstance(event, CapabilityChanged):
            console.print(
                f"  turn {event.turn}: {event.change_kind} {', '.join(event.added or event.removed)}"
                f" (by {event.mounted_by}, {event.mount_reason})"
            )
        elif isinstance(event, ToolCompleted):
            console.print(f"  turn {event.turn}: words__count -> {event.results[0].output}")
    check = check_session(store, sid)
    console.print(
        f"  {result.status}: {result.final_message!r}; replay --check: {check.checked} requests rebuilt"
    )
    console.print(f"  see it: flightlog show {sid}")
    ok = result.status == "completed" and check.ok and any(isinstance(e, ToolCompleted) for e in events)
    return 0 if ok else 1


def serve() -> None:
    """Serve the demo MCP server over stdio (one tool, ``count``)."""
    try:
        from mcp.server.mcpserver import MCPServer as Server
    except ImportError:  # mcp 1.x
        from mcp.server.fastmcp import FastMCP as Server  # type: ignore[no-redef,import-not-found,attr-defined,unused-ignore]

    server = Server("flightlog-demo-words")

    @server.tool()
    def count(text: str) -> str:
        """Count the words of a text."""
        return str(len(text.split()))

    server.run()


if __name__ == "__main__" and sys.argv[1:] == ["serve"]:
    serve()
