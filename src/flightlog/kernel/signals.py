"""Running a kernel coroutine from sync code, with SIGINT/SIGTERM turned into clean cancellation.

``run_blocking(factory, cancel)`` runs ``factory()`` in a fresh event loop (``asyncio.run``). On the main
thread it installs loop signal handlers for the duration: SIGINT calls ``cancel(CancellationReason.USER)``
and SIGTERM ``cancel(CancellationReason.HOST_SHUTDOWN)``; the kernel then records
``operation_cancelled`` and returns a ``cancelled`` result, and the run stays resumable. The previous
handlers are restored afterwards. Elsewhere (another thread, a platform without loop signal handlers) the
handlers are skipped.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from ..events import CancellationReason

__all__ = ["SIGNAL_REASONS", "install_signal_handlers", "run_blocking"]

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


def run_blocking(
    factory: Callable[[], Coroutine[Any, Any, T]],
    cancel: Callable[[CancellationReason], None] | None,
) -> T:
    """Run ``factory()`` to completion in a new event loop, with signal handling when ``cancel`` is given."""

    async def main() -> T:
        uninstall = install_signal_handlers(cancel) if cancel is not None else (lambda: None)
        try:
            return await factory()
        finally:
            uninstall()

    return asyncio.run(main())
