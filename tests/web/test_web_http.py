"""The dashboard over HTTP without a browser: access token, CSRF, same-origin, CSP, escaping, approvals,
the pages' content and the live streams."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from child_lines import read_line
from flightlog.errors import install_hint
from flightlog.events import (
    AgentProcessChanged,
    Custom,
    LlmCompleted,
    PageOut,
    PermissionResolved,
    RunStarted,
    ToolGated,
)
from flightlog.kernel import Agent, Kernel, pending
from flightlog.kernel.approvals import NO_SPEC_NOTE
from flightlog.kernel.context import ContextPolicy, ContextWindow
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.messages import Message, TextPart, ThinkingPart
from flightlog.recorder import Recorder
from flightlog.sessions import iter_events
from flightlog.store import SqliteStore
from flightlog.web.app import create_app
from flightlog.web.security import CSP, Auth
from flightlog.web.server import DashboardServer
from flightlog.web.views import clip, sanitize, visible

from .conftest import BIDI, HUGE, IMG, SCRIPT, TOKEN, echo, opener, record_hostile, resume_gated, run_gated

BASE = "http://127.0.0.1:8000"
ORIGIN = {"Origin": BASE}
AUTH = Auth(TOKEN)


@pytest.fixture
def client(db_path: Path) -> Iterator[TestClient]:
    """A client holding the session cookie (as a browser would after opening the printed URL)."""
    with TestClient(create_app(opener(db_path), token=TOKEN), base_url=BASE) as c:
        c.cookies.set("flightlog_ui_8000", AUTH.cookie_value)
        yield c


@pytest.fixture
def anonymous(db_path: Path) -> Iterator[TestClient]:
    """A client with no credentials."""
    with TestClient(create_app(opener(db_path), token=TOKEN), base_url=BASE, follow_redirects=False) as c:
        yield c


def _form(**fields: str) -> dict[str, str]:
    return {"csrf": AUTH.csrf, "next": "/", **fields}


# ─── access token ─────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    "path", ["/", "/session?id=x", "/api/runs", "/api/event?session=x&seq=0", "/static/app.js", "/nope"]
)
def test_every_request_without_the_token_is_401(anonymous: TestClient, path: str) -> None:
    response = anonymous.get(path)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert "token" in response.text


def test_wrong_token_cookie_or_bearer_is_401(anonymous: TestClient) -> None:
    assert anonymous.get("/?token=wrong-token-value").status_code == 401
    assert anonymous.get("/", headers={"Authorization": "Bearer wrong-token-value"}).status_code == 401
    assert anonymous.get("/", headers={"Authorization": f"Basic {TOKEN}"}).status_code == 401
    anonymous.cookies.set("flightlog_ui_8000", TOKEN)  # the token itself is not the cookie value
    assert anonymous.get("/").status_code == 401
    anonymous.cookies.clear()
    anonymous.cookies.set("flightlog_ui_9999", AUTH.cookie_value)  # another port's dashboard
    assert anonymous.get("/").status_code == 401


def test_token_in_the_url_sets_a_strict_httponly_cookie_and_drops_the_token(anonymous: TestClient) -> None:
    response = anonymous.get(f"/session?id=abc&token={TOKEN}&at=3")
    assert response.status_code == 303
    assert response.headers["location"] == "/session?id=abc&at=3"
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"flightlog_ui_8000={AUTH.cookie_value};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    assert TOKEN not in cookie
    assert anonymous.get("/").status_code == 200  # the cookie jar now holds it


def test_bearer_header_is_accepted(anonymous: TestClient) -> None:
    response = anonymous.get("/api/runs", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200
    queue = {"total": 0, "exact": True, "first": 0, "last": 0, "more": 0, "earlier": "", "later": ""}
    assert response.json() == {
        "runs": [],
        "unreadable": [],
        "pending": [],
        "waiting": [],
        "in_doubt": [],
        "queue": queue,
    }


def test_a_foreign_host_header_is_refused(client: TestClient) -> None:
    """DNS rebinding: a page on evil.example resolving to 127.0.0.1 sends Host: evil.example."""
    response = client.get("/", headers={"Host": "evil.example:8000"})
    assert response.status_code == 400
    assert client.get("/", headers={"Host": "localhost:8000"}).status_code == 200


def test_the_token_must_be_long_enough(db_path: Path) -> None:
    with pytest.raises(ValueError, match="at least 8"):
        create_app(opener(db_path), token="short")


# ─── headers ──────────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    "path", ["/", "/static/app.js", "/static/app.css", "/session?id=missing", "/?state=x"]
)
def test_security_headers_on_every_response(client: TestClient, anonymous: TestClient, path: str) -> None:
    for response in (client.get(path), anonymous.get(path)):
        csp = response.headers["content-security-policy"]
        assert csp == CSP
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "default-src 'none'" in csp
        assert "frame-ancestors 'none'" in csp
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["cache-control"] == "no-store"
        assert response.headers["referrer-policy"] == "same-origin"


def test_pages_have_no_inline_script_or_style(client: TestClient, db_path: Path) -> None:
    run_gated(db_path, "g1")
    for path in ("/", "/session?id=g1&at=3"):
        html = client.get(path).text
        scripts = re.findall(r"<script\b[^>]*>", html)
        assert scripts[0] == '<script src="/static/app.js" defer>'
        assert all(re.fullmatch(r'<script src="/static/[a-z]+\.js" defer>', s) for s in scripts), scripts
        assert "<style" not in html and " style=" not in html
        assert not re.search(r"<[^>]+\son[a-z]+=", html)


# ─── approvals: CSRF, same origin, what is recorded ───────────────────────────────────────────


def test_approve_records_user_responder_and_the_operator(client: TestClient, db_path: Path) -> None:
    assert run_gated(db_path, "g1").status == "suspended"
    page = client.get("/").text
    assert 'name="call_id" value="w1"' in page and AUTH.csrf in page
    response = client.post(
        "/approvals/decide",
        data=_form(session_id="g1", call_id="w1", decision="approve", operator="Ada Lovelace"),
        headers=ORIGIN,
        follow_redirects=False,
    )
    assert response.status_code == 303 and response.headers["location"] == "/"
    with SqliteStore(db_path, read_only=True) as store:
        assert pending(store, "g1") == []
        events = [e for _r, e in _events(store, "g1")]
    gated = next(i for i, e in enumerate(events) if isinstance(e, ToolGated))
    resolved = [e for e in events[gated:] if isinstance(e, PermissionResolved)]
    assert [(e.approved, e.responder) for e in resolved] == [(True, "user")]
    decisions = [e.payload for e in events if isinstance(e, Custom) and e.custom_kind == "approval_decision"]
    assert decisions[-1]["responder"] == "Ada Lovelace" and decisions[-1]["approved"] is True
    # decided, not resumed: the dashboard lists it with who decided and the command that continues it
    assert "flightlog resume g1" in client.get("/").text
    assert "w1 (write_note) approved by Ada Lovelace" in client.get("/").text
    session_page = client.get("/session?id=g1").text
    assert "flightlog resume g1" in session_page
    assert "call w1 approved by Ada Lovelace" in session_page  # the timeline names the operator
    assert "approved by user" not in session_page
    waiting = client.get("/api/runs").json()["waiting"]
    assert [w["decisions"] for w in waiting] == [["w1 (write_note) approved by Ada Lovelace"]]
    assert resume_gated(db_path, "g1").status == "completed"
    assert "flightlog resume g1" not in client.get("/").text


def test_deny_with_a_reason_over_json(client: TestClient, db_path: Path) -> None:
    run_gated(db_path, "g2")
    response = client.post(
        "/approvals/decide",
        data=_form(session_id="g2", call_id="w1", decision="deny", operator="bob", reason="not today"),
        headers={**ORIGIN, "Accept": "application/json"},
    )
    assert response.status_code == 200
    resume = f"flightlog resume g2 --spec MODULE:ATTR ({NO_SPEC_NOTE})"  # run from Python: no spec recorded
    assert response.json() == {"ok": True, "message": "denied w1 as bob", "resume": resume}
    with SqliteStore(db_path, read_only=True) as store:
        kinds = [e.kind for _r, e in _events(store, "g2")]
    assert kinds[-3:] == ["permission_resolved", "tool_denied", "custom"]
    again = client.post(
        "/approvals/decide",
        data=_form(session_id="g2", call_id="w1", decision="approve", operator="bob"),
        headers={**ORIGIN, "Accept": "application/json"},
    )
    assert again.status_code == 409 and again.json()["ok"] is False


@pytest.mark.parametrize(
    ("csrf", "headers"),
    [
        pytest.param(None, ORIGIN, id="no-csrf"),
        pytest.param("0" * 64, ORIGIN, id="wrong-csrf"),
        pytest.param(AUTH.csrf, {"Origin": "http://evil.example"}, id="cross-origin"),
        pytest.param(AUTH.csrf, {"Origin": "http://127.0.0.1:9999"}, id="other-port"),
        pytest.param(AUTH.csrf, {"Origin": "null"}, id="opaque-origin"),
        pytest.param(AUTH.csrf, {"Referer": "http://evil.example/page"}, id="cross-site-referer"),
        pytest.param(AUTH.csrf, {}, id="no-origin-no-referer"),
    ],
)
def test_unsafe_writes_are_refused_and_record_nothing(
    client: TestClient, db_path: Path, csrf: str | None, headers: dict[str, str]
) -> None:
    run_gated(db_path, "g3")
    fields = {"session_id": "g3", "call_id": "w1", "decision": "approve", "operator": "mallory", "next": "/"}
    if csrf is not None:
        fields["csrf"] = csrf
    response = client.post("/approvals/decide", data=fields, headers=headers, follow_redirects=False)
    assert response.status_code == 403
    with SqliteStore(db_path, read_only=True) as store:
        assert [c.call_id for c in pending(store, "g3")] == ["w1"]


def test_same_origin_referer_without_origin_is_accepted(client: TestClient, db_path: Path) -> None:
    run_gated(db_path, "g4")
    response = client.post(
        "/approvals/decide",
        data=_form(session_id="g4", call_id="w1", decision="approve", operator="ann"),
        headers={"Referer": f"{BASE}/session?id=g4"},
        follow_redirects=False,
    )
    assert response.status_code == 303


def test_a_bearer_client_needs_no_csrf(anonymous: TestClient, db_path: Path) -> None:
    run_gated(db_path, "g5")
    response = anonymous.post(
        "/approvals/decide",
        data={"session_id": "g5", "call_id": "w1", "decision": "approve", "operator": "ci-bot"},
        headers={"Authorization": f"Bearer {TOKEN}", "Accept": "application/json"},
    )
    assert response.status_code == 200 and response.json()["ok"] is True


def test_gets_cannot_decide_and_a_token_url_cannot_post(anonymous: TestClient, db_path: Path) -> None:
    run_gated(db_path, "g6")
    assert anonymous.post(f"/approvals/decide?token={TOKEN}", data={}).status_code == 401
    anonymous.cookies.set("flightlog_ui_8000", AUTH.cookie_value)
    assert anonymous.get("/approvals/decide").status_code == 405


@pytest.mark.parametrize(
    ("fields", "status"),
    [
        pytest.param({"decision": "approve", "operator": ""}, 400, id="no-operator"),
        pytest.param({"decision": "approve", "operator": "x\u202ey"}, 400, id="bidi-operator"),
        pytest.param({"decision": "approve", "operator": "o" * 81}, 400, id="long-operator"),
        pytest.param({"decision": "approve", "operator": "ann\u00a0lee"}, 400, id="nbsp-operator"),
        pytest.param({"decision": "approve", "operator": "ann\tlee"}, 400, id="tab-operator"),
        pytest.param({"decision": "approve", "operator": "ann\u2028"}, 400, id="separator-operator"),
        pytest.param({"decision": "maybe", "operator": "ann"}, 400, id="bad-decision"),
        pytest.param({"decision": "approve", "operator": "ann", "call_id": "nope"}, 409, id="not-pending"),
        pytest.param({"decision": "approve", "operator": "ann", "session_id": "nope"}, 404, id="no-session"),
    ],
)
def test_bad_decisions_are_refused(
    client: TestClient, db_path: Path, fields: dict[str, str], status: int
) -> None:
    run_gated(db_path, "g7")
    data = _form(**{"session_id": "g7", "call_id": "w1", **fields})
    response = client.post("/approvals/decide", data=data, headers=ORIGIN, follow_redirects=False)
    assert response.status_code == status
    with SqliteStore(db_path, read_only=True) as store:
        assert len(pending(store, "g7")) == 1


def test_form_size_and_type_are_checked(client: TestClient) -> None:
    big = client.post(
        "/approvals/decide",
        content=b"a=" + b"x" * 70_000,
        headers={**ORIGIN, "Content-Type": "application/x-www-form-urlencoded"},
    )
    assert big.status_code == 413
    as_json = client.post("/approvals/decide", json={"csrf": AUTH.csrf}, headers=ORIGIN)
    assert as_json.status_code == 415


def test_redirects_stay_on_the_dashboard(client: TestClient, db_path: Path) -> None:
    for index, target in enumerate(["//evil.example/x", "https://evil.example/", "/\\evil"]):
        sid = f"r{index}"
        run_gated(db_path, sid)
        response = client.post(
            "/approvals/decide",
            data={**_form(session_id=sid, call_id="w1", decision="approve", operator="ann"), "next": target},
            headers=ORIGIN,
            follow_redirects=False,
        )
        assert response.headers["location"] == "/"


# ─── escaping and hostile content ─────────────────────────────────────────────────────────────


def test_hostile_content_is_escaped_cut_and_made_visible(client: TestClient, db_path: Path) -> None:
    with SqliteStore(db_path) as store:
        sid = record_hostile(store)
    for path in ("/", f"/session?id={sid}&at=3"):
        html = client.get(path).text
        assert SCRIPT not in html and "<img" not in html and 'onerror="' not in html
        assert "\u202e" not in html and "\u2066" not in html and "\u200b" not in html and "\x07" not in html
        assert "\U000e0041" not in html
        assert len(html) < 200_000, "the 2 MB string is cut for display"
    html = client.get(f"/session?id={sid}").text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=" in html
    assert "[U+202E]" in html and "[U+2066]" in html and "[U+0007]" in html and "[U+E0041]" in html
    assert "more characters]" in html  # the cut is said
    data = client.get("/api/runs").json()
    text = json.dumps(data, ensure_ascii=False)
    assert "\u202e" not in text
    assert data["runs"][0]["task"] == "task " + IMG  # JSON is data: escaping is the renderer's job
    raw = client.get(f"/api/event?session={sid}&seq=3")
    assert raw.headers["content-type"].startswith("application/json")
    assert raw.headers["x-content-type-options"] == "nosniff"
    parsed = raw.json()
    assert parsed["payload"]["big"] == HUGE and parsed["payload"]["key"] == IMG
    goal = client.get(f"/api/event?session={sid}&seq=0")
    assert "\u202e" not in goal.text and "\\u202e" in goal.text  # same JSON value, inert text
    assert goal.json()["goal"] == f"goal {SCRIPT} {BIDI}"


def test_display_helpers() -> None:
    assert visible("a\u202eb\tc\nd\x00") == "a[U+202E]b\tc\nd[U+0000]"
    assert visible(visible("\u202e")) == "[U+202E]"
    assert clip("abcdef", 3) == "abc… [3 more characters]" and clip("abc", 3) == "abc"
    assert sanitize({"k\u202e": ["\u2066", 1, None]}) == {"k[U+202E]": ["[U+2066]", 1, None]}


# ─── pages ────────────────────────────────────────────────────────────────────────────────────


def test_runs_page_filters_and_tree(client: TestClient, db_path: Path) -> None:
    run_gated(db_path, "g8")
    with SqliteStore(db_path) as store:
        rec = Recorder.create(store, task="finished work", session_id="done-1")
        rec.append(RunStarted(run_id="d", goal="finished work"))
        rec.finish("completed")
    html = client.get("/").text
    assert 'data-run="g8"' in html and 'data-run="done-1"' in html and "finished work" in html
    waiting = client.get("/?state=waiting_input").text
    assert 'data-run="g8"' in waiting and 'data-run="done-1"' not in waiting
    terminal = client.get("/?state=terminal&source=direct").text
    assert 'data-run="done-1"' in terminal and 'data-run="g8"' not in terminal
    assert client.get("/?state=bogus").status_code == 400
    assert client.get("/api/runs?source=bogus").status_code == 400
    assert client.get("/?state=&source=").status_code == 200


def test_children_nest_under_their_parent(client: TestClient, db_path: Path) -> None:
    with SqliteStore(db_path) as store:
        parent = Recorder.create(store, task="parent work", session_id="parent-1")
        parent.append(RunStarted(run_id="p", goal="parent work"))
        parent.append(
            AgentProcessChanged(
                turn=1,
                agent_id="child-1",
                parent_session_id="parent-1",
                role="worker",
                isolation="shared",
                context_inheritance="none",
                state="running",
            )
        )
    html = client.get("/").text
    nested = re.search(
        r'data-run="parent-1".*?<ul class="tree">\s*<li class="run state-running" data-run="child-1"',
        html,
        re.S,
    )
    assert nested, html
    data = client.get("/api/runs").json()
    assert [r["id"] for r in data["runs"]] == ["parent-1"]
    child = data["runs"][0]["children"][0]
    assert child["id"] == "child-1" and child["href"] == ""  # a process entry without a session: no link


def test_a_child_whose_parent_is_filtered_out_is_drawn_under_a_marker_naming_it(
    client: TestClient, db_path: Path
) -> None:
    with SqliteStore(db_path) as store:
        parent = Recorder.create(store, task="parent work", session_id="parent-2")
        parent.append(RunStarted(run_id="p", goal="parent work"))
        for agent in ("child-2", "child-3"):
            parent.append(
                AgentProcessChanged(
                    turn=1,
                    agent_id=agent,
                    parent_session_id="parent-2",
                    role="worker",
                    isolation="shared",
                    context_inheritance="none",
                    state="running",
                )
            )
        parent.finish("completed")
    data = client.get("/api/runs", params={"state": "running"}).json()
    assert sorted((r["id"], r["unlisted_parent"]) for r in data["runs"]) == [
        ("child-2", "parent-2"),
        ("child-3", "parent-2"),
    ]
    html = client.get("/?state=running").text
    drawn = re.search(
        r'<li class="unlisted-parent muted">\(parent <a href="/session\?id=parent-2">parent-2</a> not listed\)</li>'
        r'\s*<li class="run state-running orphan" data-run="child-[23]"',
        html,
    )
    assert drawn, html
    assert html.count("not listed)") == 1  # one marker for both siblings
    whole = client.get("/api/runs").json()["runs"]
    assert [(r["id"], r["unlisted_parent"]) for r in whole] == [("parent-2", "")]  # listed: nested, no marker


def test_session_page_shows_timeline_replay_calls_payloads_thinking_artifacts(
    client: TestClient, db_path: Path
) -> None:
    run_gated(db_path, "g9")
    with SqliteStore(db_path) as store:
        handle = store.put_artifact(b"archived messages", "application/json").handle
        rec = Recorder.create(store, task="thinker", session_id="t1")
        rec.append(RunStarted(run_id="t", goal="think"))
        message = Message(
            role="assistant", content=[ThinkingPart(thinking="deep thought"), TextPart(text="hi")]
        )
        rec.append(LlmCompleted(turn=1, message=message))
        rec.append(PageOut(turn=1, message_count=2, archive_ref=handle))
    html = client.get("/session?id=g9&at=5").text
    assert "echo" in html and "write_note" in html and "{&#34;text&#34;: &#34;looking&#34;}" in html
    assert "gated: writes need a human" in html
    assert "scripted" in html and "native_message" in html  # provider_replay payloads
    assert "Verification: intact" in html
    assert 'id="seq-0"' in html and "run_started" in html
    assert "as of seq 5" in html
    thinker = client.get("/session?id=t1").text
    assert "deep thought" in thinker
    assert handle in thinker and "17" in thinker and "present" in thinker
    assert client.get("/session?id=missing").status_code == 404
    assert client.get("/session?id=g9&at=-1").status_code == 400
    assert client.get("/api/event?session=g9&seq=999").status_code == 404
    assert client.get("/api/event?session=g9&seq=x").status_code == 400
    assert client.get(f"/api/event?session=g9&seq={2**64}").status_code == 400
    assert client.get(f"/session?id=g9&start={10**30}").status_code == 400


def test_a_tampered_session_shows_its_divergences(client: TestClient, db_path: Path) -> None:
    run_gated(db_path, "g10")
    raw = sqlite3.connect(db_path)
    try:
        raw.execute("DROP TRIGGER events_no_update")
        raw.execute(
            "UPDATE events SET event = replace(event, 'looking', 'LOOKING') "
            "WHERE session_id = 'g10' AND kind = 'tool_requested'"
        )
        raw.commit()
    finally:
        raw.close()
    html = client.get("/session?id=g10").text
    assert "Verification: DIVERGENT" in html and "hash_mismatch" in html
    raw = sqlite3.connect(db_path)
    try:
        raw.execute("UPDATE events SET event = X'7B7D' WHERE session_id = 'g10' AND seq = 1")  # "{}"
        raw.commit()
    finally:
        raw.close()
    broken = client.get("/session?id=g10&at=5")
    assert broken.status_code == 200
    assert "cannot replay" in broken.text and "undecodable" in broken.text


def test_the_timeline_pages(client: TestClient, db_path: Path) -> None:
    with SqliteStore(db_path) as store:
        rec = Recorder.create(store, task="long", session_id="long")
        rec.append(RunStarted(run_id="l", goal="long"))
        rec.append_many([Custom(custom_kind="step", payload={"i": i}) for i in range(400)])
    tail = client.get("/session?id=long").text
    assert 'id="seq-400"' in tail and 'id="seq-100"' not in tail and "earlier" in tail
    assert 'data-stream="/api/stream/session?id=long&amp;after=401"' in tail
    first = client.get("/session?id=long&start=0").text
    assert 'id="seq-0"' in first and 'id="seq-300"' not in first and 'data-stream=""' in first


# ─── live streams (a real server: TestClient buffers whole bodies) ────────────────────────────


def _sse(lines: Iterator[str], wanted: str) -> dict[str, object]:
    event = None
    for line in lines:
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: ") and event == wanted:
            return json.loads(line[6:])  # type: ignore[no-any-return]
    raise AssertionError(f"no {wanted} message")


def test_streams_send_runs_and_new_events(db_path: Path) -> None:
    run_gated(db_path, "s1")
    app = create_app(opener(db_path), token=TOKEN, poll_s=0.05)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with (
        DashboardServer(app) as server,
        httpx.Client(base_url=server.url, headers=headers, timeout=60) as http,
    ):
        with http.stream("GET", "/api/stream/runs") as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            data = _sse(stream.iter_lines(), "runs")
        assert [r["id"] for r in data["runs"]] == ["s1"]  # type: ignore[index]
        assert [p["call_id"] for p in data["pending"]] == ["w1"]  # type: ignore[index]
        with http.stream("GET", "/api/stream/session?id=s1&after=3") as stream:
            lines = stream.iter_lines()
            first = _sse(lines, "ev")
            status = _sse(lines, "status")
        assert first["seq"] == 3 and status["status"] == "suspended"
        with http.stream("GET", "/api/stream/session?id=s1", headers={"Last-Event-ID": "10"}) as stream:
            assert _sse(stream.iter_lines(), "ev")["seq"] == 11
        assert http.get("/api/stream/session?id=nope").status_code == 404
        assert http.get("/api/stream/runs?state=bogus").status_code == 400


# ─── the command ──────────────────────────────────────────────────────────────────────────────


def test_ui_without_the_web_extra_names_it(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import typer

    from flightlog.cli.ui import register

    for name in ("flightlog.web.app", "flightlog.web.server", "flightlog.web.security"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setitem(sys.modules, "fastapi", None)  # type: ignore[arg-type]
    app = typer.Typer()
    register(app, opener(db_path))
    app.command("noop")(lambda: None)  # more than one command: keep the subcommand name
    result = CliRunner().invoke(app, ["ui"])
    assert result.exit_code == 1
    assert install_hint("web") in " ".join(result.output.split()) and "fastapi" in result.output


_SERVE = """
import sys, typer
from contextlib import contextmanager
from flightlog.store import SqliteStore
from flightlog.cli.ui import register

