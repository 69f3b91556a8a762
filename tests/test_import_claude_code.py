"""The Claude Code transcript importer: real samples (tests/data/samples/claude-code) and hostile files."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from flightlog import replay
from flightlog.encoding import canonical_bytes, decode_stored
from flightlog.events import (
    AgentProcessChanged,
    CancellationReason,
    Compressed,
    Custom,
    LlmCompleted,
    OperationCancelled,
    Rollbacked,
    RunStarted,
    RunTerminal,
    SessionEvent,
    ToolCompleted,
    ToolDenied,
    ToolRequested,
)
from flightlog.importers import claude_code
from flightlog.importers.base import ImportedSession, ImportWarning
from flightlog.messages import ImagePart, RedactedThinkingPart, TextPart, ThinkingPart
from flightlog.store import SqliteStore

SAMPLES = Path(__file__).parent / "data" / "samples" / "claude-code"
SAMPLE_FILES = sorted(SAMPLES.glob("*.jsonl"))
assert SAMPLE_FILES, f"no Claude Code samples under {SAMPLES}: every sample test would pass on nothing"
SHORT = SAMPLES / "spotter_short.jsonl"
HEAVY = SAMPLES / "spotter_tool_heavy.jsonl"
SUBAGENT = SAMPLES / "spotter_subagent_parent.jsonl"
DAG = SAMPLES / "claudecodelog_dag_compact_after_rewind.jsonl"

T = TypeVar("T")

PROMPTS: dict[str, list[str]] = {
    DAG.name: ["Start", "First attempt", "Second attempt", "Keep going", "After compaction"],
    SHORT.name: ["mix phx.server doesnt seem to start"],
    HEAVY.name: ["start phoenix in background", "scrolling back in xterm.js still does not work"],
    SUBAGENT.name: ["<command-message>handgemacht:create-beads</command-message>", "create the beads"],
}
"""Every human prompt of each sample, in order (prefixes); slash-command noise and meta lines excluded."""


# ─── Helpers ──────────────────────────────────────────────────────────────────────────────────


def walk_source(path: Path) -> Iterator[dict[str, Any]]:
    """Every JSON object in the file, nested ones included (``toolUseResult`` copies left out)."""
    stack: list[Any] = []
    for raw in path.read_bytes().splitlines():
        try:
            stack.append(json.loads(raw))
        except ValueError:
            continue
        while stack:
            item = stack.pop()
            if isinstance(item, dict):
                yield item
                stack.extend(v for k, v in item.items() if k != "toolUseResult")
            elif isinstance(item, list):
                stack.extend(item)


def source_blocks(path: Path, block_type: str) -> list[dict[str, Any]]:
    return [b for b in walk_source(path) if b.get("type") == block_type]


def import_all(path: Path) -> tuple[list[ImportedSession], list[ImportWarning]]:
    """The agent sessions of a transcript (background-task children: tests/test_import_background_tasks.py)."""
    warnings: list[ImportWarning] = []
    sessions = claude_code.read(path, warnings)
    return [s for s in sessions if s.metadata.get("run_source") != "task"], warnings


def all_events(sessions: list[ImportedSession]) -> list[SessionEvent]:
    return [event for session in sessions for event in session.events]


def of(events: list[SessionEvent], kind: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def customs(events: list[SessionEvent], custom_kind: str) -> list[Custom]:
    return [e for e in of(events, Custom) if e.custom_kind == custom_kind]


def call_ids(events: list[SessionEvent]) -> list[str]:
    return [c.id for e in of(events, LlmCompleted) for c in e.message.tool_calls]


def requested_ids(events: list[SessionEvent]) -> list[str]:
    return [c.id for e in of(events, ToolRequested) for c in e.calls]


def result_ids(events: list[SessionEvent]) -> list[str]:
    return [r.call_id for e in of(events, ToolCompleted) for r in e.results]


def write_jsonl(path: Path, lines: list[Any], *, prefix: bytes = b"") -> Path:
    """One line per item: dicts as JSON (non-ASCII kept raw), str/bytes as given."""
    out = []
    for item in lines:
        if isinstance(item, bytes):
            out.append(item)
        elif isinstance(item, str):
            out.append(item.encode("utf-8"))
        else:
            out.append(json.dumps(item, ensure_ascii=False).encode("utf-8"))
    path.write_bytes(prefix + b"\n".join(out) + b"\n")
    return path


def rec(record_type: str, uuid: str | None, parent: str | None, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "type": record_type,
        "parentUuid": parent,
        "isSidechain": False,
        "cwd": "/home/dev/project",
        "sessionId": "sess-1",
        "version": "2.1.0",
        "gitBranch": "main",
        "timestamp": "2026-03-01T10:00:00.000Z",
    }
    if uuid is not None:
        base["uuid"] = uuid
    base.update(fields)
    return base


def user(uuid: str, parent: str | None, content: Any, **fields: Any) -> dict[str, Any]:
    return rec("user", uuid, parent, message={"role": "user", "content": content}, **fields)


def assistant(
    uuid: str, parent: str | None, msg_id: str, *blocks: dict[str, Any], **fields: Any
) -> dict[str, Any]:
    message = {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": list(blocks),
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }
    return rec("assistant", uuid, parent, message=message, **fields)


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_use(call_id: str, name: str = "Bash", **input_: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": input_ or {"command": "ls"}}


def result(
    uuid: str,
    parent: str | None,
    call_id: str,
    output: Any = "ok",
    *,
    is_error: bool | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """A user line carrying one tool_result block; ``fields`` go on the record (``toolUseResult``...)."""
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": output}
    if is_error is not None:
        block["is_error"] = is_error
    return user(uuid, parent, [block], **fields)


def basic(tmp_path: Path, *middle: Any, name: str = "s.jsonl", prefix: bytes = b"") -> Path:
    """A prompt, one completion calling ``c1``, its result, ``middle`` lines, a final answer."""
    lines = [
        user("u1", None, "do it"),
        assistant("a1", "u1", "m1", tool_use("c1")),
        result("r1", "a1", "c1"),
        *middle,
        assistant("a2", "r1", "m2", text("done")),
    ]
    return write_jsonl(tmp_path / name, lines, prefix=prefix)


def nonempty(items: list[T], what: str) -> list[T]:
    """``items``, after asserting there is at least one (a check over nothing proves nothing)."""
    assert items, f"no {what}"
    return items


def only(sessions: list[ImportedSession]) -> ImportedSession:
    assert len(sessions) == 1
    return sessions[0]


# ─── Real samples ─────────────────────────────────────────────────────────────────────────────


def test_the_samples_are_all_here() -> None:
    assert [p.name for p in SAMPLE_FILES] == sorted(PROMPTS)


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.name)
def test_sample_imports_without_warnings_or_paths(path: Path) -> None:
    sessions, warnings = import_all(path)
    assert warnings == []
    main = sessions[0]
    assert main.key.startswith("claude-code:") and main.parent_key is None
    assert main.source_format == claude_code.FORMAT == "claude-code"
    assert main.task == PROMPTS[path.name][0][:200] or main.task.startswith(PROMPTS[path.name][0])
    assert main.started_at_ms is not None and main.ended_at_ms is not None
    assert main.started_at_ms <= main.ended_at_ms
    for session in sessions:
        assert "cwd" not in session.metadata
        assert "/home/" not in json.dumps(session.metadata)
    for event in nonempty(of(all_events(sessions), Custom), "Custom events"):
        assert not (isinstance(event.payload, dict) and "cwd" in event.payload)


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.name)
def test_sample_every_call_appears_exactly_once(path: Path) -> None:
    sessions, _ = import_all(path)
    events = all_events(sessions)
    source = {b["id"] for b in source_blocks(path, "tool_use")}
    assert Counter(call_ids(events)) == Counter(source)
    assert Counter(requested_ids(events)) == Counter(source)


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.name)
def test_sample_every_result_appears_exactly_once(path: Path) -> None:
    sessions, _ = import_all(path)
    source = {b["tool_use_id"] for b in source_blocks(path, "tool_result")}
    assert Counter(result_ids(all_events(sessions))) == Counter(source)


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.name)
def test_sample_thinking_signatures_are_byte_exact(path: Path) -> None:
    sessions, _ = import_all(path)
    source = [b["signature"] for b in source_blocks(path, "thinking")]
    native = [
        b["signature"]
        for e in of(all_events(sessions), LlmCompleted)
        for b in e.provider_replay.native_blocks
        if b.get("type") == "thinking"
    ]
    parts = [
        p.signature
        for e in of(all_events(sessions), LlmCompleted)
        for p in e.message.content
        if isinstance(p, ThinkingPart)
    ]
    assert Counter(native) == Counter(source) == Counter(parts)
    for event in of(all_events(sessions), LlmCompleted):
        stored = canonical_bytes(event)
        for block in event.provider_replay.native_blocks:
            if block.get("type") == "thinking":
                assert block["signature"].encode("utf-8") in stored


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.name)
def test_sample_every_prompt_starts_a_run_in_order(path: Path) -> None:
    main = import_all(path)[0][0]
    goals = [e.goal for e in of(main.events, RunStarted)]
    expected = PROMPTS[path.name]
    assert len(goals) == len(expected)
    assert all(goal.startswith(prefix) for goal, prefix in zip(goals, expected, strict=True))
    assert len(of(main.events, RunTerminal)) == len(goals)


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.name)
def test_sample_events_round_trip_canonical_bytes(path: Path) -> None:
    for event in nonempty(all_events(import_all(path)[0]), "events"):
        assert decode_stored(canonical_bytes(event)) == event


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.name)
def test_sample_turns_count_completions_from_one(path: Path) -> None:
    for session in import_all(path)[0]:
        turns = [e.turn for e in nonempty(of(session.events, LlmCompleted), f"completions in {session.key}")]
        assert turns == list(range(1, len(turns) + 1))
        assert sum(e.turns_used for e in of(session.events, RunTerminal)) == len(turns)


@pytest.mark.parametrize("path", [SHORT, HEAVY, SUBAGENT], ids=lambda p: p.name)
def test_sample_replay_shows_every_prompt(path: Path) -> None:
    for session in import_all(path)[0]:
        messages = replay.reconstruct(list(enumerate(session.events, start=1)))
        users = [m.text_content() for m in messages if m.role == "user"]
        assert nonempty(users, f"prompts in {session.key}") == [
            e.goal for e in of(session.events, RunStarted)
        ]
        assert replay.pending_tool_calls(list(enumerate(session.events, start=1))) == []


def test_one_completion_per_message_id() -> None:
    for path in SAMPLE_FILES:
        sessions, _ = import_all(path)
        source_ids = {r["message"]["id"] for r in walk_source(path) if r.get("type") == "assistant"}
        assert len(of(all_events(sessions), LlmCompleted)) == len(nonempty(list(source_ids), path.name))


def test_short_sample_rejections_interrupt_and_merged_completion() -> None:
    main = only(import_all(SHORT)[0])
    [completion] = of(main.events, LlmCompleted)
    assert [type(p) for p in completion.message.content] == [TextPart, ThinkingPart, TextPart]
    assert [c.name for c in completion.message.tool_calls] == ["Bash", "Glob"]
    assert json.loads(completion.message.tool_calls[0].arguments)["command"].startswith("mix phx.server")
    native = completion.provider_replay
    assert (native.protocol, native.provider, native.model) == (
        "anthropic.messages",
        "anthropic",
        "claude-opus-4-6",
    )
    assert len(native.native_blocks) == 5
    denied = of(main.events, ToolDenied)
    assert [(d.tool_name, d.turn) for d in denied] == [("Bash", 1), ("Glob", 1)]
    assert all("doesn't want to proceed" in d.reason for d in denied)
    assert all(r.is_error for e in of(main.events, ToolCompleted) for r in e.results)
    [cancel] = of(main.events, OperationCancelled)
    assert cancel.reason is CancellationReason.USER and cancel.pending_call_ids == []
    assert cancel.operation_id == of(main.events, RunStarted)[0].run_id
    [terminal] = of(main.events, RunTerminal)
    # 3 input + 13835 cache write + 11515 cache read + 13 output tokens.
    assert (terminal.reason, terminal.turns_used, terminal.total_tokens) == ("aborted", 1, 25366)
    assert len(customs(main.events, "claude_code.system")) == 2
    assert main.metadata == {
        "sessionId": "55604662-cf2a-4331-851a-ec234028f8ca",
        "version": "2.1.38",
        "gitBranch": "master",
    }


def test_heavy_sample_interleaved_results_stay_in_one_completion() -> None:
    main = only(import_all(HEAVY)[0])
    kinds = [e.kind for e in main.events if not isinstance(e, Custom)]
    # msg_019BN…: tool_use, its result, then a second tool_use of the same message: one completion.
    completions = of(main.events, LlmCompleted)
    assert [len(c.message.tool_calls) for c in completions] == [1, 1, 2, 2]
    for index, kind in enumerate(kinds):
        if kind == "tool_completed":
            assert "llm_completed" in kinds[:index]
    # /mcp typed after a caveat is a local command, kept but not a prompt.
    [local] = customs(main.events, "claude_code.user.local_command")
    assert "/mcp" in json.dumps(local.payload)
    assert len(customs(main.events, "claude_code.queue-operation")) == 2
    assert [t.reason for t in of(main.events, RunTerminal)] == ["aborted", "aborted"]


def test_subagent_progress_becomes_a_child_session() -> None:
    sessions, _ = import_all(SUBAGENT)
    main, child = sessions
    assert child.key == f"{main.key}:agent:afb92ff"
    assert child.parent_key == main.key
    assert child.task.startswith("Draft bead content")
    assert child.metadata["agentId"] == "afb92ff" and child.metadata["status"] == "completed"
    [run] = of(child.events, RunStarted)
    assert run.agent_id == "afb92ff"
    assert len(of(child.events, LlmCompleted)) == 5
    assert {c.model for c in (e.provider_replay for e in of(child.events, LlmCompleted))} == {
        "claude-haiku-4-5-20251001"
    }
    process = of(main.events, AgentProcessChanged)
    assert [p.state for p in process] == ["spawned", "exited"]
    for p in process:
        assert (p.agent_id, p.parent_session_id, p.role) == (child.key, main.key, "subagent")
        assert (p.isolation, p.context_inheritance, p.turn) == ("sidechain", "none", 6)
    assert process[1].result_termination == "completed"
    # The spawn follows the completion that called Task; the exit precedes Task's result.
    task_call = next(e for e in of(main.events, ToolRequested) if e.calls[0].name == "Task")
    spawned = main.events.index(process[0])
    assert main.events.index(task_call) < spawned
    task_result = next(
        e for e in of(main.events, ToolCompleted) if e.results[0].call_id == task_call.calls[0].id
    )
    assert main.events.index(process[1]) < main.events.index(task_result)


def compressed_seq(events: list[Any]) -> int:
    """The recorded seq of the (only) ``Compressed`` (seq = index + 1: the import_source header is 0)."""
    return next(i for i, e in enumerate(events, start=1) if isinstance(e, Compressed))


def test_rewind_sample_rolls_back_to_the_branch_point() -> None:
    main = only(import_all(DAG)[0])
    [rollback] = of(main.events, Rollbacked)
    assert rollback.checkpoint_history_len == 2 and rollback.reason is None
    at = main.events.index(rollback)
    before, after = main.events[at - 1], main.events[at + 1]
    assert isinstance(before, RunTerminal) and before.reason == "rewound"
    assert isinstance(after, RunStarted) and after.goal == "Second attempt"
    numbered = list(enumerate(main.events, start=1))
    history = replay.reconstruct(numbered)
    # the compaction archived everything before it: the summary stands for it, nothing appears twice
    assert history[0].role == "system" and "This session is being continued" in history[0].text_content()
    assert [m.text_content() for m in history if m.role == "user"] == ["After compaction"]
    before_compaction = replay.reconstruct(numbered, at=compressed_seq(main.events) - 1)
    users = [m.text_content() for m in before_compaction if m.role == "user"]
    assert users == ["Start", "Second attempt", "Keep going"]
    before_rewind = replay.reconstruct(numbered, at=at)  # seq ``at`` is the event just before it
    assert [m.text_content() for m in before_rewind if m.role == "user"] == ["Start", "First attempt"]


def test_compaction_sample_becomes_compressed() -> None:
    main = only(import_all(DAG)[0])
    [compressed] = of(main.events, Compressed)
    assert compressed.action == "compact"
    assert compressed.summary is not None and compressed.summary.startswith("This session is being continued")
    [boundary] = customs(main.events, "claude_code.compact_boundary")
    assert boundary.payload["compactMetadata"] == {"trigger": "auto", "preTokens": 150000}
    first, last = compressed.archived_seq_range
    # Recorded seqs: import_file writes one import_source header at seq 0.
    assert (first, last) == (1, main.events.index(boundary))
    assert isinstance(main.events[last - 1], LlmCompleted)
    assert compressed.turn == 4
    # The summary line is not a prompt.
    assert "This session is being continued" not in [e.goal for e in of(main.events, RunStarted)]


def test_import_file_records_every_sample(tmp_path: Path) -> None:
    from flightlog.importers import import_file

    with SqliteStore(tmp_path / "db.sqlite") as store:
        for path in SAMPLE_FILES:
            result = import_file(store, path)
            assert result.format == "claude-code"
            sessions = claude_code.read(path, [])
            assert result.session_ids == [s.key for s in sessions]
            # open sessions (Claude Code never says one ended): the header and the settled events
            counts = [len(s.events) if s.settled is None else s.settled for s in sessions]
            assert result.events == sum(count + 1 for count in counts)
        dag = only(import_all(DAG)[0])
        rows = list(store.read_events(dag.key))
        compressed = next(decode_stored(r.event_bytes) for r in rows if r.kind == "compressed")
        assert isinstance(compressed, Compressed)
        first, last = compressed.archived_seq_range
        assert rows[first].kind == "run_started" and rows[last].kind == "llm_completed"
        assert rows[last + 1].kind == "custom"


# ─── Hostile files ────────────────────────────────────────────────────────────────────────────


def test_bom_on_the_first_line(tmp_path: Path) -> None:
    session = only(claude_code.read(basic(tmp_path, prefix=b"\xef\xbb\xbf"), warnings := []))
    assert warnings == []
    assert [e.goal for e in of(session.events, RunStarted)] == ["do it"]
    assert session.key == "claude-code:sess-1"


def test_torn_middle_line_is_skipped_and_later_lines_imported(tmp_path: Path) -> None:
    torn = '{"type": "assistant", "uuid": "x", "message": {"id": "m9", "content": [{"type": "te'
    path = basic(tmp_path, torn, user("u2", "a2", "next"))
    warnings: list[ImportWarning] = []
    session = only(claude_code.read(path, warnings))
    assert [(w.line, w.path) for w in warnings] == [(4, "s.jsonl")]
    assert "malformed" in warnings[0].reason
    assert [e.goal for e in of(session.events, RunStarted)] == ["do it", "next"]
    assert result_ids(session.events) == ["c1"]
    assert len(of(session.events, LlmCompleted)) == 2


def test_u2028_inside_strings_is_content_not_a_line_break(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", [user("u1", None, "line\u2028break\u2029para")])
    raw = path.read_bytes()
    assert "\u2028".encode() in raw and raw.count(b"\n") == 1
    session = only(claude_code.read(path, warnings := []))
    assert warnings == []
    [run] = of(session.events, RunStarted)
    assert run.goal == "line\u2028break\u2029para"
    assert decode_stored(canonical_bytes(run)) == run


def test_lone_surrogate_in_tool_output_is_escaped_and_flagged(tmp_path: Path) -> None:
    lines = [
        user("u1", None, "go"),
        assistant("a1", "u1", "m1", tool_use("c1")),
        '{"type": "user", "uuid": "r1", "parentUuid": "a1", "sessionId": "sess-1", "message": {"role": "user", '
        '"content": [{"type": "tool_result", "tool_use_id": "c1", "content": "bad \\ud800 byte"}]}}',
    ]
    warnings: list[ImportWarning] = []
    session = only(claude_code.read(write_jsonl(tmp_path / "s.jsonl", lines), warnings))
    [completed] = of(session.events, ToolCompleted)
    assert completed.results[0].output == "bad \\ud800 byte"
    assert [w.line for w in warnings if "surrogate" in w.reason] == [3]
    for event in session.events:
        canonical_bytes(event)


def test_thirty_megabyte_single_line(tmp_path: Path) -> None:
    big = "x" * (30 * 1024 * 1024)
    path = basic(tmp_path, user("u2", "a2", "after"))
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[2] = json.dumps(result("r1", "a1", "c1", big, toolUseResult={"stdout": big}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    session = only(claude_code.read(path, warnings := []))
    assert warnings == []
    [completed] = of(session.events, ToolCompleted)
    assert len(completed.results[0].output) == len(big)
    assert len(canonical_bytes(completed)) > len(big)
    assert [e.goal for e in of(session.events, RunStarted)] == ["do it", "after"]


def test_duplicated_records_are_counted_once(tmp_path: Path) -> None:
    lines = [
        user("u1", None, "do it"),
        assistant("a1", "u1", "m1", tool_use("c1")),
        assistant("a1", "u1", "m1", tool_use("c1")),
        result("r1", "a1", "c1"),
        result("r1", "a1", "c1"),
        user("u1", None, "do it"),
        assistant("a2", "r1", "m2", text("done")),
        # Same call and result again under new uuids (a resumed session copying history).
        assistant("a1-copy", "r1", "m1", tool_use("c1")),
        result("r1-copy", "a1-copy", "c1"),
    ]
    warnings: list[ImportWarning] = []
    session = only(claude_code.read(write_jsonl(tmp_path / "s.jsonl", lines), warnings))
    assert len(of(session.events, RunStarted)) == 1
    assert call_ids(session.events) == ["c1"] and result_ids(session.events) == ["c1"]
    assert [e.turns_used for e in of(session.events, RunTerminal)] == [3]
    assert any("3 duplicate record(s)" in w.reason and w.line == 3 for w in warnings)
    assert any("repeated tool_use id c1" in w.reason for w in warnings)
    assert any("repeated tool_result for c1" in w.reason for w in warnings)
    assert any("late line of completion m1" in w.reason for w in warnings)


def test_a_record_s_uuid_is_looked_up_once_on_its_way_to_the_main_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file importer deduplicates top-level records by ``uuid``; the main session's builder, fed only
    those, does not check (and store) every uuid a second time. A sub-agent's builder still checks: the same
    message can come in a sidechain record and inside an ``agent_progress`` record."""
    looked_up: Counter[tuple[int, str]] = Counter()
    skip = claude_code._Context.skip_duplicate

    def counting(ctx: Any, line: int, record: dict[str, Any], seen: set[str]) -> bool:
        looked_up[line, str(record.get("uuid"))] += 1
        return skip(ctx, line, record, seen)

    monkeypatch.setattr(claude_code._Context, "skip_duplicate", counting)
    lines = [user("u1", None, "do it"), assistant("a1", "u1", "m1", text("done")), user("u1", None, "do it")]
    warnings: list[ImportWarning] = []
    session = only(claude_code.read(write_jsonl(tmp_path / "s.jsonl", lines), warnings))
    assert looked_up == {(1, "u1"): 1, (2, "a1"): 1, (3, "u1"): 1}
    assert len(of(session.events, RunStarted)) == 1
    assert [w.reason for w in warnings if "duplicate" in w.reason] == ["1 duplicate record(s) skipped"]


