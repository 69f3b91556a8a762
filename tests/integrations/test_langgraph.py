"""FlightlogSaver against LangGraph itself: real StateGraphs run on it and on InMemorySaver must agree."""

from __future__ import annotations

import asyncio
import json
import operator
import sqlite3
import subprocess
import sys
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint import conformance
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.conformance.capabilities import Capability
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Interrupt, interrupt
from typer.testing import CliRunner

import flightlog
from child_lines import read_line
from flightlog.cli import app
from flightlog.encoding import decode_stored
from flightlog.errors import LedgerIntegrityError
from flightlog.events import Custom
from flightlog.integrations.langgraph import (
    CHECKPOINT_KIND,
    HEAD_KIND,
    PRUNED_KIND,
    RUNS_DELETED_KIND,
    THREAD_COPIED_KIND,
    THREAD_DELETED_KIND,
    WRITES_KIND,
    FlightlogSaver,
    session_id_for,
)
from flightlog.integrity.notary import USER_NOTARY, resolve_notary
from flightlog.narration import narrate
from flightlog.recorder import Recorder, verify_session
from flightlog.store.base import Store
from flightlog.web.views import event_row


class State(TypedDict, total=False):
    items: Annotated[list[str], operator.add]  # reducer channel: accumulates
    count: int
    answer: str


def _build(saver: BaseCheckpointSaver[Any]) -> Any:
    def plan(state: State) -> State:
        return {"items": ["plan"], "count": state.get("count", 0) + 1}

    def act(state: State) -> State:
        return {"items": [f"act{state['count']}"], "count": state["count"] + 1}

    def review(state: State) -> State:
        answer = interrupt({"question": "ship it?", "items": state["items"]})  # human in the loop
        return {"items": [f"review:{answer}"], "answer": str(answer)}

    g = StateGraph(State)
    g.add_node("plan", plan)
    g.add_node("act", act)
    g.add_node("review", review)
    g.add_edge(START, "plan")
    g.add_edge("plan", "act")
    g.add_edge("act", "review")
    g.add_edge("review", END)
    return g.compile(checkpointer=saver)


def _cfg(thread: str = "t1", **extra: Any) -> RunnableConfig:
    return {"configurable": {"thread_id": thread, **extra}}


def _shape(snapshot: Any) -> tuple[Any, ...]:
    """A StateSnapshot without ids and timestamps (uuid6 ids differ between two runs)."""
    md = {k: v for k, v in (snapshot.metadata or {}).items() if k not in ("run_id",)}
    return (
        snapshot.values,
        snapshot.next,
        md.get("source"),
        md.get("step"),
        [(t.name, [i.value for i in t.interrupts]) for t in snapshot.tasks],
        snapshot.parent_config is not None,
    )


def _norm(value: Any) -> Any:
    """Drop what differs between two identical runs: interrupt ids (derived from checkpoint ids)."""
    if isinstance(value, Interrupt):
        return ("interrupt", _norm(value.value))
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_norm(v) for v in value)
    return value


def _drive(graph: Any, thread: str = "t1") -> list[Any]:
    """Run to the interrupt, resume, then time-travel to the checkpoint after `plan` and fork."""
    out = [graph.invoke({"items": ["start"]}, _cfg(thread))]
    out.append(_shape(graph.get_state(_cfg(thread))))
    out.append(graph.invoke(Command(resume="yes"), _cfg(thread)))
    history = list(graph.get_state_history(_cfg(thread)))
    after_plan = next(s for s in history if s.next == ("act",))
    out.append(graph.invoke(None, after_plan.config))  # replay from an earlier checkpoint: interrupts again
    out.append(graph.invoke(Command(resume="no"), _cfg(thread)))
    fork = graph.update_state(after_plan.config, {"items": ["edited"]})
    out.append(graph.invoke(None, fork))
    out.append(graph.invoke(Command(resume="again"), _cfg(thread)))
    out.append([_shape(s) for s in graph.get_state_history(_cfg(thread))])
    return _norm(out)


