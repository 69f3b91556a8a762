"""Long-term memory in the kernel (issue 14 items 3 and 5), on real runs of the scripted provider.

Field by field: ``memory_written``, ``memory_validation_failed``, ``memory_queried`` and
``memory_retrieval_result`` (``tests/kernel/test_event_coverage.py`` names these tests for them). Also
upstream's validation strings (UPSTREAM.md §8), secrets found by detect-secrets, memory across sessions,
erasure keeping every chain verifying, and asynchronous retrieval across a process restart.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flightlog import events as ev
from flightlog.cli import app
from flightlog.cli.demo_memory import FACT, SCOPE, answer_from_memory, recall_agent, remember_agent
from flightlog.kernel import Agent, Kernel, KernelError
from flightlog.kernel.memory import (
    MEMORY_ALREADY_IN_HISTORY,
    MEMORY_SUSPENSION,
    MemoryPolicy,
    SpoolMemoryService,
    find_secrets,
    validate_write,
)
from flightlog.kernel.memory_bank import forget, recall, remember, text_of
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.messages import Message
from flightlog.narration import narrate
from flightlog.recorder import verify_session
from flightlog.sessions import replay_session
from flightlog.store import SqliteStore

from .helpers import events, of, run

runner = CliRunner()


def _agent(*script: Any, policy: MemoryPolicy | None = None) -> tuple[Agent, ScriptedProvider]:
    model = ScriptedProvider(list(script), by_turn=True)
    return Agent(name="mem", route=[model], memory=policy or MemoryPolicy(scope=SCOPE), max_tokens=200), model


def _tool_results(store: SqliteStore, session_id: str) -> list[ev.ToolResult]:
    return [r for e in of(store, session_id, ev.ToolCompleted) for r in e.results]


def _memory_events(store: SqliteStore, session_id: str) -> list[ev.SessionEvent]:
    return [e for e in events(store, session_id) if e.kind.startswith("memory_")]


def test_a_write_then_a_query_record_memory_events_field_by_field(store: SqliteStore) -> None:
    text = "Orders live in PostgreSQL 16."
    agent, model = _agent(
        calls(
            call("memory_write", {"name": "orders-db", "content": text, "description": "orders db"}, id="w")
        ),
        calls(call("memory_query", {"query": "where do orders live", "top_k": 50}, id="q")),
        reply("done"),
    )
    result = run(Kernel(store, agent, notary=None).run("remember and recall"))
    assert result.status == "completed"
    (row,) = store.memory.rows(SCOPE)
    rid, handle = row.record.record_id, row.record.content
    assert handle.startswith("salted:sha256:") and text_of(store, handle) == text
    written, queried, retrieved = _memory_events(store, result.session_id)
    ledger = events(store, result.session_id)
    for event in (written, queried):  # recorded with the call, before its tool_completed
        assert isinstance(ledger[ledger.index(event) + 1], ev.ToolCompleted)
    assert isinstance(ledger[ledger.index(retrieved) - 2], ev.ToolCompleted)  # then entropy_sample, the hits
    assert written == ev.MemoryWritten(
        turn=1,
        record_id=rid,
        scope=SCOPE,
        memory_kind=ev.MemoryKind.PROJECT,
        name="orders-db",
        size_bytes=len(text),
    )
    # k is clamped to the policy's retrieval_top_k (upstream default 5)
    assert queried == ev.MemoryQueried(
        turn=2, scope=SCOPE, query="where do orders live", requested_k=5, requires_async_response=False
    )
    assert isinstance(retrieved, ev.MemoryRetrievalResult)
    (hit,) = retrieved.hits
    assert hit.record.model_copy(
        update={"recall_count": 1, "last_recalled_at": None}
    ) == row.record.model_copy(update={"last_recalled_at": None})
    assert hit.record.content == handle  # the ledger holds the handle, never the text
    memory_rows = [r for r in store.read_events(result.session_id) if r.kind.startswith("memory_")]
    assert len(memory_rows) == 3 and not any(text.encode() in r.event_bytes for r in memory_rows)
    assert 0.0 <= hit.score < 1.0 and hit.why.startswith("fts5 bm25")
    assert hit.record.provenance == ev.MemoryProvenance(
        session_id=result.session_id,
        author=ev.MemoryAuthor.MODEL,
        trust=ev.MemoryTrustLevel.UNTRUSTED,
        evidence_refs=["turn:1"],
    )
    # the hit entered the history as upstream's host message, after the tool result
    last = model.requests[-1].messages
    assert last[-1] == Message.text("user", f"[MEMORY record_id={rid} kind=project] {text}")
    assert last[-2].role == "tool"
    assert replay_session(store, result.session_id)[-2] == last[-1]  # replay shows the same


@pytest.mark.parametrize(
    ("name", "content", "error"),
    [
        ("  ", "x", "memory name must not be empty"),
        ("n" * 101, "x", "memory name exceeds 100 characters"),
        ("big", "é" * 5001, "memory content exceeds 10000 bytes"),  # 10002 UTF-8 bytes, 5001 characters
    ],
)
def test_rejected_writes_record_upstreams_error_strings(
    store: SqliteStore, name: str, content: str, error: str
) -> None:
    agent, _ = _agent(calls(call("memory_write", {"name": name, "content": content}, id="w")), reply("ok"))
    result = run(Kernel(store, agent, notary=None).run("write"))
    assert _memory_events(store, result.session_id) == [
        ev.MemoryValidationFailed(turn=1, record_id=name, error=error)
    ]
    (answer,) = _tool_results(store, result.session_id)
    assert answer.is_error and answer.output == f"MemoryRejected: {error}"
    assert store.memory.rows() == []


def test_the_limits_are_inclusive_and_the_policy_sets_them() -> None:
    policy = MemoryPolicy(scope=SCOPE)
    assert validate_write(policy, "n" * 100, "é" * 5000, "project") is None  # exactly 100 chars, 10000 bytes
    small = MemoryPolicy(scope=SCOPE, max_name_length=3, max_content_bytes=4)
    assert validate_write(small, "abcd", "x", "user") == "memory name exceeds 3 characters"
    assert validate_write(small, "abc", "xxxxx", "user") == "memory content exceeds 4 bytes"
    assert validate_write(policy, "n", "x", "belief") == "invalid memory kind 'belief'"
    with pytest.raises(ValueError, match="tenant_id and namespace must be non-empty"):
        MemoryPolicy(scope=ev.MemoryScope(tenant_id="", namespace="n"))


@pytest.mark.parametrize(
    ("content", "detector"),
    [
        ("the deploy key is AKIAIOSFODNN7EXAMPLE", "AWS Access Key"),
        ("token ghp_1234567890abcdefghijklmnopqrstuvwxyzAB for the bot", "GitHub Token"),
        ("-----BEGIN RSA PRIVATE KEY-----", "Private Key"),
        ("password = 'hunter2hunter2'", "Secret Keyword"),
    ],
)
def test_secrets_are_refused_by_detect_secrets(store: SqliteStore, content: str, detector: str) -> None:
    assert detector in find_secrets(content)
    agent, _ = _agent(calls(call("memory_write", {"name": "creds", "content": content}, id="w")), reply("ok"))
    result = run(Kernel(store, agent, notary=None).run("write"))
    (failed,) = _memory_events(store, result.session_id)
    assert isinstance(failed, ev.MemoryValidationFailed)
    assert failed.error.startswith("memory content contains a secret (") and detector in failed.error
    assert content not in failed.error
    assert store.memory.rows() == []


def test_ordinary_sentences_are_not_secrets() -> None:
    for text in (
        FACT,
        "The user prefers tabs; the token budget is 500.",
        "api keys live in the vault, ask ops",
    ):
        assert find_secrets(text) == []


def test_a_rewrite_updates_the_same_record_and_erases_the_old_text(store: SqliteStore) -> None:
    first = remember(store, scope=SCOPE, kind=ev.MemoryKind.USER, name="editor", content="vim", at_ms=10)
    second = remember(store, scope=SCOPE, kind=ev.MemoryKind.USER, name="editor", content="helix", at_ms=5)
    assert (first.inserted, second.inserted) == (True, False)
    assert second.record.record_id == first.record.record_id
    assert (second.record.created_at, second.record.updated_at) == (10, 10)  # updated_at never goes back
    assert text_of(store, first.record.content) is None  # the old text is erased
    assert text_of(store, second.record.content) == "helix"
    assert [h.record.name for h in recall(store, SCOPE, "helix")] == ["editor"]
    assert recall(store, SCOPE, "vim") == []


def _db_bytes(directory: Path) -> bytes:
    return b"".join(p.read_bytes().lower() for p in directory.iterdir() if p.name.startswith("memory.db"))


def test_a_rewritten_or_forgotten_text_leaves_no_word_in_the_database_file(tmp_path: Path) -> None:
    """The FTS5 index kept the (lowercased, stemmed) words of an overwritten memory text in the .db file after
    the salted text was erased (found by the memloss pass). Words are looked for by a suffix, as FTS5 stores
    a term after the prefix it shares with the one before it. Both paths: FTS5 ``secure-delete`` on SQLite
    >= 3.42, an ``optimize`` after each delete on older SQLite (this machine's 3.40.1)."""
    db = tmp_path / "memory.db"
    user = ev.MemoryKind.USER
    with SqliteStore(db) as store:
        for i in range(30):  # an index of more than one page
            remember(store, scope=SCOPE, kind=user, name=f"n{i}", content=f"ordinary fact {i}", at_ms=1)
        remember(store, scope=SCOPE, kind=user, name="editor", content="Quokkavim xylophonics", at_ms=1)
        remember(store, scope=SCOPE, kind=user, name="editor", content="helix", at_ms=2)
        pet = remember(store, scope=SCOPE, kind=user, name="pet", content="Zebrafinchery", at_ms=1)
    rewritten = _db_bytes(tmp_path)
    assert b"helix" in rewritten and b"rafinch" in rewritten  # live memories: the probe can see words
    assert [w for w in (b"kkavim", b"lophon") if w in rewritten] == []
    with SqliteStore(db) as store:
        assert forget(store, pet.record.record_id) is not None
        assert [h.record.name for h in recall(store, SCOPE, "helix")] == ["editor"]
        assert recall(store, SCOPE, "zebrafinchery") == []
    forgotten = _db_bytes(tmp_path)
    assert b"helix" in forgotten and b"rafinch" not in forgotten


def test_memory_survives_across_runs_and_sessions(store: SqliteStore) -> None:
    first = Kernel(store, remember_agent(), notary=None).run_sync("remember deploys", handle_signals=False)
    second = Kernel(store, recall_agent(), notary=None).run_sync(
        "When do deploys happen?", handle_signals=False
    )
    assert first.session_id != second.session_id
    assert second.status == "completed" and second.final_message is not None and FACT in second.final_message
    start = events(store, second.session_id)
    # injected at run start: right after run_started's records, before the first model call
    injected = next(i for i, e in enumerate(start) if isinstance(e, ev.MemoryQueried))
    assert start[injected] == ev.MemoryQueried(
        turn=0, scope=SCOPE, query="When do deploys happen?", requested_k=3, requires_async_response=False
    )
    assert isinstance(start[injected + 1], ev.MemoryRetrievalResult)
    assert not any(isinstance(e, ev.CheckpointTaken) for e in start[:injected])
    first_request = replay_session(store, second.session_id, at=injected + 1)
    assert first_request[-1].text_content().endswith(FACT)


def test_a_query_does_not_inject_a_memory_already_in_the_history(store: SqliteStore) -> None:
    """The demo's second run: the fact is injected at run start, then its memory_query finds it again;
    the model is given it once (the query's answer says it is above), and a new record still comes in."""
    Kernel(store, remember_agent(), notary=None).run_sync("remember deploys", handle_signals=False)
    second = Kernel(store, recall_agent(), notary=None).run_sync(
        "When do production deploys happen?", handle_signals=False
    )
    assert second.status == "completed" and FACT in (second.final_message or "")
    history = [m.text_content() for m in replay_session(store, second.session_id)]
    assert [t for t in history if t.startswith("[MEMORY")] == [next(t for t in history if FACT in t)]
    (queried,) = [e for e in of(store, second.session_id, ev.MemoryQueried) if e.turn == 1]
    assert queried.requested_k == 3
    results = of(store, second.session_id, ev.MemoryRetrievalResult)
    assert [len(r.hits) for r in results] == [1, 0]  # the query's hit is the one injected at start
    (answer,) = [r for r in _tool_results(store, second.session_id) if r.call_id == "query-1"]
    rid = results[0].hits[0].record.record_id
    assert str(answer.output).startswith(f"1 memory recalled ({rid})")
    assert f"already in the conversation above: {rid}" in str(answer.output)
    # the ledger says why the query's hits are empty, and records the query before the answer it gave
    turn_one = [e for e in events(store, second.session_id) if getattr(e, "turn", 1) == 1]
    kinds = [e.kind if e.kind != "custom" else e.custom_kind for e in turn_one]  # type: ignore[attr-defined]
    after_gate = kinds[kinds.index("permission_resolved") + 1 :]
    assert after_gate[:2] == ["memory_queried", "tool_completed"]
    above = [e for e in events(store, second.session_id) if isinstance(e, ev.Custom)]
    (note,) = [e for e in above if e.custom_kind == MEMORY_ALREADY_IN_HISTORY]
    assert note.payload == {"turn": 1, "record_ids": [rid]}
    ledger = events(store, second.session_id)
    assert ledger.index(note) == ledger.index(results[1]) + 1
    assert narrate(results[1]) == "memory recall: 0 hits added to the conversation"
    assert narrate(note) == (
        f"turn 1: memory recall: 1 memory already in the conversation, not added again ({rid})"
    )

    # a record the history does not hold yet is injected by the query, beside the one it holds
    remember(
        store, scope=SCOPE, kind=ev.MemoryKind.PROJECT, name="freeze", content="Deploys freeze in December."
    )
    third = Kernel(store, recall_agent(), notary=None).run_sync(
        "What follows the 14:00 standup?", handle_signals=False
    )
    memories = [
        t for t in (m.text_content() for m in replay_session(store, third.session_id)) if "[MEMORY" in t
    ]
    assert [t.split("] ", 1)[1] for t in memories] == [FACT, "Deploys freeze in December."]


def test_erasing_a_memory_keeps_every_chain_verifying(store: SqliteStore, db_path: Path) -> None:
    Kernel(store, remember_agent()).run_sync("remember deploys", handle_signals=False)
    second = Kernel(store, recall_agent()).run_sync("When do deploys happen?", handle_signals=False)
    (row,) = store.memory.rows(SCOPE)
    result = runner.invoke(app, ["--db", str(db_path), "erase", row.handle, "--reason", "user asked"])
    assert result.exit_code == 0, result.output
    assert store.memory.rows() == [] and recall(store, SCOPE, "deploys thursdays") == []
    verified = runner.invoke(app, ["--db", str(db_path), "verify", "--all"])
    assert verified.exit_code == 0, verified.output
    audited = runner.invoke(app, ["--db", str(db_path), "audit", second.session_id])
    assert audited.exit_code == 0 and f"{row.handle}: erased" in audited.output
    assert verify_session(store, second.session_id).ok
    shown = [m.text_content() for m in replay_session(store, second.session_id)]
    assert f"[MEMORY record_id={row.record.record_id} kind=project] [erased]" in shown
    # what recalled it reads [erased] now; the model's own answer quoting it is its output, kept in the ledger
    assert not any(FACT in text for text in shown if text.startswith("[MEMORY"))


def test_memory_cli_lists_searches_and_forgets(store: SqliteStore, db_path: Path) -> None:
    for name, text in [("deploy-day", FACT), ("editor", "The user edits in vim with tabs.")]:
        remember(store, scope=SCOPE, kind=ev.MemoryKind.PROJECT, name=name, content=text)
    listed = runner.invoke(app, ["--db", str(db_path), "memory", "ls", "--scope", "demo/ops-assistant"])
    assert listed.exit_code == 0 and "deploy-day" in listed.output and "editor" in listed.output
    found = runner.invoke(app, ["--db", str(db_path), "memory", "search", "vim tabs", "--json"])
    doc = json.loads(found.stdout)
    assert doc[0]["record"]["name"] == "editor" and doc[0]["text"].startswith("The user")
    rid = doc[0]["record"]["record_id"]
    gone = runner.invoke(app, ["--db", str(db_path), "memory", "forget", rid])
    assert gone.exit_code == 0 and f"forgot {rid}" in gone.output
    again = runner.invoke(app, ["--db", str(db_path), "memory", "forget", rid])
    assert again.exit_code == 2
    bad = runner.invoke(app, ["--db", str(db_path), "memory", "ls", "--scope", "nope"])
    assert bad.exit_code == 2


# ─── asynchronous retrieval across a process restart ──────────────────────────────────────────────

AGENT_MODULE = """
import os

from flightlog.cli.demo_memory import SCOPE, answer_from_memory
from flightlog.kernel import Agent
from flightlog.kernel.memory import MemoryPolicy, SpoolMemoryService
from flightlog.kernel.scripted import ScriptedProvider, call, calls

model = ScriptedProvider(
    [calls(call("memory_query", {"query": "deploy day"}, id="q1")), answer_from_memory], by_turn=True
)
service = SpoolMemoryService(os.environ["MEMORY_SPOOL"])
agent = Agent(name="async-recall", route=[model], memory=MemoryPolicy(scope=SCOPE, service=service))
"""


def _resume(db: Path, session_id: str, folder: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(folder), "MEMORY_SPOOL": str(folder / "spool")}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "flightlog",
            "--db",
            str(db),
            "resume",
            session_id,
            "--spec",
            "memagent:agent",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_async_retrieval_suspends_and_the_result_arrives_on_resume_in_another_process(
    tmp_path: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "memagent.py").write_text(AGENT_MODULE, encoding="utf-8")
    monkeypatch.setenv("MEMORY_SPOOL", str(tmp_path / "spool"))
    monkeypatch.syspath_prepend(str(tmp_path))
    import memagent  # type: ignore[import-not-found]

    with SqliteStore(db_path) as store:
        result = run(Kernel(store, memagent.agent).run("When do deploys happen?"))
        assert (result.status, result.detail) == ("suspended", MEMORY_SUSPENSION)
        assert store.get_session(result.session_id).status == "suspended"
        run_id = events(store, result.session_id)[0].run_id  # type: ignore[union-attr]
        query_id = f"{run_id}:turn-1:memory-1"
        assert _memory_events(store, result.session_id) == [
            ev.MemoryQueried(
                turn=1, scope=SCOPE, query="deploy day", requested_k=5, requires_async_response=True
            )
        ]
        assert events(store, result.session_id)[-1] == ev.Suspended(
            turn=1, reason=MEMORY_SUSPENSION, pending_calls=[query_id]
        )
        before = len(events(store, result.session_id))
    service = SpoolMemoryService(tmp_path / "spool")
    assert [qid for qid, _q in service.pending()] == [query_id]

    # Not answered yet: another process resumes, the run stays suspended, nothing is written.
    waiting = _resume(db_path, result.session_id, tmp_path)
    assert waiting.returncode == 3, waiting.stderr
    assert json.loads(waiting.stdout)["status"] == "suspended"
    with SqliteStore(db_path) as store:
        assert len(events(store, result.session_id)) == before

    # The external service answers (its hits carry the text); a fresh process resumes and finishes.
    hit = ev.MemoryRecall.model_validate(
        {
            "record": {
                "record_id": "svc-1",
                "scope": SCOPE.to_wire(),
                "name": "deploy-day",
                "kind": "project",
                "content": FACT,
                "description": "when deploys happen",
                "provenance": {"author": "host", "trust": "host_verified"},
                "created_at": 1,
                "updated_at": 2,
                "confidence": 0.9,
            },
            "score": 0.8,
            "why": "vector match",
        }
    )
    service.answer(query_id, [hit])
    done = _resume(db_path, result.session_id, tmp_path)
    assert done.returncode == 0, done.stderr
    final = json.loads(done.stdout)
    assert final["status"] == "completed" and FACT in final["final_message"]
    with SqliteStore(db_path) as store:
        after = events(store, result.session_id)[before:]
        assert isinstance(after[0], ev.Resumed) and isinstance(after[1], ev.MemoryRetrievalResult)
        (stored,) = after[1].hits
        assert stored.record.content.startswith("salted:sha256:")  # the text went to salted storage
        assert text_of(store, stored.record.content) == FACT
        assert stored.model_copy(update={"record": stored.record.model_copy(update={"content": FACT})}) == hit
        assert verify_session(store, result.session_id).ok
    assert answer_from_memory  # the agent module's answer reads the [MEMORY] message


def test_the_example_remembers_in_one_run_and_uses_it_in_the_next_from_the_cli(db_path: Path) -> None:
    """``examples/memory_agent.py`` as its docstring runs it: two ``flightlog run`` sessions, then ``show``."""
    base = ["--db", str(db_path)]
    first = runner.invoke(
        app, [*base, "run", "examples.memory_agent:remember", "--goal", "remember deploys", "--json"]
    )
    assert first.exit_code == 0, first.output
    second = runner.invoke(
        app, [*base, "run", "examples.memory_agent:recall", "--goal", "When do deploys happen?", "--json"]
    )
    assert second.exit_code == 0, second.output
    result = json.loads(second.stdout)
    assert FACT in result["final_message"]
    shown = runner.invoke(app, [*base, "show", result["session_id"]])
    assert "memory_queried" in shown.output and "memory_retrieval_result" in shown.output
    written = runner.invoke(app, [*base, "show", json.loads(first.stdout)["session_id"]])
    assert "memory_written" in written.output
    checked = runner.invoke(app, [*base, "replay", result["session_id"], "--check"])
    assert checked.exit_code == 0, checked.output
    assert "[MEMORY record_id=" in runner.invoke(app, [*base, "replay", result["session_id"]]).output


AGENT_TOML = """
name = "ops-recall"
route = ["flightlog.cli.demo_memory:recall_model"]
max_tokens = 200

[memory]
scope = "demo/ops-assistant"
inject = 2
top_k = 4
trust = "user_asserted"
"""


def test_agent_toml_memory_table(tmp_path: Path, store: SqliteStore, db_path: Path) -> None:
    from flightlog.kernel import load_agent
    from flightlog.kernel.errors import AgentSpecError

    spec = tmp_path / "agent.toml"
    spec.write_text(AGENT_TOML, encoding="utf-8")
    agent = load_agent(str(spec))
    assert agent.memory == MemoryPolicy(
        scope=SCOPE, inject=2, top_k=4, trust=ev.MemoryTrustLevel.USER_ASSERTED
    )
    assert [t.name for t in agent.tools] == ["memory_write", "memory_query"]
    remember(store, scope=SCOPE, kind=ev.MemoryKind.PROJECT, name="deploy-day", content=FACT)
    ran = runner.invoke(
        app, ["--db", str(db_path), "run", str(spec), "--goal", "When do deploys happen?", "--json"]
    )
    assert ran.exit_code == 0, ran.output
    assert FACT in json.loads(ran.stdout)["final_message"]
    for bad, reason in [
        ('scope = "nope"', "TENANT/NAMESPACE"),
        ('scope = "a/b"\ninjekt = 1', "unknown keys in [memory]: injekt"),
        ('scope = "a/b"\ninject = "3"', "inject must be an integer"),
        ('scope = "a/b"\nservice = "flightlog.cli.demo_memory:FACT"', "is not a MemoryService"),
    ]:
        spec.write_text(AGENT_TOML.split("[memory]")[0] + "[memory]\n" + bad + "\n", encoding="utf-8")
        with pytest.raises(AgentSpecError, match=re.escape(reason)):
            load_agent(str(spec))


def test_async_retrieval_does_not_inject_a_memory_already_in_the_history(
    store: SqliteStore, tmp_path: Path
) -> None:
    """As the in-store memory_query: a hit the service returns for a memory injected at run start (same
    record id, kind and text) is left out of memory_retrieval_result and its text is not stored again."""
    Kernel(store, remember_agent(), notary=None).run_sync("remember deploys", handle_signals=False)
    service = SpoolMemoryService(tmp_path / "spool")
    policy = MemoryPolicy(scope=SCOPE, inject=3, service=service)
    agent, _model = _agent(
        calls(call("memory_query", {"query": "deploy day"}, id="q1")), reply("ok"), policy=policy
    )
    result = Kernel(store, agent, notary=None).run_sync("When do deploys happen?", handle_signals=False)
    assert (result.status, result.detail) == ("suspended", MEMORY_SUSPENSION)
    (injected,) = of(store, result.session_id, ev.MemoryRetrievalResult)[0].hits
    (query_id,) = [qid for qid, _q in service.pending()]
    again = injected.model_copy(update={"record": injected.record.model_copy(update={"content": FACT})})
    december = {"record_id": "svc-2", "name": "freeze", "content": "Deploys freeze in December."}
    other = again.model_copy(update={"record": again.record.model_copy(update=december)})
    service.answer(query_id, [again, other])
    done = Kernel(store, agent, notary=None).resume_sync(result.session_id, handle_signals=False)
    assert done.status == "completed"
    *_, arrived = of(store, result.session_id, ev.MemoryRetrievalResult)
    assert [h.record.record_id for h in arrived.hits] == ["svc-2"]  # the injected one is not repeated
    ledger = events(store, result.session_id)
    note = ledger[ledger.index(arrived) + 1]
    assert note == ev.Custom(
        custom_kind=MEMORY_ALREADY_IN_HISTORY, payload={"turn": 1, "record_ids": [injected.record.record_id]}
    )
    memories = [
        t for t in (m.text_content() for m in replay_session(store, result.session_id)) if "[MEMORY" in t
    ]
    assert [t.split("] ", 1)[1] for t in memories] == [FACT, "Deploys freeze in December."]


def _service_hit(record_id: str, kind: str = "user", content: str = "text") -> ev.MemoryRecall:
    return ev.MemoryRecall.model_validate(
        {
            "record": {
                "record_id": record_id,
                "scope": SCOPE.to_wire(),
                "name": record_id,
                "kind": kind,
                "content": content,
                "description": "d",
                "provenance": {"author": "host", "trust": "untrusted"},
                "created_at": 1,
                "updated_at": 1,
                "confidence": 0.9,
            },
            "score": 0.5,
            "why": "w",
        }
    )


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        ([_service_hit(f"r{i}") for i in range(3)], "answered 3 hits; the query asked for at most 2"),
        (
            [_service_hit("r0"), _service_hit("r1", "project")],
            "r1 is of kind 'project'; the query asked for user",
        ),
        ([_service_hit("r0", content="Z" * 10_001)], "r0 content is 10001 bytes; at most 10000"),
    ],
)
def test_an_async_answer_outside_the_query_is_rejected_whole_and_the_run_stays_suspended(
    store: SqliteStore, tmp_path: Path, answer: list[ev.MemoryRecall], error: str
) -> None:
    """Upstream's validate_hits (UPSTREAM.md §8): at most requested_k hits, kinds among those asked for; and
    the write-side content bound. One bad hit rejects the answer: nothing is recorded, the run still waits,
    and once the service answers within the query the same resume goes on (found by the runtime attack pass,
    ``memory_service.py``: 12 hits of another kind, one of 50 KB, were all recorded and injected)."""
    service = SpoolMemoryService(tmp_path / "spool")
    query = {"query": "sky", "top_k": 2, "kinds": ["user"]}
    agent, _model = _agent(
        calls(call("memory_query", query, id="q1")),
        reply("ok"),
        policy=MemoryPolicy(scope=SCOPE, service=service),
    )
    result = Kernel(store, agent, notary=None).run_sync("recall", handle_signals=False)
    (query_id,) = [qid for qid, _q in service.pending()]
    before = len(events(store, result.session_id))
    service.answer(query_id, answer)

    with pytest.raises(KernelError, match=re.escape(error)):
        Kernel(store, agent, notary=None).resume_sync(result.session_id, handle_signals=False)
    assert len(events(store, result.session_id)) == before
    assert store.get_session(result.session_id).status == "suspended"

    service.answer(query_id, [_service_hit("r0"), _service_hit("r1", content="Z" * 10_000)])
    done = Kernel(store, agent, notary=None).resume_sync(result.session_id, handle_signals=False)
    assert done.status == "completed"
    (arrived,) = of(store, result.session_id, ev.MemoryRetrievalResult)
    assert [h.record.record_id for h in arrived.hits] == ["r0", "r1"]


