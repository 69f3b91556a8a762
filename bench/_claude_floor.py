"""The same-work floor of a Claude Code import, in plain stdlib: the least any importer recording the ledger
flightlog records for ``bench/import_scaling.py``'s transcript must do (issue 19's import row).

:func:`import_transcript` reads the file, maps its records to the events ``flightlog.importers.claude_code``
records for them (the module's rules: prompts, completions merged by ``message.id`` with tool results and
bookkeeping deferred behind them, tool calls paired to results by id, runs closed at the next prompt,
interrupts, kept records as ``Custom`` without ``cwd``, the rewind test against each record's replay
position, background ``Bash`` tasks as child sessions), encodes each event with the standard library's
sorted compact encoder (RFC 8785 bytes for these events: :func:`first_difference` checks it), chains it
(``sha256(prev ‖ u64_le(seq) ‖ bytes)``, seed 003) and adds its RFC 9162 leaf to the tree head (§2.1.1),
and writes, in one transaction (SQLite, WAL, ``synchronous=FULL``, as the store): one ``INSERT`` per event
(an ``executemany`` per 1,000, as ``import_file``), one ``sessions`` row per session written once with its
head (seq, hash, tree root), one ``runs`` row per session written once at the end from a fold of the events
(state, tokens, steps: seed 002's snapshot), the ``imports`` rows (one per session, one for the file).
Each session starts with flightlog's ``import_source`` header (the file's sha256 and size: read once
before the mapping, as the header is seq 0 and the chain starts there). Rows carry the source's times.

Only the shapes of ``tests/data/samples/claude-code/spotter_tool_heavy.jsonl`` (what the bench transcript
repeats) are mapped. Anything else raises :class:`NotHandled` naming the line (a record kind or case the
mapping does not know, a warning flightlog would give), never skipped: sub-agents, sidechains,
compaction, rewinds, images, rejections, orphan or repeated results, reused call ids, duplicates, a
``<task-notification>``, task readers and stoppers, a line that is no JSON object. It does *less* than a
general importer: no per-value checks (strings over 32 Ki characters, numbers RFC 8785 cannot hold, lone
surrogates, keys above U+D800, nesting depth, invalid UTF-8), no resume-copy lookup, no fencing epoch, no
projection indexes. So it is a lower bound on the work: where it alone misses a target, so does any
importer recording the same bytes. :func:`first_difference` compares its database with flightlog's event
by event (bytes, hashes, times), session heads and runs snapshots, outside any clock.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import struct
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

__all__ = ["NotHandled", "first_difference", "heads", "import_transcript"]

ENCODE = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode
"""The floor's encoder: the standard library's, keys sorted, no white space, text as is."""
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_U64 = struct.Struct("<Q").pack
_SHA = hashlib.sha256
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)
_CHUNK = 1000
_PREFIX = "claude-code:"
_INTERRUPT = "[Request interrupted by user"
_CAVEAT = "<local-command-caveat>"
_OUTPUT_PREFIXES = ("<local-command-stdout>", "<local-command-stderr>", _CAVEAT)
_REJECTIONS = (
    "The user doesn't want to proceed with this tool use",
    "The user doesn't want to take this action",
    "The tool use was rejected",
)
_STARTED = re.compile(r"running in background with ID: ([A-Za-z0-9_.-]+?)\.?(?:\s|$)")
_TASK_TOOLS = frozenset(
    {"BashOutput", "TaskOutput", "KillShell", "KillBash", "TaskStop", "exec_command", "write_stdin"}
)
_USAGE = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
_DEFERRED = frozenset({"results", "meta", "output", "local", "other"})
_DDL = """
CREATE TABLE sessions (session_id TEXT PRIMARY KEY, task TEXT NOT NULL, status TEXT NOT NULL,
    source TEXT NOT NULL, created_at_ms INTEGER NOT NULL, updated_at_ms INTEGER NOT NULL,
    head_seq INTEGER NOT NULL, head_hash TEXT NOT NULL, merkle_root TEXT NOT NULL,
    parent_session_id TEXT, metadata TEXT NOT NULL);
