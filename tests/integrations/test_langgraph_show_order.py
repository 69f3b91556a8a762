"""What docs/guide/integrations.md says of a thread's order in `flightlog show` (user pass, session 16:
writes before their checkpoint, ``run_terminal`` before the last checkpoint looked wrong): `show` lists
ledger order; with ``durability="sync"`` each checkpoint precedes the writes to it; a ``put`` records its
readable events just before its checkpoint, so ``run_terminal`` directly precedes the final one."""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from typer.testing import CliRunner

import flightlog
from flightlog.cli import app
from flightlog.encoding import parse_json
from flightlog.integrations.langgraph import FlightlogSaver

DOC = Path(__file__).resolve().parents[2] / "docs" / "guide" / "integrations.md"


class _Steps(TypedDict):
    steps: Annotated[list[str], operator.add]


def _graph(saver: FlightlogSaver) -> Any:
    builder = StateGraph(_Steps)
    builder.add_node("plan", lambda state: {"steps": ["plan"]})
    builder.add_node("ask", lambda state: {"steps": [f"asked: {interrupt('ok?')}"]})
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "ask")
    builder.add_edge("ask", END)
    return builder.compile(checkpointer=saver)


def test_show_is_ledger_order_and_the_order_is_the_one_the_guide_explains(tmp_path: Path) -> None:
    db = tmp_path / "lg.db"
    config = {"configurable": {"thread_id": "t1"}}
    with flightlog.open_store(str(db)) as store:
        graph = _graph(FlightlogSaver(store, notary=None))
        graph.invoke({"steps": []}, config, durability="sync")
        graph.invoke(Command(resume="yes"), config, durability="sync")
        rows = [(r.seq, r.kind, parse_json(r.event_bytes)) for r in store.read_events("langgraph:t1")]
    shown = CliRunner().invoke(app, ["--db", str(db), "show", "langgraph:t1"]).stdout.splitlines()[1:]
    assert [int(line.split()[0]) for line in shown] == [seq for seq, _, _ in rows]  # ledger order
    recorded: set[str] = set()
    for _seq, _kind, wire in rows:
        payload = wire.get("payload") or {}
        if wire.get("custom_kind") == "langgraph.checkpoint":
            recorded.add(payload["checkpoint_id"])
        elif wire.get("custom_kind") == "langgraph.writes":  # sync: its checkpoint came first
            assert payload["checkpoint_id"] in recorded
    kinds = [wire.get("custom_kind") or kind for _, kind, wire in rows]
    end = kinds.index("run_terminal")
    assert kinds[end + 1] == "langgraph.checkpoint"  # the final checkpoint, right after run_terminal
    # then its head record, and at times a last writes record LangGraph saves after it (CI saw one)
    assert "langgraph.head" in kinds[end + 2 :]
    assert set(kinds[end + 2 :]) <= {"langgraph.head", "langgraph.writes"}
    text = " ".join(DOC.read_text(encoding="utf-8").split())
    assert (
        "`flightlog show` lists a thread in ledger order (by seq), which is the order LangGraph called"
        in text
    )
    assert "a finished run's `run_terminal` just before its final checkpoint" in text
