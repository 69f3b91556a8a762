"""Exactly-once side effects: the intent is durable before the tool runs, the result after it.

Protocol for a ``side_effect`` call (key ``f"{session_id}:{turn}:{call_id}"``, intent
``{"tool": name, "arguments": repaired JSON arguments}``):

1. ``Recorder.record_intent(key, intent, holder=...)``: the effect row and
   ``Custom("external_effect_intent")``, naming the process about to run the tool
   (``holder``: :class:`~flightlog.runs.host.ProcessId`, host, pid and start time; not part of the intent
   nor of its hash), commit in one transaction *before* the tool runs; an in-doubt effect run again (a
   reconcile said not done, a human approved) keeps its intent and row and records
   ``Custom("external_effect_holder", {key, holder})`` instead when another process runs it. A resume reads
   the holder from the verified ledger to know whether the effect may still be running
   (:mod:`flightlog.kernel.takeover`); with a signed checkpoint covering the intent when the
   recorder has a notary (``Recorder.checkpoint()``): the intent is anchored before the world changes,
   so a process killed while the tool runs leaves no unsigned intent to rewrite.
2. The tool runs.
3. ``Recorder.complete_effect(key, {"output", "is_error"})``: the result and
   ``Custom("external_effect_completed")`` commit in one transaction. A tool that raises has still
   finished (it says it failed), so its error result is the completion.

What an effect did is decided from the run's ledger (the fold of its events,
:class:`~flightlog.integrity.effects.EffectFold` in :class:`~flightlog.kernel.state.KernelState`), never from
the ``external_effects`` row, which no hash covers: the row is a cache that every decision checks against
the fold first (:func:`~flightlog.integrity.effects.effect_problem`), raising ``LedgerIntegrityError``
naming the key and the seq when they disagree (a row that says completed with a result the ledger does
not record is never fed to the model; a deleted row never lets the effect run again). A resume has
compared every row with the ledger already (``require_intact``: :mod:`flightlog.integrity.effects`).

When the same call comes round again (a resume after a crash, a cancel, a suspension):

* **completed**: the recorded result is returned; the tool does not run again.
* **pending** (intent without completion, *in doubt*): the tool may or may not have acted. Its
  ``reconcile(intent)`` decides: a result means done (recorded as the completion, plus
  ``Custom("effect_reconciled", outcome="completed")``); None means not done
  (``effect_reconciled``, ``outcome="not_done"``) and the call runs. Without a reconciler the run
  suspends (``suspended(reason="effect_in_doubt")``) and a human decides: approve runs it again (asking its
  reconciler first when it has one: a deadline gates a call whose thread may land it later), deny marks it
  failed. Nothing is ever silently re-run.

**Worker threads.** A sync tool run in a worker thread cannot be stopped once started. Its effect is run
*detached* (``run_once(..., detached=True)``): in a task of its own that a cancellation of the turn does
not reach, which records the completion when the thread returns. On a wall-clock deadline the kernel waits
a bounded grace for such effects (:meth:`Effects.settle_in_flight`) and records their completions before
it ends the run; what is still running then is abandoned in doubt (its task cancelled, its intent without
completion) and the run is suspended ``effect_in_doubt`` rather than sealed (:mod:`flightlog.kernel.loop`).
The thread runs on: the activation's live record is kept until it returns (:mod:`flightlog.kernel.holding`),
so a resume waits for it before it reconciles or runs the effect.

While a side-effect tool runs, and while its ``reconcile`` runs, :func:`current_effect_key` returns the
call's key: stable across crashes and resumes and unique per call, so the tool can stamp it on what it
does (an idempotency key, a row id) and ``reconcile`` can look exactly that up, even when the same tool is
called with the same arguments in another turn or session.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import AppendConflict, Divergence, StaleWriter
from ..events import Custom
from ..integrity.effects import EFFECT_HOLDER, EFFECT_MISMATCH, EffectFold, effect_problem, effect_refusal
from ..recorder import Recorder, intent_hash
from ..runs.host import this_process
from ..store.base import EffectRecord
from ..testing.crashpoints import crash_point
from .records import EFFECT_RECONCILED, CallPlan
from .running import CURRENT_KEY, claim, release
from .tools import Tool, render_output

__all__ = ["EffectState", "Effects", "Outcome", "current_effect_key", "effect_key", "intent_of"]

EffectState = Literal["none", "pending", "completed"]

_CURRENT_KEY = CURRENT_KEY


def current_effect_key() -> str | None:
    """The key of the side effect whose tool or ``reconcile`` is running (see the module docs), else None.

    Sync tools run in a worker thread see it too (``asyncio.to_thread`` copies the context).
    """
    return _CURRENT_KEY.get()


@dataclass(frozen=True)
class Outcome:
    """What one call produced: the text the model sees and whether it is an error."""

    output: str
    is_error: bool = False

    def to_wire(self) -> dict[str, Any]:
        """The completion payload stored for a side effect: ``{"output", "is_error"}``."""
        return {"output": self.output, "is_error": self.is_error}

    @classmethod
    def from_json(cls, text: str | None) -> Outcome:
        """Read a stored completion (tolerates a bare JSON value: rendered as output)."""
        value = json.loads(text) if text else None
        if isinstance(value, dict) and "output" in value:
            return cls(str(value["output"]), bool(value.get("is_error", False)))
        return cls(render_output(value))


def effect_key(session_id: str, turn: int, call_id: str) -> str:
    """The idempotency key of a call's effect: ``"{session_id}:{turn}:{call_id}"``."""
    return f"{session_id}:{turn}:{call_id}"


