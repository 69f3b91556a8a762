"""The entropy watch: one disorder sample per completed turn, folded from the ledger alone.

"Entropy" is session *disorder*: a run churning without converging (repeating itself, failing tool calls,
rolling turns back, running out of context headroom). The terms, names, weights and defaults are upstream's
(deepstrike ``scheduler/entropy.rs``, UPSTREAM.md §4), so a sample recomputes the same number:

``turn``
    The completed turn: the ``turn`` of the ``tool_completed`` the sample follows. One sample per
    ``tool_completed``, recorded in its transaction (after its ``page_out``/``context_renewed``); a turn that
    rolls back (``rollbacked``) has no ``tool_completed`` and no sample.
``repeat_pressure``
    ``clamp((streak - 1) / DENY_AFTER, 0, 1)`` with ``DENY_AFTER = 5`` (upstream's RepeatFuse deny rung).
    ``streak`` counts consecutive ``tool_requested`` events (every one, rolled-back turns included: a rollback
    does not launder the evidence) with the same *turn signature*: the calls whose name is not one of the
    built-in context tools (``page_in``, ``pin``, ``renew_context``), each rendered ``name`` or
    ``name(<args>)``, joined by ``", "``. ``<args>`` is the call's arguments as compact JSON (keys sorted,
    separators ``,``/``:``, non-ASCII kept; arguments that are not JSON, or hold a lone surrogate, which
    upstream's serde_json refuses, are used as written), empty for
    ``null``/``{}``, and when longer than 48 characters: its first 48 characters, ``…#`` and 8 hex digits of
    FNV-1a 64 over the UTF-8 bytes folded to 32 bits (``h ^ (h >> 32)``). A request of only built-in calls
    neither advances nor resets the streak; a different signature restarts it at 1.
``failure_rate``
    Σ error results / Σ results over the window (0 when it holds no result). A result is an error when its
    ``is_error`` is true (denied, invalid and failed calls).
``rollbacks_in_window``
    The ``rollbacked`` events (any reason) since the ``tool_completed`` before the window's oldest turn: each
    lands in the next completed turn's slot.
``window_turns``
    Completed turns in the window: the latest ``tool_completed`` events, at most ``WINDOW_TURNS = 8``.
``rho``
    Context pressure in [0, 1]: the ``context.fill_ratio`` of the latest ``prompt_program_invoked`` of actor
    ``kernel`` before the sample (the fill of that turn's model request), clamped; 0 when the window of the
    model is unknown (no ``fill_ratio``). Upstream reads the pressure after the boundary's eviction pass; the
    ledger records the fill per request, so this is the freshest pressure it holds.
``score``
    ``0.35·repeat_pressure + 0.30·failure_rate + 0.20·rho + 0.15·min(1, rollbacks_in_window / 3)``.

The watch (:class:`EntropyWatch`, opt-in through ``Agent.entropy_watch``) records ``entropy_alert(turn, score,
threshold)`` in the sample's transaction when ``score >= threshold``, the watch is armed, and no alert was
recorded in the last ``cooldown_turns`` turns (``turn - last_alert_turn >= cooldown_turns``). An alert disarms
the watch; a later sample with ``score < threshold - hysteresis`` re-arms it. Defaults: threshold 0.65,
hysteresis 0.1, cooldown 4 turns. What upstream leaves to the host, the kernel does at the start of the next turn
(``action``): ``ask`` suspends the run on a gate ``entropy:<turn>`` that ``flightlog pending``/``approve``/``deny``
handle (approve: continue; deny: the run ends ``run_terminal(reason="no_progress")``); ``compact`` archives the
history as a context compaction would (trigger ``entropy``) and continues; ``stop`` ends the run
``run_terminal(reason="no_progress")``; ``none`` only records. Each action is recorded as
``Custom("entropy_action", {turn, action})`` with what it does.

Pure: a fold over decoded events, no I/O.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..events import (
    Custom,
    EntropyAlert,
    EntropySample,
    Rollbacked,
    SessionEvent,
    ToolCompleted,
    ToolRequested,
)
from ..messages import ToolCall, ToolResult

__all__ = [
    "DENY_AFTER",
    "ENTROPY_ACTION",
    "ENTROPY_GATE_PREFIX",
    "META_TOOLS",
    "ROLLBACK_SATURATION",
    "WEIGHTS",
    "WINDOW_TURNS",
    "EntropyTracker",
    "EntropyWatch",
    "WatchAction",
    "compact_args",
    "entropy_score",
    "recompute_samples",
    "turn_signature",
]

WINDOW_TURNS = 8
"""Completed turns in the sliding window (upstream ``ENTROPY_WINDOW_TURNS``)."""

ROLLBACK_SATURATION = 3.0
"""Rollbacks in the window that read as fully disordered on that term."""

DENY_AFTER = 5
"""Upstream RepeatFuse ``deny_after``: the streak length (minus one) at which repeat pressure saturates."""

WEIGHTS = (0.35, 0.30, 0.20, 0.15)
"""Weights of repeat pressure, failure rate, rho and the rollback term, in that order."""

META_TOOLS = frozenset({"page_in", "pin", "renew_context"})
"""Built-in context tools left out of the turn signature (control-plane calls are not task progress)."""

ENTROPY_ACTION = "entropy_action"
"""``Custom`` kind recording what the kernel did about an alert: ``{turn, action}``."""

ENTROPY_GATE_PREFIX = "entropy:"
"""Gate ids of the ``ask`` action are ``entropy:<turn>`` (what ``flightlog approve`` takes)."""

WatchAction = Literal["ask", "compact", "stop", "none"]
"""What the kernel does about an alert (:class:`EntropyWatch`)."""

_ARGS_MAX = 48


@dataclass(frozen=True)
class EntropyWatch:
    """The opt-in entropy alert (upstream ``EntropyWatchConfig``) and what the kernel does when it trips.

    Attributes:
        threshold: Alert when a sample's score is at least this (0..1).
        hysteresis: Re-arm only after a score below ``threshold - hysteresis``.
        cooldown_turns: Minimum completed turns between two alerts.
        action: ``ask`` (suspend for a human: approve continues, deny stops), ``compact`` (archive the
            history and continue), ``stop`` (end the run, ``no_progress``), ``none`` (record only).
    """

    threshold: float = 0.65
    hysteresis: float = 0.1
    cooldown_turns: int = 4
    action: WatchAction = "ask"

    def __post_init__(self) -> None:
        if not 0.0 <= self.threshold <= 1.0 or self.hysteresis < 0 or self.cooldown_turns < 0:
            raise ValueError(
                "entropy_watch: threshold must be in [0, 1], hysteresis and cooldown_turns >= 0 "
                f"(got {self.threshold}, {self.hysteresis}, {self.cooldown_turns})"
            )
        if self.action not in ("ask", "compact", "stop", "none"):
            raise ValueError(f"entropy_watch.action must be ask, compact, stop or none, not {self.action!r}")


def entropy_score(repeat_pressure: float, failure_rate: float, rho: float, rollbacks_in_window: int) -> float:
    """The canonical fold of the terms (module docs); every input already in range except the rollbacks."""
    rollback_term = min(1.0, max(0.0, rollbacks_in_window / ROLLBACK_SATURATION))
    w_repeat, w_fail, w_rho, w_roll = WEIGHTS
    return w_repeat * repeat_pressure + w_fail * failure_rate + w_rho * rho + w_roll * rollback_term


def _fnv32(text: str) -> int:
    h = 0xCBF29CE484222325
    for byte in text.encode("utf-8"):
        h ^= byte
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return (h ^ (h >> 32)) & 0xFFFFFFFF


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def compact_args(arguments: str) -> str:
    """A call's arguments as the turn signature renders them (module docs, ``repeat_pressure``)."""
    try:
        value: Any = json.loads(arguments) if arguments.strip() else None
    except ValueError:
        text = arguments
    else:
        if value is None:
            return ""
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        if not _utf8(text):  # a lone surrogate: upstream's serde_json refuses such JSON, so its raw text
            text = arguments
    if text == "{}":
        return ""
    if len(text) <= _ARGS_MAX:
        return text
    return f"{text[:_ARGS_MAX]}…#{_fnv32(text):08x}"


