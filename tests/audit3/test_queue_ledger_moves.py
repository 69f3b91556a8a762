"""The approvals queue's cache of folds (:class:`flightlog.web.views.PendingCache`) and edits of the
``events`` rows that leave the ``sessions`` row (the cache's key) as it was: a row inserted past the
recorded head, an existing row's bytes rewritten. Each call checks the ledgers of the answers its folds
gave (``Store.ledger_marks``: row count, last seq and hash, a sum an edit moves), so the next call answers
as a fresh cache does. Before, a cached wait stayed listed after a ``run_terminal`` was inserted past the
head (or written over the ``suspended`` row), and a wait inserted past an ended run's head stayed hidden,
until the row moved. Both cache modes (:data:`~flightlog.web.views.SET_PASS`: every key listed, or the
store-wide pass each call), on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from flightlog.encoding import canonical_bytes
from flightlog.events import Event, RunStarted
from flightlog.store import open_store
from flightlog.web import views

from .helpers import execute
from .test_wait_pass import end, record, suspend


def _literal(url: str, data: bytes) -> str:
    return f"decode('{data.hex()}', 'hex')" if "://" in url else f"X'{data.hex()}'"


def _insert(url: str, sid: str, seq: int, event: Event) -> None:
    execute(
        url,
        "INSERT INTO events (session_id, seq, kind, event, prev_hash, hash, recorded_at_ms) "
        f"VALUES ('{sid}', {seq}, '{event.kind}', {_literal(url, canonical_bytes(event))}, 'x', 'y', 0)",
    )


def _waits(store_url: str, cache: views.PendingCache) -> tuple[list[str], list[str]]:
    """What ``cache`` lists, and what a fresh cache lists."""
    with open_store(store_url, read_only=True) as store:
        return sorted(cache.queue(store).suspended), sorted(views.PendingCache().queue(store).suspended)


@pytest.fixture(params=[10_000, 0], ids=["listed", "pass"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(views, "SET_PASS", request.param)
    return int(request.param)


def _stores(url: str) -> dict[str, int]:
    """``a`` and ``b`` wait, ``c`` waited and ended: each session's head seq."""
    with open_store(url) as store:
        for sid in "ab":
            record(store, sid, RunStarted(run_id=sid, goal="g"), suspend())
        record(store, "c", RunStarted(run_id="c", goal="g"), suspend(), end())
        return {sid: store.get_session(sid).head_seq for sid in "abc"}


@pytest.mark.parametrize("edit", ["insert", "update"])
def test_a_cached_wait_the_ledger_ended_is_not_listed(url: str, mode: int, edit: str) -> None:
    heads = _stores(url)
    cache = views.PendingCache()
    for _ in range(2):  # cold, then warm
        assert _waits(url, cache) == (["a", "b"], ["a", "b"])
    if edit == "insert":
        _insert(url, "a", heads["a"] + 1, end())
    else:  # the suspended row's bytes, written over with an end's
        execute(
            url,
            f"UPDATE events SET event = {_literal(url, canonical_bytes(end()))} "
            f"WHERE session_id = 'a' AND seq = {heads['a']}",
        )
    assert _waits(url, cache) == (["b"], ["b"])
    assert _waits(url, cache) == (["b"], ["b"])


def test_a_wait_inserted_past_an_ended_runs_head_is_listed(url: str, mode: int) -> None:
    heads = _stores(url)
    cache = views.PendingCache()
    for _ in range(2):
        assert _waits(url, cache) == (["a", "b"], ["a", "b"])
    _insert(url, "c", heads["c"] + 1, suspend(2))
    fresh = _waits(url, views.PendingCache())[1]
    assert "c" in fresh  # the ledger now waits (what a fresh cache lists)
    assert _waits(url, cache) == (fresh, fresh)
