"""``runs`` and ``tail`` through typer's CliRunner, and ``tail -f`` against a real writer process."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flightlog.cli import app as flightlog_app
from flightlog.errors import SessionNotFound
from flightlog.importers import import_file
from flightlog.live import LiveRegistry
from flightlog.runs import AgentRunSnapshot, list_runs
from flightlog.store import SqliteStore

from .cli_app import make_app
from .conftest import checkpoint, gated, llm, record, requested, started, suspended

HERE = Path(__file__).resolve().parent
SAMPLES = HERE.parent / "data" / "samples"
PARENT = "claude-code:491e126e-1e71-469c-ade2-fcc8af567c74"
CHILD = PARENT + ":agent:afb92ff"

runner = CliRunner()


@pytest.fixture
def imported(db_path: Path) -> Path:
    with SqliteStore(db_path) as store:
        for path in sorted(SAMPLES.glob("claude-code/*.jsonl")):
            import_file(store, path, seal=True)
        record(store, "kernel-1", [started(), checkpoint()], source="kernel")
    return db_path


def run(db_path: Path, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(make_app(db_path), list(args))
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def test_runs_json_is_the_seed_wire_format(imported: Path) -> None:
    code, out, err = run(imported, "runs", "--json")
    assert code == 0 and err == ""
    items = json.loads(out)
    with SqliteStore(imported, read_only=True) as store:
        assert [AgentRunSnapshot.model_validate(item) for item in items] == list_runs(store)
    assert {item["run_id"] for item in items} >= {PARENT, CHILD, "kernel-1"}
    assert all("budget" in item for item in items)


def test_runs_filters(imported: Path) -> None:
    code, out, _ = run(imported, "runs", "--json", "--parent", PARENT)
    assert code == 0 and [item["run_id"] for item in json.loads(out)] == [CHILD]
    code, out, _ = run(imported, "runs", "--json", "--parent", PARENT.split(":")[1])  # id after the format
    assert [item["run_id"] for item in json.loads(out)] == [CHILD]
    code, out, _ = run(imported, "runs", "--json", "--state", "waiting_model")
    assert [item["run_id"] for item in json.loads(out)] == ["kernel-1"]
    code, out, _ = run(imported, "runs", "--json", "--source", "fleet")
    assert json.loads(out) == []
    code, out, _ = run(imported, "runs", "--json", "--limit", "2")
    assert len(json.loads(out)) == 2
    code, out, _ = run(imported, "runs", "--limit", "1")
    assert len(out.splitlines()) == 2  # header + one run


def test_runs_parent_prefix_must_be_unique(imported: Path) -> None:
    # the parent's prefix matches its sub-agent too, which is its own stream: the prefix names the parent
    code, out, _ = run(imported, "runs", "--json", "--parent", "claude-code:491e126e")
    assert code == 0 and [r["run_id"] for r in json.loads(out)] == [CHILD]
    with pytest.raises(SessionNotFound):
        run(imported, "runs", "--parent", "claude-code:")  # several sessions
    code, out, _ = run(imported, "runs", "--json", "--parent", "ghost-agent")  # not a session: kept as is
    assert code == 0 and json.loads(out) == []


@pytest.mark.parametrize(("option", "value"), [("--state", "sleeping"), ("--source", "cron")])
def test_runs_rejects_unknown_values(imported: Path, option: str, value: str) -> None:
    code, _, err = run(imported, "runs", option, value)
    assert code == 2 and value in err


def test_runs_table_and_tree(imported: Path) -> None:
    code, out, _ = run(imported, "runs")
    assert code == 0
    assert "kernel-1" in out and "waiting_model" in out and "abandoned" not in out
    assert "cancelled" in out and CHILD in out
    code, out, _ = run(imported, "runs", "--tree")
    assert code == 0
    lines = out.splitlines()
    parent_line = next(i for i, line in enumerate(lines) if PARENT in line and CHILD not in line)
    child_line = next(i for i, line in enumerate(lines) if CHILD in line)
    assert child_line == parent_line + 1
    assert lines[child_line].index(CHILD) > lines[parent_line].index(PARENT)  # indented under it


def test_a_child_whose_parent_is_not_listed_is_drawn_under_a_marker_naming_it(imported: Path) -> None:
    code, out, _ = run(imported, "runs", "--tree", "--parent", PARENT)  # the children only
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"(parent {PARENT} not listed)"
    assert lines[1].startswith("└── " + CHILD)  # under the marker, not a root
    code, out, _ = run(imported, "runs", "--json", "--parent", PARENT)
    assert [item["parent"] for item in json.loads(out)] == [PARENT]  # --json carries it as it is


def test_runs_abandoned_and_live(imported: Path) -> None:
    code, out, _ = run(imported, "runs", "--abandoned", "--lease", "0", "--json")
    assert code == 0 and [item["run_id"] for item in json.loads(out)] == ["kernel-1"]
    code, out, _ = run(imported, "runs", "--abandoned", "--lease", "0")
    assert "abandoned" in out
    with SqliteStore(imported) as store:
        LiveRegistry(store).publish("kernel-1", "waiting_tool", tokens_used=7)
    code, out, _ = run(imported, "runs", "--json", "--state", "waiting_tool")
    assert [(i["run_id"], i["budget"]["tokens_used"]) for i in json.loads(out)] == [("kernel-1", 7)]
    code, out, _ = run(imported, "runs")
    assert "live (" in out


def test_ls_and_show_say_when_they_fold_the_ledgers_for_a_stale_projection(imported: Path) -> None:
    """After a fold-version upgrade the projection is stale and the abandoned-run hints fold every ledger
    (minutes at 100,000 runs): ``ls`` and ``show`` say so once, naming the rebuild, as ``runs`` does."""
    note = "flightlog: note: runs projection missing or stale; folding the ledgers (try `flightlog runs --rebuild`)"

    def cli(*args: str) -> tuple[int, str, str]:
        result = runner.invoke(flightlog_app, ["--db", str(imported), *args])
        return result.exit_code, result.stdout, result.stderr

    code, _, err = cli("ls")
    assert code == 0 and "projection" not in err
    with SqliteStore(imported) as store:
        store.set_run_projection_version(0)
    for command in (["ls"], ["show", "kernel-1"], ["runs"]):
        code, out, err = cli(*command)
        assert code == 0 and out, (command, err)
        assert " ".join(err.split()).count(note) == 1, (command, err)
    assert cli("runs", "--rebuild")[0] == 0
    code, _, err = cli("ls")
    assert code == 0 and "projection" not in err


def test_runs_rebuild_and_stale_note(imported: Path) -> None:
    with SqliteStore(imported) as store:
        store.set_run_projection_version(0)
    code, out, err = run(imported, "runs", "--json")
    # 4 Claude Code files, one sub-agent, one background shell task (source task), the kernel run
    assert code == 0 and "stale" in err and len(json.loads(out)) == 7
    code, out, err = run(imported, "runs", "--rebuild", "--json")
    assert code == 0 and "rebuilt the runs projection from 7 session ledger(s)" in err
    assert "stale" not in err


@pytest.mark.parametrize("json_out", [False, True])
def test_runs_rebuild_of_a_tampered_session_warns_and_exits_1(imported: Path, json_out: bool) -> None:
    """`runs --rebuild` folds what is stored; a session whose bytes were edited is listed, then named in one
    warning with its first divergent seq, exit 1 (as show/replay/export; it exited 0 silently)."""
    import sqlite3

    raw = sqlite3.connect(imported)
    raw.execute("DROP TRIGGER IF EXISTS events_no_update")
    raw.execute(
        "UPDATE events SET event = CAST(REPLACE(CAST(event AS TEXT), 'do the thing', 'do the THING') AS BLOB) "
        "WHERE session_id = 'kernel-1' AND seq = 0"
    )
    assert raw.total_changes == 1
    raw.commit()
    raw.close()
    code, out, err = run(imported, "runs", "--rebuild", *(["--json"] if json_out else []))
    warnings = [line for line in err.splitlines() if line.startswith("flightlog: warning:")]
    assert code == 1 and len(warnings) == 1, err
    assert "kernel-1 fails verification at seq 0 (hash_mismatch)" in warnings[0]
    assert "rebuilt the runs projection from 7 session ledger(s)" in err
    listed = [i["run_id"] for i in json.loads(out)] if json_out else out
    assert "kernel-1" in listed  # still listed, as stored: the warning says it is not what was recorded
    assert run(imported, "runs")[0] == 0  # without --rebuild nothing is folded again: no full check


def test_runs_on_an_empty_database(db_path: Path) -> None:
    SqliteStore(db_path).close()
    assert run(db_path, "runs")[1].strip() == "(no runs)"
    assert run(db_path, "runs", "--tree")[1].strip() == "(no runs)"
    assert run(db_path, "runs", "--json")[1].strip() == "[]"


def test_tail_prints_narrated_lines_and_json(imported: Path) -> None:
    code, out, _ = run(imported, "tail", "kernel-1")
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 2 and "run_started" in lines[0] and "run kernel-1 started: do the thing" in lines[0]
    code, out, _ = run(imported, "tail", "kernel-1", "--json")
    first = json.loads(out.splitlines()[0])
    assert first["seq"] == 0 and first["kind"] == "run_started" and first["event"]["goal"] == "do the thing"
    assert first["text"].startswith("run kernel-1 started")  # the session id, as the text line
    code, out, _ = run(imported, "tail", PARENT, "-f")  # imported: already ended, -f returns
    assert code == 0 and out.splitlines()[-1].split()[2] == "run_terminal"


# ─── tail -f from another process than the writer ─────────────────────────────────────────────

WRITER = """
import sys, time
from pathlib import Path
import flightlog.runs
from flightlog.events import LlmCompleted, RunTerminal, ToolCompleted, ToolRequested
from flightlog.messages import Message, ToolCall, ToolResult
from flightlog.recorder import Recorder
from flightlog.store import SqliteStore

