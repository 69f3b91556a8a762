"""``db repair --discard-wal``: recover a SQLite ledger whose write-ahead log is poisoned.

Seed 003 points users at ``db repair`` when the session database cannot be opened "(for example a poisoned
WAL)". The procedure, in order, never deleting anything:

1. Refuse unless the caller passed ``discard_wal=True`` (frames only in the WAL are lost).
2. Look at what the WAL holds (:func:`inspect_wal`, on a scratch copy of the database and its WAL in a
   temporary folder, never the originals). If SQLite reads it, ``PRAGMA integrity_check`` passes with
   it, its committed frames change pages of the database file and every session verifies with it (a WAL
   of another database passes integrity_check: SQLite cannot tell whose frames they are; one that changes
   no page adds nothing to lose, and the database read with it, the file, is verified at step 6), the WAL is
   not poisoned, only not yet checkpointed: refuse unless ``force=True``, naming how many committed
   frames and changed pages would be lost. If discarding would drop a retirement record (``flightlog db
   copy`` retires the source; the record may live only in the WAL while a reader kept it from being
   checkpointed), refuse unless ``force=True`` (then ``RepairReport.dropped_retirement`` says so):
   without it the retired store would be writable again next to the live store its ledger moved to
   (split brain). For a WAL SQLite cannot vouch for, the record is looked for in its raw bytes (its
   origin line, ``flightlog.local/<ledger id>/_/retired``).
3. Back up the database, ``-wal`` and ``-shm`` files into a new folder ``<db>.repair-<UTC stamp>/``; each
   copy is fsynced, then the folder.
4. Record the WAL's size (bytes) and sha256 in ``repair.json`` in that folder (fsynced).
5. Quarantine: move the ``-wal`` and ``-shm`` files into the folder's ``quarantine/`` (a rename, not a
   delete).
6. Verify with a read-only open: ``PRAGMA integrity_check`` and every session's chain (streaming).
7. On any failure, restore the original files from the backup and raise :class:`RepairError`.

A database with no WAL, or an empty one (0 bytes: no frames), has nothing to set aside: the repair says so
(``RepairReport.nothing_to_do``) and writes nothing, no backup folder, not even the ``-shm`` a read-only
open would create (``flightlog verify --all`` checks such a database).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import FlightlogError, RepairError
from ..narration import plural
from ..recorder import verify_session
from ..store.sqlite import SqliteStore

__all__ = ["RepairReport", "WalContents", "inspect_wal", "repair_discard_wal"]

_RETIREMENT_ORIGIN = re.compile(rb"flightlog\.local/[0-9a-f]{8,64}/_/retired\n")
"""The first line of a retirement record (:mod:`flightlog.integrity.retirement`), found in raw pages."""


@dataclass
class RepairReport:
    """What a repair did: backup folder, WAL size (bytes) and sha256, sessions verified, lost frames note;
    ``nothing_to_do`` when there was no WAL frame to set aside (then ``backup_dir`` is "" and nothing was
    written or verified)."""

    database: str
    backup_dir: str
    wal_present: bool
    wal_size_bytes: int | None
    wal_sha256: str | None
    quarantined: list[str] = field(default_factory=list)
    sessions_verified: int = 0
    events_verified: int = 0
    integrity_check: str = ""
    nothing_to_do: bool = False
    wal: WalContents | None = None
    """What the WAL held (:func:`inspect_wal`); None when there was nothing to set aside."""
    dropped_retirement: bool = False
    """``force`` discarded a retirement record only the WAL held: this retired store is writable again."""


@dataclass(frozen=True)
class WalContents:
    """What discarding a WAL would drop, measured on a scratch copy (:func:`inspect_wal`).

    Attributes:
        readable: SQLite opened the database with the WAL, ``PRAGMA integrity_check`` said ``ok`` and
            every session verifies with it.
        integrity_check: ``ok``, else that check's first line, the error SQLite raised, or why the ledger
            read with the WAL does not verify (``readable`` False).
        frames: Committed frames SQLite recovered from the WAL (0 when not readable).
        changed_pages: Pages of the database file those frames change (0 when not readable): what
            discarding the WAL loses.
        retirement_only_in_wal: The WAL holds a retirement record the database file does not (read with
            SQLite when readable, else found in the WAL's raw bytes).
    """

    readable: bool
    integrity_check: str
    frames: int
    changed_pages: int
    retirement_only_in_wal: bool

    def loses_commits(self) -> bool:
        """Whether discarding drops committed, valid transactions (a readable WAL that changes pages)."""
        return self.readable and self.changed_pages > 0


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _backup(files: list[Path], folder: Path) -> None:
    for src in files:
        dst = folder / src.name
        shutil.copy2(src, dst)
        _fsync_path(dst)
    _fsync_path(folder)


def _verify_read_only(db: Path, report: RepairReport) -> None:
    """``PRAGMA integrity_check`` on a read-only open, then every session's chain (:func:`_verify_ledger`).

    Raises:
        RepairError: the open failed, the check found a problem, or a session diverges.
    """
    try:
        conn = sqlite3.connect(db.resolve().as_uri() + "?mode=ro", uri=True)
        try:
            report.integrity_check = str(conn.execute("PRAGMA integrity_check").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise RepairError(path=str(db), reason=f"read-only open failed after quarantine: {exc}") from exc
    if report.integrity_check != "ok":
        raise RepairError(path=str(db), reason=f"integrity_check: {report.integrity_check}")
    _verify_ledger(db, report)


def _verify_ledger(db: Path, report: RepairReport) -> None:
    """Verify every session's chain (streaming, read-only), counting sessions and events in ``report``.

    Raises:
        RepairError: a session diverges (the first divergence named).
    """
    store = SqliteStore(db, read_only=True)
    try:
        for session in store.list_sessions():
            result = verify_session(store, session.session_id, decode=False)
            if not result.ok:
                raise RepairError(
                    path=str(db), reason=f"session {session.session_id} diverges: {result.divergences[0]}"
                )
            report.sessions_verified += 1
            report.events_verified += result.events
    finally:
        store.close()


def _restore(files: list[Path], folder: Path) -> None:
    for original in files:
        shutil.copy2(folder / original.name, original)
        _fsync_path(original)


def repair_discard_wal(db: str | Path, *, discard_wal: bool, force: bool = False) -> RepairReport:
    """Quarantine a poisoned WAL and verify the database without it (see module docstring).

    Args:
        db: The SQLite database file.
        discard_wal: Must be True: the caller accepts that commits only in the WAL are set aside.
        force: Discard even a WAL SQLite reads that passes ``integrity_check`` (its committed frames are
            lost), and one holding a retirement record the database file lacks (the store is writable
            again: ``RepairReport.dropped_retirement``).

    Returns:
        A :class:`RepairReport`; its ``backup_dir`` holds the backups, ``repair.json`` and ``quarantine/``;
        with ``nothing_to_do`` (no WAL, or one of 0 bytes) nothing was written.

    Raises:
        RepairError: refused (flag missing, no such file; without ``force``: a healthy WAL whose commits
            would be lost, or a retirement record only the WAL holds; nothing written) or failed
            (originals restored, nothing deleted).
    """
    path = Path(db)
    if not discard_wal:
        raise RepairError(
            path=str(path),
            reason="refusing without --discard-wal: commits still only in the WAL would be set aside",
        )
    if not path.is_file():
        raise RepairError(path=str(path), reason="no such database file")
    wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
    wal_size = wal.stat().st_size if wal.exists() else None
    if not wal_size:
        return RepairReport(str(path), "", wal_size is not None, wal_size, None, nothing_to_do=True)
    contents = inspect_wal(path)
    _refuse_losing(path, contents, force=force)
    present = [p for p in (path, wal, shm) if p.exists()]
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    folder = Path(f"{path}.repair-{stamp}")
    folder.mkdir()
    _backup(present, folder)
    report = RepairReport(
        database=str(path),
        backup_dir=str(folder),
        wal_present=wal.exists(),
        wal_size_bytes=wal.stat().st_size if wal.exists() else None,
        wal_sha256=_sha256(wal) if wal.exists() else None,
        wal=contents,
        dropped_retirement=contents.retirement_only_in_wal,
    )
    quarantine = folder / "quarantine"
    quarantine.mkdir()
    try:
        for side in (wal, shm):
            if side.exists():
                side.rename(quarantine / side.name)
                report.quarantined.append(side.name)
        _fsync_path(quarantine)
        _fsync_path(path.parent)
        _verify_read_only(path, report)
    except (OSError, FlightlogError) as exc:
        _restore(present, folder)
        reason = exc.reason if isinstance(exc, RepairError) else str(exc)
        raise RepairError(path=str(path), reason=f"{reason}; original files restored from {folder}") from exc
    finally:
        _write_report(folder, report)
    return report


def _write_report(folder: Path, report: RepairReport) -> None:
    target = folder / "repair.json"
    target.write_text(json.dumps(asdict(report), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    _fsync_path(target)


def _refuse_losing(path: Path, contents: WalContents, *, force: bool) -> None:
    """Refuse (unless ``force``) to drop a retirement record only the WAL holds, or the committed frames
    of a WAL that is not poisoned.

    Raises:
        RepairError: naming what would be lost and that ``--force`` discards it anyway; nothing written.
    """
    if force:
        return
    healthy = (
        f"the WAL is not poisoned (SQLite reads it, integrity_check {contents.integrity_check}): "
        f"discarding it would lose {plural(contents.frames, 'committed frame')} changing "
        f"{plural(contents.changed_pages, 'page')} of the database file"
    )
    if contents.retirement_only_in_wal:
        why = f"{healthy}, among them" if contents.loses_commits() else "the WAL holds"
        raise RepairError(
            path=str(path),
            reason=f"refusing to discard the WAL: {why} the retirement record `flightlog db copy` wrote, "
            "which the database file does not hold yet: without it this retired store would be writable again next to the live store its "
            "ledger moved to (split brain); nothing written; --force discards it anyway",
        )
    if contents.loses_commits():
        raise RepairError(
            path=str(path),
            reason=f"refusing to discard the WAL: {healthy}; nothing written (SQLite copies them into the "
            "database file at its next checkpoint); --force discards them anyway",
        )


def inspect_wal(db: str | Path) -> WalContents:
    """What discarding ``db``'s WAL would drop, measured on one copy of the database in a temporary folder
    (the originals are only read): the copy is read alone first (does the file hold a retirement?), then
    with a copy of the WAL beside it (SQLite recovers the WAL's committed frames, ``PRAGMA
    integrity_check``, then ``PRAGMA wal_checkpoint(TRUNCATE)`` folds them in); the pages that then differ
    from the original file are what the WAL adds. Only when it adds some is every session verified with
    it: when it adds none the database read with it is the file, which the repair verifies anyway
    (:func:`repair_discard_wal`, step 6), and no commit or retirement is lost. Scratch space: one copy of
    the database and one of its WAL.

    Args:
        db: The SQLite database file; its ``-wal`` must exist.

    Returns:
        A :class:`WalContents`.

    Raises:
        OSError: the database or its WAL cannot be read, or the temporary folder written.
    """
    path = Path(db)
    wal = Path(f"{path}-wal")
    with tempfile.TemporaryDirectory(prefix="flightlog-repair-") as scratch:
        viewed = Path(scratch) / "viewed.db"
        shutil.copyfile(path, viewed)
        retired_in_file = _retired_in(viewed)  # no WAL beside the copy yet: the file alone
        for side in (Path(f"{viewed}-wal"), Path(f"{viewed}-shm")):  # what that open left, if anything
            side.unlink(missing_ok=True)
        shutil.copyfile(wal, f"{viewed}-wal")
        try:
            conn = sqlite3.connect(viewed, isolation_level=None)
            try:
                check = str(conn.execute("PRAGMA integrity_check").fetchone()[0])
                retired = _retired(conn) if check == "ok" else None
                frames = int(conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1])
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            finally:
                conn.close()
        except sqlite3.Error as exc:
            check, retired, frames = f"error: {exc}", None, 0
        changed = _changed_pages(path, viewed) if retired is not None else 0
        if changed:
            check = _same_ledger(viewed)
        if retired is None or check != "ok":  # SQLite cannot vouch for the WAL's pages: look for a record
            return WalContents(False, check, 0, 0, _raw_retirement(wal) and not retired_in_file)
        return WalContents(True, check, frames, changed, retired and not retired_in_file)


def _same_ledger(viewed: Path) -> str:
    """``ok`` when the database read with the WAL (checkpointed into ``viewed``, after its
    ``integrity_check`` passed) is a ledger whose every session verifies (:func:`_verify_ledger`), else why
    not: a WAL of another database passes ``integrity_check`` (SQLite cannot tell whose frames they are)
    but holds no such ledger."""
    probe = RepairReport(str(viewed), "", True, None, None)
    try:
        _verify_ledger(viewed, probe)
    except FlightlogError as exc:
        return f"not this ledger with the WAL: {exc}"
    return "ok"


def _retired(conn: sqlite3.Connection) -> bool:
    """Whether the database ``conn`` reads holds a retirement (``ledger_meta`` key ``retired``)."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'ledger_meta'").fetchone() is None:
        return False
    return conn.execute("SELECT 1 FROM ledger_meta WHERE key = 'retired'").fetchone() is not None


