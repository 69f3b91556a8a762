"""An honest run never lets a side effect run twice after a cancel or a deadline (attack pass atk3).

A sync tool runs in a worker thread, which nothing can stop. Before, an activation that stopped without
waiting for it (SIGTERM through ``run_sync``; a wall-clock deadline past ``effect_grace_s``) cleared its live
record at once while the thread ran on in a live process: a resume elsewhere found no holder, did not wait,
ran the in-doubt effect, then the first thread's effect landed too (b13, b05). A resume by the very
``Kernel`` driving the session took its own record for no holder at all (b07). Now the record stays,
heartbeated, until every worker thread of the activation has returned (:mod:`flightlog.kernel.holding`), a
resume waits for it as for any live holder, an approved in-doubt call is reconciled before it runs again,
and a kernel refuses to resume a session it still holds (``KernelBusy``).

Every wait is on a state (a line printed, a row written, a record logged), with a generous bound; the tool
goes on only when the test writes a line to the holder's stdin.
"""

from __future__ import annotations

import asyncio
import os
import select
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import closing
from pathlib import Path
from typing import Any

from flightlog.errors import KernelBusy
from flightlog.kernel import Kernel, current_effect_key, tool
from flightlog.kernel.approvals import approve
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.kernel.takeover import HOLDER_WAIT_LOG
from flightlog.recorder import verify_session
from flightlog.store import SqliteStore

from .helpers import agent, customs, logged
from .hold_agent import performed_keys, publisher

HERE = Path(__file__).resolve().parent
WAIT_S = 60.0
"""Generous bound on waiting for a state another process or thread reaches (never expected to run out)."""


def _start(db: Path, performed: Path, mode: str) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, str(HERE / "hold_agent.py"), str(db), str(performed), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert _line(holder, holder.stdout) == "started\n"  # its intent is durable, its tool waits
    return holder


def _line(process: subprocess.Popen[str], stream: Any) -> str:
    """The next line ``process`` writes to ``stream`` (its stdout or stderr), waited for up to WAIT_S."""
    fd, got = stream.fileno(), bytearray()
    deadline = time.monotonic() + WAIT_S
    while not got.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise AssertionError(f"no line from pid {process.pid} (got {bytes(got)!r}, rc={process.poll()})")
        chunk = os.read(fd, 1)
        if not chunk:
            break
        got += chunk
    return got.decode()


def _stop(holder: subprocess.Popen[str]) -> None:
    """Kill the holder if it still runs, reap it and close its pipes."""
    if holder.poll() is None:
        holder.kill()
    holder.wait()
    for stream in (holder.stdin, holder.stdout, holder.stderr):
        if stream is not None:
            stream.close()


def _release(holder: subprocess.Popen[str]) -> None:
    """Let the holder's tool go on: it performs its effect and returns."""
    assert holder.stdin is not None
    holder.stdin.write("go\n")
    holder.stdin.flush()


def _wait_status(db: Path, status: str) -> None:
    deadline = time.monotonic() + WAIT_S
    with closing(sqlite3.connect(db)) as raw:
        while raw.execute("SELECT status FROM sessions WHERE session_id = 's'").fetchone() != (status,):
            assert time.monotonic() < deadline, f"session s never {status}"
            time.sleep(0.02)


def _live_pids(db: Path) -> list[int]:
    with closing(sqlite3.connect(db)) as raw:
        return [pid for (pid,) in raw.execute("SELECT pid FROM live_runs WHERE run_id = 's'")]


def _resume_once_waiting(db: Path, performed: Path, holder: subprocess.Popen[str]) -> Any:
    """Resume ``s`` in a thread of this process; once it says it waits for the holder (or has ended: the
    bug), release the holder's tool; returns the resume's result (or the error it raised)."""
    results: dict[str, Any] = {}
    done = threading.Event()
    with logged(HOLDER_WAIT_LOG) as waiting, SqliteStore(db) as store:
        kernel = Kernel(store, publisher(performed, hold=False), notary=None)

        def resume() -> None:
            try:
                results["resume"] = kernel.resume_sync("s", handle_signals=False)
            except BaseException as exc:  # reported by the caller's assertions
                results["resume"] = exc
            finally:
                done.set()

        thread = threading.Thread(target=resume)
        thread.start()
        while not (done.is_set() or waiting.is_set()):
            done.wait(0.01)
        _release(holder)
        thread.join(WAIT_S)
        assert not thread.is_alive()
        assert waiting.is_set(), f"the resume did not wait for the holder: {results['resume']!r}"
        assert verify_session(store, "s").ok
    return results["resume"]


