"""The dashboard's runs list (``/runs``, ``/api/runs/page``): keyset pages, filters, sorts, escaping."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from flightlog import events as ev
from flightlog.recorder import Recorder
from flightlog.store import SqliteStore
from flightlog.web import runs_list
from flightlog.web.app import create_app
from flightlog.web.security import Auth
from runs.runs_page_cases import record_runs

from .conftest import TOKEN, opener


def test_the_runs_list_pages_filters_and_escapes(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runs_list, "PAGE_SIZE", 5)
    with SqliteStore(db_path) as store:
        record_runs(store)
        hostile = Recorder.create(store, session_id="<script>alert(1)</script>", created_at_ms=1)
        hostile.append(ev.RunStarted(run_id="x", goal="<img src=x onerror=alert(1)>"))
    with TestClient(create_app(opener(db_path), token=TOKEN), base_url="http://127.0.0.1:8000") as client:
        client.cookies.set("flightlog_ui_8000", Auth(TOKEN).cookie_value)
        seen: list[str] = []
        url: str | None = "/runs"
        while url is not None:
            page = client.get(url)
            assert page.status_code == 200
            seen += re.findall(r"<code>(r\d\d)</code>", page.text)
            found = re.search(r'<a rel="next" href="([^"]+)"', page.text)
            url = html.unescape(found.group(1)) if found else None
        assert seen == [f"r{n:02d}" for n in range(11, -1, -1)]
        assert "<script>alert(1)</script>" not in page.text and "&lt;script&gt;" in page.text
        terminal = client.get("/api/runs/page", params={"state": "terminal"}).json()
        assert [r["run_id"] for r in terminal["runs"]] == ["r09", "r06", "r03", "r00"]
        assert terminal["next"] is None and terminal["runs"][0]["outcome"] == "completed"
        found_text = client.get("/api/runs/page", params={"q": "needle"}).json()["runs"]
        assert [r["run_id"] for r in found_text] == ["r05"]
        oldest = client.get("/api/runs/page", params={"order": "asc"}).json()
        assert oldest["runs"][0]["run_id"] == "<script>alert(1)</script>" and oldest["next"]
        dated = client.get("/api/runs/page", params={"since": "2023-11-14", "until": "2023-11-15"}).json()
        assert len(dated["runs"]) == 5 and dated["runs"][0]["started"].startswith("2023-11-14")
        children = client.get("/runs", params={"parent": "r00"})
        assert re.findall(r"<code>(r\d\d)</code>", children.text) == ["r08", "r04"]
        forged = ({"cursor": f"{10**19}:r00"}, {"cursor": f"-{10**19}:r00"})  # past a 64-bit integer
        for bad in ({"state": "asleep"}, {"since": "yesterday"}, {"cursor": "x"}, {"sort": "name"}, *forged):
            assert client.get("/runs", params=bad).status_code == 400
            assert "error" in client.get("/api/runs/page", params=bad).json()


def test_the_runs_list_filters_by_outcome_as_runs_outcome_does(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runs_list, "PAGE_SIZE", 2)
    with SqliteStore(db_path) as store:
        record_runs(store)  # r09, r06, r03, r00 completed
        for sid, reason in (("x-failed", "failed"), ("x-cancelled", "cancelled")):
            recorder = Recorder.create(store, session_id=sid, created_at_ms=1_700_000_100_000)
            recorder.append(ev.RunStarted(run_id=sid, goal="ends"))
            recorder.append(ev.RunTerminal(reason=reason, turns_used=1, total_tokens=10))
    with TestClient(create_app(opener(db_path), token=TOKEN), base_url="http://127.0.0.1:8000") as client:
        client.cookies.set("flightlog_ui_8000", Auth(TOKEN).cookie_value)
        seen: list[str] = []
        url: str | None = "/runs?outcome=completed"
        while url is not None:  # pages of 2, filled past the runs of other outcomes
            page = client.get(url)
            assert page.status_code == 200
            found = re.findall(r"<code>([\w-]+)</code>", page.text)
            assert len(found) == 2 or 'rel="next"' not in page.text
            seen += found
            assert '<option value="completed" selected>completed</option>' in page.text  # the control
            more = re.search(r'<a rel="next" href="([^"]+)"', page.text)
            url = html.unescape(more.group(1)) if more else None
        assert seen == ["r09", "r06", "r03", "r00"]
        for word, run in (("failed", "x-failed"), ("cancelled", "x-cancelled"), ("aborted", "x-cancelled")):
            listed = client.get("/api/runs/page", params={"outcome": word}).json()
            assert [(r["run_id"], r["outcome"]) for r in listed["runs"]] == [(run, run[2:])]
        both = client.get("/api/runs/page", params={"outcome": "failed", "state": "terminal"}).json()
        assert [r["run_id"] for r in both["runs"]] == ["x-failed"]
        unknown = client.get("/api/runs/page", params={"outcome": "paused"})
        assert unknown.status_code == 400
        assert unknown.json()["error"] == (
            "unknown outcome 'paused': one of completed, failed, cancelled, interrupted, budget_exhausted"
        )
        clash = client.get("/runs", params={"outcome": "failed", "state": "running"})
        assert clash.status_code == 400 and "outcome=failed lists terminal runs" in clash.text


def test_the_runs_list_shows_each_runs_goal_escaped_and_bounded(db_path: Path) -> None:
    """Rows are not bare ids: each names its run's goal (the session's task, as the runs tree shows it),
    escaped and cut to 160 characters; a long id is cut by the page with its full value in the title."""
    long_id = "claude-code:491e126e-1e71-469c-ade2-fcc8af567c74:agent:afb92ff"
    with SqliteStore(db_path) as store:
        hostile = Recorder.create(store, task="<img src=x onerror=alert(1)> " + "w" * 300, session_id=long_id)
        hostile.append(ev.RunStarted(run_id="x", goal="ignored here: the task is the goal"))
    with TestClient(create_app(opener(db_path), token=TOKEN), base_url="http://127.0.0.1:8000") as client:
        client.cookies.set("flightlog_ui_8000", Auth(TOKEN).cookie_value)
        page = client.get("/runs").text
        (row,) = client.get("/api/runs/page").json()["runs"]
    assert row["goal"] == "<img src=x onerror=alert(1)> " + "w" * 131 + "… [169 more characters]"  # 160 kept
    assert '<td class="goal"><span title="&lt;img src=x onerror=alert(1)&gt; www' in page
    assert "<img src=x" not in page
    assert '<a class="cut" href="/session?id=claude-code%3A491e126e' in page and f'title="{long_id}"' in page
