"""One run, one story: what ``ls``, ``show``, ``runs``, ``verify``, ``import`` and the dashboard's session page
say about the same run agree with what its ledger holds (a new user's pass: an aborted run read "cancelled"
in ``ls`` while ``runs`` said "paused" and the dashboard offered to abort it again; an unsealed import read
"incomplete" beside "terminal · interrupted")."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

import flightlog
from flightlog.cli import app
from flightlog.web.app import create_app
from flightlog.web.security import Auth
from flightlog.web.views import STATES

from .conftest import TOKEN, dead_and_alive, opener, resume_gated, run_gated

BASE = "http://127.0.0.1:8000"
SAMPLES = Path(__file__).parents[1] / "data" / "samples"
SHORT = SAMPLES / "claude-code" / "spotter_short.jsonl"
SHORT_ID = "claude-code:55604662-cf2a-4331-851a-ec234028f8ca"


def invoke(db: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["--db", str(db), *args])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def client(db_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(opener(db_path), token=TOKEN), base_url=BASE) as c:
        c.cookies.set("flightlog_ui_8000", Auth(TOKEN).cookie_value)
        yield c


def _views(db: Path, client: TestClient, sid: str) -> dict[str, str]:
    """The word each surface gives the session's run: ls (table and --json), show, runs, the dashboard."""
    code, out, err = invoke(db, "ls")
    assert code == 0, err
    (row,) = [line.split() for line in out.splitlines() if line.startswith(sid + " ")]
    code, out, err = invoke(db, "ls", "--json")
    (listed,) = [r for r in json.loads(out) if r["session_id"] == sid]
    code, out, err = invoke(db, "show", sid)
    assert code == 0, err
    shown = out.splitlines()[0].split("[", 1)[1].split("]", 1)[0]
    code, out, err = invoke(db, "runs")
    assert code == 0, err
    (run,) = [line.split() for line in out.splitlines() if line.startswith(sid + " ")]
    page = client.get("/session", params={"id": sid})
    assert page.status_code == 200
    status = re.search(r'<dd id="status">([^<]*)</dd>', page.text)
    state = re.search(r'<dd id="state">([^<]*)</dd>', page.text)
    assert status and state
    return {
        "ls": row[1],
        "ls_json": listed["status"],
        "show": shown,
        "runs": " ".join(run[1:3]) if run[1] == "terminal" else run[1],
        "page_status": status.group(1),
        "page_state": state.group(1).replace("&middot;", "·"),
        "page": page.text,
    }


def test_an_aborted_run_reads_paused_everywhere_and_resumes(db_path: Path, client: TestClient) -> None:
    """``flightlog abort`` records ``operation_cancelled`` and no ``run_terminal``: the run stays resumable
    (``flightlog resume`` continues it), so every view says "paused", none "cancelled", and the dashboard
    offers no second abort but says how to resume."""
    sid = "aborted-run"
    assert run_gated(db_path, sid).status == "suspended"
    code, out, err = invoke(db_path, "abort", sid, "--as", "bob")
    assert code == 0, err
    seen = _views(db_path, client, sid)
    assert [seen[k] for k in ("ls", "ls_json", "show", "runs", "page_status", "page_state")] == ["paused"] * 6
    assert '<section id="abort" hidden>' in seen["page"] and '<section id="aborted">' in seen["page"]
    assert f"flightlog resume {sid}" in seen["page"]
    code, out, err = invoke(db_path, "ls", "--json")
    assert [r["session_status"] for r in json.loads(out)] == ["cancelled"]  # the stored word, kept
    code, out, err = invoke(db_path, "ls", "--status", "paused", "--json")
    assert [r["session_id"] for r in json.loads(out)] == [sid], err
    code, out, err = invoke(db_path, "verify", sid)
    assert code == 0 and "open;" in out, out + err  # no seal: the run is not over
    code, out, err = invoke(db_path, "runs", "--outcome", "cancelled", "--json")
    assert (code, json.loads(out)) == (0, []), err  # not ended, so no outcome
    # resumable, as every view says: resume runs it to the gate again
    assert resume_gated(db_path, sid).status == "suspended"
    seen = _views(db_path, client, sid)
    assert (seen["ls"], seen["runs"], seen["page_status"]) == ("suspended", "waiting_input", "suspended")
    assert '<section id="abort">' in seen["page"] and '<section id="aborted" hidden>' in seen["page"]


