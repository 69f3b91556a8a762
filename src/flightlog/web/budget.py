"""Spent/granted budget cells of a run for the dashboard (tokens and steps, as ``flightlog runs --tree``).

A sub-agent's limits are its grant (the kernel writes the reserved tokens and steps into the child's
``run_started``; the runs read model carries them as ``token_budget`` / ``max_steps``), so "spent/granted"
is ``tokens_used``/``token_budget`` and ``steps_taken``/``max_steps`` of the run's seed 002
``BudgetSummary`` (``flightlog.runs``). Nothing is estimated: a spend the read model does not hold is ``-``;
a run that records no limit shows ``(no limit)``, here and in ``flightlog runs --tree``
(:func:`flightlog.narration.spent_of`).
The word is "steps" everywhere (the seed's ``steps_taken`` / ``max_steps``, ``runs`` and the README).
Pure: no I/O.
"""

from __future__ import annotations

from ..narration import spent_of
from ..runs import BudgetSummary

__all__ = ["budget_cells", "budget_label", "spent_of"]


def _num(value: int | None) -> str:
    return "-" if value is None else str(value)


def budget_cells(budget: BudgetSummary) -> dict[str, str]:
    """Spent and granted tokens and steps of one run: ``tokens``, ``token_limit``, ``steps``,
    ``step_limit`` (decimal strings, ``-`` when the read model holds no value), and the two as shown,
    ``tokens_of`` and ``steps_of`` (:func:`spent_of`: ``45/300``, ``45 (no limit)``)."""
    return {
        "tokens": _num(budget.tokens_used),
        "token_limit": _num(budget.token_budget),
        "steps": _num(budget.steps_taken),
        "step_limit": _num(budget.max_steps),
        "tokens_of": spent_of(budget.tokens_used, budget.token_budget),
        "steps_of": spent_of(budget.steps_taken, budget.max_steps),
    }


def budget_label(budget: BudgetSummary) -> str:
    """The budget as ``flightlog runs --tree`` prints it: ``tokens 45/300  steps 3 (no limit)``
    (:func:`spent_of` for each)."""
    tokens = spent_of(budget.tokens_used, budget.token_budget)
    return f"tokens {tokens}  steps {spent_of(budget.steps_taken, budget.max_steps)}"
