"""Long-term memory over a store: remember, recall, list, forget (issue 14 items 2 and 3).

Records are upstream's ``MemoryRecord`` (UPSTREAM.md §8). The text of a memory is personal data: it is
kept as a salted artifact (:mod:`flightlog.integrity.erasure`), and the index (:mod:`flightlog.store.memory`) and the
ledger hold only its salted handle (``salted:sha256:<hex>``) in ``record.content``. So:

* :func:`remember` upserts by upstream's identity key ``(scope, kind, name)``: an update keeps the stored
  ``record_id``, ``created_at`` and recall stats, ``updated_at`` never goes back (upstream
  ``MemoryRecordStore::upsert``); the previous text's artifact is erased (ledgered in the erasure log),
  so an overwritten text does not linger.
* :func:`forget` deletes the record and its index rows and erases the text (``flightlog memory forget``);
  ``flightlog erase HANDLE`` on a memory's handle does the same through :func:`flightlog.integrity.erasure.erase_artifact`.
  No ledger row is touched: every chain keeps verifying, and the handles sessions recorded read as
  ``erased`` in ``audit``.
* :func:`recall` ranks by the backend's full-text relevance and returns upstream ``MemoryRecall`` hits
  (ledger form: ``content`` is the handle); :func:`text_of` reads a handle back (None once erased).

Times are epoch milliseconds.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from ..events import (
    MemoryAuthor,
    MemoryKind,
    MemoryProvenance,
    MemoryRecall,
    MemoryRecord,
    MemoryScope,
    MemoryTrustLevel,
)
from ..integrity.erasure import erase_artifact
from ..integrity.keys import now_ms
from ..integrity.notary import Notary
from ..salted import SALTED_PREFIX, get_personal_artifact, put_personal_artifact
from ..store.base import Store
from ..store.memory import query_terms

__all__ = [
    "MEDIA_TYPE",
    "Remembered",
    "forget",
    "recall",
    "remember",
    "text_of",
    "why_text",
]

MEDIA_TYPE = "text/plain; charset=utf-8; flightlog=memory"
"""Media type of a memory's salted text artifact."""


@dataclass(frozen=True)
class Remembered:
    """What :func:`remember` did: the stored ``record`` (content: the handle) and whether it was new."""

    record: MemoryRecord
    inserted: bool


def remember(
    store: Store,
    *,
    scope: MemoryScope,
    kind: MemoryKind,
    name: str,
    content: str,
    description: str = "",
    author: MemoryAuthor = MemoryAuthor.HOST,
    trust: MemoryTrustLevel = MemoryTrustLevel.UNTRUSTED,
    session_id: str | None = None,
    evidence_refs: Collection[str] = (),
    confidence: float = 1.0,
    pinned: bool = False,
    ttl_days: int | None = None,
    notary: Notary | None = None,
    at_ms: int | None = None,
) -> Remembered:
    """Insert or update the memory ``(scope, kind, name)``; the text goes to salted storage.

    No validation here (the kernel validates what the model writes, :mod:`flightlog.kernel.memory`).

    Args:
        store: The store (its :attr:`~flightlog.store.base.Store.memory` index).
        scope: Tenant and namespace.
        kind: ``user``, ``feedback``, ``project`` or ``reference``.
        name: The memory's name (its identity within scope and kind).
        content: The text (UTF-8; stored erasably, never in the ledger).
        description: What the memory is about (indexed, kept in the record).
        author: Who wrote it.
        trust: How far it is trusted.
        session_id: The session writing it (provenance, and the session the text artifact is recorded as
            referenced by).
        evidence_refs: References backing it.
        confidence: Stored confidence in [0, 1].
        pinned: Upstream's pin flag.
        ttl_days: Upstream's retention hint, days.
        notary: Signs the erasure log when an update erases the previous text (None: unsigned).
        at_ms: The time, epoch ms (default now).

    Raises:
        ValueError: ``confidence`` outside [0, 1].
        MemoryConflict: the record id clashes with another key (cannot happen through this function).
    """
    if not 0.0 <= confidence <= 1.0:
        raise ValueError(f"confidence must be in [0, 1], not {confidence}")
    at = now_ms() if at_ms is None else at_ms
    index = store.memory
    provenance = MemoryProvenance(
        session_id=session_id, author=author, trust=trust, evidence_refs=list(evidence_refs)
    )
    with store.transaction():
        existing = index.find(scope, kind, name)
        handle = put_personal_artifact(store, content.encode("utf-8"), MEDIA_TYPE, session_id=session_id)
        record = MemoryRecord(
            record_id=existing.record.record_id if existing else f"mem-{uuid.uuid4().hex[:16]}",
            scope=scope,
            name=name,
            kind=kind,
            content=handle,
            description=description,
            provenance=provenance,
            created_at=existing.record.created_at if existing else at,
            updated_at=max(at, existing.record.updated_at) if existing else at,
            last_recalled_at=existing.record.last_recalled_at if existing else None,
            recall_count=existing.record.recall_count if existing else 0,
            confidence=confidence,
            pinned=pinned,
            ttl_days=ttl_days,
        )
        index.put(record, content)
    if existing is not None and existing.handle != handle:
        _erase(store, existing.handle, "memory updated", notary)
    return Remembered(record, existing is None)


