"""bench/ledger.py's same-work append floor encodes with the standard library, not the measured tree's
encoder, and its bytes are RFC 8785's (what flightlog stores) on the benchmark's workload: so the floor does
the same work, and a tree's encoding gains are not credited to its floor too."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest
import rfc8785

from flightlog.encoding import canonical_bytes

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.fixture(scope="module")
def ledger() -> ModuleType:
    sys.path.insert(0, str(BENCH))  # ledger.py imports its sibling _tree
    try:
        return importlib.import_module("ledger")
    finally:
        sys.path.remove(str(BENCH))


def test_the_floor_encoder_gives_rfc_8785_bytes_on_the_workload(ledger: ModuleType) -> None:
    workload = ledger.Workload(20240607)
    events = [workload.run_started(), *workload.events(400)]
    assert {e.kind for e in events} == {
        "run_started", "checkpoint_taken", "llm_completed", "tool_requested", "tool_completed"
    }  # fmt: skip
    non_ascii = 0
    for event in events:
        wire = event.to_wire()
        data = ledger._FLOOR_ENCODE(wire).encode("utf-8")
        assert data == rfc8785.dumps(wire) == canonical_bytes(event), event.kind
        non_ascii += any(b >= 0x80 for b in data)
    assert non_ascii > 100  # the workload's text exercises ensure_ascii=False


def test_the_floor_encoder_is_the_standard_library_s(ledger: ModuleType) -> None:
    encoder = ledger._FLOOR_ENCODE.__self__
    assert type(encoder) is __import__("json").JSONEncoder
    assert (encoder.sort_keys, encoder.ensure_ascii, encoder.item_separator, encoder.key_separator) == (
        True, False, ",", ":"
    )  # fmt: skip


def test_the_same_work_floor_writes_the_bytes_flightlog_stores(ledger: ModuleType, tmp_path: Path) -> None:
    import sqlite3

    workload = ledger.Workload(7)
    events = [workload.run_started(), *workload.events(39)]  # ends on a tool request
    writer = ledger.SameWorkWriter(tmp_path / "same.db", "NORMAL")
    try:
        for block in (events[:1], events[1:11], events[11:]):
            writer.write([e.to_wire() for e in block])
    finally:
        writer.close()
    conn = sqlite3.connect(tmp_path / "same.db")
    try:
        stored = [bytes(b) for (b,) in conn.execute("SELECT event FROM events ORDER BY seq")]
        state = conn.execute("SELECT state FROM runs").fetchone()[0]
    finally:
        conn.close()
    assert stored == [canonical_bytes(e) for e in events]
    assert state == "waiting_tool"  # the fold read the wire values: a call requested, not answered
