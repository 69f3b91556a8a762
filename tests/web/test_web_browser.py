"""The dashboard in a real browser: Debian's chromium driven by playwright (never `playwright install`).

One dashboard server (a uvicorn thread) and one chromium serve the module; kernel runs write to the same
database from threads of this process, as another process would. Skipped only when /usr/bin/chromium is
missing outside CI; in CI (``$CI`` set) a missing browser fails (``.ci/run`` installs it).
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from flightlog.events import (
    AgentProcessChanged,
    Custom,
    PermissionResolved,
    RunStarted,
    ToolCompleted,
    ToolGated,
)
from flightlog.kernel import Kernel, pending
from flightlog.kernel.abort import abort
from flightlog.messages import ToolResult
from flightlog.recorder import Recorder
from flightlog.sessions import iter_events
from flightlog.store import SqliteStore
from flightlog.web.app import create_app
from flightlog.web.server import DashboardServer

from .conftest import (
    BIDI,
    HUGE,
    IMG,
    SCRIPT,
    TOKEN,
    blocking_agent,
    opener,
    record_hostile,
    resume_gated,
    run_gated,
)

CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists():
    if os.environ.get("CI"):
        pytest.fail(f"{CHROMIUM} is missing: CI must run the browser tests (.ci/run installs chromium)")
    pytest.skip(
        f"{CHROMIUM} is missing (apt-get install chromium); browser tests skipped", allow_module_level=True
    )

from playwright.sync_api import BrowserContext, Page, expect, sync_playwright  # noqa: E402

ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WAIT_MS = 60_000


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("browser") / "dashboard.db"
    SqliteStore(path).close()
    return path


@pytest.fixture(scope="module")
def server(db: Path) -> Iterator[DashboardServer]:
    with DashboardServer(create_app(opener(db), token=TOKEN, poll_s=0.15)) as running:
        yield running


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserContext]:
    profile = tmp_path_factory.mktemp("chromium-profile")  # a new, empty user data dir
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile), executable_path=str(CHROMIUM), headless=True, args=ARGS
        )
        # Every wait of the browser tests is for a state, bounded by WAIT_MS: an ``expect`` without its
        # own timeout waited 5 s (playwright's default), an action or navigation 30 s.
        context.set_default_timeout(WAIT_MS)
        expect.set_options(timeout=WAIT_MS)
        try:
            yield context
        finally:
            context.close()


@pytest.fixture
def page(browser: BrowserContext, server: DashboardServer) -> Iterator[Page]:
    """A tab signed in through the printed URL, recording every dialog (none may ever open)."""
    tab = browser.new_page()
    dialogs: list[str] = []

    def on_dialog(dialog: object) -> None:
        dialogs.append(dialog.message)  # type: ignore[attr-defined]
        dialog.dismiss()  # type: ignore[attr-defined]

    tab.on("dialog", on_dialog)
    tab.goto(f"{server.url}/?token={TOKEN}")
    assert tab.url == f"{server.url}/", "the token is dropped from the address bar"
    try:
        yield tab
        assert dialogs == [], f"a dialog opened: {dialogs}"
        assert tab.evaluate("window.__pwned") is None
    finally:
        tab.close()


def _in_thread(target: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    results: list[object] = []
    thread = threading.Thread(target=lambda: results.append(target()), daemon=True)
    thread.start()
    return thread, results


def _off_loop(target: Callable[[], object]) -> object:
    """Run ``target`` on another thread and return its result (playwright's loop owns this thread)."""
    thread, results = _in_thread(target)
    thread.join(60)
    assert results, "the call did not finish"
    return results[0]


def _wait_for(check: Callable[[], bool], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _run(page: Page, run_id: str):  # type: ignore[no-untyped-def]
    return page.locator(f'li.run[data-run="{run_id}"]')


def _assert_inert(page: Page) -> None:
    assert page.locator("img, iframe, object, embed").count() == 0
    sources = page.evaluate("Array.from(document.scripts).map(s => s.getAttribute('src'))")
    assert sources and sources[0] == "/static/app.js", sources
    assert set(sources) <= {
        "/static/app.js",
        "/static/proof.js",
        "/static/waterfall.js",
        "/static/charts.js",
        "/static/conversation.js",
    }, sources
    # The page's script still runs (a hostile payload did not hang it): bounded by the generous wait, not
    # timed.
    page.wait_for_function("1 + 1 === 2", timeout=WAIT_MS)


def test_a_run_appears_and_finishes_live(page: Page, db: Path) -> None:
    expect(page.locator("#live")).to_have_text("live", timeout=WAIT_MS)
    page.evaluate("window.__sameDocument = true")
    assert _run(page, "live-run").count() == 0
    release = threading.Event()

    def work() -> str:
        with SqliteStore(db) as store:
            kernel = Kernel(store, blocking_agent(release))
            return kernel.run_sync("watch me <b>live</b>", session_id="live-run", handle_signals=False).status

    thread, results = _in_thread(work)
    try:
        run = _run(page, "live-run")
        expect(run).to_be_visible(timeout=WAIT_MS)
        expect(run.locator(".task")).to_have_text("watch me <b>live</b>")
        expect(run.locator(".badge.state")).not_to_have_text("terminal")
    finally:
        release.set()
        thread.join(30)
    assert results == ["completed"]
    expect(run.locator(".badge.outcome")).to_have_text("completed", timeout=WAIT_MS)
    expect(run.locator(".badge.state")).to_have_text("terminal")
    assert page.evaluate("window.__sameDocument") is True, "seen without a reload"
    assert page.locator("b").count() == 0

    page.locator('li.run[data-run="live-run"] a.run-id').click()
    expect(page.locator("#status")).to_have_text("completed")
    expect(page.locator("#events .ev")).not_to_have_count(0)
    expect(page.locator("#tools")).to_contain_text("the test holds me")
    expect(page.locator("#tools")).to_contain_text("released")
    expect(page.locator("#verify h2")).to_have_text("Verification: intact")


def test_approve_in_the_page_then_the_runner_resumes(page: Page, db: Path) -> None:
    note = f"<b>bold</b>{IMG}"
    result = _off_loop(lambda: run_gated(db, "gated-run", note=note, goal=f"gated {SCRIPT}"))
    assert result.status == "suspended"  # type: ignore[attr-defined]
    row = page.locator('li.pending[data-session="gated-run"][data-call="w1"]')
    expect(row).to_be_visible(timeout=WAIT_MS)
    expect(row.locator(".args")).to_contain_text("<b>bold</b><img src=x onerror=")  # shown as text
    expect(_run(page, "gated-run").locator(".badge.state")).to_have_text("waiting_input")
    suspended = "Sessions 1–1 of 1 suspended (waiting for a decision or, once decided, for a resume)."
    expect(page.locator("#queue-nav")).to_have_text(suspended)  # the stream's line

    row.get_by_role("button", name="Approve").click()  # no operator name yet: refused in the page
    expect(page.locator("#notice")).to_contain_text("operator name")
    page.locator("#operator").fill("Grace Hopper")
    row.get_by_role("button", name="Approve").click()
    expect(page.locator("#notice")).to_contain_text("approved w1 as Grace Hopper", timeout=WAIT_MS)
    expect(page.locator("#waiting")).to_contain_text("flightlog resume gated-run", timeout=WAIT_MS)
    expect(row).to_have_count(0, timeout=WAIT_MS)
    expect(_run(page, "gated-run").locator(".badge.resume")).to_be_visible()
    # Decided, not resumed: nothing waits for a decision, and the count under it says what it counts
    # (it said "1 waiting" under "Nothing is waiting for a decision.").
    expect(page.locator("#pending")).to_have_text("Nothing is waiting for a decision.")
    expect(page.locator("#queue-nav")).to_have_text(suspended)
    page.reload()  # the server's rendering agrees with the stream's
    expect(page.locator("#pending")).to_have_text("Nothing is waiting for a decision.")
    expect(page.locator("#waiting")).to_contain_text("approved by Grace Hopper), waiting for a resume")
    expect(page.locator("#queue-nav")).to_have_text(suspended)

    # The runner's side of the design: once nothing waits, it resumes the run itself.
    with SqliteStore(db, read_only=True) as store:
        _wait_for(lambda: pending(store, "gated-run") == [])
    assert _off_loop(lambda: resume_gated(db, "gated-run")).status == "completed"  # type: ignore[attr-defined]
    run = _run(page, "gated-run")
    expect(run.locator(".badge.outcome")).to_have_text("completed", timeout=WAIT_MS)
    expect(page.locator("#waiting")).not_to_contain_text("gated-run")
    expect(page.locator("#queue-nav")).to_have_text("")  # nothing may wait: no line

    with SqliteStore(db, read_only=True) as store:
        events = [event for _row, event in iter_events(store, "gated-run")]
    gated = next(i for i, e in enumerate(events) if isinstance(e, ToolGated))
    resolved = [e for e in events[gated:] if isinstance(e, PermissionResolved)]
    assert [(e.approved, e.responder) for e in resolved] == [(True, "user")]
    decision = next(e for e in events if isinstance(e, Custom) and e.custom_kind == "approval_decision")
    assert decision.payload["responder"] == "Grace Hopper"
    assert any(isinstance(e, ToolCompleted) and e.results[0].call_id == "w1" for e in events)

    page.reload()
    expect(page.locator("#operator")).to_have_value("Grace Hopper")  # remembered in localStorage
    _assert_inert(page)


def test_the_abort_section_follows_the_run_live(page: Page, db: Path, server: DashboardServer) -> None:
    """An abort pauses the open run page's run, a resume makes it abortable again: the live status
    swaps the *Abort the run* and *Aborted* sections without a reload."""
    sid = "abort-live"
    assert _off_loop(lambda: run_gated(db, sid)).status == "suspended"  # type: ignore[attr-defined]
    page.goto(f"{server.url}/session?id={sid}")
    expect(page.locator("#live")).to_have_text("live", timeout=WAIT_MS)
    expect(page.locator("#abort")).to_be_visible()
    expect(page.locator("#aborted")).to_be_hidden()
    page.evaluate("window.__sameDocument = true")

    def stop() -> bool:
        with SqliteStore(db) as store:
            return abort(store, sid, requested_by="ada")

    assert _off_loop(stop) is True
    expect(page.locator("#aborted")).to_be_visible(timeout=WAIT_MS)
    expect(page.locator("#abort")).to_be_hidden()
    expect(page.locator("#status")).to_have_text("paused")
    assert _off_loop(lambda: resume_gated(db, sid)).status == "suspended"  # type: ignore[attr-defined]
    expect(page.locator("#abort")).to_be_visible(timeout=WAIT_MS)
    expect(page.locator("#aborted")).to_be_hidden()
    assert page.evaluate("window.__sameDocument") is True, "seen without a reload"


def test_a_child_whose_parent_is_filtered_out_is_drawn_live_under_a_marker(
    page: Page, db: Path, server: DashboardServer
) -> None:
    with SqliteStore(db) as store:
        parent = Recorder.create(store, task="parent work", session_id="marker-parent")
        parent.append(RunStarted(run_id="p", goal="parent work"))
        parent.append(
            AgentProcessChanged(
                turn=1,
                agent_id="marker-child",
                parent_session_id="marker-parent",
                role="worker",
                isolation="shared",
                context_inheritance="none",
                state="running",
            )
        )
        parent.finish("completed")
    page.goto(f"{server.url}/?state=running")
    expect(page.locator("#runs")).to_have_attribute("data-updated", re.compile(r"^\d+$"))  # app.js drew it
    marker = page.locator("#runs li.unlisted-parent")
    expect(marker).to_have_text("(parent marker-parent not listed)")
    expect(marker.locator("a")).to_have_attribute("href", "/session?id=marker-parent")
    expect(page.locator('#runs li.unlisted-parent + li.run.orphan[data-run="marker-child"]')).to_be_visible()


def test_hostile_events_render_inert(page: Page, db: Path, server: DashboardServer) -> None:
    with SqliteStore(db) as store:
        sid = record_hostile(store, "hostile-run")
    expect(_run(page, "hostile-run")).to_be_visible(timeout=WAIT_MS)
    expect(_run(page, "hostile-run").locator(".task")).to_have_text(f"task {IMG}")
    _assert_inert(page)

    page.goto(f"{server.url}/session?id={sid}&at=2")
    expect(page.locator(".task").first).to_have_text(f"task {IMG}")
    expect(page.locator("#events").get_by_text(SCRIPT).first).to_be_visible()
    expect(page.locator("#events")).to_contain_text("[U+202E]")
    body = page.locator("main").inner_text()
    for char in ("\u202e", "\u2066", "\u200b", "\x07", "\U000e0041"):
        assert char not in body
    _assert_inert(page)

    # Hostile events arriving live go through the JavaScript renderer.
    with SqliteStore(db) as store:
        rec = Recorder.attach(store, sid)
        rec.append(ToolCompleted(turn=2, results=[ToolResult(call_id="c2", output=f"live {IMG} {BIDI}")]))
        rec.append(Custom(custom_kind=f"live{SCRIPT}", payload={"huge": HUGE, "tag": IMG}))
    expect(page.locator("#seq-5")).to_be_visible(timeout=WAIT_MS)
    expect(page.locator("#seq-4 .text")).to_contain_text("live <img src=x onerror=")
    expect(page.locator("#seq-5 .kind")).to_have_text(f"custom:live{SCRIPT}")
    assert "\u202e" not in page.locator("#events").inner_text()
    _assert_inert(page)

    # A 2 MB string is cut with "show more", which loads the whole event as text.
    row = page.locator("#seq-5")
    row.locator("summary").click()
    expect(row.locator("pre.raw")).to_contain_text("more characters]")
    row.locator("a.more").click()
    _wait_for(lambda: row.locator("pre.raw").evaluate("p => p.textContent.length") > len(HUGE))
    _assert_inert(page)
