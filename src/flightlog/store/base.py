"""The storage seam: records that cross it and the abstract ``Store`` every backend implements.

Backends import only this module and the pure core. Records are frozen; reads iterate (never a whole
session in memory). Every write is one transaction; ``Store.transaction()`` groups several writes into one
(re-entrant: inner blocks join the outer one).

Tables (every backend): ``sessions``, ``events`` (append-only, primary key ``(session_id, seq)``),
``authority_epochs`` (fencing tokens), ``grant_policies``, ``external_effects`` (intent before,
completion after), ``artifacts`` (content-addressed by sha256, deduplicated), ``checkpoints``, ``imports``
(source file sha256 -> session), ``runs`` (the ``AgentRunSnapshot`` projection, seed 002, kept current in
the append transaction; not a ledger: rows are upserted), ``live_runs`` (heartbeats of running kernels),
``index_leaves`` + ``index_checkpoints`` (the ledger-wide index log of session checkpoints, append-only),
``cosignatures`` (witness cosignatures beside checkpoints), ``salted_artifacts`` + ``artifact_refs`` +
``artifact_erasures`` (erasable personal data, see :mod:`flightlog.integrity.erasure`), ``leases`` (fleet workers'
leases, see :mod:`flightlog.fleet`) and ``schema_migrations``.

Source: seed 003 (``SessionStore``: ``create_session``, ``record_psp9_event``, ``initialize_authority_epoch``,
``record_grant_policy``, ``record_external_effect_intent``, ``complete_external_effect``,
``put_psp9_artifact``, ``record_psp9_checkpoint``).
"""

from __future__ import annotations

import abc
import json
import re
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Self

from ..errors import InvalidSessionId, LedgerRetired, retired_phrase
from .memory import MemoryIndex

__all__ = [
    "NOT_A_RUN",
    "NO_SCHEMA",
    "RUNNABLE_STATUSES",
    "ArtifactRecord",
    "CheckpointRecord",
    "CosignatureRecord",
    "EffectRecord",
    "ErasureRecord",
    "ImportRecord",
    "IndexCheckpointRecord",
    "IndexLeaf",
    "LeaseClaim",
    "LeaseRecord",
    "LiveRunRecord",
    "NewEvent",
    "RunListing",
    "RunRow",
    "SaltedArtifactRecord",
    "SessionHead",
    "SessionRecord",
    "Store",
    "StoredEvent",
    "UnnamedSessionRow",
    "check_session_id",
    "retired_error",
    "retired_notice",
    "row_stamps",
]


def retired_error(url: str, summary: str) -> LedgerRetired:
    """The ``LedgerRetired`` a retired store raises on a write, from its retirement summary (JSON
    ``{"state", "peer", "at_ms"}``; an unreadable one still refuses, saying so)."""
    try:
        doc = json.loads(summary)
        return LedgerRetired(url=url, state=str(doc["state"]), peer=str(doc["peer"]), at_ms=int(doc["at_ms"]))
    except (ValueError, KeyError, TypeError):
        return LedgerRetired(url=url, state="moved", peer="(unreadable retirement summary)", at_ms=0)


def retired_notice(store: Store) -> str | None:
    """What a reader of ``store`` is told when ``flightlog db copy`` retired it (the CLI on stderr, the
    dashboard in its header): ``this store <retired_phrase>`` from the retirement summary the backend
    refuses writes with (the signed record is checked by ``verify``/``audit``, not here); None for a live
    store or a backend that is never retired."""
    try:
        summary = store.retirement()
    except NotImplementedError:
        return None
    if summary is None:
        return None
    error = retired_error("", summary)
    return f"this store {retired_phrase(error.state, error.peer, error.at_ms)}"


class StoredEvent(NamedTuple):
    """One durable ledger row (a named tuple: cheap to build while streaming millions of rows).

    Attributes:
        session_id: The session (stream) id.
        seq: 0-based position in the session.
        kind: The event's ``kind`` tag (denormalised for queries; the bytes are the truth).
        event_bytes: The RFC 8785 canonical bytes, exactly as hashed.
        prev_hash: Chain hash of ``seq - 1`` (``"GENESIS"`` at 0).
        hash: Chain hash of this row, 64 lowercase hex chars.
        recorded_at_ms: Epoch ms when the row was written (not covered by the hash).
    """

    session_id: str
    seq: int
    kind: str
    event_bytes: bytes
    prev_hash: str
    hash: str
    recorded_at_ms: int


# What a terminal acts on instead of showing: every C0 control (newline and tab too: an id is one cell of a
# one-line row), DEL, C1 controls and the Unicode bidirectional controls (the set cli.console escapes).
_ID_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def check_session_id(session_id: str) -> None:
    """Refuse a new session id that holds a character a terminal acts on (see :class:`InvalidSessionId`).

    Every backend's :meth:`Store.create_session` calls it before writing; importers call it before their
    transaction so the error names the file. Ids already stored are not re-checked (they stay readable).

    Raises:
        InvalidSessionId: naming the first such character as ``U+XXXX``.
    """
    bad = _ID_UNSAFE.search(session_id)
    if bad is not None:
        raise InvalidSessionId(
            session_id=session_id,
            reason=f"holds the control character U+{ord(bad.group()):04X} (ids print as one line)",
        )


@dataclass(frozen=True, slots=True)
class NewEvent:
    """A row staged by the recorder for ``Store.append_events`` (hashes already computed)."""

    seq: int
    kind: str
    event_bytes: bytes
    prev_hash: str
    hash: str


def row_stamps(rows: Sequence[NewEvent], recorded_at_ms: Sequence[int] | None, now: int) -> list[int]:
    """The ``recorded_at_ms`` of each row of an append (see :meth:`Store.append_events`): ``now`` for
    every row, or the given per-row times.

    Raises:
        ValueError: the per-row times are not one per row, or one is not an int within ±(2**53-1).
    """
    if recorded_at_ms is None:
        return [now] * len(rows)
    stamps = list(recorded_at_ms)
    if len(stamps) != len(rows):
        raise ValueError(f"recorded_at_ms has {len(stamps)} times for {len(rows)} rows")
    for at in stamps:
        if isinstance(at, bool) or not isinstance(at, int) or abs(at) > 2**53 - 1:
            raise ValueError(f"recorded_at_ms {at!r} is not an epoch-ms integer")
    return stamps


@dataclass(frozen=True, slots=True)
class SessionHead:
    """The head a batch of appends moves a session to: last seq, its chain hash, tree head (hex)."""

    seq: int
    hash: str
    root: str


@dataclass(frozen=True)
class SessionRecord:
    """One session's summary row.

    Attributes:
        session_id: The id.
        task: Short human title (goal or first prompt).
        status: ``running``, ``suspended``, ``completed``, ``failed``, ``cancelled``, ``incomplete``... .
        source: Who produced it: ``kernel``, ``import:claude-code``, ``import:codex``, ``api``.
        created_at_ms: Epoch ms the session was created.
        updated_at_ms: Epoch ms of the last append or status change.
        head_seq: Seq of the last event (-1 when empty).
        head_hash: Chain hash of the last event (``"GENESIS"`` when empty).
        merkle_root: RFC 9162 tree head over all events, hex.
        parent_session_id: Parent session for sub-agents, else None.
        metadata: JSON-ready facts (no paths, no secrets).
    """

    session_id: str
    task: str = ""
    status: str = "running"
    source: str = "api"
    created_at_ms: int = 0
    updated_at_ms: int = 0
    head_seq: int = -1
    head_hash: str = "GENESIS"
    merkle_root: str = ""
    parent_session_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def events(self) -> int:
        """Number of events (``head_seq + 1``)."""
        return self.head_seq + 1


