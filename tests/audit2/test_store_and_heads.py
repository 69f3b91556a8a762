"""Store additions (index log, cosignatures, salted artifacts) and the retained index head."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from flightlog.errors import AppendConflict, ArtifactIntegrityError
from flightlog.integrity.checkpoints import Checkpoint
from flightlog.integrity.heads import HeadStore
from flightlog.integrity.indexlog import index_origin
from flightlog.integrity.notary import Notary
from flightlog.integrity.notes import NoteError
from flightlog.salted import SALT_BYTES, salted_digest
from flightlog.store import SqliteStore, rows
from flightlog.store.base import CosignatureRecord, ErasureRecord
from flightlog.store.sqlite import MIGRATIONS

from .conftest import record


def test_index_leaves_are_append_only_and_dense(store: SqliteStore, db_path: Path) -> None:
    store.append_index_leaf(0, "s", 1, b"a\n")
    with pytest.raises(AppendConflict):
        store.append_index_leaf(0, "s", 1, b"b\n")
    with pytest.raises(AppendConflict):
        store.append_index_leaf(2, "s", 1, b"c\n")
    store.append_index_leaf(1, "t", 2, b"d\n")
    assert [(x.idx, x.session_id, x.leaf) for x in store.read_index_leaves()] == [
        (0, "s", b"a\n"),
        (1, "t", b"d\n"),
    ]
    assert [x.idx for x in store.read_index_leaves(start=1)] == [1]
    assert [x.idx for x in store.index_leaves_of("s")] == [0]
    raw = sqlite3.connect(db_path)
    try:
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            raw.execute("UPDATE index_leaves SET leaf = x'00'")
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            raw.execute("DELETE FROM index_leaves")
    finally:
        raw.close()


def test_read_index_leaves_streams_in_batches(store: SqliteStore) -> None:
    for i in range(1100):
        store.append_index_leaf(i, "s", i, b"%d\n" % i)
    assert [x.idx for x in store.read_index_leaves(start=5, stop=1030)] == list(range(5, 1030))


def test_cosignatures_by_origin_and_size(store: SqliteStore) -> None:
    store.record_cosignature(CosignatureRecord("o", 8, "aa", "w", "note 8", 1))
    store.record_cosignature(CosignatureRecord("o", 4, "bb", "w", "note 4", 1))
    store.record_cosignature(CosignatureRecord("o", 8, "aa", "w", "note 8 again", 2))
    store.record_cosignature(CosignatureRecord("p", 1, "cc", "w", "x", 1))
    assert [(c.size, c.note) for c in store.cosignatures("o")] == [(4, "note 4"), (8, "note 8 again")]


def test_salted_artifacts_and_erasures(store: SqliteStore) -> None:
    digest = salted_digest(b"s" * 32, b"content")
    record_ = store.put_salted_artifact(digest, b"s" * 32, b"content", "text/plain", session_id="s1")
    assert record_.handle == "salted:sha256:" + digest
    assert store.get_salted_artifact(digest) == (b"content", b"s" * 32)
    assert store.artifact_sessions(digest) == ["s1"]
    erased = ErasureRecord(digest, 5, "log", 0)
    assert store.erase_salted_artifact(erased) is True
    assert store.get_salted_artifact(digest) is None and store.erasure(digest) == erased
    assert store.erase_salted_artifact(erased) is False
    store.purge_freed_pages()


def test_the_store_and_the_salted_layer_agree_on_the_salt_length() -> None:
    assert rows.SALT_BYTES == SALT_BYTES == 32


def test_a_salted_artifact_whose_digest_is_not_its_bytes_is_refused_on_read(store: SqliteStore) -> None:
    store.put_salted_artifact("ab" * 32, b"salt", b"content", "text/plain", session_id="s1")
    with pytest.raises(ArtifactIntegrityError, match="salted:sha256:" + "ab" * 32):
        store.get_salted_artifact("ab" * 32)


def test_an_older_schema_opened_read_only_keeps_no_index(
    db_path: Path, open_db: Callable[..., SqliteStore], store: SqliteStore
) -> None:
    assert store.schema_version() == len(MIGRATIONS)
    store.close()
    raw = sqlite3.connect(db_path)
    try:
        for table in (
            "index_leaves",
            "index_checkpoints",
            "cosignatures",
            "salted_artifacts",
            "artifact_refs",
            "artifact_erasures",
        ):
            raw.execute(f"DROP TABLE {table}")
        raw.execute("DELETE FROM schema_migrations WHERE version = 4")
        raw.commit()
    finally:
        raw.close()
    old = open_db(read_only=True)
    assert not old.index_supported() and old.index_size() == 0 and list(old.read_index_leaves()) == []
    assert old.latest_index_checkpoint() is None and list(old.index_checkpoints()) == []
    assert old.cosignatures("o") == [] and old.index_leaves_of("s") == []
    assert (
        old.get_salted_artifact("x") is None and old.erasure("x") is None and old.artifact_sessions("x") == []
    )


def test_the_index_head_is_retained_monotonically(store: SqliteStore, notary: Notary) -> None:
    record(store, notary, n=12)  # index sizes 1, 2, 3
    lid = store.ledger_id()
    heads: HeadStore = notary.heads
    retained = heads.load_index(lid)
    assert retained is not None
    assert Checkpoint.parse(retained.split("\n\n")[0] + "\n").origin == index_origin(lid)
    smaller = notary.sign(index_origin(lid), 1, bytes(32), None)
    assert heads.save_index(lid, smaller) is False
    path = heads.index_path(lid)
    path.write_text(path.read_text().replace(lid, "0" * 32))
    with pytest.raises(NoteError, match="not an index head of ledger"):
        heads.load_index(lid)


def test_checkpoint_make_without_a_chain_line() -> None:
    cp = Checkpoint.make("o/x", 3, bytes(32), time_ms=5, chain=None)
    assert cp.text().endswith("time 5\n") and Checkpoint.parse(cp.text()).chain is None
