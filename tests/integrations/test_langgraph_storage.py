"""FlightlogSaver's storage form: checkpoint bodies as patches on their parent's (a whole body every
KEYFRAME checkpoints down a chain), writes events filed unparsed by the fold, both read back exactly."""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph

import flightlog
from flightlog.errors import LedgerIntegrityError
from flightlog.events import Custom
from flightlog.integrations.langgraph import (
    CHECKPOINT_KIND,
    KEYFRAME,
    FlightlogSaver,
    _diff,
    _patched,
    _same,
    session_id_for,
)
from flightlog.recorder import Recorder, verify_session
from flightlog.store.base import Store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = flightlog.open_store(str(tmp_path / "lg.db"))
    yield s
    s.close()


def _chat(saver: BaseCheckpointSaver[Any]) -> Any:
    def model(state: MessagesState) -> dict[str, Any]:
        n = len(state["messages"])
        return {"messages": [AIMessage(content=f"answer {n}", usage_metadata={"input_tokens": n, "output_tokens": 1, "total_tokens": n + 1})]}  # fmt: skip

    g = StateGraph(MessagesState)
    g.add_node("model", model)
    g.add_edge(START, "model")
    return g.compile(checkpointer=saver)


def _cfg(thread: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread}}


def _payloads(store: Store, thread: str) -> list[dict[str, Any]]:
    return [
        json.loads(r.event_bytes)["payload"]
        for r in store.read_events(session_id_for(thread))
        if r.kind == "custom" and json.loads(r.event_bytes)["custom_kind"] == CHECKPOINT_KIND
    ]


def _exact(value: Any) -> str:
    """Canonical text with JSON types kept (1 and 1.0 differ), to compare bodies exactly."""
    return json.dumps(value, sort_keys=True)


def test_bodies_are_patches_bounded_by_keyframes_and_read_back_exactly(store: Store) -> None:
    saver = FlightlogSaver(store, notary=None)
    given_bodies: dict[str, dict[str, Any]] = {}
    put = saver.put

    def spy(config: RunnableConfig, checkpoint: Any, metadata: Any, new_versions: Any) -> RunnableConfig:
        given_bodies[checkpoint["id"]] = json.loads(
            json.dumps({k: v for k, v in checkpoint.items() if k != "channel_values"})
        )
        return put(config, checkpoint, metadata, new_versions)

    saver.put = spy  # type: ignore[method-assign]
    graph = _chat(saver)
    for turn in range(20):  # 3 checkpoints per turn: 60 down one parent chain
        graph.invoke({"messages": [HumanMessage(f"question {turn}")]}, _cfg("k"))
    payloads = _payloads(store, "k")
    assert len(payloads) == 60
    by_id = {p["checkpoint_id"]: p for p in payloads}
    depth: dict[str, int] = {}
    for p in payloads:  # ledger order: a parent before its children
        depth[p["checkpoint_id"]] = depth[p["parent_checkpoint_id"]] + 1 if "patch" in p else 0
        assert ("patch" in p) != ("checkpoint" in p)
        assert "thread_id" not in p
    assert max(depth.values()) == KEYFRAME - 1
    assert sum("patch" in p for p in payloads) >= 60 - 60 // KEYFRAME - 1
    # a patch is small: what the event says (id, changed channels and their versions) is not repeated
    for p in payloads:
        if "patch" in p:
            assert not p["patch"].get("set", {}).keys() & {"id", "updated_channels", "channel_versions"}
            assert "channel_versions" not in p["patch"].get("sub", {})
    for reader in (saver, FlightlogSaver(store, notary=None)):  # the writer's index, then a fresh fold
        for checkpoint_id, body in given_bodies.items():
            tup = reader.get_tuple({"configurable": {"thread_id": "k", "checkpoint_ns": "", "checkpoint_id": checkpoint_id}})  # fmt: skip
            assert tup is not None and checkpoint_id in by_id
            got = {k: v for k, v in tup.checkpoint.items() if k != "channel_values"}
            assert _exact(got) == _exact(body)