CREATE TABLE events (session_id TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL,
    event BLOB NOT NULL, prev_hash TEXT NOT NULL, hash TEXT NOT NULL, recorded_at_ms INTEGER NOT NULL,
    PRIMARY KEY (session_id, seq));
CREATE TABLE runs (run_id TEXT PRIMARY KEY, parent TEXT, source TEXT NOT NULL, state TEXT NOT NULL,
    outcome TEXT, updated_at_ms INTEGER NOT NULL, last_seq INTEGER NOT NULL, session_status TEXT,
    snapshot TEXT NOT NULL, fold TEXT NOT NULL);
CREATE TABLE imports (source_sha256 TEXT PRIMARY KEY, session_id TEXT NOT NULL, importer TEXT NOT NULL,
    importer_version TEXT NOT NULL, source_name TEXT NOT NULL, imported_at_ms INTEGER NOT NULL);
"""


class NotHandled(Exception):
    """A record (or a case) of the transcript that this minimal mapping does not map; names the line."""


def _ms(value: Any) -> int | None:
    """Epoch milliseconds of an ISO 8601 ``timestamp`` (as the importer's ``_epoch_ms``), None if absent."""
    if type(value) is not str:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    ms = (moment - _EPOCH) // _MS
    return ms if 0 <= ms <= 2**53 - 1 else None


def _blocks(content: Any) -> list[dict[str, Any]]:
    if type(content) is str:
        return [{"type": "text", "text": content}]
    if type(content) is list:
        return [block for block in content if type(block) is dict]
    return []


def _text(blocks: list[dict[str, Any]]) -> str:
    return "\n".join(_str(b.get("text")) for b in blocks if b.get("type") == "text")


def _str(value: Any) -> str:
    return value if type(value) is str else ""


def _uint(value: Any) -> int:
    return min(value, 2**53 - 1) if type(value) is int and value >= 0 else 0


class _Fold:
    """The runs fold (``flightlog.runs.adapters.SessionFold``) of the kinds this mapping writes, fed by the
    mapper as it emits (the fields it reads, no decode)."""

    def __init__(self) -> None:
        self.phase, self.stopping = "none", False
        self.tools: list[str] = []
        self.closed_tokens: int | None = None
        self.closed_turns = self.open_steps = 0

    def snapshot(self, run_id: str, parent: str | None, source: str) -> tuple[str, dict[str, Any]]:
        """The run's state and seed 002 snapshot (wire form, key order as flightlog writes it)."""
        if self.phase == "closed":
            raise NotHandled(f"{run_id}: a session whose last run ended (its terminal summary)")
        budget: dict[str, int] = {}
        if self.closed_tokens is not None:
            budget["tokens_used"] = self.closed_tokens
        if self.phase != "none":
            budget["steps_taken"] = self.closed_turns + self.open_steps
        state = "stopping" if self.stopping else "waiting_tool" if self.tools else "running"
        if self.phase == "none":
            state = "initializing"
        snapshot: dict[str, Any] = {"run_id": run_id}
        if parent is not None:
            snapshot["parent"] = parent
        snapshot |= {"source": source, "state": state, "budget": budget}
        return state, snapshot


class _Ledger:
    """One session's rows: chain hash, RFC 9162 leaf and tree head, a row per event, the runs fold."""

    def __init__(self, conn: sqlite3.Connection, session_id: str, header: bytes, at: int) -> None:
        self.conn, self.session_id = conn, session_id
        self.prev, self.seq, self.at, self.first_at = "GENESIS", 0, at, at
        self.tree: list[bytes] = []
        self.rows: list[tuple[Any, ...]] = []
        self.add("custom", header, at)

    def add(self, kind: str, data: bytes, at: int | None) -> None:
        """Chain, hash and queue one event (``at``: its source time, None: the time before it)."""
        seq, prev = self.seq, self.prev
        h = _SHA(prev.encode("ascii"))
        h.update(_U64(seq))
        h.update(data)
        digest = h.hexdigest()
        tree = self.tree
        tree.append(_SHA(b"\x00" + data).digest())
        n = seq + 1
        while not n & 1:  # merge equal perfect subtrees: node = sha256(0x01 ‖ left ‖ right)
            right = tree.pop()
            tree[-1] = _SHA(b"\x01" + tree[-1] + right).digest()
            n >>= 1
        if at is not None and at > self.at:
            self.at = at
        self.rows.append((self.session_id, seq, kind, data, prev, digest, self.at))
        if len(self.rows) == _CHUNK:
            self.flush()
        self.prev, self.seq = digest, seq + 1

    def flush(self) -> None:
        self.conn.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?)", self.rows)
        self.rows = []

    def root(self) -> str:
        tree = self.tree
        node = tree[-1]
        for left in reversed(tree[:-1]):
            node = _SHA(b"\x01" + left + node).digest()
        return node.hex()

    def close(self, fold: _Fold, meta: dict[str, Any], status: str) -> None:
        """Write the last rows, the session row with its head, and its runs row (seed 002 snapshot)."""
        self.flush()
        parent, source = meta.get("parent"), meta["runs_source"]
        state, snapshot = fold.snapshot(self.session_id, parent, source)
        fold_row = {
            **vars(fold),
            "first_at_ms": self.first_at,
            "last_at_ms": self.at,
            "last_seq": self.seq - 1,
        }
        now = time.time_ns() // 1_000_000
        self.conn.execute(
            "INSERT INTO sessions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                self.session_id,
                meta["task"],
                status,
                "import:claude-code",
                self.first_at,
                now,
                self.seq - 1,
                self.prev,
                self.root(),
                parent,
                json.dumps(meta["metadata"], sort_keys=True),
            ),
        )
        self.conn.execute(
            "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                self.session_id,
                parent,
                source,
                state,
                None,
                self.at,
                self.seq - 1,
                status,
                _COMPACT(snapshot),
                _COMPACT({"v": 3, "session": fold_row}),
            ),
        )


