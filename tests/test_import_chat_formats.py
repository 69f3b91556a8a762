"""The issue-17 formats (Gemini CLI, mini-swe-agent, OpenHands V1, OpenAI Agents RunState, aider) on the real
files in tests/data/samples and on hostile variants of each: counts of calls, results and completions are
compared with a count of the source made here with plain ``json`` (not the importers' code), every imported
session verifies, and replay gives the conversation as the tool continues it."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from flightlog.cli import app
from flightlog.errors import ImportFormatError
from flightlog.events import (
    Custom,
    LlmCompleted,
    Rollbacked,
    RunStarted,
    RunTerminal,
    SessionEvent,
    Suspended,
    ToolCompleted,
    ToolDenied,
    ToolGated,
    ToolRequested,
)
from flightlog.importers import FORMATS, detect_format, import_file, iter_transcripts
from flightlog.importers.base import ImportedSession, ImportWarning
from flightlog.messages import ToolResultPart
from flightlog.recorder import verify_session
from flightlog.replay import reconstruct
from flightlog.sessions import iter_events, replay_session
from flightlog.store import SqliteStore

SAMPLES = Path(__file__).parent / "data" / "samples"
GEMINI_JSONL = SAMPLES / "gemini-cli" / "session-2026-12-02T06-04-a3f1c2d4.jsonl"
GEMINI_LEGACY = SAMPLES / "gemini-cli" / "session-2026-12-02T06-05-7c1e9a40.json"
MINI_11 = SAMPLES / "mini-swe-agent" / "pvlib__pvlib-python-1606.traj.json"
MINI_MESSAGES = SAMPLES / "mini-swe-agent" / "github_issue.traj.json"
OPENHANDS_V1 = SAMPLES / "openhands-v1" / "cd94562403b9487ebdd4018e3f531dfd"
RUNSTATE_PENDING = SAMPLES / "openai-agents" / "v1_13_pending_tool_approval.json"
RUNSTATE_REJECTED = SAMPLES / "openai-agents" / "v1_6_approval_rejection_message.json"
RUNSTATE_CUSTOM = SAMPLES / "openai-agents" / "v1_9_custom_tool_call_and_tool_origin.json"
RUNSTATE_PROGRAM = SAMPLES / "openai-agents" / "v1_13_programmatic_tool_calling.json"
AIDER = SAMPLES / "aider" / "aider_chat_history_excerpt.md"


# ─── Helpers ──────────────────────────────────────────────────────────────────────────────────


def of(events: list[SessionEvent], kind: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def customs(events: list[SessionEvent], custom_kind: str) -> list[Custom]:
    return [e for e in of(events, Custom) if e.custom_kind == custom_kind]


def counts(events: list[SessionEvent]) -> dict[str, int]:
    """Completions, calls (as requested), results and prompts an imported session holds."""
    return {
        "completions": len(of(events, LlmCompleted)),
        "calls": sum(len(e.calls) for e in of(events, ToolRequested)),
        "results": sum(len(e.results) for e in of(events, ToolCompleted)),
        "prompts": len(of(events, RunStarted)),
    }


def read_one(fmt: str, path: Path) -> tuple[ImportedSession, list[ImportWarning]]:
    warnings: list[ImportWarning] = []
    sessions = FORMATS[fmt].read(path, warnings)
    assert len(sessions) == 1
    return sessions[0], warnings


def mini_v1(tmp_path: Path, messages: list[Any] | None = None) -> Path:
    """The real 1.x message list in the envelope mini-swe-agent 1.x's ``save_traj`` writes around it."""
    messages = messages if messages is not None else json.loads(MINI_MESSAGES.read_text(encoding="utf-8"))
    path = tmp_path / "github_issue.traj.json"
    document = {
        "info": {"exit_status": "Submitted", "submission": messages[-1]["content"], "mini_version": "1.17.2"},
        "messages": messages,
        "trajectory_format": "mini-swe-agent-1",
    }
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


# Independent counts of each source: a few lines of plain json per format.


