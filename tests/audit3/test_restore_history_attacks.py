"""``db accept-restore`` and the head history against the second attack pass on it (findings a1-a13).

A copy whose rows past its last signed checkpoint lie at or below a retained (signed) size cannot show they
are the rows signed there: refused as ``unsigned`` (a13: a decision flipped in a tail between two retained
sizes; a12: a rewrite truncated below the first one; a10: the index log's). A damaged history is an error
naming its file and line, not a bad ``--as`` (a4); a history that is a symlink or a FIFO is refused, never
followed or waited on (a6); a huge one is never read whole (a8); a missing one is warned of (a1).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import threading
from pathlib import Path
from typing import Any

import pytest

from flightlog.encoding import canonical_json
from flightlog.integrity import heads as heads_module
from flightlog.integrity.checkpoints import origin_for
from flightlog.integrity.heads import HISTORY_MAX_BYTES, HeadStore
from flightlog.integrity.keys import LogSigner
from flightlog.integrity.notary import Notary
from flightlog.integrity.notes import NoteError

from .helpers import backup, cli, connect, head_files, rechain, suspended_run, swap_goal, unchanged


def finished_run(db: Path | str) -> str:
    """A run of the approval agent, approved and run to its end on the default (signing) notary."""
    sid = suspended_run(db)
    code, _, err = cli(db, "approve", sid, "n1", "--as", "bob")
    assert code == 0, err
    return sid


def heads_dir() -> Path:
    return Path(os.environ["FLIGHTLOG_HEAD_DIR"])


def session_history(sid: str) -> Path:
    """The head history of the store's only session ``sid``."""
    [path] = [p for p in heads_dir().rglob("*.history.jsonl") if not p.name.startswith("index")]
    assert HeadStore.default().load(path.parent.name, sid) is not None
    return path


def retained_sizes() -> list[int]:
    """The session's retained sizes (the only session of the store)."""
    [path] = [p for p in heads_dir().rglob("*.history.jsonl") if not p.name.startswith("index")]
    return sorted(json.loads(line)["size"] for line in path.read_text().splitlines())


def run_sql(db: Path | str, *statements: tuple[str, tuple[Any, ...]]) -> None:
    raw = connect(db)
    mark = "%s" if "://" in str(db) else "?"
    try:
        for sql, params in statements:
            raw.execute(sql.replace("?", mark), params)
        raw.commit()
    finally:
        raw.close()


def drop_checkpoints_above(db: Path | str, sid: str, size: int) -> None:
    """Delete the session's checkpoints covering more than ``size`` events, their index leaves, and the
    index checkpoints covering those leaves (an attacker without the key)."""
    raw = connect(db)
    mark = "%s" if "://" in str(db) else "?"
    try:
        ids = [
            row[0]
            for row in raw.execute(
                f"SELECT checkpoint_id FROM checkpoints WHERE session_id = {mark} AND size > {mark}",
                (sid, size),
            ).fetchall()
        ]
        for cid in ids:
            for table in ("checkpoint_frontiers", "index_leaves", "checkpoints"):
                raw.execute(f"DELETE FROM {table} WHERE checkpoint_id = {mark}", (cid,))
        [left] = raw.execute("SELECT count(*) FROM index_leaves").fetchone()
        raw.execute(f"DELETE FROM index_checkpoints WHERE size > {mark}", (left,))
        raw.commit()
    finally:
        raw.close()


def older_copy(tmp_path: Path) -> tuple[Path, str]:
    """``a.db`` holding a run waiting on ``n1``, an older copy of ``b.db`` (its ``.backup``, approved
    there); ``a.db`` and the session id."""
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    sid = suspended_run(a)
    backup(a, b)
    assert cli(b, "approve", sid, "n1", "--as", "bob")[0] == 0
    return a, sid


def refused(db: Path | str, reason: str) -> str:
    """accept-restore exits 1 naming ``reason`` and --accept-fork; nothing moved or written; its stderr."""
    before, listed = head_files(), cli(db, "ls", "--json")[1]
    code, out, err = cli(db, "db", "accept-restore", "--reason", "restored last night's copy")
    assert code == 1, out + err
    assert f": {reason}: " in err and "--accept-fork" in err, err
    assert head_files() == before and not list(heads_dir().rglob("replaced-*"))
    assert cli(db, "ls", "--json")[1] == listed
    return err


