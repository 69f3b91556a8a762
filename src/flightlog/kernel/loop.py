"""The durable turn loop: ``Kernel.run`` / ``Kernel.resume`` and their sync wrappers.

Every step reads the session's :class:`~flightlog.kernel.state.KernelState` (a fold over the ledger) and
appends events; the state is updated from the recorder's after-commit notifications, so a live run and a
resumed one take exactly the same decisions from exactly the same facts.

Run start (one transaction)::

    run_started(run_id, goal, criteria, agent_id, system_prompt, attachments)
    Custom("provider_capability_evidence", {...})        per route position (seed 003)
    Custom("budget_limits", {...})
    Custom("grant_policy", {policy_id, policy, signed, digest, key})   with a signed grant (kernel.ceiling)

A turn transaction ``n``::

    checkpoint_taken(n, history_len)                     before the model call
    llm_completed(n, message, provider_replay), Custom("model_usage"), tool_requested(n, calls),
        tool_argument_repaired..., Custom("tool_decisions"), permission_resolved/tool_denied...,
        [tool_gated, permission_requested..., suspended(n, "approval")]        one transaction
    [Custom("external_effect_intent"), Custom("external_effect_completed")]    per side effect
    tool_completed(n, results)                           results in call order
    ... until the model answers without tool calls: llm_completed, model_usage, run_terminal("completed")

A failed model call records ``rollbacked(n, checkpoint_history_len, reason)`` (``ProviderFailure``,
``Timeout`` or ``MalformedReplay``) with, in the same transaction, what happens next:
``Custom("provider_retry")`` (then a backoff sleep and a new ``checkpoint_taken``),
``Custom("route_failover")`` (next route position), or ``run_terminal("failed")`` (route exhausted).

A budget axis running out records ``budget_exceeded(budget=axis)`` and ``run_terminal("budget_exhausted")``
(the wall clock running out mid-operation first records ``operation_cancelled(reason="deadline")``). A
signal or ``Kernel.cancel`` records ``operation_cancelled(reason=user|host_shutdown, pending_call_ids)``
and leaves the run resumable. A ``StaleWriter`` (another process took authority, e.g. ``abort``) stops the
loop at once without writing.

Resume (``Kernel.resume``) folds the stored ledger, then records ``resumed(turn, approved, denied)`` and
continues from the phase the ledger is in; a session still waiting for decisions stays suspended and
nothing is written.

While an activation drives a run it keeps a live record (:class:`flightlog.live.LiveRegistry`, the
store's ``live_runs`` table): published once when the activation starts (its phase's state: ``running``,
``waiting_model`` or ``waiting_tool``; the ledger's token and turn counts), then heartbeated every
``heartbeat_s`` seconds from a background thread, and deleted when the activation stops (ended, suspended,
cancelled, fenced off). The ledger already says which state the run is in as it moves (every event that
changes it is durable first, and a durable event newer than a live state outranks it), so the record is
about liveness: a run whose model call or tool outlasts the lease is still seen alive by ``runs`` and the
dashboard, and a process that dies leaves a heartbeat that goes stale, so its run is flagged abandoned.
One write per activation plus one per heartbeat, off the turn's path. Live state is never a ledger fact
(see :mod:`flightlog.live`).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

from ..encoding import canonical_json
from ..errors import StaleWriter
from ..events import (
    BudgetExceeded,
    CancellationReason,
    CheckpointTaken,
    Compressed,
    ContextRenewed,
    Custom,
    Event,
    LlmCompleted,
    OperationCancelled,
    PageIn,
    PageOut,
    Resumed,
    Rollbacked,
    RollbackReason,
    RollbackReasonT,
    RunStarted,
    RunTerminal,
    SessionEvent,
)
from ..integrity.audit import Auditor, require_intact
from ..integrity.grants import record_grant
from ..integrity.keys import now_ms
from ..integrity.notary import USER_NOTARY, Notary, UserNotary, resolve_notary
from ..live import LiveRegistry
from ..messages import ContentPart, Message, ToolResult
from ..providers.base import ModelProvider, ModelRequest, ModelResponse, ProviderError, TokenCallback
from ..recorder import Recorder, Subscriber
from ..runs.model import RunState
from ..sessions import archive_loader
from ..store.base import Store, StoredEvent
from ..testing.crashpoints import crash_point
from . import memory
from .agent import Agent
from .attention import boundary_events, watch_interrupt
from .budgets import Axis, Budgets, Reservation, Spent, admit_turn, reserve
from .capabilities import Capability, ToolSurface
from .ceiling import Ceiling, resume_ceiling, start_grant
from .compaction import (
    COMPACTION_FAILED,
    COMPACTION_STARTED,
    Plan,
    archive_bytes,
    archived_messages,
    finished_summary,
    plan_compaction,
    rule_summary,
    summary_request,
)
from .context import RENEWAL_THRESHOLD, Calibration, Fill, action_for, estimate_fill, estimate_tokens
from .denials import denial_rollback
from .effects import Effects
from .entropy import EntropyTracker
from .errors import KernelError
from .execution import execute_turn
from .inplace import plan_in_place
from .memory import MemoryContext
from .milestones import Milestones
from .operations import DeadlineHit, Operation, deadline
from .paging import PAGE_IN, Notes, archived_result, current_access, stub_output, tokens_of
from .planning import calls_in, plan_calls
from .records import (
    BUDGET_LIMITS,
    CONTEXT_OVERFLOW,
    CONTEXT_PIN,
    PROMPT_PROGRAM_COMPILED,
    PROMPT_PROGRAM_INVOKED,
    PROVIDER_RETRY,
    GateKind,
    capability_evidence,
    model_usage,
    route_failover,
)
from .renewal import handoff_message
from .requests import Program, digest, program_of, sections_of
from .result import RunResult, RunStatus
from .signals import run_blocking
from .spec import AGENT_SPEC
from .state import KernelState, load_state
from .subagents import waiting_on_children
from .transcript import Transcript
from .watch import watch_events

__all__ = ["Kernel"]

log = logging.getLogger("flightlog.kernel")

Sleep = Callable[[float], Awaitable[None]]
Clock = Callable[[], float]

_LIVE_STATES = {"calling": RunState.WAITING_MODEL, "tools": RunState.WAITING_TOOL}
"""The seed 002 state an activation starts in, by ledger phase (any other phase: ``running``)."""

_TERMINAL_STATUS: dict[str, RunStatus] = {
    "completed": "completed",
    "budget_exhausted": "budget_exhausted",
    "failed": "failed",
}


@dataclass(frozen=True)
class _Failure:
    """A failed model call: the rollback reason, a text for the ledger, and whether to retry it."""

    reason: RollbackReasonT
    error: str
    retryable: bool
    retry_after_s: float | None = None
    context_overflow: bool = False


def _malformed(response: ModelResponse, provider: ModelProvider) -> str | None:
    """Why a response cannot be recorded as the turn's ``llm_completed`` (None when it can)."""
    if response.message.role != "assistant":
        return f"response message has role {response.message.role!r}, not 'assistant'"
    replay = response.provider_replay
    if replay is not None and replay.protocol != provider.protocol:
        return f"provider_replay protocol {replay.protocol!r} is not the provider's {provider.protocol!r}"
    ids = [c.id for c in calls_in(response.message)]
    if any(not i for i in ids) or len(set(ids)) != len(ids):
        return f"tool call ids must be present and unique within a turn: {ids}"
    return None


