"""Signals: queued by any process, disposed at the next turn boundary exactly once, part of the next request."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from child_lines import read_line
from flightlog.cli import app
from flightlog.events import Custom, Rollbacked, RollbackReason, SignalDeliveryDisposed
from flightlog.kernel import EntropyWatch, Kernel, SignalRefused, approve, deny, send_signal
from flightlog.kernel.attention import disposition_for
from flightlog.kernel.budgets import Budgets
from flightlog.kernel.requests import check_session
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.messages import Message
from flightlog.providers.base import ModelRequest, ModelResponse
from flightlog.sessions import replay_session
from flightlog.store import SqliteStore
from flightlog.store.signals import QUEUE_SIZE, pending_signals, signal_record
from flightlog.testing.crashpoints import ENV

from .helpers import agent, customs, events, kernel, of

TIMEOUT_S = 120.0


def texts(request: ModelRequest) -> list[str]:
    return [m.text_content() for m in request.messages if m.role == "user"]


def test_a_signal_sent_during_the_last_turn_is_recorded_dropped_when_the_run_ends(store: SqliteStore) -> None:
    """Sent while the final model call is in flight, after the last boundary read the queue: the run ends in
    that same call, so no boundary delivers it. It is recorded ``dropped`` in the run's terminal transaction,
    never left queued with nothing in the ledger saying what became of it (found by an attack pass)."""

    def last_turn(request: ModelRequest) -> ModelResponse:
        send_signal(store, "s1", "message", "one more thing", sender="ops")
        return reply("done")

    result = kernel(store, ScriptedProvider([last_turn], by_turn=False)).run_sync("finish", session_id="s1")

    assert result.status == "completed"
    assert pending_signals(store, "s1") == []
    (disposed,) = of(store, "s1", SignalDeliveryDisposed)
    record = signal_record(store, disposed.signal_id)
    assert record is not None and (record.state, record.disposition) == ("disposed", "dropped")
    assert (disposed.disposition, disposed.attempt, disposed.queue_depth) == ("dropped", 1, 0)
    kinds = [type(e).__name__ for e in events(store, "s1")]
    assert kinds[-3:] == [
        "RunTerminal",
        "SignalDeliveryDisposed",
        "Custom",
    ]  # the end's transaction, then the seal
    assert customs(store, "s1", "signal_message") == []  # the model was never told
    assert check_session(store, "s1").ok


def _assert_dropped_never_told(store: SqliteStore, session_id: str, count: int) -> None:
    disposed = of(store, session_id, SignalDeliveryDisposed)
    assert [d.disposition for d in disposed] == ["dropped"] * count
    assert all(d.operation_id.endswith(":end:attention") for d in disposed)
    assert customs(store, session_id, "signal_message") == []  # nothing the model never saw
    assert not any("[SIGNAL]" in m.text_content() for m in replay_session(store, session_id))
    assert pending_signals(store, session_id) == [] and check_session(store, session_id).ok


def test_a_signal_is_not_delivered_when_the_turn_budget_ends_the_run_at_that_boundary(
    store: SqliteStore,
) -> None:
    """Turn budget 1, a steer sent during turn 1: the next boundary would dispose of it, but the budget ends
    the run there without a model call. Recorded ``dropped`` (the end-of-run rule), never ``interrupt`` plus a
    ``signal_message`` the model never saw (found by the runtime attack pass, ``signals_end.py D``)."""

    def turn_one(request: ModelRequest) -> ModelResponse:
        send_signal(store, "s1", "steer", "change plan")
        return calls(call("echo", {"text": "x"}, id="c1"))

    provider = ScriptedProvider([turn_one, reply("never")])
    result = kernel(store, provider, budgets=Budgets(turns=1)).run_sync("go", session_id="s1")

    assert result.status == "budget_exhausted" and len(provider.requests) == 1
    _assert_dropped_never_told(store, "s1", 1)


def test_signals_queued_at_an_entropy_gate_are_dropped_when_the_gate_is_denied(store: SqliteStore) -> None:
    """Signals queued while the run waits on an entropy ``ask`` gate; the gate is denied, so the resume ends
    the run (``no_progress``) before any model call: every one is recorded ``dropped`` (``signals_end.py A``).
    """
    provider = ScriptedProvider([calls(call("echo", {"text": "x"}, id="c1")), reply("never")])
    watched = kernel(store, provider, entropy_watch=EntropyWatch(threshold=0.0))
    assert watched.run_sync("go", session_id="s1").status == "suspended"
    send_signal(store, "s1", "message", "one")
    send_signal(store, "s1", "interrupt", "stop now")
    deny(store, "s1", "entropy:1")

    assert (
        kernel(store, provider, entropy_watch=EntropyWatch(threshold=0.0)).resume_sync("s1").status
        == "failed"
    )
    assert len(provider.requests) == 1
    _assert_dropped_never_told(store, "s1", 2)


def test_signals_queued_at_an_approved_entropy_gate_reach_the_next_request(store: SqliteStore) -> None:
    seen: list[list[str]] = []

    def turn_two(request: ModelRequest) -> ModelResponse:
        seen.append(texts(request))
        return reply("done")

    provider = ScriptedProvider([calls(call("echo", {"text": "x"}, id="c1")), turn_two])
    watched = kernel(store, provider, entropy_watch=EntropyWatch(threshold=0.0))
    assert watched.run_sync("go", session_id="s1").status == "suspended"
    send_signal(store, "s1", "message", "one")
    approve(store, "s1", "entropy:1")

    assert (
        kernel(store, provider, entropy_watch=EntropyWatch(threshold=0.0)).resume_sync("s1").status
        == "completed"
    )
    assert seen == [["go", "[SIGNAL] one"]]
    assert [d.disposition for d in of(store, "s1", SignalDeliveryDisposed)] == ["queue"]


def test_a_message_sent_mid_turn_is_delivered_at_the_next_boundary(store: SqliteStore) -> None:
    def turn_one(request: ModelRequest) -> ModelResponse:
        send_signal(store, "s1", "message", "also look in /etc", sender="ops")  # while the call is in flight
        return calls(call("echo", {"text": "looking"}, id="c1"))

    provider = ScriptedProvider([turn_one, reply("found it")], by_turn=False)
    result = kernel(store, provider).run_sync("find the file", session_id="s1")

    assert result.status == "completed"
    disposed = of(store, "s1", SignalDeliveryDisposed)
    assert len(disposed) == 1
    (record,) = [signal_record(store, disposed[0].signal_id)]
    assert record is not None and record.state == "disposed" and record.disposition == "queue"
    run_id = events(store, "s1")[0].run_id  # type: ignore[attr-defined]
    assert disposed[0] == SignalDeliveryDisposed(
        turn=2,
        operation_id=f"{run_id}:turn-2:attention",
        delivery_id=f"{record.signal_id}:1",
        attempt=1,
        signal_id=record.signal_id,
        disposition="queue",  # normal urgency while the turn ran (upstream UrgencyBasedPolicy)
        queue_depth=0,
    )
    assert customs(store, "s1", "signal_message") == [
        {
            "signal_id": record.signal_id,
            "kind": "message",
            "sender": "ops",
            "disposition": "queue",
            "text": "[SIGNAL] also look in /etc",
        }
    ]
    # Part of the next model request, and of replay; every request rebuilds from the ledger.
    assert texts(provider.requests[1])[-1] == "[SIGNAL] also look in /etc"
    assert "[SIGNAL] also look in /etc" not in texts(provider.requests[0])
    replayed = [m.text_content() for m in replay_session(store, "s1") if m.role == "user"]
    assert replayed[-1] == "[SIGNAL] also look in /etc"
    assert check_session(store, "s1").ok
    assert pending_signals(store, "s1") == []


def test_the_policy_is_upstreams_and_dedupe_ignores_a_repeat(store: SqliteStore) -> None:
    assert [disposition_for(u, "ready") for u in ("critical", "high", "normal", "low")] == [
        "run",
        "run",
        "run",
        "observe",
    ]
    assert [disposition_for(u, "running") for u in ("critical", "high", "normal", "low")] == [
        "interrupt_now",
        "interrupt",
        "queue",
        "observe",
    ]
    assert disposition_for("critical", "terminal") == "queue"

    def turn_one(request: ModelRequest) -> ModelResponse:
        send_signal(store, "s2", "steer", "use python", dedupe_key="k")
        send_signal(store, "s2", "steer", "use python (again)", dedupe_key="k")
        send_signal(store, "s2", "message", "fyi", urgency="low")
        return calls(call("echo", {"text": "x"}, id="c1"))

    provider = ScriptedProvider([turn_one, reply("ok")], by_turn=False)
    kernel(store, provider).run_sync("task", session_id="s2")
    disposed = of(store, "s2", SignalDeliveryDisposed)
    assert [(d.disposition, d.queue_depth) for d in disposed] == [
        ("interrupt", 2),
        ("ignore", 1),
        ("observe", 0),
    ]
    assert texts(provider.requests[1])[-2:] == ["[SIGNAL] new instructions: use python", "[SIGNAL] fyi"]


def test_an_interrupt_cuts_the_model_call_short_and_rolls_the_turn_back(store: SqliteStore) -> None:
    async def hang(request: ModelRequest) -> ModelResponse:
        send_signal(store, "s3", "interrupt", "stop and summarise")
        await asyncio.Event().wait()  # never answers: only the interrupt ends this call
        raise AssertionError("unreachable")

    provider = ScriptedProvider([hang, reply("summary: nothing done")], by_turn=False)
    k = Kernel(store, agent(provider), notary=None, heartbeat_s=None, signal_poll_s=0.01)
    result = k.run_sync("long task", session_id="s3")
    assert result.status == "completed" and result.final_message == "summary: nothing done"
    rollback = of(store, "s3", Rollbacked)
    assert rollback == [Rollbacked(turn=1, checkpoint_history_len=1, reason=RollbackReason.UserInterrupt())]
    disposed = of(store, "s3", SignalDeliveryDisposed)
    assert [(d.turn, d.disposition) for d in disposed] == [(1, "interrupt_now")]
    ledger = events(store, "s3")
    at = ledger.index(rollback[0])
    assert ledger[at + 1] == disposed[0] and isinstance(ledger[at + 2], Custom)  # one transaction, in order
    assert texts(provider.requests[1])[-1] == "[INTERRUPT] stop and summarise"
    assert check_session(store, "s3").ok


def test_a_failed_look_at_the_signal_queue_fails_the_run_not_reads_as_an_interrupt(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mid-call watcher's store error propagates (the model call cancelled); before, it was swallowed and
    recorded as a ``UserInterrupt`` rollback, so the run went on as if an operator had interrupted it."""
    from flightlog.errors import StoreError
    from flightlog.kernel import loop

    async def broken(store: object, session_id: str, every_s: float) -> None:
        raise StoreError("signal queue unreadable (test)")

    async def hang(request: ModelRequest) -> ModelResponse:
        await asyncio.Event().wait()  # never answers: only the watcher ends this call
        raise AssertionError("unreachable")

    monkeypatch.setattr(loop, "watch_interrupt", broken)
    provider = ScriptedProvider([hang, reply("unreachable")], by_turn=False)
    k = Kernel(store, agent(provider), notary=None, heartbeat_s=None, signal_poll_s=0.01)
    with pytest.raises(StoreError, match="signal queue unreadable"):
        k.run_sync("long task", session_id="s9")
    assert of(store, "s9", Rollbacked) == []


