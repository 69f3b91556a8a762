"""The ``flightlog`` command: thin wrappers that parse, call one library function, and print.

Exit codes: 0 done and intact; 1 it ran and found a problem (divergence, refused attach, store error);
2 the command line was wrong (bad option, unknown or ambiguous session prefix, missing file); 141 (128 +
SIGPIPE, what a shell reports for a tool a closed pipe killed) when the reader of stdout went away, as in
``flightlog ls | head -1``: nothing more is printed, not even an error line.
Every listing command takes ``--json`` (stdout then holds only JSON). Errors, usage mistakes included, are
one stderr line ``flightlog: error: ...``; ``--debug`` shows the traceback. ``-h`` is ``--help``.
"""

from __future__ import annotations

import gc
import json
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .. import __version__
from ..errors import FlightlogError, ImportFormatError, SessionNotFound, install_hint
from ..narration import narrate, plural, short, state_word
from .lazy import LazyTyper
from .options import (
    CONTEXT,
    EXIT_CLOSED_PIPE,
    Advance,
    Group,
    abandoned_notes,
    check_before_printing,
    closed_pipe,
    count_option,
    data_dir_db,
    default_db,
    err,
    handle_errors,
    heads_ahead_lines,
    iso_time,
    open_db,
    operator_option,
    out,
    print_json,
    progress_bar,
    refuse_quietly_diverged,
    session_arg,
    short_session,
    state,
)

if TYPE_CHECKING:
    from ..messages import Message
    from ..store.base import SessionRecord, Store

__all__ = ["EXIT_CLOSED_PIPE", "app", "handle_errors", "main"]

IMPORT_FORMATS = (
    "claude-code",
    "codex",
    "openhands",
    "swe-agent",
    "gemini-cli",
    "mini-swe-agent",
    "openhands-v1",
    "openai-agents",
    "aider",
)
"""``flightlog.importers.FORMATS``'s names, for ``import --format``'s help without loading the importers at
start-up (``tests/test_cli_startup.py`` checks the two agree)."""

