"""Who answered a LangGraph interrupt, on the dashboard's session page (its "Decisions" section).

Found trying issue 16 as a user (session 6): a thread's interrupt answered with ``Command(resume="yes")`` by
``approver`` bob read ``approved (responder: bob)`` in ``flightlog show``, but the session page said "No one
has approved, denied or aborted anything in this run": the page's decisions
(:func:`flightlog.web.actions.decision_rows`) are the ``approval_decision`` records the kernel, ``flightlog
approve``, the dashboard and the Agents SDK session write beside ``permission_resolved``, and the LangGraph
saver wrote none. It now records the decision as they do (``permission_resolved(responder="user")`` and the
``approval_decision`` naming who answered, in the same transaction).
"""

from __future__ import annotations

import json
import operator
import threading
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from fastapi.testclient import TestClient
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from typer.testing import CliRunner

import flightlog
from flightlog.cli import app
from flightlog.events import Custom, OperationCancelled, Resumed, RunStarted, RunTerminal
from flightlog.integrations.langgraph import FlightlogSaver, session_id_for
from flightlog.recorder import verify_session
from flightlog.sessions import iter_events
from flightlog.store import SqliteStore
from flightlog.web.actions import decision_rows
from flightlog.web.app import create_app
from flightlog.web.security import Auth

from .test_langgraph import _build, _cfg
from .test_langgraph_readable import CFG, SID, _graph

BASE = "http://127.0.0.1:8000"
TOKEN = "test-token-0123456789abcdef"


def _answer(db: Path, resume: str, config: dict[str, object]) -> list[dict[str, object]]:
    """Ask the graph, answer its interrupt with ``resume`` under ``config``; the session's decision rows."""
    with flightlog.open_store(str(db)) as store:
        graph = _graph(FlightlogSaver(store, notary=None))
        graph.invoke({"messages": [HumanMessage("add 1 and 2")]}, CFG)
        graph.invoke(Command(resume=resume), config)
        return decision_rows(store, SID)


def test_the_dashboard_names_who_answered_an_interrupt(tmp_path: Path) -> None:
    db = tmp_path / "lg.db"
    rows = _answer(db, "yes", {**CFG, "metadata": {"approver": "bob"}})
    assert [(row["kind"], row["who"]) for row in rows] == [("approve", "bob")]
    with TestClient(
        create_app(lambda read_only: SqliteStore(db, read_only=read_only), token=TOKEN), base_url=BASE
    ) as client:
        client.cookies.set("flightlog_ui_8000", Auth(TOKEN).cookie_value)
        page = client.get(f"/session?id={SID}").text
    assert "No one has approved" not in page
    assert 'class="decision decision-approve"' in page and '<td class="who">bob</td>' in page


def test_a_denial_names_who_denied(tmp_path: Path) -> None:
    rows = _answer(tmp_path / "lg.db", "no", {"configurable": {**CFG["configurable"], "user_id": "dan"}})
    assert [(row["kind"], row["who"], row["reason"]) for row in rows] == [("deny", "dan", "denied by dan")]


def test_a_name_the_operator_rule_refuses_is_passed_over(tmp_path: Path) -> None:
    # a control character in the first key found: not recorded; the next key's name is
    config = {**CFG, "metadata": {"responder": "bo\x1b[31mb", "approver": "carol"}}
    rows = _answer(tmp_path / "lg.db", "yes", config)
    assert [(row["kind"], row["who"]) for row in rows] == [("approve", "carol")]
    # none valid: the default operator name, as `flightlog approve` without --as
    rows = _answer(tmp_path / "lg2.db", "yes", {**CFG, "metadata": {"approver": "x" * 81}})
    assert [(row["kind"], row["who"]) for row in rows] == [("approve", "user")]


class _Fan(TypedDict):
    out: Annotated[list[str], operator.add]


