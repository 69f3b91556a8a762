"""An activation's hold on its session: the live record, kept while the activation drives the run *and* while
any worker thread it started still runs.

A sync tool runs in a worker thread (``Tool.threaded``), and a thread cannot be stopped: when the activation
stops without waiting for it (a cancel, Ctrl-C or SIGTERM through ``run_sync``; a wall-clock deadline after
``Kernel.effect_grace_s``; a writer fenced off), the tool runs on, and a side effect it performs may land
later. Before (attack pass atk3), the activation cleared its live record as it stopped, so a resume from
another process found no holder, did not wait (:mod:`flightlog.kernel.takeover`), ran the in-doubt effect,
and the first thread's effect landed too: performed twice.

So :class:`Hold` counts the activation's worker threads (:meth:`Hold.run_in_thread`, which ``Tool.invoke``
uses while the hold is :func:`current_hold`) and keeps the record, heartbeated every ``heartbeat_s``, until
the activation has ended (:meth:`Hold.end`) and every such thread has returned; only then is it cleared
(by the heartbeat thread, once the last thread returns). A resume therefore waits for that process as for
any live holder (bounded: ``HolderBusy`` past the bound). A thread never outlives its process: once the
process exits (or is killed) the record names a pid that no longer exists and a resume on this host takes it
for gone at once (:func:`flightlog.live.other_holder`; on another host, once watched unchanged for a lease).
Where the verified ledger names the process that runs an in-doubt effect (the intent's ``holder``), a resume
on this host does not read the record at all: it asks that process whether it still holds the effect's mark
(:mod:`flightlog.kernel.running`), which a worker thread keeps open until its tool returns.

A call cancelled before its thread started never starts it (the thread finds the call dropped), so nothing
it does can land after the hold is released.

An async tool may hand blocking work to a thread itself (``await asyncio.to_thread(...)``,
``loop.run_in_executor(None, ...)``); cancelled while that thread runs, the tool's coroutine ends at once.
Before (attack pass atk4 b01), its effect's mark was then closed and the hold did not count that thread: a
resume reconciled and ran the effect again while the thread still performed it. So an activation makes the
event loop's default executor a :class:`CountingExecutor` (:func:`count_default_executor`, when the
application has not set one of its own): each call submitted to it from an activation's context is counted
by that activation's hold, and from inside a side effect keeps the effect's mark
(:func:`flightlog.kernel.running.claim`) until the call returns; one cancelled before it started stops
counting at once. An executor of the application's own (``loop.set_default_executor``, or one passed to
``run_in_executor``) is not counted: ``docs/attacks.md``, known limits.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import weakref
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any, TypeVar

from ..live import LiveRegistry
from ..runs.model import RunState
from .running import CURRENT_KEY, claim, release

__all__ = [
    "CountingExecutor",
    "Hold",
    "collecting",
    "count_default_executor",
    "current_hold",
    "threads_returned",
]

T = TypeVar("T")

log = logging.getLogger("flightlog.kernel")

_CURRENT: ContextVar[Hold | None] = ContextVar("flightlog_kernel_hold", default=None)
_COLLECTED: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, list[Hold]] = weakref.WeakKeyDictionary()


def collecting() -> list[Hold]:
    """Collect, into the returned list, every :class:`Hold` created from now on in the running event loop
    (a sub-agent's kernel included, which runs in a context of its own): what a sync wrapper waits for
    (:func:`threads_returned`).

    Raises:
        RuntimeError: no event loop is running.
    """
    holds: list[Hold] = []
    _COLLECTED[asyncio.get_running_loop()] = holds
    return holds


async def threads_returned(holds: list[Hold], exits: bool) -> None:
    """Return once none of ``holds`` holds any more (their activations stopped and every worker thread they
    started returned), saying once, as a warning, why it waits (``exits``: a second SIGINT/SIGTERM ends the
    process, :func:`flightlog.kernel.signals.run_blocking`). Never bounded: a thread cannot be stopped."""
    waiting = [h for h in holds if h.holding]
    if not waiting:
        return
    log.warning(
        "%s: %d worker thread(s) of the stopped run still run (a sync tool cannot be stopped); waiting for "
        "them to return, the live record kept so a resume waits%s",
        ", ".join(f"session {h.session_id}" for h in waiting),
        sum(h.threads for h in waiting),
        "; SIGINT/SIGTERM again ends the process now (a side effect left in doubt)" if exits else "",
    )
    for hold in waiting:
        await hold.released()


def current_hold() -> Hold | None:
    """The hold of the activation driving the current task (set by the activation for its run), else None."""
    return _CURRENT.get()


class Hold:
    """One activation's live record and the worker threads it started (module docs).

    Args:
        session_id: The session the activation drives.
        live: The registry it publishes to, or None (no live record: the threads are still counted, so a
            sync wrapper can wait for them).
        heartbeat_s: Seconds between heartbeats (> 0), or None for no live record.

    Thread-safe: threads are counted from the event loop and released from the worker threads.
    """

    def __init__(self, session_id: str, live: LiveRegistry | None, heartbeat_s: float | None) -> None:
        self.session_id = session_id
        self._live = live if heartbeat_s is not None else None
        self._every = heartbeat_s or 0.0
        self._lock = threading.Lock()
        self._threads = 0  # worker threads started (or queued) and not returned
        self._ended = False  # the activation has stopped driving
        self._idle = threading.Event()  # ended and no thread left: the record is (being) cleared
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        self._clear_in_beat = False  # the last returning thread leaves the clear to the heartbeat thread
        self._holds: Callable[[], bool] | None = None  # whether the activation still holds the session
        try:
            collected = _COLLECTED.get(asyncio.get_running_loop())
        except RuntimeError:  # created outside an event loop: nothing collects it
            collected = None
        if collected is not None:
            collected.append(self)

    # ─── the record ───────────────────────────────────────────────────────────────────────
    def publish(
        self,
        state: RunState,
        *,
        tokens_used: int,
        steps_taken: int,
        holds: Callable[[], bool] | None = None,
    ) -> None:
        """Publish the live record and start heartbeating it (nothing without a registry).

        ``holds``: whether the activation still holds the session (its authority epoch is current); a
        heartbeat refused while it does (the stored record was edited under it) writes the record back,
        with a WARNING (:meth:`flightlog.live.LiveRegistry.reclaim`). None: a refused heartbeat stays so.

        Raises:
            StoreError: the store refused the record (nothing heartbeats then).
        """
        if self._live is None:
            return
        self._live.publish(self.session_id, state, tokens_used=tokens_used, steps_taken=steps_taken)
        self._holds = holds
        self._beat = threading.Thread(
            target=self._beating, name=f"flightlog-pulse-{self.session_id}", daemon=True
        )
        self._beat.start()

    def _beating(self) -> None:
        assert self._live is not None
        while not self._stop.wait(self._every):
            self._live.beat(self.session_id, self._holds)
        if self._clear_in_beat:  # the activation ended earlier; its last thread has just returned
            try:
                self._live.clear(self.session_id)
            except Exception:  # no caller to raise to: said, and a resume then watches the record a lease
                log.warning("clearing the live record of %s failed", self.session_id, exc_info=True)

    def end(self) -> int:
        """The activation has stopped driving: clear the record now when no worker thread of it still runs
        (synchronously, as the activation returns), else keep it heartbeated until the last one returns.

        Returns:
            How many worker threads still run (0: the record is cleared).

        Raises:
            StoreError: the store refused to delete the record (this process's own record is gone).
        """
        with self._lock:
            self._ended = True
            running = self._threads
            if running == 0:
                self._idle.set()
        if running:
            log.info(
                "session %s: %d worker thread(s) of the stopped activation still run; its live record stays "
                "until they return (a resume waits for them)",
                self.session_id,
                running,
            )
            return running
        self._stop.set()
        if self._beat is not None and self._live is not None:  # a record was published
            self._beat.join()
            self._live.clear(self.session_id)
        return 0

    @property
    def holding(self) -> bool:
        """Whether the activation still drives its run or a worker thread it started still runs."""
        return not self._idle.is_set()

    @property
    def ended(self) -> bool:
        """Whether the activation has stopped driving (:meth:`end`)."""
        with self._lock:
            return self._ended

    @property
    def threads(self) -> int:
        """How many worker threads of the activation still run."""
        with self._lock:
            return self._threads

    async def released(self, poll_s: float = 0.05) -> None:
        """Return once :attr:`holding` is False (polled every ``poll_s`` seconds, never bounded: a sync
        wrapper's wait for the threads; ``run_blocking``'s second signal ends the process instead), and the
        heartbeat thread has cleared the record (so a process exiting right after leaves none behind)."""
        while self.holding or (self._beat is not None and self._beat.is_alive()):
            await asyncio.sleep(poll_s)

    # ─── worker threads ───────────────────────────────────────────────────────────────────
    def bind(self) -> Callable[[], None]:
        """Make this the :func:`current_hold` of the current context; returns the undo."""
        token = _CURRENT.set(self)
        return lambda: _CURRENT.reset(token)

    async def run_in_thread(self, fn: Callable[..., Any], kwargs: Mapping[str, Any]) -> Any:
        """``fn(**kwargs)`` in a worker thread (``asyncio.to_thread``), counted until it returns.

        Cancelling the caller does not stop a thread that started (it is counted until it returns); one
        cancelled before its thread started never runs ``fn``.

        Raises:
            BaseException: whatever ``fn`` raises, or the caller's cancellation.
        """
        claim = {"started": False, "dropped": False}
        with self._lock:
            self._threads += 1

        def body() -> Any:
            with self._lock:
                if claim["dropped"]:
                    return None  # cancelled before it started: nothing runs (released by the caller)
                claim["started"] = True
            try:
                return fn(**kwargs)
            finally:
                self._returned()

        try:
            return await asyncio.to_thread(body)
        except BaseException:
            with self._lock:
                never = not claim["started"]
                claim["dropped"] = never
            if never:
                self._returned()
            raise

    def count_thread(self) -> bool:
        """Count one more worker thread (ended by one :meth:`_returned`); False, nothing counted, when the
        hold has already let go (its activation ended and every thread returned: its record is cleared)."""
        with self._lock:
            if self._idle.is_set():
                return False
            self._threads += 1
            return True

    def _returned(self) -> None:
        with self._lock:
            self._threads -= 1
            last = self._ended and self._threads == 0
            if last:
                self._idle.set()
                self._clear_in_beat = True
        if last:
            log.info("session %s: the last worker thread of the stopped activation returned", self.session_id)
            self._stop.set()  # the heartbeat thread, if any (a record was published), clears it as it leaves


class CountingExecutor(concurrent.futures.ThreadPoolExecutor):
    """A thread pool whose calls, submitted from an activation's context, are counted by its :class:`Hold`
    and, from inside a side effect (:data:`~flightlog.kernel.running.CURRENT_KEY` set), keep the effect's
    mark until they return (module docs). A call submitted elsewhere runs as in any thread pool.

    Raises (from :meth:`submit`): OSError when the effect's mark cannot be made (nothing submitted), and
    whatever :class:`concurrent.futures.ThreadPoolExecutor` raises (e.g. after shutdown).
    """

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[T]:
        hold, key = current_hold(), CURRENT_KEY.get()
        if hold is None and key is None:
            return super().submit(fn, *args, **kwargs)
        if key is not None:
            claim(key)  # the tool's own claim holds the mark already: this one keeps it past the tool
        try:
            counted = hold is not None and hold.count_thread()
        except BaseException:
            if key is not None:
                release(key)
            raise
        pending = threading.Lock()  # held until one side (the call's return, its cancel) ends the count

        def done() -> None:
            if pending.acquire(blocking=False):
                if key is not None:
                    release(key)
                if counted and hold is not None:
                    hold._returned()

        def body() -> T:
            try:
                return fn(*args, **kwargs)
            finally:
                done()

        try:
            future = super().submit(body)
        except BaseException:
            done()
            raise
        future.add_done_callback(lambda f: done() if f.cancelled() else None)  # never started
        return future


def count_default_executor(loop: asyncio.AbstractEventLoop) -> bool:
    """Make ``loop``'s default executor a :class:`CountingExecutor` unless the application set one of its
    own (module docs); whether the loop's default executor counts now. The loop shuts it down as it closes
    (``asyncio.run``), as it does its own."""
    current = getattr(loop, "_default_executor", None)  # CPython's; no public reader
    if isinstance(current, CountingExecutor):
        return True
    if current is not None:
        return False
    loop.set_default_executor(CountingExecutor(thread_name_prefix="flightlog-tool"))
    return True
