"""Long-term memory on PostgreSQL through the same functions as on SQLite: remember (text in salted
storage), recall ranked by ``ts_rank``, ``flightlog erase`` of a memory's handle deleting it, forget; and
the kernel's ``memory_write`` committing the memory with its ``memory_written`` (SIGKILLed subprocesses)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from flightlog import events as ev
from flightlog.integrity.erasure import erase_artifact
from flightlog.kernel.memory_bank import forget, recall, remember, text_of
from flightlog.kernel.requests import check_session
from flightlog.sessions import iter_events
from flightlog.store.postgres import PostgresStore
from flightlog.testing.crashpoints import ENV

SCOPE = ev.MemoryScope(tenant_id="acme", namespace="ops")


def test_remember_recall_erase_forget(pg_store: PostgresStore) -> None:
    deploy = remember(
        pg_store, scope=SCOPE, kind=ev.MemoryKind.PROJECT, name="deploy-day", content="Deploys on Thursdays."
    )
    editor = remember(
        pg_store, scope=SCOPE, kind=ev.MemoryKind.USER, name="editor", content="The user edits in vim."
    )
    (hit,) = recall(pg_store, SCOPE, "when are deploys", top_k=5)
    assert hit.record.record_id == deploy.record.record_id and hit.why.startswith("ts_rank")
    assert 0.0 < hit.score < 1.0 and text_of(pg_store, hit.record.content) == "Deploys on Thursdays."
    assert pg_store.memory.get(deploy.record.record_id).record.recall_count == 1  # type: ignore[union-attr]
    erase_artifact(pg_store, deploy.record.content, reason="test", notary=None)
    assert pg_store.memory.get(deploy.record.record_id) is None
    assert recall(pg_store, SCOPE, "deploys thursdays") == []
    assert forget(pg_store, editor.record.record_id) is not None
    assert text_of(pg_store, editor.record.content) is None and pg_store.memory.rows() == []


@pytest.mark.parametrize(("point", "stored"), [("memory.stored", []), ("memory.recorded", ["deploy-day"])])
def test_a_kernel_memory_write_and_its_memory_written_commit_together(
    pg_url: str, open_pg: Callable[..., PostgresStore], point: str, stored: list[str]
) -> None:
    """The kernel's ``memory_write`` on PostgreSQL: a process SIGKILLed inside the write's transaction
    leaves neither the memory nor its ``memory_written``, one killed right after the commit leaves both;
    a fresh process resumes the run to its end with the memory on record (tests/kernel/memory_agent.py)."""
    agent = Path(__file__).parents[1] / "kernel" / "memory_agent.py"
    command = [sys.executable, str(agent), pg_url, "crashy"]
    killed = subprocess.run(
        command, env={**os.environ, ENV: point}, capture_output=True, text=True, timeout=120
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    store = open_pg()
    on_record = [e.name for _r, e in iter_events(store, "crashy") if isinstance(e, ev.MemoryWritten)]
    assert [r.record.name for r in store.memory.rows()] == on_record == stored
    env = {k: v for k, v in os.environ.items() if k != ENV}
    resumed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0 and resumed.stdout.strip() == "completed", resumed.stderr
    (row,) = store.memory.rows()
    written = [e for _r, e in iter_events(store, "crashy") if isinstance(e, ev.MemoryWritten)]
    assert [w.record_id for w in written] == [row.record.record_id] * (len(stored) + 1)
    assert text_of(store, row.record.content) == "Deploys happen on Thursdays."
    assert check_session(store, "crashy").ok


def test_a_kernel_rewrite_erases_the_old_text_with_its_memory_written(pg_store: PostgresStore) -> None:
    """Two turns write the same memory: one record, its old text erased in the second write's
    transaction (beside the upsert and its ``memory_written``), both writes on record."""
    from flightlog.kernel import Agent, Kernel
    from flightlog.kernel.memory import MemoryPolicy
    from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply

    def write(content: str, call_id: str) -> object:
        return calls(call("memory_write", {"name": "editor", "content": content}, id=call_id))

    script = [write("The user edits in vim.", "w1"), write("The user edits in helix.", "w2"), reply("done")]
    agent = Agent(
        name="mem",
        route=[ScriptedProvider(script, by_turn=False)],
        memory=MemoryPolicy(scope=SCOPE),
        max_tokens=200,
    )
    result = Kernel(pg_store, agent, notary=None, heartbeat_s=None).run_sync("remember", handle_signals=False)
    assert result.status == "completed"
    (row,) = pg_store.memory.rows(SCOPE)
    written = [e for _r, e in iter_events(pg_store, result.session_id) if isinstance(e, ev.MemoryWritten)]
    assert [w.record_id for w in written] == [row.record.record_id] * 2
    assert text_of(pg_store, row.record.content) == "The user edits in helix."
    assert recall(pg_store, SCOPE, "vim") == []
    assert check_session(pg_store, result.session_id).ok
