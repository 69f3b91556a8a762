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

Compaction (``--compaction [--steps 200]``): a :class:`~flightlog.kernel.scripted.StepProvider` run of
``steps`` tool turns in a 4000-token window (it compacts, and pages the large outputs of every 7th step)
against the same run in a window it never fills (no compaction: the whole history every call). Reported:
ms per turn of each, compactions, and the compaction overhead per turn: the time from each
``compaction_started`` row to its ``compressed`` row (plan, summary call, archive, records), summed and
divided by the turns.

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
from flightlog.kernel.context import ContextPolicy, ContextWindow  # noqa: E402
from flightlog.kernel.scripted import (  # noqa: E402
    ScriptedProvider,
    StepProvider,
    SummaryProvider,
    call,
    calls,
    reply,
)
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
        name="bench",
        route=[ScriptedProvider(_script(turns, workload), by_turn=False)],
        tools=[lookup, store_value],
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


@tool(effect="read_only", in_thread=False)
def work(step: int) -> str:
    """Do one step; every 7th step's output is too large for a small window."""
    return f"step {step} done" + ("x" * 2400 if step % 7 == 0 else "")


def _compaction_run(db: Path, steps: int, window: int) -> dict[str, Any]:
    provider = StepProvider(steps, window=window)
    summarizer = SummaryProvider()
    windows = {provider.model: ContextWindow(window, 200), summarizer.model: ContextWindow(100_000, 2000)}
    context = ContextPolicy(windows=windows, summarizer=summarizer, summary_max_tokens=300)
    agent = Agent(name="bench-context", route=[provider], tools=[work], max_tokens=200, context=context)
    with SqliteStore(db) as store:
        t0 = time.perf_counter()
        result = Kernel(store, agent).run_sync("do all the steps", handle_signals=False)
        elapsed = time.perf_counter() - t0
        assert result.status == "completed", result.detail
        started: int | None = None
        in_compaction_ms = 0
        compactions = 0
        for row in store.read_events(result.session_id):
            if row.kind == "custom" and b'"compaction_started"' in row.event_bytes:
                started = row.recorded_at_ms
            elif row.kind == "compressed" and started is not None:
                in_compaction_ms += row.recorded_at_ms - started
                compactions += 1
                started = None
    turns = steps + 1
    return {
        "window": window,
        "turns": turns,
        "ms_per_turn": elapsed * 1000 / turns,
        "compactions": compactions,
        "compaction_ms_per_turn": in_compaction_ms / turns,
        "peak_request_tokens": provider.peak_tokens,
    }


def _compaction(tmp: Path, steps: int) -> list[dict[str, Any]]:
    return [_compaction_run(tmp / f"c{window}.db", steps, window) for window in (4000, 1_000_000)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compaction", action="store_true", help="measure compaction overhead instead")
    parser.add_argument("--steps", type=int, default=200, help="tool turns of the compaction run")
    parser.add_argument("--turns", type=int, default=40, help="turns with a tool call per run")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds; medians reported")
    parser.add_argument("--quick", action="store_true", help="10 turns, 2 rounds")
    parser.add_argument("--json", action="store_true", help="print JSON rows instead of the table")
    args = parser.parse_args(argv)
    turns, rounds = (10, 2) if args.quick else (args.turns, args.rounds)
    tmp = Path(tempfile.mkdtemp(prefix="flightlog-bench-kernel-"))
    if args.compaction:
        try:
            found = _compaction(tmp, 40 if args.quick else args.steps)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        if args.json:
            print(json.dumps(found, indent=2))
            return 0
        print(f"flightlog compaction overhead; python {platform.python_version()}, {platform.machine()}")
        print(
            f"{'window':>9} {'turns':>5} {'ms/turn':>8} {'compactions':>11} {'compaction ms/turn':>18} {'peak tokens':>11}"
        )
        for r in found:
            print(
                f"{r['window']:>9} {r['turns']:>5} {r['ms_per_turn']:>8.2f} {r['compactions']:>11} "
                f"{r['compaction_ms_per_turn']:>18.2f} {r['peak_request_tokens']:>11}"
            )
        return 0
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
