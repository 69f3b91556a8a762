"""A kernel sub-agent's ``parent_session_id`` is proven by the verified ledgers, never taken from the row.

The attack pass (last session): a child's row edited to ``parent_session_id = NULL`` made ``audit`` say only
``projection_mismatch``; following its hint (``flightlog runs --rebuild``) rewrote the runs row from the
edited sessions row, so ``audit`` passed, and the child resumed as a root at depth 0, free of its tree's
``max_spawn_depth`` (the attack reached depth 16). Now the full check proves a kernel run's parent by the
parent's verified ledger (its ``agent_process_changed`` naming the child) and by the child's own
``spawned_by`` start record (:mod:`flightlog.integrity.lineage`): ``verify``/``audit`` and ``show``'s quick
check name a ``row_mismatch`` of the field at the seq of the proving record, ``runs --rebuild`` warns of it
and exits 1 and leaves it named, and ``resume`` refuses (exit 1, the README's divergence) the child, the
tree it was cut from, and a root grafted under another run. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flightlog.events import AgentProcessChanged
from flightlog.integrity.lineage import SpawnedBy
from flightlog.kernel import Kernel
from flightlog.kernel.effects import effect_key
from flightlog.kernel.state import load_state
from flightlog.kernel.subagents import child_session_id
from flightlog.recorder import Recorder
from flightlog.store import SqliteStore, open_store

from .helpers import cli, described, execute, invoke, rechain

TREE = "kernel.cli_agents:tree_agent"
"""Root ``tree-root`` -> ``lead`` (depth 1) -> ``worker`` (depth 2), which waits for a decision on ``n1``."""
SAMPLE = Path(__file__).parents[1] / "data" / "samples" / "claude-code" / "spotter_subagent_parent.jsonl"
PAD = " " * 10


def _tree(url: str) -> tuple[str, str, str]:
    """``flightlog run`` the tree until its worker waits: (root, lead, worker) session ids."""
    result = invoke(url, "run", TREE, "--goal", "go", "--json", "--quiet")
    assert result.exit_code == 3, described(result)
    root = str(json.loads(result.stdout)["session_id"])
    lead = child_session_id(effect_key(root, 1, "d1"))
    return root, lead, child_session_id(effect_key(lead, 1, "w1"))


def _set_parent(url: str, sid: str, parent: str | None) -> None:
    value = "NULL" if parent is None else f"'{parent}'"
    execute(url, f"UPDATE sessions SET parent_session_id = {value} WHERE session_id = '{sid}'")


def _seq_of(url: str, sid: str, marker: str) -> int:
    """The seq of the session's first event whose stored bytes hold ``marker``."""
    code, out, _ = cli(url, "export", sid)
    assert code == 0
    return next(i for i, line in enumerate(out.splitlines()) if marker in line)


def _named(url: str, sid: str, seq: int, detail: str) -> None:
    """``verify``, ``audit`` (text and JSON) and ``show``'s quick check name the ``row_mismatch``."""
    for command in ("verify", "audit"):
        code, out, _ = cli(url, command, sid)
        assert code == 1 and f"{PAD}seq {seq}: row_mismatch ({detail})" in out.splitlines(), out
        code, out, _ = cli(url, command, sid, "--json")
        assert code == 1, out
        assert {"seq": seq, "reason": "row_mismatch", "detail": detail} in json.loads(out)[0]["divergences"]
    code, _, err = cli(url, "show", sid)
    assert code == 1 and f"fails verification at seq {seq} (row_mismatch): {detail}; " in err, err


def _resume_refused(url: str, asked: str, sid: str, seq: int, detail: str) -> None:
    """``resume ASKED`` exits 1 with the one error line naming ``sid``'s ``row_mismatch``; nothing written."""
    with open_store(url, read_only=True) as store:
        heads = {r.session_id: r.head_seq for r in store.list_sessions()}
    code, out, err = cli(url, "resume", asked)
    assert (code, out) == (1, ""), err
    assert err.splitlines()[-1] == (
        f"flightlog: error: ledger of session {sid} diverges at sequence {seq}: row_mismatch: {detail}; "
        "refusing to act on it"
    ), err
    with open_store(url, read_only=True) as store:
        assert {r.session_id: r.head_seq for r in store.list_sessions()} == heads


