"""The paged runs list (issue 18 item 4, issue 19): sort, filter and page through any number of runs.

:func:`run_page` is one keyset-paginated query of the ``runs`` projection (:meth:`Store.page_runs`): the
page after a cursor costs what the first page costs, whatever the page number. Per row it only picks the
stored seed-002 wire JSON (refined by the session status where that settles a run, as
:func:`~flightlog.runs.projection.run_entries` does); nothing is parsed. The dashboard's runs list
(``/runs``, ``/api/runs/page``) and ``flightlog runs``-style callers use it.

When the projection is missing or stale (an older database opened read-only), the page is computed by
folding every ledger (:func:`~flightlog.runs.projection.compute_runs`) and filtering in memory: slow, never
wrong.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..errors import SessionNotFound
from ..store.base import RunListing, RunPageQuery, Store
from .model import RunSource, RunState
from .projection import _REFINED, _TERMINAL, Undecodable, _refined, compute_runs, projection_ready

__all__ = ["MAX_PAGE", "SORTS", "RunPage", "RunPageEntry", "parse_cursor", "run_page"]

SORTS = ("started", "updated")
"""Sort keys: the run's start (the session's creation; indexed) or its last event (scanned)."""

MAX_PAGE = 500
"""The most rows one page returns."""

_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1  # the store's integer columns (SQLite INTEGER, PostgreSQL bigint)


class RunPageEntry(NamedTuple):
    """One listed run: id, effective durable state, start and last event time (epoch ms), wire JSON."""

    run_id: str
    state: str
    started_at_ms: int
    updated_at_ms: int
    wire: str


@dataclass(frozen=True)
class RunPage:
    """A page of runs and the cursor of the next one (None: this is the last page)."""

    entries: list[RunPageEntry]
    next_cursor: str | None


def parse_cursor(cursor: str) -> tuple[int, str]:
    """``"<sort value>:<run id>"`` (what :attr:`RunPage.next_cursor` holds) as ``(value, run id)``.

    The value is an epoch-ms time as the store holds it: ASCII digits with an optional ``-``, within a
    signed 64-bit integer (SQLite's INTEGER and PostgreSQL's bigint), so a forged cursor is this error and
    never reaches SQL (where it would be an OverflowError).

    Raises:
        ValueError: not a cursor this module wrote (the message says ``cursor`` and quotes it).
    """
    value, sep, run_id = cursor.partition(":")
    digits = value.removeprefix("-")
    if not sep or not run_id or not digits.isascii() or not digits.isdigit() or len(digits) > 19:
        raise ValueError(f"not a runs-list cursor: {cursor[:80]!r}")
    number = int(value)
    if not _I64_MIN <= number <= _I64_MAX:
        raise ValueError(f"not a runs-list cursor (its time is out of range): {cursor[:80]!r}")
    return number, run_id


def run_page(
    store: Store,
    *,
    state: RunState | str | None = None,
    source: RunSource | str | None = None,
    parent: str | None = None,
    since_ms: int | None = None,
    until_ms: int | None = None,
    text: str | None = None,
    sort: str = "started",
    descending: bool = True,
    cursor: str | None = None,
    limit: int = 100,
    also: Collection[str] = (),
    undecodable: Undecodable | None = None,
) -> RunPage:
    """One page of the durable runs list, every filter given applied.

    Args:
        store: Any store (read-only is fine).
        state: Keep runs in this state (the session status refinement included).
        source: Keep runs of this source.
        parent: Keep the direct children of this run.
        since_ms: Keep runs started at or after this epoch ms.
        until_ms: Keep runs started before this epoch ms.
        text: Keep runs whose goal (``run_started``, the session's task) or messages (``llm_completed``,
            ``tool_completed``, ``custom`` events) hold this text, ASCII case folded.
        sort: ``started`` or ``updated`` (:data:`SORTS`).
        descending: Newest first.
        cursor: :attr:`RunPage.next_cursor` of the previous page (same filters and sort).
        limit: Rows per page, 1 to :data:`MAX_PAGE`.
        also: Runs to list whatever ``state`` their row gives, every other filter applied, in their place
            in the order: those the caller decided are in ``state`` although the session status settles
            them in another (:func:`flightlog.kernel.rowheld.held_runs`: the status is unhashed, their
            ledger waits). Their entries keep the refined state and wire; the caller shows them as it decided.
        undecodable: When given and the projection is missing or stale (the ledgers are folded): each
            session whose stored events do not decode is left out and added here as ``(session id, error
            naming the seq)`` (:func:`~flightlog.runs.projection.compute_runs`).

    Raises:
        ValueError: an unknown state, source or sort, a bad cursor, or a limit out of range.
        EventDecodeError: the ledgers are folded, a session's events do not decode and ``undecodable``
            is None.

    Source: seed 002 (the durable snapshots), issue 18 item 4 (the dashboard's runs list).
    """
    if sort not in SORTS:
        raise ValueError(f"sort must be one of {', '.join(SORTS)}, not {sort!r}")
    if not 1 <= limit <= MAX_PAGE:
        raise ValueError(f"limit must be 1 to {MAX_PAGE}, not {limit}")
    query = RunPageQuery(
        states=None if state is None else [RunState(state).value],
        source=None if source is None else RunSource(source).value,
        parent=parent,
        refined_statuses=_REFINED,
        since_ms=since_ms,
        until_ms=until_ms,
        text=text or None,
        sort=sort,
        descending=descending,
        after=parse_cursor(cursor) if cursor else None,
        limit=limit + 1,  # one more: is there a next page?
    )
    ready = projection_ready(store)
    rows = store.page_runs(query) if ready else _folded_page(store, query, undecodable)
    if also and state is not None:
        more = query._replace(states=None, run_ids=list(also))
        listed = {row[0] for row in rows}
        rows = [
            *rows,
            *(
                r
                for r in (store.page_runs(more) if ready else _folded_page(store, more, []))
                if r[0] not in listed
            ),
        ]
        at = 7 if sort == "started" else 4  # started_at_ms, updated_at_ms
        rows.sort(key=lambda row: (row[at], row[0]), reverse=descending)
        rows = rows[: limit + 1]
    refined, terminal = _REFINED, _TERMINAL
    # row: RunListing's fields then started_at_ms; the test is _settled_by_status's, inline (no object per row)
    entries = [
        RunPageEntry(row[0], refined[row[5]], row[7], row[4], _refined(RunListing(*row[:7])))
        if row[5] in refined and row[3] != terminal and refined[row[5]] != row[3]
        else RunPageEntry(row[0], row[3], row[7], row[4], row[6])
        for row in rows[:limit]
    ]
    if len(rows) <= limit:
        return RunPage(entries, None)
    last = entries[-1]
    key = last.started_at_ms if sort == "started" else last.updated_at_ms
    return RunPage(entries, f"{key}:{last.run_id}")


def _folded_page(store: Store, query: RunPageQuery, undecodable: Undecodable | None) -> list[tuple[Any, ...]]:
    """:meth:`Store.page_runs` computed from the ledgers (the projection is missing or stale);
    ``undecodable`` as :func:`~flightlog.runs.projection.compute_runs` takes it."""
    found: list[tuple[tuple[int, str], RunListing, int]] = []
    needle = json.dumps(query.text, ensure_ascii=False)[1:-1].lower() if query.text else None
    for snapshot, updated in compute_runs(
        store, states=query.states, source=query.source, parent=query.parent, undecodable=undecodable
    ):
        try:
            record = store.get_session(snapshot.run_id)
        except SessionNotFound:
            record = None
        started = record.created_at_ms if record is not None else updated
        if query.since_ms is not None and started < query.since_ms:
            continue
        if query.until_ms is not None and started >= query.until_ms:
            continue
        if needle is not None and not _holds(store, snapshot.run_id, record.task if record else None, needle):
            continue
        key = (started if query.sort == "started" else updated, snapshot.run_id)
        if query.after is not None and (key >= query.after if query.descending else key <= query.after):
            continue
        if query.run_ids is not None and snapshot.run_id not in query.run_ids:
            continue
        listing = RunListing(
            snapshot.run_id, snapshot.parent, snapshot.source.value, snapshot.state.value, updated,
            None, snapshot.model_dump_json(),
        )  # fmt: skip
        found.append((key, listing, started))
    found.sort(key=lambda item: item[0], reverse=query.descending)
    return [(*listing, started) for _, listing, started in found[: query.limit]]


def _holds(store: Store, session_id: str, task: str | None, needle: str) -> bool:
    if task is not None and needle in task.lower():
        return True
    kinds = ("run_started", "llm_completed", "tool_completed", "custom")
    return any(
        row.kind in kinds and needle in row.event_bytes.decode("utf-8", "replace").lower()
        for row in store.read_events(session_id)
    )