@dataclass(frozen=True)
class EffectRecord:
    """An external-effect intent and, once done, its completion (seed 003).

    ``status`` is ``pending`` (intent durable, completion not: *in doubt* after a crash) or ``completed``.
    """

    session_id: str
    idempotency_key: str
    intent_hash: str
    intent_json: str
    status: str
    result_json: str | None
    created_at_ms: int
    completed_at_ms: int | None


@dataclass(frozen=True)
class ArtifactRecord:
    """A content-addressed artifact: handle ``sha256:<hex>``, media type, size in bytes."""

    sha256: str
    media_type: str
    size_bytes: int
    created_at_ms: int

    @property
    def handle(self) -> str:
        """The logical reference used in events: ``sha256:<hex>``."""
        return f"sha256:{self.sha256}"


@dataclass(frozen=True)
class CheckpointRecord:
    """A checkpoint over a session prefix: covers seqs ``[0, size)`` with tree head ``root`` (hex)."""

    session_id: str
    checkpoint_id: int
    size: int
    root: str
    body: str
    created_at_ms: int


@dataclass(frozen=True)
class ImportRecord:
    """A transcript file imported into a session (dedup key: the file's sha256)."""

    source_sha256: str
    session_id: str
    importer: str
    importer_version: str
    source_name: str
    imported_at_ms: int


@dataclass(frozen=True, slots=True)
class RunRow:
    """One row of the ``runs`` projection: the read model of one run (seed 002 ``AgentRunSnapshot``).

    The store keeps it and queries its indexed columns; :mod:`flightlog.runs` computes it.

    Attributes:
        run_id: The run id (primary key).
        parent: The parent run id, or None.
        source: The ``RunSource`` value.
        state: The ``RunState`` value the events give (before the session status refines it), or
            :data:`NOT_A_RUN` for a session that holds no run (never listed).
        outcome: The ``TerminalOutcome`` value when ``state`` is ``terminal``, else None.
        updated_at_ms: Epoch ms of the latest event folded into the row.
        last_seq: Seq of the last event of the run's own session folded into the row (-1: none).
        session_status: The session row's status when the run has a recorded session with events, else
            None; backends keep it equal to ``sessions.status`` when that changes.
        snapshot: The snapshot as seed 002 wire JSON (events only, no status refinement).
        fold: The fold state the projection resumes from on the next append (opaque JSON).
    """

    run_id: str
    parent: str | None
    source: str
    state: str
    outcome: str | None
    updated_at_ms: int
    last_seq: int
    session_status: str | None
    snapshot: str
    fold: str


class UnnamedSessionRow(NamedTuple):
    """A ``sessions`` row whose id names no session (a raw write: flightlog never writes one,
    :func:`check_session_id`): no listing lists it as a session (``get_session`` cannot find it), so
    ``verify --all`` names it (:meth:`Store.unnamed_sessions`)."""

    session_id: str | None
    """The id as text: None for a NULL id; a BLOB id's bytes, or those of a TEXT id that is not UTF-8,
    decoded as UTF-8 with ``backslashreplace`` (``'\\xffb'``): the spelling :meth:`Store.session_keys`
    lists it under and the lookups of many ids find it by."""
    id_type: str
    """``"null"``, ``"blob"`` or ``"text_not_utf8"``: what the row's id is instead of text."""
    created_at_ms: Any
    """The row's ``created_at_ms`` as stored (to find the row)."""
    status: str | None
    """The row's ``status`` as stored (bytes that are not UTF-8 decoded with ``backslashreplace``)."""

    def describe(self) -> str:
        """``a sessions row whose id is NULL|a BLOB ('<text>' as text)|TEXT that is not UTF-8 ('<text>' as
        text), created_at_ms …, status …``."""
        if self.session_id is None:
            what = "NULL"
        elif self.id_type == "text_not_utf8":
            what = f"TEXT that is not UTF-8 ({self.session_id!r} as text)"
        else:
            what = f"a BLOB ({self.session_id!r} as text)"
        return (
            f"a sessions row whose id is {what}, created_at_ms {self.created_at_ms!r}, status {self.status!r}"
        )


class RunListing(NamedTuple):
    """What a ``runs`` query returns per row (the fold state left out), newest first."""

    run_id: str
    parent: str | None
    source: str
    state: str
    updated_at_ms: int
    session_status: str | None
    snapshot: str


class RunPageQuery(NamedTuple):
    """What one page of the runs list asks for (:meth:`Store.page_runs`); every filter given must hold.

    Attributes:
        states: Effective states to keep (as ``query_runs``' ``states``, refined by ``refined_statuses``).
        source: Keep runs of this source.
        parent: Keep the direct children of this run.
        refined_statuses: Session status → the state it forces on a run whose events leave it in flight.
        since_ms: Keep runs started at or after this epoch ms.
        until_ms: Keep runs started before this epoch ms.
        text: Keep runs whose goal or messages hold this text: the JSON-escaped text inside the stored bytes
            of a ``run_started``, ``llm_completed``, ``tool_completed`` or ``custom`` event (ASCII case
            folded), or inside the session's task.
        sort: ``"started"`` (the session's creation, indexed) or ``"updated"`` (the last event's time; no
            index follows it, so each page scans the filtered rows).
        descending: Newest first (default) or oldest first.
        after: The keyset cursor: ``(sort value, run_id)`` of the last row of the previous page.
        limit: Rows per page.
        run_ids: Keep only these runs (None: any).
    """

    states: Collection[str] | None = None
    source: str | None = None
    parent: str | None = None
    refined_statuses: Mapping[str, str] | None = None
    since_ms: int | None = None
    until_ms: int | None = None
    text: str | None = None
    sort: str = "started"
    descending: bool = True
    after: tuple[int, str] | None = None
    limit: int = 100
    run_ids: Collection[str] | None = None


@dataclass(frozen=True, slots=True)
class LiveRunRecord:
    """The live (in-memory, not durable) state a running kernel publishes for one run.

    Attributes:
        run_id: The run (session) id.
        state: A non-terminal ``RunState`` value.
        heartbeat_at_ms: Epoch ms of the last heartbeat.
        changed_at_ms: Epoch ms when ``state`` was last published.
        tokens_used: Tokens spent so far as the kernel counts them, or None.
        steps_taken: Steps (model turns) so far, or None.
        pid: Process id of the publisher, or None. It names a process of ``host`` only.
        host: Where ``pid`` means something: the publisher's :func:`flightlog.live.host_id` (host name, and
            on Linux its boot and pid namespace), or None (a row written before the store's
            ``LIVE_RUNS_OWNER`` migration, or a publisher that does not say).
        owner: Token of the :class:`flightlog.live.LiveRegistry` that wrote the record (random, one per
            registry): a registry clears its own record only. None for a row written before that migration.
    """

    run_id: str
    state: str
    heartbeat_at_ms: int
    changed_at_ms: int
    tokens_used: int | None = None
    steps_taken: int | None = None
    pid: int | None = None
    host: str | None = None
    owner: str | None = None


