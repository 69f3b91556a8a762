"""The filters agree with the unfiltered lists: a run whose unhashed ``sessions`` row was edited to an end
(``UPDATE sessions SET status='completed'``) while its ledger waits is listed in the state its events give,
and the state filters put it there too (on main they ran in SQL on the projection, which follows the row).

1. ``runs --state waiting_input`` (table and ``--json``) lists it, with the warning the unfiltered ``runs``
   gives; ``--state terminal`` does not (main: missing from the first, nothing from the second).
2. The dashboard's ``/api/runs/page?state=waiting_input`` (the runs list) and ``/api/runs?state=`` (the home
   page's run tree) list it with ``row_warning``; ``terminal`` does not (main: missing).
3. ``ls`` shows the status the ledger fixes, ``suspended``, with the same warning; ``--json`` keeps the row's
   as ``session_status``; ``--status`` filters on what is shown (main: ``completed``, no warning).
Honest rows stay as they were: a run the row ends with no wait in its ledger, a wait whose row says so.
On SQLite and PostgreSQL.
"""

from __future__ import annotations

import json

from flightlog.cli.options import STALE_PROJECTION_NOTE
from flightlog.events import RunStarted
from flightlog.kernel.rowheld import held_in
from flightlog.recorder import Recorder
from flightlog.runs import run_page
from flightlog.store import open_store

from .helpers import cli, execute, suspended_run
from .test_row_surfaces import dashboard, warning
from .test_row_trust import set_status


def three_runs(url: str) -> tuple[str, str, str]:
    """A wait whose row was edited to ``completed``, an honest wait, a plain run the row ended."""
    edited, honest = suspended_run(url), suspended_run(url)
    set_status(url, edited, "completed")
    with open_store(url) as store:
        recorder = Recorder.create(store, session_id="plain", task="t")
        recorder.append(RunStarted(run_id="r1", goal="a plain recording"))
        recorder.finish("completed")
    return edited, honest, "plain"


def test_runs_state_filter_lists_the_run_the_ledger_holds(url: str) -> None:
    edited, honest, plain = three_runs(url)
    code, out, err = cli(url, "runs")
    assert code == 0
    unfiltered = {line.split()[0]: line.split()[1] for line in out.splitlines()[1:]}
    assert unfiltered == {edited: "waiting_input", honest: "waiting_input", plain: "terminal"}

    code, out, err = cli(url, "runs", "--state", "waiting_input")
    assert code == 0
    rows = [line.split()[:2] for line in out.splitlines()[1:]]
    assert {row[0] for row in rows} == {edited, honest}
    assert all(row[1] == "waiting_input" for row in rows)
    assert "session marked" not in out
    assert err.splitlines() == [f"flightlog: warning: {edited}: {warning(edited, 'completed')}"]

    code, out, _ = cli(url, "runs", "--state", "waiting_input", "--json")
    assert code == 0
    listed = {s["run_id"]: (s["state"], s.get("terminal")) for s in json.loads(out)}
    assert listed == {edited: ("waiting_input", None), honest: ("waiting_input", None)}

    code, out, _ = cli(url, "runs", "--state", "waiting_input", "--limit", "1", "--json")
    assert code == 0 and len(json.loads(out)) == 1

    code, out, err = cli(url, "runs", "--state", "terminal")
    assert (code, err) == (0, "")
    assert [line.split()[0] for line in out.splitlines()[1:]] == [plain]
    assert cli(url, "runs", "--state", "paused")[1] == "(no runs)\n"  # not the row's state either


