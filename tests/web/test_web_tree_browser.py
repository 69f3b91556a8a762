"""A three-level sub-agent tree run by the kernel, in Debian's chromium: the waterfall nests each
sub-agent's bar (with its own model and tool spans inside) under its parent; the run page links the tree
both ways with seed 002 state and source badges and spent/granted budgets; the approval wait names who
decided. Uses the browser, server and database fixtures of :mod:`tests.web.test_web_browser`.
"""

# ruff: noqa: F811  (the fixtures imported from a sibling test module are parameters here)
from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import Page, expect

from flightlog.kernel import Agent, Budgets, Kernel, approve
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.kernel.subagents import subagent
from flightlog.store import SqliteStore
from flightlog.web import app as web_app

from .conftest import IMG, SCRIPT, echo, run_gated
from .test_web_browser import (  # noqa: F401  (shared fixtures)
    WAIT_MS,
    _assert_inert,
    _off_loop,
    browser,
    db,
    page,
    server,
)


def _three_levels(db: Path) -> tuple[str, str, str]:
    """lead → researcher → checker, each echoing once; returns the three session ids."""
    checker = Agent(
        "checker",
        [
            ScriptedProvider(
                [calls(call("echo", {"text": f"check {IMG}"}, id="c")), reply("checked")], by_turn=True
            )
        ],
        tools=[echo],
    )
    researcher = Agent(
        "researcher",
        [
            ScriptedProvider(
                [calls(call("checker", {"task": f"verify {SCRIPT}"}, id="k")), reply("researched")],
                by_turn=True,
            )
        ],
        tools=[echo, subagent(checker, role="explore", budgets=Budgets(tokens=200, turns=4))],
    )
    lead = Agent(
        "lead",
        [ScriptedProvider([calls(call("researcher", {"task": "dig"}, id="r")), reply("done")], by_turn=True)],
        tools=[echo, subagent(researcher, role="explore", budgets=Budgets(tokens=600, turns=8))],
        budgets=Budgets(tokens=3000, turns=30),
    )
    with SqliteStore(db) as store:
        result = Kernel(store, lead, notary=None, heartbeat_s=None).run_sync("go", session_id="tree-lead")
        assert result.status == "completed"
        sessions = list(store.list_sessions())
        (child,) = [s.session_id for s in sessions if s.parent_session_id == "tree-lead"]
        (grandchild,) = [s.session_id for s in sessions if s.parent_session_id == child]
    return "tree-lead", child, grandchild


def test_a_three_level_tree_nests_on_the_waterfall_and_links_both_ways(
    page: Page, db: Path, server: object
) -> None:
    lead, child, grandchild = _off_loop(lambda: _three_levels(db))  # type: ignore[misc]
    url = server.url  # type: ignore[attr-defined]
    page.goto(f"{url}/session?id={lead}")
    chart = page.locator("#waterfall-chart")
    expect(chart.locator("rect.lane-sub-agent.depth-1")).to_have_count(1, timeout=WAIT_MS)
    expect(chart.locator("rect.lane-sub-agent.depth-2")).to_have_count(1)
    expect(chart.locator("rect.lane-sub-agent.open")).to_have_count(0)  # both finished
    inner_tools = chart.locator("rect.inner.lane-tool")
    expect(inner_tools).to_have_count(2)  # the researcher's call to the checker, the checker's echo
    expect(chart.locator("rect.inner.lane-model")).to_have_count(4)  # two model calls in each sub-agent
    inner_tools.last.click()
    detail = page.locator("#waterfall-detail")
    expect(detail).to_contain_text(f"in sub-agent {grandchild}")
    expect(detail.locator("a").first).to_have_attribute("href", re.compile(r"^/session\?id=" + grandchild))
    page.locator("#waterfall-detail button.wf-show").click()
    expect(detail.locator("pre.wf-event")).to_contain_text('"name": "echo"')  # the grandchild's own event

    # The run tree: each page shows the path from the root, badges per state/source, spent/granted.
    page.goto(f"{url}/session?id={grandchild}")
    nodes = page.locator("#lineage li.run-node")
    expect(nodes).to_have_count(3)
    expect(nodes.nth(0).locator("a.ancestor-link")).to_have_text(lead)
    expect(nodes.nth(1).locator("a.ancestor-link")).to_have_text(child)
    expect(nodes.nth(2)).to_have_class("run-node current")
    for i in range(3):
        expect(nodes.nth(i).locator(".badge.state-terminal")).to_have_text("terminal")
        expect(nodes.nth(i).locator(".badge.source-direct")).to_have_text("direct")
        expect(nodes.nth(i).locator(".badge.outcome-completed")).to_have_count(1)
    expect(nodes.nth(0).locator(".budget")).to_contain_text("/3000, steps")
    expect(nodes.nth(1).locator(".budget")).to_contain_text("/600, steps 2/8")
    expect(nodes.nth(2).locator(".budget")).to_contain_text("/200, steps 2/4")
    nodes.nth(1).locator("a.ancestor-link").click()
    expect(page.locator("#session-id")).to_have_text(child, timeout=WAIT_MS)
    row = page.locator(f'#children tr.child[data-child="{grandchild}"]')  # and back down
    expect(row.locator(".badge.source-direct")).to_have_count(1)
    row.locator("a.child-link").click()
    expect(page.locator("#session-id")).to_have_text(grandchild, timeout=WAIT_MS)
    _assert_inert(page)