def test_graph_runs_identically_on_flightlog_and_in_memory(store: Store) -> None:
    ours = _drive(_build(FlightlogSaver(store)))
    reference = _drive(_build(InMemorySaver()))
    assert ours == reference
    assert ours[2]["answer"] == "yes" and ours[2]["items"][-1] == "review:yes"
    assert ours[5]["items"][:3] == ["start", "plan", "edited"]
    assert verify_session(store, session_id_for("t1")).ok


def test_async_graph_matches(store: Store) -> None:
    async def run(saver: BaseCheckpointSaver[Any]) -> list[Any]:
        graph = _build(saver)
        first = await graph.ainvoke({"items": ["a"]}, _cfg("as"))
        second = await graph.ainvoke(Command(resume="ok"), _cfg("as"))
        history = [_shape(s) async for s in graph.aget_state_history(_cfg("as"))]
        return _norm([first, second, history])

    assert asyncio.run(run(FlightlogSaver(store))) == asyncio.run(run(InMemorySaver()))


def _ids(saver: BaseCheckpointSaver[Any], config: RunnableConfig | None, **kw: Any) -> list[tuple[Any, ...]]:
    return [
        (t.config["configurable"]["thread_id"], t.metadata.get("source"), t.metadata.get("step"))
        for t in saver.list(config, **kw)
    ]


def test_list_filter_before_limit_match_in_memory(store: Store) -> None:
    savers: list[BaseCheckpointSaver[Any]] = [FlightlogSaver(store), InMemorySaver()]
    results = []
    for saver in savers:
        graph = _build(saver)
        for thread in ("a", "b"):
            graph.invoke({"items": [thread]}, _cfg(thread))
            graph.invoke(Command(resume=thread), _cfg(thread))
        all_a = list(saver.list(_cfg("a")))
        third = all_a[2].config
        results.append(
            [
                _ids(saver, _cfg("a")),
                _ids(saver, _cfg("a"), filter={"source": "loop"}),
                _ids(saver, _cfg("a"), filter={"source": "loop", "step": 1}),
                _ids(saver, _cfg("a"), before=third),
                _ids(saver, _cfg("a"), before=third, limit=1),
                _ids(saver, _cfg("a"), limit=2),
                _ids(saver, None),
                _ids(saver, None, limit=3, filter={"source": "input"}),
                _ids(saver, _cfg("a", checkpoint_ns="")),
                _ids(saver, _cfg("nobody")),
                [t.config == all_a[1].config for t in saver.list(all_a[1].config)],
            ]
        )
    assert results[0] == results[1]
    assert len(results[0][0]) == 5 and results[0][4] == [("a", "loop", 0)]


def _seed(saver: BaseCheckpointSaver[Any], thread: str = "w") -> RunnableConfig:
    cp = empty_checkpoint()
    cp["channel_values"] = {"x": 1}
    cp["channel_versions"] = {"x": saver.get_next_version(None, None)}
    return saver.put(
        _cfg(thread, checkpoint_ns=""), cp, {"source": "input", "step": -1}, cp["channel_versions"]
    )


def test_put_writes_pending_writes_and_idempotency(store: Store) -> None:
    results = []
    for saver in (FlightlogSaver(store), InMemorySaver()):
        config = _seed(saver)
        saver.put_writes(config, [("x", 2), ("y", "a")], task_id="t2", task_path="~b")
        saver.put_writes(config, [("x", 1)], task_id="t1", task_path="~a")
        saver.put_writes(
            config, [("x", 99), ("y", "ignored")], task_id="t2", task_path="~b"
        )  # same idx: kept
        saver.put_writes(config, [("__error__", "boom")], task_id="t1", task_path="~a")
        saver.put_writes(config, [("__error__", "boom2")], task_id="t1", task_path="~a")  # special: replaces
        tup = saver.get_tuple(config)
        assert tup is not None
        results.append((tup.pending_writes, tup.checkpoint["channel_values"], tup.parent_config))
    assert results[0] == results[1]
    assert results[0][0] == [("t1", "__error__", "boom2"), ("t1", "x", 1), ("t2", "x", 2), ("t2", "y", "a")]
    kinds = _custom_kinds(store, "w", heads=True)
    # the ignored repeat appended nothing; the first error ended the run: a head record closes that write
    assert kinds == [CHECKPOINT_KIND] + [WRITES_KIND] * 3 + [HEAD_KIND, WRITES_KIND]


