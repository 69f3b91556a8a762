"""Shared helpers of the whole-document importers (OpenHands ``*.json``, SWE-agent ``*.traj``).

Those formats are ONE JSON document per file, not JSONL: a bad byte cannot be skipped line by line, so
:func:`read_json_document` either returns the whole decoded document (made safe for RFC 8785) or raises
:class:`~flightlog.errors.ImportFormatError` naming the file; nothing is recorded from a broken file.

:class:`CallBook` pairs tool calls with their results by the source's native call ids, exactly once each,
giving every call a session-unique id (some sources reuse a native id for a later, different call).
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ImportFormatError
from ..events import Custom, SessionEvent
from .base import (
    ImportWarning,
    clean_surrogates,
    compact_json,
    depth_exceeds,
    make_json_safe,
    may_hold_surrogates,
    short_error,
)

__all__ = [
    "MAX_DEPTH",
    "CallBook",
    "DocumentBuilder",
    "OpenCall",
    "compact_json",
    "looks_like_json_array_of_events",
    "read_json_document",
]

MAX_DEPTH = 256
"""Deepest nesting accepted (arrays and objects); real trajectories stay far below it."""

_PROBE_BYTES = 64 * 1024
_NO_ID = "no-id"
"""Recorded id of a call whose native id is empty (``#2``... when several are)."""
_EVENT_ARRAY = re.compile(rb'^\s*\[\s*\{.*?"source"\s*:\s*"(?:user|agent|environment)"', re.DOTALL)


def read_json_document(path: Path, warnings: list[ImportWarning]) -> Any:
    """Decode a whole JSON document file, made safe to record.

    A leading UTF-8 BOM is stripped. Invalid UTF-8 bytes and lone surrogates are kept as ``\\uXXXX``
    escape text (warned). Integers beyond ±(2**53-1) and NaN/±Infinity are replaced by their JSON text
    (warned) so every value encodes under RFC 8785.

    Args:
        path: The file.
        warnings: Appended to (file-level warnings, ``line=None``).

    Returns:
        The decoded document (any JSON value).

    Whitespace and NUL bytes around the document are accepted (trailing NULs warned with their line and
    column); any other byte after it refuses the file.

    Raises:
        ImportFormatError: the file is not one valid JSON document (``line`` set; the reason gives the
            decoder's message, line and column), or it nests deeper than :data:`MAX_DEPTH`.
        OSError: the file cannot be read.
    """
    raw = path.read_bytes().removeprefix(b"\xef\xbb\xbf")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        text = raw.decode("utf-8", "surrogateescape")
        warnings.append(
            ImportWarning(path.name, None, f"invalid UTF-8 at byte {exc.start} kept as \\udcXX escape text")
        )
    del raw
    try:
        value, end = _DECODER.raw_decode(text, _skip_blank(text, 0))
        _check_trailing(path, text, end, warnings)
    except json.JSONDecodeError as exc:
        raise ImportFormatError(
            path=str(path),
            line=exc.lineno,
            reason=f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}",
        ) from None
    except ValueError as exc:  # e.g. an integer literal beyond Python's digit limit
        raise ImportFormatError(path=str(path), reason=f"not valid JSON: {short_error(exc)}") from None
    except RecursionError:
        raise ImportFormatError(path=str(path), reason="JSON nested too deeply") from None
    if depth_exceeds(value, MAX_DEPTH):
        raise ImportFormatError(path=str(path), reason=f"JSON nested deeper than {MAX_DEPTH} levels")
    value, replaced = clean_surrogates(value) if may_hold_surrogates(text) else (value, 0)
    if replaced:
        warnings.append(
            ImportWarning(path.name, None, f"{replaced} lone surrogate(s) kept as \\uXXXX escape text")
        )
    unsafe = make_json_safe(value)
    if unsafe:
        warnings.append(
            ImportWarning(path.name, None, f"{unsafe} number(s) outside RFC 8785's range kept as JSON text")
        )
    return value


_DECODER = json.JSONDecoder()
_BLANK = " \t\n\r\x00"
"""What may surround the document: JSON whitespace and NUL bytes (a crashed writer's zero-filled tail)."""


def _skip_blank(text: str, start: int) -> int:
    """Index of the first character at or after ``start`` that is not whitespace or NUL."""
    end = len(text)
    while start < end and text[start] in _BLANK:
        start += 1
    return start


def _line_col(text: str, pos: int) -> tuple[int, int]:
    """1-based line and column of ``text[pos]``."""
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


def _check_trailing(path: Path, text: str, end: int, warnings: list[ImportWarning]) -> None:
    """NUL bytes (and whitespace) after the document are warned (line and column); anything else is refused.

    Raises:
        json.JSONDecodeError: other bytes follow the document (the caller names line and column).
    """
    if end == len(text):
        return
    rest = _skip_blank(text, end)
    if rest < len(text):
        raise json.JSONDecodeError("extra data after the JSON document", text, rest)
    nuls = text.count("\x00", end)
    if nuls:  # trailing whitespace alone is valid JSON
        line, col = _line_col(text, text.index("\x00", end))
        where = f"after the document (from line {line}, column {col})"
        warnings.append(ImportWarning(path.name, line, f"{nuls} trailing NUL byte(s) {where} ignored"))


