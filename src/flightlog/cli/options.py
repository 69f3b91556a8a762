"""What every ``flightlog`` command module shares: the global options' state (``--db``, ``--debug``), the
store they open, output consoles, JSON and time formatting, and the one error-to-exit-code mapping.

The command modules (:mod:`flightlog.cli.root`, ``audit``, ``kernel``, ``runs``, ``fleet``) import this
module, never each other (ARCHITECTURE.md, "Layers"). Exit codes: see :mod:`flightlog.cli.root`.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

import typer
from typer.core import TyperGroup

from ..errors import (
    FlightlogError,
    ImportFormatError,
    RepairError,
    SessionNotFound,
    StoreUnavailable,
    install_hint,
)
from .console import console

if TYPE_CHECKING:  # the store and the recorder load inside the functions: start-up stays light
    from ..integrity.lineage import ParentLedger
    from ..live import RunView
    from ..store import Store
    from ..store.base import SessionRecord

SQL_INT_MAX = 2**63 - 1
"""The largest value an int option that reaches SQL may take (:func:`count_option`: ``ls -n``, ``runs
--limit``, ``memory search -k``): SQLite's INTEGER and PostgreSQL's bigint stop there, so a larger value is a
bad option (exit 2, naming it), not a store error."""


def count_option(*names: str, help: str, low: int = 0) -> Any:
    """A count option's ``typer.Option`` (for ``Annotated[int | None, ...]``): ``low`` to :data:`SQL_INT_MAX`,
    checked when parsed (a value outside is a bad option, exit 2, naming the option), while ``--help`` shows
    a plain ``<int>`` (a ``min=``/``max=`` range printed ``<int range> [0<=x<=9223372036854775807]``)."""

    def check(value: int | None) -> int | None:
        if value is not None and value < low:
            raise typer.BadParameter(f"{value} is less than {low}")
        if value is not None and value > SQL_INT_MAX:
            raise typer.BadParameter(
                f"{value} is more than a database count holds ({SQL_INT_MAX}, 2**63 - 1)"
            )
        return value

    return typer.Option(*names, help=help, callback=check)


EXIT_CLOSED_PIPE = 141
"""Exit code when stdout's reader went away (128 + SIGPIPE, as a shell reports for ``cat`` killed by one)."""

SESSION_HELP = (
    "Session id or unique prefix (of the id, or of the part after its format prefix such as claude-code:). "
    "A prefix that matches one session and only that session's own sub-agent and task streams "
    "(<id>:agent:..., <id>:task:...) names the session; one shared by two sessions is ambiguous."
)
"""Help of every ``SESSION`` argument (the rule is ``Store.resolve_session``'s)."""


def session_arg(help: str = SESSION_HELP) -> Any:
    """The ``SESSION`` positional argument's ``typer.Argument`` (for ``Annotated``), with ``help``."""
    return typer.Argument(metavar="SESSION", help=help)


def operator_option() -> Any:
    """The ``--as NAME`` option's ``typer.Option`` (for ``Annotated[str, ...]``): who records a decision
    (``approve``, ``deny``, ``db accept-restore``)."""
    return typer.Option(
        "--as", help="Your operator name, recorded with the decision (1-80 printable characters)."
    )


CONTEXT = {"help_option_names": ["-h", "--help"]}
"""Click context settings of every flightlog command: ``-h`` is ``--help`` (inherited by subcommands)."""


