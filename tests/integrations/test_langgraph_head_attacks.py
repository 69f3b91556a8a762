"""Attacks on the head read path (``langgraph.head`` records, content-linked list deltas) by a hostile writer
with SQL access to the ledger file but not the signing key, each on a real graph (a messages channel, an
``interrupt()`` pending), written by one saver and read by a new saver and store (a new process's view); and
the proof that what the path serves is what the full fold serves. A finding is a test that failed on the
branch under attack (committed first as a strict xfail, then fixed)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from flightlog.integrations.langgraph import HEAD_KIND, FlightlogSaver, session_id_for
from flightlog.ledger import chain_hash, leaf_hash, merkle_root
from flightlog.store.base import Store

from .test_langgraph_head import _cfg, _fresh, _graph, _snapshot, _write_thread


def _kind_rows(db: Path, kind: str, thread: str = "t") -> list[tuple[int, bytes]]:
    """``(seq, bytes)`` of thread ``thread``'s ``custom`` events of kind ``kind``, in ledger order."""
    raw = sqlite3.connect(db)
    try:
        rows = raw.execute(
            "SELECT seq, event FROM events WHERE session_id = ? ORDER BY seq", (session_id_for(thread),)
        ).fetchall()
    finally:
        raw.close()
    return [(seq, bytes(data)) for seq, data in rows if json.loads(data).get("custom_kind") == kind]


def _append_forged(db: Path, forged: list[bytes], thread: str = "t") -> int:
    """Append ``forged`` rows to ``thread``'s session as a writer without the key can: each chained onto the
    last row, the session row's head and Merkle root updated to match (an unsigned tail); the first new
    seq."""
    sid = session_id_for(thread)
    raw = sqlite3.connect(db)
    try:
        rows = raw.execute(
            "SELECT seq, event, hash FROM events WHERE session_id = ? ORDER BY seq", (sid,)
        ).fetchall()
        leaves = [leaf_hash(bytes(data)) for _, data, _ in rows]
        first = seq = rows[-1][0] + 1
        prev = rows[-1][2]
        for data in forged:
            digest = chain_hash(prev, seq, data)
            raw.execute(
                "INSERT INTO events (session_id, seq, kind, event, prev_hash, hash, recorded_at_ms)"
                " VALUES (?, ?, 'custom', ?, ?, ?, 0)",
                (sid, seq, data, prev, digest),
            )
            leaves.append(leaf_hash(data))
            seq, prev = seq + 1, digest
        raw.execute(
            "UPDATE sessions SET head_seq = ?, head_hash = ?, merkle_root = ? WHERE session_id = ?",
            (seq - 1, prev, merkle_root(leaves).hex(), sid),
        )
        raw.commit()
    finally:
        raw.close()
    return first


def _full_fold(graph: Any) -> Any:
    """The latest state as the full fold reads it (``get_state_history`` folds the whole thread)."""
    return next(iter(graph.get_state_history(_cfg())))


def _canonical(record: dict[str, Any]) -> bytes:
    return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _an_older_head_replayed(db: Path, store: Store) -> bytes:
    """An older head record of thread ``t``, replayed byte for byte."""
    return _kind_rows(db, HEAD_KIND)[-4][1]


def _a_head_naming_another_threads_messages(db: Path, store: Store) -> bytes:
    """Thread ``t``'s latest head record with its ``messages`` value taken from thread ``o``'s."""
    _graph(FlightlogSaver(store)).invoke({"messages": [HumanMessage("another user's secret")]}, _cfg("o"))
    theirs = json.loads(_kind_rows(db, HEAD_KIND, "o")[-1][1])["payload"]["values"]["messages"]
    record = json.loads(_kind_rows(db, HEAD_KIND)[-1][1])
    record["payload"]["values"]["messages"] = theirs
    return _canonical(record)


@pytest.mark.parametrize("forge", [_an_older_head_replayed, _a_head_naming_another_threads_messages])
def test_a_head_record_appended_after_the_last_signature_is_not_believed(
    db: Path, store: Store, forge: Callable[[Path, Store], bytes]
) -> None:
    """The full fold ignores head records (the checkpoint rows are the truth), so a head record a writer
    without the key chains after the last signed checkpoint must not change what a head read serves: it
    would roll the thread back to an older turn, or serve another thread's messages."""
    want = _write_thread(store, 8)
    forged = forge(db, store)
    _append_forged(db, [forged])
    with _fresh(db) as (graph, _, _):
        got = graph.get_state(_cfg())
        assert _snapshot(_full_fold(graph)) == _snapshot(want)  # the fold is not fooled
    assert _snapshot(got) == _snapshot(want)
