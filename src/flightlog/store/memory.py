"""Long-term memory in the ledger's database: the index every backend keeps (issue 14 item 2).

A memory record is upstream's ``MemoryRecord`` (:class:`flightlog.events.MemoryRecord`, UPSTREAM.md §8).
The index keeps, per record, its identity (``record_id``; the upsert key ``(scope, kind, name)``), the
record with ``content`` replaced by the **salted handle** of its text (``salted:sha256:<hex>``; the text
itself lives in ``salted_artifacts``, erasable, see :mod:`flightlog.integrity.erasure`), and a full-text index of
``name``, ``description`` and the text:

* SQLite: an FTS5 table (``porter unicode61`` tokenizer) ranked by FTS5's BM25 (``bm25()``, column weights
  name 2, description 1, content 1); relevance ``score = s / (1 + s)`` with ``s = -bm25`` (FTS5's BM25 is
  negative, lower is better), so scores fall in [0, 1) as upstream's ``MemoryQuery::validate_hits`` requires.
* PostgreSQL: a ``tsvector`` (``english`` configuration; name weight A, description B, content D) with a
  GIN index, ranked by ``ts_rank(…, 32)`` (normalisation 32: ``rank / (rank + 1)``, in [0, 1)).

Query text becomes an OR of its words (letters and digits only; everything else is a separator, so no
query syntax of either engine reaches it): a record matching more of the words, and rarer ones, ranks
higher. Deleting a record (``forget``) or overwriting its text deletes its old index row; on SQLite no word
of it may stay in the database file: FTS5's ``secure-delete`` option (SQLite >= 3.42) removes the tokens
from the index segments, and on older SQLite the index is merged (``optimize``) after each such delete
(``flightlog.store.memory_sqlite.FTS5_SECURE_DELETE``); ``PRAGMA secure_delete`` zeroes the freed pages.
Erasing the text's salted artifact is the caller's part (:mod:`flightlog.kernel.memory_bank`).

Tables: ``memories`` (+ ``memories_fts`` on SQLite), created by a new migration of each backend.
"""

from __future__ import annotations

import abc
import json
import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass

from pydantic import ValidationError

from ..errors import StoreError
from ..events import MemoryKind, MemoryRecord, MemoryScope

__all__ = [
    "MemoryConflict",
    "MemoryHit",
    "MemoryIndex",
    "MemoryRecordInvalid",
    "MemoryRow",
    "query_terms",
    "recalled_json",
    "record_json",
    "row_of",
]

_WORD = re.compile(r"\w+", re.UNICODE)
MAX_TERMS = 32
"""At most this many words of a query are searched (the first ones)."""


def query_terms(text: str) -> list[str]:
    """The words of a query, lower-cased, deduplicated in order, at most :data:`MAX_TERMS`."""
    seen: list[str] = []
    for word in _WORD.findall(text.lower()):
        if word not in seen:
            seen.append(word)
    return seen[:MAX_TERMS]


class MemoryConflict(StoreError):
    """Another record already holds this record's upsert key ``(scope, kind, name)``."""

    record_id: str
    holder: str

    def __init__(self, *, record_id: str, holder: str) -> None:
        super().__init__(
            f"memory {record_id!r}: its (scope, kind, name) is held by record {holder!r}",
            record_id=record_id,
            holder=holder,
        )


@dataclass(frozen=True)
class MemoryRow:
    """One indexed record.

    Attributes:
        record: The record; its ``content`` is the salted handle of the text.
        handle: The salted handle (equal to ``record.content``).
    """

    record: MemoryRecord

    @property
    def handle(self) -> str:
        """The salted handle of the text (``record.content``)."""
        return self.record.content


class MemoryRecordInvalid(StoreError):
    """A stored ``record_json`` is not an upstream ``MemoryRecord``: the ``memories`` table was written
    outside flightlog (which stores only records it validated). ``record_id`` names the memory (the
    column's id, else the JSON's ``record_id``, else ``?``), ``field`` the first invalid field (a dotted
    path, ``record_json`` when the JSON itself does not parse) and ``reason`` what is wrong with it."""

    record_id: str
    field: str
    reason: str

    def __init__(self, *, record_id: str, field: str, reason: str) -> None:
        super().__init__(
            f"memory {record_id!r}: its stored record is invalid at {field}: {reason} (the memories table was "
            "edited outside flightlog)",
            record_id=record_id,
            field=field,
            reason=reason,
        )