class _Mapper:
    """The main session's records → events (``flightlog.importers.claude_code``'s rules, this file's shapes)."""

    def __init__(self, conn: sqlite3.Connection, provenance: dict[str, Any]) -> None:
        self.conn, self.provenance = conn, provenance
        self.ledger: _Ledger | None = None
        self.early: list[tuple[str, bytes, int | None]] = []  # events before the session id and a time
        self.session_id: str | None = None
        self.first_at: int | None = None
        self.min_at: int | None = None
        self.metadata: dict[str, str] = {}
        self.seen: set[str] = set()
        self.at: int | None = None
        self.record_at: int | None = None  # the time of the record being handled
        self.line = 0
        self.task: str | None = None
        self.turn = self.count = self.last_core = 0
        self.hist: dict[str, int] = {}
        self.run: list[Any] | None = None  # [run_id, turns, tokens, interrupted, last_called_tools]
        self.completion: dict[str, Any] | None = None
        self.closed: set[str] = set()
        self.deferred: list[tuple[int, dict[str, Any], str, int | None]] = []
        self.calls: dict[str, tuple[str, int, Any]] = {}  # call id → (name, turn, input)
        self.answered: set[str] = set()
        self.pending: dict[str, None] = {}
        self.caveat: str | None = None
        self.tasks: dict[str, tuple[str, Any, int | None]] = {}  # task id → (call id, input, time)
        self.fold = _Fold()

    # ── intake ──

    def feed(self, line: int, record: dict[str, Any]) -> None:
        self.line = line
        uuid = record.get("uuid")
        if type(uuid) is str:
            if uuid in self.seen:
                raise NotHandled(f"line {line}: a duplicate record (uuid {uuid})")
            self.seen.add(uuid)
        if self.session_id is None and type(record.get("sessionId")) is str and record["sessionId"]:
            self.session_id = record["sessionId"]
        if record.get("isSidechain") is True:
            raise NotHandled(f"line {line}: a sidechain record")
        at = _ms(record.get("timestamp"))
        if at is not None:
            if self.first_at is None:
                self.first_at = self.min_at = at
            elif at < self.min_at:  # type: ignore[operator]
                self.min_at = at
        if len(self.metadata) < 2:
            for key in ("version", "gitBranch"):
                if key not in self.metadata and type(record.get(key)) is str and record[key]:
                    self.metadata[key] = record[key]
        kind = self.classify(line, record)
        if self.completion is not None:
            if kind == "assistant" and self.key(record) == self.completion["key"]:
                self.record_at = at
                self.merge(record)
                return
            if kind in _DEFERRED:
                self.deferred.append((line, record, kind, at))
                return
            self.close_completion()
        self.handle(line, record, kind, at)

    def classify(self, line: int, record: dict[str, Any]) -> str:
        rtype = record.get("type")
        if rtype == "system" and record.get("subtype") == "compact_boundary":
            raise NotHandled(f"line {line}: a compact boundary")
        if rtype == "assistant" and type(record.get("message")) is dict:
            return "assistant"
        if rtype == "user" and type(record.get("message")) is dict:
            return self.classify_user(line, record)
        data = record.get("data")
        if rtype == "progress" and type(data) is dict and data.get("type") == "agent_progress":
            raise NotHandled(f"line {line}: a sub-agent progress record")
        return "other"

    def classify_user(self, line: int, record: dict[str, Any]) -> str:
        if record.get("isCompactSummary") is True:
            raise NotHandled(f"line {line}: a compact summary")
        blocks = _blocks(record["message"].get("content"))
        if record.get("isMeta") is True:
            if _text(blocks).lstrip().startswith(_CAVEAT):
                self.caveat = _str(record.get("uuid")) or None
            return "meta"
        if any(block.get("type") == "tool_result" for block in blocks):
            return "results"
        text = _text(blocks).lstrip()
        if text.startswith(_INTERRUPT):
            return "interrupt"
        if text.startswith(_OUTPUT_PREFIXES):
            return "output"
        if self.caveat is not None and record.get("parentUuid") == self.caveat and "<command-name>" in text:
            return "local"
        return "prompt"

    def handle(self, line: int, record: dict[str, Any], kind: str, at: int | None) -> None:
        """Dispatch a record; ``at``: its ``timestamp`` as epoch ms (parsed once, in :meth:`feed`)."""
        self.record_at = at
        self.at = at or self.at
        if kind == "prompt":
            self.on_prompt(line, record)
        elif kind == "assistant":
            self.on_assistant(line, record)
        elif kind == "results":
            self.on_results(line, record)
        elif kind == "interrupt":
            self.on_interrupt(line, record)
        else:
            name = {"meta": "user.meta", "output": "user.command_output", "local": "user.local_command"}
            self.keep(name.get(kind) or _str(record.get("type")) or "unknown", record)

    # ── events ──

    def emit(self, kind: str, wire: dict[str, Any]) -> None:
        data = ENCODE(wire).encode("utf-8")
        if (kind == "custom" or kind == "run_started") and b"<task-notification>" in data:
            raise NotHandled(f"line {self.line}: a <task-notification>")
        if self.ledger is not None:
            self.ledger.add(kind, data, self.at)
        else:
            self.early.append((kind, data, self.at))
            if self.session_id is not None and self.first_at is not None:
                self.ledger = self.open_ledger()
                for event in self.early:
                    self.ledger.add(*event)
                self.early = []

    def open_ledger(self) -> _Ledger:
        key = _PREFIX + str(self.session_id)
        return _Ledger(self.conn, key, _header(self.provenance, key), self.first_at)  # type: ignore[arg-type]

    def mark(self, record: dict[str, Any], value: int | None = None) -> None:
        uuid = record.get("uuid")
        if type(uuid) is str:
            self.hist[uuid] = (
                self.hist.get(_str(record.get("parentUuid")), self.count) if value is None else value
            )

    def keep(self, kind: str, record: dict[str, Any]) -> None:
        payload = {k: v for k, v in record.items() if k != "cwd"}
        self.emit("custom", {"custom_kind": "claude_code." + kind, "kind": "custom", "payload": payload})
        self.mark(record)

    def on_prompt(self, line: int, record: dict[str, Any]) -> None:
        position = self.hist.get(_str(record.get("parentUuid")))
        if position is not None and position < self.last_core:
            raise NotHandled(f"line {line}: a rewind")
        self.close_run("completed")
        blocks = _blocks(record["message"].get("content"))
        if any(block.get("type") != "text" for block in blocks):
            raise NotHandled(f"line {line}: a prompt with a block that is not text")
        run_id, goal = _str(record.get("uuid")) or f"line-{line}", _text(blocks)
        self.emit(
            "run_started",
            {
                "agent_id": None,
                "criteria": [],
                "goal": goal,
                "kind": "run_started",
                "run_id": run_id,
                "system_prompt": None,
            },
        )
        self.core()
        fold = self.fold
        fold.phase, fold.stopping, fold.tools, fold.open_steps = "open", False, [], 0
        self.run = [run_id, 0, 0, False, False]
        if self.task is None:
            self.task = goal[:200]
        self.mark(record, self.count)

    def core(self) -> None:
        self.count += 1
        self.last_core = self.count

    def close_run(self, reason: str) -> None:
        run, self.run = self.run, None
        if run is None:
            return
        wire = {
            "kind": "run_terminal",
            "reason": "aborted" if run[3] else reason,
            "total_tokens": run[2],
            "turns_used": run[1],
        }
        self.emit("run_terminal", wire)
        fold = self.fold
        fold.closed_tokens = (fold.closed_tokens or 0) + run[2]
        fold.closed_turns += run[1]
        fold.phase, fold.stopping, fold.tools, fold.open_steps = "closed", False, [], 0

    def on_interrupt(self, line: int, record: dict[str, Any]) -> None:
        pending = list(self.pending)
        operation = self.run[0] if self.run else (_str(record.get("uuid")) or f"line-{line}")
        self.emit(
            "operation_cancelled",
            {
                "kind": "operation_cancelled",
                "operation_id": operation,
                "pending_call_ids": pending,
                "reason": "user",
                "turn": self.turn,
            },
        )
        fold = self.fold
        fold.stopping = fold.phase == "open"
        fold.tools = [t for t in fold.tools if t not in pending]
        if self.run is not None:
            self.run[3] = True
        self.mark(record)

    @staticmethod
    def key(record: dict[str, Any]) -> str:
        return _str(record["message"].get("id")) or f"uuid:{_str(record.get('uuid'))}"

    def on_assistant(self, line: int, record: dict[str, Any]) -> None:
        key = self.key(record)
        if key in self.closed:
            raise NotHandled(f"line {line}: a late line of completion {key}")
        self.completion = {
            "key": key,
            "line": line,
            "model": None,
            "blocks": [],
            "uuids": [],
            "usage": None,
            "at": None,
        }
        self.merge(record)

    def merge(self, record: dict[str, Any]) -> None:
        completion, message = self.completion, record["message"]
        assert completion is not None
        completion["blocks"].extend(_blocks(message.get("content")))
        completion["model"] = completion["model"] or _str(message.get("model")) or None
        completion["usage"] = message.get("usage") or completion["usage"]
        completion["at"] = self.record_at or completion["at"]
        if type(record.get("uuid")) is str:
            completion["uuids"].append(record["uuid"])

    def close_completion(self) -> None:
        completion, self.completion = self.completion, None
        if completion is None:
            return
        self.at = completion["at"] or self.at
        self.turn += 1
        self.closed.add(completion["key"])
        parts: list[dict[str, Any]] = []
        calls: list[dict[str, str]] = []
        for block in completion["blocks"]:
            btype = block.get("type")
            if btype == "tool_use":
                calls.append(self.call(completion["line"], block))
            elif btype == "text":
                parts.append({"text": _str(block.get("text")), "type": "text"})
            elif btype == "thinking":
                part = {"thinking": _str(block.get("thinking")), "type": "thinking"}
                if type(block.get("signature")) is str:
                    part["signature"] = block["signature"]
                parts.append(part)
            elif btype == "redacted_thinking":
                parts.append({"data": _str(block.get("data")), "type": "redacted_thinking"})
        message: dict[str, Any] = {"content": parts, "role": "assistant"}
        if calls:
            message["tool_calls"] = calls
        replay: dict[str, Any] = {
            "native_blocks": completion["blocks"],
            "protocol": "anthropic.messages",
            "provider": "anthropic",
        }
        if completion["model"] is not None:
            replay["model"] = completion["model"]
        wire = {"kind": "llm_completed", "message": message, "provider_replay": replay, "turn": self.turn}
        self.emit("llm_completed", wire)
        self.core()
        fold = self.fold
        fold.open_steps += 1
        fold.stopping = False
        if calls:
            self.emit("tool_requested", {"calls": calls, "kind": "tool_requested", "turn": self.turn})
            fold.tools.extend(c["id"] for c in calls if c["id"] not in fold.tools)
        if self.run is not None:
            usage = completion["usage"]
            tokens = sum(_uint(usage.get(k)) for k in _USAGE) if type(usage) is dict else 0
            self.run[1] += 1
            self.run[4] = bool(calls)
            self.run[2] = min(self.run[2] + min(tokens, 2**53 - 1), 2**53 - 1)
        for uuid in completion["uuids"]:
            self.hist[uuid] = self.count
        deferred, self.deferred = self.deferred, []
        for line, record, kind, at in deferred:
            self.handle(line, record, kind, at)

    def call(self, line: int, block: dict[str, Any]) -> dict[str, str]:
        call_id, name = _str(block.get("id")), _str(block.get("name"))
        if not call_id or call_id in self.calls:
            raise NotHandled(f"line {line}: a tool_use id that is empty or used before ({call_id!r})")
        if name in _TASK_TOOLS:
            raise NotHandled(f"line {line}: a background task tool ({name})")
        arguments = block.get("input", {})
        self.calls[call_id] = (name, self.turn, arguments)
        self.pending[call_id] = None
        return {"arguments": json.dumps(arguments, ensure_ascii=False), "id": call_id, "name": name}

    def on_results(self, line: int, record: dict[str, Any]) -> None:
        by_turn: dict[int, list[dict[str, Any]]] = {}
        info = record.get("toolUseResult")
        if type(info) is dict and _str(info.get("agentId")):
            raise NotHandled(f"line {line}: a sub-agent's result")
        for block in _blocks(record["message"].get("content")):
            if block.get("type") != "tool_result":
                raise NotHandled(f"line {line}: a result line with a block that is no tool_result")
            call_id, output, is_error = (
                _str(block.get("tool_use_id")),
                _output(line, block),
                bool(block.get("is_error")),
            )
            call = self.calls.get(call_id)
            if call is None or call_id in self.answered:
                raise NotHandled(f"line {line}: a result with no open call ({call_id!r})")
            if is_error and (_str(info).startswith("User rejected") or any(m in output for m in _REJECTIONS)):
                raise NotHandled(f"line {line}: a rejected call")
            self.answered.add(call_id)
            self.pending.pop(call_id, None)
            if call[0] == "Bash" and type(call[2]) is dict and call[2].get("run_in_background") is True:
                started = _STARTED.search(output)
                if started and started.group(1) not in self.tasks:
                    self.tasks[started.group(1)] = (call_id, call[2], self.at)
            by_turn.setdefault(call[1], []).append(
                {"call_id": call_id, "is_error": is_error, "output": output}
            )
        fold = self.fold
        for turn, results in by_turn.items():
            self.emit("tool_completed", {"kind": "tool_completed", "results": results, "turn": turn})
            self.count += len(results)
            done = {r["call_id"] for r in results}
            fold.tools = [t for t in fold.tools if t not in done]
        self.mark(record, self.count)

    # ── end of file ──

    def finish(self) -> list[tuple[_Ledger, _Fold, dict[str, Any], str]]:
        """The main session (its status what its recorded events hold: the file's own end stays unwritten,
        flightlog records only the settled events) and the task sessions, each with its row values."""
        if self.ledger is None or self.first_at is None or self.min_at != self.first_at:
            raise NotHandled("the file's first time is not its earliest, or it holds no session id or time")
        if self.run is None:
            raise NotHandled("a file whose last run was closed before its end")
        # What the ledger holds (flightlog's importer, f7d31e4): the last run's start is recorded and its end
        # is not (it waits for the source to end), so the run is open whatever the file's end shows.
        status = "incomplete"
        key = self.ledger.session_id
        metadata = {
            "sessionId": self.session_id,
            **self.metadata,
            **self.provenance,
            "incremental": True,
            "source_times": True,
            "created_from": "source",
        }
        sessions = [
            (
                self.ledger,
                self.fold,
                {"task": self.task or "", "metadata": metadata, "runs_source": "direct"},
                status,
            )
        ]
        for task_id, (call_id, arguments, at) in self.tasks.items():
            child = f"{key}:task:{task_id}"
            command = str(arguments.get("command") or arguments.get("cmd") or "")
            if at is None:
                raise NotHandled(f"task {task_id}: no time")
            ledger = _Ledger(self.conn, child, _header(self.provenance, child), at)
            ledger.add(
                "run_started",
                ENCODE(
                    {
                        "agent_id": None,
                        "criteria": [],
                        "goal": command,
                        "kind": "run_started",
                        "run_id": child,
                        "system_prompt": None,
                    }
                ).encode(),
                at,
            )
            fold = _Fold()
            fold.phase = "open"
            description = arguments.get("description")
            meta = {
                "run_source": "task",
                "task_id": task_id,
                "command": command,
                "started_by": call_id,
                **({"description": description} if type(description) is str else {}),
                **self.provenance,
                "incremental": True,
                "source_times": True,
                "created_from": "source",
            }
            task = (description if type(description) is str else command)[:200]
            sessions.append(
                (
                    ledger,
                    fold,
                    {"task": task, "metadata": meta, "runs_source": "task", "parent": key},
                    "incomplete",
                )
            )
        return sessions


