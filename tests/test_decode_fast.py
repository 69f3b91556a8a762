"""decode_stored's fast path (pydantic's JSON parser) gives the same events as the reference path.

The reference path is ``parse_json`` (integer literals beyond ±(2**53-1) read back as the float that
wrote them) + upcasters + ``event_from_wire``; the fast path is one ``validate_json`` call. Compared on
generated events (any JSON payload: floats, large integral floats, unicode, control characters, deep
nesting) and on every event the importers make of the repository's sample transcripts.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flightlog.encoding as encoding_module
from flightlog.encoding import (
    MAX_SAFE_INTEGER,
    canonical_bytes,
    decode_rows,
    decode_stored,
    decodes_without,
    parse_json,
)
from flightlog.errors import EventDecodeError
from flightlog.events import (
    Custom,
    LlmCompleted,
    MemoryRetrievalResult,
    ProviderReplay,
    RunStarted,
    RunTerminal,
    SessionEvent,
    ToolCompleted,
    ToolRequested,
    event_from_json_or_none,
    event_from_wire,
)
from flightlog.messages import Message, TextPart, ThinkingPart, ToolCall, ToolResult
from flightlog.store.sqlite import SqliteStore

SAMPLES = Path(__file__).parent / "data" / "samples"

TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30)
U32 = st.integers(0, 2**32 - 1)
NUMBERS = (
    st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER)
    | st.floats(allow_nan=False, allow_infinity=False)
    # integral floats beyond 2**53: RFC 8785 writes them as long integer literals
    | st.integers(54, 300).map(lambda e: float(2**e))
    | st.sampled_from([1e16, -1e21, 1e21, 5e-324, 0.1, -0.0, 2.0**53, 9007199254740993.0])
)
JSON = st.recursive(
    st.none() | st.booleans() | NUMBERS | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=25,
)
CALL = st.builds(ToolCall, id=TEXT, name=TEXT, arguments=TEXT)
EVENTS: st.SearchStrategy[Any] = st.one_of(
    st.builds(Custom, custom_kind=TEXT, payload=JSON),
    st.builds(RunStarted, run_id=TEXT, goal=TEXT, criteria=st.lists(TEXT, max_size=3)),
    st.builds(
        LlmCompleted,
        turn=U32,
        message=st.builds(
            Message,
            role=st.sampled_from(["assistant", "user", "system", "tool"]),
            content=st.lists(
                st.builds(TextPart, text=TEXT)
                | st.builds(ThinkingPart, thinking=TEXT, signature=st.none() | TEXT),
                max_size=3,
            ),
            tool_calls=st.lists(CALL, max_size=2),
        ),
        provider_replay=st.none()
        | st.builds(
            ProviderReplay,
            protocol=TEXT,
            native_blocks=st.none() | st.lists(st.dictionaries(TEXT, JSON, max_size=3), max_size=3),
            native_message=st.none() | JSON,
        ),
    ),
    st.builds(ToolRequested, turn=U32, calls=st.lists(CALL, max_size=3)),
    st.builds(
        ToolCompleted,
        turn=U32,
        results=st.lists(
            st.builds(
                ToolResult, call_id=TEXT, output=TEXT, is_error=st.booleans(), token_count=st.none() | U32
            ),
            max_size=3,
        ),
    ),
)


def _reference(data: bytes) -> SessionEvent:
    return event_from_wire(parse_json(data))


def _assert_same(data: bytes) -> None:
    reference = _reference(data)
    fast = event_from_json_or_none(data)
    if fast is not None and re.search(rb"[0-9]{16}", data) is None:  # the fast path's domain
        assert type(fast) is type(reference)
        assert fast == reference
        assert fast.model_fields_set == reference.model_fields_set
        assert canonical_bytes(fast) == data
    decoded = decode_stored(data)
    assert decoded == reference
    assert canonical_bytes(decoded) == data


@settings(max_examples=600, deadline=None)
@given(EVENTS)
def test_fast_and_reference_decoders_give_equal_events(event: Any) -> None:
    _assert_same(canonical_bytes(event))


def test_long_integer_literals_take_the_reference_path() -> None:
    # 1e16 is stored as 10000000000000000; pydantic would read an int, the reference path the float
    data = canonical_bytes(Custom(custom_kind="k", payload={"x": 1e16, "y": [2.0**60]}))
    assert b"10000000000000000" in data
    assert event_from_json_or_none(data) != _reference(data)  # why the fast path must not take it
    event = decode_stored(data)
    assert isinstance(event, Custom) and type(event.payload["x"]) is float
    assert canonical_bytes(event) == data


def test_refusals_come_from_the_reference_path_with_seq() -> None:
    for data, words in [
        (b'{"kind":"custom","custom_kind":1}', "custom_kind"),
        (b'{"kind":"nope"}', "nope"),
        (b"[1]", "not a JSON object"),
        (b"{", "not JSON"),
        (b'{"kind":"custom","custom_kind":"\xff"}', "not JSON"),
    ]:
        with pytest.raises(EventDecodeError) as caught:
            decode_stored(data, seq=7)
        assert caught.value.seq == 7
        assert words in str(caught.value)


def test_every_imported_sample_event_decodes_the_same_both_ways(sample_store: SqliteStore) -> None:
    rows = 0
    for session in sample_store.list_sessions():
        for row in sample_store.read_events(session.session_id):
            _assert_same(row.event_bytes)
            rows += 1
    assert rows > 100


@pytest.mark.parametrize(
    "data",
    [
        b'{"custom_kind":"a","custom_kind":"b","kind":"custom","payload":{"x":1,"x":[2]}}',  # duplicate keys
        b'{ "kind" : "custom", "custom_kind" : "k", "payload" : [ 1 , 2.5 , -0 , 1E2 ] }',  # white space
        b'{"kind":"custom","custom_kind":"\\u00e9\\ud83d\\ude00\\/","payload":"\\t\\u0000"}',  # escapes
        b'{"kind":"custom","custom_kind":"k","payload":[0.30000000000000004,1e-7,123456789012345]}',
    ],
)
def test_hand_written_json_decodes_the_same_both_ways(data: bytes) -> None:
    """Stored bytes are canonical, but nothing breaks if some are not: both paths agree on other JSON too."""
    reference = _reference(data)
    assert decode_stored(data) == reference
    fast = event_from_json_or_none(data)
    assert fast == reference  # pydantic alone agrees on these too (no integer beyond 2**53 among them)


_ODD_ROWS = [
    b'{"kind":"custom","custom_kind":1}',  # refused: names the field
    b"[1]",  # not an object
    b"{",  # not JSON
    canonical_bytes(Custom(custom_kind="k", payload={"x": 1e16})),  # a long integer literal: reference path
    b'{"hits":[],"kind":"memory_retrieval_result","query":"q","turn":1}',  # a kind with an upcaster
    b'{ "kind" : "custom", "custom_kind" : "k" }',  # white space
]


def _decoded_or_error(data: Any, seq: int) -> tuple[str, Any]:
    try:
        return "event", decode_stored(data, seq=seq)
    except EventDecodeError as exc:
        return "error", (str(exc), exc.seq)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            EVENTS.map(canonical_bytes),
            st.sampled_from(_ODD_ROWS),
            st.sampled_from(_ODD_ROWS).map(lambda b: b.decode("utf-8", "replace")),  # a TEXT value
            EVENTS.map(lambda e: bytearray(canonical_bytes(e))),  # not bytes: the reference path
        ),
        max_size=6,
    )
)
def test_decode_rows_decodes_each_row_as_decode_stored_does(blobs: list[Any]) -> None:
    """The replay read path's loop gives, row by row, the event decode_stored gives (equal, same fields-set),
    and stops at the first row it refuses with decode_stored's error naming that row's seq."""
    rows = [(seq, blob, "prev", "hash") for seq, blob in enumerate(blobs, start=3)]
    expected = [_decoded_or_error(blob, seq) for seq, blob, _, _ in rows]
    got: list[tuple[str, Any]] = []
    pairs = decode_rows(rows)
    while True:
        try:
            seq, event = next(pairs)
        except StopIteration:
            break
        except EventDecodeError as exc:
            got.append(("error", (str(exc), exc.seq)))
            break
        assert seq == rows[len(got)][0]
        got.append(("event", event))
    assert got == expected[: len(got)]
    assert len(got) == len(expected) or got[-1][0] == "error"
    for (kind, value), (_, want) in zip(got, expected, strict=False):
        if kind == "event":
            assert type(value) is type(want) and value.model_fields_set == want.model_fields_set
            assert canonical_bytes(value) == canonical_bytes(want)  # 1e16 read as an int would not encode


def test_kinds_read_without_the_digit_scan() -> None:
    """Kinds of only strings, booleans, string literals and U32 skip the scan; any kind that can hold a long
    integer (an ``Any`` payload, a float, a U64) keeps it."""
    exact = encoding_module._NO_LONG_INTEGERS
    assert {"checkpoint_taken", "tool_requested", "tool_completed", "run_started"} <= exact
    assert not {"custom", "llm_completed", "compressed", "entropy_sample", "memory_retrieval_result"} & exact


def test_the_schema_walk_refuses_anything_that_can_hold_a_long_integer() -> None:
    from pydantic import BaseModel, ConfigDict, TypeAdapter

    from flightlog.messages import U32 as Bounded32
    from flightlog.messages import U64 as Bounded64

    def walk(model: type[BaseModel]) -> bool:
        return encoding_module._no_long_integers(TypeAdapter(model).core_schema)

    class Small(BaseModel):
        a: Bounded32
        b: list[str] = []
        c: bool | None = None
        d: tuple[Bounded32, str] = (0, "")

    class WithAny(BaseModel):
        a: Any

    class WithFloat(BaseModel):
        a: float

    class WithU64(BaseModel):
        a: Bounded64

    class WithInt(BaseModel):
        a: int

    class WithDict(BaseModel):
        a: dict[str, str]

    class Extra(BaseModel):
        model_config = ConfigDict(extra="allow")
        a: str

    class Nested(BaseModel):
        inner: list[Small]
        other: list[WithAny] = []

    assert walk(Small)
    assert not any(map(walk, (WithAny, WithFloat, WithU64, WithInt, WithDict, Nested)))
    assert not walk(Extra)


@pytest.mark.parametrize("digits", ["1" * 16, "9" * 20, "4294967296"])
def test_a_scan_free_kind_with_a_long_number_decodes_as_the_reference_does(digits: str) -> None:
    """In a string, a long digit run takes the fast path and gives the reference's event; as a number in a
    U32 field, both decoders refuse it (the error from the reference path, naming the seq)."""
    event = ToolCompleted(turn=1, results=[ToolResult(call_id=digits, output=f"x {digits} y", token_count=3)])
    data = canonical_bytes(event)
    assert decode_stored(data) == _reference(data) == event
    for field in (b'"turn":1', b'"token_count":3'):
        name = field.split(b":")[0]
        bad = data.replace(field, name + b":" + digits.encode())
        assert bad != data
        with pytest.raises(EventDecodeError) as caught:
            decode_stored(bad, seq=4)
        assert caught.value.seq == 4
        with pytest.raises(EventDecodeError):
            _reference(bad)
        outcome, error = _decoded_or_error(bad, 4)
        assert outcome == "error"
        with pytest.raises(EventDecodeError) as in_rows:
            list(decode_rows([(4, bad)]))
        assert str(in_rows.value) == error[0]


def _strings(value: Any) -> Iterator[str]:
    """Every string of a decoded JSON value: object keys and string values, at any depth."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)


