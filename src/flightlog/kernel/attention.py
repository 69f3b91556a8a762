"""Signals sent to a run: the attention policy at each turn boundary, and the interrupt watcher mid-turn.

Any process queues a signal for a running or suspended run (:func:`send_signal`, ``flightlog signal``): a user
``message``, a ``steer`` (changed instructions) or an ``interrupt``, with an urgency (the priority hint;
default ``normal``, ``high``, ``critical`` by kind). The queue is durable (:mod:`flightlog.store.signals`).

**At each turn boundary** (before the model call of every turn, the first one included, once the budgets
admitted the turn and no entropy action ended or suspended the run: a signal is delivered only when a model
call follows) the kernel disposes of every signal still queued for its session, oldest first, in **one transaction** that appends, per signal,
``signal_delivery_disposed(turn, operation_id, delivery_id, attempt, signal_id, disposition, queue_depth)``
(then, when the signal is delivered, ``Custom("signal_message", {signal_id, kind, sender, disposition,
text})``, which :mod:`flightlog.replay` turns into a ``user`` message of the history: part of the next model
request and of ``replay``), and marks the queue rows disposed. So a signal is disposed exactly once: a crash
before the commit leaves it queued and the ledger without it, a crash after leaves both.

* ``operation_id`` = ``<run_id>:turn-<turn>:attention``; ``delivery_id`` = ``<signal_id>:<attempt>``;
  ``attempt`` = how many boundaries have read the signal (counted in the queue before the transaction, so a
  boundary that crashed before committing shows as an earlier attempt); ``queue_depth`` = signals still
  queued after this one.
* Disposition (upstream ``UrgencyBasedPolicy`` and router, UPSTREAM.md §6): a ``dedupe_key`` an earlier
  delivered signal of the session carried → ``ignore`` (a delivery the verified ledger records: a queue row
  marked disposed with no ``signal_delivery_disposed`` of its id at its ``disposed_seq`` is not honoured,
  :func:`seen_dedupe_keys`); a signal queued into a full queue (64) → ``dropped``;
  else by urgency and the run's lifecycle when the signal arrived: ``ready`` (queued before the turn that
  just ended started: nothing was running) gives ``critical``/``high``/``normal`` → ``run``, ``low`` →
  ``observe``; ``running`` (queued after that turn's ``checkpoint_taken``, or while the run was suspended)
  gives ``critical`` → ``interrupt_now``, ``high`` → ``interrupt``, ``normal`` → ``queue``, ``low`` →
  ``observe``.
* Delivered (a ``signal_message``): every disposition but ``ignore`` and ``dropped``; ``queue`` is drained at
  this same boundary (upstream drains queued signals at the turn boundary). The text is ``[INTERRUPT] <text>``
  for ``interrupt_now``, ``[SIGNAL] new instructions: <text>`` for a steer, ``[SIGNAL] <text>`` otherwise.

**Mid-turn** (while the model call is in flight) the kernel checks the queue every ``signal_poll_s`` seconds
for a ``critical`` signal; one found cancels the call, and one transaction records
``rollbacked(turn, checkpoint_history_len, reason=UserInterrupt)`` then the boundary's dispositions (the
interrupt as ``interrupt_now``); the turn is then taken again with the ``[INTERRUPT]`` message in its history.

**At the end** of a run (its terminal transaction, any reason but an ``abort`` from another process) every
signal still queued (one sent during the last turn, after the last boundary read the queue, or one the
boundary left queued because the run ended there without a model call: a budget ran out, an entropy ``stop``
or a denied ``ask`` gate) is recorded
``signal_delivery_disposed(dropped)`` with ``operation_id`` ``<run_id>:end:attention``: the model was never
told, and the ledger says so. A ``send_signal`` that passed its "not finished" check just before that
transaction and committed just after it can still leave its row queued (the check and the insert are two
transactions); its caller was told it was queued.

**Who reads signals.** Only the kernel: its turn boundaries and its mid-call watcher read the queue and
record ``signal_delivery_disposed`` (seed 000) for the session they run. So a signal is accepted only for a
session of source ``kernel`` (``Kernel.run``, a fleet ``submit``, a kernel sub-agent); any other (a LangGraph
thread, an Agents SDK or Pydantic AI session, an imported transcript) is refused with what works instead
(:func:`no_signal_reader`, :class:`NoSignalReader`): a queued row nothing ever delivers would be a lie. That
rule reads the session row's ``source``, which no hash covers, so :func:`send_signal` first runs the full
check ``flightlog audit`` makes (:func:`flightlog.integrity.audit.require_intact`): a tampered session is
refused as tampered (``LedgerIntegrityError``, naming the first divergent seq), never by its row's word.

A signal to a finished run, or with an empty text or one over :data:`~flightlog.store.signals.MAX_TEXT_BYTES`,
is refused (:class:`SignalRefused`).

**A queue row flightlog never writes** (an unknown kind, urgency or state, a ``queued_at_ms`` that is not an
integer: the table is not hashed) is refused when read, naming the signal and the field
(:class:`~flightlog.errors.SignalRowInvalid`, :mod:`flightlog.store.signals`): ``Kernel.resume`` reads the
queue before writing anything, and a boundary that meets one stops the activation before its transaction.
Nothing is guessed (delivered as ``observe``) or dropped; fixed or deleted, the run resumes.
"""