def test_unknown_record_types_are_kept_as_custom(tmp_path: Path) -> None:
    novel = rec("brand-new-thing", "n1", "r1", data={"x": 1}, cwd="/home/dev/secret")
    untyped = {"hello": "world"}
    path = basic(tmp_path, novel, untyped, {"type": "summary", "summary": "Title", "leafUuid": "a2"})
    session = only(claude_code.read(path, warnings := []))
    assert warnings == []
    [kept] = customs(session.events, "claude_code.brand-new-thing")
    assert kept.payload["data"] == {"x": 1} and "cwd" not in kept.payload
    assert customs(session.events, "claude_code.unknown")[0].payload == untyped
    assert customs(session.events, "claude_code.summary")[0].payload["summary"] == "Title"


@pytest.mark.parametrize(
    "cwd", ["/home/dev/p", None, "c" * 40_000, 2**60, float("nan"), {"deep": "x" * 40_000}, ["a"], True]
)
def test_a_kept_record_drops_cwd_whatever_it_holds_and_warns_only_of_what_it_keeps(
    tmp_path: Path, cwd: Any
) -> None:
    """``cwd`` is never kept, and a value in it (too long, a number RFC 8785 cannot hold) is neither
    truncated nor counted in a warning: only what the payload keeps is."""
    novel = rec("brand-new-thing", "n1", "r1", data={"x": 1, "big": 2**60})
    novel["cwd"] = cwd
    warnings: list[ImportWarning] = []
    session = only(claude_code.read(basic(tmp_path, novel), warnings))
    [kept] = customs(session.events, "claude_code.brand-new-thing")
    assert "cwd" not in kept.payload and kept.payload["data"] == {"x": 1, "big": str(2**60)}
    assert [w.reason for w in warnings] == ["1 number(s) not representable in RFC 8785 kept as text"]


