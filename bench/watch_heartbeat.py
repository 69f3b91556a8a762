"""``flightlog watch`` following many sessions: what its polls and heartbeats cost.

Run ``.venv/bin/python bench/watch_heartbeat.py [--sessions 200,1000] [--window 20] [--src DIR]``.

For each count N, N Claude Code transcripts are written under a fresh temporary folder: the first 10 lines
of ``tests/data/samples/claude-code/spotter_tool_heavy.jsonl`` (a turn in progress), each under its own
session id. A real ``flightlog watch FOLDER`` process (``python -m flightlog``, polling every 0.25 s, the
default) follows the folder, on a fresh SQLite store (WAL, ``synchronous=FULL``: every commit fsynced),
twice:

* ``followed``: the files were written just now, so the watch follows every session live: one live record
  each, heartbeated every ``HEARTBEAT_S`` (5 s);
* ``polled``: the same files, their times set older than ``RECENT_S``: imported, not followed (no live
  record, no heartbeat): what polling N files costs alone.

Once the watch has imported every file (and, followed, published every live record), the script lets one
heartbeat pass, then reads ``/proc/PID/stat`` (user + system CPU) and ``/proc/PID/io`` (write syscalls,
bytes sent to storage) at the start and end of a ``--window`` seconds wide window (20 s: four heartbeat
rounds). Printed per side: CPU % of one core, write syscalls/s, KiB written/s; and the heartbeats' share,
followed minus polled. Then, in this process: the time of one heartbeat round
(:meth:`flightlog.importers.watch.Watcher.heartbeat`) over N followed sessions, median of ``--ticks``.

Linux only (``/proc``). ``--src DIR`` measures another flightlog tree (refused, naming DIR, when it holds
no ``flightlog`` package). Nothing asserts on timings; a shared machine moves CPU % with its neighbours'
load (``/proc/loadavg`` is printed with each row).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from _tree import ROOT, measured_tree  # bench/ is sys.path[0] when a script runs

SRC = measured_tree(sys.argv[1:])  # --src DIR (checked: a path without flightlog is refused)
sys.path.insert(0, str(SRC))

from flightlog.importers.watch import HEARTBEAT_S, RECENT_S, Watcher  # noqa: E402
from flightlog.store import SqliteStore  # noqa: E402

SAMPLE = ROOT / "tests" / "data" / "samples" / "claude-code" / "spotter_tool_heavy.jsonl"
SAMPLE_ID = "d6e0bada-1959-4eec-a9d2-0bfade768d8f"
LINES = 10
"""Lines of the sample each transcript holds: its first turn, in progress (the watch publishes it
``running``)."""
TIMEOUT_S = 600.0
"""The longest the script waits for a watch to import every file."""


@dataclass(frozen=True)
class Sample:
    """``/proc`` counters of a process at one moment."""

    at: float
    cpu_s: float
    syscw: int
    write_bytes: int


def write_transcripts(folder: Path, count: int, *, old: bool) -> None:
    """``count`` transcripts under ``folder`` (a sub-folder, as Claude Code's ``projects/<dir>``); with
    ``old``, their times set ``RECENT_S`` + 1 h back."""
    head = b"".join(SAMPLE.read_bytes().splitlines(keepends=True)[:LINES])
    project = folder / "-home-dev-bench"
    project.mkdir(parents=True)
    back = time.time() - RECENT_S - 3600
    for number in range(count):
        session = f"{number:08x}-1959-4eec-a9d2-0bfade768d8f"
        path = project / f"{session}.jsonl"
        path.write_bytes(head.replace(SAMPLE_ID.encode(), session.encode()))
        if old:
            os.utime(path, (back, back))


def proc_sample(pid: int) -> Sample:
    """The process's CPU seconds (user + system), write syscalls and bytes written, now."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    io = dict(line.split(": ") for line in Path(f"/proc/{pid}/io").read_text().splitlines())
    cpu = (int(fields[11]) + int(fields[12])) / ticks  # utime, stime: fields 14 and 15 of stat(5)
    return Sample(time.monotonic(), cpu, int(io["syscw"]), int(io["write_bytes"]))


def counts(db: Path) -> tuple[int, int]:
    """(imported sessions, live records) in the store now; (0, 0) before the watch created it."""
    if not db.exists():
        return 0, 0
    try:
        with SqliteStore(db, read_only=True) as store:
            imported = sum(1 for s in store.list_sessions() if s.source.startswith("import:"))
            return imported, len(store.live_runs())
    except Exception:  # the watch is creating the schema: read again at the next look
        return 0, 0


def measure(folder: Path, count: int, *, followed: bool, window_s: float) -> dict[str, float]:
    """One side: a watch process over ``folder``'s ``count`` transcripts, sampled over ``window_s``."""
    db, env = folder / "db.sqlite", {**os.environ, "PYTHONPATH": str(SRC), "PYTHONUNBUFFERED": "1"}
    env.update(FLIGHTLOG_KEY_DIR=str(folder / "keys"), FLIGHTLOG_HEAD_DIR=str(folder / "heads"))
    command = [sys.executable, "-m", "flightlog", "--db", str(db), "watch", str(folder / "projects")]
    with (folder / "watch.log").open("wb") as log:
        proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + TIMEOUT_S
        want = (count, count if followed else 0)
        while counts(db) != want:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"watch of {count} files: {counts(db)} (imported, live), not {want}")
            time.sleep(0.5)
        time.sleep(HEARTBEAT_S + 1)  # steady state: the imports done, one heartbeat round passed
        start = proc_sample(proc.pid)
        time.sleep(window_s)
        end = proc_sample(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=TIMEOUT_S)
    wall = end.at - start.at
    return {
        "cpu_pct": 100 * (end.cpu_s - start.cpu_s) / wall,
        "syscw_per_s": (end.syscw - start.syscw) / wall,
        "kib_per_s": (end.write_bytes - start.write_bytes) / 1024 / wall,
    }


