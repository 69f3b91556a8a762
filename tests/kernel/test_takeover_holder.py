"""A resume never runs a side effect twice because the unhashed ``live_runs`` row was edited under a holder
of this host, or says nothing of it (attack pass, session 19).

Before, a resume knew the process running an in-doubt effect only by the session's live record: deleting
that row, setting its pid to a dead one, editing its ``owner`` (the holder's heartbeats were then refused
silently and the row froze), running the holder with ``heartbeat_s=None`` (no row at all) or stopping it
with SIGSTOP (its row froze) each had the resume take the live holder for gone, ``reconcile`` answer
``not_done``, and the effect run twice. Now the intent names its holder in the verified ledger (host, pid,
start time: :class:`flightlog.runs.host.ProcessId`) and a holder of this host is alive iff that process
exists (:mod:`flightlog.kernel.takeover`).

The holders are real subprocesses (``kernel.holder_agents``) whose tool waits for a line on stdin; each
test keeps the holder's tool running until the resume has ended (a state, not a timer), with a 1 s lease so
a resume that waits gives up after two (``HolderBusy``), then lets the holder finish: the effect must have
run once.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from child_lines import read_line
from flightlog.errors import HolderBusy
from flightlog.integrity.verify import audit_session
from flightlog.kernel import Agent, Kernel, current_effect_key, tool
from flightlog.kernel.running import runs_in
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.recorder import Recorder
from flightlog.runs.host import ProcessId, host_id, process_alive, process_start, this_process
from flightlog.store import SqliteStore

from .helpers import customs
from .skew_agents import performed_keys, publishing_agent

TESTS = Path(__file__).parents[1]
WAIT_S = 60.0
"""Generous bound on waiting for a state another process or thread reaches (never expected to run out)."""


@contextmanager
def holder(
    db: Path, performed: Path, heartbeat_s: float | None, *extra: str
) -> Iterator[subprocess.Popen[str]]:
    """The holder of session ``s`` on this host, once its side effect's intent is durable and its tool waits
    for a line on stdin; continued and killed on exit if still running."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    beat = "none" if heartbeat_s is None else str(heartbeat_s)
    argv = [sys.executable, "-m", "kernel.holder_agents", str(db), str(performed), beat, *extra]
    with subprocess.Popen(
        argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as child:
        try:
            assert read_line(child, "the holder's tool to start") == "started\n"
            yield child
        finally:
            if child.poll() is None:
                os.kill(child.pid, signal.SIGCONT)
                child.kill()
            child.wait()


def _sql(db: Path, statement: str, *args: Any) -> None:
    with closing(sqlite3.connect(db)) as con:
        con.execute(statement, args)
        con.commit()


def _dead_pid() -> int:
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    return done.pid


def _delete_row(db: Path, child: subprocess.Popen[str]) -> None:
    _sql(db, "DELETE FROM live_runs")


def _forge_pid(db: Path, child: subprocess.Popen[str]) -> None:
    _sql(db, "UPDATE live_runs SET pid = ?", _dead_pid())


def _forge_owner(db: Path, child: subprocess.Popen[str]) -> None:
    _sql(db, "UPDATE live_runs SET owner = ?", "f" * 32)


def _stop(db: Path, child: subprocess.Popen[str]) -> None:
    os.kill(child.pid, signal.SIGSTOP)


def _nothing(db: Path, child: subprocess.Popen[str]) -> None:
    pass


ATTACKS: dict[str, tuple[float | None, Callable[[Path, subprocess.Popen[str]], None]]] = {
    "row_deleted": (5.0, _delete_row),  # b01
    "pid_forged_dead": (5.0, _forge_pid),  # b08
    "owner_edited": (0.05, _forge_owner),  # b02: its beats refused, the row froze
    "no_heartbeat": (None, _nothing),  # b03: Kernel(heartbeat_s=None), no row
    "sigstopped": (0.05, _stop),  # b04: its beats stop, the row froze
}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_a_holder_of_this_host_is_waited_for_whatever_its_live_row_says(tmp_path: Path, attack: str) -> None:
    """Before: the resume took the holder for gone (at once, or after a lease of a frozen row), reconciled
    ``not_done`` and ran the effect; the released holder ran it again. Now it waits for the process its
    intent names and, that process alive past the bound, gives up with ``HolderBusy`` naming its pid."""
    db, performed = tmp_path / "s.db", tmp_path / "performed"
    heartbeat_s, edit = ATTACKS[attack]
    with holder(db, performed, heartbeat_s) as child, SqliteStore(db) as store:
        (intent,) = customs(store, "s", "external_effect_intent")
        assert ProcessId.from_wire(intent["holder"]) == ProcessId(
            host_id(), child.pid, process_start(child.pid)
        )
        edit(db, child)
        kernel = Kernel(store, publishing_agent(performed, hold=False), notary=None)
        kernel.lease_ms = (
            1_000  # a resume that waits gives up after 2 s; one that took the holder for gone ran it
        )
        try:
            outcome: object = kernel.resume_sync("s", handle_signals=False)
        except HolderBusy as exc:
            outcome = exc
        ran_during = performed_keys(performed)
        if attack == "sigstopped":
            os.kill(child.pid, signal.SIGCONT)
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
        ended = read_line(child, "the holder's run to end")
    assert ran_during == [], f"the resume ran the effect while its holder ran it: {outcome!r}"
    assert performed_keys(performed) == ["s:1:p1"]
    assert isinstance(outcome, HolderBusy) and f"pid {child.pid}" in str(outcome), outcome
    assert ended == "ended completed\n"  # the holder finished its own effect and run
    with SqliteStore(db) as store:
        assert audit_session(store, "s").ok


def test_a_holder_process_that_lives_on_after_its_tool_returned_frees_the_effect(tmp_path: Path) -> None:
    """The holder is fenced off while its tool runs (an ``abort``-like epoch bump), its tool then returns
    (the effect done, its completion refused) and its process lives on. Its effect's mark is closed with
    the tool, so a resume takes it over at once (no ``HolderBusy`` while that process lives): ``reconcile``
    finds the effect done, and it ran once."""
    db, performed = tmp_path / "s.db", tmp_path / "performed"
    with holder(db, performed, 5.0, "linger") as child, SqliteStore(db) as store:
        store.bump_authority_epoch("s")  # fenced off: its appends (the completion) are refused from now on
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
        assert read_line(child, "the holder's run to end") != ""  # its run ended; the process lingers
        assert child.poll() is None
        kernel = Kernel(store, publishing_agent(performed, hold=False), notary=None)
        result = kernel.resume_sync("s", handle_signals=False)
        assert child.poll() is None  # taken over while the holder process still lives
        child.stdin.write("bye\n")
        child.stdin.flush()
    assert result.status == "completed", result.detail
    assert performed_keys(performed) == ["s:1:p1"]
    with SqliteStore(db) as store:
        assert [p["outcome"] for p in customs(store, "s", "effect_reconciled")] == ["completed"]
        assert audit_session(store, "s").ok


def test_runs_in_reads_the_mark_another_process_holds(tmp_path: Path) -> None:
    """The mark is seen by pid and key alone: held while the holder's tool runs, a deleted row or a
    stopped process changes nothing, and it is gone with the tool."""
    db, performed = tmp_path / "s.db", tmp_path / "performed"
    with holder(db, performed, 5.0, "linger") as child:
        assert runs_in(child.pid, "s:1:p1") is True
        assert runs_in(child.pid, "s:1:other") is False
        os.kill(child.pid, signal.SIGSTOP)
        assert runs_in(child.pid, "s:1:p1") is True
        os.kill(child.pid, signal.SIGCONT)
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
        assert read_line(child, "the holder's run to end") == "ended completed\n"
        assert runs_in(child.pid, "s:1:p1") is False  # the tool returned: the mark is closed
        child.stdin.write("bye\n")
        child.stdin.flush()
    assert runs_in(child.pid, "s:1:p1") is False  # reaped


def test_a_heartbeat_refused_under_a_holder_that_is_not_fenced_off_writes_its_record_back(
    tmp_path: Path,
) -> None:
    """Before: editing the row's ``owner`` had the holder's heartbeats refused with nothing logged, and the
    row froze for good. Now the holder (still holding the authority epoch) logs a WARNING naming the session
    and writes its record back."""
    db, performed = tmp_path / "s.db", tmp_path / "performed"
    with holder(db, performed, 0.05) as child, SqliteStore(db) as store:
        (record,) = store.live_runs()
        _sql(db, "UPDATE live_runs SET owner = ?", "f" * 32)
        (forged,) = store.live_runs()
        assert forged.owner == "f" * 32
        deadline = time.monotonic() + WAIT_S  # a state to wait for: the holder's owner back in the row
        while not any(r.owner == record.owner for r in store.live_runs()):
            assert time.monotonic() < deadline, "the holder's record was never written back"
            threading.Event().wait(0.02)
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
        assert read_line(child, "the holder's run to end") == "ended completed\n"
        assert child.stderr is not None
        errors = child.stderr.read()
    assert "WARNING flightlog.live live record of s was changed under its holder" in errors, errors
    assert f"owner {'f' * 32}" in errors
    assert performed_keys(performed) == ["s:1:p1"]


def test_a_fenced_off_holder_never_writes_its_record_over_its_successors(tmp_path: Path) -> None:
    """A holder whose heartbeat is refused because a successor took the session (its epoch bumped) leaves
    the successor's record as it is and logs nothing."""
    from flightlog.live import LiveRegistry

    with SqliteStore(tmp_path / "s.db") as store:
        recorder = Recorder.create(store, session_id="s")
        mine, successor = LiveRegistry(store), LiveRegistry(store)
        mine.publish("s", "waiting_tool")
        successor.publish("s", "running")
        epoch = recorder.epoch

        def holds() -> bool:
            return store.authority_epoch("s") == epoch

        assert mine.heartbeat("s") is None  # refused: the successor's record
        assert mine.reclaim("s", holds) is not None  # not fenced yet: written back
        successor.publish("s", "running")
        store.bump_authority_epoch("s")  # the successor takes authority: this holder is fenced off
        assert mine.reclaim("s", holds) is None
        (stored,) = store.live_runs()
        assert stored.owner == successor.owner


def test_an_intent_recorded_before_holders_still_resumes_and_names_its_new_holder(tmp_path: Path) -> None:
    """An intent without ``holder`` (recorded before the field existed) keeps the live-record rule: its
    run crashed in this process before the tool acted and left no record, so the resume reconciles it
    ``not_done`` at once and runs it, recording ``external_effect_holder`` naming itself first."""
    performed = tmp_path / "performed"
    original = Recorder.record_intent

    def without_holder(self: Recorder, key: str, intent: Any, *, holder: Any = None) -> bool:
        return original(self, key, intent)

    crash = {"before": True}

    @tool(effect="side_effect", reconcile=lambda intent: None)  # the tool never acted before the crash
    def publish(text: str) -> str:
        """Publish ``text``."""
        if crash.pop("before", False):
            raise SystemExit("killed before the effect")
        with performed.open("a", encoding="utf-8") as out:
            out.write(f"{current_effect_key()}\n")
        return "published"

    def agent() -> Agent:
        provider = ScriptedProvider(
            [calls(call("publish", {"text": "t"}, id="p1")), reply("done")], by_turn=True
        )
        return Agent(name="old-intent", route=[provider], tools=[publish])

    with SqliteStore(tmp_path / "s.db") as store:
        with mock.patch.object(Recorder, "record_intent", without_holder), pytest.raises(SystemExit):
            Kernel(store, agent(), notary=None).run_sync("go", session_id="s", handle_signals=False)
        (intent,) = customs(store, "s", "external_effect_intent")
        assert "holder" not in intent
        result = Kernel(store, agent(), notary=None).resume_sync("s", handle_signals=False)
        assert result.status == "completed", result.detail
        assert performed_keys(performed) == ["s:1:p1"]
        assert [p["outcome"] for p in customs(store, "s", "effect_reconciled")] == ["not_done"]
        assert customs(store, "s", "external_effect_holder") == [
            {"key": "s:1:p1", "holder": this_process().to_wire()}
        ]
        assert audit_session(store, "s").ok


def test_process_alive_tells_a_reused_pid_and_a_zombie_from_the_holder() -> None:
    me = this_process()
    assert me.start is not None  # Linux: /proc/<pid>/stat field 22
    assert process_alive(me) is True
    assert process_alive(ProcessId(me.host, me.pid, me.start + 1)) is False  # the pid, another process
    assert process_alive(ProcessId("elsewhere/boot/1", me.pid, me.start)) is None  # another host's pid
    with subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.readline()"], stdin=subprocess.PIPE
    ) as p:
        child = ProcessId(me.host, p.pid, process_start(p.pid))
        assert process_alive(child) is True
        os.kill(p.pid, signal.SIGSTOP)
        assert process_alive(child) is True  # stopped, not gone
        p.kill()
        os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped: a zombie
        assert process_alive(child) is False
        p.wait()
    assert process_alive(child) is False


