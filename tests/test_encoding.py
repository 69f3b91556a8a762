"""The stdlib fast path of canonical_json writes exactly what RFC 8785 (rfc8785) writes."""

from __future__ import annotations

import enum
import types
import typing
from typing import Any

import pydantic_core
import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from flightlog import encoding as enc
from flightlog import events as ev
from flightlog.encoding import (
    MAX_SAFE_INTEGER,
    _plain,
    canonical_bytes,
    canonical_json,
    decode_stored,
    model_bytes,
    recordable_text,
)
from flightlog.errors import EncodingError
from flightlog.events import CancellationReason, Custom, Event, LlmCompleted, ProviderReplay
from flightlog.messages import Message, ToolCall, ToolResult, WireModel, content_part_adapter

TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=20)
VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER)
    | TEXT
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=1500, deadline=None)
@given(VALUES)
def test_canonical_json_equals_rfc8785_on_every_value(value: Any) -> None:
    assert canonical_json(value) == rfc8785.dumps(value)


def test_fast_path_declines_what_it_cannot_match() -> None:
    assert _plain({"a": [1, "x", None, True]})
    assert not _plain({"a": 1.5})
    assert not _plain({"\U0001f99c": 1})  # astral key: UTF-16 order differs from code point order
    assert not _plain([2**53])
    assert canonical_json({"\ue000": 1, "\U0001f99c": 2}) == rfc8785.dumps({"\ue000": 1, "\U0001f99c": 2})
    assert canonical_json({"s": '\u2028\x7f\x00\x1f"\\'}) == rfc8785.dumps({"s": '\u2028\x7f\x00\x1f"\\'})


# Keys and strings that stress the fast path's domain: astral and private-use characters (UTF-16 order
# differs from code point order above U+D800), every C0 control character, DEL, "/", quotes, backslashes.
EDGE_CHARS = st.sampled_from(
    ["\ud7ff", "\ue000", "\uf8ff", "\uffff", "\U0001f99c", "\U00010000", "\x7f", "/", '"', "\\", "\u2028"]
    + [chr(c) for c in range(0x20)]
)
EDGE_TEXT = st.lists(EDGE_CHARS | st.characters(blacklist_categories=("Cs",)), max_size=8).map("".join)
BAD_SCALARS = st.sampled_from(
    [float("nan"), float("inf"), -float("inf"), 2**53, -(2**53), 10**30, "lone \ud800", "\udfff"]
)
ANY_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**60), 2**60)
    | EDGE_TEXT
    | st.floats(allow_nan=False, allow_infinity=False)
    | BAD_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(EDGE_TEXT | st.sampled_from(["\ud800", "k\udc00"]), inner, max_size=4)
    ),
    max_leaves=30,
)


@settings(max_examples=700, deadline=None)
@given(ANY_VALUES)
def test_canonical_json_equals_rfc8785_or_both_refuse(value: Any) -> None:
    try:
        reference = rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, UnicodeError, TypeError):
        with pytest.raises(EncodingError):
            canonical_json(value)
    else:
        assert canonical_json(value) == reference


def _outcome(encode: Any, value: Any) -> tuple[str, Any]:
    try:
        return "ok", encode(value)
    except (ValueError, TypeError, RecursionError) as exc:
        return type(exc).__name__, None


@settings(max_examples=700, deadline=None)
@given(ANY_VALUES | st.sampled_from([{"a": {1, 2}}, [b"x"], {(1,): 2}, 1.0e308, -0.0]))
def test_the_prebuilt_c_encoder_writes_what_the_fast_encoder_writes(value: Any) -> None:
    """``_fast_json`` (the stdlib's C encoder built once) gives ``_FAST.encode``'s text, or the same error,
    on any value: floats, NaN, huge integers, lone surrogates, non-JSON types and non-str keys included."""
    assert _outcome(enc._fast_json, value) == _outcome(enc._FAST.encode, value)


