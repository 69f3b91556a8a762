"""Import real agent transcripts into the ledger: format detection, sessions keyed by the source's own
identity, incremental appends, one transaction per import.

``import_file(store, path)`` reads a transcript with the matching importer (``claude-code``, ``codex``,
``openhands``, ``swe-agent``, ``gemini-cli``, ``mini-swe-agent``, ``openhands-v1``, ``openai-agents`` or
``aider``; an OpenHands V1 conversation is its folder or the folder's ``base_state.json``), then records every resulting session (a main session and its sub-agent
children) through the :class:`~flightlog.recorder.Recorder` in ONE transaction: a crash mid-import leaves
nothing half-imported. A new session starts with a ``custom`` event ``import_source`` carrying the file's
sha256, size, importer name and version, and the warnings (skipped lines), so provenance is inside the
hash chain. Rows carry the transcript's own times as ``recorded_at_ms`` when the format has them (Claude
Code, Codex: ``ImportedSession.event_times_ms``; the session's metadata then says ``"source_times": true``).
The session's ``created_at_ms`` is the transcript's first zone-aware timestamp (``ImportedSession.started_at_ms``)
and its metadata says ``"created_from": "source"``; a source without one (aider and OpenHands write local
times without a zone, SWE-agent trajectories and Agents SDK ``RunState`` none) is created at the import time,
``"created_from": "import"`` (:func:`flightlog.sessions.created_at` reads it for display).

**Identity and growth.** A session is recorded under the source's own id (``ImportedSession.key``:
``claude-code:<sessionId>``, ``codex:<rollout id>``, ``gemini-cli:<sessionId>``, ``aider:<first launch>``,
``openhands:<file stem>``, ``swe-agent:<instance>``),
and an ``imports`` row ``source:<key>`` (:func:`identity_key`) names the session that records it (whose
metadata says ``"incremental": true``); ``Store.resolve_session`` falls back to those keys, so a session
recorded under an earlier key (a Claude Code file imported before its ``sessionId`` line, under its stem)
is found by its source's id too, and it takes the task and creation time a later import gives when the first
one had neither.
Importing a source again appends only what it gained: the importer re-reads the whole source (its fold
state is recomputed from the source, never stored), :func:`check_prefix` checks that the events it reads
first are byte for byte the recorded ones (their chain hash, recomputed from the stored header, equals the
stored one), and the rest is appended to the same chain. A source whose past changed is refused with the
first differing seq (nothing recorded): the ledger never forks a session silently. An older or shorter
copy of a recorded source (a backup) adds nothing. A Claude Code *resume copy* in another file (a new
``sessionId`` whose first records copy an earlier session's) is recognised by
:mod:`flightlog.importers.resume`: its copied runs are recorded but not counted again. Importing exactly
the same bytes again (same sha256, same format) records nothing and reports the session (``duplicate``).

**Settled events and the end of a session.** While a source may still grow, only its *settled* events
are recorded (``ImportedSession.settled``): what the end of the file closes (an open completion, pending
calls, the last run's ``run_terminal``) is left out, and a torn last line is waited for
(:func:`~flightlog.importers.base.torn_tail_waits`); the session's status says what the recorded events
hold, not the file's unrecorded end: the last recorded run's end (``completed``, ``aborted``...), else
``incomplete`` (``running`` with ``live``, as ``flightlog watch`` passes: the watcher sets it back to
``incomplete`` when it stops), so ``ls``, ``show`` and ``runs`` say the ledger's state until the end is
recorded. A
session is recorded whole, and sealed with a notary (a ``session_sealed`` event and a checkpoint over
it), only when its source shows it ended:

* Claude Code, Codex CLI and Gemini CLI: a session file never says it ended (current
  ``claude --resume``, ``codex resume`` and ``gemini --resume`` append to it), so the main session stays
  open; a Claude Code sub-agent has ended when the parent's ``Task`` result reports it ``completed``. A Gemini CLI rewind or
  history rewrite is appended (``rollbacked``), never a change to what was recorded; its legacy ``.json``
  chat, rewritten in place, grows message by message (a changed earlier message is refused, naming the seq).
* aider: the chat history is appended to at every launch and never says it ended: open.
* OpenHands V1: the conversation folder gains an event file per event and a finished conversation takes
  new messages again: open (its ``events/`` files are part of the import's identity).
* OpenHands V0, SWE-agent, mini-swe-agent and OpenAI Agents ``RunState``: the file is one JSON document
  saved as the record of a run (``settled`` None): ended.
* ``seal=True`` (``flightlog import --seal``): the caller states the transcripts are complete.

Later sources that grow after their session was sealed are refused. Without a notary nothing is sealed;
with one, every import ends with a signed checkpoint over what it recorded.

**Formats.** An explicit ``format`` that recognises nothing of the file (:func:`recognises`) refuses it:
nothing is recorded, and no dedup row is written, so a wrong ``--format`` never blocks the right one (the
dedup key of bytes first imported with another format is ``<sha256>/<format>``).

**Sessions imported by older versions** (keyed by the file's sha256, recorded whole, no identity row) stay
as they are, readable and verifiable: a grown copy of their source is recorded as a new session
``<key>@<sha256[:12]>`` (metadata ``supersedes: <key>``), which later imports continue.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from ..encoding import canonical_bytes, parse_json
from ..errors import ImportFormatError, InvalidSessionId, SessionNotFound, StoreError
from ..events import Custom, RunStarted, RunTerminal, SessionEvent
from ..ledger import chain_hash
from ..notarization import SEAL_KIND
from ..recorder import Recorder
from ..store.base import ImportRecord, Store, check_session_id
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
    resume,
    swe_agent,
)
from .base import (
    EventSpool,
    ImportedSession,
    ImportWarning,
    read_jsonl,
    spooled_events,
    torn_tail_waits,
)
from .jsondoc import looks_like_json_array_of_events, read_json_document

if TYPE_CHECKING:
    from ..integrity.notary import Notary

__all__ = [
    "FORMATS",
    "ImportResult",
    "ImportWarning",
    "ImportedSession",
    "check_format",
    "check_prefix",
    "describe_difference",
    "detect_format",
    "identity_key",
    "import_file",
    "import_paths",
    "is_sealed",
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
        events: Events this import recorded in all sessions (0 when the sessions were up to date).
        duplicate: True when these exact bytes had been imported before (nothing recorded).
        warnings: Lines skipped or changed, with line numbers.
        continued: Sessions an earlier import created that this one appended to.
        idle: Sessions a ``live`` import left ``running`` although their transcript shows the last run
            ended, its end not yet recorded (a Claude Code session waiting for its next prompt):
            ``flightlog watch`` publishes them as ``waiting_input``, the others it left running as
            ``running``.
    """

    path: Path
    format: str
    source_sha256: str
    session_ids: list[str] = field(default_factory=list)
    events: int = 0
    duplicate: bool = False
    warnings: list[ImportWarning] = field(default_factory=list)
    continued: list[str] = field(default_factory=list)
    idle: list[str] = field(default_factory=list)


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


