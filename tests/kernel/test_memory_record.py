"""A memory in the store is on record: every way out of a turn keeps the ``memory_written`` of a memory
the turn wrote (found lost in session 14: the events were staged and appended only with the turn's
``tool_completed``, while the store write had committed during the call).

One test per way out: a ``FatalToolError`` in another call (run failed, or the turn retried), a sub-agent
call that stops without finishing (``suspended``), the wall clock running out, a cancel, an exception
escaping the turn, and a SIGKILL at either side of the write's commit (real subprocesses). Each checks
that the ledger holds a ``memory_written`` for every memory the store holds, in the order written, before
what the way out recorded, and that ``verify``, ``audit`` and ``replay --check`` still pass.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flightlog import events as ev
from flightlog.cli import app
from flightlog.kernel import Agent, Budgets, FatalToolError, Kernel, Policy, Rule, abort, approve, tool
from flightlog.kernel.memory import MemoryPolicy
from flightlog.kernel.memory_bank import recall, text_of
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.kernel.subagents import subagent
from flightlog.recorder import verify_session
from flightlog.store import SqliteStore
from flightlog.testing.crashpoints import ENV

from . import memory_agent
from .helpers import FakeClock, echo, events, kinds, of, run

runner = CliRunner()
SCOPE = ev.MemoryScope(tenant_id="acme", namespace="record")


def _write(name: str, content: str, call_id: str) -> Any:
    return call("memory_write", {"name": name, "content": content}, id=call_id)


def _agent(*script: Any, tools: list[Any] | None = None, **fields: Any) -> Agent:
    provider = ScriptedProvider(list(script), by_turn=fields.pop("by_turn", True))
    policy = MemoryPolicy(scope=fields.pop("scope", SCOPE))
    return Agent(name="mem", route=[provider], tools=tools or [echo], memory=policy, max_tokens=200, **fields)


def _on_record(
    store: SqliteStore, db_path: Path, session_id: str, names: list[str]
) -> list[ev.MemoryWritten]:
    """Check the ledger of ``session_id`` against the store and return its ``memory_written`` events.

    ``names``: the memories the run wrote, in order. The store holds exactly those (scope ``SCOPE``); the
    ledger holds a ``memory_written`` for each, naming the stored record, in the same order; the chain,
    ``audit`` and ``replay --check`` pass.
    """
    rows = {row.record.name: row.record for row in store.memory.rows(SCOPE)}
    assert sorted(rows) == sorted(set(names))
    written = of(store, session_id, ev.MemoryWritten)
    assert [w.name for w in written] == names
    for event in written:
        assert (event.record_id, event.memory_kind) == (rows[event.name].record_id, rows[event.name].kind)
    assert verify_session(store, session_id).ok
    audited = runner.invoke(app, ["--db", str(db_path), "audit", session_id])
    assert audited.exit_code == 0, audited.output
    checked = runner.invoke(app, ["--db", str(db_path), "replay", session_id, "--check"])
    assert checked.exit_code == 0 and "all reproduce" in checked.stdout, checked.stdout + checked.stderr
    return written


def _before(store: SqliteStore, session_id: str, first: str, then: str) -> None:
    """Every ``first`` event of the session comes before its first ``then`` event."""
    seen = kinds(store, session_id)
    assert first in seen and then in seen, seen
    assert max(i for i, k in enumerate(seen) if k == first) < seen.index(then), seen


@tool(effect="read_only")
def corrupt(text: str) -> str:
    """Finds the workspace corrupt."""
    raise FatalToolError(f"workspace corrupt at {text}")


def test_a_fatal_error_in_another_call_keeps_the_memory_written_before_the_rollback(
    store: SqliteStore, db_path: Path
) -> None:
    agent = _agent(
        calls(
            _write("orders-db", "Orders live in PostgreSQL 16.", "w"), call("corrupt", {"text": "x"}, id="c")
        ),
        tools=[echo, corrupt],
        on_fatal_tool_error="fail",
    )
    result = Kernel(store, agent, notary=None).run_sync("remember", handle_signals=False)
    assert result.status == "failed"
    assert kinds(store, result.session_id)[-3:] == ["memory_written", "rollbacked", "run_terminal"]
    _on_record(store, db_path, result.session_id, ["orders-db"])


def test_a_retried_turn_records_each_write_once_and_drops_what_the_rolled_back_query_brought(
    store: SqliteStore, db_path: Path
) -> None:
    """The first attempt writes, queries (it sees its own write) and hits a fatal error; the retry writes
    another memory. Both writes are on record, the first before the ``rollbacked``; the rolled-back query
    is on record as asked, but its hits never enter the history (its ``tool_completed`` never came), and
    nothing it staged reaches the retried turn."""
    agent = _agent(
        calls(
            _write("orders-db", "Orders live in PostgreSQL 16.", "w1"),
            call("memory_query", {"query": "orders"}, id="q"),
            call("corrupt", {"text": "x"}, id="c"),
        ),
        calls(_write("billing-db", "Billing lives in MySQL 8.", "w2")),
        reply("done"),
        tools=[echo, corrupt],
        by_turn=False,  # the retry asks the model again for turn 1: the next item
    )
    result = Kernel(store, agent, notary=None).run_sync("remember", handle_signals=False)
    assert result.status == "completed"
    sid = result.session_id
    _before(store, sid, "memory_queried", "rollbacked")
    assert [e.turn for e in of(store, sid, ev.MemoryQueried)] == [1]
    assert of(store, sid, ev.MemoryRetrievalResult) == []  # not carried into the retry
    written = _on_record(store, db_path, sid, ["orders-db", "billing-db"])
    ledger = events(store, sid)
    (rollback,) = of(store, sid, ev.Rollbacked)
    assert ledger.index(written[0]) < ledger.index(rollback) < ledger.index(written[1])


def test_a_query_later_in_the_turn_sees_a_write_earlier_in_it(store: SqliteStore, db_path: Path) -> None:
    agent = _agent(
        calls(
            _write("orders-db", "Orders live in PostgreSQL 16.", "w"),
            call("memory_query", {"query": "where do orders live"}, id="q"),
        ),
        reply("done"),
    )
    result = Kernel(store, agent, notary=None).run_sync("remember", handle_signals=False)
    assert result.status == "completed"
    (written,) = _on_record(store, db_path, result.session_id, ["orders-db"])
    # the normal path's order: what the calls did, then tool_completed, then what the query brought back
    turn = [k for k in kinds(store, result.session_id)]
    start = turn.index("memory_written")
    assert turn[start : start + 3] == ["memory_written", "memory_queried", "tool_completed"]
    (completed,) = of(store, result.session_id, ev.ToolCompleted)
    assert written.record_id in str(completed.results[1].output)
    (retrieved,) = of(store, result.session_id, ev.MemoryRetrievalResult)
    assert [h.record.record_id for h in retrieved.hits] == [written.record_id]


@tool(effect="side_effect")
def note(text: str) -> str:
    """Write a note."""
    return f"wrote {text}"


def test_a_sub_agent_call_that_suspends_the_turn_keeps_the_memory_written(
    store: SqliteStore, db_path: Path
) -> None:
    """The parent writes a memory and delegates in one turn; the child waits for an approval, so the turn
    stops in ``suspended``. The write is on record before it; the resumed turn runs the (idempotent)
    write again, and that second upsert of the same record is on record too."""
    child = Agent(
        "child",
        [ScriptedProvider([calls(call("note", {"text": "hi"}, id="n")), reply("noted")], by_turn=True)],
        tools=[note],
        policy=Policy(rules=(Rule("ask", tool="note"),)),
    )

    def parent() -> Agent:
        turn = calls(
            _write("orders-db", "Orders live in PostgreSQL 16.", "w"), call("child", {"task": "t"}, id="k")
        )
        return _agent(turn, reply("done"), tools=[note, subagent(child)])

    first = Kernel(store, parent(), notary=None, heartbeat_s=None).run_sync("go", session_id="p")
    assert (first.status, first.detail) == ("suspended", "sub_agent_await")
    _before(store, "p", "memory_written", "suspended")
    _on_record(store, db_path, "p", ["orders-db"])
    (kid,) = [s.session_id for s in store.list_sessions() if s.parent_session_id == "p"]
    approve(store, kid, "n")
    done = Kernel(store, parent(), notary=None, heartbeat_s=None).resume_sync("p")
    assert done.status == "completed"
    first_write, again = _on_record(store, db_path, "p", ["orders-db", "orders-db"])
    assert again.record_id == first_write.record_id and len(store.memory.rows(SCOPE)) == 1


@tool(effect="read_only")
async def forever(text: str) -> str:
    """Never finishes."""
    await asyncio.Event().wait()
    return text


def test_the_wall_clock_running_out_keeps_the_memory_written(store: SqliteStore, db_path: Path) -> None:
    """The write runs first (alone in its group), then a call that never finishes; the fake clock keeps
    the budget whole until the tools run, so the deadline is what ends the turn."""
    agent = _agent(
        calls(
            _write("orders-db", "Orders live in PostgreSQL 16.", "w"), call("forever", {"text": "x"}, id="f")
        ),
        tools=[forever],
        budgets=Budgets(wall_clock_ms=300),
    )
    result = Kernel(store, agent, notary=None, clock=FakeClock()).run_sync("remember", handle_signals=False)
    assert result.status == "budget_exhausted"
    _before(store, result.session_id, "memory_written", "operation_cancelled")
    (cancelled,) = of(store, result.session_id, ev.OperationCancelled)
    assert cancelled.pending_call_ids == ["f"]
    _on_record(store, db_path, result.session_id, ["orders-db"])


def test_a_cancel_mid_turn_keeps_the_memory_written(store: SqliteStore, db_path: Path) -> None:
    started = asyncio.Event()

    @tool(effect="read_only")
    async def hang(text: str) -> str:
        """Hangs until cancelled."""
        started.set()
        await asyncio.Event().wait()
        return text

    agent = _agent(
        calls(_write("orders-db", "Orders live in PostgreSQL 16.", "w"), call("hang", {"text": "x"}, id="h")),
        tools=[hang],
    )

    async def run_and_cancel() -> str:
        kernel = Kernel(store, agent, notary=None, heartbeat_s=None)
        task = asyncio.create_task(kernel.run("remember", session_id="s"))
        await asyncio.wait_for(started.wait(), 60)  # the write is done: its group came first
        kernel.cancel()
        return (await task).status

    assert asyncio.run(run_and_cancel()) == "cancelled"
    _before(store, "s", "memory_written", "operation_cancelled")
    _on_record(store, db_path, "s", ["orders-db"])


class Escaped(BaseException):
    """Not an ``Exception``: no error result catches it, it leaves the turn."""


@tool(effect="read_only", in_thread=False)
def escape(text: str) -> str:
    """Raises what escapes the turn."""
    raise Escaped(text)


def test_an_exception_escaping_the_turn_keeps_the_memory_written(store: SqliteStore, db_path: Path) -> None:
    agent = _agent(
        calls(
            _write("orders-db", "Orders live in PostgreSQL 16.", "w"), call("escape", {"text": "x"}, id="e")
        ),
        tools=[escape],
    )
    with pytest.raises(Escaped):
        run(Kernel(store, agent, notary=None, heartbeat_s=None).run("remember", session_id="s"))
    assert kinds(store, "s")[-1] == "memory_written"
    _on_record(store, db_path, "s", ["orders-db"])


@pytest.mark.parametrize(("point", "writes"), [("memory.stored", 1), ("memory.recorded", 2)])
def test_a_sigkill_at_the_write_leaves_store_and_ledger_agreeing_and_resume_finishes(
    db_path: Path, point: str, writes: int
) -> None:
    """A real process SIGKILLs itself inside the write's transaction (the upsert written, its
    ``memory_written`` not: neither survives) or right after its commit (both durable, the turn's
    ``tool_completed`` not: the resumed turn writes again, the same record, and records that too)."""
    script = Path(memory_agent.__file__)
    env = {**os.environ, ENV: point}
    killed = subprocess.run(
        [sys.executable, str(script), str(db_path), "crashy"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert killed.returncode == -9, killed.stderr
    with SqliteStore(db_path) as store:
        stored = [r.record.name for r in store.memory.rows(memory_agent.SCOPE)]
        on_record = [w.name for w in of(store, "crashy", ev.MemoryWritten)]
        assert stored == on_record == ([] if point == "memory.stored" else ["deploy-day"])
        assert "tool_completed" not in kinds(store, "crashy")
    assert memory_agent.child_main(str(db_path), "crashy") == 0  # resume, in this process
    with SqliteStore(db_path) as store:
        assert store.get_session("crashy").status == "completed"
        (row,) = store.memory.rows(memory_agent.SCOPE)
        assert text_of(store, row.record.content) == memory_agent.FACT
        written = of(store, "crashy", ev.MemoryWritten)
        assert [w.record_id for w in written] == [row.record.record_id] * writes
        (retrieved,) = of(store, "crashy", ev.MemoryRetrievalResult)  # the resumed query saw the write
        assert [h.record.record_id for h in retrieved.hits] == [row.record.record_id]
        assert verify_session(store, "crashy").ok
    audited = runner.invoke(app, ["--db", str(db_path), "audit", "crashy"])
    assert audited.exit_code == 0, audited.output
    checked = runner.invoke(app, ["--db", str(db_path), "replay", "crashy", "--check"])
    assert checked.exit_code == 0 and "all reproduce" in checked.stdout, checked.stdout + checked.stderr


def test_a_writer_fenced_off_mid_turn_stores_no_memory_it_cannot_record(
    store: SqliteStore, db_path: Path
) -> None:
    """An ``abort`` lands between two calls of the turn: the write's append finds another writer
    (``StaleWriter``), so its transaction rolls back, the memory is not stored, and the activation stops
    fenced off at once: the error is not turned into a tool result, and the calls after it do not run."""
    ran: list[str] = []

    @tool(effect="read_only", in_thread=False)
    def later(text: str) -> str:
        """Would run after the write."""
        ran.append(text)
        return text

    @tool(effect="idempotent", in_thread=False)
    def stop(text: str) -> str:
        """Aborts the run from outside (what ``flightlog abort`` does)."""
        assert abort(store, "s", notary=None)
        return text

    agent = _agent(
        calls(
            call("stop", {"text": "x"}, id="a"),
            _write("orders-db", "Orders live in PostgreSQL 16.", "w"),
            call("later", {"text": "y"}, id="l"),
        ),
        tools=[stop, later],
    )
    result = Kernel(store, agent, notary=None, heartbeat_s=None).run_sync("remember", session_id="s")
    assert result.status == "cancelled" and "tool_completed" not in kinds(store, "s") and ran == []
    assert kinds(store, "s")[-1] == "operation_cancelled"
    _on_record(store, db_path, "s", [])


def test_a_rewrite_erases_the_old_text_in_the_write_s_transaction(store: SqliteStore, db_path: Path) -> None:
    """A later turn rewrites the memory: the same record, its old text erased (the erasure log is written
    in the write's transaction, beside the upsert and its ``memory_written``), both writes on record."""
    agent = _agent(
        calls(_write("editor", "The user edits in vim.", "w1")),
        calls(_write("editor", "The user edits in helix.", "w2")),
        reply("done"),
    )
    result = Kernel(store, agent, notary=None).run_sync("remember", handle_signals=False)
    assert result.status == "completed"
    first, second = _on_record(store, db_path, result.session_id, ["editor", "editor"])
    assert first.record_id == second.record_id
    (row,) = store.memory.rows(SCOPE)
    assert text_of(store, row.record.content) == "The user edits in helix."
    assert [h.record.name for h in recall(store, SCOPE, "vim")] == []
