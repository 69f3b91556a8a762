"""A LangGraph thread's readable record where issue 16 left gaps: system prompts, rewritten messages,
static interrupts and copied threads, checked through ``show``, ``replay`` and ``runs`` on real graphs.

Each test compares what ``replay`` prints with the graph's own ``get_state().values["messages"]``: replay
holds one message per human, AI and tool message of the thread, and the thread's leading system messages
are the run's system prompt (``run_started.system_prompt``, printed by ``replay`` before the messages).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.types import Command, interrupt

import flightlog
from flightlog.integrations.langgraph import FlightlogSaver, session_id_for
from flightlog.store.base import Store

from . import test_langgraph_readable as readable

_cli = readable._cli  # fixtures db and store: tests/integrations/conftest.py


def _cfg(thread: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread}}


def _run(db: Path, thread: str) -> dict[str, Any]:
    rows = [r for r in json.loads(_cli(db, "runs", "--json")) if r["run_id"] == session_id_for(thread)]
    assert len(rows) == 1, rows
    return dict(rows[0])


def _events(store: Store, thread: str) -> list[dict[str, Any]]:
    return [json.loads(r.event_bytes) for r in store.read_events(session_id_for(thread))]


def _replayed(db: Path, thread: str) -> list[tuple[str, str]]:
    """``flightlog replay --json``: each message's role and text (tool results' output)."""
    out = []
    for m in json.loads(_cli(db, "replay", thread, "--json"))["messages"]:
        text = "".join(p.get("text") or p.get("output") or "" for p in m["content"])
        out.append((m["role"], text))
    return out


def _state(graph: Any, thread: str) -> list[tuple[str, str]]:
    """The graph's own messages, as replay shows them (system messages are the system prompt)."""
    roles = {"human": "user", "ai": "assistant", "tool": "tool"}
    msgs: list[BaseMessage] = graph.get_state(_cfg(thread)).values["messages"]
    return [(roles[m.type], str(m.content)) for m in msgs if not isinstance(m, SystemMessage)]


def _echo(state: MessagesState) -> dict[str, Any]:
    last = state["messages"][-1]
    return {"messages": [AIMessage(content=f"echo: {last.content}")]}


def _chat(saver: FlightlogSaver) -> Any:
    return _line(("model", _echo)).compile(checkpointer=saver)


def _line(*nodes: tuple[str, Any]) -> Any:
    """A ``MessagesState`` graph builder running ``nodes`` (name, action) one after the other."""
    g = StateGraph(MessagesState)
    previous = START
    for name, action in nodes:
        g.add_node(name, action)
        g.add_edge(previous, name)
        previous = name
    g.add_edge(previous, END)
    return g


# ─── 1. system prompts ────────────────────────────────────────────────────────────────────────


def test_the_system_prompt_is_the_runs_and_replay_shows_it(db: Path, store: Store) -> None:
    graph = _chat(FlightlogSaver(store))
    cfg = _cfg("sys")
    graph.invoke(
        {"messages": [SystemMessage("You are terse."), HumanMessage("hi"), HumanMessage("and?")]}, cfg
    )
    graph.invoke({"messages": [HumanMessage("again")]}, cfg)

    started = [e for e in _events(store, "sys") if e["kind"] == "run_started"]
    # the thread's leading system message is every run's system prompt (the model sees it each time)
    assert [(e["goal"], e["system_prompt"]) for e in started] == [
        ("hi", "You are terse."),
        ("again", "You are terse."),
    ]
    text = _cli(db, "replay", "sys")
    assert text.index("[system prompt]") < text.index("You are terse.") < text.index("[0] user")
    # one replay message per human/AI message, in the thread's order (two human messages in one input too)
    assert _replayed(db, "sys") == _state(graph, "sys")
    assert _replayed(db, "sys")[:3] == [("user", "hi"), ("user", "and?"), ("assistant", "echo: and?")]
    # as of the first run's end, the same prompt; a thread without one prints none
    graph.invoke({"messages": [HumanMessage("plain")]}, _cfg("plain"))
    assert "[system prompt]" not in _cli(db, "replay", "plain")


