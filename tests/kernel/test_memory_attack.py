"""Adversarial memory writes and searches (the attack pass on long-term memory)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flightlog import events as ev
from flightlog.cli import app
from flightlog.cli.demo_memory import FACT, SCOPE
from flightlog.kernel import Agent, Kernel
from flightlog.kernel.memory import MemoryPolicy
from flightlog.kernel.memory_bank import remember
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.store import SqliteStore

from .helpers import of, run

runner = CliRunner()


def test_a_huge_description_is_refused_not_copied_into_every_recall(store: SqliteStore) -> None:
    description = "d" * 1_001  # one byte over; before the bound, 2 MB went into each memory_retrieval_result
    model = ScriptedProvider(
        [
            calls(call("memory_write", {"name": "n", "content": "x", "description": description}, id="w")),
            reply("ok"),
        ],
        by_turn=True,
    )
    agent = Agent(name="mem", route=[model], memory=MemoryPolicy(scope=SCOPE), max_tokens=200)
    result = run(Kernel(store, agent, notary=None).run("write"))
    assert of(store, result.session_id, ev.MemoryValidationFailed) == [
        ev.MemoryValidationFailed(turn=1, record_id="n", error="memory description exceeds 1000 bytes")
    ]
    assert store.memory.rows() == []
    assert MemoryPolicy.from_dict({"scope": "a/b", "max_description_bytes": 5}).max_description_bytes == 5


@pytest.mark.parametrize(
    "query",
    [
        '"',
        "deploys NEAR(x y)",
        "*",
        "(((",
        "a AND",
        "thursday*",
        "'; DROP TABLE memories;--",
        "^deploys",
        "-",
    ],
)
def test_fts5_syntax_in_a_search_is_words_not_a_query_error(
    store: SqliteStore, db_path: Path, query: str
) -> None:
    remember(store, scope=SCOPE, kind=ev.MemoryKind.PROJECT, name="deploy-day", content=FACT)
    found = runner.invoke(app, ["--db", str(db_path), "memory", "search", query, "--json"])
    assert found.exit_code == 0, found.output
    names = [hit["record"]["name"] for hit in json.loads(found.stdout)]
    assert names == (["deploy-day"] if "deploys" in query or "thursday" in query else [])  # porter stems
    assert len(store.memory.rows()) == 1