def test_numbers_outside_rfc8785_and_long_strings_in_kept_records(tmp_path: Path) -> None:
    odd = '{"type": "queue-operation", "operation": "enqueue", "n": NaN, "big": 123456789012345678901, "s": "%s"}'
    path = basic(tmp_path, odd % ("y" * 100_000))
    warnings: list[ImportWarning] = []
    session = only(claude_code.read(path, warnings))
    [kept] = customs(session.events, "claude_code.queue-operation")
    assert kept.payload["n"] == "nan" and kept.payload["big"] == "123456789012345678901"
    assert kept.payload["s"].endswith("…[truncated 67232 chars]")
    assert {w.line for w in warnings} == {4}
    for event in session.events:
        canonical_bytes(event)


def test_orphan_result_and_pending_call_are_recorded(tmp_path: Path) -> None:
    lines = [
        user("u1", None, "go"),
        assistant("a1", "u1", "m1", tool_use("c1"), tool_use("c2", "Read")),
        result("r1", "a1", "c1"),
        result("r9", "r1", "ghost", "who called me?"),
    ]
    session = only(claude_code.read(write_jsonl(tmp_path / "s.jsonl", lines), warnings := []))
    assert warnings == []
    assert result_ids(session.events) == ["c1", "ghost"]
    [orphan] = customs(session.events, "claude_code.orphan_tool_result")
    assert orphan.payload == {"call_id": "ghost", "line": 4}
    [pending] = customs(session.events, "claude_code.pending_tool_call")
    assert pending.payload == {"call_id": "c2", "tool_name": "Read", "turn": 1}
    assert session.events[-1] == RunTerminal(reason="incomplete", turns_used=1, total_tokens=15)
    assert [c.id for c in replay.pending_tool_calls(list(enumerate(session.events, start=1)))] == ["c2"]


