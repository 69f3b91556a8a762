"""bench/ledger.py's same-work append floor encodes with the standard library, not the measured tree's
encoder, and its bytes are RFC 8785's (what flightlog stores) on the benchmark's workload: so the floor does
the same work, and a tree's encoding gains are not credited to its floor too. Its I/O per commit (counted with
strace, so independent of the disk's speed) is flightlog's: the same syncs, WAL frames and bytes."""

from __future__ import annotations

import importlib
import shutil
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


# ── bench/_claude_floor.py: the Claude Code import's same-work floor (bench/import_scaling.py) ──

SAMPLE = Path(__file__).resolve().parent / "data" / "samples" / "claude-code" / "spotter_tool_heavy.jsonl"


@pytest.fixture(scope="module")
def claude_floor() -> ModuleType:
    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module("_claude_floor")
    finally:
        sys.path.remove(str(BENCH))


def _flightlog_import(transcript: Path, db: Path) -> None:
    from flightlog.importers import claude_code, import_file
    from flightlog.store import SqliteStore

    store = SqliteStore(db)
    try:
        import_file(store, transcript, format=claude_code.FORMAT)
    finally:
        store.close()


def test_the_mapped_floor_records_what_flightlog_records(claude_floor: ModuleType, tmp_path: Path) -> None:
    import sqlite3

    _flightlog_import(SAMPLE, tmp_path / "flightlog.db")
    heads = claude_floor.import_transcript(SAMPLE, tmp_path / "floor.db")
    assert claude_floor.first_difference(tmp_path / "floor.db", tmp_path / "flightlog.db") is None
    assert [list(h) for h in heads] == [list(h) for h in claude_floor.heads(tmp_path / "flightlog.db")]
    conn = sqlite3.connect(tmp_path / "floor.db")
    try:
        kinds = {kind for (kind,) in conn.execute("SELECT DISTINCT kind FROM events")}
        sessions = conn.execute("SELECT count(*) FROM sessions").fetchone()[0]
    finally:
        conn.close()
    assert kinds == {
        "custom", "run_started", "llm_completed", "tool_requested", "tool_completed", "operation_cancelled",
        "run_terminal",
    }  # fmt: skip
    assert sessions == 2  # the main session and its background task's


def test_the_check_names_the_first_differing_seq(claude_floor: ModuleType, tmp_path: Path) -> None:
    import sqlite3

    _flightlog_import(SAMPLE, tmp_path / "flightlog.db")
    claude_floor.import_transcript(SAMPLE, tmp_path / "floor.db")
    conn = sqlite3.connect(tmp_path / "floor.db")
    try:
        conn.execute("UPDATE events SET event = CAST(replace(CAST(event AS TEXT), 'user', 'User') AS BLOB)"
                     " WHERE seq >= 19 AND kind = 'operation_cancelled'")  # fmt: skip
        conn.commit()
    finally:
        conn.close()
    difference = claude_floor.first_difference(tmp_path / "floor.db", tmp_path / "flightlog.db")
    assert difference is not None and "seq 19 differs (event bytes)" in difference


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ({"type": "system", "subtype": "compact_boundary", "uuid": "x1"}, "a compact boundary"),
        ({"type": "user", "isSidechain": True, "uuid": "x2", "message": {"content": "hi"}}, "a sidechain"),
        ({"type": "user", "uuid": "x3", "message": {"content": [{"type": "image"}]}}, "not text"),
    ],
)
def test_a_record_the_floor_does_not_map_raises(
    claude_floor: ModuleType, tmp_path: Path, line: dict[str, object], reason: str
) -> None:
    import json

    transcript = tmp_path / "t.jsonl"
    lines = SAMPLE.read_text(encoding="utf-8").splitlines()
    transcript.write_text("\n".join([*lines[:5], json.dumps(line), *lines[5:]]) + "\n", encoding="utf-8")
    with pytest.raises(claude_floor.NotHandled, match=f"line 6: .*{reason}"):
        claude_floor.import_transcript(transcript, tmp_path / "floor.db")
    import sqlite3

    conn = sqlite3.connect(tmp_path / "floor.db")
    try:
        assert conn.execute("SELECT count(*) FROM events").fetchone()[0] == 0  # rolled back whole
    finally:
        conn.close()


