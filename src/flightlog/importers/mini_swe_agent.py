"""mini-swe-agent trajectory importer: one ``*.traj.json`` file → one :class:`ImportedSession` with one run.

Source shape (mini-swe-agent ``save_traj``, ``trajectory_format`` ``mini-swe-agent-1`` (1.x) or
``mini-swe-agent-1.1`` (2.x)): ONE JSON object ``{"info": {exit_status, submission, model_stats:
{instance_cost, api_calls}, config: {agent, model: {model_name}, ...}, mini_version}, "messages": [...],
"trajectory_format", "instance_id"?}``. ``messages`` is the OpenAI chat the model saw, in order:

* 1.x: ``{role, content}`` only; an assistant message carries its one action as a fenced code block
  tagged ``bash`` and the next ``user`` message is the action's output (``<returncode>…</returncode><output>…``);
  a response with no or several blocks gets a format-error ``user`` message instead.
* 1.1: messages carry ``extra`` (``actions: [{command, tool_call_id?}]``, ``response`` (the raw API
  response, with ``usage``), ``cost``, ``timestamp`` (unix seconds), ``returncode``...). Tool-call models
  write ``tool_calls`` on the assistant message and answer each with a ``{role: tool, tool_call_id}``
  message; text models use fenced code blocks tagged ``mswea_bash_command`` and ``user`` observations. The
  run ends with a ``{role: exit, content, extra: {exit_status, submission}}`` message.

The file is decoded whole (:func:`~flightlog.importers.jsondoc.read_json_document`): invalid JSON, a
top-level value that is not an object or nesting deeper than 256 levels raises
:class:`~flightlog.errors.ImportFormatError` naming the file (nothing is recorded); a BOM, invalid UTF-8
and lone surrogates are kept as text and warned.

Mapping rules (messages are named ``messages[i]``, 0-based):

1. ``system`` messages before the first ``user`` message are ``RunStarted.system_prompt`` (joined by a
   blank line); the first ``user`` message starts the one run: ``RunStarted(run_id="<key>:messages:<i>",
   goal=<its text>, attachments=<image URLs>)``.
2. Each ``assistant`` message is ``LlmCompleted(turn=n)``: thinking (``thinking_blocks`` or
   ``reasoning_content``), its text, and its calls: the native ``tool_calls`` (``ProviderReplay(protocol=
   "openai.chat", model=info.config.model.model_name, native_message=<the message without extra>,
   tool_calls=<verbatim>)``), else one call per text action (``extra.actions``, or in 1.x the single
   fenced ``bash``/``mswea_bash_command`` block) named ``bash`` with ``{"command"}`` arguments and the id
   ``messages[i]`` (``#2``... for further actions). ``extra`` is kept as
   ``Custom("mini_swe_agent.message.extra", {index, ...})``; ``extra.response.usage`` adds its tokens
   (``total_tokens``) to the run.
3. A ``tool`` message is that call's ``ToolCompleted`` (paired by ``tool_call_id``, ``is_error`` when
   ``extra.returncode``, or the ``<returncode>`` the text opens with, is non-zero). A ``user`` message while a text action waits for its output is that
   action's ``ToolCompleted``. Any other later ``user`` message (format errors, timeouts the harness
   reports to the model) is ``Custom("kernel_note", {turn, text, index})``, so replay shows it as the user
   message the model read.
4. The ``exit`` message and ``info`` are kept (``Custom("mini_swe_agent.exit")``,
   ``Custom("mini_swe_agent.info")``); the run ends with ``RunTerminal(reason)``: ``completed`` for
   ``Submitted``, ``budget_exhausted`` for ``LimitsExceeded``, ``incomplete`` without a status, else the
   status itself (``Timeout``, ``InternalServerError``..., a failure).
5. Anything else (other roles, a later ``system`` message, non-object messages, unknown top-level keys) is
   kept whole as ``Custom("mini_swe_agent.message.<role>")`` / ``Custom("mini_swe_agent.run")``.

Session: ``key = "mini-swe-agent:<instance_id or file name without .traj.json>"``; times from 1.1's
``extra.timestamp`` (absent in 1.x: the session's times stay unknown); metadata: ``instance_id``,
``model``, ``mini_version``, ``trajectory_format``, ``exit_status``, ``instance_cost``, ``api_calls``.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from ..errors import ImportFormatError
from ..events import Custom, ProviderReplay, ToolCompleted
from ..messages import ToolResult
from ..replay import KERNEL_NOTE
from .base import ImportedSession, ImportWarning, JsonObj, as_obj, as_str
from .chatlog import (
    SessionBuilder,
    chat_content,
    chat_tool_calls,
    openai_usage_tokens,
    text_parts,
    thinking_parts,
)
from .jsondoc import read_json_document

__all__ = ["ACTION_TOOL", "FORMAT", "VERSION", "looks_like", "looks_like_file", "read"]

FORMAT = "mini-swe-agent"
"""``ImportedSession.source_format`` of sessions from this importer."""

VERSION = "1"
"""Importer version recorded with each import; bump when the mapping changes."""
ACTION_TOOL = "bash"
"""Tool name of the call recorded for a text action (mini-swe-agent runs every action in bash)."""

_PREFIX = "mini_swe_agent"
_BLOCK = re.compile(r"```(?:bash|mswea_bash_command)\s*\n(.*?)\n```", re.DOTALL)
_PROBE_BYTES = 64 * 1024
_TAIL_BYTES = 4 * 1024
_FORMAT_KEY = re.compile(rb'"trajectory_format"\s*:\s*"mini-swe-agent')
_RETURNCODE = re.compile(r"\s*<returncode>(-?\d+)</returncode>")
_KNOWN_TOP = frozenset({"info", "messages", "trajectory_format", "instance_id"})
_REASONS = {"Submitted": "completed", "LimitsExceeded": "budget_exhausted"}


def looks_like(value: Any) -> bool:
    """A decoded document is a mini-swe-agent trajectory: an object whose ``trajectory_format`` starts
    with ``mini-swe-agent`` and whose ``messages`` is a list."""
    if not isinstance(value, dict):
        return False
    fmt = value.get("trajectory_format")
    return (
        isinstance(fmt, str) and fmt.startswith("mini-swe-agent") and isinstance(value.get("messages"), list)
    )


def looks_like_file(path: Path) -> bool:
    """Cheap probe for folder imports: the first 64 KiB or the last 4 KiB (mini-swe-agent writes the key
    last) hold ``"trajectory_format": "mini-swe-agent``."""
    try:
        with path.open("rb") as fh:
            head = fh.read(_PROBE_BYTES)
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - _TAIL_BYTES))
            tail = fh.read()
    except OSError:
        return False
    return any(_FORMAT_KEY.search(chunk) is not None for chunk in (head, tail))