def _custom_kinds(store: Store, thread: str, *, heads: bool = False) -> list[str]:
    """The saver's own ``langgraph.*`` records of a thread, in ledger order (readable events left out, and
    the head records each stop ends with unless ``heads``)."""
    events = [json.loads(r.event_bytes) for r in store.read_events(session_id_for(thread))]
    return [
        e["custom_kind"]
        for e in events
        if e.get("custom_kind", "").startswith("langgraph.") and (heads or e["custom_kind"] != HEAD_KIND)
    ]


def test_unchanged_values_are_stored_once_and_events_hold_references(store: Store) -> None:
    saver = FlightlogSaver(store)
    config = _seed(saver)
    cp = empty_checkpoint()
    cp["channel_values"] = {"x": 1, "z": "big" * 100}
    cp["channel_versions"] = {"x": 1, "z": 1}
    saver.put(config, cp, {"source": "loop", "step": 0}, {"z": 1})  # only z changed: x not stored again
    rows = [r for r in store.read_events(session_id_for("w")) if CHECKPOINT_KIND.encode() in r.event_bytes]
    payload = json.loads(rows[-1].event_bytes)["payload"]
    assert set(payload["channels"]) == {"z"}
    assert payload["channels"]["z"]["ref"].startswith("sha256:") and payload["channels"]["z"]["type"]
    assert payload["parent_checkpoint_id"] == config["configurable"]["checkpoint_id"]
    assert payload["metadata"] == {"json": {"source": "loop", "step": 0}}
    assert "big" not in rows[-1].event_bytes.decode()


def test_restart_sees_everything_and_continues(db: Path, store: Store) -> None:
    graph = _build(FlightlogSaver(store))
    graph.invoke({"items": ["s"]}, _cfg())
    before = [_shape(s) for s in graph.get_state_history(_cfg())]
    with flightlog.open_store(str(db)) as other:
        graph2 = _build(FlightlogSaver(other))
        assert [_shape(s) for s in graph2.get_state_history(_cfg())] == before
        done = graph2.invoke(Command(resume="later"), _cfg())  # resumes the interrupt of the first process
        assert done["answer"] == "later"
    # the first saver sees the other process's checkpoints (its index is rebuilt from the ledger)
    assert graph.get_state(_cfg()).values["answer"] == "later"
    assert verify_session(store, session_id_for("t1")).ok


def test_delete_thread_hides_history_but_keeps_it_provable(store: Store) -> None:
    saver = FlightlogSaver(store)
    graph = _build(saver)
    graph.invoke({"items": ["s"]}, _cfg())
    saver.delete_thread("t1")
    saver.delete_thread("never-seen")  # no-op, as InMemorySaver
    assert saver.get_tuple(_cfg()) is None and list(saver.list(_cfg())) == []
    assert FlightlogSaver(store).get_tuple(_cfg()) is None  # also after a rebuild from the ledger
    assert _custom_kinds(store, "t1")[-1] == THREAD_DELETED_KIND
    assert verify_session(store, session_id_for("t1")).ok
    graph.invoke({"items": ["again"]}, _cfg())  # the thread starts afresh
    assert graph.get_state(_cfg()).values["items"] == ["again", "plan", "act1"]


