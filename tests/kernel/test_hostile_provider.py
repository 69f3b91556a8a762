"""A provider's answer the ledger cannot hold as given (the attack pass, a4/a4b): a lone surrogate, NaN or
a long integer in a call's arguments, or a lone surrogate in the answer itself. The run goes on or ends with
a named reason, every call's usage is charged, and the session verifies; never a run stuck in a turn that
cannot be recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flightlog.cli import app
from flightlog.events import Rollbacked, RunTerminal, ToolCompleted, ToolRequested
from flightlog.kernel import tool
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.store import SqliteStore

from .helpers import customs, kernel, of

runner = CliRunner()


@pytest.mark.parametrize(
    ("arguments", "field", "reason"),
    [
        ('{"text": "bad \\ud800 text"}', "$.text", "lone surrogate"),
        ('{"text": "x", "n": NaN}', "$.n", "not representable"),
        ('{"text": "x", "n": 123456789012345678901}', "$.n", "beyond"),
    ],
)
def test_arguments_the_ledger_cannot_hold_get_an_error_result_and_the_run_goes_on(
    store: SqliteStore, arguments: str, field: str, reason: str
) -> None:
    provider = ScriptedProvider([calls(call("echo", arguments, id="c1")), reply("done")])
    result = kernel(store, provider).run_sync("task", session_id="s1")
    assert result.status == "completed" and len(provider.requests) == 2
    (requested,) = of(store, "s1", ToolRequested)
    assert requested.calls[0].arguments == arguments  # the raw text, as the model wrote it
    (completed,) = of(store, "s1", ToolCompleted)
    (answer,) = completed.results
    assert answer.is_error and f"arguments cannot be recorded: {field}: " in answer.output
    assert reason in answer.output
    assert len(customs(store, "s1", "model_usage")) == 2  # both calls charged
    assert of(store, "s1", RunTerminal)[0].total_tokens == result.tokens > 0
    # the model was told, in its next request
    told = [p.output for m in provider.requests[1].messages for p in m.content if hasattr(p, "output")]
    assert any(field in text for text in told)


def _usage_tokens(store: SqliteStore, session_id: str) -> int:
    return sum(int(u["total_tokens"]) for u in customs(store, session_id, "model_usage"))


def test_an_answer_with_a_lone_surrogate_is_rolled_back_charged_and_asked_again(store: SqliteStore) -> None:
    provider = ScriptedProvider([reply("half an emoji \ud83d"), reply("fine now")], by_turn=False)
    result = kernel(store, provider).run_sync("task", session_id="s2")
    assert result.status == "completed" and result.final_message == "fine now"
    (rollback,) = of(store, "s2", Rollbacked)
    assert rollback.reason.kind == "malformed_replay"
    assert "the model's answer cannot be recorded: $.message.content[0].text: " in rollback.reason.reason
    assert len(customs(store, "s2", "model_usage")) == 2  # the unrecordable answer's tokens are charged
    assert result.tokens == _usage_tokens(store, "s2")
    (retry,) = customs(store, "s2", "provider_retry")
    assert retry["attempt"] == 1 and "lone surrogate" in retry["error"]


def test_an_answer_that_never_can_be_recorded_ends_the_run_failed_with_every_call_charged(
    store: SqliteStore, db_path: Path
) -> None:
    bad = calls(call("echo", '{"text": "x"}', id="c1"), text="\udfff")
    provider = ScriptedProvider([bad, bad, bad], by_turn=False)
    result = kernel(store, provider, max_retries=2).run_sync("task", session_id="s3")
    assert result.status == "failed" and len(provider.requests) == 3
    (terminal,) = of(store, "s3", RunTerminal)
    assert terminal.reason == "failed" and terminal.total_tokens == _usage_tokens(store, "s3") > 0
    assert len(of(store, "s3", Rollbacked)) == 3 and of(store, "s3", ToolRequested) == []
    again = kernel(store, ScriptedProvider([reply("never asked")])).resume_sync("s3")
    assert again.status == "failed"  # terminal: a resume asks nothing
    assert runner.invoke(app, ["--db", str(db_path), "verify", "s3"]).exit_code == 0


AGENT = """
from flightlog.kernel import Agent, tool
from flightlog.kernel import tool
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply


@tool(effect="read_only")
def echo(text: str) -> str:
    \"\"\"Echo the text back.\"\"\"
    return text


agent = Agent(
    name="surrogate",
    route=[ScriptedProvider([calls(call("echo", '{"text": "a \\\\ud800 b"}', id="c1")), reply("done")])],
    tools=[echo],
)
"""


def test_the_cli_run_of_a_surrogate_argument_finishes_and_verifies(tmp_path: Path, db_path: Path) -> None:
    spec = tmp_path / "surrogate_agent.py"
    spec.write_text(AGENT)
    db = ["--db", str(db_path)]
    ran = runner.invoke(app, [*db, "run", f"{spec}:agent", "--goal", "g", "--session", "s4", "--json"])
    assert ran.exit_code == 0, ran.output
    assert json.loads(ran.stdout)["status"] == "completed"
    shown = runner.invoke(app, [*db, "show", "s4"])
    assert shown.exit_code == 0 and "arguments cannot be recorded" in shown.output
    assert runner.invoke(app, [*db, "verify", "s4"]).exit_code == 0


@tool(effect="read_only")
def half_emoji(fail: bool = False) -> str:
    """Return (or fail with) text holding a lone surrogate, as a tool decoding bytes badly may."""
    if fail:
        raise RuntimeError("cannot read \udc80 here")
    return "before \ud83d after"


def test_a_tool_output_with_a_lone_surrogate_is_kept_as_escape_text(store: SqliteStore) -> None:
    provider = ScriptedProvider(
        [calls(call("half_emoji", {}, id="h1"), call("half_emoji", {"fail": True}, id="h2")), reply("done")]
    )
    result = kernel(store, provider, tools=[half_emoji]).run_sync("task", session_id="s5")
    assert result.status == "completed"
    (completed,) = of(store, "s5", ToolCompleted)
    ok, failed = completed.results
    assert (ok.output, ok.is_error) == ("before \\ud83d after", False)  # six characters of escape text
    assert failed.is_error and failed.output == "RuntimeError: cannot read \\udc80 here"