def test_a_full_queue_drops_and_a_finished_run_refuses(store: SqliteStore, db_path: Path) -> None:
    def turn_one(request: ModelRequest) -> ModelResponse:
        for i in range(QUEUE_SIZE + 1):
            send_signal(store, "s4", "message", f"m{i}")
        return calls(call("echo", {"text": "x"}, id="c1"))

    kernel(store, ScriptedProvider([turn_one, reply("ok")], by_turn=False)).run_sync("task", session_id="s4")
    disposed = of(store, "s4", SignalDeliveryDisposed)
    assert len(disposed) == QUEUE_SIZE + 1 and disposed[-1].disposition == "dropped"
    assert len(customs(store, "s4", "signal_message")) == QUEUE_SIZE

    with pytest.raises(SignalRefused, match="s4: signal refused: the run has finished"):
        send_signal(store, "s4", "message", "too late")
    result = CliRunner().invoke(app, ["--db", str(db_path), "signal", "s4", "--message", "too late"])
    assert result.exit_code == 1
    assert "s4" in result.stderr and "the run has finished (completed)" in result.stderr
    usage = CliRunner().invoke(app, ["--db", str(db_path), "signal", "s4", "--message", "a", "--steer", "b"])
    assert usage.exit_code == 2
    empty = CliRunner().invoke(app, ["--db", str(db_path), "signal", "s4", "--message", "  "])
    assert empty.exit_code == 2 and "--message" in empty.stderr  # bad input is a usage error, as elsewhere


