"""One activation of a run: what every step shares (:mod:`flightlog.kernel.loop` takes the steps).

An activation is one process's stretch of a run, from a start or a resume to a stop (any status).
:class:`Activation` holds its plumbing: appends to the ledger (one transaction each, with the session status
when it changes), the :class:`~flightlog.kernel.state.KernelState` fold kept current from the recorder's
after-commit notifications, the wall clock and the budgets, one model call with its failure classified
(:class:`ModelFailure`), retry backoff, and the ``budget_exhausted`` terminal.
:class:`~flightlog.kernel.activation_context.ContextActivation` adds context management on top of it, and the
loop's own activation class the turn steps.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..events import BudgetExceeded, Custom, Event, RollbackReason, RollbackReasonT, RunTerminal, SessionEvent
from ..providers.base import ModelProvider, ModelRequest, ModelResponse, ProviderError
from ..recorder import Recorder
from ..replay import KERNEL_NOTE
from ..sessions import archive_loader
from ..store.base import StoredEvent
from .budgets import Axis, Budgets, Spent
from .capabilities import ToolSurface
from .ceiling import Ceiling
from .effects import Effects
from .entropy import EntropyTracker
from .memory import MemoryContext
from .milestones import Milestones
from .operations import Operation, deadline
from .paging import Notes
from .planning import calls_in
from .result import TERMINAL_STATUS, RunResult, result_of
from .state import KernelState

if TYPE_CHECKING:
    from .loop import Kernel

__all__ = ["TIMEOUT_NOTE", "Activation", "ModelFailure"]

TIMEOUT_NOTE = "The previous step timed out. Please try a faster approach."
"""What the model is told before a turn whose model call timed out (``Agent.model_timeout_s``) is taken
again, on the same route position or the next. Source: upstream's concise note for a ``Timeout`` rollback
(deepstrike ``scheduler/rollback.rs`` ``build_rollback_note``), pushed before the model is asked again when a
timeout struck with no tool batch pending (``scheduler/state_machine/mod.rs``, ``LoopEvent::Timeout``).
Upstream adds no note after a provider failure of the model call (its transport retries it unseen and,
exhausted, ends the run: ``runtime/kernel/wire/driver.rs``
``a_provider_failure_commits_a_terminal_and_never_re_asks``; its ``The previous attempt failed`` note was
only ever for a tool result tagged ``ProviderFailure``), so neither does flightlog."""


@dataclass(frozen=True)
class ModelFailure:
    """A failed model call: the rollback reason, a text for the ledger, and whether to retry it."""

    reason: RollbackReasonT
    error: str
    retryable: bool
    retry_after_s: float | None = None
    context_overflow: bool = False
    spent: tuple[Custom, ...] = ()
    """The call's ``model_usage``, when the model answered and the answer cannot be recorded: recorded first
    in the rollback's transaction, so the tokens the call cost are charged (empty when no answer came)."""

    def retry_note(self, turn: int) -> list[Event]:
        """What the kernel tells the model before ``turn`` is taken again after this failure (retried or
        failed over), recorded after the ``rollbacked`` in its transaction: ``[Custom("kernel_note", {turn,
        text: TIMEOUT_NOTE})]`` after a timeout of the model call (``RollbackReason.Timeout``), replayed as a
        ``user`` message (:data:`flightlog.replay.KERNEL_NOTE`); ``[]`` after any other failure
        (``ProviderFailure``, ``MalformedReplay``), as upstream (:data:`TIMEOUT_NOTE`)."""
        if self.reason.kind != "timeout":
            return []
        return [Custom(custom_kind=KERNEL_NOTE, payload={"turn": turn, "text": TIMEOUT_NOTE})]


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


