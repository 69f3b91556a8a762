"""Shared fixtures for the dashboard tests: a database, ``open_db``, agents and hostile sessions."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest

from flightlog.events import Custom, RunStarted, ToolCompleted, ToolRequested
from flightlog.kernel import Agent, Kernel, Policy, Rule, RunResult, tool
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.live import LiveRegistry, wall_ms
from flightlog.messages import ToolCall, ToolResult
from flightlog.recorder import Recorder
from flightlog.store import SqliteStore, Store

TOKEN = "test-token-0123456789abcdef"

SCRIPT = "<script>alert(1)</script>"
IMG = '<img src=x onerror="window.__pwned=1;alert(2)">'
BIDI = "invoice\u202efdp.exe\u202c \u2066iso\u2069 \u200bzero\u0007bell\U000e0041tag"
HUGE = "H" * 2_000_000


def opener(path: Path) -> Callable[[bool], AbstractContextManager[Store]]:
    """``open_db(read_only)`` for a database file, as the CLI's ``_store`` does."""

    @contextmanager
    def open_db(read_only: bool) -> Iterator[Store]:
        store = SqliteStore(path, read_only=read_only)
        try:
            yield store
        finally:
            store.close()

    return open_db


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """A migrated, empty database file."""
    path = tmp_path / "web.db"
    SqliteStore(path).close()
    return path


@tool(effect="side_effect")
def write_note(text: str) -> str:
    """Write a note somewhere that matters.

    Args:
        text: What to write.
    """
    return f"wrote {len(text)} characters"


@tool(effect="read_only")
def echo(text: str) -> str:
    """Echo the text back.

    Args:
        text: The text.
    """
    return text


GATE = Policy(rules=(Rule("ask", tool="write_*", reason="writes need a human"),))


def gated_agent(note: str = "hello") -> Agent:
    """An agent whose second turn asks to write ``note`` (gated by an ``ask`` rule), then finishes.

    The provider picks answers by turn, so a fresh agent in another process or thread resumes it.
    """
    script = [
        calls(call("echo", {"text": "looking"}, id="e1")),
        calls(call("write_note", {"text": note}, id="w1")),
        reply("all done"),
    ]
    provider = ScriptedProvider(script, by_turn=True)  # type: ignore[arg-type]
    return Agent(name="gated", route=[provider], tools=[echo, write_note], policy=GATE)


def run_gated(path: Path, session_id: str, note: str = "hello", goal: str = "write a note") -> RunResult:
    """Run :func:`gated_agent` in its own store until it suspends for approval."""
    with SqliteStore(path) as store:
        return Kernel(store, gated_agent(note)).run_sync(goal, session_id=session_id, handle_signals=False)


def resume_gated(path: Path, session_id: str) -> RunResult:
    """The runner's side: resume the suspended run once its decisions are recorded."""
    with SqliteStore(path) as store:
        return Kernel(store, gated_agent()).resume_sync(session_id, handle_signals=False)


def blocking_agent(release: threading.Event) -> Agent:
    """An agent whose one tool call blocks until ``release`` is set, then finishes (for live views)."""

    @tool(effect="read_only")
    def wait_here(reason: str) -> str:
        """Wait until the test lets the run go on.

        Args:
            reason: Why.
        """
        release.wait(30)
        return "released"

    script = [calls(call("wait_here", {"reason": "the test holds me"}, id="h1")), reply("finished")]
    provider = ScriptedProvider(script, by_turn=False)  # type: ignore[arg-type]
    return Agent(name="live", route=[provider], tools=[wait_here])


def record_hostile(store: Store, session_id: str = "hostile") -> str:
    """A session whose goal, task, tool call, tool output and custom payloads are hostile."""
    rec = Recorder.create(store, task=f"task {IMG}", session_id=session_id)
    rec.append(RunStarted(run_id="h", goal=f"goal {SCRIPT} {BIDI}"))
    rec.append(ToolRequested(turn=1, calls=[ToolCall(id="c<1>", name=f"tool{SCRIPT}", arguments=IMG)]))
    rec.append(ToolCompleted(turn=1, results=[ToolResult(call_id="c<1>", output=f"out {IMG} {BIDI}")]))
    rec.append(Custom(custom_kind=f"kind{SCRIPT}", payload={"key": IMG, "big": HUGE}))
    return rec.session_id


def run_blocking(path: Path, release: threading.Event, goal: str, session_id: str) -> str:
    """Run :func:`blocking_agent` in its own store until ``release`` lets its tool finish; its status."""
    with SqliteStore(path) as store:
        return (
            Kernel(store, blocking_agent(release))
            .run_sync(goal, session_id=session_id, handle_signals=False)
            .status
        )


def dead_and_alive(path: Path) -> None:
    """Two kernel runs, ``dead`` and ``alive``, whose one event is a minute old: ``alive`` has a fresh
    heartbeat, ``dead`` none (abandoned: nothing drove it within the lease)."""
    minute_ago = wall_ms() - 60_000
    with SqliteStore(path) as store:
        for sid in ("dead", "alive"):
            recorder = Recorder.create(store, session_id=sid, task="work", source="kernel")
            recorder.append_many([RunStarted(run_id=sid, goal="work")], recorded_at_ms=[minute_ago])
        LiveRegistry(store).publish("alive", "running")