def test_the_approval_wait_names_who_decided(page: Page, db: Path, server: object) -> None:
    assert _off_loop(lambda: run_gated(db, "tree-gated").status) == "suspended"

    def decide() -> None:
        with SqliteStore(db) as store:
            approve(store, "tree-gated", "w1", responder=f"ada {SCRIPT}")

    _off_loop(decide)
    page.goto(f"{server.url}/session?id=tree-gated")  # type: ignore[attr-defined]
    wait = page.locator("#waterfall-chart rect.lane-approval title")
    expect(wait).to_contain_text(f"approved by ada {SCRIPT}", timeout=WAIT_MS)
    expect(page.locator("#decisions tr.decision-approve .who")).to_have_text(f"ada {SCRIPT}")
    _assert_inert(page)


def test_every_seed_002_state_and_source_has_its_own_badge_style() -> None:
    css = (Path(web_app.__file__).parent / "static" / "app.css").read_text(encoding="utf-8")
    from flightlog.web.views import SOURCES, STATES

    styles = {}
    for prefix, values in (("state", STATES), ("source", SOURCES)):
        for value in values:
            match = re.search(r"\.badge\." + prefix + "-" + re.escape(value) + r" \{([^}]*)\}", css)
            assert match, f"no badge style for {prefix} {value}"
            styles[f"{prefix}-{value}"] = match.group(1).strip()
    assert len(set(styles.values())) == len(styles), "two states or sources share a badge style"
    assert len(STATES) == 9 and set(SOURCES) == {"direct", "workflow", "fleet", "core_job", "task"}


def test_signals_and_an_abort_request_are_inert_marks(page: Page, db: Path, server: object) -> None:
    from flightlog.events import Custom, RunStarted
    from flightlog.recorder import Recorder

    def record() -> None:
        with SqliteStore(db) as store:
            rec = Recorder.create(store, session_id="tree-marks", notary=None)
            rec.append(RunStarted(run_id="tree-marks", goal="marks"))
            payload = {"kind": "steer", "sender": f"eve {IMG}", "disposition": "delivered", "text": SCRIPT}
            rec.append(Custom(custom_kind="signal_message", payload=payload))
            rec.append(Custom(custom_kind="abort_requested", payload={"turn": 0, "requested_by": SCRIPT}))

    _off_loop(record)
    page.goto(f"{server.url}/session?id=tree-marks")  # type: ignore[attr-defined]
    signal = page.locator("#waterfall-chart path.mark-signal_message title")
    expect(signal).to_have_text(f"steer from eve {IMG}: {SCRIPT}, turn 0", timeout=WAIT_MS)
    expect(page.locator("#waterfall-chart path.mark-abort_requested title")).to_have_text(
        f"abort requested by {SCRIPT}, turn 0"
    )
    expect(page.locator("#decisions tr.decision-abort .who")).to_have_text(SCRIPT)
    _assert_inert(page)