app = LazyTyper(  # app() builds each command when it is looked up (cli/lazy.py)
    cls=Group,
    name="flightlog",
    help="A durable, verifiable session ledger for LLM agents.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help text is plain: "[env FLIGHTLOG_DB]" must not be read as rich markup
    context_settings=CONTEXT,
)
db_app = typer.Typer(cls=Group, help="Database maintenance.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(db_app, name="db")


def _version(value: bool) -> None:
    if value:
        out.print(f"flightlog {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            metavar="PATH|URL",
            help="Database path or URL [env FLIGHTLOG_DB; default: user data dir]. A new file is created "
            "(and said so on stderr) only in an existing directory.",
            show_default=False,
        ),
    ] = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks on errors.")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """flightlog: record, verify, replay and inspect agent sessions."""
    state.db = db or default_db()
    state.db_is_default = state.db == data_dir_db()
    state.debug = debug


if TYPE_CHECKING:
    from ..integrity.notary import Notary
    from ..runs.jobs import CoreJob
    from ..store.base import Store


# ─── import / ls / show ───────────────────────────────────────────────────────────────────────


@app.command("import")
def import_cmd(
    paths: Annotated[
        list[Path],
        typer.Argument(
            metavar="PATH",
            help="Transcript files or folders (recursive: *.jsonl, *.traj, *.traj.json, OpenHands *.json and "
            "V1 conversation folders, legacy Gemini CLI *.json, .aider.chat.history.md); - reads one "
            "transcript from stdin.",
        ),
    ],
    format: Annotated[
        str, typer.Option("--format", "-f", help=f"auto or one of: {', '.join(IMPORT_FORMATS)}.")
    ] = "auto",
    json_out: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False,
    seal: Annotated[
        bool,
        typer.Option(
            "--seal",
            help="The transcripts are complete: record what their end closes (the last run, pending calls, "
            "a torn last line) and seal the sessions. Without it a session is sealed only when its source "
            "shows it ended; a later import of a grown file appends what it gained.",
        ),
    ] = False,
) -> None:
    """Import Claude Code, Codex CLI, OpenHands, SWE-agent, Gemini CLI, mini-swe-agent, OpenAI Agents RunState and
    aider transcripts into verified sessions (a line per session).

    A session is keyed by the source's own id: importing a transcript again after it grew appends only
    the new events to the same session.
    """
    if format != "auto" and format not in IMPORT_FORMATS:
        raise typer.BadParameter(
            f"unknown format {format!r} (one of: auto, {', '.join(IMPORT_FORMATS)})", param_hint="--format"
        )
    stdin_args = [p for p in paths if str(p) == "-"]
    if len(stdin_args) > 1:
        raise typer.BadParameter("- (stdin) can be given once", param_hint="PATH")
    if stdin_args and sys.stdin.isatty():
        raise typer.BadParameter("- reads a transcript from stdin: pipe one in", param_hint="PATH")
    missing = [str(p) for p in paths if str(p) != "-" and not p.exists()]
    if missing:
        raise ImportFormatError(path=missing[0], reason="no such file or folder")
    with tempfile.TemporaryDirectory(prefix="flightlog-stdin-") as scratch:
        stdin = _stdin_to_file(Path(scratch)) if stdin_args else None
        _import_paths(
            [stdin if str(p) == "-" and stdin else p for p in paths], format, json_out, stdin, seal=seal
        )


def _stdin_to_file(directory: Path) -> Path:
    """Copy stdin, as bytes, to ``directory/stdin`` (importers read files; the name "stdin" is what the
    ledger records as the source name)."""
    path = directory / "stdin"
    with path.open("wb") as fh:
        shutil.copyfileobj(sys.stdin.buffer, fh)
    return path


def _import_paths(
    paths: list[Path], format: str, json_out: bool, stdin: Path | None, *, seal: bool = False
) -> None:
    """Import every transcript under ``paths``; ``stdin`` (the copy of stdin, if any) is named ``-``. A
    folder import is recorded as a ``core_job`` run and shows a progress bar on a terminal."""
    from ..importers import iter_transcripts
    from ..integrity.notary import Notary
    from ..runs.jobs import CoreJob

    def shown(path: Path) -> str:
        return "-" if path == stdin else str(path)

    if format != "auto":
        _refuse_other_formats(paths, format, shown, json_out)
    with open_db() as store:
        notary = Notary.from_env()  # the user's log key, created on first use; imports are signed
        files: list[Path] = []
        empty: list[Path] = []  # folders named that hold no transcript
        for path in paths:
            found = list(iter_transcripts([path]))
            files.extend(found)
            if not found:
                empty.append(path)
        if not files:
            err.print(
                f"flightlog: error: no transcripts ({_FOLDER_PICKS}) found under "
                + ", ".join(shown(p) for p in paths)
            )
            raise typer.Exit(2)
        for path in empty:  # the other paths are imported: say which named folder gave nothing
            err.print(f"flightlog: warning: no transcripts ({_FOLDER_PICKS}) found under {shown(path)}")
        job = None
        if any(p.is_dir() for p in paths):
            goal = f"import {plural(len(files), 'transcript')} from {plural(len(paths), 'path')}"
            job = CoreJob.start(store, "import", goal, notary=notary, total=len(files))
        try:
            with _heap_frozen():
                results, failed = _import_files(store, files, format, json_out, shown, notary, seal, job)
        except BaseException:
            if job is not None:
                job.finish("cancelled" if isinstance(sys.exc_info()[1], KeyboardInterrupt) else "failed")
            raise
        if job is not None:
            events = sum(int(r.get("events", 0)) for r in results)
            job.finish("failed" if failed else "completed", {"events": events})
    if json_out:
        print_json(results)
    if failed:
        raise typer.Exit(1)


def _refuse_other_formats(
    paths: list[Path], format: str, shown: Callable[[Path], str], json_out: bool
) -> None:
    """With ``--format`` other than auto, when the importer recognises none of the files under ``paths``:
    each one's refusal (naming the format it reads as, suggesting ``-f auto``), exit 1, before the database
    is opened, so a mismatched format never leaves a new, empty database behind. When it recognises some,
    nothing here: the others are refused one by one as they come, as without ``--format``. ``--json``
    prints the results an import prints for refused files (``{path, error}`` each)."""
    from ..importers import check_format, iter_transcripts

    refusals: list[dict[str, Any]] = []
    for path in iter_transcripts(paths):
        try:
            check_format(path, format)
        except ImportFormatError as exc:
            refusals.append({"path": shown(path), "error": exc.reason})
        else:
            return
    if refusals:
        for row in refusals:
            err.print(f"flightlog: error: {row['path']}: {row['error']}")
        if json_out:
            print_json(refusals)
        raise typer.Exit(1)


_FOLDER_PICKS = (
    "*.jsonl, *.traj, *.traj.json, OpenHands and Gemini CLI *.json, OpenHands V1 base_state.json,"
    " .aider.chat.history.md; name other files, such as RunState JSON, one by one"
)
"""What a folder import picks up (:func:`flightlog.importers.iter_transcripts`), as error messages say it."""


@contextmanager
def _heap_frozen() -> Iterator[None]:
    """Keep what this process holds before the import (its modules, their classes and schemas: most of its
    objects) out of the cyclic collector's full passes while the import runs (``gc.freeze``; undone after).

    An import makes few long-lived objects (its events are spooled to disk), so a full pass would mostly
    rescan what was loaded before it. The collector still collects what the import makes. Done here, for
    the ``flightlog import`` process only: the library never changes its host's collector (issue 19).
    """
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _import_files(
    store: Store,
    files: list[Path],
    format: str,
    json_out: bool,
    shown: Callable[[Path], str],
    notary: Notary,
    seal: bool,
    job: CoreJob | None,
) -> tuple[list[dict[str, Any]], int]:
    """Import each file (one bad file never stops the others); returns the JSON results and failures."""
    from ..importers import import_file
    from ..importers.resume import RunIndex

    results: list[dict[str, Any]] = []
    failed = events = unsealed = 0
    run_index = RunIndex()  # resume copies: the store's runs are read once for all the files
    with progress_bar(len(files), "import", quiet=json_out) as advance:
        for path in files:
            try:
                result = import_file(
                    store, path, format=format, notary=notary, seal=seal, run_index=run_index
                )
            except (ImportFormatError, OSError) as exc:
                failed += 1
                reason = exc.reason if isinstance(exc, ImportFormatError) else exc.strerror or str(exc)
                line = exc.line if isinstance(exc, ImportFormatError) else None
                where = (
                    shown(path) if line is None else f"{shown(path)}:{line}"
                )  # the source line, when known
                err.print(f"flightlog: error: {where}: {reason}")
                results.append({"path": shown(path), "error": reason, **({"line": line} if line else {})})
                _advance(advance, job, events, failed=1)
                continue
            events += result.events
            ended = _import_end(store, result)
            results.append({**_import_json(result), **ended, "path": shown(path)})
            if not json_out:
                _print_import(result, ended)
            unsealed += not ended["sealed"]
            _advance(advance, job, events)
    if unsealed and not json_out:  # once, not on every line (the JSON says it per result: "seal")
        err.print(f"flightlog: note: {plural(unsealed, 'session')} not sealed; for each, {SEAL_ADDS}")
    return results, failed


def _advance(advance: Advance, job: CoreJob | None, events: int, *, failed: int = 0) -> None:
    advance(1, events=events)
    if job is not None:
        job.advance(failed=failed)


def _import_json(r: Any) -> dict[str, Any]:
    return {
        "path": str(r.path),
        "format": r.format,
        "source_sha256": r.source_sha256,
        "session_ids": r.session_ids,
        "events": r.events,
        "duplicate": r.duplicate,
        "continued": r.continued,
        "warnings": [str(w) for w in r.warnings],
    }


SEAL_ADDS = (
    "--seal would record what the transcript's end closes (the last run's run_terminal with its turns and "
    "tokens, pending calls, a torn last line) and seal the session"
)
"""What ``flightlog import`` says ``--seal`` would add to a session it left open."""


def _import_end(store: Store, result: Any) -> dict[str, Any]:
    """The main session's end, for ``import``'s line and JSON: ``status`` (the word ``ls`` lists),
    ``session_status`` (the row's), ``sealed`` (its last row is its seal) and, when not sealed, ``seal``:
    what ``--seal`` would add."""
    from ..importers import is_sealed
    from ..runs.projection import listed_word, no_run_sessions, resumable_sessions

    record = store.get_session(result.session_ids[0])
    sealed = is_sealed(store, record.session_id, record.head_seq)
    word = listed_word(
        record, no_run=no_run_sessions(store, [record]), resumable=resumable_sessions(store, [record])
    )
    end: dict[str, Any] = {"status": word, "session_status": record.status, "sealed": sealed}
    if not sealed:
        end["seal"] = SEAL_ADDS
    return end


def _print_import(result: Any, end: dict[str, Any]) -> None:
    state = f"{end['status']}, {'sealed' if end['sealed'] else 'not sealed'}"  # what --seal adds: said once
    if result.duplicate:
        out.print(f"{result.session_ids[0]}  already imported from {result.path.name} ({state})")
        return
    main, *children = result.session_ids
    tasks = sum(1 for child in children if ":task:" in child)  # background tasks (importers.background)
    parts = [plural(len(children) - tasks, "sub-agent session")] if len(children) > tasks else []
    parts += [plural(tasks, "background task")] if tasks else []
    extra = f" (+{', '.join(parts)})" if parts else ""
    grew = " (continued)" if result.continued else ""
    count = f"+{plural(result.events, 'event')}" if result.continued else plural(result.events, "event")
    if not result.events:
        out.print(f"{main}  up to date with {result.path.name} ({state})")
    else:
        out.print(f"{main}  {count} from {result.path.name} [{result.format}]{extra}{grew} ({state})")
    for warning in result.warnings:
        err.print(f"  warning: {warning}")


@app.command("ls")
def ls_cmd(
    status: Annotated[
        list[str] | None,
        typer.Option(
            "--status",
            help="Keep sessions with this status, a word ls prints or the stored one (repeatable): completed, "
            "running, suspended, paused, cancelled, interrupted, 'no run'...",
        ),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            help="Keep sessions created since: an ISO date or time (UTC unless it says), or 30m, 2h, 7d.",
        ),
    ] = None,
    task: Annotated[
        str | None, typer.Option("--task", help="Keep sessions whose task contains this text (any case).")
    ] = None,
    limit: Annotated[
        int | None,
        count_option("--limit", "-n", help="Show the N most recently created."),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
) -> None:
    """List sessions: id, task, status, events, head hash, creation time (newest first, as `runs` lists).

    The status is the word `runs` and the dashboard use: "no run" for a session that never started a run
    (custom events only), "paused" for a run `flightlog abort` stopped (`flightlog resume` continues it),
    "suspended" for a run waiting for a decision even if its row says it ended (a warning on stderr says
    so), "cancelled" for an import's "aborted", "interrupted" for a transcript that ends mid-run. --status
    takes the word shown or the stored one (another word: exit 2, listing them); --json gives both
    (`status`, `session_status`).

    An imported session's creation time is its transcript's first timestamp; "(import)" marks the import
    time when the transcript has no zone-aware time. Nothing matched: "no sessions" on stderr, nothing on
    stdout. Exit 1 when whether a session waits cannot be told (its stored events do not decode: named on
    stderr, after the listing).
    """
    # Rules behind the words (kept out of --help): runs.projection.listed_word / resumable_sessions,
    # narration.state_word (seed 002 spellings), kernel.rowheld.held_sessions (a row ended over an open
    # wait: the row is not hashed, the ledger's status is shown). A --status no session has is not an
    # error: a note on stderr names the statuses present; ``--json`` stays ``[]``; ``--limit 0`` prints
    # nothing.
    from ..kernel.rowcheck import row_warning
    from ..kernel.rowheld import LEDGER_STATUS, held_sessions
    from ..runs.projection import Undecodable, listed_word, no_run_sessions, resumable_sessions
    from ..sessions import find_sessions

    since_ms = _since(since) if since is not None else None
    with open_db(read_only=True) as store:
        unnamed = store.unnamed_sessions()  # rows whose id is not text (a raw write): named, not listed
        named = list(store.list_sessions())  # every id text: a row whose id is not, unnamed, is not listed
        no_run = no_run_sessions(store, named)
        resumable = resumable_sessions(store, named)  # aborted, resumable: "paused", as runs lists them
        unread: Undecodable = []  # the row ends the run, its events do not decode: its wait is unknown
        # the row ends the run, its ledger waits: the store-wide pass, no fold of all
        held = held_sessions(store, undecodable=unread)

        def shown(record: Any) -> str:
            if record.session_id in held:
                return LEDGER_STATUS
            return listed_word(record, no_run=no_run, resumable=resumable)

        wanted = [state_word(value) for value in status or ()]  # --status aborted finds what shows cancelled
        _refuse_unknown_status(status or [], {shown(r) for r in named} | {str(r.status) for r in named})
        found = find_sessions(
            store, statuses=wanted, since_ms=since_ms, task=task, limit=limit, status_of=shown, records=named
        )
        rows: list[dict[str, Any]] = [
            {
                "session_id": s.session_id,
                "task": s.task,
                "status": shown(s),
                "session_status": s.status,
                "events": s.events,
                "head": s.head_hash,
                "merkle_root": s.merkle_root,
                "source": s.source,
                "parent_session_id": s.parent_session_id,
                "created_at": iso_time(s.created_at_ms),
                **_created_fields(s),
            }
            for s in found
        ]
        missing = [value for value in dict.fromkeys(wanted) if all(r["status"] != value for r in rows)]
        present = sorted({shown(r) for r in named}) if missing else []
        abandoned = abandoned_notes(store, [r["session_id"] for r in rows]) if rows else []
        # said before the table: what it lists as waiting, approve would refuse
        refused = heads_ahead_lines(store, [s for s in found if shown(s) in _ACTED_ON])
    _warn(refused)
    warnings = [
        f"flightlog: warning: {r['session_id']}: {row_warning(r['session_id'], r['session_status'])}"
        for r in rows
        if r["session_id"] in held
    ]
    warnings += [
        f"flightlog: warning: {sid}: its waits cannot be read: {exc}; its row's status is shown"
        f" (see `flightlog verify {sid}`)"
        for sid, exc in dict(unread).items()
    ]
    warnings += [
        f"flightlog: warning: {row.describe()}: it names no session, not listed (see `flightlog verify --all`)"
        for row in unnamed
    ]
    warnings += _ls_notes(
        rows, [v for v in missing if v not in present], present, bool(status or since or task), limit
    )
    warnings += abandoned  # a killed run reads "running" until someone resumes it: say so, and how
    if json_out:
        print_json(rows)
        _warn(warnings)
        if unread or unnamed:
            raise typer.Exit(1)
        return
    if not rows:  # the help's promise: an empty listing says "no sessions" (stderr), no table header
        _warn(warnings)
        if unread or unnamed:
            raise typer.Exit(1)
        return
    width = max([len("session"), *(len(r["session_id"]) for r in rows)])
    # an imported status is the source's own word (a mini-swe-agent exit status: "InternalServerError")
    status_width = max([10, *(len(r["status"]) for r in rows)])
    out.print(
        f"{'session':<{width}}  {'status':<{status_width}} {'events':>6}  {'head':<12}  {'created (UTC)':<28}  task"
    )
    out.print_lines(_ls_line(row, width, status_width) for row in rows)  # one write per thousand rows
    _warn(warnings)
    if unread or unnamed:
        raise typer.Exit(1)


_ACTED_ON = frozenset({"suspended", "paused"})
"""``ls`` words of a session waiting for an operator (approve, deny, resume): whose retained heads
:func:`~flightlog.cli.options.heads_ahead_lines` reads, when the index log's agrees."""


def _ls_line(row: dict[str, Any], width: int, status_width: int) -> str:
    """One row of ``ls``'s table (``row``: an ``ls --json`` object)."""
    # an import whose transcript gives no zone-aware time was created at the import: say so
    created = (row["created_at"] or "")[:19] + (" (import)" if row["created_from"] == "import" else "")
    return (
        f"{row['session_id']:<{width}}  {row['status']:<{status_width}} {row['events']:>6}  {row['head'][:12]:<12}  "
        f"{created:<28}  {short(row['task'], 60)}"
    )


def _listed_status(store: Store, record: SessionRecord) -> str:
    """The status ``ls`` lists for one session, for ``show``'s header: "suspended" when the row ends a run
    its ledger holds open (``kernel.rowheld``), "no run" for a session holding none, else the row's word
    (``narration.state_word``). Events that do not decode leave the row's word, as ``ls`` shows it; the
    timeline read after it stops at the same seq with the error naming it."""
    from ..errors import EventDecodeError
    from ..kernel.rowcheck import session_may_wait
    from ..kernel.rowheld import LEDGER_STATUS, held_state
    from ..runs.projection import listed_word, no_run_sessions, resumable_sessions

    try:  # the byte pre-filter first, as ls's pass: a session that cannot wait loads no fold, no audit
        if session_may_wait(store, record) and held_state(store, record) is not None:
            return LEDGER_STATUS
        resumable = resumable_sessions(store, [record])
    except EventDecodeError:
        resumable = set()  # iter_events raises it below, naming the seq
    return listed_word(record, no_run=no_run_sessions(store, [record]), resumable=resumable)


LS_STATUSES = (
    "completed",
    "failed",
    "running",
    "suspended",
    "paused",
    "cancelled",
    "interrupted",
    "queued",
    "budget_exhausted",
    "no run",
)
"""The statuses ``ls`` prints for flightlog's own runs and imports (``--status`` takes them, their stored
spellings: :data:`flightlog.narration.STATE_SYNONYMS`, and any other word a session of the store has)."""


def _refuse_unknown_status(values: list[str], present: set[str]) -> None:
    """Exit 2 (one ``flightlog: error:`` line, as a bad ``--since``) for a ``--status`` value that is no
    status ``ls`` prints (:data:`LS_STATUSES`), no stored spelling of one, and no status a session of this
    store has (``present``: statuses are open-ended, an import keeps its source's words); it lists the
    valid ones. A valid status no session has is not an error (a note says so)."""
    from ..narration import STATE_SYNONYMS

    known = {*LS_STATUSES, *STATE_SYNONYMS, *present}
    unknown = [value for value in dict.fromkeys(values) if value not in known]
    if unknown:
        others = sorted(present - set(LS_STATUSES) - set(STATE_SYNONYMS))
        extra = f"; also present in this store: {', '.join(others)}" if others else ""
        raise typer.BadParameter(
            f"{unknown[0]!r} is not a status (ls prints: {', '.join(LS_STATUSES)}{extra})",
            param_hint="--status",
        )


def _ls_notes(
    rows: list[dict[str, Any]], unknown: list[str], present: list[str], filtered: bool, limit: int | None
) -> list[str]:
    """``ls``'s notes on stderr: each ``--status`` value no session has, naming the statuses present
    (open-ended: ``Recorder.finish`` takes any word, an import keeps its source's), and an empty listing
    (none for ``--limit 0``: no row was asked for, so none listed says nothing about the store)."""
    missing = [
        f"no session has status {value!r} (statuses present: {', '.join(present) or 'none'})"
        for value in unknown
    ]
    if not rows and limit != 0:  # one line: the empty listing, and why when a status named none
        return [
            "flightlog: note: "
            + "; ".join(["no sessions" + (" match the filters" if filtered else ""), *missing])
        ]
    return [f"flightlog: note: {line}" for line in missing]


def _warn(lines: list[str]) -> None:
    """Each line on stderr, after what stdout printed."""
    if lines:
        sys.stdout.flush()
        for line in lines:
            err.print(line)


def _created_fields(record: Any) -> dict[str, Any]:
    """``ls --json``'s ``created_from`` (:class:`flightlog.sessions.CreatedAt` basis: ``recorded``, ``source``,
    ``import``) and, for ``import``, ``source_clock`` (the transcript's zoneless first timestamp, as written)."""
    from ..sessions import created_at

    basis, clock = created_at(record)
    return {"created_from": basis, **({"source_clock": clock} if clock is not None else {})}


_UNITS_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 7 * 86_400_000}


