"""Claude Code session transcripts (``~/.claude/projects/*/<sessionId>.jsonl``) → flightlog events.

A Claude Code transcript is one JSON object a line. ``read`` streams it with
:func:`~flightlog.importers.base.read_jsonl` (line by line: a BOM, torn lines, U+2028, lone surrogates and
lines of tens of MB are handled there) and returns the main :class:`ImportedSession` plus one child
session per sub-agent. Records are processed in file order; each kind has its own small mapper.

Record → event rules:

* **Prompt** (a ``type:"user"`` line that is the human's input): closes the open run with ``RunTerminal``
  and starts ``RunStarted(run_id=<line uuid>, goal=<text blocks joined by "\\n">)``; image blocks become
  ``attachments`` (``data:`` URI or URL refs). Not prompts: tool-result carriers, ``isMeta`` lines
  (caveats, expanded slash-command bodies), ``isCompactSummary`` lines, interrupt markers and
  ``<local-command-stdout|stderr|caveat>`` output; a ``<command-name>`` line is a prompt (a slash command
  the user typed, e.g. a custom ``/plugin:cmd args``) unless its parent is a ``<local-command-caveat>``
  meta line, which Claude Code writes only before local UI commands (``/mcp``, ``/model``).
* **Assistant** lines sharing ``message.id`` are ONE completion, even when tool results of its earlier
  ``tool_use`` blocks are written between its lines (streamed tool execution). Tool-result lines and
  bookkeeping records that arrive while a completion is open are deferred until it closes, so the ledger
  reads ``LlmCompleted``, ``ToolRequested``, then the results. ``LlmCompleted(turn=n)`` (n: 1-based count
  of completions in the session) carries text/thinking/redacted-thinking parts, ``tool_calls`` (``input``
  as ``json.dumps`` text) and ``ProviderReplay(protocol="anthropic.messages", provider="anthropic",
  model, native_blocks=<the blocks verbatim>)`` so thinking signatures stay byte-exact.
* **Tool results** pair to calls by ``tool_use_id``: ``ToolCompleted(turn=<turn of the call>)`` with the
  content flattened to text (image blocks become ``[image: <media type>, <n> base64 chars]``). A permission
  rejection (``is_error`` and "The user doesn't want to proceed…") also yields ``ToolDenied`` before it.
  A later completion reusing a call id makes a new call ``<id>#2``, ``#3``... (warned; an empty id ``""`` is
  recorded as ``no-id``, ``no-id#2``...); a result pairs with the earliest unanswered call of its
  ``tool_use_id`` (:class:`~flightlog.importers.jsondoc.CallBook`, as for OpenHands and SWE-agent). A call
  repeated inside the same completion (same ``message.id``) and a result repeating word for word the last
  result of an id with no call left open are skipped with a warning. Any other result without a
  call still becomes ``ToolCompleted`` plus ``Custom("claude_code.orphan_tool_result")``; a call without a
  result at end of file stays pending and gets ``Custom("claude_code.pending_tool_call")``.
* **Runs** end at the next prompt or at end of file with ``RunTerminal(reason, turns_used=<completions in
  the run>, total_tokens=<sum of usage input_tokens + cache_creation_input_tokens + cache_read_input_tokens
  + output_tokens of those completions>)``. Reasons:
  ``aborted`` after an interrupt, ``rewound`` when the next prompt rewinds, ``completed`` when the next
  prompt simply follows; at end of file ``completed`` if the run's last completion called no tool and no
  call is pending (or the parent reported the sub-agent ``completed``), else ``incomplete``.
* **Interrupt** (``[Request interrupted by user…``, with or without "for tool use"):
  ``OperationCancelled(reason=user, operation_id=<run id>, pending_call_ids=<unanswered calls>)``; the
  calls stay pending unless a result follows.
* **Rewind**: the file is a tree through ``parentUuid``. Every record remembers the replay history length
  (number of replay messages) at its position; a non-conversational record inherits its parent's. A
  prompt whose parent sits before the latest prompt/completion/compaction is a rewind: the old run ends
  (``RunTerminal(reason="rewound")``), then ``Rollbacked(checkpoint_history_len=<length at the parent>)``,
  then the new ``RunStarted``. Parallel tool results (which point at their own call's line) never trigger
  it because only prompts are checked, against the latest *core* message, not the latest line. History
  length follows :func:`flightlog.replay.reconstruct`: ``run_started`` +1, ``llm_completed`` +1,
  ``tool_completed`` +1 per result, ``compressed`` replaces the messages of its archived range by one
  summary, ``rollbacked`` truncates. A prompt whose parent is
  unknown (absent, null, or in another file) is never a rewind.
* **Compaction**: a ``compact_boundary`` system record is kept as ``Custom("claude_code.compact_boundary")``
  (its trigger and token count) and the ``isCompactSummary`` line that follows becomes
  ``Compressed(action="compact", summary=<its text>, archived_seq_range=(first, last))``: the recorded
  seqs (``import_file`` writes one ``import_source`` header at seq 0, hence ``_SEQ_OFFSET``) from just
  after the previous ``Compressed`` (or the first event) to the last event before the boundary,
  ``(0, 0)`` when nothing precedes it. A boundary without a summary still yields a ``Compressed`` with no
  summary; a summary line without a boundary (older versions) covers everything before it.
* **Sub-agents**: ``agent_progress`` records (the sub-agent's messages wrapped in the parent file),
  ``isSidechain`` records and ``<sessionId>/subagents/agent-*.jsonl`` files beside the transcript become
  child sessions keyed ``claude-code:<sessionId>:agent:<agentId>`` (or ``…:sidechain:<root uuid>``) with
  ``parent_key`` set. A sub-agent file replaces the child rebuilt from progress records (it is complete).
  A sub-agent file belongs to the session named by its folder (``<sessionId>/subagents/``) whatever
  ``sessionId`` its records carry (some versions write ``agent-<id>``), and its records to the agent of
  its name unless they name an ``agentId``; imported on its own, it is that agent's child session of
  ``claude-code:<sessionId>``. A folder import skips a sub-agent file whose parent transcript is beside
  it (:func:`imported_with_parent`): the parent's import records it, once.
  The parent gets ``AgentProcessChanged(state="spawned")`` at the first sign of the agent and
  ``state="exited"`` (``result_termination`` from the result's ``status``) when the spawning ``Task``
  call's result arrives; its ``status``/``totalTokens``/``totalDurationMs``/``totalToolUseCount`` go to
  the child's metadata. A progress record's ``prompt`` and ``normalizedMessages`` copies are not kept.
* A line that is no JSON object (torn, malformed) is kept byte-exact as
  ``Custom("claude_code.unparsed_line", {"line", "text"|"base64"})`` (warned with its line number).
* Everything else (``progress``/hook records, ``file-history-snapshot``, ``queue-operation``, ``summary``,
  ``system`` records, unknown types) is kept as ``Custom(custom_kind="claude_code.<type>", payload=<the
  record without cwd>)``; user lines that are not prompts as ``claude_code.user.meta``,
  ``claude_code.user.local_command`` or ``claude_code.user.command_output``, and non-text, non-image
  blocks of a prompt or result line as ``claude_code.user.extra_content``; strings longer than 32 Ki chars in such payloads are truncated with a
  marker. Numbers RFC 8785 cannot hold (NaN, ±Infinity, integers beyond ±(2**53-1)) are written as strings
  with a warning. The ``toolUseResult`` field of result lines is not kept (it repeats the result content).

Times: each event carries (``ImportedSession.event_times_ms``) the ``timestamp`` of the record that produced
it (a completion: its latest line's; events with no record of their own: the latest time before them).

Keys and metadata: ``ImportedSession.key`` is ``claude-code:<sessionId>`` (``claude-code:<file stem>`` while no
line carries a ``sessionId``: a session an import recorded under it is continued once the grown file shows its
id, ``ImportedSession.earlier_keys``); metadata holds ``sessionId``,
``version``, ``gitBranch`` (never ``cwd`` or other paths); ``started_at_ms``/``ended_at_ms`` are the
earliest/latest top-level ``timestamp`` (epoch ms). Duplicated records (same ``uuid``) are skipped and
counted in one warning naming the first duplicate's line.

Resume copies (``read(..., recorded_runs=...)``, found by :mod:`flightlog.importers.resume`): a run whose
prompt ``uuid`` another recorded session already records keeps its events, preceded (at the first run
of a copy) by ``Custom("claude_code.resume_copy", {"recorded_in", "first_run"})``, and ends with
``RunTerminal(turns_used=0, total_tokens=0)``; the first own run after a copy is preceded by
``Custom("claude_code.resume_copy_end", {"next_run"})``; metadata gets ``resumed_from`` (the session
recording the last copied run) and ``resume_copy`` (run id → session).
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..encoding import (
    TextPartFields,
    llm_completed_bytes,
    operation_cancelled_bytes,
    run_started_bytes,
    run_terminal_bytes,
    tool_completed_bytes,
    tool_requested_bytes,
)
from ..events import (
    AgentProcessChanged,
    CancellationReason,
    Compressed,
    LlmCompleted,
    OperationCancelled,
    ProviderReplay,
    Rollbacked,
    RunStarted,
    RunTerminal,
    SessionEvent,
    ToolCompleted,
    ToolDenied,
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
    TASK_CHARS,
    EventSpool,
    ImportedSession,
    ImportWarning,
    append_custom,
    new_event_list,
    output_digest,
    read_jsonl,
    unparsed_payload,
)
from .jsondoc import CallBook

__all__ = ["FORMAT", "VERSION", "companion_files", "imported_with_parent", "looks_like", "read"]

FORMAT = "claude-code"
"""``ImportedSession.source_format`` of sessions from this importer."""

VERSION = "1"
"""Importer version recorded with each import; bump when the mapping changes."""

JsonObj = dict[str, Any]

_KEY_PREFIX = "claude-code:"
_MAX_CUSTOM_CHARS = 32 * 1024
_MAX_SAFE_INTEGER = 2**53 - 1
_SEQ_OFFSET = 1
"""Seq of ``events[0]`` once recorded: ``import_file`` records one ``import_source`` header first."""
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

_INTERRUPT_PREFIX = "[Request interrupted by user"
_CAVEAT_PREFIX = "<local-command-caveat>"
_COMMAND_OUTPUT_PREFIXES = ("<local-command-stdout>", "<local-command-stderr>", _CAVEAT_PREFIX)
_COMMAND_TAG = "<command-name>"
_REJECTION_MARKERS = (
    "The user doesn't want to proceed with this tool use",
    "The user doesn't want to take this action",
    "The tool use was rejected",
)
_DROPPED_KEYS = frozenset({"cwd"})
_AGENT_STAT_KEYS = ("status", "totalDurationMs", "totalTokens", "totalToolUseCount")
_TERMINAL_STATUSES = frozenset({"completed", "error", "failed", "cancelled", "killed", "interrupted"})

# Record kinds (the result of ``_classify``).
_PROMPT = "prompt"
_ASSISTANT = "assistant"
_TOOL_RESULTS = "tool_results"
_INTERRUPT = "interrupt"
_META = "meta"
_COMMAND_OUTPUT = "command_output"
_LOCAL_COMMAND = "local_command"
_COMPACT_BOUNDARY = "compact_boundary"
_COMPACT_SUMMARY = "compact_summary"
_AGENT_PROGRESS = "agent_progress"
_SIDECHAIN_SPAWN = "sidechain_spawn"
_OTHER = "other"
_UNPARSED = "unparsed"

_DEFERRABLE = frozenset(
    {
        _TOOL_RESULTS,
        _META,
        _COMMAND_OUTPUT,
        _LOCAL_COMMAND,
        _AGENT_PROGRESS,
        _SIDECHAIN_SPAWN,
        _OTHER,
        _UNPARSED,
    }
)
"""Kinds that do not end an open completion: they are processed right after it is emitted."""

_KNOWN_TYPES = frozenset(
    {"user", "assistant", "system", "summary", "progress", "file-history-snapshot", "queue-operation"}
)


# ─── Public API ───────────────────────────────────────────────────────────────────────────────


def looks_like(record: dict[str, Any]) -> bool:
    """Whether a decoded record from a file's first lines looks like Claude Code JSONL.

    Args:
        record: One decoded JSON object.

    Returns:
        True for Claude Code record shapes: ``user``/``assistant`` lines with ``message`` and ``uuid`` or
        ``sessionId``, ``summary`` with ``leafUuid``, ``file-history-snapshot`` with ``snapshot``, and other
        known types carrying ``sessionId`` or ``uuid``. False for Codex rollouts (``payload`` envelopes).
    """
    rtype = record.get("type")
    if not isinstance(rtype, str) or rtype not in _KNOWN_TYPES or "payload" in record:
        return False
    if rtype in ("user", "assistant"):
        return isinstance(record.get("message"), dict) and ("uuid" in record or "sessionId" in record)
    if rtype == "summary":
        return "leafUuid" in record
    if rtype == "file-history-snapshot":
        return "snapshot" in record
    if rtype == "queue-operation":
        return "operation" in record
    return "sessionId" in record or "uuid" in record


def read(
    path: Path, warnings: list[ImportWarning], *, recorded_runs: Mapping[str, str] | None = None
) -> list[ImportedSession]:
    """Import one Claude Code transcript and the sub-agent files stored beside it.

    Args:
        path: The session JSONL file. Sub-agent files are looked up in ``<path without .jsonl>/subagents/
            agent-*.jsonl``.
        warnings: Receives skipped lines (with 1-based line numbers), repaired values and duplicates.
        recorded_runs: Runs another session already records (prompt ``uuid`` → that session's id): a run
            of this file started by one of these prompts is a *resume copy* (module docstring).

    Returns:
        The main session first (omitted when the file holds only sub-agent records), then child sessions
        (``parent_key`` set), in order of first appearance, then one child per background shell task
        (:mod:`flightlog.importers.background`: source ``task``).
    """
    own_agent = _subagent_file_id(path)
    parent_id = path.parent.parent.name if own_agent is not None else path.stem
    importer = _FileImporter(path.name, parent_id, warnings, agent_file=own_agent)
    importer.ctx.recorded_runs = dict(recorded_runs or {})
    importer.consume(path)
    sessions = {session.key: session for session in importer.finish()}
    for agent_file in _subagent_files(path):
        child_importer = _FileImporter(
            agent_file.name, importer.ctx.session_id, warnings, agent_file=_subagent_file_id(agent_file)
        )
        child_importer.ctx.recorded_runs = importer.ctx.recorded_runs
        child_importer.consume(agent_file)
        child_importer.ctx.agent_stats.update(importer.ctx.agent_stats)  # the parent saw how it ended
        for session in child_importer.finish():
            session.metadata.update(importer.ctx.agent_stats.get(session.key, {}))
            sessions[session.key] = session
    found = with_task_sessions(sessions.values())
    seen, main = importer.ctx.seen_session_id, importer.ctx.main_key
    if own_agent is None and seen is not None and seen != parent_id:
        # Until a line carried the sessionId, this file was keyed by its stem: an import of it then recorded
        # the sessions under those keys, which an import of the grown file continues (import_file).
        for session in found:
            if session.key == main or session.key.startswith(main + ":"):
                session.earlier_keys = (_KEY_PREFIX + parent_id + session.key[len(main) :],)
    return found


# ─── Shared per-file context ──────────────────────────────────────────────────────────────────


@dataclass
class _Context:
    """What every session builder of one file shares: the file name, warnings and the session id."""

    name: str
    fallback_id: str
    warnings: list[ImportWarning]
    seen_session_id: str | None = None
    duplicates: int = 0
    first_duplicate_line: int | None = None
    agent_stats: dict[str, JsonObj] = field(default_factory=dict)
    recorded_runs: dict[str, str] = field(default_factory=dict)

    @property
    def session_id(self) -> str:
        """The first ``sessionId`` seen in the file, else the fallback (the file stem)."""
        return self.seen_session_id or self.fallback_id

    @property
    def main_key(self) -> str:
        """Key of the file's main session: ``claude-code:<sessionId>``."""
        return _KEY_PREFIX + self.session_id

    def note_session_id(self, record: JsonObj) -> None:
        """Remember the first non-empty ``sessionId``."""
        value = record.get("sessionId")
        if self.seen_session_id is None and isinstance(value, str) and value:
            self.seen_session_id = value

    def warn(self, line: int | None, reason: str) -> None:
        """Append an :class:`ImportWarning` for this file."""
        self.warnings.append(ImportWarning(self.name, line, reason))

    def skip_duplicate(self, line: int, record: JsonObj, seen: set[str]) -> bool:
        """True, counting it, when the record's ``uuid`` is in ``seen``; else False (the uuid joins ``seen``)."""
        uuid = record.get("uuid")
        if not isinstance(uuid, str):
            return False
        if uuid in seen:
            self.note_duplicate(line)
            return True
        seen.add(uuid)
        return False

    def note_duplicate(self, line: int) -> None:
        """Count a record skipped because its ``uuid`` was already imported."""
        self.duplicates += 1
        if self.first_duplicate_line is None:
            self.first_duplicate_line = line

    def agent_key(self, agent_id: str) -> str:
        """Key of a sub-agent's child session: ``claude-code:<sessionId>:agent:<agentId>``."""
        return f"{self.main_key}:agent:{agent_id}"


# ─── Small pure helpers ───────────────────────────────────────────────────────────────────────


def _subagent_file_id(path: Path) -> str | None:
    """The agent id of a ``<sessionId>/subagents/agent-<id>.jsonl`` path, else None."""
    if path.parent.name != "subagents" or not path.name.startswith("agent-") or path.suffix != ".jsonl":
        return None
    return path.stem.removeprefix("agent-") or None


def imported_with_parent(path: Path) -> bool:
    """True for a ``<sessionId>/subagents/agent-*.jsonl`` file whose parent transcript
    ``<sessionId>.jsonl`` sits beside the folder: importing the parent imports it (as a child session), so
    a folder import leaves it out rather than importing the sub-agent twice."""
    return _subagent_file_id(path) is not None and path.parent.parent.with_suffix(".jsonl").is_file()


def companion_files(path: Path) -> list[Path]:
    """The files :func:`read` reads besides ``path``: ``<stem>/subagents/agent-*.jsonl`` beside the
    transcript, sorted by name (empty when absent). An import of ``path`` is up to date only when these
    are unchanged too."""
    folder = path.with_suffix("") / "subagents"
    return sorted(folder.glob("agent-*.jsonl")) if folder.is_dir() else []


_subagent_files = companion_files


def _str(value: Any) -> str:
    """``value`` if it is a string, else ``""``."""
    return value if isinstance(value, str) else ""


def _uint(value: Any) -> int:
    """A non-negative JSON integer, else 0 (booleans and floats count as 0); capped at 2**53-1."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return 0
    return min(value, _MAX_SAFE_INTEGER)


def _epoch_ms(value: Any) -> int | None:
    """Epoch milliseconds of an ISO 8601 timestamp (``...Z`` or with offset), None if unparsable."""
    if not isinstance(value, str):
        return None
    return _epoch_ms_of(value)


@lru_cache(maxsize=64)  # a record's timestamp is read two or three times (envelope, event time, completion)
def _epoch_ms_of(value: str) -> int | None:
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    ms = (moment - _EPOCH) // timedelta(milliseconds=1)
    return ms if 0 <= ms <= _MAX_SAFE_INTEGER else None


def _message(record: JsonObj) -> JsonObj:
    """The record's ``message`` object ({} when absent)."""
    message = record.get("message")
    return message if isinstance(message, dict) else {}


def _blocks(content: Any) -> list[JsonObj]:
    """Content as a list of block objects: a string becomes one text block; non-objects are dropped."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [block for block in content if isinstance(block, dict)]
    return []


def _text_of(content: Any) -> str:
    """The text blocks of ``content`` joined by newlines."""
    return "\n".join(_str(b.get("text")) for b in _blocks(content) if b.get("type") == "text")


def _is_agent_progress(record: JsonObj) -> bool:
    """A ``progress`` record wrapping one sub-agent message (``data.type == "agent_progress"``)."""
    data = record.get("data")
    return (
        record.get("type") == "progress"
        and isinstance(data, dict)
        and data.get("type") == "agent_progress"
        and isinstance(data.get("message"), dict)
    )


def _progress_agent_id(record: JsonObj) -> str:
    """The sub-agent of an ``agent_progress`` record: ``data.agentId``, else the spawning call's id."""
    data = record["data"]
    return _str(data.get("agentId")) or _str(record.get("parentToolUseID")) or "unknown"


def _classify(record: JsonObj) -> str:
    """The kind of a record, before context-dependent refinement (see ``_SessionBuilder._refine``)."""
    rtype = record.get("type")
    if rtype == "system" and record.get("subtype") == "compact_boundary":
        return _COMPACT_BOUNDARY
    if rtype == "assistant" and isinstance(record.get("message"), dict):
        return _ASSISTANT
    if rtype == "user" and isinstance(record.get("message"), dict):
        return _classify_user(record)
    if _is_agent_progress(record):
        return _AGENT_PROGRESS
    return _OTHER


def _classify_user(record: JsonObj) -> str:
    """Kind of a ``type:"user"`` line: summary, meta, tool results, interrupt, command output or prompt."""
    if record.get("isCompactSummary") is True:
        return _COMPACT_SUMMARY
    if record.get("isMeta") is True:
        return _META
    blocks = _blocks(_message(record).get("content"))
    if any(block.get("type") == "tool_result" for block in blocks):
        return _TOOL_RESULTS
    text = _text_of(blocks).lstrip()
    if text.startswith(_INTERRUPT_PREFIX):
        return _INTERRUPT
    if text.startswith(_COMMAND_OUTPUT_PREFIXES):
        return _COMMAND_OUTPUT
    return _PROMPT


_NO_LIMIT = sys.maxsize
"""``_safe_json``'s string limit when none is given (no ``str`` is longer)."""


@dataclass
class _Fixes:
    """Counts of values changed to fit RFC 8785 (truncated strings, unrepresentable numbers), and of values
    kept that make the result not plain JSON (floats, object keys at or above U+D800, subclasses of the
    JSON types: what :func:`flightlog.encoding.custom_bytes` would check for)."""

    truncated: int = 0
    numbers: int = 0
    unplain: int = field(default=0, compare=False)

    @property
    def plain(self) -> bool:
        """Whether the walked value came out plain JSON (none of what :attr:`unplain` counts)."""
        return not self.unplain


def _safe_json(value: Any, max_chars: int | None, fixes: _Fixes) -> Any:
    """``value`` with NaN/±Infinity/huge integers as strings and (if ``max_chars``) long strings cut;
    ``fixes`` counts what changed, and what was kept that is not plain JSON (:class:`_Fixes`)."""
    kind = type(value)  # exact JSON types first (what ``json.loads`` makes): one type check each
    if kind is dict:
        for key in value:  # RFC 8785 sorts keys by UTF-16 units: the stdlib agrees below U+D800 only
            if type(key) is not str or (not key.isascii() and max(key) >= "\ud800"):
                fixes.unplain += 1
    if kind is dict or kind is list:
        # A container's children that stay as they are (a string within the limit, a bool, None) are
        # taken in this loop, without a call each (issue 19: most of a kept record's values are such
        # leaves, and the call per value was most of this function's cost); anything else recurses.
        limit = _NO_LIMIT if max_chars is None else max_chars
        if kind is list:
            return [
                v
                if (type(v) is str and len(v) <= limit) or type(v) is bool or v is None
                else _safe_json(v, max_chars, fixes)
                for v in value
            ]
        return {
            (k if type(k) is str else str(k)): v
            if (type(v) is str and len(v) <= limit) or type(v) is bool or v is None
            else _safe_json(v, max_chars, fixes)
            for k, v in value.items()
        }
    if kind is str:
        return value if max_chars is None or len(value) <= max_chars else _cut(value, max_chars, fixes)
    if kind is int:
        return _safe_number(value, fixes)
    fixes.unplain += kind is not bool and value is not None  # a float, or no exact JSON type
    if isinstance(value, str):
        return _cut(value, max_chars, fixes)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return _safe_number(value, fixes)
    if isinstance(value, dict):
        return {str(k): _safe_json(v, max_chars, fixes) for k, v in value.items()}
    if isinstance(value, list):
        return [_safe_json(v, max_chars, fixes) for v in value]
    return str(value)


def _cut(text: str, max_chars: int | None, fixes: _Fixes) -> str:
    """``text`` cut to ``max_chars`` characters plus a ``…[truncated N chars]`` marker."""
    if max_chars is None or len(text) <= max_chars:
        return text
    fixes.truncated += 1
    return f"{text[:max_chars]}…[truncated {len(text) - max_chars} chars]"


def _safe_number(value: int | float, fixes: _Fixes) -> int | float | str:
    """The number, or its text when it is NaN, ±Infinity or an integer beyond ±(2**53-1)."""
    if isinstance(value, float) and not math.isfinite(value):
        fixes.numbers += 1
        return str(value)
    if isinstance(value, int) and abs(value) > _MAX_SAFE_INTEGER:
        fixes.numbers += 1
        return str(value)
    return value


def _flatten_output(content: Any) -> str:
    """A tool result's content as text: text blocks verbatim, images as a placeholder, others as JSON."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if not isinstance(content, list):
        return json.dumps(content, ensure_ascii=False)
    return "\n".join(_flatten_block(block) for block in content)


def _flatten_block(block: Any) -> str:
    """One tool-result content block as text."""
    if isinstance(block, dict) and block.get("type") == "text":
        return _str(block.get("text"))
    if isinstance(block, dict) and block.get("type") == "image":
        source = block.get("source")
        source = source if isinstance(source, dict) else {}
        media = _str(source.get("media_type")) or "unknown"
        return f"[image: {media}, {len(_str(source.get('data')))} base64 chars]"
    return json.dumps(block, ensure_ascii=False)


def _image_part(block: JsonObj) -> ImagePart | None:
    """An image block of a prompt as an ``ImagePart`` (base64 → ``data:`` URI, url → URL)."""
    source = block.get("source")
    if not isinstance(source, dict):
        return None
    media = _str(source.get("media_type")) or None
    if source.get("type") == "base64" and isinstance(source.get("data"), str):
        return ImagePart(
            ref=f"data:{media or 'application/octet-stream'};base64,{source['data']}", media_type=media
        )
    if source.get("type") == "url" and isinstance(source.get("url"), str):
        return ImagePart(ref=source["url"], media_type=media)
    return None


def _is_rejection(output: str, record: JsonObj) -> bool:
    """Whether an error result is Claude Code's "user rejected this tool use" answer."""
    marker = record.get("toolUseResult")
    if isinstance(marker, str) and marker.startswith("User rejected"):
        return True
    return any(text in output for text in _REJECTION_MARKERS)


_USAGE_KEYS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
"""Anthropic usage counts that add up to the tokens a completion processed: ``input_tokens`` leaves out
the prompt tokens written to or read from the cache, which the two ``cache_*`` counts report."""


def _usage_tokens(usage: Any) -> int:
    """Tokens of an Anthropic usage object: the sum of :data:`_USAGE_KEYS` (0 when absent)."""
    if not isinstance(usage, dict):
        return 0
    return min(sum(_uint(usage.get(key)) for key in _USAGE_KEYS), _MAX_SAFE_INTEGER)


# ─── Session builder ──────────────────────────────────────────────────────────────────────────


@dataclass
class _Completion:
    """One API response being assembled from the assistant lines that share its ``message.id``."""

    key: str
    line: int
    model: str | None = None
    blocks: list[JsonObj] = field(default_factory=list)
    uuids: list[str] = field(default_factory=list)
    usage: Any = None
    at_ms: int | None = None
    """Source time of its latest line (when the response was complete)."""


@dataclass
class _Run:
    """The open run: started by a prompt, closed by the next prompt or the end of the file."""

    run_id: str
    turns: int = 0
    tokens: int = 0
    interrupted: bool = False
    last_called_tools: bool = False
    recorded_in: str | None = None


@dataclass(frozen=True)
class _CallInfo:
    """A tool call seen in the source: its name and the turn of the completion that made it."""

    name: str
    turn: int


Handler = Callable[[int, JsonObj], None]
_CallFields = tuple[str, str, str]
"""A ``ToolCall`` as ``(id, name, arguments)``."""
_ResultFields = tuple[str, str, bool]
"""A ``ToolResult`` as ``(call_id, output, is_error)`` (no ``token_count``)."""
_PROTOCOL = "anthropic.messages"
_PROVIDER = "anthropic"


class _SessionBuilder:
    """Folds the records of one session (main or sub-agent) into events, in arrival order."""

    def __init__(
        self, ctx: _Context, key: str | None = None, agent_id: str | None = None, *, dedupe: bool = True
    ) -> None:
        """``dedupe``: skip a record whose ``uuid`` this builder was fed already. The main session's builder
        is built without it: it is fed only top-level records, which :class:`_FileImporter` deduplicated (a
        child's builder keeps it: the same sub-agent message can come in a sidechain record and inside an
        ``agent_progress`` record)."""
        self.ctx = ctx
        self._key = key
        self._agent_id = agent_id
        self.metadata: JsonObj = {}
        self.events = new_event_list()  # on disk during an import_file (bounded memory)
        # An import_file's spool takes the commonest events as bytes written without their models
        # (:mod:`flightlog.encoding`'s ``*_bytes``, each proven equal to the model's); a list gets models.
        self._spool = self.events if isinstance(self.events, EventSpool) else None
        self.times: list[int | None] = []  # per event, the source time of the record that produced it
        self._at: int | None = None
        self._seen: set[str] | None = set() if dedupe else None
        self._task: str | None = None
        self._times: list[int] = []
        # Replay bookkeeping: messages replay would hold now, and at each record's position.
        self._count = 0
        self._origins: list[int] = []  # per replay message, the seq of the event that put it there
        self._last_core = 0
        self._hist: dict[str, int] = {}
        self._turn = 0
        self._run: _Run | None = None
        self._completion: _Completion | None = None
        self._closed_ids: set[str] = set()
        self._deferred: list[tuple[int, JsonObj, str]] = []
        self._calls: dict[str, _CallInfo] = {}
        self._resolved: set[str] = set()
        # Calls not yet answered, in request order (an ordered set): an interrupt or the end of the file
        # reads only these, so its cost is the number pending, not every call the session ever made.
        self._pending: dict[str, None] = {}
        self._book = CallBook(lambda reason, line: self.ctx.warn(line, reason))
        self._call_owner: dict[str, str] = {}  # native tool_use id → key of the completion that made it
        self._last_output: dict[str, bytes] = {}  # native id → digest of the last result recorded for it
        self._caveat_uuid: str | None = None
        self._archive_start = 0
        self._boundary_end: int | None = None
        self._spawned: set[str] = set()
        self._copied: dict[str, str] = {}  # runs that are resume copies → the session recording them
        self._in_copy = False
        self._exited: set[str] = set()
        self._agent_calls: dict[str, str] = {}
        self.has_conversation = False
        self._handlers: dict[str, Handler] = {
            _PROMPT: self._on_prompt,
            _ASSISTANT: self._on_assistant,
            _TOOL_RESULTS: self._on_tool_results,
            _INTERRUPT: self._on_interrupt,
            _COMPACT_BOUNDARY: self._on_compact_boundary,
            _COMPACT_SUMMARY: self._on_compact_summary,
            _AGENT_PROGRESS: self._on_agent_progress,
            _SIDECHAIN_SPAWN: self._on_sidechain_spawn,
            _META: self._custom_handler("claude_code.user.meta"),
            _COMMAND_OUTPUT: self._custom_handler("claude_code.user.command_output"),
            _LOCAL_COMMAND: self._custom_handler("claude_code.user.local_command"),
            _OTHER: self._on_other,
            _UNPARSED: lambda line, payload: self._custom("claude_code.unparsed_line", payload),
        }

    @property
    def key(self) -> str:
        """This session's key (the file's main key unless a child key was given)."""
        return self._key or self.ctx.main_key

    # ── intake ──

    def feed(self, line: int, record: JsonObj, kind: str | None = None) -> None:
        """Take one record (top-level, or a sub-agent message unwrapped from a progress record); ``kind``:
        its :func:`_classify`, when the caller has it already.

        Records whose ``uuid`` was already fed are skipped and counted as duplicates (by the caller for the
        main session: :class:`_FileImporter` feeds it deduplicated records only).
        """
        if self._seen is not None and self.ctx.skip_duplicate(line, record, self._seen):
            return
        self._note_envelope(record)
        self._route(line, record, self._refine(record, _classify(record) if kind is None else kind))

    def keep_unparsed(self, line: int, payload: JsonObj) -> None:
        """A line that is no JSON object: ``Custom("claude_code.unparsed_line", payload)`` byte-exact
        (:func:`~flightlog.importers.base.unparsed_payload`), after any open completion."""
        self._route(line, payload, _UNPARSED)

    def spawn_sidechain(self, line: int, child_key: str) -> None:
        """Note a sidechain child first seen at ``line`` (recorded only if this session has a conversation)."""
        self._route(line, {"childKey": child_key}, _SIDECHAIN_SPAWN)

    def _route(self, line: int, record: JsonObj, kind: str) -> None:
        """Merge into, defer behind, or close the open completion, then dispatch."""
        if self._completion is not None:
            if kind == _ASSISTANT and self._completion_key(record) == self._completion.key:
                self._merge_fragment(record)
                return
            if kind in _DEFERRABLE:
                self._deferred.append((line, record, kind))
                return
            self._close_completion()
        self._handle(line, record, kind)

    def _handle(self, line: int, record: JsonObj, kind: str) -> None:
        """Dispatch one record, its events stamped with its ``timestamp`` (else the latest one seen)."""
        self._at = _epoch_ms(record.get("timestamp")) or self._at
        self._handlers[kind](line, record)

    def _refine(self, record: JsonObj, kind: str) -> str:
        """Context-dependent kinds: a ``<command-name>`` line right after a caveat is a local command.

        The text is read only for the two kinds it can refine (a meta line, a prompt after a caveat).
        """
        if kind == _META and _text_of(_message(record).get("content")).lstrip().startswith(_CAVEAT_PREFIX):
            self._caveat_uuid = _str(record.get("uuid")) or None
        follows_caveat = self._caveat_uuid is not None and record.get("parentUuid") == self._caveat_uuid
        if kind == _PROMPT and follows_caveat and _COMMAND_TAG in _text_of(_message(record).get("content")):
            return _LOCAL_COMMAND
        return kind

    def _note_envelope(self, record: JsonObj) -> None:
        """Collect timestamps and the first ``version``/``gitBranch`` seen."""
        ms = _epoch_ms(record.get("timestamp"))
        if ms is not None:
            self._times.append(ms)
        metadata = self.metadata
        if "gitBranch" in metadata and "version" in metadata:
            return
        for key in ("version", "gitBranch"):
            value = record.get(key)
            if key not in metadata and isinstance(value, str) and value:
                metadata[key] = value

    # ── event emission and replay bookkeeping ──

    def _emit(self, event: SessionEvent) -> None:
        """Append an event and update the replay message count (seed replay rules)."""
        seq = len(self.events) + _SEQ_OFFSET
        self.events.append(event)
        self.times.append(self._at)
        origins = self._origins
        if isinstance(event, RunStarted | LlmCompleted):
            self._count_core(seq)
        elif isinstance(event, ToolCompleted):
            origins += [seq] * len(event.results)
        elif isinstance(event, Compressed):
            low, high = event.archived_seq_range
            first = next((i for i, origin in enumerate(origins) if low <= origin <= high), None)
            kept = [origin for origin in origins if not low <= origin <= high]
            kept.insert(len(kept) if first is None else first, seq)
            origins[:] = kept
            self._last_core = len(origins)
        elif isinstance(event, Rollbacked):
            del origins[event.checkpoint_history_len :]
            self._last_core = len(origins)
        self._count = len(origins)

    def _count_core(self, seq: int) -> None:
        """A core message (``run_started``, ``llm_completed``) at ``seq`` joins the replay history."""
        self._origins.append(seq)
        self._last_core = self._count = len(self._origins)
        self.has_conversation = True

    def _emit_bytes(self, kind: str, data: bytes, *, results: int = 0) -> None:
        """Append an event given as its canonical bytes (into ``_spool``: an :class:`EventSpool` only), with
        :meth:`_emit`'s bookkeeping: ``run_started`` and ``llm_completed`` are core messages,
        ``tool_completed`` adds ``results`` messages; the other kinds written this way (``tool_requested``,
        ``run_terminal``, ``operation_cancelled``) add none."""
        assert self._spool is not None
        seq = len(self.events) + _SEQ_OFFSET
        self._spool.append_bytes(kind, data)
        self.times.append(self._at)
        if kind == "llm_completed" or kind == "run_started":
            self._count_core(seq)
        elif results:
            self._origins += [seq] * results
            self._count = len(self._origins)

    def _custom(self, kind: str, payload: Any, *, plain: bool = False) -> None:
        """Emit ``Custom(custom_kind=kind, payload)`` (``plain``: the payload is known plain JSON, see
        :func:`~flightlog.importers.base.append_custom`). A ``Custom`` moves no replay count (:meth:`_emit`),
        so it goes to the events as its bytes, without the event being built."""
        append_custom(self.events, kind, payload, plain=plain)
        self.times.append(self._at)

    def _keep(self, line: int, kind: str, record: JsonObj) -> None:
        """Emit ``Custom(kind)`` of a record: without ``cwd``, long strings cut, numbers made safe (the
        walk doing that also tells whether the payload is plain JSON, which its encoding then skips
        checking again)."""
        fixes = _Fixes()
        cwd = record.get("cwd")
        if (type(cwd) is str and len(cwd) <= _MAX_CUSTOM_CHARS) or cwd is None:
            # the walk builds a new dict anyway, and a leaf it keeps as it is changes no count: drop the
            # key from that dict (absent, or null, it is a no-op) instead of copying the record first
            payload: JsonObj = _safe_json(record, _MAX_CUSTOM_CHARS, fixes)
            payload.pop("cwd", None)
        else:
            trimmed = {k: v for k, v in record.items() if k not in _DROPPED_KEYS}
            payload = _safe_json(trimmed, _MAX_CUSTOM_CHARS, fixes)
        self._warn_fixes(line, fixes)
        self._custom(kind, payload, plain=fixes.plain)

    def _warn_fixes(self, line: int, fixes: _Fixes) -> None:
        """Report values changed by ``_safe_json``."""
        if fixes.truncated:
            self.ctx.warn(line, f"{fixes.truncated} long string(s) truncated in a kept record")
        if fixes.numbers:
            self.ctx.warn(line, f"{fixes.numbers} number(s) not representable in RFC 8785 kept as text")

    def _mark(self, record: JsonObj, value: int | None = None) -> None:
        """Remember the replay length at this record (given, or inherited from its parent)."""
        uuid = record.get("uuid")
        if not isinstance(uuid, str):
            return
        if value is None:
            value = self._hist.get(_str(record.get("parentUuid")), self._count)
        self._hist[uuid] = value

    # ── prompts, runs, rewinds ──

    def _on_prompt(self, line: int, record: JsonObj) -> None:
        """A human prompt: close the run (rolling back on a rewind) and start a new one."""
        self._flush_boundary()
        rewind_to = self._rewind_target(record)
        self._close_run("rewound" if rewind_to is not None else "completed")
        if rewind_to is not None:
            self._emit(Rollbacked(turn=self._turn, checkpoint_history_len=rewind_to))
        content = _message(record).get("content")
        run_id = _str(record.get("uuid")) or f"line-{line}"
        recorded_in = self._note_copy(run_id)
        attachments, extras = self._prompt_attachments(content)
        goal = _text_of(content)
        data = None
        if self._spool is not None and not attachments:
            data = run_started_bytes(run_id, goal, self._agent_id)
        if data is not None:
            self._emit_bytes("run_started", data)
        else:
            self._emit(RunStarted(run_id=run_id, goal=goal, agent_id=self._agent_id, attachments=attachments))
        self._run = _Run(run_id, recorded_in=recorded_in)
        if self._task is None:
            self._task = goal[:TASK_CHARS]
        if extras:
            self._keep(line, "claude_code.user.extra_content", {"uuid": run_id, "blocks": extras})
        self._mark(record, self._count)

    def _note_copy(self, run_id: str) -> str | None:
        """The session that already records the run ``run_id`` (None: a run of this file's own), marking
        where a resume copy starts (``claude_code.resume_copy``) and ends (``claude_code.resume_copy_end``)."""
        recorded_in = self.ctx.recorded_runs.get(run_id)
        if recorded_in is not None and not self._in_copy:
            self._custom("claude_code.resume_copy", {"recorded_in": recorded_in, "first_run": run_id})
        elif recorded_in is None and self._in_copy:
            self._custom("claude_code.resume_copy_end", {"next_run": run_id})
        self._in_copy = recorded_in is not None
        if recorded_in is not None:
            self._copied[run_id] = recorded_in
        return recorded_in

    def _copy_metadata(self) -> JsonObj:
        """``resumed_from`` (the session recording the last copied run) and ``resume_copy`` (each copied
        run's session), or nothing when no run is a resume copy."""
        if not self._copied:
            return {}
        return {"resumed_from": list(self._copied.values())[-1], "resume_copy": dict(self._copied)}

    def _prompt_attachments(self, content: Any) -> tuple[list[ContentPart], list[JsonObj]]:
        """Image blocks as ``ImagePart`` attachments, and the non-text blocks that are not images."""
        attachments: list[ContentPart] = []
        extras: list[JsonObj] = []
        for block in _blocks(content):
            if block.get("type") == "text":
                continue
            image = _image_part(block) if block.get("type") == "image" else None
            if image is None:
                extras.append(block)
            else:
                attachments.append(image)
        return attachments, extras

    def _rewind_target(self, record: JsonObj) -> int | None:
        """History length to roll back to when the prompt's parent precedes the latest core message."""
        position = self._hist.get(_str(record.get("parentUuid")))
        if position is None or position >= self._last_core:
            return None
        return position

    def _close_run(self, reason: str) -> None:
        """Emit ``RunTerminal`` for the open run (``aborted`` after an interrupt wins over ``reason``)."""
        run, self._run = self._run, None
        if run is None:
            return
        final = "aborted" if run.interrupted else reason
        # a resume copy: counted in the session that recorded it first
        turns, tokens = (0, 0) if run.recorded_in is not None else (run.turns, run.tokens)
        data = run_terminal_bytes(final, turns, tokens) if self._spool is not None else None
        if data is not None:
            self._emit_bytes("run_terminal", data)
        else:
            self._emit(RunTerminal(reason=final, turns_used=turns, total_tokens=tokens))

    def _eof_reason(self, agent_completed: bool) -> str:
        """``completed`` when the run's last completion answered without calling tools and nothing is
        pending (or the parent reported the sub-agent completed), else ``incomplete``."""
        run = self._run
        pending = bool(self._pending)
        finished = run is not None and run.turns > 0 and not run.last_called_tools and not pending
        return "completed" if finished or agent_completed else "incomplete"

    def _on_interrupt(self, line: int, record: JsonObj) -> None:
        """``[Request interrupted by user…``: cancel the open run's operation."""
        self._flush_boundary()
        pending = list(self._pending)
        operation = self._run.run_id if self._run else (_str(record.get("uuid")) or f"line-{line}")
        user = CancellationReason.USER
        data = None
        if self._spool is not None:
            data = operation_cancelled_bytes(self._turn, operation, user, pending)
        if data is not None:
            self._emit_bytes("operation_cancelled", data)
        else:
            self._emit(
                OperationCancelled(
                    turn=self._turn, operation_id=operation, reason=user, pending_call_ids=pending
                )
            )
        if self._run is not None:
            self._run.interrupted = True
        self._mark(record)

    # ── completions ──

    @staticmethod
    def _completion_key(record: JsonObj) -> str:
        """``message.id``, else ``uuid:<line uuid>`` (a line without an id is its own completion)."""
        return _str(_message(record).get("id")) or f"uuid:{_str(record.get('uuid'))}"

    def _on_assistant(self, line: int, record: JsonObj) -> None:
        """Open a completion with this line's blocks (later lines with the same id merge into it)."""
        self._flush_boundary()
        key = self._completion_key(record)
        if key in self._closed_ids:
            self.ctx.warn(line, f"late line of completion {key}; recorded as a separate completion")
        self._completion = _Completion(key=key, line=line)
        self._merge_fragment(record)

    def _merge_fragment(self, record: JsonObj) -> None:
        """Append one assistant line's content blocks, model and latest usage to the open completion."""
        completion = self._completion
        assert completion is not None
        message = _message(record)
        completion.blocks.extend(_blocks(message.get("content")))
        completion.model = completion.model or (_str(message.get("model")) or None)
        completion.usage = message.get("usage") or completion.usage
        completion.at_ms = _epoch_ms(record.get("timestamp")) or completion.at_ms
        if isinstance(record.get("uuid"), str):
            completion.uuids.append(record["uuid"])

    def _close_completion(self) -> None:
        """Emit the open completion, then process the records deferred behind it."""
        completion, self._completion = self._completion, None
        if completion is None:
            return
        self._at = completion.at_ms or self._at
        self._emit_completion(completion)
        deferred, self._deferred = self._deferred, []
        for line, record, kind in deferred:
            self._handle(line, record, kind)

    def _emit_completion(self, completion: _Completion) -> None:
        """``LlmCompleted`` (+ ``ToolRequested`` when it calls tools) for one merged completion."""
        self._turn += 1
        self._closed_ids.add(completion.key)
        parts, calls = self._map_blocks(completion)
        fixes = _Fixes()
        native = _safe_json(completion.blocks, None, fixes)
        self._warn_fixes(completion.line, fixes)
        self._emit_llm_completed(parts, calls, completion.model, native, fixes.plain)
        if calls:
            self._emit_tool_requested(calls)
        if self._run is not None:
            self._run.turns += 1
            self._run.last_called_tools = bool(calls)
            self._run.tokens = min(self._run.tokens + _usage_tokens(completion.usage), _MAX_SAFE_INTEGER)
        for uuid in completion.uuids:
            self._hist[uuid] = self._count

    def _emit_llm_completed(
        self,
        parts: list[TextPartFields],
        calls: list[_CallFields],
        model: str | None,
        native: Any,
        plain: bool,
    ) -> None:
        """``LlmCompleted`` of the mapped completion: into a spool as its bytes when
        :func:`~flightlog.encoding.llm_completed_bytes` takes the fields (``plain``: ``native`` is plain
        JSON, the walk that made it said so), else as the model."""
        data = None
        if self._spool is not None:
            data = llm_completed_bytes(
                self._turn,
                parts,
                calls,
                protocol=_PROTOCOL,
                provider=_PROVIDER,
                model=model,
                native_blocks=native,
                native_plain=plain,
            )
        if data is not None:
            self._emit_bytes("llm_completed", data)
            return
        replay = ProviderReplay(protocol=_PROTOCOL, provider=_PROVIDER, model=model, native_blocks=native)
        message = Message(
            role="assistant", content=[_part_model(*part) for part in parts], tool_calls=_call_models(calls)
        )
        self._emit(LlmCompleted(turn=self._turn, message=message, provider_replay=replay))

    def _emit_tool_requested(self, calls: list[_CallFields]) -> None:
        """``ToolRequested`` of a completion's calls (as bytes into a spool when they encode so)."""
        data = tool_requested_bytes(self._turn, calls) if self._spool is not None else None
        if data is not None:
            self._emit_bytes("tool_requested", data)
        else:
            self._emit(ToolRequested(turn=self._turn, calls=_call_models(calls)))

    def _map_blocks(self, completion: _Completion) -> tuple[list[TextPartFields], list[_CallFields]]:
        """Content parts (:data:`~flightlog.encoding.TextPartFields`) and tool calls (``(id, name,
        arguments)``) of a completion's blocks (repeated call ids skipped)."""
        parts: list[TextPartFields] = []
        calls: list[_CallFields] = []
        for index, block in enumerate(completion.blocks):
            if block.get("type") == "tool_use":
                call = self._tool_call(completion, index, block)
                if call is not None:
                    calls.append(call)
                continue
            part = _content_part(block)
            if part is not None:
                parts.append(part)
        return parts, calls

    def _tool_call(self, completion: _Completion, index: int, block: JsonObj) -> _CallFields | None:
        """A ``tool_use`` block as a ``ToolCall``'s ``(id, name, arguments)``, registered for pairing.

        None when the same completion (same ``message.id``: its lines written again, or a resumed copy)
        already made a call with this id. A later completion reusing the id makes a new call ``<id>#2``.
        """
        native = _str(block.get("id"))
        if native and self._call_owner.get(native) == completion.key:
            self.ctx.warn(completion.line, f"repeated tool_use id {native} skipped")
            return None
        name = _str(block.get("name"))
        call_id = self._book.request(native, name, self._turn, f"tool_use #{index}", completion.line)
        if native:
            self._call_owner[native] = completion.key
        self._calls[call_id] = _CallInfo(name=name, turn=self._turn)
        if call_id not in self._resolved:
            self._pending[call_id] = None
        arguments = json.dumps(block.get("input", {}), ensure_ascii=False)
        return (call_id, name, arguments)

    # ── tool results ──

    def _on_tool_results(self, line: int, record: JsonObj) -> None:
        """Pair each ``tool_result`` block to its call; rejections add ``ToolDenied``."""
        by_turn: dict[int, list[_ResultFields]] = {}
        notes: list[JsonObj] = []
        extras: list[JsonObj] = []
        for block in _blocks(_message(record).get("content")):
            if block.get("type") != "tool_result":
                extras.append(block)
                continue
            result = self._tool_result(line, record, block, notes)
            if result is not None:
                by_turn.setdefault(self._result_turn(result[0]), []).append(result)
        for turn, results in by_turn.items():
            data = tool_completed_bytes(turn, results) if self._spool is not None else None
            if data is not None:
                self._emit_bytes("tool_completed", data, results=len(results))
            else:
                models = [ToolResult(call_id=c, output=o, is_error=e) for c, o, e in results]
                self._emit(ToolCompleted(turn=turn, results=models))
        for note in notes:
            self._custom("claude_code.orphan_tool_result", note)
        if extras:
            uuid = _str(record.get("uuid"))
            self._keep(line, "claude_code.user.extra_content", {"uuid": uuid, "blocks": extras})
        self._mark(record, self._count)

    def _result_turn(self, call_id: str) -> int:
        """Turn of the call a result answers (the current turn for orphans)."""
        info = self._calls.get(call_id)
        return info.turn if info is not None else self._turn

    def _tool_result(
        self, line: int, record: JsonObj, block: JsonObj, notes: list[JsonObj]
    ) -> _ResultFields | None:
        """One result block as a ``ToolResult``'s ``(call_id, output, is_error)`` paired with the earliest unanswered call of its
        ``tool_use_id`` (``""`` included). With no such call: None (warned) when it repeats the last result
        recorded for that id word for word, else an orphan under a session-unique id."""
        native = _str(block.get("tool_use_id"))
        output = _flatten_output(block.get("content"))
        is_error = bool(block.get("is_error"))
        call = self._book.answer(native)
        if call is not None:
            call_id = call.call_id
        elif self._last_output.get(native) == output_digest(output, is_error):
            self.ctx.warn(line, f"repeated tool_result for {native} skipped")
            return None
        else:
            call_id = self._book.orphan_id(native)
            notes.append({"call_id": call_id, "line": line})
        self._last_output[native] = output_digest(output, is_error)
        self._resolved.add(call_id)
        self._pending.pop(call_id, None)
        self._note_agent_exit(native, call_id, record, is_error)
        if is_error and _is_rejection(output, record):
            self._deny(call_id, output)
        return (call_id, output, is_error)

    def _deny(self, call_id: str, reason: str) -> None:
        """``ToolDenied`` for a call the user rejected."""
        info = self._calls.get(call_id)
        name = info.name if info is not None else ""
        self._emit(
            ToolDenied(turn=self._result_turn(call_id), call_id=call_id, tool_name=name, reason=reason)
        )

    # ── sub-agents (parent side) ──

    def _on_agent_progress(self, line: int, record: JsonObj) -> None:
        """First progress record of a sub-agent: ``AgentProcessChanged(spawned)`` (its messages go to the child)."""
        agent_id = _progress_agent_id(record)
        tool_use_id = _str(record.get("parentToolUseID"))
        child_key = self.ctx.agent_key(agent_id)
        if tool_use_id:
            self._agent_calls.setdefault(tool_use_id, child_key)
        self._spawn(child_key, self._result_turn(tool_use_id))
        self._mark(record)

    def _on_sidechain_spawn(self, line: int, record: JsonObj) -> None:
        """A sidechain child appeared in this file: spawned, if this session has a conversation."""
        if self.has_conversation:
            self._spawn(_str(record.get("childKey")), self._turn)

    def _spawn(self, child_key: str, turn: int) -> None:
        """``AgentProcessChanged(state="spawned")`` once per child."""
        if child_key in self._spawned:
            return
        self._spawned.add(child_key)
        self._emit(self._process_event(child_key, turn, "spawned", None))

    def _note_agent_exit(self, native: str, call_id: str, record: JsonObj, is_error: bool) -> None:
        """A result naming a sub-agent: ``exited`` once, when its status is terminal (``completed``...).

        A non-terminal status (a background agent just launched) only records the spawn.
        """
        info = record.get("toolUseResult")
        info = info if isinstance(info, dict) else {}
        child_key = self._agent_calls.get(native)
        if child_key is None and _str(info.get("agentId")):
            child_key = self.ctx.agent_key(info["agentId"])
        if child_key is None:
            return
        stats = {k: info[k] for k in _AGENT_STAT_KEYS if isinstance(info.get(k), str | int) and k in info}
        self.ctx.agent_stats.setdefault(child_key, {}).update(_safe_json(stats, TASK_CHARS, _Fixes()))
        turn = self._result_turn(call_id)
        self._spawn(child_key, turn)
        termination = _str(info.get("status")) or ("error" if is_error else "completed")
        if termination in _TERMINAL_STATUSES and child_key not in self._exited:
            self._exited.add(child_key)
            self._emit(self._process_event(child_key, turn, "exited", termination))

    def _process_event(
        self, child_key: str, turn: int, state: str, result: str | None
    ) -> AgentProcessChanged:
        """An ``AgentProcessChanged`` for a sub-agent of this session."""
        return AgentProcessChanged(
            turn=turn,
            agent_id=child_key,
            parent_session_id=self.key,
            role="subagent",
            isolation="sidechain",
            context_inheritance="none",
            state=state,
            result_termination=result,
        )

    # ── compaction ──

    def _on_compact_boundary(self, line: int, record: JsonObj) -> None:
        """Keep the boundary (trigger, token count) and wait for its summary line."""
        self._flush_boundary()
        self._boundary_end = len(self.events) - 1
        self._keep(line, "claude_code.compact_boundary", record)
        self._mark(record, self._count)

    def _on_compact_summary(self, line: int, record: JsonObj) -> None:
        """The ``isCompactSummary`` line: ``Compressed`` with its text as the summary."""
        self._emit_compressed(_text_of(_message(record).get("content")))
        self._mark(record, self._count)

    def _flush_boundary(self) -> None:
        """A boundary not followed by its summary still yields a ``Compressed`` (no summary)."""
        if self._boundary_end is not None:
            self._emit_compressed(None)

    def _emit_compressed(self, summary: str | None) -> None:
        """``Compressed`` over the events since the previous compaction (inclusive recorded seqs)."""
        end = self._boundary_end if self._boundary_end is not None else len(self.events) - 1
        self._boundary_end = None
        start = self._archive_start
        seq_range = (start + _SEQ_OFFSET, end + _SEQ_OFFSET) if end >= start else (0, 0)
        self._emit(
            Compressed(
                turn=self._turn, archived_seq_range=seq_range, action="compact", summary=summary or None
            )
        )
        self._archive_start = len(self.events)

    # ── everything else ──

    def _custom_handler(self, kind: str) -> Handler:
        """A handler keeping the record as ``Custom(kind)``."""

        def handle(line: int, record: JsonObj) -> None:
            self._keep(line, kind, record)
            self._mark(record)

        return handle

    def _on_other(self, line: int, record: JsonObj) -> None:
        """Unmapped records: ``Custom("claude_code.<type>")``."""
        rtype = _str(record.get("type")) or "unknown"
        self._keep(line, f"claude_code.{rtype}", record)
        self._mark(record)

    # ── end of file ──

    def finish(self, parent_key: str | None = None, agent_completed: bool = False) -> ImportedSession | None:
        """Close everything open and build the session (None when no event was produced).

        Args:
            parent_key: The parent session's key, for sub-agent sessions.
            agent_completed: The parent's ``Task`` result reported this sub-agent ``completed``.
        """
        settled = len(self.events)  # what the end of the file adds below is not settled (it may grow)
        self._close_completion()
        self._flush_boundary()
        for call_id in self._pending:
            info = self._calls[call_id]
            self._custom(
                "claude_code.pending_tool_call",
                {"call_id": call_id, "tool_name": info.name, "turn": info.turn},
            )
        self._close_run(self._eof_reason(agent_completed))
        if not self.events:
            return None
        return ImportedSession(
            key=self.key,
            task=self._task or "",
            source_format=FORMAT,
            events=self.events,
            parent_key=parent_key,
            metadata={"sessionId": self.ctx.session_id, **self.metadata, **self._copy_metadata()},
            started_at_ms=min(self._times, default=None),
            ended_at_ms=max(self._times, default=None),
            event_times_ms=self.times,
            # A sub-agent the parent's ``Task`` result reported completed has ended: all of it is settled.
            settled=None if agent_completed else settled,
        )


def _content_part(block: JsonObj) -> TextPartFields | None:
    """A text/thinking/redacted-thinking block as a content part's fields (other types live in
    native_blocks); :func:`_part_model` makes the part."""
    btype = block.get("type")
    if btype == "text":
        return ("text", _str(block.get("text")), None)
    if btype == "thinking":
        signature = block.get("signature")
        return ("thinking", _str(block.get("thinking")), signature if isinstance(signature, str) else None)
    if btype == "redacted_thinking":
        return ("redacted_thinking", _str(block.get("data")), None)
    return None


def _part_model(part_type: str, text: str, signature: str | None) -> ContentPart:
    """The content part of :data:`~flightlog.encoding.TextPartFields`."""
    if part_type == "text":
        return TextPart(text=text)
    if part_type == "thinking":
        return ThinkingPart(thinking=text, signature=signature)
    return RedactedThinkingPart(data=text)


def _call_models(calls: list[_CallFields]) -> list[ToolCall]:
    """``ToolCall`` models of ``(id, name, arguments)`` triples."""
    return [ToolCall(id=call_id, name=name, arguments=arguments) for call_id, name, arguments in calls]


# ─── File importer: routes records to the main and child builders ─────────────────────────────


class _FileImporter:
    """Reads one file and routes each record to the main session or a sub-agent child session."""

    def __init__(
        self, name: str, fallback_id: str, warnings: list[ImportWarning], *, agent_file: str | None = None
    ) -> None:
        """``agent_file``: the agent id of a ``<sessionId>/subagents/agent-<id>.jsonl`` file, whose session
        is ``fallback_id`` (the folder's name) whatever ``sessionId`` its records carry, and every record of
        which belongs to that agent (unless it names another ``agentId``)."""
        self.ctx = _Context(name=name, fallback_id=fallback_id, warnings=warnings)
        if agent_file is not None:
            self.ctx.seen_session_id = fallback_id
        self._agent_file = agent_file
        self.main = _SessionBuilder(self.ctx, dedupe=False)  # fed by feed(), which deduplicates
        self.children: dict[str, _SessionBuilder] = {}
        self._sidechain_roots: dict[str, str] = {}
        self._seen: set[str] = set()

    def consume(self, path: Path) -> None:
        """Stream every record of ``path`` through :meth:`feed`."""
        for item in read_jsonl(path, self.ctx.warnings, keep_unparsed=True):
            if item.value is None:
                self.main.keep_unparsed(item.line, unparsed_payload(item))
            else:
                self.feed(item.line, item.value)

    def feed(self, line: int, record: JsonObj) -> None:
        """Route one top-level record (records whose ``uuid`` was already seen are skipped)."""
        if self.ctx.skip_duplicate(line, record, self._seen):
            return
        self.ctx.note_session_id(record)
        if self._agent_file is not None and not _str(record.get("agentId")):
            record = {**record, "agentId": self._agent_file}
        if record.get("isSidechain") is True or self._agent_file is not None:
            self._feed_sidechain(line, record)
            return
        kind = _classify(record)
        if kind == _AGENT_PROGRESS:
            self._feed_progress_child(line, record)
        self.main.feed(line, record, kind)

    def _child(self, key: str, agent_id: str | None, root: str | None = None) -> tuple[_SessionBuilder, bool]:
        """The child builder for ``key`` and whether it was just created."""
        if key in self.children:
            return self.children[key], False
        builder = _SessionBuilder(self.ctx, key=key, agent_id=agent_id)
        builder.metadata.update({"agentId": agent_id} if agent_id else {"sidechainRoot": root})
        self.children[key] = builder
        return builder, True

    def _feed_sidechain(self, line: int, record: JsonObj) -> None:
        """An ``isSidechain`` record: to the child of its ``agentId`` (or of its sidechain root)."""
        agent_id = _str(record.get("agentId"))
        if agent_id:
            builder, created = self._child(self.ctx.agent_key(agent_id), agent_id)
        else:
            root = self._sidechain_root(record)
            builder, created = self._child(f"{self.ctx.main_key}:sidechain:{root}", None, root)
        builder.feed(line, record)
        if created:
            self.main.spawn_sidechain(line, builder.key)

    def _sidechain_root(self, record: JsonObj) -> str:
        """The uuid of the first record of this record's sidechain (follows ``parentUuid``)."""
        uuid = _str(record.get("uuid"))
        root = self._sidechain_roots.get(_str(record.get("parentUuid")), uuid)
        if uuid:
            self._sidechain_roots[uuid] = root
        return root or "unknown"

    def _feed_progress_child(self, line: int, record: JsonObj) -> None:
        """The sub-agent message inside an ``agent_progress`` record, to its child session."""
        data = record["data"]
        agent_id = _progress_agent_id(record)
        builder, _ = self._child(self.ctx.agent_key(agent_id), agent_id)
        message = dict(data["message"])
        for key in ("timestamp", "version", "gitBranch"):
            if key not in message and key in record:
                message[key] = record[key]
        builder.feed(line, message)

    def finish(self) -> Iterator[ImportedSession]:
        """The main session (when it has events), then the children; reports duplicates."""
        if self.ctx.duplicates:
            self.ctx.warn(self.ctx.first_duplicate_line, f"{self.ctx.duplicates} duplicate record(s) skipped")
        main = self.main.finish()
        if main is not None:
            yield main
        for key, builder in self.children.items():
            stats = self.ctx.agent_stats.get(key, {})
            builder.metadata.update(stats)
            child = builder.finish(
                parent_key=self.ctx.main_key, agent_completed=stats.get("status") == "completed"
            )
            if child is not None:
                yield child
