"""``FlightlogTracingProcessor``: an OpenAI Agents SDK run's generations, tool calls, handoffs and guardrails
recorded into a :class:`~flightlog.integrations.openai_agents.FlightlogSession`'s ledger as readable events.

Install with ``pip install -e '.[openai-agents]'`` in a clone (``pip install 'flightlog[openai-agents]'`` once
flightlog is published). Usage::

    from agents import RunConfig, Runner, add_trace_processor
    from flightlog.integrations.openai_agents import FlightlogSession
    from flightlog.integrations.openai_agents_tracing import FlightlogTracingProcessor

    session = FlightlogSession("user-42", "agent.db")
    add_trace_processor(FlightlogTracingProcessor(session))
    await Runner.run(agent, "Hello", session=session, run_config=RunConfig(group_id="user-42"))

The processor records the spans of the traces whose ``group_id`` is the session's id (``RunConfig(group_id=
...)``; ``all_traces=True`` records every trace), each when the span ends, appended through the session's own
recorder (so its items and these events share one chain); the first of a run opens it with ``run_started``
(:meth:`FlightlogSession.record_events`), so a run's events follow its start. A run resumed from a ``RunState`` in the process
that started it continues that trace without a new ``on_trace_start`` (the SDK's ``ReattachedTrace``); its
spans are recorded too, the trace being recognised as the current trace (``agents.tracing.get_current_trace``)
when a span of it starts or ends. Mapping:

* a generation span (chat-completions models) or a response span (Responses models): ``llm_completed`` (the
  next turn after the session's latest, :attr:`FlightlogSession.turn`, so turns go on across processes:
  the text and tool calls as a flightlog message, ``provider_replay`` = ``{"protocol": "openai.chat" or
  "openai.responses", "provider": "openai", "model", "native_message": <the span's output>}``) and ``custom``
  ``model_usage`` (``input_tokens``, ``output_tokens``, ``total_tokens``: tokens) when the span has usage;
* a function span: ``tool_requested`` and ``tool_completed`` (the tool's name, input and output; ``is_error``
  when the span recorded an error), named by the model's call id: the SDK's function span carries none, so
  it is the oldest call of that tool (with equal arguments when the span has them) that a recorded
  ``llm_completed`` asked for and no result answered yet (:meth:`FlightlogSession.open_call`; the span id
  only when no recorded model answer names the tool). ``tool_requested`` is left out when the ledger
  requested the call already (a call gated by :meth:`FlightlogSession.record_result` and run after its
  approval), and nothing is written for a call denied there. A span without output and without error
  is a call stopped for ``needs_approval`` (the SDK ends its span before asking) or a tool that returned
  None (or a run with ``trace_include_sensitive_data=False``): it is held until the trace shows which.
  It ran when the model answers again in that trace (recorded then, with the output of the session's
  ``function_call_output`` item for it, else ``null``) or when that item is in the history at the trace's
  end (recorded with it); otherwise it stopped for approval and is dropped (``record_result`` gates it;
  its function span is recorded when it runs, after the approval);
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
from dataclasses import dataclass
from typing import Any

from ..errors import install_hint

try:
    from agents.tool import FunctionToolResult
    from agents.tracing import Span, Trace, TracingProcessor, get_current_trace
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
        + install_hint("openai-agents")
    ) from exc

from ..events import Custom, Event, LlmCompleted, ProviderReplay, ToolCompleted, ToolRequested
from ..messages import ContentPart, Message, TextPart, ToolCall, ToolResult
from .openai_agents import CallState, FlightlogSession

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
        self._held: dict[str, dict[str, _Held]] = {}  # trace id -> call id -> a span without output

    def _ours(self, trace: Trace) -> bool:
        exported = trace.export() or {}
        return self.all_traces or exported.get("group_id") == self.session.session_id

    def on_trace_start(self, trace: Trace) -> None:
        """Remember the trace when it belongs to the session."""
        if self._ours(trace):
            self._traces.add(trace.trace_id)

    def on_trace_end(self, trace: Trace) -> None:
        """Record the held calls that ran (module docstring), then forget the trace (a resumed run that
        continues it is recognised again by its spans)."""
        self._traces.discard(trace.trace_id)
        held = self._held.pop(trace.trace_id, {})
        events = [e for h in held.values() for e in self._ran(h, self.session.item_output(h.call.id))]
        if events:
            self.session.record_events(events)

    def on_span_start(self, span: Span[Any]) -> None:
        """Recognise a continued trace (module docstring); a span is recorded when it ends."""
        self._follows(span)

    def on_span_end(self, span: Span[Any]) -> None:
        """Append the span's events (module docstring) when its trace belongs to the session."""
        if not self._follows(span):
            return
        events = self._events(span)
        if events:
            self.session.record_events(events)

    def _follows(self, span: Span[Any]) -> bool:
        """Whether ``span``'s trace belongs to the session: started here, or the current trace (a run
        resumed in this process continues its trace without ``on_trace_start``)."""
        if span.trace_id in self._traces:
            return True
        current = get_current_trace()
        if current is not None and current.trace_id == span.trace_id and self._ours(current):
            self._traces.add(span.trace_id)
            return True
        return False

    def shutdown(self) -> None:
        """Nothing to release: every event was written when its span ended."""

    def force_flush(self) -> None:
        """Nothing buffered."""

    # ─── one mapper per span kind ─────────────────────────────────────────────────────────────
    def _events(self, span: Span[Any]) -> list[Event]:
        data = span.span_data
        if isinstance(data, GenerationSpanData):
            output = _jsonable(list(data.output or []))
            ran = self._release(span.trace_id)
            return ran + self._llm("openai.chat", data.model, output, _chat_message(output), data.usage)
        if isinstance(data, ResponseSpanData) and data.response is not None:
            response = _jsonable(data.response)
            output = response.get("output") or []
            ran = self._release(span.trace_id)
            return ran + self._llm(
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
        held = self._held.setdefault(span.trace_id, {})
        # no recorded model answer names this tool: the span is all there is
        alone: tuple[ToolCall, CallState] = (
            ToolCall(id=span.span_id, name=data.name, arguments=data.input or ""),
            "asked",
        )
        found = self.session.open_call(data.name, data.input, skip={i: h.state for i, h in held.items()})
        call, state = found or alone
        held.pop(call.id, None)  # held before it was gated: this span is the run after the approval
        if state == "denied":  # the model got the rejection message; the tool never ran
            return []
        value = _span_output(data.output)
        if value is None and span.error is None:  # stopped for approval, or a None result: wait
            held[call.id] = _Held(call, state, is_error=False)
            return []
        output = value if isinstance(value, str) else json.dumps(_jsonable(value))
        return self._ran(_Held(call, state, is_error=span.error is not None), output)

    def _release(self, trace_id: str) -> list[Event]:
        """The held calls of ``trace_id`` as run, the model being called again after them (output: the
        session's ``function_call_output`` item for each when saved already, else ``null``)."""
        held = self._held.pop(trace_id, {})
        return [e for h in held.values() for e in self._ran(h, self.session.item_output(h.call.id) or "null")]

    def _ran(self, held: _Held, output: str | None) -> list[Event]:
        """``tool_requested`` (unless the ledger has it) and ``tool_completed`` of a call that ran with
        ``output``; nothing when ``output`` is None (it did not run)."""
        if output is None:
            return []
        turn = self.session.turn
        result = ToolResult(call_id=held.call.id, output=output, is_error=held.is_error)
        requested: list[Event] = (
            [ToolRequested(turn=turn, calls=[held.call])] if held.state == "asked" else []
        )
        return [*requested, ToolCompleted(turn=turn, results=[result])]


def _span_output(value: Any) -> Any:
    """A function span's output: releases before 0.24 stored the SDK's ``FunctionToolResult`` wrapper of an
    approval short-circuit (a call stopped for approval: ``output`` None; a rejection: its message) there,
    not the output; unwrapped as later releases do (``agents/run_internal/tool_execution.py``)."""
    return value.output if isinstance(value, FunctionToolResult) else value


@dataclass(frozen=True)
class _Held:
    """A function span waiting for the trace to tell whether its call ran (module docstring)."""

    call: ToolCall
    state: CallState
    is_error: bool
