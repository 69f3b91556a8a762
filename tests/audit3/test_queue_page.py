"""The dashboard's approvals queue is paged (:data:`flightlog.web.views.QUEUE_PAGE` sessions that may wait a
page, ``queue_from=`` pages them): a page folds and shows at most that many, carries the count of sessions
that may wait, and the "+N more" links reach every wait; a wait whose ``sessions`` row was edited to hide it
is still listed (and flagged on its run even off the queue's page). On SQLite and PostgreSQL, through the
store-wide pass (:data:`~flightlog.web.views.SET_PASS` 0: the count is an upper bound) and through per-session
folds (the count is exact)."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from flightlog.events import RunStarted
from flightlog.store import Store, open_store
from flightlog.web import views

from .helpers import cli, suspended_run
from .test_row_surfaces import dashboard
from .test_row_trust import set_status
from .test_wait_pass import end, record, suspend

PAGE = 3


def page_sessions(data: dict[str, Any]) -> list[str]:
    """The sessions one ``/api/runs`` answer lists in its queue (open gates, then waiting for a resume)."""
    found = [p["session_id"] for p in data["pending"]]
    found += [w["session"] for w in data["waiting"] if w["session"] not in found]
    return list(dict.fromkeys(found))


def node(runs: list[dict[str, Any]], sid: str) -> dict[str, Any]:
    return next(r for r in runs if r["id"] == sid)


@pytest.mark.parametrize("set_pass", [0, 10_000])
def test_the_queue_pages_reach_every_wait(url: str, set_pass: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(views, "QUEUE_PAGE", PAGE)
    monkeypatch.setattr(views, "SET_PASS", set_pass)
    tampered = suspended_run(url)  # oldest: on the first page
    aborted = suspended_run(url)
    assert cli(url, "abort", aborted)[0] == 0
    with open_store(url) as store:
        record(store, "ended", RunStarted(run_id="ended", goal="g"), suspend(), end())
        for i in range(6):
            record(store, f"w{i}", RunStarted(run_id=f"w{i}", goal="g"), suspend())
    set_status(url, tampered, "completed")
    with open_store(url, read_only=True) as store:  # the one-query keys are the default's, in listing order
        assert store.session_keys() == Store.session_keys(store)
        assert [k[0] for k in store.session_keys()] == [r.session_id for r in store.list_sessions()]
    waits = [tampered] + [f"w{i}" for i in range(6)]

    def total(queue: dict[str, Any]) -> int:
        """The pass (not exact) counts the aborted run too (its events hold the mark, no ``run_terminal``)."""
        return len(waits) + (0 if queue["exact"] else 1)

    seen: list[str] = []
    with dashboard(url) as client:
        data = client.get("/api/runs").json()
        first = page_sessions(data)
        assert first[0] == tampered and len(first) <= PAGE
        queue = data["queue"]
        assert queue["exact"] is (set_pass != 0)  # the first request misses the cache for every row
        assert (queue["total"], queue["first"], queue["last"]) == (total(queue), 1, PAGE)
        assert queue["more"] == total(queue) - PAGE and queue["earlier"] == ""
        html = client.get("/").text
        shown = re.search(
            r"Sessions 1–3 of (\d+) (suspended|that may be suspended).*?\+(\d+) more</a>", html, re.S
        )
        assert shown is not None
        assert int(shown[1]) == len(waits) + (0 if shown[2] == "suspended" else 1) == int(shown[3]) + PAGE
        assert 'class="badge row-warning"' in html
        href = queue["later"]
        seen += first
        while href:
            start = int(parse_qs(urlsplit(href).query)["queue_from"][0])
            data = client.get("/api/runs", params={"queue_from": start}).json()
            listed = page_sessions(data)
            assert len(listed) <= PAGE and data["queue"]["total"] == total(data["queue"])
            assert data["queue"]["earlier"] and data["queue"]["last"] - data["queue"]["first"] + 1 >= len(
                listed
            )
            # off the queue's page, the edited row's run still shows the ledger's wait and the warning
            assert node(data["runs"], tampered)["row_warning"]
            assert node(data["runs"], tampered)["state"] != "terminal"
            seen += listed
            href = data["queue"]["later"]
        assert sorted(seen) == sorted(waits)  # every wait once, the aborted and the ended ones never
        past = client.get("/api/runs", params={"queue_from": 1000}).json()
        assert page_sessions(past) == [] and past["queue"]["later"] == "" and past["queue"]["first"] == 0
        assert client.get("/api/runs", params={"queue_from": "-1"}).status_code == 400
        assert client.get("/", params={"queue_from": "x"}).status_code == 400
