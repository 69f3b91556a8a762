"""Exactly-once side effects across crashes: intent before, completion after, in doubt in between."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flightlog.cli.kernel import kernel_app
from flightlog.errors import LedgerIntegrityError
from flightlog.events import (
    Custom,
    PermissionRequested,
    Resumed,
    SessionEvent,
    Suspended,
    ToolCompleted,
    ToolGated,
)
from flightlog.kernel import Kernel, Tool, approve, deny, pending, tool
from flightlog.kernel.effects import Effects, Outcome
from flightlog.kernel.execution import IN_DOUBT_WARNING
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.kernel.state import load_state
from flightlog.messages import ToolResult
from flightlog.recorder import Recorder, verify_session
from flightlog.runs.host import this_process
from flightlog.store import SqliteStore, StoredEvent

from .helpers import agent, customs, events, kinds, line_count, of


class Appender:
    """A side-effect tool appending a line to a file; can 'crash' (SystemExit) before or after writing."""

    def __init__(self, path: Path, *, reconcile: bool, async_reconcile: bool = False) -> None:
        self.path = path
        self.crash: str | None = None
        self.runs: list[str] = []
        self.reconciled: list[dict[str, Any]] = []
        check: Callable[[dict[str, Any]], Any] | None = None
        if reconcile:
            check = self._check_async if async_reconcile else self._check
        self.tool: Tool = tool(effect="side_effect", name="append_line", reconcile=check, in_thread=False)(
            self._append
        )

    def _append(self, line: str) -> str:
        """Append one line to the file."""
        self.runs.append(line)
        if self.crash == "before":
            self.crash = None
            raise SystemExit("killed before the write")
        with self.path.open("a") as fh:
            fh.write(line + "\n")
        if self.crash == "after":
            self.crash = None
            raise SystemExit("killed after the write")
        return f"appended {line}"

    def _check(self, intent: dict[str, Any]) -> str | None:
        self.reconciled.append(intent)
        line = intent["arguments"]["line"]
        return f"appended {line}" if line_count(self.path, line) else None

    async def _check_async(self, intent: dict[str, Any]) -> str | None:
        return self._check(intent)


def _kernel(store: SqliteStore, appender: Appender, **kw: Any) -> Kernel:
    provider = ScriptedProvider(
        [calls(call("append_line", {"line": "one"}, id="a1")), reply("done")], by_turn=True
    )
    return Kernel(store, agent(provider, tools=[appender.tool]), **kw)


def _crash_run(store: SqliteStore, appender: Appender, when: str, **kw: Any) -> str:
    appender.crash = when
    with pytest.raises(SystemExit):
        _kernel(store, appender, **kw).run_sync("append")
    (session,) = store.list_sessions()
    return session.session_id


@pytest.mark.parametrize("async_reconcile", [False, True])
def test_crash_after_the_write_reconciles_to_exactly_one_line(
    tmp_path: Path, store: SqliteStore, other_store: SqliteStore, async_reconcile: bool
) -> None:
    appender = Appender(tmp_path / "out.txt", reconcile=True, async_reconcile=async_reconcile)
    sid = _crash_run(store, appender, "after")
    key = f"{sid}:1:a1"
    assert [e.idempotency_key for e in other_store.pending_effects(sid)] == [key]  # in doubt
    assert customs(other_store, sid, "external_effect_intent") == [
        {
            "key": key,
            "intent_hash": other_store.get_effect(sid, key).intent_hash,  # type: ignore[union-attr]
            "intent": {"tool": "append_line", "arguments": {"line": "one"}},
            "holder": this_process().to_wire(),  # the process about to run the tool: this one
        }
    ]

    result = _kernel(other_store, appender).resume_sync(sid)  # another "process"
    assert result.status == "completed"
    assert line_count(appender.path, "one") == 1 and appender.runs == ["one"]
    assert appender.reconciled == [{"tool": "append_line", "arguments": {"line": "one"}}]
    assert customs(other_store, sid, "effect_reconciled") == [
        {"turn": 1, "call_id": "a1", "key": key, "outcome": "completed"}
    ]
    assert customs(other_store, sid, "external_effect_completed") == [
        {"key": key, "result": {"output": "appended one", "is_error": False}}
    ]
    (completed,) = of(other_store, sid, ToolCompleted)
    assert completed.results == [ToolResult(call_id="a1", output="appended one")]
    assert of(other_store, sid, Resumed) == [Resumed(turn=1)]
    assert other_store.pending_effects(sid) == []
    assert verify_session(other_store, sid).ok


def test_crash_before_the_write_reconciles_as_not_done_and_runs_it_once(
    tmp_path: Path, store: SqliteStore, other_store: SqliteStore
) -> None:
    appender = Appender(tmp_path / "out.txt", reconcile=True)
    sid = _crash_run(store, appender, "before")
    assert line_count(appender.path, "one") == 0
    result = _kernel(other_store, appender).resume_sync(sid)
    assert result.status == "completed"
    assert line_count(appender.path, "one") == 1 and appender.runs == ["one", "one"]
    assert [p["outcome"] for p in customs(other_store, sid, "effect_reconciled")] == ["not_done"]
    assert len(customs(other_store, sid, "external_effect_intent")) == 1  # the same intent, not a new one


def test_a_completed_effect_returns_its_recorded_result_without_running_again(
    tmp_path: Path, store: SqliteStore, other_store: SqliteStore
) -> None:
    appender = Appender(tmp_path / "out.txt", reconcile=False)

    def die_after_completion(row: StoredEvent, event: SessionEvent) -> None:
        if isinstance(event, Custom) and event.custom_kind == "external_effect_completed":
            raise SystemExit("killed after the completion was durable")

    sid = _crash_run(store, appender, "", on_event=die_after_completion)
    assert of(store, sid, ToolCompleted) == []
    result = _kernel(other_store, appender).resume_sync(sid)
    assert result.status == "completed" and appender.runs == ["one"]
    assert line_count(appender.path, "one") == 1
    assert customs(other_store, sid, "effect_reconciled") == []  # nothing was in doubt
    (completed,) = of(other_store, sid, ToolCompleted)
    assert completed.results == [ToolResult(call_id="a1", output="appended one")]


def test_without_reconcile_an_in_doubt_effect_suspends_for_a_human(
    tmp_path: Path, db_path: Path, store: SqliteStore, other_store: SqliteStore
) -> None:
    appender = Appender(tmp_path / "out.txt", reconcile=False)
    sid = _crash_run(store, appender, "after")
    result = _kernel(other_store, appender).resume_sync(sid)
    key = f"{sid}:1:a1"
    assert (result.status, result.pending_calls, result.detail) == ("suspended", ("a1",), "effect_in_doubt")
    assert appender.runs == ["one"]  # never silently re-run
    assert kinds(other_store, sid)[-4:] == ["resumed", "tool_gated", "permission_requested", "suspended"]
    (gated,) = of(other_store, sid, ToolGated)
    assert (gated.turn, gated.call_id, gated.tool) == (1, "a1", "append_line")
    assert gated.reason.startswith(f"effect_in_doubt: intent {key} recorded without completion")
    assert IN_DOUBT_WARNING in gated.reason  # it may still be finishing elsewhere: check before approving
    (asked,) = of(other_store, sid, PermissionRequested)
    assert (asked.turn, asked.tool, asked.arguments, asked.reason) == (
        1,
        "append_line",
        '{"line": "one"}',
        gated.reason,
    )
    assert of(other_store, sid, Suspended) == [
        Suspended(turn=1, reason="effect_in_doubt", pending_calls=["a1"])
    ]
    (waiting,) = pending(other_store)
    assert (waiting.call_id, waiting.kind, waiting.arguments) == ("a1", "effect_in_doubt", '{"line": "one"}')
    n = len(events(other_store, sid))
    assert _kernel(other_store, appender).resume_sync(sid).status == "suspended"  # still undecided
    assert len(events(other_store, sid)) == n
    # `pending` says it once (not the kind twice, not the intent's key: that is in --json), with the warning
    # `resume` gives, and what each decision does, every line within 100 columns
    listed = CliRunner().invoke(kernel_app, ["--db", str(db_path), "pending"])
    assert (listed.exit_code, listed.stderr) == (0, "")
    lines = listed.stdout.splitlines()
    assert lines[0] == f'{sid}  turn 1  a1  append_line({{"line": "one"}})'
    said = " ".join(line.strip() for line in lines[1:])
    assert said == (
        f"in doubt: the effect started, no completion is recorded; {IN_DOUBT_WARNING} "
        f"approve runs it again: flightlog approve {sid} a1 "
        f"deny marks it failed, never run again: flightlog deny {sid} a1"
    )
    assert max(map(len, lines)) <= 100 and "effect_in_doubt" not in listed.stdout and key not in listed.stdout


def test_deny_marks_an_in_doubt_effect_failed(
    tmp_path: Path, store: SqliteStore, other_store: SqliteStore
) -> None:
    appender = Appender(tmp_path / "out.txt", reconcile=False)
    sid = _crash_run(store, appender, "after")
    _kernel(other_store, appender).resume_sync(sid)
    deny(other_store, sid, "a1", reason="it already happened")
    assert customs(other_store, sid, "approval_decision")[-1]["gate"] == "effect_in_doubt"
    result = _kernel(other_store, appender).resume_sync(sid)
    assert result.status == "completed" and appender.runs == ["one"]
    assert line_count(appender.path, "one") == 1
    assert of(other_store, sid, Resumed)[-1] == Resumed(turn=1, denied=["a1"])
    (completed,) = of(other_store, sid, ToolCompleted)
    output = "effect in doubt and not run again (it already happened)"
    assert completed.results == [ToolResult(call_id="a1", output=output, is_error=True)]
    effect = other_store.get_effect(sid, f"{sid}:1:a1")
    assert (
        effect is not None
        and effect.status == "completed"
        and '"is_error":true' in (effect.result_json or "")
    )


def test_approve_runs_an_in_doubt_effect_again(
    tmp_path: Path, store: SqliteStore, other_store: SqliteStore
) -> None:
    appender = Appender(tmp_path / "out.txt", reconcile=False)
    sid = _crash_run(store, appender, "before")  # the human checks: the line is not there
    _kernel(other_store, appender).resume_sync(sid)
    approve(other_store, sid, "a1", responder="ops")
    result = _kernel(other_store, appender).resume_sync(sid)
    assert result.status == "completed"
    assert line_count(appender.path, "one") == 1 and appender.runs == ["one", "one"]
    assert of(other_store, sid, Resumed)[-1] == Resumed(turn=1, approved=["a1"])


def test_an_approved_re_run_that_dies_too_is_in_doubt_again(
    tmp_path: Path, store: SqliteStore, other_store: SqliteStore
) -> None:
    appender = Appender(tmp_path / "out.txt", reconcile=False)
    sid = _crash_run(store, appender, "before")
    _kernel(other_store, appender).resume_sync(sid)
    approve(other_store, sid, "a1")
    appender.crash = "after"  # the approved re-run writes the line, then the process dies again
    with pytest.raises(SystemExit):
        _kernel(other_store, appender).resume_sync(sid)
    result = _kernel(other_store, appender).resume_sync(sid)
    assert (result.status, result.detail) == ("suspended", "effect_in_doubt")  # the approval was used up
    assert appender.runs == ["one", "one"] and line_count(appender.path, "one") == 1
    deny(other_store, sid, "a1", reason="the line is there")
    assert _kernel(other_store, appender).resume_sync(sid).status == "completed"
    assert appender.runs == ["one", "one"] and line_count(appender.path, "one") == 1


def _intent_seq(store: SqliteStore, sid: str) -> int:
    (seq,) = [
        seq
        for seq, event in load_state(store, sid).events
        if isinstance(event, Custom) and event.custom_kind == "external_effect_intent"
    ]
    return seq


def _effects(store: SqliteStore, sid: str) -> Effects:
    """The exactly-once protocol as a resuming activation holds it (the ledger's fold, a writer)."""
    return Effects(Recorder.attach(store, sid), load_state(store, sid).effects)


ONE = {"tool": "append_line", "arguments": {"line": "one"}}


def _never_run(ran: list[str]) -> Callable[[], Awaitable[Outcome]]:
    async def run() -> Outcome:
        ran.append("ran")
        return Outcome("appended one")

    return run


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (
            "UPDATE external_effects SET status = 'completed', "
            """result_json = '{"is_error":false,"output":"FORGED"}'""",
            "its external_effects row says completed, with a result the ledger never recorded",
        ),
        ("DELETE FROM external_effects", "no external_effects row for its intent at seq"),
    ],
    ids=["forged_completion", "deleted_row"],
)
def test_an_effect_row_that_contradicts_the_ledger_decides_nothing(
    tmp_path: Path, db_path: Path, store: SqliteStore, other_store: SqliteStore, edit: str, said: str
) -> None:
    """What the table says is checked against the run's ledger before anything is decided from it (what a
    resume compared in full already, ``require_intact``; here the protocol itself): the forged result is
    never returned, the effect never runs again, no second intent is recorded."""
    appender = Appender(tmp_path / "out.txt", reconcile=True)
    sid = _crash_run(store, appender, "after")
    key, seq = f"{sid}:1:a1", _intent_seq(store, sid)
    with closing(sqlite3.connect(db_path)) as raw:
        raw.execute(edit)
        raw.commit()
    effects, ran = _effects(other_store, sid), []
    for decide in (effects.state, effects.recorded):
        with pytest.raises(LedgerIntegrityError) as refused:
            decide(key)
        assert (refused.value.session_id, refused.value.seq) == (sid, seq)
        assert f"effect_mismatch: effect {key}: {said}" in refused.value.reason
    with pytest.raises(LedgerIntegrityError):
        asyncio.run(effects.run_once(key, ONE, _never_run(ran)))
    assert ran == [] and line_count(appender.path, "one") == 1
    assert len(customs(other_store, sid, "external_effect_intent")) == 1
    assert "FORGED" not in str(customs(other_store, sid, "external_effect_completed"))