def _retired_in(alone: Path) -> bool:
    """Whether the database file alone (a copy, no WAL beside it) holds a retirement. A file SQLite cannot
    read counts as holding none: then a retirement in the WAL is reported as the WAL's only (the
    conservative answer; the repair's verification fails on such a file anyway)."""
    try:
        conn = sqlite3.connect(alone, isolation_level=None)
        try:
            return _retired(conn)
        finally:
            conn.close()
    except sqlite3.Error:
        return False


def _raw_retirement(wal: Path) -> bool:
    """Whether the WAL's raw bytes hold a retirement record's origin line (read in 1 MiB chunks)."""
    tail = b""
    with wal.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            if _RETIREMENT_ORIGIN.search(tail + chunk):
                return True
            tail = chunk[-128:]  # longer than any origin line, so none is split unseen
    return False


def _changed_pages(original: Path, viewed: Path) -> int:
    """Pages (of ``viewed``'s page size) that differ between two database files, counting pages only one
    of them has: ``original`` is the database file (only read), ``viewed`` the copy read with the WAL."""
    with sqlite3.connect(viewed) as conn:
        page = int(conn.execute("PRAGMA page_size").fetchone()[0])
    conn.close()
    changed = 0
    with original.open("rb") as a, viewed.open("rb") as b:
        while True:
            left, right = a.read(page), b.read(page)
            if not left and not right:
                return changed
            changed += left != right
