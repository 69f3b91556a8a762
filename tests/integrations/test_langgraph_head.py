"""The first ``get_state`` of a process reads a thread from its last head record (``langgraph.head``), the rows
it names and content-linked list deltas, without folding the thread; every row and artifact it uses is
authenticated, and what it cannot account for is read by the full fold."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, interrupt

import flightlog
from flightlog.encoding import canonical_json
from flightlog.errors import LedgerIntegrityError
from flightlog.integrations import langgraph as lg
from flightlog.integrations.langgraph import (
    BINARY_DELTA_MAGIC,
    CHECKPOINT_KIND,
    DELTA_MAGIC,
    HEAD_KIND,
    NULL_HANDLE,
    SEGMENT,
    WRITES_KIND,
    FlightlogSaver,
    _delta_bytes,
    _split_delta,
    session_id_for,
)
from flightlog.integrity.notary import Notary
from flightlog.integrity.verify import audit_session
from flightlog.store.base import Store

from .rechain import rechain

TURNS = 40  # 80 messages: list deltas deeper than 2 * SEGMENT, so hints are followed


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    profile: str  # set on the first turn only: a channel not updated for many steps


def _graph(saver: FlightlogSaver) -> Any:
    def setup(state: State) -> dict[str, Any]:
        return {} if state.get("profile") else {"profile": "set once, on turn 1"}

    def model(state: State) -> dict[str, Any]:
        # (none when a removal emptied the list: test_a_head_read_serves_what_the_full_fold_serves does that)
        last = state["messages"][-1] if state["messages"] else None
        if last is not None and last.content == "ship?":
            answer = interrupt({"question": "ship it?"})  # human in the loop: a pending write
            return {"messages": [AIMessage(content=f"shipping: {answer}")]}
        return {"messages": [AIMessage(content=f"answer {len(state['messages'])}")]}

    g = StateGraph(State)
    g.add_node("setup", setup)
    g.add_node("model", model)
    g.add_edge(START, "setup")
    g.add_edge("setup", "model")
    return g.compile(checkpointer=saver)


def _cfg(thread: str = "t") -> RunnableConfig:
    return {"configurable": {"thread_id": thread}}


def _snapshot(state: Any) -> Any:
    return (
        state.values,
        state.next,
        state.config,
        state.metadata,
        state.parent_config,
        [(t.name, t.interrupts) for t in state.tasks],
    )


class Counting:
    """Counts the event rows a store hands out (``read_chain`` and ``read_events``)."""

    def __init__(self, store: Store) -> None:
        self.rows = 0
        chain, events = store.read_chain, store.read_events

        def read_chain(session_id: str, **kw: Any) -> Iterator[Any]:
            for page in chain(session_id, **kw):
                self.rows += len(page)
                yield page

        def read_events(session_id: str, **kw: Any) -> Iterator[Any]:
            for row in events(session_id, **kw):
                self.rows += 1
                yield row

        store.read_chain = read_chain  # type: ignore[method-assign]
        store.read_events = read_events  # type: ignore[method-assign]


def _write_thread(store: Store, turns: int = TURNS, *, ask: bool = True) -> Any:
    """A thread of ``turns`` chat turns, then (``ask``) one stopped at an ``interrupt()``; the writer's
    own ``get_state``."""
    graph = _graph(FlightlogSaver(store))
    for turn in range(turns):
        graph.invoke({"messages": [HumanMessage(f"question {turn}")]}, _cfg())
    if ask:
        graph.invoke({"messages": [HumanMessage("ship?")]}, _cfg())
    return graph.get_state(_cfg())


@contextmanager
def _fresh(db: Path) -> Iterator[tuple[Any, Store, Counting]]:
    """A graph on a new saver and store over ``db`` (as a new process has it), and its row counter."""
    other = flightlog.open_store(str(db))
    try:
        yield _graph(FlightlogSaver(other)), other, Counting(other)
    finally:
        other.close()


def _refused(db: Path, seq: int) -> LedgerIntegrityError:
    """A new process's ``get_state`` refuses the thread naming ``seq``; the error."""
    with _fresh(db) as (graph, _, _), pytest.raises(LedgerIntegrityError) as caught:
        graph.get_state(_cfg())
    assert caught.value.seq == seq
    return caught.value


