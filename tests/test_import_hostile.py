"""Hostile variants of the real samples (issue 17): each variant is built here from a committed sample, and
the importer's counts of calls, results and messages are compared with an independent count of the source."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flightlog import replay
from flightlog.cli import app
from flightlog.errors import ImportFormatError
from flightlog.events import Custom, LlmCompleted, RunTerminal, SessionEvent, ToolCompleted
from flightlog.importers import (
    claude_code,
    codex,
    detect_format,
    file_sha256,
    import_file,
    import_paths,
    openhands,
    swe_agent,
)
from flightlog.importers.base import ImportedSession, ImportWarning
from flightlog.store import SqliteStore

SAMPLES = Path(__file__).parent / "data" / "samples"
CLAUDE_HEAVY = SAMPLES / "claude-code" / "spotter_tool_heavy.jsonl"
CODEX_FULL = SAMPLES / "codex" / "localpush_rollout-2026-02-23T20-34-25-019c8bfe.jsonl"
SWE_SAMPLE = SAMPLES / "swe-agent" / "v1_function_calling_marshmallow-1867.traj"
OPENHANDS_SAMPLE = SAMPLES / "openhands" / "v0_basic.json"


# ─── Independent counts of the source ─────────────────────────────────────────────────────────


def records(data: bytes) -> list[dict[str, Any]]:
    """Every line of the source that decodes to a JSON object, in file order."""
    out = []
    for raw in data.splitlines():
        try:
            value = json.loads(raw)
        except ValueError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


def claude_blocks(data: bytes, block_type: str) -> list[dict[str, Any]]:
    """Top-level ``message.content`` blocks of one type, in file order (progress copies left out)."""
    blocks = []
    for record in records(data):
        message = record.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            blocks += [b for b in content if isinstance(b, dict) and b.get("type") == block_type]
    return blocks


def codex_items(data: bytes, item_type: str) -> list[dict[str, Any]]:
    """``response_item`` payloads of one type, in file order."""
    payloads = [r["payload"] for r in records(data) if r.get("type") == "response_item"]
    return [p for p in payloads if isinstance(p, dict) and p.get("type") == item_type]


def calls(events: list[SessionEvent]) -> list[str]:
    return [c.id for e in events if isinstance(e, LlmCompleted) for c in e.message.tool_calls]


def results(events: list[SessionEvent]) -> dict[str, str]:
    return {r.call_id: r.output for e in events if isinstance(e, ToolCompleted) for r in e.results}


def read_one(module: Any, path: Path) -> tuple[ImportedSession, list[ImportWarning]]:
    warnings: list[ImportWarning] = []
    sessions = module.read(path, warnings)
    return sessions[0], warnings


def customs(events: list[SessionEvent], prefix: str) -> list[Custom]:
    return [e for e in events if isinstance(e, Custom) and e.custom_kind.startswith(prefix)]


# ─── 1. Reused and empty tool ids ─────────────────────────────────────────────────────────────


def claude_ids() -> list[str]:
    return [b["id"] for b in claude_blocks(CLAUDE_HEAVY.read_bytes(), "tool_use")]


def codex_ids() -> list[str]:
    return [c["call_id"] for c in codex_items(CODEX_FULL.read_bytes(), "function_call")]


CASES = [
    pytest.param(
        claude_code, CLAUDE_HEAVY, claude_ids, "tool_use", "tool_result", "tool_use_id", id="claude"
    ),
    pytest.param(
        codex, CODEX_FULL, codex_ids, "function_call", "function_call_output", "call_id", id="codex"
    ),
]


def source_pairs(
    module: Any, data: bytes, call_type: str, result_type: str, key: str
) -> list[tuple[str, str]]:
    """(native id, result text as the importer flattens it) of every result, from the source alone."""
    if module is codex:
        return [(r[key], r["output"]) for r in codex_items(data, result_type)]
    pairs = []
    for block in claude_blocks(data, result_type):
        content = block.get("content")
        text = (
            content
            if isinstance(content, str)
            else "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
        )
        pairs.append((block[key], text))
    return pairs


@pytest.mark.parametrize(("module", "sample", "ids", "call_type", "result_type", "key"), CASES)
def test_a_tool_id_reused_by_a_later_call_keeps_both_calls_and_results(
    tmp_path: Path, module: Any, sample: Path, ids: Any, call_type: str, result_type: str, key: str
) -> None:
    first, later = ids()[0], ids()[2]
    data = sample.read_bytes().replace(later.encode(), first.encode())
    path = tmp_path / sample.name
    path.write_bytes(data)
    counts = (
        len(claude_blocks(data, call_type)) if module is claude_code else len(codex_items(data, call_type))
    )
    session, warnings = read_one(module, path)
    recorded = calls(session.events)
    assert len(recorded) == counts == len(ids())
    assert recorded.count(first) == 1 and recorded.count(f"{first}#2") == 1
    assert len(set(recorded)) == len(recorded)
    outputs = results(session.events)
    source = source_pairs(module, data, call_type, result_type, key)
    assert len(outputs) == len(source)
    # The reused id's two results answer the two calls, in order, with their own outputs.
    reused = [text for native, text in source if native == first]
    assert len(reused) == 2
    assert outputs[first].startswith(reused[0][:40]) and outputs[f"{first}#2"].startswith(reused[1][:40])
    assert customs(session.events, f"{module.FORMAT.replace('-', '_')}.orphan") == []
    assert customs(session.events, f"{module.FORMAT.replace('-', '_')}.pending") == []
    assert any(f"reused for a new call; recorded as '{first}#2'" in w.reason and w.line for w in warnings)


@pytest.mark.parametrize(("module", "sample", "ids", "call_type", "result_type", "key"), CASES)
def test_an_empty_tool_id_pairs_its_call_and_result(
    tmp_path: Path, module: Any, sample: Path, ids: Any, call_type: str, result_type: str, key: str
) -> None:
    blank = ids()[1]
    data = sample.read_bytes().replace(f'"{blank}"'.encode(), b'""')
    path = tmp_path / sample.name
    path.write_bytes(data)
    session, warnings = read_one(module, path)
    recorded = calls(session.events)
    assert len(recorded) == len(ids()) and "no-id" in recorded
    outputs = results(session.events)
    [expected] = [
        text for native, text in source_pairs(module, data, call_type, result_type, key) if native == ""
    ]
    assert outputs["no-id"].startswith(expected[:40])
    assert customs(session.events, f"{module.FORMAT.replace('-', '_')}.orphan") == []
    assert customs(session.events, f"{module.FORMAT.replace('-', '_')}.pending") == []
    assert any("tool call without an id recorded as 'no-id'" in w.reason and w.line for w in warnings)


def test_codex_reused_id_result_order_follows_the_calls(tmp_path: Path) -> None:
    """Each call's result is recorded at the turn of that call (replay pairs them in order)."""
    first, later = codex_ids()[0], codex_ids()[2]
    path = tmp_path / CODEX_FULL.name
    path.write_bytes(CODEX_FULL.read_bytes().replace(later.encode(), first.encode()))
    session, _ = read_one(codex, path)
    turn_of = {
        c.id: e.turn for e in session.events if isinstance(e, LlmCompleted) for c in e.message.tool_calls
    }
    for event in session.events:
        if isinstance(event, ToolCompleted):
            assert [turn_of[r.call_id] for r in event.results] == [event.turn] * len(event.results)
    assert re.fullmatch(r".+#2", [i for i in turn_of if i.startswith(first)][-1])


