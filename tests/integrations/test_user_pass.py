"""A new user's acceptance pass of issue 16: what they met following the README and the guide.

Each test is a defect found by following the docs from a fresh clone, checked through the CLI as the user
looked at it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, MessagesState, StateGraph
from typer.testing import CliRunner

import flightlog
from flightlog.cli import app
from flightlog.integrations.langgraph import FlightlogSaver


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
    """``flightlog replay THREAD --json`` as (role, text) pairs."""
    result = CliRunner().invoke(app, ["--db", str(db), "replay", thread, "--json"])
    assert result.exit_code == 0, result.output
    return [(m["role"], "".join(p.get("text", "") for p in m["content"])) for m in json.loads(result.output)]


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
    assert _replay(db, "t1") == [("user", "Refund order 42"), ("assistant", "echo: Refund order 42")]
