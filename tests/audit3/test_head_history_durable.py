"""The retained-head history is durable and safe under concurrent writers.

- A session head's history line is fsynced before the head file holding the same entry is renamed into
  place, and the folder is fsynced after each file created or renamed in it.
- A line appended by another process while the history is rewritten (compaction, thinning) is never lost:
  both hold the head's lock (``.<name>.lock``). Checked with real processes, each waiting on the others'
  states (a count written to a file), never on a timer.
- A head that cannot be saved (its history a folder or a FIFO) logs one warning line naming the file and
  the OS error, and the commit goes on (the head lags, which is safe).
"""

from __future__ import annotations

import logging
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from flightlog.events import Custom
from flightlog.integrity import heads as heads_module
from flightlog.integrity.checkpoints import origin_for
from flightlog.integrity.heads import HeadStore, head_lock, read_history
from flightlog.integrity.keys import LogSigner
from flightlog.integrity.notary import Notary
from flightlog.integrity.notes import NoteError
from flightlog.recorder import Recorder
from flightlog.store import SqliteStore

fcntl = pytest.importorskip("fcntl", reason="the head lock is fcntl.flock (POSIX)")

LID = "ab" * 16
WAIT = 300.0  # seconds: the overall bound on any child, generous for two shared cores


def _notary(tmp_path: Path) -> Notary:
    return Notary.for_signer(LogSigner.generate("test.example/log"), HeadStore(tmp_path / "heads"))


def _root(size: int) -> bytes:
    return size.to_bytes(4, "big") * 8


