"""Codex CLI rollout importer: one ``rollout-*.jsonl`` file → one :class:`ImportedSession`.

Source shape: one JSON object a line, ``{"timestamp": ISO-8601 str, "type": str, "payload": object}``.
``type`` is ``session_meta``, ``turn_context``, ``response_item`` (OpenAI Responses items: ``message``,
``reasoning``, ``function_call``, ``function_call_output``, ``custom_tool_call``,
``custom_tool_call_output``, ``local_shell_call``, ``web_search_call``...), ``event_msg`` (UI events:
``user_message``, ``agent_message``, ``agent_reasoning``, ``token_count``, ``task_started``,
``task_complete``, ``turn_aborted``...) or ``compacted`` (``{message, replacement_history?}``).

The file is streamed with :func:`~flightlog.importers.base.read_jsonl` (bad lines skipped and warned with
their line number); records are folded one at a time, so memory is bounded by the longest line plus the
per-call bookkeeping (call ids, record digests), not by the file. One cheap pre-scan of the raw lines
decides where user prompts come from (rule 1).

Mapping rules:

1. **Prompts.** Codex writes each real user prompt twice: as a ``response_item`` ``message`` (role
   ``user``) and as an ``event_msg`` ``user_message``. The ``response_item`` user messages also carry
   injected context (``<environment_context>``, ``# AGENTS.md instructions``, skills...) that the
   redaction of real files makes indistinguishable from prompts, so when the file has any prompt-like
   ``event_msg`` ``user_message`` (``kind`` absent, ``plain`` or ``user``, text not starting with a context
   marker) those events are the prompts and every ``response_item`` user/developer/system message is
   kept as ``Custom("codex.response_item.message")``. Otherwise (older or trimmed files) a
   ``response_item`` user message whose text does not start with a context marker is the prompt.
   A prompt closes the open run and starts ``RunStarted(run_id=f"{session_id}:{line}", goal=text,
   attachments=[ImagePart(ref=url)...])`` (image URLs/data URIs only, never local paths).
2. **Runs.** A run ends at the next prompt or at end of file with ``RunTerminal(reason, turns_used,
   total_tokens)``: ``aborted`` after a ``turn_aborted``; at end of file ``incomplete`` unless a
   ``task_complete`` was seen and none of the run's calls is pending; otherwise ``completed``.
   ``turns_used`` counts the run's ``LlmCompleted``; ``total_tokens`` is the growth of the cumulative
   ``token_count.info.total_token_usage.total_tokens`` over the run (0 without token counts).
3. **Model responses.** Assistant-side response items (``reasoning``, assistant ``message``,
   ``function_call``, ``custom_tool_call``, ``local_shell_call``, ``web_search_call``) accumulate into one
   open response, closed by a boundary: a tool output, any non-assistant message, a ``user_message``,
   ``turn_context`` (Codex writes one before each model request), ``token_count`` (written when a
   response completes), ``task_started``/``task_complete``/``turn_aborted``, ``compacted``, a prompt or
   end of file. Other records (``agent_message``/``agent_reasoning`` echoes, unknown types) do not close
   it and are recorded where they occur, so the response's events land where the response ended. A
   closed response becomes ``LlmCompleted(turn=n)`` (``n`` counts responses in the session, from 1) with
   ``Message(role="assistant", content=[ThinkingPart|RedactedThinkingPart|TextPart...],
   tool_calls=[ToolCall...])`` and ``ProviderReplay(protocol="openai.responses", provider=<session_meta
   model_provider or "openai">, model=<latest turn_context model>, native_blocks=<the response items
   verbatim>)``, then ``ToolRequested(turn=n, calls)`` when it made calls.
4. **Reasoning.** Each ``summary`` (then raw ``content``) text is a ``ThinkingPart(signature=None)``; with
   neither, ``encrypted_content`` becomes ``RedactedThinkingPart(data=...)``. ``encrypted_content`` is
   always kept byte-exact in ``native_blocks``.
5. **Tool calls.** ``function_call`` → ``ToolCall(id=call_id, name, arguments=<arguments text>)``;
   ``custom_tool_call`` → ``arguments=<input text>``; ``local_shell_call`` → ``name="local_shell"``,
   ``arguments=<action as compact JSON>``, id ``call_id`` else ``id``. ``web_search_call`` runs on the
   provider and has no output record: it stays in ``native_blocks`` only. A call id seen before (Codex
   reuses ids across turns) makes a new call ``<id>#2``, ``#3``... (the same call item written twice
   inside one response is kept once, warned); a call without an id is recorded as
   ``no-id`` (``#2``...), both warned (:class:`~flightlog.importers.jsondoc.CallBook`, as for OpenHands
   and SWE-agent).
6. **Tool results.** ``function_call_output``/``custom_tool_call_output`` → ``ToolCompleted(turn=<turn of
   the call>, results=[ToolResult(call_id, output, is_error)])``, one per record. ``output`` is the text
   as written (a non-string output is kept as compact JSON text); ``is_error`` is true when a JSON
   wrapper has ``metadata.exit_code != 0`` or ``success: false``, or a text header says ``Exit code: N`` /
   ``Process exited with code N`` with N != 0. A result answers the earliest unanswered call of its
   ``call_id`` (``""`` included). One repeating word for word the last result of an id whose calls are
   all answered is skipped (warned). Any other result without an open call is still recorded, at the current turn, followed by
   ``Custom("codex.orphan_tool_result", {call_id, line, type})``. Calls still unanswered at end of file
   get ``Custom("codex.pending_tool_call", {call_id, name, turn, line})`` before the last ``RunTerminal``.
7. **Compaction.** ``compacted`` → ``Compressed(turn=<current>, archived_seq_range=(first, last),
   summary=<text>, action="compact")``: Codex compacts the whole history, so the range covers every
   event recorded before it, as seqs of the recorded session (``import_file`` records one
   ``import_source`` header first, hence :data:`SEQ_OFFSET`); ``(0, 0)`` when nothing precedes it.
   Codex continues from ``replacement_history`` when it has one (the kept user messages and its summary
   message): then ``<text>`` is those messages' texts in order, injected context left out; otherwise the
   ``message``. Replay replaces the whole range by that one message, so the session replays as Codex
   continued it, nothing twice. The full ``replacement_history`` is kept in
   ``Custom("codex.compacted", payload)``.
8. **Interrupts.** ``event_msg`` ``turn_aborted`` → ``OperationCancelled(turn=<current>,
   operation_id=<its turn_id, else "{session_id}:{line}">, reason="user", pending_call_ids=<the run's
   unanswered calls>)`` plus the raw ``Custom("codex.event_msg.turn_aborted")`` (its native reason:
   ``interrupted``, ``replaced``...). The calls stay pending (rule 6) unless an output follows.
9. **Everything else** is kept as ``Custom(custom_kind="codex.<type>[.<payload.type>]",
   payload=<payload>)``: ``session_meta``, ``turn_context``, context messages, event echoes of response
   items (never counted as messages or calls), ``token_count``, unknown types. A record without a dict
   payload is kept whole (``codex.<type>``, or ``codex.record`` without a type).
10. **Hostile input.** A line that is no JSON object (torn, malformed) is kept byte-exact as
    ``Custom("codex.unparsed_line", {"line", "text"|"base64"})`` where it occurs (warned). An exact repeat of an earlier record (same decoded JSON) is skipped and warned.
    Integers beyond ±(2**53-1) and NaN/±Infinity are kept as their JSON text (warned), so every event
    encodes under RFC 8785; lone surrogates arrive as ``\\uXXXX`` text from ``read_jsonl``.

Times: each event carries (``ImportedSession.event_times_ms``) the ``timestamp`` of the record being folded
when it was emitted (a response's events: the record that closed it; end-of-file events: the last one).

Session: ``key = "codex:" + session_meta.id`` (fallback: the file stem), ``task`` = first prompt cut to
200 chars, ``metadata`` = ``id``, ``cli_version``, ``originator``, ``model_provider`` of the first
``session_meta`` (no cwd, no paths), ``started_at_ms``/``ended_at_ms`` = earliest/latest record
timestamp (epoch ms; a numeric timestamp is epoch seconds, or epoch ms from 10**11 up; None without
timezone-aware or numeric timestamps).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..events import (
    CancellationReason,
    Compressed,
    Custom,
    LlmCompleted,
    OperationCancelled,
    ProviderReplay,
    RunStarted,
    RunTerminal,
    SessionEvent,
    ToolCompleted,
    ToolRequested,
)
from ..messages import (
    ContentPart,
    ImagePart,
    Message,
    RedactedThinkingPart,
    TextPart,
    ThinkingPart,
    ToolCall,
    ToolResult,
)
from .background import with_task_sessions
from .base import (
    MAX_SAFE_INT,
    TASK_CHARS,
    ImportedSession,
    ImportWarning,
    JsonObj,
    as_str,
    compact_json,
    epoch_ms,
    make_json_safe,
    new_event_list,
    output_digest,
    read_jsonl,
    unparsed_payload,
)
from .base import as_str as _str
from .jsondoc import CallBook

__all__ = ["FORMAT", "SEQ_OFFSET", "VERSION", "looks_like", "read"]

FORMAT = "codex"
"""Format name, as ``import_file`` and ``--format`` spell it."""

VERSION = "1"
"""Importer version recorded with each import; bump when the mapping changes."""

SEQ_OFFSET = 1
"""Seq of the session's first event once recorded: ``import_file`` writes an ``import_source`` header at 0."""


