"""Graphs whose tasks are ``Send`` s (each call or item its own task, as ``create_agent`` and fan-out graphs
run them) read as what happened: the run ends ``completed`` when the graph ran to its end and not before,
an interrupt or error in a sent task is recorded under the node the send targets, and a deleted thread's
next run starts with no gate of the runs before it."""

from __future__ import annotations

import json
import operator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command, Send, interrupt

from flightlog.integrations.langgraph import FlightlogSaver, session_id_for
from flightlog.recorder import verify_session
from flightlog.store.base import Store

from .conftest import resumes_after_answer
from .test_langgraph_readable import _cli
from .test_user_pass import (  # asks for refund call_1 each run, its ToolNode asks a human
    _refund_graph,
    sent_tools_graph,
)

CFG: RunnableConfig = {"configurable": {"thread_id": "t1"}}


def _events(store: Store) -> list[dict[str, Any]]:
    return [json.loads(r.event_bytes) for r in store.read_events(session_id_for("t1"))]


def _kinds(store: Store) -> list[str]:
    """The thread's readable lifecycle events, in ledger order."""
    lifecycle = {"run_started", "tool_gated", "suspended", "resumed", "run_terminal"}
    return [e["kind"] for e in _events(store) if e["kind"] in lifecycle]


def _status(db: Path, store: Store) -> str:
    """The thread's session status; ``flightlog runs`` lists the run as ended exactly when it ended, with
    that outcome."""
    (row,) = [r for r in json.loads(_cli(db, "runs", "--json")) if r["run_id"] == session_id_for("t1")]
    status = store.get_session(session_id_for("t1")).status
    ended = status in ("completed", "interrupted", "failed")
    assert (row["state"] == "terminal") == ended, row
    if ended:
        assert row["terminal"]["outcome"] == status, row
    return status


@tool
def lookup(order: int) -> str:
    """Look an order up."""
    return f"order {order}: shipped"


def _model(state: MessagesState) -> dict[str, Any]:
    """Asks for ``lookup`` on orders 1 and 2 (two calls); after their results, answers."""
    last = state["messages"][-1]
    if isinstance(last, ToolMessage):
        return {"messages": [AIMessage(content="both shipped")]}
    calls = [{"name": "lookup", "args": {"order": n}, "id": f"call_{n}", "type": "tool_call"} for n in (1, 2)]
    return {"messages": [AIMessage(content="", tool_calls=calls)]}


def test_a_graph_whose_tools_are_sent_completes(db: Path, store: Store) -> None:
    graph = sent_tools_graph(FlightlogSaver(store, notary=None), _model, [lookup])
    out = graph.invoke({"messages": [("user", "where are orders 1 and 2?")]}, CFG)
    assert out["messages"][-1].content == "both shipped"
    assert _status(db, store) == "completed"
    assert _kinds(store) == ["run_started", "run_terminal"]
    (terminal,) = [e for e in _events(store) if e["kind"] == "run_terminal"]
    assert (terminal["reason"], terminal["turns_used"]) == ("completed", 2)
    # the next run of the thread is a run of its own, ended as well
    graph.invoke({"messages": [("user", "and again?")]}, CFG)
    assert _status(db, store) == "completed"
    assert _kinds(store) == ["run_started", "run_terminal"] * 2
    assert verify_session(store, session_id_for("t1")).ok


class _Fan(TypedDict):
    items: list[str]
    out: Annotated[list[str], operator.add]


def _worker(arg: dict[str, str]) -> dict[str, Any]:
    """A plain (non-tool) node run once per item: asks a human about it; fails on ``"boom"``."""
    if arg["item"] == "boom":
        raise ValueError("cannot handle boom")
    answer = interrupt({"question": f"ship {arg['item']}?"})
    return {"out": [f"{arg['item']}: {answer}"]}


def _fan_out(saver: FlightlogSaver) -> Any:
    g = StateGraph(_Fan)
    g.add_node("worker", _worker)
    g.add_conditional_edges(START, lambda s: [Send("worker", {"item": i}) for i in s["items"]], ["worker"])
    g.add_edge("worker", END)
    return g.compile(checkpointer=saver)


