"""LangGraph ``MessagesState`` threads on ``FlightlogSaver`` side by side with LangGraph's ``SqliteSaver``.

Run ``.venv/bin/python bench/langgraph.py [--turns 250,500,1000] [--rounds 5] [--quick] [--json]``
(``pip install -e '.[bench]'`` installs the peer, ``langgraph-checkpoint-sqlite``; without it only
flightlog's own figures are printed and ``met`` says nothing about the peer).

The thread: a ``MessagesState`` graph with one ``model`` node that answers each user message with a
scripted ``AIMessage`` (~300 characters of text, response metadata and token usage as a chat model's); one
turn = one ``graph.invoke`` with a new ~120-character ``HumanMessage``. Each saver records the same turns in
its own SQLite file (flightlog: ``synchronous=FULL`` and the default notary, the user's log key, as a user
has it; ``SqliteSaver``: its defaults).

Rows (issue 19's table):

* ``LangGraph MessagesState: disk per turn``: the database file's size (after a WAL checkpoint, WAL
  included) at each of ``--turns``; printed as bytes per turn over each interval (0→250, 250→500,
  500→1000), the ratio of the last interval's bytes per turn to the first's (``flat`` means <= 1.25), and
  bytes per turn against the raw message bytes per turn (each message serialized once by LangGraph's
  serializer: the least any saver stores). Target: flat, and <= 2x the raw message bytes.
* ``LangGraph first get_state in a new process``: a fresh process opens the file and calls
  ``graph.get_state`` on the thread at the largest ``--turns`` (imports and opening excluded: only the
  call is timed); the median over ``--rounds`` processes, ratio flightlog / ``SqliteSaver``. Target <= 2x.
  The detail gives flightlog against a same-work floor timed in the same rounds (:func:`_chain`:
  ``SqliteSaver``'s ``get_state`` plus reading and sha256-chaining every row of the thread from flightlog's
  file in raw ``sqlite3``, in one process) and each column's process CPU.

The disk row's floor column also gives a **same-work disk floor** measured in the same run, same turns
(``bench/_langgraph_floor.py``, raw ``sqlite3`` + ``hashlib`` + LangGraph's serde, fed every ``put`` and
``put_writes`` flightlog's saver receives): each message once, each checkpoint and each ``put_writes`` as
one serialized row, a binary chain hash and RFC 9162 leaf hash per row, and the thread's and the log index's
signed notes each time the graph stops; ``floor / raw`` says whether 2x raw is reachable at all, and the
detail gives flightlog / floor.

Before the rows it prints where flightlog's bytes per turn go at the largest ``--turns``
(:func:`_breakdown`), then the floor's.

Nothing here asserts on timings. Temporary files live under ``TMPDIR`` and are removed at exit.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
# this file is named langgraph.py: its directory on sys.path would shadow the langgraph package
sys.path[:] = [p for p in sys.path if Path(p or os.getcwd()).resolve() != _HERE]
_SRC = Path(__file__).resolve().parents[1] / "src"
if _SRC.is_dir() and str(_SRC) not in sys.path:
    sys.path.insert(0, str(_SRC))  # measure this checkout, installed or not

DISK_TARGET = 2.0
FLAT = 1.25
GET_TARGET = 2.0
USER = "Please look at the quarterly figures again and tell me which region grew fastest, and by how much. #"
ANSWER = (
    "Looking at the figures you shared, the northern region grew fastest this quarter, by about 14 percent "
    "over the previous one, driven mostly by the two new stores; the southern region was flat and the "
    "western region fell slightly because of the closed warehouse. Shall I break it down by month? #"
)


def _graph(saver: Any) -> Any:
    from langchain_core.messages import AIMessage
    from langgraph.graph import START, MessagesState, StateGraph

    def model(state: MessagesState) -> dict[str, Any]:
        n = len(state["messages"])
        meta = {"model_name": "gpt-4o-mini", "model_provider": "openai", "finish_reason": "stop"}
        usage = {"input_tokens": 30 * n, "output_tokens": 70, "total_tokens": 30 * n + 70}
        return {
            "messages": [
                AIMessage(content=f"{ANSWER}{n}", response_metadata=meta, usage_metadata=usage)  # type: ignore[arg-type]
            ]
        }

    g = StateGraph(MessagesState)
    g.add_node("model", model)
    g.add_edge(START, "model")
    return g.compile(checkpointer=saver)


def _open_saver(kind: str, path: Path) -> tuple[Any, Any]:
    """A saver of ``kind`` on ``path`` and what to close after it."""
    if kind == "flightlog":
        import flightlog
        from flightlog.integrations.langgraph import FlightlogSaver

        store = flightlog.open_store(str(path))
        return FlightlogSaver(store), store
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(str(path), check_same_thread=False)
    return SqliteSaver(conn), conn


def _size(path: Path) -> int:
    raw = sqlite3.connect(str(path))
    try:
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        raw.close()
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def _floor_module() -> Any:
    """``bench/_langgraph_floor.py`` (bench/ is off ``sys.path``: this file would shadow ``langgraph``)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_langgraph_floor", _HERE / "_langgraph_floor.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _record(
    kind: str, path: Path, marks: list[int], floor_path: Path | None = None
) -> tuple[dict[int, int], int, dict[int, int]]:
    """Run ``max(marks)`` turns; the file size at each mark, the raw message bytes of the thread, and (with
    ``floor_path``) the same-work disk floor's file size at each mark, fed the same turns' ``put`` and
    ``put_writes`` calls (``bench/_langgraph_floor.py``)."""
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    saver, closer = _open_saver(kind, path)
    floor = None
    if floor_path is not None:
        module = _floor_module()
        floor = module.DiskFloor(floor_path, origin="flightlog.local/" + "0" * 32)
        module.spy(saver, floor)
    graph = _graph(saver)
    cfg = {"configurable": {"thread_id": "bench"}}
    sizes: dict[int, int] = {}
    floor_sizes: dict[int, int] = {}
    try:
        for turn in range(1, max(marks) + 1):
            graph.invoke({"messages": [HumanMessage(f"{USER}{turn}")]}, cfg)
            if floor is not None:
                floor.stop(cfg)
            if turn in marks:
                sizes[turn] = _size(path)
                if floor_path is not None:
                    floor_sizes[turn] = _size(floor_path)
        messages = graph.get_state(cfg).values["messages"]
    finally:
        closer.close()
        if floor is not None:
            floor.close()
    serde = JsonPlusSerializer()
    raw = sum(len(serde.dumps_typed(m)[1]) for m in messages)
    return sizes, raw, floor_sizes


