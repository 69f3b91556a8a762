"""Which side effects a tool of this process is running now, as this process itself knows it.

The ledger names the process that runs an in-doubt effect (its intent's ``holder``,
:mod:`flightlog.integrity.effects`). When that process is the one resuming the session (another ``Kernel``
of the same process, a parent taking a child over in the process that ran it), being alive says nothing:
:func:`running_here` says whether the effect's tool still runs here. A key counts as running from before
its intent is recorded (:meth:`flightlog.kernel.effects.Effects.run_once`, :func:`claim`) until its tool
ends; a sync tool run in a worker thread (:func:`in_thread`) counts until the thread returns, even when the
task that awaited it was cancelled (a deadline, a cancel: the thread cannot be stopped and runs on).

Other processes of this host see it too (:func:`runs_in`): while a key counts as running, this process
keeps a file descriptor open on an anonymous memory file named after it (Linux ``memfd_create``, name
``flightlog-effect-`` and the key's sha256), which ``/proc/<pid>/fd`` shows to a reader of the same user.
The kernel keeps it (no file on disk, no row in the database: nothing someone who can write the database
or a directory can delete or forge for this process), and it is gone with the process, SIGKILL included,
or once the tool ends. A holder process that lives on after its run stopped with the effect in doubt (its
run fenced off, its deadline hit, cancelled) therefore frees the effect as soon as its tool returns.

Process-wide (all kernels, all stores of this process); thread-safe. Keys are effect keys
(``session:turn:call``); a key that two stores of one process share counts as running in both (a resume
waits, never runs it twice).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from typing import Any, TypeVar, cast

from ..runs.host import pid_exists, proc_is_own

__all__ = [
    "CURRENT_KEY",
    "MARK_PREFIX",
    "claim",
    "in_thread",
    "mark_name",
    "release",
    "running_here",
    "runs_in",
]

T = TypeVar("T")

CURRENT_KEY: ContextVar[str | None] = ContextVar("flightlog_effect_key", default=None)
"""The key of the side effect whose tool or ``reconcile`` runs in this context
(:func:`flightlog.kernel.effects.current_effect_key` reads it)."""

MARK_PREFIX = "flightlog-effect-"
"""How the memory file that marks a running effect is named (module docs), before the key's digest."""

_lock = threading.Lock()
_running: Counter[str] = Counter()
_marks: dict[str, int] = {}  # key -> the descriptor of its memory file, while it counts as running


def mark_name(key: str) -> str:
    """The name of the memory file marking effect ``key`` as running (``MARK_PREFIX`` + sha256 hex)."""
    return MARK_PREFIX + hashlib.sha256(key.encode()).hexdigest()


def runs_in(pid: int, key: str) -> bool | None:
    """Whether process ``pid`` of this host is running the side effect ``key``: True when it holds the
    effect's mark open (module docs), False when it holds none (or no longer exists: ``os.kill(pid, 0)``
    finds no such pid); None when its file descriptors cannot be read while the pid exists (another user's
    process; ``/proc`` mounted ``hidepid=2``, which hides the entry, attack pass atk4 b02; no ``/proc`` of
    this pid namespace, :func:`~flightlog.runs.host.proc_is_own`, b12; not Linux): the caller assumes it
    runs, or judges it another way, never takes it for ended."""
    if pid == os.getpid():
        return running_here(key)
    if not proc_is_own():  # /proc/<pid> would be another namespace's process, or there is none
        return None if pid_exists(pid) else False
    target = f"/memfd:{mark_name(key)} (deleted)"
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except (FileNotFoundError, ProcessLookupError):  # ended; or hidden from this user while it runs
        return None if pid_exists(pid) else False
    except OSError:
        return None
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                return True
        except OSError:  # closed since the listing
            continue
    return False


def running_here(key: str) -> bool:
    """Whether a tool of this process is running the side effect ``key`` now (module docs)."""
    with _lock:
        return _running[key] > 0


async def _to_thread(fn: Callable[..., Any], kwargs: Mapping[str, Any]) -> Any:
    return await asyncio.to_thread(fn, **kwargs)


def claim(key: str) -> None:
    """Count ``key`` as running here (once more); each claim is ended by one :func:`release`. The first
    claim opens the key's mark (module docs; where ``os.memfd_create`` exists).

    Raises:
        OSError: the mark could not be made (e.g. no file descriptor left): nothing is counted, and the
            caller must not run the effect (another process could not see it run).
    """
    with _lock:
        if _running[key] == 0 and hasattr(os, "memfd_create"):
            _marks[key] = os.memfd_create(mark_name(key), os.MFD_CLOEXEC)
        _running[key] += 1


def release(key: str) -> None:
    """End one :func:`claim` of ``key``."""
    with _lock:
        _release(key)


def _release(key: str) -> None:  # with _lock held
    _running[key] -= 1
    if _running[key] <= 0:
        del _running[key]
        mark = _marks.pop(key, None)
        if mark is not None:
            os.close(mark)


async def in_thread(
    fn: Callable[..., T],
    kwargs: Mapping[str, Any],
    *,
    run: Callable[[Callable[..., Any], Mapping[str, Any]], Awaitable[Any]] | None = None,
) -> T:
    """``fn(**kwargs)`` in a worker thread; inside a side effect (:data:`CURRENT_KEY` set) its key counts as
    running until the thread returns, even after the awaiting task is cancelled. A call the executor never
    started (cancelled first) stops counting when the await ends.

    ``run(f, kw)`` runs ``f(**kw)`` in a worker thread (an activation's
    :meth:`flightlog.kernel.holding.Hold.run_in_thread`, which counts its threads too); None:
    ``asyncio.to_thread``.

    Raises:
        BaseException: whatever ``fn`` raises, or the caller's cancellation.
    """
    runner = run if run is not None else _to_thread
    key = CURRENT_KEY.get()
    if key is None:
        return cast(T, await runner(fn, kwargs))
    started, dropped = [False], [False]  # guarded by _lock: which side ends the count

    def body() -> T:
        with _lock:
            if dropped[0]:  # the await gave up before the executor started this call
                raise asyncio.CancelledError
            started[0] = True
        try:
            return fn(**kwargs)
        finally:
            release(key)

    claim(key)  # the caller's claim holds the mark already: this one only counts
    try:
        return cast(T, await runner(body, {}))
    finally:
        with _lock:
            if not started[0]:
                dropped[0] = True
                _release(key)
