"""What the kernel starts dies with it (flightlog.kernel.tether): a stdio MCP server (and its own children)
and a ``run_command`` command do not outlive a kernel killed with SIGKILL, so none of them finishes a call
that a resume has found in doubt. Each test kills a real process tree and waits (polling, bounded) for
the processes to disappear."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path

import pytest
from rich.console import Console

from flightlog.cli.kernel import _report
from flightlog.events import ToolCompleted, ToolGated
from flightlog.kernel import Agent, Kernel
from flightlog.kernel.execution import IN_DOUBT_WARNING
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.kernel.tether import TETHER, tethered
from flightlog.store import SqliteStore

from .helpers import echo, of

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the tether is Linux only")

HERE = Path(__file__).parent
GONE_WITHIN_S = 60.0


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_gone(pids: Iterable[int], timeout_s: float = GONE_WITHIN_S) -> list[int]:
    """Poll until none of ``pids`` runs or ``timeout_s`` passes; returns those still running."""
    deadline = time.monotonic() + timeout_s
    left = [pid for pid in pids if alive(pid)]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [pid for pid in left if alive(pid)]
    return left


def wait_file(path: Path, process: subprocess.Popen[bytes], log: Path, timeout_s: float = 120.0) -> str:
    """Poll until ``path`` has content; fails when ``process`` ends first (showing ``log``, its output) or
    the time runs out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_text():
            return path.read_text()
        if process.poll() is not None:
            pytest.fail(f"the kernel process ended ({process.returncode}) first: {log.read_text()}")
        time.sleep(0.05)
    pytest.fail(f"{path} never written")


def start(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    """Start the kernel process, its output to ``log`` (a pipe would stay open while a survivor holds it)."""
    with log.open("wb") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)


def _cleanup(pids: Iterable[int]) -> None:
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_a_stdio_mcp_server_and_its_children_die_with_a_sigkilled_kernel(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    db = tmp_path / "k.db"
    log = tmp_path / "kernel.log"
    kernel = start([sys.executable, str(HERE / "caps_agent.py"), str(db), "s1", str(tmp_path), "block"], log)
    server, child = map(int, wait_file(tmp_path / "block.txt", kernel, log).split())
    try:
        os.kill(kernel.pid, signal.SIGKILL)
        kernel.wait(timeout=60)
        assert wait_gone([server, child]) == []  # the server mid-call and the process it started
    finally:
        (tmp_path / "release").write_text("go")  # a survivor would append its note now
        _cleanup([server, child])
    assert not (tmp_path / "notes.txt").exists()  # the call never completed behind the dead kernel
    # the resume finds the call in doubt, and says what may still be finishing it elsewhere
    sys.path.insert(0, str(HERE))
    try:
        from caps_agent import build  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(HERE))
    with SqliteStore(db) as store:
        result = Kernel(store, build(tmp_path, tool="block"), notary=None).resume_sync("s1")
        assert (result.status, result.detail, result.pending_calls) == (
            "suspended",
            "effect_in_doubt",
            ("c1",),
        )
        assert IN_DOUBT_WARNING in of(store, "s1", ToolGated)[-1].reason
    shown = Console(file=io.StringIO(), width=300)
    _report(shown, result, json_out=False)
    assert f"  in doubt: {IN_DOUBT_WARNING}\n  waiting: c1; decide with one of:" in shown.file.getvalue()


def test_a_run_command_command_dies_with_a_sigkilled_kernel(tmp_path: Path) -> None:
    """The command runs from a worker thread, as a sync tool's does (asyncio.to_thread)."""
    pid_file = tmp_path / "pid.txt"
    program = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(300)"
    script = (
        "import sys, threading\n"
        "from flightlog.kernel import run_command\n"
        f"worker = threading.Thread(target=run_command, args=([sys.executable, '-c', {program!r}],))\n"
        "worker.start()\n"
        "worker.join()\n"
    )
    log = tmp_path / "kernel.log"
    kernel = start([sys.executable, "-c", script], log)
    command = int(wait_file(pid_file, kernel, log))
    try:
        os.kill(kernel.pid, signal.SIGKILL)
        kernel.wait(timeout=60)
        assert wait_gone([command]) == []
    finally:
        _cleanup([command])