from __future__ import annotations

import asyncio
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ..events import CheckpointTaken, Custom, Event, SignalDeliveryDisposed, Suspended
from ..integrity.keys import now_ms
from ..replay import SIGNAL_MESSAGE
from ..store.base import SessionRecord, Store, StoredEvent
from ..store.signals import (
    MAX_TEXT_BYTES,
    SignalKind,
    SignalRecord,
    Urgency,
    enqueue_signal,
    mark_disposed,
    pending_signals,
)
from ..testing.crashpoints import crash_point
from .errors import NoSignalReader, SignalRefused
from .state import KernelState

if TYPE_CHECKING:  # the full check loads with send_signal, not with every reader of this module
    from ..integrity.audit import Auditor

__all__ = [
    "DEFAULT_URGENCY",
    "DELIVERED",
    "DISPOSITIONS",
    "Delivery",
    "Lifecycle",
    "boundary_events",
    "dispose",
    "disposition_for",
    "message_text",
    "no_signal_reader",
    "send_signal",
    "watch_interrupt",
]

Lifecycle = Literal["ready", "running", "terminal"]
"""The run's state when a signal arrived, as the policy reads it (module docs)."""

DISPOSITIONS = ("ignore", "observe", "queue", "run", "interrupt", "interrupt_now", "dropped")
"""Upstream's labels (``types/policy.rs``)."""

DELIVERED = frozenset({"observe", "queue", "run", "interrupt", "interrupt_now"})
"""Dispositions whose signal becomes a ``user`` message of the history."""

DEFAULT_URGENCY: dict[str, Urgency] = {"message": "normal", "steer": "high", "interrupt": "critical"}
"""The urgency of a signal sent without a priority hint, by kind."""


def disposition_for(urgency: str, lifecycle: Lifecycle) -> str:
    """Upstream ``UrgencyBasedPolicy.evaluate`` (``signals/attention.rs``)."""
    if lifecycle == "terminal":
        return "queue"
    busy = lifecycle == "running"
    if urgency == "critical":
        return "interrupt_now" if busy else "run"
    if urgency == "high":
        return "interrupt" if busy else "run"
    if urgency == "normal":
        return "queue" if busy else "run"
    return "observe"


def message_text(record: SignalRecord, disposition: str) -> str:
    """What the model is told of a delivered signal (module docs)."""
    if disposition == "interrupt_now":
        return f"[INTERRUPT] {record.text}"
    if record.kind == "steer":
        return f"[SIGNAL] new instructions: {record.text}"
    return f"[SIGNAL] {record.text}"


@dataclass(frozen=True)
class Delivery:
    """One signal disposed at a boundary: its record, the disposition, and the events recording it."""

    record: SignalRecord
    disposition: str
    events: tuple[Event, ...]


