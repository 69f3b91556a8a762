"""``FlightlogSaver``: a LangGraph checkpointer whose history is a tamper-evident flightlog ledger.

Install with ``pip install 'flightlog[langgraph]'`` (``langgraph-checkpoint>=2``). Usage::

    from flightlog import open_store
    from flightlog.integrations.langgraph import FlightlogSaver

    graph = builder.compile(checkpointer=FlightlogSaver(open_store("agent.db")))
    graph.invoke(inputs, {"configurable": {"thread_id": "t1"}})

Semantics follow LangGraph's ``BaseCheckpointSaver`` contract and its reference saver ``InMemorySaver``
(``langgraph/checkpoint/memory/__init__.py``) rule for rule; each method names the rule it follows.

Ledger layout (one flightlog session per LangGraph ``thread_id``, id ``langgraph:<thread_id>``, source
``langgraph``; every event is a :class:`~flightlog.events.Custom`):

* ``langgraph.checkpoint`` (one per ``put``, one transaction with its artifacts): ``thread_id``,
  ``checkpoint_ns``, ``checkpoint_id``, ``parent_checkpoint_id`` (absent for a root), ``checkpoint`` (the
  checkpoint without ``channel_values``) and ``metadata``, and ``channels``: for each channel in
  ``new_versions`` only, ``{"version", "type", "ref"}`` where ``ref`` is the ``sha256:<hex>`` handle of the
  serialized value (``self.serde.dumps_typed``) stored as a content-addressed, deduplicated artifact and
  ``type`` the serde's type tag; a channel in ``new_versions`` without a value is ``{"version", "type":
  "empty"}``. ``checkpoint`` and ``metadata`` are ``{"json": value}`` when the value is plain JSON that
  round-trips exactly, else ``{"type", "ref"}`` like a channel value.
* ``langgraph.writes`` (one per ``put_writes`` that adds something): ``thread_id``, ``checkpoint_ns``,
  ``checkpoint_id``, ``task_id``, ``task_path`` and ``writes``: ``[{"idx", "channel", "type", "ref"}]``.
* ``langgraph.thread_deleted`` (``delete_thread``): ``thread_id``.

Reads fold the ledger: the first read of a thread verifies its chain (refusing on divergence) and folds its
rows once, streaming, into a small in-memory index of references (values stay in the artifact table and are
loaded, and their sha256 checked, when a tuple is built). When the session's head moved without this saver
(another process wrote), only the rows appended since are read, each checked to chain onto the verified head
(and the last onto the recorded head) before it is folded; anything else rebuilds the index from a full verify.
The ledger is the truth; the index is a cache.

Writers: any number of savers, in any number of processes, may write one thread (uvicorn workers, a web
process beside a background worker), as with LangGraph's own SQLite and Postgres savers. Each write runs in
one store transaction; inside it the saver reads the session's head and authority epoch, and when another
saver wrote or took authority since (the head moved, or the epoch is not its own), it re-folds the thread
from the verified ledger and re-attaches (a :class:`~flightlog.recorder.Recorder` recomputes the chain and
refuses with ``LedgerIntegrityError`` on divergence, then takes authority) before appending. The append is
fenced by the epoch and by the expected head, so a saver never forks the chain: when a concurrent writer
commits between the check and the append (PostgreSQL reads without a lock until the append), the store
refuses it (``StaleWriter`` / ``AppendConflict``), nothing is written, and the write is retried on the new
head (up to :data:`WRITE_ATTEMPTS` times). On SQLite the transaction holds the write lock from its start, so
the first attempt always succeeds.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import random
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from ..encoding import canonical_json, decode_stored, parse_json
from ..errors import AppendConflict, EncodingError, LedgerIntegrityError, SessionNotFound, StaleWriter
from ..events import Custom
from ..integrity.notary import USER_NOTARY, Notary, UserNotary, resolve_notary
from ..ledger import chain_hash
from ..recorder import Recorder, verify_session
from ..store.base import Store

__all__ = [
    "CHECKPOINT_KIND",
    "SESSION_PREFIX",
    "SOURCE",
    "THREAD_DELETED_KIND",
    "WRITES_KIND",
    "WRITE_ATTEMPTS",
    "FlightlogSaver",
    "session_id_for",
]

CHECKPOINT_KIND = "langgraph.checkpoint"
"""``custom_kind`` of the event one ``put`` appends."""
WRITES_KIND = "langgraph.writes"
"""``custom_kind`` of the event one ``put_writes`` appends."""
THREAD_DELETED_KIND = "langgraph.thread_deleted"
"""``custom_kind`` of the event ``delete_thread`` appends; the fold forgets the thread before it."""
SESSION_PREFIX = "langgraph:"
"""Session ids are ``langgraph:<thread_id>`` (``flightlog show <thread_id>`` resolves them too)."""
SOURCE = "langgraph"
"""The ``source`` of every thread session (``flightlog ls`` shows it)."""
WRITE_ATTEMPTS = 50
"""How many times one write is tried when concurrent writers of the thread keep committing first: each
refused attempt means another writer appended, so the thread as a whole always progresses."""


def session_id_for(thread_id: str) -> str:
    """The flightlog session id that holds LangGraph thread ``thread_id``."""
    return SESSION_PREFIX + thread_id


class _Ref(NamedTuple):
    """A serialized value in the artifact table: serde type tag, ``sha256:<hex>`` handle, event seq."""

    type: str
    handle: str
    seq: int


class _Val(NamedTuple):
    """A value stored inline as exact JSON (``ref`` None) or as a serialized artifact."""

    json: Any
    ref: _Ref | None


@dataclass
class _Cp:
    checkpoint: _Val
    metadata: dict[str, Any]
    parent_id: str | None


@dataclass
class _Write:
    task_id: str
    channel: str
    ref: _Ref
    task_path: str
    idx: int


@dataclass
class _Thread:
    """The read model of one thread: references only, no values."""

    thread_id: str
    session_id: str
    next_seq: int = 0
    head: str = ""  # chain hash of the last folded row ("" before the first fold)
    # checkpoint_ns -> checkpoint_id -> checkpoint (insertion order = ledger order, as InMemorySaver's dicts)
    checkpoints: dict[str, dict[str, _Cp]] = field(default_factory=dict)
    # (checkpoint_ns, channel, version) -> value (None: "empty", as InMemorySaver's ("empty", b"") blob)
    blobs: dict[tuple[str, str, str | int | float], _Ref | None] = field(default_factory=dict)
    # (checkpoint_ns, checkpoint_id) -> (task_id, idx) -> write
    writes: dict[tuple[str, str], dict[tuple[str, int], _Write]] = field(default_factory=dict)
    recorder: Recorder | None = None

    def reset(self) -> None:
        self.checkpoints.clear()
        self.blobs.clear()
        self.writes.clear()


class _NothingToWrite(Exception):
    """Raised inside a write transaction whose ``build`` found nothing to append: the block rolls back."""


def _writes_sort_key(w: _Write) -> tuple[str, str, int]:
    """``(task_path, task_id, idx)``: LangGraph's ``writes_sort_key`` (langgraph-checkpoint 4), the order
    ``get_tuple`` must return pending writes in (kept here so older langgraph-checkpoint releases work)."""
    return (w.task_path, w.task_id, w.idx)


def _same(a: Any, b: Any) -> bool:
    """Equal and of the same JSON types all the way down (so 1 != 1.0, (1,) != [1], True != 1)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _exact_json(value: Any) -> bool:
    """True when ``value`` survives RFC 8785 encoding and parsing unchanged (types included)."""
    try:
        return _same(parse_json(canonical_json(value)), value)
    except (EncodingError, TypeError, ValueError, RecursionError):
        return False


