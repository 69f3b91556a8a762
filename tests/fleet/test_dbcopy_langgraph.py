"""``flightlog db copy`` of a LangGraph thread: the content-linked list deltas name their element and base
artifacts inside artifact content, not in events; the copy carries them all (transitively), and refuses,
retiring nothing, when one is missing."""

from __future__ import annotations

import json
import re
import sqlite3
from hashlib import sha256
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, MessagesState, StateGraph
from typer.testing import CliRunner

import flightlog
from flightlog.cli import app
from flightlog.events import Custom
from flightlog.integrations.langgraph import (
    CHECKPOINT_KIND,
    SEGMENT,
    FlightlogSaver,
    _delta_bytes,
    session_id_for,
)
from flightlog.ops.dbcopy import CopyNotVerified, copy_store
from flightlog.recorder import Recorder
from flightlog.store.base import ArtifactRecord
from flightlog.store.links import (
    LANGGRAPH_DELTA_MAGIC_2,
    artifact_links,
    langgraph_delta_bytes,
    langgraph_delta_header,
)

TURNS = 40  # 80 messages: list deltas deeper than 2 * SEGMENT, so anchors name links too
SID = session_id_for("t")
CFG: RunnableConfig = {"configurable": {"thread_id": "t"}}


def _graph(saver: FlightlogSaver) -> Any:
    def model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(content=f"answer {len(state['messages'])}")]}

    g = StateGraph(MessagesState)
    g.add_node("model", model)
    g.add_edge(START, "model")
    return g.compile(checkpointer=saver)


def _snapshot(state: Any) -> Any:
    return (state.values, state.next, state.config, state.metadata, state.parent_config)


def _thread(db: Path) -> Any:
    """Write a ``TURNS``-turn thread to the SQLite file ``db``; its ``get_state`` from a fresh process view."""
    with flightlog.open_store(str(db)) as store:
        graph = _graph(FlightlogSaver(store))
        for turn in range(TURNS):
            graph.invoke({"messages": [HumanMessage(f"question {turn}")]}, CFG)
    with flightlog.open_store(str(db)) as store:
        return _snapshot(_graph(FlightlogSaver(store)).get_state(CFG))


def _linked(db: Path) -> list[str]:
    """Artifacts of ``db`` that another artifact's content links to (a write event may name one too: which
    ones only a link names depends on the messages' random ids, so the tests do not rely on there being
    such an artifact; a copy must carry and check every link target either way)."""
    raw = sqlite3.connect(db)
    try:
        linked = {
            link
            for (content,) in raw.execute("SELECT content FROM artifacts")
            for link in artifact_links(bytes(content))
        }
    finally:
        raw.close()
    return sorted(linked)


def test_a_copied_thread_reads_back_the_same(tmp_path: Path, store_url: str) -> None:
    """SQLite to SQLite and to PostgreSQL (``store_url``)."""
    db = tmp_path / "lg.db"
    before = _thread(db)
    assert _linked(db), "the thread should have artifacts that other artifacts link to"
    with flightlog.open_store(str(db)) as src, flightlog.open_store(store_url) as dst:
        report = copy_store(src, dst)
    with flightlog.open_store(store_url) as copy:
        assert _snapshot(_graph(FlightlogSaver(copy)).get_state(CFG)) == before
    assert len(before[0]["messages"]) == 2 * TURNS
    assert report.verified == 1 and report.retired == "source"
    held = sqlite3.connect(db).execute("SELECT COUNT(*) FROM artifacts").fetchone()[0]
    assert report.artifacts == held  # every artifact of the thread


def test_a_source_missing_a_linked_artifact_is_refused_and_stays_live(tmp_path: Path) -> None:
    db = tmp_path / "lg.db"
    _thread(db)
    gone = _linked(db)[0]
    message = _refused_copy(db, gone)  # by the link walk, or (named by a LangGraph record) before it
    assert f"sha256:{gone}" in message and "missing from the source" in message


def _refused_copy(db: Path, gone: str) -> str:
    """Delete artifact ``gone`` from ``db``; a copy of it is refused, writing nothing and retiring nothing.
    The refusal's text."""
    raw = sqlite3.connect(db)
    raw.execute("DELETE FROM artifacts WHERE sha256 = ?", (gone,))
    raw.commit()
    raw.close()
    with flightlog.open_store(str(db)) as src, flightlog.open_store(str(db.with_name("copy.db"))) as dst:
        with pytest.raises(CopyNotVerified) as caught:
            copy_store(src, dst)
        assert caught.value.session_id == SID
        assert list(dst.list_sessions()) == []  # one transaction: nothing written
        assert src.retirement() is None  # the source is not retired: it is still the live store
    return str(caught.value)


def test_a_copy_that_lost_a_linked_artifact_does_not_verify(tmp_path: Path) -> None:
    """A destination that acknowledges an artifact without keeping it fails the arrival check."""
    db = tmp_path / "lg.db"
    _thread(db)
    dropped = _linked(db)[-1]
    with flightlog.open_store(str(db)) as src, flightlog.open_store(str(tmp_path / "copy.db")) as dst:
        put = dst.put_artifact

        def lossy(content: bytes, media_type: str) -> ArtifactRecord:
            record = put(content, media_type)
            if record.sha256 == dropped:
                dst._conn.execute("DELETE FROM artifacts WHERE sha256 = ?", (dropped,))  # type: ignore[attr-defined]
            return record

        dst.put_artifact = lossy  # type: ignore[method-assign]
        with pytest.raises(CopyNotVerified) as caught:
            copy_store(src, dst)
        assert caught.value.session_id == SID
        message = str(caught.value)
        assert f"artifact sha256:{dropped}" in message and "missing in the copy" in message
        assert src.retirement() is None
    with flightlog.open_store(str(tmp_path / "copy.db")) as dst:
        assert list(dst.list_sessions()) == []


