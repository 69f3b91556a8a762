"""Durable outranks live (seed 002): the merge table, abandoned runs, the live registry, following events."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from flightlog.live import (
    DEFAULT_LEASE_MS,
    LiveRegistry,
    ends_session,
    follow_events,
    is_abandoned,
    list_run_views,
    list_runs_json_live,
    live_records,
    merge,
)
from flightlog.runs import (
    AgentRunSnapshot,
    BudgetSummary,
    RunSource,
    RunState,
    TerminalOutcome,
    TerminalSummary,
    list_runs,
)
from flightlog.store import SqliteStore
from flightlog.store.base import LiveRunRecord

from .conftest import checkpoint, custom, llm, record, requested, started, suspended, terminal

NOW = 1_000_000
LEASE = 30_000


def durable(state: RunState, tokens: int | None = None, steps: int | None = None) -> AgentRunSnapshot:
    summary = TerminalSummary(outcome=TerminalOutcome.COMPLETED) if state is RunState.TERMINAL else None
    return AgentRunSnapshot(
        run_id="r",
        source=RunSource.DIRECT,
        state=state,
        budget=BudgetSummary(tokens_used=tokens, steps_taken=steps),
        terminal=summary,
    )


def live(state: str, heartbeat: int, tokens: int | None = None, steps: int | None = None) -> LiveRunRecord:
    return LiveRunRecord("r", state, heartbeat, heartbeat, tokens, steps, 1)


FRESH, STALE = NOW - 1_000, NOW - LEASE - 1

# durable state, live record, last durable event ms -> merged state, abandoned, live used
MERGE_TABLE = [
    (
        "terminal wins over fresh live",
        RunState.TERMINAL,
        live("running", FRESH),
        None,
        RunState.TERMINAL,
        False,
        False,
    ),
    (
        "terminal wins over stale live",
        RunState.TERMINAL,
        live("running", STALE),
        None,
        RunState.TERMINAL,
        False,
        False,
    ),
    ("terminal, no live, long ago", RunState.TERMINAL, None, 0, RunState.TERMINAL, False, False),
    (
        "live refines running",
        RunState.RUNNING,
        live("waiting_tool", FRESH),
        None,
        RunState.WAITING_TOOL,
        False,
        True,
    ),
    (
        "live refines a suspension",
        RunState.WAITING_INPUT,
        live("running", FRESH),
        None,
        RunState.RUNNING,
        False,
        True,
    ),
    (
        "live refines waiting_model",
        RunState.WAITING_MODEL,
        live("waiting_model", FRESH),
        None,
        RunState.WAITING_MODEL,
        False,
        True,
    ),
    (
        "a live state older than the latest durable event yields to it",
        RunState.WAITING_TOOL,
        LiveRunRecord("r", "running", FRESH, FRESH - 5_000, None, None, 1),  # heartbeat fresh, state old
        FRESH - 1,
        RunState.WAITING_TOOL,
        False,
        True,
    ),
    (
        # The kernel publishes "running" as a run starts; its checkpoint can land in the same ms (CI saw it).
        "a live state published in the same ms as the latest durable event yields to it",
        RunState.WAITING_MODEL,
        LiveRunRecord("r", "running", FRESH, FRESH - 1, None, None, 1),
        FRESH - 1,
        RunState.WAITING_MODEL,
        False,
        True,
    ),
    (
        # `flightlog abort` fences the writer off; its process heartbeats on while a tool of its finishes.
        "a run paused after the live state was published is not live",
        RunState.PAUSED,
        LiveRunRecord("r", "waiting_tool", FRESH, FRESH - 5_000, None, None, 1),
        FRESH - 1,
        RunState.PAUSED,
        False,
        False,
    ),
    (
        "a live state newer than the latest durable event refines it",
        RunState.RUNNING,
        live("waiting_model", FRESH),
        FRESH - 1,
        RunState.WAITING_MODEL,
        False,
        True,
    ),
    (
        "stale live is ignored",
        RunState.WAITING_TOOL,
        live("running", STALE),
        None,
        RunState.WAITING_TOOL,
        True,
        False,
    ),
    (
        "stale live, recent event",
        RunState.RUNNING,
        live("waiting_model", STALE),
        FRESH,
        RunState.RUNNING,
        False,
        False,
    ),
    ("no live, recent event", RunState.RUNNING, None, FRESH, RunState.RUNNING, False, False),
    ("no live, old event", RunState.RUNNING, None, STALE, RunState.RUNNING, True, False),
    ("no live, no event time", RunState.INITIALIZING, None, None, RunState.INITIALIZING, True, False),
    ("stopping nobody finishes", RunState.STOPPING, None, STALE, RunState.STOPPING, True, False),
    (
        "waiting_input needs no process",
        RunState.WAITING_INPUT,
        None,
        STALE,
        RunState.WAITING_INPUT,
        False,
        False,
    ),
    ("paused needs no process", RunState.PAUSED, None, None, RunState.PAUSED, False, False),
    ("queued needs no process", RunState.QUEUED, None, None, RunState.QUEUED, False, False),
    (
        "a live 'terminal' is not trusted",
        RunState.RUNNING,
        live("terminal", FRESH),
        STALE,
        RunState.RUNNING,
        False,
        False,
    ),
    (
        "an unknown live state is ignored",
        RunState.RUNNING,
        live("dancing", FRESH),
        STALE,
        RunState.RUNNING,
        False,
        False,
    ),
]


@pytest.mark.parametrize(
    ("name", "state", "live_record", "last_durable", "merged", "abandoned", "used"),
    MERGE_TABLE,
    ids=[row[0] for row in MERGE_TABLE],
)
def test_merge_table(
    name: str,
    state: RunState,
    live_record: LiveRunRecord | None,
    last_durable: int | None,
    merged: RunState,
    abandoned: bool,
    used: bool,
) -> None:
    view = merge(durable(state), live_record, now_ms=NOW, lease_ms=LEASE, last_durable_ms=last_durable)
    assert view.snapshot.state is merged
    assert view.durable_state is state
    assert view.abandoned is abandoned
    assert (view.live is not None) is used
    assert view.snapshot.is_coherent()
    if state is RunState.TERMINAL:
        assert view.snapshot == durable(state)  # exactly what the ledger says


def test_merge_takes_the_larger_spend_and_keeps_durable_facts() -> None:
    view = merge(
        durable(RunState.RUNNING, tokens=500, steps=2), live("waiting_model", FRESH, 800, 1), now_ms=NOW
    )
    assert (view.snapshot.budget.tokens_used, view.snapshot.budget.steps_taken) == (800, 2)
    unknown = merge(durable(RunState.RUNNING), live("running", FRESH, None, 3), now_ms=NOW)
    assert (unknown.snapshot.budget.tokens_used, unknown.snapshot.budget.steps_taken) == (None, 3)
    assert view.last_seen_ms == FRESH


def test_abandoned_rule() -> None:
    assert is_abandoned(RunState.RUNNING, None, now_ms=NOW, lease_ms=LEASE)
    assert not is_abandoned(RunState.RUNNING, NOW - LEASE, now_ms=NOW, lease_ms=LEASE)
    assert is_abandoned(RunState.RUNNING, NOW - LEASE - 1, now_ms=NOW, lease_ms=LEASE)
    assert not is_abandoned(RunState.TERMINAL, None, now_ms=NOW, lease_ms=LEASE)
    assert DEFAULT_LEASE_MS == 30_000


# ─── the registry ─────────────────────────────────────────────────────────────────────────────


class Clock:
    def __init__(self, now: int = NOW) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def test_registry_publish_heartbeat_clear() -> None:
    clock = Clock()
    registry = LiveRegistry(clock=clock)
    first = registry.publish("s1", RunState.WAITING_MODEL, tokens_used=10)
    assert (first.state, first.heartbeat_at_ms, first.changed_at_ms, first.tokens_used) == (
        "waiting_model",
        NOW,
        NOW,
        10,
    )
    clock.now += 500
    same = registry.publish("s1", "waiting_model", steps_taken=1)
    assert (same.changed_at_ms, same.heartbeat_at_ms, same.tokens_used, same.steps_taken) == (
        NOW,
        NOW + 500,
        10,
        1,
    )
    clock.now += 500
    changed = registry.publish("s1", "waiting_tool")
    assert changed.changed_at_ms == NOW + 1000
    clock.now += 500
    beat = registry.heartbeat("s1")
    assert beat is not None and beat.heartbeat_at_ms == NOW + 1500 and beat.state == "waiting_tool"
    assert registry.heartbeat("unknown") is None
    registry.clear("s1")
    assert registry.get("s1") is None and registry.records() == {}


def test_registry_refuses_terminal_and_bad_counts() -> None:
    registry = LiveRegistry()
    with pytest.raises(ValueError, match="terminal"):
        registry.publish("s1", RunState.TERMINAL)
    with pytest.raises(ValueError):
        registry.publish("s1", "finished")
    with pytest.raises(ValueError, match="tokens_used"):
        registry.publish("s1", "running", tokens_used=-1)


def test_live_state_crosses_processes_through_the_store(db_path: Path) -> None:
    with SqliteStore(db_path) as writer, SqliteStore(db_path, read_only=True) as reader:
        record(writer, "s1", [started()])
        # published after the ledger's last event (in the same ms the durable state would outrank it)
        last_ms = max(r.recorded_at_ms for r in writer.read_events("s1"))
        registry = LiveRegistry(writer, clock=Clock(last_ms + 1))
        registry.publish("s1", "waiting_tool", tokens_used=42)
        assert [r.state for r in reader.live_runs()] == ["waiting_tool"]
        views = list_run_views(reader)
        assert views[0].snapshot.state is RunState.WAITING_TOOL
        assert views[0].snapshot.budget.tokens_used == 42
        assert views[0].durable_state is RunState.RUNNING
        registry.clear("s1")
        assert reader.live_runs() == []


def test_a_registry_clears_only_the_record_it_wrote(db_path: Path) -> None:
    """Two holders of one run in two handles (as two processes): the one that published last owns the
    stored record; the other's heartbeat does not replace it, and its ending (a fenced-off holder) leaves
    it. Before: its beat took the record back and its clear deleted the live holder's record, and the
    dashboard showed a running run as not live."""
    with SqliteStore(db_path) as first_store, SqliteStore(db_path) as second_store:
        old, new = LiveRegistry(first_store), LiveRegistry(second_store)
        assert old.owner != new.owner
        old.publish("s1", "waiting_tool")
        published = new.publish("s1", "running")  # the resume that took the run over
        assert old.heartbeat("s1") is None  # a beat of the old holder does not take the record back
        assert first_store.live_runs() == [published] and old.get("s1") is not None
        old.clear("s1")
        assert old.get("s1") is None
        assert first_store.live_runs() == [published] and published.owner == new.owner
        new.clear("s1")
        assert first_store.live_runs() == []


def test_newest_heartbeat_wins_between_table_and_registry(store: SqliteStore) -> None:
    table = LiveRegistry(store, clock=Clock(NOW))
    table.publish("s1", "running")
    local = LiveRegistry(clock=Clock(NOW + 10))
    local.publish("s1", "waiting_model")
    assert live_records(store, local)["s1"].state == "waiting_model"
    assert live_records(store)["s1"].state == "running"
    assert live_records() == {}


def test_pulse_heartbeats_in_the_background_then_clears(store: SqliteStore) -> None:
    registry = LiveRegistry(store)
    registry.publish("s1", "running")
    first = registry.get("s1")
    assert first is not None
    with registry.pulse("s1", every_s=0.01):
        deadline = time.monotonic() + 60
        while (
            current := registry.get("s1")
        ) is not None and current.heartbeat_at_ms == first.heartbeat_at_ms:
            assert time.monotonic() < deadline
            time.sleep(0.005)
    assert registry.get("s1") is None and store.live_runs() == []


# ─── views over a store ───────────────────────────────────────────────────────────────────────


def test_views_filter_on_the_merged_state_and_flag_abandoned_runs(store: SqliteStore) -> None:
    record(store, "done", [started(), terminal()])
    record(store, "busy", [started(), checkpoint()])
    record(store, "crashed", [started(), llm(1, "c1"), requested("c1")])
    record(store, "asking", [started(), suspended("approval", "c1")])
    registry = LiveRegistry()
    registry.publish("busy", "waiting_tool")
    registry.publish("done", "running")  # a lagging live record of a finished run
    stale = registry.get("busy")
    assert stale is not None
    last_heard = max([stale.heartbeat_at_ms, *(s.updated_at_ms for s in store.query_runs())])
    later = last_heard + DEFAULT_LEASE_MS + 1
    views = {
        v.snapshot.run_id: v for v in list_run_views(store, registry=registry, now_ms=stale.heartbeat_at_ms)
    }
    assert views["done"].snapshot.state is RunState.TERMINAL and views["done"].live is None
    assert views["busy"].snapshot.state is RunState.WAITING_TOOL
    assert not any(v.abandoned for v in views.values())
    waiting_tool = list_run_views(
        store, state="waiting_tool", registry=registry, now_ms=stale.heartbeat_at_ms
    )
    assert sorted(v.snapshot.run_id for v in waiting_tool) == ["busy", "crashed"]
    abandoned = list_run_views(store, registry=registry, now_ms=later, abandoned_only=True)
    assert sorted(v.snapshot.run_id for v in abandoned) == ["busy", "crashed"]  # heartbeat lapsed too
    assert all(
        v.snapshot == v.snapshot.model_copy() and not v.snapshot.state.is_terminal() for v in abandoned
    )
    text = list_runs_json_live(store, registry=registry, now_ms=stale.heartbeat_at_ms)
    assert json.loads(text) == [
        json.loads(v.snapshot.model_dump_json())
        for v in list_run_views(store, registry=registry, now_ms=stale.heartbeat_at_ms)
    ]
    assert json.loads(list_runs_json_live(store, state="terminal", registry=registry)) == [
        json.loads(s.model_dump_json()) for s in list_runs(store, state="terminal")
    ]
    assert list_runs_json_live(store, state="paused") == "[]"
    everything = list_run_views(store, registry=registry, now_ms=stale.heartbeat_at_ms)
    assert list_run_views(store, registry=registry, now_ms=stale.heartbeat_at_ms, limit=2) == everything[:2]
    first_tool = list_run_views(
        store, state="waiting_tool", registry=registry, now_ms=stale.heartbeat_at_ms, limit=1
    )
    assert first_tool == waiting_tool[:1]
    limited = list_runs_json_live(store, registry=registry, now_ms=stale.heartbeat_at_ms, limit=3)
    assert json.loads(limited) == json.loads(text)[:3]
    limited = list_runs_json_live(
        store, state="waiting_tool", registry=registry, now_ms=stale.heartbeat_at_ms, limit=1
    )
    assert [item["run_id"] for item in json.loads(limited)] == [waiting_tool[0].snapshot.run_id]


# ─── following a session ──────────────────────────────────────────────────────────────────────


def test_follow_without_follow_prints_what_is_there(store: SqliteStore) -> None:
    record(store, "s1", [started(), checkpoint()])
    assert [row.seq for row, _ in follow_events(store, "s1")] == [0, 1]
    assert [row.seq for row, _ in follow_events(store, "s1", start=1)] == [1]


def test_follow_sees_new_events_and_stops_at_run_terminal(store: SqliteStore) -> None:
    recorder = record(store, "s1", [started()])
    script = [[checkpoint()], [], [llm()], [terminal()], [custom("after", {})]]
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:  # another writer acts between polls
        sleeps.append(seconds)
        batch = script.pop(0)
        if batch:
            recorder.append_many(batch)

    kinds = [event.kind for _, event in follow_events(store, "s1", follow=True, poll_s=0.05, sleep=sleep)]
    assert kinds == ["run_started", "checkpoint_taken", "llm_completed", "run_terminal"]
    assert sleeps == [0.05] * 4


def test_follow_stops_when_the_session_is_finished_or_sealed(store: SqliteStore) -> None:
    recorder = record(store, "s1", [started()])

    def finish(seconds: float) -> None:
        recorder.finish("failed")

    assert len(list(follow_events(store, "s1", follow=True, sleep=finish))) == 1
    sealed = record(store, "s2", [started(), custom("session_sealed", {})])
    assert len(list(follow_events(store, "s2", follow=True, sleep=pytest.fail))) == 2
    assert ends_session(custom("seal", {})) and not ends_session(custom("note", {}))
    assert sealed.session_id == "s2"
