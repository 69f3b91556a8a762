"""Every kind of event the kernel writes is checked field by field, from real runs.

Each scenario below is a real ``Kernel`` run on the scripted provider (a fake behind the provider seam:
everything from the kernel down, the SQLite store included, is the real code). The scenario's ledger is
read back from the store, decoded, and compared *whole* with the list of events the scenario expects:
every event, in order, every field (``Custom`` payloads included). Where a value is chosen at run time
(the run id, the session id, the signed-grant key) it is read once, checked for its form, and the rest of
the expectation is built from it.

:func:`test_the_scenarios_cover_every_kind_the_kernel_writes` then derives from the kernel's source (its
syntax tree, not a text search) every event class it constructs and every ``Custom`` kind it writes or has
the recorder write for it, and requires the expected ledgers to hold exactly that set: a new event in the
kernel without a scenario checking its fields fails here, and so does a scenario that stops covering one.
"""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import hashlib
import importlib
import pickle
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import rfc8785

from flightlog import events as ev
from flightlog.events import (
    AgentProcessChanged,
    BudgetExceeded,
    BudgetUsageReported,
    CancellationReason,
    CheckpointTaken,
    Custom,
    EntropySample,
    LlmCompleted,
    OperationCancelled,
    PermissionRequested,
    PermissionResolved,
    Resumed,
    Rollbacked,
    RollbackReason,
    RunStarted,
    RunTerminal,
    SessionEvent,
    Suspended,
    ToolArgumentRepaired,
    ToolCompleted,
    ToolDenied,
    ToolGated,
    ToolRequested,
)
from flightlog.integrity.grants import GrantPolicy, load_policy_signer, policy_digest, sign_grant
from flightlog.integrity.heads import HeadStore
from flightlog.integrity.keys import LogSigner
from flightlog.integrity.notary import Notary
from flightlog.kernel import Agent, Budgets, Kernel, Policy, Rule, approve, pending, records, tool
from flightlog.kernel.entropy import recompute_samples
from flightlog.kernel.errors import AgentSpecError, DecidedByItsRuntime, NotPending
from flightlog.kernel.requests import check_session
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.kernel.subagents import subagent
from flightlog.ledger import leaf_hash, merkle_root
from flightlog.messages import ToolResult
from flightlog.providers.base import ModelRequest, ModelResponse, ProviderError
from flightlog.recorder import verify_session
from flightlog.runs.host import ProcessId, host_id, this_process
from flightlog.store import SqliteStore

from .helpers import add, agent, echo, events

KERNEL_SRC = Path(records.__file__).parent
MODEL = "scripted-model"
ALL_DEGRADED = [  # the scripted provider declares no capability (seed 003 degradation strings)
    "strict_schema:local_validation",
    "parallel_tool_calls:sequential_execution",
    "streaming_tool_calls:turn_granular_progress",
    "prompt_caching:cache_cold_accounting",
    "structured_output:local_parse_and_validation",
]
NO_CAPABILITIES = {
    "strict_schema": False,
    "parallel_tool_calls": False,
    "streaming_tool_calls": False,
    "prompt_caching": False,
    "structured_output": False,
}


# ─── expectation builders (literal wire values, never the kernel's own builders) ──────────────


def evidence(position: int, model: str = MODEL) -> Custom:
    return Custom(
        custom_kind="provider_capability_evidence",
        payload={
            "model": model,
            "route_position": position,
            "source": "declared",
            "capabilities": NO_CAPABILITIES,
            "degradations": ALL_DEGRADED,
        },
    )


def limits(**wire: Any) -> Custom:
    return Custom(custom_kind="budget_limits", payload=wire)


def usage(turn: int, reserved: int, *, position: int = 0, model: str = MODEL) -> Custom:
    """The scripted provider's default usage: 10 input + 5 output tokens."""
    payload = {
        "turn": turn,
        "model": model,
        "protocol": "scripted",
        "route_position": position,
        "input_tokens": 10,
        "output_tokens": 5,
        "total_tokens": 15,
        "reserved_tokens": reserved,
    }
    return Custom(custom_kind="model_usage", payload=payload)


def decisions(turn: int, *plans: dict[str, Any], digest: str | None = None) -> Custom:
    payload: dict[str, Any] = {"turn": turn, "calls": list(plans)}
    if digest is not None:
        payload["policy_digest"] = digest
    return Custom(custom_kind="tool_decisions", payload=payload)


def allowed(turn: int) -> PermissionResolved:
    return PermissionResolved(turn=turn, approved=True, responder="policy_gate")


def completed(response: ModelResponse, turn: int) -> LlmCompleted:
    return LlmCompleted(turn=turn, message=response.message, provider_replay=response.provider_replay)


def intent(key: str, tool_name: str, arguments: dict[str, Any]) -> Custom:
    body = {"tool": tool_name, "arguments": arguments}
    digest = hashlib.sha256(rfc8785.dumps(body)).hexdigest()  # seed 003 content_hash over RFC 8785 bytes
    holder = this_process().to_wire()  # the scenarios run their tools in this process
    return Custom(
        custom_kind="external_effect_intent",
        payload={"key": key, "intent_hash": digest, "intent": body, "holder": holder},
    )


def effect_done(key: str, output: str) -> Custom:
    return Custom(
        custom_kind="external_effect_completed",
        payload={"key": key, "result": {"output": output, "is_error": False}},
    )


def run_id_of(ledger: list[SessionEvent]) -> str:
    started = ledger[0]
    assert isinstance(started, RunStarted) and re.fullmatch(r"[0-9a-f]{32}", started.run_id)
    return started.run_id


# ─── scenarios ────────────────────────────────────────────────────────────────────────────────


@dataclass
class Outcome:
    session_id: str
    expected: list[SessionEvent]


