"""``verify`` / ``audit`` check the ``runs`` projection against the verified ledgers (auditproj pass).

No hash covers a ``runs`` row, and ``runs``, ``ls`` and the dashboard list it as truth. On main an operator
running ``audit`` on a store whose rows were edited in SQL was told everything is fine (exit 0). Now each
verified session's rows are folded with the projection's own fold while they are verified and compared
with its stored row: a differing column is a ``projection_mismatch`` divergence naming the run, the column,
the stored and the folded value; a row the ledger has and the projection lacks is ``projection_missing``;
with ``--all`` the sub-agent rows (process entries) are compared too and a listed row no ledger holds is
``projection_extra``. A projection marked stale is a note (``stale: run `flightlog runs --rebuild```),
exit 0. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from flightlog import events as ev
from flightlog.recorder import Recorder
from flightlog.store import open_store

from .helpers import cli, execute

PAD = " " * 10
"""The indent of ``verify``'s detail lines."""


def spawned(agent_id: str, state: str) -> ev.AgentProcessChanged:
    """``p``'s process-table entry for its sub-agent ``agent_id``."""
    return ev.AgentProcessChanged(
        turn=1,
        agent_id=agent_id,
        parent_session_id="p",
        role="worker",
        isolation="none",
        context_inheritance="none",
        state=state,
    )


def recorded(url: str) -> None:
    """A parent run ``p`` that spawned sub-agents ``c`` (no session of its own) and ``k`` (its own session,
    one event) and ended, and an open run ``s1`` waiting for its model."""
    import flightlog.runs  # noqa: F401  (registers the projector)

    store = open_store(url)
    try:
        parent = Recorder.create(store, session_id="p")
        parent.append(ev.RunStarted(run_id="p", goal="delegate"))
        parent.append(spawned("c", "running"))
        parent.append(spawned("k", "completed"))
        parent.append(ev.RunTerminal(reason="completed", turns_used=1, total_tokens=42))
        child = Recorder.create(store, session_id="k")
        child.append(ev.RunStarted(run_id="k", goal="work"))
        run = Recorder.create(store, session_id="s1")
        run.append(ev.RunStarted(run_id="s1", goal="do the thing"))
        run.append(ev.CheckpointTaken(turn=1, history_len=1))
    finally:
        store.close()


def verify(url: str, *args: str) -> tuple[int, list[str]]:
    code, out, err = cli(url, "verify", *args)
    assert not err or code == 1, err
    return code, out.splitlines()


def json_rows(url: str, command: str, *args: str) -> tuple[int, list[dict[str, Any]]]:
    code, out, _ = cli(url, command, *args, "--json")
    return code, json.loads(out)


def mismatch(run_id: str, column: str, stored: str, folded: str) -> str:
    return f"runs row {run_id!r} column {column}: stored {stored}, the verified ledger folds to {folded}"


def test_an_untouched_store_passes(url: str) -> None:
    recorded(url)
    for command in ("verify", "audit"):
        assert cli(url, command, "s1")[0] == 0
        code, lines = verify(url, "k")  # its row holds p's process entry: checked by --all, it says
        assert code == 0
        assert (
            f"{PAD}note: runs projection: the row's process entry is written from session 'p''s ledger: "
            "`verify --all` / `audit --all` check it"
        ) in lines, lines
        code, rows = json_rows(url, command, "--all")
        assert code == 0, rows
        assert [r["state"] for r in rows if r.get("session_id") == "c"] == []  # nothing about the sub-agent
        assert all(r["ok"] for r in rows)


def test_an_edited_row_is_named_column_by_column(url: str) -> None:
    recorded(url)
    # state and outcome are not in the two columns (fold, session_status) flightlog's own writers guard on
    execute(
        url,
        "UPDATE runs SET state = 'terminal', outcome = 'completed', "
        "snapshot = replace(snapshot, 'waiting_model', 'terminal') WHERE run_id = 's1'",
    )
    code, lines = verify(url, "s1")
    assert code == 1
    assert lines[0].startswith("DIVERGES  s1")
    state = mismatch("s1", "state", "'terminal'", "'waiting_model'")
    outcome = mismatch("s1", "outcome", "'completed'", "None")
    assert f"{PAD}seq 1: projection_mismatch ({state})" in lines, lines
    assert f"{PAD}seq 1: projection_mismatch ({outcome})" in lines, lines
    snapshot = [line for line in lines if "column snapshot" in line]
    assert len(snapshot) == 1, lines  # cut around the first difference, both values shown
    assert snapshot[0].index('"state":"terminal"') < snapshot[0].index('"state":"waiting_model"'), lines
    for command in ("verify", "audit"):
        code, rows = json_rows(url, command, "s1")
        assert code == 1
        divergences = rows[0]["divergences"]
        assert {d["reason"] for d in divergences} == {"projection_mismatch"}
        assert [d["detail"].split(" column ")[1].split(":")[0] for d in divergences] == [
            "state",
            "outcome",
            "snapshot",
        ]
        assert cli(url, command, "--all")[0] == 1
    assert cli(url, "verify", "p")[0] == 0  # the other run is untouched
    assert cli(url, "runs", "--rebuild")[0] == 0
    assert cli(url, "verify", "--all")[0] == 0


