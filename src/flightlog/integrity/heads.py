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

**Head history.** Beside each head file, ``<name>.history.jsonl`` keeps every (size, root) that head was
ever moved to, one JSON line ``{"size": n, "root": "<hex>"}`` appended when the head is written
(:meth:`HeadStore.history`, :meth:`HeadStore.history_path`; the index log's is ``index.history.jsonl``).
The latest head alone cannot tell a database restored from an older copy from one whose history was
rewritten and truncated (the chain recomputed, the checkpoints and index leaves deleted): both are smaller
than the head. The history can: an older copy's tree has the retained root at every retained size it
reaches (RFC 9162 §2.1.4 consistency), a rewrite does not (``flightlog db accept-restore`` refuses it).
Appended with ``O_APPEND`` and, for a session's head, fsynced before the head file that holds the same
entry is replaced (itself written to a temporary file, fsynced, renamed; the folder fsynced when a file
in it is created or renamed), so a head file that survives a power failure never holds an entry its
history lost; the index log's head and its history are not fsynced (one checkpoint in 64 events pays for
it otherwise): a power failure can leave that head lagging or the history short of its latest lines, both
safe (the head's own entry is read from the head file). Bounded: past :data:`HISTORY_LIMIT` entries' worth
of bytes it is compacted (identical lines kept once, lines that are not an entry dropped) and, past
:data:`HISTORY_LIMIT` entries, the older half is thinned to every other entry (the first and the newest
kept), so recent sizes stay dense and old ones sparser. It is opened without following a symlink or
blocking on a FIFO, only as a regular file, and at most :data:`HISTORY_MAX_BYTES` of it is ever read (a
larger one is refused unread); a head file is read only as a regular file too, without blocking on a FIFO.
It is not signed: whoever can write the heads folder can edit or delete it (a witness is the stronger
guard).

**Locking.** Each head file and its history are written under one exclusive advisory lock
(``fcntl.flock``) on a sidecar file beside them, ``.<name>.lock`` (the index log's: ``.index.lock``;
:func:`head_lock`): the compare-and-write of :meth:`HeadStore.save` / :meth:`HeadStore.save_index`, every
append, every rewrite (compaction, thinning, :func:`write_history` through a temporary file, fsync and
rename) and ``flightlog db accept-restore``'s judge-and-move-aside, so a line appended while another process
rewrites the history is never lost and a head is never set aside after another writer moved it. The lock is
re-entrant within a thread. It is waited for at most :data:`LOCK_WAIT` seconds (tried without blocking,
with short growing sleeps between tries): a holder that is stopped (``SIGSTOP``, Ctrl-Z) or hung never
blocks a run silently forever. Past that, :class:`HeadLockBusy` (a ``StoreError`` naming the lock file) is
raised: a commit's head save logs it as one warning line and goes on (the commit stands; the retained head
lags, which is safe), ``accept-restore`` refuses with it, nothing set aside or recorded. ``fcntl`` is POSIX (Linux, macOS): where Python has none (Windows) no retained
head is written at all (:class:`~flightlog.errors.StoreUnavailable`, logged as one warning line per
commit) rather than written unlocked. On macOS ``fsync`` leaves the data in the drive's cache
(``F_FULLFSYNC`` would flush it), as SQLite's does for the database (``PRAGMA fullfsync`` is off by
default).

A retained head moves forward only onto a tree that extends it (RFC 9162 §2.1.4: the new tree's root at the
retained size is the retained root). Every checkpoint and index-log append checks that inside its
transaction (:func:`extension_problem`, :func:`prefix_root`) and refuses the write on a ``rollback`` or
``fork``, and :meth:`HeadStore.save` / :meth:`HeadStore.save_index` raise rather than overwrite a fork: a
copy of the database (same ledger id, same heads) that went on is never accepted silently, and the head it
left stays as evidence until ``flightlog db accept-restore`` (:mod:`flightlog.ops.restore`) replaces it on
record.

:class:`WitnessedHead` and :class:`IndexedHead` are heads already verified elsewhere
(:mod:`flightlog.integrity.witness`, :mod:`flightlog.integrity.indexlog`), passed to
:func:`flightlog.integrity.verify.audit_session` and checked like the retained head.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import (
    Divergence,
    LedgerIntegrityError,
    StoreError,
    StoreUnavailable,
)
from ..ledger import CompactRange
from .checkpoints import Checkpoint, SignedCheckpoint
from .notes import NoteError, parse_note

