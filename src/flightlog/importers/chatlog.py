"""What the chat-log importers share (Gemini CLI, mini-swe-agent, OpenHands V1, OpenAI Agents ``RunState``,
aider): a session builder that stamps each event with the source's own time and keeps the run
bookkeeping (turns, tokens, pending calls), and readers of OpenAI chat-completion messages.

:class:`SessionBuilder` extends :class:`~flightlog.importers.jsondoc.DocumentBuilder` (events in order,
the :class:`~flightlog.importers.jsondoc.CallBook` pairing calls with results exactly once, ``Custom``
records of what is not mapped). Each event is stamped with the latest source time seen before it
(:meth:`SessionBuilder.at`), so ``import_file`` records rows at the transcript's times; a format with no
times leaves every stamp None and the session's times absent (never the import time).

Run rules every chat-log importer follows (each module's docstring says where its runs start and end):

* ``RunStarted`` closes the open run first (``RunTerminal(reason="completed")``: the user spoke again).
* ``LlmCompleted(turn=n)``: ``n`` counts completions in the session, from 1; a completion with calls is
  followed by ``ToolRequested(turn=n, calls)``.
* A result pairs with the earliest unanswered call of its native id; a result that answers no call is
  still recorded (``ToolCompleted`` at the current turn) and followed by ``Custom("<prefix>.orphan_tool_result")``.
* At the end of a run, calls still unanswered get ``Custom("<prefix>.pending_tool_call")`` before
  ``RunTerminal(reason, turns_used=<completions of the run>, total_tokens=<the run's tokens>)``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..events import (
    LlmCompleted,
    ProviderReplay,
    RunStarted,
    RunTerminal,
    SessionEvent,
    ToolCompleted,
    ToolRequested,
)
from ..messages import ContentPart, ImagePart, Message, TextPart, ThinkingPart, ToolCall, ToolResult
from .base import (
    IMAGE_PREFIXES,
    MAX_SAFE_INT,
    TASK_CHARS,
    ImportedSession,
    ImportWarning,
    JsonObj,
    as_obj,
    as_str,
    chat_thinking_parts,
    compact_json,
    json_int,
)
from .jsondoc import CallBook, DocumentBuilder

__all__ = [
    "SessionBuilder",
    "chat_content",
    "chat_tool_calls",
    "json_text",
    "openai_usage_tokens",
    "text_parts",
    "thinking_parts",
    "uint",
]


def uint(value: Any) -> int:
    """``value`` when it is a non-negative JSON integer (capped at 2**53-1), else 0."""
    number = json_int(value)
    return min(number, MAX_SAFE_INT) if number is not None and number >= 0 else 0


def openai_usage_tokens(usage: Any) -> int:
    """Tokens an OpenAI chat-completion ``usage`` object reports: ``total_tokens``, else ``prompt_tokens +
    completion_tokens`` (0 when absent). OpenAI counts cached prompt tokens inside ``prompt_tokens``
    (``prompt_tokens_details.cached_tokens`` is a part of it), so nothing is added for the cache."""
    usage = as_obj(usage)
    total = uint(usage.get("total_tokens"))
    return total or min(uint(usage.get("prompt_tokens")) + uint(usage.get("completion_tokens")), MAX_SAFE_INT)


def chat_content(content: Any) -> tuple[str, list[ContentPart]]:
    """Text (text parts joined by newlines) and image parts of an OpenAI chat ``content`` (a string or a
    list of ``{type: text, text}`` / ``{type: image_url, image_url: {url} | url}`` parts). An image whose
    ref is not ``http(s):``/``data:`` is not an ``ImagePart`` (the caller keeps the message whole)."""
    if isinstance(content, str):
        return content, []
    texts: list[str] = []
    images: list[ContentPart] = []
    for part in content if isinstance(content, list) else ():
        part = as_obj(part)
        if part.get("type") in ("text", "input_text", "output_text") and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif part.get("type") in ("image_url", "input_image"):
            url = part.get("image_url")
            ref = as_str(as_obj(url).get("url")) or as_str(url)
            if ref is not None and ref.startswith(IMAGE_PREFIXES):
                images.append(ImagePart(ref=ref))
    return "\n".join(texts), images


def chat_tool_calls(message: JsonObj) -> list[tuple[str, str, str]]:
    """``(native id, function name, arguments text)`` of each OpenAI chat ``tool_calls`` entry, in order
    (arguments given as an object are written as compact JSON)."""
    calls: list[tuple[str, str, str]] = []
    raw = message.get("tool_calls")
    for item in raw if isinstance(raw, list) else ():
        item = as_obj(item)
        function = as_obj(item.get("function"))
        calls.append(
            (
                as_str(item.get("id")) or "",
                as_str(function.get("name")) or "",
                compact_json(function.get("arguments")),
            )
        )
    return calls


def thinking_parts(message: JsonObj) -> list[ContentPart]:
    """A chat message's ``thinking_blocks`` (signed, byte-exact), else its ``reasoning_content`` text."""
    parts = chat_thinking_parts(message)
    reasoning = as_str(message.get("reasoning_content"))
    if not parts and reasoning:
        parts.append(ThinkingPart(thinking=reasoning))
    return parts


