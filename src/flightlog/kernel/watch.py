"""What the kernel does about an ``entropy_alert``: ask a human, compact, stop (:mod:`flightlog.kernel.entropy`).

Run at the start of the turn after the alert, before the model call, in one transaction each:

* ``ask``: ``Custom("entropy_action", {turn, action: "ask"})``, ``tool_gated(turn, call_id="entropy:<turn>",
  tool="entropy_watch", reason)``, ``permission_requested`` (arguments: the sample's terms as JSON) and
  ``suspended(turn, reason="entropy_alert", pending_calls=["entropy:<turn>"])``; the session is ``suspended``.
  ``flightlog pending`` lists the gate, ``approve``/``deny`` decide it (:mod:`flightlog.kernel.approvals`);
  on resume, approved continues with the next turn, denied ends the run (``stop`` below, ``by: "operator"``).
* ``compact``: ``Custom("entropy_action", {turn, action: "compact", archived})`` and, when the history has
  units to archive, ``Custom("compaction_started", plan)`` with trigger ``entropy`` (the summary call follows,
  :mod:`flightlog.kernel.compaction`).
* ``stop``: ``Custom("entropy_action", {turn, action: "stop"})`` and ``run_terminal(reason="no_progress")``
  (upstream's label for a run that looped without progress); the session is ``failed``.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from ..events import Custom, EntropySample, Event, PermissionRequested, RunTerminal, Suspended, ToolGated
from .compaction import COMPACTION_STARTED, Plan
from .entropy import ENTROPY_ACTION, ENTROPY_GATE_PREFIX, EntropyTracker, EntropyWatch
from .state import ENTROPY_SUSPENSION, KernelState

__all__ = ["WATCH_TOOL", "WatchContext", "watch_events"]

WATCH_TOOL = "entropy_watch"
"""The ``tool`` name of an ``ask`` gate (what ``flightlog pending`` shows)."""


class WatchContext(Protocol):
    """What the action needs from the running activation."""

    state: KernelState
    entropy: EntropyTracker

    def compaction_plan(self, turn: int) -> Plan | None:
        """A forced compaction plan before ``turn`` (trigger ``entropy``), None when nothing can go."""
        ...


def _stop(state: KernelState, turn: int, by: str) -> list[Event]:
    action = Custom(custom_kind=ENTROPY_ACTION, payload={"turn": turn, "action": "stop", "by": by})
    return [action, RunTerminal(reason="no_progress", turns_used=state.turn, total_tokens=state.tokens_used)]


def _sample(state: KernelState, turn: int) -> EntropySample | None:
    for _seq, event in reversed(state.events):
        if isinstance(event, EntropySample) and event.turn == turn:
            return event
    return None


def _ask(state: KernelState, turn: int, threshold: float) -> list[Event]:
    gate = f"{ENTROPY_GATE_PREFIX}{turn}"
    sample = _sample(state, turn)
    terms: dict[str, Any] = sample.to_wire() if sample is not None else {"turn": turn}
    terms.pop("kind", None)
    score = terms.get("score", 0.0)
    reason = (
        f"entropy {score:.2f} >= {threshold:.2f} at turn {turn}: approve to continue, deny to stop the run"
    )
    return [
        Custom(custom_kind=ENTROPY_ACTION, payload={"turn": turn, "action": "ask"}),
        ToolGated(turn=turn, call_id=gate, tool=WATCH_TOOL, reason=reason),
        PermissionRequested(
            turn=turn, tool=WATCH_TOOL, arguments=json.dumps(terms, sort_keys=True), reason=reason
        ),
        Suspended(turn=turn, reason=ENTROPY_SUSPENSION, pending_calls=[gate]),
    ]


def watch_events(ctx: WatchContext, watch: EntropyWatch | None) -> tuple[list[Event], str | None]:
    """The events (and session status) of the action an alert still waits for; ``([], None)`` when none."""
    tracker, state = ctx.entropy, ctx.state
    if tracker.denied is not None:
        return _stop(state, tracker.denied, "operator"), "failed"
    turn = tracker.action_due
    if turn is None or watch is None or watch.action == "none":
        return [], None
    if watch.action == "stop":
        return _stop(state, turn, "watch"), "failed"
    if watch.action == "ask":
        return _ask(state, turn, watch.threshold), "suspended"
    plan = ctx.compaction_plan(turn)
    archived = plan.message_count if plan is not None else 0
    events: list[Event] = [
        Custom(custom_kind=ENTROPY_ACTION, payload={"turn": turn, "action": "compact", "archived": archived})
    ]
    if plan is not None:
        events.append(Custom(custom_kind=COMPACTION_STARTED, payload=plan.to_wire()))
    return events, None
