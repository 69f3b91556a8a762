"""Milestone contracts: a run gated on verified progress, phase by phase (seed 000 ``milestone_*``).

``Agent.milestones`` is a sequence of :class:`Phase`\\ s: each has criteria, a judge and the capability
ids it unlocks (declared, usually ``locked``, in ``Agent.capabilities``). Semantics follow the seed
runtime (UPSTREAM.md §5):

* **Check trigger.** While a phase is open, a model answer *without tool calls* does not end the run: the
  kernel runs the phase's judge on it.
* **Judge.** A Python function ``judge(JudgeInput) -> Verdict | bool`` (sync or async), or a
  :class:`ModelJudge` (a model call with a rubric; its reply is a JSON object ``{"passed": bool,
  "reasons": [str]}``; its tokens go to the run's budget as ``model_usage`` with ``purpose:
  "milestone_judge"``; before the call, its request is recorded as ``prompt_program_compiled`` (when it
  changed; it keeps the judge's system prompt) and ``prompt_program_invoked`` (with the phase's criteria) of
  actor ``milestone_judge``, in a transaction of its own, so ``replay --check`` rebuilds it from the ledger,
  :mod:`flightlog.kernel.requests`). Every verdict is recorded: ``Custom("milestone_verdict", {turn, phase_id, judge:
  "function"|"model", passed, reasons, model?, rubric_digest?})``. A judge that raises, or a model reply
  that is not such an object, blocks the phase with the error as the reason.
* **Pass.** Each unlocked capability is mounted (``capability_changed``, ``mounted_by =
  "milestone:<phase id>"``, ``mount_reason = "phase_advance"``), then ``milestone_advanced(turn, phase_id,
  capabilities_unlocked = ["<KindLabel>:<id>", ...])``, all in one transaction with the verdict. If it was
  the last phase the run ends ``completed`` (``run_terminal`` in the same transaction); otherwise the next
  model call starts the next turn.
* **Fail.** ``milestone_blocked(turn, phase_id, reason)`` (reason: the judge's reasons joined with ``;
  ``, default ``milestone criteria not met``) and the run continues in its phase with a new model call.
  With ``max_attempts`` (> 0) reached, the reason is ``retry budget exhausted: <r>`` and the run ends
  ``run_terminal(reason="milestone_exceeded")`` (status ``failed``), upstream's ``terminate`` policy.
* **History.** The model learns of both through the history: :mod:`flightlog.replay` folds
  ``milestone_blocked`` to a ``user`` message ``[MILESTONE BLOCKED: <phase> — <reason>. Address the
  criteria and try again.]`` (upstream's signal text) and ``milestone_advanced`` to ``[MILESTONE PASSED:
  <phase> — unlocked: <labels>]``, so live runs, resumes and ``replay`` see the same messages.
* **Cursor.** The open phase is the number of ``milestone_advanced`` events so far; the attempt count is
  the ``milestone_blocked`` events since the last advance (both folded from the ledger, so a resume
  continues where the run was).

Upstream's ``unlock_policy: deferred`` (never read upstream) and ``rollback_policy`` other than
``terminate`` are not offered.

The run's read model shows each phase as a gate receipt ``milestone:<session>:<phase>`` labelled
``passed``/``blocked`` (:mod:`flightlog.runs.adapters`, seed 002 ``ReceiptKind::Gate``).
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..events import Custom, Event, MilestoneAdvanced, MilestoneBlocked, RunTerminal
from ..messages import Message
from ..providers.base import ModelProvider, ModelRequest
from .capabilities import Prepared, ToolSurface, label_of
from .context import ContextPolicy, cap_output
from .records import JUDGE_ACTOR, judge_request, model_usage
from .requests import digest

if TYPE_CHECKING:
    from .state import KernelState

__all__ = ["MILESTONE_VERDICT", "JudgeInput", "Milestones", "ModelJudge", "Phase", "Verdict"]

MILESTONE_VERDICT = "milestone_verdict"
"""``Custom`` kind recorded for each judgement of a phase: the verdict, the judge's reasons and, for a
:class:`ModelJudge`, its token use."""
DEFAULT_REASON = "milestone criteria not met"


@dataclass(frozen=True)
class Verdict:
    """A judge's decision: passed or not, and why."""

    passed: bool
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class JudgeInput:
    """What a judge sees.

    Attributes:
        phase: The open phase.
        turn: The turn whose answer is judged.
        answer: The model's answer text (the last assistant message), or None.
        history: The run's history as the model saw it, answer included.
        state: The kernel's fold of the ledger (read only).
    """

    phase: Phase
    turn: int
    answer: str | None
    history: Sequence[Message]
    state: KernelState


