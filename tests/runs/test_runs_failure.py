"""A kernel run that failed says why in ``runs`` and ``runs --json``, after ``runs --rebuild``, through
``verify``'s projection check, and after the migration from fold rules 6: a provider's failure (its ledger's
rollback reason), a fatal tool error in a turn the kernel kept (its ``tool_completed`` result), a request too
large for the window (its ``context_budget_exceeded`` record)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import pytest
from typer.testing import CliRunner

from flightlog.cli import app as flightlog_app
from flightlog.events import Custom, Rollbacked
from flightlog.kernel import Agent, FatalToolError, Kernel, tool
from flightlog.kernel.context import ContextPolicy, ContextWindow
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.providers.base import ProviderError
from flightlog.runs import FOLD_VERSION, adapters, list_runs, projection_ready, rebuild_projection
from flightlog.sessions import iter_events
from flightlog.store import SqliteStore
from flightlog.store import sqlite as sqlite_backend

from .cli_app import make_app

ERROR = "Error code: 401 - invalid API key"
"""What the provider raised: the ledger's ``rollbacked.reason.error``."""
WHY = f"failed: provider_failure: {ERROR}"
"""The run's terminal detail (seed 002 ``TerminalSummary.detail``)."""

runner = CliRunner()


def fail_a_run(store: SqliteStore, *, heartbeat_s: float | None = 5.0) -> str:
    """A kernel run whose only provider refuses (not retryable, no other route position): it fails.
    ``heartbeat_s`` as ``Kernel`` takes it (None: no live record is written)."""
    provider = ScriptedProvider([ProviderError(ERROR, retryable=False)], by_turn=False)
    kernel = Kernel(store, Agent(name="f", route=[provider]), heartbeat_s=heartbeat_s)
    result = kernel.run_sync("go", handle_signals=False)
    assert (result.status, result.detail) == ("failed", f"provider_failure: {ERROR}")
    return result.session_id


