"""Salted (erasable) artifacts: personal data kept outside the ledger, referenced from events by digest.

A handle is ``salted:sha256:<hex of sha256(salt || content)>`` with a fresh 32-byte salt per put (no
deduplication, deliberately); the content and its salt are stored together in the store's
``salted_artifacts``, never in an event. Erasing them, and checking erasures, is
:mod:`flightlog.integrity.erasure` (above the recorder); putting and getting them is here, below it, so
``Recorder.put_personal_artifact`` needs nothing from the integrity layer.

Source: ARCHITECTURE.md invariants 1 (append-only) and 8 (references are logical ids, never secrets).
"""

from __future__ import annotations

import hashlib
import re
import secrets
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .store.base import Store

__all__ = [
    "SALTED_PREFIX",
    "SALT_BYTES",
    "get_personal_artifact",
    "parse_handle",
    "put_personal_artifact",
    "salted_digest",
]

SALTED_PREFIX = "salted:sha256:"
"""Prefix of a salted (erasable) artifact handle: ``salted:sha256:<hex of sha256(salt || content)>``."""

SALT_BYTES = 32
"""Salt length, bytes."""

_HEX64 = re.compile(r"[0-9a-f]{64}")


def salted_digest(salt: bytes, content: bytes) -> str:
    """``sha256(salt || content)``, 64 lowercase hex chars."""
    return hashlib.sha256(salt + content).hexdigest()


def parse_handle(handle: str) -> str:
    """The digest (hex) of ``salted:sha256:<hex>`` (or of the bare hex).

    Raises:
        ValueError: not a salted handle.
    """
    digest = handle.removeprefix(SALTED_PREFIX)
    if not _HEX64.fullmatch(digest):
        raise ValueError(f"{handle!r} is not a salted artifact handle (salted:sha256:<64 hex>)")
    return digest


def put_personal_artifact(
    store: Store,
    content: bytes,
    media_type: str = "application/octet-stream",
    *,
    session_id: str | None = None,
) -> str:
    """Store personal data erasably; returns the handle to put in events.

    Args:
        store: The store.
        content: The bytes (never written to the ledger).
        media_type: Their media type.
        session_id: The session that will reference the handle (recorded so an erasure can name it).

    Returns:
        ``salted:sha256:<hex of sha256(salt || content)>``, with a fresh 32-byte salt.
    """
    salt = secrets.token_bytes(SALT_BYTES)
    digest = salted_digest(salt, content)
    return store.put_salted_artifact(digest, salt, content, media_type, session_id=session_id).handle


def get_personal_artifact(store: Store, handle: str) -> bytes | None:
    """The content behind a salted handle, or None when never stored or erased.

    Raises:
        ValueError: a malformed handle.
        ArtifactIntegrityError: the stored content and salt do not hash to the handle (tampered; the store's
            read checks it, :meth:`~flightlog.store.base.Store.get_salted_artifact`).
    """
    found = store.get_salted_artifact(parse_handle(handle))
    return None if found is None else found[0]