def test_cli_tools_see_thread_sessions(db: Path, store: Store) -> None:
    _build(FlightlogSaver(store)).invoke({"items": ["s"]}, _cfg("cli-thread"))
    runner = CliRunner()
    listed = runner.invoke(app, ["--db", str(db), "ls", "--json"])
    assert listed.exit_code == 0 and "langgraph:cli-thread" in listed.output
    for args in (["show", "cli-thread"], ["verify", "cli-thread"], ["export", "cli-thread"]):
        result = runner.invoke(app, ["--db", str(db), *args])
        assert result.exit_code == 0, (args, result.output)
        expected = {"show": "langgraph checkpoint", "verify": "ok", "export": CHECKPOINT_KIND}[args[0]]
        assert expected in result.output, (args, result.output)


def test_show_summarises_head_records_as_the_saver_s_other_records(db: Path, store: Store) -> None:
    """A head record (the saver's read index, written at each graph stop) is narrated like the checkpoint and
    writes records beside it (which checkpoint, which rows it reads), not listed as a bare ``langgraph.head``
    user event; the dashboard narrates the same line."""
    graph = _build(FlightlogSaver(store))
    graph.invoke({"items": ["s"]}, _cfg("heads"))
    graph.invoke(Command(resume="yes"), _cfg("heads"))
    rows = [(r.seq, json.loads(r.event_bytes)) for r in store.read_events(session_id_for("heads"))]
    heads = [(seq, e["payload"]) for seq, e in rows if e.get("custom_kind") == HEAD_KIND]
    assert len(heads) == 2  # one per stop: the interrupt, then the end
    shown = CliRunner().invoke(app, ["--db", str(db), "show", "heads"])
    assert shown.exit_code == 0, shown.output
    lines = {int(line.split()[0]): line for line in shown.output.splitlines()[1:]}
    for seq, head in heads:
        bodies = ", ".join(str(s) for s in head["bodies"])
        writes = ", ".join(str(s) for s in head.get("writes", [])) or "-"
        assert "checkpoint_id" not in head  # the last body row's (since 2026-12-06)
        values = len(head.get("values", {}))
        expected = (
            f"langgraph head: checkpoint of seq {head['bodies'][-1]} reads bodies at seqs {bodies},"
            f" writes at {writes}, {values} channel value{'' if values == 1 else 's'}"
        )
        assert lines[seq].endswith(expected), (lines[seq], expected)
    assert not any(line.rstrip().endswith(HEAD_KIND) for line in lines.values())
    sid = session_id_for("heads")
    for stored in store.read_events(sid, start=heads[-1][0], stop=heads[-1][0] + 1):  # the dashboard's row
        shown_row = event_row(sid, stored, decode_stored(stored.event_bytes, seq=stored.seq))
        assert (shown_row["kind"], shown_row["text"]) == (f"custom:{HEAD_KIND}", lines[stored.seq][43:])


def test_show_narrates_every_record_of_the_thread_operations(db: Path, store: Store) -> None:
    """copy_thread, delete_for_runs, prune and delete_thread records (and the subgraph-step and static-interrupt
    records, by their payloads) are narrated as what they did, never as a bare ``langgraph.*`` kind."""
    saver = FlightlogSaver(store)
    graph = _build(saver)
    run_id = "r-1"  # LangGraph keeps a configurable run_id in each checkpoint's metadata
    graph.invoke({"items": ["s"]}, _cfg("ops", run_id=run_id))
    graph.invoke(Command(resume="yes"), _cfg("ops"))
    saver.copy_thread("ops", "copy")
    saver.delete_for_runs([run_id])
    saver.prune(["copy"], strategy="keep_latest")
    saver.delete_thread("copy")
    shown = {
        thread: CliRunner().invoke(app, ["--db", str(db), "show", thread]).output
        for thread in ("ops", "copy")
    }
    lines = [line for output in shown.values() for line in output.splitlines()[1:]]
    assert not [line for line in lines if line.rstrip().split()[-1].startswith("langgraph.")]
    assert f"langgraph runs deleted: {run_id}" in shown["ops"]
    for expected in ("langgraph thread copied from ops: ", "langgraph thread pruned (keep_latest)"):
        assert expected in shown["copy"]
    assert "langgraph thread copy deleted (its rows stay in the ledger)" in shown["copy"]
    step = Custom(
        custom_kind="langgraph.subgraph_step",
        payload={"thread_id": "t", "checkpoint_ns": "inner:1", "checkpoint_id": "cp-9"},
    )
    stop = Custom(
        custom_kind="langgraph.static_interrupt",
        payload={"thread_id": "t", "checkpoint_id": "cp-9", "status": "interrupt_before"},
    )
    assert narrate(step) == "langgraph subgraph step: checkpoint cp-9 in inner:1 (kept in thread t)"
    assert narrate(stop) == "langgraph static interrupt (interrupt_before) at checkpoint cp-9"


