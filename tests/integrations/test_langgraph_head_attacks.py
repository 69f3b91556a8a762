"""Attacks on the head read path (``langgraph.head`` records, content-linked list deltas) by a hostile writer
with SQL access to the ledger file but not the signing key, each on a real graph (a messages channel, an
``interrupt()`` pending), written by one saver and read by a new saver and store (a new process's view); and
the proof that what the path serves is what the full fold serves. A finding is a test that failed on the
branch under attack (committed first as a strict xfail, then fixed, or left a strict xfail saying why):

1. a head record chained after the last signature (replayed, or naming another thread's values) was
   believed over the checkpoint rows (fixed: only a signed one is);
2. a record whose body chain reaches back past the first window was looked up at a stale index, so the
   read fell back to the full fold (fixed);
3. writes whose checkpoint never came stayed listed as early by every later record, each later read
   reaching back to them (fixed: only ids above the record's);
4. a value named only by a row chained after the last signature was deserialized by the user's serde, by
   the fold too (fixed: such values go to a strict clone of the serde, and one it refuses is refused
   naming the row's seq).
"""

from __future__ import annotations

import hashlib
import json
import operator
import queue
import re
import sqlite3
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.base import create_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.errors import InvalidUpdateError
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command, interrupt
from pydantic import BaseModel

import flightlog
from child_lines import read_line
from flightlog.errors import LedgerIntegrityError
from flightlog.integrations import langgraph as lg
from flightlog.integrations.langgraph import FlightlogSaver, session_id_for
from flightlog.ledger import chain_hash, leaf_hash, merkle_root
from flightlog.store.base import Store

from .test_langgraph_head import TURNS, _cfg, _fresh, _graph, _snapshot, _tamper_row, _write_thread


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