def iter_transcripts(paths: Iterable[Path | str]) -> Iterator[Path]:
    """Files named, and transcripts under folders named (recursively, sorted by path); a ``str`` path is
    taken as a :class:`~pathlib.Path`.

    Under a folder: ``*.jsonl`` and ``*.traj`` files, and those ``*.json`` files whose first 64 KiB open a
    JSON array of OpenHands events or a legacy Gemini CLI session, mini-swe-agent ``*.traj.json``
    trajectories, the ``base_state.json`` of each OpenHands V1 conversation folder (its ``events/*.json``
    are read with it) and aider ``.aider.chat.history.md`` files (other JSON, such as configuration files
    and RunState files, is left alone: name those explicitly). Claude Code sub-agent files whose parent
    transcript is beside them are left out: the parent's import records them.

    Raises:
        ImportFormatError: a path does not exist.
    """
    for path in map(Path, paths):
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
        elif path.exists():  # a FIFO, a socket, a device: reading it could block or never end
            raise ImportFormatError(path=str(path), reason="not a regular file or a folder")
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
    store: Store, paths: Iterable[Path | str], *, format: str = "auto", notary: Notary | None = None
) -> Iterator[ImportResult]:
    """Import every transcript under ``paths`` (see :func:`iter_transcripts`), one result per file
    (one :class:`~flightlog.importers.resume.RunIndex` shared by all: the store is read once to find
    resume copies)."""
    index = resume.RunIndex()
    for path in iter_transcripts(paths):
        yield import_file(store, path, format=format, notary=notary, run_index=index)