_PROTOCOL = "openai.responses"
_DEFAULT_PROVIDER = "openai"
_PROMPT_KINDS = frozenset({"plain", "user"})
_CONTEXT_MARKERS = (
    "<environment_context>",
    "<user_instructions>",
    "<INSTRUCTIONS>",
    "# AGENTS.md instructions",
    "<turn_aborted>",
    "<user_shell_command>",
    "<skill>",
)
_TEXT_PARTS = frozenset({"input_text", "output_text", "text"})
_IMAGE_PARTS = frozenset({"input_image", "output_image"})
_EXIT_CODE = re.compile(r"^(?:Exit code:|Process exited with code) (-?\d+)\s*$", re.MULTILINE)


def looks_like(record: dict[str, Any]) -> bool:
    """True if a decoded JSONL record looks like a Codex CLI rollout record.

    Args:
        record: One decoded JSON object.

    Returns:
        True when it has a ``timestamp`` (an ISO-8601 string, or a number of epoch seconds as some
        rollouts write it), a string ``type`` and a ``payload`` key.
    """
    stamp = record.get("timestamp")
    return (
        (isinstance(stamp, str | int | float) and not isinstance(stamp, bool))
        and isinstance(record.get("type"), str)
        and "payload" in record
    )


def read(path: Path, warnings: list[ImportWarning]) -> list[ImportedSession]:
    """Import one Codex rollout file (see the module docstring for the rules).

    Args:
        path: The ``.jsonl`` rollout.
        warnings: Appended to: skipped or changed lines, each with its 1-based line number.

    Returns:
        One session, or an empty list when the file holds no decodable record; then one child session per
        background terminal the rollout started (:mod:`flightlog.importers.background`: source ``task``).
    """
    builder = _Builder(path, warnings, prompts_from_events=_has_prompt_events(path))
    for item in read_jsonl(path, warnings, keep_unparsed=True):
        if item.value is None:
            builder.emit(Custom(custom_kind="codex.unparsed_line", payload=unparsed_payload(item)))
        else:
            builder.feed(item.line, item.value)
    return with_task_sessions(builder.finish())