_GET = """
import sys, time
sys.path.insert(0, {src!r}); sys.path.insert(0, {bench!r})
from langgraph_bench import _graph, _open_saver, _chain
from pathlib import Path
saver, closer = _open_saver({kind!r}, Path({path!r}))
graph = _graph(saver)
start, cpu = time.perf_counter(), time.process_time()
state = graph.get_state({{"configurable": {{"thread_id": "bench"}}}})
if {chain!r}:
    _chain({chain!r})
elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
assert len(state.values["messages"]) == {expect}, len(state.values["messages"])
print(elapsed, cpu)
"""


def _chain(path: str) -> None:
    """The least a verified read adds to ``SqliteSaver``'s ``get_state``: read every row of the thread's
    session from flightlog's file (raw ``sqlite3``) and check each row's chain link and hash
    (``sha256(prev_hash ‖ u64_le(seq) ‖ event_bytes)``, ARCHITECTURE.md invariant 4), as flightlog must
    before anything of the thread reaches LangGraph's serde."""
    import hashlib

    conn = sqlite3.connect(path)
    try:
        prev = "GENESIS"
        rows = conn.execute(
            "SELECT seq, event, prev_hash, hash FROM events WHERE session_id = ? ORDER BY seq",
            ("langgraph:bench",),
        )
        for seq, event, prev_hash, hash_ in rows:
            digest = hashlib.sha256(prev.encode("ascii") + seq.to_bytes(8, "little") + event).hexdigest()
            if prev_hash != prev or digest != hash_:
                raise SystemExit(f"chain broken at seq {seq}")
            prev = hash_
    finally:
        conn.close()


def _first_get(
    kind: str, path: Path, expect: int, bench_dir: Path, chain: Path | None = None
) -> tuple[float, float]:
    """Seconds (wall, process CPU) one new process spends in ``graph.get_state`` (plus, with ``chain``,
    :func:`_chain` on that flightlog file: the same-work floor)."""
    code = _GET.format(
        src=str(_SRC),
        bench=str(bench_dir),
        kind=kind,
        path=str(path),
        expect=expect,
        chain=str(chain) if chain else "",
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=600
    )
    wall, cpu = out.stdout.strip().splitlines()[-1].split()
    return float(wall), float(cpu)


