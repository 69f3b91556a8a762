"""The run waterfall and per-turn charts (static/waterfall.js) in Debian's chromium: a kernel run drawn
live as its events land, a suspended run's approval wait, hostile labels kept as text.

Uses the browser, server and database fixtures of :mod:`tests.web.test_web_browser`.
"""

# ruff: noqa: F811  (the fixtures imported from a sibling test module are parameters here)
from __future__ import annotations

import threading
from pathlib import Path

from playwright.sync_api import Page, expect

from flightlog.events import Custom, RunStarted
from flightlog.recorder import Recorder
from flightlog.store import SqliteStore

from .conftest import SCRIPT, record_hostile, run_blocking, run_gated
from .test_web_browser import (  # noqa: F401  (shared fixtures)
    WAIT_MS,
    _assert_inert,
    _in_thread,
    _off_loop,
    _wait_for,
    browser,
    db,
    page,
    server,
)


def test_a_live_run_grows_on_the_waterfall(page: Page, db: Path, server: object) -> None:
    release = threading.Event()

    thread, results = _in_thread(lambda: run_blocking(db, release, "draw me", "wf-live"))
    try:
        with SqliteStore(db) as store:  # the tool request is written: the tool is now blocked
            _wait_for(lambda: any(r.kind == "tool_requested" for r in store.read_events("wf-live")))
        page.goto(f"{server.url}/session?id=wf-live")  # type: ignore[attr-defined]
        chart = page.locator("#waterfall-chart")
        tool = chart.locator("rect.lane-tool")
        expect(tool).to_have_count(1, timeout=WAIT_MS)
        expect(tool).to_have_class("bar lane-tool open")  # still running: drawn open
        expect(chart.locator("rect.lane-model")).to_have_count(1)
        before = int(chart.get_attribute("data-events") or "0")
    finally:
        release.set()
        thread.join(30)
    assert results == ["completed"]
    expect(chart.locator("rect.lane-model")).to_have_count(2, timeout=WAIT_MS)  # the second call landed
    expect(tool).to_have_class("bar lane-tool")
    assert int(chart.get_attribute("data-events") or "0") > before
    expect(chart.locator("path.mark-run_terminal")).to_have_count(1, timeout=WAIT_MS)
    expect(page.locator("#turn-charts")).to_have_attribute("data-turns", "2")
    expect(page.locator("#turn-charts figcaption").first).to_have_text("Tokens per turn")
    expect(page.locator("#turn-charts")).to_contain_text("Context fill per turn")

    tool.click()
    expect(page.locator("#waterfall-detail")).to_contain_text("wait_here")
    link = page.locator("#waterfall-detail a")
    expect(link).to_have_attribute("href", f"#seq-{tool.get_attribute('data-seq')}")


def test_a_suspended_run_shows_its_approval_wait(page: Page, db: Path, server: object) -> None:
    assert _off_loop(lambda: run_gated(db, "wf-gated").status) == "suspended"
    page.goto(f"{server.url}/session?id=wf-gated")  # type: ignore[attr-defined]
    chart = page.locator("#waterfall-chart")
    expect(chart.locator("rect.lane-approval")).to_have_count(1, timeout=WAIT_MS)
    expect(chart.locator("rect.lane-suspended")).to_have_class("bar lane-suspended open")
    expect(chart.locator("rect.lane-tool title").last).to_contain_text("write_note (not run: suspended)")


def test_hostile_labels_stay_text_on_the_waterfall(page: Page, db: Path, server: object) -> None:
    with SqliteStore(db) as store:
        sid = record_hostile(store, "wf-hostile")
    page.goto(f"{server.url}/session?id={sid}")  # type: ignore[attr-defined]
    tool = page.locator("#waterfall-chart rect.lane-tool")
    expect(tool).to_have_count(1, timeout=WAIT_MS)
    expect(tool.locator("title")).to_contain_text(f"tool{SCRIPT}")
    tool.click()
    expect(page.locator("#waterfall-detail strong")).to_have_text(f"tool{SCRIPT}")
    page.locator("#waterfall-detail button.wf-show").click()
    expect(page.locator("#waterfall-detail pre.wf-event")).to_contain_text(f'"name": "tool{SCRIPT}"')
    assert page.locator("#waterfall script, #waterfall img, #waterfall foreignObject").count() == 0
    _assert_inert(page)


def test_a_sub_agent_is_a_nested_bar_linking_to_its_session(page: Page, db: Path, server: object) -> None:
    with SqliteStore(db) as store:
        parent = Recorder.create(store, session_id="wf-parent", notary=None)
        parent.append(RunStarted(run_id="wf-parent", goal="delegate"))
        child = Recorder.create(
            store, session_id=f"wf-child{SCRIPT}", parent_session_id="wf-parent", notary=None
        )
        child.append(RunStarted(run_id=child.session_id, goal="the delegated part"))
        parent.append(Custom(custom_kind="step", payload={}))
    page.goto(f"{server.url}/session?id=wf-parent")  # type: ignore[attr-defined]
    bar = page.locator("#waterfall-chart rect.lane-sub-agent")
    expect(bar).to_have_count(1, timeout=WAIT_MS)
    expect(bar).to_have_class("bar lane-sub-agent depth-1 open")  # the child has not finished
    expect(page.locator("#waterfall-chart text.lane-label.sub")).to_contain_text("↳ wf-child<script>")
    bar.click()
    link = page.locator("#waterfall-detail a")
    expect(link).to_have_text("open the sub-agent's session")
    link.click()
    expect(page.locator("#session-id")).to_have_text(f"wf-child{SCRIPT}", timeout=WAIT_MS)
    _assert_inert(page)