class _Activation:
    """One process's stretch of a run: the loop from a start or resume to a stop (any status)."""

    def __init__(
        self, kernel: Kernel, recorder: Recorder, state: KernelState, ceiling: Ceiling | None = None
    ) -> None:
        self.kernel = kernel
        self.ceiling = ceiling
        self.agent = kernel.agent
        self.recorder = recorder
        self.state = state
        self.session_id = recorder.session_id
        self.effects = Effects(recorder)
        self.operation: Operation | None = None
        self._wall_before = 0
        self._t0 = kernel.clock()
        self._unsubscribe = recorder.subscribe(self._on_event)
        self._fenced: str | None = None
        self.notes = Notes()
        self.memory_context: MemoryContext | None = None
        self._loader = archive_loader(kernel.store)
        self.surface = ToolSurface(self.agent, ceiling, self.append, recorder.checkpoint)
        self.milestones = Milestones(self.agent.milestones, self.surface, self.append)
        kernel._surface = self.surface
        self.entropy = EntropyTracker(kernel.agent.entropy_watch)  # kernel.entropy: a fold like state
        for _seq, event in state.events:
            self.entropy.feed(event)

    # ─── plumbing ─────────────────────────────────────────────────────────────────────────
    def _on_event(self, row: StoredEvent, event: SessionEvent) -> None:
        self.state.apply(row.seq, row.recorded_at_ms, event)
        self.entropy.feed(event)
        if self.kernel.on_event is not None:
            self.kernel.on_event(row, event)

    def append(self, *events: Event, status: str | None = None) -> None:
        """Append ``events`` in one transaction; with ``status``, set the session status in it too.

        Terminal statuses go through ``Recorder.finish`` (which may seal the session); the resumable ones
        (``running``, ``suspended``, ``cancelled``) only change the status row.
        """
        if status is None:
            self.recorder.append_many(events)  # one transaction already
            return
        with self.recorder.atomic():
            self.recorder.append_many(events)
            if status in _TERMINAL_STATUS:
                self.recorder.finish(status)
            else:
                self.recorder.store.set_session_status(self.session_id, status)
                if status in ("suspended", "cancelled"):
                    # The process may exit here for hours: anchor what it wrote (no-op without a notary).
                    self.recorder.checkpoint()

    def begin_clock(self) -> None:
        """Start this activation's wall clock (after its ``run_started``/``resumed`` is durable)."""
        self._wall_before = self.state.wall.closed_ms
        self._t0 = self.kernel.clock()

    def wall_ms(self) -> int:
        """Active milliseconds: earlier activations (from the ledger) plus this one so far."""
        return self._wall_before + int((self.kernel.clock() - self._t0) * 1000)

    def deadline_left_s(self) -> float | None:
        """Seconds of wall-clock budget left, None when unlimited."""
        limit = self.limits.wall_clock_ms
        return None if limit is None else max(0.0, (limit - self.wall_ms()) / 1000)

    @property
    def limits(self) -> Budgets:
        """The recorded limits (the agent's when the ledger has none)."""
        return self.state.limits or self.agent.budgets

    def spent(self) -> Spent:
        """Usage so far, from the ledger and this activation's clock."""
        st = self.state
        owed = st.delegation.charge()  # what the children used or hold (kernel.delegation)
        return Spent(
            tokens=st.tokens_used + owed.tokens,
            cost=st.cost_used + owed.cost,
            turns=st.turn + owed.rounds,
            wall_clock_ms=self.wall_ms(),
        )

    def provider(self) -> ModelProvider:
        """The current route position's provider."""
        return self.agent.route[min(self.state.route_position, len(self.agent.route) - 1)]

    # ─── the loop ─────────────────────────────────────────────────────────────────────────
    async def drive(self) -> RunResult:
        """Step until the run stops (terminal, suspended, cancelled, fenced off)."""
        self.begin_clock()
        with self._live():  # the live record outlives the last durable event of the activation
            try:
                await self.surface.open(self.state)  # a resume: remount what the ledger has mounted
                while self.state.phase not in ("terminal", "suspended"):
                    await self._step()
            except DeadlineHit:
                self._guarded(self._on_deadline)
            except asyncio.CancelledError:
                self._guarded(self._on_cancel)
                task = asyncio.current_task()
                if task is not None:
                    task.uncancel()
            except StaleWriter as exc:
                self._fenced = str(exc)
            finally:
                self.close()
                await self.surface.close()
        return self.result()

    def _live(self) -> AbstractContextManager[None]:
        """Publish the live record, heartbeat it while the block runs, then delete it (module docs)."""
        live, every = self.kernel.live, self.kernel.heartbeat_s
        if live is None or every is None:
            return nullcontext()
        st = self.state
        state = _LIVE_STATES.get(st.phase, RunState.RUNNING)
        steps = st.turn - 1 if st.phase == "calling" else st.turn  # model turns completed
        live.publish(self.session_id, state, tokens_used=st.tokens_used, steps_taken=steps)
        return live.pulse(self.session_id, every_s=every)

    def close(self) -> None:
        """Stop listening to the recorder (the activation is over)."""
        self._unsubscribe()

    def _guarded(self, record: Callable[[], None]) -> None:
        try:
            record()
        except StaleWriter as exc:
            self._fenced = str(exc)

    async def _step(self) -> None:
        phase = self.state.phase
        if phase == "final":
            if not await self.milestones.check(self.state):
                self._complete()
        elif phase == "tools":
            self.notes, self.memory_context = Notes(), memory.turn_context(self)
            token = current_access().set(self)
            try:
                await execute_turn(self, self.state.run_id)
            finally:
                current_access().reset(token)
        elif phase == "compacting":
            await self._compact()
        else:
            if phase == "ready":  # a turn boundary: capability changes apply here, never mid-turn
                await self.surface.boundary(self.state)
            await self._turn()

    def _complete(self) -> None:
        st = self.state
        self.append(
            RunTerminal(reason="completed", turns_used=st.turn, total_tokens=st.tokens_used),
            status="completed",
        )

    def _exhausted(self, axis: Axis, turn: int, operation_id: str, reservation_id: str | None) -> None:
        st = self.state
        self.append(
            BudgetExceeded(turn=turn, operation_id=operation_id, reservation_id=reservation_id, budget=axis),
            RunTerminal(reason="budget_exhausted", turns_used=st.turn, total_tokens=st.tokens_used),
            status="budget_exhausted",
        )

    def _on_deadline(self) -> None:
        st = self.state
        operation = self.operation or Operation.of(f"{st.run_id}:turn-{st.turn}")
        cancelled = OperationCancelled(
            turn=st.turn,
            operation_id=operation.operation_id,
            reason=CancellationReason.DEADLINE,
            pending_call_ids=operation.pending(),
        )
        self.append(
            cancelled,
            BudgetExceeded(turn=st.turn, operation_id=operation.operation_id, budget="wall_clock"),
            RunTerminal(reason="budget_exhausted", turns_used=st.turn, total_tokens=st.tokens_used),
            status="budget_exhausted",
        )

    def _on_cancel(self) -> None:
        st = self.state
        operation = self.operation or Operation.of(f"{st.run_id}:turn-{st.turn}")
        reason = self.kernel.cancel_reason or CancellationReason.USER
        event = OperationCancelled(
            turn=st.turn,
            operation_id=operation.operation_id,
            reason=reason,
            pending_call_ids=operation.pending(),
        )
        self.append(event, status="cancelled")

    # ─── one turn transaction: budgets, checkpoint, model call ────────────────────────────
    async def _turn(self) -> None:
        st = self.state
        if st.phase == "ready" and self._attend():
            return  # signals were disposed (kernel.attention): the next step takes the turn with them
        turn, is_new = st.next_turn()
        operation_id = f"{st.run_id}:turn-{turn}:model"
        if is_new and (axis := admit_turn(self.limits, self.spent())) is not None:
            self._exhausted(axis, turn, operation_id, None)
            return
        provider = self.provider()
        reservation = reserve(
            self.limits,
            self.spent(),
            max_tokens=self.agent.max_tokens,
            prices=self.limits.price_for(provider.model),
            reservation_id=f"{st.run_id}:turn-{turn}:r{st.attempts}",
        )
        if not isinstance(reservation, Reservation):
            self._exhausted(reservation, turn, operation_id, f"{st.run_id}:turn-{turn}:r{st.attempts}")
            return
        request = self._request(provider, reservation)
        if st.phase == "ready":
            program = program_of(provider.protocol, provider.model, request)
            fill = self._fill(provider, program)
            if self._watch_action() or self._manage_context(turn, provider, fill):
                return  # an entropy action, compaction or renewal was recorded: the next step continues
            self.append(
                CheckpointTaken(turn=turn, history_len=len(st.history())),
                *self._program_records("kernel", turn, provider, program, fill, self._sections()),
            )
        self.operation = Operation.of(operation_id)
        crash_point("model.call")  # test-only fault injection (flightlog.testing.crashpoints)
        outcome = await self._watched_call(provider, request)
        self.operation = None
        if outcome is None:  # a critical signal cut the call short: roll the turn back, deliver it
            reason = RollbackReason.UserInterrupt()
            self._attend(Rollbacked(turn=turn, checkpoint_history_len=st.checkpoint_len, reason=reason))
        elif isinstance(outcome, _Failure):
            await self._on_failure(turn, provider, outcome)
        else:
            self._on_response(turn, provider, outcome, reservation)

    def _request(self, provider: ModelProvider, reservation: Reservation) -> ModelRequest:
        st = self.state
        return ModelRequest(
            system_prompt=st.run.system_prompt if st.run is not None else self.agent.system_prompt,
            messages=st.history(),
            tools=self.surface.specs(),
            native_seed=st.native_seed(provider.protocol),
            max_tokens=reservation.max_tokens,
            stream=self.agent.stream,
        )

    def _attend(self, *before: Event) -> bool:
        """Dispose of the queued signals in one transaction with ``before`` (:mod:`.attention`); True when
        anything was recorded."""
        store = self.kernel.store
        built = boundary_events(store, self.state, interrupted=bool(before))
        if built is None and not before:
            return False
        deliveries, consume = built if built is not None else ((), None)
        with self.recorder.atomic():
            rows = self.recorder.append_many([*before, *(e for d in deliveries for e in d.events)])
            if consume is not None:
                consume(rows[len(before) :])
        return True

    async def _watched_call(
        self, provider: ModelProvider, request: ModelRequest
    ) -> ModelResponse | _Failure | None:
        """:meth:`_call`, cut short (None) by a critical signal seen in the queue (:mod:`.attention`)."""
        every = self.kernel.signal_poll_s
        if every is None:
            return await self._call(provider, request)
        call = asyncio.ensure_future(self._call(provider, request))
        watcher = asyncio.ensure_future(watch_interrupt(self.kernel.store, self.session_id, every))
        try:
            await asyncio.wait({call, watcher}, return_when=asyncio.FIRST_COMPLETED)
            if call.done():
                return call.result()
            return None
        finally:
            for task in (call, watcher):
                if not task.done():
                    task.cancel()
            await asyncio.gather(call, watcher, return_exceptions=True)

    async def _call(self, provider: ModelProvider, request: ModelRequest) -> ModelResponse | _Failure:
        on_token = self.kernel.emit_token if self.agent.stream else None
        timeout = self.agent.model_timeout_s
        async with deadline(self.deadline_left_s()):
            scope = asyncio.timeout(timeout)
            try:
                async with scope:
                    response = await provider.complete(request, on_token=on_token)
            except TimeoutError as exc:
                if scope.expired():
                    return _Failure(RollbackReason.Timeout(), f"model call timed out after {timeout}s", True)
                return _Failure(RollbackReason.ProviderFailure(error=f"TimeoutError: {exc}"), str(exc), True)
            except ProviderError as exc:
                error = str(exc)
                return _Failure(
                    RollbackReason.ProviderFailure(error=error),
                    error,
                    exc.retryable,
                    exc.retry_after_s,
                    exc.context_overflow,
                )
            except Exception as exc:  # an adapter bug or an unwrapped SDK error: not retried, fail over
                error = f"{type(exc).__name__}: {exc}"
                return _Failure(RollbackReason.ProviderFailure(error=error), error, False)
        problem = _malformed(response, provider)
        if problem is not None:
            return _Failure(RollbackReason.MalformedReplay(reason=problem), problem, True)
        return response

    # ─── context: fill, compaction, renewal, paging, request records ──────────────────────
    def _fill(self, provider: ModelProvider, program: Program) -> Fill:
        """The window fill of a request on ``provider`` (see :mod:`flightlog.kernel.context`)."""
        window = self.agent.context_policy.window(provider.model)
        return estimate_fill(program.request_chars, self.state.calibration.get(provider.model), window)

    def _summarizer(self) -> ModelProvider:
        return self.agent.context_policy.summarizer or self.provider()

    def _manage_context(self, turn: int, provider: ModelProvider, fill: Fill) -> bool:
        """Compact or renew before turn ``turn``'s call when the fill (or a "too long" answer) says so;
        True when something was recorded (the caller stops: the next step continues from it)."""
        st, policy = self.state, self.agent.context_policy
        if policy.renew_after is not None and st.compactions >= policy.renew_after:
            self._renew(turn, progress=None, open_items=())
            return True
        force = st.overflow and st.overflow_compacted != turn
        if not force and self._rewrite_in_place(turn, provider, fill):
            return True
        ratio = fill.ratio
        over = ratio is not None and ratio > policy.compact_at and st.compacted_turn != turn
        if not (force or over):
            return False
        plan = self._plan(turn, provider, fill, force)
        if plan is not None:
            self.append(Custom(custom_kind=COMPACTION_STARTED, payload=plan.to_wire()))
            return True
        if ratio is not None and ratio > RENEWAL_THRESHOLD and st.compactions > 0:
            self._renew(turn, progress=None, open_items=())
            return True
        return False

    def _rewrite_in_place(self, turn: int, provider: ModelProvider, fill: Fill) -> bool:
        """Upstream's snip/micro tiers, once per turn (:mod:`flightlog.kernel.inplace`); True when recorded."""
        st, policy = self.state, self.agent.context_policy
        action = policy.in_place_action(fill.ratio)
        if action is None or fill.window is None or st.rewritten_turn == turn:
            return False
        plan = plan_in_place(
            st.transcript.rebuilder,
            st.kinds,
            turn=turn,
            action=action,
            per_char=(st.calibration.get(provider.model) or Calibration()).tokens_per_char,
            usable_tokens=fill.window.usable,
            fill_tokens=fill.tokens,
            target_tokens=int(fill.window.usable * policy.target),
            keep_turns=policy.keep_turns,
            pinned=st.pinned,
            skip_tools=(PAGE_IN,),
            archived=policy.tools,
        )
        if plan is None:
            return False
        store = self.kernel.store
        ref = store.put_artifact(plan.archive(), "application/json").handle if policy.tools else None
        crash_point("context.rewrite")  # test-only fault injection (flightlog.testing.crashpoints)
        self.append(*plan.events(st.history(), ref, self._preserved_refs()))
        return True

    def _watch_action(self) -> bool:
        """Record the entropy watch's action for an alert not acted on yet (:mod:`.watch`); True if any."""
        events, status = watch_events(self, self.agent.entropy_watch)
        if events:
            self.append(*events, status=status)
        return bool(events)

    def compaction_plan(self, turn: int) -> Plan | None:
        """A forced compaction before ``turn`` for the entropy watch's ``compact`` action."""
        provider = self.provider()
        st = self.state
        request = self._request(provider, Reservation(st.run_id, self.agent.max_tokens))
        fill = self._fill(provider, program_of(provider.protocol, provider.model, request))
        return self._plan(turn, provider, fill, True, trigger="entropy")

    def _plan(
        self, turn: int, provider: ModelProvider, fill: Fill, force: bool, trigger: str | None = None
    ) -> Plan | None:
        st, policy = self.state, self.agent.context_policy
        entries = st.transcript.rebuilder.entries
        calibration = st.calibration.get(provider.model)
        sizes = [
            estimate_tokens(len(canonical_json(e.message.to_wire()).decode()), calibration) for e in entries
        ]
        window = fill.window
        target = (
            0 if window is None else max(0, int(window.usable * policy.target) - policy.summary_max_tokens)
        )
        return plan_compaction(
            [e.origin for e in entries],
            st.kinds,
            sizes,
            turn=turn,
            action=action_for(fill.ratio, overflow=force),
            trigger=trigger or ("overflow" if force else "threshold"),
            fill_tokens=fill.tokens,
            target_tokens=target,
            keep_turns=policy.keep_turns,
            preserved_refs=self._preserved_refs(),
            force=force,
        )

    def _preserved_refs(self) -> list[str]:
        run = self.state.run
        refs: list[str] = []
        if run is not None:
            refs.append("goal")
            if run.criteria:
                refs.append("criteria")
            refs += [f"attachment:{i}" for i in range(len(run.attachments))]
        return refs + [f"call:{call_id}" for call_id in self.state.pinned]

    async def _compact(self) -> None:
        """The summary call of the pending compaction: a turn transaction of its own."""
        st, policy = self.state, self.agent.context_policy
        plan_wire = st.compaction
        assert plan_wire is not None  # phase "compacting" means a plan is pending
        plan = Plan.from_wire(plan_wire)
        provider = self._summarizer()
        reservation_id = f"{st.run_id}:turn-{plan.turn}:compact-{st.compactions}-r{st.compaction_attempts}"
        reservation = reserve(
            self.limits,
            self.spent(),
            max_tokens=policy.summary_max_tokens,
            prices=self.limits.price_for(provider.model),
            reservation_id=reservation_id,
        )
        if not isinstance(reservation, Reservation):
            self._exhausted(reservation, plan.turn, f"{st.run_id}:turn-{plan.turn}:compact", reservation_id)
            return
        request = summary_request(st.transcript.rebuilder, plan_wire, reservation.max_tokens)
        program = program_of(provider.protocol, provider.model, request)
        if not st.compaction_invoked:
            sections = [
                {"id": "compaction_prompt", "origin": "kernel", "messages": 0},
                {
                    "id": "archived",
                    "origin": "history",
                    "seq_range": list(plan.seq_range),
                    "messages": plan.message_count,
                },
            ]
            self.append(
                *self._program_records(
                    "compactor", plan.turn, provider, program, self._fill(provider, program), sections
                )
            )
        self.operation = Operation.of(f"{st.run_id}:turn-{plan.turn}:compact")
        crash_point("compaction.call")  # test-only fault injection: mid-compaction
        outcome = await self._call(provider, request)
        self.operation = None
        if isinstance(outcome, _Failure):
            attempt = st.compaction_attempts + 1
            retry = outcome.retryable and attempt <= self.agent.max_retries
            failed = {"turn": plan.turn, "attempt": attempt, "error": outcome.error, "retry": retry}
            if retry:
                self.append(Custom(custom_kind=COMPACTION_FAILED, payload=failed))
                await self.kernel.sleep(self._backoff(attempt, outcome.retry_after_s))
                return
            self._finish_compaction(
                plan,
                provider,
                None,
                reservation.max_tokens,
                Custom(custom_kind=COMPACTION_FAILED, payload=failed),
            )
            return
        self._finish_compaction(plan, provider, outcome, reservation.max_tokens)

    def _finish_compaction(
        self,
        plan: Plan,
        provider: ModelProvider,
        response: ModelResponse | None,
        reserved: int,
        *before: Event,
    ) -> None:
        """Archive the range (artifact + ``page_out``) and record ``compressed``, in one transaction."""
        st = self.state
        archived = archived_messages(st.transcript.rebuilder, plan.seq_range)
        ref = self.kernel.store.put_artifact(archive_bytes(archived), "application/json").handle
        crash_point("compaction.archived")  # test-only fault injection
        text = response.message.text_content().strip() if response is not None else ""
        by = "model" if text else "rule"
        text = text or rule_summary(archived, plan)
        summary = finished_summary(text, archived, plan, ref)
        reported = response.usage.output_tokens if response is not None else 0
        extra = max(0, len(summary) - len(text))
        tokens = reported + -(-extra // 4) if reported > 0 else max(1, -(-len(summary) // 4))
        events: list[Event] = list(before)
        if response is not None:
            prices = self.limits.price_for(provider.model)
            cost = prices.cost(response.usage) if prices is not None else None
            usage = model_usage(plan.turn, provider, st.route_position, response.usage, cost, reserved)
            usage.payload["purpose"] = "compaction"
            events.append(usage)
        events.append(
            PageOut(
                turn=plan.turn,
                action=plan.action,
                summary=f"{plan.message_count} messages archived by {plan.action} (summary by {by})",
                tier_hint="semantic",
                message_count=plan.message_count,
                archive_ref=ref,
            )
        )
        events.append(
            Compressed(
                turn=plan.turn,
                archived_seq_range=plan.seq_range,
                action=plan.action,
                summary=summary,
                summary_tokens=tokens,
                preserved_refs=list(plan.preserved_refs),
            )
        )
        self.append(*events)

    def _renew(self, turn: int, *, progress: str | None, open_items: Sequence[str]) -> None:
        """Rotate to a new sprint: store the handoff, record ``context_renewed``."""
        self.append(*self._renewal_events(turn, progress, open_items))

    def _renewal_events(self, turn: int, progress: str | None, open_items: Sequence[str]) -> list[Event]:
        st = self.state
        assert st.run is not None
        summary = (
            next(
                (e.summary for _s, e in reversed(st.events) if isinstance(e, Compressed) and e.summary), None
            )
            if st.compactions
            else None
        )
        last_text = next(
            (m.text_content() for m in reversed(st.history()) if m.role == "assistant" and m.text_content()),
            "",
        )
        pinned = [
            f"[pinned result {part.call_id}]\n{part.output}"
            for message in st.history()
            for part in message.content
            if getattr(part, "call_id", None) in st.pinned and part.type == "tool_result"
        ]
        message = handoff_message(
            st.run,
            sprint=st.sprint + 1,
            progress=progress if progress is not None else last_text,
            open_items=open_items,
            summary=summary,
            pinned=pinned,
        )
        ref = self.kernel.store.put_artifact(archive_bytes([message]), "application/json").handle
        return [ContextRenewed(turn=turn, sprint=st.sprint + 1, handoff_ref=ref)]

    def _sections(self) -> list[dict[str, Any]]:
        st = self.state
        sections: list[dict[str, Any]] = []
        if st.run is not None and st.run.system_prompt:
            sections.append({"id": "system_prompt", "origin": "run_started", "messages": 0})
        return sections + sections_of(st.transcript.origins(), st.kinds)

    def _program_records(
        self,
        actor: str,
        turn: int,
        provider: ModelProvider,
        program: Program,
        fill: Fill,
        sections: list[dict[str, Any]],
    ) -> list[Event]:
        """``prompt_program_compiled`` (when the platform changed) and ``prompt_program_invoked``."""
        st = self.state
        events: list[Event] = []
        platform_digest = program.platform_digest
        if st.compiled.get(actor) != platform_digest:
            platform = program.platform
            prompt = platform["system_prompt"]
            compiled = {
                "actor": actor,
                "turn": turn,
                "stage": "compaction" if actor == "compactor" else "turn",
                "route": {
                    "adapter": provider.protocol,
                    "model": provider.model,
                    "route_position": st.route_position,
                },
                "dialect": {"id": provider.protocol, "version": 1},
                "sections": [
                    {
                        "id": "system_prompt",
                        "version": 1,
                        "origin": "compactor" if actor == "compactor" else "run_started",
                        "content_hash": digest(prompt),
                    },
                    {"id": "tools", "version": 1, "origin": "agent", "content_hash": program.tool_spec_hash},
                ],
                "dropped_sections": [],
                "tool_spec_hash": program.tool_spec_hash,
                "digest": platform_digest,
                "tools": platform["tools"],
                "stream": platform["stream"],
            }
            events.append(Custom(custom_kind=PROMPT_PROGRAM_COMPILED, payload=compiled))
        invoked = {
            "actor": actor,
            "turn": turn,
            "model": provider.model,
            "platform_digest": platform_digest,
            "domain_digest": program.domain_digest,
            "invocation_digest": program.invocation_digest,
            "tool_spec_hash": program.tool_spec_hash,
            "request_digest": program.request_digest,
            "request_chars": program.request_chars,
            "max_tokens": program.max_tokens,
            "sections": sections,
            "dropped_sections": st.dropped.wire() if actor == "kernel" else [],
            "context": fill.to_wire(),
        }
        events.append(Custom(custom_kind=PROMPT_PROGRAM_INVOKED, payload=invoked))
        return events

    # ─── what the built-in tools and tool execution need ──────────────────────────────────
    def load_archive(self, ref: str) -> list[Message] | None:
        """The messages of an archive artifact (``sha256:<hex>``), None when unknown."""
        return self._loader(ref)

    def settle_results(self, results: list[ToolResult]) -> tuple[list[ToolResult], list[Event]]:
        """Page out large results and record what the built-in tools did (events after
        ``tool_completed``, in its transaction; see :mod:`flightlog.kernel.paging`)."""
        st = self.state
        turn = st.turn
        names = {plan.call_id: plan.tool for plan in st.plans}
        provider = self.provider()
        policy = self.agent.context_policy
        limit = policy.page_limit(policy.window(provider.model))
        ratio = (st.calibration.get(provider.model) or Calibration()).tokens_per_char
        settled: list[ToolResult] = []
        events: list[Event] = []
        for result in results:
            tool_name = names.get(result.call_id, "")
            tokens = tokens_of(result.output, ratio)
            if limit is None or tool_name == PAGE_IN or tokens <= limit:
                settled.append(result)
                continue
            ref = self.kernel.store.put_artifact(
                archive_bytes([archived_result(result)]), "application/json"
            ).handle
            stub = stub_output(result, tool_name, tokens, ref, limit)
            settled.append(result.model_copy(update={"output": stub}))
            events.append(
                PageOut(
                    turn=turn,
                    action="micro_compact",
                    summary=stub.splitlines()[0],
                    tier_hint="durable",
                    message_count=1,
                    archive_ref=ref,
                )
            )
        notes = self.notes
        if notes.page_ins:
            events.append(PageIn(turn=turn, entry_count=sum(notes.page_ins.values())))
        if notes.pins:
            events.append(
                Custom(custom_kind=CONTEXT_PIN, payload={"turn": turn, "call_ids": list(notes.pins)})
            )
        self.notes = Notes()
        if notes.renew is not None:
            progress = str(notes.renew.get("progress", ""))
            events += self._renewal_events(turn, progress, list(notes.renew.get("open_items", [])))
        events += self.entropy.boundary(turn, settled)  # the completed turn's sample (kernel.entropy)
        events += memory.drain(self.memory_context)  # last: it may end in a memory suspension
        return settled, events

    def _backoff(self, attempt: int, retry_after_s: float | None) -> float:
        computed: float = self.agent.backoff_base_s * 2.0 ** max(0, attempt - 1)
        wanted = max(computed, retry_after_s or 0.0)
        return float(min(wanted, self.agent.backoff_max_s))

    async def _on_failure(self, turn: int, provider: ModelProvider, failure: _Failure) -> None:
        st = self.state
        position, attempt = st.route_position, st.attempts + 1
        rollback = Rollbacked(turn=turn, checkpoint_history_len=st.checkpoint_len, reason=failure.reason)
        if failure.context_overflow and not st.overflow and st.overflow_compacted != turn:
            overflow = {
                "turn": turn,
                "model": provider.model,
                "route_position": position,
                "error": failure.error,
            }
            self.append(rollback, Custom(custom_kind=CONTEXT_OVERFLOW, payload=overflow))
            return
        if failure.retryable and attempt <= self.agent.max_retries:
            delay = self._backoff(attempt, failure.retry_after_s)
            retry: dict[str, Any] = {
                "turn": turn,
                "model": provider.model,
                "route_position": position,
                "attempt": attempt,
                "delay_s": delay,
                "error": failure.error,
            }
            if failure.retry_after_s is not None:
                retry["retry_after_s"] = failure.retry_after_s
            self.append(rollback, Custom(custom_kind=PROVIDER_RETRY, payload=retry))
            await self.kernel.sleep(delay)
            return
        if position + 1 < len(self.agent.route):
            target = self.agent.route[position + 1]
            self.append(rollback, route_failover(provider, target, failure.error, position, position + 1))
            return
        terminal = RunTerminal(reason="failed", turns_used=st.turn, total_tokens=st.tokens_used)
        self.append(rollback, terminal, status="failed")

    def _on_response(
        self, turn: int, provider: ModelProvider, response: ModelResponse, reservation: Reservation
    ) -> None:
        st = self.state
        prices = self.limits.price_for(provider.model)
        cost = prices.cost(response.usage) if prices is not None else None
        events: list[Event] = [
            LlmCompleted(turn=turn, message=response.message, provider_replay=response.provider_replay),
            model_usage(turn, provider, st.route_position, response.usage, cost, reservation.max_tokens),
        ]
        calls = list(calls_in(response.message))
        if not calls and self.milestones.open_phase(st) is not None:
            self.append(*events)  # phase "final": the open milestone phase is judged next step
            return
        if not calls:
            tokens = st.tokens_used + response.usage.total_tokens
            events.append(RunTerminal(reason="completed", turns_used=turn, total_tokens=tokens))
            self.append(*events, status="completed")
            return
        plan = plan_calls(turn, calls, self.agent, self.ceiling, self.surface)
        undone = denial_rollback(turn, plan, self.agent, st)  # Policy.on_deny == "rollback" (kernel.denials)
        if undone is not None:
            self.append(*events, *undone)
            return
        self.append(*events, *plan.events, status="suspended" if plan.asks else None)

    # ─── result ───────────────────────────────────────────────────────────────────────────
    def result(self) -> RunResult:
        """The :class:`RunResult` the ledger (and a fence, if any) says."""
        return result_of(self.state, fenced=self._fenced)


def _idle(state: KernelState) -> bool:
    """Nothing to do: terminal, or suspended with decisions still missing."""
    return state.phase == "terminal" or (state.phase == "suspended" and bool(state.gates))


def result_of(state: KernelState, *, fenced: str | None = None) -> RunResult:
    """Describe a session's state as a :class:`RunResult`."""
    status: RunStatus
    pending: tuple[str, ...] = ()
    detail: str | None = None
    if state.terminal is not None:
        status = _TERMINAL_STATUS.get(state.terminal.reason, "failed")
        detail = None if status == "completed" else _terminal_detail(state)
    elif state.phase == "suspended":
        status, pending = "suspended", tuple(state.gates)
        detail = state.suspension.reason if state.suspension is not None else None
    else:
        status = "cancelled"
        detail = f"fenced off: {fenced}" if fenced else _cancel_detail(state)
        pending = tuple(_cancel_pending(state))
    return RunResult(
        session_id=state.session_id,
        status=status,
        final_message=state.final_message(),
        turns=state.turn,
        tokens=state.tokens_used,
        cost=state.cost_used if state.limits is not None and state.limits.cost is not None else None,
        pending_calls=pending,
        detail=detail,
    )


def _last(state: KernelState, kind: str) -> Any:
    for _seq, event in reversed(state.events):
        if event.kind == kind:
            return event
    return None


def _terminal_detail(state: KernelState) -> str | None:
    exceeded = _last(state, "budget_exceeded")
    if state.terminal is not None and state.terminal.reason == "budget_exhausted" and exceeded is not None:
        return f"budget exhausted: {exceeded.budget}"
    rollback = _last(state, "rollbacked")
    if rollback is not None and rollback.reason is not None:
        wire = rollback.reason.to_wire()
        extra = wire.get("error") or wire.get("reason") or ""
        return f"{wire['kind']}: {extra}".rstrip(": ")
    return state.terminal.reason if state.terminal is not None else None


def _cancel_detail(state: KernelState) -> str | None:
    cancelled = _last(state, "operation_cancelled")
    return f"cancelled ({cancelled.reason.value})" if cancelled is not None else "interrupted"


def _cancel_pending(state: KernelState) -> list[str]:
    cancelled = _last(state, "operation_cancelled")
    return list(cancelled.pending_call_ids) if cancelled is not None else []


class Kernel:
    """The durable agent runtime for one :class:`~flightlog.kernel.agent.Agent` over one store.

    Args:
        store: Where sessions live (the kernel never closes it).
        agent: The agent definition (a resume needs the same tools; limits come from the ledger).
        sleep: Awaitable sleep used for retry backoff (inject a fake in tests); seconds.
        clock: Monotonic clock in seconds for the wall-clock budget (inject a fake in tests).
        on_token: Live subscriber for streamed text deltas (never recorded).
        on_event: Live subscriber for each durable event of the session, after commit.
        notary: Sign checkpoints (on the recorder's cadence, after the run's start and always before a
            side-effecting tool call), seal the session when the run ends, and check signatures and
            retained heads on resume (:mod:`flightlog.integrity.signing`). Default
            :data:`~flightlog.integrity.notary.USER_NOTARY`: the user's log key, as ``flightlog run`` signs
            (resolved here, creating the key on first use); None records an unsigned, unsealed chain.
        heartbeat_s: Seconds between heartbeats of the run's live record while an activation drives it
            (module docs; keep it well under the lease, :data:`flightlog.live.DEFAULT_LEASE_MS`); None
            publishes no live state (the run's liveness is then judged by its durable events alone).
        signal_poll_s: Seconds between two looks at the signal queue while a model call is in flight (a
            critical signal cuts it short, :mod:`flightlog.kernel.attention`); None: signals are read at
            turn boundaries only.

    Resume always runs the full check of :func:`flightlog.integrity.audit.require_intact` first, trusting the
    notary's keys and retained heads (the user's when ``notary`` is None) and the user's witnesses.

    Attributes:
        live: The :class:`~flightlog.live.LiveRegistry` on ``store`` the kernel publishes to (None when
            ``heartbeat_s`` is None).
    """

    def __init__(
        self,
        store: Store,
        agent: Agent,
        *,
        sleep: Sleep = asyncio.sleep,
        clock: Clock = time.monotonic,
        on_token: TokenCallback | None = None,
        on_event: Subscriber | None = None,
        notary: Notary | UserNotary | None = USER_NOTARY,
        heartbeat_s: float | None = 5.0,
        signal_poll_s: float | None = 0.5,
    ) -> None:
        if heartbeat_s is not None and heartbeat_s <= 0:
            raise ValueError(f"heartbeat_s must be > 0 seconds or None, not {heartbeat_s}")
        self.store = store
        self.heartbeat_s = heartbeat_s
        self.signal_poll_s = signal_poll_s
        self.live = LiveRegistry(store) if heartbeat_s is not None else None
        self.agent = agent
        self.notary = resolve_notary(notary)
        self.sleep = sleep
        self.clock = clock
        self.on_event = on_event
        self.tool_specs = agent.tool_specs()
        self.cancel_reason: CancellationReason | None = None
        self._token_subscribers: list[TokenCallback] = [on_token] if on_token is not None else []
        self._task: asyncio.Task[Any] | None = None
        self._surface: ToolSurface | None = None

    # ─── streaming ────────────────────────────────────────────────────────────────────────
    def subscribe_tokens(self, callback: TokenCallback) -> Callable[[], None]:
        """Receive streamed text deltas (live only); returns a function that unsubscribes."""
        self._token_subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._token_subscribers:
                self._token_subscribers.remove(callback)

        return unsubscribe

    def emit_token(self, delta: str) -> None:
        """Fan a streamed delta out to the token subscribers (their errors are logged, not raised)."""
        for callback in list(self._token_subscribers):
            try:
                callback(delta)
            except Exception:
                log.exception("token subscriber %r failed", callback)

    # ─── cancellation ─────────────────────────────────────────────────────────────────────
    def cancel(self, reason: CancellationReason = CancellationReason.USER) -> None:
        """Stop the running activation: records ``operation_cancelled(reason)``; the run stays resumable.

        Safe to call from a signal handler installed on the loop (the sync wrappers do).
        """
        self.cancel_reason = self.cancel_reason or reason
        if self._task is not None and not self._task.done():
            self._task.cancel()

    # ─── capabilities at run time ─────────────────────────────────────────────────────────
    def mount(
        self, capability: Capability | str, *, by: str = "sdk:runtime", reason: str = "dynamic_register"
    ) -> None:
        """Mount a capability into the running activation at its next turn boundary (thread-safe).

        A request still pending when the activation stops (ended, suspended, cancelled) is dropped
        without a record; mount again on the resumed activation.

        Args:
            capability: A capability object, or the id of one the agent declares (a locked one).
            by: Recorded ``mounted_by`` (default the host SDK's ``sdk:runtime``, UPSTREAM.md §9).
            reason: Recorded ``mount_reason`` (default ``dynamic_register``).

        Raises:
            KernelError: no activation is running.
        """
        self._running_surface().request("mount", capability, by, reason)

    def unmount(self, capability_id: str) -> None:
        """Unmount a capability from the running activation at its next turn boundary (thread-safe).

        Raises:
            KernelError: no activation is running.
        """
        self._running_surface().request("unmount", capability_id, "", "")

    def _running_surface(self) -> ToolSurface:
        if self._surface is None or self._task is None:
            raise KernelError("no run is active on this Kernel: mount/unmount apply to a running activation")
        return self._surface

    # ─── entry points ─────────────────────────────────────────────────────────────────────
    async def run(
        self,
        goal: str,
        criteria: Sequence[str] = (),
        attachments: Sequence[ContentPart] = (),
        *,
        session_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        parent_session_id: str | None = None,
    ) -> RunResult:
        """Start a new run in a new session and drive it until it stops.

        Args:
            goal: The user's goal (the first user message).
            criteria: Acceptance criteria (listed under the goal).
            attachments: Extra content parts of the first user message (images by reference...).
            session_id: The session id to create (default: a random hex id).
            metadata: Extra session metadata (JSON-ready; no paths or secrets).
            parent_session_id: The session that spawned this one (a sub-agent's parent, see
                :mod:`flightlog.kernel.subagents`), else None.

        Returns:
            The :class:`RunResult` (any status; ``suspended`` and ``cancelled`` runs are resumable).
            Cancelling the task that awaits ``run`` (or :meth:`cancel`) records
            ``operation_cancelled(reason="user")`` and returns ``cancelled`` instead of raising.
            One activation at a time per ``Kernel``.

        Raises:
            AppendConflict: ``session_id`` exists already (nothing is written).
            GrantError: the agent's ``grant`` is not signed by a trusted policy key, is tampered, expired
                or for another authority epoch (checked before the store is touched: nothing is written).
        """
        at_ms = now_ms()
        grant = start_grant(self.agent, at_ms=at_ms)
        meta = {"agent": self.agent.name, **(metadata or {})}
        started = RunStarted(
            run_id=uuid.uuid4().hex,
            goal=goal,
            criteria=list(criteria),
            agent_id=self.agent.name,
            system_prompt=self.agent.system_prompt,
            attachments=list(attachments),
        )
        evidence = [capability_evidence(p, i) for i, p in enumerate(self.agent.route)]
        limits = Custom(custom_kind=BUDGET_LIMITS, payload=self.agent.budgets.to_wire())
        spec = meta.get("agent_spec")
        # The spec `resume` will import is read back from the verified ledger, never from the session row
        # (which no hash covers): a database writer must not be able to pick code for the operator to run.
        named = [Custom(custom_kind=AGENT_SPEC, payload={"spec": spec})] if isinstance(spec, str) else []
        with self.store.transaction():  # a session exists only with its run_started: crash-safe start
            recorder = Recorder.create(
                self.store,
                session_id=session_id,
                task=goal,
                source="kernel",
                metadata=meta,
                notary=self.notary,
                parent_session_id=parent_session_id,
            )
            ceiling = None if grant is None else Ceiling(grant.policy, grant.digest)
            state = KernelState(recorder.session_id, transcript=Transcript(archive_loader(self.store)))
            activation = _Activation(self, recorder, state, ceiling)
            activation.append(started, *evidence, limits, *named)
            activation.append(*memory.start_events(self.store, self.agent.memory, goal))
            if grant is not None:
                record_grant(recorder, grant.envelope, [grant.key], at_ms=at_ms)
            # Sign the start at once (no-op without a notary): the goal, the grant and the agent spec
            # `resume` may import are then never in an unanchored tail a database writer could rewrite.
            recorder.checkpoint()
        return await self._drive(activation)

    async def resume(self, session_id: str) -> RunResult:
        """Continue a session from its ledger: after a crash, a cancel, or human decisions.

        A terminal session returns its result unchanged; a session still waiting for decisions returns
        ``suspended`` without writing anything. Otherwise records ``resumed(turn, approved, denied)`` and
        drives the run on.

        Raises:
            SessionNotFound: no such session.
            LedgerIntegrityError: the session fails the full check ``flightlog audit`` makes (chain,
                signed checkpoints, seal, retained, witnessed and indexed heads), checked before anything
                is read from it, even for a finished or waiting session (refuse, don't guess).
            KernelError: the session has no ``run_started`` (not a kernel run); the agent brings a grant
                other than the ledgered one, or the stored grant disagrees with the ledger.
            GrantError: the session's grant no longer verifies (untrusted key, expired); nothing written.
        """
        # The full check first, even when there is nothing to write: the caller must not act on a
        # suspension or a result read from a history `audit` rejects (a dropped seal, a rollback...).
        report = require_intact(self.store, session_id, auditor=Auditor.for_notary(self.notary))
        state = load_state(self.store, session_id)
        if state.run is None:
            raise KernelError(f"session {session_id} has no run_started: not a kernel run")
        if _idle(state) or waiting_on_children(self.store, state):
            return result_of(state)
        ceiling = resume_ceiling(self.store, session_id, state.grant, self.agent)
        # Every row was just checked in full: the recorder re-verifies only what may have moved since, the
        # rows after the latest signed checkpoint (Recorder.attach full=False; in full without a notary).
        recorder = Recorder.attach(self.store, session_id, notary=self.notary, full=self.notary is None)
        if recorder.next_seq != len(state.events):  # it moved on before we took authority: refold
            state = load_state(self.store, session_id)
        activation = _Activation(self, recorder, state, ceiling)
        activation.surface.anchored = report.anchored  # recorded server commands run only if signed
        if _idle(state):
            activation.close()
            return result_of(state)
        waiting = memory.waiting_query(state)
        arrived = (
            None if waiting is None else memory.collect(self.store, self.agent.memory, waiting, session_id)
        )
        if waiting is not None and arrived is None:  # the memory service has no result yet: still waiting
            activation.close()
            return result_of(state)
        activation.append(self._resumed(state), *([arrived] if arrived else []), status="running")
        return await self._drive(activation)

    @staticmethod
    def _resumed(state: KernelState) -> Resumed:
        approved: list[str] = []
        denied: list[str] = []
        if state.suspension is not None:
            gate: GateKind = "effect_in_doubt" if state.suspension.reason == "effect_in_doubt" else "approval"
            for call_id in state.suspension.pending_calls:
                verdict = state.verdict(gate, call_id)
                if verdict is not None:
                    (approved if verdict.approved else denied).append(call_id)
        return Resumed(turn=state.turn, approved=approved, denied=denied)

    async def _drive(self, activation: _Activation) -> RunResult:
        self._task = asyncio.current_task()
        self.cancel_reason = None
        try:
            return await activation.drive()
        finally:
            self._task = None
            self._surface = None

    # ─── sync wrappers ────────────────────────────────────────────────────────────────────
    def run_sync(
        self,
        goal: str,
        criteria: Sequence[str] = (),
        attachments: Sequence[ContentPart] = (),
        *,
        session_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        handle_signals: bool = True,
    ) -> RunResult:
        """:meth:`run` in a fresh event loop; SIGINT/SIGTERM cancel it cleanly (``user``/``host_shutdown``)."""
        return run_blocking(
            lambda: self.run(goal, criteria, attachments, session_id=session_id, metadata=metadata),
            self.cancel if handle_signals else None,
        )

    def resume_sync(self, session_id: str, *, handle_signals: bool = True) -> RunResult:
        """:meth:`resume` in a fresh event loop, with the same signal handling as :meth:`run_sync`."""
        return run_blocking(lambda: self.resume(session_id), self.cancel if handle_signals else None)