db, go = Path(sys.argv[1]), Path(sys.argv[2])
while not go.exists():
    time.sleep(0.01)
with SqliteStore(db) as store:
    recorder = Recorder.attach(store, "live-1")
    recorder.append(LlmCompleted(turn=1, message=Message.text("assistant", "looking")))
    time.sleep(0.1)
    recorder.append(ToolRequested(turn=1, calls=[ToolCall(id="c1", name="grep", arguments="{}")]))
    time.sleep(0.1)
    recorder.append(ToolCompleted(turn=1, results=[ToolResult(call_id="c1", output="3 matches")]))
    time.sleep(0.1)
    recorder.append(RunTerminal(reason="completed", turns_used=1, total_tokens=120))
"""


def _reader(stream: object, lines: queue.Queue[str]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        lines.put(line)
    lines.put("")


def test_tail_follows_a_writer_in_another_process(db_path: Path, tmp_path: Path) -> None:
    with SqliteStore(db_path) as store:
        record(store, "live-1", [started()], source="kernel")
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    tail = subprocess.Popen(
        [
            sys.executable,
            str(HERE / "cli_app.py"),
            str(db_path),
            "tail",
            "live-1",
            "-f",
            "--interval",
            "0.02",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    writer = None
    try:
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=_reader, args=(tail.stdout, lines), daemon=True).start()
        assert "run_started" in lines.get(timeout=30)  # tail is following before anything new exists
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(db_path), str(go)], env=env)
        go.touch()
        seen = [lines.get(timeout=30) for _ in range(4)]
        assert [line.split()[2] for line in seen] == [
            "llm_completed",
            "tool_requested",
            "tool_completed",
            "run_terminal",
        ]
        assert "model replied: looking" in seen[0] and "3 matches" in seen[2]
        assert tail.wait(timeout=30) == 0  # stopped by itself at run_terminal
        assert writer.wait(timeout=30) == 0
        assert lines.get(timeout=30) == ""
    finally:
        for process in (tail, writer):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
        if tail.stdout is not None:
            tail.stdout.close()
        if tail.stderr is not None:
            tail.stderr.close()


def test_a_parents_tree_line_shows_what_its_sub_agents_spent_of_its_budget() -> None:
    """Parent 30 + child 30 of the parent's 50-token budget showed as ``tokens 30/50`` (runtime attack pass,
    ``budget_display.py 50``): ``run_terminal.total_tokens`` is the run's own count (seed 000 gives the field
    no other meaning), so the tree line adds the listed sub-agents' and says the overshoot."""
    from flightlog.cli.runs import _tokens_cell

    assert _tokens_cell(30, 50, None) == "tokens 30/50"
    assert _tokens_cell(30, 50, 60) == "tokens 30/50 (with sub-agents 60/50, 10 over)"
    assert _tokens_cell(30, 100, 60) == "tokens 30/100 (with sub-agents 60/100)"
    # no limit reads "(no limit)", as the dashboard's tables and tree show it
    assert _tokens_cell(30, None, None) == "tokens 30 (no limit)"
    assert _tokens_cell(30, None, 60) == "tokens 30 (no limit; with sub-agents 60)"
    assert _tokens_cell(None, None, None) == "tokens - (no limit)"