def source_mini(path: Path) -> dict[str, int]:
    messages = json.loads(path.read_text(encoding="utf-8"))["messages"]
    assistant = [m for m in messages if m["role"] == "assistant"]
    native = sum(len(m.get("tool_calls") or []) for m in assistant)
    text = sum(
        1 for m in assistant if not m.get("tool_calls") and m["content"].count("```mswea_bash_command") == 1
    )
    observations = [m for m in messages[2:] if m["role"] in ("tool", "user")]
    prompts = 1 if any(m["role"] == "user" for m in messages) else 0
    return {
        "completions": len(assistant),
        "calls": native + text,
        "results": len(observations),
        "prompts": prompts,
    }


def source_openhands_v1(folder: Path) -> dict[str, int]:
    events = [
        json.loads(p.read_text(encoding="utf-8")) for p in sorted((folder / "events").glob("event-*.json"))
    ]
    actions = [e for e in events if e["kind"] == "ActionEvent"]
    replies = [e for e in events if e["kind"] == "MessageEvent" and e["source"] == "agent"]
    results = [
        e for e in events if e["kind"] in ("ObservationEvent", "AgentErrorEvent", "UserRejectObservation")
    ]
    prompts = [e for e in events if e["kind"] == "MessageEvent" and e["source"] == "user"]
    responses = {a["llm_response_id"] for a in actions}
    return {
        "completions": len(responses) + len(replies),
        "calls": len(actions),
        "results": len(results),
        "prompts": len(prompts),
    }


def source_runstate(path: Path) -> dict[str, int]:
    state = json.loads(path.read_text(encoding="utf-8"))
    items = state["generated_items"]
    outputs = [i for i in items if i["type"] == "tool_call_output_item"]
    answered = {i["raw_item"]["call_id"] for i in outputs}
    called = [i for i in items if i["type"] == "tool_call_item"]
    executed = [
        i for i in called if i["raw_item"]["type"] in ("function_call", "custom_tool_call", "program")
    ]
    return {"calls": len(executed), "results": len(outputs), "answered": len(answered)}


