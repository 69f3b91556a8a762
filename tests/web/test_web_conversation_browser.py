"""The conversation view, its diff and the cost and entropy charts in Debian's chromium, on real sessions:
the bundled Claude Code and Codex imports, a kernel run that compacts its history, a run the entropy
watch stops; hostile text kept as text.

Uses the browser, server and database fixtures of :mod:`tests.web.test_web_browser`.
"""

# ruff: noqa: F811  (the fixtures imported from a sibling test module are parameters here)
from __future__ import annotations

import base64
import re
from pathlib import Path

from playwright.sync_api import Page, expect

from flightlog.cli.demo import example_transcripts
from flightlog.cli.demo_context import demo_agent
from flightlog.cli.demo_watch import watch_agent
from flightlog.events import Custom, LlmCompleted, RunStarted, ToolCompleted
from flightlog.importers import import_file
from flightlog.kernel import Agent, Kernel
from flightlog.messages import ImagePart, Message, TextPart, ToolCall, ToolResult
from flightlog.recorder import Recorder
from flightlog.sessions import replay_session
from flightlog.store import SqliteStore

from .conftest import IMG, SCRIPT, record_hostile
from .test_web_browser import (  # noqa: F401  (shared fixtures)
    WAIT_MS,
    _assert_inert,
    _off_loop,
    browser,
    db,
    page,
    server,
)


def _import_examples(db: Path) -> dict[str, str]:
    def run() -> dict[str, str]:
        ids: dict[str, str] = {}
        with SqliteStore(db) as store:
            for path in example_transcripts():
                for sid in import_file(store, path).session_ids:
                    ids[sid.split(":", 1)[0]] = sid
        return ids

    return _off_loop(run)  # type: ignore[return-value]


def _kernel_run(db: Path, agent: Agent, goal: str) -> str:
    def run() -> str:
        with SqliteStore(db) as store:
            return Kernel(store, agent).run_sync(goal, handle_signals=False).session_id

    return _off_loop(run)  # type: ignore[return-value]


def test_a_claude_code_import_reads_as_a_conversation(page: Page, db: Path, server: object) -> None:
    sid = _import_examples(db)["claude-code"]
    url = server.url  # type: ignore[attr-defined]
    page.goto(f"{url}/session?id={sid}")
    page.locator("#conversation-link").click()
    turns = page.locator("#conversation ol.conversation > li.turn")
    expect(turns.first).to_have_class("turn role-user ")
    expect(page.locator("#conversation h2")).to_have_text(re.compile(r"4 message\(s\) as of seq \d+"))
    expect(page.locator("li.role-assistant")).to_have_count(1)
    expect(page.locator("li.role-tool")).to_have_count(0)  # both results sit beside their calls
    thinking = page.locator("details.thinking").first
    expect(thinking).not_to_have_attribute("open", "")  # collapsed until clicked
    expect(thinking.locator("pre")).not_to_be_visible()
    thinking.locator("summary").click()
    expect(thinking.locator("pre")).to_contain_text("Phoenix server")
    call = page.locator(".call").first
    expect(call.locator(".call-side .tool")).to_have_text("Bash")
    expect(call.locator(".result-side")).to_contain_text("The user doesn't want to proceed")
    expect(call.locator(".note")).to_have_text("denied (the reason is the result)")
    box_call, box_result = (
        call.locator(".call-side").bounding_box(),
        call.locator(".result-side").bounding_box(),
    )
    assert box_call and box_result and box_result["x"] > box_call["x"] + box_call["width"] - 1  # side by side


def test_the_slider_moves_through_seqs_and_a_compaction_diff_is_highlighted(
    page: Page, db: Path, server: object
) -> None:
    sid = _kernel_run(db, demo_agent(), "do all the steps")
    url = server.url  # type: ignore[attr-defined]
    page.goto(f"{url}/conversation?id={sid}")
    page.locator("#conv-at-range").fill("40")  # a range input: fill sets its value and fires change
    expect(page).to_have_url(f"{url}/conversation?id={sid}&at=40&from=", timeout=WAIT_MS)
    with SqliteStore(db) as store:
        expected = len(replay_session(store, sid, at=40))
    expect(page.locator("#conversation h2")).to_have_text(f"{expected} message(s) as of seq 40")

    change = page.locator("a.change").first
    seq = int((change.text_content() or "").split()[1])
    change.click()
    expect(page.locator("#diff h2")).to_have_text(f"What changed from seq {seq - 1} to seq {seq}")
    removed = page.locator("li.diff-removed")
    added = page.locator("li.diff-added")
    expect(added).to_have_count(1)
    expect(added).to_have_class("turn role-system diff-added")
    expect(added.locator(".say")).to_contain_text("[compressed turn")
    with SqliteStore(db) as store:
        before, after = replay_session(store, sid, at=seq - 1), replay_session(store, sid, at=seq)
    expect(removed).to_have_count(len(before) - len(after) + 1)
    expect(page.locator(".diff-summary")).to_contain_text(f"{len(before) - len(after) + 1} removed, 1 added")
    assert removed.first.evaluate("e => getComputedStyle(e).textDecorationLine") == "line-through"


