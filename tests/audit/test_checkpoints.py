"""Signed checkpoints (C2SP tlog-checkpoint + signed-note) and the recorder's cadence, seal and resume."""

from __future__ import annotations

import base64
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from flightlog.encoding import decode_stored
from flightlog.errors import FlightlogError, LedgerIntegrityError, SessionBusy, StoreError
from flightlog.events import Custom
from flightlog.integrity.checkpoints import (
    Checkpoint,
    decode_frontier,
    encode_frontier,
    open_checkpoint,
    origin_for,
)
from flightlog.integrity.heads import HeadStore
from flightlog.integrity.keys import Keyring, LogSigner, TrustedKey
from flightlog.integrity.notary import Notary
from flightlog.integrity.notes import MAX_SIGNATURES, NoteError, open_note, parse_note, sign_note
from flightlog.integrity.verify import audit_session
from flightlog.ledger import CompactRange, leaf_hash, merkle_root
from flightlog.notarization import SEAL_KIND, SessionSealed
from flightlog.recorder import Recorder, verify_session
from flightlog.store import SqliteStore

from .conftest import SID, step

ROOT = bytes(range(32))


def _ring(*signers: LogSigner) -> Keyring:
    return Keyring([TrustedKey(s.verifier) for s in signers])


# ─── signed notes ─────────────────────────────────────────────────────────────────────────────
def test_note_round_trip_with_two_signers(signer: LogSigner) -> None:
    witness = LogSigner.generate("witness.example/w1")
    note = sign_note("hello\nworld\n", signer, witness)
    parsed = parse_note(note)
    assert parsed.text == "hello\nworld\n" and [s.name for s in parsed.signatures] == [
        signer.name,
        witness.name,
    ]
    assert str(parsed) == note
    assert open_note(note, _ring(witness)).text == "hello\nworld\n"  # unknown signers are ignored


def test_a_note_may_hold_empty_lines_the_last_blank_line_splits(signer: LogSigner) -> None:
    note = sign_note("a\n\nb\n", signer)
    assert open_note(note, _ring(signer)).text == "a\n\nb\n"


def _sig_line(signer: LogSigner, text: str) -> str:
    return parse_note(sign_note(text, signer)).signatures[0].line()


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda n: n.replace("\n\n", "\n"), "no blank line"),
        (lambda n: n.replace("\u2014 ", "-- "), "em dash"),
        (lambda n: n.rsplit(" ", 1)[0] + " !!!!\n", "not base64"),
        (lambda n: n.rsplit(" ", 1)[0] + " AAAA\n", "too short"),
        (lambda n: n.replace("hello", "hel\x01lo"), "control character"),
        (lambda n: n[:-1], "end with a newline"),
        (lambda n: n.split("\n\n")[0] + "\n\n", "no signature lines"),
        (lambda n: n.replace("\u2014 ", "\u2014 bad+name ", 1), "malformed signature line"),
    ],
)
def test_malformed_notes_are_rejected(signer: LogSigner, mutate: Callable[[str], str], reason: str) -> None:
    note = sign_note("hello\n", signer)
    with pytest.raises(NoteError, match=reason):
        open_note(mutate(note), _ring(signer))


def test_too_many_signatures_are_rejected(signer: LogSigner) -> None:
    note = sign_note("hello\n", signer)
    line = note.split("\n\n")[1]
    with pytest.raises(NoteError, match=f"more than {MAX_SIGNATURES}"):
        parse_note(note + line * MAX_SIGNATURES)


def test_unknown_keys_bad_signatures_and_windows(signer: LogSigner) -> None:
    other = LogSigner.generate("test.example/log")  # same name, another key: another key ID
    note = sign_note("hello\n", signer)
    with pytest.raises(NoteError, match="no signature by a trusted key"):
        open_note(note, _ring(other))
    forged = note.replace("hello", "hellO")
    with pytest.raises(NoteError, match="does not verify"):
        open_note(forged, _ring(signer))
    # a known key's failing signature rejects the note even when another known key signed it
    both = sign_note("hello\n", other) + _sig_line(signer, "other text\n") + "\n"
    with pytest.raises(NoteError, match="does not verify"):
        open_note(both, _ring(signer, other))
    windowed = Keyring([TrustedKey(signer.verifier, not_before_ms=100, not_after_ms=200)])
    assert open_note(note, windowed, at_ms=150)
    for at in (99, 200):
        with pytest.raises(NoteError, match="not valid at"):
            open_note(note, windowed, at_ms=at)


