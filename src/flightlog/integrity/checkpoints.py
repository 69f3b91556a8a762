"""Signed checkpoints, retained heads, sealed sessions, and checkpoint-aware verification and resume.

**Checkpoint** (C2SP ``tlog-checkpoint``): a signed note whose text is::

    flightlog.local/<ledger id>/<session id, percent-encoded>     origin
    <tree size, decimal, no leading zeros>                      number of events covered: seqs [0, size)
    <base64 RFC 9162 root hash over those events>               RFC 9162 §2.1.1 Merkle Tree Hash
    time <epoch ms>                                             extension line: signing time
    chain <64 lowercase hex>                                    extension line: chain hash of seq size-1

then a blank line and one signature line per key, ``— <key name> <base64(key ID || Ed25519 signature)>``
(C2SP ``signed-note``; key IDs and key text in :mod:`flightlog.integrity.keys`). The ``time`` line picks the key
valid at signing time (key rotation); the ``chain`` line anchors the seed chain rule too, so a resume that
starts from a checkpoint links new events to a signed hash. The origin binds a checkpoint to one ledger
(a random id stored in the database) and one session, so one cannot be spliced into another.

**Cadence.** A :class:`Notary`-equipped recorder signs a checkpoint, in the same transaction as the
events it covers, at the end of an ``append_many`` once ``every`` (default 64) events have accumulated
since the last one, whenever ``Recorder.checkpoint()`` is called (the kernel calls it before each
side-effecting tool call), and when the session is sealed. Ed25519 signing costs ~50 µs, so at the default
cadence it adds < 1 µs per event. Events after the last checkpoint are the *unanchored tail*: chained
and Merkle-hashed like every event, but with no signature over them yet; verification reports them as such.

**Seal.** ``Recorder.finish(status)`` appends a ``Custom`` event ``session_sealed`` with payload
``{"size": n, "root": <hex root over seqs [0, n)>, "status": status}`` at seq n and a checkpoint over
n + 1 events. A sealed session refuses appends; an event after a seal is a divergence.

**Retained heads** (:class:`HeadStore`): after each commit the latest signed checkpoint of a session is
also written to ``<head dir>/<ledger id>/<sha256(session id)[:40]>.json``, outside the database (head dir:
``$FLIGHTLOG_HEAD_DIR``, else ``platformdirs.user_state_dir("flightlog")/heads``). One file per session
(rather than one per ledger) so concurrent writers of different sessions never lose each other's update.
Verification and resume refuse a database whose latest head is older than, or inconsistent with, the
retained one: that is how a database rolled back to an earlier copy, a truncated sealed session, a
replayed old head and a fork are caught. The index log keeps its own retained head beside them
(``index.json``, format ``flightlog-index-head/1``).

**Resume.** ``Recorder.attach(..., notary=n)`` verifies in full by default (:func:`audit_session`,
streaming, O(n)). ``full=False`` verifies the latest checkpoint's signature, its consistency with the
retained head, rebuilds the compact range from the frontier stored with the checkpoint (a cache, checked
against the signed root) and verifies only the rows after it: O(log n) + tail. When the retained head is
older than the latest checkpoint, consistency is checked by folding the events between the two into the
frontier kept at the retained size (equivalent to an RFC 9162 §2.1.4 consistency proof, and cheaper).
Whatever the frontiers cannot settle (none stored, damaged) falls back to the full path. Cheap resume
does not re-read rows the checkpoint covers, so an edit to them is only caught by a full verify; that is
why full stays the default.

**Index log and witnesses.** Each checkpoint is also appended, in the same transaction, to the ledger-wide
index log (:mod:`flightlog.integrity.indexlog`; its own signed checkpoints, origin ``flightlog.local/<ledger id>/_/index``,
its own retained head ``<head dir>/<ledger id>/index.json``), so a session deleted wholesale stays visible.
Heads cosigned by a witness (:mod:`flightlog.integrity.witness`) are passed to :func:`audit_session` as
:class:`WitnessedHead` and checked like the retained head (``rollback``, ``fork``, ``stale_head``, the detail
naming the witness): that catches a rollback even when the retained-head directory went with the database.
The session's checkpoints the signed index log holds are passed as :class:`IndexedHead` and checked the same
way (the detail naming the leaf), so a session re-chained after its retained head file was deleted still
diverges; :func:`flightlog.integrity.audit.require_intact` (the check every entry point runs) passes all of these.

**Default notary.** :data:`USER_NOTARY` is the default ``notary=`` of what records sessions for the user
(``Kernel``, the integrations, ``submit``, ``Worker``, ``approve``/``deny``/``abort``): :meth:`Notary.from_env`,
what ``flightlog run`` uses; ``notary=None`` opts out.

**Erasable artifacts.** Events referencing personal data do so by salted digest
(``salted:sha256:<hex>``, :mod:`flightlog.integrity.erasure`); verification lists each such reference (a JSON string
value that is exactly a handle, not a mention inside longer text) as present, erased (with the erasure
log seq) or missing (``artifact_missing``, a divergence).

**Limits.** The ledger id lives in the database: an attacker who rewrites it *and* deletes every
checkpoint turns sessions into wholly unanchored ones (reported so, never as signed) with no retained
head to compare against. Dropping only the unanchored tail cannot be detected locally. Both need a
witness outside the machine.

Divergence reasons added here (on top of :func:`flightlog.ledger.verify_rows`'s): ``bad_checkpoint``
(malformed, unsigned by a trusted key, bad signature, key not valid at its time, wrong origin),
``checkpoint_mismatch`` (signed root or chain hash differs from the stored rows), ``truncated`` (a signed
checkpoint covers more events than stored), ``rollback`` (the retained head covers more events than
stored), ``stale_head`` (the database's latest checkpoint is older than the retained head), ``fork`` (the
stored rows disagree with the retained head), ``after_seal``, ``bad_seal`` and ``artifact_missing`` (a
salted artifact referenced by an event is gone without an erasure record).
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import json
import logging
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote

from ..errors import (
    Divergence,
    EventDecodeError,
    FlightlogError,
    LedgerIntegrityError,
    StoreError,
    StoreUnavailable,
)
from ..ledger import GENESIS, CompactRange, chain_hash, leaf_hash, verify_rows
from .keys import KeyManifestError, Keyring, LogSigner, TrustedKey, load_keyring, load_signer, now_ms

if TYPE_CHECKING:
    from ..store.base import CheckpointRecord, Store, StoredEvent
    from .retirement import Pin, RetirementCheck, StaleCopy

__all__ = [
    "ENV_HEAD_DIR",
    "MAX_SIGNATURES",
    "ORIGIN_HOST",
    "SALTED_PREFIX",
    "SEAL_KIND",
    "USER_NOTARY",
    "Anchor",
    "ArtifactRef",
    "AuditReport",
    "Checkpoint",
    "HeadStore",
    "IndexedHead",
    "Notary",
    "Note",
    "NoteError",
    "NoteSignature",
    "RetainedHead",
    "SessionNotary",
    "SessionSealed",
    "SignedCheckpoint",
    "UserNotary",
    "WitnessedHead",
    "audit_rows",
    "audit_session",
    "decode_frontier",
    "encode_frontier",
    "missing_sessions",
    "open_checkpoint",
    "open_note",
    "origin_for",
    "parse_note",
    "resolve_notary",
    "resume",
    "sign_note",
]

log = logging.getLogger("flightlog.integrity.checkpoints")

ORIGIN_HOST = "flightlog.local"
"""First component of every checkpoint origin."""

SEAL_KIND = "session_sealed"
"""``Custom.custom_kind`` of the close entry (reserved)."""

ENV_HEAD_DIR = "FLIGHTLOG_HEAD_DIR"
"""Environment variable overriding the retained-head directory."""

MAX_SIGNATURES = 100
"""Signature lines accepted per note (C2SP signed-note: at least 16; Go's sumdb/note caps at 100)."""

_SIG_PREFIX = "\u2014 "  # em dash, space (C2SP signed-note "Format")
_DECIMAL = re.compile(r"0|[1-9][0-9]*")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f]")  # C0 controls but newline (C2SP signed-note, "Format")
_LEDGER_ID = re.compile(r"[0-9a-f]{8,64}")
_SEAL_MARK = b'"custom_kind":"session_sealed"'

