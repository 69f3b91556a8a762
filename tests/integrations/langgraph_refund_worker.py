"""The second process of the ToolNode interrupt tests: answers a thread's pending ``refund`` interrupt.

``python langgraph_refund_worker.py DB THREAD SHAPE ANSWER APPROVER [INTERRUPT_ID]``: opens DB with a new
FlightlogSaver (the thread folded afresh from the ledger), runs the ``refund`` graph of ``test_user_pass``
(``REFUND_GRAPHS[SHAPE]``) on THREAD with ``Command(resume=ANSWER)``, or ``Command(resume={INTERRUPT_ID: ANSWER})``
when an interrupt id is given, under ``config["metadata"]["approver"] = APPROVER``, and prints the last
message's text as JSON. A failure prints its traceback on stderr and exits 1.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from langgraph.types import Command
from test_user_pass import REFUND_GRAPHS  # this directory is sys.path[0]

import flightlog
from flightlog.integrations.langgraph import FlightlogSaver


def main(db: str, thread: str, shape: str, answer: str, approver: str, *interrupt_id: str) -> None:
    with flightlog.open_store(db) as store:
        graph = REFUND_GRAPHS[shape](FlightlogSaver(store, notary=None))
        resume: Any = {interrupt_id[0]: answer} if interrupt_id else answer
        config: Any = {"configurable": {"thread_id": thread}, "metadata": {"approver": approver}}
        out = graph.invoke(Command(resume=resume), config)
        print(json.dumps(out["messages"][-1].content))


if __name__ == "__main__":
    main(*sys.argv[1:])
