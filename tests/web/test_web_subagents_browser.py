"""The sub-agent tree in a real browser: budgets arrive live in the runs tree (rendered by ``app.js`` with
``textContent``), a parent's page lists its children, and the links go child → parent → child.

Uses the browser module's chromium, server and database fixtures (skipped or failed as that module says)."""

# ruff: noqa: F811  (the fixtures imported from a sibling test module are parameters here)
from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Page, expect

from .test_web_browser import (  # noqa: F401  (shared fixtures)
    WAIT_MS,
    _assert_inert,
    _off_loop,
    _run,
    browser,
    db,
    page,
    server,
)
from .test_web_subagents import _tree


def test_a_tree_arrives_live_with_budgets_and_links_both_ways(page: Page, db: Path) -> None:
    expect(page.locator("#live")).to_have_text("live", timeout=WAIT_MS)
    page.evaluate("window.__sameDocument = true")
    lead, kids = _off_loop(lambda: _tree(db))  # type: ignore[misc]
    root = _run(page, lead)
    expect(root.locator(":scope > .run-line .budget")).to_have_text(
        "tokens 30/2000  steps 2/30", timeout=WAIT_MS
    )
    for kid in kids:
        expect(_run(page, kid).locator(".budget")).to_have_text("tokens 30/300  steps 2/5")
    assert page.evaluate("window.__sameDocument") is True, "rendered live by app.js, without a reload"

    root.locator(":scope > .run-line a.run-id").click()
    expect(page.locator("#session-id")).to_have_text(lead)
    expect(page.locator("#subagents")).to_be_visible()
    rows = page.locator("#children tr.child")
    expect(rows).to_have_count(2)
    for kid in kids:
        row = page.locator(f'#children tr.child[data-child="{kid}"]')
        expect(row.locator("td.state")).to_have_text("terminal")
        expect(row.locator(".tokens")).to_have_text("30/300")
        expect(row.locator(".steps")).to_have_text("2/5")
    page.locator(f'#children tr.child[data-child="{kids[0]}"] a.child-link').click()
    expect(page.locator("#session-id")).to_have_text(kids[0])
    expect(page.locator("#subagents")).to_be_hidden()
    _assert_inert(page)  # the child's task and answer are hostile markup
    page.locator("#parent-link").click()
    expect(page.locator("#session-id")).to_have_text(lead)
