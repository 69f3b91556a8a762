"""Grant ceilings at the moment of use: real symlinks, open_path's race checks, commands run without a shell.

Every test builds a real directory tree under ``tmp_path`` (a workspace and an outside directory holding a
secret) and works from inside the workspace (``monkeypatch.chdir``), as a tool does.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flightlog.events import ToolCompleted, ToolDenied
from flightlog.integrity.grants import GrantPolicy, load_policy_signer, policy_digest, sign_grant
from flightlog.kernel import (
    CommandRefused,
    OutsideCeiling,
    Policy,
    confine,
    current_ceiling,
    open_path,
    resolve_path,
    run_command,
    tool,
)
from flightlog.kernel.ceiling import Ceiling, active
from flightlog.kernel.confine import real_path_problem
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.kernel.tether import tethered
from flightlog.store import SqliteStore

from .helpers import customs, kernel, of

SECRET = "the secret outside the workspace"


def _ceiling(**fields: Any) -> Ceiling:
    policy = GrantPolicy(policy_id="confined", approval_required=[], **fields)
    return Ceiling(policy, policy_digest(policy))


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    place = tmp_path / "outside"
    place.mkdir()
    (place / "secret.txt").write_text(SECRET)
    return place


@pytest.fixture
def workspace(tmp_path: Path, outside: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``ws/src/ok.txt``, ``ws/src/link -> outside/``, ``ws/src/file_link -> outside/secret.txt``,
    ``ws/src/dangling -> outside/new.txt`` (does not exist yet); the working directory is ``ws``."""
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "ok.txt").write_text("inside")
    (ws / "src" / "link").symlink_to(outside, target_is_directory=True)
    (ws / "src" / "file_link").symlink_to(outside / "secret.txt")
    (ws / "src" / "dangling").symlink_to(outside / "new.txt")
    monkeypatch.chdir(ws)
    return ws


SRC = _ceiling(path_globs=["src/**"])


# ─── where a path may lead ────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    "path",
    [
        "src/link/secret.txt",
        "src/file_link",
        "src/dangling",
        "src/link/../outside/secret.txt",  # lexically src/outside/...; the OS takes .. after the symlink
    ],
)
def test_a_symlink_inside_an_allowed_directory_that_leads_out_is_outside(workspace: Path, path: str) -> None:
    real, problem = real_path_problem(SRC.policy, path)
    assert problem is not None and "resolves to" in problem and "through a symlink" in problem
    assert real.startswith(str((workspace.parent / "outside").resolve()))


def test_paths_that_stay_inside_pass(workspace: Path) -> None:
    assert real_path_problem(SRC.policy, "src/ok.txt") == (str(workspace.resolve() / "src/ok.txt"), None)
    assert real_path_problem(SRC.policy, "src/new/file.txt")[1] is None  # not created yet: lexical rest
    (workspace / "src" / "inner").symlink_to(workspace / "src" / "ok.txt")
    assert real_path_problem(SRC.policy, "src/inner")[1] is None  # a symlink that stays inside


def test_a_glob_whose_own_directory_is_a_symlink_follows_it(workspace: Path, outside: Path) -> None:
    (workspace / "data").symlink_to(outside, target_is_directory=True)
    data = _ceiling(path_globs=["data/**"])
    assert real_path_problem(data.policy, "data/secret.txt")[1] is None  # data/** is where data really is
    absolute = _ceiling(path_globs=[f"{workspace}/data/**"])
    assert real_path_problem(absolute.policy, f"{workspace}/data/secret.txt")[1] is None


def test_under_the_any_path_glob_a_relative_path_must_stay_in_the_working_directory(workspace: Path) -> None:
    anything = _ceiling()
    assert anything.policy.path_globs == ["**"]
    _, problem = real_path_problem(anything.policy, "src/link/secret.txt")
    assert problem is not None and "through a symlink" in problem
    assert real_path_problem(anything.policy, "src/ok.txt")[1] is None
    # an absolute path is allowed by ** as written at planning, and still is
    assert real_path_problem(anything.policy, str(workspace.parent / "outside" / "secret.txt"))[1] is None


# ─── the kernel checks again when the call runs ──────────────────────────────────────────────────


@tool(effect="read_only")
def read_plain(path: str) -> str:
    """Read a file with the builtin open (the tool knows nothing of grants).

    Args:
        path: File path.
    """
    with open(path) as fh:
        return fh.read()


@tool(effect="side_effect")
def write_confined(path: str, text: str) -> str:
    """Write a file through open_path.

    Args:
        path: File path.
        text: What to write.
    """
    with open_path(path, "w") as fh:
        fh.write(text)
    return "written"


