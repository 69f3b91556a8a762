"""The ledgers an import records, pinned byte for byte (issue 19: the import path was sped up by recording
the importer's spooled canonical bytes instead of decoding and re-encoding every event; the ledger bytes for
a given input must not move).

Every sample of ``tests/data/samples`` (each format), imported whole; the growing formats' samples also
imported in three steps (incremental appends, :func:`check_prefix` against the spool) and with ``seal``;
a Claude Code project with a sub-agent file; a resume copy; and hostile edits of a Claude Code sample
(invalid UTF-8, a NUL run, an escaped lone surrogate, a torn line kept byte-exact, an integer beyond
2**53, a float). Each recorded session's seq count, chain head hash (it covers every row's bytes, seq and
order: seed 003's chain rule) and tree head are compared with ``tests/data/import_pins.json``, computed by
the importer before that change (main at 055584a). Claude Code and Codex rows also pin their
``recorded_at_ms`` (the source's times). After each case the ``runs`` projection equals a rebuild.

``FLIGHTLOG_REGEN_IMPORT_PINS=1`` rewrites the file (only when the ledger format is meant to change).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from flightlog.errors import ImportFormatError
from flightlog.importers import import_file
from flightlog.runs import rebuild_projection
from flightlog.store import SqliteStore
from flightlog.store.base import RunRow, Store

SAMPLES = Path(__file__).parent / "data" / "samples"
PINS = Path(__file__).parent / "data" / "import_pins.json"
REGEN = os.environ.get("FLIGHTLOG_REGEN_IMPORT_PINS") == "1"
CLAUDE = sorted((SAMPLES / "claude-code").glob("*.jsonl"))
GROWING = [*CLAUDE, *sorted((SAMPLES / "codex").glob("*.jsonl"))]
_FILES = sorted(
    p
    for p in SAMPLES.rglob("*")
    if p.is_file()
    and p.suffix in (".jsonl", ".json", ".traj", ".md")
    and p.name != "PROVENANCE.md"
    and "openhands-v1" not in p.parts
)
WHOLE = [*_FILES, next((SAMPLES / "openhands-v1").iterdir())]


def ledgers(store: Store) -> dict[str, dict[str, Any]]:
    """Per session: events, head hash, tree head, and (source times) a digest of the rows' times."""
    out: dict[str, dict[str, Any]] = {}
    for record in store.list_sessions():
        pin: dict[str, Any] = {"events": record.events, "head": record.head_hash, "root": record.merkle_root}
        if record.metadata.get("source_times"):
            times = [row.recorded_at_ms for row in store.read_events(record.session_id)]
            pin["times"] = hashlib.sha256(json.dumps(times).encode()).hexdigest()
        out[record.session_id] = pin
    return out


def projection_is_a_rebuild(store: Store) -> None:
    def rows() -> dict[str, RunRow]:
        return store.get_run_rows([listing.run_id for listing in store.query_runs()])

    incremental = rows()
    rebuild_projection(store)
    assert rows() == incremental


def case_id(path: Path) -> str:
    return str(path.relative_to(SAMPLES))


def run_case(tmp_path: Path, steps: list[Callable[[SqliteStore], object]]) -> dict[str, dict[str, Any]]:
    with SqliteStore(tmp_path / "db.sqlite") as store:
        for step in steps:
            step(store)
            projection_is_a_rebuild(store)
        return ledgers(store)


