"""A resume that takes a session over from a process still running one of its side effects must not run
that effect a second time (found by the ``race`` helper looping ``test_racing_resumes``: a sub-agent's
child taken over by the holder of its parent, one finding written twice).

The sequence, deterministic (an event the tool waits on, no timers): process A records the effect's
intent and its tool starts; process B resumes the session (its attach fences A off: A's *appends* are
refused, not A's tool already running). Before: B's reconciler answered ``not_done`` (A had not performed
yet), B ran the tool, then A's tool performed its effect too: twice, only A's completion refused.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import threading
from contextlib import closing
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from flightlog.errors import HolderBusy, LedgerIntegrityError, SessionBusy
from flightlog.integrity.effects import EffectFold, EffectTail
from flightlog.integrity.keys import now_ms
from flightlog.kernel import Kernel, current_effect_key, tool
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.kernel.takeover import HOLDER_WAIT_LOG, await_previous_holder, undelegated_in_doubt
from flightlog.live import HolderWatch, LiveRegistry, LiveRunRecord, host_id, other_holder
from flightlog.recorder import Recorder, verify_session
from flightlog.store import SqliteStore

from .helpers import agent, customs, logged

WAIT_S = 60.0
"""Generous bound on waiting for a state another thread reaches (never expected to run out)."""


def test_a_resume_while_the_previous_holder_still_runs_an_effect_never_runs_it_twice(db_path: Path) -> None:
    performed: list[str | None] = []
    started = threading.Event()  # A's tool is running (its intent is durable)
    release = threading.Event()  # A's tool may perform its effect
    first = [True]

    def done(intent: dict[str, Any]) -> str | None:
        return "published" if current_effect_key() in performed else None

    @tool(effect="side_effect", reconcile=done, in_thread=True)
    def publish(text: str) -> str:
        """Publish ``text`` (the effect: once per call)."""
        if first[0]:  # process A's call: held until process B has taken the session over
            first[0] = False
            started.set()
            assert release.wait(WAIT_S)
        performed.append(current_effect_key())
        return "published"

    def kernel(store: SqliteStore, provider: ScriptedProvider) -> Kernel:
        return Kernel(store, agent(provider, tools=[publish]), notary=None, heartbeat_s=30.0)

    results: dict[str, Any] = {}
    with logged(HOLDER_WAIT_LOG) as waiting, SqliteStore(db_path) as store_a, SqliteStore(db_path) as store_b:
        provider_a = ScriptedProvider([calls(call("publish", {"text": "t"}, id="p1")), reply("A done")])
        k_a = kernel(store_a, provider_a)

        def run_a() -> None:
            results["a"] = k_a.run_sync("go", session_id="s", handle_signals=False)

        thread_a = threading.Thread(target=run_a)
        thread_a.start()
        assert started.wait(WAIT_S)

        k_b = kernel(
            store_b, ScriptedProvider([calls(call("publish", {"text": "t"}, id="p1")), reply("B done")])
        )
        b_done = threading.Event()

        def run_b() -> None:
            try:
                results["b"] = k_b.resume_sync("s", handle_signals=False)
            except BaseException as exc:  # reported by the assertions below
                results["b"] = exc
            finally:
                b_done.set()

        thread_b = threading.Thread(target=run_b)
        thread_b.start()
        # B either finishes (it did not wait for A: the bug) or says it waits for A: then A may go on.
        while not (b_done.is_set() or waiting.is_set()):
            b_done.wait(0.01)
        release.set()
        thread_b.join(WAIT_S)
        thread_a.join(WAIT_S)
        assert not thread_a.is_alive() and not thread_b.is_alive()

        assert performed == ["s:1:p1"], f"the effect ran {len(performed)} times"
        assert waiting.is_set()  # B waited for A (before: it reconciled at once, "not_done")
        # Whoever carried the run on after A's effect, its one completion is the performed one.
        effect = store_b.get_effect("s", "s:1:p1")
        assert (
            effect is not None
            and effect.status == "completed"
            and '"published"' in (effect.result_json or "")
        )
        assert [p["key"] for p in customs(store_b, "s", "effect_reconciled")] in ([], ["s:1:p1"])
        assert all(p["outcome"] == "completed" for p in customs(store_b, "s", "effect_reconciled"))
        assert results["a"].status in ("completed", "cancelled"), results["a"]
        assert isinstance(results["b"], SessionBusy) or results["b"].status == "completed", results["b"]
        assert verify_session(store_b, "s").ok


def test_another_holder_is_a_record_of_another_registry_not_found_gone(store: SqliteStore) -> None:
    dead_pid, here = _gone_pid(), host_id()
    mine = LiveRegistry(store, clock=lambda: 1_000)
    mine.publish("own", "running")
    for run_id, beat, pid in (("fresh", 1_000, os.getpid()), ("old", 1_000 - 30_001, os.getpid())):
        store.put_live_run(LiveRunRecord(run_id, "running", beat, beat, pid=pid, host=here))
    store.put_live_run(LiveRunRecord("crashed", "running", 1_000, 1_000, pid=dead_pid, host=here))
    watch = HolderWatch(30_000, monotonic=lambda: 5.0)  # a clock that stands: nothing watched a lease yet

    def holder(run_id: str) -> str | None:
        record = other_holder(store, run_id, mine, watch=watch)
        return None if record is None else record.run_id

    assert holder("fresh") == "fresh"  # another kernel (here: of this process) drives it
    assert holder("own") is None  # this kernel's own record
    assert holder("old") == "old"  # an old heartbeat is no proof of a crash (the writer's clock may lag)
    assert holder("crashed") is None  # its process is gone (killed: the record was never cleared)
    assert holder("nobody") is None
    assert other_holder(store, "own", None, watch=watch) is not None  # another registry's record
    assert other_holder(store, "own", LiveRegistry(store), watch=watch) is not None


def test_a_holder_not_found_crashed_by_its_pid_is_judged_by_the_watch_alone(store: SqliteStore) -> None:
    """A pid names a process of its own host: one free here may be alive there, so a record of another
    host (or of no named host: written before the host column), like one of this host whose pid exists,
    lives until this process has watched it unchanged for a lease, whatever its heartbeat's wall-clock
    value (tests/kernel/test_takeover_skew.py)."""
    dead_pid = _gone_pid()
    records = {
        "there-pid-free-here": ("elsewhere/boot/1", dead_pid, 1_000),
        "there-old-heartbeat": ("elsewhere/boot/1", os.getpid(), 1_000 - 30_001),
        "unnamed-host": (None, dead_pid, 1_000),
        "here-pid-free": (host_id(), dead_pid, 1_000),
        "here-pid-alive": (host_id(), os.getpid(), 1_000),
    }
    for run_id, (host, pid, beat) in records.items():
        store.put_live_run(LiveRunRecord(run_id, "running", beat, beat, pid=pid, host=host))
    now = [0.0]
    watch = HolderWatch(30_000, monotonic=lambda: now[0])

    def alive(run_id: str) -> bool:
        return other_holder(store, run_id, None, watch=watch) is not None

    assert alive("there-pid-free-here")  # before: its pid was probed here, found free: "crashed"
    assert alive("there-old-heartbeat")  # before: past the lease by this host's clock, "crashed"
    assert alive("unnamed-host")  # where it runs is unknown: the watch decides
    assert not alive("here-pid-free")  # this host, pid gone: crashed, at once
    assert alive("here-pid-alive")
    now[0] = 30.0  # a lease later, nothing changed: gone
    assert not any(alive(run_id) for run_id in records)


def test_a_publisher_in_another_process_is_alive_until_it_dies(db_path: Path, store: SqliteStore) -> None:
    """A real second process publishes through its own registry: its record names the host this process
    names (same pid space), so once it is killed its fresh record is no other holder any more; the same
    record claiming another host still is (its pid cannot be probed from here)."""
    script = (
        "import sys\n"
        "from flightlog.live import LiveRegistry\n"
        "from flightlog.store import SqliteStore\n"
        "with SqliteStore(sys.argv[1]) as s:\n"
        "    LiveRegistry(s).publish('s', 'waiting_tool')\n"
        "    print('published', flush=True)\n"
        "    sys.stdin.read()\n"
    )
    with subprocess.Popen(
        [sys.executable, "-c", script, str(db_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as child:
        try:
            assert child.stdout is not None and child.stdout.readline() == "published\n"
            (record,) = store.live_runs()
            assert (record.pid, record.host) == (child.pid, host_id())
            assert other_holder(store, "s", LiveRegistry(store), watch=HolderWatch()) == record
        finally:
            child.kill()  # dies without clearing its record, as a crashed holder
            child.wait()
    assert other_holder(store, "s", None, watch=HolderWatch()) is None  # killed: crashed
    store.put_live_run(replace(record, host="elsewhere/boot/1"))
    assert other_holder(store, "s", None, watch=HolderWatch()) is not None


@pytest.mark.parametrize("fenced", [False, True], ids=["before_attach", "after_attach"])
def test_a_wait_that_runs_out_says_what_the_other_holder_may_still_do(
    store: SqliteStore, fenced: bool
) -> None:
    """Before: "that writer goes on" for both waits, where after the attach it is fenced off."""
    effects = _in_doubt_publish(store)
    store.put_live_run(LiveRunRecord("s", "waiting_tool", now_ms(), now_ms(), pid=4242, host="elsewhere"))
    with pytest.raises(HolderBusy) as raised:
        _wait(store, effects, fenced=fenced)
    error = raised.value
    assert isinstance(error, SessionBusy)  # callers retrying SessionBusy (sub-agent parents) still do
    assert (error.session_id, error.seq, error.effect, error.fenced) == ("s", 3, "s:1:p1", fenced)
    assert error.holder == "pid 4242 on elsewhere"
    assert "goes on" not in str(error)
    if fenced:
        assert "is fenced off (its appends are refused) but its effect s:1:p1 may still be running" in str(
            error
        )
    else:
        assert "its authority was not taken, nothing written, and it may still be writing" in str(error)


def test_a_resume_does_not_wait_for_a_crashed_holder(db_path: Path, store: SqliteStore) -> None:
    """A holder killed mid-effect leaves its live record fresh: its pid is gone, so the resume reconciles
    at once (the ordinary crash recovery is not slowed down by the lease)."""
    performed: list[str | None] = []
    crash = [True]

    @tool(effect="side_effect", reconcile=lambda intent: None, in_thread=False)
    def publish(text: str) -> str:
        """Publish ``text`` (the first call: the process dies before it acts)."""
        if crash[0]:
            crash[0] = False
            raise SystemExit("killed before the effect")
        performed.append(current_effect_key())
        return "published"

    provider = ScriptedProvider([calls(call("publish", {"text": "t"}, id="p1")), reply("done")])
    k = Kernel(store, agent(provider, tools=[publish]), notary=None, heartbeat_s=None)
    with pytest.raises(SystemExit):
        k.run_sync("go", session_id="s", handle_signals=False)
    gone = _gone_pid()
    store.put_live_run(LiveRunRecord("s", "waiting_tool", now_ms(), now_ms(), pid=gone, host=host_id()))
    with logged(HOLDER_WAIT_LOG) as seen:  # the wait is logged at INFO
        result = Kernel(store, agent(provider, tools=[publish]), notary=None).resume_sync(
            "s", handle_signals=False
        )
    assert result.status == "completed", result.detail
    assert performed == ["s:1:p1"] and not seen.is_set()
    assert [p["outcome"] for p in customs(store, "s", "effect_reconciled")] == ["not_done"]


def _in_doubt_publish(store: SqliteStore) -> EffectTail:
    """Session ``s`` whose ledger records effect ``s:1:p1`` (tool ``publish``) in doubt; its tail from seq 0."""
    recorder = Recorder.create(store, session_id="s")
    recorder.record_intent("s:1:p1", {"tool": "publish", "arguments": {"text": "t"}})
    return EffectTail(store, "s", EffectFold(), next_seq=0)


def _wait(store: SqliteStore, effects: EffectTail, *, fenced: bool = False) -> None:
    """``await_previous_holder`` for ``s`` with no time to wait (HolderBusy at once when it would wait)."""
    provider = ScriptedProvider([reply("unused")])
    asyncio.run(
        await_previous_holder(
            store, "s", agent(provider), None, effects=effects, seq=3, fenced=fenced, wait_s=0.0
        )
    )


def _raw(db_path: Path, sql: str) -> None:
    with closing(sqlite3.connect(db_path)) as raw, raw:
        raw.execute(sql)


@pytest.mark.parametrize(
    "edit",
    [
        "DELETE FROM external_effects",
        "UPDATE external_effects SET status = 'completed', result_json = '{\"output\": \"forged\"}'",
    ],
    ids=["row_deleted", "row_forged_completed"],
)
def test_a_forged_effect_row_does_not_spare_the_wait(store: SqliteStore, db_path: Path, edit: str) -> None:
    """The ledger records the effect in doubt while another process holds the session: the resume waits,
    whatever the ``external_effects`` row says. Before: the decision read the table, so a deleted row or
    one set to completed let the resume go on at once (and reconcile an effect that may still be running)."""
    effects = _in_doubt_publish(store)
    store.put_live_run(LiveRunRecord("s", "waiting_tool", now_ms(), now_ms(), pid=4242, host="elsewhere"))
    _raw(db_path, edit)
    assert store.pending_effects("s") == []  # the table no longer says in doubt
    with pytest.raises(HolderBusy) as raised:
        _wait(store, effects)
    assert raised.value.effect == "s:1:p1"


def test_a_row_the_ledger_does_not_record_makes_no_one_wait(store: SqliteStore) -> None:
    """A pending row written beside the ledger (no intent event) is no effect in doubt: no wait."""
    Recorder.create(store, session_id="s")
    store.record_intent("s", "s:9:forged", "a" * 64, '{"tool": "publish"}')
    store.put_live_run(LiveRunRecord("s", "waiting_tool", now_ms(), now_ms(), pid=4242, host="elsewhere"))
    _wait(store, EffectTail(store, "s", EffectFold(), next_seq=0))  # returns: nothing in doubt


def test_the_wait_follows_the_holders_appends_through_the_chain(store: SqliteStore, db_path: Path) -> None:
    """The tail folds what the holder appends after the check (its completion ends the wait), and refuses a
    row appended since that does not link, naming its seq."""
    effects = _in_doubt_publish(store)
    provider = ScriptedProvider([reply("unused")])
    assert undelegated_in_doubt(effects.refresh(), agent(provider)) == ["s:1:p1"]
    recorder = Recorder.attach(store, "s")
    recorder.complete_effect("s:1:p1", {"output": "published", "is_error": False})
    assert undelegated_in_doubt(effects.refresh(), agent(provider)) == []
    seq = recorder.next_seq  # a row inserted beside the writer, linking to nothing it wrote
    _raw(
        db_path,
        "INSERT INTO events (session_id, seq, kind, event, prev_hash, hash, recorded_at_ms) VALUES "
        f"('s', {seq}, 'custom', CAST('{{}}' AS BLOB), '{'f' * 64}', '{'e' * 64}', 1)",
    )
    with pytest.raises(LedgerIntegrityError) as raised:
        effects.refresh()
    assert raised.value.seq == seq and "broken_link" in str(raised.value)


def _gone_pid() -> int:
    """The pid of a process that ran and was reaped: no such process any more."""
    out = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    return int(out.stdout)
