"""The surfaces that list runs and waits must not let the unhashed ``sessions`` row hide a wait the ledger
holds (the row edited behind flightlog's back, as anyone who can write the database can).

1. The dashboard (``/api/runs``, the session status): on main its approvals queue kept only rows whose
   status was ``suspended``, so an edit to ``completed`` emptied it (pending 1 -> 0) and showed the run
   ``terminal``/``completed``; an edit to ``running`` (which ``verify`` accepts) hid it too. Now it decides
   as ``flightlog pending`` does, shows the run in the state its events give, and carries the warning.
2. ``runs``/``runs --rebuild``: on main the row settled the run ``terminal completed … session marked
   completed``, exit 0. Now the ledger's open wait outranks the row; ``--rebuild`` warns ``row_mismatch``
   and exits 1. Honest cases stay: a run the row ends with no wait in its ledger (``Recorder.finish``
   writes no ``run_terminal``), an imported wait whose status is the document's.
3. A wait an abort closed must say ``cancelled`` (the abort writes it with the event): ``suspended``,
   ``running`` or ``queued`` there is a ``row_mismatch`` too (main accepted them).
4. ``pending`` in a store ``db copy`` retired notes the retirement.
On SQLite and PostgreSQL where the surface reads a store URL.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from flightlog.events import RunStarted
from flightlog.kernel.rowcheck import row_warning
from flightlog.ops.dbcopy import copy_store
from flightlog.recorder import Recorder
from flightlog.store import SqliteStore, Store, open_store
from flightlog.web.app import create_app
from flightlog.web.security import Auth

from .helpers import cli, suspended_run
from .test_row_trust import last_seq, says_row_mismatch, set_status

TOKEN = "row-surfaces-token-0123456789abcdef"
BASE = "http://127.0.0.1:8000"


def opener(url: str) -> Callable[[bool], AbstractContextManager[Store]]:
    @contextmanager
    def open_db(read_only: bool) -> Iterator[Store]:
        with open_store(url, read_only=read_only) as store:
            yield store

    return open_db


@contextmanager
def dashboard(url: str) -> Iterator[TestClient]:
    with TestClient(create_app(opener(url), token=TOKEN), base_url=BASE) as client:
        client.cookies.set("flightlog_ui_8000", Auth(TOKEN).cookie_value)
        yield client


def warning(sid: str, status: str) -> str:
    return (
        f"its sessions row says status {status!r}, its ledger waits (listed from the ledger; see "
        f"`flightlog verify {sid}`)"
    )


@pytest.mark.parametrize("status", ["completed", "running"])
def test_the_dashboard_lists_the_wait_the_ledger_holds(url: str, status: str) -> None:
    sid = suspended_run(url)
    with dashboard(url) as client:
        before = client.get("/api/runs").json()
        assert [(c["session"], c["call"]) for c in before["pending"]] == [(sid, "n1")]
        assert [(r["id"], r["state"], r.get("row_warning", "")) for r in before["runs"]] == [
            (sid, "waiting_input", "")
        ]

        set_status(url, sid, status)
        data = client.get("/api/runs").json()
        assert [(c["session"], c["call"]) for c in data["pending"]] == [(sid, "n1")]
        expected = "" if status == "running" else warning(sid, status)  # running: a worker may claim it
        assert [(r["id"], r["state"], r["outcome"], r["row_warning"]) for r in data["runs"]] == [
            (sid, "waiting_input", "", expected)
        ]
        [listed] = client.get("/api/runs/page").json()["runs"]
        assert (listed["state"], listed["outcome"]) == ("waiting_input", None)
        assert listed.get("row_warning", "") == expected
        assert client.get("/api/runs/page?state=terminal").json()["runs"] == []
        page = client.get(f"/session?id={sid}").text
        assert '<dd id="state">waiting_input</dd>' in page
        if expected:
            assert warning(sid, status).replace("'", "&#39;") in page
            assert 'class="badge row-warning"' in client.get("/").text
        else:
            assert '<dd id="row-warning" class="warn" hidden></dd>' in page


@pytest.mark.parametrize("stale", [False, True], ids=["projection", "stale"])
def test_the_session_page_shows_the_status_the_lists_show(url: str, stale: bool) -> None:
    """A row edited to ``completed`` while the ledger waits: the session page says ``suspended`` (as
    ``flightlog ls`` does) and the state the runs lists give, with the row warning; before, it showed the
    row's ``completed`` (and hid the signal form, which the row's status decides), and with a stale
    projection the run state ``unknown``."""
    sid = suspended_run(url)
    set_status(url, sid, "completed")
    if stale:
        with open_store(url) as store:
            store.set_run_projection_version(0)
    code, out, _ = cli(url, "ls", "--json")
    assert code == 0 and [s["status"] for s in json.loads(out)] == ["suspended"]
    with dashboard(url) as client:
        [run] = client.get("/api/runs").json()["runs"]
        page = client.get(f"/session?id={sid}").text
    assert '<dd id="status">suspended</dd>' in page
    assert f'<dd id="state">{run["state"]}</dd>' in page and run["state"] == "waiting_input"
    assert warning(sid, "completed").replace("'", "&#39;") in page
    assert '<section id="signal">' in page


def test_runs_does_not_let_the_row_end_a_waiting_run(url: str) -> None:
    sid = suspended_run(url)
    waits = last_seq(url, sid)
    set_status(url, sid, "completed")

    code, out, err = cli(url, "runs")
    assert code == 0
    [row] = [line.split() for line in out.splitlines()[1:]]
    assert row[:2] == [sid, "waiting_input"]
    assert "session marked" not in out
    assert err.splitlines() == [f"flightlog: warning: {sid}: {warning(sid, 'completed')}"]

    code, out, _ = cli(url, "runs", "--json")
    assert code == 0
    [snapshot] = json.loads(out)
    assert (snapshot["state"], snapshot.get("terminal")) == ("waiting_input", None)
    assert cli(url, "runs", "--state", "terminal")[1] == "(no runs)\n"

    code, out, err = cli(url, "runs", "--rebuild")
    assert code == 1
    assert f"{sid}  waiting_input" in out and "session marked" not in out
    detail = (
        f"sessions row status 'completed', the ledger's 'suspended': the wait opened at seq {waits} is open "
        "(gates: n1)"
    )
    assert err.splitlines()[-1] == (
        f"flightlog: warning: {sid} fails verification at seq {waits} (row_mismatch): {detail}; what was "
        f"printed may not be what was recorded (see `flightlog verify {sid}`)"
    )

    set_status(url, sid, "suspended")  # the row put back: no warning, exit 0
    code, out, err = cli(url, "runs", "--rebuild")
    assert (code, err.splitlines()) == (0, ["rebuilt the runs projection from 1 session ledger(s)"])


def test_a_row_still_ends_a_run_whose_ledger_holds_no_wait(tmp_path: Path) -> None:
    """``Recorder.finish(status)`` writes no ``run_terminal``: the row is the only record of the end."""
    db = tmp_path / "flightlog.db"
    with SqliteStore(db) as store:
        recorder = Recorder.create(store, session_id="plain", task="t")
        recorder.append(RunStarted(run_id="r1", goal="a plain recording"))
        recorder.finish("failed")
    code, out, err = cli(db, "runs")
    assert (code, err) == (0, "")
    assert out.splitlines()[1].split()[:3] == ["plain", "terminal", "failed"]
    assert "session marked failed" in out
    with dashboard(str(db)) as client:
        [run] = client.get("/api/runs").json()["runs"]
        assert (run["state"], run["outcome"], run.get("row_warning", "")) == ("terminal", "failed", "")


def test_an_imported_wait_stays_as_the_document_ended_it(tmp_path: Path) -> None:
    """An imported RunState waiting for an approval (status ``incomplete``): decided in the Agents SDK,
    listed ended by its document's status, with no warning."""
    db = tmp_path / "flightlog.db"
    sample = (
        Path(__file__).parents[1] / "data" / "samples" / "openai-agents" / "v1_13_pending_tool_approval.json"
    )
    assert cli(db, "import", str(sample))[0] == 0
    code, out, err = cli(db, "runs")
    assert (code, err) == (0, "")
    assert out.splitlines()[1].split()[1:3] == ["terminal", "interrupted"]
    with dashboard(str(db)) as client:
        data = client.get("/api/runs").json()
        assert data["pending"] == [] and [r["state"] for r in data["runs"]] == ["terminal"]


