"""Gemini CLI chat recordings → flightlog events: the JSONL session files (``~/.gemini/tmp/<project>/chats/
session-<time>-<id>.jsonl``, sub-agents under ``chats/<parent session id>/``) and the legacy whole-JSON
``session-*.json`` files.

Source shape (gemini-cli ``packages/core/src/services/chatRecordingService.ts``, ``chatRecordingTypes.ts``):
the JSONL file is a log of writes to one conversation, one JSON object a line, read back by gemini-cli's
``loadConversationRecord`` with these rules (checked in this order):

* ``{"$rewindTo": <message id>}``: the messages from that id on are deleted (all of them when the id is
  unknown);
* a record with a string ``id`` is a message, ``{id, timestamp, type: user|gemini|info|error|warning,
  content: string | Part[], displayContent?}``; ``gemini`` messages add ``thoughts [{subject,
  description, timestamp}]``, ``tokens {input, output, cached, thoughts, tool, total}``, ``model`` and
  ``toolCalls [{id, name, args, result: Part[] (functionResponse), status, timestamp, resultDisplay...}]``.
  A message written again with the same id REPLACES it in place (gemini-cli re-writes the last model
  message when its tokens and tool calls arrive);
* ``{"$set": {...}}`` updates the metadata; ``$set.messages`` replaces the whole message list (history
  rewritten, e.g. compressed);
* a record with ``sessionId`` and ``projectHash`` is the metadata line (``startTime``, ``lastUpdated``,
  ``kind: main|subagent``, ``summary``...), possibly holding ``messages`` (the legacy record on one line).

The legacy ``.json`` file is that metadata record with every message, as one JSON document.

Reading: JSONL line by line with :func:`~flightlog.importers.base.read_jsonl` (a BOM, invalid UTF-8, lone
surrogates and NUL runs handled there); a line that is no JSON object (torn, trailing bytes) is kept
byte-exact as ``Custom("gemini_cli.unparsed_line", {line, text|base64})`` and warned with its line number.
A legacy document is decoded whole (:func:`~flightlog.importers.jsondoc.read_json_document`); a broken one
refuses the file naming line and column.

Mapping rules. A message is recorded once its final form is known: when a record with another id follows
(gemini-cli only rewrites the last message), at a rewind, a ``$set.messages``, a metadata record or the
end of the file (a ``lastUpdated`` ``$set`` between two writes of one message does not end it).

1. **Prompts.** A ``user`` message whose parts are not function responses starts a run:
   ``RunStarted(run_id="<key>:<message id>", goal=<text parts>, attachments=<inline images as data: URIs,
   http(s) file parts>)``; the open run ends ``completed``.
2. **Model turns.** A ``gemini`` message is ``LlmCompleted(turn=n)``: ``ThinkingPart`` per thought part of
   ``content`` (``thoughtSignature`` kept as the signature) and per ``thoughts`` summary (``"<subject>:
   <description>"``), the text, and a ``ToolCall(id, name, arguments=<args as JSON>)`` per ``toolCalls``
   entry; ``ProviderReplay(protocol="gemini.generate_content", model, native_blocks=<content parts verbatim, when a
   list>)``; ``tokens.total`` (input, cached input included, output, thoughts and tool-use prompt tokens
   as Gemini counts them; else their sum) adds to the run. The message's other fields (``tokens``,
   ``thoughts`` times, ``toolCalls`` display fields) are kept as ``Custom("gemini_cli.message", {id,
   ...})``.
3. **Results.** A tool call's ``result`` (``functionResponse.response``: ``output``, else ``error``, else
   the response as JSON) is its ``ToolCompleted`` (``is_error`` for ``status`` ``error``/``cancelled`` or
   an ``error`` response), right after the completion. A ``user`` message of ``functionResponse`` parts
   (newer gemini-cli records the tool response it sends) answers the calls still open; one that repeats
   a result already recorded is kept whole as ``Custom("gemini_cli.function_response")``.
4. **Rewinds.** ``$rewindTo`` ends the open run (``RunTerminal(reason="rewound")``) and emits
   ``Rollbacked(checkpoint_history_len=<replay history length before that message>)`` (0 when the id is
   unknown): replay then continues from where gemini-cli continues.
5. **History replaced.** ``$set.messages``: the messages equal to the ones recorded (same id and content,
   in order) stay; from the first that differs, ``Rollbacked`` to the history length there, then the new
   messages are recorded by rules 1-3. The rest of a ``$set`` is kept as ``Custom("gemini_cli.set")``
   (``lastUpdated`` only stamps the time; ``directories``, paths of the user's machine, are not kept).
6. ``info``/``warning``/``error`` messages (the UI's notes, not sent to the model) are kept as
   ``Custom("gemini_cli.<type>")``; a message rewritten after it was recorded (not the last one) as
   ``Custom("gemini_cli.message_update")`` with a warning naming the line; unknown records as
   ``Custom("gemini_cli.record")``.
7. **The end.** The open run ends ``completed`` when its last completion called no tool and nothing is
   pending, else ``incomplete``.

**Growth and the end.** gemini-cli appends to a session's JSONL file for as long as the session lives and
``gemini --resume`` appends to it again later; no record says a session ended. So a Gemini CLI session
never ends by itself (only ``import --seal`` ends and seals it), and ``settled`` is the count of events
emitted before the end of the file: every event is emitted when a later record shows its message final
(rule: a record with another id, a rewind, a ``$set.messages``), so the events of a prefix of the file are
the first events of the whole file. What the end adds (the last message, which gemini-cli may still
rewrite, and the open run's end) is recorded by a later import. A ``$rewindTo`` or ``$set.messages`` that
rolls back history is *appended* (``Rollbacked`` and the messages that follow), never a rewrite of what was
recorded. The legacy ``.json`` document is rewritten in place as the chat goes on: the same rule holds for
its messages in order (the last one unsettled); a document whose earlier messages changed (deleted by a
rewind, rewritten) is refused by ``import_file`` naming the first differing seq, never forked.

Session: ``key = "gemini-cli:<sessionId>"`` (the file name without ``.jsonl`` when there is none); a
``kind: subagent`` file under ``chats/<parent session id>/`` names its parent in ``metadata.parent_session``
(``gemini-cli:<parent session id>``) rather than as the recorded parent: the parent's file is another import
and may never be recorded, and a recorded parent that does not exist is a dangling link. Times are each message's ``timestamp`` (and ``$set.lastUpdated``); metadata: ``sessionId``,
``kind``, ``summary``, ``model`` (never ``projectHash`` or directories, which name paths).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..events import Custom, ProviderReplay, Rollbacked, SessionEvent, ToolCompleted
from ..messages import ContentPart, ImagePart, ThinkingPart
from ..replay import KERNEL_NOTE
from .base import (
    ImportedSession,
    ImportWarning,
    JsonLine,
    JsonObj,
    as_list,
    as_obj,
    as_str,
    epoch_ms,
    make_json_safe,
    read_jsonl,
    unparsed_payload,
)
from .chatlog import SessionBuilder, json_text, text_parts, uint
from .jsondoc import read_json_document

__all__ = ["FORMAT", "VERSION", "looks_like", "looks_like_legacy_file", "read"]

FORMAT = "gemini-cli"
"""``ImportedSession.source_format`` of sessions from this importer."""

VERSION = "1"
"""Importer version recorded with each import; bump when the mapping changes."""

_PREFIX = "gemini_cli"
_PROTOCOL = "gemini.generate_content"
_MESSAGE_TYPES = frozenset({"user", "gemini", "info", "error", "warning"})
_PROBE_BYTES = 64 * 1024


def looks_like(value: Any) -> bool:
    """A JSONL record (or a legacy document) of a Gemini CLI recording: a ``$rewindTo``/``$set`` record, the
    metadata record (``sessionId`` and ``projectHash``), or a message (``id`` and a gemini-cli ``type``
    with ``content``, or ``toolCalls``/``thoughts``)."""
    if not isinstance(value, dict):
        return False
    if isinstance(value.get("$rewindTo"), str) or isinstance(value.get("$set"), dict):
        return True
    if isinstance(value.get("sessionId"), str) and isinstance(value.get("projectHash"), str):
        return True
    return (
        isinstance(value.get("id"), str)
        and value.get("type") == "gemini"
        and ("content" in value or "toolCalls" in value)
        and "timestamp" in value
    )


def looks_like_legacy_file(path: Path) -> bool:
    """Cheap probe for folder imports: a ``*.json`` file whose first 64 KiB name a ``sessionId`` and a
    ``projectHash`` (a legacy Gemini CLI session)."""
    try:
        with path.open("rb") as fh:
            head = fh.read(_PROBE_BYTES)
    except OSError:
        return False
    return b'"sessionId"' in head and b'"projectHash"' in head and b'"messages"' in head


def read(path: Path, warnings: list[ImportWarning]) -> list[ImportedSession]:
    """Read one recording (see the module docstring); a ``.json`` file is a legacy document.

    Raises:
        ImportFormatError: a legacy ``.json`` document that is not valid JSON (names line and column).
    """
    builder = _Builder(path, warnings)
    for item in _records(path, warnings):
        builder.feed(item)
    return [builder.finish()]


def _records(path: Path, warnings: list[ImportWarning]) -> Iterator[JsonLine]:
    if path.suffix.lower() == ".json":
        document = read_json_document(path, warnings)
        yield JsonLine(1, document)
        return
    yield from read_jsonl(path, warnings, keep_unparsed=True)


def _parts(content: Any) -> list[Any]:
    """``content`` as a list of parts (a string is one text part)."""
    if isinstance(content, str):
        return [{"text": content}]
    if isinstance(content, list):
        return content
    if isinstance(content, dict):
        return [content]
    return []


def _text(parts: list[Any]) -> str:
    return "".join(
        p["text"]
        for p in parts
        if isinstance(p, dict) and isinstance(p.get("text"), str) and p.get("thought") is not True
    )


def _images(parts: list[Any]) -> list[ContentPart]:
    images: list[ContentPart] = []
    for part in parts:
        part = as_obj(part)
        inline = as_obj(part.get("inlineData"))
        mime, data = as_str(inline.get("mimeType")), as_str(inline.get("data"))
        if mime and mime.startswith("image/") and data:
            images.append(ImagePart(ref=f"data:{mime};base64,{data}", media_type=mime))
        uri = as_str(as_obj(part.get("fileData")).get("fileUri"))
        if uri and uri.startswith(("http://", "https://")):
            images.append(ImagePart(ref=uri))
    return images


def _response_output(response: Any) -> tuple[str, bool]:
    """A functionResponse's text and whether it reports an error."""
    response = as_obj(response)
    if "output" in response:
        return json_text(response["output"]), False
    if "error" in response:
        return json_text(response["error"]), True
    return json_text(response), False


