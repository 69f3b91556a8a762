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
    [memory_written | memory_validation_failed | memory_queried]    per memory call, with its store write
    tool_completed(n, results)                           results in call order
    ... until the model answers without tool calls: llm_completed, model_usage, run_terminal("completed")

A failed model call records ``rollbacked(n, checkpoint_history_len, reason)`` (``ProviderFailure``,
``Timeout`` or ``MalformedReplay``) with, in the same transaction, what happens next:
``Custom("provider_retry")`` (then a backoff sleep and a new ``checkpoint_taken``),
``Custom("route_failover")`` (next route position), or ``run_terminal("failed")`` (route exhausted). A
retried or failed-over turn whose model call timed out is then told so: ``Custom("kernel_note")`` with
upstream's ``The previous step timed out. Please try a faster approach.``
(:data:`~flightlog.kernel.activation.TIMEOUT_NOTE`; no note after a provider failure, as upstream).

A request that cannot fit the window (its system prompt and tool specs alone, or one the provider called
too long with nothing left to archive) is not sent: ``Custom("context_budget_exceeded")`` and
``run_terminal("context_overflow")`` (or, for the first, ``route_failover`` when a later position exists).

A budget axis running out records ``budget_exceeded(budget=axis)`` and ``run_terminal("budget_exhausted")``
(the wall clock running out mid-operation first records ``operation_cancelled(reason="deadline")``). A
side effect running in a worker thread cannot be stopped: when the wall clock runs out during one, the
kernel waits up to ``Kernel.effect_grace_s`` (default 30 s) for it and records its completion, then ends
the run as above. One still running after the grace is in doubt (intent, no completion; the thread may act
later): the run is then *not* sealed but records ``operation_cancelled(reason="deadline")`` and, in its
transaction, ``tool_gated`` + ``permission_requested`` per such call and ``suspended(reason=
"effect_in_doubt")``, so ``flightlog pending`` lists it; approve (its reconciler, when it has one, is asked
first, the thread having maybe performed it since; else, or when not done, it is run again) or deny (marked
failed), then a resume settles it and, the clock being out, ends the run ``budget_exhausted`` (seed 003: an effect
is never left unsettled nor silently re-run). A
signal or ``Kernel.cancel`` records ``operation_cancelled(reason=user|host_shutdown, pending_call_ids)``
and leaves the run resumable. A ``StaleWriter`` (another process took authority, e.g. ``abort``) or an
``AppendConflict`` (another process writes this session, or a sub-agent's child session the turn drives:
``SessionBusy`` when it holds it) stops the loop at once without writing: the result is ``cancelled`` with
detail ``fenced off: <the error>`` (exit code 1 from the CLI), and what was in flight stays in doubt for
the process that holds the session, or a later resume, to settle.