def import_file(
    store: Store,
    path: Path | str,
    *,
    format: str = "auto",
    notary: Notary | None = None,
    seal: bool = False,
    live: bool = False,
    run_index: resume.RunIndex | None = None,
) -> ImportResult:
    """Import one transcript file, or what it added since the last import; see the module docstring.

    Args:
        store: The store.
        path: The transcript (a ``str`` is taken as a :class:`~pathlib.Path`).
        format: ``auto`` or a name of :data:`FORMATS`.
        notary: Sign checkpoints (None: unsigned); a session is sealed when it ended (see the module
            docstring) and a notary is given.
        seal: The caller states the transcript is complete: record what its end closes (the last run,
            pending calls, a torn last line kept byte-exact) and seal each session (with a notary).
        live: The source is being written now (``flightlog watch``): a session whose ledger holds an open
            run gets the status ``running`` rather than ``incomplete``, also when the file shows that run
            ended (then it is listed in ``ImportResult.idle``).
        run_index: Where to look up the runs other Claude Code sessions record (resume copies), kept up
            to date with what this import records; None: read from the store.

    Raises:
        ImportFormatError: unknown ``format``, undetectable format, a ``format`` that recognises nothing of
            the file (the reason names the format; the error the file), a file with no session in it, or a
            source whose events differ from what an earlier import of the same session recorded (the
            reason names the session and the first differing seq; nothing is recorded).
        StoreError: the store refused the write (nothing is recorded then).
    """
    path = Path(path)
    if path.is_dir() and openhands_v1.conversation_folder(path) is not None:
        path = path / "base_state.json"
    for attempt in (1, 2):
        try:
            return _import_once(store, path, format, notary, seal=seal, live=live, index=run_index)
        except StoreError:
            # Another process recorded this source while we read it (its transaction won, ours rolled
            # back whole): read again, which finds what it recorded and appends only what is left.
            if attempt == 2:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def _import_once(
    store: Store,
    path: Path,
    format: str,
    notary: Notary | None,
    *,
    seal: bool,
    live: bool,
    index: resume.RunIndex | None,
) -> ImportResult:
    fmt, module = _importer(path, format)
    sha, size = file_sha256(path)
    result = ImportResult(path=path, format=fmt, source_sha256=sha)
    dedup_key, previous = _find_import(store, _dedup_sha(module, path, sha), fmt)
    if previous is None and dedup_key != sha:
        previous = _legacy_import(store, sha, fmt)
    if previous is not None and not seal:
        return _duplicate(result, previous.session_id)
    with nullcontext() if seal else torn_tail_waits(), spooled_events():
        sessions: list[ImportedSession] = module.read(path, result.warnings)
        if module is claude_code:
            sessions = _with_resume_copies(store, path, sessions, result, index)
    try:
        recorded = _record_sessions(store, path, module, sessions, result, notary,
                                    (dedup_key, previous, size), seal=seal, live=live)  # fmt: skip
        if index is not None and module is claude_code:
            for session, session_id in zip(sessions, recorded.session_ids, strict=False):
                index.add(session_id, resume.run_ids_of(session))
        return recorded
    finally:
        for session in sessions:
            if isinstance(session.events, EventSpool):
                session.events.close()