def _rows(db: Path, kind: str) -> list[tuple[int, bytes]]:
    raw = sqlite3.connect(db)
    try:
        rows = raw.execute(
            "SELECT seq, event FROM events WHERE session_id = ? ORDER BY seq", (session_id_for("t"),)
        ).fetchall()
    finally:
        raw.close()
    return [(seq, bytes(data)) for seq, data in rows if json.loads(data).get("custom_kind") == kind]


def _tamper_row(db: Path, seq: int, edit: Any) -> None:
    """Change one row's stored bytes in place, its chain hashes left as they were."""
    raw = sqlite3.connect(db)
    try:
        raw.execute("DROP TRIGGER IF EXISTS events_no_update")
        (data,) = raw.execute(
            "SELECT event FROM events WHERE session_id = ? AND seq = ?", (session_id_for("t"), seq)
        ).fetchone()
        raw.execute(
            "UPDATE events SET event = ? WHERE session_id = ? AND seq = ?",
            (edit(bytes(data)), session_id_for("t"), seq),
        )
        raw.commit()
    finally:
        raw.close()


def test_a_new_process_reads_the_latest_state_from_the_head_record(db: Path, store: Store) -> None:
    want = _write_thread(store)
    assert want.next == ("model",) and want.tasks[0].interrupts  # an interrupt pending
    assert want.values["profile"] == "set once, on turn 1" and len(want.values["messages"]) == 2 * TURNS + 1
    total = store.get_session(session_id_for("t")).head_seq + 1
    with _fresh(db) as (graph, _, counting):
        got = graph.get_state(_cfg())
        assert _snapshot(got) == _snapshot(want)
        # the head record and the rows it names, not the thread: a small suffix of it
        assert counting.rows <= 100 < total // 4
        assert graph.get_state(_cfg()).values == want.values  # the same, from the cached head index
        # everything else still folds the thread, and agrees
        history = list(graph.get_state_history(_cfg()))
        assert _snapshot(history[0]) == _snapshot(want)
        assert counting.rows >= total
        # and the thread goes on from the new process
        done = graph.invoke(Command(resume="yes"), _cfg())
        assert done["messages"][-1].content == "shipping: yes"
    with _fresh(db) as (again, _, _):
        assert again.get_state(_cfg()).values["messages"][-1].content == "shipping: yes"


def test_list_deltas_name_their_base_by_content(db: Path, store: Store) -> None:
    _write_thread(store, ask=False)
    raw = sqlite3.connect(db)
    try:
        digests = {d: bytes(c) for d, c in raw.execute("SELECT sha256, content FROM artifacts")}
    finally:
        raw.close()
    deltas = [h for c in digests.values() if (h := _split_delta(c)) is not None]
    depths = sorted(h["d"] for h in deltas)
    assert depths == list(range(1, 2 * TURNS))  # one chain: each turn's input and answer extend it
    anchors = sorted((h for h in deltas if "h" in h), key=lambda h: h["d"])
    assert [h["d"] for h in anchors] == [SEGMENT, 2 * SEGMENT]
    by_depth = {h["d"]: h for h in deltas}
    digest_of = {h["d"]: d for d, c in digests.items() if (h := _split_delta(c)) is not None}
    for anchor in anchors:  # what an anchor names is what its links say, one by one
        assert anchor["h"] == [by_depth[anchor["d"] - i]["e"] for i in range(SEGMENT)]
        assert all(
            by_depth[d]["b"] == digest_of[d - 1] for d in range(anchor["d"] - SEGMENT + 2, anchor["d"] + 1)
        )
    assert anchors[1]["a"] == digest_of[SEGMENT] and "at" not in anchors[1]
    assert anchors[0]["a"] == by_depth[1]["b"] and anchors[0]["at"] == by_depth[1]["bt"]  # the whole list
    heads = _rows(db, HEAD_KIND)
    assert len(heads) == TURNS  # one per stop
    assert max(len(data) for _, data in heads) < 700  # a few hundred bytes per stop


