"""``external_effects`` rows the verified ledger does not prove (attack pass, session 18, left then; fixed in
session 19):

* rows under a session id with no ``sessions`` row: no session's check reads them, so ``verify --all`` and
  ``audit --all`` said nothing (exit 0); now they name each id with its row count (``ORPHAN``, JSON state
  ``orphan_effects``) and exit 1;
* ``db copy`` copied a session's pending rows that no ``external_effect_intent`` records (then refused at its
  arrival check, calling the copy's own ledger divergent) and left the rows of no session behind silently;
  now it decides from the source's verified ledger before writing: a row the ledger does not record (or
  contradicts) refuses the copy naming the session, the key and that the source's row is at fault, and so
  do rows of no session; nothing is written.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flightlog.events import RunStarted
from flightlog.recorder import Recorder
from flightlog.store import open_store

from .helpers import cli, execute
from .test_wait_pass import record, suspend


@pytest.fixture
def db(tmp_path: Path) -> str:
    """Two sessions; ``a`` records one effect the proper way (intent, completion) and is untouched."""
    path = str(tmp_path / "flightlog.db")
    with open_store(path) as store:
        for sid in "ab":
            record(store, sid, RunStarted(run_id=sid, goal="g"), suspend())
        recorder = Recorder.attach(store, "a")
        recorder.record_intent("a:1:c1", {"tool": "charge", "arguments": {"amount": 5}})
        recorder.complete_effect("a:1:c1", {"output": "charged", "is_error": False})
    return path


def _stray_rows(db: str) -> None:
    """Effect rows of session ids no ``sessions`` row has (two pending under ``ghost``, one under ``gone``)."""
    execute(
        db,
        "INSERT INTO external_effects (session_id, idempotency_key, intent_hash, intent_json, status, "
        f"created_at_ms) VALUES ('ghost', 'ghost:1:c1', '{'a' * 64}', '{{}}', 'pending', 1)",
        "INSERT INTO external_effects (session_id, idempotency_key, intent_hash, intent_json, status, "
        f"created_at_ms) VALUES ('ghost', 'ghost:1:c2', '{'a' * 64}', '{{}}', 'pending', 2)",
        "INSERT INTO external_effects (session_id, idempotency_key, intent_hash, intent_json, status, "
        f"result_json, created_at_ms, completed_at_ms) VALUES ('gone', 'gone:1:c1', '{'b' * 64}', '{{}}', "
        "'completed', '{}', 3, 4)",
    )


def test_a_recorded_effect_is_no_orphan(db: str) -> None:
    code, out, err = cli(db, "verify", "--all", "--offline")
    assert code == 0 and "ORPHAN" not in out, (out, err)


@pytest.mark.parametrize("command", ["verify", "audit"])
def test_verify_all_names_effect_rows_of_no_session(db: str, command: str) -> None:
    """Before: exit 0, the stray rows unnamed (every session ok)."""
    _stray_rows(db)
    code, out, err = cli(db, command, "--all", "--offline")
    assert code == 1, (out, err)
    lines = [line for line in out.splitlines() if line.startswith("ORPHAN")]
    assert [line.split()[1] for line in lines] == ["ghost", "gone"], out
    assert "2 external_effects row(s) of session id 'ghost' with no sessions row" in lines[0]
    assert "1 external_effects row(s) of session id 'gone'" in lines[1]
    code, out, err = cli(db, command, "--all", "--offline", "--json")
    assert code == 1, (out, err)
    rows = [(r["session_id"], r["rows"]) for r in json.loads(out) if r.get("state") == "orphan_effects"]
    assert rows == [("ghost", 2), ("gone", 1)]


def _copy(db: str, tmp_path: Path) -> tuple[int, str, str, Path]:
    target = tmp_path / "copy.db"
    code, out, err = cli(db, "db", "copy", db, str(target), "--offline")
    return code, out, err, target


def test_a_copy_carries_the_effect_rows_its_ledger_records(db: str, tmp_path: Path) -> None:
    code, out, err, target = _copy(db, tmp_path)
    assert code == 0 and "1 effect(s)" in out, (out, err)
    with open_store(str(target)) as copied:
        (row,) = copied.session_effects("a")
        assert (row.idempotency_key, row.status) == ("a:1:c1", "completed")


def test_a_copy_refuses_a_pending_row_its_ledger_does_not_record(db: str, tmp_path: Path) -> None:
    """Before: the orphan was copied, then the arrival check called the copy divergent ("s does not verify
    ... a row the ledger does not record" with nothing saying the source is at fault)."""
    execute(
        db,
        "INSERT INTO external_effects (session_id, idempotency_key, intent_hash, intent_json, status, "
        f"created_at_ms) VALUES ('b', 'b:9:forged', '{'c' * 64}', '{{}}', 'pending', 1)",
    )
    code, out, err, target = _copy(db, tmp_path)
    assert code == 1, (out, err)
    said = " ".join(err.split())
    assert "db copy: b does not verify" in said and "effect b:9:forged" in said, said
    assert "the source's external_effects rows are copied only as its verified ledger records them" in said
    assert "nothing copied" in said and "staged b" not in err, err  # refused before b's arrival check
    if target.exists():
        with open_store(str(target)) as copied:
            assert not list(copied.list_sessions())
    with open_store(db) as source:  # the source is not retired: the copy did not happen
        assert source.retirement() is None


def test_a_whole_copy_refuses_effect_rows_of_no_session(db: str, tmp_path: Path) -> None:
    """Before: exit 0, the rows left behind in the retired source, unnamed."""
    _stray_rows(db)
    code, out, err, _target = _copy(db, tmp_path)
    assert code == 1, (out, err)
    said = " ".join(err.split())
    assert "orphan_effects (2 external_effects row(s) of session id 'ghost' (and 1 more" in said, said
    assert "nothing copied" in said
    with open_store(db) as source:
        assert source.retirement() is None
