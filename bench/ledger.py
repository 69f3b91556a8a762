"""Ledger benchmarks: flightlog against raw floors measured in the same run, on the same machine.

Run ``python bench/ledger.py [--turns 10000] [--appends 2000] [--quick] [--json] [--profile] [--no-io]``.

Every flightlog number is printed next to a *floor*: the least work any correct implementation of the
same guarantee must do, written directly against ``sqlite3``/``hashlib``/``json`` and measured in this
process side by side with it (appends alternate 10-event blocks between flightlog and its floors, the
order rotating every block; verify and replay rotate the order every round and report the median), so
both see the same disk, CPU and neighbours. Ratios are always ``flightlog throughput / floor throughput`` (1.0 = as fast as the floor;
higher is better), so they carry over between machines far better than absolute numbers do.

Workload: a synthetic but realistic agent session. One turn is four events: ``checkpoint_taken``,
``llm_completed`` (1-2 KB of assistant text plus one tool call), ``tool_requested`` and ``tool_completed``
(~2 KB of tool output with quotes, backslashes, newlines and some non-ASCII text, so JSON escaping is
exercised). A session of N turns starts with ``run_started`` and holds 4N + 1 events (~1 KB each).

1. **Durable appends/s.** flightlog: ``Recorder.append`` (one event per transaction, WAL,
   ``synchronous=FULL``), which encodes the pydantic event to RFC 8785 bytes, chains and Merkle-hashes it,
   checks the authority epoch, inserts the row and moves the session head. Floor: the same canonical bytes
   (precomputed, so encoding is *not* in the floor), the same ``events`` table shape (``(session_id, seq)``
   primary key, blob, ``prev_hash``, ``hash``), WAL, ``synchronous=FULL``, one sha256 per row and one
   ``BEGIN IMMEDIATE``/``INSERT``/``COMMIT`` per event. This is the irreducible cost of "each event is
   hash-chained and fsynced before append returns"; everything flightlog adds on top (encoding, the Merkle
   leaf and tree head, the epoch check, the session-row update) shows up in the ratio. At FULL the fsync
   dominates, so the ratio shows whether the overhead matters for durable writes; the same pair at
   ``synchronous=NORMAL`` (no fsync per commit) exposes the pure CPU overhead, and ``append_many`` of 10
   events per transaction against a raw ``executemany`` of 10 shows the batched path. Each row also
   prints the paired ratio (windows of 50 events that ran interleaved, so both sides saw the same disk:
   median and quartiles). The FULL rows add two things that do not move with the disk's speed: the I/O
   per commit of each side, counted with ``strace`` in a child process per side (syncs, WAL frames and
   bytes, pages checkpointed; ``--no-io`` skips it), and each side's time per event split into COMMIT
   (timed by the floors; flightlog's I/O is the same-work floor's) and the rest, which gives the COMMIT
   time at which flightlog, and the same-work floor, would reach the row's target.
2. **Verify MB/s.** ``verify_session(store, sid, decode=False)`` and ``decode=True`` over an N-turn
   session, against ``hashlib.sha256`` throughput over the same payloads already in memory (one
   ``sha256(payload)`` per event in a loop): the speed of the one primitive verification cannot avoid.
   Note that flightlog's rules hash every byte *twice* (chain hash and RFC 9162 leaf hash), so 0.5x is
   the ceiling even with free I/O. A second floor, "read rows + 1 sha256/row", streams the same rows out
   of SQLite with one cursor and recomputes the chain hash only: the cost of the I/O plus one pass.
3. **Replay.** ``flightlog.sessions.replay_session`` (what ``flightlog replay`` and the dashboard run:
   read, decode every row, fold), against reading every row with one raw cursor and ``json.loads`` of each:
   the least work that turns the stored bytes back into Python values. The gap is pydantic validation,
   the collector walking the kept messages, and the fold. A second floor, "same work", parses every row
   and keeps the transcript as plain values, *without validating anything*: a weaker floor than replay's
   work (every event validated, so a bad one raises naming its seq), so a target it misses is missed by
   anything doing that work plus validation.
4. **Memory flat in session length.** ``tracemalloc`` peak of ``verify_session`` (both modes) and of an
   export-style stream (iterate ``read_events`` and write each row's canonical bytes to ``/dev/null``) at
   N/10 and N turns. Both stream with keyset-paginated reads and an O(log n) compact range, so the peak
   should not grow with the session. (``reconstruct`` is left out: its output *is* the transcript, which
   grows by nature.) tracemalloc sees Python allocations only, not SQLite's page cache, which is bounded
   by ``cache_size`` anyway.

Nothing here asserts on timings: it reports. Temporary databases live in a fresh directory under the
system temp directory (``TMPDIR``) and are removed at exit.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import hashlib
import json
import os
import platform
import pstats
import random
import re
import shutil
import sqlite3
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from _tree import measured_tree  # bench/ is sys.path[0] when a script runs

_SRC = measured_tree(sys.argv[1:])  # --src DIR (checked: a path without flightlog is refused)
if str(_SRC) not in sys.path:
    sys.path.insert(0, str(_SRC))  # measure this checkout (or --src), installed or not

from flightlog import recorder as recorder_module  # noqa: E402
from flightlog.encoding import canonical_bytes, decode_stored, parse_json  # noqa: E402
from flightlog.events import (  # noqa: E402
    CheckpointTaken,
    Event,
    LlmCompleted,
    ProviderReplay,
    RunStarted,
    ToolCompleted,
    ToolRequested,
    event_from_wire,
)
from flightlog.messages import Message, TextPart, ToolCall, ToolResult  # noqa: E402
from flightlog.recorder import Recorder, verify_session  # noqa: E402
from flightlog.sessions import replay_session  # noqa: E402
from flightlog.store.sqlite import SqliteStore  # noqa: E402

MB = 1_000_000
_U64 = struct.Struct("<Q")
_INSERT = (
    "INSERT INTO events (session_id, seq, kind, event, prev_hash, hash, recorded_at_ms) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_RAW_DDL = """
CREATE TABLE IF NOT EXISTS events (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    event BLOB NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL,
    recorded_at_ms INTEGER NOT NULL,
    PRIMARY KEY (session_id, seq)
)
"""
_WARMUP = 20  # appends made before the clock starts, on both sides
_BLOCK = 50  # events per side before the breakdown's writers switch sides
_APPEND_BLOCK = 10  # events per side before the paired append benchmarks switch sides


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ─── workload ─────────────────────────────────────────────────────────────────────────────────

_PROSE = (
    "The test suite fails because the fixture path is resolved relative to the working directory. "
    "I will read the configuration first, then patch the loader so it resolves paths against the "
    "project root, and re-run the failing tests to confirm. Naïve fixes — like chdir in conftest — "
    "would hide the bug; the loader should not depend on the caller's cwd. "
)
_CODE = (
    'def load(path: str) -> dict[str, "Any"]:\n'
    '    """Read a JSON config; raise ConfigError with the offending key."""\n'
    '    with open(path, encoding="utf-8") as fh:\n'
    "        data = json.load(fh)\n"
    "    if not isinstance(data, dict):\n"
    '        raise ConfigError(f"{path}: expected an object, got {type(data).__name__}")\n'
    '    return {k.replace("\\\\", "/"): v for k, v in data.items()}\n'
    "tests/test_config.py::test_load_relative FAILED  — AssertionError: 'fixtures/a.json' != 'a.json'\n"
)


class Workload:
    """Deterministic stream of realistic turns (4 events each), cheap to generate."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        corpus: list[str] = []
        while sum(map(len, corpus)) < 64_000:
            corpus.append(self.rng.choice((_PROSE, _CODE)))
        self.corpus = "".join(corpus)

    def _text(self, low: int, high: int) -> str:
        size = self.rng.randint(low, high)
        start = self.rng.randrange(0, len(self.corpus) - size)
        return self.corpus[start : start + size]

    def run_started(self) -> RunStarted:
        return RunStarted(run_id="bench-run", goal="Fix the failing config loader tests.", criteria=["green"])

    def turn(self, t: int) -> list[Event]:
        call = ToolCall(
            id=f"toolu_{t:08d}",
            name=self.rng.choice(("read_file", "bash", "edit_file", "grep")),
            arguments=json.dumps({"path": f"src/pkg/module_{t % 97}.py", "limit": 200}),
        )
        return [
            CheckpointTaken(turn=t, history_len=1 + 3 * t),
            LlmCompleted(
                turn=t,
                message=Message(
                    role="assistant", content=[TextPart(text=self._text(1000, 2000))], tool_calls=[call]
                ),
                provider_replay=ProviderReplay(
                    protocol="anthropic.messages", provider="anthropic", model="m-1"
                ),
            ),
            ToolRequested(turn=t, calls=[call]),
            ToolCompleted(
                turn=t,
                results=[ToolResult(call_id=call.id, output=self._text(1800, 2200), token_count=550)],
            ),
        ]

    def events(self, count: int, first_turn: int = 0) -> list[Event]:
        out: list[Event] = []
        t = first_turn
        while len(out) < count:
            out.extend(self.turn(t))
            t += 1
        return out[:count]