def test_an_honest_tree_and_imports_with_and_without_a_parent_audit_clean(url: str) -> None:
    """No false positive: a root, its child and grandchild (each proven by its parent's spawn), an imported
    transcript (no parent) and its imported sub-agent (a parent the row alone records: not compared)."""
    root, lead, worker = _tree(url)
    assert cli(url, "import", str(SAMPLE))[0] == 0
    code, out, _ = cli(url, "audit", "--all", "--json")
    assert code == 0, out
    rows = {r["session_id"]: r for r in json.loads(out) if isinstance(r.get("session_id"), str)}
    assert {root, lead, worker} <= set(rows)
    imported = [s for s, r in rows.items() if s.startswith("claude-code:")]
    assert len(imported) == 2 and all(rows[s]["divergences"] == [] for s in (root, lead, worker, *imported))
    with open_store(url, read_only=True) as store:
        parents = {s: store.get_session(s).parent_session_id for s in (root, lead, worker, *imported)}
    assert (parents[root], parents[lead], parents[worker]) == (None, root, lead)
    assert sorted(str(parents[s]) for s in imported) == [str(None), min(imported, key=len)]


@pytest.mark.parametrize("who", ["lead", "worker"])
def test_a_child_whose_row_names_no_parent(url: str, who: str) -> None:
    root, lead, worker = _tree(url)
    sid, parent, depth, call = (lead, root, 1, "d1") if who == "lead" else (worker, lead, 2, "w1")
    seq = _seq_of(url, sid, '"custom_kind":"spawned_by"')
    _set_parent(url, sid, None)
    detail = (
        f"sessions row parent_session_id None, the ledger's {parent!r}: the spawned_by record at seq {seq} "
        f"names it (depth {depth}, the call {call!r} of its turn 1)"
    )
    _named(url, sid, seq, detail)
    # audit's projection hint does not launder it: the rebuild warns and exits 1, and the finding stays
    code, _, err = cli(url, "runs", "--rebuild")
    assert code == 1 and f"{sid} fails verification at seq {seq} (row_mismatch): {detail}; " in err, err
    code, out, _ = cli(url, "audit", "--all")
    assert code == 1 and f"{PAD}seq {seq}: row_mismatch ({detail})" in out.splitlines(), out
    assert "projection_mismatch" not in out  # the runs row now says what the sessions row says
    _resume_refused(url, sid, sid, seq, detail)  # never resumed as a root
    _resume_refused(url, root, sid, seq, detail)  # nor its tree, whose ledgers name it
    code, out, err = cli(url, "abort", root)  # an abort of the tree names it (it raised, unnamed)
    assert (code, out) == (1, "") and err.splitlines()[-1] == (
        f"flightlog: error: ledger of session {sid} diverges at sequence {seq}: row_mismatch: {detail}; "
        "refusing to act on it"
    ), err
    _set_parent(url, sid, parent)  # the row put back: only the runs row rebuilt from the edit is left
    code, out, _ = cli(url, "audit", "--all")
    assert code == 1 and "row_mismatch" not in out, out
    assert f"projection_mismatch (runs row {sid!r} column fold" in out, out
    assert cli(url, "runs", "--rebuild")[0] == 0
    assert cli(url, "audit", "--all")[0] == 0


def test_a_child_whose_row_names_another_parent(url: str) -> None:
    root, lead, worker = _tree(url)
    seq = _seq_of(url, worker, '"custom_kind":"spawned_by"')
    _set_parent(url, worker, root)  # moved up one level: depth 1 instead of 2
    detail = (
        f"sessions row parent_session_id {root!r}, the ledger's {lead!r}: the spawned_by record at seq {seq} "
        "names it (depth 2, the call 'w1' of its turn 1)"
    )
    _named(url, worker, seq, detail)
    _resume_refused(url, worker, worker, seq, detail)


def test_a_root_grafted_under_another_run(url: str) -> None:
    """A root's row given a parent: no spawned_by record to compare, so the named parent's verified ledger
    must prove it, and it records no spawn of the root (nor does a session that does not exist)."""
    _, lead, _ = _tree(url)
    other, _, _ = _tree(url)
    seq = _seq_of(url, other, '"custom_kind":"budget_limits"')
    with open_store(url, read_only=True) as store:
        events = store.get_session(lead).head_seq + 1
    _set_parent(url, other, lead)
    detail = (
        f"sessions row parent_session_id {lead!r} is not proven: the verified ledger of {lead!r} ({events} "
        "events) records no spawn of this session (no agent_process_changed of one of its delegating calls "
        "names it)"
    )
    _named(url, other, seq, detail)
    _resume_refused(url, other, other, seq, detail)
    _set_parent(url, other, "nosuch")
    detail = "sessions row parent_session_id 'nosuch' is not proven: there is no session 'nosuch'"
    _named(url, other, seq, detail)


