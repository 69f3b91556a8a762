"""The ``flightlog`` command: thin wrappers that parse, call one library function, and print.

Exit codes: 0 done and intact; 1 it ran and found a problem (divergence, refused attach, store error);
2 the command line was wrong (bad option, unknown or ambiguous session prefix, missing file); 141 (128 +
SIGPIPE, what a shell reports for a tool a closed pipe killed) when the reader of stdout went away, as in
``flightlog ls | head -1``: nothing more is printed, not even an error line.
Every listing command takes ``--json`` (stdout then holds only JSON). Errors, usage mistakes included, are
one stderr line ``flightlog: error: ...``; ``--debug`` shows the traceback. ``-h`` is ``--help``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from typer.core import TyperGroup

from . import __version__
from .cli_console import console
from .errors import FlightlogError, ImportFormatError, RepairError, SessionNotFound, StoreUnavailable
from .importers import FORMATS, import_file, iter_transcripts
from .kernel.requests import check_session
from .messages import Message
from .narration import narrate, plural, short
from .recorder import verify_session
from .sessions import export_jsonl, find_sessions, iter_events, replay_session
from .store import Store, open_store, redact_url

EXIT_CLOSED_PIPE = 141
"""Exit code when stdout's reader went away (128 + SIGPIPE, as a shell reports for ``cat`` killed by one)."""

CONTEXT = {"help_option_names": ["-h", "--help"]}
"""Click context settings of every flightlog command: ``-h`` is ``--help`` (inherited by subcommands)."""


class _Group(TyperGroup):
    """Maps flightlog errors, usage mistakes and a closed stdout to one stderr line (or none, for the pipe)
    and an exit code, for the console and CliRunner alike (STYLE.md (f))."""

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        with cli_errors():
            return super().make_context(info_name, args, parent=parent, **extra)

    def invoke(self, ctx: Any) -> Any:
        with cli_errors():
            try:
                return super().invoke(ctx)
            except FlightlogError as exc:
                handle_errors(exc)


# click's UsageError (typer >= 0.22 vendors click, so it is found through typer's own BadParameter)
_USAGE_ERROR: type[Exception] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")


@contextmanager
def cli_errors() -> Iterator[None]:
    """A usage mistake click or typer raises becomes one ``flightlog: error: ...`` line and exit 2 (not a
    boxed panel); a write to a stdout whose reader has gone exits :data:`EXIT_CLOSED_PIPE` quietly."""
    try:
        yield
    except _USAGE_ERROR as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # `flightlog keys`: the help, as asked
            raise
        ctx = getattr(exc, "ctx", None)
        hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
        text = getattr(exc, "format_message", exc.__str__)()
        message = " ".join(line.strip() for line in text.splitlines() if line.strip()).removesuffix(".")
        err.print(f"flightlog: error: {message}{hint}")
        raise typer.Exit(2) from None
    except BrokenPipeError:
        closed_pipe()


