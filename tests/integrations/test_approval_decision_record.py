"""The ``approval_decision`` record has one builder (:func:`flightlog.decisions.approval_decision`) for its
three writers: the kernel's approvals, the Agents SDK session and the LangGraph saver. Each writer's stored
bytes are pinned (the bytes the three hand-built payloads wrote before the builder existed), so moving them
onto the builder changed no stored byte."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import HumanMessage
from langgraph.types import Command

import flightlog
from flightlog.decisions import APPROVAL_DECISION, approval_decision
from flightlog.encoding import canonical_bytes, parse_json
from flightlog.integrations import langgraph, openai_agents
from flightlog.integrations.langgraph import FlightlogSaver
from flightlog.kernel import Agent, Kernel, Policy, Rule, approve, deny, tool
from flightlog.kernel import records as kernel_records
from flightlog.kernel.records import Verdict
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.store import SqliteStore

from .test_langgraph_readable import CFG, SID, _graph
from .test_openai_agents_approvals import CALL, _step
from .test_openai_agents_approvals import SID as AGENTS_SID


def _decision_rows(db: Path, session_id: str) -> list[bytes]:
    """The stored bytes of the session's ``approval_decision`` rows, in seq order."""
    with flightlog.open_store(str(db)) as store:
        rows = list(store.read_events(session_id))
    return [
        row.event_bytes
        for row in rows
        if row.kind == "custom" and parse_json(row.event_bytes)["custom_kind"] == APPROVAL_DECISION
    ]


def _pinned(call_ids: tuple[str, str], turn: int, approver: str, denier: str, reason: str) -> list[bytes]:
    """The bytes stored before the builder: an approval of ``call_ids[0]``, a denial of ``call_ids[1]``."""
    approved, denied = call_ids
    return [
        b'{"custom_kind":"approval_decision","kind":"custom","payload":{"approved":true,"call_id":"%s",'
        b'"gate":"approval","responder":"%s","turn":%d}}' % (approved.encode(), approver.encode(), turn),
        b'{"custom_kind":"approval_decision","kind":"custom","payload":{"approved":false,"call_id":"%s",'
        b'"gate":"approval","reason":"%s","responder":"%s","turn":%d}}'
        % (denied.encode(), reason.encode(), denier.encode(), turn),
    ]


def test_every_writer_names_the_one_constant() -> None:
    assert APPROVAL_DECISION == "approval_decision"
    assert langgraph.APPROVAL_DECISION is APPROVAL_DECISION
    assert openai_agents.APPROVAL_DECISION is APPROVAL_DECISION
    assert kernel_records.APPROVAL_DECISION is APPROVAL_DECISION


names = st.text(min_size=1, max_size=20)


@given(
    turn=st.integers(min_value=0, max_value=2**31),
    call_id=names,
    gate=st.sampled_from(["approval", "effect_in_doubt"]),
    approved=st.booleans(),
    responder=names,
    reason=st.none() | st.text(max_size=40),
    digest=st.none() | st.text(alphabet="0123456789abcdef", min_size=64, max_size=64),
)
def test_the_record_round_trips_through_the_kernels_reader(
    turn: int,
    call_id: str,
    gate: Any,
    approved: bool,
    responder: str,
    reason: str | None,
    digest: str | None,
) -> None:
    """What :class:`Verdict` reads back is what was built; absent optional fields are omitted, not null."""
    verdict = Verdict(call_id, gate, approved, responder, reason)
    event = verdict.to_event(turn, policy_digest=digest)
    assert event == approval_decision(
        turn=turn,
        call_id=call_id,
        gate=gate,
        approved=approved,
        responder=responder,
        reason=reason,
        policy_digest=digest,
    )
    payload = parse_json(canonical_bytes(event))["payload"]
    assert Verdict.from_wire(payload) == verdict and payload["turn"] == turn
    expected = {"turn", "call_id", "gate", "approved", "responder"}
    expected |= {"reason"} if reason is not None else set()
    expected |= {"policy_digest"} if digest is not None else set()
    assert set(payload) == expected
    assert payload.get("policy_digest") == digest


@tool(effect="side_effect")
def write_note(text: str) -> str:
    """Write a note somewhere that matters."""
    return f"wrote {text!r}"


def test_the_kernels_decisions_keep_their_bytes(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    script = [
        calls(call("write_note", {"text": "a"}, id="w1"), call("write_note", {"text": "b"}, id="w2")),
        reply("done"),
    ]
    policy = Policy(rules=(Rule("ask", tool="write_*", reason="writes need a human"),))
    with SqliteStore(db) as store:
        provider = ScriptedProvider(script, by_turn=False)  # type: ignore[arg-type]
        kernel = Kernel(store, Agent(name="writer", route=[provider], tools=[write_note], policy=policy))
        sid = kernel.run_sync("write two notes").session_id
        approve(store, sid, "w1", responder="alice", notary=None)
        deny(store, sid, "w2", responder="bob", notary=None)
    assert _decision_rows(db, sid) == _pinned(("w1", "w2"), 1, "alice", "bob", "denied by bob")


def test_the_langgraph_savers_decisions_keep_their_bytes(tmp_path: Path) -> None:
    rows = []
    for answer, who in (("yes", "bob"), ("no", "dan")):
        db = tmp_path / f"{answer}.db"
        with flightlog.open_store(str(db)) as store:
            graph = _graph(FlightlogSaver(store, notary=None))
            graph.invoke({"messages": [HumanMessage("add 1 and 2")]}, CFG)
            interrupt_id = graph.get_state(CFG).tasks[0].interrupts[0].id
            graph.invoke(Command(resume=answer), {**CFG, "metadata": {"approver": who}})
        (row,) = _decision_rows(db, SID)
        rows.append(row.replace(interrupt_id.encode(), b"<id>"))
    assert rows == _pinned(("<id>", "<id>"), 2, "bob", "dan", "denied by dan")


def test_the_agents_sdk_sessions_decisions_keep_their_bytes(tmp_path: Path) -> None:
    rows = []
    for step, who in (("approve", "alice"), ("reject", "bob")):
        db, state = tmp_path / f"{step}.db", tmp_path / f"{step}.json"
        assert _step(db, state, "start") == f"suspended {CALL}"
        _step(db, state, step, who)
        rows += _decision_rows(db, AGENTS_SID)
    assert rows == _pinned((CALL, CALL), 1, "alice", "bob", "bob says no")
