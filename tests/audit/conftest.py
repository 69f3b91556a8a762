"""Shared fixtures for the audit tests: keys, retained heads and key manifests live in ``tmp_path``.

Every test runs with ``$FLIGHTLOG_KEY_DIR`` and ``$FLIGHTLOG_HEAD_DIR`` pointing into its own temporary
directory and ``$FLIGHTLOG_LOG_KEY`` unset, so nothing touches the user's config or state directories.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from flightlog.events import Custom
from flightlog.integrity.heads import HeadStore
from flightlog.integrity.keys import ENV_KEY, ENV_KEY_DIR, LogSigner
from flightlog.integrity.notary import Notary
from flightlog.store import SqliteStore

SID = "sess-1"


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_KEY_DIR, str(tmp_path / "keys"))
    monkeypatch.setenv("FLIGHTLOG_HEAD_DIR", str(tmp_path / "heads"))
    monkeypatch.delenv(ENV_KEY, raising=False)


@pytest.fixture
def signer() -> LogSigner:
    return LogSigner.generate("test.example/log")


@pytest.fixture
def heads(tmp_path: Path) -> HeadStore:
    return HeadStore(tmp_path / "heads")


@pytest.fixture
def notary(signer: LogSigner, heads: HeadStore) -> Notary:
    return Notary.for_signer(signer, heads, every=4)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "flightlog.db"


@pytest.fixture
def opened() -> Iterator[list[SqliteStore]]:
    """Stores a test opens; all closed at teardown (an unclosed sqlite handle fails the run)."""
    stores: list[SqliteStore] = []
    yield stores
    for store in stores:
        store.close()


@pytest.fixture
def open_db(db_path: Path, opened: list[SqliteStore]) -> Callable[..., SqliteStore]:
    def _open(path: Path | None = None, **kwargs: object) -> SqliteStore:
        store = SqliteStore(path or db_path, **kwargs)  # type: ignore[arg-type]
        opened.append(store)
        return store

    return _open


@pytest.fixture
def store(open_db: Callable[..., SqliteStore]) -> SqliteStore:
    return open_db()


def step(i: int) -> Custom:
    return Custom(custom_kind="step", payload={"i": i, "text": f"step {i}"})


def tamper(db_path: Path, *statements: str) -> None:
    """Edit the file behind flightlog's back (append-only triggers dropped first)."""
    raw = sqlite3.connect(db_path)
    try:
        raw.execute("DROP TRIGGER IF EXISTS events_no_update")
        raw.execute("DROP TRIGGER IF EXISTS events_no_delete")
        for statement in statements:
            raw.execute(statement)
        raw.commit()
    finally:
        raw.close()
