"""Agents for the CLI tests, loaded through specs (``kernel.cli_agents:...`` or this file's path)."""

from __future__ import annotations

from flightlog.kernel import Agent, Policy, Rule, tool
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.providers.base import ProviderError

NOTES: list[str] = []


@tool(effect="side_effect")
def note(text: str) -> str:
    """Write a note."""
    NOTES.append(text)
    return f"noted {text}"


def plain_lookup(key: str) -> str:
    """A plain function; the TOML spec wraps it as a read_only tool."""
    return key.upper()


def make_provider() -> ScriptedProvider:
    """A restart-safe scripted model: look something up, write a note, answer."""
    return ScriptedProvider(
        [
            calls(call("plain_lookup", {"key": "abc"}, id="l1")),
            calls(call("note", {"text": "hello"}, id="n1")),
            reply("noted and done"),
        ],
        by_turn=True,
    )


def approval_agent() -> Agent:
    """Asks before every note."""
    return Agent(
        name="cli-approval",
        route=[make_provider()],
        tools=[note, tool(effect="read_only")(plain_lookup)],
        policy=Policy(rules=(Rule("ask", tool="note", reason="notes need a human"),)),
    )


broken = Agent(
    name="cli-broken", route=[ScriptedProvider([ProviderError("down", retryable=False)], by_turn=True)]
)
not_an_agent = 42
