"""The dashboard's budget row shows the wall-clock quantity the kernel budgets: active time, not elapsed.

Found by a new-user pass: the row said ``29.4s`` (first event to the end, including the time the run waited
for a human and the time its process was dead) while the kernel's ``wall_clock_ms`` budget counts active time
only (:mod:`flightlog.kernel.budgets`). The row now reads ``active A of LIMIT · elapsed E`` (``active 0.2s of 1m00s · elapsed 0.7s``).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from flightlog.errors import EventDecodeError
from flightlog.kernel import Agent, Budgets, Kernel, Policy, Rule, approve, tool
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.kernel.state import active_time, load_state
from flightlog.store import SqliteStore
from flightlog.web.views import run_view, session_status

WAIT_S = 0.4


@pytest.fixture
def store(db_path: Path) -> Iterator[SqliteStore]:
    with SqliteStore(db_path) as opened:
        yield opened


@tool(effect="side_effect")
def ship(target: str) -> str:
    """Ship it.

    Args:
        target: Where.
    """
    return f"shipped {target}"


def _fmt(ms: int) -> str:
    return f"{ms / 1000:.1f}s"


def test_the_budget_row_shows_active_time_against_the_limit_then_elapsed(store: SqliteStore) -> None:
    model = ScriptedProvider([calls(call("ship", {"target": "prod"}, id="s1")), reply("shipped")])
    agent = Agent(
        name="timed",
        route=[model],
        tools=[ship],
        budgets=Budgets(wall_clock_ms=60_000),
        policy=Policy(rules=(Rule("ask", tool="ship", reason="a human ships"),)),
    )
    first = Kernel(store, agent).run_sync("ship it")
    assert first.status == "suspended"
    time.sleep(WAIT_S)  # waiting for a human: elapsed, never active
    approve(store, first.session_id, "s1", responder="bob")
    assert Kernel(store, agent).resume_sync(first.session_id).status == "completed"

    sid = first.session_id
    active = active_time(store, sid)
    assert (active.used_ms, active.limit_ms) == (load_state(store, sid).wall.used_ms, 60_000)  # the kernel's
    view = run_view(store, sid)
    assert view is not None and view.snapshot.budget.duration_ms is not None
    elapsed = view.snapshot.budget.duration_ms
    assert elapsed - active.used_ms >= WAIT_S * 1000  # the wait is in the elapsed time only
    _, cells, _ = session_status(store, sid)
    assert cells["duration"] == f"active {_fmt(active.used_ms)} of 1m00s · elapsed {_fmt(elapsed)}"


def test_a_run_the_kernel_did_not_record_shows_its_elapsed_time(store: SqliteStore) -> None:
    from flightlog.events import RunStarted, RunTerminal
    from flightlog.recorder import Recorder

    recorder = Recorder.create(store, session_id="other", task="t", source="langgraph")
    recorder.append(RunStarted(run_id="r", goal="g"))
    recorder.append(RunTerminal(reason="completed", turns_used=0, total_tokens=0))
    view = run_view(store, "other")
    assert view is not None
    elapsed = view.snapshot.budget.duration_ms
    assert elapsed is not None
    assert session_status(store, "other")[1]["duration"] == _fmt(elapsed)


def test_an_undecodable_limit_row_says_the_active_time_is_unknown(store: SqliteStore, db_path: Path) -> None:
    model = ScriptedProvider([reply("done")])
    sid = (
        Kernel(store, Agent(name="t", route=[model], budgets=Budgets(wall_clock_ms=1000)))
        .run_sync("go")
        .session_id
    )
    limits = [
        r.seq for r in store.read_events(sid) if r.kind == "custom" and b"budget_limits" in r.event_bytes
    ]
    raw = sqlite3.connect(db_path)
    try:
        raw.execute("DROP TRIGGER events_no_update")
        raw.execute("UPDATE events SET event = X'7B7D' WHERE session_id = ? AND seq = ?", (sid, limits[0]))
        raw.commit()
    finally:
        raw.close()
    unread: list[tuple[str, EventDecodeError]] = []
    cell = session_status(store, sid, undecodable=unread)[1]["duration"]
    assert cell.startswith("active time unknown (an event does not decode)")
    assert [(s, e.seq) for s, e in unread] == [(sid, limits[0])]
    with pytest.raises(EventDecodeError):
        session_status(store, sid)