def _fan_out(saver: FlightlogSaver) -> Any:
    """Two nodes run in one step, each asking a question: two interrupts pending at once, which LangGraph
    answers only by id (``Command(resume={interrupt_id: value, ...})``)."""

    def refund(state: _Fan) -> dict[str, Any]:
        return {"out": [f"refund: {interrupt('refund order 42?')}"]}

    def email(state: _Fan) -> dict[str, Any]:
        return {"out": [f"email: {interrupt('email the customer?')}"]}

    g = StateGraph(_Fan)
    g.add_node("refund", refund)
    g.add_node("email", email)
    g.add_edge(START, "refund")
    g.add_edge(START, "email")
    g.add_edge("refund", END)
    g.add_edge("email", END)
    return g.compile(checkpointer=saver)


def _pending(db: Path) -> list[tuple[str, str | None, str | None]]:
    result = CliRunner().invoke(app, ["--db", str(db), "pending", "--json"])
    assert result.exit_code == 0, result.output
    return sorted((row["tool"], row["decision"], row["decided_by"]) for row in json.loads(result.output))


class _LastAnswer(FlightlogSaver):
    """Saves the ``email`` task's answer (its writes with ``__resume__``) on a chosen side of the checkpoint
    that ends the run. LangGraph saves both from its background thread, in either order: with the saver's
    calls delayed at random, the answer came after that checkpoint in 7 of 30 runs, and the test, which
    expected the run's ``resumed``, failed. ``late``: the answer is held, for the test to make after
    ``invoke`` returns; else the root checkpoint's ``put`` waits (60 s at most) until it is recorded."""

    def __init__(self, *args: Any, late: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.late = late
        self.held: list[tuple[Any, ...]] = []
        self.answered = threading.Event()

    def put_writes(self, config: RunnableConfig, writes: Any, task_id: str, task_path: str = "") -> None:
        answer = task_path.endswith("email") and any(channel == "__resume__" for channel, _ in writes)
        if answer and self.late:
            self.held.append((config, list(writes), task_id, task_path))
            return
        super().put_writes(config, writes, task_id, task_path)
        if answer:
            self.answered.set()

    def put(
        self, config: RunnableConfig, checkpoint: Any, metadata: Any, new_versions: Any
    ) -> RunnableConfig:
        if not self.late and not config["configurable"].get("checkpoint_ns"):
            assert self.answered.wait(60), "the email task's answer never reached the saver"
        return super().put(config, checkpoint, metadata, new_versions)


@pytest.mark.parametrize("late", [False, True], ids=["answer-first", "answer-after-the-end"])
def test_interrupts_answered_by_id_are_listed_as_decided_until_none_is_left(
    tmp_path: Path, late: bool
) -> None:
    """As a kernel run or an Agents SDK session: an answered interrupt is listed by ``pending`` as decided
    (by whom) while another still waits, and the run resumes once none is left open; each answer is
    recorded when LangGraph writes it (a resume map reaches the saver only as each task's resume write).
    The last answer recorded after the checkpoint that ended the run (``late``) is a decision, and the
    ended run is not resumed."""
    db = tmp_path / "lg.db"
    cfg: RunnableConfig = {"configurable": {"thread_id": "fan"}}
    sid = session_id_for("fan")
    with flightlog.open_store(str(db)) as store:
        graph = _fan_out(FlightlogSaver(store, notary=None))
        graph.invoke({"out": []}, cfg)
        asked = {t.name: t.interrupts[0].id for t in graph.get_state(cfg).tasks}
        assert _pending(db) == [("email", None, None), ("refund", None, None)]
        graph.invoke(Command(resume={asked["refund"]: "yes"}), {**cfg, "metadata": {"approver": "bob"}})
        assert _pending(db) == [("email", None, None), ("refund", "approved", "bob")]
        assert store.get_session(sid).status == "suspended"
        assert [(r["kind"], r["who"]) for r in decision_rows(store, sid)] == [("approve", "bob")]
    # the last answer, from a saver that folds the thread afresh (as another process would)
    with flightlog.open_store(str(db)) as store:
        saver = _LastAnswer(store, notary=None, late=late)
        graph = _fan_out(saver)
        done = graph.invoke(Command(resume={asked["email"]: "no"}), {**cfg, "metadata": {"approver": "dan"}})
        assert sorted(done["out"]) == ["email: no", "refund: yes"]
        if late:
            (answer,) = saver.held
            assert store.get_session(sid).status == "completed"
            FlightlogSaver.put_writes(saver, *answer)
        assert _pending(db) == []
        rows = decision_rows(store, sid)
        assert sorted((r["kind"], r["who"]) for r in rows) == [("approve", "bob"), ("deny", "dan")]
        events = [e for _row, e in iter_events(store, sid)]
        kinds = [type(e).__name__ for e in events]
        end = kinds.index("RunTerminal")
        if late:  # decided after the run's end: no resume
            assert "Resumed" not in kinds and kinds[end + 1 :].count("PermissionResolved") == 1
        else:
            (resumed,) = [e for e in events if isinstance(e, Resumed)]
            assert (resumed.approved, resumed.denied) == ([asked["refund"]], [asked["email"]])
            assert kinds.index("Resumed") < end and "PermissionResolved" not in kinds[end + 1 :]
        assert kinds.count("RunTerminal") == 1
        assert store.get_session(sid).status == "completed"
        assert verify_session(store, sid).ok


def test_runs_points_an_interrupt_where_pending_does(tmp_path: Path) -> None:
    """``runs`` sent a thread waiting at an ``interrupt()`` to ``flightlog pending``, which says the graph
    answers it, not ``approve``: the run's detail names the graph's call, as ``pending`` does."""
    db = tmp_path / "lg.db"
    cfg: RunnableConfig = {"configurable": {"thread_id": "ask"}}
    sid = session_id_for("ask")
    with flightlog.open_store(str(db)) as store:
        _fan_out(FlightlogSaver(store, notary=None)).invoke({"out": []}, cfg)
    where = "graph.invoke(Command(resume=...), config) in the LangGraph app"
    listed = CliRunner().invoke(app, ["--db", str(db), "runs"])
    assert listed.exit_code == 0, listed.output
    (line,) = [row for row in listed.output.splitlines() if row.startswith(sid)]
    assert "waiting for a decision on " in line and line.endswith(f"(answered where it runs: {where})"), line
    assert "flightlog pending" not in line
    pending = CliRunner().invoke(app, ["--db", str(db), "pending"])
    assert pending.exit_code == 0 and f"answered where it runs, not here: {where}" in pending.output


def _open_calls(db: Path) -> list[str]:
    result = CliRunner().invoke(app, ["--db", str(db), "pending", "--json"])
    assert result.exit_code == 0, result.output
    return [row["call_id"] for row in json.loads(result.output)]


def test_new_input_instead_of_an_answer_closes_the_pending_interrupt(tmp_path: Path) -> None:
    """A thread waiting at an ``interrupt()`` given new input (not ``Command(resume=...)``): LangGraph drops
    the interrupt and runs the input, so the saver records it closed, ``operation_cancelled`` (reason
    ``user``) naming it before the ``run_terminal("interrupted")``, and ``pending`` lists only the new run's
    interrupt; the answer then resumes that one alone, also from a saver that folds the thread afresh. It
    was listed as pending for good, beside the new one, and the saver kept it as an open gate."""
    db = tmp_path / "lg.db"
    cfg = _cfg("again")
    sid = session_id_for("again")
    with flightlog.open_store(str(db)) as store:
        graph = _build(FlightlogSaver(store))
        graph.invoke({"items": ["s"]}, cfg)
        (first,) = [i.id for t in graph.get_state(cfg).tasks for i in t.interrupts]
        assert _open_calls(db) == [first]
        graph.invoke({"items": ["new input"]}, cfg)  # new input while the interrupt waits
        (second,) = [i.id for t in graph.get_state(cfg).tasks for i in t.interrupts]
        assert second != first and _open_calls(db) == [second]
        kinds = [row.kind for row, _ in iter_events(store, sid)]
        at = kinds.index("operation_cancelled")
        assert kinds[at : at + 3] == ["operation_cancelled", "run_terminal", "run_started"]
        (cancelled,) = [e for _, e in iter_events(store, sid) if isinstance(e, OperationCancelled)]
        run_id = next(e.run_id for _, e in iter_events(store, sid) if isinstance(e, RunStarted))
        assert (cancelled.reason, cancelled.pending_call_ids, cancelled.operation_id) == (
            "user",
            [first],
            f"{run_id}:superseded",
        )
    with flightlog.open_store(str(db)) as store:  # as another process: the thread folded from the ledger
        graph = _build(FlightlogSaver(store))
        done = graph.invoke(Command(resume="yes"), {**cfg, "metadata": {"approver": "bob"}})
        assert done["answer"] == "yes"
        events = [e for _, e in iter_events(store, sid)]
        (decided,) = [e for e in events if isinstance(e, Custom) and e.custom_kind == "approval_decision"]
        assert (decided.payload["call_id"], decided.payload["approved"]) == (second, True)
        end = max(i for i, e in enumerate(events) if isinstance(e, RunTerminal))
        assert isinstance(events[end], RunTerminal) and events[end].reason == "completed"
        # LangGraph saves the answer (the resume writes) from its background thread, in either order with
        # the checkpoint that ends the run (review is the last node): with the saver's calls delayed at
        # random, it came after that checkpoint in 4 of 30 runs. Before it, the run resumes the new gate
        # alone; after it, the answer is recorded as a decision and the ended run is not resumed.
        resumed = [(i, e) for i, e in enumerate(events) if isinstance(e, Resumed)]
        if events.index(decided) < end:
            ((at, only),) = resumed
            assert (only.approved, only.denied) == ([second], []) and events.index(decided) < at < end
        else:
            assert resumed == []
        assert _open_calls(db) == [] and store.get_session(sid).status == "completed"
        assert [(r["kind"], r["who"]) for r in decision_rows(store, sid)] == [("approve", "bob")]
        assert verify_session(store, sid).ok


def test_a_finished_interrupt_thread_counts_the_steps_its_nodes_ran(tmp_path: Path) -> None:
    """A graph of plain nodes (``plan`` → ``act`` → ``review``, which interrupts), resumed with
    ``Command(resume=...)``, read ``run ended: completed after 0 turn(s)`` and ``steps 0``: the run's turns
    were its model calls, and it called none. A run without a model call now counts the LangGraph
    supersteps its nodes ran; one ended by new input counts those before it."""
    db = tmp_path / "steps.db"
    with SqliteStore(db) as store:
        graph = _build(FlightlogSaver(store, notary=None))
        graph.invoke({"items": ["start"]}, _cfg("steps"))
        graph.invoke(Command(resume="yes"), _cfg("steps"))
        graph.invoke({"items": ["again"]}, _cfg("steps"))  # a second run, stopped at review's interrupt
        graph.invoke({"items": ["instead"]}, _cfg("steps"))  # new input instead of an answer
        sid = session_id_for("steps")
        ends = [e for _, e in iter_events(store, sid) if isinstance(e, RunTerminal)]
        assert [(e.reason, e.turns_used) for e in ends] == [("completed", 3), ("interrupted", 2)]
    shown = CliRunner().invoke(app, ["--db", str(db), "show", sid])
    assert "run ended: completed after 3 steps, 0 tokens" in shown.output
    runs = CliRunner().invoke(app, ["--db", str(db), "runs", "--json"])
    (row,) = [r for r in json.loads(runs.output) if r["run_id"] == sid]
    assert row["budget"]["steps_taken"] == 5  # 3 + 2 closed; the open third run has run no node yet
