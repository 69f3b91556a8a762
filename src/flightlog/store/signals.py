"""The durable signal queue: what other processes send a run, until the kernel disposes of it.

A signal is a row of ``signals`` (not a ledger row: the ledger records what the kernel did with it,
``signal_delivery_disposed``). Any process queues one (:func:`enqueue_signal`); the kernel reads the undisposed
ones of its session at a turn boundary (:func:`pending_signals`) and marks each disposed
(:func:`mark_disposed`) **in the transaction that appends its ``signal_delivery_disposed``**, so a signal is
disposed exactly once: a crash before that commit leaves it queued and the ledger without it, a crash after
leaves both. The queue is bounded (:data:`QUEUE_SIZE` = 64 undisposed signals per session, upstream's router
queue, UPSTREAM.md §6): a signal queued into a full queue is stored ``dropped`` and the kernel records that
disposition at the next boundary.

Backends supply one hook, ``Store.signal_sql(sql, params)`` (run one statement in the thread's open
transaction, or one of its own; return the rows, ``[]`` for writes), and append :data:`SQLITE_MIGRATION` /
:data:`POSTGRES_MIGRATION` to their migrations. SQL here uses ``?`` placeholders; the PostgreSQL hook turns them
into ``%s``.

**Rows are checked when read.** The table is not hashed: any writer of the database can put anything in it.
Every read (:func:`pending_signals`, :func:`signal_record`) checks each row against what
:func:`enqueue_signal` writes (text fields are text, ``kind``/``urgency``/``state`` in their vocabularies,
``queued_at_ms`` an integer) and raises :class:`~flightlog.errors.SignalRowInvalid` naming the signal and the
field for the first that is not, before the kernel disposes of anything. So a garbage row is refused, not
delivered under a guessed kind or urgency nor dropped: a disposition is permanent in the ledger, and what the
sender meant cannot be known from a row that is not what flightlog wrote. The run stays resumable, with
nothing lost, once the row is fixed or deleted (``Kernel.resume`` reads the queue before writing anything).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from ..errors import SignalRowInvalid, StoreError

if TYPE_CHECKING:
    from .base import Store

__all__ = [
    "MAX_TEXT_BYTES",
    "POSTGRES_MIGRATION",
    "QUEUE_SIZE",
    "SIGNAL_KINDS",
    "SQLITE_MIGRATION",
    "STATES",
    "URGENCIES",
    "SignalKind",
    "SignalRecord",
    "Urgency",
    "checked_record",
    "enqueue_signal",
    "mark_disposed",
    "pending_signals",
    "signal_record",
]

QUEUE_SIZE = 64
"""Undisposed signals a session's queue holds (upstream router default)."""

MAX_TEXT_BYTES = 65_536
"""Largest signal text, UTF-8 bytes (flightlog's own bound; upstream states none). A delivered signal stays in
the run's history, so it is part of every later model request: a file pasted by mistake must not be."""

SignalKind = Literal["message", "steer", "interrupt"]
"""A user message, changed instructions, or "stop what you do"."""

Urgency = Literal["low", "normal", "high", "critical"]
"""The priority hint the attention policy reads (upstream ``Urgency``)."""

SIGNAL_KINDS: tuple[SignalKind, ...] = ("message", "steer", "interrupt")
"""Every :data:`SignalKind`."""

URGENCIES: tuple[Urgency, ...] = ("low", "normal", "high", "critical")
"""Every :data:`Urgency`, lowest first."""

_TABLE = """
CREATE TABLE signals (
    signal_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    urgency TEXT NOT NULL,
    text TEXT NOT NULL,
    sender TEXT NOT NULL,
    dedupe_key TEXT,
    queued_at_ms {int} NOT NULL,
    state TEXT NOT NULL,
    disposition TEXT,
    disposed_seq {int},
    attempts {int} NOT NULL DEFAULT 0,
    ord {int} NOT NULL
);
CREATE INDEX signals_queue ON signals(session_id, state, ord);
"""

_DESCRIPTION = "signal queue: signals sent to a run, kept until the kernel disposes of them"

SQLITE_MIGRATION = (_DESCRIPTION, _TABLE.format(int="INTEGER"))
"""The migration SQLite appends (``(description, sql)``)."""

POSTGRES_MIGRATION = (_DESCRIPTION, _TABLE.format(int="BIGINT"))
"""The migration PostgreSQL appends (``(description, sql)``)."""

_COLUMNS = "signal_id, session_id, kind, urgency, text, sender, dedupe_key, queued_at_ms, state, disposition"


class SignalRecord(NamedTuple):
    """One queued signal.

    Attributes:
        signal_id: Its id (``sig-<32 hex>`` unless the sender chose one).
        session_id: The run's session.
        kind: ``message`` (a user message), ``steer`` (changed instructions), ``interrupt`` (stop what you do).
        urgency: The priority hint the attention policy reads (``low``..``critical``).
        text: What the model is told.
        sender: Who sent it (an operator name).
        dedupe_key: Signals with a key already seen in the session are ignored.
        queued_at_ms: When it was queued (epoch ms, the store's clock).
        state: ``queued`` (waiting for a boundary), ``dropped`` (the queue was full) or ``disposed``.
        disposition: What the kernel did (``signal_delivery_disposed.disposition``), once disposed.
    """

    signal_id: str
    session_id: str
    kind: str
    urgency: str
    text: str
    sender: str
    dedupe_key: str | None
    queued_at_ms: int
    state: str
    disposition: str | None

    def to_wire(self) -> dict[str, Any]:
        """JSON-ready dict (``flightlog signal --json``)."""
        return self._asdict()


