"""Fixtures for the fleet tests: a store per backend (SQLite file, PostgreSQL schema) and an output folder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from flightlog.store import Store, open_store
from postgres.server import backend_url


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store URL on each backend (a fresh SQLite file; a fresh PostgreSQL schema)."""
    with backend_url(request.param, tmp_path / "fleet.db", "fleet") as url:
        yield url


@pytest.fixture
def fleet_store(store_url: str) -> Iterator[Store]:
    with open_store(store_url) as store:
        yield store


@pytest.fixture
def out_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the fleet agent's side effects land (``$FLIGHTLOG_FLEET_OUT``)."""
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setenv("FLIGHTLOG_FLEET_OUT", str(out))
    return out