# ─── 2. steps that rewrite earlier messages ──────────────────────────────────────────────────


def _trimming(saver: FlightlogSaver) -> Any:
    """A chat whose ``trim`` node keeps the last two messages when told ``trim``, and forgets everything
    but a fresh system prompt and the request when told ``reset`` (REMOVE_ALL_MESSAGES)."""

    def trim(state: MessagesState) -> dict[str, Any]:
        msgs = state["messages"]
        last = str(msgs[-1].content)
        if last == "trim":
            return {"messages": [RemoveMessage(id=m.id or "") for m in msgs[:-2]]}
        if last == "reset":
            return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), HumanMessage("start over")]}
        return {}

    return _line(("trim", trim), ("model", _echo)).compile(checkpointer=saver)


def test_replay_follows_removed_and_replaced_messages(db: Path, store: Store) -> None:
    graph = _trimming(FlightlogSaver(store))
    cfg = _cfg("edit")
    for text in ("one", "two", "three"):
        graph.invoke({"messages": [HumanMessage(text)]}, cfg)
    assert len(_replayed(db, "edit")) == 6

    # a node removes all but the last two messages (RemoveMessage by id)
    graph.invoke({"messages": [HumanMessage("trim")]}, cfg)
    assert _replayed(db, "edit") == _state(graph, "edit")
    assert _replayed(db, "edit")[0] == ("assistant", "echo: three")
    assert "rolled back" in _cli(db, "show", "edit")

    # a same-id replacement in the middle (update_state), then the chat goes on
    msgs = graph.get_state(cfg).values["messages"]
    graph.update_state(cfg, {"messages": [HumanMessage("TRIM (edited)", id=msgs[1].id)]})
    assert _replayed(db, "edit") == _state(graph, "edit")
    assert ("user", "TRIM (edited)") in _replayed(db, "edit")
    graph.invoke({"messages": [HumanMessage("four")]}, cfg)
    assert _replayed(db, "edit") == _state(graph, "edit")

    # a removal through update_state, and everything removed by a node (REMOVE_ALL_MESSAGES)
    graph.update_state(cfg, {"messages": [RemoveMessage(id=msgs[0].id or "")]})
    assert _replayed(db, "edit") == _state(graph, "edit")
    graph.invoke({"messages": [HumanMessage("reset")]}, cfg)
    assert _state(graph, "edit") == [("user", "start over"), ("assistant", "echo: start over")]
    assert _replayed(db, "edit") == _state(graph, "edit")
    assert _run(db, "edit")["terminal"]["outcome"] == "completed"


def test_a_rewrite_in_the_input_itself(db: Path, store: Store) -> None:
    """The input removes an earlier message (the first step after the input is the rewrite)."""
    graph = _chat(FlightlogSaver(store))
    cfg = _cfg("in")
    graph.invoke({"messages": [HumanMessage("a")]}, cfg)
    graph.invoke({"messages": [HumanMessage("b")]}, cfg)
    first = graph.get_state(cfg).values["messages"][0]
    graph.invoke({"messages": [RemoveMessage(id=first.id or ""), HumanMessage("c")]}, cfg)
    assert _state(graph, "in")[0] == ("assistant", "echo: a")
    assert _replayed(db, "in") == _state(graph, "in")


def test_time_travel_after_the_run_ended_replays_the_threads_messages(db: Path, store: Store) -> None:
    graph = _chat(FlightlogSaver(store))
    cfg = _cfg("travel")
    graph.invoke({"messages": [HumanMessage("a")]}, cfg)
    graph.invoke({"messages": [HumanMessage("b")]}, cfg)
    earlier = next(s for s in graph.get_state_history(cfg) if s.next == ("model",))
    assert [m.content for m in earlier.values["messages"]] == ["a", "echo: a", "b"]
    graph.invoke(None, earlier.config)  # the run had ended: a new one continues from there
    assert _replayed(db, "travel") == _state(graph, "travel")
    assert _run(db, "travel")["terminal"]["outcome"] == "completed"
    # and a removal on an earlier checkpoint
    first = next(s for s in graph.get_state_history(cfg) if s.metadata and s.metadata.get("step") == 1)
    graph.update_state(first.config, {"messages": [RemoveMessage(id=first.values["messages"][0].id or "")]})
    assert _state(graph, "travel") == [("assistant", "echo: a")]
    assert _replayed(db, "travel") == _state(graph, "travel")