def _since(text: str) -> int:
    """``--since``: ``30m``/``2h``/``7d``/``1w``/``45s`` ago, or an ISO 8601 date or time (UTC unless it
    carries an offset), as epoch ms."""
    value = text.strip()
    if len(value) > 1 and value[-1] in _UNITS_MS and value[:-1].isdigit():
        return int(datetime.now(UTC).timestamp() * 1000) - int(value[:-1]) * _UNITS_MS[value[-1]]
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise typer.BadParameter(
            f"{text!r} is neither a duration (30m, 2h, 7d, 1w) nor an ISO date or time", param_hint="--since"
        ) from None
    return int((when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp() * 1000)


@app.command("show")
def show_cmd(
    session: Annotated[str, session_arg()],
    json_out: Annotated[bool, typer.Option("--json", help="Print events as JSON lines.")] = False,
) -> None:
    """Print a session's timeline: seq, time, kind and a one-line narration per event; a run's system
    prompt on a "system prompt:" line under the run_started that sets it, once (a later run with the same
    prompt does not repeat it), cut to 300 characters. The header line gives the status ``ls`` lists.
    The session is checked first (chain, signed checkpoints, seal, retained head, its row, the archives
    and salted texts its events name, read and hashed): one that fails is warned about on stderr before the
    timeline, the events checked are printed, and the exit is 1."""
    from ..events import RunStarted
    from ..sessions import iter_events

    with open_db(read_only=True) as store:
        try:
            sid = store.resolve_session(session)
        except SessionNotFound:
            _never_started(store, session)
            raise
        failed, checked = check_before_printing(store, sid)  # first: `show S | head` still warns
        record = store.get_session(sid)
        if not json_out:
            out.print(f"session {sid}  [{_listed_status(store, record)}]  {short(record.task, 70)}")
        prompt: str | None = None
        who = sid if json_out else short_session(store, sid)  # the header names it whole
        for row, event in iter_events(store, sid, stop=checked):  # what was checked, no more
            if json_out:
                sys.stdout.write(
                    json.dumps({"seq": row.seq, "kind": row.kind, "event": event.to_wire()}) + "\n"
                )
                continue
            out.print(
                f"{row.seq:>6}  {(iso_time(row.recorded_at_ms) or '')[11:19]}  {row.kind:<24} "
                f"{narrate(event, who)}"
            )
            if isinstance(event, RunStarted) and event.system_prompt and event.system_prompt != prompt:
                prompt = event.system_prompt
                out.print(f"{'':43}system prompt: {short(prompt, 300)}")
        if failed:
            raise typer.Exit(1)
        if not json_out:
            _warn(abandoned_notes(store, [sid]))


def _never_started(store: Store, run_id: str) -> None:
    """For ``show`` of an id with no session: when ``runs`` lists it from its parent's process table only,
    say so on stderr (spawned by whom, at which seq, never started) before the usage error."""
    from ..runs.projection import spawned_only

    entry = spawned_only(store, run_id)
    if entry is not None:
        err.print(
            f"flightlog: {run_id} is a sub-agent{f' ({entry.role})' if entry.role else ''} that "
            f"{entry.recorded_by} spawned (its process table, seq {entry.seq}: {entry.state}); it never "
            f"started, so it has no session to show (see `flightlog show {entry.recorded_by}`)"
        )


# ─── replay / verify / export ─────────────────────────────────────────────────────────────────


TEXT_VIEW_CHARS = 300
"""Characters of each part (whitespace runs as one space) ``replay``'s text view prints; ``--json`` prints
all of it."""


@app.command("replay")
def replay_cmd(
    session: Annotated[str, session_arg()],
    at: Annotated[int | None, typer.Option("--at", help="Reconstruct as of this seq (inclusive).")] = None,
    max_part_bytes: Annotated[
        int | None,
        typer.Option(
            "--max-part-bytes",
            help="Cap the system prompt and each text, thinking and tool output part at this many UTF-8 "
            "bytes; a cut one is its first N bytes, marked once (text: '[cut to N of M bytes by "
            '--max-part-bytes]\'; --json: "truncated" on the part, "system_prompt_truncated" beside the '
            "prompt: its bytes before the cut) and a cut thinking part loses its signature.",
        ),
    ] = None,
    json_out: Annotated[
        bool,
        typer.Option(
            "--json",
            help='Print {"system_prompt": the prompt the model had (null when none), "messages": [...]} '
            "as JSON, every part whole (unless --max-part-bytes cuts it); the text view shows "
            f"{TEXT_VIEW_CHARS} characters of each and says when it shows fewer.",
        ),
    ] = False,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Rebuild every recorded model request from the ledger and compare digests; exit 1 naming "
            "the first turn whose request does not reproduce, or when the session or an artifact it names "
            "fails the check replay makes first.",
        ),
    ] = False,
) -> None:
    """Reconstruct the messages a model would see, at the head or at any sequence (after the run's
    system prompt, when it has one: that of the last run_started up to there). --json prints an object:
    system_prompt (the full text, or null) and messages (the array of messages). The session and the
    artifacts it names are checked first, as show does: one that fails is warned about on stderr before
    the messages, and the exit is 1."""
    from ..replay import system_prompt, truncate_utf8
    from ..sessions import iter_events, replay_session_cuts

    if check:
        _check_requests(session, json_out)
        return
    if at is not None and at < 0:
        raise typer.BadParameter("must be >= 0", param_hint="--at")
    if max_part_bytes is not None and max_part_bytes < 0:
        raise typer.BadParameter("must be >= 0", param_hint="--max-part-bytes")
    with open_db(read_only=True) as store:
        sid = store.resolve_session(session)
        if at is not None:
            last = store.get_session(sid).events - 1
            if at > last:
                head = f"last seq {last}" if last >= 0 else "the session has no events"
                raise typer.BadParameter(f"seq {at} is past the head ({head})", param_hint="--at")
        # first, artifacts included: an archive the replay never reads (a page-out's stub) is checked too
        failed, checked = check_before_printing(store, sid)
        if checked and (at is None or at >= checked):
            at = checked - 1  # what was checked, no more (a writer may append meanwhile)
        messages, cuts = replay_session_cuts(
            store, sid, at=at, max_part_bytes=max_part_bytes, mark_cuts=False
        )
        prompt = system_prompt(((row.seq, event) for row, event in iter_events(store, sid)), at=at)
        prompt_cut: int | None = None
        if prompt is not None and max_part_bytes is not None:
            whole = len(prompt.encode("utf-8"))
            if whole > max_part_bytes:
                prompt, prompt_cut = truncate_utf8(prompt, max_part_bytes, suffix=""), whole
        if json_out:
            wires = [_marked_wire(m, cut) for m, cut in zip(messages, cuts, strict=True)]
            doc: dict[str, Any] = {"system_prompt": prompt, "messages": wires}
            if prompt_cut is not None:
                doc = {"system_prompt": prompt, "system_prompt_truncated": prompt_cut, "messages": wires}
            print_json(doc)
        else:
            if prompt:
                out.print("[system prompt]")
                out.print(f"    {_shown(prompt, prompt_cut)}")
            for index, (message, cut) in enumerate(zip(messages, cuts, strict=True)):
                _print_message(index, message, cut)
        if failed:
            raise typer.Exit(1)


