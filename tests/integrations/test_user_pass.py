"""A new user's acceptance pass of issue 16: what they met following the README and the guide.

Each test is a defect found by following the docs from a fresh clone, checked through the CLI as the user
looked at it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command, Send, interrupt
from typer.testing import CliRunner

import flightlog
from flightlog.cli import app
from flightlog.events import Resumed
from flightlog.integrations.langgraph import FlightlogSaver
from flightlog.recorder import verify_session
from flightlog.sessions import iter_events
from flightlog.web.actions import decision_rows
from flightlog.web.conversation import conversation
from flightlog.web.waterfall_api import waterfall


def _echo_graph(saver: FlightlogSaver) -> Any:
    """A ``MessagesState`` graph whose model node answers each human message with ``echo: <text>``."""

    def model(state: MessagesState) -> dict[str, Any]:
        last = state["messages"][-1]
        assert not isinstance(last, AIMessage | ToolMessage)
        return {"messages": [AIMessage(content=f"echo: {last.content}")]}

    g = StateGraph(MessagesState)
    g.add_node("model", model)
    g.add_edge(START, "model")
    return g.compile(checkpointer=saver)


def _replay(db: Path, thread: str) -> list[tuple[str, str]]:
    """The messages of ``flightlog replay THREAD --json`` as (role, text) pairs."""
    result = CliRunner().invoke(app, ["--db", str(db), "replay", thread, "--json"])
    assert result.exit_code == 0, result.output
    messages = json.loads(result.output)["messages"]
    return [(m["role"], "".join(p.get("text", "") for p in m["content"])) for m in messages]


# LangGraph's own docs feed MessagesState graphs message-likes (`add_messages` converts them): a
# (role, text) tuple, an OpenAI-style dict, a bare string, a list of them.
MESSAGE_LIKES = {
    "tuple": lambda text: {"messages": [("user", text)]},
    "dict": lambda text: {"messages": [{"role": "user", "content": text}]},
    "string": lambda text: {"messages": text},
    "list of strings": lambda text: {"messages": [text]},
}


@pytest.mark.parametrize("form", sorted(MESSAGE_LIKES))
def test_message_like_inputs_replay_as_the_users_words(form: str, tmp_path: Path) -> None:
    db = tmp_path / "lg.db"
    config: RunnableConfig = {"configurable": {"thread_id": "t1"}}
    with flightlog.open_store(str(db)) as store:
        graph = _echo_graph(FlightlogSaver(store, notary=None))
        graph.invoke(MESSAGE_LIKES[form]("Refund order 42"), config)
        graph.invoke(MESSAGE_LIKES[form]("and order 43"), config)
        assert [m.content for m in graph.get_state(config).values["messages"]] == [
            "Refund order 42",
            "echo: Refund order 42",
            "and order 43",
            "echo: and order 43",
        ]
    assert _replay(db, "t1") == [
        ("user", "Refund order 42"),
        ("assistant", "echo: Refund order 42"),
        ("user", "and order 43"),
        ("assistant", "echo: and order 43"),
    ]


def test_a_system_tuple_in_the_input_is_the_runs_system_prompt(tmp_path: Path) -> None:
    db = tmp_path / "lg.db"
    config: RunnableConfig = {"configurable": {"thread_id": "t1"}}
    with flightlog.open_store(str(db)) as store:
        graph = _echo_graph(FlightlogSaver(store, notary=None))
        graph.invoke({"messages": [("system", "Be brief."), ("user", "Refund order 42")]}, config)
        [started] = [
            e
            for e in (json.loads(r.event_bytes) for r in store.read_events("langgraph:t1"))
            if e["kind"] == "run_started"
        ]
    assert (started["goal"], started["system_prompt"]) == ("Refund order 42", "Be brief.")
    result = CliRunner().invoke(app, ["--db", str(db), "replay", "t1", "--json"])
    assert json.loads(result.output)["system_prompt"] == "Be brief."
    assert _replay(db, "t1") == [("user", "Refund order 42"), ("assistant", "echo: Refund order 42")]


@tool
def refund(order: int) -> str:
    """Refund an order: asks a human first (``interrupt``)."""
    if interrupt({"question": f"refund order {order}?"}) != "yes":
        return f"refund of {order} refused"
    return f"refunded order {order}"


def _refund_model(state: MessagesState) -> dict[str, Any]:
    """The model: asks for ``refund(order=42)`` as call ``call_1``; after the tool's result, ``Done: <it>``."""
    last = state["messages"][-1]
    if isinstance(last, ToolMessage):
        return {"messages": [AIMessage(content=f"Done: {last.content}")]}
    call = {"name": "refund", "args": {"order": 42}, "id": "call_1", "type": "tool_call"}
    return {"messages": [AIMessage(content="", tool_calls=[call])]}