# ─── 3. static interrupts ─────────────────────────────────────────────────────────────────────


def _tooling(saver: FlightlogSaver, **compile_args: Any) -> Any:
    def model(state: MessagesState) -> dict[str, Any]:
        if isinstance(state["messages"][-1], ToolMessage):
            return {"messages": [AIMessage(content="done: " + str(state["messages"][-1].content))]}
        call = {"name": "lookup", "args": {"q": "x"}, "id": "call1"}
        return {"messages": [AIMessage(content="", tool_calls=[call])]}

    def tools(state: MessagesState) -> dict[str, Any]:
        return {"messages": [ToolMessage(content="42", tool_call_id="call1")]}

    def route(state: MessagesState) -> str:
        return "tools" if getattr(state["messages"][-1], "tool_calls", None) else END

    g = StateGraph(MessagesState)
    g.add_node("model", model)
    g.add_node("tools", tools)
    g.add_edge(START, "model")
    g.add_conditional_edges("model", route, ["tools", END])
    g.add_edge("tools", "model")
    return g.compile(checkpointer=saver, **compile_args).with_config(callbacks=[saver.lifecycle])


@pytest.mark.parametrize("where", ["interrupt_before", "interrupt_after"])
def test_a_static_interrupt_waits_for_input_and_resumes(db: Path, store: Store, where: str) -> None:
    saver = FlightlogSaver(store)
    node = "tools" if where == "interrupt_before" else "model"
    graph = _tooling(saver, **{where: [node]})
    cfg = _cfg("static")
    graph.invoke({"messages": [HumanMessage("look it up")]}, cfg)
    assert graph.get_state(cfg).next == ("tools",)

    run = _run(db, "static")
    assert (run["state"], run.get("terminal")) == ("waiting_input", None)
    assert "suspended (waiting for input" in _cli(db, "show", "static")
    suspended = [e for e in _events(store, "static") if e["kind"] == "suspended"]
    assert [e["reason"] for e in suspended] == [f"waiting for input ({where}, next: tools)"]
    # no question was asked: nothing to approve, no fabricated gate or decision
    kinds = [e["kind"] for e in _events(store, "static")]
    assert "tool_gated" not in kinds and "permission_requested" not in kinds
    assert _cli(db, "pending", "--json").strip() == "[]"

    # editing the state while it waits (the model's call, replaced by id) does not resume it
    last = graph.get_state(cfg).values["messages"][-1]
    edited = AIMessage(content="checking", tool_calls=last.tool_calls, id=last.id)
    graph.update_state(cfg, {"messages": [edited]})
    assert graph.get_state(cfg).next == ("tools",)
    assert _run(db, "static")["state"] == "waiting_input"
    assert _replayed(db, "static") == _state(graph, "static")

    graph.invoke(None, cfg)  # resume
    events = _events(store, "static")
    resumed = [e for e in events if e["kind"] == "resumed"]
    assert resumed == [{"kind": "resumed", "turn": resumed[0]["turn"]}]
    # (interrupt_after: the model's second answer ends the graph, so that stop leaves nothing to resume)
    assert graph.get_state(cfg).next == ()
    run = _run(db, "static")
    assert (run["state"], run["terminal"]["outcome"]) == ("terminal", "completed")
    assert "resumed, 0 approved, 0 denied" in _cli(db, "show", "static")
    assert _replayed(db, "static") == _state(graph, "static")


