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


def noting_agent() -> Agent:
    """Writes its note without asking (a side effect, no reconcile): killed between the note's intent and
    its completion, the call is in doubt."""
    return Agent(
        name="cli-noting", route=[make_provider()], tools=[note, tool(effect="read_only")(plain_lookup)]
    )


@tool(effect="read_only")
def abort_me() -> str:
    """What `flightlog abort` from another terminal does mid-call: fence off every running session of the
    database ``$CLI_AGENTS_DB`` (the run calling this tool is fenced off at its next append)."""
    import os

    from flightlog.kernel import abort
    from flightlog.store import SqliteStore

    with SqliteStore(os.environ["CLI_AGENTS_DB"]) as store:
        for record in store.list_sessions():
            if record.status == "running":
                abort(store, str(record.session_id), requested_by="alice")
    return "aborted"


def aborted_agent() -> Agent:
    """Calls ``abort_me`` on its first turn, so its own run is fenced off mid-call."""
    provider = ScriptedProvider([calls(call("abort_me", {}, id="a1")), reply("never")], by_turn=True)
    return Agent(name="cli-aborted", route=[provider], tools=[abort_me])


broken = Agent(
    name="cli-broken", route=[ScriptedProvider([ProviderError("down", retryable=False)], by_turn=True)]
)
not_an_agent = 42


def raising_factory() -> Agent:
    """A factory with a mistake in it, as ``subagent(role="helper")`` raises (a bad agent spec)."""
    raise ValueError("sub-agent role must be one of explore, plan, implement, verify, custom, not 'helper'")


@tool(effect="side_effect")
def charge(amount: int) -> str:
    """Charge a card: an external effect, one line appended to the file ``$CLI_AGENTS_CHARGES``. With
    ``$CLI_AGENTS_HOLD`` set it then prints ``CHARGED <amount>`` and waits on stdin for ever (the test
    SIGKILLs the process once it reads the line: the effect happened, its completion is not recorded)."""
    import os
    import sys

    with open(os.environ["CLI_AGENTS_CHARGES"], "a") as fh:
        fh.write(f"charge {amount}\n")
        fh.flush()
        os.fsync(fh.fileno())
    if os.environ.get("CLI_AGENTS_HOLD"):
        print(f"CHARGED {amount}", flush=True)
        sys.stdin.read()  # never returns: stdin stays open until the SIGKILL
    return f"charged {amount}"


def charging_agent() -> Agent:
    """Charges 5 once (a side effect without reconcile), then answers."""
    provider = ScriptedProvider(
        [calls(call("charge", {"amount": 5}, id="c1")), reply("charged")], by_turn=True
    )
    return Agent(name="cli-charging", route=[provider], tools=[charge])


def tree_worker() -> Agent:
    """The run tree's grandchild (:func:`tree_agent`): asks before its note ``n1`` (the tree then waits),
    then delegates to ``leaf`` (refused: depth 3 is beyond the root's bound of 2), then answers."""
    from flightlog.kernel.subagents import subagent

    leaf = Agent(name="leaf", route=[ScriptedProvider([reply("leaf done")], by_turn=True)], tools=[])
    script = [
        calls(call("note", {"text": "deep"}, id="n1")),
        calls(call("leaf", {"task": "go deeper"}, id="l1")),
        reply("worker done"),
    ]
    return Agent(
        name="worker",
        route=[ScriptedProvider(script, by_turn=True)],
        tools=[note, subagent(leaf)],
        policy=Policy(rules=(Rule("ask", tool="note", reason="notes need a human"),)),
    )


def tree_agent() -> Agent:
    """A run tree three deep under ``max_spawn_depth=2``: this root delegates to ``lead`` (depth 1), which
    delegates to ``worker`` (depth 2, :func:`tree_worker`)."""
    from flightlog.kernel.subagents import subagent

    lead = Agent(
        name="lead",
        route=[
            ScriptedProvider(
                [calls(call("worker", {"task": "work"}, id="w1")), reply("lead done")], by_turn=True
            )
        ],
        tools=[note, subagent(tree_worker())],
    )
    root = ScriptedProvider(
        [calls(call("lead", {"task": "lead"}, id="d1")), reply("root done")], by_turn=True
    )
    return Agent(name="tree-root", route=[root], tools=[note, subagent(lead)], max_spawn_depth=2)
