"""Processes the kernel starts die with it: a tiny supervisor tied to the kernel's life (Linux).

A kernel killed with ``SIGKILL`` (or crashing) runs no cleanup, so a process it started lives on: an MCP
server over stdio (:mod:`flightlog.kernel.mcp`) would finish the call it was running, after the resume had
already found that call in doubt and a human had decided it (two effects for one call). So on Linux the
kernel starts such a program through this module, run as a program of its own::

    python -I -S tether.py KERNEL_PID PROGRAM [ARG...]

The tether (run with ``-I -S``: stdlib only, no site packages, about 20 ms) asks the Linux kernel to send it
:data:`DEATH_SIGNAL` when its parent dies (``prctl(PR_SET_PDEATHSIG)``), checks that its parent is still
``KERNEL_PID`` (it may have died before the request), then forks the program, which asks for ``SIGKILL`` on
the tether's death and ``exec``\\ s ``PROGRAM`` (looked up on ``PATH`` as ``execvp`` does). The tether closes
its own copies of stdin and stdout (the program has them), waits for the program and exits with its status
(``128 + signal`` when a signal ended it). When the kernel dies it kills the program's whole process group
with ``SIGKILL`` when it leads one (the MCP SDK starts each server in a session of its own, so the server's
own children go too), else the program alone. ``SIGTERM``, ``SIGINT``, ``SIGHUP``, ``SIGUSR1`` and ``SIGUSR2``
do not end the tether early: it keeps waiting for the program, which receives them itself (a process-group
signal), so a client's shutdown grace period still applies to the program, and a signal meant for the program
alone (``pkill -f`` matches the tether's command line too) never takes the program down with the tether.

Limits (documented in docs/guide/kernel.md):

* Linux only (``prctl``); elsewhere :func:`tethered` returns the command unchanged and a program the kernel
  started outlives a killed kernel.
* ``PR_SET_PDEATHSIG`` fires when the *thread* that started the tether exits, not the process: the kernel
  starts MCP servers from its event loop's thread, which outlives every connection of that loop (the
  connections close when the loop's run ends), and :func:`~flightlog.kernel.confine.run_command` starts its
  command from the thread that waits for it. A program started from a thread that then exits dies with it.
* A descendant that leaves the process group (``setsid``, a daemon) escapes, as it escapes the MCP SDK's
  own shutdown (``killpg``).
* A remote MCP server (streamable HTTP) is not the kernel's process: it may still finish a call after the
  kernel died, whatever this module does.

Source: Linux ``prctl(2)`` (``PR_SET_PDEATHSIG``: "the parent ... is considered to be the thread that created
this process"; cleared on ``fork``, kept across ``execve`` of a non-set-user-ID program).
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import sys
from collections.abc import Sequence

__all__ = ["DEATH_SIGNAL", "TETHER", "tethered"]

DEATH_SIGNAL: int = signal.SIGRTMIN + 7 if hasattr(signal, "SIGRTMIN") else signal.SIGUSR1
"""What the tether asks to receive when the kernel dies (caught: it then kills the program): a real-time
signal on Linux, which no server sends its group and ``pkill -USR1 -f server.py`` (whose pattern also
matches the tether's command line) does not send, so a stray signal never kills a healthy program mid-call
(``SIGUSR1`` did: found by the attack2 pass). ``SIGUSR1`` where there is none (the tether is Linux-only)."""

TETHER = os.path.abspath(__file__)
"""This file, run as the tether program."""

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def tethered(argv: Sequence[str], *, cwd: str | None = None, path: str | None = None) -> list[str]:
    """The command line that runs ``argv`` tied to this process's life (module docs).

    The program is looked for first, as ``Popen`` looks for it (a name with a ``/``: from ``cwd``; else on
    ``path``), so that a missing one raises here as it would without the tether (started through it, a
    missing program would only exit 127).

    Args:
        argv: The program and its arguments (``argv[0]`` looked up on ``PATH`` as ``execvp`` does).
        cwd: The directory the command will run in (None: this process's).
        path: The ``PATH`` it will run with (None: this process's, else ``os.defpath``).

    Returns:
        ``[sys.executable, "-I", "-S", TETHER, str(os.getpid()), *argv]`` on Linux; ``argv`` unchanged
        elsewhere, or when there is no interpreter or file to run the tether with (``sys.executable``
        empty, a zipped install).

    Raises:
        ValueError: ``argv`` is empty.
        FileNotFoundError: no such program (errno ``ENOENT``, naming ``argv[0]``).
        PermissionError: ``argv[0]`` names a file that is not executable (errno ``EACCES``).
    """
    if not argv:
        raise ValueError("tethered needs a non-empty argv")
    if not sys.platform.startswith("linux") or not sys.executable or not os.path.isfile(TETHER):
        return list(argv)
    _check_program(argv[0], cwd, os.environ.get("PATH", os.defpath) if path is None else path)
    return [sys.executable, "-I", "-S", TETHER, str(os.getpid()), *argv]


def _check_program(program: str, cwd: str | None, path: str) -> None:
    if os.sep in program:
        where = os.path.join(cwd, program) if cwd else program
        if not os.path.isfile(where):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
        if not os.access(where, os.X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), program)
    elif shutil.which(program, path=path) is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)


def _pdeathsig(sig: int) -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl(PR_SET_PDEATHSIG): {os.strerror(errno)}")


def _kill_program(program: int) -> None:
    if os.getpgrp() == os.getpid():
        os.killpg(0, signal.SIGKILL)  # the program's group: this process and every descendant in it
    os.kill(program, signal.SIGKILL)
    os._exit(128 + signal.SIGKILL)


def _start(argv: list[str]) -> int:
    """Fork the program: it dies with this process, then becomes ``argv``; returns its pid."""
    tether = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    try:
        _pdeathsig(signal.SIGKILL)
        if os.getppid() != tether:  # the tether died before the request
            os._exit(128 + signal.SIGKILL)
        os.execvp(argv[0], argv)
    except OSError as exc:
        print(f"flightlog tether: cannot start {argv[0]!r}: {exc}", file=sys.stderr, flush=True)
    os._exit(127)


def main(args: Sequence[str]) -> int:
    """Run ``KERNEL_PID PROGRAM [ARG...]`` as the module docs say; returns the exit status."""
    if len(args) < 2 or not args[0].isdigit():
        print("usage: tether.py KERNEL_PID PROGRAM [ARG...]", file=sys.stderr)
        return 2
    kernel, argv = int(args[0]), list(args[1:])
    program = 0
    signal.signal(DEATH_SIGNAL, lambda signum, frame: _kill_program(program) if program else os._exit(137))
    _pdeathsig(DEATH_SIGNAL)
    if os.getppid() != kernel:  # the kernel died before the request: start nothing
        return 128 + signal.SIGKILL
    program = _start(argv)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        # the program got it too (its group), or it was meant for the program (`pkill -f` matches this
        # command line too): never end the tether, which would take the program with it; wait for it
        signal.signal(sig, lambda signum, frame: None)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    _, status = os.waitpid(program, 0)
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
