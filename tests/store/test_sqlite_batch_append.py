"""SQLite's batch append inside a transaction checks the head, the fencing token and the taken seqs once per
batch (``SqliteStore._append_batch``), where it used to re-check the head and epoch on every row.

The claim: it refuses exactly what the shared path (:meth:`flightlog.store.sql.SqlStore.append_events`:
read the head and epoch, decide, then write) refuses, with the same error naming the same seq, epochs and
session, writes what it writes when nothing is refused, and when it refuses has written nothing, so the
transaction stays usable; even a store with a row past its head (edited outside flightlog), where the
per-row check (and, until the shared path looked for stored rows past the head too, the shared path)
wrote the rows before the taken one and then failed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flightlog.errors import AppendConflict, SessionNotFound, StaleWriter, StoreError
from flightlog.ledger import CompactRange, leaf_hash
from flightlog.store import SessionRecord, SqliteStore
from flightlog.store.base import NewEvent, SessionHead
from flightlog.store.sql import SqlStore
from flightlog.testing.store_contract import chained_rows

_WRONGS = ("none", "epoch", "prev_hash", "seq_ahead", "seq_behind", "session", "past_head")


def _seeded(store: SqliteStore, stored: int, epoch: int) -> None:
    """Session ``s-1`` with ``stored`` events at authority epoch ``epoch``."""
    store.create_session(SessionRecord(session_id="s-1"))
    if stored:
        rows, head = chained_rows([f"e{i}" for i in range(stored)])
        store.append_events("s-1", rows, head)
    for _ in range(epoch):
        store.bump_authority_epoch("s-1")


def _state(store: SqliteStore) -> tuple[Any, ...]:
    record = store.get_session("s-1")
    rows = [(e.seq, e.kind, e.event_bytes, e.prev_hash, e.hash) for e in store.read_events("s-1")]
    return record.head_seq, record.head_hash, record.merkle_root, rows


def _raw_row(store: SqliteStore, row: NewEvent) -> None:
    """Store ``row`` without moving the head (what only an edit outside flightlog can do)."""
    with store.transaction():
        store._conn.execute(
            "INSERT INTO events (session_id, seq, kind, event, prev_hash, hash, recorded_at_ms)"
            " VALUES (?, ?, ?, ?, ?, ?, 0)",
            ("s-1", row.seq, row.kind, row.event_bytes, row.prev_hash, row.hash),
        )


def _batch(store: SqliteStore, size: int, stored: int) -> tuple[list[NewEvent], SessionHead]:
    """``size`` rows that extend the ``stored`` events of ``s-1``, and the head they move it to."""
    existing = list(store.read_events("s-1"))
    tree = CompactRange()
    for row in existing:
        tree.append(leaf_hash(row.event_bytes))
    prev = existing[-1].hash if existing else "GENESIS"
    return chained_rows([f"n{i}" for i in range(size)], start=stored, prev=prev, tree=tree)


def _case(
    store: SqliteStore, wrong: str, size: int, stored: int, offset: int
) -> tuple[str, list[NewEvent], SessionHead]:
    """The append a case makes: ``wrong`` names what is wrong with it (``offset``: where the row past the
    head sits, for ``past_head``)."""
    rows, head = _batch(store, size, stored)
    session = "s-1"
    if wrong == "prev_hash":
        rows = [dataclasses.replace(rows[0], prev_hash="0" * 64), *rows[1:]]
    elif wrong == "seq_ahead":
        rows = [dataclasses.replace(r, seq=r.seq + 1) for r in rows]
    elif wrong == "seq_behind" and stored:
        rows = [dataclasses.replace(r, seq=r.seq - 1) for r in rows]
    elif wrong == "session":
        session = "s-missing"
    elif wrong == "past_head":
        _raw_row(store, rows[offset % size])
    return session, rows, head


def _outcome(
    append: Any, store: SqliteStore, case: tuple[str, Sequence[NewEvent], SessionHead], epoch: int
) -> Any:
    """What an append does inside an open transaction: ``(error type, its fields)`` or None, and the
    session's state before and after it."""
    session, rows, head = case
    error = None
    with store.transaction():
        before = _state(store)
        try:
            append(store, session, rows, head, epoch=epoch)
        except StoreError as exc:
            error = (type(exc).__name__, vars(exc))
        after = _state(store)
    return error, before, after


