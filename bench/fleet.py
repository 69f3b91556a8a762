"""Append throughput with many concurrent sessions: SQLite vs PostgreSQL vs eventsourcing's PostgreSQL recorder.

Run ``.venv/bin/python bench/fleet.py [--pg URL] [--events 3000]``; ``--json [--quick] [--rounds 3]`` prints
only the issue-19 rows (flightlog's default PostgreSQL recorder vs eventsourcing's, alternated per round, and
round trips per append) in bench/all.py's row schema.

Workload: ``C`` sessions (C = 1, 8, 32), one thread each, as ``flightlog worker --concurrency C`` drives
them: one store object shared by the threads, each thread appending its share of ``--events`` custom
events (~200 bytes) **one event per transaction** (a durable commit per event, as a live agent does).
Reported: events/s (all threads, wall clock) and ratios.

Configurations, each on a fresh database (SQLite file, ``synchronous=FULL``, WAL; or PostgreSQL schema,
``synchronous_commit=on``):

* ``*-recorder``: the full write path, ``Recorder.record_custom`` (RFC 8785 encoding, chain and Merkle
  hashing, the session-row lock + epoch + head check, the runs projection in the same transaction,
  NOTIFY on PostgreSQL), with group commit (:mod:`flightlog.store.group`: blocks of several threads that
  end together share one ``COMMIT``).
* ``*-recorder-solo``: the same with ``group_commit=False`` (SQLite: every transaction commits alone;
  PostgreSQL: a pooled connection and a commit per transaction).
* ``*-store``: ``Store.append_events`` with pre-hashed rows (the backend alone), with group commit.
* ``eventsourcing-postgres``: ``eventsourcing.postgres.PostgresApplicationRecorder.insert_events`` of the
  same bytes (one stored event per call, per aggregate), when ``eventsourcing[postgres]`` is installed.

All of it is one Python process: CPU-bound work shares one core (the GIL) whatever C is. What grows with C
is how many commits (and their fsyncs and round trips) are shared.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _tree import checked  # bench/ is sys.path[0] when a script runs

ROOT = Path(__file__).resolve().parents[1]
_OTHER = os.environ.get("FLIGHTLOG_BENCH_SRC")  # another tree to compare (refused without flightlog)
sys.path.insert(0, str(checked(Path(_OTHER).resolve(), "FLIGHTLOG_BENCH_SRC") if _OTHER else ROOT / "src"))

from flightlog.ledger import CompactRange  # noqa: E402
from flightlog.recorder import Recorder  # noqa: E402
from flightlog.store import SqliteStore, Store  # noqa: E402
from flightlog.store.postgres import PostgresStore  # noqa: E402
from flightlog.testing.store_contract import chained_rows  # noqa: E402

CONCURRENCY = (1, 8, 32)
PAYLOAD = {"note": "x" * 160, "n": 0}


def _threads(count: int, work: Callable[[int], None]) -> float:
    """Run ``work(i)`` on ``count`` threads released together; wall seconds."""
    barrier = threading.Barrier(count + 1)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        barrier.wait()
        try:
            work(i)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    barrier.wait()
    started = time.perf_counter()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - started


def _recorder_work(stores: Callable[[int], Store], per: int) -> Callable[[int], None]:
    def work(i: int) -> None:
        store = stores(i)
        recorder = Recorder.create(store, session_id=f"b{i}-{uuid.uuid4().hex[:6]}")
        for n in range(per):
            recorder.record_custom("bench", {**PAYLOAD, "n": n})

    return work


def _store_work(stores: Callable[[int], Store], per: int) -> Callable[[int], None]:
    rows, _ = chained_rows([{**PAYLOAD, "n": n} for n in range(per)])

    def work(i: int) -> None:
        store = stores(i)
        sid = f"s{i}-{uuid.uuid4().hex[:6]}"
        from flightlog.store import SessionRecord

        store.create_session(SessionRecord(sid))
        tree = CompactRange()
        from flightlog.ledger import leaf_hash
        from flightlog.store import SessionHead

        for row in rows:
            tree.append(leaf_hash(row.event_bytes))
            store.append_events(sid, [row], SessionHead(row.seq, row.hash, tree.root().hex()))

    return work


def bench_sqlite(kind: str, c: int, per: int, *, group_commit: bool = True) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(Path(tmp) / "bench.db", busy_timeout_ms=60_000, group_commit=group_commit)
        try:
            work = (_recorder_work if kind == "recorder" else _store_work)(lambda _i: store, per)
            return _threads(c, work)
        finally:
            store.close()


def bench_postgres(url: str, kind: str, c: int, per: int, *, group_commit: bool = True) -> float:
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    store = PostgresStore(url, schema=schema, max_size=max(4, c + 2), group_commit=group_commit)
    try:
        work = (_recorder_work if kind == "recorder" else _store_work)(lambda _i: store, per)
        return _threads(c, work)
    finally:
        store.close()
        _drop(url, schema)


def _drop(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def bench_eventsourcing(url: str, c: int, per: int) -> float | None:
    try:
        from eventsourcing.persistence import StoredEvent
        from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
    except ImportError:
        return None
    from psycopg.conninfo import conninfo_to_dict

    info = conninfo_to_dict(url)
    schema = f"bench_es_{uuid.uuid4().hex[:10]}"
    _create_schema(url, schema)
    datastore = PostgresDatastore(
        dbname=str(info.get("dbname", "postgres")),
        host=str(info.get("host", "127.0.0.1")),
        port=str(info.get("port", 5432)),
        user=str(info.get("user", "postgres")),
        password=str(info.get("password", "")),
        pool_size=max(4, c + 2),
        schema=schema,
    )
    try:
        recorder = PostgresApplicationRecorder(datastore)
        recorder.create_table()
        rows, _ = chained_rows([{**PAYLOAD, "n": n} for n in range(per)])

        def work(_i: int) -> None:
            originator = uuid.uuid4()
            for n, row in enumerate(rows):
                recorder.insert_events([StoredEvent(originator, n + 1, "bench.Custom", row.event_bytes)])

        return _threads(c, work)
    finally:
        datastore.close()
        _drop(url, schema)


def _create_schema(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")


def round_trips(url: str, appends: int = 50) -> float:
    """Round trips per ``Recorder.append`` on PostgreSQL (steady state, the runs projector on), counted from
    a libpq protocol trace of the store's one connection: each ``Sync`` or simple ``Query`` is one wait."""
    from psycopg import pq

    schema = f"bench_rt_{uuid.uuid4().hex[:10]}"
    store = PostgresStore(url, schema=schema, min_size=1, max_size=1)
    try:
        recorder = Recorder.create(store, session_id="rt")
        recorder.record_custom("bench", PAYLOAD)
        with tempfile.TemporaryDirectory() as tmp, (Path(tmp) / "trace").open("w") as sink:
            with store._pool.connection() as conn:
                pgconn = conn.pgconn
            pgconn.trace(sink.fileno())
            pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
            try:
                for n in range(appends):
                    recorder.record_custom("bench", {**PAYLOAD, "n": n})
            finally:
                pgconn.untrace()
            sent = [line.split("\t") for line in Path(sink.name).read_text().splitlines()]
        waits = sum(1 for parts in sent if parts[0] == "F" and parts[2] in ("Sync", "Query"))
        return waits / appends
    finally:
        store.close()
        _drop(url, schema)


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def json_rows(url: str, events: int, rounds: int) -> list[dict[str, Any]]:
    """The issue-19 rows (bench/all.py's schema, BENCHSCHEMA.md): flightlog's PostgreSQL recorder (the
    default pooled store, one commit per append) against eventsourcing's recorder, alternating within each
    round, per C; and the round trips per append."""
    rows: list[dict[str, Any]] = []
    trips = round_trips(url)
    rows.append(
        {
            "path": "PostgreSQL round trips per append",
            "flightlog": f"{trips:.2f}",
            "floor": "2 (target)",
            "ratio": None,
            "spread": None,
            "target": "<= 2",
            "met": trips <= 2,
            "detail": "libpq protocol trace: Sync/Query messages per Recorder.append (runs projector on)",
        }
    )
    for c in CONCURRENCY:
        per = max(1, events // c)
        total = per * c
        ours: list[float] = []
        peer: list[float] = []
        for n in range(rounds):
            order = ("flightlog", "eventsourcing") if n % 2 == 0 else ("eventsourcing", "flightlog")
            for side in order:
                if side == "flightlog":
                    ours.append(total / bench_postgres(url, "recorder", c, per, group_commit=False))
                else:
                    seconds = bench_eventsourcing(url, c, per)
                    if seconds is None:
                        rows.append(_missing_peer(c))
                        break
                    peer.append(total / seconds)
            if not peer:
                break
            _log(f"  C={c} round {n + 1}: flightlog {ours[-1]:,.0f}/s, eventsourcing {peer[-1]:,.0f}/s")
        if not peer:
            continue
        ratios = [a / b for a, b in zip(ours, peer, strict=True)]
        ratio = _median(ratios)
        rows.append(
            {
                "path": f"PostgreSQL recorder append vs eventsourcing's recorder, C={c}",
                "flightlog": f"{_median(ours):,.0f} events/s",
                "floor": f"{_median(peer):,.0f} events/s",
                "ratio": round(ratio, 3),
                "spread": [round(min(ratios), 3), round(max(ratios), 3)],
                "target": ">= 1.0x",
                "met": ratio >= 1.0,
                "detail": f"{total:,} appends, 1 event/commit, synchronous_commit=on, {rounds} rounds alternated",
            }
        )
    return rows


def _missing_peer(c: int) -> dict[str, Any]:
    return {
        "path": f"PostgreSQL recorder append vs eventsourcing's recorder, C={c}",
        "flightlog": None,
        "floor": None,
        "ratio": None,
        "spread": None,
        "target": ">= 1.0x",
        "met": None,
        "detail": "skipped: eventsourcing not installed (pip install -e '.[bench]')",
    }


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--pg", default=os.environ.get("FLIGHTLOG_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
    )
    parser.add_argument(
        "--events", type=int, default=None, help="events per configuration (split over sessions; 3000)"
    )
    parser.add_argument("--rounds", type=int, default=None, help="--json: alternated rounds per C (3)")
    parser.add_argument("--quick", action="store_true", help="--json: 600 events, 1 round (< 60 s)")
    parser.add_argument(
        "--json",
        action="store_true",
        help="issue-19 rows only (flightlog vs eventsourcing on PostgreSQL, round trips) as JSON on stdout",
    )
    args = parser.parse_args()
    events = args.events or (600 if args.quick else 3000)
    if args.json:
        rounds = args.rounds or (1 if args.quick else 3)
        print(json.dumps({"rows": json_rows(args.pg, events, rounds)}, indent=2))
        return 0
    results: dict[str, dict[int, float | None]] = {}
    for c in CONCURRENCY:
        per = max(1, events // c)
        total = per * c
        runs: dict[str, float | None] = {
            "sqlite-recorder": bench_sqlite("recorder", c, per),
            "sqlite-recorder-solo": bench_sqlite("recorder", c, per, group_commit=False),
            "sqlite-store": bench_sqlite("store", c, per),
            "postgres-recorder": bench_postgres(args.pg, "recorder", c, per),
            "postgres-recorder-solo": bench_postgres(args.pg, "recorder", c, per, group_commit=False),
            "postgres-store": bench_postgres(args.pg, "store", c, per),
            "eventsourcing-postgres": bench_eventsourcing(args.pg, c, per),
        }
        for name, seconds in runs.items():
            results.setdefault(name, {})[c] = None if seconds is None else total / seconds
    names = list(results)
    print(f"{'events/s':<24}" + "".join(f"{f'C={c}':>12}" for c in CONCURRENCY))
    for name in names:
        cells = "".join(f"{(v and f'{v:,.0f}') or 'n/a':>12}" for v in results[name].values())
        print(f"{name:<24}{cells}")
    print("\nratios (same C):")
    pairs = [
        ("sqlite-recorder", "sqlite-recorder-solo"),
        ("postgres-recorder", "postgres-recorder-solo"),
        ("postgres-recorder", "sqlite-recorder"),
        ("postgres-store", "sqlite-store"),
        ("postgres-store", "eventsourcing-postgres"),
        ("postgres-recorder-solo", "eventsourcing-postgres"),
        ("postgres-recorder", "eventsourcing-postgres"),
        ("postgres-recorder", "postgres-store"),
    ]
    for a, b in pairs:
        ratios = [_ratio(results[a][c], results[b][c]) for c in CONCURRENCY]
        print(f"  {a} / {b}: " + ", ".join(f"C={c} {r}" for c, r in zip(CONCURRENCY, ratios, strict=True)))
    print("\ngrowth with concurrency (events/s at C / events/s at C=1):")
    for name in names:
        base = results[name][CONCURRENCY[0]]
        cells = ", ".join(f"C={c} {_ratio(results[name][c], base)}" for c in CONCURRENCY[1:])
        print(f"  {name}: {cells}")
    print(f"\nround trips per PostgreSQL append: {round_trips(args.pg):.2f}")
    if results["eventsourcing-postgres"][1] is None:
        print("\neventsourcing not installed: pip install -e '.[bench]' to compare")
    return 0


def _ratio(a: Any, b: Any) -> str:
    return f"{a / b:.2f}x" if a and b else "n/a"


if __name__ == "__main__":
    raise SystemExit(main())
