"""``db accept-restore`` against a laundered history (attack pass, findings 1-5).

The attack: a finished session on a signing store is rewritten (events edited, the chain recomputed, the
database truncated), its checkpoints and the index log's leaves and checkpoints deleted. ``verify`` refuses
it and names accept-restore; accept-restore used to accept it as an "older copy" (only the latest retained
head was kept, and a truncated rewrite is smaller than it, as an older copy is) and re-anchor it, after
which ``verify`` and ``audit`` passed. The retained head history tells them apart: an older copy has the
retained root at every retained size it reaches, and still holds a signed checkpoint covering them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from flightlog.encoding import canonical_json
from flightlog.errors import StoreError
from flightlog.integrity import heads as heads_module
from flightlog.integrity.checkpoints import Checkpoint, origin_for
from flightlog.integrity.heads import HISTORY_LIMIT, HeadStore, thinned
from flightlog.integrity.keys import LogSigner
from flightlog.integrity.notary import Notary
from flightlog.integrity.notes import NoteError, parse_note
from flightlog.ledger import chain_hash
from flightlog.ops import restore
from flightlog.ops.restore import RESTORE_LOG, accept_restore
from flightlog.store import open_store

from .helpers import backup, cli, connect, execute, head_files, rechain, suspended_run, swap_goal, unchanged


def finished_run(db: Path | str) -> str:
    """A run of the approval agent, approved and run to its end on the default (signing) notary."""
    sid = suspended_run(db)
    code, _, err = cli(db, "approve", sid, "n1", "--as", "bob")
    assert code == 0, err
    return sid


@pytest.fixture
def copies(tmp_path: Path) -> tuple[Path, Path, str]:
    """``a.db`` holding a run waiting on ``n1``; ``b.db`` its ``.backup`` copy, written to (``n1`` approved
    there: its effects, its retained heads), so ``a.db`` is an older copy."""
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    sid = suspended_run(a)
    backup(a, b)
    assert cli(b, "approve", sid, "n1", "--as", "bob")[0] == 0
    return a, b, sid


def drop_index(db: Path | str) -> None:
    """Delete every index log leaf and index checkpoint (the session is the only one indexed)."""
    raw = connect(db)
    try:
        raw.execute("DELETE FROM index_leaves")
        raw.execute("DELETE FROM index_checkpoints")
        raw.commit()
    finally:
        raw.close()


def aside_folders() -> list[Path]:
    return sorted(Path(os.environ["FLIGHTLOG_HEAD_DIR"]).rglob("replaced-*"))


def launder_refused(db: Path | str, sid: str, reason: str) -> None:
    """verify names accept-restore; accept-restore refuses (exit 1, the reason, --accept-fork), moves and
    writes nothing; verify still refuses."""
    code, out, _ = cli(db, "verify", "--all", "--offline")
    assert code == 1 and "flightlog db accept-restore" in out, out
    before, listed = head_files(), cli(db, "ls", "--json")[1]
    code, out, err = cli(db, "db", "accept-restore", "--reason", "restored last night's copy")
    assert code == 1, out + err
    assert f"ledger of session {sid} diverges" in err and f": {reason}: session {sid}" in err, err
    assert "--accept-fork" in err and "rewritten" in err, err
    assert head_files() == before and not aside_folders()
    assert cli(db, "verify", "--all", "--offline")[0] == 1
    assert cli(db, "ls", "--json")[1] == listed  # nothing written to the restore log


def test_a_truncated_rewrite_is_refused_as_a_fork_unless_accepted_as_one(url: str) -> None:
    sid = finished_run(url)
    rechain(url, sid, swap_goal("wire the money elsewhere"), keep=5)
    drop_index(url)
    launder_refused(url, sid, "fork")
    assert (
        "is not a prefix of its retained head history: at size "
        in cli(url, "db", "accept-restore", "--reason", "x")[2]
    )

    code, out, err = cli(url, "db", "accept-restore", "--reason", "I rewrote it", "--accept-fork", "--json")
    assert code == 0, err
    done = json.loads(out)
    assert done["accepted_fork"] is True and done["behind"] == [sid]
    [head] = [h for h in done["replaced"] if h["session_id"] == sid]
    fork = head["fork"]
    assert fork["size"] <= 5 and fork["retained_root"] != fork["root"], head
    assert "recorded only in the other copy" in err and "idempotency key is the only guard" in err, err
    code, out, _ = cli(url, "show", RESTORE_LOG, "--json")
    [event] = [row for row in map(json.loads, out.splitlines()) if row["kind"] == "custom"]
    payload = event["event"]["payload"]
    assert payload["accept_fork"] is True
    [recorded] = [h for h in payload["heads"] if h["session_id"] == sid]
    assert recorded["fork"] == fork  # both roots, on record
    assert cli(url, "runs", "--rebuild")[0] == 0  # the attacker's rewrite left the runs projection stale
    assert cli(url, "verify", "--all", "--offline")[0] == 0  # accepted on record, as a fork


def test_a_truncation_whose_checkpoints_were_deleted_is_refused_as_unsigned(url: str) -> None:
    sid = finished_run(url)
    rechain(url, sid, unchanged, keep=5)  # a true prefix, but its signed checkpoints are gone
    drop_index(url)
    launder_refused(url, sid, "unsigned")
    err = cli(url, "db", "accept-restore", "--reason", "x")[2]
    assert "had a signed checkpoint retained at size " in err and "no signed checkpoint" in err, err


def test_an_older_copy_is_accepted_and_the_events_only_the_other_copy_had_are_named(
    copies: tuple[Path, Path, str],
) -> None:
    a, b, sid = copies
    held = json.loads(cli(a, "ls", "--json")[1])
    size = next(r["events"] for r in held if r["session_id"] == sid)
    retained = json.loads(cli(b, "ls", "--json")[1])
    theirs = next(r["events"] for r in retained if r["session_id"] == sid)

    code, out, err = cli(a, "db", "accept-restore", "--reason", "a.db is the truth")
    assert code == 0, err
    [warning] = [line for line in err.splitlines() if "warning" in line]
    assert warning.startswith(
        f"flightlog: warning: session {sid}: the replaced head covered {theirs} events, this database "
        f"holds {size}: events {size}..{theirs - 1} were recorded only in the other copy"
    ), warning
    assert "a resume may perform it again" in warning and "idempotency key is the only guard" in warning
    assert "kept as a fork" not in out
    assert cli(a, "verify", "--all", "--offline")[0] == 0
    # the new history starts from the retained sizes a.db agreed with (b.db's later ones are set aside)
    with open_store(str(a)) as store:
        history = Notary.from_env().heads.history(store.ledger_id(), sid)
    assert len(history) >= 2 and history[-1][0] == size, history


def test_a_hand_appended_restore_log_entry_is_refused(copies: tuple[Path, Path, str]) -> None:
    a = copies[0]
    assert cli(a, "db", "accept-restore", "--reason", "a.db is the truth")[0] == 0
    assert cli(a, "verify", "--all", "--offline")[0] == 0
    raw = connect(a)
    seq, prev, at = raw.execute(
        "SELECT seq, hash, recorded_at_ms FROM events WHERE session_id = ? ORDER BY seq DESC LIMIT 1",
        (RESTORE_LOG,),
    ).fetchone()
    forged = canonical_json(
        {"kind": "custom", "custom_kind": "heads_replaced", "payload": {"reason": "forged", "heads": []}}
    )
    raw.execute(
        "INSERT INTO events (session_id, seq, kind, event, prev_hash, hash, recorded_at_ms) "
        "VALUES (?, ?, 'custom', ?, ?, ?, ?)",
        (RESTORE_LOG, seq + 1, forged, prev, chain_hash(prev, seq + 1, forged), at),
    )
    raw.execute("UPDATE sessions SET head_seq = head_seq + 1 WHERE session_id = ?", (RESTORE_LOG,))
    raw.commit()
    raw.close()
    execute(a, "UPDATE sessions SET merkle_root = '' WHERE session_id = 'flightlog:restores'")
    for command in ("verify", "audit"):
        code, out, _ = cli(a, command, RESTORE_LOG, "--offline")
        assert code == 1, (command, out)
        assert f"seq {seq + 1}" in out or f"sequence {seq + 1}" in out, (command, out)
        assert "unanchored_restore" in out and f"seqs {seq + 1}..{seq + 1} of the restore log" in out, out


def test_the_restore_log_is_no_run_in_listings(copies: tuple[Path, Path, str]) -> None:
    a = copies[0]
    assert cli(a, "db", "accept-restore", "--reason", "a.db is the truth")[0] == 0
    listed = {r["session_id"]: r["status"] for r in json.loads(cli(a, "ls", "--json")[1])}
    assert listed[RESTORE_LOG] == "no run", listed
    code, out, _ = cli(a, "runs", "--json")
    assert code == 0 and RESTORE_LOG not in out


def _notary(tmp_path: Path) -> Notary:
    return Notary.for_signer(LogSigner.generate("test.example/log"), HeadStore(tmp_path / "heads"))


def test_a_failed_attempt_never_moves_a_head_backwards_and_leaves_no_empty_folder(
    copies: tuple[Path, Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _, sid = copies
    notary = Notary.from_env()
    heads = notary.heads

    def fails(*args: object) -> int:
        raise StoreError("the disk is full")

    monkeypatch.setattr(restore, "_ledger", fails)
    before = head_files()
    with open_store(str(a)) as store, pytest.raises(StoreError, match="the disk is full"):
        lid = store.ledger_id()
        accept_restore(store, reason="r", operator="ops", notary=notary)
    assert head_files() == before and not aside_folders()  # everything back, no empty folder

    newer = heads.path(lid, sid)
    written = b'{"newer": true}\n'

    def writer_meanwhile(*args: object) -> int:
        newer.write_bytes(written)  # a copy retained a head while the attempt ran
        raise StoreError("the disk is full")

    monkeypatch.setattr(restore, "_ledger", writer_meanwhile)
    with open_store(str(a)) as store, pytest.raises(StoreError):
        accept_restore(store, reason="r", operator="ops", notary=notary)
    assert newer.read_bytes() == written  # never moved backwards over it
    [folder] = aside_folders()
    assert [p.name for p in folder.iterdir()] == [newer.name]  # the old head stays aside as evidence
    assert (folder / newer.name).read_bytes() == before[str(newer.relative_to(heads.directory))]


def test_a_head_a_writer_moves_while_accept_restore_judges_it_is_never_set_aside(
    copies: tuple[Path, Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hook runs between the judging (which read the head) and the moving aside: a writer retains a
    newer head there. Moving that one aside would record the older one in the payload; it is refused, and
    the next attempt judges and records the newer head."""
    a, _, sid = copies
    notary = Notary.from_env()
    judge = restore._disagreeing
    written: dict[str, bytes] = {}
    newer: list[int] = []

    def then_a_writer_moves_the_head(
        store: object, heads: HeadStore, ledger_id: str, *args: object
    ) -> Iterator[restore.ReplacedHead]:
        judged = list(judge(store, heads, ledger_id, *args))  # type: ignore[arg-type]
        head = heads.load(ledger_id, sid)
        assert head is not None
        cp = Checkpoint.parse(parse_note(head.note).text)
        signed = notary.sign(origin_for(ledger_id, sid), cp.size + 1, bytes([7]) * 32, None)
        assert heads.save(ledger_id, sid, signed, sealed=False, roots={cp.size: cp.root})
        newer.append(cp.size + 1)
        written.update(head_files())
        return iter(judged)

    monkeypatch.setattr(restore, "_disagreeing", then_a_writer_moves_the_head)
    with open_store(str(a)) as store, pytest.raises(StoreError) as refused:
        accept_restore(store, reason="r", operator="ops", notary=notary)
    assert f"the retained head of session {sid} moved while accept-restore judged it" in str(refused.value)
    assert f"it is now at size {newer[0]}" in str(refused.value) and "run accept-restore again" in str(
        refused.value
    )
    assert head_files() == written and not aside_folders()  # the newer head stays, nothing set aside
    with open_store(str(a)) as store:
        assert RESTORE_LOG not in {s.session_id for s in store.list_sessions()}  # nothing recorded

    monkeypatch.setattr(restore, "_disagreeing", judge)
    with open_store(str(a)) as store:
        record = accept_restore(store, reason="r", operator="ops", notary=notary)
    [head] = [h for h in record.replaced if h.session_id == sid]
    assert head.retained_size == newer[0]  # what was set aside is what the ledger records
    assert record.set_aside is not None and (record.set_aside / head.path.name).exists()