@pytest.mark.parametrize("status", ["suspended", "running", "queued"])
def test_a_wait_an_abort_closed_must_say_cancelled(tmp_path: Path, status: str) -> None:
    db = tmp_path / "flightlog.db"
    sid = suspended_run(db)
    waits = last_seq(str(db), sid)
    assert cli(db, "abort", sid)[0] == 0
    assert cli(db, "verify", sid)[0] == 0
    set_status(str(db), sid, status)
    detail = (
        f"sessions row status {status!r}, the ledger's 'cancelled': an abort closed the wait opened at seq "
        f"{waits} (gates: n1)"
    )
    says_row_mismatch(str(db), sid, waits, detail)
    # pending lists the gate from the ledger, as paused (the abort closed the wait), and warns of the row
    code, out, err = cli(db, "pending")
    assert code == 0 and out.startswith(f"{sid}  turn ") and "\n  paused: " in out, out
    assert err == f"flightlog: warning: {sid}: {row_warning(sid, status)}\n"


def test_export_bundle_holds_the_ledger_a_row_mismatch_contradicts(tmp_path: Path) -> None:
    """The bundle carries no ``sessions`` row: a session whose only divergence is ``row_mismatch`` is
    bundled (what the auditor checks is the ledger that outranks the row), as the guide says."""
    db, bundle = tmp_path / "flightlog.db", tmp_path / "bundle"
    sid = suspended_run(db)
    set_status(str(db), sid, "completed")
    code, _, err = cli(db, "export", sid, "--bundle", str(bundle))
    assert code == 0, err
    assert cli(db, "audit", "--bundle", str(bundle))[0] == 0


