"""Claude Code import scaling: is importing a transcript linear in its size?

Run ``python bench/import_scaling.py [--mb 12.5] [--factors 1,2,4] [--profile]``.

The transcript is synthetic but real-shaped: the records of ``tests/data/samples/claude-code/
spotter_tool_heavy.jsonl`` (tool calls, tool results, interrupts) repeated until the file reaches the
size, every ``uuid``/``parentUuid``/``message.id``/``tool_use`` id renamed per copy so each copy is a fresh
stretch of the same session. Each size is imported into a fresh SQLite store with ``import_file`` (the
CLI's ``flightlog import`` path). Printed: seconds, MB/s and ``s/MB relative to the smallest size``: a
linear importer keeps that ratio near 1.0 whatever the size; a quadratic one doubles it with each doubling.
Nothing asserts on timings.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from flightlog.importers import claude_code, import_file  # noqa: E402
from flightlog.store import SqliteStore  # noqa: E402

SAMPLE = ROOT / "tests" / "data" / "samples" / "claude-code" / "spotter_tool_heavy.jsonl"
_ID_KEYS = frozenset({"uuid", "parentUuid", "id", "tool_use_id", "leafUuid", "promptId", "requestId"})


def _rename(value: Any, suffix: str) -> Any:
    """``value`` with every id-like string field suffixed (a fresh copy of the same records)."""
    if isinstance(value, dict):
        return {
            key: (f"{item}-{suffix}" if key in _ID_KEYS and isinstance(item, str) else _rename(item, suffix))
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_rename(item, suffix) for item in value]
    return value


def write_transcript(path: Path, target_bytes: int) -> int:
    """Write ``path`` of at least ``target_bytes`` by repeating the sample's records; return its size (bytes)."""
    records = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]
    size = 0
    copy = 0
    with path.open("w", encoding="utf-8") as handle:
        while size < target_bytes:
            for record in records:
                line = json.dumps(_rename(record, f"c{copy}"), ensure_ascii=False) + "\n"
                handle.write(line)
                size += len(line.encode("utf-8"))
            copy += 1
    return size


def time_import(transcript: Path, workdir: Path, profile: bool) -> float:
    """Seconds to import ``transcript`` into a fresh store."""
    store = SqliteStore(workdir / f"{transcript.stem}.db")
    try:
        profiler = cProfile.Profile() if profile else None
        start = time.perf_counter()
        if profiler is not None:
            profiler.enable()
        import_file(store, transcript, format=claude_code.FORMAT)
        if profiler is not None:
            profiler.disable()
        seconds = time.perf_counter() - start
    finally:
        store.close()
    if profiler is not None:
        print(f"\n-- profile of {transcript.name} (top 15 by cumulative time) --", file=sys.stderr)
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(15)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=12.5, help="smallest transcript size (MB)")
    parser.add_argument("--factors", default="1,2,4", help="size multiples of --mb to import")
    parser.add_argument("--profile", action="store_true", help="cProfile each import (stderr)")
    args = parser.parse_args()
    factors = [float(item) for item in args.factors.split(",")]
    with tempfile.TemporaryDirectory(prefix="flightlog-bench-import-") as tmp:
        workdir = Path(tmp)
        base: float | None = None
        print(f"{'MB':>8} {'seconds':>9} {'MB/s':>7} {'s/MB vs smallest':>17}")
        for factor in factors:
            transcript = workdir / f"cc-{factor:g}.jsonl"
            size = write_transcript(transcript, int(args.mb * factor * 1_000_000))
            seconds = time_import(transcript, workdir, args.profile)
            megabytes = size / 1_000_000
            per_mb = seconds / megabytes
            base = base if base is not None else per_mb
            print(f"{megabytes:8.1f} {seconds:9.2f} {megabytes / seconds:7.1f} {per_mb / base:16.2f}x")
            transcript.unlink()


if __name__ == "__main__":
    main()