def test_the_dashboard_state_filter_lists_the_run_the_ledger_holds(url: str) -> None:
    edited, honest, plain = three_runs(url)
    with dashboard(url) as client:
        everything = client.get("/api/runs/page").json()["runs"]
        assert {r["run_id"]: r["state"] for r in everything} == {
            edited: "waiting_input",
            honest: "waiting_input",
            plain: "terminal",
        }
        waiting = client.get("/api/runs/page?state=waiting_input").json()
        assert waiting["next"] is None
        got = {r["run_id"]: (r["state"], r["outcome"], r["row_warning"]) for r in waiting["runs"]}
        assert got == {
            edited: ("waiting_input", None, warning(edited, "completed")),
            honest: ("waiting_input", None, ""),
        }
        assert [r["run_id"] for r in waiting["runs"]] == [
            r["run_id"] for r in everything if r["run_id"] in got
        ]  # in the unfiltered list's order
        ended = client.get("/api/runs/page?state=terminal").json()["runs"]
        assert [(r["run_id"], r["row_warning"]) for r in ended] == [(plain, "")]
        page = client.get("/runs?state=waiting_input").text
        assert edited in page and honest in page

        tree = client.get("/api/runs?state=waiting_input").json()["runs"]  # the home page's run tree
        assert {r["id"]: (r["state"], r["row_warning"]) for r in tree} == {
            edited: ("waiting_input", warning(edited, "completed")),
            honest: ("waiting_input", ""),
        }
        assert [r["id"] for r in client.get("/api/runs?state=terminal").json()["runs"]] == [plain]


def test_a_held_run_takes_its_place_in_the_pages(url: str) -> None:
    """One run a page (keyset cursors): the held run is on the page its start puts it on, once."""
    edited, honest, _ = three_runs(url)
    with open_store(url, read_only=True) as store:
        held = [row.run_id for row, _ in held_in(store, "waiting_input")]
        assert held == [edited]
        for descending in (True, False):
            seen, cursor = [], None
            while True:
                page = run_page(
                    store, state="waiting_input", limit=1, cursor=cursor, also=held, descending=descending
                )
                seen += [entry.run_id for entry in page.entries]
                if page.next_cursor is None:
                    break
                cursor = page.next_cursor
            unfiltered = run_page(store, descending=descending).entries  # the order the whole list gives
            assert seen == [entry.run_id for entry in unfiltered if entry.run_id in (edited, honest)]


def test_ls_shows_the_status_the_ledger_fixes(url: str) -> None:
    edited, honest, plain = three_runs(url)
    code, out, err = cli(url, "ls")
    assert code == 0
    shown = {line.split()[0]: line.split()[1] for line in out.splitlines()[1:]}
    assert shown == {edited: "suspended", honest: "suspended", plain: "completed"}
    assert err.splitlines() == [f"flightlog: warning: {edited}: {warning(edited, 'completed')}"]

    code, out, err = cli(url, "ls", "--json")
    assert code == 0 and len(err.splitlines()) == 1
    statuses = {s["session_id"]: (s["status"], s["session_status"]) for s in json.loads(out)}
    assert statuses == {
        edited: ("suspended", "completed"),  # the row is reported, not rewritten
        honest: ("suspended", "suspended"),
        plain: ("completed", "completed"),
    }
    code, out, _ = cli(url, "ls", "--status", "completed", "--json")
    assert [s["session_id"] for s in json.loads(out)] == [plain]
    code, out, _ = cli(url, "ls", "--status", "suspended", "--json")
    assert sorted(s["session_id"] for s in json.loads(out)) == sorted([edited, honest])

    execute(url, "UPDATE runs_meta SET value = 0 WHERE key = 'fold_version'")  # a stale projection
    code, out, err = cli(url, "ls")
    assert code == 0 and {line.split()[0]: line.split()[1] for line in out.splitlines()[1:]} == shown
    # ... the same statuses, and one note saying why listing folds every ledger
    assert sorted(err.splitlines()) == sorted(
        [f"flightlog: warning: {edited}: {warning(edited, 'completed')}", STALE_PROJECTION_NOTE]
    )

    set_status(url, edited, "suspended")  # the row put back: no warning
    code, _, err = cli(url, "ls")
    assert (code, err.splitlines()) == (0, [STALE_PROJECTION_NOTE])