def test_the_fold_takes_the_last_holder_and_reports_a_holder_it_cannot_place() -> None:
    """The ledger's fold names the process that last took an effect up; a holder record without an
    in-doubt intent before it, or a malformed holder, is an ``effect_mismatch`` the audit reports."""
    from flightlog.events import Custom
    from flightlog.integrity.effects import EFFECT_MISMATCH, EffectFold
    from flightlog.recorder import intent_hash

    first, second = ProcessId("h", 10, 5), ProcessId("h", 11, 6)
    body = {"tool": "t", "arguments": {}}
    fold = EffectFold()
    for seq, kind, payload in [
        (0, "external_effect_intent", {"key": "k", "intent_hash": intent_hash(body), "intent": body}),
        (1, "external_effect_holder", {"key": "k", "holder": second.to_wire()}),
        (2, "external_effect_holder", {"key": "nope", "holder": first.to_wire()}),
        (3, "external_effect_holder", {"key": "k", "holder": {"host": "h", "pid": True, "start": 1}}),
        (
            4,
            "external_effect_intent",
            {"key": "m", "intent_hash": intent_hash(body), "intent": body, "holder": 7},
        ),
        (5, "external_effect_completed", {"key": "k", "result": {"output": "x", "is_error": False}}),
        (6, "external_effect_holder", {"key": "k", "holder": first.to_wire()}),
    ]:
        fold.feed(seq, Custom(custom_kind=kind, payload=payload))
    assert fold.effects["k"].holder == second and fold.effects["m"].holder is None
    assert [(d.seq, d.reason) for d in fold.problems] == [(s, EFFECT_MISMATCH) for s in (2, 3, 4, 6)]
    assert "external_effect_holder without an intent before it" in fold.problems[0].detail
    assert "after its completion at seq 5" in fold.problems[3].detail