Scenario = Callable[[SqliteStore, Path], Outcome]

notes: list[str] = []


@tool(effect="side_effect")
def write_note(text: str) -> str:
    """Write a note somewhere that matters."""
    notes.append(text)
    return f"wrote {text!r}"


@pytest.fixture(autouse=True)
def _reset() -> None:
    notes.clear()


def repaired_and_invalid_calls(store: SqliteStore, tmp_path: Path) -> Outcome:
    """A turn with a repaired call, a plain one and an unknown tool; the agent spec is ledgered."""
    first = calls(
        call("add", '{"a": 1, "b": 2,}', id="c1"),
        call("echo", {"text": "hi"}, id="c2"),
        call("nope", {}, id="c3"),
    )
    last = reply("3, hi")
    k = Kernel(
        store,
        agent(
            ScriptedProvider([first, last], by_turn=False), budgets=Budgets(tokens=1000), system_prompt="sp"
        ),
        notary=None,  # unsigned: no seal here (signed_grant_and_seal has the default's seal)
    )
    spec = "tests.kernel.helpers:agent"
    result = k.run_sync("add", ["be exact"], session_id="cov-1", metadata={"agent_spec": spec})
    assert (result.status, result.final_message) == ("completed", "3, hi")
    rid = run_id_of(events(store, "cov-1"))
    unknown = "unknown tool 'nope' (tools: add, echo)"
    return Outcome(
        "cov-1",
        [
            RunStarted(
                run_id=rid, goal="add", criteria=["be exact"], agent_id="test-agent", system_prompt="sp"
            ),
            evidence(0),
            limits(tokens=1000),
            Custom(custom_kind="agent_spec", payload={"spec": spec}),
            CheckpointTaken(turn=1, history_len=1),
            completed(first, 1),
            usage(1, reserved=1000),
            ToolRequested(turn=1, calls=list(first.message.tool_calls)),
            ToolArgumentRepaired(
                turn=1,
                tool="add",
                original_arguments='{"a": 1, "b": 2,}',
                repaired_arguments='{"a": 1, "b": 2}',
            ),
            decisions(
                1,
                {
                    "call_id": "c1",
                    "tool": "add",
                    "effect": "read_only",
                    "decision": "allow",
                    "reason": "policy default (allow)",
                    "arguments": {"a": 1, "b": 2},
                },
                {
                    "call_id": "c2",
                    "tool": "echo",
                    "effect": "read_only",
                    "decision": "allow",
                    "reason": "policy default (allow)",
                    "arguments": {"text": "hi"},
                },
                {"call_id": "c3", "tool": "nope", "decision": "invalid", "reason": unknown, "arguments": {}},
            ),
            allowed(1),
            allowed(1),
            ToolCompleted(
                turn=1,
                results=[
                    ToolResult(call_id="c1", output="3"),
                    ToolResult(call_id="c2", output="hi"),
                    ToolResult(call_id="c3", output=unknown, is_error=True),
                ],
            ),
            CheckpointTaken(turn=2, history_len=5),  # goal, assistant, three tool results
            completed(last, 2),
            usage(2, reserved=1000 - 15),
            RunTerminal(reason="completed", turns_used=2, total_tokens=30),
        ],
    )


POLICY = Policy(
    rules=(
        Rule("deny", tool="echo", arg="text", path="secret", reason="no secrets"),
        Rule("ask", tool="write_*", reason="writes need a human"),
    )
)


def approval_then_side_effect(store: SqliteStore, tmp_path: Path) -> Outcome:
    """Deny, ask, suspend; a human approves from elsewhere; resume runs the side effect exactly once."""
    first = calls(
        call("echo", {"text": "look"}, id="r1"),
        call("write_note", {"text": "hello"}, id="w1"),
        call("echo", {"text": "secret"}, id="d1"),
    )
    last = reply("all done")

    def kernel() -> Kernel:
        provider = ScriptedProvider([first, last], by_turn=True)
        return Kernel(store, agent(provider, tools=[echo, write_note], policy=POLICY), notary=None)

    assert kernel().run_sync("write a note", session_id="cov-2").status == "suspended"
    approve(store, "cov-2", "w1", responder="alice")
    assert (kernel().resume_sync("cov-2").status, notes) == ("completed", ["hello"])
    rid = run_id_of(events(store, "cov-2"))
    key = "cov-2:1:w1"
    return Outcome(
        "cov-2",
        [
            RunStarted(run_id=rid, goal="write a note", agent_id="test-agent"),
            evidence(0),
            limits(),
            CheckpointTaken(turn=1, history_len=1),
            completed(first, 1),
            usage(1, reserved=4096),
            ToolRequested(turn=1, calls=list(first.message.tool_calls)),
            decisions(
                1,
                {
                    "call_id": "r1",
                    "tool": "echo",
                    "effect": "read_only",
                    "decision": "allow",
                    "reason": "policy default (allow)",
                    "arguments": {"text": "look"},
                },
                {
                    "call_id": "w1",
                    "tool": "write_note",
                    "effect": "side_effect",
                    "decision": "ask",
                    "reason": "writes need a human",
                    "rule": 1,
                    "arguments": {"text": "hello"},
                },
                {
                    "call_id": "d1",
                    "tool": "echo",
                    "effect": "read_only",
                    "decision": "deny",
                    "reason": "no secrets",
                    "rule": 0,
                    "arguments": {"text": "secret"},
                },
            ),
            allowed(1),
            PermissionResolved(turn=1, approved=False, responder="policy_gate"),
            ToolDenied(turn=1, call_id="d1", tool_name="echo", reason="no secrets"),
            ToolGated(turn=1, call_id="w1", tool="write_note", reason="writes need a human"),
            PermissionRequested(
                turn=1, tool="write_note", arguments='{"text": "hello"}', reason="writes need a human"
            ),
            Suspended(turn=1, reason="approval", pending_calls=["w1"]),
            # approve(), from another "process": seed 000 responder "user", the operator in the record
            PermissionResolved(turn=1, approved=True, responder="user"),
            Custom(
                custom_kind="approval_decision",
                payload={
                    "turn": 1,
                    "call_id": "w1",
                    "gate": "approval",
                    "approved": True,
                    "responder": "alice",
                },
            ),
            Resumed(turn=1, approved=["w1"], denied=[]),
            intent(key, "write_note", {"text": "hello"}),
            effect_done(key, "wrote 'hello'"),
            ToolCompleted(
                turn=1,
                results=[
                    ToolResult(call_id="r1", output="look"),
                    ToolResult(call_id="w1", output="wrote 'hello'"),
                    ToolResult(call_id="d1", output="denied by policy: no secrets", is_error=True),
                ],
            ),
            CheckpointTaken(turn=2, history_len=5),
            completed(last, 2),
            usage(2, reserved=4096),
            RunTerminal(reason="completed", turns_used=2, total_tokens=30),
        ],
    )