def test_a_server_started_by_a_run_in_a_worker_thread_serves_it_to_the_end(tmp_path: Path) -> None:
    """The tether ties a server to the thread that started it (PR_SET_PDEATHSIG): a run driven from a
    worker thread, whose sync tools run in other threads, keeps its server for every call."""
    pytest.importorskip("mcp")
    from flightlog.kernel.mcp import McpServer

    env = {"NOTES_FILE": str(tmp_path / "notes.txt"), "STARTS_FILE": str(tmp_path / "starts.txt")}
    server = McpServer(id="t", command=sys.executable, args=[str(HERE / "mcp_server.py")], env=env)
    provider = ScriptedProvider(
        [
            calls(call("t__append_note", {"note": "one"}, id="c1")),
            calls(call("echo", {"text": "between"}, id="c2")),  # a sync tool: a worker thread
            calls(call("t__append_note", {"note": "two"}, id="c3")),
            reply("done"),
        ],
        by_turn=True,
    )
    agent = Agent(name="threaded", route=[provider], tools=[echo], capabilities=[server])
    statuses: list[str] = []
    with SqliteStore(tmp_path / "k.db") as store:
        driver = threading.Thread(
            target=lambda: statuses.append(
                Kernel(store, agent, notary=None).run_sync("x", session_id="w1").status
            )
        )
        driver.start()
        driver.join(timeout=120)
        assert statuses == ["completed"]
        assert [r.output for e in of(store, "w1", ToolCompleted) for r in e.results] == ["1", "between", "2"]
    assert len((tmp_path / "starts.txt").read_text().splitlines()) == 1  # started once, never lost


def test_tethered_names_a_missing_or_unrunnable_program_as_popen_would(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as missing:
        tethered([str(tmp_path / "nope")])
    assert missing.value.filename == str(tmp_path / "nope")
    with pytest.raises(FileNotFoundError):
        tethered(["no-such-program-anywhere"], path=str(tmp_path))
    (tmp_path / "plain").write_text("#!/bin/sh\n")
    with pytest.raises(PermissionError):
        tethered(["./plain"], cwd=str(tmp_path))
    assert tethered(["sh", "-c", "true"]) == [
        sys.executable,
        "-I",
        "-S",
        TETHER,
        str(os.getpid()),
        "sh",
        "-c",
        "true",
    ]


def test_the_tether_passes_the_programs_io_and_exit_status_through(tmp_path: Path) -> None:
    done = subprocess.run(
        tethered(["sh", "-c", "read line; echo got $line; echo err >&2; exit 7"]),
        input="hello\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (7, "got hello\n", "err\n")


def test_a_stray_usr1_does_not_kill_a_healthy_program(tmp_path: Path) -> None:
    """A server signalling its group with SIGUSR1, or ``pkill -USR1 -f server.py`` (whose pattern matches the
    tether's command line too), must not make the tether kill the program mid-call while the kernel lives
    (attack2 a3: the death signal was SIGUSR1). The program ignores SIGUSR1, says it is up, then exits 7
    when told: the tether passes 7 through instead of dying by SIGKILL (137)."""
    program = "trap '' USR1; echo up; read line; exit 7"
    with subprocess.Popen(
        tethered(["sh", "-c", program]), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as tether:
        assert tether.stdin is not None and tether.stdout is not None
        assert tether.stdout.readline() == "up\n"  # the program runs under the tether
        os.kill(tether.pid, signal.SIGUSR1)
        tether.stdin.write("done\n")
        tether.stdin.close()
        assert tether.wait(timeout=60) == 7
