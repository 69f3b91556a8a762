"""Attacks that need more than the local retained heads, each caught by the defence named in the table.

Extends ``tests/audit/test_attacks.py`` (whose attacker edits only the database file). Here the attacker
also deletes the retained-head directory, deletes whole sessions, holds a stolen log key, forges offline
bundles, or forges grant policies.

| attack | caught by | how it shows |
|---|---|---|
| roll the database back to an earlier copy **and** delete the retained heads | witness (online query) | ``rollback`` "the head witness ... cosigned covers 12 events, the database holds 8" |
| remove the newest checkpoints **and** the retained heads (replay an old head) | witness | ``stale_head`` naming the witness |
| stolen log key: rewrite an event, re-chain, re-sign every checkpoint, delete retained heads | witness | ``fork`` at the witnessed size (and ``hash_mismatch``-free rows: only the witness sees it) |
| submit a rolled-back head to the witness | witness (409, then the client) | ``WitnessError`` "the witness cosigned size 12 ..., the database's latest checkpoint covers 8" |
| delete a whole session: rows, checkpoints, session row **and** its retained head | index log | ``verify``/``audit --all``: ``MISSING`` "its checkpoint at size 8 is leaf 1 of the signed index log" |
| same, and its index leaves deleted | index log signed checkpoints | index ``gap``, ``checkpoint_mismatch``, ``truncated`` |
| same, and the index checkpoints after it deleted | index retained head | index ``rollback`` |
| same, and the index retained head deleted | witness of the index log | index ``rollback`` naming the witness |
| bundle: edit an entry | manifest sha256 + chain | ``entries.jsonl: sha256 differs from manifest.json``; ``seq N: hash_mismatch`` |
| bundle: edit an entry and fix ``manifest.json`` | signed ``manifest.note`` | ``manifest.json: sha256 differs from the signed manifest.note`` |
| bundle: swap ``keys.json`` for the forger's key, re-sign the manifest and checkpoints | auditor's own trusted key (``--key``) | ``manifest.note: no signature by a trusted key (signed by ...)``; every checkpoint ``bad_checkpoint`` |
| grant policy signed with the log key | policy trust list (distinct key, DSSE) | ``GrantError`` "no signature by a trusted policy key" |
| grant policy edited after signing | DSSE signature over PAE | ``GrantError`` "no signature by a trusted policy key" |
| grant policy with the attacker's key embedded in the envelope | trust list only (envelope keys ignored) | ``GrantError`` |
| erased personal data: recover it from the ledger | salted digests; ``secure_delete`` + WAL truncation | the ledger, exports and bundles never held content or salt (``test_erasure.py``) |

Limits: a witness only protects what was submitted to it (heads newer than its last cosignature are as
exposed as before); ``verify`` treats an unreachable witness as a note, not a failure (a network attacker
who blocks the witness only removes that check, and says so); ``Recorder.attach`` does not consult the
witness (verify/audit do).
"""

from __future__ import annotations

import base64
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from flightlog.encoding import canonical_json
from flightlog.errors import GrantError
from flightlog.integrity.bundle import audit_bundle, export_bundle
from flightlog.integrity.checkpoints import encode_frontier, origin_for
from flightlog.integrity.grants import (
    GrantPolicy,
    load_policy_keys,
    load_policy_signer,
    sign_grant,
    verify_grant,
)
from flightlog.integrity.indexlog import audit_index, index_origin
from flightlog.integrity.keys import Keyring, LogSigner, TrustedKey, load_signer
from flightlog.integrity.notary import Notary
from flightlog.integrity.notes import sign_note
from flightlog.integrity.verify import audit_session
from flightlog.integrity.witness import WitnessError
from flightlog.integrity.witness_client import (
    TrustedWitness,
    load_witnesses,
    submit_index,
    submit_session,
    witnessed_heads,
)
from flightlog.ledger import GENESIS, CompactRange, chain_hash, leaf_hash
from flightlog.store import SqliteStore

from .conftest import SID, copy_db, record, step, tamper


def _witnessed_audit(store: SqliteStore, notary: Notary) -> set[tuple[int, str]]:
    heads, notes = witnessed_heads(
        store, origin_for(store.ledger_id(), SID), keyring=notary.keyring, witnesses=load_witnesses()
    )
    assert notes == []
    report = audit_session(store, SID, keyring=notary.keyring, heads=notary.heads, witnessed=heads)
    return {(d.seq, d.reason) for d in report.divergences}


