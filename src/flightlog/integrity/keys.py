"""Log signing keys: C2SP signed-note key text, the trusted-key manifest, rotation.

Key text (the formats of golang.org/x/mod/sumdb/note, which C2SP ``signed-note`` standardises)::

    signer key    PRIVATE+KEY+<name>+<key id, 8 lowercase hex>+<base64(0x01 || 32-byte Ed25519 seed)>
    verifier key  <name>+<key id, 8 lowercase hex>+<base64(0x01 || 32-byte Ed25519 public key)>

with ``key ID = SHA-256(name || 0x0A || 0x01 || public key)[:4]`` read as a big-endian uint32 (C2SP
signed-note, "Signatures" and "Ed25519 signatures"; ``0x01`` is the Ed25519 signature type). Key names are
non-empty and hold no Unicode space and no ``+``.

Where the signing key comes from (:func:`load_signer`), first match wins:

1. ``$FLIGHTLOG_LOG_KEY``: signer key text (for servers and CI; trusted for verification in that
   process too, for all time unless the manifest lists it with a window).
2. The active key of the manifest in the key directory: its private key file, which must not be readable
   by group or others.
3. Otherwise a new key ``flightlog.local/log`` is generated, its private key written to
   ``log-<key id>.key`` with mode 0600 (directory 0700), and recorded in the manifest.

Key directory: ``$FLIGHTLOG_KEY_DIR``, else ``platformdirs.user_config_dir("flightlog")``. Keys are never
stored in the database: whoever can rewrite the database must not be able to re-sign it.

Manifest ``<key dir>/keys.json`` (the verifier's trust anchor)::

    {"format": "flightlog-keys/1",
     "keys": [{"vkey": "<verifier key>", "not_before_ms": 0, "not_after_ms": 1767225600000,
               "endorsement": null, "pinned": false, "private_key_file": "log-c74f20a3.key"},
              {"vkey": "<verifier key>", "not_before_ms": 1767225600000, "not_after_ms": null,
               "endorsement": "<signed note, see below>", "pinned": false,
               "private_key_file": "log-5a1e0b7d.key"}]}

A key is valid for checkpoints whose time (ms) lies in ``[not_before_ms, not_after_ms)`` (``null``: open).
The first entry is the root of trust; every later entry either carries an *endorsement* by an earlier
trusted key or is ``pinned`` (trusted explicitly, e.g. a verifier key of another machine added with
``flightlog keys trust``). An endorsement is a signed note whose text is::

    flightlog key endorsement
    <new verifier key>
    <new key's not_before_ms>

signed by the key being retired (:func:`rotate_key`), so a party that pinned only the first key can follow
the rotations. An entry whose endorsement does not verify makes the whole manifest refused.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from ..errors import FlightlogError
from .notes import NoteError, open_note, sign_note, valid_key_name

__all__ = [
    "DEFAULT_KEY_NAME",
    "ENDORSEMENT_HEADER",
    "ENV_KEY",
    "ENV_KEY_DIR",
    "SIG_ED25519",
    "KeyManifestError",
    "Keyring",
    "LogSigner",
    "TrustedKey",
    "VerifierKey",
    "key_dir",
    "key_id",
    "load_keyring",
    "load_signer",
    "parse_typed_key",
    "rotate_key",
    "trust_key",
    "trusted_by_endorsement",
    "valid_key_name",
]

SIG_ED25519 = 0x01
"""C2SP signed-note signature type byte of Ed25519."""

ENV_KEY = "FLIGHTLOG_LOG_KEY"
"""Environment variable holding a signer key text (``PRIVATE+KEY+...``)."""

ENV_KEY_DIR = "FLIGHTLOG_KEY_DIR"
"""Environment variable overriding the key directory (tests, containers)."""

DEFAULT_KEY_NAME = "flightlog.local/log"
"""Name of a generated key (a schema-less URL, as C2SP signed-note recommends)."""

ENDORSEMENT_HEADER = "flightlog key endorsement"
"""First line of a key endorsement note's text."""

