"""The storage seam: records that cross it and the abstract ``Store`` every backend implements.

Backends import only this module and the pure core. Records are frozen; reads iterate (never a whole
session in memory). Every write is one transaction; ``Store.transaction()`` groups several writes into one
(re-entrant: inner blocks join the outer one).

Tables (every backend): ``sessions``, ``events`` (append-only, primary key ``(session_id, seq)``),
``authority_epochs`` (fencing tokens), ``grant_policies``, ``external_effects`` (intent before,
completion after), ``artifacts`` (content-addressed by sha256, deduplicated), ``checkpoints``, ``imports``
(source file sha256 -> session), and ``schema_migrations``.

Source: seed 003 (``SessionStore``: ``create_session``, ``record_psp9_event``, ``initialize_authority_epoch``,
``record_grant_policy``, ``record_external_effect_intent``, ``complete_external_effect``,
``put_psp9_artifact``, ``record_psp9_checkpoint``).
"""

from __future__ import annotations

import abc
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ArtifactRecord",
    "CheckpointRecord",
    "EffectRecord",
    "ImportRecord",
    "NewEvent",
    "SessionHead",
    "SessionRecord",
    "Store",
    "StoredEvent",
]


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """One durable ledger row.

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


@dataclass(frozen=True, slots=True)
class NewEvent:
    """A row staged by the recorder for ``Store.append_events`` (hashes already computed)."""

    seq: int
    kind: str
    event_bytes: bytes
    prev_hash: str
    hash: str


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
    def schema_version(self) -> int:
        """The highest applied migration version."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ─── sessions ──────────────────────────────────────────────────────────────────────────
    @abc.abstractmethod
    def create_session(self, record: SessionRecord) -> None:
        """Insert a session row and its authority epoch 0. Raises ``AppendConflict`` if it exists."""

    @abc.abstractmethod
    def get_session(self, session_id: str) -> SessionRecord:
        """The session row. Raises ``SessionNotFound``."""

    @abc.abstractmethod
    def resolve_session(self, prefix: str) -> str:
        """The one session id equal to or starting with ``prefix`` (also after a ``format:`` part).

        Raises ``SessionNotFound`` when none or several match (``matches`` lists them).
        """

    @abc.abstractmethod
    def list_sessions(self) -> Iterator[SessionRecord]:
        """Every session, oldest first."""

    @abc.abstractmethod
    def set_session_status(self, session_id: str, status: str) -> None:
        """Change a session's status (not a ledger row: the ledger is append-only)."""

    # ─── events ────────────────────────────────────────────────────────────────────────────
    @abc.abstractmethod
    def append_events(
        self, session_id: str, rows: Sequence[NewEvent], head: SessionHead, *, epoch: int | None = None
    ) -> int:
        """Durably append rows (all or none) and move the session head, in one transaction.

        Returns the ``recorded_at_ms`` stamped on the rows. Raises ``AppendConflict`` when a seq is taken
        (another writer), ``StaleWriter`` when ``epoch`` is not the session's current authority epoch,
        ``ReadOnlyStore`` on a read-only store. Nothing is written on error.
        """

    @abc.abstractmethod
    def read_events(
        self, session_id: str, *, start: int = 0, stop: int | None = None
    ) -> Iterator[StoredEvent]:
        """Stream rows with ``start <= seq < stop`` in ascending seq (bounded memory)."""

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
    def record_intent(self, session_id: str, key: str, intent_hash: str, intent_json: str) -> bool:
        """Durably record an effect intent. True if new, False if the same bytes were already recorded.

        Raises ``EffectConflict`` when ``key`` exists with another ``intent_hash``.
        """

    @abc.abstractmethod
    def complete_effect(self, session_id: str, key: str, result_json: str) -> bool:
        """Record the completion once. True if recorded now, False if already completed with these bytes.

        Raises ``EffectConflict`` when already completed with other bytes, ``LookupError`` with no intent.
        """

    @abc.abstractmethod
    def get_effect(self, session_id: str, key: str) -> EffectRecord | None:
        """The effect record, or None."""

    @abc.abstractmethod
    def pending_effects(self, session_id: str | None = None) -> list[EffectRecord]:
        """Intents without completion (*in doubt* after a crash), oldest first."""

    # ─── artifacts ─────────────────────────────────────────────────────────────────────────
    @abc.abstractmethod
    def put_artifact(self, content: bytes, media_type: str) -> ArtifactRecord:
        """Store bytes content-addressed by sha256 (deduplicated). Returns its record."""

    @abc.abstractmethod
    def get_artifact(self, sha256: str) -> bytes | None:
        """The bytes of an artifact (by hex digest), or None."""

    @abc.abstractmethod
    def artifact_info(self, sha256: str) -> ArtifactRecord | None:
        """Metadata of an artifact, or None."""

    # ─── checkpoints ───────────────────────────────────────────────────────────────────────
    @abc.abstractmethod
    def record_checkpoint(self, session_id: str, size: int, root: str, body: str) -> int:
        """Store a checkpoint over ``[0, size)``; returns its id."""

    @abc.abstractmethod
    def checkpoints(self, session_id: str) -> list[CheckpointRecord]:
        """The session's checkpoints, oldest first."""

    # ─── imports ───────────────────────────────────────────────────────────────────────────
    @abc.abstractmethod
    def find_import(self, source_sha256: str) -> ImportRecord | None:
        """The import of a file with this sha256, if any."""

    @abc.abstractmethod
    def record_import(self, record: ImportRecord) -> None:
        """Remember that a file was imported into a session."""
