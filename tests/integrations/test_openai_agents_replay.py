"""An Agents SDK run with a ``needs_approval`` tool, traced by ``FlightlogTracingProcessor`` (SDK response
spans, as its Responses model traces) and approved through another session object, as a user reads it.

Found trying issue 16 as a user (session 6). ``replay`` reads the conversation (the items fold, main since
455d11a). The traced tool events do not: the function span of the call stopped for approval is recorded as
``tool_requested`` + ``tool_completed`` with output ``null`` (the call never ran), and every traced call and
result is named by the SDK's span id (``span_...``) instead of the model's ``call_1``. So ``show`` prints
"1 tool result(s): null", the dashboard's tool calls table lists one call three times (two under span ids,
one "null" result), and ``flightlog export --otlp`` sends an ``execute_tool`` span for the call that never
ran. Resumed in the same process, as here, the resumed run's spans are not recorded at all: the SDK
continues the interrupted run's trace (same trace id, no second ``on_trace_start``) and the processor forgot
that id in ``on_trace_end``. Marked ``xfail(strict=True)`` until ``src/flightlog/integrations/openai_agents_tracing.py``
(``_tool``: ``ToolCall(id=span.span_id)``, a function span without output recorded as completed), which
other helpers are changing, is fixed; then the marker must go.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, RunState, function_tool
from agents.tracing import set_trace_processors
from typer.testing import CliRunner

import flightlog
from flightlog.cli import app
from flightlog.events import ToolCompleted, ToolRequested
from flightlog.integrations.openai_agents import FlightlogSession, session_id_for
from flightlog.integrations.openai_agents_tracing import FlightlogTracingProcessor
from flightlog.sessions import iter_events

from .test_openai_agents_tracing import ChatLikeModel, _call, _text, only_our_processors  # noqa: F401


@function_tool(needs_approval=True)
def refund(order: int) -> str:
    """Refund an order."""
    return f"refunded order {order}"


def _approved_run(db: Path) -> None:
    """Run to the approval, approve as alice through a new session object, resume and finish."""
    model = ChatLikeModel(
        [[_call("call_1", "refund", '{"order":42}')], [_text("refunded order 42")]], responses=True
    )
    agent = Agent(name="support", model=model, tools=[refund])
    config = RunConfig(group_id="s")

    async def start() -> str:
        session = FlightlogSession("s", db)
        set_trace_processors([FlightlogTracingProcessor(session)])
        result = await Runner.run(agent, "Refund order 42", session=session, run_config=config)
        await session.record_result(result)
        session.close()
        return str(result.to_state().to_string())

    async def approve_and_finish(saved: str) -> Any:
        session = FlightlogSession("s", db)  # another process would do the same, from the saved state
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
    messages = json.loads(replay.output)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert [c["id"] for c in messages[1]["tool_calls"]] == ["call_1"]
    assert [(p["call_id"], p["output"]) for p in messages[2]["content"]] == [("call_1", "refunded order 42")]


@pytest.mark.xfail(
    strict=True,
    reason="openai_agents_tracing.py (_tool) names traced calls and results by the SDK span id, records the "
    "function span of a call stopped for approval as a completed call with output null, and drops the spans "
    "of a run resumed in the same process (on_trace_end forgets the trace the SDK continues)",
)
@pytest.mark.usefixtures("only_our_processors")
def test_the_traced_tool_events_name_the_call_and_only_what_ran(tmp_path: Path) -> None:
    db = tmp_path / "agents.db"
    _approved_run(db)
    with flightlog.open_store(str(db)) as store:
        events = [e for _row, e in iter_events(store, session_id_for("s"))]
    results = [(r.call_id, r.output) for e in events if isinstance(e, ToolCompleted) for r in e.results]
    assert results == [("call_1", "refunded order 42")]  # once, under the model's call id
    requested = {c.id for e in events if isinstance(e, ToolRequested) for c in e.calls}
    assert requested == {"call_1"}
