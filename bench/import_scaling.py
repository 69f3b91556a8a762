"""Claude Code import scaling: is importing a transcript linear in its size?

Run ``.venv/bin/python bench/import_scaling.py [--mb 12.5] [--factors 1,2,4] [--profile]``.

``--json [--quick]`` prints the issue-19 rows instead (bench/all.py's schema): the import of a 50 MB
transcript (``--quick``: 12.5 MB) against the floor, read + ``json.loads`` + one ``INSERT`` of the line per
line in one transaction (SQLite, WAL, ``synchronous=FULL``, as the store); each side's peak RSS; and s/MB at
that size against a quarter of it (linearity). Every import runs in a fresh subprocess (its own peak RSS),
flightlog and floor alternating over ``--rounds``.

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
import subprocess
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


_WORKER = """
import json, resource, sqlite3, sys, time
sys.path.insert(0, sys.argv[4])
side, transcript, db = sys.argv[1:4]
start = time.perf_counter()
if side == "flightlog":
    from flightlog.importers import claude_code, import_file
    from flightlog.store import SqliteStore
    store = SqliteStore(db)
    from pathlib import Path
    import_file(store, Path(transcript), format=claude_code.FORMAT)
    store.close()
else:
    con = sqlite3.connect(db, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=FULL")
    con.execute("CREATE TABLE lines (n INTEGER PRIMARY KEY, line BLOB NOT NULL)")
    con.execute("BEGIN")
    with open(transcript, "rb") as fh:
        for n, line in enumerate(fh):
            json.loads(line)
            con.execute("INSERT INTO lines VALUES (?, ?)", (n, line))
    con.execute("COMMIT")
    con.close()
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run_side(side: str, transcript: Path, workdir: Path) -> dict[str, float]:
    """One import (``flightlog`` or ``floor``) in a fresh process: seconds and peak RSS (MB)."""
    db = workdir / f"{side}-{time.monotonic_ns()}.db"
    out = subprocess.run(
        [sys.executable, "-c", _WORKER, side, str(transcript), str(db), str(ROOT / "src")],
        check=True,
        capture_output=True,
        text=True,
    )
    for leftover in workdir.glob(db.name + "*"):
        leftover.unlink()
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def json_rows(mb: float, rounds: int) -> list[dict[str, Any]]:
    """The issue-19 import rows (see the module docs)."""
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="flightlog-bench-import-") as tmp:
        workdir = Path(tmp)
        big = workdir / "big.jsonl"
        small = workdir / "small.jsonl"
        size = write_transcript(big, int(mb * 1_000_000)) / 1_000_000
        small_size = write_transcript(small, int(mb * 250_000)) / 1_000_000
        ours: list[dict[str, float]] = []
        floor: list[dict[str, float]] = []
        quarter: list[float] = []
        for n in range(rounds):
            for side in ("flightlog", "floor") if n % 2 == 0 else ("floor", "flightlog"):
                (ours if side == "flightlog" else floor).append(run_side(side, big, workdir))
            quarter.append(run_side("flightlog", small, workdir)["seconds"])
            print(
                f"  round {n + 1}: flightlog {ours[-1]['seconds']:.2f} s, floor {floor[-1]['seconds']:.2f} s, "
                f"{small_size:.1f} MB {quarter[-1]:.2f} s",
                file=sys.stderr,
                flush=True,
            )
    ratios = [f["seconds"] / o["seconds"] for o, f in zip(ours, floor, strict=True)]
    ratio = _median(ratios)
    seconds, floor_s = _median([o["seconds"] for o in ours]), _median([f["seconds"] for f in floor])
    rows.append(
        {
            "path": f"import of a {size:.0f} MB Claude Code transcript vs read + json.loads + one INSERT per line",
            "flightlog": f"{seconds:.2f} s ({size / seconds:.1f} MB/s)",
            "floor": f"{floor_s:.2f} s ({size / floor_s:.1f} MB/s)",
            "ratio": round(ratio, 3),
            "spread": [round(min(ratios), 3), round(max(ratios), 3)],
            "target": ">= 0.5x",
            "met": ratio >= 0.5,
            "detail": "ratio = floor time / flightlog time; SQLite WAL synchronous=FULL, one transaction",
        }
    )
    rss = max(o["rss_mb"] for o in ours)
    rows.append(
        {
            "path": f"import peak RSS, {size:.0f} MB transcript",
            "flightlog": f"{rss:.0f} MB",
            "floor": f"{max(f['rss_mb'] for f in floor):.0f} MB (floor's process)",
            "ratio": None,
            "spread": None,
            "target": "< 100 MB",
            "met": rss < 100,
            "detail": "ru_maxrss of a fresh process running the import (interpreter and imports included)",
        }
    )
    growth = [
        (s / size) / (q / small_size) for s, q in zip((o["seconds"] for o in ours), quarter, strict=True)
    ]
    rows.append(
        {
            "path": f"import linearity, s/MB at {size:.0f} MB vs {small_size:.1f} MB",
            "flightlog": f"{_median(growth):.2f}x",
            "floor": "1.0x (linear)",
            "ratio": round(_median(growth), 3),
            "spread": [round(min(growth), 3), round(max(growth), 3)],
            "target": "linear (<= 1.25x)",
            "met": _median(growth) <= 1.25,
            "detail": "s/MB of the large import over s/MB of the quarter-size one",
        }
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--mb", type=float, default=None, help="smallest transcript size (MB; --json: the size)"
    )
    parser.add_argument("--factors", default="1,2,4", help="size multiples of --mb to import")
    parser.add_argument("--profile", action="store_true", help="cProfile each import (stderr)")
    parser.add_argument("--json", action="store_true", help="the issue-19 rows as JSON on stdout")
    parser.add_argument("--quick", action="store_true", help="--json at 12.5 MB, one round")
    parser.add_argument("--rounds", type=int, default=None, help="--json: rounds (default 2, --quick 1)")
    args = parser.parse_args()
    if args.json:
        mb = args.mb or (12.5 if args.quick else 50.0)
        rounds = args.rounds or (1 if args.quick else 2)
        print(json.dumps({"rows": json_rows(mb, rounds)}, indent=2))
        return
    args.mb = args.mb or 12.5
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