def test_an_unsealed_import_reads_interrupted_and_says_what_seal_adds(
    db_path: Path, client: TestClient
) -> None:
    """A transcript without an end: ``ls``/``show`` said "incomplete", ``runs`` "terminal · interrupted".
    Now one word, the run's outcome; the import says the status and that ``--seal`` would seal it, and
    ``ls --status`` takes the words ``ls`` prints (and the stored one)."""
    code, out, err = invoke(db_path, "import", str(SHORT))
    assert code == 0, err
    assert out.strip().endswith("(interrupted, not sealed)")  # what --seal adds: once, on stderr
    assert err.count("--seal would record") == 1
    assert ("flightlog: note: 1 session not sealed; for each, --seal would record what the transcript's end closes"
            " (the last run's run_terminal with its turns and tokens, pending calls, a torn last line) and"
            " seal the session") in " ".join(err.split())  # fmt: skip
    code, out, err = invoke(db_path, "import", "--json", str(SHORT))
    (result,) = json.loads(out)
    assert (result["status"], result["session_status"], result["sealed"]) == (
        "interrupted",
        "incomplete",
        False,
    )
    assert "--seal would record" in result["seal"]
    seen = _views(db_path, client, SHORT_ID)
    assert [seen[k] for k in ("ls", "ls_json", "show", "page_status")] == ["interrupted"] * 4
    assert seen["runs"] == "terminal interrupted" and seen["page_state"] == "terminal · interrupted"
    assert ">session status</dt>" in seen["page"] and ">run state</dt>" in seen["page"]
    for word in ("interrupted", "incomplete"):
        code, out, err = invoke(db_path, "ls", "--status", word, "--json")
        assert [r["session_id"] for r in json.loads(out)] == [SHORT_ID], (word, err)
    code, out, err = invoke(db_path, "runs", "--outcome", "interrupted", "--json")
    assert [r["run_id"] for r in json.loads(out)] == [SHORT_ID], err
    # sealed: the source's end recorded (the user interrupted it), every view says cancelled
    code, out, err = invoke(db_path, "import", "--seal", str(SHORT))
    assert code == 0 and out.strip().endswith("(cancelled, sealed)"), out + err
    seen = _views(db_path, client, SHORT_ID)
    assert [seen[k] for k in ("ls", "show", "page_status")] == ["cancelled"] * 3
    assert seen["runs"] == "terminal cancelled" and seen["page_state"] == "terminal · cancelled"
    assert '<section id="abort" hidden>' in seen["page"]


def test_runs_points_a_state_that_is_an_outcome_at_outcome(db_path: Path) -> None:
    """``ls`` prints "cancelled"; ``runs --state cancelled`` was a bare usage error."""
    code, _out, err = invoke(db_path, "runs", "--state", "cancelled")
    assert code == 2 and "'cancelled' is an outcome, use --outcome cancelled" in err
    code, _out, err = invoke(db_path, "runs", "--state", "aborted")
    assert code == 2 and "use --outcome cancelled" in err
    code, _out, err = invoke(db_path, "runs", "--outcome", "paused")
    assert code == 2 and "'paused' is not one of: completed, failed, cancelled" in err
    code, _out, err = invoke(db_path, "runs", "--outcome", "failed", "--state", "running")
    assert code == 2 and "it takes no --state running" in err


def test_the_dashboard_runs_list_points_an_outcome_at_terminal(client: TestClient) -> None:
    """``/runs?state=cancelled``: the word ``ls`` prints is a terminal run's outcome, and the error says so."""
    page = client.get("/runs", params={"state": "aborted"})
    assert page.status_code == 400 and "cancelled is an outcome, use outcome=cancelled" in page.text
    page = client.get("/runs", params={"state": "bogus"})
    assert (
        page.status_code == 400
        and "unknown state &#39;bogus&#39; (one of: queued, initializing, running" in page.text
        and "outcome" not in page.text
    )
    for state in STATES:  # the valid states listed, as `runs --state` lists them (session 18)
        assert state in page.text
    page = client.get("/runs", params={"source": "bogus"})
    assert page.status_code == 400 and "unknown source &#39;bogus&#39; (one of: " in page.text


def test_a_folder_import_says_what_seal_adds_once(db_path: Path) -> None:
    """Each unsealed transcript's line stays short; the ``--seal`` note comes once, with the count."""
    examples = Path(flightlog.__file__).parent / "data" / "examples"
    code, out, err = invoke(db_path, "import", str(examples))
    assert code == 0, err
    lines = [line for line in out.splitlines() if "not sealed" in line]
    assert len(lines) == 2 and all(line.endswith("(interrupted, not sealed)") for line in lines), out
    assert "--seal" not in out and err.count("--seal would record") == 1
    assert "flightlog: note: 2 sessions not sealed; for each, --seal would record" in err


def test_an_abandoned_kernel_run_says_how_to_resume_it_on_its_page(db_path: Path, client: TestClient) -> None:
    """A kernel run nothing drove within the lease (its process killed) shows ``running (abandoned)`` and a
    section naming ``flightlog resume``; a run heard from (a fresh heartbeat) has that section hidden."""
    dead_and_alive(db_path)
    dead = client.get("/session", params={"id": "dead"}).text
    assert '<section id="abandoned">' in dead  # recorded by hand, no agent spec: resume needs --spec
    assert "<code>flightlog resume dead --spec MODULE:ATTR</code>" in dead and "started from Python" in dead
    assert "running (abandoned)" in dead
    alive = client.get("/session", params={"id": "alive"}).text
    assert '<section id="abandoned" hidden>' in alive
