"""Acting on a session whose ``runs`` row contradicts its verified ledger (new-user pass M1, task M3).

An act appends, and an append rewrites the session's ``runs`` row from the fold: the edit ``audit`` reports
(``projection_mismatch``) would be gone. So acting commands refuse it, naming the column, and say how to
rebuild the projection deliberately; a stale projection (another fold version) stays a note, not a refusal.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from .helpers import cli, refused, suspended_run


def edit_run(db: Path, sid: str) -> None:
    raw = sqlite3.connect(db)
    raw.execute("UPDATE runs SET state = 'terminal', outcome = 'completed' WHERE run_id = ?", (sid,))
    raw.commit()
    raw.close()


def test_approve_refuses_an_edited_runs_row_and_keeps_the_evidence(tmp_path: Path) -> None:
    db = tmp_path / "flightlog.db"
    sid = suspended_run(db)
    edit_run(db, sid)
    line = refused(db, "approve", sid, "n1", reason="projection_mismatch")
    assert "state" in line and "flightlog runs --rebuild" in line, line
    refused(db, "deny", sid, "n1", reason="projection_mismatch")
    refused(db, "resume", sid, "-q", reason="projection_mismatch")
    code, out, _ = cli(db, "audit", sid, "--offline")
    assert code == 1 and "projection_mismatch" in out  # still there: nothing rewrote the row

    assert cli(db, "runs", "--rebuild")[0] == 0  # the deliberate rebuild
    assert cli(db, "approve", sid, "n1")[0] == 0


def test_a_stale_projection_is_no_refusal(tmp_path: Path) -> None:
    db = tmp_path / "flightlog.db"
    sid = suspended_run(db)
    edit_run(db, sid)
    raw = sqlite3.connect(db)
    raw.execute("UPDATE runs_meta SET value = 0 WHERE key = 'fold_version'")  # marked stale
    raw.commit()
    raw.close()
    assert cli(db, "approve", sid, "n1")[0] == 0
