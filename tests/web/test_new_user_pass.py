"""A new user's pass over the dashboard (``flightlog ui``'s app, through its test client): the runs list's
goal of a run recorded without a task, the conversation's paging unit, what a conversation says once its run
ended (an approved gate no longer "waiting", a failed run's reason), and one word for an abandoned run on the
home page, its session page and the runs list."""

# ruff: noqa: F811  (the fixtures imported from a sibling test module are parameters here)
from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from flightlog import events as ev
from flightlog.kernel.approvals import approve
from flightlog.messages import Message, ToolCall, ToolResult
from flightlog.recorder import Recorder
from flightlog.store import SqliteStore
from flightlog.web import conversation as conv

from .conftest import dead_and_alive, resume_gated, run_gated
from .test_web_http import client  # noqa: F401  (shared fixture)


def _ended(page: str) -> str | None:
    """The conversation's line saying how the run ended, as text (None: the page has none)."""
    found = re.search(r'<p id="conv-ended"[^>]*>(.*?)</p>', page)
    return None if found is None else html.unescape(re.sub("<[^>]+>", "", found.group(1)))


def _runs_row(page: str, run_id: str) -> str:
    """The runs list's table row of ``run_id`` (its HTML)."""
    rows = [row for row in page.split("<tr ") if f"<code>{run_id}</code>" in row]
    assert len(rows) == 1, page
    return rows[0]


def test_the_runs_list_shows_the_goal_of_a_run_recorded_without_a_task(
    client: TestClient, db_path: Path
) -> None:
    with SqliteStore(db_path) as store:
        Recorder.create(store, session_id="untasked").append(
            ev.RunStarted(run_id="untasked", goal="sort the socks")
        )
        tasked = Recorder.create(store, session_id="tasked", task="the row task")
        tasked.append(ev.RunStarted(run_id="tasked", goal="the event goal"))
        assert store.get_session("untasked").task == ""
    page = client.get("/runs").text
    assert '<td class="goal"><span title="sort the socks">sort the socks</span></td>' in _runs_row(
        page, "untasked"
    )
    assert "the row task" in _runs_row(page, "tasked") and "the event goal" not in page  # the row's wins
    runs = client.get("/api/runs/page").json()["runs"]
    assert {r["run_id"]: r["goal"] for r in runs} == {
        "untasked": "sort the socks",
        "tasked": "the row task",
    }
    home = client.get("/").text
    assert "sort the socks" in home  # the run tree's task cell falls back the same way


def _tool_chat(db_path: Path, session_id: str, calls: int) -> None:
    """``run_started``, then per turn an assistant message with one call and its result: 1 + 2 * calls
    messages, each result drawn beside its call (1 + calls conversation rows)."""
    with SqliteStore(db_path) as store:
        rec = Recorder.create(store, session_id=session_id)
        rec.append(ev.RunStarted(run_id=session_id, goal="start"))
        for n in range(1, calls + 1):
            message = Message(
                role="assistant", tool_calls=[ToolCall(id=f"c{n}", name="echo", arguments="{}")]
            )
            rec.append(ev.LlmCompleted(turn=n, message=message))
            rec.append(
                ev.ToolCompleted(turn=n, results=[ToolResult(call_id=f"c{n}", output=f"result {n:03d}")])
            )