def _record_sessions(
    store: Store,
    path: Path,
    module: ModuleType,
    sessions: list[ImportedSession],
    result: ImportResult,
    notary: Notary | None,
    dedup: tuple[str, ImportRecord | None, int],
    *,
    seal: bool,
    live: bool,
) -> ImportResult:
    """Record what ``sessions`` add to the store, in one transaction (see :func:`import_file`)."""
    fmt, sha = result.format, result.source_sha256
    dedup_key, previous, size = dedup
    if not sessions or not any(s.events for s in sessions):
        raise ImportFormatError(path=str(path), reason=f"no {fmt} session found in the file")
    for session in sessions:  # before the transaction: the error names the file, nothing is written
        try:
            check_session_id(session.key)
        except InvalidSessionId as bad:
            raise ImportFormatError(
                path=str(path), reason=f"session id {session.key!r} {bad.reason}; refused, nothing written"
            ) from bad
    provenance = {
        "format": fmt,
        "importer_version": module.VERSION,
        "source_sha256": sha,
        "source_name": path.name,
        "size_bytes": size,
    }
    with store.transaction():
        targets = _targets(store, sessions, sha, path)
        main = targets[sessions[0].key]
        if previous is not None and not main.existing:
            return _duplicate(result, previous.session_id)  # --seal of bytes an older version imported
        for session in sessions:
            target = targets[session.key]
            written = _Writer(store, session, targets, provenance, result, notary, path)
            written.write(ended=seal or session.settled is None, live=live)
            result.session_ids.append(target.session_id)
        if previous is None:
            store.record_import(
                ImportRecord(dedup_key, main.session_id, fmt, module.VERSION, path.name, now_ms())
            )
    result.duplicate = previous is not None and result.events == 0  # --seal of a sealed import: nothing
    return result


def _with_resume_copies(
    store: Store,
    path: Path,
    sessions: list[ImportedSession],
    result: ImportResult,
    index: resume.RunIndex | None,
) -> list[ImportedSession]:
    """The Claude Code sessions read again with the runs other sessions already record marked as resume
    copies (:mod:`flightlog.importers.resume`); ``sessions`` itself when none is."""
    existing = [known.session_id for known in (_known(store, s, path) for s in sessions) if known is not None]
    scratch: list[ImportWarning] = []
    index = index or resume.RunIndex()
    recorded = resume.recorded_runs(store, sessions, existing, scratch, path, index)
    if not recorded:
        result.warnings.extend(scratch)
        return sessions
    for session in sessions:
        if isinstance(session.events, EventSpool):
            session.events.close()
    result.warnings.clear()
    again: list[ImportedSession] = claude_code.read(path, result.warnings, recorded_runs=recorded)
    result.warnings.extend(scratch)
    resume.label_copies(store, again, index)
    return again


def _importer(path: Path, format: str) -> tuple[str, ModuleType]:
    """The format name and importer module for ``path`` (detected for ``auto``, else checked)."""
    fmt = detect_format(path) if format == "auto" else format
    module = FORMATS.get(fmt)
    if module is None:
        raise ImportFormatError(
            path=str(path), reason=f"unknown format {fmt!r} (choose {', '.join(FORMATS)})"
        )
    if format != "auto":
        check_format(path, fmt)
    return fmt, module


def check_format(path: Path, format: str) -> None:
    """Check that the importer ``format`` (a name in :data:`FORMATS`) recognises anything of the file
    (:func:`recognises`), before anything is written for it.

    Raises:
        ImportFormatError: it does not; the reason names the format the file reads as
            (:func:`detect_format`) and suggests ``-f auto``, or says no format recognises it.
        KeyError: ``format`` is not in :data:`FORMATS`.
    """
    if recognises(FORMATS[format], path):
        return
    try:
        detected = detect_format(path)
    except ImportFormatError:
        hint = "no format recognises it"
    else:
        hint = f"it reads as {detected}: `-f auto` (the default) imports it"
    raise ImportFormatError(
        path=str(path),
        reason=f"not a {format} transcript: the {format} importer recognises nothing of it ({hint})",
    )


