"""A LangGraph thread's interrupt on the dashboard: listed as waiting, answered where the graph runs.

The dashboard cannot answer an ``interrupt()``: only ``Command(resume=...)`` in the graph reaches LangGraph,
and a decision posted here is refused (``DecidedByItsRuntime``). Found trying issue 16 as a user (session 6):
the page offered Approve and Deny anyway, which always failed. Now the row names the call that answers it
instead, on the server-rendered page and in the JSON the page's script redraws it from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from langchain_core.messages import HumanMessage

import flightlog
from flightlog.integrations.langgraph import FlightlogSaver
from flightlog.web.app import create_app
from flightlog.web.security import Auth

from .test_langgraph_readable import CFG, SID, TOKEN, _graph

HINT = "graph.invoke(Command(resume=...), config) in the LangGraph app"


def test_an_interrupt_is_listed_with_where_it_is_answered_not_approve_buttons(tmp_path: Path) -> None:
    db = tmp_path / "lg.db"
    with flightlog.open_store(str(db)) as store:
        _graph(FlightlogSaver(store)).invoke({"messages": [HumanMessage("add 1 and 2")]}, CFG)

    def open_db(read_only: bool) -> Any:
        return flightlog.open_store(str(db), read_only=read_only)

    with TestClient(create_app(open_db, token=TOKEN), base_url="http://127.0.0.1:8000") as client:
        client.cookies.set("flightlog_ui_8000", Auth(TOKEN).cookie_value)
        (row,) = client.get("/api/runs").json()["pending"]
        assert (row["session_id"], row["tool"], row["answer_in"]) == (SID, "approve", HINT)
        for page in (client.get("/"), client.get("/session", params={"id": SID})):
            assert page.status_code == 200
            assert (
                'class="answer-in' in page.text and "graph.invoke(Command(resume=...), config)" in page.text
            )
            assert 'class="decide"' not in page.text  # no Approve/Deny form for the interrupt