def runs(db_path: Path, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(make_app(db_path), ["runs", *args])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def row_of(table: str, run_id: str) -> str:
    return next(line for line in table.splitlines() if line.startswith(run_id))


def detail_in_json(db_path: Path, run_id: str, *args: str) -> Any:
    code, out, _ = runs(db_path, "--json", *args)
    assert code == 0
    return next(item for item in json.loads(out) if item["run_id"] == run_id)["terminal"]


def test_runs_says_why_a_kernel_run_failed(db_path: Path) -> None:
    with SqliteStore(db_path) as store:
        sid = fail_a_run(store)
    code, out, err = runs(db_path)
    assert code == 0 and err == ""
    line = row_of(out, sid)
    assert line.split()[1:3] == ["terminal", "failed"] and line.endswith(WHY)
    terminal = detail_in_json(db_path, sid)  # the seed's wire form: outcome, ended_at_ms, detail
    assert (terminal["outcome"], terminal["detail"]) == ("failed", WHY) and set(terminal) == {
        "outcome",
        "ended_at_ms",
        "detail",
    }


def test_runs_tree_ends_a_failed_runs_line_with_its_detail_cut(db_path: Path) -> None:
    """``runs --tree`` printed no terminal detail (the table did): a failed run's line ends with it, cut to
    80 characters; a completed run's detail (``completed``) says nothing its outcome does not, and is left
    out, as on the dashboard's tree."""
    long_error = "Error code: 500 - " + "the upstream model server crashed " * 4
    with SqliteStore(db_path) as store:
        sid = fail_a_run(store)
        provider = ScriptedProvider([ProviderError(long_error, retryable=False)], by_turn=False)
        long_sid = (
            Kernel(store, Agent(name="g", route=[provider])).run_sync("go", handle_signals=False).session_id
        )
        done = Kernel(store, Agent(name="d", route=[ScriptedProvider([reply("ok")])])).run_sync("go")
    code, out, err = runs(db_path, "--tree")
    assert code == 0 and err == "", err
    assert row_of(out, sid).endswith(f"  detail: {WHY}")
    cut = f"failed: provider_failure: {long_error}"[:79] + "…"
    assert row_of(out, long_sid).endswith(f"  detail: {cut}")
    assert "detail" not in row_of(out, done.session_id) and "(completed)" in row_of(out, done.session_id)


def test_the_reason_survives_a_rebuild_and_verify_checks_the_row(db_path: Path) -> None:
    with SqliteStore(db_path) as store:
        sid = fail_a_run(store)
        stored = store.get_run_rows([sid])[sid]
        assert json.loads(stored.fold)["session"]["failure"] == f"provider_failure: {ERROR}"
    assert detail_in_json(db_path, sid, "--rebuild")["detail"] == WHY
    with SqliteStore(db_path) as store:
        assert store.get_run_rows([sid])[sid] == stored  # the rebuild folds the same row from the ledger
    result = runner.invoke(flightlog_app, ["--db", str(db_path), "verify", sid])
    assert result.exit_code == 0, result.stdout + result.stderr  # the runs row agrees with its ledger


@tool(effect="side_effect")
def pay(amount_cents: int) -> str:
    """Charge the customer; the ledger is gone for a negative amount.

    Args:
        amount_cents: Amount in cents.
    """
    if amount_cents < 0:
        raise FatalToolError("disk vanished")
    return f"charged {amount_cents}"


def fail_a_kept_turn(store: SqliteStore) -> str:
    """A run whose turn charged (a completed side effect) and then hit a fatal tool error: the kernel keeps
    the turn (no ``rollbacked``) and, with ``on_fatal_tool_error="fail"``, ends the run ``failed``."""
    model = ScriptedProvider(
        [calls(call("pay", {"amount_cents": 500}, id="c1"), call("pay", {"amount_cents": -1}, id="c2"))],
        by_turn=False,
    )
    agent = Agent("pay", [model], tools=[pay], on_fatal_tool_error="fail")
    result = Kernel(store, agent).run_sync("charge once", handle_signals=False)
    assert (result.status, result.detail) == ("failed", "fatal_tool_error: disk vanished")
    assert not any(isinstance(e, Rollbacked) for _row, e in iter_events(store, result.session_id))
    return result.session_id


def overflow_a_run(store: SqliteStore) -> str:
    """A run whose system prompt (~10,000 tokens) cannot fit its model's 900 usable input tokens: the kernel
    records ``context_budget_exceeded`` and ends the run ``context_overflow`` before any model call."""
    provider = ScriptedProvider([reply("never")], model="tiny", by_turn=False)
    agent = Agent(
        name="tiny",
        route=[provider],
        system_prompt="Follow the house rules. " * 1700,
        context=ContextPolicy(windows={"tiny": ContextWindow(tokens=1000, output_reserve=100)}, tools=False),
    )
    result = Kernel(store, agent).run_sync("go", handle_signals=False)
    assert result.status == "failed" and provider.requests == []
    return result.session_id


def _overflow_why(store: SqliteStore, sid: str) -> str:
    """The detail the ``context_budget_exceeded`` record gives (its sizes, read from the ledger)."""
    (payload,) = [
        e.payload
        for _row, e in iter_events(store, sid)
        if isinstance(e, Custom) and e.custom_kind == "context_budget_exceeded"
    ]
    return (
        f"context_overflow: the system prompt and tools need ~{payload['required_tokens']} tokens, "
        "tiny's window holds 900 input tokens"
    )


def says_why(db_path: Path, sid: str, why: str) -> None:
    """``runs``, ``runs --json`` and ``runs --rebuild`` give the failed run ``why``; verify agrees."""
    with SqliteStore(db_path) as store:
        stored = store.get_run_rows([sid])[sid]
    code, out, err = runs(db_path)
    assert code == 0 and err == ""
    line = row_of(out, sid)
    assert line.split()[1:3] == ["terminal", "failed"] and line.endswith(why)
    assert detail_in_json(db_path, sid) == {"outcome": "failed", "ended_at_ms": ANY, "detail": why}
    assert detail_in_json(db_path, sid, "--rebuild")["detail"] == why
    with SqliteStore(db_path) as store:
        assert store.get_run_rows([sid])[sid] == stored  # the rebuild folds the same row from the ledger
    result = runner.invoke(flightlog_app, ["--db", str(db_path), "verify", sid])
    assert result.exit_code == 0, result.stdout + result.stderr  # the runs row agrees with its ledger


def test_runs_says_why_a_kept_fatal_turn_failed_the_run(db_path: Path) -> None:
    with SqliteStore(db_path) as store:
        sid = fail_a_kept_turn(store)
    says_why(db_path, sid, "failed: fatal_tool_error: disk vanished")


def test_runs_says_a_context_overflow_failed_the_run_and_how_big_it_was(db_path: Path) -> None:
    with SqliteStore(db_path) as store:
        sid = overflow_a_run(store)
        why = _overflow_why(store, sid)
    says_why(db_path, sid, why)


def _fold_rules_6(fold: adapters.SessionFold, seq: int, at: int, event: Any) -> None:
    """``rollbacked`` as fold rules 6 folded it: the turn undone, its reason not kept."""
    fold.awaiting_model, fold.tools = False, []


def test_a_store_of_fold_rules_6_is_migrated_and_rebuilt_with_the_reason(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = next(i for i, (d, _) in enumerate(sqlite_backend.MIGRATIONS) if d.startswith("runs fold rules 7"))
    monkeypatch.setattr(sqlite_backend, "MIGRATIONS", sqlite_backend.MIGRATIONS[:mine])
    monkeypatch.setitem(adapters._HANDLERS, "rollbacked", _fold_rules_6)
    with SqliteStore(db_path) as store:  # a database, and its projection, made by fold rules 6
        sid = fail_a_run(store, heartbeat_s=None)  # no live record: that schema's table lacks host, owner
        assert store.run_projection_version() == 6 and projection_ready(store) is False
        assert "failure" not in json.loads(store.get_run_rows([sid])[sid].fold)["session"]
        assert json.loads(store.get_run_rows([sid])[sid].snapshot)["terminal"]["detail"] == "failed"
    monkeypatch.undo()
    with SqliteStore(db_path) as store:  # migrating: the projection is stale, the listings fold the ledgers
        assert store.run_projection_version() == 0 and not projection_ready(store)
        assert list_runs(store)[0].terminal.detail == WHY  # type: ignore[union-attr]
    code, out, err = runs(db_path)
    assert code == 0 and "runs projection missing or stale" in err and row_of(out, sid).endswith(WHY)
    with SqliteStore(db_path) as store:
        rebuild_projection(store)
        assert store.run_projection_version() == FOLD_VERSION == 7 and projection_ready(store)
        assert json.loads(store.get_run_rows([sid])[sid].snapshot)["terminal"]["detail"] == WHY