def _raw(db: Path, *statements: tuple[str, tuple[Any, ...]]) -> None:
    raw = sqlite3.connect(db)
    try:
        raw.execute("DROP TRIGGER IF EXISTS events_no_update")
        for sql, params in statements:
            raw.execute(sql, params)
        raw.commit()
    finally:
        raw.close()


def test_one_flipped_byte_is_named_and_refused(db: Path, store: Store) -> None:
    _build(FlightlogSaver(store)).invoke({"items": ["s"]}, _cfg())
    sid = session_id_for("t1")
    rows = list(store.read_events(sid))
    target = next(
        r for r in rows if r.seq >= 2 and json.loads(r.event_bytes).get("custom_kind") == CHECKPOINT_KIND
    )
    data = bytearray(target.event_bytes)
    data[data.index(b'"step":') + 7] ^= 0x01  # one byte of the metadata: "step":1 -> "step":0
    store.close()
    _raw(db, ("UPDATE events SET event = ? WHERE session_id = ? AND seq = ?", (bytes(data), sid, target.seq)))
    with flightlog.open_store(str(db)) as reopened:
        report = verify_session(reopened, sid)
        assert not report.ok and report.divergences[0].seq == target.seq
        assert report.divergences[0].reason == "hash_mismatch"
        with pytest.raises(LedgerIntegrityError) as refused:
            Recorder.attach(reopened, sid)
        assert refused.value.seq == target.seq
        with pytest.raises(LedgerIntegrityError) as read:
            FlightlogSaver(reopened).get_tuple(_cfg())
        assert read.value.seq == target.seq


def test_an_altered_artifact_is_refused_naming_its_event(db: Path, store: Store) -> None:
    _build(FlightlogSaver(store)).invoke({"items": ["s"]}, _cfg())
    rows = list(store.read_events(session_id_for("t1")))
    last_cp = [r for r in rows if json.loads(r.event_bytes).get("custom_kind") == CHECKPOINT_KIND][-1]
    ref = json.loads(last_cp.event_bytes)["payload"]["channels"]["items"]["ref"]
    store.close()
    _raw(db, ("UPDATE artifacts SET content = ? WHERE sha256 = ?", (b"\x90", ref.removeprefix("sha256:"))))
    with flightlog.open_store(str(db)) as reopened:
        assert verify_session(reopened, session_id_for("t1")).ok  # the chain holds the digest, not the bytes
        with pytest.raises(LedgerIntegrityError, match="altered") as read:
            FlightlogSaver(reopened).get_tuple(_cfg())
        assert read.value.seq == last_cp.seq


def _stored_bytes(db: Path) -> int:
    raw = sqlite3.connect(db)
    try:
        events = raw.execute("SELECT COALESCE(SUM(LENGTH(event)), 0) FROM events").fetchone()[0]
        artifacts = raw.execute("SELECT COALESCE(SUM(size_bytes), 0) FROM artifacts").fetchone()[0]
    finally:
        raw.close()
    return int(events) + int(artifacts)


