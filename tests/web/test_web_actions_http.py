"""The dashboard's actions over HTTP: abort a run (with who asked), who decided each approval, and every
write refused without the token's CSRF value or from another origin; /api/integrity's document."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from flightlog.errors import SessionNotFound, StaleWriter
from flightlog.events import Custom, OperationCancelled
from flightlog.integrity.notary import Notary
from flightlog.kernel import pending
from flightlog.kernel.state import load_state
from flightlog.recorder import Recorder
from flightlog.sessions import iter_events
from flightlog.store import SqliteStore
from flightlog.web.app import create_app
from flightlog.web.security import Auth

from .conftest import IMG, SCRIPT, TOKEN, opener, run_blocking, run_gated

BASE = "http://127.0.0.1:8000"
ORIGIN = {"Origin": BASE}
AUTH = Auth(TOKEN)


@pytest.fixture
def client(db_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(opener(db_path), token=TOKEN), base_url=BASE) as c:
        c.cookies.set("flightlog_ui_8000", AUTH.cookie_value)
        yield c


def _kinds(db_path: Path, session_id: str) -> list[str]:
    with SqliteStore(db_path, read_only=True) as store:
        return [
            e.custom_kind if isinstance(e, Custom) else e.kind for _r, e in iter_events(store, session_id)
        ]


def _has(db_path: Path, session_id: str, kind: str) -> bool:
    try:
        return kind in _kinds(db_path, session_id)
    except SessionNotFound:
        return False


def test_abort_a_suspended_run_records_who_asked(client: TestClient, db_path: Path) -> None:
    run_gated(db_path, "a1")
    page = client.get("/session?id=a1").text
    assert 'action="/runs/abort"' in page
    assert "No one has approved, denied or aborted anything" in page
    refused = client.post(
        "/runs/abort", data={"csrf": AUTH.csrf, "session_id": "a1", "operator": "ada"}, headers=ORIGIN
    )
    assert refused.status_code == 400 and "confirm" in refused.text  # the box must be ticked
    operator = f"ada {SCRIPT}"
    response = client.post(
        "/runs/abort",
        data={"csrf": AUTH.csrf, "session_id": "a1", "operator": operator, "confirm": "yes", "next": "/x"},
        headers=ORIGIN,
        follow_redirects=False,
    )
    assert response.status_code == 303 and response.headers["location"] == "/x"
    assert _kinds(db_path, "a1")[-2:] == ["operation_cancelled", "abort_requested"]
    with SqliteStore(db_path, read_only=True) as store:
        assert store.get_session("a1").status == "cancelled"
        (_row, asked) = list(iter_events(store, "a1"))[-1]
        assert isinstance(asked, Custom) and asked.payload["requested_by"] == operator
    page = client.get("/session?id=a1").text
    assert "aborted the run at turn" in page
    assert "abort requested by ada &lt;script&gt;" in page  # the timeline row narrates it
    assert "ada &lt;script&gt;alert(1)&lt;/script&gt;" in page and SCRIPT not in page
    again = client.post(
        "/runs/abort",
        data={"csrf": AUTH.csrf, "session_id": "a1", "operator": "ada", "confirm": "yes"},
        headers={**ORIGIN, "Accept": "application/json"},
    )
    assert again.status_code == 200 and again.json()["ok"] is True  # still resumable, so aborted again
    missing = client.post(
        "/runs/abort",
        data={"csrf": AUTH.csrf, "session_id": "nope", "operator": "ada", "confirm": "yes"},
        headers={**ORIGIN, "Accept": "application/json"},
    )
    assert missing.status_code == 404


def test_abort_fences_a_live_run(client: TestClient, db_path: Path) -> None:
    release = threading.Event()
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(run_blocking(db_path, release, "hold", "a2"))
        except StaleWriter as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not _has(db_path, "a2", "tool_requested"):  # wait for the state (the tool runs), not a time
        assert time.monotonic() < deadline, "the run never reached its tool call"
        time.sleep(0.05)
    response = client.post(
        "/runs/abort",
        data={"csrf": AUTH.csrf, "session_id": "a2", "operator": "ops", "confirm": "yes"},
        headers={**ORIGIN, "Accept": "application/json"},
    )
    assert response.status_code == 200 and response.json()["aborted"] is True
    release.set()
    thread.join(60)
    assert outcome == ["cancelled"]  # the fenced run stops without writing (the kernel reports the abort)
    kinds = _kinds(db_path, "a2")
    assert kinds[-2:] == ["operation_cancelled", "abort_requested"]
    assert "tool_completed" not in kinds


def test_who_decided_shows_on_the_session_page(client: TestClient, db_path: Path) -> None:
    run_gated(db_path, "a3")
    response = client.post(
        "/approvals/decide",
        data={"csrf": AUTH.csrf, "session_id": "a3", "call_id": "w1", "decision": "deny", "operator": "bob"},
        headers=ORIGIN,
        follow_redirects=False,
    )
    assert response.status_code == 303
    page = client.get("/session?id=a3").text
    assert 'class="decision decision-deny"' in page
    assert "denied call w1 (approval)" in page and '<td class="who">bob</td>' in page


FORMS = {
    "/runs/abort": {"session_id": "a4", "operator": "mallory", "confirm": "yes"},
    "/signals/send": {"session_id": "a4", "kind": "steer", "text": "go left", "operator": "mallory"},
    "/approvals/decide": {"session_id": "a4", "call_id": "w1", "decision": "approve", "operator": "mallory"},
}


@pytest.mark.parametrize("path", sorted(FORMS))
@pytest.mark.parametrize(
    ("csrf", "headers"),
    [
        pytest.param(None, ORIGIN, id="no-csrf"),
        pytest.param("0" * 64, ORIGIN, id="wrong-csrf"),
        pytest.param(AUTH.csrf, {"Origin": "http://evil.example"}, id="cross-origin"),
        pytest.param(AUTH.csrf, {}, id="no-origin-no-referer"),
    ],
)
def test_every_action_refuses_a_forged_request_and_records_nothing(
    client: TestClient, db_path: Path, path: str, csrf: str | None, headers: dict[str, str]
) -> None:
    run_gated(db_path, "a4")
    before = _kinds(db_path, "a4")
    fields = dict(FORMS[path])
    if csrf is not None:
        fields["csrf"] = csrf
    response = client.post(path, data=fields, headers=headers, follow_redirects=False)
    assert response.status_code == 403
    assert _kinds(db_path, "a4") == before
    with SqliteStore(db_path, read_only=True) as store:
        assert [c.call_id for c in pending(store, "a4")] == ["w1"]
        assert store.get_session("a4").status == "suspended"
        assert load_state(store, "a4").phase != "terminal"


@pytest.mark.parametrize(
    ("path", "fields", "heading", "error"),
    [
        pytest.param(
            "/signals/send",
            {"kind": "message", "text": "look again", "operator": ""},
            "Signal not sent",
            "invalid operator name: empty",
            id="signal-without-operator",
        ),
        pytest.param(
            "/runs/abort",
            {"operator": "ada"},
            "Run not aborted",
            "tick the box: an abort stops the run",
            id="abort-unconfirmed",
        ),
    ],
)
def test_a_form_posted_without_javascript_gets_a_readable_error_page(
    client: TestClient, db_path: Path, path: str, fields: dict[str, str], heading: str, error: str
) -> None:
    """The session page's signal and abort forms work without JavaScript; a refusal landed on a page headed
    only "400" whose one link led to the runs: it now says what did not happen and why, and links back to
    the page the form was on (its ``next``). Nothing is recorded."""
    run_gated(db_path, "a6")
    before = _kinds(db_path, "a6")
    back = "/session?id=a6"
    form = {"csrf": AUTH.csrf, "session_id": "a6", "next": back, **fields}
    response = client.post(path, data=form, headers=ORIGIN, follow_redirects=False)  # a browser's post
    assert response.status_code == 400 and response.headers["content-type"].startswith("text/html")
    page = response.text
    assert f"<h1>{heading}</h1>" in page and "400 Bad Request" in page and error in page
    assert '<a href="/session?id=a6">Back to the page you came from</a>' in page
    assert '<a href="/">Back to the runs</a>' in page
    assert _kinds(db_path, "a6") == before
    scripted = client.post(path, data=form, headers={**ORIGIN, "Accept": "application/json"})
    assert scripted.status_code == 400 and scripted.json()["ok"] is False  # app.js still gets JSON
    assert error in scripted.json()["error"]
    elsewhere = client.post(path, data={**form, "next": "//evil.example/x"}, headers=ORIGIN)
    assert (
        elsewhere.status_code == 400 and "evil.example" not in elsewhere.text
    )  # back stays on the dashboard
    assert "Back to the page you came from" not in elsewhere.text


def test_the_integrity_document(client: TestClient, db_path: Path) -> None:
    assert client.get("/api/integrity?session=nope").status_code == 404
    with SqliteStore(db_path) as store:
        rec = Recorder.create(store, session_id="i1", notary=Notary.from_env(every=2))
        rec.append_many([Custom(custom_kind="step", payload={"x": IMG}) for _ in range(3)])
        rec.finish("completed")
    doc = client.get("/api/integrity?session=i1").json()
    assert [c["size"] for c in doc["checkpoints"]] == [3, 4]
    assert all(c["note"].startswith("flightlog.local/") for c in doc["checkpoints"])
    (seal,) = doc["seals"]
    assert (seal["seq"], seal["tree_size"], len(seal["proof"])) == (3, 4, 2)
    assert doc["cosignatures"] == [] and doc["witness_keys"] == []
    assert len(doc["log_keys"]) == 1 and doc["log_keys_error"] is None
    assert doc["truncated"] is False


def test_abort_is_recorded_with_its_requester_by_the_python_api(db_path: Path) -> None:
    from flightlog.kernel import abort

    run_gated(db_path, "a5")
    with SqliteStore(db_path) as store:
        assert abort(store, "a5") is True
        events = [e for _r, e in iter_events(store, "a5")]
    assert isinstance(events[-1], OperationCancelled)  # no requester named: nothing extra recorded
