"""A witness for flightlog's logs: C2SP ``tlog-witness`` add-checkpoint, ``tlog-cosignature`` v1.

Retained heads catch a database rolled back behind flightlog's back, but they live on the same machine: an
attacker who also deletes the head directory is caught only by a party that remembers the log's largest
head elsewhere. A witness is that party. It verifies each checkpoint it is sent against the log's public
key, checks it is consistent with the last checkpoint it cosigned for the same origin, persists it, and
returns a timestamped cosignature. ``flightlog verify``/``audit`` then ask the witness for the head it
cosigned and refuse a database older than or inconsistent with it.

**Protocol** (C2SP tlog-witness, "add-checkpoint"). ``POST <url>/add-checkpoint`` with the body::

    old <size of the checkpoint the witness last cosigned for this origin, 0 if none>
    <base64 consistency proof hash>        zero or more lines, at most 63 (RFC 9162 §2.1.4)
    <empty line>
    <the log-signed checkpoint note>

Responses: 200 with the cosignature line(s); 400 malformed, or old size above the checkpoint's; 403 no
valid signature by a trusted key of the origin; 404 unknown origin; 409 ``old`` is not the witness's
latest size for the origin (body: that size and a newline, ``Content-Type: text/x.tlog.size``); 422 a bad
consistency proof, a different root at the same size, or a size-0 checkpoint without the empty root.
Checking ``old`` and persisting the new head happen under one lock, so two concurrent requests cannot
roll the witness back (the race the spec describes). ``GET <url>/<sha256(origin), hex>/checkpoint``
returns the latest cosigned checkpoint (log signature and cosignature), 404 when there is none (C2SP
tlog-witness, "Monitor Retrieval Mechanism").

**Cosignature** (C2SP tlog-cosignature, "Ed25519 signed message"): a signed-note signature line
``— <witness name> base64(key ID || u64 big-endian timestamp || Ed25519 signature)``, the key ID being
``SHA-256(name || 0x0A || 0x04 || public key)[:4]``, the signature over::

    cosignature/v1
    time <POSIX seconds>
    <the checkpoint note text: origin, size, root, extension lines>

Witness verifier keys are note key text with type byte 0x04: ``<name>+<hex id>+<base64(0x04 || key)>``.

**Witness state** (``--store DIR``, separate from any ledger database)::

    witness.key       PRIVATE+KEY+<name>+<hex id>+<base64(0x04 || seed)>, mode 0600
    witness.json      {"format": "flightlog-witness/1", "logs": [{"vkey": "<log verifier key>",
                       "origin_prefix": "flightlog.local/"}]}
    state/<sha256(origin) hex>.json   {"origin", "size", "root" (base64), "checkpoint": cosigned note}
    evidence.jsonl    validly signed checkpoints refused as inconsistent (proof of misbehaviour)

One deliberate reading of the spec: a flightlog ledger is a family of logs (one per session, one index
log), each with its own origin line, so the witness is configured with a log key *and an origin prefix*;
every origin under the prefix is a separate log and gets its own latest-checkpoint record, as the spec
requires. HTTP/1.0 (one request per connection; keep-alive is a SHOULD not implemented here).

The log's side (submitting heads, the witness trust list, cosigned heads for verification) is
:mod:`flightlog.integrity.witness_client`.

Source: C2SP tlog-witness, tlog-cosignature, tlog-checkpoint, signed-note; RFC 9162 §2.1.4.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat

from ..errors import FlightlogError
from ..ledger import EMPTY_ROOT, verify_consistency
from .checkpoints import Checkpoint
from .heads import _file_lock
from .keys import KeyManifestError, Keyring, TrustedKey, VerifierKey, key_id, parse_typed_key
from .notes import Note, NoteError, NoteSignature, open_note, parse_note

if TYPE_CHECKING:
    pass

__all__ = [
    "COSIGNATURE_HEADER",
    "COSIGNATURE_TYPE",
    "DEFAULT_WITNESS_NAME",
    "SIZE_CONTENT_TYPE",
    "Cosigner",
    "CosignerKey",
    "TrustedLog",
    "Witness",
    "WitnessError",
    "WitnessServer",
    "cosignature_message",
    "write_json",
]

log = logging.getLogger("flightlog.integrity.witness")

COSIGNATURE_TYPE = 0x04
"""Signature type byte of Ed25519 cosignatures (C2SP tlog-cosignature, "Format")."""

COSIGNATURE_HEADER = "cosignature/v1"
"""First line of the cosigned message (C2SP tlog-cosignature, "Ed25519 signed message")."""

SIZE_CONTENT_TYPE = "text/x.tlog.size"
"""Content type of a 409 response carrying the witness's latest size (C2SP tlog-witness)."""