def retry_then_failover(store: SqliteStore, tmp_path: Path) -> Outcome:
    """A retryable error (retried after its Retry-After), a fatal one (fail over), then an answer."""
    primary = ScriptedProvider(
        [
            ProviderError("rate limited", retryable=True, retry_after_s=2.0),
            ProviderError("bad key", retryable=False),
        ],
        by_turn=False,
    )
    backup = ScriptedProvider([answer := reply("ok")], model="backup-model", by_turn=False)
    delays: list[float] = []

    async def sleep(delay: float) -> None:
        delays.append(delay)

    k = Kernel(
        store, Agent(name="test-agent", route=[primary, backup], tools=[add, echo]), sleep=sleep, notary=None
    )
    assert k.run_sync("go", session_id="cov-3").status == "completed"
    assert delays == [2.0]  # max(backoff 0.5 s, Retry-After 2 s)
    rid = run_id_of(events(store, "cov-3"))
    return Outcome(
        "cov-3",
        [
            RunStarted(run_id=rid, goal="go", agent_id="test-agent"),
            evidence(0),
            evidence(1, "backup-model"),
            limits(),
            CheckpointTaken(turn=1, history_len=1),
            Rollbacked(
                turn=1, checkpoint_history_len=1, reason=RollbackReason.ProviderFailure(error="rate limited")
            ),
            Custom(
                custom_kind="provider_retry",
                payload={
                    "turn": 1,
                    "model": MODEL,
                    "route_position": 0,
                    "attempt": 1,
                    "max_retries": 2,
                    "delay_s": 2.0,
                    "error": "rate limited",
                    "retry_after_s": 2.0,
                },
            ),
            CheckpointTaken(turn=1, history_len=1),  # each attempt starts from the checkpoint again
            Rollbacked(
                turn=1, checkpoint_history_len=1, reason=RollbackReason.ProviderFailure(error="bad key")
            ),
            Custom(
                custom_kind="route_failover",
                payload={
                    "from_model": MODEL,
                    "to_model": "backup-model",
                    "cause": "bad key",
                    "from_position": 0,
                    "to_position": 1,
                },
            ),
            CheckpointTaken(turn=1, history_len=1),
            completed(answer, 1),
            usage(1, reserved=4096, position=1, model="backup-model"),
            RunTerminal(reason="completed", turns_used=1, total_tokens=15),
        ],
    )


def turn_budget(store: SqliteStore, tmp_path: Path) -> Outcome:
    """One turn allowed: the second is refused before its model call."""
    first = calls(call("echo", {"text": "a"}, id="e1"))
    k = Kernel(
        store,
        agent(ScriptedProvider([first, reply("never")], by_turn=False), budgets=Budgets(turns=1)),
        notary=None,
    )
    result = k.run_sync("loop", session_id="cov-4")
    assert (result.status, result.detail) == ("budget_exhausted", "budget exhausted: turns")
    rid = run_id_of(events(store, "cov-4"))
    return Outcome(
        "cov-4",
        [
            RunStarted(run_id=rid, goal="loop", agent_id="test-agent"),
            evidence(0),
            limits(turns=1),
            CheckpointTaken(turn=1, history_len=1),
            completed(first, 1),
            usage(1, reserved=4096),
            ToolRequested(turn=1, calls=list(first.message.tool_calls)),
            decisions(
                1,
                {
                    "call_id": "e1",
                    "tool": "echo",
                    "effect": "read_only",
                    "decision": "allow",
                    "reason": "policy default (allow)",
                    "arguments": {"text": "a"},
                },
            ),
            allowed(1),
            ToolCompleted(turn=1, results=[ToolResult(call_id="e1", output="a")]),
            BudgetExceeded(turn=2, operation_id=f"{rid}:turn-2:model", budget="turns"),
            RunTerminal(reason="budget_exhausted", turns_used=1, total_tokens=15),
        ],
    )


def cancel_and_resume(store: SqliteStore, tmp_path: Path) -> Outcome:
    """Kernel.cancel during the model call; the run stays resumable and a resume finishes it."""
    box: dict[str, Kernel] = {}

    async def cancel_me(request: ModelRequest) -> ModelResponse:
        box["k"].cancel()
        await asyncio.Event().wait()  # until the cancellation arrives
        raise AssertionError("not reached")

    provider = ScriptedProvider([cancel_me, answer := reply("done")], by_turn=False)
    box["k"] = k = Kernel(store, agent(provider), notary=None)
    result = k.run_sync("stop me", session_id="cov-5", handle_signals=False)
    assert (result.status, result.detail) == ("cancelled", "cancelled (user)")
    assert k.resume_sync("cov-5").status == "completed"
    rid = run_id_of(events(store, "cov-5"))
    return Outcome(
        "cov-5",
        [
            RunStarted(run_id=rid, goal="stop me", agent_id="test-agent"),
            evidence(0),
            limits(),
            CheckpointTaken(turn=1, history_len=1),
            OperationCancelled(
                turn=1,
                operation_id=f"{rid}:turn-1:model",
                reason=CancellationReason.USER,
                pending_call_ids=[],
            ),
            Resumed(turn=1, approved=[], denied=[]),
            completed(answer, 1),
            usage(1, reserved=4096),
            RunTerminal(reason="completed", turns_used=1, total_tokens=15),
        ],
    )


