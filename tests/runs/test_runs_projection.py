"""The ``runs`` projection: kept current in the append transaction, equal to a rebuild, indexed queries."""

from __future__ import annotations

import dataclasses
import json
import logging
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from flightlog import events as ev
from flightlog.events import Event
from flightlog.importers import import_file
from flightlog.recorder import Recorder
from flightlog.runs import (
    FOLD_VERSION,
    AgentRunSnapshot,
    RunSource,
    RunState,
    TerminalOutcome,
    build_tree,
    compute_runs,
    list_runs,
    list_runs_json,
    projection_ready,
    rebuild_projection,
)
from flightlog.runs import projection as projection_module
from flightlog.store import SqliteStore, Store
from flightlog.store import sqlite as sqlite_backend
from flightlog.store.base import RunRow
from flightlog.store.rows import run_row

from .conftest import (
    cancelled,
    checkpoint,
    completed,
    custom,
    gated,
    llm,
    process,
    record,
    requested,
    resumed,
    started,
    suspended,
    terminal,
)
from .projection_races import (
    check_a_refold_locks_every_row_it_writes_at_once,
    check_an_edited_row_is_rewritten_by_the_next_append,
    check_concurrent_writers_lose_nothing,
)

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "samples"


def all_rows(store: Store) -> dict[str, RunRow]:
    return store.get_run_rows([listing.run_id for listing in store.query_runs()])


def by_id(snapshots: list[AgentRunSnapshot]) -> dict[str, AgentRunSnapshot]:
    return {s.run_id: s for s in snapshots}


# ─── kept current ─────────────────────────────────────────────────────────────────────────────


def test_every_append_updates_the_row_in_its_transaction(store: SqliteStore) -> None:
    recorder = record(store, "s1", [started()], source="kernel")
    assert [s.state for s in list_runs(store)] == [RunState.RUNNING]
    recorder.append(checkpoint())
    assert list_runs(store)[0].state is RunState.WAITING_MODEL
    with pytest.raises(RuntimeError), recorder.atomic():
        recorder.append_many([llm(1, "c1"), requested("c1")])
        assert list_runs(store)[0].state is RunState.WAITING_TOOL  # same transaction sees it
        raise RuntimeError("boom")
    assert list_runs(store)[0].state is RunState.WAITING_MODEL  # rolled back with the events
    recorder.append_many([llm(1, "c1"), requested("c1")])
    assert list_runs(store)[0].state is RunState.WAITING_TOOL
    assert projection_ready(store)


def test_appends_after_the_row_moved_under_the_recorder_resume_from_the_stored_row(
    store: SqliteStore,
) -> None:
    """The fast path compares-and-sets the row the recorder last wrote; whatever changed the stored row
    since (a status change, a rebuild, a parent's process entry, a rolled-back batch) sends the append
    down the general path, and every step still equals a rebuild. (A deleted row: the test above.)"""
    recorder = record(store, "s1", [started(), checkpoint()], source="kernel")
    parent = record(store, "p", [started()])

    def step(change: Any) -> None:
        change()
        recorder.append(checkpoint())
        incremental = all_rows(store)
        rebuild_projection(store)
        assert all_rows(store) == incremental

    step(lambda: store.set_session_status("s1", "suspended"))  # the trigger moves session_status
    step(lambda: rebuild_projection(store))  # rewritten by a rebuild (equal rows: the swap applies)
    step(lambda: parent.append(process("s1", "running", "p")))  # the parent's process entry for s1

    def rolled_back() -> None:
        with pytest.raises(KeyError), recorder.atomic():
            recorder.append_many([llm(1, "c1"), requested("c1")])
            raise KeyError("abort")

    step(rolled_back)
    step(lambda: None)
    assert projection_ready(store)
    assert list_runs(store, state="waiting_model")[0].run_id == "s1"


def test_a_session_without_events_is_not_a_run_yet(store: SqliteStore) -> None:
    Recorder.create(store, session_id="empty")
    assert list_runs(store) == []
    assert compute_runs(store) == []