def test_a_history_line_is_fsynced_before_its_head_is_renamed_and_the_folder_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notary = _notary(tmp_path)
    head = notary.heads.path(LID, "s")
    history = notary.heads.history_path(head)
    done: list[tuple[str, int | str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        info = os.fstat(fd)
        done.append(("fsync-dir" if stat.S_ISDIR(info.st_mode) else "fsync", info.st_ino))
        real_fsync(fd)

    def replace(src: str | Path, dst: str | Path) -> None:
        real_replace(src, dst)
        done.append(("rename", str(dst)))

    monkeypatch.setattr(heads_module.os, "fsync", fsync)
    monkeypatch.setattr(heads_module.os, "replace", replace)
    one = notary.sign(origin_for(LID, "s"), 1, _root(1), None)
    assert notary.heads.save(LID, "s", one, sealed=False)
    folder = head.parent.stat().st_ino
    history_fsync = done.index(("fsync", history.stat().st_ino))
    renamed = done.index(("rename", str(head)))
    assert history_fsync < done.index(("fsync-dir", folder)) < renamed  # the new history's name is durable
    assert ("fsync-dir", folder) in done[renamed + 1 :]  # and the head's rename
    assert sum(1 for op, _ in done[history_fsync + 1 : renamed] if op == "fsync") == 1  # the head's data

    done.clear()
    two = notary.sign(origin_for(LID, "s"), 2, _root(2), None)
    assert notary.heads.save(LID, "s", two, sealed=False, roots={1: _root(1)})
    assert done.index(("fsync", history.stat().st_ino)) < done.index(("rename", str(head)))
    assert done[-1] == ("fsync-dir", folder)
    assert notary.heads.history(LID, "s") == [(1, _root(1)), (2, _root(2))]


APPENDER = """
import json, os, sys, time
from pathlib import Path
from flightlog.integrity.heads import _append_history

path, count, first, lines = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])

def rewrites():
    try:
        return int(count.read_text() or 0)
    except FileNotFoundError:
        return 0

for k in range(lines):
    size = first + k
    _append_history(path, size, size.to_bytes(4, "big") * 8)
    if k == lines // 2:  # halfway: wait for the compactor to rewrite the file at least once more
        seen = rewrites()
        while rewrites() <= seen:
            time.sleep(0.005)
print("appended", lines)
"""

COMPACTOR = """
import os, sys, time
from pathlib import Path
from flightlog.integrity.heads import _append_history, _compact

path, count, stop = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
done = 0
while not stop.exists():
    _append_history(path, 0, bytes(32))  # a duplicate line: the next compaction rewrites the file
    if _compact(path):
        done += 1
        tmp = count.with_name(count.name + ".tmp")
        tmp.write_text(str(done))
        os.replace(tmp, count)
print("rewrites", done)
"""


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for child in started:
        if child.poll() is None:
            child.kill()
            child.wait()


def _spawn(children: list[subprocess.Popen[str]], script: str, *args: object) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", script, *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    children.append(child)
    return child


def _finished(child: subprocess.Popen[str]) -> str:
    out, err = child.communicate(timeout=WAIT)
    assert child.returncode == 0, err
    return out


def test_no_line_appended_while_another_process_compacts_the_history_is_lost(
    tmp_path: Path, children: list[subprocess.Popen[str]]
) -> None:
    """Three processes append 120 entries each while a fourth rewrites the file (compaction) as fast as it
    can; each appender waits, halfway, until the compactor has rewritten the file once more. Unlocked, the
    rewrite (read, write a new file, rename it over) dropped the lines appended between its read and its
    rename."""
    path = tmp_path / "heads" / LID / "x.history.jsonl"
    count, stop = tmp_path / "rewrites", tmp_path / "stop"
    heads_module._append_history(path, 0, bytes(32))
    compactor = _spawn(children, COMPACTOR, path, count, stop)
    lines, firsts = 120, (1_000, 2_000, 3_000)
    appenders = [_spawn(children, APPENDER, path, count, first, lines) for first in firsts]
    try:
        for appender in appenders:
            assert _finished(appender).split() == ["appended", str(lines)]
    finally:
        stop.touch()
    rewrites = int(_finished(compactor).split()[1])
    assert rewrites >= 1
    found = read_history(path)
    expected = {first + k: _root(first + k) for first in firsts for k in range(lines)}
    lost = sorted(set(expected) - set(found))
    assert not lost, f"{len(lost)} appended lines lost to {rewrites} rewrites, first {lost[:5]}"
    assert {size: found[size] for size in expected} == expected
    assert not list(path.parent.glob("*.tmp"))  # no temporary file left behind


def test_the_lock_is_one_per_head_beside_it_and_reentrant(tmp_path: Path) -> None:
    head = tmp_path / "heads" / LID / "abc.json"
    with head_lock(head), head_lock(HeadStore.history_path(head)):  # one lock: the nested take is free
        lock = head.with_name(".abc.lock")
        with lock.open("a") as other, pytest.raises(BlockingIOError):
            fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # another holder is kept out
    with lock.open("a") as other:
        fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # released
    assert HeadStore(tmp_path).index_path(LID).with_name(".index.lock").name == ".index.lock"


@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_a_head_that_cannot_be_saved_logs_one_warning_line_and_the_commit_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    notary = _notary(tmp_path)
    with SqliteStore(tmp_path / "l.db") as store:
        rec = Recorder.create(store, session_id="s", notary=notary)
        rec.append(Custom(custom_kind="step", payload={}))
        head = notary.heads.path(store.ledger_id(), "s")
        history = notary.heads.history_path(head)
        head.unlink(missing_ok=True)  # the seal's head is checked against none, then cannot be saved
        history.unlink(missing_ok=True)
        head.parent.mkdir(parents=True, exist_ok=True)
        if kind == "folder":
            history.mkdir()
        else:
            os.mkfifo(history)
        with caplog.at_level(logging.WARNING, logger="flightlog"):
            rec.finish("completed")
        assert store.get_session("s").status == "completed"  # committed, whatever the head did
    failed = [r for r in caplog.records if "could not retain the head of session s" in r.getMessage()]
    assert failed, caplog.text
    for record in failed:
        message = record.getMessage()
        assert record.levelno == logging.WARNING and record.exc_info is None, message
        assert "\n" not in message and str(history) in message, message
        assert ("Is a directory" if kind == "folder" else "No such device") in message, message
    assert not head.exists()  # lagging (safe), the history left as it was
    assert stat.S_ISDIR(history.lstat().st_mode) == (kind == "folder")
    assert stat.S_ISFIFO(history.lstat().st_mode) == (kind == "fifo")


def test_a_head_file_that_is_a_fifo_or_a_folder_is_refused_naming_it_never_waited_on(tmp_path: Path) -> None:
    heads = HeadStore(tmp_path / "heads")
    head = heads.path(LID, "s")
    head.parent.mkdir(parents=True)
    os.mkfifo(head)  # opened for reading without O_NONBLOCK, this waits for a writer forever
    with pytest.raises(NoteError, match=rf"retained head {head} is unreadable: .*not a regular file"):
        heads.load(LID, "s")
    assert heads.sessions(LID) == []  # passed over, as any unreadable head
    head.unlink()
    head.mkdir()
    with pytest.raises(NoteError, match=r"is unreadable: .*not a regular file \(mode d"):
        heads.load(LID, "s")
