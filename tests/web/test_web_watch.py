"""The dashboard's session page shows the entropy watch's score per turn, the alerting turn marked."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from flightlog.cli.demo_watch import watch_agent
from flightlog.kernel import Kernel
from flightlog.store import SqliteStore
from flightlog.web.app import create_app
from flightlog.web.security import Auth

from .conftest import TOKEN, opener


def test_the_session_page_shows_entropy_per_turn(db_path: Path) -> None:
    with SqliteStore(db_path) as store:
        result = Kernel(store, watch_agent(), notary=None, heartbeat_s=None).run_sync(
            "find it", session_id="w1"
        )
    assert result.status == "suspended"
    base = "http://127.0.0.1:8000"
    with TestClient(create_app(opener(db_path), token=TOKEN), base_url=base) as client:
        client.cookies.set("flightlog_ui_8000", Auth(TOKEN).cookie_value)
        html = client.get("/session?id=w1").text
    assert "entropy per turn" in html
    scores = [
        f'<span title="turn {t}">{s}</span>'
        for t, s in enumerate(["0.30", "0.37", "0.44", "0.51", "0.58"], 1)
    ]
    assert all(score in html for score in scores)
    assert '<span title="turn 6">0.65!</span>' in html  # the watch alerted at turn 6


def test_the_session_page_sends_a_signal_the_run_gets_at_its_next_boundary(db_path: Path) -> None:
    from flightlog.kernel.approvals import approve
    from flightlog.store.signals import pending_signals

    with SqliteStore(db_path) as store:
        Kernel(store, watch_agent(), notary=None, heartbeat_s=None).run_sync("find it", session_id="w2")
    base = "http://127.0.0.1:8000"
    auth = Auth(TOKEN)
    with TestClient(create_app(opener(db_path), token=TOKEN), base_url=base) as client:
        client.cookies.set("flightlog_ui_8000", auth.cookie_value)
        assert 'action="/signals/send"' in client.get("/session?id=w2").text
        form = {
            "csrf": auth.csrf,
            "session_id": "w2",
            "kind": "steer",
            "text": "stop probing",
            "operator": "ada",
        }
        headers = {"Origin": base}
        sent = client.post("/signals/send", data=form, headers=headers, follow_redirects=False)
        assert sent.status_code == 303
        no_csrf = client.post("/signals/send", data={**form, "csrf": "x"}, headers=headers)
        assert no_csrf.status_code == 403
        bad = client.post("/signals/send", data={**form, "kind": "shout"}, headers=headers)
        assert bad.status_code == 400
    with SqliteStore(db_path) as store:
        (queued,) = pending_signals(store, "w2")
        assert (queued.kind, queued.text, queued.sender, queued.urgency) == (
            "steer",
            "stop probing",
            "ada",
            "high",
        )
        approve(store, "w2", "entropy:6", responder="ada")
        final = Kernel(store, watch_agent(), notary=None, heartbeat_s=None).resume_sync("w2")
        assert final.status == "completed" and pending_signals(store, "w2") == []
