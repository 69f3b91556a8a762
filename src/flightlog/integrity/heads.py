"""Heads kept outside the database to compare it against: retained heads (files), witnessed heads
(cosigned by a witness) and indexed heads (held by the signed index log).

**Retained heads** (:class:`HeadStore`): after each commit the latest signed checkpoint of a session is
also written to ``<head dir>/<ledger id>/<sha256(session id)[:40]>.json``, outside the database (head dir:
``$FLIGHTLOG_HEAD_DIR``, else ``platformdirs.user_state_dir("flightlog")/heads``). One file per session
(rather than one per ledger) so concurrent writers of different sessions never lose each other's update.
Verification and resume refuse a database whose latest head is older than, or inconsistent with, the
retained one: that is how a database rolled back to an earlier copy, a truncated sealed session, a
replayed old head and a fork are caught. The index log keeps its own retained head beside them
(``index.json``, format ``flightlog-index-head/1``).

:class:`WitnessedHead` and :class:`IndexedHead` are heads already verified elsewhere
(:mod:`flightlog.integrity.witness`, :mod:`flightlog.integrity.indexlog`), passed to
:func:`flightlog.integrity.verify.audit_session` and checked like the retained head.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import (
    StoreError,
    StoreUnavailable,
)
from .checkpoints import Checkpoint, SignedCheckpoint
from .notes import NoteError, parse_note

__all__ = [
    "ENV_HEAD_DIR",
    "HeadStore",
    "IndexedHead",
    "RetainedHead",
    "WitnessedHead",
]

ENV_HEAD_DIR = "FLIGHTLOG_HEAD_DIR"
"""Environment variable overriding the retained-head directory."""


_LEDGER_ID = re.compile(r"[0-9a-f]{8,64}")


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
        expect = {"format": self.FORMAT, "session_id": session_id}
        doc = _read_head(path, "retained head", expect, f"a head of session {session_id}")
        if doc is None:
            return None
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
        expect = {"format": self.INDEX_FORMAT, "ledger_id": ledger_id}
        doc = _read_head(path, "retained index head", expect, f"an index head of ledger {ledger_id}")
        return None if doc is None else str(doc["checkpoint"])

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


def _read_head(path: Path, what: str, expect: dict[str, str], meant: str) -> dict[str, Any] | None:
    """The JSON document of the retained head file ``path`` (``what``, for errors) whose fields equal
    ``expect`` and whose ``checkpoint`` is a string; None when the file does not exist.

    Raises:
        NoteError: the file is unreadable, or not such a document (refused rather than ignored: ignoring it
            would switch rollback detection off).
    """
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise NoteError(reason=f"{what} {path} is unreadable: {exc}") from exc
    if (
        not isinstance(doc, dict)
        or any(doc.get(key) != value for key, value in expect.items())
        or not isinstance(doc.get("checkpoint"), str)
    ):
        raise NoteError(reason=f"{what} {path} is not {meant}")
    return doc
