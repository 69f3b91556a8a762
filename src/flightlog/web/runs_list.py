"""The dashboard's runs list (``/runs``): every run, sorted, filtered and paged (issue 18 item 4).

Read-only. ``/runs?state=&outcome=&source=&parent=&since=YYYY-MM-DD&until=YYYY-MM-DD&q=TEXT
&sort=started|updated&order=desc|asc&cursor=...``: one page of :func:`flightlog.runs.run_page` (100 runs, keyset pagination, so
the 1,000th page costs what the first does); ``q`` searches goals and messages. ``/api/runs/page`` returns
the same page as JSON (``runs``, ``unreadable`` and ``next``, the cursor of the next page). Times are UTC.
Every string is escaped by the templates. On a missing or stale projection (the ledgers folded), a session
whose stored events do not decode is left out and named in ``unreadable`` (``session``, ``href``,
``warning`` naming the seq), as ``flightlog runs`` warns; so is a run the row's status ended whose events,
read to decide whether its ledger waits, do not decode. A page the check leaves runs out of is filled from
the next keyset page (``next`` then follows the last run read), so it lists 100 runs while there are more.

``outcome=`` (seed 002 ``TerminalOutcome``: ``completed``, ``failed``, ``cancelled``, ``interrupted``,
``budget_exhausted``; ``aborted`` is read as ``cancelled``, :func:`flightlog.narration.state_word`) keeps the
terminal runs that ended so, as ``flightlog runs --outcome`` does: it implies ``state=terminal`` (another
state with it is a 400) and is checked on each listed run's outcome, the one the page shows (the runs
projection's outcome column does not hold the outcome a session status settles), so a page of a rare
outcome reads terminal runs, 100 at a time, until it fills.

A run the ``sessions`` row's status ended while its ledger holds an open wait is listed in the state its
events give, with ``row_warning`` (:func:`flightlog.kernel.rowheld.ledger_snapshot`; the row is unhashed).
Only a terminal the row made (its detail ``session marked …``) is checked: a substring test per row.
``state=`` agrees with the unfiltered list: the SQL filter follows the row's status, so a state a run is in
flight in also lists the runs :func:`flightlog.kernel.rowheld.held_in` finds the ledger holds in it (no fold
of every run), and ``terminal`` leaves them out.
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import urlencode

from fastapi import Depends, FastAPI, Response
from fastapi.responses import HTMLResponse, JSONResponse

from ..errors import EventDecodeError
from ..kernel.rowcheck import row_warning
from ..kernel.rowheld import SETTLED_BY_ROW, held_in, ledger_snapshot
from ..live import DRIVEN_STATES, LiveRunRecord, live_records, merge, wall_ms
from ..narration import state_word
from ..runs import AgentRunSnapshot, run_page
from ..runs.page import SORTS, RunPageEntry
from .views import OUTCOMES, SOURCES, STATES, not_listed, run_goal, unreadable_rows

if TYPE_CHECKING:
    from ..runs.projection import Undecodable
    from .app import _Dashboard

__all__ = ["PAGE_SIZE", "register", "runs_page_data"]

PAGE_SIZE = 100
"""Runs per page."""

_FILTERS = ("state", "outcome", "source", "parent", "since", "until", "q", "sort", "order")


def _day_ms(value: str, name: str) -> int | None:
    """``YYYY-MM-DD`` (UTC midnight) as epoch ms; None when empty.

    Raises:
        ValueError: not a date (names the parameter).
    """
    if not value:
        return None
    try:
        day = date.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{name} must be a date (YYYY-MM-DD), not {value[:40]!r}") from None
    return int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp() * 1000)


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S") if ms > 0 else ""


def runs_page_data(dash: _Dashboard, params: dict[str, str]) -> dict[str, Any]:
    """One page of runs and its links (see the module docs).

    Raises:
        ValueError: an unknown state, outcome, source, sort or order, an outcome with a state other than
            ``terminal``, a bad date or cursor (the message names it).
    """
    state, source, sort, order = (params.get(k, "") for k in ("state", "source", "sort", "order"))
    outcome = _outcome(params.get("outcome", ""), state)
    if outcome:
        state = "terminal"
    if state and state not in STATES:
        word = state_word(state)  # a session's word ls prints ("cancelled") names a terminal run's outcome
        hint = f": {word} is an outcome, use outcome={word}" if word in OUTCOMES else ""
        raise ValueError(f"unknown state {state[:40]!r} (one of: {', '.join(STATES)}){hint}")
    if source and source not in SOURCES:
        raise ValueError(f"unknown source {source[:40]!r} (one of: {', '.join(SOURCES)})")
    if sort and sort not in SORTS:
        raise ValueError(f"sort must be one of {', '.join(SORTS)}")
    if order and order not in ("desc", "asc"):
        raise ValueError("order must be desc or asc")
    filters = {k: params[k] for k in _FILTERS if params.get(k)}
    # a stale projection is folded, or a run the row ended may wait: the sessions whose events do not decode
    left_out: Undecodable = []
    ended = held_in(dash.reader, state or None, undecodable=left_out)  # the row ended them: not in SQL's
    held = [row.run_id for row, _ in ended]
    runs: list[dict[str, Any]] = []
    cursor = params.get("cursor") or None
    while True:  # runs the check leaves out do not shorten the page: it is filled from the next
        page = run_page(
            dash.reader,
            state=state or None,
            source=source or None,
            parent=params.get("parent") or None,
            since_ms=_day_ms(params.get("since", ""), "since"),
            until_ms=_day_ms(params.get("until", ""), "until"),
            text=params.get("q") or None,
            sort=sort or "started",
            descending=order != "asc",
            cursor=cursor,
            limit=PAGE_SIZE - len(runs),
            also=held,
            undecodable=left_out,
        )
        runs += [
            r for r in _shown(dash, page.entries, state, left_out) if not outcome or r["outcome"] == outcome
        ]
        if len(runs) >= PAGE_SIZE or page.next_cursor is None:
            break
        cursor = page.next_cursor
    next_url = None
    if page.next_cursor is not None:
        next_url = "/runs?" + urlencode({**filters, "cursor": page.next_cursor})
    form = {k: params.get(k, "") for k in _FILTERS}
    unreadable = unreadable_rows({sid: not_listed(sid, exc) for sid, exc in left_out})  # once a session
    return {
        "runs": runs,
        "unreadable": unreadable,
        "next": page.next_cursor,
        "next_url": next_url,
        "filters": filters,
        "form": form,
    }


def _outcome(value: str, state: str) -> str:
    """The ``outcome=`` filter as ``flightlog runs --outcome`` reads it (``""``: none).

    Raises:
        ValueError: not a seed 002 outcome (the message lists them), or given with a state other than
            ``terminal``.
    """
    if not value:
        return ""
    word = state_word(value)  # "aborted" (a Claude Code import's word) is seed 002's "cancelled"
    if word not in OUTCOMES:
        raise ValueError(f"unknown outcome {value[:40]!r}: one of {', '.join(OUTCOMES)}")
    if state and state != "terminal":
        raise ValueError(f"outcome={word} lists terminal runs; it takes no state={state[:40]}")
    return word


def _shown(
    dash: _Dashboard, entries: list[RunPageEntry], state: str, left_out: Undecodable
) -> list[dict[str, Any]]:
    """The rows of ``entries`` as the page lists them: a run the row's status ended whose ledger waits in
    the state its events give (with the row warning; left out when that is not ``state``), one whose
    events do not decode left out and appended to ``left_out`` (named, not listed). ``abandoned``: the run
    is in a state a process drives and nothing was heard from it within the lease, as the home page's
    run tree and the session page decide it (:func:`flightlog.live.merge`); the page says ``running
    (abandoned)`` as they do."""
    runs = []
    live = live_records(dash.reader)
    now = wall_ms()
    for entry in entries:
        wire = json.loads(entry.wire)
        entry_state, warning = entry.state, ""
        if SETTLED_BY_ROW in entry.wire:  # the row's status ended it: not when its ledger waits
            try:
                ledger = ledger_snapshot(dash.reader, AgentRunSnapshot.model_validate(wire))
            except EventDecodeError as exc:  # whether its ledger waits is unknown: named, not listed
                left_out.append((entry.run_id, exc))
                continue
            if ledger is not None:
                if state and ledger.state.value != state:
                    continue  # listed for the row's state; the ledger holds it in another
                wire, entry_state = ledger.model_dump(mode="json"), ledger.state.value
                warning = row_warning(entry.run_id, dash.reader.get_session(entry.run_id).status)
        budget = wire.get("budget") or {}
        runs.append(
            {
                "run_id": entry.run_id,
                "goal": run_goal(dash.reader, entry.run_id),
                "state": entry_state,
                "abandoned": _abandoned(wire, entry, live.get(entry.run_id), now),
                "row_warning": warning,
                "source": wire.get("source", ""),
                "parent": wire.get("parent"),
                "outcome": (wire.get("terminal") or {}).get("outcome"),
                "tokens": budget.get("tokens_used"),
                "started": _when(entry.started_at_ms),
                "updated": _when(entry.updated_at_ms),
            }
        )
    return runs


def _abandoned(wire: dict[str, Any], entry: RunPageEntry, live: LiveRunRecord | None, now_ms: int) -> bool:
    """Whether the listed run (its seed 002 ``wire``) is abandoned as :func:`flightlog.live.merge` decides
    it: in a driven state, no fresh heartbeat, and no durable event within the lease."""
    if wire.get("state") not in {s.value for s in DRIVEN_STATES}:
        return False
    snapshot = AgentRunSnapshot.model_validate(wire)
    return merge(snapshot, live, now_ms=now_ms, last_durable_ms=entry.updated_at_ms).abandoned


def _query(
    state: str = "",
    outcome: str = "",
    source: str = "",
    parent: str = "",
    since: str = "",
    until: str = "",
    q: str = "",
    sort: str = "",
    order: str = "",
    cursor: str = "",
) -> dict[str, str]:
    """The query parameters both routes take (a FastAPI dependency), the empty ones left out."""
    given = {
        "state": state, "outcome": outcome, "source": source, "parent": parent, "since": since, "until": until, "q": q,
        "sort": sort, "order": order, "cursor": cursor,
    }  # fmt: skip
    return {k: v for k, v in given.items() if v}


def register(app: FastAPI, dash: _Dashboard) -> None:
    """Add ``/runs`` and ``/api/runs/page`` to the dashboard."""

    @app.get("/runs", response_class=HTMLResponse)
    def runs_list_page(
        query: Annotated[dict[str, str], Depends(_query)],
    ) -> Response:
        """One page of the runs list."""
        try:
            data = runs_page_data(dash, query)
        except ValueError as exc:
            return dash.error(400, str(exc))
        return dash.page(
            "runs_list.html",
            title="All runs",
            states=STATES,
            outcomes=OUTCOMES,
            sources=SOURCES,
            sorts=SORTS,
            first_url="/runs?" + urlencode(data["filters"]),
            paged="cursor" in query,
            **data,
        )

    @app.get("/api/runs/page")
    def runs_list_json(
        query: Annotated[dict[str, str], Depends(_query)],
    ) -> Response:
        """The page as JSON: ``{"runs": [...], "next": cursor or null}``."""
        try:
            data = runs_page_data(dash, query)
        except ValueError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return JSONResponse({"runs": data["runs"], "unreadable": data["unreadable"], "next": data["next"]})