def _dedup_sha(module: ModuleType, path: Path, sha: str) -> str:
    """What identifies the bytes an import reads: the file's sha256, or, when the importer also reads
    companion files (``companion_files``: Claude Code's sub-agent files, an OpenHands V1 conversation's
    event files), the sha256 of the file's and
    their sha256 hex digests joined by ``+``."""
    companions: list[Path] = getattr(module, "companion_files", lambda _: [])(path)
    if not companions:
        return sha
    digests = [sha, *(file_sha256(p)[0] for p in companions)]
    return hashlib.sha256("+".join(digests).encode("ascii")).hexdigest()


def _legacy_import(store: Store, sha: str, fmt: str) -> ImportRecord | None:
    """An import of this file's bytes (companions aside) by an older version, which keyed its dedup by
    the file's sha256 alone; None when there is none or the session it made is continued by this
    version (its metadata says ``"incremental": true``)."""
    _, old = _find_import(store, sha, fmt)
    if old is None:
        return None
    try:
        incremental = store.get_session(old.session_id).metadata.get("incremental") is True
    except SessionNotFound:
        return None
    return None if incremental else old


def _duplicate(result: ImportResult, session_id: str) -> ImportResult:
    result.duplicate = True
    result.session_ids = [session_id]
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


def identity_key(native_key: str) -> str:
    """The ``imports`` row naming the session that records the source session ``native_key``
    (``source:<native_key>``, e.g. ``source:claude-code:<sessionId>``)."""
    return f"source:{native_key}"


@dataclass(frozen=True)
class _Target:
    """Where a source session is recorded: its session id and whether an earlier import created it."""

    session_id: str
    existing: bool


def _known(store: Store, session: ImportedSession, path: Path) -> ImportRecord | None:
    """The ``imports`` row of the session recording ``session``: its identity row, else
    the identity row of one of its :attr:`~ImportedSession.earlier_keys` written by an import of a file of
    this name (the same file, before it showed its own id), else None."""
    known = store.find_import(identity_key(session.key))
    if known is not None:
        return known
    for key in session.earlier_keys:
        earlier = store.find_import(identity_key(key))
        if earlier is not None and earlier.source_name == path.name:
            return earlier
    return None


def _targets(store: Store, sessions: list[ImportedSession], sha: str, path: Path) -> dict[str, _Target]:
    """Each source session's target: the session its identity row names (an incremental import made
    it), else the session an import of this file recorded under one of its ``earlier_keys`` (its identity
    row is added: later imports find it by its key; the caller checks the recorded events are the file's
    first ones), else ``key`` when free, else ``key@<sha256[:12]>`` (a session an older version imported
    under ``key``, kept as it is: readable, never continued)."""
    targets: dict[str, _Target] = {}
    for session in sessions:
        known = _known(store, session, path)
        if known is not None and known.source_sha256 != identity_key(session.key):
            store.record_import(replace(known, source_sha256=identity_key(session.key)))
        if known is not None:
            targets[session.key] = _Target(known.session_id, True)
            continue
        try:
            store.get_session(session.key)
            targets[session.key] = _Target(f"{session.key}@{sha[:12]}", False)
        except SessionNotFound:
            targets[session.key] = _Target(session.key, False)
    return targets