# ─── 2. Invalid UTF-8, NUL runs, torn lines, trailing bytes ───────────────────────────────────

JSONL_CASES = [
    pytest.param(claude_code, CLAUDE_HEAVY, b"tool_result", id="claude"),
    pytest.param(codex, CODEX_FULL, b"function_call_output", id="codex"),
]


def kinds(events: list[SessionEvent]) -> list[str]:
    """Event types in order, ``Custom`` by its kind."""
    return [e.custom_kind if isinstance(e, Custom) else type(e).__name__ for e in events]


def first_line_with(lines: list[bytes], marker: bytes) -> int:
    """0-based index of the first line holding ``marker``."""
    return next(i for i, line in enumerate(lines) if marker in line)


def edit_line(
    tmp_path: Path, module: Any, sample: Path, marker: bytes, edit: Callable[[bytes], bytes]
) -> tuple[ImportedSession, int, ImportedSession, list[ImportWarning]]:
    """Import the sample, then a copy whose first line holding ``marker`` is ``edit(line)``.

    Returns the clean session, the edited line's 1-based number, the variant's session and its warnings.
    """
    clean, _ = read_one(module, sample)
    lines = sample.read_bytes().split(b"\n")
    index = first_line_with(lines, marker)
    lines[index] = edit(lines[index])
    path = tmp_path / sample.name
    path.write_bytes(b"\n".join(lines))
    session, warnings = read_one(module, path)
    return clean, index + 1, session, warnings


