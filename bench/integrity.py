"""Integrity benchmarks: cheap resume stays flat as a session grows; full verification against raw sha256.

Run ``python bench/integrity.py [--sizes 1000,10000,100000,1000000] [--quick] [--tail 32] [--json]``.

One session grows, in one SQLite file (``synchronous=NORMAL``, WAL), through every size in ``--sizes``
(``--quick`` stops at 10^5; building 10^6 events takes a few minutes). Events are ``Custom`` events of
~300 bytes, appended by a notarized :class:`~flightlog.recorder.Recorder` (checkpoint every 64 events) in
``append_many`` batches of ``--batch`` events, so each batch ends with one signed checkpoint; then
``--tail`` events are appended in one batch below the cadence, which leaves them unanchored. At each size:

1. **Cheap resume** (``Recorder.attach(..., full=False)``): verify the latest checkpoint's signature and
   its consistency with the retained head, rebuild the compact range from the stored frontier, verify the
   tail. O(log n) + tail, so the time should be flat in the session length. Median of ``--rounds``.
2. **Full resume** (``Recorder.attach(..., notary=...)``, the default): every row's chain hash, leaf hash,
   decode, every checkpoint signature. O(n). Reported as time and MB/s of stored event bytes.
3. **Full verify without decoding** (``audit_session(decode=False)``): the hashing and signature checks
   alone, MB/s.
4. **Floor**: ``hashlib.sha256`` over the same event bytes already in memory, one call per event, MB/s.
   Verification hashes every byte at least three times (chain hash, and the RFC 9162 leaf hash once in
   ``verify_rows`` and once for the checkpoint comparison), so a third of the floor is the ceiling.

Nothing here asserts on timings: it reports. The temporary directory (database, keys, heads) is removed
at exit.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

_SRC = Path(__file__).resolve().parents[1] / "src"
if _SRC.is_dir() and str(_SRC) not in sys.path:
    sys.path.insert(0, str(_SRC))  # measure this checkout, installed or not

from flightlog.events import Custom  # noqa: E402
from flightlog.integrity.heads import HeadStore  # noqa: E402
from flightlog.integrity.keys import LogSigner  # noqa: E402
from flightlog.integrity.notary import Notary  # noqa: E402
from flightlog.integrity.verify import audit_session  # noqa: E402
from flightlog.recorder import Recorder  # noqa: E402
from flightlog.store.sqlite import SqliteStore  # noqa: E402

MB = 1_000_000
SID = "bench-session"
_TEXT = (
    "Read the failing test, patch the loader to resolve paths against the project root, re-run. "
    "Naïve fixes — chdir in conftest — would hide the bug; the loader must not depend on the cwd. "
)


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _event(i: int) -> Custom:
    return Custom(custom_kind="bench_step", payload={"i": i, "text": _TEXT, "tool": "grep", "ok": i % 7 != 0})


@dataclass
class Row:
    """One size's results (times in ms or s, throughputs in MB/s of stored event bytes)."""

    events: int
    tail: int
    build_s: float
    cheap_resume_ms: float
    full_resume_s: float | None
    full_resume_mb_s: float | None
    verify_nodecode_mb_s: float | None
    sha256_floor_mb_s: float
    stored_mb: float