Judge = Callable[[JudgeInput], "Verdict | bool | Awaitable[Verdict | bool]"]
"""A Python judge (sync or async)."""

JudgeRecords = Callable[[int, ModelProvider, ModelRequest, list[dict[str, Any]]], list[Event]]
"""Builds the ``prompt_program_*`` records of a judge request: ``(turn, provider, request, sections)``."""


@dataclass(frozen=True)
class ModelJudge:
    """A model call with a rubric as a judge.

    Attributes:
        provider: The model that judges.
        rubric: What passing means (sent as the system prompt, with the reply format).
        max_tokens: Output cap of the judge call, in tokens (the kernel caps it by the ``output_reserve``
            of the judge model's window, :func:`~flightlog.kernel.context.cap_output`).
    """

    provider: ModelProvider
    rubric: str
    max_tokens: int = 512

    def request(self, given: JudgeInput, max_tokens: int | None = None) -> ModelRequest:
        """The judge's request: rubric as system prompt, criteria and the answer as one user message,
        asking for ``max_tokens`` (tokens; None: :attr:`max_tokens`); built by
        :func:`~flightlog.kernel.records.judge_request`, which ``replay --check`` rebuilds it with."""
        system = (
            f"{self.rubric}\n\nYou judge whether milestone phase {given.phase.id!r} is met. Reply with only "
            'a JSON object: {"passed": true|false, "reasons": ["..."]}.'
        )
        cap = self.max_tokens if max_tokens is None else max_tokens
        return judge_request(system, list(given.phase.criteria), given.answer, cap)


def parse_verdict(text: str) -> Verdict:
    """The verdict in a judge model's reply: the first JSON object with a boolean ``passed``.

    Raises:
        ValueError: no such object (the message quotes the start of the reply).
    """
    for match in re.finditer(r"\{", text):
        try:
            value, _end = json.JSONDecoder().raw_decode(text[match.start() :])
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict) and isinstance(value.get("passed"), bool):
            reasons = value.get("reasons", [])
            if isinstance(reasons, str):
                reasons = [reasons]
            return Verdict(
                value["passed"], tuple(str(r) for r in reasons if isinstance(r, str | int | float))
            )
    raise ValueError(f"judge reply has no JSON verdict object: {text[:200]!r}")


@dataclass(frozen=True)
class Phase:
    """One milestone phase.

    Attributes:
        id: Phase id (``milestone_*.phase_id``).
        judge: A Python function or a :class:`ModelJudge`.
        criteria: What the phase asks for (shown to a model judge).
        unlocks: Capability ids mounted when it passes (declared in ``Agent.capabilities``).
        max_attempts: Blocks allowed before the run ends ``milestone_exceeded`` (None or 0: unlimited).
    """

    id: str
    judge: Judge | ModelJudge
    criteria: Sequence[str] = ()
    unlocks: Sequence[str] = field(default_factory=tuple)
    max_attempts: int | None = None

    def __post_init__(self) -> None:
        for attr in ("criteria", "unlocks"):
            value = getattr(self, attr)
            if isinstance(value, str):
                raise TypeError(f"phase {self.id}: {attr} must be a sequence of strings, not a string")
            object.__setattr__(self, attr, tuple(value))
        if self.max_attempts is not None and self.max_attempts < 0:
            raise ValueError(f"phase {self.id}: max_attempts must be >= 0")


def cursor(state: KernelState) -> tuple[int, int]:
    """``(open phase index, blocks since the last advance)`` folded from the ledger."""
    index = blocked = 0
    for _seq, event in state.events:
        if isinstance(event, MilestoneAdvanced):
            index, blocked = index + 1, 0
        elif isinstance(event, MilestoneBlocked):
            blocked += 1
    return index, blocked