# ─── Pre-scan and record-level helpers ────────────────────────────────────────────────────────


def _has_prompt_events(path: Path) -> bool:
    """True when some ``event_msg`` ``user_message`` line is a real prompt (rule 1); raw, line by line."""
    with path.open("rb") as fh:
        for raw in fh:
            if b'"user_message"' not in raw or b'"event_msg"' not in raw:
                continue
            record = _loads_object(raw)
            payload = record.get("payload") if record.get("type") == "event_msg" else None
            if isinstance(payload, dict) and _event_prompt(payload) is not None:
                return True
    return False


def _loads_object(raw: bytes) -> JsonObj:
    """The JSON object on a raw line ({} when it is not one)."""
    try:
        value = json.loads(raw.removeprefix(b"\xef\xbb\xbf"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _number_ms(stamp: Any) -> int | None:
    """Epoch ms of a numeric timestamp: epoch seconds (a float or an integer below 10**11), else epoch ms;
    None for anything else, a non-finite number or one beyond ±(2**53-1) ms."""
    if isinstance(stamp, bool) or not isinstance(stamp, int | float) or stamp != stamp:
        return None
    try:
        ms = round(stamp * 1000) if isinstance(stamp, float) or abs(stamp) < 10**11 else stamp
    except OverflowError:
        return None
    return ms if abs(ms) <= MAX_SAFE_INT else None


def _digest(record: JsonObj) -> bytes:
    """sha256 of the record's sorted-key JSON: equal for exact repeats whatever the spacing."""
    text = json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def _custom_kind(record_type: Any, payload: Any) -> str:
    """``codex.<type>[.<payload.type>]`` (``codex.record`` when the record has no type)."""
    base = f"codex.{record_type}" if isinstance(record_type, str) else "codex.record"
    sub = payload.get("type") if isinstance(payload, dict) else None
    return f"{base}.{sub}" if isinstance(sub, str) else base


# ─── Content mapping ──────────────────────────────────────────────────────────────────────────


def _is_context_text(text: str) -> bool:
    """True for injected context (environment, AGENTS.md, skills...), not typed by the user."""
    return text.lstrip().startswith(_CONTEXT_MARKERS)


def _replacement_text(history: Any) -> str | None:
    """The model-visible text of a ``compacted.replacement_history`` (rule 7): its ``message`` items'
    texts in order (the kept user messages, then Codex's summary message), injected context left out,
    blank-line separated; None when it has none."""
    if not isinstance(history, list):
        return None
    texts: list[str] = []
    for item in history:
        if isinstance(item, dict) and item.get("type") == "message":
            texts += [text for text in _texts(item.get("content")) if text and not _is_context_text(text)]
    return "\n\n".join(texts) or None


def _event_prompt(payload: JsonObj) -> str | None:
    """The prompt text of an ``event_msg`` ``user_message`` payload, or None when it is not a prompt."""
    if payload.get("type") != "user_message":
        return None
    text, kind = payload.get("message"), payload.get("kind")
    if not isinstance(text, str) or (kind is not None and as_str(kind) not in _PROMPT_KINDS):
        return None
    return None if _is_context_text(text) else text


def _event_images(payload: JsonObj) -> list[ContentPart]:
    """``images`` (URLs or data URIs) of a ``user_message``; ``local_images`` are paths and are left out."""
    images = payload.get("images")
    return [ImagePart(ref=url) for url in images if isinstance(url, str)] if isinstance(images, list) else []


def _content_part(item: Any) -> ContentPart | None:
    """One Responses content item → a text or image part (None for kinds with no neutral form)."""
    if not isinstance(item, dict):
        return None
    kind = as_str(item.get("type"))
    if kind in _TEXT_PARTS and isinstance(item.get("text"), str):
        return TextPart(text=item["text"])
    if kind == "refusal" and isinstance(item.get("refusal"), str):
        return TextPart(text=item["refusal"])
    if kind in _IMAGE_PARTS and isinstance(item.get("image_url"), str):
        return ImagePart(ref=item["image_url"])
    return None


def _message_parts(payload: JsonObj) -> list[ContentPart]:
    """Content parts of a ``message`` item (a bare string content is one text part)."""
    content = payload.get("content")
    if isinstance(content, str):
        return [TextPart(text=content)]
    parts = (_content_part(item) for item in content) if isinstance(content, list) else ()
    return [part for part in parts if part is not None]


def _split_prompt(parts: list[ContentPart]) -> tuple[str, list[ContentPart]]:
    """(text parts joined by newlines, image parts) of a user message."""
    text = "\n".join(part.text for part in parts if isinstance(part, TextPart))
    return text, [part for part in parts if isinstance(part, ImagePart)]


def _texts(items: Any) -> list[str]:
    """The ``text`` of each dict in a list (reasoning ``summary``/``content``)."""
    if not isinstance(items, list):
        return []
    return [item["text"] for item in items if isinstance(item, dict) and isinstance(item.get("text"), str)]


def _reasoning_parts(payload: JsonObj) -> list[ContentPart]:
    """Rule 4: summary then raw-content texts as thinking; else the encrypted content, redacted."""
    texts = _texts(payload.get("summary")) + _texts(payload.get("content"))
    if texts:
        return [ThinkingPart(thinking=text) for text in texts]
    encrypted = payload.get("encrypted_content")
    return [RedactedThinkingPart(data=encrypted)] if isinstance(encrypted, str) else []


def _tool_call(payload: JsonObj) -> ToolCall:
    """Rule 5: the ``ToolCall`` of a call item, with its native id (``""`` when it carries none)."""
    kind = payload.get("type")
    call_id = _str(payload.get("call_id")) or ""
    if kind == "local_shell_call":
        call_id = call_id or _str(payload.get("id")) or ""
        return ToolCall(id=call_id, name="local_shell", arguments=compact_json(payload.get("action")))
    raw = payload.get("input") if kind == "custom_tool_call" else payload.get("arguments")
    return ToolCall(id=call_id, name=_str(payload.get("name")) or "", arguments=compact_json(raw))


def _output_is_error(output: Any) -> bool:
    """Rule 6: error flag of a tool output (JSON wrapper flags, else the exit-code text header)."""
    if isinstance(output, dict):
        return _wrapper_failed(output)
    if not isinstance(output, str):
        return False
    if output.lstrip().startswith("{"):
        wrapper = _loads_object(output.encode("utf-8", "surrogatepass"))
        if wrapper:
            return _wrapper_failed(wrapper)
    header = ("\n" + output[:1000]).split("\nOutput:", 1)[0]
    match = _EXIT_CODE.search(header)
    return match is not None and int(match.group(1)) != 0


def _wrapper_failed(wrapper: JsonObj) -> bool:
    """True when ``success`` is false or ``metadata.exit_code`` is a non-zero integer."""
    if wrapper.get("success") is False:
        return True
    metadata = wrapper.get("metadata")
    code = metadata.get("exit_code") if isinstance(metadata, dict) else None
    return isinstance(code, int) and not isinstance(code, bool) and code != 0


# ─── The fold ─────────────────────────────────────────────────────────────────────────────────


@dataclass
class _Run:
    """The open run: where it started and what it has counted so far."""

    run_id: str
    start_turn: int
    start_tokens: int
    turns: int = 0
    completed: bool = False
    aborted: bool = False


@dataclass
class _Response:
    """The open model response: its turn, native items, neutral parts and calls."""

    turn: int
    blocks: list[JsonObj] = field(default_factory=list)
    parts: list[ContentPart] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)


@dataclass(frozen=True)
class _Pending:
    """An unanswered tool call: its name, turn and source line."""

    name: str
    turn: int
    line: int


_Mapper = Callable[["_Builder", int, JsonObj], None]


class _Builder:
    """Mutable fold state: feed records in file order, then :meth:`finish`."""

    def __init__(self, path: Path, warnings: list[ImportWarning], *, prompts_from_events: bool) -> None:
        self.path = path
        self.warnings = warnings
        self.prompts_from_events = prompts_from_events
        self.events = new_event_list()  # on disk during an import_file (bounded memory)
        self.times: list[int | None] = []  # per event, the source time of the record that produced it
        self.at: int | None = None
        self.session_id: str | None = None
        self.metadata: JsonObj = {}
        self.provider = _DEFAULT_PROVIDER
        self.model: str | None = None
        self.first_prompt: str | None = None
        self.first_ms: int | None = None
        self.last_ms: int | None = None
        self.turn = 0
        self.tokens = 0
        self.records = 0
        self.run: _Run | None = None
        self.response: _Response | None = None
        self.calls = CallBook(lambda reason, line: self.warn(line, reason))
        self.pending: dict[str, _Pending] = {}  # session-unique call id → unanswered call
        self.last_output: dict[str, bytes] = {}  # native call id → digest of the last result recorded
        self.digests: dict[bytes, int] = {}
        # Events before a prompt taken from a ``response_item`` that no model response follows yet: an
        # ``event_msg`` twin (written before the response) may still come and make the events the prompts
        # (rule 1), so what follows it is unsettled.
        self.unconfirmed: int | None = None

    # ── plumbing ──

    def warn(self, line: int | None, reason: str) -> None:
        """Append an ImportWarning for ``line`` (1-based; None for the whole file)."""
        self.warnings.append(ImportWarning(self.path.name, line, reason))

    def emit(self, event: SessionEvent) -> None:
        """Append one event to the session, in order, with the time of the record being folded."""
        self.events.append(event)
        self.times.append(self.at)

    def keep(self, record_type: str, payload: Any) -> None:
        """Record a payload this importer does not map (rule 9)."""
        self.emit(Custom(custom_kind=_custom_kind(record_type, payload), payload=payload))

    def session_ref(self) -> str:
        """The native session id (``session_meta.id``), else the file stem."""
        return self.session_id or self.path.stem

    def feed(self, line: int, record: JsonObj) -> None:
        """Fold one decoded record (line is 1-based)."""
        replaced = make_json_safe(record)
        if replaced:
            self.warn(line, f"{replaced} number(s) outside RFC 8785's range kept as JSON text")
        if self.is_repeat(line, record):
            return
        self.records += 1
        self.note_time(record.get("timestamp"))
        record_type, payload = record.get("type"), record.get("payload")
        mapper = _RECORD_MAPPERS.get(as_str(record_type))
        if mapper is not None and isinstance(payload, dict):
            mapper(self, line, payload)
        elif isinstance(record_type, str) and "payload" in record:
            self.keep(record_type, payload)
        else:
            self.emit(Custom(custom_kind=_custom_kind(record_type, None), payload=record))

    def is_repeat(self, line: int, record: JsonObj) -> bool:
        """True (and warned) when the exact same record was seen on an earlier line."""
        digest = _digest(record)
        first = self.digests.setdefault(digest, line)
        if first != line:
            self.warn(line, f"skipped duplicate record (same as line {first})")
        return first != line

    def note_time(self, stamp: Any) -> None:
        """Widen ``[first_ms, last_ms]`` with a record timestamp (ignored when unparsable)."""
        ms = epoch_ms(stamp) if isinstance(stamp, str) else _number_ms(stamp)
        self.at = ms if ms is not None else self.at
        if ms is not None:
            self.first_ms = ms if self.first_ms is None else min(self.first_ms, ms)
            self.last_ms = ms if self.last_ms is None else max(self.last_ms, ms)

    # ── record mappers ──

    def on_session_meta(self, line: int, payload: JsonObj) -> None:
        """The first ``session_meta`` names the session (key, metadata, provider); all are kept as Custom."""
        if self.session_id is None and isinstance(payload.get("id"), str):
            self.session_id = payload["id"]
            keys = ("id", "cli_version", "originator", "model_provider")
            self.metadata = {key: payload[key] for key in keys if isinstance(payload.get(key), str)}
            self.provider = self.metadata.get("model_provider", _DEFAULT_PROVIDER)
        self.keep("session_meta", payload)

    def on_turn_context(self, line: int, payload: JsonObj) -> None:
        """A boundary (a new model request): note its ``model``; keep it as Custom."""
        self.flush()
        self.model = _str(payload.get("model")) or self.model
        self.keep("turn_context", payload)

    def on_compacted(self, line: int, payload: JsonObj) -> None:
        """Rule 7: ``Compressed`` over everything recorded so far (+ Custom for ``replacement_history``)."""
        self.flush()
        count = len(self.events)
        seq_range = (SEQ_OFFSET, SEQ_OFFSET + count - 1) if count else (0, 0)
        summary = _replacement_text(payload.get("replacement_history")) or _str(payload.get("message"))
        self.emit(Compressed(turn=self.turn, archived_seq_range=seq_range, summary=summary, action="compact"))
        if set(payload) - {"message"}:
            self.keep("compacted", payload)

    def on_response_item(self, line: int, payload: JsonObj) -> None:
        """Dispatch a ``response_item`` on its payload ``type`` (unknown types: Custom, no boundary)."""
        mapper = _ITEM_MAPPERS.get(as_str(payload.get("type")))
        if mapper is None:
            self.keep("response_item", payload)
        else:
            mapper(self, line, payload)

    def on_event_msg(self, line: int, payload: JsonObj) -> None:
        """Dispatch an ``event_msg`` on its payload ``type`` (unknown types: Custom, no boundary)."""
        mapper = _EVENT_MAPPERS.get(as_str(payload.get("type")))
        if mapper is None:
            self.keep("event_msg", payload)
        else:
            mapper(self, line, payload)

    # ── response_item mappers ──

    def on_message(self, line: int, payload: JsonObj) -> None:
        """Assistant messages join the response; other roles are a boundary, a prompt (rule 1) or Custom."""
        parts = _message_parts(payload)
        if payload.get("role") == "assistant":
            self.add_to_response(line, payload, parts)
            return
        self.flush()
        if not self.prompts_from_events and payload.get("role") == "user":
            text, images = _split_prompt(parts)
            if not _is_context_text(text):
                if self.unconfirmed is None:
                    self.unconfirmed = len(self.events)
                self.start_run(line, text, images)
                return
        self.keep("response_item", payload)

    def on_reasoning(self, line: int, payload: JsonObj) -> None:
        """Rule 4: reasoning joins the open response."""
        self.add_to_response(line, payload, _reasoning_parts(payload))

    def on_call(self, line: int, payload: JsonObj) -> None:
        """Rule 5: a client-side tool call joins the open response (a reused id becomes ``<id>#2``); the
        same call item written twice in one response is kept once (warned)."""
        call = _tool_call(payload)
        if call.id and self.response is not None and payload in self.response.blocks:
            self.warn(line, f"skipped repeated tool call {call.id!r}")
            return
        self.add_to_response(line, payload, [], call)

    def on_hosted_call(self, line: int, payload: JsonObj) -> None:
        """A provider-run call (``web_search_call``): native block only, no ``ToolCall``."""
        self.add_to_response(line, payload, [])

    def on_tool_output(self, line: int, payload: JsonObj) -> None:
        """Rule 6: a ``ToolCompleted`` answering the earliest open call of the id, at its call's turn;
        word-for-word repeats of an answered id skipped; orphans flagged."""
        self.flush()
        native = _str(payload.get("call_id")) or ""
        output = payload.get("output")
        text, is_error = compact_json(output), _output_is_error(output)
        call = self.calls.answer(native)
        if call is None and self.last_output.get(native) == output_digest(text, is_error):
            self.warn(line, f"skipped repeated tool result {native!r}")
            return
        self.last_output[native] = output_digest(text, is_error)
        call_id = call.call_id if call is not None else self.calls.orphan_id(native)
        result = ToolResult(call_id=call_id, output=text, is_error=is_error)
        self.emit(ToolCompleted(turn=self.turn if call is None else call.turn, results=[result]))
        if call is None:
            orphan = {"call_id": call_id, "line": line, "type": payload.get("type")}
            if call_id != native:
                orphan["native_call_id"] = native
            self.emit(Custom(custom_kind="codex.orphan_tool_result", payload=orphan))
        self.pending.pop(call_id, None)

    # ── event_msg mappers ──

    def on_user_message(self, line: int, payload: JsonObj) -> None:
        """Rule 1: a prompt starts a run; any other ``user_message`` is a boundary kept as Custom."""
        text = _event_prompt(payload) if self.prompts_from_events else None
        if text is None:
            self.flush()
            self.keep("event_msg", payload)
        else:
            self.start_run(line, text, _event_images(payload))

    def on_token_count(self, line: int, payload: JsonObj) -> None:
        """A boundary (the response completed); tracks the cumulative total tokens (rule 2)."""
        self.flush()
        info = payload.get("info")
        usage = info.get("total_token_usage") if isinstance(info, dict) else None
        total = usage.get("total_tokens") if isinstance(usage, dict) else None
        if isinstance(total, int) and not isinstance(total, bool) and total >= 0:
            self.tokens = total
        self.keep("event_msg", payload)

    def on_task_boundary(self, line: int, payload: JsonObj) -> None:
        """``task_started``/``task_complete``: a boundary; ``task_complete`` marks the run completed."""
        self.flush()
        if payload.get("type") == "task_complete" and self.run is not None:
            self.run.completed = True
        self.keep("event_msg", payload)

    def on_turn_aborted(self, line: int, payload: JsonObj) -> None:
        """Rule 8: ``OperationCancelled`` with the run's pending call ids, then the raw Custom."""
        self.flush()
        start = self.run.start_turn if self.run is not None else 0
        pending = [call_id for call_id, call in self.pending.items() if call.turn > start]
        operation = _str(payload.get("turn_id")) or f"{self.session_ref()}:{line}"
        reason = CancellationReason.USER
        self.emit(
            OperationCancelled(
                turn=self.turn, operation_id=operation, reason=reason, pending_call_ids=pending
            )
        )
        if self.run is not None:
            self.run.aborted = True
        self.keep("event_msg", payload)

    # ── responses and runs ──

    def add_to_response(
        self, line: int, payload: JsonObj, parts: list[ContentPart], call: ToolCall | None = None
    ) -> None:
        """Append an assistant-side item to the open response (opening one, turn + 1, if needed)."""
        self.unconfirmed = None
        if self.response is None:
            self.turn += 1
            self.response = _Response(turn=self.turn)
        self.response.blocks.append(payload)
        self.response.parts.extend(parts)
        if call is not None:
            turn = self.response.turn
            call_id = self.calls.request(call.id, call.name, turn, str(payload.get("type")), line)
            call = ToolCall(id=call_id, name=call.name, arguments=call.arguments)
            self.response.calls.append(call)
            self.pending[call_id] = _Pending(call.name, turn, line)

    def flush(self) -> None:
        """Close the open response into ``LlmCompleted`` (+ ``ToolRequested``), rule 3."""
        response, self.response = self.response, None
        if response is None:
            return
        message = Message(role="assistant", content=response.parts, tool_calls=response.calls)
        replay = ProviderReplay(
            protocol=_PROTOCOL, provider=self.provider, model=self.model, native_blocks=response.blocks
        )
        self.emit(LlmCompleted(turn=response.turn, message=message, provider_replay=replay))
        if response.calls:
            self.emit(ToolRequested(turn=response.turn, calls=response.calls))
        if self.run is not None:
            self.run.turns += 1

    def start_run(self, line: int, goal: str, attachments: list[ContentPart]) -> None:
        """Close the open run and start one for this prompt (rules 1 and 2)."""
        self.flush()
        self.close_run(at_eof=False)
        if self.first_prompt is None:
            self.first_prompt = goal
        run_id = f"{self.session_ref()}:{line}"
        self.run = _Run(run_id=run_id, start_turn=self.turn, start_tokens=self.tokens)
        self.emit(RunStarted(run_id=run_id, goal=goal, attachments=attachments))

    def close_run(self, *, at_eof: bool) -> None:
        """Emit ``RunTerminal`` for the open run, if any (rule 2)."""
        run, self.run = self.run, None
        if run is None:
            return
        used = self.tokens - run.start_tokens if self.tokens >= run.start_tokens else self.tokens
        reason = self.run_reason(run, at_eof=at_eof)
        self.emit(RunTerminal(reason=reason, turns_used=run.turns, total_tokens=min(used, MAX_SAFE_INT)))

    def run_reason(self, run: _Run, *, at_eof: bool) -> str:
        """``aborted``, ``incomplete`` (end of file mid-run) or ``completed`` (rule 2)."""
        if run.aborted:
            return "aborted"
        pending = any(call.turn > run.start_turn for call in self.pending.values())
        if at_eof and (pending or not run.completed):
            return "incomplete"
        return "completed"

    def finish(self) -> list[ImportedSession]:
        """End of file: close the response, report pending calls, close the run, build the session."""
        # What the end of the file adds below is not settled (the file may grow), nor a prompt no model
        # response has followed yet (see ``unconfirmed``).
        settled = len(self.events) if self.unconfirmed is None else self.unconfirmed
        self.flush()
        for call_id, call in self.pending.items():
            payload = {"call_id": call_id, "name": call.name, "turn": call.turn, "line": call.line}
            self.emit(Custom(custom_kind="codex.pending_tool_call", payload=payload))
        self.close_run(at_eof=True)
        if not self.records:
            self.warn(None, "no Codex rollout record in the file")
            return []
        session = ImportedSession(
            key=f"codex:{self.session_ref()}",
            task=(self.first_prompt or "")[:TASK_CHARS],
            source_format=FORMAT,
            events=self.events,
            metadata=self.metadata,
            started_at_ms=self.first_ms,
            ended_at_ms=self.last_ms,
            event_times_ms=self.times,
            settled=settled,
        )
        return [session]


_RECORD_MAPPERS: dict[Any, _Mapper] = {
    "session_meta": _Builder.on_session_meta,
    "turn_context": _Builder.on_turn_context,
    "compacted": _Builder.on_compacted,
    "response_item": _Builder.on_response_item,
    "event_msg": _Builder.on_event_msg,
}

_ITEM_MAPPERS: dict[Any, _Mapper] = {
    "message": _Builder.on_message,
    "reasoning": _Builder.on_reasoning,
    "function_call": _Builder.on_call,
    "custom_tool_call": _Builder.on_call,
    "local_shell_call": _Builder.on_call,
    "web_search_call": _Builder.on_hosted_call,
    "function_call_output": _Builder.on_tool_output,
    "custom_tool_call_output": _Builder.on_tool_output,
}

_EVENT_MAPPERS: dict[Any, _Mapper] = {
    "user_message": _Builder.on_user_message,
    "token_count": _Builder.on_token_count,
    "task_started": _Builder.on_task_boundary,
    "task_complete": _Builder.on_task_boundary,
    "turn_aborted": _Builder.on_turn_aborted,
}
