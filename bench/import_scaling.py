"""Claude Code import scaling: is importing a transcript linear in its size?

Run ``.venv/bin/python bench/import_scaling.py [--mb 12.5] [--factors 1,2,4] [--profile]``.

``--json [--quick]`` prints the issue-19 rows instead (bench/all.py's schema): the import of a 50 MB
transcript (``--quick``: 12.5 MB) against the issue's floor, read + ``json.loads`` + one ``INSERT`` of the
line per line in one transaction (SQLite, WAL, ``synchronous=FULL``, as the store), and against the
*same-work* floor: the same read and ``json.loads``, then, for each event flightlog records from the file
(written out beforehand and decoded before the clock starts), its canonical JSON encoding, the chain hash
and RFC 9162 leaf hash, and one ``INSERT`` of the row in one transaction (weaker than the work: no
mapping, projection, session rows or module loading); and against the *mapped* same-work floor
(``bench/_claude_floor.py``): from the first byte read, in plain stdlib, the mapping of the file's Claude
Code records to the same events, their canonical bytes, chain, leaf and tree hashes, one ``INSERT`` each,
and the session, runs and imports rows. Its database is compared with flightlog's off the clock (every
event's bytes, hashes and time, heads, runs snapshots; each round's heads again): where they differ, or
the file holds a record it does not map, its row is refused on stderr, naming the first differing seq.
Printed besides: each side's peak RSS; and s/MB at that size against a quarter of it (linearity).
Every import runs in a fresh subprocess (its own peak RSS), the sides alternating over ``--rounds``.
``--src DIR`` measures another flightlog tree with this harness (before/after comparisons).

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

import _claude_floor  # bench/ is sys.path[0] when a script runs
from _tree import measured_tree

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"

SRC = measured_tree(sys.argv[1:])  # --src DIR (checked: a path without flightlog is refused)
sys.path.insert(0, str(SRC))  # measure this checkout (or --src), installed or not

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
import hashlib, json, resource, sqlite3, struct, sys, time
sys.path.insert(0, sys.argv[4])
sys.path.insert(0, sys.argv[6])  # bench/ (the mapped floor's module, imported on the clock)
side, transcript, db, _, events_file = sys.argv[1:6]
heads = None
if side == "same":
    # the events flightlog records for this transcript (its canonical bytes, decoded): loaded before the
    # clock starts, as the floor is only charged for encoding, hashing and writing them
    with open(events_file, "rb") as fh:
        events = [json.loads(line) for line in fh]
start, cpu = time.perf_counter(), time.process_time()
imported = 0.0
if side == "flightlog":
    from flightlog.importers import claude_code, import_file
    from flightlog.store import SqliteStore
    imported = time.perf_counter() - start
    store = SqliteStore(db)
    from pathlib import Path
    import_file(store, Path(transcript), format=claude_code.FORMAT)
    store.close()
elif side == "mapped":  # the same work from the file: bench/_claude_floor.py
    from pathlib import Path
    import _claude_floor
    heads = _claude_floor.import_transcript(Path(transcript), Path(db))
else:
    con = sqlite3.connect(db, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=FULL")
    if side == "floor":
        con.execute("CREATE TABLE lines (n INTEGER PRIMARY KEY, line BLOB NOT NULL)")
        con.execute("BEGIN")
        with open(transcript, "rb") as fh:
            for n, line in enumerate(fh):
                json.loads(line)
                con.execute("INSERT INTO lines VALUES (?, ?)", (n, line))
    else:  # same: the least work any importer recording the same ledger must do
        con.execute(
            "CREATE TABLE events (seq INTEGER PRIMARY KEY, kind TEXT NOT NULL, event BLOB NOT NULL,"
            " prev_hash TEXT NOT NULL, hash TEXT NOT NULL, leaf BLOB NOT NULL)"
        )
        con.execute("BEGIN")
        with open(transcript, "rb") as fh:
            for line in fh:
                json.loads(line)
        encode = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode
        u64, prev, sha256 = struct.Struct("<Q").pack, "GENESIS", hashlib.sha256
        for seq, event in enumerate(events):
            data = encode(event).encode("utf-8")  # RFC 8785 for these events (tests pin the equality)
            h = sha256(prev.encode("ascii"))
            h.update(u64(seq))
            h.update(data)
            digest = h.hexdigest()
            leaf = sha256(b"\\x00" + data).digest()
            con.execute("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?)", (seq, event["kind"], data, prev, digest, leaf))
            prev = digest
    con.execute("COMMIT")
    con.close()
seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
try:  # VmHWM: this process's own peak (ru_maxrss keeps the parent's across exec on Linux)
    with open("/proc/self/status") as fh:
        rss_mb = int(next(l for l in fh if l.startswith("VmHWM:")).split()[1]) / 1024
except OSError:
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": seconds, "cpu_s": cpu, "rss_mb": rss_mb, "import_s": imported, "heads": heads}))
"""