def test_the_earlier_link_and_its_label_count_the_same_messages(
    client: TestClient, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(conv, "MAX_MESSAGES", 4)
    _tool_chat(db_path, "tools", 10)  # 21 messages, 11 rows
    page = client.get("/conversation", params={"id": "tools"}).text
    assert "21 message(s) as of seq" in page
    assert re.findall(r"result \d{3}", page) == ["result 007", "result 008", "result 009", "result 010"]
    # the 4 rows drawn are messages 13..20 (each result a message of its own): 13 before them, not 7 rows
    label = re.search(r"(\d+) earlier message\(s\) not drawn here", page)
    link = re.search(r'id="conv-earlier" href="[^"]*before=(\d+)"', html.unescape(page))
    assert label is not None and link is not None, page
    assert label.group(1) == link.group(1) == "13"
    while (found := re.search(r'id="conv-earlier" href="([^"]+)"', page)) is not None:
        page = client.get(html.unescape(found.group(1))).text
        label = re.search(r"(\d+) earlier message\(s\) not drawn here", page)
        first = re.findall(r"result (\d{3})", page)[0]
        if label is not None:  # messages before the first drawn row: the goal and two per earlier call
            assert int(label.group(1)) == 1 + 2 * (int(first) - 1), (label.group(1), first)
    assert "start" in page and "earlier message(s)" not in page


def test_a_completed_gated_run_no_longer_says_waiting(client: TestClient, db_path: Path) -> None:
    run_gated(db_path, "gated")
    waiting = client.get("/conversation", params={"id": "gated"}).text
    assert "waiting for approval: writes need a human" in waiting
    assert _ended(waiting) is None  # suspended: not ended
    with SqliteStore(db_path) as store:
        approve(store, "gated", "w1", responder="alice", notary=None)
    assert resume_gated(db_path, "gated").status == "completed"
    done = client.get("/conversation", params={"id": "gated"}).text
    assert "waiting for approval" not in done, done
    assert "asked for approval: writes need a human" in done and "approved by alice" in done
    with SqliteStore(db_path) as store:
        head = store.get_session("gated").head_seq
    assert _ended(done) == f"As of seq {head} the run has ended: completed.", _ended(done)
    before = client.get("/conversation", params={"id": "gated", "at": str(head - 3)}).text
    assert _ended(before) is None  # as of an earlier seq the run had not ended


def test_a_failed_run_says_it_failed_and_why(client: TestClient, db_path: Path) -> None:
    with SqliteStore(db_path) as store:
        rec = Recorder.create(store, session_id="broke", task="do it")
        rec.append(ev.RunStarted(run_id="broke", goal="do it"))
        rec.append(ev.LlmCompleted(turn=1, message=Message.text("assistant", "trying")))
        rec.append(ev.RunTerminal(reason="provider exploded: 503", turns_used=1, total_tokens=5))
    page = client.get("/conversation", params={"id": "broke"}).text
    assert _ended(page) == "As of seq 2 the run has ended: failed (provider exploded: 503).", _ended(page)
    session = client.get("/session", params={"id": "broke"}).text
    assert "provider exploded: 503" in session  # the session page's terminal detail: the same words


def test_an_abandoned_run_reads_the_same_on_every_page(client: TestClient, db_path: Path) -> None:
    dead_and_alive(db_path)
    assert "running (abandoned)" in client.get("/session", params={"id": "dead"}).text
    page = client.get("/runs").text
    assert '<span class="badge state-running">running (abandoned)</span>' in _runs_row(page, "dead")
    assert '<span class="badge state-running">running</span>' in _runs_row(page, "alive")
    runs = client.get("/api/runs/page").json()["runs"]
    assert {r["run_id"]: r["abandoned"] for r in runs} == {"dead": True, "alive": False}
    assert client.get("/runs", params={"state": "running"}).text.count("running (abandoned)") == 1


def _text(fragment: str) -> str:
    """An HTML fragment as the words a reader sees."""
    return " ".join(html.unescape(re.sub("<[^>]+>", "", fragment)).split())


def test_the_session_page_names_the_goal_of_a_session_recorded_without_a_task(
    client: TestClient, db_path: Path
) -> None:
    with SqliteStore(db_path) as store:
        Recorder.create(store, session_id="untasked").append(
            ev.RunStarted(run_id="untasked", goal="sort the socks")
        )
        Recorder.create(store, session_id="tasked", task="the row task").append(
            ev.RunStarted(run_id="tasked", goal="the event goal")
        )
    untasked = client.get("/session", params={"id": "untasked"}).text
    assert '<p class="task">sort the socks</p>' in untasked  # as the runs list names it
    tasked = client.get("/session", params={"id": "tasked"}).text
    assert '<p class="task">the row task</p>' in tasked  # the row's task wins, as there


def _run_line(page: str) -> str | None:
    """The conversation header's line on how the run stands now, as text (None: the page has none)."""
    found = re.search(r'<p id="conv-run"[^>]*>(.*?)</p>', page)
    return None if found is None else _text(found.group(1))


def test_every_conversation_page_says_the_run_ended_and_when(
    client: TestClient, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(conv, "MAX_MESSAGES", 4)
    _tool_chat(db_path, "done", 10)  # 11 rows: three pages of 4
    ended_ms = 1_800_000_000_123  # 2027-01-15 08:00:00.123 UTC: after the rows the test wrote now
    with SqliteStore(db_path) as store:
        end = ev.RunTerminal(reason="provider exploded: 503", turns_used=10, total_tokens=50)
        Recorder.attach(store, "done").append_many([end], recorded_at_ms=[ended_ms])
        head = store.get_session("done").head_seq
    said = "The run ended: failed (provider exploded: 503), at 2027-01-15 08:00:00.123 UTC."
    latest = client.get("/conversation", params={"id": "done"}).text
    assert _run_line(latest) == said and _ended(latest) is not None
    earlier = re.search(r'id="conv-earlier" href="([^"]+)"', latest)
    assert earlier is not None
    paged_back = client.get(html.unescape(earlier.group(1))).text
    assert _ended(paged_back) is None  # the transcript's own ended line stays on the latest page
    assert _run_line(paged_back) == said  # the header says it on every page
    before_end = client.get("/conversation", params={"id": "done", "at": str(head - 5)}).text
    assert _ended(before_end) is None and _run_line(before_end) == said  # as of an earlier seq too


def test_an_open_run_s_conversation_says_its_state(client: TestClient, db_path: Path) -> None:
    run_gated(db_path, "gated")
    page = client.get("/conversation", params={"id": "gated"}).text
    assert _run_line(page) == "The run is waiting_input."
    dead_and_alive(db_path)
    assert (
        _run_line(client.get("/conversation", params={"id": "dead"}).text)
        == "The run is running (abandoned)."
    )
