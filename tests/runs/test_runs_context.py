"""Context use (fill / window) of a run: folded from the ledger's request records, shown by ``runs``."""

from __future__ import annotations

import dataclasses
import json
import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flightlog import events as ev
from flightlog.kernel import Agent, Kernel, tool
from flightlog.kernel.context import ContextPolicy, ContextWindow
from flightlog.kernel.scripted import StepProvider
from flightlog.recorder import Recorder
from flightlog.runs import projection_ready, rebuild_projection
from flightlog.runs.context import ContextUse
from flightlog.runs.projection import context_uses
from flightlog.store import SqliteStore

from .cli_app import make_app
from .conftest import checkpoint, process, record, started, terminal

runner = CliRunner()
WINDOW, MAX_TOKENS = 4000, 200


@tool(effect="read_only")
def work(step: int) -> str:
    """Do one step.

    Args:
        step: The step number.
    """
    return f"step {step} done"


def step_agent(steps: int) -> Agent:
    provider = StepProvider(steps, window=WINDOW)
    context = ContextPolicy(windows={provider.model: ContextWindow(WINDOW, MAX_TOKENS)})
    return Agent(name="steps", route=[provider], tools=[work], max_tokens=MAX_TOKENS, context=context)


def invoked(turn: int, fill: int, *, actor: str = "kernel", window: bool = True) -> ev.Custom:
    context: dict[str, Any] = {"fill_tokens": fill, "basis": "reported+estimate"}
    if window:
        context.update(tokens=4000, output_reserve=200, fill_ratio=round(fill / 3800, 4))
    payload = {"actor": actor, "turn": turn, "model": "m-1", "context": context}
    return ev.Custom(custom_kind="prompt_program_invoked", payload=payload)


def test_the_latest_kernel_call_gives_the_context_use_and_summary_calls_do_not(store: SqliteStore) -> None:
    record(
        store,
        "k-1",
        [started(), checkpoint(1), invoked(1, 900), invoked(2, 3000), invoked(2, 50_000, actor="compactor")],
    )
    record(store, "k-2", [started(), invoked(1, 1234, window=False)])
    record(store, "plain", [started(), checkpoint(1)])
    uses = context_uses(store, ["k-1", "k-2", "plain", "no-such-run"])
    assert uses == {
        "k-1": ContextUse(2, 3000, "reported+estimate", 4000, 200, "m-1"),
        "k-2": ContextUse(1, 1234, "reported+estimate", None, None, "m-1"),
    }
    assert uses["k-1"].usable_tokens == 3800 and uses["k-1"].label() == "3,000/3,800 (79%)"
    assert uses["k-2"].ratio is None and uses["k-2"].label() == "1,234 tok"  # no window: no ratio invented


def test_a_new_run_in_the_session_forgets_the_previous_runs_fill(store: SqliteStore) -> None:
    record(
        store,
        "k",
        [
            started("a"),
            invoked(1, 900),
            ev.RunTerminal(reason="completed", turns_used=1, total_tokens=9),
            started("b"),
        ],
    )
    assert context_uses(store, ["k"]) == {}


def test_malformed_records_count_as_unknown() -> None:
    assert ContextUse.from_invoked({"actor": "kernel", "turn": 1, "context": {"fill_tokens": -3}}) is None
    assert ContextUse.from_invoked({"turn": 1, "context": {"fill_tokens": True, "basis": "x"}}) is None
    assert ContextUse.from_invoked({"turn": 1, "context": "full"}) is None
    odd = {"turn": 1, "context": {"fill_tokens": 5, "basis": "estimate", "tokens": 10, "output_reserve": 10}}
    assert ContextUse.from_invoked(odd) == ContextUse(1, 5, "estimate")


def test_the_projection_and_the_ledger_fold_agree(store: SqliteStore) -> None:
    record(store, "k-1", [started(), invoked(1, 900)])
    from_rows = context_uses(store, ["k-1"])
    store.set_run_projection_version(0)  # stale: fold the ledgers instead
    assert context_uses(store, ["k-1"]) == from_rows
    rebuild_projection(store)
    assert context_uses(store, ["k-1"]) == from_rows


def test_a_row_folded_before_context_use_existed_is_refolded_on_the_next_append(store: SqliteStore) -> None:
    recorder = record(store, "k-1", [started(), invoked(1, 900)])
    row = store.get_run_rows(["k-1"])["k-1"]
    fold = json.loads(row.fold)
    del fold["session"]["context"]  # what a row written before context use was folded holds:
    fold["v"] = 4  # a row of an earlier fold version (version 5 leaves a None context out)
    store.put_run_rows([dataclasses.replace(row, fold=json.dumps(fold))])
    assert context_uses(store, ["k-1"]) == {}  # unknown, not guessed
    recorder.append(checkpoint(2))  # the stored row is not the one this recorder wrote: general path
    assert context_uses(store, ["k-1"]) == {"k-1": ContextUse(1, 900, "reported+estimate", 4000, 200, "m-1")}