def test_a_static_interrupt_of_an_async_graph_and_of_a_copy(db: Path, store: Store) -> None:
    """``ainvoke`` reports the stop to the handler too; a copy of the stopped thread waits, and resumes."""
    saver = FlightlogSaver(store)
    graph = _tooling(saver, interrupt_before=["tools"])
    asyncio.run(graph.ainvoke({"messages": [HumanMessage("look it up")]}, _cfg("async")))
    assert _run(db, "async")["state"] == "waiting_input"
    saver.copy_thread("async", "copy")
    assert _run(db, "copy")["state"] == "waiting_input"
    suspended = [e for e in _events(store, "copy") if e["kind"] == "suspended"]
    assert [e["reason"] for e in suspended] == ["waiting for input (static interrupt, next: tools)"]
    asyncio.run(graph.ainvoke(None, _cfg("copy")))
    assert _run(db, "copy")["terminal"]["outcome"] == "completed"
    assert _replayed(db, "copy") == _state(graph, "copy")
    assert _run(db, "async")["state"] == "waiting_input"


def test_a_dynamic_interrupt_is_not_recorded_twice_by_the_lifecycle_handler(db: Path, store: Store) -> None:
    saver = FlightlogSaver(store)

    def ask(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(content=str(interrupt("go?")))]}

    graph = _line(("ask", ask)).compile(checkpointer=saver).with_config(callbacks=[saver.lifecycle])
    graph.invoke({"messages": [HumanMessage("q")]}, _cfg("dyn"))
    graph.invoke(Command(resume="yes"), _cfg("dyn"))
    kinds = [e["kind"] for e in _events(store, "dyn")]
    # LangGraph saves the answer's resume writes from its background thread, in either order with the
    # checkpoint that ends the run (``ask`` is the last node; with the saver's calls delayed at random,
    # after it in 6 of 20 runs): answered before it the run is resumed once, after it not at all.
    (answered,) = [i for i, kind in enumerate(kinds) if kind == "permission_resolved"]
    resumes = 1 if answered < kinds.index("run_terminal") else 0
    assert kinds.count("suspended") == 1 and kinds.count("resumed") == resumes
    assert _run(db, "dyn")["terminal"]["outcome"] == "completed"


# ─── 4. copied threads ────────────────────────────────────────────────────────────────────────


def test_a_copied_thread_reads_as_its_source(db: Path, store: Store) -> None:
    saver = FlightlogSaver(store)
    graph = _chat(saver)
    graph.invoke({"messages": [SystemMessage("Be kind."), HumanMessage("hello")]}, _cfg("src"))
    graph.invoke({"messages": [HumanMessage("more")]}, _cfg("src"))
    saver.copy_thread("src", "dst")

    run = _run(db, "dst")
    assert (run["source"], run["state"], run["terminal"]["outcome"]) == ("workflow", "terminal", "completed")
    assert _replayed(db, "dst") == _state(graph, "src") == _state(graph, "dst")
    started = next(e for e in _events(store, "dst") if e["kind"] == "run_started")
    assert (started["goal"], started["system_prompt"]) == ("hello", "Be kind.")
    assert "langgraph thread copied from src: " in _cli(db, "show", "dst")  # the copy record, narrated
    # the copy goes on by itself
    graph.invoke({"messages": [HumanMessage("only in the copy")]}, _cfg("dst"))
    assert _replayed(db, "dst") == _state(graph, "dst")
    assert len(_replayed(db, "dst")) == len(_replayed(db, "src")) + 2


def test_a_copy_of_a_thread_waiting_at_an_interrupt_waits_too(db: Path, store: Store) -> None:
    saver = FlightlogSaver(store)

    def ask(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(content=f"answer: {interrupt('go?')}")]}

    graph = _line(("ask", ask)).compile(checkpointer=saver)
    graph.invoke({"messages": [HumanMessage("q")]}, _cfg("wait"))
    saver.copy_thread("wait", "fork")

    assert _run(db, "fork")["state"] == "waiting_input"
    pending = json.loads(_cli(db, "pending", "--json"))
    assert sorted((p["session_id"], p["tool"]) for p in pending) == [
        (session_id_for("fork"), "ask"),
        (session_id_for("wait"), "ask"),
    ]
    graph.invoke(Command(resume="yes"), {"configurable": {"thread_id": "fork", "user_id": "ann"}})
    run = _run(db, "fork")
    assert (run["state"], run["terminal"]["outcome"]) == ("terminal", "completed")
    assert "approved by ann" in _cli(db, "show", "fork")
    assert _replayed(db, "fork") == _state(graph, "fork")
    assert _run(db, "wait")["state"] == "waiting_input"  # the source still waits


