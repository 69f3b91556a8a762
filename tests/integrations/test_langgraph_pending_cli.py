"""``flightlog pending`` and ``resume`` on a LangGraph thread waiting at an ``interrupt()``: pending listed it
like any approval while ``approve`` (exit 1) and ``resume`` (exit 2, "Invalid value:") refused it (user pass,
session 16). Pending now says where it is answered, as the dashboard does, and resume refuses in one line."""

from __future__ import annotations

import json
import operator
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt
from typer.testing import CliRunner

import flightlog
from flightlog.cli import app
from flightlog.integrations.langgraph import FlightlogSaver

ANSWER_IN = "graph.invoke(Command(resume=...), config) in the LangGraph app"
runner = CliRunner()


class _Steps(TypedDict):
    steps: Annotated[list[str], operator.add]


def _ask(state: _Steps) -> dict[str, Any]:
    return {"steps": [f"asked: {interrupt('ok to act?')}"]}


def _waiting_thread(db: Path) -> str:
    """A thread ``t1`` stopped at its interrupt; returns the interrupt id."""
    builder = StateGraph(_Steps)
    builder.add_node("ask", _ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    with flightlog.open_store(str(db)) as store:
        graph = builder.compile(checkpointer=FlightlogSaver(store, notary=None))
        out = graph.invoke({"steps": []}, {"configurable": {"thread_id": "t1"}})
    return str(out["__interrupt__"][0].id)


def test_pending_says_where_an_interrupt_is_answered_and_resume_refuses_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "lg.db"
    asked = _waiting_thread(db)
    listed = runner.invoke(app, ["--db", str(db), "pending"])
    assert listed.exit_code == 0, listed.output
    (line,) = listed.stdout.splitlines()
    assert line.startswith("langgraph:t1  turn ") and f"  {asked}  ask()  [approval] ok to act?" in line
    assert line.endswith(f"; answered where it runs, not here: {ANSWER_IN}")
    (row,) = json.loads(runner.invoke(app, ["--db", str(db), "pending", "--json"]).stdout)
    assert row["call_id"] == asked and row["answer_in"] == ANSWER_IN
    resumed = runner.invoke(app, ["--db", str(db), "resume", "langgraph:t1"])
    assert resumed.exit_code == 2 and resumed.stdout == ""
    assert resumed.stderr == (
        "flightlog: error: session langgraph:t1 is a langgraph session, run by its own app; it continues with "
        f"{ANSWER_IN}, not with flightlog resume\n"
    )
