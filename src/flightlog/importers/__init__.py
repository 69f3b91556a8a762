"""Import real agent transcripts into the ledger: format detection, dedup by file sha256, one transaction.

``import_file(store, path)`` reads a transcript with the matching importer (``claude-code`` or ``codex``),
then records every resulting session (a main session and its sub-agent children) through the
:class:`~flightlog.recorder.Recorder` in ONE transaction: a crash mid-import leaves nothing half-imported.
Each imported session starts with a ``custom`` event ``import_source`` carrying the file's sha256, size,
importer name and version, and the warnings (skipped lines), so provenance is inside the hash chain.

With a :class:`~flightlog.checkpoints.Notary` (the CLI passes the user's), every imported session is
recorded with signed checkpoints and **sealed** at the end (it is the complete record of a finished file):
a ``session_sealed`` event and a checkpoint over it, in the same transaction.

Importing a file whose sha256 was imported before records nothing and reports the existing session. A
session whose native id is already recorded from *another* file (a transcript that grew since) is recorded
as a new session ``<key>@<sha256[:12]>``: the ledger never rewrites history.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from ..errors import ImportFormatError, SessionNotFound, StoreError
from ..events import Custom, RunTerminal
from ..recorder import Recorder
from ..store.base import ImportRecord, Store
from ..store.sqlite import now_ms
from . import claude_code, codex
from .base import ImportedSession, ImportWarning, read_jsonl

if TYPE_CHECKING:
    from ..checkpoints import Notary

__all__ = [
    "FORMATS",
    "ImportResult",
    "ImportWarning",
    "ImportedSession",
    "detect_format",
    "import_file",
    "import_paths",
    "iter_transcripts",
]

FORMATS: dict[str, ModuleType] = {claude_code.FORMAT: claude_code, codex.FORMAT: codex}
"""Importer modules by format name; each has ``FORMAT``, ``VERSION``, ``looks_like`` and ``read``."""

_CHUNK = 1000  # events per append_many call inside the import transaction


@dataclass
class ImportResult:
    """What importing one file did.

    Attributes:
        path: The file.
        format: The importer used.
        source_sha256: sha256 hex of the file's bytes.
        session_ids: Sessions recorded (main first, then children); the existing one when ``duplicate``.
        events: Events recorded in all sessions.
        duplicate: True when this exact file had been imported before (nothing recorded).
        warnings: Lines skipped or changed, with line numbers.
    """

    path: Path
    format: str
    source_sha256: str
    session_ids: list[str] = field(default_factory=list)
    events: int = 0
    duplicate: bool = False
    warnings: list[ImportWarning] = field(default_factory=list)


def file_sha256(path: Path) -> tuple[str, int]:
    """sha256 hex and size in bytes of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def detect_format(path: Path, *, probe_lines: int = 50) -> str:
    """Name the importer for a file by its first decodable records.

    Raises:
        ImportFormatError: no known format matches the first ``probe_lines`` records.
    """
    scratch: list[ImportWarning] = []
    for count, record in enumerate(read_jsonl(path, scratch), start=1):
        for name, module in FORMATS.items():
            if module.looks_like(record.value):
                return name
        if count >= probe_lines:
            break
    raise ImportFormatError(path=str(path), reason="not a Claude Code or Codex CLI transcript (use --format)")


def iter_transcripts(paths: Iterable[Path]) -> Iterator[Path]:
    """Files named, and ``*.jsonl`` files under folders named (recursively, sorted).

    Raises:
        ImportFormatError: a path does not exist.
    """
    for path in paths:
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*.jsonl") if p.is_file())
        elif path.is_file():
            yield path
        else:
            raise ImportFormatError(path=str(path), reason="no such file or folder")


def import_paths(
    store: Store, paths: Iterable[Path], *, format: str = "auto", notary: Notary | None = None
) -> Iterator[ImportResult]:
    """Import every transcript under ``paths`` (see :func:`iter_transcripts`), one result per file."""
    for path in iter_transcripts(paths):
        yield import_file(store, path, format=format, notary=notary)