@dataclass(frozen=True)
class IndexLeaf:
    """One leaf of the ledger-wide index log (:mod:`flightlog.integrity.indexlog`).

    Attributes:
        idx: 0-based leaf index in the index log.
        session_id: The session whose checkpoint this is.
        checkpoint_id: That checkpoint's id in ``checkpoints``.
        leaf: The leaf entry: the session checkpoint's signed note text (UTF-8), hashed as RFC 9162 leaf.
        recorded_at_ms: Epoch ms the leaf was written (not covered by any hash).
    """

    idx: int
    session_id: str
    checkpoint_id: int
    leaf: bytes
    recorded_at_ms: int


@dataclass(frozen=True)
class IndexCheckpointRecord:
    """A signed checkpoint of the index log over leaves ``[0, size)``; ``frontier`` is its compact range
    (subtree roots, 32 bytes each, concatenated: a cache checked against ``root``, never evidence)."""

    checkpoint_id: int
    size: int
    root: str
    body: str
    frontier: bytes | None
    created_at_ms: int


@dataclass(frozen=True)
class CosignatureRecord:
    """A witness cosignature kept beside a checkpoint (C2SP tlog-cosignature).

    Attributes:
        origin: The checkpoint's origin line (a session's, or the index log's).
        size: Tree size cosigned.
        root: Root hash cosigned, hex.
        witness: The witness's verifier key text.
        note: The checkpoint note with the log's signature and the witness's cosignature line(s).
        created_at_ms: Epoch ms stored.
    """

    origin: str
    size: int
    root: str
    witness: str
    note: str
    created_at_ms: int


@dataclass(frozen=True)
class SaltedArtifactRecord:
    """Erasable personal data: content referenced by ``salted:sha256:<hex of sha256(salt || content)>``.

    The salt is stored beside the content (never in the ledger) and erased with it.
    """

    digest: str
    media_type: str
    size_bytes: int
    created_at_ms: int

    @property
    def handle(self) -> str:
        """The logical reference used in events: ``salted:sha256:<hex>``."""
        return f"salted:sha256:{self.digest}"


@dataclass(frozen=True)
class ErasureRecord:
    """A salted artifact whose content and salt were erased, and where the erasure is ledgered.

    Attributes:
        digest: The salted digest (hex).
        erased_at_ms: Epoch ms of the erasure.
        log_session_id: The erasure log session holding the ``artifact_erased`` event.
        log_seq: That event's seq.
    """

    digest: str
    erased_at_ms: int
    log_session_id: str
    log_seq: int


@dataclass(frozen=True)
class LeaseRecord:
    """A fleet session's lease (issue 6): who may drive it, until when, under which authority epoch.

    Attributes:
        session_id: The session.
        holder: The worker holding it (``host:pid:random``), None when free.
        epoch: The authority epoch the claim bumped the session to (the fencing token granted).
        expires_at_ms: Epoch ms the lease runs out (0 when free); an expired lease may be taken over.
        acquired_at_ms: Epoch ms of the last claim (0: never claimed).
        parked_seq: Head seq at which the session was parked (suspended, waiting for a human); it is
            runnable again once its head moves past it (-2: not parked).
    """

    session_id: str
    holder: str | None
    epoch: int
    expires_at_ms: int
    acquired_at_ms: int
    parked_seq: int


NO_SCHEMA = (
    "no flightlog schema in this database yet (the first command that writes creates it: import, run, "
    "submit, db copy)"
)
"""Why a read-only open of a database with no flightlog schema (a new, empty one) is refused."""

NOT_A_RUN = "not_a_run"
"""The ``state`` column of a projection row whose session is no run (its ledger never held a
``run_started`` and no process entry names it: an OpenAI Agents SDK session used only as conversation
memory, say). Not a ``RunState`` value: :meth:`Store.query_runs` and :meth:`Store.page_runs` never return
such rows; the row exists so the projection resumes from it when a run does start."""

RUNNABLE_STATUSES: tuple[str, ...] = ("queued", "running", "suspended")
"""Session statuses a fleet worker may claim (with a free or expired lease; a parked one only after its
head moved). See :meth:`Store.claim_sessions`."""


class LeaseClaim(NamedTuple):
    """A lease just claimed: the session, the epoch granted, the previous holder (None: it was free or
    released) and the session status at the claim."""

    session_id: str
    epoch: int
    previous_holder: str | None
    status: str


