"""Who answered a LangGraph interrupt, on the dashboard's session page (its "Decisions" section).

Found trying issue 16 as a user (session 6): a thread's interrupt answered with ``Command(resume="yes")`` by
``approver`` bob reads ``approved (responder: bob)`` in ``flightlog show``, but the session page says "No one
has approved, denied or aborted anything in this run": the page's decisions
(:func:`flightlog.web.actions.decision_rows`) are the ``approval_decision`` records the kernel, ``flightlog
approve``, the dashboard and the Agents SDK session write beside ``permission_resolved``; the LangGraph saver
puts the name in ``permission_resolved.responder`` (seed 000: ``"user"`` for a human) and writes no
``approval_decision`` (``src/flightlog/integrations/langgraph.py``, where ``PermissionResolved`` is built).
Marked ``xfail(strict=True)`` until the helpers changing that file record the decision as the others do.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage
from langgraph.types import Command

import flightlog
from flightlog.integrations.langgraph import FlightlogSaver
from flightlog.web.actions import decision_rows

from .test_langgraph_readable import CFG, SID, _graph


@pytest.mark.xfail(
    strict=True,
    reason="langgraph.py writes permission_resolved(responder=<name>) and no approval_decision record, "
    "which the dashboard's Decisions section (web/actions.py) reads",
)
def test_the_dashboard_names_who_answered_an_interrupt(tmp_path: Path) -> None:
    with flightlog.open_store(str(tmp_path / "lg.db")) as store:
        graph = _graph(FlightlogSaver(store))
        graph.invoke({"messages": [HumanMessage("add 1 and 2")]}, CFG)
        graph.invoke(Command(resume="yes"), {**CFG, "metadata": {"approver": "bob"}})
        rows = decision_rows(store, SID)
    assert [(row["kind"], row["who"]) for row in rows] == [("approve", "bob")]
