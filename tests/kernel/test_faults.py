"""Faults: retries with backoff, failover, timeouts, malformed replies, fatal tool errors, fencing, signals."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from flightlog.events import (
    CheckpointTaken,
    Custom,
    LlmCompleted,
    OperationCancelled,
    Resumed,
    Rollbacked,
    RollbackReason,
    RunTerminal,
    ToolCompleted,
)
from flightlog.kernel import Agent, FatalToolError, Kernel, Policy, Rule, tool
from flightlog.kernel.abort import abort
from flightlog.kernel.requests import check_session
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.messages import Message, ToolCall
from flightlog.narration import narrate
from flightlog.providers.base import ModelRequest, ModelResponse, ProviderError
from flightlog.recorder import verify_session
from flightlog.sessions import replay_session
from flightlog.store import SqliteStore

from .helpers import Sleeps, agent, customs, echo, events, kinds, of


def _kernel(
    store: SqliteStore, *route: ScriptedProvider, sleeps: Sleeps | None = None, **kw: object
) -> Kernel:
    fields = {"tools": [echo], "backoff_base_s": 0.5, "backoff_max_s": 10.0, **kw}
    return Kernel(store, Agent(name="f", route=list(route), **fields), sleep=sleeps or Sleeps())  # type: ignore[arg-type]


def test_retryable_errors_back_off_exponentially_honouring_retry_after_capped(store: SqliteStore) -> None:
    sleeps = Sleeps()
    provider = ScriptedProvider(
        [
            ProviderError("429 slow down", retryable=True, retry_after_s=2.0),
            ProviderError("503", retryable=True),
            reply("finally"),
        ],
        by_turn=False,
    )
    result = _kernel(store, provider, sleeps=sleeps).run_sync("go")
    sid = result.session_id
    assert result.status == "completed" and sleeps.delays == [2.0, 1.0]
    assert kinds(store, sid)[3:] == [
        "checkpoint_taken",
        "custom:prompt_program_compiled",
        "custom:prompt_program_invoked",
        "rollbacked",
        "custom:provider_retry",
        "checkpoint_taken",
        "custom:prompt_program_invoked",
        "rollbacked",
        "custom:provider_retry",
        "checkpoint_taken",
        "custom:prompt_program_invoked",
        "llm_completed",
        "custom:model_usage",
        "run_terminal",
        "custom:session_sealed",  # the default notary (the user's log key) seals a finished run
    ]
    assert of(store, sid, Rollbacked) == [
        Rollbacked(
            turn=1, checkpoint_history_len=1, reason=RollbackReason.ProviderFailure(error="429 slow down")
        ),
        Rollbacked(turn=1, checkpoint_history_len=1, reason=RollbackReason.ProviderFailure(error="503")),
    ]
    assert customs(store, sid, "provider_retry") == [
        {
            "turn": 1,
            "model": "scripted-model",
            "route_position": 0,
            "attempt": 1,
            "max_retries": 2,
            "delay_s": 2.0,
            "retry_after_s": 2.0,
            "error": "429 slow down",
        },
        {
            "turn": 1,
            "model": "scripted-model",
            "route_position": 0,
            "attempt": 2,
            "max_retries": 2,
            "delay_s": 1.0,
            "error": "503",
        },
    ]
    assert [c.turn for c in of(store, sid, CheckpointTaken)] == [1, 1, 1]
    assert result.turns == 1
    # no note after a provider failure, as upstream (kernel.activation.TIMEOUT_NOTE): the same request again
    assert provider.requests[2].messages == provider.requests[1].messages == provider.requests[0].messages
    assert customs(store, sid, "kernel_note") == []
    # show's lines give each retry's number out of the agent's max_retries, its delay and why
    lines = [
        narrate(e) for e in events(store, sid) if isinstance(e, Custom) and e.custom_kind == "provider_retry"
    ]
    assert lines == ["turn 1: retry 1/2 after 2 s (429 slow down)", "turn 1: retry 2/2 after 1 s (503)"]


def test_retry_after_is_capped(store: SqliteStore) -> None:
    sleeps = Sleeps()
    provider = ScriptedProvider(
        [ProviderError("429", retryable=True, retry_after_s=3600), reply("ok")], by_turn=False
    )
    _kernel(store, provider, sleeps=sleeps).run_sync("go")
    assert sleeps.delays == [10.0]


def test_exhausted_retries_fail_over_to_the_next_route_position_and_stay_there(store: SqliteStore) -> None:
    sleeps = Sleeps()
    primary = ScriptedProvider([ProviderError("overloaded", retryable=True)] * 3, model="big", by_turn=False)
    fallback = ScriptedProvider(
        [calls(call("echo", {"text": "a"}, id="c1")), reply("done")], model="small", by_turn=False
    )
    result = _kernel(store, primary, fallback, sleeps=sleeps).run_sync("go")
    sid = result.session_id
    assert result.status == "completed" and len(primary.requests) == 3 and len(fallback.requests) == 2
    assert sleeps.delays == [0.5, 1.0]
    assert customs(store, sid, "route_failover") == [
        {
            "from_model": "big",
            "to_model": "small",
            "cause": "overloaded",
            "from_position": 0,
            "to_position": 1,
        }
    ]
    assert [u["route_position"] for u in customs(store, sid, "model_usage")] == [1, 1]
    assert [r.reason for r in of(store, sid, Rollbacked)] == [
        RollbackReason.ProviderFailure(error="overloaded")
    ] * 3
    assert fallback.requests[0].messages == primary.requests[0].messages  # no note after a provider failure


def test_non_retryable_errors_and_adapter_bugs_fail_over_at_once(store: SqliteStore) -> None:
    sleeps = Sleeps()
    first = ScriptedProvider([ProviderError("401 bad key", retryable=False)], model="a", by_turn=False)
    second = ScriptedProvider([RuntimeError("adapter bug")], model="b", by_turn=False)
    third = ScriptedProvider([reply("ok")], model="c", by_turn=False)
    result = _kernel(store, first, second, third, sleeps=sleeps).run_sync("go")
    assert result.status == "completed" and sleeps.delays == []
    causes = [f["cause"] for f in customs(store, result.session_id, "route_failover")]
    assert causes == ["401 bad key", "RuntimeError: adapter bug"]


def test_an_exhausted_route_fails_the_run(store: SqliteStore) -> None:
    provider = ScriptedProvider([ProviderError("down", retryable=False)], by_turn=False)
    result = _kernel(store, provider).run_sync("go")
    assert (result.status, result.detail) == ("failed", "provider_failure: down")
    assert of(store, result.session_id, RunTerminal) == [
        RunTerminal(reason="failed", turns_used=1, total_tokens=0)
    ]
    assert store.get_session(result.session_id).status == "failed"


async def _hang(request: ModelRequest) -> ModelResponse:
    await asyncio.Event().wait()  # never returns: only the timeout/cancellation ends it
    raise AssertionError("not reached")


TIMEOUT_NOTE = "The previous step timed out. Please try a faster approach."
"""Upstream's note for a ``Timeout`` rollback (deepstrike ``scheduler/rollback.rs`` ``build_rollback_note``)."""