@settings(max_examples=300, deadline=None)
@given(EVENTS)
def test_decodes_without_never_denies_a_string_the_event_holds(event: Any) -> None:
    """``decodes_without`` proves only absences: for every string the stored bytes decode to (the kind
    included), it answers False, whatever escapes canonical JSON wrote for it."""
    data = canonical_bytes(event)
    for text in _strings(parse_json(data)):
        assert not decodes_without(data, (text.encode(),)), text


def test_decodes_without_reads_escapes_and_upcasters_as_unknown() -> None:
    """A kind spelled with a JSON escape (bytes no canonical writer makes, but a store can hold) still
    decodes to that kind, so a backslash anywhere says False; so does the kind of a registered upcaster
    (it may rewrite the event into any value)."""
    end = canonical_bytes(RunTerminal(reason="completed", turns_used=1, total_tokens=2))
    escaped = end.replace(b'"run_terminal"', b'"run\\u005fterminal"')
    assert b"run_terminal" not in escaped and isinstance(decode_stored(escaped), RunTerminal)
    assert not decodes_without(end, (b"run_terminal",)) and not decodes_without(escaped, (b"run_terminal",))
    plain = canonical_bytes(RunStarted(run_id="r", goal="g"))
    assert decodes_without(plain, (b"run_terminal",))
    recall = canonical_bytes(MemoryRetrievalResult(hits=[]))
    assert "memory_retrieval_result" in encoding_module._UPCASTERS
    assert b"run_terminal" not in recall and not decodes_without(recall, (b"run_terminal",))
