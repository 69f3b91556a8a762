"""A holder process for tests/kernel/test_hold.py: ``python hold_agent.py DB PERFORMED MODE``.

It runs session ``s`` with one sync side-effect tool, ``publish``, in a worker thread: the tool prints
``started`` on stdout once its intent is durable, waits for a line on stdin (the test decides when it goes
on), then appends its effect key to PERFORMED (the effect). Its reconciler says done iff PERFORMED holds the
key. MODE ``signals``: ``run_sync`` with its SIGINT/SIGTERM handling (as ``flightlog run``); ``deadline``: a
wall-clock budget that runs out while the tool waits, a short ``effect_grace_s``, no signal handling. The
process prints ``ended <status>`` when ``run_sync`` returns.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from flightlog.kernel import Agent, Budgets, Kernel, current_effect_key, tool
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.store import SqliteStore


def performed_keys(performed: Path) -> list[str]:
    """The effect keys the tool performed, in order."""
    return performed.read_text(encoding="utf-8").splitlines() if performed.exists() else []


def publisher(performed: Path, *, hold: bool) -> Agent:
    """The agent: one ``publish`` call, then a reply. ``hold``: the tool waits for a stdin line first."""

    def done(intent: object) -> str | None:
        return "published" if current_effect_key() in performed_keys(performed) else None

    @tool(effect="side_effect", reconcile=done)
    def publish(text: str) -> str:
        """Publish ``text`` (the effect: one line in PERFORMED)."""
        if hold:
            print("started", flush=True)
            sys.stdin.readline()
        with performed.open("a", encoding="utf-8") as out:
            out.write(f"{current_effect_key()}\n")
        return "published"

    provider = ScriptedProvider([calls(call("publish", {"text": "t"}, id="p1")), reply("done")], by_turn=True)
    return Agent(name="hold-publisher", route=[provider], tools=[publish])


def main(db: Path, performed: Path, mode: str) -> None:
    agent = publisher(performed, hold=True)
    if mode == "deadline":
        agent = dataclasses.replace(agent, budgets=Budgets(wall_clock_ms=300))
    with SqliteStore(db) as store:
        kernel = Kernel(store, agent, notary=None, heartbeat_s=0.2)
        kernel.effect_grace_s = 0.05
        result = kernel.run_sync("go", session_id="s", handle_signals=mode == "signals")
        print(f"ended {result.status}", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3])