def _refund_graph(saver: FlightlogSaver) -> Any:
    """The README's LangGraph shape: a model node asking for ``refund``, LangGraph's ``ToolNode`` running it."""

    g = StateGraph(MessagesState)
    g.add_node("model", _refund_model)
    g.add_node("tools", ToolNode([refund]))
    g.add_edge(START, "model")
    g.add_conditional_edges("model", tools_condition)
    g.add_edge("tools", "model")
    return g.compile(checkpointer=saver)


def _refund_graph_sent(saver: FlightlogSaver) -> Any:
    """As :func:`_refund_graph`, the model's calls sent to the ``ToolNode`` one ``Send`` each (as
    ``create_agent`` does): each call its own task."""
    return sent_tools_graph(saver, _refund_model, [refund])


def sent_tools_graph(saver: FlightlogSaver, model: Any, tools: list[Any]) -> Any:
    """``create_agent``'s shape: node ``model`` (``model``), each of its tool calls sent to the ``ToolNode``
    ``tools`` (of ``tools``) as a task of its own (one ``Send``), back to ``model`` after them."""

    def route(state: MessagesState) -> Any:
        last = state["messages"][-1]
        return (
            [Send("tools", [c]) for c in last.tool_calls]
            if isinstance(last, AIMessage) and last.tool_calls
            else END
        )

    g = StateGraph(MessagesState)
    g.add_node("model", model)
    g.add_node("tools", ToolNode(tools))
    g.add_edge(START, "model")
    g.add_conditional_edges("model", route, ["tools", END])
    g.add_edge("tools", "model")
    return g.compile(checkpointer=saver)


REFUND_GRAPHS = {"pulled": _refund_graph, "sent": _refund_graph_sent}


def test_the_waterfall_draws_a_tool_that_ran_after_its_approval(tmp_path: Path) -> None:
    db = tmp_path / "lg.db"
    config: RunnableConfig = {"configurable": {"thread_id": "t1"}}
    with flightlog.open_store(str(db)) as store:
        graph = _refund_graph(FlightlogSaver(store, notary=None))
        graph.invoke({"messages": [("user", "Refund order 42")]}, config)
        graph.invoke(Command(resume="yes"), {**config, "metadata": {"approver": "alice"}})
        kinds = {
            e["kind"]: seq
            for seq, e in enumerate(json.loads(r.event_bytes) for r in store.read_events("langgraph:t1"))
        }
        spans = [
            (s["lane"], s["label"], s["end_seq"], s["open"])
            for s in waterfall(store, "langgraph:t1")["spans"]
        ]
    tools = [span for span in spans if span[0] == "tool"]
    assert tools == [
        ("tool", "refund (not run: suspended)", kinds["suspended"], False),  # requested, then the interrupt
        ("tool", "refund", kinds["tool_completed"], False),  # run after alice's answer, ended by its result
    ]
    assert ("approval", "waiting for approval, turn 2: approved by alice") in [(s[0], s[1]) for s in spans]


def _resume_elsewhere(db: Path, shape: str, answer: str, approver: str, *interrupt_id: str) -> str:
    """Answer thread ``t1``'s interrupt from a second process (``langgraph_refund_worker.py``); its reply."""
    worker = Path(__file__).with_name("langgraph_refund_worker.py")
    done = subprocess.run(
        [sys.executable, str(worker), str(db), "t1", shape, answer, approver, *interrupt_id],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout))


def _refund_notes(store: Any) -> list[str]:
    """The conversation API's notes on the model's ``refund`` call ``call_1``."""
    rows = conversation(store, "langgraph:t1", None, None)["rows"]
    calls = [call for row in rows for call in row["calls"] if call["id"] == "call_1"]
    assert [call["name"] for call in calls] == ["refund"]
    return list(calls[0]["notes"])