def _signed(ceiling: Ceiling) -> dict[str, Any]:
    return sign_grant(ceiling.policy, load_policy_signer())


def test_a_call_whose_path_resolves_outside_does_not_run(workspace: Path, store: SqliteStore) -> None:
    provider = ScriptedProvider(
        [
            calls(
                call("read_plain", {"path": "src/ok.txt"}, id="in"),
                call("read_plain", {"path": "src/link/secret.txt"}, id="out"),
                call("read_plain", {"path": "src/file_link"}, id="file"),
            ),
            reply("done"),
        ],
        by_turn=False,
    )
    result = kernel(
        store, provider, tools=[read_plain], policy=Policy(default="allow"), grant=_signed(SRC)
    ).run_sync("go")
    sid = result.session_id
    assert result.status == "completed"
    assert of(store, sid, ToolDenied) == []  # lexically inside: planning allowed every call
    (decisions,) = customs(store, sid, "tool_decisions")
    assert [c["decision"] for c in decisions["calls"]] == ["allow", "allow", "allow"]
    (completed,) = of(store, sid, ToolCompleted)
    results = {r.call_id: r for r in completed.results}
    assert (results["in"].output, results["in"].is_error) == ("inside", False)
    for call_id, path in (("out", "src/link/secret.txt"), ("file", "src/file_link")):
        assert results[call_id].is_error
        assert results[call_id].output.startswith(
            f"refused by grant policy confined when the call ran: argument 'path' = '{path}': it resolves to"
        )
        assert SECRET not in results[call_id].output


def test_a_side_effect_through_a_dangling_symlink_writes_nothing_outside(
    workspace: Path, outside: Path, store: SqliteStore
) -> None:
    provider = ScriptedProvider(
        [
            calls(
                call("write_confined", {"path": "src/dangling", "text": "pwned"}, id="w1"),
                call("write_confined", {"path": "src/fine.txt", "text": "ok"}, id="w2"),
            ),
            reply("done"),
        ],
        by_turn=False,
    )
    tools = [write_confined]
    result = kernel(
        store, provider, tools=tools, policy=Policy(default="allow"), grant=_signed(SRC)
    ).run_sync("go")
    assert result.status == "completed"
    assert not (outside / "new.txt").exists()
    assert (workspace / "src" / "fine.txt").read_text() == "ok"
    (completed,) = of(store, result.session_id, ToolCompleted)
    assert [r.is_error for r in completed.results] == [True, False]
    assert "argument 'path' = 'src/dangling'" in completed.results[0].output
    assert customs(store, result.session_id, "external_effect_completed")  # the refusal is the completion


def test_the_grant_is_current_only_inside_a_tool_call(workspace: Path, store: SqliteStore) -> None:
    seen: list[object] = []

    @tool(effect="read_only")
    def look() -> str:
        """Record the ceiling in force."""
        ceiling = current_ceiling()
        seen.append(None if ceiling is None else ceiling.digest)
        return "ok"

    provider = ScriptedProvider([calls(call("look", {}, id="l1")), reply("done")], by_turn=False)
    kernel(store, provider, tools=[look], policy=Policy(default="allow"), grant=_signed(SRC)).run_sync("go")
    assert seen == [SRC.digest]  # a sync tool, run in a worker thread, sees it
    assert current_ceiling() is None


# ─── open_path ───────────────────────────────────────────────────────────────────────────────────


@pytest.fixture
def confined(workspace: Path) -> Iterator[Ceiling]:
    with active(SRC):
        yield SRC


@pytest.mark.usefixtures("confined")
def test_open_path_reads_and_writes_inside() -> None:
    with open_path("src/ok.txt") as fh:
        assert fh.read() == "inside"
    with open_path("src/new.txt", "w", encoding="utf-8") as fh:
        fh.write("é")
    with open_path("src/new.txt", "ab") as fh:
        fh.write(b"!")
    with open_path(Path("src/new.txt"), "r", encoding="utf-8") as fh:
        assert fh.read() == "é!"
    assert resolve_path("src/new.txt") == Path.cwd().resolve() / "src" / "new.txt"


@pytest.mark.usefixtures("confined")
@pytest.mark.parametrize(
    ("path", "mode"),
    [
        ("src/link/secret.txt", "r"),
        ("src/file_link", "r"),
        ("src/link/secret.txt", "w"),
        ("src/dangling", "w"),
        ("src/dangling", "x"),
        ("docs/x.md", "r"),
        ("../outside/secret.txt", "r"),
    ],
)
def test_open_path_refuses_what_leads_out_and_touches_nothing(outside: Path, path: str, mode: str) -> None:
    with pytest.raises(OutsideCeiling, match="grant policy confined") as caught:
        open_path(path, mode)
    assert isinstance(caught.value, PermissionError)  # a tool's `except OSError` sees it
    assert caught.value.value == path
    assert (outside / "secret.txt").read_text() == SECRET
    assert not (outside / "new.txt").exists()
    with pytest.raises(OutsideCeiling):
        resolve_path(path)