def crash_then_reconcile(store: SqliteStore, tmp_path: Path) -> Outcome:
    """The process dies after the side effect, before its completion; the reconciler settles it."""
    out = tmp_path / "out.txt"
    crash = {"after": True}

    def check(intent: dict[str, Any]) -> str | None:
        line = intent["arguments"]["line"]
        return f"appended {line}" if out.exists() and line in out.read_text().splitlines() else None

    @tool(effect="side_effect", name="append_line", reconcile=check, in_thread=False)
    def append_line(line: str) -> str:
        """Append one line to the file."""
        with out.open("a") as fh:
            fh.write(line + "\n")
        if crash.pop("after", False):
            raise SystemExit("killed after the write")
        return f"appended {line}"

    first = calls(call("append_line", {"line": "one"}, id="a1"))
    last = reply("done")

    def kernel() -> Kernel:
        return Kernel(
            store, agent(ScriptedProvider([first, last], by_turn=True), tools=[append_line]), notary=None
        )

    with pytest.raises(SystemExit):
        kernel().run_sync("append", session_id="cov-6")
    assert kernel().resume_sync("cov-6").status == "completed"
    assert out.read_text() == "one\n"  # exactly once
    rid = run_id_of(events(store, "cov-6"))
    key = "cov-6:1:a1"
    return Outcome(
        "cov-6",
        [
            RunStarted(run_id=rid, goal="append", agent_id="test-agent"),
            evidence(0),
            limits(),
            CheckpointTaken(turn=1, history_len=1),
            completed(first, 1),
            usage(1, reserved=4096),
            ToolRequested(turn=1, calls=list(first.message.tool_calls)),
            decisions(
                1,
                {
                    "call_id": "a1",
                    "tool": "append_line",
                    "effect": "side_effect",
                    "decision": "allow",
                    "reason": "policy default (allow)",
                    "arguments": {"line": "one"},
                },
            ),
            allowed(1),
            intent(key, "append_line", {"line": "one"}),
            # -- the process died here; a fresh activation resumes --
            Resumed(turn=1, approved=[], denied=[]),
            Custom(
                custom_kind="effect_reconciled",
                payload={"turn": 1, "call_id": "a1", "key": key, "outcome": "completed"},
            ),
            effect_done(key, "appended one"),
            ToolCompleted(turn=1, results=[ToolResult(call_id="a1", output="appended one")]),
            CheckpointTaken(turn=2, history_len=3),
            completed(last, 2),
            usage(2, reserved=4096),
            RunTerminal(reason="completed", turns_used=2, total_tokens=30),
        ],
    )


def rerun_by_another_process(store: SqliteStore, tmp_path: Path) -> Outcome:
    """A process that recorded an intent died before its tool ran; the resume (another process: this one,
    the first named by a pid that no longer exists) finds it not done and runs it, naming itself first."""
    out = tmp_path / "out.txt"
    crash = {"before": True}
    gone = ProcessId(host_id(), 2**22 + 1, 1)  # above Linux's pid_max: no process of this host has it

    def check(intent: dict[str, Any]) -> str | None:
        line = intent["arguments"]["line"]
        return f"appended {line}" if out.exists() and line in out.read_text().splitlines() else None

    @tool(effect="side_effect", name="append_line", reconcile=check, in_thread=False)
    def append_line(line: str) -> str:
        """Append one line to the file."""
        if crash.pop("before", False):
            raise SystemExit("killed before the write")
        with out.open("a") as fh:
            fh.write(line + "\n")
        return f"appended {line}"

    first = calls(call("append_line", {"line": "one"}, id="a1"))
    last = reply("done")

    def kernel() -> Kernel:
        return Kernel(
            store, agent(ScriptedProvider([first, last], by_turn=True), tools=[append_line]), notary=None
        )

    with pytest.raises(SystemExit), mock.patch("flightlog.kernel.effects.this_process", return_value=gone):
        kernel().run_sync("append", session_id="cov-rerun")
    assert kernel().resume_sync("cov-rerun").status == "completed"
    assert out.read_text() == "one\n"  # exactly once
    rid = run_id_of(events(store, "cov-rerun"))
    key = "cov-rerun:1:a1"
    first_intent = intent(key, "append_line", {"line": "one"})
    assert isinstance(first_intent.payload, dict)
    return Outcome(
        "cov-rerun",
        [
            RunStarted(run_id=rid, goal="append", agent_id="test-agent"),
            evidence(0),
            limits(),
            CheckpointTaken(turn=1, history_len=1),
            completed(first, 1),
            usage(1, reserved=4096),
            ToolRequested(turn=1, calls=list(first.message.tool_calls)),
            decisions(
                1,
                {
                    "call_id": "a1",
                    "tool": "append_line",
                    "effect": "side_effect",
                    "decision": "allow",
                    "reason": "policy default (allow)",
                    "arguments": {"line": "one"},
                },
            ),
            allowed(1),
            Custom(
                custom_kind="external_effect_intent",
                payload={**first_intent.payload, "holder": gone.to_wire()},
            ),
            # -- the process died here; a fresh activation resumes --
            Resumed(turn=1, approved=[], denied=[]),
            Custom(
                custom_kind="effect_reconciled",
                payload={"turn": 1, "call_id": "a1", "key": key, "outcome": "not_done"},
            ),
            Custom(
                custom_kind="external_effect_holder", payload={"key": key, "holder": this_process().to_wire()}
            ),
            effect_done(key, "appended one"),
            ToolCompleted(turn=1, results=[ToolResult(call_id="a1", output="appended one")]),
            CheckpointTaken(turn=2, history_len=3),
            completed(last, 2),
            usage(2, reserved=4096),
            RunTerminal(reason="completed", turns_used=2, total_tokens=30),
        ],
    )


