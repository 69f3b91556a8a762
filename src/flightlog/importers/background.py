"""Background work started inside an imported session → child runs of seed 002 source ``task``.

Claude Code runs a shell command in the background when its ``Bash`` tool is called with
``run_in_background: true``: the call's result says ``Command running in background with ID: <task id>``
(the transcript's ``toolUseResult.backgroundTaskId``), and the command goes on beside the conversation. The
model then reads its output with ``BashOutput`` (``bash_id``) or ``TaskOutput`` (``task_id``), stops it
with ``KillShell``/``KillBash`` (``shell_id``) or ``TaskStop`` (``task_id``), and Claude Code tells it
that the task ended with a ``<task-notification>`` message (``<task-id>``, ``<status>``, ``<summary>``).

:func:`task_sessions` reads those facts back from the events the Claude Code importer already built (the
calls and results it recorded; nothing is read from the file twice) and returns one child
:class:`ImportedSession` per background task, so each task is a run of its own in ``flightlog runs``:

* ``key = "<parent key>:task:<task id>"``, ``parent_key`` = the session that started it, ``task`` = the
  call's ``description`` (else its command), ``metadata = {"run_source": "task", "task_id", "command",
  "description", "started_by": <call id>}`` (the runs fold takes the source from ``run_source``).
* Events: ``RunStarted(run_id=<key>, goal=<the command>)``; each output read, stop or notification the
  parent recorded as ``Custom("background_task.output" | "background_task.stop" |
  "background_task.notification", {call_id, status?, exit_code?, output?, ...})`` in the parent's order and
  at the parent's times; then ``RunTerminal(reason)`` once the transcript shows the task ended:
  ``completed`` (status ``completed`` and exit code 0 or none), ``failed`` (``failed``, or a non-zero exit
  code), ``killed`` (a stop the tool confirmed, or status ``killed``). A task the transcript never shows
  ending has no ``RunTerminal``: its run stays in flight (``incomplete`` when the import seals it), never a
  guessed outcome.

Statuses and exit codes are read from the tools' own result text (``<status>…</status>``,
``<exit_code>…</exit_code>``, ``<stdout>``/``<stderr>`` or the text itself as output).

Codex CLI's background terminals (unified exec) follow the same rules: an ``exec_command`` call whose output
says ``Process running with session ID <n>`` started task ``<n>``; each ``write_stdin`` call with that
``session_id`` is an output read (``Custom("background_task.output", {call_id, chars?, output})``), and
the first output saying ``Process exited with code <c>`` ends it (``completed`` for 0, else ``failed``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..encoding import canonical_json
from ..events import Custom, RunStarted, RunTerminal, SessionEvent, ToolCompleted, ToolRequested
from ..messages import ToolCall
from .base import ImportedSession, JsonObj, events_of

__all__ = ["task_sessions", "with_task_sessions"]

_STARTED = re.compile(r"running in background with ID: ([A-Za-z0-9_.-]+?)\.?(?:\s|$)")
_TAG = re.compile(r"<(status|exit_code|stdout|stderr|summary|task-id|tool-use-id)>(.*?)</\1>", re.DOTALL)
_NOTIFICATION = re.compile(r"<task-notification>(.*?)(?:</task-notification>|$)", re.DOTALL)
_READERS = {"BashOutput": "bash_id", "TaskOutput": "task_id"}
_STOPPERS = {"KillShell": "shell_id", "KillBash": "shell_id", "TaskStop": "task_id"}
_CODEX_STARTED = re.compile(r"Process running with session ID (\d+)")
_CODEX_EXITED = re.compile(r"Process exited with code (-?\d+)")
_WALKED = frozenset({"tool_requested", "tool_completed", "run_started", "custom"})
"""The kinds :class:`_Finder` reads (the others cannot start, feed or end a background task)."""
_NOTIFIED = b"<task-notification>"
"""A ``custom`` or ``run_started`` event matters only when one of its strings holds this (``on_text`` finds
nothing in a text without it; read in its bytes, see ``events_of``)."""
_CALL_ID = re.compile(rb'"call_id":("(?:[^"\\]|\\.)*")')
"""A result's ``call_id`` in a ``tool_completed`` event's canonical bytes, as its RFC 8785 string (a ``"``
inside a string is escaped, so ``"call_id":"`` is only ever the key itself)."""
_WATCHED_NAMES = frozenset({"Bash", "exec_command", "write_stdin", *_READERS, *_STOPPERS})
"""The tool names whose calls ``on_result`` reads (a result of any other call changes nothing)."""
_ID = re.compile(rb'"id":("(?:[^"\\]|\\.)*")')
"""A call's ``id`` in a ``tool_requested`` event's canonical bytes, as its RFC 8785 string (the only
``"id":"`` there: a ``"`` inside a string is escaped)."""
_NAMED_WATCHED = tuple(b'"name":' + canonical_json(name) for name in sorted(_WATCHED_NAMES - {"Bash"}))
"""A ``ToolCall`` of a watched name other than ``Bash``, as its ``name`` member in a ``tool_requested``
event's canonical bytes (RFC 8785 escapes every ``"`` inside a string, so ``"name":"`` is only ever the key
itself)."""
_ANY_NAMED_WATCHED = re.compile(b"|".join(re.escape(named) for named in _NAMED_WATCHED))
"""Any of :data:`_NAMED_WATCHED` in the bytes: one search of them (issue 19: a test of each in turn, ~7x the
time on the bench transcript's ``tool_requested`` events)."""
_NAMED_BASH = b'"name":"Bash"'
_BACKGROUND_HINTS = (b"run_in_background", b"\\\\u")
r"""A ``Bash`` call is watched only when its arguments set ``run_in_background``: their text then spells
the key as it is or with a ``\u`` escape (the only escape a letter or ``_`` can take), which the
canonical bytes show as ``\\u`` (the backslash escaped)."""
_ENDED = {"completed": "completed", "failed": "failed", "killed": "killed", "error": "failed"}


@dataclass
class _Task:
    task_id: str
    call: ToolCall
    arguments: JsonObj
    started_at: int | None
    events: list[SessionEvent] = field(default_factory=list)
    times: list[int | None] = field(default_factory=list)
    reason: str | None = None


def _arguments(call: ToolCall) -> JsonObj:
    try:
        value = json.loads(call.arguments)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _tags(text: str) -> dict[str, str]:
    return {name: value.strip() for name, value in _TAG.findall(text)}


def _ending(status: str | None, exit_code: str | None) -> str | None:
    """The run's outcome from a reported status and exit code (None while it runs)."""
    reason = _ENDED.get((status or "").lower())
    if reason == "completed" and exit_code not in (None, "", "0"):
        return "failed"
    return reason


class _Finder:
    """Walks the parent's events once, following each background task (see the module docstring)."""

    def __init__(self, session: ImportedSession) -> None:
        self.session = session
        self.calls: dict[str, ToolCall] = {}  # the calls whose results on_result reads, by id
        self.watched: set[bytes] = set()  # their ids as RFC 8785 strings (what a result's bytes hold)
        self.tasks: dict[str, _Task] = {}
        self.times = session.event_times_ms or [None] * len(session.events)

    def walk(self) -> list[_Task]:
        if len(self.times) != len(self.session.events):
            raise ValueError("event_times_ms must have one item per event")
        # Only the events that can matter are decoded from a spool (issue 19: the finder decoded every
        # tool result, ~a third of the import's second decode): a tool result only when it answers a
        # watched call, a prompt or a kept record only when its text has a task notification.
        needs: dict[str, bytes | Callable[[bytes], bool]] = {
            "custom": _NOTIFIED,
            "run_started": _NOTIFIED,
            "tool_completed": self.answers_watched,
            "tool_requested": self.may_change_watch,
        }
        for index, event in events_of(self.session.events, _WALKED, needs):
            at = self.times[index]
            if isinstance(event, ToolRequested):
                for call in event.calls:
                    self.watch(call)
            elif isinstance(event, ToolCompleted):
                for result in event.results:
                    self.on_result(result.call_id, result.output, result.is_error, at)
            elif isinstance(event, RunStarted):
                self.on_text(event.goal, at)
            elif isinstance(event, Custom) and isinstance(event.payload, dict):
                for value in event.payload.values():
                    if isinstance(value, str) and "<task-notification>" in value:
                        self.on_text(value, at)
        return list(self.tasks.values())

    def watch(self, call: ToolCall) -> None:
        """Remember ``call`` (replacing an earlier call with its id) when ``on_result`` reads its results:
        a call of a name in ``_WATCHED_NAMES``, a ``Bash`` call only when run in the background."""
        key = canonical_json(call.id)
        if call.name in _WATCHED_NAMES and (
            call.name != "Bash" or _arguments(call).get("run_in_background") is True
        ):
            self.calls[call.id] = call
            self.watched.add(key)
        elif self.calls.pop(call.id, None) is not None:
            self.watched.discard(key)

    def may_change_watch(self, data: bytes) -> bool:
        """Whether :meth:`watch` of a ``tool_requested`` event's calls (given as its canonical bytes) can
        change what is watched: some call has a watched name, or reuses the id of a watched call (to forget
        it); a ``Bash`` call counts only when its arguments may set ``run_in_background``. Otherwise each of
        its calls is one :meth:`watch` leaves alone, so the event need not be decoded. The ids are read from the bytes and looked up (a search of
        the bytes for every watched id would cost the number of watched calls per event: quadratic)."""
        if _ANY_NAMED_WATCHED.search(data) is not None:
            return True
        watched = self.watched
        if watched and not watched.isdisjoint(_ID.findall(data)):
            return True
        return _NAMED_BASH in data and any(hint in data for hint in _BACKGROUND_HINTS)

    def answers_watched(self, data: bytes) -> bool:
        """Whether a ``tool_completed`` event's canonical bytes hold a result for a watched call (may say
        True for an id that only appears in an output's text: the event is then decoded for nothing)."""
        watched = self.watched
        return bool(watched) and not watched.isdisjoint(_CALL_ID.findall(data))

    def on_result(self, call_id: str, output: str, is_error: bool, at: int | None) -> None:
        call = self.calls.get(call_id)
        if call is None:
            return
        arguments = _arguments(call)
        if call.name == "Bash":  # watched only when run in the background
            started = _STARTED.search(output)
            if started and started.group(1) not in self.tasks:
                self.tasks[started.group(1)] = _Task(started.group(1), call, arguments, at)
            return
        if call.name == "exec_command":
            started = _CODEX_STARTED.search(output)
            if started and started.group(1) not in self.tasks:
                self.tasks[started.group(1)] = _Task(started.group(1), call, arguments, at)
            return
        if call.name == "write_stdin":
            task = self.tasks.get(str(arguments.get("session_id")))
            if task is not None:
                chars = arguments.get("chars")
                payload = {"call_id": call_id, **({"chars": chars} if chars else {}), "output": output}
                self.add(task, "background_task.output", payload, at)
                exited = _CODEX_EXITED.search(output)
                if exited and task.reason is None:
                    task.reason = "completed" if exited.group(1) == "0" else "failed"
            return
        if call.name in _READERS:
            task = self.tasks.get(str(arguments.get(_READERS[call.name])))
            if task is not None:
                tags = _tags(output)
                payload = {"call_id": call_id, **tags, **({} if tags.get("stdout") else {"output": output})}
                self.add(task, "background_task.output", payload, at)
                task.reason = task.reason or _ending(tags.get("status"), tags.get("exit_code"))
        elif call.name in _STOPPERS:
            task = self.tasks.get(str(arguments.get(_STOPPERS[call.name])))
            if task is not None:
                self.add(
                    task,
                    "background_task.stop",
                    {"call_id": call_id, "output": output, "is_error": is_error},
                    at,
                )
                if not is_error:
                    task.reason = task.reason or "killed"

    def on_text(self, text: str, at: int | None) -> None:
        for block in _NOTIFICATION.findall(text):
            tags = _tags(block)
            task = self.tasks.get(tags.get("task-id", ""))
            if task is not None:
                self.add(task, "background_task.notification", tags, at)
                task.reason = task.reason or _ending(tags.get("status"), tags.get("exit_code"))

    @staticmethod
    def add(task: _Task, kind: str, payload: JsonObj, at: int | None) -> None:
        task.events.append(Custom(custom_kind=kind, payload=payload))
        task.times.append(at)


def task_sessions(session: ImportedSession) -> list[ImportedSession]:
    """One child session per background task the session started (see the module docstring)."""
    return [_child(session, task) for task in _Finder(session).walk()]


def _child(parent: ImportedSession, task: _Task) -> ImportedSession:
    key = f"{parent.key}:task:{task.task_id}"
    command = str(task.arguments.get("command") or task.arguments.get("cmd") or "")
    description = task.arguments.get("description")
    events: list[SessionEvent] = [RunStarted(run_id=key, goal=command), *task.events]
    times: list[int | None] = [task.started_at, *task.times]
    if task.reason is not None:
        events.append(RunTerminal(reason=task.reason, turns_used=0, total_tokens=0))
        times.append(times[-1])
    known = [t for t in times if t is not None]
    metadata: dict[str, Any] = {
        "run_source": "task",
        "task_id": task.task_id,
        "command": command,
        "started_by": task.call.id,
        **({"description": description} if isinstance(description, str) else {}),
    }
    return ImportedSession(
        key=key,
        task=(description if isinstance(description, str) else command)[:200],
        source_format=parent.source_format,
        events=events,
        parent_key=parent.key,
        metadata=metadata,
        started_at_ms=known[0] if known else None,
        ended_at_ms=known[-1] if known else None,
        event_times_ms=times if known else [],
    )


def with_task_sessions(sessions: Iterable[ImportedSession]) -> list[ImportedSession]:
    """``sessions`` followed by the task sessions of each (the order ``import_file`` records them in)."""
    found = list(sessions)
    return found + [child for session in found for child in task_sessions(session)]
