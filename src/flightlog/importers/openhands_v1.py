"""OpenHands V1 conversation importer (the OpenHands software-agent-sdk layout): one conversation folder →
one :class:`ImportedSession`.

Source shape (software-agent-sdk ``LocalConversation`` persistence): a folder holding ``base_state.json``
(``{id, agent: {llm: {model...}, tools...}, execution_status, stats: {usage_to_metrics: {<usage id>:
{token_usages: [{response_id, prompt_tokens, completion_tokens, cache_read_tokens, cache_write_tokens,
reasoning_tokens}], ...}}}, ...}``) and ``events/event-<5-digit index>-<event id>.json``, one JSON object
per event, ``kind``-tagged: ``SystemPromptEvent`` (``system_prompt.text``, ``tools``), ``MessageEvent``
(``source`` user/agent, ``llm_message: {role, content: [{type: text|image, ...}], thinking_blocks,
reasoning_content}``, ``llm_response_id``), ``ActionEvent`` (``thought``, ``reasoning_content``,
``thinking_blocks``, ``action``, ``tool_name``, ``tool_call_id``, ``tool_call: {id, name, arguments}``,
``llm_response_id``), ``ObservationEvent`` (``tool_call_id``, ``observation: {content, is_error...}``),
``UserRejectObservation`` (``rejection_reason``), ``AgentErrorEvent`` (``tool_call_id``, ``error``),
``Condensation`` (``forgotten_event_ids``, ``summary``), ``ConversationStateUpdateEvent``, ``PauseEvent``...
The path imported is the folder or its ``base_state.json``.

Reading: ``base_state.json`` and each event file are decoded whole (a BOM, invalid UTF-8 and lone
surrogates kept as text and warned). A broken ``base_state.json`` refuses the conversation
(:class:`~flightlog.errors.ImportFormatError` naming it); a broken event file (a writer killed mid-write,
trailing bytes) is kept byte-exact as ``Custom("openhands_v1.unparsed_event", {file, text|base64})``,
warned with its name, and the import goes on. Event files are read in index order.

Mapping rules:

1. ``SystemPromptEvent`` → the next run's ``RunStarted.system_prompt``; its ``tools`` and other fields are
   kept as ``Custom("openhands_v1.system_prompt", <the event without the prompt text>)``.
2. A ``user`` ``MessageEvent`` starts a run: ``RunStarted(run_id="<key>:<event id>", goal=<text parts>,
   attachments=<image URLs>)`` (the previous run ends ``completed``).
3. ``ActionEvent``s sharing an ``llm_response_id`` are ONE ``LlmCompleted``: thinking (``thinking_blocks``
   byte-exact, else ``reasoning_content``), the ``thought`` text, and a ``ToolCall(id=tool_call.id, name,
   arguments)`` per action, with ``ProviderReplay(protocol="openai.chat", model, tool_calls=<the
   tool_call objects verbatim>, reasoning_content)``; an ``agent`` ``MessageEvent`` is a text
   ``LlmCompleted``. Each completion's token usage (``stats`` entry with its ``response_id``) adds
   ``prompt_tokens + completion_tokens`` to the run (LiteLLM counts cache reads inside
   ``prompt_tokens``) and is kept as ``Custom("openhands_v1.token_usage", <the entry>)`` (cache read and
   write, reasoning tokens).
4. ``ObservationEvent`` → ``ToolCompleted`` paired by ``tool_call_id`` (``observation.content`` text,
   ``is_error``); ``AgentErrorEvent`` → an error result; ``UserRejectObservation`` → ``ToolDenied(reason)``
   then the result the model reads (``Action rejected: <reason>``, an error).
5. ``Condensation`` → ``Compressed(archived_seq_range=<recorded seqs of the forgotten events>,
   action="condensation", summary)``.
6. The end: ``execution_status`` ``waiting_for_confirmation`` → ``Suspended(reason="awaiting
   confirmation", pending_calls)`` and no ``RunTerminal``; ``finished`` → ``completed``; ``error``,
   ``stuck``, ``paused`` as named; else ``incomplete``. Everything else (state updates, pauses, unknown
   kinds) and the fields the mapping does not use are kept as ``Custom("openhands_v1.<kind>")``;
   ``base_state.json`` is kept as ``Custom("openhands_v1.base_state")`` without ``agent`` (the LLM and tool
   configuration) and without ``persistence_dir``/``workspace`` (paths of the user's machine).

Growth: the SDK appends an event file per event and a finished conversation takes new messages again
(``execution_status`` goes back to running), so a conversation never ends by itself (only ``import
--seal`` ends it). ``settled`` is the count of events emitted before the end: the open completion, the
``base_state`` record and the run's end wait for a later import, and so does everything from the first
completion whose token usage ``base_state.json`` does not hold yet (the SDK saves it after the event
files; the usage landing later would add its ``token_usage`` record). In an incremental import
(:func:`~flightlog.importers.base.tail_waits`) a last event file that does not parse is left for a later
import (the SDK may be writing it). The import's dedup identity and ``flightlog watch``'s change check
cover ``events/`` (:func:`companion_files`), so an event file added with ``base_state.json`` unchanged is
seen.

Session: ``key = "openhands-v1:<base_state id>"``. OpenHands writes naive timestamps (no timezone): the
session's times stay unknown rather than guessed; the first and last timestamp text go to metadata.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from ..errors import ImportFormatError
from ..events import Compressed, ProviderReplay, Suspended, ToolDenied
from ..messages import ContentPart
from .base import ImportedSession, ImportWarning, JsonObj, as_list, as_obj, as_str, epoch_ms, tail_waits
from .chatlog import SessionBuilder, chat_content, json_text, text_parts, thinking_parts, uint
from .jsondoc import read_json_document

__all__ = ["FORMAT", "VERSION", "companion_files", "conversation_folder", "looks_like", "read"]

FORMAT = "openhands-v1"
"""``ImportedSession.source_format`` of sessions from this importer."""

VERSION = "1"
"""Importer version recorded with each import; bump when the mapping changes."""

_PREFIX = "openhands_v1"
_SEQ_OFFSET = 1
"""``import_file`` writes one ``import_source`` header at seq 0."""
_LOCAL_STATE = frozenset({"agent", "persistence_dir", "workspace"})
"""``base_state.json`` keys not kept: the agent configuration (its LLM settings, masked key) and where the
conversation lived on disk (paths name the user's machine, as Claude Code's ``cwd``, which is not kept)."""
_STATUS = {"finished": "completed", "error": "error", "stuck": "stuck", "paused": "paused"}


def looks_like(value: Any) -> bool:
    """A decoded ``base_state.json``: an object with ``id``, an ``agent`` object and an
    ``execution_status``."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("id"), str)
        and isinstance(value.get("agent"), dict)
        and "execution_status" in value
    )