MANIFEST = "keys.json"
_FORMAT = "flightlog-keys/1"
_HEX8 = re.compile(r"[0-9a-f]{8}")


class KeyManifestError(FlightlogError):
    """A key, key file or manifest is malformed, unsafe or untrusted; ``path`` may be empty (env key)."""

    path: str
    reason: str

    def __init__(self, *, path: str, reason: str) -> None:
        where = f"{path}: " if path else ""
        super().__init__(f"log key: {where}{reason}", path=path, reason=reason)


def now_ms() -> int:
    """Wall-clock epoch milliseconds."""
    return time.time_ns() // 1_000_000


def key_id(name: str, public_key: bytes, sig_type: int = SIG_ED25519) -> int:
    """C2SP signed-note key ID of an Ed25519 key.

    Args:
        name: The key name (UTF-8).
        public_key: The 32-byte RFC 8032 Ed25519 public key.
        sig_type: The signature type byte: 0x01 note signatures (default), 0x04 C2SP tlog-cosignature
            Ed25519 cosignatures (:mod:`flightlog.integrity.witness`).

    Returns:
        ``SHA-256(name || 0x0A || sig_type || public_key)[:4]`` as a big-endian uint32.

    Source: C2SP signed-note, "Ed25519 signatures"; C2SP tlog-cosignature, "Format".
    """
    digest = hashlib.sha256(name.encode("utf-8") + b"\n" + bytes([sig_type]) + public_key).digest()
    return int.from_bytes(digest[:4], "big")


def _b64decode(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError) as exc:
        raise KeyManifestError(path="", reason=f"{what} is not base64") from exc


def _split_key(text: str, parts: int, what: str) -> list[str]:
    # The base64 part may itself hold '+', so split a bounded number of times.
    fields = text.strip().split("+", parts - 1)
    if len(fields) != parts:
        raise KeyManifestError(path="", reason=f"{what} must have {parts} '+'-separated fields")
    return fields


def _typed_key(encoded: str, name: str, hex_id: str, what: str, sig_type: int = SIG_ED25519) -> bytes:
    if not valid_key_name(name):
        raise KeyManifestError(path="", reason=f"{what} has an invalid key name {name!r}")
    if not _HEX8.fullmatch(hex_id):
        raise KeyManifestError(path="", reason=f"{what} key id {hex_id!r} is not 8 lowercase hex digits")
    raw = _b64decode(encoded, what)
    if len(raw) != 33 or raw[0] != sig_type:
        raise KeyManifestError(path="", reason=f"{what} is not an Ed25519 key (0x{sig_type:02x} + 32 bytes)")
    return raw[1:]


def parse_typed_key(text: str, sig_type: int, *, private: bool = False) -> tuple[str, int, bytes]:
    """Split note key text of any Ed25519 signature type into (name, key ID, 32 key bytes).

    Args:
        text: ``<name>+<hex8>+<base64(type || key)>``, or with ``private`` the ``PRIVATE+KEY+`` form.
        sig_type: The type byte the key must carry (0x01 note signatures, 0x04 cosignatures).
        private: Parse the signer (seed) form.

    Returns:
        The name, the key ID as written (not yet checked against the key), and the key bytes.

    Raises:
        KeyManifestError: malformed text or another type byte.
    """
    if private:
        fields = _split_key(text, 5, "signer key")
        if fields[:2] != ["PRIVATE", "KEY"]:
            raise KeyManifestError(path="", reason="signer key must start with PRIVATE+KEY+")
        name, hex_id, encoded = fields[2:]
    else:
        name, hex_id, encoded = _split_key(text, 3, "verifier key")
    key = _typed_key(encoded, name, hex_id, "signer key" if private else "verifier key", sig_type)
    return name, int(hex_id, 16), key