def intent_of(plan: CallPlan) -> dict[str, Any]:
    """The recorded intent of a planned call: ``{"tool": name, "arguments": {...}}``."""
    return {"tool": plan.tool, "arguments": plan.arguments or {}}


class Effects:
    """The exactly-once protocol over one session's recorder (see the module docs).

    Args:
        recorder: The session's recorder (this process's writer authority).
        fold: The session's effects as its ledger records them, kept current with every commit (the
            activation's :attr:`KernelState.effects <flightlog.kernel.state.KernelState>`).
    """

    def __init__(self, recorder: Recorder, fold: EffectFold) -> None:
        self._recorder = recorder
        self._fold = fold
        self._none: set[str] = set()  # keys checked without intent nor row; we are the only writer (epochs)
        self._in_flight: set[asyncio.Task[Outcome]] = set()  # detached effects still running

    def state(self, key: str) -> EffectState:
        """``none`` (never started), ``pending`` (in doubt when no run of this process owns it) or
        ``completed``, as the ledger records it.

        Raises:
            LedgerIntegrityError: the effect's row contradicts the ledger (``effect_mismatch``, or
                ``intent_hash_mismatch``: the ledger's intent does not hash to its ``intent_hash``), naming
                the key and the seq.
        """
        return self._state(key)[0]

    def recorded(self, key: str) -> Outcome | None:
        """The recorded result of an effect the ledger records as completed, else None (read from its row,
        once the row is checked to hold the result the ledger's completion records).

        Raises:
            LedgerIntegrityError: as :meth:`state`.
        """
        state, record = self._state(key)
        if state != "completed" or record is None:  # a completed effect's checked row is never None
            return None
        return Outcome.from_json(record.result_json)

    def _state(self, key: str) -> tuple[EffectState, EffectRecord | None]:
        """The effect's state from the ledger's fold, and its row once checked against the fold (one read)."""
        entry = self._fold.effects.get(key)
        if entry is None and key in self._none:
            return "none", None
        record = self._recorder.effect(key)
        problem = effect_problem(key, entry, record)
        if problem is not None:
            raise effect_refusal(self._recorder.session_id, problem, self._recorder.next_seq - 1)
        if entry is None:
            self._none.add(key)
            return "none", None
        return ("completed" if entry.completed else "pending"), record

    def _same_intent(self, key: str, intent: dict[str, Any]) -> None:
        """Refuse to run ``intent`` under ``key`` when the ledger records another intent for it (an intent
        rewritten after its call was planned)."""
        entry = self._fold.effects.get(key)
        if entry is not None and entry.intent_digest != intent_hash(intent):
            detail = (
                f"effect {key}: the call's intent (from its plan) hashes to {intent_hash(intent)[:16]}..., "
                f"the ledger's intent at seq {entry.intent_seq} to {entry.intent_digest[:16]}...: not run"
            )
            raise effect_refusal(
                self._recorder.session_id,
                Divergence(entry.intent_seq, EFFECT_MISMATCH, detail),
                self._recorder.next_seq - 1,
            )

    async def run_once(
        self,
        key: str,
        intent: dict[str, Any],
        run: Callable[[], Awaitable[Outcome]],
        *,
        detached: bool = False,
    ) -> Outcome:
        """Run an effect exactly once: recorded result if completed, else intent → ``run()`` → completion.

        Also used to re-run an in-doubt effect a human or ``reconcile`` released: the intent is already
        recorded with the same bytes, so recording it again is a no-op; an ``external_effect_holder`` naming
        this process is recorded instead when the ledger names another holder (module docs).

        The key counts as running in this process (:mod:`flightlog.kernel.running`) from before its intent
        is recorded until ``run`` ends (a worker thread's until the thread returns).

        Args:
            key: The effect's idempotency key (:func:`effect_key`).
            intent: Its intent (:func:`intent_of`).
            run: Performs the effect.
            detached: ``run`` cannot be stopped once started (a worker thread): it runs, and its completion
                is recorded, in a task of its own that cancelling the caller does not reach (see the
                module docs and :meth:`settle_in_flight`).

        Raises:
            EffectConflict: ``key`` was recorded with another intent.
            LedgerIntegrityError: the effect's row contradicts the ledger, or the ledger records another
                intent for ``key`` (:meth:`state`): nothing runs.
            BaseException: whatever ``run`` raises that is not an ordinary outcome (cancellation, a
                fatal tool error after its completion was recorded by the caller).
        """
        done = self.recorded(key)
        if done is not None:
            return done
        self._same_intent(key, intent)
        claim(key)  # running here before the ledger names this process; released when run ends (_finish)
        try:
            self._record_intent(key, intent)
            self._none.discard(key)
            crash_point("effect.intent")  # test-only fault injection (flightlog.testing.crashpoints)
        except BaseException:
            release(key)
            raise
        token = _CURRENT_KEY.set(key)
        try:
            if detached:  # the task copies this context: the tool sees its key
                task = asyncio.create_task(self._finish(key, run), name=key)
                self._in_flight.add(task)
                task.add_done_callback(self._in_flight.discard)
                return await asyncio.shield(task)
            return await self._finish(key, run)
        finally:
            _CURRENT_KEY.reset(token)

    def _record_intent(self, key: str, intent: dict[str, Any]) -> None:
        """Record ``intent`` naming this process as its holder, or (recorded already: a re-run) an
        ``external_effect_holder`` when the ledger names another process (module docs)."""
        holder = this_process()
        entry = self._fold.effects.get(key)
        with self._recorder.atomic():  # one transaction: the intent is never durable unsigned
            created = self._recorder.record_intent(key, intent, holder=holder.to_wire())
            if not created and (entry is None or entry.holder != holder):
                self._recorder.append(
                    Custom(custom_kind=EFFECT_HOLDER, payload={"key": key, "holder": holder.to_wire()})
                )
            self._recorder.checkpoint()  # with a notary: a signed checkpoint over it, before the world changes

    async def _finish(self, key: str, run: Callable[[], Awaitable[Outcome]]) -> Outcome:
        """Run the effect and record its completion; ``key`` stops counting as running here (claimed by
        :meth:`run_once`) once ``run`` ends."""
        try:
            outcome = await run()
        finally:
            release(key)
        crash_point("effect.ran")
        self.complete(key, outcome)
        return outcome

    @property
    def in_flight(self) -> int:
        """How many detached effects are still running."""
        return len(self._in_flight)

    async def settle_in_flight(self, grace_s: float) -> list[str]:
        """Wait up to ``grace_s`` seconds for the detached effects still running (their completions are
        recorded as they return), then abandon the rest: their tasks are cancelled, so nothing of theirs is
        recorded afterwards (the thread itself runs on: the effect stays in doubt, intent without
        completion).

        Returns:
            The keys of the effects abandoned in doubt (empty when all finished in time).

        Raises:
            StaleWriter, AppendConflict: recording a completion found another writer (re-raised: this
                process lost the session). Any other error of a finished task was already its outcome.
        """
        tasks = set(self._in_flight)
        if not tasks:
            return []
        done, pending = await asyncio.wait(tasks, timeout=grace_s)
        for task in pending:
            task.cancel()
        for task in done:
            error = None if task.cancelled() else task.exception()
            if isinstance(error, (StaleWriter, AppendConflict)):
                raise error
        return sorted(task.get_name() for task in pending)

    def abandon_in_flight(self) -> None:
        """Cancel the detached effects still running (an activation that stops without waiting for them: a
        cancellation, a fenced-off writer): nothing of theirs is recorded afterwards; they stay in doubt."""
        for task in list(self._in_flight):
            task.cancel()

    def complete(self, key: str, outcome: Outcome) -> None:
        """Record the completion of ``key`` (once; a repeat with the same bytes is a no-op)."""
        self._recorder.complete_effect(key, outcome.to_wire())

    async def reconcile(self, tool: Tool, plan: CallPlan, key: str, turn: int) -> bool | None:
        """Ask ``tool.reconcile`` about an in-doubt effect and record its answer.

        Returns:
            True when it was done (its result is now the completion), False when it was not (the caller
            runs it), None when the tool has no reconciler (a human must decide).
        """
        if tool.reconcile is None:
            return None
        token = _CURRENT_KEY.set(key)
        try:
            result = await tool.check_intent(intent_of(plan))
        finally:
            _CURRENT_KEY.reset(token)
        outcome = "not_done" if result is None else "completed"
        payload = {"turn": turn, "call_id": plan.call_id, "key": key, "outcome": outcome}
        with self._recorder.atomic():
            self._recorder.append(Custom(custom_kind=EFFECT_RECONCILED, payload=payload))
            if result is not None:
                self.complete(key, Outcome(render_output(result)))
        return result is not None