_RST_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`~?([^`<]*?)\s*(?:<[^`>]*>)?`")
"""A Sphinx role (``:func:`x```, ``:class:`~a.b.C```, ``:ref:`text <target>```): group 1 is its text."""


def plain_help(text: str) -> str:
    """``text`` (a command's docstring or an option's help) as ``--help`` prints it: reStructuredText's
    ``code`` as `code`, a Sphinx role as its text (``:class:`~a.b.C``` as `C`, a dotted name's last part
    when written with ``~``). Everything else is kept as written."""
    text = _RST_ROLE.sub(lambda m: "`" + (m[1].rsplit(".", 1)[-1] if m[0].count("`~") else m[1]) + "`", text)
    return text.replace("``", "`")


def _plain_help_tree(command: Any) -> None:
    """:func:`plain_help` on the help of ``command``, its parameters and its sub-commands (once)."""
    if getattr(command, "_flightlog_plain", False):
        return
    command._flightlog_plain = True
    for owner in (command, *getattr(command, "params", ())):
        for attr in ("help", "short_help"):
            if isinstance(value := getattr(owner, attr, None), str):
                setattr(owner, attr, plain_help(value))
    sub = getattr(command, "commands", None)
    if isinstance(sub, dict):  # a nested group (the root's own are lazy: get_command cleans each)
        for child in sub.values():
            _plain_help_tree(child)


class Group(TyperGroup):
    """Maps flightlog errors, usage mistakes and a closed stdout to one stderr line (or none, for the pipe)
    and an exit code, for the console and CliRunner alike (STYLE.md (f)); every command it hands out has
    :func:`plain_help` help (the docstrings are reStructuredText, which ``--help`` would print as is)."""

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            _plain_help_tree(command)
        return command

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
        err.print(f"flightlog: error: {_global_option_misplaced(exc, ctx) or message + hint}")
        raise typer.Exit(2) from None
    except BrokenPipeError:
        closed_pipe()


def _global_option_misplaced(exc: Exception, ctx: Any) -> str | None:
    """For an option a command does not take that is one of the ``flightlog`` root's own (``--db``,
    ``--debug``: click's ``NoSuchOption`` raised under a sub-command), the error saying where it goes:
    ``--db goes before the command: flightlog --db PATH|URL import ... (an option of flightlog itself, not
    of import)``; None for any other mistake. Global options are taken in one place, so ``--db`` means one
    thing on every command (``worker`` alone also takes it after, for scripts written that way)."""
    name = getattr(exc, "option_name", None)
    if type(exc).__name__ != "NoSuchOption" or not isinstance(name, str) or ctx is None:
        return None
    root = ctx.find_root()
    if root is ctx:  # given to flightlog itself: a plain unknown option
        return None
    for param in root.command.params:
        if name in getattr(param, "opts", ()):
            value = f" {param.metavar or 'VALUE'}" if not getattr(param, "is_flag", False) else ""
            command = ctx.command_path.removeprefix(root.command_path).strip()
            return (
                f"{name} goes before the command: flightlog {name}{value} {command} ... (an option of "
                f"flightlog itself, not of {command})"
            )
    return None


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
    return data_dir_db()


def data_dir_db() -> str:
    from platformdirs import user_data_dir

    return str(Path(user_data_dir("flightlog", appauthor=False)) / "flightlog.db")


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


def check_new_db(db: str, *, read_only: bool, create_dirs: bool = False, name: str = "--db") -> Path | None:
    """Refuse a ``--db`` a user most likely mistyped, before anything is created (exit 2, one line): a
    directory, a file in a directory that does not exist (unless ``create_dirs``: the default location),
    or, read-only, a file that does not exist yet. ``name`` is what the line calls it (``--db``, or an
    argument's metavar: ``db copy``'s ``SRC``, ``DST``).

    Returns:
        The path of the SQLite file a writable open is about to create (say so once it is), else None.
    """
    from ..store import redact_url

    local = local_db_path(db)
    if local is None:
        return None
    problem = None
    if local.is_dir():
        problem = f"{name} {redact_url(db)} is a directory (give a database file)"
    elif read_only and not local.exists():
        problem = (
            f"no database at {redact_url(db)} yet (create one with `flightlog import PATH` "
            "or `flightlog demo`, or point --db / FLIGHTLOG_DB at yours)"
        )
    elif not local.exists() and not create_dirs and not local.absolute().parent.is_dir():
        problem = (
            f"no directory {local.absolute().parent} for {name} {redact_url(db)} (a typo? create the "
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
def open_db(read_only: bool = False) -> Iterator[Store]:
    from ..store import open_store, redact_url

    db = state.db
    postgres = db.startswith(("postgres://", "postgresql://"))
    new = check_new_db(db, read_only=read_only, create_dirs=state.db_is_default)
    try:
        store = open_store(db, read_only=read_only)
    except ImportError:
        if not postgres:
            raise
        raise StoreUnavailable(
            url=redact_url(db), reason=f"the PostgreSQL backend needs: {install_hint('postgres')}"
        ) from None
    except StoreUnavailable as exc:  # a password in a query string or keyword value must not be printed
        reason = " ".join(redact_url(exc.reason).split())  # one line, even for libpq's two-line errors
        raise StoreUnavailable(url=redact_url(exc.url), reason=reason) from None
    say_created(new)
    try:
        if read_only:  # a write is refused naming the same (LedgerRetired), so it is said once
            _say_retired(store)
        yield store
    finally:
        store.close()


def _say_retired(store: Store) -> None:
    """One stderr note when ``flightlog db copy`` retired the store being read (``--json`` output on
    stdout unchanged): what ``ls`` lists is a read-only copy, the ledger goes on where it was copied to."""
    from ..store.base import retired_notice

    notice = retired_notice(store)
    if notice is not None:
        err.print(f"flightlog: note: {notice}")


def iso_time(ms: int | None) -> str | None:
    if not ms:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def print_json(value: Any) -> None:
    """``value`` as JSON on stdout and a newline: exactly ``json.dumps(value, indent=2, ensure_ascii=False)``.

    A list is written a thousand items at a time, and an item that is a flat object (text keys; values
    text, integers, booleans or null, as each row of ``ls --json``) is spelled by :func:`_flat_item` with
    the C string encoder instead of :mod:`json`'s pure-Python indenting encoder (which ``indent`` selects):
    at 100,000 sessions ``ls --json`` spent most of its time there (bench/README.md, runs section). Any
    other value goes through :func:`json.dumps`; ``tests/test_print_json.py`` checks both agree."""
    if not isinstance(value, list) or not value:
        sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")
        return
    sys.stdout.write("[\n")
    last = len(value) - 1
    for start in range(0, len(value), 1000):
        chunk = value[start : start + 1000]
        sys.stdout.write(
            ",\n".join("  " + (_flat_item(item) or _nested_item(item)) for item in chunk)
            + (",\n" if start + len(chunk) <= last else "\n")
        )
    sys.stdout.write("]\n")


def _nested_item(item: Any) -> str:
    """A list item as ``json.dumps(..., indent=2)`` writes it one level deep (its lines indented by two
    more spaces; no JSON string holds a raw newline, so every newline is a line break)."""
    return json.dumps(item, indent=2, ensure_ascii=False).replace("\n", "\n  ")


_SCALARS: dict[Any, str] = {None: "null", True: "true", False: "false"}


def _flat_item(item: Any) -> str | None:
    """A list item that is a dict of exactly ``str`` keys and ``str``/``int``/``bool``/``None`` values, as
    ``json.dumps(..., indent=2, ensure_ascii=False)`` writes it one level deep; None for anything else
    (a subclass, a float, a nested value, an empty dict), which :func:`_nested_item` writes."""
    if type(item) is not dict or not item:
        return None
    encode = json.encoder.encode_basestring  # what ensure_ascii=False selects (C when available)
    parts = []
    for key, field in item.items():
        kind = type(field)
        if type(key) is not str:
            return None
        if kind is str:
            text = encode(field)
        elif kind is int:
            text = int.__repr__(field)
        elif field is None or kind is bool:
            text = _SCALARS[field]
        else:
            return None
        parts.append(f"    {encode(key)}: {text}")
    return "{\n" + ",\n".join(parts) + "\n  }"


def refuse_quietly_diverged(store: Store, sid: str) -> None:
    """After printing a session (show, replay, export, tail), check it (:func:`warn_diverged`: one
    streaming pass, no decoding): a session that fails gets one warning line naming the first divergent
    seq, and exit 1, so what was just printed is never taken for the recorded history silently."""
    if warn_diverged(store, [sid], rows=True):
        raise typer.Exit(1)


def warn_diverged(store: Store, session_ids: Iterable[str], *, rows: bool = False) -> bool:
    """Check each session and print one warning line per session that fails, naming its first divergent
    seq, reason and detail; returns whether any did (the caller exits 1).

    With ``rows``, a session whose ledger passes is also checked against its ``sessions`` row
    (:func:`flightlog.kernel.rowcheck.row_divergences`: the status ``show`` prints, the source, a kernel
    sub-agent's parent, proven by its parent's ledger under this same check: ``row_mismatch``).

    The check is :func:`flightlog.integrity.verify.audit_session` without decoding or artifact lookups:
    the chain and tree head, and every stored signed checkpoint, the seal and the retained head (under the user's trusted
    keys and head directory, the store's retirement loaded once), so a session edited and then re-chained
    (every hash recomputed) is caught by the checkpoint or retained head it contradicts
    (``checkpoint_mismatch``, ``fork``, ``rollback``...). Witnesses and the index log are not consulted
    (network, a pass over the whole index log): ``flightlog verify`` does that. In a retired store, a
    session that went on in the live store (``stale_copy`` alone) is not warned about: what was printed is
    what this store holds, as its signed retirement record pins it.

    Raises:
        KeyManifestError: the trusted-key manifest is unreadable or untrusted.
    """
    check = _quick_check(store)
    found = False
    for sid in session_ids:
        _events, problem = check(sid, rows)
        if problem is not None:
            found = True
            err.print(
                f"{problem}what was printed may not be what was recorded (see `flightlog verify {sid}`)"
            )
    return found


def check_before_printing(store: Store, sid: str) -> tuple[bool, int]:
    """:func:`warn_diverged`'s check of one session and its row, plus the artifacts its events name (each
    archive and salted text read and hashed, as ``audit`` does: ``artifact_corrupt``, ``artifact_missing``),
    run before the session is printed (``show``, ``replay``): a session that fails gets its warning line on
    stderr first (``...; what follows may not be what was recorded``), so a reader that stops early
    (``show S | head``) still sees it, and an archive the printing never reads (a page-out ``replay``
    shows as its stub) is checked all the same. Returns ``(failed, the number of events checked)``: the
    caller prints those events only, so what it prints is what was checked even while a writer appends,
    and exits 1 when it failed.

    Raises:
        KeyManifestError: the trusted-key manifest is unreadable or untrusted.
    """
    events, problem = _quick_check(store, artifacts=True)(sid, True)
    if problem is not None:
        err.print(f"{problem}what follows may not be what was recorded (see `flightlog verify {sid}`)")
    return problem is not None, events


def _quick_check(store: Store, *, artifacts: bool = False) -> Callable[[str, bool], tuple[int, str | None]]:
    """The check :func:`warn_diverged` describes, keys, heads and retirement loaded once: a function of
    ``(session id, rows)`` giving ``(events checked, the warning's start or None)``, the start naming the
    first divergence and ending ``"; "``. With ``artifacts``, the artifacts the events name are read and
    hashed too (:func:`~flightlog.integrity.verify.audit_session`'s ``artifacts``)."""
    from ..integrity.heads import HeadStore
    from ..integrity.keys import load_keyring
    from ..integrity.retirement import load_retirement
    from ..integrity.verify import audit_session

    keyring, heads = load_keyring(), HeadStore.default()
    retired = load_retirement(store, keyring)

    proven: dict[str, ParentLedger] = {}  # parents that passed, by id: checked once for all their children

    def parent(sid: str) -> ParentLedger:
        """The same check of a sub-agent's parent, and the children its ledger spawned (kept while the
        parent's head stands still, as ``Auditor.trees`` keeps them)."""
        from ..integrity.lineage import ParentLedger, SpawnScan

        kept = proven.get(sid)
        if kept is not None and kept.events == store.get_session(sid).head_seq + 1:
            return kept
        scan = SpawnScan()
        report = audit_session(
            store,
            sid,
            keyring=keyring,
            heads=heads,
            decode=False,
            retired=retired,
            artifacts=False,
            tap=scan.tap,
        )
        problems = [d for d in report.divergences if d.reason != "stale_copy"]
        if problems:
            return ParentLedger({}, report.events, f"seq {problems[0].seq}: {problems[0].reason}")
        proven[sid] = ParentLedger(scan.children, report.events, unkeyed=scan.unkeyed)
        return proven[sid]

    def check(sid: str, rows: bool) -> tuple[int, str | None]:
        report = audit_session(
            store, sid, keyring=keyring, heads=heads, decode=False, retired=retired, artifacts=artifacts
        )
        if rows:
            from ..kernel.rowcheck import row_divergences

            report.divergences.extend(row_divergences(store, report, parents=parent))
        # a stale copy (a retired store's session that went on in the live one) printed what it holds
        problems = [d for d in report.divergences if d.reason != "stale_copy"]
        if not problems:
            return report.events, None
        first = problems[0]
        detail = f": {first.detail}" if first.detail else ""
        return report.events, (
            f"flightlog: warning: {sid} fails verification at seq {first.seq} ({first.reason}){detail}; "
        )

    return check


_USAGE_ERRORS = (SessionNotFound, ImportFormatError)


def _exit_code(exc: FlightlogError) -> int:
    if isinstance(exc, _USAGE_ERRORS):
        return 2
    if isinstance(exc, RepairError) and exc.reason.startswith(("refusing", "no such")):
        return 2
    return 1


def handle_errors(exc: FlightlogError) -> NoReturn:
    """Print one ``flightlog: error: ...`` line (traceback with ``--debug``) and exit 1 or 2; a refusal
    for the retained heads is a few wrapped lines instead (:func:`error_lines`)."""
    if state.debug:
        import traceback

        traceback.print_exception(exc)
    for line in error_lines(exc):
        err.print(line)
    raise typer.Exit(_exit_code(exc))


LINE_WIDTH = 100
"""The width the few multi-line messages (:func:`wrapped`) are wrapped at."""


def wrapped(text: str, *, indent: str = "  ", width: int = LINE_WIDTH) -> list[str]:
    """``text`` as lines of at most ``width`` characters (a longer word is left whole), each line after
    the first indented by ``indent``; breaks only at spaces, never inside a word or a command."""
    import textwrap

    return textwrap.wrap(
        text, width=width, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False
    ) or [""]


def error_lines(exc: FlightlogError) -> list[str]:
    """What ``flightlog: error:`` prints for ``exc``: one line, except a session refused because the
    retained heads disagree with the database (:data:`~flightlog.integrity.heads.HEADS_AHEAD` in its
    reason and its first divergence :func:`~flightlog.integrity.heads.from_retained_head`): that message ran to 700 characters on one line, so it is said as the refusal and what it
    means, what was found, whether every session is refused, the next step
    (:func:`~flightlog.integrity.heads.accept_step`: for a fork, ``--accept-fork``, as plain accept-restore
    refuses one; else as ``ls`` and ``pending`` say it) and why
    copies do this, each wrapped at :data:`LINE_WIDTH` columns."""
    from ..errors import LedgerIntegrityError

    if not isinstance(exc, LedgerIntegrityError):
        return [f"flightlog: error: {exc}"]
    from ..integrity.heads import (
        ACCEPT_RESTORE_DOES,
        HEADS_AHEAD,
        INDEX_SCOPE,
        WHY_COPIES,
        accept_step,
        from_retained_head,
    )

    found, hinted, _ = exc.reason.partition(f"; {HEADS_AHEAD}")
    if not hinted or not exc.divergences or not from_retained_head(exc.divergences[0]):
        # The database fails its own checks first (a rechained or edited row): that is the news, in one
        # line, not "restored from an older copy".
        return [f"flightlog: error: {exc}"]
    where = f"at seq {exc.seq}: " if exc.seq is not None else ""
    more = f" (+{len(exc.divergences) - 1} more divergent)" if len(exc.divergences) > 1 else ""
    parts = [
        f"flightlog: error: refusing to act on session {exc.session_id}: {HEADS_AHEAD}",
        f"  found: {where}{found}{more}",
        *([f"  {INDEX_SCOPE}"] if INDEX_SCOPE in exc.reason else []),
        f"  next: {accept_step(exc.divergences)}",
        f"    ({ACCEPT_RESTORE_DOES})",
        "  `flightlog verify --all` names each divergence",
        f"  why: {WHY_COPIES}",
    ]
    return [line for part in parts for line in wrapped(part, indent="    " if part[0] == " " else "  ")]


def heads_ahead_lines(store: Store, records: Iterable[SessionRecord] = ()) -> list[str]:
    """What ``ls`` and ``pending`` print up front (stderr) when acting on what they list will be refused
    for the retained heads (:func:`flightlog.integrity.heads.heads_ahead`: the index log's head, then those
    of the sessions of ``records``): one warning saying which sessions are refused and why
    (:data:`~flightlog.integrity.heads.HEADS_AHEAD`), then the next step, as the refusal words it (for a head
    of the store's own size and another root, a fork: ``--accept-fork``); wrapped at
    :data:`LINE_WIDTH`. Nothing for a store whose heads agree, or a retired store (its own note says that
    acting there is refused)."""
    from ..integrity.heads import ACCEPT_FORK_STEP, ACCEPT_RESTORE_STEP, HEADS_AHEAD, HeadStore, heads_ahead
    from ..store.base import retired_notice

    if retired_notice(store) is not None:
        return []
    ahead = heads_ahead(store, HeadStore.default(), records)
    if ahead is None:
        return []
    if ahead.index:
        whom = "every session of this database"
    else:
        named = ", ".join(ahead.sessions[:3])
        whom = f"session {named}" if len(ahead.sessions) == 1 else f"sessions {named}"
        whom += f" and {len(ahead.sessions) - 3} more" if len(ahead.sessions) > 3 else ""
    return [
        *wrapped(f"flightlog: warning: approve, deny, resume and abort refuse {whom}: {HEADS_AHEAD}"),
        *wrapped(f"  next: {ACCEPT_FORK_STEP if ahead.fork else ACCEPT_RESTORE_STEP}", indent="    "),
        "    (`flightlog verify --all` names each divergence)",
    ]


Advance = Callable[..., None]
"""``advance(n=1, **fields)``: count ``n`` more items done on a progress bar (``fields``: its columns)."""


@contextmanager
def progress_bar(
    total: int, what: str, *, quiet: bool = False, stream: TextIO | None = None
) -> Iterator[Advance]:
    """A rich progress bar on stderr (or ``stream``) for long work: a description, the bar, ``done/total``
    counts, an ``events`` column, elapsed time and ETA; shown only when that stream is a terminal and not
    ``quiet`` (``--json``); piped, nothing (the command's own line per item is the plain output). As in
    Textualize/rich ``rich/progress.py`` (``disable=``); transient: it leaves no trace once done.

    Yields:
        :data:`Advance` (``advance(1, events=120)``).
    """
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    target = Console(stderr=stream is None, file=stream, highlight=False, markup=False, emoji=False)
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[events]} events"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=target, transient=True, disable=quiet or not target.is_terminal) as bar:
        task = bar.add_task(what, total=total, events=0)

        def advance(n: int = 1, **fields: Any) -> None:
            bar.update(task, advance=n, **fields)

        yield advance


def record_finished_job(
    job: str,
    goal: str,
    *,
    started_at_ms: int,
    reason: str,
    done: int,
    failed: int = 0,
    summary: dict[str, Any] | None = None,
    db: str | None = None,
) -> str | None:
    """Record a core job that has just ended (``verify --all``, ``db copy``) as a ``core_job`` run in the
    store at ``db`` (default ``--db``), opened writable for it: started at ``started_at_ms``, ended now
    with ``reason`` (:class:`flightlog.runs.jobs.CoreJob`). Returns its session id; when that store
    refuses the write (read-only, retired, unreachable) says so in one stderr note and returns None: the
    job itself has done its work."""
    from ..integrity.notary import Notary
    from ..runs.jobs import CoreJob
    from ..store import open_store

    target = db if db is not None else state.db
    try:
        with open_store(target) as store:
            recorded = CoreJob.start(
                store, job, goal, notary=Notary.from_env(), total=done, started_at_ms=started_at_ms
            )
            recorded.advance(done=done, failed=failed)
            recorded.finish(reason, summary)
            return recorded.session_id
    except FlightlogError as exc:
        err.print(f"flightlog: note: this {job} is not recorded as a core_job run: {exc}")
        return None


def abandoned_notes(
    store: Store, session_ids: Iterable[str] | None = None, views: Iterable[RunView] | None = None
) -> list[str]:
    """One ``flightlog: note:`` line per abandoned run (:func:`flightlog.live.is_abandoned`: the ledger
    holds it in a state a process drives, and no heartbeat or event came within the 30 s lease) among
    ``views`` (None: the store's runs, as ``runs`` lists them with the default lease) whose id is in
    ``session_ids`` (None: all), saying what to do: ``flightlog resume`` for a kernel run (its
    ledger is where it continues from), ``flightlog watch``/``import --seal`` for an imported transcript
    whose watch stopped, else that its process stopped without recording an end. ``ls``, ``show`` and
    ``runs`` print them on stderr after what stdout shows. With ``views`` None and the runs projection
    missing or stale (an older flightlog built it: a fold-version upgrade), the ledgers are folded to find
    them, which takes minutes at 100,000 runs: the first line says so and how to rebuild it, as ``runs``
    does."""
    from ..live import list_run_views, wall_ms
    from ..runs.projection import projection_ready

    wanted = None if session_ids is None else set(session_ids)
    now, more, named = wall_ms(), 0, 0
    notes: list[str] = []
    if views is None and not projection_ready(store):
        notes.append(STALE_PROJECTION_NOTE)
    for view in list_run_views(store, abandoned_only=True) if views is None else views:
        sid = view.snapshot.run_id
        if not view.abandoned or (wanted is not None and sid not in wanted):
            continue
        if named == ABANDONED_NOTES:  # only counted: no session row read for a note not printed
            more += 1
            continue
        try:
            source = store.get_session(sid).source
        except SessionNotFound:  # a run id that names no session (a fleet run): no session hint
            source = ""
        if source == "kernel":
            from ..kernel.approvals import NO_SPEC_NOTE, resume_command

            command = resume_command(store, sid)
            hint = f"`{command}` continues it from its ledger"
            hint += "" if command == f"flightlog resume {sid}" else f" ({NO_SPEC_NOTE})"
        elif source.startswith("import:"):
            hint = (
                "the watch recording it stopped: `flightlog watch` follows it again, `import --seal` ends it"
            )
        else:
            hint = "the process recording it stopped without recording an end"
        seen, named = ago(view.last_seen_ms, now), named + 1
        notes.append(f"flightlog: note: {sid} is abandoned (last seen {seen}; killed or crashed?): {hint}")
    if more:  # a killed watch may leave many: name a few, count the rest
        notes.append(f"flightlog: note: {more} more abandoned (`flightlog runs --abandoned`)")
    return notes


ABANDONED_NOTES = 5
"""At most this many abandoned runs are named by :func:`abandoned_notes`; one more line counts the rest."""

STALE_PROJECTION_NOTE = (
    "flightlog: note: runs projection missing or stale; folding the ledgers (try `flightlog runs --rebuild`)"
)
"""What ``ls``, ``show`` (:func:`abandoned_notes`) and ``runs`` print before folding every ledger because
the stored runs projection is not this flightlog's (``flightlog.runs.projection.projection_ready``)."""


def ago(ms: int | None, now: int) -> str:
    """How long before ``now`` (epoch ms) ``ms`` was, in its largest whole unit: ``42s ago``, ``3m ago``,
    ``5h ago``, ``298d ago``; ``never`` for None."""
    if ms is None:
        return "never"
    seconds = max(0, now - ms) // 1000
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return f"{seconds}s ago"


SHORT_ID_CHARS = 12
"""The fewest characters :func:`short_session` shortens a session id to (the demos print ``sid[:12]``); an
id with a format part keeps 8 characters after it (``claude-code:491e126e``)."""


def short_session(store: Store, session_id: str) -> str:
    """``session_id`` shortened for a line that repeats it (``show``'s and ``tail``'s ``run … started``):
    its shortest prefix of at least :data:`SHORT_ID_CHARS` characters (8 past a ``format:`` part) that names
    it today (:meth:`~flightlog.store.base.Store.resolve_session` gives it back), so it still pastes into
    any command that takes a session; the whole id when no prefix at least 8 characters shorter does, or
    when only a prefix running into a second ``:`` part would (a sub-agent's ``<id>:agent:<x>``). A
    later session can make a prefix ambiguous, as a short git hash: the whole id stays in ``show``'s header
    and ``--json``. One ``resolve_session`` per length tried."""
    head = session_id.find(":") + 1  # past a format part (0: none)
    stream = session_id.find(":", head)  # a stream of another session (<id>:agent:<x>): cut before it
    most = len(session_id) - 8 if stream < 0 else min(stream, len(session_id) - 8)
    for size in range(max(SHORT_ID_CHARS, head + 8), most + 1):
        try:
            if store.resolve_session(session_id[:size]) == session_id:
                return session_id[:size]
        except SessionNotFound:  # shared by several sessions: longer
            continue
    return session_id
