"""``flightlog watch``: follow the folders agent tools write their transcripts to and record each session
as it is written, with no change to the agent.

A :class:`Watcher` polls (``os.stat``, every ``interval_s``, 0.25 s by default) every transcript under its
folders (:func:`default_folders`: ``~/.claude/projects``, ``$CODEX_HOME/sessions`` (``~/.codex/sessions``),
Gemini CLI's ``~/.gemini/tmp/*/chats`` when a Gemini importer is registered; or the folders given), and
imports a file again whenever its size or modification time changed (for a Claude Code transcript, also
those of its ``<sessionId>/subagents/agent-*.jsonl`` files; for an OpenHands V1 ``base_state.json``, its
conversation's ``events/*.json``): :func:`~flightlog.importers.import_file` (with ``live=True`` for a
file it may follow, below), which appends only the new settled events of each session and waits for a torn
last line. A line landing is recorded by the next poll: within ``interval_s`` plus the import's time.
A poll imports one file at a time (:meth:`Watcher.polling`), each in its own transaction; :meth:`Watcher.run`
heartbeats between them when a heartbeat is due, and stops before the next file once told to stop, so a
first poll over many transcripts (minutes) is stopped promptly by Ctrl-C, keeping what it recorded.

Restart without duplicates: the watcher keeps no state of its own. After a restart (or a SIGKILL: an
import is one transaction, so it recorded all of a file's new events or none) it imports every file again,
and an import records only what its sessions lack (same bytes: nothing, read from the ``imports`` table;
grown: the events after the recorded ones). The cost of an import is the file's size: the importer reads
the whole file each time (its fold state is recomputed, never stored).

A file that cannot be imported (no known format, a source that rewrote its past) is reported once and
tried again only when it changes.

**Live while followed** (seed 002: durable outranks live, nothing fabricated). A session is followed
when its file grows while the watch runs, or when the watch finds it modified within :data:`RECENT_S`
seconds (in use, perhaps idle between prompts) holding bytes no import recorded yet (written since the
last import, e.g. while no watch ran). A transcript found already written that gives nothing new keeps
what its ledger says (``interrupted``): an old one (a watch started over months of sessions does not show
them all ``running``), and a recent one whose bytes were all imported before (a restart: the watch has
seen no sign of life, so it does not claim the run is live; it follows it from the moment it grows). A
followed session whose ledger holds an open run (no ``run_terminal`` recorded after its last
``run_started``) has the row status ``running``, not ``incomplete``, and a live record
(:class:`flightlog.live.LiveRegistry`, the ``live_runs`` table the kernel publishes to) heartbeated
every :data:`HEARTBEAT_S` seconds while :meth:`Watcher.run` runs (all of them in one transaction per
round: :meth:`Watcher.heartbeat`): ``running`` while the file is mid-turn, ``waiting_input`` when it
shows the last run ended and its end waits for the next import (a Claude Code session idle between
prompts: ``ImportResult.idle``). So ``ls`` says ``running`` and ``runs`` says ``running``/
``waiting_input`` · live, not ``abandoned``, however old the transcript's own times are, while the watch
hears from it. A heartbeat is evidence, so only a session the watch has heard from is heartbeated: one
waiting for input (no process is needed for that state), or one whose file changed within ``silent_s``
seconds (:data:`SILENT_S`, the read model's 30 s lease). An agent that died mid-turn (its file stops
growing, its process gone) is not heartbeated past that window, so once the lease lapses too ``runs``
and the dashboard flag it ``abandoned`` (:func:`flightlog.live.is_abandoned`: nothing heard within the
lease) in the state its events give, no outcome invented; ``ls`` still says ``running``, with the note
on stderr. A live agent in a tool call that writes nothing for as long (a long build) reads the same
until its file changes: then it is published live again (``flightlog watch --silent-after`` widens
the window). A file found at start that was last modified longer ago than the window is followed
(``running``) but not published live. When :meth:`Watcher.run` returns (Ctrl-C, SIGTERM, an error) it
clears those live records and sets each such row back to ``incomplete``: what the ledger holds decides
again (``ls``: ``interrupted``, ``runs``: ``terminal · interrupted`` until an import records the end or
``--seal``).

**Killed** (``kill -9``: no :meth:`Watcher.release`). Its rows stay ``running`` and its live records stop
being heartbeated: ``runs`` and the dashboard show the live state (``live (Ns ago)``) until the 30 s lease
(:data:`flightlog.live.DEFAULT_LEASE_MS`) lapses, then the state the ledger's events give, flagged
``abandoned`` (no end was recorded, so no outcome is invented), and ``ls`` says ``running`` with a note on
stderr that it is abandoned. The next ``flightlog watch`` on this host ends the killed watch's own run
(:func:`flightlog.runs.jobs.close_abandoned`) and does its release (:func:`release_abandoned`: every live
record of its process id cleared, each row set back to ``incomplete``) before it polls; then it follows
again what the rule above picks.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ImportFormatError, SessionNotFound
from ..live import DEFAULT_LEASE_MS, LiveRegistry, host_id
from ..runs.model import RunState
from ..runs.projection import no_run_sessions
from . import FORMATS, ImportResult, claude_code, import_file, iter_transcripts, openhands_v1

if TYPE_CHECKING:
    from ..integrity.notary import Notary
    from ..store.base import Store

__all__ = [
    "HEARTBEAT_S",
    "RECENT_S",
    "SILENT_S",
    "WatchReport",
    "Watcher",
    "default_folders",
    "release_abandoned",
]

HEARTBEAT_S = 5.0
"""Seconds between heartbeats of the followed sessions' live records (well inside the 30 s lease)."""