DEFAULT_WITNESS_NAME = "flightlog.local/witness"
"""Name of a generated witness key."""

MAX_PROOF_LINES = 63
MAX_BODY_BYTES = 1 << 20
_CONFIG_FORMAT = "flightlog-witness/1"
_OLD_LINE = re.compile(r"old (0|[1-9][0-9]*)")
_ORIGIN_HASH = re.compile(r"/([0-9a-f]{64})/checkpoint")


class WitnessError(FlightlogError):
    """A witness refused a checkpoint, or could not be reached, or its answer does not verify.

    ``status`` is the HTTP status (None when unreachable); ``size`` the witness's latest size for the
    origin on a 409 (else None).
    """

    url: str
    status: int | None
    reason: str
    size: int | None

    def __init__(self, *, url: str, reason: str, status: int | None = None, size: int | None = None) -> None:
        code = f" ({status})" if status is not None else ""
        super().__init__(f"witness {url}{code}: {reason}", url=url, status=status, reason=reason, size=size)


# ─── cosigner keys (C2SP tlog-cosignature, Ed25519) ──────────────────────────────────────────


def cosignature_message(checkpoint_text: str, timestamp: int) -> bytes:
    """The message an Ed25519 cosignature signs: ``cosignature/v1\\ntime <ts>\\n`` + the note text.

    Source: C2SP tlog-cosignature, "Ed25519 signed message".
    """
    return f"{COSIGNATURE_HEADER}\ntime {timestamp}\n{checkpoint_text}".encode()


@dataclass(frozen=True)
class CosignerKey:
    """A witness's public key (vkey type 0x04).

    Attributes:
        name: The witness name, as on its signature lines.
        key_id: ``SHA-256(name || 0x0A || 0x04 || public key)[:4]`` as a big-endian uint32.
        public_key: The 32-byte Ed25519 public key.
    """

    name: str
    key_id: int
    public_key: bytes

    @classmethod
    def parse(cls, text: str) -> CosignerKey:
        """Parse ``<name>+<hex id>+<base64(0x04 || key)>``.

        Raises:
            KeyManifestError: malformed, not a cosigner key, or a key ID that does not match.
        """
        name, hex_id, public = parse_typed_key(text, COSIGNATURE_TYPE)
        if key_id(name, public, COSIGNATURE_TYPE) != hex_id:
            raise KeyManifestError(path="", reason=f"witness key id {hex_id:08x} does not match its key")
        return cls(name, hex_id, public)

    def __str__(self) -> str:
        encoded = base64.b64encode(bytes([COSIGNATURE_TYPE]) + self.public_key).decode()
        return f"{self.name}+{self.key_id:08x}+{encoded}"

    def verify(self, checkpoint_text: str, signature: NoteSignature) -> int | None:
        """The cosignature's timestamp (POSIX s) when ``signature`` is this key's valid cosignature of the
        checkpoint text, else None (another key, a zero timestamp, a bad signature)."""
        blob = signature.signature
        if (signature.name, signature.key_id) != (self.name, self.key_id) or len(blob) != 72:
            return None
        timestamp = int.from_bytes(blob[:8], "big")
        if not 0 < timestamp < 2**63:
            return None
        try:
            Ed25519PublicKey.from_public_bytes(self.public_key).verify(
                blob[8:], cosignature_message(checkpoint_text, timestamp)
            )
        except (InvalidSignature, ValueError):
            return None
        return timestamp


