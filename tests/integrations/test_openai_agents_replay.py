"""An Agents SDK run with a ``needs_approval`` tool, traced by ``FlightlogTracingProcessor`` (SDK response
spans, as its Responses model traces) and approved through another session object, as a user reads it.

Found trying issue 16 as a user (session 6): the traced tool events named every call by the SDK's span id
instead of the model's ``call_1``, recorded the function span of the call stopped for approval as a
completed call with output ``null`` (``show`` printed "1 tool result(s): null", the dashboard's tool calls
table listed one call three times, ``flightlog export --otlp`` sent an ``execute_tool`` span for a call
that never ran), and dropped every span of a run resumed in the same process (the SDK continues the
interrupted run's trace, a ``ReattachedTrace``, without a second ``on_trace_start``). Also: an approval
was not signed when made (``audit`` showed it in the unanchored tail) and ``flightlog ls`` showed the
session ``running`` after the run ended. Each is checked here on real ``Runner`` runs, resumed with a new
processor and session object and with the same ones.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, RunState, function_tool
from agents.tracing import set_trace_processors
from fastapi.testclient import TestClient
from typer.testing import CliRunner

import flightlog
from flightlog.cli import app
from flightlog.events import LlmCompleted, ToolCompleted, ToolRequested
from flightlog.integrations.openai_agents import FlightlogSession, session_id_for
from flightlog.integrations.openai_agents_tracing import FlightlogTracingProcessor
from flightlog.sessions import iter_events
from flightlog.store import SqliteStore
from flightlog.web.app import create_app
from flightlog.web.security import Auth
from flightlog.web.views import session_page

from .test_openai_agents_tracing import ChatLikeModel, _call, _text, only_our_processors  # noqa: F401
from .test_otel import Receiver

TOKEN = "test-token-0123456789abcdef"
BASE = "http://127.0.0.1:8000"


@function_tool(needs_approval=True)
def refund(order: int) -> str:
    """Refund an order."""
    return f"refunded order {order}"


def _approved_run(db: Path, *, same_objects: bool = False) -> None:
    """Run to the approval, approve as alice, resume and finish, in this process: through a new session
    object and processor (as another process would, from the saved state), or ``same_objects``."""
    model = ChatLikeModel(
        [[_call("call_1", "refund", '{"order":42}')], [_text("refunded order 42")]], responses=True
    )
    agent = Agent(name="support", model=model, tools=[refund])
    config = RunConfig(group_id="s")
    kept = FlightlogSession("s", db)
    set_trace_processors([FlightlogTracingProcessor(kept)])

    async def start() -> str:
        result = await Runner.run(agent, "Refund order 42", session=kept, run_config=config)
        await kept.record_result(result)
        return str(result.to_state().to_string())

    async def approve_and_finish(saved: str) -> Any:
        session = kept if same_objects else FlightlogSession("s", db)
        if not same_objects:
            kept.close()
            set_trace_processors([FlightlogTracingProcessor(session)])
        state = await RunState.from_string(agent, saved)
        for item in state.get_interruptions():
            await session.approve(state, item, by="alice")
        await session.resume(state)
        result = await Runner.run(agent, state, session=session, run_config=config)
        await session.record_result(result)
        session.close()
        return result.final_output

    assert asyncio.run(approve_and_finish(asyncio.run(start()))) == "refunded order 42"


@pytest.mark.usefixtures("only_our_processors")
def test_an_approved_traced_run_replays_as_its_conversation(tmp_path: Path) -> None:
    db = tmp_path / "agents.db"
    _approved_run(db)
    replay = CliRunner().invoke(app, ["--db", str(db), "replay", "s", "--json"])
    assert replay.exit_code == 0, replay.output
    messages = json.loads(replay.output)["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert [c["id"] for c in messages[1]["tool_calls"]] == ["call_1"]
    assert [(p["call_id"], p["output"]) for p in messages[2]["content"]] == [("call_1", "refunded order 42")]


@pytest.mark.parametrize("same_objects", [False, True], ids=["new-objects", "same-objects"])
@pytest.mark.usefixtures("only_our_processors")
def test_the_traced_tool_events_name_the_call_and_only_what_ran(tmp_path: Path, same_objects: bool) -> None:
    db = tmp_path / "agents.db"
    _approved_run(db, same_objects=same_objects)
    sid = session_id_for("s")
    with flightlog.open_store(str(db)) as store:
        events = [e for _row, e in iter_events(store, sid)]
        table = session_page(store, sid).tool_calls  # the dashboard's tool calls table
    results = [(r.call_id, r.output) for e in events if isinstance(e, ToolCompleted) for r in e.results]
    assert results == [("call_1", "refunded order 42")]  # once, under the model's call id
    requested = [c.id for e in events if isinstance(e, ToolRequested) for c in e.calls]
    assert requested == ["call_1"]  # gated by record_result; the run after the approval adds no second
    answers = [e for e in events if isinstance(e, LlmCompleted)]
    assert [a.message.text_content() for a in answers] == ["", "refunded order 42"]  # the resumed part too
    kinds = [e.kind for e in events]
    assert kinds.index("tool_gated") < kinds.index("resumed") < kinds.index("tool_completed")
    assert [(r["call_id"], r["name"], r["result"]) for r in table] == [
        ("call_1", "refund", "refunded order 42")
    ]

    with TestClient(
        create_app(lambda ro: SqliteStore(db, read_only=ro), token=TOKEN), base_url=BASE
    ) as client:
        client.cookies.set("flightlog_ui_8000", Auth(TOKEN).cookie_value)
        html = client.get("/session", params={"id": sid}).text
    tools = html[html.index('<section id="tools">') : html.index('<section id="thinking">')]
    assert tools.count("<code>call_1</code>") == 1 and "span_" not in tools and "no result" not in tools

    shown = CliRunner().invoke(app, ["--db", str(db), "show", "s"])
    assert shown.exit_code == 0, shown.output
    assert "null" not in shown.output and "span_" not in shown.output
    assert "refunded order 42" in shown.output

    receiver = Receiver()
    try:
        exported = CliRunner().invoke(app, ["--db", str(db), "export", "s", "--otlp", receiver.url])
        assert exported.exit_code == 0, exported.output
        tools = receiver.named("execute_tool")
    finally:
        receiver.close()
    assert [t["attributes"]["gen_ai.tool.call.id"] for t in tools] == ["call_1"]


@pytest.mark.usefixtures("only_our_processors")
def test_an_approval_is_signed_when_made_and_a_finished_run_is_completed(tmp_path: Path) -> None:
    """``approve`` anchors its decision by a signed checkpoint at once, as ``flightlog approve`` does;
    ``record_result`` of the finished run sets the status ``flightlog ls`` shows, and signs it too."""
    db = tmp_path / "agents.db"
    model = ChatLikeModel([[_call("call_1", "refund", '{"order":42}')], [_text("done")]], responses=True)
    agent = Agent(name="support", model=model, tools=[refund])

    def audit() -> Any:
        out = CliRunner().invoke(app, ["--db", str(db), "audit", session_id_for("s"), "--json"])
        assert out.exit_code == 0, out.output
        (report,) = json.loads(out.output)
        return report

    def status() -> str:
        out = CliRunner().invoke(app, ["--db", str(db), "ls", "--json"])
        assert out.exit_code == 0, out.output
        (row,) = [r for r in json.loads(out.output) if r["session_id"] == session_id_for("s")]
        return str(row["status"])

    session = FlightlogSession("s", db)
    set_trace_processors([FlightlogTracingProcessor(session)])
    try:
        result = asyncio.run(
            Runner.run(agent, "Refund order 42", session=session, run_config=RunConfig(group_id="s"))
        )
        asyncio.run(session.record_result(result))
        assert status() == "suspended"
        state = result.to_state()
        (item,) = state.get_interruptions()
        asyncio.run(session.approve(state, item, by="alice"))
        report = audit()
        assert report["ok"] and report["unanchored"] is None, report  # before: the decision was the tail
        asyncio.run(session.resume(state))
        result = asyncio.run(Runner.run(agent, state, session=session, run_config=RunConfig(group_id="s")))
        asyncio.run(session.record_result(result))
    finally:
        session.close()
    assert result.final_output == "done"
    assert status() == "completed"  # before: running
    report = audit()
    assert report["ok"] and report["unanchored"] is None, report
