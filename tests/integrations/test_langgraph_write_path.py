"""What the LangGraph saver writes: signed when the graph stops, writes that come after its end included;
a tool result numbered by the turn of its call.

With LangGraph's default ``durability="async"``, a task's writes (``put_writes``) and the step's checkpoint
(``put``) are saved by a background thread and may reach the saver in either order: the last task's writes
can come after the final checkpoint, which recorded ``run_terminal`` and was signed. That write was appended
unsigned (signing followed only a ``run_terminal`` or ``suspended`` in the same write), so a new process found
an unanchored tail. The test replays that order exactly: the saver holds back the last task's
``put_writes`` call (LangGraph's own arguments) and makes it after ``invoke`` returns.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command

import flightlog
from flightlog.integrations.langgraph import CHECKPOINT_KIND, HEAD_KIND, WRITES_KIND, FlightlogSaver

from .test_langgraph_readable import CFG, SID, _graph

FLIGHTLOG = Path(sys.executable).parent / "flightlog"


class _LateWrites(FlightlogSaver):
    """Holds back ``put_writes`` calls of the task named ``late`` (``task_path`` ends with it) once armed."""

    def __init__(self, *args: Any, late: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.late, self.armed = late, False
        self.held: list[tuple[Any, ...]] = []

    def put_writes(self, config: RunnableConfig, writes: Any, task_id: str, task_path: str = "") -> None:
        if self.armed and task_path.endswith(self.late):
            self.held.append((config, list(writes), task_id, task_path))
            return
        super().put_writes(config, writes, task_id, task_path)


def _audit(db: Path) -> dict[str, Any]:
    """``flightlog audit --json`` of the thread, in a new process."""
    done = subprocess.run(
        [str(FLIGHTLOG), "--db", str(db), "audit", SID, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (report,) = json.loads(done.stdout)
    return dict(report)


def test_a_write_after_the_run_ended_is_signed(tmp_path: Path) -> None:
    db = tmp_path / "lg.db"
    with flightlog.open_store(str(db)) as store:
        saver = _LateWrites(store, late="model")  # signed with the user's log key
        graph = _graph(saver)
        graph.invoke({"messages": [HumanMessage("add 1 and 2")]}, CFG)
        saver.armed = True  # the model's last answer: its writes after the final checkpoint
        graph.invoke(Command(resume="yes"), CFG)
        assert store.get_session(SID).status == "completed"
        (late,) = saver.held
        before = store.get_session(SID).head_seq
        FlightlogSaver.put_writes(saver, *late)
        assert store.get_session(SID).head_seq == before + 1  # the write is recorded after run_terminal
        kinds = [json.loads(row.event_bytes).get("custom_kind", row.kind) for row in store.read_events(SID)]
        # the run's end, then its checkpoint and the head record the stop ends with, then the late write. The
        # other tasks' writes reach the saver from LangGraph's background thread in any order, so one may
        # also come after the final checkpoint: only the order of the run's end, checkpoint, head and the
        # held write (last) is LangGraph's contract here.
        end = kinds.index("run_terminal")
        assert kinds[-1] == WRITES_KIND and "run_terminal" not in kinds[end + 1 :]
        assert set(kinds[end + 1 :]) == {CHECKPOINT_KIND, HEAD_KIND, WRITES_KIND}
        assert kinds.index(CHECKPOINT_KIND, end) < kinds.index(HEAD_KIND, end)
    report = _audit(db)
    assert report["ok"] and (report["anchored"], report["unanchored"]) == (report["events"], None)


def test_a_tool_result_carries_the_turn_of_its_call(tmp_path: Path) -> None:
    """As the kernel records it (a turn is one model call and the tool calls it asked for): the ``add``
    call asked at turn 1 runs after an approval, two steps later, in a process that folds the thread
    afresh; its ``tool_completed`` is turn 1, and the model's next answer turn 4."""
    db = tmp_path / "lg.db"
    with flightlog.open_store(str(db)) as store:
        _graph(FlightlogSaver(store, notary=None)).invoke({"messages": [HumanMessage("add 1 and 2")]}, CFG)
    with flightlog.open_store(str(db)) as store:  # a new saver: the call's turn comes from the ledger
        _graph(FlightlogSaver(store, notary=None)).invoke(Command(resume="yes"), CFG)
        wires = [json.loads(row.event_bytes) for row in store.read_events(SID)]
    turns = [
        (w["kind"], w["turn"])
        for w in wires
        if w["kind"] in ("llm_completed", "tool_requested", "tool_completed", "tool_gated", "resumed")
    ]
    assert [turn for turn in turns if turn[0] != "resumed"] == [
        ("llm_completed", 1),
        ("tool_requested", 1),
        ("tool_gated", 2),
        ("tool_completed", 1),
        ("llm_completed", 4),
    ]
    # The answer's resume writes reach the saver from LangGraph's background thread, after the gate but
    # not at a fixed place among the later steps' checkpoints (with the saver's calls delayed at random,
    # after the tool's in 1 of 20 runs): the resumed (turn 2) follows the decision wherever it lands, and
    # after the checkpoint that ended the run the decision is recorded and the ended run not resumed.
    kinds = [w["kind"] for w in wires]
    (decided,) = [i for i, kind in enumerate(kinds) if kind == "permission_resolved"]
    assert kinds.index("tool_gated") < decided and wires[decided]["turn"] == 2
    resumed = [i for i, kind in enumerate(kinds) if kind == "resumed"]
    assert resumed == ([decided + 2] if decided < kinds.index("run_terminal") else [])
    assert all(wires[i]["turn"] == 2 for i in resumed)
    (done,) = [w for w in wires if w["kind"] == "tool_completed"]
    assert [r["call_id"] for r in done["results"]] == ["call0"]


def test_a_subgraph_runs_tool_result_carries_the_turn_of_its_call(tmp_path: Path) -> None:
    """The same graph as a subgraph node: its run is a child session (not in the thread's fold), whose
    ``tool_requested`` gives the turn of the call its later step answers."""
    db = tmp_path / "lg.db"

    def build(saver: FlightlogSaver) -> Any:
        g = StateGraph(MessagesState)
        g.add_node("research", _graph(None))
        g.add_edge(START, "research")
        g.add_edge("research", END)
        return g.compile(checkpointer=saver)

    with flightlog.open_store(str(db)) as store:
        build(FlightlogSaver(store, notary=None)).invoke({"messages": [HumanMessage("add 1 and 2")]}, CFG)
    with flightlog.open_store(str(db)) as store:
        build(FlightlogSaver(store, notary=None)).invoke(Command(resume="yes"), CFG)
        (child,) = [s.session_id for s in store.list_sessions() if s.parent_session_id == SID]
        wires = [json.loads(row.event_bytes) for row in store.read_events(child)]
    calls = [(w["kind"], w["turn"]) for w in wires if w["kind"] in ("tool_requested", "tool_completed")]
    assert calls == [("tool_requested", 1), ("tool_completed", 1)]