class Activation:
    """The plumbing of one activation of a run (module docs); the steps live in subclasses.

    Attributes:
        kernel: The :class:`~flightlog.kernel.Kernel` running it (its store, clock, sleep, subscribers).
        agent: The kernel's agent.
        ceiling: The signed grant's ceiling, None without a grant.
        recorder: The session's recorder (the activation's writer authority).
        state: The session's fold, updated after each commit.
        session_id: The session.
        effects: Exactly-once side effects over the recorder (:mod:`flightlog.kernel.effects`).
        operation: The operation in flight (a model call, a tool turn), None between operations.
        notes: What the built-in tools asked for during the current tool turn
            (:mod:`flightlog.kernel.paging`).
        memory_context: The current tool turn's memory context (:mod:`flightlog.kernel.memory`).
        surface: The mounted tool surface (:mod:`flightlog.kernel.capabilities`).
        milestones: The agent's milestone contract (:mod:`flightlog.kernel.milestones`).
        entropy: The entropy fold (:mod:`flightlog.kernel.entropy`).
    """

    def __init__(
        self, kernel: Kernel, recorder: Recorder, state: KernelState, ceiling: Ceiling | None = None
    ) -> None:
        self.kernel = kernel
        self.ceiling = ceiling
        self.agent = kernel.agent
        self.recorder = recorder
        self.state = state
        self.session_id = recorder.session_id
        self.effects = Effects(recorder, state.effects)
        self.operation: Operation | None = None
        self._wall_before = 0
        self._t0 = kernel.clock()
        self._unsubscribe = recorder.subscribe(self._on_event)
        self._fenced: str | None = None
        self.notes = Notes()
        self.memory_context: MemoryContext | None = None
        self._loader = archive_loader(kernel.store, recorder.session_id)
        self.surface = ToolSurface(self.agent, ceiling, self.append, recorder.checkpoint)
        self.milestones = Milestones(
            self.agent.milestones, self.surface, self.append, self.agent.context_policy
        )
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
            if status in TERMINAL_STATUS:
                self._drop_leftover_signals()
                self.recorder.finish(status)
            else:
                self.recorder.store.set_session_status(self.session_id, status)
                if status in ("suspended", "cancelled"):
                    # The process may exit here for hours: anchor what it wrote (no-op without a notary).
                    self.recorder.checkpoint()

    def _drop_leftover_signals(self) -> None:
        """In the terminal transaction: record every signal still queued as ``dropped`` (kernel.attention)."""
        from .attention import leftover_events

        st = self.state
        events, consume = leftover_events(
            self.recorder.store, self.session_id, turn=st.turn, run_id=st.run_id
        )
        if events:
            consume(self.recorder.append_many(events))

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

    # ─── stopping, one model call, backoff ────────────────────────────────────────────────
    def close(self) -> None:
        """Stop listening to the recorder (the activation is over)."""
        self._unsubscribe()

    def _exhausted(self, axis: Axis, turn: int, operation_id: str, reservation_id: str | None) -> None:
        st = self.state
        self.append(
            BudgetExceeded(turn=turn, operation_id=operation_id, reservation_id=reservation_id, budget=axis),
            RunTerminal(reason="budget_exhausted", turns_used=st.turn, total_tokens=st.tokens_used),
            status="budget_exhausted",
        )

    async def _call(self, provider: ModelProvider, request: ModelRequest) -> ModelResponse | ModelFailure:
        on_token = self.kernel.emit_token if self.agent.stream else None
        timeout = self.agent.model_timeout_s
        async with deadline(self.deadline_left_s()):
            scope = asyncio.timeout(timeout)
            try:
                async with scope:
                    response = await provider.complete(request, on_token=on_token)
            except TimeoutError as exc:
                if scope.expired():
                    return ModelFailure(
                        RollbackReason.Timeout(), f"model call timed out after {timeout}s", True
                    )
                return ModelFailure(
                    RollbackReason.ProviderFailure(error=f"TimeoutError: {exc}"), str(exc), True
                )
            except ProviderError as exc:
                error = str(exc)
                return ModelFailure(
                    RollbackReason.ProviderFailure(error=error),
                    error,
                    exc.retryable,
                    exc.retry_after_s,
                    exc.context_overflow,
                )
            except Exception as exc:  # an adapter bug or an unwrapped SDK error: not retried, fail over
                error = f"{type(exc).__name__}: {exc}"
                return ModelFailure(RollbackReason.ProviderFailure(error=error), error, False)
        problem = _malformed(response, provider)
        if problem is not None:
            return ModelFailure(RollbackReason.MalformedReplay(reason=problem), problem, True)
        return response

    def _backoff(self, attempt: int, retry_after_s: float | None) -> float:
        computed: float = self.agent.backoff_base_s * 2.0 ** max(0, attempt - 1)
        wanted = max(computed, retry_after_s or 0.0)
        return float(min(wanted, self.agent.backoff_max_s))

    # ─── result ───────────────────────────────────────────────────────────────────────────
    def result(self) -> RunResult:
        """The :class:`RunResult` the ledger (and a fence, if any) says."""
        return result_of(self.state, fenced=self._fenced)