def test_interrupt_cancels_with_pending_calls(tmp_path: Path) -> None:
    lines = [
        user("u1", None, "go"),
        assistant("a1", "u1", "m1", tool_use("c1")),
        user("i1", "a1", [text("[Request interrupted by user for tool use]")]),
        user("u2", "i1", "never mind"),
    ]
    session = only(claude_code.read(write_jsonl(tmp_path / "s.jsonl", lines), []))
    [cancel] = of(session.events, OperationCancelled)
    assert (cancel.operation_id, cancel.pending_call_ids, cancel.turn) == ("u1", ["c1"], 1)
    assert [t.reason for t in of(session.events, RunTerminal)] == ["aborted", "incomplete"]
    assert [e.goal for e in of(session.events, RunStarted)] == ["go", "never mind"]
    assert of(session.events, Rollbacked) == []


def test_prompt_images_become_attachments_and_meta_lines_are_kept(tmp_path: Path) -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0K"}}
    lines = [
        user("u1", None, [text("look"), image]),
        user("m1", "u1", [text("expanded command body")], isMeta=True),
        assistant("a1", "m1", "msg1", {"type": "redacted_thinking", "data": "opaque=="}, text("seen")),
    ]
    session = only(claude_code.read(write_jsonl(tmp_path / "s.jsonl", lines), warnings := []))
    assert warnings == []
    [run] = of(session.events, RunStarted)
    assert run.goal == "look"
    assert run.attachments == [ImagePart(ref="data:image/png;base64,iVBORw0K", media_type="image/png")]
    assert len(customs(session.events, "claude_code.user.meta")) == 1
    [completion] = of(session.events, LlmCompleted)
    assert completion.message.content == [RedactedThinkingPart(data="opaque=="), TextPart(text="seen")]
    assert session.events[-1] == RunTerminal(reason="completed", turns_used=1, total_tokens=15)


