"""The conversation page on long sessions: each seq-slider move folds from a kept prefix (read under the
verification the page shows, never before it), the transcript is drawn a page at a time, and a reused
verification says how old it is."""

# ruff: noqa: F811  (the fixtures imported from a sibling test module are parameters here)
from __future__ import annotations

import html
import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from flightlog.cli.demo_context import demo_agent
from flightlog.events import Compressed, Custom, LlmCompleted, Rollbacked, RunStarted
from flightlog.kernel import Kernel
from flightlog.messages import Message
from flightlog.recorder import Recorder
from flightlog.store import SqliteStore
from flightlog.web import conversation as conv
from flightlog.web import views

from .test_conversation_verify_cache import _tamper
from .test_web_http import client  # noqa: F401  (shared fixture)


def _chat(db_path: Path, session_id: str, answers: int) -> None:
    """A session: ``run_started`` (seq 0), then one assistant answer per seq, ``answer N`` at seq N."""
    with SqliteStore(db_path) as store:
        rec = Recorder.create(store, session_id=session_id)
        rec.append(RunStarted(run_id=session_id, goal="start"))
        for n in range(1, answers + 1):
            rec.append(LlmCompleted(turn=n, message=Message.text("assistant", f"answer {n:03d}")))


def _answers(page: str) -> list[str]:
    return re.findall(r"answer \d{3}", page)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int | None]]:
    """The ``(start, stop)`` of each read the conversation's fold makes."""
    made: list[tuple[int, int | None]] = []
    real = conv.iter_events

    def counted(store: Any, session_id: str, *, start: int = 0, stop: int | None = None) -> Iterator[Any]:
        made.append((start, stop))
        return real(store, session_id, start=start, stop=stop)

    monkeypatch.setattr(conv, "iter_events", counted)
    return made