def conversation_folder(path: Path) -> Path | None:
    """The conversation folder ``path`` names (the folder itself or its ``base_state.json``), when it holds
    a ``base_state.json`` and an ``events`` folder; else None."""
    folder = path if path.is_dir() else path.parent
    if path.is_file() and path.name != "base_state.json":
        return None
    if (folder / "base_state.json").is_file() and (folder / "events").is_dir():
        return folder
    return None


def companion_files(path: Path) -> list[Path]:
    """The files :func:`read` reads besides ``base_state.json``: the conversation's ``events/event-*.json``
    in index order (empty when ``path`` is no conversation). An import of the conversation is up to date
    only when these are unchanged too: the SDK appends an event file per event and rewrites
    ``base_state.json`` only on some state changes."""
    folder = conversation_folder(path)
    return _event_files(folder / "events") if folder is not None else []


def read(path: Path, warnings: list[ImportWarning]) -> list[ImportedSession]:
    """Read one conversation (see the module docstring).

    Raises:
        ImportFormatError: ``base_state.json`` is not valid JSON or not a conversation state.
    """
    folder = path if path.is_dir() else path.parent
    state = read_json_document(folder / "base_state.json", warnings)
    if not looks_like(state):
        raise ImportFormatError(path=str(path), reason="not an OpenHands V1 conversation: no base state")
    builder = _Builder(path, warnings, state)
    files = _event_files(folder / "events")
    waits = tail_waits()
    for number, file in enumerate(files, start=1):
        builder.feed_file(file, last_waits=waits and number == len(files))
    return [builder.finish()]


def _event_files(events: Path) -> list[Path]:
    """``event-*.json`` files in index order (the 5-digit index after ``event-``, then the name)."""
    files = [p for p in events.glob("event-*.json") if p.is_file()] if events.is_dir() else []

    def order(p: Path) -> tuple[int, str]:
        index = p.name.split("-")[1] if p.name.count("-") >= 2 else ""
        return (int(index) if index.isdigit() else 1 << 62, p.name)

    return sorted(files, key=order)


def _content_text(content: Any) -> str:
    """Text of an SDK content list (``[{type: text, text}...]``) or a string."""
    return chat_content(content)[0]