def import_file(
    store: Store, path: Path, *, format: str = "auto", notary: Notary | None = None
) -> ImportResult:
    """Import one transcript file; see the module docstring for the rules.

    Args:
        store: The store.
        path: The transcript.
        format: ``auto`` or a name of :data:`FORMATS`.
        notary: Sign checkpoints and seal each imported session (None: unsigned, unsealed).

    Raises:
        ImportFormatError: unknown ``format``, undetectable format, or a file with no session in it.
        StoreError: the store refused the write (nothing is recorded then).
    """
    fmt = detect_format(path) if format == "auto" else format
    module = FORMATS.get(fmt)
    if module is None:
        raise ImportFormatError(
            path=str(path), reason=f"unknown format {fmt!r} (choose {', '.join(FORMATS)})"
        )
    sha, size = file_sha256(path)
    result = ImportResult(path=path, format=fmt, source_sha256=sha)
    previous = store.find_import(sha)
    if previous is not None:
        result.duplicate = True
        result.session_ids = [previous.session_id]
        return result
    sessions: list[ImportedSession] = module.read(path, result.warnings)
    if not sessions or not any(s.events for s in sessions):
        raise ImportFormatError(path=str(path), reason=f"no {fmt} session found in the file")
    provenance = {
        "format": fmt,
        "importer_version": module.VERSION,
        "source_sha256": sha,
        "source_name": path.name,
        "size_bytes": size,
    }
    try:
        with store.transaction():
            ids = _session_ids(store, sessions, sha)
            for session in sessions:
                result.events += _record(store, session, ids, provenance, result.warnings, notary)
                result.session_ids.append(ids[session.key])
            store.record_import(
                ImportRecord(sha, ids[sessions[0].key], fmt, module.VERSION, path.name, now_ms())
            )
    except StoreError:
        # Another process imported the same file while we read it: its transaction won, ours rolled back
        # whole. Report the file as already imported rather than failing; anything else propagates.
        previous = store.find_import(sha)
        if previous is None:
            raise
        return ImportResult(path, fmt, sha, [previous.session_id], duplicate=True, warnings=result.warnings)
    return result


def _session_ids(store: Store, sessions: list[ImportedSession], sha: str) -> dict[str, str]:
    ids: dict[str, str] = {}
    for session in sessions:
        try:
            store.get_session(session.key)
            ids[session.key] = f"{session.key}@{sha[:12]}"
        except SessionNotFound:
            ids[session.key] = session.key
    return ids


def _record(
    store: Store,
    session: ImportedSession,
    ids: dict[str, str],
    provenance: dict[str, object],
    warnings: list[ImportWarning],
    notary: Notary | None = None,
) -> int:
    parent = ids.get(session.parent_key, session.parent_key) if session.parent_key else None
    recorder = Recorder.create(
        store,
        session_id=ids[session.key],
        task=session.task,
        source=f"import:{provenance['format']}",
        parent_session_id=parent,
        metadata={**session.metadata, **provenance},
        status=_status(session),
        created_at_ms=session.started_at_ms,
        notary=notary,
    )
    header = Custom(
        custom_kind="import_source",
        payload={**provenance, "native_key": session.key, "warnings": [str(w) for w in warnings[:200]]},
    )
    events = [header, *session.events]
    for start in range(0, len(events), _CHUNK):
        recorder.append_many(events[start : start + _CHUNK])
    if notary is None:
        return len(events)
    recorder.finish(_status(session))  # seal: a session_sealed event and a checkpoint over it
    return len(events) + 1


def _status(session: ImportedSession) -> str:
    """``completed`` when the last run ended normally, else the last terminal reason or ``incomplete``."""
    for event in reversed(session.events):
        if isinstance(event, RunTerminal):
            return "completed" if event.reason in ("completed", "end_turn", "stop") else event.reason
    return "incomplete"