def test_tool_result_images_are_flattened_to_a_placeholder(tmp_path: Path) -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}
    path = basic(tmp_path, name="s.jsonl")
    lines = path.read_text().splitlines()
    lines[2] = json.dumps(result("r1", "a1", "c1", [text("shot:"), image], is_error=False))
    path.write_text("\n".join(lines) + "\n")
    session = only(claude_code.read(path, []))
    assert (
        of(session.events, ToolCompleted)[0].results[0].output == "shot:\n[image: image/png, 4 base64 chars]"
    )


def test_sidechain_records_and_subagent_files_become_children(tmp_path: Path) -> None:
    main_lines = [
        user("u1", None, "delegate"),
        assistant("a1", "u1", "m1", tool_use("task-1", "Task", prompt="sub job")),
        result(
            "r1", "a1", "task-1", [text("sub done")], toolUseResult={"status": "completed", "agentId": "ag1"}
        ),
        assistant("a2", "r1", "m2", text("all done")),
    ]
    path = write_jsonl(tmp_path / "sess-1.jsonl", main_lines)
    folder = tmp_path / "sess-1" / "subagents"
    folder.mkdir(parents=True)
    write_jsonl(
        folder / "agent-ag1.jsonl",
        [
            user("s1", None, "sub job", isSidechain=True, agentId="ag1"),
            assistant("s2", "s1", "sm1", tool_use("sub-call", "Read"), isSidechain=True, agentId="ag1"),
            result("s3", "s2", "sub-call", "file text", isSidechain=True, agentId="ag1"),
            assistant("s4", "s3", "sm2", text("sub done"), isSidechain=True, agentId="ag1"),
        ],
    )
    sessions = claude_code.read(path, warnings := [])
    assert warnings == []
    main, child = sessions
    assert child.key == "claude-code:sess-1:agent:ag1" and child.parent_key == main.key
    assert child.metadata["status"] == "completed"
    assert call_ids(child.events) == ["sub-call"] and result_ids(child.events) == ["sub-call"]
    assert child.events[-1] == RunTerminal(reason="completed", turns_used=2, total_tokens=30)
    assert [(p.state, p.agent_id) for p in of(main.events, AgentProcessChanged)] == [
        ("spawned", child.key),
        ("exited", child.key),
    ]
    # Read alone, the sub-agent file is a child session pointing at its parent.
    alone = only(claude_code.read(folder / "agent-ag1.jsonl", []))
    assert alone.key == child.key and alone.parent_key == "claude-code:sess-1"