def test_finish_status_refines_only_in_flight_runs_and_filters_by_it(store: SqliteStore) -> None:
    ended = record(store, "ended", [started(), terminal("failed")])
    crashed = record(store, "crashed", [started(), requested("c1")])
    ended.finish("completed")  # events already said failed: status does not override
    crashed.finish("interrupted")  # not an event: the backend keeps the row's status in step
    runs = by_id(list_runs(store))
    assert runs["ended"].terminal is not None and runs["ended"].terminal.outcome is TerminalOutcome.FAILED
    assert runs["crashed"].state is RunState.TERMINAL
    assert runs["crashed"].terminal is not None
    assert runs["crashed"].terminal.outcome is TerminalOutcome.INTERRUPTED
    assert [s.run_id for s in list_runs(store, state="waiting_tool")] == []
    assert {s.run_id for s in list_runs(store, state=RunState.TERMINAL)} == {"ended", "crashed"}
    assert json.loads(list_runs_json(store, state="terminal"))[0]["terminal"]["detail"] in (
        "session marked interrupted",
        "failed",
    )
    before = all_rows(store)
    rebuild_projection(store)
    assert all_rows(store) == before


def test_kernel_cancelled_status_is_a_resumable_pause(store: SqliteStore) -> None:
    recorder = record(store, "k1", [started(), checkpoint(), cancelled()], source="kernel")
    assert list_runs(store)[0].state is RunState.STOPPING
    store.set_session_status("k1", "cancelled")  # the kernel stopped the activation; resumable
    assert list_runs(store)[0].state is RunState.PAUSED
    assert [s.run_id for s in list_runs(store, state="paused")] == ["k1"]
    assert list_runs(store, state="stopping") == []
    assert json.loads(list_runs_json(store))[0]["state"] == "paused"
    recorder.append(resumed())
    store.set_session_status("k1", "running")
    assert list_runs(store)[0].state is RunState.RUNNING


def test_filters_order_and_json_wire(store: SqliteStore) -> None:
    record(store, "old", [started(), terminal()], source="kernel")
    time.sleep(0.003)
    record(store, "fleet-1", [started()], metadata={"run_source": "fleet"})
    time.sleep(0.003)
    record(store, "kid", [started(), suspended("backoff")], parent_session_id="old")
    assert [s.run_id for s in list_runs(store)] == ["kid", "fleet-1", "old"]  # newest first
    assert [s.run_id for s in list_runs(store, limit=2)] == ["kid", "fleet-1"]
    assert [item["run_id"] for item in json.loads(list_runs_json(store, limit=1))] == ["kid"]
    assert list_runs(store, limit=0) == []
    assert [s.run_id for s in list_runs(store, source=RunSource.FLEET)] == ["fleet-1"]
    assert [s.run_id for s in list_runs(store, parent="old")] == ["kid"]
    assert [s.run_id for s in list_runs(store, state="paused", parent="old")] == ["kid"]
    assert list_runs(store, state="paused", source="fleet") == []
    array = json.loads(list_runs_json(store))
    assert [AgentRunSnapshot.model_validate(item) for item in array] == list_runs(store)
    with pytest.raises(ValueError):
        list_runs(store, state="sleeping")
    with pytest.raises(ValueError):
        list_runs(store, source="cron")


def test_kernel_sub_agents_from_the_process_table(store: SqliteStore) -> None:
    parent = record(
        store, "boss", [started(), process("w1", "spawned", "boss"), process("w2", "running", "boss")]
    )
    runs = by_id(list_runs(store))
    assert runs["w1"].state is RunState.INITIALIZING and runs["w1"].parent == "boss"
    assert runs["w2"].state is RunState.RUNNING
    record(store, "w1", [started(), requested("c1")], parent_session_id="boss")
    assert by_id(list_runs(store))["w1"].state is RunState.WAITING_TOOL  # its own ledger is richer
    parent.append(process("w1", "exited", "boss", termination="completed"))
    w1 = by_id(list_runs(store))["w1"]
    assert w1.state is RunState.TERMINAL and w1.terminal is not None
    assert w1.terminal.outcome is TerminalOutcome.COMPLETED
    assert w1.budget.steps_taken == 0  # budget still from its own session
    tree = build_tree(list_runs(store))
    assert [n.snapshot.run_id for n in tree] == ["boss"]
    assert sorted(c.snapshot.run_id for c in tree[0].children) == ["w1", "w2"]
    before = all_rows(store)
    rebuild_projection(store)
    assert all_rows(store) == before


