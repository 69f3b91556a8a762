"""The SWE-agent 1.x trajectory importer: the real sample (tests/data/samples/swe-agent) and hostile files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flightlog.encoding import canonical_bytes, decode_stored
from flightlog.errors import ImportFormatError
from flightlog.events import (
    Custom,
    LlmCompleted,
    RunStarted,
    RunTerminal,
    SessionEvent,
    ToolCompleted,
    ToolRequested,
)
from flightlog.importers import FORMATS, detect_format, import_file, iter_transcripts, swe_agent
from flightlog.importers.base import ImportedSession, ImportWarning
from flightlog.recorder import verify_session
from flightlog.store import SqliteStore

SAMPLES = Path(__file__).parent / "data" / "samples" / "swe-agent"
SAMPLE = SAMPLES / "v1_function_calling_marshmallow-1867.traj"
SOURCE: dict[str, Any] = json.loads(SAMPLE.read_text(encoding="utf-8"))


# ─── Helpers ──────────────────────────────────────────────────────────────────────────────────


def import_one(path: Path) -> tuple[ImportedSession, list[ImportWarning]]:
    warnings: list[ImportWarning] = []
    sessions = swe_agent.read(path, warnings)
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


def write(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def assistant(text: str, *calls: str, action: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": text,
        "thought": text,
        "agent": "main",
        "message_type": "action",
        "action": action or text,
    }
    if calls:
        message["tool_calls"] = [
            {"id": c, "type": "function", "function": {"name": "bash", "arguments": '{"command":"ls"}'}}
            for c in calls
        ]
    return message


def tool(output: str, *ids: str) -> dict[str, Any]:
    return {
        "role": "tool",
        "content": output,
        "agent": "main",
        "message_type": "observation",
        "tool_call_ids": list(ids),
    }


def step(action: str, observation: str = "ok") -> dict[str, Any]:
    return {
        "action": action,
        "observation": observation,
        "response": action,
        "thought": action,
        "execution_time": 0.1,
        "state": {},
        "query": [{"role": "system", "content": "s"}],
    }


def traj(history: list[Any], steps: list[Any] | None = None, **top: Any) -> dict[str, Any]:
    system = {
        "role": "system",
        "content": "You are SWE-agent.",
        "agent": "main",
        "message_type": "system_prompt",
    }
    task = {"role": "user", "content": "Fix the bug.", "agent": "main", "message_type": "observation"}
    info = {"exit_status": "submitted", "model_stats": {"tokens_sent": 100, "tokens_received": 20}}
    document = {
        "environment": "main",
        "trajectory": steps or [],
        "history": [system, task, *history],
        "info": info,
        "replay_config": {"problem_statement": {"id": "inst-1", "text": "The bug."}},
    }
    document.update(top)
    return document


# ─── The real sample ──────────────────────────────────────────────────────────────────────────


def test_sample_session_and_metadata() -> None:
    session, warnings = import_one(SAMPLE)
    assert session.key == "swe-agent:marshmallow-code__marshmallow-1867"
    assert session.source_format == "swe-agent"
    assert session.metadata == {
        "instance_id": "marshmallow-code__marshmallow-1867",
        "model": "gpt-4o",
        "environment": "main",
        "exit_status": "submitted",
    }
    assert session.task == SOURCE["replay_config"]["problem_statement"]["text"][:200]
    assert session.started_at_ms is None and session.ended_at_ms is None  # no timestamps in the file
    # The demonstration reuses native call ids for different calls: each reuse is warned.
    assert len(warnings) == 5 and all("reused" in w.reason for w in warnings)


def test_sample_every_call_and_result_appears_exactly_once() -> None:
    session, _ = import_one(SAMPLE)
    native_calls = [c["id"] for m in SOURCE["history"] for c in m.get("tool_calls", [])]
    native_results = [i for m in SOURCE["history"] for i in m.get("tool_call_ids", [])]
    assert len(native_calls) == len(native_results) == 11
    ids = call_ids(session.events)
    assert len(ids) == len(set(ids)) == 11
    assert [i.split("#")[0] for i in ids] == native_calls
    assert [c.id for e in of(session.events, ToolRequested) for c in e.calls] == ids
    assert result_ids(session.events) == ids  # each result paired with its own call, in order
    assert customs(session.events, "swe_agent.pending_tool_call") == []
    assert customs(session.events, "swe_agent.orphan_tool_result") == []
    # Results land at the turn of their call.
    assert [e.turn for e in of(session.events, ToolCompleted)] == list(range(1, 12))


def test_sample_one_run_with_the_task_and_the_outcome() -> None:
    session, _ = import_one(SAMPLE)
    (run,) = of(session.events, RunStarted)
    assert run.goal == SOURCE["history"][1]["content"]
    assert run.system_prompt == SOURCE["history"][0]["content"]
    (terminal,) = of(session.events, RunTerminal)
    assert session.events[-1] is terminal
    assert (terminal.reason, terminal.turns_used, terminal.total_tokens) == ("completed", 11, 0)
    (info,) = customs(session.events, "swe_agent.info")
    assert info.payload == SOURCE["info"]
    (setup,) = customs(session.events, "swe_agent.run")
    assert setup.payload == {"environment": "main", "replay_config": SOURCE["replay_config"]}


def test_sample_provider_payload_and_steps_are_kept() -> None:
    session, _ = import_one(SAMPLE)
    completions = of(session.events, LlmCompleted)
    assistants = [m for m in SOURCE["history"] if m["role"] == "assistant"]
    assert len(assistants) == 11
    for completion, message in zip(completions, assistants, strict=True):
        replay = completion.provider_replay
        assert replay is not None and (replay.protocol, replay.model) == ("openai.chat", "gpt-4o")
        assert replay.tool_calls == message["tool_calls"]
        assert completion.message.text_content() == message["content"]
    steps = customs(session.events, "swe_agent.step")
    assert [s.payload["index"] for s in steps] == list(range(11))
    assert [s.payload["action"] for s in steps] == [s["action"] for s in SOURCE["trajectory"]]
    # Each step follows the results of the turn that executed it.
    for custom in steps:
        before = session.events[session.events.index(custom) - 1]
        assert isinstance(before, ToolCompleted)


def test_sample_events_round_trip_canonical_bytes() -> None:
    session, _ = import_one(SAMPLE)
    assert session.events
    for event in session.events:
        assert decode_stored(canonical_bytes(event)) == event


def test_sample_replay_shows_task_then_assistant_turns_in_order() -> None:
    from flightlog.replay import reconstruct

    session, _ = import_one(SAMPLE)
    messages = reconstruct(list(enumerate(session.events, start=1)))
    assert messages[0].role == "user" and messages[0].text_content() == SOURCE["history"][1]["content"]
    expected = [(m["role"], m["content"]) for m in SOURCE["history"][2:]]
    got = [(m.role, m.text_content() if m.role == "assistant" else m.content[0].output) for m in messages[1:]]  # type: ignore[union-attr]
    assert got == expected


def test_import_twice_is_one_session_and_verifies(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "db.sqlite") as store:
        first = import_file(store, SAMPLE)
        again = import_file(store, SAMPLE)
        assert first.format == "swe-agent" and again.duplicate
        assert [s.session_id for s in store.list_sessions()] == [first.session_ids[0]]
        assert len(first.warnings) == 5
        assert verify_session(store, first.session_ids[0]).ok


# ─── Mapping rules ────────────────────────────────────────────────────────────────────────────


def test_orphan_and_pending_calls_are_recorded(tmp_path: Path) -> None:
    history = [assistant("one", "a"), tool("ghost out", "ghost"), assistant("two", "b")]
    session, _ = import_one(write(tmp_path / "o.traj", traj(history, info={"exit_status": "exit_cost"})))
    assert result_ids(session.events) == ["ghost"]
    (orphan,) = customs(session.events, "swe_agent.orphan_tool_result")
    assert orphan.payload == {"call_id": "ghost", "native_call_id": "ghost", "history_index": 3}
    pending = customs(session.events, "swe_agent.pending_tool_call")
    assert [p.payload["call_id"] for p in pending] == ["a", "b"]
    assert session.events[-1] == RunTerminal(reason="exit_cost", turns_used=2, total_tokens=0)


def test_tokens_and_unmatched_steps(tmp_path: Path) -> None:
    history = [assistant("ls", "a"), tool("out", "a")]
    document = traj(history, [step("ls"), step("extra")])
    session, warnings = import_one(write(tmp_path / "s.traj", document))
    steps = customs(session.events, "swe_agent.step")
    assert [s.payload["index"] for s in steps] == [0, 1]
    assert steps[0].payload["query_messages"] == 1 and "query" not in steps[0].payload
    assert ["matched no history message" in w.reason for w in warnings] == [True]
    assert session.events[-1] == RunTerminal(reason="completed", turns_used=1, total_tokens=120)


def test_demos_later_user_messages_and_unknown_keys_are_custom(tmp_path: Path) -> None:
    demo = {"role": "user", "content": "demo", "is_demo": True}
    history: list[Any] = [
        assistant("think", action="ls"),
        {"role": "user", "content": "observation text", "message_type": "observation"},
        demo,
        {"role": "critic", "content": "x"},
        "not an object",
    ]
    session, _ = import_one(write(tmp_path / "c.traj", traj(history, brand_new={"x": 1})))
    kinds = [e.custom_kind for e in of(session.events, Custom)]
    assert kinds == [
        "swe_agent.run",
        "swe_agent.history.demo",
        "swe_agent.history.critic",
        "swe_agent.history.record",
        "swe_agent.info",
    ]
    assert customs(session.events, "swe_agent.run")[0].payload["brand_new"] == {"x": 1}
    assert of(session.events, LlmCompleted)[0].provider_replay is None
    # The observation of the action "ls" (no function calling) is that action's result.
    [completed] = of(session.events, ToolCompleted)
    assert [r.output for r in completed.results] == ["observation text"]


def test_replay_config_as_json_text_and_no_history(tmp_path: Path) -> None:
    document = {
        "trajectory": [step("ls"), step("cat x")],
        "info": {},
        "replay_config": json.dumps({"problem_statement": {"id": "p-9", "text": "Do X"}}),
    }
    session, _ = import_one(write(tmp_path / "n.traj", document))
    assert session.key == "swe-agent:p-9"
    (run,) = of(session.events, RunStarted)
    assert run.goal == "Do X"
    assert [e.message.text_content() for e in of(session.events, LlmCompleted)] == ["ls", "cat x"]
    assert session.events[-1] == RunTerminal(reason="incomplete", turns_used=2, total_tokens=0)


def test_key_falls_back_to_the_file_stem(tmp_path: Path) -> None:
    session, _ = import_one(write(tmp_path / "inst-7.traj", {"trajectory": [step("ls")], "history": []}))
    assert session.key == "swe-agent:inst-7"


# ─── Hostile files ────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b'{"trajectory": [', "not valid JSON"),
        (b"[]", "expected a JSON object, got an array"),
        (b"42", "got a int"),
        (b'{"history": []}', 'no "trajectory" list'),
        (b'{"trajectory": {}}', 'no "trajectory" list'),
        (b'{"trajectory": [], "history": "x"}', '"history" is not a list'),
        (b'{"trajectory": ' + b"[" * 300 + b"]" * 300 + b"}", "nested"),
    ],
)
def test_broken_files_raise_a_clear_error_naming_the_file(
    tmp_path: Path, content: bytes, reason: str
) -> None:
    path = tmp_path / "bad.traj"
    path.write_bytes(content)
    with pytest.raises(ImportFormatError) as info:
        swe_agent.read(path, [])
    assert info.value.path == str(path) and reason in info.value.reason


def test_torn_file_imports_nothing(tmp_path: Path) -> None:
    path = tmp_path / "torn.traj"
    path.write_bytes(SAMPLE.read_bytes()[:-200])
    with SqliteStore(tmp_path / "db.sqlite") as store:
        for fmt in ("auto", "swe-agent"):
            with pytest.raises(ImportFormatError) as info:
                import_file(store, path, format=fmt)
            assert "torn.traj" in str(info.value)
        assert list(store.list_sessions()) == []


def test_empty_trajectory_yields_no_session(tmp_path: Path) -> None:
    warnings: list[ImportWarning] = []
    assert swe_agent.read(write(tmp_path / "e.traj", {"trajectory": [], "history": []}), warnings) == []
    assert len(warnings) == 1


def test_surrogates_bom_huge_strings_and_wrong_types(tmp_path: Path) -> None:
    big = "y" * 30_000_000
    history: list[Any] = [
        assistant("a", "c1"),
        tool(big + " \ud800", "c1"),
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "parts"}, {"type": "image_url"}],
            "tool_calls": [{"function": {"name": "x"}}, "junk"],
        },
        {"role": "tool", "content": None, "tool_call_ids": [1, None]},
    ]
    body = json.dumps(traj(history, info="not a dict")).encode()
    path = tmp_path / "h.traj"
    path.write_bytes(b"\xef\xbb\xbf" + body)
    session, warnings = import_one(path)
    (completed,) = of(session.events, ToolCompleted)
    assert completed.results[0].output == big + " \\ud800"
    assert any("surrogate" in w.reason for w in warnings)
    assert any("without an id" in w.reason for w in warnings)
    assert session.events[-1] == RunTerminal(reason="incomplete", turns_used=2, total_tokens=0)
    for event in session.events:
        canonical_bytes(event)


# ─── Detection and CLI ────────────────────────────────────────────────────────────────────────


def test_looks_like_and_detection(tmp_path: Path) -> None:
    assert "swe-agent" in FORMATS
    assert swe_agent.looks_like(SOURCE)
    assert not swe_agent.looks_like({"trajectory": []})
    assert not swe_agent.looks_like([SOURCE])
    assert detect_format(SAMPLE) == "swe-agent"
    as_json = tmp_path / "x.json"
    as_json.write_bytes(SAMPLE.read_bytes())
    assert detect_format(as_json) == "swe-agent"
    one_line = tmp_path / "x.jsonl"
    one_line.write_text(json.dumps(SOURCE), encoding="utf-8")
    assert detect_format(one_line) == "swe-agent"
    broken = write(tmp_path / "b.traj", {"nope": 1})
    with pytest.raises(ImportFormatError, match=r"supported format .*swe-agent"):
        detect_format(broken)


def test_folder_import_picks_traj_files(tmp_path: Path) -> None:
    target = tmp_path / "a" / "run.traj"
    target.parent.mkdir()
    target.write_bytes(SAMPLE.read_bytes())
    write(tmp_path / "config.json", {"trajectory": []})
    assert list(iter_transcripts([tmp_path])) == [target]


def test_cli_import_with_format_and_auto(tmp_path: Path) -> None:
    from flightlog.cli import app

    runner = CliRunner()
    db = tmp_path / "l.db"
    result = runner.invoke(app, ["--db", str(db), "import", "-f", "swe-agent", str(SAMPLE)])
    assert result.exit_code == 0, result.stderr
    assert "[swe-agent]" in result.stdout and "reused" in result.stderr
    result = runner.invoke(app, ["--db", str(db), "import", str(SAMPLES)])
    assert result.exit_code == 0 and "already imported" in result.stdout
    result = runner.invoke(app, ["--db", str(db), "verify", "--all"])
    assert result.exit_code == 0, result.stdout
    result = runner.invoke(app, ["--db", str(db), "show", "swe-agent:marshmallow"])
    assert result.exit_code == 0 and "run_terminal" in result.stdout
    result = runner.invoke(app, ["--db", str(db), "replay", "swe-agent:marshmallow", "--json"])
    assert result.exit_code == 0
    roles = [m["role"] for m in json.loads(result.stdout)["messages"]]
    assert roles[0] == "user" and roles[1:] == ["assistant", "tool"] * 11
    bad = tmp_path / "bad.traj"
    bad.write_text("{", encoding="utf-8")
    result = runner.invoke(app, ["--db", str(db), "import", str(bad)])
    assert result.exit_code == 1 and "bad.traj" in result.stderr and "Traceback" not in result.output