def _serde_spy(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The bytes every saver's serde deserializes from now on (``loads_typed``), in order."""
    loaded: list[bytes] = []
    serde = type(FlightlogSaver(store).serde)
    loads = serde.loads_typed

    def spied(self: Any, typed: tuple[str, bytes]) -> Any:
        loaded.append(typed[1])
        return loads(self, typed)

    monkeypatch.setattr(serde, "loads_typed", spied)
    return loaded


def _count_fetches(store: Store) -> list[int]:
    """Record the number of handles of each ``get_artifacts`` call made on ``store``."""
    fetches: list[int] = []
    get = store.get_artifacts

    def counted(handles: Any) -> dict[str, bytes]:
        fetches.append(len(handles))
        return get(handles)

    store.get_artifacts = counted  # type: ignore[method-assign]
    return fetches


def _handle(content: bytes) -> str:
    return "sha256:" + hashlib.sha256(content).hexdigest()


def _canonical(record: dict[str, Any]) -> bytes:
    return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _an_older_head_replayed(db: Path, store: Store) -> bytes:
    """An older head record of thread ``t``, replayed byte for byte."""
    return _kind_rows(db, lg.HEAD_KIND)[-4][1]


def _a_head_naming_another_threads_messages(db: Path, store: Store) -> bytes:
    """Thread ``t``'s latest head record with a ``messages`` value naming thread ``o``'s latest list (a
    head record names only the values its body rows do not: here it names none)."""
    _graph(FlightlogSaver(store)).invoke({"messages": [HumanMessage("another user's secret")]}, _cfg("o"))
    stored = [
        json.loads(data)["payload"]["channels"]["messages"]
        for _, data in _kind_rows(db, lg.CHECKPOINT_KIND, "o")
        if b'"messages":{' in data
    ][-1]
    theirs = {k: stored[k] for k in ("depth", "ref", "type")}
    record = json.loads(_kind_rows(db, lg.HEAD_KIND)[-1][1])
    record["payload"].setdefault("values", {})["messages"] = theirs
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
    head = json.loads(_kind_rows(db, lg.HEAD_KIND)[-1][1])["payload"]
    signed = store.get_session(session_id_for("t")).head_seq + 1
    assert min(head["bodies"]) < signed - 64  # the record names rows before the first window
    with _fresh(db) as (fresh, _, counting):
        assert _snapshot(fresh.get_state(_cfg())) == _snapshot(want)
        assert "t" in fresh.checkpointer._heads  # served from the head record, not folded
        assert counting.rows < signed  # the fold reads every row


def test_writes_whose_checkpoint_never_came_do_not_make_every_later_read_reach_back(
    db: Path, store: Store
) -> None:
    """LangGraph saves a step's writes in the background, sometimes before the step's checkpoint: a writer
    killed between the two leaves writes whose checkpoint never comes. Each head record lists writes
    saved before their checkpoint (``early``) so the checkpoint put after it finds them; an orphan must
    not stay listed once a newer checkpoint is the latest (none older can be served), or every later head
    read reads the whole thread back to it."""
    saver = FlightlogSaver(store)
    graph = _graph(saver)
    graph.invoke({"messages": [HumanMessage("question 0")]}, _cfg())
    latest = saver.get_tuple(_cfg())
    assert latest is not None
    never = create_checkpoint(latest.checkpoint, None, 99)["id"]  # the step the killed writer was taking
    orphan: RunnableConfig = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": never}}
    saver.put_writes(orphan, [("messages", [AIMessage("lost")])], task_id="killed", task_path="~model")
    for turn in range(1, 30):
        graph.invoke({"messages": [HumanMessage(f"question {turn}")]}, _cfg())
    want = graph.get_state(_cfg())
    size = store.get_session(session_id_for("t")).head_seq + 1
    with _fresh(db) as (fresh, _, counting):
        assert _snapshot(fresh.get_state(_cfg())) == _snapshot(want)
        assert "t" in fresh.checkpointer._heads
        assert counting.rows < 100 < size // 2


CONSTRUCTED: list[str] = []  # each Planted built, by anyone: what an attacker's msgpack value would run


class Planted(BaseModel):
    """Stands for an attacker's type: building one records it (a real one would run its code)."""

    note: str

    def model_post_init(self, context: Any, /) -> None:
        CONSTRUCTED.append(self.note)


def _plant_unsigned_checkpoint(db: Path, store: Store) -> tuple[int, str]:
    """A writer without the key appends, after the last signature, a copy of the latest checkpoint event
    whose ``profile`` names an artifact of its own: msgpack naming :class:`Planted` (LangGraph's default
    serde imports and builds what such bytes name unless ``LANGGRAPH_STRICT_MSGPACK`` is set). The forged
    seq and the artifact's handle."""
    _write_thread(store, 3, ask=False)
    record = json.loads(_kind_rows(db, lg.CHECKPOINT_KIND)[-1][1])
    versions = FlightlogSaver(store).get_tuple(_cfg())
    assert versions is not None
    planted = FlightlogSaver(store).serde.dumps_typed(Planted(note="planted by a writer without the key"))
    CONSTRUCTED.clear()
    assert FlightlogSaver(store).serde.loads_typed(planted) == Planted(
        note="planted by a writer without the key"
    )
    assert CONSTRUCTED, "the user's serde builds what the bytes name: the attack is real"
    CONSTRUCTED.clear()
    store.put_artifact(planted[1], "application/octet-stream")
    record["payload"]["channels"] = {
        "profile": {
            "version": versions.checkpoint["channel_versions"]["profile"],
            "type": planted[0],
            "ref": _handle(planted[1]),
        }
    }
    return _append_forged(db, [_canonical(record)]), _handle(planted[1])


def test_a_value_named_only_by_an_unsigned_forged_row_is_not_deserialized(db: Path, store: Store) -> None:
    """Nothing signed vouches for a row after the last signature, so the value it names goes to a strict
    clone of the serde: the planted type is never built, and both the head read and the full fold refuse
    naming the forged row's seq and what to do."""
    forged, handle = _plant_unsigned_checkpoint(db, store)
    with _fresh(db) as (graph, _, _):
        with pytest.raises(LedgerIntegrityError) as head:
            graph.get_state(_cfg())
        with pytest.raises(LedgerIntegrityError) as fold:
            _full_fold(graph)
    for refused in (head.value, fold.value):
        assert refused.seq == forged
        assert handle in refused.reason and f"{__name__}.Planted" in refused.reason
        assert "flightlog audit langgraph:t" in refused.reason
    assert CONSTRUCTED == []


def test_an_unsigned_value_of_a_type_the_user_allows_is_read(db: Path, store: Store) -> None:
    """The strict clone keeps the user's explicit ``allowed_msgpack_modules``: a type listed there is
    vouched for by the user, and a value of it named by an unsigned row is read back."""
    _plant_unsigned_checkpoint(db, store)
    allowing = JsonPlusSerializer(allowed_msgpack_modules=[Planted])
    with flightlog.open_store(str(db)) as other:
        got = FlightlogSaver(other, serde=allowing).get_tuple(_cfg())
    assert got is not None
    assert got.checkpoint["channel_values"]["profile"] == Planted(note="planted by a writer without the key")


def test_another_writers_custom_value_is_read_once_it_signed_it(db: Path, store: Store) -> None:
    """Two writers on one thread (two processes' savers): rows the other one appended are read chained but
    not signature-checked, so its custom value is refused while no signature covers the row naming it
    (an ``update_state``, which does not stop the graph); once its run stops and signs, the first
    writer's read checks the signatures again and serves the value."""
    graph = _graph(FlightlogSaver(store))
    graph.invoke({"messages": [HumanMessage("question 0")]}, _cfg())
    value = Planted(note="written by the other process")
    with _fresh(db) as (other, _, _):
        other.update_state(_cfg(), {"profile": value})
        with pytest.raises(LedgerIntegrityError) as refused:
            graph.get_state(_cfg())
        signed = store.latest_checkpoint(session_id_for("t"))
        assert signed is not None and refused.value.seq is not None and refused.value.seq >= signed.size
        other.invoke({"messages": [HumanMessage("question 1")]}, _cfg())  # the run stops: signed
    got = graph.get_state(_cfg())
    assert got.values["profile"] == value and got.values["messages"][-1].content == "answer 3"


def test_a_writer_without_a_notary_reads_its_unsigned_rows_as_before(db: Path, store: Store) -> None:
    """``notary=None`` opts out of signatures: no row is signed, and values load with the saver's serde
    as they always did (what LangGraph's own savers do)."""
    _plant_unsigned_checkpoint(db, store)
    with flightlog.open_store(str(db)) as other:
        got = FlightlogSaver(other, notary=None).get_tuple(_cfg())
    assert got is not None and isinstance(got.checkpoint["channel_values"]["profile"], Planted)
    assert CONSTRUCTED == ["planted by a writer without the key"]


# ─── attacks the path holds against ─────────────────────────────────────────────────────────────────────
def _artifact(db: Path, handle: str) -> bytes:
    raw = sqlite3.connect(db)
    try:
        (content,) = raw.execute(
            "SELECT content FROM artifacts WHERE sha256 = ?", (handle.removeprefix("sha256:"),)
        ).fetchone()
    finally:
        raw.close()
    return bytes(content)


def _set_artifact(db: Path, handle: str, content: bytes | None) -> None:
    """Replace (or, ``None``, delete) the stored bytes under ``handle``, the handle left as it was."""
    raw = sqlite3.connect(db)
    try:
        raw.execute("DROP TRIGGER IF EXISTS artifacts_no_update")
        raw.execute("DROP TRIGGER IF EXISTS artifacts_no_delete")
        digest = handle.removeprefix("sha256:")
        if content is None:
            raw.execute("DELETE FROM artifacts WHERE sha256 = ?", (digest,))
        else:
            raw.execute("UPDATE artifacts SET content = ? WHERE sha256 = ?", (content, digest))
        raw.commit()
    finally:
        raw.close()


def _messages_chain(db: Path) -> list[dict[str, Any]]:
    """The latest ``messages`` list as stored (named by the last checkpoint row that changed it, which the
    latest head record's body rows include): each delta's header (plus its own ``handle``), newest first,
    down to the depth-1 delta."""
    handle = [
        json.loads(data)["payload"]["channels"]["messages"]["ref"]
        for _, data in _kind_rows(db, lg.CHECKPOINT_KIND)
        if b'"messages":{' in data
    ][-1]
    chain = []
    while True:
        header = lg._split_delta(_artifact(db, handle))
        assert header is not None
        chain.append({**header, "handle": handle})
        if header["d"] == 1:
            return chain
        handle = header["b"]


def _naming(db: Path, channel: str) -> int:
    """Seq of the last checkpoint event of thread ``t`` giving ``channel`` a value: the one the fold names
    when that value does not check."""
    return max(
        seq
        for seq, data in _kind_rows(db, lg.CHECKPOINT_KIND)
        if json.loads(data)["payload"]["channels"].get(channel, {}).get("type", "empty") != "empty"
    )


_TARGETS: dict[str, Callable[[list[dict[str, Any]]], str]] = {
    "the newest delta": lambda chain: chain[0]["handle"],
    "the highest anchor": lambda chain: next(d["handle"] for d in chain if d["d"] % lg.SEGMENT == 0),
    "the whole list under the chain": lambda chain: chain[-1]["b"],
    "a delta's elements an anchor names": lambda chain: chain[-1]["e"],
    "a delta's elements above the anchors": lambda chain: chain[1]["e"],
}


@pytest.mark.parametrize("how", ["altered", "missing", "swapped"])
@pytest.mark.parametrize("target", sorted(_TARGETS))
def test_a_list_chain_artifact_that_does_not_check_is_refused_before_serde_sees_it(
    db: Path, store: Store, monkeypatch: pytest.MonkeyPatch, target: str, how: str
) -> None:
    """Any artifact a read of a content-linked list uses (the newest link, the highest anchor, the whole
    list under the chain, the elements of a delta above the anchors or named by one) altered, deleted or
    swapped with another: refused naming the event that names the list, the bad bytes never reaching the
    serde."""
    _write_thread(store, TURNS, ask=False)
    chain = _messages_chain(db)
    assert len(chain) > 2 * lg.SEGMENT
    handle = _TARGETS[target](chain)
    original = _artifact(db, handle)
    bad = {handle}  # the artifacts that no longer check
    if how == "altered":
        _set_artifact(db, handle, original[:-2] + bytes([original[-2] ^ 1]) + original[-1:])
    elif how == "missing":
        _set_artifact(db, handle, None)
    else:
        other = chain[1]["handle"] if handle != chain[1]["handle"] else chain[2]["handle"]
        _set_artifact(db, handle, _artifact(db, other))
        _set_artifact(db, other, original)
        bad.add(other)
    wrong = {_artifact(db, h) for h in bad if how != "missing"}
    loaded = _serde_spy(store, monkeypatch)
    with _fresh(db) as (graph, _, _), pytest.raises(LedgerIntegrityError) as caught:
        graph.get_state(_cfg())
    assert caught.value.seq == _naming(db, "messages")
    assert any(h in caught.value.reason for h in bad)
    assert not any(data in wrong or data.startswith(lg.DELTA_MAGIC) for data in loaded)


def test_a_link_below_an_anchor_is_not_read_so_its_damage_does_not_reach_the_value(
    db: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The depth-1 link lies under an anchor, which names its elements and the whole list itself (both
    checked): a read does not fetch that link, so altering it changes nothing the read serves, and its
    bytes never reach the serde."""
    want = _write_thread(store, TURNS, ask=False)
    link = _messages_chain(db)[-1]["handle"]
    _set_artifact(db, link, _artifact(db, link)[:-1] + b" ")
    loaded = _serde_spy(store, monkeypatch)
    with _fresh(db) as (graph, _, _):
        assert _snapshot(graph.get_state(_cfg())) == _snapshot(want)
    assert not any(data.startswith(lg.DELTA_MAGIC) for data in loaded)


def test_an_altered_whole_value_is_refused_naming_the_event_that_stored_it(db: Path, store: Store) -> None:
    """``profile`` is set on turn 1 and never again: its artifact is named by the head record, its event
    is far before what the head read reads; altered, the read is refused naming that event."""
    _write_thread(store, 12)
    handle = json.loads(_kind_rows(db, lg.HEAD_KIND)[-1][1])["payload"]["values"]["profile"]["ref"]
    _set_artifact(db, handle, _artifact(db, handle).replace(b"turn 1", b"turn 2"))
    with _fresh(db) as (graph, _, _), pytest.raises(LedgerIntegrityError) as caught:
        graph.get_state(_cfg())
    assert caught.value.seq == _naming(db, "profile") and handle in caught.value.reason


def _delete_rows(db: Path, first: int, last: int | None = None) -> None:
    """Delete thread ``t``'s rows ``first..last`` (default: to its end) as SQL can; with ``last`` None the
    session row is moved back to the row before ``first`` (a truncated tail), else left alone."""
    sid = session_id_for("t")
    raw = sqlite3.connect(db)
    try:
        raw.execute("DROP TRIGGER IF EXISTS events_no_delete")
        stop = last if last is not None else 1 << 62
        raw.execute("DELETE FROM events WHERE session_id = ? AND seq BETWEEN ? AND ?", (sid, first, stop))
        if last is None:
            rows = raw.execute("SELECT event, hash FROM events WHERE session_id = ? ORDER BY seq", (sid,))
            kept = rows.fetchall()
            raw.execute(
                "UPDATE sessions SET head_seq = ?, head_hash = ?, merkle_root = ? WHERE session_id = ?",
                (first - 1, kept[-1][1], merkle_root([leaf_hash(bytes(e)) for e, _ in kept]).hex(), sid),
            )
        raw.commit()
    finally:
        raw.close()


_NAMED: dict[str, Callable[[dict[str, Any], int], int]] = {
    "the head record itself": lambda head, at: at,
    "the whole body its chain starts from": lambda head, at: head["bodies"][0],
    "a patch in its body chain": lambda head, at: head["bodies"][len(head["bodies"]) // 2],
    "its checkpoint's own event": lambda head, at: head["bodies"][-1],
    "a writes event it names (the interrupt)": lambda head, at: head["writes"][-1],
}


@pytest.mark.parametrize("target", sorted(_NAMED))
def test_a_row_the_head_record_names_edited_in_place_is_refused_naming_its_seq(
    db: Path, store: Store, target: str
) -> None:
    """Each row the head read uses (the record, the body chain from its whole body to the latest
    checkpoint's own event, the interrupt's writes) edited in place, one space added: refused naming it."""
    _write_thread(store, 12)
    at, data = _kind_rows(db, lg.HEAD_KIND)[-1]
    head = json.loads(data)["payload"]
    assert len(head["bodies"]) > 2 and head["writes"]
    seq = _NAMED[target](head, at)
    _tamper_row(db, seq, lambda data: data.replace(b"}", b" }", 1))
    with _fresh(db) as (graph, _, _), pytest.raises(LedgerIntegrityError) as caught:
        graph.get_state(_cfg())
    assert caught.value.seq == seq


@pytest.mark.parametrize("which", [-1, -2])
def test_a_deleted_head_record_is_refused_naming_its_seq(db: Path, store: Store, which: int) -> None:
    """The last head record, or the one before it (within the rows the read checks), deleted: a gap in
    the signed rows, refused naming the deleted seq."""
    _write_thread(store, 6)
    seq = _kind_rows(db, lg.HEAD_KIND)[which][0]
    _delete_rows(db, seq, seq)
    with _fresh(db) as (graph, _, _), pytest.raises(LedgerIntegrityError) as caught:
        graph.get_state(_cfg())
    assert caught.value.seq == seq


def test_a_truncated_signed_tail_is_refused(db: Path, store: Store) -> None:
    """The rows of the last turn (signed) cut off and the session row moved back: refused as truncated."""
    _write_thread(store, 6)
    first = _kind_rows(db, lg.HEAD_KIND)[-2][0] + 1
    _delete_rows(db, first)
    with _fresh(db) as (graph, _, _), pytest.raises(LedgerIntegrityError) as caught:
        graph.get_state(_cfg())
    assert caught.value.seq == first


def test_a_truncated_unsigned_tail_reads_as_the_fold_reads_it(db: Path, store: Store) -> None:
    """Rows after the last signature (a new input run to a static ``interrupt_before``, which tells the
    saver nothing: no stop, no signature) cut off: no key signs them, so neither the fold nor ``flightlog
    verify`` can tell; the head read serves what the fold serves (the state before that input), never a
    mix."""
    before = _write_thread(store, 4, ask=False)
    graph = _graph(FlightlogSaver(store))
    graph.invoke({"messages": [HumanMessage("unsigned")]}, _cfg(), interrupt_before=["model"])
    signed = store.latest_checkpoint(session_id_for("t"))
    assert signed is not None and signed.size < store.get_session(session_id_for("t")).head_seq + 1
    _delete_rows(db, signed.size)
    with _fresh(db) as (fresh, _, _):
        got = fresh.get_state(_cfg())
        assert "t" in fresh.checkpointer._heads
    with _fresh(db) as (folding, _, _):
        assert _snapshot(got) == _snapshot(_full_fold(folding)) == _snapshot(before)


@pytest.mark.parametrize("depth", [2, 10**9])
def test_a_forged_delta_that_does_not_descend_is_refused_in_bounded_reads(
    db: Path, store: Store, depth: int
) -> None:
    """A checkpoint row forged in the unsigned tail naming a crafted delta: one whose base claims a depth
    that does not descend (the only way to draw a loop: a real loop would need a sha256 cycle), or one
    claiming a depth of 10**9. Each step of a chain must be the artifact its successor names, one depth
    lower, so the walk ends at the first one that is not: refused naming the forged row, after a few
    fetches, by the head read and the fold alike."""
    _write_thread(store, 3, ask=False)
    real = _messages_chain(db)[0]
    upward = lg._delta_bytes({**{k: v for k, v in real.items() if k != "handle"}, "d": depth + 5})
    crafted = lg._delta_bytes(
        {"t": real["t"], "e": real["e"], "b": _handle(upward).removeprefix("sha256:"), "d": depth}
    )
    for content in (upward, crafted):
        store.put_artifact(content, "application/octet-stream")
    seq, data = _kind_rows(db, lg.CHECKPOINT_KIND)[-1]  # the latest checkpoint, its messages re-pointed
    record = json.loads(data)
    entry = record["payload"]["channels"]["messages"]
    record["payload"]["channels"]["messages"] = {**entry, "ref": _handle(crafted), "depth": depth}
    seq = _append_forged(db, [_canonical(record)])
    for attempt in range(2):  # the head read, then a saver that folds
        with _fresh(db) as (graph, other, _):
            fetches = _count_fetches(other)
            with pytest.raises(LedgerIntegrityError) as caught:
                if attempt == 0:
                    graph.get_state(_cfg())
                else:
                    _full_fold(graph)
            assert caught.value.seq == seq and "does not continue a chain" in caught.value.reason
            assert len(fetches) <= 4


# ─── other graphs and savers ────────────────────────────────────────────────────────────────────────────
@tool
def lookup(city: str) -> str:
    """The weather in ``city``."""
    return f"sunny in {city}"


def _agent_graph(saver: FlightlogSaver) -> Any:
    """``MessagesState`` agent: a model asking a ``ToolNode`` (``lookup``), then a ``review`` subgraph that
    asks a human (``interrupt()``) before the answer."""

    def agent(state: MessagesState) -> dict[str, Any]:
        last = state["messages"][-1]
        if isinstance(last, HumanMessage):
            call = {"name": "lookup", "args": {"city": last.content}, "id": f"call-{len(state['messages'])}"}
            return {"messages": [AIMessage("", tool_calls=[call])]}
        return {"messages": [AIMessage(f"the tool says: {last.content}")]}

    def approve(state: MessagesState) -> dict[str, Any]:
        answer = interrupt({"question": "send it?"})
        return {"messages": [AIMessage(f"reviewed: {answer}")]}

    review = StateGraph(MessagesState)
    review.add_node("approve", approve)
    review.add_edge(START, "approve")
    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode([lookup]))
    g.add_node("review", review.compile())
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", lambda s: "tools" if s["messages"][-1].tool_calls else "review")
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=saver)


def _deep(state: Any) -> Any:
    """A snapshot with its subgraph tasks' snapshots (``get_state(subgraphs=True)``)."""
    return (
        _snapshot(state),
        [None if not isinstance(t.state, type(state)) else _snapshot(t.state) for t in state.tasks],
    )


def test_an_agent_with_a_tool_node_and_a_subgraph_interrupt_reads_as_the_writer_has_it(
    db: Path, store: Store
) -> None:
    """A tool call through ``ToolNode`` and an interrupt inside a subgraph, over several turns: a new
    process's ``get_state`` (a head read) and ``get_state(subgraphs=True)`` equal the writer's and the full
    fold's, stopped at the subgraph's question and after the answer."""
    graph = _agent_graph(FlightlogSaver(store))
    for turn, city in enumerate(["Oslo", "Lima", "Pune"]):
        graph.invoke({"messages": [HumanMessage(city)]}, _cfg())
        for subgraphs in (False, True):
            want = graph.get_state(_cfg(), subgraphs=subgraphs)
            with _fresh(db) as (_, other, _):
                fresh = _agent_graph(FlightlogSaver(other))
                got = fresh.get_state(_cfg(), subgraphs=subgraphs)
                assert _deep(got) == _deep(want) and got.tasks[0].interrupts
                assert "t" in fresh.checkpointer._heads or subgraphs  # the subgraph's namespace folds
                assert _snapshot(_full_fold(fresh)) == _snapshot(want)
        graph.invoke(Command(resume=f"yes {turn}"), _cfg())
        want = graph.get_state(_cfg())
        assert want.values["messages"][-1].content == f"reviewed: yes {turn}"
        with _fresh(db) as (_, other, _):
            fresh = _agent_graph(FlightlogSaver(other))
            assert _snapshot(fresh.get_state(_cfg())) == _snapshot(want)
            assert "t" in fresh.checkpointer._heads


@pytest.mark.parametrize(("writer", "reader"), [(None, None), ("signed", None), (None, "signed")])
def test_a_saver_without_a_notary_reads_by_the_fold(
    db: Path, store: Store, writer: str | None, reader: str | None
) -> None:
    """``notary=None`` on either side: no signature to anchor a head record, so a reader folds (a signing
    reader of an unsigned thread audits it whole), and reads what the writer has."""
    notary: Any = lg.USER_NOTARY
    graph = _graph(FlightlogSaver(store, notary=notary if writer else None))
    for turn in range(4):
        graph.invoke({"messages": [HumanMessage(f"question {turn}")]}, _cfg())
    want = graph.get_state(_cfg())
    with _fresh(db) as (_, other, counting):
        fresh = _graph(FlightlogSaver(other, notary=notary if reader else None))
        assert _snapshot(fresh.get_state(_cfg())) == _snapshot(want)
        assert "t" not in fresh.checkpointer._heads
        assert counting.rows >= other.get_session(session_id_for("t")).head_seq + 1


def _copy_to_t(saver: FlightlogSaver, graph: Any) -> None:
    for turn in range(3):
        graph.invoke({"messages": [HumanMessage(f"source {turn}")]}, _cfg("source"))
    saver.copy_thread("source", "t")


_MARKERS: dict[str, Callable[[FlightlogSaver, Any], None]] = {
    "delete_thread": lambda saver, graph: saver.delete_thread("t"),
    "prune": lambda saver, graph: saver.prune(["t"]),
    "delete_for_runs": lambda saver, graph: saver.delete_for_runs(
        [graph.get_state(_cfg()).metadata.get("run_id") or "none"]
    ),
    "copy_thread": _copy_to_t,
}


@pytest.mark.parametrize("marker", sorted(_MARKERS))
@pytest.mark.parametrize("turns_after", [0, 1, 3])
def test_a_thread_marker_then_more_turns_reads_as_the_fold_reads_it(
    db: Path, store: Store, marker: str, turns_after: int
) -> None:
    """``delete_thread`` / ``prune`` / ``delete_for_runs`` / ``copy_thread`` (markers the fold honours), then
    0, 1 or 3 turns: a new process's read equals the writer's and the full fold's, whether the head
    record can serve it or the read falls back to the fold."""
    saver = FlightlogSaver(store)
    graph = _graph(saver)
    for turn in range(3):
        graph.invoke({"messages": [HumanMessage(f"question {turn}")]}, _cfg())
    _MARKERS[marker](saver, graph)
    for turn in range(turns_after):
        graph.invoke({"messages": [HumanMessage(f"after {turn}")]}, _cfg())
    want = graph.get_state(_cfg())
    with _fresh(db) as (fresh, _, _):
        got = fresh.get_state(_cfg())
    assert _snapshot(got) == _snapshot(want)
    with _fresh(db) as (folding, _, _):
        history = list(folding.get_state_history(_cfg()))
    assert [_snapshot(h) for h in history[:1]] == ([_snapshot(want)] if want.values else [])


class Items(TypedDict, total=False):
    items: Annotated[list[str], operator.add]


def test_a_list_whose_deltas_repeat_the_same_elements_reads_back_whole(db: Path, store: Store) -> None:
    """A plain ``operator.add`` list where every turn appends the same element (``step``): deltas share
    one elements artifact, read once per occurrence; the list reads back whole from a new process."""
    g = StateGraph(Items)
    g.add_node("step", lambda state: {"items": ["step"]})
    g.add_edge(START, "step")
    graph = g.compile(checkpointer=FlightlogSaver(store))
    for turn in range(40):
        graph.invoke({"items": ["same" if turn % 2 else f"input {turn}"]}, _cfg())
    want = graph.get_state(_cfg())
    assert want.values["items"].count("step") == 40
    with _fresh(db) as (_, other, counting):
        fresh = g.compile(checkpointer=FlightlogSaver(other))
        assert _snapshot(fresh.get_state(_cfg())) == _snapshot(want)
        assert "t" in fresh.checkpointer._heads and counting.rows < 100


def test_turns_by_a_saver_without_a_notary_after_signed_ones_are_folded_forward(
    db: Path, store: Store
) -> None:
    """Three turns by a signing saver, then two by one with ``notary=None`` (its head records unsigned, so
    not believed): a signing reader serves the last signed head record with the unsigned turns folded
    forward, which is what the writer and the full fold have."""
    graph = _graph(FlightlogSaver(store))
    for turn in range(3):
        graph.invoke({"messages": [HumanMessage(f"signed {turn}")]}, _cfg())
    unsigned = _graph(FlightlogSaver(store, notary=None))
    for turn in range(2):
        unsigned.invoke({"messages": [HumanMessage(f"unsigned {turn}")]}, _cfg())
    want = unsigned.get_state(_cfg())
    assert len(_kind_rows(db, lg.HEAD_KIND)) == 5
    with _fresh(db) as (fresh, _, _):
        assert _snapshot(fresh.get_state(_cfg())) == _snapshot(want)
        assert "t" in fresh.checkpointer._heads
        assert _snapshot(_full_fold(fresh)) == _snapshot(want)


# ─── other processes: a writer killed mid-run, a reader racing a writer ─────────────────────────────────
class _Writer:
    """A ``langgraph_head_writer.py`` process on ``db``; its stdout read line by line (waits on what it
    prints, never on a timer)."""

    def __init__(self, db: Path, errors: Path) -> None:
        self.errors = errors
        self.stderr = errors.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("langgraph_head_writer.py")), str(db)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
        )

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def expect(self, want: str) -> None:
        assert self.proc.stdout is not None
        line = read_line(self.proc, repr(want))  # "" when the process died
        assert line.strip() == want, (line, self.errors.read_text())

    def kill(self) -> None:
        self.proc.kill()  # SIGKILL: no cleanup, no commit of anything in flight
        self.proc.wait()
        self._release()

    def close(self) -> None:
        """Ask the process to end and wait for it; it must exit 0."""
        if self.proc.poll() is None:
            self.send("end")
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        code = self.proc.wait(timeout=300)
        self._release()
        assert code == 0, self.errors.read_text()

    def _release(self) -> None:
        for pipe in (self.proc.stdin, self.proc.stdout, self.stderr):
            if pipe is not None and not pipe.closed:
                pipe.close()


