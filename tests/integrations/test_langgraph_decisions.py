"""Who answered a LangGraph interrupt, on the dashboard's session page (its "Decisions" section).

Found trying issue 16 as a user (session 6): a thread's interrupt answered with ``Command(resume="yes")`` by
``approver`` bob read ``approved (responder: bob)`` in ``flightlog show``, but the session page said "No one
has approved, denied or aborted anything in this run": the page's decisions
(:func:`flightlog.web.actions.decision_rows`) are the ``approval_decision`` records the kernel, ``flightlog
approve``, the dashboard and the Agents SDK session write beside ``permission_resolved``, and the LangGraph
saver wrote none. It now records the decision as they do (``permission_resolved(responder="user")`` and the
``approval_decision`` naming who answered, in the same transaction).
"""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient
from langchain_core.messages import HumanMessage
from langgraph.types import Command

import flightlog
from flightlog.integrations.langgraph import FlightlogSaver
from flightlog.store import SqliteStore
from flightlog.web.actions import decision_rows
from flightlog.web.app import create_app
from flightlog.web.security import Auth

from .test_langgraph_readable import CFG, SID, _graph

BASE = "http://127.0.0.1:8000"
TOKEN = "test-token-0123456789abcdef"


def _answer(db: Path, resume: str, config: dict[str, object]) -> list[dict[str, object]]:
    """Ask the graph, answer its interrupt with ``resume`` under ``config``; the session's decision rows."""
    with flightlog.open_store(str(db)) as store:
        graph = _graph(FlightlogSaver(store, notary=None))
        graph.invoke({"messages": [HumanMessage("add 1 and 2")]}, CFG)
        graph.invoke(Command(resume=resume), config)
        return decision_rows(store, SID)


def test_the_dashboard_names_who_answered_an_interrupt(tmp_path: Path) -> None:
    db = tmp_path / "lg.db"
    rows = _answer(db, "yes", {**CFG, "metadata": {"approver": "bob"}})
    assert [(row["kind"], row["who"]) for row in rows] == [("approve", "bob")]
    with TestClient(
        create_app(lambda read_only: SqliteStore(db, read_only=read_only), token=TOKEN), base_url=BASE
    ) as client:
        client.cookies.set("flightlog_ui_8000", Auth(TOKEN).cookie_value)
        page = client.get(f"/session?id={SID}").text
    assert "No one has approved" not in page
    assert 'class="decision decision-approve"' in page and '<td class="who">bob</td>' in page


def test_a_denial_names_who_denied(tmp_path: Path) -> None:
    rows = _answer(tmp_path / "lg.db", "no", {"configurable": {**CFG["configurable"], "user_id": "dan"}})
    assert [(row["kind"], row["who"], row["reason"]) for row in rows] == [("deny", "dan", "denied by dan")]


def test_a_name_the_operator_rule_refuses_is_passed_over(tmp_path: Path) -> None:
    # a control character in the first key found: not recorded; the next key's name is
    config = {**CFG, "metadata": {"responder": "bo\x1b[31mb", "approver": "carol"}}
    rows = _answer(tmp_path / "lg.db", "yes", config)
    assert [(row["kind"], row["who"]) for row in rows] == [("approve", "carol")]
    # none valid: the default operator name, as `flightlog approve` without --as
    rows = _answer(tmp_path / "lg2.db", "yes", {**CFG, "metadata": {"approver": "x" * 81}})
    assert [(row["kind"], row["who"]) for row in rows] == [("approve", "user")]