def gemini_messages(path: Path) -> dict[str, dict[str, Any]]:
    """Every message a JSONL recording ever held, in its last written form (by id)."""
    found: dict[str, dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if isinstance(record.get("id"), str):
            found[record["id"]] = record
    return found


def source_gemini(messages: list[dict[str, Any]]) -> dict[str, int]:
    model = [m for m in messages if m["type"] == "gemini"]
    calls = [c for m in model for c in m.get("toolCalls") or []]
    prompts = [
        m for m in messages if m["type"] == "user" and not any("functionResponse" in p for p in m["content"])
    ]
    return {
        "completions": len(model),
        "calls": len(calls),
        "results": sum(1 for c in calls if c.get("result")),
        "prompts": len(prompts),
    }


def stored(tmp_path: Path, path: Path, **kwargs: Any) -> tuple[list[SessionEvent], str, SqliteStore]:
    store = SqliteStore(tmp_path / "db.sqlite")
    result = import_file(store, path, **kwargs)
    session_id = result.session_ids[0]
    report = verify_session(store, session_id)
    assert report.ok and report.events == result.events
    events = [event for _, event in iter_events(store, session_id)]
    return events, session_id, store


# ─── Real files: counts, detection, verification, replay ──────────────────────────────────────


def test_mini_swe_agent_1_1_real_run_counts_and_replay(tmp_path: Path) -> None:
    events, session_id, store = stored(tmp_path, MINI_11)
    assert detect_format(MINI_11) == "mini-swe-agent"
    assert counts(events) == source_mini(MINI_11)
    messages = json.loads(MINI_11.read_text(encoding="utf-8"))["messages"]
    with store:
        replayed = replay_session(store, session_id)
    assert [m.role for m in replayed] == ["user"] + ["assistant", "tool"] * 4
    calls = [c for m in messages if m["role"] == "assistant" for c in m["tool_calls"]]
    assert [c.id for m in replayed for c in m.tool_calls] == [c["id"] for c in calls]
    assert replayed[0].text_content() == messages[1]["content"]
    first = of(events, RunStarted)[0]
    assert first.system_prompt == messages[0]["content"]
    usage = sum(m["extra"]["response"]["usage"]["total_tokens"] for m in messages if m["role"] == "assistant")
    terminal = of(events, RunTerminal)[-1]
    assert terminal.total_tokens == usage and terminal.reason == "InternalServerError"
    assert customs(events, "mini_swe_agent.exit")[0].payload["extra"]["exit_status"] == "InternalServerError"


def test_mini_swe_agent_1_real_messages_pair_text_actions_with_their_output(tmp_path: Path) -> None:
    path = mini_v1(tmp_path)
    events, session_id, store = stored(tmp_path, path)
    assert detect_format(path) == "mini-swe-agent"
    assert counts(events) == source_mini(path)
    results = [r for e in of(events, ToolCompleted) for r in e.results]
    errors = [r.is_error for r in results]
    assert errors == [r.output.startswith("<returncode>1") for r in results] and any(errors)
    assert of(events, RunTerminal)[-1].reason == "completed"
    with store:
        replayed = replay_session(store, session_id)
    assert [m.role for m in replayed] == ["user"] + ["assistant", "tool"] * 10


def test_mini_swe_agent_format_error_feedback_replays_as_the_user_message_the_model_read(
    tmp_path: Path,
) -> None:
    messages = json.loads(MINI_MESSAGES.read_text(encoding="utf-8"))
    note = "Please always provide EXACTLY ONE action in triple backticks, found 0 actions."
    messages[2:2] = [{"role": "assistant", "content": "Let me think."}, {"role": "user", "content": note}]
    _, session_id, store = stored(tmp_path, mini_v1(tmp_path, messages))
    with store:
        replayed = replay_session(store, session_id)
    assert [m.role for m in replayed[:4]] == ["user", "assistant", "user", "assistant"]
    assert replayed[2].text_content() == note


def test_openhands_v1_real_conversation_counts_tokens_and_replay(tmp_path: Path) -> None:
    assert detect_format(OPENHANDS_V1) == "openhands-v1" == detect_format(OPENHANDS_V1 / "base_state.json")
    events, session_id, store = stored(tmp_path, OPENHANDS_V1, seal=True)  # complete: record its end
    assert counts(events) == source_openhands_v1(OPENHANDS_V1)
    state = json.loads((OPENHANDS_V1 / "base_state.json").read_text(encoding="utf-8"))
    usages = state["stats"]["usage_to_metrics"]["agent"]["token_usages"]
    assert sum(t.total_tokens for t in of(events, RunTerminal)) == sum(
        u["prompt_tokens"] + u["completion_tokens"] for u in usages
    )
    kept = customs(events, "openhands_v1.token_usage")
    assert [k.payload["cache_read_tokens"] for k in kept] == [u["cache_read_tokens"] for u in usages]
    with store:
        replayed = replay_session(store, session_id)
    assert [m.role for m in replayed] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "user",
        "assistant",
    ]
    assert of(events, RunStarted)[0].system_prompt is not None
    assert [t.reason for t in of(events, RunTerminal)] == ["completed", "completed"]


def test_runstate_pending_approval_is_a_gated_call_and_a_suspended_run(tmp_path: Path) -> None:
    events, session_id, store = stored(tmp_path, RUNSTATE_PENDING)
    assert detect_format(RUNSTATE_PENDING) == "openai-agents"
    source = source_runstate(RUNSTATE_PENDING)
    assert counts(events)["calls"] == source["calls"] and counts(events)["results"] == source["results"]
    state = json.loads(RUNSTATE_PENDING.read_text(encoding="utf-8"))
    interrupted = [i["raw_item"]["call_id"] for i in state["current_step"]["data"]["interruptions"]]
    assert [g.call_id for g in of(events, ToolGated)] == interrupted
    assert of(events, Suspended)[-1].pending_calls == interrupted and not of(events, RunTerminal)
    with store:
        runs = [s for s in store.list_sessions() if s.session_id == session_id]
        replayed = replay_session(store, session_id)
    assert runs and [m.role for m in replayed] == ["user", "assistant"]
    assert replayed[0].text_content() == state["original_input"]