GRANT = GrantPolicy(policy_id="coverage", tools_allow=["echo"], approval_required=[], authority_epoch=0)


def signed_grant_and_seal(store: SqliteStore, tmp_path: Path) -> Outcome:
    """A run under a signed grant policy, with a notary: the grant is ledgered, the run sealed."""
    signer = load_policy_signer()
    notary = Notary.for_signer(LogSigner.generate("coverage.test/log"), HeadStore(tmp_path / "heads"))
    first = calls(call("echo", {"text": "x"}, id="e1"))
    last = reply("ok")
    k = Kernel(
        store,
        agent(ScriptedProvider([first, last], by_turn=False), grant=sign_grant(GRANT, signer)),
        notary=notary,
    )
    assert k.run_sync("granted", session_id="cov-7").status == "completed"
    ledger = events(store, "cov-7")
    rid = run_id_of(ledger)
    digest = policy_digest(GRANT)
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", digest)
    expected: list[SessionEvent] = [
        RunStarted(run_id=rid, goal="granted", agent_id="test-agent"),
        evidence(0),
        limits(),
        Custom(
            custom_kind="grant_policy",
            payload={
                "policy_id": "coverage",
                "policy": GRANT.model_dump(mode="json"),
                "signed": True,
                "digest": digest,
                "key": str(signer.verifier),
            },
        ),
        CheckpointTaken(turn=1, history_len=1),
        completed(first, 1),
        usage(1, reserved=4096),
        ToolRequested(turn=1, calls=list(first.message.tool_calls)),
        decisions(
            1,
            {
                "call_id": "e1",
                "tool": "echo",
                "effect": "read_only",
                "decision": "allow",
                "reason": "policy default (allow)",
                "arguments": {"text": "x"},
            },
            digest=digest,
        ),
        allowed(1),
        ToolCompleted(turn=1, results=[ToolResult(call_id="e1", output="x")]),
        CheckpointTaken(turn=2, history_len=3),
        completed(last, 2),
        usage(2, reserved=4096),
        RunTerminal(reason="completed", turns_used=2, total_tokens=30),
    ]
    # The seal covers every event before it (the request records included): its root is the RFC 9162
    # head over their stored bytes.
    rows = list(store.read_events("cov-7"))[:-1]
    assert rows[-1].kind == "run_terminal"
    root = merkle_root([leaf_hash(r.event_bytes) for r in rows]).hex()
    expected.append(
        Custom(custom_kind="session_sealed", payload={"size": len(rows), "root": root, "status": "completed"})
    )
    return Outcome("cov-7", expected)


def phased_run(store: SqliteStore, tmp_path: Path) -> Outcome:
    """A milestone blocks, passes and mounts the tool it unlocks; the tool runs; the last phase ends the run."""
    from flightlog.kernel.capabilities import ToolCapability
    from flightlog.kernel.milestones import Phase, Verdict

    script = [reply("hm"), reply("PLAN: add"), calls(call("add", {"a": 1, "b": 2}, id="a1")), reply("3")]
    provider = ScriptedProvider(script, by_turn=False)

    def judge(given: Any) -> Verdict:
        return Verdict((given.answer or "").startswith(("PLAN", "3")), ("no plan",))

    phases = [Phase("plan", judge=judge, unlocks=["add"]), Phase("done", judge=judge)]
    phased = agent(provider, tools=[], capabilities=[ToolCapability(add)], milestones=phases)
    assert (
        Kernel(store, phased, notary=None).run_sync("plan, then add", session_id="cov-8").status
        == "completed"
    )
    rid = run_id_of(events(store, "cov-8"))
    spec = {
        "name": "add",
        "description": add.description,
        "parameters": add.parameters,
        "effect": "read_only",
    }

    def verdict(turn: int, phase: str, passed: bool) -> Custom:
        payload = {
            "turn": turn,
            "phase_id": phase,
            "judge": "function",
            "passed": passed,
            "reasons": ["no plan"],
        }
        return Custom(custom_kind="milestone_verdict", payload=payload)

    return Outcome(
        "cov-8",
        [
            RunStarted(run_id=rid, goal="plan, then add", agent_id="test-agent"),
            evidence(0),
            limits(),
            CheckpointTaken(turn=1, history_len=1),
            completed(script[0], 1),
            usage(1, reserved=4096),
            verdict(1, "plan", False),
            ev.MilestoneBlocked(turn=1, phase_id="plan", reason="no plan"),
            CheckpointTaken(turn=2, history_len=3),
            completed(script[1], 2),
            usage(2, reserved=4096),
            verdict(2, "plan", True),
            Custom(
                custom_kind="capability_tools", payload={"turn": 2, "capability": "Tool:add", "tools": [spec]}
            ),
            ev.CapabilityChanged(
                turn=2,
                added=["Tool:add"],
                change_kind="mount",
                capability_id="add",
                mounted_by="milestone:plan",
                mount_reason="phase_advance",
            ),
            ev.MilestoneAdvanced(turn=2, phase_id="plan", capabilities_unlocked=["Tool:add"]),
            CheckpointTaken(turn=3, history_len=5),
            completed(script[2], 3),
            usage(3, reserved=4096),
            ToolRequested(turn=3, calls=list(script[2].message.tool_calls)),
            decisions(
                3,
                {
                    "call_id": "a1",
                    "tool": "add",
                    "effect": "read_only",
                    "decision": "allow",
                    "reason": "policy default (allow)",
                    "arguments": {"a": 1, "b": 2},
                },
            ),
            allowed(3),
            ToolCompleted(turn=3, results=[ToolResult(call_id="a1", output="3")]),
            CheckpointTaken(turn=4, history_len=7),
            completed(script[3], 4),
            usage(4, reserved=4096),
            verdict(4, "done", True),
            ev.MilestoneAdvanced(turn=4, phase_id="done", capabilities_unlocked=[]),
            RunTerminal(reason="completed", turns_used=4, total_tokens=60),
        ],
    )