def hostile(data: bytes) -> bytes:
    """A Claude Code transcript edited with what the reader must survive (see the module docstring)."""
    lines = data.split(b"\n")
    record = json.loads(lines[5])
    record["extra"] = {"lone": "\ud800 x", "big": 2**60, "neg": -(2**55), "ratio": 0.1, "exp": 1e300}
    lines[5] = json.dumps(record).encode()
    text_line = next(i for i, line in enumerate(lines) if i != 5 and b'"text":' in line)
    lines[text_line] = lines[text_line].replace(b'"text": "', b'"text": "bad\xff\xfe byte ', 1)
    lines[text_line] = lines[text_line].replace(b'"text":"', b'"text":"bad\xff\xfe byte ', 1)
    lines.insert(3, b"\x00" * 64 + lines[3])
    lines.insert(8, lines[7][: len(lines[7]) // 2])  # a torn line in the middle
    lines.insert(10, b"[1, 2, 3]")  # JSON, but not an object
    return b"\n".join(lines)


def refused_or(call: Callable[[], object]) -> object:
    """``call()``, or the reason it was refused (a sample that is not a transcript of its own: also pinned)."""
    try:
        return call()
    except ImportFormatError as exc:
        return exc.reason


def steps_for(kind: str, source: Path, tmp_path: Path) -> list[Callable[[SqliteStore], object]]:
    """The import calls of a case (they all import ``tmp_path / <name>``)."""
    if kind == "whole":
        return [lambda s: refused_or(lambda: import_file(s, source))]
    if kind == "seal":
        return [lambda s: import_file(s, source, seal=True)]
    target = tmp_path / source.name
    data = source.read_bytes()
    if kind == "hostile":
        target.write_bytes(hostile(data))
        return [lambda s: import_file(s, target)]
    ends = [i + 1 for i, byte in enumerate(data) if byte == 0x0A]
    cuts = [ends[len(ends) // 3], ends[2 * len(ends) // 3], len(data)]

    def grow(cut: int) -> Callable[[SqliteStore], object]:
        def step(store: SqliteStore) -> object:
            target.write_bytes(data[:cut])
            return import_file(store, target, format=source.parent.name)

        return step

    return [grow(cut) for cut in cuts]


CASES = (
    [("whole", p) for p in WHOLE]
    + [("grow", p) for p in GROWING]
    + [("seal", p) for p in CLAUDE]
    + [("hostile", p) for p in CLAUDE]
)


def load_pins() -> dict[str, Any]:
    return json.loads(PINS.read_text()) if PINS.exists() else {}


def check(key: str, got: dict[str, dict[str, Any]]) -> None:
    if REGEN:
        pins = load_pins()
        pins[key] = got
        PINS.write_text(json.dumps(pins, indent=1, sort_keys=True) + "\n")
        return
    assert got == load_pins()[key], key


@pytest.mark.parametrize(("kind", "source"), CASES, ids=[f"{k}:{case_id(p)}" for k, p in CASES])
def test_an_import_records_the_pinned_ledger(tmp_path: Path, kind: str, source: Path) -> None:
    check(f"{kind}:{case_id(source)}", run_case(tmp_path, steps_for(kind, source, tmp_path)))


def test_a_subagent_project_and_a_resume_copy_record_the_pinned_ledgers(tmp_path: Path) -> None:
    """A parent transcript with a sub-agent file beside it (two sessions in one import), then a resume
    copy of the parent (a new ``sessionId`` whose first records copy it) in the same store."""
    parent = tmp_path / "project" / "p-session.jsonl"
    parent.parent.mkdir()
    shutil.copy(SAMPLES / "claude-code" / "spotter_subagent_parent.jsonl", parent)
    folder = parent.with_suffix("") / "subagents"
    folder.mkdir(parents=True)
    sub = [
        json.loads(line)
        for line in (SAMPLES / "claude-code" / "spotter_short.jsonl").read_text().splitlines()
    ]
    folder.joinpath("agent-ag1.jsonl").write_text(
        "".join(json.dumps({**r, "isSidechain": True, "agentId": "ag1"}) + "\n" for r in sub)
    )
    rows = [json.loads(line) for line in parent.read_text().splitlines() if line.strip()]
    copy = tmp_path / "project" / "zz-resumed.jsonl"
    copy.write_text(
        "".join(json.dumps({**r, "sessionId": "zz-resumed"} if "sessionId" in r else r) + "\n" for r in rows)
        + json.dumps(
            {
                "type": "user",
                "uuid": "zz-u1",
                "parentUuid": rows[-1].get("uuid"),
                "sessionId": "zz-resumed",
                "timestamp": "2030-01-01T00:00:00.000Z",
                "message": {"role": "user", "content": "and now?"},
            }
        )
        + "\n"
    )
    got = run_case(tmp_path, [lambda s: import_file(s, parent), lambda s: import_file(s, copy)])
    assert len(got) >= 3
    check("project:subagent+resume", got)
