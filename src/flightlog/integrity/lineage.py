"""A kernel sub-agent's parent, as the verified ledgers prove it, against the ``parent_session_id`` its
``sessions`` row names.

The row's ``parent_session_id`` is covered by no hash, yet it decides where a session sits in its run
tree: ``flightlog resume`` of a sub-agent resumes its tree's root, and the depth a run delegates at
(``Agent.max_spawn_depth``) counts its ancestors. A row edited to name no parent would make a child a root
(resumed at depth 0, free of its tree's bound); a row edited to name another session would move it to
another tree. The ledgers say it, covered by their chains:

* the parent's ledger records every child it spawns: ``agent_process_changed`` (first ``spawned``) whose
  ``agent_id`` is the child's session id and whose ``parent_session_id`` is the parent
  (:mod:`flightlog.kernel.subagents`), after the delegating call's ``external_effect_intent``, from whose
  key the child's id derives (:func:`child_session_id`). Only such an entry proves a child
  (:class:`Spawns`): one naming any other session (a database writer can append a chain-valid one to an
  open session's unsigned tail) proves nothing, so a run started as a root, which has no ``spawned_by``
  either, cannot be moved under another run by such an append (atk4 b06);
* the child's own start names its parent: a kernel sub-agent's first transaction holds, right after the
  kernel's ``budget_limits``, ``Custom("spawned_by", {parent_session_id, turn, call_id, depth,
  depth_limit})`` (:data:`SPAWNED_BY`; written since this check exists, so a child recorded before it has
  none and is proven by its parent's ledger alone).

What is compared, for a session whose verified first events are a kernel run's start (``run_started``,
``provider_capability_evidence``..., ``budget_limits``: :mod:`flightlog.integrity.authorship`):

* a ``spawned_by`` record naming ``P`` while the row names another parent or none: ``row_mismatch`` at
  that record's seq;
* a parent the row names (the record's, when both agree) that the parent's ledger does not prove: the
  parent is no session, its ledger fails the check, or its verified events hold no
  ``agent_process_changed`` of one of its delegating calls naming this session as its child (one naming it
  without such a call's key is named in the detail): ``row_mismatch`` (at the ``spawned_by``
  record's seq, else at the start's ``budget_limits``), the detail saying which;
* a row naming no parent with no ``spawned_by`` record: a root, unless the parent the row's metadata
  names (``subagent.parent``, unhashed: only where to look) records spawning it in its verified ledger
  (a sub-agent recorded before ``spawned_by``, its row edited): ``row_mismatch`` at the start's
  ``budget_limits``.

A session that is not a kernel run (an import, an integration's session, a run recorded through the
``Recorder`` API or a core job) is not compared: their parents (a Claude Code sidechain's, a LangGraph
subgraph's, a background task's) are not fixed by a record the kernel writes, and the row stays the only
record of them. A kernel child whose ledger predates the ``spawned_by`` record, its row edited to name no
parent *and* its metadata cleared, is not caught by the check of that session alone (nothing it holds
names a parent, and finding the one that spawned it means reading every ledger); ``audit --all``, which
reads them all, names it (:meth:`TreeProofs.cut_off`), and its ``resume`` runs it as a root.

:class:`ParentCheck` reads the child's first rows as the full check streams them (``Auditor.session``'s
tap), then the parent's through a check the caller gives (:data:`ParentVerifier`: the full check for
``audit``, ``verify`` and ``require_intact``, whose :class:`~flightlog.integrity.audit.Auditor` may keep
the spawns of the parents it proved while their heads stand still (``audit --all``, a resume's checks of
a tree); the quick chain check for ``show`` and ``runs --rebuild``), never trusting a parent's row it has
not verified.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from ..encoding import decode_stored, decodes_without
from ..errors import Divergence, EventDecodeError, SessionNotFound
from ..events import AgentProcessChanged, Custom, RunStarted
from ..store.base import SessionRecord, Store, StoredEvent
from .authorship import BUDGET_LIMITS, CAPABILITY_EVIDENCE, ROW_MISMATCH
from .effects import EFFECT_INTENT

__all__ = [
    "PARENT_FIELD",
    "SPAWNED_BY",
    "CutOff",
    "ParentCheck",
    "ParentLedger",
    "ParentVerifier",
    "SpawnScan",
    "SpawnedBy",
    "Spawns",
    "TreeProofs",
    "child_session_id",
    "lineage_divergence",
    "parent_divergence",
    "read_start",
]

SPAWNED_BY = "spawned_by"
"""``custom_kind`` of a kernel sub-agent's start record, right after its ``budget_limits`` (module docs)."""
PARENT_FIELD = "parent_session_id"
"""The ``sessions`` row's field this module compares."""


