"""Import real agent transcripts into the ledger: format detection, dedup by file sha256, one transaction.

``import_file(store, path)`` reads a transcript with the matching importer (``claude-code``, ``codex``,
``openhands``, ``swe-agent``, ``gemini-cli``, ``mini-swe-agent``, ``openhands-v1``, ``openai-agents`` or
``aider``; an OpenHands V1 conversation is its folder or the folder's ``base_state.json``),
then records every resulting session (a main session and its sub-agent children) through the
:class:`~flightlog.recorder.Recorder` in ONE transaction: a crash mid-import leaves nothing half-imported.
Each imported session starts with a ``custom`` event ``import_source`` carrying the file's sha256, size,
importer name and version, and the warnings (skipped lines), so provenance is inside the hash chain.
Rows carry the transcript's own times as ``recorded_at_ms`` when the format has them (Claude Code, Codex:
``ImportedSession.event_times_ms``; the session's metadata then says ``"source_times": true``), so
``show``, run durations and the session's created time are the source's; the seal written at the end of an
import is stamped with the import time.

With a :class:`~flightlog.integrity.notary.Notary` (the CLI passes the user's), every imported session is
recorded with signed checkpoints and **sealed** at the end (it is the complete record of a finished file):
a ``session_sealed`` event and a checkpoint over it, in the same transaction.

Importing a file whose sha256 was imported before *with the same format* records nothing and reports the
existing session (a record made with another format never blocks this one: its dedup key is then
``<sha256>/<format>``). An explicit ``format`` that recognises nothing of the file (:func:`recognises`)
refuses it: nothing is recorded. A
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
from . import (
    aider,
    claude_code,
    codex,
    gemini_cli,
    mini_swe_agent,
    openai_agents,
    openhands,
    openhands_v1,
    swe_agent,
)
from .base import ImportedSession, ImportWarning, read_jsonl
from .jsondoc import looks_like_json_array_of_events, read_json_document

if TYPE_CHECKING:
    from ..integrity.notary import Notary

__all__ = [
    "FORMATS",
    "ImportResult",
    "ImportWarning",
    "ImportedSession",
    "detect_format",
    "import_file",
    "import_paths",
    "iter_transcripts",
    "recognises",
]

FORMATS: dict[str, ModuleType] = {
    claude_code.FORMAT: claude_code,
    codex.FORMAT: codex,
    openhands.FORMAT: openhands,
    swe_agent.FORMAT: swe_agent,
    gemini_cli.FORMAT: gemini_cli,
    mini_swe_agent.FORMAT: mini_swe_agent,
    openhands_v1.FORMAT: openhands_v1,
    openai_agents.FORMAT: openai_agents,
    aider.FORMAT: aider,
}
"""Importer modules by format name; each has ``FORMAT``, ``VERSION``, ``looks_like`` and ``read``."""

_DOCUMENT_FORMATS: tuple[ModuleType, ...] = (
    openhands,
    swe_agent,
    mini_swe_agent,
    openai_agents,
    openhands_v1,
    gemini_cli,
)
"""Formats whose file is one JSON document (``looks_like`` takes the whole decoded document)."""
_JSONL_TOO: tuple[ModuleType, ...] = (gemini_cli,)
"""Document formats whose file may also be JSONL (Gemini CLI: legacy ``.json`` and ``.jsonl``)."""
_TEXT_FORMATS: tuple[ModuleType, ...] = (aider,)
"""Formats that are not JSON: recognised by their ``looks_like_file(path)``."""
_DOCUMENT_SUFFIXES = frozenset({".json", ".traj"})

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
    """Name the importer for a file: a whole JSON document first (unless the name ends in ``.jsonl``),
    then the first ``probe_lines`` decodable JSONL records, then (rarely) the rest of the file: the first
    format that recognises any record of it (see :func:`recognises`).

    An OpenHands V1 conversation folder (or its ``base_state.json``) is ``openhands-v1``; a file
    aider's ``looks_like_file`` recognises is ``aider``.

    Raises:
        ImportFormatError: no known format recognises anything of the file (the reason lists the
            supported formats; it does not suggest ``--format``: none would fit); for a ``.json``/``.traj``
            file that is not valid JSON, the decoder's reason (line and column).
    """
    if openhands_v1.conversation_folder(path) is not None:
        return openhands_v1.FORMAT
    for text_module in _TEXT_FORMATS:
        if text_module.looks_like_file(path):
            return str(text_module.FORMAT)
    document_error: ImportFormatError | None = None
    if path.suffix.lower() != ".jsonl":
        try:
            document = read_json_document(path, [])
        except ImportFormatError as exc:
            document_error = exc
        else:
            for module in _DOCUMENT_FORMATS:
                if module.looks_like(document):
                    return str(module.FORMAT)
            del document
    scratch: list[ImportWarning] = []
    for count, record in enumerate(read_jsonl(path, scratch), start=1):
        for name, module in FORMATS.items():
            if module.looks_like(record.value):
                return name
        if count >= probe_lines:
            break
    if document_error is not None and path.suffix.lower() in _DOCUMENT_SUFFIXES:
        raise document_error
    for name, module in FORMATS.items():
        jsonl = module not in _DOCUMENT_FORMATS or module in _JSONL_TOO
        if jsonl and module not in _TEXT_FORMATS and recognises(module, path):
            return name
    raise ImportFormatError(
        path=str(path),
        reason=f"not a transcript of a supported format ({', '.join(FORMATS)}): no format recognises "
        "any record of it",
    )


def recognises(module: ModuleType, path: Path) -> bool:
    """Whether the importer ``module`` recognises anything of the file: its ``looks_like`` accepts the
    whole JSON document (OpenHands, SWE-agent, mini-swe-agent, RunState, a legacy Gemini CLI session) or
    at least one JSONL record (Claude Code, Codex, Gemini CLI), read line by line until the first one; aider
    by its ``looks_like_file``; OpenHands V1 by its conversation folder."""
    if module is openhands_v1 and openhands_v1.conversation_folder(path) is not None:
        path = path / "base_state.json" if path.is_dir() else path
    if module in _TEXT_FORMATS:
        return bool(module.looks_like_file(path))
    if module in _DOCUMENT_FORMATS:
        try:
            if module.looks_like(read_json_document(path, [])):
                return True
        except (ImportFormatError, OSError):
            pass
        if module not in _JSONL_TOO:
            return False
    return any(module.looks_like(record.value) for record in read_jsonl(path, []))


def iter_transcripts(paths: Iterable[Path]) -> Iterator[Path]:
    """Files named, and transcripts under folders named (recursively, sorted by path).

    Under a folder: ``*.jsonl`` and ``*.traj`` files, and those ``*.json`` files whose first 64 KiB open a
    JSON array of OpenHands events or a legacy Gemini CLI session, mini-swe-agent ``*.traj.json``
    trajectories, the ``base_state.json`` of each OpenHands V1 conversation folder (its ``events/*.json``
    are read with it) and aider ``.aider.chat.history.md`` files (other JSON, such as configuration files
    and RunState files, is left alone: name those explicitly). Claude Code sub-agent files whose parent
    transcript is beside them are left out: the parent's import records them.

    Raises:
        ImportFormatError: a path does not exist.
    """
    for path in paths:
        if path.is_dir():
            found = (
                p
                for p in path.rglob("*")
                if (p.suffix == ".jsonl" and not claude_code.imported_with_parent(p))
                or p.suffix == ".traj"
                or (p.suffix == ".json" and p.is_file() and looks_like_json_array_of_events(p))
                or _other_transcript(p)
            )
            yield from sorted(p for p in found if p.is_file())
        elif path.is_file():
            yield path
        else:
            raise ImportFormatError(path=str(path), reason="no such file or folder")


def _other_transcript(path: Path) -> bool:
    """A file a folder import picks up for the formats added in issue 17 (see :func:`iter_transcripts`)."""
    if not path.is_file():
        return False
    if path.name == "base_state.json":
        return openhands_v1.conversation_folder(path) is not None
    if path.name.endswith(".traj.json"):
        return mini_swe_agent.looks_like_file(path)
    if path.suffix == ".json":
        return gemini_cli.looks_like_legacy_file(path)
    return path.name.endswith(".aider.chat.history.md") and aider.looks_like_file(path)


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
        ImportFormatError: unknown ``format``, undetectable format, a ``format`` that recognises nothing of
            the file (the reason names the format; the error the file), or a file with no session in it.
        StoreError: the store refused the write (nothing is recorded then).
    """
    if path.is_dir() and openhands_v1.conversation_folder(path) is not None:
        path = path / "base_state.json"
    fmt = detect_format(path) if format == "auto" else format
    module = FORMATS.get(fmt)
    if module is None:
        raise ImportFormatError(
            path=str(path), reason=f"unknown format {fmt!r} (choose {', '.join(FORMATS)})"
        )
    if format != "auto" and not recognises(module, path):
        raise ImportFormatError(
            path=str(path), reason=f"not a {fmt} transcript: the {fmt} importer recognises nothing of it"
        )
    sha, size = file_sha256(path)
    result = ImportResult(path=path, format=fmt, source_sha256=sha)
    dedup_key, previous = _find_import(store, sha, fmt)
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
                ImportRecord(dedup_key, ids[sessions[0].key], fmt, module.VERSION, path.name, now_ms())
            )
    except StoreError:
        # Another process imported the same file while we read it: its transaction won, ours rolled back
        # whole. Report the file as already imported rather than failing; anything else propagates.
        _, previous = _find_import(store, sha, fmt)
        if previous is None:
            raise
        return ImportResult(path, fmt, sha, [previous.session_id], duplicate=True, warnings=result.warnings)
    return result


def _find_import(store: Store, sha: str, fmt: str) -> tuple[str, ImportRecord | None]:
    """The dedup key to record an import of these bytes with ``fmt`` under, and the earlier import of
    them with ``fmt`` (None when there is none).

    The key is the sha256; when those bytes were first imported with another format, ``<sha256>/<fmt>``
    (the ``imports`` table is keyed by one string), so a record never blocks a different format.
    """
    first = store.find_import(sha)
    if first is None or first.importer == fmt:
        return sha, first
    key = f"{sha}/{fmt}"
    return key, store.find_import(key)


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
    times = _row_times(session)
    recorder = Recorder.create(
        store,
        session_id=ids[session.key],
        task=session.task,
        source=f"import:{provenance['format']}",
        parent_session_id=parent,
        metadata={**session.metadata, **provenance, **({"source_times": True} if times else {})},
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
        stop = start + _CHUNK
        recorder.append_many(events[start:stop], recorded_at_ms=times[start:stop] if times else None)
    if notary is None:
        return len(events)
    recorder.finish(_status(session))  # seal: a session_sealed event and a checkpoint over it
    return len(events) + 1


def _row_times(session: ImportedSession) -> list[int] | None:
    """The ``recorded_at_ms`` of the header and each event: the source's own times (the header: the
    session's start), an event without one taking the time before it, never earlier than the row before
    (a source whose clock stepped back reads as no time passing). None when the source gave no time."""
    if session.started_at_ms is None or len(session.event_times_ms) != len(session.events):
        return None
    times = [session.started_at_ms]
    for at in session.event_times_ms:
        times.append(max(times[-1], at) if at is not None else times[-1])
    return times


def _status(session: ImportedSession) -> str:
    """``completed`` when the last run ended normally, else the last terminal reason or ``incomplete``."""
    for event in reversed(session.events):
        if isinstance(event, RunTerminal):
            return "completed" if event.reason in ("completed", "end_turn", "stop") else event.reason
    return "incomplete"