@dataclass(frozen=True)
class VerifierKey:
    """A public key that checks note signatures (C2SP signed-note).

    Attributes:
        name: The key name, as on signature lines.
        key_id: The 32-bit key ID (see :func:`key_id`).
        public_key: The 32-byte Ed25519 public key.
    """

    name: str
    key_id: int
    public_key: bytes

    @classmethod
    def parse(cls, text: str) -> VerifierKey:
        """Parse ``<name>+<hex8>+<base64(0x01 || public key)>``.

        Raises:
            KeyManifestError: malformed text, a non-Ed25519 key, or a key id that does not match.
        """
        name, hex_id, encoded = _split_key(text, 3, "verifier key")
        public = _typed_key(encoded, name, hex_id, "verifier key")
        if key_id(name, public) != int(hex_id, 16):
            raise KeyManifestError(path="", reason=f"verifier key id {hex_id} does not match its key")
        return cls(name, int(hex_id, 16), public)

    def __str__(self) -> str:
        encoded = base64.b64encode(bytes([SIG_ED25519]) + self.public_key).decode()
        return f"{self.name}+{self.key_id:08x}+{encoded}"

    def verify(self, message: bytes, signature: bytes) -> bool:
        """True when ``signature`` (64 bytes) is this key's RFC 8032 Ed25519 signature of ``message``."""
        try:
            Ed25519PublicKey.from_public_bytes(self.public_key).verify(signature, message)
        except (InvalidSignature, ValueError):
            return False
        return True


@dataclass(frozen=True)
class LogSigner:
    """A private Ed25519 key with its note key name; ``repr`` never shows the secret.

    Attributes:
        name: The key name.
        key_id: The 32-bit key ID.
    """

    name: str
    key_id: int
    _private: Ed25519PrivateKey = field(repr=False, compare=False)

    @classmethod
    def generate(cls, name: str = DEFAULT_KEY_NAME) -> LogSigner:
        """A fresh random key.

        Raises:
            KeyManifestError: ``name`` is not a valid key name.
        """
        if not valid_key_name(name):
            raise KeyManifestError(path="", reason=f"invalid key name {name!r}")
        return cls._from_private(name, Ed25519PrivateKey.generate())

    @classmethod
    def parse(cls, text: str) -> LogSigner:
        """Parse ``PRIVATE+KEY+<name>+<hex8>+<base64(0x01 || seed)>``.

        Raises:
            KeyManifestError: malformed text, a non-Ed25519 key, or a key id that does not match.
        """
        fields = _split_key(text, 5, "signer key")
        if fields[:2] != ["PRIVATE", "KEY"]:
            raise KeyManifestError(path="", reason="signer key must start with PRIVATE+KEY+")
        name, hex_id, encoded = fields[2:]
        seed = _typed_key(encoded, name, hex_id, "signer key")
        signer = cls._from_private(name, Ed25519PrivateKey.from_private_bytes(seed))
        if signer.key_id != int(hex_id, 16):
            raise KeyManifestError(path="", reason=f"signer key id {hex_id} does not match its key")
        return signer

    @classmethod
    def _from_private(cls, name: str, private: Ed25519PrivateKey) -> LogSigner:
        public = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        return cls(name, key_id(name, public), private)

    @property
    def verifier(self) -> VerifierKey:
        """The matching public key."""
        public = self._private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        return VerifierKey(self.name, self.key_id, public)

    def secret_text(self) -> str:
        """The signer key text (``PRIVATE+KEY+...``): a secret, for a 0600 file or a secret store."""
        from cryptography.hazmat.primitives.serialization import NoEncryption, PrivateFormat

        seed = self._private.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
        encoded = base64.b64encode(bytes([SIG_ED25519]) + seed).decode()
        return f"PRIVATE+KEY+{self.name}+{self.key_id:08x}+{encoded}"

    def sign(self, message: bytes) -> bytes:
        """RFC 8032 Ed25519 signature of ``message``, 64 bytes."""
        return self._private.sign(message)


