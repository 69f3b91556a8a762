"""FlightlogSession against the OpenAI Agents SDK itself: every operation must agree with ``SQLiteSession``."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool
from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
from agents.memory import Session, SessionSettings
from agents.models.interface import Model
from agents.usage import Usage
from hypothesis import given
from hypothesis import strategies as st
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_reasoning_item import Summary
from typer.testing import CliRunner

import flightlog
from flightlog.cli import app
from flightlog.errors import (
    EncodingError,
    ItemEncodingError,
    LedgerIntegrityError,
    SessionNotFound,
    StaleWriter,
)
from flightlog.events import Custom
from flightlog.integrations.openai_agents import (
    CLEAR_KIND,
    ITEM_KIND,
    OPENED_KIND,
    POP_KIND,
    FlightlogSession,
    session_id_for,
)
from flightlog.recorder import Recorder, verify_session
from flightlog.sessions import iter_events

from .dump import dump

# Item shapes as the SDK stores them (``to_input_item()`` of run items, the Responses API's input params).
USER = {"role": "user", "content": "What is the weather in Paris? ünïcødé ✓"}
ASSISTANT = {
    "id": "msg_01",
    "type": "message",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "Let me check.", "annotations": [], "logprobs": []}],
}
CALL = {
    "id": "fc_01",
    "type": "function_call",
    "call_id": "call_abc",
    "name": "get_weather",
    "arguments": '{"city": "Paris"}',
    "status": "completed",
}
OUTPUT = {"type": "function_call_output", "call_id": "call_abc", "output": '{"temp_c": 21.5, "sky": "clear"}'}
REASONING = {
    "id": "rs_01",
    "type": "reasoning",
    "summary": [{"type": "summary_text", "text": "The user wants the weather; call the tool."}],
    "encrypted_content": "gAAAAABo-opaque==",
}
SYSTEM = {"role": "system", "content": [{"type": "input_text", "text": "Be brief."}], "type": "message"}
NUMBERS = {"type": "message", "role": "user", "content": "n", "x": {"f": 0.25, "i": -3, "big": 2**53 - 1}}
SHAPES: list[Any] = [USER, SYSTEM, REASONING, ASSISTANT, CALL, OUTPUT, NUMBERS]


def _items(*names: str) -> list[Any]:
    return [{"role": "user", "content": name} for name in names]


def _run(coro: Awaitable[Any]) -> Any:
    async def main() -> Any:
        return await coro

    return asyncio.run(main())


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "agents.db"


# ─── protocol conformance: the SDK's own reference implementation is the oracle ────────────────────
Op = Callable[[Session], Awaitable[Any]]
SCRIPT: list[tuple[str, Op]] = [
    ("get on empty", lambda s: s.get_items()),
    ("pop on empty", lambda s: s.pop_item()),
    ("get limit on empty", lambda s: s.get_items(limit=3)),
    ("add nothing", lambda s: s.add_items([])),
    ("add a b c", lambda s: s.add_items(_items("a", "b", "c"))),
    ("get", lambda s: s.get_items()),
    ("get limit 2", lambda s: s.get_items(limit=2)),
    ("get limit 1", lambda s: s.get_items(limit=1)),
    ("get limit 0", lambda s: s.get_items(limit=0)),
    ("get limit -1", lambda s: s.get_items(limit=-1)),
    ("get limit 10", lambda s: s.get_items(limit=10)),
    ("pop", lambda s: s.pop_item()),
    ("get after pop", lambda s: s.get_items()),
    ("add d", lambda s: s.add_items(_items("d"))),
    ("add e f", lambda s: s.add_items(_items("e", "f"))),
    ("pop f", lambda s: s.pop_item()),
    ("pop e", lambda s: s.pop_item()),
    ("get a b d", lambda s: s.get_items()),
    ("clear", lambda s: s.clear_session()),
    ("get after clear", lambda s: s.get_items()),
    ("pop after clear", lambda s: s.pop_item()),
    ("clear when empty", lambda s: s.clear_session()),
    ("add after clear", lambda s: s.add_items(_items("g", "h"))),
    ("get g h", lambda s: s.get_items()),
    ("get limit 1 again", lambda s: s.get_items(limit=1)),
    ("pop h", lambda s: s.pop_item()),
    ("pop g", lambda s: s.pop_item()),
    ("pop on emptied", lambda s: s.pop_item()),
    ("add real shapes", lambda s: s.add_items(SHAPES)),
    ("get real shapes", lambda s: s.get_items()),
    ("get last 3 shapes", lambda s: s.get_items(limit=3)),
]


async def _play(session: Session) -> list[Any]:
    return [await op(session) for _, op in SCRIPT]


def test_conforms_to_sqlite_session(db: Path) -> None:
    reference = SQLiteSession("conv-1")
    ours = FlightlogSession("conv-1", db)
    try:
        assert isinstance(ours, Session)  # the SDK's runtime-checkable protocol
        expected, got = _run(_play(reference)), _run(_play(ours))
    finally:
        reference.close()
        ours.close()
    for (name, _), want, have in zip(SCRIPT, expected, got, strict=True):
        assert have == want, name
    assert got[-2] == SHAPES


@pytest.mark.parametrize("limit", [None, 0, 2, 50])
def test_session_settings_limit_applies_like_sqlite_session(db: Path, limit: int | None) -> None:
    settings = SessionSettings(limit=limit)
    reference = SQLiteSession("s", session_settings=settings)
    ours = FlightlogSession("s", db, session_settings=settings)

    async def play(s: Session) -> list[Any]:
        await s.add_items(_items("a", "b", "c", "d"))
        return [await s.get_items(), await s.get_items(limit=1)]

    try:
        assert _run(play(ours)) == _run(play(reference))
    finally:
        reference.close()
        ours.close()


def test_session_settings_as_a_dict(db: Path) -> None:
    ours = FlightlogSession("s", db, session_settings={"limit": 2})
    try:
        _run(ours.add_items(_items("a", "b", "c")))
        assert _run(ours.get_items()) == _items("b", "c")
        assert _run(ours.get_items(limit=-1)) == _items("a", "b", "c")  # an explicit limit wins
    finally:
        ours.close()


def test_items_read_back_are_fresh_objects(db: Path) -> None:
    session = FlightlogSession("s", db)

    async def play() -> None:
        item = {"role": "user", "content": "hi"}
        await session.add_items([item])
        item["content"] = "changed after add"
        first = await session.get_items()
        first[0]["content"] = "changed by the caller"
        assert await session.get_items() == [{"role": "user", "content": "hi"}]

    try:
        _run(play())
    finally:
        session.close()


# ─── the ledger: layout, restart, tools ─────────────────────────────────────────────────────────────
def test_ledger_layout_and_folds_after_restart(db: Path) -> None:
    async def first() -> None:
        s = FlightlogSession("user-42", db)
        await s.add_items(SHAPES[:3])
        await s.add_items(SHAPES[3:])
        assert await s.pop_item() == NUMBERS
        await s.clear_session()
        await s.add_items([USER, CALL])
        assert await s.pop_item() == CALL
        s.close()

    _run(first())
    store = flightlog.open_store(db)
    try:
        sid = session_id_for("user-42")
        assert sid == "openai-agents:user-42"
        record = store.get_session(sid)
        assert record.source == "openai-agents"
        events = [e for _, e in iter_events(store, sid)]
        assert all(isinstance(e, Custom) for e in events)
        kinds = [e.custom_kind for e in events if isinstance(e, Custom)]
        assert kinds == [OPENED_KIND, *[ITEM_KIND] * 7, POP_KIND, CLEAR_KIND, ITEM_KIND, ITEM_KIND, POP_KIND]
        assert [e.payload for e in events if isinstance(e, Custom)][8] == {"seq": 7}  # names the popped seq
        first_item = events[1]
        assert isinstance(first_item, Custom) and first_item.payload == USER  # the item, verbatim
        assert verify_session(store, sid).ok
    finally:
        store.close()

    async def second() -> list[Any]:
        s = FlightlogSession("user-42", db)  # a new process would do exactly this
        try:
            return await s.get_items()
        finally:
            s.close()

    assert _run(second()) == [USER]


def test_new_session_sees_history_and_fences_the_old_writer(db: Path) -> None:
    store = flightlog.open_store(db)
    old, new = FlightlogSession("s", store), FlightlogSession("s", store)

    async def play() -> None:
        await old.add_items(_items("a", "b"))
        assert await new.get_items() == _items("a", "b")  # a read: verified, nothing written, nobody fenced
        await old.add_items(_items("c"))
        assert await new.get_items() == _items("a", "b", "c")  # the head moved: verified and folded again
        await new.add_items(_items("d"))  # the first write attaches, bumping the epoch: `old` is fenced off
        with pytest.raises(StaleWriter):
            await old.add_items(_items("lost"))
        with pytest.raises(StaleWriter):
            await old.get_items()  # its folded history may be stale: refused, not guessed
        with pytest.raises(StaleWriter):
            await old.pop_item()
        await new.add_items(_items("e"))
        assert await new.get_items() == _items("a", "b", "c", "d", "e")

    try:
        _run(play())
        assert verify_session(store, session_id_for("s")).ok
    finally:
        old.close()
        new.close()
        store.close()


def test_a_read_writes_nothing_the_epoch_included(db: Path) -> None:
    writer = FlightlogSession("s", db)  # signed with the user's key, as by default
    reader = FlightlogSession("s", db)
    fresh = FlightlogSession("never-written", db)

    async def play() -> None:
        await writer.add_items(_items("a", "b"))
        before = dump(db)
        assert await reader.get_items() == _items("a", "b")
        assert await reader.get_items(limit=1) == _items("b")
        assert reader.item_output("call-x") is None and reader.open_call("tool", None) is None
        assert await fresh.get_items() == []  # no session is created by a read
        assert dump(db) == before  # byte for byte: no epoch bump, no row, no session
        await writer.add_items(_items("c"))  # the writer was not fenced off by the reads
        assert await reader.get_items() == _items("a", "b", "c")

    try:
        _run(play())
        with flightlog.open_store(db) as store:
            with pytest.raises(SessionNotFound):
                store.get_session(session_id_for("never-written"))
            assert verify_session(store, session_id_for("s")).ok
    finally:
        for session in (writer, reader, fresh):
            session.close()


def test_sessions_are_separate_and_store_is_left_open(db: Path) -> None:
    store = flightlog.open_store(db)

    async def play() -> None:
        a, b = FlightlogSession("a", store), FlightlogSession("b", store)
        await asyncio.gather(a.add_items(_items("a1")), b.add_items(_items("b1", "b2")))
        assert await a.get_items() == _items("a1")
        assert await b.get_items() == _items("b1", "b2")
        a.close()
        b.close()
        with pytest.raises(RuntimeError, match="closed"):
            await a.get_items()
        with pytest.raises(RuntimeError, match="closed"):
            await a.add_items([])  # checked before the empty fast path, as SQLiteSession does

    try:
        _run(play())
        assert {r.session_id for r in store.list_sessions()} == {"openai-agents:a", "openai-agents:b"}
    finally:
        store.close()


def test_unencodable_item_writes_nothing(db: Path) -> None:
    session = FlightlogSession("s", db)

    async def play() -> None:
        await session.add_items(_items("a"))
        with pytest.raises(EncodingError) as info:
            await session.add_items([*_items("b"), {"role": "user", "content": "x", "score": float("nan")}])
        assert info.value.field.endswith(".score")
        assert await session.get_items() == _items("a")
        assert (await session.verify()).events == 2

    try:
        _run(play())
    finally:
        session.close()


def test_an_item_the_sdk_cannot_serialize_is_a_type_error_naming_it(db: Path) -> None:
    """The SDK's contract (its SQLiteSession raises json.dumps's TypeError; its session tests expect one):
    a TypeError, still an EncodingError naming the item and its field; nothing written, the session usable."""
    session = FlightlogSession("s", db)

    async def play() -> None:
        await session.add_items(_items("a"))
        with pytest.raises(TypeError, match=r"cannot encode items\[1\]\.content: object is not a JSON value"):
            await session.add_items([*_items("b"), {"role": "user", "content": object()}])
        with pytest.raises(ItemEncodingError) as info:
            await session.add_items([{"role": "user", "content": "x", "score": float("nan")}])
        assert isinstance(info.value, EncodingError) and info.value.field == "items[0].score"
        assert await session.get_items() == _items("a")
        await session.add_items(_items("after"))
        assert await session.get_items() == [*_items("a"), *_items("after")]
        assert (await session.verify()).events == 3

    try:
        _run(play())
    finally:
        session.close()


def test_verify_before_first_write_names_no_session(db: Path) -> None:
    session = FlightlogSession("s", db)
    try:
        with pytest.raises(SessionNotFound):
            _run(session.verify())
        _run(session.open())
        assert _run(session.verify()).ok
    finally:
        session.close()


def test_cli_lists_shows_verifies_and_exports(db: Path, tmp_path: Path) -> None:
    session = FlightlogSession("user-42", db)
    _run(session.add_items([USER, CALL, OUTPUT]))
    _run(session.pop_item())
    session.close()
    cli = CliRunner()

    listed = cli.invoke(app, ["--db", str(db), "ls"])
    assert listed.exit_code == 0, listed.output
    assert "openai-agents:user-42" in listed.output
    shown = cli.invoke(app, ["--db", str(db), "show", "user-42"])  # the part after the prefix resolves
    assert shown.exit_code == 0, shown.output
    assert "item user: What is the weather in Paris? ünïcødé ✓" in shown.output  # readable items
    assert 'item call get_weather({"city": "Paris"})' in shown.output
    assert 'item result of call_abc: {"temp_c": 21.5, "sky": "clear"}' in shown.output
    assert "item at seq 3 popped" in shown.output
    verified = cli.invoke(app, ["--db", str(db), "verify", "user-42"])
    assert verified.exit_code == 0, verified.output
    out = tmp_path / "export.jsonl"
    exported = cli.invoke(app, ["--db", str(db), "export", "user-42", "-o", str(out)])
    assert exported.exit_code == 0, exported.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 5
    assert [line["event"]["payload"] for line in lines[1:4]] == [USER, CALL, OUTPUT]
    assert lines[4]["event"] == {"kind": "custom", "custom_kind": POP_KIND, "payload": {"seq": 3}}


def test_a_session_used_only_as_memory_is_no_run_until_a_run_starts(db: Path) -> None:
    """``add_items``/``pop_item`` alone record no ``run_started``: the session is listed by ``ls`` but is
    no run (not a stuck ``initializing`` one) in ``runs``, the paged list, a rebuild and the ledger fold
    alike; its first run (``record_events`` opens one) makes it a run."""
    from flightlog.runs import compute_runs, list_runs, projection_ready, rebuild_projection, run_page
    from flightlog.store.sqlite import SqliteStore

    session = FlightlogSession("memory-only", db, notary=None)
    _run(session.add_items([USER, ASSISTANT]))
    _run(session.pop_item())
    cli = CliRunner()
    listed = cli.invoke(app, ["--db", str(db), "ls"])
    assert listed.exit_code == 0 and "openai-agents:memory-only" in listed.output, listed.output
    runs = cli.invoke(app, ["--db", str(db), "runs", "--json"])
    assert runs.exit_code == 0 and json.loads(runs.stdout) == [], runs.output
    store = SqliteStore(db)
    try:
        assert projection_ready(store)
        assert list_runs(store) == [] and run_page(store).entries == []
        assert run_page(store, state="initializing", sort="updated").entries == []
        assert compute_runs(store) == []  # what a stale projection's readers fold from the ledgers
        rebuild_projection(store)
        assert list_runs(store) == [] and run_page(store).entries == []
    finally:
        store.close()

    session.record_events([Custom(custom_kind="note", payload={"n": 1})])  # opens a run first
    session.close()
    store = SqliteStore(db)
    try:
        (run,) = list_runs(store)
        assert (run.run_id, run.state.value) == ("openai-agents:memory-only", "running")
        assert [e.run_id for e in run_page(store).entries] == [run.run_id]
        incremental = list_runs(store)
        rebuild_projection(store)
        assert list_runs(store) == incremental == [s for s, _ in compute_runs(store)]
    finally:
        store.close()


# ─── tamper evidence ────────────────────────────────────────────────────────────────────────────────
def test_one_flipped_byte_is_named_and_attach_refuses(db: Path) -> None:
    session = FlightlogSession("s", db)
    _run(session.add_items(_items("alpha", "bravo", "charlie")))
    session.close()
    sid = session_id_for("s")

    raw = sqlite3.connect(db)
    try:
        raw.execute("DROP TRIGGER IF EXISTS events_no_update")
        (blob,) = raw.execute("SELECT event FROM events WHERE session_id = ? AND seq = 2", (sid,)).fetchone()
        tampered = bytes(blob).replace(b"bravo", b"brave")  # one byte
        assert len(tampered) == len(blob) and tampered != bytes(blob)
        raw.execute("UPDATE events SET event = ? WHERE session_id = ? AND seq = 2", (tampered, sid))
        raw.commit()
    finally:
        raw.close()

    store = flightlog.open_store(db)
    try:
        report = verify_session(store, sid)
        assert not report.ok
        assert (2, "hash_mismatch") in {(d.seq, d.reason) for d in report.divergences}
    finally:
        store.close()

    verified = CliRunner().invoke(app, ["--db", str(db), "verify", "s"])
    assert verified.exit_code == 1
    assert "2" in verified.output

    reopened = FlightlogSession("s", db)
    try:
        with pytest.raises(LedgerIntegrityError) as info:
            _run(reopened.get_items())
        assert info.value.seq == 2
        with pytest.raises(LedgerIntegrityError):
            _run(reopened.add_items(_items("more")))  # refuses every time, never writes on a bad chain
    finally:
        reopened.close()


def test_a_row_inserted_behind_the_session_is_named(db: Path) -> None:
    """The SDK suite's corrupt-row case (deselected there): a row of invalid JSON added to the store behind
    the session's back. SQLiteSession skips such a row; a ledger refuses it, naming its seq, every time."""
    session = FlightlogSession("s", db)
    _run(session.add_items(_items("valid 0", "valid 1")))  # seqs 1, 2
    session.close()
    sid = session_id_for("s")

    raw = sqlite3.connect(db)
    try:
        raw.row_factory = sqlite3.Row
        last = dict(raw.execute("SELECT * FROM events WHERE session_id = ? AND seq = 2", (sid,)).fetchone())
        row = {**last, "seq": 3, "event": b"not valid json {{{", "prev_hash": last["hash"]}
        columns = ", ".join(row)
        raw.execute(
            f"INSERT INTO events ({columns}) VALUES ({', '.join('?' * len(row))})", list(row.values())
        )
        raw.commit()
    finally:
        raw.close()

    reopened = FlightlogSession("s", db)
    try:
        for operation in (reopened.get_items, reopened.pop_item, lambda: reopened.get_items(limit=1)):
            with pytest.raises(LedgerIntegrityError) as info:
                _run(operation())
            assert info.value.seq == 3
    finally:
        reopened.close()


