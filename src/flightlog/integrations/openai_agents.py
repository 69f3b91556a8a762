"""``FlightlogSession``: an OpenAI Agents SDK session whose history is a tamper-evident flightlog ledger.

Install with ``pip install 'flightlog[openai-agents]'`` (``openai-agents>=0.2``). Usage::

    from agents import Agent, Runner
    from flightlog.integrations.openai_agents import FlightlogSession

    session = FlightlogSession("user-42", "agent.db")      # a path, a URL or an open Store
    result = await Runner.run(Agent(name="helper"), "Hello", session=session)

Semantics follow the SDK's ``Session`` protocol (``agents/memory/session.py``) and its reference
implementation ``SQLiteSession`` (``agents/memory/sqlite_session.py``) rule for rule; each method names the
rule it follows. Tested against ``openai-agents`` 0.24 and 0.2.0 (which has no ``SessionSettings``).

Ledger layout (one flightlog session per SDK ``session_id``, id ``openai-agents:<session_id>``, source
``openai-agents``; every event is a :class:`~flightlog.events.Custom`):

* ``openai_agents.session`` (seq 0, written with the session row in one transaction):
  ``{"session_id": <SDK session id>}``. It makes the ledger non-empty, so a later ``attach`` can verify it.
* ``openai_agents.item`` (one per item of an ``add_items`` call, all of a call in one transaction): the
  payload *is* the item, verbatim as JSON (stored in RFC 8785 form: object keys sorted, ``1.0`` stored as
  ``1``; the value read back compares equal to the value added).
* ``openai_agents.pop`` (``pop_item`` on a non-empty session): ``{"seq": <seq of the item removed>}``.
* ``openai_agents.clear`` (``clear_session``): ``{"count": <number of items removed>}``.

Nothing is ever deleted (flightlog's append-only invariant); ``pop`` and ``clear`` are compensating events.
The current history is a fold over the stream: ``item`` appends ``(seq, item)``; ``pop`` removes the last
live item, which must be the one whose seq it names (else ``LedgerIntegrityError``); ``clear`` empties
the list; other events are ignored. The fold runs once, when the session is first used (after
:meth:`~flightlog.recorder.Recorder.attach` recomputed the chain), and is then kept current by this
object's own writes. Items are kept as the stored canonical bytes and parsed afresh on every read, so
callers get new objects each time (as with ``SQLiteSession``'s ``json.loads``).

Writers and fencing: the first operation attaches a :class:`~flightlog.recorder.Recorder`, which bumps the
session's authority epoch. A ``FlightlogSession`` opened earlier on the same session id (in this process
or another) is thereby fenced off: every later operation on it raises
:class:`~flightlog.errors.StaleWriter` (writes are refused by the store; reads are refused too, because
its folded history may be stale) and nothing is written. One live ``FlightlogSession`` per session id at a
time; share it between tasks (it is safe to) rather than opening one per request.

Concurrency: the store is blocking, so every operation runs in a worker thread (``asyncio.to_thread``),
serialised per ``FlightlogSession`` by a lock taken in that thread: the event loop never blocks and
operations from several tasks, threads or event loops apply one at a time. Mutations keep waiting for
their outcome if the caller is cancelled, then re-raise the cancellation (as ``SQLiteSession`` does).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from agents.items import TResponseInputItem
from agents.memory.session import SessionABC

try:  # SessionSettings (a session's default ``limit``) came after openai-agents 0.2
    from agents.memory import session_settings as _settings
except ImportError:  # pragma: no cover - exercised only with an old SDK
    _settings = None  # type: ignore[assignment]

from ..encoding import decode_stored, parse_json
from ..errors import AppendConflict, LedgerIntegrityError, SessionNotFound, StaleWriter
from ..events import Custom, Event
from ..integrity.notary import USER_NOTARY, Notary, UserNotary, resolve_notary
from ..ledger import VerifyReport
from ..recorder import Recorder, verify_session
from ..store.base import Store
from ._stores import StoreHandle

if TYPE_CHECKING:
    from agents.memory.session_settings import SessionSettings

__all__ = [
    "CLEAR_KIND",
    "ITEM_KIND",
    "OPENED_KIND",
    "POP_KIND",
    "SESSION_PREFIX",
    "SOURCE",
    "FlightlogSession",
    "session_id_for",
]

SESSION_PREFIX = "openai-agents:"
"""Prefix of the flightlog session id; ``flightlog show <SDK session id>`` finds it after the colon."""
SOURCE = "openai-agents"
"""The ``source`` of the flightlog session row."""
OPENED_KIND = "openai_agents.session"
"""``custom_kind`` of seq 0, written with the session row: ``{"session_id": <SDK session id>}``."""
ITEM_KIND = "openai_agents.item"
"""``custom_kind`` of one added item; the payload is the item (RFC 8785 JSON)."""
POP_KIND = "openai_agents.pop"
"""``custom_kind`` of a ``pop_item``: ``{"seq": <seq of the item removed>}``."""
CLEAR_KIND = "openai_agents.clear"
"""``custom_kind`` of a ``clear_session``: ``{"count": <number of items removed>}``."""

_T = TypeVar("_T")


def session_id_for(session_id: str) -> str:
    """The flightlog session id holding the SDK session ``session_id``: ``openai-agents:<session_id>``."""
    return SESSION_PREFIX + session_id


async def _await_mutation(work: Awaitable[_T]) -> _T:
    """Await ``work`` to its end even if the caller is cancelled meanwhile, then re-raise the cancellation.

    Same rule as the SDK's private ``agents.memory.session._await_mutation``: a write that has started is
    never left running unobserved while the caller goes on.
    """
    task = asyncio.ensure_future(work)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError as exc:
            cancelled = cancelled or exc
    if cancelled is not None:
        if not task.cancelled():
            task.exception()  # retrieved, so a failure is not also reported as "never retrieved"
        raise cancelled
    return task.result()


class FlightlogSession(SessionABC):
    """OpenAI Agents SDK ``Session`` stored as a hash-chained flightlog ledger (see the module docstring).

    Args:
        session_id: The SDK session id (any string); the ledger session is ``openai-agents:<session_id>``.
        store: An open :class:`~flightlog.store.base.Store` (left open by :meth:`close`), or a path or
            URL for :func:`flightlog.open_store`, opened on first use in a worker thread and closed by
            :meth:`close`.
        notary: Sign checkpoints and verify them on attach (:mod:`flightlog.integrity.checkpoints`). Default
            :data:`~flightlog.integrity.notary.USER_NOTARY`: the user's log key, as ``flightlog run`` signs
            (resolved here, creating the key on first use); None keeps an unsigned chain.
        session_settings: The SDK's ``SessionSettings`` (or a dict of them); its ``limit`` applies when
            :meth:`get_items` gets no ``limit`` (as in ``SQLiteSession``).

    Nothing is read or written until the first operation (or :meth:`open`). Errors raised by the
    operations, beyond those named on each: ``LedgerIntegrityError`` (the stored chain diverges: refused
    on first use, naming the seq), ``StaleWriter`` (a newer ``FlightlogSession`` took over this session
    id), ``StoreUnavailable`` (the store cannot be opened), ``RuntimeError`` (used after :meth:`close`).
    """

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        session_id: str,
        store: Store | str | os.PathLike[str],
        *,
        notary: Notary | UserNotary | None = USER_NOTARY,
        session_settings: SessionSettings | dict[str, Any] | None = None,
    ) -> None:
        self.session_id = session_id
        self.ledger_session_id = session_id_for(session_id)
        self.session_settings = _coerce_settings(session_settings)
        self._stores = StoreHandle(store)
        self._notary = resolve_notary(notary)
        self._lock = threading.Lock()
        self._recorder: Recorder | None = None
        self._items: list[tuple[int, bytes]] = []  # live items: (seq, stored event bytes)
        self._closed = False

    # ─── SDK Session protocol ────────────────────────────────────────────────────────────────
    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The current history, oldest first (``Session.get_items``).

        Args:
            limit: None: ``session_settings.limit``, and all items when that is None too. ``N > 0``: the
                latest N items, in chronological order. ``0``: none. Negative: all (``SQLiteSession``
                passes it to SQL ``LIMIT``, where a negative value means no limit).

        Returns:
            New item objects (JSON values, each equal to the one added).
        """
        effective = limit if limit is not None else getattr(self.session_settings, "limit", None)

        def read() -> list[tuple[int, bytes]]:
            with self._lock:
                self._ready()
                if effective is None or effective < 0:
                    return list(self._items)
                # the last min(N, len) items; len - N would go negative, and a negative slice start
                # counts from the end (6 items, limit 7 gave 1 item)
                return self._items[max(0, len(self._items) - effective) :] if effective > 0 else []

        rows = await asyncio.to_thread(read)
        return [_item(data) for _, data in rows]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append ``items`` in order, all in one transaction (``Session.add_items``); an empty list writes
        nothing (the closed check comes first, as in ``SQLiteSession``).

        Raises:
            EncodingError: an item is not representable as RFC 8785 JSON (NaN, an integer beyond
                ±(2**53-1), a lone surrogate, a non-JSON object), naming the field; nothing written.
        """
        self._check_open()
        if not items:
            return
        events = [Custom(custom_kind=ITEM_KIND, payload=item) for item in items]

        def write() -> None:
            with self._lock:
                rec = self._ready()
                rows = rec.append_many(events)
                self._items.extend((row.seq, row.event_bytes) for row in rows)

        await _await_mutation(asyncio.to_thread(write))

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the most recent item, or None when there is none (``Session.pop_item``).

        Appends ``openai_agents.pop`` naming the item's seq; an empty session writes nothing.
        """

        def write() -> TResponseInputItem | None:
            with self._lock:
                rec = self._ready()
                if not self._items:
                    return None
                seq, data = self._items[-1]
                rec.append(Custom(custom_kind=POP_KIND, payload={"seq": seq}))
                self._items.pop()
                return _item(data)

        return await _await_mutation(asyncio.to_thread(write))

    async def clear_session(self) -> None:
        """Remove every item (``Session.clear_session``): appends ``openai_agents.clear``; later
        ``add_items`` start a fresh history in the same ledger session."""

        def write() -> None:
            with self._lock:
                rec = self._ready()
                rec.append(Custom(custom_kind=CLEAR_KIND, payload={"count": len(self._items)}))
                self._items.clear()

        await _await_mutation(asyncio.to_thread(write))

    # ─── flightlog extras ────────────────────────────────────────────────────────────────────
    def record_events(self, events: Sequence[Event]) -> None:
        """Append ``events`` (all in one transaction) to this session's ledger through its recorder, from
        synchronous code (``FlightlogTracingProcessor`` records a run's spans so). The items are unchanged:
        the fold ignores events that are not ``openai_agents.*``.

        Raises:
            EncodingError: an event is not representable as RFC 8785 JSON; nothing written.
            StaleWriter: a newer ``FlightlogSession`` took over this session id.
        """
        with self._lock:
            self._ready().append_many(list(events))

    async def open(self) -> None:
        """Open the store, attach (or create) the ledger session and fold it, now rather than on first use.

        Raises:
            LedgerIntegrityError: the stored chain diverges (names the first seq), or its events do not
                fold (a ``pop`` naming an item that is not the last one).
            StaleWriter: a newer ``FlightlogSession`` took over this session id.
        """

        def run() -> None:
            with self._lock:
                self._ready()

        await asyncio.to_thread(run)

    async def verify(self) -> VerifyReport:
        """Stream-verify the stored ledger session now (chain, tree head and recorded head), as
        ``flightlog verify`` does. Returns the report; ``report.ok`` is False with each divergent seq.

        Raises:
            SessionNotFound: nothing was written yet (the session is created on first use).
        """

        def run() -> VerifyReport:
            with self._lock:
                self._check_open()
                return verify_session(self._open_store(), self.ledger_session_id)

        return await asyncio.to_thread(run)

    def close(self) -> None:
        """Stop using this session; closes the store when this object opened it. Idempotent; blocks until
        a running operation ends."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._stores.close()

    # ─── internals (all called with self._lock held, in a worker thread) ─────────────────────
    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("FlightlogSession is closed")

    def _open_store(self) -> Store:
        return self._stores.get()

    def _ready(self) -> Recorder:
        """The recorder, attaching (or creating) and folding on first use; refuses when fenced off."""
        self._check_open()
        rec = self._recorder
        if rec is None:
            rec = self._attach(self._open_store())
            self._recorder = rec
        else:
            current = rec.store.authority_epoch(self.ledger_session_id)
            if current != rec.epoch:
                raise StaleWriter(session_id=self.ledger_session_id, epoch=rec.epoch, current_epoch=current)
        return rec

    def _attach(self, store: Store) -> Recorder:
        sid = self.ledger_session_id
        try:
            rec = Recorder.attach(store, sid, notary=self._notary)
        except SessionNotFound:
            try:
                with store.transaction():
                    rec = Recorder.create(
                        store,
                        session_id=sid,
                        task=f"OpenAI Agents SDK session {self.session_id}",
                        source=SOURCE,
                        metadata={"session_id": self.session_id},
                        notary=self._notary,
                    )
                    rec.append(Custom(custom_kind=OPENED_KIND, payload={"session_id": self.session_id}))
            except AppendConflict:  # another process created it in the meantime
                rec = Recorder.attach(store, sid, notary=self._notary)
            else:
                self._items = []
                return rec
        self._items = _fold(store, sid, rec)
        return rec


def _coerce_settings(value: SessionSettings | dict[str, Any] | None) -> SessionSettings | None:
    """``SQLiteSession``'s rule: None gives default settings, a dict is coerced; None on an SDK without them."""
    if _settings is None:
        if value is not None:
            raise TypeError(
                "session_settings needs a newer openai-agents (no agents.memory.session_settings)"
            )
        return None
    if value is None:
        return _settings.SessionSettings()
    return _settings.SessionSettings(**value) if isinstance(value, dict) else value


