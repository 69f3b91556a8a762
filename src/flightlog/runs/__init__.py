"""Run views: the seed 002 ``AgentRunSnapshot`` read model over flightlog's ledgers.

* :mod:`~flightlog.runs.model`: the wire model (``AgentRunSnapshot``, ``RunState``...), exactly seed 002's.
* :mod:`~flightlog.runs.adapters`: pure owner adapters (recorded sessions, process-table entries) and
  the state/outcome/budget mapping rules.
* :mod:`~flightlog.runs.projection`: the ``runs`` table kept current in the append transaction, its
  rebuild, and the queries.

:func:`~flightlog.runs.projection.project` is one of the recorder's default projectors
(:data:`flightlog.recorder.DEFAULT_PROJECTORS`), registered when the first recorder of a process is made,
so every recorder keeps the projection current whatever was imported first. Live state (heartbeats of
running kernels) is merged on top by :mod:`flightlog.live`.
"""

from __future__ import annotations

from .adapters import (
    FOLD_VERSION,
    ProcessEntry,
    SessionFold,
    SessionHeader,
    combine,
    outcome_for_reason,
    process_snapshot,
    refine_with_status,
    session_snapshot,
)
from .model import (
    AgentRunSnapshot,
    BudgetSummary,
    ReceiptKind,
    ReceiptRef,
    RunSource,
    RunState,
    TerminalOutcome,
    TerminalSummary,
)
from .page import RunPage, RunPageEntry, run_page
from .projection import (
    RunNode,
    build_tree,
    compute_runs,
    folded_sessions,
    list_runs,
    list_runs_json,
    project,
    projection_ready,
    reads_event,
    rebuild_projection,
    unlisted_parents,
)

__all__ = [
    "FOLD_VERSION",
    "AgentRunSnapshot",
    "BudgetSummary",
    "ProcessEntry",
    "ReceiptKind",
    "ReceiptRef",
    "RunNode",
    "RunPage",
    "RunPageEntry",
    "RunSource",
    "RunState",
    "SessionFold",
    "SessionHeader",
    "TerminalOutcome",
    "TerminalSummary",
    "build_tree",
    "combine",
    "compute_runs",
    "folded_sessions",
    "install_projector",
    "list_runs",
    "list_runs_json",
    "outcome_for_reason",
    "process_snapshot",
    "project",
    "projection_ready",
    "rebuild_projection",
    "refine_with_status",
    "run_page",
    "session_snapshot",
    "unlisted_parents",
]


def install_projector() -> None:
    """Register the ``runs`` projector with every recorder of this process (idempotent; every recorder
    already does it when made, :func:`flightlog.recorder.load_default_projectors`)."""
    from ..recorder import register_projector

    register_projector(project, reads=reads_event)