def test_pop_naming_a_wrong_item_does_not_fold(db: Path) -> None:
    session = FlightlogSession("s", db)
    _run(session.add_items(_items("a", "b")))  # seqs 1, 2
    session.close()
    store = flightlog.open_store(db)
    try:  # a chain that verifies but whose events make no sense as a history
        Recorder.attach(store, session_id_for("s")).record_custom(POP_KIND, {"seq": 1})
        reopened = FlightlogSession("s", store)
        with pytest.raises(LedgerIntegrityError, match="not the last live item") as info:
            _run(reopened.get_items())
        assert info.value.seq == 3
        reopened.close()
    finally:
        store.close()


# ─── concurrency ────────────────────────────────────────────────────────────────────────────────────
def test_concurrent_tasks_keep_every_item(db: Path) -> None:
    session = FlightlogSession("busy", db)
    tasks, per_task = 16, 5

    async def writer(t: int) -> None:
        for r in range(2):
            await session.add_items(_items(*(f"t{t}-r{r}-{i}" for i in range(per_task))))
            await session.get_items(limit=3)

    async def play() -> list[Any]:
        await asyncio.gather(*(writer(t) for t in range(tasks)))
        return list(await session.get_items())

    try:
        items = _run(play())
        assert _run(session.verify()).ok
    finally:
        session.close()
    contents = [item["content"] for item in items]
    assert sorted(contents) == sorted(
        f"t{t}-r{r}-{i}" for t in range(tasks) for r in range(2) for i in range(per_task)
    )
    for start in range(0, len(contents), per_task):  # each add_items call is one contiguous transaction
        batch = contents[start : start + per_task]
        assert batch == [f"{batch[0].rsplit('-', 1)[0]}-{i}" for i in range(per_task)]