def _growing_graph(saver: BaseCheckpointSaver[Any], steps: int, size: int) -> Any:
    """``steps`` nodes in a row, node i writes its own 2 KB channel: the state grows by ``size`` a step."""
    fields: dict[str, Any] = {f"part{i}": str for i in range(steps)}
    schema = TypedDict("GrowingState", fields, total=False)  # type: ignore[misc]
    g = StateGraph(schema)
    for i in range(steps):
        g.add_node(f"n{i}", lambda _s, i=i: {f"part{i}": chr(65 + i % 26) * size})
        g.add_edge(START if i == 0 else f"n{i - 1}", f"n{i}")
    g.add_edge(f"n{steps - 1}", END)
    return g.compile(checkpointer=saver)


def test_disk_use_grows_with_what_changed(tmp_path: Path) -> None:
    size, stored, full = 2048, {}, {}
    for steps in (10, 20):
        db = tmp_path / f"grow{steps}.db"
        with flightlog.open_store(str(db)) as s:
            saver = FlightlogSaver(s)
            graph = _growing_graph(saver, steps, size)
            graph.invoke({}, _cfg("g"))
            checkpoints = list(saver.list(_cfg("g")))
            final = checkpoints[0].checkpoint["channel_values"]
            state_bytes = sum(len(saver.serde.dumps_typed(v)[1]) for v in final.values())
        stored[steps] = _stored_bytes(db)
        full[steps] = len(checkpoints) * state_bytes  # what a whole-state-per-step saver writes, at least
    # linear: twice the steps, about twice the bytes (a whole-state saver: about four times)
    assert stored[20] < 2.6 * stored[10]
    assert full[20] > 3.5 * full[10]
    assert stored[20] * 5 < full[20]
    assert stored[20] > 20 * size  # every value is stored once


def test_conformance_kit() -> None:
    async def factory() -> AsyncGenerator[BaseCheckpointSaver[Any], None]:
        with flightlog.open_store(":memory:") as s:
            yield FlightlogSaver(s)

    registered = conformance.checkpointer_test(name="FlightlogSaver")(factory)
    report = asyncio.run(conformance.validate(registered))
    # Every capability, base and extended (delete_for_runs, copy_thread, prune: issue 16's 8/8), each
    # detected and its suite run and passed; the kit skips what it does not detect, so a method lost to a
    # rename would otherwise pass unseen.
    assert set(report.results) == {c.value for c in Capability} and len(report.results) == 8
    detected = {name for name, r in report.results.items() if r.detected}
    assert detected == {c.value for c in Capability}
    for name in detected:
        result = report.results[name]
        assert result.passed is True and result.tests_passed > 0 and result.tests_failed == 0, (name, result)
    assert report.passed_all_base()


# ─── several processes writing one thread (issue 16: the older saver raised StaleWriter forever) ──────
class _Writer:
    """A ``langgraph_writer.py`` process; each ``go`` waits for its ``done`` line (no timers)."""

    def __init__(self, db: Path, thread: str, name: str, errors: Path) -> None:
        self.stderr = errors.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("langgraph_writer.py")), str(db), thread, name],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
        )
        self.errors = errors

    def send(self, i: int) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"go {i}\n")
        self.proc.stdin.flush()

    def done(self, i: int) -> list[str]:
        assert self.proc.stdout is not None
        line = read_line(self.proc, f"done {i}")  # "" when the process died
        assert line.startswith(f"done {i} "), (line, self.errors.read_text())
        return line.split()[2].split(",")

    def close(self) -> None:
        """Ask the process to end and wait for it (idempotent); it must exit 0."""
        if self.stderr.closed:
            return
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            if self.proc.poll() is None:
                self.proc.stdin.write("end\n")
            self.proc.stdin.close()
            code = self.proc.wait(timeout=120)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.proc.stdout.close()
            self.stderr.close()
        assert code == 0, self.errors.read_text()