def _check_requests(session: str, json_out: bool) -> None:
    from ..kernel.requests import check_session

    with open_db(read_only=True) as store:
        sid = store.resolve_session(session)
        # first, artifacts included, as replay itself checks: a page-out archive no rebuilt request reads
        # (its summary stands in) is read and hashed all the same, so an altered one never passes --check
        failed, _checked = check_before_printing(store, sid)
        report = check_session(store, sid)
        first = report.first
        if json_out:
            wire = (
                None
                if first is None
                else {"seq": first.seq, "turn": first.turn, "actor": first.actor, "reason": first.reason}
            )
            print_json(
                {
                    "session_id": sid,
                    "checked": report.checked,
                    "ok": report.ok,
                    "mismatches": len(report.mismatches),
                    "first": wire,
                }
            )
        elif report.checked == 0:
            out.print(
                f"{sid}: no prompt_program_invoked recorded (a flightlog run records one per model call; "
                "an imported transcript has none): nothing to check"
            )
        elif first is None:
            out.print(f"{sid}: {report.checked} model requests rebuilt from the ledger; all reproduce")
        else:
            err.print(
                f"flightlog: {sid}: the request of turn {first.turn} ({first.actor}, seq {first.seq}) does not "
                f"reproduce: {first.reason}; {len(report.mismatches)} of {report.checked} differ"
            )
        if failed or not report.ok:
            raise typer.Exit(1)


