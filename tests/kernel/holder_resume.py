"""A resume of session ``s`` of ``kernel.holder_agents`` run as a process of its own, for the tests whose
resume cannot run inside pytest (as another user under ``/proc`` mounted ``hidepid=2``; inside a pid
namespace without its own ``/proc``: ``tests/kernel/test_takeover_unreadable.py``).

Run as ``python -m kernel.holder_resume DB PERFORMED`` (``tests`` on the path): resumes with the agent of
:func:`kernel.skew_agents.publishing_agent` (its tool performs at once), no notary, a 1 s lease (so a
resume that waits for a live holder gives up after two, ``HolderBusy``), and prints one line: ``resume:
STATUS`` or ``resume raised: ERROR-TYPE MESSAGE``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from flightlog.kernel import Kernel

from .skew_agents import publishing_agent


def resume(db: Path, performed: Path) -> str:
    """Resume session ``s`` (module docs); the line to print."""
    from flightlog.store import SqliteStore

    with SqliteStore(db) as store:
        kernel = Kernel(store, publishing_agent(performed, hold=False), notary=None)
        kernel.lease_ms = 1_000
        try:
            return f"resume: {kernel.resume_sync('s', handle_signals=False).status}"
        except Exception as exc:  # the test reads which error, and its words
            return f"resume raised: {type(exc).__name__} {exc}"


if __name__ == "__main__":
    print(resume(Path(sys.argv[1]), Path(sys.argv[2])), flush=True)
