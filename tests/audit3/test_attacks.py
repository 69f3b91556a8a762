"""Issue 10: nothing a session names is acted on before the session passes the full check ``audit`` makes.

The attacker writes the database file (re-chaining rows, deleting checkpoints, seals or index leaves,
restoring an old copy) and may delete files outside it (the retained heads); the log key stays private.
Every entry point that acts on a session runs :func:`flightlog.integrity.audit.require_intact` first.

| attack | caught by | how it shows |
|---|---|---|
| re-chain the ledger to name another agent module (or a ``.py`` path), delete the retained heads; ``resume`` | index log (the session's signed checkpoints are its leaves) | exit 1, ``fork`` at the first indexed size; nothing imported |
| edit the ``agent_spec`` of an unsigned session (or an unanchored tail) and re-chain; ``resume`` | spec must lie under a verified signed checkpoint | exit 1, "``agent_spec`` event at seq N (payload field 'spec') is not covered by a verified signed checkpoint"; nothing imported |
| a signed ledger naming a spec that is not ``module:attribute`` (a file path); ``resume`` | ``is_logical`` on the recorded spec | exit 1 naming the field; nothing imported |
| drop the seal of a finished session (and its checkpoint); ``resume`` | retained head, index log | exit 1, ``rollback`` (was: "completed", exit 0) |
| restore an older copy of the file; ``resume``/``approve`` | retained head | exit 1, ``rollback`` (was: "waiting for approval", exit 3) |
| re-sign the checkpoints with another key; ``resume``/``deny`` | keyring | exit 1, ``bad_checkpoint`` |
| re-chain with the retained head kept; ``resume``/``abort`` | retained head, index log | exit 1, ``fork`` |
| re-chain a queued fleet session to name another module | worker's full check (``submit`` signs the start) | refused, parked, nothing imported or written |
| re-chain a waiting session; decide on it in the dashboard | ``approve`` / ``deny`` run the full check | HTTP 409 "not recorded: ... diverges"; nothing written |
| re-chain, then delete the retained head; single-session ``verify``/``audit`` | index log | ``fork`` at the first indexed size; a note says the head file is missing while the index log knows the session |
| delete the session's index leaves; single-session ``verify`` | index log's signed checkpoint | ``index log leaf 0: gap``, ``checkpoint_mismatch`` |
"""

from __future__ import annotations

import importlib
import json
import shutil
import sqlite3
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from flightlog.errors import LedgerIntegrityError
from flightlog.events import Custom, RunStarted
from flightlog.fleet import Worker, submit
from flightlog.integrity.audit import Auditor, require_intact
from flightlog.integrity.heads import HeadStore
from flightlog.integrity.keys import LogSigner, load_signer
from flightlog.integrity.notary import Notary
from flightlog.kernel import Kernel
from flightlog.kernel.spec import is_logical
from flightlog.recorder import Recorder
from flightlog.store import SqliteStore
from flightlog.web.app import create_app
from flightlog.web.security import Auth

from .helpers import (
    SPEC,
    cli,
    execute,
    rechain,
    refused,
    resign_checkpoints,
    suspended_run,
    swap_goal,
    swap_spec,
    unchanged,
)

SID = "sess-1"


@dataclass(frozen=True)
class Plant:
    """A module the attacker wants imported: importing it creates ``marker``."""

    module: str
    file: Path
    marker: Path