def test_a_holder_of_another_host_without_a_record_counts_until_its_absence_is_watched_a_lease(
    tmp_path: Path,
) -> None:
    """For a holder the ledger names on another host, a missing (deleted) record is not its end: it counts
    until this process has watched the absence for a lease; a record appearing restarts the watch, and no
    host or pid the record names is believed (a forged dead pid of this host is watched like any other)."""
    from flightlog.live import HolderWatch, LiveRunRecord, watched_holder

    now = [100.0]
    watch = HolderWatch(1_000, monotonic=lambda: now[0])
    with SqliteStore(tmp_path / "s.db") as store:
        assert watched_holder(store, "s", None, watch=watch) == (True, None)
        now[0] += 0.9
        assert watched_holder(store, "s", None, watch=watch) == (True, None)
        forged = LiveRunRecord("s", "waiting_tool", 5, 5, pid=_dead_pid(), host=host_id(), owner="f" * 32)
        store.put_live_run(forged)
        now[0] += 0.2  # 1.1 s since the first look: the record's appearance restarted the watch
        assert watched_holder(store, "s", None, watch=watch) == (True, forged)
        now[0] += 1.0
        assert watched_holder(store, "s", None, watch=watch) == (False, forged)  # unchanged for a lease
        store.delete_live_run("s", owner="f" * 32)
        assert watched_holder(store, "s", None, watch=watch) == (True, None)  # gone: watched afresh
        now[0] += 1.0
        assert watched_holder(store, "s", None, watch=watch) == (False, None)
