"""``verify_rows(tree=...)`` folds leaves into the caller's tree: one leaf hash per row for full audits."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from flightlog import ledger
from flightlog.integrity import signing
from flightlog.integrity.notary import Notary
from flightlog.integrity.verify import audit_session
from flightlog.ledger import CompactRange, leaf_hash, verify_rows
from flightlog.store import SqliteStore

from .conftest import SID, record


def test_verify_rows_folds_into_the_callers_tree(store: SqliteStore, notary: Notary) -> None:
    record(store, notary, n=9)
    rows = list(store.read_events(SID))
    private = verify_rows(SID, rows)
    tree = CompactRange()
    seen: list[int] = []

    def feed() -> Iterator[object]:
        for row in rows:
            seen.append(tree.size)  # the tree holds every earlier row when the next one is asked for
            yield row

    shared = verify_rows(SID, feed(), tree=tree)  # type: ignore[arg-type]
    assert shared.ok and shared.root == private.root == tree.root().hex()
    assert tree.size == len(rows) and seen == list(range(len(rows)))


def test_a_full_audit_hashes_each_leaf_once(
    store: SqliteStore, notary: Notary, monkeypatch: pytest.MonkeyPatch
) -> None:
    record(store, notary, n=10)
    calls = {"n": 0}
    real = leaf_hash

    def counting(data: bytes) -> bytes:
        calls["n"] += 1
        return real(data)

    monkeypatch.setattr(signing, "leaf_hash", counting)  # the resume path hashes there
    monkeypatch.setattr(ledger, "leaf_hash", counting)
    report = audit_session(store, SID, keyring=notary.keyring, heads=notary.heads)
    assert report.ok, report.divergences
    assert report.checkpoints >= 2
    assert calls["n"] == 0  # verify_rows hashes leaves inline; the tee no longer hashes them again
    assert report.tree is not None and report.tree.size == report.events