@contextmanager
def open_db(read_only):
    store = SqliteStore(sys.argv[1], read_only=read_only)
    try:
        yield store
    finally:
        store.close()

app = typer.Typer()
register(app, open_db)
app.command("noop")(lambda: None)
app(sys.argv[2:])
"""


@pytest.mark.parametrize("given", [False, True], ids=["generated-token", "env-token"])
def test_ui_command_prints_the_url_serves_and_stops_on_sigint(tmp_path: Path, given: bool) -> None:
    db = tmp_path / "fresh" / "ui.db"  # not there yet: `ui` creates it
    env = {k: v for k, v in os.environ.items() if k != "FLIGHTLOG_UI_TOKEN"}
    if given:
        env["FLIGHTLOG_UI_TOKEN"] = TOKEN
    proc = subprocess.Popen(
        [sys.executable, "-c", _SERVE, str(db), "ui", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        line = read_line(proc, "the URL `flightlog ui` prints")
        match = re.search(r"(http://127\.0\.0\.1:\d+)/(?:\?token=(\S+))?", line)
        assert match, line
        base, printed = match.group(1), match.group(2)
        if given:
            assert printed is None and TOKEN not in line  # a given token is not echoed
        else:
            assert printed is not None and len(printed) >= 32
        token = TOKEN if given else printed
        assert line.startswith("flightlog dashboard listening on "), line
        with httpx.Client(base_url=base, follow_redirects=True, timeout=60) as http:
            # the line is printed once the port listens: the first request connects, no retry (a
            # request queued before the server runs is answered once it does)
            denied = http.get("/")
            assert denied.status_code == 401
            # the 401 page says where the token is: in the printed URL, or (a given token is not
            # printed: the URL holds a placeholder) the operator's own, to add to the URL
            if given:
                assert "?token=<your token>" in denied.text and "$FLIGHTLOG_UI_TOKEN" in denied.text
                assert "printed (it carries" not in denied.text
            else:
                assert "open the URL that `flightlog ui` printed (it carries ?token=...)" in denied.text
            login = http.get(f"/?token={token}")
            assert login.status_code == 200 and "Runs" in login.text  # 303 → cookie → the page
            assert http.get("/api/runs").json()["runs"] == []
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    assert db.exists()


def _events(store: SqliteStore, session_id: str) -> list[tuple[object, object]]:
    from flightlog.sessions import iter_events

    return list(iter_events(store, session_id))


def test_the_session_stream_wakes_on_a_commit_not_on_the_poll_interval(db_path: Path) -> None:
    """Between reads the stream waits on ``Store.wait_for_events``: a commit wakes it, not ``poll_s`` (SQLite
    polls the session row every 50 ms; PostgreSQL is woken by NOTIFY). ``poll_s`` is an hour here, so an
    event that arrives at all (within the client's 60 s read timeout) was woken by the commit. The commit
    is made once the stream is seen waiting (its store took the session's wake mark), not after a sleep."""
    waiting = threading.Event()

    class Watched(SqliteStore):
        def _wake_mark(self, session_id: str) -> tuple[int, str, int] | None:
            mark = super()._wake_mark(session_id)
            waiting.set()
            return mark

    @contextmanager
    def open_db(read_only: bool) -> Iterator[SqliteStore]:
        store = Watched(db_path, read_only=read_only)
        try:
            yield store
        finally:
            store.close()

    with SqliteStore(db_path) as store:
        recorder = Recorder.create(store, session_id="live")
        recorder.append(Custom(custom_kind="step", payload={"i": 0}))
        app = create_app(open_db, token=TOKEN, poll_s=3600.0, ping_s=3600.0)
        headers = {"Authorization": f"Bearer {TOKEN}"}
        with (
            DashboardServer(app) as server,
            httpx.Client(base_url=server.url, headers=headers, timeout=60) as http,
            http.stream("GET", "/api/stream/session?id=live") as stream,
        ):
            lines = stream.iter_lines()
            assert _sse(lines, "ev")["seq"] == 0
            assert _sse(lines, "status")["status"] == "no run"  # custom events only, as ls lists it
            assert waiting.wait(60)  # the stream waits for a change now
            recorder.append(Custom(custom_kind="step", payload={"i": 1}))
            assert _sse(lines, "ev")["seq"] == 1


def test_the_session_page_and_the_runs_tree_show_the_recorded_context_use(
    client: TestClient, db_path: Path
) -> None:
    provider = ScriptedProvider(
        [calls(call("echo", {"text": "x" * 400}, id="e1")), reply("done")], by_turn=False
    )
    window = ContextPolicy(windows={provider.model: ContextWindow(4000, 200)})
    agent = Agent(name="ctx", route=[provider], tools=[echo], context=window)
    with SqliteStore(db_path) as store:
        result = Kernel(store, agent, notary=None).run_sync("fill some context", session_id="ctx-1")
        assert result.status == "completed"
        fills = [
            p["context"]["fill_tokens"]
            for _row, e in iter_events(store, "ctx-1")
            if isinstance(e, Custom) and e.custom_kind == "prompt_program_invoked"
            for p in [e.payload]
            if p["actor"] == "kernel"
        ]
    assert len(fills) == 2  # as recorded (the scripted usage calibrates the second estimate)
    latest = f"{fills[1]:,}/3,800 ({fills[1] / 3800:.0%})"
    html = client.get("/session?id=ctx-1").text
    assert f"{latest} at turn 2 (reported+estimate)" in html
    assert f"{fills[0]:,}/3,800" in html and "4,000 tokens, 200 kept for output" in html  # per-call rows
    (node,) = [r for r in client.get("/api/runs").json()["runs"] if r["id"] == "ctx-1"]
    assert node["context"] == latest and f"context {latest}" in client.get("/").text
    run_gated(db_path, "g-ctx")  # a model without a known window: the fill alone, no ratio invented
    assert "tok at turn" in client.get("/session?id=g-ctx").text
    with SqliteStore(db_path) as store:
        rec = Recorder.create(store, task="no kernel", session_id="plain-ctx")
        rec.append(RunStarted(run_id="p", goal="nothing recorded"))
    assert "not recorded" in client.get("/session?id=plain-ctx").text