_EVENTS_WORKER = """
import json, sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from flightlog.importers import claude_code, import_file
from flightlog.store import SqliteStore
transcript, db, out = sys.argv[2:5]
store = SqliteStore(db)
import_file(store, Path(transcript), format=claude_code.FORMAT)
encode = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode
same, count = True, 0
with open(out, "wb") as handle:
    for record in store.list_sessions():
        for row in store.read_events(record.session_id):
            handle.write(row.event_bytes + b"\\n")
            same = same and encode(json.loads(row.event_bytes)).encode("utf-8") == row.event_bytes
            count += 1
store.close()
print(json.dumps([count, same]))
"""


def write_events(transcript: Path, workdir: Path, out: Path) -> tuple[int, bool, str | None]:
    """Write, one JSON line each, the events a flightlog import of ``transcript`` records (every session),
    in a subprocess (the workers' peak RSS must not inherit this process's); return their count, whether
    the floor's stdlib encoding gives each one's stored bytes, and where the mapped floor's database
    (``bench/_claude_floor.py``, run here, off the clock) differs from flightlog's (None: nowhere)."""
    db = workdir / "events.db"
    done = subprocess.run(
        [sys.executable, "-c", _EVENTS_WORKER, str(SRC), str(transcript), str(db), str(out)],
        check=True,
        capture_output=True,
        text=True,
    )
    mapped = workdir / "mapped-check.db"
    try:
        _claude_floor.import_transcript(transcript, mapped)
        difference = _claude_floor.first_difference(mapped, db)
    except _claude_floor.NotHandled as exc:
        difference = f"the mapped floor does not handle this file: {exc}"
    if difference is None:
        REFERENCE_HEADS[transcript] = [list(head) for head in _claude_floor.heads(db)]
    for leftover in [*workdir.glob("events.db*"), *workdir.glob("mapped-check.db*")]:
        leftover.unlink()
    count, same = json.loads(done.stdout.strip().splitlines()[-1])
    return int(count), bool(same), difference


REFERENCE_HEADS: dict[Path, list[list[Any]]] = {}
"""Each checked transcript's session heads as flightlog recorded them (a mapped run must give the same)."""


