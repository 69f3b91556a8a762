"""FlightlogHistory against Pydantic AI itself: runs on TestModel / FunctionModel recorded and loaded back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from typer.testing import CliRunner

import flightlog
from flightlog.cli import app
from flightlog.errors import LedgerIntegrityError
from flightlog.integrations.pydantic_ai import FlightlogHistory, session_id_for
from flightlog.integrity.notary import USER_NOTARY, resolve_notary
from flightlog.recorder import Recorder, verify_session
from flightlog.sessions import iter_events

from .dump import dump
from .rechain import rechain


def _json(messages: list[ModelMessage]) -> Any:
    return ModelMessagesTypeAdapter.dump_python(messages, mode="json")


def _agent(model: Any) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(model, system_prompt="Be brief.")

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        """The sum of a and b."""
        return a + b

    return agent


def _scripted(seen: list[int]) -> FunctionModel:
    """Calls add(1, 2), then answers with the tool's result; records how many messages each call saw."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(len(messages))
        last = messages[-1].parts[-1]
        if isinstance(last, ToolReturnPart):
            return ModelResponse(parts=[TextPart(f"the sum is {last.content}")])
        return ModelResponse(parts=[ToolCallPart("add", {"a": 1, "b": 2}, tool_call_id="call-1")])

    return FunctionModel(respond, model_name="scripted-sum")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "pai.db"


def test_a_run_round_trips_and_continues_from_the_ledger(db: Path) -> None:
    history = FlightlogHistory("chat", db)
    seen: list[int] = []
    first = history.run_sync(_agent(_scripted(seen)), "add 1 and 2")
    assert first.output == "the sum is 3"
    assert _json(history.messages()) == _json(first.all_messages())
    history.close()

    again = FlightlogHistory("chat", db)  # another process, later: loads from the verified ledger
    assert _json(again.messages()) == _json(first.all_messages())
    second = again.run_sync(_agent(_scripted(seen)), "and once more")
    assert seen == [1, 3, 5, 7]  # the second run's model saw the first run's four messages first
    assert _json(second.all_messages()[:4]) == _json(first.all_messages())
    assert _json(again.messages()) == _json(second.all_messages())
    again.close()

    with flightlog.open_store(str(db)) as store:
        sid = session_id_for("chat")
        assert verify_session(store, sid).ok
        Recorder.attach(store, sid, notary=resolve_notary(USER_NOTARY))  # signed with the user's key
        kinds = [event.kind for _row, event in iter_events(store, sid)]
    assert kinds.count("run_started") == 2 and kinds.count("llm_completed") == 4
    assert kinds.count("tool_requested") == 2 and kinds.count("tool_completed") == 2


def test_async_run_with_test_model(db: Path) -> None:
    import asyncio

    history = FlightlogHistory("t", db, notary=None)
    result = asyncio.run(history.run(_agent(TestModel()), "hello"))
    assert _json(history.messages()) == _json(result.all_messages())
    history.close()


def test_show_and_replay_read_the_run(db: Path) -> None:
    history = FlightlogHistory("cli", db)
    history.run_sync(_agent(_scripted([])), "add 1 and 2")
    history.close()
    runner = CliRunner()
    show = runner.invoke(app, ["--db", str(db), "show", "cli"])
    assert show.exit_code == 0, show.output
    assert "add 1 and 2" in show.output and "add" in show.output and "the sum is 3" in show.output
    replay = runner.invoke(app, ["--db", str(db), "replay", "cli", "--json"])
    assert replay.exit_code == 0, replay.output
    messages = json.loads(replay.output)["messages"]
    text = json.dumps(messages)
    assert "add 1 and 2" in text and "the sum is 3" in text and "call-1" in text
    verify = runner.invoke(app, ["--db", str(db), "verify", "cli"])
    assert verify.exit_code == 0, verify.output