def test_runs_shows_the_context_use_of_a_kernel_run(db_path: Path) -> None:
    with SqliteStore(db_path) as store:
        result = Kernel(store, step_agent(12), notary=None).run_sync("do all the steps")
        assert result.status == "completed"
        (use,) = context_uses(store, [result.session_id]).values()
        record(store, "plain", [started(), checkpoint(1)])
    assert (use.window_tokens, use.output_reserve) == (WINDOW, MAX_TOKENS)
    assert use.turn == 13 and use.basis == "reported+estimate"
    out = runner.invoke(make_app(db_path), ["runs"])
    assert out.exit_code == 0, out.stderr
    header, *lines = out.stdout.splitlines()
    assert "context" in header.split()
    (kernel_line,) = [line for line in lines if line.startswith(result.session_id)]
    assert use.label().split(" ")[0] in kernel_line and use.label().split(" ")[1] in kernel_line
    (plain_line,) = [line for line in lines if line.startswith("plain")]
    assert " - " in plain_line  # nothing recorded: nothing shown
    tree = runner.invoke(make_app(db_path), ["runs", "--tree"])
    assert f"context {use.label()}" in tree.stdout
    as_json = runner.invoke(make_app(db_path), ["runs", "--json"])
    assert "context" not in json.loads(as_json.stdout)[0]  # the seed 002 wire form is unchanged


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        ('replace(fold, \'"state":"completed"\', \'"state":123\')', "process entry field 'state' holds 123"),
        ("'not json'", "Expecting value"),
        ("'[1]'", "a list, not a JSON object"),
        # the session fold's members are checked too: each of these was read as it stood and folded on
        (
            'replace(fold, \'"phase":"open"\', \'"phase":"opened"\')',
            "session fold field 'phase' holds 'opened'",
        ),
        (
            "replace(fold, '\"last_seq\":1', '\"last_seq\":true')",
            "session fold field 'last_seq' holds True (bool)",
        ),
        ('replace(fold, \'"turn":1,\', \'"turn":"1",\')', "session fold field 'context' holds {"),
    ],
)
def test_a_row_edited_in_sql_that_does_not_decode_is_named_and_read_from_its_ledger(
    db_path: Path, caplog: pytest.LogCaptureFixture, edit: str, why: str
) -> None:
    with SqliteStore(db_path) as store:
        record(store, "p", [started("p"), process("k", "completed", parent="p"), terminal()])
        record(store, "k", [started("k"), invoked(1, 900)])
        expected = {"k": ContextUse(1, 900, "reported+estimate", 4000, 200, "m-1")}
        assert context_uses(store, ["k", "p"]) == expected
    with sqlite3.connect(db_path) as raw:  # a raw write to the unhashed projection
        raw.execute(f"UPDATE runs SET fold = {edit} WHERE run_id = 'k'")
    raw.close()
    with SqliteStore(db_path) as store:
        assert projection_ready(store)
        with caplog.at_level(logging.WARNING, logger="flightlog.runs"):
            assert context_uses(store, ["k", "p"]) == expected  # the ledger's, not a crash
        (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert warning.startswith("runs row 'k': its fold text does not decode (") and why in warning
        for args in (["runs"], ["runs", "--tree"], ["runs", "--json"]):
            out = runner.invoke(make_app(db_path), args)
            assert out.exit_code == 0, (args, out.stderr, out.exception)
            assert "k" in out.stdout.split() or '"run_id":"k"' in out.stdout.replace(" ", "")
        caplog.clear()
        with caplog.at_level(logging.ERROR, logger="flightlog.runs"):
            Recorder.attach(store, "k").append(
                checkpoint(2)
            )  # the projector reads the row: it fails, the append does not
        assert store.get_session("k").head_seq == 2
        assert any("runs row 'k'" in (r.exc_text or "") or "for k" in r.getMessage() for r in caplog.records)
        assert not projection_ready(store)  # marked stale: readers fold the ledgers until --rebuild
        assert context_uses(store, ["k", "p"]) == expected
        assert runner.invoke(make_app(db_path), ["runs"]).exit_code == 0
        rebuild_projection(store)
        assert context_uses(store, ["k", "p"]) == expected
