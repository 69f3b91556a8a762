"""PostgreSQL ``LISTEN`` fan-out: one listening connection per store, read by one thread, woken waiters.

Every commit that touches a session sends ``NOTIFY flightlog_events, '<session id>'`` (see
:mod:`flightlog.store.postgres`). A notification reaches a connection once; when several threads of one
process wait on the same store (the dashboard's event streams, ``tail -f`` beside a worker), a single
connection read by whichever waiter holds it would hand each notification to one of them and make the others
queue for the connection. Here one daemon thread reads the connection and counts notifications per session;
every waiter watches the counts, so each sees every commit it cares about, and none waits for another.

Marks are kept per thread and per filter (a session id, or None for any): a notification that arrives
between two calls of one thread wakes its next call at once, as a buffered notification did. Waiters re-read
after every wake-up (spurious ones are allowed), so a thread that never waited before starts with a wake-up.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import psycopg

__all__ = ["Listener"]

log = logging.getLogger("flightlog.store.postgres")

_POLL_S = 0.5
"""How often the reader thread looks up from the connection to notice ``close`` (seconds)."""


class Listener:
    """``LISTEN channel`` on a connection of its own, fanned out to any number of waiting threads.

    Args:
        connect: Opens the dedicated connection (autocommit).
        channel: The channel to ``LISTEN`` on.
        translate: Maps a driver error to the store's error (raised to waiters).
    """

    def __init__(
        self,
        connect: Callable[[], psycopg.Connection[Any]],
        channel: str,
        translate: Callable[[psycopg.Error], Exception],
    ) -> None:
        self._connect = connect
        self._channel = channel
        self._translate = translate
        self._cond = threading.Condition()
        self._counts: dict[str, int] = {}
        self._total = 0
        self._error: Exception | None = None
        self._thread: threading.Thread | None = None
        self._conn: psycopg.Connection[Any] | None = None
        self._closed = False
        self._marks = threading.local()

    def wait(self, timeout_s: float, session_id: str | None) -> bool:
        """Block until a notification for ``session_id`` (any when None) arrives after this thread's last
        call with the same filter, or ``timeout_s`` seconds pass.

        Returns:
            True when woken (at once on this thread's first call, after starting to listen), False on
            timeout.

        Raises:
            StoreError (via ``translate``): the listening connection failed; the next call reconnects.
        """
        marks: dict[str | None, int] = self._marks.__dict__.setdefault("marks", {})
        with self._cond:
            if self._error is not None:
                error, self._error = self._error, None
                raise error
            first = self._thread is None
        if first:
            self._start()
        with self._cond:
            seen = marks.get(session_id)
            current = self._count(session_id)
            if seen is None or first:
                marks[session_id] = current
                return True
            woke = self._cond.wait_for(
                lambda: self._count(session_id) != seen or self._error is not None or self._closed,
                timeout=max(0.0, timeout_s),
            )
            marks[session_id] = self._count(session_id)
            if self._error is not None:
                error, self._error = self._error, None
                raise error
            return bool(woke) and not self._closed

    def close(self) -> None:
        """Stop the reader thread and close the connection (waiters return False)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=2 * _POLL_S + 1)

    def _count(self, session_id: str | None) -> int:
        return self._total if session_id is None else self._counts.get(session_id, 0)

    def _start(self) -> None:
        """Connect and ``LISTEN`` (synchronously: nothing committed after this returns is missed), then
        start the reader thread. Serialised by the condition's lock; a second caller finds it started."""
        with self._cond:
            if self._thread is not None or self._closed:
                return
            try:
                conn = self._connect()
                conn.execute(f"LISTEN {self._channel}")
            except psycopg.Error as exc:
                raise self._translate(exc) from exc
            self._conn = conn
            self._thread = threading.Thread(target=self._read, name="flightlog-pg-listen", daemon=True)
            self._thread.start()

    def _read(self) -> None:
        conn = self._conn
        assert conn is not None
        try:
            while not self._closed:
                for note in conn.notifies(timeout=_POLL_S):
                    with self._cond:
                        self._counts[note.payload] = self._counts.get(note.payload, 0) + 1
                        self._total += 1
                        self._cond.notify_all()
                    if self._closed:
                        break
        except psycopg.Error as exc:
            if not self._closed:
                log.warning("the LISTEN connection failed; waiters will reconnect", exc_info=True)
                with self._cond:
                    self._error = self._translate(exc)
                    self._thread = None  # the next wait reconnects
                    self._cond.notify_all()
        finally:
            conn.close()