def test_sidechain_without_agent_id_is_keyed_by_its_root(tmp_path: Path) -> None:
    lines = [
        user("u1", None, "delegate"),
        assistant("a1", "u1", "m1", tool_use("task-1", "Task")),
        user("s1", None, "sub job", isSidechain=True),
        assistant("s2", "s1", "sm1", text("sub answer"), isSidechain=True),
        result("r1", "a1", "task-1", "sub answer"),
    ]
    main, child = claude_code.read(write_jsonl(tmp_path / "s.jsonl", lines), [])
    assert child.key == "claude-code:sess-1:sidechain:s1" and child.metadata["sidechainRoot"] == "s1"
    assert [e.goal for e in of(child.events, RunStarted)] == ["sub job"]
    assert [p.state for p in of(main.events, AgentProcessChanged)] == ["spawned"]
    assert result_ids(main.events) == ["task-1"]


def test_parallel_results_pointing_at_earlier_lines_are_not_rewinds(tmp_path: Path) -> None:
    lines = [
        user("u1", None, "go"),
        assistant("a1", "u1", "m1", tool_use("c1")),
        assistant("a2", "a1", "m1", tool_use("c2")),
        result("r2", "a2", "c2"),
        result("r1", "a1", "c1"),  # parallel results point at their own call's line
        user("u2", "r2", "next"),  # at the first of them, with no completion since: not a rewind
        assistant("a3", "u2", "m2", text("ok")),
        user("u3", "r1", "again"),  # back to before "next": a rewind
    ]
    session = only(claude_code.read(write_jsonl(tmp_path / "s.jsonl", lines), []))
    [rollback] = of(session.events, Rollbacked)
    assert rollback.checkpoint_history_len == 4  # user, assistant, two tool messages
    assert session.events[session.events.index(rollback) + 1] == RunStarted(run_id="u3", goal="again")
    assert [t.reason for t in of(session.events, RunTerminal)] == ["completed", "rewound", "incomplete"]
    messages = replay.reconstruct(list(enumerate(session.events, start=1)))
    assert [m.role for m in messages] == ["user", "assistant", "tool", "tool", "user"]


