"""Shared helpers for the kernel tests: reading a session's events, tools, fake sleep and clock, the CLI run
in this process, waiting for a logged line."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import threading
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import typer
from typer.testing import CliRunner

from child_lines import read_line
from flightlog.cli import app as flightlog_app
from flightlog.events import Custom, Event, SessionEvent
from flightlog.kernel import Agent, Kernel, tool
from flightlog.kernel.scripted import ScriptedProvider
from flightlog.sessions import iter_events
from flightlog.store import Store

T = TypeVar("T")
E = TypeVar("E", bound=Event)
_runner = CliRunner()


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine in a fresh event loop."""
    return asyncio.run(coro)


def cli(db: Path | str, *args: str, app: typer.Typer = flightlog_app) -> tuple[int, str, str]:
    """``flightlog --db DB ARGS...`` in this process (``app``: another Typer app taking ``--db``, as the
    standalone ``kernel_app``): its exit code, stdout and stderr."""
    result = _runner.invoke(app, ["--db", str(db), *args])
    return result.exit_code, result.stdout, result.stderr


@contextmanager
def logged(message: str, logger: str = "flightlog.kernel") -> Iterator[threading.Event]:
    """An event set once ``logger`` logs a record (INFO or above) whose message contains ``message``: a
    state to wait for (a printed line, not a timer). The handler is removed and the logger's level
    restored on exit."""
    seen = threading.Event()

    class Hook(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if message in record.getMessage():
                seen.set()

    hook, log = Hook(), logging.getLogger(logger)
    level = log.level
    log.addHandler(hook)
    log.setLevel(logging.INFO)
    try:
        yield seen
    finally:
        log.removeHandler(hook)
        log.setLevel(level)


def events(store: Store, session_id: str) -> list[SessionEvent]:
    """Every decoded event of a session, in seq order."""
    return [event for _row, event in iter_events(store, session_id)]


def kinds(store: Store, session_id: str) -> list[str]:
    """Event kinds in seq order; ``Custom`` shown as ``custom:<custom_kind>``."""
    return [f"custom:{e.custom_kind}" if isinstance(e, Custom) else e.kind for e in events(store, session_id)]


def of(store: Store, session_id: str, cls: type[E]) -> list[E]:
    """The events of one class, in order."""
    return [e for e in events(store, session_id) if isinstance(e, cls)]


def customs(store: Store, session_id: str, kind: str) -> list[Any]:
    """Payloads of the ``Custom`` events of one ``custom_kind``, in order."""
    return [e.payload for e in events(store, session_id) if isinstance(e, Custom) and e.custom_kind == kind]


class Sleeps:
    """A fake ``asyncio.sleep`` that records the delays and returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


class FakeClock:
    """A monotonic clock (seconds) that moves only when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@tool(effect="read_only")
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: First addend.
        b: Second addend.
    """
    return a + b


@tool(effect="read_only")
def echo(text: str) -> str:
    """Echo the text back."""
    return text


def agent(provider: ScriptedProvider, **fields: Any) -> Agent:
    """An agent over ``provider`` with the ``add`` and ``echo`` tools unless ``tools`` is given."""
    fields.setdefault("tools", [add, echo])
    return Agent(name=fields.pop("name", "test-agent"), route=[provider], **fields)


def kernel(store: Store, provider: ScriptedProvider, **fields: Any) -> Kernel:
    """A kernel with an instant fake sleep."""
    sleep = fields.pop("sleep", Sleeps())
    return Kernel(store, agent(provider, **fields), sleep=sleep)


def line_count(path: Path, text: str) -> int:
    """How many lines of ``path`` equal ``text``."""
    if not path.exists():
        return 0
    return sum(1 for line in path.read_text().splitlines() if line == text)


@contextmanager
def zygote_process(tmp_path: Path, source: str) -> Iterator[subprocess.Popen[str]]:
    """Start ``source`` (a zygote script: imports once, forks a child per job line on stdin, answers one
    line per job) with this directory on its path; yields the process once it printed ``READY``, closes
    its stdin and waits for it on the way out. Its stderr goes to ``tmp_path/zygote.err``."""
    script = tmp_path / "zygote.py"
    script.write_text(source)
    with (
        (tmp_path / "zygote.err").open("w") as err,
        subprocess.Popen(
            [sys.executable, str(script), str(Path(__file__).parent)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        ) as proc,
    ):
        assert proc.stdin is not None and proc.stdout is not None
        assert read_line(proc, "the zygote's READY") == "READY\n"
        yield proc
        proc.stdin.close()
        proc.wait(timeout=60)


def check_child_settled(ledger: list[SessionEvent], parent: Any, child: Any, kid: str) -> None:
    """A finished child ``kid`` as its parent's ledger (``ledger``, folded into ``parent``, a
    ``KernelState``) records it: one grant and one ``spawned``, ending ``joined``; its
    ``budget_usage_reported`` equals the child's own tokens and turns plus what its own children reported;
    its recorded limits are the grant."""
    from flightlog.events import AgentProcessChanged, BudgetUsageReported

    grant = parent.delegation.grants[kid]
    usage = parent.delegation.released[grant.reservation_id]
    assert isinstance(usage, BudgetUsageReported)
    below = list(child.delegation.released.values())
    assert usage.tokens == child.tokens_used + sum(u.tokens for u in below)
    assert usage.rounds == child.turn + sum(u.rounds for u in below)
    assert usage.subagents == 1 + sum(u.subagents for u in below)
    assert child.limits is not None and (child.limits.tokens, child.limits.turns) == (
        grant.tokens,
        grant.turns,
    )
    states = [e.state for e in ledger if isinstance(e, AgentProcessChanged) and e.agent_id == kid]
    assert states[0] == "spawned" and states[-1] == "joined" and states.count("spawned") == 1
    grants = [e for e in ledger if isinstance(e, Custom) and e.custom_kind == "budget_grant"]
    assert sum(1 for g in grants if isinstance(g.payload, dict) and g.payload["agent_id"] == kid) == 1
