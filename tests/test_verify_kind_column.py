"""A stored row's ``kind`` column (attack on an imported session): the chain hash covers the event's bytes,
not the denormalised ``kind`` beside them, and readers pick rows by that column (the import's seal check,
the agent-spec lookup, the conversation's change list, the runs search, an import's run ids). A row whose
column is edited to say another kind than its bytes must be a divergence at its seq, for ``verify`` and
``audit`` alike (both reported the session intact on main)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flightlog.cli import app
from flightlog.importers import import_file
from flightlog.recorder import verify_session
from flightlog.store import SqliteStore

SAMPLE = Path(__file__).parent / "data" / "samples" / "claude-code" / "spotter_tool_heavy.jsonl"


def imported(tmp_path: Path) -> tuple[Path, str, dict[int, str]]:
    """A SQLite file holding the sample's import; its main session id and its rows' kinds."""
    db = tmp_path / "f.db"
    with SqliteStore(db) as store:
        session_id = import_file(store, SAMPLE, seal=True).session_ids[0]
        kinds = {row.seq: row.kind for row in store.read_events(session_id)}
    return db, session_id, kinds


def set_kind(db: Path, session_id: str, seq: int, kind: str) -> None:
    """Edit one row's ``kind`` column in place, as someone with write access to the file can."""
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TRIGGER IF EXISTS events_no_update")
        conn.execute("UPDATE events SET kind = ? WHERE session_id = ? AND seq = ?", (kind, session_id, seq))
    conn.close()


def edits(kinds: dict[int, str]) -> list[tuple[int, str]]:
    """A ``custom`` row said to be an ``llm_completed`` and a ``run_started`` said to be a ``custom``."""
    custom = min(seq for seq, kind in kinds.items() if kind == "custom" and seq > 0)
    started = min(seq for seq, kind in kinds.items() if kind == "run_started")
    return [(custom, "llm_completed"), (started, "custom")]


def test_verify_names_each_row_whose_kind_column_disagrees_with_its_bytes(tmp_path: Path) -> None:
    db, session_id, kinds = imported(tmp_path)
    with SqliteStore(db) as store:
        assert verify_session(store, session_id).ok
    tampered = edits(kinds)
    for seq, kind in tampered:
        set_kind(db, session_id, seq, kind)
    with SqliteStore(db) as store:
        report = verify_session(store, session_id)
    found = [(d.seq, d.reason) for d in report.divergences]
    assert found == [(seq, "kind_mismatch") for seq, _ in sorted(tampered)]  # ok on main
    for divergence, (seq, kind) in zip(report.divergences, sorted(tampered), strict=True):
        assert repr(kind) in divergence.detail and repr(kinds[seq]) in divergence.detail


@pytest.mark.parametrize("command", ["verify", "audit"])
def test_the_cli_check_exits_1_naming_the_seq_of_an_edited_kind(tmp_path: Path, command: str) -> None:
    db, session_id, kinds = imported(tmp_path)
    seq, kind = edits(kinds)[0]
    set_kind(db, session_id, seq, kind)
    result = CliRunner().invoke(app, ["--db", str(db), command, session_id, "--json"])
    assert result.exit_code == 1, result.output
    reports = json.loads(result.output)
    report = reports[0] if isinstance(reports, list) else reports
    assert [seq, "kind_mismatch"] in [[d["seq"], d["reason"]] for d in report["divergences"]]
