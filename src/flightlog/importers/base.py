"""The importers' header: what every importer produces, the hostile-file-safe JSONL reader, and the small
readers of JSON values (strings, objects, integers, timestamps, chat thinking blocks) they all use.

An importer turns one transcript file into one or more :class:`ImportedSession` (a main session and, for
Claude Code, a child session per sub-agent file). It never writes; :func:`flightlog.importers.import_path`
records the sessions through the recorder.

Hostile input is expected (shared/samples/PROVENANCE.md): a UTF-8 BOM, torn or malformed lines anywhere,
U+2028 inside strings, lone surrogates, invalid UTF-8, runs of NUL bytes, single lines of tens of megabytes,
duplicated records. The reader reports each with its 1-based line number and keeps what it can (the rest of
a record around invalid bytes; the bytes of a line that is no JSON object, for the importer to keep as a
``Custom`` event); the import continues.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
import tempfile
import threading
import weakref
from array import array
from collections.abc import Callable, Collection, Iterator, Mapping, MutableSequence, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

from ..encoding import canonical_bytes, custom_bytes, decode_stored, depth_exceeds
from ..events import Custom, SessionEvent
from ..messages import ContentPart, RedactedThinkingPart, ThinkingPart

__all__ = [
    "IMAGE_PREFIXES",
    "MAX_LINE_DEPTH",
    "MAX_SAFE_INT",
    "TASK_CHARS",
    "EventSpool",
    "ImportWarning",
    "ImportedSession",
    "JsonLine",
    "JsonObj",
    "append_custom",
    "as_list",
    "as_obj",
    "as_str",
    "chat_thinking_parts",
    "clean_surrogates",
    "compact_json",
    "depth_exceeds",
    "epoch_ms",
    "events_of",
    "json_int",
    "make_json_safe",
    "may_hold_surrogates",
    "new_event_list",
    "output_digest",
    "read_jsonl",
    "short_error",
    "spooled_events",
    "tail_waits",
    "torn_tail_waits",
    "unparsed_payload",
]

JsonObj = dict[str, Any]
"""A decoded JSON object."""

TASK_CHARS = 200
"""``ImportedSession.task`` is the first prompt cut to this many characters."""

MAX_SAFE_INT = 2**53 - 1
"""Largest integer RFC 8785 (I-JSON, RFC 7493 section 2.2) carries exactly; counts are capped at it."""

MAX_LINE_DEPTH = 128
"""Deepest nesting (arrays and objects, the record itself level 1) of a JSONL record an importer reads;
:func:`read_jsonl` takes a deeper line as one that is no JSON object. Real records stay below ~20 levels.
The JSON decoder reads ~1,000, but an importer's recursive walks of a record (Claude Code's ``_safe_json``,
:func:`clean_surrogates`) take two frames a level, and pydantic's serializer refuses an event nested ~254
levels deep; a record's values sit a few levels deeper inside the event it becomes."""

