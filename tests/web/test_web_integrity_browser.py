"""The session page's "Signed heads" check (static/proof.js, /api/integrity) in Debian's chromium.

A sealed session with a witness cosignature (a real witness server, C2SP tlog-witness) verifies in the
browser: every checkpoint signature, the cosignature and the seal; a forged cosignature, a changed
checkpoint note and a changed event each fail and say what failed; a pinned key that differs from the
server's is flagged; a browser without Ed25519 says so instead of claiming a verdict. Uses the browser,
server and database fixtures of :mod:`tests.web.test_web_browser`.
"""

# ruff: noqa: F811  (the fixtures imported from a sibling test module are parameters here)
from __future__ import annotations

import hashlib
import re
import sqlite3
import threading
from pathlib import Path

from playwright.sync_api import Page, expect

from flightlog.events import Custom
from flightlog.integrity.checkpoints import origin_for
from flightlog.integrity.keys import LogSigner, load_signer
from flightlog.integrity.notary import Notary
from flightlog.integrity.notes import Note, NoteSignature, parse_note
from flightlog.integrity.witness import Witness, WitnessServer
from flightlog.integrity.witness_client import submit_session, trust_witness
from flightlog.recorder import Recorder
from flightlog.store import SqliteStore
from flightlog.store.base import CosignatureRecord

from .conftest import IMG, SCRIPT, run_blocking
from .test_web_browser import (  # noqa: F401  (shared fixtures)
    WAIT_MS,
    _in_thread,
    _wait_for,
    browser,
    db,
    page,
    server,
)


def _sealed(db: Path, session_id: str, tmp_path: Path) -> Witness:
    """Twelve events signed every four, sealed ``completed`` (seq 12, checkpoint over 13), cosigned by a
    witness the user trusts (checkpoints at sizes 4, 8, 12 and 13)."""
    with SqliteStore(db) as store:
        rec = Recorder.create(
            store, task=f"heads {IMG}", session_id=session_id, notary=Notary.from_env(every=4)
        )
        for i in range(12):
            rec.append(Custom(custom_kind=f"step{SCRIPT}", payload={"i": i, "x": IMG}))
        rec.finish("completed")
        witness = Witness.open(tmp_path / "witness", log_keys=[str(load_signer().verifier)])
        trust_witness(str(witness.cosigner.verifier))  # trusted without a URL: the page stays offline
        with WitnessServer(witness) as running:
            submit_session(store, session_id, running.url, witness_key=witness.cosigner.verifier)
    return witness


def _open(page: Page, server_url: str, session_id: str) -> None:
    page.goto(f"{server_url}/session?id={session_id}")
    expect(page.locator("#heads-result")).to_have_attribute("data-ok", "1", timeout=WAIT_MS)


