"""The log's side of witnessing (C2SP ``tlog-witness``): submit heads to a witness, keep the trusted
witnesses, and gather the cosigned heads verification compares the database with.

**Client side.** :func:`witness_checkpoint` speaks the protocol; :func:`submit_session` and
:func:`submit_index` pick the latest checkpoint, the consistency proof from the size the witness last
cosigned (learning it from a 409 when the database forgot), verify the returned cosignature against a
trusted witness key and keep the cosigned note in the database (``cosignatures``).
:func:`witnessed_heads` gathers the verified cosigned heads of an origin, from the database and from
each trusted witness with a URL (``<key dir>/witnesses.json``), for
:func:`~flightlog.integrity.verify.audit_session`.

The witness itself (cosigner keys, the add-checkpoint handler, its HTTP server) is
:mod:`flightlog.integrity.witness`.

Source: C2SP tlog-witness, tlog-cosignature, tlog-checkpoint, signed-note; RFC 9162 §2.1.4.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from .checkpoints import SignedCheckpoint, open_checkpoint, origin_for
from .heads import WitnessedHead
from .keys import KeyManifestError, Keyring, key_dir
from .notes import Note, NoteError, parse_note
from .witness import MAX_BODY_BYTES, SIZE_CONTENT_TYPE, CosignerKey, WitnessError, write_json

if TYPE_CHECKING:
    from ..store.base import Store

__all__ = [
    "Submission",
    "TrustedWitness",
    "fetch_checkpoint",
    "load_witnesses",
    "submit_index",
    "submit_session",
    "trust_witness",
    "verify_cosigned",
    "witness_checkpoint",
    "witnessed_heads",
]

log = logging.getLogger("flightlog.integrity.witness_client")

WITNESSES_FILE = "witnesses.json"
"""The trusted witnesses, in the key directory."""
_WITNESSES_FORMAT = "flightlog-witnesses/1"

# ─── client ──────────────────────────────────────────────────────────────────────────────────


def _request(method: str, url: str, body: bytes | None, timeout: float) -> tuple[int, str, bytes]:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise WitnessError(url=url, reason="the witness URL must be http:// or https://")
    conn_class = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = conn_class(parts.hostname, parts.port, timeout=timeout)
    try:
        headers = {"Content-Type": "text/plain; charset=utf-8"} if body is not None else {}
        conn.request(method, parts.path or "/", body=body, headers=headers)
        response = conn.getresponse()
        return response.status, response.getheader("Content-Type") or "", response.read(MAX_BODY_BYTES)
    except (OSError, http.client.HTTPException) as exc:
        raise WitnessError(url=url, reason=f"unreachable: {exc}") from exc
    finally:
        conn.close()


def witness_checkpoint(
    url: str,
    checkpoint: str,
    *,
    old_size: int,
    proof: Sequence[bytes],
    witness_key: CosignerKey | None = None,
    timeout: float = 10.0,
) -> str:
    """Send a checkpoint to a witness (add-checkpoint) and return it with the cosignature line(s) added.

    Args:
        url: The witness's submission prefix (``http://host:port``).
        checkpoint: The log-signed checkpoint note.
        old_size: Size of the checkpoint the witness last cosigned for this origin (0 when none).
        proof: RFC 9162 consistency proof from ``old_size`` to the checkpoint's size.
        witness_key: When given, at least one returned line must be its valid cosignature (others from
            unknown keys are ignored, as the spec requires); None accepts the lines unverified.
        timeout: Seconds per request.

    Returns:
        The checkpoint note with the cosignature line(s) appended.

    Raises:
        WitnessError: refused (``status``; ``size`` on 409), unreachable, or no valid cosignature.

    Source: C2SP tlog-witness, "add-checkpoint".
    """
    body = (
        f"old {old_size}\n" + "".join(base64.b64encode(p).decode() + "\n" for p in proof) + "\n" + checkpoint
    )
    target = url.rstrip("/") + "/add-checkpoint"
    status, content_type, data = _request("POST", target, body.encode(), timeout)
    text = data.decode("utf-8", "replace")
    if status == 409 and content_type.startswith(SIZE_CONTENT_TYPE) and text.strip().isdigit():
        raise WitnessError(
            url=url, status=409, reason=f"the witness's latest size is {text.strip()}", size=int(text.strip())
        )
    if status != 200:
        raise WitnessError(url=url, status=status, reason=text.strip()[:300] or "refused")
    note = parse_note(checkpoint)
    try:
        cosigs = parse_note("-\n\n" + text).signatures  # the response is bare signature lines
    except NoteError as exc:
        raise WitnessError(
            url=url, status=status, reason=f"malformed cosignature lines: {exc.reason}"
        ) from exc
    if witness_key is not None:
        cosigs = tuple(s for s in cosigs if witness_key.verify(note.text, s) is not None)
        if not cosigs:
            raise WitnessError(url=url, status=status, reason=f"no valid cosignature by {witness_key.name}")
    return str(Note(note.text, (*note.signatures, *cosigs)))


def fetch_checkpoint(url: str, origin: str, *, timeout: float = 10.0) -> str | None:
    """The latest checkpoint a witness cosigned for ``origin`` (monitor retrieval), or None (404).

    Raises:
        WitnessError: unreachable or another error status.
    """
    target = f"{url.rstrip('/')}/{hashlib.sha256(origin.encode()).hexdigest()}/checkpoint"
    status, _, data = _request("GET", target, None, timeout)
    if status == 404:
        return None
    if status != 200:
        raise WitnessError(url=url, status=status, reason=data.decode("utf-8", "replace").strip()[:300])
    return data.decode("utf-8", "replace")


@dataclass(frozen=True)
class Submission:
    """What :func:`submit_session` / :func:`submit_index` did.

    Attributes:
        origin: The checkpoint's origin.
        size: Its size.
        old_size: The size the witness had cosigned before.
        witness: The witness's key name.
        timestamp: The cosignature's time (POSIX s).
        note: The cosigned checkpoint note (stored in the database).
    """

    origin: str
    size: int
    old_size: int
    witness: str
    timestamp: int
    note: str


@dataclass(frozen=True)
class TrustedWitness:
    """A witness key the user trusts, and where to ask it (None: only stored cosignatures are checked)."""

    key: CosignerKey
    url: str | None = None


def load_witnesses(directory: Path | None = None) -> list[TrustedWitness]:
    """The trusted witnesses of ``<key dir>/witnesses.json`` (empty when there is none)::

        {"format": "flightlog-witnesses/1", "witnesses": [{"vkey": "<witness key>", "url": "http://..."}]}

    Raises:
        KeyManifestError: an unreadable file or a malformed key.
    """
    path = (directory or key_dir()) / WITNESSES_FILE
    if not path.exists():
        return []
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("format") != _WITNESSES_FORMAT:
            raise ValueError(f"not a {_WITNESSES_FORMAT} file")
        return [TrustedWitness(CosignerKey.parse(e["vkey"]), e.get("url")) for e in doc["witnesses"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise KeyManifestError(path=str(path), reason=f"unreadable witness list: {exc}") from exc


def trust_witness(vkey: str, url: str | None = None, directory: Path | None = None) -> TrustedWitness:
    """Trust a witness key (and where to reach it) in ``<key dir>/witnesses.json``.

    Raises:
        KeyManifestError: a malformed witness key.
    """
    entry = TrustedWitness(CosignerKey.parse(vkey), url.rstrip("/") if url else None)
    directory = directory or key_dir()
    kept = [w for w in load_witnesses(directory) if w.key != entry.key]
    doc = {
        "format": _WITNESSES_FORMAT,
        "witnesses": [{"vkey": str(w.key), "url": w.url} for w in [*kept, entry]],
    }
    write_json(directory / WITNESSES_FILE, doc)
    return entry


def _resolve_witness(url: str, witness_key: CosignerKey | None, directory: Path | None) -> CosignerKey:
    if witness_key is not None:
        return witness_key
    wanted = url.rstrip("/")
    for witness in load_witnesses(directory):
        if witness.url == wanted:
            return witness.key
    raise WitnessError(
        url=url, reason="no trusted witness key for this URL (flightlog witness trust VKEY --url URL)"
    )


def _submit(
    store: Store,
    url: str,
    signed: SignedCheckpoint,
    key: CosignerKey,
    proof_from: Callable[[int], list[bytes]],
    timeout: float,
) -> Submission:
    origin = signed.checkpoint.origin
    known = [c.size for c in store.cosignatures(origin) if c.witness == str(key) and c.size <= signed.size]
    old = max(known, default=0)
    for _ in range(2):
        try:
            note = witness_checkpoint(
                url, signed.note, old_size=old, proof=proof_from(old), witness_key=key, timeout=timeout
            )
            break
        except WitnessError as exc:
            if exc.status != 409 or exc.size is None or exc.size == old:
                raise
            if exc.size > signed.size:
                raise WitnessError(
                    url=url,
                    status=409,
                    size=exc.size,
                    reason=f"the witness cosigned size {exc.size} of {origin}, the database's latest checkpoint "
                    f"covers {signed.size}: the database was rolled back or its newer checkpoints removed",
                ) from exc
            old = exc.size
    else:  # pragma: no cover - the witness moved twice between two requests
        raise WitnessError(url=url, reason="the witness's size kept changing")
    stamp = max(key.verify(signed.checkpoint.text(), s) or 0 for s in parse_note(note).signatures)
    from ..store.base import CosignatureRecord

    store.record_cosignature(
        CosignatureRecord(origin, signed.size, signed.root.hex(), str(key), note, int(time.time() * 1000))
    )
    return Submission(origin, signed.size, old, key.name, stamp, note)


def submit_session(
    store: Store,
    session_id: str,
    url: str,
    *,
    witness_key: CosignerKey | None = None,
    keyring: Keyring | None = None,
    timeout: float = 10.0,
    key_directory: Path | None = None,
) -> Submission:
    """Have a witness cosign the session's latest signed checkpoint; keep the cosigned note.

    The consistency proof starts at the size this witness last cosigned (from the stored cosignatures,
    else 0); when the witness answers 409 with another size, the proof is rebuilt from that size once.

    Args:
        store: The store (written: the cosignature).
        session_id: The session (exact id).
        url: The witness.
        witness_key: The witness's key (default: the trusted witness with this URL).
        keyring: Trusted log keys to check the checkpoint first (default: the user's).
        timeout: Seconds per request.
        key_directory: Where ``witnesses.json`` is (default :func:`~flightlog.integrity.keys.key_dir`).

    Raises:
        WitnessError: no checkpoint, refused, unreachable, an invalid cosignature, or a witness that
            already cosigned a larger head (the database was rolled back).
        LedgerIntegrityError: the rows disagree with the signed checkpoints (no proof can be built).
    """
    from .keys import load_keyring
    from .proofs import prove_consistency

    key = _resolve_witness(url, witness_key, key_directory)
    origin = origin_for(store.ledger_id(), session_id)
    record = store.latest_checkpoint(session_id)
    if record is None:
        raise WitnessError(url=url, reason=f"session {session_id} has no signed checkpoint to witness")
    signed = _open(record.body, keyring or load_keyring(), origin, url)

    def proof_from(old: int) -> list[bytes]:
        return [] if old == 0 else list(prove_consistency(store, session_id, old, signed.size).path)

    return _submit(store, url, signed, key, proof_from, timeout)


def submit_index(
    store: Store,
    url: str,
    *,
    witness_key: CosignerKey | None = None,
    keyring: Keyring | None = None,
    timeout: float = 10.0,
    key_directory: Path | None = None,
) -> Submission:
    """Have a witness cosign the index log's latest signed checkpoint (see :func:`submit_session`).

    Raises:
        WitnessError: no index checkpoint, refused, unreachable, or an invalid cosignature.
    """
    from .indexlog import index_origin, prove_index_consistency
    from .keys import load_keyring

    key = _resolve_witness(url, witness_key, key_directory)
    origin = index_origin(store.ledger_id())
    record = store.latest_index_checkpoint()
    if record is None:
        raise WitnessError(url=url, reason="the index log has no signed checkpoint to witness")
    signed = _open(record.body, keyring or load_keyring(), origin, url)

    def proof_from(old: int) -> list[bytes]:
        return prove_index_consistency(store, old, signed.size)[0]

    return _submit(store, url, signed, key, proof_from, timeout)


def _open(note: str, keyring: Keyring, origin: str, url: str) -> SignedCheckpoint:
    try:
        return open_checkpoint(note, keyring, origin=origin)
    except NoteError as exc:
        raise WitnessError(
            url=url, reason=f"the latest checkpoint of {origin} does not verify: {exc.reason}"
        ) from exc


def verify_cosigned(
    note: str, origin: str, keyring: Keyring, witnesses: Sequence[CosignerKey], *, online: bool = False
) -> list[WitnessedHead]:
    """The heads a cosigned checkpoint note proves: one per trusted witness whose cosignature verifies.

    The log's own signature must verify first (against ``keyring``, for ``origin``): a witness vouches
    for consistency, not for the log's authorship.

    Raises:
        NoteError: the log signature does not verify, or the note is malformed.

    Source: C2SP tlog-cosignature ("clients ... ignore any signature lines that don't match").
    """
    signed = open_checkpoint(note, keyring, origin=origin)
    text = signed.checkpoint.text()
    heads = []
    for sig in parse_note(note).signatures:
        for key in witnesses:
            stamp = key.verify(text, sig)
            if stamp is not None:
                heads.append(WitnessedHead(signed, key.name, stamp, online))
    return heads


def witnessed_heads(
    store: Store,
    origin: str,
    *,
    keyring: Keyring,
    witnesses: Sequence[TrustedWitness],
    online: bool = True,
    timeout: float = 5.0,
) -> tuple[list[WitnessedHead], list[str]]:
    """Every verified head trusted witnesses cosigned for ``origin``: stored ones and, with ``online``,
    each witness's current one (fetched from its URL; a database rollback cannot remove those).

    Returns:
        The heads (deduplicated by witness, size and root; online first) and notes on what could not be
        checked (an unreachable witness, a stored cosignature that does not verify).
    """
    keys = [w.key for w in witnesses]
    heads: list[WitnessedHead] = []
    notes: list[str] = []
    if online:
        for witness in (w for w in witnesses if w.url):
            assert witness.url is not None
            try:
                note = fetch_checkpoint(witness.url, origin, timeout=timeout)
                if note is not None:
                    heads += verify_cosigned(note, origin, keyring, [witness.key], online=True)
            except WitnessError as exc:
                notes.append(f"witness {witness.key.name} not checked: {exc.reason}")
            except NoteError as exc:
                notes.append(
                    f"witness {witness.key.name} answered a checkpoint that does not verify: {exc.reason}"
                )
    try:
        stored = store.cosignatures(origin) if keys else []
    except NotImplementedError:
        stored, notes = [], [*notes, "this store keeps no cosignatures"]
    for record in stored:
        try:
            heads += verify_cosigned(record.note, origin, keyring, keys)
        except NoteError as exc:
            notes.append(f"stored cosigned checkpoint at size {record.size} does not verify: {exc.reason}")
    seen: set[tuple[str, int, bytes]] = set()
    unique = []
    for head in heads:
        key = (head.witness, head.size, head.root)
        if key not in seen:
            seen.add(key)
            unique.append(head)
    return unique, notes