def _cells(out: str, run_id: str) -> list[str]:
    """The ``runs`` table's cells of ``run_id``'s row (columns are two or more spaces apart)."""
    import re

    rows = [line for line in out.splitlines() if line.startswith(run_id + " ")]
    assert len(rows) == 1, out
    return re.split(r"\s{2,}", rows[0])


def test_the_state_column_says_a_run_is_abandoned_as_the_dashboard_does(imported: Path) -> None:
    """The dashboard's session page and runs list read ``waiting_model (abandoned)`` for a run whose holder
    is gone; ``runs`` and ``runs --tree`` say the same in their state, not only in the live column."""
    code, out, _ = run(imported, "runs", "--lease", "0")  # kernel-1: no heartbeat within a lease of 0 s
    assert code == 0
    cells = _cells(out, "kernel-1")
    assert cells[1] == "waiting_model (abandoned)" and cells[-1].startswith("abandoned (last seen "), cells
    code, out, _ = run(imported, "runs", "--tree", "--lease", "0")
    assert code == 0 and "kernel-1  waiting_model (abandoned)  tokens" in out, out
    with SqliteStore(imported) as store:
        LiveRegistry(store).publish("kernel-1", "waiting_model")  # a holder again: not abandoned
    assert _cells(run(imported, "runs")[1], "kernel-1")[1] == "waiting_model"


