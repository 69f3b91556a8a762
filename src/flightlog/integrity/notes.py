"""C2SP signed notes: sign, parse and open (verify against trusted keys) a text with signature lines.

A signed note is a UTF-8 text ending in a newline, a blank line, then one line per signature,
``— <key name> <base64(key ID || signature)>``. Key IDs, key text and the keys themselves live in
:mod:`flightlog.integrity.keys` (above this module: it only calls the signer and keyring it is given).
Checkpoints (:mod:`flightlog.integrity.checkpoints`), witness cosignatures, key endorsements and
retirement records are all signed notes.

Source: C2SP signed-note ("Format", "Signatures", "Ed25519 signatures").
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import (
    FlightlogError,
)

if TYPE_CHECKING:
    from .keys import Keyring, LogSigner, TrustedKey

__all__ = [
    "MAX_SIGNATURES",
    "Note",
    "NoteError",
    "NoteSignature",
    "open_note",
    "open_note_key",
    "parse_note",
    "sign_note",
    "valid_key_name",
]

MAX_SIGNATURES = 100
"""Signature lines accepted per note (C2SP signed-note: at least 16; Go's sumdb/note caps at 100)."""


_SIG_PREFIX = "\u2014 "  # em dash, space (C2SP signed-note "Format")
_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f]")  # C0 controls but newline (C2SP signed-note, "Format")


class NoteError(FlightlogError, ValueError):
    """A signed note or checkpoint is malformed or does not verify (``reason`` says how)."""

    reason: str

    def __init__(self, *, reason: str) -> None:
        super().__init__(f"signed note: {reason}", reason=reason)


def valid_key_name(name: str) -> bool:
    """C2SP signed-note: a key name is non-empty and holds no Unicode space and no ``+``."""
    return bool(name) and "+" not in name and not any(c.isspace() for c in name) and name.isprintable()


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
    return open_note_key(data, keyring, at_ms)[0]


def open_note_key(data: str, keyring: Keyring, at_ms: int | None) -> tuple[Note, TrustedKey]:
    """:func:`open_note`, also returning the trusted key that verified the note (raises as it does)."""
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
