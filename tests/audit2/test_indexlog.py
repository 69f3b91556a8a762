"""The ledger-wide index log: leaves appended with each checkpoint, signed heads, proofs, audits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flightlog.errors import StoreError
from flightlog.integrity.checkpoints import Checkpoint, open_checkpoint, origin_for
from flightlog.integrity.indexlog import (
    append_to_index,
    audit_index,
    index_origin,
    index_tree,
    load_index_proof,
    prove_index_consistency,
    prove_index_inclusion,
    session_of_origin,
)
from flightlog.integrity.keys import Keyring, LogSigner, TrustedKey
from flightlog.integrity.notary import Notary
from flightlog.integrity.notes import parse_note
from flightlog.ledger import leaf_hash, merkle_root, verify_consistency
from flightlog.recorder import Recorder
from flightlog.store import SqliteStore

from .conftest import OTHER, SID, record, step, tamper


def _leaves(store: SqliteStore) -> list[bytes]:
    return [leaf.leaf for leaf in store.read_index_leaves()]


def test_every_checkpoint_is_a_leaf_written_in_its_transaction(store: SqliteStore, notary: Notary) -> None:
    record(store, notary, n=10)  # checkpoints at 4 and 8
    notes = [c.body for c in store.checkpoints(SID)]
    assert [leaf.decode() for leaf in _leaves(store)] == [parse_note(n).text for n in notes]
    assert [leaf.session_id for leaf in store.read_index_leaves()] == [SID, SID]
    head = store.latest_index_checkpoint()
    assert head is not None and head.size == 2
    signed = open_checkpoint(head.body, notary.keyring, origin=index_origin(store.ledger_id()))
    assert signed.root == merkle_root([leaf_hash(leaf) for leaf in _leaves(store)])
    assert signed.checkpoint.chain is None and signed.checkpoint.time_ms is not None
    assert index_tree(store).root() == signed.root


def test_a_rolled_back_append_leaves_no_leaf(store: SqliteStore, notary: Notary) -> None:
    rec = Recorder.create(store, session_id=SID, notary=notary)
    with pytest.raises(RuntimeError), rec.atomic():
        rec.append_many([step(i) for i in range(4)])  # checkpoint + index leaf inside the transaction
        raise RuntimeError("abort")
    assert store.index_size() == 0 and store.latest_index_checkpoint() is None
    assert notary.heads.load_index(store.ledger_id()) is None  # nothing retained for a rolled-back head


def test_sessions_interleave_and_the_index_head_is_retained(store: SqliteStore, notary: Notary) -> None:
    a = Recorder.create(store, session_id=SID, notary=notary)
    b = Recorder.create(store, session_id=OTHER, notary=notary)
    for i in range(8):
        a.append(step(i))
        b.append(step(i, OTHER))
    assert [leaf.session_id for leaf in store.read_index_leaves()] == [SID, OTHER, SID, OTHER]
    retained = notary.heads.load_index(store.ledger_id())
    assert retained is not None and Checkpoint.parse(parse_note(retained).text).size == 4
    assert notary.heads.sessions(store.ledger_id())  # index.json is not mistaken for a session head
    assert {h.session_id for h in notary.heads.sessions(store.ledger_id())} == {SID, OTHER}


def test_the_index_origin_never_collides_with_a_session_origin() -> None:
    ledger = "ab" * 8
    for sid in ("index", "_/index", "_%2Findex", "a b", "ü/ß", "x+y", ":colon"):
        origin = origin_for(ledger, sid)
        assert origin != index_origin(ledger)
        assert session_of_origin(origin, ledger) == sid
    assert session_of_origin(index_origin(ledger), ledger) is None
    assert session_of_origin(f"flightlog.local/{ledger}/a%2fb", ledger) is None  # not canonical
    assert session_of_origin(f"flightlog.local/{ledger}/%ff", ledger) is None  # not UTF-8
    assert session_of_origin("flightlog.local/other/x", ledger) is None


def test_inclusion_proof_of_the_latest_session_checkpoint(store: SqliteStore, notary: Notary) -> None:
    record(store, notary, n=9)
    record(store, notary, sid=OTHER, n=13)
    proof = prove_index_inclusion(store, SID)
    assert (proof.leaf_index, proof.tree_size) == (1, 5)  # leaves: SID 4, SID 8, OTHER 4, 8, 12
    assert proof.check(notary.keyring) == []
    back = load_index_proof(json.loads(json.dumps(proof.to_json())))
    assert back == proof and back.check(notary.keyring) == []
    assert prove_index_inclusion(store, SID, size=4).leaf_index == 0
    with pytest.raises(ValueError, match="no indexed checkpoint of size 5"):
        prove_index_inclusion(store, SID, size=5)
    other = Keyring([TrustedKey(LogSigner.generate().verifier)])
    assert any("no signature by a trusted key" in p for p in proof.check(other))


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("leaf_index", 0, "audit path"),
        ("session_id", OTHER, "not of session"),
        ("leaf", "garbage\n", "not a checkpoint"),
    ],
)
def test_a_doctored_index_proof_fails(
    store: SqliteStore, notary: Notary, field: str, value: object, expected: str
) -> None:
    record(store, notary, n=9)
    record(store, notary, sid=OTHER, n=5)
    doc = prove_index_inclusion(store, SID).to_json()
    doc[field] = value
    assert any(expected in p for p in load_index_proof(doc).check(notary.keyring))


def test_load_index_proof_refuses_malformed_documents() -> None:
    for doc in (
        {},
        {"format": "flightlog-index-proof/1"},
        {"format": "flightlog-index-proof/1", "session_id": 1},
    ):
        with pytest.raises(ValueError):
            load_index_proof(doc)


def test_consistency_proofs_between_index_sizes(store: SqliteStore, notary: Notary) -> None:
    for n, sid in enumerate(("a", "b", "c", "d", "e")):
        record(store, notary, sid=sid, n=4 + n)
    size = store.index_size()
    for old in range(size + 1):
        proof, old_root, new_root = prove_index_consistency(store, old)
        assert verify_consistency(old, size, old_root, new_root, proof), old
    with pytest.raises(ValueError):
        prove_index_consistency(store, size + 1)


def test_audit_index_of_an_intact_ledger(store: SqliteStore, notary: Notary) -> None:
    record(store, notary, n=9)
    record(store, notary, sid=OTHER, n=5)
    report = audit_index(store, keyring=notary.keyring, heads=notary.heads)
    assert report.ok, report.divergences
    assert (report.leaves, report.checkpoints, report.anchored, report.retained) == (3, 3, 3, 3)
    assert report.summary() == "3 leaves; signed through 3; retained head at size 3"


def test_a_session_deleted_wholesale_is_missing_from_the_index(
    db_path: Path, store: SqliteStore, notary: Notary
) -> None:
    record(store, notary, n=9)
    record(store, notary, sid=OTHER, n=5)
    tamper(
        db_path,
        f"DELETE FROM events WHERE session_id = '{SID}'",
        f"DELETE FROM checkpoints WHERE session_id = '{SID}'",
        f"DELETE FROM sessions WHERE session_id = '{SID}'",
    )
    report = audit_index(store, keyring=notary.keyring, heads=notary.heads)
    assert not report.ok and not report.divergences
    assert [(m.session_id, m.leaf, m.size) for m in report.missing] == [(SID, 1, 8)]


def test_deleting_a_checkpoint_the_index_holds_is_an_index_mismatch(
    db_path: Path, store: SqliteStore, notary: Notary
) -> None:
    record(store, notary, n=9)
    tamper(db_path, f"DELETE FROM checkpoints WHERE session_id = '{SID}' AND size = 4")
    report = audit_index(store, keyring=notary.keyring)
    assert [(d.seq, d.reason) for d in report.divergences] == [(0, "index_mismatch")]


def test_edited_or_removed_index_leaves_are_caught(db_path: Path, store: SqliteStore, notary: Notary) -> None:
    record(store, notary, n=13)  # leaves at 4, 8, 12
    tamper(db_path, "UPDATE index_leaves SET leaf = CAST('x' AS BLOB) WHERE idx = 1")
    found = {(d.seq, d.reason) for d in audit_index(store, keyring=notary.keyring).divergences}
    assert {(1, "bad_leaf"), (1, "checkpoint_mismatch"), (2, "checkpoint_mismatch")} <= found


def test_truncating_the_index_is_caught_by_its_retained_head(
    db_path: Path, store: SqliteStore, notary: Notary
) -> None:
    record(store, notary, n=13)
    tamper(db_path, "DELETE FROM index_leaves WHERE idx >= 1", "DELETE FROM index_checkpoints WHERE size > 1")
    report = audit_index(store, keyring=notary.keyring, heads=notary.heads)
    assert {(d.seq, d.reason) for d in report.divergences} == {(1, "rollback")}
    tamper(db_path, "DELETE FROM index_checkpoints WHERE size = 1")  # now an old index head is the latest
    report = audit_index(store, keyring=notary.keyring, heads=notary.heads)
    assert (1, "rollback") in {(d.seq, d.reason) for d in report.divergences}


def test_an_index_checkpoint_signed_by_another_key_is_bad(
    db_path: Path, store: SqliteStore, notary: Notary
) -> None:
    record(store, notary, n=5)
    evil = Notary.for_signer(LogSigner.generate(notary.signer.name), notary.heads)
    forged = evil.sign(index_origin(store.ledger_id()), 1, index_tree(store).root(), None)
    tamper(db_path, f"UPDATE index_checkpoints SET body = '{forged.note}'")
    report = audit_index(store, keyring=notary.keyring)
    assert [d.reason for d in report.divergences] == ["bad_checkpoint"]
    assert "no signature by a trusted key" in report.divergences[0].detail


def test_a_store_without_an_index_log_is_skipped(
    store: SqliteStore, notary: Notary, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(SqliteStore, "index_supported", lambda self: False)
    record(store, notary, n=5)
    assert store.checkpoints(SID) and append_to_index(store, notary, "x" * 16, SID, 1, None) is None  # type: ignore[arg-type]
    assert audit_index(store, keyring=notary.keyring).notes == ["this database keeps no index log"]


def test_notary_index_false_keeps_no_index(store: SqliteStore, notary: Notary) -> None:
    notary.index = False
    record(store, notary, n=5)
    assert store.checkpoints(SID) and store.index_size() == 0


def test_a_damaged_frontier_cache_is_rebuilt_from_the_leaves(
    db_path: Path, store: SqliteStore, notary: Notary
) -> None:
    record(store, notary, n=8)
    tamper(db_path, "UPDATE index_checkpoints SET frontier = x'00'")
    expected = merkle_root([leaf_hash(leaf) for leaf in _leaves(store)])
    assert index_tree(store).root() == expected
    record(store, notary, sid=OTHER, n=4)  # the next append extends the rebuilt tree
    assert audit_index(store, keyring=notary.keyring).divergences == []


def test_an_unreadable_retained_index_head_is_reported(store: SqliteStore, notary: Notary) -> None:
    record(store, notary, n=4)
    notary.heads.index_path(store.ledger_id()).write_text("{broken")
    report = audit_index(store, keyring=notary.keyring, heads=notary.heads)
    assert [d.reason for d in report.divergences] == ["bad_checkpoint"]
    with pytest.raises(StoreError):
        notary.heads.index_path("NOT-HEX")