def test_a_run_waiting_for_the_memory_service_says_so_in_runs_and_pending(
    store: SqliteStore, db_path: Path, tmp_path: Path
) -> None:
    """A run suspended on ``memory_retrieval`` showed as ``waiting_input`` with an empty detail and
    ``pending`` listed nothing (runtime attack pass, ``odd_states.py``): both now name the query and what
    the user can do (resume once the service answers)."""
    service = SpoolMemoryService(tmp_path / "spool")
    agent, _model = _agent(
        calls(call("memory_query", {"query": "sky"}, id="q1")),
        reply("ok"),
        policy=MemoryPolicy(scope=SCOPE, service=service),
    )
    sid = Kernel(store, agent, notary=None).run_sync("recall", handle_signals=False).session_id
    (query_id,) = [qid for qid, _q in service.pending()]

    listed = runner.invoke(app, ["--db", str(db_path), "runs"])
    assert listed.exit_code == 0, listed.output
    (line,) = [row for row in listed.output.splitlines() if row.startswith(sid)]
    assert "waiting_input" in line and f"waiting for memory retrieval {query_id}" in line
    waiting = runner.invoke(app, ["--db", str(db_path), "pending"])
    assert waiting.exit_code == 0 and "nothing is waiting" not in waiting.output
    assert f"{sid}  turn 1  {query_id}  memory_query  [memory_retrieval]" in waiting.output
    assert f"flightlog resume {sid}" in waiting.output
    as_json = json.loads(runner.invoke(app, ["--db", str(db_path), "pending", "--json"]).output)
    assert [(r["session_id"], r["call_id"], r["kind"]) for r in as_json] == [
        (sid, query_id, "memory_retrieval")
    ]

    service.answer(query_id, [])
    assert Kernel(store, agent, notary=None).resume_sync(sid, handle_signals=False).status == "completed"
    assert "nothing is waiting" in runner.invoke(app, ["--db", str(db_path), "pending"]).output


