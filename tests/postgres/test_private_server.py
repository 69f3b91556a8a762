"""The private server :mod:`server` starts when no PostgreSQL answers: a free port read before the server
binds it may be taken meanwhile by another process; the start moves on to a new port instead of failing."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator

import psycopg
import pytest

from . import server


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port another socket holds (bound and listening) for the whole test."""
    with socket.create_server(("127.0.0.1", 0)) as held:
        yield int(held.getsockname()[1])


def _needs_binaries() -> None:
    if server._bindir() is None and os.environ.get("CI", "").lower() != "true":
        pytest.skip("no initdb/pg_ctl on this machine")


@pytest.mark.slow
def test_a_port_taken_before_the_server_binds_it_is_replaced(
    taken_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    _needs_binaries()
    offered = [taken_port, taken_port]  # free when read, taken by the time PostgreSQL binds it: twice
    free = server._free_port
    monkeypatch.setattr(server, "_free_port", lambda: offered.pop(0) if offered else free())
    url = server._start_private()
    assert offered == [] and f":{taken_port}/" not in url
    with psycopg.connect(url, connect_timeout=60) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


@pytest.mark.slow
def test_a_start_that_finds_every_port_taken_says_so(
    taken_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    _needs_binaries()
    monkeypatch.setattr(server, "_free_port", lambda: taken_port)
    with pytest.raises(RuntimeError, match=f"each of {server.PORT_ATTEMPTS} free ports taken"):
        server._start_private()
