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
