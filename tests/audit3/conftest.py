"""Fixtures shared by the audit3 tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from postgres.server import backend_url


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store URL on each backend (a fresh SQLite file; a fresh PostgreSQL schema named after the test
    module)."""
    prefix = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    with backend_url(request.param, tmp_path / "flightlog.db", prefix) as found:
        yield found
