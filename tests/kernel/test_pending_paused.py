"""``flightlog pending`` on a run aborted while it waited for a decision (new-user pass, session 18).

After ``flightlog abort S`` of a suspended run, ``flightlog runs`` said ``paused ... waiting for a decision on
CALL (flightlog pending)``, but ``pending`` said ``nothing is waiting for a decision`` (``--json``: ``[]``) and
``pending S`` was a usage error, while ``approve S CALL`` succeeded. Now ``pending`` lists the paused run's open
gate, marked paused, saying that approve or deny records the decision and ``resume`` continues the run;
``pending [SESSION]`` lists one run tree; and the ``runs`` detail names ``flightlog pending S``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from . import cli_agents
from .helpers import cli

SPEC = "kernel.cli_agents:approval_agent"
pytestmark = pytest.mark.usefixtures("fresh_notes")


def _aborted_while_waiting(db: Path) -> str:
    code, out, err = cli(db, "run", SPEC, "--goal", "take a note", "--json", "-q")
    assert code == 3, err
    sid = str(json.loads(out)["session_id"])
    code, out, err = cli(db, "abort", sid, "--as", "bob")
    assert code == 0 and out.startswith(f"aborted {sid}: its run is paused"), err
    return sid


def test_pending_lists_the_open_gate_of_a_run_aborted_while_it_waited(tmp_path: Path) -> None:
    db = tmp_path / "paused.db"
    sid = _aborted_while_waiting(db)
    other = _aborted_while_waiting(db)  # a second paused run: `pending SESSION` leaves it out

    code, out, err = cli(db, "runs")
    assert code == 0, err
    detail = (
        f"waiting for a decision on n1 (paused by an abort: flightlog pending {sid} lists it; "
        f"flightlog resume {sid} continues the run)"
    )
    (row,) = [line for line in out.splitlines() if line.startswith(sid)]
    assert row.split("  ")[1] == "paused" and row.endswith(detail), out

    code, out, err = cli(db, "pending", sid[:8])  # a prefix names it, as every session argument
    assert (code, err) == (0, ""), err  # its row's 'cancelled' is what makes it paused: no row warning
    lines = out.splitlines()
    assert lines[0] == f'{sid}  turn 2  n1  note({{"text": "hello"}})  [approval] notes need a human'
    assert " ".join(line.strip() for line in lines[1:]) == (
        "paused: `flightlog abort` stopped its run while it waited; approve or deny records a decision now, "
        f"then `flightlog resume {sid}` continues the run"
    )
    assert max(map(len, lines[1:])) <= 100
    code, out, _ = cli(db, "pending")  # across sessions: both paused runs
    assert code == 0 and [line.split()[0] for line in out.splitlines() if "n1" in line] == [sid, other]

    code, out, _ = cli(db, "pending", sid, "--json")
    (wire,) = json.loads(out)
    assert (wire["call_id"], wire["kind"], wire["decision"], wire["paused_wait"], wire["run_paused"]) == (
        "n1",
        "approval",
        None,
        True,
        False,  # not an in-doubt call with no gate: this gate is open, approve decides it now
    )

    code, out, err = cli(db, "approve", sid, "n1", "--as", "alice")
    assert code == 0 and f"continue with: flightlog resume {sid}" in out, err
    code, out, err = cli(db, "pending", sid)
    assert (code, err) == (0, "")
    assert out == (
        f'{sid}  turn 2  n1  note({{"text": "hello"}})  [approval] approved by alice; waiting for: '
        f"flightlog resume {sid} (its run is paused)\n"
    )
    assert cli_agents.NOTES == []
    code, out, err = cli(db, "resume", sid, "-q")
    assert code == 0 and "completed" in out, err
    assert cli_agents.NOTES == ["hello"]
    code, out, _ = cli(db, "pending", sid)
    assert (code, out) == (0, "nothing is waiting for a decision\n")
    assert json.loads(cli(db, "pending", "--json")[1])[0]["session_id"] == other


def test_pending_of_an_unknown_session_is_a_usage_error(tmp_path: Path) -> None:
    db = tmp_path / "none.db"
    _aborted_while_waiting(db)
    code, out, err = cli(db, "pending", "ffffffff")
    assert (code, out) == (2, "") and "no session matches 'ffffffff'" in err


def test_a_paused_python_runs_gate_names_the_spec_its_resume_needs(tmp_path: Path) -> None:
    """A run started from Python records no agent spec: the paused gate's resume names ``--spec``."""
    from flightlog.kernel import Kernel
    from flightlog.store import SqliteStore

    db = tmp_path / "py.db"
    with SqliteStore(db) as store:
        result = Kernel(store, cli_agents.approval_agent()).run_sync("note", session_id="py-run")
    assert result.status == "suspended"
    assert cli(db, "abort", "py-run")[0] == 0
    code, out, err = cli(db, "pending", "py-run")
    assert code == 0, err
    assert " ".join(out.split()).endswith(
        "then `flightlog resume py-run --spec MODULE:ATTR` continues the run"
    ), out


