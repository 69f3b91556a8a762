"""An activation's context management: the model request, its window fill, compaction, renewal, paging.

:class:`ContextActivation` adds to :class:`~flightlog.kernel.activation.Activation` what the loop
(:mod:`flightlog.kernel.loop`) asks before and after each turn: the request and its ``prompt_program_*``
records (:mod:`flightlog.kernel.requests`), the fill against the model's window
(:mod:`flightlog.kernel.context`), in-place rewrites (:mod:`flightlog.kernel.inplace`), a compaction's plan
and summary call (:mod:`flightlog.kernel.compaction`), a renewal's handoff (:mod:`flightlog.kernel.renewal`),
and what the built-in tools and tool execution need: archives to page in, large results paged out
(:mod:`flightlog.kernel.paging`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..encoding import canonical_json
from ..events import Compressed, ContextRenewed, Custom, Event, PageIn, PageOut, RunTerminal
from ..messages import Message, ToolResult
from ..providers.base import ModelProvider, ModelRequest, ModelResponse
from ..testing.crashpoints import crash_point
from . import memory
from .activation import Activation, ModelFailure
from .budgets import Reservation, reserve
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
from .context import (
    RENEWAL_THRESHOLD,
    Calibration,
    Fill,
    action_for,
    cap_output,
    estimate_fill,
    estimate_tokens,
)
from .inplace import plan_in_place
from .operations import Operation
from .paging import PAGE_IN, Notes, archived_result, stub_output, tokens_of
from .records import (
    CONTEXT_BUDGET_EXCEEDED,
    CONTEXT_PIN,
    JUDGE_ACTOR,
    PROMPT_PROGRAM_COMPILED,
    PROMPT_PROGRAM_INVOKED,
    model_usage,
    route_failover,
)
from .renewal import handoff_message
from .requests import Program, digest, program_of, sections_of

if TYPE_CHECKING:
    from ..recorder import Recorder
    from .ceiling import Ceiling
    from .loop import Kernel
    from .state import KernelState

__all__ = ["ContextActivation"]

_STAGES = {"compactor": "compaction", JUDGE_ACTOR: "milestone"}
"""``prompt_program_compiled.stage`` per actor (``turn`` for the kernel's own calls)."""
_PROMPT_ORIGINS = {"compactor": "compactor", JUDGE_ACTOR: "milestone"}
"""Where each actor's system prompt comes from (``run_started`` for the kernel's own calls)."""


class ContextActivation(Activation):
    """An :class:`~flightlog.kernel.activation.Activation` that manages its model context (module docs)."""

    def __init__(
        self, kernel: Kernel, recorder: Recorder, state: KernelState, ceiling: Ceiling | None = None
    ) -> None:
        super().__init__(kernel, recorder, state, ceiling)
        self.milestones.records = self.judge_records  # a model judge's request goes on record too

    # ─── context: fill, compaction, renewal, paging, request records ──────────────────────
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

    def output_cap(self, provider: ModelProvider, wanted: int | None = None) -> int:
        """The ``max_tokens`` a request to ``provider`` asks for before budgets cap it (tokens).

        Every model call the kernel makes follows the rule: a turn's (``wanted`` None: the agent's
        ``max_tokens``), a compaction's summary (``ContextPolicy.summary_max_tokens``) and a milestone judge's
        (``ModelJudge.max_tokens``), each capped by
        the ``output_reserve`` of ``provider``'s model's window when it is known and reserves any
        (:class:`~flightlog.kernel.context.ContextWindow`), so input within ``usable`` plus the answer fit
        the window. The budget reservation is made for this figure."""
        asked = self.agent.max_tokens if wanted is None else wanted
        return cap_output(asked, self.agent.context_policy.window(provider.model))

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

    def refuse_fixed_overflow(self, turn: int, provider: ModelProvider, program: Program, fill: Fill) -> bool:
        """End the run, or fail over, before a call whose fixed part cannot fit; True when recorded.

        The fixed part is the request's system prompt and tool specs (``program.platform``): no compaction
        or renewal shrinks it. When its estimate (:func:`~flightlog.kernel.context.estimate_tokens`, the
        position's calibration) exceeds the window's ``usable`` input tokens, no model call is made: the
        next route position is tried (``route_failover``; its window may be larger), else the run ends
        (:meth:`_end_unfit`, ``overflow_kind`` ``fixed_context``). A model without a known window is never
        refused here. Source: upstream refuses a ``FixedContext`` overflow before the provider call
        (deepstrike ``context/renderer.rs`` ``render_projected``, ``scheduler/state_machine/mod.rs``
        ``emit_call_llm``: ``ContextBudgetExceeded`` then ``TerminationReason::ContextOverflow``); upstream
        counts the system blocks and the task-state turn, ours the system prompt and the tool specs.
        """
        window = fill.window
        st = self.state
        chars = len(canonical_json(program.platform).decode())
        fixed = estimate_tokens(chars, st.calibration.get(provider.model))
        if window is None or fixed <= window.usable:
            return False
        position = st.route_position
        if position + 1 < len(self.agent.route):
            cause = f"the system prompt and tool specs need ~{fixed} tokens, over the {window.usable} input tokens of {provider.model}'s window"
            self.append(
                route_failover(provider, self.agent.route[position + 1], cause, position, position + 1)
            )
            return True
        self._end_unfit(turn, provider, "fixed_context", fixed, window.usable)
        return True

    def refuse_exhausted_overflow(self, turn: int, provider: ModelProvider, fill: Fill) -> bool:
        """End the run instead of re-sending a request the provider called too long when the forced
        compaction found nothing to archive (and no renewal was due); True when recorded.

        Called after :meth:`_manage_context` declined: the request is then the one refused, so it cannot fit
        either. Only on the last route position (with a later one the call is made and its failure fails
        over, as any non-retryable failure does). ``overflow_kind`` ``provider``, ``required_tokens`` the
        fill estimate. Source: upstream's overflow ladder ends the run ``ContextOverflow`` when
        ``force_compact`` saves nothing (deepstrike ``scheduler/state_machine/eviction.rs``
        ``run_context_overflow_ladder``).
        """
        st = self.state
        if not st.overflow or st.overflow_compacted == turn or st.route_position + 1 < len(self.agent.route):
            return False
        window = fill.window
        self._end_unfit(turn, provider, "provider", fill.tokens, None if window is None else window.usable)
        return True

    def _end_unfit(
        self, turn: int, provider: ModelProvider, kind: str, required: int, usable: int | None
    ) -> None:
        """``Custom("context_budget_exceeded")`` and ``run_terminal(reason="context_overflow")`` (status
        ``failed``) in one transaction: ``required_tokens`` the estimate, ``max_tokens`` the window's
        ``usable`` input tokens (upstream's field names; absent when the window is unknown)."""
        st = self.state
        payload: dict[str, Any] = {
            "turn": turn,
            "model": provider.model,
            "route_position": st.route_position,
            "overflow_kind": kind,
            "required_tokens": required,
        }
        if usable is not None:
            payload["max_tokens"] = usable
        self.append(
            Custom(custom_kind=CONTEXT_BUDGET_EXCEEDED, payload=payload),
            RunTerminal(reason="context_overflow", turns_used=st.turn, total_tokens=st.tokens_used),
            status="failed",
        )

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

    def compaction_plan(self, turn: int) -> Plan | None:
        """A forced compaction before ``turn`` for the entropy watch's ``compact`` action."""
        provider = self.provider()
        st = self.state
        request = self._request(provider, Reservation(st.run_id, self.output_cap(provider)))
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
            max_tokens=self.output_cap(provider, policy.summary_max_tokens),
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
        if isinstance(outcome, ModelFailure):
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

    def judge_records(
        self, turn: int, provider: ModelProvider, request: ModelRequest, sections: list[dict[str, Any]]
    ) -> list[Event]:
        """The ``prompt_program_*`` records of a milestone judge's request (actor ``milestone_judge``): its
        compiled program holds the judge's system prompt verbatim, so ``replay --check`` rebuilds it."""
        program = program_of(provider.protocol, provider.model, request)
        return self._program_records(
            JUDGE_ACTOR, turn, provider, program, self._fill(provider, program), sections
        )

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
                "stage": _STAGES.get(actor, "turn"),
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
                        "origin": _PROMPT_ORIGINS.get(actor, "run_started"),
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
            if actor == JUDGE_ACTOR:  # a user's rubric: the ledger must hold it to rebuild the request
                compiled["system_prompt"] = prompt
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
        """The messages of an archive artifact (``sha256:<hex>``), None when unknown.

        Raises:
            ArtifactIntegrityError: the archive is stored altered, or is not a message list
                (:func:`flightlog.sessions.archive_loader`); the tool call re-raises it and the run stops.
        """
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
