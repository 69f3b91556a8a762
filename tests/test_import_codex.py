"""The Codex CLI rollout importer: real samples (tests/data/samples/codex) and hostile files built here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flightlog import replay
from flightlog.encoding import canonical_bytes, decode_stored
from flightlog.events import (
    Compressed,
    Custom,
    LlmCompleted,
    OperationCancelled,
    RunStarted,
    RunTerminal,
    SessionEvent,
    ToolCompleted,
    ToolRequested,
)
from flightlog.importers import codex
from flightlog.importers.base import ImportedSession, ImportWarning
from flightlog.messages import ImagePart, RedactedThinkingPart, TextPart, ThinkingPart
from flightlog.replay import reconstruct

SAMPLES = Path(__file__).parent / "data" / "samples" / "codex"
SAMPLE_FILES = sorted(SAMPLES.glob("*.jsonl"))
assert SAMPLE_FILES, f"no Codex samples under {SAMPLES}: every sample test would pass on nothing"
FULL = SAMPLES / "localpush_rollout-2026-02-23T20-34-25-019c8bfe.jsonl"
UNFINISHED = SAMPLES / "localpush_rollout-2026-02-23T13-19-38-019c8a70-unfinished.jsonl"
MALFORMED = SAMPLES / "claudecodelog_malformed_rollout-66666666.jsonl"

CALL_TYPES = {"function_call", "custom_tool_call"}
OUTPUT_TYPES = {"function_call_output", "custom_tool_call_output"}


# ─── Helpers ──────────────────────────────────────────────────────────────────────────────────


def source_records(path: Path) -> list[dict[str, Any]]:
    """Decodable records of a sample, in order (malformed lines left out)."""
    records = []
    for raw in path.read_bytes().splitlines():
        try:
            value = json.loads(raw)
        except ValueError:
            continue
        if isinstance(value, dict):
            records.append(value)
    return records


def source_items(path: Path, types: set[str]) -> list[dict[str, Any]]:
    """``response_item`` payloads of the given types."""
    return [
        r["payload"]
        for r in source_records(path)
        if r.get("type") == "response_item" and r["payload"].get("type") in types
    ]


def import_one(path: Path) -> tuple[ImportedSession, list[ImportWarning]]:
    warnings: list[ImportWarning] = []
    sessions = codex.read(path, warnings)
    assert len(sessions) == 1
    return sessions[0], warnings


def of(events: list[SessionEvent], kind: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def customs(events: list[SessionEvent], custom_kind: str) -> list[Custom]:
    return [e for e in of(events, Custom) if e.custom_kind == custom_kind]


def call_ids(events: list[SessionEvent]) -> list[str]:
    return [c.id for e in of(events, LlmCompleted) for c in e.message.tool_calls]


def result_ids(events: list[SessionEvent]) -> list[str]:
    return [r.call_id for e in of(events, ToolCompleted) for r in e.results]


def write_jsonl(path: Path, lines: list[Any]) -> Path:
    """One line per item: dicts as JSON (non-ASCII kept raw), str/bytes as given."""
    out = []
    for item in lines:
        if isinstance(item, bytes):
            out.append(item)
        elif isinstance(item, str):
            out.append(item.encode("utf-8"))
        else:
            out.append(json.dumps(item, ensure_ascii=False).encode("utf-8"))
    path.write_bytes(b"\n".join(out) + b"\n")
    return path


def rec(record_type: str, payload: Any, second: int = 0) -> dict[str, Any]:
    return {"timestamp": f"2026-03-01T10:00:{second:02d}.000Z", "type": record_type, "payload": payload}


def meta(session_id: str = "sess-1") -> dict[str, Any]:
    return rec(
        "session_meta",
        {"id": session_id, "cwd": "/home/dev/x", "cli_version": "0.1", "originator": "codex_cli_rs"},
    )


def prompt(text: str, second: int = 1) -> dict[str, Any]:
    return rec("event_msg", {"type": "user_message", "message": text, "images": []}, second)


def fcall(call_id: str, second: int = 2, name: str = "shell", args: str = '{"cmd":"ls"}') -> dict[str, Any]:
    payload = {"type": "function_call", "name": name, "arguments": args, "call_id": call_id}
    return rec("response_item", payload, second)


def fout(call_id: str, output: Any = "ok", second: int = 3) -> dict[str, Any]:
    return rec(
        "response_item", {"type": "function_call_output", "call_id": call_id, "output": output}, second
    )


def say(text: str, second: int = 4) -> dict[str, Any]:
    content = [{"type": "output_text", "text": text}]
    return rec("response_item", {"type": "message", "role": "assistant", "content": content}, second)


def done(second: int = 5) -> dict[str, Any]:
    return rec("event_msg", {"type": "task_complete", "last_agent_message": "done"}, second)


def basic(tmp_path: Path, *middle: Any, name: str = "r.jsonl") -> Path:
    return write_jsonl(tmp_path / name, [meta(), prompt("do it"), *middle, done()])


# ─── Real samples ─────────────────────────────────────────────────────────────────────────────


def test_the_samples_are_all_here() -> None:
    assert sorted([FULL, UNFINISHED, MALFORMED]) == SAMPLE_FILES


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.name)
def test_sample_imports_as_one_session_without_paths(path: Path) -> None:
    session, _ = import_one(path)
    session_meta = source_records(path)[0]["payload"]
    assert session.key == f"codex:{session_meta['id']}"
    assert session.source_format == "codex"
    assert set(session.metadata) <= {"id", "cli_version", "originator", "model_provider"}
    assert session.metadata["id"] == session_meta["id"]
    assert session.started_at_ms is not None and session.ended_at_ms is not None
    assert session.started_at_ms <= session.ended_at_ms
    assert session.events


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.name)
def test_sample_every_call_appears_exactly_once(path: Path) -> None:
    session, _ = import_one(path)
    source = {p["call_id"] for p in source_items(path, CALL_TYPES)}
    ids = call_ids(session.events)
    assert sorted(ids) == sorted(source)
    requested = [c.id for e in of(session.events, ToolRequested) for c in e.calls]
    assert sorted(requested) == sorted(source)


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.name)
def test_sample_every_result_appears_exactly_once(path: Path) -> None:
    session, _ = import_one(path)
    outputs = source_items(path, OUTPUT_TYPES)
    assert sorted(result_ids(session.events)) == sorted(p["call_id"] for p in outputs)
    texts = {r.call_id: r.output for e in of(session.events, ToolCompleted) for r in e.results}
    assert all(texts[p["call_id"]] == p["output"] for p in outputs)


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.name)
def test_sample_encrypted_content_is_byte_exact(path: Path) -> None:
    session, _ = import_one(path)
    source = [p["encrypted_content"] for p in source_items(path, {"reasoning"})]
    kept, stored_bytes = [], b""
    for event in of(session.events, LlmCompleted):
        stored_bytes += canonical_bytes(event)
        stored = decode_stored(canonical_bytes(event))
        assert isinstance(stored, LlmCompleted) and stored.provider_replay is not None
        blocks = stored.provider_replay.native_blocks or []
        kept += [b["encrypted_content"] for b in blocks if b.get("type") == "reasoning"]
    assert kept == source
    assert all(f'"encrypted_content":"{s}"'.encode() in stored_bytes for s in source)


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.name)
def test_sample_every_prompt_starts_a_run_in_order(path: Path) -> None:
    session, _ = import_one(path)
    prompts = [
        r["payload"]["message"]
        for r in source_records(path)
        if r.get("type") == "event_msg" and r["payload"].get("type") == "user_message"
    ]
    assert [e.goal for e in of(session.events, RunStarted)] == prompts
    assert session.task == prompts[0][:200]
    assert len(of(session.events, RunTerminal)) == len(prompts)


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.name)
def test_sample_events_round_trip_canonical_bytes(path: Path) -> None:
    session, _ = import_one(path)
    assert session.events
    for event in session.events:
        assert decode_stored(canonical_bytes(event)) == event


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.name)
def test_sample_replay_shows_the_prompts(path: Path) -> None:
    session, _ = import_one(path)
    messages = replay.reconstruct(list(enumerate(session.events, start=codex.SEQ_OFFSET)))
    users = [m.text_content() for m in messages if m.role == "user"]
    assert users and users == [e.goal for e in of(session.events, RunStarted)]


def test_malformed_last_line_is_warned_with_its_line_number() -> None:
    session, warnings = import_one(MALFORMED)
    assert [(w.line, w.path) for w in warnings] == [(3, MALFORMED.name)]
    assert "malformed" in warnings[0].reason
    assert [e.goal for e in of(session.events, RunStarted)] == ["Safe line before malformed input."]
    assert of(session.events, RunTerminal)[-1].reason == "incomplete"


def test_unfinished_sample_leaves_its_last_call_pending() -> None:
    session, warnings = import_one(UNFINISHED)
    assert warnings == []
    pending = customs(session.events, "codex.pending_tool_call")
    assert [c.payload["call_id"] for c in pending] == ["call_UtYwHmwWekzvq83m8Rb9K8jJ"]
    assert pending[0].payload["name"] == "exec_command"
    assert result_ids(session.events) == []
    terminal = session.events[-1]
    assert isinstance(terminal, RunTerminal)
    assert (terminal.reason, terminal.turns_used, terminal.total_tokens) == ("incomplete", 1, 34900)


def test_full_sample_groups_one_llm_completed_per_response() -> None:
    session, warnings = import_one(FULL)
    assert warnings == []
    completions = of(session.events, LlmCompleted)
    assert len(completions) == 6
    assert [e.turn for e in completions] == [1, 2, 3, 4, 5, 6]
    first = completions[0]
    assert [type(p) for p in first.message.content] == [ThinkingPart, TextPart]
    assert first.provider_replay is not None
    assert first.provider_replay.protocol == "openai.responses"
    assert (first.provider_replay.provider, first.provider_replay.model) == ("openai", "gpt-5.3-codex")
    assert [b["type"] for b in first.provider_replay.native_blocks or []] == [
        "reasoning",
        "message",
        "function_call",
    ]
    assert [e.turn for e in of(session.events, ToolCompleted)] == [1, 2, 3, 4, 5]
    terminal = session.events[-1]
    assert isinstance(terminal, RunTerminal)
    assert (terminal.reason, terminal.turns_used, terminal.total_tokens) == ("completed", 6, 299496)
    # Context messages (AGENTS.md, environment, developer) and event echoes are kept, never as messages.
    assert len(customs(session.events, "codex.response_item.message")) == 7
    assert len(customs(session.events, "codex.event_msg.agent_message")) == 6


# ─── Hostile files ────────────────────────────────────────────────────────────────────────────


def test_bom_on_the_first_line(tmp_path: Path) -> None:
    path = basic(tmp_path, fcall("c1"), fout("c1"))
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    session, warnings = import_one(path)
    assert warnings == []
    assert session.key == "codex:sess-1"
    assert call_ids(session.events) == ["c1"]


def test_torn_middle_line_is_skipped_and_later_lines_imported(tmp_path: Path) -> None:
    torn = json.dumps(fcall("c9"))[:40]
    path = write_jsonl(tmp_path / "t.jsonl", [meta(), prompt("a"), torn, fcall("c1"), fout("c1"), done()])
    session, warnings = import_one(path)
    assert [w.line for w in warnings] == [3]
    assert call_ids(session.events) == ["c1"] and result_ids(session.events) == ["c1"]
    assert of(session.events, RunTerminal)[0].reason == "completed"


def test_u2028_inside_strings_is_content_not_a_line_break(tmp_path: Path) -> None:
    text = "first\u2028second\u2029third"
    path = basic(tmp_path, say(text))
    session, warnings = import_one(path)
    assert warnings == []
    assert of(session.events, LlmCompleted)[0].message.text_content() == text
    for event in session.events:
        assert decode_stored(canonical_bytes(event)) == event


def test_lone_surrogate_in_tool_output_is_escaped_and_flagged(tmp_path: Path) -> None:
    line = json.dumps(fout("c1", "bad \ud800 byte", second=3))
    assert "\\ud800" in line
    path = basic(tmp_path, fcall("c1"), line)
    session, warnings = import_one(path)
    assert [w.line for w in warnings] == [4]
    (completed,) = of(session.events, ToolCompleted)
    assert completed.results[0].output == "bad \\ud800 byte"
    assert decode_stored(canonical_bytes(completed)) == completed


def test_thirty_megabyte_single_line(tmp_path: Path) -> None:
    big = "x" * 30_000_000
    path = basic(tmp_path, fcall("c1"), fout("c1", big))
    assert path.stat().st_size > 30_000_000
    session, warnings = import_one(path)
    assert warnings == []
    (completed,) = of(session.events, ToolCompleted)
    assert len(completed.results[0].output) == 30_000_000
    assert len(canonical_bytes(completed)) > 30_000_000


def test_duplicated_records_are_recorded_once(tmp_path: Path) -> None:
    lines = [
        meta(),
        prompt("a"),
        prompt("a"),  # exact repeat
        fcall("c1"),
        fcall("c1", second=9),  # same call id, other timestamp
        fout("c1"),
        fout("c1", "other text", second=8),  # same call id again
        done(),
    ]
    session, warnings = import_one(write_jsonl(tmp_path / "d.jsonl", lines))
    assert [w.line for w in warnings] == [3, 5]
    assert len(of(session.events, RunStarted)) == 1
    # The second result differs: real data, kept as an orphan under a session-unique id.
    assert call_ids(session.events) == ["c1"] and result_ids(session.events) == ["c1", "c1#2"]
    assert [r.output for e in of(session.events, ToolCompleted) for r in e.results] == ["ok", "other text"]
    (orphan,) = customs(session.events, "codex.orphan_tool_result")
    assert orphan.payload == {
        "call_id": "c1#2",
        "line": 7,
        "type": "function_call_output",
        "native_call_id": "c1",
    }
    assert customs(session.events, "codex.pending_tool_call") == []


def test_unknown_record_types_are_kept_as_custom(tmp_path: Path) -> None:
    lines = [
        meta(),
        prompt("a"),
        rec("brand_new", {"type": "thing", "x": 1}),
        rec("other_new", [1, 2]),
        rec("response_item", {"type": "ghost_snapshot", "ghost_commit": {"id": "abc"}}),
        {"no_type": True},
    ]
    session, _ = import_one(write_jsonl(tmp_path / "u.jsonl", lines))
    kinds = [e.custom_kind for e in of(session.events, Custom)]
    assert kinds == [
        "codex.session_meta",
        "codex.brand_new.thing",
        "codex.other_new",
        "codex.response_item.ghost_snapshot",
        "codex.record",
    ]
    assert customs(session.events, "codex.other_new")[0].payload == [1, 2]
    assert customs(session.events, "codex.record")[0].payload == {"no_type": True}


def test_numbers_outside_rfc8785_are_kept_as_text(tmp_path: Path) -> None:
    raw = (
        '{"timestamp":"2026-03-01T10:00:02.000Z","type":"event_msg","payload":{"type":"x","n":NaN,"big":%d}}'
    )
    path = basic(tmp_path, raw % (2**60))
    session, warnings = import_one(path)
    assert [w.line for w in warnings] == [3]
    (custom,) = customs(session.events, "codex.event_msg.x")
    assert custom.payload == {"type": "x", "n": "NaN", "big": str(2**60)}
    canonical_bytes(custom)


def test_empty_file_yields_no_session(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"\n\n")
    warnings: list[ImportWarning] = []
    assert codex.read(path, warnings) == []
    assert [w.line for w in warnings] == [None]


# ─── Mapping rules ────────────────────────────────────────────────────────────────────────────


def test_orphan_result_is_recorded_and_flagged(tmp_path: Path) -> None:
    session, _ = import_one(basic(tmp_path, fout("ghost")))
    assert result_ids(session.events) == ["ghost"]
    (orphan,) = customs(session.events, "codex.orphan_tool_result")
    assert orphan.payload["call_id"] == "ghost" and orphan.payload["line"] == 3


def test_custom_tool_call_keeps_input_text_as_arguments(tmp_path: Path) -> None:
    patch = "*** Begin Patch\n*** End Patch\n"
    call = {"type": "custom_tool_call", "name": "apply_patch", "input": patch, "call_id": "p1"}
    out = {"type": "custom_tool_call_output", "call_id": "p1", "output": '{"output":"done","metadata":{}}'}
    session, _ = import_one(basic(tmp_path, rec("response_item", call), rec("response_item", out)))
    (completion,) = of(session.events, LlmCompleted)
    assert completion.message.tool_calls[0].arguments == patch
    assert of(session.events, ToolCompleted)[0].results[0].output == out["output"]


@pytest.mark.parametrize(
    ("output", "is_error"),
    [
        ('{"output":"boom","metadata":{"exit_code":2,"duration_seconds":0.1}}', True),
        ('{"output":"fine","metadata":{"exit_code":0}}', False),
        ('{"content":"nope","success":false}', True),
        ("Exit code: 1\nWall time: 0.2 seconds\nOutput:\nerror", True),
        ("Chunk ID: a\nWall time: 0.1 seconds\nProcess exited with code 0\nOutput:\nok", False),
        ("Output:\nExit code: 3", False),
        ("plain text", False),
        ([{"type": "input_text", "text": "hi"}], False),
    ],
)
def test_tool_result_error_flag(tmp_path: Path, output: Any, is_error: bool) -> None:
    session, _ = import_one(basic(tmp_path, fcall("c1"), fout("c1", output)))
    (result,) = of(session.events, ToolCompleted)[0].results
    assert result.is_error is is_error
    assert result.output == (output if isinstance(output, str) else json.dumps(output, separators=(",", ":")))


def test_reasoning_without_summary_is_redacted_thinking(tmp_path: Path) -> None:
    item: dict[str, Any] = {
        "type": "reasoning",
        "summary": [],
        "content": None,
        "encrypted_content": "gAAAA+/==",
    }
    session, _ = import_one(basic(tmp_path, rec("response_item", item), say("hi")))
    (completion,) = of(session.events, LlmCompleted)
    assert completion.message.content == [RedactedThinkingPart(data="gAAAA+/=="), TextPart(text="hi")]


def test_two_prompts_make_two_runs_with_token_deltas(tmp_path: Path) -> None:
    def tokens(total: int) -> dict[str, Any]:
        info = {"total_token_usage": {"total_tokens": total}, "last_token_usage": {"total_tokens": 1}}
        return rec("event_msg", {"type": "token_count", "info": info})

    lines = [
        meta(),
        prompt("one"),
        say("a"),
        tokens(100),
        done(),
        prompt("two"),
        say("b"),
        say("c"),
        tokens(250),
    ]
    session, _ = import_one(write_jsonl(tmp_path / "two.jsonl", lines))
    runs = of(session.events, RunStarted)
    assert [r.goal for r in runs] == ["one", "two"]
    assert [r.run_id for r in runs] == ["sess-1:2", "sess-1:6"]
    terminals = of(session.events, RunTerminal)
    assert [(t.reason, t.turns_used, t.total_tokens) for t in terminals] == [
        ("completed", 1, 100),
        ("incomplete", 1, 150),
    ]
    assert session.events.index(terminals[0]) < session.events.index(runs[1])


def test_turn_aborted_cancels_with_pending_calls(tmp_path: Path) -> None:
    aborted = rec("event_msg", {"type": "turn_aborted", "reason": "interrupted", "turn_id": "t-7"})
    lines = [meta(), prompt("go"), fcall("c1"), aborted]
    session, _ = import_one(write_jsonl(tmp_path / "a.jsonl", lines))
    (cancel,) = of(session.events, OperationCancelled)
    assert (cancel.operation_id, cancel.reason.value, cancel.pending_call_ids) == ("t-7", "user", ["c1"])
    assert customs(session.events, "codex.event_msg.turn_aborted")[0].payload["reason"] == "interrupted"
    assert [c.payload["call_id"] for c in customs(session.events, "codex.pending_tool_call")] == ["c1"]
    assert session.events[-1] == RunTerminal(reason="aborted", turns_used=1, total_tokens=0)


def test_compacted_becomes_compressed(tmp_path: Path) -> None:
    compacted = rec("compacted", {"message": "summary so far"})
    session, _ = import_one(basic(tmp_path, say("a"), compacted))
    (compressed,) = of(session.events, Compressed)
    position = session.events.index(compressed)
    assert compressed.archived_seq_range == (codex.SEQ_OFFSET, codex.SEQ_OFFSET + position - 1)
    assert (compressed.summary, compressed.action, compressed.turn) == ("summary so far", "compact", 1)


def test_compacted_replays_as_codex_continued_from_its_replacement_history(tmp_path: Path) -> None:
    def user(text: str) -> dict[str, Any]:
        return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}

    history = [user("<environment_context>cwd</environment_context>"), user("go"), user("Summary: did a")]
    compacted = rec("compacted", {"message": "did a", "replacement_history": history})
    session, _ = import_one(basic(tmp_path, say("a"), compacted, say("b")))
    (compressed,) = of(session.events, Compressed)
    assert compressed.summary == "go\n\nSummary: did a"
    assert customs(session.events, "codex.compacted")[0].payload["replacement_history"] == history
    numbered = list(enumerate(session.events, start=codex.SEQ_OFFSET))
    texts = [m.text_content() for m in reconstruct(numbered)]
    assert texts == ["[compressed turn 1] go\n\nSummary: did a", "b"]  # nothing from before it twice


def test_context_user_messages_are_not_prompts_without_prompt_events(tmp_path: Path) -> None:
    def user(text: str, *extra: dict[str, Any]) -> dict[str, Any]:
        content = [{"type": "input_text", "text": text}, *extra]
        return rec("response_item", {"type": "message", "role": "user", "content": content})

    image = {"type": "input_image", "image_url": "data:image/png;base64,AAAA"}
    lines = [
        meta(),
        user("# AGENTS.md instructions for /home/dev/x\n..."),
        user("<environment_context>\n  <cwd>/home/dev/x</cwd>\n</environment_context>"),
        user("real prompt", image),
        rec(
            "event_msg",
            {"type": "user_message", "message": "<environment_context>", "kind": "environment_context"},
        ),
        say("ok"),
    ]
    session, _ = import_one(write_jsonl(tmp_path / "old.jsonl", lines))
    (run,) = of(session.events, RunStarted)
    assert run.goal == "real prompt"
    assert run.attachments == [ImagePart(ref="data:image/png;base64,AAAA")]
    assert len(customs(session.events, "codex.response_item.message")) == 2
    assert len(customs(session.events, "codex.event_msg.user_message")) == 1


def test_prompt_events_win_over_response_item_duplicates(tmp_path: Path) -> None:
    user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello"}]}
    lines = [meta(), rec("response_item", user), prompt("hello"), say("hi")]
    session, _ = import_one(write_jsonl(tmp_path / "dup.jsonl", lines))
    assert [r.goal for r in of(session.events, RunStarted)] == ["hello"]
    assert len(customs(session.events, "codex.response_item.message")) == 1


def test_local_shell_and_web_search_calls(tmp_path: Path) -> None:
    shell = {
        "type": "local_shell_call",
        "call_id": "s1",
        "status": "completed",
        "action": {"type": "exec", "command": ["ls"]},
    }
    search = {"type": "web_search_call", "status": "completed", "action": {"type": "search", "query": "q"}}
    session, _ = import_one(
        basic(tmp_path, rec("response_item", search), rec("response_item", shell), fout("s1"))
    )
    (completion,) = of(session.events, LlmCompleted)
    (call,) = completion.message.tool_calls
    assert (call.id, call.name, json.loads(call.arguments)) == ("s1", "local_shell", shell["action"])
    assert completion.provider_replay is not None
    assert completion.provider_replay.native_blocks == [search, shell]
    assert customs(session.events, "codex.pending_tool_call") == []


def test_session_without_meta_falls_back_to_the_file_stem(tmp_path: Path) -> None:
    session, _ = import_one(write_jsonl(tmp_path / "rollout-x.jsonl", [prompt("hi"), say("yo")]))
    assert session.key == "codex:rollout-x"
    assert session.metadata == {}
    assert of(session.events, RunStarted)[0].run_id == "rollout-x:1"


def test_looks_like() -> None:
    assert codex.looks_like(meta())
    assert codex.looks_like(rec("anything", None))
    assert not codex.looks_like({"type": "user", "timestamp": "2026-01-01T00:00:00Z", "message": {}})
    assert not codex.looks_like({"type": "session_meta", "payload": {}})
