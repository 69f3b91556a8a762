"""Where a process id means something: the host id live records and core job runs name their process by, and
the one check of whether a pid of this host still runs.

Below :mod:`flightlog.live` (which re-exports :func:`host_id`) so that :mod:`flightlog.runs.jobs`, a layer
under it, judges a job's liveness by the same rule.
"""

from __future__ import annotations

import functools
import os
import socket
from pathlib import Path

__all__ = ["host_id", "pid_exists"]


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