def _peer() -> bool:
    try:
        import langgraph.checkpoint.sqlite  # noqa: F401
    except ImportError:
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--turns", default=None, help="comma-separated marks (250,500,1000; --quick: 25,50,100)"
    )
    parser.add_argument("--rounds", type=int, default=None, help="new processes per saver (5; --quick: 3)")
    parser.add_argument("--quick", action="store_true", help="a short run (< 60 s)")
    parser.add_argument("--json", action="store_true", help="print the issue 19 rows as JSON")
    args = parser.parse_args()
    marks = [int(t) for t in (args.turns or ("25,50,100" if args.quick else "250,500,1000")).split(",")]
    rounds = args.rounds or (3 if args.quick else 5)
    kinds = ["flightlog", *(["sqlite"] if _peer() else [])]
    tmp = Path(tempfile.mkdtemp(prefix="flightlog-bench-lg-"))
    log = sys.stderr if args.json else sys.stdout
    try:
        shutil.copy(__file__, tmp / "langgraph_bench.py")  # importable by the get_state processes
        env_home = tmp / "home"
        os.environ.setdefault("FLIGHTLOG_KEY_DIR", str(env_home / "keys"))
        os.environ.setdefault("FLIGHTLOG_HEAD_DIR", str(env_home / "heads"))
        disk: dict[str, dict[int, int]] = {}
        raw = 0
        gets: dict[str, list[float]] = {}
        cpus: dict[str, list[float]] = {}
        for kind in kinds:
            path = tmp / f"{kind}.db"
            start = time.perf_counter()
            floor_path = tmp / "floor.db" if kind == "flightlog" else None
            disk[kind], raw, floor_sizes = _record(kind, path, marks, floor_path)
            if floor_sizes:
                disk["floor"] = floor_sizes
            print(f"{kind}: {max(marks)} turns recorded in {time.perf_counter() - start:.1f} s", file=log)
        print(_breakdown(tmp / "flightlog.db", max(marks), raw), file=log)
        if "floor" in disk:
            print(_floor_module().breakdown(tmp / "floor.db", max(marks)), file=log)
        expect = 2 * max(marks)
        for _ in range(rounds):  # interleaved, so load drifts touch every column alike
            runs = [(kind, kind, None) for kind in kinds]
            if "sqlite" in kinds:
                runs.append(("floor", "sqlite", tmp / "flightlog.db"))
            for column, kind, chain in runs:
                wall, cpu = _first_get(kind, tmp / f"{kind}.db", expect, tmp, chain=chain)
                gets.setdefault(column, []).append(wall)
                cpus.setdefault(column, []).append(cpu)
        rows = _rows(disk, raw, gets, marks, cpus)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        print(json.dumps({"rows": rows}))
        return
    for row in rows:
        ratio = "-" if row["ratio"] is None else f"{row['ratio']:.2f}"
        print(
            f"{row['path']}\n  flightlog: {row['flightlog']}\n  floor: {row['floor']}\n  ratio {ratio}  "
            f"target {row['target']}  met {row['met']}  ({row['detail']})"
        )


def _breakdown(path: Path, turns: int, raw: int) -> str:
    """Where flightlog's bytes per turn go at ``turns`` (SQLite's ``dbstat``: pages per table and index,
    their unused bytes; event bytes per kind, ``custom`` per ``custom_kind``), as printable lines."""
    conn = sqlite3.connect(str(path))
    try:
        lines = [f"flightlog bytes per turn at T={turns} (raw messages {raw / turns:,.0f}):"]
        kinds = conn.execute(
            "SELECT CASE kind WHEN 'custom' THEN json_extract(event, '$.custom_kind') ELSE kind END, "
            "count(*), sum(length(event)), sum(length(prev_hash) + length(hash)) FROM events "
            "GROUP BY 1 ORDER BY 3 DESC"
        ).fetchall()
        for kind, count, size, hashes in kinds:
            lines.append(
                f"  event {kind:<22} {size / turns:>7,.0f}  ({count / turns:.1f} rows/turn, "
                f"{size / count:,.0f} B each; chain hashes {hashes / turns:,.0f})"
            )
        content, keys = conn.execute("SELECT sum(size_bytes), sum(length(sha256)) FROM artifacts").fetchone()
        lines.append(f"  artifact content               {content / turns:>7,.0f}  (keys {keys / turns:,.0f})")
        try:
            pages = conn.execute(
                "SELECT name, sum(pgsize), sum(payload), sum(unused) FROM dbstat GROUP BY name ORDER BY 2 DESC"
            ).fetchall()
        except sqlite3.OperationalError:  # sqlite3 built without dbstat
            pages = []
        for name, size, payload, unused in pages:
            if size / turns >= 10:
                lines.append(
                    f"  pages {name:<24} {size / turns:>7,.0f}  (payload {payload / turns:,.0f}, "
                    f"unused {unused / turns:,.0f})"
                )
    finally:
        conn.close()
    return "\n".join(lines)


