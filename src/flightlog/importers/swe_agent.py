"""SWE-agent 1.x trajectory importer: one ``*.traj`` file → one :class:`ImportedSession` with one run.

Source shape: ONE JSON object ``{"trajectory": [step...], "history": [message...], "info": {...},
"environment": str, "replay_config": object or JSON text}``.

* ``history`` is the chat the model saw, in order: ``{role, content, message_type, agent, ...}`` with
  ``role`` ``system``/``user``/``assistant``/``tool``; ``content`` is text or a list of ``{type: text,
  text}`` / ``{type: image_url, image_url: {url}}`` parts; assistant messages (``message_type: action``)
  carry ``thought``, ``action`` and, with function calling, ``tool_calls`` (OpenAI chat objects: ``{id,
  type, function: {name, arguments}}``); tool messages carry ``tool_call_ids``; ``is_demo`` marks
  in-context demonstrations.
* ``trajectory`` steps: ``{action, observation, response, thought, state, execution_time, query,
  extra_info}``, one per executed action.
* ``info``: ``exit_status`` (``submitted``, ``exit_cost``, ``exit_format``, ``submitted (exit_context)``...),
  ``submission`` (the patch), ``model_stats`` (``tokens_sent``, ``tokens_received``, ``api_calls``...).

The file is decoded whole by :func:`~flightlog.importers.jsondoc.read_json_document`: invalid JSON, a
top-level value that is not an object, a missing or non-list ``trajectory``, a non-list ``history``, or
nesting deeper than 256 levels raises :class:`~flightlog.errors.ImportFormatError` naming the file
(nothing is recorded); lone surrogates, invalid UTF-8 and numbers RFC 8785 cannot hold are kept as text
and warned. SWE-agent writes no timestamps: the session's times stay absent.

Mapping rules (history messages are numbered ``history[i]``, steps ``trajectory[i]``, 0-based):

1. **Setup.** First, ``Custom("swe_agent.run", {environment, replay_config, <unknown top-level keys>})``.
2. **Prompt.** ``system`` messages before the first user message become ``RunStarted.system_prompt``
   (joined by a blank line). The first non-demo ``user`` message starts the single run:
   ``RunStarted(run_id="<key>:history:<i>", goal=<its text>, attachments=<image URLs>)``. Without one, the
   run starts at the first assistant message with ``goal = replay_config.problem_statement.text`` (else
   ``""``).
3. **Model turns.** Each ``assistant`` message becomes ``LlmCompleted(turn=n)`` (``n`` counts assistant
   messages, from 1) with ``Message(role="assistant", content=[ThinkingPart...(thinking_blocks),
   TextPart(content)], tool_calls=[ToolCall(id, function.name, function.arguments)...])``, plus, when the
   message has native ``tool_calls``, ``ProviderReplay(protocol="openai.chat",
   model=replay_config.agent.model.name, tool_calls=<the objects verbatim>)``; then ``ToolRequested(turn=n,
   calls)``. SWE-agent reuses native ids across turns (its demonstrations do): the
   :class:`~flightlog.importers.jsondoc.CallBook` records a reused id as ``<id>#2``, ``#3``... (warned).
   A tool call without an id stays in the provider payload only (warned).
4. **Tool results.** Each ``tool`` message becomes ``ToolCompleted(turn=<turn of the call>,
   results=[ToolResult(call_id, output=<its text>)...])``, one result per id of ``tool_call_ids`` (or
   ``tool_call_id``), each paired exactly once with the earliest unanswered call of that native id. A
   result that answers no call is still recorded, at the current turn, followed by
   ``Custom("swe_agent.orphan_tool_result", {call_id, native_call_id, history_index})``. SWE-agent records
   no error flag: ``is_error`` is false.
5. **Steps.** Step ``k`` of ``trajectory`` belongs to the assistant message it executed (the next
   unmatched one whose ``action`` equals the step's); it is kept as ``Custom("swe_agent.step",
   {index, <the step without query>, query_messages: <len(query)>})`` after that turn's results (``query``
   is the prompt sent, a copy of the history prefix). Steps matching no message are kept the same way at
   the end (warned).
6. **End.** Calls still unanswered get ``Custom("swe_agent.pending_tool_call", {call_id, native_call_id,
   name, turn, history_index})``; then ``Custom("swe_agent.info", info)``; then ``RunTerminal(reason,
   turns_used=<LlmCompleted count>, total_tokens=<model_stats.tokens_sent + tokens_received, 0 when not
   recorded>)`` where ``reason`` is ``completed`` for ``exit_status == "submitted"``, the exit status
   verbatim for any other, and ``incomplete`` without one.
7. **Everything else** is kept as Custom: later ``system`` messages (``swe_agent.history.system``),
   demonstrations (``swe_agent.history.demo``), user messages after the first that rule 8 does not map
   (``swe_agent.history.user``: requeries...), unknown roles
   (``swe_agent.history.<role>``), non-object items (``swe_agent.history.record``), and keys of an
   assistant message beyond ``role``, ``content``, ``tool_calls``, ``thinking_blocks``, ``agent``,
   ``message_type``, ``action`` and a ``thought`` equal to its text (``swe_agent.history.extra``, with its
   ``index``). Without ``history`` each step becomes ``LlmCompleted(text=response)`` and its Custom.

8. **Without function calling** (0.x, and 1.x without tool calls) the model writes its action in its
   text, SWE-agent parses it (the message's ``action``), runs it, and sends the observation back as the
   next ``user`` message. Replay must show those observations, and flightlog's history has them only as
   tool results: an assistant message with a non-blank ``action`` and no native ``tool_calls`` gets
   ``ToolCall(id="action:history[<i>]", name="swe_agent_action", arguments={"action": <action>} as JSON)``
   (no ``ProviderReplay``: the model made no native call), and the next ``user`` message becomes its
   ``ToolCompleted(results=[ToolResult(output=<its text>)])``. That message is also kept whole as
   ``swe_agent.history.extra`` when it carries images, keys beyond ``role``/``content``/``agent``/
   ``message_type``, or a ``message_type`` other than ``observation``. An action still unanswered at the
   end is pending (rule 6).

Session: ``key = "swe-agent:<replay_config.problem_statement.id>"`` (fallback: the file stem), ``task`` =
``problem_statement.text`` (else the goal) cut to 200 chars, ``metadata`` = ``instance_id``, ``model``,
``environment``, ``exit_status`` and ``swe_agent_version``/``swe_rex_version`` when present.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ImportFormatError
from ..events import (
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
)
from .base import as_obj as _obj
from .base import as_str as _str
from .jsondoc import DocumentBuilder, read_json_document

__all__ = ["ACTION_TOOL", "FORMAT", "VERSION", "looks_like", "read"]

ACTION_TOOL = "swe_agent_action"
"""Tool name of the call recorded for an action of an agent without function calling (rule 8)."""

FORMAT = "swe-agent"
"""Format name, as ``import_file`` and ``--format`` spell it."""

VERSION = "1"
"""Importer version recorded with each import; bump when the mapping changes."""


_PROTOCOL = "openai.chat"
_KNOWN_TOP = frozenset({"trajectory", "history", "info", "environment", "replay_config"})
_ASSISTANT_KEYS = frozenset(
    {"role", "content", "tool_calls", "thinking_blocks", "agent", "message_type", "action", "thought"}
)


def looks_like(value: Any) -> bool:
    """True if a decoded JSON document looks like a SWE-agent trajectory.

    Args:
        value: The whole decoded document (also called with JSONL records by format detection).

    Returns:
        True for an object with a ``trajectory`` list and a ``history`` list or an ``info`` object.
    """
    return (
        isinstance(value, dict)
        and isinstance(value.get("trajectory"), list)
        and (isinstance(value.get("history"), list) or isinstance(value.get("info"), dict))
    )


def read(path: Path, warnings: list[ImportWarning]) -> list[ImportedSession]:
    """Import one SWE-agent trajectory file (see the module docstring for the rules).

    Args:
        path: The ``.traj`` file (one JSON object).
        warnings: Appended to: values changed, ids re-identified, steps unmatched (file-level warnings).

    Returns:
        One session, or an empty list when both ``trajectory`` and ``history`` are empty.

    Raises:
        ImportFormatError: not valid JSON, not an object, ``trajectory`` missing or not a list, ``history``
            not a list, or nesting too deep.
        OSError: the file cannot be read.
    """
    document = read_json_document(path, warnings)
    if not isinstance(document, dict):
        kind = "an array" if isinstance(document, list) else f"a {type(document).__name__}"
        raise ImportFormatError(
            path=str(path), reason=f"not a SWE-agent trajectory: expected a JSON object, got {kind}"
        )
    steps = document.get("trajectory")
    if not isinstance(steps, list):
        raise ImportFormatError(path=str(path), reason='not a SWE-agent trajectory: no "trajectory" list')
    history = document.get("history", [])
    if not isinstance(history, list):
        raise ImportFormatError(path=str(path), reason='not a SWE-agent trajectory: "history" is not a list')
    if not steps and not history:
        warnings.append(ImportWarning(path.name, None, "empty SWE-agent trajectory"))
        return []
    return [_Builder(path, warnings, document).build(steps, history)]


# ─── Helpers ──────────────────────────────────────────────────────────────────────────────────


def _count(value: Any) -> int | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    return value if ok else None


def _replay_config(value: Any) -> Any:
    """The ``replay_config`` object (SWE-agent writes it as an object or as JSON text)."""
    if isinstance(value, str):
        try:
            decoded = json.loads(value)
        except (ValueError, RecursionError):
            return value
        return decoded if isinstance(decoded, dict) else value
    return value


def _text_and_images(content: Any) -> tuple[str, list[ContentPart]]:
    """Text (parts joined by newlines) and image-URL parts of a history message's content."""
    if isinstance(content, str):
        return content, []
    texts: list[str] = []
    images: list[ContentPart] = []
    for part in content if isinstance(content, list) else ():
        part = _obj(part)
        if part.get("type") == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif part.get("type") == "image_url":
            url = _obj(part.get("image_url")).get("url")
            if isinstance(url, str) and url.startswith(IMAGE_PREFIXES):
                images.append(ImagePart(ref=url))
    return "\n".join(texts), images