@settings(max_examples=120, deadline=None)
@given(
    wrong=st.sampled_from(_WRONGS),
    size=st.integers(1, 6),
    stored=st.integers(0, 3),
    epoch=st.integers(0, 2),
    offset=st.integers(0, 5),
)
def test_batch_append_refuses_what_the_shared_path_refuses_and_writes_nothing_then(
    wrong: str, size: int, stored: int, epoch: int, offset: int
) -> None:
    writer_epoch = epoch if wrong != "epoch" else epoch + 1 if epoch == 0 else epoch - 1
    outcomes = []
    for append in (SqliteStore.append_events, SqlStore.append_events):
        with closing(SqliteStore(":memory:")) as store:
            _seeded(store, stored, epoch)
            case = _case(store, wrong, size, stored, offset)
            outcomes.append(_outcome(append, store, case, writer_epoch))
    (error, before, after), (shared_error, shared_before, shared_after) = outcomes
    assert before == shared_before
    if wrong == "past_head":
        # the shared path writes the rows before the stored one, then names the lowest seq stored by then
        # (one it wrote itself when the stored row is not the first): compared by type, and the seq pinned
        taken = stored + offset % size
        assert error == (
            "AppendConflict",
            {"_fields": {"session_id": "s-1", "seq": taken}, "session_id": "s-1", "seq": taken},
        )
        assert shared_error is not None and shared_error[0] == "AppendConflict"
    else:
        assert error == shared_error
    if error is None:
        assert after == shared_after
        assert len(after[3]) == len(before[3]) + size
    else:
        assert after == before  # nothing written, also where the shared path wrote rows before failing


def test_a_row_past_the_head_refuses_the_batch_naming_it_and_writes_nothing(tmp_path: Path) -> None:
    with closing(SqliteStore(tmp_path / "db.sqlite")) as store:
        _seeded(store, 2, 0)
        rows, head = _batch(store, 4, 2)
        one, one_head = _batch(store, 1, 2)
        _raw_row(store, rows[2])  # seq 4 stored, the head still at 1
        before = _state(store)
        with store.transaction():
            with pytest.raises(AppendConflict) as info:
                store.append_events("s-1", rows, head, epoch=0)
            assert _state(store) == before
            store.append_events("s-1", one, one_head, epoch=0)  # the transaction is still usable
        assert (info.value.session_id, info.value.seq) == ("s-1", 4)
        assert _state(store)[0] == 2


@pytest.mark.parametrize(
    ("wrong", "error", "fields"),
    [
        ("epoch", StaleWriter, {"epoch": 0, "current_epoch": 1}),
        ("prev_hash", AppendConflict, {"seq": 2}),
        ("seq_ahead", AppendConflict, {"seq": 2}),
        ("seq_behind", AppendConflict, {"seq": 1}),
        ("session", SessionNotFound, {"session_id": "s-missing"}),
    ],
)
def test_a_refused_batch_names_what_refused_it(
    tmp_path: Path, wrong: str, error: type[StoreError], fields: dict[str, Any]
) -> None:
    with closing(SqliteStore(tmp_path / "db.sqlite")) as store:
        _seeded(store, 2, 1)
        session, rows, head = _case(store, wrong, 5, 2, 0)
        before = _state(store)
        with store.transaction(), pytest.raises(error) as info:
            store.append_events(session, rows, head, epoch=0 if wrong == "epoch" else 1)
        assert {name: getattr(info.value, name) for name in fields} == fields
        assert _state(store) == before