def _merge_writes(
    stored: dict[tuple[str, int], _Write], new: Sequence[_Write]
) -> dict[tuple[str, int], _Write]:
    """InMemorySaver.put_writes' rule: a regular write (idx >= 0) already stored for the same
    (task_id, idx) is kept, a special write (idx < 0: error, interrupt, ...) replaces it.
    Returns the writes that change ``stored`` (and applies them)."""
    had = bool(stored)
    changed: dict[tuple[str, int], _Write] = {}
    for w in new:
        key = (w.task_id, w.idx)
        if key[1] >= 0 and had and key in stored:
            continue
        stored[key] = w
        changed[key] = w
    return changed


class FlightlogSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpoint saver that records every checkpoint and write on a flightlog ledger.

    Args:
        store: An open flightlog store (``flightlog.open_store(...)``; SQLite or PostgreSQL). The caller
            owns it and closes it.
        serde: LangGraph serializer for values, checkpoints and metadata (default: LangGraph's
            ``JsonPlusSerializer``, as every saver).
        notary: Sign checkpoints of each thread's session (see :mod:`flightlog.integrity.checkpoints`) and verify
            them when a thread is attached. Default :data:`~flightlog.integrity.notary.USER_NOTARY`: the user's
            log key, as ``flightlog run`` signs (resolved here, creating the key on first use); None
            records an unsigned chain.

    Thread-safe (one lock over the index and the recorders); the async methods run the sync ones in a
    worker thread. Not implemented (LangGraph's base raises ``NotImplementedError``): ``delete_for_runs``,
    ``copy_thread``, ``prune``, which would remove history from an append-only ledger.

    Raises (any method reading a thread):
        LedgerIntegrityError: the thread's chain does not verify, or an artifact is missing or its bytes do
            not hash to its handle; names the sequence of the event involved.
    """

    def __init__(
        self,
        store: Store,
        *,
        serde: SerializerProtocol | None = None,
        notary: Notary | UserNotary | None = USER_NOTARY,
    ) -> None:
        super().__init__(serde=serde)
        self.store = store
        self.notary = resolve_notary(notary)
        self._threads: dict[str, _Thread] = {}
        self._lock = threading.RLock()

    # ─── the fold ─────────────────────────────────────────────────────────────────────────
    def _thread(self, thread_id: str) -> _Thread:
        """The current read model of a thread, folding the ledger when it is new or moved on elsewhere."""
        sid = session_id_for(thread_id)
        thread = self._threads.get(thread_id)
        try:
            record = self.store.get_session(sid)
        except SessionNotFound:
            record = None
        size = record.head_seq + 1 if record is not None else 0
        if thread is not None and thread.next_seq == size:
            return thread
        if (
            thread is not None
            and record is not None
            and 0 < thread.next_seq < size
            and self._extend(thread, size, record.head_hash)
        ):
            return thread  # moved on elsewhere: extended by the rows appended since
        fresh = _Thread(thread_id, sid)
        if thread is not None:
            fresh.recorder = thread.recorder  # behind the ledger now: _recorder re-attaches before a write
        if record is not None:
            report = verify_session(self.store, sid)
            if not report.ok:
                first = report.divergences[0]
                raise LedgerIntegrityError(
                    session_id=sid,
                    seq=first.seq,
                    reason=f"{first.reason}: {first.detail}" if first.detail else first.reason,
                    divergences=report.divergences,
                )
            for row in self.store.read_events(sid, stop=report.events):
                event = decode_stored(row.event_bytes, seq=row.seq)
                if isinstance(event, Custom):
                    self._apply(fresh, row.seq, event.custom_kind, event.payload)
            fresh.next_seq, fresh.head = report.events, report.head
        self._threads[thread_id] = fresh
        return fresh

    def _extend(self, thread: _Thread, size: int, head_hash: str) -> bool:
        """Fold the rows another writer appended after what ``thread`` holds (seq ``thread.next_seq`` to
        ``size - 1``), checking that they chain onto its verified head and up to the recorded head, so a
        thread that moves on elsewhere is not re-read and re-hashed whole. False (the thread then half
        folded: the caller rebuilds it, and the full verify names any divergence) when they do not."""
        prev = thread.head
        for row in self.store.read_events(thread.session_id, start=thread.next_seq, stop=size):
            if row.prev_hash != prev or chain_hash(prev, row.seq, row.event_bytes) != row.hash:
                return False
            event = decode_stored(row.event_bytes, seq=row.seq)
            if isinstance(event, Custom):
                self._apply(thread, row.seq, event.custom_kind, event.payload)
            prev, thread.next_seq = row.hash, row.seq + 1
        thread.head = prev
        return thread.next_seq == size and prev == head_hash

    def _apply(self, thread: _Thread, seq: int, kind: str, payload: Any) -> None:
        """Fold one event into the read model (the same code for the writer and for a rebuild)."""
        if kind == THREAD_DELETED_KIND:
            thread.reset()
        elif kind == CHECKPOINT_KIND:
            ns = payload["checkpoint_ns"]
            for channel, entry in payload["channels"].items():
                ref = None if entry["type"] == "empty" else _Ref(entry["type"], entry["ref"], seq)
                thread.blobs[(ns, channel, entry["version"])] = ref
            meta = self._val(payload["metadata"], seq)
            metadata = meta.json if meta.ref is None else self._load(thread, meta.ref)
            thread.checkpoints.setdefault(ns, {})[payload["checkpoint_id"]] = _Cp(
                self._val(payload["checkpoint"], seq), metadata, payload.get("parent_checkpoint_id")
            )
        elif kind == WRITES_KIND:
            stored = thread.writes.setdefault((payload["checkpoint_ns"], payload["checkpoint_id"]), {})
            _merge_writes(
                stored,
                [
                    _Write(
                        payload["task_id"],
                        w["channel"],
                        _Ref(w["type"], w["ref"], seq),
                        payload["task_path"],
                        w["idx"],
                    )
                    for w in payload["writes"]
                ],
            )

    @staticmethod
    def _val(entry: dict[str, Any], seq: int) -> _Val:
        if "json" in entry:
            return _Val(entry["json"], None)
        return _Val(None, _Ref(entry["type"], entry["ref"], seq))

    def _load(self, thread: _Thread, ref: _Ref) -> Any:
        """Deserialize an artifact after checking that its bytes hash to its handle."""
        content = self.store.get_artifact(ref.handle)
        digest = ref.handle.removeprefix("sha256:")
        if content is None or hashlib.sha256(content).hexdigest() != digest:
            raise LedgerIntegrityError(
                session_id=thread.session_id,
                seq=ref.seq,
                reason=f"artifact {ref.handle} is {'missing' if content is None else 'altered'}",
            )
        return self.serde.loads_typed((ref.type, content))

    def _value(self, thread: _Thread, val: _Val) -> Any:
        return copy.deepcopy(val.json) if val.ref is None else self._load(thread, val.ref)

    def _tuple(self, thread: _Thread, ns: str, checkpoint_id: str, config: RunnableConfig) -> CheckpointTuple:
        cp = thread.checkpoints[ns][checkpoint_id]
        body: dict[str, Any] = self._value(thread, cp.checkpoint)
        values: dict[str, Any] = {}
        for channel, version in body["channel_versions"].items():
            key = (ns, channel, version)
            if key not in thread.blobs:
                continue
            ref = thread.blobs[key]
            if ref is not None:
                values[channel] = self._load(thread, ref)
        stored = thread.writes.get((ns, checkpoint_id), {})
        ordered = sorted(stored.values(), key=_writes_sort_key)
        pending: list[PendingWrite] = [(w.task_id, w.channel, self._load(thread, w.ref)) for w in ordered]
        parent: RunnableConfig | None = (
            {
                "configurable": {
                    "thread_id": thread.thread_id,
                    "checkpoint_ns": ns,
                    "checkpoint_id": cp.parent_id,
                }
            }
            if cp.parent_id
            else None
        )
        checkpoint: Checkpoint = {**body, "channel_values": values}  # type: ignore[typeddict-item]  # body is a stored Checkpoint minus channel_values
        return CheckpointTuple(
            config=config,
            checkpoint=checkpoint,
            metadata=copy.deepcopy(cp.metadata),  # type: ignore[arg-type]  # stored CheckpointMetadata
            parent_config=parent,
            pending_writes=pending,
        )

    # ─── BaseCheckpointSaver: reads ───────────────────────────────────────────────────────
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config["configurable"]["checkpoint_id"]`` of the thread and namespace
        (``checkpoint_ns``, default ``""``), or the latest one (highest id) without a checkpoint id.

        Returns None when there is none (or the thread was deleted after it). As InMemorySaver: channel
        values are the stored value of each channel at its version in ``channel_versions``, pending
        writes are in ``writes_sort_key`` order, ``parent_config`` points at the parent checkpoint, and
        ``config`` is the given one when it names a checkpoint.

        Raises:
            KeyError: no ``thread_id`` in ``config["configurable"]``.
            LedgerIntegrityError: see the class.
        """
        thread_id: str = config["configurable"]["thread_id"]
        ns: str = config["configurable"].get("checkpoint_ns", "")
        with self._lock:
            thread = self._thread(thread_id)
            checkpoints = thread.checkpoints.get(ns, {})
            if checkpoint_id := get_checkpoint_id(config):
                if checkpoint_id not in checkpoints:
                    return None
                return self._tuple(thread, ns, checkpoint_id, config)
            if not checkpoints:
                return None
            latest = max(checkpoints)
            return self._tuple(thread, ns, latest, _config(thread_id, ns, latest))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first (by id), per thread and namespace, as InMemorySaver.list.

        Args:
            config: Restricts to its ``thread_id`` (and ``checkpoint_ns`` / ``checkpoint_id`` when present);
                None lists every LangGraph thread in the store, oldest session first.
            filter: Metadata keys that must equal these values.
            before: Only checkpoints whose id is lower than its ``checkpoint_id``.
            limit: At most this many tuples.

        Raises:
            LedgerIntegrityError: see the class.
        """
        if config is not None:
            thread_ids: Sequence[str] = (config["configurable"]["thread_id"],)
            want_ns: str | None = config["configurable"].get("checkpoint_ns")
            want_id = get_checkpoint_id(config)
        else:
            thread_ids = [
                r.session_id.removeprefix(SESSION_PREFIX)
                for r in self.store.list_sessions()
                if r.source == SOURCE and r.session_id.startswith(SESSION_PREFIX)
            ]
            want_ns, want_id = None, None
        before_id = get_checkpoint_id(before) if before else None
        remaining = limit
        for thread_id in thread_ids:
            with self._lock:
                thread = self._thread(thread_id)
                picked: list[tuple[str, str]] = []
                for ns, checkpoints in thread.checkpoints.items():
                    if want_ns is not None and ns != want_ns:
                        continue
                    for checkpoint_id in sorted(checkpoints, reverse=True):
                        if want_id and checkpoint_id != want_id:
                            continue
                        if before_id and checkpoint_id >= before_id:
                            continue
                        metadata = checkpoints[checkpoint_id].metadata
                        if filter and not all(v == metadata.get(k) for k, v in filter.items()):
                            continue
                        picked.append((ns, checkpoint_id))
            for ns, checkpoint_id in picked:
                if remaining is not None:
                    if remaining <= 0:
                        return
                    remaining -= 1
                with self._lock:
                    item = self._tuple(thread, ns, checkpoint_id, _config(thread_id, ns, checkpoint_id))
                yield item

    # ─── BaseCheckpointSaver: writes ──────────────────────────────────────────────────────
    def _recorder(self, thread: _Thread) -> Recorder:
        """The thread's recorder, (re-)attaching when it has none or another writer took authority since
        (called inside the write transaction, so the epoch read is the one the append is checked against)."""
        rec = thread.recorder
        if rec is not None and (
            rec.next_seq != thread.next_seq or self.store.authority_epoch(thread.session_id) != rec.epoch
        ):
            thread.recorder = None  # fenced off or behind: take authority again from the verified ledger
        if thread.recorder is None:
            if thread.next_seq == 0:
                thread.recorder = Recorder.create(
                    self.store,
                    session_id=thread.session_id,
                    task=f"LangGraph thread {thread.thread_id}",
                    source=SOURCE,
                    metadata={"thread_id": thread.thread_id},
                    notary=self.notary,
                )
            else:  # signed: from the latest signed checkpoint and the rows after it, not every row again
                thread.recorder = Recorder.attach(
                    self.store, thread.session_id, notary=self.notary, full=self.notary is None
                )
        return thread.recorder

    def _typed(self, rec: Recorder, value: Any) -> dict[str, str]:
        kind, data = self.serde.dumps_typed(value)
        return {"type": kind, "ref": rec.put_artifact(data)}

    def _inline_or_ref(self, rec: Recorder, value: Any) -> dict[str, Any]:
        return {"json": value} if _exact_json(value) else self._typed(rec, value)

    def _write(
        self, thread_id: str, kind: str, build: Callable[[_Thread, Recorder], dict[str, Any] | None]
    ) -> None:
        """Append one event built by ``build`` (which stores its artifacts; None: nothing to write) in one
        transaction, together with the session row when this is the thread's first write; then fold it
        into the index. ``build`` sees the thread as of inside the transaction (after any re-fold).

        Re-folds and re-attaches when another writer moved the thread on (module docstring: writers);
        retries a write the store refused because a concurrent writer committed first. On failure nothing
        is written and the index is rebuilt from the ledger on next use.

        Raises:
            StaleWriter, AppendConflict: still refused after :data:`WRITE_ATTEMPTS` attempts.
        """
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            thread: _Thread | None = None
            try:
                with self.store.transaction():
                    thread = self._thread(thread_id)
                    rec = self._recorder(thread)
                    with rec.atomic():
                        payload = build(thread, rec)
                        if payload is None:
                            raise _NothingToWrite  # rolls back a session row or attach made for it
                        row = rec.append(Custom(custom_kind=kind, payload=payload))
            except _NothingToWrite:
                self._forget(thread)
                return
            except (StaleWriter, AppendConflict):
                self._forget(thread)
                if attempt == WRITE_ATTEMPTS:
                    raise
                continue
            except BaseException:
                self._forget(thread)
                raise
            self._apply(thread, row.seq, kind, payload)
            thread.next_seq, thread.head = rec.next_seq, rec.head
            return

    @staticmethod
    def _forget(thread: _Thread | None) -> None:
        """After a failed write: rebuild the index and re-attach on next use (the session row and the
        epoch bump of a first write may have rolled back with it)."""
        if thread is not None:
            thread.next_seq = -1
            thread.recorder = None

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Append one ``langgraph.checkpoint`` event, in one transaction with the artifacts of the values
        of the channels in ``new_versions`` (only those: LangGraph passes the channels that changed).

        The parent is ``config["configurable"]["checkpoint_id"]``; metadata is
        ``get_checkpoint_metadata(config, metadata)``, as InMemorySaver.put.

        Returns:
            ``{"configurable": {"thread_id", "checkpoint_ns", "checkpoint_id"}}`` of the stored checkpoint.

        Raises:
            KeyError: no ``thread_id`` in ``config["configurable"]``.
            LedgerIntegrityError: the thread's ledger does not verify (nothing written).
            StaleWriter: another saver took over writing this thread.
        """
        thread_id: str = config["configurable"]["thread_id"]
        ns: str = config["configurable"].get("checkpoint_ns", "")
        body: dict[str, Any] = dict(checkpoint)
        values: dict[str, Any] = body.pop("channel_values")

        def build(_thread: _Thread, rec: Recorder) -> dict[str, Any]:
            channels: dict[str, Any] = {}
            for channel, version in new_versions.items():
                entry = self._typed(rec, values[channel]) if channel in values else {"type": "empty"}
                channels[channel] = {"version": version, **entry}
            payload: dict[str, Any] = {
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint["id"],
                "checkpoint": self._inline_or_ref(rec, body),
                "metadata": self._inline_or_ref(rec, get_checkpoint_metadata(config, metadata)),
                "channels": channels,
            }
            if parent := config["configurable"].get("checkpoint_id"):
                payload["parent_checkpoint_id"] = parent
            return payload

        with self._lock:
            self._write(thread_id, CHECKPOINT_KIND, build)
        return _config(thread_id, ns, checkpoint["id"])

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Append one ``langgraph.writes`` event with the writes of a task linked to a checkpoint.

        Idempotency, as InMemorySaver.put_writes: each write's index is its position, or
        ``WRITES_IDX_MAP[channel]`` (negative) for special channels (error, interrupt, ...); a regular write
        whose (task_id, idx) is already stored for this checkpoint is ignored, a special one replaces it.
        Nothing is appended when every write is ignored.

        Raises:
            KeyError: no ``thread_id`` or ``checkpoint_id`` in ``config["configurable"]``.
            LedgerIntegrityError, StaleWriter: as :meth:`put`.
        """
        thread_id: str = config["configurable"]["thread_id"]
        ns: str = config["configurable"].get("checkpoint_ns", "")
        checkpoint_id: str = config["configurable"]["checkpoint_id"]
        dummy = _Ref("", "", -1)

        def build(thread: _Thread, rec: Recorder) -> dict[str, Any] | None:
            probe = dict(thread.writes.get((ns, checkpoint_id), {}))
            wanted = _merge_writes(
                probe,
                [
                    _Write(task_id, c, dummy, task_path, WRITES_IDX_MAP.get(c, i))
                    for i, (c, _) in enumerate(writes)
                ],
            )
            if not wanted:
                return None
            entries: list[dict[str, Any]] = []
            for i, (channel, value) in enumerate(writes):
                idx = WRITES_IDX_MAP.get(channel, i)
                if (task_id, idx) in wanted:
                    entries.append({"idx": idx, "channel": channel, **self._typed(rec, value)})
            return {
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint_id,
                "task_id": task_id,
                "task_path": task_path,
                "writes": entries,
            }

        with self._lock:
            self._write(thread_id, WRITES_KIND, build)

    def delete_thread(self, thread_id: str) -> None:
        """Forget a thread: appends ``langgraph.thread_deleted``; reads then see nothing written before it.

        The ledger is append-only (ARCHITECTURE.md invariant 1): the deleted history stays stored and
        provable (``flightlog verify``/``export``/``show``); only this saver's view of the thread is
        emptied, as InMemorySaver.delete_thread empties its dicts. A thread that was never written is a
        no-op. New checkpoints after it start the thread afresh in the same session.

        Raises:
            LedgerIntegrityError, StaleWriter: as :meth:`put`.
        """
        with self._lock:
            self._write(
                thread_id,
                THREAD_DELETED_KIND,
                lambda thread, _rec: {"thread_id": thread_id} if thread.next_seq else None,
            )

    def get_next_version(self, current: str | None, channel: None) -> str:
        """InMemorySaver's versions: ``<32-digit counter>.<16-digit random>``, so a fork from an earlier
        checkpoint never reuses a version already stored for the channel."""
        if current is None:
            current_v = 0
        elif isinstance(current, int):
            current_v = current
        else:
            current_v = int(current.split(".")[0])
        return f"{current_v + 1:032}.{random.random():016}"

    # ─── async variants: the sync ones in a worker thread ─────────────────────────────────
    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """:meth:`get_tuple` in a worker thread."""
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """:meth:`list`, each tuple built in a worker thread (one at a time: bounded memory)."""
        it = self.list(config, filter=filter, before=before, limit=limit)
        while (item := await asyncio.to_thread(next, it, None)) is not None:
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """:meth:`put` in a worker thread."""
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """:meth:`put_writes` in a worker thread."""
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """:meth:`delete_thread` in a worker thread."""
        await asyncio.to_thread(self.delete_thread, thread_id)


def _config(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}}