class Milestones:
    """The milestone contract of one activation (see the module docs).

    Args:
        phases: ``Agent.milestones``.
        capabilities: The activation's tool surface (mounts the unlocks).
        append: Appends events in one transaction (``status`` sets the session status with them).
        context: The agent's context policy: a :class:`ModelJudge`'s ``max_tokens`` is capped by the
            ``output_reserve`` of its model's window there (None: no window known).
        records: The ``prompt_program_compiled``/``_invoked`` events of a :class:`ModelJudge` request
            (``(turn, provider, request, sections)``), appended before the call; None records none.
    """

    def __init__(
        self,
        phases: Sequence[Phase],
        capabilities: ToolSurface,
        append: Callable[..., None],
        context: ContextPolicy | None = None,
        records: JudgeRecords | None = None,
    ) -> None:
        self.phases = tuple(phases)
        self.capabilities = capabilities
        self._append = append
        self._context = context
        self.records = records

    def open_phase(self, state: KernelState) -> Phase | None:
        """The phase the run is in, None when there is no contract or every phase passed."""
        index, _blocked = cursor(state)
        return self.phases[index] if index < len(self.phases) else None

    async def check(self, state: KernelState) -> bool:
        """Judge the open phase on the final answer and record the outcome; False when there is no open
        phase (the caller completes the run as usual)."""
        phase = self.open_phase(state)
        if phase is None:
            return False
        index, blocked = cursor(state)
        turn = state.turn
        given = JudgeInput(phase, turn, state.final_message(), state.history(), state)
        verdict, record, extra = await self._judge(phase, given, state)
        events: list[Event] = [*extra, Custom(custom_kind=MILESTONE_VERDICT, payload=record)]
        if not verdict.passed:
            reason = "; ".join(verdict.reasons) or DEFAULT_REASON
            limit = phase.max_attempts or 0
            if limit and blocked + 1 >= limit:
                events.append(
                    MilestoneBlocked(turn=turn, phase_id=phase.id, reason=f"retry budget exhausted: {reason}")
                )
                tokens = state.tokens_used + _tokens(extra)
                events.append(RunTerminal(reason="milestone_exceeded", turns_used=turn, total_tokens=tokens))
                self._append(*events, status="failed")
                return True
            events.append(MilestoneBlocked(turn=turn, phase_id=phase.id, reason=reason))
            self._append(*events)
            return True
        prepared: list[Prepared] = []
        unlocked: list[str] = []
        for capability_id in phase.unlocks:
            capability = self.capabilities.declared(capability_id)
            if capability is None:
                continue  # Agent validation rejects unknown ids; a resumed agent may have dropped one
            ready = await self.capabilities.prepare(
                capability, turn, f"milestone:{phase.id}", "phase_advance"
            )
            if ready is not None:
                prepared.append(ready)
                events.extend(ready.events)
                unlocked.append(label_of(capability.kind, capability.id))
        events.append(MilestoneAdvanced(turn=turn, phase_id=phase.id, capabilities_unlocked=unlocked))
        last = index + 1 >= len(self.phases)
        if last:
            tokens = state.tokens_used + _tokens(extra)
            events.append(RunTerminal(reason="completed", turns_used=turn, total_tokens=tokens))
        try:
            self._append(*events, status="completed" if last else None)
        except BaseException:
            for item in prepared:
                await item.discard()
            raise
        for item in prepared:
            await self.capabilities.commit(item)
        return True

    async def _judge(
        self, phase: Phase, given: JudgeInput, state: KernelState
    ) -> tuple[Verdict, dict[str, Any], list[Event]]:
        record: dict[str, Any] = {"turn": given.turn, "phase_id": phase.id}
        extra: list[Event] = []
        judge = phase.judge
        try:
            if isinstance(judge, ModelJudge):
                record.update(judge="model", model=judge.provider.model, rubric_digest=digest(judge.rubric))
                model = judge.provider.model
                window = self._context.window(model) if self._context is not None else None
                request = judge.request(given, cap_output(judge.max_tokens, window))
                if self.records is not None:  # write-ahead, its own transaction, as a compaction's call
                    self._append(*self.records(given.turn, judge.provider, request, _sections(phase)))
                response = await judge.provider.complete(request)
                usage = model_usage(
                    given.turn, judge.provider, state.route_position, response.usage, None, request.max_tokens
                )
                usage.payload["purpose"] = JUDGE_ACTOR
                extra.append(usage)
                verdict = parse_verdict(response.message.text_content())
            else:
                record["judge"] = "function"
                outcome = judge(given)
                if inspect.isawaitable(outcome):
                    outcome = await outcome
                verdict = outcome if isinstance(outcome, Verdict) else Verdict(bool(outcome))
        except Exception as exc:
            verdict = Verdict(False, (f"judge failed: {type(exc).__name__}: {exc}",))
        record.update(passed=verdict.passed, reasons=list(verdict.reasons))
        return verdict, record, extra


def _sections(phase: Phase) -> list[dict[str, Any]]:
    """Where a judge request's parts come from: its rubric, the phase's criteria (kept here verbatim, so
    ``replay --check`` rebuilds the request) and the judged answer (the history's last assistant message)."""
    return [
        {"id": "rubric", "origin": "milestone", "messages": 0},
        {"id": "criteria", "origin": "milestone", "phase_id": phase.id, "items": list(phase.criteria)},
        {"id": "answer", "origin": "history", "messages": 1},
    ]


def _tokens(events: Sequence[Event]) -> int:
    return sum(
        int(e.payload.get("total_tokens", 0))
        for e in events
        if isinstance(e, Custom) and isinstance(e.payload, dict)
    )
