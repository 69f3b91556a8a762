"""The fleet commands through typer's CliRunner: submit, worker, db copy (mounted as flightlog.cli.root does)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer
from typer.testing import CliRunner

from flightlog.cli.fleet import register
from flightlog.integrity.notary import Notary
from flightlog.integrity.verify import audit_session
from flightlog.recorder import verify_session
from flightlog.store import Store, open_store

SPEC = "fleet.fleet_agent:agent"


def _app(url: str) -> typer.Typer:
    app = typer.Typer()
    db_app = typer.Typer()
    app.add_typer(db_app, name="db")

    @app.callback()
    def main() -> None:
        """Test app."""

    @db_app.callback()
    def db() -> None:
        """Database maintenance."""

    @contextmanager
    def open_db(read_only: bool) -> Iterator[Store]:
        store = open_store(url, read_only=read_only)
        try:
            yield store
        finally:
            store.close()

    register(app, open_db)
    return app


def test_submit_then_worker_then_copy(store_url: str, out_dir: Path, tmp_path: Path) -> None:
    app = _app(store_url)
    runner = CliRunner()
    submitted = runner.invoke(
        app, ["submit", SPEC, "--goal", "g", "--criteria", "c", "--session", "x-1", "--json"]
    )
    assert submitted.exit_code == 0, submitted.output
    assert json.loads(submitted.stdout) == {"session_id": "x-1", "status": "queued"}
    ran = runner.invoke(app, ["worker", "--db", store_url, "-c", "2", "--idle-exit", "0.3", "--poll", "0.05"])
    assert ran.exit_code == 0, ran.output
    assert "claimed 1" in ran.stderr
    notary = Notary.from_env()  # the user's key and retained heads, as `flightlog run` uses them
    with open_store(store_url) as store:
        report = audit_session(store, "x-1", keyring=notary.keyring, heads=notary.heads)
        assert report.ok and report.summary().startswith("sealed (completed)"), report.summary()
    copied = runner.invoke(app, ["db", "copy", store_url, str(tmp_path / "copy.db"), "--json"])
    assert copied.exit_code == 0, copied.output
    assert json.loads(copied.stdout)["sessions"] == 1
    with open_store(tmp_path / "copy.db") as store:
        assert store.get_session("x-1").status == "completed"
        assert verify_session(store, "x-1").ok


def test_submit_refuses_a_file_spec(store_url: str) -> None:
    result = CliRunner().invoke(_app(store_url), ["submit", "agents/x.py:agent", "--goal", "g"])
    assert result.exit_code == 2


def test_approve_of_a_fleet_run_says_a_worker_resumes_it(store_url: str, out_dir: Path) -> None:
    from flightlog.cli.kernel import register as register_kernel
    from flightlog.fleet import submit
    from flightlog.kernel import Agent, Kernel, Policy, abort
    from flightlog.kernel.policy import Rule

    from . import fleet_agent

    base = fleet_agent.agent()
    gated = Agent(
        name=base.name, route=base.route, tools=base.tools, policy=Policy(rules=[Rule("ask", tool="*")])
    )
    app = _app(store_url)

    @contextmanager
    def open_db(read_only: bool) -> Iterator[Store]:
        with open_store(store_url, read_only=read_only) as store:
            yield store

    register_kernel(app, open_db)
    with open_store(store_url) as store:
        sid = submit(store, SPEC, fleet_agent.GOAL, session_id="f-1", agent=gated)
        first, *rest = Kernel(store, gated).resume_sync(sid, handle_signals=False).pending_calls
    worker = "a fleet worker, which resumes f-1 by itself (`flightlog worker` starts one)"
    approved = CliRunner().invoke(app, ["approve", sid, first])
    assert approved.exit_code == 0, approved.output
    assert f"approved {first} of f-1; continue with: {worker}" in approved.stdout
    assert "flightlog resume" not in approved.stdout
    listed = CliRunner().invoke(app, ["pending"])
    assert f"waiting for: {worker}" in listed.stdout
    with open_store(store_url) as store:  # an aborted fleet run: no worker claims it, resume does
        assert rest and abort(store, sid)
    denied = CliRunner().invoke(app, ["deny", sid, rest[0]])
    assert denied.exit_code == 0, denied.output
    assert "continue with: flightlog resume f-1" in denied.stdout
