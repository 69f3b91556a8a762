"""Attacks on a recorded session, each detected by ``audit_session`` (verify) and refused by ``attach``.

Setup: a notarized recorder (checkpoint every 4 events) writes a session; the attacker then edits the
SQLite file directly (triggers dropped), never the key directory or the retained-head directory (an
attacker who controls those as well needs an outside witness: issue 5, second half).

| attack | caught by | divergence reason (seq) |
|---|---|---|
| edit an event | chain rule + signed root | ``hash_mismatch`` (edited seq), ``checkpoint_mismatch`` (each checkpoint covering it) |
| delete a row | chain rule + signed root | ``gap``, ``broken_link`` (next seq), ``checkpoint_mismatch`` |
| reorder two rows | chain rule + signed root | ``broken_link`` / ``hash_mismatch`` at both, ``checkpoint_mismatch`` |
| truncate an open session's tail (into the anchored part), session row rewritten | signed checkpoint in the db, retained head | ``truncated``, ``rollback`` |
| same, and the newer checkpoints deleted | retained head | ``rollback`` |
| truncate a sealed session (seal + tail + checkpoints removed) | retained head (sealed) | ``rollback``; the session also shows ``open`` |
| roll the whole database file back to an earlier copy | retained head | ``rollback`` |
| splice rows from another session into this one | chain rule, signed root, retained head | ``broken_link``, ``checkpoint_mismatch``, ``fork`` |
| replace the session wholesale with another session's rows and checkpoints | checkpoint origin, retained head | ``bad_checkpoint`` (origin), ``fork`` |
| forge: rewrite history, rehash the chain, sign new checkpoints with another key | keyring (C2SP: unknown key), retained head | ``bad_checkpoint`` (no trusted signature), ``fork`` |
| replay an old head (delete the newer checkpoints, keep an old signed one as latest) | retained head | ``stale_head`` |
| append after the seal | seal | ``after_seal`` |
| delete a whole session (events, checkpoints, session row) | retained head | ``missing_sessions`` / ``audit --all``: MISSING; ``Recorder.create`` of that id refused (``rollback``) |

Known limits, pinned below: deleting only the *unanchored tail* (events after the last signed checkpoint)
and rewriting the session row is not detectable locally; ``audit`` reports what remains, and the kernel's
``checkpoint()`` before every side effect bounds what can silently go. ``attach(full=False)`` does not
re-read rows a valid checkpoint covers, so it misses an edit to them; a full verify (the default) does not.
The ledger id lives in the database: an attacker who rewrites it *and* deletes every checkpoint leaves
sessions that verify as wholly unanchored (reported as such, never as signed) with no retained head to
compare; an outside witness closes that.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from flightlog.encoding import canonical_json
from flightlog.errors import LedgerIntegrityError
from flightlog.events import Custom
from flightlog.integrity.checkpoints import encode_frontier, origin_for
from flightlog.integrity.heads import HeadStore
from flightlog.integrity.keys import LogSigner
from flightlog.integrity.notary import Notary
from flightlog.integrity.verify import audit_session, missing_sessions
from flightlog.ledger import GENESIS, CompactRange, chain_hash, leaf_hash
from flightlog.recorder import Recorder
from flightlog.store import SqliteStore

from .conftest import SID, step, tamper

OTHER = "sess-2"


def _record(store: SqliteStore, notary: Notary, sid: str = SID, n: int = 11) -> Recorder:
    """``n`` single appends: checkpoints at 4 and 8, the rest unanchored (another session's differ)."""
    rec = Recorder.create(store, session_id=sid, notary=notary)
    for i in range(n):
        rec.append(step(i) if sid == SID else Custom(custom_kind="step", payload={"i": i, "of": sid}))
    return rec


def _audit(store: SqliteStore, notary: Notary) -> set[tuple[int, str]]:
    report = audit_session(store, SID, keyring=notary.keyring, heads=notary.heads)
    assert not report.ok
    return {(d.seq, d.reason) for d in report.divergences}


def _refused(store: SqliteStore, notary: Notary, reason: str, *, full: bool = True) -> LedgerIntegrityError:
    before = store.authority_epoch(SID)
    with pytest.raises(LedgerIntegrityError) as info:
        Recorder.attach(store, SID, notary=notary, full=full)
    assert reason in str(info.value), str(info.value)
    assert store.authority_epoch(SID) == before  # refused before taking authority
    return info.value


def _rewrite_session_row(db_path: Path, sid: str = SID) -> None:
    """Make the session row agree with whatever rows remain (what a careful attacker does)."""
    raw = sqlite3.connect(db_path)
    try:
        rows = raw.execute(
            "SELECT seq, event, hash FROM events WHERE session_id = ? ORDER BY seq", (sid,)
        ).fetchall()
    finally:
        raw.close()
    tree = CompactRange()
    for _, data, _ in rows:
        tree.append(leaf_hash(bytes(data)))
    last_seq, last_hash = (rows[-1][0], rows[-1][2]) if rows else (-1, GENESIS)
    tamper(
        db_path,
        f"UPDATE sessions SET head_seq = {last_seq}, head_hash = '{last_hash}', "
        f"merkle_root = '{tree.root().hex()}' WHERE session_id = '{sid}'",
    )


_FORGED = canonical_json({"kind": "custom", "custom_kind": "step", "payload": {"i": 3, "text": "forged"}})


# ─── the table, row by row ────────────────────────────────────────────────────────────────────
def test_edit_an_event(db_path: Path, store: SqliteStore, notary: Notary) -> None:
    _record(store, notary)
    tamper(db_path, f"UPDATE events SET event = x'{_FORGED.hex()}' WHERE seq = 3")
    assert _audit(store, notary) == {
        (3, "hash_mismatch"),
        (3, "checkpoint_mismatch"),
        (7, "checkpoint_mismatch"),
        (7, "fork"),
    }
    err = _refused(store, notary, "hash_mismatch")
    assert err.seq == 3


def test_delete_a_row(db_path: Path, store: SqliteStore, notary: Notary) -> None:
    _record(store, notary)
    tamper(db_path, "DELETE FROM events WHERE seq = 5")
    found = _audit(store, notary)
    assert {(5, "gap"), (6, "broken_link"), (7, "checkpoint_mismatch")} <= found
    _refused(store, notary, "gap")


def test_reorder_two_rows(db_path: Path, store: SqliteStore, notary: Notary) -> None:
    _record(store, notary)
    tamper(
        db_path,
        "UPDATE events SET seq = -1 WHERE seq = 2",
        "UPDATE events SET seq = 2 WHERE seq = 5",
        "UPDATE events SET seq = 5 WHERE seq = -1",
    )
    found = _audit(store, notary)
    assert {(2, "hash_mismatch"), (5, "hash_mismatch"), (3, "checkpoint_mismatch")} <= found
    assert (2, "broken_link") in found
    _refused(store, notary, "sequence 2")


def test_truncate_the_tail_of_an_open_session(db_path: Path, store: SqliteStore, notary: Notary) -> None:
    _record(store, notary)
    tamper(db_path, "DELETE FROM events WHERE seq >= 6")
    _rewrite_session_row(db_path)
    assert _audit(store, notary) == {(6, "truncated"), (6, "rollback")}
    _refused(store, notary, "truncated")
    _refused(store, notary, "rollback", full=False)
    # a careful attacker also deletes the checkpoints that cover the removed rows: the retained head remains
    tamper(db_path, "DELETE FROM checkpoints WHERE size > 6")
    assert _audit(store, notary) == {(6, "rollback")}
    _refused(store, notary, "rollback")
    _refused(store, notary, "rollback", full=False)


def test_truncate_a_sealed_session(db_path: Path, store: SqliteStore, notary: Notary) -> None:
    rec = _record(store, notary)
    rec.finish("completed")  # seal at seq 11, checkpoint over 12
    assert audit_session(store, SID, keyring=notary.keyring, heads=notary.heads).sealed
    tamper(db_path, "DELETE FROM events WHERE seq >= 9", "DELETE FROM checkpoints WHERE size > 9")
    _rewrite_session_row(db_path)
    report = audit_session(store, SID, keyring=notary.keyring, heads=notary.heads)
    assert {(d.seq, d.reason) for d in report.divergences} == {(9, "rollback")}
    assert report.state() == "open" and report.retained == 12
    _refused(store, notary, "rollback")
    _refused(store, notary, "rollback", full=False)


def test_roll_the_database_back_to_an_earlier_copy(
    db_path: Path, tmp_path: Path, store: SqliteStore, notary: Notary, open_db: Callable[..., SqliteStore]
) -> None:
    rec = _record(store, notary, n=8)  # checkpoints at 4 and 8
    copy = tmp_path / "backup.db"
    with sqlite3.connect(db_path) as src, sqlite3.connect(copy) as dst:
        src.backup(dst)
    src.close()
    dst.close()
    for i in range(8, 13):
        rec.append(step(i))  # checkpoint at 12, retained
    store.close()
    for suffix in ("-wal", "-shm"):
        Path(str(db_path) + suffix).unlink(missing_ok=True)
    shutil.copyfile(copy, db_path)
    restored = open_db()
    report = audit_session(restored, SID, keyring=notary.keyring, heads=notary.heads)
    assert {(d.seq, d.reason) for d in report.divergences} == {(8, "rollback")}
    assert "rolled back to an earlier copy" in report.divergences[0].detail
    _refused(restored, notary, "rollback")
    _refused(restored, notary, "rollback", full=False)


def test_rollback_to_before_the_session_existed(
    db_path: Path, tmp_path: Path, store: SqliteStore, notary: Notary, open_db: Callable[..., SqliteStore]
) -> None:
    copy = tmp_path / "empty.db"
    with sqlite3.connect(db_path) as src, sqlite3.connect(copy) as dst:
        src.backup(dst)
    src.close()
    dst.close()
    _record(store, notary, n=4)
    store.close()
    for suffix in ("-wal", "-shm"):
        Path(str(db_path) + suffix).unlink(missing_ok=True)
    shutil.copyfile(copy, db_path)
    with pytest.raises(LedgerIntegrityError, match="rollback"):
        Recorder.create(open_db(), session_id=SID, notary=notary)


def test_splice_rows_from_another_session(db_path: Path, store: SqliteStore, notary: Notary) -> None:
    _record(store, notary)
    _record(store, notary, sid=OTHER)
    tamper(
        db_path,
        f"DELETE FROM events WHERE session_id = '{SID}' AND seq >= 5",
        f"UPDATE events SET session_id = '{SID}' WHERE session_id = '{OTHER}' AND seq >= 5",
    )
    _rewrite_session_row(db_path)
    found = _audit(store, notary)
    assert {(5, "broken_link"), (7, "checkpoint_mismatch"), (7, "fork")} <= found
    _refused(store, notary, "broken_link")


def test_replace_a_session_wholesale_with_another(db_path: Path, store: SqliteStore, notary: Notary) -> None:
    _record(store, notary)
    _record(store, notary, sid=OTHER, n=13)
    tamper(
        db_path,
        f"DELETE FROM events WHERE session_id = '{SID}'",
        f"DELETE FROM checkpoints WHERE session_id = '{SID}'",
        f"UPDATE events SET session_id = '{SID}' WHERE session_id = '{OTHER}'",
        f"UPDATE checkpoints SET session_id = '{SID}' WHERE session_id = '{OTHER}'",
    )
    _rewrite_session_row(db_path)
    found = _audit(store, notary)
    assert {(3, "bad_checkpoint"), (11, "bad_checkpoint"), (7, "fork")} <= found
    report = audit_session(store, SID, keyring=notary.keyring, heads=notary.heads)
    assert "origin" in next(d.detail for d in report.divergences if d.reason == "bad_checkpoint")
    _refused(store, notary, "bad_checkpoint")
    _refused(store, notary, "bad_checkpoint", full=False)


def _forge_history(db_path: Path, store: SqliteStore, forger: LogSigner, notary: Notary) -> None:
    """Replace event 3, recompute every chain hash and tree, and sign fresh checkpoints with ``forger``."""
    rows = list(store.read_events(SID))
    tamper(
        db_path,
        f"DELETE FROM events WHERE session_id = '{SID}'",
        f"DELETE FROM checkpoints WHERE session_id = '{SID}'",
    )
    prev, tree = GENESIS, CompactRange()
    evil = Notary.for_signer(forger, HeadStore(db_path.parent / "evil-heads"))
    raw = sqlite3.connect(db_path)
    try:
        for row in rows:
            data = _FORGED if row.seq == 3 else row.event_bytes
            digest = chain_hash(prev, row.seq, data)
            raw.execute(
                "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?)",
                (SID, row.seq, row.kind, data, prev, digest, row.recorded_at_ms),
            )
            tree.append(leaf_hash(data))
            prev = digest
            if tree.size % 4 == 0:
                signed = evil.sign(origin_for(store.ledger_id(), SID), tree.size, tree.root(), prev)
                cur = raw.execute(
                    "INSERT INTO checkpoints (session_id, size, root, body, created_at_ms) VALUES (?, ?, ?, ?, 0)",
                    (SID, tree.size, tree.root().hex(), signed.note),
                )
                raw.execute(
                    "INSERT INTO checkpoint_frontiers VALUES (?, ?)", (cur.lastrowid, encode_frontier(tree))
                )
        raw.commit()
    finally:
        raw.close()
    _rewrite_session_row(db_path)


def test_forge_checkpoints_signed_with_another_key(db_path: Path, store: SqliteStore, notary: Notary) -> None:
    _record(store, notary)
    forger = LogSigner.generate(notary.signer.name)  # same key name, another key
    _forge_history(db_path, store, forger, notary)
    found = _audit(store, notary)
    assert {(3, "bad_checkpoint"), (7, "bad_checkpoint"), (7, "fork")} <= found
    report = audit_session(store, SID, keyring=notary.keyring, heads=notary.heads)
    assert all(
        "no signature by a trusted key" in d.detail
        for d in report.divergences
        if d.reason == "bad_checkpoint"
    )
    assert report.anchored == 0 and report.unanchored == (0, 10)  # nothing the forger signed counts
    _refused(store, notary, "bad_checkpoint")
    _refused(store, notary, "bad_checkpoint", full=False)


def test_forge_without_a_retained_head_is_still_unsigned(
    db_path: Path, store: SqliteStore, notary: Notary, heads: HeadStore
) -> None:
    _record(store, notary)
    _forge_history(db_path, store, LogSigner.generate("evil.example/log"), notary)
    shutil.rmtree(heads.directory)
    found = _audit(store, notary)
    assert {(3, "bad_checkpoint"), (7, "bad_checkpoint")} == found


def test_replay_an_old_head(db_path: Path, store: SqliteStore, notary: Notary) -> None:
    _record(store, notary)
    tamper(db_path, "DELETE FROM checkpoints WHERE size > 4")  # the old, validly signed head is now latest
    found = _audit(store, notary)
    assert found == {(4, "stale_head")}
    _refused(store, notary, "stale_head")
    _refused(store, notary, "stale_head", full=False)


def test_append_after_the_seal(db_path: Path, store: SqliteStore, notary: Notary) -> None:
    rec = _record(store, notary, n=5)
    rec.finish("completed")
    plain = Recorder.attach(store, SID)  # a writer without the notary ignores the seal...
    plain.append(step(99))
    assert (6, "after_seal") in _audit(store, notary)  # ...and verification says so
    _refused(store, notary, "after_seal")


# ─── known limits, pinned so they stay explicit ───────────────────────────────────────────────
def test_dropping_only_the_unanchored_tail_is_not_detectable_locally(
    db_path: Path, store: SqliteStore, notary: Notary
) -> None:
    _record(store, notary)  # anchored through 8, seqs 8..10 unanchored
    tamper(db_path, "DELETE FROM events WHERE seq >= 9")
    _rewrite_session_row(db_path)
    report = audit_session(store, SID, keyring=notary.keyring, heads=notary.heads)
    assert report.ok and report.anchored == 8 and report.unanchored == (8, 8)


def test_cheap_resume_does_not_reread_anchored_rows(
    db_path: Path, store: SqliteStore, notary: Notary
) -> None:
    _record(store, notary)
    tamper(db_path, f"UPDATE events SET event = x'{_FORGED.hex()}' WHERE seq = 3")
    Recorder.attach(store, SID, notary=notary, full=False, take_authority=False)  # accepted: documented
    _refused(store, notary, "hash_mismatch")  # the default, full, refuses


def test_delete_a_whole_session(db_path: Path, store: SqliteStore, notary: Notary) -> None:
    _record(store, notary)
    _record(store, notary, sid=OTHER)
    assert missing_sessions(store, notary.heads) == []
    tamper(
        db_path,
        f"DELETE FROM events WHERE session_id = '{SID}'",
        f"DELETE FROM checkpoints WHERE session_id = '{SID}'",
        f"DELETE FROM sessions WHERE session_id = '{SID}'",
        f"DELETE FROM authority_epochs WHERE session_id = '{SID}'",
    )
    assert [h.session_id for h in missing_sessions(store, notary.heads)] == [SID]
    with pytest.raises(LedgerIntegrityError, match="rollback"):
        Recorder.create(store, session_id=SID, notary=notary)
