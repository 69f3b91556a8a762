"""A holder and its resume inside one new pid namespace whose ``/proc`` was not remounted (``unshare --pid
--fork`` without ``--mount-proc``): ``/proc/<pid>`` there is the *outer* namespace's process with that
number (attack pass atk4 b12, ``tests/kernel/test_takeover_unreadable.py``).

Run as ``python -m kernel.pidns_holder DIR`` (``tests`` on ``PYTHONPATH``) as the namespace's first
process. It prints ``proc_self_is_getpid BOOL`` (whether ``/proc/self`` names ``os.getpid()``), ``start START`` (this process's start time as its intents record
it), then starts the holder (``kernel.holder_agents``), and once its tool runs, prints the resume's line
(:mod:`kernel.holder_resume`), lets the holder finish and prints ``holder: ENDED`` and ``performed:
KEYS`` (the effect's keys, comma-separated).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from flightlog.runs.host import this_process

from .holder_resume import resume
from .skew_agents import performed_keys


def main(tmp: Path) -> None:
    """The scenario of the module docs, in directory ``tmp``."""
    db, performed = tmp / "s.db", tmp / "performed"
    print(f"proc_self_is_getpid {os.readlink('/proc/self') == str(os.getpid())}", flush=True)
    print(f"start {this_process().start}", flush=True)
    argv = [sys.executable, "-m", "kernel.holder_agents", str(db), str(performed), "0.2"]
    with subprocess.Popen(
        argv, env=os.environ, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as child:
        assert child.stdin is not None and child.stdout is not None
        started = child.stdout.readline()  # the outer test bounds the whole scenario (its own timeout)
        if started != "started\n":
            print(f"holder did not start: {started!r}", flush=True)
            return
        print(resume(db, performed), flush=True)
        child.stdin.write("go\n")
        child.stdin.flush()
        print(f"holder: {child.stdout.readline().strip()}", flush=True)
    print(f"performed: {','.join(performed_keys(performed))}", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