@dataclass(frozen=True)
class Cosigner:
    """A witness's private key; ``repr`` never shows the secret."""

    name: str
    key_id: int
    _private: Ed25519PrivateKey = field(repr=False, compare=False)

    @classmethod
    def generate(cls, name: str = DEFAULT_WITNESS_NAME) -> Cosigner:
        """A fresh random witness key.

        Raises:
            KeyManifestError: ``name`` is not a valid key name.
        """
        from .keys import valid_key_name

        if not valid_key_name(name):
            raise KeyManifestError(path="", reason=f"invalid witness name {name!r}")
        return cls._from_private(name, Ed25519PrivateKey.generate())

    @classmethod
    def parse(cls, text: str) -> Cosigner:
        """Parse ``PRIVATE+KEY+<name>+<hex id>+<base64(0x04 || seed)>``.

        Raises:
            KeyManifestError: malformed, not a cosigner key, or a key ID that does not match.
        """
        name, hex_id, seed = parse_typed_key(text, COSIGNATURE_TYPE, private=True)
        signer = cls._from_private(name, Ed25519PrivateKey.from_private_bytes(seed))
        if signer.key_id != hex_id:
            raise KeyManifestError(path="", reason=f"witness key id {hex_id:08x} does not match its key")
        return signer

    @classmethod
    def _from_private(cls, name: str, private: Ed25519PrivateKey) -> Cosigner:
        public = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        return cls(name, key_id(name, public, COSIGNATURE_TYPE), private)

    @property
    def verifier(self) -> CosignerKey:
        """The matching public key."""
        public = self._private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        return CosignerKey(self.name, self.key_id, public)

    def secret_text(self) -> str:
        """The private key text: a secret, for a 0600 file."""
        seed = self._private.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
        encoded = base64.b64encode(bytes([COSIGNATURE_TYPE]) + seed).decode()
        return f"PRIVATE+KEY+{self.name}+{self.key_id:08x}+{encoded}"

    def cosign(self, checkpoint_text: str, timestamp: int) -> NoteSignature:
        """The cosignature line of a checkpoint text at ``timestamp`` (POSIX s, > 0).

        Source: C2SP tlog-cosignature, "Format" (``timestamped_signature``) and "Ed25519 signed message".
        """
        if not 0 < timestamp < 2**63:
            raise ValueError("a cosignature timestamp must be in (0, 2**63)")
        sig = self._private.sign(cosignature_message(checkpoint_text, timestamp))
        return NoteSignature(self.name, self.key_id, timestamp.to_bytes(8, "big") + sig)


# ─── the witness ─────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class TrustedLog:
    """A log key the witness accepts, for every origin starting with ``origin_prefix``."""

    verifier: VerifierKey
    origin_prefix: str = "flightlog.local/"


@dataclass(frozen=True)
class _Head:
    origin: str
    size: int
    root: bytes
    note: str


@dataclass(frozen=True)
class _Response:
    status: int
    body: bytes
    content_type: str = "text/plain; charset=utf-8"


def _text(status: int, message: str) -> _Response:
    return _Response(status, (message + "\n").encode())


class _Refused(Exception):
    def __init__(self, response: _Response) -> None:
        super().__init__(response.status)
        self.response = response


