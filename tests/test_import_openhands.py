"""The OpenHands trajectory importer: real samples (tests/data/samples/openhands) and hostile files built here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flightlog.encoding import canonical_bytes, decode_stored
from flightlog.errors import ImportFormatError
from flightlog.events import (
    Compressed,
    Custom,
    LlmCompleted,
    RunStarted,
    RunTerminal,
    SessionEvent,
    ToolCompleted,
    ToolRequested,
)
from flightlog.importers import FORMATS, detect_format, import_file, iter_transcripts, openhands
from flightlog.importers.base import ImportedSession, ImportWarning
from flightlog.messages import ImagePart, ToolResultPart
from flightlog.recorder import verify_session
from flightlog.replay import reconstruct
from flightlog.store import SqliteStore

SAMPLES = Path(__file__).parent / "data" / "samples" / "openhands"
SAMPLE_FILES = sorted(SAMPLES.glob("*.json"))
assert SAMPLE_FILES, f"no OpenHands samples under {SAMPLES}: every sample test would pass on nothing"
BASIC = SAMPLES / "v0_basic.json"
INTERACTIONS = SAMPLES / "v0_basic_interactions.json"


# ─── Helpers ──────────────────────────────────────────────────────────────────────────────────


def import_one(path: Path) -> tuple[ImportedSession, list[ImportWarning]]:
    warnings: list[ImportWarning] = []
    sessions = openhands.read(path, warnings)
    assert len(sessions) == 1
    return sessions[0], warnings


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


def pending_ids(events: list[SessionEvent], prefix: str = "openhands") -> list[str]:
    return [c.payload["call_id"] for c in customs(events, f"{prefix}.pending_tool_call")]


def write(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def user(event_id: int, text: str, **extra: Any) -> dict[str, Any]:
    args = {"content": text, "image_urls": None, "wait_for_response": False, **extra}
    return {
        "id": event_id,
        "timestamp": "2025-01-01T00:00:00",
        "source": "user",
        "message": text,
        "action": "message",
        "args": args,
    }


def response(response_id: str, *calls: tuple[str, str], text: str | None = None) -> dict[str, Any]:
    tool_calls = [
        {"id": cid, "type": "function", "function": {"name": name, "arguments": '{"command":"ls"}'}}
        for cid, name in calls
    ]
    message = {"role": "assistant", "content": text, "tool_calls": tool_calls}
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    return {
        "id": response_id,
        "model": "m-1",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
        "usage": usage,
    }


def act(
    event_id: int, action: str, call_id: str, resp: dict[str, Any] | None, name: str = "bash"
) -> dict[str, Any]:
    meta: dict[str, Any] = {"function_name": name, "tool_call_id": call_id, "total_calls_in_response": 1}
    if resp is not None:
        meta["model_response"] = resp
    return {
        "id": event_id,
        "timestamp": "2025-01-01T00:00:01",
        "source": "agent",
        "message": "",
        "action": action,
        "tool_call_metadata": meta,
        "args": {"command": "ls", "thought": "t"},
    }


def obs(
    event_id: int,
    cause: int,
    call_id: str | None,
    content: Any = "ok",
    observation: str = "run",
    extras: dict[str, Any] | None = None,
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": event_id,
        "timestamp": "2025-01-01T00:00:02",
        "source": "agent",
        "message": "",
        "cause": cause,
        "observation": observation,
        "content": content,
        "extras": extras or {},
    }
    if call_id is not None:
        record["tool_call_metadata"] = {"function_name": "bash", "tool_call_id": call_id}
    return record


def finish(event_id: int, call_id: str = "fin") -> dict[str, Any]:
    return act(event_id, "finish", call_id, response(f"r-{call_id}", (call_id, "finish")), name="finish")


# ─── Real samples ─────────────────────────────────────────────────────────────────────────────


def native_calls(path: Path) -> set[str]:
    ids = set()
    for event in json.loads(path.read_text(encoding="utf-8")):
        resp = event.get("tool_call_metadata", {}).get("model_response")
        if resp:
            ids |= {c["id"] for c in resp["choices"][0]["message"]["tool_calls"]}
    return ids


def native_results(path: Path) -> list[str]:
    return [
        e["tool_call_metadata"]["tool_call_id"]
        for e in json.loads(path.read_text(encoding="utf-8"))
        if "observation" in e and "tool_call_metadata" in e
    ]


def test_the_samples_are_all_here() -> None:
    assert SAMPLE_FILES == [BASIC, INTERACTIONS]


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.name)
def test_sample_imports_as_one_session_without_paths(path: Path) -> None:
    session, warnings = import_one(path)
    assert warnings == []
    assert session.key == f"openhands:{path.stem}"
    assert session.source_format == "openhands"
    assert set(session.metadata) == {"first_timestamp", "last_timestamp", "model"}
    # OpenHands writes naive timestamps: the epoch times stay absent rather than guessed.
    assert session.started_at_ms is None and session.ended_at_ms is None


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.name)
def test_sample_every_call_and_result_appears_exactly_once(path: Path) -> None:
    session, _ = import_one(path)
    native = native_calls(path)
    assert sorted(call_ids(session.events)) == sorted(native)
    assert sorted(requested_ids(session.events)) == sorted(native)
    assert sorted(result_ids(session.events)) == sorted(native_results(path))
    # Every call is answered or flagged pending, never both, never neither.
    answered, pending = set(result_ids(session.events)), set(pending_ids(session.events))
    assert answered | pending == native and not answered & pending
    assert customs(session.events, "openhands.orphan_tool_result") == []


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.name)
def test_sample_events_round_trip_canonical_bytes(path: Path) -> None:
    session, _ = import_one(path)
    assert session.events
    for event in session.events:
        assert decode_stored(canonical_bytes(event)) == event


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.name)
def test_sample_one_run_per_user_message(path: Path) -> None:
    source = json.loads(path.read_text(encoding="utf-8"))
    prompts = [e["args"]["content"] for e in source if e["source"] == "user" and e.get("action") == "message"]
    session, _ = import_one(path)
    assert [e.goal for e in of(session.events, RunStarted)] == prompts
    assert len(of(session.events, RunTerminal)) == len(prompts)
    assert isinstance(session.events[0], RunStarted) and isinstance(session.events[-1], RunTerminal)
    assert session.task == prompts[0][:200]


def test_basic_sample_mapping() -> None:
    session, _ = import_one(BASIC)
    assert [e.kind if not isinstance(e, Custom) else e.custom_kind for e in session.events] == [
        "run_started",
        "llm_completed",
        "tool_requested",
        "openhands.model_response",
        "openhands.action.edit",
        "tool_completed",
        "openhands.observation.edit",
        "llm_completed",
        "tool_requested",
        "openhands.model_response",
        "openhands.action.finish",
        "openhands.pending_tool_call",
        "run_terminal",
    ]
    first = of(session.events, LlmCompleted)[0]
    replay = first.provider_replay
    assert replay is not None and (replay.protocol, replay.model) == (
        "openai.chat",
        "claude-3-5-sonnet-20241022",
    )
    source = json.loads(BASIC.read_text(encoding="utf-8"))
    native = source[1]["tool_call_metadata"]["model_response"]["choices"][0]["message"]
    assert replay.native_message == native and replay.tool_calls == native["tool_calls"]
    assert first.message.text_content() == native["content"]
    (result,) = of(session.events, ToolCompleted)[0].results
    assert result.output == source[2]["content"] and result.is_error is False
    # The observation's copy of the model response is not kept twice; its extras are.
    (observation,) = customs(session.events, "openhands.observation.edit")
    assert "content" not in observation.payload and observation.payload["extras"] == source[2]["extras"]
    assert "model_response" not in observation.payload["tool_call_metadata"]
    assert pending_ids(session.events) == ["toolu_01BUKu3B7nY574atNECkBiFk"]  # finish gets no observation
    assert session.events[-1] == RunTerminal(reason="completed", turns_used=2, total_tokens=4621 + 4823)


def test_interactions_sample_three_runs_in_order() -> None:
    session, _ = import_one(INTERACTIONS)
    terminals = of(session.events, RunTerminal)
    assert [(t.reason, t.turns_used, t.total_tokens) for t in terminals] == [
        ("completed", 1, 0),
        ("completed", 1, 0),
        ("completed", 1, 2483),
    ]
    texts = [e.message.text_content() for e in of(session.events, LlmCompleted)]
    assert texts[:2] == ["1 + 1 equals 2.", texts[1]] and texts[1].startswith("Goldbach's conjecture")


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.name)
def test_sample_replay_shows_task_and_assistant_turns_in_order(path: Path) -> None:
    from flightlog.replay import reconstruct

    session, _ = import_one(path)
    messages = reconstruct(list(enumerate(session.events, start=1)))
    assert messages[0].role == "user" and messages[0].text_content() == session.task
    roles = [m.role for m in messages]
    assert roles.count("assistant") == len(of(session.events, LlmCompleted))
    assistants = [m for m in messages if m.role == "assistant"]
    assert assistants == [e.message for e in of(session.events, LlmCompleted)]


def test_import_twice_is_one_session_and_verifies(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "db.sqlite") as store:
        first = import_file(store, BASIC)
        again = import_file(store, BASIC)
        assert first.format == "openhands" and not first.duplicate
        assert again.duplicate and again.session_ids == first.session_ids
        assert [s.session_id for s in store.list_sessions()] == ["openhands:v0_basic"]
        report = verify_session(store, "openhands:v0_basic")
        assert report.ok and report.events == first.events


# ─── Mapping rules ────────────────────────────────────────────────────────────────────────────


def test_parallel_calls_of_one_response_make_one_completion(tmp_path: Path) -> None:
    resp = response("r1", ("a", "bash"), ("b", "bash"), text="two at once")
    events = [
        user(0, "go"),
        act(1, "run", "a", resp),
        obs(2, 1, "a"),
        act(3, "run", "b", resp),
        obs(4, 3, "b"),
    ]
    session, warnings = import_one(write(tmp_path / "p.json", events))
    assert warnings == []
    (completion,) = of(session.events, LlmCompleted)
    assert [c.id for c in completion.message.tool_calls] == ["a", "b"]
    assert result_ids(session.events) == ["a", "b"]
    assert [e.turn for e in of(session.events, ToolCompleted)] == [1, 1]
    assert len(customs(session.events, "openhands.model_response")) == 1
    assert session.events[-1] == RunTerminal(reason="incomplete", turns_used=1, total_tokens=15)


def test_result_paired_by_cause_without_metadata(tmp_path: Path) -> None:
    events = [
        user(0, "go"),
        act(1, "run", "a", response("r1", ("a", "bash"))),
        obs(2, 1, None, "out"),
        finish(3),
    ]
    session, _ = import_one(write(tmp_path / "c.json", events))
    assert result_ids(session.events) == ["a"]
    assert of(session.events, RunTerminal)[0].reason == "completed"


def test_orphan_result_is_recorded_and_flagged(tmp_path: Path) -> None:
    events = [user(0, "go"), obs(1, 99, "ghost", "late output")]
    session, _ = import_one(write(tmp_path / "o.json", events))
    assert result_ids(session.events) == ["ghost"]
    (orphan,) = customs(session.events, "openhands.orphan_tool_result")
    assert orphan.payload == {
        "call_id": "ghost",
        "native_call_id": "ghost",
        "event_id": 1,
        "observation": "run",
    }


def test_repeated_result_is_an_orphan_with_its_own_id(tmp_path: Path) -> None:
    events = [
        user(0, "go"),
        act(1, "run", "a", response("r1", ("a", "bash"))),
        obs(2, 1, "a"),
        obs(3, 1, "a", "again"),
    ]
    session, _ = import_one(write(tmp_path / "r.json", events))
    assert result_ids(session.events) == ["a", "a#2"]
    assert [c.payload["native_call_id"] for c in customs(session.events, "openhands.orphan_tool_result")] == [
        "a"
    ]


def test_reused_native_id_gets_a_unique_id(tmp_path: Path) -> None:
    events = [
        user(0, "go"),
        act(1, "run", "x", response("r1", ("x", "bash"))),
        obs(2, 1, "x", "one"),
        act(3, "run", "x", response("r2", ("x", "bash"))),
        obs(4, 3, "x", "two"),
    ]
    session, warnings = import_one(write(tmp_path / "u.json", events))
    assert call_ids(session.events) == ["x", "x#2"] and result_ids(session.events) == ["x", "x#2"]
    assert [r.output for e in of(session.events, ToolCompleted) for r in e.results] == ["one", "two"]
    assert len(warnings) == 1 and "reused" in warnings[0].reason


@pytest.mark.parametrize(
    ("observation", "extras", "is_error"),
    [
        ("run", {"exit_code": 1}, True),
        ("run", {"metadata": {"exit_code": 2}}, True),
        ("run", {"exit_code": 0}, False),
        ("error", {}, True),
    ],
)
def test_error_flag(tmp_path: Path, observation: str, extras: dict[str, Any], is_error: bool) -> None:
    events = [
        user(0, "go"),
        act(1, "run", "a", response("r1", ("a", "bash"))),
        obs(2, 1, "a", "x", observation, extras),
    ]
    session, _ = import_one(write(tmp_path / "e.json", events))
    assert of(session.events, ToolCompleted)[0].results[0].is_error is is_error


def test_action_without_model_response_still_makes_a_call(tmp_path: Path) -> None:
    events = [user(0, "go"), act(1, "run", "a", None), obs(2, 1, "a")]
    session, _ = import_one(write(tmp_path / "n.json", events))
    (completion,) = of(session.events, LlmCompleted)
    assert completion.provider_replay is None
    (call,) = completion.message.tool_calls
    assert (call.id, call.name, json.loads(call.arguments)) == ("a", "bash", {"command": "ls"})
    assert result_ids(session.events) == ["a"]


def test_unknown_events_are_kept_as_custom(tmp_path: Path) -> None:
    state = {
        "id": 5,
        "source": "environment",
        "observation": "agent_state_changed",
        "content": "",
        "extras": {"agent_state": "error"},
    }
    events = [
        {"id": 0, "source": "agent", "action": "system", "args": {"content": "sys"}},
        user(0, "go", extra_field=1),
        {"id": 2, "source": "user", "action": "recall", "args": {"query": "go"}},
        {"weird": True},
        [1, 2],
        state,
    ]
    session, _ = import_one(write(tmp_path / "k.json", events))
    assert [e.custom_kind for e in of(session.events, Custom)] == [
        "openhands.action.system",
        "openhands.action.recall",
        "openhands.record",
        "openhands.record",
        "openhands.observation.agent_state_changed",
    ]
    assert of(session.events, RunStarted)[0].goal == "go"
    assert session.events[-1] == RunTerminal(reason="error", turns_used=0, total_tokens=0)


def test_image_urls_become_attachments_and_paths_are_kept_aside(tmp_path: Path) -> None:
    events = [user(0, "look", image_urls=["https://x/y.png", "/home/dev/secret.png"])]
    session, warnings = import_one(write(tmp_path / "i.json", events))
    (run,) = of(session.events, RunStarted)
    assert run.attachments == [ImagePart(ref="https://x/y.png")]
    assert customs(session.events, "openhands.user_images")[0].payload["image_urls"] == [
        "/home/dev/secret.png"
    ]
    assert len(warnings) == 1


def test_agent_message_waiting_for_the_user_completes_the_run(tmp_path: Path) -> None:
    answer = {
        "id": 1,
        "source": "agent",
        "action": "message",
        "message": "hi",
        "args": {"content": "hi", "wait_for_response": True},
    }
    session, _ = import_one(write(tmp_path / "w.json", [user(0, "hello"), answer]))
    assert session.events[-1] == RunTerminal(reason="completed", turns_used=1, total_tokens=0)


# ─── Hostile files ────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b'[{"id": 0, "source": "user", "action": "mess', "not valid JSON"),
        (b"", "not valid JSON"),
        (b'{"trajectory": []}', "expected a JSON array of events, got an object"),
        (b'"just a string"', "got a str"),
        (b"[" * 300 + b"]" * 300, "nested"),
    ],
)
def test_broken_files_raise_a_clear_error_naming_the_file(
    tmp_path: Path, content: bytes, reason: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(ImportFormatError) as info:
        openhands.read(path, [])
    assert info.value.path == str(path) and reason in info.value.reason


def test_broken_file_imports_nothing(tmp_path: Path) -> None:
    path = tmp_path / "torn.json"
    path.write_bytes(BASIC.read_bytes()[:5000])
    with SqliteStore(tmp_path / "db.sqlite") as store:
        with pytest.raises(ImportFormatError):
            import_file(store, path, format="openhands")
        with pytest.raises(ImportFormatError):
            import_file(store, path)
        assert list(store.list_sessions()) == []


def test_empty_array_yields_no_session(tmp_path: Path) -> None:
    warnings: list[ImportWarning] = []
    assert openhands.read(write(tmp_path / "e.json", []), warnings) == []
    assert len(warnings) == 1


def test_bom_surrogates_invalid_utf8_and_unsafe_numbers_are_kept_as_text(tmp_path: Path) -> None:
    body = json.dumps(
        [user(0, "go"), act(1, "run", "a", response("r1", ("a", "bash"))), obs(2, 1, "a", "bad \ud800 byte")]
    )
    assert "\\ud800" in body
    body = body.replace('"timeout"', '"big": 18446744073709551616, "n": NaN, "timeout"')
    raw = b"\xef\xbb\xbf" + body.encode().replace(b"bad ", b"bad \xff ")
    path = tmp_path / "h.json"
    path.write_bytes(raw)
    session, warnings = import_one(path)
    (result,) = of(session.events, ToolCompleted)[0].results
    assert result.output == "bad \\udcff \\ud800 byte"
    assert len(warnings) == 2  # invalid UTF-8 byte; surrogates kept as escape text
    for event in session.events:
        assert decode_stored(canonical_bytes(event)) == event


def test_unsafe_numbers_are_kept_as_json_text(tmp_path: Path) -> None:
    path = tmp_path / "n.json"
    raw = '[{"id": 0, "source": "user", "action": "recall", "args": {"n": NaN, "big": BIG}}]'
    path.write_text(raw.replace("BIG", str(2**60)))
    session, warnings = import_one(path)
    (custom,) = of(session.events, Custom)
    assert custom.payload["args"] == {"n": "NaN", "big": str(2**60)}
    assert [w.reason for w in warnings] == ["2 number(s) outside RFC 8785's range kept as JSON text"]


def test_missing_keys_and_wrong_types_do_not_crash(tmp_path: Path) -> None:
    events: list[Any] = [
        {"id": 0, "source": "user", "action": "message"},  # no args
        {
            "id": 1,
            "source": "agent",
            "action": "run",
            "tool_call_metadata": {"model_response": {"choices": "x"}},
        },
        {"id": 2, "source": "agent", "action": "run", "tool_call_metadata": {"tool_call_id": 7}},
        {"id": 3, "source": "agent", "observation": "run", "cause": [1], "tool_call_metadata": "x"},
        {"id": 4, "source": "agent", "action": "message", "args": {"content": 5}},
    ]
    session, _ = import_one(write(tmp_path / "m.json", events))
    assert of(session.events, RunStarted)[0].goal == ""
    for event in session.events:
        canonical_bytes(event)


def test_thirty_megabyte_output(tmp_path: Path) -> None:
    big = "x" * 30_000_000
    events = [user(0, "go"), act(1, "run", "a", response("r1", ("a", "bash"))), obs(2, 1, "a", big)]
    session, _ = import_one(write(tmp_path / "big.json", events))
    assert len(of(session.events, ToolCompleted)[0].results[0].output) == 30_000_000


# ─── Detection and CLI ────────────────────────────────────────────────────────────────────────


def test_looks_like_and_detection(tmp_path: Path) -> None:
    assert "openhands" in FORMATS
    assert openhands.looks_like(json.loads(BASIC.read_text(encoding="utf-8")))
    assert not openhands.looks_like([])
    assert not openhands.looks_like({"id": 0, "source": "user", "action": "message"})
    assert not openhands.looks_like([{"name": "x"}])
    assert detect_format(BASIC) == "openhands"
    other = write(tmp_path / "other.json", [{"name": "not an event"}])
    with pytest.raises(ImportFormatError, match=r"supported format .*openhands"):
        detect_format(other)


def test_folder_import_picks_trajectories_and_leaves_other_json(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    trajectory = tmp_path / "sub" / "t.json"
    trajectory.write_bytes(BASIC.read_bytes())
    write(tmp_path / "package.json", {"name": "x", "source": "user"})
    write(tmp_path / "list.json", [1, 2, 3])
    write(tmp_path / "events.json", [{"source": "somewhere"}])
    (tmp_path / "notes.txt").write_text("x")
    assert list(iter_transcripts([tmp_path])) == [trajectory]


def test_cli_import_with_format_and_auto(tmp_path: Path) -> None:
    from flightlog.cli import app

    runner = CliRunner()
    db = tmp_path / "l.db"
    result = runner.invoke(app, ["--db", str(db), "import", "--format", "openhands", str(BASIC)])
    assert result.exit_code == 0, result.stderr
    # 13 mapped events + the import_source header + the seal
    assert "openhands:v0_basic  15 events from v0_basic.json [openhands]" in result.stdout
    result = runner.invoke(app, ["--db", str(db), "import", str(SAMPLES)])
    assert result.exit_code == 0, result.stderr
    assert "already imported" in result.stdout and "openhands:v0_basic_interactions" in result.stdout
    result = runner.invoke(app, ["--db", str(db), "verify", "--all"])
    assert result.exit_code == 0, result.stdout
    result = runner.invoke(app, ["--db", str(db), "replay", "openhands:v0_basic_interactions"])
    assert result.exit_code == 0
    assert result.stdout.index("what's 1+1?") < result.stdout.index("1 + 1 equals 2.")
    assert result.stdout.index("1 + 1 equals 2.") < result.stdout.index("Finish please")
    result = runner.invoke(app, ["--db", str(db), "import", "--format", "openhands", str(tmp_path / "l.db")])
    assert result.exit_code == 1 and "l.db" in result.stderr


def test_condensation_replays_as_the_agents_view_continued(tmp_path: Path) -> None:
    condensation = {
        "id": 7,
        "timestamp": "2025-01-01T00:00:02",
        "source": "agent",
        "message": "Summary: ran ls twice",
        "action": "condensation",
        "args": {"forgotten_events_start_id": 2, "forgotten_events_end_id": 5, "summary": "ran ls twice"},
    }
    doc = [
        user(1, "list files"),
        act(2, "run", "c1", response("r1", ("c1", "bash"))),
        obs(3, 2, "c1", "a.txt"),
        act(4, "run", "c2", response("r2", ("c2", "bash"))),
        obs(5, 4, "c2", "b.txt"),
        condensation,
        act(8, "run", "c3", response("r3", ("c3", "bash"))),
        obs(9, 8, "c3", "c.txt"),
    ]
    session, _warnings = import_one(write(tmp_path / "cond.json", doc))
    (compressed,) = of(session.events, Compressed)
    first = session.events.index(next(e for e in session.events if isinstance(e, LlmCompleted)))
    assert compressed.action == "condensation" and compressed.summary == "ran ls twice"
    assert compressed.archived_seq_range[0] == first + openhands.SEQ_OFFSET
    assert customs(session.events, "openhands.action.condensation")[0].payload["id"] == 7
    numbered = list(enumerate(session.events, start=openhands.SEQ_OFFSET))
    history = reconstruct(numbered)
    assert [m.role for m in history] == ["user", "system", "assistant", "tool"]
    assert history[1].text_content() == "[compressed turn 2] ran ls twice"
    assert [p.output for m in history for p in m.content if isinstance(p, ToolResultPart)] == ["c.txt"]