def test_pending_in_a_retired_store_names_the_retirement(tmp_path: Path) -> None:
    src, dst = tmp_path / "src.db", tmp_path / "dst.db"
    sid = suspended_run(src)
    with SqliteStore(src) as store, SqliteStore(dst) as target:
        assert copy_store(store, target).retired == "source"
    code, out, err = cli(src, "pending")
    assert code == 0 and out.split()[:4] == [sid, "turn", "2", "n1"]
    retired, note = err.splitlines()  # every read of a retired store says where it went, then pending's own
    assert retired.startswith(f"flightlog: note: this store was moved to {dst.resolve()} at ")
    assert note.startswith(
        f"flightlog: note: the waits listed are those this store held when retired (moved to {dst.resolve()} at "
    )
    assert note.endswith(
        "); the live store may have decided them since: decide there (approve/deny here refuse)"
    )
    assert cli(src, "approve", sid, "n1")[0] == 1
    code, _, err = cli(dst, "pending")
    assert (code, err) == (0, "")


def test_the_row_is_reported_not_rewritten(tmp_path: Path) -> None:
    """``runs``, ``--rebuild``, ``pending`` and the dashboard only read: the edited row is still there for
    ``verify`` to report (nothing fabricated, nothing repaired behind the user's back)."""
    db = tmp_path / "flightlog.db"
    sid = suspended_run(db)
    set_status(str(db), sid, "completed")
    assert cli(db, "runs", "--rebuild")[0] == 1
    assert cli(db, "runs")[0] == 0 and cli(db, "pending")[0] == 0
    with dashboard(str(db)) as client:
        assert client.get("/api/runs").status_code == 200
    code, out, _ = cli(db, "ls", "--json")
    assert code == 0  # ls shows the status the ledger fixes, the row's stays as it was
    assert [(s["status"], s["session_status"]) for s in json.loads(out)] == [("suspended", "completed")]
