"""Garbage rows in the signal queue (the attack pass, a8): the queue is not hashed, so any writer of the
database can put anything there. A row flightlog never writes is refused naming the signal and the field,
before anything is written; nothing is delivered under a guessed kind or urgency, nothing dropped; once
the row is fixed the run resumes and the signal is delivered."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flightlog.cli import app
from flightlog.errors import SignalRowInvalid
from flightlog.events import SignalDeliveryDisposed
from flightlog.kernel import Policy, Rule, approve, send_signal
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.store import SqliteStore
from flightlog.store.signals import pending_signals, signal_record

from .helpers import customs, events, kernel, of

runner = CliRunner()

ASK = Policy(rules=(Rule("ask", tool="echo"),))


def _suspended_with_a_signal(store: SqliteStore) -> tuple[ScriptedProvider, str]:
    provider = ScriptedProvider([calls(call("echo", {"text": "x"}, id="c1")), reply("done")])
    assert kernel(store, provider, policy=ASK).run_sync("go", session_id="s1").status == "suspended"
    signal_id = send_signal(store, "s1", "message", "hello there").signal_id
    approve(store, "s1", "c1")
    return provider, signal_id


@pytest.mark.parametrize(
    ("column", "value", "said"),
    [
        ("queued_at_ms", "yesterday", "field queued_at_ms is 'yesterday', not an integer (epoch ms)"),
        ("kind", "rm -rf", "field kind is 'rm -rf', not one of message, steer, interrupt"),
        ("urgency", "zzz", "field urgency is 'zzz', not one of low, normal, high, critical"),
        ("state", "limbo", "field state is 'limbo', not one of queued, dropped, disposed"),
        ("sender", b"\xff", "field sender is b'\\xff', not text"),  # a BLOB (TEXT affinity keeps it)
    ],
)
def test_a_garbage_signal_row_refuses_the_resume_naming_it_and_writes_nothing(
    store: SqliteStore, column: str, value: object, said: str
) -> None:
    provider, signal_id = _suspended_with_a_signal(store)
    store.signal_sql(f"UPDATE signals SET {column} = ? WHERE signal_id = ?", (value, signal_id))
    before = events(store, "s1")
    with pytest.raises(SignalRowInvalid, match=re.escape(f"signal {signal_id}: {said}")) as refused:
        kernel(store, provider, policy=ASK).resume_sync("s1")
    assert (refused.value.signal_id, refused.value.field) == (signal_id, column)
    assert events(store, "s1") == before  # no `resumed`, no disposition: nothing written
    with pytest.raises(SignalRowInvalid):
        signal_record(store, signal_id)


def test_once_the_row_is_fixed_the_run_resumes_and_the_signal_is_delivered(store: SqliteStore) -> None:
    provider, signal_id = _suspended_with_a_signal(store)
    store.signal_sql("UPDATE signals SET urgency = 'zzz' WHERE signal_id = ?", (signal_id,))
    with pytest.raises(SignalRowInvalid):
        kernel(store, provider, policy=ASK).resume_sync("s1")
    store.signal_sql("UPDATE signals SET urgency = 'normal' WHERE signal_id = ?", (signal_id,))
    assert kernel(store, provider, policy=ASK).resume_sync("s1").status == "completed"
    (disposed,) = of(store, "s1", SignalDeliveryDisposed)
    assert disposed.signal_id == signal_id and disposed.disposition == "queue"  # sent while suspended
    assert [m["text"] for m in customs(store, "s1", "signal_message")] == ["[SIGNAL] hello there"]
    assert pending_signals(store, "s1") == []


def test_a_row_spoiled_while_the_run_goes_on_stops_it_at_the_boundary_and_it_resumes(
    store: SqliteStore,
) -> None:
    def turn_one(_request: object) -> object:
        record = send_signal(store, "s2", "message", "mid-run")
        store.signal_sql("UPDATE signals SET kind = 'evil' WHERE signal_id = ?", (record.signal_id,))
        return calls(call("echo", {"text": "x"}, id="c1"))

    provider = ScriptedProvider([turn_one, reply("done")], by_turn=False)  # type: ignore[list-item]
    with pytest.raises(SignalRowInvalid, match="field kind is 'evil'"):
        kernel(store, provider).run_sync("go", session_id="s2")
    assert of(store, "s2", SignalDeliveryDisposed) == []
    store.signal_sql("UPDATE signals SET kind = 'message' WHERE session_id = 's2'", ())
    assert kernel(store, provider).resume_sync("s2").status == "completed"
    assert [m["text"] for m in customs(store, "s2", "signal_message")] == ["[SIGNAL] mid-run"]


AGENT = """
from flightlog.kernel import Agent, Policy, Rule, tool
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply


@tool(effect="read_only")
def echo(text: str) -> str:
    \"\"\"Echo the text back.\"\"\"
    return text


agent = Agent(
    name="asks",
    route=[ScriptedProvider([calls(call("echo", {"text": "x"}, id="c1")), reply("done")])],
    tools=[echo],
    policy=Policy(rules=(Rule("ask", tool="echo"),)),
)
"""


def test_the_cli_resume_says_which_signal_and_field_in_one_line(
    store: SqliteStore, db_path: Path, tmp_path: Path
) -> None:
    spec = tmp_path / "asking_agent.py"
    spec.write_text(AGENT)
    db = ["--db", str(db_path)]
    assert runner.invoke(app, [*db, "run", f"{spec}:agent", "--goal", "g", "--session", "s5"]).exit_code == 3
    assert runner.invoke(app, [*db, "signal", "s5", "--message", "hello"]).exit_code == 0
    (record,) = pending_signals(store, "s5")
    store.signal_sql("UPDATE signals SET queued_at_ms = 'yesterday' WHERE signal_id = ?", (record.signal_id,))
    assert runner.invoke(app, [*db, "approve", "s5", "c1"]).exit_code == 0
    before = events(store, "s5")
    resumed = runner.invoke(app, [*db, "resume", "s5", "--spec", f"{spec}:agent"])
    assert resumed.exit_code == 1, resumed.output
    assert "Traceback" not in resumed.output
    (line,) = [ln for ln in resumed.stderr.splitlines() if ln.startswith("flightlog: error:")]
    assert f"signal {record.signal_id}: field queued_at_ms is 'yesterday'" in line
    assert events(store, "s5") == before
    store.signal_sql("UPDATE signals SET queued_at_ms = 1 WHERE signal_id = ?", (record.signal_id,))
    assert runner.invoke(app, [*db, "resume", "s5", "--spec", f"{spec}:agent"]).exit_code == 0