def _output(line: int, block: dict[str, Any]) -> str:
    """A result's content as text (text blocks joined by newlines); other blocks are not handled."""
    content = block.get("content")
    if type(content) is str:
        return content
    if content is None:
        return ""
    if type(content) is not list or any(type(b) is not dict or b.get("type") != "text" for b in content):
        raise NotHandled(f"line {line}: a result whose content is not text")
    return "\n".join(_str(b.get("text")) for b in content)


def _header(provenance: dict[str, Any], key: str) -> bytes:
    """``import_file``'s seq-0 ``Custom("import_source")`` (no warnings: a case that warns is not handled)."""
    payload = {**provenance, "native_key": key, "warnings": []}
    return ENCODE({"custom_kind": "import_source", "kind": "custom", "payload": payload}).encode("utf-8")


def import_transcript(transcript: Path, db: Path) -> list[tuple[str, int, str, str]]:
    """Record ``transcript`` into a fresh SQLite file ``db`` (module docstring); return each session's
    ``(session_id, head_seq, head_hash, merkle_root)``.

    Raises:
        NotHandled: a record or case this mapping does not map (nothing is committed then).
    """
    digest, size = _SHA(), 0
    with transcript.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    provenance = {
        "format": "claude-code",
        "importer_version": "1",
        "source_sha256": digest.hexdigest(),
        "source_name": transcript.name,
        "size_bytes": size,
    }
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.executescript(_DDL)
        conn.execute("BEGIN IMMEDIATE")
        mapper = _Mapper(conn, provenance)
        loads = json.loads
        with transcript.open("rb") as fh:
            for line, raw in enumerate(fh, 1):
                try:
                    record = loads(raw)
                except ValueError as exc:
                    raise NotHandled(f"line {line}: no JSON ({exc})") from exc
                if type(record) is not dict:
                    raise NotHandled(f"line {line}: no JSON object")
                mapper.feed(line, record)
        sessions = mapper.finish()
        now = time.time_ns() // 1_000_000
        for ledger, fold, meta, status in sessions:
            ledger.close(fold, meta, status)
            conn.execute(
                "INSERT INTO imports VALUES (?, ?, 'claude-code', '1', ?, ?)",
                ("source:" + ledger.session_id, ledger.session_id, transcript.name, now),
            )
        conn.execute(
            "INSERT INTO imports VALUES (?, ?, 'claude-code', '1', ?, ?)",
            (provenance["source_sha256"], sessions[0][0].session_id, transcript.name, now),
        )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    finally:
        conn.close()
    return [(ledger.session_id, ledger.seq - 1, ledger.prev, ledger.root()) for ledger, *_ in sessions]