def _told_of_the_timeout(request: ModelRequest) -> ModelResponse:
    """The turn taken again after the timeout: the user's message, then the kernel's note."""
    texts = [(m.role, m.text_content()) for m in request.messages]
    assert texts == [("user", "go"), ("user", TIMEOUT_NOTE)], texts
    return reply("fast now")


def _timeout_check(store: SqliteStore, sid: str) -> None:
    """The note is on the ledger, replayed, rebuilt by ``replay --check`` and narrated."""
    assert customs(store, sid, "kernel_note") == [{"turn": 1, "text": TIMEOUT_NOTE}]
    assert [m.text_content() for m in replay_session(store, sid)][:2] == ["go", TIMEOUT_NOTE]
    assert verify_session(store, sid).ok
    check = check_session(store, sid)
    assert check.ok, check
    assert "turn 1: kernel told the model: " + TIMEOUT_NOTE in [narrate(e) for e in events(store, sid)]


def test_a_model_call_timeout_rolls_back_and_retries_telling_the_model(store: SqliteStore) -> None:
    provider = ScriptedProvider([_hang, _told_of_the_timeout], by_turn=False)
    result = _kernel(store, provider, model_timeout_s=0.05).run_sync("go")
    sid = result.session_id
    assert (result.status, result.final_message) == ("completed", "fast now")
    (rollback,) = of(store, sid, Rollbacked)
    assert rollback == Rollbacked(turn=1, checkpoint_history_len=1, reason=RollbackReason.Timeout())
    assert customs(store, sid, "provider_retry")[0]["error"] == "model call timed out after 0.05s"
    assert kinds(store, sid)[6:9] == ["rollbacked", "custom:provider_retry", "custom:kernel_note"]
    _timeout_check(store, sid)