@pytest.fixture(scope="module")
def import_scaling() -> ModuleType:
    sys.path.insert(0, str(BENCH))  # import_scaling.py imports its siblings _tree and _claude_floor
    try:
        return importlib.import_module("import_scaling")
    finally:
        sys.path.remove(str(BENCH))


def test_the_bench_prints_the_mapped_floor_s_row_when_it_matches(import_scaling: ModuleType) -> None:
    rows = import_scaling.json_rows(0.05, 1)
    assert any("the same work from the file" in row["path"] for row in rows)


def test_the_bench_refuses_the_mapped_floor_s_row_when_it_differs(
    import_scaling: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(
        import_scaling._claude_floor,
        "first_difference",
        lambda *_: "claude-code:s: seq 3 differs (event bytes)",
    )
    rows = import_scaling.json_rows(0.05, 1)
    assert not any("the same work from the file" in row["path"] for row in rows)
    assert "row is refused: claude-code:s: seq 3 differs (event bytes)" in capsys.readouterr().err


# ── bench/ledger.py: I/O per commit of the append rows, counted with strace ──

STRACE_LOG = """\
901 openat(AT_FDCWD</w>, "/w/io.db-wal", O_RDWR|O_CREAT) = 5</w/io.db-wal>
901 pwrite64(5</w/io.db-wal>, "\\0\\0"..., 4096, 4152) = 4096
901 openat(AT_FDCWD</w>, "/nonexistent/flightlog-bench-io-mark-begin", O_RDONLY|O_CLOEXEC) = -1 ENOENT (No such file or directory)
901 pwrite64(5</w/io.db-wal>, "7\\177\\6\\202"..., 32, 0) = 32
901 pwrite64(5</w/io.db-wal>, "\\0\\0\\0\\3"..., 24, 32) = 24
901 pwrite64(5</w/io.db-wal>, "\\r\\0\\0\\0"..., 4096, 56) = 4096
901 pwrite64(5</w/io.db-wal>, "\\0\\0\\0\\1) = "..., 24, 4152) = 24
901 pwrite64(5</w/io.db-wal>, "\\r\\0\\0\\0"..., 4096, 4176) = 4096
901 fdatasync(5</w/io.db-wal>) = 0
901 --- SIGALRM {si_signo=SIGALRM, si_code=SI_KERNEL} ---
901 pwrite64(4</w/io.db>, "\\r\\0\\0\\0"..., 4096, 8192) = 4096
901 fsync(4</w/io.db>) = 0
901 openat(AT_FDCWD</w>, "/nonexistent/flightlog-bench-io-mark-end", O_RDONLY|O_CLOEXEC) = -1 ENOENT (No such file or directory)
901 fdatasync(5</w/io.db-wal>) = 0
"""


def test_the_io_count_reads_frames_syncs_and_checkpoint_pages_between_the_marks(ledger: ModuleType) -> None:
    got = ledger.parse_strace(STRACE_LOG.splitlines(), commits=2)
    assert got == {
        "syncs": 1.0, "wal_syncs": 0.5, "wal_frames": 1.0, "wal_bytes": (32 + 2 * 24 + 2 * 4096) / 2,
        "db_writes": 0.5, "db_bytes": 2048.0,
    }  # fmt: skip
    with pytest.raises(RuntimeError, match="both I/O marks"):
        ledger.parse_strace(STRACE_LOG.splitlines()[:5], commits=2)
    broken = STRACE_LOG.replace(
        "901 fdatasync(5</w/io.db-wal>) = 0\n901 ---", "901 fdatasync(5 <unfinished ...>\n901 ---"
    )
    assert broken != STRACE_LOG
    with pytest.raises(RuntimeError, match="not understood"):
        ledger.parse_strace(broken.splitlines(), commits=2)


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_flightlog_syncs_and_writes_no_more_than_the_same_work_floor(ledger: ModuleType) -> None:
    """Counted, not timed: an append that gained a second transaction, a checkpoint or another page per
    commit would show here however fast the disk is."""
    io = ledger.io_accounting("FULL", 1, 60)
    mine, same, floor = io["flightlog"], io["same work"], io["floor"]
    assert mine["syncs"] == same["syncs"] == floor["syncs"] < 1.1
    assert (
        mine["wal_frames"] == same["wal_frames"] == floor["wal_frames"] + 2
    )  # the head and runs rows' pages
    assert mine["wal_bytes"] == same["wal_bytes"]
