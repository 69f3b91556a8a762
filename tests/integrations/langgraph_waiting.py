"""A LangGraph thread stopped at an ``interrupt()``, recorded by :class:`FlightlogSaver`: a session that the
graph's own app runs, not flightlog (``pending``, ``resume``, ``signal``, ``abort`` and the dashboard on it)."""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

import flightlog
from flightlog.integrations.langgraph import FlightlogSaver
from flightlog.integrity.notary import USER_NOTARY, Notary, UserNotary

QUESTION = "ok to act?"
"""What the thread's ``ask`` node asks at its interrupt."""


class _Steps(TypedDict):
    steps: Annotated[list[str], operator.add]


def _ask(state: _Steps) -> dict[str, Any]:
    return {"steps": [f"asked: {interrupt(QUESTION)}"]}


def waiting_thread(db: Path, *, notary: Notary | UserNotary | None = USER_NOTARY) -> str:
    """Record thread ``t1`` (session ``langgraph:t1``) in the ledger file ``db``, stopped at its interrupt
    (its run open: no ``run_terminal``); ``notary`` as :class:`FlightlogSaver` takes it. Returns the
    interrupt's id."""
    builder = StateGraph(_Steps)
    builder.add_node("ask", _ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    with flightlog.open_store(str(db)) as store:
        graph = builder.compile(checkpointer=FlightlogSaver(store, notary=notary))
        out = graph.invoke({"steps": []}, {"configurable": {"thread_id": "t1"}})
    return str(out["__interrupt__"][0].id)