def subagent_waits_for_approval(store: SqliteStore, tmp_path: Path) -> Outcome:
    """A parent delegates to a child that asks for approval: the parent records the child's states, waits
    (suspended), the human approves in the child, resuming the parent resumes the child; usage settles."""
    notes.clear()  # the coverage test runs every scenario in one test
    first = calls(call("helper", {"task": "write hello"}, id="s1"))
    last = reply("delegated")
    child_first = calls(call("write_note", {"text": "hello"}, id="w1"))

    def kernel() -> Kernel:
        child = agent(
            ScriptedProvider([child_first, reply("note written")], by_turn=True),
            tools=[write_note],
            policy=Policy(rules=(Rule("ask", tool="write_*", reason="writes need a human"),)),
        )
        child = dataclasses.replace(child, name="helper")
        helper = subagent(child, role="implement", budgets=Budgets(turns=5))
        parent = agent(
            ScriptedProvider([first, last], by_turn=True),
            tools=[write_note, helper],
            budgets=Budgets(tokens=1000),
            system_prompt="boss",
        )
        return Kernel(store, dataclasses.replace(parent, name="boss"), notary=None)

    assert kernel().run_sync("delegate", session_id="cov-9").status == "suspended"
    key = "cov-9:1:s1"
    child_id = hashlib.sha256(f"flightlog-subagent:{key}".encode()).hexdigest()[:32]
    assert store.get_session(child_id).parent_session_id == "cov-9"
    assert [p.call_id for p in pending(store)] == ["w1"] and notes == []
    approve(store, child_id, "w1")
    assert (kernel().resume_sync("cov-9").status, notes) == ("completed", ["hello"])
    assert verify_session(store, child_id).ok and store.get_session(child_id).status == "completed"
    rid = run_id_of(events(store, "cov-9"))
    reservation, operation = f"{rid}:turn-1:grant-s1", f"{rid}:turn-1:agent-s1"

    def process(state: str, termination: str | None = None) -> AgentProcessChanged:
        return AgentProcessChanged(
            turn=1,
            agent_id=child_id,
            parent_session_id="cov-9",
            role="implement",
            isolation="shared",
            context_inheritance="full",  # derived from the role (UPSTREAM.md section 7)
            state=state,
            permitted_capability_ids=["write_note"],
            result_termination=termination,
        )

    grant = {"reservation_id": reservation, "agent_id": child_id, "call_id": "s1", "turn": 1}
    return Outcome(
        "cov-9",
        [
            RunStarted(run_id=rid, goal="delegate", agent_id="boss", system_prompt="boss"),
            evidence(0),
            limits(tokens=1000),
            CheckpointTaken(turn=1, history_len=1),
            completed(first, 1),
            usage(1, reserved=1000),
            ToolRequested(turn=1, calls=list(first.message.tool_calls)),
            decisions(
                1,
                {
                    "call_id": "s1",
                    "tool": "helper",
                    "effect": "side_effect",
                    "decision": "allow",
                    "reason": "policy default (allow)",
                    "arguments": {"task": "write hello"},
                },
            ),
            allowed(1),
            intent(key, "helper", {"task": "write hello"}),
            # the grant: 1000 - 15 tokens left; the parent has no turn limit, so 5 turns as asked
            Custom(custom_kind="budget_grant", payload={**grant, "tokens": 985, "turns": 5}),
            process("spawned"),
            process("running"),
            process("waiting_input"),
            Suspended(turn=1, reason="sub_agent_await", pending_calls=["s1"]),
            Resumed(turn=1),
            Custom(
                custom_kind="effect_reconciled",
                payload={"turn": 1, "call_id": "s1", "key": key, "outcome": "not_done"},
            ),
            process("running"),
            process("joined", "completed"),
            BudgetUsageReported(
                turn=1, operation_id=operation, reservation_id=reservation, tokens=30, subagents=1, rounds=2
            ),
            Custom(
                custom_kind="budget_grant_released",
                payload={
                    "reservation_id": reservation,
                    "agent_id": child_id,
                    "returned": {"tokens": 955, "turns": 3},
                },
            ),
            effect_done(key, "note written"),
            ToolCompleted(turn=1, results=[ToolResult(call_id="s1", output="note written")]),
            CheckpointTaken(turn=2, history_len=3),
            completed(last, 2),
            usage(2, reserved=1000 - 15 - 30),  # the child's usage is charged to the parent
            RunTerminal(reason="completed", turns_used=2, total_tokens=30),
        ],
    )


