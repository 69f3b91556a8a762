"""An imported session's creation time is its transcript's own first timestamp; where the source gives no
zone-aware time (aider and OpenHands write local times without a zone, SWE-agent trajectories and Agents SDK
``RunState`` none), it is the import time and ``ls`` and the dashboard say so."""

from __future__ import annotations

import calendar
import json
import time
from pathlib import Path

from typer.testing import CliRunner

from flightlog.cli import app

SAMPLES = Path(__file__).parent / "data" / "samples"
runner = CliRunner()


def _ls(db: Path) -> dict[str, dict[str, object]]:
    result = runner.invoke(app, ["--db", str(db), "ls", "--json"])
    assert result.exit_code == 0, result.output
    return {row["session_id"]: row for row in json.loads(result.stdout)}


def test_ls_says_which_creation_times_are_the_transcripts_and_which_the_imports(tmp_path: Path) -> None:
    db = tmp_path / "created.db"
    sources = [
        SAMPLES / "aider" / "aider_chat_history_excerpt.md",
        SAMPLES / "openai-agents" / "v1_13_pending_tool_approval.json",
        SAMPLES / "openhands" / "v0_basic.json",
        SAMPLES / "swe-agent" / "v1_function_calling_marshmallow-1867.traj",
        SAMPLES / "codex" / "claudecodelog_malformed_rollout-66666666.jsonl",
    ]
    before = time.time()
    for source in sources:
        result = runner.invoke(app, ["--db", str(db), "import", str(source)])
        assert result.exit_code == 0, result.output
    after = time.time()
    rows = _ls(db)

    codex = rows["codex:66666666-6666-4666-8666-666666666666"]
    assert (codex["created_from"], codex["created_at"]) == ("source", "2026-02-01T00:00:00.000Z")
    assert "source_clock" not in codex
    expected_clock = {
        "aider:2024-08-05 19:33:32": "2024-08-05 19:33:32",  # the first launch, local time, no zone
        "openhands:v0_basic": "2025-01-27T22:44:56.900854",  # the first event's timestamp, no zone
        "openai-agents:trace_179a5e809d614cf89ac5a1f24b415704": None,  # RunState holds no time
        "swe-agent:marshmallow-code__marshmallow-1867": None,  # nor does the trajectory
    }
    for session_id, clock in expected_clock.items():
        row = rows[session_id]
        assert row["created_from"] == "import", row
        assert row.get("source_clock") == clock, row
        created = calendar.timegm(time.strptime(str(row["created_at"])[:19], "%Y-%m-%dT%H:%M:%S"))
        assert before - 1 <= created <= after + 1, row  # the import's own time, UTC
    for session_id, row in rows.items():
        if session_id.startswith("core_job:"):
            assert row["created_from"] == "recorded"

    table = runner.invoke(app, ["--db", str(db), "ls"])
    lines = {line.split()[0]: line for line in table.stdout.splitlines()[1:]}
    assert "(import)" in lines["openhands:v0_basic"] and "(import)" not in lines[str(codex["session_id"])]


def test_the_session_page_labels_an_import_time_and_shows_the_transcripts_clock(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient
    from tests.web.conftest import opener
    from tests.web.test_web_http import AUTH, BASE, TOKEN

    from flightlog.importers import import_file
    from flightlog.store import SqliteStore
    from flightlog.web.app import create_app

    db = tmp_path / "page.db"
    with SqliteStore(db) as store:
        import_file(store, SAMPLES / "aider" / "aider_chat_history_excerpt.md")
        import_file(store, SAMPLES / "codex" / "claudecodelog_malformed_rollout-66666666.jsonl")
    with TestClient(create_app(opener(db), token=TOKEN), base_url=BASE) as client:
        client.cookies.set("flightlog_ui_8000", AUTH.cookie_value)
        aider = client.get("/session", params={"id": "aider:2024-08-05 19:33:32"})
        assert aider.status_code == 200
        assert "<dt>imported</dt>" in aider.text
        assert "the import time; the transcript&#39;s own clock: 2024-08-05 19:33:32, zone not recorded" in (
            aider.text
        )
        codex = client.get("/session", params={"id": "codex:66666666-6666-4666-8666-666666666666"})
        assert codex.status_code == 200
        assert "<dt>created</dt>" in codex.text and "import time" not in codex.text