def test_runstate_rejection_and_custom_and_program_calls(tmp_path: Path) -> None:
    rejected, _ = read_one("openai-agents", RUNSTATE_REJECTED)
    decisions = customs(rejected.events, "openai_agents.approval_decision")
    assert [(d.payload["call_id"], d.payload["approved"], d.payload["message"]) for d in decisions] == [
        ("approval-1", False, "Denied by release reviewer")
    ]
    for path in (RUNSTATE_CUSTOM, RUNSTATE_PROGRAM):
        session, _ = read_one("openai-agents", path)
        source = source_runstate(path)
        assert counts(session.events)["calls"] == source["calls"]
        assert counts(session.events)["results"] == source["results"]
        pending = customs(session.events, "openai_agents.pending_tool_call")
        assert len(pending) == source["calls"] - source["answered"]


def test_runstate_rejected_call_of_the_session_is_denied(tmp_path: Path) -> None:
    state = json.loads(RUNSTATE_PENDING.read_text(encoding="utf-8"))
    state["current_step"] = None
    state["context"]["approvals"] = {
        "historical_approval": {
            "approved": [],
            "rejected": ["historical-approval-1"],
            "rejection_messages": {"historical-approval-1": "not this account"},
        }
    }
    path = tmp_path / "rejected.json"
    path.write_text(json.dumps(state), encoding="utf-8")
    session, _ = read_one("openai-agents", path)
    denied = of(session.events, ToolDenied)
    assert [(d.call_id, d.reason) for d in denied] == [("historical-approval-1", "not this account")]
    assert of(session.events, RunTerminal)[-1].reason == "incomplete"


def test_gemini_jsonl_written_by_gemini_cli_counts_rewind_and_replay(tmp_path: Path) -> None:
    assert detect_format(GEMINI_JSONL) == "gemini-cli"
    events, session_id, store = stored(tmp_path, GEMINI_JSONL, seal=True)  # complete: record its end
    assert counts(events) == source_gemini(list(gemini_messages(GEMINI_JSONL).values()))
    assert len(of(events, Rollbacked)) == 1 and of(events, RunTerminal)[1].reason == "rewound"
    with store:
        replayed = replay_session(store, session_id)
        rows = list(store.read_events(session_id))
    texts = [m.text_content() for m in replayed]
    assert "Delete the file." not in texts and "Deleting src/main.ts." not in texts  # rewound away
    assert [m.role for m in replayed] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert texts[5] == "Rename it to main.js instead."
    tokens = [m["tokens"]["total"] for m in gemini_messages(GEMINI_JSONL).values() if m["type"] == "gemini"]
    assert sum(t.total_tokens for t in of(events, RunTerminal)) == sum(tokens)
    stamps = [row.recorded_at_ms for row in rows if row.kind != "session_sealed"]
    assert stamps == sorted(stamps) and stamps[-1] > stamps[0]  # the recording's own times


def test_gemini_legacy_json_counts_and_cancelled_call(tmp_path: Path) -> None:
    assert detect_format(GEMINI_LEGACY) == "gemini-cli"
    events, _, store = stored(tmp_path, GEMINI_LEGACY, seal=True)
    store.close()
    document = json.loads(GEMINI_LEGACY.read_text(encoding="utf-8"))
    assert counts(events) == source_gemini(document["messages"])
    results = [r for e in of(events, ToolCompleted) for r in e.results]
    statuses = [c["status"] for m in document["messages"] for c in m.get("toolCalls") or []]
    assert [r.is_error for r in results] == [s != "success" for s in statuses]
    cached = [m["tokens"]["cached"] for m in document["messages"] if m.get("tokens")]
    kept = [
        c.payload["tokens"]["cached"]
        for c in customs(events, "gemini_cli.message")
        if c.payload.get("tokens")
    ]
    assert kept == cached and sum(cached) > 0