def _reconciled(db: Path) -> list[str]:
    with SqliteStore(db) as store:
        return [p["outcome"] for p in customs(store, "s", "effect_reconciled")]


def test_sigterm_mid_sync_effect_keeps_the_live_record_until_the_thread_returns(tmp_path: Path) -> None:
    """b13: SIGTERM (``run_sync``'s handling, as ``flightlog run``) while the sync effect runs: the run is
    recorded cancelled, but the holder keeps its live record while the thread runs; a resume waits for it,
    then reconciles (done: the thread performed it) and never runs it again."""
    db, performed = tmp_path / "s.db", tmp_path / "performed"
    holder = _start(db, performed, "signals")
    try:
        os.kill(holder.pid, signal.SIGTERM)
        _wait_status(db, "cancelled")
        assert _live_pids(db) == [holder.pid]  # before: cleared as the activation stopped
        result = _resume_once_waiting(db, performed, holder)
        assert _line(holder, holder.stdout) == "ended cancelled\n"  # run_sync returned once its thread did
        assert holder.wait(WAIT_S) == 0
    finally:
        _stop(holder)
    assert performed_keys(performed) == ["s:1:p1"]  # before: twice
    assert not isinstance(result, BaseException) and result.status == "completed", result
    assert _reconciled(db) == ["completed"]
    assert _live_pids(db) == []


def test_a_deadline_in_doubt_approved_waits_for_the_thread_and_reconciles_first(tmp_path: Path) -> None:
    """b05: the wall clock runs out while the sync effect runs; past ``effect_grace_s`` the run suspends
    ``effect_in_doubt`` and ``run_sync`` waits for the thread, its live record kept. A human approves the
    call: the resume waits for the holder, and, the thread having performed the effect meanwhile, asks the
    reconciler before running it again (before: the approved call ran at once, no reconciler asked)."""
    db, performed = tmp_path / "s.db", tmp_path / "performed"
    holder = _start(db, performed, "deadline")
    try:
        _wait_status(db, "suspended")
        assert _live_pids(db) == [holder.pid]
        with SqliteStore(db) as store:
            approve(store, "s", "p1", responder="ops")
        result = _resume_once_waiting(db, performed, holder)
        assert _line(holder, holder.stdout) == "ended suspended\n"
        assert holder.wait(WAIT_S) == 0
    finally:
        _stop(holder)
    assert performed_keys(performed) == ["s:1:p1"]  # before: twice
    assert not isinstance(result, BaseException) and result.status == "budget_exhausted", result
    assert _reconciled(db) == ["completed"]


def test_a_second_sigterm_while_the_thread_runs_ends_the_process_and_the_resume_settles_it(
    tmp_path: Path,
) -> None:
    """While ``run_sync`` waits for the thread, a second SIGTERM ends the process at once (its default
    action): the thread dies with it (the effect never performed), its record names a pid that no longer
    exists, so a resume does not wait, the reconciler says not done, and the effect runs once."""
    db, performed = tmp_path / "s.db", tmp_path / "performed"
    holder = _start(db, performed, "signals")
    try:
        os.kill(holder.pid, signal.SIGTERM)
        while "SIGINT/SIGTERM again ends the process now" not in _line(holder, holder.stderr):
            pass  # the warning saying it waits for the thread, printed once the exit handlers are in place
        os.kill(holder.pid, signal.SIGTERM)
        assert holder.wait(WAIT_S) == -signal.SIGTERM
    finally:
        _stop(holder)
    assert _live_pids(db) == [holder.pid]  # never cleared: its process is gone
    with SqliteStore(db) as store:
        result = Kernel(store, publisher(performed, hold=False), notary=None).resume_sync(
            "s", handle_signals=False
        )
    assert result.status == "completed"
    assert performed_keys(performed) == ["s:1:p1"]
    assert _reconciled(db) == ["not_done"]


