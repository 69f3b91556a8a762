"""A parent's sub-agents for its dashboard page, as display-safe dicts (see :mod:`.budget` for the cells).

Each child shows its spent/granted tokens and turns (its grant is its limits).

Ids and states come from the durable read model (refined by live heartbeats, as ``flightlog runs``); every
string passes :func:`flightlog.web.views.show` and is rendered by Jinja2 autoescape or ``textContent``.
"""

from __future__ import annotations

from typing import Any

from ..errors import SessionNotFound
from ..live import list_run_views
from ..store.base import Store
from .budget import budget_cells
from .views import session_href, show

__all__ = ["MAX_CHILDREN", "child_rows"]

MAX_CHILDREN = 500
"""Children listed at most on a parent's page (the most recently updated)."""


def _has_session(store: Store, run_id: str) -> bool:
    try:
        store.get_session(run_id)
    except SessionNotFound:
        return False
    return True


def child_rows(store: Store, session_id: str) -> list[dict[str, Any]]:
    """The children of a run (most recently updated first, as the runs tree), each ``{id, href, state, outcome, budget}``.

    ``id`` is the full child session id; ``href`` its session page ("" for a process entry with no recorded
    session); ``state`` the seed 002 state (``" (abandoned)"`` added when its heartbeat lapsed); ``budget``
    the :func:`budget_cells` of the child (spent vs its grant).
    """
    views = list_run_views(store, parent=session_id, limit=MAX_CHILDREN)
    rows = []
    for view in views:
        s = view.snapshot
        rows.append(
            {
                "id": show(s.run_id, 160),
                "href": session_href(s.run_id) if _has_session(store, s.run_id) else "",
                "state": s.state.value + (" (abandoned)" if view.abandoned else ""),
                "outcome": s.terminal.outcome.value if s.terminal else "",
                "budget": budget_cells(s.budget),
            }
        )
    return rows
