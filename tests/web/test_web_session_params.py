"""The dashboard resolves a session id as the command line does (a unique prefix redirects to the full
id's page, an ambiguous one lists the matches), and a request without its session parameter is a 400 naming
it (before: 404 "no such session" for both)."""

from __future__ import annotations

import html
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from tests.web.conftest import opener
from tests.web.test_web_http import AUTH, BASE, TOKEN

from flightlog.events import RunStarted
from flightlog.recorder import Recorder
from flightlog.store import SqliteStore
from flightlog.web.app import create_app


@pytest.fixture
def client(tmp_path: Path) -> TestClient:
    db = tmp_path / "params.db"
    with SqliteStore(db) as store:
        for sid in ("abc-1", "abc-2", "xyz-9"):
            Recorder.create(store, session_id=sid, notary=None).append(RunStarted(run_id=sid, goal="g"))
    client = TestClient(create_app(opener(db), token=TOKEN), base_url=BASE)
    client.cookies.set("flightlog_ui_8000", AUTH.cookie_value)
    return client


def test_a_unique_prefix_redirects_and_an_ambiguous_one_lists_the_matches(client: TestClient) -> None:
    with client:
        page = client.get("/session", params={"id": "xyz", "at": "0"}, follow_redirects=False)
        assert (page.status_code, page.headers["location"]) == (303, "/session?id=xyz-9&at=0")
        assert client.get("/session", params={"id": "xyz"}).status_code == 200  # followed: the page
        talk = client.get("/conversation", params={"id": "xyz", "at": "0"}, follow_redirects=False)
        assert (talk.status_code, talk.headers["location"]) == (303, "/conversation?id=xyz-9&at=0")
        both = client.get("/session", params={"id": "abc"})
        assert both.status_code == 409
        assert 'href="/session?id=abc-1"' in both.text and 'href="/session?id=abc-2"' in both.text
        assert "matches several sessions" in html.unescape(both.text)
        assert client.get("/session", params={"id": "nope"}).status_code == 404
        assert client.get("/session", params={"id": "abc-1"}).status_code == 200  # exact: no redirect


@pytest.mark.parametrize(
    ("path", "name", "extra"),
    [
        ("/session", "id", {}),
        ("/conversation", "id", {}),
        ("/api/stream/session", "id", {}),
        ("/api/conversation/image", "id", {"at": "0", "m": "0", "p": "0"}),
        ("/api/waterfall", "session", {}),
        ("/api/charts", "session", {}),
        ("/api/integrity", "session", {}),
        ("/api/proof", "session", {"seq": "0"}),
        ("/api/event", "session", {"seq": "0"}),
    ],
)
def test_a_missing_session_parameter_is_a_400_naming_it(
    client: TestClient, path: str, name: str, extra: dict[str, str]
) -> None:
    with client:
        answer = client.get(path, params=extra)
    assert answer.status_code == 400, (path, answer.text)
    assert f"missing query parameter {name}=" in html.unescape(answer.text)


@pytest.mark.parametrize(
    ("path", "extra"),
    [
        ("/api/waterfall", {}),
        ("/api/charts", {}),
        ("/api/integrity", {}),
        ("/api/proof", {"seq": "0"}),
        ("/api/event", {"seq": "0"}),
    ],
)
def test_the_json_apis_take_the_pages_id_as_their_session(
    client: TestClient, path: str, extra: dict[str, str]
) -> None:
    """A page's ``?id=`` pasted onto an API was a 400 ``missing query parameter session=`` (new-user pass,
    session 18): ``id=`` is an alias of ``session=`` there; two different ids are a 400 naming both."""
    with client:
        named = client.get(path, params={"session": "xyz-9", **extra})
        aliased = client.get(path, params={"id": "xyz-9", **extra})
        both = client.get(path, params={"session": "xyz-9", "id": "xyz-9", **extra})
        clash = client.get(path, params={"session": "xyz-9", "id": "abc-1", **extra})
        none = client.get(path, params=extra)
    assert named.status_code != 400, named.text
    assert (aliased.status_code, aliased.text) == (named.status_code, named.text)
    assert (both.status_code, both.text) == (named.status_code, named.text)
    assert clash.status_code == 400
    assert "session='xyz-9' and id='abc-1' name different sessions: give one" in html.unescape(clash.text)
    assert none.status_code == 400
    assert "missing query parameter session= (the session id) (or id=, as the pages name it)" in none.text
