"""The importers' header: what every importer produces, the hostile-file-safe JSONL reader, and the small
readers of JSON values (strings, objects, integers, timestamps, chat thinking blocks) they all use.

An importer turns one transcript file into one or more :class:`ImportedSession` (a main session and, for
Claude Code, a child session per sub-agent file). It never writes; :func:`flightlog.importers.import_path`
records the sessions through the recorder.

Hostile input is expected (shared/samples/PROVENANCE.md): a UTF-8 BOM, torn or malformed lines anywhere,
U+2028 inside strings, lone surrogates, single lines of tens of megabytes, duplicated records. The reader
skips a bad line and reports it with its 1-based line number; the import continues.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ..events import SessionEvent
from ..messages import ContentPart, RedactedThinkingPart, ThinkingPart

__all__ = [
    "IMAGE_PREFIXES",
    "MAX_SAFE_INT",
    "TASK_CHARS",
    "ImportWarning",
    "ImportedSession",
    "JsonLine",
    "JsonObj",
    "as_obj",
    "as_str",
    "chat_thinking_parts",
    "clean_surrogates",
    "compact_json",
    "epoch_ms",
    "json_int",
    "make_json_safe",
    "read_jsonl",
    "short_error",
]

JsonObj = dict[str, Any]
"""A decoded JSON object."""

TASK_CHARS = 200
"""``ImportedSession.task`` is the first prompt cut to this many characters."""

MAX_SAFE_INT = 2**53 - 1
"""Largest integer RFC 8785 (I-JSON, RFC 7493 section 2.2) carries exactly; counts are capped at it."""

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
    """

    key: str
    task: str
    source_format: str
    events: list[SessionEvent] = field(default_factory=list)
    parent_key: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    started_at_ms: int | None = None
    ended_at_ms: int | None = None


@dataclass(frozen=True)
class JsonLine:
    """A decoded JSONL record and its 1-based line number."""

    line: int
    value: Any


_SURROGATE = re.compile("[\ud800-\udfff]")


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


def read_jsonl(path: Path, warnings: list[ImportWarning]) -> Iterator[JsonLine]:
    """Stream JSON records from a JSONL file, one line at a time (bounded by the longest line).

    Skips (and appends an :class:`ImportWarning` for) blank-free lines that are not JSON objects,
    torn lines and invalid UTF-8. Strips a leading UTF-8 BOM. Lone surrogates are replaced by their
    escape text and flagged. Splits only on ``\\n`` (U+2028 inside strings is content, not a line break).
    """
    name = path.name
    with path.open("rb") as fh:
        for number, raw in enumerate(fh, start=1):
            if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            if not raw.strip():
                continue
            try:
                value = json.loads(raw)
                if isinstance(value, dict):
                    value, replaced = clean_surrogates(value)
            except (ValueError, UnicodeDecodeError) as exc:
                warnings.append(ImportWarning(name, number, f"skipped malformed line: {short_error(exc)}"))
                continue
            except RecursionError:
                warnings.append(ImportWarning(name, number, "skipped line: JSON nested too deeply"))
                continue
            if not isinstance(value, dict):
                warnings.append(ImportWarning(name, number, "skipped line: not a JSON object"))
                continue
            if replaced:
                warnings.append(
                    ImportWarning(name, number, f"{replaced} lone surrogate(s) kept as \\uXXXX escape text")
                )
            yield JsonLine(number, value)


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