RECENT_S = 600.0
"""A transcript this watch finds already written is followed live only when it (or a companion file) was
modified within this many seconds of being found: a session in use, perhaps idle between prompts. Older
ones are imported and left to what their ledger holds (an old session is not "running" because a watch
started); one that grows later is followed from then on."""

SILENT_S = DEFAULT_LEASE_MS / 1000
"""Seconds a followed session mid-turn is heartbeated after its transcript last changed (the read model's
lease, :data:`flightlog.live.DEFAULT_LEASE_MS`): past it the watch has no sign that the agent is alive (it
may have died mid-turn, or be in a long silent tool call), so it stops vouching for it, and the lease later
the read model flags it ``abandoned``; the file changing again makes it live again."""

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
        silent_s: float = SILENT_S,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        """Args:
        store: Where sessions are recorded.
        folders: Folders to follow (missing ones are looked at again at each poll).
        notary: Sign what is recorded (None: unsigned).
        interval_s: Seconds between polls (> 0).
        silent_s: Seconds a followed session mid-turn is heartbeated after its file last changed (> 0;
            :data:`SILENT_S`).
        clock: Wall clock in epoch ns: compared with the files' modification times, and the live records'
            times (tests inject one).

        Raises:
            ValueError: ``interval_s`` or ``silent_s`` is not positive.
        """
        if interval_s <= 0:
            raise ValueError("interval_s must be > 0")
        if silent_s <= 0:
            raise ValueError("silent_s must be > 0")
        self.store = store
        self.folders = folders
        self.notary = notary
        self.interval_s = interval_s
        self.silent_s = silent_s
        self._clock = clock
        self._seen: dict[Path, Signature] = {}
        self.imported_events = 0
        self.live = LiveRegistry(store, clock=lambda: clock() // 1_000_000)
        self._followed: set[str] = set()  # sessions this watch set running and publishes live
        self._changed_ns: dict[str, int] = {}  # followed session -> newest mtime of its file (epoch ns)
        self._idle: set[str] = set()  # followed sessions published waiting_input (no process needed)
        self.released: list[str] = []  # the sessions the last release() stopped following, sorted

    def files(self) -> Iterator[Path]:
        """Transcripts under the folders now (as ``flightlog import`` finds them, plus Gemini chats)."""
        for folder in self.folders:
            if folder.is_dir():
                yield from iter_transcripts([folder])
                yield from _gemini_chats(folder)

    def poll(self) -> list[WatchReport]:
        """Import every file whose signature changed since the last poll; one report per import tried."""
        return list(self.polling())

    def polling(self, stop: threading.Event | None = None) -> Iterator[WatchReport]:
        """:meth:`poll` one file at a time: each report is yielded as soon as its import ended (committed:
        one transaction per file), and no further file is imported once ``stop`` is set, so a caller can
        heartbeat and stop between the files of a long poll (a first poll over many transcripts). A file
        the stop left unread is read by the next watch (nothing of it is recorded yet)."""
        for path in self.files():
            if stop is not None and stop.is_set():
                return
            signature = _signature(path)
            if signature is None or self._seen.get(path) == signature:
                continue
            grew = path in self._seen  # changed while watched; else found already written
            report = self._import(path, signature, grew=grew)
            self._seen[path] = signature
            yield report

    def _import(self, path: Path, signature: Signature, *, grew: bool) -> WatchReport:
        """Import ``path`` (``live`` when it grew while watched or is recent) and follow its sessions when
        it grew while watched, or is recent and holds bytes no import recorded yet (module docstring)."""
        changed_ns = max(mtime_ns for _name, _size, mtime_ns in signature)
        recent = self._clock() - changed_ns <= RECENT_S * 1e9
        try:
            result = import_file(self.store, path, notary=self.notary, live=grew or recent)
        except ImportFormatError as exc:
            return WatchReport(path, error=exc.reason)
        except FileNotFoundError:
            return WatchReport(path, error="vanished while being read")
        self.imported_events += result.events
        if grew or (recent and not result.duplicate):
            self._follow(result, changed_ns)
        return WatchReport(path, result=result)

    def _follow(self, result: ImportResult, changed_ns: int) -> None:
        """Follow each session of ``result`` whose ledger holds an open run (module docstring): its row
        reads ``running`` (one an earlier watch left ``incomplete`` again), and its live record is
        published when :meth:`_heard` (its file, last modified at ``changed_ns`` epoch ns, changed within
        :attr:`silent_s`, or it waits for input), else cleared: no sign of life, nothing live claimed."""
        idle = set(result.idle)
        for session_id in result.session_ids:
            status = self.store.get_session(session_id).status
            if status not in ("running", "incomplete") or _holds_no_run(self.store, session_id):
                continue
            if status == "incomplete":
                self.store.set_session_status(session_id, "running")
            self._followed.add(session_id)
            self._changed_ns[session_id] = changed_ns
            if session_id in idle:
                self._idle.add(session_id)
            else:
                self._idle.discard(session_id)
            heard = self._heard(session_id, self._clock())
            if result.events or not heard:
                self.live.clear(session_id)  # a fresh publication: newer than the events just recorded
            if heard:
                state = RunState.WAITING_INPUT if session_id in idle else RunState.RUNNING
                self.live.publish(session_id, state)

    def _heard(self, session_id: str, now_ns: int) -> bool:
        """Whether the watch has evidence that followed session ``session_id`` is alive at ``now_ns``: it
        waits for input (a state no process is needed for), or its file changed within :attr:`silent_s`."""
        if session_id in self._idle:
            return True
        return now_ns - self._changed_ns.get(session_id, 0) <= self.silent_s * 1e9

    def release(self) -> None:
        """Stop publishing the followed sessions: clear their live records and set each row this watch
        left ``running`` back to ``incomplete`` (what the ledger holds: its open run's end not recorded).
        :attr:`released` lists them afterwards (for the CLI's closing line)."""
        self.released = sorted(self._followed)
        for session_id in self.released:
            self.live.clear(session_id)
            try:
                if self.store.get_session(session_id).status == "running":
                    self.store.set_session_status(session_id, "incomplete")
            except SessionNotFound:  # erased or moved by another process meanwhile: nothing to set back
                continue
        self._followed.clear()
        self._changed_ns.clear()
        self._idle.clear()

    def heartbeat(self) -> int:
        """Refresh the heartbeat of each followed session the watch has heard from (:meth:`_heard`: its
        file changed within :attr:`silent_s`, or it waits for input), in one store transaction (one commit
        per round, not one per session: ``bench/watch_heartbeat.py``); returns how many. A session mid-turn
        whose file went silent is left unbeaten: once the lease lapses the read model flags it
        ``abandoned`` (:func:`flightlog.live.is_abandoned`); its file changing again publishes it anew."""
        now_ns = self._clock()
        heard = sorted(sid for sid in self._followed if self._heard(sid, now_ns))
        return len(self.live.heartbeat_many(heard))

    def run(
        self, stop: threading.Event, on_report: Callable[[WatchReport], None] = lambda report: None
    ) -> None:
        """Poll until ``stop`` is set, handing each report to ``on_report``; heartbeat the followed
        sessions every :data:`HEARTBEAT_S` seconds, also between the files of a poll (a first poll over
        many transcripts takes minutes), stop between files once ``stop`` is set, and :meth:`release` the
        followed sessions when it returns or raises."""
        beat = time.monotonic()

        def beat_when_due() -> None:
            nonlocal beat
            if time.monotonic() - beat >= HEARTBEAT_S:
                beat = time.monotonic()
                self.heartbeat()

        try:
            while not stop.is_set():
                for report in self.polling(stop):
                    on_report(report)
                    beat_when_due()
                beat_when_due()
                stop.wait(self.interval_s)
        finally:
            self.release()


def release_abandoned(store: Store, pids: Collection[int]) -> list[str]:
    """Set back what killed watches left live: :meth:`Watcher.release` for the processes ``pids`` (gone
    without running it: ``kill -9``). Each live record one of them published for an imported session
    (source ``import:*``) is cleared and the session's row, when ``running``, set to ``incomplete`` (what
    its ledger holds); one transaction. Live records of other processes (a record naming another host,
    :func:`flightlog.live.host_id`, is of another process whatever its pid), and of sessions that are not
    imports (kernel runs), are left alone. Call it before a new :class:`Watcher` polls: the watch follows
    again the sessions its rule picks (module docstring).

    Args:
        store: The store the killed watches wrote to.
        pids: Process ids of watches known to be gone (``flightlog watch`` passes those of the ``watch``
            runs :func:`flightlog.runs.jobs.close_abandoned` ended: this host, process gone).

    Returns:
        The ids of the sessions set back, sorted.

    Raises:
        StoreError: the store refused the write (nothing is set back then).
    """
    wanted, released = set(pids), []
    with store.transaction():
        for record in store.live_runs():
            if record.pid not in wanted or record.host not in (None, host_id()):  # a pid of another host
                continue
            try:
                session = store.get_session(record.run_id)
            except SessionNotFound:  # a live record naming no session: not a followed import
                continue
            if not session.source.startswith("import:"):
                continue
            store.delete_live_run(record.run_id, owner=record.owner)  # that record, not a newer one
            if session.status == "running":
                store.set_session_status(record.run_id, "incomplete")
            released.append(record.run_id)
    return sorted(released)


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


def _holds_no_run(store: Store, session_id: str) -> bool:
    """Whether the session holds no run (no ``run_started`` yet: a Claude Code file before its first
    prompt); such a session stays ``no run`` in ``ls`` and is not published live."""
    record = replace(store.get_session(session_id), status="running")  # the rule reads running rows
    return session_id in no_run_sessions(store, [record])