def test_interrupts_in_sent_tasks_wait_under_their_node_then_the_run_completes(
    db: Path, store: Store
) -> None:
    graph = _fan_out(FlightlogSaver(store, notary=None))
    graph.invoke({"items": ["a", "b"], "out": []}, CFG)
    interrupts = [i for t in graph.get_state(CFG).tasks for i in t.interrupts]
    assert len(interrupts) == 2
    # the sends are still pending: waiting, not completed
    assert _status(db, store) == "suspended"
    gated = [(e["call_id"], e["tool"]) for e in _events(store) if e["kind"] == "tool_gated"]
    assert sorted(gated) == sorted((i.id, "worker") for i in interrupts)
    asked = [e["tool"] for e in _events(store) if e["kind"] == "permission_requested"]
    assert asked == ["worker", "worker"]
    assert "run_terminal" not in _kinds(store)

    out = graph.invoke(Command(resume={i.id: "yes" for i in interrupts}), CFG)
    assert sorted(out["out"]) == ["a: yes", "b: yes"]
    assert _status(db, store) == "completed"
    # both answers are recorded; LangGraph saves the tasks' resume writes in the background, so the last
    # one may come after the checkpoint that ended the run: then the ended run is not resumed again
    decisions = [e["payload"] for e in _events(store) if e.get("custom_kind") == "approval_decision"]
    assert sorted((d["call_id"], d["approved"]) for d in decisions) == sorted(
        (i.id, True) for i in interrupts
    )
    kinds = _kinds(store)
    assert kinds.count("run_terminal") == 1 and kinds.count("resumed") <= 1
    assert kinds.index("run_terminal") > kinds.index("suspended")
    (terminal,) = [e for e in _events(store) if e["kind"] == "run_terminal"]
    assert terminal["reason"] == "completed"
    assert verify_session(store, session_id_for("t1")).ok


def test_an_error_in_a_sent_task_names_its_node(db: Path, store: Store) -> None:
    graph = _fan_out(FlightlogSaver(store, notary=None))
    with pytest.raises(ValueError, match="cannot handle boom"):
        graph.invoke({"items": ["boom"], "out": []}, CFG)
    (terminal,) = [e for e in _events(store) if e["kind"] == "run_terminal"]
    # (the error's text: ``ValueError: ...`` or ``ValueError('...')``, as the write is recorded before or
    # after its checkpoint; LangGraph saves it in the background)
    assert terminal["reason"].startswith("error in node worker: ValueError")
    assert "cannot handle boom" in terminal["reason"]
    (rolled,) = [e for e in _events(store) if e["kind"] == "rollbacked"]
    assert rolled["reason"]["tool_name"] == "worker"
    assert _status(db, store) == "failed"


@pytest.mark.parametrize("saver", ["same", "rebuilt"])
def test_a_deleted_threads_next_run_waits_at_its_own_gate(db: Path, store: Store, saver: str) -> None:
    """A thread deleted while it waits at an interrupt: the next run's interrupt on the same call id is
    a new gate (recorded, the thread waits), answered on its own (by the same saver, or by one whose
    read model is rebuilt from the ledger)."""
    first = FlightlogSaver(store, notary=None)
    _refund_graph(first).invoke({"messages": [("user", "refund order 42")]}, CFG)
    assert _status(db, store) == "suspended"
    first.delete_thread("t1")
    graph = _refund_graph(first if saver == "same" else FlightlogSaver(store, notary=None))
    graph.invoke({"messages": [("user", "refund order 42, again")]}, CFG)
    assert _status(db, store) == "suspended"
    gated = [(e["call_id"], e["tool"]) for e in _events(store) if e["kind"] == "tool_gated"]
    assert gated == [("call_1", "refund"), ("call_1", "refund")]
    assert _kinds(store)[-2:] == ["tool_gated", "suspended"]

    out = graph.invoke(Command(resume="yes"), CFG)
    assert out["messages"][-1].content == "Done: refunded order 42"
    events = _events(store)
    (decided,) = [e["payload"] for e in events if e.get("custom_kind") == "approval_decision"]
    assert (decided["call_id"], decided["approved"]) == ("call_1", True)
    # (the answer may reach the saver after the run's end: with the saver's calls delayed at random, in 1
    # of 40 runs; then it resumes nothing)
    resumed = [e for e in events if e["kind"] == "resumed"]
    assert len(resumed) == resumes_after_answer([e["kind"] for e in events])
    assert all((r["approved"], r.get("denied", [])) == (["call_1"], []) for r in resumed)
    assert _status(db, store) == "completed"
    assert verify_session(store, session_id_for("t1")).ok