# ─── imported transcripts ─────────────────────────────────────────────────────────────────────


def test_imported_samples_form_the_parent_child_tree(store: SqliteStore) -> None:
    import_started_ms = time.time_ns() // 1_000_000
    for path in sorted(SAMPLES.glob("*/*.jsonl")):
        import_file(store, path, seal=True)  # complete transcripts: each run's end is recorded
    runs = list_runs(store)
    assert len(runs) == len(list(store.list_sessions()))
    assert all(s.is_coherent() and s.state is RunState.TERMINAL for s in runs)
    parent_id = "claude-code:491e126e-1e71-469c-ade2-fcc8af567c74"
    child_id = parent_id + ":agent:afb92ff"
    children = list_runs(store, parent=parent_id)
    assert [c.run_id for c in children] == [child_id]
    child = children[0]
    assert child.terminal is not None and child.terminal.outcome is TerminalOutcome.COMPLETED
    assert child.budget.duration_ms == 38_799  # recorded by Claude Code itself
    # The run ends at the transcript's own time: the sub-agent's last message (2026-02-10T21:58:27.124Z).
    assert child.terminal.ended_at_ms == 1_770_760_707_124
    tree = {n.snapshot.run_id: n for n in build_tree(runs)}
    assert child_id not in tree and [c.snapshot.run_id for c in tree[parent_id].children] == [child_id]
    unfinished = by_id(runs)["codex:019c8a70-dda7-7f33-98ea-f30553347322"]
    assert unfinished.terminal is not None
    assert unfinished.terminal.outcome is TerminalOutcome.INTERRUPTED  # the file ended mid-run
    aborted = by_id(runs)["claude-code:55604662-cf2a-4331-851a-ec234028f8ca"]
    assert aborted.terminal is not None and aborted.terminal.outcome is TerminalOutcome.CANCELLED
    text = list_runs_json(store)
    for item in json.loads(text):
        # Claude Code and Codex rows carry the transcript's own times: every run ended before the import;
        # a background task the transcript never shows ending has no end time at all (never the import's).
        if item["source"] == "task":
            assert "ended_at_ms" not in item["terminal"]
        else:
            assert item["terminal"]["ended_at_ms"] < import_started_ms
        for ref in item.get("refs", []):
            assert "/" not in ref["reference"] and "\\" not in ref["reference"]
    before = all_rows(store)
    rebuild_projection(store)
    assert all_rows(store) == before


# ─── stale, missing, failing projections ──────────────────────────────────────────────────────


def test_sessions_recorded_before_the_projection_are_refolded_on_their_next_append(
    store: SqliteStore,
) -> None:
    recorder = record(store, "s1", [started(), requested("c1"), gated("c1")])
    with store.transaction():
        store.clear_run_rows()  # as if recorded by a version without the projection
    recorder.append(resumed(["c1"]))
    incremental = all_rows(store)
    rebuild_projection(store)
    assert all_rows(store) == incremental
    assert list_runs(store)[0].refs[0].label == "shell: approved"


def test_stale_projection_falls_back_to_folding_the_ledgers(store: SqliteStore) -> None:
    record(store, "a", [started(), terminal()])
    record(store, "b", [started(), checkpoint()], parent_session_id="a")
    expected = list_runs(store)
    store.set_run_projection_version(0)
    assert not projection_ready(store)
    assert list_runs(store) == expected
    assert list_runs(store, limit=1) == expected[:1]
    assert list_runs(store, state="waiting_model") == [expected[0]]
    assert json.loads(list_runs_json(store, parent="a"))[0]["run_id"] == "b"
    rebuild_projection(store)
    assert projection_ready(store)
    assert list_runs(store) == expected