def test_concurrent_pops_never_return_the_same_item(db: Path) -> None:
    session = FlightlogSession("s", db)

    async def play() -> list[Any]:
        await session.add_items(_items(*(str(i) for i in range(10))))
        return list(await asyncio.gather(*(session.pop_item() for _ in range(12))))

    try:
        popped = _run(play())
        assert _run(session.get_items()) == []
    finally:
        session.close()
    assert popped.count(None) == 2
    assert sorted(p["content"] for p in popped if p is not None) == [str(i) for i in range(10)]


def test_notary_signed_session_resumes(db: Path) -> None:
    from flightlog.integrity.notary import Notary

    notary = Notary.from_env()
    first = FlightlogSession("signed", db, notary=notary)
    _run(first.add_items(_items("a", "b")))
    first.close()
    second = FlightlogSession("signed", db, notary=notary)
    try:
        assert _run(second.get_items()) == _items("a", "b")
    finally:
        second.close()


# ─── end to end: the SDK's Runner, a fake model, no network ─────────────────────────────────────────
class ScriptedModel(Model):
    """Answers from a script; records the input the Runner sent each time."""

    def __init__(self, script: list[list[Any]]) -> None:
        self.script = list(script)
        self.inputs: list[list[Any]] = []

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        self.inputs.append(json.loads(json.dumps(input)) if not isinstance(input, str) else [input])
        return ModelResponse(output=self.script.pop(0), usage=Usage(), response_id=None)

    async def stream_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> AsyncIterator[TResponseStreamEvent]:
        """The same answer as one ``response.completed`` event (what ``Runner.run_streamed`` consumes)."""
        answer = await self.get_response(system_instructions, input)
        response = Response.model_construct(
            id="resp_1", object="response", created_at=0, model="fake", output=answer.output, usage=None
        )
        yield ResponseCompletedEvent(type="response.completed", response=response, sequence_number=0)