class Store(abc.ABC):
    """The storage contract every backend implements (sync; reads iterate).

    Errors: backends translate driver errors at this edge into :mod:`flightlog.errors`
    (``AppendConflict``, ``StaleWriter``, ``ReadOnlyStore``, ``StoreUnavailable``, ``SessionNotFound``,
    ``EffectConflict``).
    """

    url: str
    read_only: bool

    # ─── lifecycle ─────────────────────────────────────────────────────────────────────────
    @abc.abstractmethod
    def close(self) -> None:
        """Release connections. Idempotent."""

    @abc.abstractmethod
    def transaction(self) -> AbstractContextManager[None]:
        """Group writes into one atomic transaction (re-entrant; inner blocks join the outer)."""

    @abc.abstractmethod
    def call_after_commit(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` once the outermost open transaction commits (dropped if it rolls back).

        Raises ``RuntimeError`` outside a transaction.
        """

    @abc.abstractmethod
    def call_after_rollback(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` if the outermost open transaction rolls back (callbacks run newest first).

        Raises ``RuntimeError`` outside a transaction.
        """

    @abc.abstractmethod
    def schema_version(self) -> int:
        """The highest applied migration version."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ─── sessions ──────────────────────────────────────────────────────────────────────────
    @abc.abstractmethod
    def create_session(self, record: SessionRecord) -> None:
        """Insert a session row and its authority epoch 0. Raises ``AppendConflict`` if it exists and
        ``InvalidSessionId`` (:func:`check_session_id`) for an id holding a control character."""

    @abc.abstractmethod
    def get_session(self, session_id: str) -> SessionRecord:
        """The session row of exactly ``session_id`` (no prefix: :meth:`resolve_session` resolves one).

        Raises ``SessionNotFound(exact=True)``, whose message says how to resolve a prefix."""

    @abc.abstractmethod
    def resolve_session(self, prefix: str) -> str:
        """The one session id equal to or starting with ``prefix`` (also after a ``format:`` part).

        A matching session that is another match's own stream (its ``parent_session_id`` is that match and
        its id is the match's id followed by ``:``, as a Claude Code sub-agent ``<id>:agent:<x>`` or
        background task ``<id>:task:<x>``) is not counted: a prefix naming one session apart from its own
        streams resolves to that session. When no session id matches, the source keys of imports are
        tried the same way (identity rows ``source:<key>``): a session recorded under another id than its
        source's (a Claude Code file imported before its ``sessionId`` line, under its stem) is found by
        the source's id too.

        Raises ``SessionNotFound`` when none or several match (``matches`` lists them, streams left out).
        """

    @abc.abstractmethod
    def list_sessions(self) -> Iterator[SessionRecord]:
        """Every session, oldest first; each ``session_id`` a ``str``. A row no session is found by (an id
        that is NULL, a BLOB or TEXT that is not UTF-8: an outside edit, SQLite) is left out:
        :meth:`unnamed_sessions` names it."""

    def unnamed_sessions(self) -> list[UnnamedSessionRow]:
        """The ``sessions`` rows whose id is not text (NULL, or in SQLite a BLOB or TEXT whose bytes are
        not UTF-8; a raw write), oldest first: rows no session is found by, which ``flightlog verify --all``
        names as unverifiable. This
        default: none (a backend whose key holds text only, as PostgreSQL's ``text`` primary key)."""
        return []

    @abc.abstractmethod
    def orphan_events(self) -> list[tuple[str, int]]:
        """The ``events`` rows whose ``session_id`` matches no ``sessions`` row (a raw write, or a
        ``sessions`` row deleted or re-keyed under them), as ``(id, row count)`` per such id, ordered by id:
        no session holds them, so no check of a session reads them, and ``flightlog verify --all`` names
        them. The id as text (bytes that are not UTF-8, or a BLOB's, decoded with ``backslashreplace``).
        Cost: one pass over the events' primary-key index, one ``sessions`` key lookup per distinct id."""

    @abc.abstractmethod
    def orphan_effects(self) -> list[tuple[str, int]]:
        """The ``external_effects`` rows whose ``session_id`` matches no ``sessions`` row (a raw write, or a
        session's rows deleted under them), as ``(id, row count)`` per such id, ordered by id: no session's
        check reads them (:func:`flightlog.integrity.verify.audit_session` compares a session's own rows
        with its ledger), so ``flightlog verify --all`` names them and ``db copy`` refuses them. The id as
        :meth:`orphan_events` gives it. Cost: one pass over the effects' primary-key index, one
        ``sessions`` key lookup per distinct id."""

    def ledger_marks(self, ids: Collection[str]) -> dict[str, tuple[int, int, str, int]]:
        """Per session of ``ids`` that has stored events, what its ``events`` rows themselves say, whatever
        its ``sessions`` row says: ``(row count, last seq, the last row's stored hash, a sum over the rows
        that an edit of a row's bytes moves)``: the bytes' lengths here; a backend with row versions adds
        them (PostgreSQL's ``xmin``), so an ``UPDATE`` moves it even when the length stays. An insert
        anywhere in the ledger, a deleted row, a re-chain (the last hash) or an edited row's length moves
        the mark without the ``sessions`` row moving: what a cache of folds keyed on the row's head checks
        (the dashboard's approvals queue). Sessions with no rows are left out.

        Not a verifier: a sum can be balanced. On SQLite two rewrites whose lengths compensate (one row
        ``k`` bytes longer, another ``k`` shorter), or one that keeps its row's length, keep every part of
        the mark; on PostgreSQL rows rewritten in one transaction share one new ``xmin``, so lengths chosen
        against the ``xmin`` deltas keep the sum. Only reading the bytes (``flightlog verify``:
        ``hash_mismatch``) sees every edit; a cache keyed on the mark answers from the edited-away bytes
        until the row moves or a pass reads them.

        This default reads every row (:meth:`read_events`); a SQL backend answers in one query over the
        sessions' index entries (meant for a few sessions, not the whole store)."""
        marks: dict[str, tuple[int, int, str, int]] = {}
        for sid in ids:
            rows = list(self.read_events(sid))
            if rows:
                marks[sid] = (len(rows), rows[-1].seq, rows[-1].hash, sum(len(r.event_bytes) for r in rows))
        return marks

    def session_keys(self) -> list[tuple[str, str, int, str]]:
        """``(session_id, status, head_seq, head_hash)`` of every session, oldest first (the order of
        :meth:`list_sessions`), without the rest of the row (no ``metadata`` decoded): what a cache keyed
        on each session's head needs. This default reads :meth:`list_sessions`; a SQL backend reads the
        four columns in one query, and lists a row whose id is a BLOB or TEXT that is not UTF-8 under its
        bytes decoded with ``backslashreplace`` (a ``str``; no session has that id), so a reader counts
        it and can name it."""
        return [(r.session_id, r.status, r.head_seq, r.head_hash) for r in self.list_sessions()]

    def session_keys_among(
        self, ids: Collection[str], status: str, start: int = 0
    ) -> tuple[int, list[tuple[str, str, int, str]]]:
        """The :meth:`session_keys` rows of the sessions whose id is in ``ids`` or whose row's status is
        ``status``, in listing order (:meth:`list_sessions`: oldest first), and how many of them are listed
        before position ``start`` (a 0-based index into the listing of every session; at or past its end:
        all of them). What a reader paging a few sessions of a big store needs without a row per session
        of the rest.

        An id is matched as :meth:`session_keys` spells it (a row whose id is not UTF-8 text, an outside
        edit, by its bytes decoded with ``backslashreplace``). This default reads :meth:`session_keys`; a
        SQL backend answers in one query, ``ids`` passed as one parameter whatever their number.
        """
        wanted = set(ids)
        found = [(i, k) for i, k in enumerate(self.session_keys()) if k[0] in wanted or k[1] == status]
        return sum(1 for i, _ in found if i < start), [k for _, k in found]

    def session_positions(self, ids: Collection[str]) -> dict[str, int]:
        """Each of ``ids``' position in the listing of every session (0-based: how many sessions
        :meth:`list_sessions` lists before it); an id of no session is left out. An id is matched, and
        keyed, as :meth:`session_keys` spells it.

        This default reads :meth:`session_keys`; a SQL backend counts in SQL.
        """
        wanted = set(ids)
        return {k[0]: i for i, k in enumerate(self.session_keys()) if k[0] in wanted}

    @abc.abstractmethod
    def set_session_status(self, session_id: str, status: str) -> None:
        """Change a session's status (not a ledger row: the ledger is append-only)."""

    @abc.abstractmethod
    def set_session_details(
        self, session_id: str, *, task: str, created_at_ms: int, metadata: Mapping[str, Any]
    ) -> None:
        """Replace a session row's task, creation time (epoch ms) and metadata (not ledger rows: what a
        later import of its source gives, when the first import was made before the source gave them).
        Raises ``SessionNotFound``."""

    # ─── events ────────────────────────────────────────────────────────────────────────────
    @abc.abstractmethod
    def append_events(
        self,
        session_id: str,
        rows: Sequence[NewEvent],
        head: SessionHead,
        *,
        epoch: int | None = None,
        recorded_at_ms: Sequence[int] | None = None,
        deferrable: bool = False,
    ) -> int:
        """Durably append rows (all or none) and move the session head, in one transaction.

        The first row must extend the stored head: ``rows[0].seq == head_seq + 1`` and
        ``rows[0].prev_hash == head_hash`` (checked in the transaction), so no writer can leave a gap or
        fork, whatever its in-memory state.

        ``recorded_at_ms``, one epoch-ms time per row, stamps each row with the time its source recorded it
        (an imported transcript's own timestamps); None stamps every row with the time of this append. The
        session's ``updated_at_ms`` is always the time of this append. (The stamp is not covered by any
        hash; nothing about durability changes.)

        Returns the ``recorded_at_ms`` stamped on the rows (the time of this append when given per row). Raises ``AppendConflict`` when a seq is taken or
        the rows do not extend the stored head (another writer), ``StaleWriter`` when ``epoch`` is not the
        session's current authority epoch, ``ReadOnlyStore`` on a read-only store. Nothing is written on error.

        ``deferrable``: the caller lets a store that saves a round trip by it send the rows with the
        transaction's next statement or its commit; these errors are then raised there (by that statement,
        or by the end of the transaction block, which rolls back). Only for a caller that, like
        ``Recorder.append``, treats an error there as an error of this call. The PostgreSQL store defers an
        append that would be the first statement of its outermost transaction; SQLite ignores it.
        """

    @abc.abstractmethod
    def read_events(
        self, session_id: str, *, start: int = 0, stop: int | None = None
    ) -> Iterator[StoredEvent]:
        """Stream rows with ``start <= seq < stop`` in ascending seq (bounded memory)."""

    def read_chain(
        self, session_id: str, *, start: int = 0, stop: int | None = None, kinds: bool = False
    ) -> Iterator[list[tuple[Any, ...]]]:
        """The chain fields of the rows with ``start <= seq < stop``, ascending seq, in pages (lists) of
        ``(seq, event_bytes, prev_hash, hash)`` tuples (with ``kinds``: ``(seq, event_bytes, prev_hash,
        hash, kind)``, the stored ``kind`` column too, which the chain hash does not cover): what
        verification reads (the stored bytes as :meth:`read_events` gives them), without a record per
        row. Memory: one page.

        This default pages :meth:`read_events`; a backend may read the columns directly.
        """
        page: list[tuple[Any, ...]] = []
        for row in self.read_events(session_id, start=start, stop=stop):
            fields = (row.seq, row.event_bytes, row.prev_hash, row.hash)
            page.append((*fields, row.kind) if kinds else fields)
            if len(page) == 512:
                yield page
                page = []
        if page:
            yield page

    def marked_ends(
        self, needle: bytes, among: Collection[str] | None = None
    ) -> dict[str, list[tuple[int, bytes]]]:
        """Every session with a stored event whose bytes contain ``needle``, mapped to its first row and
        its last two rows (``(seq, event_bytes)``, ascending seq, each row once): what a reader needs to
        decide, from the bytes the chain hash covers, which of those sessions ended. "Last" is the end of
        what is stored, never the ``sessions`` row's ``head_seq``; the ``kind`` column is not read.
        Memory: three rows per session found. ``among``: only these sessions (None: every one).

        This default reads each session's rows (:meth:`read_chain`); a SQL backend does it in one query.
        """
        found: dict[str, list[tuple[int, bytes]]] = {}
        wanted = None if among is None else set(among)
        for record in self.list_sessions():
            if wanted is not None and record.session_id not in wanted:
                continue
            first: tuple[int, bytes] | None = None
            tail: list[tuple[int, bytes]] = []
            hit = False
            for page in self.read_chain(record.session_id):
                for row in page:
                    seq, data = int(row[0]), bytes(row[1])
                    first = first or (seq, data)
                    tail = [*tail[-1:], (seq, data)]
                    hit = hit or needle in data
            if hit and first is not None:
                found[record.session_id] = sorted({first, *tail})
        return found

    # ─── authority epochs (fencing tokens) ─────────────────────────────────────────────────
    @abc.abstractmethod
    def authority_epoch(self, session_id: str) -> int:
        """The session's current authority epoch."""

    @abc.abstractmethod
    def bump_authority_epoch(self, session_id: str) -> int:
        """Increment and return the epoch: any writer holding an older one is fenced off."""

    # ─── grants ────────────────────────────────────────────────────────────────────────────
    @abc.abstractmethod
    def record_grant_policy(self, session_id: str, policy_id: str, policy_json: str) -> None:
        """Store a (possibly signed) grant policy for a session; same id + same bytes is a no-op."""

    @abc.abstractmethod
    def grant_policies(self, session_id: str) -> list[tuple[str, str]]:
        """``(policy_id, policy_json)`` pairs recorded for the session, in insertion order."""

    # ─── external effects ──────────────────────────────────────────────────────────────────
    @abc.abstractmethod
    def record_intent(
        self, session_id: str, key: str, intent_hash: str, intent_json: str, *, epoch: int | None = None
    ) -> bool:
        """Durably record an effect intent. True if new, False if the same bytes were already recorded.

        With ``epoch`` (the writer's authority epoch, its fencing token, as for :meth:`append_events`) the
        session's current epoch is checked first, in the write's transaction: ``StaleWriter`` when it
        differs (nothing written). Raises ``EffectConflict`` when ``key`` exists with another
        ``intent_hash``, ``SessionNotFound`` with ``epoch`` for an unknown session.
        """

    @abc.abstractmethod
    def complete_effect(
        self, session_id: str, key: str, result_json: str, *, epoch: int | None = None
    ) -> bool:
        """Record the completion once. True if recorded now, False if already completed with these bytes.

        With ``epoch`` (the writer's authority epoch) the session's current epoch is checked first, in the
        write's transaction: a fenced-off writer gets ``StaleWriter`` and completes nothing, whatever the
        row holds. Raises ``EffectConflict`` when already completed with other bytes, ``LookupError`` with
        no intent, ``SessionNotFound`` with ``epoch`` for an unknown session.
        """

    @abc.abstractmethod
    def get_effect(self, session_id: str, key: str) -> EffectRecord | None:
        """The effect record, or None."""

    @abc.abstractmethod
    def pending_effects(self, session_id: str | None = None) -> list[EffectRecord]:
        """Intents without completion (*in doubt* after a crash), oldest first."""

    @abc.abstractmethod
    def session_effects(self, session_id: str) -> list[EffectRecord]:
        """Every effect row of ``session_id`` (pending and completed), oldest first: what the full check
        compares with the session's verified ledger (:mod:`flightlog.integrity.effects`). [] for a session
        without effects, or without a row."""

    # ─── signal queue (flightlog.store.signals) ────────────────────────────────────────────
    @abc.abstractmethod
    def signal_sql(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Run one statement of :mod:`flightlog.store.signals` (``?`` placeholders): a ``SELECT`` returns its
        rows; a write runs in this thread's open transaction (one of its own when none) and returns ``[]``."""

    # ─── artifacts ─────────────────────────────────────────────────────────────────────────
    @abc.abstractmethod
    def put_artifact(self, content: bytes, media_type: str) -> ArtifactRecord:
        """Store bytes content-addressed by sha256 (deduplicated). Returns its record."""

    @abc.abstractmethod
    def get_artifact(self, sha256: str) -> bytes | None:
        """The bytes of an artifact (by hex digest or ``sha256:<hex>`` handle), or None when not stored.

        Every backend checks the bytes against the digest before returning them
        (:func:`flightlog.store.rows.checked_artifact`).

        Raises:
            ArtifactIntegrityError: the stored bytes hash otherwise (altered in the store), naming the handle.
        """

    @abc.abstractmethod
    def artifact_info(self, sha256: str) -> ArtifactRecord | None:
        """Metadata of an artifact, or None."""

    def get_artifacts(self, handles: Sequence[str]) -> dict[str, bytes]:
        """The bytes of several artifacts at once: ``{handle: bytes}`` for each one stored (a missing one
        is left out), keyed by the handle as given (``sha256:<hex>`` or the hex digest). Backends read them
        in a few statements; this default calls :meth:`get_artifact` per handle. Each is checked against its
        digest as :meth:`get_artifact` checks it.

        Raises:
            ArtifactIntegrityError: a stored one hashes otherwise (the first found), naming its handle.
        """
        found: dict[str, bytes] = {}
        for handle in handles:
            content = self.get_artifact(handle)
            if content is not None:
                found[handle] = content
        return found

    # ─── checkpoints ───────────────────────────────────────────────────────────────────────
    @abc.abstractmethod
    def record_checkpoint(self, session_id: str, size: int, root: str, body: str) -> int:
        """Store a checkpoint over ``[0, size)``; returns its id."""

    @abc.abstractmethod
    def checkpoints(self, session_id: str) -> list[CheckpointRecord]:
        """The session's checkpoints, oldest first."""

    # ─── ledger id and checkpoint frontiers (signed checkpoints, cheap resume) ─────────────
    # ledger_id is required; the frontier methods are optional (without them cheap resume falls back to a
    # full verification).
    @abc.abstractmethod
    def ledger_id(self) -> str:
        """The random id given to this database when created; names the ledger in checkpoint origins.

        Raises ``StoreError`` on a schema without one.
        """

    def record_checkpoint_frontier(self, checkpoint_id: int, frontier: bytes) -> None:
        """Keep a checkpoint's compact-range frontier (its subtree roots, 32 bytes each, concatenated).

        Default: not kept (``checkpoint_frontier`` then returns None).
        """
        return None

    def checkpoint_frontier(self, checkpoint_id: int) -> bytes | None:
        """The frontier kept with a checkpoint, or None."""
        return None

    def latest_checkpoint(self, session_id: str, *, max_size: int | None = None) -> CheckpointRecord | None:
        """The checkpoint covering the most events (at most ``max_size``), or None."""
        candidates = [c for c in self.checkpoints(session_id) if max_size is None or c.size <= max_size]
        return max(candidates, key=lambda c: (c.size, c.checkpoint_id), default=None)

    # ─── imports ───────────────────────────────────────────────────────────────────────────
    @abc.abstractmethod
    def find_import(self, source_sha256: str) -> ImportRecord | None:
        """The import of a file with this sha256, if any."""

    @abc.abstractmethod
    def record_import(self, record: ImportRecord) -> None:
        """Remember that a file was imported into a session."""

    # ─── runs projection (seed 002 read model) ─────────────────────────────────────────────
    @abc.abstractmethod
    def run_projection_version(self) -> int | None:
        """The fold version the ``runs`` projection was built with (0: needs a rebuild); None when this
        database has no projection (an older schema opened read-only)."""

    @abc.abstractmethod
    def set_run_projection_version(self, version: int) -> None:
        """Record the fold version the ``runs`` projection now matches (0 marks it stale)."""

    @abc.abstractmethod
    def get_run_rows(self, run_ids: Collection[str]) -> dict[str, RunRow]:
        """The projection rows of these runs (absent ids are left out)."""

    def lock_run_rows(self, run_ids: Collection[str]) -> dict[str, RunRow]:
        """Inside a write transaction that then writes (:meth:`put_run_rows`) a row for every id given: the
        current projection rows of these runs, as :meth:`get_run_rows` (absent ids are left out), and no
        other writer changes or creates a row of these ids until the transaction ends. What the projector's
        general path reads before it upserts (else a concurrent writer's change to a row, made between the
        read and the upsert, was overwritten: pgrace pass).

        This default suits a backend whose write transactions are serialised (SQLite's ``BEGIN
        IMMEDIATE``): a plain read. PostgreSQL locks the rows in sorted id order, and an absent id gets a
        placeholder row (seen by no other transaction) that the caller's write replaces.

        Raises:
            RuntimeError: outside a transaction, on a backend that locks.
        """
        return self.get_run_rows(run_ids)

    @abc.abstractmethod
    def hold_run_rows(self) -> None:
        """Inside a write transaction: no other transaction writes a projection row (an append's row swap
        or upsert, the ``sessions.status`` trigger) until this one ends; readers go on. What a rebuild
        takes before it reads the ledgers of a chunk and writes their rows, and before it clears the rows,
        so a concurrent append's row is never overwritten with an older fold (a backend whose write
        transactions are serialised already, as SQLite's ``BEGIN IMMEDIATE``, does nothing)."""

    @abc.abstractmethod
    def put_run_rows(self, rows: Sequence[RunRow]) -> None:
        """Insert or replace projection rows (one transaction; joins an open one)."""

    @abc.abstractmethod
    def replace_run_row(self, row: RunRow, expected: RunRow) -> bool:
        """Compare-and-set one projection row: store ``row`` only if the stored row still equals ``expected``.

        One guarded write, no read: what the projector does on most appends, with the row it last wrote as
        ``expected``. Joins an open transaction (else runs in one of its own). The comparison is of every
        column: ``session_status`` and ``fold`` would do against flightlog's own writers (the projection
        computes every other column from them), the others make a row edited outside flightlog miss, so
        the projector rewrites it instead of keeping the edit (:func:`flightlog.store.sql.run_swap`). The
        columns that differ between ``expected`` and ``row`` are set.

        Returns:
            True when the stored row equalled ``expected`` and now equals ``row``; False when it is absent
            or differs from ``expected`` in any column, with nothing written.

        Raises:
            ValueError: ``row`` and ``expected`` are rows of different runs.
            StoreError: the write failed; nothing is written and an open transaction stays usable.
        """

    def replace_run_row_or(self, row: RunRow, expected: RunRow, fallback: Callable[[], None]) -> None:
        """:meth:`replace_run_row`, calling ``fallback()`` (in the same transaction) when it stores nothing.

        A backend may defer the write to the transaction's next round trip (PostgreSQL sends it with the
        commit); ``fallback`` then runs at that point, still before the commit, and a rollback of the block
        that deferred it drops it. ``fallback`` must not raise (the projector's does its own error handling).

        Raises:
            ValueError: ``row`` and ``expected`` are rows of different runs.
            StoreError: the write failed; nothing is written and an open transaction stays usable.
        """
        if not self.replace_run_row(row, expected):
            fallback()

    @abc.abstractmethod
    def clear_run_rows(self) -> None:
        """Delete every projection row (a rebuild starts here)."""

    @abc.abstractmethod
    def query_runs(
        self,
        *,
        states: Collection[str] | None = None,
        source: str | None = None,
        parent: str | None = None,
        refined_statuses: Mapping[str, str] | None = None,
        limit: int | None = None,
    ) -> list[RunListing]:
        """Projection rows matching every filter given, newest ``updated_at_ms`` first (then ``run_id``);
        never a :data:`NOT_A_RUN` row.

        Args:
            states: Keep rows whose effective state is one of these: ``refined_statuses[session_status]``
                when the row's ``state`` is not ``terminal`` and its ``session_status`` is a key there,
                else its ``state``.
            source: Keep rows of this source.
            parent: Keep children of this run.
            refined_statuses: Session status → the state it forces on a run whose events leave it in flight.
            limit: Return at most this many rows (None: all).
        """

    def settled_runs(self, statuses: Collection[str], state: str | None = None) -> list[str]:
        """The ids of the runs whose projection row holds the run in flight (its events' ``state``: this
        one when given; never ``terminal`` nor :data:`NOT_A_RUN`) while its ``session_status`` is one of
        ``statuses``: the rows a status refinement settles in another state. This default filters
        :meth:`query_run_tuples`' rows; a SQL backend asks its indexes."""
        wanted = set(statuses)
        return [
            str(row[0])
            for row in self.query_run_tuples()
            if row[5] in wanted and row[3] != "terminal" and (state is None or row[3] == state)
        ]

    def query_run_tuples(
        self,
        *,
        states: Collection[str] | None = None,
        source: str | None = None,
        parent: str | None = None,
        refined_statuses: Mapping[str, str] | None = None,
        limit: int | None = None,
    ) -> list[tuple[Any, ...]]:
        """:meth:`query_runs`' rows as plain tuples in :class:`RunListing` field order: no object per row,
        for listings of every run (a backend returns its driver's rows as they come)."""
        return [
            tuple(x)
            for x in self.query_runs(
                states=states, source=source, parent=parent, refined_statuses=refined_statuses, limit=limit
            )
        ]

    @abc.abstractmethod
    def page_runs(self, query: RunPageQuery) -> list[tuple[Any, ...]]:
        """One page of the runs list (keyset pagination: each page is one indexed query whatever the
        page number), ordered by ``query.sort`` then ``run_id``, at most ``query.limit`` rows: plain tuples
        of the :class:`RunListing` fields then ``started_at_ms`` (the session's creation, epoch ms); never a
        :data:`NOT_A_RUN` row.

        Raises:
            ValueError: ``query.sort`` is not ``started`` or ``updated``.
        """

    # ─── live runs (heartbeats; not durable facts) ─────────────────────────────────────────
    @abc.abstractmethod
    def put_live_run(self, record: LiveRunRecord, *, own_only: bool = False) -> bool:
        """Insert or replace the live record of a run; whether it was written.

        Args:
            record: The record (its ``run_id`` keys the row).
            own_only: Replace a stored record only when its ``owner`` is ``record.owner`` (a heartbeat:
                a record another registry published since, e.g. of the activation that took the run
                over, stays, and False is returned); a run with no stored record gets this one.
        """

    @abc.abstractmethod
    def delete_live_run(self, run_id: str, *, owner: str | None) -> None:
        """Forget the live record of a run if ``owner`` wrote it (its ``owner`` equals ``owner``, None
        matching a row that names no owner); no error when absent or another owner's (then it stays)."""

    @abc.abstractmethod
    def live_runs(self) -> list[LiveRunRecord]:
        """Every live record (an empty list when the database has no live table, e.g. read-only old)."""

    # ─── index log, cosignatures (flightlog.integrity.indexlog, flightlog.integrity.witness) ───────────────────
    # Required of every backend (a half-built one fails at construction, not mid-run).
    def index_supported(self) -> bool:
        """Whether this backend keeps the index log (default False)."""
        return False

    @abc.abstractmethod
    def lock_index(self) -> None:
        """Inside a write transaction: hold the index log's append lock until it ends, before reading the
        index head to append to it (:func:`flightlog.integrity.indexlog.append_to_index`), so concurrent writers of
        different sessions queue instead of reading the same head and conflicting (a backend whose write
        transactions are serialised already, as SQLite's ``BEGIN IMMEDIATE``, does nothing).
        """

    @abc.abstractmethod
    def append_index_leaf(self, idx: int, session_id: str, checkpoint_id: int, leaf: bytes) -> None:
        """Append leaf ``idx`` (must be the next index) of the index log.

        Raises ``AppendConflict`` when ``idx`` is taken or not the next index.
        """

    @abc.abstractmethod
    def index_size(self) -> int:
        """Leaves in the index log."""

    @abc.abstractmethod
    def read_index_leaves(self, *, start: int = 0, stop: int | None = None) -> Iterator[IndexLeaf]:
        """Stream index leaves with ``start <= idx < stop``, ascending (bounded memory)."""

    @abc.abstractmethod
    def index_leaves_of(self, session_id: str) -> list[IndexLeaf]:
        """The index leaves of one session's checkpoints, ascending."""

    @abc.abstractmethod
    def record_index_checkpoint(self, size: int, root: str, body: str, frontier: bytes) -> int:
        """Store a signed index checkpoint over leaves ``[0, size)``; returns its id."""

    @abc.abstractmethod
    def latest_index_checkpoint(self, *, max_size: int | None = None) -> IndexCheckpointRecord | None:
        """The index checkpoint covering the most leaves (at most ``max_size``), or None."""

    @abc.abstractmethod
    def index_checkpoints(self) -> Iterator[IndexCheckpointRecord]:
        """Every index checkpoint, oldest first."""

    @abc.abstractmethod
    def record_cosignature(self, record: CosignatureRecord) -> None:
        """Keep a witness cosignature (same origin, size and witness twice: the newer note wins)."""

    @abc.abstractmethod
    def cosignatures(self, origin: str) -> list[CosignatureRecord]:
        """Cosignatures kept for checkpoints of ``origin``, by size."""

    # ─── salted (erasable) artifacts (flightlog.integrity.erasure) ───────────────────────────────────
    @abc.abstractmethod
    def put_salted_artifact(
        self, digest: str, salt: bytes, content: bytes, media_type: str, *, session_id: str | None = None
    ) -> SaltedArtifactRecord:
        """Store personal data under its salted digest (hex), with its salt beside it; remember the
        referencing session when given."""

    @abc.abstractmethod
    def get_salted_artifact(self, digest: str) -> tuple[bytes, bytes] | None:
        """``(content, salt)`` of a salted artifact, or None (never stored, or erased).

        Every backend checks ``sha256(salt || content)`` against ``digest`` before returning them
        (:func:`flightlog.store.rows.checked_salted`).

        Raises:
            ArtifactIntegrityError: they hash otherwise (altered in the store), naming the handle.
        """

    @abc.abstractmethod
    def salted_artifact_info(self, digest: str) -> SaltedArtifactRecord | None:
        """Metadata of a salted artifact, or None."""

    @abc.abstractmethod
    def artifact_sessions(self, digest: str) -> list[str]:
        """Sessions recorded as referencing a salted artifact, sorted."""

    @abc.abstractmethod
    def erase_salted_artifact(self, record: ErasureRecord) -> bool:
        """Delete a salted artifact's content and salt (overwriting the freed pages) and keep ``record``.

        Artifacts are not ledger rows: this is the one store-level deletion the ledger allows. Returns
        False when there was nothing to delete. Joins an open transaction.
        """

    @abc.abstractmethod
    def erasure(self, digest: str) -> ErasureRecord | None:
        """The erasure record of a salted artifact, or None."""

    @property
    def memory(self) -> MemoryIndex:
        """The long-term memory index kept in this database (:mod:`flightlog.store.memory`).

        Raises:
            NotImplementedError: the backend keeps none.
        """
        raise NotImplementedError(f"{type(self).__name__} keeps no memory index")

    def purge_freed_pages(self) -> None:
        """Best effort: make deleted content unrecoverable from journal files (default: nothing)."""
        return None

    # ─── live wake-ups (tail -f, fleet workers) ────────────────────────────────────────────
    def wait_for_events(self, timeout_s: float, *, session_id: str | None = None) -> bool:
        """Block until a commit may have touched ``session_id`` (any session when None), or ``timeout_s``.

        Default (SQLite): polls the session row (head, status, update time) every 50 ms; with no
        ``session_id`` it sleeps ``timeout_s`` and returns True (re-read). PostgreSQL overrides this with
        ``LISTEN``/``NOTIFY`` (no polling).

        Returns:
            True when something may have changed (callers re-read; spurious wake-ups are allowed), False
            on timeout.
        """
        if session_id is None:
            time.sleep(max(0.0, timeout_s))
            return True
        deadline = time.monotonic() + max(0.0, timeout_s)
        before = self._wake_mark(session_id)
        while (remaining := deadline - time.monotonic()) > 0:
            time.sleep(min(0.05, remaining))
            if self._wake_mark(session_id) != before:
                return True
        return False

    def _wake_mark(self, session_id: str) -> tuple[int, str, int] | None:
        from ..errors import SessionNotFound  # local: keep the seam's imports minimal

        try:
            record = self.get_session(session_id)
        except SessionNotFound:
            return None
        return (record.head_seq, record.status, record.updated_at_ms)

    # ─── fleet leases (flightlog.fleet) ────────────────────────────────────────────────────
    @abc.abstractmethod
    def open_lease(self, session_id: str) -> None:
        """Make a session claimable by fleet workers (a free lease; no-op when it has one).

        The lease is queued now (claims take the oldest first). A lease of a session that does not exist
        is kept but never runnable. Joins an open transaction.

        Raises:
            ReadOnlyStore: a read-only handle.
        """

    @abc.abstractmethod
    def get_lease(self, session_id: str) -> LeaseRecord | None:
        """The session's lease, or None (not a fleet session)."""

    @abc.abstractmethod
    def claim_sessions(
        self, holder: str, *, ttl_ms: int, limit: int = 1, session_id: str | None = None
    ) -> list[LeaseClaim]:
        """Claim up to ``limit`` runnable fleet sessions for ``holder`` for ``ttl_ms`` ms, atomically.

        Runnable: a lease that is free or expired, a session status in ``queued``/``running``/
        ``suspended``, and a head past the parked seq. Each claim bumps the session's authority epoch in
        the same transaction (the fencing token: the previous holder's appends now fail ``StaleWriter``).

        Args:
            holder: The claiming worker's id.
            ttl_ms: Lease length in ms from now (``expires_at_ms`` = now + ``ttl_ms``).
            limit: At most this many sessions, oldest queued first (``queued_at_ms``, then session id).
            session_id: Claim only this session (an empty list when it is not runnable).

        Returns:
            One :class:`LeaseClaim` per session claimed (the epoch granted, the previous holder: None when
            the lease was free, else the holder whose lease expired), possibly empty. Concurrent claimers
            never get the same session.

        Raises:
            ReadOnlyStore: a read-only handle.
        """

    @abc.abstractmethod
    def renew_lease(self, session_id: str, holder: str, *, ttl_ms: int) -> bool:
        """Extend ``holder``'s lease to now + ``ttl_ms`` (ms); False when it no longer holds it.

        An expired lease not yet claimed by another holder is still ``holder``'s and is renewed.

        Raises:
            ReadOnlyStore: a read-only handle.
        """

    @abc.abstractmethod
    def release_lease(self, session_id: str, holder: str, *, park: bool = False) -> bool:
        """Free ``holder``'s lease (with ``park``: not runnable until the session's head moves); False when
        it no longer holds it.

        Parking records the session's current head seq in ``parked_seq``; without it ``parked_seq`` is
        reset to -2. The epoch stays (the next claim bumps it).

        Raises:
            ReadOnlyStore: a read-only handle.
        """

    @abc.abstractmethod
    def wake_lease(self, session_id: str) -> bool:
        """Make a parked lease runnable again although the session's own head has not moved (a decision
        landed in a sub-agent's ledger: the root of a run tree parks on its own head, issue 13 item 6).
        Resets ``parked_seq`` to -2 and notifies waiting workers; the holder and epoch stay. Joins an
        open transaction.

        Returns:
            False when the session has no lease (not a fleet run).

        Raises:
            ReadOnlyStore: a read-only handle.
        """

    # ─── retirement (flightlog db copy; see flightlog.integrity.retirement) ───────────────────────────
    # A retired store refuses every write transaction with ``LedgerRetired`` (it names where to write):
    # ``refuse_if_retired``, called inside the transaction so a writer racing the retirement cannot slip
    # past it. Backends without ledger ids are never retired (the defaults).
    def retirement(self) -> str | None:
        """The retirement summary (JSON ``{"state", "peer", "at_ms"}``), or None when the store is live."""
        return None

    def refuse_if_retired(self) -> None:
        """The rule every write obeys: refuse when ``flightlog db copy`` retired this store, naming where the
        ledger went. Backends call it inside each write transaction (so its answer holds at the commit); an
        operation that must refuse before anything else it checks (``abort``) calls it first. Reads the
        retirement summary (in this thread's transaction when one is open); nothing else.

        Raises:
            LedgerRetired: retired (``url``, and ``state``, ``peer``, ``at_ms`` from the summary; an
                unreadable summary still refuses, saying so).
            StoreError: the summary could not be read.
        """
        summary = self.retirement()
        if summary is not None:
            raise retired_error(self.url, summary)

    def retirement_record(self) -> str | None:
        """The signed retirement record (a C2SP signed note, :mod:`flightlog.integrity.retirement`), or None."""
        return None

    def retire(self, summary: str, record: str) -> None:
        """Retire this store: keep ``summary`` and the signed ``record``; from the commit on, every write
        transaction raises ``LedgerRetired``. Joins an open transaction (its own writes still commit).

        Raises ``StoreError`` when it is retired already; ``NotImplementedError`` on a backend without
        ledger ids.
        """
        raise NotImplementedError

    def hold_writers(self) -> None:
        """Inside a transaction: keep every other writer of the ledger out until it ends, so what it reads
        is what the store holds when it commits (``db copy`` retiring its source). Default: nothing more
        is needed (a backend whose transactions already exclude other writers, as SQLite's
        ``BEGIN IMMEDIATE``)."""
        return None

    # ─── adopting another database's ledger id (flightlog db copy) ─────────────────────────
    @abc.abstractmethod
    def adopt_ledger_id(self, ledger_id: str) -> None:
        """Give this database another database's ledger id, so the signed checkpoints copied from it keep
        naming their ledger in their origins (``flightlog db copy``: the same ledger, moved). A no-op when
        the database has that id already. Joins an open transaction.

        Raises ``StoreError`` when ``ledger_id`` is not 8-64 lowercase hex, or when the database already
        holds a session or an index leaf under another ledger id (their signed origins name that one);
        ``NotImplementedError`` on a backend without ledger ids.
        """
