"""Helpers for tests that force an interleaving of threads instead of timing one (group commit tests).

Public so a backend outside this package can run the same checks against its own store.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ..store.group import Gate

__all__ = ["in_thread", "until", "until_waiting"]


def in_thread(fn: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    """Start ``fn`` on a new thread; returns the thread and a list that receives its result or exception."""
    out: list[object] = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as exc:  # handed to the test, which asserts on it
            out.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def until(condition: Callable[[], bool], *, timeout_s: float = 60.0, what: str = "the condition") -> None:
    """Block until ``condition()`` is true (checked every millisecond).

    The timeout only bounds a hang: it is generous, so a slow, loaded machine gets there too.

    Raises:
        AssertionError: it was still false after ``timeout_s`` seconds.
    """
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"{what} never held within {timeout_s}s"
        time.sleep(0.001)


def until_waiting(gate: Gate | None, count: int, *, timeout_s: float = 60.0) -> None:
    """Block until ``count`` threads wait to take ``gate``.

    Raises:
        AssertionError: they did not within ``timeout_s`` seconds (or the store has no gate).
    """
    assert gate is not None, "the store has no group-commit gate"
    until(lambda: gate.waiting >= count, timeout_s=timeout_s, what=f"{count} threads queued for the store")