# ─── checkpoint bodies ────────────────────────────────────────────────────────────────────────
def test_checkpoint_text_follows_tlog_checkpoint() -> None:
    cp = Checkpoint.make("flightlog.local/abcd1234/s", 7, ROOT, time_ms=123, chain="ab" * 32)
    text = cp.text()
    assert text.splitlines() == [
        "flightlog.local/abcd1234/s",
        "7",
        base64.b64encode(ROOT).decode(),
        "time 123",
        "chain " + "ab" * 32,
    ]
    assert Checkpoint.parse(text) == cp
    assert Checkpoint.parse("o\n0\n" + base64.b64encode(ROOT).decode() + "\nopaque ext\n").extensions == (
        "opaque ext",
    )


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("o\n7\n", "three non-empty lines"),
        ("o\n07\nAAAA\n", "leading zeros"),
        ("o\n-1\nAAAA\n", "decimal"),
        ("o\n7\nAAAA\n", "32 bytes"),
        ("o\n7\n" + base64.b64encode(ROOT).decode().rstrip("=") + "\n", "base64"),
        ("o\n7\n" + base64.b64encode(ROOT).decode() + "\n\n", "three non-empty lines"),
        ("o\n7\n" + base64.b64encode(ROOT).decode() + "\ntime 1\ntime 2\n", "repeated"),
        ("o\n7\n" + base64.b64encode(ROOT).decode() + "\ntime soon\n", "time extension"),
        ("o\n7\n" + base64.b64encode(ROOT).decode() + "\nchain ABC\n", "chain extension"),
        ("o\n7\n" + base64.b64encode(ROOT).decode(), "newline"),
    ],
)
def test_malformed_checkpoints_are_rejected(text: str, reason: str) -> None:
    with pytest.raises(NoteError, match=reason):
        Checkpoint.parse(text)


def test_open_checkpoint_checks_origin_time_and_key(signer: LogSigner) -> None:
    origin = origin_for("abcd1234", "codex:a b+c/d")
    assert origin == "flightlog.local/abcd1234/codex:a%20b%2Bc%2Fd"
    note = sign_note(Checkpoint.make(origin, 3, ROOT, time_ms=50, chain="00" * 32).text(), signer)
    signed = open_checkpoint(note, _ring(signer), origin=origin)
    assert (signed.size, signed.root, signed.checkpoint.time_ms) == (3, ROOT, 50)
    with pytest.raises(NoteError, match="origin"):
        open_checkpoint(note, _ring(signer), origin=origin_for("abcd1234", "other"))
    untimed = sign_note(Checkpoint(origin, 3, ROOT).text(), signer)
    with pytest.raises(NoteError, match="no time"):
        open_checkpoint(untimed, _ring(signer))
    late = Keyring([TrustedKey(signer.verifier, not_before_ms=51)])
    with pytest.raises(NoteError, match="not valid at 50"):
        open_checkpoint(note, late)


def test_frontier_round_trip() -> None:
    tree = CompactRange()
    for i in range(13):
        tree.append(leaf_hash(bytes([i])))
        again = decode_frontier(tree.size, encode_frontier(tree))
        assert again.root() == tree.root() and again.size == tree.size
    with pytest.raises(ValueError, match="needs"):
        decode_frontier(13, encode_frontier(tree)[:-1])


# ─── the recorder: cadence, checkpoint(), seal ────────────────────────────────────────────────
def _notes(store: SqliteStore) -> list[tuple[int, str]]:
    return [(c.size, c.body) for c in store.checkpoints(SID)]