def _per_turn(sizes: dict[int, int], marks: list[int]) -> list[float]:
    points = [0, *marks]
    base = {0: 0, **sizes}
    return [(base[b] - base[a]) / (b - a) for a, b in itertools.pairwise(points)]


def _rows(
    disk: dict[str, dict[int, int]],
    raw: int,
    gets: dict[str, list[float]],
    marks: list[int],
    cpus: dict[str, list[float]],
) -> list[dict[str, Any]]:
    top = max(marks)
    ours = _per_turn(disk["flightlog"], marks)
    raw_turn = raw / top
    growth = ours[-1] / ours[1] if len(ours) > 2 else ours[-1] / ours[0]  # first interval holds the schema
    vs_raw = ours[-1] / raw_turn
    label = " / ".join(f"{b / 1024:.1f} KB" for b in ours)
    peer = ""
    if "sqlite" in disk:
        theirs = _per_turn(disk["sqlite"], marks)
        peer = "SqliteSaver " + " / ".join(f"{b / 1024:.1f} KB" for b in theirs) + " per turn; "
    same = ""
    bound = ""
    if "floor" in disk:
        floor = _per_turn(disk["floor"], marks)
        same = (
            "same-work floor " + " / ".join(f"{b / 1024:.2f} KB" for b in floor) + f" per turn "
            f"(floor / raw {floor[-1] / raw_turn:.2f}x); "
        )
        bound = (
            f"; flightlog / same-work floor {ours[-1] / floor[-1]:.2f}x; the floor alone is "
            f"{floor[-1] / raw_turn:.2f}x raw, so {DISK_TARGET}x raw is "
            f"{'reachable' if floor[-1] / raw_turn <= DISK_TARGET else 'out of reach for any saver with these guarantees'}"
        )
    rows: list[dict[str, Any]] = [
        {
            "path": "LangGraph MessagesState: disk per turn",
            "flightlog": f"{label} per turn over turns {marks} ({disk['flightlog'][top] / 1e6:.2f} MB at T={top})",
            "floor": f"{same}{peer}raw messages {raw_turn / 1024:.2f} KB per turn",
            "ratio": round(vs_raw, 2),
            "spread": None,
            "target": f"flat (last/second interval <= {FLAT}) and <= {DISK_TARGET}x raw",
            "met": growth <= FLAT and vs_raw <= DISK_TARGET,
            "detail": f"bytes per turn, last interval / second: {growth:.2f}; ratio = last interval / raw{bound}",
        }
    ]
    mine = statistics.median(gets["flightlog"]) * 1000

    def cpu_ms(column: str) -> float:
        return statistics.median(cpus[column]) * 1000

    if "sqlite" in gets:
        floor = statistics.median(gets["sqlite"]) * 1000
        same = statistics.median(gets["floor"]) * 1000
        ratios = [a / b for a, b in zip(gets["flightlog"], gets["sqlite"], strict=True)]
        same_ratios = [a / b for a, b in zip(gets["flightlog"], gets["floor"], strict=True)]
        rows.append(
            {
                "path": "LangGraph first get_state in a new process",
                "flightlog": f"{mine:.1f} ms at T={top}",
                "floor": f"SqliteSaver {floor:.1f} ms; same-work floor {same:.1f} ms",
                "ratio": round(mine / floor, 2),
                "spread": [round(min(ratios), 2), round(max(ratios), 2)],
                "target": f"<= {GET_TARGET}x",
                "met": mine / floor <= GET_TARGET,
                "detail": (
                    f"median of {len(gets['flightlog'])} processes, each saver's interleaved; only the "
                    f"get_state call is timed. Against the same-work floor (SqliteSaver's get_state plus "
                    f"reading and sha256-chaining every row of the thread in raw sqlite3, in one process): "
                    f"{mine / same:.2f}x (spread {min(same_ratios):.2f}-{max(same_ratios):.2f}). "
                    f"Process CPU of the call (median): flightlog {cpu_ms('flightlog'):.1f} ms, "
                    f"SqliteSaver {cpu_ms('sqlite'):.1f} ms, same-work floor {cpu_ms('floor'):.1f} ms"
                ),
            }
        )
    else:
        rows.append(
            {
                "path": "LangGraph first get_state in a new process",
                "flightlog": f"{mine:.1f} ms at T={top}",
                "floor": "SqliteSaver not installed (pip install -e '.[bench]')",
                "ratio": None,
                "spread": None,
                "target": f"<= {GET_TARGET}x",
                "met": None,
                "detail": "peer absent",
            }
        )
    return rows


if __name__ == "__main__":
    main()
