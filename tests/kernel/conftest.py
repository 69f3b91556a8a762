from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from flightlog.store import SqliteStore

from . import cli_agents


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "kernel.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[SqliteStore]:
    with SqliteStore(db_path) as store:
        yield store


@pytest.fixture
def other_store(db_path: Path, store: SqliteStore) -> Iterator[SqliteStore]:
    """A second handle on the same file: another process resuming."""
    with SqliteStore(db_path) as other:
        yield other


@pytest.fixture
def fresh_notes() -> Iterator[list[str]]:
    """``cli_agents.NOTES`` (what its ``note`` tool wrote), emptied before and after the test; a module of CLI
    tests takes it with ``pytestmark = pytest.mark.usefixtures("fresh_notes")``."""
    cli_agents.NOTES.clear()
    yield cli_agents.NOTES
    cli_agents.NOTES.clear()