if TYPE_CHECKING:
    from ..store.base import SessionRecord, Store

__all__ = [
    "ACCEPT_FORK_STEP",
    "ACCEPT_RESTORE_DOES",
    "ACCEPT_RESTORE_STEP",
    "ENV_HEAD_DIR",
    "HEADS_AHEAD",
    "HISTORY_LIMIT",
    "HISTORY_MAX_BYTES",
    "INDEX_SCOPE",
    "LOCK_WAIT",
    "WHY_COPIES",
    "HeadLockBusy",
    "HeadStore",
    "HeadsAhead",
    "IndexedHead",
    "RetainedHead",
    "WitnessedHead",
    "accept_step",
    "copy_hint",
    "extension_problem",
    "from_retained_head",
    "head_lock",
    "heads_ahead",
    "prefix_root",
    "read_history",
    "thinned",
    "write_history",
]

ENV_HEAD_DIR = "FLIGHTLOG_HEAD_DIR"
"""Environment variable overriding the retained-head directory."""


_LEDGER_ID = re.compile(r"[0-9a-f]{8,64}")

HISTORY_LIMIT = 4096
"""Entries a head history holds before its older half is thinned (module docstring)."""

HISTORY_MAX_BYTES = HISTORY_LIMIT * 1024
"""Bytes of a head history read at most: far more than :data:`HISTORY_LIMIT` entries take (about 100
bytes each); a larger file was not written by this module and is refused unread."""

_HISTORY_SUFFIX = ".history.jsonl"

LOCK_WAIT = 30.0
"""Seconds :func:`head_lock` waits at most for a lock another process holds before raising
:class:`HeadLockBusy` (module docstring, **Locking**)."""

_LOCK_FIRST_SLEEP = 0.005
_LOCK_MAX_SLEEP = 0.5
"""Sleeps between tries for a held lock, seconds: the first, doubled each try up to the largest."""


