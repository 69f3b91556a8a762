"""What a new user's pass found on the dashboard, in a real browser (Debian's chromium through playwright):
a session page says first that it fails verification or waits for someone, and marks the divergent events;
the signal and abort forms use the operator name at the top right and refuse in place, keeping the text;
the live runs tree reads as the server drew it; the runs list's numbers, times and badges never wrap."""

# ruff: noqa: F811  (the fixtures imported from a sibling test module are parameters here)
from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from playwright.sync_api import Page, expect

from flightlog.events import Custom
from flightlog.kernel import approve
from flightlog.sessions import iter_events
from flightlog.store import SqliteStore
from flightlog.store.signals import pending_signals
from flightlog.web.server import DashboardServer

from .conftest import IMG, run_gated
from .test_web_browser import (  # noqa: F401  (shared fixtures)
    WAIT_MS,
    _off_loop,
    browser,
    db,
    page,
    server,
)


def _operator(page: Page, name: str) -> None:
    """Type ``name`` in the header's operator field (remembered across pages, as a user types it)."""
    page.locator("#operator").fill(name)


def _open_suspended(page: Page, db: Path, server: DashboardServer, sid: str) -> None:
    """Run the gated agent until it waits for approval of ``w1``, then open its session page."""
    assert _off_loop(lambda: run_gated(db, sid)).status == "suspended"  # type: ignore[attr-defined]
    page.goto(f"{server.url}/session?id={sid}")


def test_a_suspended_run_says_at_the_top_what_it_waits_for(
    page: Page, db: Path, server: DashboardServer
) -> None:
    sid = "dash-waits"
    _open_suspended(page, db, server, sid)
    expect(page.locator("#live")).to_have_text("live", timeout=WAIT_MS)
    banner = page.locator("#attention")
    expect(banner).to_have_text(
        re.compile(r"^\s*Waiting for approval: write_note call w1 \(turn 2\) Approve or deny\s*$")
    )
    # above the facts, and its link is the Approve/Deny card, within the first screen
    assert banner.bounding_box()["y"] < page.locator("dl.facts").bounding_box()["y"]  # type: ignore[index]
    banner.get_by_role("link", name="Approve or deny").click()
    card = page.locator('#approvals li.pending[data-call="w1"]')
    expect(card.get_by_role("button", name="Approve")).to_be_in_viewport()
    page.evaluate("window.__sameDocument = true")

    def decide() -> None:
        with SqliteStore(db) as store:
            approve(store, sid, "w1", responder="ada")

    _off_loop(decide)  # decided elsewhere: the live status redraws the banner
    expect(banner).to_have_text(
        re.compile(r"Decided, waiting for a resume: flightlog resume dash-waits"), timeout=WAIT_MS
    )
    expect(banner).not_to_contain_text("Waiting for approval")
    assert page.evaluate("window.__sameDocument") is True, "seen without a reload"


def test_a_tampered_session_says_so_first_and_marks_the_event(
    page: Page, db: Path, server: DashboardServer
) -> None:
    sid = "dash-tampered"
    assert _off_loop(lambda: run_gated(db, sid)).status == "suspended"  # type: ignore[attr-defined]
    raw = sqlite3.connect(db)
    try:
        raw.execute("DROP TRIGGER IF EXISTS events_no_update")
        raw.execute(
            "UPDATE events SET event = replace(event, 'looking', 'wired 5000 USD') "
            "WHERE session_id = ? AND kind = 'tool_completed'",
            (sid,),
        )
        raw.commit()
        (seq,) = raw.execute(
            "SELECT seq FROM events WHERE session_id = ? AND event LIKE '%wired 5000 USD%'", (sid,)
        ).fetchone()
    finally:
        raw.close()
    page.goto(f"{server.url}/session?id={sid}")
    banner = page.locator("#verify-banner")
    expect(banner).to_contain_text(
        f"This session fails verification. Its ledger diverges at seq {seq} (hash_mismatch"
    )
    assert banner.bounding_box()["y"] < page.locator("dl.facts").bounding_box()["y"]  # type: ignore[index]
    expect(banner).to_be_in_viewport()
    row = page.locator(f"#seq-{seq}")
    expect(row).to_have_class(re.compile(r"\bdivergent\b"))
    expect(row.locator(".divergent-badge")).to_have_text("divergent: hash_mismatch")
    # every row the Verification table lists is marked, and no other
    listed = set(page.locator("#verify table.divergences tbody td:first-child").all_inner_texts())
    marked = page.locator("#events .ev.divergent").evaluate_all("rs => rs.map(r => r.id.slice(4))")
    assert str(seq) in listed and set(marked) == listed, (marked, listed)
    banner.get_by_role("link", name="See the verification").click()
    expect(page.locator("#verify h2")).to_be_in_viewport()

    page.goto(f"{server.url}/conversation?id={sid}")
    expect(page.locator("#verify-banner")).to_contain_text(f"diverges at seq {seq}")
    # the echo's result sits beside its call (the assistant's message, put there by another event)
    result = page.locator("li.turn .call .result-side").filter(has_text="wired 5000 USD")
    expect(result.locator(".divergent-badge")).to_have_text("divergent: hash_mismatch")
    expect(page.locator(".divergent-badge")).to_have_count(2)  # the banner's key and the result