Resume (``Kernel.resume``) folds the stored ledger, then records ``resumed(turn, approved, denied)`` and
continues from the phase the ledger is in; a session still waiting for decisions (its own, or its
sub-agents') stays suspended and nothing is written, unless an ``abort`` cancelled it while it waited: then
the resume re-opens each closed wait of the tree (:mod:`flightlog.kernel.reopen`; status ``suspended``).

While an activation drives a run it keeps a live record (:class:`flightlog.live.LiveRegistry`, the
store's ``live_runs`` table): published once when the activation starts (its phase's state: ``running``,
``waiting_model`` or ``waiting_tool``; the ledger's token and turn counts), then heartbeated every
``heartbeat_s`` seconds from a background thread, and deleted when the activation stops (ended, suspended,
cancelled, fenced off) *and* every worker thread it started has returned (:mod:`flightlog.kernel.holding`:
a sync tool a cancel or a deadline left running keeps the record, so a resume elsewhere waits for it; the
sync wrappers return only once those threads have, and a ``Kernel`` refuses to resume a session it still
holds, ``KernelBusy``). The ledger already says which state the run is in as it moves (every event that
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
from typing import Any

from ..encoding import recordable_text
from ..errors import AppendConflict, EncodingError, KernelBusy, StaleWriter
from ..events import (
    BudgetExceeded,
    CancellationReason,
    CheckpointTaken,
    Custom,
    Event,
    LlmCompleted,
    OperationCancelled,
    Resumed,
    Rollbacked,
    RollbackReason,
    RunStarted,
    RunTerminal,
)
from ..integrity.audit import Auditor, require_intact
from ..integrity.effects import EffectTail
from ..integrity.grants import record_grant
from ..integrity.keys import now_ms
from ..integrity.lineage import SPAWNED_BY, TreeProofs
from ..integrity.notary import USER_NOTARY, Notary, UserNotary, resolve_notary
from ..live import DEFAULT_LEASE_MS, HolderWatch, LiveRegistry
from ..messages import ContentPart
from ..providers.base import ModelProvider, ModelRequest, ModelResponse, TokenCallback
from ..recorder import Recorder, Subscriber
from ..runs.model import RunState
from ..sessions import archive_loader
from ..store.base import Store
from ..store.signals import pending_signals
from ..testing.crashpoints import crash_point
from . import memory
from .activation import ModelFailure
from .activation_context import ContextActivation
from .agent import Agent
from .approvals import imported_transcript
from .attention import boundary_events, watch_interrupt
from .budgets import Reservation, admit_turn, reserve
from .capabilities import Capability, ToolSurface
from .ceiling import Ceiling, resume_ceiling, start_grant
from .denials import denial_rollback
from .effects import effect_key
from .errors import KernelError
from .execution import execute_turn, in_doubt_gates
from .holding import Hold, count_default_executor
from .operations import DeadlineHit, Operation
from .paging import Notes, current_access
from .planning import calls_in, plan_calls
from .records import (
    BUDGET_LIMITS,
    CONTEXT_OVERFLOW,
    PROVIDER_RETRY,
    GateKind,
    capability_evidence,
    model_usage,
    route_failover,
)
from .reopen import needs_reopening, reopen_children, reopening
from .requests import program_of
from .result import RunResult, result_of
from .signals import run_blocking
from .spec import AGENT_SPEC
from .state import KERNEL_SOURCE, KernelState, load_state
from .subagents import finished_children, place, require_children_intact, waiting_on_children
from .takeover import await_previous_holder
from .transcript import Transcript
from .watch import watch_events

__all__ = ["Kernel"]

log = logging.getLogger("flightlog.kernel")

Sleep = Callable[[float], Awaitable[None]]
Clock = Callable[[], float]

_LIVE_STATES = {"calling": RunState.WAITING_MODEL, "tools": RunState.WAITING_TOOL}
"""The seed 002 state an activation starts in, by ledger phase (any other phase: ``running``)."""


class _Activation(ContextActivation):
    """One process's stretch of a run: the loop from a start or resume to a stop (any status)."""

    # ─── the loop ─────────────────────────────────────────────────────────────────────────
    async def drive(self) -> RunResult:
        """Step until the run stops (terminal, suspended, cancelled, fenced off). The live record outlives
        the last durable event of the activation, and any worker thread it started (:mod:`.holding`)."""
        self.begin_clock()
        hold = self.kernel.hold(self.session_id)
        unbind = hold.bind()  # the tools' worker threads are counted by this hold
        count_default_executor(asyncio.get_running_loop())  # and those an async tool starts itself
        try:
            self._publish(hold)
            try:
                await self.surface.open(self.state)  # a resume: remount what the ledger has mounted
                while self.state.phase not in ("terminal", "suspended"):
                    await self._step()
            except DeadlineHit:
                await self._settle_in_flight()
                self._guarded(self._on_deadline)
            except asyncio.CancelledError:
                self._guarded(self._on_cancel)
                task = asyncio.current_task()
                if task is not None:
                    task.uncancel()
            except (StaleWriter, AppendConflict) as exc:  # another writer has this session or a child's
                self._fenced = str(exc)
            finally:
                self.effects.abandon_in_flight()  # what still runs in a worker thread stays in doubt
                self.close()
                await self.surface.close()
        finally:
            unbind()
            hold.end()  # cleared now, or once the last worker thread returns
        return self.result()

    def _publish(self, hold: Hold) -> None:
        """Publish the live record in the state the ledger's phase gives, heartbeated by ``hold``."""
        st = self.state
        state = _LIVE_STATES.get(st.phase, RunState.RUNNING)
        steps = st.turn - 1 if st.phase == "calling" else st.turn  # model turns completed
        store, recorder = self.kernel.store, self.recorder

        def holds() -> bool:  # not fenced off: no successor took the session's authority
            return store.authority_epoch(recorder.session_id) == recorder.epoch

        hold.publish(state, tokens_used=st.tokens_used, steps_taken=steps, holds=holds)

    def _guarded(self, record: Callable[[], None]) -> None:
        try:
            record()
        except (StaleWriter, AppendConflict) as exc:
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
            *finished_children(self.kernel.store, st),
            RunTerminal(reason="completed", turns_used=st.turn, total_tokens=st.tokens_used),
            status="completed",
        )

    async def _settle_in_flight(self) -> None:
        """Wait up to ``Kernel.effect_grace_s`` for the side effects still running in worker threads (their
        completions are recorded as they return); the rest stay in doubt (see :meth:`_on_deadline`)."""
        running = self.effects.in_flight
        if not running:
            return
        grace = self.kernel.effect_grace_s
        log.warning(
            "session %s: wall-clock budget ran out while %d side effect(s) ran in worker threads; "
            "waiting up to %.1f s for their outcome",
            self.session_id,
            running,
            grace,
        )
        try:
            await self.effects.settle_in_flight(grace)
        except (StaleWriter, AppendConflict) as exc:
            self._fenced = str(exc)

    def _on_deadline(self) -> None:
        if self._fenced is not None:
            return  # another writer has the session: nothing more is written
        st = self.state
        operation = self.operation or Operation.of(f"{st.run_id}:turn-{st.turn}")
        cancelled = OperationCancelled(
            turn=st.turn,
            operation_id=operation.operation_id,
            reason=CancellationReason.DEADLINE,
            pending_call_ids=operation.pending(),
        )
        doubt = [p for p in st.plans if p.call_id in cancelled.pending_call_ids and self._in_doubt(p.call_id)]
        if (
            doubt
        ):  # an effect may or may not have happened: never seal over it (seed 003), leave it to a human
            why = " (the wall-clock budget ran out while it ran)"
            self.append(cancelled, *in_doubt_gates(self.session_id, st.turn, doubt, why), status="suspended")
            return
        self.append(
            cancelled,
            BudgetExceeded(turn=st.turn, operation_id=operation.operation_id, budget="wall_clock"),
            RunTerminal(reason="budget_exhausted", turns_used=st.turn, total_tokens=st.tokens_used),
            status="budget_exhausted",
        )

    def _in_doubt(self, call_id: str) -> bool:
        """Whether the call's side effect has an intent and no completion."""
        return self.effects.state(effect_key(self.session_id, self.state.turn, call_id)) == "pending"

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
        turn, is_new = st.next_turn()
        operation_id = f"{st.run_id}:turn-{turn}:model"
        if is_new and (axis := admit_turn(self.limits, self.spent())) is not None:
            self._exhausted(axis, turn, operation_id, None)
            return
        provider = self.provider()
        reservation = reserve(
            self.limits,
            self.spent(),
            max_tokens=self.output_cap(provider),
            prices=self.limits.price_for(provider.model),
            reservation_id=f"{st.run_id}:turn-{turn}:r{st.attempts}",
        )
        if not isinstance(reservation, Reservation):
            self._exhausted(reservation, turn, operation_id, f"{st.run_id}:turn-{turn}:r{st.attempts}")
            return
        if st.phase == "ready" and (self._watch_action() or self._attend()):
            # An entropy action, or signals disposed (kernel.attention): the next step continues. Signals
            # are disposed only once the budgets admitted the turn and no entropy action ends or suspends
            # the run, so a signal recorded delivered is one the next model request carries.
            return
        request = self._request(provider, reservation)
        if st.phase == "ready":
            program = program_of(provider.protocol, provider.model, request)
            fill = self._fill(provider, program)
            if self.refuse_fixed_overflow(turn, provider, program, fill):
                return  # it cannot fit and nothing shrinks it: failed over or ended, no call made
            if self._manage_context(turn, provider, fill):
                return  # a compaction or renewal was recorded: the next step continues
            if self.refuse_exhausted_overflow(turn, provider, fill):
                return  # "too long" and nothing left to archive: the same request would be refused
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
        elif isinstance(outcome, ModelFailure):
            await self._on_failure(turn, provider, outcome)
        else:
            try:
                self._on_response(turn, provider, outcome, reservation)
            except EncodingError as exc:  # nothing was written (the append encodes first): roll it back
                failure = self._unrecordable(turn, provider, outcome, reservation, exc)
                await self._on_failure(turn, provider, failure)

    def _unrecordable(
        self,
        turn: int,
        provider: ModelProvider,
        response: ModelResponse,
        reservation: Reservation,
        exc: EncodingError,
    ) -> ModelFailure:
        """A model answer the ledger cannot hold (a lone surrogate in its text or its native payload, a NaN
        or a long integer: RFC 8785 refuses them), as a failed call: rolled back with
        ``MalformedReplay(reason)`` naming the field, retried, failed over, or ending the run ``failed``,
        as any malformed answer (upstream's serde_json refuses such JSON when the answer arrives), with the
        call's ``model_usage`` recorded first: the tokens it cost are charged. Arguments of a call that
        parse to such a value never get here: they are an error result (:mod:`flightlog.kernel.repair`)."""
        problem = f"the model's answer cannot be recorded: {recordable_text(exc.field)}: {exc.reason}"
        prices = self.limits.price_for(provider.model)
        cost = prices.cost(response.usage) if prices is not None else None
        position, cap = self.state.route_position, reservation.max_tokens
        usage = model_usage(turn, provider, position, response.usage, cost, cap)
        return ModelFailure(RollbackReason.MalformedReplay(reason=problem), problem, True, spent=(usage,))

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
    ) -> ModelResponse | ModelFailure | None:
        """:meth:`_call`, cut short (None) by a critical signal seen in the queue (:mod:`.attention`).

        Raises:
            Exception: whatever a look at the signal queue raised (a store error): the call is cancelled and
                the error propagates; it is never read as an interrupt.
        """
        every = self.kernel.signal_poll_s
        if every is None:
            return await self._call(provider, request)
        call = asyncio.ensure_future(self._call(provider, request))
        watcher = asyncio.ensure_future(watch_interrupt(self.kernel.store, self.session_id, every))
        try:
            await asyncio.wait({call, watcher}, return_when=asyncio.FIRST_COMPLETED)
            if call.done():
                return call.result()
            watcher.result()  # a failed look at the queue raises here, not as a user interrupt
            return None
        finally:
            for task in (call, watcher):
                if not task.done():
                    task.cancel()
            await asyncio.gather(call, watcher, return_exceptions=True)

    def _watch_action(self) -> bool:
        """Record the entropy watch's action for an alert not acted on yet (:mod:`.watch`); True if any."""
        events, status = watch_events(self, self.agent.entropy_watch)
        if events:
            self.append(*events, status=status)
        return bool(events)

    async def _on_failure(self, turn: int, provider: ModelProvider, failure: ModelFailure) -> None:
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
            self.append(*failure.spent, rollback, Custom(custom_kind=CONTEXT_OVERFLOW, payload=overflow))
            return
        if failure.retryable and attempt <= self.agent.max_retries:
            delay = self._backoff(attempt, failure.retry_after_s)
            retry: dict[str, Any] = {
                "turn": turn,
                "model": provider.model,
                "route_position": position,
                "attempt": attempt,
                "max_retries": self.agent.max_retries,  # "retry 2/5" in show (narration)
                "delay_s": delay,
                "error": failure.error,
            }
            if failure.retry_after_s is not None:
                retry["retry_after_s"] = failure.retry_after_s
            self.append(
                *failure.spent,
                rollback,
                Custom(custom_kind=PROVIDER_RETRY, payload=retry),
                *failure.retry_note(turn),
            )
            await self.kernel.sleep(delay)
            return
        if position + 1 < len(self.agent.route):
            target = self.agent.route[position + 1]
            failover = route_failover(provider, target, failure.error, position, position + 1)
            self.append(*failure.spent, rollback, failover, *failure.retry_note(turn))
            return
        tokens = st.tokens_used + sum(int(usage.payload["total_tokens"]) for usage in failure.spent)
        terminal = RunTerminal(reason="failed", turns_used=st.turn, total_tokens=tokens)
        self.append(*failure.spent, rollback, terminal, status="failed")

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
            events += finished_children(self.kernel.store, st)
            events.append(RunTerminal(reason="completed", turns_used=turn, total_tokens=tokens))
            self.append(*events, status="completed")
            return
        plan = plan_calls(turn, calls, self.agent, self.ceiling, self.surface)
        undone = denial_rollback(turn, plan, self.agent, st)  # Policy.on_deny == "rollback" (kernel.denials)
        if undone is not None:
            self.append(*events, *undone)
            return
        self.append(*events, *plan.events, status="suspended" if plan.asks else None)


def _idle(state: KernelState) -> bool:
    """Nothing to do: terminal, or suspended with decisions still missing."""
    return state.phase == "terminal" or (state.phase == "suspended" and bool(state.gates))


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
            publishes no live state: ``runs`` and the dashboard then judge the run's liveness by its durable
            events alone, and a resume finds a holder still running a side effect by the process its
            intent names (:mod:`flightlog.kernel.takeover`: on this host at once by its pid and start
            time; of another host only after watching the absent record for a lease).
        signal_poll_s: Seconds between two looks at the signal queue while a model call is in flight (a
            critical signal cuts it short, :mod:`flightlog.kernel.attention`); None: signals are read at
            turn boundaries only.

    Resume always runs the full check of :func:`flightlog.integrity.audit.require_intact` first, trusting the
    notary's keys and retained heads (the user's when ``notary`` is None) and the user's witnesses.

    Attributes:
        live: The :class:`~flightlog.live.LiveRegistry` on ``store`` the kernel publishes to (None when
            ``heartbeat_s`` is None).
        lease_ms: How long (ms) a resume watches another activation's live record unchanged before it
            takes that holder for gone (:mod:`flightlog.kernel.takeover`: no clocks compared); default
            :data:`flightlog.live.DEFAULT_LEASE_MS`, 30 s. Its resume waits at most
            :data:`~flightlog.kernel.takeover.HOLDER_WAIT_LEASES` times as long for such a holder. Keep it
            well over the ``heartbeat_s`` of every kernel that may hold the session (set it on an instance:
            tests shorten it).
        spawn_depth: How deep in its run tree the kernel's run is: 0 for a root, ``n`` for a sub-agent
            ``n`` levels down. Set by the delegating call that creates the child's kernel
            (:mod:`flightlog.kernel.subagents`); :meth:`resume` of a session no delegating call placed
            derives it from the verified tree (its parent links proven by the parents' ledgers, counted up
            to the root: :func:`~flightlog.kernel.subagents.tree_position`). A run delegates only while the
            new child's depth is at most ``spawn_depth + Agent.max_spawn_depth`` and :attr:`depth_limit`.
        depth_limit: The deepest depth its ancestors' ``max_spawn_depth`` let a run of this kernel's subtree
            reach (None: no bound; a root has none). Set with :attr:`spawn_depth`; on resume also read from
            the run's verified ``spawned_by`` record (the stricter wins).
        spawned_by: The ``spawned_by`` payload the delegating call sets for the child's :meth:`run` to
            record in its start (:mod:`flightlog.integrity.lineage`); None for a kernel no delegating call
            created.
        trees: Set by the delegating call too: the parent's spawns from its own fold (the ledger it holds),
            so the child's full check on :meth:`resume` proves its parent link without checking the parent
            again (:class:`~flightlog.integrity.lineage.TreeProofs`); None: the check reads the parent.
    """

    EFFECT_GRACE_S: float = 30.0
    """Seconds the kernel waits, once the wall-clock budget runs out, for side effects still running in worker
    threads before it leaves them in doubt (the run suspended ``effect_in_doubt``; module docs). Set
    ``kernel.effect_grace_s`` on an instance to change it."""

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
        self.effect_grace_s = self.EFFECT_GRACE_S
        self.signal_poll_s = signal_poll_s
        self.spawn_depth = 0
        self.depth_limit: int | None = None
        self.spawned_by: dict[str, Any] | None = None
        self.trees: TreeProofs | None = None
        self.live = LiveRegistry(store) if heartbeat_s is not None else None
        self.lease_ms = DEFAULT_LEASE_MS
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
        self._holds: dict[str, Hold] = {}  # by session: this kernel's activations and their worker threads

    # ─── holds ────────────────────────────────────────────────────────────────────────────
    def hold(self, session_id: str) -> Hold:
        """A new hold for an activation of ``session_id`` (:mod:`flightlog.kernel.holding`), remembered so
        this kernel refuses to resume a session it still holds (:meth:`resume`) and its sync wrappers wait
        for the worker threads (:meth:`run_sync`)."""
        self._holds = {sid: h for sid, h in self._holds.items() if h.holding}
        hold = Hold(session_id, self.live, self.heartbeat_s)
        self._holds[session_id] = hold
        return hold

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
                :mod:`flightlog.kernel.subagents`), else None. The parent's ledger must record the spawn
                (its delegating call does): ``audit`` reports a parent it does not prove as
                ``row_mismatch`` and ``resume`` refuses the run (:mod:`flightlog.integrity.lineage`).

        Returns:
            The :class:`RunResult` (any status; ``suspended`` and ``cancelled`` runs are resumable).
            Cancelling the task that awaits ``run`` (or :meth:`cancel`) records
            ``operation_cancelled(reason="user")`` and returns ``cancelled`` instead of raising; a sync
            tool's worker thread it leaves running keeps the run's live record until it returns
            (:mod:`flightlog.kernel.holding`). One activation at a time per ``Kernel``.

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
        placed = self.spawned_by
        if placed is None:  # a root: whatever a resume of another session on this kernel placed it at
            self.spawn_depth, self.depth_limit = 0, None
        lineage = (
            [Custom(custom_kind=SPAWNED_BY, payload=placed)]
            if placed is not None and parent_session_id == placed.get("parent_session_id")
            else []
        )
        spec = meta.get("agent_spec")
        # The spec `resume` will import is read back from the verified ledger, never from the session row
        # (which no hash covers): a database writer must not be able to pick code for the operator to run.
        named = [Custom(custom_kind=AGENT_SPEC, payload={"spec": spec})] if isinstance(spec, str) else []
        with self.store.transaction():  # a session exists only with its run_started: crash-safe start
            recorder = Recorder.create(
                self.store,
                session_id=session_id,
                task=goal,
                source=KERNEL_SOURCE,
                metadata=meta,
                notary=self.notary,
                parent_session_id=parent_session_id,
            )
            ceiling = None if grant is None else Ceiling(grant.policy, grant.digest)
            state = KernelState(
                recorder.session_id, transcript=Transcript(archive_loader(self.store, recorder.session_id))
            )
            activation = _Activation(self, recorder, state, ceiling)
            activation.append(started, *evidence, limits, *lineage, *named)
            activation.append(*memory.start_events(self.store, self.agent.memory, goal))
            if grant is not None:
                record_grant(recorder, grant.envelope, [grant.key], at_ms=at_ms)
            # Sign the start at once (no-op without a notary): the goal, the grant and the agent spec
            # `resume` may import are then never in an unanchored tail a database writer could rewrite.
            recorder.checkpoint()
        return await self._drive(activation)

    async def resume(self, session_id: str) -> RunResult:
        """Continue a session from its ledger: after a crash, a cancel, or human decisions.

        A terminal session returns its result unchanged; a session still waiting for decisions (on its own
        gates, or on sub-agents that all wait for one, further down) returns ``suspended`` without writing
        anything, except where an ``abort`` closed a wait of that tree: each closed wait is re-opened
        (:mod:`flightlog.kernel.reopen`: a run's open gates' ``tool_gated`` + ``permission_requested``
        again, then ``suspended``; a parent's ``agent_process_changed(waiting_input)`` per awaited child,
        then ``suspended(turn, "sub_agent_await")``; children first, each with status ``suspended``, so
        ``pending`` and the dashboard list the calls again) and it returns ``suspended``. Otherwise records
        ``resumed(turn, approved, denied)`` and drives the run on.

        Raises:
            SessionNotFound: no such session.
            LedgerIntegrityError: the session, an unfinished sub-agent of its tree, or an ancestor on
                its way up to its tree's root, fails the full check ``flightlog audit`` makes (chain,
                signed checkpoints, seal, retained, witnessed and indexed heads, a ``parent_session_id``
                its parent's ledger does not prove: :mod:`flightlog.integrity.lineage`), checked before
                anything is read from it, even for a finished or waiting session (refuse, don't guess;
                a sub-agent whose row was edited to name no parent is never run as a root).
            KernelError: the session is an imported transcript (source ``import:FORMAT``:
                :func:`~flightlog.kernel.approvals.imported_transcript`) or has no ``run_started`` (not a
                kernel run), nothing written; the agent brings a grant
                other than the ledgered one, or the stored grant disagrees with the ledger.
            GrantError: the session's grant no longer verifies (untrusted key, expired); nothing written.
            SignalRowInvalid: a row of the session's signal queue is not one flightlog writes (names the
                signal and the field, :mod:`flightlog.store.signals`); nothing written. Also from a later
                turn boundary, should a row be spoiled while the run goes on.
            SessionBusy: another process appended to the session while this one checked it to take it
                over (a live writer holds it, e.g. a racing resume): nothing written, that writer goes on
                undisturbed (its authority is not taken); from the CLI one ``flightlog: error:`` line,
                exit code 1. Also (:class:`~flightlog.errors.HolderBusy`) when another live process
                still drives the session with one of its side effects in doubt after
                :data:`~flightlog.kernel.takeover.HOLDER_WAIT_LEASES` times ``lease_ms``
                (:data:`~flightlog.kernel.takeover.HOLDER_WAIT_S`, 60 s, by default): nothing reconciled
                or re-run; before
                this resume took authority that process may still be writing, after it that process is
                fenced off but its effect may still be running (:mod:`flightlog.kernel.takeover`).
                :class:`~flightlog.errors.KernelBusy` at once, nothing read or written, when this very
                ``Kernel`` still holds the session (its activation drives it, or a worker thread of its
                stopped one still runs): its own live record is no other holder to wait for.
        """
        self._refuse_own_hold(session_id)
        # The full check first, even when there is nothing to write: the caller must not act on a
        # suspension or a result read from a history `audit` rejects (a dropped seal, a rollback...).
        auditor = Auditor.for_notary(self.notary)
        auditor.trees = self.trees  # a delegating call's: its parent's fold proves the child's parent link
        report = require_intact(self.store, session_id, auditor=auditor)  # its parent link proven too
        imported = imported_transcript(self.store.get_session(session_id))
        if imported is not None:  # another agent's recorded runs: nothing of the kernel's to continue
            raise KernelError(imported)
        state = load_state(self.store, session_id)
        require_children_intact(self.store, state, auditor)  # a tampered child stops its whole tree
        if state.run is None:
            raise KernelError(f"session {session_id} has no run_started: not a kernel run")
        place(self, session_id, auditor)  # its depth in the verified tree, before it can delegate
        waits = _idle(state) or waiting_on_children(self.store, state)  # on humans, in all of the tree
        if waits and not needs_reopening(self.store, state):
            return result_of(state)
        pending_signals(self.store, session_id)  # a garbage queue row refuses the resume, nothing written
        ceiling = resume_ceiling(self.store, session_id, state.grant, self.agent)
        # Every row was just checked in full: the recorder re-verifies only what may have moved since, the
        # rows after the latest signed checkpoint (Recorder.attach full=False; in full without a notary).
        # Never settle an effect another process may still be running (kernel.takeover): before taking
        # authority (that holder finishes it), and after (one that began an effect in between is fenced off).
        # Its in-doubt effects come from the ledger: the fold just checked, followed as that holder appends.
        effects = EffectTail(self.store, session_id, state.effects, next_seq=len(state.events))
        watch = HolderWatch(self.lease_ms)  # one watch for both waits: a record watched gone stays gone
        await await_previous_holder(
            self.store,
            session_id,
            self.agent,
            self.live,
            effects=effects,
            seq=len(state.events),
            fenced=False,
            watch=watch,
        )
        recorder = Recorder.attach(self.store, session_id, notary=self.notary, full=self.notary is None)
        await await_previous_holder(
            self.store,
            session_id,
            self.agent,
            self.live,
            effects=effects,
            seq=recorder.next_seq,
            fenced=True,
            watch=watch,
        )
        if recorder.next_seq != len(state.events):  # it moved on before we took authority: refold
            state = load_state(self.store, session_id)
            waits = _idle(state) or waiting_on_children(self.store, state)
        activation = _Activation(self, recorder, state, ceiling)
        activation.surface.anchored = report.anchored  # recorded server commands run only if signed
        if waits:  # an abort closed a wait of the tree: re-open it (kernel.reopen), children first
            reopen_children(self.store, state, self.notary)
            reopened = reopening(state)
            if reopened:
                activation.append(*reopened, status="suspended")
            activation.close()
            return result_of(state)
        waiting = memory.waiting_query(state)
        try:
            arrived = (
                None
                if waiting is None
                else memory.collect(self.store, self.agent.memory, waiting, session_id, state)
            )
        except BaseException:  # an answer the checks reject (nothing recorded): the run stays suspended
            activation.close()
            raise
        if waiting is not None and arrived is None:  # the memory service has no result yet: still waiting
            activation.close()
            return result_of(state)
        # A child that ended while no holder of this session settled it gets its release now (exactly once:
        # this process holds the authority, and the fold it reads is the ledger's head).
        released = finished_children(self.store, state)
        activation.append(self._resumed(state), *(arrived or []), *released, status="running")
        return await self._drive(activation)

    def _refuse_own_hold(self, session_id: str) -> None:
        """Refuse to resume a session this kernel still holds: its own live record is no "other holder"
        (:func:`flightlog.live.other_holder` skips this registry's records), so the takeover would not wait
        for the activation still driving it, or for a worker thread of a stopped one still running an
        effect (attack pass atk3: a server's "retry" handler sharing one Kernel ran an effect twice).

        Raises:
            KernelBusy: this kernel holds ``session_id`` (nothing read or written).
        """
        hold = self._holds.get(session_id)
        if hold is not None and hold.holding:
            raise KernelBusy(session_id=session_id, threads=hold.threads if hold.ended else 0)

    @staticmethod
    def _resumed(state: KernelState) -> Resumed:
        approved: list[str] = []
        denied: list[str] = []
        waits = [event for _, event in state.current_wait()]  # more than one once a wait was re-opened
        seen: set[str] = set()
        for suspension in waits or ([state.suspension] if state.suspension is not None else []):
            gate: GateKind = "effect_in_doubt" if suspension.reason == "effect_in_doubt" else "approval"
            for call_id in suspension.pending_calls:
                verdict = state.verdict(gate, call_id)
                if verdict is not None and call_id not in seen:
                    seen.add(call_id)
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
        """:meth:`run` in a fresh event loop; SIGINT/SIGTERM cancel it cleanly (``user``/``host_shutdown``).

        Returns only once every worker thread the run started has returned (a sync tool cannot be stopped;
        a cancel or a deadline leaves one running): meanwhile the run's live record is kept, so a resume
        elsewhere waits for it, and a warning says so; a second SIGINT/SIGTERM then ends the process at
        once, the effect left in doubt as after a crash (:mod:`flightlog.kernel.holding`,
        :func:`~flightlog.kernel.signals.run_blocking`).
        """
        return run_blocking(
            lambda: self.run(goal, criteria, attachments, session_id=session_id, metadata=metadata),
            self.cancel if handle_signals else None,
        )

    def resume_sync(self, session_id: str, *, handle_signals: bool = True) -> RunResult:
        """:meth:`resume` in a fresh event loop, with the same signal handling and the same wait for worker
        threads as :meth:`run_sync`."""
        return run_blocking(lambda: self.resume(session_id), self.cancel if handle_signals else None)