def _step_payload(index: int, step: Any) -> JsonObj:
    """Rule 5: a step without its ``query`` (the number of query messages instead)."""
    if not isinstance(step, dict):
        return {"index": index, "step": step}
    payload: JsonObj = {"index": index, **{k: v for k, v in step.items() if k != "query"}}
    query = step.get("query")
    if isinstance(query, list):
        payload["query_messages"] = len(query)
    elif "query" in step:
        payload["query"] = query
    return payload


# ─── The fold ─────────────────────────────────────────────────────────────────────────────────


@dataclass
class _State:
    turns: int = 0
    system: list[str] = field(default_factory=list)
    started: bool = False
    goal: str | None = None


class _Builder(DocumentBuilder):
    """Builds the one session of a trajectory document."""

    def __init__(self, path: Path, warnings: list[ImportWarning], document: JsonObj) -> None:
        super().__init__(path, warnings)
        self.document = document
        self.config = _replay_config(document.get("replay_config"))
        config = _obj(self.config)
        problem = _obj(config.get("problem_statement"))
        self.instance_id = _str(problem.get("id"))
        self.problem_text = _str(problem.get("text"))
        self.model = _str(_obj(_obj(config.get("agent")).get("model")).get("name"))
        self.key = f"swe-agent:{self.instance_id or path.stem}"
        self.state = _State()
        self.steps: list[Any] = []
        self.next_step = 0
        self.step_due: int | None = None
        self.action_call: str | None = None
        """Call id of the latest non-function-calling action, until its observation arrives (rule 8)."""

    def build(self, steps: list[Any], history: list[Any]) -> ImportedSession:
        """Rules 1-6 over the whole document."""
        setup: JsonObj = {"environment": self.document.get("environment"), "replay_config": self.config}
        setup.update({k: v for k, v in self.document.items() if k not in _KNOWN_TOP})
        self.keep("swe_agent.run", setup)
        self.steps = steps
        if history:
            for index, message in enumerate(history):
                self.feed(index, message)
        else:
            for index, step in enumerate(steps):
                self.step_only(index, step)
            self.next_step = len(steps)
        self.flush_step()
        self.finish()
        return self.session()

    # ── history ──

    def feed(self, index: int, message: Any) -> None:
        """Dispatch one history message on its role (rules 2-4, 7)."""
        if not isinstance(message, dict):
            self.keep("swe_agent.history.record", {"index": index, "message": message})
            return
        role = message.get("role")
        if message.get("is_demo") is True:
            self.keep("swe_agent.history.demo", {"index": index, **message})
        elif role == "system":
            self.on_system(index, message)
        elif role == "user":
            self.on_user(index, message)
        elif role == "assistant":
            self.on_assistant(index, message)
        elif role == "tool":
            self.on_tool(index, message)
        else:
            kind = role if isinstance(role, str) and role.isidentifier() else "record"
            self.keep(f"swe_agent.history.{kind}", {"index": index, **message})

    def on_system(self, index: int, message: JsonObj) -> None:
        """Rule 2: a system prompt before the run; a later one is kept as Custom."""
        text, _ = _text_and_images(message.get("content"))
        if self.state.started:
            self.keep("swe_agent.history.system", {"index": index, **message})
        else:
            self.state.system.append(text)

    def on_user(self, index: int, message: JsonObj) -> None:
        """Rule 2: the first user message starts the run; rule 8: the one right after an action without
        function calling is its observation; other later ones are kept as Custom."""
        if self.state.started and self.action_call is not None:
            self.on_observation(index, message)
            return
        if self.state.started:
            self.keep("swe_agent.history.user", {"index": index, **message})
            return
        text, images = _text_and_images(message.get("content"))
        self.start(f"{self.key}:history:{index}", text, images)

    def start(self, run_id: str, goal: str, attachments: list[ContentPart]) -> None:
        """Emit the run's ``RunStarted`` (once)."""
        self.state.started = True
        self.state.goal = goal
        system = "\n\n".join(self.state.system) if self.state.system else None
        self.emit(RunStarted(run_id=run_id, goal=goal, system_prompt=system, attachments=attachments))

    def ensure_started(self, where: str) -> None:
        """Rule 2: start the run from the problem statement when no user message came first."""
        if not self.state.started:
            self.start(f"{self.key}:{where}", self.problem_text or "", [])

    def on_assistant(self, index: int, message: JsonObj) -> None:
        """Rule 3: ``LlmCompleted`` (+ ``ToolRequested``); rule 5: schedules the step it executed."""
        self.flush_step()
        self.ensure_started(f"history:{index}")
        self.state.turns += 1
        turn = self.state.turns
        text, images = _text_and_images(message.get("content"))
        content: list[ContentPart] = [*chat_thinking_parts(message)]
        if text:
            content.append(TextPart(text=text))
        content.extend(images)
        raw_calls = message.get("tool_calls")
        calls: list[ToolCall] = []
        action = message.get("action")
        if not (isinstance(raw_calls, list) and raw_calls) and isinstance(action, str) and action.strip():
            # Rule 8: no function calling; the environment ran the parsed action.
            call_id = self.calls.request(f"action:history[{index}]", ACTION_TOOL, turn, f"history[{index}]")
            calls.append(ToolCall(id=call_id, name=ACTION_TOOL, arguments=json.dumps({"action": action})))
            self.action_call = call_id
        for item in raw_calls if isinstance(raw_calls, list) else ():
            item = _obj(item)
            native = _str(item.get("id"))
            function = _obj(item.get("function"))
            name = _str(function.get("name")) or ""
            if not native:
                self.warn(f"history[{index}]: tool call without an id kept in the provider payload only")
                continue
            call_id = self.calls.request(native, name, turn, f"history[{index}]")
            calls.append(ToolCall(id=call_id, name=name, arguments=compact_json(function.get("arguments"))))
        replay = None
        if isinstance(raw_calls, list) and raw_calls:
            replay = ProviderReplay(protocol=_PROTOCOL, model=self.model, tool_calls=list(raw_calls))
        message_out = Message(role="assistant", content=content, tool_calls=calls)
        self.emit(LlmCompleted(turn=turn, message=message_out, provider_replay=replay))
        if calls:
            self.emit(ToolRequested(turn=turn, calls=calls))
        extra = {k: v for k, v in message.items() if k not in _ASSISTANT_KEYS}
        thought = message.get("thought")
        if "thought" in message and thought != text:
            extra["thought"] = thought
        if extra:
            self.keep("swe_agent.history.extra", {"index": index, **extra})
        self.match_step(message)

    def on_observation(self, index: int, message: JsonObj) -> None:
        """Rule 8: the user message after a non-function-calling action is that action's result."""
        call = self.calls.answer_id(self.action_call or "")
        self.action_call = None
        if call is None:  # answered already (cannot happen: the id is ours); keep the message whole
            self.keep("swe_agent.history.user", {"index": index, **message})
            return
        text, images = _text_and_images(message.get("content"))
        self.emit(ToolCompleted(turn=call.turn, results=[ToolResult(call_id=call.call_id, output=text)]))
        extra = {k: v for k, v in message.items() if k not in ("role", "content", "agent", "message_type")}
        if images or extra or message.get("message_type") not in (None, "observation"):
            self.keep("swe_agent.history.extra", {"index": index, **message})

    def on_tool(self, index: int, message: JsonObj) -> None:
        """Rule 4: one ``ToolCompleted`` per tool message, a result per native id."""
        ids = message.get("tool_call_ids")
        if not isinstance(ids, list):
            single = message.get("tool_call_id")
            ids = [single] if isinstance(single, str) else []
        natives = [i for i in ids if isinstance(i, str)]
        if not natives:
            self.keep("swe_agent.history.tool", {"index": index, **message})
            return
        text, _ = _text_and_images(message.get("content"))
        for native in natives:
            call = self.calls.answer(native)
            if call is not None:
                result = ToolResult(call_id=call.call_id, output=text)
                self.emit(ToolCompleted(turn=call.turn, results=[result]))
                continue
            call_id = self.calls.orphan_id(native)
            self.emit(
                ToolCompleted(turn=self.state.turns, results=[ToolResult(call_id=call_id, output=text)])
            )
            orphan = {"call_id": call_id, "native_call_id": native, "history_index": index}
            self.keep("swe_agent.orphan_tool_result", orphan)
        extra = {
            k: v for k, v in message.items() if k not in ("role", "content", "tool_call_ids", "tool_call_id")
        }
        if set(extra) - {"agent", "message_type"}:
            self.keep("swe_agent.history.extra", {"index": index, **extra})

    # ── trajectory steps ──

    def match_step(self, message: JsonObj) -> None:
        """Rule 5: the next unmatched step belongs to this message when their ``action`` agree."""
        if self.next_step >= len(self.steps):
            return
        step = _obj(self.steps[self.next_step])
        if "action" not in message or step.get("action") == message.get("action"):
            self.step_due = self.next_step
            self.next_step += 1

    def flush_step(self) -> None:
        """Emit the step scheduled by the previous assistant message (after its results)."""
        if self.step_due is not None:
            self.keep("swe_agent.step", _step_payload(self.step_due, self.steps[self.step_due]))
            self.step_due = None

    def step_only(self, index: int, step: Any) -> None:
        """Rule 7: without history, a step's ``response`` is the model's turn."""
        self.ensure_started(f"trajectory:{index}")
        self.state.turns += 1
        response = _str(_obj(step).get("response")) or ""
        self.emit(LlmCompleted(turn=self.state.turns, message=Message.text("assistant", response)))
        self.keep("swe_agent.step", _step_payload(index, step))

    # ── the end ──

    def finish(self) -> None:
        """Rule 6: unmatched steps, pending calls, info, ``RunTerminal``."""
        leftover = range(self.next_step, len(self.steps))
        if leftover:
            self.warn(f"{len(leftover)} trajectory step(s) matched no history message: kept at the end")
        for index in leftover:
            self.keep("swe_agent.step", _step_payload(index, self.steps[index]))
        self.ensure_started("end")
        self.keep_pending("swe_agent.pending_tool_call", "history_index")
        info = self.document.get("info")
        if "info" in self.document:
            self.keep("swe_agent.info", info)
        status = _str(_obj(info).get("exit_status"))
        reason = "completed" if status == "submitted" else status or "incomplete"
        stats = _obj(_obj(info).get("model_stats"))
        sent, received = _count(stats.get("tokens_sent")), _count(stats.get("tokens_received"))
        tokens = (sent or 0) + (received or 0)
        self.emit(
            RunTerminal(reason=reason, turns_used=self.state.turns, total_tokens=min(tokens, MAX_SAFE_INT))
        )

    def session(self) -> ImportedSession:
        """The session and its metadata (rule: no paths)."""
        info = _obj(self.document.get("info"))
        metadata: JsonObj = {}
        candidates = {
            "instance_id": self.instance_id,
            "model": self.model,
            "environment": _str(self.document.get("environment")),
            "exit_status": _str(info.get("exit_status")),
            "swe_agent_version": _str(info.get("swe_agent_version")),
            "swe_rex_version": _str(info.get("swe_rex_version")),
        }
        metadata.update({k: v for k, v in candidates.items() if v is not None})
        task = self.problem_text if self.problem_text is not None else self.state.goal or ""
        return ImportedSession(
            key=self.key,
            task=task[:TASK_CHARS],
            source_format=FORMAT,
            events=self.events,
            metadata=metadata,
        )