def test_cost_and_entropy_charts_on_real_runs(page: Page, db: Path, server: object) -> None:
    codex = _import_examples(db)["codex"]
    url = server.url  # type: ignore[attr-defined]
    page.goto(f"{url}/session?id={codex}")
    cost = page.locator("#cost-chart")
    expect(cost).to_have_attribute("data-total", "$0.1617", timeout=WAIT_MS)
    expect(cost.locator("circle.dot")).to_have_count(6)
    expect(cost).to_contain_text("List prices read")

    looping = _kernel_run(db, watch_agent(), "find the config file")
    page.goto(f"{url}/session?id={looping}")
    entropy = page.locator("#entropy-chart")
    expect(entropy).to_have_attribute("data-samples", "6", timeout=WAIT_MS)
    expect(entropy.locator("circle.dot.alert")).to_have_count(1)
    expect(entropy.locator("line.threshold")).to_have_count(1)
    expect(page.locator("#cost-chart")).to_have_text(
        "Cost unknown: no list price for looping-model (never guessed)."
    )


def test_hostile_text_stays_inert_in_the_conversation_and_charts(
    page: Page, db: Path, server: object
) -> None:
    def record() -> str:
        with SqliteStore(db) as store:
            sid = record_hostile(store, "conv-browser-hostile")
            rec = Recorder.attach(store, sid)
            message = Message(
                role="assistant",
                content=[TextPart(text=f"say {SCRIPT}")],
                tool_calls=[ToolCall(id="c9", name=f"t{IMG}", arguments=SCRIPT)],
            )
            rec.append(LlmCompleted(turn=2, message=message))
            rec.append(ToolCompleted(turn=2, results=[ToolResult(call_id="c9", output=IMG)]))
            usage = {"turn": 2, "model": f"m{IMG}", "protocol": "x", "input_tokens": 1, "output_tokens": 1}
            rec.append(Custom(custom_kind="model_usage", payload=usage))
            return sid

    sid = _off_loop(record)
    url = server.url  # type: ignore[attr-defined]
    page.goto(f"{url}/conversation?id={sid}")
    expect(page.locator(".call .tool").last).to_have_text(f"t{IMG}")
    expect(page.locator(".call .result-side pre").last).to_have_text(IMG)
    expect(page.locator("li.role-assistant .say pre").last).to_have_text(f"say {SCRIPT}")
    _assert_inert(page)
    page.goto(f"{url}/conversation?id={sid}&at=5&from=1")
    expect(page.locator(".diff-summary")).to_be_visible()
    _assert_inert(page)
    page.goto(f"{url}/session?id={sid}")
    expect(page.locator("#cost-chart")).to_have_text(
        f"Cost unknown: no list price for m{IMG} (never guessed).", timeout=WAIT_MS
    )
    _assert_inert(page)


def test_an_image_in_a_message_is_drawn_under_the_csp(page: Page, db: Path, server: object) -> None:
    png = base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    )

    def record() -> None:
        with SqliteStore(db) as store:
            rec = Recorder.create(store, session_id="conv-image")
            data_uri = ImagePart(ref="data:image/png;base64," + base64.b64encode(png).decode())
            remote = ImagePart(ref="https://tracker.example/pixel.png")
            rec.append(
                RunStarted(run_id="i", goal="what is in this picture?", attachments=[data_uri, remote])
            )

    _off_loop(record)
    page.goto(f"{server.url}/conversation?id=conv-image")  # type: ignore[attr-defined]
    image = page.locator("li.role-user .image img")
    expect(image).to_have_count(1)
    assert (image.get_attribute("src") or "").startswith("/api/conversation/image?")
    # Wait for the image itself: a loading="lazy" image whose load Chromium has not started yet already
    # reports complete (naturalWidth 0), which under load made this check race the intersection observer.
    # Polled by expect (Playwright's injected script reads the property), not page.wait_for_function: a
    # string predicate that is not true at the first check is re-evaluated with eval in the page, which the
    # dashboard's CSP (script-src 'self') refuses, so under load the wait itself failed.
    expect(image).to_have_js_property("naturalWidth", 1, timeout=WAIT_MS)
    assert image.evaluate("img => img.naturalWidth") == 1  # loaded: the route serves it, the CSP allows it
    expect(page.locator("li.role-user .image").last).to_have_text(
        "remote image, not loaded: https://tracker.example/pixel.png"
    )
