"""The importer's event spool (issue 19): the canonical bytes it holds are what an import records, read in
ranges, and :func:`events_of` selects events by kind without decoding the others, with the same result
as walking the events in memory."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flightlog.encoding import canonical_bytes
from flightlog.events import Custom, RunStarted, SessionEvent, ToolCompleted, ToolRequested
from flightlog.importers.base import EventSpool, events_of, new_event_list, spooled_events
from flightlog.messages import ToolCall, ToolResult
from flightlog.recorder import Recorder
from flightlog.store import SqliteStore

TEXT = st.sampled_from(["plain", "<task-notification><task-id>7</task-id></task-notification>", 'q"\\'])


@st.composite
def an_event(draw: Any) -> SessionEvent:
    text = draw(TEXT)
    choice = draw(st.integers(0, 4))
    if choice == 0:
        return RunStarted(run_id=f"r{draw(st.integers(0, 9))}", goal=text)
    if choice == 1:
        return ToolRequested(turn=1, calls=[ToolCall(id="c1", name="Bash", arguments="{}")])
    if choice == 2:
        return ToolCompleted(turn=1, results=[ToolResult(call_id="c1", output=text)])
    payload = draw(st.sampled_from([{"text": text}, [text], text, {"n": 1}]))
    return Custom(custom_kind="k", payload=payload)


@settings(max_examples=60, deadline=None)
@given(
    events=st.lists(an_event(), max_size=1200),
    kinds=st.sets(st.sampled_from(["run_started", "tool_requested", "tool_completed", "custom"])),
    need=st.sampled_from([None, b"<task-notification>", b"plain", "plain-and-quote"]),
)
def test_events_of_a_spool_is_events_of_the_list_and_ranges_are_the_canonical_bytes(
    events: list[SessionEvent], kinds: set[str], need: bytes | str | None
) -> None:
    with spooled_events():
        spool = new_event_list()
    assert isinstance(spool, EventSpool)
    try:
        for event in events:
            spool.append(event)
        # a need is bytes the event's bytes must hold, or a function of its bytes
        test: bytes | Callable[[bytes], bool] | None = (
            (lambda data: b"plain" in data and b'\\"' in data) if isinstance(need, str) else need
        )
        needs = {"custom": test} if test is not None else None
        got = list(events_of(spool, kinds, needs))
        walked = list(events_of(events, kinds))

        def kept(event: SessionEvent) -> bool:
            if test is None or event.kind != "custom":
                return True
            data = canonical_bytes(event)
            return test in data if isinstance(test, bytes) else test(data)

        # a need only drops events it rejects (the caller's statement that they cannot matter)
        assert got == [(i, e) for i, e in walked if kept(e)]
        assert list(spool) == events
        for start, stop in ((0, None), (3, 700), (-5, None), (None, -2), (600, 3)):
            assert spool[start:stop] == events[start:stop]
            assert spool.raw_range(start, stop) == [canonical_bytes(e) for e in events[start:stop]]
        # appends after reads land at the end (a read moves the file position)
        extra = [RunStarted(run_id="late", goal="g"), Custom(custom_kind="k", payload=None)]
        for event in extra:
            if len(spool):
                assert spool.raw(0) == canonical_bytes([*events, *extra][0])
            spool.append(event)
        assert list(spool) == [*events, *extra]
    finally:
        spool.close()


def test_append_many_records_the_bytes_it_is_given_and_refuses_a_count_mismatch(tmp_path: Any) -> None:
    events = [RunStarted(run_id="r", goal="g"), Custom(custom_kind="k", payload={"a": 1})]
    encoded = [canonical_bytes(e) for e in events]
    with SqliteStore(tmp_path / "a.db") as one, SqliteStore(tmp_path / "b.db") as two:
        plain = Recorder.create(one, session_id="s")
        plain.append_many(events)
        given_bytes = Recorder.create(two, session_id="s")
        with pytest.raises(ValueError, match="encoded has 1 items for 2 events"):
            given_bytes.append_many(events, encoded=encoded[:1])
        given_bytes.append_many(events, encoded=encoded)
        assert given_bytes.head == plain.head and given_bytes.root == plain.root
        assert [r.event_bytes for r in two.read_events("s")] == encoded