def test_a_root_moved_into_a_tree_by_a_spawn_appended_to_its_unsigned_tail(url: str) -> None:
    """atk4 b06: a chain-valid ``agent_process_changed(spawned)`` naming another root, appended to the open
    tree root's unsigned tail (no key needed), and the other root's row edited to name that tree root. The
    root has no ``spawned_by`` (as a sub-agent recorded before that record would not), but its id is no
    sub-agent id of the tree root's calls (``sha256`` of a call's effect key): the entry proves nothing, so
    ``verify``/``audit`` name the row (field, seq of its ``budget_limits``, the forged entry's seq), ``runs
    --rebuild`` leaves it named, ``audit --all`` names it, and ``resume`` refuses it."""
    root, _, _ = _tree(url)
    other, _, _ = _tree(url)
    at = _seq_of(url, other, '"custom_kind":"budget_limits"')
    with open_store(url) as store:
        genuine = next(e for _, e in load_state(store, root).events if isinstance(e, AgentProcessChanged))
        forger = Recorder.attach(store, root, notary=None, take_authority=False, retain=False)
        forger.append(genuine.model_copy(update={"agent_id": other, "state": "spawned"}))
        forged = forger.next_seq - 1
        events = forger.next_seq
    _set_parent(url, other, root)
    detail = (
        f"sessions row parent_session_id {root!r} is not proven: the verified ledger of {root!r} ({events} "
        f"events) names this session in the agent_process_changed at seq {forged}, but no "
        f"external_effect_intent before it has a key of {root!r}'s calls this session id derives from, so it "
        "records no spawn of this session"
    )
    _named(url, other, at, detail)
    assert cli(url, "runs", "--rebuild")[0] == 1
    code, out, _ = cli(url, "audit", "--all", "--json")
    assert code == 1, out
    found = {r["session_id"]: r for r in json.loads(out) if isinstance(r.get("session_id"), str)}
    assert found[root]["ok"] and found[root]["divergences"] == []  # the append itself is chain-valid
    assert found[other]["divergences"] == [{"seq": at, "reason": "row_mismatch", "detail": detail}]
    _resume_refused(url, other, other, at, detail)
    # the tree root's resume checks the children its own fold records (TreeProofs.held): the forged entry
    # proves nothing there either, so the moved root is named and nothing is run
    held = (
        f"sessions row parent_session_id {root!r} is not proven: the verified ledger of {root!r} ({events} "
        "events) records no spawn of this session (no agent_process_changed of one of its delegating calls "
        "names it)"
    )
    _resume_refused(url, root, other, at, held)


def test_a_parent_whose_ledger_was_edited_proves_no_child(tmp_path: Path) -> None:
    """``audit --all`` checks a parent once for all its children (``Auditor.parent_proofs``), but only a
    parent that passes: one whose event was edited names its own ``hash_mismatch``, and each child's parent
    link is unproven, as a resume of the child finds it."""
    db = str(tmp_path / "edited.db")
    root, lead, worker = _tree(db)
    seq = _seq_of(db, worker, '"custom_kind":"spawned_by"')
    execute(
        db,
        'UPDATE events SET event = CAST(replace(CAST(event AS TEXT), \'"goal":"lead"\', \'"goal":"evil"\') '
        f"AS BLOB) WHERE session_id = '{lead}' AND seq = 0",
    )
    code, out, _ = cli(db, "audit", "--all", "--json")
    assert code == 1, out
    found = {
        r["session_id"]: r["divergences"] for r in json.loads(out) if isinstance(r.get("session_id"), str)
    }
    assert found[root] == []
    assert [d["reason"] for d in found[lead]][:1] == ["hash_mismatch"]
    (unproven,) = [d for d in found[worker] if d["reason"] == "row_mismatch"]
    assert unproven["seq"] == seq and unproven["detail"].startswith(
        f"sessions row parent_session_id {lead!r} is not proven: session {lead!r} fails its check (seq 0: "
        "hash_mismatch"
    ), unproven
    assert unproven["detail"].endswith(f"; its spawned_by record at seq {seq} names it")
    code, _, err = cli(db, "resume", worker)
    assert code == 1 and f"ledger of session {worker} diverges at sequence {seq}: row_mismatch: " in err, err