def test_cadence_signs_once_every_n_events_at_batch_ends(store: SqliteStore, notary: Notary) -> None:
    rec = Recorder.create(store, session_id=SID, notary=notary)  # every=4
    for i in range(3):
        rec.append(step(i))
    assert _notes(store) == []
    rec.append(step(3))
    assert [s for s, _ in _notes(store)] == [4]
    rec.append_many([step(i) for i in range(4, 15)])  # one checkpoint per batch, at its end
    assert [s for s, _ in _notes(store)] == [4, 15]
    signed = open_checkpoint(_notes(store)[-1][1], notary.keyring, origin=origin_for(store.ledger_id(), SID))
    assert (signed.size, signed.root.hex(), signed.checkpoint.chain) == (15, rec.root, rec.head)
    assert store.checkpoint_frontier(store.checkpoints(SID)[-1].checkpoint_id) == encode_frontier(rec._tree)


def test_checkpoint_on_demand_and_without_a_notary(store: SqliteStore, notary: Notary) -> None:
    plain = Recorder.create(store, session_id="plain")
    plain.append(step(0))
    assert plain.checkpoint() is None
    rec = Recorder.create(store, session_id=SID, notary=notary)
    assert rec.checkpoint() is None  # nothing to anchor yet
    rec.append(step(0))
    first = rec.checkpoint()
    assert first is not None and first.size == 1
    assert rec.checkpoint() is first  # nothing new: the latest is returned, no new signature
    assert [s for s, _ in _notes(store)] == [1]


