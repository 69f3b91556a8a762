"""Exactly-once side effects: the intent is durable before the tool runs, the result after it.

Protocol for a ``side_effect`` call (key ``f"{session_id}:{turn}:{call_id}"``, intent
``{"tool": name, "arguments": repaired JSON arguments}``):

1. ``Recorder.record_intent(key, intent)``: the effect row and ``Custom("external_effect_intent")`` commit
   in one transaction *before* the tool runs.
2. The tool runs.
3. ``Recorder.complete_effect(key, {"output", "is_error"})``: the result and
   ``Custom("external_effect_completed")`` commit in one transaction. A tool that raises has still
   finished (it says it failed), so its error result is the completion.

When the same call comes round again (a resume after a crash, a cancel, a suspension):

* **completed**: the recorded result is returned; the tool does not run again.
* **pending** (intent without completion, *in doubt*): the tool may or may not have acted. Its
  ``reconcile(intent)`` decides: a result means done (recorded as the completion, plus
  ``Custom("effect_reconciled", outcome="completed")``); None means not done
  (``effect_reconciled``, ``outcome="not_done"``) and the call runs. Without a reconciler the run
  suspends (``suspended(reason="effect_in_doubt")``) and a human decides: approve runs it again, deny marks
  it failed. Nothing is ever silently re-run.

While a side-effect tool runs, and while its ``reconcile`` runs, :func:`current_effect_key` returns the
call's key: stable across crashes and resumes and unique per call, so the tool can stamp it on what it
does (an idempotency key, a row id) and ``reconcile`` can look exactly that up, even when the same tool is
called with the same arguments in another turn or session.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal

from ..events import Custom
from ..recorder import Recorder
from ..testing.crashpoints import crash_point
from .records import EFFECT_RECONCILED, CallPlan
from .tools import Tool, render_output

__all__ = ["EffectState", "Effects", "Outcome", "current_effect_key", "effect_key", "intent_of"]

EffectState = Literal["none", "pending", "completed"]

_CURRENT_KEY: ContextVar[str | None] = ContextVar("flightlog_effect_key", default=None)


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
    """The exactly-once protocol over one session's recorder (see the module docs)."""

    def __init__(self, recorder: Recorder) -> None:
        self._recorder = recorder
        self._none: set[str] = set()  # keys seen without a row; we are the only writer (epoch fencing)

    def state(self, key: str) -> EffectState:
        """``none`` (never started), ``pending`` (in doubt when no run of this process owns it) or
        ``completed``."""
        if key in self._none:
            return "none"
        record = self._recorder.effect(key)
        if record is None:
            self._none.add(key)
            return "none"
        return "completed" if record.status == "completed" else "pending"

    def recorded(self, key: str) -> Outcome | None:
        """The recorded result of a completed effect, else None."""
        if key in self._none:
            return None
        record = self._recorder.effect(key)
        if record is None or record.status != "completed":
            return None
        return Outcome.from_json(record.result_json)

    async def run_once(
        self, key: str, intent: dict[str, Any], run: Callable[[], Awaitable[Outcome]]
    ) -> Outcome:
        """Run an effect exactly once: recorded result if completed, else intent → ``run()`` → completion.

        Also used to re-run an in-doubt effect a human or ``reconcile`` released: the intent is already
        recorded with the same bytes, so recording it again is a no-op.

        Raises:
            EffectConflict: ``key`` was recorded with another intent.
            BaseException: whatever ``run`` raises that is not an ordinary outcome (cancellation, a
                fatal tool error after its completion was recorded by the caller).
        """
        done = self.recorded(key)
        if done is not None:
            return done
        self._recorder.checkpoint()  # with a notary: a signed checkpoint before the world changes
        self._recorder.record_intent(key, intent)
        self._none.discard(key)
        crash_point("effect.intent")  # test-only fault injection (flightlog.testing.crashpoints)
        token = _CURRENT_KEY.set(key)
        try:
            outcome = await run()
        finally:
            _CURRENT_KEY.reset(token)
        crash_point("effect.ran")
        self.complete(key, outcome)
        return outcome

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
