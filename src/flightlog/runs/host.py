"""Where a process id means something: the host id live records and core job runs name their process by, the
one check of whether a pid of this host still runs, and a process's identity (:class:`ProcessId`: host, pid,
start time), which tells a process from a later one that reuses its pid.

Below :mod:`flightlog.live` (which re-exports :func:`host_id`) so that :mod:`flightlog.runs.jobs`, a layer
under it, judges a job's liveness by the same rule.
"""

from __future__ import annotations

import functools
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["ProcessId", "host_id", "pid_exists", "process_alive", "process_start", "this_process"]


@functools.cache
def host_id() -> str:
    """Where this process's pid means something, as a live record's ``host`` names it.

    On Linux ``hostname/boot_id/pid-namespace`` (``/proc/sys/kernel/random/boot_id``, the inode number of
    ``/proc/self/ns/pid``); elsewhere, or when ``/proc`` cannot be read, the host name alone
    (``socket.gethostname()``). Not the host name alone: a pid names a process of one pid namespace during
    one boot, and two containers sharing a host name (host networking) have separate pid spaces, as have
    two VMs cloned with the same name; a reader that took such a holder for one of its own host would probe
    a pid of its own space and could find a live holder crashed. Not ``/etc/machine-id`` either: images copy
    it into every container made from them, and it outlives a reboot, which ends every pid. The host name
    leads so a person reading the row sees the machine.

    Returns:
        A string; equal for two processes when a pid check by one is true of the other's pids.
    """
    name = socket.gethostname()
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
        namespace = os.readlink("/proc/self/ns/pid")  # "pid:[4026531836]"
    except OSError:  # not Linux, or /proc hidden: the host name is what is known of this pid space
        return name
    return f"{name}/{boot}/{namespace.removeprefix('pid:[').removesuffix(']')}"


def pid_exists(pid: int) -> bool:
    """Whether a process with id ``pid`` exists on this host (:func:`host_id`): ``os.kill(pid, 0)``, which
    sends nothing; this process's own pid is alive, one owned by another user exists (``PermissionError``),
    and a pid the platform rejects (an ``OSError``, e.g. out of range) is none."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)  # signal 0: an existence check, nothing is sent
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    except OSError:  # e.g. a pid out of range for this platform
        return False
    return True


def process_start(pid: int) -> int | None:
    """When process ``pid`` of this host started: field 22 (``starttime``, clock ticks since boot) of
    ``/proc/<pid>/stat`` (proc(5)); None when it cannot be read (no such process, not Linux, ``/proc``
    hidden) or the process is a zombie (state ``Z``/``X``: it has ended, only its exit status is left).

    Fields are counted after the last ``)``: the command name (field 2) may hold spaces and parentheses."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = text[text.rfind(")") + 1 :].split()  # fields 3 (state) onwards
    if len(fields) < 20 or fields[0] in ("Z", "X") or not fields[19].isdigit():
        return None
    return int(fields[19])


@dataclass(frozen=True)
class ProcessId:
    """A process, told apart from a later one that reuses its pid: where its pid means something
    (:func:`host_id`), the pid, and its start time (:func:`process_start`; None where it is unavailable).

    Two equal identities of one host name the same process when ``start`` is known: a pid is reused only
    after its process has ended, and the new process starts later.
    """

    host: str
    pid: int
    start: int | None

    def to_wire(self) -> dict[str, Any]:
        """``{"host": str, "pid": int, "start": int | None}``, as a ledger records it."""
        return {"host": self.host, "pid": self.pid, "start": self.start}

    @classmethod
    def from_wire(cls, value: object) -> ProcessId | None:
        """The identity :meth:`to_wire` wrote, or None when ``value`` is not one (another shape, a bool
        where an int belongs, a negative pid or start)."""
        if not isinstance(value, dict):
            return None
        host, pid, start = value.get("host"), _count(value.get("pid")), value.get("start")
        if not isinstance(host, str) or pid is None or (start is not None and _count(start) is None):
            return None
        return cls(host, pid, _count(start))


def _count(value: object) -> int | None:
    """``value`` when it is a non-negative int (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def this_process() -> ProcessId:
    """This process's identity (:class:`ProcessId`; its start time read now, so a forked child names its own)."""
    pid = os.getpid()
    return ProcessId(host_id(), pid, process_start(pid))


def process_alive(process: ProcessId) -> bool | None:
    """Whether ``process`` still runs, as this host can tell.

    Returns:
        None when it cannot be told: ``process`` is another host's (its pid means nothing here), or its pid
        exists and a start time (``process.start`` or the running process's) is unknown, so a process
        reusing the pid cannot be told apart. Else True when a process with its pid and start time runs
        (stopped, e.g. by SIGSTOP, counts: it resumes where it was), False when none does (the pid is free,
        a zombie, or now another process's).
    """
    if process.host != host_id():
        return None
    if process.start is None:
        return None if pid_exists(process.pid) else False
    start = process_start(process.pid)
    if start is None:  # no such process, or a zombie; unless /proc cannot be read here at all
        return None if not Path("/proc/self/stat").exists() and pid_exists(process.pid) else False
    return start == process.start
