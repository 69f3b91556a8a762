"""The store-wide pass that decides which sessions may wait (:func:`sessions_may_wait`, the stored events
holding the mark, :meth:`Store.marked_ends`; how it finds them: test_mark_index.py) answers as the per-session rule (:func:`session_may_wait`)
on the same bytes, on SQLite and PostgreSQL: a wait found, an ended run skipped, an import skipped, a run
that never suspended skipped, and a ``sessions`` row edited to hide a wait still listed by the dashboard's
queue when it takes the pass (:data:`flightlog.web.views.SET_PASS` lowered so a small store takes it)."""

from __future__ import annotations

import pytest

from flightlog.encoding import canonical_bytes
from flightlog.events import Custom, Event, RunStarted, RunTerminal, Suspended
from flightlog.kernel.rowcheck import SUSPENDED_MARK, row_warning, session_may_wait, sessions_may_wait
from flightlog.notarization import SEAL_KIND
from flightlog.recorder import Recorder
from flightlog.store import Store, open_store
from flightlog.web import views

from .helpers import execute, suspended_run
from .test_row_trust import set_status


def record(store: Store, session_id: str, *events: Event) -> None:
    recorder = Recorder.create(store, session_id=session_id, source="kernel")
    recorder.append_many(list(events))


def suspend(turn: int = 1) -> Suspended:
    return Suspended(turn=turn, reason="awaiting approval", pending_calls=["c1"])


def end() -> RunTerminal:
    return RunTerminal(reason="completed", turns_used=1, total_tokens=10)


def test_the_pass_answers_as_the_per_session_rule(url: str) -> None:
    waits = suspended_run(url)
    with open_store(url) as store:
        record(store, "never", RunStarted(run_id="never", goal="g"), Custom(custom_kind="note", payload={}))
        record(store, "ended", RunStarted(run_id="ended", goal="g"), suspend(), end())
        record(
            store,
            "sealed",
            RunStarted(run_id="sealed", goal="g"),
            suspend(),
            end(),
            Custom(custom_kind=SEAL_KIND, payload={"size": 3, "root": "", "status": "completed"}),
        )
        record(
            store,
            "resumed",
            RunStarted(run_id="resumed", goal="g"),
            suspend(),
            Custom(custom_kind="note", payload={}),
        )
        record(store, "imported", Custom(custom_kind="import_source", payload={}), suspend())
        record(store, "marked", Custom(custom_kind="note", payload={"text": SUSPENDED_MARK.decode()}))
        may = sessions_may_wait(store)
        assert may == {waits, "resumed"}  # "resumed": no resume event here, so its wait may be open
        for rec in store.list_sessions():
            assert (rec.session_id in may) is session_may_wait(store, rec), rec.session_id
        generic = Store.marked_ends(store, SUSPENDED_MARK)  # the backend-neutral default, row by row
        assert store.marked_ends(SUSPENDED_MARK) == generic
        assert [seq for seq, _ in generic["sealed"]] == [0, 2, 3]
        assert "never" not in generic and "marked" not in generic  # an escaped mark inside a string
        among = ["sealed", waits, "never", "gone"]  # the byte search over these sessions' events only
        assert store.marked_ends(SUSPENDED_MARK, among) == {k: generic[k] for k in ("sealed", waits)}
        assert Store.marked_ends(store, SUSPENDED_MARK, among) == store.marked_ends(SUSPENDED_MARK, among)
        assert store.marked_ends(SUSPENDED_MARK, []) == {}
        assert sessions_may_wait(store, among) == {waits}


def test_an_end_spelled_with_an_escape_is_still_read_as_the_end(url: str) -> None:
    """A last row whose bytes spell ``run_terminal`` with a JSON escape (written behind flightlog's back:
    no canonical writer makes it) decodes to the end, and both rules read it so: the pass's byte check
    that skips decoding a row provably not an end does not skip it."""
    with open_store(url) as store:
        record(store, "escaped", RunStarted(run_id="escaped", goal="g"), suspend())
        record(store, "open", RunStarted(run_id="open", goal="g"), suspend())
    data = canonical_bytes(end()).replace(b'"run_terminal"', b'"run\\u005fterminal"')
    literal = f"decode('{data.hex()}', 'hex')" if "://" in url else f"X'{data.hex()}'"
    execute(
        url,
        "INSERT INTO events (session_id, seq, kind, event, prev_hash, hash, recorded_at_ms) "
        f"VALUES ('escaped', 2, 'custom', {literal}, 'x', 'y', 0)",
    )
    with open_store(url, read_only=True) as store:
        assert store.marked_ends(SUSPENDED_MARK)["escaped"][-1] == (2, data)
        assert sessions_may_wait(store) == {"open"}
        assert not session_may_wait(store, store.get_session("escaped"))


@pytest.mark.parametrize("status", ["completed", "running"])
def test_the_queue_lists_a_wait_the_row_hides_through_the_pass(
    url: str, status: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(views, "SET_PASS", 0)
    sid = suspended_run(url)
    with open_store(url) as store:
        record(store, "ended", RunStarted(run_id="ended", goal="g"), suspend(), end())
    set_status(url, sid, status)
    with open_store(url, read_only=True) as store:
        queue = views.PendingCache().queue(store)
    assert [(c.session_id, c.call_id) for calls in queue.suspended.values() for c in calls] == [(sid, "n1")]
    assert queue.warnings == ({sid: row_warning(sid, status)} if status == "completed" else {})
