"""Fixtures for the PostgreSQL backend tests: one server per test run, one fresh schema per test.

The server is the machine's when it answers on 127.0.0.1:5432 (or ``$FLIGHTLOG_TEST_PG_URL``), else a
private one started with ``initdb``/``pg_ctl`` (see :mod:`server`). Without any, tests skip, except in CI
(``CI=true``), where they fail with the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from flightlog.store.postgres import PostgresStore

from .server import database_url, fresh_schema, schema_url


@pytest.fixture(scope="session")
def pg_database() -> str:
    """The libpq URL of the test database (the server is found or started once per session)."""
    return database_url()


@pytest.fixture
def pg_url(pg_database: str) -> Iterator[str]:
    """A store URL selecting a fresh, empty schema (dropped after the test)."""
    with fresh_schema() as schema:
        yield schema_url(schema)


@pytest.fixture
def opened_pg() -> Iterator[list[PostgresStore]]:
    """Stores a test opens; all closed at teardown (pools must not leak)."""
    stores: list[PostgresStore] = []
    yield stores
    for store in stores:
        store.close()


@pytest.fixture
def open_pg(pg_url: str, opened_pg: list[PostgresStore]) -> Callable[..., PostgresStore]:
    """``open_pg(read_only=False, **options)``: a new handle on the test's schema, closed at teardown."""

    def _open(*, read_only: bool = False, url: str | None = None, **options: object) -> PostgresStore:
        store = PostgresStore(url or pg_url, read_only=read_only, **options)  # type: ignore[arg-type]
        opened_pg.append(store)
        return store

    return _open


@pytest.fixture
def pg_store(open_pg: Callable[..., PostgresStore]) -> PostgresStore:
    """A fresh, empty, writable store on its own schema."""
    return open_pg()
