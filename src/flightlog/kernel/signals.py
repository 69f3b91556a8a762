"""Running a kernel coroutine from sync code, with SIGINT/SIGTERM turned into clean cancellation.

``run_blocking(factory, cancel)`` runs ``factory()`` in a fresh event loop (``asyncio.run``). On the main
thread it installs loop signal handlers for the duration: SIGINT calls ``cancel(CancellationReason.USER)``
and SIGTERM ``cancel(CancellationReason.HOST_SHUTDOWN)``; the kernel then records
``operation_cancelled`` and returns a ``cancelled`` result, and the run stays resumable. The previous
handlers are restored afterwards. Elsewhere (another thread, a platform without loop signal handlers) the
handlers are skipped.

A sync tool's worker thread cannot be stopped: the wrappers return only once every worker thread the run
started has returned (:func:`~flightlog.kernel.holding.threads_returned`; the run's live record is kept meanwhile, so a resume elsewhere waits:
:mod:`flightlog.kernel.holding`). A second SIGINT/SIGTERM during that wait ends the process at once by the
signal's default action, the effect left in doubt as after a crash.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from ..events import CancellationReason
from .holding import collecting, threads_returned

__all__ = ["SIGNAL_REASONS", "install_exit_handlers", "install_signal_handlers", "run_blocking"]

log = logging.getLogger("flightlog.kernel")

T = TypeVar("T")

SIGNAL_REASONS: tuple[tuple[signal.Signals, CancellationReason], ...] = (
    (signal.SIGINT, CancellationReason.USER),
    (signal.SIGTERM, CancellationReason.HOST_SHUTDOWN),
)
"""Which signal means which ``operation_cancelled.reason``."""


def install_signal_handlers(cancel: Callable[[CancellationReason], None]) -> Callable[[], None]:
    """Route SIGINT/SIGTERM of the running loop to ``cancel(reason)``; returns the uninstaller.

    A no-op (returning a no-op) off the main thread or where the loop cannot handle signals.
    """
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    for sig, reason in SIGNAL_REASONS:
        try:
            loop.add_signal_handler(sig, cancel, reason)
        except (NotImplementedError, RuntimeError, ValueError):
            continue
        installed.append(sig)

    def uninstall() -> None:
        for sig in installed:
            loop.remove_signal_handler(sig)

    return uninstall


def install_exit_handlers() -> Callable[[], None] | None:
    """Make SIGINT/SIGTERM of the running loop end the process at once, by that signal's default action (the
    second signal while :func:`run_blocking` waits for worker threads); returns the uninstaller, or None
    where no handler could be installed (off the main thread, no loop signal handlers).
    """
    if threading.current_thread() is not threading.main_thread():
        return None
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []

    def exit_now(sig: signal.Signals) -> None:
        log.warning("%s again: exiting now; what still ran in a worker thread stays in doubt", sig.name)
        loop.remove_signal_handler(sig)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)

    for sig, _reason in SIGNAL_REASONS:
        try:
            loop.add_signal_handler(sig, exit_now, sig)
        except (NotImplementedError, RuntimeError, ValueError):
            continue
        installed.append(sig)
    if not installed:
        return None

    def uninstall() -> None:
        for sig in installed:
            loop.remove_signal_handler(sig)

    return uninstall


def run_blocking(
    factory: Callable[[], Coroutine[Any, Any, T]],
    cancel: Callable[[CancellationReason], None] | None,
) -> T:
    """Run ``factory()`` to completion in a new event loop, with signal handling when ``cancel`` is given.

    Then, whether ``factory()`` returned or raised, wait in the same loop for the worker threads the
    activations it drove started (:func:`~flightlog.kernel.holding.threads_returned`; a sub-agent's too), so
    the call returns only once they have, on every Python version (``asyncio.run`` would join the loop's
    default executor anyway: with no bound on 3.11, for 300 s on 3.12+, after which the interpreter's exit
    joins the threads). While it waits, with ``cancel`` given and on the main thread, SIGINT/SIGTERM end
    the process at once by the signal's default action: the thread dies with the process, its live record
    names a pid that no longer exists, and a resume settles the effect as after a crash.
    """

    async def main() -> T:
        holds = collecting()
        uninstall = install_signal_handlers(cancel) if cancel is not None else (lambda: None)
        try:
            return await factory()
        finally:
            uninstall()
            if any(h.holding for h in holds):
                restore = install_exit_handlers() if cancel is not None else None
                try:
                    await threads_returned(holds, restore is not None)
                finally:
                    if restore is not None:
                        restore()

    return asyncio.run(main())