SALTED_PREFIX = "salted:sha256:"
"""Prefix of a salted (erasable) artifact handle: ``salted:sha256:<hex of sha256(salt || content)>``."""

_SALTED = re.compile(rb'"salted:sha256:([0-9a-f]{64})"')  # a JSON string that is exactly a handle


class NoteError(FlightlogError, ValueError):
    """A signed note or checkpoint is malformed or does not verify (``reason`` says how)."""

    reason: str

    def __init__(self, *, reason: str) -> None:
        super().__init__(f"signed note: {reason}", reason=reason)


class SessionSealed(FlightlogError):
    """An append was attempted on a sealed (finished and signed) session; nothing was written."""

    session_id: str

    def __init__(self, *, session_id: str) -> None:
        super().__init__(f"session {session_id} is sealed; nothing written", session_id=session_id)


# ─── signed notes (C2SP signed-note) ──────────────────────────────────────────────────────────


@dataclass(frozen=True)
class NoteSignature:
    """One signature line: key name, 32-bit key ID and the signature bytes (64 for Ed25519)."""

    name: str
    key_id: int
    signature: bytes

    def line(self) -> str:
        """``— <name> <base64(key ID || signature)>`` without the newline."""
        blob = self.key_id.to_bytes(4, "big") + self.signature
        return f"{_SIG_PREFIX}{self.name} {base64.b64encode(blob).decode()}"


@dataclass(frozen=True)
class Note:
    """A parsed signed note: the signed text (ending in a newline) and its signatures, in order."""

    text: str
    signatures: tuple[NoteSignature, ...]

    def __str__(self) -> str:
        return self.text + "\n" + "".join(s.line() + "\n" for s in self.signatures)


def _check_text(text: str) -> None:
    if not text.endswith("\n"):
        raise NoteError(reason="note text must end with a newline")
    bad = _CONTROL.search(text)
    if bad is not None:
        raise NoteError(reason=f"note holds control character U+{ord(bad.group()):04X}")


def sign_note(text: str, *signers: LogSigner) -> str:
    """Sign ``text`` with each signer and return the whole note (text, blank line, signature lines).

    Raises:
        NoteError: the text does not end with a newline or holds a control character (C2SP signed-note).

    Source: C2SP signed-note, "Format" and "Ed25519 signatures" (RFC 8032 over the note text).
    """
    _check_text(text)
    message = text.encode("utf-8")
    sigs = tuple(NoteSignature(s.name, s.key_id, s.sign(message)) for s in signers)
    return str(Note(text, sigs))


def parse_note(data: str) -> Note:
    """Split a signed note into its text and signature lines, without verifying anything.

    The text is everything up to and including the newline before the *last* blank line.

    Raises:
        NoteError: no blank line, no or malformed signature lines, a control character, a bad key name,
            bad base64, or more than :data:`MAX_SIGNATURES` signatures.

    Source: C2SP signed-note, "Format" and "Signatures".
    """
    _check_text(data)
    split = data.rfind("\n\n")
    if split < 0:
        raise NoteError(reason="no blank line between the text and the signatures")
    text, lines = data[: split + 1], data[split + 2 :].splitlines()
    if not lines:
        raise NoteError(reason="no signature lines")
    if len(lines) > MAX_SIGNATURES:
        raise NoteError(reason=f"more than {MAX_SIGNATURES} signatures")
    return Note(text, tuple(_parse_signature(line) for line in lines))