def test_a_timed_out_turn_failed_over_tells_the_next_model(store: SqliteStore) -> None:
    slow = ScriptedProvider([_hang], model="slow", by_turn=False)
    quick = ScriptedProvider([_told_of_the_timeout], model="quick", by_turn=False)
    result = _kernel(store, slow, quick, model_timeout_s=0.05, max_retries=0).run_sync("go")
    sid = result.session_id
    assert (result.status, result.final_message) == ("completed", "fast now")
    assert [f["to_model"] for f in customs(store, sid, "route_failover")] == ["quick"]
    _timeout_check(store, sid)


def test_a_timed_out_call_that_fails_the_run_tells_no_one(store: SqliteStore) -> None:
    provider = ScriptedProvider([_hang], by_turn=False)
    result = _kernel(store, provider, model_timeout_s=0.05, max_retries=0).run_sync("go")
    assert result.status == "failed"
    assert customs(store, result.session_id, "kernel_note") == []  # no retry: no one to tell


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        (reply("x", protocol="openai.chat"), "provider_replay protocol 'openai.chat' is not the provider's"),
        (ModelResponse(message=Message.text("user", "hi"), provider_replay=None), "role 'user'"),
        (
            ModelResponse(
                message=Message(role="assistant", tool_calls=[ToolCall(id="d", name="echo")] * 2),
                provider_replay=None,
            ),
            "tool call ids must be present and unique",
        ),
    ],
)
def test_malformed_replies_roll_back_and_retry(store: SqliteStore, bad: ModelResponse, why: str) -> None:
    provider = ScriptedProvider([bad, reply("good")], by_turn=False)
    result = _kernel(store, provider).run_sync("go")
    assert result.status == "completed"
    (rollback,) = of(store, result.session_id, Rollbacked)
    assert rollback.reason is not None and rollback.reason.kind == "malformed_replay"
    assert why in rollback.reason.reason  # type: ignore[union-attr]
    assert len(of(store, result.session_id, LlmCompleted)) == 1  # the malformed reply is never recorded


@tool(effect="read_only")
def corrupt(text: str) -> str:
    """Finds the workspace corrupt."""
    raise FatalToolError(f"workspace corrupt at {text}")


ran: list[str] = []


@tool(effect="idempotent")
def after(text: str) -> str:
    """Would run after the fatal call."""
    ran.append(text)
    return text


def _fatal_script() -> list[object]:
    return [
        calls(call("echo", {"text": "a"}, id="t1")),
        calls(call("corrupt", {"text": "x"}, id="bad"), call("after", {"text": "never"}, id="n")),
        calls(call("echo", {"text": "b"}, id="t3")),
        reply("recovered"),
    ]


