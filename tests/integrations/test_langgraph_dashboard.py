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
from flightlog.web.views import session_page

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


def test_artifacts_only_a_link_names_are_listed_with_their_link_path(tmp_path: Path) -> None:
    """Before, the Artifacts table listed only what events name: a thread's content-linked deltas named
    the rest of its history inside artifact content, invisible on the page."""
    from flightlog.store.links import artifact_links

    db = tmp_path / "lg.db"
    with flightlog.open_store(str(db)) as store:
        graph = _graph(FlightlogSaver(store))
        for turn in range(12):
            graph.invoke({"messages": [HumanMessage(f"question {turn}")]}, CFG)
        page = session_page(store, SID)
        contents = store.get_artifacts([row["handle"] for row in page.artifacts])
    rows = {row["handle"]: row for row in page.artifacts}
    linked = {f"sha256:{link}" for content in contents.values() for link in artifact_links(content)}
    assert linked, "the thread should hold content-linked deltas"
    assert linked <= set(rows)  # every link target is listed, named by an event or only by a link
    only = [row for row in page.artifacts if row["via"]]
    for row in only:
        assert row["state"] == "present and intact" and row["size"] and row["via"].startswith("sha256:")
        first = row["via"].split(" → ")[0].removeprefix("sha256:").removesuffix("…")
        assert any(h.startswith(f"sha256:{first}") and not rows[h]["via"] for h in rows)  # an event names it
    assert all(not row["via"] for row in page.artifacts[: len(page.artifacts) - len(only)])

    def open_db(read_only: bool) -> Any:
        return flightlog.open_store(str(db), read_only=read_only)

    with TestClient(create_app(open_db, token=TOKEN), base_url="http://127.0.0.1:8000") as client:
        client.cookies.set("flightlog_ui_8000", Auth(TOKEN).cookie_value)
        html = client.get("/session", params={"id": SID}).text
    assert "<th>linked from</th>" in html
    for row in only:
        assert f"<code>{row['handle']}</code>" in html and row["via"] in html