def test_the_head_history_keeps_every_size_and_is_thinned_past_its_limit(tmp_path: Path) -> None:
    notary = _notary(tmp_path)
    lid = "ab" * 16
    one = notary.sign(origin_for(lid, "s"), 1, bytes([1]) * 32, None)
    two = notary.sign(origin_for(lid, "s"), 2, bytes([2]) * 32, None)
    assert notary.heads.save(lid, "s", one, sealed=False)
    assert notary.heads.save(lid, "s", two, sealed=False, roots={1: bytes([1]) * 32})
    history = notary.heads.history(lid, "s")
    assert history == [(1, bytes([1]) * 32), (2, bytes([2]) * 32)]
    path = notary.heads.history_path(notary.heads.path(lid, "s"))
    path.write_text(path.read_text() + '{"size": 9, "ro')  # a torn last line: skipped
    assert notary.heads.history(lid, "s") == history
    path.write_text('{"size": 9}\n{"size": 1, "root": "00"}\n')
    with pytest.raises(NoteError, match=r"line 1 is not an entry"):
        notary.heads.history(lid, "s")

    entries = [(n, bytes(32)) for n in range(1, HISTORY_LIMIT + 2)]
    kept = thinned(entries)
    assert (
        kept[0] == entries[0]
        and kept[len(kept) - len(entries) + len(entries) // 2 :] == entries[len(entries) // 2 :]
    )
    assert len(kept) < HISTORY_LIMIT


def test_a_long_history_is_thinned_as_it_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heads_module, "HISTORY_LIMIT", 8)
    notary = _notary(tmp_path)
    lid = "cd" * 16
    for size in range(1, 41):
        signed = notary.sign(origin_for(lid, "s"), size, bytes([size]) * 32, None)
        assert notary.heads.save(lid, "s", signed, sealed=False, roots={size - 1: bytes([size - 1]) * 32})
    sizes = [size for size, _ in notary.heads.history(lid, "s")]
    assert sizes[0] == 1 and sizes[-4:] == [37, 38, 39, 40] and len(sizes) <= 9, sizes
