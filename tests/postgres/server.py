"""A PostgreSQL server for the tests: the machine's when it answers, else a throwaway one started here.

Order of preference:

1. ``$FLIGHTLOG_TEST_PG_URL`` (any libpq URL; must answer).
2. The machine's server on ``127.0.0.1:5432`` (trust auth, user ``postgres``), when it answers.
3. A private server: ``initdb`` + ``pg_ctl`` from ``/usr/lib/postgresql/*/bin`` in a temporary folder, on a
   free loopback port (another one when something took it before the server bound it), run as the
   ``postgres`` user when we are root (PostgreSQL refuses to run as root), stopped when the test process
   exits.

With none of these, tests skip with the reason, except in CI (``CI=true``), where they fail: the
Postgres backend must be exercised there. Tests use a database ``flightlog_test`` (created once) and
isolate each test in a fresh schema (:func:`fresh_schema`).
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

__all__ = ["blocked_by", "database_url", "fresh_schema", "schema_url", "server_url"]

DATABASE = "flightlog_test"

_cache: dict[str, str] = {}


def _answers(url: str) -> bool:
    try:
        with psycopg.connect(url, connect_timeout=3, autocommit=True) as conn:
            conn.execute("SELECT 1")
        return True
    except psycopg.Error:
        return False


def _free_port() -> int:
    """A loopback port nothing is bound to now (port 0 bound and read, then closed: not reserved)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _bindir() -> Path | None:
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if Path(candidate, "pg_ctl").exists() and Path(candidate, "initdb").exists():
            return Path(candidate)
    found = shutil.which("pg_ctl")
    return Path(found).parent if found and shutil.which("initdb") else None


def _as_postgres(argv: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return argv
    return ["runuser", "-u", "postgres", "--", *argv]


def _start_private() -> str:
    bindir = _bindir()
    if bindir is None:
        raise RuntimeError("no PostgreSQL answers and no initdb/pg_ctl found (apt-get install postgresql)")
    root = Path(tempfile.mkdtemp(prefix="flightlog-pg-"))
    data = root / "data"
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    env = {**os.environ, "LC_ALL": "C.UTF-8"}
    subprocess.run(
        _as_postgres(
            [str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8"]
        ),
        check=True,
        capture_output=True,
        env=env,
    )

    def stop() -> None:
        subprocess.run(
            _as_postgres([str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]),
            capture_output=True,
            check=False,
        )
        shutil.rmtree(root, ignore_errors=True)

    atexit.register(stop)  # before the start: a start that fails late may leave a server running
    port = _start_on_a_free_port(bindir, data, root, env)
    return f"postgresql://postgres@127.0.0.1:{port}/postgres"


PORT_ATTEMPTS = 5
"""Free ports :func:`_start_on_a_free_port` tries before it gives up."""


def _start_on_a_free_port(bindir: Path, data: Path, root: Path, env: dict[str, str]) -> int:
    """Start the server in ``data`` on a free loopback port; returns the port. A port is free when
    :func:`_free_port` reads it, but PostgreSQL binds it itself later, so another process may take it in
    between: a start that fails with the port in use is retried on a new port (``PORT_ATTEMPTS`` in all);
    any other failure raises at once with the server's log.

    Raises:
        RuntimeError: the server did not start (its log and ``pg_ctl``'s output in the message).
    """
    for attempt in range(1, PORT_ATTEMPTS + 1):
        port = _free_port()
        log = root / f"log.{attempt}"
        options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        started = subprocess.run(
            _as_postgres(
                [str(bindir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(log), "-w", "start"]
            ),
            capture_output=True,
            env=env,
            check=False,
        )
        if started.returncode == 0:
            return port
        said = log.read_text(errors="replace") if log.exists() else ""
        if "Address already in use" not in said:
            output = (started.stdout + started.stderr).decode(errors="replace")
            raise RuntimeError(
                f"pg_ctl start on port {port} exited {started.returncode}: {output[-500:]}; {log}: {said[-1000:]}"
            )
    raise RuntimeError(f"PostgreSQL found each of {PORT_ATTEMPTS} free ports taken when it bound it ({root})")


def server_url() -> str:
    """A libpq URL of a server that answers (cached per process); skips or fails (CI) when there is none."""
    if "server" in _cache:
        return _cache["server"]
    candidates = [
        os.environ.get("FLIGHTLOG_TEST_PG_URL", ""),
        "postgresql://postgres@127.0.0.1:5432/postgres",
    ]
    url = next((c for c in candidates if c and _answers(c)), None)
    if url is None:
        try:
            url = _start_private()
        except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
            detail = getattr(exc, "stderr", b"") or b""
            reason = f"PostgreSQL tests need a server: {exc} {detail.decode(errors='replace')[-500:]}".strip()
            if os.environ.get("CI", "").lower() == "true":
                pytest.fail(reason, pytrace=False)
            pytest.skip(reason)
    _cache["server"] = url
    return url


def database_url() -> str:
    """The URL of the ``flightlog_test`` database on :func:`server_url` (created on first use)."""
    if "database" in _cache:
        return _cache["database"]
    server = server_url()
    with psycopg.connect(server, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone()
        if not exists:
            with contextlib.suppress(psycopg.errors.DuplicateDatabase):
                conn.execute(f"CREATE DATABASE {DATABASE}")
    base, _, _ = server.rpartition("/")
    _cache["database"] = f"{base}/{DATABASE}"
    return _cache["database"]


def schema_url(schema: str) -> str:
    """The test database URL selecting ``schema`` (flightlog's ``?schema=`` parameter)."""
    return f"{database_url()}?schema={schema}"


@contextlib.contextmanager
def fresh_schema(prefix: str = "t") -> Iterator[str]:
    """A new, empty schema name in the test database; dropped (with everything in it) afterwards."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    try:
        yield name
    finally:
        with psycopg.connect(database_url(), autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


@contextlib.contextmanager
def backend_url(backend: str, sqlite_file: Path, prefix: str = "t") -> Iterator[str]:
    """A store URL on ``backend``: ``sqlite`` (``sqlite_file``) or ``postgres`` (a fresh schema of the
    test database named ``prefix_...``, dropped afterwards)."""
    if backend == "sqlite":
        yield str(sqlite_file)
        return
    database_url()
    with fresh_schema(prefix) as schema:
        yield schema_url(schema)


def blocked_by(backend_pid: int, *, timeout_s: float = 60.0) -> list[int]:
    """Wait until some backend is blocked by ``backend_pid`` (waits on a lock it holds: PostgreSQL's
    ``pg_blocking_pids``); returns the blocked backends' pids.

    The state a test needs ("the rival is waiting on the row lock now"), read from the server instead of
    assumed after a sleep.

    Raises:
        AssertionError: nothing was blocked by it within ``timeout_s`` seconds.
    """
    deadline = time.monotonic() + timeout_s
    with psycopg.connect(database_url(), autocommit=True) as conn:
        while True:
            rows = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))", (backend_pid,)
            ).fetchall()
            if rows:
                return [int(row[0]) for row in rows]
            assert time.monotonic() < deadline, f"no backend waited on a lock of {backend_pid}"
            time.sleep(0.01)
