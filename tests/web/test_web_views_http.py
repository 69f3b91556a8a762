"""``GET /api/proof`` (the document the browser checks, its errors, the token gate) and ``GET /api/waterfall``."""

# ruff: noqa: F811  (the fixtures imported from a sibling test module are parameters here)
from __future__ import annotations

import base64
import sqlite3
from pathlib import Path

from fastapi.testclient import TestClient

from flightlog.events import Custom
from flightlog.integrity.checkpoints import Checkpoint
from flightlog.integrity.keys import load_signer
from flightlog.integrity.notary import Notary
from flightlog.integrity.notes import parse_note
from flightlog.integrity.proofs import load_proof
from flightlog.recorder import Recorder
from flightlog.store import SqliteStore
from flightlog.store.base import CosignatureRecord

from .conftest import IMG, SCRIPT, record_hostile, run_gated
from .test_web_http import anonymous, client  # noqa: F401  (shared fixtures)


def _record(db_path: Path, session_id: str = "p") -> None:
    with SqliteStore(db_path) as store:
        rec = Recorder.create(store, session_id=session_id, notary=Notary.from_env(every=4))
        rec.append_many([Custom(custom_kind=f"k{SCRIPT}", payload={"i": i, "x": IMG}) for i in range(6)])


def test_the_proof_document_holds_and_names_the_servers_keys(client: TestClient, db_path: Path) -> None:
    _record(db_path)
    response = client.get("/api/proof", params={"session": "p", "seq": "3"})
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    doc = response.json()
    proof = load_proof(doc)
    assert (proof.seq, proof.tree_size, proof.checkpoint is not None) == (3, 6, True)
    assert proof.check(Notary.from_env().keyring) == []
    assert base64.b64decode(doc["event_base64"]) == proof.event
    assert [k["vkey"] for k in doc["keys"]] == [str(load_signer().verifier)] and doc["keys_error"] is None


def test_a_tampered_row_still_yields_a_document_whose_root_disagrees(
    client: TestClient, db_path: Path
) -> None:
    _record(db_path)
    raw = sqlite3.connect(db_path)
    try:
        raw.execute("DROP TRIGGER IF EXISTS events_no_update")
        raw.execute("UPDATE events SET event = replace(event, '\"i\":1', '\"i\":9') WHERE seq = 1")
        raw.commit()
    finally:
        raw.close()
    doc = client.get("/api/proof", params={"session": "p", "seq": "1"}).json()
    problems = load_proof(doc).check(Notary.from_env().keyring)
    assert problems == ["the checkpoint at size 6 signs another size or root"]


def test_bad_requests_are_refused_plainly(client: TestClient, anonymous: TestClient, db_path: Path) -> None:
    _record(db_path)
    assert client.get("/api/proof", params={"session": "p", "seq": "-1"}).status_code == 400
    assert client.get("/api/proof", params={"session": "p", "seq": "9" * 17}).status_code == 400
    missing = client.get("/api/proof", params={"session": "nope", "seq": "0"})
    assert missing.status_code == 404 and missing.json() == {"error": "no such session"}
    outside = client.get("/api/proof", params={"session": "p", "seq": "6"})
    assert outside.status_code == 404 and "seq 6 is not in the session" in outside.json()["error"]
    assert anonymous.get("/api/proof", params={"session": "p", "seq": "0"}).status_code in (401, 403)


def test_the_waterfall_document_pairs_spans_and_counts_tokens(client: TestClient, db_path: Path) -> None:
    assert run_gated(db_path, "g1").status == "suspended"
    response = client.get("/api/waterfall", params={"session": "g1"})
    assert response.status_code == 200
    data = response.json()
    lanes = [(s["lane"], s["label"], s["open"]) for s in data["spans"]]
    assert lanes == [
        ("model", "model call, turn 1", False),
        ("tool", "echo", False),
        ("model", "model call, turn 2", False),
        ("tool", "write_note (not run: suspended)", False),
        ("approval", "waiting for approval, turn 2", True),
        ("suspended", "suspended, turn 2", True),
    ]
    assert all(s["start_ms"] <= s["end_ms"] for s in data["spans"])
    assert [(t["turn"], t["input"] > 0, t["output"] > 0, t["fill"] is not None) for t in data["turns"]] == [
        (1, True, True, True),
        (2, True, True, True),
    ]
    assert client.get("/api/waterfall", params={"session": "nope"}).status_code == 404


def test_hostile_labels_reach_the_waterfall_as_visible_text(client: TestClient, db_path: Path) -> None:
    with SqliteStore(db_path) as store:
        record_hostile(store, "h")
    data = client.get("/api/waterfall", params={"session": "h"}).json()
    (tool,) = data["spans"]
    assert tool["label"] == f"tool{SCRIPT}" and tool["open"] is False


def test_signed_checkpoints_and_cosignatures_are_marked(client: TestClient, db_path: Path) -> None:
    _record(db_path)  # six events, signed every four: one checkpoint at size 6
    with SqliteStore(db_path) as store:
        (cp,) = store.checkpoints("p")
        origin = Checkpoint.parse(parse_note(cp.body).text).origin
        store.record_cosignature(
            CosignatureRecord(origin, 6, cp.root, "witness.example/w+0a0b0c0d+AQ==", cp.body, 7)
        )
        store.record_cosignature(
            CosignatureRecord(origin, 5, cp.root, "other.example/w+01020304+AQ==", cp.body, 8)
        )
    key = load_signer().verifier
    marks = client.get("/api/waterfall", params={"session": "p"}).json()["integrity"]
    assert [(m["kind"], m["seq"], m["label"]) for m in marks] == [
        ("checkpoint", 5, f"signed checkpoint over events 0-5 by {key.name}+{key.key_id:08x}"),
        ("cosignature", 5, "witness witness.example/w cosigned size 6"),  # the size-5 one is another head
    ]


def test_the_page_of_a_session_that_holds_no_run_shows_no_run_state(
    client: TestClient, db_path: Path
) -> None:
    """A session of custom events only (no ``run_started``) is no run: its page says the run state is
    unknown and shows no budget, as it does while the runs projection is stale (it answered 500: the
    template read budget cells the view left out)."""
    _record(db_path)
    for stale in (False, True):
        if stale:
            with SqliteStore(db_path) as store:
                store.set_run_projection_version(0)
        page = client.get("/session", params={"id": "p"})
        assert page.status_code == 200, page.text
        assert '<dd id="state">unknown</dd>' in page.text
        assert '<dd id="budget"></dd>' in page.text