def _lifecycle(record: SignalRecord, turn_started_ms: int | None) -> Lifecycle:
    return "ready" if turn_started_ms is None or record.queued_at_ms < turn_started_ms else "running"


def dispose(
    records: Sequence[tuple[SignalRecord, int]],
    *,
    turn: int,
    run_id: str,
    turn_started_ms: int | None,
    seen_keys: set[str],
    interrupted: bool = False,
) -> list[Delivery]:
    """The dispositions of ``(record, attempt)`` pairs, oldest first (pure; module docs).

    Args:
        records: The queued signals with their attempt numbers.
        turn: The boundary's turn (the turn about to be taken).
        run_id: The run id (``operation_id`` prefix).
        turn_started_ms: ``recorded_at_ms`` of the latest ``checkpoint_taken`` (None before the first turn).
        seen_keys: Dedupe keys of signals delivered earlier; keys delivered here are added.
        interrupted: The turn was cut short by a critical signal (mid-turn): the run was running.
    """
    deliveries: list[Delivery] = []
    for index, (record, attempt) in enumerate(records):
        if record.state == "dropped":
            disposition = "dropped"
        elif record.dedupe_key is not None and record.dedupe_key in seen_keys:
            disposition = "ignore"
        else:
            lifecycle: Lifecycle = "running" if interrupted else _lifecycle(record, turn_started_ms)
            disposition = disposition_for(record.urgency, lifecycle)
        event = SignalDeliveryDisposed(
            turn=turn,
            operation_id=f"{run_id}:turn-{turn}:attention",
            delivery_id=f"{record.signal_id}:{attempt}",
            attempt=attempt,
            signal_id=record.signal_id,
            disposition=disposition,
            queue_depth=len(records) - index - 1,
        )
        events: list[Event] = [event]
        if disposition in DELIVERED:
            if record.dedupe_key is not None:
                seen_keys.add(record.dedupe_key)
            payload = {
                "signal_id": record.signal_id,
                "kind": record.kind,
                "sender": record.sender,
                "disposition": disposition,
                "text": message_text(record, disposition),
            }
            events.append(Custom(custom_kind=SIGNAL_MESSAGE, payload=payload))
        deliveries.append(Delivery(record, disposition, tuple(events)))
    return deliveries


def turn_started_ms(store: Store, state: KernelState) -> int | None:
    """``recorded_at_ms`` of the session's latest ``checkpoint_taken`` or ``suspended`` (None: none yet)."""
    for seq, event in reversed(state.events):
        if isinstance(event, CheckpointTaken | Suspended):
            for row in store.read_events(state.session_id, start=seq, stop=seq + 1):
                return row.recorded_at_ms
    return None


def seen_dedupe_keys(store: Store, state: KernelState) -> set[str]:
    """Dedupe keys of the session's delivered signals: the key of each ``disposed`` queue row whose delivery
    the ledger records (a ``signal_delivery_disposed`` of that signal id with a delivered disposition, at the
    seq the row names, among ``state``'s events: the verified ledger is the truth, the unhashed table only a
    queue). A row claiming a delivery the ledger does not hold (one inserted or rewritten by any writer of the
    database) is not honoured: it cannot silence a real signal."""
    rows = store.signal_sql(
        "SELECT dedupe_key, disposed_seq, signal_id FROM signals WHERE session_id = ? AND state = 'disposed' "
        "AND dedupe_key IS NOT NULL AND disposition NOT IN ('ignore', 'dropped')",
        (state.session_id,),
    )
    return {str(key) for key, seq, signal_id in rows if _delivered_at(state, seq, signal_id)}


def _delivered_at(state: KernelState, seq: object, signal_id: object) -> bool:
    """Whether ``state``'s event at ``seq`` is a delivered ``signal_delivery_disposed`` of ``signal_id``: one
    binary search of the folded events (in seq order), not a scan of the run at every boundary."""
    if not isinstance(seq, int):
        return False
    at = bisect_left(state.events, seq, key=lambda item: item[0])
    if at == len(state.events) or state.events[at][0] != seq:
        return False
    event = state.events[at][1]
    return (
        isinstance(event, SignalDeliveryDisposed)
        and event.signal_id == signal_id
        and event.disposition in DELIVERED
    )