def closed_pipe() -> NoReturn:
    """stdout's reader went away (``flightlog ls | head -1``): point stdout at /dev/null, so the interpreter's
    final flush cannot fail again, and exit :data:`EXIT_CLOSED_PIPE` without a word (Python docs,
    "Note on SIGPIPE")."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real file descriptor (an in-memory stdout): nothing left to flush
        pass
    raise typer.Exit(EXIT_CLOSED_PIPE)


app = typer.Typer(
    cls=_Group,
    name="flightlog",
    help="A durable, verifiable session ledger for LLM agents.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help text is plain: "[env FLIGHTLOG_DB]" must not be read as rich markup
    context_settings=CONTEXT,
)
db_app = typer.Typer(cls=_Group, help="Database maintenance.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(db_app, name="db")

out = console()
err = console(stderr=True)


class _State:
    db: str = ""
    db_is_default: bool = False  # the user data directory's database: its folder is ours to create
    debug: bool = False


state = _State()


def default_db() -> str:
    """``$FLIGHTLOG_DB``, else ``flightlog.db`` in the user data directory (platformdirs)."""
    env = os.environ.get("FLIGHTLOG_DB")
    if env:
        return env
    return _data_dir_db()


def _data_dir_db() -> str:
    from platformdirs import user_data_dir

    return str(Path(user_data_dir("flightlog", appauthor=False)) / "flightlog.db")


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
    state.db_is_default = state.db == _data_dir_db()
    state.debug = debug


def local_db_path(db: str) -> Path | None:
    """The SQLite file a ``--db`` value names (as :func:`flightlog.store.open_store` reads it), or None
    for a server URL or ``:memory:``."""
    if db.startswith(("postgres://", "postgresql://")) or db == ":memory:":
        return None
    if db.startswith("sqlite://"):
        db = db.removeprefix("sqlite://")
        db = db[1:] if db.startswith("//") else db
    elif "://" in db:
        return None
    return Path(db) if db else None


def check_new_db(db: str, *, read_only: bool, create_dirs: bool = False) -> Path | None:
    """Refuse a ``--db`` a user most likely mistyped, before anything is created (exit 2, one line): a
    directory, a file in a directory that does not exist (unless ``create_dirs``: the default location),
    or, read-only, a file that does not exist yet.

    Returns:
        The path of the SQLite file a writable open is about to create (say so once it is), else None.
    """
    local = local_db_path(db)
    if local is None:
        return None
    problem = None
    if local.is_dir():
        problem = f"--db {redact_url(db)} is a directory (give a database file)"
    elif read_only and not local.exists():
        problem = (
            f"no database at {redact_url(db)} yet (create one with `flightlog import PATH` "
            "or `flightlog demo`, or point --db / FLIGHTLOG_DB at yours)"
        )
    elif not local.exists() and not create_dirs and not local.absolute().parent.is_dir():
        problem = (
            f"no directory {local.absolute().parent} for --db {redact_url(db)} (a typo? create the "
            "directory first to start a new database there)"
        )
    if problem is not None:
        err.print(f"flightlog: error: {problem}")
        raise typer.Exit(2)
    return None if read_only or local.exists() else local


def say_created(path: Path | None) -> None:
    """One stderr line when a command created a new, empty database (so a mistyped --db is noticed)."""
    if path is not None and path.exists():
        err.print(f"flightlog: created a new database at {path}")


@contextmanager
def _store(read_only: bool = False) -> Iterator[Store]:
    db = state.db
    postgres = db.startswith(("postgres://", "postgresql://"))
    new = check_new_db(db, read_only=read_only, create_dirs=state.db_is_default)
    try:
        store = open_store(db, read_only=read_only)
    except ImportError:
        if not postgres:
            raise
        raise StoreUnavailable(
            url=redact_url(db), reason="the PostgreSQL backend needs: pip install 'flightlog[postgres]'"
        ) from None
    except StoreUnavailable as exc:  # a password in a query string or keyword value must not be printed
        reason = " ".join(redact_url(exc.reason).split())  # one line, even for libpq's two-line errors
        raise StoreUnavailable(url=redact_url(exc.url), reason=reason) from None
    say_created(new)
    try:
        yield store
    finally:
        store.close()


def _iso(ms: int | None) -> str | None:
    if not ms:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")


# ─── import / ls / show ───────────────────────────────────────────────────────────────────────


@app.command("import")
def import_cmd(
    paths: Annotated[
        list[Path],
        typer.Argument(
            metavar="PATH...",
            help="Transcript files or folders (recursive: *.jsonl, *.traj, OpenHands *.json); - reads one "
            "transcript from stdin.",
        ),
    ],
    format: Annotated[
        str, typer.Option("--format", "-f", help=f"auto or one of: {', '.join(FORMATS)}.")
    ] = "auto",
    json_out: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False,
) -> None:
    """Import Claude Code, Codex CLI, OpenHands and SWE-agent transcripts into verified sessions (a line per session)."""
    if format != "auto" and format not in FORMATS:
        raise typer.BadParameter(
            f"unknown format {format!r} (one of: auto, {', '.join(FORMATS)})", param_hint="--format"
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
        _import_paths([stdin if str(p) == "-" and stdin else p for p in paths], format, json_out, stdin)


def _stdin_to_file(directory: Path) -> Path:
    """Copy stdin, as bytes, to ``directory/stdin`` (importers read files; the name "stdin" is what the
    ledger records as the source name)."""
    path = directory / "stdin"
    with path.open("wb") as fh:
        shutil.copyfileobj(sys.stdin.buffer, fh)
    return path


def _import_paths(paths: list[Path], format: str, json_out: bool, stdin: Path | None) -> None:
    """Import every transcript under ``paths``; ``stdin`` (the copy of stdin, if any) is named ``-``."""
    from .checkpoints import Notary

    def shown(path: Path) -> str:
        return "-" if path == stdin else str(path)

    results: list[dict[str, Any]] = []
    failed = 0
    with _store() as store:
        notary = Notary.from_env()  # the user's log key, created on first use; imports are signed and sealed
        files = list(iter_transcripts(paths))
        if not files:
            err.print(
                "flightlog: error: no transcripts (*.jsonl, *.traj, OpenHands *.json) found under "
                + ", ".join(shown(p) for p in paths)
            )
            raise typer.Exit(2)
        for path in files:
            try:
                result = import_file(store, path, format=format, notary=notary)
            except (ImportFormatError, OSError) as exc:  # one bad file never stops the others
                failed += 1
                reason = exc.reason if isinstance(exc, ImportFormatError) else exc.strerror or str(exc)
                err.print(f"flightlog: error: {shown(path)}: {reason}")
                results.append({"path": shown(path), "error": reason})
                continue
            results.append({**_import_json(result), "path": shown(path)})
            if not json_out:
                _print_import(result)
    if json_out:
        _print_json(results)
    if failed:
        raise typer.Exit(1)


def _import_json(r: Any) -> dict[str, Any]:
    return {
        "path": str(r.path),
        "format": r.format,
        "source_sha256": r.source_sha256,
        "session_ids": r.session_ids,
        "events": r.events,
        "duplicate": r.duplicate,
        "warnings": [str(w) for w in r.warnings],
    }


def _print_import(result: Any) -> None:
    if result.duplicate:
        out.print(f"{result.session_ids[0]}  already imported from {result.path.name}")
        return
    main, *children = result.session_ids
    extra = f" (+{plural(len(children), 'sub-agent session')})" if children else ""
    out.print(f"{main}  {plural(result.events, 'event')} from {result.path.name} [{result.format}]{extra}")
    for warning in result.warnings:
        err.print(f"  warning: {warning}")


@app.command("ls")
def ls_cmd(
    status: Annotated[
        list[str] | None,
        typer.Option(
            "--status", help="Keep sessions with this status (repeatable): completed, running, incomplete..."
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
        typer.Option("--limit", "-n", help="Show the N most recently created (oldest first).", min=0),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
) -> None:
    """List sessions: id, task, status, events, head hash, creation time (oldest first)."""
    since_ms = _since(since) if since is not None else None
    with _store(read_only=True) as store:
        found = find_sessions(store, statuses=status or (), since_ms=since_ms, task=task, limit=limit)
        rows: list[dict[str, Any]] = [
            {
                "session_id": s.session_id,
                "task": s.task,
                "status": s.status,
                "events": s.events,
                "head": s.head_hash,
                "merkle_root": s.merkle_root,
                "source": s.source,
                "parent_session_id": s.parent_session_id,
                "created_at": _iso(s.created_at_ms),
            }
            for s in found
        ]
    if json_out:
        _print_json(rows)
        return
    width = max((len(r["session_id"]) for r in rows), default=7)
    out.print(
        f"{'session':<{width}}  {'status':<10} {'events':>6}  {'head':<12}  {'created (UTC)':<19}  task"
    )
    for row in rows:
        out.print(
            f"{row['session_id']:<{width}}  {row['status']:<10} {row['events']:>6}  {row['head'][:12]:<12}  "
            f"{(row['created_at'] or '')[:19]:<19}  {short(row['task'], 60)}"
        )


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
    session: Annotated[str, typer.Argument(help="Session id or unique prefix.")],
    json_out: Annotated[bool, typer.Option("--json", help="Print events as JSON lines.")] = False,
) -> None:
    """Print a session's timeline: seq, time, kind and a one-line narration per event."""
    with _store(read_only=True) as store:
        sid = store.resolve_session(session)
        record = store.get_session(sid)
        if not json_out:
            out.print(f"session {sid}  [{record.status}]  {short(record.task, 70)}")
        for row, event in iter_events(store, sid):
            if json_out:
                sys.stdout.write(
                    json.dumps({"seq": row.seq, "kind": row.kind, "event": event.to_wire()}) + "\n"
                )
            else:
                out.print(
                    f"{row.seq:>6}  {(_iso(row.recorded_at_ms) or '')[11:19]}  {row.kind:<24} "
                    f"{narrate(event)}"
                )
        refuse_quietly_diverged(store, sid)