def _text(msg_id: str, text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id=msg_id,
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


def _script() -> list[list[Any]]:
    return [
        [
            ResponseReasoningItem(
                id="rs_1", type="reasoning", summary=[Summary(type="summary_text", text="tool")]
            ),
            ResponseFunctionToolCall(
                id="fc_1",
                type="function_call",
                call_id="call_1",
                name="get_weather",
                arguments='{"city":"Paris"}',
            ),
        ],
        [_text("msg_1", "Sunny in Paris.")],
        [_text("msg_2", "You asked about Paris.")],
    ]


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def _converse(session: Session, method: str = "run") -> tuple[list[TResponseInputItem], ScriptedModel]:
    """Two runs on ``session`` through ``Runner.<method>`` (``run``, ``run_sync`` or ``run_streamed``)."""
    model = ScriptedModel(_script())
    agent = Agent(name="helper", instructions="Be brief.", model=model, tools=[get_weather])
    config = RunConfig(tracing_disabled=True)

    async def run(text: str) -> Any:
        if method == "run_streamed":
            streamed = Runner.run_streamed(agent, text, session=session, run_config=config)
            async for _ in streamed.stream_events():
                pass
            return streamed.final_output
        return (await Runner.run(agent, text, session=session, run_config=config)).final_output

    for text, answer in (
        ("Weather in Paris?", "Sunny in Paris."),
        ("What did I ask?", "You asked about Paris."),
    ):
        if method == "run_sync":  # on a loop of its own, closed after (run_sync would leave its loop open)
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            try:
                output = Runner.run_sync(agent, text, session=session, run_config=config).final_output
            finally:
                asyncio.set_event_loop(None)
                loop.close()
        else:
            output = _run(run(text))
        assert output == answer
    return _run(session.get_items()), model


@pytest.mark.parametrize("method", ["run", "run_sync", "run_streamed"])
def test_runner_end_to_end_matches_sqlite_session(db: Path, method: str) -> None:
    reference = SQLiteSession("chat")
    ours = FlightlogSession("chat", db)
    try:
        want, want_model = _converse(reference, method)
        got, got_model = _converse(ours, method)
    finally:
        reference.close()
        ours.close()
    assert got == want
    assert got_model.inputs == want_model.inputs  # the model saw the same history both times
    types = [item.get("type", "message") for item in got]
    assert types.count("function_call") == 1 and types.count("function_call_output") == 1
    assert "reasoning" in types
    assert got_model.inputs[2] == got[:-1]  # the second run's model input is the history read from the ledger

    restarted = FlightlogSession("chat", db)
    try:
        assert _run(restarted.get_items()) == want
        assert _run(restarted.verify()).ok
    finally:
        restarted.close()


def test_sdk_is_not_imported_by_the_rest_of_flightlog() -> None:
    code = (
        "import sys, flightlog, flightlog.cli, flightlog.integrations, flightlog.sessions, flightlog.narration\n"
        "assert 'agents' not in sys.modules, 'agents imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(
    ("operation", "left"),
    [("add", ["a", "b", "c"]), ("pop", ["a"]), ("clear", [])],
    ids=["add", "pop", "clear"],
)
def test_cancelled_mutation_still_finishes_its_write(db: Path, operation: str, left: list[str]) -> None:
    """The SDK suite's post-commit cancellation rule (deselected there: it patches SQLiteSession's connection):
    a cancelled add/pop/clear still reaches its durable outcome, then the cancellation propagates."""
    session = FlightlogSession("s", db)

    async def play() -> tuple[list[Any], bool]:
        await session.add_items(_items("a", "b"))
        mutation = {
            "add": lambda: session.add_items(_items("c")),
            "pop": session.pop_item,
            "clear": session.clear_session,
        }[operation]
        task = asyncio.ensure_future(mutation())
        await asyncio.sleep(0)  # the task has handed its write to a worker thread
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return list(await session.get_items()), task.cancelled()  # the caller waited for the outcome

    try:
        items, cancelled = _run(play())
        assert items == _items(*left) and cancelled
    finally:
        session.close()


# ─── get_items(limit) against a list model (issue 16: limits between N/2 and N returned too few) ───────
def test_limit_larger_than_history_returns_everything(db: Path) -> None:
    session = FlightlogSession("s", db, notary=None)

    async def play() -> list[int]:
        await session.add_items(_items(*"abcdef"))
        return [len(await session.get_items(limit=n)) for n in (7, 10, 12, 6, 5)]

    try:
        assert _run(play()) == [6, 6, 6, 6, 5]
    finally:
        session.close()


_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(min_value=0, max_value=5)),
        st.tuples(st.just("pop"), st.none()),
        st.tuples(st.just("clear"), st.none()),
        st.tuples(st.just("get"), st.one_of(st.none(), st.integers(min_value=-3, max_value=15))),
    ),
    max_size=25,
)


