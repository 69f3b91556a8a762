"""Take the dashboard screenshots in ``docs/guide/img/`` from a fresh ``flightlog demo``.

    .venv/bin/python docs/screenshots.py            # writes docs/guide/img/dashboard-*.png

Runs ``flightlog demo`` into a scratch database with a scratch home (keys, heads: nothing of yours is
read or written), serves that database with the dashboard on a free loopback port, and drives Debian's
chromium (``/usr/bin/chromium``, or ``$CHROMIUM``) with playwright through the main views:

====================================== ================================================================
``dashboard-runs.png``                  the runs list
``dashboard-waterfall.png``             the demo's long run (three compactions): waterfall, token and
                                        context charts
``dashboard-charts.png``                the looping run caught by the entropy watch: its entropy chart
``dashboard-cost.png``                  the Codex CLI import: its cumulative cost at list prices
``dashboard-conversation.png``          the Claude Code import as a conversation (denied tool calls)
``dashboard-diff.png``                  what the long run's first compaction changed in the history (its
                                        summary added after the archived messages it removed)
``dashboard-proof.png``                 an event of the long run verified in the browser
``dashboard-heads.png``                 the looping run's signed checkpoints and seal checked in the browser
``dashboard-subagents.png``             the sub-agent demo's lead run: its run tree, sub-agents and
                                        waterfall with the sub-agents nested
====================================== ================================================================

Not a test: it writes files. Needs the ``web`` and ``test`` extras (playwright).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from flightlog.store import Store

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "guide" / "img"
TOKEN = "screenshots-token-0123456789"
WIDTH = 1180


def _scratch_env(home: Path) -> None:
    """Point every per-user location (database, keys, retained heads) into ``home``."""
    for name in ("HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        os.environ[name] = str(home if name == "HOME" else home / name.lower())
    os.environ["FLIGHTLOG_DB"] = str(home / "demo.db")
    os.environ.pop("FLIGHTLOG_LOG_KEY", None)


def _session(store: Store, task: str) -> str:
    from flightlog.sessions import find_sessions

    [record] = [r for r in find_sessions(store, task=task) if r.task.startswith(task)]
    return record.session_id


def main() -> int:
    """Run the demo, serve it, take the screenshots; 0 on success."""
    with tempfile.TemporaryDirectory(prefix="flightlog-shots-") as scratch:
        home = Path(scratch)
        _scratch_env(home)
        demo = subprocess.run(
            [sys.executable, "-m", "flightlog", "demo"], capture_output=True, text=True, check=False
        )
        if demo.returncode != 0:
            print(demo.stdout, demo.stderr, sep="\n", file=sys.stderr)
            return demo.returncode
        _shoot(home / "demo.db")
    for png in sorted(OUT.glob("dashboard-*.png")):
        print(f"{png.relative_to(ROOT)}  {png.stat().st_size:,} bytes")
    return 0


@contextmanager
def _opener(path: Path, read_only: bool):  # type: ignore[no-untyped-def]
    from flightlog.store import SqliteStore

    store = SqliteStore(path, read_only=read_only)
    try:
        yield store
    finally:
        store.close()


def _shoot(db: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    from flightlog.store import SqliteStore
    from flightlog.web.app import create_app
    from flightlog.web.server import DashboardServer

    with SqliteStore(db, read_only=True) as store:
        long_run = _session(store, "do all the steps")
        looping = _session(store, "find the config file")
        lead = _session(store, "research ledgers and hash chains")
        claude = next(r.session_id for r in store.list_sessions() if r.session_id.startswith("claude-code:"))
        codex = next(r.session_id for r in store.list_sessions() if r.session_id.startswith("codex:"))
    chromium = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    app = create_app(lambda read_only: _opener(db, read_only), token=TOKEN)
    with DashboardServer(app) as server, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--headless", "--no-sandbox"])
        page = browser.new_page(viewport={"width": WIDTH, "height": 500})
        url = server.url
        page.goto(f"{url}/?token={TOKEN}")
        page.screenshot(path=str(OUT / "dashboard-runs.png"), full_page=True)
        page.set_viewport_size({"width": WIDTH, "height": 900})

        page.goto(f"{url}/session?id={long_run}")
        expect(page.locator("#turn-charts figure").first).to_be_visible(timeout=60_000)
        page.locator("#waterfall").screenshot(path=str(OUT / "dashboard-waterfall.png"))

        page.goto(f"{url}/session?id={looping}")
        expect(page.locator("#entropy-chart")).to_be_visible(timeout=60_000)
        page.goto(f"{url}/session?id={codex}")
        expect(page.locator("#cost-chart svg")).to_be_visible(timeout=60_000)
        cost = page.locator("#run-charts").screenshot()
        page.goto(f"{url}/session?id={looping}")
        expect(page.locator("#entropy-chart")).to_be_visible(timeout=60_000)
        page.locator("#run-charts").screenshot(path=str(OUT / "dashboard-charts.png"))
        (OUT / "dashboard-cost.png").write_bytes(cost)

        page.goto(f"{url}/conversation?id={claude}")
        page.locator("main").screenshot(path=str(OUT / "dashboard-conversation.png"))

        change = page.goto(f"{url}/conversation?id={long_run}")
        assert change is not None
        page.locator("a.change").first.click()
        expect(page.locator(".diff-summary")).to_be_visible()
        page.set_viewport_size({"width": WIDTH, "height": 800})
        page.locator("li.diff-added").evaluate("e => e.scrollIntoView({block: 'center'})")
        page.screenshot(path=str(OUT / "dashboard-diff.png"))

        page.set_viewport_size({"width": WIDTH, "height": 900})
        page.goto(f"{url}/session?id={long_run}&start=120#seq-127")
        page.locator("#seq-127 button.prove").click()
        expect(page.locator("#proof-verdict")).to_contain_text("verified in your browser", timeout=60_000)
        page.locator("#proof").screenshot(path=str(OUT / "dashboard-proof.png"))

        page.goto(f"{url}/session?id={looping}")
        expect(page.locator("#heads-verdict")).to_contain_text("verified in your browser", timeout=60_000)
        page.locator("#heads").screenshot(path=str(OUT / "dashboard-heads.png"))

        page.set_viewport_size({"width": WIDTH, "height": 1100})
        page.goto(f"{url}/session?id={lead}")
        expect(page.locator("#waterfall-chart rect.lane-sub-agent.depth-2")).to_have_count(1, timeout=60_000)
        page.locator("#lineage").evaluate("e => e.scrollIntoView({block: 'start'})")
        page.screenshot(path=str(OUT / "dashboard-subagents.png"))
        browser.close()


if __name__ == "__main__":
    raise SystemExit(main())