def test_runs_names_the_spec_a_paused_python_run_needs_and_says_what_pending_says_once_decided(
    tmp_path: Path,
) -> None:
    """``runs``' detail of a paused run started from Python names the resume that works (``--spec``); once
    every call is decided, it says the run waits for a resume, in ``pending``'s words, not for a decision."""
    from flightlog.kernel import Kernel
    from flightlog.store import SqliteStore

    db = tmp_path / "py.db"
    with SqliteStore(db) as store:
        result = Kernel(store, cli_agents.approval_agent()).run_sync("note", session_id="py-run")
    assert result.status == "suspended"
    assert cli(db, "abort", "py-run")[0] == 0
    code, out, err = cli(db, "runs")
    assert code == 0, err
    (row,) = [line for line in out.splitlines() if line.startswith("py-run")]
    assert row.endswith(
        "waiting for a decision on n1 (paused by an abort: flightlog pending py-run lists it; "
        "flightlog resume py-run --spec MODULE:ATTR continues the run)"
    ), out

    code, out, err = cli(db, "approve", "py-run", "n1", "--as", "alice")
    assert code == 0, err
    code, out, err = cli(db, "pending", "py-run")
    assert code == 0, err
    waits_for = " ".join(out.split()).split("waiting for: ", 1)[1].removesuffix(" (its run is paused)")
    assert waits_for.startswith("flightlog resume py-run --spec MODULE:ATTR"), out
    code, out, err = cli(db, "runs")
    assert code == 0, err
    (row,) = [line for line in out.splitlines() if line.startswith("py-run")]
    assert "waiting for a decision" not in row, out
    assert row.endswith(f"decided n1; waiting for: {waits_for} (flightlog pending py-run lists them)"), out


def test_runs_says_a_cli_run_whose_calls_are_decided_waits_for_its_resume(tmp_path: Path) -> None:
    """A run that recorded its spec and waits (not aborted): once decided, ``runs`` names plain resume."""
    db = tmp_path / "decided.db"
    code, out, err = cli(db, "run", SPEC, "--goal", "take a note", "--json", "-q")
    assert code == 3, err
    sid = str(json.loads(out)["session_id"])
    code, out, err = cli(db, "runs")
    (row,) = [line for line in out.splitlines() if line.startswith(sid)]
    assert row.endswith("waiting for a decision on n1 (flightlog pending)"), out
    assert cli(db, "approve", sid, "n1", "--as", "alice")[0] == 0
    code, out, err = cli(db, "runs")
    assert code == 0, err
    (row,) = [line for line in out.splitlines() if line.startswith(sid)]
    assert row.endswith(
        f"decided n1; waiting for: flightlog resume {sid} (flightlog pending {sid} lists them)"
    ), out