@dataclass(frozen=True)
class ParentLedger:
    """What a parent's check found (:data:`ParentVerifier`).

    Attributes:
        children: Per child session id its verified ledger proves spawning, the seq of its first
            ``agent_process_changed`` naming it (:class:`Spawns`); empty when the check failed.
        events: How many events the check read.
        failure: None when the parent passed its check, else a few words saying why not (its first
            divergence): its ledger then proves nothing.
        unkeyed: Per session id an ``agent_process_changed`` names that no delegating call's key derives
            (:attr:`Spawns.unkeyed`), the seq of the first: named in a finding (empty when not read).
    """

    children: Mapping[str, int]
    events: int
    failure: str | None = None
    unkeyed: Mapping[str, int] = field(default_factory=dict)


ParentVerifier = Callable[[str], ParentLedger]
"""``verify(parent_id)``: check the session ``parent_id`` and read its spawns (its rows through a
:class:`SpawnScan`). Raises ``SessionNotFound`` when there is no such session."""

_START_SPELLINGS = (b"run_started",)
_PROCESS_SPELLING = b"agent_process_changed"
_INTENT_SPELLING = EFFECT_INTENT.encode()
_ESCAPE = b"\\u"
"""The only JSON escape that can spell a letter or ``_`` (a decoded ``agent_process_changed`` is these
bytes, or holds one); RFC 8785 writes it only for control characters, so rows holding it are rare."""


@dataclass(frozen=True)
class SpawnedBy:
    """A kernel sub-agent's ``spawned_by`` record (its start's, module docs).

    Attributes:
        seq: Its seq in the child's ledger.
        parent: ``parent_session_id``: the session whose delegating call spawned the child.
        turn: The parent's turn of that call.
        call_id: The delegating call's id.
        depth: The child's depth in its run tree when spawned (the root's children are 1).
        depth_limit: The deepest depth its ancestors' ``max_spawn_depth`` let any run of its subtree reach
            (None: no bound), as its parent computed it (:mod:`flightlog.kernel.subagents`, "Depth").
    """

    seq: int
    parent: str
    turn: int
    call_id: str
    depth: int
    depth_limit: int | None

    def payload(self) -> dict[str, Any]:
        """The record's payload (``seq`` is where it is, not what it says)."""
        return {
            "parent_session_id": self.parent,
            "turn": self.turn,
            "call_id": self.call_id,
            "depth": self.depth,
            "depth_limit": self.depth_limit,
        }

    @classmethod
    def of(cls, seq: int, payload: Any) -> SpawnedBy:
        """The record a ``spawned_by`` payload at ``seq`` holds.

        Raises:
            ValueError: a field is missing or of another type; the message names the field and the seq.
        """
        data = payload if isinstance(payload, dict) else {}
        parent, turn, call_id = data.get("parent_session_id"), data.get("turn"), data.get("call_id")
        depth, limit = data.get("depth"), data.get("depth_limit")
        if not (isinstance(parent, str) and parent):
            raise ValueError(_malformed(seq, "parent_session_id", parent))
        if not isinstance(call_id, str):
            raise ValueError(_malformed(seq, "call_id", call_id))
        if not _count(turn):
            raise ValueError(_malformed(seq, "turn", turn))
        if not (_count(depth) and depth >= 1):
            raise ValueError(_malformed(seq, "depth", depth))
        if limit is not None and not _count(limit):
            raise ValueError(_malformed(seq, "depth_limit", limit))
        return cls(seq, parent, turn, call_id, depth, limit)