# ─── results ──────────────────────────────────────────────────────────────────────────────────


@dataclass
class Result:
    """One line of the table: flightlog vs its floor (ratio = flightlog throughput / floor throughput)."""

    section: str
    name: str
    unit: str
    flightlog: float
    floor: float
    floor_name: str
    ratio: float
    target: float | None = None
    higher_is_better: bool = True
    note: str = ""
    rounds: list[float] = field(default_factory=list)  # per-round ratios, for the spread

    @property
    def met(self) -> bool | None:
        return None if self.target is None else self.ratio >= self.target


@dataclass
class MemoryResult:
    """tracemalloc peak of one streaming operation at a small and a large session size."""

    name: str
    small_turns: int
    large_turns: int
    small_peak_bytes: int
    large_peak_bytes: int

    @property
    def growth(self) -> float:
        return self.large_peak_bytes / max(self.small_peak_bytes, 1)

    @property
    def flat(self) -> bool:
        # 10x the events; "flat" allows noise (batch contents vary in size), not proportional growth.
        return self.large_peak_bytes <= 1.5 * self.small_peak_bytes + 64 * 1024


@dataclass
class Report:
    environment: dict[str, Any]
    config: dict[str, Any]
    results: list[Result] = field(default_factory=list)
    memory: list[MemoryResult] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    profiles: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    breakdown: list[dict[str, Any]] = field(default_factory=list)
    disk: dict[str, Any] = field(default_factory=dict)
    io: dict[str, dict[str, Any]] = field(default_factory=dict)  # append row name -> io_accounting()
    commits: dict[str, dict[str, float]] = field(default_factory=dict)  # append row name -> commit_split()


def _projectors() -> int:
    """How many projectors every append runs (the defaults load with the first recorder; older trees
    registered the runs projector on ``import flightlog``)."""
    load = getattr(recorder_module, "load_default_projectors", None)
    if load is not None:
        load()
    return len(getattr(recorder_module, "_PROJECTORS", ()))


def _environment() -> dict[str, Any]:
    def version(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "?"

    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "sqlite": sqlite3.sqlite_version,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "pydantic": version("pydantic"),
        "rfc8785": version("rfc8785"),
        "tmpdir": tempfile.gettempdir(),
        # Projectors run inside every append's transaction; the append numbers include any registered.
        "projectors": _projectors(),
    }


# ─── 1. durable appends ───────────────────────────────────────────────────────────────────────


class _RawTree:
    """An RFC 9162 tree head kept as a compact range with ``hashlib`` alone: the perfect subtrees' roots,
    one node hash per merge on append (what a raw writer or verifier must compute for the tree head)."""

    __slots__ = ("stack",)

    def __init__(self, stack: list[tuple[int, bytes]] | None = None) -> None:
        self.stack = stack if stack is not None else []  # (height, hash), left to right

    def append(self, data: bytes) -> None:
        sha, stack = hashlib.sha256, self.stack
        node, height = sha(b"\x00" + data).digest(), 0
        while stack and stack[-1][0] == height:
            node, height = sha(b"\x01" + stack.pop()[1] + node).digest(), height + 1
        stack.append((height, node))

    def root(self) -> bytes:
        if not self.stack:
            return hashlib.sha256(b"").digest()
        root = self.stack[-1][1]
        for _, node in reversed(self.stack[:-1]):
            root = hashlib.sha256(b"\x01" + node + root).digest()
        return root

    def copy(self) -> _RawTree:
        return _RawTree(list(self.stack))


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


class FlightlogWriter:
    """``Recorder.append`` (batch 1) or ``append_many`` (batch > 1) into a fresh store."""

    def __init__(self, path: Path, synchronous: str) -> None:
        self.store = SqliteStore(path, synchronous=synchronous)
        self.recorder = Recorder.create(self.store, session_id="bench")

    def write(self, chunk: Sequence[Event]) -> None:
        if len(chunk) == 1:
            self.recorder.append(chunk[0])
        else:
            self.recorder.append_many(chunk)

    def close(self) -> None:
        self.store.close()


class FloorWriter:
    """The raw floor: precomputed canonical bytes, one sha256 chain hash per row, one transaction per chunk."""

    def __init__(self, path: Path, synchronous: str) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute(f"PRAGMA synchronous = {synchronous}")
        self.conn.execute(_RAW_DDL)
        self.prev, self.seq = "GENESIS", 0
        self.commit_s = 0.0  # seconds spent in COMMIT (the WAL write and, at FULL, the sync)

    def write(self, chunk: Sequence[tuple[str, bytes]]) -> None:
        stamp = time.time_ns() // 1_000_000
        params = []
        prev, seq = self.prev, self.seq
        for kind, data in chunk:
            digest = hashlib.sha256(prev.encode("ascii") + _U64.pack(seq) + data).hexdigest()
            params.append(("bench", seq, kind, data, prev, digest, stamp))
            prev, seq = digest, seq + 1
        self.conn.execute("BEGIN IMMEDIATE")
        if len(params) == 1:
            self.conn.execute(_INSERT, params[0])
        else:
            self.conn.executemany(_INSERT, params)
        start = time.perf_counter()
        self.conn.execute("COMMIT")
        self.commit_s += time.perf_counter() - start
        self.prev, self.seq = prev, seq

    def close(self) -> None:
        self.conn.close()


_SAME_WORK_DDL = (
    _RAW_DDL
    + """;
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY, head_seq INTEGER NOT NULL, head_hash TEXT NOT NULL,
    merkle_root TEXT NOT NULL, updated_at_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS authority_epochs (session_id TEXT PRIMARY KEY, epoch INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS ledger_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, state TEXT NOT NULL, updated_at_ms INTEGER NOT NULL, last_seq INTEGER NOT NULL,
    snapshot TEXT NOT NULL, fold TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS runs_state ON runs(state);
CREATE INDEX IF NOT EXISTS events_suspended ON events(session_id, seq)
    WHERE instr(CAST(event AS BLOB), X'226b696e64223a2273757370656e64656422') > 0;
INSERT OR IGNORE INTO sessions VALUES ('bench', -1, 'GENESIS', '', 0);
INSERT OR IGNORE INTO authority_epochs VALUES ('bench', 0);
INSERT OR IGNORE INTO runs VALUES ('bench', 'pending', 0, -1, '{}', '{}');
"""
)
_SAME_WORK_INSERT = (
    "INSERT INTO events (session_id, seq, kind, event, prev_hash, hash, recorded_at_ms) "
    "SELECT ?, ?, ?, ?, ?, ?, ? FROM sessions s JOIN authority_epochs a ON a.session_id = s.session_id "
    "WHERE s.session_id = ? AND s.head_seq = ? AND s.head_hash = ? AND a.epoch = ?"
)
_SAME_WORK_RUN = (
    "UPDATE runs SET updated_at_ms = ?, last_seq = ?, snapshot = ?, fold = ? WHERE run_id = 'bench'"
)
_SAME_WORK_RUN_STATE = "UPDATE runs SET state = ?, updated_at_ms = ?, last_seq = ?, snapshot = ?, fold = ? WHERE run_id = 'bench'"
_COMPACT = json.JSONEncoder(separators=(",", ":")).encode
_FLOOR_ENCODE = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
).encode
"""The same-work floor's own encoder: the standard library's, keys sorted, no white space, UTF-8 text as is.
On this workload's values (no float, no integer beyond 2**53, no key at or above U+D800) its bytes are
RFC 8785's (``tests/test_bench_floor.py`` pins it on the workload's events), and it is not the measured
tree's encoder, so a tree's encoding gains show in "÷ same work" instead of speeding its floor too."""


