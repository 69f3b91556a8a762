"""``flightlog pending`` on effects in doubt (new-user pass, session 17).

* A run killed between a side effect's intent and its completion left the call in doubt, but ``pending``
  listed nothing until a ``resume`` had found it. Now, once the read model finds the run abandoned (no
  heartbeat, no event within the lease), ``pending`` lists it as in doubt, saying that a resume comes first
  (no gate is open: ``approve`` refuses it, and says so). A live run's call in flight is not listed.
* The in-doubt row printed its kind twice and spent the width on the intent's key, while what approve and
  deny do was only in ``--json`` and the dashboard. Its text now says what each decision does, every line
  within 100 columns.

The killed run is a real ``flightlog run`` in a subprocess that SIGKILLs itself at the test-only crash point
``effect.intent`` (:mod:`flightlog.testing.crashpoints`); the lease is judged at a fixed clock (the moment the
process died, then a minute later), never by waiting for it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import flightlog.live
from flightlog.kernel import Agent, Kernel, tool
from flightlog.kernel.execution import IN_DOUBT_WARNING
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.store import SqliteStore

from . import cli_agents
from .helpers import cli

TESTS = Path(__file__).parents[1]
SPEC = "kernel.cli_agents:noting_agent"
pytestmark = pytest.mark.usefixtures("fresh_notes")


def _killed_mid_call(db: Path) -> tuple[str, int]:
    """``flightlog run`` the noting agent until it dies just after note ``n1``'s intent is durable; the
    session id and the wall clock (ms) once the process is gone."""
    env = {
        **os.environ,
        "FLIGHTLOG_TEST_CRASH_AT": "effect.intent:1",
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-m", "flightlog", "--db", str(db), "run", SPEC, "--goal", "note", "-q"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == -9, done.stderr  # SIGKILL at the crash point
    died = flightlog.live.wall_ms()
    with SqliteStore(db, read_only=True) as store:
        (record,) = store.list_sessions()
        assert record.status == "running" and [
            e.idempotency_key for e in store.pending_effects(record.session_id)
        ]
    return str(record.session_id), died


def _clock_at(monkeypatch: pytest.MonkeyPatch, now_ms: int) -> None:
    """The read model's clock (liveness: :func:`flightlog.live.list_run_views`) stopped at ``now_ms``."""
    monkeypatch.setattr(flightlog.live, "wall_ms", lambda: now_ms)


def test_a_killed_runs_call_is_in_doubt_before_any_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "k.db"
    sid, died = _killed_mid_call(db)

    _clock_at(monkeypatch, died)  # within the lease: the read model cannot tell it from a live run yet
    code, out, err = cli(db, "pending")
    assert (code, out) == (0, "nothing is waiting for a decision\n"), err

    _clock_at(monkeypatch, died + 60_000)  # a minute later: abandoned
    code, out, err = cli(db, "pending")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f'{sid}  turn 2  n1  note({{"text": "hello"}})'
    said = " ".join(line.strip() for line in lines[1:])
    assert said == (
        "in doubt: its run was killed mid-call: the effect started, no completion is recorded, and nothing "
        f"drives the run; {IN_DOUBT_WARNING} nothing to approve yet: `flightlog resume {sid}` settles it (the "
        "tool's reconcile) or stops on it for a decision: approve runs it again, deny marks it failed"
    )
    assert max(map(len, lines)) <= 100
    (row,) = json.loads(cli(db, "pending", "--json")[1])
    assert (row["call_id"], row["kind"], row["decision"], row["run_abandoned"]) == (
        "n1",
        "effect_in_doubt",
        None,
        True,
    )
    assert row["arguments"] == '{"text": "hello"}' and "killed or crashed mid-call" in row["reason"]

    code, out, err = cli(db, "approve", sid, "n1")  # no gate is open: refused, saying what comes first
    assert code == 2 and out == "", err
    assert "is in doubt (its effect started, no completion is recorded) but no gate is open yet" in err
    assert f"`flightlog resume {sid}` settles it" in err

    code, out, err = cli(db, "resume", sid, "--spec", SPEC, "-q")  # no reconcile: a human decides
    assert code == 3 and "suspended (effect_in_doubt)" in out, err
    assert cli_agents.NOTES == []  # never silently re-run
    code, out, err = cli(db, "pending")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f'{sid}  turn 2  n1  note({{"text": "hello"}})' and max(map(len, lines)) <= 100
    assert lines[-2:] == [
        f"  approve runs it again: flightlog approve {sid} n1",
        f"  deny marks it failed, never run again: flightlog deny {sid} n1",
    ]
    assert json.loads(cli(db, "pending", "--json")[1])[0]["run_abandoned"] is False
    assert cli(db, "approve", sid, "n1", "--as", "ops")[0] == 0
    code, out, err = cli(db, "resume", sid, "--spec", SPEC, "-q")
    assert code == 0 and "completed" in out, err
    assert cli_agents.NOTES == ["hello"]  # run again once, as approved


