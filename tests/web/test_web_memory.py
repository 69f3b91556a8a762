"""The dashboard's memory page (``/memory``, ``/api/memory``): listing, search, escaping."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from flightlog import events as ev
from flightlog.cli.demo_memory import FACT, SCOPE
from flightlog.kernel.memory_bank import remember
from flightlog.store import SqliteStore
from flightlog.web.app import create_app
from flightlog.web.security import Auth

from .conftest import TOKEN, opener


def test_the_dashboard_memory_page_lists_searches_and_escapes(db_path: Path) -> None:
    store = SqliteStore(db_path)
    remember(store, scope=SCOPE, kind=ev.MemoryKind.PROJECT, name="deploy-day", content=FACT)
    remember(
        store, scope=SCOPE, kind=ev.MemoryKind.USER, name="<b>x</b>", content="<script>alert(1)</script> vim"
    )
    with TestClient(create_app(opener(db_path), token=TOKEN), base_url="http://127.0.0.1:8000") as client:
        client.cookies.set("flightlog_ui_8000", Auth(TOKEN).cookie_value)
        page = client.get("/memory")
        assert page.status_code == 200 and FACT in page.text and "deploy-day" in page.text
        assert "<script>alert(1)</script>" not in page.text and "&lt;script&gt;" in page.text
        found = client.get("/api/memory", params={"q": "thursdays deploys"}).json()
        assert [r["name"] for r in found] == ["deploy-day"] and found[0]["text"] == FACT
        assert client.get("/memory", params={"scope": "nope"}).status_code == 400
    store.close()
