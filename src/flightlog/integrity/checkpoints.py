"""Signed checkpoints (C2SP ``tlog-checkpoint``): the text format, parsing, and opening one against keys.

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

Who signs them, and when, is :mod:`flightlog.integrity.notary`; where their heads are kept outside the
database, :mod:`flightlog.integrity.heads`; how a session is verified against them,
:mod:`flightlog.integrity.verify`. The index log's origin (``flightlog.local/<ledger id>/_/index``) is
:func:`flightlog.integrity.indexlog.index_origin`.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol
from urllib.parse import quote

from ..errors import Divergence
from ..ledger import CompactRange
from .notes import NoteError, open_note_key, parse_note

if TYPE_CHECKING:
    from .keys import Keyring, TrustedKey

__all__ = [
    "ORIGIN_HOST",
    "Checkpoint",
    "SignedCheckpoint",
    "StoredCheckpoint",
    "decode_frontier",
    "encode_frontier",
    "open_checkpoint",
    "open_stored_checkpoints",
    "origin_for",
]

ORIGIN_HOST = "flightlog.local"
"""First component of every checkpoint origin."""


_DECIMAL = re.compile(r"0|[1-9][0-9]*")
_HEX64 = re.compile(r"[0-9a-f]{64}")


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


class StoredCheckpoint(Protocol):
    """A stored checkpoint row (a session's or the index log's): its id, the tree size and root (hex) in
    their own columns, and the signed note ``body``."""

    @property
    def checkpoint_id(self) -> int:
        """The row's id (named in divergences)."""
        ...

    @property
    def size(self) -> int:
        """Tree size the row says the note covers."""
        ...

    @property
    def root(self) -> str:
        """Tree root (hex) the row says the note signs."""
        ...

    @property
    def body(self) -> str:
        """The signed note's text."""
        ...


def open_stored_checkpoints(
    records: Iterable[StoredCheckpoint],
    keyring: Keyring,
    origin: str | None,
    bad: list[Divergence],
    *,
    label: str = "checkpoint",
) -> list[SignedCheckpoint]:
    """The stored checkpoints whose notes open under ``keyring`` and ``origin`` and agree with their own
    columns; each other one appends a ``bad_checkpoint`` divergence at seq ``size - 1`` to ``bad``, named
    ``"<label> <checkpoint_id>"``. ``origin`` None (a database without a ledger id) refuses every one."""
    out = []
    for record in records:
        where = max(record.size - 1, 0)
        try:
            if origin is None:
                raise NoteError(reason="the database has no ledger id to check the origin against")
            signed = open_checkpoint(record.body, keyring, origin=origin)
        except NoteError as exc:
            bad.append(Divergence(where, "bad_checkpoint", f"{label} {record.checkpoint_id}: {exc.reason}"))
            continue
        if (signed.size, signed.root.hex()) != (record.size, record.root):
            bad.append(
                Divergence(
                    where, "bad_checkpoint", f"{label} {record.checkpoint_id}: columns differ from its note"
                )
            )
            continue
        out.append(signed)
    return out


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
    return SignedCheckpoint(checkpoint, data, open_note_key(data, keyring, checkpoint.time_ms)[1])


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
