"""An async side-effect tool that hands its blocking work to a thread itself (``await asyncio.to_thread``)
and is cancelled while that thread runs never has its effect run twice (attack pass atk4 b01).

Before, the cancel ended the tool's coroutine at once: its effect's mark was closed and the activation's
hold did not count the thread, so a resume (another ``Kernel``, here of the same process) took the holder
for done, reconciled ``not_done`` and ran the effect while the first thread still performed it. Now the
loop's default executor is a :class:`flightlog.kernel.holding.CountingExecutor`: the thread keeps the mark
and is counted by the hold until it returns. Every wait is on a state (an event set, a file written), with a
generous bound.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from pathlib import Path

import pytest

from flightlog.errors import HolderBusy
from flightlog.kernel import Agent, Kernel, current_effect_key, tool
from flightlog.kernel.holding import CountingExecutor, Hold
from flightlog.kernel.running import CURRENT_KEY, claim, release, running_here
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.store import SqliteStore

WAIT_S = 60.0
"""Generous bound on waiting for a state a thread reaches (never expected to run out)."""


def _keys(performed: Path) -> list[str]:
    return performed.read_text().splitlines() if performed.exists() else []


def _agent(performed: Path, started: threading.Event | None, go: threading.Event) -> Agent:
    def done(intent: object) -> str | None:
        return "published" if current_effect_key() in _keys(performed) else None

    @tool(effect="side_effect", reconcile=done)
    async def publish(text: str) -> str:
        """Publish ``text``: blocking work in a thread of the tool's own."""
        key = current_effect_key()

        def blocking() -> None:
            if started is not None:
                started.set()
                go.wait(WAIT_S)
            with performed.open("a", encoding="utf-8") as out:
                out.write(f"{key}\n")

        await asyncio.to_thread(blocking)
        return "published"

    provider = ScriptedProvider([calls(call("publish", {"text": "t"}, id="p1")), reply("done")], by_turn=True)
    return Agent(name="own-thread", route=[provider], tools=[publish])


def test_an_async_tools_own_thread_keeps_its_effect_held_after_a_cancel(tmp_path: Path) -> None:
    performed, started, go = tmp_path / "performed", threading.Event(), threading.Event()

    async def scenario() -> None:
        with SqliteStore(tmp_path / "s.db") as store:
            first = Kernel(store, _agent(performed, started, go), notary=None)
            task = asyncio.create_task(first.run("go", session_id="s"))
            while not started.is_set():  # the tool's thread runs (bounded by the test's own timeout)
                await asyncio.sleep(0.01)
            task.cancel()
            assert (await task).status == "cancelled"
            assert running_here("s:1:p1")  # the thread still holds the effect's mark
            second = Kernel(store, _agent(performed, None, go), notary=None)
            second.lease_ms = 1_000
            with pytest.raises(HolderBusy):
                await second.resume("s")
            assert _keys(performed) == []  # the resume did not run it beside the thread
            go.set()
            deadline = time.monotonic() + WAIT_S
            while running_here("s:1:p1"):  # the thread returns, and with it the mark
                assert time.monotonic() < deadline, "the tool's thread did not return"
                await asyncio.sleep(0.01)
            result = await second.resume("s")  # reconcile finds it done
            assert result.status == "completed", result.detail
        assert _keys(performed) == ["s:1:p1"]

    asyncio.run(asyncio.wait_for(scenario(), WAIT_S * 2))


def test_a_counted_call_cancelled_before_it_started_stops_counting_at_once() -> None:
    """One worker, busy: a second call submitted from an activation's context inside an effect waits in the
    queue; cancelled there, it never runs and holds neither the hold nor the mark."""
    busy, free = threading.Event(), threading.Event()
    hold = Hold("s", None, None)
    with CountingExecutor(max_workers=1) as pool:
        unbind = hold.bind()
        token = CURRENT_KEY.set("s:1:q")
        claim("s:1:q")  # the tool's own claim, ended below as the tool ends
        try:
            first = pool.submit(lambda: (busy.set(), free.wait(WAIT_S)))
            queued = pool.submit(lambda: pytest.fail("a cancelled call ran"))
        finally:
            CURRENT_KEY.reset(token)
            unbind()
        assert busy.wait(WAIT_S)
        assert hold.threads == 2
        assert queued.cancel()
        assert hold.threads == 1
        release("s:1:q")
        assert running_here("s:1:q")  # the running call keeps the mark
        free.set()
        concurrent.futures.wait([first], timeout=WAIT_S)
    assert hold.threads == 0
    assert not running_here("s:1:q")
