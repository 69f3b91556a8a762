"""What the unhashed rows say must not outrank the verified ledger.

1. The ``sessions`` row (status...) is covered by no hash. An edited status must not hide a wait from
   ``pending`` (it decides from the ledger's fold), and ``verify``/``audit`` report the contradiction as a
   ``row_mismatch`` divergence naming the field, the row's value and the ledger's (on main: ``pending``
   said "nothing is waiting", ``verify`` said ok). On SQLite and PostgreSQL.
2. A session edited and re-chained (every hash recomputed) passes a chain-only check. ``show``,
   ``replay``, ``export`` and ``runs --rebuild`` warn naming the first signed checkpoint (or retained head)
   it contradicts and exit 1; ``export --bundle`` (its manifest is signed) refuses, writing nothing (on
   main all exited 0 and the bundle was written and signed). On SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flightlog.kernel.rowcheck import row_warning

from .helpers import cli, connect, execute, rechain, suspended_run, swap_goal

PAD = " " * 10
"""The indent of ``verify``'s detail lines."""


def set_status(url: str, session_id: str, status: str) -> None:
    """``UPDATE sessions SET status`` behind flightlog's back, as anyone who can write the database can."""
    execute(url, f"UPDATE sessions SET status = '{status}' WHERE session_id = '{session_id}'")


def last_seq(url: str, session_id: str) -> int:
    code, out, _ = cli(url, "ls", "--json")
    assert code == 0
    return int(next(s for s in json.loads(out) if s["session_id"] == session_id)["events"]) - 1


def says_row_mismatch(url: str, session_id: str, seq: int, detail: str) -> None:
    """``verify SESSION`` exits 1 with the ``row_mismatch`` line at ``seq``."""
    code, out, _ = cli(url, "verify", session_id)
    assert code == 1, out
    assert f"{PAD}seq {seq}: row_mismatch ({detail})" in out.splitlines(), out


def test_an_edited_status_hides_no_wait_and_verify_reports_it(url: str) -> None:
    db = url
    sid = suspended_run(db)
    waits = last_seq(url, sid)  # the run's last event is the suspension
    assert cli(db, "verify", sid)[0] == 0

    set_status(url, sid, "completed")
    code, out, err = cli(db, "pending")
    assert code == 0
    assert out.split()[:5] == [sid, "turn", "2", "n1", 'note({"text":']
    assert err.splitlines() == [
        f"flightlog: warning: {sid}: its sessions row says status 'completed', its ledger waits (listed "
        f"from the ledger; see `flightlog verify {sid}`)"
    ]
    code, out, err = cli(db, "pending", "--json")
    assert [(r["session_id"], r["call_id"]) for r in json.loads(out)] == [(sid, "n1")]

    detail = (
        f"sessions row status 'completed', the ledger's 'suspended': the wait opened at seq {waits} is open "
        "(gates: n1)"
    )
    for command in ("verify", "audit"):
        code, out, _ = cli(db, command, sid)
        assert code == 1, out
        assert out.splitlines()[0].startswith(f"DIVERGES  {sid}")
        assert f"{PAD}seq {waits}: row_mismatch ({detail})" in out.splitlines()
        code, out, _ = cli(db, command, sid, "--json")
        assert code == 1
        assert json.loads(out)[0]["divergences"] == [
            {"seq": waits, "reason": "row_mismatch", "detail": detail}
        ]
    code, out, _ = cli(db, "verify", "--all")
    assert code == 1 and f"{PAD}seq {waits}: row_mismatch ({detail})" in out.splitlines()
    # it heads the timeline with what ls lists (the ledger's wait), then says the row disagrees
    code, out, err = cli(db, "show", sid)
    assert code == 1 and out.startswith(f"session {sid}  [suspended]")
    assert err.splitlines() == [  # checked before the timeline: said before it, of what follows
        f"flightlog: warning: {sid} fails verification at seq {waits} (row_mismatch): {detail}; what "
        f"follows may not be what was recorded (see `flightlog verify {sid}`)"
    ]

    # the decision is still taken from the ledger, and the row put back is no divergence
    set_status(url, sid, "suspended")
    assert cli(db, "verify", sid)[0] == 0
    assert cli(db, "pending")[2] == ""


def test_a_runnable_row_on_a_waiting_ledger_is_no_divergence(url: str) -> None:
    """``running``/``queued`` (a fleet worker may claim a waiting run) do not contradict a wait."""
    db = url
    sid = suspended_run(db)
    for status in ("running", "queued"):
        set_status(url, sid, status)
        assert cli(db, "verify", sid)[0] == 0
        code, out, err = cli(db, "pending")
        assert (code, err) == (0, "") and out.split()[:4] == [sid, "turn", "2", "n1"]


def test_a_sealed_session_whose_row_names_another_status(tmp_path: Path) -> None:
    db = tmp_path / "flightlog.db"
    sid = suspended_run(db)
    assert cli(db, "approve", sid, "n1")[0] == 0
    assert cli(db, "resume", sid, "--quiet")[0] == 0
    seal = last_seq(str(db), sid)
    code, out, _ = cli(db, "verify", sid)
    assert code == 0 and "sealed (completed)" in out

    set_status(str(db), sid, "failed")
    detail = f"sessions row status 'failed', the ledger's 'completed': the signed seal at seq {seal} names it"
    says_row_mismatch(str(db), sid, seal, detail)
    set_status(str(db), sid, "completed")
    assert cli(db, "verify", sid)[0] == 0


