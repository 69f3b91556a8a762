"""``flightlog watch``: record the sessions of the coding agents a user already runs, as they are written.

Mounting (the ``flightlog`` app adds it at top level)::

    from .watch import register as register_watch
    register_watch(app, open_db)     # open_db(read_only: bool) -> context manager yielding a Store

It follows the folders agent tools write to (:func:`flightlog.importers.watch.default_folders`) or the
folders given, importing each transcript again when it changes (:class:`flightlog.importers.watch.Watcher`):
one stdout line per import that recorded events (``--json``: one JSON object a line), one stderr line per
file it could not import. It runs until SIGINT (Ctrl-C) or SIGTERM, heeded between files (also during a
first poll over many transcripts: what it imported stays recorded), and is itself recorded as a run of
source ``core_job`` (job ``watch``): ended ``cancelled`` when stopped so, and ``interrupted`` by the next
``watch`` when it was killed. A folder that does not exist yet (a typo, or an agent tool never run) is
still followed, in case it appears, with one warning on stderr naming it at the start; a path that exists
and is a file is refused. While it runs, the sessions it follows are live (``ls``: ``running``; ``runs``:
``running``/``waiting_input`` · live) while it hears from them: a session mid-turn whose transcript has not
changed for ``--silent-after`` seconds (30) is no longer heartbeated, so ``runs`` flags it ``abandoned``
once the lease lapses, until the file changes again; when it stops, each says what its ledger holds
(:mod:`flightlog.importers.watch`), and one stderr line says what it left: its run ``cancelled``, the
followed sessions counted by the word ``ls`` gives them (``interrupted``: an open run, not sealed); with
``--json``, also one closing JSON object on stdout (:func:`_print_stopped_json`); what a killed watch left
live, the next one sets back at its start (:func:`flightlog.importers.watch.release_abandoned`, one note on
stderr). Exit codes: **0** stopped by a signal; **2** usage (a path given that is
a file, not a folder).
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated

import typer

from .console import console

if TYPE_CHECKING:
    from rich.console import Console

    from ..importers.watch import WatchReport
    from ..store.base import Store

__all__ = ["register"]

OpenDb = Callable[[bool], AbstractContextManager["Store"]]
"""``open_db(read_only)``: a context manager yielding an open store, closed on exit."""


def register(app: typer.Typer, open_db: OpenDb) -> None:
    """Add ``watch`` to ``app``."""

    @app.command("watch")
    def watch_cmd(
        folders: Annotated[
            list[Path] | None,
            typer.Argument(
                metavar="FOLDER",
                help="Folders to follow (default: ~/.claude/projects, $CODEX_HOME/sessions or "
                "~/.codex/sessions, and Gemini CLI's ~/.gemini/tmp when its importer is installed; a missing "
                "one is warned about once on stderr and looked at again at every poll; a file is refused).",
            ),
        ] = None,
        interval: Annotated[
            float, typer.Option("--interval", help="Seconds between polls.", min=0.05, max=60.0)
        ] = 0.25,
        silent_after: Annotated[
            float,
            typer.Option(
                "--silent-after",
                help="Seconds a followed session mid-turn stays live after its transcript last changed; past "
                "them the watch stops heartbeating it (runs: abandoned once the 30 s lease lapses; live again "
                "when the file changes). Raise it for tool calls that write nothing for longer.",
                min=1.0,
                max=86400.0,
            ),
        ] = 30.0,
        json_out: Annotated[
            bool,
            typer.Option(
                "--json",
                help='One JSON object a line per import, and a closing one ({"stopped": true, ...}) when stopped.',
            ),
        ] = False,
    ) -> None:
        """Follow agent transcript folders and record each session as it is written (until Ctrl-C)."""
        from ..importers.watch import Watcher, default_folders, release_abandoned
        from ..integrity.notary import Notary
        from ..runs.jobs import CoreJob, close_abandoned

        given = list(folders or [])
        for folder in given:
            if folder.exists() and not folder.is_dir():
                raise typer.BadParameter(f"{folder} is not a folder", param_hint="FOLDER")
        chosen = given or default_folders()
        out, err = console(), console(stderr=True)
        stop = threading.Event()
        with open_db(False) as store, _stopped_by_signals(stop):
            notary = Notary.from_env()
            killed = close_abandoned(store, "watch", notary=notary)
            for stale in killed:
                err.print(f"flightlog: note: {stale} (a watch that was killed) ended as interrupted")
            released = release_abandoned(store, _pids(store, killed))
            if released:
                err.print(
                    f"flightlog: note: {len(released)} session(s) the killed watch followed say what their "
                    "ledgers hold again (interrupted) until their transcripts change"
                )
            goal = f"watch {len(chosen)} folder(s) for agent transcripts"
            job = CoreJob.start(store, "watch", goal, notary=notary, metadata={"folders": len(chosen)})
            for folder in chosen:
                if not folder.is_dir():  # a typo, or a tool not run yet: watched, it may appear later
                    err.print(f"flightlog: warning: {folder} does not exist (yet); watching for it to appear")
            err.print(f"flightlog: watching {', '.join(str(f) for f in chosen)} (run {job.session_id})")
            watcher = Watcher(store, chosen, notary=notary, interval_s=interval, silent_s=silent_after)

            def report(item: WatchReport) -> None:
                _print_report(item, out, err, json_out)
                if item.result is not None and item.result.events:
                    job.advance()
                elif item.error is not None:
                    job.advance(done=0, failed=1)

            try:
                watcher.run(stop, report)
            except BaseException:
                job.finish("failed", {"events": watcher.imported_events})
                raise
            job.finish("cancelled", {"events": watcher.imported_events})
            left = _left(store, watcher.released)
            err.print(_stopped_line(job.session_id, watcher.imported_events, left))
            if json_out:
                _print_stopped_json(job.session_id, watcher.imported_events, left)


def _left(store: Store, released: list[str]) -> dict[str, str]:
    """The sessions a stopped watch followed, each with the word ``ls`` prints for it now (back to what its
    ledger holds: an open run not sealed is ``interrupted``, which the next import or watch continues; the
    app writing it may still be running), in ``released`` order; one erased or moved meanwhile is left out."""
    from ..errors import SessionNotFound
    from ..runs.projection import listed_word, no_run_sessions, resumable_sessions

    records = []
    for sid in released:
        try:
            records.append(store.get_session(sid))
        except SessionNotFound:  # erased or moved meanwhile: nothing of it is left here
            continue
    no_run, resumable = no_run_sessions(store, records), resumable_sessions(store, records)
    return {r.session_id: listed_word(r, no_run=no_run, resumable=resumable) for r in records}


def _print_stopped_json(job_id: str, events: int, left: dict[str, str]) -> None:
    """``--json``'s closing object on stdout, the stderr line's facts keyed as the import lines and ``ls
    --json`` key theirs: ``{"stopped": true, "run_id": JOB, "status": "cancelled", "events": N,
    "session_ids": [followed...], "statuses": {session id: ls's word}}``."""
    from ..narration import state_word

    row = {
        "stopped": True,
        "run_id": job_id,
        "status": state_word("cancelled"),
        "events": events,
        "session_ids": list(left),
        "statuses": left,
    }
    sys.stdout.write(json.dumps(row) + "\n")
    sys.stdout.flush()


def _stopped_line(job_id: str, events: int, left: dict[str, str]) -> str:
    """What a stopped watch left, in the words ``ls`` prints: its own run (``cancelled``: stopped by the user,
    seed 002 ``Cancelled``; the next watch is a new run) and the sessions it followed (``left``: :func:`_left`)."""
    from ..narration import plural, state_word

    words: dict[str, int] = {}
    for word in left.values():
        words[word] = words.get(word, 0) + 1
    line = f"flightlog: stopped; run {job_id} {state_word('cancelled')} ({plural(events, 'event')} recorded)"
    if not left:
        return line + "; it followed no live session"
    states = ", ".join(f"{n} {word}" for word, n in sorted(words.items()))
    line += f"; {plural(len(left), 'followed session')} no longer live, now {states}"
    if "interrupted" in words:
        line += " (not sealed: a later import or watch continues where it stopped)"
    return line


def _pids(store: Store, session_ids: list[str]) -> list[int]:
    """The process ids recorded in the metadata of these ``core_job`` runs (``CoreJob.start`` records it)."""
    found = (store.get_session(session_id).metadata.get("pid") for session_id in session_ids)
    return [pid for pid in found if isinstance(pid, int)]


def _print_report(item: WatchReport, out: Console, err: Console, json_out: bool) -> None:
    """One stdout line per import that recorded events; one stderr line per file that failed."""
    path, result, error = item.path, item.result, item.error
    if error is not None:
        err.print(f"flightlog: warning: {path}: {error}")
        return
    if result is None or not result.events:
        return
    if json_out:
        row = {
            "path": str(path),
            "format": result.format,
            "session_ids": result.session_ids,
            "events": result.events,
            "continued": result.continued,
        }
        sys.stdout.write(json.dumps(row) + "\n")
        sys.stdout.flush()
        return
    stamp = datetime.now(UTC).strftime("%H:%M:%S")
    grew = "continued" if result.continued else "new"
    out.print(f"{stamp}  {result.session_ids[0]}  +{result.events} events from {path.name} ({grew})")


@contextmanager
def _stopped_by_signals(stop: threading.Event) -> Iterator[None]:
    """SIGINT and SIGTERM set ``stop`` (the watch ends its current poll, records its end, exits 0)."""

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
