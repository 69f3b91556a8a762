"""A LangGraph writer process for the head-read attacks: the graph of ``test_langgraph_head`` (``setup`` then
``model``, messages and ``profile``) on thread ``t``, one FlightlogSaver for the whole run.

``python langgraph_head_writer.py DB``, then per stdin line: ``turns <n>`` runs n chat turns (human
``q<i>``, answer ``answer <len>``), printing ``turn <i>`` after each and ``done`` after the last; ``block``
sends the human message ``block``, whose ``model`` step prints ``blocked`` and then waits on stdin (the
parent kills the process there, mid-run, after the input checkpoint and the ``setup`` step were written and
before the run stops and is signed); ``block-note`` does the same with a ``note`` channel
(:class:`langgraph_note.Note`, a custom pydantic value) in the input; ``end`` (or EOF) exits 0.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph_note import Note  # this directory is the script's: the value names module langgraph_note

import flightlog
from flightlog.integrations.langgraph import FlightlogSaver


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    profile: str
    note: Note


def setup(state: State) -> dict[str, Any]:
    return {} if state.get("profile") else {"profile": "set once, on turn 1"}


def model(state: State) -> dict[str, Any]:
    if state["messages"][-1].content == "block":
        print("blocked", flush=True)
        sys.stdin.readline()  # killed here
    return {"messages": [AIMessage(content=f"answer {len(state['messages'])}")]}


def main(db: str) -> None:
    with flightlog.open_store(db) as store:
        g = StateGraph(State)
        g.add_node("setup", setup)
        g.add_node("model", model)
        g.add_edge(START, "setup")
        g.add_edge("setup", "model")
        graph: Any = g.compile(checkpointer=FlightlogSaver(store))  # signed with the user's log key
        config: Any = {"configurable": {"thread_id": "t"}}
        turn = 0
        for line in sys.stdin:
            command = line.split()
            if command == ["end"]:
                break
            if command in (["block"], ["block-note"]):
                # durability "sync": each step's checkpoint committed before the next step runs
                extra = {"note": Note(text="from the killed writer")} if command == ["block-note"] else {}
                graph.invoke({"messages": [HumanMessage("block")], **extra}, config, durability="sync")
                continue
            for _ in range(int(command[1])):
                graph.invoke({"messages": [HumanMessage(f"q{turn}")]}, config)
                print(f"turn {turn}", flush=True)
                turn += 1
            print("done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
