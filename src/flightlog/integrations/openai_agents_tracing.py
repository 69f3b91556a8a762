"""``FlightlogTracingProcessor``: an OpenAI Agents SDK run's generations, tool calls, handoffs and guardrails
recorded into a :class:`~flightlog.integrations.openai_agents.FlightlogSession`'s ledger as readable events.

Install with ``pip install 'flightlog[openai-agents]'``. Usage::

    from agents import RunConfig, Runner, add_trace_processor
    from flightlog.integrations.openai_agents import FlightlogSession
    from flightlog.integrations.openai_agents_tracing import FlightlogTracingProcessor

    session = FlightlogSession("user-42", "agent.db")
    add_trace_processor(FlightlogTracingProcessor(session))
    await Runner.run(agent, "Hello", session=session, run_config=RunConfig(group_id="user-42"))

The processor records the spans of the traces whose ``group_id`` is the session's id (``RunConfig(group_id=
...)``; ``all_traces=True`` records every trace), each when the span ends, appended through the session's own
recorder (so its items and these events share one chain):

* a generation span (chat-completions models) or a response span (Responses models): ``llm_completed`` (the
  next turn after the session's latest, :attr:`FlightlogSession.turn`, so turns go on across processes:
  the text and tool calls as a flightlog message, ``provider_replay`` = ``{"protocol": "openai.chat" or
  "openai.responses", "provider": "openai", "model", "native_message": <the span's output>}``) and ``custom``
  ``model_usage`` (``input_tokens``, ``output_tokens``, ``total_tokens``: tokens) when the span has usage;
* a function span: ``tool_requested`` and ``tool_completed`` (call id = the span id, the tool's name, input and
  output; ``is_error`` when the span recorded an error);
* a handoff span: ``custom`` ``openai_agents.handoff`` ``{"from_agent", "to_agent"}``;
* a guardrail span: ``custom`` ``openai_agents.guardrail`` ``{"name", "triggered"}``.

``flightlog show`` then reads a run's model answers (with model and usage) and tool calls; the session's items
are unaffected (its fold ignores these events), and ``flightlog replay`` keeps showing the conversation from
the items, each message once (:func:`flightlog.replay.reconstruct`: these events add no message in an Agents
SDK session). Span callbacks come from the SDK synchronously: each append is a
durable write made in the calling thread.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

try:
    from agents.tracing import Span, Trace, TracingProcessor
    from agents.tracing.span_data import (
        FunctionSpanData,
        GenerationSpanData,
        GuardrailSpanData,
        HandoffSpanData,
        ResponseSpanData,
    )
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without the SDK
    raise ImportError(
        "flightlog.integrations.openai_agents_tracing needs the OpenAI Agents SDK: "
        "pip install 'flightlog[openai-agents]'"
    ) from exc

from ..events import Custom, Event, LlmCompleted, ProviderReplay, ToolCompleted, ToolRequested
from ..messages import ContentPart, Message, TextPart, ToolCall, ToolResult
from .openai_agents import FlightlogSession

__all__ = ["GUARDRAIL_KIND", "HANDOFF_KIND", "FlightlogTracingProcessor"]

HANDOFF_KIND = "openai_agents.handoff"
"""``custom_kind`` of a handoff: ``{"from_agent", "to_agent"}``."""
GUARDRAIL_KIND = "openai_agents.guardrail"
"""``custom_kind`` of a guardrail check: ``{"name", "triggered"}``."""


def _jsonable(value: Any) -> Any:
    """``value`` as plain JSON (pydantic models dumped; anything else through ``str``)."""
    return json.loads(json.dumps(value, default=_default))


def _default(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump(mode="json", exclude_none=True) if callable(dump) else str(value)


def _call(call_id: Any, name: Any, arguments: Any) -> ToolCall:
    return ToolCall(id=str(call_id or ""), name=str(name or ""), arguments=str(arguments or ""))


def _chat_message(output: Sequence[Mapping[str, Any]]) -> Message:
    """A chat-completions assistant output (``[{"role", "content", "tool_calls"}]``) as one flightlog message."""
    content: list[ContentPart] = [
        TextPart(text=m["content"]) for m in output if isinstance(m.get("content"), str) and m["content"]
    ]
    calls = [
        _call(c.get("id"), (c.get("function") or {}).get("name"), (c.get("function") or {}).get("arguments"))
        for m in output
        for c in m.get("tool_calls") or []
    ]
    return Message(role="assistant", content=content, tool_calls=calls)


def _responses_message(output: Sequence[Mapping[str, Any]]) -> Message:
    """Responses API output items (``message`` with ``output_text`` parts, ``function_call``) as one message."""
    content: list[ContentPart] = [
        TextPart(text=str(p.get("text", "")))
        for item in output
        if item.get("type") == "message"
        for p in item.get("content") or []
        if p.get("type") == "output_text"
    ]
    calls = [
        _call(i.get("call_id"), i.get("name"), i.get("arguments"))
        for i in output
        if i.get("type") == "function_call"
    ]
    return Message(role="assistant", content=content, tool_calls=calls)


class FlightlogTracingProcessor(TracingProcessor):
    """Records a run's spans into ``session``'s ledger as readable events (module docstring: the mapping).

    Args:
        session: The :class:`FlightlogSession` whose ledger receives the events.
        all_traces: Record every trace, not only those whose ``group_id`` is ``session.session_id``.

    Errors of an append propagate to the SDK, which logs them (a processor never stops a run); the events of
    that span are then not recorded (``StaleWriter`` when a newer ``FlightlogSession`` took over the id).
    """

    def __init__(self, session: FlightlogSession, *, all_traces: bool = False) -> None:
        self.session = session
        self.all_traces = all_traces
        self._traces: set[str] = set()

    def on_trace_start(self, trace: Trace) -> None:
        """Remember the trace when it belongs to the session."""
        exported = trace.export() or {}
        if self.all_traces or exported.get("group_id") == self.session.session_id:
            self._traces.add(trace.trace_id)

    def on_trace_end(self, trace: Trace) -> None:
        """Forget the trace."""
        self._traces.discard(trace.trace_id)

    def on_span_start(self, span: Span[Any]) -> None:
        """Nothing: a span is recorded when it ends, with its outcome."""

    def on_span_end(self, span: Span[Any]) -> None:
        """Append the span's events (module docstring) when its trace belongs to the session."""
        if span.trace_id not in self._traces:
            return
        events = self._events(span)
        if events:
            self.session.record_events(events)

    def shutdown(self) -> None:
        """Nothing to release: every event was written when its span ended."""

    def force_flush(self) -> None:
        """Nothing buffered."""

    # ─── one mapper per span kind ─────────────────────────────────────────────────────────────
    def _events(self, span: Span[Any]) -> list[Event]:
        data = span.span_data
        if isinstance(data, GenerationSpanData):
            output = _jsonable(list(data.output or []))
            return self._llm("openai.chat", data.model, output, _chat_message(output), data.usage)
        if isinstance(data, ResponseSpanData) and data.response is not None:
            response = _jsonable(data.response)
            output = response.get("output") or []
            return self._llm(
                "openai.responses",
                response.get("model"),
                output,
                _responses_message(output),
                response.get("usage"),
            )
        if isinstance(data, FunctionSpanData):
            return self._tool(span, data)
        if isinstance(data, HandoffSpanData):
            return [
                Custom(
                    custom_kind=HANDOFF_KIND,
                    payload={"from_agent": data.from_agent, "to_agent": data.to_agent},
                )
            ]
        if isinstance(data, GuardrailSpanData):
            return [
                Custom(custom_kind=GUARDRAIL_KIND, payload={"name": data.name, "triggered": data.triggered})
            ]
        return []

    def _llm(self, protocol: str, model: Any, output: Any, message: Message, usage: Any) -> list[Event]:
        turn = self.session.turn + 1
        model_name = model if isinstance(model, str) else None
        replay = ProviderReplay(protocol=protocol, provider="openai", model=model_name, native_message=output)
        events: list[Event] = [LlmCompleted(turn=turn, message=message, provider_replay=replay)]
        if isinstance(usage, Mapping):
            tokens_in = int(usage.get("input_tokens") or 0)
            tokens_out = int(usage.get("output_tokens") or 0)
            payload = {
                "turn": turn,
                "model": model_name,
                "protocol": protocol,
                "input_tokens": tokens_in,
                "output_tokens": tokens_out,
                "total_tokens": tokens_in + tokens_out,
            }
            events.append(Custom(custom_kind="model_usage", payload=payload))
        return events

    def _tool(self, span: Span[Any], data: FunctionSpanData) -> list[Event]:
        call = ToolCall(id=span.span_id, name=data.name, arguments=data.input or "")
        output = data.output if isinstance(data.output, str) else json.dumps(_jsonable(data.output))
        result = ToolResult(call_id=span.span_id, output=output, is_error=span.error is not None)
        return [
            ToolRequested(turn=self.session.turn, calls=[call]),
            ToolCompleted(turn=self.session.turn, results=[result]),
        ]
