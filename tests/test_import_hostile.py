"""Hostile variants of the real samples (issue 17): each variant is built here from a committed sample, and
the importer's counts of calls, results and messages are compared with an independent count of the source."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from flightlog.events import Custom, LlmCompleted, SessionEvent, ToolCompleted
from flightlog.importers import claude_code, codex
from flightlog.importers.base import ImportedSession, ImportWarning

SAMPLES = Path(__file__).parent / "data" / "samples"
CLAUDE_HEAVY = SAMPLES / "claude-code" / "spotter_tool_heavy.jsonl"
CODEX_FULL = SAMPLES / "codex" / "localpush_rollout-2026-02-23T20-34-25-019c8bfe.jsonl"


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
