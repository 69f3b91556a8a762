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
from .views import run_view, session_href, show

__all__ = ["MAX_CHILDREN", "MAX_DEPTH", "child_rows", "lineage"]

MAX_CHILDREN = 500
"""Children listed at most on a parent's page (the most recently updated)."""
MAX_DEPTH = 32
"""Ancestors followed at most up from a run (a deeper chain is cut at its top)."""


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
                "state_class": s.state.value,
                "source": s.source.value,
                "outcome": s.terminal.outcome.value if s.terminal else "",
                "budget": budget_cells(s.budget),
            }
        )
    return rows


def _node(store: Store, session_id: str) -> dict[str, Any]:
    view = run_view(store, session_id, undecodable=[])  # unknown: its own page names the seq
    node: dict[str, Any] = {
        "id": show(session_id, 160),
        "href": session_href(session_id) if _has_session(store, session_id) else "",
        "state": "",
        "state_class": "unknown",
        "source": "",
        "outcome": "",
        "budget": None,
    }
    if view is not None:
        s = view.snapshot
        node.update(
            state=s.state.value + (" (abandoned)" if view.abandoned else ""),
            state_class=s.state.value,
            source=s.source.value,
            outcome=s.terminal.outcome.value if s.terminal else "",
            budget=budget_cells(s.budget),
        )
    return node


def lineage(store: Store, session_id: str) -> list[dict[str, Any]]:
    """The run and its ancestors, root first, each ``{id, href, state, state_class, source, outcome,
    budget}`` (``state``/``source`` the seed 002 values, "" when the read model holds no row; ``budget`` the
    :func:`budget_cells`, spent vs granted, or None). Followed up to :data:`MAX_DEPTH` parents.

    Raises:
        SessionNotFound: no such session.
    """
    chain = [session_id]
    parent = store.get_session(session_id).parent_session_id
    while parent is not None and parent not in chain and len(chain) <= MAX_DEPTH:
        chain.append(parent)
        try:
            parent = store.get_session(parent).parent_session_id
        except SessionNotFound:
            break  # a parent entry with no recorded session: shown, not followed
    return [_node(store, run_id) for run_id in reversed(chain)]