@pytest.mark.parametrize("path", ["advance", "apply"])
def test_a_failing_projector_never_loses_an_append(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, path: str
) -> None:
    """On either path: the compare-and-set of the row the recorder last wrote (``advance``), or the general
    read-and-upsert (``apply``: a recorder that has written no row yet, as after ``attach``)."""
    recorder = record(store, "s1", [started()])
    if path == "apply":
        recorder = Recorder.attach(store, "s1")

    def broken(*rows: Any) -> None:
        raise RuntimeError("projection bug")

    monkeypatch.setattr(store, "replace_run_row" if path == "advance" else "put_run_rows", broken)
    with caplog.at_level(logging.ERROR, logger="flightlog.runs"):
        recorder.append(checkpoint())
    assert "projection failed" in caplog.text
    assert store.get_session("s1").head_seq == 1  # the append is durable
    assert not projection_ready(store)
    assert list_runs(store)[0].state is RunState.WAITING_MODEL  # readers fold the ledgers
    monkeypatch.undo()
    rebuild_projection(store)
    assert projection_ready(store) and list_runs(store)[0].state is RunState.WAITING_MODEL


def test_migrating_a_database_with_events_marks_the_projection_for_rebuild(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = next(i for i, (d, _) in enumerate(sqlite_backend.MIGRATIONS) if d.startswith("runs projection"))
    monkeypatch.setattr(sqlite_backend, "MIGRATIONS", sqlite_backend.MIGRATIONS[:mine])
    logging.getLogger("flightlog.runs").disabled = True  # the projector has no table yet: it only logs
    try:
        with SqliteStore(db_path) as store:  # a database made by a version without the projection
            record(store, "s1", [started()])
            assert store.run_projection_version() is None
    finally:
        logging.getLogger("flightlog.runs").disabled = False
    with SqliteStore(db_path, read_only=True) as old:  # an older schema, read-only: no projection at all
        assert old.run_projection_version() is None and old.live_runs() == []
        assert [s.state for s in list_runs(old)] == [RunState.RUNNING]
    monkeypatch.undo()
    with SqliteStore(db_path) as store:  # migrating with events present: rebuild needed
        assert store.run_projection_version() == 0
        assert [s.state for s in list_runs(store)] == [RunState.RUNNING]
        rebuild_projection(store)
        assert store.run_projection_version() == FOLD_VERSION
        assert [s.state for s in list_runs(store)] == [RunState.RUNNING]


def test_a_projection_built_by_the_previous_fold_rules_is_marked_for_rebuild(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = next(i for i, (d, _) in enumerate(sqlite_backend.MIGRATIONS) if d.startswith("runs fold rules 2"))
    monkeypatch.setattr(sqlite_backend, "MIGRATIONS", sqlite_backend.MIGRATIONS[:mine])
    with SqliteStore(db_path) as store:  # fold rules 1: its rows were current then
        record(store, "s1", [started(), requested("c1"), gated("c1"), cancelled("c1")])
        assert store.run_projection_version() == 1
    monkeypatch.undo()
    with SqliteStore(db_path) as store:
        assert store.run_projection_version() == 0 and not projection_ready(store)
        assert [r.label for r in list_runs(store)[0].refs] == ["shell: cancelled"]  # folded from the ledger
        rebuild_projection(store)
        assert projection_ready(store) and [r.label for r in list_runs(store)[0].refs] == ["shell: cancelled"]


def test_rebuild_refuses_a_read_only_store(db_path: Path) -> None:
    from flightlog.errors import ReadOnlyStore

    with SqliteStore(db_path) as store:
        record(store, "s1", [started()])
    with SqliteStore(db_path, read_only=True) as ro, pytest.raises(ReadOnlyStore):
        rebuild_projection(ro)


# ─── incremental == rebuild, for any history ──────────────────────────────────────────────────

SESSIONS = ["a", "b", "c", "team/d"]
AGENTS = [*SESSIONS, "ghost"]
STATUSES = ["running", "completed", "failed", "interrupted", "suspended", "cancelled"]

EVENT = st.one_of(
    st.sampled_from(
        [
            started(),
            checkpoint(),
            llm(1, "c1"),
            requested("c1"),
            completed("c1"),
            gated("c1"),
            resumed(["c1"]),
            suspended("approval", "c1"),
            suspended("backoff"),
            cancelled(),
            ev.Rollbacked(turn=1, checkpoint_history_len=0),
            ev.BudgetExceeded(turn=1, operation_id="o", budget="tokens"),
            custom("token_usage", {"total_tokens": 3}),
            custom("budget_configured", {"token_budget": 99}),
            custom("run_ref", {"kind": "gate", "reference": "gate:x"}),
            terminal("completed"),
            terminal("aborted"),
            terminal("odd"),
        ]
    ),
    st.builds(
        process,
        st.sampled_from(AGENTS),
        st.sampled_from(["spawned", "running", "exited", "killed", "paused"]),
        st.just("p"),
        st.sampled_from([None, "completed", "failed"]),
    ),
)

OP = st.one_of(
    st.tuples(st.just("append"), st.sampled_from(SESSIONS), st.lists(EVENT, min_size=1, max_size=4)),
    st.tuples(st.just("rollback"), st.sampled_from(SESSIONS), st.lists(EVENT, min_size=1, max_size=3)),
    st.tuples(st.just("finish"), st.sampled_from(SESSIONS), st.sampled_from(STATUSES)),
    st.tuples(st.just("create"), st.sampled_from(SESSIONS), st.sampled_from([None, *SESSIONS])),
)


def _run(store: SqliteStore, ops: list[tuple[Any, ...]]) -> None:
    recorders: dict[str, Recorder] = {}

    def recorder(sid: str, parent: str | None = None) -> Recorder:
        if sid not in recorders:
            meta = {"run_source": "fleet"} if sid == "c" else {}
            recorders[sid] = Recorder.create(store, session_id=sid, parent_session_id=parent, metadata=meta)
        return recorders[sid]

    for op in ops:
        kind, sid, arg = op
        if kind == "create":
            recorder(sid, arg if arg != sid else None)
        elif kind == "append":
            recorder(sid).append_many(arg)
        elif kind == "rollback":
            with pytest.raises(KeyError), recorder(sid).atomic():
                recorder(sid).append_many(arg)
                raise KeyError("abort")
        else:
            recorder(sid).finish(arg)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OP, max_size=25))
