"""``flightlog pending`` and ``resume`` on a LangGraph thread waiting at an ``interrupt()``: pending listed it
like any approval while ``approve`` (exit 1) and ``resume`` (exit 2, "Invalid value:") refused it (user pass,
session 16). Pending now says where it is answered, as the dashboard does, and resume refuses in one line."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from flightlog.cli import app

from .langgraph_waiting import waiting_thread

ANSWER_IN = "graph.invoke(Command(resume=...), config) in the LangGraph app"
runner = CliRunner()


def test_pending_says_where_an_interrupt_is_answered_and_resume_refuses_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "lg.db"
    asked = waiting_thread(db, notary=None)
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