# ─── 5. subgraphs ─────────────────────────────────────────────────────────────────────────────


def test_a_subgraph_is_a_child_run_of_the_thread(db: Path, store: Store) -> None:
    """A subgraph node (with a nested subgraph and an ``interrupt()`` inside) is a child run: its own
    session under the thread in ``runs``, its messages in ``replay``, its process table entries in ``show``."""
    saver = FlightlogSaver(store)

    def leaf(state: MessagesState) -> dict[str, Any]:
        usage = {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}
        return {"messages": [AIMessage(content="leaf answer", usage_metadata=usage)]}

    def check(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(content=f"checked: {interrupt('ok?')}")]}

    middle = _line(("inner", _line(("leaf", leaf)).compile()), ("check", check)).compile()
    graph = _line(("model", _echo), ("research", middle)).compile(checkpointer=saver)
    cfg = _cfg("sub")
    graph.invoke({"messages": [HumanMessage("dig")]}, cfg)
    # the interrupt inside the subgraph is the thread's (LangGraph reports it to the root)
    assert _run(db, "sub")["state"] == "waiting_input"
    graph.invoke(Command(resume="fine"), cfg)
    assert _state(graph, "sub")[-2:] == [("assistant", "leaf answer"), ("assistant", "checked: fine")]

    rows = {r["run_id"]: r for r in json.loads(_cli(db, "runs", "--json"))}
    thread = session_id_for("sub")
    (research,) = [r for r in rows.values() if r.get("parent") == thread]
    (leaf_run,) = [r for r in rows.values() if r.get("parent") == research["run_id"]]
    assert research["run_id"].startswith("langgraph-subgraph:sub|research:")
    for run in (rows[thread], research, leaf_run):
        assert (run["source"], run["state"], run["terminal"]["outcome"]) == (
            "workflow",
            "terminal",
            "completed",
        )
    assert (leaf_run["budget"]["tokens_used"], leaf_run["budget"]["steps_taken"]) == (5, 1)
    # the child's replay: what it was asked (the thread's last human message), then its own messages
    assert _replayed(db, leaf_run["run_id"]) == [("user", "dig"), ("assistant", "leaf answer")]
    assert _replayed(db, research["run_id"]) == [
        ("user", "dig"),
        ("assistant", "leaf answer"),
        ("assistant", "checked: fine"),
    ]
    shown = _cli(db, "show", "sub")
    assert "running" in shown and "exited (completed)" in shown
    # not a thread: LangGraph's list of every thread holds the thread's checkpoints only
    assert {t.config["configurable"]["thread_id"] for t in saver.list(None)} == {"sub"}
    assert _cli(db, "audit", research["run_id"]).startswith("ok")


def test_a_subgraph_run_goes_on_in_another_saver(db: Path, store: Store) -> None:
    """A subgraph interrupted under one saver and resumed under another (its own store handle, as another
    process): the second re-attaches to the child run's session and ends it; both chains verify."""

    def check(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(content=f"checked: {interrupt('ok?')}")]}

    def build(saver: FlightlogSaver) -> Any:
        middle = _line(("model", _echo), ("check", check)).compile()
        return _line(("research", middle)).compile(checkpointer=saver)

    build(FlightlogSaver(store)).invoke({"messages": [HumanMessage("dig")]}, _cfg("two"))
    other = flightlog.open_store(str(db))
    try:
        build(FlightlogSaver(other)).invoke(Command(resume="yes"), _cfg("two"))
    finally:
        other.close()
    rows = [r for r in json.loads(_cli(db, "runs", "--json")) if r.get("parent") == session_id_for("two")]
    (child,) = rows
    assert (child["state"], child["terminal"]["outcome"]) == ("terminal", "completed")
    assert _replayed(db, child["run_id"]) == [
        ("user", "dig"),
        ("assistant", "echo: dig"),
        ("assistant", "checked: yes"),
    ]
    for sid in (session_id_for("two"), child["run_id"]):
        assert _cli(db, "verify", sid).startswith("ok"), sid
