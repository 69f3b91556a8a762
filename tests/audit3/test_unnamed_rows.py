"""``flightlog verify --all``, ``flightlog ls`` and a ``sessions`` row whose id is NULL or a BLOB (a raw write to SQLite; a
PostgreSQL ``text`` key holds neither): the row names no session, so it cannot be verified, and the sweep
names it (``UNNAMED``, JSON state ``unnamed_row``) and exits 1. Before, a NULL-id row was left out silently
(exit 0 with every other session ok) and a BLOB id crashed the sweep (``'bytes' object has no attribute
'encode'``) after printing the sessions before it. ``ls`` lists the sessions, names such a row on stderr and
exits 1, and ``ls -n N`` lists N sessions when the newest row is one; before, a BLOB id crashed it
(``unsupported format string passed to bytes.__format__``; ``--json``: bytes not JSON serializable)."""

from __future__ import annotations

import json
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
    assert rows[0]["session_id"] == (None if "NULL" in edit else "b")
    assert rows[0]["id_type"] == ("null" if "NULL" in edit else "blob")
    assert rows[0]["status"] == "completed"


@pytest.mark.parametrize("edit", ["session_id = NULL", "session_id = CAST(session_id AS BLOB)"])
def test_ls_lists_the_sessions_and_names_a_row_whose_id_is_not_text(db: str, edit: str) -> None:
    execute(db, f"UPDATE sessions SET {edit} WHERE session_id = 'c'")  # the newest
    for args in (("ls",), ("ls", "--json"), ("ls", "-n", "2"), ("ls", "-n", "2", "--json")):
        code, out, err = cli(db, *args)
        assert code == 1, (args, out, err)
        if "--json" in args:
            assert [row["session_id"] for row in json.loads(out)] == ["a", "b"], (args, out)
        else:
            assert [line.split()[0] for line in out.splitlines()[1:]] == ["a", "b"], (args, out)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "a sessions row whose id is " in lines[0], (args, err)
        assert "it names no session, not listed (see `flightlog verify --all`)" in lines[0], lines[0]
