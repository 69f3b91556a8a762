"""CLI start-up: ``flightlog --version`` side by side with the interpreter's own floor.

Run ``.venv/bin/python bench/startup.py [--rounds 5] [--runs 10] [--quick] [--json]``.

Each round runs, interleaved, ``--runs`` fresh processes of each of: ``python -c pass`` (the interpreter),
``python -c "import flightlog"`` (the package root, lazy: its names load on first use),
``flightlog --version`` (the console script's entry point ``flightlog.cli.main``, which answers a lone
``--version`` before typer loads), ``flightlog ls --help`` (typer, rich and the command modules loaded,
the click tree built as far as ``ls``: what every command pays before its own work) and ``flightlog ls`` on
a store of 28 finished runs made here first (an everyday read command: its imports plus a small listing),
all with this interpreter and this checkout's ``src/``. Printed per command: the median wall time
over the rounds (ms) with the min-max spread of the round medians, ratios to each floor, and the modules
the command imports (one ``python -X importtime`` run: a count that does not depend on the machine's load). The issue 19
target is ``flightlog --version`` <= 0.25 s absolute. ``--json`` prints the shared bench row
(``bench/all.py``) on stdout instead of the table; ``--quick`` is 3 rounds x 5 processes. Nothing asserts on
timings.
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
from pathlib import Path

from _tree import checked  # bench/ is sys.path[0] when a script runs

ROOT = Path(__file__).resolve().parent.parent
COMMANDS: dict[str, list[str]] = {
    "python -c pass": ["-c", "pass"],
    "import flightlog": ["-c", "import flightlog"],
    "flightlog --version": [
        "-c",
        "from flightlog.cli import main; import sys; sys.argv[1:] = ['--version']; main()",
    ],
    "flightlog ls --help": [
        "-c",
        "from flightlog.cli import main; import sys; sys.argv[1:] = ['ls', '--help']; main()",
    ],
    "flightlog ls": [
        "-c",
        "from flightlog.cli import main; import sys; sys.argv[1:] = ['--db', sys.argv[1], 'ls']; main()",
        "{db}",
    ],
}
TARGET_S = 0.25
SESSIONS = 28
"""Finished runs in the store ``flightlog ls`` lists (the size of the report that asked for this row)."""

_MAKE_STORE = """
import sys
from flightlog.events import RunStarted, RunTerminal
from flightlog.recorder import Recorder
from flightlog.store import open_store
with open_store(sys.argv[1]) as store:
    for i in range(int(sys.argv[2])):
        recorder = Recorder.create(store, session_id=f"run-{i:02d}", task="bench")
        recorder.append(RunStarted(run_id="r1", goal="a finished run"))
        recorder.append(RunTerminal(reason="completed", turns_used=1, total_tokens=10))
        recorder.finish("completed")
"""


def _modules(args: list[str], env: dict[str, str]) -> int:
    """Modules the command imports: the lines ``python -X importtime`` writes, one per module."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *args], env=env, check=True, capture_output=True, text=True
    )
    return sum(1 for line in done.stderr.splitlines() if line.startswith("import time:") and "|" in line) - 1


def _once(args: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], env=env, check=True, stdout=subprocess.DEVNULL, timeout=120)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=None, help="rounds (5; 3 with --quick)")
    parser.add_argument(
        "--runs", type=int, default=None, help="processes per command per round (10; 5 quick)"
    )
    parser.add_argument("--quick", action="store_true", help="3 rounds x 5 processes")
    parser.add_argument("--json", action="store_true", help="print the shared bench row as JSON")
    parser.add_argument("--src", type=Path, default=ROOT / "src", help="flightlog source tree to measure")
    args = parser.parse_args()
    checked(args.src.resolve(), "--src")  # a path without flightlog: PYTHONPATH would fall back silently
    rounds_n = args.rounds or (3 if args.quick else 5)
    runs_n = args.runs or (5 if args.quick else 10)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(args.src), os.environ.get("PYTHONPATH")])),
    }
    folder = tempfile.TemporaryDirectory(prefix="flightlog-startup-")
    db = str(Path(folder.name) / "runs.db")
    subprocess.run([sys.executable, "-c", _MAKE_STORE, db, str(SESSIONS)], env=env, check=True, timeout=300)
    commands = {name: [a.replace("{db}", db) for a in argv] for name, argv in COMMANDS.items()}
    modules = {name: _modules(argv, env) for name, argv in commands.items()}
    rounds: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for r in range(rounds_n):
        print(f"startup: round {r + 1}/{rounds_n}", file=sys.stderr, flush=True)
        samples: dict[str, list[float]] = {name: [] for name in COMMANDS}
        for _ in range(runs_n):
            for name, command in commands.items():  # interleaved: all of them see the same neighbours
                samples[name].append(_once(command, env))
        for name, values in samples.items():
            rounds[name].append(statistics.median(values))
    floor = statistics.median(rounds["python -c pass"])
    package = statistics.median(rounds["import flightlog"])
    version = statistics.median(rounds["flightlog --version"])
    folder.cleanup()
    if args.json:
        print(json.dumps({"rows": [_row(rounds, modules)]}, indent=2))
        return
    print(
        f"{'command':<22} {'median ms':>10} {'spread ms':>15} {'/ python':>9} {'/ import':>9} {'modules':>8}"
    )
    for name, values in rounds.items():
        median = statistics.median(values)
        spread = f"{min(values) * 1000:.0f}-{max(values) * 1000:.0f}"
        print(
            f"{name:<22} {median * 1000:10.0f} {spread:>15} {median / floor:8.1f}x {median / package:8.2f}x"
            f" {modules[name]:8d}"
        )
    met = "met" if version <= TARGET_S else "NOT met"
    print(f"target flightlog --version <= {TARGET_S * 1000:.0f} ms: {met} ({version * 1000:.0f} ms)")


def _row(rounds: dict[str, list[float]], modules: dict[str, int]) -> dict[str, object]:
    """The issue 19 row: ``--version`` against the interpreter's start-up; ratio = version / python."""
    version, python = rounds["flightlog --version"], rounds["python -c pass"]
    per_round = [v / p for v, p in zip(version, python, strict=True)]
    median = statistics.median(version)
    return {
        "path": "CLI start-up (flightlog --version)",
        "flightlog": f"{median * 1000:.0f} ms",
        "floor": f"{statistics.median(python) * 1000:.0f} ms python -c pass",
        "ratio": round(median / statistics.median(python), 2),
        "spread": [round(min(per_round), 2), round(max(per_round), 2)],
        "target": f"<= {TARGET_S * 1000:.0f} ms",
        "met": median <= TARGET_S,
        "detail": f"ratio = x the interpreter's own start-up; --version {min(version) * 1000:.0f}-"
        f"{max(version) * 1000:.0f} ms over rounds; import flightlog "
        f"{statistics.median(rounds['import flightlog']) * 1000:.0f} ms; flightlog ls --help "
        f"{statistics.median(rounds['flightlog ls --help']) * 1000:.0f} ms; flightlog ls ({SESSIONS} runs) "
        f"{statistics.median(rounds['flightlog ls']) * 1000:.0f} ms, {modules['flightlog ls']} modules imported "
        f"(python -c pass {modules['python -c pass']})",
    }


if __name__ == "__main__":
    main()