def test_rows_after_the_head_record_are_folded_forward(db: Path, store: Store) -> None:
    saver = FlightlogSaver(store)
    graph = _graph(saver)
    for turn in range(3):
        graph.invoke({"messages": [HumanMessage(f"question {turn}")]}, _cfg())
    graph.update_state(_cfg(), {"messages": [HumanMessage("an edit after the last stop")]})  # no stop
    want = graph.get_state(_cfg())
    last = store.get_session(session_id_for("t")).head_seq
    assert _rows(db, HEAD_KIND)[-1][0] < last  # the edit is after the last head record
    with _fresh(db) as (fresh, _, _):
        assert _snapshot(fresh.get_state(_cfg())) == _snapshot(want)


def test_a_marker_after_the_head_record_is_honoured(db: Path, store: Store) -> None:
    saver = FlightlogSaver(store)
    _write_thread(store, 2, ask=False)
    saver.delete_thread("t")
    with _fresh(db) as (fresh, _, _):
        assert fresh.get_state(_cfg()).values == {}


def test_a_row_the_head_read_uses_that_was_altered_is_refused_naming_its_seq(db: Path, store: Store) -> None:
    _write_thread(store)
    seq, _ = _rows(db, CHECKPOINT_KIND)[-1]  # the latest checkpoint: inside the suffix a head read uses
    _tamper_row(db, seq, lambda data: data.replace(b'"step":', b'"step": '))
    _refused(db, seq)


def test_a_rechained_head_record_is_refused_naming_its_seq(db: Path, store: Store) -> None:
    """Rechained, the head record no longer matches the signature over the thread, whose last row the
    refusal names: the head record, written last at the stop, or a task's write LangGraph's background
    thread saved after it (signed at once). With the saver's calls delayed at random a write came after
    the head in 1 of 12 runs (3 of 30 in another), and the refusal named that write's seq, one after the head's."""
    _write_thread(store)
    seq, data = _rows(db, HEAD_KIND)[-1]
    last = store.get_session(session_id_for("t")).head_seq
    assert [s for s, _ in _rows(db, WRITES_KIND) if s > seq] == list(range(seq + 1, last + 1))
    record = json.loads(data)
    record["payload"]["values"]["profile"]["ref"] = "sha256:" + "0" * 64  # another value for `profile`
    forged = json.dumps(record, sort_keys=True, separators=(",", ":")).encode()
    rechain(db, session_id_for("t"), lambda s, d: forged if s == seq else d)
    _refused(db, last)


@pytest.mark.parametrize(
    ("depth", "text", "link"),
    [
        (SEGMENT + 3, b"answer", False),
        (SEGMENT + 2, b"question", False),
        (2 * SEGMENT + 2, b'"t":', True),
        (2 * SEGMENT, b'"ht":', True),  # the anchor's JSON part (its links are raw digests)
    ],
    ids=["elements of an answer", "elements of an input", "a link", "an anchor"],
)
def test_an_altered_delta_in_the_chain_is_refused_before_it_is_deserialized(
    db: Path, store: Store, monkeypatch: pytest.MonkeyPatch, depth: int, text: bytes, link: bool
) -> None:
    _write_thread(store, ask=False)
    loaded: list[tuple[str, bytes]] = []
    serde = type(FlightlogSaver(store).serde)
    loads = serde.loads_typed
    monkeypatch.setattr(serde, "loads_typed", lambda self, typed: loaded.append(typed) or loads(self, typed))
    with _fresh(db) as (graph, _, _):
        graph.get_state(_cfg())
    assert link or any(text in data for _, data in loaded)  # the spy sees what serde is given
    loaded.clear()
    raw = sqlite3.connect(db)
    try:
        rows = {d: bytes(c) for d, c in raw.execute("SELECT sha256, content FROM artifacts")}
        digest = next(
            d if link else header["e"]  # the link itself, or the artifact of its elements
            for d, c in rows.items()
            if (header := _split_delta(c)) is not None and header["d"] == depth
        )
        raw.execute("DROP TRIGGER IF EXISTS artifacts_no_update")
        raw.execute(
            "UPDATE artifacts SET content = ? WHERE sha256 = ?",
            (rows[digest].replace(text, text.upper()), digest),
        )
        raw.commit()
    finally:
        raw.close()
    messages = [seq for seq, data in _rows(db, CHECKPOINT_KIND) if b'"messages":{' in data]
    error = _refused(db, messages[-1])  # the event naming the channel's latest value
    assert digest in error.reason
    assert not any(text.upper() in data for _, data in loaded)  # the altered bytes never reached serde