def test_compact_boundary_without_summary_still_compresses(tmp_path: Path) -> None:
    boundary = rec("system", "cb", None, subtype="compact_boundary", logicalParentUuid="a2")
    path = basic(tmp_path, boundary, user("u2", "cb", "go on"))
    session = only(claude_code.read(path, []))
    [compressed] = of(session.events, Compressed)
    assert compressed.summary is None and compressed.archived_seq_range == (1, 4)
    assert [e.goal for e in of(session.events, RunStarted)] == ["do it", "go on"]


def test_session_without_session_id_falls_back_to_the_file_stem(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "abc.jsonl", [{"type": "user", "uuid": "u", "message": {"content": "hi"}}])
    session = only(claude_code.read(path, []))
    assert session.key == "claude-code:abc" and session.started_at_ms is None


def test_empty_file_yields_no_session(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"\n\n")
    assert claude_code.read(path, []) == []


def test_looks_like() -> None:
    for path in SAMPLE_FILES:
        first = json.loads(path.read_bytes().splitlines()[0])
        assert claude_code.looks_like(first)
    assert claude_code.looks_like(user("u", None, "hi"))
    assert claude_code.looks_like({"type": "summary", "summary": "t", "leafUuid": "x"})
    assert not claude_code.looks_like({"timestamp": "t", "type": "session_meta", "payload": {"id": "x"}})
    assert not claude_code.looks_like({"timestamp": "t", "type": "response_item", "payload": {}})
    assert not claude_code.looks_like({"type": "user", "payload": {}})
    assert not claude_code.looks_like({"hello": "world"})
    assert claude_code.VERSION == "1"


def test_background_agent_exits_only_on_a_terminal_status(tmp_path: Path) -> None:
    launched = {"status": "async_launched", "agentId": "bg1"}
    finished = {"status": "completed", "agentId": "bg1", "totalTokens": 42}
    lines = [
        user("u1", None, "delegate"),
        assistant("a1", "u1", "m1", tool_use("task-1", "Task")),
        result("r1", "a1", "task-1", "launched", toolUseResult=launched),
        assistant("a2", "r1", "m2", tool_use("out-1", "TaskOutput")),
        result("r2", "a2", "out-1", "report", toolUseResult=finished),
        assistant("a3", "r2", "m3", tool_use("out-2", "TaskOutput")),
        result("r3", "a3", "out-2", "report again", toolUseResult=finished),
    ]
    main = only(claude_code.read(write_jsonl(tmp_path / "s.jsonl", lines), []))
    process = of(main.events, AgentProcessChanged)
    assert [(p.state, p.turn, p.result_termination) for p in process] == [
        ("spawned", 1, None),
        ("exited", 2, "completed"),
    ]
    assert {p.agent_id for p in process} == {"claude-code:sess-1:agent:bg1"}
