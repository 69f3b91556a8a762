"""The session page's Artifacts table says what the digest check says, not what the metadata says (attack
pass, session 18, left then): an archive whose bytes were replaced in the store (its metadata row kept)
was listed ``present``. Now each row of the page is read and hashed against its handle, as every reader
does: ``present and intact``, ``digest mismatch``, ``missing``."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from flightlog.events import PageOut, RunStarted
from flightlog.recorder import Recorder
from flightlog.store import SqliteStore
from flightlog.web.app import create_app
from flightlog.web.security import Auth
from flightlog.web.views import session_page

from .conftest import TOKEN, opener


@pytest.fixture
def client(db_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(opener(db_path), token=TOKEN), base_url="http://127.0.0.1:8000") as c:
        c.cookies.set("flightlog_ui_8000", Auth(TOKEN).cookie_value)
        yield c


def _paged(db_path: Path) -> list[str]:
    """Session ``p`` naming three archives (page-outs); their handles."""
    with SqliteStore(db_path) as store:
        recorder = Recorder.create(store, session_id="p")
        recorder.append(RunStarted(run_id="p", goal="page"))
        handles = [recorder.put_artifact(f"archive {i}".encode(), "application/json") for i in range(3)]
        for turn, handle in enumerate(handles, start=1):
            recorder.append(PageOut(turn=turn, message_count=1, archive_ref=handle))
    return handles


def _states(db_path: Path) -> dict[str, str]:
    with SqliteStore(db_path) as store:
        return {row["handle"]: row["state"] for row in session_page(store, "p").artifacts}


def test_the_artifact_table_says_what_the_digest_check_says(db_path: Path, client: TestClient) -> None:
    intact, altered, gone = _paged(db_path)
    assert set(_states(db_path).values()) == {"present and intact"}
    with closing(sqlite3.connect(db_path)) as raw, raw:
        raw.execute("UPDATE artifacts SET content = ? WHERE sha256 = ?", (b"forged", altered[7:]))
        raw.execute("DELETE FROM artifacts WHERE sha256 = ?", (gone[7:],))
    states = _states(db_path)
    # before: the altered archive was "present" (its metadata row was left as it was)
    assert states == {intact: "present and intact", altered: "digest mismatch", gone: "missing"}
    html = client.get("/session", params={"id": "p"}).text
    assert f"<code>{altered}</code>" in html and "digest mismatch" in html