def test_stdlib_escapes_exactly_as_rfc8785() -> None:
    """RFC 8785 §3.2.2.2: ``\\b \\f \\n \\r \\t`` short forms, other C0 as lowercase ``\\u00xx``, ``"`` and
    ``\\\\`` escaped; DEL, ``/`` and everything else written raw (checked character by character)."""
    short = {"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", '"': '\\"', "\\": "\\\\"}
    for code in [*range(0x80), 0x2028, 0x2029, 0xE000, 0xFFFF, 0x1F99C]:
        char = chr(code)
        expected = short.get(char, f"\\u{code:04x}" if code < 0x20 else char)
        assert canonical_json(char) == f'"{expected}"'.encode() == rfc8785.dumps(char)


def test_refusals_name_the_field() -> None:
    for value, field, words in [
        ({"a": [1, float("nan")]}, "$.a[1]", "nan"),
        ({"a": {"b": 2**53}}, "$.a.b", "2**53"),
        ({"s": "x\ud800"}, "$.s", "lone surrogate"),
        ({"k\udc00": 1}, "$.k\udc00", "lone surrogate"),
    ]:
        with pytest.raises(EncodingError) as caught:
            canonical_json(value)
        assert caught.value.field == field
        assert words in str(caught.value)


def _general_path(event: Custom) -> bytes:
    """What ``canonical_bytes`` writes through pydantic's dump (the path the ``Custom`` shortcut skips)."""
    return rfc8785.dumps(event.to_wire())


@settings(max_examples=700, deadline=None)
@given(st.one_of(st.none(), ANY_VALUES, st.tuples(TEXT, st.integers())), EDGE_TEXT)
def test_custom_events_encode_as_through_their_wire_form_or_both_refuse(payload: Any, kind: str) -> None:
    """``canonical_bytes`` of a ``Custom`` event (its shortcut for plain JSON payloads) equals RFC 8785 of
    its ``to_wire`` dict, or both refuse (``EncodingError``)."""
    try:
        event = Custom(custom_kind=kind, payload=payload)
        reference = _general_path(event)
    except (rfc8785.CanonicalizationError, UnicodeError, TypeError, PydanticSerializationError):
        with pytest.raises(EncodingError):
            canonical_bytes(Custom(custom_kind=kind, payload=payload))
    else:
        assert canonical_bytes(event) == reference


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("depth", [300, 3000])
def test_a_value_too_deep_to_encode_is_an_encoding_error_naming_the_root(depth: int) -> None:
    """An event whose value nests deeper than an encoder goes (the stdlib's C encoder: ~1,000 levels;
    pydantic's serializer: ~254) is refused as ``EncodingError`` at ``$`` (what ``canonical_json`` says),
    or encoded; never a ``RecursionError`` or a bare ``ValueError`` (``Custom``'s shortcut, and pydantic's
    dump of any other event, let them out on main)."""
    deep = _nested(depth)
    events = [
        Custom(custom_kind="x", payload=deep),
        LlmCompleted(
            turn=1,
            message=Message(role="assistant"),
            provider_replay=ProviderReplay(protocol="p", native_message={"deep": deep}),
        ),
    ]
    for event in events:
        try:
            data = canonical_bytes(event)
        except EncodingError as caught:
            assert caught.field == "$"
            assert "nested too deeply" in caught.reason
        else:
            assert decode_stored(data) == event


# ─── model_bytes: every event kind's bytes without pydantic's dump ─────────────────────────────

WIRE_TEXT = EDGE_TEXT | st.sampled_from(["x\ud800", "\udc00"])
WIRE_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**60), 2**60) | WIRE_TEXT | st.floats(),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(WIRE_TEXT, inner, max_size=3) | st.tuples(inner, inner)
    ),
    max_leaves=12,
)


def _ints(metadata: list[Any]) -> st.SearchStrategy[int]:
    low = max((m.ge for m in metadata if hasattr(m, "ge")), default=-(2**60))
    high = min((m.le for m in metadata if hasattr(m, "le")), default=2**60)
    return st.sampled_from([low, high, MAX_SAFE_INTEGER, MAX_SAFE_INTEGER + 1]).filter(
        lambda n: low <= n <= high
    ) | st.integers(low, min(high, 2**20))