@dataclass(frozen=True)
class TrustedKey:
    """A verifier key with the window in which it may sign.

    Attributes:
        verifier: The public key.
        not_before_ms: First epoch ms it may sign at (inclusive).
        not_after_ms: Epoch ms from which it may no longer sign (exclusive); None when still active.
        endorsement: The signed note by which the previous key endorsed this one, or None.
        pinned: Trusted explicitly, without an endorsement.
        private_key_file: Name of its private key file in the key directory, or None.
    """

    verifier: VerifierKey
    not_before_ms: int = 0
    not_after_ms: int | None = None
    endorsement: str | None = None
    pinned: bool = False
    private_key_file: str | None = None

    def valid_at(self, at_ms: int) -> bool:
        """True when the key may sign at ``at_ms`` (epoch ms)."""
        return self.not_before_ms <= at_ms and (self.not_after_ms is None or at_ms < self.not_after_ms)

    def to_json(self) -> dict[str, Any]:
        """The manifest entry."""
        return {
            "vkey": str(self.verifier),
            "not_before_ms": self.not_before_ms,
            "not_after_ms": self.not_after_ms,
            "endorsement": self.endorsement,
            "pinned": self.pinned,
            "private_key_file": self.private_key_file,
        }

    @classmethod
    def from_json(cls, entry: Any) -> TrustedKey:
        """Parse one manifest entry.

        Raises:
            KeyManifestError: a missing or mistyped field.
        """
        if not isinstance(entry, dict) or not isinstance(entry.get("vkey"), str):
            raise KeyManifestError(path="", reason="manifest entry without a vkey")
        before, after = entry.get("not_before_ms", 0), entry.get("not_after_ms")
        endorsement, key_file = entry.get("endorsement"), entry.get("private_key_file")
        if not isinstance(before, int) or not (after is None or isinstance(after, int)):
            raise KeyManifestError(path="", reason="manifest validity window must be integers (ms)")
        if not (endorsement is None or isinstance(endorsement, str)):
            raise KeyManifestError(path="", reason="manifest endorsement must be a string")
        if not (key_file is None or (isinstance(key_file, str) and "/" not in key_file)):
            raise KeyManifestError(path="", reason="private_key_file must be a bare file name")
        return cls(
            VerifierKey.parse(entry["vkey"]),
            before,
            after,
            endorsement,
            bool(entry.get("pinned", False)),
            key_file,
        )


class Keyring:
    """The trusted verifier keys, each with its validity window (read-only; build with :func:`load_keyring`)."""

    def __init__(self, keys: Iterable[TrustedKey] = ()) -> None:
        self._keys = list(keys)

    def __iter__(self) -> Iterator[TrustedKey]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def find(self, name: str, key_id: int) -> list[TrustedKey]:
        """Keys with this (name, key ID): C2SP signed-note identifies a key by both."""
        return [k for k in self._keys if k.verifier.name == name and k.verifier.key_id == key_id]

    def with_key(self, key: TrustedKey) -> Keyring:
        """A keyring that also trusts ``key`` (unless a key with the same verifier is already present)."""
        if any(k.verifier == key.verifier for k in self._keys):
            return self
        return Keyring([*self._keys, key])


# ─── the key directory ────────────────────────────────────────────────────────────────────────


def key_dir() -> Path:
    """``$FLIGHTLOG_KEY_DIR``, else ``platformdirs.user_config_dir("flightlog")``."""
    env = os.environ.get(ENV_KEY_DIR)
    if env:
        return Path(env)
    from platformdirs import user_config_dir

    return Path(user_config_dir("flightlog", appauthor=False))