# ─── replay / verify / export ─────────────────────────────────────────────────────────────────


@app.command("replay")
def replay_cmd(
    session: Annotated[str, typer.Argument(help="Session id or unique prefix.")],
    at: Annotated[int | None, typer.Option("--at", help="Reconstruct as of this seq (inclusive).")] = None,
    max_part_bytes: Annotated[
        int | None, typer.Option("--max-part-bytes", help="Cap each text part at this many UTF-8 bytes.")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the messages as a JSON array.")] = False,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Rebuild every recorded model request from the ledger and compare digests; exit 1 naming "
            "the first turn whose request does not reproduce.",
        ),
    ] = False,
) -> None:
    """Reconstruct the messages a model would see, at the head or at any sequence."""
    if check:
        _check_requests(session, json_out)
        return
    if at is not None and at < 0:
        raise typer.BadParameter("must be >= 0", param_hint="--at")
    if max_part_bytes is not None and max_part_bytes < 0:
        raise typer.BadParameter("must be >= 0", param_hint="--max-part-bytes")
    with _store(read_only=True) as store:
        sid = store.resolve_session(session)
        if at is not None:
            last = store.get_session(sid).events - 1
            if at > last:
                head = f"last seq {last}" if last >= 0 else "the session has no events"
                raise typer.BadParameter(f"seq {at} is past the head ({head})", param_hint="--at")
        messages = replay_session(store, sid, at=at, max_part_bytes=max_part_bytes)
        if json_out:
            _print_json([m.to_wire() for m in messages])
        else:
            for index, message in enumerate(messages):
                _print_message(index, message)
        refuse_quietly_diverged(store, sid)


