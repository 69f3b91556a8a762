"""Instructions per ``Recorder.append`` (callgrind), for comparing trees where wall time is too noisy.

Runs this script's driver twice under ``valgrind --tool=callgrind`` (N and 3N appends at NORMAL into a fresh
store, after 40 warm-up appends, the same events built before either run) and prints
``(Ir(3N) - Ir(N)) / 2N``: start-up, imports, building the events and converting them to a floor's input
(or to ``--encoded`` pairs) cancel out, as ``bench/ledger.py`` makes them before its clock (a first, uncounted
run compiles the tree's bytecode). Counts, not times: the
figure does not move with the machine's load, so two trees can be compared on a busy machine (the kernel's
part of a COMMIT, its write of the WAL, is not counted). Counts are not time: valgrind's virtual CPU has no SHA
extensions, so OpenSSL's SHA-256 counts its generic code here (~2k instructions per 64-byte block, ~95k per
append on every side) where a CPU with ``sha_ni`` spends a few µs; interpreter instructions run slowest
(bench/HISTORY.md, "append FULL: where the time goes").

    .venv/bin/python bench/append_instructions.py                        # this checkout, running loop
    .venv/bin/python bench/append_instructions.py --src ../other/src     # another tree, same harness
    .venv/bin/python bench/append_instructions.py --workload idle --batch 10

``--workload loop`` appends ``run_started`` first (the runs snapshot's state moves on every append, as in an
agent loop); ``idle`` does not (``ledger.py``'s append workload: the snapshot never changes). ``--batch B``
appends with ``append_many`` of B events and reports instructions per event. ``--encoded`` appends the
same events as prebuilt ``(kind, canonical bytes)`` pairs with ``Recorder.append_encoded`` (an importer's
path), B per call. ``--floor same-work`` (``issue``) counts ``bench/ledger.py``'s same-work floor (the issue's
floor) appending the same events in the same batches, so flightlog's instructions above the work its
guarantees need are a difference of two counts. Needs ``valgrind`` on PATH.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _tree import measured_tree

_WARMUP = 40
_ENV = {**os.environ, "PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED", "0")}
"""The counted runs' environment: one string-hash seed (0 unless ``PYTHONHASHSEED`` is set), so dict layouts,
and with them the count, do not move between runs. With a random seed per run the same tree's count moved by
5-10k; with one seed runs from one shell print the same count, and another environment moves it by 0.5k at most
(bench/HISTORY.md, "append FULL: where the time goes")."""


def _drive_floor(appends: int, workload: str, batch: int, built: int, floor: str) -> None:
    """The measured process of a floor (``bench/ledger.py``'s ``SameWorkWriter`` or ``FloorWriter``): the
    same events as :func:`_drive`, as the floor takes them (wire values, or precomputed canonical bytes)."""
    from ledger import FloorWriter, SameWorkWriter, Workload

    from flightlog.encoding import canonical_bytes

    source = Workload(7)
    head = [source.run_started()] if workload == "loop" else []
    warm = Workload(7).events(_WARMUP)
    # Every built event is converted, in the N run as in the 3N run, so the conversion (made before the
    # clock in ledger.py) cancels out of the difference like the events' construction does.
    built_events = [*head, *warm, *source.events(built)[_WARMUP:]]
    if floor == "same-work":
        converted: list[object] = [e.to_wire() for e in built_events]
    else:
        converted = [(e.kind, canonical_bytes(e)) for e in built_events]
    items = converted[: len(head) + _WARMUP + appends]
    with tempfile.TemporaryDirectory() as workdir:
        path = Path(workdir) / "x.db"
        writer = SameWorkWriter(path, "NORMAL") if floor == "same-work" else FloorWriter(path, "NORMAL")
        first = len(head) + _WARMUP
        for item in items[:first]:
            writer.write([item])
        for start in range(first, len(items), batch):
            writer.write(items[start : start + batch])
        writer.close()


def _drive(appends: int, workload: str, batch: int, built: int, encoded: bool) -> None:
    """The measured process: ``appends`` appends (after the warm-up) of ``built`` prebuilt events."""
    from ledger import Workload

    from flightlog.encoding import canonical_bytes
    from flightlog.recorder import Recorder
    from flightlog.store.sqlite import SqliteStore

    source = Workload(7)
    timed = source.events(built)[_WARMUP:]
    events = timed[:appends]
    # Every built event is encoded, in the N run as in the 3N run: the encoding cancels out of the difference.
    rows = [(event.kind, canonical_bytes(event)) for event in timed][:appends] if encoded else []
    with (
        tempfile.TemporaryDirectory() as workdir,
        SqliteStore(Path(workdir) / "x.db", synchronous="NORMAL") as store,
    ):
        recorder = Recorder.create(store, session_id="bench")
        if workload == "loop":
            recorder.append(source.run_started())
        for event in Workload(7).events(_WARMUP):
            recorder.append(event)
        for start in range(0, len(events), batch):
            if encoded:
                recorder.append_encoded(rows[start : start + batch])
            else:
                recorder.append_many(events[start : start + batch])


def _instructions(args: argparse.Namespace, appends: int) -> int:
    """Instructions callgrind counts for one driver run of ``appends`` appends."""
    done = subprocess.run(_child(args, appends), capture_output=True, text=True, check=True, env=_ENV)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"append_instructions.py: no callgrind total in: {done.stderr[-500:]}")
    return int(found.group(1))


def _child(args: argparse.Namespace, appends: int) -> list[str]:
    """The command of one counted driver run (its first three items: valgrind and its options)."""
    return [
        "valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
        sys.executable, __file__, "--child", str(appends), "--src", str(args.tree),
        "--workload", args.workload, "--batch", str(args.batch), "--appends", str(args.appends),
        *(["--encoded"] if args.encoded else []), *(["--floor", args.floor] if args.floor else []),
    ]  # fmt: skip


def main() -> int:
    tree = measured_tree(sys.argv[1:])
    sys.path[:0] = [str(tree), str(Path(__file__).parent)]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", type=Path, default=tree, help="flightlog source tree to measure (this one)")
    parser.add_argument("--appends", type=int, default=100, help="N: the runs make N and 3N appends (100)")
    parser.add_argument("--workload", choices=("loop", "idle"), default="loop")
    parser.add_argument("--batch", type=int, default=1, help="events per append_many (1: Recorder.append)")
    parser.add_argument(
        "--encoded", action="store_true", help="append prebuilt (kind, bytes) pairs with append_encoded"
    )
    parser.add_argument(
        "--floor",
        choices=("same-work", "issue"),
        default=None,
        help="count a floor of bench/ledger.py instead of flightlog: the same-work floor or the issue's",
    )
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.tree = tree
    built = _WARMUP + 3 * args.appends
    if args.floor and args.encoded:
        parser.error("--floor and --encoded: a floor takes its own input")
    if args.child is not None:
        if args.floor:
            _drive_floor(args.child, args.workload, args.batch, built, args.floor)
        else:
            _drive(args.child, args.workload, args.batch, built, args.encoded)
        return 0
    if shutil.which("valgrind") is None:
        print("append_instructions.py: valgrind is not on PATH", file=sys.stderr)
        return 2
    # One run first, not counted: it compiles the tree's bytecode, which would otherwise land in one count.
    subprocess.run(_child(args, 1)[3:], capture_output=True, check=True, env=_ENV)
    small, large = (_instructions(args, n) for n in (args.appends, 3 * args.appends))
    per = (large - small) / (2 * args.appends)
    how = "append_encoded" if args.encoded else "append_many" if args.batch > 1 else "append"
    who = f"the {args.floor} floor" if args.floor else str(tree)
    print(
        f"{who}: {args.workload}, {how}, {args.batch} event(s)/txn: "
        f"{per / 1e3:.1f}k instructions per event appended"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
