"""The approvals queue's cold call reads the keys of only the sessions the store-wide pass finds
(:meth:`Store.session_keys_among`, positions by :meth:`Store.session_positions`), not a row per session:
its pages (count, sessions, ``before``/``shown``, the ``earlier``/``later`` starts) equal what a listing of
every session's key gives, at every ``start`` and page size, on a mixed store (rows saying ``suspended``, a
ledger wait under a row edited to ``completed``, ended runs, an aborted wait, an import, a run that never
waited, ties in ``created_at_ms``), on SQLite and PostgreSQL; a store of few waits still reaches the warm
call that takes no pass."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flightlog.events import Custom, RunStarted
from flightlog.kernel.rowcheck import sessions_may_wait
from flightlog.store import Store, open_store
from flightlog.store.base import SessionRecord
from flightlog.web import views

from .helpers import cli, suspended_run
from .test_row_trust import set_status
from .test_wait_pass import end, record, suspend


def mixed(url: str) -> list[str]:
    """A store of every kind of session the queue tells apart; the ids that wait, oldest first."""
    hidden = suspended_run(url)
    aborted = suspended_run(url)
    assert cli(url, "abort", aborted)[0] == 0
    with open_store(url) as store:
        record(store, "ended", RunStarted(run_id="ended", goal="g"), suspend(), end())
        record(store, "never", RunStarted(run_id="never", goal="g"), Custom(custom_kind="note", payload={}))
        record(store, "imported", Custom(custom_kind="import_source", payload={}), suspend())
        for i in range(7):
            record(store, f"w{i}", RunStarted(run_id=f"w{i}", goal="g"), suspend())
        record(store, "idle", RunStarted(run_id="idle", goal="g"))
        for sid, created in (("w5", 5), ("ended", 5), ("w1", 5), ("never", 7), ("w6", 1)):  # ties, moves
            row = store.get_session(sid)
            store.set_session_details(sid, task=row.task, created_at_ms=created, metadata=row.metadata)
    set_status(url, hidden, "completed")  # a wait the row hides
    set_status(url, "idle", "suspended")  # a row saying suspended over a ledger that never waited
    with open_store(url, read_only=True) as store:
        return [k[0] for k in store.session_keys() if k[0] in {hidden, *(f"w{i}" for i in range(7))}]


def listed(store: Store, start: int, limit: int | None, *, exact: bool) -> tuple[Any, ...]:
    """The page a listing of every session's key gives (the queue before ``session_keys_among``):
    candidates the pass's sessions and the rows saying ``suspended`` (with ``exact``, those whose fold
    waits), positions their indices in the listing; unpaged (``limit`` None), every one."""
    start = start if limit is not None else 0
    may = sessions_may_wait(store)
    cache = views.PendingCache()
    candidates = [
        (i, k)
        for i, k in enumerate(store.session_keys())
        if (k[0] in may or k[1] == "suspended") and (not exact or cache._of(store, k, may) is not None)
    ]
    before = [i for i, _ in candidates if i < start]
    after = [(i, k[0]) for i, k in candidates if i >= start]
    page = after[:limit] if limit is not None else after
    earlier = before[-limit] if limit and len(before) >= limit else (0 if before else None)
    later = after[limit][0] if limit is not None and len(after) > limit else None
    return len(candidates), len(before), [sid for _, sid in page], earlier, later


def paged(queue: views.Queue) -> tuple[Any, ...]:
    shown = [*queue.suspended]
    return queue.total, queue.before, shown, queue.earlier, queue.later


def test_the_cold_pages_equal_the_listings(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    waits = mixed(url)
    with open_store(url, read_only=True) as store:
        count = len(store.session_keys())
        for set_pass, exact in ((0, False), (10_000, True)):
            monkeypatch.setattr(views, "SET_PASS", set_pass)
            for start, limit in itertools.product(range(count + 2), (0, 1, 2, 3, None)):
                queue = views.PendingCache().queue(store, start=start, limit=limit)
                want = listed(store, start, limit, exact=exact)
                assert queue.exact is exact
                # a page lists the waits among the sessions it covers (the aborted run and the idle row
                # are covered, folded and left off)
                total, before, page, earlier, later = want
                assert paged(queue) == (total, before, [s for s in page if s in waits], earlier, later)
                assert queue.shown == len(page)
            assert paged(views.PendingCache().queue(store))[2] == waits  # unpaged: every wait


def test_the_cold_call_lists_no_key_of_the_sessions_the_pass_rules_out(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    waits = mixed(url)
    monkeypatch.setattr(views, "SET_PASS", 2)  # more waits than that: the pass, then no listing
    with open_store(url, read_only=True) as store:
        first = listed(store, 0, 3, exact=False)
        second = listed(store, first[4], 3, exact=False)

        def refused(*args: object, **kwargs: object) -> Any:
            raise AssertionError("the cold queue listed every session")

        monkeypatch.setattr(type(store), "session_keys", refused)
        monkeypatch.setattr(type(store), "list_sessions", refused)
        cache = views.PendingCache()
        queue = cache.queue(store, limit=3)
        assert queue.total == len(waits) + 2 and not queue.exact  # + the aborted run, the idle row
        assert paged(queue) == (*first[:2], [s for s in first[2] if s in waits], *first[3:])
        found = cache.queue(store, start=first[4], limit=3)
        assert paged(found) == (*second[:2], [s for s in second[2] if s in waits], *second[3:])
        assert found.earlier == 0 and found.later is not None


def test_a_store_of_few_waits_still_reaches_the_call_without_a_pass(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    waits = mixed(url)
    with open_store(url) as store:
        for i in range(12):  # more sessions that never waited than SET_PASS below
            record(store, f"n{i}", RunStarted(run_id=f"n{i}", goal="g"))
    passes: list[int] = []

    def counted(store: Store) -> set[str]:
        passes.append(1)
        return sessions_may_wait(store)

    monkeypatch.setattr(views, "sessions_may_wait", counted)
    monkeypatch.setattr(views, "SET_PASS", 10)  # as many may wait (+ aborted, idle)
    with open_store(url, read_only=True) as store:
        cache = views.PendingCache()
        answers = [cache.queue(store, limit=3) for _ in range(4)]
    # cold: the pass alone; then the keys and the pass (the rest cached as not waiting); then keys only
    assert passes == [1, 1]
    assert all([*a.suspended] == waits[:3] and a.exact and a.total == len(waits) for a in answers)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from(["a", "B", "a:x", "é", "z", "Z", "ab", "b"]), st.integers(0, 3), st.booleans()
        ),
        max_size=8,
        unique_by=lambda row: row[0],
    ),
    ids=st.sets(st.sampled_from(["a", "B", "a:x", "é", "z", "Z", "ab", "b", "gone"])),
    start=st.integers(0, 10),
)
def test_keys_among_equal_the_listing_by_property(
    tmp_path: Path, rows: list[tuple[str, int, bool]], ids: set[str], start: int
) -> None:
    db = tmp_path / f"p{len(list(tmp_path.iterdir()))}.db"
    with open_store(str(db)) as store:
        for sid, created, waiting in rows:
            status = "suspended" if waiting else "running"
            store.create_session(SessionRecord(session_id=sid, created_at_ms=created, status=status))
        assert store.session_keys_among(ids, "suspended", start) == Store.session_keys_among(
            store, ids, "suspended", start
        )
        assert store.session_positions(ids) == Store.session_positions(store, ids)