def test_aider_real_history_counts_and_replay(tmp_path: Path) -> None:
    assert detect_format(AIDER) == "aider"
    events, session_id, store = stored(tmp_path, AIDER, seal=True)
    lines = AIDER.read_text(encoding="utf-8").splitlines()
    inputs = [line[5:].rstrip() for line in lines if line.startswith("#### ")]
    prompts = [text for text in inputs if not text.startswith("/")]
    tokens = [line for line in lines if line.startswith("> Tokens: ")]
    assert counts(events) == {"completions": len(tokens), "calls": 0, "results": 0, "prompts": len(prompts)}
    sent = [
        int(n.replace(",", "")) for line in tokens for n in re.findall(r"([\d,]+) (?:sent|received)", line)
    ]
    assert sum(t.total_tokens for t in of(events, RunTerminal)) == sum(sent)
    assert [t.reason for t in of(events, RunTerminal)] == ["completed", "completed", "aborted"]
    assert len(customs(events, "aider.command")) == len(inputs) - len(prompts)
    with store:
        replayed = replay_session(store, session_id)
    assert [m.role for m in replayed] == ["user", "assistant", "user"]  # the last launch's context


def test_folder_import_finds_each_new_format_and_cli_lists_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "transcripts"
    shutil.copytree(SAMPLES / "gemini-cli", folder / "gemini")
    shutil.copytree(OPENHANDS_V1, folder / "oh" / OPENHANDS_V1.name)
    shutil.copy(MINI_11, folder / MINI_11.name)
    shutil.copy(AIDER, folder / ".aider.chat.history.md")
    (folder / "config.json").write_text('{"theme": "dark"}', encoding="utf-8")
    found = {p.name for p in iter_transcripts([folder])}
    assert found == {
        GEMINI_JSONL.name,
        GEMINI_LEGACY.name,
        "base_state.json",
        MINI_11.name,
        ".aider.chat.history.md",
    }
    monkeypatch.setenv("FLIGHTLOG_KEY_DIR", str(tmp_path / "keys"))
    monkeypatch.setenv("FLIGHTLOG_HEAD_DIR", str(tmp_path / "heads"))
    result = CliRunner().invoke(app, ["--db", str(tmp_path / "cli.db"), "import", str(folder)])
    assert result.exit_code == 0, result.stderr
    for fmt in ("gemini-cli", "openhands-v1", "mini-swe-agent", "aider"):
        assert f"[{fmt}]" in result.stdout