IMAGE_PREFIXES = ("http://", "https://", "data:")
"""URL schemes an image reference may use to become an ``ImagePart``."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class ImportWarning:
    """Something the importer skipped or changed: ``line`` is 1-based (None for file-level notes)."""

    path: str
    line: int | None
    reason: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else self.path
        return f"{where}: {self.reason}"


@dataclass
class ImportedSession:
    """One session reconstructed from a transcript.

    Attributes:
        key: Stable id derived from the source (e.g. ``claude-code:<sessionId>``); the recorded session id.
        task: Short human title (first user prompt, truncated to 200 chars).
        source_format: ``claude-code`` or ``codex``.
        events: Events in order.
        parent_key: ``key`` of the parent session for sub-agents, else None.
        metadata: JSON-ready facts about the source (native ids, versions, timestamps); no paths.
        started_at_ms: Epoch ms of the first record, when the source has timestamps.
        ended_at_ms: Epoch ms of the last record, when the source has timestamps.
        event_times_ms: Epoch ms the source recorded each event at (parallel to ``events``; None for an
            event with no source time; empty when the importer knows none): ``import_file`` stamps the
            recorded rows with them.
        settled: How many leading ``events`` depend only on the records read so far: a source that grew
            yields exactly these first, so an incremental import records them while the session is open;
            the rest close what the end of the file left open (an open completion, pending calls, the last
            run) and are recorded only when the session ended. None: the importer reads the file as a
            finished whole (every event is settled, and the session ended).
        earlier_keys: Keys an earlier import of this same file may have recorded the session under, before
            the file showed its own id (a Claude Code file whose first lines carry no ``sessionId`` is keyed
            by its file stem until one does): :func:`~flightlog.importers.import_file` continues such a
            session (after checking its recorded events are the file's first ones) instead of recording a
            second one.
    """

    key: str
    task: str
    source_format: str
    events: MutableSequence[SessionEvent] = field(default_factory=list)
    parent_key: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    started_at_ms: int | None = None
    ended_at_ms: int | None = None
    event_times_ms: list[int | None] = field(default_factory=list)
    settled: int | None = None
    earlier_keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class JsonLine:
    """A decoded JSONL record and its 1-based line number.

    With ``read_jsonl(..., keep_unparsed=True)``, a line (or NUL-separated piece of one) that is not a JSON
    object comes as ``value=None`` and its bytes in ``raw`` (see :func:`unparsed_payload`).
    """

    line: int
    value: Any
    raw: bytes | None = None


def unparsed_payload(item: JsonLine) -> JsonObj:
    """The byte-exact ``Custom`` payload of a line that is not a JSON object: ``{"line", "text"}`` when its
    bytes are valid UTF-8 (encoding ``text`` as UTF-8 gives them back), else ``{"line", "base64"}``."""
    raw = item.raw or b""
    try:
        return {"line": item.line, "text": raw.decode("utf-8")}
    except UnicodeDecodeError:
        return {"line": item.line, "base64": base64.b64encode(raw).decode("ascii")}


_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def may_hold_surrogates(text: str) -> bool:
    """Whether ``json.loads(text)`` can hold a lone surrogate: only when ``text`` holds one itself (text
    decoded with ``surrogateescape``) or a ``\\uD800``-``\\uDFFF`` escape (JSON's only other way to spell
    one; a valid pair decodes to one character, but telling pairs apart is :func:`clean_surrogates`' job).

    A False is exact (the decoded value has no surrogate, :func:`clean_surrogates` would change nothing); a
    True may be spurious (an escaped backslash before ``ud83d`` text). One C-speed scan of the text instead
    of a Python walk of every value (issue 19: the walk cost 2.4x ``json.loads``).
    """
    return _SURROGATE_ESCAPE.search(text) is not None or _SURROGATE.search(text) is not None


def clean_surrogates(value: Any) -> tuple[Any, int]:
    """Replace lone surrogates in every string of ``value`` by their ``\\udXXX`` escape text.

    RFC 8785 (and UTF-8) cannot carry a lone surrogate; the escape keeps the information visible and
    lossless for a reader. Returns ``(cleaned value, number of surrogates replaced)``.
    """
    count = 0

    def fix(item: Any) -> Any:
        nonlocal count
        if isinstance(item, str):
            if _SURROGATE.search(item) is None:
                return item
            count += len(_SURROGATE.findall(item))
            return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", item)
        if isinstance(item, dict):
            return {fix(k): fix(v) for k, v in item.items()}
        if isinstance(item, list):
            return [fix(v) for v in item]
        return item

    return fix(value), count


_SPOOL_BUFFER = 1 << 18
"""Bytes an :class:`EventSpool` buffers before writing to its file (reads flush it first)."""


class EventSpool(MutableSequence[SessionEvent]):
    """An importer's events kept on disk, as their RFC 8785 canonical bytes in an anonymous temporary file
    (deleted when closed or collected), so an import's memory does not grow with the transcript: only the
    offsets stay in memory (8 bytes an event). Appending encodes (raising what
    :func:`~flightlog.encoding.canonical_bytes` raises, naming the field); reading decodes
    (:func:`~flightlog.encoding.decode_stored`): an event read back equals the one appended. Append-only:
    setting, inserting or deleting an item raises ``TypeError``."""

    def __init__(self) -> None:
        # It lives as long as the spool (see close()). A 256 KiB buffer: appends of ~1 KB events reach the
        # file in 256 KiB writes instead of 8 KiB ones (-0.9 us an event, issue 19)
        self._file: IO[bytes] = tempfile.TemporaryFile("w+b", buffering=_SPOOL_BUFFER)  # noqa: SIM115
        # closed with the spool when it is collected (an importer may drop a builder it replaced)
        self._finalizer = weakref.finalize(self, self._file.close)
        self._offsets = array("q", [0])
        self._kinds = array("H")  # each event's kind, as its index in _KIND_CODES
        self._at_end = True  # the file position is at the end (no read since the last append)

    def close(self) -> None:
        """Delete the temporary file now (``import_file`` closes its spools when the import ends)."""
        self._finalizer()

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def append(self, value: SessionEvent) -> None:
        """Encode and store one event at the end."""
        self._write(value.kind, canonical_bytes(value))

    def append_custom(self, custom_kind: str, payload: Any, *, plain: bool = False) -> None:
        """Store ``Custom(custom_kind=custom_kind, payload=payload)`` at the end, encoded without building
        the event when the payload is plain JSON (:func:`~flightlog.encoding.custom_bytes`; ``plain``: the
        caller vouches for it): the same bytes as :meth:`append` of the event.

        Raises:
            EncodingError: as :meth:`append` (a payload RFC 8785 cannot hold; names the field).
        """
        data = custom_bytes(custom_kind, payload, plain=plain)
        if data is None:
            self.append(Custom(custom_kind=custom_kind, payload=payload))
        else:
            self._write("custom", data)

    def append_bytes(self, kind: str, data: bytes) -> None:
        """Store at the end an event given as its canonical bytes and ``kind``, without building it: the
        caller vouches that ``data`` is :func:`~flightlog.encoding.canonical_bytes` of a valid event of
        that kind (the encoders of :mod:`flightlog.encoding` that write an event's bytes from its fields,
        each proven equal to the model's; what is read back decodes as that event)."""
        self._write(kind, data)

    def _write(self, kind: str, data: bytes) -> None:
        if not self._at_end:  # a read moved the position; appends alone leave it at the end
            self._file.seek(0, 2)
            self._at_end = True
        self._file.write(data)
        self._offsets.append(self._offsets[-1] + len(data))
        self._kinds.append(_kind_code(kind))

    def raw_range(self, start: int | None, stop: int | None) -> list[bytes]:
        """The canonical bytes of the events ``[start:stop]`` (slice rules: 0-based, None for an end,
        negative from the end, clipped), in one read."""
        start, stop, _ = slice(start, stop).indices(len(self))
        if start >= stop:
            return []
        offsets = self._offsets
        base = offsets[start]
        self._at_end = False
        self._file.seek(base)
        data = self._file.read(offsets[stop] - base)
        return [data[offsets[i] - base : offsets[i + 1] - base] for i in range(start, stop)]

    def rows_range(self, start: int | None, stop: int | None) -> list[tuple[str, bytes]]:
        """``(kind, canonical bytes)`` of the events ``[start:stop]`` (as :meth:`raw_range`), what
        :meth:`~flightlog.recorder.Recorder.append_encoded` records without decoding them."""
        start, stop, _ = slice(start, stop).indices(len(self))
        names = _KIND_NAMES
        kinds = [names[code] for code in self._kinds[start:stop]]
        return list(zip(kinds, self.raw_range(start, stop), strict=True))

    def raw(self, index: int) -> bytes:
        """The canonical bytes of the event at ``index`` (0-based; negative counts from the end)."""
        index = range(len(self))[index]
        start, stop = self._offsets[index], self._offsets[index + 1]
        self._at_end = False
        self._file.seek(start)
        return self._file.read(stop - start)

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            if index.step in (None, 1):
                return [decode_stored(data) for data in self.raw_range(index.start, index.stop)]
            return [decode_stored(self.raw(i)) for i in range(len(self))[index]]
        return decode_stored(self.raw(index))

    def __iter__(self) -> Iterator[SessionEvent]:
        for data in self.raw_chunks():
            yield decode_stored(data)

    def raw_chunks(self, chunk: int = 512) -> Iterator[bytes]:
        """The canonical bytes of every event in order, read ``chunk`` events at a time (bounded memory)."""
        for start in range(0, len(self), chunk):
            yield from self.raw_range(start, start + chunk)

    def __setitem__(self, index: Any, value: Any) -> None:
        raise TypeError("an EventSpool is append-only")

    def __delitem__(self, index: Any) -> None:
        raise TypeError("an EventSpool is append-only")

    def insert(self, index: int, value: SessionEvent) -> None:
        """Only at the end (``append``); anywhere else raises ``TypeError``."""
        if index != len(self):
            raise TypeError("an EventSpool is append-only")
        self.append(value)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]


_KIND_CODES: dict[str, int] = {}
"""Event kinds as small integers, for :class:`EventSpool`'s per-event kind (a process-wide table)."""
_KIND_NAMES: list[str] = []
"""The inverse of :data:`_KIND_CODES` (``_KIND_NAMES[code]`` is the kind)."""
_KIND_LOCK = threading.Lock()


def _kind_code(kind: str) -> int:
    code = _KIND_CODES.get(kind)
    if code is None:
        with _KIND_LOCK:
            code = _KIND_CODES.get(kind)
            if code is None:
                _KIND_NAMES.append(kind)
                code = _KIND_CODES[kind] = len(_KIND_NAMES) - 1
    return code


def events_of(
    events: Sequence[SessionEvent],
    kinds: Collection[str],
    needs: Mapping[str, bytes | Callable[[bytes], bool]] | None = None,
) -> Iterator[tuple[int, SessionEvent]]:
    """``(index, event)`` for each event of ``events`` whose ``kind`` is in ``kinds``, in order.

    ``needs`` (kind -> bytes) lets an :class:`EventSpool` skip, without decoding it, an event of such a kind
    whose canonical bytes do not contain those bytes: the caller states that such an event cannot matter to
    it (e.g. a ``custom`` event whose strings hold no ``<task-notification>``: RFC 8785 escapes only ``"``,
    ``\\`` and control characters, so text without those appears in the bytes as it is). A need may also be
    a function of the canonical bytes (True: decode the event); it is called for each event of its kind in
    order, after the caller has handled every event yielded before, so it may read the caller's state. A
    list is walked whole; the result is the same either way. An :class:`EventSpool` decodes only the events
    selected (its kinds are kept beside the offsets), reading the bytes in chunks (bounded memory).
    """
    if not isinstance(events, EventSpool):
        yield from ((i, e) for i, e in enumerate(events) if e.kind in kinds)
        return
    wanted = {code for kind, code in _KIND_CODES.items() if kind in kinds}
    need = {_KIND_CODES[kind]: data for kind, data in (needs or {}).items() if kind in _KIND_CODES}
    codes = events._kinds
    for start in range(0, len(events), 512):
        stop = min(start + 512, len(events))
        if wanted.isdisjoint(codes[start:stop]):  # no event of a wanted kind in this chunk
            continue
        for index, data in enumerate(events.raw_range(start, stop), start=start):
            code = codes[index]
            if code not in wanted:
                continue
            test = need.get(code)
            if test is None or (test in data if isinstance(test, bytes) else test(data)):
                yield index, decode_stored(data)


_SPOOLED: ContextVar[bool] = ContextVar("flightlog_spooled_events", default=False)


@contextmanager
def spooled_events() -> Iterator[None]:
    """Inside this block, :func:`new_event_list` gives an :class:`EventSpool` (what ``import_file`` uses,
    so an import runs in bounded memory); outside, a plain list (what tests of one importer compare)."""
    token = _SPOOLED.set(True)
    try:
        yield
    finally:
        _SPOOLED.reset(token)


def new_event_list() -> MutableSequence[SessionEvent]:
    """The container a session builder collects its events in (see :func:`spooled_events`)."""
    return EventSpool() if _SPOOLED.get() else []


def append_custom(
    events: MutableSequence[SessionEvent], custom_kind: str, payload: Any, *, plain: bool = False
) -> None:
    """Append ``Custom(custom_kind=custom_kind, payload=payload)`` to ``events``: into an
    :class:`EventSpool` without building the event (:meth:`EventSpool.append_custom`; ``plain`` as there),
    into any other sequence as the event.

    Raises:
        EncodingError: an :class:`EventSpool` cannot encode the payload (names the field).
    """
    if isinstance(events, EventSpool):
        events.append_custom(custom_kind, payload, plain=plain)
    else:
        events.append(Custom(custom_kind=custom_kind, payload=payload))


def output_digest(text: str, is_error: bool) -> bytes:
    """What a builder remembers of the last result of a call id, to skip a word-for-word repeat without
    holding every output: sha256 of the text (lone surrogates escaped) and the error flag."""
    data = text.encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).digest() + (b"\x01" if is_error else b"\x00")


_TORN_TAIL_WAITS: ContextVar[bool] = ContextVar("flightlog_torn_tail_waits", default=False)


@contextmanager
def torn_tail_waits() -> Iterator[None]:
    """Inside this block, :func:`read_jsonl` stops before a torn last line (see there) instead of handing
    it on: an incremental import (``import_file`` of an open session, ``flightlog watch``) waits for the
    writer to finish the line rather than record half of it."""
    token = _TORN_TAIL_WAITS.set(True)
    try:
        yield
    finally:
        _TORN_TAIL_WAITS.reset(token)


def tail_waits() -> bool:
    """Whether the caller is inside :func:`torn_tail_waits` (an incremental import): a reader of a
    line-based format that is not JSONL (aider's Markdown) then stops before a last line with no newline."""
    return _TORN_TAIL_WAITS.get()


def read_jsonl(
    path: Path, warnings: list[ImportWarning], *, keep_unparsed: bool = False
) -> Iterator[JsonLine]:
    """Stream JSON records from a JSONL file, one line at a time (bounded by the longest line).

    Strips a leading UTF-8 BOM. Splits only on ``\\n`` (U+2028 inside strings is content, not a line
    break) and on runs of NUL bytes (a crashed writer's zero-filled block; JSON text never holds a raw
    NUL), so the record after the NULs is read (warned with the line number). Invalid UTF-8 bytes inside a
    record keep the rest of it: each byte becomes ``\\udcXX`` escape text (warned with the line number), as
    do lone surrogates. A line that is still not a JSON object (torn, malformed, nested too deeply, a
    bare value) is warned with its 1-based line number and skipped, or, with ``keep_unparsed``, yielded
    with ``value=None`` and its exact bytes in ``raw`` so the importer can keep it.

    A record nested deeper than :data:`MAX_LINE_DEPTH` is such a line too (warned as nested too deeply).

    A *torn last line* is a last line with no ``\\n`` that is not one whole JSON object (a writer still
    writing it; a whole object cannot be a proper prefix of another). Inside :func:`torn_tail_waits` the
    reader stops before it (warned with its line number: a later import reads it once complete); outside,
    it is handled as any other line that is no JSON object.
    """
    name = path.name
    waits = _TORN_TAIL_WAITS.get()
    with path.open("rb") as fh:
        for number, line in enumerate(fh, start=1):
            if number == 1 and line.startswith(b"\xef\xbb\xbf"):
                line = line[3:]
            if waits and not line.endswith(b"\n") and _torn(line):
                warnings.append(
                    ImportWarning(name, number, "torn last line (no newline yet) left for a later import")
                )
                return
            line = line.removesuffix(b"\n")
            value = _plain_object(line)
            if value is not None:
                yield JsonLine(number, value)
                continue
            pieces = [line] if b"\0" not in line else _split_nuls(name, number, line, warnings)
            for raw in pieces:
                if not raw.strip():
                    continue
                item = _decode_line(name, number, raw, warnings, keep_unparsed)
                if item is not None:
                    yield item


def _plain_object(line: bytes) -> JsonObj | None:
    """The JSON object a line is, when it is one with nothing for :func:`_decode_line` to report or repair
    (most lines): valid UTF-8 with no NUL and no ``\\u`` escape (so no surrogate to scrub), the object
    alone on the line (no white space around it), nested at most :data:`MAX_LINE_DEPTH` levels. None for any other line, which then takes the general
    path (NUL split, :func:`_decode_line`), whose result for such a line would be this same object: the
    same strict decoding, the same scanner as :func:`_loads`, and nothing to clean or warn about."""
    if b"\0" in line:
        return None
    try:
        text = line.decode("utf-8")
        value, end = _SCAN_ONCE(text, 0)
    except (UnicodeDecodeError, StopIteration, ValueError, RecursionError):
        return None  # the general path decodes again and reports what is wrong, if anything
    if end != len(text) or type(value) is not dict or "\\u" in text:
        return None
    if _too_deep(text, value):
        return None  # nested too deeply: the general path refuses it as no JSON object, and warns
    return value


def _too_deep(text: str, value: Any) -> bool:
    """Whether the record ``value`` parsed from ``text`` nests deeper than :data:`MAX_LINE_DEPTH`: only a line
    with more brackets than the limit can, so the walk runs after one C-speed count of each."""
    return text.count("[") + text.count("{") > MAX_LINE_DEPTH and depth_exceeds(value, MAX_LINE_DEPTH)


def _torn(line: bytes) -> bool:
    """Whether a last line without newline is not (yet) one whole JSON object."""
    if not line.strip(b" \t\r\0"):
        return False
    try:
        return not isinstance(json.loads(line.decode("utf-8", "surrogateescape")), dict)
    except (ValueError, RecursionError):
        return True


def _split_nuls(name: str, number: int, line: bytes, warnings: list[ImportWarning]) -> list[bytes]:
    """The pieces of a line between runs of NUL bytes (warned: how many NULs, on which line)."""
    warnings.append(ImportWarning(name, number, f"{line.count(0)} NUL byte(s) skipped between records"))
    return [piece for piece in re.split(rb"\x00+", line) if piece.strip()]


def _decode_line(
    name: str, number: int, raw: bytes, warnings: list[ImportWarning], keep_unparsed: bool
) -> JsonLine | None:
    """One line's JSON object (made surrogate-free), or its raw bytes / None when it is not one."""
    try:
        text = raw.decode("utf-8")
        invalid = 0
    except UnicodeDecodeError:
        text = raw.decode("utf-8", "surrogateescape")
        invalid = len(_SURROGATE.findall(text))
    try:
        value = _loads(text)
    except ValueError as exc:
        reason = f"malformed line: {short_error(exc)}"
    except RecursionError:
        reason = "line: JSON nested too deeply"
    else:
        reason = "" if isinstance(value, dict) else "line: not a JSON object"
        if not reason and _too_deep(text, value):
            reason = f"line: JSON nested deeper than {MAX_LINE_DEPTH} levels"
    if reason:
        kept = "kept byte-exact" if keep_unparsed else "skipped"
        warnings.append(ImportWarning(name, number, f"{kept} {reason}"))
        return JsonLine(number, None, raw) if keep_unparsed else None
    # Text decoded strictly from UTF-8 holds no surrogate (the codec refuses encoded ones), so only the
    # escape spelling needs the scan there (may_hold_surrogates' other half); invalid text is walked anyway.
    # A backslash-u first: a C-speed find, before the regular expression.
    escaped = "\\u" in text and _SURROGATE_ESCAPE.search(text) is not None
    value, replaced = clean_surrogates(value) if invalid or escaped else (value, 0)
    if invalid:
        warnings.append(
            ImportWarning(name, number, f"{invalid} invalid UTF-8 byte(s) kept as \\udcXX escape text")
        )
        replaced -= invalid
    if replaced > 0:
        warnings.append(
            ImportWarning(name, number, f"{replaced} lone surrogate(s) kept as \\uXXXX escape text")
        )
    return JsonLine(number, value)


_SCAN_ONCE: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _loads(text: str) -> Any:
    """``json.loads(text)``: the same value, or the same error, with the decoder's C scanner called
    directly when the text has no whitespace before or after the value (most lines: ``json.loads`` runs the
    same scanner after two whitespace matches and three Python calls); any other text takes ``json.loads``.

    Raises:
        ValueError, RecursionError: as ``json.loads``.
    """
    try:
        value, end = _SCAN_ONCE(text, 0)
    except StopIteration:  # whitespace (or nothing) first: json.loads skips it, or says what is wrong
        return json.loads(text)
    return value if end == len(text) else json.loads(text)


def short_error(exc: Exception) -> str:
    """An exception's message cut to 120 characters, for warnings and error lines."""
    text = str(exc)
    return text if len(text) <= 120 else text[:117] + "..."


def make_json_safe(value: Any) -> int:
    """Replace, in place, values RFC 8785 refuses by their JSON text; returns how many were replaced.

    Integers beyond ±(2**53-1) become their decimal text, NaN/±Infinity ``"NaN"``/``"Infinity"``/
    ``"-Infinity"`` (inside dicts and lists; a bare scalar is left alone). Iterative, so nesting depth never
    hits the recursion limit.
    """
    count = 0
    stack: list[Any] = [value]
    while stack:
        container = stack.pop()
        entries: list[tuple[Any, Any]]
        if isinstance(container, dict):
            entries = list(container.items())
        elif isinstance(container, list):
            entries = list(enumerate(container))
        else:
            continue
        for key, child in entries:
            if isinstance(child, dict | list):
                stack.append(child)
            elif _unsafe_number(child):
                container[key] = json.dumps(child)
                count += 1
    return count


def _unsafe_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return abs(value) > MAX_SAFE_INT
    return isinstance(value, float) and not math.isfinite(value)


def as_str(value: Any) -> str | None:
    """``value`` if it is a string, else None."""
    return value if isinstance(value, str) else None


def as_list(value: Any) -> list[Any]:
    """``value`` if it is a JSON array, else an empty list."""
    return value if isinstance(value, list) else []


def as_obj(value: Any) -> JsonObj:
    """``value`` if it is a JSON object, else an empty dict."""
    return value if isinstance(value, dict) else {}


def json_int(value: Any) -> int | None:
    """``value`` if it is a JSON integer (a bool is not one), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def epoch_ms(stamp: Any) -> int | None:
    """Epoch ms of an ISO-8601 timestamp with a timezone; None when absent, naive, invalid or beyond
    ±:data:`MAX_SAFE_INT`."""
    if not isinstance(stamp, str):
        return None
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    ms = (moment - _EPOCH) // timedelta(milliseconds=1)
    return ms if abs(ms) <= MAX_SAFE_INT else None


def compact_json(value: Any) -> str:
    """A string as-is; None as ""; anything else as compact JSON text (non-ASCII kept)."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def chat_thinking_parts(message: JsonObj) -> list[ContentPart]:
    """The ``thinking_blocks`` of a chat-completion message (LiteLLM's Anthropic passthrough), in order.

    ``{"type": "thinking", "thinking", "signature"?}`` → :class:`ThinkingPart`; ``{"type":
    "redacted_thinking", "data"}`` → :class:`RedactedThinkingPart`; other entries are skipped.
    """
    parts: list[ContentPart] = []
    blocks = message.get("thinking_blocks")
    for block in blocks if isinstance(blocks, list) else ():
        block = as_obj(block)
        if block.get("type") == "thinking" and isinstance(block.get("thinking"), str):
            parts.append(ThinkingPart(thinking=block["thinking"], signature=as_str(block.get("signature"))))
        elif block.get("type") == "redacted_thinking" and isinstance(block.get("data"), str):
            parts.append(RedactedThinkingPart(data=block["data"]))
    return parts
