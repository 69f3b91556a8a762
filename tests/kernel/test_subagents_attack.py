"""Adversarial run trees (the attack pass): a tampered child ledger must stop the parent, naming the child."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flightlog.cli import app
from flightlog.errors import LedgerIntegrityError
from flightlog.kernel import approve
from flightlog.kernel.effects import effect_key
from flightlog.kernel.scripted import call, calls, reply
from flightlog.kernel.subagents import child_session_id, subagent
from flightlog.store import SqliteStore

from .helpers import echo, events
from .test_subagents import WRITTEN, _waiting_tree, child_agent, children, kernel, parent_agent, results


def _rewrite(db: Path, session_id: str, old: bytes, new: bytes) -> int:
    """Replace ``old`` by ``new`` in the one event of ``session_id`` holding it (an attacker with write
    access to the file, bypassing the append-only trigger); returns its seq. The event still decodes."""
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT seq, event FROM events WHERE session_id = ?", (session_id,)).fetchall()
        ((seq, data),) = [(s, d) for s, d in rows if old in d]
        conn.execute("DROP TRIGGER IF EXISTS events_no_update")
        conn.execute(
            "UPDATE events SET event = ? WHERE session_id = ? AND seq = ?",
            (data.replace(old, new), session_id, seq),
        )
        conn.commit()
    finally:
        conn.close()
    return int(seq)


def test_resuming_a_parent_refuses_a_tampered_child_naming_it_and_the_seq(
    store: SqliteStore, db_path: Path
) -> None:
    assert kernel(store, _waiting_tree()).run_sync("go", session_id="p").status == "suspended"
    (kid,) = children(store, "p")
    approve(store, kid, "w")  # decided while the child's ledger was intact
    seq = _rewrite(db_path, kid, b'"hello"', b'"pwned"')  # the approved call's arguments
    before = len(events(store, "p"))
    with pytest.raises(LedgerIntegrityError) as info:
        kernel(store, _waiting_tree()).resume_sync("p")
    assert kid in str(info.value) and f"sequence {seq}: hash_mismatch" in str(info.value)
    assert len(events(store, "p")) == before  # the parent recorded nothing from its tampered child
    assert WRITTEN == []  # and the tampered call never ran
    verified = CliRunner().invoke(app, ["--db", str(db_path), "verify", "--all"])
    assert (
        verified.exit_code == 1 and kid in verified.output and f"seq {seq}: hash_mismatch" in verified.output
    )


def test_a_session_holding_a_childs_id_beforehand_is_never_adopted(store: SqliteStore) -> None:
    # The child's id is derived from the parent's effect key: anyone with write access can create it first.
    kid = child_session_id(effect_key("p", 1, "c"))
    assert kernel(store, child_agent(reply("FORGED"))).run_sync("other", session_id=kid).status == "completed"
    genuine = child_agent(reply("genuine"))
    parent = parent_agent(
        calls(call("child", {"task": "t"}, id="c")), reply("done"), tools=[echo, subagent(genuine)]
    )
    assert kernel(store, parent).run_sync("go", session_id="p").status == "completed"
    answer = results(store, "p")["c"]
    assert answer.is_error and "FORGED" not in answer.output
    assert f"session {kid} exists but is not a sub-agent of p (its parent: None)" in answer.output
