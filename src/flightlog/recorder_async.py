"""The durable recorder for asyncio code: the same write path, run on a worker thread.

:class:`AsyncRecorder` wraps a :class:`~flightlog.recorder.Recorder` and runs every blocking call (the
append transaction and its fsync, attach's chain recomputation, reads) on one dedicated worker thread per
recorder, so a coroutine that appends never stalls its event loop for the commit (issue 16, item 5).

Guarantees are the recorder's (seed 003 ``Psp9Recorder``), unchanged:

* **Write-ahead.** An awaited :meth:`AsyncRecorder.append` returns only after the event is durable (its
  transaction committed, group commit included); a failed append leaves nothing half-written and the head
  unchanged.
* **Order and the single writer.** One worker thread per recorder runs its calls first-in first-out, so
  appends from many coroutines of one recorder take seqs in the order they were awaited (started), and
  reads see every append started before them.
* **Errors** are the recorder's, raised unchanged in the awaiting coroutine (``AppendConflict``,
  ``StaleWriter``, ``EncodingError``, ``SessionSealed``, ``LedgerIntegrityError``...).

Cancellation (the awaiting task is cancelled while a call is pending):

* *Not started yet* (queued behind earlier calls of this recorder): the call is withdrawn and never runs:
  nothing is written. ``CancelledError`` propagates at once.
* *Running* (the transaction is in flight on the worker): a transaction cannot be interrupted halfway, so
  the coroutine waits for it to end (further cancellations are absorbed meanwhile), then re-raises the
  ``CancelledError``. When it propagates the outcome is settled, never in doubt: if the append committed,
  the events are durable, the head has moved and subscribers were told; the error carries a note
  (``add_note``) naming the seqs written, and :attr:`AsyncRecorder.cancelled_outcomes` keeps them. If the
  append failed, nothing was written, and the note names the failure (which is also the error's
  ``__context__``).

:meth:`AsyncRecorder.create` and :meth:`AsyncRecorder.attach` run on a fresh thread (``asyncio.to_thread``)
and are not withdrawn when cancelled: the call runs to its end, so after a cancelled ``create`` the session
may exist (``attach`` it), and after a cancelled ``attach`` the epoch may have moved (attach again).

Close the recorder (``await arec.aclose()`` or ``async with``) to stop its worker thread; an unclosed one
idles until the interpreter exits.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, TypeVar

from .events import Event
from .notarization import Notarizer, SignedHead
from .recorder import Recorder, Subscriber
from .store.base import SessionRecord, Store, StoredEvent

__all__ = ["AsyncRecorder", "CancelledOutcome"]

_T = TypeVar("_T")


class CancelledOutcome:
    """What became of a call whose awaiting task was cancelled while it ran on the worker.

    Attributes:
        operation: The method's name (``"append"``, ``"append_many"``, ``"finish"``...).
        stored: The rows it returned, durable (the append methods; empty for other calls or a failure).
        error: The exception it failed with (nothing written), or None when it completed.
    """

    __slots__ = ("error", "operation", "stored")

    def __init__(self, operation: str, stored: list[StoredEvent], error: BaseException | None) -> None:
        self.operation = operation
        self.stored = stored
        self.error = error

    def __repr__(self) -> str:
        seqs = [row.seq for row in self.stored]
        return f"CancelledOutcome({self.operation!r}, seqs={seqs}, error={self.error!r})"


class AsyncRecorder:
    """Async counterpart of :class:`~flightlog.recorder.Recorder` for one session (see the module docstring).

    Build with :meth:`create` or :meth:`attach` (awaited), or wrap an existing recorder with
    ``AsyncRecorder(recorder)``. The wrapped recorder is :attr:`recorder`; do not call its blocking
    methods from the event loop thread.
    """

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=f"flightlog-arecorder-{recorder.session_id[:12]}"
        )
        self.cancelled_outcomes: list[CancelledOutcome] = []
        """Calls that ran to their end after their awaiting task was cancelled, oldest first."""

    # ─── construction ─────────────────────────────────────────────────────────────────────
    @classmethod
    async def create(cls, store: Store, **options: Any) -> AsyncRecorder:
        """Create a new, empty session (:meth:`Recorder.create <flightlog.recorder.Recorder.create>`,
        same keyword arguments and errors) without blocking the loop."""
        recorder = await asyncio.to_thread(functools.partial(Recorder.create, store, **options))
        return cls(recorder)

    @classmethod
    async def attach(
        cls,
        store: Store,
        session_id: str,
        *,
        take_authority: bool = True,
        notary: Notarizer | None = None,
        full: bool = True,
    ) -> AsyncRecorder:
        """Resume writing a session after recomputing its chain on a worker thread
        (:meth:`Recorder.attach <flightlog.recorder.Recorder.attach>`: same arguments and errors,
        ``SessionNotFound`` and ``LedgerIntegrityError`` naming the first divergent seq)."""
        attach = functools.partial(
            Recorder.attach, store, session_id, take_authority=take_authority, notary=notary, full=full
        )
        return cls(await asyncio.to_thread(attach))

    async def aclose(self) -> None:
        """Wait for the calls already submitted, then stop the worker thread (the store stays open).
        Later calls raise ``RuntimeError``."""
        await asyncio.to_thread(self._executor.shutdown, wait=True)

    async def __aenter__(self) -> AsyncRecorder:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # ─── state (in memory: no I/O) ────────────────────────────────────────────────────────
    @property
    def session_id(self) -> str:
        """The session's id."""
        return self.recorder.session_id

    @property
    def store(self) -> Store:
        """The store written to."""
        return self.recorder.store

    @property
    def head(self) -> str:
        """Chain hash of the last durable event (``"GENESIS"`` when empty)."""
        return self.recorder.head

    @property
    def next_seq(self) -> int:
        """The seq the next append will take (= number of durable events)."""
        return self.recorder.next_seq

    @property
    def epoch(self) -> int:
        """The authority epoch (fencing token) this recorder writes under."""
        return self.recorder.epoch

    @property
    def root(self) -> str:
        """RFC 9162 tree head over all durable events, hex."""
        return self.recorder.root

    # ─── writes ───────────────────────────────────────────────────────────────────────────
    async def append(self, event: Event) -> StoredEvent:
        """Durably append one event; returns once it is durable (write-ahead). Errors as
        :meth:`Recorder.append <flightlog.recorder.Recorder.append>`; cancellation: see the module docstring."""
        rows = await self._run("append", self.recorder.append_many, [event])
        return rows[0]

    async def append_many(
        self, events: Sequence[Event], *, recorded_at_ms: Sequence[int] | None = None
    ) -> list[StoredEvent]:
        """Durably append several events in one transaction (all or none); see
        :meth:`Recorder.append_many <flightlog.recorder.Recorder.append_many>`."""
        work = functools.partial(self.recorder.append_many, list(events), recorded_at_ms=recorded_at_ms)
        return await self._run("append_many", work)

    async def record_custom(self, kind: str, payload: Any) -> StoredEvent:
        """Append a ``Custom`` event (seed 003 ``record_custom``); see :meth:`append`."""
        rows = await self._run("record_custom", lambda: [self.recorder.record_custom(kind, payload)])
        return rows[0]

    async def finish(self, status: str) -> None:
        """Set the session's status, sealing it with a notary; see
        :meth:`Recorder.finish <flightlog.recorder.Recorder.finish>`."""
        await self._run("finish", self.recorder.finish, status)

    async def checkpoint(self) -> SignedHead | None:
        """Sign a checkpoint over every durable event; see
        :meth:`Recorder.checkpoint <flightlog.recorder.Recorder.checkpoint>`."""
        return await self._run("checkpoint", self.recorder.checkpoint)

    async def put_artifact(self, content: bytes, media_type: str = "application/octet-stream") -> str:
        """Store bytes content-addressed; returns the handle ``sha256:<hex>``."""
        return await self._run("put_artifact", self.recorder.put_artifact, content, media_type)

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        """Call ``subscriber`` after each durable append, **off the event loop**: on the thread whose commit
        made it durable (this recorder's worker; with group commit possibly another writer's thread). Use
        ``loop.call_soon_threadsafe`` to reach the loop. Returns a function that unsubscribes. An exception it
        raises is raised from the append whose commit delivered the event (:meth:`Recorder.subscribe`)."""
        return self.recorder.subscribe(subscriber)

    # ─── reads ────────────────────────────────────────────────────────────────────────────
    async def events(self, *, start: int = 0) -> list[StoredEvent]:
        """This session's durable rows from seq ``start`` on, in seq order (read after every append
        started before this call)."""
        return await self._run("events", lambda: list(self.store.read_events(self.session_id, start=start)))

    async def session(self) -> SessionRecord:
        """The session's stored record (status, recorded head, metadata)."""
        return await self._run("session", self.store.get_session, self.session_id)

    async def get_artifact(self, handle: str) -> bytes | None:
        """The bytes behind a handle (``sha256:<hex>`` or bare hex), or None; ``ArtifactIntegrityError``
        when the stored bytes do not hash to it (as :meth:`Recorder.get_artifact`)."""
        return await self._run("get_artifact", self.store.get_artifact, handle)

    # ─── the worker ───────────────────────────────────────────────────────────────────────
    async def _run(self, operation: str, fn: Callable[..., _T], *args: Any) -> _T:
        """Run ``fn(*args)`` on this recorder's worker thread; on cancellation withdraw it if it has not
        started, else wait for its end and record the outcome (module docstring)."""
        future = self._executor.submit(fn, *args)
        waiter = asyncio.wrap_future(future)
        cancelled: asyncio.CancelledError | None = None
        while not waiter.done():
            try:
                await asyncio.wait({waiter})  # unlike ``await waiter``, a cancellation leaves it running
            except asyncio.CancelledError as exc:
                if cancelled is None and future.cancel():
                    raise  # not started: withdrawn, it never runs, nothing written
                cancelled = cancelled or exc
        if cancelled is None:
            return waiter.result()
        error = waiter.exception()
        if error is not None:
            outcome = CancelledOutcome(operation, [], error)
            cancelled.add_note(
                f"flightlog: {operation} on {self.session_id} failed, nothing written: {error!r}"
            )
            cancelled.__context__ = error
        else:
            result = waiter.result()
            rows = [r for r in result if isinstance(r, StoredEvent)] if isinstance(result, list) else []
            outcome = CancelledOutcome(operation, rows, None)
            seqs = ", ".join(str(row.seq) for row in rows) or "no event"
            cancelled.add_note(f"flightlog: {operation} on {self.session_id} completed durably: seq {seqs}")
        self.cancelled_outcomes.append(outcome)
        raise cancelled
