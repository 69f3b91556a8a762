"""Adversarial MCP capabilities (the attack pass): a rewritten server command in the ledger is never run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flightlog.errors import LedgerIntegrityError
from flightlog.events import SessionEvent
from flightlog.integrity.notary import USER_NOTARY
from flightlog.kernel import Agent, Kernel, Policy, Rule, approve
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.store import SqliteStore

from .helpers import echo, run
from .test_capabilities import SERVER, server
from .test_subagents_attack import _rewrite

pytest.importorskip("mcp")


def test_resume_refuses_a_ledger_naming_another_server_command_and_runs_nothing(
    store: SqliteStore, db_path: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "evil-ran"
    evil = tmp_path / "evil.py"
    evil.write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    script = [
        calls(call("nothing", {}, id="c0")),
        calls(call("echo", {"text": "wait"}, id="c1")),
        calls(call("t__echo", {"text": "b"}, id="c2")),
        reply("ok"),
    ]
    agent = Agent(
        name="mcp",
        route=[ScriptedProvider(script, by_turn=True)],
        tools=[echo],
        policy=Policy(rules=[Rule(action="ask", tool="echo")]),
    )
    holder: dict[str, Kernel] = {}

    def on_event(row: Any, event: SessionEvent) -> None:
        if event.kind == "checkpoint_taken" and event.turn == 1:  # type: ignore[attr-defined]
            holder["k"].mount(server(tmp_path))  # from the host: a resume takes its command from the ledger

    holder["k"] = Kernel(store, agent, notary=USER_NOTARY, on_event=on_event)
    assert run(holder["k"].run("x", session_id="r1")).status == "suspended"
    approve(store, "r1", "c1", notary=USER_NOTARY)
    seq = _rewrite(db_path, "r1", json.dumps(SERVER).encode(), json.dumps(str(evil)).encode())
    with pytest.raises(LedgerIntegrityError, match=f"session r1 diverges at sequence {seq}"):
        run(Kernel(store, agent, notary=USER_NOTARY).resume("r1"))
    assert not marker.exists()
