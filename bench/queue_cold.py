"""The dashboard's approvals queue, cold, against two raw floors, in process CPU time and wall time.

Run ``python bench/queue_cold.py --db DB [--src DIR] [--rounds 3] [--calls 3]`` on a store ``bench/runs.py
--db DB`` recorded (100,000 runs). Each round times, interleaved, ``calls`` of each:

* the queue as ``bench/runs.py``'s 24th row computes it: ``PendingCache().queue(limit=QUEUE_PAGE)`` on a
  fresh cache, then its ``marks`` for the run tree (the newest ``MAX_RUNS`` sessions);
* ``floor``: ``bench/runs.py``'s floor, the sessions whose stored bytes hold the wait mark (by the store's
  clause: the ``events_suspended`` partial index, or one scan on a store without it);
* ``same work``: what the cold call must read, raw: the pass's statement (the sessions holding the mark, as
  the floor finds them, each one's last seq and its rows at seq 0, last-1 and last), then the keys statement
  (``Store.session_keys_among``: the keys of the sessions the pass found, passed as one JSON parameter,
  and of those whose row says ``suspended``, in listing order, each flagged before the page's start or
  not), ``fetchall()`` only, nothing decoded. The ids it passes are the pass's answer, computed once
  before the timings.

Process CPU time (``time.process_time``) is printed beside wall time: on a shared machine the CPU time of
the same work moves much less with the neighbours' load. Nothing here asserts on timings.
"""

from __future__ import annotations

import argparse
import gc
import json
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _tree import ROOT, checked, src_arg  # bench/ is sys.path[0] when a script runs

_SRC = checked(src_arg(sys.argv) or ROOT / "src", "--src")
sys.path.insert(0, str(_SRC))

from flightlog.kernel.rowcheck import SUSPENDED_MARK, sessions_may_wait  # noqa: E402
from flightlog.store.sqlite import SqliteStore  # noqa: E402
from flightlog.web.views import MAX_RUNS, QUEUE_PAGE, PendingCache  # noqa: E402

INDEX = "events_suspended"
"""The partial index of the events holding the wait mark (``flightlog.store.ddl.SQLITE_EVENTS_SUSPENDED``):
a store recorded before its migration has it once a writable handle has opened it."""
MARKED = f"instr(CAST(event AS BLOB), X'{SUSPENDED_MARK.hex()}') > 0"
"""The store's clause for the wait mark (``SqliteStore.MARK_CONTAINS``: the mark as a literal), word for word
the ``events_suspended`` partial index's ``WHERE``, so SQLite reads that index when the store has it."""
FLOOR = f"SELECT DISTINCT session_id FROM events WHERE {MARKED}"
"""``bench/runs.py``'s floor for the row (its ``_MARKED``)."""
_COLUMNS = (
    "created_at_ms, session_id, CAST(session_id AS TEXT), CAST(status AS TEXT), CAST(head_seq AS INTEGER), "
    "CAST(head_hash AS TEXT) FROM sessions WHERE "
)
_AMONG = "session_id IN (SELECT value FROM json_each(?))"
KEYS = (
    "WITH b(c, s) AS (SELECT created_at_ms, session_id FROM sessions "
    "ORDER BY created_at_ms, session_id LIMIT 1 OFFSET ?), "
    f"k(c, s, sid, st, hs, hh) AS (SELECT {_COLUMNS}{_AMONG} UNION ALL "
    f"SELECT {_COLUMNS}CAST(status AS TEXT) = ? AND NOT ({_AMONG})) "
    "SELECT (k.c, k.s) < (SELECT c, s FROM b), sid, st, hs, hh FROM k ORDER BY k.c, k.s"
)
"""``SqlStore.session_keys_among``'s statement on SQLite (the first page: ``start`` 0)."""
PASS = (
    f"WITH m AS MATERIALIZED (SELECT DISTINCT session_id FROM {{events}} WHERE {MARKED}), "
    "t AS MATERIALIZED (SELECT session_id, (SELECT MAX(x.seq) FROM events x "
    "WHERE x.session_id = m.session_id) AS last FROM m) "
    "SELECT t.session_id, t.last, "
    "(SELECT e.event FROM events e WHERE e.session_id = t.session_id AND e.seq = 0), "
    "(SELECT e.event FROM events e WHERE e.session_id = t.session_id AND e.seq = t.last - 1), "
    "(SELECT e.event FROM events e WHERE e.session_id = t.session_id AND e.seq = t.last) FROM t"
)
"""The pass's statement, ``{events}`` the table as it reads it: ``events`` (the ``events_suspended`` index)
on a store that has the index, ``events NOT INDEXED`` (the byte search of every event, in storage order)
on one recorded before its migration."""


def _time(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """``(wall ms, process CPU ms, value)`` of one call, on a collected heap with the cyclic GC paused."""
    gc.collect()
    gc.disable()
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        value = fn()
        return (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000, value
    finally:
        gc.enable()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--db", type=Path, required=True, help="a store bench/runs.py --db recorded")
    parser.add_argument("--src", type=Path, default=ROOT / "src", help="flightlog source tree to measure")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=3, help="calls of each per round")
    args = parser.parse_args()
    if not args.db.is_file():
        parser.error(f"--db {args.db}: no such file (record it with bench/runs.py --db {args.db})")
    raw = sqlite3.connect(f"file:{args.db}?mode=ro", uri=True)
    indexed = raw.execute(f"SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = '{INDEX}'").fetchone()
    marked = PASS.format(events="events" if indexed else "events NOT INDEXED")
    times: dict[str, list[tuple[float, float]]] = {"queue": [], "floor": [], "same work": []}
    with SqliteStore(args.db, read_only=True) as store:
        tree = [r.session_id for r in store.list_sessions()][-MAX_RUNS:]

        def queue() -> int:
            found = PendingCache().queue(store, limit=QUEUE_PAGE)
            found.marks(tree)
            return found.total

        def floor() -> int:
            return len(raw.execute(FLOOR).fetchall())

        ids = json.dumps(sorted(sessions_may_wait(store)))

        def same() -> int:
            found = len(raw.execute(marked).fetchall())
            raw.execute(KEYS, (0, ids, "suspended", ids)).fetchall()
            return found

        cases = {"queue": queue, "floor": floor, "same work": same}
        for fn in cases.values():
            fn()  # warm-up
        for _ in range(args.rounds):
            for _ in range(args.calls):
                counts = {}
                for name, fn in cases.items():
                    wall, cpu, counts[name] = _time(fn)
                    times[name].append((wall, cpu))
                if len(set(counts.values())) != 1:
                    raise AssertionError(f"the queue and the floors count different sessions: {counts}")
    raw.close()
    print(
        f"src {_SRC}; {args.db}: "
        + (
            f"with the {INDEX} index; "
            if indexed
            else f"without the {INDEX} index (a writable open adds it); "
        )
        + f"{args.rounds} rounds x {args.calls} calls; medians (min-max)"
    )
    for name, pairs in times.items():
        walls, cpus = [w for w, _ in pairs], [c for _, c in pairs]
        print(
            f"  {name:<10} wall {statistics.median(walls):7.1f} ms ({min(walls):.0f}-{max(walls):.0f})"
            f"   CPU {statistics.median(cpus):7.1f} ms ({min(cpus):.0f}-{max(cpus):.0f})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
