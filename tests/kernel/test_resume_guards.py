"""Resume never acts on an unverified ledger, and never imports code named by an unhashed field."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from flightlog.errors import LedgerIntegrityError
from flightlog.kernel import Kernel, Policy, Rule, approve, tool
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.kernel.spec import recorded_spec
from flightlog.store import SqliteStore

from .helpers import agent


@tool(effect="side_effect")
def touch(name: str) -> str:
    """Touch a thing that matters."""
    return f"touched {name}"


def _kernel(store: SqliteStore) -> Kernel:
    provider = ScriptedProvider([calls(call("touch", {"name": "a"}, id="t1")), reply("done")], by_turn=True)  # type: ignore[arg-type]
    return Kernel(store, agent(provider, tools=[touch], policy=Policy(rules=(Rule("ask", tool="touch"),))))


def _suspended(db: Path) -> str:
    with SqliteStore(db) as store:
        result = _kernel(store).run_sync("touch a", metadata={"agent_spec": "tests.kernel.agents:agent"})
        assert result.status == "suspended"
        with SqliteStore(db) as other:
            approve(other, result.session_id, "t1")
        return result.session_id


def test_resume_refuses_a_truncated_ledger_even_when_idle(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    sid = _suspended(db)
    conn = sqlite3.connect(db)
    conn.execute("DROP TRIGGER events_no_delete")
    head = conn.execute("SELECT MAX(seq) FROM events WHERE session_id = ?", (sid,)).fetchone()[0]
    conn.execute("DELETE FROM events WHERE session_id = ? AND seq >= ?", (sid, head - 2))  # drop the approval
    conn.commit()
    conn.close()
    with SqliteStore(db) as store:
        before = store.get_session(sid).head_seq
        with pytest.raises(LedgerIntegrityError) as info:
            _kernel(store).resume_sync(sid)
        assert info.value.seq == head - 2
        assert store.get_session(sid).head_seq == before  # nothing written


def test_resume_reads_the_agent_spec_from_the_verified_ledger_not_the_session_row(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    sid = _suspended(db)
    conn = sqlite3.connect(db)
    conn.execute(
        "UPDATE sessions SET metadata = ? WHERE session_id = ?", (json.dumps({"agent_spec": "this:x"}), sid)
    )
    conn.commit()
    conn.close()
    with SqliteStore(db) as store:
        assert store.get_session(sid).metadata["agent_spec"] == "this:x"
        assert recorded_spec(store, sid) == "tests.kernel.agents:agent"


def test_a_suspended_signed_run_leaves_no_unanchored_tail(tmp_path: Path) -> None:
    from flightlog.integrity.heads import HeadStore
    from flightlog.integrity.keys import LogSigner
    from flightlog.integrity.notary import Notary
    from flightlog.integrity.verify import audit_session

    notary = Notary.for_signer(
        LogSigner.generate("test.example/log"), HeadStore(tmp_path / "heads"), every=1000
    )
    with SqliteStore(tmp_path / "k.db") as store:
        kernel = _kernel(store)
        kernel.notary = notary
        result = kernel.run_sync("touch a")
        assert result.status == "suspended"
        report = audit_session(store, result.session_id, keyring=notary.keyring, heads=notary.heads)
        assert report.ok
        assert report.unanchored is None, report.summary()