STATES = ("queued", "dropped", "disposed")
"""Every ``signals.state`` (:class:`SignalRecord`)."""

_VOCABULARY: dict[str, tuple[str, ...]] = {"kind": SIGNAL_KINDS, "urgency": URGENCIES, "state": STATES}
_TEXT = ("session_id", "text", "sender")
_OPTIONAL_TEXT = ("dedupe_key", "disposition")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _problem(record: SignalRecord) -> tuple[str, str] | None:
    """The first field of ``record`` that :func:`enqueue_signal` would never write, with why; None if none."""
    for field, allowed in _VOCABULARY.items():
        value = getattr(record, field)
        if value not in allowed:
            return field, f"is {_shown(value)}, not one of {', '.join(allowed)}"
    for field in _TEXT:
        if not isinstance(getattr(record, field), str):
            return field, f"is {_shown(getattr(record, field))}, not text"
    for field in _OPTIONAL_TEXT:
        if not isinstance(getattr(record, field), str | None):
            return field, f"is {_shown(getattr(record, field))}, not text or NULL"
    if type(record.queued_at_ms) is not int:
        return "queued_at_ms", f"is {_shown(record.queued_at_ms)}, not an integer (epoch ms)"
    return None


def checked_record(row: Sequence[Any]) -> SignalRecord:
    """A ``signals`` row (the columns of :class:`SignalRecord`, in order) as a record, checked.

    Raises:
        SignalRowInvalid: a field holds what :func:`enqueue_signal` never writes (module docs); names the
            signal id (as text) and the field.
    """
    record = SignalRecord(*row)
    if not isinstance(record.signal_id, str) or not record.signal_id:
        raise SignalRowInvalid(
            signal_id=str(record.signal_id), field="signal_id", reason=f"is {_shown(record.signal_id)}"
        )
    problem = _problem(record)
    if problem is not None:
        raise SignalRowInvalid(signal_id=record.signal_id, field=problem[0], reason=problem[1])
    return record


def _rows(store: Store, sql: str, params: Sequence[Any]) -> list[SignalRecord]:
    return [checked_record(row) for row in store.signal_sql(sql, tuple(params))]


def enqueue_signal(
    store: Store,
    session_id: str,
    kind: SignalKind,
    text: str,
    *,
    urgency: Urgency,
    sender: str,
    dedupe_key: str | None = None,
    signal_id: str | None = None,
    now_ms: int,
) -> SignalRecord:
    """Queue a signal for ``session_id`` (``dropped`` when 64 are already queued). The caller checks the run.

    Raises:
        ValueError: ``kind`` or ``urgency`` is unknown.
        StoreError: ``signal_id`` is taken.
    """
    if kind not in SIGNAL_KINDS or urgency not in URGENCIES:
        raise ValueError(f"signal kind must be one of {SIGNAL_KINDS} and urgency one of {URGENCIES}")
    sid = signal_id or f"sig-{uuid.uuid4().hex}"
    with store.transaction():
        depth = store.signal_sql(
            "SELECT COUNT(*) FROM signals WHERE session_id = ? AND state = 'queued'", (session_id,)
        )[0][0]
        state = "queued" if int(depth) < QUEUE_SIZE else "dropped"
        last = store.signal_sql("SELECT MAX(ord) FROM signals WHERE session_id = ?", (session_id,))[0][0]
        row = (sid, session_id, kind, urgency, text, sender, dedupe_key, now_ms, state, None)
        store.signal_sql(
            f"INSERT INTO signals ({_COLUMNS}, ord) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (*row, int(last or 0) + 1),
        )
    return SignalRecord(*row)


def pending_signals(store: Store, session_id: str) -> list[SignalRecord]:
    """The signals of ``session_id`` not disposed yet (``queued`` and ``dropped``), in the order they were
    queued (a per-session counter taken in the enqueue transaction).

    Raises:
        SignalRowInvalid: one of them (any row of the session not ``disposed``, so a garbage ``state`` too)
            is not a row flightlog writes (module docs).
    """
    return _rows(
        store,
        f"SELECT {_COLUMNS} FROM signals WHERE session_id = ? AND state <> 'disposed' ORDER BY ord, signal_id",
        (session_id,),
    )


def signal_record(store: Store, signal_id: str) -> SignalRecord | None:
    """One signal by id, or None.

    Raises:
        SignalRowInvalid: its row is not one flightlog writes (module docs).
    """
    rows = _rows(store, f"SELECT {_COLUMNS} FROM signals WHERE signal_id = ?", (signal_id,))
    return rows[0] if rows else None


def mark_disposed(store: Store, signal_id: str, disposition: str, seq: int) -> None:
    """Mark a signal disposed by the ledger event at ``seq``; call it in that append's transaction.

    Raises:
        StoreError: it was disposed already (another writer got there first: the transaction must roll back).
    """
    store.signal_sql(
        "UPDATE signals SET state = 'disposed', disposition = ?, disposed_seq = ? "
        "WHERE signal_id = ? AND state IN ('queued', 'dropped')",
        (disposition, seq, signal_id),
    )
    again = store.signal_sql("SELECT disposed_seq FROM signals WHERE signal_id = ?", (signal_id,))
    if not again or int(again[0][0]) != seq:
        raise StoreError(f"signal {signal_id} was disposed already (at seq {again[0][0] if again else None})")