class _Writer:
    """Records one source session: creates it, or appends what it gained since the last import."""

    def __init__(
        self,
        store: Store,
        session: ImportedSession,
        targets: dict[str, _Target],
        provenance: dict[str, object],
        result: ImportResult,
        notary: Notary | None,
        path: Path,
    ) -> None:
        self.store = store
        self.session = session
        self.target = targets[session.key]
        self.parent = targets[session.parent_key].session_id if session.parent_key in targets else None
        self.provenance = provenance
        self.result = result
        self.notary = notary
        self.path = path
        self.times = _row_times(session)

    def write(self, *, ended: bool, live: bool) -> None:
        """Record the session's settled events (all of them when ``ended``), then its status or seal."""
        count = len(self.session.events) if ended or self.session.settled is None else self.session.settled
        status = _status(self.session.events, count)  # what the ledger holds, not the file's unrecorded end
        # while watched the ledger's open run is live: running, also when the file shows the run ended
        # (its end waits for the next import): the session is idle between prompts, which the watcher
        # publishes as waiting_input (ImportResult.idle); when the watch stops, the row goes back to
        # incomplete (Watcher.run), what the ledger holds
        if live and not ended and status == "incomplete":
            status = "running"
            if _status(self.session.events, len(self.session.events)) != "incomplete":
                self.result.idle.append(self.target.session_id)
        if self.target.existing:
            found = self._continue(count, seal_due=ended and self.notary is not None)
            if found is None:
                self.store.set_session_status(self.target.session_id, status)
                return
            recorder, start = found
        else:
            recorder, start = self._create(status), 0
        self._append(recorder, start, count)
        if ended and self.notary is not None:
            recorder.finish(status)  # seal: a session_sealed event and a checkpoint over it
            self.result.events += 1
        else:
            recorder.checkpoint()
            self.store.set_session_status(self.target.session_id, status)
        if self.target.existing:
            self._adopt_details()
            self.result.continued.append(self.target.session_id)

    def _adopt_details(self) -> None:
        """A session whose first import came before its source gave a task and a time (a Claude Code file
        imported before its first prompt, recorded under its stem: empty task, created at the import)
        takes them from this import of the grown source, as a single import of it records them."""
        session, sid = self.session, self.target.session_id
        record = self.store.get_session(sid)
        # Each detail on its own: the file may show its time (a hook line) one import before its prompt.
        task = record.task or session.task
        started = session.started_at_ms if record.metadata.get("created_from") == "import" else None
        if task == record.task and started is None:
            return
        self.store.set_session_details(
            sid,
            task=task,
            created_at_ms=record.created_at_ms if started is None else started,
            metadata={**record.metadata, **({} if started is None else {"created_from": "source"})},
        )

    def _create(self, status: str) -> Recorder:
        session, sid = self.session, self.target.session_id
        recorder = Recorder.create(
            self.store,
            session_id=sid,
            task=session.task,
            source=f"import:{self.provenance['format']}",
            parent_session_id=self.parent,
            metadata={
                **session.metadata,
                **self.provenance,
                "incremental": True,
                **({"source_times": True} if self.times else {}),
                # created_at_ms: the transcript's first zone-aware time, else (none) the import time
                "created_from": "source" if session.started_at_ms is not None else "import",
                **({"supersedes": session.key} if sid != session.key else {}),
            },
            status=status,
            created_at_ms=session.started_at_ms,
            notary=self.notary,
        )
        self.store.record_import(
            ImportRecord(
                identity_key(session.key),
                sid,
                str(self.provenance["format"]),
                str(self.provenance["importer_version"]),
                self.path.name,
                now_ms(),
            )
        )
        warnings = [str(w) for w in self.result.warnings[:200]]
        header = Custom(
            custom_kind="import_source",
            payload={**self.provenance, "native_key": session.key, "warnings": warnings},
        )
        recorder.append_many([header], recorded_at_ms=self.times[:1] if self.times else None)
        self.result.events += 1
        return recorder

    def _continue(self, count: int, *, seal_due: bool) -> tuple[Recorder, int] | None:
        """Attach to the recorded session when the source gained settled events since, or holds exactly
        them and is to be sealed now (after checking the recorded ones are the source's first ones); None
        when there is nothing to write."""
        sid = self.target.session_id
        record = self.store.get_session(sid)
        stored = record.events - 1  # the import_source header is seq 0
        sealed = is_sealed(self.store, sid, record.head_seq)
        if sealed:
            stored -= 1
        if sealed and count > stored:
            raise ImportFormatError(
                path=str(self.path),
                reason=f"{sid} was sealed as ended, but the source has {count - stored} event(s) more: "
                "refusing to record them (nothing recorded)",
            )
        check_prefix(self.store, sid, self.session.events, min(stored, count), self.path)
        if count < stored or (count == stored and (sealed or not seal_due)):
            return None
        return Recorder.attach(self.store, sid, notary=self.notary, full=self.notary is None), stored

    def _append(self, recorder: Recorder, start: int, count: int) -> None:
        events, times = self.session.events, self.times
        for first in range(start, count, _CHUNK):
            last = min(first + _CHUNK, count)
            stamps = times[first + 1 : last + 1] if times else None
            if isinstance(events, EventSpool):
                # the spool holds the canonical bytes: record them as they are (never re-encoding what
                # was encoded when the importer made it); the recorder decodes only the events the
                # projection reads (what a rebuild of the projection would read for them)
                recorder.append_encoded(events.rows_range(first, last), recorded_at_ms=stamps)
            else:
                recorder.append_many(events[first:last], recorded_at_ms=stamps)
        self.result.events += max(0, count - start)