@pytest.fixture
def plant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Plant]:
    name = f"planted_{uuid.uuid4().hex[:12]}"
    folder = tmp_path / "planted"
    folder.mkdir()
    marker = tmp_path / "IMPORTED"
    source = folder / f"{name}.py"
    source.write_text(f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\nagent = None\n")
    monkeypatch.syspath_prepend(str(folder))
    yield Plant(name, source, marker)
    sys.modules.pop(name, None)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "flightlog.db"


def _approval_agent() -> object:
    return importlib.import_module("kernel.cli_agents").approval_agent()


# ─── item 2: nothing the ledger names is imported before the full check ──────────────────────


@pytest.mark.parametrize("form", ["module", "file"])
def test_resume_imports_nothing_a_rechained_ledger_names(db: Path, plant: Plant, form: str) -> None:
    sid = suspended_run(db)
    assert cli(db, "approve", sid, "n1")[0] == 0
    named = f"{plant.module}:agent" if form == "module" else f"{plant.file}:agent"
    rechain(db, sid, swap_spec(named))
    shutil.rmtree(HeadStore.default().directory)  # the retained heads go too: only the index log is left
    line = refused(
        db, "resume", sid, reason="fork: the stored rows disagree with its checkpoint in the signed"
    )
    assert "diverges at sequence 3:" in line  # the agent_spec is seq 3, under the start's checkpoint
    assert not plant.marker.exists()


def test_resume_never_imports_the_spec_of_an_unsigned_session(db: Path, plant: Plant) -> None:
    with SqliteStore(db) as store:
        kernel = Kernel(store, _approval_agent(), notary=None)  # type: ignore[arg-type]
        result = kernel.run_sync("take a note", metadata={"agent_spec": SPEC}, handle_signals=False)
    assert result.status == "suspended"
    rechain(db, result.session_id, swap_spec(f"{plant.module}:agent"))  # nothing signed: undetectable
    code, _, err = cli(db, "resume", result.session_id)
    assert code == 1
    assert "the agent_spec event at seq 3 (payload field 'spec') is not covered by a verified signed" in err
    assert "(give --spec)" in err and len(err.strip().splitlines()) == 1
    assert not plant.marker.exists()
    code, out, err = cli(db, "resume", result.session_id, "--spec", SPEC)  # the operator's own choice
    assert code == 3, err
    assert "waiting: n1" in out


def test_a_recorded_spec_in_another_form_is_refused_naming_the_field(db: Path, plant: Plant) -> None:
    with SqliteStore(db) as store:  # a key holder recorded a file path (no version of `run` does)
        rec = Recorder.create(store, session_id=SID, source="kernel", notary=Notary.from_env())
        rec.append_many(
            [
                RunStarted(run_id="r", goal="g"),
                Custom(custom_kind="agent_spec", payload={"spec": f"{plant.file}:agent"}),
            ]
        )
        rec.checkpoint()
    code, _, err = cli(db, "resume", SID)
    assert code == 1
    assert "the agent_spec event at seq 1 (payload field 'spec') is not a module:attribute reference" in err
    assert not plant.marker.exists()


@pytest.mark.parametrize(
    ("spec", "logical"),
    [
        ("examples.city_agent:agent", True),
        ("pkg.mod:factory.attr", True),
        ("_private:x", True),
        ("evil.py:agent", False),
        ("/tmp/evil.py:agent", False),
        ("../up:agent", False),
        ("agent.toml", False),
        (".relative:agent", False),
        ("mod:", False),
        (":agent", False),
        ("a b:c", False),
        ("mod:a:b", False),
        ("mod\n:agent", False),
        ("modé:agent", False),
    ],
)
def test_only_dotted_module_attribute_specs_are_logical(spec: str, logical: bool) -> None:
    assert is_logical(spec) is logical


def test_run_signs_its_start_so_the_spec_is_anchored_at_once(db: Path) -> None:
    sid = suspended_run(db)
    with SqliteStore(db) as store:
        first = min(c.size for c in store.checkpoints(sid))
        spec_seq = next(
            r.seq for r in store.read_events(sid) if b'"custom_kind":"agent_spec"' in r.event_bytes
        )
    assert spec_seq < first == 4  # run_started, capability evidence, budget limits, agent_spec


# ─── item 3: every entry point runs the full check first ──────────────────────────────────────


def _completed(db: Path, before_approval: Path | None = None) -> str:
    sid = suspended_run(db)
    if before_approval is not None:
        shutil.copyfile(db, before_approval)
    assert cli(db, "approve", sid, "n1")[0] == 0
    code, out, err = cli(db, "resume", sid)
    assert code == 0, out + err
    return sid


def test_resume_of_a_finished_session_whose_seal_was_dropped_is_refused(db: Path) -> None:
    sid = _completed(db)
    with SqliteStore(db) as store:
        seal = store.get_session(sid).head_seq
    rechain(db, sid, unchanged, keep=seal)  # the seal row goes, with the checkpoints the attacker cannot redo
    line = refused(db, "resume", sid, reason=f"at seq {seal}: rollback")
    assert "the retained head covers" in line


def test_resume_and_approve_of_a_rolled_back_file_are_refused(db: Path, tmp_path: Path) -> None:
    old = tmp_path / "before-approval.db"
    sid = _completed(db, before_approval=old)
    refused(old, "resume", sid, reason="rollback")  # was: "waiting for approval", exit 3
    refused(old, "approve", sid, "n1", reason="rollback")
    with SqliteStore(old) as store:
        assert store.get_session(sid).status == "suspended"  # nothing written


def test_checkpoints_signed_by_another_key_refuse_resume_and_deny(db: Path) -> None:
    sid = suspended_run(db)
    resign_checkpoints(db, sid, LogSigner.generate(load_signer().name))  # same key name, another key
    # None of the checkpoints counts, so the first divergence is the retained head's, at seq 0.
    refused(db, "resume", sid, reason="stale_head: the database's latest signed checkpoint covers 0 events")
    refused(db, "deny", sid, "n1", reason="stale_head")
    with SqliteStore(db) as store, pytest.raises(LedgerIntegrityError) as info:
        require_intact(store, sid)
    assert {d.reason for d in info.value.divergences} == {"stale_head", "bad_checkpoint"}
    forged = [d for d in info.value.divergences if d.reason == "bad_checkpoint"]
    assert forged and all("no signature by a trusted key" in d.detail for d in forged)


def test_a_rechained_ledger_with_a_retained_head_refuses_resume_and_abort(db: Path) -> None:
    sid = suspended_run(db)
    rechain(db, sid, swap_goal("take every note"))
    refused(db, "resume", sid, reason="fork")
    refused(db, "abort", sid, reason="fork")
    with SqliteStore(db) as store:
        assert store.get_session(sid).status == "suspended"


def test_a_rolled_back_decision_is_caught_because_decisions_are_signed(db: Path, tmp_path: Path) -> None:
    """A human's deny, then the file restored to before it: the decision was signed, so the retained head
    remembers it (an unsigned decision would sit in an unanchored tail and vanish silently)."""
    sid = suspended_run(db)
    shutil.copyfile(db, tmp_path / "old.db")
    assert cli(db, "deny", sid, "n1", "--reason", "no")[0] == 0
    with SqliteStore(db) as store:
        report = require_intact(store, sid)
    assert report.unanchored is None  # the decision is under a signed checkpoint
    refused(tmp_path / "old.db", "approve", sid, "n1", reason="rollback")


def test_the_worker_refuses_a_tampered_session_and_imports_nothing(
    db: Path, plant: Plant, caplog: pytest.LogCaptureFixture
) -> None:
    with SqliteStore(db) as store:
        sid = submit(store, SPEC, "take a note")
    rechain(db, sid, swap_spec(f"{plant.module}:agent"))
    with SqliteStore(db) as store:
        before = store.get_session(sid).head_seq
        stats = Worker(store, poll_s=0.05).run(max_sessions=1)
        assert (stats.claimed, stats.refused, stats.results, stats.errors) == (1, 1, {}, 0)
        assert store.get_session(sid).head_seq == before
        lease = store.get_lease(sid)
        assert lease is not None and lease.holder is None  # released, parked until the ledger moves
    assert not plant.marker.exists()
    assert f"refused session {sid}: ledger of session {sid} diverges at sequence 3: fork" in caplog.text


def test_the_dashboard_refuses_a_decision_on_a_tampered_session(db: Path) -> None:
    from web.conftest import TOKEN, opener, run_gated

    assert run_gated(db, "g1").status == "suspended"
    rechain(db, "g1", swap_goal("write every note"))
    auth = Auth(TOKEN)
    base = "http://127.0.0.1:8000"
    with TestClient(create_app(opener(db), token=TOKEN), base_url=base) as client:
        client.cookies.set("flightlog_ui_8000", auth.cookie_value)
        form = {
            "csrf": auth.csrf,
            "session_id": "g1",
            "call_id": "w1",
            "decision": "approve",
            "operator": "eve",
        }
        response = client.post(
            "/approvals/decide", data=form, headers={"Origin": base, "Accept": "application/json"}
        )
    assert response.status_code == 409
    assert "not recorded: ledger of session g1 diverges" in response.json()["error"]
    with SqliteStore(db) as store:
        assert store.get_session("g1").status == "suspended"


def test_a_live_append_during_the_check_is_not_taken_for_tampering(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with SqliteStore(db) as store:
        rec = Recorder.create(store, session_id=SID, notary=Notary.from_env(every=4))
        for i in range(6):
            rec.append(Custom(custom_kind="step", payload={"i": i}))
        reads = iter(range(1_000))
        original = SqliteStore.read_events

        def racing(self: SqliteStore, session_id: str, **kwargs: object) -> Iterator[object]:
            if next(reads) == 0:  # the first check: another writer appends after the session row was read
                rec.append(Custom(custom_kind="step", payload={"i": "late"}))
            yield from original(self, session_id, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(SqliteStore, "read_events", racing)
        report = require_intact(store, SID)
    assert report.ok and report.events == 7


# ─── item 4: single-session checks consult the index log ──────────────────────────────────────


def _signed_session(db: Path) -> tuple[str, Path]:
    """A session of 10 events with checkpoints at 4 and 8; its ledger id and retained head file."""
    with SqliteStore(db) as store:
        rec = Recorder.create(store, session_id=SID, notary=Notary.from_env(every=4))
        for i in range(10):
            rec.append(Custom(custom_kind="step", payload={"i": i}))
        ledger_id = store.ledger_id()
    return ledger_id, HeadStore.default().path(ledger_id, SID)


def _forge_step(seq: int, data: bytes) -> bytes:
    return data.replace(b'"i":3', b'"i":30') if seq == 3 else data


def test_verify_catches_a_rechained_session_whose_retained_head_was_deleted(db: Path) -> None:
    _, head = _signed_session(db)
    rechain(db, SID, _forge_step)
    head.unlink()
    code, out, _ = cli(db, "verify", SID)
    assert code == 1
    assert (
        "seq 3: fork (the stored rows disagree with its checkpoint in the signed index log (leaf 0) at size 4)"
        in out
    )
    assert (
        f"note: no retained head ({head}), but the signed index log holds this session's checkpoint at "
        "size 8 (leaf 1): the head file was deleted, or this machine never wrote the session"
    ) in out
    code, out, _ = cli(db, "audit", SID, "--json")
    (row,) = json.loads(out)
    assert code == 1 and not row["ok"] and row["indexed"] == 8 and row["anchored"] == 0
    assert [(d["seq"], d["reason"]) for d in row["divergences"]] == [(3, "fork"), (7, "fork")]
    with SqliteStore(db) as store, pytest.raises(LedgerIntegrityError) as info:
        require_intact(store, SID)
    assert info.value.seq == 3 and info.value.reason.startswith("fork: ")


def test_a_missing_retained_head_the_index_log_knows_is_noted(db: Path) -> None:
    _, head = _signed_session(db)
    head.unlink()
    code, out, _ = cli(db, "verify", SID)
    assert code == 0
    assert f"note: no retained head ({head}), but the signed index log holds this session's checkpoint" in out
    assert "in the index log up to size 8" in out


def test_a_damaged_index_log_refuses_a_single_session(db: Path) -> None:
    _signed_session(db)
    execute(db, "DELETE FROM index_leaves WHERE idx = 0")  # the session's first indexed checkpoint
    code, out, _ = cli(db, "verify", SID)
    assert code == 1 and "index log leaf 0: gap (index leaves 0..0 missing)" in out
    with SqliteStore(db) as store, pytest.raises(LedgerIntegrityError) as info:
        require_intact(store, SID)
    assert info.value.seq is None and info.value.reason.startswith("index log leaf 0: gap")


def test_verify_all_reports_index_problems_once_on_the_index_row(db: Path) -> None:
    _signed_session(db)
    execute(db, "DELETE FROM index_leaves WHERE idx = 0")
    code, out, _ = cli(db, "verify", "--all", "--json")
    *sessions, index = json.loads(out)
    assert code == 1 and index["state"] == "index" and not index["ok"]
    assert [s["index_divergences"] for s in sessions] == [[]]


def test_an_auditor_for_a_notary_trusts_its_keys(db: Path, tmp_path: Path) -> None:
    own = Notary.for_signer(LogSigner.generate("test.example/log"), HeadStore(tmp_path / "own"), every=4)
    with SqliteStore(db) as store:
        rec = Recorder.create(store, session_id=SID, notary=own)
        for i in range(5):
            rec.append(Custom(custom_kind="step", payload={"i": i}))
        assert require_intact(store, SID, auditor=Auditor.for_notary(own)).anchored == 4
        with pytest.raises(LedgerIntegrityError, match="bad_checkpoint"):
            require_intact(store, SID)  # the user's keys never signed it


def test_a_session_the_database_cannot_find_is_still_a_usage_error(db: Path) -> None:
    suspended_run(db)
    code, _, err = cli(db, "resume", "nope")
    assert code == 2 and "nope" in err
    assert sqlite3.connect(db).execute("SELECT COUNT(*) FROM sessions").fetchone()[0] == 1
