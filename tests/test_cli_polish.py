"""What a new user meets in the first hour of ``flightlog`` (issue 10, item 11): help text that keeps its
``[...]``, ``-h``, one-line usage errors, a quiet exit on a closed pipe, shell completion, a mistyped
``--db`` caught before anything is created."""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main
from tests.test_cli import _poison_wal
from typer.testing import CliRunner

from flightlog.cli import EXIT_CLOSED_PIPE, app
from flightlog.events import Custom
from flightlog.integrity.notary import Notary
from flightlog.narration import plural
from flightlog.recorder import Recorder
from flightlog.sessions import iter_events
from flightlog.store import SqliteStore, open_store

runner = CliRunner()
SAMPLES = Path(__file__).parent / "data" / "samples"
FLIGHTLOG = Path(sys.executable).parent / "flightlog"  # the console script of this environment


def commands(group: Any = None, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every (command path, click command) of the real tree, groups included, depth first."""
    group = group if group is not None else typer.main.get_command(app)
    yield path, group
    for name, sub in sorted(getattr(group, "commands", {}).items()):
        yield from commands(sub, (*path, name))


ALL = [path for path, _ in commands()]


def invoke(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


# ─── help ─────────────────────────────────────────────────────────────────────────────────────


def test_help_keeps_bracketed_text() -> None:
    """Rich markup ate "[env FLIGHTLOG_DB; default: user data dir]" ("Database path or URL .")."""
    code, out, _ = invoke("--help")
    assert code == 0
    assert "[env FLIGHTLOG_DB; default: user data dir]" in " ".join(out.split())
    code, out, _ = invoke("prove", "--help")
    assert "[default: latest signed checkpoint]" in " ".join(out.split())


README = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
WITH_ARGUMENTS = [
    path for path, command in commands() if any(p.param_type_name == "argument" for p in command.params)
]


@pytest.mark.parametrize("path", WITH_ARGUMENTS, ids=" ".join)
def test_positional_arguments_are_named_as_the_readme_names_them(path: tuple[str, ...]) -> None:
    """Help printed ``{session}`` and ``session <str>`` where the README writes ``SESSION``: every positional
    argument's name in the usage line and the Arguments list is the one in the README's synopsis of it."""
    command = dict(commands())[path]
    code, out, _ = invoke(*path, "--help")
    assert code == 0
    usage = out.splitlines()[0]
    [synopsis] = [line for line in README.splitlines() if line.startswith(f"  {' '.join(path)} ")]
    for param in command.params:
        if param.param_type_name != "argument":
            continue
        name = param.metavar
        assert name is not None and name == name.upper(), (path, param.name)
        assert re.search(rf"[{{\[]{name}[}}\]]", usage), usage  # required {NAME}, optional [NAME]
        assert re.search(rf"^  {name} <", out, re.MULTILINE), out
        assert re.search(rf"\b{name}\b", synopsis), synopsis


@pytest.mark.parametrize("path", ALL, ids=lambda p: " ".join(p) or "flightlog")
def test_every_help_answers_to_dash_h_and_shows_no_bool_metavar(path: tuple[str, ...]) -> None:
    """``-h`` was refused ("No such option: -h"); flags were shown as ``--json <bool>``."""
    short = invoke(*path, "-h")
    long = invoke(*path, "--help")
    assert short[0] == 0 and long[0] == 0, (short, long)
    assert short[1] == long[1] and "Usage:" in short[1]
    assert "<bool>" not in short[1]
    assert "╭" not in short[1], "plain help, no panels"


@pytest.mark.parametrize("path", ALL, ids=lambda p: " ".join(p) or "flightlog")
def test_help_prints_no_restructuredtext(path: tuple[str, ...]) -> None:
    """The docstrings are reStructuredText: ``ls``, ``show``, ``resume`` and ``export`` printed
    ````run_started```` and ````flightlog audit```` as written. Help shows `code` and a role's text."""
    code, out, _ = invoke(*path, "--help")
    assert code == 0
    assert "``" not in out, out
    assert re.search(r":(func|class|meth|mod|attr|data|exc|ref):`", out) is None, out


def test_plain_help_converts_literals_and_roles() -> None:
    from flightlog.cli.options import plain_help

    text = "no ``run_started``; :func:`flightlog.kernel.abort` or :class:`~flightlog.runs.RunState`"
    assert plain_help(text) == "no `run_started`; `flightlog.kernel.abort` or `RunState`"
    assert plain_help(":ref:`the guide <guide-x>` [env X]") == "`the guide` [env X]"


def test_help_names_no_internal_and_no_huge_range() -> None:
    """``ls --help`` ran ~30 lines naming ``runs.projection.resumable_sessions`` and ``narration.state_word``;
    ``--limit`` showed ``<int range> [0<=x<=9223372036854775807]``: a plain ``<int>`` now, still checked."""
    code, out, _ = invoke("ls", "--help")
    assert code == 0 and len(out.splitlines()) <= 32
    assert "resumable_sessions" not in out and "state_word" not in out and "projection" not in out
    for path in (("ls",), ("runs",), ("memory", "search")):
        code, out, _ = invoke(*path, "--help")
        assert code == 0 and "9223372036854775807" not in out and "<int range>" not in out, out
        assert re.search(r"--limit <int>", out), out
    code, _, err = invoke("ls", "-n", "-1")
    assert code == 2 and "Invalid value for '--limit' / '-n': -1 is less than 0" in err, err


def test_verify_and_audit_say_when_to_use_which() -> None:
    verify, audit = (" ".join(invoke(name, "--help")[1].split()) for name in ("verify", "audit"))
    assert "`audit` makes the same check" in verify and "audit --bundle DIR" in verify
    assert "Use `verify` for the sessions of your own database" in audit


def test_abort_defaults_its_operator_to_user_as_approve_deny_and_signal() -> None:
    for path in (("approve",), ("deny",), ("signal",), ("abort",)):
        code, out, _ = invoke(*path, "--help")
        assert code == 0 and "[default: user]" in " ".join(out.split()), (path, out)


# ─── usage errors ─────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["ls", "--bogus"], "No such option: --bogus (see 'flightlog ls --help')"),
        (["--bogus"], "No such option: --bogus"),
        (["no-such-command"], "No such command 'no-such-command'"),
        (["show"], "Missing argument"),
        (["keys", "nope"], "No such command 'nope'"),
        (["replay", "x", "--at", "many"], "--at"),
        (["verify"], "give a SESSION or --all"),
    ],
)
def test_usage_mistakes_are_one_line_exit_2(args: list[str], says: str) -> None:
    """They were a boxed rich panel of several lines (STYLE.md (f): one ``flightlog: error:`` line)."""
    code, out, err = invoke(*args)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("flightlog: error: "), err
    assert says in lines[0]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ["import", "t.jsonl", "--db", "x.db"],
            "--db goes before the command: flightlog --db PATH|URL import ... (an option of flightlog itself, "
            "not of import)",
        ),
        (
            ["db", "copy", "a.db", "b.db", "--db=x.db"],
            "--db goes before the command: flightlog --db PATH|URL db copy ... (an option of flightlog "
            "itself, not of db copy)",
        ),
        (["ls", "--debug"], "--debug goes before the command: flightlog --debug ls ..."),
    ],
)
def test_a_global_option_after_the_command_says_it_goes_before(args: list[str], says: str) -> None:
    """``flightlog import FILE --db X`` said only ``No such option: --db`` (new-user pass, session 18)."""
    code, out, err = invoke(*args)
    assert (code, out) == (2, "")
    (line,) = err.splitlines()
    assert line.startswith(f"flightlog: error: {says}"), err


