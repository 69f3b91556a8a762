"""A store ``flightlog db copy`` retired (its source, read-only) says so on every dashboard page, naming
where the ledger went, and the refusal of a decision names it too; the live copy shows no such note."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from flightlog.cli import app
from flightlog.web.app import create_app
from flightlog.web.security import Auth

from .conftest import TOKEN, opener, run_gated

BASE = "http://127.0.0.1:8000"


def test_a_retired_store_says_where_its_ledger_went(tmp_path: Path, db_path: Path) -> None:
    assert run_gated(db_path, "g1").status == "suspended"
    live = tmp_path / "live.db"
    result = CliRunner().invoke(app, ["--db", str(db_path), "db", "copy", str(db_path), str(live)])
    assert result.exit_code == 0, result.stderr
    auth = Auth(TOKEN)
    with TestClient(create_app(opener(db_path), token=TOKEN), base_url=BASE) as client:
        client.cookies.set("flightlog_ui_8000", auth.cookie_value)
        for path in ("/", "/runs", "/session?id=g1"):
            page = client.get(path).text
            assert 'id="retired"' in page and f"Read-only: this store was moved to {live}" in page, path
        answer = client.post(
            "/approvals/decide",
            data={
                "csrf": auth.csrf,
                "next": "/",
                "session_id": "g1",
                "call_id": "w1",
                "decision": "approve",
                "operator": "ada",
            },
            headers={"Origin": BASE, "Accept": "application/json"},
        )
        assert answer.status_code == 409 and f"write to {live}" in answer.text
    with TestClient(create_app(opener(live), token=TOKEN), base_url=BASE) as client:
        client.cookies.set("flightlog_ui_8000", auth.cookie_value)
        assert 'id="retired"' not in client.get("/").text