class HeadLockBusy(StoreError):
    """A head's lock file (``lock``) stayed held by another process for ``waited`` seconds
    (:data:`LOCK_WAIT`): that process is stopped, hung or slow. Nothing was written under it."""

    lock: Path
    waited: float

    def __init__(self, *, lock: Path, waited: float) -> None:
        super().__init__(
            f"lock file {lock} is held by another process (waited {waited:g} s for it; a flightlog process "
            "stopped or hung inside a head save holds it until it goes on or exits)",
            lock=lock,
            waited=waited,
        )


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
                doc = json.loads(_read_regular(path))
                heads.append(
                    RetainedHead(
                        str(doc["session_id"]), str(doc["checkpoint"]), bool(doc.get("sealed")), path
                    )
                )
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return heads

    def save(
        self,
        ledger_id: str,
        session_id: str,
        signed: SignedCheckpoint,
        *,
        sealed: bool,
        roots: Mapping[int, bytes] | None = None,
    ) -> bool:
        """Retain ``signed`` when it extends the retained head: under :func:`head_lock`, its history line
        appended and fsynced, then the head file written atomically (temporary file, fsync, rename, folder
        fsync).

        A head moves forward only onto a tree that extends it (RFC 9162 §2.1.4: the new tree's root at the
        retained size is the retained root). ``roots`` gives what the writer knows of its own tree: its root
        at earlier sizes (``signed.size`` is ``signed.root`` already). A retained head of a size ``roots``
        does not cover is left as it is (a lagging head is safe; the next writer's check, made inside its
        transaction, settles it).

        Args:
            ledger_id: The database's ledger id.
            session_id: The session.
            signed: The checkpoint to retain.
            sealed: Whether it is the session's seal checkpoint.
            roots: Root of the writer's tree by size, 32 bytes each (default: none known).

        Returns:
            True when written; False when a larger head is retained, or one the writer cannot show it extends.

        Raises:
            LedgerIntegrityError: the retained head is a fork of ``signed`` (its root differs from the
                writer's at its size): the file is kept as the evidence it is; ``seq`` is its last event.
            NoteError: the retained file (or its history) is unreadable or not a regular file.
            StoreError: the head or its history cannot be written (names the file and the OS error).
            StoreUnavailable: no file locking on this platform (module docstring).
        """
        path = self.path(ledger_id, session_id)
        with head_lock(path):
            current = self.load(ledger_id, session_id)
            if current is not None:
                cp = Checkpoint.parse(parse_note(current.note).text)
                if not _extends(cp, signed, roots, session_id, "the retained head", "events"):
                    return False
                if cp.size == signed.size and current.sealed and not sealed:
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
            _append_history(self.history_path(path), signed.size, signed.root)  # fsynced first
            _write_head(path, doc, fsync=True)
        return True

    @staticmethod
    def history_path(head: Path) -> Path:
        """The head history beside the head file ``head``: ``<name>.history.jsonl`` (module docstring)."""
        return head.with_name(head.name.removesuffix(".json") + _HISTORY_SUFFIX)

    def history(self, ledger_id: str, session_id: str | None) -> list[tuple[int, bytes]]:
        """Every (size, root) the session's retained head (``session_id`` None: the index log's) was moved
        to, read from its history and its head file, ascending by size, one entry per size. Unverified, like
        the head file's own fields (the history is written by this process's kind only; the head's signed
        note is not parsed here).

        Returns:
            ``[(size, root)]``, roots 32 bytes; empty when neither file exists.

        Raises:
            NoteError: a history line other than a torn last one is not ``{"size": int, "root": hex}``,
                or two entries give one size two roots (names the file and line).
            StoreError: the ledger id is not 8-64 lowercase hex.
        """
        path = self.index_path(ledger_id) if session_id is None else self.path(ledger_id, session_id)
        found = read_history(self.history_path(path))
        if session_id is None:
            note = self.load_index(ledger_id)
        else:
            head = self.load(ledger_id, session_id)
            note = None if head is None else head.note
        if note is not None:
            cp = Checkpoint.parse(parse_note(note).text)
            if found.setdefault(cp.size, cp.root) != cp.root:
                raise NoteError(reason=f"{path} and its history give size {cp.size} two roots")
        return sorted(found.items())

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

    def save_index(
        self, ledger_id: str, signed: SignedCheckpoint, roots: Mapping[int, bytes] | None = None
    ) -> bool:
        """Retain the index log's checkpoint when it extends the retained one (several processes append to
        one ledger's index: the compare-and-write holds an exclusive lock file; refused where the OS has none).

        As :meth:`save`: ``roots`` is the writer's index root by size (32 bytes each); a retained index head
        it does not cover is left as it is.

        Returns:
            True when written.

        Raises:
            LedgerIntegrityError: the retained index head is a fork of ``signed`` (kept; ``seq`` is its last
                leaf, the session id ``(index log)``).
            NoteError: the retained file (or its history) is unreadable or not a regular file.
            StoreError: the head or its history cannot be written (names the file and the OS error).
            StoreUnavailable: no file locking on this platform.
        """
        path = self.index_path(ledger_id)
        with head_lock(path):
            current = self.load_index(ledger_id)
            if current is not None:
                cp = Checkpoint.parse(parse_note(current).text)
                extends = _extends(cp, signed, roots, "(index log)", "the retained index head", "leaves")
                if not extends or cp.size == signed.size:
                    return False
            doc = {
                "format": self.INDEX_FORMAT,
                "ledger_id": ledger_id,
                "size": signed.size,
                "root": signed.root.hex(),
                "checkpoint": signed.note,
            }
            # Not fsynced (one checkpoint in 64 events pays for it otherwise): a power failure can only
            # leave this head lagging or its history short, which is safe; checks compare the database
            # against them, never back.
            _append_history(self.history_path(path), signed.size, signed.root, fsync=False)
            _write_head(path, doc, fsync=False)
        return True


def _extends(
    current: Checkpoint,
    signed: SignedCheckpoint,
    roots: Mapping[int, bytes] | None,
    session_id: str,
    what: str,
    unit: str,
) -> bool:
    """Whether ``signed`` may replace the retained ``current``: False when ``current`` is larger or of a size
    ``roots`` does not know; raises when the writer's root at ``current.size`` differs (a fork)."""
    if current.size > signed.size:
        return False
    known = signed.root if current.size == signed.size else (roots or {}).get(current.size)
    if known is None:
        return False
    problem = extension_problem(what, unit, current.size, current.root, signed.size, known)
    if problem is not None:
        raise LedgerIntegrityError(
            session_id=session_id,
            seq=problem.seq,
            reason=f"{problem.reason}: {problem.detail}",
            divergences=[problem],
        )
    return True