def _median_ms(fn: object, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def _floor(store: SqliteStore, limit: int = 200_000) -> tuple[float, float]:
    """sha256 MB/s over up to ``limit`` stored events held in memory (best of 3), and all events' MB."""
    payloads = [row.event_bytes for _, row in zip(range(limit), store.read_events(SID), strict=False)]
    sample = sum(len(p) for p in payloads)
    best = 0.0
    for _ in range(3):
        start = time.perf_counter()
        for payload in payloads:
            hashlib.sha256(payload).digest()
        best = max(best, sample / MB / (time.perf_counter() - start))
    total = sum(len(row.event_bytes) for row in store.read_events(SID))
    return best, total / MB


def run(sizes: list[int], *, batch: int, tail: int, rounds: int, full_max: int) -> list[Row]:
    """Grow one session through ``sizes`` and measure at each."""
    tmp = Path(tempfile.mkdtemp(prefix="flightlog-integrity-"))
    rows: list[Row] = []
    try:
        notary = Notary.for_signer(LogSigner.generate("bench.local/log"), HeadStore(tmp / "heads"), every=64)
        with SqliteStore(tmp / "bench.db", synchronous="NORMAL") as store:
            rec = Recorder.create(store, session_id=SID, notary=notary)
            built = 0.0
            for size in sizes:
                start = time.perf_counter()
                target = size - tail
                while rec.next_seq < target:
                    n = min(batch, target - rec.next_seq)
                    rec.append_many([_event(rec.next_seq + i) for i in range(n)])
                rec.append_many([_event(rec.next_seq + i) for i in range(tail)])
                built += time.perf_counter() - start
                rows.append(_measure(store, notary, size, tail, built, rounds, full_max))
                _log(f"  {size:>9,} events measured")
                rec = Recorder.attach(store, SID, notary=notary, full=False)  # keep writing after the tail
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


def _measure(
    store: SqliteStore, notary: Notary, size: int, tail: int, built: float, rounds: int, full_max: int
) -> Row:
    cheap = _median_ms(
        lambda: Recorder.attach(store, SID, notary=notary, full=False, take_authority=False), rounds
    )
    floor, stored_mb = _floor(store)
    full_s = full_mb = nodecode = None
    if size <= full_max:
        start = time.perf_counter()
        Recorder.attach(store, SID, notary=notary, take_authority=False)
        full_s = time.perf_counter() - start
        full_mb = stored_mb / full_s
        start = time.perf_counter()
        report = audit_session(store, SID, keyring=notary.keyring, heads=notary.heads, decode=False)
        assert report.ok, report.divergences[:3]
        nodecode = stored_mb / (time.perf_counter() - start)
    return Row(
        size,
        tail,
        round(built, 2),
        round(cheap, 3),
        _r(full_s),
        _r(full_mb),
        _r(nodecode),
        round(floor, 1),
        round(stored_mb, 2),
    )


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _table(rows: list[Row]) -> str:
    head = (
        f"{'events':>10} {'tail':>5} {'build s':>8} {'cheap resume ms':>16} {'full resume s':>14} "
        f"{'full MB/s':>10} {'no-decode MB/s':>15} {'sha256 MB/s':>12} {'stored MB':>10}"
    )
    lines = [head]
    for r in rows:

        def fmt(v: float | None) -> str:
            return "-" if v is None else f"{v:g}"

        lines.append(
            f"{r.events:>10,} {r.tail:>5} {r.build_s:>8.1f} {r.cheap_resume_ms:>16.3f} {fmt(r.full_resume_s):>14} "
            f"{fmt(r.full_resume_mb_s):>10} {fmt(r.verify_nodecode_mb_s):>15} {r.sha256_floor_mb_s:>12.1f} "
            f"{r.stored_mb:>10.2f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Parse options, run, print a table (or JSON with ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--sizes", default="1000,10000,100000,1000000", help="comma-separated event counts")
    parser.add_argument("--quick", action="store_true", help="stop at 10^5 events")
    parser.add_argument("--batch", type=int, default=10_000, help="events per append_many while building")
    parser.add_argument("--tail", type=int, default=32, help="unanchored events after the last checkpoint")
    parser.add_argument("--rounds", type=int, default=7, help="cheap-resume repetitions (median)")
    parser.add_argument("--full-max", type=int, default=10**6, help="skip full verification above this size")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()})
    if args.quick:
        sizes = [s for s in sizes if s <= 100_000]
    if not sizes or sizes[0] <= args.tail or not 0 <= args.tail < 64:
        parser.error("sizes must exceed --tail, and --tail must be in 0..63 (below the checkpoint cadence)")
    _log(f"building one session through {', '.join(f'{s:,}' for s in sizes)} events ...")
    rows = run(sizes, batch=args.batch, tail=args.tail, rounds=args.rounds, full_max=args.full_max)
    if args.json:
        meta = {"python": platform.python_version(), "machine": platform.machine()}
        print(json.dumps({"meta": meta, "rows": [asdict(r) for r in rows]}, indent=2))
    else:
        print(_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
