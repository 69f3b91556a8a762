"""A LangGraph thread as a user sees it: `show`, `replay`, `runs`, `pending` and the dashboard (issue 16).

A real ``MessagesState`` graph (a scripted chat model node, a human-approval node that calls ``interrupt()``
and LangGraph's prebuilt ``ToolNode``) runs on :class:`FlightlogSaver`; every check goes through the CLI or
the dashboard's HTTP API, as a user would look at the thread.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command, Interrupt, interrupt
from typer.testing import CliRunner

import flightlog
from flightlog.cli import app
from flightlog.integrations.langgraph import PROTOCOL, FlightlogSaver, session_id_for
from flightlog.store.base import Store
from flightlog.web.app import create_app
from flightlog.web.security import Auth

TOKEN = "test-token-0123456789abcdef"


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _graph(saver: Any) -> Any:
    def model(state: MessagesState) -> dict[str, Any]:
        calls = sum(1 for m in state["messages"] if m.type == "ai")
        if calls % 2 == 0:  # ask for the tool, then answer with its result
            return {
                "messages": [
                    AIMessage(
                        content="",
                        tool_calls=[{"name": "add", "args": {"a": 1, "b": 2}, "id": f"call{calls}"}],
                        response_metadata={"model_name": "gpt-test", "model_provider": "openai"},
                        usage_metadata={"input_tokens": 5, "output_tokens": 2, "total_tokens": 7},
                    )
                ]
            }
        return {"messages": [AIMessage(content=f"the sum is {state['messages'][-1].content}")]}

    def approve(state: MessagesState) -> dict[str, Any]:
        answer = interrupt({"question": "run add?"})
        if answer == "explode":
            raise ValueError("the approver broke it")
        return {}

    def route(state: MessagesState) -> str:
        return "approve" if getattr(state["messages"][-1], "tool_calls", None) else END

    g = StateGraph(MessagesState)
    g.add_node("model", model)
    g.add_node("approve", approve)
    g.add_node("tools", ToolNode([add]))
    g.add_edge(START, "model")
    g.add_conditional_edges("model", route, ["approve", END])
    g.add_edge("approve", "tools")
    g.add_edge("tools", "model")
    return g.compile(checkpointer=saver)


CFG: RunnableConfig = {"configurable": {"thread_id": "chat"}}
SID = session_id_for("chat")


def _cli(db: Path, *args: str) -> str:
    result = CliRunner().invoke(app, ["--db", str(db), *args])
    assert result.exit_code == 0, (args, result.output)
    return result.output


def _run(db: Path) -> dict[str, Any]:
    rows = json.loads(_cli(db, "runs", "--json"))
    assert len(rows) == 1
    return dict(rows[0])


def _events(store: Store) -> list[dict[str, Any]]:
    return [json.loads(r.event_bytes) for r in store.read_events(SID)]


def test_a_thread_reads_as_what_happened(db: Path, store: Store) -> None:
    graph = _graph(FlightlogSaver(store))
    graph.invoke({"messages": [HumanMessage("add 1 and 2")]}, CFG)

    # interrupted: waiting for a human, the gate listed by `pending` and in the run's refs
    run = _run(db)
    assert (run["source"], run["state"]) == ("workflow", "waiting_input")
    assert [r["label"] for r in run["refs"]] == ["approve: pending"]  # one approval, one ref (seed 002)
    pending = json.loads(_cli(db, "pending", "--json"))
    assert [(p["session_id"], p["tool"]) for p in pending] == [(SID, "approve")]
    shown = _cli(db, "show", "chat")
    assert "requested add(" in shown and "needs approval" in shown and "suspended" in shown
    # `flightlog approve` cannot answer a graph's interrupt (only Command(resume=...) reaches LangGraph):
    # refused with one line saying how, and nothing is written
    head = store.get_session(SID).head_seq
    call_id = pending[0]["call_id"]
    refused = CliRunner().invoke(app, ["--db", str(db), "approve", SID, call_id, "--as", "eve"])
    assert refused.exit_code == 2 and refused.stderr.startswith("flightlog: error: session "), refused.stderr
    assert (
        "is a LangGraph thread: answer its interrupt with graph.invoke(Command(resume=...), config) in the "
        "LangGraph app" in refused.stderr
    )
    assert store.get_session(SID).head_seq == head

    # the model's answer keeps what LangChain kept of the provider's message
    llm = next(e for e in _events(store) if e["kind"] == "llm_completed")
    assert llm["provider_replay"]["protocol"] == PROTOCOL
    assert llm["provider_replay"]["model"] == "gpt-test" and llm["provider_replay"]["provider"] == "openai"
    assert llm["provider_replay"]["native_message"]["usage_metadata"]["total_tokens"] == 7
    assert llm["message"]["tool_calls"] == [{"id": "call0", "name": "add", "arguments": '{"a": 1, "b": 2}'}]

    # resumed by carol (config metadata): approved, the tool ran, the run completed
    graph.invoke(Command(resume="yes"), {**CFG, "metadata": {"approver": "carol"}})
    run = _run(db)
    assert (run["state"], run["terminal"]["outcome"]) == ("terminal", "completed")
    assert run["budget"]["tokens_used"] == 7 and run["budget"]["steps_taken"] == 2
    assert [r["label"] for r in run["refs"]] == ["approve: approved"]
    shown = _cli(db, "show", "chat")
    assert "approved (responder: user)" in shown and "run ended: completed" in shown
    gate = next(e for e in _events(store) if e["kind"] == "tool_gated")["call_id"]
    assert f"call {gate} approved by carol" in shown
    replay = _cli(db, "replay", "chat")
    for text in ("add 1 and 2", "-> add [call0]", "(tool_result) 3", "the sum is 3"):
        assert text in replay, (text, replay)
    assert _cli(db, "pending", "--json").strip() == "[]"

    # a second question, denied... then a node failure: the run failed, its turn rolled back
    graph.invoke({"messages": [HumanMessage("once more")]}, CFG)
    assert _run(db)["state"] == "waiting_input"
    with pytest.raises(ValueError, match="the approver broke it"):
        graph.invoke(Command(resume="explode"), CFG)
    run = _run(db)
    assert (run["state"], run["terminal"]["outcome"]) == ("terminal", "failed")
    assert "error in node approve: ValueError: the approver broke it" in run["terminal"]["detail"]
    assert "rolled back" in _cli(db, "show", "chat")

    # signed with the user's log key as the graph stopped (no notary passed), and intact
    audit = _cli(db, "audit", "chat")
    assert audit.startswith("ok") and "0 signed checkpoint" not in audit and "signed checkpoint" in audit


def test_a_denial_is_recorded_with_who_denied(db: Path, store: Store) -> None:
    graph = _graph(FlightlogSaver(store))
    graph.invoke(
        {"messages": [HumanMessage("add 1 and 2")]}, {"configurable": {"thread_id": "chat", "user_id": "dan"}}
    )
    graph.invoke(Command(resume="no"), {"configurable": {"thread_id": "chat", "user_id": "dan"}})
    events = _events(store)
    gate = next(e for e in events if e["kind"] == "tool_gated")["call_id"]
    start = next(i for i, e in enumerate(events) if e["kind"] == "permission_resolved")
    resolved, decision, resumed = events[start : start + 3]
    # as `flightlog deny` records it: seed 000's human responder, the name in the approval_decision
    assert resolved == {"kind": "permission_resolved", "turn": 2, "approved": False, "responder": "user"}
    assert (decision["kind"], decision["custom_kind"]) == ("custom", "approval_decision")
    assert decision["payload"] == {
        "turn": 2,
        "call_id": gate,
        "gate": "approval",
        "approved": False,
        "responder": "dan",
        "reason": "denied by dan",
    }
    assert resumed["kind"] == "resumed" and resumed["denied"] == [gate] and not resumed.get("approved")


def test_time_travel_rolls_the_replay_back(db: Path, store: Store) -> None:
    graph = _graph(FlightlogSaver(store))
    graph.invoke({"messages": [HumanMessage("add 1 and 2")]}, CFG)
    graph.invoke(Command(resume="yes"), CFG)
    asked = next(s for s in graph.get_state_history(CFG) if s.next == ("approve",))
    graph.invoke(None, asked.config)  # from the earlier checkpoint: approval is asked again
    assert _run(db)["state"] == "waiting_input"
    replay = _cli(db, "replay", "chat")
    assert "the sum is 3" not in replay and "-> add [call0]" in replay  # the later turns were rolled back
    graph.invoke(Command(resume="yes"), CFG)
    assert "the sum is 3" in _cli(db, "replay", "chat")
    assert _run(db)["terminal"]["outcome"] == "completed"


def test_the_dashboard_shows_the_thread(db: Path, store: Store) -> None:
    graph = _graph(FlightlogSaver(store))
    graph.invoke({"messages": [HumanMessage("add 1 and 2")]}, CFG)
    graph.invoke(Command(resume="yes"), CFG)
    size = len(_events(store))

    def open_db(read_only: bool) -> Any:
        return flightlog.open_store(str(db), read_only=read_only)

    base = "http://127.0.0.1:8000"
    with TestClient(create_app(open_db, token=TOKEN), base_url=base) as client:
        client.cookies.set("flightlog_ui_8000", Auth(TOKEN).cookie_value)
        (row,) = client.get("/api/runs").json()["runs"]
        assert (row["id"], row["source"], row["state"], row["outcome"]) == (
            SID,
            "workflow",
            "terminal",
            "completed",
        )
        page = client.get("/session", params={"id": SID, "at": str(size - 1)})
        assert page.status_code == 200
        for text in ("add 1 and 2", "the sum is 3", "approved"):
            assert text in page.text, text


def _plain(value: Any) -> Any:
    """Messages without their random ids, interrupts without theirs: what two identical runs share."""
    if isinstance(value, BaseMessage):
        return (
            value.type,
            value.content,
            getattr(value, "tool_calls", None),
            getattr(value, "tool_call_id", None),
        )
    if isinstance(value, Interrupt):
        return ("interrupt", _plain(value.value))
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _drive_chat(graph: Any) -> list[Any]:
    """Interrupt, approve, time-travel to the approval and deny it, fork with an edited message, fail."""
    out = [graph.invoke({"messages": [HumanMessage("add 1 and 2")]}, CFG)]
    out.append(graph.invoke(Command(resume="yes"), CFG))
    history = list(graph.get_state_history(CFG))
    asked = next(s for s in history if s.next == ("approve",))
    out.append(graph.invoke(None, asked.config))
    out.append(graph.invoke(Command(resume="no"), CFG))
    fork = graph.update_state(asked.config, {"messages": [HumanMessage("actually, add 2 and 2")]})
    out.append(graph.invoke(None, fork))
    out.append(graph.invoke({"messages": [HumanMessage("once more")]}, CFG))
    try:
        graph.invoke(Command(resume="explode"), CFG)
        out.append("no error")
    except ValueError as exc:
        out.append(str(exc))
    state = graph.get_state(CFG)
    out.append((state.values, state.next, [t.name for t in state.tasks]))
    out.append(
        [
            (s.values, s.next, s.metadata.get("source"), s.metadata.get("step"))
            for s in graph.get_state_history(CFG)
        ]
    )
    return _plain(out)


def test_a_chat_graph_runs_as_on_langgraphs_own_saver(store: Store) -> None:
    """Interrupts, time travel, a fork and a node failure give the same outputs and history as InMemorySaver."""
    ours = _drive_chat(_graph(FlightlogSaver(store)))
    assert ours == _drive_chat(_graph(InMemorySaver()))
    assert ours[1]["messages"][-1][1] == "the sum is 3"