def looks_like_json_array_of_events(path: Path) -> bool:
    """Cheap probe for folder imports: does the file start like an OpenHands event array?

    True when its first 64 KiB (after a BOM) open a JSON array whose first object has a ``"source"`` of
    ``user``, ``agent`` or ``environment``. Reads no more than that; unreadable files give False.
    """
    try:
        with path.open("rb") as fh:
            head = fh.read(_PROBE_BYTES).removeprefix(b"\xef\xbb\xbf")
    except OSError:
        return False
    return _EVENT_ARRAY.match(head) is not None


@dataclass(frozen=True)
class OpenCall:
    """A tool call waiting for its result."""

    call_id: str
    """Session-unique id (the native id, or ``<native>#2``... when the source reused it)."""
    native_id: str
    """The id the source file gave the call."""
    name: str
    """The tool's name."""
    turn: int
    """The turn that requested it."""
    where: str
    """Where in the file it was requested (for warnings and orphan records)."""


class CallBook:
    """Pairs tool calls with their results by native id, exactly once each (see the module docstring).

    Used by every importer (the JSONL ones too): a native id reused by a later call is recorded as
    ``<id>#2``, ``#3``... and a result pairs with the earliest unanswered call of its native id. An empty
    native id ``""`` is an id like any other (the calls are recorded as ``no-id``, ``no-id#2``...), so a
    result with ``""`` answers the earliest unanswered call that had ``""``.

    Args:
        warn: Receives the text of a warning (a native id reused for a new call, or an empty one) and the
            1-based source line given to :meth:`request` (None for whole-document formats).
    """

    def __init__(self, warn: Callable[[str, int | None], None]) -> None:
        self._warn = warn
        self._used: set[str] = set()
        self._open: dict[str, OpenCall] = {}  # unique id → call, in request order
        # Per native id, its calls' unique ids in request order; ids answered by ``answer_id`` are dropped
        # lazily. ``answer`` then costs O(1) amortised, not a scan of every open call (interrupted calls
        # stay open for good, so a scan made a long transcript's import quadratic).
        self._by_native: dict[str, deque[str]] = {}
        self._suffix: dict[str, int] = {}  # base → last n tried for ``<base>#<n>`` (all below it are used)

    def _unique(self, native_id: str) -> str:
        base = native_id or _NO_ID
        n = self._suffix.get(base, 1)
        candidate = base if n == 1 else f"{base}#{n}"
        while candidate in self._used:
            n += 1
            candidate = f"{base}#{n}"
        self._suffix[base] = n
        self._used.add(candidate)
        return candidate

    def request(self, native_id: str, name: str, turn: int, where: str, line: int | None = None) -> str:
        """Register a call; returns its session-unique id (warns when the native id was used before or is
        empty)."""
        call_id = self._unique(native_id)
        if not native_id:
            self._warn(f"{where}: tool call without an id recorded as {call_id!r}", line)
        elif call_id != native_id:
            self._warn(
                f"{where}: tool call id {native_id!r} reused for a new call; recorded as {call_id!r}", line
            )
        self._open[call_id] = OpenCall(call_id, native_id, name, turn, where)
        self._by_native.setdefault(native_id, deque()).append(call_id)
        return call_id

    def answer(self, native_id: str) -> OpenCall | None:
        """The earliest unanswered call with this native id, now answered (None when there is none)."""
        queue = self._by_native.get(native_id)
        while queue:
            call = self._open.pop(queue.popleft(), None)
            if call is not None:
                return call
        return None

    def answer_id(self, call_id: str) -> OpenCall | None:
        """The unanswered call with this session-unique id, now answered (None when answered or unknown)."""
        return self._open.pop(call_id, None)

    def orphan_id(self, native_id: str) -> str:
        """A session-unique id for a result that answers no call (the native id when still free)."""
        return self._unique(native_id)

    def pending(self) -> list[OpenCall]:
        """Calls still unanswered, in request order."""
        return list(self._open.values())


class DocumentBuilder:
    """What the whole-document importers' builders share: the events of the one session being built, in
    order, file-level warnings, the :class:`CallBook`, and the ``Custom`` records of what is not mapped.

    Args:
        path: The source file (named in warnings).
        warnings: Where warnings go.
    """

    def __init__(self, path: Path, warnings: list[ImportWarning]) -> None:
        self.path = path
        self.warnings = warnings
        self.events: list[SessionEvent] = []
        self.calls = CallBook(lambda reason, _line: self.warn(reason))

    def warn(self, reason: str) -> None:
        """Append a file-level ImportWarning."""
        self.warnings.append(ImportWarning(self.path.name, None, reason))

    def emit(self, event: SessionEvent) -> None:
        """Append one event to the session, in order."""
        self.events.append(event)

    def keep(self, custom_kind: str, payload: Any) -> None:
        """Record something the importer does not map, as a ``Custom`` event (nothing is dropped)."""
        self.emit(Custom(custom_kind=custom_kind, payload=payload))

    def keep_pending(self, custom_kind: str, where_key: str) -> None:
        """Record each call still unanswered at the end of the file (``where_key`` names its
        :attr:`OpenCall.where` in the payload)."""
        for call in self.calls.pending():
            payload = {
                "call_id": call.call_id,
                "native_call_id": call.native_id,
                "name": call.name,
                "turn": call.turn,
                where_key: call.where,
            }
            self.keep(custom_kind, payload)
