"""Attacks on the head read path (``langgraph.head`` records, content-linked list deltas) by a hostile writer
with SQL access to the ledger file but not the signing key, each on a real graph (a messages channel, an
``interrupt()`` pending), written by one saver and read by a new saver and store (a new process's view); and
the proof that what the path serves is what the full fold serves. A finding is a test that failed on the
branch under attack (committed first as a strict xfail, then fixed)."""

from __future__ import annotations

import json
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import HumanMessage, RemoveMessage
from langgraph.types import Command

import flightlog
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


def test_a_body_chain_reaching_back_past_the_first_window_is_still_a_head_read(
    db: Path, store: Store
) -> None:
    """Time travel: a turn continued from a checkpoint several turns back. The head record's body chain
    then reaches back past the rows first read (the signed head less 64): the read fetches the older rows
    too, and must still find the record it is serving in them (not fold the rows before it again)."""
    graph = _graph(FlightlogSaver(store))
    for turn in range(12):
        graph.invoke({"messages": [HumanMessage(f"question {turn}")]}, _cfg())
    older = list(graph.get_state_history(_cfg()))[21]  # seven turns back
    graph.update_state(older.config, {"messages": [HumanMessage("back in time")]})
    graph.invoke({"messages": [HumanMessage("and on from there")]}, _cfg())
    want = graph.get_state(_cfg())
    head = json.loads(_kind_rows(db, HEAD_KIND)[-1][1])["payload"]
    signed = store.get_session(session_id_for("t")).head_seq + 1
    assert min(head["bodies"]) < signed - 64  # the record names rows before the first window
    with _fresh(db) as (fresh, _, counting):
        assert _snapshot(fresh.get_state(_cfg())) == _snapshot(want)
        assert "t" in fresh.checkpointer._heads  # served from the head record, not folded
        assert counting.rows < signed  # the fold reads every row


# ─── the proof: a head read serves what the full fold serves ────────────────────────────────────────────
_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("turn"), st.sampled_from(["hello", "ship?", "more"])),
        st.tuples(st.just("resume"), st.sampled_from(["yes", "no"])),
        st.tuples(st.just("rewind"), st.integers(1, 12)),  # update_state on an older checkpoint
        st.tuples(st.just("replay"), st.integers(1, 12)),  # invoke(None) from an older checkpoint
        st.tuples(st.just("remove"), st.integers(0, 5)),  # RemoveMessage of an earlier message
        st.tuples(st.just("edit"), st.just("an edit")),  # update_state on the latest: no stop
    ),
    min_size=1,
    max_size=7,
)


def _play(graph: Any, op: tuple[str, Any]) -> None:
    """One user action on thread ``t``."""
    kind, arg = op
    state = graph.get_state(_cfg())
    if kind == "turn" and not state.next:
        graph.invoke({"messages": [HumanMessage(arg)]}, _cfg())
    elif kind == "resume" and state.next:
        graph.invoke(Command(resume=arg), _cfg())
    elif kind in ("rewind", "replay"):
        history = list(graph.get_state_history(_cfg()))
        if len(history) > arg:
            older = history[arg].config
            if kind == "rewind":
                graph.update_state(older, {"messages": [HumanMessage("a rewind")]})
            else:
                graph.invoke(None, older)
    elif kind == "remove" and len(state.values.get("messages", [])) > arg:
        graph.update_state(_cfg(), {"messages": [RemoveMessage(id=state.values["messages"][arg].id)]})
    elif kind == "edit" and state.values:
        graph.update_state(_cfg(), {"messages": [HumanMessage(arg)]})


@settings(max_examples=12, deadline=None)
@given(ops=_OPS)
def test_a_head_read_serves_what_the_full_fold_serves(ops: list[tuple[str, Any]]) -> None:
    """Random threads of turns, interrupts and resumes, rewinds and replays from older checkpoints,
    removals and edits, each ending with a turn (a stop): a new process's head read equals the full fold
    (a third saver, folding), and is really a head read when nothing follows the last head record."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "lg.db"
        with flightlog.open_store(str(db)) as store:
            graph = _graph(FlightlogSaver(store))
            graph.invoke({"messages": [HumanMessage("first")]}, _cfg())
            for op in ops:
                _play(graph, op)
            if graph.get_state(_cfg()).next:
                graph.invoke(Command(resume="done"), _cfg())
            graph.invoke({"messages": [HumanMessage("last")]}, _cfg())
        with _fresh(db) as (fresh, _, _):
            got = fresh.get_state(_cfg())
            assert "t" in fresh.checkpointer._heads  # served from the head record
        with _fresh(db) as (folding, _, _):
            assert _snapshot(got) == _snapshot(_full_fold(folding))
