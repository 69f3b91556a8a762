"""Issue 10 item 9: one default everywhere. The Python ``Kernel``, ``FlightlogSaver``, ``FlightlogSession``,
``submit`` and ``Worker`` sign with the user's log key (``Notary.from_env``, as ``flightlog run``) unless
told ``notary=None``."""

from __future__ import annotations

import asyncio
import importlib
from pathlib import Path

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from flightlog.fleet import Worker, submit
from flightlog.integrations.langgraph import FlightlogSaver, session_id_for
from flightlog.integrations.openai_agents import FlightlogSession
from flightlog.integrity.heads import HeadStore
from flightlog.integrity.keys import key_dir, load_keyring, load_signer
from flightlog.integrity.notary import USER_NOTARY, Notary, resolve_notary
from flightlog.integrity.verify import AuditReport, audit_session
from flightlog.kernel import Kernel
from flightlog.store import SqliteStore

from .helpers import SPEC


def _audit(store: SqliteStore, session_id: str) -> AuditReport:
    """What ``flightlog audit`` says of the session with the user's keys and retained heads."""
    return audit_session(store, session_id, keyring=load_keyring(), heads=HeadStore.default())


def _agent() -> object:
    return importlib.import_module("kernel.cli_agents").approval_agent()


def test_the_default_is_the_users_notary_created_on_first_use() -> None:
    assert not (key_dir() / "keys.json").exists()
    notary = resolve_notary(USER_NOTARY)
    assert notary is not None and notary.signer.verifier == load_signer().verifier
    assert (key_dir() / "keys.json").exists()
    assert resolve_notary(None) is None
    mine = Notary.from_env(every=2)
    assert resolve_notary(mine) is mine


def test_a_python_kernel_run_is_signed_and_sealed_by_default(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "k.db") as store:
        kernel = Kernel(store, _agent())  # type: ignore[arg-type]
        waiting = kernel.run_sync("take a note", handle_signals=False)
        from flightlog.kernel import approve

        approve(store, waiting.session_id, "n1")
        done = kernel.resume_sync(waiting.session_id, handle_signals=False)
        report = _audit(store, done.session_id)
    assert done.status == "completed"
    assert report.ok and report.sealed and report.seal_status == "completed"
    assert report.anchored == report.events == report.retained


def test_notary_none_opts_out(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "k.db") as store:
        result = Kernel(store, _agent(), notary=None).run_sync("take a note", handle_signals=False)  # type: ignore[arg-type]
        report = _audit(store, result.session_id)
    assert report.ok and report.checkpoints == 0 and report.unanchored == (0, report.events - 1)


def test_fleet_submit_and_worker_sign_by_default(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "f.db") as store:
        sid = submit(store, SPEC, "take a note")
        assert _audit(store, sid).anchored == 4  # the start (and the spec workers import) is signed
        stats = Worker(store, poll_s=0.05).run(max_sessions=1)
        report = _audit(store, sid)
    assert stats.results == {"suspended": 1}
    assert report.ok and report.unanchored is None and report.retained == report.events


@pytest.mark.parametrize("signed", [True, False])
def test_a_langgraph_saver_signs_by_default(tmp_path: Path, signed: bool) -> None:
    with SqliteStore(tmp_path / "g.db") as store:
        saver = FlightlogSaver(store) if signed else FlightlogSaver(store, notary=None)
        config = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}
        for step in range(64):  # one event per put: the default cadence signs at 64
            config = saver.put(config, empty_checkpoint(), {"step": step}, {})  # type: ignore[arg-type]
        report = _audit(store, session_id_for("t1"))
    assert report.ok
    assert (report.anchored, report.retained) == ((64, 64) if signed else (0, None))


@pytest.mark.parametrize("signed", [True, False])
def test_an_agents_sdk_session_signs_by_default(tmp_path: Path, signed: bool) -> None:
    db = tmp_path / "a.db"
    session = FlightlogSession("u1", db) if signed else FlightlogSession("u1", db, notary=None)
    try:
        items = [{"role": "user", "content": str(i)} for i in range(70)]
        asyncio.run(session.add_items(items))  # type: ignore[arg-type]
    finally:
        session.close()
    with SqliteStore(db) as store:
        report = _audit(store, session.ledger_session_id)
    assert report.ok and report.events == 71  # the opening event and 70 items
    assert report.anchored == (71 if signed else 0)