def test_one_kernel_refuses_to_resume_a_session_it_still_holds(store: SqliteStore) -> None:
    """b07: a ``Kernel`` resuming the session it drives (a server's "retry" handler sharing one instance) took
    its own live record for no holder and ran the effect twice. Now ``KernelBusy``: while its activation
    drives, and while a worker thread of the stopped (cancelled) activation runs; once it returned, the
    resume reconciles and never runs it again. The async API returns control meanwhile, its record kept."""
    performed: list[str] = []
    started, go = threading.Event(), threading.Event()

    def done(intent: object) -> str | None:
        return "published" if current_effect_key() in performed else None

    @tool(effect="side_effect", reconcile=done)
    def publish(text: str) -> str:
        """Publish ``text``."""
        if not started.is_set():
            started.set()
            assert go.wait(WAIT_S)
        performed.append(str(current_effect_key()))
        return "published"

    provider = ScriptedProvider([calls(call("publish", {"text": "t"}, id="p1")), reply("done")], by_turn=True)
    kernel = Kernel(store, agent(provider, tools=[publish]), notary=None, heartbeat_s=0.2)

    async def scenario() -> None:
        run = asyncio.create_task(kernel.run("go", session_id="s"))
        assert await asyncio.to_thread(started.wait, WAIT_S)
        try:
            await kernel.resume("s")
            raise AssertionError("resumed a session its own activation drives")
        except KernelBusy as exc:
            assert exc.threads == 0 and "an activation of it still drives" in str(exc)
        kernel.cancel()
        assert (await run).status == "cancelled"  # control returns; the thread runs on
        assert [r.run_id for r in store.live_runs()] == ["s"]  # before: cleared
        try:
            await kernel.resume("s")
            raise AssertionError("resumed a session whose effect its own worker thread still runs")
        except KernelBusy as exc:
            assert exc.threads == 1 and "1 worker thread(s)" in str(exc)
        go.set()
        deadline = time.monotonic() + WAIT_S
        while store.live_runs():  # cleared once the thread returned
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        assert (await kernel.resume("s")).status == "completed"

    asyncio.run(scenario())
    assert performed == ["s:1:p1"]
    assert [p["outcome"] for p in customs(store, "s", "effect_reconciled")] == ["completed"]


def test_a_call_cancelled_before_its_thread_started_never_runs_and_holds_nothing(store: SqliteStore) -> None:
    """A worker thread is counted from the moment the call is handed to the executor; a call cancelled while
    still queued (every worker busy) never runs its function and is uncounted at once, so the activation's
    record is cleared as it ends (it would otherwise be heartbeated for ever)."""
    from concurrent.futures import ThreadPoolExecutor

    from flightlog.kernel.holding import Hold
    from flightlog.live import LiveRegistry
    from flightlog.runs.model import RunState

    ran: list[str] = []
    busy, free = threading.Event(), threading.Event()

    def occupy() -> None:
        busy.set()
        assert free.wait(WAIT_S)

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(max_workers=1))
        occupied = loop.run_in_executor(None, occupy)  # the executor's one worker, until `free`
        deadline = time.monotonic() + WAIT_S
        while not busy.is_set():  # polled here: a to_thread wait would queue behind `occupy` itself
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        hold = Hold("s", LiveRegistry(store), heartbeat_s=0.2)
        hold.publish(RunState.WAITING_TOOL, tokens_used=0, steps_taken=0)
        queued = asyncio.ensure_future(hold.run_in_thread(lambda: ran.append("ran"), {}))
        await asyncio.sleep(0)  # the call reaches the executor's queue
        assert hold.threads == 1
        queued.cancel()
        try:
            await queued
            raise AssertionError("the queued call was not cancelled")
        except asyncio.CancelledError:
            pass
        assert hold.threads == 0
        assert hold.end() == 0 and not hold.holding
        assert store.live_runs() == []  # cleared as the activation ended
        free.set()
        await occupied

    try:
        asyncio.run(scenario())
    finally:
        free.set()  # never leave the executor's worker waiting, whatever failed
    assert ran == []