@pytest.fixture
def writers(db: Path, tmp_path: Path) -> Iterator[list[_Writer]]:
    resolve_notary(USER_NOTARY)  # the user's log key exists before two processes both want it
    pair = [_Writer(db, "shared", name, tmp_path / f"{name}.err") for name in ("A", "B")]
    try:
        yield pair
    finally:
        for writer in pair:
            writer.close()


def test_two_processes_alternate_on_one_thread(db: Path, writers: list[_Writer]) -> None:
    expected: list[str] = []
    for i in range(4):
        for writer, name in zip(writers, ("A", "B"), strict=True):
            writer.send(i)
            expected += [f"{name}{i}", f"{name}-step"]
            assert writer.done(i) == expected  # each sees the other's writes and goes on from them
    for writer in writers:
        writer.close()
    with flightlog.open_store(str(db)) as store:
        sid = session_id_for("shared")
        assert verify_session(store, sid).ok
        Recorder.attach(store, sid, notary=resolve_notary(USER_NOTARY))  # signatures and retained head too
        saver = FlightlogSaver(store)
        assert saver.get_tuple(_cfg("shared")).checkpoint["channel_values"]["items"] == expected  # type: ignore[union-attr]
        assert len(list(saver.list(_cfg("shared")))) == 4 * 2 * 3  # input, loop and step per invoke
    result = CliRunner().invoke(app, ["--db", str(db), "verify", "shared"])
    assert result.exit_code == 0, result.output


def test_two_processes_writing_at_once_lose_no_write(db: Path, writers: list[_Writer]) -> None:
    rounds = 6
    for i in range(rounds):  # both run all their invokes concurrently; the store serialises the appends
        for writer in writers:
            writer.send(i)
    for i in range(rounds):
        for writer in writers:
            writer.done(i)
    for writer in writers:
        writer.close()
    with flightlog.open_store(str(db)) as store:
        sid = session_id_for("shared")
        assert verify_session(store, sid).ok
        puts = [k for k in _custom_kinds(store, "shared") if k == CHECKPOINT_KIND]
        assert len(puts) == 2 * rounds * 3  # every checkpoint of both processes is on one chain
        Recorder.attach(store, sid, notary=resolve_notary(USER_NOTARY))


def test_a_thread_moved_on_elsewhere_is_extended_not_reread(db: Path, store: Store) -> None:
    """Two savers alternating on one thread: after its first fold, each reads only the other's new rows."""
    starts: list[int] = []
    reads = store.read_events

    def spy(session_id: str, *, start: int = 0, stop: int | None = None, batch: int = 512) -> Any:
        starts.append(start)
        return reads(session_id, start=start, stop=stop, batch=batch)

    first, second = FlightlogSaver(store), FlightlogSaver(store)
    graphs = [_build(first), _build(second)]
    for i in range(10):  # past the first signed checkpoint (every 64 events): re-attaching starts there
        graphs[0].invoke({"items": [f"a{i}"]}, _cfg("alt"))
    graphs[1].get_state(_cfg("alt"))  # second's first fold: the whole thread, verified
    store.read_events = spy  # type: ignore[method-assign]
    for i in range(3):
        graphs[i % 2].invoke({"items": [f"x{i}"]}, _cfg("alt"))
    assert 0 not in starts  # no re-read from the start (each saver extends its index; no full re-attach)
    assert graphs[0].get_state(_cfg("alt")).values == graphs[1].get_state(_cfg("alt")).values
    assert verify_session(store, session_id_for("alt")).ok


def test_rows_appended_elsewhere_that_do_not_chain_are_refused(db: Path, store: Store) -> None:
    reader = FlightlogSaver(store)
    _build(FlightlogSaver(store)).invoke({"items": ["s"]}, _cfg("t"))
    assert reader.get_tuple(_cfg("t")) is not None  # folded and verified up to here
    sid = session_id_for("t")
    known = store.get_session(sid).head_seq
    _build(FlightlogSaver(store)).invoke({"items": ["more"]}, _cfg("t"))  # another writer goes on
    target = next(r for r in store.read_events(sid, start=known + 1) if b'"step":' in r.event_bytes)
    data = bytearray(target.event_bytes)
    data[data.index(b'"step":') + 7] ^= 0x01
    _raw(db, ("UPDATE events SET event = ? WHERE session_id = ? AND seq = ?", (bytes(data), sid, target.seq)))
    with pytest.raises(LedgerIntegrityError) as refused:
        reader.get_tuple(_cfg("t"))
    assert refused.value.seq == target.seq


