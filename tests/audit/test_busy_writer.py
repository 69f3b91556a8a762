"""A live writer that keeps appending while the full check runs: busy, never tampering (``Auditor.settled``).

The writer is a thread on its own connection. Each check's read of the rows (after the session row was
read) asks it to append one event and waits until that append is committed, so every check sees the head
move: no timing decides what the check sees (``_ATTEMPTS`` checks, one append each).
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flightlog.cli.root import app
from flightlog.errors import LedgerIntegrityError, SessionBusy
from flightlog.integrity.audit import _ATTEMPTS, Auditor, require_intact
from flightlog.integrity.notary import Notary
from flightlog.recorder import Recorder
from flightlog.store import SqliteStore
from flightlog.store.sql import SqlStore

from .conftest import SID, step, tamper

WAIT_S = 60.0  # generous: a busy CI machine


class Writer:
    """A live writer in its own thread and connection: records ``SID`` (10 events), then appends one event
    each time :meth:`append` asks, answering with the committed seq."""

    def __init__(self, db_path: Path) -> None:
        self.asks: queue.Queue[bool] = queue.Queue()
        self.done: queue.Queue[int | BaseException] = queue.Queue()
        self.appended = 0
        self.moving = True  # each read of the rows on the test's thread makes it append first
        self.thread = threading.Thread(target=self._run, args=(db_path,), daemon=True)
        self.thread.start()
        self._answer()  # created: its 10 events are committed

    def _run(self, db_path: Path) -> None:
        try:
            with SqliteStore(db_path) as store:
                rec = Recorder.create(store, session_id=SID, notary=Notary.from_env(every=4))
                rec.append_many([step(i) for i in range(10)])
                self.done.put(rec.next_seq - 1)
                while self.asks.get():
                    self.done.put(rec.append(step(rec.next_seq)).seq)
        except BaseException as exc:  # handed to the test thread, which raises it
            self.done.put(exc)

    def _answer(self) -> int:
        answer = self.done.get(timeout=WAIT_S)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def append(self) -> int:
        self.asks.put(True)
        self.appended += 1
        return self._answer()

    def stop(self) -> None:
        self.asks.put(False)
        self.thread.join(timeout=WAIT_S)
        assert not self.thread.is_alive()


@pytest.fixture
def writer(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Writer]:
    """The writer, with every read of ``SID``'s rows on the test's thread made after one more append."""
    live = Writer(db_path)
    read_events = SqlStore.read_events

    def moving(self: SqlStore, session_id: str, **kwargs: Any) -> Any:
        if live.moving and session_id == SID and threading.current_thread() is threading.main_thread():
            live.append()  # committed before the rows are read, after the check read the session row
        return read_events(self, session_id, **kwargs)

    monkeypatch.setattr(SqlStore, "read_events", moving)
    yield live
    monkeypatch.undo()
    live.stop()


def test_a_head_that_keeps_moving_is_busy_not_tampering(db_path: Path, writer: Writer) -> None:
    with SqliteStore(db_path) as store:
        with pytest.raises(SessionBusy, match=f"session {SID} is held by another writer") as info:
            require_intact(store, SID, auditor=Auditor.from_env(online=False))
        assert writer.appended == _ATTEMPTS  # checked again each time, then given up as busy
        assert info.value.seq == 9 + _ATTEMPTS and not isinstance(info.value, LedgerIntegrityError)
        report = Auditor.from_env(online=False).settled(store, SID)
        assert report.moved == (8 + 2 * _ATTEMPTS, 9 + 2 * _ATTEMPTS)  # the last check's
        assert not report.ok and report.verdict() == "moved" and report.divergences == []


def test_the_check_passes_once_the_writer_is_idle(db_path: Path, writer: Writer) -> None:
    with SqliteStore(db_path) as store:
        with pytest.raises(SessionBusy):
            require_intact(store, SID, auditor=Auditor.from_env(online=False))
        writer.moving = False
        report = require_intact(store, SID, auditor=Auditor.from_env(online=False))
        assert report.ok and report.events == 10 + _ATTEMPTS and report.moved is None


def test_a_tampered_row_is_tampering_whatever_the_head_does(db_path: Path, writer: Writer) -> None:
    """A divergence inside the rows read is reported at once (one check), the writer's rows past the head
    read first left out; the head moving does not turn it into ``SessionBusy``."""
    tamper(db_path, "UPDATE events SET event = x'7b7d' WHERE seq = 2")
    with SqliteStore(db_path) as store:
        with pytest.raises(LedgerIntegrityError) as info:
            require_intact(store, SID, auditor=Auditor.from_env(online=False))
        assert not isinstance(info.value, SessionBusy)
        assert info.value.seq == 2 and info.value.reason.startswith("hash_mismatch")
        assert {d.reason for d in info.value.divergences} >= {"hash_mismatch"}
        assert "head_mismatch" not in {d.reason for d in info.value.divergences}
        assert writer.appended == 1  # not checked again: what was read already diverges


runner = CliRunner()


@pytest.mark.parametrize("command", ["verify", "audit"])
def test_verify_says_moved_re_run_not_diverges(db_path: Path, writer: Writer, command: str) -> None:
    result = runner.invoke(app, ["--db", str(db_path), command, SID, "--offline"])
    assert result.exit_code == 1, result.output  # not verified: a problem, as the docs' exit codes say
    assert "DIVERGES" not in result.stdout and "head_mismatch" not in result.stdout, result.stdout
    first, *rest = result.stdout.splitlines()
    assert first.startswith(f"MOVED     {SID}"), result.stdout
    assert any("moved during the check" in line and line.endswith("re-run") for line in rest), result.stdout
    as_json = runner.invoke(app, ["--db", str(db_path), command, SID, "--offline", "--json"])
    assert as_json.exit_code == 1
    (row,) = json.loads(as_json.stdout)
    assert (row["ok"], row["verdict"], row["divergences"]) == (False, "moved", [])
    assert (row["moved"]["from"], row["moved"]["to"]) == (
        8 + 2 * _ATTEMPTS,
        9 + 2 * _ATTEMPTS,
    )  # the last check of the second run
    writer.moving = False
    quiet = runner.invoke(app, ["--db", str(db_path), command, SID, "--offline"])
    assert quiet.exit_code == 0 and quiet.stdout.startswith(f"ok        {SID}"), quiet.stdout
