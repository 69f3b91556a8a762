"""A head lock another process keeps holding never blocks a run silently forever (attack b5/b5b).

A flightlog process stopped (``SIGSTOP``, Ctrl-Z) or hung inside a head save keeps the head's lock file
locked. Every later commit used to wait in ``flock`` forever, printing nothing. Now the lock is waited for
at most ``LOCK_WAIT`` seconds: a commit's head save logs one warning line naming the lock file and goes on
(the head lags, which is safe); ``accept-restore`` refuses, naming it, nothing set aside or recorded.

The holder is a real process: it takes the lock, prints a line, then waits on its stdin. The tests wait on
that line (with a generous overall bound), never on a timer; ``LOCK_WAIT`` is made small so the refusal
comes quickly.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from flightlog.errors import StoreError
from flightlog.events import Custom
from flightlog.integrity import heads as heads_module
from flightlog.integrity.checkpoints import Checkpoint
from flightlog.integrity.heads import HeadLockBusy, HeadStore, head_lock
from flightlog.integrity.keys import LogSigner
from flightlog.integrity.notary import Notary
from flightlog.integrity.notes import parse_note
from flightlog.ops.restore import RESTORE_LOG, accept_restore
from flightlog.recorder import Recorder
from flightlog.store import SqliteStore, open_store

from .helpers import backup, cli, head_files, suspended_run

pytest.importorskip("fcntl", reason="the head lock is fcntl.flock (POSIX)")

WAIT = 300.0  # seconds: the overall bound on the holder, generous for two shared cores

Hold = Callable[[Path], Callable[[], None]]
"""``hold(lock)``: another process holds ``lock``; call what it returns to release it."""
Session = tuple[Notary, SqliteStore, Recorder]

HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("HELD", flush=True)
sys.stdin.read()  # holds the lock until the test closes its stdin
"""


@pytest.fixture
def hold(monkeypatch: pytest.MonkeyPatch) -> Iterator[Hold]:
    """``hold(lock)``: another process takes ``lock`` (returns once it printed that it holds it); the
    returned function releases it (closes its stdin, waits for it to exit). ``LOCK_WAIT`` is 0.2 s."""
    monkeypatch.setattr(heads_module, "LOCK_WAIT", 0.2)
    started: list[subprocess.Popen[str]] = []

    def take(lock: Path) -> Callable[[], None]:
        lock.parent.mkdir(parents=True, exist_ok=True)
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(lock)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        started.append(holder)
        assert holder.stdout is not None and holder.stdout.readline().strip() == "HELD"

        def release() -> None:
            assert holder.stdin is not None
            holder.stdin.close()
            assert holder.wait(timeout=WAIT) == 0
            assert holder.stdout is not None
            holder.stdout.close()

        return release

    yield take
    for holder in started:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        for pipe in (holder.stdin, holder.stdout):
            if pipe is not None:
                pipe.close()


def _lock_of(head: Path) -> Path:
    return head.with_name("." + head.name.removesuffix(".json") + ".lock")


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    """Session ``s`` on a signing SQLite store, one event, checkpointed (its head and the index head
    retained): the notary, the open store, the recorder."""
    notary = Notary.for_signer(LogSigner.generate("test.example/log"), HeadStore(tmp_path / "heads"))
    with SqliteStore(tmp_path / "l.db") as store:
        rec = Recorder.create(store, session_id="s", notary=notary)
        rec.append(Custom(custom_kind="step", payload={}))
        rec.checkpoint()
        yield notary, store, rec


def _size(note: str) -> int:
    return Checkpoint.parse(parse_note(note).text).size


def test_a_commit_whose_head_lock_is_held_warns_naming_it_and_goes_on(
    session: Session, caplog: pytest.LogCaptureFixture, hold: Hold
) -> None:
    notary, store, rec = session
    lid = store.ledger_id()
    head = notary.heads.path(lid, "s")
    before = notary.heads.load(lid, "s")
    assert before is not None
    lock = _lock_of(head)
    release = hold(lock)
    with caplog.at_level(logging.WARNING, logger="flightlog"):
        row = rec.append(Custom(custom_kind="step", payload={}))
        assert rec.checkpoint() is not None  # returns past LOCK_WAIT: the head save gave up
    assert [e.seq for e in store.read_events("s")][-1] == row.seq  # the commit stands
    failed = [r for r in caplog.records if "could not retain the head of session s" in r.getMessage()]
    assert len(failed) == 1, caplog.text
    message = failed[0].getMessage()
    assert f"lock file {lock} is held by another process" in message, message
    assert "\n" not in message and failed[0].exc_info is None, message
    lagging = notary.heads.load(lid, "s")
    assert lagging is not None and lagging.note == before.note  # lagging, untouched

    release()  # the holder goes on: the next commit retains the head again
    rec.finish("completed")
    sealed = notary.heads.load(lid, "s")
    assert sealed is not None and sealed.sealed
    assert _size(sealed.note) == len(list(store.read_events("s")))


def test_an_index_head_whose_lock_is_held_warns_naming_it_and_the_commit_goes_on(
    session: Session, caplog: pytest.LogCaptureFixture, hold: Hold
) -> None:
    notary, store, rec = session
    before = notary.heads.load_index(lid := store.ledger_id())
    assert before is not None, "the index log retains a head on a signing store"
    lock = notary.heads.index_path(lid).with_name(".index.lock")
    release = hold(lock)
    with caplog.at_level(logging.WARNING, logger="flightlog"):
        rec.finish("completed")
    release()
    assert store.get_session("s").status == "completed"
    failed = [r for r in caplog.records if "could not retain the index head" in r.getMessage()]
    assert len(failed) == 1, caplog.text
    assert f"lock file {lock} is held by another process" in failed[0].getMessage(), caplog.text
    assert notary.heads.load_index(lid) == before  # lagging, untouched


def test_the_lock_wait_is_bounded_and_raises_naming_the_lock_file(tmp_path: Path, hold: Hold) -> None:
    head = tmp_path / "heads" / ("ab" * 16) / "abc.json"
    release = hold(_lock_of(head))
    with pytest.raises(HeadLockBusy) as busy, head_lock(head):
        pass
    assert busy.value.lock == _lock_of(head) and busy.value.waited == 0.2
    assert isinstance(busy.value, StoreError)
    release()
    with head_lock(head):  # released: taken at once
        pass


def test_accept_restore_refuses_naming_a_head_lock_another_process_holds(tmp_path: Path, hold: Hold) -> None:
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    sid = suspended_run(a)
    backup(a, b)
    assert cli(b, "approve", sid, "n1", "--as", "bob")[0] == 0  # b moved the heads on: a is an older copy
    notary = Notary.from_env()
    with open_store(str(a)) as store:
        lid = store.ledger_id()
    lock = _lock_of(notary.heads.path(lid, sid))
    before = head_files()
    release = hold(lock)
    with open_store(str(a)) as store, pytest.raises(StoreError) as refused:
        accept_restore(store, reason="r", operator="ops", notary=notary)
    message = str(refused.value)
    assert f"lock file {lock} is held by another process" in message, message
    assert "nothing was set aside or recorded" in message, message
    assert head_files() == before  # nothing moved
    assert not list(Path(os.environ["FLIGHTLOG_HEAD_DIR"]).rglob("replaced-*"))
    with open_store(str(a)) as store:
        assert RESTORE_LOG not in {s.session_id for s in store.list_sessions()}  # nothing recorded
    release()
    with open_store(str(a)) as store:
        record = accept_restore(store, reason="r", operator="ops", notary=notary)
    assert sid in {h.session_id for h in record.replaced}