class SameWorkWriter:
    """The same-work floor of an append: every guarantee ``Recorder.append`` keeps, written raw.

    Per batch, in one ``BEGIN IMMEDIATE`` transaction: each event's canonical bytes, encoded in the append
    from the event's wire values (plain dicts, what a raw writer holds) by the standard library's encoder
    (:data:`_FLOOR_ENCODE`: the same bytes as RFC 8785 here, and not the measured tree's encoder),
    its chain hash and RFC 9162 leaf hash and the new tree head (:class:`_RawTree`); the retirement check
    (one live store per ledger); the rows inserted only where the session's head and authority epoch are
    the ones this writer holds (write-ahead, single writer, fencing), into a table with the store's
    ``events_suspended`` partial index (SQLite evaluates its ``instr`` on every row inserted: the approvals
    queue reads that index, ``flightlog.store.ddl.SQLITE_EVENTS_SUSPENDED``); the session's head row moved (the
    recorded head and tree head that catch a truncated ledger); the run's projection row folded from the
    events (state, steps, pending calls: the least fold that gives this workload's snapshots) and written
    as a snapshot JSON and a fold JSON (the runs read model current in the append's transaction); COMMIT.
    What flightlog adds on top of this is its own overhead; what this adds over the issue's floor is what
    the guarantees cost.
    """

    def __init__(self, path: Path, synchronous: str) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute(f"PRAGMA synchronous = {synchronous}")
        self.conn.executescript(_SAME_WORK_DDL)
        self.prev, self.seq, self.tree, self.state = "GENESIS", 0, _RawTree(), "pending"
        self.commit_s = 0.0  # seconds spent in COMMIT (the WAL write and, at FULL, the sync)
        self.fold: dict[str, Any] = {"first_at_ms": None, "last_at_ms": None, "last_seq": -1}
        self.fold |= {"awaiting_model": False, "open_steps": 0, "tools": [], "phase": "none"}

    def write(self, chunk: Sequence[dict[str, Any]]) -> None:
        """Append ``chunk``: the events' wire values (``event.to_wire()``, made before the clock starts)."""
        stamp = time.time_ns() // 1_000_000
        sha, pack, encode = hashlib.sha256, _U64.pack, _FLOOR_ENCODE
        prev, seq, tree = self.prev, self.seq, self.tree.copy()
        fold = {**self.fold, "tools": list(self.fold["tools"])}
        params = []
        for wire in chunk:
            data = encode(wire).encode("utf-8")
            digest = sha(prev.encode("ascii") + pack(seq) + data).hexdigest()
            tree.append(data)
            params.append(
                ("bench", seq, wire["kind"], data, prev, digest, stamp, "bench", self.seq - 1, self.prev, 0)
            )
            _fold(fold, seq, stamp, wire)
            prev, seq = digest, seq + 1
        if fold["phase"] == "none":  # no run_started yet (the append workload has none): nothing to show
            state, budget = "initializing", {}
        else:
            state = (
                "waiting_model" if fold["awaiting_model"] else "waiting_tool" if fold["tools"] else "running"
            )
            budget = {"steps_taken": fold["open_steps"]}
        snapshot = _COMPACT({"run_id": "bench", "source": "direct", "state": state, "budget": budget})
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute("SELECT value FROM ledger_meta WHERE key = 'retired'").fetchone() is not None:
                raise RuntimeError("retired")
            if len(params) == 1:
                written = conn.execute(_SAME_WORK_INSERT, params[0]).rowcount
            else:
                written = conn.executemany(_SAME_WORK_INSERT, params).rowcount
            if written != len(params):
                raise RuntimeError(f"same-work floor: head or epoch moved at seq {self.seq}")
            conn.execute(
                "UPDATE sessions SET head_seq = ?, head_hash = ?, merkle_root = ?, updated_at_ms = ? "
                "WHERE session_id = 'bench'",
                (seq - 1, prev, tree.root().hex(), stamp),
            )
            # The state column only when it changed: setting an indexed column rewrites its index entry.
            moved = (stamp, seq - 1, snapshot, _COMPACT({"v": 1, "session": fold, "process": None}))
            if state == self.state:
                conn.execute(_SAME_WORK_RUN, moved)
            else:
                conn.execute(_SAME_WORK_RUN_STATE, (state, *moved))
            start = time.perf_counter()
            conn.execute("COMMIT")
            self.commit_s += time.perf_counter() - start
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        self.prev, self.seq, self.tree, self.fold, self.state = prev, seq, tree, fold, state

    def close(self) -> None:
        self.conn.close()


def _fold(fold: dict[str, Any], seq: int, at_ms: int, wire: dict[str, Any]) -> None:
    """The runs fold's rules for this workload's kinds (``flightlog.runs.adapters.SessionFold``), on the
    event's wire values."""
    fold["last_seq"], fold["last_at_ms"] = seq, at_ms
    if fold["first_at_ms"] is None:
        fold["first_at_ms"] = at_ms
    kind = wire["kind"]
    if kind == "run_started":
        fold["phase"] = "open"
    elif kind == "checkpoint_taken":
        fold["awaiting_model"] = True
    elif kind == "llm_completed":
        fold["awaiting_model"], fold["open_steps"] = False, fold["open_steps"] + 1
    elif kind == "tool_requested":
        fold["awaiting_model"] = False
        fold["tools"].extend(c["id"] for c in wire["calls"] if c["id"] not in fold["tools"])
    elif kind == "tool_completed":
        done = {r["call_id"] for r in wire["results"]}
        fold["tools"] = [t for t in fold["tools"] if t not in done]


def interleave_blocks(
    sides: Sequence[tuple[Callable[[Any], Any], Sequence[Any]]], block: int
) -> list[list[float]]:
    """Seconds each side spends calling its function on each block of its items, run side by side.

    All sides have the same number of items. Blocks of ``block`` items go to each side in turn, and the
    order of the sides rotates every block, so every side sees the same fsync latency, page cache and CPU
    contention even on a noisy machine (a sequential A-then-B run can differ by 2x on a shared VM for
    reasons of its own). Returns one list per side, one time per block: block ``k`` of every side ran
    within the same few milliseconds, so ``times[a][k] / times[b][k]`` is a ratio paired in time.
    """
    times: list[list[float]] = [[] for _ in sides]
    order = list(range(len(sides)))
    clock = time.perf_counter
    for n, first in enumerate(range(0, len(sides[0][1]), block)):
        for index in order[n % len(order) :] + order[: n % len(order)]:
            fn, items = sides[index]
            start = clock()
            for item in items[first : first + block]:
                fn(item)
            times[index].append(clock() - start)
    return times


def interleave(sides: Sequence[tuple[Callable[[Any], Any], Sequence[Any]]], block: int) -> list[float]:
    """Total seconds of each side over :func:`interleave_blocks`."""
    return [sum(t) for t in interleave_blocks(sides, block)]


def _quartiles(values: Sequence[float]) -> tuple[float, float, float]:
    """(lower quartile, median, upper quartile) of ``values`` (at least one)."""
    if len(values) < 2:
        return values[0], values[0], values[0]
    low, mid, high = statistics.quantiles(values, n=4, method="inclusive")
    return low, mid, high


@dataclass
class PairedRound:
    """One round of :func:`paired_appends`: events/s of each side and the time of each side's blocks."""

    flightlog: float
    floor: float
    same: float
    blocks: list[list[float]]
    """Seconds per block: flightlog's, the floor's, the same work's (block k of each side paired in time)."""
    floor_commit_s: float = 0.0
    """Seconds the issue's floor spent in COMMIT over the timed appends."""
    same_commit_s: float = 0.0
    """Seconds the same-work floor spent in COMMIT over the timed appends."""