def test_the_tree_says_what_a_waiting_run_waits_for_as_the_table_does(db_path: Path) -> None:
    with SqliteStore(db_path) as store:
        events = [
            started(),
            checkpoint(),
            llm(1, "c1"),
            requested("c1"),
            gated("c1"),
            suspended("approval", "c1"),
        ]
        record(store, "gated-1", events, source="kernel")
    wait = "waiting for a decision on c1 (flightlog pending)"
    code, out, _ = run(db_path, "runs")
    assert code == 0 and _cells(out, "gated-1")[-1] == wait, out
    code, out, _ = run(db_path, "runs", "--tree")
    assert code == 0 and out.splitlines() == [
        f"gated-1  waiting_input  tokens - (no limit)  steps 1 (no limit)  {wait}"
    ], out


def test_show_and_tail_shorten_the_session_id_of_a_run_line_to_a_prefix_that_pastes(imported: Path) -> None:
    """``show``'s header names the session whole; its timeline's ``run … started`` line, and ``tail``'s,
    the shortest prefix (at least 8 characters past ``claude-code:``) that names it, as git shortens a
    hash; a sub-agent's ``<id>:agent:<x>`` no prefix short of the parent's id names stays whole."""
    short = PARENT[: len("claude-code:") + 8]

    def show(*args: str) -> tuple[int, str]:
        result = runner.invoke(flightlog_app, ["--db", str(imported), "show", *args])
        return result.exit_code, result.stdout

    code, out = show(PARENT)
    assert code == 0 and out.splitlines()[0].startswith(f"session {PARENT}  ")
    assert f"run {short} started: " in out and f"run {PARENT} started" not in out, out
    code, tailed, _ = run(imported, "tail", PARENT)
    assert code == 0 and f"run {short} started: " in tailed, tailed
    code, again = show(short)  # it pastes
    assert code == 0 and again == out
    code, out = show(CHILD)
    assert code == 0 and f"run {CHILD} started: " in out, out
    code, out = show(PARENT, "--json")  # --json keeps the events as stored
    assert code == 0 and "started: " not in out