def _item(data: bytes) -> TResponseInputItem:
    """The item held by a stored ``openai_agents.item`` row, as a new object."""
    item: TResponseInputItem = parse_json(data)["payload"]
    return item


def _fold(store: Store, session_id: str, rec: Recorder) -> list[tuple[int, bytes]]:
    """The live items of a stored session (module docstring: fold rules), read after ``rec`` attached."""
    items: list[tuple[int, bytes]] = []
    count, last_hash = 0, ""
    for row in store.read_events(session_id):
        count, last_hash = row.seq + 1, row.hash
        event = decode_stored(row.event_bytes, seq=row.seq)
        if not isinstance(event, Custom):
            continue
        if event.custom_kind == ITEM_KIND:
            items.append((row.seq, row.event_bytes))
        elif event.custom_kind == POP_KIND:
            named = event.payload.get("seq") if isinstance(event.payload, dict) else None
            if not items or items[-1][0] != named:
                raise LedgerIntegrityError(
                    session_id=session_id,
                    seq=row.seq,
                    reason=f"{POP_KIND} names seq {named!r}, which is not the last live item",
                )
            items.pop()
        elif event.custom_kind == CLEAR_KIND:
            items.clear()
    if count != rec.next_seq or last_hash != rec.head:
        raise LedgerIntegrityError(
            session_id=session_id, seq=count - 1, reason="rows changed between attach and fold"
        )
    return items