@pytest.mark.parametrize(
    ("shape", "answer", "by_id", "verdict"),
    [
        ("pulled", "yes", True, "approved"),
        ("pulled", "no", True, "denied"),
        ("pulled", "yes", False, "approved"),
        ("sent", "yes", True, "approved"),
        ("sent", "no", False, "denied"),
    ],
)
def test_an_interrupt_in_a_tool_waits_on_the_models_call(
    shape: str, answer: str, by_id: bool, verdict: str, tmp_path: Path
) -> None:
    """A tool calling ``interrupt()`` inside LangGraph's ``ToolNode``: the gate is the model's call
    (``refund`` / ``call_1``) in ``pending``, ``show``, the conversation and ``approve``'s refusal, not the
    node and the interrupt id; answered from another process by interrupt id (or plainly), the decision is
    recorded on that call."""
    db = tmp_path / "lg.db"
    config: RunnableConfig = {"configurable": {"thread_id": "t1"}}
    with flightlog.open_store(str(db)) as store:
        graph = REFUND_GRAPHS[shape](FlightlogSaver(store, notary=None))
        graph.invoke({"messages": [("user", "Refund order 42")]}, config)
        (task,) = graph.get_state(config).tasks
        interrupt_id = task.interrupts[0].id
        assert _refund_notes(store) == ['waiting for approval: {"question": "refund order 42?"}']
    runner = CliRunner()
    pending = json.loads(runner.invoke(app, ["--db", str(db), "pending", "--json"]).output)
    assert [(p["call_id"], p["tool"], p["arguments"], p["reason"], p["decision"]) for p in pending] == [
        ("call_1", "refund", '{"order": 42}', '{"question": "refund order 42?"}', None)
    ]
    shown = runner.invoke(app, ["--db", str(db), "show", "t1"]).output
    assert 'refund call_1 needs approval: {"question": "refund order 42?"}' in shown
    assert f"langgraph interrupt {interrupt_id} gates call call_1" in shown
    assert "tools()" not in shown and f"{interrupt_id} needs approval" not in shown
    refused = runner.invoke(app, ["--db", str(db), "approve", "langgraph:t1", "call_1", "--as", "eve"])
    assert refused.exit_code == 2  # the wrong command, not a problem with the data: one line says where
    assert refused.stdout == "" and len(refused.stderr.splitlines()) == 1
    assert (
        "answer its interrupt with graph.invoke(Command(resume=...), config) in the LangGraph app"
        in refused.output
    )
    assert "; refund call_1 waits there; nothing was written" in " ".join(refused.output.split())

    reply = _resume_elsewhere(db, shape, answer, "alice", *([interrupt_id] if by_id else []))
    assert reply == ("Done: refunded order 42" if answer == "yes" else "Done: refund of 42 refused")
    with flightlog.open_store(str(db)) as store:
        assert _refund_notes(store) == [  # decided: the gate's note no longer says it waits
            'asked for approval: {"question": "refund order 42?"}',
            f"{verdict} by alice",
        ]
        from .conftest import resumes_after_answer  # (here: langgraph_refund_worker.py imports this module)

        events = [(row.kind, e) for row, e in iter_events(store, "langgraph:t1")]
        # the answer may reach the saver after the run's end (LangGraph saves it in the background): then
        # it resumes nothing
        resumed = [e for _kind, e in events if isinstance(e, Resumed)]
        assert len(resumed) == resumes_after_answer([kind for kind, _e in events])
        assert all(
            (r.approved, r.denied) == ((["call_1"], []) if answer == "yes" else ([], ["call_1"]))
            for r in resumed
        )
        rows = [(r["what"], r["who"]) for r in decision_rows(store, "langgraph:t1")]
        assert rows == [(f"{verdict} call call_1 (approval)", "alice")]
        # no longer waiting: the run ended, also when the tools ran as Send tasks (the last checkpoint
        # keeps LangGraph's ``__pregel_tasks`` channel, emptied)
        assert store.get_session("langgraph:t1").status == "completed"
        assert verify_session(store, "langgraph:t1").ok
    assert json.loads(runner.invoke(app, ["--db", str(db), "pending", "--json"]).output) == []