def _marked_wire(message: Message, cuts: dict[int, int]) -> dict[str, Any]:
    """``message.to_wire()`` with ``"truncated": <UTF-8 bytes before the cut>`` on each part
    ``--max-part-bytes`` cut."""
    wire = message.to_wire()
    if cuts:
        wire["content"] = [
            {**part, "truncated": cuts[index]} if index in cuts else part
            for index, part in enumerate(wire["content"])
        ]
    return wire


def _shown(text: str, cut_from: int | None) -> str:
    """``text`` on one line for the text view, with one marker saying what was left out: the view's own cut
    to :data:`TEXT_VIEW_CHARS` characters, ``--max-part-bytes``'s (``cut_from``: the bytes before it), or
    both."""
    flat = " ".join(text.split())
    view_cut = len(flat) > TEXT_VIEW_CHARS
    shown = flat[:TEXT_VIEW_CHARS] if view_cut else flat
    if view_cut and cut_from is not None:
        note = (
            f"{TEXT_VIEW_CHARS} of {len(flat):,} characters shown; the part was cut to "
            f"{len(text.encode('utf-8')):,} of {cut_from:,} bytes by --max-part-bytes"
        )
    elif view_cut:
        note = f"{TEXT_VIEW_CHARS} of {len(flat):,} characters shown; --json prints all"
    elif cut_from is not None:
        note = f"cut to {len(text.encode('utf-8')):,} of {cut_from:,} bytes by --max-part-bytes"
    else:
        return shown
    return f"{shown}… [{note}]"


