"""The same-work disk floor for a LangGraph saver that keeps flightlog's guarantees (``bench/langgraph.py``).

:class:`DiskFloor` is fed what the real saver is asked to store in the run (:func:`spy` wraps its ``put`` and
``put_writes``), and writes it to its own SQLite file with raw ``sqlite3``, ``hashlib`` and LangGraph's own
serde: the least any saver must store per turn while it keeps

* every checkpoint LangGraph ``put``: its id, parent id, namespace, metadata, channel versions, versions seen,
  ``updated_channels`` and every channel value, serialized by LangGraph's ``JsonPlusSerializer`` (one row
  each), except that a list of messages names its messages by row instead of holding them (``new_versions``
  is not stored: it is the ``channel_versions`` entries that differ from the parent's, and ``SqliteSaver``
  drops it too);
* every ``put_writes`` call (task id, task path, each write's channel and value; one row each), a list of
  messages again naming its messages;
* each message's bytes once (one row each; a message is the same message when its serialized bytes are):
  so a thread's bytes grow with its new messages, not with its history (flat per turn);
* one 32-byte chain hash (``sha256(prev ‖ u64_le(seq) ‖ body)``, ARCHITECTURE.md invariant 4) and one 32-byte
  RFC 9162 leaf hash (``sha256(0x00 ‖ body)``, RFC 9162 section 2.1.1) per row, binary;
* each time the graph stops (flightlog's signing cadence, issue 16: "sign each time the graph stops"), a signed
  note (C2SP signed-note form: origin, size, base64 RFC 9162 root, Ed25519 signature line) for the thread,
  and one for the log-wide index whose leaf is that note's hash (flightlog signs both at a stop).

A message list that extends the list the same channel held in the previous checkpoint is stored as the
previous list's length and the new messages' rows (as flightlog's deltas do); any other list names every
message's row. Rows live in one rowid table whose integer key is ``(thread << 40) | seq`` (a small integer per
thread), so no separate index is paid and appends fill pages (a ``WITHOUT ROWID`` table splits its pages
half-full and spills rows over ~1 KB: measured, 8.2 KB per turn against 4.9 KB). What the floor does not store, and flightlog does: the readable
events (``run_started``, ``llm_completed``, ``model_usage``, ``run_terminal``: what ``show``/``replay``/``runs``
read), the head record for a new process's first ``get_state``, artifact keys, hex instead of binary hashes,
and the signed checkpoints' frontiers.
"""

from __future__ import annotations

import base64
import hashlib
import sqlite3
import threading
from pathlib import Path
from typing import Any

_SCHEMA = """
CREATE TABLE rows (id INTEGER PRIMARY KEY, body BLOB NOT NULL, chain BLOB NOT NULL, leaf BLOB NOT NULL);
CREATE TABLE notes (id INTEGER PRIMARY KEY, note BLOB NOT NULL);
"""
_SHIFT = 40  # a row's id is (thread << 40) | seq: the table's own integer key, no separate index
_INDEX = 0  # the log-wide index's notes are filed under thread 0


def _typed(type_: str, data: bytes) -> bytes:
    """LangGraph's serde output as stored: the bytes alone when msgpack (all of this bench), else tagged."""
    return data if type_ == "msgpack" else b"\0" + type_.encode() + b"\0" + data


class _Range:
    """An RFC 9162 Merkle tree's compact range (section 2.1.1 root): the roots of its perfect subtrees."""

    def __init__(self) -> None:
        self.size = 0
        self.peaks: list[bytes] = []

    def append(self, leaf: bytes) -> None:
        self.peaks.append(leaf)
        self.size += 1
        n = self.size
        while n % 2 == 0:
            right, left = self.peaks.pop(), self.peaks.pop()
            self.peaks.append(hashlib.sha256(b"\x01" + left + right).digest())
            n //= 2

    def root(self) -> bytes:
        if not self.peaks:
            return hashlib.sha256(b"").digest()
        acc = self.peaks[-1]
        for peak in reversed(self.peaks[:-1]):
            acc = hashlib.sha256(b"\x01" + peak + acc).digest()
        return acc