def run_side(side: str, transcript: Path, workdir: Path, events: Path | None = None) -> dict[str, float]:
    """One import (``flightlog``, ``floor`` or ``same``: see the module docs) in a fresh process: seconds
    and peak RSS (MB)."""
    db = workdir / f"{side}-{time.monotonic_ns()}.db"
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            _WORKER,
            side,
            str(transcript),
            str(db),
            str(SRC),
            str(events or ""),
            str(BENCH),
        ],
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
        events_file = workdir / "events.jsonl"
        n_events, stdlib_is_jcs, refused = write_events(big, workdir, events_file)
        if refused is not None:
            print(f"  the mapped same-work floor's row is refused: {refused}", file=sys.stderr, flush=True)
        names = ("flightlog", "floor", "same") + (("mapped",) if refused is None else ())
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
        quarter: list[float] = []
        for n in range(rounds):
            for side in names if n % 2 == 0 else names[::-1]:
                runs[side].append(run_side(side, big, workdir, events_file))
            quarter.append(run_side("flightlog", small, workdir)["seconds"])
            if refused is None and runs["mapped"][-1]["heads"] != REFERENCE_HEADS[big]:
                refused = f"round {n + 1}: its session heads differ from flightlog's"
                print(
                    f"  the mapped same-work floor's row is refused: {refused}", file=sys.stderr, flush=True
                )
            print(
                f"  round {n + 1}: "
                + ", ".join(f"{side} {runs[side][-1]['seconds']:.2f} s" for side in names)
                + f", {small_size:.1f} MB {quarter[-1]:.2f} s",
                file=sys.stderr,
                flush=True,
            )
    ours, floor, same = runs["flightlog"], runs["floor"], runs["same"]
    seconds, floor_s = _median([o["seconds"] for o in ours]), _median([f["seconds"] for f in floor])
    same_s = _median([f["seconds"] for f in same])
    compared: list[tuple[str, list[dict[str, Any]], float, float | None, str]] = [
        (
            "read + json.loads + one INSERT per line",
            floor,
            floor_s,
            0.5,
            "ratio = floor time / flightlog time; SQLite WAL synchronous=FULL, one transaction; flightlog's "
            f"time includes importing its modules ({_median([o['import_s'] for o in ours]):.2f} s)",
        ),
        (
            "the same work done raw (read + json.loads + canonical encoding + chain and leaf hash + one "
            "INSERT per event)",
            same,
            same_s,
            None,
            f"same-work floor: the {n_events:,} events flightlog records (decoded before the clock starts) "
            f"encoded with the stdlib's sorted compact encoder (RFC 8785 bytes for these events: "
            f"{'checked equal' if stdlib_is_jcs else 'NOT equal, ratio understated'}), sha256 chain hash + "
            "RFC 9162 leaf hash each, one INSERT each, one transaction, WAL FULL; no mapping, projection, "
            "session rows or module loading (weaker than the work)",
        ),
    ]
    if refused is None:
        mapped = runs["mapped"]
        over_floor = [f["seconds"] / m["seconds"] for m, f in zip(mapped, floor, strict=True)]
        over_floor_cpu = [f["cpu_s"] / m["cpu_s"] for m, f in zip(mapped, floor, strict=True)]
        compared.append(
            (
                "the same work from the file (bench/_claude_floor.py: read + json.loads + the mapping to "
                "the same events + canonical encoding + chain, leaf and tree hashes + one INSERT per event "
                "+ session, runs and imports rows)",
                mapped,
                _median([m["seconds"] for m in mapped]),
                None,
                "same-work floor from the first byte read, plain stdlib, in a fresh process: every event's "
                "bytes, hashes and time, each session's head and tree root and each runs snapshot checked "
                "equal to flightlog's (off the clock; each round's heads too); it does less than a general "
                "importer (no per-value checks), so it bounds from below; this floor over the issue's floor: "
                f"{_median(over_floor):.3f}x ({min(over_floor):.3f}-{max(over_floor):.3f}), CPU "
                f"{_median(over_floor_cpu):.3f}x ({min(over_floor_cpu):.3f}-{max(over_floor_cpu):.3f})",
            )
        )
    for label, sides, median_s, target, detail in compared:
        ratios = [f["seconds"] / o["seconds"] for o, f in zip(ours, sides, strict=True)]
        ratio = _median(ratios)
        cpu = _median([f["cpu_s"] / o["cpu_s"] for o, f in zip(ours, sides, strict=True)])
        detail += (
            f"; CPU time (less moved by a loaded machine): flightlog {_median([o['cpu_s'] for o in ours]):.2f} s,"
            f" floor {_median([f['cpu_s'] for f in sides]):.2f} s, ratio {cpu:.3f}"
        )
        rows.append(
            {
                "path": f"import of a {size:.0f} MB Claude Code transcript vs {label}",
                "flightlog": f"{seconds:.2f} s ({size / seconds:.1f} MB/s)",
                "floor": f"{median_s:.2f} s ({size / median_s:.1f} MB/s)",
                "ratio": round(ratio, 3),
                "spread": [round(min(ratios), 3), round(max(ratios), 3)],
                "target": f">= {target}x" if target is not None else "",
                "met": ratio >= target if target is not None else None,
                "detail": detail,
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
            "detail": "peak RSS (VmHWM; ru_maxrss off Linux) of a fresh process running the import (interpreter "
            "and imports included)",
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
    parser.add_argument("--src", type=Path, default=SRC, help="flightlog source tree to measure (this one)")
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