def _check_requests(session: str, json_out: bool) -> None:
    with _store(read_only=True) as store:
        sid = store.resolve_session(session)
        report = check_session(store, sid)
        first = report.first
        if json_out:
            wire = (
                None
                if first is None
                else {"seq": first.seq, "turn": first.turn, "actor": first.actor, "reason": first.reason}
            )
            _print_json(
                {
                    "session_id": sid,
                    "checked": report.checked,
                    "ok": report.ok,
                    "mismatches": len(report.mismatches),
                    "first": wire,
                }
            )
        elif first is None:
            out.print(f"{sid}: {report.checked} model requests rebuilt from the ledger; all reproduce")
        else:
            err.print(
                f"flightlog: {sid}: the request of turn {first.turn} ({first.actor}, seq {first.seq}) does not "
                f"reproduce: {first.reason}; {len(report.mismatches)} of {report.checked} differ"
            )
        refuse_quietly_diverged(store, sid)
        if not report.ok:
            raise typer.Exit(1)


def refuse_quietly_diverged(store: Store, sid: str) -> None:
    """After printing a session (show, replay, export, tail), check its chain (streaming, no decoding): a
    session that fails verification gets one warning line naming the first divergent seq, and exit 1,
    so what was just printed is never taken for the recorded history silently."""
    report = verify_session(store, sid, decode=False)
    if report.ok:
        return
    first = report.divergences[0]
    err.print(
        f"flightlog: warning: {sid} fails verification at seq {first.seq} ({first.reason}); what was "
        f"printed may not be what was recorded (see `flightlog verify {sid}`)"
    )
    raise typer.Exit(1)


def _print_message(index: int, message: Message) -> None:
    out.print(f"[{index}] {message.role}")
    for part in message.content:
        wire = part.to_wire()
        kind = wire.pop("type")
        body = wire.get("text") or wire.get("thinking") or wire.get("output") or wire.get("ref") or ""
        label = "" if kind == "text" else f"({kind}) "
        out.print(f"    {label}{short(str(body), 300)}")
    for call in message.tool_calls:
        out.print(f"    -> {call.name} [{call.id}] {short(call.arguments, 200)}")


@app.command("verify")
def verify_cmd(
    session: Annotated[str | None, typer.Argument(help="Session id or unique prefix.")] = None,
    all_sessions: Annotated[
        bool, typer.Option("--all", help="Verify every session and the index log.")
    ] = False,
    offline: Annotated[
        bool, typer.Option("--offline", help="Do not ask witnesses (stored cosignatures only).")
    ] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False,
) -> None:
    """Full check: chains, tree heads, signed checkpoints, seal, retained and witnessed heads; exit 1 listing
    every divergent sequence, 0 when intact. Says sealed, or open with the unanchored tail seqs."""
    from .cli_audit import check_sessions

    if bool(session) == all_sessions:
        raise typer.BadParameter("give a SESSION or --all (not both)")
    check_sessions(session, all_sessions=all_sessions, json_out=json_out, offline=offline)