_HEAD_REASONS = frozenset({"rollback", "fork", "stale_head"})


def from_retained_head(divergence: Divergence) -> bool:
    """Whether ``divergence`` is one a retained head found (a ``rollback``, ``fork`` or ``stale_head`` whose
    detail names a retained head), not one the database shows on its own (a broken chain, a checkpoint
    whose signed root differs from the rows)."""
    return divergence.reason in _HEAD_REASONS and "retained" in divergence.detail


HEADS_AHEAD = (
    "the heads retained outside this database record a state it does not hold: it was restored from an "
    "older copy, or another copy of it (same ledger id) was written to"
)
"""What a divergence from a retained head means, in one clause: the first words of :func:`copy_hint`, and
what ``ls``/``pending`` say up front of a store whose heads are ahead (the CLI finds it in a refusal)."""

ACCEPT_RESTORE_STEP = "to keep THIS file as the truth: flightlog db accept-restore --reason TEXT"
"""The next step out of such a refusal, as :func:`copy_hint`, the CLI's refusal and its listings say it."""

ACCEPT_FORK_STEP = (
    "to keep THIS file as the truth: flightlog db accept-restore --reason TEXT --accept-fork; without "
    "--accept-fork it refuses a fork (this file is not an older copy of what was retained but another "
    "history of it): --accept-fork keeps it all the same, recorded as a fork, the other heads moved aside, "
    "never deleted"
)
"""The next step out of a refusal for a ``fork`` from a retained head: plain :data:`ACCEPT_RESTORE_STEP`
refuses one (:func:`flightlog.ops.restore.accept_restore` keeps only an older copy unless ``accept_fork``)."""


def accept_step(divergences: Iterable[Divergence]) -> str:
    """:data:`ACCEPT_FORK_STEP` when a divergence is a ``fork`` from a retained head, else
    :data:`ACCEPT_RESTORE_STEP`."""
    forked = any(d.reason == "fork" and "retained" in d.detail for d in divergences)
    return ACCEPT_FORK_STEP if forked else ACCEPT_RESTORE_STEP


ACCEPT_RESTORE_DOES = "it records that decision in the ledger and re-anchors the retained heads"
"""What :data:`ACCEPT_RESTORE_STEP` does, said beside it."""

INDEX_SCOPE = "the index log covers every session of this database, so every session is refused until then"
"""Added to :func:`copy_hint` when the index log is the one behind."""

WHY_COPIES = (
    "a plain cp without its -wal file loses the latest commits; a sqlite3 .backup copy is whole but shares "
    "these heads: write to one copy only; `flightlog db copy` makes a copy that shares nothing"
)
"""How copies come to disagree with the heads, and how to make one that does not."""


def copy_hint(divergences: Iterable[Divergence], *, index: bool = False, unknown_head: bool = False) -> str:
    """What a divergence from a retained head means and what to do, or "" for any other divergence:
    :data:`HEADS_AHEAD`, why copies do that, :func:`accept_step` (for a fork :data:`ACCEPT_FORK_STEP`: plain
    accept-restore refuses one; which records the decision in the
    ledger and re-anchors the retained heads), then :data:`INDEX_SCOPE` with ``index``.

    Args:
        divergences: The divergences found (a ``rollback``, ``fork`` or ``stale_head`` whose detail names a
            retained head gets the hint).
        index: They are the index log's: it covers every session of the database, so every one is refused.
        unknown_head: A head is retained for a session the database does not hold (hint too).

    Returns:
        One sentence without a trailing period, or "".
    """
    divergences = list(divergences)
    named = any(from_retained_head(d) for d in divergences)
    if not named and not unknown_head:
        return ""
    scope = f"; {INDEX_SCOPE}" if index else ""
    return f"{HEADS_AHEAD} ({WHY_COPIES}); {accept_step(divergences)} ({ACCEPT_RESTORE_DOES}){scope}"


@dataclass(frozen=True)
class HeadsAhead:
    """Retained heads a store does not extend, as :func:`heads_ahead` finds them cheaply.

    Attributes:
        index: The index log's retained head is ahead of, or forked from, the store's index log: the full
            check refuses every session of the store (:data:`INDEX_SCOPE`).
        sessions: Sessions (of those asked about) whose own retained head is ahead or forked; empty with
            ``index`` (every session is refused then).
        fork: A head read is of the store's own size with another root: a fork, which plain
            ``db accept-restore`` refuses (:data:`ACCEPT_FORK_STEP`). False says only that none was seen
            this cheaply (a head ahead may still be a fork: the refusal's full check tells).
    """

    index: bool
    sessions: tuple[str, ...] = ()
    fork: bool = False


