"""``GET /api/proof``: one event's RFC 9162 inclusion proof, for the browser to check itself.

The session page's "check in your browser" (``static/proof.js``) fetches this document and verifies it
with WebCrypto, so a reader need not trust the dashboard's own verdict:

* the event's stored bytes hash to its leaf (SHA-256 over ``0x00 || bytes``, RFC 9162 §2.1.1);
* the audit path leads from leaf ``seq`` to the root of the tree of ``tree_size`` events (RFC 9162
  §2.1.3.2, nodes ``SHA-256(0x01 || left || right)``);
* the signed checkpoint (C2SP ``tlog-checkpoint``) at that size names this session in its origin and
  that size and root, and carries an Ed25519 signature (C2SP ``signed-note``) by one of the keys.

The proof is built without the server-side comparison against the checkpoint
(``prove_inclusion(check=False)``): a tampered database yields a document whose root disagrees with the
signed one, and the browser reports that itself. ``keys`` are the verifier keys the server trusts
(:func:`flightlog.integrity.keys.load_keyring`); the browser says they came from the server, and a reader
who does not trust the server pins their own verifier key in the page instead (kept in the browser).

Document (JSON)::

    {<the flightlog-proof/1 inclusion document, see flightlog.integrity.proofs>,
     "event_base64": "<the stored event bytes, base64>",
     "keys": [{"vkey": "<name>+<key id hex>+<base64(0x01 || public key)>", "not_before_ms": 0,
               "not_after_ms": null}],
     "keys_error": null | "<why the server's trusted keys could not be loaded>"}

Errors: 400 (``seq`` not an integer), 404 (no such session, ``seq`` outside it), 409 (a row is missing:
no proof can be built), as ``{"error": "..."}``.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response

from ..errors import FlightlogError, LedgerIntegrityError, SessionNotFound
from ..integrity.keys import load_keyring
from ..integrity.proofs import prove_inclusion
from ..store.base import Store
from . import views

__all__ = ["proof_document", "register"]

MAX_SEQ = 2**53 - 1


def _keys() -> tuple[list[dict[str, Any]], str | None]:
    try:
        keyring = load_keyring()
    except FlightlogError as exc:
        return [], views.show(str(exc))
    return [
        {"vkey": str(k.verifier), "not_before_ms": k.not_before_ms, "not_after_ms": k.not_after_ms}
        for k in keyring
    ], None


def proof_document(store: Store, session_id: str, seq: int) -> dict[str, Any]:
    """The proof document of event ``seq`` (see the module docstring).

    Raises:
        SessionNotFound: no such session.
        ValueError: ``seq`` is not in the session.
        LedgerIntegrityError: a row the proof needs is missing.
    """
    proof = prove_inclusion(store, session_id, seq, check=False)
    doc = proof.to_json()
    doc["event_base64"] = base64.b64encode(proof.event or b"").decode("ascii")
    doc["keys"], doc["keys_error"] = _keys()
    return doc


def register(app: FastAPI, reader: Callable[[], Store]) -> None:
    """Add ``GET /api/proof?session=&seq=`` to ``app``; ``reader()`` is the shared read-only store."""

    @app.get("/api/proof")
    def proof_json(session: str = "", seq: str = "", id: str = "") -> Response:
        """One event's inclusion proof with the signed checkpoint and the server's trusted keys."""
        session, problem = views.api_session(session, id)
        if problem is not None:
            return JSONResponse({"error": problem}, status_code=400)
        if not seq.isascii() or not seq.isdigit() or len(seq) > 16 or int(seq) > MAX_SEQ:
            return JSONResponse({"error": "seq must be an integer >= 0"}, status_code=400)
        try:
            doc = proof_document(reader(), session, int(seq))
        except SessionNotFound:
            return JSONResponse({"error": "no such session"}, status_code=404)
        except ValueError as exc:
            return JSONResponse({"error": views.show(str(exc))}, status_code=404)
        except LedgerIntegrityError as exc:
            return JSONResponse({"error": views.show(f"no proof: {exc}")}, status_code=409)
        return JSONResponse(doc, headers={"Cache-Control": "no-store"})