def row_of(stored_json: str, record_id: str | None = None) -> MemoryRow:
    """The row of a stored ``record_json`` column.

    Args:
        stored_json: The column.
        record_id: The row's ``record_id`` column when the caller read it (named in the error).

    Raises:
        MemoryRecordInvalid: the JSON is not a valid record, naming the memory and the first bad field.
    """
    try:
        return MemoryRow(MemoryRecord.model_validate_json(stored_json))
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "record_json"
        more = f" (+{exc.error_count() - 1} more invalid)" if exc.error_count() > 1 else ""
        shown = repr(first.get("input"))
        reason = f"{first['msg']} (stored {shown[:80]}){more}"
        if first["type"] == "json_invalid":
            field, reason = "record_json", f"not JSON: {first['msg']}"
        raise MemoryRecordInvalid(
            record_id=record_id or _stored_id(stored_json), field=field, reason=reason
        ) from exc


def _stored_id(stored_json: str) -> str:
    """The ``record_id`` a stored record names, ``?`` when it names none readable."""
    try:
        found = json.loads(stored_json)
    except ValueError:
        return "?"
    value = found.get("record_id") if isinstance(found, dict) else None
    return value if isinstance(value, str) else "?"


def record_json(record: MemoryRecord) -> str:
    """The ``record_json`` column of a record (its RFC 8785 form)."""
    from ..encoding import canonical_json  # local: encoding imports events, which this module needs first

    return canonical_json(record.to_wire()).decode("utf-8")


def recalled_json(stored_json: str, at: int) -> str:
    """``record_json`` after one more recall at ``at`` (upstream ``MemoryRecordStore::record_recall``)."""
    record = row_of(stored_json).record
    return record_json(
        record.model_copy(update={"recall_count": record.recall_count + 1, "last_recalled_at": at})
    )


@dataclass(frozen=True)
class MemoryHit:
    """A search result: the row, the relevance ``score`` in [0, 1) and the engine's raw rank."""

    row: MemoryRow
    score: float
    raw_rank: float


class MemoryIndex(abc.ABC):
    """What a backend stores for memory (see the module docs). Every write is one transaction (joining
    the caller's ``Store.transaction()`` when one is open)."""

    @abc.abstractmethod
    def put(self, record: MemoryRecord, text: str) -> None:
        """Insert or replace the record with this ``record_id`` (``record.content``: the salted handle;
        ``text``: the plain text, indexed for search only).

        Raises:
            MemoryConflict: another record holds the same ``(scope, kind, name)``.
        """

    @abc.abstractmethod
    def get(self, record_id: str) -> MemoryRow | None:
        """The row of ``record_id``, or None."""

    @abc.abstractmethod
    def find(self, scope: MemoryScope, kind: MemoryKind, name: str) -> MemoryRow | None:
        """The row under the upsert key ``(scope, kind, name)``, or None."""

    @abc.abstractmethod
    def rows(
        self, scope: MemoryScope | None = None, kinds: Collection[MemoryKind] = (), *, limit: int = 1000
    ) -> list[MemoryRow]:
        """Rows, newest ``updated_at`` first; ``scope`` None means every scope; ``kinds`` empty: any."""

    @abc.abstractmethod
    def search(
        self, scope: MemoryScope | None, query: str, kinds: Collection[MemoryKind] = (), *, limit: int = 5
    ) -> list[MemoryHit]:
        """Full-text search ranked by the backend's relevance (best first, ties by ``record_id``);
        ``scope`` None searches every scope. A query without words returns nothing."""

    @abc.abstractmethod
    def delete(self, record_id: str) -> MemoryRow | None:
        """Delete the record and its index rows; returns what was deleted (None: no such record)."""

    @abc.abstractmethod
    def delete_handle(self, handle: str) -> list[str]:
        """Delete every record whose text is this salted handle (an erasure, :mod:`flightlog.integrity.erasure`);
        returns their record ids."""

    @abc.abstractmethod
    def stored_page(self, after: str, limit: int) -> list[tuple[str, str]]:
        """Up to ``limit`` rows as stored, ``(record_id, record_json)`` with ``record_id > after``, in
        ``record_id`` order (``record_json`` verbatim: the text column, not re-encoded)."""

    def stored(self, *, page: int = 500) -> Iterator[tuple[str, str]]:
        """Every row as stored, ``(record_id, record_json)`` in ``record_id`` order, ``page`` rows in memory
        at a time (what ``flightlog db copy`` carries and compares byte for byte)."""
        after = ""
        while batch := self.stored_page(after, page):
            yield from batch
            after = batch[-1][0]

    @abc.abstractmethod
    def mark_recalled(self, record_ids: Collection[str], at: int) -> None:
        """Add one to ``recall_count`` and set ``last_recalled_at = at`` for each record (upstream
        ``MemoryRecordStore::record_recall``)."""