# ─── list channels as deltas (issue 16/19): exact values whatever the edits ─────────────────────────
_element = st.one_of(st.integers(-5, 5), st.text(max_size=3), st.lists(st.integers(0, 3), max_size=2))


@given(
    steps=st.lists(
        st.tuples(st.sampled_from(["append", "replace", "truncate", "fork"]), st.lists(_element, max_size=3)),
        min_size=1,
        max_size=12,
    )
)
@settings(max_examples=40, deadline=None)
def test_list_channels_read_back_exactly_as_put(steps: list[tuple[str, list[Any]]]) -> None:
    """Each checkpoint's list value reads back exactly, however it relates to its parent's (an extension
    is stored as a delta, anything else whole), after a restart too and on a fork from an earlier one."""
    with flightlog.open_store(":memory:") as s:
        saver = FlightlogSaver(s, notary=None)
        value: list[Any] = []
        history: list[tuple[RunnableConfig, list[Any]]] = []
        config = _cfg("p", checkpoint_ns="")
        version: Any = None
        for op, elements in steps:
            if op == "append":
                value = [*value, *elements]
            elif op == "replace":
                value = list(elements)
            elif op == "truncate":
                value = value[: len(value) // 2]
            elif history:  # fork: continue from an earlier checkpoint's value
                config, value = history[len(history) // 2]
                value = [*value, *elements]
            cp = empty_checkpoint()
            version = saver.get_next_version(version, None)
            cp["channel_values"] = {"xs": list(value)}
            cp["channel_versions"] = {"xs": version}
            config = saver.put(config, cp, {"source": "loop", "step": len(history)}, {"xs": version})
            history.append((config, list(value)))
        for reader in (saver, FlightlogSaver(s, notary=None)):  # the writer's index, then a fresh fold
            for stored_config, expected in history:
                tup = reader.get_tuple(stored_config)
                assert tup is not None
                assert tup.checkpoint["channel_values"].get("xs", []) == expected


def test_markers_delete_nothing(store: Store) -> None:
    """delete_for_runs, prune and copy_thread append markers; every ledger row before them stays."""
    saver = FlightlogSaver(store)
    graph = _build(saver)
    graph.invoke({"items": ["a"]}, _cfg("m", run_id="00000000-0000-0000-0000-000000000001"))
    graph.invoke(Command(resume="ok"), _cfg("m"))
    before = [r.hash for r in store.read_events(session_id_for("m"))]
    saver.copy_thread("m", "m2")
    assert [t.checkpoint["id"] for t in saver.list(_cfg("m2"))] == [
        t.checkpoint["id"] for t in saver.list(_cfg("m"))
    ]
    saver.delete_for_runs(["00000000-0000-0000-0000-000000000001"])
    saver.prune(["m"], strategy="keep_latest")
    assert len(list(saver.list(_cfg("m")))) == 1
    after = [r.hash for r in store.read_events(session_id_for("m"))]
    assert after[: len(before)] == before and len(after) == len(before) + 2
    assert verify_session(store, session_id_for("m")).ok and verify_session(store, session_id_for("m2")).ok
    fresh = FlightlogSaver(store)  # a new process folds the markers the same way
    assert len(list(fresh.list(_cfg("m")))) == 1
    assert _custom_kinds(store, "m")[-2:] == [RUNS_DELETED_KIND, PRUNED_KIND]
    assert _custom_kinds(store, "m2") == [THREAD_COPIED_KIND, RUNS_DELETED_KIND]  # the copy held that run too
