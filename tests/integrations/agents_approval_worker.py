"""One step of an Agents SDK run with a ``needs_approval`` tool, in a process of its own (no network).

``python agents_approval_worker.py DB STATE STEP [NAME]``:

* ``start``: runs the agent on "Refund order 42" with a ``FlightlogSession`` on DB; the model asks for
  ``refund``, the SDK interrupts; records the result (the gate) and writes the ``RunState`` to STATE.
* ``approve NAME`` / ``reject NAME``: loads STATE, decides the interrupted call through the session as NAME,
  resumes and runs to the end.
* ``resume``: loads STATE, applies the decisions the ledger holds (``flightlog approve``/``deny``), runs.

With ``FLIGHTLOG_TEST_TRACED=1`` in the environment, a ``FlightlogTracingProcessor`` records the run's
spans (the model traces each answer as a response span, as the SDK's Responses model does).

Every step prints ``final <output>`` or ``suspended <call ids>`` as its last line and exits 0; a failure
prints its traceback and exits 1.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from agents import Agent, RunConfig, Runner, RunState, function_tool
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.tracing import response_span, set_trace_processors
from agents.usage import Usage
from openai.types.responses import (
    Response,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from flightlog.integrations.openai_agents import FlightlogSession
from flightlog.integrations.openai_agents_tracing import FlightlogTracingProcessor

TRACED = os.environ.get("FLIGHTLOG_TEST_TRACED") == "1"


class RefundModel(Model):
    """Asks for ``refund(order=42)`` until a tool output is in its input, then says what came of it."""

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        outputs = [i for i in input if isinstance(i, dict) and i.get("type") == "function_call_output"]
        usage = Usage(requests=1, input_tokens=20, output_tokens=5, total_tokens=25)
        if not outputs:
            call = ResponseFunctionToolCall(
                id="fc_1",
                type="function_call",
                call_id="call_refund_42",
                name="refund",
                arguments='{"order":42}',
            )
            return _traced(ModelResponse(output=[call], usage=usage, response_id=None))
        text = ResponseOutputText(
            type="output_text", text=f"tool said: {outputs[-1]['output']}", annotations=[]
        )
        message = ResponseOutputMessage(
            id="msg_1", type="message", role="assistant", status="completed", content=[text]
        )
        return _traced(ModelResponse(output=[message], usage=usage, response_id=None))

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


def _traced(answer: ModelResponse) -> ModelResponse:
    """``answer``, traced as a response span when ``FLIGHTLOG_TEST_TRACED`` is set."""
    if TRACED:
        with response_span(
            response=Response.model_construct(id="resp_1", model="refund-model", output=answer.output)
        ):
            pass
    return answer


@function_tool(needs_approval=True)
def refund(order: int) -> str:
    """Refund an order."""
    return f"refunded order {order}"


AGENT: Agent[Any] = Agent(name="support", model=RefundModel(), tools=[refund])


async def main(db: str, state_file: str, step: str, name: str = "user") -> str:
    session = FlightlogSession("support-1", db)  # signed with the user's log key
    config = RunConfig(group_id="support-1", tracing_disabled=not TRACED)
    set_trace_processors([FlightlogTracingProcessor(session)] if TRACED else [])
    try:
        if step == "start":
            result = await Runner.run(AGENT, "Refund order 42", session=session, run_config=config)
        else:
            state = await RunState.from_string(AGENT, Path(state_file).read_text())
            for item in state.get_interruptions():
                if step == "approve":
                    await session.approve(state, item, by=name)
                elif step == "reject":
                    await session.reject(state, item, by=name, message=f"{name} says no")
            await session.resume(state)
            result = await Runner.run(AGENT, state, session=session, run_config=config)
        await session.record_result(result)
        if result.interruptions:
            Path(state_file).write_text(result.to_state().to_string())
            return "suspended " + ",".join(str(i.raw_item.call_id) for i in result.interruptions)  # type: ignore[union-attr]
        return f"final {result.final_output}"
    finally:
        session.close()


if __name__ == "__main__":
    print(asyncio.run(main(*sys.argv[1:5])), flush=True)
