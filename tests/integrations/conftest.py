"""Fixtures shared by the integration tests: a SQLite ledger file and a store open on it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import flightlog
from flightlog.store.base import Store


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """The path of a new SQLite ledger file."""
    return tmp_path / "lg.db"


@pytest.fixture
def store(db: Path) -> Iterator[Store]:
    """A store open on :func:`db`, closed after the test."""
    s = flightlog.open_store(str(db))
    yield s
    s.close()
