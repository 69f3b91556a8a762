"""Budgets: tokens, turns, wall-clock time and cost; reserved before a model call, settled after.

Accounting rules (all quantities derive from the ledger, so a resumed run continues where it stopped and
a budget is never refilled):

* **Limits** are recorded once, at run start, as ``Custom("budget_limits", Budgets.to_wire())``. A resume
  uses the recorded limits, whatever the ``Agent`` passed to it says.
* **Usage** of every model call is recorded as ``Custom("model_usage", {turn, model, protocol,
  route_position, input_tokens, output_tokens, cache_read_tokens?, cache_write_tokens?, total_tokens,
  cost?, reserved_tokens})`` in the same transaction as its ``llm_completed``. Tokens spent = the sum of
  ``total_tokens`` (input + output); cost spent = the sum of ``cost`` (in the price unit, e.g. USD).
  Failed calls report no usage and none is invented.
* **Turns** used = the highest turn number with a ``checkpoint_taken`` (a rolled-back, retried turn counts
  once).
* **Wall clock** used = active time: for each activation (from ``run_started`` or ``resumed`` to the last
  event before the next activation, a ``suspended`` or an ``operation_cancelled``), the difference of the
  rows' ``recorded_at_ms``. Time spent suspended, waiting for a human, or crashed does not count.

**Reservation.** Before each model call the kernel reserves the call's worst-case output,
``max_tokens``: a call is admitted only when each axis has something left; ``max_tokens`` is then capped
to the tokens left and to the output tokens the cost left can buy. A call can still overshoot the token
and cost budgets by its input tokens; the next reservation then fails. **Settlement** records the actual
usage (above). Exhaustion is recorded as ``budget_exceeded(budget=axis)`` then
``run_terminal(reason="budget_exhausted")``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..providers.base import Usage

__all__ = ["Axis", "Budgets", "Prices", "Reservation", "Spent", "admit_turn", "reserve"]

Axis = Literal["tokens", "turns", "wall_clock", "cost"]

_EPSILON = 1e-9
"""Slack for float noise in summed costs (0.5 - 0.4 is 0.0999...; it buys 50 tokens at 2/1k, not 49)."""


@dataclass(frozen=True)
class Prices:
    """Token prices of one model, per 1000 tokens, in the budget's currency unit (e.g. USD)."""

    input_per_1k: float
    output_per_1k: float

    def __post_init__(self) -> None:
        if not (self.input_per_1k >= 0 and self.output_per_1k >= 0):
            raise ValueError("prices must be >= 0")

    def cost(self, usage: Usage) -> float:
        """Cost of one call's usage: input and output tokens at their prices."""
        return (usage.input_tokens * self.input_per_1k + usage.output_tokens * self.output_per_1k) / 1000

    def to_wire(self) -> dict[str, float]:
        """``{"input_per_1k", "output_per_1k"}``."""
        return {"input_per_1k": self.input_per_1k, "output_per_1k": self.output_per_1k}


@dataclass(frozen=True)
class Budgets:
    """Limits of one run; None means unlimited on that axis.

    Attributes:
        tokens: Input + output tokens over all model calls.
        turns: Model turns (turn transactions; a retried turn counts once).
        wall_clock_ms: Active run time in milliseconds (see the module docs).
        cost: Total cost in the price unit; needs ``prices`` (or ``model_prices``) for every route model.
        prices: Default prices for every model.
        model_prices: Prices per model id, overriding ``prices``.
    """

    tokens: int | None = None
    turns: int | None = None
    wall_clock_ms: int | None = None
    cost: float | None = None
    prices: Prices | None = None
    model_prices: Mapping[str, Prices] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("tokens", "turns", "wall_clock_ms", "cost"):
            value = getattr(self, name)
            if value is not None and not (value >= 0 and math.isfinite(value)):
                raise ValueError(f"budget {name} must be a finite number >= 0, not {value!r}")
        object.__setattr__(self, "model_prices", dict(self.model_prices))

    def price_for(self, model: str) -> Prices | None:
        """Prices for ``model``: its own, else the default, else None (cost unknown)."""
        return self.model_prices.get(model, self.prices)

    def to_wire(self) -> dict[str, Any]:
        """JSON-ready form (absent limits omitted), as recorded in ``budget_limits``."""
        wire: dict[str, Any] = {
            name: getattr(self, name)
            for name in ("tokens", "turns", "wall_clock_ms", "cost")
            if getattr(self, name) is not None
        }
        if self.prices is not None:
            wire["prices"] = self.prices.to_wire()
        if self.model_prices:
            wire["model_prices"] = {model: p.to_wire() for model, p in sorted(self.model_prices.items())}
        return wire

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> Budgets:
        """Inverse of :meth:`to_wire` (also the TOML ``[budgets]`` table)."""
        prices = data.get("prices")
        model_prices = data.get("model_prices") or {}
        return cls(
            tokens=data.get("tokens"),
            turns=data.get("turns"),
            wall_clock_ms=data.get("wall_clock_ms"),
            cost=data.get("cost"),
            prices=Prices(**prices) if prices else None,
            model_prices={model: Prices(**p) for model, p in model_prices.items()},
        )


@dataclass(frozen=True)
class Spent:
    """What a run has used so far (derived from the ledger plus the current activation's clock)."""

    tokens: int = 0
    cost: float = 0.0
    turns: int = 0
    wall_clock_ms: int = 0


@dataclass(frozen=True)
class Reservation:
    """An admitted model call: its id and the ``max_tokens`` (output cap, tokens) it may use."""

    reservation_id: str
    max_tokens: int


def admit_turn(limits: Budgets, spent: Spent) -> Axis | None:
    """Whether a *new* turn may start: the axis that forbids it (``turns``), or None."""
    if limits.turns is not None and spent.turns >= limits.turns:
        return "turns"
    return None


def reserve(
    limits: Budgets, spent: Spent, *, max_tokens: int, prices: Prices | None, reservation_id: str
) -> Reservation | Axis:
    """Reserve one model call's worst case (``max_tokens`` output tokens) against every axis.

    Args:
        limits: The run's limits.
        spent: Usage so far.
        max_tokens: The agent's output cap per call (tokens), the reservation estimate.
        prices: Prices of the model about to be called (None: cost unknown, not checked).
        reservation_id: Id for the reservation (appears in ``budget_exceeded``).

    Returns:
        The :class:`Reservation` with ``max_tokens`` capped to what is left, or the exhausted axis
        (checked in the order wall_clock, tokens, cost).
    """
    if limits.wall_clock_ms is not None and spent.wall_clock_ms >= limits.wall_clock_ms:
        return "wall_clock"
    cap = max_tokens
    if limits.tokens is not None:
        left = limits.tokens - spent.tokens
        if left <= 0:
            return "tokens"
        cap = min(cap, left)
    if limits.cost is not None and prices is not None:
        left_cost = limits.cost - spent.cost
        if left_cost <= 0:
            return "cost"
        if prices.output_per_1k > 0:
            affordable = math.floor(left_cost * 1000 / prices.output_per_1k + _EPSILON)
            if affordable < 1:
                return "cost"
            cap = min(cap, affordable)
    return Reservation(reservation_id=reservation_id, max_tokens=max(1, cap))
