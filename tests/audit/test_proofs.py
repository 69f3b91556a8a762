"""Store-backed RFC 9162 proofs: equal to the in-memory reference, streamed, tied to signed checkpoints."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flightlog.errors import LedgerIntegrityError
from flightlog.integrity.keys import Keyring, LogSigner, TrustedKey
from flightlog.integrity.notary import Notary
from flightlog.integrity.proofs import (
    ConsistencyProof,
    InclusionProof,
    load_proof,
    prove_consistency,
    prove_inclusion,
    range_root,
)
from flightlog.ledger import consistency_proof, inclusion_proof, leaf_hash, merkle_root
from flightlog.recorder import Recorder
from flightlog.store import SqliteStore

from .conftest import SID, step, tamper


@pytest.fixture
def leaves(store: SqliteStore, notary: Notary) -> list[bytes]:
    rec = Recorder.create(store, session_id=SID, notary=notary)
    for batch in range(5):
        rec.append_many([step(10 * batch + i) for i in range(5)])  # checkpoints at 5, 10, 15, 20, 25
    rec.append_many([step(100), step(101)])  # unanchored 25..26
    return [leaf_hash(r.event_bytes) for r in store.read_events(SID)]


def test_range_roots_match_the_reference(store: SqliteStore, leaves: list[bytes]) -> None:
    for start in range(0, 27, 5):
        for end in range(start + 1, 28, 3):
            assert range_root(store, SID, start, end) == merkle_root(leaves[start:end])


def test_every_inclusion_proof_matches_the_in_memory_one(store: SqliteStore, leaves: list[bytes]) -> None:
    for size in (1, 2, 3, 7, 8, 15, 16, 27):
        for seq in range(size):
            proof = prove_inclusion(store, SID, seq, tree_size=size)
            assert list(proof.path) == inclusion_proof(leaves[:size], seq), (seq, size)
            assert proof.root == merkle_root(leaves[:size])
            assert proof.check() == []


def test_every_consistency_proof_matches_the_in_memory_one(store: SqliteStore, leaves: list[bytes]) -> None:
    for new in (1, 5, 8, 13, 27):
        for old in range(1, new + 1):
            proof = prove_consistency(store, SID, old, new)
            assert list(proof.path) == consistency_proof(leaves[:new], old), (old, new)
            assert (proof.old_root, proof.new_root) == (merkle_root(leaves[:old]), merkle_root(leaves[:new]))
            assert proof.check() == []


def test_defaults_anchor_to_the_latest_signed_checkpoint(
    store: SqliteStore, leaves: list[bytes], notary: Notary
) -> None:
    anchored = prove_inclusion(store, SID, 3)
    assert anchored.tree_size == 25 and anchored.checkpoint is not None
    assert anchored.check(notary.keyring) == []
    tail = prove_inclusion(store, SID, 26)  # in the unanchored tail: the whole session, unsigned
    assert tail.tree_size == 27 and tail.checkpoint is None
    consistency = prove_consistency(store, SID, 10)
    assert (consistency.new_size, consistency.old_checkpoint is not None) == (25, True)
    assert consistency.check(notary.keyring) == []
    doc = json.loads(json.dumps(anchored.to_json()))
    assert (
        doc["format"] == "flightlog-proof/1"
        and doc["event"] == '{"custom_kind":"step","kind":"custom","payload":{"i":3,"text":"step 3"}}'
    )
    assert load_proof(doc) == anchored
    assert load_proof(json.loads(json.dumps(consistency.to_json()))) == consistency


def test_a_proof_reads_each_row_at_most_twice(
    store: SqliteStore, leaves: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: dict[int, int] = {}
    real = store.read_events

    def counting(session_id: str, **kwargs: Any) -> Any:
        for row in real(session_id, **kwargs):
            reads[row.seq] = reads.get(row.seq, 0) + 1
            yield row

    monkeypatch.setattr(store, "read_events", counting)
    prove_inclusion(store, SID, 11, tree_size=27)
    assert max(reads.values()) == 1 and len(reads) == 27
    reads.clear()
    prove_consistency(store, SID, 11, 27)
    assert max(reads.values()) <= 2


def _tampered(
    original: InclusionProof | ConsistencyProof, **changes: Any
) -> InclusionProof | ConsistencyProof:
    return load_proof(original.to_json() | changes)


def test_tampered_proofs_fail(store: SqliteStore, leaves: list[bytes], notary: Notary) -> None:
    proof = prove_inclusion(store, SID, 3)
    flipped = [proof.path[0][:-1].hex() + "00", *[p.hex() for p in proof.path[1:]]]
    cases = {
        "path": _tampered(proof, proof=flipped),
        "seq": _tampered(proof, seq=4),
        "event": _tampered(proof, event='{"kind":"custom"}'),
        "size": _tampered(proof, tree_size=26),
        "root": _tampered(proof, root=leaves[0].hex()),
        "other session": _tampered(proof, session_id="sess-other"),
    }
    for name, bad in cases.items():
        assert bad.check(notary.keyring), name
    stranger = Keyring([TrustedKey(LogSigner.generate("x.example/y").verifier)])
    assert any("trusted key" in p for p in proof.check(stranger))
    consistency = prove_consistency(store, SID, 10, 25)
    assert _tampered(consistency, old_root=leaves[0].hex()).check()
    assert _tampered(consistency, new_size=24).check()


@pytest.mark.parametrize(
    "doc",
    [
        {},
        {"format": "flightlog-proof/1", "type": "other"},
        {"format": "flightlog-proof/1", "type": "inclusion"},
        [],
    ],
)
def test_malformed_proof_documents(doc: Any) -> None:
    with pytest.raises(ValueError):
        load_proof(doc)


def test_out_of_range_requests(store: SqliteStore, leaves: list[bytes]) -> None:
    for seq, size in ((27, None), (-1, None), (5, 5), (5, 28)):
        with pytest.raises(ValueError):
            prove_inclusion(store, SID, seq, tree_size=size)
    for old, new in ((0, 5), (6, 5), (1, 28)):
        with pytest.raises(ValueError):
            prove_consistency(store, SID, old, new)


def test_rows_that_disagree_with_the_signed_checkpoint_are_refused(
    db_path: Path, store: SqliteStore, leaves: list[bytes]
) -> None:
    tamper(db_path, "UPDATE events SET event = x'7b7d' WHERE seq = 2")
    with pytest.raises(LedgerIntegrityError, match="checkpoint_mismatch"):
        prove_inclusion(store, SID, 3)
    tamper(db_path, "DELETE FROM events WHERE seq = 7")
    with pytest.raises(LedgerIntegrityError, match="gap"):
        prove_inclusion(store, SID, 3, tree_size=27)