def heads_ahead(store: Store, heads: HeadStore, records: Iterable[SessionRecord] = ()) -> HeadsAhead | None:
    """Whether the full check (:func:`flightlog.integrity.audit.require_intact`) will refuse to act on
    this store because of its retained heads, found without that check: what a listing (``ls``,
    ``pending``) says up front, before anyone tries to approve what it lists. Reads the index log's head
    file (its size and root against ``Store.index_size`` and the stored index checkpoint of that size;
    every checkpoint is indexed, so a restored or diverged copy shows here) and, only when that one
    agrees, the head file of each session of ``records`` (its size and root against the row's event count
    and ``merkle_root``; no query per session). Notes are read unverified and rows are not hashed: this
    says what an act will run into, the act's own check decides. A head file that cannot be read is passed
    over (the act reports it).

    Returns:
        None when every head read agrees (or the store's ledger id is not valid); else :class:`HeadsAhead`.

    Raises:
        StoreError: the store cannot be read.
    """
    try:
        ledger_id = store.ledger_id()
        index = _head_of(heads.load_index(ledger_id)) if store.index_supported() else None
    except (StoreError, NoteError):
        return None
    if index is not None:
        size = store.index_size()
        kept = store.latest_index_checkpoint(max_size=index.size) if index.size <= size else None
        forked = kept is not None and kept.size == index.size and kept.root != index.root.hex()
        if index.size > size or forked:
            return HeadsAhead(index=True, fork=forked)
    ahead, fork = [], False
    for record in records:
        try:
            head = heads.load(ledger_id, record.session_id)
            cp = None if head is None else _head_of(head.note)
        except NoteError:
            continue
        forked = cp is not None and cp.size == record.events and record.merkle_root != cp.root.hex()
        if cp is not None and (cp.size > record.events or forked):
            ahead.append(record.session_id)
            fork = fork or forked
    return HeadsAhead(index=False, sessions=tuple(dict.fromkeys(ahead)), fork=fork) if ahead else None


def _head_of(note: str | None) -> Checkpoint | None:
    """The checkpoint a retained head's note holds, unverified (None: no head).

    Raises:
        NoteError: the note or its checkpoint text is malformed.
    """
    return None if note is None else Checkpoint.parse(parse_note(note).text)


def extension_problem(
    what: str, unit: str, retained_size: int, retained_root: bytes, size: int, root_at: bytes | None
) -> Divergence | None:
    """Whether a log of ``size`` entries extends a retained head (RFC 9162 §2.1.4: a consistent log's root
    at the retained size is the retained root).

    Args:
        what: The head, for the message ("the retained head").
        unit: What the log holds ("events", "leaves").
        retained_size: Entries the retained head covers.
        retained_root: Its root, 32 bytes.
        size: Entries the log holds.
        root_at: The log's root over its first ``retained_size`` entries (None when ``size`` is smaller).

    Returns:
        None when it extends it; else a ``rollback`` divergence at ``size`` (the head covers more than the
        log holds) or a ``fork`` at the head's last entry (the roots differ).
    """
    if retained_size > size:
        return Divergence(
            size,
            "rollback",
            f"{what} covers {retained_size} {unit}, the database holds {size}: rolled back to an earlier "
            "copy or truncated",
        )
    if retained_size and root_at != retained_root:
        return Divergence(
            retained_size - 1,
            "fork",
            f"the database's {unit} differ from {what} at size {retained_size} (a root over the first "
            f"{retained_size} that is not the retained one)",
        )
    return None