def test_a_fatal_tool_error_rolls_the_turn_back_and_retries_it(store: SqliteStore) -> None:
    ran.clear()
    provider = ScriptedProvider(_fatal_script(), by_turn=False)  # type: ignore[arg-type]
    result = _kernel(store, provider, tools=[echo, corrupt, after]).run_sync("go")
    sid = result.session_id
    assert result.status == "completed" and ran == []
    (rollback,) = of(store, sid, Rollbacked)
    reason = RollbackReason.FatalToolError(tool_name="corrupt", error="workspace corrupt at x")
    assert rollback == Rollbacked(turn=2, checkpoint_history_len=3, reason=reason)
    assert [c.turn for c in of(store, sid, CheckpointTaken)] == [1, 2, 2, 3]
    completed = of(store, sid, ToolCompleted)
    assert [(t.turn, [r.call_id for r in t.results]) for t in completed] == [(1, ["t1"]), (2, ["t3"])]
    history = replay_session(store, sid)
    assert not any(c.id == "bad" for m in history for c in m.tool_calls)  # rolled back out of the history
    # the retry starts from the checkpoint, then the kernel's note says why (upstream's wording)
    note = "The previous step failed (`corrupt`: workspace corrupt at x). Please try a different approach."
    assert provider.requests[2].messages == [*provider.requests[1].messages, Message.text("user", note)]
    assert result.turns == 3


def test_a_fatal_tool_error_fails_the_run_when_asked_to(store: SqliteStore) -> None:
    provider = ScriptedProvider(_fatal_script(), by_turn=False)  # type: ignore[arg-type]
    k = _kernel(store, provider, tools=[echo, corrupt, after], on_fatal_tool_error="fail")
    result = k.run_sync("go")
    assert (result.status, result.detail) == ("failed", "fatal_tool_error: workspace corrupt at x")
    assert kinds(store, result.session_id)[-3:] == ["rollbacked", "run_terminal", "custom:session_sealed"]


def test_fatal_retries_are_bounded(store: SqliteStore) -> None:
    provider = ScriptedProvider([calls(call("corrupt", {"text": "x"}, id="bad"))], by_turn=True)
    result = _kernel(store, provider, tools=[corrupt], max_retries=1).run_sync("go")
    assert result.status == "failed" and len(of(store, result.session_id, Rollbacked)) == 2


def test_abort_fences_the_running_writer_which_stops_cleanly(db_path: Path, store: SqliteStore) -> None:
    holder: dict[str, str] = {}

    @tool(effect="read_only")
    def get_aborted(text: str) -> str:
        """Meanwhile, an operator runs `flightlog abort` in another process."""
        with SqliteStore(db_path) as elsewhere:
            assert abort(elsewhere, holder["sid"])
        return text

    provider = ScriptedProvider(
        [calls(call("get_aborted", {"text": "x"}, id="g")), reply("done")], by_turn=True
    )
    k = Kernel(
        store,
        agent(provider, tools=[get_aborted]),
        on_event=lambda row, e: holder.setdefault("sid", row.session_id),
    )
    result = k.run_sync("go")
    sid = result.session_id
    assert (
        result.status == "cancelled" and result.detail is not None and result.detail.startswith("fenced off")
    )
    assert (
        kinds(store, sid)[-1] == "operation_cancelled"
    )  # the abort's record; the fenced writer wrote nothing
    (cancelled,) = of(store, sid, OperationCancelled)
    assert (cancelled.reason.value, cancelled.pending_call_ids) == ("user", ["g"])
    assert cancelled.operation_id.endswith(":abort")
    assert store.get_session(sid).status == "cancelled"
    assert verify_session(store, sid).ok
    holder["sid"] = "elsewhere"  # the resumed run is not aborted again
    with SqliteStore(db_path) as later:
        later_provider = ScriptedProvider(
            [calls(call("echo", {"text": "x"}, id="g")), reply("done")], by_turn=True
        )
        resumed = Kernel(later, agent(later_provider)).resume_sync(sid)
    assert resumed.status == "completed"