# ─── a recall's why: the number said, and which way is better ─────────────────────────────────


def test_why_names_the_relevance_without_a_negative_zero() -> None:
    """FTS5's ``bm25()`` of a weak match over a small index is a tiny negative number: ``{:.4f}`` printed
    ``fts5 bm25 -0.0000``, a negative zero that said neither the value nor which way is better."""
    from flightlog.kernel.memory_bank import why_text

    assert why_text(True, -1.6923e-06, ["deploy"]) == (
        "fts5 bm25 relevance 1.692e-06 (-bm25(), higher matches better) over: deploy"
    )
    assert (
        why_text(True, -0.0, ["a", "b"])
        == "fts5 bm25 relevance 0 (-bm25(), higher matches better) over: a, b"
    )
    assert why_text(True, -2.5, ["x"]).startswith("fts5 bm25 relevance 2.5 (")
    assert why_text(False, 0.06079, ["x"]) == "ts_rank relevance 0.06079 (higher matches better) over: x"


def test_a_recall_over_a_small_index_says_its_relevance(store: SqliteStore) -> None:
    remember(
        store,
        scope=SCOPE,
        kind=ev.MemoryKind.PROJECT,
        name="deploy-day",
        content=FACT,
        description="deploy day",
    )
    (hit,) = recall(store, SCOPE, "When do deploys happen?")
    assert re.fullmatch(
        r"fts5 bm25 relevance \d[\d.e+-]* \(-bm25\(\), higher matches better\) over: when, do, deploys, happen",
        hit.why,
    ), hit.why
    assert "-0.0" not in hit.why


