"""Serving the dashboard with uvicorn: in the foreground (``flightlog ui``) or on a background thread.

The listening socket is bound before uvicorn starts, so port 0 (any free port) works and :attr:`url` is
known up front. Stopping first ends every live stream (they would otherwise hold the graceful shutdown
open), then asks uvicorn to exit and waits for it.
"""

from __future__ import annotations

import socket
import threading
import time
from types import FrameType, TracebackType
from typing import Self

import uvicorn
from fastapi import FastAPI

from .app import stop_streams

__all__ = ["DashboardServer", "bind", "url_host"]


_BACKLOG = 2048
"""Pending connections the kernel queues before the server accepts them (uvicorn's default backlog)."""


def bind(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (port 0: any free port) and listening: from the moment it
    returns, the kernel accepts connections into its backlog (:data:`_BACKLOG`), and the server answers
    them once it runs. So a URL printed after ``bind`` can be used at once.

    Raises:
        OSError: the address is in use or cannot be bound.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(_BACKLOG)
        sock.set_inheritable(True)
    except BaseException:
        sock.close()
        raise
    return sock


def url_host(host: str) -> str:
    """How ``host`` appears in a URL: a wildcard becomes 127.0.0.1, an IPv6 address gets brackets."""
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


class _Server(uvicorn.Server):
    """uvicorn's server, ending the dashboard's live streams as soon as an exit is asked for."""

    def __init__(self, config: uvicorn.Config, app: FastAPI) -> None:
        super().__init__(config)
        self._dashboard = app

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        stop_streams(self._dashboard)
        super().handle_exit(sig, frame)


class DashboardServer:
    """The dashboard on a bound socket.

    Args:
        app: The app (:func:`flightlog.web.app.create_app`).
        host: Address to listen on.
        port: Port (0: any free port; see :attr:`port`).
        log_level: uvicorn's log level.
        configure_logging: Let uvicorn install its logging configuration (the CLI does; embedders and
            tests keep their own).

    Use as a context manager (or :meth:`start`/:meth:`stop`) to serve on a background thread, or call
    :meth:`run` to serve in the foreground until Ctrl-C.
    """

    def __init__(
        self,
        app: FastAPI,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        log_level: str = "warning",
        configure_logging: bool = False,
    ) -> None:
        self.app = app
        self.host = host
        self._socket = bind(host, port)
        self.port: int = self._socket.getsockname()[1]
        extra = {} if configure_logging else {"log_config": None}
        config = uvicorn.Config(
            app,
            log_level=log_level,
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=3,
            server_header=False,
            **extra,  # type: ignore[arg-type]
        )
        self.server = _Server(config, app)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The base URL (no token): ``http://host:port``."""
        return f"http://{url_host(self.host)}:{self.port}"

    def run(self) -> None:
        """Serve in this thread until Ctrl-C / SIGTERM (or :meth:`stop` from another thread)."""
        try:
            self.server.run(sockets=[self._socket])
        finally:
            self._socket.close()

    def start(self, timeout_s: float = 15.0) -> str:
        """Serve on a daemon thread; returns :attr:`url` once requests are accepted.

        Raises:
            RuntimeError: the server did not start within ``timeout_s``.
        """
        self._thread = threading.Thread(target=self.run, name="flightlog-ui", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the dashboard server did not start")
            time.sleep(0.02)
        return self.url

    def stop(self, timeout_s: float = 15.0) -> None:
        """End the live streams, ask uvicorn to exit and wait for the thread (idempotent)."""
        stop_streams(self.app)
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None
        self._socket.close()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