def _count(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _malformed(seq: int, name: str, value: Any) -> str:
    return f"the {SPAWNED_BY} record at seq {seq}: payload field {name!r} is {value!r}"


@dataclass
class _Start:
    """What a session's first rows say about its parent: fed rows in seq order (:meth:`feed` returns True
    once decided)."""

    kernel: bool = False
    limits_seq: int | None = None
    spawned: SpawnedBy | None = None
    malformed: str | None = None
    done: bool = False
    _run: bool = False

    def feed(self, seq: int, data: bytes) -> bool:
        """Read one more row; True (and :attr:`done`) once decided.

        Raises:
            EventDecodeError: a row read to decide does not decode (names its seq).
        """
        self.done = self._feed(seq, data)
        return self.done

    def _feed(self, seq: int, data: bytes) -> bool:
        if seq == 0:
            if decodes_without(data, _START_SPELLINGS):
                return True
            self._run = isinstance(decode_stored(data, seq=0), RunStarted)
            return not self._run
        if not self._run:  # a gap before seq 0: nothing decided (the audit reports the gap)
            return True
        event = decode_stored(data, seq=seq)
        kind = event.custom_kind if isinstance(event, Custom) else None
        if not self.kernel:
            if kind == CAPABILITY_EVIDENCE:
                return False
            if kind == BUDGET_LIMITS:
                self.kernel, self.limits_seq = True, seq
                return False
            return True  # not a kernel run's start
        if kind == SPAWNED_BY and isinstance(event, Custom):
            try:
                self.spawned = SpawnedBy.of(seq, event.payload)
            except ValueError as exc:
                self.malformed = str(exc)
        return True


def read_start(store: Store, session_id: str) -> tuple[bool, SpawnedBy | None]:
    """``(whether the session's first rows are a kernel run's start, its spawned_by record or None)``, read
    from its first rows (a few: seq 0 to the row after ``budget_limits``). Call on a session that passed
    its check (these rows are then the verified ones).

    Raises:
        EventDecodeError: a row read does not decode (names its seq).
        ValueError: the ``spawned_by`` record is malformed (names the field and the seq).
    """
    start = _Start()
    for page in store.read_chain(session_id):
        if any(start.feed(row[0], row[1]) for row in page):
            break
    if start.malformed is not None:
        raise ValueError(start.malformed)
    return start.kernel, start.spawned


def child_session_id(key: str) -> str:
    """The session id of the sub-agent a delegating call with effect key ``key`` (``"{parent session id}:
    {turn}:{call id}"``, :func:`flightlog.kernel.effects.effect_key`) spawns: the first 32 lowercase hex
    characters of ``sha256("flightlog-subagent:" + key)``. Every kernel sub-agent's id is made so (since
    sub-agents exist: :mod:`flightlog.kernel.subagents`, "Exactly once"), which is what lets a parent's
    ledger prove a child without trusting whatever session id an entry names (:class:`Spawns`)."""
    return hashlib.sha256(f"flightlog-subagent:{key}".encode()).hexdigest()[:32]


class Spawns:
    """The children one session's ledger proves it spawned, fed its events in seq order (:meth:`note`).

    A child counts when an ``agent_process_changed`` whose ``parent_session_id`` is this session names it
    (``agent_id``) *and* an earlier ``external_effect_intent`` of this session (the delegating call's
    write-ahead intent) has a key this session's calls use (``"{session id}:..."``) from which the child's id
    derives (:func:`child_session_id`). An entry naming any other session id proves nothing: a database
    writer can append a chain-valid ``agent_process_changed`` to an unsigned tail, but not find a key whose
    hash is the id of a session that already exists (atk4 b06: a root moved under another run).

    Attributes:
        children: Per proven child id, the seq of the first entry naming it.
        unkeyed: Per id named by an entry no intent key derives, the seq of the first such entry (shown in
            a finding, never evidence).
    """

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.children: dict[str, int] = {}
        self.unkeyed: dict[str, int] = {}
        self._derived: set[str] = set()
        self._prefix = f"{session_id}:"

    def note(self, seq: int, event: object) -> None:
        """Read one event of the session (at ``seq``)."""
        if isinstance(event, AgentProcessChanged):
            if event.parent_session_id != self.session_id:
                return
            if event.agent_id in self._derived:
                self.children.setdefault(event.agent_id, seq)
            else:
                self.unkeyed.setdefault(event.agent_id, seq)
        elif isinstance(event, Custom) and event.custom_kind == EFFECT_INTENT:
            key = event.payload.get("key") if isinstance(event.payload, dict) else None
            if isinstance(key, str) and key.startswith(self._prefix):
                self._derived.add(child_session_id(key))


class SpawnScan:
    """The children a session's ledger records spawning (:class:`Spawns`): wraps the stream of its rows (a
    check's ``tap``). Only rows holding the bytes of ``agent_process_changed``, of ``external_effect_intent``
    or a ``\\u`` escape are decoded. A row that does not decode is skipped (the check reading the stream
    reports it ``undecodable``, and its verdict decides whether :attr:`children` is evidence).

    Attributes:
        children: As :attr:`Spawns.children`, of the stream :meth:`tap` read last.
        unkeyed: As :attr:`Spawns.unkeyed`.
        events: How many rows it read.
    """

    def __init__(self) -> None:
        self.children: dict[str, int] = {}
        self.unkeyed: dict[str, int] = {}
        self.events = 0

    def tap(self, record: SessionRecord, stream: Iterable[StoredEvent]) -> Iterator[StoredEvent]:
        """Yield ``stream`` unchanged, noting the process-table entries of ``record``'s session."""
        spawns = Spawns(record.session_id)
        self.children, self.unkeyed, self.events = spawns.children, spawns.unkeyed, 0
        for row in stream:
            self.events += 1
            data = row.event_bytes
            if _PROCESS_SPELLING in data or _INTENT_SPELLING in data or _ESCAPE in data:
                try:
                    event: object = decode_stored(data, seq=row.seq)
                except EventDecodeError:  # the check reading this stream reports it (``undecodable``)
                    event = None
                spawns.note(row.seq, event)
            yield row


def _proof(child: str, parent: str, verify: ParentVerifier) -> tuple[int | None, str]:
    """``(the seq of the parent's entry naming child, '')`` when ``parent``'s verified ledger records
    spawning ``child``; else ``(None, why not)``."""
    try:
        found = verify(parent)
    except SessionNotFound:
        return None, f"there is no session {parent!r}"
    if found.failure is not None:
        return None, f"session {parent!r} fails its check ({found.failure}), so its ledger proves nothing"
    seq = found.children.get(child)
    if seq is not None:
        return seq, ""
    forged = found.unkeyed.get(child)
    if forged is not None:
        return None, (
            f"the verified ledger of {parent!r} ({found.events} events) names this session in the "
            f"agent_process_changed at seq {forged}, but no external_effect_intent before it has a key of "
            f"{parent!r}'s calls this session id derives from, so it records no spawn of this session"
        )
    return None, (
        f"the verified ledger of {parent!r} ({found.events} events) records no spawn of this session "
        "(no agent_process_changed of one of its delegating calls names it)"
    )


def parent_divergence(
    record: SessionRecord, kernel: bool, spawned: SpawnedBy | None, limits_seq: int, verify: ParentVerifier
) -> Divergence | None:
    """The ``row_mismatch`` of ``record``'s ``parent_session_id`` (module docs), or None.

    Args:
        record: The session's row.
        kernel: Whether its verified first events are a kernel run's start (else nothing is compared).
        spawned: Its start's ``spawned_by`` record, or None.
        limits_seq: The seq of its start's ``budget_limits`` (where a finding without a record points).
        verify: Checks a parent and reads its spawns (:data:`ParentVerifier`).
    """
    if not kernel:
        return None
    row = record.parent_session_id
    if spawned is not None and row != spawned.parent:
        return Divergence(
            spawned.seq,
            ROW_MISMATCH,
            f"sessions row {PARENT_FIELD} {row!r}, the ledger's {spawned.parent!r}: the {SPAWNED_BY} record "
            f"at seq {spawned.seq} names it (depth {spawned.depth}, the call {spawned.call_id!r} of its turn "
            f"{spawned.turn})",
        )
    if row is None:
        return _hinted_parent(record, limits_seq, verify) if spawned is None else None
    if type(row) is not str:  # SQLite keeps what a raw write gives (a BLOB)
        return Divergence(
            limits_seq,
            ROW_MISMATCH,
            f"sessions row {PARENT_FIELD} holds {type(row).__name__}, not a session id",
        )
    seq, why = _proof(record.session_id, row, verify)
    if seq is not None:
        return None
    at = spawned.seq if spawned is not None else limits_seq
    named = f"; its {SPAWNED_BY} record at seq {at} names it" if spawned is not None else ""
    return Divergence(at, ROW_MISMATCH, f"sessions row {PARENT_FIELD} {row!r} is not proven: {why}{named}")


def _hinted_parent(record: SessionRecord, limits_seq: int, verify: ParentVerifier) -> Divergence | None:
    """A kernel run whose row names no parent and whose start holds no ``spawned_by`` (a root, or a
    sub-agent recorded before that record): the parent its row's metadata names (``subagent.parent``, which
    the delegating call writes; no hash covers it) is only a place to look, and a ``row_mismatch`` only when
    that parent's verified ledger records spawning this session."""
    meta = record.metadata if isinstance(record.metadata, dict) else {}
    sub = meta.get("subagent")
    hint = sub.get("parent") if isinstance(sub, dict) else None
    if not isinstance(hint, str) or hint == record.session_id:
        return None
    seq, _ = _proof(record.session_id, hint, verify)
    if seq is None:
        return None  # the metadata names no parent that spawned it: it proves nothing either way
    return Divergence(
        limits_seq,
        ROW_MISMATCH,
        f"sessions row {PARENT_FIELD} None, but the verified ledger of {hint!r} records spawning this session "
        f"(agent_process_changed at seq {seq}; the row's metadata names it, its start holds no {SPAWNED_BY})",
    )


@dataclass
class TreeProofs:
    """What checks of many sessions learn about their run trees, kept for one sweep (``audit --all``, a
    resume's checks of one tree: :attr:`flightlog.integrity.audit.Auditor.trees`).

    Attributes:
        spawns: Per session whose check passed, ``(its head seq then, {child id: seq of the first
            agent_process_changed naming it})``: proves its children's parent links while its head stands
            still (a row rewritten in place after it was kept goes unseen by its children's checks; its own
            check in that sweep still names it).
        unkeyed: Per session of :attr:`spawns`, its :attr:`Spawns.unkeyed` (entries that prove nothing,
            kept to name them in a child's finding).
        roots: Kernel runs whose row names no parent and whose start holds no ``spawned_by`` (roots, or
            sub-agents recorded before that record existed), each with the seq of its start's
            ``budget_limits``.
        held: As :attr:`spawns`, from the kernel's fold of a parent's ledger that passed the full check (a
            resume's) or that this process holds and appends to (a delegating call's): proof whatever the
            parent's head does since (its own appends move it while its children start).
    """

    spawns: dict[str, tuple[int, dict[str, int]]] = field(default_factory=dict)
    unkeyed: dict[str, dict[str, int]] = field(default_factory=dict)
    roots: dict[str, int] = field(default_factory=dict)
    held: dict[str, tuple[int, dict[str, int]]] = field(default_factory=dict)

    def cut_off(self) -> list[CutOff]:
        """The kernel runs of :attr:`roots` a kept verified ledger records spawning: sub-agents whose row
        was edited to name no parent (the only evidence, for one recorded before ``spawned_by``), by id."""
        found = [
            CutOff(child, parent, seq, self.roots[child])
            for parent, (_, children) in self.spawns.items()
            for child, seq in children.items()
            if child in self.roots
        ]
        return sorted(found, key=lambda c: (c.session_id, c.parent))


@dataclass(frozen=True)
class CutOff:
    """A kernel run whose row names no parent while a verified ledger records spawning it
    (:meth:`TreeProofs.cut_off`).

    Attributes:
        session_id: The run.
        parent: The session whose verified ledger spawned it.
        seq: The seq of the parent's first ``agent_process_changed`` naming it.
        at: The seq of the run's own ``budget_limits`` (the end of its start, where no ``spawned_by`` is).
    """

    session_id: str
    parent: str
    seq: int
    at: int

    def why(self) -> str:
        """One line naming the field, both sessions and the proving seq."""
        return (
            f"sessions row {PARENT_FIELD} None, but the verified ledger of {self.parent!r} records spawning "
            f"this session (agent_process_changed at seq {self.seq}); its start (to seq {self.at}) holds no "
            f"{SPAWNED_BY} record (a sub-agent recorded before it), so only that ledger names its parent"
        )


class ParentCheck:
    """The row's ``parent_session_id`` against the first rows the full check streams (``Auditor.session``)
    and the parent's verified ledger."""

    def __init__(self) -> None:
        self._record: SessionRecord | None = None
        self._start = _Start()
        self._broken = False

    def tap(self, record: SessionRecord, stream: Iterable[StoredEvent]) -> Iterator[StoredEvent]:
        """Wrap the audit's row stream of ``record``'s session: read the first rows until the start is
        decided, rows unchanged, same order. A row that does not decode leaves the check undecided (the
        audit reports it ``undecodable``)."""
        self._record, self._start, self._broken = record, _Start(), False
        decided = False
        for row in stream:
            if not decided and not self._broken:
                try:
                    decided = self._start.feed(row.seq, row.event_bytes)
                except EventDecodeError:
                    self._broken = True
            yield row

    @property
    def root_at(self) -> int | None:
        """For a kernel run whose row names no parent and whose start holds no ``spawned_by`` (a root, or a
        sub-agent recorded before that record, cut off by an edit): the seq of its ``budget_limits``."""
        start, record = self._start, self._record
        if record is None or self._broken or not start.kernel or start.spawned is not None:
            return None
        return start.limits_seq if record.parent_session_id is None and start.malformed is None else None

    @property
    def decided(self) -> bool:
        """Whether the rows read so far decide the start (or one did not decode)."""
        return self._start.done or self._broken

    def divergence(self, verify: ParentVerifier) -> Divergence | None:
        """The ``row_mismatch`` of the session :meth:`tap` read last (call once its audit passed), or None."""
        start = self._start
        if self._record is None or self._broken or start.limits_seq is None:
            return None
        if start.malformed is not None:
            return Divergence(start.limits_seq + 1, ROW_MISMATCH, f"{PARENT_FIELD}: {start.malformed}")
        return parent_divergence(self._record, start.kernel, start.spawned, start.limits_seq, verify)


def lineage_divergence(store: Store, record: SessionRecord, verify: ParentVerifier) -> Divergence | None:
    """:class:`ParentCheck` for ``record``'s session, reading its first rows itself (the quick check
    ``show`` and ``runs --rebuild`` run, after its chain passed).

    Raises:
        EventDecodeError: a row read to decide does not decode (names its seq).
    """
    check = ParentCheck()
    for _ in check.tap(record, store.read_events(record.session_id)):
        if check.decided:
            break
    return check.divergence(verify)