def test_a_thread_stored_whole_reads_the_same(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Events written before the patch form (whole bodies) and after it fold to the same history."""
    graph = _chat(FlightlogSaver(store, notary=None))
    monkeypatch.setattr(
        FlightlogSaver,
        "_body_entry",
        lambda _self, _t, _r, _ns, _p, body, _i, _c: {"checkpoint": {"json": body}},
    )
    graph.invoke({"messages": [HumanMessage("one")]}, _cfg("w"))
    monkeypatch.undo()
    graph.invoke({"messages": [HumanMessage("two")]}, _cfg("w"))  # patches on whole bodies
    assert [("patch" in p) for p in _payloads(store, "w")] == [False, False, False, True, True, True]
    fresh = _chat(FlightlogSaver(store, notary=None))
    assert [s.values for s in fresh.get_state_history(_cfg("w"))] == [
        s.values for s in graph.get_state_history(_cfg("w"))
    ]
    memory = _chat(InMemorySaver())
    for text in ("one", "two"):
        memory.invoke({"messages": [HumanMessage(text)]}, _cfg("w"))
    assert [len(s.values["messages"]) for s in fresh.get_state_history(_cfg("w"))] == [
        len(s.values["messages"]) for s in memory.get_state_history(_cfg("w"))
    ]


def test_a_patch_without_its_parent_is_refused_naming_its_seq(store: Store) -> None:
    saver = FlightlogSaver(store, notary=None)
    _chat(saver).invoke({"messages": [HumanMessage("hi")]}, _cfg("x"))
    rec = Recorder.attach(store, session_id_for("x"), notary=None)
    bad = {"checkpoint_ns": "", "checkpoint_id": "z", "parent_checkpoint_id": "nope", "channels": {},
           "metadata": {"json": {}}, "patch": {"set": {"id": "z"}}}  # fmt: skip
    [row] = rec.append_many([Custom(custom_kind=CHECKPOINT_KIND, payload=bad)])
    assert verify_session(store, session_id_for("x")).ok  # the chain is intact: the content is wrong
    with pytest.raises(LedgerIntegrityError) as err:
        FlightlogSaver(store, notary=None).get_tuple(_cfg("x"))
    assert err.value.seq == row.seq and "nope" in str(err.value)


def test_writes_filed_unparsed_merge_in_ledger_order(store: Store) -> None:
    """Regular writes are kept first-come, special ones replaced, whether the fold parsed them eagerly
    (the writer) or files them and parses them when the checkpoint is read (a fresh process)."""
    saver = FlightlogSaver(store, notary=None)
    config = saver.put(
        {"configurable": {"thread_id": "p", "checkpoint_ns": ""}},
        empty_checkpoint(),
        {"source": "input", "step": -1},
        {},
    )
    saver.put_writes(config, [("a", 1), ("b", 2)], "task1")
    saver.put_writes(config, [("a", 10)], "task1")  # ignored: (task1, 0) is stored
    saver.put_writes(config, [("__error__", "first")], "task2")
    saver.put_writes(config, [("__error__", "second")], "task2")  # special: replaces
    mine = saver.get_tuple(config)
    theirs = FlightlogSaver(store, notary=None).get_tuple(config)
    assert mine is not None and theirs is not None
    assert mine.pending_writes == theirs.pending_writes
    assert sorted(mine.pending_writes) == [
        ("task1", "a", 1),
        ("task1", "b", 2),
        ("task2", "__error__", "second"),
    ]


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(-2, 2, allow_nan=False) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=3),
    max_leaves=12,
)
_objects = st.dictionaries(st.text(max_size=2), _json, max_size=5)


@given(old=_objects, new=_objects)
@settings(max_examples=200, deadline=None)
def test_diff_then_patch_gives_the_new_object(old: dict[str, Any], new: dict[str, Any]) -> None:
    before = json.dumps(old, sort_keys=True)
    patch = _diff(old, new)
    assert _same(_patched(old, patch), new)
    assert json.dumps(old, sort_keys=True) == before  # neither is changed
    assert _diff(new, new) == {}


def test_the_fold_leaves_the_garbage_collector_as_it_found_it(store: Store) -> None:
    """The fold pauses the cyclic collector (``replay.collector_paused``) and turns it back on, also when it
    refuses a thread; a collector the caller turned off stays off."""
    test_a_patch_without_its_parent_is_refused_naming_its_seq(store)  # a refused fold
    assert gc.isenabled()
    _chat(FlightlogSaver(store, notary=None)).invoke({"messages": [HumanMessage("more")]}, _cfg("y"))
    assert FlightlogSaver(store, notary=None).get_tuple(_cfg("y")) is not None and gc.isenabled()
    gc.disable()
    try:
        assert FlightlogSaver(store, notary=None).get_tuple(_cfg("y")) is not None
        assert not gc.isenabled()
    finally:
        gc.enable()
