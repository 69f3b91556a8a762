"""FlightlogTracingProcessor with the Agents SDK's Runner: generations, a handoff and a tool call recorded."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from agents import (
    Agent,
    GuardrailFunctionOutput,
    RunConfig,
    Runner,
    function_tool,
    input_guardrail,
    output_guardrail,
)
from agents.items import ModelResponse, TResponseStreamEvent
from agents.models.interface import Model
from agents.tracing import generation_span, get_trace_provider, response_span, set_trace_processors
from agents.usage import Usage
from openai.types.responses import (
    Response,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseUsage,
)
from typer.testing import CliRunner

import flightlog
from flightlog.cli import app
from flightlog.events import Custom, LlmCompleted
from flightlog.integrations.openai_agents import FlightlogSession, session_id_for
from flightlog.integrations.openai_agents_tracing import (
    GUARDRAIL_KIND,
    HANDOFF_KIND,
    FlightlogTracingProcessor,
)
from flightlog.messages import Message, TextPart, ToolResultPart
from flightlog.recorder import verify_session
from flightlog.sessions import iter_events
from flightlog.web.conversation import conversation


def _call(call_id: str, name: str, arguments: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        id=f"fc_{call_id}", type="function_call", call_id=call_id, name=name, arguments=arguments
    )


def _text(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id="msg_1",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


class ChatLikeModel(Model):
    """Plays a script and traces each call as a generation span, as the SDK's chat-completions model does
    (``responses=True``: as a response span holding the Responses API object, as its Responses model does)."""

    def __init__(self, script: list[list[Any]], *, responses: bool = False) -> None:
        self.script = script
        self.responses = responses

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        output = self.script.pop(0)
        if self.responses:
            usage = ResponseUsage.model_construct(input_tokens=30, output_tokens=4, total_tokens=34)
            response = Response.model_construct(id="resp_1", model="fake-chat", output=output, usage=usage)
            with response_span(response=response):
                pass
        else:
            with generation_span(model="fake-chat", usage={"input_tokens": 30, "output_tokens": 4}) as span:
                span.span_data.output = [_as_chat(output)]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError


def _as_chat(output: list[Any]) -> dict[str, Any]:
    text = "".join(p.text for item in output if isinstance(item, ResponseOutputMessage) for p in item.content)
    calls = [
        {"id": i.call_id, "type": "function", "function": {"name": i.name, "arguments": i.arguments}}
        for i in output
        if isinstance(i, ResponseFunctionToolCall)
    ]
    return {"role": "assistant", "content": text or None, "tool_calls": calls or None}


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@input_guardrail
def no_secrets(ctx: Any, agent: Any, text: Any) -> GuardrailFunctionOutput:
    """Trips on the word 'password' in the input."""
    return GuardrailFunctionOutput(output_info=None, tripwire_triggered="password" in str(text))


@output_guardrail
def polite(ctx: Any, agent: Any, output: Any) -> GuardrailFunctionOutput:
    """Never trips."""
    return GuardrailFunctionOutput(output_info=None, tripwire_triggered=False)


@pytest.fixture
def only_our_processors() -> Iterator[None]:
    multi = get_trace_provider()._multi_processor  # type: ignore[attr-defined]  # restored after the test
    before = list(multi._processors)
    yield
    set_trace_processors(before)


@pytest.mark.parametrize("responses", [False, True], ids=["generation-spans", "response-spans"])
def test_a_traced_run_is_recorded_as_readable_events(
    tmp_path: Path, only_our_processors: None, responses: bool
) -> None:
    db = tmp_path / "traced.db"
    session = FlightlogSession("chat", db)
    set_trace_processors([FlightlogTracingProcessor(session)])
    model = ChatLikeModel(
        [
            [_call("h1", "transfer_to_helper", "{}")],
            [_call("w1", "get_weather", '{"city":"Paris"}')],
            [_text("Sunny in Paris.")],
        ],
        responses=responses,
    )
    helper = Agent(name="helper", model=model, tools=[get_weather], output_guardrails=[polite])
    triage = Agent(name="triage", model=model, handoffs=[helper], input_guardrails=[no_secrets])

    async def run() -> Any:
        return await Runner.run(
            triage, "Weather in Paris?", session=session, run_config=RunConfig(group_id="chat")
        )

    try:
        assert asyncio.run(run()).final_output == "Sunny in Paris."
        items = asyncio.run(session.get_items())
    finally:
        session.close()
    assert items[0] == {"role": "user", "content": "Weather in Paris?"}  # the items are unaffected

    with flightlog.open_store(str(db)) as store:
        sid = session_id_for("chat")
        assert verify_session(store, sid).ok
        events = [e for _row, e in iter_events(store, sid)]
    answers = [e for e in events if isinstance(e, LlmCompleted)]
    assert len(answers) == 3
    assert [e.provider_replay.protocol for e in answers if e.provider_replay] == [
        "openai.responses" if responses else "openai.chat"
    ] * 3
    assert answers[1].message.tool_calls[0].name == "get_weather"
    assert answers[2].message.content == [TextPart(text="Sunny in Paris.")]
    handoffs = [e.payload for e in events if isinstance(e, Custom) and e.custom_kind == HANDOFF_KIND]
    assert handoffs == [{"from_agent": "triage", "to_agent": "helper"}]
    guardrails = [e.payload for e in events if isinstance(e, Custom) and e.custom_kind == GUARDRAIL_KIND]
    assert sorted(guardrails, key=str) == [
        {"name": "no_secrets", "triggered": False},
        {"name": "polite", "triggered": False},
    ]
    (requested,) = [e for e in events if e.kind == "tool_requested"]
    (completed,) = [e for e in events if e.kind == "tool_completed"]
    assert requested.calls[0].name == "get_weather" and json.loads(requested.calls[0].arguments) == {
        "city": "Paris"
    }  # type: ignore[attr-defined]
    assert completed.results[0].output == "sunny in Paris"  # type: ignore[attr-defined]
    usage = [e.payload for e in events if isinstance(e, Custom) and e.custom_kind == "model_usage"]
    assert [(u["input_tokens"], u["output_tokens"]) for u in usage] == [(30, 4)] * 3

    shown = CliRunner().invoke(app, ["--db", str(db), "show", "chat"])
    assert shown.exit_code == 0, shown.output
    assert "get_weather" in shown.output and "Sunny in Paris." in shown.output
    assert "handoff triage -> helper" in shown.output and "guardrail no_secrets: passed" in shown.output
    assert [e.turn for e in answers] == [1, 2, 3]


def test_a_tripped_guardrail_is_recorded(tmp_path: Path, only_our_processors: None) -> None:
    from agents.exceptions import InputGuardrailTripwireTriggered

    session = FlightlogSession("g", tmp_path / "g.db", notary=None)
    set_trace_processors([FlightlogTracingProcessor(session)])
    agent = Agent(name="a", model=ChatLikeModel([[_text("hi")]]), input_guardrails=[no_secrets])

    async def run() -> None:
        await Runner.run(agent, "my password is x", session=session, run_config=RunConfig(group_id="g"))

    try:
        with pytest.raises(InputGuardrailTripwireTriggered):
            asyncio.run(run())
    finally:
        session.close()
    with flightlog.open_store(str(tmp_path / "g.db")) as store:
        events = [e for _row, e in iter_events(store, session_id_for("g"))]
    guardrails = [e.payload for e in events if isinstance(e, Custom) and e.custom_kind == GUARDRAIL_KIND]
    assert guardrails == [{"name": "no_secrets", "triggered": True}]


def test_traces_of_other_groups_are_not_recorded(tmp_path: Path, only_our_processors: None) -> None:
    session = FlightlogSession("mine", tmp_path / "other.db", notary=None)
    set_trace_processors([FlightlogTracingProcessor(session)])
    agent = Agent(name="a", model=ChatLikeModel([[_text("hi")]]))

    async def run() -> None:
        await Runner.run(agent, "hello", session=session, run_config=RunConfig(group_id="someone-else"))

    try:
        asyncio.run(run())
    finally:
        session.close()
    with flightlog.open_store(str(tmp_path / "other.db")) as store:
        assert "llm_completed" not in [e.kind for _row, e in iter_events(store, session_id_for("mine"))]


# ─── replay: the conversation from the session's items, each message once ──────────────────────────
@pytest.mark.parametrize("traced", [False, True], ids=["untraced", "traced"])
def test_replay_shows_the_conversation_once(tmp_path: Path, only_our_processors: None, traced: bool) -> None:
    """Two Runner runs with a tool call, with and without the tracing processor (which records the same
    answers and tool call as llm_completed / tool_completed) and with record_result's run_started: replay
    shows each message of the SDK's history once, in its order, and a pop removes the popped item."""
    db = tmp_path / "replayed.db"
    session = FlightlogSession("talk", db, notary=None)
    set_trace_processors([FlightlogTracingProcessor(session)] if traced else [])
    config = RunConfig(group_id="talk") if traced else RunConfig(tracing_disabled=True)
    model = ChatLikeModel(
        [
            [_call("w1", "get_weather", '{"city":"Paris"}')],
            [_text("Sunny in Paris.")],
            [_text("You're welcome.")],
        ]
    )
    agent = Agent(name="helper", model=model, tools=[get_weather])

    async def run() -> None:
        for prompt in ("Weather in Paris?", "Thanks!"):
            result = await Runner.run(agent, prompt, session=session, run_config=config)
            await session.record_result(result)  # run_started (the prompt again) + run_terminal

    try:
        asyncio.run(run())
        history = asyncio.run(session.get_items())
    finally:
        session.close()

    with flightlog.open_store(str(db)) as store:
        kinds = [e.kind for _row, e in iter_events(store, session_id_for("talk"))]
    assert kinds.count("run_started") == 2
    assert kinds.count("llm_completed") == (3 if traced else 0)  # the duplicates replay must not show
    assert kinds.count("tool_completed") == (1 if traced else 0)

    replayed = CliRunner().invoke(app, ["--db", str(db), "replay", "talk", "--json"])
    assert replayed.exit_code == 0, replayed.output
    messages = [Message.model_validate(m) for m in json.loads(replayed.output)["messages"]]
    assert [(m.role, m.text_content(), [(c.id, c.name) for c in m.tool_calls]) for m in messages] == [
        ("user", "Weather in Paris?", []),
        ("assistant", "", [("w1", "get_weather")]),
        ("tool", "", []),
        ("assistant", "Sunny in Paris.", []),
        ("user", "Thanks!", []),
        ("assistant", "You're welcome.", []),
    ]
    assert messages[2].content == [ToolResultPart(call_id="w1", output="sunny in Paris")]
    assert json.loads(messages[1].tool_calls[0].arguments) == {"city": "Paris"}
    assert len(messages) == len(history)  # one message per item of the SDK's own history

    shown = CliRunner().invoke(app, ["--db", str(db), "replay", "talk"])
    assert shown.exit_code == 0 and shown.output.count("Weather in Paris?") == 1, shown.output
    with flightlog.open_store(str(db)) as store:  # the dashboard's conversation: each call beside its result
        rows = conversation(store, session_id_for("talk"), None, None)["rows"]
    assert [(r["role"], [(c["name"], c["result"]) for c in r["calls"]]) for r in rows] == [
        ("user", []),
        ("assistant", [("get_weather", "sunny in Paris")]),
        ("assistant", []),
        ("user", []),
        ("assistant", []),
    ]

    popped = FlightlogSession("talk", db, notary=None)
    try:
        asyncio.run(popped.pop_item())
    finally:
        popped.close()
    replayed = CliRunner().invoke(app, ["--db", str(db), "replay", "talk", "--json"])
    assert [m["role"] for m in json.loads(replayed.output)["messages"]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]