def is_sealed(store: Store, session_id: str, head_seq: int) -> bool:
    """Whether the session's last row (at ``head_seq``, -1: none) is its seal (``Custom``
    ``session_sealed``): an import sealed as ended, which a grown source can no longer continue."""
    if head_seq < 0:
        return False
    for row in store.read_events(session_id, start=head_seq, stop=head_seq + 1):
        if row.kind == "custom":
            return bool(parse_json(row.event_bytes).get("custom_kind") == SEAL_KIND)
    return False


def check_prefix(
    store: Store, session_id: str, events: Sequence[SessionEvent], count: int, path: Path
) -> None:
    """Check that seqs ``1..count`` of the recorded session are exactly ``events[:count]`` (the
    ``import_source`` header is seq 0): their chain hash, recomputed over the canonical bytes of the
    events read now from the header's stored hash, equals the stored one at seq ``count``.

    Raises:
        ImportFormatError: they differ; the reason names the session and the first differing seq (the
            source rewrote what an earlier import recorded: refused rather than forked) and the user's
            ways on: the recorded version stays, another database takes this one, a restored file grows.
    """
    if count <= 0:
        return
    rows = {row.seq: row for row in store.read_events(session_id, start=0, stop=1)}
    rows.update({row.seq: row for row in store.read_events(session_id, start=count, stop=count + 1)})
    if 0 not in rows or count not in rows:
        raise ImportFormatError(path=str(path), reason=f"{session_id} lacks recorded seq {count}")
    head = rows[0].hash
    for seq in range(1, count + 1):
        head = chain_hash(head, seq, _event_bytes(events, seq - 1))
    if head == rows[count].hash:
        return
    seq, what, line = _first_difference(store, session_id, events, count)
    raise ImportFormatError(
        path=str(path),
        line=line,
        reason=f"{session_id} differs from this source at seq {seq} ({what}): "
        "the source changed what an earlier import recorded; refusing to fork the session (nothing "
        f"recorded). What was recorded stays (`flightlog show {session_id}`); to record this version as well, "
        f"import it into another database (`flightlog --db OTHER.db import {path}`); once the file starts "
        "with what was recorded again, an import appends its new lines",
    )


def _first_difference(
    store: Store, session_id: str, events: Sequence[SessionEvent], count: int
) -> tuple[int, str, int | None]:
    """The first seq in ``1..count`` whose stored bytes differ from the event read now: ``(seq, what, line)``,
    ``what`` saying how (:func:`describe_difference`), ``line`` the source file's line of the event read now
    when the importer recorded one (its ``payload.line``, 1-based), else None."""
    for row in store.read_events(session_id, start=1, stop=count + 1):
        now = _event_bytes(events, row.seq - 1)
        if now != row.event_bytes:
            return row.seq, describe_difference(row.event_bytes, now), _source_line(now)
    return count, "no difference found", None  # pragma: no cover - the chain said they differ


