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

__all__ = [
    "ProcessId",
    "host_id",
    "pid_exists",
    "proc_is_own",
    "process_alive",
    "process_start",
    "this_process",
]


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


def proc_is_own() -> bool:
    """Whether ``/proc`` shows this process's pid namespace: ``/proc/self`` links to ``os.getpid()``.

    False when there is no ``/proc`` (not Linux) or it belongs to another pid namespace (a process started
    by ``unshare --pid --fork`` without ``--mount-proc``, a sandbox that did not remount it: ``/proc/<pid>``
    is then the *outer* namespace's process with that number, attack pass atk4 b12). Read at every call: a
    fork or an ``unshare`` changes the answer."""
    try:
        return os.readlink("/proc/self") == str(os.getpid())
    except OSError:
        return False


def process_start(pid: int) -> int | None:
    """When process ``pid`` of this host started: field 22 (``starttime``, clock ticks since boot) of
    ``/proc/<pid>/stat`` (proc(5)); None when it cannot be read (no such process, not Linux, ``/proc``
    hidden, ``/proc`` of another pid namespace: :func:`proc_is_own`) or the process is a zombie (state
    ``Z``/``X``: it has ended, only its exit status is left).

    Fields are counted after the last ``)``: the command name (field 2) may hold spaces and parentheses."""
    if not proc_is_own():
        return None
    stat = _stat_fields(pid)
    return None if stat is None or stat[0] in ("Z", "X") else int(stat[19])


def _stat_fields(pid: int) -> list[str] | None:
    """Fields 3 (state) onwards of ``/proc/<pid>/stat``, None when it cannot be read or is malformed."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = text[text.rfind(")") + 1 :].split()
    return fields if len(fields) >= 20 and fields[19].isdigit() else None


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
        """The identity :meth:`to_wire` wrote, or None when ``value`` is not one (:meth:`wire_problem`)."""
        if cls.wire_problem(value) is not None:
            return None
        assert isinstance(value, dict)
        return cls(value["host"], value["pid"], value.get("start"))

    @staticmethod
    def wire_problem(value: object) -> str | None:
        """What makes ``value`` not an identity :meth:`to_wire` wrote, naming the member (``host`` not a
        string; ``pid`` missing, a bool or negative; ``start`` neither absent, null nor a non-negative
        int; a member :meth:`to_wire` never writes), or None when it is one."""
        if not isinstance(value, dict):
            return f"not an object but {type(value).__name__}"
        extra = sorted(str(k) for k in value if k not in ("host", "pid", "start"))
        if extra:
            return f"unknown member(s) {', '.join(extra)}"
        if not isinstance(value.get("host"), str):
            return "host is not a string"
        if _count(value.get("pid")) is None:
            return "pid is not a non-negative integer"
        start = value.get("start")  # absent: unknown, as null
        if start is not None and _count(start) is None:
            return "start is neither null nor a non-negative integer"
        return None


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
        exists (``os.kill(pid, 0)``, :func:`pid_exists`) and a start time is unknown (``process.start``
        None) or cannot be read (no ``/proc`` of this pid namespace, :func:`proc_is_own`; the process's
        ``/proc/<pid>/stat`` unreadable, e.g. ``/proc`` mounted ``hidepid=2`` and the process another
        user's, attack pass atk4 b02), so a process reusing the pid cannot be told apart. Else True when a
        process with its pid and start time runs (stopped, e.g. by SIGSTOP, counts: it resumes where it
        was), False when none does (the pid is free, a zombie, or now another process's).
    """
    if process.host != host_id():
        return None
    if process.start is None or not proc_is_own():
        return None if pid_exists(process.pid) else False
    stat = _stat_fields(process.pid)
    if stat is None:  # no such process; or its entry is hidden from this user: unknown while the pid exists
        return None if pid_exists(process.pid) else False
    return stat[0] not in ("Z", "X") and int(stat[19]) == process.start
