"""OpenHands trajectory importer: one trajectory ``*.json`` file → one :class:`ImportedSession`.

Source shape (OpenHands 0.x ``save_trajectory``): ONE JSON array of event objects, in order. Each event has
``id`` (int), ``timestamp`` (ISO-8601, usually without a timezone), ``source`` (``user``, ``agent`` or
``environment``), ``message`` (a UI summary) and either ``action`` (a type: ``message``, ``run``, ``edit``,
``read``, ``finish``, ``reject``, ``think``, ``recall``, ``system``...) with ``args``, or ``observation``
(``run``, ``edit``, ``read``, ``error``, ``agent_state_changed``...) with ``content``, ``extras`` and
``cause`` (the id of the action it answers). Actions the model chose through function calling carry
``tool_call_metadata = {function_name, tool_call_id, model_response, total_calls_in_response}``, where
``model_response`` is the provider's raw chat-completion response (litellm, OpenAI chat shape); the
observations answering them carry the same metadata.

The file is decoded whole by :func:`~flightlog.importers.jsondoc.read_json_document`: invalid JSON, a
top-level value that is not an array, or nesting deeper than 256 levels raises
:class:`~flightlog.errors.ImportFormatError` naming the file (nothing is recorded); lone surrogates,
invalid UTF-8 and numbers RFC 8785 cannot hold are kept as text and warned.

Mapping rules (events are numbered ``#index`` in warnings, 0-based positions in the array):

1. **Prompts.** A ``user`` ``message`` action closes the open run (``RunTerminal(reason="completed")``) and
   starts ``RunStarted(run_id="<file stem>:<event id>", goal=args.content (else message),
   attachments=[ImagePart(ref)...])`` from ``args.image_urls`` (``http(s):``/``data:`` refs only; any
   other ref is warned and kept in ``Custom("openhands.user_images")``).
2. **Model responses.** The first action carrying a given ``model_response.id`` becomes
   ``LlmCompleted(turn=n)`` (``n`` counts model responses in the session, from 1): ``Message(role=
   "assistant", content=[ThinkingPart...(thinking_blocks or reasoning_content), TextPart(content)],
   tool_calls=[ToolCall(id, function.name, function.arguments)...])`` from ``choices[0].message``, with
   ``ProviderReplay(protocol="openai.chat", model=model_response.model, native_message=<choices[0].message
   verbatim>, tool_calls=<its tool_calls verbatim>, reasoning_content)``; then ``ToolRequested(turn=n,
   calls)``; then ``Custom("openhands.model_response", <the response without choices[].message>)`` (id,
   usage, finish_reason...). Later actions of the same response (parallel calls) add no completion. An
   action whose ``tool_call_id`` is not among its response's calls (or that has no ``model_response``)
   adds ``ToolCall(id=tool_call_id, name=function_name, arguments=<args as compact JSON>)`` in a
   ``ToolRequested`` of its own (in a new ``LlmCompleted`` whose text is ``args.thought`` when there is
   no response at all). Every such action is then kept as ``Custom("openhands.action.<action>", <the
   event without model_response, plus model_response_id>)``: ``args`` are what OpenHands executed.
3. **Agent messages.** An ``agent`` ``message`` action without tool metadata (a text-only answer) becomes
   ``LlmCompleted(turn=n, Message(role="assistant", content=[TextPart(args.content)]))`` (no provider
   payload: the file has none).
4. **Tool results.** An observation with ``tool_call_metadata.tool_call_id``, or whose ``cause`` is an
   action mapped to a call, becomes ``ToolCompleted(turn=<turn of the call>, results=[ToolResult(call_id,
   output=content, is_error)])``; ``is_error`` is true for an ``error`` observation or a non-zero
   ``extras.exit_code`` / ``extras.metadata.exit_code``. Then the observation is kept as
   ``Custom("openhands.observation.<observation>", <the event without content>)`` (its copy of the
   ``model_response`` is left out when equal to the one already recorded). Native call ids are paired
   exactly once (:class:`~flightlog.importers.jsondoc.CallBook`): a reused id gets ``#2``, ``#3``... A
   result that answers no call is still recorded, at the current turn, followed by
   ``Custom("openhands.orphan_tool_result", {call_id, native_call_id, event_id, observation})``. Calls
   unanswered at the end of the file (OpenHands writes no observation for ``finish``) get
   ``Custom("openhands.pending_tool_call", {call_id, native_call_id, name, turn, event})`` before the
   last ``RunTerminal``.
5. **Runs** end at the next prompt (``completed``) or at the end of the file with ``RunTerminal(reason,
   turns_used=<LlmCompleted in the run>, total_tokens=<sum of usage.total_tokens of the run's model
   responses, 0 when none is recorded>)``. The end-of-file reason is ``completed`` after a ``finish``
   action, ``rejected`` after ``reject``; else from the last ``agent_state_changed`` of the run
   (``finished``/``awaiting_user_input`` → ``completed``, ``error``, ``stopped``, ``rejected`` as
   named); else ``completed`` when the run's last event was an agent message waiting for the user with no
   call pending; else ``incomplete``.
6. **Everything else** (``system``/``recall``/``think`` actions without tool metadata, actions of
   non-function-calling agents, ``agent_state_changed``/``recall``/``null`` observations, observations
   answering no call, unknown shapes) is kept whole as ``Custom("openhands.action.<action>")``,
   ``Custom("openhands.observation.<observation>")`` or ``Custom("openhands.record")``. Keys of a
   ``message`` action beyond ``id``, ``timestamp``, ``source``, ``message``, ``action``, ``args``,
   ``timeout`` are kept as ``Custom("openhands.action.message.extra", {id, ...})``.

7. **Condensation.** A condenser's ``condensation`` action (``args.forgotten_event_ids``, or
   ``forgotten_events_start_id``..``forgotten_events_end_id``, and ``summary``) becomes
   ``Compressed(turn=<current>, archived_seq_range=(first, last), action="condensation", summary)``: the
   recorded seqs (:data:`SEQ_OFFSET`) of the events mapped from the forgotten OpenHands events, so replay
   drops them and shows the summary in their place, as the agent's view continued; the action itself is
   kept as ``Custom("openhands.action.condensation")``. A condensation that forgets nothing recorded is
   warned and only kept.

Session: ``key = "openhands:<file stem>"`` (the file holds no session id), ``task`` = first prompt cut to
200 chars, ``metadata`` = ``first_timestamp``/``last_timestamp`` (the source's text) and ``model`` (the
first response's), ``started_at_ms``/``ended_at_ms`` only from timezone-aware timestamps (OpenHands
writes naive ones, which stay absent rather than guessed).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ImportFormatError
from ..events import (
    Compressed,
    LlmCompleted,
    ProviderReplay,
    RunStarted,
    RunTerminal,
    ToolCompleted,
    ToolRequested,
)
from ..messages import (
    ContentPart,
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCall,
    ToolResult,
)
from .base import (
    IMAGE_PREFIXES,
    MAX_SAFE_INT,
    TASK_CHARS,
    ImportedSession,
    ImportWarning,
    JsonObj,
    chat_thinking_parts,
    compact_json,
    epoch_ms,
)
from .base import as_obj as _obj
from .base import as_str as _str
from .base import json_int as _int
from .jsondoc import DocumentBuilder, read_json_document

__all__ = ["FORMAT", "VERSION", "looks_like", "read"]

FORMAT = "openhands"
"""Format name, as ``import_file`` and ``--format`` spell it."""

VERSION = "1"
"""Importer version recorded with each import; bump when the mapping changes."""


_PROTOCOL = "openai.chat"
SEQ_OFFSET = 1
"""Recorded seq of the first mapped event (``import_file`` writes one ``import_source`` header at seq 0)."""
_SOURCES = frozenset({"user", "agent", "environment"})
_MESSAGE_KEYS = frozenset({"id", "timestamp", "source", "message", "action", "args", "timeout"})
_STATE_REASONS = {
    "finished": "completed",
    "awaiting_user_input": "completed",
    "error": "error",
    "stopped": "stopped",
    "rejected": "rejected",
}


def looks_like(value: Any) -> bool:
    """True if a decoded JSON document looks like an OpenHands trajectory.

    Args:
        value: The whole decoded document (a JSONL record, a dict, is never one).

    Returns:
        True for a non-empty array whose first item is an object with an ``id``, a ``source`` of
        ``user``/``agent``/``environment`` and a string ``action`` or ``observation``.
    """
    if not isinstance(value, list) or not value or not isinstance(value[0], dict):
        return False
    first = value[0]
    return (
        "id" in first
        and _str(first.get("source")) in _SOURCES
        and (isinstance(first.get("action"), str) or isinstance(first.get("observation"), str))
    )


def read(path: Path, warnings: list[ImportWarning]) -> list[ImportedSession]:
    """Import one OpenHands trajectory file (see the module docstring for the rules).

    Args:
        path: The ``.json`` trajectory (a JSON array of events).
        warnings: Appended to: values changed and events skipped or re-identified (file-level, the event
            position in the reason).

    Returns:
        One session, or an empty list when the array is empty.

    Raises:
        ImportFormatError: the file is not valid JSON, is not a JSON array, or nests too deeply.
        OSError: the file cannot be read.
    """
    document = read_json_document(path, warnings)
    if not isinstance(document, list):
        kind = "an object" if isinstance(document, dict) else f"a {type(document).__name__}"
        raise ImportFormatError(
            path=str(path), reason=f"not an OpenHands trajectory: expected a JSON array of events, got {kind}"
        )
    builder = _Builder(path, warnings)
    for index, item in enumerate(document):
        builder.feed(index, item)
    return builder.finish()


# ─── Helpers ──────────────────────────────────────────────────────────────────────────────────


def _event_id(value: Any) -> int | str | None:
    """An event ``id``/``cause`` usable as a key (int or str), else None."""
    return value if isinstance(value, int | str) and not isinstance(value, bool) else None


def _choice_message(response: JsonObj) -> JsonObj:
    """``choices[0].message`` of a chat-completion response ({} when absent)."""
    choices = response.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    return _obj(_obj(first).get("message"))


def _without_messages(response: JsonObj) -> JsonObj:
    """The response with each ``choices[].message`` left out (it is kept in ``ProviderReplay``)."""
    out = dict(response)
    choices = response.get("choices")
    if isinstance(choices, list):
        out["choices"] = [
            {k: v for k, v in choice.items() if k != "message"} if isinstance(choice, dict) else choice
            for choice in choices
        ]
    return out


def _content_parts(native: JsonObj) -> list[ContentPart]:
    """Thinking (``thinking_blocks``, else ``reasoning_content``) then text parts of a chat message."""
    parts = chat_thinking_parts(native)
    reasoning = _str(native.get("reasoning_content"))
    if not parts and reasoning:
        parts.append(ThinkingPart(thinking=reasoning))
    content = native.get("content")
    if isinstance(content, str):
        if content:
            parts.append(TextPart(text=content))
    elif isinstance(content, list):
        for item in content:
            item = _obj(item)
            if item.get("type") == "text" and isinstance(item.get("text"), str):
                parts.append(TextPart(text=item["text"]))
    return parts


def _native_calls(native: JsonObj) -> list[tuple[str, str, str]]:
    """``(id, name, arguments text)`` of each chat ``tool_calls`` entry that has a string id."""
    calls = []
    raw = native.get("tool_calls")
    for item in raw if isinstance(raw, list) else ():
        item = _obj(item)
        call_id = _str(item.get("id"))
        if not call_id:
            continue
        function = _obj(item.get("function"))
        calls.append((call_id, _str(function.get("name")) or "", compact_json(function.get("arguments"))))
    return calls


def _exit_code(extras: JsonObj) -> int | None:
    code = _int(extras.get("exit_code"))
    return code if code is not None else _int(_obj(extras.get("metadata")).get("exit_code"))


# ─── The fold ─────────────────────────────────────────────────────────────────────────────────


@dataclass
class _Run:
    """The open run: its id, counted completions and tokens, and how it looks like ending."""

    run_id: str
    turns: int = 0
    tokens: int = 0
    outcome: str | None = None  # from a finish/reject action
    state: str | None = None  # reason from the last agent_state_changed
    waiting: bool = False  # last event: an agent message waiting for the user


class _Builder(DocumentBuilder):
    """Mutable fold state: feed events in file order, then :meth:`finish`."""

    def __init__(self, path: Path, warnings: list[ImportWarning]) -> None:
        super().__init__(path, warnings)
        self.turn = 0
        self.run: _Run | None = None
        self.first_prompt: str | None = None
        self.model: str | None = None
        self.first_stamp: str | None = None
        self.last_stamp: str | None = None
        self.first_ms: int | None = None
        self.last_ms: int | None = None
        self.count = 0
        self.responses: dict[str, tuple[int, JsonObj, dict[str, str]]] = {}  # id → turn, response, calls
        self.action_calls: dict[int | str | None, str] = {}  # action event id → session-unique call id
        self.seqs: dict[int, tuple[int, int]] = {}  # OpenHands event id → recorded seqs of its events

    def feed(self, index: int, item: Any) -> None:
        """Fold one array item (``index`` is its 0-based position)."""
        self.count += 1
        if not isinstance(item, dict):
            self.keep("openhands.record", item)
            return
        self.note_time(item.get("timestamp"))
        before = len(self.events)
        action, observation = _str(item.get("action")), _str(item.get("observation"))
        if action == "condensation":
            self.on_condensation(item)
        elif action is not None:
            self.on_action(index, action, item)
        elif observation is not None:
            self.on_observation(index, observation, item)
        else:
            self.keep("openhands.record", item)
        event_id = item.get("id")
        if isinstance(event_id, int) and len(self.events) > before:
            self.seqs[event_id] = (before + SEQ_OFFSET, len(self.events) - 1 + SEQ_OFFSET)

    def on_condensation(self, item: JsonObj) -> None:
        """Rule 7: a condenser's ``condensation`` action → ``Compressed`` over the forgotten events."""
        args = _obj(item.get("args"))
        ids = args.get("forgotten_event_ids")
        if not isinstance(ids, list):
            start, end = args.get("forgotten_events_start_id"), args.get("forgotten_events_end_id")
            ids = list(range(start, end + 1)) if isinstance(start, int) and isinstance(end, int) else []
        ranges = [self.seqs[i] for i in ids if isinstance(i, int) and i in self.seqs]
        if ranges:
            seq_range = (min(r[0] for r in ranges), max(r[1] for r in ranges))
            summary = _str(args.get("summary"))
            self.emit(
                Compressed(
                    turn=self.turn, archived_seq_range=seq_range, action="condensation", summary=summary
                )
            )
        else:
            self.warn(f"event {item.get('id')}: condensation forgets no recorded event")
        self.keep("openhands.action.condensation", item)

    def note_time(self, stamp: Any) -> None:
        """Remember the first/last timestamp text, and epoch ms when it has a timezone."""
        if not isinstance(stamp, str):
            return
        self.first_stamp = self.first_stamp or stamp
        self.last_stamp = stamp
        ms = epoch_ms(stamp)
        if ms is not None:
            self.first_ms = ms if self.first_ms is None else min(self.first_ms, ms)
            self.last_ms = ms if self.last_ms is None else max(self.last_ms, ms)

    # ── actions ──

    def on_action(self, index: int, action: str, item: JsonObj) -> None:
        """Dispatch an action: prompt, tool-call action, agent text message, or Custom."""
        source, meta = item.get("source"), item.get("tool_call_metadata")
        if self.run is not None:
            self.run.waiting = False
        if source == "user" and action == "message":
            self.start_run(index, item)
        elif isinstance(meta, dict):
            self.on_tool_action(index, action, item, meta)
        elif source == "agent" and action == "message":
            self.on_agent_message(item)
        else:
            self.keep(f"openhands.action.{action}", item)
        if source == "agent" and action in ("finish", "reject") and self.run is not None:
            self.run.outcome = "completed" if action == "finish" else "rejected"

    def start_run(self, index: int, item: JsonObj) -> None:
        """Rule 1: close the open run, start one for this prompt."""
        self.close_run(at_eof=False)
        args = _obj(item.get("args"))
        goal = _str(args.get("content"))
        if goal is None:
            goal = _str(item.get("message")) or ""
        attachments: list[ContentPart] = []
        rejected = []
        urls = args.get("image_urls")
        for ref in urls if isinstance(urls, list) else ():
            if isinstance(ref, str) and ref.startswith(IMAGE_PREFIXES):
                attachments.append(ImagePart(ref=ref))
            else:
                rejected.append(ref)
        event_id = item.get("id")
        run_id = f"{self.path.stem}:{event_id if event_id is not None else f'#{index}'}"
        if self.first_prompt is None:
            self.first_prompt = goal
        self.run = _Run(run_id=run_id)
        self.emit(RunStarted(run_id=run_id, goal=goal, attachments=attachments))
        if rejected:
            self.warn(f"event #{index}: {len(rejected)} image ref(s) that are not URLs kept as Custom")
            self.keep("openhands.user_images", {"id": event_id, "image_urls": rejected})
        self.keep_extra_keys(item)

    def keep_extra_keys(self, item: JsonObj) -> None:
        """Rule 6: keys of a message action the mapping does not carry."""
        extra = {k: v for k, v in item.items() if k not in _MESSAGE_KEYS}
        if extra:
            self.keep("openhands.action.message.extra", {"id": item.get("id"), **extra})

    def on_agent_message(self, item: JsonObj) -> None:
        """Rule 3: a text-only answer of the model."""
        args = _obj(item.get("args"))
        text = _str(args.get("content"))
        if text is None:
            text = _str(item.get("message")) or ""
        self.turn += 1
        self.emit(LlmCompleted(turn=self.turn, message=Message.text("assistant", text)))
        if self.run is not None:
            self.run.turns += 1
            self.run.waiting = args.get("wait_for_response") is True
        self.keep_extra_keys(item)

    def on_tool_action(self, index: int, action: str, item: JsonObj, meta: JsonObj) -> None:
        """Rule 2: the model response (once per response id), this action's call, the action as Custom."""
        response = meta.get("model_response")
        response_id: str | None = None
        response_calls: dict[str, str] = {}
        turn: int | None = None
        if isinstance(response, dict):
            response_id = _str(response.get("id")) or f"#{index}"
            known = self.responses.get(response_id)
            if known is None:
                turn, response_calls = self.complete_response(index, response)
                self.responses[response_id] = (turn, response, response_calls)
            else:
                turn, _, response_calls = known
        native = _str(meta.get("tool_call_id"))
        call_id = response_calls.get(native) if native else None
        if native and call_id is None:
            turn = self.extra_call(index, action, item, meta, native, turn)
            call_id = self.action_calls.get(_event_id(item.get("id")))
        elif call_id is not None:
            self.action_calls[_event_id(item.get("id"))] = call_id
        elif not native:
            self.warn(f"event #{index}: {action} action without a tool_call_id: kept as Custom only")
        payload = dict(item)
        payload["tool_call_metadata"] = {k: v for k, v in meta.items() if k != "model_response"}
        if response_id is not None:
            payload["tool_call_metadata"]["model_response_id"] = response_id
        self.keep(f"openhands.action.{action}", payload)

    def complete_response(self, index: int, response: JsonObj) -> tuple[int, dict[str, str]]:
        """``LlmCompleted`` (+ ``ToolRequested``, + the response's other fields as Custom) for a response."""
        native = _choice_message(response)
        model = _str(response.get("model"))
        self.model = self.model or model
        self.turn += 1
        calls: list[ToolCall] = []
        mapping: dict[str, str] = {}
        for native_id, name, arguments in _native_calls(native):
            if native_id in mapping:
                self.warn(f"event #{index}: tool call {native_id!r} listed twice in one response; kept once")
                continue
            call_id = self.calls.request(native_id, name, self.turn, f"event #{index}")
            mapping[native_id] = call_id
            calls.append(ToolCall(id=call_id, name=name, arguments=arguments))
        raw_calls = native.get("tool_calls")
        replay = ProviderReplay(
            protocol=_PROTOCOL,
            model=model,
            native_message=native or None,
            tool_calls=list(raw_calls) if isinstance(raw_calls, list) and raw_calls else None,
            reasoning_content=_str(native.get("reasoning_content")),
        )
        message = Message(role="assistant", content=_content_parts(native), tool_calls=calls)
        self.emit(LlmCompleted(turn=self.turn, message=message, provider_replay=replay))
        if calls:
            self.emit(ToolRequested(turn=self.turn, calls=calls))
        self.keep("openhands.model_response", _without_messages(response))
        if self.run is not None:
            self.run.turns += 1
            total = _int(_obj(response.get("usage")).get("total_tokens"))
            if total is not None and total > 0:
                self.run.tokens += total
        return self.turn, mapping

    def extra_call(
        self, index: int, action: str, item: JsonObj, meta: JsonObj, native: str, turn: int | None
    ) -> int:
        """A call the action names but its response does not list (or no response): its own request."""
        args = {k: v for k, v in _obj(item.get("args")).items() if k != "thought"}
        name = _str(meta.get("function_name")) or action
        if turn is None:
            self.turn += 1
            turn = self.turn
            call_id = self.calls.request(native, name, turn, f"event #{index}")
            call = ToolCall(id=call_id, name=name, arguments=compact_json(args))
            thought = _str(_obj(item.get("args")).get("thought"))
            content: list[ContentPart] = [TextPart(text=thought)] if thought else []
            self.emit(
                LlmCompleted(turn=turn, message=Message(role="assistant", content=content, tool_calls=[call]))
            )
            if self.run is not None:
                self.run.turns += 1
        else:
            self.warn(f"event #{index}: tool call {native!r} is not in its model_response; recorded alone")
            call_id = self.calls.request(native, name, turn, f"event #{index}")
            call = ToolCall(id=call_id, name=name, arguments=compact_json(args))
        self.emit(ToolRequested(turn=turn, calls=[call]))
        self.action_calls[_event_id(item.get("id"))] = call_id
        return turn

    # ── observations ──

    def on_observation(self, index: int, observation: str, item: JsonObj) -> None:
        """Rule 4: a tool result when it answers a call (by native id, else by ``cause``), else Custom."""
        meta = _obj(item.get("tool_call_metadata"))
        native = _str(meta.get("tool_call_id"))
        cause = _event_id(item.get("cause"))
        cause_call = self.action_calls.get(cause) if cause is not None else None
        if self.run is not None:
            self.run.waiting = False
        if observation == "agent_state_changed" and self.run is not None:
            state = _str(_obj(item.get("extras")).get("agent_state"))
            self.run.state = _STATE_REASONS.get(state or "")
        if not native and cause_call is None:
            self.keep(f"openhands.observation.{observation}", item)
            return
        call = self.calls.answer(native) if native else self.calls.answer_id(cause_call or "")
        extras = _obj(item.get("extras"))
        code = _exit_code(extras)
        is_error = observation == "error" or (code is not None and code != 0)
        output = compact_json(item.get("content"))
        if call is not None:
            self.emit(
                ToolCompleted(
                    turn=call.turn,
                    results=[ToolResult(call_id=call.call_id, output=output, is_error=is_error)],
                )
            )
        else:
            native_id = native or cause_call or ""
            call_id = self.calls.orphan_id(native_id)
            self.emit(
                ToolCompleted(
                    turn=self.turn, results=[ToolResult(call_id=call_id, output=output, is_error=is_error)]
                )
            )
            orphan = {
                "call_id": call_id,
                "native_call_id": native_id,
                "event_id": item.get("id"),
                "observation": observation,
            }
            self.keep("openhands.orphan_tool_result", orphan)
        payload = {k: v for k, v in item.items() if k != "content"}
        response = meta.get("model_response")
        if isinstance(response, dict):
            known = self.responses.get(_str(response.get("id")) or "")
            if known is not None and known[1] == response:
                payload["tool_call_metadata"] = {k: v for k, v in meta.items() if k != "model_response"}
                payload["tool_call_metadata"]["model_response_id"] = response.get("id")
        self.keep(f"openhands.observation.{observation}", payload)

    # ── runs and the end ──

    def close_run(self, *, at_eof: bool) -> None:
        """Emit ``RunTerminal`` for the open run, if any (rule 5)."""
        run, self.run = self.run, None
        if run is None:
            return
        reason = "completed"
        if at_eof:
            pending = bool(self.calls.pending())
            waiting = "completed" if run.waiting and not pending else None
            reason = run.outcome or run.state or waiting or "incomplete"
        tokens = min(run.tokens, MAX_SAFE_INT)
        self.emit(RunTerminal(reason=reason, turns_used=run.turns, total_tokens=tokens))

    def finish(self) -> list[ImportedSession]:
        """End of file: flag pending calls, close the run, build the session."""
        self.keep_pending("openhands.pending_tool_call", "event")
        self.close_run(at_eof=True)
        if not self.count:
            self.warn("no OpenHands event in the file")
            return []
        metadata: JsonObj = {}
        if self.first_stamp is not None:
            metadata["first_timestamp"] = self.first_stamp
        if self.last_stamp is not None:
            metadata["last_timestamp"] = self.last_stamp
        if self.model is not None:
            metadata["model"] = self.model
        session = ImportedSession(
            key=f"openhands:{self.path.stem}",
            task=(self.first_prompt or "")[:TASK_CHARS],
            source_format=FORMAT,
            events=self.events,
            metadata=metadata,
            started_at_ms=self.first_ms,
            ended_at_ms=self.last_ms,
        )
        return [session]