@dataclass
class _Run:
    run_id: str
    turns: int = 0
    tokens: int = 0


class SessionBuilder(DocumentBuilder):
    """Builds one session of a chat log (see the module docstring for the run rules).

    Args:
        path: The source file (named in warnings).
        warnings: Where warnings go.
        prefix: The ``Custom`` kind prefix of this format (``gemini_cli``, ``mini_swe_agent``...).
    """

    def __init__(self, path: Path, warnings: list[ImportWarning], prefix: str) -> None:
        super().__init__(path, warnings)
        self.calls = CallBook(lambda reason, line: self.warn_line(line, reason))
        self.prefix = prefix
        self.times: list[int | None] = []
        self.now: int | None = None
        self.turn = 0
        self.run: _Run | None = None
        self.goal: str | None = None

    # ── times and records ──

    def at(self, ms: int | None) -> None:
        """Events emitted from now on carry ``ms`` (epoch ms; None leaves the latest time)."""
        if ms is not None:
            self.now = ms

    def emit(self, event: SessionEvent) -> None:
        """Append one event, stamped with the latest source time."""
        self.events.append(event)
        self.times.append(self.now)

    def warn_line(self, line: int | None, reason: str) -> None:
        """A warning naming the 1-based source line (None: the whole file)."""
        self.warnings.append(ImportWarning(self.path.name, line, reason))

    def record(self, kind: str, payload: Any) -> None:
        """``Custom("<prefix>.<kind>", payload)``: something kept as the source wrote it."""
        self.keep(f"{self.prefix}.{kind}", payload)

    # ── runs ──

    def start_run(
        self,
        run_id: str,
        goal: str,
        *,
        system: str | None = None,
        attachments: Iterable[ContentPart] = (),
    ) -> None:
        """Close the open run (``completed``) and emit ``RunStarted``."""
        if self.run is not None:
            self.end_run("completed")
        if self.goal is None:
            self.goal = goal
        self.run = _Run(run_id)
        self.emit(RunStarted(run_id=run_id, goal=goal, system_prompt=system, attachments=list(attachments)))

    def ensure_run(self, run_id: str, goal: str = "", *, system: str | None = None) -> None:
        """Start a run when none is open (a model turn before any prompt)."""
        if self.run is None:
            self.start_run(run_id, goal, system=system)

    def complete(
        self,
        content: list[ContentPart],
        calls: list[tuple[str, str, str]],
        *,
        where: str,
        replay: ProviderReplay | None = None,
        tokens: int = 0,
        line: int | None = None,
    ) -> int:
        """One model completion: ``LlmCompleted`` (+ ``ToolRequested``); returns its turn.

        Args:
            content: The assistant message's parts.
            calls: ``(native id, name, arguments text)`` per call; each gets a session-unique id.
            where: Where in the source the completion is (for warnings and pending records).
            replay: The provider payload to keep byte-exact.
            tokens: Tokens the completion processed (added to the run's ``total_tokens``).
            line: 1-based source line, for warnings.
        """
        if self.run is None:
            self.start_run(f"{self.prefix}:{where}", "")
        assert self.run is not None
        self.turn += 1
        tool_calls = [
            ToolCall(id=self.calls.request(native, name, self.turn, where, line), name=name, arguments=args)
            for native, name, args in calls
        ]
        message = Message(role="assistant", content=content, tool_calls=tool_calls)
        self.emit(LlmCompleted(turn=self.turn, message=message, provider_replay=replay))
        if tool_calls:
            self.emit(ToolRequested(turn=self.turn, calls=tool_calls))
        self.run.turns += 1
        self.run.tokens = min(self.run.tokens + tokens, MAX_SAFE_INT)
        return self.turn

    def add_tokens(self, tokens: int) -> None:
        """Tokens the source reports for the open run outside a completion."""
        if self.run is not None:
            self.run.tokens = min(self.run.tokens + tokens, MAX_SAFE_INT)

    def result(self, native_id: str, output: str, *, is_error: bool = False, where: str) -> str:
        """One tool result paired by native id (an orphan is still recorded, then marked); returns the
        session-unique call id it was recorded under."""
        call = self.calls.answer(native_id)
        if call is not None:
            result = ToolResult(call_id=call.call_id, output=output, is_error=is_error)
            self.emit(ToolCompleted(turn=call.turn, results=[result]))
            return call.call_id
        call_id = self.calls.orphan_id(native_id)
        result = ToolResult(call_id=call_id, output=output, is_error=is_error)
        self.emit(ToolCompleted(turn=self.turn, results=[result]))
        self.record("orphan_tool_result", {"call_id": call_id, "native_call_id": native_id, "where": where})
        return call_id

    def end_run(self, reason: str) -> None:
        """Close the open run: pending calls kept, then ``RunTerminal``."""
        if self.run is None:
            return
        self.keep_pending(f"{self.prefix}.pending_tool_call", "where")
        run, self.run = self.run, None
        self.emit(RunTerminal(reason=reason, turns_used=run.turns, total_tokens=run.tokens))

    def pending(self) -> bool:
        """Whether calls are still unanswered."""
        return bool(self.calls.pending())

    # ── the session ──

    def session(
        self,
        key: str,
        source_format: str,
        *,
        task: str | None = None,
        metadata: JsonObj | None = None,
        parent_key: str | None = None,
        settled: int | None = None,
    ) -> ImportedSession:
        """The built session: times from the stamps (absent when the source gave none).

        Args:
            settled: How many leading events depend only on the records read so far
                (:attr:`~flightlog.importers.base.ImportedSession.settled`; None: the source is a finished
                whole).
        """
        known = [t for t in self.times if t is not None]
        stamped = bool(known)
        title = task if task is not None else self.goal or ""
        return ImportedSession(
            key=key,
            task=title[:TASK_CHARS],
            source_format=source_format,
            events=self.events,
            parent_key=parent_key,
            metadata={k: v for k, v in (metadata or {}).items() if v is not None},
            started_at_ms=min(known) if stamped else None,
            ended_at_ms=max(known) if stamped else None,
            event_times_ms=self.times if stamped else [],
            settled=settled,
        )


def text_parts(
    text: str, thinking: Iterable[ContentPart] = (), images: Iterable[ContentPart] = ()
) -> list[ContentPart]:
    """Thinking parts, then the text (when not empty), then images: an assistant message's content."""
    parts: list[ContentPart] = [*thinking]
    if text:
        parts.append(TextPart(text=text))
    parts.extend(images)
    return parts


def json_text(value: Any) -> str:
    """A value as JSON text for a tool output (a string stays itself)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=False)