def test_incremental_projection_equals_a_rebuild(ops: list[tuple[Any, ...]]) -> None:
    with SqliteStore(":memory:") as store:
        _run(store, ops)
        assert projection_ready(store)
        incremental = all_rows(store)
        listed = list_runs(store)
        assert all(s.is_coherent() for s in listed)
        assert listed == [s for s, _ in compute_runs(store)]  # the in-memory fold agrees
        for state in RunState:
            assert list_runs(store, state=state) == [s for s in listed if s.state is state]
        rebuild_projection(store)
        assert all_rows(store) == incremental
        assert list_runs(store) == listed


# ─── tree ─────────────────────────────────────────────────────────────────────────────────────


def _s(run_id: str, parent: str | None = None) -> AgentRunSnapshot:
    return AgentRunSnapshot(run_id=run_id, parent=parent, source=RunSource.DIRECT, state=RunState.RUNNING)


def test_tree_keeps_order_orphans_and_breaks_cycles() -> None:
    snapshots = [
        _s("root"),
        _s("a", "root"),
        _s("b", "root"),
        _s("orphan", "gone"),
        _s("x", "y"),
        _s("y", "x"),
    ]
    roots = build_tree(snapshots)
    assert [n.snapshot.run_id for n in roots] == ["root", "orphan", "x"]
    assert [c.snapshot.run_id for c in roots[0].children] == ["a", "b"]
    assert [c.snapshot.run_id for c in roots[2].children] == ["y"]
    seen: list[str] = []
    stack = list(roots)
    while stack:
        node = stack.pop()
        seen.append(node.snapshot.run_id)
        stack.extend(node.children)
    assert sorted(seen) == sorted(s.run_id for s in snapshots)
    assert build_tree([_s("self", "self")])[0].children == []