def test_an_edited_fold_or_status_column_is_named(url: str) -> None:
    recorded(url)
    execute(
        url,
        "UPDATE runs SET last_seq = 7, updated_at_ms = 1, "
        "fold = replace(fold, '\"awaiting_model\":true', '\"awaiting_model\":false') WHERE run_id = 's1'",
    )
    code, rows = json_rows(url, "audit", "s1")
    assert code == 1
    details = [d["detail"] for d in rows[0]["divergences"]]
    assert any("column updated_at_ms: stored 1, the verified ledger folds to " in d for d in details), details
    assert any("column last_seq: stored 7, the verified ledger folds to 1" in d for d in details), details
    fold = [d for d in details if "column fold: stored" in d]
    assert len(fold) == 1 and fold[0].index('"awaiting_model":false') < fold[0].index('"awaiting_model":true')


def test_a_missing_row_is_named(url: str) -> None:
    recorded(url)
    execute(url, "DELETE FROM runs WHERE run_id IN ('s1', 'c')")
    code, lines = verify(url, "s1")
    assert code == 1
    assert (
        f"{PAD}seq 1: projection_missing (the runs projection has no row for run 's1': the verified ledger "
        "folds to state 'waiting_model'; `flightlog runs --rebuild` rewrites it from the ledgers)"
    ) in lines, lines
    code, lines = verify(url, "--all")
    assert code == 1
    assert (
        "MISSING   c  run 'c': the runs projection has no row; session 'p''s verified ledger names it at "
        "seq 1 (state 'running'); `flightlog runs --rebuild` rewrites it from the ledgers"
    ) in lines, lines
    code, rows = json_rows(url, "verify", "--all")
    assert [(r["session_id"], r["state"]) for r in rows if str(r["state"]).startswith("projection")] == [
        ("c", "projection_missing")
    ]


def test_an_edited_sub_agent_row_is_named_by_all(url: str) -> None:
    recorded(url)
    execute(url, "UPDATE runs SET state = 'terminal', outcome = 'failed' WHERE run_id = 'c'")
    assert cli(url, "verify", "p")[0] == 0  # the sub-agent's row is not the parent session's
    code, rows = json_rows(url, "audit", "--all")
    assert code == 1
    found = [r for r in rows if r["session_id"] == "c"]
    assert len(found) == 1 and found[0]["state"] == "projection_mismatch" and found[0]["ok"] is False
    assert found[0]["columns"]["state"] == {"stored": "terminal", "folded": "running"}
    assert found[0]["columns"]["outcome"] == {"stored": "failed", "folded": None}


def test_an_extra_row_is_named(url: str) -> None:
    recorded(url)
    columns = "parent, source, state, outcome, updated_at_ms, last_seq, session_status, snapshot, fold"
    execute(
        url,
        f"INSERT INTO runs (run_id, {columns}) SELECT 'ghost', {columns} FROM runs WHERE run_id = 's1'",
    )
    assert cli(url, "verify", "s1")[0] == 0
    code, lines = verify(url, "--all")
    assert code == 1
    assert (
        "EXTRA     ghost  run 'ghost': a listed runs row (state 'waiting_model') that no verified ledger "
        "holds (no session, no process entry names it); `flightlog runs --rebuild` rewrites it from the ledgers"
    ) in lines, lines


def test_a_stale_projection_is_a_note_not_tampering(url: str) -> None:
    recorded(url)
    execute(url, "UPDATE runs SET state = 'terminal' WHERE run_id = 's1'")
    store = open_store(url)
    try:
        store.set_run_projection_version(0)  # what a failed projector write leaves
    finally:
        store.close()
    note = (
        "runs projection marked stale (a projection write failed): not compared with the ledgers; "
        "stale: run `flightlog runs --rebuild`"
    )
    code, lines = verify(url, "s1")
    assert code == 0, lines
    assert f"{PAD}note: {note}" in lines
    code, lines = verify(url, "--all")
    assert code == 0, lines
    assert f"note: {note}" in lines
    assert not any("projection_mismatch" in line for line in lines)
    code, rows = json_rows(url, "audit", "--all")
    assert code == 0
    assert {"session_id": None, "ok": True, "state": "projection_stale", "notes": [note]} in rows
    assert cli(url, "runs", "--rebuild")[0] == 0
    code, lines = verify(url, "--all")  # rebuilt from the ledgers: current, the edit gone
    assert code == 0 and not any("stale" in line for line in lines), lines