def test_no_format_fits_lists_the_supported_formats(tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_text("# shopping\n- milk\n", encoding="utf-8")
    with pytest.raises(ImportFormatError) as caught:
        detect_format(path)
    assert "--format" not in str(caught.value)
    assert all(name in caught.value.reason for name in FORMATS)


def test_a_wrong_explicit_format_refuses_each_new_format(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "db.sqlite") as store:
        for path, wrong in (
            (GEMINI_JSONL, "aider"),
            (MINI_11, "openai-agents"),
            (AIDER, "gemini-cli"),
            (RUNSTATE_PENDING, "mini-swe-agent"),
            (OPENHANDS_V1, "codex"),
        ):
            with pytest.raises(ImportFormatError, match=f"not a {wrong} transcript"):
                import_file(store, path, format=wrong)
        assert list(store.list_sessions()) == []
        assert import_file(store, GEMINI_JSONL, format="gemini-cli").format == "gemini-cli"


# ─── Hostile variants ─────────────────────────────────────────────────────────────────────────


def test_gemini_torn_last_line_bom_and_trailing_bytes_keep_every_record(tmp_path: Path) -> None:
    data = GEMINI_JSONL.read_bytes()
    lines = data.splitlines(keepends=True)
    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(b"\xef\xbb\xbf" + b"".join(lines[:-1]) + lines[-1][:25] + b"\x00garbage")
    session, warnings = read_one("gemini-cli", torn)
    whole, _ = read_one("gemini-cli", GEMINI_JSONL)
    assert counts(session.events) == counts(whole.events)
    kept = customs(session.events, "gemini_cli.unparsed_line")
    assert [k.payload["line"] for k in kept] == [len(lines), len(lines)]
    assert kept[0].payload["text"] == lines[-1][:25].decode()
    assert kept[1].payload["text"] == "garbage"
    assert {w.line for w in warnings} == {len(lines)}


def test_gemini_invalid_utf8_and_a_tool_id_reused_by_a_later_turn(tmp_path: Path) -> None:
    text = GEMINI_JSONL.read_text(encoding="utf-8")
    text = text.replace("run_shell_command-3", "read_file-1")  # a later call reusing an earlier id
    raw = text.encode("utf-8").replace(b"Renamed src/main.ts", b"Renamed \xff src/main.ts")
    path = tmp_path / "hostile.jsonl"
    path.write_bytes(raw)
    session, warnings = read_one("gemini-cli", path)
    ids = [c.id for e in of(session.events, ToolRequested) for c in e.calls]
    assert ids == ["read_file-1", "run_shell_command-2", "read_file-1#2"]
    assert [r.call_id for e in of(session.events, ToolCompleted) for r in e.results] == ids
    final = of(session.events, LlmCompleted)[-1].message.text_content()
    assert final == "Renamed \\udcff src/main.ts to src/main.js."
    bad = [i for i, line in enumerate(raw.splitlines(), start=1) if b"\xff" in line]
    assert any(w.line in bad and "invalid UTF-8" in w.reason for w in warnings)
    assert any("reused" in w.reason and w.line is not None for w in warnings)


def test_gemini_history_replaced_by_set_messages_replays_the_new_history(tmp_path: Path) -> None:
    records = [json.loads(line) for line in GEMINI_JSONL.read_text(encoding="utf-8").splitlines()]
    final = [m for m in gemini_messages(GEMINI_JSONL).values() if m["id"] in {r.get("id") for r in records}]
    kept = [m for m in final if m["type"] != "info"][:1]
    summary = {
        "id": "summary-1",
        "timestamp": "2026-12-02T06:10:00.000Z",
        "type": "user",
        "content": [{"text": "<state_snapshot>renamed main.ts</state_snapshot>"}],
    }
    path = tmp_path / "compressed.jsonl"
    lines = [json.dumps(r) for r in records] + [json.dumps({"$set": {"messages": [*kept, summary]}})]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    events = [e for e in read_one("gemini-cli", path)[0].events]
    replayed = reconstruct(list(enumerate(events)))
    assert [m.text_content() for m in replayed] == [
        kept[0]["content"][0]["text"],
        summary["content"][0]["text"],
    ]


def test_document_formats_accept_a_bom_and_invalid_utf8_and_refuse_trailing_bytes_naming_the_line(
    tmp_path: Path,
) -> None:
    for fmt, source in (
        ("mini-swe-agent", MINI_11),
        ("openai-agents", RUNSTATE_CUSTOM),
        ("gemini-cli", GEMINI_LEGACY),
    ):
        data = source.read_bytes()
        whole, _ = read_one(fmt, source)
        bom = tmp_path / f"bom{source.suffix}"
        bom.write_bytes(b"\xef\xbb\xbf" + data)
        assert counts(read_one(fmt, bom)[0].events) == counts(whole.events)
        text = data.replace(b'"content": "', b'"content": "\xfe', 1).replace(
            b'"output": "', b'"output": "\xfe', 1
        )
        bad = tmp_path / f"bad{source.suffix}"
        bad.write_bytes(text)
        session, warnings = read_one(fmt, bad)
        assert counts(session.events) == counts(whole.events)
        assert any("invalid UTF-8" in w.reason for w in warnings)
        trailing = tmp_path / f"trailing{source.suffix}"
        trailing.write_bytes(data.rstrip() + b"\n}garbage\n")
        with SqliteStore(tmp_path / f"{fmt}.sqlite") as store:
            with pytest.raises(ImportFormatError) as caught:
                import_file(store, trailing)
            assert caught.value.line == data.rstrip().count(b"\n") + 2
            assert list(store.list_sessions()) == []
        torn = tmp_path / f"torn{source.suffix}"
        torn.write_bytes(data[: len(data) // 2])
        with pytest.raises(ImportFormatError) as caught:
            read_one(fmt, torn)
        assert caught.value.line is not None


def test_mini_swe_agent_and_runstate_reused_call_ids_keep_both_calls(tmp_path: Path) -> None:
    document = json.loads(MINI_11.read_text(encoding="utf-8"))
    first = document["messages"][2]["tool_calls"][0]["id"]
    later = document["messages"][4]["tool_calls"][0]["id"]
    text = MINI_11.read_text(encoding="utf-8").replace(later, first)
    path = tmp_path / "reused.traj.json"
    path.write_text(text, encoding="utf-8")
    session, warnings = read_one("mini-swe-agent", path)
    ids = [c.id for e in of(session.events, ToolRequested) for c in e.calls]
    assert ids[:2] == [first, f"{first}#2"]
    assert [r.call_id for e in of(session.events, ToolCompleted) for r in e.results] == ids
    assert any("reused" in w.reason for w in warnings)
    state = json.loads(RUNSTATE_CUSTOM.read_text(encoding="utf-8"))
    state["generated_items"] = state["generated_items"] * 2  # the same call id in a second response
    path = tmp_path / "reused.json"
    path.write_text(json.dumps(state), encoding="utf-8")
    session, _ = read_one("openai-agents", path)
    assert [r.call_id for e in of(session.events, ToolCompleted) for r in e.results] == [
        "custom-call-1",
        "custom-call-1#2",
    ]


def test_openhands_v1_broken_event_file_is_kept_byte_exact_and_the_rest_imported(tmp_path: Path) -> None:
    folder = tmp_path / OPENHANDS_V1.name
    shutil.copytree(OPENHANDS_V1, folder)
    files = sorted((folder / "events").glob("event-*.json"))
    observation = next(p for p in files if '"ObservationEvent"' in p.read_text(encoding="utf-8"))
    observation.write_bytes(observation.read_bytes() + b"\n}trailing")
    torn = files[-1]
    torn_bytes = torn.read_bytes()[:40] + b"\xff"
    torn.write_bytes(torn_bytes)
    (folder / "base_state.json").write_bytes(b"\xef\xbb\xbf" + (folder / "base_state.json").read_bytes())
    session, warnings = read_one("openhands-v1", folder)
    kept = customs(session.events, "openhands_v1.unparsed_event")
    assert [k.payload["file"] for k in kept] == [observation.name, torn.name]
    assert kept[1].payload["base64"]  # invalid UTF-8: kept as bytes
    assert {w.path for w in warnings} == {observation.name, torn.name}
    whole = source_openhands_v1(OPENHANDS_V1)
    got = counts(session.events)
    assert got["calls"] == whole["calls"] and got["results"] == whole["results"] - 1
    assert got["completions"] == whole["completions"] - 1  # the torn last reply


def test_openhands_v1_reused_tool_call_id_across_responses(tmp_path: Path) -> None:
    folder = tmp_path / OPENHANDS_V1.name
    shutil.copytree(OPENHANDS_V1, folder)
    for path in (folder / "events").glob("event-*.json"):
        path.write_text(
            path.read_text(encoding="utf-8").replace(
                "call_HhojVstik9LFNxVlLTgV0iIA", "call_KaQ0kUcBb5tbMzhxbIx9dvoZ"
            ),
            encoding="utf-8",
        )
    session, _ = read_one("openhands-v1", folder)
    ids = [c.id for e in of(session.events, ToolRequested) for c in e.calls]
    assert ids == ["call_KaQ0kUcBb5tbMzhxbIx9dvoZ", "call_KaQ0kUcBb5tbMzhxbIx9dvoZ#2"]
    assert [r.call_id for e in of(session.events, ToolCompleted) for r in e.results] == ids


def test_aider_bom_invalid_utf8_torn_and_trailing_bytes(tmp_path: Path) -> None:
    data = AIDER.read_bytes()
    whole, _ = read_one("aider", AIDER)
    path = tmp_path / ".aider.chat.history.md"
    path.write_bytes(b"\xef\xbb\xbf" + data.replace(b"Certainly!", b"Certainly\xff!") + b"\x00\x01junk")
    session, warnings = read_one("aider", path)
    assert counts(session.events) == counts(whole.events)
    line = data[: data.index(b"Certainly!")].count(b"\n") + 1
    last = data.count(b"\n") + 1
    assert [w.line for w in warnings] == [line, last]
    assert customs(session.events, "aider.unparsed_line")[0].payload == {"line": last, "text": "\x00\x01junk"}
    assert of(session.events, LlmCompleted)[0].message.text_content().startswith("Certainly\\udcff!")
    cut = data.index(b"This change replaces")
    torn = tmp_path / "torn.md"
    torn.write_bytes(data[:cut] + b"This chan")
    session, _ = read_one("aider", torn)
    assert counts(session.events)["completions"] == 1
    assert of(session.events, LlmCompleted)[0].message.text_content().endswith("This chan")


def test_replay_pairs_every_result_with_a_call_in_each_real_file(tmp_path: Path) -> None:
    """A provider could continue each replayed conversation: every tool message answers an earlier call."""
    for fmt, path in (
        ("gemini-cli", GEMINI_JSONL),
        ("gemini-cli", GEMINI_LEGACY),
        ("mini-swe-agent", MINI_11),
        ("openhands-v1", OPENHANDS_V1),
        ("openai-agents", RUNSTATE_CUSTOM),
    ):
        session, _ = read_one(fmt, path)
        seen: set[str] = set()
        for message in reconstruct(list(enumerate(session.events))):
            seen.update(c.id for c in message.tool_calls)
            for part in message.content:
                if isinstance(part, ToolResultPart):
                    assert part.call_id in seen, (fmt, part.call_id)


# ─── The Gemini fold against gemini-cli's own reading rules (property) ───────────────────────


def loader_view(records: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """gemini-cli's ``loadConversationRecord`` (chatRecordingService.ts), restated: messages by id in first
    insertion order, a rewrite replaces in place, ``$rewindTo`` deletes from that id on (all when unknown)."""
    messages: dict[str, dict[str, Any]] = {}
    for record in records:
        if "$rewindTo" in record:
            ids = list(messages)
            cut = ids.index(record["$rewindTo"]) if record["$rewindTo"] in messages else 0
            for message_id in ids[cut:]:
                del messages[message_id]
        elif "id" in record:
            messages[record["id"]] = record
    return [("user" if m["type"] == "user" else "assistant", m["content"]) for m in messages.values()]


@st.composite
def recordings(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A session as gemini-cli writes it: prompts and replies, the last message rewritten, rewinds."""
    records: list[dict[str, Any]] = [
        {"sessionId": "s", "projectHash": "h", "startTime": "2026-01-01T00:00:00Z"}
    ]
    live: list[str] = []
    prompt_due = True  # gemini-cli asks the model only after a user turn: a rewind is followed by a prompt
    for n in range(draw(st.integers(1, 12))):
        action = "user" if prompt_due else draw(st.sampled_from(["user", "gemini", "rewrite", "rewind"]))
        prompt_due = action == "rewind"
        if action == "rewrite":
            last = next(r for r in reversed(records) if r.get("id") == live[-1])
            records.append({**last, "content": last["content"] + "+"})
        elif action == "rewind":
            target = draw(st.sampled_from(live))
            records.append({"$rewindTo": target})
            del live[live.index(target) :]
        elif action in ("user", "gemini"):
            message_id = f"m{n}"
            stamp = f"2026-01-01T00:00:{n:02d}Z"
            records.append({"id": message_id, "timestamp": stamp, "type": action, "content": f"{action} {n}"})
            live.append(message_id)
        records.append({"$set": {"lastUpdated": f"2026-01-01T00:01:{n:02d}Z"}})
    return records


@settings(max_examples=60, deadline=None)
@given(recordings())
def test_gemini_replay_is_what_gemini_cli_reads_back(records: list[dict[str, Any]]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "session.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        session, _ = read_one("gemini-cli", path)
    replayed = reconstruct(list(enumerate(session.events)))
    expected = loader_view(records)
    assert [(m.role, m.text_content()) for m in replayed] == expected


def test_a_gemini_subagent_file_names_its_parent_session(tmp_path: Path) -> None:
    lines = GEMINI_JSONL.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    header["kind"] = "subagent"
    folder = tmp_path / "chats" / "parent-session-id"
    folder.mkdir(parents=True)
    path = folder / f"{header['sessionId']}.jsonl"
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n", encoding="utf-8")
    session, _ = read_one("gemini-cli", path)
    assert session.metadata["kind"] == "subagent"
    assert session.metadata["parent_session"] == "gemini-cli:parent-session-id"
    assert session.parent_key is None  # never a recorded link to a session that may not exist
