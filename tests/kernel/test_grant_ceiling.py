"""A signed grant policy in the kernel: verified and ledgered at start, a ceiling on every decision."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from flightlog.encoding import canonical_json
from flightlog.errors import GrantError
from flightlog.events import ToolCompleted, ToolDenied
from flightlog.integrity.grants import (
    GrantPolicy,
    load_policy_signer,
    policy_digest,
    session_policy_digest,
    sign_grant,
)
from flightlog.integrity.keys import load_signer, now_ms
from flightlog.kernel import KernelError, Policy, Rule, approve, tool
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.store import SqliteStore

from .helpers import add, customs, echo, events, kernel, kinds, of

GRANT = GrantPolicy(
    policy_id="kernel-test",
    tools_allow=["echo", "write_*"],
    approval_required=["side_effect"],
    authority_epoch=0,
)
DIGEST = policy_digest(GRANT)

written: list[str] = []


@tool(effect="side_effect")
def write_note(text: str) -> str:
    """Write a note somewhere that matters."""
    written.append(text)
    return f"wrote {text!r}"


@pytest.fixture(autouse=True)
def _reset() -> None:
    written.clear()


def _signed(policy: GrantPolicy = GRANT) -> dict[str, Any]:
    return sign_grant(policy, load_policy_signer())


def _script() -> list[object]:
    return [
        calls(call("echo", {"text": "look"}, id="r1"), call("write_note", {"text": "hi"}, id="w1")),
        reply("all done"),
    ]


def _grant_events(store: SqliteStore, sid: str) -> list[Any]:
    return customs(store, sid, "grant_policy")


def test_a_valid_grant_is_ledgered_at_start_and_named_by_every_decision(db_path: Path) -> None:
    envelope = _signed()
    with SqliteStore(db_path) as first:
        provider = ScriptedProvider(_script(), by_turn=True)  # type: ignore[arg-type]
        result = kernel(first, provider, tools=[echo, write_note], grant=envelope).run_sync("go")
        sid = result.session_id
        # the agent's policy allows everything; the grant's approval ceiling makes the side effect ask
        assert (result.status, result.pending_calls) == ("suspended", ("w1",))
        assert kinds(first, sid)[:5] == [
            "run_started",
            "custom:provider_capability_evidence",
            "custom:budget_limits",
            "custom:grant_policy",
            "checkpoint_taken",
        ]
        (grant,) = _grant_events(first, sid)
        assert grant["policy_id"] == "kernel-test" and grant["digest"] == DIGEST and grant["signed"] is True
        assert grant["policy"] == GRANT.model_dump(mode="json")
        assert session_policy_digest(first, sid) == DIGEST
        (decisions,) = customs(first, sid, "tool_decisions")
        assert decisions["policy_digest"] == DIGEST
        assert [(c["call_id"], c["decision"], c.get("ceiling")) for c in decisions["calls"]] == [
            ("r1", "allow", None),
            ("w1", "ask", "grant"),
        ]
        assert "kernel-test" in decisions["calls"][1]["reason"]
    with SqliteStore(db_path) as second:
        approve(second, sid, "w1", responder="alice")
        (decision,) = customs(second, sid, "approval_decision")
        assert decision["policy_digest"] == DIGEST and decision["approved"] is True
    with SqliteStore(db_path) as third:  # resume takes the grant from the ledger (agent without one)
        provider = ScriptedProvider(_script(), by_turn=True)  # type: ignore[arg-type]
        resumed = kernel(third, provider, tools=[echo, write_note]).resume_sync(sid)
        assert (resumed.status, resumed.final_message) == ("completed", "all done")
        assert written == ["hi"]
        assert len(_grant_events(third, sid)) == 1


def test_a_tool_outside_the_grant_is_denied_even_when_the_policy_allows_it(store: SqliteStore) -> None:
    provider = ScriptedProvider(
        [calls(call("add", {"a": 1, "b": 2}, id="a1"), call("echo", {"text": "x"}, id="e1")), reply("ok")],
        by_turn=False,
    )
    allow_all = Policy(rules=(Rule("allow", tool="add"),), default="allow")
    result = kernel(store, provider, tools=[add, echo], policy=allow_all, grant=_signed()).run_sync("go")
    sid = result.session_id
    assert result.status == "completed"
    (denied,) = of(store, sid, ToolDenied)
    assert (denied.call_id, denied.tool_name) == ("a1", "add")
    assert denied.reason == "grant policy kernel-test: tool 'add' is outside the grant"
    (plans,) = customs(store, sid, "tool_decisions")
    assert plans["policy_digest"] == DIGEST
    assert {c["call_id"]: (c["decision"], c.get("rule"), c.get("ceiling")) for c in plans["calls"]} == {
        "a1": ("deny", None, "grant"),
        "e1": ("allow", None, None),
    }
    (completed,) = of(store, sid, ToolCompleted)
    assert [r.is_error for r in completed.results] == [True, False]


def test_the_grant_never_loosens_the_agents_policy(store: SqliteStore) -> None:
    provider = ScriptedProvider([calls(call("echo", {"text": "x"}, id="e1")), reply("ok")], by_turn=False)
    strict = Policy(rules=(Rule("deny", tool="echo", reason="no echo"),))
    wide = GrantPolicy(policy_id="wide", approval_required=[])
    result = kernel(store, provider, policy=strict, grant=_signed(wide)).run_sync("go")
    (denied,) = of(store, result.session_id, ToolDenied)
    assert denied.reason == "no echo"


def _tampered() -> dict[str, Any]:
    envelope = _signed()
    looser = GRANT.model_copy(update={"tools_allow": ["*"], "approval_required": []})
    return {**envelope, "payload": base64.b64encode(canonical_json(looser.model_dump(mode="json"))).decode()}


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda: sign_grant(GRANT, load_signer()), "no signature by a trusted policy key"),
        (_tampered, "no signature by a trusted policy key"),
        (lambda: _signed(GRANT.model_copy(update={"not_after_ms": now_ms() - 1})), "is not valid at"),
        (lambda: _signed(GRANT.model_copy(update={"authority_epoch": 3})), "is for authority epoch 3"),
        (lambda: {"payload": "x"}, "the envelope needs"),
    ],
    ids=["log-key", "tampered", "expired", "other-epoch", "malformed"],
)
def test_a_bad_grant_refuses_the_run_and_records_nothing(store: SqliteStore, make: Any, reason: str) -> None:
    envelope = make()
    load_policy_signer()  # the policy key exists and is trusted: only the envelope is wrong
    provider = ScriptedProvider([reply("never")], by_turn=False)
    with pytest.raises(GrantError, match=reason):
        kernel(store, provider, grant=envelope).run_sync("go", session_id="refused")
    assert list(store.list_sessions()) == []
    assert provider.remaining == 1  # the model was never called


def test_explicit_grant_keys_replace_the_trust_list(store: SqliteStore) -> None:
    other = load_policy_signer(Path(str(store.path)).parent / "other-keys")
    envelope = sign_grant(GRANT, other)
    with pytest.raises(GrantError, match="no signature by a trusted policy key"):
        kernel(store, ScriptedProvider([reply("x")], by_turn=False), grant=envelope).run_sync("go")
    result = kernel(
        store, ScriptedProvider([reply("x")], by_turn=False), grant=envelope, grant_keys=[other.verifier]
    ).run_sync("go")
    assert result.status == "completed"
    assert _grant_events(store, result.session_id)[0]["key"] == str(other.verifier)


def test_resume_refuses_a_swapped_or_added_grant(store: SqliteStore) -> None:
    def suspended(grant: dict[str, Any] | None) -> str:
        provider = ScriptedProvider(
            [calls(call("write_note", {"text": "x"}, id="w1")), reply("ok")], by_turn=False
        )
        ask = Policy(rules=(Rule("ask", tool="write_*"),))
        return kernel(store, provider, tools=[write_note], policy=ask, grant=grant).run_sync("go").session_id

    with_grant, without = suspended(_signed()), suspended(None)
    for sid in (with_grant, without):
        approve(store, sid, "w1")
    before = {sid: len(events(store, sid)) for sid in (with_grant, without)}
    other = _signed(GRANT.model_copy(update={"policy_id": "other"}))
    for sid in (with_grant, without):
        provider = ScriptedProvider([reply("ok")], by_turn=False)
        with pytest.raises(KernelError, match="grant"):
            kernel(store, provider, tools=[write_note], grant=other).resume_sync(sid)
        assert len(events(store, sid)) == before[sid]  # nothing written
    assert json.loads(store.grant_policies(with_grant)[0][1])["payloadType"].endswith("grant-policy+json")
    assert customs(store, without, "approval_decision")[0].get("policy_digest") is None