def turn_signature(calls: Iterable[ToolCall]) -> str:
    """``name(args)`` of the non-built-in calls joined by ``", "`` ("" when there is none)."""
    parts = []
    for call in calls:
        if call.name in META_TOOLS:
            continue
        args = compact_args(call.arguments)
        parts.append(f"{call.name}({args})" if args else call.name)
    return ", ".join(parts)


@dataclass
class EntropyTracker:
    """The fold behind every sample and alert decision: feed events in seq order (module docs).

    Attributes:
        watch: The alert config (None: samples only, never an alert).
        streak: Consecutive identical turn signatures so far.
        window: Per completed turn ``(errors, results, rollbacks)``, oldest first, at most 8.
        rollbacks_pending: Rollbacks since the last completed turn.
        fill_ratio: ``context.fill_ratio`` of the latest kernel request (None: unknown).
        disarmed: An alert fired and no score has fallen below ``threshold - hysteresis`` since.
        last_alert_turn: Turn of the latest ``entropy_alert``.
        action_due: Turn of an ``entropy_alert`` whose action is not recorded yet.
        asked: The open ``ask`` gate's turn (an ``entropy_action`` ``ask`` with no decision yet).
        denied: The human denied the ``ask`` gate of this turn (the run must stop).
    """

    watch: EntropyWatch | None = None
    streak: int = 0
    signature: str | None = None
    window: deque[tuple[int, int, int]] = field(default_factory=lambda: deque(maxlen=WINDOW_TURNS))
    rollbacks_pending: int = 0
    fill_ratio: float | None = None
    disarmed: bool = False
    last_alert_turn: int | None = None
    action_due: int | None = None
    asked: int | None = None
    denied: int | None = None

    # ─── folding ──────────────────────────────────────────────────────────────────────────
    def feed(self, event: SessionEvent) -> None:
        """Fold one event (seq order); kinds the watch does not read are ignored."""
        if isinstance(event, ToolRequested):
            self._on_calls(event.calls)
        elif isinstance(event, Rollbacked):
            self.rollbacks_pending += 1
        elif isinstance(event, ToolCompleted):
            errors = sum(1 for r in event.results if r.is_error)
            self.window.append((errors, len(event.results), self.rollbacks_pending))
            self.rollbacks_pending = 0
        elif isinstance(event, EntropySample):
            if self.watch is not None and event.score < self.watch.threshold - self.watch.hysteresis:
                self.disarmed = False
        elif isinstance(event, EntropyAlert):
            self.disarmed, self.last_alert_turn, self.action_due = True, event.turn, event.turn
        elif isinstance(event, Custom):
            self._on_custom(event.custom_kind, event.payload if isinstance(event.payload, dict) else {})

    def _on_calls(self, calls: Sequence[ToolCall]) -> None:
        signature = turn_signature(calls)
        if not signature:
            return
        if signature == self.signature:
            self.streak += 1
        else:
            self.signature, self.streak = signature, 1

    def _on_custom(self, kind: str, payload: dict[str, Any]) -> None:
        if kind == "prompt_program_invoked" and payload.get("actor") == "kernel":
            context = payload.get("context")
            ratio = context.get("fill_ratio") if isinstance(context, dict) else None
            self.fill_ratio = float(ratio) if isinstance(ratio, int | float) else None
        elif kind == ENTROPY_ACTION:
            self.action_due = None
            if payload.get("action") == "ask":
                self.asked = int(payload.get("turn", 0))
        elif kind == "approval_decision" and payload.get("call_id") == f"{ENTROPY_GATE_PREFIX}{self.asked}":
            if payload.get("approved") is False:
                self.denied = self.asked
            self.asked = None

    # ─── queries ──────────────────────────────────────────────────────────────────────────
    def sample(self, turn: int, results: Sequence[ToolResult]) -> EntropySample:
        """The sample the ``tool_completed(turn, results)`` about to be recorded gets (state unchanged)."""
        window = [*self.window, (sum(1 for r in results if r.is_error), len(results), self.rollbacks_pending)]
        window = window[-WINDOW_TURNS:]
        errors = sum(w[0] for w in window)
        totals = sum(w[1] for w in window)
        rollbacks = sum(w[2] for w in window)
        rho = min(1.0, max(0.0, self.fill_ratio or 0.0))
        repeat = min(1.0, max(0.0, (self.streak - 1) / max(1, DENY_AFTER)))
        failure = errors / totals if totals else 0.0
        return EntropySample(
            turn=turn,
            score=entropy_score(repeat, failure, rho, rollbacks),
            rho=rho,
            repeat_pressure=repeat,
            failure_rate=failure,
            rollbacks_in_window=rollbacks,
            window_turns=len(window),
        )

    def alert(self, sample: EntropySample) -> EntropyAlert | None:
        """The alert ``sample`` trips (upstream ``should_alert``), or None; state unchanged."""
        watch = self.watch
        if watch is None or sample.score < watch.threshold:
            return None
        if self.disarmed:  # a score at or above the threshold never re-arms (upstream ``should_alert``)
            return None
        if self.last_alert_turn is not None and sample.turn - self.last_alert_turn < watch.cooldown_turns:
            return None
        return EntropyAlert(turn=sample.turn, score=sample.score, threshold=watch.threshold)

    def boundary(self, turn: int, results: Sequence[ToolResult]) -> list[EntropySample | EntropyAlert]:
        """The events recorded after ``tool_completed(turn, results)``: the sample, then any alert."""
        sample = self.sample(turn, results)
        alert = self.alert(sample)
        return [sample] if alert is None else [sample, alert]


def recompute_samples(events: Iterable[SessionEvent]) -> list[EntropySample]:
    """Every sample a session's ledger implies (one per ``tool_completed``): what a user recomputes from
    ``flightlog export`` to check the recorded ``entropy_sample`` events (module docs)."""
    tracker = EntropyTracker()
    found: list[EntropySample] = []
    for event in events:
        if isinstance(event, ToolCompleted):
            found.append(tracker.sample(event.turn, event.results))
        tracker.feed(event)
    return found