def test_a_flipped_decision_in_a_tail_between_two_retained_sizes_is_refused_as_unsigned(url: str) -> None:
    sid = finished_run(url)
    sizes = retained_sizes()
    below, above = next((a, b) for a, b in itertools.pairwise(sizes) if b > a + 1)

    def flip(seq: int, data: bytes) -> bytes:
        if seq != below:
            return data
        event = json.loads(data)
        event["flipped_by"] = "mallory"  # any change: the row signed at `above` is not this one
        return canonical_json(event)

    rechain(url, sid, flip, keep=below + 1, drop_checkpoints=False)
    drop_checkpoints_above(url, sid, below)
    err = refused(url, "unsigned")
    assert f"had a signed checkpoint retained at size {above}" in err, err
    assert f"its events {below}..{below}" in err and f"latest signed checkpoint (size {below})" in err, err
    assert f"seq {below}" in err or f"{sid}" in err, err


def test_a_true_prefix_between_retained_sizes_is_refused_too_but_one_ending_at_a_retained_size_is_not(
    url: str,
) -> None:
    sid = finished_run(url)
    sizes = retained_sizes()
    below, _ = next((a, b) for a, b in itertools.pairwise(sizes) if b > a + 1)
    rechain(url, sid, unchanged, keep=below + 1, drop_checkpoints=False)
    drop_checkpoints_above(url, sid, below)
    refused(url, "unsigned")  # the copy cannot show its row `below` is the one signed later

    rechain(url, sid, unchanged, keep=below, drop_checkpoints=False)  # now exactly at a retained size
    code, out, err = cli(url, "db", "accept-restore", "--reason", "restored", "--json")
    assert code == 0, out + err
    [head] = [h for h in json.loads(out)["replaced"] if h["session_id"] == sid]
    assert head["unsigned"] is None and head["fork"] is None and head["size"] == below, head
    cli(url, "runs", "--rebuild")  # the truncation behind flightlog's back left the runs row stale
    code, out, err = cli(url, "verify", "--all", "--offline")
    assert code == 0, out + err


def test_a_rewrite_truncated_below_the_first_retained_size_is_refused_as_unsigned(url: str) -> None:
    sid = finished_run(url)
    first = retained_sizes()[0]
    rechain(url, sid, swap_goal("wire the money elsewhere"), keep=first - 1)
    run_sql(url, ("DELETE FROM index_leaves", ()), ("DELETE FROM index_checkpoints", ()))
    err = refused(url, "unsigned")
    assert f"retained at size {first}" in err and f"its events 0..{first - 2}" in err, err


def test_the_index_log_truncated_with_its_checkpoints_deleted_is_refused_as_unsigned(url: str) -> None:
    finished_run(url)
    run_sql(url, ("DELETE FROM index_leaves WHERE idx >= 2", ()), ("DELETE FROM index_checkpoints", ()))
    err = refused(url, "unsigned")
    assert "the index log had a signed checkpoint retained at size" in err, err


def test_a_damaged_history_is_an_error_naming_its_file_and_line_not_a_bad_operator(tmp_path: Path) -> None:
    db, sid = older_copy(tmp_path)
    path = session_history(sid)
    path.write_text("not json\n" + path.read_text())
    before = head_files()
    code, out, err = cli(db, "db", "accept-restore", "--reason", "x")
    assert code == 1, out + err
    assert "--as" not in err and "operator" not in err, err
    assert f"{path.name} line 1 is not an entry" in err.replace("\n", ""), err
    assert head_files() == before and not list(heads_dir().rglob("replaced-*"))
    code, _, err = cli(db, "db", "accept-restore", "--reason", "x", "--as", " bob")
    assert code == 2 and "--as" in err, err  # a bad operator is still named as one


def test_the_warning_after_a_repair_does_not_raise_on_a_damaged_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from flightlog.cli import root

    db, sid = older_copy(tmp_path)
    path = session_history(sid)
    path.write_text("not json\n" + path.read_text())
    monkeypatch.setattr(root, "open_db", _opener(db))
    root._warn_heads_ahead()
    err = capsys.readouterr().err.replace("\n", "")
    assert "could not be compared" in err and "line 1 is not an entry" in err, err


def _opener(db: Path) -> Any:
    from contextlib import contextmanager

    from flightlog.store import open_store

    @contextmanager
    def open_db(*, read_only: bool) -> Any:
        store = open_store(str(db))
        try:
            yield store
        finally:
            store.close()

    return open_db


def _notary(tmp_path: Path) -> Notary:
    return Notary.for_signer(LogSigner.generate("test.example/log"), HeadStore(tmp_path / "heads"))