def test_projection_rows_hold_only_logical_json(store: SqliteStore) -> None:
    record(store, "s1", [started(), custom("run_ref", {"kind": "artifact", "reference": "/tmp/x"})])
    row = all_rows(store)["s1"]
    assert json.loads(row.snapshot)["run_id"] == "s1" and "/tmp/x" not in row.snapshot
    assert json.loads(row.fold)["v"] == FOLD_VERSION


def test_projected_row_holds_each_value_in_its_own_field(store: SqliteStore) -> None:
    """``_row`` builds the row with ``run_row`` (slot by slot): every field is pinned to its value, each
    distinct, so a value stored in the wrong slot fails here (a rebuild would agree with the mistake)."""
    record(store, "s1", [started(), llm(1), terminal()], parent_session_id="boss")
    row = all_rows(store)["s1"]
    last = list(store.read_events("s1"))[-1]
    snapshot, fold = json.loads(row.snapshot), json.loads(row.fold)
    assert (row.run_id, row.parent, row.source) == ("s1", "boss", snapshot["source"])
    assert (row.state, row.outcome) == ("terminal", "completed") == (snapshot["state"], "completed")
    assert (row.updated_at_ms, row.last_seq, row.session_status) == (last.recorded_at_ms, 2, "running")
    assert snapshot["run_id"] == "s1" and snapshot["parent"] == "boss"
    assert fold["v"] == FOLD_VERSION and fold["session"]["last_seq"] == 2


def test_run_row_builds_the_frozen_row_init_builds() -> None:
    values = ("r", "p", "fleet", "terminal", "completed", 7, 3, None, '{"s":1}', '{"f":1}')
    row = run_row(*values)
    assert type(row) is RunRow and row == RunRow(*values) and dataclasses.astuple(row) == values
    assert run_row(*values[:7], "running", *values[8:]) != row  # each value lands in its own slot
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.state = "running"  # type: ignore[misc]
    assert dataclasses.replace(row, last_seq=4) == RunRow(*values[:6], 4, *values[7:])
    assert hash(row) == hash(RunRow(*values))


def test_unused_event_kinds_do_not_disturb_state(store: SqliteStore) -> None:
    extra: list[Event] = [
        ev.EntropySample(
            turn=1,
            score=0.1,
            rho=0.1,
            repeat_pressure=0,
            failure_rate=0,
            rollbacks_in_window=0,
            window_turns=1,
        ),
        ev.CapabilityChanged(turn=1, added=["x"]),
        ev.MemoryRetrievalResult(hits=[]),
    ]
    record(store, "s1", [started(), *extra])
    assert list_runs(store)[0].state is RunState.RUNNING


# ─── row writes and indexes ───────────────────────────────────────────────────────────────────


def _run_row(run_id: str, **changes: Any) -> RunRow:
    base = RunRow(
        run_id=run_id,
        parent=None,
        source="direct",
        state="running",
        outcome=None,
        updated_at_ms=1,
        last_seq=0,
        session_status="running",
        snapshot="{}",
        fold="{}",
    )
    return dataclasses.replace(base, **changes)


def test_put_run_rows_writes_every_column_on_every_path(store: SqliteStore) -> None:
    """Insert, same-state update, state change and a change of an indexed column all store the row as given."""
    steps = [
        _run_row("r"),  # insert
        _run_row("r", updated_at_ms=2, last_seq=1, snapshot='{"a":1}', fold='{"f":1}'),  # state kept
        _run_row("r", state="waiting_tool", updated_at_ms=3, last_seq=2),  # state moves
        _run_row("r", state="terminal", outcome="completed", session_status="completed", parent="p"),
        _run_row("r", state="terminal", outcome="completed", session_status=None, source="fleet"),
    ]
    for row in steps:
        store.put_run_rows([row])
        assert store.get_run_rows(["r"]) == {"r": row}