@pytest.mark.parametrize(("module", "sample", "marker"), JSONL_CASES)
def test_invalid_utf8_inside_a_result_keeps_the_record(
    tmp_path: Path, module: Any, sample: Path, marker: bytes
) -> None:
    word = b""

    def corrupt(line: bytes) -> bytes:
        nonlocal word
        found = re.search(rb'"(?:content|output)":"\[?([A-Za-z]{6,})', line)
        assert found is not None, "the sample's first result has an ASCII word to corrupt"
        word = found.group(1)
        return line.replace(word, word[:3] + b"\xff" + word[3:], 1)

    clean, line, session, warnings = edit_line(tmp_path, module, sample, marker, corrupt)
    assert kinds(session.events) == kinds(clean.events)  # nothing lost, nothing added
    corrupted = word.decode()[:3] + "\\udcff" + word.decode()[3:]
    assert any(corrupted in output for output in results(session.events).values())
    assert [(w.line, "invalid UTF-8" in w.reason) for w in warnings] == [(line, True)]


@pytest.mark.parametrize(("module", "sample", "marker"), JSONL_CASES)
def test_a_run_of_nul_bytes_does_not_lose_the_next_record(
    tmp_path: Path, module: Any, sample: Path, marker: bytes
) -> None:
    # A zero-filled block, then the record, no newline between.
    clean, line, session, warnings = edit_line(tmp_path, module, sample, marker, lambda b: b"\x00" * 4096 + b)
    assert kinds(session.events) == kinds(clean.events)
    assert [(w.line, "4096 NUL byte(s)" in w.reason) for w in warnings] == [(line, True)]


