"""The one canonical byte form of an event, and upcasters for old event shapes.

Events are stored as RFC 8785 (JSON Canonicalization Scheme) bytes, via the ``rfc8785`` package: sorted
keys, no insignificant white space, ECMAScript number formatting, UTF-8. Those stored bytes are what every
hash covers (ARCHITECTURE.md invariant 3); verification never re-serializes.

Values JCS cannot represent are refused with an :class:`~flightlog.errors.EncodingError` naming the
offending field as a JSON path (``$.message.content[0].text``): NaN and ±Infinity, integers beyond
±(2**53 - 1) (RFC 8785 §3.2.2.3, I-JSON RFC 7493 §2.2), and strings with lone surrogates (RFC 8785 §3.2.2.2).

Upcasters (``register_upcaster``) rewrite a decoded stored dict of an old shape into the current one on
read, after the hash check, never touching stored bytes (as eventsourcing's ``Mapper`` does). Registered
here: ``memory_retrieval_result`` hits of flightlog's first, invented memory shape (see
:func:`upcast_invented_memory_hits`).
"""

from __future__ import annotations

import json
import math
import re
import typing
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import pydantic_core
import rfc8785
from pydantic_core import PydanticSerializationError

from .errors import EncodingError, EventDecodeError
from .events import (
    CancellationReason,
    Custom,
    Event,
    SessionEvent,
    event_from_json_or_none,
    event_from_wire,
    kind_schemas,
)
from .messages import WireModel

__all__ = [
    "MAX_SAFE_INTEGER",
    "NATIVE_DEPTH_LIMIT",
    "SUSPENDED_MARK",
    "canonical_bytes",
    "canonical_json",
    "custom_bytes",
    "decode_rows",
    "decode_stored",
    "decodes_without",
    "depth_exceeds",
    "llm_completed_bytes",
    "model_bytes",
    "operation_cancelled_bytes",
    "parse_json",
    "recordable_text",
    "register_upcaster",
    "run_started_bytes",
    "run_terminal_bytes",
    "tool_completed_bytes",
    "tool_requested_bytes",
    "upcast_invented_memory_hits",
]

MAX_SAFE_INTEGER = 2**53 - 1
"""Largest integer magnitude JCS/I-JSON represents exactly."""

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]
_UPCASTERS: dict[str, list[Upcaster]] = {}
SUSPENDED_MARK = b'"kind":"suspended"'
"""What the canonical bytes of every ``suspended`` event hold (RFC 8785: sorted keys, no spaces; no
upcaster produces that kind): what ``kernel.rowcheck`` searches the stored bytes for."""
_UPCAST_KINDS: list[bytes] = []
"""The kinds in :data:`_UPCASTERS`, UTF-8 (:func:`decodes_without` searches for them)."""


def canonical_json(value: Any) -> bytes:
    """RFC 8785 bytes of a JSON-ready value (dicts, lists, str, int, float, bool, None).

    Raises:
        EncodingError: a value JCS cannot represent; ``field`` is its JSON path.
    """
    try:
        if _plain(value):
            return _fast_json(value).encode("utf-8")
        return rfc8785.dumps(value)
    except RecursionError as exc:
        raise EncodingError(field="$", reason=_TOO_DEEP) from exc
    except (rfc8785.CanonicalizationError, TypeError, UnicodeError) as exc:
        path, reason = _find_unencodable(value, "$") or ("$", str(exc))
        raise EncodingError(field=path, reason=reason) from exc


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def recordable_text(text: str) -> str:
    """``text`` with each lone surrogate written as its ``\\udXXX`` escape text (the six characters), so it
    can be recorded: UTF-8, and so RFC 8785, cannot carry one. Text without one comes back as it is (an
    ASCII check, a regex scan of other text). The importers keep a transcript's lone surrogates the same way.

    Used for what the kernel writes from text it did not make: a tool's output, an exception's message, a
    JSON path naming a key the model wrote.
    """
    if text.isascii() or _LONE_SURROGATE.search(text) is None:
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


_FAST = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
"""Stdlib encoder that writes exactly RFC 8785 bytes for *plain* values (see :func:`_plain`)."""