class DiskFloor:
    """The floor's SQLite file at ``path`` (``synchronous=FULL``, WAL, as flightlog's), fed by :func:`spy`."""

    def __init__(self, path: Path, origin: str) -> None:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
        from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

        self.path = path
        self._origin = origin
        self._key = Ed25519PrivateKey.generate()
        self._key_id = hashlib.sha256(origin.encode()).digest()[:4]
        self._serde = JsonPlusSerializer()
        self.lock = threading.Lock()  # LangGraph calls put/put_writes from its executor's threads
        self._conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=FULL")
        self._conn.executescript(_SCHEMA)
        self._threads: dict[str, int] = {}
        self._chain: dict[int, tuple[int, bytes, _Range]] = {}
        self._messages: dict[tuple[int, bytes], int] = {}  # (thread, sha256 of bytes) -> row
        self._lists: dict[
            tuple[int, str, str], list[int]
        ] = {}  # (thread, ns, channel) -> rows of the last list
        self._index = _Range()

    def close(self) -> None:
        self._conn.close()

    def _thread(self, config: Any) -> int:
        name = str(config["configurable"]["thread_id"])
        if name not in self._threads:
            self._threads[name] = len(self._threads) + 1
            self._chain[self._threads[name]] = (0, bytes(32), _Range())
        return self._threads[name]

    def _row(self, thread: int, kind: bytes, data: bytes) -> int:
        seq, prev, tree = self._chain[thread]
        body = kind + data
        chain = hashlib.sha256(prev + seq.to_bytes(8, "little") + body).digest()
        leaf = hashlib.sha256(b"\x00" + body).digest()
        self._conn.execute(
            "INSERT INTO rows VALUES (?, ?, ?, ?)", ((thread << _SHIFT) | seq, body, chain, leaf)
        )
        tree.append(leaf)
        self._chain[thread] = (seq + 1, chain, tree)
        return seq

    def _message_rows(self, thread: int, value: list[Any]) -> list[int]:
        rows = []
        for message in value:
            type_, data = self._serde.dumps_typed(message)
            key = (thread, hashlib.sha256(data).digest())
            if key not in self._messages:
                self._messages[key] = self._row(thread, b"m", _typed(type_, data))
            rows.append(self._messages[key])
        return rows

    def _value(self, thread: int, ns: str, channel: str | None, value: Any) -> Any:
        from langchain_core.messages import BaseMessage

        if not (isinstance(value, list) and value and all(isinstance(v, BaseMessage) for v in value)):
            return value
        rows = self._message_rows(thread, value)
        if channel is None:
            return {"rows": rows}
        last = self._lists.get((thread, ns, channel), [])
        self._lists[(thread, ns, channel)] = rows
        if rows[: len(last)] == last and last:
            return {"extends": len(last), "rows": rows[len(last) :]}
        return {"rows": rows}

    def put(self, config: Any, checkpoint: Any, metadata: Any) -> None:
        thread = self._thread(config)
        ns = config["configurable"].get("checkpoint_ns", "")
        values = {ch: self._value(thread, ns, ch, v) for ch, v in checkpoint["channel_values"].items()}
        record = {
            "ns": ns,
            "parent": config["configurable"].get("checkpoint_id"),
            "checkpoint": {**checkpoint, "channel_values": values},
            "metadata": metadata,
        }
        type_, data = self._serde.dumps_typed(record)
        self._row(thread, b"c", _typed(type_, data))

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str) -> None:
        thread = self._thread(config)
        ns = config["configurable"].get("checkpoint_ns", "")
        record = {
            "ns": ns,
            "checkpoint": config["configurable"]["checkpoint_id"],
            "task": task_id,
            "path": task_path,
            "writes": [(channel, self._value(thread, ns, None, value)) for channel, value in writes],
        }
        type_, data = self._serde.dumps_typed(record)
        self._row(thread, b"w", _typed(type_, data))

    def stop(self, config: Any) -> None:
        """The graph stopped: sign the thread's note and the log index's note over it."""
        thread = self._thread(config)
        size, _, tree = self._chain[thread]
        note = self._note(f"{self._origin}/{thread}", size, tree.root())
        self._conn.execute("INSERT INTO notes VALUES (?, ?)", ((thread << _SHIFT) | size, note))
        self._index.append(hashlib.sha256(b"\x00" + note).digest())
        index = self._note(f"{self._origin}/_/index", self._index.size, self._index.root())
        self._conn.execute("INSERT INTO notes VALUES (?, ?)", ((_INDEX << _SHIFT) | self._index.size, index))

    def _note(self, origin: str, size: int, root: bytes) -> bytes:
        text = f"{origin}\n{size}\n{base64.b64encode(root).decode()}\n".encode()
        signature = base64.b64encode(self._key_id + self._key.sign(text)).decode()
        return text + f"\n\u2014 {self._origin} {signature}\n".encode()


def spy(saver: Any, floor: DiskFloor) -> None:
    """Feed ``floor`` every ``put`` and ``put_writes`` LangGraph makes on ``saver`` (the saver's own call
    runs first: the floor records what the real saver accepted)."""
    put, put_writes = saver.put, saver.put_writes

    def spy_put(config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        result = put(config, checkpoint, metadata, new_versions)
        with floor.lock:
            floor.put(config, checkpoint, metadata)
        return result

    def spy_writes(config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        put_writes(config, writes, task_id, task_path)
        with floor.lock:
            floor.put_writes(config, writes, task_id, task_path)

    saver.put, saver.put_writes = spy_put, spy_writes


def breakdown(path: Path, turns: int) -> str:
    """Where the floor's bytes per turn go at ``turns`` (rows per kind with their hashes, notes, pages)."""
    names = {"c": "checkpoints", "w": "writes", "m": "messages"}
    conn = sqlite3.connect(str(path))
    try:
        lines = [f"same-work floor bytes per turn at T={turns}:"]
        kinds = conn.execute(
            "SELECT substr(body, 1, 1), count(*), sum(length(body)), sum(length(chain) + length(leaf)) "
            "FROM rows GROUP BY 1 ORDER BY 3 DESC"
        ).fetchall()
        for kind, count, size, hashes in kinds:
            lines.append(
                f"  {names.get(kind.decode(), kind.decode()):<13} {size / turns:>7,.0f}  "
                f"({count / turns:.1f} rows/turn, {size / count:,.0f} B each; chain + leaf hashes "
                f"{hashes / turns:,.0f})"
            )
        count, size = conn.execute("SELECT count(*), sum(length(note)) FROM notes").fetchone()
        lines.append(f"  signed notes  {size / turns:>7,.0f}  ({count / turns:.1f} per turn)")
        try:
            pages = conn.execute(
                "SELECT name, sum(pgsize), sum(payload), sum(unused) FROM dbstat GROUP BY name ORDER BY 2 DESC"
            ).fetchall()
        except sqlite3.OperationalError:  # sqlite3 built without dbstat
            pages = []
        for name, size, payload, unused in pages:
            if size / turns >= 10:
                lines.append(
                    f"  pages {name:<7} {size / turns:>7,.0f}  (payload {payload / turns:,.0f}, "
                    f"unused {unused / turns:,.0f})"
                )
    finally:
        conn.close()
    return "\n".join(lines)