def _print_message(index: int, message: Message, cuts: dict[int, int]) -> None:
    out.print(f"[{index}] {message.role}")
    for number, part in enumerate(message.content):
        wire = part.to_wire()
        kind = wire.pop("type")
        body = wire.get("text") or wire.get("thinking") or wire.get("output") or wire.get("ref") or ""
        label = "" if kind == "text" else f"({kind}) "
        out.print(f"    {label}{_shown(str(body), cuts.get(number))}")
    for call in message.tool_calls:
        out.print(f"    -> {call.name} [{call.id}] {short(call.arguments, 200)}")


@app.command("verify")
def verify_cmd(
    session: Annotated[str | None, session_arg()] = None,
    all_sessions: Annotated[
        bool, typer.Option("--all", help="Verify every session and the index log.")
    ] = False,
    offline: Annotated[
        bool, typer.Option("--offline", help="Do not ask witnesses (stored cosignatures only).")
    ] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False,
    record: Annotated[
        bool,
        typer.Option(
            "--record",
            help="With --all: record this sweep as a core_job run once it is done (the check itself only "
            "reads; without --record nothing is written).",
        ),
    ] = False,
) -> None:
    """Check sessions in this database: chains, tree heads, signed checkpoints, seal, retained and witnessed
    heads, and the sessions, runs and external_effects rows against the verified ledger; exit 1 listing every divergent
    sequence, 0 when intact. Says sealed, or open with the unanchored tail seqs.

    The everyday check. `audit` makes the same check on the database and can also check an exported bundle
    with no database (`audit --bundle DIR`, against keys you give): use it for a copy someone handed you."""
    from .audit import check_sessions

    if bool(session) == all_sessions:
        raise typer.BadParameter("give a SESSION or --all (not both)")
    if record and not all_sessions:
        raise typer.BadParameter("--record records a --all sweep", param_hint="--record")
    check_sessions(session, all_sessions=all_sessions, json_out=json_out, offline=offline, record=record)