def test_a_writer_killed_mid_run_leaves_an_unsigned_tail_the_head_read_folds(
    db: Path, tmp_path: Path
) -> None:
    """The writer process is SIGKILLed inside a step, after the run's input checkpoint and its first step
    were committed but before the run stopped: the rows after the last signature are unsigned. A new
    process reads the head record the last signature covers and folds those rows forward: what the full
    fold reads, the interrupted input included; and the thread goes on."""
    writer = _Writer(db, tmp_path / "writer.err")
    try:
        writer.send("turns 3")
        for turn in range(3):
            writer.expect(f"turn {turn}")
        writer.expect("done")
        writer.send("block")
        writer.expect("blocked")
    finally:
        writer.kill()
    with _fresh(db) as (fresh, other, _):
        got = fresh.get_state(_cfg())
        assert "t" in fresh.checkpointer._heads
        signed = other.latest_checkpoint(session_id_for("t"))
        assert signed is not None and signed.size < other.get_session(session_id_for("t")).head_seq + 1
    with _fresh(db) as (folding, _, _):
        assert _snapshot(got) == _snapshot(_full_fold(folding))
    assert got.next == ("model",) and got.values["messages"][-1].content == "block"
    with _fresh(db) as (graph, _, _):
        graph.invoke(None, _cfg())  # the interrupted run goes on from the new process
    with _fresh(db) as (graph, _, _):
        assert graph.get_state(_cfg()).values["messages"][-1].content == "answer 7"
        assert "t" in graph.checkpointer._heads  # the run stopped and was signed: a head read again


