"""Spent/granted budget cells of a run for the dashboard (tokens and turns, as ``flightlog runs --tree``).

A sub-agent's limits are its grant (the kernel writes the reserved tokens and turns into the child's
``run_started``; the runs read model carries them as ``token_budget`` / ``max_steps``), so "spent/granted"
is ``tokens_used``/``token_budget`` and ``steps_taken``/``max_steps`` of the run's seed 002
``BudgetSummary`` (``flightlog.runs``). Nothing is estimated: a fact the read model does not hold is ``-``.
Pure: no I/O.
"""

from __future__ import annotations

from ..runs import BudgetSummary

__all__ = ["budget_cells", "budget_label"]


def _num(value: int | None) -> str:
    return "-" if value is None else str(value)


def budget_cells(budget: BudgetSummary) -> dict[str, str]:
    """Spent and granted tokens and turns of one run: ``tokens``, ``token_limit``, ``steps``,
    ``step_limit`` (decimal strings, ``-`` when the read model holds no value)."""
    return {
        "tokens": _num(budget.tokens_used),
        "token_limit": _num(budget.token_budget),
        "steps": _num(budget.steps_taken),
        "step_limit": _num(budget.max_steps),
    }


def budget_label(budget: BudgetSummary) -> str:
    """The budget as ``flightlog runs --tree`` prints it: ``tokens 45/300  steps 3/5`` (spent/limit; the
    ``/limit`` part only where the run records a limit, ``-`` for an unknown spend)."""
    tokens = f"tokens {_num(budget.tokens_used)}" + (
        f"/{budget.token_budget}" if budget.token_budget is not None else ""
    )
    steps = f"steps {_num(budget.steps_taken)}" + (
        f"/{budget.max_steps}" if budget.max_steps is not None else ""
    )
    return f"{tokens}  {steps}"