def test_a_changed_byte_is_refused(db: Path) -> None:
    import sqlite3

    history = FlightlogHistory("x", db, notary=None)
    history.run_sync(_agent(_scripted([])), "add 1 and 2")
    history.close()
    raw = sqlite3.connect(db)
    raw.execute("DROP TRIGGER IF EXISTS events_no_update")
    sid = session_id_for("x")
    rows = raw.execute("SELECT seq, event FROM events WHERE session_id = ? ORDER BY seq", (sid,)).fetchall()
    seq, data = next((seq, bytes(data)) for seq, data in rows if b"add 1 and 2" in bytes(data))
    changed = data.replace(b"add 1 and 2", b"add 9 and 2")
    raw.execute("UPDATE events SET event = ? WHERE session_id = ? AND seq = ?", (changed, sid, seq))
    raw.commit()
    raw.close()
    with pytest.raises(LedgerIntegrityError) as refused:
        FlightlogHistory("x", db, notary=None).messages()
    assert refused.value.seq == seq


def _cli_json(db: Path, *args: str) -> Any:
    result = CliRunner().invoke(app, ["--db", str(db), *args, "--json"])
    assert result.exit_code == 0, (args, result.output)
    return json.loads(result.output)


def test_each_run_ends_completed_and_signed(db: Path) -> None:
    """A run is listed as ended, not running forever, and signed when it ends though far fewer events than
    the notary's cadence were written (the docs say: signed with your log key by default)."""
    history = FlightlogHistory("ends", db)
    history.run_sync(_agent(_scripted([])), "add 1 and 2")
    [run] = _cli_json(db, "runs")
    assert (run["state"], run["terminal"]["outcome"], run["budget"]["steps_taken"]) == (
        "terminal",
        "completed",
        2,
    )
    [audit] = _cli_json(db, "audit", "ends")
    assert audit["ok"] and audit["checkpoints"] >= 1
    assert (
        audit["anchored"] == audit["events"]
        and audit["unanchored"] is None
        and audit["retained"] == audit["events"]
    )
    [listed] = _cli_json(db, "ls")
    assert listed["status"] == "completed"

    history.run_sync(_agent(_scripted([])), "and again")  # a second run: its own run_started ... run_terminal
    history.close()
    with flightlog.open_store(str(db)) as store:
        ends = [e for _row, e in iter_events(store, session_id_for("ends")) if e.kind == "run_terminal"]
    assert [(e.reason, e.turns_used) for e in ends] == [("completed", 2), ("completed", 2)]
    [audit] = _cli_json(db, "audit", "ends")
    assert audit["anchored"] == audit["events"]


def test_a_rechained_history_is_refused(db: Path) -> None:
    """An attacker who edits a response and recomputes every chain hash and the session row passes the plain
    chain; the checkpoint signed when the run ended does not match, so the next reader refuses."""
    history = FlightlogHistory("re", db)
    history.run_sync(_agent(_scripted([])), "add 1 and 2")
    history.close()
    sid = session_id_for("re")
    rechain(db, sid, lambda _seq, data: data.replace(b"the sum is 3", b"the sum is 4"))
    with flightlog.open_store(str(db)) as store:
        assert verify_session(store, sid).ok  # the plain chain cannot see it
    with pytest.raises(LedgerIntegrityError):
        FlightlogHistory("re", db).messages()


def test_reading_the_history_writes_nothing_and_fences_no_writer(db: Path) -> None:
    writer = FlightlogHistory("x", db)
    writer.run_sync(_agent(_scripted([])), "add 1 and 2")
    sid = session_id_for("x")
    with flightlog.open_store(db) as store:
        epoch = store.authority_epoch(sid)
    before = dump(db)
    reader = FlightlogHistory("x", db)
    try:
        assert _json(reader.messages()) == _json(writer.messages())  # verified, then read
        assert dump(db) == before  # byte for byte: no epoch bump, no row, no status
        writer.run_sync(_agent(_scripted([])), "again")  # the writer was not fenced off by the read
        assert len(reader.messages()) == len(writer.messages()) > 4  # the reader verifies what was added
        with flightlog.open_store(db) as store:
            assert store.authority_epoch(sid) == epoch
        reader.record(writer.messages()[-1:])  # the reader's first write takes authority
        with flightlog.open_store(db) as store:
            assert store.authority_epoch(sid) == epoch + 1
            assert verify_session(store, sid).ok
    finally:
        reader.close()
        writer.close()
