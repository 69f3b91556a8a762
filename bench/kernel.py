"""Kernel overhead per turn, against bare recorder appends of the very same events.

Run ``python bench/kernel.py [--turns 40] [--rounds 5] [--quick] [--json]``.

The model is a :class:`~flightlog.kernel.scripted.ScriptedProvider` with zero latency and the tools return
at once, so a turn's wall time is all kernel + ledger: reading the ledger fold, ``reconstruct`` of the
history (plus the native-seed folds), argument repair, governance, budget reservation, building the
events, RFC 8785 encoding, chain and Merkle hashing, the durable commits, and (``side_effect`` workload)
the exactly-once effect rows.

The floor is what any recorder user must pay to persist the same facts: the exact events the kernel wrote
in that run (captured as they were appended), appended to a fresh session with ``Recorder.append_many``
in the **same transaction groups** (so both sides pay the same number of commits/fsyncs); the effect
records go through ``Recorder.record_intent``/``complete_effect``, the only recorder API that writes them
(effect row + ledger event). A second floor appends the other events one per transaction (what a naive
integration would do), for reference.

Workloads (one turn = one model call and its tools; a final answer ends the run):

* ``read_only``: one ``read_only`` call per turn (7 events, 3 commits per turn).
* ``side_effect``: one ``side_effect`` call per turn (intent before, completion after: 9 events, 5
  commits per turn).

Each configuration runs at ``synchronous=FULL`` (fsync per commit: the default) and ``NORMAL`` (no fsync:
exposes the CPU overhead). Rounds interleave kernel and floor; medians are reported. Ratio = kernel time /
floor time (1.0 = free; the target is <= 2.0 against the same-transactions floor).
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

_SRC = Path(__file__).resolve().parents[1] / "src"
if _SRC.is_dir() and str(_SRC) not in sys.path:
    sys.path.insert(0, str(_SRC))  # measure this checkout, installed or not

from flightlog.events import Custom, Event  # noqa: E402
from flightlog.kernel import Agent, Kernel, tool  # noqa: E402
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply  # noqa: E402
from flightlog.recorder import Recorder  # noqa: E402
from flightlog.store import SqliteStore  # noqa: E402


@tool(effect="read_only", in_thread=False)
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@tool(effect="side_effect", in_thread=False)
def store_value(key: str, value: str) -> str:
    """Store a value (the effect itself is free here: only the bookkeeping is measured)."""
    return f"stored {key}={value}"


def _script(turns: int, workload: str) -> list[Any]:
    if workload == "read_only":
        steps = [calls(call("lookup", {"key": f"k{t}"}, id=f"c{t}"), text=f"step {t}") for t in range(turns)]
    else:
        steps = [
            calls(call("store_value", {"key": f"k{t}", "value": "v" * 40}, id=f"c{t}"), text=f"step {t}")
            for t in range(turns)
        ]
    return [*steps, reply("done")]


class _Capture:
    """Records each ``Recorder.append_many`` call (= one transaction in the kernel) while installed."""

    def __init__(self) -> None:
        self.groups: list[list[Event]] = []
        self._original: Callable[..., Any] | None = None

    def __enter__(self) -> _Capture:
        original = Recorder.append_many
        self._original = original
        groups = self.groups

        def capture(recorder: Recorder, events: Sequence[Event]) -> Any:
            groups.append(list(events))
            return original(recorder, events)

        Recorder.append_many = capture  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        Recorder.append_many = self._original  # type: ignore[method-assign]


def _kernel_run(
    db: Path, turns: int, workload: str, synchronous: str, capture: bool
) -> tuple[float, list[list[Event]]]:
    agent = Agent(
        name="bench", route=[ScriptedProvider(_script(turns, workload))], tools=[lookup, store_value]
    )
    with SqliteStore(db, synchronous=synchronous) as store:
        kernel = Kernel(store, agent)
        if capture:
            with _Capture() as cap:
                start = time.perf_counter()
                result = kernel.run_sync("bench", handle_signals=False)
                elapsed = time.perf_counter() - start
            groups = cap.groups
        else:
            start = time.perf_counter()
            result = kernel.run_sync("bench", handle_signals=False)
            elapsed = time.perf_counter() - start
            groups = []
    assert result.status == "completed", result
    return elapsed, groups


def _effect(event: Event) -> tuple[str, Any] | None:
    """``(kind, payload)`` of a recorder-written effect record, else None."""
    if isinstance(event, Custom) and event.custom_kind in (
        "external_effect_intent",
        "external_effect_completed",
    ):
        return event.custom_kind, event.payload
    return None


def _floor_run(db: Path, groups: list[list[Event]], synchronous: str, batched: bool) -> float:
    """Persist the same facts with the recorder alone: effect records go through ``record_intent`` /
    ``complete_effect`` (the only way to write them: effect row + ledger event), everything else through
    ``append_many`` per kernel transaction (``batched``) or ``append`` per event."""
    with SqliteStore(db, synchronous=synchronous) as store:
        start = time.perf_counter()
        recorder = Recorder.create(store, task="bench", source="kernel")
        for group in groups:
            effect = _effect(group[0]) if len(group) == 1 else None
            if effect is not None and effect[0] == "external_effect_intent":
                recorder.record_intent(effect[1]["key"], effect[1]["intent"])
            elif effect is not None:
                recorder.complete_effect(effect[1]["key"], effect[1]["result"])
            elif batched:
                recorder.append_many(group)
            else:
                for event in group:
                    recorder.append(event)
        return time.perf_counter() - start


@dataclass
class Row:
    workload: str
    synchronous: str
    turns: int
    events_per_turn: float
    commits_per_turn: float
    kernel_ms_per_turn: float
    floor_ms_per_turn: float
    ratio: float
    floor_1txn_ms_per_turn: float
    ratio_1txn: float


def _measure(tmp: Path, workload: str, synchronous: str, turns: int, rounds: int) -> Row:
    _, groups = _kernel_run(tmp / "warm.db", turns, workload, synchronous, capture=True)
    kernel_t, floor_t, single_t = [], [], []
    for r in range(rounds):
        kernel_t.append(
            _kernel_run(tmp / f"k-{workload}-{synchronous}-{r}.db", turns, workload, synchronous, False)[0]
        )
        floor_t.append(
            _floor_run(tmp / f"f-{workload}-{synchronous}-{r}.db", groups, synchronous, batched=True)
        )
        single_t.append(
            _floor_run(tmp / f"s-{workload}-{synchronous}-{r}.db", groups, synchronous, batched=False)
        )
    per_turn = 1000 / (turns + 1)  # turns with tools plus the final answer
    k, f, s = (statistics.median(x) * per_turn for x in (kernel_t, floor_t, single_t))
    events = sum(len(g) for g in groups)
    return Row(
        workload=workload,
        synchronous=synchronous,
        turns=turns + 1,
        events_per_turn=round(events / (turns + 1), 2),
        commits_per_turn=round(len(groups) / (turns + 1), 2),
        kernel_ms_per_turn=round(k, 3),
        floor_ms_per_turn=round(f, 3),
        ratio=round(k / f, 2),
        floor_1txn_ms_per_turn=round(s, 3),
        ratio_1txn=round(k / s, 2),
    )


def _table(rows: list[Row]) -> str:
    head = (
        f"{'workload':<12} {'sync':<7} {'turns':>5} {'ev/turn':>7} {'txn/turn':>8} "
        f"{'kernel ms/turn':>15} {'appends (same txns)':>20} {'ratio':>6} {'appends (1/txn)':>16} {'ratio':>6}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r.workload:<12} {r.synchronous:<7} {r.turns:>5} {r.events_per_turn:>7} {r.commits_per_turn:>8} "
            f"{r.kernel_ms_per_turn:>15.3f} {r.floor_ms_per_turn:>20.3f} {r.ratio:>5.2f}x "
            f"{r.floor_1txn_ms_per_turn:>16.3f} {r.ratio_1txn:>5.2f}x"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=40, help="turns with a tool call per run")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds; medians reported")
    parser.add_argument("--quick", action="store_true", help="10 turns, 2 rounds")
    parser.add_argument("--json", action="store_true", help="print JSON rows instead of the table")
    args = parser.parse_args(argv)
    turns, rounds = (10, 2) if args.quick else (args.turns, args.rounds)
    tmp = Path(tempfile.mkdtemp(prefix="flightlog-bench-kernel-"))
    try:
        rows = [
            _measure(tmp, workload, synchronous, turns, rounds)
            for workload in ("read_only", "side_effect")
            for synchronous in ("FULL", "NORMAL")
        ]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        print(json.dumps([asdict(r) for r in rows], indent=2))
    else:
        print(f"flightlog kernel overhead per turn; python {platform.python_version()}, {platform.machine()}")
        print(_table(rows))
        worst = max(r.ratio for r in rows)
        print(f"\nworst ratio against the same-transactions floor: {worst:.2f}x (target <= 2.00x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