def test_a_directory_swapped_for_a_symlink_after_the_check_is_not_followed(
    confined: Ceiling, workspace: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workspace / "src" / "sub").mkdir()
    (workspace / "src" / "sub" / "secret.txt").write_text("inside")
    checked = confine._checked

    def check_then_swap(ceiling: Ceiling, value: str, here: str) -> str:
        real = checked(ceiling, value, here)  # passes: src/sub is a real directory now
        (workspace / "src" / "sub").rename(workspace / "moved")
        (workspace / "src" / "sub").symlink_to(outside, target_is_directory=True)
        return real

    monkeypatch.setattr(confine, "_checked", check_then_swap)
    with pytest.raises(OutsideCeiling, match=r"src/sub' is a symlink now, after the path was checked"):
        open_path("src/sub/secret.txt", "w")
    assert (outside / "secret.txt").read_text() == SECRET  # not truncated, not written


def test_a_file_swapped_for_a_symlink_after_the_check_is_not_followed(
    confined: Ceiling, workspace: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked = confine._checked

    def check_then_swap(ceiling: Ceiling, value: str, here: str) -> str:
        real = checked(ceiling, value, here)
        (workspace / "src" / "ok.txt").unlink()
        (workspace / "src" / "ok.txt").symlink_to(outside / "secret.txt")
        return real

    monkeypatch.setattr(confine, "_checked", check_then_swap)
    with pytest.raises(OutsideCeiling, match=r"ok.txt' is a symlink now"):
        open_path("src/ok.txt", "a")
    assert (outside / "secret.txt").read_text() == SECRET


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="the re-check reads /proc/self/fd (Linux)")
def test_a_directory_moved_out_while_opening_is_caught_by_the_descriptor_check(
    confined: Ceiling, workspace: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workspace / "src" / "sub").mkdir()
    (workspace / "src" / "sub" / "notes.txt").write_text("notes")
    walk = confine._open_walk

    def open_then_move(value: str, real: str, flags: int) -> int:
        fd = walk(value, real, flags)
        (workspace / "src" / "sub").rename(outside / "sub")  # the opened file now lies outside
        return fd

    monkeypatch.setattr(confine, "_open_walk", open_then_move)
    with pytest.raises(OutsideCeiling, match="a directory was moved while opening"):
        open_path("src/sub/notes.txt")


@pytest.mark.usefixtures("confined")
def test_writing_a_hard_linked_file_is_refused_before_truncating(workspace: Path, outside: Path) -> None:
    os.link(outside / "secret.txt", workspace / "src" / "hard.txt")
    with pytest.raises(OutsideCeiling, match="2 hard links"):
        open_path("src/hard.txt", "w")
    assert (outside / "secret.txt").read_text() == SECRET
    with open_path("src/hard.txt") as fh:  # reading it is the documented limit
        assert fh.read() == SECRET


@pytest.mark.usefixtures("confined")
def test_open_path_keeps_open_errors(workspace: Path) -> None:
    (workspace / "src" / "sub").mkdir()
    with pytest.raises(FileNotFoundError):
        open_path("src/missing.txt")
    with pytest.raises(FileNotFoundError):
        open_path("src/missing/new.txt", "w")
    with pytest.raises(IsADirectoryError):
        open_path("src/sub")
    with pytest.raises(ValueError, match="invalid mode"):
        open_path("src/ok.txt", "rw")


def test_without_a_grant_open_path_is_plain_open(workspace: Path) -> None:
    assert current_ceiling() is None
    with open_path("src/link/secret.txt") as fh:
        assert fh.read() == SECRET
    assert resolve_path("src/file_link") == (workspace.parent / "outside" / "secret.txt").resolve()


# ─── commands run without a shell ────────────────────────────────────────────────────────────────