def recall(
    store: Store,
    scope: MemoryScope | None,
    query: str,
    *,
    kinds: Collection[MemoryKind] = (),
    top_k: int = 5,
    min_score: float | None = None,
    mark: bool = True,
    at: int | None = None,
) -> list[MemoryRecall]:
    """The best ``top_k`` memories for ``query`` in ``scope`` (None: every scope), best first.

    Args:
        store: The store.
        scope: Where to search.
        query: Free text; its words are OR-ed (see :mod:`flightlog.store.memory`).
        kinds: Only these kinds (empty: any).
        top_k: How many hits at most (> 0).
        min_score: Drop hits scoring below this (in [0, 1]).
        mark: Count the recall on each hit (``recall_count`` + 1, ``last_recalled_at = at``).
        at: The recall time for ``mark`` (default now, epoch ms).

    Returns:
        Upstream ``MemoryRecall`` hits: the record (content: its salted handle, the stats as before this
        recall), ``score`` in [0, 1) and ``why`` naming the engine, its raw relevance and the query
        words (:func:`why_text`; recorded in ``memory_retrieval_result`` as it was given, so an old
        recall keeps its old wording).

    Raises:
        ValueError: ``top_k`` < 1 or ``min_score`` outside [0, 1] (upstream ``MemoryQuery::validate``).
    """
    if top_k < 1:
        raise ValueError("memory query top_k must be greater than zero")
    if min_score is not None and not 0.0 <= min_score <= 1.0:
        raise ValueError("memory query min_score must be finite and between zero and one")
    hits = store.memory.search(scope, query, kinds, limit=top_k)
    sqlite = type(store.memory).__name__.startswith("Sqlite")
    words = query_terms(query)
    recalls = [
        MemoryRecall(record=hit.row.record, score=hit.score, why=why_text(sqlite, hit.raw_rank, words))
        for hit in hits
        if min_score is None or hit.score >= min_score
    ]
    if mark and recalls:
        store.memory.mark_recalled([r.record.record_id for r in recalls], now_ms() if at is None else at)
    return recalls


def why_text(sqlite: bool, raw_rank: float, words: Sequence[str]) -> str:
    """A recall's ``why``: the engine, its relevance before scaling to ``score``, and the query words.

    ``fts5 bm25 relevance 1.692e-06 (-bm25(), higher matches better) over: deploy`` (SQLite: FTS5's
    ``bm25()`` is negative, lower is better, so its negation is shown) or ``ts_rank relevance 0.0608 (higher
    matches better) over: deploy`` (PostgreSQL). Four significant digits, so a weak match over a small
    index reads as its value, never ``-0.0000`` (what ``{bm25:.4f}`` printed: a negative zero that said
    neither the number nor which way is better).

    Args:
        sqlite: The SQLite engine (else PostgreSQL).
        raw_rank: The engine's rank (``raw_rank`` of :class:`flightlog.store.memory.MemoryHit`).
        words: The query's words, in order.
    """
    relevance = (-raw_rank if sqlite else raw_rank) + 0.0  # + 0.0: -0.0 becomes 0.0
    engine, sign = ("fts5 bm25", "-bm25(), ") if sqlite else ("ts_rank", "")
    return f"{engine} relevance {relevance:.4g} ({sign}higher matches better) over: {', '.join(words)}"


def text_of(store: Store, handle: str) -> str | None:
    """The text behind a memory's salted handle; None when erased or never stored (or not a handle)."""
    if not handle.startswith(SALTED_PREFIX):
        return None
    data = get_personal_artifact(store, handle)
    return None if data is None else data.decode("utf-8")


def forget(
    store: Store, record_id: str, *, reason: str = "memory forgotten", notary: Notary | None = None
) -> MemoryRecord | None:
    """Delete a memory and erase its text (see the module docs); None when there is no such record.

    Args:
        store: The store.
        record_id: The record.
        reason: Recorded in the erasure log (never put personal data here).
        notary: Signs the erasure log's checkpoints (None: unsigned).
    """
    row = store.memory.delete(record_id)
    if row is None:
        return None
    _erase(store, row.handle, reason, notary)
    return row.record


def _erase(store: Store, handle: str, reason: str, notary: Notary | None) -> None:
    if store.salted_artifact_info(handle.removeprefix(SALTED_PREFIX)) is not None:
        erase_artifact(store, handle, reason=reason, notary=notary)
