"""A JSONL record nested deeply (attack on import pass 3): the JSON reader accepts up to ~1,000 levels, but
what an importer does with a record (Claude Code's ``_safe_json``, the lone-surrogate cleaner, pydantic's
serializer for a Codex completion) does not. Each such line must be one warned line, never the end of the
import: every JSONL importer reads a line nested deeper than ``MAX_LINE_DEPTH`` as one that is no JSON object
(kept byte-exact, warned with its line number), and one just within it imports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flightlog.encoding import decode_stored
from flightlog.events import Custom
from flightlog.importers import import_file
from flightlog.importers.base import MAX_LINE_DEPTH
from flightlog.recorder import verify_session
from flightlog.runs import projection_ready, rebuild_projection
from flightlog.store import SqliteStore

SAMPLES = Path(__file__).parent / "data" / "samples"
JSONL_SAMPLES = [
    pytest.param(SAMPLES / "claude-code" / "spotter_short.jsonl", id="claude-code"),
    pytest.param(SAMPLES / "codex" / "localpush_rollout-2026-02-23T20-34-25-019c8bfe.jsonl", id="codex"),
    pytest.param(SAMPLES / "gemini-cli" / "session-2026-12-02T06-04-a3f1c2d4.jsonl", id="gemini-cli"),
]


def nested(depth: int, leaf: Any) -> list[Any]:
    """``leaf`` inside ``depth`` lists."""
    value: Any = leaf
    for _ in range(depth):
        value = [value]
    return value  # type: ignore[no-any-return]


def deepen(record: Any, depth: int, leaf: Any, level: int) -> int:
    """Add ``{"zz": nested(...)}`` to every object ``level`` objects/arrays below ``record``, so the deepest
    value of the record is ``depth`` levels below the object that holds it; returns how many were added."""
    added = 0
    stack = [(record, 0)]
    while stack:
        item, at = stack.pop()
        if isinstance(item, dict):
            if at == level:
                item["zz"] = nested(depth - 1, leaf)
                added += 1
            stack.extend((child, at + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, at + 1) for child in item)
    return added


def max_depth(value: Any) -> int:
    """Levels of arrays/objects (a scalar: 0)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, at = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, at)
            stack.extend((child, at + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def write_deep(sample: Path, path: Path, depth: int, leaf: Any, level: int) -> dict[int, int]:
    """The sample with a deep value added in every second record (the first one, which the format is told
    by, left alone); returns {line number: the line's depth}."""
    lines, depths = [], {}
    for number, raw in enumerate(sample.read_bytes().splitlines(), start=1):
        record = json.loads(raw)
        if number % 2 == 0 and deepen(record, depth, leaf, level):
            depths[number] = max_depth(record)
        lines.append(json.dumps(record, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    path.write_bytes(b"\n".join(lines) + b"\n")
    return depths


@pytest.mark.parametrize("sample", JSONL_SAMPLES)
@pytest.mark.parametrize("leaf", ["plain", "\ud800 lone"], ids=["plain", "surrogate"])
@pytest.mark.parametrize("level", [0, 1, 2])
@pytest.mark.parametrize("depth", [MAX_LINE_DEPTH // 2, 600, 950])
def test_a_deeply_nested_record_is_a_warned_line_never_the_end_of_the_import(
    tmp_path: Path, sample: Path, leaf: str, level: int, depth: int
) -> None:
    path = tmp_path / sample.name
    depths = write_deep(sample, path, depth, leaf, level)
    store = SqliteStore(tmp_path / "f.db")
    result = import_file(store, path)  # failed on main: RecursionError / ValueError from deep in an importer
    too_deep = sorted(n for n, d in depths.items() if d > MAX_LINE_DEPTH)
    warned = sorted(w.line for w in result.warnings if w.line is not None and "nested" in w.reason)
    assert warned == too_deep
    recorded: set[int] = set()
    for session_id in result.session_ids:
        assert verify_session(store, session_id).ok
        lines = {
            event.payload["line"]
            for event in (decode_stored(e.event_bytes) for e in store.read_events(session_id))
            if isinstance(event, Custom) and event.custom_kind.endswith("unparsed_line")
        }
        recorded |= lines
    # each line kept byte-exact is recorded (by the main session)
    assert recorded == set(too_deep)
    assert projection_ready(store)  # the import's projection is current and equals a rebuild's
    incremental = store.get_run_rows(result.session_ids)
    rebuild_projection(store)
    assert store.get_run_rows(result.session_ids) == incremental


@pytest.mark.parametrize("sample", JSONL_SAMPLES)
def test_a_record_exactly_max_line_depth_deep_imports_without_a_nesting_warning(
    tmp_path: Path, sample: Path
) -> None:
    path = tmp_path / sample.name
    lines = sample.read_bytes().splitlines()
    record = json.loads(lines[0])
    record["zz"] = nested(MAX_LINE_DEPTH - 1, "leaf")
    assert max_depth(record) == MAX_LINE_DEPTH
    path.write_bytes(b"\n".join([json.dumps(record).encode(), *lines[1:]]) + b"\n")
    result = import_file(SqliteStore(tmp_path / "f.db"), path)
    assert not [w for w in result.warnings if "nested" in w.reason]