def test_checkpoints_cosignature_and_seal_verify_and_a_key_change_is_flagged(
    page: Page, db: Path, server: object, tmp_path: Path
) -> None:
    witness = _sealed(db, "heads-intact", tmp_path)
    url = server.url  # type: ignore[attr-defined]
    key = load_signer().verifier
    name = f"{key.name}+{key.key_id:08x}"
    wkey = witness.cosigner.verifier
    _open(page, url, "heads-intact")
    expect(page.locator("#ed25519-support")).to_have_attribute("data-ed25519", "1")
    expect(page.locator("#heads-verdict")).to_contain_text("verified in your browser: 6 signed head(s)")
    checkpoints = page.locator("#heads-list li[data-kind=checkpoint]")
    expect(checkpoints).to_have_count(4)
    expect(checkpoints.last).to_contain_text(
        f"signed checkpoint over events 0-12: Ed25519 signature by {name}"
    )
    expect(checkpoints.last).to_contain_text("verified in your browser")
    cosigned = page.locator("#heads-list li[data-kind=cosignature]")
    expect(cosigned).to_contain_text(f"witness {wkey.name}+{wkey.key_id:08x}")
    expect(cosigned).to_contain_text("cosigned the head over 13 events")
    expect(cosigned).to_have_attribute("data-ok", "1")
    seal = page.locator("#heads-list li[data-kind=seal]")
    expect(seal).to_contain_text("sealed (completed) at seq 12: in the signed tree of 13 events")
    expect(seal).to_contain_text("its root over events 0-11 is the one recomputed here")
    expect(page.locator("#heads-chain path.head.ok")).to_have_count(6)  # drawn on the chain's seq axis

    # Where the keys came from: the server's, shown with their text and fingerprint, to pin.
    fingerprint = hashlib.sha256(str(key).encode()).hexdigest()
    log_key = page.locator("#heads-keys .keys-log li")
    expect(page.locator("#heads-keys")).to_contain_text("the dashboard server says it trusts")
    expect(log_key).to_contain_text(str(key))
    expect(log_key).to_contain_text(f"fingerprint SHA-256 {fingerprint}")
    log_key.locator("button.pin").click()
    expect(page.locator("#heads-keys .keys-log li.pinned")).to_have_count(1)
    expect(page.locator("#heads-keys")).to_contain_text("pinned in this browser only")
    expect(page.locator("#heads-result")).to_have_attribute("data-ok", "1", timeout=WAIT_MS)

    # The browser pinned another key: the server's key is now a change, flagged, and not accepted.
    other = str(LogSigner.generate("someone.else/log").verifier)
    page.evaluate("k => localStorage.setItem('flightlog.pinned-vkeys', JSON.stringify([k]))", other)
    page.reload()
    expect(page.locator("#heads-result")).to_have_attribute("data-ok", "0", timeout=WAIT_MS)
    expect(page.locator(".key-changed")).to_contain_text(f"KEY CHANGED: the server now offers log key {name}")
    expect(page.locator("#heads-verdict")).to_contain_text("NOT verified")
    expect(checkpoints.first).to_contain_text("which the server now offers but you have not pinned")
    page.evaluate("() => localStorage.removeItem('flightlog.pinned-vkeys')")


def test_a_forged_cosignature_fails_in_the_browser(
    page: Page, db: Path, server: object, tmp_path: Path
) -> None:
    witness = _sealed(db, "heads-forged", tmp_path)
    wkey = witness.cosigner.verifier
    with SqliteStore(db) as store:
        origin = origin_for(store.ledger_id(), "heads-forged")
        (good,) = store.cosignatures(origin)
        note = parse_note(good.note)
        forged = []
        for sig in note.signatures:
            if sig.name == wkey.name:  # same witness, same timestamp, one signature byte changed
                blob = bytearray(sig.signature)
                blob[20] ^= 0x01
                sig = NoteSignature(sig.name, sig.key_id, bytes(blob))
            forged.append(sig)
        hostile = f"{IMG}+00000000+{SCRIPT}"  # the stored witness column is shown only as text
        store.record_cosignature(
            CosignatureRecord(
                origin, good.size, good.root, hostile, str(Note(note.text, tuple(forged))), good.created_at_ms
            )
        )
    page.goto(f"{server.url}/session?id=heads-forged")  # type: ignore[attr-defined]
    expect(page.locator("#heads-result")).to_have_attribute("data-ok", "0", timeout=WAIT_MS)
    bad = page.locator("#heads-list li[data-kind=cosignature][data-ok='0']")
    expect(bad).to_contain_text(
        f"the cosignature by {wkey.name}+{wkey.key_id:08x} does not verify (forged or altered)"
    )
    expect(bad).to_contain_text(IMG)  # inert text
    expect(page.locator("#heads-list li[data-kind=cosignature][data-ok='1']")).to_have_count(1)
    expect(page.locator("#heads-verdict")).to_contain_text("NOT verified: 1 of 7 signed heads failed")
    assert page.locator("#heads img, #heads script").count() == 0


