"""``flightlog signal`` to a session no flightlog kernel runs (new-user pass, session 17): a LangGraph thread
said "queued ... delivered at the run's next turn boundary", and the dashboard offered Signal and Abort on
its page, yet only the kernel reads the signal queue (its turn boundaries record
``signal_delivery_disposed``), so nothing would ever deliver it. Such a signal is now refused (exit 2, one
line saying why and what works instead, nothing queued) and the page offers neither button; a kernel run
still takes one."""

from __future__ import annotations

import json
from pathlib import Path

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from flightlog.cli import app
from flightlog.store import SqliteStore
from flightlog.store.signals import pending_signals
from flightlog.web.app import create_app
from flightlog.web.security import Auth
from web.conftest import TOKEN, opener

from .langgraph_waiting import waiting_thread

SAMPLES = Path(__file__).parents[1] / "data" / "samples" / "claude-code"
runner = CliRunner()


def flightlog_cli(db: Path, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["--db", str(db), *args])
    return result.exit_code, result.stdout, result.stderr


def _queued(db: Path, session_id: str) -> int:
    with SqliteStore(db, read_only=True) as store:
        return len(pending_signals(store, session_id))


def test_a_signal_to_a_langgraph_thread_is_refused_naming_the_graphs_own_api(tmp_path: Path) -> None:
    db = tmp_path / "lg.db"
    waiting_thread(db)
    code, out, err = flightlog_cli(db, "signal", "langgraph:t1", "--message", "stop what you are doing")
    assert (code, out) == (2, ""), err
    (line,) = err.splitlines()
    assert line.startswith(
        "flightlog: error: session langgraph:t1: signal refused: session langgraph:t1 is a "
    )
    assert "LangGraph thread (source langgraph) and its app runs it: the flightlog kernel" in line
    assert "nothing would deliver one" in line and "graph.invoke(Command(resume=...), config)" in line
    assert _queued(db, "langgraph:t1") == 0  # nothing queued that nothing would read
    assert "queued" not in line


def test_a_kernel_run_still_takes_a_signal_and_an_import_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    code, out, err = flightlog_cli(
        db, "run", "kernel.cli_agents:approval_agent", "--goal", "note", "-q", "--json"
    )
    assert code == 3, err
    sid = json.loads(out)["session_id"]
    code, out, err = flightlog_cli(db, "signal", sid, "--message", "the file is under /etc")
    assert code == 0 and out.startswith("queued message ") and "next turn boundary" in out, err
    assert _queued(db, sid) == 1
    assert flightlog_cli(db, "import", str(SAMPLES / "spotter_short.jsonl"))[0] == 0
    (imported,) = [
        r["session_id"]
        for r in json.loads(flightlog_cli(db, "ls", "--json")[1])
        if r["source"] == "import:claude-code"
    ]
    code, out, err = flightlog_cli(db, "signal", imported, "--message", "hello")
    assert (code, out) == (2, "") and len(err.splitlines()) == 1, err
    assert "is an imported claude-code transcript (source import:claude-code)" in err
    assert "write to that agent where it runs" in err and _queued(db, imported) == 0


def test_the_dashboard_offers_signal_and_abort_only_where_a_kernel_runs_the_session(tmp_path: Path) -> None:
    db = tmp_path / "both.db"
    waiting_thread(db)
    code, out, err = flightlog_cli(
        db, "run", "kernel.cli_agents:approval_agent", "--goal", "note", "-q", "--json"
    )
    assert code == 3, err
    sid = json.loads(out)["session_id"]
    with TestClient(create_app(opener(db), token=TOKEN), base_url="http://127.0.0.1:8000") as client:
        client.cookies.set("flightlog_ui_8000", Auth(TOKEN).cookie_value)
        thread = client.get("/session", params={"id": "langgraph:t1"}).text
        kernel = client.get("/session", params={"id": sid}).text
    assert '<section id="signal" hidden>' in thread and '<section id="abort" hidden>' in thread
    assert '<section id="signal">' in kernel and '<section id="abort">' in kernel


def _ledger(db: Path, session_id: str) -> tuple[int, int, str]:
    """(event count, authority epoch, status) of a session: what an abort would change."""
    with SqliteStore(db, read_only=True) as store:
        record = store.get_session(session_id)
        return record.events, store.authority_epoch(session_id), record.status


def test_an_abort_of_a_langgraph_thread_or_an_import_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    """``flightlog abort`` of a session no flightlog kernel runs recorded ``operation_cancelled`` and the
    status ``cancelled`` though its own app would read neither (the graph goes on with its next invoke):
    refused like a signal, exit 2, one line naming what works instead, nothing bumped or written."""
    db = tmp_path / "lg.db"
    waiting_thread(db)
    before = _ledger(db, "langgraph:t1")
    code, out, err = flightlog_cli(db, "abort", "langgraph:t1", "--as", "ada")
    assert (code, out) == (2, ""), err
    (line,) = err.splitlines()
    assert line.startswith(
        "flightlog: error: session langgraph:t1: abort refused: session langgraph:t1 is a "
    )
    assert (
        "LangGraph thread (source langgraph) and its app runs it: the flightlog kernel does not run it"
        in line
    )
    assert "nothing would stop; stop it where it runs: the graph advances only inside your app's" in line
    assert _ledger(db, "langgraph:t1") == before  # no fence, no operation_cancelled, no cancelled status
    assert flightlog_cli(db, "import", str(SAMPLES / "spotter_short.jsonl"))[0] == 0
    (imported,) = [
        r["session_id"]
        for r in json.loads(flightlog_cli(db, "ls", "--json")[1])
        if r["source"] == "import:claude-code"
    ]
    before = _ledger(db, imported)
    code, out, err = flightlog_cli(db, "abort", imported, "--json")
    assert (code, out) == (2, "") and len(err.splitlines()) == 1, err
    assert f"session {imported}: abort refused: session {imported} is an imported claude-code" in err
    assert "stop that agent where it runs" in err and _ledger(db, imported) == before


def test_the_python_abort_and_the_dashboards_abort_refuse_a_langgraph_thread(tmp_path: Path) -> None:
    from flightlog.kernel.abort import abort
    from flightlog.kernel.errors import AbortRefused

    db = tmp_path / "lg.db"
    waiting_thread(db)
    before = _ledger(db, "langgraph:t1")
    with SqliteStore(db) as store:
        try:
            abort(store, "langgraph:t1", requested_by="ada")
        except AbortRefused as exc:
            assert (exc.session_id, exc.source) == ("langgraph:t1", "langgraph")
            assert "graph.invoke or graph.stream" in exc.reason
        else:
            raise AssertionError("abort of a LangGraph thread was not refused")
    assert _ledger(db, "langgraph:t1") == before
    with TestClient(create_app(opener(db), token=TOKEN), base_url="http://127.0.0.1:8000") as client:
        client.cookies.set("flightlog_ui_8000", Auth(TOKEN).cookie_value)
        response = client.post(
            "/runs/abort",
            data={
                "csrf": Auth(TOKEN).csrf,
                "session_id": "langgraph:t1",
                "operator": "ada",
                "confirm": "yes",
            },
            headers={"Origin": "http://127.0.0.1:8000", "Accept": "application/json"},
        )
    assert response.status_code == 409, response.text
    assert "not aborted: session langgraph:t1: abort refused" in response.text
    assert _ledger(db, "langgraph:t1") == before
