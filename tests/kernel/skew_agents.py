"""A side-effect agent whose holder runs in a subprocess on "another host" with a skewed wall clock
(``tests/kernel/test_takeover_skew.py``).

Run as ``python -m kernel.skew_agents DB PERFORMED SKEW_MS HEARTBEAT_S`` (``tests`` on ``PYTHONPATH``): the
holder starts session ``s``; its live records and the holder its intents record name :data:`OTHER_HOST`
(its pid is never probed here), and its records are stamped by its wall clock
shifted by ``SKEW_MS`` ms (negative: behind). Its one side-effect call prints ``started`` once its intent is
durable, then waits for a line on stdin before it performs the effect (a line appended to ``PERFORMED``);
the process prints ``ended STATUS`` when its run ends.
"""

from __future__ import annotations

import sys
from pathlib import Path

from flightlog.kernel import Agent, Kernel, current_effect_key, tool
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply

OTHER_HOST = "elsewhere/boot-of-another-machine/4026531836"
"""The ``host`` the holder's live records name: not this machine's, so its pid is never probed here."""


def performed_keys(performed: Path) -> list[str]:
    """The effect keys performed so far, in order (one line each)."""
    return performed.read_text(encoding="utf-8").splitlines() if performed.exists() else []


def publishing_agent(performed: Path, *, hold: bool) -> Agent:
    """One side-effect call ``p1`` of tool ``publish``, then a reply. The effect appends its key to
    ``performed``; ``reconcile`` reports it done when that file holds the key. With ``hold`` the tool
    prints ``started`` and waits for a line on stdin first (the holder process)."""

    def done(intent: object) -> str | None:
        return "published" if current_effect_key() in performed_keys(performed) else None

    @tool(effect="side_effect", reconcile=done)
    def publish(text: str) -> str:
        """Publish ``text`` (the effect: once per call)."""
        if hold:
            print("started", flush=True)
            sys.stdin.readline()
        with performed.open("a", encoding="utf-8") as out:
            out.write(f"{current_effect_key()}\n")
        return "published"

    provider = ScriptedProvider([calls(call("publish", {"text": "t"}, id="p1")), reply("done")], by_turn=True)
    return Agent(name="skew-publisher", route=[provider], tools=[publish])


def hold(db: Path, performed: Path, skew_ms: int, heartbeat_s: float) -> str:
    """Run session ``s`` as the skewed holder of another host (module docs); its result's status."""
    import flightlog.live
    import flightlog.runs.host
    from flightlog.store import SqliteStore

    # its records are written as another host writes them, and its intents name it as a process there
    flightlog.live.host_id = flightlog.runs.host.host_id = lambda: OTHER_HOST
    with SqliteStore(db) as store:
        kernel = Kernel(store, publishing_agent(performed, hold=True), notary=None, heartbeat_s=heartbeat_s)
        kernel.live = flightlog.live.LiveRegistry(store, clock=lambda: flightlog.live.wall_ms() + skew_ms)
        return kernel.run_sync("go", session_id="s", handle_signals=False).status


if __name__ == "__main__":
    status = hold(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
    print(f"ended {status}", flush=True)
