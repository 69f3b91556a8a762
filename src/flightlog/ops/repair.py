"""``db repair --discard-wal``: recover a SQLite ledger whose write-ahead log is poisoned.

Seed 003 points users at ``db repair`` when the session database cannot be opened "(for example a poisoned
WAL)". The procedure, in order, never deleting anything:

1. Refuse unless the caller passed ``discard_wal=True`` (frames only in the WAL are lost).
2. Back up the database, ``-wal`` and ``-shm`` files into a new folder ``<db>.repair-<UTC stamp>/``; each copy
   is fsynced, then the folder.
3. Record the WAL's size (bytes) and sha256 in ``repair.json`` in that folder (fsynced).
4. Quarantine: move the ``-wal`` and ``-shm`` files into the folder's ``quarantine/`` (a rename, not a delete).
5. Verify with a read-only open: ``PRAGMA integrity_check`` and every session's chain (streaming).
6. On any failure, restore the original files from the backup and raise :class:`RepairError`.

A database with no WAL, or an empty one (0 bytes: no frames), has nothing to set aside: the repair says so
(``RepairReport.nothing_to_do``) and writes nothing, no backup folder, not even the ``-shm`` a read-only
open would create (``flightlog verify --all`` checks such a database).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import FlightlogError, RepairError
from ..recorder import verify_session
from ..store.sqlite import SqliteStore

__all__ = ["RepairReport", "repair_discard_wal"]


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


def repair_discard_wal(db: str | Path, *, discard_wal: bool) -> RepairReport:
    """Quarantine a poisoned WAL and verify the database without it (see module docstring).

    Args:
        db: The SQLite database file.
        discard_wal: Must be True: the caller accepts that commits only in the WAL are set aside.

    Returns:
        A :class:`RepairReport`; its ``backup_dir`` holds the backups, ``repair.json`` and ``quarantine/``;
        with ``nothing_to_do`` (no WAL, or one of 0 bytes) nothing was written.

    Raises:
        RepairError: refused (flag missing, no such file) or failed (originals restored, nothing deleted).
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