def heads(db: Path) -> list[tuple[str, int, str, str]]:
    """``(session_id, head_seq, head_hash, merkle_root)`` of every session of a flightlog or floor database."""
    conn = sqlite3.connect(db)
    try:
        query = "SELECT session_id, head_seq, head_hash, merkle_root FROM sessions ORDER BY session_id"
        return [(row[0], row[1], row[2], row[3]) for row in conn.execute(query)]
    finally:
        conn.close()


def first_difference(floor_db: Path, flightlog_db: Path) -> str | None:
    """Where the floor's database differs from flightlog's for the same file, None when it does not: the
    sessions, each event row (kind, bytes, prev hash, hash, time) in seq order, each session's head and tree
    root, and each runs row's state and snapshot. The message names the session and the first seq."""
    ours, theirs = sqlite3.connect(floor_db), sqlite3.connect(flightlog_db)
    try:
        names = [r[0] for r in theirs.execute("SELECT session_id FROM sessions ORDER BY session_id")]
        mine = [r[0] for r in ours.execute("SELECT session_id FROM sessions ORDER BY session_id")]
        if names != mine:
            return f"sessions differ: flightlog {names}, floor {mine}"
        query = "SELECT seq, kind, event, prev_hash, hash, recorded_at_ms FROM events WHERE session_id = ? ORDER BY seq"
        fields = ("seq", "kind", "event bytes", "prev_hash", "hash", "recorded_at_ms")
        for name in names:
            a, b = ours.execute(query, (name,)), theirs.execute(query, (name,))
            for seq, (row, other) in enumerate(zip(a, b, strict=False)):
                for field, mine_value, their_value in zip(fields, row, other, strict=True):
                    if (
                        bytes(mine_value) != bytes(their_value)
                        if field == "event bytes"
                        else mine_value != their_value
                    ):
                        return f"{name}: seq {seq} differs ({field})"
            count = "SELECT count(*) FROM events WHERE session_id = ?"
            n, m = ours.execute(count, (name,)).fetchone()[0], theirs.execute(count, (name,)).fetchone()[0]
            if n != m:
                return f"{name}: {n} events in the floor, {m} in flightlog: seq {min(n, m)} differs"
            head = "SELECT head_seq, head_hash, merkle_root, status FROM sessions WHERE session_id = ?"
            if ours.execute(head, (name,)).fetchone() != theirs.execute(head, (name,)).fetchone():
                return f"{name}: the session row's head, tree root or status differs"
            run = "SELECT state, last_seq, session_status, snapshot FROM runs WHERE run_id = ?"
            if ours.execute(run, (name,)).fetchone() != theirs.execute(run, (name,)).fetchone():
                return f"{name}: the runs row differs"
        return None
    finally:
        ours.close()
        theirs.close()