def test_run_command_runs_argv_without_a_shell(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[Any, dict[str, Any]]] = []
    real_run = subprocess.run

    def spy(args: Any, **kwargs: Any) -> Any:
        seen.append((args, kwargs))
        return real_run(args, **kwargs)

    monkeypatch.setattr(confine.subprocess, "run", spy)
    program = f"{sys.executable} -c 'import sys; print(sys.argv[1:])' 'a b' \"c d\" e"
    done = run_command(program)
    assert done.returncode == 0 and done.stdout == "['a b', 'c d', 'e']\n"
    ((args, kwargs),) = seen
    assert args == tethered([sys.executable, "-c", "import sys; print(sys.argv[1:])", "a b", "c d", "e"])
    assert kwargs["shell"] is False
    # an argv is passed as given: "$HOME" and ">" reach the program, nothing expands or redirects
    done = run_command([sys.executable, "-c", "import sys; print(sys.argv[1:])", "$HOME", ">", "x"])
    assert done.stdout == "['$HOME', '>', 'x']\n"


@pytest.mark.parametrize(
    ("command", "construct"),
    [
        ("echo x > out.txt", "a redirection (>)"),
        ("echo x >> out.txt", "a redirection (>>)"),
        ("cat < out.txt", "a redirection (<)"),
        ("echo x 2> out.txt", "a redirection (2>)"),
        ("echo ${HOME}", "a parameter expansion (${...})"),
        ("echo $HOME", "a parameter expansion ($VAR)"),
        ("echo `touch out.txt`", "a command substitution"),
        ("echo $(touch out.txt)", "a command substitution"),
        ("echo *", "a glob (*)"),
        ("cat <<EOF\nx\nEOF", "a here-document (<<)"),
        ("(touch out.txt)", "a subshell"),
        ("echo x; touch out.txt", "command chaining (;)"),
        ("echo x && touch out.txt", "command chaining (&&, ||)"),
        ("echo x | tee out.txt", "a pipeline (|)"),
    ],
)
def test_run_command_refuses_every_shell_construct(workspace: Path, command: str, construct: str) -> None:
    with pytest.raises(CommandRefused) as caught:
        run_command(command)
    assert caught.value.construct.startswith(construct)
    assert isinstance(caught.value, ValueError)
    assert not (workspace / "out.txt").exists()


def test_run_command_under_a_grant_checks_prefixes_and_cwd(workspace: Path) -> None:
    with active(_ceiling(path_globs=["src/**"], command_prefixes=["echo"])):
        assert run_command("echo 'a > b'").stdout == "a > b\n"  # quoted: a literal word, allowed
        assert run_command(["echo", "hi"]).stdout == "hi\n"
        with pytest.raises(OutsideCeiling, match="outside command_prefixes"):
            run_command("touch out.txt")
        with pytest.raises(OutsideCeiling, match="outside command_prefixes"):
            run_command(["/tmp/echo", "hi"])  # the first token is exact
        with pytest.raises(OutsideCeiling, match="through a symlink"):
            run_command("echo hi", cwd="src/link")
        (workspace / "src" / "sub").mkdir()
        assert run_command("echo hi", cwd="src/sub").stdout == "hi\n"
    assert not (workspace / "out.txt").exists()


@tool(effect="read_only")
def shell(command: str) -> str:
    """Run a command (without a shell).

    Args:
        command: The command line.
    """
    done = run_command(command)
    return done.stdout


def test_a_kernel_run_refuses_a_redirection_and_runs_the_allowed_command(
    workspace: Path, store: SqliteStore
) -> None:
    provider = ScriptedProvider(
        [
            calls(
                call("shell", {"command": "echo hello"}, id="ok"),
                call("shell", {"command": "echo pwned > src/../../outside/pwned.txt"}, id="redir"),
                call("shell", {"command": "echo ${HOME}"}, id="expand"),
            ),
            reply("done"),
        ],
        by_turn=False,
    )
    grant = _ceiling(path_globs=["src/**"], command_prefixes=["echo"])
    result = kernel(
        store, provider, tools=[shell], policy=Policy(default="allow"), grant=_signed(grant)
    ).run_sync("go")
    sid = result.session_id
    denied = {d.call_id: d.reason for d in of(store, sid, ToolDenied)}
    assert set(denied) == {"redir", "expand"}
    assert "a redirection (>)" in denied["redir"]
    assert "a parameter expansion (${...})" in denied["expand"]
    (completed,) = of(store, sid, ToolCompleted)
    assert (completed.results[0].output, completed.results[0].is_error) == ("hello\n", False)
    assert not (workspace.parent / "outside" / "pwned.txt").exists()


def test_the_refusals_pickle_with_their_fields() -> None:
    for error in (
        CommandRefused(command="echo x > y", construct="a redirection (>)"),
        OutsideCeiling(value="src/link", reason="it resolves to '/etc'"),
    ):
        copy = pickle.loads(pickle.dumps(error))
        assert (type(copy), str(copy), copy.__dict__) == (type(error), str(error), error.__dict__)