def test_a_history_that_is_a_symlink_or_a_fifo_is_refused_never_followed_or_waited_on(tmp_path: Path) -> None:
    notary = _notary(tmp_path)
    lid = "ab" * 16
    one = notary.sign(origin_for(lid, "s"), 1, bytes([1]) * 32, None)
    assert notary.heads.save(lid, "s", one, sealed=False)
    path = notary.heads.history_path(notary.heads.path(lid, "s"))
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    path.unlink()
    path.symlink_to(victim)
    two = notary.sign(origin_for(lid, "s"), 2, bytes([2]) * 32, None)
    with pytest.raises(NoteError, match=r"history .* cannot be opened"):
        notary.heads.save(lid, "s", two, sealed=False, roots={1: bytes([1]) * 32})
    with pytest.raises(NoteError, match=r"history .* cannot be opened"):
        notary.heads.history(lid, "s")
    assert victim.read_text() == "precious\n"

    path.unlink()
    os.mkfifo(path)
    raised: list[BaseException] = []

    def on_the_fifo() -> None:  # in a thread: a blocking open of a FIFO waits for a peer that never comes
        for call in (
            lambda: notary.heads.save(lid, "s", two, sealed=False, roots={1: bytes([1]) * 32}),
            lambda: notary.heads.history(lid, "s"),
        ):
            try:
                call()
            except BaseException as exc:  # kept for the assertions below, in the test's thread
                raised.append(exc)

    worker = threading.Thread(target=on_the_fifo, daemon=True)
    worker.start()
    worker.join(120)  # generous: fails only when a call waits on the FIFO (hangs), never on its speed
    hung = worker.is_alive()
    if hung:  # give the blocked open its peer so the thread ends, then fail
        os.close(os.open(path, os.O_RDWR | os.O_NONBLOCK))
        worker.join(120)
    assert not hung, "a call on the history FIFO waited for a writer or reader"
    assert len(raised) == 2, f"each call on the FIFO must refuse it: {raised!r}"
    save_error, history_error = raised
    assert isinstance(save_error, NoteError) and re.search(
        r"history .* (cannot be opened|is not a regular file)", str(save_error)
    ), save_error
    assert isinstance(history_error, NoteError) and re.search(
        r"history .* is not a regular file", str(history_error)
    ), history_error


def test_a_history_of_duplicate_lines_is_compacted_and_a_huge_one_never_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(heads_module, "HISTORY_LIMIT", 8)
    notary = _notary(tmp_path)
    lid = "cd" * 16
    one = notary.sign(origin_for(lid, "s"), 1, bytes([1]) * 32, None)
    assert notary.heads.save(lid, "s", one, sealed=False)
    path = notary.heads.history_path(notary.heads.path(lid, "s"))
    line = json.dumps({"size": 1, "root": (bytes([1]) * 32).hex()}) + "\n"
    path.write_text(line * 500 + "garbage\n" + line)
    two = notary.sign(origin_for(lid, "s"), 2, bytes([2]) * 32, None)
    assert notary.heads.save(lid, "s", two, sealed=False, roots={1: bytes([1]) * 32})
    assert path.read_text().splitlines() == [line.strip(), json.dumps({"size": 2, "root": "02" * 32})]

    with path.open("a") as fh:  # past the cap: never read, by the writer or the reader
        fh.truncate(HISTORY_MAX_BYTES + 1)
    reads: list[int] = []
    real_read = os.read
    monkeypatch.setattr(heads_module.os, "read", lambda fd, n: reads.append(n) or real_read(fd, n))
    three = notary.sign(origin_for(lid, "s"), 3, bytes([3]) * 32, None)
    assert notary.heads.save(lid, "s", three, sealed=False, roots={2: bytes([2]) * 32})
    assert not reads
    with pytest.raises(NoteError, match=r"bytes, more than the .* refused unread"):
        notary.heads.history(lid, "s")
    assert not reads


def test_a_missing_history_is_warned_of_and_the_latest_head_still_refuses_an_unsigned_rewrite(
    tmp_path: Path,
) -> None:
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    sid = suspended_run(a)
    backup(a, b)
    assert cli(b, "approve", sid, "n1", "--as", "bob")[0] == 0
    for path in heads_dir().rglob("*.history.jsonl"):
        path.unlink()
    rewritten = tmp_path / "c.db"
    backup(b, rewritten)
    rechain(rewritten, sid, swap_goal("wire the money elsewhere"), keep=3)
    run_sql(rewritten, ("DELETE FROM index_leaves", ()), ("DELETE FROM index_checkpoints", ()))
    refused(rewritten, "unsigned")  # its rows lie below the latest retained (signed) size

    code, out, err = cli(a, "db", "accept-restore", "--reason", "restored")
    assert code == 0, out + err  # an older copy: only the latest head is left to check it against
    err = err.replace("\n", "")
    assert f"session {sid}: its head history" in err and "is missing: only the latest" in err, err
    assert "a witness is the stronger guard" in err, err