def test_a_custom_value_left_unsigned_by_a_killed_writer_is_refused_naming_its_row(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As above, but the killed run's input holds a custom pydantic value (``langgraph_note.Note``, not a
    LangGraph safe type): nothing signed vouches for the rows naming it, so a new process's read refuses
    naming the row and ``flightlog audit``; a reader whose serde lists ``Note`` in
    ``allowed_msgpack_modules`` (the user vouching for the type) reads the value back."""
    writer = _Writer(db, tmp_path / "writer.err")
    try:
        writer.send("turns 1")
        writer.expect("turn 0")
        writer.expect("done")
        writer.send("block-note")
        writer.expect("blocked")
    finally:
        writer.kill()
    monkeypatch.syspath_prepend(str(Path(__file__).parent))  # the module the writer's value names
    from langgraph_note import Note

    with _fresh(db) as (_, other, _):
        signed = other.latest_checkpoint(session_id_for("t"))
        assert signed is not None
        with pytest.raises(LedgerIntegrityError) as refused:
            FlightlogSaver(other).get_tuple(_cfg())
        allowing = FlightlogSaver(other, serde=JsonPlusSerializer(allowed_msgpack_modules=[Note]))
        got = allowing.get_tuple(_cfg())
    seq = refused.value.seq
    assert seq is not None and seq >= signed.size  # a row of the unsigned tail
    assert "langgraph_note.Note" in refused.value.reason and "flightlog audit" in refused.value.reason
    # the row named is the one whose value holds the note: a checkpoint or writes event naming it
    (row,) = [
        data for q, data in _kind_rows(db, lg.CHECKPOINT_KIND) + _kind_rows(db, lg.WRITES_KIND) if q == seq
    ]
    named = re.findall(r"sha256:[0-9a-f]{64}", row.decode())
    assert any(b"langgraph_note" in _artifact(db, h) for h in named)
    assert got is not None and got.checkpoint["channel_values"]["note"] == Note(text="from the killed writer")


def test_a_reader_racing_a_writer_reads_a_state_the_writer_had(db: Path, tmp_path: Path) -> None:
    """A new saver's get_state, again and again, while another process runs 25 turns: each read is one
    the writer had (the messages a prefix of the final ones, never refused, never a mix); the last one,
    once the writer is done, is what the full fold reads."""
    writer = _Writer(db, tmp_path / "writer.err")
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert writer.proc.stdout is not None
        for line in writer.proc.stdout:
            lines.put(line.strip())
        lines.put("EOF")

    reading = threading.Thread(target=pump, daemon=True)
    try:
        writer.send("turns 1")  # the thread exists (and is signed) before the first read
        writer.expect("turn 0")
        writer.expect("done")
        reading.start()
        writer.send("turns 25")
        seen: list[list[str]] = []
        heads, done = 0, False
        while not done:
            with _fresh(db) as (reader, _, _):
                seen.append([m.content for m in reader.get_state(_cfg()).values["messages"]])
                heads += "t" in reader.checkpointer._heads
            while not lines.empty():
                line = lines.get()
                assert line != "EOF", writer.errors.read_text()
                done = done or line == "done"
    finally:
        assert writer.proc.stdin is not None
        writer.proc.stdin.close()
        assert writer.proc.wait(timeout=300) == 0, writer.errors.read_text()
        if reading.is_alive():
            reading.join()
        writer.close()
    with _fresh(db) as (folding, _, _):
        final = [m.content for m in _full_fold(folding).values["messages"]]
    with _fresh(db) as (reader, _, _):
        assert [m.content for m in reader.get_state(_cfg()).values["messages"]] == final
    assert len(final) == 52 and len(seen) > 1
    assert heads >= len(seen) // 2  # mostly head reads (each was in two runs: 48/48, 29/29)
    assert all(messages == final[: len(messages)] for messages in seen)


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
                try:
                    graph.update_state(older, {"messages": [HumanMessage("a rewind")]})
                except InvalidUpdateError as refused:  # no node to make the edit as: nothing is written
                    assert "Ambiguous update" in str(refused)  # (ops [("replay", 3), ("rewind", 3)])
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


class _Noted(TypedDict, total=False):
    note: Any  # a langgraph_note.Note: a custom pydantic value, outside LangGraph's safe msgpack types
    step: int


@pytest.mark.parametrize("read", ["list", "get_state_history"])
def test_history_re_reads_another_writer_s_rows_once_signed_as_get_state_does(
    db: Path, monkeypatch: pytest.MonkeyPatch, read: str
) -> None:
    """A reader that folded another writer's rows mid-run (unsigned, so a custom value they name is refused)
    reads the thread afresh once that writer signed them at its stop: ``list`` / ``get_state_history`` as
    ``get_tuple`` / ``get_state`` do (they kept refusing the value until the reader was rebuilt)."""
    monkeypatch.syspath_prepend(str(Path(__file__).parent))  # the module the value's msgpack form names
    from langgraph_note import Note

    cfg = _cfg("noted")
    with flightlog.open_store(str(db)) as mine, flightlog.open_store(str(db)) as theirs:
        reader, refused = FlightlogSaver(mine), []

        def peek(state: _Noted) -> dict[str, Any]:  # runs mid-run: the writer's rows are not signed yet
            with pytest.raises(LedgerIntegrityError) as unsigned:
                reader.get_tuple(cfg)
            refused.append(unsigned.value.reason)
            return {"step": state.get("step", 0) + 1}

        g = StateGraph(_Noted)
        g.add_node("peek", peek)
        g.add_edge(START, "peek")
        g.compile(checkpointer=FlightlogSaver(theirs)).invoke(
            {"note": Note(text="hi")}, cfg, durability="sync"
        )
        assert len(refused) == 1 and "no signed checkpoint covers" in refused[0]
        if read == "list":
            notes = [t.checkpoint["channel_values"].get("note") for t in reader.list(cfg)]
        else:
            notes = [s.values.get("note") for s in g.compile(checkpointer=reader).get_state_history(cfg)]
        assert notes == [Note(text="hi"), Note(text="hi"), None]  # newest first: loop, loop, input
        assert [t.config for t in reader.list(cfg, limit=2)] == [t.config for t in reader.list(cfg)][:2]
