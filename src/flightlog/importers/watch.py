"""``flightlog watch``: follow the folders agent tools write their transcripts to and record each session
as it is written, with no change to the agent.

A :class:`Watcher` polls (``os.stat``, every ``interval_s``, 0.25 s by default) every transcript under its
folders (:func:`default_folders`: ``~/.claude/projects``, ``$CODEX_HOME/sessions`` (``~/.codex/sessions``),
Gemini CLI's ``~/.gemini/tmp/*/chats`` when a Gemini importer is registered; or the folders given), and
imports a file again whenever its size or modification time changed (for a Claude Code transcript, also
those of its ``<sessionId>/subagents/agent-*.jsonl`` files; for an OpenHands V1 ``base_state.json``, its
conversation's ``events/*.json``): :func:`~flightlog.importers.import_file`
with ``live=True``, which appends only the new settled events of each session and waits for a torn last
line. A line landing is recorded by the next poll: within ``interval_s`` plus the import's time.

Restart without duplicates: the watcher keeps no state of its own. After a restart (or a SIGKILL: an
import is one transaction, so it recorded all of a file's new events or none) it imports every file again,
and an import records only what its sessions lack (same bytes: nothing, read from the ``imports`` table;
grown: the events after the recorded ones). The cost of an import is the file's size: the importer reads
the whole file each time (its fold state is recomputed, never stored).

A file that cannot be imported (no known format, a source that rewrote its past) is reported once and
tried again only when it changes.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ImportFormatError
from . import FORMATS, ImportResult, claude_code, import_file, iter_transcripts, openhands_v1

if TYPE_CHECKING:
    from ..integrity.notary import Notary
    from ..store.base import Store

__all__ = ["WatchReport", "Watcher", "default_folders"]

Signature = tuple[tuple[str, int, int], ...]
"""What a poll compares: (name, size in bytes, mtime in ns) of a transcript and its companion files."""


def default_folders(env: dict[str, str] | None = None) -> list[Path]:
    """The folders agent tools write transcripts to, whether they exist yet or not: ``~/.claude/projects``
    (Claude Code), ``$CODEX_HOME/sessions`` or ``~/.codex/sessions`` (Codex CLI), and, when an importer
    whose name starts with ``gemini`` is registered, ``~/.gemini/tmp`` (Gemini CLI's ``*/chats``)."""
    env = dict(os.environ) if env is None else env
    home = Path(env.get("HOME") or Path.home())
    codex = Path(env["CODEX_HOME"]) if env.get("CODEX_HOME") else home / ".codex"
    folders = [home / ".claude" / "projects", codex / "sessions"]
    if any(name.startswith("gemini") for name in FORMATS):
        folders.append(home / ".gemini" / "tmp")
    return folders


@dataclass(frozen=True)
class WatchReport:
    """What one poll did to one file: ``result`` when it was imported, else ``error`` (the reason)."""

    path: Path
    result: ImportResult | None = None
    error: str | None = None


class Watcher:
    """Polls folders and imports what changed. Use :meth:`poll` (one pass) or :meth:`run` (until stopped)."""

    def __init__(
        self,
        store: Store,
        folders: list[Path],
        *,
        notary: Notary | None = None,
        interval_s: float = 0.25,
    ) -> None:
        """Args:
        store: Where sessions are recorded.
        folders: Folders to follow (missing ones are looked at again at each poll).
        notary: Sign what is recorded (None: unsigned).
        interval_s: Seconds between polls (> 0).

        Raises:
            ValueError: ``interval_s`` is not positive.
        """
        if interval_s <= 0:
            raise ValueError("interval_s must be > 0")
        self.store = store
        self.folders = folders
        self.notary = notary
        self.interval_s = interval_s
        self._seen: dict[Path, Signature] = {}
        self.imported_events = 0

    def files(self) -> Iterator[Path]:
        """Transcripts under the folders now (as ``flightlog import`` finds them, plus Gemini chats)."""
        for folder in self.folders:
            if folder.is_dir():
                yield from iter_transcripts([folder])
                yield from _gemini_chats(folder)

    def poll(self) -> list[WatchReport]:
        """Import every file whose signature changed since the last poll; one report per import tried."""
        reports: list[WatchReport] = []
        for path in self.files():
            signature = _signature(path)
            if signature is None or self._seen.get(path) == signature:
                continue
            reports.append(self._import(path))
            self._seen[path] = signature
        return reports

    def _import(self, path: Path) -> WatchReport:
        try:
            result = import_file(self.store, path, notary=self.notary, live=True)
        except ImportFormatError as exc:
            return WatchReport(path, error=exc.reason)
        except FileNotFoundError:
            return WatchReport(path, error="vanished while being read")
        self.imported_events += result.events
        return WatchReport(path, result=result)

    def run(
        self, stop: threading.Event, on_report: Callable[[WatchReport], None] = lambda report: None
    ) -> None:
        """Poll until ``stop`` is set, handing each report to ``on_report``."""
        while not stop.is_set():
            for report in self.poll():
                on_report(report)
            stop.wait(self.interval_s)


def _signature(path: Path) -> Signature | None:
    """(name, size, mtime_ns) of the file and of its companion files (Claude Code sub-agent files, an
    OpenHands V1 conversation's event files), or None when the file is gone."""
    try:
        if path.suffix == ".jsonl":
            files = [path, *claude_code.companion_files(path)]
        elif path.name == "base_state.json":
            files = [path, *openhands_v1.companion_files(path)]
        else:
            files = [path]
        return tuple((p.name, (st := p.stat()).st_size, st.st_mtime_ns) for p in files)
    except FileNotFoundError:
        return None


def _gemini_chats(folder: Path) -> Iterator[Path]:
    """``*/chats/*.json`` under ``folder`` when a Gemini importer is registered (its legacy JSON chats;
    ``*.jsonl`` chats are already found by :func:`iter_transcripts`)."""
    if not any(name.startswith("gemini") for name in FORMATS):
        return
    yield from sorted(p for p in folder.glob("*/chats/*.json") if p.is_file())