def test_a_tampered_copy_fails_and_names_what_failed(
    page: Page, db: Path, server: object, tmp_path: Path
) -> None:
    _sealed(db, "heads-tampered", tmp_path)
    key = load_signer().verifier
    raw = sqlite3.connect(db)
    try:
        raw.execute("DROP TRIGGER IF EXISTS events_no_update")
        (event,) = raw.execute(
            "SELECT event FROM events WHERE session_id = 'heads-tampered' AND seq = 2"
        ).fetchone()
        flipped = bytes(event).replace(b'"i":2', b'"i":3')
        assert flipped != bytes(event)
        raw.execute("UPDATE events SET event = ? WHERE session_id = 'heads-tampered' AND seq = 2", (flipped,))
        for trigger in [r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")]:
            if "checkpoint" in trigger:
                raw.execute(f'DROP TRIGGER "{trigger}"')
        (body,) = raw.execute(
            "SELECT body FROM checkpoints WHERE session_id = 'heads-tampered' AND size = 8"
        ).fetchone()
        lines = body.split("\n")
        lines[1] = "9"  # the note's size line, under the same signature
        raw.execute(
            "UPDATE checkpoints SET body = ? WHERE session_id = 'heads-tampered' AND size = 8",
            ("\n".join(lines),),
        )
        raw.commit()
    finally:
        raw.close()
    page.goto(f"{server.url}/session?id=heads-tampered")  # type: ignore[attr-defined]
    expect(page.locator("#heads-result")).to_have_attribute("data-ok", "0", timeout=WAIT_MS)
    changed = page.locator("#heads-list li[data-kind=checkpoint][data-ok='0']")
    expect(changed).to_have_count(1)
    expect(changed).to_contain_text(
        f"checkpoint over events 0-7 NOT verified: the Ed25519 signature by {key.name}+{key.key_id:08x} "
        "does not verify over the checkpoint text"
    )
    expect(page.locator("#heads-list li[data-kind=seal]")).to_contain_text(
        "seal NOT verified: the seal at seq 12 is not in the signed tree of 13 events"
    )


def test_a_browser_without_ed25519_says_so(page: Page, db: Path, server: object, tmp_path: Path) -> None:
    _sealed(db, "heads-no-ed25519", tmp_path)
    page.add_init_script(
        """(() => {
          const real = crypto.subtle.importKey.bind(crypto.subtle);
          crypto.subtle.importKey = (format, data, algo, ...rest) =>
            algo && algo.name === "Ed25519" ? Promise.reject(new Error("Algorithm: Unrecognized name")) : real(format, data, algo, ...rest);
        })();"""
    )
    page.goto(f"{server.url}/session?id=heads-no-ed25519")  # type: ignore[attr-defined]
    expect(page.locator("#heads-result")).to_have_attribute("data-ok", "0", timeout=WAIT_MS)
    expect(page.locator("#ed25519-support")).to_contain_text("This browser cannot check signatures")
    expect(page.locator("#heads-verdict")).to_contain_text(
        "NOT checked: this browser has no Ed25519 in WebCrypto"
    )
    page.locator("#seq-3 button.prove").click()
    expect(page.locator("#proof-verdict")).to_contain_text(
        "NOT verified: this browser has no Ed25519 in WebCrypto"
    )


def test_a_live_runs_new_heads_and_seal_are_checked_as_they_land(
    page: Page, db: Path, server: object
) -> None:
    release = threading.Event()
    thread, results = _in_thread(lambda: run_blocking(db, release, "sign me", "heads-live"))
    try:
        with SqliteStore(db) as store:  # the tool request is written: the tool is now blocked
            _wait_for(lambda: any(r.kind == "tool_requested" for r in store.read_events("heads-live")))
        page.goto(f"{server.url}/session?id=heads-live")  # type: ignore[attr-defined]
        expect(page.locator("#heads-result")).to_have_attribute(
            "data-ok", re.compile("[01]"), timeout=WAIT_MS
        )
        expect(page.locator("#heads-list li[data-kind=seal]")).to_have_count(0)
    finally:
        release.set()
        thread.join(30)
    assert results == ["completed"]
    seal = page.locator("#heads-list li[data-kind=seal]")  # arrives without a reload
    expect(seal).to_contain_text("sealed (completed)", timeout=WAIT_MS)
    expect(seal).to_have_attribute("data-ok", "1")
    expect(page.locator("#heads-result")).to_have_attribute("data-ok", "1", timeout=WAIT_MS)