def _c_encoder() -> Callable[[Any], str]:
    """``_FAST.encode`` as one call of the stdlib's C encoder, built once (``JSONEncoder.encode`` builds it,
    a closure and a circular-reference dict on every call: ~10,000 instructions a 1 KB event, ~12% of its
    encoding). Without the circular-reference check: every value that reaches it has passed :func:`_plain`
    or a walk with a depth limit, or is the output of ``json.loads`` (none holds a cycle), and a cycle would
    raise ``RecursionError``, which each caller handles as a value nested too deeply. The same output as
    ``_FAST.encode`` (``tests/test_encoding.py``); ``_FAST.encode`` itself where the C module is missing."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return _FAST.encode
    encode = make(None, _FAST.default, json.encoder.encode_basestring, None, ":", ",", True, False, False)

    def fast_json(value: Any) -> str:
        return "".join(encode(value, 0))

    return fast_json


_fast_json = _c_encoder()


_PLAIN_DEPTH = 1024
"""Levels of nesting :func:`_plain` walks before it leaves a value to rfc8785 (which recurses, and raises
RecursionError on a cycle or a value nested past the interpreter's limit): the stdlib's C encoder itself
stops at about 1,000 levels, so no value it could write is turned away."""
_PLAIN_CONTAINERS = 1 << 20
"""Containers :func:`_plain` walks before it leaves a value to rfc8785 (same bytes, slower): bounds the walk
of a value that holds itself through several references, whose levels double."""


def _plain(value: Any, max_depth: int = _PLAIN_DEPTH) -> bool:
    """True when the stdlib encoder's output equals RFC 8785's for ``value`` and it nests at most
    ``max_depth`` levels of arrays/objects.

    That holds when the value has no floats (JCS formats numbers per ECMAScript), no integers beyond
    ±(2**53-1), and no object key with a character at or above U+D800 (JCS sorts keys by UTF-16 code
    units, Python by code points; the two orders agree below the surrogate range). Strings are escaped
    identically by both (RFC 8785 §3.2.2.2: only ``"``, ``\\`` and U+0000..U+001F, with the short forms
    and lowercase ``\\u00xx``). Lone surrogates make the UTF-8 step fail, falling back to rfc8785's error.

    Levels are counted as :func:`depth_exceeds` counts them (``value`` itself is level 1), so
    ``_plain(v, n)`` is ``_plain(v) and not depth_exceeds(v, n)`` for ``n <= _PLAIN_DEPTH`` in one walk
    (``tests/test_encoding.py``); the default, :data:`_PLAIN_DEPTH`, is where the walk hands a value to
    rfc8785, a caller with a tighter limit (:func:`llm_completed_bytes`) passes it.
    """
    # One pass over a container's children (ASCII keys need no character scan: ``isascii`` is O(1)), one
    # level of nesting at a time, so depth never hits the recursion limit and a value that holds itself
    # (a cycle) stops at max_depth levels or _PLAIN_CONTAINERS containers instead of walking forever:
    # past either rfc8785's recursive encoder decides (a cycle raises RecursionError there, reported as
    # too deep). Two cycle guards, on purpose: this hot walk (every event encoded) bounds levels and
    # containers, which costs two integer compares a level; _walk, run only to name the field of a value
    # already refused, keeps a set of entered ids instead, since it must visit every container once to
    # find the first bad one and say where. An id set here would cost a hash insert per container on
    # every encoding; bounds there would stop the search short of the field it is looking for.
    level = [value]
    depth = walked = 0
    while level:
        depth += 1
        if depth > max_depth:
            return False
        deeper: list[Any] = []
        push = deeper.append
        for item in level:
            kind = type(item)
            if kind is dict:
                for key in item:
                    if type(key) is not str or (not key.isascii() and max(key) >= "\ud800"):
                        return False
                children: Any = item.values()
            elif kind is list:
                children = item
            else:
                children = (item,)
            for child in children:
                kind = type(child)
                if kind is str or kind is bool or child is None:
                    continue
                if kind is int:
                    if not -MAX_SAFE_INTEGER <= child <= MAX_SAFE_INTEGER:
                        return False
                elif kind is dict or kind is list:
                    push(child)
                else:
                    return False
        walked += len(deeper)
        if walked > _PLAIN_CONTAINERS:  # a cycle through two or more references doubles every level
            return False
        level = deeper
    return True


def canonical_bytes(event: Event) -> bytes:
    """RFC 8785 bytes of an event's wire form: the bytes stored and hashed.

    A ``Custom`` event whose payload is plain JSON (see :func:`_plain`) skips pydantic's dump: its wire
    form is then ``{"kind", "custom_kind", "payload"}`` (``payload`` left out when None) with the payload as
    it is, which is what ``to_wire`` gives for such a payload (``tests/test_encoding.py`` compares both on
    generated payloads). Any other event whose values are all plain skips it too (:func:`model_bytes`).
    Anything else, and every error, takes the general path (``to_wire``, then :func:`canonical_json`).

    Raises:
        EncodingError: the event holds NaN/Infinity, an integer beyond ±(2**53-1) or a lone surrogate
            (``field`` names it), or nests deeper than the encoders go (``field`` ``$``; pydantic's
            serializer refuses ~254 levels, the stdlib's ~1,000).
    """
    data = custom_bytes(event.custom_kind, event.payload) if type(event) is Custom else model_bytes(event)
    if data is not None:
        return data
    try:
        wire = event.to_wire()
    except (ValueError, RecursionError) as exc:  # PydanticSerializationError is a ValueError
        found = _find_unencodable(event.model_dump(mode="python"), "$")
        # pydantic-core refuses ~254 levels of nesting ("Maximum serialization depth exceeded"), bare or
        # wrapped in a PydanticSerializationError by a model's serializer function
        deep = isinstance(exc, RecursionError) or "serialization depth" in str(exc)
        path, reason = found or ("$", _TOO_DEEP if deep else str(exc))
        raise EncodingError(field=path, reason=reason) from exc
    return canonical_json(wire)


_TOO_DEEP = "value is nested too deeply to encode"


def custom_bytes(custom_kind: str, payload: Any, *, plain: bool = False) -> bytes | None:
    """RFC 8785 bytes of ``Custom(custom_kind=custom_kind, payload=payload)`` without building the event,
    when the payload is plain JSON (:func:`_plain`); None otherwise (then :func:`canonical_bytes` of the
    event gives its bytes, or names what RFC 8785 refuses).

    The bytes are those of the wire form ``{"kind", "custom_kind", "payload"}`` (``payload`` left out when
    None), which is what ``to_wire`` gives for such a payload (``tests/test_encoding.py``).

    Args:
        custom_kind: The event's ``custom_kind``.
        payload: Its payload (any JSON value).
        plain: The caller has checked that ``payload`` is plain (e.g. while walking it for another reason):
            the check is skipped. A payload that is not plain then gives wrong bytes: say True only when
            :func:`_plain` would.

    Returns:
        The bytes, or None (a payload that is not plain, a string with a lone surrogate, or one nested
        deeper than the stdlib's encoder goes).
    """
    wire: dict[str, Any] = {"custom_kind": custom_kind, "kind": "custom"}
    if payload is not None:
        wire["payload"] = payload
    if not ((plain and type(custom_kind) is str) or _plain(wire)):
        return None
    return _encode_vouched(wire)


def model_bytes(model: WireModel) -> bytes | None:
    """RFC 8785 bytes of ``model.to_wire()`` read from the model's fields without pydantic's dump, or None
    where that is not done (then ``canonical_json(model.to_wire())`` gives the bytes, or the error).

    The wire form is built as ``WireModel`` dumps it: every field in turn, ``None`` left out (written for
    the class's ``_write_null`` fields), an empty list left out for its ``_skip_empty`` fields, a nested
    model by the same rules. Only values whose dump is themselves are taken: ``str``, ``bool``, ``None``,
    ``int`` within ±(2**53-1), lists and ``str``-keyed dicts of those (keys below U+D800, :func:`_plain`), and
    models of exactly a type the field declares, whose class dumps through ``WireModel``'s serializer alone
    (no alias, excluded field, field or model serializer of its own, computed field or extra). Anything
    else (a float, an enum, a tuple, a subclass instance, a lone surrogate, nesting deeper than
    :data:`_WALK_DEPTH` levels, well within pydantic's ~254, so the general path refuses what it refused)
    gives None. ``tests/test_encoding.py`` compares both paths on generated events of every kind.

    The wire dict is built with every object's keys already in RFC 8785 order (a model's fields sorted once
    per class, a dict's keys sorted as it is copied; keys below U+D800 sort the same by code point and by
    UTF-16 unit), so ``pydantic_core.to_json`` writes the canonical bytes in one call, without the stdlib
    encoder's sort and the UTF-8 step (about 3x faster on 1-2 KB events). For these values its output is
    RFC 8785's: no white space, the same string escapes (``"``, ``\\``, ``\\b \\t \\n \\f \\r``,
    other controls as lowercase ``\\u00xx``, everything else raw UTF-8; ``tests/test_encoding.py`` checks
    every code point), integers as digits; a lone surrogate makes it raise, and the general path names it.

    Returns:
        The bytes (as :func:`canonical_bytes`), or None.
    """
    try:
        return _to_json(_wire_of(model))
    except (_NotPlain, RecursionError, PydanticSerializationError):
        return None


_to_json = pydantic_core.to_json


class _NotPlain(Exception):
    """A value :func:`model_bytes` leaves to pydantic's dump."""


_WALK_DEPTH = 100
"""Models and containers :func:`model_bytes` walks into, at most; deeper values go to pydantic's dump."""


_Writer = Callable[[WireModel, int], dict[str, Any]]
_WRITERS: dict[type, _Writer | None] = {}
"""Per model class: the function writing a model's wire dict (:func:`_make_writer`); None for a class
:func:`model_bytes` does not dump."""


def _wire_of(model: WireModel, depth: int = 0) -> dict[str, Any]:
    """The wire dict of ``model`` with its keys in RFC 8785 order (``model_bytes``' walk).

    Raises:
        _NotPlain: a value pydantic's dump must write (see :func:`model_bytes`).
    """
    cls = type(model)
    try:
        writer = _WRITERS[cls]
    except KeyError:
        writer = _WRITERS[cls] = _make_writer(cls)
    if writer is None:
        raise _NotPlain
    return writer(model, depth)


def _make_writer(cls: type[WireModel]) -> _Writer | None:
    """A function ``(model, depth) -> wire dict`` for models of exactly ``cls``, generated once per class:
    one branch per field, in sorted field-name order, so that the common values (a ``str``, an ``int``
    within ±(2**53-1), an absent ``None``) take no call and no loop over a field table, and a model of a type
    the field declares, or a list of them, goes to :func:`_wire_of` directly. Any other value goes to
    :func:`_wire_value` with the model types the field declares (the same result, with the same depth
    counts). ``_skip_empty`` and ``_write_null`` are
    read from the class at each dump, as ``WireModel``'s serializer reads them. None for a class whose dump
    is not its fields' values (see :func:`model_bytes`)."""
    decorators = cls.__pydantic_decorators__
    own = next(c for c in cls.__mro__ if "_omit_absent" in vars(c))
    if (
        own is not WireModel
        or list(decorators.model_serializers) != ["_omit_absent"]
        or decorators.field_serializers
        or decorators.computed_fields
        or cls.model_config.get("extra") == "allow"
        or cls.model_config.get("serialize_by_alias")
    ):
        return None
    for info in cls.model_fields.values():
        if info.exclude or info.alias or info.serialization_alias:
            return None
    scope: dict[str, Any] = {
        "cls": cls,
        "NotPlain": _NotPlain,
        "wire_value": _wire_value,
        "wire_of": _wire_of,
        "WALK": _WALK_DEPTH,
        "MAX": MAX_SAFE_INTEGER,
    }
    lines = [
        "def write(model, depth):",
        "    if depth > WALK:",
        "        raise NotPlain",
        "    values, nulls, skip = model.__dict__, cls._write_null, cls._skip_empty",
        "    wire = {}",
        "    deeper = depth + 1",
    ]
    for index, name in enumerate(sorted(cls.model_fields)):
        key, models = repr(name), f"models{index}"
        scope[models] = frozenset(_models_in(cls.model_fields[name].annotation))
        lines += [
            f"    value = values[{key}]",
            "    kind = type(value)",
            "    if kind is str or (kind is int and -MAX <= value <= MAX):",
            f"        wire[{key}] = value",
            "    elif value is None:",
            f"        if {key} in nulls:",
            f"            wire[{key}] = None",
            f"    elif {key} in skip and value == []:",
            "        pass",
        ]
        if scope[models]:  # a field declaring models: a model, or a list of them, without _wire_value's hop
            lines += [
                f"    elif kind in {models}:",
                f"        wire[{key}] = wire_of(value, deeper)",
                "    elif kind is list and deeper <= WALK:",
                f"        wire[{key}] = [wire_of(item, deeper + 1) if type(item) in {models}"
                f" else wire_value(item, {models}, deeper + 1) for item in value]",
            ]
        lines += ["    else:", f"        wire[{key}] = wire_value(value, {models}, deeper)"]
    lines.append("    return wire")
    exec(compile("\n".join(lines), f"<wire writer of {cls.__qualname__}>", "exec"), scope)
    writer: _Writer = scope["write"]
    return writer


def _models_in(annotation: Any) -> Iterator[type]:
    """The model classes a field's annotation names (through unions, lists, ``Annotated``...)."""
    if isinstance(annotation, type) and issubclass(annotation, WireModel):
        yield annotation
    for arg in typing.get_args(annotation):
        yield from _models_in(arg)


def _wire_value(value: Any, models: frozenset[type], depth: int) -> Any:
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return value
    if kind is int:
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return value
    elif depth > _WALK_DEPTH:
        pass
    elif kind is list:
        return [_wire_value(item, models, depth + 1) for item in value]
    elif kind is dict:
        for key in value:
            if type(key) is not str or (not key.isascii() and max(key) >= "\ud800"):
                raise _NotPlain
        return {key: _wire_value(value[key], models, depth + 1) for key in sorted(value)}
    elif kind in models:
        return _wire_of(value, depth)
    raise _NotPlain


# ─── Event bytes without the event (issue 19: the importers' commonest kinds) ────────────────────────
#
# Each function below writes the RFC 8785 bytes of one event kind straight from its fields, without building
# the pydantic model, dumping it (``to_wire``) and checking the dump (``_plain``): the wire form is written
# here by hand, so each is proven equal to ``canonical_bytes`` of the model by a hypothesis test
# (``tests/test_encoding.py``) over generated fields, edge strings and out-of-range turns included. Each
# returns None, never guessing, whenever its shortcut could differ from the model path (a turn outside
# ``u32``, a value not of the exact type the field holds, a payload that is not plain JSON, a lone
# surrogate): the caller then builds the model, whose validation and encoding raise what they raise.

_U32_MAX = 2**32 - 1

TextPartFields = tuple[str, str, str | None]
"""A content part as ``(type, text, signature)``: ``("text", text, None)``, ``("thinking", thinking,
signature or None)`` or ``("redacted_thinking", data, None)`` (the :mod:`flightlog.messages` parts)."""

_PART_FIELD = {"text": "text", "thinking": "thinking", "redacted_thinking": "data"}
"""The field holding a part's text, by part type (``TextPart.text``, ``ThinkingPart.thinking``,
``RedactedThinkingPart.data``)."""


def _turn_ok(turn: Any) -> bool:
    """Whether ``turn`` is an ``int`` a ``U32`` field holds as it is (bools are refused: pydantic would
    write ``1`` for ``True``, a different value)."""
    return type(turn) is int and 0 <= turn <= _U32_MAX


def _strs(*values: Any) -> bool:
    """Whether every value is an exact ``str``."""
    return all(type(value) is str for value in values)


NATIVE_DEPTH_LIMIT = 200
"""The deepest nesting of native blocks :func:`llm_completed_bytes` writes: the model path (pydantic's
serializer) refuses values nested deeper than about 254 levels, where the stdlib encoder would still write
them, so deeper blocks are left to it (it raises ``EncodingError``)."""


def depth_exceeds(value: Any, limit: int) -> bool:
    """True when arrays/objects nest deeper than ``limit`` (``value`` itself is level 1; iterative: never
    hits the recursion limit). For any value (subclasses of ``dict``/``list`` count), as the importers'
    readers need before they convert a line; levels are counted as :func:`_plain`'s ``max_depth`` counts
    them, which answers this in the same walk for a value it finds plain."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values() if isinstance(child, dict | list))
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item if isinstance(child, dict | list))
    return False


def _encode_vouched(wire: dict[str, Any]) -> bytes | None:
    """The stdlib encoder's bytes of a wire dict the caller knows plain (:func:`_plain`); None on a lone
    surrogate (the UTF-8 step refuses it) or a value nested deeper than the C encoder goes: the model path
    then names the field, or says it is nested too deeply (as :func:`custom_bytes`)."""
    try:
        return _fast_json(wire).encode("utf-8")
    except (UnicodeError, RecursionError):
        return None


def tool_completed_bytes(turn: int, results: Sequence[tuple[str, str, bool]]) -> bytes | None:
    """RFC 8785 bytes of ``ToolCompleted(turn=turn, results=[ToolResult(call_id, output, is_error)...])``
    (no ``token_count``), without building it.

    Args:
        turn: The event's turn (a ``u32``).
        results: ``(call_id, output, is_error)`` per result, in order.

    Returns:
        The bytes ``canonical_bytes`` gives for that event, or None (see the section note above: then
        build the event).
    """
    if not _turn_ok(turn):
        return None
    out = []
    for call_id, output, is_error in results:
        if not (type(call_id) is str and type(output) is str and type(is_error) is bool):
            return None
        out.append({"call_id": call_id, "is_error": is_error, "output": output})
    return _encode_vouched({"kind": "tool_completed", "results": out, "turn": turn})


def _calls_wire(calls: Sequence[tuple[str, str, str]]) -> list[dict[str, Any]] | None:
    """``ToolCall(id, name, arguments)`` wire dicts of ``(id, name, arguments)`` triples (None: not all
    exact strings)."""
    out = []
    for call_id, name, arguments in calls:
        if not (type(call_id) is str and type(name) is str and type(arguments) is str):
            return None
        out.append({"arguments": arguments, "id": call_id, "name": name})
    return out


def tool_requested_bytes(turn: int, calls: Sequence[tuple[str, str, str]]) -> bytes | None:
    """RFC 8785 bytes of ``ToolRequested(turn=turn, calls=[ToolCall(id, name, arguments)...])`` without
    building it.

    Args:
        turn: The event's turn (a ``u32``).
        calls: ``(id, name, arguments)`` per call, in order.

    Returns:
        The bytes ``canonical_bytes`` gives for that event, or None (then build the event).
    """
    wire = _calls_wire(calls)
    if wire is None or not _turn_ok(turn):
        return None
    return _encode_vouched({"calls": wire, "kind": "tool_requested", "turn": turn})


def llm_completed_bytes(
    turn: int,
    parts: Sequence[TextPartFields],
    calls: Sequence[tuple[str, str, str]],
    *,
    protocol: str,
    provider: str | None,
    model: str | None,
    native_blocks: list[Any],
    native_plain: bool = False,
) -> bytes | None:
    """RFC 8785 bytes of ``LlmCompleted(turn, message=Message(role="assistant", content=<parts>,
    tool_calls=<calls>), provider_replay=ProviderReplay(protocol, provider, model, native_blocks))``
    without building it.

    Args:
        turn: The event's turn (a ``u32``).
        parts: The message's content parts as :data:`TextPartFields`, in order.
        calls: The message's ``(id, name, arguments)`` tool calls, in order.
        protocol: ``ProviderReplay.protocol``.
        provider: ``ProviderReplay.provider`` (None: left out, as the model writes it).
        model: ``ProviderReplay.model`` (None: left out).
        native_blocks: ``ProviderReplay.native_blocks`` (a list of JSON values).
        native_plain: The caller has checked that ``native_blocks`` is plain JSON (:func:`_plain`), e.g.
            while walking it for another reason, and nests at most :data:`NATIVE_DEPTH_LIMIT` levels (e.g.
            blocks of a line the importers' reader accepted: at most ``MAX_LINE_DEPTH``, 128); otherwise
            both are checked here. Say True only when both hold.

    Returns:
        The bytes ``canonical_bytes`` gives for that event, or None (then build the event).
    """
    calls_wire = _calls_wire(calls)
    if calls_wire is None or not _turn_ok(turn) or type(native_blocks) is not list:
        return None
    if not (_strs(protocol) and (provider is None or _strs(provider)) and (model is None or _strs(model))):
        return None
    if not (native_plain or _plain(native_blocks, NATIVE_DEPTH_LIMIT)):  # one walk: plain, and how deep
        return None
    content = []
    for part_type, text, signature in parts:
        field = _PART_FIELD.get(part_type)
        if field is None or type(text) is not str:
            return None
        part = {"type": part_type, field: text}
        if signature is not None:
            if part_type != "thinking" or type(signature) is not str:
                return None
            part["signature"] = signature
        content.append(part)
    message: dict[str, Any] = {"content": content, "role": "assistant"}
    if calls_wire:
        message["tool_calls"] = calls_wire
    replay: dict[str, Any] = {"native_blocks": native_blocks, "protocol": protocol}
    if provider is not None:
        replay["provider"] = provider
    if model is not None:
        replay["model"] = model
    return _encode_vouched(
        {"kind": "llm_completed", "message": message, "provider_replay": replay, "turn": turn}
    )


def run_started_bytes(run_id: str, goal: str, agent_id: str | None) -> bytes | None:
    """RFC 8785 bytes of ``RunStarted(run_id=run_id, goal=goal, agent_id=agent_id)`` (no criteria, system
    prompt or attachments) without building it; None when the model path could differ (then build it).

    Args:
        run_id: ``RunStarted.run_id``.
        goal: ``RunStarted.goal``.
        agent_id: ``RunStarted.agent_id`` (None is written as ``null``, as the model writes it).
    """
    if not (_strs(run_id, goal) and (agent_id is None or _strs(agent_id))):
        return None
    wire: dict[str, Any] = {"agent_id": agent_id, "criteria": [], "goal": goal, "kind": "run_started"}
    wire["run_id"] = run_id
    wire["system_prompt"] = None
    return _encode_vouched(wire)


def run_terminal_bytes(reason: str, turns_used: int, total_tokens: int) -> bytes | None:
    """RFC 8785 bytes of ``RunTerminal(reason, turns_used, total_tokens)`` without building it; None when
    the model path could differ (``turns_used`` outside ``u32``, ``total_tokens`` negative or beyond
    2**53-1, which the model refuses or encoding refuses: then build it).
    """
    if not (_strs(reason) and _turn_ok(turns_used)):
        return None
    if not (type(total_tokens) is int and 0 <= total_tokens <= MAX_SAFE_INTEGER):
        return None
    wire = {"kind": "run_terminal", "reason": reason, "total_tokens": total_tokens, "turns_used": turns_used}
    return _encode_vouched(wire)


_CANCELLATION_REASONS = frozenset(reason.value for reason in CancellationReason)


def operation_cancelled_bytes(
    turn: int, operation_id: str, reason: str, pending_call_ids: Sequence[str]
) -> bytes | None:
    """RFC 8785 bytes of ``OperationCancelled(turn, operation_id, reason, pending_call_ids)`` without
    building it; None when the model path could differ (a turn outside ``u32``, a reason that is not a
    :class:`~flightlog.events.CancellationReason` value, a value not an exact ``str``: then build it).

    Args:
        reason: A :class:`~flightlog.events.CancellationReason` (a ``str`` enum) or its value.
    """
    if not (_turn_ok(turn) and _strs(operation_id, *pending_call_ids)):
        return None
    if not isinstance(reason, str) or reason not in _CANCELLATION_REASONS:
        return None
    wire = {
        "kind": "operation_cancelled",
        "operation_id": operation_id,
        "pending_call_ids": list(pending_call_ids),
        "reason": str.__str__(reason),
        "turn": turn,
    }
    return _encode_vouched(wire)


def _find_unencodable(value: Any, path: str) -> tuple[str, str] | None:
    """Depth-first search for the first value JCS refuses; returns (json path, reason)."""
    for sub_path, item in _walk(value, path):
        reason = _scalar_problem(item)
        if reason:
            return sub_path, reason
    return None


def _walk(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    """``(json path, key or leaf)`` of every dict key and leaf under ``value``, depth first; each container is
    entered once (by identity), so a value that holds itself (a cycle) ends the walk instead of looping.
    (Its own cycle guard, not :func:`_plain`'s level/container bounds: this walk runs only on the error
    path, must reach every container to name the first bad field, and is not on the hot path; see the
    note in :func:`_plain`.)"""
    stack: list[tuple[str, Any]] = [(path, value)]
    entered: set[int] = set()
    while stack:
        here, item = stack.pop()
        if isinstance(item, dict | list | tuple):
            if id(item) in entered:
                continue
            entered.add(id(item))
        if isinstance(item, dict):
            for key, child in reversed(list(item.items())):
                yield f"{here}.{key}", key
                stack.append((f"{here}.{key}", child))
        elif isinstance(item, list | tuple):
            stack.extend((f"{here}[{i}]", child) for i, child in reversed(list(enumerate(item))))
        else:
            yield here, item


def _scalar_problem(item: Any) -> str | None:
    if isinstance(item, bool) or item is None:
        return None
    if isinstance(item, float) and not math.isfinite(item):
        return f"{item} is not representable in RFC 8785 JSON"
    if isinstance(item, int) and abs(item) > MAX_SAFE_INTEGER:
        return f"integer {item} is beyond ±(2**53-1)"
    if isinstance(item, str):
        try:
            item.encode("utf-8")
        except UnicodeEncodeError:
            return "string contains a lone surrogate (not valid UTF-8)"
        return None
    if not isinstance(item, int | float):
        return f"{type(item).__name__} is not a JSON value"
    return None


def parse_json(data: bytes | str) -> Any:
    """Parse stored canonical JSON so that re-encoding it gives the same bytes (see ``_parse_int``).

    Canonical JSON has no whitespace to skip, so the text goes straight to the decoder's C scanner
    (``scan_once``, what ``JSONDecoder.decode`` runs after two whitespace matches); text with
    whitespace around it takes ``decode`` itself, with the same values and errors.

    Raises:
        ValueError: not JSON.
    """
    text = data if isinstance(data, str) else data.decode("utf-8")
    try:
        value, end = _SCAN(text, 0)
    except StopIteration:  # leading whitespace, or nothing to scan: decode skips it or says why
        return _DECODER.decode(text)
    return value if end == len(text) else _DECODER.decode(text)


def _parse_int(text: str) -> int | float:
    """JSON integer literal → int, or float beyond ±(2**53-1).

    Only a float can have produced such a literal (RFC 8785 writes 1e16 as ``10000000000000000``; integers
    that large are refused on encode), so reading it back as a float keeps re-encoding byte-identical.
    """
    value = int(text)
    return value if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER else float(text)


_DECODER = json.JSONDecoder(parse_int=_parse_int)
_SCAN: Callable[[str, int], tuple[Any, int]] = _DECODER.scan_once  # type: ignore[attr-defined]  # set by __init__

_DIGITS_TO_ZERO = bytes.maketrans(b"0123456789", b"0000000000")
_SIXTEEN_ZEROS = b"0" * 16
"""After mapping every digit to ``0``: 16 digits in a row, the shortest integer literal that can exceed
±(2**53-1) (see :func:`decode_stored`; a C-speed scan, ~5x faster than a regular expression)."""


_EXACT_LEAVES = frozenset({"str", "bool", "none"})
_INNER_SCHEMA = frozenset({"nullable", "default"})  # one inner validation schema, under "schema"


def _no_long_integers(schema: Any) -> bool:
    """Whether no value a validation core ``schema`` accepts can be an integer beyond ±(2**53-1): only
    strings, booleans, string literals and enums, integers bounded within ±(2**53-1), and models, lists,
    tuples, unions and optionals of those, with no extra values kept. Anything else (``Any``, floats,
    unbounded or ``U64`` integers, dicts, validator functions, an unknown schema type) answers False."""
    kind = schema.get("type")
    if kind in _EXACT_LEAVES:
        return True
    if kind == "literal":
        return all(type(value) is str for value in schema["expected"])
    if kind == "enum":
        return bool(schema.get("sub_type") == "str")
    if kind == "int":
        low, high = schema.get("ge", schema.get("gt")), schema.get("le", schema.get("lt"))
        return low is not None and high is not None and -MAX_SAFE_INTEGER <= low <= high <= MAX_SAFE_INTEGER
    if kind in _INNER_SCHEMA:
        return _no_long_integers(schema["schema"])
    if kind == "model":
        extra = schema.get("config", {}).get("extra_fields_behavior")
        return extra != "allow" and _no_long_integers(schema["schema"])
    if kind == "model-fields":
        return schema.get("extra_behavior") != "allow" and all(
            _no_long_integers(field["schema"]) for field in schema["fields"].values()
        )
    if kind == "list":
        return "items_schema" in schema and _no_long_integers(schema["items_schema"])
    if kind == "tuple":
        return all(_no_long_integers(item) for item in schema["items_schema"])
    if kind == "tagged-union":
        return all(_no_long_integers(choice) for choice in schema["choices"].values())
    return False


_NO_LONG_INTEGERS = frozenset(kind for kind, schema in kind_schemas().items() if _no_long_integers(schema))
"""Kinds whose events hold no value that can be an integer beyond ±(2**53-1): on their bytes, a run of 16
digits is inside a string or refused by validation in both decoders, so :func:`decode_stored` skips its
digit scan for them (the scan is 7-8% of a replay's time on the bench workload)."""


def register_upcaster(kind: str, upcaster: Upcaster) -> None:
    """Register a function that rewrites a stored event dict of ``kind`` into the current shape.

    Upcasters for one kind run in registration order on every read of that kind, after the hash check.
    """
    _UPCASTERS.setdefault(kind, []).append(upcaster)
    if kind.encode() not in _UPCAST_KINDS:
        _UPCAST_KINDS.append(kind.encode())


def decode_stored(data: bytes, *, seq: int | None = None) -> SessionEvent:
    """Decode stored canonical bytes into an event, applying registered upcasters.

    Two paths give the same event. The fast one hands the bytes to pydantic's JSON parser in one call
    (:func:`~flightlog.events.event_from_json_or_none`; ~1.4x faster than ``json`` + validation per 1-2 KB
    event, the scan below included). Its event is kept only when no upcaster is registered for its kind
    (upcasters rewrite the decoded dict), and, for a kind that can hold an integer beyond ±(2**53-1) (not in
    :data:`_NO_LONG_INTEGERS`), only for bytes with no run of 16 or more digits (such an integer literal has
    one; pydantic reads it as an ``int``, :func:`parse_json` as the ``float`` that wrote it). Anything else, refusals included, is decoded on the reference
    path (:func:`parse_json`, upcasters, :func:`~flightlog.events.event_from_wire`), which raises the
    error. ``tests/test_decode_fast.py`` checks by property that both paths give equal events.

    Raises:
        EventDecodeError: the bytes are not JSON, not an object, or not a valid event (names ``seq``).
    """
    if isinstance(data, bytes):
        event = event_from_json_or_none(data)
        if (
            event is not None
            and event.kind not in _UPCASTERS
            and (event.kind in _NO_LONG_INTEGERS or data.translate(_DIGITS_TO_ZERO).find(_SIXTEEN_ZEROS) < 0)
        ):
            return event
    return _decode_reference(data, seq)


def decodes_without(data: bytes, spellings: tuple[bytes, ...]) -> bool:
    """Whether ``data`` provably decodes (:func:`decode_stored`) to no event whose ``kind`` or any other
    string value is one of ``spellings`` (UTF-8), or fails to decode: read without decoding. False says
    nothing (decode it to know).

    True only when ``data`` holds no backslash (then no JSON escape can spell a string: each one decodes
    to the bytes between its quotes, so a decoded string equal to a spelling would hold it), none of
    ``spellings``, and no ``kind`` that has a registered upcaster (only those rewrite a decoded value;
    one runs only when its kind is the event's, a string of ``data``). A C-speed substring search per
    spelling, about a third of a decode's time (a ~100-byte event).
    """
    if b"\\" in data:
        return False
    # loops, neither comprehensions nor all(): no frame made per call (the approvals queue's pass calls this
    # twice per session that may wait)
    for spelling in spellings:
        if spelling in data:
            return False
    for kind in _UPCAST_KINDS:  # noqa: SIM110
        if kind in data:
            return False
    return True


def decode_rows(rows: Iterable[Sequence[Any]]) -> Iterator[tuple[int, SessionEvent]]:
    """``(seq, event)`` of each stored row ``(seq, event_bytes, ...)``, in the rows' order.

    Each row is decoded by ``decode_stored(event_bytes, seq=seq)`` (the same fast path, reference path and
    errors), in one generator instead of a loop in each caller: the replay read path
    (:func:`flightlog.sessions.replay_session` feeds it :meth:`~flightlog.store.base.Store.read_chain`
    pages). Lazy: a row is read when its event is pulled.

    Raises:
        EventDecodeError: a row's bytes do not decode (names its seq); the events before it were yielded.
    """
    for row in rows:
        yield row[0], decode_stored(row[1], seq=row[0])


def _decode_reference(data: bytes, seq: int | None) -> SessionEvent:
    """:func:`decode_stored`'s reference path: :func:`parse_json`, the kind's upcasters, validation."""
    try:
        raw = parse_json(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise EventDecodeError(reason=f"not JSON: {exc}", seq=seq) from exc
    if not isinstance(raw, dict):
        raise EventDecodeError(reason="not a JSON object", seq=seq)
    kind = raw.get("kind")
    for upcaster in _UPCASTERS.get(kind, ()) if isinstance(kind, str) else ():
        raw = upcaster(raw)
    return event_from_wire(raw, seq=seq)


def upcast_invented_memory_hits(raw: dict[str, Any]) -> dict[str, Any]:
    """Rewrite ``memory_retrieval_result`` hits stored in flightlog's first, invented memory shape.

    Before issue 14 a hit's record was ``{record_id, scope, memory_kind, name, content?}`` and ``why`` was
    optional; upstream's ``MemoryRecord`` (``mm/memory.rs:94-118``, UPSTREAM.md §8) names the kind ``kind``
    and requires ``content``, ``description``, ``provenance``, ``created_at``, ``updated_at``,
    ``confidence``, and ``MemoryRecall.why``. An old record (recognised by its ``memory_kind`` key and no
    ``kind``) becomes: ``kind`` = ``memory_kind``; ``content`` and ``description`` ``""`` when absent;
    ``provenance`` ``{author: "host", trust: "untrusted"}`` (the least trust: the old shape recorded
    neither); ``created_at``/``updated_at`` ``0`` and ``confidence`` ``0.0`` (serde's zero values: the old
    shape had no times or confidence, and nothing is invented for them); a missing or ``null`` ``why``
    becomes ``""``. Hits already in the upstream shape pass unchanged. The stored bytes are never touched:
    they still verify; only the decoded value is upcast.
    """
    hits = raw.get("hits")
    if not isinstance(hits, list):
        return raw
    out: list[Any] = []
    for hit in hits:
        record = hit.get("record") if isinstance(hit, dict) else None
        if not isinstance(record, dict) or "memory_kind" not in record or "kind" in record:
            out.append(hit)
            continue
        new = {k: v for k, v in record.items() if k != "memory_kind"}
        new["kind"] = record["memory_kind"]
        new.setdefault("content", "")
        new.setdefault("description", "")
        new.setdefault("provenance", {"author": "host", "trust": "untrusted"})
        new.setdefault("created_at", 0)
        new.setdefault("updated_at", 0)
        new.setdefault("confidence", 0.0)
        why = hit.get("why")
        out.append({**hit, "record": new, "why": why if isinstance(why, str) else ""})
    return {**raw, "hits": out}


register_upcaster("memory_retrieval_result", upcast_invented_memory_hits)
