"""``flightlog watch`` following many sessions: what its polls and heartbeats cost.

Run ``.venv/bin/python bench/watch_heartbeat.py [--sessions 200,1000] [--window 20] [--src DIR]``.

For each count N, N Claude Code transcripts are written under a fresh temporary folder: the first 10 lines
of ``tests/data/samples/claude-code/spotter_tool_heavy.jsonl`` (a turn in progress), each under its own
session id, their times set older than ``RECENT_S``. A real ``flightlog watch FOLDER`` process
(``python -m flightlog``, polling every 0.25 s, the default) follows the folder, on a fresh SQLite store
(WAL, ``synchronous=FULL``: every commit fsynced), and is measured twice:

* ``polled``: once it imported every file (old: none followed, no live record, no heartbeat): what polling
  N files costs alone;
* ``followed``: then every file grows by the sample's next line (its turn goes on), so the watch follows
  every session live: one live record each, heartbeated every ``HEARTBEAT_S`` (5 s). The watch runs with
  ``--silent-after 86400`` (a tree that has the option): by default it stops heartbeating a session
  mid-turn 30 s after its file last changed, and a grow of many files takes longer than that to import.

Each side waits one heartbeat period, then reads ``/proc/PID/stat`` (user + system CPU) and
``/proc/PID/io`` (write syscalls, bytes sent to storage) at the start and end of a ``--window`` seconds
wide window (20 s: four heartbeat rounds). Printed per side: CPU % of one core, write syscalls/s, KiB
written/s; and the heartbeats' share, followed minus polled. ``--no-watch`` skips the watch.

Then, in this process, on a fresh store holding N published live records: the time of one heartbeat
round, median of ``--ticks``, done two ways: one commit per session (``LiveRegistry.heartbeat`` each, as
``Watcher.heartbeat`` did before it batched) and one transaction (``LiveRegistry.heartbeat_many``, as it
does now; ``-`` for a tree without it). A round blocks the watch's polls while it runs.

Linux only (``/proc``). ``--src DIR`` measures another flightlog tree (refused, naming DIR, when it holds
no ``flightlog`` package). Nothing asserts on timings; a shared machine moves CPU % and fsync times with
its neighbours' load (``/proc/loadavg`` is printed with each row).
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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from _tree import ROOT, measured_tree  # bench/ is sys.path[0] when a script runs

SRC = measured_tree(sys.argv[1:])  # --src DIR (checked: a path without flightlog is refused)
sys.path.insert(0, str(SRC))

from flightlog.importers import watch as watch_module  # noqa: E402
from flightlog.importers.watch import HEARTBEAT_S, RECENT_S  # noqa: E402
from flightlog.live import LiveRegistry  # noqa: E402
from flightlog.runs.model import RunState  # noqa: E402
from flightlog.store import SqliteStore  # noqa: E402

SAMPLE = ROOT / "tests" / "data" / "samples" / "claude-code" / "spotter_tool_heavy.jsonl"
SAMPLE_ID = "d6e0bada-1959-4eec-a9d2-0bfade768d8f"
LINES = 10
"""Lines of the sample each transcript holds: its first turn, in progress (the watch publishes it
``running``)."""
TIMEOUT_S = 3600.0
"""The longest the script waits for a watch to import every file (a first poll of 1,000 files took over
20 minutes at load 10 on two cores)."""


@dataclass(frozen=True)
class Sample:
    """``/proc`` counters of a process at one moment."""

    at: float
    cpu_s: float
    syscw: int
    write_bytes: int


def write_transcripts(folder: Path, count: int) -> list[Path]:
    """``count`` transcripts under ``folder`` (a sub-folder, as Claude Code's ``projects/<dir>``), their
    times set ``RECENT_S`` + 1 h back (found at start, they are imported, not followed)."""
    head = b"".join(SAMPLE.read_bytes().splitlines(keepends=True)[:LINES])
    project = folder / "-home-dev-bench"
    project.mkdir(parents=True)
    back = time.time() - RECENT_S - 3600
    paths = []
    for number in range(count):
        session = f"{number:08x}-1959-4eec-a9d2-0bfade768d8f"
        path = project / f"{session}.jsonl"
        path.write_bytes(head.replace(SAMPLE_ID.encode(), session.encode()))
        os.utime(path, (back, back))
        paths.append(path)
    return paths


def grow(paths: list[Path]) -> None:
    """Append the sample's next line to each transcript (its turn goes on): a file that grows while
    watched is followed."""
    line = SAMPLE.read_bytes().splitlines(keepends=True)[LINES]
    for path in paths:
        session = path.stem.encode()
        with path.open("ab") as out:
            out.write(line.replace(SAMPLE_ID.encode(), session))


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


def wait_until(db: Path, proc: subprocess.Popen[bytes], count: int, *, live: bool) -> None:
    """Until the store holds ``count`` imported sessions and (``live``) as many live records, or none."""
    deadline = time.monotonic() + TIMEOUT_S
    while not ((found := counts(db))[0] >= count and (found[1] >= count if live else found[1] == 0)):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"watch of {count} files: {found} (imported, live); live wanted: {live}")
        time.sleep(0.5)


def window(proc: subprocess.Popen[bytes], window_s: float) -> dict[str, float]:
    """The process's CPU %, write syscalls/s and KiB written/s over ``window_s``, after one heartbeat
    period (steady state: the imports done, a heartbeat round passed)."""
    time.sleep(HEARTBEAT_S + 1)
    start = proc_sample(proc.pid)
    time.sleep(window_s)
    end = proc_sample(proc.pid)
    wall = end.at - start.at
    return {
        "cpu_pct": 100 * (end.cpu_s - start.cpu_s) / wall,
        "syscw_per_s": (end.syscw - start.syscw) / wall,
        "kib_per_s": (end.write_bytes - start.write_bytes) / 1024 / wall,
    }


def measure(folder: Path, count: int, window_s: float) -> dict[str, dict[str, float]]:
    """Both sides with one watch process over ``count`` transcripts: ``polled`` once it imported them
    (old: not followed), ``followed`` once each grew by a line and is followed live."""
    db, env = folder / "db.sqlite", {**os.environ, "PYTHONPATH": str(SRC), "PYTHONUNBUFFERED": "1"}
    env.update(FLIGHTLOG_KEY_DIR=str(folder / "keys"), FLIGHTLOG_HEAD_DIR=str(folder / "heads"))
    paths = write_transcripts(folder / "projects", count)
    command = [sys.executable, "-m", "flightlog", "--db", str(db), "watch", str(folder / "projects")]
    if hasattr(watch_module, "SILENT_S"):  # heartbeat every followed session however long the imports take
        command += ["--silent-after", "86400"]
    with (folder / "watch.log").open("wb") as log:
        proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_until(db, proc, count, live=False)
        polled = window(proc, window_s)
        grow(paths)
        wait_until(db, proc, count, live=True)
        followed = window(proc, window_s)
    finally:
        proc.terminate()  # ends after its current poll
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:  # mid-way through a long poll: its figures are not wanted
            proc.kill()
            proc.wait()
    return {"polled": polled, "followed": followed}


def tick_ms(folder: Path, count: int, ticks: int) -> dict[str, float]:
    """Median ms of one heartbeat round over ``count`` published live records (``ticks`` rounds each), on
    a fresh SQLite store: ``per_session``, one :meth:`LiveRegistry.heartbeat` (one commit) per record, as
    ``Watcher.heartbeat`` did before it batched; ``one_transaction``, :meth:`LiveRegistry.heartbeat_many`
    (one commit), as it does now. The records name no session (a live record needs none): the round's cost
    does not depend on what the sessions hold."""
    ids = [f"bench-{number:06d}" for number in range(count)]
    with SqliteStore(folder / "db.sqlite") as store:
        registry = LiveRegistry(store)
        for session_id in ids:
            registry.publish(session_id, RunState.RUNNING)

        def per_session() -> None:
            for session_id in ids:
                registry.heartbeat(session_id)

        rounds: dict[str, Callable[[], object]] = {"per_session": per_session}
        if hasattr(registry, "heartbeat_many"):  # a tree from before the batching (--src) has none
            rounds["one_transaction"] = lambda: registry.heartbeat_many(ids)
        times: dict[str, list[float]] = {name: [] for name in rounds}
        for _ in range(ticks):
            for name, beat in rounds.items():  # interleaved: the machine's load moves both alike
                started = time.perf_counter()
                beat()
                times[name].append((time.perf_counter() - started) * 1000)
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", default="200,1000", help="comma-separated session counts")
    parser.add_argument("--window", type=float, default=20.0, help="seconds sampled per side")
    parser.add_argument("--ticks", type=int, default=5, help="heartbeat rounds timed in process")
    parser.add_argument(
        "--no-watch", dest="watch", action="store_false", help="time the heartbeat rounds only (no watch)"
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per count on stdout")
    parser.add_argument("--src", type=Path, default=SRC, help="flightlog source tree to measure (this one)")
    args = parser.parse_args()
    for count in (int(n) for n in args.sessions.split(",")):
        row: dict[str, object] = {"sessions": count}
        if args.watch:
            with tempfile.TemporaryDirectory(prefix="flightlog-watch-bench-") as tmp:
                row.update(measure(Path(tmp), count, args.window))
        with tempfile.TemporaryDirectory(prefix="flightlog-watch-bench-") as tmp:
            row["tick_ms"] = tick_ms(Path(tmp), count, args.ticks)
        row["loadavg"] = Path("/proc/loadavg").read_text().split()[0]
        print(json.dumps(row) if args.json else render(row), flush=True)


def render(row: dict[str, object]) -> str:
    """One count's lines: each side's figures, the heartbeats' share (both sides run), the rounds."""
    lines = [f"{row['sessions']} sessions (load {row['loadavg']}):"]
    sides = {side: row[side] for side in ("followed", "polled") if isinstance(row.get(side), dict)}
    for side, figures in sides.items():
        assert isinstance(figures, dict)
        lines.append(
            f"  {side:9} CPU {figures['cpu_pct']:5.1f} %  write syscalls {figures['syscw_per_s']:7.1f}/s"
            f"  written {figures['kib_per_s']:8.1f} KiB/s"
        )
    followed, polled = sides.get("followed"), sides.get("polled")
    if isinstance(followed, dict) and isinstance(polled, dict):
        lines.append(
            f"  heartbeats CPU {followed['cpu_pct'] - polled['cpu_pct']:+5.1f} %  write syscalls "
            f"{followed['syscw_per_s'] - polled['syscw_per_s']:+7.1f}/s  written "
            f"{followed['kib_per_s'] - polled['kib_per_s']:+8.1f} KiB/s"
        )
    rounds = row["tick_ms"]
    assert isinstance(rounds, dict)
    batched = rounds.get("one_transaction")
    lines.append(
        f"  one heartbeat round: {rounds['per_session']:.1f} ms one commit per session, "
        + ("-" if batched is None else f"{batched:.1f} ms")
        + " in one transaction"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