@app.command("export")
def export_cmd(
    session: Annotated[str, session_arg()],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")
    ] = None,
    bundle: Annotated[
        Path | None,
        typer.Option(
            "--bundle", help="Write an offline audit bundle directory (signed manifest, proofs, keys)."
        ),
    ] = None,
    otlp: Annotated[
        str | None,
        typer.Option("--otlp", help="Send OpenTelemetry GenAI spans to this OTLP/HTTP receiver URL."),
    ] = None,
    otlp_content: Annotated[
        bool, typer.Option("--otlp-content", help="With --otlp: include message text and tool I/O.")
    ] = False,
) -> None:
    """Export a session as JSONL: seq, prev_hash, hash and the event (its RFC 8785 form = stored bytes).

    With --bundle DIR: everything ``flightlog audit --bundle DIR`` needs to verify it offline (a session
    that fails ``flightlog audit``, stored cosignatures only, is refused, nothing written). With
    --otlp URL: its spans (invoke_agent, chat, execute_tool) to an OTLP/HTTP receiver (the otel extra).
    """
    from ..sessions import export_jsonl

    if sum(x is not None for x in (bundle, output, otlp)) > 1:
        raise typer.BadParameter("give one of --output, --bundle or --otlp")
    if otlp_content and otlp is None:
        raise typer.BadParameter("--otlp-content goes with --otlp URL", param_hint="--otlp-content")
    if otlp is not None:
        try:
            from ..integrations.otel import export_otlp, otlp_endpoint
        except ImportError:
            err.print(f"flightlog: error: --otlp needs: {install_hint('otel')}")
            raise typer.Exit(1) from None
        try:
            otlp_endpoint(otlp)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
        with open_db(read_only=True) as store:
            sid = store.resolve_session(session)
            count = export_otlp(  # a busy receiver is retried: say so once, not 10 s of silence
                store,
                sid,
                otlp,
                capture_content=otlp_content,
                on_retry=lambda line: err.print(f"flightlog: note: {line}"),
            )
        err.print(f"sent {plural(count, 'span')} of {sid} to {otlp}")
        return
    problem = None
    if bundle is not None and bundle.exists() and not bundle.is_dir():
        problem = f"--bundle {bundle} exists and is not a directory"
    elif bundle is not None and bundle.is_dir() and any(bundle.iterdir()):
        problem = (
            f"--bundle {bundle} is not empty: a bundle is written into a directory of its own "
            "(name a new directory, which export creates, or an empty one)"
        )
    elif output is not None and output.is_dir():
        problem = f"--output {output} is a directory (give a file path)"
    elif output is not None and not output.absolute().parent.is_dir():
        problem = f"cannot write {output}: no directory {output.absolute().parent}"
    if problem is not None:
        err.print(f"flightlog: error: {problem}")
        raise typer.Exit(2)
    with open_db(read_only=True) as store:
        sid = store.resolve_session(session)
        if bundle is not None:
            from ..integrity.audit import Auditor, require_intact
            from ..integrity.bundle import export_bundle

            # A bundle's manifest is signed with the user's key: a session that fails the full check
            # (stored cosignatures, not asked online) is refused before anything is written.
            require_intact(store, sid, auditor=Auditor.from_env(online=False))
            manifest = export_bundle(store, sid, bundle)
            err.print(f"wrote a bundle of {plural(manifest['events'], 'event')} of {sid} to {bundle}")
            return
        if output is None:
            export_jsonl(store, sid, sys.stdout)
            refuse_quietly_diverged(store, sid)
            return
        tmp = output.with_name(output.name + ".partial")
        try:
            with tmp.open("w", encoding="utf-8", newline="\n") as fh:
                count = export_jsonl(store, sid, fh)
            tmp.replace(output)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            err.print(f"flightlog: error: cannot write {output}: {exc.strerror or exc}")
            raise typer.Exit(2) from None
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        err.print(f"exported {plural(count, 'event')} of {sid} to {output}")
        refuse_quietly_diverged(store, sid)


# ─── db ───────────────────────────────────────────────────────────────────────────────────────


@db_app.command("repair")
def repair_cmd(
    discard_wal: Annotated[
        bool, typer.Option("--discard-wal", help="Set the WAL aside (commits only in it are quarantined).")
    ] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="With --discard-wal: discard even a WAL SQLite reads that passes integrity_check (its "
            "committed frames are lost), or one holding a retirement record the database file lacks.",
        ),
    ] = False,
) -> None:
    """Recover a database whose WAL is poisoned: backup, quarantine the WAL, verify read-only. Refuses a
    WAL that is not poisoned (SQLite reads it and integrity_check passes: its committed frames would be
    lost) or that holds a retirement record the database file lacks (`db copy` retired this store), unless
    --force. With no WAL (or an empty one) there is nothing to set aside: it says so, writes nothing and
    exits 0."""
    from ..ops.repair import repair_discard_wal

    if not discard_wal:
        raise typer.BadParameter(
            "refusing to repair without --discard-wal (commits only in the WAL would be set aside)"
        )
    report = repair_discard_wal(state.db, discard_wal=True, force=force)
    if report.nothing_to_do:
        held = "an empty WAL" if report.wal_present else "no WAL"
        out.print(
            f"nothing to repair: {report.database} has {held}, so no commit to set aside; nothing written "
            f"(`flightlog verify --all` checks the database)"
        )
        return
    if report.dropped_retirement:
        err.print(
            f"flightlog: WARNING: the discarded WAL held this store's retirement record (`flightlog db copy` "
            f"moved its ledger elsewhere): {report.database} is writable again; do not write to it, the "
            f"ledger lives in the store it was copied to (the record is in {report.backup_dir}/quarantine)"
        )
    if report.wal is not None and report.wal.loses_commits():
        err.print(
            f"flightlog: warning: discarded {plural(report.wal.frames, 'committed frame')} SQLite could read "
            f"({plural(report.wal.changed_pages, 'page')} of the database file), kept in {report.backup_dir}"
        )
    _warn_heads_ahead()  # also after a WAL SQLite could not read: its commits may have been retained
    out.print(f"WAL {report.wal_size_bytes} bytes sha256 {report.wal_sha256} quarantined")
    out.print(f"backups and repair.json in {report.backup_dir}")
    out.print(
        f"verified read-only: integrity_check {report.integrity_check}, "
        f"{plural(report.sessions_verified, 'session')}, {plural(report.events_verified, 'event')}"
    )


def _warn_heads_ahead() -> None:
    """After a repair discarded commits: one stderr line when the retained heads cover some of them (the
    heads outside the database moved with those commits; :func:`~flightlog.ops.restore.heads_not_extended`),
    since every command that acts on those sessions (all of them when the index log's head is among them)
    now refuses the database as rolled back until ``flightlog db accept-restore`` keeps it as the truth."""
    from ..integrity.heads import HeadStore
    from ..ops.restore import heads_not_extended

    with open_db(read_only=True) as store:
        try:
            ahead = heads_not_extended(store, HeadStore.default())
        except FlightlogError as exc:  # the repair is done: say what could not be compared, do not fail it
            err.print(
                f"flightlog: warning: the retained heads could not be compared with the repaired database "
                f"({exc}); `flightlog verify --all` says whether they cover discarded commits"
            )
            return
    if not ahead:
        return
    sessions = [h.session_id for h in ahead if h.session_id is not None]
    index = len(sessions) < len(ahead)
    named = ", ".join(f"session {sid}" for sid in sessions[:3])
    more = f" and {len(sessions) - 3} more" if len(sessions) > 3 else ""
    if index:
        more += " and the index log" if named else "the index log"
    refused = "every session" if index else ("that session" if len(sessions) == 1 else "those sessions")
    err.print(
        f"flightlog: warning: the retained heads cover discarded commits ({named}{more} behind "
        f"them): {refused} is refused as rolled back (`flightlog verify --all` names each) until "
        f"`flightlog db accept-restore --reason TEXT` keeps this database as the truth"
    )