def _swap_in(store: SqliteStore, db_path: Path, copy: Path) -> SqliteStore:
    store.close()
    for suffix in ("-wal", "-shm"):
        Path(f"{db_path}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(copy, db_path)
    return SqliteStore(db_path)


def test_rollback_and_deleted_heads_are_caught_by_the_witness(
    tmp_path: Path, db_path: Path, store: SqliteStore, notary: Notary, trusted_witness: TrustedWitness
) -> None:
    rec = record(store, notary, n=8)
    submit_session(store, SID, trusted_witness.url or "")
    copy_db(db_path, tmp_path / "old.db")
    for i in range(8, 12):
        rec.append(step(i))
    submit_session(store, SID, trusted_witness.url or "")  # the witness saw 12
    old = _swap_in(store, db_path, tmp_path / "old.db")
    try:
        shutil.rmtree(notary.heads.directory)
        assert audit_session(old, SID, keyring=notary.keyring, heads=notary.heads).ok  # locally undetectable
        assert _witnessed_audit(old, notary) == {(8, "rollback")}
        report = audit_session(
            old,
            SID,
            keyring=notary.keyring,
            witnessed=witnessed_heads(
                old, origin_for(old.ledger_id(), SID), keyring=notary.keyring, witnesses=load_witnesses()
            )[0],
        )
        assert (
            "the head witness flightlog.local/witness cosigned covers 12 events"
            in report.divergences[0].detail
        )
        with pytest.raises(WitnessError, match="rolled back"):
            submit_session(old, SID, trusted_witness.url or "")
    finally:
        old.close()


def test_a_replayed_old_head_with_deleted_heads_is_stale_to_the_witness(
    db_path: Path, store: SqliteStore, notary: Notary, trusted_witness: TrustedWitness
) -> None:
    record(store, notary, n=9)
    submit_session(store, SID, trusted_witness.url or "")  # witnessed 8
    tamper(db_path, "DELETE FROM checkpoints WHERE size > 4", "DELETE FROM cosignatures")
    shutil.rmtree(notary.heads.directory)
    assert _witnessed_audit(store, notary) == {(4, "stale_head")}


def test_a_stolen_log_key_rewrite_is_a_fork_to_the_witness(
    db_path: Path, store: SqliteStore, notary: Notary, trusted_witness: TrustedWitness
) -> None:
    record(store, notary, n=9)
    submit_session(store, SID, trusted_witness.url or "")  # witnessed 8
    rows = list(store.read_events(SID))
    forged = canonical_json({"kind": "custom", "custom_kind": "step", "payload": {"i": 3, "of": "forged"}})
    tamper(
        db_path,
        f"DELETE FROM events WHERE session_id = '{SID}'",
        "DELETE FROM checkpoints",
        "DELETE FROM cosignatures",
    )
    raw = sqlite3.connect(db_path)
    try:
        prev, tree = GENESIS, CompactRange()
        for row in rows:
            data = forged if row.seq == 3 else row.event_bytes
            digest = chain_hash(prev, row.seq, data)
            raw.execute(
                "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?)",
                (SID, row.seq, row.kind, data, prev, digest, 0),
            )
            tree.append(leaf_hash(data))
            prev = digest
            if tree.size % 4 == 0:  # re-signed with the real (stolen) key
                signed = notary.sign(origin_for(store.ledger_id(), SID), tree.size, tree.root(), prev)
                cur = raw.execute(
                    "INSERT INTO checkpoints (session_id, size, root, body, created_at_ms) VALUES (?, ?, ?, ?, 0)",
                    (SID, tree.size, tree.root().hex(), signed.note),
                )
                raw.execute(
                    "INSERT INTO checkpoint_frontiers VALUES (?, ?)", (cur.lastrowid, encode_frontier(tree))
                )
        raw.execute(
            "UPDATE sessions SET head_hash = ?, merkle_root = ? WHERE session_id = ?",
            (prev, tree.root().hex(), SID),
        )
        raw.commit()
    finally:
        raw.close()
    shutil.rmtree(notary.heads.directory)
    assert audit_session(store, SID, keyring=notary.keyring).ok  # a perfect forgery, locally
    assert _witnessed_audit(store, notary) == {(7, "fork")}


def test_a_deleted_session_is_caught_by_the_index_log_all_the_way_down(
    db_path: Path, store: SqliteStore, notary: Notary, trusted_witness: TrustedWitness
) -> None:
    record(store, notary, n=9)  # index leaves 0, 1
    record(store, notary, sid="keep", n=4)  # index leaf 2
    submit_index(store, trusted_witness.url or "")  # the witness saw the index at size 3
    lid = store.ledger_id()
    tamper(
        db_path,
        f"DELETE FROM events WHERE session_id = '{SID}'",
        f"DELETE FROM checkpoints WHERE session_id = '{SID}'",
        f"DELETE FROM sessions WHERE session_id = '{SID}'",
        f"DELETE FROM authority_epochs WHERE session_id = '{SID}'",
    )
    notary.heads.path(lid, SID).unlink()  # its retained head goes too
    report = audit_index(store, keyring=notary.keyring, heads=notary.heads)
    assert [(m.session_id, m.leaf, m.size) for m in report.missing] == [(SID, 1, 8)]
    # the attacker removes its leaves: the signed index root no longer matches
    tamper(db_path, f"DELETE FROM index_leaves WHERE session_id = '{SID}'")
    found = {(d.seq, d.reason) for d in audit_index(store, keyring=notary.keyring).divergences}
    assert found == {(0, "gap"), (0, "checkpoint_mismatch"), (1, "truncated")}
    # ...and the index checkpoints, keeping a consistent-looking prefix: the retained index head remains
    tamper(db_path, "DELETE FROM index_leaves", "DELETE FROM index_checkpoints")
    found = {
        (d.seq, d.reason) for d in audit_index(store, keyring=notary.keyring, heads=notary.heads).divergences
    }
    assert (0, "rollback") in found
    # ...and the retained index head: the witness of the index log remains
    notary.heads.index_path(lid).unlink()
    heads, _ = witnessed_heads(store, index_origin(lid), keyring=notary.keyring, witnesses=load_witnesses())
    report = audit_index(store, keyring=notary.keyring, heads=notary.heads, witnessed=heads)
    assert [(d.seq, d.reason) for d in report.divergences] == [(0, "rollback")]
    assert "witness flightlog.local/witness" in report.divergences[0].detail


def test_forged_bundles_are_rejected_with_a_message_naming_the_forgery(
    tmp_path: Path, store: SqliteStore, notary: Notary
) -> None:
    record(store, notary, n=10).finish("completed")
    trusted = Keyring([TrustedKey(notary.signer.verifier, pinned=True)])
    bundles = {name: tmp_path / name for name in ("entry", "manifest", "key")}
    for path in bundles.values():
        export_bundle(store, SID, path)
    entries = bundles["entry"] / "entries.jsonl"
    entries.write_bytes(entries.read_bytes().replace(b'"i":3', b'"i":9', 1))
    report = audit_bundle(bundles["entry"], keyring=trusted)
    assert report.problems == ["entries.jsonl: sha256 differs from manifest.json (edited after export)"]
    manifest = bundles["manifest"] / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"events": 11', '"events": 10'))
    report = audit_bundle(bundles["manifest"], keyring=trusted)
    assert (
        report.problems[0]
        == "manifest.json: sha256 differs from the signed manifest.note (edited after export)"
    )
    evil = LogSigner.generate(notary.signer.name)
    (bundles["key"] / "keys.json").write_text(
        json.dumps({"format": "flightlog-keys/1", "keys": [TrustedKey(evil.verifier).to_json()]})
    )
    text = (bundles["key"] / "manifest.note").read_text().split("\n\n")[0] + "\n"
    (bundles["key"] / "manifest.note").write_text(sign_note(text, evil))
    report = audit_bundle(bundles["key"], keyring=trusted)
    assert not report.ok and f"signed by {evil.name}+{evil.key_id:08x}" in report.problems[0]
    assert "keys.json: sha256 differs from manifest.json (edited after export)" in report.problems


POLICY = GrantPolicy(policy_id="p", tools_allow=["read_*"])


def test_a_grant_policy_signed_by_the_log_key_is_rejected() -> None:
    load_policy_signer()
    with pytest.raises(GrantError, match="no signature by a trusted policy key"):
        verify_grant(sign_grant(POLICY, load_signer()), load_policy_keys())


def test_a_tampered_grant_policy_is_rejected() -> None:
    envelope = sign_grant(POLICY, load_policy_signer())
    wider = canonical_json(POLICY.model_copy(update={"tools_allow": ["*"]}).model_dump(mode="json"))
    envelope["payload"] = base64.b64encode(wider).decode()
    with pytest.raises(GrantError, match="no signature by a trusted policy key"):
        verify_grant(envelope, load_policy_keys())


def test_resume_refuses_a_rollback_the_witness_saw(
    tmp_path: Path, db_path: Path, store: SqliteStore, notary: Notary, trusted_witness: TrustedWitness
) -> None:
    """Database and retained heads rolled back together: the full check every entry point runs (``resume``,
    ``approve``, ``worker``...) asks the witness."""
    from flightlog.errors import LedgerIntegrityError
    from flightlog.integrity.audit import require_intact

    rec = record(store, notary, n=8)
    submit_session(store, SID, trusted_witness.url or "")
    copy_db(db_path, tmp_path / "old.db")
    for i in range(8, 12):
        rec.append(step(i))
    submit_session(store, SID, trusted_witness.url or "")  # the witness saw 12
    old = _swap_in(store, db_path, tmp_path / "old.db")
    try:
        shutil.rmtree(notary.heads.directory)
        with pytest.raises(LedgerIntegrityError, match="rollback") as info:
            require_intact(old, SID)
        assert info.value.seq == 8
    finally:
        old.close()
