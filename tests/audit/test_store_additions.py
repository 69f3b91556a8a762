"""The store additions behind signed checkpoints: ledger id, frontiers, latest checkpoint (SQLite)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from flightlog.errors import ReadOnlyStore, StoreError
from flightlog.store import SessionRecord, SqliteStore
from flightlog.store.base import Store
from flightlog.store.sqlite import MIGRATIONS

from .conftest import tamper


def test_ledger_id_is_random_per_database_and_stable(
    tmp_path: Path, store: SqliteStore, open_db: Callable[..., SqliteStore]
) -> None:
    ledger = store.ledger_id()
    assert re.fullmatch(r"[0-9a-f]{32}", ledger)
    assert open_db().ledger_id() == ledger
    assert open_db(read_only=True).ledger_id() == ledger
    assert open_db(tmp_path / "other.db").ledger_id() != ledger
    assert any("ledger id" in description for description, _ in MIGRATIONS)


def test_ledger_id_missing_is_a_store_error(db_path: Path, store: SqliteStore) -> None:
    tamper(db_path, "DELETE FROM ledger_meta")
    with pytest.raises(StoreError, match="no ledger id"):
        store.ledger_id()


def test_frontiers_and_latest_checkpoint(store: SqliteStore, open_db: Callable[..., SqliteStore]) -> None:
    store.create_session(SessionRecord("s-1"))
    assert store.latest_checkpoint("s-1") is None
    ids = [store.record_checkpoint("s-1", size, f"{size:02x}" * 32, f"body-{size}") for size in (4, 8, 12)]
    store.record_checkpoint("s-2", 99, "ff" * 32, "other")
    store.record_checkpoint_frontier(ids[1], b"\x01" * 32)
    assert store.checkpoint_frontier(ids[1]) == b"\x01" * 32
    assert store.checkpoint_frontier(ids[0]) is None
    latest = store.latest_checkpoint("s-1")
    assert latest is not None and (latest.size, latest.body) == (12, "body-12")
    at = store.latest_checkpoint("s-1", max_size=11)
    assert at is not None and at.size == 8
    assert store.latest_checkpoint("s-1", max_size=3) is None
    read_only = open_db(read_only=True)
    with pytest.raises(ReadOnlyStore):
        read_only.record_checkpoint_frontier(ids[0], b"\x02" * 32)


def test_base_defaults_for_other_backends(store: SqliteStore) -> None:
    """A backend that does not override the new methods still works (cheap resume then falls back)."""
    store.create_session(SessionRecord("s-1"))
    store.record_checkpoint("s-1", 3, "aa" * 32, "three")
    store.record_checkpoint("s-1", 5, "bb" * 32, "five")
    latest = Store.latest_checkpoint(store, "s-1", max_size=4)
    assert latest is not None and latest.size == 3
    assert Store.checkpoint_frontier(store, 1) is None
    assert Store.record_checkpoint_frontier(store, 1, b"") is None
    # ledger id, index log, cosignatures and salted artifacts are required: a backend without them fails
    # at construction, not mid-run (STYLE.md d)
    assert {
        "ledger_id",
        "append_index_leaf",
        "record_cosignature",
        "put_salted_artifact",
    } <= Store.__abstractmethods__