class Witness:
    """Verifies checkpoints and cosigns consistent ones; its state lives in a directory of its own.

    Build with :meth:`open`. Thread-safe: one lock serialises check-and-persist (C2SP tlog-witness: the
    old-size check and the update must be atomic), and a lock file does so across processes.
    """

    def __init__(
        self,
        directory: Path,
        cosigner: Cosigner,
        logs: Sequence[TrustedLog],
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.directory = Path(directory)
        self.cosigner = cosigner
        self.logs = list(logs)
        self.clock = clock
        self._lock = threading.Lock()

    @classmethod
    def open(
        cls,
        directory: Path,
        *,
        name: str | None = None,
        log_keys: Iterable[str] = (),
        origin_prefix: str = "flightlog.local/",
    ) -> Witness:
        """Open (creating on first use) a witness state directory.

        Args:
            directory: The witness's own directory (never a ledger's).
            name: Key name for a new witness key (default :data:`DEFAULT_WITNESS_NAME`).
            log_keys: Log verifier keys to trust (added to ``witness.json``, kept across restarts).
            origin_prefix: The origins those keys may sign.

        Raises:
            KeyManifestError: an unreadable or unsafe key file, a malformed log key or config.
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        cosigner = _load_or_create_cosigner(directory / "witness.key", name or DEFAULT_WITNESS_NAME)
        logs = _read_config(directory / "witness.json")
        added = [TrustedLog(VerifierKey.parse(k), origin_prefix) for k in log_keys]
        for entry in added:
            if entry not in logs:
                logs.append(entry)
        if added:
            write_json(
                directory / "witness.json",
                {
                    "format": _CONFIG_FORMAT,
                    "logs": [{"vkey": str(e.verifier), "origin_prefix": e.origin_prefix} for e in logs],
                },
            )
        return cls(directory, cosigner, logs)

    # state
    def _state_path(self, origin: str) -> Path:
        return self.directory / "state" / f"{hashlib.sha256(origin.encode()).hexdigest()}.json"

    def latest(self, origin: str) -> _Head | None:
        """The latest checkpoint cosigned for ``origin``, or None."""
        return self._load(self._state_path(origin))

    def _load(self, path: Path) -> _Head | None:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            return _Head(
                doc["origin"], int(doc["size"]), base64.b64decode(doc["root"]), str(doc["checkpoint"])
            )
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, binascii.Error) as exc:
            raise FlightlogError(f"witness state {path} is unreadable: {exc}") from exc

    def _evidence(self, reason: str, body: bytes) -> None:
        line = json.dumps(
            {"time": int(self.clock()), "reason": reason, "request": body.decode("utf-8", "replace")}
        )
        with (self.directory / "evidence.jsonl").open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")

    # protocol
    def add_checkpoint(self, body: bytes) -> _Response:
        """Handle one add-checkpoint request body; returns the HTTP response (C2SP tlog-witness)."""
        try:
            old, proof, note_text = _parse_request(body)
            note, cp = _parse_checkpoint(note_text)
            self._verify_log_signature(note_text, cp)
            if old > cp.size:
                return _text(400, f"old size {old} is above the checkpoint size {cp.size}")
            with self._lock, _file_lock(self.directory / ".state.lock"):
                return self._update(old, proof, note, cp, body)
        except _Refused as refused:
            return refused.response
        except (OSError, FlightlogError) as exc:  # unreadable state, full disk: never cosign then
            log.exception("witness state failure")
            return _text(500, f"witness state failure: {exc}")

    def _verify_log_signature(self, note_text: str, cp: Checkpoint) -> None:
        keys = [TrustedKey(log.verifier) for log in self.logs if cp.origin.startswith(log.origin_prefix)]
        if not keys:
            raise _Refused(_text(404, f"unknown origin {cp.origin!r}"))
        try:
            open_note(note_text, Keyring(keys), at_ms=cp.time_ms)
        except NoteError as exc:
            raise _Refused(_text(403, exc.reason)) from exc

    def _update(self, old: int, proof: list[bytes], note: Note, cp: Checkpoint, body: bytes) -> _Response:
        current = self.latest(cp.origin)
        size, root = (current.size, current.root) if current else (0, bytes.fromhex(EMPTY_ROOT))
        if old != size:
            return _Response(409, f"{size}\n".encode(), SIZE_CONTENT_TYPE)
        if cp.size == 0 and cp.root != bytes.fromhex(EMPTY_ROOT):
            return _text(422, "a checkpoint of size 0 must carry the empty tree's root")
        if old == 0 and proof:
            return _text(422, "old size 0 takes an empty consistency proof")
        if old and not verify_consistency(old, cp.size, root, cp.root, proof):
            self._evidence(f"inconsistent with size {old}", body)
            return _text(422, f"the checkpoint is not consistent with the cosigned size {old}")
        stamp = max(int(self.clock()), 1)
        cosig = self.cosigner.cosign(note.text, stamp)
        kept = [s for s in note.signatures if (s.name, s.key_id) != (cosig.name, cosig.key_id)]
        cosigned = str(Note(note.text, (*kept, cosig)))
        doc = {
            "origin": cp.origin,
            "size": cp.size,
            "root": base64.b64encode(cp.root).decode(),
            "checkpoint": cosigned,
        }
        write_json(self._state_path(cp.origin), doc)
        return _Response(200, (cosig.line() + "\n").encode())

    def get_checkpoint(self, path: str) -> _Response:
        """``GET /<sha256(origin)>/checkpoint``: the latest cosigned checkpoint, 404 when none."""
        match = _ORIGIN_HASH.fullmatch(path)
        if match is None:
            return _text(404, "not found")
        try:
            head = self._load(self.directory / "state" / f"{match.group(1)}.json")
        except FlightlogError as exc:
            return _text(500, str(exc))
        if head is None:
            return _text(404, "no checkpoint cosigned for this origin")
        return _Response(200, head.note.encode())


def _parse_request(body: bytes) -> tuple[int, list[bytes], str]:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Refused(_text(400, "the body is not UTF-8")) from exc
    head, sep, note = text.partition("\n\n")
    lines = head.split("\n")
    match = _OLD_LINE.fullmatch(lines[0])
    if not sep or match is None:
        raise _Refused(_text(400, "the body must start with an 'old <size>' line and hold an empty line"))
    if len(lines) - 1 > MAX_PROOF_LINES:
        raise _Refused(_text(400, f"more than {MAX_PROOF_LINES} consistency proof lines"))
    proof = []
    for line in lines[1:]:
        try:
            raw = base64.b64decode(line.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError) as exc:
            raise _Refused(_text(400, "a consistency proof line is not base64")) from exc
        if len(raw) != 32:
            raise _Refused(_text(400, "a consistency proof line is not a 32-byte hash"))
        proof.append(raw)
    return int(match.group(1)), proof, note


def _parse_checkpoint(note_text: str) -> tuple[Note, Checkpoint]:
    try:
        note = parse_note(note_text)
        return note, Checkpoint.parse(note.text)
    except NoteError as exc:
        raise _Refused(_text(400, f"malformed checkpoint: {exc.reason}")) from exc


def _load_or_create_cosigner(path: Path, name: str) -> Cosigner:
    if path.exists():
        mode = path.stat().st_mode
        if os.name == "posix" and mode & 0o077:
            raise KeyManifestError(
                path=str(path), reason=f"witness key is readable by others (mode {mode & 0o777:o})"
            )
        try:
            return Cosigner.parse(path.read_text(encoding="ascii"))
        except (OSError, UnicodeDecodeError) as exc:
            raise KeyManifestError(path=str(path), reason=f"unreadable witness key: {exc}") from exc
    cosigner = Cosigner.generate(name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as fh:
        fh.write(cosigner.secret_text() + "\n")
    return cosigner


def _read_config(path: Path) -> list[TrustedLog]:
    if not path.exists():
        return []
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("format") != _CONFIG_FORMAT:
            raise ValueError(f"not a {_CONFIG_FORMAT} file")
        return [TrustedLog(VerifierKey.parse(e["vkey"]), str(e["origin_prefix"])) for e in doc["logs"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise KeyManifestError(path=str(path), reason=f"unreadable witness config: {exc}") from exc


def write_json(path: Path, doc: Any) -> None:
    """Write ``doc`` as indented JSON to ``path`` atomically (temp file, fsync, rename); folders mode 0700."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        fh.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


# ─── HTTP server (stdlib) ────────────────────────────────────────────────────────────────────


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        if self.path.rstrip("/").rsplit("/", 1)[-1] != "add-checkpoint":
            self._send(_text(404, "not found"))
            return
        length = int(self.headers.get("Content-Length") or 0)
        if not 0 < length <= MAX_BODY_BYTES:
            self._send(_text(400, "a body of 1 byte to 1 MiB is required"))
            return
        self._send(self.server.witness.add_checkpoint(self.rfile.read(length)))

    def do_GET(self) -> None:
        self._send(self.server.witness.get_checkpoint(self.path))

    def _send(self, response: _Response) -> None:
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        self.end_headers()
        self.wfile.write(response.body)

    def log_message(self, format: str, *args: Any) -> None:
        log.info("%s " + format, self.address_string(), *args)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], witness: Witness) -> None:
        self.witness = witness
        super().__init__(address, _Handler)


class WitnessServer:
    """The witness over HTTP (stdlib ``http.server``, one thread per request).

    Use as a context manager, or call :meth:`start` (background thread) / :meth:`serve_forever` and
    :meth:`close`. ``port=0`` picks a free port; :attr:`url` tells which.
    """

    def __init__(self, witness: Witness, host: str = "127.0.0.1", port: int = 0) -> None:
        self.witness = witness
        self._server = _Server((host, port), witness)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """``http://<host>:<port>``: the submission and monitoring prefix."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> WitnessServer:
        """Serve in a background thread."""
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="flightlog-witness", daemon=True
        )
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until :meth:`close` (or Ctrl-C)."""
        self._server.serve_forever()

    def close(self) -> None:
        """Stop serving and close the socket. Idempotent."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> WitnessServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