def test_a_child_recorded_before_spawned_by(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tree recorded by a kernel that wrote no ``spawned_by`` (its children's starts end at
    ``budget_limits``) audits clean. Its child's row edited to name no parent is found through the parent
    the row's metadata names (unhashed: only where to look; that parent's verified ledger proves it), and,
    with the metadata cleared too, by ``audit --all``, which reads every ledger (the check of the child
    alone then sees a root)."""
    db = str(tmp_path / "legacy.db")
    with monkeypatch.context() as patched:
        patched.setattr(SpawnedBy, "payload", lambda self: None)  # the kernel before this record
        _, lead, worker = _tree(db)
    assert cli(db, "export", worker)[1].count('"spawned_by"') == 0
    assert cli(db, "audit", "--all")[0] == 0
    at = _seq_of(db, worker, '"custom_kind":"budget_limits"')
    code, out, _ = cli(db, "export", lead)
    lines = out.splitlines()
    spawn = next(i for i, line in enumerate(lines) if "agent_process_changed" in line and worker in line)
    _set_parent(db, worker, None)
    detail = (
        f"sessions row parent_session_id None, but the verified ledger of {lead!r} records spawning this session "
        f"(agent_process_changed at seq {spawn}; the row's metadata names it, its start holds no spawned_by)"
    )
    _named(db, worker, at, detail)
    _resume_refused(db, worker, worker, at, detail)

    execute(db, f"UPDATE sessions SET metadata = '{{}}' WHERE session_id = '{worker}'")
    assert cli(db, "runs", "--rebuild")[0] == 0  # nothing its own check can tell
    assert cli(db, "audit", worker)[0] == 0
    code, out, _ = cli(db, "audit", "--all")
    assert code == 1, out
    why = (
        f"sessions row parent_session_id None, but the verified ledger of {lead!r} records spawning this "
        f"session (agent_process_changed at seq {spawn}); its start (to seq {at}) holds no spawned_by record "
        "(a sub-agent recorded before it), so only that ledger names its parent"
    )
    assert f"PARENT    {worker}  seq {at}: row_mismatch ({why})" in out.splitlines(), out
    code, out, _ = cli(db, "audit", "--all", "--json")
    assert code == 1
    (row,) = [r for r in json.loads(out) if r.get("state") == "row_mismatch"]
    assert row == {
        "session_id": worker,
        "ok": False,
        "state": "row_mismatch",
        "seq": at,
        "parent": lead,
        "parent_seq": spawn,
    }


def test_a_spawned_by_record_that_does_not_hold_its_fields(tmp_path: Path) -> None:
    """A ``spawned_by`` record whose payload is not what the kernel writes (here re-chained into an unsigned
    ledger, which the chain alone cannot tell from the original) is named, field and seq, and refused."""
    from kernel.cli_agents import tree_agent

    db = tmp_path / "unsigned.db"
    with SqliteStore(db) as store:
        kernel = Kernel(store, tree_agent(), notary=None, heartbeat_s=None)
        assert kernel.run_sync("go", session_id="u").status == "suspended"
    lead = child_session_id(effect_key("u", 1, "d1"))
    assert cli(db, "verify", lead)[0] == 0
    seq = _seq_of(str(db), lead, '"custom_kind":"spawned_by"')

    def edit(at: int, data: bytes) -> bytes:
        return data.replace(b'"depth":1,', b'"depth":"1",') if at == seq else data

    rechain(db, lead, edit)
    detail = f"parent_session_id: the spawned_by record at seq {seq}: payload field 'depth' is '1'"
    code, out, _ = cli(db, "verify", lead)
    assert code == 1 and f"{PAD}seq {seq}: row_mismatch ({detail})" in out.splitlines(), out
    code, _, err = cli(db, "resume", lead, "--spec", "kernel.cli_agents:tree_agent")
    assert code == 1 and f"diverges at sequence {seq}: row_mismatch: {detail}; " in err, err