def _for(annotation: Any, metadata: list[Any]) -> st.SearchStrategy[Any]:
    """Values a field of this annotation accepts (every annotation the event models use)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is Any:
        return WIRE_JSON
    if origin is typing.Annotated:
        extra = [getattr(m, "metadata", [m]) for m in args[1:]]  # a FieldInfo holds its Ge/Le
        return _for(args[0], [*metadata, *(m for ms in extra for m in ms)])
    if origin is typing.Literal:
        return st.sampled_from(args)
    if origin in (types.UnionType, typing.Union):
        return st.one_of(*(_for(arg, []) for arg in args))
    if origin is list:
        return st.lists(_for(args[0], []), max_size=3)
    if origin is tuple:
        return st.tuples(*(_for(arg, []) for arg in args))
    if origin is dict:
        return st.dictionaries(WIRE_TEXT, _for(args[1], []), max_size=3)
    if annotation is type(None):
        return st.none()
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return st.sampled_from(list(annotation))
    if isinstance(annotation, type) and issubclass(annotation, WireModel):
        return st.deferred(lambda: _model(annotation))
    simple = {str: WIRE_TEXT, bool: st.booleans(), float: st.floats(allow_nan=False) | st.integers(-9, 9)}
    if annotation is int:
        return _ints(metadata)
    return simple[annotation]


def _model(cls: type[WireModel]) -> st.SearchStrategy[WireModel]:
    fields = cls.model_fields
    required = {n: _for(f.annotation, f.metadata) for n, f in fields.items() if f.is_required()}
    optional = {n: _for(f.annotation, f.metadata) for n, f in fields.items() if not f.is_required()}
    return st.fixed_dictionaries(required, optional=optional).map(lambda values: cls(**values))


EVERY_EVENT = st.one_of(*(_model(cls) for cls in typing.get_args(typing.get_args(ev.SessionEvent)[0])))


def _reference(event: Event) -> bytes | None:
    """The bytes through pydantic's dump (``to_wire``, then RFC 8785), None where that refuses."""
    try:
        return canonical_json(event.to_wire())
    except (EncodingError, PydanticSerializationError):
        return None


@settings(max_examples=1500, deadline=None)
@given(EVERY_EVENT)
def test_model_bytes_equal_the_dumped_wire_form_for_every_event_kind(event: Event) -> None:
    """``model_bytes`` (what ``canonical_bytes`` writes for most events) gives the bytes of the event's
    ``to_wire`` dict, or leaves the event to that path; ``canonical_bytes`` gives them or refuses."""
    reference = _reference(event)
    fast = model_bytes(event)
    if fast is not None:
        assert fast == reference
    if reference is None:
        with pytest.raises(EncodingError):
            canonical_bytes(event)
    else:
        assert canonical_bytes(event) == reference


def test_pydantic_core_writes_rfc8785_strings_for_every_code_point() -> None:
    """``model_bytes`` hands its key-ordered wire dict to ``pydantic_core.to_json``: every character but
    the surrogates, as a value and as a key (below U+D800, the keys the walk takes), is escaped or written
    raw exactly as RFC 8785 does, and integers within ±(2**53-1) are written alike."""
    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    every = "".join(chars)
    assert pydantic_core.to_json({"k": every}) == rfc8785.dumps({"k": every})
    keys = {c: 1 for c in chars if c < "\ud800"}
    assert pydantic_core.to_json(keys) == rfc8785.dumps(keys)
    for c in chars[:0x80]:  # one string per ASCII character: each escape on its own
        assert pydantic_core.to_json([c, f"a{c}b"]) == rfc8785.dumps([c, f"a{c}b"])
    ints = [0, 1, -1, MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER, True, False, None]
    assert pydantic_core.to_json(ints) == rfc8785.dumps(ints)
    with pytest.raises(PydanticSerializationError):  # a lone surrogate: model_bytes leaves the event
        pydantic_core.to_json({"k": "x\ud800"})