def test_an_aborted_wait_is_cancelled_in_the_ledger(tmp_path: Path) -> None:
    """An abort closes the wait (``operation_cancelled``, status ``cancelled``): ``pending`` lists its gate
    as paused (still open: approve decides it, resume continues the run), decided from the ledger; a row
    saying it completed hides nothing and contradicts the ledger."""
    db = tmp_path / "flightlog.db"
    sid = suspended_run(db)
    waits = last_seq(str(db), sid)
    assert cli(db, "abort", sid)[0] == 0
    code, out, err = cli(db, "pending")
    assert (code, err) == (0, "") and out.startswith(f"{sid}  turn ") and "\n  paused: " in out, out
    assert cli(db, "verify", sid)[0] == 0

    set_status(str(db), sid, "completed")
    code, listed, err = cli(db, "pending")
    assert (code, listed) == (0, out)
    assert err == f"flightlog: warning: {sid}: {row_warning(sid, 'completed')}\n"
    detail = (
        f"sessions row status 'completed', the ledger's 'cancelled': an abort closed the wait opened at seq "
        f"{waits} (gates: n1)"
    )
    says_row_mismatch(str(db), sid, waits, detail)


def first_checkpoint(url: str, session_id: str) -> int:
    """The size of the session's first stored signed checkpoint."""
    raw = connect(url)
    try:
        query = f"SELECT MIN(size) FROM checkpoints WHERE session_id = '{session_id}'"
        return int(raw.execute(query).fetchone()[0])
    finally:
        raw.close()


@pytest.mark.parametrize("command", [["show"], ["replay"], ["export"]])
def test_a_rechained_session_is_not_printed_silently(url: str, command: list[str]) -> None:
    db = url
    sid = suspended_run(db)
    assert cli(db, *command, sid)[0] == 0
    rechain(db, sid, swap_goal("something else"), drop_checkpoints=False)
    size = first_checkpoint(db, sid)
    code, out, err = cli(db, *command, sid)
    assert code == 1
    assert "something else" in out  # printed, then flagged
    printed = "was printed" if command == ["export"] else "follows"  # show and replay check first
    assert err.splitlines() == [
        f"flightlog: warning: {sid} fails verification at seq {size - 1} (checkpoint_mismatch): signed root "
        f"at size {size} differs from the rows; what {printed} may not be what was recorded (see "
        f"`flightlog verify {sid}`)"
    ]


def test_a_rechained_session_whose_checkpoints_are_gone_contradicts_its_retained_head(url: str) -> None:
    db = url
    sid = suspended_run(db)
    size = last_seq(db, sid) + 1
    rechain(db, sid, swap_goal("something else"))
    code, _, err = cli(db, "show", sid)
    assert code == 1
    assert err.startswith(
        f"flightlog: warning: {sid} fails verification at seq {size - 1} (fork): the stored rows disagree "
        f"with the retained head at size {size};"
    )


def test_runs_rebuild_warns_about_a_rechained_session(url: str) -> None:
    db = url
    sid = suspended_run(db)
    assert cli(db, "runs", "--rebuild")[0] == 0
    rechain(db, sid, swap_goal("something else"), drop_checkpoints=False)
    size = first_checkpoint(db, sid)
    code, _, err = cli(db, "runs", "--rebuild")
    assert code == 1
    assert err.splitlines()[-1].startswith(
        f"flightlog: warning: {sid} fails verification at seq {size - 1} (checkpoint_mismatch): signed root "
        f"at size {size} differs from the rows;"
    )


def test_export_bundle_refuses_a_rechained_session_and_writes_nothing(url: str, tmp_path: Path) -> None:
    db, bundle = url, tmp_path / "bundle"
    sid = suspended_run(db)
    rechain(db, sid, swap_goal("something else"), drop_checkpoints=False)
    size = first_checkpoint(db, sid)
    code, out, err = cli(db, "export", sid, "--bundle", str(bundle))
    assert (code, out) == (1, "")
    line = err.strip()
    assert line.startswith(
        f"flightlog: error: ledger of session {sid} diverges at sequence {size - 1}: checkpoint_mismatch: "
        f"signed root at size {size} differs from the rows"
    ), line
    assert line.endswith("refusing to act on it")
    assert not bundle.exists()

    intact = suspended_run(db)
    code, _, err = cli(db, "export", intact, "--bundle", str(bundle))
    assert code == 0, err
    assert cli(db, "audit", "--bundle", str(bundle))[0] == 0


@pytest.mark.parametrize("seal", [True, False])
def test_an_imported_wait_is_left_to_its_app(tmp_path: Path, seal: bool) -> None:
    """An imported RunState waiting for an approval (status ``incomplete``, its last event ``suspended``)
    is decided in the Agents SDK: ``pending`` lists it no more than before, ``verify`` finds no
    ``row_mismatch`` (the status is the document's)."""
    db = tmp_path / "flightlog.db"
    sample = (
        Path(__file__).parents[1] / "data" / "samples" / "openai-agents" / "v1_13_pending_tool_approval.json"
    )
    code, out, err = cli(db, "import", str(sample), *(["--seal"] if seal else []))
    assert code == 0, err
    code, out, _ = cli(db, "ls", "--json")
    [session] = json.loads(out)
    # the stored word is the document's; ls prints the outcome runs gives it (seed 002 interrupted)
    assert (session["session_status"], session["status"]) == ("incomplete", "interrupted")
    assert cli(db, "pending") == (0, "nothing is waiting for a decision\n", "")
    code, out, _ = cli(db, "verify", session["session_id"])
    assert code == 0, out
