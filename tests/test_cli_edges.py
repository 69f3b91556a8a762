"""Rough edges a new user hit (session 14's user pass), each through the command line a user types: one
word per state on every surface, what an unsealed import's ledger holds, a retired store said so, a repair
with nothing to do, and the rest."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from flightlog.cli import app

runner = CliRunner()
SAMPLES = Path(__file__).parent / "data" / "samples"
ABORTED = "claude-code:55604662-cf2a-4331-851a-ec234028f8ca"  # the user interrupted it: stored "aborted"


def invoke(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def _imported(tmp_path: Path, *names: str, seal: bool = True) -> Path:
    db = tmp_path / "s.db"
    paths = [str(SAMPLES / "claude-code" / name) for name in names]
    code, _out, err = invoke("--db", str(db), "import", *(["--seal"] if seal else []), *paths)
    assert code == 0, err
    return db


# ─── 1. one word for a run the user ended ─────────────────────────────────────────────────────


def test_a_run_the_user_ended_reads_cancelled_everywhere(tmp_path: Path) -> None:
    """The import stores Claude Code's "aborted" (session status and ``run_terminal.reason``); ``ls`` and
    ``show`` printed it while ``runs`` said "cancelled" (seed 002's ``TerminalOutcome``)."""
    db = _imported(tmp_path, "spotter_short.jsonl")
    code, out, err = invoke("--db", str(db), "ls")
    assert code == 0, err
    (row,) = [line for line in out.splitlines() if line.startswith(ABORTED)]
    assert row.split()[1] == "cancelled" and "aborted" not in out
    code, out, err = invoke("--db", str(db), "ls", "--json")
    (listed,) = json.loads(out)
    assert (listed["status"], listed["session_status"]) == ("cancelled", "aborted")  # the stored word kept
    for word in ("cancelled", "aborted"):  # either spelling filters
        code, out, err = invoke("--db", str(db), "ls", "--status", word, "--json")
        assert [r["session_id"] for r in json.loads(out)] == [ABORTED], err
    code, out, err = invoke("--db", str(db), "show", ABORTED)
    assert code == 0, err
    assert out.splitlines()[0].startswith(f"session {ABORTED}  [cancelled]")
    assert "run ended: cancelled after 1 step" in out and "aborted" not in out
    code, out, err = invoke("--db", str(db), "show", ABORTED, "--json")
    assert json.loads(out.splitlines()[-2])["event"]["reason"] == "aborted"  # the wire form is unchanged
    code, out, err = invoke("--db", str(db), "runs")
    assert code == 0, err
    (line,) = [line for line in out.splitlines() if line.startswith(ABORTED)]
    assert line.split()[1:3] == ["terminal", "cancelled"] and line.split()[-1] == "cancelled"
    code, out, err = invoke("--db", str(db), "verify", ABORTED)  # the seal's signed status, as a word
    assert code == 0 and "sealed (cancelled)" in out and "aborted" not in out, out + err


def test_the_word_map_leaves_other_words_alone() -> None:
    from flightlog.narration import state_word

    assert [
        state_word(w) for w in ("aborted", "canceled", "cancelled", "completed", "Aborted", "killed")
    ] == [
        "cancelled",
        "cancelled",
        "cancelled",
        "completed",
        "Aborted",
        "killed",
    ]
    assert state_word("incomplete") == "interrupted"  # an import's run with no end: the runs outcome


# ─── 2. an import whose ledger holds no end ───────────────────────────────────────────────────


def _status_lines(db: Path, sid: str) -> tuple[str, str, list[str]]:
    """(``ls`` status, ``show``'s bracketed status, ``runs`` cells) of one session."""
    code, out, err = invoke("--db", str(db), "ls", "--json")
    assert code == 0, err
    (listed,) = [r for r in json.loads(out) if r["session_id"] == sid]
    code, out, err = invoke("--db", str(db), "show", sid)
    assert code == 0, err
    shown = out.splitlines()[0].split("[", 1)[1].split("]", 1)[0]
    code, out, err = invoke("--db", str(db), "runs")
    (line,) = [line for line in out.splitlines() if line.startswith(sid + " ")]
    return listed["status"], shown, line.split()


def test_an_unsealed_import_says_its_last_run_is_open(tmp_path: Path) -> None:
    """The file shows its last run ended; that ``run_terminal`` waits for the source to end, so the ledger
    holds an open run: ``ls`` said "completed" (the file's end), now what the ledger holds."""
    sid = "claude-code:s1"
    db = _imported(tmp_path, "claudecodelog_dag_compact_after_rewind.jsonl", seal=False)
    code, out, _ = invoke("--db", str(db), "show", sid, "--json")
    kinds = [json.loads(line)["kind"] for line in out.splitlines()]
    assert kinds[-1] != "run_terminal" and "run_started" in kinds[kinds.index("run_terminal") :]
    ls_status, show_status, runs = _status_lines(db, sid)
    # one word: the outcome the runs read model gives an import that ended without an end (seed 002)
    assert (ls_status, show_status) == ("interrupted", "interrupted")
    assert (
        runs[1:3] == ["terminal", "interrupted"] and runs[-1] == "incomplete"
    )  # "session marked incomplete": the stored word, as the detail
    # the end recorded (the caller says the transcript is complete): every surface says completed
    code, _out, err = invoke(
        "--db",
        str(db),
        "import",
        "--seal",
        str(SAMPLES / "claude-code" / "claudecodelog_dag_compact_after_rewind.jsonl"),
    )
    assert code == 0, err
    ls_status, show_status, runs = _status_lines(db, sid)
    assert (ls_status, show_status) == ("completed", "completed")
    assert runs[1:3] == ["terminal", "completed"]


# ─── 3. a retired store says so ───────────────────────────────────────────────────────────────


def test_a_retired_store_says_where_the_ledger_went(tmp_path: Path) -> None:
    """The source of ``db copy`` listed as if live until a write was refused; now every read says it is
    a read-only copy and names the live store, and a write is refused naming it."""
    db = _imported(tmp_path, "spotter_short.jsonl")
    live = tmp_path / "live.db"
    code, _out, err = invoke("--db", str(db), "db", "copy", str(db), str(live))
    assert code == 0, err
    note = f"flightlog: note: this store was moved to {live} at "
    for args in (["ls"], ["runs"], ["show", ABORTED], ["verify", ABORTED]):
        code, out, err = invoke("--db", str(db), *args)
        assert code == 0 and err.startswith(note) and f"read-only stale copy; write to {live}" in err, args
    code, out, err = invoke("--db", str(db), "ls", "--json")
    assert [r["session_id"] for r in json.loads(out)] == [ABORTED] and note in err  # stdout stays JSON
    code, out, err = invoke("--db", str(db), "abort", ABORTED)
    assert (
        code == 1
        and err.count("\n") == 1
        and f"(flightlog db copy): it is a read-only stale copy; write to {live}" in err
    )
    code, out, err = invoke("--db", str(live), "ls")
    assert code == 0 and "note" not in err


# ─── 7. the demo's output ─────────────────────────────────────────────────────────────────────


def test_the_demo_numbers_its_sections_once_and_says_what_runs_says(tmp_path: Path) -> None:
    """Section 6's steps were numbered 1-6 under the tour's own 1-11; its context line said "89%" where
    ``runs`` said 75% (the fullest request against the last one, unnamed); its run tree began with a bare
    "<id>  lead" line (no state, no usage) after the kill, or none at all."""
    import re

    db = tmp_path / "demo.db"
    code, out, err = invoke("--db", str(db), "demo")
    assert code == 0, out + err
    numbered = [int(m.group(1)) for m in re.finditer(r"(?m)^(\d+)\. ", out)]
    assert numbered == list(range(1, 12))
    assert re.findall(r"(?m)^   ([a-f])\. ", out) == list("abcdef")
    fill = re.search(r"usable window filled: (\S+ \(\d+%\)) at most, (\S+ \(\d+%\)) by the last request", out)
    assert fill is not None, out
    sid = re.search(r"\$ flightlog replay (\w{12}) --check", out)
    assert sid is not None
    code, runs, _ = invoke("--db", str(db), "runs")
    (line,) = [r for r in runs.splitlines() if r.startswith(sid.group(1))]
    assert fill.group(2) in line  # the last request's fill is the context runs shows
    leads = re.findall(
        r"(?m)^   ([0-9a-f]{32})  lead      (running|terminal \(completed\))  used \d+/2000 tokens$", out
    )
    assert [state for _sid, state in leads] == ["running", "terminal (completed)"] and leads[0][0] == leads[
        1
    ][0]
    assert f"{ABORTED}  cancelled" in out and "sealed (cancelled)" in out and "aborted" not in out


def test_show_heads_a_session_with_the_status_ls_lists(tmp_path: Path) -> None:
    """``show`` printed the row's word where ``ls`` says what the ledger holds: "suspended" for a row
    edited to end a run that still waits, "no run" for a session that holds none."""
    import sqlite3

    from tests.web.conftest import run_gated

    from flightlog.events import Custom
    from flightlog.recorder import Recorder
    from flightlog.store import SqliteStore

    db = tmp_path / "k.db"
    assert run_gated(db, "g1").status == "suspended"
    with SqliteStore(db) as store:
        Recorder.create(store, session_id="items").append(Custom(custom_kind="item", payload={}))
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE sessions SET status = 'completed' WHERE session_id = 'g1'")
    _code, out, _ = invoke("--db", str(db), "ls", "--json")
    listed = {r["session_id"]: r["status"] for r in json.loads(out)}
    assert listed == {"g1": "suspended", "items": "no run"}
    for sid, status in listed.items():
        _code, out, err = invoke("--db", str(db), "show", sid)  # 1 for g1: its row contradicts its ledger
        assert out.startswith(f"session {sid}  [{status}]"), out + err
