"""The kernel's view of a session: one fold over its ledger, the single source of truth for resume.

The kernel never keeps state the ledger does not hold. A live run applies each event it appends to a
:class:`KernelState` (after the durable commit); a resume rebuilds the same state by folding the stored
events (:func:`load_state`). The ``phase`` says what the next step is:

============= ==================================================================================
``ready``      start a turn: the next one after ``run_started``/``tool_completed``, the same one
               again after a ``rollbacked``
``calling``    a ``checkpoint_taken`` without outcome: (re)issue the model call of ``turn``
``compacting`` a ``compaction_started`` without its ``compressed``: (re)issue the summary call
               (an in-place ``compressed``, snip/micro, is one transaction and changes no phase)
``final``      the model answered without tool calls: close the run (``run_terminal``), or judge the
               open milestone phase (``milestone_advanced``/``milestone_blocked`` lead to ``ready``)
``tools``      calls planned (``tool_decisions``) or released (``resumed``): execute them
``suspended``  waiting for human decisions on ``gates``
``terminal``   ``run_terminal`` recorded: nothing left to do
============= ==================================================================================
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from ..encoding import decode_stored
from ..events import (
    CheckpointTaken,
    Compressed,
    ContextRenewed,
    Custom,
    LlmCompleted,
    OperationCancelled,
    PermissionRequested,
    ProviderReplay,
    Resumed,
    Rollbacked,
    RunStarted,
    RunTerminal,
    SessionEvent,
    Suspended,
    ToolCompleted,
    ToolGated,
    ToolRequested,
)
from ..integrity.authorship import KERNEL_SOURCE
from ..integrity.effects import EffectFold
from ..messages import Message, ToolCallPart
from ..replay import IN_PLACE_ACTIONS, ArchiveLoader
from ..sessions import archive_loader, iter_events
from ..store.base import Store
from .budgets import Budgets
from .compaction import COMPACTION_FAILED, COMPACTION_STARTED
from .context import Calibration
from .delegation import Delegation
from .memory import MEMORY_SUSPENSION
from .records import (
    APPROVAL_DECISION,
    BUDGET_LIMITS,
    CONTEXT_OVERFLOW,
    CONTEXT_PIN,
    GRANT_POLICY,
    MODEL_USAGE,
    PROMPT_PROGRAM_COMPILED,
    PROMPT_PROGRAM_INVOKED,
    ROUTE_FAILOVER,
    TOOL_DECISIONS,
    CallPlan,
    GateKind,
    Verdict,
)
from .requests import Dropped
from .transcript import Transcript

ENTROPY_SUSPENSION = "entropy_alert"
"""``suspended.reason`` of a run the entropy watch handed to a human (:mod:`flightlog.kernel.entropy`)."""

__all__ = [
    "ENTROPY_SUSPENSION",
    "KERNEL_SOURCE",
    "WALL_CLOCK_STARTS",
    "WALL_CLOCK_STOPS",
    "ActiveTime",
    "Gate",
    "KernelState",
    "Phase",
    "WallClock",
    "active_time",
    "has_tool_calls",
    "load_state",
]

Phase = Literal["new", "ready", "calling", "compacting", "final", "tools", "suspended", "terminal"]


def has_tool_calls(message: Message) -> bool:
    """Whether an assistant message requests tool calls (``tool_calls`` or ``tool_call`` parts)."""
    return bool(message.tool_calls) or any(isinstance(p, ToolCallPart) for p in message.content)


@dataclass
class Gate:
    """A call waiting for a human decision.

    Attributes:
        call_id: The call.
        tool: Its tool name.
        turn: The turn it belongs to.
        reason: Why it waits (policy rule, or the in-doubt effect's key).
        kind: ``approval`` (policy said ask) or ``effect_in_doubt`` (a side effect may have happened).
        arguments: The call's repaired arguments as JSON text.
    """

    call_id: str
    tool: str
    turn: int
    reason: str
    kind: GateKind = "approval"
    arguments: str = ""


@dataclass
class WallClock:
    """Active time from row timestamps (epoch ms): activations start at ``run_started``/``resumed`` and
    end at ``suspended``/``operation_cancelled`` or at the last row before the next activation."""

    closed_ms: int = 0
    start_ms: int | None = None
    last_ms: int | None = None

    def begin(self, at_ms: int) -> None:
        """A new activation starts at ``at_ms`` (closing any open one at its last row)."""
        self.close()
        self.start_ms = self.last_ms = at_ms

    def touch(self, at_ms: int) -> None:
        """A row of the open activation was recorded at ``at_ms``."""
        if self.start_ms is not None:
            self.last_ms = max(at_ms, self.last_ms or at_ms)

    def close(self, at_ms: int | None = None) -> None:
        """End the open activation (at ``at_ms`` when given, else at its last row)."""
        if at_ms is not None:
            self.touch(at_ms)
        if self.start_ms is not None and self.last_ms is not None:
            self.closed_ms += max(0, self.last_ms - self.start_ms)
        self.start_ms = self.last_ms = None

    @property
    def used_ms(self) -> int:
        """Closed activations plus the open one up to its last row, in ms."""
        open_ms = (self.last_ms or 0) - self.start_ms if self.start_ms is not None else 0
        return self.closed_ms + max(0, open_ms)

    def feed(self, kind: str, at_ms: int) -> None:
        """Fold one row of ``kind`` recorded at ``at_ms``: an activation begins at a
        :data:`WALL_CLOCK_STARTS` row and ends at a :data:`WALL_CLOCK_STOPS` row."""
        if kind in WALL_CLOCK_STARTS:
            self.begin(at_ms)
        elif kind in WALL_CLOCK_STOPS:
            self.close(at_ms)
        else:
            self.touch(at_ms)


WALL_CLOCK_STARTS = frozenset({"run_started", "resumed"})
"""Row kinds that begin an activation of the wall clock (:class:`WallClock`)."""
WALL_CLOCK_STOPS = frozenset({"suspended", "operation_cancelled"})
"""Row kinds that end one (waiting for a human, cancelled); a crash ends it at its last row."""


@dataclass(frozen=True)
class ActiveTime:
    """A kernel run's wall-clock budget as the kernel counts it (:mod:`flightlog.kernel.budgets`).

    Attributes:
        used_ms: Active time, in ms: the activations' spans (:class:`WallClock`); time suspended, waiting
            for a human, or dead after a crash is not in it.
        limit_ms: The recorded ``wall_clock_ms`` limit (``budget_limits``), None when unlimited.
    """

    used_ms: int
    limit_ms: int | None


def active_time(store: Store, session_id: str) -> ActiveTime:
    """The active time of a session's runs and its wall-clock limit, as :class:`KernelState` folds them,
    without decoding events but ``custom`` rows before the first ``checkpoint_taken`` (``budget_limits`` is
    recorded at run start, before the first turn: :mod:`flightlog.kernel.budgets`). For displays (the
    dashboard) that must show the budgeted quantity, not the elapsed time.

    Raises:
        SessionNotFound: no such session.
        EventDecodeError: one of those ``custom`` rows does not decode.
    """
    store.get_session(session_id)
    wall, limit, started = WallClock(), None, False
    for row in store.read_events(session_id):
        wall.feed(row.kind, row.recorded_at_ms)
        started = started or row.kind == "checkpoint_taken"
        if row.kind == "custom" and not started:
            event = decode_stored(row.event_bytes, seq=row.seq)
            limits = (
                event.payload if isinstance(event, Custom) and event.custom_kind == BUDGET_LIMITS else None
            )
            if isinstance(limits, dict):
                limit = Budgets.from_wire(limits).wall_clock_ms
    return ActiveTime(wall.used_ms, limit)


@dataclass
class KernelState:
    """Everything the kernel knows about a session, folded from its events (see the module docs)."""

    session_id: str
    phase: Phase = "new"
    run: RunStarted | None = None
    limits: Budgets | None = None
    turn: int = 0
    retry_turn: bool = False
    checkpoint_len: int = 0
    route_position: int = 0
    attempts: int = 0
    fatal_retries: int = 0
    tokens_used: int = 0
    cost_used: float = 0.0
    plans: list[CallPlan] = field(default_factory=list)
    gates: dict[str, Gate] = field(default_factory=dict)
    verdicts: dict[tuple[str, str], Verdict] = field(default_factory=dict)
    grant: dict[str, Any] | None = None
    suspension: Suspended | None = None
    terminal: RunTerminal | None = None
    wall: WallClock = field(default_factory=WallClock)
    events: list[tuple[int, SessionEvent]] = field(default_factory=list)
    transcript: Transcript = field(default_factory=Transcript)
    kinds: list[str] = field(default_factory=list)
    calibration: dict[str, Calibration] = field(default_factory=dict)
    compiled: dict[str, str] = field(default_factory=dict)
    compaction: dict[str, Any] | None = None
    compaction_attempts: int = 0
    compaction_invoked: bool = False
    compacted_turn: int | None = None
    rewritten_turn: int | None = None
    dropped: Dropped = field(default_factory=Dropped)
    compactions: int = 0
    sprint: int = 0
    overflow: bool = False
    overflow_compacted: int | None = None
    pinned: list[str] = field(default_factory=list)
    delegation: Delegation = field(default_factory=Delegation)
    effects: EffectFold = field(default_factory=EffectFold)
    _request_chars: dict[str, int] = field(default_factory=dict)
    _raw_arguments: dict[str, str] = field(default_factory=dict)
    _released: set[str] = field(default_factory=set)
    _wait: list[tuple[int, Suspended]] = field(default_factory=list)
    _cancelled: bool = False
    _openings: dict[str, list[SessionEvent]] = field(default_factory=dict)
    _gated_before: ToolGated | None = None

    # ─── folding ──────────────────────────────────────────────────────────────────────────
    def apply(self, seq: int, recorded_at_ms: int, event: SessionEvent) -> None:
        """Fold one durable event (in seq order)."""
        self.events.append((seq, event))
        while len(self.kinds) < seq:
            self.kinds.append("unknown")
        self.kinds.append(event.kind)
        self.transcript.feed(seq, event)
        self.dropped.feed(seq, event)
        self.delegation.feed(event)
        handler = _HANDLERS.get(event.kind)
        if handler is not None:
            handler(self, recorded_at_ms, event)
        self.wall.feed(event.kind, recorded_at_ms)
        self._fold_wait(event)
        if isinstance(event, Custom):
            self.effects.feed(seq, event)
            custom = _CUSTOM_HANDLERS.get(event.custom_kind)
            if custom is not None:
                custom(self, event.payload if isinstance(event.payload, dict) else {})

    def _fold_wait(self, event: SessionEvent) -> None:
        """Keep what :meth:`current_wait`, :meth:`wait_cancelled` and :meth:`gate_openings` answer, so a
        resume asks them without scanning ``events`` backwards (``event`` was just appended to it)."""
        kind = event.kind
        if kind in _WAIT_STARTS:
            self._wait = []
        elif isinstance(event, Suspended):
            self._wait.append((len(self.events) - 1, event))
            self._cancelled = False
        elif isinstance(event, OperationCancelled):
            self._cancelled = True
        gated, self._gated_before = self._gated_before, None
        if isinstance(event, ToolGated):
            self._openings[event.call_id] = [event]  # the latest gate of a call is the open one
            self._gated_before = event
        elif isinstance(event, PermissionRequested) and gated is not None and event.tool == gated.tool:
            self._openings[gated.call_id].append(event)

    def _on_run_started(self, at_ms: int, event: RunStarted) -> None:
        # a new run of a session that holds several (a LangGraph thread, an imported transcript) starts with
        # none of the previous run's gates: an unanswered one is not pending in the new run, and its
        # run_terminal does not end the new one (the session's outcome is its last run's)
        self.run, self.phase, self.turn, self.terminal = event, "ready", 0, None
        self.plans, self.gates, self.verdicts, self._released = [], {}, {}, set()

    def _on_checkpoint(self, at_ms: int, event: CheckpointTaken) -> None:
        if event.turn != self.turn:
            self.attempts = self.fatal_retries = 0
        self.turn, self.checkpoint_len = event.turn, event.history_len
        self.phase, self.retry_turn = "calling", False
        self.plans, self.gates, self.verdicts, self._released = [], {}, {}, set()

    def _on_llm_completed(self, at_ms: int, event: LlmCompleted) -> None:
        self.phase = "tools" if has_tool_calls(event.message) else "final"

    def _on_tool_requested(self, at_ms: int, event: ToolRequested) -> None:
        self._raw_arguments = {c.id: c.arguments for c in event.calls}

    def _on_tool_gated(self, at_ms: int, event: ToolGated) -> None:
        plan = next((p for p in self.plans if p.call_id == event.call_id), None)
        if plan is not None and plan.arguments is not None:
            arguments = json.dumps(plan.arguments, sort_keys=True, ensure_ascii=False)
        else:
            arguments = self._raw_arguments.get(event.call_id, "")
        self.gates[event.call_id] = Gate(
            event.call_id, event.tool, event.turn, event.reason, arguments=arguments
        )

    def _on_suspended(self, at_ms: int, event: Suspended) -> None:
        kind: GateKind = "effect_in_doubt" if event.reason == "effect_in_doubt" else "approval"
        for call_id in event.pending_calls:
            if call_id in self.gates:
                self.gates[call_id].kind = kind
            self.verdicts.pop((kind, call_id), None)
        self.phase, self.suspension = "suspended", event

    def _on_resumed(self, at_ms: int, event: Resumed) -> None:
        # An approval to re-run an in-doubt effect is good for the one activation that resumed with it:
        # if that activation dies too, the effect is in doubt again and must be decided again.
        for call_id in self._released:
            self.verdicts.pop(("effect_in_doubt", call_id), None)
        self._released = {c for c in event.approved if ("effect_in_doubt", c) in self.verdicts}
        if self.phase == "suspended":  # a memory retrieval or an entropy alert suspends between turns
            reason = self.suspension.reason if self.suspension is not None else None
            self.phase = "ready" if reason in (MEMORY_SUSPENSION, ENTROPY_SUSPENSION) else "tools"
        self.suspension = None

    def _on_tool_completed(self, at_ms: int, event: ToolCompleted) -> None:
        self.phase, self.plans, self.gates, self.verdicts = "ready", [], {}, {}

    def _on_rollbacked(self, at_ms: int, event: Rollbacked) -> None:
        if event.reason is not None and event.reason.kind == "fatal_tool_error":
            self.fatal_retries += 1
        elif (
            event.reason is None or event.reason.kind != "user_interrupt"
        ):  # an interrupt is no failed attempt
            self.attempts += 1
        self.phase, self.retry_turn = "ready", True
        self.plans, self.gates, self.verdicts = [], {}, {}

    def _on_milestone(self, at_ms: int, event: SessionEvent) -> None:
        # A judged answer: the run goes on with a new turn (kernel.milestones); a last phase's
        # run_terminal follows in the same transaction.
        if self.phase == "final":
            self.phase = "ready"

    def _on_run_terminal(self, at_ms: int, event: RunTerminal) -> None:
        self.phase, self.terminal = "terminal", event

    def _on_compressed(self, at_ms: int, event: Compressed) -> None:
        if event.action in IN_PLACE_ACTIONS:  # snip/micro: rewritten in place, nothing archived
            self.rewritten_turn = event.turn
            return
        if self.compaction is not None and self.compaction.get("trigger") == "overflow":
            self.overflow, self.overflow_compacted = False, event.turn
        self.compaction, self.compaction_attempts, self.compaction_invoked = None, 0, False
        self.compactions += 1
        self.compacted_turn = event.turn
        if self.phase == "compacting":
            self.phase = "ready"

    def _on_context_renewed(self, at_ms: int, event: ContextRenewed) -> None:
        self.sprint, self.compactions = event.sprint, 0

    def _on_compaction_started(self, payload: dict[str, Any]) -> None:
        self.compaction, self.compaction_attempts, self.phase = payload, 0, "compacting"
        self.compaction_invoked = False

    def _on_compaction_failed(self, payload: dict[str, Any]) -> None:
        self.compaction_attempts += 1
        self.compaction_invoked = False

    def _on_context_overflow(self, payload: dict[str, Any]) -> None:
        self.overflow = True

    def _on_context_pin(self, payload: dict[str, Any]) -> None:
        self.pinned.extend(str(c) for c in payload.get("call_ids", []) if str(c) not in self.pinned)

    def _on_prompt_program_invoked(self, payload: dict[str, Any]) -> None:
        model = str(payload.get("model", ""))
        self._request_chars[model] = int(payload.get("request_chars", 0))
        if payload.get("actor") == "compactor" and self.compaction is not None:
            self.compaction_invoked = True

    def _on_prompt_program_compiled(self, payload: dict[str, Any]) -> None:
        self.compiled[str(payload.get("actor", "kernel"))] = str(payload.get("digest", ""))

    def _on_budget_limits(self, payload: dict[str, Any]) -> None:
        self.limits = Budgets.from_wire(payload)

    def _on_model_usage(self, payload: dict[str, Any]) -> None:
        self.tokens_used += int(payload.get("total_tokens", 0))
        self.cost_used += float(payload.get("cost", 0.0))
        model = str(payload.get("model", ""))
        chars = self._request_chars.pop(model, 0)
        self.calibration.setdefault(model, Calibration()).add(int(payload.get("input_tokens", 0)), chars)

    def _on_tool_decisions(self, payload: dict[str, Any]) -> None:
        self.plans = [CallPlan.from_wire(item) for item in payload.get("calls", [])]
        self.phase = "tools"

    def _on_approval_decision(self, payload: dict[str, Any]) -> None:
        verdict = Verdict.from_wire(payload)
        self.verdicts[(verdict.gate, verdict.call_id)] = verdict
        self.gates.pop(verdict.call_id, None)

    def _on_grant_policy(self, payload: dict[str, Any]) -> None:
        self.grant = payload

    def _on_route_failover(self, payload: dict[str, Any]) -> None:
        self.route_position = int(payload.get("to_position", self.route_position + 1))
        self.attempts = 0

    # ─── queries ──────────────────────────────────────────────────────────────────────────
    def next_turn(self) -> tuple[int, bool]:
        """``(turn, is_new)`` for the next turn transaction: the same turn again after a rollback."""
        if self.retry_turn or self.phase == "calling":
            return self.turn, False
        return self.turn + 1, True

    def history(self) -> list[Message]:
        """The transcript as of now: :func:`flightlog.replay.reconstruct` of the folded events (kept
        incrementally, see :mod:`flightlog.kernel.transcript`)."""
        return self.transcript.messages()

    def native_seed(self, protocol: str) -> list[ProviderReplay] | None:
        """Recorded payloads of ``protocol`` when every surviving ``llm_completed`` has one, else None
        (:func:`flightlog.replay.replay_is_native` / :func:`~flightlog.replay.provider_replay_seed`)."""
        return self.transcript.native_seed(protocol)

    def current_wait(self) -> list[tuple[int, Suspended]]:
        """The ``(index in events, suspended)`` pairs of the wait the run is in, oldest first; empty when it
        is not suspended. One, unless a resume re-opened a wait an abort had closed (each re-opening records
        a ``suspended`` of its own, :meth:`flightlog.kernel.Kernel.resume`): a wait lasts from the first
        ``suspended`` after the latest event that starts an activation or a turn (:data:`_WAIT_STARTS`).
        Kept by the fold (O(1) here)."""
        return list(self._wait) if self.phase == "suspended" else []

    def wait_cancelled(self) -> bool:
        """Whether the run waits for decisions on open gates and was cancelled since (an ``abort`` of a
        suspended run records ``operation_cancelled`` and the status ``cancelled``; its gates stay open)."""
        return bool(self.gates) and self.wait_closed()

    def wait_closed(self) -> bool:
        """Whether the run is suspended and an ``operation_cancelled`` follows its latest ``suspended`` (an
        ``abort`` closed the wait; :mod:`flightlog.kernel.reopen` re-opens it). Kept by the fold (O(1))."""
        return self.phase == "suspended" and self._cancelled

    def gate_openings(self) -> list[SessionEvent]:
        """The events that opened each open gate (``gates``, in its order): the call's latest ``tool_gated``
        and the ``permission_requested`` right after it (same tool) when there is one, as recorded; what a
        resume records again to re-open a wait an abort closed (:mod:`flightlog.kernel.reopen`)."""
        return [event for call_id in self.gates for event in self._openings.get(call_id, [])]

    def verdict(self, gate: GateKind, call_id: str) -> Verdict | None:
        """The human decision on ``call_id`` for a gate of kind ``gate`` in this turn, if any."""
        return self.verdicts.get((gate, call_id))

    def final_message(self) -> str | None:
        """Text of the last assistant message in the (rollback-aware) history; None when it has none."""
        for message in reversed(self.history()):
            if message.role == "assistant":
                return message.text_content() or None
        return None

    @property
    def run_id(self) -> str:
        """The run id (the session id before ``run_started``)."""
        return self.run.run_id if self.run is not None else self.session_id


_WAIT_STARTS = frozenset(
    {"run_started", "resumed", "checkpoint_taken", "tool_completed", "rollbacked", "run_terminal"}
)
"""Event kinds after which a new wait starts (:meth:`KernelState.current_wait`)."""

_Handler = Callable[[KernelState, int, Any], None]
_HANDLERS: dict[str, _Handler] = {
    "run_started": KernelState._on_run_started,
    "checkpoint_taken": KernelState._on_checkpoint,
    "llm_completed": KernelState._on_llm_completed,
    "tool_requested": KernelState._on_tool_requested,
    "tool_gated": KernelState._on_tool_gated,
    "suspended": KernelState._on_suspended,
    "resumed": KernelState._on_resumed,
    "tool_completed": KernelState._on_tool_completed,
    "rollbacked": KernelState._on_rollbacked,
    "run_terminal": KernelState._on_run_terminal,
    "milestone_advanced": KernelState._on_milestone,
    "milestone_blocked": KernelState._on_milestone,
    "compressed": KernelState._on_compressed,
    "context_renewed": KernelState._on_context_renewed,
}
_CUSTOM_HANDLERS: dict[str, Callable[[KernelState, dict[str, Any]], None]] = {
    BUDGET_LIMITS: KernelState._on_budget_limits,
    MODEL_USAGE: KernelState._on_model_usage,
    TOOL_DECISIONS: KernelState._on_tool_decisions,
    APPROVAL_DECISION: KernelState._on_approval_decision,
    ROUTE_FAILOVER: KernelState._on_route_failover,
    GRANT_POLICY: KernelState._on_grant_policy,
    COMPACTION_STARTED: KernelState._on_compaction_started,
    COMPACTION_FAILED: KernelState._on_compaction_failed,
    CONTEXT_OVERFLOW: KernelState._on_context_overflow,
    CONTEXT_PIN: KernelState._on_context_pin,
    PROMPT_PROGRAM_INVOKED: KernelState._on_prompt_program_invoked,
    PROMPT_PROGRAM_COMPILED: KernelState._on_prompt_program_compiled,
}


def fold(
    session_id: str, rows: Iterable[tuple[int, int, SessionEvent]], *, loader: ArchiveLoader | None = None
) -> KernelState:
    """Fold ``(seq, recorded_at_ms, event)`` triples into a fresh :class:`KernelState` (``loader``
    resolves handoff refs, see :class:`~flightlog.kernel.transcript.Transcript`)."""
    state = KernelState(session_id, transcript=Transcript(loader))
    for seq, at_ms, event in rows:
        state.apply(seq, at_ms, event)
    return state


def load_state(store: Store, session_id: str) -> KernelState:
    """Read and fold a stored session (decoding every event once).

    Raises:
        SessionNotFound: no such session.
        EventDecodeError: a stored event does not decode (run ``flightlog verify``).
    """
    store.get_session(session_id)
    return fold(
        session_id,
        ((row.seq, row.recorded_at_ms, event) for row, event in iter_events(store, session_id)),
        loader=archive_loader(store, session_id),
    )