_SHOWN = 40
"""Characters of each differing value :func:`describe_difference` shows."""


def describe_difference(recorded: bytes, now: bytes) -> str:
    """How an event read now differs from the one recorded, in one short clause for an import's refusal:
    both kinds when they differ (a ``custom`` event by its ``custom_kind``), else the first differing field
    by its dotted path (``payload.text``) with both values cut to 40 characters each.

    Args:
        recorded: The stored canonical bytes (a JSON object).
        now: The canonical bytes of the event read from the source now.

    Returns:
        ``recorded custom codex.session_meta, read now run_started``, or ``custom codex.unparsed_line,
        payload.text: recorded "{bad json", read now "{bad JSON"``.
    """
    old, new = parse_json(recorded), parse_json(now)
    kinds = _kind_name(old), _kind_name(new)
    if kinds[0] != kinds[1]:
        return f"recorded {kinds[0]}, read now {kinds[1]}"
    path, was, is_now = _first_field_difference(old, new, "")
    return f"{kinds[0]}, {path or 'the event'}: recorded {_shown(was)}, read now {_shown(is_now)}"


def _kind_name(event: object) -> str:
    if not isinstance(event, dict):
        return "?"
    kind = str(event.get("kind", "?"))
    return f"{kind} {event['custom_kind']}" if kind == "custom" and "custom_kind" in event else kind


_MISSING = object()


def _first_field_difference(old: object, new: object, path: str) -> tuple[str, object, object]:
    """The dotted path (``a.b``, ``a[2]``) of the first differing value, in key order, and both values
    (:data:`_MISSING` for an absent key or item)."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(old.keys() | new.keys()):
            a, b = old.get(key, _MISSING), new.get(key, _MISSING)
            if a != b:
                return _first_field_difference(a, b, f"{path}.{key}" if path else str(key))
    elif isinstance(old, list) and isinstance(new, list):
        for index in range(max(len(old), len(new))):
            a = old[index] if index < len(old) else _MISSING
            b = new[index] if index < len(new) else _MISSING
            if a != b:
                return _first_field_difference(a, b, f"{path}[{index}]")
    return path, old, new


def _shown(value: object) -> str:
    if value is _MISSING:
        return "nothing"
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


def _source_line(now: bytes) -> int | None:
    """The source line an importer recorded in the event (``payload.line``, a positive int), else None."""
    event = parse_json(now)
    payload = event.get("payload") if isinstance(event, dict) else None
    line = payload.get("line") if isinstance(payload, dict) else None
    return line if isinstance(line, int) and not isinstance(line, bool) and line > 0 else None


def _event_bytes(events: Sequence[SessionEvent], index: int) -> bytes:
    """The canonical bytes of ``events[index]`` (read as stored from an :class:`EventSpool`)."""
    return events.raw(index) if isinstance(events, EventSpool) else canonical_bytes(events[index])


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


def _status(events: Sequence[SessionEvent], count: int) -> str:
    """The status of a session whose ledger holds the first ``count`` of ``events``: ``completed`` when its
    last run ended normally, its terminal reason when it ended otherwise (``aborted``...), else
    ``incomplete`` (no run ended, or a ``run_started`` after the last ``run_terminal``: the ledger holds
    an open run, whatever the unrecorded end of the file says). Reads back from ``count - 1`` by index, as
    far as the last run's start: ``events`` may be spooled to disk (a slice would load them all)."""
    for index in range(count - 1, -1, -1):
        event = events[index]
        if isinstance(event, RunStarted):
            return "incomplete"
        if isinstance(event, RunTerminal):
            return "completed" if event.reason in ("completed", "end_turn", "stop") else event.reason
    return "incomplete"