def read_attempts(store: Store, session_id: str) -> list[tuple[SignalRecord, int]]:
    """The queued signals, each read by one more boundary (the count is committed at once: module docs)."""
    records = pending_signals(store, session_id)
    attempts: list[tuple[SignalRecord, int]] = []
    for record in records:
        store.signal_sql(
            "UPDATE signals SET attempts = attempts + 1 WHERE signal_id = ?", (record.signal_id,)
        )
        row = store.signal_sql("SELECT attempts FROM signals WHERE signal_id = ?", (record.signal_id,))
        attempts.append((record, int(row[0][0])))
    return attempts


Consume = Callable[[Sequence[StoredEvent]], None]
"""Marks the queue rows disposed, given the rows the deliveries' events were appended as (same transaction)."""


def boundary_events(
    store: Store, state: KernelState, *, interrupted: bool = False
) -> tuple[list[Delivery], Consume] | None:
    """The deliveries of this boundary and the function consuming their queue rows; None when nothing is
    queued. The caller appends every delivery's events in order and calls the function with the stored
    rows, in one transaction (module docs)."""
    queued = read_attempts(store, state.session_id)
    if not queued:
        return None
    turn = state.next_turn()[0]
    deliveries = dispose(
        queued,
        turn=turn,
        run_id=state.run_id,
        turn_started_ms=turn_started_ms(store, state),
        seen_keys=seen_dedupe_keys(store, state),
        interrupted=interrupted,
    )

    def consume(rows: Sequence[StoredEvent]) -> None:
        at = 0
        for delivery in deliveries:
            mark_disposed(store, delivery.record.signal_id, delivery.disposition, rows[at].seq)
            at += len(delivery.events)
        crash_point("signals.disposed")  # test-only fault injection (flightlog.testing.crashpoints)

    return deliveries, consume


def leftover_events(store: Store, session_id: str, *, turn: int, run_id: str) -> tuple[list[Event], Consume]:
    """The ``signal_delivery_disposed(dropped)`` events of the signals still queued when a run ends (one sent
    during its last turn, after the last boundary read the queue), and the function consuming their queue rows.
    The caller appends them in the run's terminal transaction: no signal is left queued forever with nothing
    in the ledger saying what became of it. A signal whose ``send_signal`` committed after that transaction is
    refused by ``send_signal`` itself (the run has finished)."""
    queued = read_attempts(store, session_id)
    events: list[Event] = [
        SignalDeliveryDisposed(
            turn=turn,
            operation_id=f"{run_id}:end:attention",
            delivery_id=f"{record.signal_id}:{attempt}",
            attempt=attempt,
            signal_id=record.signal_id,
            disposition="dropped",
            queue_depth=len(queued) - index - 1,
        )
        for index, (record, attempt) in enumerate(queued)
    ]

    def consume(rows: Sequence[StoredEvent]) -> None:
        for (record, _attempt), row in zip(queued, rows, strict=True):
            mark_disposed(store, record.signal_id, "dropped", row.seq)

    return events, consume


async def watch_interrupt(store: Store, session_id: str, every_s: float) -> None:
    """Return once a ``critical`` signal is queued for the session; look every ``every_s`` seconds."""
    while not any(
        r.urgency == "critical" and r.state == "queued" for r in pending_signals(store, session_id)
    ):
        await asyncio.sleep(every_s)


_INSTEAD = {
    "langgraph": "steer it with the graph's own API: answer an interrupt with graph.invoke(Command(resume=...), "
    'config), add input with graph.invoke({"messages": [...]}, config)',
    "langgraph.subgraph": "steer its parent graph with LangGraph's own API: graph.invoke(Command(resume=...), "
    'config) or graph.invoke({"messages": [...]}, config)',
    "openai-agents": "give the agent your message in the Agents SDK app (Runner.run with this session)",
    "pydantic-ai": "give the agent your message in the Pydantic AI app (FlightlogHistory.run(agent, prompt))",
}
"""What works instead of a signal, by the source of a session its own framework runs."""