class _Builder(SessionBuilder):
    def __init__(self, path: Path, warnings: list[ImportWarning], state: JsonObj) -> None:
        super().__init__(path, warnings, _PREFIX)
        self.state = state
        self.key = f"{FORMAT}:{state['id']}"
        llm = as_obj(as_obj(state.get("agent")).get("llm"))
        self.model = as_str(llm.get("model"))
        self.system: str | None = None
        self.response: str | None = None  # llm_response_id of the open completion
        self.actions: list[JsonObj] = []
        self.usage = self.token_usages()
        self.positions: dict[str, list[int]] = {}  # event id → indexes of the events it produced
        self.first_stamp: str | None = None
        self.last_stamp: str | None = None
        self.unsettled_at: int | None = None  # first event a later base_state.json may change

    def token_usages(self) -> dict[str, JsonObj]:
        found: dict[str, JsonObj] = {}
        metrics = as_obj(as_obj(self.state.get("stats")).get("usage_to_metrics"))
        for entry in metrics.values():
            for usage in as_list(as_obj(entry).get("token_usages")):
                response = as_str(as_obj(usage).get("response_id"))
                if response:
                    found.setdefault(response, usage)
        return found

    # ── files ──

    def feed_file(self, file: Path, *, last_waits: bool = False) -> None:
        scratch: list[ImportWarning] = []
        try:
            event = read_json_document(file, scratch)
        except ImportFormatError as exc:
            if last_waits:  # the SDK may still be writing it: a later import reads it whole
                self.warnings.append(
                    ImportWarning(file.name, exc.line, "unfinished last event file left for later")
                )
                return
            self.flush()
            raw = file.read_bytes()
            try:
                payload: JsonObj = {"file": file.name, "text": raw.decode("utf-8")}
            except UnicodeDecodeError:
                payload = {"file": file.name, "base64": base64.b64encode(raw).decode("ascii")}
            self.warnings.append(ImportWarning(file.name, exc.line, f"kept byte-exact: {exc.reason}"))
            self.record("unparsed_event", payload)
            return
        self.warnings.extend(scratch)
        if not isinstance(event, dict):
            self.flush()
            self.record("record", {"file": file.name, "event": event})
            return
        self.feed(event)

    def feed(self, event: JsonObj) -> None:
        stamp = as_str(event.get("timestamp"))
        if stamp is not None:
            self.first_stamp = self.first_stamp or stamp
            self.last_stamp = stamp
            self.at(epoch_ms(stamp))
        kind = as_str(event.get("kind")) or "record"
        if kind != "ActionEvent" or event.get("llm_response_id") != self.response:
            self.flush()
        start = len(self.events)
        handler = _HANDLERS.get(kind)
        if handler is not None:
            handler(self, event)
        else:
            self.record(kind if kind.isidentifier() else "record", event)
        event_id = as_str(event.get("id"))
        if event_id is not None:
            self.positions.setdefault(event_id, []).extend(range(start, len(self.events)))

    # ── kinds ──

    def on_system(self, event: JsonObj) -> None:
        prompt = as_obj(event.get("system_prompt"))
        self.system = as_str(prompt.get("text"))
        self.record("system_prompt", {k: v for k, v in event.items() if k != "system_prompt"})

    def on_message(self, event: JsonObj) -> None:
        message = as_obj(event.get("llm_message"))
        text, images = chat_content(message.get("content"))
        extended = _content_text(event.get("extended_content"))
        text = f"{text}\n{extended}" if extended else text  # the SDK appends it to the message it sends
        event_id = as_str(event.get("id")) or str(len(self.events))
        if event.get("source") == "user" and message.get("role", "user") == "user":
            self.start_run(f"{self.key}:{event_id}", text, system=self.system, attachments=images)
        elif message.get("role") == "assistant":
            response = as_str(event.get("llm_response_id"))
            tokens = self.tokens_of(response)
            replay = None
            if message.get("thinking_blocks") or message.get("reasoning_content"):
                replay = ProviderReplay(protocol="openai.chat", model=self.model, native_message=message)
            self.complete(
                text_parts(text, thinking_parts(message), images),
                [],
                where=event_id,
                replay=replay,
                tokens=tokens,
            )
            self.keep_usage(response)
        else:
            self.record("MessageEvent", event)
            return
        self.keep_rest(event, {"id", "timestamp", "source", "llm_message", "kind", "llm_response_id"})

    def on_action(self, event: JsonObj) -> None:
        self.response = as_str(event.get("llm_response_id"))
        self.actions.append(event)

    def flush(self) -> None:
        """Rule 3: the gathered actions of one response as one completion."""
        if not self.actions:
            return
        actions, self.actions = self.actions, []
        response, self.response = self.response, None
        first = actions[0]
        calls: list[tuple[str, str, str]] = []
        raw_calls: list[Any] = []
        for action in actions:
            call = as_obj(action.get("tool_call"))
            native = as_str(call.get("id")) or as_str(action.get("tool_call_id")) or ""
            name = as_str(call.get("name")) or as_str(action.get("tool_name")) or ""
            arguments = call.get("arguments")
            calls.append((native, name, arguments if isinstance(arguments, str) else json_text(arguments)))
            raw_calls.append(action.get("tool_call"))
        thinking: list[ContentPart] = thinking_parts(first)
        text = "\n".join(_content_text(a.get("thought")) for a in actions if a.get("thought"))
        replay = ProviderReplay(
            protocol="openai.chat",
            model=self.model,
            tool_calls=raw_calls,
            reasoning_content=as_str(first.get("reasoning_content")),
        )
        where = as_str(first.get("id")) or "action"
        self.complete(
            text_parts(text, thinking), calls, where=where, replay=replay, tokens=self.tokens_of(response)
        )
        self.keep_usage(response)
        for action in actions:
            rest = {k: v for k, v in action.items() if k not in ("thought", "thinking_blocks", "kind")}
            self.record("ActionEvent", rest)

    def tokens_of(self, response: str | None) -> int:
        if response and response not in self.usage and self.unsettled_at is None:
            # base_state.json lags the event files: this completion's usage may land there later, which
            # would add its token_usage record; what follows is not settled until it does
            self.unsettled_at = len(self.events)
        usage = self.usage.get(response or "")
        if usage is None:
            return 0
        return uint(usage.get("prompt_tokens")) + uint(usage.get("completion_tokens"))

    def keep_usage(self, response: str | None) -> None:
        usage = self.usage.get(response or "")
        if usage is not None:
            self.record("token_usage", usage)

    def on_observation(self, event: JsonObj) -> None:
        observation = as_obj(event.get("observation"))
        text = _content_text(observation.get("content"))
        extended = _content_text(event.get("extended_content"))
        output = f"{text}\n{extended}" if extended else text
        failed = observation.get("is_error") is True
        self.result(
            as_str(event.get("tool_call_id")) or "", output, is_error=failed, where=str(event.get("id"))
        )
        self.record(
            "ObservationEvent",
            {k: v for k, v in event.items() if k != "observation"}
            | {"observation": {k: v for k, v in observation.items() if k != "content"}},
        )

    def on_error(self, event: JsonObj) -> None:
        error = as_str(event.get("error")) or ""
        self.result(as_str(event.get("tool_call_id")) or "", error, is_error=True, where=str(event.get("id")))
        self.keep_rest(event, {"error"})

    def on_reject(self, event: JsonObj) -> None:
        native = as_str(event.get("tool_call_id")) or ""
        reason = as_str(event.get("rejection_reason")) or "User rejected the action"
        open_calls = {c.native_id: c for c in self.calls.pending()}
        call = open_calls.get(native)
        if call is not None:
            tool = as_str(event.get("tool_name")) or call.name
            self.emit(ToolDenied(turn=call.turn, call_id=call.call_id, tool_name=tool, reason=reason))
        self.result(native, f"Action rejected: {reason}", is_error=True, where=str(event.get("id")))
        self.keep_rest(event, set())

    def on_condensation(self, event: JsonObj) -> None:
        forgotten = event.get("forgotten_event_ids")
        indexes = [i for e in forgotten or [] if isinstance(e, str) for i in self.positions.get(e, [])]
        if not indexes:
            self.warn_line(None, f"condensation {event.get('id')} forgets no recorded event: kept only")
        else:
            span = (min(indexes) + _SEQ_OFFSET, max(indexes) + _SEQ_OFFSET)
            summary = as_str(event.get("summary"))
            self.emit(
                Compressed(turn=self.turn, archived_seq_range=span, action="condensation", summary=summary)
            )
        self.record("Condensation", event)

    def keep_rest(self, event: JsonObj, used: set[str]) -> None:
        self.record(as_str(event.get("kind")) or "record", {k: v for k, v in event.items() if k not in used})

    # ── the end ──

    def finish(self) -> ImportedSession:
        # What the end adds below (the open completion, the base state, the run's end) is not settled.
        settled = len(self.events) if self.unsettled_at is None else self.unsettled_at
        self.flush()
        status = as_str(self.state.get("execution_status"))
        self.record("base_state", {k: v for k, v in self.state.items() if k not in _LOCAL_STATE})
        if self.run is None:
            self.start_run(f"{self.key}:end", "", system=self.system)
        if status == "waiting_for_confirmation":
            pending = [c.call_id for c in self.calls.pending()]
            self.emit(Suspended(turn=self.turn, reason="awaiting confirmation", pending_calls=pending))
        else:
            self.end_run(_STATUS.get(status or "", "incomplete"))
        metadata = {
            "conversation_id": self.state["id"],
            "model": self.model,
            "execution_status": status,
            "first_timestamp": self.first_stamp,
            "last_timestamp": self.last_stamp,
        }
        return self.session(self.key, FORMAT, metadata=metadata, settled=settled)


_HANDLERS = {
    "SystemPromptEvent": _Builder.on_system,
    "MessageEvent": _Builder.on_message,
    "ActionEvent": _Builder.on_action,
    "ObservationEvent": _Builder.on_observation,
    "AgentErrorEvent": _Builder.on_error,
    "UserRejectObservation": _Builder.on_reject,
    "Condensation": _Builder.on_condensation,
}
