"""``GET /api/integrity``: a session's signed checkpoints, seals and witness cosignatures, for the browser.

The session page's "Signed heads" section (``static/proof.js``) draws these on the chain's seq axis and
checks every signature itself with WebCrypto, so a reader need not trust the dashboard's verdict:

* each checkpoint (C2SP ``tlog-checkpoint``) names this session in its origin and carries an Ed25519
  signature (C2SP ``signed-note``) by a log key the reader trusts;
* each witness cosignature (C2SP ``tlog-cosignature`` v1: ``— <witness> base64(key ID || u64 timestamp ||
  Ed25519 signature over "cosignature/v1\\ntime <ts>\\n" + checkpoint text)``) verifies under a witness
  key the reader trusts and cosigns the text of a checkpoint that verified;
* each seal (``Custom("session_sealed")`` at seq ``n``, payload ``{"size": n, "root": <hex>}``,
  :mod:`flightlog.integrity.signing`) is in the signed tree: its inclusion proof against the checkpoint
  over ``n + 1`` events leads to that checkpoint's root, and the proof's left siblings fold to the root
  over ``[0, n)`` the seal claims (RFC 9162 §2.1.3: the audit path of the last leaf is the compact range
  of the leaves before it).

Where the keys come from: ``log_keys`` are the verifier keys the server trusts
(:func:`flightlog.integrity.keys.load_keyring`), ``witness_keys`` the witnesses it trusts
(:func:`flightlog.integrity.witness_client.load_witnesses`). The page says so, shows each key's text and
fingerprint to compare with ``flightlog keys show``, and lets the reader pin keys in the browser;
once pinned, only pinned keys count and a different key from the server is flagged.

Nothing here is checked by the server: a checkpoint whose stored note is damaged is sent as stored, and
the browser reports it.

Document (JSON)::

    {"session_id": "...", "events": <rows>, "sealed_rows_scanned": <rows read looking for seals>,
     "truncated": <true when the session has more rows than MAX_SCAN>,
     "checkpoints": [{"checkpoint_id": 3, "size": 12, "root": "<hex, the stored column>",
                      "created_at_ms": ..., "note": "<the signed note as stored>"}],
     "cosignatures": [{"size": 12, "root": "<hex>", "witness": "<the witness key text as stored>",
                       "created_at_ms": ..., "note": "<checkpoint note + cosignature line(s)>"}],
     "seals": [{"seq": 11, "event_base64": "...", "tree_size": 12 | null, "proof": ["<hex>", ...]}],
     "log_keys": [{"vkey": "...", "not_before_ms": 0, "not_after_ms": null}], "log_keys_error": null,
     "witness_keys": [{"vkey": "...", "url": "http://..." | null}], "witness_keys_error": null}

Errors: 404 (no such session) as ``{"error": "..."}``.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response

from ..errors import FlightlogError, LedgerIntegrityError, SessionNotFound, StoreError
from ..integrity.checkpoints import origin_for
from ..integrity.keys import load_keyring
from ..integrity.proofs import prove_inclusion
from ..integrity.witness_client import load_witnesses
from ..notarization import SEAL_KIND
from ..store.base import Store
from . import views

__all__ = ["MAX_SCAN", "integrity_document", "register"]

MAX_SCAN = 200_000
"""Rows scanned for seal events (a longer session is scanned up to there; ``truncated`` says so)."""

_SEAL_MARK = f'"custom_kind":"{SEAL_KIND}"'.encode()


def _log_keys() -> tuple[list[dict[str, Any]], str | None]:
    try:
        keyring = load_keyring()
    except FlightlogError as exc:
        return [], views.show(str(exc))
    rows = [
        {"vkey": str(k.verifier), "not_before_ms": k.not_before_ms, "not_after_ms": k.not_after_ms}
        for k in keyring
    ]
    return rows, None


def _witness_keys() -> tuple[list[dict[str, Any]], str | None]:
    try:
        witnesses = load_witnesses()
    except FlightlogError as exc:
        return [], views.show(str(exc))
    return [{"vkey": str(w.key), "url": views.show(w.url, 300) if w.url else None} for w in witnesses], None


def _seals(store: Store, session_id: str, sizes: list[int]) -> tuple[list[dict[str, Any]], int]:
    """Every row holding a seal, with its inclusion proof against the smallest checkpoint covering it."""
    seals: list[dict[str, Any]] = []
    scanned = 0
    for row in store.read_events(session_id, stop=MAX_SCAN):
        scanned += 1
        if _SEAL_MARK not in row.event_bytes:
            continue
        size = min((s for s in sizes if s > row.seq), default=None)
        entry: dict[str, Any] = {
            "seq": row.seq,
            "event_base64": base64.b64encode(row.event_bytes).decode("ascii"),
            "tree_size": size,
            "proof": [],
        }
        if size is not None:
            try:
                proof = prove_inclusion(store, session_id, row.seq, tree_size=size, check=False)
                entry["proof"] = [p.hex() for p in proof.path]
            except (LedgerIntegrityError, ValueError) as exc:
                entry["tree_size"], entry["error"] = None, views.show(f"no proof: {exc}")
        seals.append(entry)
    return seals, scanned


def _cosignatures(store: Store, session_id: str) -> list[dict[str, Any]]:
    try:
        origin = origin_for(store.ledger_id(), session_id)
        records = store.cosignatures(origin)
    except (StoreError, NotImplementedError):
        return []
    return [
        {
            "size": c.size,
            "root": c.root,
            "witness": c.witness,
            "created_at_ms": c.created_at_ms,
            "note": c.note,
        }
        for c in records
    ]


def integrity_document(store: Store, session_id: str) -> dict[str, Any]:
    """The integrity document of one session (see the module docstring).

    Raises:
        SessionNotFound: no such session.
    """
    record = store.get_session(session_id)
    stored = store.checkpoints(session_id)
    checkpoints = [
        {
            "checkpoint_id": c.checkpoint_id,
            "size": c.size,
            "root": c.root,
            "created_at_ms": c.created_at_ms,
            "note": c.body,
        }
        for c in stored
    ]
    seals, scanned = _seals(store, session_id, sorted({c.size for c in stored}))
    doc: dict[str, Any] = {
        "session_id": session_id,
        "events": record.events,
        "sealed_rows_scanned": scanned,
        "truncated": record.events > scanned,
        "checkpoints": checkpoints,
        "cosignatures": _cosignatures(store, session_id),
        "seals": seals,
    }
    doc["log_keys"], doc["log_keys_error"] = _log_keys()
    doc["witness_keys"], doc["witness_keys_error"] = _witness_keys()
    return doc


def register(app: FastAPI, reader: Callable[[], Store]) -> None:
    """Add ``GET /api/integrity?session=`` to ``app``; ``reader()`` is the shared read-only store."""

    @app.get("/api/integrity")
    def integrity_json(session: str = "", id: str = "") -> Response:
        """The session's checkpoints, cosignatures and seals, with the keys the server trusts."""
        session, problem = views.api_session(session, id)
        if problem is not None:
            return JSONResponse({"error": problem}, status_code=400)
        try:
            doc = integrity_document(reader(), session)
        except SessionNotFound:
            return JSONResponse({"error": "no such session"}, status_code=404)
        return JSONResponse(doc, headers={"Cache-Control": "no-store"})