def test_runs_indexes_leave_updated_at_ms_unindexed_but_serve_the_filters(store: SqliteStore) -> None:
    """An append moves ``updated_at_ms`` (and usually nothing indexed): no index may follow it."""
    conn = store._conn
    indexed = {
        name: [col[2] for col in conn.execute(f"PRAGMA index_info({name})")]
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'runs'"
        )
    }
    assert all("updated_at_ms" not in columns for columns in indexed.values())
    assert {"state", "session_status", "source", "parent"} <= {c for cols in indexed.values() for c in cols}
    plan = " ".join(
        str(row[-1])
        for row in conn.execute("EXPLAIN QUERY PLAN SELECT run_id FROM runs WHERE state = 'running'")
    )
    assert "runs_state" in plan


_TEXT = st.text(alphabet=st.characters(max_codepoint=0x2FF)) | st.text()
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | _TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=24,
)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(_TEXT, _JSON, max_size=6))
@example({"del": "\x7f", "ctl": '\x00\x1f"\\/', "big": 2**65, "nested": [{"x": None, "y": True}]})
@example({"utf8": "é", "surrogate": "\ud800"})
def test_fold_text_is_exactly_what_the_json_encoder_writes(state: dict[str, Any]) -> None:
    """The fast fold encoder writes the bytes ``json`` writes (escapes, non-ASCII, DEL, big ints)."""
    assert projection_module._encode(state) == projection_module._ENCODE(state)


def test_an_append_reads_no_runs_row_and_sets_only_what_moved(store: SqliteStore) -> None:
    """The usual append writes its row with one compare-and-set (no SELECT, no savepoint) that leaves the
    indexed columns it does not change alone."""
    recorder = record(store, "s1", [started(), checkpoint()])
    statements: list[str] = []
    store._conn.set_trace_callback(statements.append)
    try:
        recorder.append(checkpoint())  # state stays waiting_model
    finally:
        store._conn.set_trace_callback(None)
    runs = [sql for sql in statements if " runs" in sql]
    assert len(runs) == 1 and runs[0].startswith("UPDATE runs SET")
    assert not any(sql.startswith(("SAVEPOINT", "RELEASE")) for sql in statements)
    assigned = runs[0].split(" WHERE ")[0]
    assert all(f"{column} =" not in assigned for column in ("state", "parent", "source", "outcome", "status"))
    incremental = all_rows(store)
    rebuild_projection(store)
    assert all_rows(store) == incremental


def test_snapshot_reuse_follows_every_change(store: SqliteStore) -> None:
    """The projector reuses a rendered snapshot only while it is unchanged: each step equals a rebuild."""
    recorder = record(store, "s1", [checkpoint()])
    for event in [checkpoint(), started(), checkpoint(), llm(1, "c1"), requested("c1"), completed("c1")]:
        recorder.append(event)
        incremental = all_rows(store)
        rebuild_projection(store)
        assert all_rows(store) == incremental


def test_concurrent_writers_of_one_row_lose_nothing(store: SqliteStore) -> None:
    """The child's appends, its parent's process entries, its status and rebuilds, from four threads at
    once: every change reaches the row and the row equals a rebuild (``projection_races``)."""
    check_concurrent_writers_lose_nothing(store, rebuilds=3)


def test_a_refold_locks_every_row_it_writes_at_once(store: SqliteStore) -> None:
    check_a_refold_locks_every_row_it_writes_at_once(store)


def test_a_runs_row_edited_outside_flightlog_is_rewritten_by_the_next_append(store: SqliteStore) -> None:
    def run_sql(sql: str) -> int:
        with sqlite3.connect(store.path) as conn:
            return conn.execute(sql).rowcount

    check_an_edited_row_is_rewritten_by_the_next_append(store, run_sql)