def paired_appends(
    workdir: Path,
    events: Sequence[Event],
    rows: Sequence[tuple[str, bytes]],
    wires: Sequence[dict[str, Any]],
    *,
    synchronous: str,
    batch: int,
    tag: str,
) -> PairedRound:
    """flightlog, the issue's floor and the same-work floor measured side by side
    (:func:`interleave_blocks`, blocks of :data:`_APPEND_BLOCK` events) on fresh files:
    ``Recorder.append``/``append_many``, :class:`FloorWriter` and :class:`SameWorkWriter`."""
    paths = (workdir / f"{tag}-flightlog.db", workdir / f"{tag}-floor.db", workdir / f"{tag}-same.db")
    mine, floor = FlightlogWriter(paths[0], synchronous), FloorWriter(paths[1], synchronous)
    same = SameWorkWriter(paths[2], synchronous)
    try:
        for i in range(_WARMUP):
            mine.write(events[i : i + 1])
            floor.write(rows[i : i + 1])
            same.write(wires[i : i + 1])
        timed = len(events) - _WARMUP
        floor.commit_s = same.commit_s = 0.0
        blocks = interleave_blocks(
            [
                (mine.write, list(_chunks(events[_WARMUP:], batch))),
                (floor.write, list(_chunks(rows[_WARMUP:], batch))),
                (same.write, list(_chunks(wires[_WARMUP:], batch))),
            ],
            max(_APPEND_BLOCK // batch, 1),
        )
    finally:
        mine.close()
        floor.close()
        same.close()
        for path in paths:
            _remove_db(path)
    elapsed = [sum(t) for t in blocks]
    return PairedRound(
        timed / elapsed[0], timed / elapsed[1], timed / elapsed[2], blocks, floor.commit_s, same.commit_s
    )


def commit_split(samples: Sequence[PairedRound], events: int, target: float) -> dict[str, float]:
    """Each side's µs per event split into its COMMIT (WAL write + sync) and the rest, over every round.

    The floors time their own ``COMMIT``. flightlog's is taken as the same-work floor's: the same syncs,
    WAL frames and bytes per commit (:func:`io_accounting` counts them) in the same blocks. ``sync_to_meet``
    is the COMMIT time at which flightlog's ratio reaches ``target`` with these CPU parts
    (``(S + R_floor) / (S + R_flightlog) >= target``, taking the floor's COMMIT as the same-work's:
    its two frames fewer make it a little shorter, so the true figure is a little higher), and
    ``same_sync_to_meet`` the same for the same-work floor: below it, a ratio under the target says the
    disk is too fast for the guarantees' CPU, not that flightlog's I/O is heavier."""
    n = events * len(samples)
    mine = sum(sum(s.blocks[0]) for s in samples) / n * 1e6
    floor = sum(sum(s.blocks[1]) for s in samples) / n * 1e6
    same = sum(sum(s.blocks[2]) for s in samples) / n * 1e6
    floor_commit = sum(s.floor_commit_s for s in samples) / n * 1e6
    same_commit = sum(s.same_commit_s for s in samples) / n * 1e6
    rest = {"flightlog": mine - same_commit, "same work": same - same_commit, "floor": floor - floor_commit}

    def meets(r: float) -> float:
        return max(0.0, (target * r - rest["floor"]) / (1 - target))

    return {
        "floor_commit_us": floor_commit,
        "same_commit_us": same_commit,
        **{f"{side}_rest_us": value for side, value in rest.items()},
        "sync_to_meet_us": meets(rest["flightlog"]),
        "same_sync_to_meet_us": meets(rest["same work"]),
    }


def commit_text(split: dict[str, float], target: float) -> str:
    """One line of :func:`commit_split`."""
    return (
        f"per event: COMMIT (WAL write + sync) {split['same_commit_us']:,.0f} µs on the same-work floor "
        f"(flightlog's I/O is the same), {split['floor_commit_us']:,.0f} µs on the floor; the rest "
        f"flightlog {split['flightlog_rest_us']:,.0f} µs, same work {split['same work_rest_us']:,.0f} µs, "
        f"floor {split['floor_rest_us']:,.0f} µs: flightlog reaches {target:g}x when a COMMIT takes >= "
        f"{split['sync_to_meet_us']:,.0f} µs, the same-work floor when >= {split['same_sync_to_meet_us']:,.0f} µs"
    )


_PAIRED_WINDOW = 5
"""Consecutive blocks of :data:`_APPEND_BLOCK` events summed into one paired ratio (:func:`_paired_note`)."""


def _paired_note(samples: Sequence[PairedRound], mine: int, floor: int) -> str:
    """The paired ratio: ``floor time / flightlog time`` over windows of :data:`_PAIRED_WINDOW` blocks that
    ran interleaved within the same fraction of a second, so both sides of a window saw the same disk;
    its median and quartiles over every window of every round."""
    ratios = []
    for s in samples:
        for k in range(0, len(s.blocks[mine]), _PAIRED_WINDOW):
            spent = sum(s.blocks[mine][k : k + _PAIRED_WINDOW])
            if spent > 0:
                ratios.append(sum(s.blocks[floor][k : k + _PAIRED_WINDOW]) / spent)
    low, mid, high = _quartiles(ratios)
    return (
        f"paired windows of {_APPEND_BLOCK * _PAIRED_WINDOW} events: median {mid:.2f}x, "
        f"quartiles {low:.2f}-{high:.2f}x over {len(ratios)}"
    )


def bench_appends(
    report: Report, workdir: Path, workload: Workload, appends: int, rounds: int, *, io: bool = True
) -> None:
    events = workload.events(appends + _WARMUP)
    rows = [(e.kind, canonical_bytes(e)) for e in events]
    wires = [e.to_wire() for e in events]  # the same-work floor's input: plain values, encoded in its append
    variants = [
        ("append FULL, 1 event/txn", "FULL", 1, 0.8),
        ("append NORMAL, 1 event/txn", "NORMAL", 1, 0.5),
        ("append_many FULL, 10 events/txn", "FULL", 10, 0.7),
        ("append_many NORMAL, 10 events/txn", "NORMAL", 10, None),
    ]
    for name, synchronous, batch, target in variants:
        samples = []
        for r in range(rounds):
            _log(f"appends: {name} (round {r + 1}/{rounds})")
            samples.append(
                paired_appends(
                    workdir, events, rows, wires, synchronous=synchronous, batch=batch, tag=f"a{batch}{r}"
                )
            )
        # Every round times the same number of events on every side: the harmonic mean is total/total.
        mine = statistics.harmonic_mean([s.flightlog for s in samples])
        floor = statistics.harmonic_mean([s.floor for s in samples])
        same = statistics.harmonic_mean([s.same for s in samples])
        report.results.append(
            Result(
                "appends",
                name,
                "events/s",
                mine,
                floor,
                f"raw sqlite3 INSERT{'' if batch == 1 else ' x10'}+COMMIT, 1 sha256/row",
                mine / floor,
                target,
                note=_paired_note(samples, 0, 1),
                rounds=[round(s.flightlog / s.floor, 3) for s in samples],
            )
        )
        report.results.append(
            Result(
                "appends-same-work",
                name,
                "events/s",
                mine,
                same,
                SAME_WORK_APPEND,
                mine / same,
                rounds=[round(s.flightlog / s.same, 3) for s in samples],
                note=f"the same-work floor itself runs at {same / floor:.2f}x the issue's floor "
                f"({_paired_note(samples, 2, 1)}); flightlog ÷ same work: {_paired_note(samples, 0, 2)}",
            )
        )
        if synchronous == "FULL" and target is not None:
            report.commits[name] = commit_split(samples, len(events) - _WARMUP, target)
        if io and synchronous == "FULL":
            _log(f"appends: {name}: I/O per commit (strace)")
            report.io[name] = io_accounting(synchronous, batch, appends)


# ─── I/O per commit (strace) ──────────────────────────────────────────────────────────────────

_IO_SIDES = ("flightlog", "same work", "floor")
_IO_MARK = "/nonexistent/flightlog-bench-io-mark-"
_IO_CALLS = "trace=fsync,fdatasync,pwrite64,write,openat"
_IO_NOTE = re.compile(r"^(?:\d+ +)?(?:---|\+\+\+) ")  # a signal delivered, a process exited: no I/O
_IO_LINE = re.compile(r"^(?:\d+ +)?(\w+)\((\d+)<([^>]*)>.*\) = (-?\d+)")


def _io_mark(name: str) -> None:
    """A system call strace shows and nothing else makes: the failed open of a path that cannot exist."""
    try:
        os.close(os.open(_IO_MARK + name, os.O_RDONLY))
    except FileNotFoundError:
        return
    raise RuntimeError(f"{_IO_MARK}{name} exists; the I/O accounting uses it as a marker")


def io_child(side: str, synchronous: str, batch: int, appends: int) -> None:
    """The process :func:`io_accounting` runs under strace: ``appends`` events appended by ``side``'s writer
    (batches of ``batch``) after :data:`_WARMUP` single appends and a WAL checkpoint, between two marks."""
    events = Workload(7).events(appends + _WARMUP)
    workdir = Path(tempfile.mkdtemp(prefix="flightlog-bench-io-"))
    path = workdir / "io.db"
    try:
        writer: FlightlogWriter | FloorWriter | SameWorkWriter
        items: Sequence[Any]
        if side == "flightlog":
            writer, items = FlightlogWriter(path, synchronous), events
        elif side == "floor":
            writer, items = FloorWriter(path, synchronous), [(e.kind, canonical_bytes(e)) for e in events]
        else:
            writer, items = SameWorkWriter(path, synchronous), [e.to_wire() for e in events]
        for i in range(_WARMUP):
            writer.write(items[i : i + 1])
        # Start from an empty WAL on every side: the schema's own pages are not the appends' to copy.
        conn = sqlite3.connect(path, isolation_level=None)
        try:
            busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        finally:
            conn.close()
        if busy:
            raise RuntimeError(f"{side}: the WAL checkpoint before the counted appends was blocked")
        _io_mark("begin")
        for chunk in _chunks(items[_WARMUP:], batch):
            writer.write(chunk)
        _io_mark("end")
        writer.close()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def parse_strace(lines: Iterable[str], commits: int) -> dict[str, float]:
    """Per-commit I/O between the two marks of an ``strace -f -y`` log of :func:`io_child`: syncs
    (``fsync``/``fdatasync`` of any file), WAL syncs, WAL frames (SQLite writes each frame's 24-byte header
    and its page in two writes), WAL bytes, and main-file pages and bytes (the checkpoints' copies).

    Raises:
        RuntimeError: the log lacks a mark, or a counted call's line cannot be read (an interrupted call).
    """
    counts = dict.fromkeys(("syncs", "wal_syncs", "wal_frames", "wal_bytes", "db_writes", "db_bytes"), 0)
    inside = seen = False
    for line in lines:
        if _IO_MARK in line:
            inside, seen = line.split(_IO_MARK, 1)[1].startswith("begin"), True
            continue
        if not inside or "openat(" in line or _IO_NOTE.match(line):
            continue
        found = _IO_LINE.match(line)
        if found is None:
            raise RuntimeError(f"strace line not understood: {line.strip()[:200]}")
        call, _, target, result = found.groups()
        wal = target.endswith("-wal")
        if call in ("fsync", "fdatasync"):
            counts["syncs"] += 1
            counts["wal_syncs"] += wal
        elif wal:
            counts["wal_bytes"] += int(result)
            counts["wal_frames"] += int(result) == 24
        elif target.endswith(".db"):
            counts["db_writes"] += 1
            counts["db_bytes"] += int(result)
    if not seen or inside:
        raise RuntimeError("strace log without both I/O marks")
    return {key: value / commits for key, value in counts.items()}


def io_accounting(synchronous: str, batch: int, appends: int) -> dict[str, Any]:
    """I/O per commit of each side (flightlog, the same-work floor, the issue's floor) appending the same
    ``appends`` events in batches of ``batch``, counted with ``strace`` in a child process per side
    (:func:`io_child`): counts, not times, so they do not move with the disk's speed. Returns
    ``{"commits": n, side: {...per commit...}}``, or ``{"skipped": reason}`` without strace."""
    if shutil.which("strace") is None:
        return {"skipped": "strace is not on PATH"}
    commits = len(range(0, appends, batch))
    out: dict[str, Any] = {"commits": commits}
    with tempfile.TemporaryDirectory(prefix="flightlog-bench-strace-") as tmp:
        for side in _IO_SIDES:
            log = Path(tmp) / f"{side}.strace"
            command = [
                "strace", "-f", "-qq", "-y", "-e", _IO_CALLS, "-o", str(log),
                sys.executable, __file__, "--io-child", side, "--io-sync", synchronous,
                "--io-batch", str(batch), "--appends", str(appends), "--src", str(_SRC),
            ]  # fmt: skip
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
            with log.open(encoding="utf-8", errors="replace") as lines:
                out[side] = parse_strace(lines, commits)
    return out


def io_text(io: dict[str, Any]) -> str:
    """One line: syncs, WAL frames and WAL KB per commit of each side."""
    if "skipped" in io:
        return f"I/O per commit not counted ({io['skipped']})"
    sides = "; ".join(
        f"{side} {io[side]['syncs']:.2f} syncs, {io[side]['wal_frames']:.2f} WAL frames "
        f"({io[side]['wal_bytes'] / 1000:.1f} KB), {io[side]['db_writes']:.2f} pages checkpointed"
        for side in _IO_SIDES
    )
    return f"I/O per commit (strace, {io['commits']} commits): {sides}"


def _remove_db(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


# ─── session fixture ──────────────────────────────────────────────────────────────────────────


def populate(
    store: SqliteStore, session_id: str, turns: int, workload: Workload, turns_per_txn: int = 50
) -> int:
    """Record a session of ``turns`` turns (4 events each, after one ``run_started``); returns events."""
    recorder = Recorder.create(store, session_id=session_id, task="bench")
    recorder.append(workload.run_started())
    for first in range(0, turns, turns_per_txn):
        batch: list[Event] = []
        for t in range(first, min(first + turns_per_txn, turns)):
            batch.extend(workload.turn(t))
        recorder.append_many(batch)
    return recorder.next_seq


def _raw_rows(path: Path, session_id: str) -> Iterator[tuple[int, bytes, str, str]]:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        yield from conn.execute(
            "SELECT seq, event, prev_hash, hash FROM events WHERE session_id = ? ORDER BY seq", (session_id,)
        )
    finally:
        conn.close()


_READ_CLOCK: list[Callable[[], float]] = [time.perf_counter]
"""The clock of the verify and replay rounds: wall time, or this process's CPU time with ``--cpu-clock``."""


def _round_times(fns: dict[str, Callable[[], Any]], rounds: int) -> dict[str, list[float]]:
    """Time of each function in each of ``rounds`` rounds; each round runs every function once.

    The order rotates every round, so drift on a shared machine (page cache, CPU frequency, neighbours)
    hits flightlog and its floors alike. Every function runs once untimed first (page cache, imports).
    The clock is wall time, or with ``--cpu-clock`` this process's CPU time (``time.process_time``):
    verify, replay and their floors are CPU-bound reads in this process (SQLite's pages cached), so on a
    loaded shared machine CPU time drops the waits for a core that swing wall time between rounds.
    """
    clock = _READ_CLOCK[0]
    names = list(fns)
    for name in names:
        fns[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            start = clock()
            fns[name]()
            times[name].append(clock() - start)
    return times


def _paired_times(fns: dict[str, Callable[[], Any]], rounds: int) -> dict[str, float]:
    """Median wall time of each function over ``rounds`` rounds (:func:`_round_times`)."""
    return {name: statistics.median(t) for name, t in _round_times(fns, rounds).items()}


def _round_ratios(times: dict[str, list[float]], floor: str, mine: str) -> list[float]:
    """Per-round throughput ratios ``floor time / flightlog time`` (same round, same neighbours)."""
    return [round(f / m, 3) for f, m in zip(times[floor], times[mine], strict=True)]


# ─── 2. verify ────────────────────────────────────────────────────────────────────────────────


def bench_verify(report: Report, path: Path, session_id: str, rounds: int) -> None:
    payloads = [bytes(data) for _, data, _, _ in _raw_rows(path, session_id)]
    total = sum(map(len, payloads))
    label = f"{len(payloads):,} events, {total / MB:.1f} MB"

    def sha_loop() -> None:
        sha = hashlib.sha256
        for p in payloads:
            sha(p).digest()

    def raw_read_verify() -> None:
        prev = "GENESIS"
        sha, pack = hashlib.sha256, _U64.pack
        for seq, data, prev_hash, digest in _raw_rows(path, session_id):
            if prev_hash != prev or sha(prev_hash.encode("ascii") + pack(seq) + data).hexdigest() != digest:
                raise RuntimeError(f"raw floor found a divergence at seq {seq}")
            prev = digest

    def same_work_verify() -> None:
        """What ``decode=False`` must do: the chain hash and the RFC 9162 leaf hash of every row, the
        tree head folded from the leaves (a compact range: one node hash per merge), compared at the end."""
        prev = "GENESIS"
        sha, pack = hashlib.sha256, _U64.pack
        tree = _RawTree()
        for seq, data, prev_hash, digest in _raw_rows(path, session_id):
            if prev_hash != prev or sha(prev_hash.encode("ascii") + pack(seq) + data).hexdigest() != digest:
                raise RuntimeError(f"same-work floor found a divergence at seq {seq}")
            prev = digest
            tree.append(data)
        same_work_root.append(tree.root().hex())

    same_work_root: list[str] = []
    store = SqliteStore(path)
    try:

        def verify(decode: bool) -> None:
            outcome = verify_session(store, session_id, decode=decode)
            if not outcome.ok:
                raise RuntimeError(f"verify_session reported divergences: {outcome.divergences[:3]}")

        _log(f"verify: sha256 floor, raw read floors, verify_session x2 ({rounds} rounds)")
        rounds_s = _round_times(
            {
                "sha": sha_loop,
                "raw": raw_read_verify,
                "same": same_work_verify,
                "False": lambda: verify(False),
                "True": lambda: verify(True),
            },
            rounds,
        )
        if same_work_root[-1] != store.get_session(session_id).merkle_root:
            raise RuntimeError("the same-work floor's tree head differs from the recorded one")
    finally:
        store.close()
    times = {name: statistics.median(t) for name, t in rounds_s.items()}
    sha_mbs, raw_mbs = total / MB / times["sha"], total / MB / times["raw"]
    same_mbs = total / MB / times["same"]
    report.results.append(
        Result(
            "verify",
            "verify_session decode=False",
            "MB/s",
            total / MB / times["False"],
            same_mbs,
            "same work, raw: sqlite3 read + chain sha256 + leaf sha256 + tree head/row",
            times["same"] / times["False"],
            note=label,
            rounds=_round_ratios(rounds_s, "same", "False"),
        )
    )
    for decode in (False, True):
        mbs = total / MB / times[str(decode)]
        name = f"verify_session decode={decode}"
        sha_floor = "hashlib.sha256 over same payloads, in memory"
        report.results.append(
            Result(
                "verify",
                name,
                "MB/s",
                mbs,
                sha_mbs,
                sha_floor,
                mbs / sha_mbs,
                note=label,
            )
        )
        raw_floor = "raw sqlite3 read + 1 sha256/row"
        report.results.append(
            Result(
                "verify",
                name,
                "MB/s",
                mbs,
                raw_mbs,
                raw_floor,
                mbs / raw_mbs,
                0.8 if not decode else None,
                note=label,
                rounds=_round_ratios(rounds_s, "raw", str(decode)),
            )
        )


# ─── 3. replay ────────────────────────────────────────────────────────────────────────────────


def _load_reconstruct() -> Callable[..., list[Any]] | None:
    try:
        from flightlog.replay import reconstruct
    except ImportError:
        return None
    return reconstruct


def bench_replay(report: Report, path: Path, session_id: str, events: int, rounds: int) -> None:
    reconstruct = _load_reconstruct()
    if reconstruct is None:
        report.skipped.append("replay: skipped (flightlog.replay not available)")
        _log(report.skipped[-1])
        return

    def raw() -> None:
        loads = json.loads
        for _, data, _, _ in _raw_rows(path, session_id):
            loads(data)

    def same_work() -> None:
        """Less than a replay must do: parse every row and keep the transcript it returns (here as plain
        values: the assistant message as parsed, one tool message per result), so the messages stay alive
        (and the collector walks them) as replay's do. No validation and no event objects, so this floor is
        *weaker* than replay's work: what it cannot reach, nothing that also validates every event can."""
        loads = json.loads
        transcript: list[Any] = []
        keep = transcript.append
        for _, data, _, _ in _raw_rows(path, session_id):
            event = loads(data)
            kind = event["kind"]
            if kind == "llm_completed":
                keep(event["message"])
            elif kind == "tool_completed":
                for result in event["results"]:
                    part = {"type": "tool_result", "call_id": result["call_id"], "output": result["output"]}
                    keep({"role": "tool", "content": [part]})
            elif kind == "run_started":
                keep({"role": "user", "content": [{"type": "text", "text": event["goal"]}]})
        same_messages.append(len(transcript))

    same_messages: list[int] = []
    store = SqliteStore(path)
    messages: list[int] = []
    try:

        def replay() -> None:
            messages.append(len(replay_session(store, session_id)))

        def replay_reference() -> None:
            # decode_stored's reference path (json + pydantic validation of the dict), with no fast path:
            # what decode_stored did before issue 19's third pass; the workload needs no upcaster
            rows = store.read_events(session_id)
            reconstruct((e.seq, event_from_wire(parse_json(e.event_bytes), seq=e.seq)) for e in rows)

        _log(f"replay: raw floor, reconstruct, reconstruct with the reference decoder ({rounds} rounds)")
        rounds_s = _round_times(
            {"raw": raw, "same": same_work, "replay": replay, "reference": replay_reference}, rounds
        )
    finally:
        store.close()
    if same_messages[-1] != messages[-1]:
        raise RuntimeError(f"the same-work floor kept {same_messages[-1]} messages, replay {messages[-1]}")
    times = {name: statistics.median(t) for name, t in rounds_s.items()}
    report.results.append(
        Result(
            "replay",
            "replay_session(store, sid)",
            "s",
            times["replay"],
            times["raw"],
            "raw sqlite3 read + json.loads/row",
            times["raw"] / times["replay"],
            0.6,
            higher_is_better=False,
            note=f"{events:,} events -> {messages[-1]:,} messages",
            rounds=_round_ratios(rounds_s, "raw", "replay"),
        )
    )
    for section, name, mine, floor, floor_name in (
        (
            "replay-same",
            "replay_session(store, sid)",
            "replay",
            "same",
            "same work less validation, raw: sqlite3 read + json.loads + the transcript kept as plain "
            "values (no validation: a weaker floor)",
        ),
        (
            "replay-reference",
            "reconstruct(json + validate_python)",
            "reference",
            "raw",
            "raw sqlite3 read + json.loads/row (decode_stored's reference path, same rounds)",
        ),
    ):
        report.results.append(
            Result(
                section,
                name,
                "s",
                times[mine],
                times[floor],
                floor_name,
                times[floor] / times[mine],
                higher_is_better=False,
                rounds=_round_ratios(rounds_s, floor, mine),
            )
        )


# ─── disk ─────────────────────────────────────────────────────────────────────────────────────


def _db_bytes(conn: sqlite3.Connection) -> int:
    """Bytes the database file holds once its WAL is checkpointed (pages in use x page size)."""
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    pages = (
        conn.execute("PRAGMA page_count").fetchone()[0] - conn.execute("PRAGMA freelist_count").fetchone()[0]
    )
    return int(pages * conn.execute("PRAGMA page_size").fetchone()[0])


def bench_disk(report: Report, path: Path, workdir: Path) -> None:
    """Database bytes per event against the raw payload bytes (the events' canonical bytes), for the
    fixture database (both sessions: every table, index and the runs projection included), and for the
    floor: the same rows copied into the minimal table (:data:`_RAW_DDL`, hex hashes, default pages)."""
    _log("disk: bytes per event")
    floor_path = workdir / "disk-floor.db"
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        events, payload = conn.execute("SELECT count(*), sum(length(event)) FROM events").fetchone()
        mine = _db_bytes(conn)
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        conn.execute("ATTACH DATABASE ? AS floor", (str(floor_path),))
        conn.execute("PRAGMA floor.journal_mode = WAL")
        conn.execute(_RAW_DDL.replace(" events (", " floor.events (", 1))
        conn.execute(
            "INSERT INTO floor.events SELECT session_id, seq, kind, event, prev_hash, hash, recorded_at_ms "
            "FROM main.events ORDER BY session_id, seq"
        )
        conn.execute("DETACH DATABASE floor")
    finally:
        conn.close()
    floor_conn = sqlite3.connect(floor_path, isolation_level=None)
    try:
        floor = _db_bytes(floor_conn)
    finally:
        floor_conn.close()
        _remove_db(floor_path)
    report.disk = {
        "events": events,
        "payload_bytes": payload,
        "db_bytes": mine,
        "floor_bytes": floor,
        "page_size": page_size,
        "ratio": mine / payload,
        "floor_ratio": floor / payload,
    }


# ─── 4. memory ────────────────────────────────────────────────────────────────────────────────


def _peak(fn: Callable[[], Any]) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        fn()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def bench_memory(report: Report, path: Path, sizes: tuple[tuple[str, int], tuple[str, int]]) -> None:
    store = SqliteStore(path)
    try:

        def export(session_id: str) -> None:
            with open(os.devnull, "wb") as sink:
                for row in store.read_events(session_id):
                    sink.write(row.event_bytes)

        operations: list[tuple[str, Callable[[str], Any]]] = [
            ("verify_session decode=False", lambda sid: verify_session(store, sid, decode=False)),
            ("verify_session decode=True", lambda sid: verify_session(store, sid, decode=True)),
            ("export stream (read_events -> /dev/null)", export),
        ]
        (small_sid, small_turns), (large_sid, large_turns) = sizes
        for name, op in operations:
            _log(f"memory: {name}")
            small = _peak(lambda op=op: op(small_sid))  # type: ignore[misc]
            large = _peak(lambda op=op: op(large_sid))  # type: ignore[misc]
            report.memory.append(MemoryResult(name, small_turns, large_turns, small, large))
    finally:
        store.close()


# ─── profiles (--profile) ─────────────────────────────────────────────────────────────────────


def _top(profile: cProfile.Profile, limit: int = 14) -> list[dict[str, Any]]:
    stats = pstats.Stats(profile)
    rows = []
    for (filename, line, func), (_, ncalls, tottime, cumtime, _) in stats.stats.items():  # type: ignore[attr-defined]
        where = f"{Path(filename).name}:{line}" if line else filename
        rows.append(
            {"function": f"{func} ({where})", "ncalls": ncalls, "tottime": tottime, "cumtime": cumtime}
        )
    rows.sort(key=lambda r: r["tottime"], reverse=True)
    return rows[:limit]


def _per_item_us(fn: Callable[[Any], Any], items: Sequence[Any], rounds: int = 3) -> float:
    """Median over ``rounds`` of the mean µs per call of ``fn`` over ``items`` (no profiler attached)."""
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for item in items:
            fn(item)
        times.append(time.perf_counter() - start)
    return statistics.median(times) / len(items) * 1e6


def bench_breakdown(report: Report, workdir: Path, workload: Workload, count: int) -> None:
    """Where one append's and one decode's time goes, component by component, without a profiler.

    cProfile inflates pure-Python code (rfc8785 makes many small calls) against C code (sqlite, hashlib),
    so the split is measured directly, at ``synchronous=NORMAL`` (the CPU cost; at FULL the fsync adds about
    the same to flightlog and floor). Four writers run side by side (:func:`interleave`) over the same
    events: ``Recorder.append``; ``Recorder.append`` with ``canonical_bytes`` swapped for a lookup of the
    precomputed bytes (so the difference is encoding as it costs *in place*, caches and all);
    ``Store.append_events`` alone, nested and epoch-checked as the Recorder calls it; and the raw floor.
    Isolated micro-loops then split the encoding and the store call further.
    """
    import rfc8785

    from flightlog.ledger import CompactRange, chain_hash, leaf_hash
    from flightlog.store.base import NewEvent, SessionHead

    events = workload.events(count, first_turn=20_000_000)
    wires = [e.to_wire() for e in events]
    data = [canonical_bytes(e) for e in events]
    precomputed = {id(e): b for e, b in zip(events, data, strict=True)}
    can_swap = getattr(recorder_module, "canonical_bytes", None) is canonical_bytes

    paths = [workdir / f"breakdown-{i}.db" for i in range(4)]
    stores = [SqliteStore(p, synchronous="NORMAL") for p in paths[:3]]
    floor = FloorWriter(paths[3], "NORMAL")
    try:
        full, cached = (Recorder.create(s, session_id="b") for s in stores[:2])
        store = stores[2]
        Recorder.create(store, session_id="b")
        prev, rows = "GENESIS", []
        for seq, (event, blob) in enumerate(zip(events, data, strict=True)):
            digest = chain_hash(prev, seq, blob)
            rows.append(NewEvent(seq, event.kind, blob, prev, digest))
            prev = digest

        def append_cached(event: Event) -> None:
            recorder_module.canonical_bytes = lambda e: precomputed[id(e)]  # type: ignore[attr-defined,assignment]
            try:
                cached.append(event)
            finally:
                recorder_module.canonical_bytes = canonical_bytes  # type: ignore[attr-defined]

        def store_append(row: NewEvent) -> None:
            with store.transaction():  # inside Recorder.atomic, epoch-checked, as Recorder.append does
                store.append_events("b", [row], SessionHead(row.seq, row.hash, "0" * 64), epoch=0)

        elapsed = interleave(
            [
                (full.append, events),
                (append_cached, events),
                (store_append, rows),
                (floor.write, [[(r.kind, r.event_bytes)] for r in rows]),
            ],
            _BLOCK,
        )
        total_us, cached_us, store_us, floor_us = (e / count * 1e6 for e in elapsed)
        epoch_us = _per_item_us(lambda _: store.authority_epoch("b"), range(count))

        def nested_noop(_: int) -> None:
            with store.transaction():
                pass

        with store.transaction():
            savepoint_us = _per_item_us(nested_noop, range(count))
    finally:
        for s in stores:
            s.close()
        floor.close()
        for path in paths:
            _remove_db(path)

    tree = CompactRange()
    for blob in data:
        tree.append(leaf_hash(blob))

    def stage(blob: bytes) -> None:
        staged = tree.copy()
        chain_hash("0" * 64, staged.size, blob)
        staged.append(leaf_hash(blob))
        staged.root().hex()

    stage_us = _per_item_us(stage, data)
    lines: list[tuple[str, float]] = [
        ("Recorder.append, total", total_us),
        ("raw floor, total (BEGIN IMMEDIATE/INSERT/COMMIT + 1 sha256)", floor_us),
    ]
    if can_swap:
        lines.append(("encoding in place (total - append with bytes precomputed)", total_us - cached_us))
    lines += [
        ("  canonical_bytes(event) alone, hot loop", _per_item_us(canonical_bytes, events)),
        (
            "    event.to_wire() alone (pydantic model_dump + _omit_absent)",
            _per_item_us(lambda e: e.to_wire(), events),
        ),
        ("    rfc8785.dumps(wire dict) alone", _per_item_us(rfc8785.dumps, wires)),
        ("store.append_events as the Recorder calls it", store_us),
        ("  its excess over the raw floor", store_us - floor_us),
        (
            "    authority-epoch SELECT alone (not per append since 2026-12-02: checked in the INSERT)",
            epoch_us,
        ),
        ("    SAVEPOINT/RELEASE (nested transaction) alone", savepoint_us),
        ("stage alone: chain_hash + leaf_hash + tree copy/append/root", stage_us),
    ]
    if can_swap:
        lines.append(("rest of Recorder (atomic, lock, stage, StoredEvent, notify)", cached_us - store_us))
    lines += [
        ("decode: json.loads(bytes)", _per_item_us(json.loads, data)),
        (
            "decode: decode_stored(bytes) (parse + pydantic validation in one call)",
            _per_item_us(decode_stored, data),
        ),
    ]
    report.breakdown = [{"component": name, "us_per_event": round(us, 2)} for name, us in lines]


def bench_profiles(
    report: Report, workdir: Path, workload: Workload, path: Path, sid: str, appends: int
) -> None:
    events = workload.events(appends + _WARMUP, first_turn=10_000_000)
    for synchronous in ("FULL", "NORMAL"):
        db = workdir / f"profile-{synchronous}.db"
        store = SqliteStore(db, synchronous=synchronous)
        recorder = Recorder.create(store, session_id="profile")
        profile = cProfile.Profile()
        profile.enable()
        for event in events:
            recorder.append(event)
        profile.disable()
        store.close()
        _remove_db(db)
        report.profiles[f"Recorder.append, synchronous={synchronous}"] = _top(profile)
    store = SqliteStore(path)
    try:
        for decode in (False, True):
            profile = cProfile.Profile()
            profile.runcall(verify_session, store, sid, decode=decode)
            report.profiles[f"verify_session decode={decode}"] = _top(profile)
        reconstruct = _load_reconstruct()
        if reconstruct is not None:
            profile = cProfile.Profile()
            profile.runcall(
                lambda: reconstruct((e.seq, decode_stored(e.event_bytes)) for e in store.read_events(sid))
            )
            report.profiles["replay reconstruct"] = _top(profile)
    finally:
        store.close()


# ─── output ───────────────────────────────────────────────────────────────────────────────────


def _num(value: float, unit: str) -> str:
    if unit == "s":
        return f"{value:.3f}"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}"


def _table(header: Sequence[str], rows: Iterable[Sequence[str]], right: Sequence[bool]) -> str:
    body = [list(header), *[list(r) for r in rows]]
    widths = [max(len(r[i]) for r in body) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if right[i] else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(body[0]), rule, *(line(r) for r in body[1:])])


def _spread(ratios: Sequence[float]) -> str:
    return f"; rounds {min(ratios):.2f}-{max(ratios):.2f}x" if len(ratios) > 1 else ""


def render(report: Report) -> str:
    env = report.environment
    out = [
        "flightlog ledger benchmarks",
        f"python {env['python']} ({env['implementation']}), sqlite {env['sqlite']}, {env['platform']}, "
        f"{env['cpus']} cpus, pydantic {env['pydantic']}, rfc8785 {env['rfc8785']}, "
        f"projectors registered {env['projectors']}",
        "config: " + ", ".join(f"{k}={v}" for k, v in report.config.items()),
        "",
        "ratio = flightlog throughput / floor throughput (1.0 = as fast as the floor; higher is better)",
        "",
    ]
    rows = []
    for r in report.results:
        met = "" if r.met is None else ("yes" if r.met else "NO")
        rows.append(
            [
                r.name,
                _num(r.flightlog, r.unit),
                _num(r.floor, r.unit),
                r.unit,
                f"{r.ratio:.3f}x",
                "" if r.target is None else f">={r.target:g}x",
                met,
                r.floor_name + (f"; {r.note}" if r.note else "") + _spread(r.rounds),
            ]
        )
    out.append(
        _table(
            ["benchmark", "flightlog", "floor", "unit", "ratio", "target", "met", "floor (notes)"],
            rows,
            [False, True, True, False, True, True, False, False],
        )
    )
    if report.disk:
        d = report.disk
        out.append(
            f"\ndisk: {d['db_bytes'] / d['events']:,.0f} B/event for {d['payload_bytes'] / d['events']:,.0f} B "
            f"of payload = {d['ratio']:.3f}x (target <= {DISK_TARGET}x); the minimal table: {d['floor_ratio']:.3f}x"
        )
    for r in report.results:
        if r.section == "appends" and r.target is not None and r.name in report.commits:
            out.append(f"\n{r.name}: {commit_text(report.commits[r.name], r.target)}")
    for name, io in report.io.items():
        out.append(f"\n{name}: {io_text(io)}")
    replay = [r for r in report.results if r.section == "replay"]
    for r in replay:
        out.append(f"\nreplay: {r.flightlog / r.floor:.1f}x the floor's time ({r.note})")
    out.extend(report.skipped)
    if report.memory:
        out.append("")
        mem_rows = [
            [
                m.name,
                f"{m.small_peak_bytes / 1024:,.0f} KiB",
                f"{m.large_peak_bytes / 1024:,.0f} KiB",
                f"{m.growth:.2f}x",
                "flat" if m.flat else "GROWS",
            ]
            for m in report.memory
        ]
        first = report.memory[0]
        out.append(
            _table(
                [
                    "tracemalloc peak",
                    f"{first.small_turns:,} turns",
                    f"{first.large_turns:,} turns",
                    "growth",
                    "verdict",
                ],
                mem_rows,
                [False, True, True, True, False],
            )
        )
    if report.breakdown:
        out.append(
            "\nwhere one append's time goes at synchronous=NORMAL (no profiler; µs per event, workload mix)"
        )
        out.append(
            _table(
                ["component", "µs/event"],
                ([b["component"], f"{b['us_per_event']:.1f}"] for b in report.breakdown),
                [False, True],
            )
        )
    for title, top in report.profiles.items():
        out.append(f"\nprofile: {title} (top by own time)")
        out.append(
            _table(
                ["function", "calls", "tottime s", "cumtime s"],
                (
                    [t["function"], f"{t['ncalls']:,}", f"{t['tottime']:.3f}", f"{t['cumtime']:.3f}"]
                    for t in top
                ),
                [False, True, True, True],
            )
        )
    return "\n".join(out)


ISSUE_ROWS: dict[str, tuple[str, str]] = {
    "append FULL, 1 event/txn": ("append FULL, 1 event/txn", ">= 0.8x"),
    "append NORMAL, 1 event/txn": ("append NORMAL, 1 event/txn (CPU overhead)", ">= 0.5x"),
    "append_many FULL, 10 events/txn": ("append_many FULL, 10 events/txn", ">= 0.7x"),
}
"""Our result name -> (the issue 19 table's row name, its target)."""

SAME_WORK_APPEND = (
    "same work, raw: stdlib encode (sorted keys, compact) + chain/leaf hash + tree head, retirement check, head/epoch-guarded INSERT "
    "(the wait-mark partial index evaluated), "
    "head UPDATE, runs row fold + UPDATE, COMMIT"
)
"""The floor name of :class:`SameWorkWriter`'s rows."""

DISK_TARGET = 1.2
"""Issue 19: database bytes per event <= 1.2x the raw payload bytes."""


def _schema_row(r: Result, path: str, target: str, detail: str) -> dict[str, Any]:
    return {
        "path": path,
        "flightlog": f"{_num(r.flightlog, r.unit)} {r.unit}",
        "floor": f"{_num(r.floor, r.unit)} {r.unit}",
        "ratio": round(r.ratio, 3),
        "spread": [min(r.rounds), max(r.rounds)] if r.rounds else None,
        "target": target,
        "met": r.met,
        "detail": detail,
    }


def schema_rows(report: Report) -> list[dict[str, Any]]:
    """The issue 19 rows this script measures, in the shared bench row schema (bench/all.py)."""
    rows = []
    for r in report.results:
        if r.name in ISSUE_ROWS and r.section == "appends":
            path, target = ISSUE_ROWS[r.name]
            detail = f"floor: {r.floor_name}"
            same_work = next(
                (x for x in report.results if x.section == "appends-same-work" and x.name == r.name), None
            )
            if same_work is not None:
                detail += (
                    f"; vs the same work done raw (encoding, 2 hashes + tree head, fenced insert, head and"
                    f" runs rows): {same_work.ratio:.2f}x ({same_work.note})"
                )
            if r.note:
                detail += f"; {r.note}"
            if r.name in report.commits and r.target is not None:
                detail += f"; {commit_text(report.commits[r.name], r.target)}"
            if r.name in report.io:
                detail += f"; {io_text(report.io[r.name])}"
            rows.append(_schema_row(r, path, target, detail))
    same = next(
        (r for r in report.results if r.section == "verify" and r.floor_name.startswith("same work")), None
    )
    for r in report.results:
        if r.name == "verify_session decode=False" and r.floor_name.startswith("raw sqlite3 read"):
            detail = f"floor: {r.floor_name}; {r.note}"
            if same is not None:
                detail += f"; vs the same work done raw (2 hashes/row + tree head): {same.ratio:.2f}x"
            rows.append(
                _schema_row(r, "verify (no decode) vs raw read + one sha256 per row", ">= 0.8x", detail)
            )
        if r.section == "replay":
            detail = f"floor: {r.floor_name}; {r.note}"
            same_replay = next((x for x in report.results if x.section == "replay-same"), None)
            if same_replay is not None:
                detail += (
                    f"; vs the same work less validation, raw (parse + keep the transcript; a weaker floor):"
                    f" {same_replay.ratio:.2f}x"
                )
            row = _schema_row(r, "replay vs raw read + json.loads", ">= 0.6x", detail)
            row["flightlog"], row["floor"] = f"{r.flightlog:.3f} s", f"{r.floor:.3f} s"
            rows.append(row)
    if report.disk:
        d = report.disk
        rows.append(
            {
                "path": "disk per event vs raw payload",
                "flightlog": f"{d['db_bytes'] / d['events']:,.0f} B/event",
                "floor": f"{d['payload_bytes'] / d['events']:,.0f} B/event payload",
                "ratio": round(d["ratio"], 3),
                "spread": None,
                "target": f"<= {DISK_TARGET}x",
                "met": d["ratio"] <= DISK_TARGET,
                "detail": f"{d['events']:,} events, pages of {d['page_size']} B; the minimal table "
                f"(session_id, seq, kind, blob, hex prev_hash/hash, time) holds the same rows at "
                f"{d['floor_ratio']:.2f}x",
            }
        )
    return rows


def to_json(report: Report) -> str:
    doc = asdict(report)
    doc["rows"] = schema_rows(report)
    for row, result in zip(doc["results"], report.results, strict=True):
        row["met"] = result.met
    for row, mem in zip(doc["memory"], report.memory, strict=True):
        row["growth"] = mem.growth
        row["flat"] = mem.flat
    return json.dumps(doc, indent=2)


# ─── main ─────────────────────────────────────────────────────────────────────────────────────


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=None, help="turns in the verify/replay session (10000)")
    parser.add_argument("--appends", type=int, default=None, help="timed appends per append benchmark (2000)")
    parser.add_argument("--rounds", type=int, default=None, help="repetitions; the median is reported (3)")
    parser.add_argument("--quick", action="store_true", help="small sizes, one round (~20 s)")
    parser.add_argument("--json", action="store_true", help="print results as JSON instead of a table")
    parser.add_argument("--profile", action="store_true", help="also print cProfile top functions")
    parser.add_argument("--seed", type=int, default=20240607)
    parser.add_argument(
        "--cpu-clock",
        action="store_true",
        help="time verify and replay (and their floors) by this process's CPU time, not wall time",
    )
    parser.add_argument("--src", type=Path, default=_SRC, help="flightlog source tree to measure (this one)")
    parser.add_argument(
        "--no-io", action="store_true", help="skip the I/O per commit counts of the FULL append rows (strace)"
    )
    parser.add_argument("--io-child", choices=_IO_SIDES, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--io-sync", default="FULL", help=argparse.SUPPRESS)
    parser.add_argument("--io-batch", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.io_child is not None:
        io_child(args.io_child, args.io_sync, args.io_batch, args.appends or 500)
        return 0
    turns = args.turns or (2000 if args.quick else 10_000)
    appends = args.appends or (500 if args.quick else 2000)
    rounds = args.rounds or (1 if args.quick else 3)
    if turns < 10 or appends < 10 or rounds < 1:
        parser.error("--turns and --appends must be >= 10, --rounds >= 1")

    if args.cpu_clock:
        _READ_CLOCK[0] = time.process_time
    report = Report(
        environment=_environment(),
        config={
            "turns": turns,
            "appends": appends,
            "rounds": rounds,
            "seed": args.seed,
            "src": str(_SRC),
            "read_clock": "cpu" if args.cpu_clock else "wall",
        },
    )
    workload = Workload(args.seed)
    workdir = Path(tempfile.mkdtemp(prefix="flightlog-bench-"))
    started = time.perf_counter()
    try:
        bench_appends(report, workdir, workload, appends, rounds, io=not args.no_io)

        session_db = workdir / "session.db"
        small_turns = min(turns, max(turns // 10, 256))  # >= 2 read batches of 512 rows
        _log(f"fixture: recording sessions of {turns:,} and {small_turns:,} turns")
        store = SqliteStore(session_db, synchronous="NORMAL")
        try:
            events = populate(store, "large", turns, workload)
            populate(store, "small", small_turns, workload)
        finally:
            store.close()

        bench_disk(report, session_db, workdir)
        bench_verify(report, session_db, "large", rounds)
        bench_replay(report, session_db, "large", events, rounds)
        bench_memory(report, session_db, (("small", small_turns), ("large", turns)))
        if args.profile:
            _log("profiling")
            bench_breakdown(report, workdir, workload, min(appends, 2000))
            bench_profiles(report, workdir, workload, session_db, "large", appends)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    report.config["elapsed_s"] = round(time.perf_counter() - started, 1)
    print(to_json(report) if args.json else render(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