_HEX = st.text("0123456789abcdef", min_size=64, max_size=64)


@given(e=_HEX, b=_HEX, a=st.none() | _HEX, h=st.lists(_HEX, max_size=SEGMENT))
def test_delta_links_are_its_digests(e: str, b: str, a: str | None, h: list[str]) -> None:
    header: dict[str, Any] = {"t": "json", "e": e, "b": b, "d": 1, "bt": "json"}
    if a is not None:
        header.update(a=a, at="json")
    if h:
        header.update(h=h, ht="json")
    expected = list(dict.fromkeys([e, b, *([a] if a else []), *h]))
    assert artifact_links(_delta_bytes(header)) == expected
    assert artifact_links(b"not a delta " + e.encode()) == []  # bare hex outside a declared format: no link


@given(
    e=_HEX,
    b=_HEX,
    depth=st.integers(1, 2**40),
    anchor=st.none() | st.tuples(_HEX, st.lists(_HEX, max_size=SEGMENT)),
)
def test_binary_delta_links_are_its_digests(
    e: str, b: str, depth: int, anchor: tuple[str, list[str]] | None
) -> None:
    """The form the saver writes (links as raw digests) reads back to the same header as the JSON form,
    and names the same links; cut short or with a link member in its JSON part, it is no delta."""
    header: dict[str, Any] = {"t": "msgpack", "e": e, "b": b, "d": depth}
    if anchor is not None:
        header.update(a=anchor[0], h=anchor[1], ht="msgpack", at="msgpack")
    content = langgraph_delta_bytes(header)
    assert content.startswith(LANGGRAPH_DELTA_MAGIC_2)
    assert langgraph_delta_header(content) == header == langgraph_delta_header(_delta_bytes(header))
    assert artifact_links(content) == artifact_links(_delta_bytes(header))
    assert len(content) < len(_delta_bytes(header))
    assert langgraph_delta_header(content[:-1]) is None  # a digest cut short
    assert langgraph_delta_header(content + b"\0") is None
    json_part = content[: content.index(b"\n", len(LANGGRAPH_DELTA_MAGIC_2))]
    assert langgraph_delta_header(json_part.replace(b'"t":', b'"e":') + content[len(json_part) :]) is None


@pytest.mark.parametrize("member", ["e", "b"])
def test_a_binary_delta_refuses_a_link_that_is_not_a_digest(member: str) -> None:
    header = {"t": "msgpack", "e": "ab" * 32, "b": "cd" * 32, "d": 1, member: "sha256:" + "ef" * 32}
    with pytest.raises(ValueError, match=f"delta member '{member}'"):
        langgraph_delta_bytes(header)


def _quoting(url: str) -> tuple[str, str, str]:
    """A session whose events name a stored artifact and quote two digests no artifact has (an exact
    handle string and a mention in text); its id and the two quoted digests."""
    with flightlog.open_store(url) as store:
        rec = Recorder.create(store, task="quotes")
        ref = rec.put_artifact(b"kept", "text/plain")
        rec.append(Custom(custom_kind="note", payload={"text": "pulled image sha256:" + "cd" * 32}))
        rec.append(Custom(custom_kind="note", payload={"ref": ref, "digest": "sha256:" + "ab" * 32}))
        return rec.session_id, "cd" * 32, "ab" * 32


def test_digests_events_quote_but_no_artifact_holds_are_copied_and_reported(
    tmp_path: Path, store_url: str
) -> None:
    """Before: skipped without a word. A quoted digest was never an artifact: the copy goes on, and says so."""
    src_url = str(tmp_path / "quotes.db")
    sid, first, second = _quoting(src_url)
    result = CliRunner().invoke(app, ["db", "copy", src_url, store_url])
    assert result.exit_code == 0, result.output
    note = (
        f"note: {sid}: its events quote 2 sha256 digest(s) that name no artifact of the source (the first "
        f"at seq 0: sha256:{first}); copied as the events hold them, nothing to carry"
    )
    assert note in result.stderr, result.stderr
    assert "copied 1 session(s)" in result.stdout
    with flightlog.open_store(store_url) as copy:
        assert copy.get_artifact(sha256(b"kept").hexdigest()) == b"kept"
        assert copy.get_artifact(second) is None


def test_an_artifact_a_langgraph_record_names_is_required(tmp_path: Path) -> None:
    """Unlike a quote, a LangGraph record's ``ref`` was stored with it: the copy is refused naming it.

    The record is the thread's first checkpoint (it names one ref), found by its kind: LangGraph saves the
    first task's writes and that checkpoint from its background thread in either order, so its seq is 1 or
    2 (it was read at seq 1, which held the writes, naming two refs, in ~1 of 4 runs with the saver's calls
    delayed at random)."""
    db = tmp_path / "lg.db"
    _thread(db)
    raw = sqlite3.connect(db)
    rows = raw.execute("SELECT seq, event FROM events ORDER BY seq").fetchall()
    raw.close()
    seq, event = next((s, bytes(e)) for s, e in rows if json.loads(e).get("custom_kind") == CHECKPOINT_KIND)
    (gone,) = re.findall(r'"ref":"sha256:([0-9a-f]{64})"', event.decode())
    message = _refused_copy(db, gone)
    assert f"artifact sha256:{gone}, named by the record at seq {seq}, is missing from the source" in message