def no_signal_reader(record: SessionRecord) -> str | None:
    """Why a signal to ``record``'s session would never be delivered, with what works instead; None when
    the flightlog kernel runs it (source ``kernel``: ``Kernel.run``, a fleet ``submit``, a kernel
    sub-agent), the only runtime that reads the signal queue (module docs). One sentence, no trailing period
    (:func:`flightlog.kernel.elsewhere.run_elsewhere`).
    """
    from .elsewhere import run_elsewhere

    return run_elsewhere(
        record,
        unread="the flightlog kernel, the only runtime that reads signals, does not run it, so nothing would "
        "deliver one",
        instead=_INSTEAD,
        imported="write to that agent where it runs",
    )


def send_signal(
    store: Store,
    session_id: str,
    kind: SignalKind,
    text: str,
    *,
    urgency: Urgency | None = None,
    sender: str = "user",
    dedupe_key: str | None = None,
    auditor: Auditor | None = None,
) -> SignalRecord:
    """Queue a signal for a running or suspended kernel run (the Python API of ``flightlog signal``), once
    the session passes the full check ``flightlog audit`` makes (before its row or ledger is read).

    Args:
        store: The store holding the session.
        session_id: The run's session (full id).
        kind: ``message``, ``steer`` or ``interrupt``.
        text: What the model is told (non-empty, at most :data:`~flightlog.store.signals.MAX_TEXT_BYTES`
            UTF-8 bytes).
        urgency: Priority hint; default by kind (:data:`DEFAULT_URGENCY`).
        sender: Who sends it (an operator name, :func:`flightlog.kernel.approvals.check_operator`).
        dedupe_key: Signals repeating a delivered key are ignored.
        auditor: What the full check trusts (default :meth:`Auditor.from_env`: the user's keys, retained
            heads and witnesses).

    Returns:
        The queued record (``state`` ``dropped`` when the run's queue already held 64 signals).

    Raises:
        SessionNotFound: no such session.
        LedgerIntegrityError: the session fails the full check (``seq`` and ``reason`` name the first
            divergence); nothing is queued.
        SessionBusy: another writer kept appending through every check; nothing is queued, try again.
        NoSignalReader: no flightlog kernel runs the session (:func:`no_signal_reader`: an integration's
            session, an imported transcript): nothing would deliver the signal; nothing is queued.
        SignalRefused: the run has finished (``run_terminal``), or the session holds no kernel run (no
            ``run_started``), or ``text`` is empty or longer than 65536 UTF-8 bytes.
        InvalidOperator: ``sender`` breaks the operator-name rule.
    """
    from ..integrity.audit import require_intact
    from .approvals import check_operator
    from .state import load_state

    check_operator(sender)
    if not text.strip():
        raise SignalRefused(session_id=session_id, reason="the signal text is empty")
    size = len(text.encode("utf-8"))
    if size > MAX_TEXT_BYTES:
        raise SignalRefused(
            session_id=session_id, reason=f"the signal text is {size} bytes; at most {MAX_TEXT_BYTES}"
        )
    store.get_session(session_id)  # SessionNotFound before the check
    require_intact(store, session_id, auditor=auditor)  # nothing stored is trusted before it passes
    record = store.get_session(session_id)
    unread = no_signal_reader(record)
    if unread is not None:  # its last run may be open (no run_terminal), but no kernel reads its queue
        raise NoSignalReader(session_id=session_id, source=record.source, reason=unread)
    state = load_state(store, session_id)
    if state.run is None:
        raise SignalRefused(session_id=session_id, reason="not a kernel run (no run_started)")
    if state.terminal is not None:
        raise SignalRefused(session_id=session_id, reason=f"the run has finished ({state.terminal.reason})")
    return enqueue_signal(
        store,
        session_id,
        kind,
        text,
        urgency=urgency or DEFAULT_URGENCY[kind],
        sender=sender,
        dedupe_key=dedupe_key,
        now_ms=now_ms(),
    )