@given(ops=_OPS, default_limit=st.one_of(st.none(), st.integers(min_value=0, max_value=8)))
def test_history_behaves_like_a_list(ops: list[tuple[str, int | None]], default_limit: int | None) -> None:
    """Every operation's result equals the same operation on a Python list (``SQLiteSession``'s rules:
    ``limit`` None uses the settings' limit, then all; N > 0 the last N; 0 none; negative all)."""
    store = flightlog.open_store(":memory:")
    session = FlightlogSession("p", store, notary=None, session_settings={"limit": default_limit})
    model: list[Any] = []
    counter = 0

    def expected_get(limit: int | None) -> list[Any]:
        n = limit if limit is not None else default_limit
        if n is None or n < 0:
            return list(model)
        return model[len(model) - min(n, len(model)) :] if n else []

    async def play() -> None:
        nonlocal counter
        for op, arg in ops:
            if op == "add":
                new = [{"role": "user", "content": f"m{counter + i}"} for i in range(arg or 0)]
                counter += len(new)
                await session.add_items(new)
                model.extend(new)
            elif op == "pop":
                assert await session.pop_item() == (model.pop() if model else None)
            elif op == "clear":
                await session.clear_session()
                model.clear()
            else:
                assert await session.get_items(limit=arg) == expected_get(arg), (op, arg, len(model))

    try:
        _run(play())
    finally:
        session.close()
        store.close()


def test_unknown_session_settings_are_treated_as_sqlite_session_treats_them(db: Path) -> None:
    """A misspelt key: a TypeError naming it where the SDK's ``SQLiteSession`` raises one (newer SDKs)."""
    try:
        SQLiteSession("s", session_settings={"limitt": 1}).close()  # type: ignore[arg-type]
    except TypeError:
        with pytest.raises(TypeError, match="limitt"):
            FlightlogSession("s", db, session_settings={"limitt": 1})
    else:
        FlightlogSession("s", db, session_settings={"limitt": 1}).close()