def test_a_session_that_fails_its_check_is_not_folded(url: str) -> None:
    """Unverified events are no evidence: the failing session's row is not compared, and with its process
    entries unknown the sub-agent rows are not either (a note says so); the session's divergence fails it."""
    recorded(url)
    execute(
        url,
        f"UPDATE events SET hash = '{'0' * 64}' WHERE session_id = 'p' AND seq = 2",
        "UPDATE runs SET state = 'terminal' WHERE run_id IN ('p', 'c')",
    )
    code, rows = json_rows(url, "verify", "--all")
    assert code == 1
    parent = next(r for r in rows if r["session_id"] == "p")
    assert parent["divergences"] and not any(
        d["reason"].startswith("projection") for d in parent["divergences"]
    )
    assert not any(r["session_id"] == "c" for r in rows)
    assert {
        "session_id": None,
        "ok": True,
        "state": "projection_unchecked",
        "notes": [
            "runs projection: sub-agent rows and listed runs no ledger holds not compared: 1 session(s) did "
            "not verify or moved during the check (p)"
        ],
    } in rows


def test_a_forged_process_entry_is_caught_by_all(url: str) -> None:
    """A row whose process entry (another session's word), parent and snapshot are forged consistently
    renders from its own stored parts: checking the session alone takes the entry as stored and says so;
    ``--all`` compares it with the entry ``p``'s verified ledger holds."""
    recorded(url)
    execute(
        url,
        "UPDATE runs SET parent = 'evil', "
        'fold = replace(fold, \'"recorded_by":"p"\', \'"recorded_by":"evil"\'), '
        'snapshot = replace(snapshot, \'"parent":"p"\', \'"parent":"evil"\') WHERE run_id = \'k\'',
    )
    code, lines = verify(url, "k")
    assert code == 0
    said = f"{PAD}note: runs projection: the row's process entry is written from session 'evil''s ledger"
    assert any(line.startswith(said) for line in lines), lines
    code, rows = json_rows(url, "audit", "--all")
    assert code == 1
    found = [r for r in rows if r["session_id"] == "k" and r["state"] == "projection_mismatch"]
    assert len(found) == 1 and sorted(found[0]["columns"]) == ["fold", "parent", "snapshot"], found
    assert found[0]["columns"]["parent"] == {"stored": "evil", "folded": "p"}


def test_an_unreadable_fold_text_is_named_not_a_crash(url: str) -> None:
    recorded(url)
    execute(
        url,
        "UPDATE runs SET fold = 'not json' WHERE run_id = 's1'",
        "UPDATE runs SET fold = replace(fold, '\"state\":\"completed\"', '\"state\":123') WHERE run_id = 'k'",
    )
    for sid, why in (
        ("s1", "its fold text holds no readable process entry (Expecting value: line 1 column 1 (char 0))"),
        ("k", "its fold text holds no readable process entry (process entry field 'state' holds 123 (int)"),
    ):
        code, rows = json_rows(url, "verify", sid)
        assert code == 1, rows
        details = [d["detail"] for d in rows[0]["divergences"]]
        assert any(d.startswith(f"runs row '{sid}' column fold: stored ") for d in details), details
        assert any(d.startswith(f"runs row '{sid}': {why}") for d in details), details
    assert cli(url, "verify", "--all")[0] == 1


def test_a_process_entry_no_ledger_holds_is_refused_where_it_is_read(url: str) -> None:
    """A stored process entry holding a lone surrogate (no event holds one: the canonical encoding refuses
    it) was taken, and the row's render failed (``its process entry does not render``); it is refused where
    the fold text is read, naming the field, and the row compared without it."""
    recorded(url)
    execute(url, 'UPDATE runs SET fold = replace(fold, \'"recorded_by":"p"\', \'"recorded_by":"\\ud800"\')')
    code, rows = json_rows(url, "verify", "k")
    assert code == 1, rows
    details = [d["detail"] for d in rows[0]["divergences"]]
    said = (
        "runs row 'k': its fold text holds no readable process entry (process entry field 'recorded_by' "
        "holds '\\ud800' (str), a string with a lone su"
    )
    assert any(d.startswith(said) for d in details), details
    assert mismatch("k", "parent", "'p'", "None") in details, details


def test_a_sessions_row_whose_parent_is_no_text_is_named_not_a_crash(url: str) -> None:
    """SQLite keeps a BLOB a raw write puts in ``parent_session_id``; no snapshot renders from it (verify
    raised pydantic's ValidationError): the run is named, not compared."""
    if "postgres" in url:
        pytest.skip("PostgreSQL's text column holds text only")
    recorded(url)
    execute(url, "UPDATE sessions SET parent_session_id = X'ff' WHERE session_id = 's1'")
    code, rows = json_rows(url, "verify", "s1")
    assert code == 1, rows
    assert [(d["reason"], d["detail"]) for d in rows[0]["divergences"]] == [
        (
            "projection_mismatch",
            "runs row 's1': not compared: the sessions row's parent_session_id holds b'\\xff' (bytes), not "
            "text, so no snapshot renders from it",
        )
    ]