def subagent_records_its_parent(store: SqliteStore, tmp_path: Path) -> Outcome:
    """A child's own start names the parent that spawned it, its depth and the limit its tree sets
    (``spawned_by``, flightlog.integrity.lineage), right after its budget limits; checked on the child."""
    first = calls(call("helper", {"task": "sum up"}, id="h1"))
    child = dataclasses.replace(
        agent(ScriptedProvider([reply("summed")]), tools=[], system_prompt="child"), name="helper"
    )
    parent = agent(
        ScriptedProvider([first, reply("done")], by_turn=True),
        tools=[subagent(child)],
        budgets=Budgets(tokens=1000),
        max_spawn_depth=3,
    )
    assert Kernel(store, parent, notary=None).run_sync("delegate", session_id="cov-10").status == "completed"
    child_id = hashlib.sha256(b"flightlog-subagent:cov-10:1:h1").hexdigest()[:32]
    return Outcome(
        child_id,
        [
            RunStarted(
                run_id=run_id_of(events(store, child_id)),
                goal="sum up",
                agent_id="helper",
                system_prompt="child",
            ),
            evidence(0),
            limits(tokens=985),  # the parent's 1000 less its first call's 15
            Custom(
                custom_kind="spawned_by",
                # the root's max_spawn_depth=3 counted from the root (depth 0): its tree's limit
                payload={
                    "parent_session_id": "cov-10",
                    "turn": 1,
                    "call_id": "h1",
                    "depth": 1,
                    "depth_limit": 3,
                },
            ),
            CheckpointTaken(turn=1, history_len=1),
            completed(reply("summed"), 1),
            usage(1, reserved=985),
            RunTerminal(reason="completed", turns_used=1, total_tokens=15),
        ],
    )


SCENARIOS: list[Scenario] = [
    repaired_and_invalid_calls,
    approval_then_side_effect,
    retry_then_failover,
    turn_budget,
    cancel_and_resume,
    crash_then_reconcile,
    rerun_by_another_process,
    signed_grant_and_seal,
    phased_run,
    subagent_waits_for_approval,
    subagent_records_its_parent,
]


def kind_of(event: SessionEvent) -> str:
    """``Custom`` events by their ``custom_kind``, the others by their class name."""
    return event.custom_kind if isinstance(event, Custom) else type(event).__name__


PROGRAM_KINDS = ("prompt_program_compiled", "prompt_program_invoked")
"""The request records (:mod:`flightlog.kernel.requests`): their digests are of the request the provider
received, so instead of spelling them out a scenario's are checked by rebuilding every request from the
ledger (``check_session``), and their place: compiled before the first call, one invoked with each
``checkpoint_taken``."""

CONTEXT_KINDS = {
    # written only when a run manages its context; each is checked field by field in test_context.py
    # (in-place tiers: test_inplace.py):
    "Compressed": "test_a_context_too_long_answer_is_compacted_past",
    "PageOut": "test_a_large_output_is_paged_out_and_paged_back_in",
    "PageIn": "test_a_large_output_is_paged_out_and_paged_back_in",
    "ContextRenewed": "test_the_agent_can_renew_its_own_context",
    "compaction_started": "test_a_context_too_long_answer_is_compacted_past",
    "compaction_failed": "test_a_failing_summary_call_is_retried_then_replaced_by_the_rule_summary",
    "context_overflow": "test_a_context_too_long_answer_is_compacted_past",
    "context_pin": "test_pinned_results_survive_compaction_verbatim",
    "context_rewrite": "test_a_chatty_run_cuts_in_place_then_archives_and_replays_what_the_model_saw",
    "context_budget_exceeded": "test_a_system_prompt_larger_than_the_window_ends_the_run_before_any_call",
}
CAPABILITY_KINDS = {
    # written only by MCP servers (or a refused tool); checked in test_capabilities.py:
    "capability_refused": "test_smuggling_is_refused_by_policy_shadowing_and_the_allow_list",
    "capability_crashed": "test_a_crashed_server_is_recorded_and_restarted_on_resume",
    "capability_failed": "test_a_server_that_does_not_start_is_recorded_and_the_run_goes_on",
}

MEMORY_KINDS = {
    # written only when an agent has a memory policy; each is checked field by field in test_memory.py:
    "MemoryWritten": "test_a_write_then_a_query_record_memory_events_field_by_field",
    "MemoryQueried": "test_a_write_then_a_query_record_memory_events_field_by_field",
    "MemoryRetrievalResult": "test_async_retrieval_suspends_and_the_result_arrives_on_resume_in_another_process",
    "MemoryValidationFailed": "test_rejected_writes_record_upstreams_error_strings",
    "memory_already_in_history": "test_a_query_does_not_inject_a_memory_already_in_the_history",
}

FAULT_KINDS = {
    # written only by an abort that names who asked (the dashboard's); checked field by field in
    # test_faults.py:
    "abort_requested": "test_abort_records_who_asked_beside_its_cancellation",
}

WATCH_KINDS = {
    # written only by a watched or signalled run; each is checked field by field in test_watch.py or
    # test_signals.py:
    "EntropyAlert": "test_a_looping_agent_trips_the_watch_at_the_turn_the_formula_gives",
    "entropy_action": "test_a_looping_agent_trips_the_watch_at_the_turn_the_formula_gives",
    "SignalDeliveryDisposed": "test_a_message_sent_mid_turn_is_delivered_at_the_next_boundary",
    "signal_message": "test_a_message_sent_mid_turn_is_delivered_at_the_next_boundary",
    "kernel_note": "test_a_denial_rolls_the_turn_back_when_the_policy_says_so",
}
"""``entropy_sample`` is in every ledger with a completed turn: checked against a recomputation from the
ledger (``recompute_samples``) by :func:`without_programs`, like the request records."""