@pytest.mark.parametrize(("module", "sample", "marker"), JSONL_CASES)
def test_a_torn_record_before_nul_bytes_is_kept_byte_exact_and_the_next_record_read(
    tmp_path: Path, module: Any, sample: Path, marker: bytes
) -> None:
    torn = b""

    def tear(line: bytes) -> bytes:
        nonlocal torn
        torn = line[: len(line) // 2] + b"\xe2\x82"  # cut inside a multi-byte character
        return torn + b"\x00" * 100 + line

    clean, line, session, warnings = edit_line(tmp_path, module, sample, marker, tear)
    kept = customs(session.events, f"{module.FORMAT.replace('-', '_')}.unparsed_line")
    assert [k.payload["line"] for k in kept] == [line]
    assert base64.b64decode(kept[0].payload["base64"]) == torn
    assert len(session.events) == len(clean.events) + 1
    assert {w.line for w in warnings} == {line}
    assert any("kept byte-exact malformed line" in w.reason for w in warnings)


def test_a_torn_utf8_line_is_kept_as_its_text(tmp_path: Path) -> None:
    lines = CODEX_FULL.read_bytes().split(b"\n")
    torn = lines[5][:80]
    lines.insert(6, torn)
    path = tmp_path / CODEX_FULL.name
    path.write_bytes(b"\n".join(lines))
    session, warnings = read_one(codex, path)
    [kept] = customs(session.events, "codex.unparsed_line")
    assert kept.payload == {"line": 7, "text": torn.decode("utf-8")}
    assert [w.line for w in warnings] == [7]


@pytest.mark.parametrize(
    ("module", "sample"),
    [(swe_agent, SWE_SAMPLE), (openhands, OPENHANDS_SAMPLE)],
    ids=["swe-agent", "openhands"],
)
def test_a_document_with_trailing_nul_bytes_imports_with_a_warning(
    tmp_path: Path, module: Any, sample: Path
) -> None:
    clean, clean_warnings = read_one(module, sample)
    data = sample.read_bytes()
    path = tmp_path / sample.name
    path.write_bytes(data + b"\x00" * 512 + b"\n\n")
    session, warnings = read_one(module, path)
    assert kinds(session.events) == kinds(clean.events)
    [new] = [w for w in warnings if w not in clean_warnings]
    assert new.line == data.count(b"\n") + 1 and "512 trailing NUL byte(s)" in new.reason


@pytest.mark.parametrize(
    ("module", "sample"),
    [(swe_agent, SWE_SAMPLE), (openhands, OPENHANDS_SAMPLE)],
    ids=["swe-agent", "openhands"],
)
def test_a_document_with_trailing_garbage_is_refused_naming_line_and_column(
    tmp_path: Path, module: Any, sample: Path
) -> None:
    data = sample.read_bytes().rstrip()
    path = tmp_path / sample.name
    path.write_bytes(data + b"\n\x00\x00  garbage")
    with pytest.raises(ImportFormatError) as caught:
        module.read(path, [])
    line = data.count(b"\n") + 2
    assert caught.value.line == line
    assert f"line {line}, column 5" in str(caught.value) and path.name in str(caught.value)


# ─── 3. Tokens include the cache ──────────────────────────────────────────────────────────────


def test_claude_code_run_tokens_include_cache_reads_and_writes() -> None:
    """Independent count: the last ``usage`` of each ``message.id`` of the main conversation, every count."""
    sample = SAMPLES / "claude-code" / "spotter_short.jsonl"
    usage: dict[str, dict[str, int]] = {}
    for record in records(sample.read_bytes()):
        message = record.get("message")
        if record.get("type") == "assistant" and not record.get("isSidechain") and isinstance(message, dict):
            usage[message["id"]] = message.get("usage") or usage.get(message["id"], {})
    keys = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
    expected = sum(u.get(k, 0) for u in usage.values() for k in keys)
    assert sum(u.get("cache_read_input_tokens", 0) for u in usage.values()) > 0
    session, _ = read_one(claude_code, sample)
    assert sum(e.total_tokens for e in session.events if isinstance(e, RunTerminal)) == expected


# ─── 4. Format detection and a wrong --format ─────────────────────────────────────────────────


def test_codex_rollout_with_float_timestamps_is_detected_and_keeps_its_times(tmp_path: Path) -> None:
    clean, _ = read_one(codex, CODEX_FULL)
    lines = []
    for record in records(CODEX_FULL.read_bytes()):
        stamp = datetime.fromisoformat(record["timestamp"])
        lines.append(json.dumps({**record, "timestamp": stamp.timestamp()}))
    path = tmp_path / CODEX_FULL.name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert detect_format(path) == "codex"
    session, _ = read_one(codex, path)
    assert kinds(session.events) == kinds(clean.events)
    assert (session.started_at_ms, session.ended_at_ms) == (clean.started_at_ms, clean.ended_at_ms)
    assert clean.started_at_ms is not None


@pytest.mark.parametrize(
    ("sample", "wrong", "right"),
    [
        (CODEX_FULL, "claude-code", "codex"),
        (CLAUDE_HEAVY, "codex", "claude-code"),
        (CODEX_FULL, "swe-agent", "codex"),
        (SWE_SAMPLE, "openhands", "swe-agent"),
        (OPENHANDS_SAMPLE, "codex", "openhands"),
    ],
)
def test_a_wrong_format_is_refused_and_never_blocks_the_right_one(
    tmp_path: Path, sample: Path, wrong: str, right: str
) -> None:
    with SqliteStore(tmp_path / "db.sqlite") as store:
        with pytest.raises(ImportFormatError) as caught:
            import_file(store, sample, format=wrong)
        assert wrong in caught.value.reason and caught.value.path == str(sample)
        assert list(store.list_sessions()) == [] and store.find_import(file_sha256(sample)[0]) is None
        result = import_file(store, sample)
        assert result.format == right and not result.duplicate and result.events > 1


def test_a_dedup_record_never_blocks_a_different_format(tmp_path: Path) -> None:
    """A file both importers recognise part of: each format imports it once."""
    claude_line = CLAUDE_HEAVY.read_bytes().split(b"\n")[0]
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(CODEX_FULL.read_bytes().rstrip(b"\n") + b"\n" + claude_line + b"\n")
    with SqliteStore(tmp_path / "db.sqlite") as store:
        first = import_file(store, path, format="claude-code")
        assert first.format == "claude-code" and not first.duplicate
        second = import_file(store, path)
        assert second.format == "codex" and not second.duplicate
        assert second.session_ids[0].startswith("codex:")
        assert import_file(store, path).duplicate and import_file(store, path, format="claude-code").duplicate


def test_no_format_fits_says_so_without_suggesting_format(tmp_path: Path) -> None:
    path = tmp_path / "other.jsonl"
    path.write_text('{"role": "user", "content": "hi"}\n{"event": "x"}\n', encoding="utf-8")
    with pytest.raises(ImportFormatError) as caught:
        detect_format(path)
    assert "--format" not in str(caught.value) and "no format recognises" in caught.value.reason


def test_a_rollout_after_many_unknown_lines_is_still_detected(tmp_path: Path) -> None:
    path = tmp_path / "late.jsonl"
    path.write_bytes(b'{"note": 1}\n' * 60 + CODEX_FULL.read_bytes())
    assert detect_format(path) == "codex"


def test_cli_wrong_format_exits_1_naming_file_and_format_then_the_right_import_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLIGHTLOG_KEY_DIR", str(tmp_path / "keys"))
    monkeypatch.setenv("FLIGHTLOG_HEAD_DIR", str(tmp_path / "heads"))
    runner = CliRunner()
    db = str(tmp_path / "cli.db")
    wrong = runner.invoke(app, ["--db", db, "import", "--format", "claude-code", str(CODEX_FULL)])
    assert wrong.exit_code == 1
    assert str(CODEX_FULL) in wrong.stderr and "not a claude-code transcript" in wrong.stderr
    right = runner.invoke(app, ["--db", db, "import", str(CODEX_FULL)])
    assert right.exit_code == 0, right.stderr
    assert "already imported" not in right.stdout and "[codex]" in right.stdout


# ─── 5. Claude Code sub-agent files ───────────────────────────────────────────────────────────

SUBAGENT_PARENT = SAMPLES / "claude-code" / "spotter_subagent_parent.jsonl"


def claude_project(tmp_path: Path, agent_session_id: str | None) -> tuple[Path, str, str]:
    """A project folder as Claude Code writes it: ``<sessionId>.jsonl`` (the real sample) and
    ``<sessionId>/subagents/agent-<id>.jsonl``, the sub-agent's records unwrapped from the sample's progress
    records (``sessionId`` = the parent's, or ``agent_session_id``). Returns (folder, sessionId, agentId)."""
    progress = [
        r
        for r in records(SUBAGENT_PARENT.read_bytes())
        if r.get("type") == "progress"
        and isinstance(r.get("data"), dict)
        and r["data"].get("type") == "agent_progress"
    ]
    session_id, agent_id = progress[0]["sessionId"], progress[0]["data"]["agentId"]
    project = tmp_path / "project"
    folder = project / session_id / "subagents"
    folder.mkdir(parents=True)
    (project / f"{session_id}.jsonl").write_bytes(SUBAGENT_PARENT.read_bytes())
    lines, parent = [], None
    for record in progress:
        inner = record["data"]["message"]
        line = {"parentUuid": parent, "isSidechain": True, "sessionId": agent_session_id or session_id}
        line |= {"agentId": agent_id, **inner}
        lines.append(json.dumps(line))
        parent = inner["uuid"]
    (folder / f"agent-{agent_id}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return project, session_id, agent_id


@pytest.mark.parametrize("agent_session_id", [None, "agent-afb92ff"], ids=["parent-id", "agent-id"])
def test_folder_import_records_each_subagent_once_as_a_child_of_its_real_parent(
    tmp_path: Path, agent_session_id: str | None
) -> None:
    project, session_id, agent_id = claude_project(tmp_path, agent_session_id)
    with SqliteStore(tmp_path / "db.sqlite") as store:
        results = list(import_paths(store, [project]))
        sessions = {s.session_id: s for s in store.list_sessions()}
    main = f"claude-code:{session_id}"
    child = f"{main}:agent:{agent_id}"
    assert sorted(sessions) == [main, child]
    assert sessions[child].parent_session_id == main and sessions[main].parent_session_id is None
    assert [r.path.name for r in results] == [f"{session_id}.jsonl"]


def test_a_subagent_file_on_its_own_is_a_child_of_the_session_its_folder_names(tmp_path: Path) -> None:
    project, session_id, agent_id = claude_project(tmp_path, "agent-afb92ff")
    agent_file = project / session_id / "subagents" / f"agent-{agent_id}.jsonl"
    sessions = claude_code.read(agent_file, [])
    assert [(s.key, s.parent_key) for s in sessions] == [
        (f"claude-code:{session_id}:agent:{agent_id}", f"claude-code:{session_id}")
    ]


# ─── 6. SWE-agent without function calling ────────────────────────────────────────────────────


def without_function_calling(document: dict[str, Any]) -> dict[str, Any]:
    """The trajectory as SWE-agent writes it without function calling: no ``tool_calls``, observations as
    ``user`` messages."""
    history = []
    for message in document["history"]:
        message = {k: v for k, v in message.items() if k not in ("tool_calls", "tool_call_ids")}
        if message["role"] == "tool":
            message["role"] = "user"
        history.append(message)
    return {**document, "history": history}


def test_swe_agent_without_function_calling_replays_every_observation(tmp_path: Path) -> None:
    variant = without_function_calling(json.loads(SWE_SAMPLE.read_bytes()))
    path = tmp_path / SWE_SAMPLE.name
    path.write_text(json.dumps(variant), encoding="utf-8")
    history = variant["history"]
    actions = [m["action"] for m in history if m["role"] == "assistant"]
    observations = [
        m["content"] if isinstance(m["content"], str) else "\n".join(p["text"] for p in m["content"])
        for i, m in enumerate(history)
        if m["role"] == "user" and i > 0 and history[i - 1]["role"] == "assistant"
    ]
    assert len(observations) == len(actions) == 11
    session, _ = read_one(swe_agent, path)
    assert [
        json.loads(c.arguments)["action"]
        for e in session.events
        if isinstance(e, LlmCompleted)
        for c in e.message.tool_calls
    ] == actions
    assert list(results(session.events).values()) == observations
    shown = [
        part.output
        for m in replay.reconstruct(enumerate(session.events, start=1))
        for part in m.content
        if m.role == "tool"
    ]
    assert shown == observations
    assert customs(session.events, "swe_agent.pending") == []


# ─── 3. The transcript's own times ────────────────────────────────────────────────────────────


@pytest.mark.parametrize("sample", [CLAUDE_HEAVY, CODEX_FULL], ids=["claude", "codex"])
def test_imported_rows_carry_the_transcripts_own_times(tmp_path: Path, sample: Path) -> None:
    """Independent count: the source's earliest and latest record timestamps bound every row; the rows
    are in time order; the session's created time is the first record's; runs last as the source says."""
    stamps = sorted(
        int(datetime.fromisoformat(r["timestamp"]).timestamp() * 1000)
        for r in records(sample.read_bytes())
        if isinstance(r.get("timestamp"), str)
    )
    with SqliteStore(tmp_path / "db.sqlite") as store:
        result = import_file(store, sample, seal=True)  # complete: the last run's end is recorded too
        main = result.session_ids[0]
        rows = list(store.read_events(main))
        created = next(s for s in store.list_sessions() if s.session_id == main).created_at_ms
    times = [row.recorded_at_ms for row in rows if row.kind != "session_sealed"]
    assert created == stamps[0] == times[0]
    assert times == sorted(times) and stamps[0] <= times[0] and times[-1] <= stamps[-1]
    assert len(set(times)) > len(times) // 4  # spread over the session, not one import instant
    runs = [(row.recorded_at_ms, row.kind) for row in rows if row.kind in ("run_started", "run_terminal")]
    assert runs and all(end >= start for (start, _), (end, _) in zip(runs[::2], runs[1::2], strict=False))
    assert runs[-1][0] - runs[0][0] > 1000  # the source's runs took seconds, not the import's milliseconds


@pytest.mark.parametrize("bad", ["\n", "\r", "\t", "\x1b", "\u202e"])
def test_a_session_id_holding_a_control_character_is_refused_before_anything_is_written(
    tmp_path: Path, bad: str
) -> None:
    # A sessionId with a newline printed a forged row of its own in `ls` / `runs` (user pass, session 10):
    # ids are one cell of a one-line row, so the import refuses the file, naming it, and writes nothing.
    forged = f"evil{bad}claude-code:5560  completed  17  8d0d00a7bc18  all tests pass"
    lines = [json.loads(line) for line in CLAUDE_HEAVY.read_text().splitlines() if line.strip()]
    for record in lines:
        if "sessionId" in record:
            record["sessionId"] = forged
    source = tmp_path / "forge.jsonl"
    source.write_text("".join(json.dumps(record) + "\n" for record in lines))
    with SqliteStore(tmp_path / "f.db") as store:
        with pytest.raises(ImportFormatError) as caught:
            import_file(store, source)
        assert caught.value.path == str(source)
        assert f"U+{ord(bad):04X}" in caught.value.reason and "nothing written" in caught.value.reason
        assert list(store.list_sessions()) == []
    result = CliRunner().invoke(app, ["--db", str(tmp_path / "f.db"), "import", str(source)])
    assert result.exit_code == 1, result.output  # as every other file an import refuses
    assert "U+" in result.output and "all tests pass\n" not in result.output


def test_a_store_refuses_a_new_session_id_holding_a_control_character(tmp_path: Path) -> None:
    from flightlog import Recorder
    from flightlog.errors import InvalidSessionId

    with SqliteStore(tmp_path / "r.db") as store:
        with pytest.raises(InvalidSessionId, match="U\\+000A"):
            Recorder.create(store, session_id="a\nb", task="t")
        assert list(store.list_sessions()) == []
        Recorder.create(store, session_id="claude-code:ok:agent:1", task="t")  # ordinary ids still pass
        assert [s.session_id for s in list(store.list_sessions())] == ["claude-code:ok:agent:1"]