@function_tool
def log_note(note: str) -> None:
    """Writes a note; returns nothing."""


@pytest.mark.parametrize("sensitive", [True, False], ids=["with-data", "without-data"])
def test_each_traced_call_is_named_by_the_models_call_id(
    tmp_path: Path, only_our_processors: None, sensitive: bool
) -> None:
    """Two calls of one tool and a tool returning None in one answer: each result under its own call id,
    once (the function span carries no call id; the model's answer does). Without sensitive data the spans
    hold no input or output: the results are the session's function_call_output items."""
    db = tmp_path / "calls.db"
    session = FlightlogSession("calls", db, notary=None)
    set_trace_processors([FlightlogTracingProcessor(session)])
    model = ChatLikeModel(
        [
            [
                _call("w_paris", "get_weather", '{"city":"Paris"}'),
                _call("w_rome", "get_weather", '{"city":"Rome"}'),
                _call("n_1", "log_note", '{"note":"asked"}'),
            ],
            [_text("Sunny in both.")],
        ],
        responses=True,
    )
    agent = Agent(name="helper", model=model, tools=[get_weather, log_note])
    config = RunConfig(group_id="calls", trace_include_sensitive_data=sensitive)
    try:
        result = asyncio.run(Runner.run(agent, "Paris and Rome?", session=session, run_config=config))
        asyncio.run(session.record_result(result))
    finally:
        session.close()
    with flightlog.open_store(str(db)) as store:
        events = [e for _row, e in iter_events(store, session_id_for("calls"))]
    requested = sorted(c.id for e in events if e.kind == "tool_requested" for c in e.calls)  # type: ignore[attr-defined]
    results = {r.call_id: r.output for e in events if e.kind == "tool_completed" for r in e.results}  # type: ignore[attr-defined]
    assert requested == ["n_1", "w_paris", "w_rome"]
    assert sorted(results) == ["n_1", "w_paris", "w_rome"]
    assert (results["w_paris"], results["w_rome"]) == ("sunny in Paris", "sunny in Rome")
    assert results["n_1"] == "None"  # what the model was told (the item), not a JSON null
    kinds = [e.kind for e in events]
    assert kinds.count("tool_completed") == 3 and kinds.index("run_terminal") == len(kinds) - 1
