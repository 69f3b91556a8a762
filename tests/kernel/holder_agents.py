"""A side-effect agent whose holder runs in a subprocess of THIS host under its real pid
(``tests/kernel/test_takeover_holder.py``).

Run as ``python -m kernel.holder_agents DB PERFORMED HEARTBEAT_S [linger]`` (``tests`` on ``PYTHONPATH``;
``HEARTBEAT_S`` a number of seconds or ``none``: ``Kernel(heartbeat_s=None)``, no live record): the holder
starts session ``s`` with the agent of :func:`kernel.skew_agents.publishing_agent`; its one side-effect
call prints ``started`` once its intent is durable, then waits for a line on stdin before it performs the
effect; the process prints ``ended STATUS`` when its run ends (with ``linger``, it then waits for another
line before it exits: a process that lives on after its run). Its log records (a WARNING of its live
registry among them) go to stderr.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from flightlog.kernel import Kernel

from .skew_agents import publishing_agent


def hold(db: Path, performed: Path, heartbeat_s: float | None) -> str:
    """Run session ``s`` as the holder (module docs); its result's status."""
    from flightlog.store import SqliteStore

    with SqliteStore(db) as store:
        kernel = Kernel(store, publishing_agent(performed, hold=True), notary=None, heartbeat_s=heartbeat_s)
        return kernel.run_sync("go", session_id="s", handle_signals=False).status


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s %(message)s")
    beat = None if sys.argv[3] == "none" else float(sys.argv[3])
    try:
        status = hold(Path(sys.argv[1]), Path(sys.argv[2]), beat)
    except Exception as exc:  # e.g. fenced off while its tool ran: its completion refused
        status = type(exc).__name__
    print(f"ended {status}", flush=True)
    if sys.argv[4:] == ["linger"]:
        sys.stdin.readline()