def _parse_signature(line: str) -> NoteSignature:
    if not line.startswith(_SIG_PREFIX):
        raise NoteError(reason=f"signature line does not start with an em dash and a space: {line[:40]!r}")
    name, _, encoded = line[len(_SIG_PREFIX) :].partition(" ")
    from .keys import valid_key_name

    if not valid_key_name(name) or not encoded or " " in encoded:
        raise NoteError(reason=f"malformed signature line: {line[:60]!r}")
    try:
        blob = base64.b64decode(encoded.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise NoteError(reason=f"signature of {name} is not base64") from exc
    if len(blob) < 5:
        raise NoteError(reason=f"signature of {name} is too short")
    return NoteSignature(name, int.from_bytes(blob[:4], "big"), blob[4:])


def open_note(data: str, keyring: Keyring, *, at_ms: int | None = None) -> Note:
    """Parse a note and verify it against the trusted keys.

    Signatures by unknown (name, key ID) pairs are ignored; a signature by a known key must verify (and,
    with ``at_ms``, the key must be valid then), else the whole note is rejected; at least one known key
    must have signed.

    Args:
        data: The signed note.
        keyring: The trusted keys.
        at_ms: The time (epoch ms) the note claims to have been signed, to pick the key valid then.

    Returns:
        The note (its ``text`` is now authenticated).

    Raises:
        NoteError: malformed, a failing signature by a known key, a known key outside its window, or no
            signature by a trusted key (the message names the signers seen).

    Source: C2SP signed-note, "Signatures".
    """
    return _open(data, keyring, at_ms)[0]


def _open(data: str, keyring: Keyring, at_ms: int | None) -> tuple[Note, TrustedKey]:
    note = parse_note(data)
    message = note.text.encode("utf-8")
    verified: TrustedKey | None = None
    for sig in note.signatures:
        candidates = keyring.find(sig.name, sig.key_id)
        if not candidates:
            continue
        good = [k for k in candidates if k.verifier.verify(message, sig.signature)]
        if not good:
            raise NoteError(reason=f"signature by {sig.name}+{sig.key_id:08x} does not verify")
        valid = [k for k in good if at_ms is None or k.valid_at(at_ms)]
        if not valid:
            raise NoteError(reason=f"key {sig.name}+{sig.key_id:08x} was not valid at {at_ms} ms")
        verified = verified or valid[0]
    if verified is None:
        seen = ", ".join(f"{s.name}+{s.key_id:08x}" for s in note.signatures)
        raise NoteError(reason=f"no signature by a trusted key (signed by {seen})")
    return note, verified


# ─── checkpoint bodies (C2SP tlog-checkpoint) ─────────────────────────────────────────────────


def origin_for(ledger_id: str, session_id: str) -> str:
    """``flightlog.local/<ledger id>/<session id>``, the session id percent-encoded.

    Percent-encoding keeps the origin free of spaces, ``+``, ``/`` and control characters whatever the
    session id holds (C2SP tlog-checkpoint, "Note text" 1).
    """
    return f"{ORIGIN_HOST}/{ledger_id}/{quote(session_id, safe='-._~:')}"


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint's note text, parsed.

    Attributes:
        origin: The log identity (:func:`origin_for`).
        size: Events covered: seqs ``[0, size)``.
        root: RFC 9162 root hash over them, 32 bytes.
        time_ms: The ``time`` extension line (epoch ms), or None.
        chain: The ``chain`` extension line (chain hash of seq ``size - 1``, hex), or None.
        extensions: Every extension line, in order (the two above included).
    """

    origin: str
    size: int
    root: bytes
    time_ms: int | None = None
    chain: str | None = None
    extensions: tuple[str, ...] = ()

    def text(self) -> str:
        """The note text: origin, size, base64 root, extension lines, each ending in a newline."""
        lines = [self.origin, str(self.size), base64.b64encode(self.root).decode(), *self.extensions]
        return "".join(line + "\n" for line in lines)

    @classmethod
    def make(cls, origin: str, size: int, root: bytes, *, time_ms: int, chain: str | None) -> Checkpoint:
        """A flightlog checkpoint with its ``time`` and (when given) ``chain`` extension lines."""
        lines = (f"time {time_ms}",) + ((f"chain {chain}",) if chain is not None else ())
        return cls(origin, size, root, time_ms, chain, lines)

    @classmethod
    def parse(cls, text: str) -> Checkpoint:
        """Parse a checkpoint note text.

        Raises:
            NoteError: fewer than three lines, an empty line, a size with leading zeros or not decimal,
                a root that is not canonical base64 of 32 bytes, or a malformed or repeated flightlog
                extension line.

        Source: C2SP tlog-checkpoint, "Note text".
        """
        if not text.endswith("\n"):
            raise NoteError(reason="checkpoint text must end with a newline")
        lines = text[:-1].split("\n")
        if len(lines) < 3 or any(not line for line in lines):
            raise NoteError(reason="checkpoint needs at least three non-empty lines")
        origin, size, root, *extensions = lines
        if not _DECIMAL.fullmatch(size):
            raise NoteError(reason=f"tree size {size[:30]!r} is not a decimal without leading zeros")
        return cls(origin, int(size), _root(root), *_extensions(extensions), tuple(extensions))


def _root(encoded: str) -> bytes:
    try:
        raw = base64.b64decode(encoded.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise NoteError(reason="root hash is not base64") from exc
    if len(raw) != 32 or base64.b64encode(raw).decode() != encoded:
        raise NoteError(reason="root hash is not the canonical base64 of 32 bytes")
    return raw


def _extensions(lines: list[str]) -> tuple[int | None, str | None]:
    found: dict[str, str] = {}
    for line in lines:
        key, _, value = line.partition(" ")
        if key in ("time", "chain"):
            if key in found:
                raise NoteError(reason=f"repeated {key!r} extension line")
            found[key] = value
    time_text, chain = found.get("time"), found.get("chain")
    if time_text is not None and not _DECIMAL.fullmatch(time_text):
        raise NoteError(reason="time extension is not decimal epoch ms")
    if chain is not None and not _HEX64.fullmatch(chain):
        raise NoteError(reason="chain extension is not 64 lowercase hex")
    return (int(time_text) if time_text is not None else None), chain


@dataclass(frozen=True)
class SignedCheckpoint:
    """A checkpoint with its whole signed note; ``key`` is the trusted key that verified it (or None)."""

    checkpoint: Checkpoint
    note: str
    key: TrustedKey | None = None

    @property
    def size(self) -> int:
        """Events covered."""
        return self.checkpoint.size

    @property
    def root(self) -> bytes:
        """RFC 9162 root over them."""
        return self.checkpoint.root


def open_checkpoint(data: str, keyring: Keyring, *, origin: str | None = None) -> SignedCheckpoint:
    """Parse and verify a flightlog checkpoint note.

    Args:
        data: The signed note.
        keyring: The trusted keys.
        origin: The expected origin (:func:`origin_for`), or None to accept any.

    Raises:
        NoteError: malformed; no ``time`` line; another origin; or :func:`open_note` refused it.

    Source: C2SP tlog-checkpoint ("Note text", "Signatures"), C2SP signed-note.
    """
    checkpoint = Checkpoint.parse(parse_note(data).text)
    if checkpoint.time_ms is None:
        raise NoteError(reason="checkpoint has no time extension line")
    if origin is not None and checkpoint.origin != origin:
        raise NoteError(reason=f"origin {checkpoint.origin!r} is not {origin!r}")
    return SignedCheckpoint(checkpoint, data, _open(data, keyring, checkpoint.time_ms)[1])


# ─── compact-range frontiers ──────────────────────────────────────────────────────────────────


def encode_frontier(tree: CompactRange) -> bytes:
    """The compact range's subtree roots, left to right, concatenated (32 bytes each)."""
    return b"".join(tree.hashes)


def decode_frontier(size: int, blob: bytes) -> CompactRange:
    """Rebuild a :class:`~flightlog.ledger.CompactRange` of ``size`` leaves from :func:`encode_frontier`.

    Raises:
        ValueError: the blob does not hold exactly popcount(size) hashes of 32 bytes.
    """
    count = bin(size).count("1")
    if len(blob) != 32 * count:
        raise ValueError(f"frontier of size {size} needs {count} hashes, blob holds {len(blob)} bytes")
    return CompactRange(size, [blob[i : i + 32] for i in range(0, len(blob), 32)])


# ─── retained heads ───────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class RetainedHead:
    """The latest checkpoint of a session as retained outside the database (not yet verified)."""

    session_id: str
    note: str
    sealed: bool
    path: Path


class HeadStore:
    """Retained heads: one JSON file per session, outside the database, never moved backwards.

    File ``<directory>/<ledger id>/<sha256(session id)[:40]>.json``::

        {"format": "flightlog-head/1", "ledger_id": "...", "session_id": "...", "size": 64,
         "root": "<hex>", "sealed": false, "checkpoint": "<signed note>"}

    ``size`` and ``root`` are for people; only the signed ``checkpoint`` is trusted (after verification).
    """

    FORMAT = "flightlog-head/1"
    INDEX_FORMAT = "flightlog-index-head/1"
    INDEX_FILE = "index.json"

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    @classmethod
    def default(cls) -> HeadStore:
        """``$FLIGHTLOG_HEAD_DIR``, else ``platformdirs.user_state_dir("flightlog")/heads``."""
        env = os.environ.get(ENV_HEAD_DIR)
        if env:
            return cls(Path(env))
        from platformdirs import user_state_dir

        return cls(Path(user_state_dir("flightlog", appauthor=False)) / "heads")

    def path(self, ledger_id: str, session_id: str) -> Path:
        """Where the session's retained head lives.

        Raises:
            StoreError: the ledger id is not 8-64 lowercase hex (a tampered database).
        """
        if not _LEDGER_ID.fullmatch(ledger_id):
            raise StoreError(f"ledger id {ledger_id[:70]!r} is not 8-64 lowercase hex")
        name = hashlib.sha256(session_id.encode("utf-8")).hexdigest()[:40]
        return self.directory / ledger_id / f"{name}.json"

    def load(self, ledger_id: str, session_id: str) -> RetainedHead | None:
        """The retained head, or None when there is none.

        Raises:
            NoteError: the file exists but is unreadable or not a head of this session (refused rather
                than ignored: ignoring it would switch rollback detection off).
        """
        path = self.path(ledger_id, session_id)
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise NoteError(reason=f"retained head {path} is unreadable: {exc}") from exc
        if (
            not isinstance(doc, dict)
            or doc.get("format") != self.FORMAT
            or doc.get("session_id") != session_id
            or not isinstance(doc.get("checkpoint"), str)
        ):
            raise NoteError(reason=f"retained head {path} is not a head of session {session_id}")
        return RetainedHead(session_id, doc["checkpoint"], bool(doc.get("sealed")), path)

    def sessions(self, ledger_id: str) -> list[RetainedHead]:
        """Every retained head of a ledger (unreadable files are skipped: :meth:`load` reports them).

        Raises:
            StoreError: the ledger id is not 8-64 lowercase hex.
        """
        folder = self.path(ledger_id, "").parent
        heads = []
        for path in sorted(folder.glob("*.json")):
            if path.name == self.INDEX_FILE:
                continue
            try:
                doc = json.loads(path.read_text(encoding="utf-8"))
                heads.append(
                    RetainedHead(
                        str(doc["session_id"]), str(doc["checkpoint"]), bool(doc.get("sealed")), path
                    )
                )
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return heads

    def save(self, ledger_id: str, session_id: str, signed: SignedCheckpoint, *, sealed: bool) -> bool:
        """Retain ``signed`` unless the file already holds a larger head. Atomic (write, fsync, rename).

        Returns:
            True when written.
        """
        path = self.path(ledger_id, session_id)
        current = self.load(ledger_id, session_id)
        if current is not None:
            size = Checkpoint.parse(parse_note(current.note).text).size
            if size > signed.size or (size == signed.size and current.sealed and not sealed):
                return False
        doc = {
            "format": self.FORMAT,
            "ledger_id": ledger_id,
            "session_id": session_id,
            "size": signed.size,
            "root": signed.root.hex(),
            "sealed": sealed,
            "checkpoint": signed.note,
        }
        _write_atomic(path, doc)
        return True

    def index_path(self, ledger_id: str) -> Path:
        """Where the ledger's index-log head lives: ``<directory>/<ledger id>/index.json``.

        Raises:
            StoreError: the ledger id is not 8-64 lowercase hex.
        """
        return self.path(ledger_id, "").with_name(self.INDEX_FILE)

    def load_index(self, ledger_id: str) -> str | None:
        """The retained index-log checkpoint (a signed note, not yet verified), or None.

        Raises:
            NoteError: the file exists but is unreadable or not an index head of this ledger.
        """
        path = self.index_path(ledger_id)
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise NoteError(reason=f"retained index head {path} is unreadable: {exc}") from exc
        if (
            not isinstance(doc, dict)
            or doc.get("format") != self.INDEX_FORMAT
            or doc.get("ledger_id") != ledger_id
            or not isinstance(doc.get("checkpoint"), str)
        ):
            raise NoteError(reason=f"retained index head {path} is not an index head of ledger {ledger_id}")
        return str(doc["checkpoint"])

    def save_index(self, ledger_id: str, signed: SignedCheckpoint) -> bool:
        """Retain the index log's checkpoint unless a larger one is retained (several processes append to
        one ledger's index: the compare-and-write holds an exclusive lock file; refused where the OS has none).

        Returns:
            True when written.
        """
        path = self.index_path(ledger_id)
        with _file_lock(path.with_name(".index.lock")):
            current = self.load_index(ledger_id)
            if current is not None and Checkpoint.parse(parse_note(current).text).size >= signed.size:
                return False
            doc = {
                "format": self.INDEX_FORMAT,
                "ledger_id": ledger_id,
                "size": signed.size,
                "root": signed.root.hex(),
                "checkpoint": signed.note,
            }
            # Not fsynced (one checkpoint in 64 events pays for it otherwise): a power failure can only
            # leave this head lagging, which is safe; checks compare the database against it, never back.
            _write_atomic(path, doc, fsync=False)
        return True


def _write_atomic(path: Path, doc: dict[str, Any], *, fsync: bool = True) -> None:
    """Write JSON to ``path`` atomically: a temporary file, fsync (unless told not to), rename."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        fh.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
        if fsync:
            fh.flush()
            os.fsync(fh.fileno())
    os.replace(tmp, path)


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock on ``path`` (``fcntl.flock``), held for the block.

    Raises:
        StoreUnavailable: the platform has no ``fcntl`` (Windows): a compare-and-write of retained heads
            without the lock could let one process overwrite another's newer head, so it is refused
            rather than done unlocked.
    """
    try:
        import fcntl
    except ImportError:
        raise StoreUnavailable(
            url=str(path),
            reason="no file locking here (Python has no fcntl module on this platform); retained heads "
            "and witness state are only updated under an exclusive lock",
        ) from None
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with path.open("a") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


# ─── the notary: signing key + trusted keys + retained heads ──────────────────────────────────


@dataclass
class Notary:
    """What a recorder needs to sign checkpoints and check heads.

    Attributes:
        signer: The key that signs new checkpoints.
        keyring: The keys trusted when verifying (must trust ``signer``).
        heads: Where retained heads live.
        every: Sign at the end of an ``append_many`` once this many events are unanchored (>= 1).
        clock: Epoch-ms clock for the ``time`` line.
        index: Also append each checkpoint to the ledger-wide index log (:mod:`flightlog.integrity.indexlog`) when
            the store keeps one (default True).
    """

    signer: LogSigner
    keyring: Keyring
    heads: HeadStore
    every: int = 64
    clock: Callable[[], int] = now_ms
    index: bool = True

    def __post_init__(self) -> None:
        if self.every < 1:
            raise ValueError("every must be >= 1")
        if not self.keyring.find(self.signer.name, self.signer.key_id):
            raise KeyManifestError(path="", reason=f"signing key {self.signer.verifier} is not trusted")

    @classmethod
    def from_env(cls, *, every: int = 64, key_dir: Path | None = None) -> Notary:
        """The user's notary: :func:`~flightlog.integrity.keys.load_signer` (creating a key on first use),
        :func:`~flightlog.integrity.keys.load_keyring` and :meth:`HeadStore.default`.
        """
        signer = load_signer(key_dir)
        return cls(signer, load_keyring(key_dir), HeadStore.default(), every)

    @classmethod
    def for_signer(cls, signer: LogSigner, heads: HeadStore, *, every: int = 64) -> Notary:
        """A notary that trusts exactly its own key (tests, single-key setups)."""
        return cls(signer, Keyring([TrustedKey(signer.verifier)]), heads, every)

    def sign(self, origin: str, size: int, root: bytes, chain: str | None) -> SignedCheckpoint:
        """Sign a checkpoint over ``size`` entries with root ``root`` and chain head ``chain`` (None: no
        ``chain`` line, as for the index log).

        Raises:
            KeyManifestError: the signing key is not valid now (retired by a rotation, or not yet valid):
                refusing beats writing checkpoints that no verifier will accept.
        """
        now = self.clock()
        keys = [k for k in self.keyring.find(self.signer.name, self.signer.key_id) if k.valid_at(now)]
        if not keys:
            raise KeyManifestError(
                path="", reason=f"signing key {self.signer.verifier} is not valid at {now} ms"
            )
        checkpoint = Checkpoint.make(origin, size, root, time_ms=now, chain=chain)
        return SignedCheckpoint(checkpoint, sign_note(checkpoint.text(), self.signer), keys[0])


class UserNotary(enum.Enum):
    """Type of :data:`USER_NOTARY` (an enum so type checkers can tell it from a ``Notary`` and ``None``)."""

    USER = "user"


USER_NOTARY = UserNotary.USER
"""Default of ``notary=`` wherever flightlog records a session for you: the user's notary,
:meth:`Notary.from_env` (the log key of ``$FLIGHTLOG_LOG_KEY`` or the key directory, created on first use,
and the default retained-head directory), exactly what ``flightlog run``, ``import`` and ``worker`` use.
Pass ``notary=None`` to record an unsigned, unsealed chain instead (``verify`` then reports it as wholly
unanchored), or a :class:`Notary` of your own."""


def resolve_notary(notary: Notary | UserNotary | None) -> Notary | None:
    """The notary a ``notary=`` argument stands for: :meth:`Notary.from_env` for :data:`USER_NOTARY`.

    Raises:
        KeyManifestError: the user's key directory is unreadable or its manifest untrusted.
    """
    if isinstance(notary, UserNotary):
        return Notary.from_env()
    return notary


@dataclass
class SessionNotary:
    """A recorder's checkpoint state for one session (internal to the recorder)."""

    notary: Notary
    ledger_id: str
    session_id: str
    latest: SignedCheckpoint | None = None
    sealed: bool = False
    pending: SignedCheckpoint | None = None

    @property
    def origin(self) -> str:
        """The session's checkpoint origin."""
        return origin_for(self.ledger_id, self.session_id)

    @property
    def anchored(self) -> int:
        """Events covered by the latest signed checkpoint."""
        return self.latest.size if self.latest else 0

    def due(self, size: int) -> bool:
        """Whether the cadence calls for a checkpoint at ``size`` events."""
        return size - self.anchored >= self.notary.every

    def snapshot(self) -> tuple[SignedCheckpoint | None, bool, SignedCheckpoint | None]:
        """State to restore when a transaction rolls back."""
        return self.latest, self.sealed, self.pending

    def restore(self, saved: tuple[SignedCheckpoint | None, bool, SignedCheckpoint | None]) -> None:
        """Undo to :meth:`snapshot`."""
        self.latest, self.sealed, self.pending = saved

    @classmethod
    def for_new_session(cls, store: Store, session_id: str, notary: Notary) -> SessionNotary:
        """State for a session about to be created.

        Raises:
            LedgerIntegrityError: a head is already retained for this session id in this ledger: the
                database was rolled back to before the session existed.
        """
        ledger_id = store.ledger_id()
        head = notary.heads.load(ledger_id, session_id)
        if head is not None:
            raise LedgerIntegrityError(
                session_id=session_id,
                seq=0,
                reason=f"rollback: a head of this session is retained at {head.path}, "
                "but the database has no such session",
            )
        return cls(notary, ledger_id, session_id)

    def _hook(self, store: Store) -> None:
        """Retain after the outermost commit; undo this state if it rolls back."""
        saved = self.snapshot()
        store.call_after_commit(self.retain)
        store.call_after_rollback(lambda: self.restore(saved))

    def checkpoint(self, store: Store, tree: CompactRange, chain: str) -> SignedCheckpoint | None:
        """Sign and store a checkpoint over ``tree`` (inside the caller's transaction); None when empty.

        Returns the latest checkpoint unchanged when it already covers ``tree.size`` events. The head
        store is written only after the outermost transaction commits.
        """
        if tree.size == 0:
            return None
        if self.latest is not None and self.latest.size == tree.size:
            return self.latest
        self._hook(store)
        signed = self.notary.sign(self.origin, tree.size, tree.root(), chain)
        checkpoint_id = store.record_checkpoint(self.session_id, tree.size, signed.root.hex(), signed.note)
        store.record_checkpoint_frontier(checkpoint_id, encode_frontier(tree))
        if self.notary.index:
            from .indexlog import append_to_index  # local: indexlog builds on this module

            append_to_index(store, self.notary, self.ledger_id, self.session_id, checkpoint_id, signed)
        self.latest = self.pending = signed
        return signed

    def seal(self, store: Store) -> None:
        """Mark the session sealed (inside the caller's transaction; undone if it rolls back)."""
        self._hook(store)
        self.sealed = True

    def retain(self) -> None:
        """After commit: write the pending checkpoint to the head store (a failure only logs: a lagging
        retained head is safe, a raised error would make a committed append look failed)."""
        if self.pending is None:
            return
        signed, self.pending = self.pending, None
        try:
            self.notary.heads.save(self.ledger_id, self.session_id, signed, sealed=self.sealed)
        except (OSError, FlightlogError):
            log.exception("could not retain the head of %s at size %d", self.session_id, signed.size)


# ─── verification with checkpoints ────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class WitnessedHead:
    """A checkpoint a witness cosigned, already verified (log signature and cosignature).

    Attributes:
        checkpoint: The log-signed checkpoint.
        witness: The witness's key name (for messages).
        timestamp: The cosignature's time, POSIX seconds (C2SP tlog-cosignature).
        online: True when the witness itself answered (not a copy stored in the database).
    """

    checkpoint: SignedCheckpoint
    witness: str
    timestamp: int
    online: bool = False

    @property
    def size(self) -> int:
        """Entries covered."""
        return self.checkpoint.size

    @property
    def root(self) -> bytes:
        """Root cosigned."""
        return self.checkpoint.root


@dataclass(frozen=True)
class IndexedHead:
    """A checkpoint of the session that the ledger-wide index log holds, under a verified signed index
    checkpoint (:func:`flightlog.integrity.indexlog.indexed_heads`).

    Attributes:
        checkpoint: The session checkpoint's text, parsed (the leaf; its own signature is not in the leaf,
            the index checkpoint's signature covers it).
        leaf: Its leaf index in the index log.
    """

    checkpoint: Checkpoint
    leaf: int

    @property
    def size(self) -> int:
        """Events covered."""
        return self.checkpoint.size

    @property
    def root(self) -> bytes:
        """Root signed over them."""
        return self.checkpoint.root


@dataclass
class ArtifactRef:
    """A salted (erasable) artifact referenced by a session's events.

    Attributes:
        handle: ``salted:sha256:<hex>``.
        seq: The first event referencing it.
        state: ``present``, ``erased``, ``missing`` or ``unchecked`` (no store to look in).
        detail: Where the erasure is ledgered, or what is wrong.
    """

    handle: str
    seq: int
    state: str = "unchecked"
    detail: str = ""

    @property
    def digest(self) -> str:
        """The salted digest, hex."""
        return self.handle.removeprefix(SALTED_PREFIX)


@dataclass
class AuditReport:
    """Outcome of :func:`audit_session`: the chain and tree check plus what the checkpoints prove.

    Attributes:
        session_id: The session.
        events: Rows read.
        bytes: Stored event bytes read.
        head: Chain hash of the last row.
        root: RFC 9162 root over every row, hex.
        divergences: Every problem found, by seq (empty when intact).
        checkpoints: Signed checkpoints that verified and match the rows.
        anchored: Events covered by the largest such checkpoint (0 when none).
        sealed: The last event is a valid seal and a verified checkpoint covers it.
        seal_status: The status in the seal, when sealed.
        retained: Size of the retained head (None when there is none or no head store was given).
        ledger_id: The database's ledger id (None when it has none).
        witnessed: Largest size a trusted witness cosigned (None when no cosigned head was found).
        witnessed_by: That witness's key name.
        indexed: Largest size of this session's checkpoints the signed index log holds (None: none, or
            the index log was not consulted).
        indexed_leaf: That checkpoint's leaf index in the index log.
        index_divergences: Problems of the index log itself (by leaf index), when it was consulted for
            this session alone: a damaged index log cannot vouch for the session, so they count against
            :attr:`ok` (``audit --all`` reports them once, on the index log's own row).
        notes: Things not checked and why (an unreachable witness), one line each.
        artifacts: Salted artifacts the events reference, by first seq.
        retired: How the store was retired (``moved to <url> at <time>``, :mod:`flightlog.integrity.retirement`),
            None for a live store.
    """

    session_id: str
    events: int = 0
    bytes: int = 0
    head: str = GENESIS
    root: str = ""
    divergences: list[Divergence] = field(default_factory=list)
    checkpoints: int = 0
    anchored: int = 0
    sealed: bool = False
    seal_status: str | None = None
    retained: int | None = None
    ledger_id: str | None = None
    witnessed: int | None = None
    witnessed_by: str | None = None
    indexed: int | None = None
    indexed_leaf: int | None = None
    index_divergences: list[Divergence] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    artifacts: list[ArtifactRef] = field(default_factory=list)
    retired: str | None = None
    tree: CompactRange = field(default_factory=CompactRange, repr=False)
    latest: SignedCheckpoint | None = field(default=None, repr=False)
    seal_seq: int | None = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        """True when nothing diverges, in the session or in the index log consulted for it (an unanchored
        tail is reported, not a divergence)."""
        return not self.divergences and not self.index_divergences

    @property
    def unanchored(self) -> tuple[int, int] | None:
        """``(first, last)`` seqs after the last verified checkpoint, or None when all are anchored."""
        return (self.anchored, self.events - 1) if self.anchored < self.events else None

    def state(self) -> str:
        """``sealed``, ``open`` or ``empty``."""
        return "sealed" if self.sealed else ("open" if self.events else "empty")

    def summary(self) -> str:
        """One line: state, anchoring, unanchored tail, retained head, witness, erased artifacts."""
        parts = [self.state() + (f" ({self.seal_status})" if self.seal_status else "")]
        parts.append(f"{self.checkpoints} signed checkpoint(s), anchored through {self.anchored} event(s)")
        tail = self.unanchored
        if tail is not None:
            parts.append(f"unanchored tail: seqs {tail[0]}..{tail[1]}")
        parts.append(
            "no retained head" if self.retained is None else f"retained head at size {self.retained}"
        )
        if self.witnessed is not None:
            parts.append(f"witnessed up to size {self.witnessed} by {self.witnessed_by}")
        if self.indexed is not None:
            parts.append(f"in the index log up to size {self.indexed}")
        erased = [a for a in self.artifacts if a.state == "erased"]
        if self.artifacts:
            parts.append(f"{len(self.artifacts)} salted artifact(s), {len(erased)} erased")
        if self.retired is not None:
            parts.append(f"read-only: {self.retired}")
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        """Stable JSON fields for ``--json`` output."""
        tail = self.unanchored
        return {
            "session_id": self.session_id,
            "ok": self.ok,
            "state": self.state(),
            "seal_status": self.seal_status,
            "events": self.events,
            "bytes": self.bytes,
            "head": self.head,
            "root": self.root,
            "checkpoints": self.checkpoints,
            "anchored": self.anchored,
            "unanchored": None if tail is None else {"first": tail[0], "last": tail[1]},
            "retained": self.retained,
            "witnessed": self.witnessed,
            "witnessed_by": self.witnessed_by,
            "indexed": self.indexed,
            "ledger_id": self.ledger_id,
            "retired": self.retired,
            "artifacts": [
                {"handle": a.handle, "seq": a.seq, "state": a.state, "detail": a.detail}
                for a in self.artifacts
            ],
            "notes": list(self.notes),
            "divergences": [{"seq": d.seq, "reason": d.reason, "detail": d.detail} for d in self.divergences],
            "index_divergences": [
                {"leaf": d.seq, "reason": d.reason, "detail": d.detail} for d in self.index_divergences
            ],
        }


@dataclass
class _Seal:
    seq: int
    payload: Any
    root_before: str


@dataclass
class _Tee:
    """Folds leaves while rows stream into ``verify_rows``; keeps roots and hashes at wanted sizes, seals
    and salted artifact references."""

    wanted: set[int]
    tree: CompactRange = field(default_factory=CompactRange)
    roots: dict[int, tuple[bytes, str]] = field(default_factory=dict)
    seals: list[_Seal] = field(default_factory=list)
    salted: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if 0 in self.wanted:
            self.roots[0] = (self.tree.root(), GENESIS)

    def rows(self, rows: Iterable[StoredEvent]) -> Iterator[StoredEvent]:
        """Pass rows to ``verify_rows(..., tree=self.tree)``, which folds each leaf into :attr:`tree` (one
        leaf hash per row); when a row is asked for, the tree holds every row before it."""
        last = GENESIS
        for row in rows:
            self._snapshot(last)
            data = row.event_bytes
            if _SEAL_MARK in data:
                self._seal(row)
            if b"salted:sha256:" in data:
                for match in _SALTED.finditer(data):
                    self.salted.setdefault(match.group(1).decode("ascii"), row.seq)
            last = row.hash
            yield row
        self._snapshot(last)

    def _snapshot(self, last_hash: str) -> None:
        """Keep the root and chain hash when the tree has reached a wanted size."""
        size = self.tree.size
        if size in self.wanted and size not in self.roots:
            self.roots[size] = (self.tree.root(), last_hash)

    def _seal(self, row: StoredEvent) -> None:
        payload = _seal_payload(row)
        if payload is not None:
            self.seals.append(_Seal(row.seq, payload, self.tree.root().hex()))


def _seal_payload(row: StoredEvent) -> Any:
    from ..encoding import decode_stored
    from ..events import Custom

    try:
        event = decode_stored(row.event_bytes, seq=row.seq)
    except EventDecodeError:
        return None
    if isinstance(event, Custom) and event.custom_kind == SEAL_KIND:
        return event.payload
    return None


def _ledger_id(store: Store) -> str | None:
    try:
        return store.ledger_id()
    except (StoreError, NotImplementedError):
        return None


def _open_retained(
    heads: HeadStore | None, ledger_id: str | None, session_id: str, keyring: Keyring
) -> tuple[SignedCheckpoint | None, Divergence | None]:
    if heads is None or ledger_id is None:
        return None, None
    try:
        head = heads.load(ledger_id, session_id)
        if head is None:
            return None, None
        return open_checkpoint(head.note, keyring, origin=origin_for(ledger_id, session_id)), None
    except (NoteError, StoreError) as exc:
        return None, Divergence(0, "bad_checkpoint", f"retained head: {exc}")


def audit_session(
    store: Store,
    session_id: str,
    *,
    keyring: Keyring | None = None,
    heads: HeadStore | None = None,
    decode: bool = True,
    witnessed: Sequence[WitnessedHead] = (),
    retired: RetirementCheck | Literal["load"] | None = "load",
    indexed: Sequence[IndexedHead] = (),
) -> AuditReport:
    """Stream-verify a session's chain and tree, its signed checkpoints, seal, retained, witnessed and
    indexed heads.

    Everything :func:`flightlog.recorder.verify_session` checks, plus: every stored checkpoint's signature
    (key valid at its time, right origin) and that its root and chain hash match the rows; the seal; that
    the database is not older than, nor inconsistent with, the retained head, any head a witness
    cosigned or any checkpoint of the session the signed index log holds; and the state of every salted
    artifact the events reference. Reads every row once (O(n)
    hashing, O(log n) memory for the tree, plus one small record per checkpoint).

    Args:
        store: The store.
        session_id: The session (exact id).
        keyring: Trusted keys (default :func:`~flightlog.integrity.keys.load_keyring`).
        heads: Retained heads, or None to skip that check.
        decode: Also decode every event (report ``undecodable`` ones).
        witnessed: Heads a trusted witness cosigned, already verified
            (:func:`flightlog.integrity.witness.witnessed_heads`).
        retired: The store's retirement (:func:`flightlog.integrity.retirement.load_retirement`, loaded when
            ``"load"``; pass it when checking many sessions). On a retired store, heads beyond the rows it
            held when retired are ``stale_copy``, not ``rollback``/``stale_head`` (module
            :mod:`flightlog.integrity.retirement`); rows that differ from what it held are ``retired_mismatch``.
        indexed: The session's checkpoints the signed index log holds, already authenticated
            (:func:`flightlog.integrity.indexlog.indexed_heads`): with the retained head deleted, they still catch a
            re-chained or rolled-back session. :func:`flightlog.integrity.audit.require_intact` passes them.

    Raises:
        SessionNotFound: no such session.

    Source: RFC 9162 §2.1.1 (tree head); C2SP tlog-checkpoint, signed-note and tlog-cosignature.
    """
    keyring = load_keyring() if keyring is None else keyring
    record = store.get_session(session_id)
    ledger_id = _ledger_id(store)
    retained, problem = _open_retained(heads, ledger_id, session_id, keyring)
    if retired == "load":
        from .retirement import load_retirement  # local: retirement builds on this module

        retired = load_retirement(store, keyring)
    pin, as_retired, found = _retired_pin(retired, session_id)
    report = audit_rows(
        session_id,
        store.read_events(session_id),
        store.checkpoints(session_id),
        keyring=keyring,
        ledger_id=ledger_id,
        expected_head=(record.head_seq, record.head_hash) if record.head_seq >= 0 else None,
        merkle_root=record.merkle_root or None,
        retained=retained,
        witnessed=witnessed,
        indexed=indexed,
        decode=decode,
        extra=([problem] if problem else []) + found,
        pin=pin,
        retired_as=as_retired,
    )
    if retired is not None:
        report.retired = retired.describe()
        if pin is not None and not pin.matches(report.events, report.root):
            report.divergences.append(
                Divergence(
                    min(report.events, pin.size),
                    "retired_mismatch",
                    f"the signed record of this database's retirement ({as_retired}) pins {pin.size} events "
                    f"(root {pin.root.hex()[:16]}), the database holds {report.events}: changed after it",
                )
            )
            report.divergences.sort(key=lambda d: d.seq)
    if report.artifacts:
        from .erasure import check_artifacts  # local: erasure builds on the recorder, which imports us

        check_artifacts(store, report)
    return report


def _retired_pin(
    retired: RetirementCheck | None, session_id: str
) -> tuple[Pin | None, str, list[Divergence]]:
    """The session's pin in a verified retirement record, the record's phrase, and what is wrong."""
    if retired is None:
        return None, "", []
    if retired.record is None:
        return None, "", [Divergence(0, "bad_retirement", retired.problem or "retirement record unusable")]
    phrase = retired.record.describe()
    pin = retired.record.sessions.get(session_id)
    if pin is None:
        detail = (
            f"the signed record of this database's retirement ({phrase}) does not list this session: "
            "recorded after it"
        )
        return None, phrase, [Divergence(0, "retired_mismatch", detail)]
    return pin, phrase, []


def audit_rows(
    session_id: str,
    rows: Iterable[StoredEvent],
    checkpoints: Iterable[CheckpointRecord],
    *,
    keyring: Keyring,
    ledger_id: str | None,
    expected_head: tuple[int, str] | None = None,
    merkle_root: str | None = None,
    retained: SignedCheckpoint | None = None,
    witnessed: Sequence[WitnessedHead] = (),
    indexed: Sequence[IndexedHead] = (),
    decode: bool = True,
    extra: Sequence[Divergence] = (),
    pin: Pin | None = None,
    retired_as: str = "",
) -> AuditReport:
    """The store-free core of :func:`audit_session`: rows and checkpoint records from anywhere (a store,
    an offline bundle), one pass.

    Args:
        session_id: The session.
        rows: Its rows in ascending seq (streamed).
        checkpoints: Its stored checkpoint records (``size``, ``root`` hex and the signed note ``body``).
        keyring: Trusted log keys.
        ledger_id: The ledger the origins must name (None: every checkpoint is ``bad_checkpoint``).
        expected_head: ``(seq, hash)`` recorded elsewhere (the session row), or None.
        merkle_root: The tree head recorded elsewhere (hex), or None.
        retained: The verified retained head, or None.
        witnessed: Verified witness-cosigned heads.
        indexed: The session's checkpoints held by the verified index log.
        decode: Also decode every event.
        extra: Divergences found before (e.g. an unreadable retained head), merged in seq order.
        pin: What a retired store held of this session (verified retirement record), or None.
        retired_as: How it was retired (the record's phrase), for the ``stale_copy`` detail.

    Returns:
        The report; salted artifacts are listed as ``unchecked`` (the caller knows where to look).
    """
    report = AuditReport(session_id, ledger_id=ledger_id)
    report.divergences.extend(extra)
    origin = origin_for(ledger_id, session_id) if ledger_id else None
    signed = _open_stored(checkpoints, keyring, origin, report.divergences)
    wanted = {s.size for s in signed} | {h.size for h in witnessed} | {h.size for h in indexed}
    tee = _Tee(wanted | ({retained.size} if retained else set()))
    result = verify_rows(
        session_id, tee.rows(rows), decode=decode, expected_head=expected_head, tree=tee.tree
    )
    report.events, report.bytes, report.head, report.root = (
        result.events,
        result.bytes,
        result.head,
        result.root,
    )
    report.divergences.extend(result.divergences)
    if result.ok and merkle_root and result.events and merkle_root != result.root:
        report.divergences.append(
            Divergence(result.events - 1, "head_mismatch", "recorded tree head differs from the stored rows")
        )
    report.tree = tee.tree
    _match_checkpoints(report, signed, tee)
    stale = None
    if pin is not None:
        from .retirement import StaleCopy  # local: retirement builds on this module

        stale = StaleCopy(pin, retired_as)
    if retained is not None:
        report.retained = retained.size
        _match_head(report, retained, tee, "the retained head", stale)
    for head in sorted(witnessed, key=lambda h: h.size):
        if report.witnessed is None or head.size >= report.witnessed:
            report.witnessed, report.witnessed_by = head.size, head.witness
        _match_head(report, head.checkpoint, tee, f"the head witness {head.witness} cosigned", stale)
    _match_indexed(report, indexed, tee, stale)
    _match_seal(report, tee)
    report.artifacts = [
        ArtifactRef(SALTED_PREFIX + d, seq) for d, seq in sorted(tee.salted.items(), key=lambda i: i[1])
    ]
    report.divergences.sort(key=lambda d: d.seq)
    return report


def _open_stored(
    records: Iterable[CheckpointRecord], keyring: Keyring, origin: str | None, bad: list[Divergence]
) -> list[SignedCheckpoint]:
    out = []
    for record in records:
        where = max(record.size - 1, 0)
        try:
            if origin is None:
                raise NoteError(reason="the database has no ledger id to check the origin against")
            signed = open_checkpoint(record.body, keyring, origin=origin)
        except NoteError as exc:
            bad.append(
                Divergence(where, "bad_checkpoint", f"checkpoint {record.checkpoint_id}: {exc.reason}")
            )
            continue
        if (signed.size, signed.root.hex()) != (record.size, record.root):
            bad.append(
                Divergence(
                    where,
                    "bad_checkpoint",
                    f"checkpoint {record.checkpoint_id}: columns differ from its note",
                )
            )
            continue
        out.append(signed)
    return out


def _match_checkpoints(report: AuditReport, signed: list[SignedCheckpoint], tee: _Tee) -> None:
    for cp in sorted(signed, key=lambda s: s.size):
        if cp.size > report.events:
            report.divergences.append(
                Divergence(
                    report.events,
                    "truncated",
                    f"a signed checkpoint covers {cp.size} events, the database holds {report.events}",
                )
            )
            continue
        root, chain = tee.roots[cp.size]
        if root != cp.root or (cp.checkpoint.chain is not None and cp.checkpoint.chain != chain):
            what = "root" if root != cp.root else "chain hash"
            report.divergences.append(
                Divergence(
                    cp.size - 1,
                    "checkpoint_mismatch",
                    f"signed {what} at size {cp.size} differs from the rows",
                )
            )
            continue
        report.checkpoints += 1
        if cp.size >= report.anchored:
            report.anchored, report.latest = cp.size, cp


def _match_indexed(
    report: AuditReport, indexed: Sequence[IndexedHead], tee: _Tee, stale: StaleCopy | None = None
) -> None:
    """Compare the session's checkpoints the signed index log holds with the rows: the largest like a
    retained head (``rollback``, ``fork``, ``stale_head``), every smaller one for a ``fork`` (so the report
    names the earliest signed size the rows no longer match)."""
    ordered = sorted(indexed, key=lambda h: (h.size, h.leaf), reverse=True)
    for n, head in enumerate(ordered):
        what = f"its checkpoint in the signed index log (leaf {head.leaf})"
        if n == 0:
            report.indexed, report.indexed_leaf = head.size, head.leaf
            _match_head(report, head, tee, what, stale)
        elif head.size and head.size <= report.events and tee.roots[head.size][0] != head.root:
            report.divergences.append(
                Divergence(head.size - 1, "fork", f"the stored rows disagree with {what} at size {head.size}")
            )


def _match_head(
    report: AuditReport,
    head: SignedCheckpoint | IndexedHead,
    tee: _Tee,
    what: str,
    stale: StaleCopy | None = None,
) -> None:
    """Compare a head kept outside the database (retained, cosigned by a witness, or held by the signed
    index log) with the rows; on a retired store, a head beyond the rows it held when retired is a stale
    copy (:mod:`flightlog.integrity.retirement`)."""
    size = head.size
    if stale is not None and not stale.explains(size, report.events, report.root):
        stale = None
    if size > report.events:
        report.divergences.append(
            Divergence(report.events, "stale_copy", stale.detail(what, size, report.events, "events", False))
            if stale is not None
            else Divergence(
                report.events,
                "rollback",
                f"{what} covers {size} events, the database holds {report.events}: "
                "rolled back to an earlier copy or truncated",
            )
        )
    elif size and tee.roots[size][0] != head.root:
        report.divergences.append(
            Divergence(size - 1, "fork", f"the stored rows disagree with {what} at size {size}")
        )
    elif report.anchored < size:
        report.divergences.append(
            Divergence(report.anchored, "stale_copy", stale.detail(what, size, report.events, "events", True))
            if stale is not None
            else Divergence(
                report.anchored,
                "stale_head",
                f"the database's latest signed checkpoint covers {report.anchored} events, older than "
                f"{what} at size {size}: newer checkpoints were removed or an old head replayed",
            )
        )


def _match_seal(report: AuditReport, tee: _Tee) -> None:
    for seal in tee.seals:
        if seal.seq != report.events - 1:
            report.divergences.append(
                Divergence(seal.seq + 1, "after_seal", f"events after the seal at seq {seal.seq}")
            )
            continue
        payload = seal.payload if isinstance(seal.payload, dict) else {}
        if payload.get("size") != seal.seq or payload.get("root") != seal.root_before:
            report.divergences.append(
                Divergence(
                    seal.seq, "bad_seal", "the seal's size or root does not match the events before it"
                )
            )
            continue
        report.seal_seq = seal.seq
        if report.anchored == report.events:
            report.sealed, report.seal_status = True, str(payload.get("status", ""))


def missing_sessions(store: Store, heads: HeadStore) -> list[RetainedHead]:
    """Sessions with a retained head in this ledger but no row in the database: deleted wholesale.

    Returns:
        Their retained heads, by file name (empty when the database has no ledger id).
    """
    ledger_id = _ledger_id(store)
    if ledger_id is None:
        return []
    present = {s.session_id for s in store.list_sessions()}
    return [head for head in heads.sessions(ledger_id) if head.session_id not in present]


# ─── resume ───────────────────────────────────────────────────────────────────────────────────


@dataclass
class Anchor:
    """Where a resumed recorder continues: next seq, chain head, tree, and its checkpoint state."""

    size: int
    head: str
    tree: CompactRange
    state: SessionNotary


def _refuse(session_id: str, divergences: list[Divergence]) -> LedgerIntegrityError:
    first = divergences[0]
    return LedgerIntegrityError(
        session_id=session_id,
        seq=first.seq,
        reason=f"{first.reason}: {first.detail}" if first.detail else first.reason,
        divergences=divergences,
    )


def resume(store: Store, session_id: str, notary: Notary, *, full: bool = True) -> Anchor:
    """Verify a session for resuming under ``notary`` and return where to continue.

    Args:
        store: The store.
        session_id: The session (exact id).
        notary: Keys and retained heads.
        full: Verify every row (default). False: the O(log n) + tail path described in the module
            docstring; falls back to full when the session has no checkpoint or no stored frontier.

    Raises:
        SessionNotFound: no such session.
        LedgerIntegrityError: empty ledger, or any divergence (names the first seq and reason).
    """
    if not full:
        anchor = _cheap_resume(store, session_id, notary)
        if anchor is not None:
            return anchor
    report = audit_session(store, session_id, keyring=notary.keyring, heads=notary.heads)
    if report.events == 0:
        raise LedgerIntegrityError(session_id=session_id, reason="session has no durable ledger to resume")
    if not report.ok:
        raise _refuse(session_id, report.divergences)
    if report.ledger_id is None:
        raise LedgerIntegrityError(session_id=session_id, reason="the database has no ledger id")
    state = SessionNotary(notary, report.ledger_id, session_id, report.latest, report.seal_seq is not None)
    _catch_up(state, report.retained)
    return Anchor(report.events, report.head, report.tree, state)


def _catch_up(state: SessionNotary, retained: int | None) -> None:
    """Retain the database's latest checkpoint when the head file lags it (e.g. a crash before writing)."""
    if state.latest is not None and (retained is None or retained < state.latest.size):
        state.pending = state.latest
        state.retain()


def _cheap_resume(store: Store, session_id: str, notary: Notary) -> Anchor | None:
    record = store.get_session(session_id)
    ledger_id = store.ledger_id()
    origin = origin_for(ledger_id, session_id)
    latest_record = store.latest_checkpoint(session_id)
    if latest_record is None:
        return None
    where = max(latest_record.size - 1, 0)
    try:
        latest = open_checkpoint(latest_record.body, notary.keyring, origin=origin)
    except NoteError as exc:
        raise _refuse(
            session_id, [Divergence(where, "bad_checkpoint", f"latest checkpoint: {exc.reason}")]
        ) from exc
    tree = _stored_tree(store, latest_record.checkpoint_id, latest.size, latest.root)
    if tree is None:
        return None
    retained, problem = _open_retained(notary.heads, ledger_id, session_id, notary.keyring)
    if problem is not None:
        raise _refuse(session_id, [problem])
    stored = record.head_seq + 1
    if retained is not None and not _cheap_consistency(store, session_id, retained, latest, stored):
        return None
    if latest.size > stored:
        raise _refuse(
            session_id,
            [
                Divergence(
                    stored,
                    "truncated",
                    f"a signed checkpoint covers {latest.size} events, the session {stored}",
                )
            ],
        )
    head, tail_last = _cheap_tail(store, session_id, latest, tree)
    if (record.head_seq, record.head_hash, record.merkle_root) != (tree.size - 1, head, tree.root().hex()):
        raise _refuse(
            session_id,
            [
                Divergence(
                    tree.size - 1, "head_mismatch", "the session row's head differs from the stored rows"
                )
            ],
        )
    state = SessionNotary(notary, ledger_id, session_id, latest, _seal_payload(tail_last) is not None)
    _catch_up(state, retained.size if retained else None)
    return Anchor(tree.size, head, tree, state)


def _stored_tree(store: Store, checkpoint_id: int, size: int, root: bytes) -> CompactRange | None:
    """The compact range kept with a checkpoint, if present and matching its signed root.

    The frontier is a cache, not evidence: a missing or wrong one sends resume to the full path, which
    does not use it and decides from the rows themselves.
    """
    blob = store.checkpoint_frontier(checkpoint_id)
    try:
        tree = decode_frontier(size, blob) if blob is not None else None
    except ValueError:
        return None
    return tree if tree is not None and tree.root() == root else None


def _cheap_consistency(
    store: Store, session_id: str, retained: SignedCheckpoint, latest: SignedCheckpoint, stored: int
) -> bool:
    """Is the retained head a prefix of the latest checkpoint? O(log n) + the events between them.

    Raises on a definite answer against (rollback, stale head, two signed heads of one size that
    differ); returns False when the stored frontiers cannot settle it, so resume verifies in full.
    """
    size = retained.size
    if size > stored:
        raise _refuse(
            session_id,
            [
                Divergence(
                    stored,
                    "rollback",
                    f"the retained head covers {size} events, the database holds {stored}: "
                    "rolled back to an earlier copy or truncated",
                )
            ],
        )
    if size > latest.size:
        raise _refuse(
            session_id,
            [
                Divergence(
                    latest.size,
                    "stale_head",
                    f"the database's latest signed checkpoint covers {latest.size} events, older than the "
                    f"retained head at size {size}: newer checkpoints were removed or an old head replayed",
                )
            ],
        )
    if size == latest.size:
        if retained.root != latest.root:
            raise _refuse(
                session_id, [Divergence(size - 1, "fork", f"two signed heads at size {size} differ")]
            )
        return True
    at = store.latest_checkpoint(session_id, max_size=size)
    tree = _stored_tree(store, at.checkpoint_id, size, retained.root) if at and at.size == size else None
    if tree is None:
        return False
    for row in store.read_events(session_id, start=size, stop=latest.size):
        tree.append(leaf_hash(row.event_bytes))
    return tree.size == latest.size and tree.root() == latest.root


def _cheap_tail(
    store: Store, session_id: str, latest: SignedCheckpoint, tree: CompactRange
) -> tuple[str, StoredEvent]:
    """Verify the last anchored row's chain hash and every row after it, folding them into ``tree``."""
    from ..encoding import decode_stored

    size = latest.size
    last = next(iter(store.read_events(session_id, start=size - 1, stop=size)), None)
    if last is None:
        raise _refuse(
            session_id,
            [Divergence(size - 1, "truncated", f"the latest signed checkpoint covers {size} events")],
        )
    bad: list[Divergence] = []
    if chain_hash(last.prev_hash, last.seq, last.event_bytes) != last.hash or (
        latest.checkpoint.chain is not None and latest.checkpoint.chain != last.hash
    ):
        bad.append(
            Divergence(size - 1, "checkpoint_mismatch", "chain hash differs from the signed checkpoint")
        )
    prev, expected = last.hash, size
    for row in store.read_events(session_id, start=size):
        if row.seq != expected:
            bad.append(Divergence(expected, "gap", f"seqs {expected}..{row.seq - 1} missing"))
        if row.prev_hash != prev:
            bad.append(Divergence(row.seq, "broken_link", "prev_hash does not match the previous row's hash"))
        if chain_hash(row.prev_hash, row.seq, row.event_bytes) != row.hash:
            bad.append(Divergence(row.seq, "hash_mismatch", "stored hash does not match the stored bytes"))
        try:
            decode_stored(row.event_bytes, seq=row.seq)
        except EventDecodeError as exc:
            bad.append(Divergence(row.seq, "undecodable", exc.reason))
        tree.append(leaf_hash(row.event_bytes))
        prev, expected, last = row.hash, row.seq + 1, row
    if bad:
        raise _refuse(session_id, bad)
    return prev, last