# ─── another process, a SIGKILL ───────────────────────────────────────────────────────────

AGENT = textwrap.dedent(
    """
    import asyncio, sys
    from flightlog.kernel import Agent, Kernel, tool
    from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
    from flightlog.store import SqliteStore

    @tool(effect="read_only")
    def echo(text: str) -> str:
        \"\"\"Echo.\"\"\"
        return text

    async def turn_one(request):
        print("IN-CALL", flush=True)
        await asyncio.to_thread(sys.stdin.readline)  # the test says GO once its signal is queued
        return calls(call("echo", {"text": "x"}, id="c1"))

    def turn_two(request):
        users = [m.text_content() for m in request.messages if m.role == "user"]
        print("SAW " + repr(users[-1]), flush=True)
        return reply("done")

    db, sid, mode = sys.argv[1:4]
    provider = ScriptedProvider([turn_one, turn_two], by_turn=True)
    agent = Agent(name="signalled", route=[provider], tools=[echo])
    with SqliteStore(db) as store:
        k = Kernel(store, agent, notary=None, heartbeat_s=None)
        result = k.run_sync("task", session_id=sid) if mode == "run" else k.resume_sync(sid)
        print("STATUS " + result.status, flush=True)
    """
)


def _agent(tmp_path: Path, db: Path, mode: str, crash_at: str | None) -> subprocess.Popen[str]:
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    env = {k: v for k, v in os.environ.items() if k != ENV}
    if crash_at is not None:
        env[ENV] = crash_at
    return subprocess.Popen(
        [sys.executable, str(script), str(db), "s5", mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


@pytest.mark.parametrize("crash_at", [None, "signals.disposed"])
def test_a_signal_from_another_process_is_delivered_once_even_across_a_kill(
    tmp_path: Path, db_path: Path, crash_at: str | None
) -> None:
    proc = _agent(tmp_path, db_path, "run", crash_at)
    try:
        assert proc.stdout is not None and proc.stdin is not None
        # the run is mid-turn: its model call waits
        assert read_line(proc, "IN-CALL (the run waits in its model call)") == "IN-CALL\n"
        env = {**os.environ, "FLIGHTLOG_DB": str(db_path)}
        sent = subprocess.run(
            [sys.executable, "-m", "flightlog", "signal", "s5", "--message", "also /etc", "--json"],
            capture_output=True,
            text=True,
            env=env,
            timeout=TIMEOUT_S,
        )
        assert sent.returncode == 0, sent.stderr
        signal_id = json.loads(sent.stdout)["signal_id"]
        proc.stdin.write("GO\n")
        proc.stdin.flush()
        out, err = proc.communicate(timeout=TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if crash_at is None:
        assert proc.returncode == 0, err
        assert out.splitlines() == ["SAW '[SIGNAL] also /etc'", "STATUS completed"]
    else:
        assert proc.returncode == -signal.SIGKILL, err
        with SqliteStore(db_path) as store:  # killed before the commit: nothing disposed, still queued
            assert of(store, "s5", SignalDeliveryDisposed) == []
            assert [r.signal_id for r in pending_signals(store, "s5")] == [signal_id]
        again = _agent(tmp_path, db_path, "resume", None)
        out, err = again.communicate(timeout=TIMEOUT_S)
        assert again.returncode == 0, err
        assert out.splitlines() == ["SAW '[SIGNAL] also /etc'", "STATUS completed"]
    with SqliteStore(db_path) as store:
        disposed = of(store, "s5", SignalDeliveryDisposed)
        assert [(d.signal_id, d.disposition) for d in disposed] == [(signal_id, "queue")]
        assert disposed[0].attempt == (1 if crash_at is None else 2)  # the killed boundary read it once
        assert [p["text"] for p in customs(store, "s5", "signal_message")] == ["[SIGNAL] also /etc"]
        assert pending_signals(store, "s5") == []
        assert check_session(store, "s5").ok
        history = [m.text_content() for m in replay_session(store, "s5") if isinstance(m, Message)]
        assert history.count("[SIGNAL] also /etc") == 1


# ─── GovernanceDenied ─────────────────────────────────────────────────────────────────────


def test_a_denial_rolls_the_turn_back_when_the_policy_says_so(store: SqliteStore) -> None:
    from flightlog.kernel import Policy, Rule

    policy = Policy(rules=(Rule("deny", tool="add", reason="no arithmetic"),), on_deny="rollback")
    provider = ScriptedProvider(
        [
            calls(call("add", {"a": 1, "b": 2}, id="a1")),
            calls(call("echo", {"text": "three"}, id="e1")),
            reply("three"),
        ],
        by_turn=False,
    )
    result = kernel(store, provider, policy=policy).run_sync("add 1 and 2", session_id="g1")
    assert result.status == "completed" and result.final_message == "three"
    rollback = of(store, "g1", Rollbacked)
    assert rollback == [
        Rollbacked(
            turn=1,
            checkpoint_history_len=1,
            reason=RollbackReason.GovernanceDenied(tool_name="add", reason="no arithmetic"),
        )
    ]
    note = "Action `add` was not allowed (no arithmetic). Please choose a different approach."
    assert customs(store, "g1", "kernel_note") == [{"turn": 1, "text": note}]
    # The refused answer is gone from the retried turn's request; the note took its place.
    assert [m.role for m in provider.requests[1].messages] == ["user", "user"]
    assert texts(provider.requests[1]) == ["add 1 and 2", note]
    assert check_session(store, "g1").ok


def test_a_model_that_insists_gets_error_results_after_max_retries(store: SqliteStore) -> None:
    from flightlog.kernel import Policy, Rule

    policy = Policy(rules=(Rule("deny", tool="add"),), on_deny="rollback")
    script = [calls(call("add", {"a": 1, "b": 2}, id=f"a{i}")) for i in range(3)] + [reply("fine")]
    result = kernel(store, ScriptedProvider(script, by_turn=False), policy=policy, max_retries=2).run_sync(
        "add", session_id="g2"
    )
    assert result.status == "completed"
    assert len(of(store, "g2", Rollbacked)) == 2
    completed = [e for e in events(store, "g2") if e.kind == "tool_completed"]
    assert len(completed) == 1 and completed[0].results[0].is_error  # type: ignore[attr-defined]