def _digest(record: JsonObj) -> bytes:
    """sha256 of a message's canonical JSON text (key order ignored): equal messages, equal digests."""
    text = json.dumps(record, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def _function_responses(parts: list[Any]) -> list[JsonObj]:
    return [
        as_obj(p)["functionResponse"] for p in parts if isinstance(as_obj(p).get("functionResponse"), dict)
    ]


class _Builder(SessionBuilder):
    def __init__(self, path: Path, warnings: list[ImportWarning]) -> None:
        super().__init__(path, warnings, _PREFIX)
        self.legacy = path.suffix.lower() == ".json"  # one document, rewritten in place
        self.meta: JsonObj = {}
        self.pending_record: JsonObj | None = None
        self.pending_line = 0
        self.order: list[str] = []  # ids of the conversation's messages, in order
        self.recorded: dict[str, bytes] = {}  # id → sha256 of the message as recorded (bounded memory)
        self.hist_at: dict[str, int] = {}  # id → replay history length before its events
        self.hist = 0
        self.last_called = False
        self.answered: set[str] = set()  # native call ids answered by a tool call's own result
        self.model: str | None = None

    # ── history length (what replay would rebuild) ──

    def emit(self, event: SessionEvent) -> None:
        super().emit(event)
        kind = event.kind
        if kind in ("run_started", "llm_completed"):
            self.hist += 1
        elif isinstance(event, ToolCompleted):
            self.hist += len(event.results)
        elif isinstance(event, Rollbacked):
            self.hist = min(self.hist, event.checkpoint_history_len)
        elif isinstance(event, Custom) and event.custom_kind == KERNEL_NOTE:
            self.hist += 1

    # ── records ──

    def feed(self, item: JsonLine) -> None:
        record = item.value
        # a JSONL record's numbers RFC 8785 cannot carry, kept as their JSON text (a legacy document's
        # were made safe when it was read, read_json_document)
        replaced = make_json_safe(record) if record is not None and not self.legacy else 0
        if replaced:
            self.warn_line(item.line, f"{replaced} number(s) outside RFC 8785's range kept as JSON text")
        if record is None:
            self.record("unparsed_line", unparsed_payload(item))
        elif isinstance(record.get("$rewindTo"), str):
            self.flush()
            self.rewind(record["$rewindTo"], item.line)
        elif isinstance(record.get("id"), str):
            self.on_message(record, item.line)
        elif isinstance(record.get("$set"), dict):
            self.on_set(record["$set"], item.line)
        elif isinstance(record.get("sessionId"), str) and isinstance(record.get("projectHash"), str):
            self.flush()
            self.on_meta(record, item.line)
        else:
            self.record("record", {"line": item.line, **record})

    def on_meta(self, record: JsonObj, line: int) -> None:
        self.at(epoch_ms(record.get("startTime")))
        self.meta.update({k: v for k, v in record.items() if k != "messages"})
        messages = record.get("messages")
        for message in messages if isinstance(messages, list) else ():
            if isinstance(message, dict) and isinstance(message.get("id"), str):
                self.on_message(message, line)
            else:
                self.record("record", {"line": line, "message": message})
        if not self.legacy:  # a legacy document's last message may be rewritten in place: finish() ends it
            self.flush()

    def on_set(self, update: JsonObj, line: int) -> None:
        self.at(epoch_ms(update.get("lastUpdated")))
        messages = update.get("messages")
        if isinstance(messages, list):
            self.flush()
            self.replace_history(
                [m for m in messages if isinstance(m, dict) and isinstance(m.get("id"), str)], line
            )
        rest = {k: v for k, v in update.items() if k not in ("messages", "lastUpdated", "directories")}
        self.meta.update(rest)
        if rest:
            self.record("set", {"line": line, **rest})

    def on_message(self, record: JsonObj, line: int) -> None:
        message_id = record["id"]
        if self.pending_record is not None and self.pending_record["id"] == message_id:
            self.pending_record, self.pending_line = record, line  # rewritten in place (rule: last wins)
            return
        if message_id in self.recorded:
            if _digest(record) != self.recorded[message_id]:
                self.warn_line(
                    line, f"message {message_id!r} rewritten after it was recorded: kept as written"
                )
                self.record("message_update", {"line": line, **record})
            return
        self.flush()
        self.pending_record, self.pending_line = record, line
        self.order.append(message_id)

    # ── rewinds and rewrites ──

    def rewind(self, message_id: str, line: int) -> None:
        """Rule 4."""
        if message_id in self.order:
            cut = self.order.index(message_id)
            length = self.hist_at.get(message_id, 0)
        else:
            cut, length = 0, 0
        self.truncate(cut, length, f"$rewindTo at line {line}")

    def truncate(self, cut: int, length: int, why: str) -> None:
        removed = self.order[cut:]
        if not removed and self.hist <= length:
            return
        self.end_run("rewound")
        self.emit(Rollbacked(turn=self.turn, checkpoint_history_len=length))
        for message_id in removed:
            self.recorded.pop(message_id, None)
            self.hist_at.pop(message_id, None)
        del self.order[cut:]
        self.last_called = False
        self.record("rewind", {"reason": why, "removed_messages": removed})

    def replace_history(self, messages: list[JsonObj], line: int) -> None:
        """Rule 5."""
        keep = 0
        while (
            keep < len(messages)
            and keep < len(self.order)
            and messages[keep]["id"] == self.order[keep]
            and _digest(messages[keep]) == self.recorded.get(self.order[keep])
        ):
            keep += 1
        if keep < len(self.order):
            self.truncate(keep, self.hist_at.get(self.order[keep], 0), f"$set.messages at line {line}")
        for message in messages[keep:]:
            self.on_message(message, line)
        self.flush()

    # ── recording a message ──

    def flush(self) -> None:
        record, self.pending_record = self.pending_record, None
        if record is None:
            return
        message_id = record["id"]
        self.at(epoch_ms(record.get("timestamp")))
        self.hist_at[message_id] = self.hist
        self.recorded[message_id] = _digest(record)
        kind = record.get("type")
        if kind == "user":
            self.on_user(record)
        elif kind == "gemini":
            self.on_gemini(record)
        elif as_str(kind) in _MESSAGE_TYPES:
            self.record(str(kind), record)
        else:
            self.record("record", {"line": self.pending_line, **record})

    def on_user(self, record: JsonObj) -> None:
        parts = _parts(record.get("content"))
        responses = _function_responses(parts)
        if not responses:
            self.start_run(f"{self.key()}:{record['id']}", _text(parts), attachments=_images(parts))
            self.last_called = False
            rest = {k: v for k, v in record.items() if k not in ("id", "timestamp", "type", "content")}
            unmapped = [p for p in parts if not isinstance(p, dict) or not ({"text", "inlineData"} & set(p))]
            if rest or unmapped:
                self.record("user", record)
            return
        repeated = False
        open_ids = {c.native_id for c in self.calls.pending()}
        for response in responses:
            native = as_str(response.get("id")) or ""
            if native in open_ids:
                output, failed = _response_output(response.get("response"))
                self.result(native, output, is_error=failed, where=f"message {record['id']}")
            else:
                repeated = True
        if repeated or len(responses) != len(parts):
            self.record("function_response", record)

    def on_gemini(self, record: JsonObj) -> None:
        parts = _parts(record.get("content"))
        thinking: list[ContentPart] = []
        for part in parts:
            part = as_obj(part)
            if part.get("thought") is True and isinstance(part.get("text"), str):
                thinking.append(
                    ThinkingPart(thinking=part["text"], signature=as_str(part.get("thoughtSignature")))
                )
        for thought in as_list(record.get("thoughts")):
            thought = as_obj(thought)
            subject, description = (
                as_str(thought.get("subject")) or "",
                as_str(thought.get("description")) or "",
            )
            if subject or description:
                text = f"{subject}: {description}" if subject and description else subject or description
                thinking.append(ThinkingPart(thinking=text))
        tool_calls = [as_obj(c) for c in as_list(record.get("toolCalls"))]
        calls = [
            (as_str(c.get("id")) or "", as_str(c.get("name")) or "", json_text(c.get("args", {})))
            for c in tool_calls
        ]
        self.model = as_str(record.get("model")) or self.model
        native_parts = record.get("content") if isinstance(record.get("content"), list) else None
        replay = ProviderReplay(
            protocol=_PROTOCOL,
            provider="google",
            model=as_str(record.get("model")),
            native_blocks=native_parts,
        )
        tokens = as_obj(record.get("tokens"))
        total = uint(tokens.get("total")) or sum(
            uint(tokens.get(k)) for k in ("input", "output", "thoughts", "tool")
        )
        if self.run is None:
            self.start_run(f"{self.key()}:{record['id']}", "")
        content = text_parts(_text(parts), thinking, _images(parts))
        where = f"message {record['id']}"
        self.complete(content, calls, where=where, replay=replay, tokens=total, line=self.pending_line)
        self.last_called = bool(calls)
        for call in tool_calls:
            self.call_result(call, record["id"])
        rest = {k: v for k, v in record.items() if k not in ("content", "type", "toolCalls")}
        extras = [{k: v for k, v in c.items() if k not in ("args", "result")} for c in tool_calls]
        self.record("message", {**rest, **({"toolCalls": extras} if extras else {})})

    def call_result(self, call: JsonObj, message_id: str) -> None:
        """Rule 3: the call's own result, when it has one."""
        result = call.get("result")
        if result is None:
            return
        native = as_str(call.get("id")) or ""
        responses = _function_responses(_parts(result))
        if responses:
            outputs = [_response_output(r.get("response")) for r in responses]
            output = "\n".join(text for text, _ in outputs)
            failed = any(error for _, error in outputs)
        else:
            output, failed = json_text(result), False
        failed = failed or call.get("status") in ("error", "cancelled")
        self.result(native, output, is_error=failed, where=f"message {message_id}")

    # ── the end ──

    def key(self) -> str:
        native = as_str(self.meta.get("sessionId"))
        if native is None:
            native = self.path.name.removesuffix(".jsonl").removesuffix(".json")
        return f"{FORMAT}:{native}"

    def finish(self) -> ImportedSession:
        # Every event so far follows from the records read (a record only ever flushes the message before
        # it); the last message (gemini-cli may still rewrite it) and the end of the run are not settled.
        settled = len(self.events)
        self.flush()
        if self.run is None and self.goal is None:  # nothing was ever asked: one empty run holds the records
            self.start_run(f"{self.key()}:end", "")
        done = not self.pending() and not self.last_called
        self.end_run("completed" if done else "incomplete")
        parent = None
        if self.meta.get("kind") == "subagent" and self.path.parent.name != "chats":
            parent = f"{FORMAT}:{self.path.parent.name}"
        metadata = {
            "parent_session": parent,
            "sessionId": as_str(self.meta.get("sessionId")),
            "kind": as_str(self.meta.get("kind")),
            "summary": as_str(self.meta.get("summary")),
            "model": self.model,
            "startTime": as_str(self.meta.get("startTime")),
            "lastUpdated": as_str(self.meta.get("lastUpdated")),
        }
        return self.session(self.key(), FORMAT, metadata=metadata, settled=settled)
