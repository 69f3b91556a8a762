"""The in-browser proof check (static/proof.js) in Debian's chromium: an intact signed session verifies
with WebCrypto, a tampered one fails and says why; hostile event text stays inert in the proof panel.

Uses the browser, server and database fixtures of :mod:`tests.web.test_web_browser` (one chromium and one
dashboard for both modules' tests).
"""

# ruff: noqa: F811  (the fixtures imported from a sibling test module are parameters here)
from __future__ import annotations

import sqlite3
from pathlib import Path

from playwright.sync_api import Page, expect

from flightlog.events import Custom
from flightlog.integrity.keys import LogSigner, load_signer
from flightlog.integrity.notary import Notary
from flightlog.recorder import Recorder
from flightlog.store import SqliteStore

from .conftest import IMG, SCRIPT
from .test_web_browser import WAIT_MS, browser, db, page, server  # noqa: F401  (shared fixtures)


def _signed_session(db: Path, session_id: str) -> str:
    """Six events then six more, signed every four by the key in ``$FLIGHTLOG_KEY_DIR`` (checkpoints at
    sizes 6 and 12), with hostile text in the payloads."""
    with SqliteStore(db) as store:
        rec = Recorder.create(
            store, task=f"proof {IMG}", session_id=session_id, notary=Notary.from_env(every=4)
        )
        for batch in range(2):
            rec.append_many(
                [
                    Custom(custom_kind=f"step{SCRIPT}", payload={"i": 6 * batch + i, "x": IMG})
                    for i in range(6)
                ]
            )
    return session_id


def _check(page: Page, server_url: str, session_id: str, seq: int) -> None:
    page.goto(f"{server_url}/session?id={session_id}")
    page.locator(f"#seq-{seq} button.prove").click()
    expect(page.locator("#proof-result")).to_have_attribute("data-seq", str(seq), timeout=WAIT_MS)


def test_an_intact_signed_event_verifies_in_the_browser(page: Page, db: Path, server: object) -> None:
    sid = _signed_session(db, "proof-intact")
    url = server.url  # type: ignore[attr-defined]
    key = load_signer().verifier
    for seq in (0, 5, 11):
        _check(page, url, sid, seq)
        verdict = page.locator("#proof-verdict")
        expect(verdict).to_contain_text("verified in your browser")
        expect(verdict).to_contain_text(f"tree of 12 events, signed by {key.name}+{key.key_id:08x}")
        expect(verdict).to_contain_text("(key from the server)")
        expect(page.locator("#proof-result")).to_have_attribute("data-ok", "1")
    assert page.locator("#proof-result img").count() == 0
    signed = page.locator("#waterfall-chart path.mark-checkpoint")  # the signed heads on the run's time axis
    expect(signed).to_have_count(2)
    expect(signed.last.locator("title")).to_have_text(
        f"signed checkpoint over events 0-11 by {key.name}+{key.key_id:08x}"
    )

    # A pinned key replaces the server's: the right one verifies, another one is refused by name.
    page.locator("#proof-pin").fill(str(key))
    page.locator("#proof-pin-form button").click()
    expect(page.locator("#proof-pin-status")).to_contain_text(f"pinned: {key.name}+{key.key_id:08x}")
    _check(page, url, sid, 3)
    expect(page.locator("#proof-verdict")).to_contain_text("(your pinned key)")
    other = str(LogSigner.generate("someone.else/log").verifier)  # a key the log never signed with
    page.locator("#proof-pin").fill(other)
    page.locator("#proof-pin-form button").click()
    _check(page, url, sid, 3)
    expect(page.locator("#proof-verdict")).to_contain_text(  # the server's key is flagged as a change
        f"NOT verified: signed by {key.name}+{key.key_id:08x}, which the server now offers but you have not pinned"
    )
    page.locator("#proof-pin").fill("")
    page.locator("#proof-pin-form button").click()
    expect(page.locator("#proof-pin-status")).to_contain_text("no key pinned")


def test_a_tampered_event_fails_in_the_browser_and_says_why(page: Page, db: Path, server: object) -> None:
    sid = _signed_session(db, "proof-tampered")
    raw = sqlite3.connect(db)
    try:
        raw.execute("DROP TRIGGER IF EXISTS events_no_update")
        (event,) = raw.execute("SELECT event FROM events WHERE session_id = ? AND seq = 2", (sid,)).fetchone()
        flipped = bytes(event).replace(b'"i":2', b'"i":7')
        assert flipped != bytes(event)
        raw.execute("UPDATE events SET event = ? WHERE session_id = ? AND seq = 2", (flipped, sid))
        raw.commit()
    finally:
        raw.close()
    url = server.url  # type: ignore[attr-defined]
    for seq in (2, 9):  # the changed event, and one whose audit path covers it
        _check(page, url, sid, seq)
        verdict = page.locator("#proof-verdict")
        expect(verdict).to_contain_text("NOT verified")
        expect(verdict).to_contain_text("the signed checkpoint at size 12 says")
        expect(verdict).to_contain_text("changed after they were signed")
        expect(page.locator("#proof-result")).to_have_attribute("data-ok", "0")


def test_an_unsigned_head_is_not_called_verified(page: Page, db: Path, server: object) -> None:
    with SqliteStore(db) as store:
        rec = Recorder.create(store, session_id="proof-unsigned", notary=None)
        rec.append_many([Custom(custom_kind="step", payload={"i": i}) for i in range(3)])
    _check(page, server.url, "proof-unsigned", 1)  # type: ignore[attr-defined]
    expect(page.locator("#proof-verdict")).to_contain_text(
        "NOT verified: the tree head at size 3 is unsigned"
    )