def tick_ms(folder: Path, count: int, ticks: int) -> float | None:
    """Median ms of one :meth:`Watcher.heartbeat` round over ``count`` followed sessions (None: the tree
    measured has no such method)."""
    write_transcripts(folder / "projects", count, old=False)
    with SqliteStore(folder / "db.sqlite") as store:
        watcher = Watcher(store, [folder / "projects"])
        watcher.poll()
        beat = getattr(watcher, "heartbeat", None)
        if beat is None:
            return None
        times = []
        for _ in range(ticks):
            started = time.perf_counter()
            beat()
            times.append((time.perf_counter() - started) * 1000)
        watcher.release()
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", default="200,1000", help="comma-separated session counts")
    parser.add_argument("--window", type=float, default=20.0, help="seconds sampled per side")
    parser.add_argument("--ticks", type=int, default=5, help="heartbeat rounds timed in process")
    parser.add_argument("--json", action="store_true", help="one JSON object per count on stdout")
    parser.add_argument("--src", type=Path, default=SRC, help="flightlog source tree to measure (this one)")
    args = parser.parse_args()
    for count in (int(n) for n in args.sessions.split(",")):
        row: dict[str, object] = {"sessions": count}
        for side, followed in (("followed", True), ("polled", False)):
            with tempfile.TemporaryDirectory(prefix="flightlog-watch-bench-") as tmp:
                write_transcripts(Path(tmp) / "projects", count, old=not followed)
                row[side] = measure(Path(tmp), count, followed=followed, window_s=args.window)
        with tempfile.TemporaryDirectory(prefix="flightlog-watch-bench-") as tmp:
            row["tick_ms"] = tick_ms(Path(tmp), count, args.ticks)
        row["loadavg"] = Path("/proc/loadavg").read_text().split()[0]
        print(json.dumps(row) if args.json else render(row), flush=True)


def render(row: dict[str, object]) -> str:
    """One count's lines: each side's figures, then the heartbeats' share and the in-process tick."""
    lines = [f"{row['sessions']} sessions (load {row['loadavg']}):"]
    sides = {side: row[side] for side in ("followed", "polled")}
    for side, figures in sides.items():
        assert isinstance(figures, dict)
        lines.append(
            f"  {side:9} CPU {figures['cpu_pct']:5.1f} %  write syscalls {figures['syscw_per_s']:7.1f}/s"
            f"  written {figures['kib_per_s']:8.1f} KiB/s"
        )
    followed, polled = sides["followed"], sides["polled"]
    assert isinstance(followed, dict) and isinstance(polled, dict)
    lines.append(
        f"  heartbeats CPU {followed['cpu_pct'] - polled['cpu_pct']:+5.1f} %  write syscalls "
        f"{followed['syscw_per_s'] - polled['syscw_per_s']:+7.1f}/s  written "
        f"{followed['kib_per_s'] - polled['kib_per_s']:+8.1f} KiB/s"
    )
    tick = row["tick_ms"]
    lines.append(f"  one heartbeat round: {'-' if tick is None else f'{tick:.1f} ms'}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