def test_worker_takes_the_global_db_after_the_command_too(tmp_path: Path) -> None:
    """The one command documented to take ``--db`` after it (scripts write it so): no hint, it runs."""
    code, out, err = invoke("worker", "--db", str(tmp_path / "w.db"), "--idle-exit", "0")
    assert code == 0 and "goes before" not in err and "claimed 0" in err, (out, err)


def test_a_group_without_a_command_still_shows_its_help() -> None:
    code, out, err = invoke("keys")
    assert code == 2 and "Usage:" in out + err and "show" in out + err


# ─── a closed pipe ────────────────────────────────────────────────────────────────────────────


def _closed_pipe_run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run flightlog with a stdout whose reader is already gone (what ``| head`` leaves behind)."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # before the child starts: its first write fails, deterministically
    try:
        return subprocess.run(
            [str(FLIGHTLOG), *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)


@pytest.fixture
def imported_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Imported (and signed) with this test's own keys: ``show`` checks the session before printing it."""
    db = tmp_path_factory.mktemp("pipe") / "ledger.db"
    files = sorted(str(p) for p in (SAMPLES / "codex").glob("*.jsonl"))  # files: no core_job run of its own
    code, _, err = invoke("--db", str(db), "import", *files)
    assert code == 0, err
    return db


@pytest.mark.parametrize(
    "args",
    [["ls"], ["ls", "--json"], ["--help"], ["show", "--help"], ["--version"], ["show", "codex:019c8a70"]],
)
def test_a_closed_pipe_exits_141_without_a_word(args: list[str], imported_db: Path) -> None:
    """``flightlog ls | head -1`` exited 1 ("a problem found") with "Exception ignored ... BrokenPipeError"."""
    env = {**os.environ, "FLIGHTLOG_DB": str(imported_db)}
    done = _closed_pipe_run(args, env)
    assert done.returncode == EXIT_CLOSED_PIPE == 141, done.stderr
    assert done.stderr == ""


def test_show_of_a_tampered_session_warns_before_the_timeline_even_into_a_closed_pipe(
    imported_db: Path, tmp_path: Path
) -> None:
    """``flightlog show S | head -5`` of a tampered session never printed the warning: the check ran after
    the timeline, and the closed pipe ended the command first (new-user pass, session 18). The check now
    runs first: its warning is on stderr before any of the timeline, and the exit is 141 into a closed pipe,
    1 otherwise."""
    import shutil
    import sqlite3

    db = tmp_path / "tampered.db"
    shutil.copy(imported_db, db)
    raw = sqlite3.connect(db)
    try:
        (sid,) = raw.execute(
            "SELECT session_id FROM sessions WHERE session_id LIKE 'codex:019c8a70%'"
        ).fetchone()
        raw.execute("DROP TRIGGER events_no_update")
        raw.execute(
            "UPDATE events SET event = replace(event, 'a', 'b') WHERE session_id = ? AND seq = 3", (sid,)
        )
        raw.commit()
    finally:
        raw.close()
    warning = f"flightlog: warning: {sid} fails verification at seq 3 "
    follows = f"what follows may not be what was recorded (see `flightlog verify {sid}`)"
    done = _closed_pipe_run(["show", "codex:019c8a70"], {**os.environ, "FLIGHTLOG_DB": str(db)})
    assert done.returncode == EXIT_CLOSED_PIPE, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(warning) and line.endswith(follows), line
    code, out, err = invoke("--db", str(db), "show", sid)
    assert code == 1 and out.startswith(f"session {sid}  ") and err.splitlines() == [line]
    assert code == 1 and len(out.splitlines()) > 4  # the whole timeline still follows


# ─── completion ───────────────────────────────────────────────────────────────────────────────


def test_shell_completion_script_and_answers() -> None:
    # Typer detects the shell from the process tree (shellingham) and ignores `bash` after --show-completion
    # unless detection is off: under a parent that is not bash (sh, a CI runner) the script was refused
    # ("Shell sh not supported"). With detection off the shell is the option's value, whatever runs the suite.
    script = subprocess.run(
        [str(FLIGHTLOG), "--show-completion", "bash"],
        env={**os.environ, "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert script.returncode == 0 and "_FLIGHTLOG_COMPLETE" in script.stdout, script.stderr
    env = {
        **os.environ,
        "_FLIGHTLOG_COMPLETE": "complete_bash",
        "COMP_WORDS": "flightlog ver",
        "COMP_CWORD": "1",
    }
    words = subprocess.run(
        [str(FLIGHTLOG)], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert words.stdout.split() == ["verify", "verify-proof"], words.stderr


# ─── --db ─────────────────────────────────────────────────────────────────────────────────────


def test_db_in_a_missing_directory_is_refused_and_nothing_is_created(tmp_path: Path) -> None:
    """A mistyped directory used to get a brand-new empty ledger, silently."""
    db = tmp_path / "mistyped" / "ledger.db"
    code, _, err = invoke("--db", str(db), "import", str(SAMPLES / "codex"))
    assert code == 2
    assert err.strip() == (
        f"flightlog: error: no directory {db.parent} for --db {db} (a typo? create the directory first to "
        "start a new database there)"
    )
    assert not db.parent.exists()


def test_a_new_database_is_announced_once(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    code, _, err = invoke("--db", str(db), "import", str(SAMPLES / "codex"))
    assert code == 0 and f"flightlog: created a new database at {db}" in err.splitlines()
    code, _, err = invoke("--db", str(db), "import", str(SAMPLES / "codex"))
    assert code == 0 and "created a new database" not in err


def test_the_env_database_in_a_missing_directory_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLIGHTLOG_DB", str(tmp_path / "nope" / "f.db"))
    code, _, err = invoke("import", str(SAMPLES / "codex"))
    assert code == 2 and "no directory" in err


# ─── import - / --format ──────────────────────────────────────────────────────────────────────


def test_import_dash_reads_a_transcript_from_stdin(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    source = sorted((SAMPLES / "codex").glob("*.jsonl"))[-1]
    result = runner.invoke(app, ["--db", str(db), "import", "-", "--json"], input=source.read_bytes())
    assert result.exit_code == 0, result.stderr
    [row] = json.loads(result.stdout)
    assert row["path"] == "-" and row["format"] == "codex" and row["events"] > 0
    assert row["source_sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()
    again = runner.invoke(app, ["--db", str(db), "import", str(source)])
    assert again.exit_code == 0 and "already imported" in again.stdout  # the same bytes, by sha256


def test_import_dash_with_nothing_on_stdin_names_stdin(tmp_path: Path) -> None:
    result = runner.invoke(app, ["--db", str(tmp_path / "l.db"), "import", "-"], input=b"")
    assert result.exit_code == 1
    assert "flightlog: error: -: not a transcript of a supported format (claude-code," in result.stderr


def test_an_unknown_format_lists_the_formats(tmp_path: Path) -> None:
    code, _, err = invoke("--db", str(tmp_path / "l.db"), "import", "--format", "bogus", str(SAMPLES))
    assert code == 2
    assert (
        "unknown format 'bogus' (one of: auto, claude-code, codex, openhands, swe-agent, gemini-cli, "
        "mini-swe-agent, openhands-v1, openai-agents, aider)" in err
    )


# ─── ls filters ───────────────────────────────────────────────────────────────────────────────


def _ls(db: Path, *args: str) -> list[str]:
    code, out, err = invoke("--db", str(db), "ls", "--json", *args)
    assert code == 0, err
    return [row["session_id"] for row in json.loads(out)]


def test_ls_limit_and_filters(imported_db: Path) -> None:
    everything = _ls(imported_db)
    assert len(everything) == 3
    assert _ls(imported_db, "--limit", "2") == everything[:2] == _ls(imported_db, "-n", "2")
    assert _ls(imported_db, "--limit", "0") == []
    # unsealed imports: their last runs' ends wait for the sources to end, so each ledger holds an open run
    assert _ls(imported_db, "--status", "completed") == []
    assert _ls(imported_db, "--status", "completed", "--status", "incomplete") == everything
    assert _ls(imported_db, "--since", "2026-02-23T13:00:00Z") == [
        "codex:019c8bfe-ec25-79e0-97d7-bda6a9c575ff"
    ]
    assert _ls(imported_db, "--since", "2026-02-23") == everything[:-1]
    assert _ls(imported_db, "--since", "100000d") == everything
    assert _ls(imported_db, "--since", "1s") == []  # imported sessions keep their transcripts' times
    assert _ls(imported_db, "--task", "safe LINE") == ["codex:66666666-6666-4666-8666-666666666666"]
    code, _, err = invoke("--db", str(imported_db), "ls", "--since", "yesterday")
    assert code == 2 and "neither a duration" in err


@pytest.mark.parametrize(
    "args",
    [
        ("ls", "-n"),
        ("runs", "--limit"),
        ("runs", "--tree", "--limit"),
        ("memory", "search", "x", "-k"),
    ],
)
def test_a_count_past_what_sql_holds_is_a_bad_option(imported_db: Path, args: tuple[str, ...]) -> None:
    """A count option reaches SQL as a 64-bit integer: one past 2**63 - 1 is refused as the option it is
    (exit 2, naming it), not a store error (``runs --limit 99999999999999999999`` exited 1 with SQLite's
    'datatype mismatch', PostgreSQL's 'bigint out of range'); 2**63 - 1 itself is a count like any other."""
    code, _, err = invoke("--db", str(imported_db), *args, str(2**63))
    assert code == 2 and "Invalid value for '--limit'" in err, err
    assert "Traceback" not in err
    code, _, err = invoke("--db", str(imported_db), *args, str(2**63 - 1))
    assert code in (0, 1) and "Traceback" not in err and "out of range" not in err, err


def test_ls_says_no_run_for_a_session_that_holds_none(tmp_path: Path) -> None:
    """A session with items only (as a memory-only FlightlogSession writes) or no events holds no run: `runs`
    leaves it out, and `ls` said `running` (the status every session is created with); it says `no run`,
    in text and --json (which keeps the row's status as session_status), and --status matches what it shows."""
    from flightlog.events import RunStarted

    db = tmp_path / "ls.db"
    with SqliteStore(db) as store:
        at = 1_780_000_000_000  # one ms apart: ls lists newest first
        Recorder.create(store, session_id="items", notary=None, created_at_ms=at).append(
            Custom(custom_kind="item", payload={})
        )
        Recorder.create(store, session_id="empty", notary=None, created_at_ms=at + 1)
        Recorder.create(store, session_id="a-run", notary=None, created_at_ms=at + 2).append(
            RunStarted(run_id="r", goal="go")
        )
        done = Recorder.create(store, session_id="ended", notary=None, created_at_ms=at + 3)
        done.append(Custom(custom_kind="item", payload={}))
        done.finish("completed")
    code, out, err = invoke("--db", str(db), "ls", "--json")
    assert code == 0, err
    shown = {r["session_id"]: (r["status"], r["session_status"]) for r in json.loads(out)}
    assert shown == {
        "items": ("no run", "running"),
        "empty": ("no run", "running"),
        "a-run": ("running", "running"),
        "ended": ("completed", "completed"),
    }
    code, out, _ = invoke("--db", str(db), "ls")
    lines = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert "no run" in lines["items"] and "running" not in lines["items"]
    assert "running" in lines["a-run"]
    assert _ls(db, "--status", "running") == ["a-run"]
    assert _ls(db, "--status", "no run") == ["empty", "items"]


def test_ls_lists_newest_first_as_runs_does(tmp_path: Path) -> None:
    """``ls`` listed oldest first while ``runs`` lists the latest first: both newest first now, in the table
    and ``--json``; ``--limit N`` keeps the N newest; a tie in creation time goes by id, descending."""
    from flightlog.events import RunStarted

    db = tmp_path / "order.db"
    at = 1_780_000_000_000
    with SqliteStore(db) as store:
        for offset, sid in ((0, "old"), (5, "new"), (2, "mid-b"), (2, "mid-a")):
            rec = Recorder.create(store, session_id=sid, notary=None, created_at_ms=at + offset)
            rec.append(RunStarted(run_id="r", goal=sid))
    assert _ls(db) == ["new", "mid-b", "mid-a", "old"]
    code, out, err = invoke("--db", str(db), "ls")
    assert code == 0, err
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["new", "mid-b", "mid-a", "old"]
    assert _ls(db, "-n", "2") == ["new", "mid-b"] and _ls(db, "-n", "0") == []
    code, out, err = invoke("--db", str(db), "ls", "--help")
    assert "newest first" in " ".join(out.split()), out


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty, migrated store on each backend (a SQLite file; a fresh PostgreSQL schema)."""
    from postgres.server import backend_url

    with backend_url(request.param, tmp_path / "ls.db", "cli_polish") as url:
        open_store(url).close()
        yield url


def test_ls_names_the_statuses_present_for_one_no_session_has_and_says_no_sessions(store_url: str) -> None:
    """Statuses are open-ended (``Recorder.finish`` takes any word, an import keeps its source's), so a
    ``--status`` that ls prints, or that a session of the store has, but no session has, is no usage error
    (exit 0), but a note names the statuses present; an empty listing says so. Both on stderr: ``--json``
    stays a parsable array. Before, a bare header, exit 0. A word that is neither (``bogus``) is a usage
    error naming the statuses (session 18: it read as "no sessions match")."""
    for args in ((), ("--json",)):
        code, out, err = invoke("--db", store_url, "ls", *args)
        assert (code, err) == (0, "flightlog: note: no sessions\n"), (args, out)
    with open_store(store_url) as store:
        Recorder.create(store, session_id="s1", notary=None).finish("InternalServerError")
        Recorder.create(store, session_id="s2", notary=None).finish("completed")
    code, out, err = invoke("--db", store_url, "ls", "--json", "--status", "failed", "--status", "completed")
    assert code == 0 and [row["session_id"] for row in json.loads(out)] == ["s2"], err
    assert (
        err
        == "flightlog: note: no session has status 'failed' (statuses present: InternalServerError, completed)\n"
    )
    code, out, err = invoke("--db", store_url, "ls", "--status", "failed")
    assert (code, out) == (0, ""), out  # as the help says: an empty listing says "no sessions", no header
    assert err.splitlines() == [
        "flightlog: note: no sessions match the filters; no session has status 'failed'"
        " (statuses present: InternalServerError, completed)",
    ]
    code, out, err = invoke("--db", store_url, "ls", "--status", "InternalServerError")  # a word it has
    assert code == 0 and "s1" in out, err
    code, out, err = invoke("--db", store_url, "ls", "--status", "bogus")
    assert (code, out) == (2, ""), out
    assert "'bogus' is not a status (ls prints: completed," in " ".join(err.split())
    assert "also present in this store: InternalServerError)" in " ".join(err.split())
    code, out, err = invoke("--db", store_url, "ls", "--json", "--task", "nothing like it")
    assert (code, out.strip(), err) == (0, "[]", "flightlog: note: no sessions match the filters\n")
    for args in (("-n", "0"), ("-n", "0", "--json")):  # none asked for: no note that the store has none
        code, out, err = invoke("--db", store_url, "ls", *args)
        assert (code, err) == (0, ""), (args, out, err)


# ─── --json on the acting commands ────────────────────────────────────────────────────────────


AGENT = "kernel.cli_agents:approval_agent"  # tests/ is on sys.path (rootdir conftest)


def _suspended(db: Path) -> str:
    result = runner.invoke(app, ["--db", str(db), "run", AGENT, "--goal", "take a note", "--json", "-q"])
    assert result.exit_code == 3, result.stderr
    return str(json.loads(result.stdout)["session_id"])


@pytest.mark.parametrize("verb", ["approve", "deny"])
def test_approve_and_deny_print_json(tmp_path: Path, verb: str) -> None:
    db = tmp_path / "k.db"
    sid = _suspended(db)
    extra = ["--reason", "not now"] if verb == "deny" else []
    code, out, err = invoke("--db", str(db), verb, sid, "n1", "--as", "alice", *extra, "--json")
    assert code == 0, err
    assert json.loads(out) == {
        "session_id": sid,
        "call_id": "n1",
        "gate": "approval",
        "approved": verb == "approve",
        "responder": "alice",
        "reason": "not now" if verb == "deny" else None,
    }


def test_abort_prints_json(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    sid = _suspended(db)
    code, out, err = invoke("--db", str(db), "abort", sid, "--json")
    assert code == 0, err
    assert json.loads(out) == {"session_id": sid, "aborted": True}
    with SqliteStore(db, read_only=True) as store:  # no --as: "user", as approve and deny record
        *_, (_row, last) = iter_events(store, sid)
    assert isinstance(last, Custom) and last.payload == {**last.payload, "requested_by": "user"}


def test_abort_as_an_operator_records_who_asked(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    sid = _suspended(db)
    code, _out, err = invoke("--db", str(db), "abort", sid, "--as", "bad\u202ename")
    assert code == 2 and "--as: invalid operator name" in err  # refused before anything is written
    code, out, err = invoke("--db", str(db), "abort", sid, "--as", "ada", "--json")
    assert code == 0, err
    assert json.loads(out) == {"session_id": sid, "aborted": True}
    with SqliteStore(db, read_only=True) as store:
        *_, (_row, last) = iter_events(store, sid)
    assert isinstance(last, Custom) and last.custom_kind == "abort_requested"
    assert last.payload["requested_by"] == "ada"


def test_keys_rotate_and_trust_print_json() -> None:
    code, out, _ = invoke("keys", "show", "--json")
    before = json.loads(out)["signing"]
    code, out, err = invoke("keys", "rotate", "--json")
    assert code == 0, err
    signing = json.loads(out)["signing"]
    assert signing != before and signing.startswith("flightlog.local/")
    code, out, err = invoke("keys", "trust", before, "--json")
    assert code == 0, err
    assert json.loads(out)["vkey"] == before


def test_erase_prints_json(tmp_path: Path) -> None:
    from flightlog.integrity.erasure import put_personal_artifact

    db = tmp_path / "e.db"
    with open_store(db) as store:
        handle = put_personal_artifact(store, b"alice@example.com")
    code, out, err = invoke("--db", str(db), "erase", handle, "--reason", "request 7", "--json")
    assert code == 0, err
    row = json.loads(out)
    assert row["artifact"] == handle and isinstance(row["log_seq"], int) and row["log_session_id"]


# ─── worker ───────────────────────────────────────────────────────────────────────────────────


FLEET_SPEC = "fleet.fleet_agent:agent"


def test_worker_prints_a_line_per_claim_and_result_and_no_python_dict(tmp_path: Path) -> None:
    db = tmp_path / "f.db"
    code, _, err = invoke("--db", str(db), "submit", FLEET_SPEC, "--goal", "g", "--session", "w-1")
    assert code == 0, err
    code, out, err = invoke(
        "--db", str(db), "worker", "--max-sessions", "1", "--idle-exit", "0.2", "--poll", "0.05"
    )
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "w-1  claimed (queued)"
    assert re.fullmatch(r"w-1  completed after \d+ steps?, \d+ tokens?", lines[1]), lines
    assert "results: completed 1" in err and "{" not in err


def test_worker_json_lines(tmp_path: Path) -> None:
    db = tmp_path / "f.db"
    assert invoke("--db", str(db), "submit", FLEET_SPEC, "--goal", "g", "--session", "w-2")[0] == 0
    code, out, err = invoke("--db", str(db), "worker", "--max-sessions", "1", "--idle-exit", "0.2", "--json")
    assert code == 0, err
    claimed, result, stopped = (json.loads(line) for line in out.splitlines())
    assert claimed == {
        "event": "claimed",
        "session_id": "w-2",
        "epoch": claimed["epoch"],
        "previous_holder": None,
        "status": "queued",
    }
    assert (result["event"], result["session_id"], result["status"]) == ("result", "w-2", "completed")
    assert (
        stopped["event"] == "stopped" and stopped["claimed"] == 1 and stopped["results"] == {"completed": 1}
    )


# ─── plurals ──────────────────────────────────────────────────────────────────────────────────


def test_plural() -> None:
    assert [plural(n, "leaf") for n in (0, 1, 2)] == ["0 leaves", "1 leaf", "2 leaves"]
    assert [plural(n, "session") for n in (0, 1, 2)] == ["0 sessions", "1 session", "2 sessions"]
    assert plural(1, "criterion") == "1 criterion" and plural(3, "criterion") == "3 criteria"


def test_one_session_one_leaf_reads_in_the_singular(tmp_path: Path) -> None:
    """``verify --all`` printed "1 leaves", ``db repair`` "1 sessions"."""
    db = tmp_path / "one.db"
    with open_store(db) as store:
        rec = Recorder.create(store, session_id="one", notary=Notary.from_env())
        rec.append(Custom(custom_kind="step", payload={}))
        rec.finish("completed")
    code, out, err = invoke("--db", str(db), "verify", "--all")
    assert code == 0, out + err
    assert re.search(r"index log  1 leaf  ", out) and "1 leaves" not in out
    _poison_wal(db, tmp_path)  # a WAL to set aside: with none, the repair has nothing to do or count
    code, out, err = invoke("--db", str(db), "db", "repair", "--discard-wal")
    assert code == 0, err
    assert re.search(r"1 session, \d+ events", out) and "1 sessions" not in out


# ─── servers on a taken port, the dashboard token ─────────────────────────────────────────────


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port held by a listening socket for the whole test."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield int(held.getsockname()[1])


def test_witness_serve_on_a_taken_port_is_one_line(taken_port: int, tmp_path: Path) -> None:
    """It printed an OSError traceback."""
    code, out, err = invoke("witness", "serve", "--port", str(taken_port), "--store", str(tmp_path / "w"))
    assert code == 1 and out == ""
    assert err.strip().splitlines() == [
        f"flightlog: error: cannot listen on 127.0.0.1:{taken_port}: Address already in use"
    ]


def test_ui_token_on_the_command_line_is_warned_about(taken_port: int, tmp_path: Path) -> None:
    """The secret lands in ps and shell history: say so, and point at $FLIGHTLOG_UI_TOKEN."""
    db = str(tmp_path / "ui.db")
    code, _, err = invoke("--db", db, "ui", "--port", str(taken_port), "--token", "a-long-secret")
    assert code == 1
    assert (
        "flightlog: warning: --token on the command line is visible" in err and "$FLIGHTLOG_UI_TOKEN" in err
    )
    result = runner.invoke(
        app, ["--db", db, "ui", "--port", str(taken_port)], env={"FLIGHTLOG_UI_TOKEN": "a-long-secret"}
    )
    assert result.exit_code == 1 and "warning" not in result.stderr, result.stderr
    assert "cannot listen" in result.stderr
    code, out, _ = invoke("ui", "--help")
    assert "FLIGHTLOG_UI_TOKEN" in out and "visible to other" in " ".join(out.split())


def test_ui_help_gives_the_token_minimum_the_command_enforces() -> None:
    """``ui --help`` did not say how long a token must be, though a shorter one is refused: the help gives
    the minimum, the same number the CLI check and the dashboard's Auth use."""
    from flightlog.cli.ui import MIN_TOKEN_CHARS
    from flightlog.web.security import MIN_TOKEN_CHARS as WEB_MIN

    assert MIN_TOKEN_CHARS == WEB_MIN == 8
    code, out, _ = invoke("ui", "--help")
    assert code == 0 and "at least 8 characters" in " ".join(out.split())


def test_a_short_ui_token_from_the_environment_names_the_variable(tmp_path: Path) -> None:
    """A token set only in $FLIGHTLOG_UI_TOKEN that is too short was refused as 'Invalid value for
    --token', an option the user never typed."""
    result = runner.invoke(
        app, ["--db", str(tmp_path / "ui.db"), "ui", "--port", "0"], env={"FLIGHTLOG_UI_TOKEN": "tok123"}
    )
    assert result.exit_code == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert "--token / $FLIGHTLOG_UI_TOKEN" in line and "at least 8 characters" in line