def test_abort_records_who_asked_beside_its_cancellation(store: SqliteStore) -> None:
    gate = Policy(rules=(Rule("ask", tool="echo", reason="ask first"),))
    provider = ScriptedProvider([calls(call("echo", {"text": "x"}, id="g")), reply("done")], by_turn=True)
    sid = Kernel(store, agent(provider, policy=gate)).run_sync("go").session_id
    assert store.get_session(sid).status == "suspended"
    assert abort(store, sid, requested_by="ada") is True
    ledger = events(store, sid)
    cancelled, asked = ledger[-2:]
    assert isinstance(cancelled, OperationCancelled) and cancelled.operation_id.endswith(":abort")
    assert asked == Custom(
        custom_kind="abort_requested",
        payload={"turn": cancelled.turn, "operation_id": cancelled.operation_id, "requested_by": "ada"},
    )
    assert store.get_session(sid).status == "cancelled" and verify_session(store, sid).ok


def test_abort_of_an_ended_run_does_nothing(store: SqliteStore) -> None:
    sid = _kernel(store, ScriptedProvider([reply("x")], by_turn=False)).run_sync("go").session_id
    n = len(events(store, sid))
    assert abort(store, sid) is False and len(events(store, sid)) == n


@pytest.mark.own_sigint
@pytest.mark.parametrize(("sig", "reason"), [(signal.SIGINT, "user"), (signal.SIGTERM, "host_shutdown")])
def test_signals_cancel_cleanly_and_the_run_stays_resumable(
    store: SqliteStore, sig: int, reason: str
) -> None:
    @tool(effect="read_only")
    async def interrupted(text: str) -> str:
        """The operator presses Ctrl-C (or the host shuts down) while this runs."""
        os.kill(os.getpid(), sig)
        await asyncio.Event().wait()  # never returns: only the timeout/cancellation ends it
        return text

    script = [
        calls(call("echo", {"text": "a"}, id="e"), call("interrupted", {"text": "b"}, id="i")),
        reply("ok"),
    ]
    provider = ScriptedProvider(script, by_turn=True)  # type: ignore[arg-type]
    result = Kernel(store, agent(provider, tools=[echo, interrupted])).run_sync("go")
    sid = result.session_id
    assert (result.status, result.pending_calls) == ("cancelled", ("i",))
    assert result.detail == f"cancelled ({reason})"
    (cancelled,) = of(store, sid, OperationCancelled)
    assert (cancelled.turn, cancelled.reason.value, cancelled.pending_call_ids) == (1, reason, ["i"])
    assert cancelled.operation_id.endswith(":turn-1:tools")
    assert store.get_session(sid).status == "cancelled"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handlers restored

    @tool(effect="read_only", name="interrupted")
    def calm(text: str) -> str:
        """Not interrupted this time."""
        return text

    resumed = Kernel(store, agent(ScriptedProvider(script, by_turn=True), tools=[echo, calm])).resume_sync(
        sid
    )  # type: ignore[arg-type]
    assert resumed.status == "completed"
    assert of(store, sid, Resumed) == [Resumed(turn=1)]
    (completed,) = of(store, sid, ToolCompleted)
    assert [r.output for r in completed.results] == ["a", "b"]


def test_kernel_cancel_during_a_model_call(store: SqliteStore) -> None:
    box: dict[str, Kernel] = {}

    async def cancel_me(request: ModelRequest) -> ModelResponse:
        box["k"].cancel()
        await asyncio.Event().wait()  # never returns: only the timeout/cancellation ends it
        raise AssertionError("not reached")

    box["k"] = _kernel(store, ScriptedProvider([cancel_me], by_turn=False))
    result = box["k"].run_sync("go", handle_signals=False)
    (cancelled,) = of(store, result.session_id, OperationCancelled)
    assert (cancelled.reason.value, cancelled.pending_call_ids) == ("user", [])
    assert cancelled.operation_id.endswith(":turn-1:model")
    assert result.status == "cancelled"
