"""A LangGraph writer process for the two-process tests: one FlightlogSaver, kept for the whole run.

``python langgraph_writer.py DB THREAD NAME``: for each line ``go <i>`` read from stdin, invokes a graph on
THREAD with input ``NAME<i>`` and prints ``done <i> <items>``; on ``end`` (or EOF) exits 0. A failure
prints its traceback on stderr and exits 1, so the parent sees it.
"""

from __future__ import annotations

import operator
import sys
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph

import flightlog
from flightlog.integrations.langgraph import FlightlogSaver


class State(TypedDict, total=False):
    items: Annotated[list[str], operator.add]


def main(db: str, thread: str, name: str) -> None:
    with flightlog.open_store(db) as store:
        g = StateGraph(State)
        g.add_node("step", lambda state: {"items": [f"{name}-step"]})
        g.add_edge(START, "step")
        g.add_edge("step", END)
        graph: Any = g.compile(checkpointer=FlightlogSaver(store))  # signed with the user's log key
        config: Any = {"configurable": {"thread_id": thread}}
        for line in sys.stdin:
            if line.strip() == "end":
                break
            i = line.split()[1]
            out = graph.invoke({"items": [f"{name}{i}"]}, config)
            print(f"done {i} {','.join(out['items'])}", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
