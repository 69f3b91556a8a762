"""The conversation page's verification (the session page's full check) is kept per session while the
session's head and its ledger's mark hold, so moving the seq slider does not re-read every row (1-2 s on a
10,000-turn session); a head that moved, or an edit the mark sees, is checked again: never a stale
"verified". The session page checks on every load."""

# ruff: noqa: F811  (the fixtures imported from a sibling test module are parameters here)
from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from flightlog.kernel import approve
from flightlog.store import SqliteStore
from flightlog.web import views

from .conftest import resume_gated, run_gated
from .test_web_http import client  # noqa: F401  (shared fixture)

BANNER = "This session fails verification."


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each full check the dashboard makes, by session id."""
    made: list[str] = []
    real = views.verification

    def counted(store: Any, session_id: str) -> dict[str, Any]:
        made.append(session_id)
        return real(store, session_id)

    monkeypatch.setattr(views, "verification", counted)
    return made


def _tamper(db: Path, sql: str) -> None:
    raw = sqlite3.connect(db)
    try:
        raw.execute("DROP TRIGGER IF EXISTS events_no_update")
        raw.execute(sql)
        raw.commit()
    finally:
        raw.close()


def test_slider_moves_reuse_the_check_until_the_head_or_the_ledger_moves(
    client: TestClient, db_path: Path, checks: list[str]
) -> None:
    [call] = run_gated(db_path, "c1").pending_calls
    for at in (None, "1", "2", "3", None):
        page = client.get("/conversation", params={"id": "c1", **({"at": at} if at else {})})
        assert page.status_code == 200 and BANNER not in page.text
    assert checks == ["c1"]  # one check for five loads (each load checked: five)

    with SqliteStore(db_path) as store:  # the run goes on: the head moves
        approve(store, "c1", call, responder="alice")
    resume_gated(db_path, "c1")
    assert BANNER not in client.get("/conversation", params={"id": "c1", "at": "1"}).text
    assert checks == ["c1", "c1"]  # checked again

    _tamper(
        db_path, "UPDATE events SET event = CAST(event AS TEXT) || ' ' WHERE session_id = 'c1' AND seq = 2"
    )
    page = client.get("/conversation", params={"id": "c1", "at": "1"})
    assert BANNER in page.text and "hash_mismatch" in page.text  # the mark moved: not a stale "verified"
    assert checks == ["c1", "c1", "c1"]


def test_the_session_page_checks_on_every_load_and_the_conversation_reuses_it(
    client: TestClient, db_path: Path, checks: list[str]
) -> None:
    run_gated(db_path, "c2")
    assert BANNER not in client.get("/session", params={"id": "c2"}).text
    assert BANNER not in client.get("/conversation", params={"id": "c2"}).text
    assert checks == ["c2"]
    # an edit that keeps the row's length (the mark cannot see it): the session page sees it at once
    _tamper(
        db_path,
        "UPDATE events SET event = replace(event, 'write', 'WRITE') WHERE session_id = 'c2' AND seq = 0",
    )
    assert BANNER in client.get("/session", params={"id": "c2"}).text
    assert BANNER in client.get("/conversation", params={"id": "c2"}).text  # and the conversation reuses it
    assert checks == ["c2", "c2"]


def test_a_kept_check_is_made_again_once_it_is_max_age_old(db_path: Path, checks: list[str]) -> None:
    """An edit the mark cannot see, or a change outside the database (retained heads, keys), reaches the
    conversation page once its kept result is ``MAX_AGE_S`` old."""
    run_gated(db_path, "c3")
    now = [0.0]
    cache = views.VerificationCache(clock=lambda: now[0])
    with SqliteStore(db_path, read_only=True) as store:
        assert cache.check(store, "c3", reuse=True)["ok"]
        now[0] = cache.MAX_AGE_S - 1
        assert cache.check(store, "c3", reuse=True)["ok"]
        assert checks == ["c3"]
        now[0] = cache.MAX_AGE_S
        assert cache.check(store, "c3", reuse=True)["ok"]
        assert checks == ["c3", "c3"]
