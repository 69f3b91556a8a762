"""``FlightlogSession``: an OpenAI Agents SDK session whose history is a tamper-evident flightlog ledger.

Install with ``pip install -e '.[openai-agents]'`` in a clone (``pip install 'flightlog[openai-agents]'`` once
flightlog is published; ``openai-agents>=0.13``). Usage::

    from agents import Agent, Runner
    from flightlog.integrations.openai_agents import FlightlogSession

    session = FlightlogSession("user-42", "agent.db")      # a path, a URL or an open Store
    result = await Runner.run(Agent(name="helper"), "Hello", session=session)

Semantics follow the SDK's ``Session`` protocol (``agents/memory/session.py``) and its reference
implementation ``SQLiteSession`` (``agents/memory/sqlite_session.py``) rule for rule; each method names the
rule it follows. Tested against ``openai-agents`` 0.24 and 0.13.0 (the floor: ``RunState`` approvals with a
rejection message to the model came in 0.13). The SDK's own session tests (``test_session.py`` and
``test_session_limit.py`` of the installed release's sdist) run against this class in
``tests/integrations/test_openai_agents_sdk_suite.py``, with ``SQLiteSession`` building a ``FlightlogSession``:
on 0.13.0 all 44 pass; on 0.24.0, 54 pass and 17 are deselected, each named with its reason: 13 test ``SQLiteSession``'s
connection pool, file lock, rollback and commit paths through its private attributes; 4 expect a row of
invalid JSON written behind the session's back to be skipped, where a ledger refuses it naming its seq.
A closed session raises ``RuntimeError("<class name> is closed")``, the SDK's wording.

Approvals (``needs_approval`` tools, the SDK's ``RunState``), so ``flightlog pending``, ``runs``, ``show``
and the dashboard see them; a decision may be taken in any process::

    result = await Runner.run(agent, "Refund order 42", session=session)
    await session.record_result(result)              # a gate per interruption, or the run's end
    saved = result.to_state().to_string()            # if result.interruptions
    ...                                              # later, maybe in another process:
    state = await RunState.from_string(agent, saved)
    for item in state.get_interruptions():
        await session.approve(state, item, by="alice")   # or reject(..., message=...), or decide with
    await session.resume(state)                          # `flightlog approve`/`deny` or the dashboard
    result = await Runner.run(agent, state, session=session)
    await session.record_result(result)

These write the kernel's seed events (:meth:`record_result`, :meth:`approve`, :meth:`reject`,
:meth:`resume`): ``run_started`` when no run is open, ``tool_requested`` + ``tool_gated`` +
``permission_requested`` per interrupted call + ``suspended(reason="approval")`` (status ``suspended``),
``permission_resolved`` + ``tool_denied`` (a denial) + ``custom`` ``approval_decision`` (naming the approver),
``resumed(approved, denied)`` (status ``running``) and ``run_terminal(reason="completed")`` (status
``completed``). Each suspension, decision and run end is signed at once (a checkpoint in its transaction).

Ledger layout of the history (one flightlog session per SDK ``session_id``, id ``openai-agents:<session_id>``,
source ``openai-agents``; these are :class:`~flightlog.events.Custom` events, which the approval events above
and the tracing processor's (:mod:`flightlog.integrations.openai_agents_tracing`) share the chain with):

* ``openai_agents.session`` (seq 0, written with the session row in one transaction):
  ``{"session_id": <SDK session id>}``. It makes the ledger non-empty, so a later ``attach`` can verify it.
* ``openai_agents.item`` (one per item of an ``add_items`` call, all of a call in one transaction): the
  payload *is* the item, verbatim as JSON (stored in RFC 8785 form: object keys sorted, ``1.0`` stored as
  ``1``; the value read back compares equal to the value added).
* ``openai_agents.pop`` (``pop_item`` on a non-empty session): ``{"seq": <seq of the item removed>}``.
* ``openai_agents.clear`` (``clear_session``): ``{"count": <number of items removed>}``.

Nothing is ever deleted (flightlog's append-only invariant); ``pop`` and ``clear`` are compensating events.
``flightlog replay`` (:func:`flightlog.replay.reconstruct`) folds the same stream into the conversation: one
message per item (user, assistant, function call, function output), whether or not the tracing processor
or :meth:`FlightlogSession.record_result` wrote their events beside the items.
The current history is a fold over the stream: ``item`` appends ``(seq, item)``; ``pop`` removes the last
live item, which must be the one whose seq it names (else ``LedgerIntegrityError``); ``clear`` empties
the list; other events are ignored. The fold runs when the session is first used (after the chain was recomputed:
:meth:`~flightlog.recorder.Recorder.attach` for a write, the same check without authority for a read) and
is then kept current by this object's own writes (a reader's, by folding again when the head moved). Items are kept as the stored canonical bytes and parsed afresh on every read, so
callers get new objects each time (as with ``SQLiteSession``'s ``json.loads``).

Writers and fencing: the first write (or :meth:`FlightlogSession.open`) attaches a
:class:`~flightlog.recorder.Recorder`, which bumps the session's authority epoch. A ``FlightlogSession``
that wrote to the same session id earlier (in this process or another) is thereby fenced off: every later
operation on it raises :class:`~flightlog.errors.StaleWriter` (writes are refused by the store; reads are
refused too, because its folded history may be stale) and nothing is written. Reads before a first write
(``get_items`` and the tracing processor's look-ups) write nothing, the epoch included: they verify the
chain as an attach does (without taking authority or writing a retained head), fold it, and verify and
fold again when the session's head moved, so a reader never fences off a writer and sees its items. One live ``FlightlogSession`` per session id at a
time; share it between tasks (it is safe to) rather than opening one per request.

Concurrency: the store is blocking, so every operation runs in a worker thread (``asyncio.to_thread``),
serialised per ``FlightlogSession`` by a lock taken in that thread: the event loop never blocks and
operations from several tasks, threads or event loops apply one at a time. Mutations keep waiting for
their outcome if the caller is cancelled, then re-raise the cancellation (as ``SQLiteSession`` does).
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import uuid
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from ..errors import install_hint

try:
    from agents.items import TResponseInputItem
    from agents.memory import session_settings as _settings
    from agents.memory.session import SessionABC
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without the SDK
    raise ImportError(
        f"flightlog.integrations.openai_agents needs the OpenAI Agents SDK: {install_hint('openai-agents')}"
    ) from exc

from ..decisions import APPROVAL_DECISION, approval_decision, denial_reason
from ..encoding import canonical_bytes, decode_stored, parse_json
from ..errors import (
    AppendConflict,
    EncodingError,
    ItemEncodingError,
    LedgerIntegrityError,
    SessionNotFound,
    StaleWriter,
)
from ..events import (
    Custom,
    Event,
    LlmCompleted,
    PermissionRequested,
    PermissionResolved,
    Resumed,
    RunStarted,
    RunTerminal,
    Suspended,
    ToolCompleted,
    ToolDenied,
    ToolGated,
    ToolRequested,
)
from ..integrity.notary import USER_NOTARY, Notary, UserNotary, resolve_notary
from ..ledger import VerifyReport
from ..messages import ToolCall
from ..narration import operator_problem
from ..recorder import Recorder, verify_session
from ..replay import AGENTS_CLEAR, AGENTS_ITEM, AGENTS_POP, AGENTS_SESSION
from ..store.base import Store
from ._stores import StoreHandle, read_view, still_current

if TYPE_CHECKING:
    from agents.items import ToolApprovalItem
    from agents.memory.session_settings import SessionSettings
    from agents.result import RunResultBase
    from agents.run_state import RunState

__all__ = [
    "APPROVAL_DECISION",
    "APPROVAL_REASON",
    "CLEAR_KIND",
    "ITEM_KIND",
    "OPENED_KIND",
    "POP_KIND",
    "SESSION_PREFIX",
    "SOURCE",
    "CallState",
    "FlightlogSession",
    "session_id_for",
]

SESSION_PREFIX = "openai-agents:"
"""Prefix of the flightlog session id; ``flightlog show <SDK session id>`` finds it after the colon."""
SOURCE = "openai-agents"
"""The ``source`` of the flightlog session row."""
OPENED_KIND = AGENTS_SESSION
"""``custom_kind`` of seq 0, written with the session row: ``{"session_id": <SDK session id>}``."""
ITEM_KIND = AGENTS_ITEM
"""``custom_kind`` of one added item; the payload is the item (RFC 8785 JSON)."""
POP_KIND = AGENTS_POP
"""``custom_kind`` of a ``pop_item``: ``{"seq": <seq of the item removed>}``."""
CLEAR_KIND = AGENTS_CLEAR
"""``custom_kind`` of a ``clear_session``: ``{"count": <number of items removed>}``."""

APPROVAL_REASON = "approval"
"""``suspended.reason`` of a run interrupted for ``needs_approval`` (the kernel's reason for a policy gate)."""

_T = TypeVar("_T")

CallState = Literal["asked", "requested", "denied"]
"""Where a model's tool call stands in a session's ledger, before its result: ``asked`` (an
``llm_completed`` names it), ``requested`` (a ``tool_requested`` too: traced, or gated by
:meth:`FlightlogSession.record_result`), ``denied`` (a ``tool_denied``: it never runs)."""


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
        self._recorder: Recorder | None = None  # the writer, attached by the first write
        self._view: Recorder | None = None  # what the reads before it verified (_read)
        self._items: list[tuple[int, bytes]] = []  # live items: (seq, stored event bytes)
        self._gates = _Gates()  # runs, gates and decisions folded from the ledger (kept current)
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
                self._read()
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
            ItemEncodingError: an item is not representable as RFC 8785 JSON (NaN, an integer beyond
                ±(2**53-1), a lone surrogate, a non-JSON object), naming the item and its field
                (``items[1].content``); nothing written. It is a ``TypeError``, as ``SQLiteSession`` raises
                for an item it cannot serialize, and an :class:`~flightlog.errors.EncodingError` (``ValueError``).
        """
        self._check_open()
        if not items:
            return
        events = [Custom(custom_kind=ITEM_KIND, payload=item) for item in items]

        def write() -> None:
            with self._lock:
                rec = self._ready()
                try:
                    rows = rec.append_many(events)
                except EncodingError as exc:
                    named = _item_error(events)
                    if named is None:  # not one item's own value: as raised
                        raise
                    raise named from exc
                self._items.extend((row.seq, row.event_bytes) for row in rows)
                for event in events:
                    self._gates.feed(event)  # a user item is the goal of the run it starts (_opening)

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

        A run's events come after its ``run_started``: when no run is open in the ledger, one is opened
        first, in the same transaction (``goal``: the latest user item added since the previous run ended,
        the run's input the SDK adds before its first model call; ``""`` when there is none), and
        :meth:`record_result` then finds it open.

        Raises:
            EncodingError: an event is not representable as RFC 8785 JSON; nothing written.
            StaleWriter: a newer ``FlightlogSession`` took over this session id.
        """
        if not events:
            return
        with self._lock:
            rec = self._ready()  # folds the gates _opening reads
            self._write(rec, [*self._opening(self._gates.next_goal or ""), *events])

    def open_call(
        self, name: str, arguments: str | None, *, skip: Mapping[str, CallState] | None = None
    ) -> tuple[ToolCall, CallState] | None:
        """The oldest call of tool ``name`` a model asked for in this session's ledger that has no result
        yet (an ``llm_completed``'s tool call with no ``tool_completed``, in the run still open), with where
        it stands (:data:`CallState`); None when there is none. ``FlightlogTracingProcessor`` names a
        function span's events by it, since the SDK's function span carries no call id.

        Args:
            name: The tool's name.
            arguments: The call's JSON arguments when known: a call with equal arguments (as JSON values)
                is preferred to an older one with other arguments. None or ``""``: the name decides.
            skip: Calls not to return while they still stand where this maps them (calls matched but not
                recorded yet; one gated since, by :meth:`record_result`, is returned again).

        Denied calls come after every asked or requested one (a denied call never runs; only its
        rejection message reaches the model).
        """
        with self._lock:
            self._read()
            candidates = [
                (call, state)
                for call, state in self._gates.calls.values()
                if call.name == name and (skip or {}).get(call.id) != state
            ]
        candidates.sort(key=lambda c: c[1] == "denied")  # stable: oldest first within each group
        same = [c for c in candidates if arguments and _same_arguments(c[0].arguments, arguments)]
        found = same or candidates
        return found[0] if found else None

    def item_output(self, call_id: str) -> str | None:
        """The ``output`` of this session's live ``function_call_output`` item for ``call_id`` (its text;
        a structured output as JSON), or None when the history holds none (the call did not run)."""
        with self._lock:
            self._read()
            rows = [data for _, data in self._items if b'"function_call_output"' in data]  # parse only those
        for item in map(_item, reversed(rows)):
            if not isinstance(item, dict) or item.get("type") != "function_call_output":
                continue
            if item.get("call_id") == call_id:
                output = item.get("output")
                return output if isinstance(output, str) else json.dumps(output, sort_keys=True)
        return None

    @property
    def turn(self) -> int:
        """The latest turn recorded in this session's ledger (0 when none): the highest ``turn`` of its
        seed events, folded on first use and kept current by this object's writes."""
        return self._gates.turn

    # ─── approvals (needs_approval, RunState) ────────────────────────────────────────────────
    async def record_result(self, result: RunResultBase) -> None:
        """Record how a ``Runner.run`` ended, so ``flightlog pending``, ``runs`` and the dashboard see it.

        When no run is open in the ledger, ``run_started`` (``goal``: the run's input text) comes first.
        Then, when the run was interrupted for approvals (``result.interruptions``, tools with
        ``needs_approval``): ``tool_requested`` (the calls), ``tool_gated`` + ``permission_requested`` per
        call (reason ``needs_approval``) and ``suspended(reason="approval", pending_calls)``; the session's
        status becomes ``suspended``. Otherwise: ``run_terminal(reason="completed", turns_used=<model
        responses>, total_tokens=<the SDK's usage>)`` and the status ``completed`` (``flightlog ls``), as the
        kernel and ``FlightlogSaver`` set it; a later run of the session opens a new run (``run_started``).
        All in one transaction, anchored by a signed checkpoint (with a notary); calls already gated are
        not gated again (recording the same interrupted result twice writes nothing more).

        Raises:
            StaleWriter: a newer ``FlightlogSession`` took over this session id.
        """
        interruptions = list(getattr(result, "interruptions", None) or [])
        goal = _goal(result.input)
        usage = getattr(result.context_wrapper, "usage", None)
        turns, tokens = len(result.raw_responses), int(getattr(usage, "total_tokens", 0) or 0)

        def write() -> None:
            with self._lock:
                rec = self._ready()
                events = self._opening(goal)
                if interruptions:
                    gated = self._gate_events(interruptions)
                    self._write(rec, events + gated, status="suspended" if gated else None)
                else:
                    events.append(RunTerminal(reason="completed", turns_used=turns, total_tokens=tokens))
                    self._write(rec, events, status="completed")

        await _await_mutation(asyncio.to_thread(write))

    async def approve(
        self, state: RunState[Any, Any], item: ToolApprovalItem, *, by: str, always_approve: bool = False
    ) -> None:
        """Approve an interrupted call for ``by`` and record it, then ``state.approve(item, always_approve)``.

        Records (one transaction, after gating the state's interruptions when :meth:`record_result` did not)
        what ``flightlog approve`` records: ``permission_resolved(approved=True, responder="user")`` and
        ``custom`` :data:`APPROVAL_DECISION` ``{turn, call_id, gate: "approval", approved: true, responder:
        by}``, and signs a checkpoint covering them in the same transaction (with a notary), as ``flightlog
        approve`` does, so ``flightlog audit`` finds the decision anchored. Approving a call already
        approved writes nothing.

        Args:
            state: The interrupted run (``result.to_state()`` or ``RunState.from_json``/``from_string``).
            item: One of ``state.get_interruptions()``.
            by: The approver's name (the operator-name rule of :func:`flightlog.narration.operator_problem`).
            always_approve: Passed to the SDK (later calls of this tool are approved too; not recorded).

        Raises:
            ValueError: ``by`` breaks the operator-name rule, or the call was denied already (names it).
            StaleWriter: a newer ``FlightlogSession`` took over this session id.
        """
        await self._decide(state, item, approved=True, by=by, reason=None)
        state.approve(item, always_approve=always_approve)

    async def reject(
        self,
        state: RunState[Any, Any],
        item: ToolApprovalItem,
        *,
        by: str,
        message: str | None = None,
        always_reject: bool = False,
    ) -> None:
        """Deny an interrupted call for ``by`` and record it, then ``state.reject(item, ...)``.

        Records what ``flightlog deny`` records: ``permission_resolved(approved=False, responder="user")``,
        ``tool_denied(call_id, tool_name, reason)`` and :data:`APPROVAL_DECISION` with ``approved: false``,
        signed at once as :meth:`approve` is;
        ``reason`` is ``message``, else ``denied by <by>``. ``message`` is also what the SDK tells the model
        (its default text when None).

        Raises:
            ValueError: ``by`` breaks the operator-name rule, or the call was approved already (names it).
            StaleWriter: a newer ``FlightlogSession`` took over this session id.
        """
        await self._decide(state, item, approved=False, by=by, reason=message)
        if message is None:
            state.reject(item, always_reject=always_reject)
        else:
            state.reject(item, always_reject=always_reject, rejection_message=message)

    async def resume(self, state: RunState[Any, Any], *, by: str = "user") -> None:
        """Bring ``state`` and the ledger to the same decisions, then record ``resumed``; run the state next.

        For each of ``state.get_interruptions()``: a decision recorded in the ledger (by :meth:`approve`,
        :meth:`reject`, ``flightlog approve``/``deny`` or the dashboard, in any process) is applied to
        ``state`` (a denial with its recorded reason as the message to the model); a decision taken only on
        the ``RunState`` (``state.approve`` called directly) is recorded with ``by`` as the approver. Then
        ``resumed(approved, denied)`` is appended and the status is ``running`` again. A decision taken by
        another process fenced this object off (it attached to record it): this method re-attaches
        (verifying the chain again) instead of raising ``StaleWriter``.

        Raises:
            ValueError: a call has no decision anywhere, or the ledger and ``state`` decided it differently
                (names the call); nothing is written then.
            LedgerIntegrityError: re-attaching found the stored chain diverging.
        """
        problem = operator_problem(by)
        if problem is not None:
            raise ValueError(f"by: {problem}")
        items = state.get_interruptions()

        def write() -> list[tuple[ToolApprovalItem, dict[str, Any]]]:
            with self._lock:
                rec = self._ready(reattach=True)
                events = self._opening(_goal(getattr(state, "_original_input", None)))
                events += self._gate_events(items) if items else []
                decided, undecided, conflicts = [], [], []
                for item in items:
                    call = _approval_call(item)
                    recorded = self._gates.decision(call.id)
                    on_state = _state_decision(state, item, call)
                    if recorded is None and on_state is None:
                        undecided.append(call.id)
                    elif recorded is None:
                        events += self._decision_events(call, approved=bool(on_state), by=by, reason=None)
                    elif on_state is not None and on_state != recorded["approved"]:
                        conflicts.append(call.id)
                    else:
                        decided.append((item, recorded))
                if undecided or conflicts:
                    raise ValueError(_unresolved(undecided, conflicts))
                if not self._gates.suspended and not events:
                    return decided
                approved, denied = self._gates.answered(items, events)
                events.append(Resumed(turn=self._gates.turn, approved=approved, denied=denied))
                self._write(rec, events, status="running")
                return decided

        for item, recorded in await _await_mutation(asyncio.to_thread(write)):
            if recorded["approved"]:
                state.approve(item)
            else:
                state.reject(item, rejection_message=str(recorded.get("reason") or f"denied by {by}"))

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
        if self._closed:  # the SDK's sessions' wording: "SQLiteSession is closed", "RedisSession is closed"
            raise RuntimeError(f"{type(self).__name__} is closed")

    def _open_store(self) -> Store:
        return self._stores.get()

    def _ready(self, *, reattach: bool = False) -> Recorder:
        """The writer, attaching (or creating) and folding on the first write; refuses when fenced off (with
        ``reattach``: attaches again instead, verifying and folding the chain anew)."""
        self._check_open()
        rec = self._recorder
        if rec is not None:
            current = rec.store.authority_epoch(self.ledger_session_id)
            if current == rec.epoch:
                return rec
            if not reattach:
                raise StaleWriter(session_id=self.ledger_session_id, epoch=rec.epoch, current_epoch=current)
        rec = self._attach(self._open_store())
        self._recorder, self._view = rec, None
        return rec

    def _read(self) -> None:
        """Make ``_items``/``_gates`` current for a read without writing anything: the writer's fold once
        this object wrote (refused when fenced off, as every operation), else the session verified for
        reading (:func:`~flightlog.integrations._stores.read_view`: no epoch bump, so no writer is fenced
        off by a reader) and folded, again only when its head moved; empty when it was never written."""
        self._check_open()
        if self._recorder is not None:
            self._ready()
            return
        store = self._open_store()
        if self._view is not None and still_current(store, self._view):
            return
        view = read_view(store, self.ledger_session_id, self._notary)
        self._items, self._gates = (
            _fold(store, self.ledger_session_id, view, verified_only=True) if view else ([], _Gates())
        )
        self._view = view

    def _write(self, rec: Recorder, events: list[Event], *, status: str | None = None) -> None:
        """Append ``events`` (and set ``status``) in one transaction. A suspension, a run's end and an
        approval decision are anchored by a signed checkpoint in it (no-op without a notary): the process
        may exit for hours, and a decision is signed when it is made, as ``flightlog approve`` signs
        (:func:`flightlog.kernel.approvals.approve`). Then fold them into the gates."""
        if not events:
            return
        with rec.atomic():
            rec.append_many(events)
            if status is not None:
                rec.store.set_session_status(self.ledger_session_id, status)
            if status in ("suspended", "completed") or any(_is_decision(e) for e in events):
                rec.checkpoint()
        for event in events:
            self._gates.feed(event)

    def _opening(self, goal: str) -> list[Event]:
        """``[run_started]`` when no run is open in the ledger, else nothing."""
        if self._gates.run_open:
            return []
        return [RunStarted(run_id=uuid.uuid4().hex, goal=goal, agent_id=None)]

    def _gate_events(self, items: Iterable[ToolApprovalItem]) -> list[Event]:
        """``tool_requested``, ``tool_gated`` + ``permission_requested`` per call not gated yet, and
        ``suspended`` naming every call still waiting (nothing when all are gated already)."""
        calls = [_approval_call(item) for item in items]
        new = [c for c in calls if c.id not in self._gates.gates and c.id not in self._gates.released]
        if not new:
            return []
        turn = max(self._gates.call_turns.get(c.id, 0) for c in new) or self._gates.turn + 1
        events: list[Event] = [ToolRequested(turn=turn, calls=new)]
        for call in new:
            events.append(ToolGated(turn=turn, call_id=call.id, tool=call.name, reason=_GATE_REASON))
            events.append(
                PermissionRequested(turn=turn, tool=call.name, arguments=call.arguments, reason=_GATE_REASON)
            )
        waiting = [c for c in self._gates.gates if c not in self._gates.decisions] + [c.id for c in new]
        events.append(Suspended(turn=turn, reason=APPROVAL_REASON, pending_calls=waiting))
        return events

    def _decision_events(self, call: ToolCall, *, approved: bool, by: str, reason: str | None) -> list[Event]:
        """What ``flightlog approve``/``deny`` append for a decision (:mod:`flightlog.kernel.approvals`)."""
        gate = self._gates.gates.get(call.id)
        turn = gate.turn if gate is not None else self._gates.turn
        events: list[Event] = [PermissionResolved(turn=turn, approved=approved, responder="user")]
        if not approved:
            reason = reason or denial_reason(by)
            events.append(ToolDenied(turn=turn, call_id=call.id, tool_name=call.name, reason=reason))
        events.append(
            approval_decision(
                turn=turn,
                call_id=call.id,
                gate="approval",
                approved=approved,
                responder=by,
                reason=None if approved else reason,
            )
        )
        return events

    async def _decide(
        self,
        state: RunState[Any, Any],
        item: ToolApprovalItem,
        *,
        approved: bool,
        by: str,
        reason: str | None,
    ) -> None:
        problem = operator_problem(by)
        if problem is not None:
            raise ValueError(f"by: {problem}")
        call = _approval_call(item)

        def write() -> None:
            with self._lock:
                rec = self._ready()
                events = self._opening(_goal(getattr(state, "_original_input", None)))
                events += self._gate_events(state.get_interruptions())
                recorded = self._gates.decision(call.id)
                if recorded is not None:
                    if recorded["approved"] != approved:
                        raise ValueError(_unresolved([], [call.id]))
                    return
                events += self._decision_events(call, approved=approved, by=by, reason=reason)
                self._write(rec, events)

        await _await_mutation(asyncio.to_thread(write))

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
                self._items, self._gates = [], _Gates()
                return rec
        self._items, self._gates = _fold(store, sid, rec)
        return rec


def _coerce_settings(value: SessionSettings | dict[str, Any] | None) -> SessionSettings | None:
    """``SQLiteSession``'s rule: None gives default settings, a dict is coerced."""
    if value is None:
        return _settings.SessionSettings()
    coerce = getattr(_settings, "coerce_session_settings", None)  # newer SDKs: refuses unknown keys by name
    if coerce is not None:
        coerced: SessionSettings = coerce(value)
        return coerced
    return _settings.SessionSettings(**value) if isinstance(value, dict) else value


def _item(data: bytes) -> TResponseInputItem:
    """The item held by a stored ``openai_agents.item`` row, as a new object."""
    item: TResponseInputItem = parse_json(data)["payload"]
    return item


def _fold(
    store: Store, session_id: str, rec: Recorder, *, verified_only: bool = False
) -> tuple[list[tuple[int, bytes]], _Gates]:
    """The live items of a stored session (module docstring: fold rules) and its runs, gates and decisions,
    read after ``rec`` attached; with ``verified_only`` (a read view) only the rows ``rec`` verified, as a
    writer may append meanwhile."""
    items: list[tuple[int, bytes]] = []
    gates = _Gates()
    count, last_hash = 0, ""
    for row in store.read_events(session_id, stop=rec.next_seq if verified_only else None):
        count, last_hash = row.seq + 1, row.hash
        event = decode_stored(row.event_bytes, seq=row.seq)
        gates.feed(event)
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
    return items, gates


# ─── approvals: the ledger's runs, gates and decisions ────────────────────────────────────────────
_GATE_REASON = "needs_approval"
"""``tool_gated.reason`` / ``permission_requested.reason`` of a call the SDK interrupted for approval."""


@dataclass
class _Gates:
    """What the approval methods need from a session's stream: the latest turn, whether a run is open,
    the calls gated in the latest run's latest suspension round and the decisions since the latest
    ``suspended`` (as ``flightlog.kernel.pending`` folds them), and the turn of each call a model asked for."""

    turn: int = 0
    run_open: bool = False
    suspended: bool = False
    next_goal: str | None = None  # the text of the latest user item added while no run is open
    gates: dict[str, ToolGated] = field(default_factory=dict)
    decisions: dict[str, dict[str, Any]] = field(default_factory=dict)
    released: dict[str, dict[str, Any]] = field(default_factory=dict)  # decisions the latest resumed applied
    call_turns: dict[str, int] = field(default_factory=dict)
    calls: dict[str, tuple[ToolCall, CallState]] = field(default_factory=dict)  # asked for, no result yet

    def feed(self, event: Event) -> None:
        """Fold one event (in seq order)."""
        turn = getattr(event, "turn", None)
        if isinstance(turn, int):
            self.turn = max(self.turn, turn)
        self._feed_call(event)
        if isinstance(event, RunStarted | RunTerminal):
            self.run_open, self.suspended = isinstance(event, RunStarted), False
            self.gates, self.decisions, self.released = {}, {}, {}
            self.next_goal = None
        elif isinstance(event, Custom) and event.custom_kind == ITEM_KIND:
            if not self.run_open and isinstance(event.payload, dict) and event.payload.get("role") == "user":
                self.next_goal = _goal([event.payload])
        elif isinstance(event, ToolGated):
            self.gates[event.call_id] = event
        elif isinstance(event, Suspended):
            self.suspended, self.decisions, self.released = True, {}, {}
        elif isinstance(event, Resumed):
            answered = {*event.approved, *event.denied}
            self.released = {c: d for c, d in self.decisions.items() if c in answered}
            self.suspended, self.gates, self.decisions = False, {}, {}
        elif isinstance(event, Custom) and event.custom_kind == APPROVAL_DECISION:
            payload = event.payload if isinstance(event.payload, dict) else {}
            if isinstance(payload.get("call_id"), str):
                self.decisions[payload["call_id"]] = payload
        elif isinstance(event, LlmCompleted):
            for call in event.message.tool_calls:
                self.call_turns[call.id] = event.turn

    def _feed_call(self, event: Event) -> None:
        """Keep :attr:`calls`: a model's call is ``asked``, ``requested`` once a ``tool_requested`` names it,
        ``denied`` once a ``tool_denied`` does; its ``tool_completed`` (or the run's end) removes it."""
        if isinstance(event, LlmCompleted):
            for call in event.message.tool_calls:
                self.calls.setdefault(call.id, (call, "asked"))
        elif isinstance(event, ToolRequested):
            for call in event.calls:
                if self.calls.get(call.id, (call, "asked"))[1] != "denied":
                    self.calls[call.id] = (call, "requested")
        elif isinstance(event, ToolDenied):
            known = self.calls.get(
                event.call_id, (ToolCall(id=event.call_id, name=event.tool_name), "denied")
            )
            self.calls[event.call_id] = (known[0], "denied")
        elif isinstance(event, ToolCompleted):
            for result in event.results:
                self.calls.pop(result.call_id, None)
        elif isinstance(event, RunTerminal):
            self.calls = {}

    def decision(self, call_id: str) -> dict[str, Any] | None:
        """The ``approval_decision`` payload on ``call_id`` in the open suspension, or the one the latest
        ``resumed`` applied (a state loaded again after that resume gets the same decision)."""
        return self.decisions.get(call_id) or self.released.get(call_id)

    def answered(
        self, items: Sequence[ToolApprovalItem], pending: Sequence[Event]
    ) -> tuple[list[str], list[str]]:
        """``(approved, denied)`` call ids of ``items``, from the decisions folded and those in ``pending``."""
        decisions = {**self.released, **self.decisions}
        for event in pending:
            if isinstance(event, Custom) and event.custom_kind == APPROVAL_DECISION:
                decisions[event.payload["call_id"]] = event.payload
        calls = [_approval_call(item).id for item in items]
        return (
            [c for c in calls if decisions[c]["approved"]],
            [c for c in calls if not decisions[c]["approved"]],
        )


def _field(raw: Any, name: str) -> Any:
    return raw.get(name) if isinstance(raw, dict) else getattr(raw, name, None)


def _item_error(events: Sequence[Custom]) -> ItemEncodingError | None:
    """The first of ``events`` (the items of one ``add_items``, in order) that does not encode, as an
    :class:`ItemEncodingError` naming it (``items[i]`` and the field within the item); None when each
    encodes on its own."""
    for index, event in enumerate(events):
        try:
            canonical_bytes(event)
        except EncodingError as own:
            field = f"items[{index}]{own.field.removeprefix('$.payload')}"
            return ItemEncodingError(field=field, reason=own.reason)
    return None


def _approval_call(item: ToolApprovalItem) -> ToolCall:
    """The call an SDK ``ToolApprovalItem`` waits on: its ``call_id`` (or ``id``), tool name and arguments
    (the raw JSON text; a structured payload as JSON)."""
    raw = item.raw_item
    call_id = _field(raw, "call_id") or _field(raw, "id") or ""
    name = item.tool_name or _field(raw, "name") or ""
    arguments = _field(raw, "arguments")
    if not isinstance(arguments, str):
        dump = getattr(raw, "model_dump", None)
        arguments = json.dumps(dump(mode="json") if callable(dump) else raw, sort_keys=True, default=str)
    return ToolCall(id=str(call_id), name=str(name), arguments=arguments)


def _goal(value: Any) -> str:
    """A run's input as a goal line: the text, or the last user message's text of an item list."""
    if isinstance(value, str):
        return value
    for item in reversed(value if isinstance(value, list) else []):
        if isinstance(item, dict) and item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, str):
                return content
            texts = [p.get("text") for p in content or [] if isinstance(p, dict)]
            return " ".join(t for t in texts if isinstance(t, str))
    return ""


def _state_decision(state: RunState[Any, Any], item: ToolApprovalItem, call: ToolCall) -> bool | None:
    """The decision taken on ``state`` for ``call`` (``RunContextWrapper.is_tool_approved``), or None."""
    context = getattr(state, "_context", None)  # the RunState's RunContextWrapper (no public accessor)
    if context is None:
        return None
    decision: bool | None = context.is_tool_approved(call.name, call.id)
    return decision


def _is_decision(event: Event) -> bool:
    return isinstance(event, Custom) and event.custom_kind == APPROVAL_DECISION


def _same_arguments(a: str, b: str) -> bool:
    """Whether two JSON argument texts hold the same value (equal texts when either is not JSON)."""
    try:
        return bool(json.loads(a) == json.loads(b))
    except ValueError:
        return a == b


def _unresolved(undecided: Sequence[str], conflicts: Sequence[str]) -> str:
    parts = []
    if undecided:
        parts.append(f"no decision recorded for call(s) {', '.join(undecided)}: approve or reject them first")
    if conflicts:
        parts.append(f"the ledger and the RunState decided call(s) {', '.join(conflicts)} differently")
    return "; ".join(parts)