def test_a_row_the_ledger_does_not_record_is_refused_at_the_head(
    tmp_path: Path, store: SqliteStore, other_store: SqliteStore
) -> None:
    """A row written for a call that has not run yet (a forged completion waiting for it) is refused when
    the call comes: the ledger records no intent for its key."""
    appender = Appender(tmp_path / "out.txt", reconcile=True)
    sid = _crash_run(store, appender, "after")
    key = f"{sid}:2:b1"
    other_store.record_intent(sid, key, "00" * 32, "{}")
    other_store.complete_effect(sid, key, '{"is_error":false,"output":"FORGED"}')
    effects, ran = _effects(other_store, sid), []
    with pytest.raises(LedgerIntegrityError) as refused:
        asyncio.run(effects.run_once(key, ONE, _never_run(ran)))
    assert refused.value.seq == len(events(other_store, sid)) - 1  # no seq records the row: the head
    assert f"effect {key}: its external_effects row (status 'completed') has no external_effect_intent" in (
        refused.value.reason
    )
    assert ran == []


def test_a_call_whose_plan_differs_from_its_recorded_intent_is_not_run(
    tmp_path: Path, store: SqliteStore, other_store: SqliteStore
) -> None:
    appender = Appender(tmp_path / "out.txt", reconcile=False)
    sid = _crash_run(store, appender, "before")
    key, seq = f"{sid}:1:a1", _intent_seq(store, sid)
    effects, ran = _effects(other_store, sid), []
    other = {"tool": "append_line", "arguments": {"line": "two"}}
    with pytest.raises(LedgerIntegrityError) as refused:
        asyncio.run(effects.run_once(key, other, _never_run(ran)))
    assert (
        refused.value.seq == seq
        and f"effect {key}: the call's intent (from its plan)" in refused.value.reason
    )
    assert ran == []
    assert asyncio.run(effects.run_once(key, ONE, _never_run(ran))).output == "appended one"  # its own: runs
    assert ran == ["ran"]