def test_slider_moves_fold_from_the_kept_prefix_before_their_seq(
    client: TestClient, db_path: Path, reads: list[tuple[int, int | None]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(conv.FoldCache, "STRIDE", 4)
    _chat(db_path, "long", 30)
    assert _answers(client.get("/conversation", params={"id": "long"}).text)[-1] == "answer 030"
    assert reads == [(0, 31)]  # the first load folds it all, keeping the fold as of seqs 3, 7, ..., 27
    for at, start in ((17, 16), (9, 8), (29, 28), (3, 4)):
        page = client.get("/conversation", params={"id": "long", "at": str(at)}).text
        assert _answers(page) == [f"answer {n:03d}" for n in range(1, at + 1)]
        assert reads[-1] == (start, at + 1)  # only the events past the kept prefix (seq 3 itself: none)


def test_a_kept_prefix_gives_what_a_fresh_fold_gives(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Compactions, rollbacks and in-place rewrites folded on from a kept copy change only that copy."""
    monkeypatch.setattr(conv.FoldCache, "STRIDE", 1)
    with SqliteStore(db_path) as store:
        demo = Kernel(store, demo_agent()).run_sync("do all the steps", handle_signals=False).session_id
        rec = Recorder.create(store, session_id="rb")
        rec.append(RunStarted(run_id="rb", goal="start"))
        rec.append(LlmCompleted(turn=1, message=Message.text("assistant", "first answer")))
        rec.append(LlmCompleted(turn=2, message=Message.text("assistant", "second answer")))
        rec.append(Rollbacked(turn=2, checkpoint_history_len=2))
        rewrite = {"origin": 1, "index": 0, "part": 0, "stage": "snip", "tokens_before": 3, "text": "cut"}
        rec.append(Custom(custom_kind="context_rewrite", payload={"turn": 3, "rewrites": [rewrite]}))
        rec.append(Compressed(turn=3, archived_seq_range=(1, 1), action="snip_compact"))
        for sid in (demo, "rb"):
            folds = conv.FoldCache().use(sid, "key")
            seqs = list(range(store.get_session(sid).head_seq + 1))
            random.Random(7).shuffle(seqs)
            for at in seqs:
                for since in (None, max(0, at - 3)):
                    fresh = conv.conversation(store, sid, at, since)
                    assert conv.conversation(store, sid, at, since, folds=folds) == fresh, (sid, at, since)
        assert "first answer" in str(conv.conversation(store, "rb", 1, None, folds=folds)["rows"])


def test_a_long_transcript_is_drawn_a_page_at_a_time(
    client: TestClient, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(conv, "MAX_MESSAGES", 4)
    _chat(db_path, "paged", 10)  # the goal (a user message) and 10 answers: 11 messages
    page = client.get("/conversation", params={"id": "paged", "at": "9"}).text
    assert _answers(page) == ["answer 006", "answer 007", "answer 008", "answer 009"]
    assert "6 earlier message(s) not drawn here" in page and 'id="conv-later"' not in page
    seen: list[list[str]] = []
    while (link := re.search(r'id="conv-earlier" href="([^"]+)"', page)) is not None:
        page = client.get(html.unescape(link.group(1))).text
        seen.append(_answers(page))
    assert seen == [["answer 002", "answer 003", "answer 004", "answer 005"], ["answer 001"]]
    assert "start" in page and "earlier message(s)" not in page  # the first page: the goal and answer 1
    while (link := re.search(r'id="conv-later" href="([^"]+)"', page)) is not None:
        page = client.get(html.unescape(link.group(1))).text
        seen.append(_answers(page))
    assert seen[2:] == [
        ["answer 002", "answer 003", "answer 004", "answer 005"],
        ["answer 006", "answer 007", "answer 008", "answer 009"],
    ]
    assert client.get("/conversation", params={"id": "paged", "before": "x"}).status_code == 400


def test_the_page_says_when_the_check_it_shows_was_made(client: TestClient, db_path: Path) -> None:
    _chat(db_path, "aged", 2)
    first = client.get("/conversation", params={"id": "aged"}).text
    stamp = re.search(r'<span id="verified-at">verified (\d\d:\d\d:\d\d) UTC \(0s ago\)</span>', first)
    assert stamp is not None and "a kept result" not in first
    again = client.get("/conversation", params={"id": "aged", "at": "1"}).text
    assert f"verified {stamp.group(1)} UTC (" in again and "a kept result" in again

    now, wall = [100.0], [1_000_000.0]
    cache = views.VerificationCache(clock=lambda: now[0], wall=lambda: wall[0])
    with SqliteStore(db_path, read_only=True) as store:
        fresh = cache.check(store, "aged", reuse=True)
        now[0] += 12.7
        kept = cache.check(store, "aged", reuse=True)
    assert (fresh["reused"], fresh["age_s"], fresh["checked"]) == (False, 0, "13:46:40")
    assert (kept["reused"], kept["age_s"], kept["checked_at"]) == (True, 12, 1_000_000.0)


def test_the_transcript_is_read_again_with_each_new_check(
    client: TestClient, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An edit the ledger's mark cannot see (same length) is kept from the page only as long as the check
    beside it (the two were read together): the next check, here the session page's, reads it again too."""
    monkeypatch.setattr(conv.FoldCache, "STRIDE", 1)
    _chat(db_path, "edit", 3)
    assert "answer 002" in client.get("/conversation", params={"id": "edit"}).text
    _tamper(db_path, "UPDATE events SET event = replace(event, 'answer 002', 'ANSWER 002') WHERE seq = 2")
    kept = client.get("/conversation", params={"id": "edit", "at": "3"}).text
    assert "answer 002" in kept and "a kept result" in kept  # the page says its check is a kept one
    assert "This session fails verification." in client.get("/session", params={"id": "edit"}).text
    page = client.get("/conversation", params={"id": "edit", "at": "3"}).text
    assert "ANSWER 002" in page and "This session fails verification." in page