def prefix_root(
    tree: CompactRange,
    size: int,
    frontier: CompactRange | None,
    hashes: Callable[[int, int], Iterable[bytes]],
) -> bytes | None:
    """The root over the first ``size`` leaves of the log whose compact range is ``tree`` (RFC 9162 MTH).

    With ``frontier`` (a stored compact range at ``size``, a cache) the leaves ``[size, tree.size)`` are
    folded into a copy of it: when that lands on ``tree``'s root, the frontier's root is the log's root at
    ``size`` (equivalent to an RFC 9162 §2.1.4 consistency proof). Otherwise the first ``size`` leaves are
    hashed again (O(size)).

    Args:
        tree: The log's compact range (all its leaves).
        size: Leaves to take the root over.
        frontier: A compact range claimed for the first ``size`` leaves, or None.
        hashes: ``hashes(start, stop)``: the leaf hashes (32 bytes each) of ``[start, stop)``, ascending.

    Returns:
        The root, 32 bytes; None when ``size`` exceeds ``tree.size``.
    """
    if size > tree.size:
        return None
    if size == tree.size:
        return tree.root()
    if frontier is not None and frontier.size == size:
        folded = frontier.copy()
        for leaf in hashes(size, tree.size):
            folded.append(leaf)
        if folded.size == tree.size and folded.root() == tree.root():
            return frontier.root()
    rebuilt = CompactRange()
    for leaf in hashes(0, size):
        rebuilt.append(leaf)
    return rebuilt.root()


def _append_history(path: Path, size: int, root: bytes, *, fsync: bool = True) -> None:
    """Append ``(size, root)`` to the head history ``path`` under its :func:`head_lock`, fsynced (and the
    folder when the file is created) unless told not to; past :data:`HISTORY_LIMIT` entries' worth of
    bytes, compact it (module docstring).

    Raises:
        NoteError: ``path`` is not a regular file (a symlink, a FIFO, a folder: refused, nothing written).
        StoreError: it cannot be written or fsynced (names the file and the OS error).
        StoreUnavailable: no file locking on this platform.
    """
    line = json.dumps({"size": size, "root": root.hex()}) + "\n"
    with head_lock(path):
        _make_dirs(path.parent)
        created = not os.path.lexists(path)
        fd = _open_history(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, line.encode("ascii"))
            if fsync:
                os.fsync(fd)
            grown = os.fstat(fd).st_size
        except OSError as exc:
            raise StoreError(f"head history {path} cannot be written: {exc}") from exc
        finally:
            os.close(fd)
        if created and fsync:
            _fsync_dir(path.parent)
        if HISTORY_LIMIT * len(line) < grown <= HISTORY_MAX_BYTES:  # larger: left for the reader to refuse
            _compact(path)


def _compact(path: Path) -> bool:
    """Rewrite the history ``path`` as its distinct entries (identical lines once, lines that are not an
    entry dropped), thinned (:func:`thinned`) until at most :data:`HISTORY_LIMIT` remain, under its
    :func:`head_lock` (a line another process appends meanwhile waits for the rewrite, then lands in the
    new file); kept as it is when one size has two roots (whoever reads it is told) or it cannot be read.

    Returns:
        True when the file was rewritten.

    Raises:
        StoreError: the rewrite cannot be written (names the file); StoreUnavailable: no file locking.
    """
    with head_lock(path):
        try:
            lines = _history_lines(path)
        except (NoteError, FileNotFoundError):
            return False
        found: dict[int, bytes] = {}
        for _, entry in lines:
            if entry is None:
                continue
            if found.setdefault(entry[0], entry[1]) != entry[1]:
                return False
        entries = sorted(found.items())
        while len(entries) > HISTORY_LIMIT:
            entries = thinned(entries)
        if len(entries) >= len(lines):
            return False
        _write_history(path, entries)
        return True