@db_app.command("accept-restore")
def accept_restore_cmd(
    reason: Annotated[
        str, typer.Option("--reason", help="Why this file is the truth (recorded in the ledger).")
    ] = "",
    operator: Annotated[str, operator_option()] = "user",
    accept_fork: Annotated[
        bool,
        typer.Option(
            "--accept-fork",
            help="Keep this database even where it is not an older copy of what was retained (a fork, or "
            "signed checkpoints gone: possibly a rewritten history); recorded as a fork.",
        ),
    ] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print what was replaced as JSON.")] = False,
) -> None:
    """Keep THIS database as the truth after it was restored from an older copy: verifies the database apart
    from its retained heads (refused if anything else diverges), refuses it unless it is an older copy (a
    prefix of every head retained for it, its signed checkpoints kept) or --accept-fork is given, moves the
    heads it does not extend aside (never deleted), records the decision in the restore log (session
    flightlog:restores) and retains this database's heads. Warns of sessions the replaced heads had more
    events of (effects they ran may run again). Nothing to accept: says so, writes nothing."""
    from ..integrity.notary import Notary
    from ..narration import operator_problem
    from ..ops.restore import RESTORE_LOG, accept_restore

    if not reason.strip():
        raise typer.BadParameter("give --reason TEXT: it is recorded in the ledger", param_hint="--reason")
    problem = operator_problem(operator)
    if problem is not None:
        raise typer.BadParameter(f"invalid operator name: {problem}", param_hint="--as")
    with open_db(read_only=False) as store:
        # Anything else it raises (a damaged head history is a NoteError, a ValueError too) is an error of
        # the store or its heads, named as such, not of --as.
        record = accept_restore(
            store, reason=reason, operator=operator, notary=Notary.from_env(), accept_fork=accept_fork
        )
    for head in record.replaced:
        if head.history_missing:
            err.print(
                f"flightlog: warning: {head.what}: its head history ({head.path.name.removesuffix('.json')}"
                ".history.jsonl) is missing: only the latest retained head was checked, so a rewritten "
                "history that ends below it is not told from an older copy (heads retained before head "
                "histories have none; whoever can write the heads folder can delete one: a witness is the "
                "stronger guard)"
            )
    for head in record.behind:
        err.print(
            f"flightlog: warning: session {head.session_id}: the replaced head covered "
            f"{plural(head.retained_size, 'event')}, this database holds {head.size}: events "
            f"{head.size}..{head.retained_size - 1} were recorded only in the other copy, and what they did "
            "is recorded nowhere here; a tool call among them may have performed its effect, and a resume may "
            "perform it again: the external service's check of the idempotency key is the only guard"
        )
    if json_out:
        print_json(
            {
                "replaced": [h.to_json() for h in record.replaced],
                "set_aside": None if record.set_aside is None else str(record.set_aside),
                "log_session_id": RESTORE_LOG if record.log_seq is not None else None,
                "log_seq": record.log_seq,
                "reanchored": record.reanchored,
                "accepted_fork": record.accepted_fork,
                "behind": [h.session_id for h in record.behind],
            }
        )
        return
    if not record.replaced:
        out.print("nothing to accept: every retained head agrees with this database; nothing written")
        return
    for head in record.replaced:
        what = "index log" if head.session_id is None else head.session_id
        gone = head.session_id is not None and head.size == 0
        held = "no such session" if gone else f"holds {head.size}"
        problem = head.problem()
        kept = f" (kept as a fork: {problem})" if problem else ""
        out.print(f"replaced  {what}: retained head at size {head.retained_size}, this database {held}{kept}")
    out.print(
        f"old heads kept in {record.set_aside}; decision recorded at {RESTORE_LOG} seq {record.log_seq}"
    )


# ─── demo ─────────────────────────────────────────────────────────────────────────────────────


@app.command("demo")
def demo_cmd() -> None:
    """The whole tour, offline, in eleven steps.

    \b
     1. import the two bundled example transcripts (Claude Code, Codex CLI)
        with --seal: the demo states they are finished, so each records its
        last run's end and a seal (60 and 17 events); a plain `flightlog
        import` of the same files leaves them open (58 and 15 events,
        interrupted, not sealed). A second demo imports nothing twice.
     2. verify every chain and tree head (with your key: signatures, seals)
     3. list the sessions it imported, newest first (as `flightlog ls`)
     4. replay the Claude Code session (what a model would be given)
     5. flip one byte in a scratch copy of the database: verify names the
        seq, attach refuses it (your database is not touched)
     6. a durable agent run on the real Anthropic SDK adapter, replaying a
        recorded conversation, across five processes: it waits for approval
        of a tool call, is approved, killed mid-call and resumed without
        repeating the call (skipped without the providers extra)
     7. a run that outgrows its context window: compacts, pages, finishes
     8. a phased agent unlocks a tool by passing its milestone
     9. long-term memory: one run remembers a fact, the next one uses it
    10. a run tree: parallel sub-agents, killed mid-tree, resumed, an
        approval inside a child
    11. a looping agent caught by the entropy watch, steered by a signal

    Every session it records goes into the database --db names (default:
    $FLIGHTLOG_DB, else flightlog.db in your user data directory), beside
    your own sessions; `flightlog --db /tmp/demo.db demo` keeps them in a
    scratch file instead.
    """
    from ..integrity.notary import Notary
    from .demo import run_demo

    with open_db() as store:
        code = run_demo(store, out, notary=Notary.from_env())
    if code:
        raise typer.Exit(code)


# ─── mounted command groups ───────────────────────────────────────────────────────────────────


def _mount() -> None:
    from .audit import audit_app
    from .fleet import register as register_fleet
    from .kernel import register as register_kernel
    from .memory import register as register_memory
    from .runs import register as register_runs
    from .signal import register as register_signal
    from .ui import register as register_web
    from .watch import register as register_watch

    register_kernel(app, open_db)
    register_runs(app, open_db)
    register_signal(app, open_db)
    register_fleet(app, open_db)
    register_memory(app, open_db)
    register_web(app, open_db)
    register_watch(app, open_db)
    app.add_typer(audit_app)


_mount()


# ─── entry point ──────────────────────────────────────────────────────────────────────────────


def main() -> None:
    """Console entry point: runs the app; a stdout closed before the final flush exits 141 quietly too."""
    try:
        app()
    finally:
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            try:
                closed_pipe()
            except typer.Exit as done:
                raise SystemExit(done.exit_code) from None
