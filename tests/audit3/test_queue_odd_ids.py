"""The approvals queue and ids a raw write leaves in a SQLite ``sessions`` row (a PostgreSQL ``text`` key
holds neither). An id holding U+0000 (refused by ``check_session_id`` now; an older store may hold one):
the waiting session is listed on its page, and the page before it links to it; before, the queue's lookups
of many ids (``json_each``) cut the id at the NUL, so the wait vanished and the ``later`` link was None,
cutting off the pages after. An id stored as a BLOB: counted and named unreadable, as the queue did before
it looked sessions up by id (the listing lists it under its text; ``get_session`` cannot find it); before
this fix it was dropped silently (``total`` one short).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from flightlog.events import RunStarted
from flightlog.store import open_store
from flightlog.store import sql as sql_module
from flightlog.web import views

from .helpers import execute
from .test_wait_pass import record, suspend


@pytest.mark.parametrize("status", ["completed", "suspended"])
def test_a_waiting_session_whose_id_holds_nul_is_on_the_queue(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, status: str
) -> None:
    db = str(tmp_path / "flightlog.db")
    ids = ["a", "b\x00", "c"]
    with monkeypatch.context() as patch:
        patch.setattr(sql_module, "check_session_id", lambda session_id: None)  # as a store from before it
        with open_store(db) as store:
            for sid in ids:
                record(store, sid, RunStarted(run_id=sid, goal="g"), suspend())
    execute(db, f"UPDATE sessions SET status = '{status}'")
    with open_store(db, read_only=True) as store:
        assert [k[0] for k in store.session_keys()] == ids
        for set_pass in (0, 10_000):  # the pages of the pass's candidates, and every fold
            monkeypatch.setattr(views, "SET_PASS", set_pass)
            whole = views.PendingCache().queue(store)
            assert sorted(whole.suspended) == ids, set_pass
            seen, start = [], 0
            for _ in range(len(ids) + 1):
                page = views.PendingCache().queue(store, start=start, limit=1)
                seen += list(page.suspended)
                if page.later is None:
                    break
                start = page.later
            assert seen == ids, (set_pass, seen)


@pytest.mark.parametrize("same_ms", [False, True])
def test_a_waiting_session_whose_id_is_a_blob_is_counted_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, same_ms: bool
) -> None:
    """The BLOB row is listed where the store lists it, ``created_at_ms`` then the stored id, SQLite's
    order putting every TEXT id before any BLOB: created between ``a`` and ``c`` it is second; created in
    the same millisecond as both, last. A paged queue that folds only its page names it on the page at
    that position and on no other; one that folds every session (exact) names it on every page, off the
    count. This test once took the creation times the clock gave: three rows in one millisecond (a fast
    machine) put the BLOB last, and the page it expected at position 1 named none."""
    db = str(tmp_path / "flightlog.db")
    ids = ["a", "b", "c"]
    with open_store(db) as store:
        for sid in ids:
            record(store, sid, RunStarted(run_id=sid, goal="g"), suspend())
    for n, sid in enumerate(ids):  # the listing's order pinned, not left to the clock
        execute(
            db,
            f"UPDATE sessions SET created_at_ms = {1000 if same_ms else 1000 * (n + 1)} WHERE session_id = '{sid}'",
        )
    execute(
        db,
        "UPDATE sessions SET session_id = CAST(session_id AS BLOB), status = 'completed' WHERE session_id = 'b'",
    )
    with open_store(db, read_only=True) as store:
        listed = [k[0] for k in store.session_keys()]
        assert listed == (["a", "c", "b"] if same_ms else ids), listed
        at = listed.index("b")
        for set_pass in (0, 10_000):
            monkeypatch.setattr(views, "SET_PASS", set_pass)
            for start in range(len(ids)):
                queue = views.PendingCache().queue(store, start=start, limit=1)
                assert queue.total == len(ids) - queue.exact, (set_pass, start, queue.total)
                named = queue.exact or start == at
                assert list(queue.unreadable) == (["b"] if named else []), (set_pass, start, queue.unreadable)
                if named:
                    assert "no session has the id 'b'" in queue.unreadable["b"]
