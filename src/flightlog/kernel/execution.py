"""Executing a planned turn: in-doubt effects first, then the calls, then one ``tool_completed``.

Order of work for a turn in phase ``tools``:

1. Every ``side_effect`` call whose intent is recorded without completion (from an earlier activation:
   crash, cancel) is *in doubt*. Its tool's ``reconcile`` settles it; if any has no reconciler (and no
   human decision yet), the run suspends: ``tool_gated`` + ``permission_requested`` per call, then
   ``suspended(reason="effect_in_doubt", pending_calls)``. Nothing runs.
2. Calls run in call order; consecutive ``read_only`` calls run concurrently (``asyncio.gather``) when
   the agent allows it. Denied and invalid calls get error results without running; ``side_effect`` calls
   go through :class:`~flightlog.kernel.effects.Effects` (exactly once).
3. ``tool_completed(turn, results)``, results in call order (a result too large for the context window is
   recorded as a stub, its output paged out to an artifact), followed in its transaction by the context
   events of the turn: ``page_out`` per paged result, ``page_in``, ``context_pin``, ``context_renewed``
   (see :mod:`flightlog.kernel.paging`), then what the memory tools brought back
   (:mod:`flightlog.kernel.memory`). What the memory tools did (``memory_queried``, ``memory_written``,
   ``memory_validation_failed``) is already recorded by then, during the call, in the transaction of the
   store write it describes: so it is on record whichever way the turn ends (rolled back, suspended,
   cancelled, out of time, killed).

Under a signed grant, right before a call runs, each of its path arguments is resolved on the filesystem
and checked again (:func:`~flightlog.kernel.confine.runtime_problem`): one that now resolves outside the
grant (a symlink leading out) gives the call an error result naming the argument, and the tool does not
run (a ``side_effect`` call's completion records that result). The tool then runs with the grant as
:func:`~flightlog.kernel.ceiling.current_ceiling`, for :mod:`flightlog.kernel.confine`.

A sub-agent call (:mod:`flightlog.kernel.subagents`) whose child stops without finishing (waiting for a human,
cancelled) raises :class:`~flightlog.kernel.subagents.AwaitingChildren` once every call of its group has
stopped; the turn then records ``suspended(turn, reason="sub_agent_await", pending_calls)`` (the calls whose
children have not finished) and a resume continues each child from its own ledger.

A tool raising :class:`~flightlog.kernel.errors.FatalToolError` stops the turn: calls not started yet do
not run (calls of its concurrent group finish first). What the kernel records depends on what the turn did:

* **Nothing irreversible ran** (only ``read_only``/``idempotent`` calls, denied or invalid ones): the turn
  is rolled back, ``rollbacked(turn, checkpoint_history_len, reason=FatalToolError(tool_name, error))``,
  then retried or the run fails (``run_terminal(reason="failed")``) per ``Agent.on_fatal_tool_error`` and
  ``max_retries``: running those calls again is harmless. A retry is told why: the ``rollbacked`` is
  followed in its transaction by ``Custom("kernel_note", {turn, text})``, a ``user`` message
  :mod:`flightlog.replay` puts after the rolled-back history (as a denial's, :mod:`flightlog.kernel.denials`),
  upstream's note :func:`fatal_note`: ``The previous step failed (`<tool>`: <error>). Please try a different
  approach.`` Without it the retried request would be the one that led to the failing call, and the model
  would likely ask for it again.
* **A** ``side_effect`` **call of the turn completed** (a delegating call included: its child ran): the
  turn is *committed*, not rolled back. A completed external effect cannot be undone, and a rollback would
  hide it from the model, whose retried turn (with fresh call ids, as real models answer) would then run it
  again: the exactly-once key is per call id. So ``tool_completed(turn, results)`` records every call: the
  completed ones with their results, the fatal one with ``FatalToolError: <error>``
  (:data:`~flightlog.kernel.errors.FATAL_RESULT_PREFIX`), as is each call of its concurrent group that
  raised one too (it ran: its own error), and each call that never started with ``not executed: ...`` (all
  ``is_error`` but the completed ones). With ``on_fatal_tool_error="retry"``
  (and retries left) the run goes on to the next turn, the model seeing all of it; else
  ``run_terminal(reason="failed")`` follows in the same transaction. This is upstream's own later answer
  (deepstrike ``scheduler/state_machine/mod.rs`` ``rollback_reason_for_tool_result``: fatal results commit as
  visible errors; ``runtime/kernel/wire/driver.rs`` ``close_out_fatal_batch``: the calls the fatal one
  stopped are answered "not executed"), applied where a rollback would lie.

When a delegating call of the fatal call's group stopped with its child waiting (not finished), the turn
suspends ``sub_agent_await`` as without the fatal error: the child is an effect in flight, neither undone
nor complete. Resuming runs the turn's calls again (a completed effect returns its recorded result; a
``read_only`` or ``idempotent`` call runs again, and may raise again, then the rule above applies).

A ``StaleWriter`` or ``AppendConflict`` (including ``SessionBusy``) raised through a tool
(a built-in tool's append, a sub-agent's child session taken or held by another process) means this
process lost a session it writes: it is re-raised, nothing is recorded for the call (a side effect stays
in doubt, its completion unwritten) and the loop stops as fenced off. An ``ArtifactIntegrityError`` (a
tool read an artifact the store holds altered, e.g. ``page_in`` of a tampered archive) is re-raised too:
nothing is recorded for the call and the run stops with the error, as on any store failure. Any other
exception is an error result.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

from ..encoding import recordable_text
from ..errors import AppendConflict, ArtifactIntegrityError, StaleWriter
from ..events import Custom, Event, Rollbacked, RollbackReason, RunTerminal, ToolCompleted
from ..messages import ToolResult
from ..recorder import Recorder
from ..replay import KERNEL_NOTE
from .agent import Agent
from .ceiling import Ceiling, active
from .confine import runtime_problem
from .effects import Effects, Outcome, effect_key, intent_of
from .errors import FATAL_RESULT_PREFIX, FatalToolError
from .operations import Operation, deadline
from .planning import ToolSurface, gate_events
from .records import CallPlan
from .state import KernelState
from .subagents import AwaitingChildren, SubAgentTool, finished_children
from .tools import Tool, ToolArgumentsError, render_output

__all__ = ["IN_DOUBT_WARNING", "TurnContext", "execute_turn", "fatal_note", "in_doubt_gates"]


class TurnContext(Protocol):
    """What tool execution needs from the running activation."""

    agent: Agent
    state: KernelState
    recorder: Recorder
    effects: Effects
    session_id: str
    operation: Operation | None
    ceiling: Ceiling | None

    @property
    def surface(self) -> ToolSurface:
        """The tools offered this turn (the agent's plus the mounted capabilities)."""
        ...

    def append(self, *events: Event, status: str | None = None) -> None:
        """Durably append events in one transaction (and set the session status with them)."""
        ...

    def deadline_left_s(self) -> float | None:
        """Seconds left of the wall-clock budget, None when unlimited."""
        ...

    def settle_results(self, results: list[ToolResult]) -> tuple[list[ToolResult], list[Event]]:
        """The results to record (large ones paged out) and the context events that follow them."""
        ...


class _Fatal(Exception):
    """A call raised :class:`FatalToolError`; ``done`` gathers the results of the calls that finished, ``also``
    the other calls of its concurrent group that raised one too (they ran: each is answered with its own
    error, never ``not executed``)."""

    def __init__(self, tool_name: str, call_id: str, error: FatalToolError) -> None:
        super().__init__(tool_name)
        self.tool_name = tool_name
        self.call_id = call_id
        self.error = error
        self.done: list[ToolResult] = []
        self.also: list[_Fatal] = []

    @property
    def output(self) -> str:
        """The fatal call's result text (``FatalToolError: <error>``)."""
        return f"{FATAL_RESULT_PREFIX}{self.error}"


def _runs(plan: CallPlan, state: KernelState) -> bool:
    """Whether a plan is cleared to run (allowed, or asked and approved)."""
    if plan.decision == "allow":
        return True
    verdict = state.verdict("approval", plan.call_id)
    return plan.decision == "ask" and verdict is not None and verdict.approved


async def _invoke(tool: Tool, plan: CallPlan, ceiling: Ceiling | None) -> Outcome:
    if ceiling is not None:
        problem = runtime_problem(ceiling, plan, tool)
        if problem is not None:
            return Outcome(
                f"refused by grant policy {ceiling.policy.policy_id} when the call ran: {problem}", True
            )
    try:
        with active(ceiling):
            value = await tool.invoke(plan.arguments or {})
    except FatalToolError as exc:
        raise _Fatal(tool.name, plan.call_id, exc) from exc
    except (StaleWriter, AppendConflict):
        # This process lost a session it writes (this one, or a sub-agent's child the tool drives) to
        # another writer: the activation stops as fenced off, never a tool result nor a completed effect.
        raise
    except ArtifactIntegrityError:
        # The store handed back an artifact that is not what its handle names (page_in of an altered
        # archive): the store was tampered with, which no model can fix; the run stops with the error.
        raise
    except ToolArgumentsError as exc:
        return Outcome(recordable_text(str(exc)), True)
    except Exception as exc:
        return Outcome(recordable_text(f"{type(exc).__name__}: {exc}"), True)
    return Outcome(render_output(value))


async def _side_effect(ctx: TurnContext, tool: Tool, plan: CallPlan) -> Outcome:
    key = effect_key(ctx.session_id, ctx.state.turn, plan.call_id)
    verdict = ctx.state.verdict("effect_in_doubt", plan.call_id)
    if verdict is not None and not verdict.approved and ctx.effects.state(key) == "pending":
        outcome = Outcome(f"effect in doubt and not run again ({verdict.reason or 'denied'})", True)
        ctx.effects.complete(key, outcome)
        return outcome
    if verdict is not None and tool.reconcile is not None and ctx.effects.state(key) == "pending":
        # Approved to run again: a gate opened while its worker thread still ran (a wall-clock deadline)
        # may have seen the effect land since; its reconciler is asked first (done: its answer is the
        # completion, run_once returns it; not done: it runs).
        with active(ctx.ceiling):
            await ctx.effects.reconcile(tool, plan, key, ctx.state.turn)
    fatal: list[_Fatal] = []

    async def run() -> Outcome:
        try:
            return await _invoke(tool, plan, ctx.ceiling)
        except _Fatal as exc:
            fatal.append(exc)
            return Outcome(exc.output, True)

    outcome = await ctx.effects.run_once(key, intent_of(plan), run, detached=tool.threaded)
    if fatal:
        raise fatal[0]
    return outcome


async def _run_call(ctx: TurnContext, plan: CallPlan) -> ToolResult:
    outcome = await _outcome(ctx, plan)
    if ctx.operation is not None:
        ctx.operation.done.add(plan.call_id)
    return ToolResult(call_id=plan.call_id, output=outcome.output, is_error=outcome.is_error)


async def _outcome(ctx: TurnContext, plan: CallPlan) -> Outcome:
    if plan.decision == "invalid":
        return Outcome(plan.reason, True)
    if plan.decision == "deny":
        return Outcome(f"denied by policy: {plan.reason}", True)
    if not _runs(plan, ctx.state):
        verdict = ctx.state.verdict("approval", plan.call_id)
        who = verdict.responder if verdict else "user"
        return Outcome(f"denied by {who}: {verdict.reason if verdict else 'not approved'}", True)
    tool = ctx.surface.tool(plan.tool)
    if tool is None:
        return Outcome(f"unknown tool {plan.tool!r} (no longer offered)", True)
    if tool.effect == "side_effect":
        return await _side_effect(ctx, tool, plan)
    return await _invoke(tool, plan, ctx.ceiling)


def _groups(plans: Sequence[CallPlan], agent: Agent) -> list[list[CallPlan]]:
    """Consecutive ``read_only`` and sub-agent plans grouped (run concurrently); every other plan alone."""
    groups: list[list[CallPlan]] = []
    open_group = False
    for plan in plans:
        delegates = isinstance(agent.tool(plan.tool), SubAgentTool) and plan.decision != "invalid"
        concurrent = agent.parallel_read_only and (plan.effect == "read_only" or delegates)
        if concurrent and open_group:
            groups[-1].append(plan)
        else:
            groups.append([plan])
        open_group = concurrent
    return groups


async def _run_group(ctx: TurnContext, group: list[CallPlan]) -> list[ToolResult]:
    """The group's results in call order.

    Raises:
        AwaitingChildren: a delegating call's child stopped unfinished (wins over a fatal error: module docs).
        _Fatal: a call raised ``FatalToolError`` (the first in call order); its ``done`` holds the group's
            finished results, its ``also`` the group's other calls that raised one.
        BaseException: any other exception of a call, the first in call order.
    """
    if len(group) == 1:
        return [await _run_call(ctx, group[0])]
    answers = await asyncio.gather(*(_run_call(ctx, p) for p in group), return_exceptions=True)
    failures = [a for a in answers if isinstance(a, BaseException)]
    first = next((f for f in failures if not isinstance(f, _Fatal | AwaitingChildren)), None)
    first = first or next((f for f in failures if isinstance(f, AwaitingChildren)), None)
    if first is not None:
        raise first
    results = [a for a in answers if isinstance(a, ToolResult)]
    fatals = [f for f in failures if isinstance(f, _Fatal)]
    if fatals:
        fatal, *also = fatals
        fatal.done, fatal.also = results, also
        raise fatal
    return results


async def _in_doubt(ctx: TurnContext, plans: Sequence[CallPlan]) -> list[CallPlan]:
    """Settle in-doubt effects with their reconcilers; returns the ones a human must decide."""
    undecided: list[CallPlan] = []
    for plan in plans:
        tool = ctx.surface.tool(plan.tool)
        if tool is None or tool.effect != "side_effect" or not _runs(plan, ctx.state):
            continue
        key = effect_key(ctx.session_id, ctx.state.turn, plan.call_id)
        if ctx.effects.state(key) != "pending" or ctx.state.verdict("effect_in_doubt", plan.call_id):
            continue
        with active(ctx.ceiling):
            settled = await ctx.effects.reconcile(tool, plan, key, ctx.state.turn)
        if settled is None:
            undecided.append(plan)
    return undecided


IN_DOUBT_WARNING = (
    "it may still be finishing outside this process (a remote MCP server, a service it called): "
    "check its effect first"
)
"""Said with every in-doubt call (its gate's reason, the CLI's ``resume``): the kernel's own tools and the
stdio MCP servers it starts die with it (:mod:`flightlog.kernel.tether`, Linux), but what a call reached
elsewhere may complete after the kernel stopped, so a decision taken at once can race it."""


def in_doubt_gates(session_id: str, turn: int, plans: Sequence[CallPlan], why: str = "") -> list[Event]:
    """``tool_gated`` + ``permission_requested`` per in-doubt call of ``plans``, then
    ``suspended(turn, reason="effect_in_doubt", pending_calls)``: what leaves the calls to a human (``flightlog
    pending`` lists them; approve runs the effect again, deny marks it failed). ``why`` is added to each
    reason (e.g. that the wall clock ran out while it ran)."""
    reasons = [
        f"effect_in_doubt: intent {effect_key(session_id, turn, p.call_id)} recorded without completion"
        f"{why}; {IN_DOUBT_WARNING}; approve to run it again, deny to mark it failed"
        for p in plans
    ]
    return gate_events(turn, plans, "effect_in_doubt", reasons)


def _suspend_in_doubt(ctx: TurnContext, plans: Sequence[CallPlan]) -> None:
    ctx.append(*in_doubt_gates(ctx.session_id, ctx.state.turn, plans), status="suspended")


def _effects_done(ctx: TurnContext, plans: Sequence[CallPlan], fatal: _Fatal) -> bool:
    """Whether a ``side_effect`` call of the turn other than the fatal one has a recorded completion."""
    for plan in plans:
        tool = ctx.surface.tool(plan.tool)
        if plan.call_id == fatal.call_id or tool is None or tool.effect != "side_effect":
            continue
        if ctx.effects.state(effect_key(ctx.session_id, ctx.state.turn, plan.call_id)) == "completed":
            return True
    return False


def _close_out(plans: Sequence[CallPlan], done: Sequence[ToolResult], fatal: _Fatal) -> list[ToolResult]:
    """Every call's result for a turn committed after a fatal error (module docs), in call order: the
    finished ones as they are, each call that raised ``FatalToolError`` (the fatal one and those of its
    concurrent group, which ran too) ``FatalToolError: <its error>``, the others (never started)
    ``not executed``."""
    finished = {result.call_id: result for result in done}
    failed = {raised.call_id: raised.output for raised in (fatal, *fatal.also)}
    stopped = (
        f"not executed: `{fatal.tool_name}` failed fatally ({fatal.error}) and stopped this turn before this "
        "call ran; it did not take effect"
    )
    results: list[ToolResult] = []
    for plan in plans:
        if plan.call_id in finished:
            results.append(finished[plan.call_id])
        elif plan.call_id in failed:
            results.append(ToolResult(call_id=plan.call_id, output=failed[plan.call_id], is_error=True))
        else:
            results.append(ToolResult(call_id=plan.call_id, output=stopped, is_error=True))
    return results


def fatal_note(tool_name: str, error: str) -> str:
    """What the model is told before a turn rolled back for a ``FatalToolError`` is taken again (module
    docs): the note is the text of a ``Custom("kernel_note")`` recorded after the ``rollbacked``.

    Args:
        tool_name: The tool that raised.
        error: The error's text, verbatim.

    Source: upstream's concise model-facing note for a ``FatalToolError`` rollback (deepstrike
    ``scheduler/rollback.rs`` ``build_rollback_note``), pushed as a user message before the retried model
    call (``scheduler/state_machine/mod.rs``, ``LoopEvent::ToolResults``).
    """
    return f"The previous step failed (`{tool_name}`: {error}). Please try a different approach."


def _on_fatal(ctx: TurnContext, plans: Sequence[CallPlan], fatal: _Fatal) -> None:
    state = ctx.state
    retry = ctx.agent.on_fatal_tool_error == "retry" and state.fatal_retries + 1 <= ctx.agent.max_retries
    terminal = RunTerminal(reason="failed", turns_used=state.turn, total_tokens=state.tokens_used)
    if _effects_done(ctx, plans, fatal):
        results, context_events = ctx.settle_results(_close_out(plans, fatal.done, fatal))
        ending = () if retry else (terminal,)
        ctx.append(
            ToolCompleted(turn=state.turn, results=results),
            *context_events,
            *finished_children(ctx.recorder.store, state),
            *ending,
            status=None if retry else "failed",
        )
        return
    reason = RollbackReason.FatalToolError(tool_name=fatal.tool_name, error=str(fatal.error))
    rollback = Rollbacked(turn=state.turn, checkpoint_history_len=state.checkpoint_len, reason=reason)
    if retry:
        note = {"turn": state.turn, "text": fatal_note(fatal.tool_name, str(fatal.error))}
        ctx.append(rollback, Custom(custom_kind=KERNEL_NOTE, payload=note))
        return
    ctx.append(rollback, terminal, status="failed")


async def execute_turn(ctx: TurnContext, run_id: str) -> None:
    """Execute the planned calls of the current turn (see the module docs).

    Raises:
        DeadlineHit: the wall-clock budget ran out (the caller records it).
        asyncio.CancelledError: the run was cancelled (the caller records it).
    """
    state = ctx.state
    plans = list(state.plans)
    undecided = await _in_doubt(ctx, plans)
    if undecided:
        _suspend_in_doubt(ctx, undecided)
        return
    ctx.operation = Operation.of(f"{run_id}:turn-{state.turn}:tools", (p.call_id for p in plans))
    results: list[ToolResult] = []
    try:
        async with deadline(ctx.deadline_left_s()):
            for group in _groups(plans, ctx.agent):
                results.extend(await _run_group(ctx, group))
    except _Fatal as fatal:
        fatal.done = [*results, *fatal.done]
        _on_fatal(ctx, plans, fatal)
        return
    except AwaitingChildren as waiting:
        ctx.append(waiting.suspended(state.turn, plans, ctx.effects, ctx.session_id), status="suspended")
        return
    results, context_events = ctx.settle_results(results)
    suspends = any(event.kind == "suspended" for event in context_events)  # an async memory query
    ctx.append(
        ToolCompleted(turn=state.turn, results=results),
        *context_events,
        *finished_children(ctx.recorder.store, state),
        status="suspended" if suspends else None,
    )
    ctx.operation = None
