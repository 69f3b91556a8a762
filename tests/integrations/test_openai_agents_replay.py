"""An Agents SDK run with a ``needs_approval`` tool, traced and approved in another session object, as
``flightlog replay`` reads it: the conversation a model would be sent (issue 16's "Done when").

Found trying issue 16 as a user (session 6), with the SDK's Responses-model tracing (a response span per
model call) and ``FlightlogTracingProcessor``: the replay starts with the assistant's tool call, then a tool
result ``null`` for the call that had not run (its function span ended when the run stopped for approval),
then the user's message (``record_result`` writes ``run_started`` after the traced events), and the tool
results name the SDK's span ids (``span_...``) instead of the model's ``call_1``, so no result pairs with
its call. Resumed in the same process (this test), the resumed run's spans are all dropped: the SDK continues
the interrupted run's trace (same trace id, no second ``on_trace_start``) and the processor forgot that id in
``on_trace_end``, so the tool's result and the final answer are missing (a resume in a new process starts a
new trace and is recorded). Marked ``xfail(strict=True)`` until ``openai_agents_tracing.py`` (``_tool``:
``call_id=span.span_id``, a function span without output recorded as a completed call; ``on_trace_end``)
and the ordering against ``record_result`` (``openai_agents.py``) are fixed by the helpers changing those
files; then the marker must go.
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

from flightlog.cli import app
from flightlog.integrations.openai_agents import FlightlogSession
from flightlog.integrations.openai_agents_tracing import FlightlogTracingProcessor

from .test_openai_agents_tracing import ChatLikeModel, _call, _text, only_our_processors  # noqa: F401


@function_tool(needs_approval=True)
def refund(order: int) -> str:
    """Refund an order."""
    return f"refunded order {order}"


@pytest.mark.xfail(
    strict=True,
    reason="openai_agents_tracing.py records a function span's span_id as the call id and a call stopped for "
    "approval as a completed call with output null, and drops every span of a run resumed in the same process; "
    "record_result writes run_started after the traced events",
)
@pytest.mark.usefixtures("only_our_processors")
def test_an_approved_traced_run_replays_as_its_conversation(tmp_path: Path) -> None:
    db = tmp_path / "agents.db"
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
    replay = CliRunner().invoke(app, ["--db", str(db), "replay", "s", "--json"])
    assert replay.exit_code == 0, replay.output
    messages = json.loads(replay.output)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert [c["id"] for c in messages[1]["tool_calls"]] == ["call_1"]
    assert [(p["call_id"], p["output"]) for p in messages[2]["content"]] == [("call_1", "refunded order 42")]