def test_model_bytes_writes_keys_in_canonical_order_and_follows_write_null(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The generated writer puts fields (and a dict's keys) in sorted order, and reads ``_write_null`` at
    each dump (as ``WireModel``'s serializer does: ``tests/test_wire_legacy.py`` clears it)."""
    event = Custom(custom_kind="k", payload={"b": 1, "a": {"d": [], "c": None}})
    assert list(enc._wire_of(event)) == ["custom_kind", "kind", "payload"]
    assert list(enc._wire_of(event)["payload"]) == ["a", "b"]
    started = ev.RunStarted(run_id="r", goal="g")
    assert model_bytes(started) == canonical_json(started.to_wire())
    monkeypatch.setattr(ev.RunStarted, "_write_null", frozenset())
    assert b"agent_id" not in (model_bytes(started) or b"agent_id")
    assert model_bytes(started) == canonical_json(started.to_wire())


class _Wider(Message):
    extra_note: str = "not a Message field"


def test_model_bytes_takes_plain_events_and_leaves_the_rest() -> None:
    plain = [
        ev.CheckpointTaken(turn=1, history_len=4),
        ev.RunStarted(run_id="r", goal="g"),  # _write_null fields written as null, empty attachments left out
        ev.LlmCompleted(turn=1, message=Message.text("assistant", 'hé \x00 \\ "')),
        ev.ToolCompleted(turn=1, results=[ToolResult(call_id="c", output="o", token_count=3)]),
    ]
    for event in plain:
        assert model_bytes(event) == canonical_json(event.to_wire())
    assert b'"agent_id":null' in (model_bytes(plain[1]) or b"")
    left = [
        Custom(custom_kind="k", payload={"x": 1.5}),  # a float: RFC 8785's number form
        Custom(custom_kind="k", payload=2**60),  # beyond ±(2**53-1)
        ev.RunStarted(run_id="r", goal="x\ud800"),  # a lone surrogate: the general path names it
        ev.LlmCompleted.model_construct(
            kind="llm_completed", turn=1, message=_Wider(role="user")
        ),  # a subclass
        ev.OperationCancelled(turn=1, operation_id="o", reason=ev.CancellationReason.USER),  # an enum
        # deeper than the walk goes: pydantic's dump decides (it refuses ~254 levels)
        LlmCompleted(
            turn=1,
            message=Message(role="assistant"),
            provider_replay=ProviderReplay(protocol="p", native_message=_nested(150)),
        ),
    ]
    for event in left:
        assert model_bytes(event) is None


# ─── Event bytes without the event: equal to canonical_bytes of the model, or None ──────────────────

TURNS = st.integers(0, 50) | st.sampled_from([2**32 - 1, 2**32, -1, True])
SOME_TEXT = EDGE_TEXT | st.sampled_from(["lone \ud800", "\udfff"])
RESULTS = st.lists(st.tuples(SOME_TEXT, SOME_TEXT, st.booleans() | st.just(1)), max_size=3)
CALLS = st.lists(st.tuples(SOME_TEXT, SOME_TEXT, SOME_TEXT), max_size=3)
PARTS = st.lists(
    st.tuples(st.just("text"), SOME_TEXT, st.none())
    | st.tuples(st.just("thinking"), SOME_TEXT, st.none() | SOME_TEXT)
    | st.tuples(st.just("redacted_thinking"), SOME_TEXT, st.none()),
    max_size=4,
)


_PART_FIELD = {"text": "text", "thinking": "thinking", "redacted_thinking": "data"}


def _part(part_type: str, text: str, signature: str | None) -> Any:
    """The content part (a model) those fields stand for, validated from its wire form."""
    wire = {"type": part_type, _PART_FIELD[part_type]: text}
    return content_part_adapter.validate_python(
        wire if signature is None else {**wire, "signature": signature}
    )


def _model_bytes(build: Any) -> bytes | None:
    """``canonical_bytes`` of the event ``build()`` makes; None when building or encoding it refuses."""
    try:
        return canonical_bytes(build())
    except (ValidationError, EncodingError):
        return None


def _plainly_fine(turn: Any, *texts: str) -> bool:
    """Fields every shortcut must take (an in-range int turn, no lone surrogate)."""
    return type(turn) is int and 0 <= turn < 2**32 and all(_no_surrogate(text) for text in texts)


def _no_surrogate(text: str) -> bool:
    return not any("\ud800" <= char <= "\udfff" for char in text)


@settings(max_examples=300, deadline=None)
@given(TURNS, RESULTS)
def test_tool_completed_bytes_equal_the_models(turn: Any, results: list[tuple[Any, Any, Any]]) -> None:
    """``tool_completed_bytes`` gives ``canonical_bytes(ToolCompleted(...))``, or None (then the caller
    builds the event): never other bytes; and it takes every in-range, surrogate-free input."""
    data = enc.tool_completed_bytes(turn, results)
    reference = _model_bytes(
        lambda: ev.ToolCompleted(
            turn=turn, results=[ToolResult(call_id=c, output=o, is_error=e) for c, o, e in results]
        )
    )
    if data is not None:
        assert data == reference
    texts = [text for c, o, _ in results for text in (c, o)]
    if _plainly_fine(turn, *texts) and all(type(e) is bool for _, _, e in results):
        assert data is not None


@settings(max_examples=300, deadline=None)
@given(TURNS, CALLS)
def test_tool_requested_bytes_equal_the_models(turn: Any, calls: list[tuple[str, str, str]]) -> None:
    """``tool_requested_bytes`` gives ``canonical_bytes(ToolRequested(...))`` or None, as above."""
    data = enc.tool_requested_bytes(turn, calls)
    reference = _model_bytes(
        lambda: ev.ToolRequested(turn=turn, calls=[ToolCall(id=i, name=n, arguments=a) for i, n, a in calls])
    )
    if data is not None:
        assert data == reference
    if _plainly_fine(turn, *[text for call in calls for text in call]):
        assert data is not None


@settings(max_examples=400, deadline=None)
@given(
    TURNS,
    PARTS,
    CALLS,
    st.none() | SOME_TEXT,
    st.none() | SOME_TEXT,
    st.lists(ANY_VALUES, max_size=3),
    st.booleans(),
)
def test_llm_completed_bytes_equal_the_models(
    turn: Any,
    parts: list[tuple[str, str, str | None]],
    calls: list[tuple[str, str, str]],
    provider: str | None,
    model: str | None,
    native: list[Any],
    vouch: bool,
) -> None:
    """``llm_completed_bytes`` gives ``canonical_bytes(LlmCompleted(...))`` or None, as above; with
    ``native_plain`` said only when ``_plain`` holds (the contract), and native blocks of any JSON value
    (floats, huge integers, astral keys, lone surrogates: never plain, so None or equal bytes)."""
    plain = _plain(native)
    data = enc.llm_completed_bytes(
        turn,
        parts,
        calls,
        protocol="anthropic.messages",
        provider=provider,
        model=model,
        native_blocks=native,
        native_plain=vouch and plain,
    )
    reference = _model_bytes(
        lambda: ev.LlmCompleted(
            turn=turn,
            message=Message(
                role="assistant",
                content=[_part(*part) for part in parts],
                tool_calls=[ToolCall(id=i, name=n, arguments=a) for i, n, a in calls],
            ),
            provider_replay=ev.ProviderReplay(
                protocol="anthropic.messages", provider=provider, model=model, native_blocks=native
            ),
        )
    )
    if data is not None:
        assert data == reference
    texts = [t for part in parts for t in part if t is not None] + [t for c in calls for t in c]
    texts += [t for t in (provider, model) if t is not None]
    if plain and _plainly_fine(turn, *texts) and reference is not None:
        assert data is not None


def test_event_bytes_refuse_what_the_model_would_change() -> None:
    """A bool turn (pydantic writes it as 1) and a subclass of str are refused, not written as given."""

    class Name(str):
        pass

    assert enc.tool_completed_bytes(True, []) is None
    assert enc.tool_requested_bytes(1, [(Name("a"), "b", "c")]) is None
    assert enc.tool_completed_bytes(1, [("a", "b", 1)]) is None  # type: ignore[list-item]
    assert (
        enc.llm_completed_bytes(
            1, [("image", "x", None)], [], protocol="p", provider=None, model=None, native_blocks=[]
        )
        is None
    )
    assert (
        enc.llm_completed_bytes(
            1, [("text", "x", "sig")], [], protocol="p", provider=None, model=None, native_blocks=[]
        )
        is None
    )
    assert (
        enc.llm_completed_bytes(
            1, [], [], protocol="p", provider=None, model=None, native_blocks=[1.5], native_plain=False
        )
        is None
    )


@settings(max_examples=300, deadline=None)
@given(SOME_TEXT, SOME_TEXT, st.none() | SOME_TEXT)
def test_run_started_bytes_equal_the_models(run_id: str, goal: str, agent_id: str | None) -> None:
    """``run_started_bytes`` gives ``canonical_bytes(RunStarted(...))`` (``agent_id`` and
    ``system_prompt`` written as null, ``criteria`` as []) or None, as above."""
    data = enc.run_started_bytes(run_id, goal, agent_id)
    reference = _model_bytes(lambda: ev.RunStarted(run_id=run_id, goal=goal, agent_id=agent_id))
    if data is not None:
        assert data == reference
    if _plainly_fine(0, run_id, goal, *([agent_id] if agent_id is not None else [])):
        assert data is not None


@settings(max_examples=300, deadline=None)
@given(SOME_TEXT, TURNS, st.integers(-2, 2**60) | st.sampled_from([2**53 - 1, 2**53, True]))
def test_run_terminal_bytes_equal_the_models(reason: str, turns: Any, tokens: Any) -> None:
    """``run_terminal_bytes`` gives ``canonical_bytes(RunTerminal(...))`` or None, as above (tokens beyond
    2**53-1, which encoding refuses, and negative ones, which the model refuses, give None)."""
    data = enc.run_terminal_bytes(reason, turns, tokens)
    reference = _model_bytes(lambda: ev.RunTerminal(reason=reason, turns_used=turns, total_tokens=tokens))
    if data is not None:
        assert data == reference
    if _plainly_fine(turns, reason) and type(tokens) is int and 0 <= tokens <= MAX_SAFE_INTEGER:
        assert data is not None


@settings(max_examples=300, deadline=None)
@given(
    TURNS,
    SOME_TEXT,
    st.sampled_from([*CancellationReason, "user", "deadline", "nope", "USER"]),
    st.lists(SOME_TEXT, max_size=3),
)
def test_operation_cancelled_bytes_equal_the_models(
    turn: Any, operation_id: str, reason: str, pending: list[str]
) -> None:
    """``operation_cancelled_bytes`` gives ``canonical_bytes(OperationCancelled(...))`` or None, as above
    (a reason that is no ``CancellationReason`` value gives None)."""
    data = enc.operation_cancelled_bytes(turn, operation_id, reason, pending)
    reference = _model_bytes(
        lambda: ev.OperationCancelled(
            turn=turn,
            operation_id=operation_id,
            reason=reason,  # type: ignore[arg-type]
            pending_call_ids=pending,
        )
    )
    if data is not None:
        assert data == reference
    if _plainly_fine(turn, operation_id, *pending) and reason in {r.value for r in CancellationReason}:
        assert data is not None


@pytest.mark.parametrize("depth", [150, 300, 3000])
def test_event_bytes_of_a_value_too_deep_are_none_or_the_models(depth: int) -> None:
    """Native blocks nested deeper than the model path's serializer goes (~254 levels) or the C encoder
    (~1,000): ``llm_completed_bytes`` gives None (the model path then refuses with ``EncodingError`` at
    ``$``), never other bytes or a ``RecursionError``; blocks within ``NATIVE_DEPTH_LIMIT`` are written.
    The importers' reader refuses lines nested deeper than ``MAX_LINE_DEPTH``, below that limit."""
    from flightlog.importers.base import MAX_LINE_DEPTH

    assert MAX_LINE_DEPTH + 3 <= enc.NATIVE_DEPTH_LIMIT  # a record's blocks, as the importer vouches them
    native = [_nested(depth)]
    data = enc.llm_completed_bytes(1, [], [], protocol="p", provider=None, model=None, native_blocks=native)
    if depth <= enc.NATIVE_DEPTH_LIMIT - 2:
        assert data is not None
    model = LlmCompleted(
        turn=1,
        message=Message(role="assistant"),
        provider_replay=ProviderReplay(protocol="p", native_blocks=native),
    )
    try:
        reference = canonical_bytes(model)
    except EncodingError as caught:
        assert caught.field == "$"
        assert data is None
    else:
        assert data is None or data == reference


@settings(max_examples=800, deadline=None)
@given(VALUES, st.integers(1, 6))
def test_plain_with_a_depth_limit_is_plain_and_no_deeper_in_one_walk(value: Any, limit: int) -> None:
    """``_plain(v, n)`` answers ``_plain(v) and not depth_exceeds(v, n)`` (what ``llm_completed_bytes``
    asked in two walks): both count ``v`` itself as level 1."""
    assert _plain(value, limit) == (_plain(value) and not enc.depth_exceeds(value, limit))


def test_native_blocks_are_written_up_to_exactly_the_native_depth_limit() -> None:
    """Unvouched blocks nesting ``NATIVE_DEPTH_LIMIT`` levels (the blocks list itself is level 1) are
    written; one level more gives None (then the model path decides)."""

    def blocks(levels: int) -> list[Any]:
        value: list[Any] = ["x"]
        for _ in range(levels - 1):
            value = [value]
        return value

    def written(native: list[Any]) -> bytes | None:
        return enc.llm_completed_bytes(
            1, [], [], protocol="p", provider=None, model=None, native_blocks=native
        )

    at_limit = blocks(enc.NATIVE_DEPTH_LIMIT)
    assert not enc.depth_exceeds(at_limit, enc.NATIVE_DEPTH_LIMIT)
    reference = canonical_bytes(
        LlmCompleted(
            turn=1,
            message=Message(role="assistant"),
            provider_replay=ProviderReplay(protocol="p", native_blocks=at_limit),
        )
    )
    assert written(at_limit) == reference
    assert written(blocks(enc.NATIVE_DEPTH_LIMIT + 1)) is None


def test_a_value_that_holds_itself_raises_instead_of_walking_forever() -> None:
    """A cyclic payload (a list or dict holding itself) is refused with EncodingError at ``$``: the plain
    check walks one level at a time up to ``_PLAIN_DEPTH`` and rfc8785's recursive encoder then meets
    Python's recursion limit. Before, the plain check's stack never emptied."""
    cyclic_list: list[Any] = []
    cyclic_list.append(cyclic_list)
    cyclic_dict: dict[str, Any] = {}
    cyclic_dict["x"] = {"y": cyclic_dict, "z": cyclic_dict}  # two references: the levels double
    for value in (cyclic_list, cyclic_dict):
        with pytest.raises(EncodingError) as caught:
            canonical_json(value)
        assert caught.value.field == "$"
        assert "nested too deeply" in caught.value.reason
        with pytest.raises(EncodingError):
            canonical_bytes(Custom(custom_kind="x", payload={"v": value}))


def test_plain_values_nested_past_the_plain_walk_still_encode_exactly() -> None:
    """Past ``_PLAIN_DEPTH`` levels the value goes to rfc8785, which gives the same bytes."""
    deep: Any = 1
    for _ in range(enc._PLAIN_DEPTH + 20):
        deep = [deep]
    n = enc._PLAIN_DEPTH + 20
    try:
        data = canonical_json(deep)
    except EncodingError as caught:  # rfc8785 recursing past this interpreter's limit
        assert "nested too deeply" in caught.reason
    else:
        assert data == b"[" * n + b"1" + b"]" * n


def test_recordable_text_escapes_lone_surrogates_only() -> None:
    assert recordable_text("plain ascii") == "plain ascii"
    assert recordable_text("é \U0001f600") == "é \U0001f600"  # a valid pair is one character: kept
    assert recordable_text("a\ud800b\udfff") == "a\\ud800b\\udfff"
    canonical_json({"x": recordable_text("\ud83d")})  # encodes