def test_checkpoint_shares_the_transaction_of_its_events(
    store: SqliteStore, notary: Notary, heads: HeadStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec = Recorder.create(store, session_id=SID, notary=notary)
    rec.append_many([step(i) for i in range(3)])

    def refuse(*args: Any) -> None:
        raise StoreError("frontier write failed (injected)")

    with monkeypatch.context() as patch:
        patch.setattr(store, "record_checkpoint_frontier", refuse)
        with pytest.raises(StoreError, match="injected"):
            rec.append(step(3))
    assert rec.next_seq == 3 and [e.seq for e in store.read_events(SID)] == [0, 1, 2]
    assert store.checkpoints(SID) == []
    assert heads.load(store.ledger_id(), SID) is None  # nothing retained for a rolled-back checkpoint
    rec.append(step(3))
    assert [s for s, _ in _notes(store)] == [4]
    retained = heads.load(store.ledger_id(), SID)
    assert retained is not None and retained.note == _notes(store)[0][1]


def test_outer_rollback_undoes_the_checkpoint_state(
    store: SqliteStore, notary: Notary, heads: HeadStore
) -> None:
    rec = Recorder.create(store, session_id=SID, notary=notary)
    rec.append(step(0))
    with pytest.raises(RuntimeError), store.transaction():
        rec.append_many([step(i) for i in range(1, 6)])
        assert rec.checkpoint() is not None
        raise RuntimeError("caller aborts")
    assert store.checkpoints(SID) == [] and heads.load(store.ledger_id(), SID) is None
    assert rec.next_seq == 1
    assert rec.checkpoint() is not None and [s for s, _ in _notes(store)] == [1]


def test_finish_seals_and_later_appends_are_refused(
    store: SqliteStore, notary: Notary, heads: HeadStore
) -> None:
    rec = Recorder.create(store, session_id=SID, notary=notary)
    rec.append_many([step(i) for i in range(6)])
    root_before = rec.root
    rec.finish("completed")
    rows = list(store.read_events(SID))
    seal = decode_stored(rows[-1].event_bytes)
    assert isinstance(seal, Custom) and seal.custom_kind == SEAL_KIND
    assert seal.payload == {"size": 6, "root": root_before, "status": "completed"}
    assert [s for s, _ in _notes(store)][-1] == 7
    assert store.get_session(SID).status == "completed"
    with pytest.raises(SessionSealed):
        rec.append(step(7))
    rec.finish("failed")  # already sealed: only the status changes
    assert store.get_session(SID).status == "failed" and len(list(store.read_events(SID))) == 7
    retained = heads.load(store.ledger_id(), SID)
    assert retained is not None and retained.sealed
    report = audit_session(store, SID, keyring=notary.keyring, heads=heads)
    assert report.ok and report.sealed and report.seal_status == "completed" and report.unanchored is None
    assert "sealed (completed)" in report.summary()


def test_finish_without_a_notary_is_only_a_status(store: SqliteStore) -> None:
    rec = Recorder.create(store, session_id=SID)
    rec.append(step(0))
    rec.finish("completed")
    assert len(list(store.read_events(SID))) == 1


def test_audit_reports_the_unanchored_tail_of_an_open_session(
    store: SqliteStore, notary: Notary, heads: HeadStore
) -> None:
    rec = Recorder.create(store, session_id=SID, notary=notary)
    rec.append_many([step(i) for i in range(5)])  # checkpoint at 5
    rec.append(step(5))
    rec.append(step(6))
    report = audit_session(store, SID, keyring=notary.keyring, heads=heads)
    assert report.ok and report.state() == "open" and not report.sealed
    assert (report.anchored, report.unanchored, report.retained) == (5, (5, 6), 5)
    assert "unanchored tail: seqs 5..6" in report.summary()
    doc = report.to_json()
    assert doc["unanchored"] == {"first": 5, "last": 6} and doc["state"] == "open"
    plain = verify_session(store, SID)  # the chain-only verify agrees on the rows
    assert plain.ok and plain.root == report.root


def test_an_unsigned_session_is_all_unanchored(store: SqliteStore, notary: Notary, heads: HeadStore) -> None:
    rec = Recorder.create(store, session_id=SID)
    rec.append_many([step(i) for i in range(3)])
    report = audit_session(store, SID, keyring=notary.keyring, heads=heads)
    assert report.ok and report.unanchored == (0, 2) and report.checkpoints == 0 and report.retained is None


# ─── resume ───────────────────────────────────────────────────────────────────────────────────
@pytest.mark.parametrize("full", [True, False])
def test_resume_continues_the_chain_tree_and_cadence(
    store: SqliteStore, open_db: Callable[..., SqliteStore], notary: Notary, full: bool
) -> None:
    rec = Recorder.create(store, session_id=SID, notary=notary)
    rec.append_many([step(i) for i in range(10)])
    rec.append(step(10))  # unanchored tail: seq 10
    other = open_db()
    resumed = Recorder.attach(other, SID, notary=notary, full=full)
    assert (resumed.next_seq, resumed.head, resumed.root) == (rec.next_seq, rec.head, rec.root)
    assert resumed.epoch == 1
    resumed.append_many([step(i) for i in range(11, 14)])  # 4 unanchored now: due
    assert [s for s, _ in _notes(other)] == [10, 14]
    leaves = [leaf_hash(r.event_bytes) for r in other.read_events(SID)]
    assert resumed.root == merkle_root(leaves).hex()
    resumed.finish("done")
    assert audit_session(other, SID, keyring=notary.keyring, heads=notary.heads).sealed
    again = Recorder.attach(other, SID, notary=notary, full=full)
    with pytest.raises(SessionSealed):
        again.append(step(99))


def test_cheap_resume_reads_only_the_tail(
    store: SqliteStore, notary: Notary, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec = Recorder.create(store, session_id=SID, notary=notary)
    rec.append_many([step(i) for i in range(200)])
    rec.append_many([step(i) for i in range(200, 203)])  # tail: 3 rows
    seen: list[int] = []
    real = store.read_events

    def counting(session_id: str, **kwargs: Any) -> Any:
        for row in real(session_id, **kwargs):
            seen.append(row.seq)
            yield row

    monkeypatch.setattr(store, "read_events", counting)
    resumed = Recorder.attach(store, SID, notary=notary, full=False)
    assert sorted(seen) == [199, 200, 201, 202]  # the last anchored row and the tail
    assert resumed.root == rec.root


def test_cheap_resume_reads_an_append_during_its_check_as_another_writer_not_tampering(
    store: SqliteStore, notary: Notary, open_db: Callable[..., SqliteStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A live writer appends right after the cheap resume read the session row and before it read the tail:
    the row and the rows disagree, but the head moved meanwhile, so it is another writer (``SessionBusy``,
    the epoch untouched), not the tampering message ``head_mismatch`` (what two racing resumes got)."""
    rec = Recorder.create(store, session_id=SID, notary=notary)
    rec.append_many([step(i) for i in range(10)])
    other = open_db()
    real = other.get_session
    reads: list[int] = []

    def racing(session_id: str) -> Any:
        record = real(session_id)
        reads.append(record.head_seq)
        if len(reads) == 2:  # the cheap path's read of the session row: the writer appends right after it
            rec.append(step(10))
        return record

    monkeypatch.setattr(other, "get_session", racing)
    with pytest.raises(SessionBusy, match=f"session {SID} is held by another writer") as info:
        Recorder.attach(other, SID, notary=notary, full=False)
    assert info.value.seq == 10 and store.authority_epoch(SID) == 0
    assert rec.append(step(11)).seq == 11  # the live writer goes on
    monkeypatch.undo()
    assert Recorder.attach(other, SID, notary=notary, full=False).next_seq == 12


def test_cheap_resume_refuses_a_tail_row_whose_kind_column_was_edited(
    store: SqliteStore, notary: Notary, db_path: Path
) -> None:
    """The resume that reads only the unanchored tail checks each tail row's kind column against its
    bytes too (the chain hash does not cover the column): refused naming the seq (attack, kind_mismatch)."""
    rec = Recorder.create(store, session_id=SID, notary=notary)
    rec.append_many([step(i) for i in range(4)])
    rec.append(step(4))  # unanchored tail: seq 4
    with sqlite3.connect(db_path) as conn:
        conn.execute("DROP TRIGGER IF EXISTS events_no_update")
        conn.execute("UPDATE events SET kind = 'run_started' WHERE session_id = ? AND seq = 4", (SID,))
    conn.close()
    with pytest.raises(LedgerIntegrityError) as refused:
        Recorder.attach(store, SID, notary=notary, full=False)
    assert [(d.seq, d.reason) for d in refused.value.divergences] == [(4, "kind_mismatch")]


def test_cheap_resume_falls_back_to_full_without_a_checkpoint(store: SqliteStore, notary: Notary) -> None:
    rec = Recorder.create(store, session_id=SID, notary=notary)
    rec.append_many([step(i) for i in range(2)])
    resumed = Recorder.attach(store, SID, notary=notary, full=False)
    assert resumed.root == rec.root
    with pytest.raises(ValueError, match="needs a notary"):
        Recorder.attach(store, SID, full=False)


def test_resume_retains_a_lagging_head(store: SqliteStore, notary: Notary, heads: HeadStore) -> None:
    rec = Recorder.create(store, session_id=SID, notary=notary)
    rec.append_many([step(i) for i in range(4)])
    path = heads.path(store.ledger_id(), SID)
    path.unlink()  # e.g. a crash between the commit and the head write
    Recorder.attach(store, SID, notary=notary, full=False)
    assert json.loads(path.read_text())["size"] == 4


def test_head_store_never_moves_backwards(store: SqliteStore, notary: Notary, heads: HeadStore) -> None:
    rec = Recorder.create(store, session_id=SID, notary=notary)
    rec.append_many([step(i) for i in range(4)])
    first = rec.checkpoint()
    rec.append_many([step(i) for i in range(4, 8)])
    assert first is not None
    assert heads.save(store.ledger_id(), SID, first, sealed=False) is False
    assert json.loads(heads.path(store.ledger_id(), SID).read_text())["size"] == 8


def test_a_corrupt_head_file_is_refused_not_ignored(
    store: SqliteStore, notary: Notary, heads: HeadStore
) -> None:
    rec = Recorder.create(store, session_id=SID, notary=notary)
    rec.append_many([step(i) for i in range(4)])
    heads.path(store.ledger_id(), SID).write_text("{not json")
    with pytest.raises(LedgerIntegrityError, match="retained head"):
        Recorder.attach(store, SID, notary=notary)
    with pytest.raises(NoteError):
        heads.load(store.ledger_id(), SID)


def test_notary_must_trust_its_own_key(signer: LogSigner, heads: HeadStore) -> None:
    other = LogSigner.generate("test.example/other")
    with pytest.raises(FlightlogError, match="not trusted"):
        Notary(signer, _ring(other), heads)
    with pytest.raises(ValueError, match="every"):
        Notary.for_signer(signer, heads, every=0)


def test_notary_from_env_creates_and_reuses_the_users_key(tmp_path: Path, store: SqliteStore) -> None:
    first = Notary.from_env()
    assert (tmp_path / "keys" / "keys.json").exists()
    assert Notary.from_env().signer.verifier == first.signer.verifier
    assert first.heads.directory == tmp_path / "heads"
    rec = Recorder.create(store, session_id=SID, notary=first)
    rec.append(step(0))
    rec.finish("completed")
    assert audit_session(store, SID, heads=first.heads).sealed  # default keyring: the user's


def test_a_retired_key_refuses_to_sign(store: SqliteStore, signer: LogSigner, heads: HeadStore) -> None:
    ring = Keyring([TrustedKey(signer.verifier, not_before_ms=0, not_after_ms=1_000)])
    notary = Notary(signer, ring, heads, every=1, clock=lambda: 1_000)
    rec = Recorder.create(store, session_id=SID, notary=notary)
    with pytest.raises(FlightlogError, match="not valid at 1000"):
        rec.append(step(0))
    assert list(store.read_events(SID)) == []  # the append rolled back with its checkpoint


def test_rotation_keeps_old_checkpoints_verifiable(store: SqliteStore, heads: HeadStore) -> None:
    from flightlog.integrity.keys import load_keyring, load_signer, rotate_key

    old = load_signer()
    clock = [1_000]
    notary = Notary(old, load_keyring(), heads, every=2, clock=lambda: clock[0])
    rec = Recorder.create(store, session_id=SID, notary=notary)
    rec.append_many([step(0), step(1)])  # signed by the old key at t=1000
    new = rotate_key(at_ms=2_000)
    clock[0] = 3_000
    rec._notary.notary = Notary(new, load_keyring(), heads, every=2, clock=lambda: clock[0])  # type: ignore[union-attr]
    rec.append_many([step(2), step(3)])  # signed by the new key at t=3000
    keyring = load_keyring()
    report = audit_session(store, SID, keyring=keyring, heads=heads)
    assert report.ok and report.checkpoints == 2
    signers = [open_checkpoint(c.body, keyring).key for c in store.checkpoints(SID)]
    assert [k.verifier if k else None for k in signers] == [old.verifier, new.verifier]
    # a checkpoint the old key signs after its retirement does not verify
    late = Notary(old, Keyring([TrustedKey(old.verifier)]), heads, clock=lambda: 3_000)
    forged = late.sign(origin_for(store.ledger_id(), SID), 4, bytes.fromhex(rec.root), rec.head)
    with pytest.raises(NoteError, match="not valid at 3000"):
        open_checkpoint(forged.note, keyring)


def _counting_reads(store: SqliteStore, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    seen: list[int] = []
    real = store.read_events

    def counting(session_id: str, **kwargs: Any) -> Any:
        for row in real(session_id, **kwargs):
            seen.append(row.seq)
            yield row

    monkeypatch.setattr(store, "read_events", counting)
    return seen


def test_cheap_resume_checks_a_lagging_retained_head_through_the_gap(
    store: SqliteStore, notary: Notary, heads: HeadStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec = Recorder.create(store, session_id=SID, notary=notary)
    rec.append_many([step(i) for i in range(4)])
    older = rec.checkpoint()
    rec.append_many([step(i) for i in range(4, 8)])
    assert older is not None
    path = heads.path(store.ledger_id(), SID)
    path.unlink()
    heads.save(store.ledger_id(), SID, older, sealed=False)  # as if the newer head write was lost
    seen = _counting_reads(store, monkeypatch)
    resumed = Recorder.attach(store, SID, notary=notary, full=False)
    assert sorted(seen) == [4, 5, 6, 7, 7]  # the gap between the heads, then the last anchored row
    assert resumed.root == rec.root
    assert json.loads(path.read_text())["size"] == 8  # caught up


def test_a_damaged_frontier_sends_cheap_resume_to_the_full_path(
    db_path: Path, store: SqliteStore, notary: Notary, monkeypatch: pytest.MonkeyPatch
) -> None:
    from .conftest import tamper

    rec = Recorder.create(store, session_id=SID, notary=notary)
    rec.append_many([step(i) for i in range(6)])
    tamper(db_path, "UPDATE checkpoint_frontiers SET hashes = zeroblob(64)")
    seen = _counting_reads(store, monkeypatch)
    resumed = Recorder.attach(store, SID, notary=notary, full=False)
    assert sorted(seen) == list(range(6))  # every row: the cache was not trusted
    assert (resumed.root, resumed.head) == (rec.root, rec.head)
