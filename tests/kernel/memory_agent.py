"""The agent of the memory crash tests: turn 1 writes a memory and queries it in the same turn, turn 2
answers. Run as a script (``memory_agent.py DB SESSION``) it runs the session, or resumes it when it
exists, to its end; the test makes that process SIGKILL itself at a named point
(``$FLIGHTLOG_TEST_CRASH_AT``, :mod:`flightlog.testing.crashpoints`)."""

from __future__ import annotations

import sys

from flightlog.errors import SessionNotFound
from flightlog.events import MemoryScope
from flightlog.kernel import Agent, Kernel
from flightlog.kernel.memory import MemoryPolicy
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.store import open_store

SCOPE = MemoryScope(tenant_id="acme", namespace="crash")
FACT = "Deploys happen on Thursdays."


def build() -> Agent:
    """The agent (a fresh script each time: a resumed process answers the same turn the same way)."""
    write = call("memory_write", {"name": "deploy-day", "content": FACT}, id="w")
    query = call("memory_query", {"query": "deploys"}, id="q")
    script = [calls(write, query), reply("done")]
    provider = ScriptedProvider(script, by_turn=True)  # type: ignore[arg-type]
    return Agent(name="mem", route=[provider], memory=MemoryPolicy(scope=SCOPE), max_tokens=200)


def child_main(db: str, session_id: str) -> int:
    """Run or resume ``session_id`` to its end; prints the status."""
    with open_store(db) as store:
        kernel = Kernel(store, build(), notary=None, heartbeat_s=None)
        try:
            store.get_session(session_id)
        except SessionNotFound:
            result = kernel.run_sync("remember deploys", session_id=session_id, handle_signals=False)
        else:
            result = kernel.resume_sync(session_id, handle_signals=False)
    print(result.status, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1], sys.argv[2]))