def test_a_run_recorded_with_the_old_why_still_replays_exactly(
    store: SqliteStore, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only new recalls change: a run whose recall recorded the old wording keeps it (stored bytes), and
    ``replay --check`` still rebuilds every request it made (nothing recomputes a recorded ``why``)."""
    from flightlog.kernel import memory_bank

    Kernel(store, remember_agent(), notary=None).run_sync("remember deploys", handle_signals=False)
    old = "fts5 bm25 -0.0000 over: when, do, deploys, happen"
    with monkeypatch.context() as patch:
        patch.setattr(memory_bank, "why_text", lambda sqlite, raw, words: old)
        second = Kernel(store, recall_agent(), notary=None).run_sync(
            "When do deploys happen?", handle_signals=False
        )
    recalled = [e for e in events(store, second.session_id) if isinstance(e, ev.MemoryRetrievalResult)]
    assert [h.why for e in recalled for h in e.hits] == [old]
    result = CliRunner().invoke(app, ["--db", str(db_path), "replay", second.session_id, "--check"])
    assert result.exit_code == 0 and "all reproduce" in result.stdout, result.stdout + result.stderr


def test_a_run_recorded_with_its_memory_query_after_the_tool_result_still_replays_exactly(
    store: SqliteStore, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs recorded before 2026-12-05 have ``memory_queried`` after the ``tool_completed`` it led to
    (reproduced here by staging the call's event with what the query brought back); they keep that order
    and still rebuild every request they made."""
    from flightlog.kernel import memory

    Kernel(store, remember_agent(), notary=None).run_sync("remember deploys", handle_signals=False)
    real = memory.turn_context

    def old_order(activation: Any) -> memory.MemoryContext | None:
        context = real(activation)
        if context is not None:
            context.record = context.events.append
        return context

    with monkeypatch.context() as patch:
        patch.setattr(memory, "turn_context", old_order)
        old = Kernel(store, recall_agent(), notary=None).run_sync(
            "When do deploys happen?", handle_signals=False
        )
    ledger = events(store, old.session_id)
    (queried,) = [e for e in ledger if isinstance(e, ev.MemoryQueried) and e.turn == 1]
    assert isinstance(ledger[ledger.index(queried) - 2], ev.ToolCompleted)  # the old order
    result = CliRunner().invoke(app, ["--db", str(db_path), "replay", old.session_id, "--check"])
    assert result.exit_code == 0 and "all reproduce" in result.stdout, result.stdout + result.stderr