@app.command("export")
def export_cmd(
    session: Annotated[str, typer.Argument(help="Session id or unique prefix.")],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")
    ] = None,
    bundle: Annotated[
        Path | None,
        typer.Option(
            "--bundle", help="Write an offline audit bundle directory (signed manifest, proofs, keys)."
        ),
    ] = None,
) -> None:
    """Export a session as JSONL: seq, prev_hash, hash and the event (its RFC 8785 form = stored bytes).

    With --bundle DIR: everything ``flightlog audit --bundle DIR`` needs to verify it offline.
    """
    if bundle is not None and output is not None:
        raise typer.BadParameter("give --output or --bundle (not both)")
    problem = None
    if bundle is not None and bundle.exists() and not bundle.is_dir():
        problem = f"--bundle {bundle} exists and is not a directory"
    elif output is not None and output.is_dir():
        problem = f"--output {output} is a directory (give a file path)"
    elif output is not None and not output.absolute().parent.is_dir():
        problem = f"cannot write {output}: no directory {output.absolute().parent}"
    if problem is not None:
        err.print(f"flightlog: error: {problem}")
        raise typer.Exit(2)
    with _store(read_only=True) as store:
        sid = store.resolve_session(session)
        if bundle is not None:
            from .bundle import export_bundle

            manifest = export_bundle(store, sid, bundle)
            err.print(f"wrote a bundle of {plural(manifest['events'], 'event')} of {sid} to {bundle}")
            refuse_quietly_diverged(store, sid)
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
) -> None:
    """Recover a database whose WAL is poisoned: backup, quarantine the WAL, verify read-only."""
    from .repair import repair_discard_wal

    if not discard_wal:
        raise typer.BadParameter(
            "refusing to repair without --discard-wal (commits only in the WAL would be set aside)"
        )
    report = repair_discard_wal(state.db, discard_wal=True)
    if report.wal_present:
        out.print(f"WAL {report.wal_size_bytes} bytes sha256 {report.wal_sha256} quarantined")
    else:
        out.print("no WAL present; nothing quarantined")
    out.print(f"backups and repair.json in {report.backup_dir}")
    out.print(
        f"verified read-only: integrity_check {report.integrity_check}, "
        f"{plural(report.sessions_verified, 'session')}, {plural(report.events_verified, 'event')}"
    )


# ─── demo ─────────────────────────────────────────────────────────────────────────────────────


@app.command("demo")
def demo_cmd() -> None:
    """Import the bundled example transcripts, verify, list, replay one, then show tamper detection."""
    from .checkpoints import Notary
    from .demo import run_demo

    with _store() as store:
        code = run_demo(store, out, notary=Notary.from_env())
    if code:
        raise typer.Exit(code)


# ─── mounted command groups ───────────────────────────────────────────────────────────────────


def _mount() -> None:
    from .cli_audit import audit_app
    from .cli_fleet import register as register_fleet
    from .cli_kernel import register as register_kernel
    from .cli_runs import register as register_runs
    from .web.cli import register as register_web

    register_kernel(app, _store)
    register_runs(app, _store)
    register_fleet(app, _store)
    register_web(app, _store)
    app.add_typer(audit_app)


_mount()


# ─── entry point ──────────────────────────────────────────────────────────────────────────────

_USAGE_ERRORS = (SessionNotFound, ImportFormatError)


def _exit_code(exc: FlightlogError) -> int:
    if isinstance(exc, _USAGE_ERRORS):
        return 2
    if isinstance(exc, RepairError) and exc.reason.startswith(("refusing", "no such")):
        return 2
    return 1


def handle_errors(exc: FlightlogError) -> NoReturn:
    """Print one ``flightlog: error: ...`` line (traceback with ``--debug``) and exit 1 or 2."""
    if state.debug:
        import traceback

        traceback.print_exception(exc)
    err.print(f"flightlog: error: {exc}")
    raise typer.Exit(_exit_code(exc))


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