def read(path: Path, warnings: list[ImportWarning]) -> list[ImportedSession]:
    """Read one trajectory (see the module docstring).

    Raises:
        ImportFormatError: not valid JSON, not an object, or no ``messages`` list (names the file).
    """
    document = read_json_document(path, warnings)
    if not isinstance(document, dict) or not isinstance(document.get("messages"), list):
        raise ImportFormatError(path=str(path), reason='not a mini-swe-agent trajectory: no "messages" list')
    return [_Builder(path, warnings, document).build()]


def _epoch_ms(value: Any) -> int | None:
    """Epoch ms of a unix timestamp in seconds (int or float); None otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return int(value * 1000) if 0 <= value < 2**53 / 1000 else None


def _failed(message: JsonObj) -> bool:
    """Whether an observation reports a non-zero exit: ``extra.returncode`` (1.1), else the
    ``<returncode>N</returncode>`` the observation text opens with (what the model read, 1.x)."""
    code = as_obj(message.get("extra")).get("returncode")
    if isinstance(code, int) and not isinstance(code, bool):
        return code != 0
    found = _RETURNCODE.match(chat_content(message.get("content"))[0])
    return found is not None and int(found.group(1)) != 0


def _key_name(path: Path) -> str:
    name = path.name
    for suffix in (".traj.json", ".json"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return path.stem


class _Builder(SessionBuilder):
    def __init__(self, path: Path, warnings: list[ImportWarning], document: JsonObj) -> None:
        super().__init__(path, warnings, _PREFIX)
        self.document = document
        self.info = as_obj(document.get("info"))
        config = as_obj(self.info.get("config"))
        self.model = as_str(as_obj(config.get("model")).get("model_name"))
        self.instance_id = as_str(document.get("instance_id"))
        self.key = f"{FORMAT}:{self.instance_id or _key_name(path)}"
        self.system: list[str] = []
        self.started = False
        self.actions: list[str] = []  # call ids of text actions waiting for their output, in order
        self.exit_status = as_str(self.info.get("exit_status"))

    def build(self) -> ImportedSession:
        extra = {k: v for k, v in self.document.items() if k not in _KNOWN_TOP}
        if extra:
            self.record("run", extra)
        for index, message in enumerate(self.document["messages"]):
            self.feed(index, message)
        if not self.started:
            self.start(f"{self.key}:end", "", [])
        if "info" in self.document:
            self.record("info", self.document["info"])
        status = self.exit_status
        self.end_run(_REASONS.get(status, status) if status else "incomplete")
        return self.session(self.key, FORMAT, metadata=self.metadata())

    def metadata(self) -> JsonObj:
        stats = as_obj(self.info.get("model_stats"))
        return {
            "instance_id": self.instance_id,
            "model": self.model,
            "mini_version": as_str(self.info.get("mini_version")),
            "trajectory_format": as_str(self.document.get("trajectory_format")),
            "exit_status": self.exit_status,
            "instance_cost": stats.get("instance_cost")
            if isinstance(stats.get("instance_cost"), int | float)
            else None,
            "api_calls": stats.get("api_calls") if isinstance(stats.get("api_calls"), int) else None,
        }

    def start(self, run_id: str, goal: str, images: list[Any]) -> None:
        self.started = True
        system = "\n\n".join(self.system) if self.system else None
        self.start_run(run_id, goal, system=system, attachments=images)

    def feed(self, index: int, message: Any) -> None:
        if not isinstance(message, dict):
            self.record("message.record", {"index": index, "message": message})
            return
        extra = as_obj(message.get("extra"))
        self.at(_epoch_ms(extra.get("timestamp")))
        role = message.get("role")
        if role == "system" and not self.started:
            self.system.append(chat_content(message.get("content"))[0])
        elif role == "user":
            self.on_user(index, message)
        elif role == "assistant":
            self.on_assistant(index, message)
        elif role == "tool":
            self.on_tool(index, message)
        elif role == "exit":
            self.exit_status = as_str(extra.get("exit_status")) or self.exit_status
            self.record("exit", {"index": index, **message})
        else:
            kind = role if isinstance(role, str) and role.isidentifier() else "record"
            self.record(f"message.{kind}", {"index": index, **message})

    def keep_extra(self, index: int, message: JsonObj, known: frozenset[str]) -> None:
        rest = {k: v for k, v in message.items() if k not in known}
        if rest:
            self.record("message.extra", {"index": index, **rest})

    def on_user(self, index: int, message: JsonObj) -> None:
        text, images = chat_content(message.get("content"))
        if not self.started:
            self.start(f"{self.key}:messages:{index}", text, images)
            self.keep_extra(index, message, frozenset({"role", "content"}))
            return
        if self.actions:
            call = self.calls.answer_id(self.actions.pop(0))
            if call is not None:
                result = ToolResult(call_id=call.call_id, output=text, is_error=_failed(message))
                self.emit(ToolCompleted(turn=call.turn, results=[result]))
        else:
            note = {"turn": self.turn, "text": text, "index": index}
            self.emit(Custom(custom_kind=KERNEL_NOTE, payload=note))
        self.keep_extra(index, message, frozenset({"role", "content"}))

    def on_assistant(self, index: int, message: JsonObj) -> None:
        if not self.started:
            self.start(f"{self.key}:messages:{index}", "", [])
        extra = as_obj(message.get("extra"))
        text, images = chat_content(message.get("content"))
        native_calls = chat_tool_calls(message)
        replay = None
        if native_calls or message.get("reasoning_content") is not None:
            native = {k: v for k, v in message.items() if k != "extra"}
            raw_calls = message.get("tool_calls") if isinstance(message.get("tool_calls"), list) else None
            replay = ProviderReplay(
                protocol="openai.chat",
                model=self.model,
                native_message=native,
                tool_calls=raw_calls,
                reasoning_content=as_str(message.get("reasoning_content")),
            )
        calls = native_calls or self.text_actions(index, text, extra)
        tokens = openai_usage_tokens(as_obj(extra.get("response")).get("usage"))
        turn = self.complete(
            text_parts(text, thinking_parts(message), images),
            calls,
            where=f"messages[{index}]",
            replay=replay,
            tokens=tokens,
        )
        if not native_calls:
            self.actions = [c.call_id for c in self.calls.pending() if c.turn == turn]
        self.keep_extra(index, message, frozenset({"role", "content", "tool_calls", "reasoning_content"}))

    def text_actions(self, index: int, text: str, extra: JsonObj) -> list[tuple[str, str, str]]:
        """Rule 2: the commands the harness ran for a text response."""
        actions = extra.get("actions")
        if isinstance(actions, list):
            commands = [as_str(as_obj(a).get("command")) for a in actions]
        else:
            blocks = _BLOCK.findall(text)
            commands = blocks if len(blocks) == 1 else []
        native = f"messages[{index}]"
        return [(native, ACTION_TOOL, json.dumps({"command": c})) for c in commands if c is not None]

    def on_tool(self, index: int, message: JsonObj) -> None:
        native = as_str(message.get("tool_call_id"))
        text, _ = chat_content(message.get("content"))
        if native is None:
            self.record("message.tool", {"index": index, **message})
            return
        self.result(native, text, is_error=_failed(message), where=f"messages[{index}]")
        self.keep_extra(index, message, frozenset({"role", "content", "tool_call_id"}))