def holding_agent() -> tuple[Agent, threading.Event, threading.Event]:
    """An agent whose one side-effect call ``h1`` (tool ``hold``) sets ``started`` and then waits for
    ``release`` (at most 120 s), then answers "done": its intent is durable while the test holds it."""
    started, release = threading.Event(), threading.Event()

    @tool(effect="side_effect")
    def hold(text: str) -> str:
        """Wait until the test lets go."""
        started.set()
        assert release.wait(120)
        return f"held {text}"

    provider = ScriptedProvider([calls(call("hold", {"text": "x"}, id="h1")), reply("done")], by_turn=True)
    return Agent(name="holder", route=[provider], tools=[hold]), started, release


def test_a_live_runs_call_in_flight_is_not_in_doubt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run whose side effect is running right now (intent durable, completion not yet): ``pending`` lists
    nothing (the read model's clock held at the moment the tool started); once the tool returns, the run
    completes."""
    db = tmp_path / "live.db"
    agent, started, release = holding_agent()
    status: list[str] = []

    def drive() -> None:
        with SqliteStore(db) as store:
            status.append(
                Kernel(store, agent).run_sync("hold on", session_id="live", handle_signals=False).status
            )

    worker = threading.Thread(target=drive)
    worker.start()
    try:
        assert started.wait(120)  # the tool runs: its intent is durable, its completion is not
        _clock_at(monkeypatch, flightlog.live.wall_ms())
        with SqliteStore(db, read_only=True) as store:
            assert [e.idempotency_key for e in store.pending_effects("live")] == ["live:1:h1"]
        code, out, err = cli(db, "pending", "--json")
        assert (code, json.loads(out)) == (0, []), err
    finally:
        release.set()
        worker.join(120)
    assert status == ["completed"]


def test_the_dashboard_lists_a_killed_runs_call_in_doubt_in_pendings_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A killed run's in-doubt call has no gate open yet; the run's page (its Abandoned section) lists it
    as ``pending`` words it: in doubt, and that ``flightlog resume`` comes first. The approvals queue
    (``/`` and ``/api/runs``) lists it too, in the same words, marked in doubt (no Approve/Deny form) with
    a link to the session; on main it did not (it read only the index of waiting runs)."""
    from contextlib import contextmanager

    from fastapi.testclient import TestClient
    from markupsafe import escape

    import flightlog.web.views
    from flightlog.kernel.approvals import abandoned_in_doubt_words
    from flightlog.web.app import create_app
    from flightlog.web.security import Auth

    db = tmp_path / "k.db"
    sid, died = _killed_mid_call(db)

    @contextmanager
    def open_db(read_only: bool) -> Iterator[SqliteStore]:
        with SqliteStore(db, read_only=read_only) as store:
            yield store

    token = "test-token-0123456789abcdef"
    said, todo = abandoned_in_doubt_words(sid)
    with TestClient(create_app(open_db, token=token), base_url="http://127.0.0.1:8000") as client:
        client.cookies.set("flightlog_ui_8000", Auth(token).cookie_value)
        monkeypatch.setattr(flightlog.web.views, "wall_ms", lambda: died)  # within the lease: maybe live
        page = client.get("/session", params={"id": sid}).text
        assert '<ul class="in-doubt">' not in page and '<section id="abandoned" hidden>' in page
        assert 'class="in-doubt' not in client.get("/").text  # maybe live: not in the queue either
        assert client.get("/api/runs").json()["in_doubt"] == []
        monkeypatch.setattr(flightlog.web.views, "wall_ms", lambda: died + 60_000)  # a minute later
        page = client.get("/session", params={"id": sid}).text
        queue = client.get("/").text
        (data,) = client.get("/api/runs").json()["in_doubt"]
    approvals = queue.split('<section id="approvals">')[1].split("</section>")[0]
    (item,) = approvals.split('<li class="in-doubt warn">')[1:]
    item = item.split("</li>")[0]
    href = f"/session?id={sid}"
    assert item == (
        f'<code>note n1 (turn 2)</code> of <a href="{href}">{sid}</a> (abandoned): in doubt: '
        f"{escape(said)}. {escape(todo)}"
    )
    assert 'name="decision"' not in approvals  # nothing to approve: no form
    assert data == {
        "session": sid,
        "href": href,
        "call": "note n1 (turn 2)",
        "said": said,
        "todo": todo,
        "run": "abandoned",
    }
    assert '<section id="abandoned">' in page
    (listed,) = page.split('<ul class="in-doubt">')[1].split("</ul>")[0].split("<li>")[1:]
    assert listed.startswith("<code>note n1 (turn 2)</code>: in doubt: its run was killed mid-call"), listed
    assert "flightlog resume " + sid in listed and "approve runs it again, deny marks it failed" in listed
    assert IN_DOUBT_WARNING.split(":")[0] in listed and todo.split(":")[0] in listed and said[:40] in listed


def test_an_aborted_runs_call_in_flight_is_listed_in_doubt_until_a_resume(tmp_path: Path) -> None:
    """A run ``flightlog abort`` stopped while its side effect ran (intent durable, completion refused: the
    writer was fenced off) is paused with that call in doubt. On main ``pending`` listed nothing; now it
    lists the call, says the run was aborted mid-call and that ``flightlog resume`` settles it first."""
    db = tmp_path / "paused.db"
    agent, started, release = holding_agent()
    status: list[str] = []
    errors: list[BaseException] = []

    def drive() -> None:
        try:
            with SqliteStore(db) as store:
                status.append(
                    Kernel(store, agent).run_sync("hold on", session_id="held", handle_signals=False).status
                )
        except BaseException as exc:  # the fenced writer's error, kept for the assertion below
            errors.append(exc)

    worker = threading.Thread(target=drive)
    worker.start()
    try:
        assert started.wait(120)  # the tool runs: its intent is durable, its completion is not
        code, out, err = cli(db, "abort", "held", "--as", "ops")
        assert code == 0 and out.startswith("aborted held: its run is paused"), err
    finally:
        release.set()
        worker.join(120)
    assert not worker.is_alive() and (status or errors)  # its completion was refused: nothing recorded
    with SqliteStore(db, read_only=True) as store:
        assert [e.idempotency_key for e in store.pending_effects("held")] == ["held:1:h1"]
    code, out, err = cli(db, "ls")
    assert code == 0 and "paused" in out, (out, err)

    code, out, err = cli(db, "pending")
    assert (code, err) == (0, "")  # its row's 'cancelled' is what makes it paused: no row warning
    lines = out.splitlines()
    assert lines[0] == 'held  turn 1  h1  hold({"text": "x"})'
    said = " ".join(line.strip() for line in lines[1:])
    assert said == (
        "in doubt: its run was aborted mid-call (paused): the effect started, no completion is recorded, and "
        f"nothing drives the run; {IN_DOUBT_WARNING} nothing to approve yet: `flightlog resume held --spec "
        "MODULE:ATTR` settles it (the tool's reconcile) or stops on it for a decision: approve runs it again, "
        "deny marks it failed"
    )  # a run started from Python records no agent spec: its resume needs --spec
    assert max(map(len, lines)) <= 100
    (row,) = json.loads(cli(db, "pending", "--json")[1])
    assert (row["call_id"], row["kind"], row["decision"], row["run_abandoned"], row["run_paused"]) == (
        "h1",
        "effect_in_doubt",
        None,
        False,
        True,
    )
    assert row["reason"].startswith("effect_in_doubt: its run was aborted mid-call (paused")
    code, out, err = cli(db, "approve", "held", "h1")  # no gate is open: refused, resume first
    assert (code, out) == (2, ""), err
    assert "is in doubt (its effect started, no completion is recorded) but no gate is open yet" in err
    # a run started from Python records no agent spec: the refusal names the resume that works
    assert "killed or aborted, `flightlog resume held --spec MODULE:ATTR` settles it" in " ".join(err.split())
    code, out, err = cli(db, "deny", "held", "h1")  # deny refuses it in the same words
    assert (code, out) == (2, ""), err
    assert "killed or aborted, `flightlog resume held --spec MODULE:ATTR` settles it" in " ".join(err.split())
    # the dashboard: the approvals queue and the run's page (its Aborted section) list it in the same words
    from contextlib import contextmanager

    from fastapi.testclient import TestClient
    from markupsafe import escape

    from flightlog.kernel.approvals import abandoned_in_doubt_words
    from flightlog.web.app import create_app
    from flightlog.web.security import Auth

    @contextmanager
    def open_db(read_only: bool) -> Iterator[SqliteStore]:
        with SqliteStore(db, read_only=read_only) as store:
            yield store

    token = "test-token-0123456789abcdef"
    said, todo = abandoned_in_doubt_words(
        "held", paused=True, resume="flightlog resume held --spec MODULE:ATTR"
    )
    assert said.startswith("its run was aborted mid-call (paused): the effect started")
    with TestClient(create_app(open_db, token=token), base_url="http://127.0.0.1:8000") as client:
        client.cookies.set("flightlog_ui_8000", Auth(token).cookie_value)
        queue = client.get("/").text
        (data,) = client.get("/api/runs").json()["in_doubt"]
        page = client.get("/session", params={"id": "held"}).text
    assert (data["session"], data["call"], data["run"], data["said"], data["todo"]) == (
        "held",
        "hold h1 (turn 1)",
        "paused",
        said,
        todo,
    )
    approvals = queue.split('<section id="approvals">')[1].split("</section>")[0]
    assert (
        '<li class="in-doubt warn"><code>hold h1 (turn 1)</code> of <a href="/session?id=held">held</a> '
        f"(paused): in doubt: {escape(said)}. {escape(todo)}</li>"
    ) in approvals
    aborted = page.split('<section id="aborted">')[1].split("</section>")[0]
    (listed,) = aborted.split('<ul class="in-doubt">')[1].split("</ul>")[0].split("<li>")[1:]
    assert listed == f"<code>hold h1 (turn 1)</code>: in doubt: {escape(said)}. {escape(todo)}</li>"