def thinned(entries: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
    """``entries`` (ascending by size) with every other entry of the older half dropped, the first kept."""
    half = len(entries) // 2
    return [e for i, e in enumerate(entries[:half]) if i % 2 == 0] + entries[half:]


def head_lock(path: Path) -> AbstractContextManager[None]:
    """The exclusive advisory lock of the head file ``path`` and its history (either path may be given):
    ``fcntl.flock`` on ``.<name>.lock`` beside them (the index log's: ``.index.lock``), held for the
    ``with`` block; re-entrant within a thread (module docstring, **Locking**).

    Raises:
        HeadLockBusy: another process held it for :data:`LOCK_WAIT` seconds (names the lock file).
        StoreUnavailable: the platform has no ``fcntl`` (Windows).
        OSError: the lock file cannot be created or opened.
    """
    base = path.name.removesuffix(_HISTORY_SUFFIX).removesuffix(".json")
    return _file_lock(path.with_name(f".{base}.lock"))


def write_history(path: Path, entries: Iterable[tuple[int, bytes]]) -> None:
    """Replace the head history ``path`` with ``entries`` under its :func:`head_lock` (a temporary file,
    fsync, rename, folder fsync; removed when there are none). Hold the lock around it to merge with what
    the file held (:func:`read_history` then this).

    Raises:
        NoteError: the temporary file cannot be created as a regular file.
        StoreError: it cannot be written (names the file and the OS error).
        StoreUnavailable: no file locking on this platform.
    """
    _write_history(path, list(entries))


def _write_history(path: Path, entries: list[tuple[int, bytes]]) -> None:
    text = "".join(json.dumps({"size": size, "root": root.hex()}) + "\n" for size, root in entries)
    with head_lock(path):
        try:
            if entries:
                _replace_durably(path, text.encode("ascii"), fsync=True)
            elif os.path.lexists(path):
                path.unlink()
                _fsync_dir(path.parent)
        except OSError as exc:
            raise StoreError(f"head history {path} cannot be written: {exc}") from exc


def _replace_durably(path: Path, data: bytes, *, fsync: bool) -> None:
    """Replace ``path`` with ``data``: a temporary file beside it (created anew, never followed), written,
    fsynced, renamed over ``path``, the folder fsynced (without ``fsync``: written and renamed only).

    Raises:
        OSError: any step failed (the temporary file is removed).
    """
    _make_dirs(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if fsync:
        _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    """fsync the folder ``folder`` so a file created, renamed or removed in it stays so after a power
    failure. Not on Windows (a folder cannot be opened there); a filesystem that refuses to fsync a folder
    (EINVAL) is passed over, as SQLite's unix VFS does (``os_unix.c``, ``unixSync``).

    Raises:
        OSError: the folder cannot be opened, or fsync fails otherwise.
    """
    if os.name == "nt":
        return
    fd = os.open(folder, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise
    finally:
        os.close(fd)


def _make_dirs(folder: Path) -> None:
    """Create ``folder`` and any missing parent (mode 0700), fsyncing the parent of each one created."""
    if folder.is_dir():
        return
    _make_dirs(folder.parent)
    try:
        folder.mkdir(mode=0o700)
    except FileExistsError:
        return
    _fsync_dir(folder.parent)


def _open_history(path: Path, flags: int) -> int:
    """A descriptor of the head history ``path``, opened without following a symlink or blocking on a
    FIFO, and only when it is a regular file.

    Raises:
        NoteError: it is a symlink, a FIFO, a folder or anything else not a regular file, or cannot be
            opened (names the file). FileNotFoundError: it does not exist (``flags`` without ``O_CREAT``).
    """
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    except FileNotFoundError:
        raise
    except OSError as exc:  # ELOOP: a symlink; ENXIO: a FIFO no one reads
        raise NoteError(reason=f"head history {path} cannot be opened (a symlink? a FIFO?): {exc}") from exc
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise NoteError(
            reason=f"head history {path} is not a regular file (mode {stat.filemode(mode)}): refused"
        )
    return fd


def _history_lines(path: Path) -> list[tuple[int, tuple[int, bytes] | None]]:
    """The lines of the history ``path``: ``(line number, (size, root))``, the entry None for a line that
    is not one; a last line with no newline after it that is not an entry (torn by a crash mid-append) is
    left out. Reads at most
    :data:`HISTORY_MAX_BYTES`.

    Raises:
        NoteError: not a regular file, larger than :data:`HISTORY_MAX_BYTES`, or unreadable (names the
            file). FileNotFoundError: it does not exist.
    """
    fd = _open_history(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if size > HISTORY_MAX_BYTES:
            raise NoteError(
                reason=f"head history {path} is {size} bytes, more than the {HISTORY_MAX_BYTES} a history is "
                "ever kept to: refused unread (written by hand? move it aside)"
            )
        chunks, left = [], HISTORY_MAX_BYTES + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise NoteError(reason=f"head history {path} is unreadable: {exc}") from exc
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > HISTORY_MAX_BYTES:
        raise NoteError(reason=f"head history {path} grew past {HISTORY_MAX_BYTES} bytes while read: refused")
    raw = data.split(b"\n")
    lines = [(number, _entry(line)) for number, line in enumerate(raw, 1) if line]
    if lines and lines[-1][0] == len(raw) and lines[-1][1] is None:  # no newline after it: torn
        lines.pop()
    return lines


def _entry(line: bytes) -> tuple[int, bytes] | None:
    """``(size, root)`` of one history line, or None when it is not ``{"size": int, "root": 64 hex}``."""
    try:
        doc = json.loads(line)
        size, root = doc["size"], bytes.fromhex(doc["root"])
    except (ValueError, KeyError, TypeError):
        return None
    if type(size) is not int or size < 0 or len(root) != 32:
        return None
    return size, root


def read_history(path: Path) -> dict[int, bytes]:
    """The head history ``path`` by size (an unreadable torn last line, a crash mid-append, is skipped).
    Opened without following a symlink or blocking on a FIFO; at most :data:`HISTORY_MAX_BYTES` read.

    Raises:
        NoteError: another line is not an entry, or one size has two roots (names the file and line); the
            file is not a regular file, is larger than :data:`HISTORY_MAX_BYTES` or unreadable.
    """
    try:
        lines = _history_lines(path)
    except FileNotFoundError:
        return {}
    found: dict[int, bytes] = {}
    for number, entry in lines:
        if entry is None:
            raise NoteError(
                reason=f"head history {path} line {number} is not an entry "
                '({"size": int, "root": 64 hex digits})'
            )
        size, root = entry
        if found.setdefault(size, root) != root:
            raise NoteError(reason=f"head history {path} line {number} gives size {size} a second root")
    return found


def _write_head(path: Path, doc: dict[str, Any], *, fsync: bool) -> None:
    """Write the head document ``doc`` to ``path`` atomically (:func:`_replace_durably`).

    Raises:
        StoreError: it cannot be written (names the file and the OS error).
    """
    data = (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    try:
        _replace_durably(path, data, fsync=fsync)
    except OSError as exc:
        raise StoreError(f"retained head {path} cannot be written: {exc}") from exc


_HELD = threading.local()
"""The lock files this thread holds (``paths``: a set of absolute paths), for re-entry."""


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock on ``path`` (``fcntl.flock``), held for the block; re-entrant within a
    thread (a nested block for the same path takes nothing more). Tried without blocking, with sleeps
    growing from 5 ms to 0.5 s between tries, for at most :data:`LOCK_WAIT` seconds.

    Raises:
        HeadLockBusy: another process held it all that time (names ``path``).
        StoreUnavailable: the platform has no ``fcntl`` (Windows): a compare-and-write of retained heads
            without the lock could let one process overwrite another's newer head, so it is refused
            rather than done unlocked.
        OSError: the lock file cannot be created or opened.
    """
    held: set[str] = _HELD.__dict__.setdefault("paths", set())  # this thread's own set
    key = os.path.abspath(path)
    if key in held:
        yield
        return
    try:
        import fcntl
    except ImportError:
        raise StoreUnavailable(
            url=str(path),
            reason="no file locking here (Python has no fcntl module on this platform); retained heads "
            "and witness state are only updated under an exclusive lock",
        ) from None
    _make_dirs(path.parent)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    try:
        _acquire(fd, path, fcntl)
        held.add(key)
        try:
            yield
        finally:
            held.discard(key)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _acquire(fd: int, path: Path, fcntl: Any) -> None:
    """Take ``fcntl.flock(fd, LOCK_EX)`` within :data:`LOCK_WAIT` seconds (:func:`_file_lock`).

    Raises:
        HeadLockBusy: still held by another process when the wait is over.
        OSError: ``flock`` failed for another reason than the lock being held.
    """
    limit = LOCK_WAIT
    deadline = time.monotonic() + limit
    pause = _LOCK_FIRST_SLEEP
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
        left = deadline - time.monotonic()
        if left <= 0:
            raise HeadLockBusy(lock=path, waited=limit)
        time.sleep(min(pause, left))
        pause = min(pause * 2, _LOCK_MAX_SLEEP)


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
        doc = json.loads(_read_regular(path))
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


def _read_regular(path: Path) -> str:
    """The text (UTF-8) of the head file ``path``, opened without blocking on a FIFO, only when it is a
    regular file.

    Raises:
        FileNotFoundError: it does not exist.
        OSError: it is not a regular file (a folder, a FIFO: ``EISDIR``/``EINVAL``) or cannot be read.
        ValueError: it is not UTF-8.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        code = errno.EISDIR if stat.S_ISDIR(mode) else errno.EINVAL
        raise OSError(code, f"not a regular file (mode {stat.filemode(mode)})")
    with open(fd, "rb") as fh:  # closes fd
        return fh.read().decode("utf-8")