def test_an_old_row_the_head_read_does_not_use_is_left_to_the_audit(db: Path, store: Store) -> None:
    """``resume(full=False)`` promises the signature of the latest checkpoint, the retained head and the
    rows after it, not a re-read of the rows it covers: an edit there is caught by the full audit (and by
    any full fold), not by a head read, whose values do not come from that row."""
    want = _write_thread(store)
    seq = 3  # an early row: no head read reaches it
    _tamper_row(db, seq, lambda data: data.replace(b"}", b" }", 1))
    with _fresh(db) as (fresh, other, _):
        assert _snapshot(fresh.get_state(_cfg())) == _snapshot(want)
        notary = fresh.checkpointer.notary
        assert notary is not None
        report = audit_session(other, session_id_for("t"), keyring=notary.keyring, heads=notary.heads)
        assert not report.ok and report.divergences[0].seq == seq
        with pytest.raises(LedgerIntegrityError) as caught:
            list(fresh.get_state_history(_cfg()))  # the full fold
        assert caught.value.seq == seq


def test_a_thread_written_in_the_older_form_still_reads(
    db: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before content links: deltas linked by version only (``base``, no ``depth``) and no head record."""
    with monkeypatch.context() as m:
        m.setattr(
            FlightlogSaver, "_linked_delta", lambda self, t, rec, ns, ch, bv, new: self._typed(rec, new)
        )
        m.setattr(FlightlogSaver, "_head_payload", lambda self, thread: None)
        want = _write_thread(store, 10)
    assert not _rows(db, HEAD_KIND)
    with _fresh(db) as (fresh, other, counting):
        assert _snapshot(fresh.get_state(_cfg())) == _snapshot(want)
        assert counting.rows >= other.get_session(session_id_for("t")).head_seq + 1  # folded
    # written on by this release: the first value on an older delta is stored whole, then linked
    graph = _graph(FlightlogSaver(store))
    graph.invoke(Command(resume="no"), _cfg())
    graph.invoke({"messages": [HumanMessage("and now?")]}, _cfg())
    want = graph.get_state(_cfg())
    with _fresh(db) as (fresh, other, counting):
        assert _snapshot(fresh.get_state(_cfg())) == _snapshot(want)
        assert counting.rows <= 100


def _stored_forms(db: Path) -> tuple[int, int, int, int]:
    """How many value entries of type ``null`` name an artifact and how many do not, and how many list
    delta links are in the JSON form (:data:`DELTA_MAGIC`) and in the binary form."""
    raw = sqlite3.connect(db)
    try:
        events = [bytes(e) for (e,) in raw.execute("SELECT event FROM events")]
        contents = [bytes(c) for (c,) in raw.execute("SELECT content FROM artifacts")]
    finally:
        raw.close()
    with_ref = sum(e.count(b'"ref":"' + NULL_HANDLE.encode() + b'","type":"null"') for e in events)
    bare = sum(e.count(b'{"type":"null"') + e.count(b',"type":"null"') for e in events) - with_ref
    return (
        with_ref,
        bare,
        sum(c.startswith(DELTA_MAGIC) for c in contents),
        sum(c.startswith(BINARY_DELTA_MAGIC) for c in contents),
    )


def test_a_thread_written_in_the_forms_before_2026_12_05_still_reads(
    db: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before 2026-12-05 a ``None`` value named the empty artifact by ``ref``, list delta links held hex
    digests (:data:`DELTA_MAGIC`) and the root namespace's records held ``"checkpoint_ns": ""``; such a
    thread reads the same from a new process (head read and full fold), and this release writes on in the
    new forms, one chain of links mixing both."""
    with monkeypatch.context() as m:
        m.setattr(FlightlogSaver, "_typed", _typed_as_before)
        m.setattr(lg, "langgraph_delta_bytes", _delta_bytes)
        m.setattr(lg, "_ns_entry", lambda ns: {"checkpoint_ns": ns})
        want = _write_thread(store, SEGMENT // 2 + 2, ask=False)  # deep enough to write an anchor
    with_ref, bare, hex_links, binary = _stored_forms(db)
    assert with_ref > 0 and bare == 0 and hex_links >= SEGMENT and binary == 0
    assert all(b'"checkpoint_ns":""' in data for _, data in _rows(db, WRITES_KIND))
    with _fresh(db) as (fresh, _, counting):
        assert _snapshot(fresh.get_state(_cfg())) == _snapshot(want)
        assert counting.rows <= 100  # the head read
        assert _snapshot(next(iter(fresh.get_state_history(_cfg())))) == _snapshot(want)  # the full fold
    graph = _graph(FlightlogSaver(store))
    for turn in range(SEGMENT // 2 + 2):  # across the next anchor
        graph.invoke({"messages": [HumanMessage(f"later question {turn}")]}, _cfg())
    want = graph.get_state(_cfg())
    assert len(want.values["messages"]) == 4 * (SEGMENT // 2 + 2)
    after = _stored_forms(db)
    assert after[0] == with_ref and after[1] > 0 and after[2] == hex_links and after[3] >= SEGMENT
    assert b'"checkpoint_ns"' not in _rows(db, WRITES_KIND)[-1][1] + _rows(db, CHECKPOINT_KIND)[-1][1]
    with _fresh(db) as (fresh, other, counting):
        assert _snapshot(fresh.get_state(_cfg())) == _snapshot(want)
        assert counting.rows <= 100
        history = list(fresh.get_state_history(_cfg()))
        assert _snapshot(history[0]) == _snapshot(want)
        notary = fresh.checkpointer.notary
        assert notary is not None
        assert audit_session(other, session_id_for("t"), keyring=notary.keyring, heads=notary.heads).ok


def _payloads(db: Path, kind: str) -> list[dict[str, Any]]:
    return [json.loads(data)["payload"] for _, data in _rows(db, kind)]


def _head_as_before(self: FlightlogSaver, thread: Any) -> dict[str, Any] | None:
    """``FlightlogSaver._head_payload`` as released before 2026-12-06: the latest checkpoint's id, its
    writes and values always named, an empty channel a body row stores too."""
    head = _head_payload(self, thread)
    if head is None:
        return None
    latest = max(thread.checkpoints[""])
    head.update(checkpoint_id=latest, writes=head.get("writes", []), values=head.get("values", {}))
    cp = thread.checkpoints[""][latest]
    versions = self._body(thread, cp.body)["channel_versions"]
    for channel, version in versions.items():
        if thread.blobs.get(("", channel, version), False) is None:
            head["values"].setdefault(channel, {"type": "empty"})
    return head


_head_payload = FlightlogSaver._head_payload


def test_a_thread_written_in_the_forms_before_2026_12_06_still_reads(
    db: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Since 2026-12-06 the channels of a checkpoint that share a version (every channel a step updates)
    hold it once, as the payload's ``version``, and a head record leaves out the empty channels its body
    rows store themselves, the checkpoint id (its last body row's) and empty writes and values. A thread
    written before (every entry with its version, head records naming all of it) reads the same from a new process, head read and full fold, and written on in
    the new forms; ``audit`` passes."""
    with monkeypatch.context() as m:
        m.setattr(lg, "_shared_version", lambda channels: {"channels": channels})
        m.setattr(FlightlogSaver, "_head_payload", _head_as_before)
        want = _write_thread(store, 6, ask=False)
    before = _payloads(db, CHECKPOINT_KIND)
    assert all("version" not in p and all("version" in e for e in p["channels"].values()) for p in before)
    assert all(
        "checkpoint_id" in p and any(e == {"type": "empty"} for e in p["values"].values())
        for p in _payloads(db, HEAD_KIND)
    )
    with _fresh(db) as (fresh, _, counting):
        assert _snapshot(fresh.get_state(_cfg())) == _snapshot(want)
        assert counting.rows <= 100  # the head read
        assert _snapshot(next(iter(fresh.get_state_history(_cfg())))) == _snapshot(want)  # the full fold
    graph = _graph(FlightlogSaver(store))
    for turn in range(6):
        graph.invoke({"messages": [HumanMessage(f"later question {turn}")]}, _cfg())
    want = graph.get_state(_cfg())
    wrote = _payloads(db, CHECKPOINT_KIND)[len(before) :]
    shared = [p for p in wrote if "version" in p]
    assert shared and all(
        sum("version" not in e for e in p["channels"].values()) >= 2 for p in shared
    )  # the version once, for two or more entries
    heads = _payloads(db, HEAD_KIND)[-6:]
    assert all("checkpoint_id" not in p and "writes" not in p for p in heads)  # none pending at these stops
    assert all(e != {"type": "empty"} for p in heads for e in p.get("values", {}).values())
    with _fresh(db) as (fresh, other, counting):
        assert _snapshot(fresh.get_state(_cfg())) == _snapshot(want)
        assert counting.rows <= 100
        history = list(fresh.get_state_history(_cfg()))
        assert _snapshot(history[0]) == _snapshot(want)
        assert len(history) == len(before) + len(wrote)
        for state in history[:: max(1, len(history) // 8)]:  # older checkpoints, by id: what the fold holds
            assert _snapshot(fresh.get_state(state.config)) == _snapshot(state)
        notary = fresh.checkpointer.notary
        assert notary is not None
        assert audit_session(other, session_id_for("t"), keyring=notary.keyring, heads=notary.heads).ok
    assert _snapshot(graph.get_state(_cfg())) == _snapshot(want)  # the writer's own index agrees


def _typed_as_before(self: FlightlogSaver, rec: Any, value: Any) -> dict[str, str]:
    """``FlightlogSaver._typed`` as released before 2026-12-05: every value an artifact, ``None`` too."""
    kind, data = self.serde.dumps_typed(value)
    return {"type": kind, "ref": rec.put_artifact(data)}


def test_a_null_value_is_stored_without_an_artifact(db: Path, store: Store) -> None:
    want = _write_thread(store, 3)
    with_ref, bare, hex_links, binary = _stored_forms(db)
    assert with_ref == 0 and bare > 0 and hex_links == 0 and binary > 0
    assert store.get_artifact(NULL_HANDLE) is None  # nothing stored for the empty value
    with _fresh(db) as (fresh, other, _):
        assert _snapshot(fresh.get_state(_cfg())) == _snapshot(want)
        nulls = [w for w in _pending(other) if w[1].startswith("branch:to:")]
        assert nulls and all(value is None for *_, value in nulls)  # None writes read back as None


def _pending(store: Store) -> list[tuple[str, str, Any]]:
    """Every pending write of every checkpoint of thread ``t``, folded from the ledger."""
    saver = FlightlogSaver(store)
    return [w for t in saver.list(_cfg()) for w in (t.pending_writes or [])]


@given(
    header=st.dictionaries(
        st.text(max_size=8),
        st.one_of(
            st.integers(-(2**53) + 1, 2**53 - 1),
            st.text(max_size=20),
            st.lists(st.text(max_size=8), max_size=4),
        ),
        max_size=5,
    ),
)
def test_delta_envelope_round_trips(header: dict[str, Any]) -> None:
    content = _delta_bytes(header)
    assert content.startswith(DELTA_MAGIC)
    assert _split_delta(content) == header
    assert _split_delta(content[len(DELTA_MAGIC) :]) is None  # no magic: not a delta
    assert _split_delta(DELTA_MAGIC + canonical_json(header)[:-1]) is None  # a header cut short: not a delta


def test_a_fork_after_the_head_record_reads_what_the_full_fold_reads(db: Path, store: Store) -> None:
    graph = _graph(FlightlogSaver(store))
    for turn in range(5):
        graph.invoke({"messages": [HumanMessage(f"question {turn}")]}, _cfg())
    older = list(graph.get_state_history(_cfg()))[6]  # two turns back
    graph.update_state(older.config, {"messages": [HumanMessage("a fork from two turns back")]})
    want = graph.get_state(_cfg())
    assert want.values["messages"][-1].content == "a fork from two turns back"
    with _fresh(db) as (fresh, _, _):
        assert _snapshot(fresh.get_state(_cfg())) == _snapshot(want)


def test_writes_saved_before_their_checkpoint_are_named_by_the_head_record(db: Path, store: Store) -> None:
    """LangGraph saves writes in the background, sometimes before their checkpoint: a head record written
    in between names them, so the checkpoint put after it reads them from a new process too."""
    saver = FlightlogSaver(store)
    first = empty_checkpoint()
    first["channel_values"] = {"x": 1}
    first["channel_versions"] = {"x": saver.get_next_version(None, None)}
    config = saver.put(_cfg(), first, {"source": "input", "step": -1}, first["channel_versions"])
    for step in range(100):  # a thread longer than what a head read looks at
        first = create_checkpoint(first, None, step)
        config = saver.put(config, first, {"source": "loop", "step": step}, {})
    first = create_checkpoint(first, None, 100)  # a new run
    config = saver.put(config, first, {"source": "input", "step": 100}, {})
    second = create_checkpoint(first, None, 101)
    early = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": second["id"]}}
    saver.put_writes(early, [("x", 2)], task_id="task", task_path="~a")  # before its checkpoint
    saver.put_writes(config, [("__error__", "boom")], task_id="t1", task_path="~b")  # ends the run: a stop
    assert json.loads(_rows(db, HEAD_KIND)[-1][1])["payload"]["early"]
    second["channel_values"]["branch:to:n"] = None  # a node left to run: this put is no stop
    second["channel_versions"]["branch:to:n"] = saver.get_next_version(None, None)
    saver.put(
        config,
        second,
        {"source": "loop", "step": 101},
        {"branch:to:n": second["channel_versions"]["branch:to:n"]},
    )
    head = json.loads(_rows(db, HEAD_KIND)[-1][1])["payload"]  # its checkpoint: its last body row's
    assert (
        json.loads(dict(_rows(db, CHECKPOINT_KIND))[head["bodies"][-1]])["payload"]["checkpoint_id"]
        != second["id"]
    )
    want = saver.get_tuple(_cfg())
    assert want is not None and want.pending_writes == [("task", "x", 2)]
    with _fresh(db) as (fresh, _, counting):
        got = fresh.checkpointer.get_tuple(_cfg())
        assert got is not None and (got.checkpoint, got.pending_writes) == (
            want.checkpoint,
            want.pending_writes,
        )
        assert counting.rows < store.get_session(session_id_for("t")).head_seq + 1  # not folded


def test_a_write_after_the_head_record_is_folded_forward(db: Path, store: Store) -> None:
    """LangGraph may save a step's writes after the checkpoint that stopped the run: they land after the
    head record (signed at once) and a head read folds them forward."""
    saver = FlightlogSaver(store)
    _write_thread(store, 3)
    latest = saver.get_tuple(_cfg())
    assert latest is not None
    saver.put_writes(latest.config, [("profile", "late")], task_id="late-task", task_path="~z")
    assert _rows(db, HEAD_KIND)[-1][0] < store.get_session(session_id_for("t")).head_seq
    want = saver.get_tuple(_cfg())
    assert want is not None and ("late-task", "profile", "late") in want.pending_writes
    with _fresh(db) as (fresh, _, _):
        got = fresh.checkpointer.get_tuple(_cfg())
        assert got is not None and (got.checkpoint, got.pending_writes) == (
            want.checkpoint,
            want.pending_writes,
        )


def _head_files() -> list[Path]:
    """The retained-head files of the user's head directory (``$FLIGHTLOG_HEAD_DIR``, per test)."""
    return sorted(p for p in Path(os.environ["FLIGHTLOG_HEAD_DIR"]).rglob("*.json") if p.name != "index.json")


def test_a_read_writes_no_retained_head_a_writer_catches_it_up(db: Path, store: Store) -> None:
    """The retained head lags the database's latest signed checkpoint (a crash before the head file was
    written; here it is deleted): a new process's ``get_state`` and ``get_state_history`` (the saver's reads,
    which check the signatures as ``Notary.resume`` does) write nothing, not even on a read-only store; the
    next write of the thread retains the head again. ``get_state`` wrote it, so a read wrote a file."""
    _write_thread(store, turns=2)
    sid = session_id_for("t")
    (retained,) = _head_files()
    retained.unlink()  # lags: never written
    with flightlog.open_store(str(db), read_only=True) as reader:
        graph = _graph(FlightlogSaver(reader))
        assert graph.get_state(_cfg()).next == ("model",)
        assert len(list(graph.get_state_history(_cfg()))) > 2
        for full in (False, True):
            anchor = Notary.from_env().resume(reader, sid, full=full, retain=False)
            assert anchor.state.pending is not None and anchor.state.pending.size == anchor.state.latest.size
    assert _head_files() == []
    with _fresh(db) as (graph, other, _):
        graph.invoke(Command(resume="yes"), _cfg())  # a writer: attaching retains the head again
        signed = other.latest_checkpoint(sid)
    assert _head_files() == [retained] and signed is not None