def test_signal_and_abort_use_the_header_operator_and_refuse_in_place(
    page: Page, db: Path, server: DashboardServer
) -> None:
    sid = "dash-signal"
    _open_suspended(page, db, server, sid)
    _operator(page, "")
    form = page.locator("form.signal")
    form.locator("input[name=text]").fill(f"check the weather {IMG}")
    form.get_by_role("button", name="Send").click()
    status = page.locator("#signal .form-status")
    expect(status).to_have_text("Enter your operator name (top right) first: it is recorded with the signal.")
    expect(status).to_be_in_viewport()
    expect(form.locator("input[name=text]")).to_have_value(f"check the weather {IMG}")  # kept
    assert page.url == f"{server.url}/session?id={sid}"  # no error page
    expect(page.locator("#operator")).to_be_focused()

    _operator(page, "headerbob")  # typed after the page loaded, as the user did
    form.get_by_role("button", name="Send").click()
    expect(status).to_have_text(
        re.compile(r"^message queued as headerbob \(signal sig-[0-9a-f]+\)"), timeout=WAIT_MS
    )
    expect(form.locator("input[name=text]")).to_have_value("")
    with SqliteStore(db, read_only=True) as store:
        queued = pending_signals(store, sid)
    assert [(s.sender, s.text) for s in queued] == [("headerbob", f"check the weather {IMG}")]

    abort_form = page.locator("form.abort")
    _operator(page, "")
    abort_form.locator("input[name=confirm]").check()
    abort_form.get_by_role("button", name="Abort").click()
    expect(page.locator("#abort .form-status")).to_have_text(
        "Enter your operator name (top right) first: it is recorded with the abort."
    )
    _operator(page, "headerbob")
    abort_form.get_by_role("button", name="Abort").click()
    expect(page.locator("#abort .form-status")).to_have_text(f"aborted {sid} as headerbob", timeout=WAIT_MS)
    expect(page.locator("#aborted")).to_be_visible(timeout=WAIT_MS)  # the live status follows
    with SqliteStore(db, read_only=True) as store:
        asked = [
            e
            for _r, e in iter_events(store, sid)
            if isinstance(e, Custom) and e.custom_kind == "abort_requested"
        ]
    assert [e.payload["requested_by"] for e in asked] == ["headerbob"]


_LINE_TEXT = """html => {
  const doc = new DOMParser().parseFromString(html, "text/html");
  return Array.from(doc.querySelectorAll("#runs li.run > .run-line"), l => l.textContent.replace(/\\s+/g, " ").trim());
}"""


def test_the_live_runs_tree_reads_as_the_server_drew_it(
    page: Page, db: Path, server: DashboardServer
) -> None:
    """app.js redraws the tree from each ``runs`` message: its lines say what the server's HTML says (it
    dropped the spaces between budget, duration and context: "steps 1context 94/136,000")."""
    assert _off_loop(lambda: run_gated(db, "dash-tree")).status == "suspended"  # type: ignore[attr-defined]
    page.goto(f"{server.url}/")
    expect(page.locator("#runs")).to_have_attribute("data-updated", re.compile(r"^\d+$"))  # app.js drew it
    html = page.request.get(f"{server.url}/").text()
    served = page.evaluate(_LINE_TEXT, html)
    live = page.locator("#runs li.run > .run-line").evaluate_all(
        "ls => ls.map(l => l.textContent.replace(/\\s+/g, ' ').trim())"
    )
    assert any("context" in line for line in served), served
    assert live == served


_ONE_LINE = """cells => cells.map(cell => {
  const range = document.createRange();
  range.selectNodeContents(cell);
  const tops = new Set(Array.from(range.getClientRects(), r => Math.round(r.top)));
  return [cell.textContent.trim(), tops.size];
})"""


def test_runs_list_numbers_times_and_badges_stay_on_one_line(
    page: Page, db: Path, server: DashboardServer
) -> None:
    """In a narrow window the runs list's token counts, times and badges are never broken inside (it broke
    "29949" and "core_job"); a long id is cut with an ellipsis and its full value in the title; the goal
    column shows each run's goal."""
    long_id = "claude-code:491e126e-1e71-469c-ade2-fcc8af567c74:agent:afb92ff"
    assert _off_loop(lambda: run_gated(db, long_id, goal=f"a goal {IMG}")).status == "suspended"  # type: ignore[attr-defined]
    page.set_viewport_size({"width": 760, "height": 900})
    try:
        page.goto(f"{server.url}/runs")
        row = page.locator("table.runs-list tbody tr").filter(has=page.locator(f'a[title="{long_id}"]'))
        expect(row.locator("td.goal")).to_have_text(f"a goal {IMG}")
        cells = page.locator(
            "table.runs-list td:nth-child(6), table.runs-list td:nth-child(8), table.runs-list .badge"
        )
        lines = cells.evaluate_all(_ONE_LINE)
        assert lines and all(n == 1 for _text, n in lines), [x for x in lines if x[1] != 1]
        link = row.locator("td.run a")
        assert link.evaluate("a => a.scrollWidth > a.clientWidth")  # cut, not wrapped
        assert link.evaluate("a => a.getClientRects().length") == 1
    finally:
        page.set_viewport_size({"width": 1280, "height": 720})