def without_programs(store: SqliteStore, session_id: str) -> list[SessionEvent]:
    """The ledger minus its request records, after checking them (see :data:`PROGRAM_KINDS`)."""
    ledger = events(store, session_id)
    report = check_session(store, session_id)
    invoked = [i for i, e in enumerate(ledger) if kind_of(e) == "prompt_program_invoked"]
    assert report.ok and report.checked == len(invoked)
    for i in invoked:
        before = ledger[i - 1]
        if kind_of(before) == "prompt_program_compiled":
            before = ledger[i - 2]
        assert isinstance(before, CheckpointTaken) and before.turn == ledger[i].payload["turn"]  # type: ignore[attr-defined]
    samples = [e for e in ledger if isinstance(e, EntropySample)]
    assert samples == recompute_samples(ledger)
    return [e for e in ledger if kind_of(e) not in PROGRAM_KINDS and not isinstance(e, EntropySample)]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
def test_the_ledger_holds_exactly_the_expected_events(
    scenario: Scenario, store: SqliteStore, tmp_path: Path
) -> None:
    outcome = scenario(store, tmp_path)
    ledger = without_programs(store, outcome.session_id)
    for seq, (got, want) in enumerate(zip(ledger, outcome.expected, strict=False)):
        assert got == want, f"seq {seq}: {kind_of(got)}"
    assert [kind_of(e) for e in ledger] == [kind_of(e) for e in outcome.expected]
    assert verify_session(store, outcome.session_id).ok


# ─── what the kernel can write, from its syntax tree ──────────────────────────────────────────

EVENT_CLASSES = {
    name
    for name in ev.__all__
    if isinstance(cls := getattr(ev, name), type) and issubclass(cls, ev.Event) and name != "Custom"
}
RECORDER_WRITES = {
    # Recorder methods and record builders the kernel calls and the Custom kind each writes (flightlog.recorder).
    "record_intent": "external_effect_intent",
    "complete_effect": "external_effect_completed",
    "record_grant": "grant_policy",  # flightlog.integrity.grants.record_grant -> Recorder.record_grant_policy
    "finish": "session_sealed",  # with a notary, Recorder.finish seals the session
    # the shared record builder (flightlog.decisions.approval_decision), through records.Verdict.to_event
    "to_event": "approval_decision",
}


def _called_name(node: ast.Call) -> str | None:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        if isinstance(func.value, ast.Name) and func.value.id in ("threading", "asyncio"):
            return None  # threading.Event(), asyncio.Event(): synchronisation, not a ledger event
        return func.attr
    return None


def kernel_writes() -> set[str]:
    """Event class names constructed and ``Custom`` kinds written anywhere in ``flightlog.kernel``."""
    kinds: set[str] = set()
    for path in sorted(KERNEL_SRC.glob("*.py")):
        module = importlib.import_module(f"flightlog.kernel.{path.stem}") if path.stem != "__init__" else None
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call):
                continue
            name = _called_name(node)
            if name in EVENT_CLASSES:
                kinds.add(name)
            elif name in RECORDER_WRITES:
                kinds.add(RECORDER_WRITES[name])
            elif name == "Custom":
                (value,) = [k.value for k in node.keywords if k.arg == "custom_kind"]
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    kinds.add(value.value)
                else:  # a module constant (records.MODEL_USAGE...): resolve it in the module
                    assert isinstance(value, ast.Name) and module is not None, ast.dump(value)
                    resolved = getattr(module, value.id)
                    assert isinstance(resolved, str), (path.name, value.id)
                    kinds.add(resolved)
    return kinds


def test_the_scenarios_cover_every_kind_the_kernel_writes(tmp_path: Path) -> None:
    writes = kernel_writes()
    assert {"RunStarted", "ToolCompleted", "model_usage", "session_sealed"} <= writes  # the scan sees
    covered: set[str] = set()
    for i, scenario in enumerate(SCENARIOS):
        (own := tmp_path / str(i)).mkdir()
        with SqliteStore(own / "kernel.db") as store:
            outcome = scenario(store, own)
            covered |= {kind_of(e) for e in outcome.expected}
            covered |= {kind_of(e) for e in events(store, outcome.session_id) if kind_of(e) in PROGRAM_KINDS}
            covered |= {kind_of(e) for e in events(store, outcome.session_id) if isinstance(e, EntropySample)}
    here = Path(__file__).parent
    watch_tests = (here / "test_watch.py").read_text() + (here / "test_signals.py").read_text()
    assert all(f"def {name}(" in watch_tests for name in WATCH_KINDS.values())
    covered |= set(WATCH_KINDS)
    context_tests = (here / "test_context.py").read_text() + (here / "test_inplace.py").read_text()
    assert all(f"def {name}(" in context_tests for name in CONTEXT_KINDS.values())
    covered |= set(CONTEXT_KINDS)
    capability_tests = (Path(__file__).parent / "test_capabilities.py").read_text()
    assert all(f"def {name}(" in capability_tests for name in CAPABILITY_KINDS.values())
    covered |= set(CAPABILITY_KINDS)
    fault_tests = (here / "test_faults.py").read_text()
    assert all(f"def {name}(" in fault_tests for name in FAULT_KINDS.values())
    covered |= set(FAULT_KINDS)
    memory_tests = (Path(__file__).parent / "test_memory.py").read_text()
    assert all(f"def {name}(" in memory_tests for name in MEMORY_KINDS.values())
    covered |= set(MEMORY_KINDS)
    assert sorted(writes - covered) == [], "written by the kernel, checked by no scenario"
    assert sorted(covered - writes) == [], "expected by a scenario, written by no kernel code"


def test_kernel_errors_pickle() -> None:
    decided = DecidedByItsRuntime(
        session_id="s", source="langgraph", answer_in="graph.invoke(...)", waiting="t c"
    )
    for error in (
        NotPending(session_id="s", call_id="c"),
        AgentSpecError(spec="m:a", reason="nope"),
        decided,
    ):
        clone = pickle.loads(pickle.dumps(error))
        assert type(clone) is type(error) and str(clone) == str(error)
    assert pickle.loads(pickle.dumps(decided)).answer_in == "graph.invoke(...)"
