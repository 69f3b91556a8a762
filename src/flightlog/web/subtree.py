"""A parent's sub-agents for its dashboard page, as display-safe dicts (see :mod:`.budget` for the cells).

Each child shows its spent/granted tokens and steps (its grant is its limits).

Ids and states come from the durable read model (refined by live heartbeats, as ``flightlog runs``); every
string passes :func:`flightlog.web.views.show` and is rendered by Jinja2 autoescape or ``textContent``.
"""

from __future__ import annotations

from typing import Any

from ..errors import SessionNotFound
from ..kernel.rowcheck import row_warning
from ..kernel.rowheld import held_by_ledger
from ..live import RunView, list_run_views
from ..runs.projection import Undecodable
from ..store.base import Store
from .budget import budget_cells
from .views import LINE_LIMIT, not_listed, run_view, session_href, show

__all__ = ["MAX_CHILDREN", "MAX_DEPTH", "UNDECODABLE", "child_rows", "lineage"]

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
    """The children of a run (most recently updated first, as the runs tree), each ``{id, href, state,
    state_class, source, outcome, budget, warning}``.

    ``id`` is the full child session id; ``href`` its session page ("" for a process entry with no recorded
    session); ``state`` the seed 002 state (``" (abandoned)"`` added when its heartbeat lapsed); ``budget``
    the :func:`budget_cells` of the child (spent vs its grant). A child whose row's status ended it while its
    ledger waits is shown in the state its events give, with the row warning; one whose events, read to
    decide that, do not decode is shown ``undecodable``, its ``warning`` naming the seq
    (:func:`flightlog.kernel.rowheld.held_by_ledger`), never in the state the row gives.
    """
    rows = []
    for view in list_run_views(store, parent=session_id, limit=MAX_CHILDREN):
        unread: Undecodable = []
        kept, held = held_by_ledger(store, [view], undecodable=unread)
        row: dict[str, Any] = {
            "id": show(view.snapshot.run_id, 160),
            "href": session_href(view.snapshot.run_id) if _has_session(store, view.snapshot.run_id) else "",
        }
        rows.append(row | _cells(store, kept[0] if kept else view, unread, held))
    return rows


def _cells(store: Store, view: RunView | None, unread: Undecodable, held: set[str]) -> dict[str, Any]:
    """A tree node's state, source, outcome, budget and warning: none known without ``view``; when
    ``unread`` holds the run, ``undecodable`` (the warning naming the seq; the source and budget of ``view``,
    the read model's, which the row's status does not move); else the view's (with the row warning when
    the ledger ``held`` it)."""
    if unread:
        sid, error = unread[0]
        cells = {**_NO_CELLS, "state": UNDECODABLE, "state_class": UNDECODABLE}
        if view is not None:
            cells.update(source=view.snapshot.source.value, budget=budget_cells(view.snapshot.budget))
        return cells | {"warning": show(not_listed(sid, error), LINE_LIMIT)}
    if view is None:
        return dict(_NO_CELLS)
    s = view.snapshot
    warning = ""
    if s.run_id in held:
        warning = show(row_warning(s.run_id, store.get_session(s.run_id).status), LINE_LIMIT)
    return {
        "state": s.state.value + (" (abandoned)" if view.abandoned else ""),
        "state_class": s.state.value,
        "source": s.source.value,
        "outcome": s.terminal.outcome.value if s.terminal else "",
        "budget": budget_cells(s.budget),
        "warning": warning,
    }


UNDECODABLE = "undecodable"
"""The state a run tree shows for a run whose events, read to decide whether its ledger waits, do not
decode (the row's status ended it): not ``unknown``, not the row's state."""
_NO_CELLS: dict[str, Any] = {
    "state": "",
    "state_class": "unknown",
    "source": "",
    "outcome": "",
    "budget": None,
    "warning": "",
}
"""A node the runs read model holds no row for."""


def _node(store: Store, session_id: str) -> dict[str, Any]:
    unread: Undecodable = []
    held: set[str] = set()
    view = run_view(store, session_id, undecodable=unread, held=held)
    node: dict[str, Any] = {
        "id": show(session_id, 160),
        "href": session_href(session_id) if _has_session(store, session_id) else "",
    }
    return node | _cells(store, view, unread, held)


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