def _read_manifest(directory: Path) -> list[TrustedKey]:
    path = directory / MANIFEST
    if not path.exists():
        return []
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise KeyManifestError(path=str(path), reason=f"unreadable manifest: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("format") != _FORMAT or not isinstance(doc.get("keys"), list):
        raise KeyManifestError(path=str(path), reason=f"not a {_FORMAT} manifest")
    try:
        keys = [TrustedKey.from_json(entry) for entry in doc["keys"]]
        _check_endorsements(keys)
    except KeyManifestError as exc:
        raise KeyManifestError(path=str(path), reason=exc.reason) from exc
    return keys


def _check_endorsements(keys: list[TrustedKey]) -> None:
    """Refuse a manifest in which a key after the first is neither pinned nor endorsed by an earlier one."""
    for index, key in enumerate(keys[1:], start=1):
        if key.pinned:
            continue
        if key.endorsement is None:
            raise KeyManifestError(
                path="", reason=f"key {key.verifier} is neither pinned nor endorsed by an earlier key"
            )
        if not _endorsed(key, Keyring(keys[:index])):
            raise KeyManifestError(path="", reason=f"endorsement of key {key.verifier} does not verify")


def _endorsed(key: TrustedKey, earlier: Keyring) -> bool:
    assert key.endorsement is not None
    try:
        # The retiring key signs as its window closes: it must be valid just before the new one starts.
        note = open_note(key.endorsement, earlier, at_ms=key.not_before_ms - 1)
    except NoteError:
        return False
    return note.text == _endorsement_text(key.verifier, key.not_before_ms)


def _endorsement_text(new: VerifierKey, not_before_ms: int) -> str:
    return f"{ENDORSEMENT_HEADER}\n{new}\n{not_before_ms}\n"


def _write_manifest(directory: Path, keys: list[TrustedKey]) -> None:
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    doc = {"format": _FORMAT, "keys": [k.to_json() for k in keys]}
    tmp = directory / f".{MANIFEST}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, directory / MANIFEST)


def _env_signer() -> LogSigner | None:
    text = os.environ.get(ENV_KEY)
    if not text:
        return None
    try:
        return LogSigner.parse(text)
    except KeyManifestError as exc:
        raise KeyManifestError(path=f"${ENV_KEY}", reason=exc.reason) from exc


def load_keyring(directory: Path | None = None) -> Keyring:
    """The trusted keys: the manifest's, plus the ``$FLIGHTLOG_LOG_KEY`` key when set and not listed.

    Args:
        directory: The key directory (default :func:`key_dir`).

    Raises:
        KeyManifestError: an unreadable or untrusted manifest, or a malformed ``$FLIGHTLOG_LOG_KEY``.
    """
    ring = Keyring(_read_manifest(directory or key_dir()))
    env = _env_signer()
    if env is not None:
        ring = ring.with_key(TrustedKey(env.verifier, pinned=True))
    return ring


def load_signer(directory: Path | None = None, *, create: bool = True) -> LogSigner:
    """The key that signs new checkpoints: ``$FLIGHTLOG_LOG_KEY``, else the manifest's active key.

    Args:
        directory: The key directory (default :func:`key_dir`).
        create: Generate and record a key when the manifest has none.

    Raises:
        KeyManifestError: a malformed key, a private key file readable by others, a manifest whose active
            key has no private key file here, or no key at all with ``create=False``.
    """
    env = _env_signer()
    if env is not None:
        return env
    directory = directory or key_dir()
    keys = _read_manifest(directory)
    active = [k for k in keys if k.not_after_ms is None and k.private_key_file]
    if active:
        return _read_private(directory, active[-1])
    if keys:
        raise KeyManifestError(path=str(directory / MANIFEST), reason="no active key with a private key file")
    if not create:
        raise KeyManifestError(path=str(directory), reason=f"no log key (set ${ENV_KEY} or create one)")
    signer = LogSigner.generate()
    entry = TrustedKey(signer.verifier, private_key_file=_write_private(directory, signer))
    _write_manifest(directory, [entry])
    return signer


def _read_private(directory: Path, entry: TrustedKey) -> LogSigner:
    assert entry.private_key_file is not None
    path = directory / entry.private_key_file
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise KeyManifestError(path=str(path), reason=f"unreadable private key: {exc}") from exc
    if os.name == "posix" and mode & 0o077:
        raise KeyManifestError(
            path=str(path), reason=f"private key is readable by others (mode {mode & 0o777:o})"
        )
    try:
        signer = LogSigner.parse(text)
    except KeyManifestError as exc:
        raise KeyManifestError(path=str(path), reason=exc.reason) from exc
    if signer.verifier != entry.verifier:
        raise KeyManifestError(path=str(path), reason="private key does not match the manifest's vkey")
    return signer


def _write_private(directory: Path, signer: LogSigner) -> str:
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    name = f"log-{signer.key_id:08x}.key"
    fd = os.open(directory / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as fh:
        fh.write(signer.secret_text() + "\n")
    return name


def rotate_key(
    directory: Path | None = None, *, name: str | None = None, at_ms: int | None = None
) -> LogSigner:
    """Retire the active key at ``at_ms`` and make a new one, endorsed by the old key.

    The old key's window closes at ``at_ms``, the new key's opens there; checkpoints keep verifying with
    the key valid at their time. The retired private key file is kept (delete it when no longer needed).

    Args:
        directory: The key directory (default :func:`key_dir`).
        name: The new key's name (default: the old key's).
        at_ms: Rotation time, epoch ms (default now).

    Returns:
        The new signer.

    Raises:
        KeyManifestError: no active file-based key to rotate from.
    """
    directory = directory or key_dir()
    keys = _read_manifest(directory)
    active = [i for i, k in enumerate(keys) if k.not_after_ms is None and k.private_key_file]
    if not active:
        raise KeyManifestError(path=str(directory / MANIFEST), reason="no active key to rotate")
    old_index = active[-1]
    old = _read_private(directory, keys[old_index])
    when = now_ms() if at_ms is None else at_ms
    if when <= keys[old_index].not_before_ms:
        raise KeyManifestError(
            path=str(directory / MANIFEST), reason="rotation time is not after the key's start"
        )
    new = LogSigner.generate(name or old.name)
    endorsement = sign_note(_endorsement_text(new.verifier, when), old)
    keys[old_index] = replace(keys[old_index], not_after_ms=when)
    keys.append(TrustedKey(new.verifier, when, None, endorsement, False, _write_private(directory, new)))
    _write_manifest(directory, keys)
    return new


def trust_key(
    vkey: str, directory: Path | None = None, *, not_before_ms: int = 0, not_after_ms: int | None = None
) -> TrustedKey:
    """Pin another log's verifier key in the manifest (to verify sessions it signed).

    Raises:
        KeyManifestError: a malformed verifier key.
    """
    directory = directory or key_dir()
    keys = _read_manifest(directory)
    entry = TrustedKey(VerifierKey.parse(vkey), not_before_ms, not_after_ms, None, bool(keys), None)
    if any(k.verifier == entry.verifier for k in keys):
        return next(k for k in keys if k.verifier == entry.verifier)
    _write_manifest(directory, [*keys, entry])
    return entry


def trusted_by_endorsement(trusted: Keyring, candidates: Iterable[TrustedKey]) -> Keyring:
    """Extend ``trusted`` with the candidates a trusted key endorsed (directly or along a rotation chain).

    A candidate is accepted only through an endorsement that verifies against keys already trusted (its
    own ``pinned`` flag and the keys it came with count for nothing): this is how an auditor who pinned a
    log's first key follows that log's rotations from a key list it was handed (an offline bundle's
    ``keys.json``) without taking that list as a trust anchor.

    Args:
        trusted: The keys the caller trusts.
        candidates: Manifest entries from an untrusted source, in manifest order.

    Returns:
        ``trusted`` plus every endorsed candidate, with the candidate's validity window.
    """
    ring = trusted
    pending = [c for c in candidates if c.endorsement is not None]
    progress = True
    while pending and progress:
        progress = False
        for candidate in list(pending):
            if _endorsed(candidate, ring):
                ring = ring.with_key(replace(candidate, pinned=False, private_key_file=None))
                pending.remove(candidate)
                progress = True
    return ring
