"""``flightlog verify --all``, ``flightlog ls`` and a ``sessions`` row whose id is NULL or a BLOB (a raw write to SQLite; a
PostgreSQL ``text`` key holds neither): the row names no session, so it cannot be verified, and the sweep
names it (``UNNAMED``, JSON state ``unnamed_row``) and exits 1. Before, a NULL-id row was left out silently
(exit 0 with every other session ok) and a BLOB id crashed the sweep (``'bytes' object has no attribute
'encode'``) after printing the sessions before it. ``ls`` lists the sessions, names such a row on stderr and
exits 1, and ``ls -n N`` lists N sessions when the newest row is one; before, a BLOB id crashed it
(``unsupported format string passed to bytes.__format__``; ``--json``: bytes not JSON serializable)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from flightlog.events import RunStarted
from flightlog.store import open_store

from .helpers import cli, execute
from .test_wait_pass import record, suspend


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "flightlog.db")
    with open_store(path) as store:
        for sid in "abc":
            record(store, sid, RunStarted(run_id=sid, goal="g"), suspend())
    return path


def test_verify_all_passes_before_the_edit(db: str) -> None:
    code, out, err = cli(db, "verify", "--all", "--offline")
    assert code == 0, (out, err)
    assert "UNNAMED" not in out


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        ("session_id = NULL", "a sessions row whose id is NULL, created_at_ms "),
        (
            "session_id = CAST(session_id AS BLOB)",
            "a sessions row whose id is a BLOB ('b' as text), created_at_ms ",
        ),
        (  # TEXT whose bytes are not UTF-8: the driver raised reading it (ls, verify --all, runs, pending)
            "session_id = CAST(x'ff62' AS TEXT)",
            "a sessions row whose id is TEXT that is not UTF-8 ('\\\\xffb' as text), created_at_ms ",
        ),
    ],
)
def test_verify_all_names_a_row_whose_id_is_not_text(db: str, edit: str, named: str) -> None:
    execute(db, f"UPDATE sessions SET {edit}, status = 'completed' WHERE session_id = 'b'")
    code, out, err = cli(db, "verify", "--all", "--offline")
    assert code == 1, (out, err)
    lines = [line for line in out.splitlines() if line.startswith("UNNAMED")]
    assert len(lines) == 1, out
    assert named in lines[0] and "status 'completed'" in lines[0], lines[0]
    assert "nothing of it can be verified" in lines[0]
    assert [
        line.split()[1] for line in out.splitlines() if line.startswith("ok ") and "index" not in line
    ] == [
        "a",
        "c",
    ]
    code, out, err = cli(db, "verify", "--all", "--offline", "--json")
    assert code == 1, (out, err)
    rows = [row for row in json.loads(out) if row.get("state") == "unnamed_row"]
    assert len(rows) == 1, out
    assert rows[0]["ok"] is False
    expected = {"NULL": (None, "null"), "BLOB": ("b", "blob"), "TEXT": ("\\xffb", "text_not_utf8")}
    assert (rows[0]["session_id"], rows[0]["id_type"]) == next(v for k, v in expected.items() if k in edit)
    assert rows[0]["status"] == "completed"
    for args in (("runs",), ("pending",), ("audit", "--all", "--offline")):
        code, out, err = cli(db, *args)
        assert "Traceback" not in err and "decode" not in err, (args, err)


def test_verify_all_names_a_blob_id_row_whose_status_is_not_utf8(db: str) -> None:
    """A status of bytes that are not UTF-8 (``x'ff'``) on a BLOB-id row: named with the status
    ``backslashreplace``-decoded (it raised 'Could not decode to UTF-8 column CAST(status AS TEXT)')."""
    execute(
        db, "UPDATE sessions SET session_id = CAST(session_id AS BLOB), status = x'ff' WHERE session_id = 'b'"
    )
    code, out, err = cli(db, "verify", "--all", "--offline")
    assert code == 1 and "Traceback" not in err, (out, err)
    lines = [line for line in out.splitlines() if line.startswith("UNNAMED")]
    assert len(lines) == 1 and "a BLOB ('b' as text)" in lines[0] and "status '\\\\xff'" in lines[0], out
    code, out, err = cli(db, "ls")
    assert code == 1 and "Traceback" not in err and "a BLOB ('b' as text)" in err, (out, err)


@pytest.mark.parametrize(
    "edit",
    ["session_id = NULL", "session_id = CAST(session_id AS BLOB)", "session_id = CAST(x'ff63' AS TEXT)"],
)
def test_ls_lists_the_sessions_and_names_a_row_whose_id_is_not_text(db: str, edit: str) -> None:
    execute(db, f"UPDATE sessions SET {edit} WHERE session_id = 'c'")  # the newest
    for args in (("ls",), ("ls", "--json"), ("ls", "-n", "2"), ("ls", "-n", "2", "--json")):
        code, out, err = cli(db, *args)
        assert code == 1, (args, out, err)
        if "--json" in args:
            assert [row["session_id"] for row in json.loads(out)] == ["b", "a"], (args, out)  # newest first
        else:
            assert [line.split()[0] for line in out.splitlines()[1:]] == ["b", "a"], (args, out)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "a sessions row whose id is " in lines[0], (args, err)
        assert "it names no session, not listed (see `flightlog verify --all`)" in lines[0], lines[0]


@pytest.mark.parametrize("command", ["verify", "audit"])
def test_verify_all_names_events_rows_no_sessions_row_owns(db: str, command: str) -> None:
    """``events`` rows whose session id has no ``sessions`` row (text, or a BLOB): no session holds them, so
    ``verify --all`` and ``audit --all`` name each id with its row count and exit 1 (they said nothing)."""
    execute(
        db,
        "INSERT INTO events SELECT 'ghost', seq, kind, event, prev_hash, hash, recorded_at_ms FROM events "
        "WHERE session_id = 'a'",
    )
    execute(
        db,
        "INSERT INTO events SELECT x'ff', seq, kind, event, prev_hash, hash, recorded_at_ms FROM events "
        "WHERE session_id = 'a' AND seq = 0",
    )
    with sqlite3.connect(db) as raw:
        ghost = int(raw.execute("SELECT count(*) FROM events WHERE session_id = 'ghost'").fetchone()[0])
    code, out, err = cli(db, command, "--all", "--offline")
    assert code == 1, (out, err)
    lines = [line for line in out.splitlines() if line.startswith("ORPHAN")]
    assert len(lines) == 2, out
    assert lines[0].split()[1] == "ghost" and f"{ghost} events row(s) of session id 'ghost'" in lines[0]
    assert (
        lines[1].split()[1] == "\\xff"
        and "1 events row(s) of session id '\\\\xff' with no sessions row" in lines[1]
    )
    code, out, err = cli(db, command, "--all", "--offline", "--json")
    assert code == 1, (out, err)
    rows = [(r["session_id"], r["rows"]) for r in json.loads(out) if r.get("state") == "orphan_events"]
    assert rows == [("ghost", ghost), ("\\xff", 1)]
