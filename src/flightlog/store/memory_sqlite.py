"""The memory index on SQLite: a ``memories`` table and an FTS5 index ranked by BM25 (see
:mod:`flightlog.store.memory`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from ..events import MemoryKind, MemoryRecord, MemoryScope
from .memory import (
    MemoryConflict,
    MemoryHit,
    MemoryIndex,
    MemoryRow,
    query_terms,
    recalled_json,
    record_json,
    row_of,
)

if TYPE_CHECKING:
    from .sqlite import SqliteStore

__all__ = ["FTS5_SECURE_DELETE", "MIGRATION", "SqliteMemory"]

FTS5_SECURE_DELETE = sqlite3.sqlite_version_info >= (3, 42, 0)
"""Whether the linked SQLite's FTS5 has the ``secure-delete`` option (SQLite 3.42.0): a deleted row's
tokens are then removed from the index segments by the delete itself. Older SQLite (Debian 12 ships
3.40.1) leaves them in the segments until a merge, so every delete there is followed by an ``optimize``
(a merge of the whole index: its cost grows with the index, paid per rewrite or erasure)."""

MIGRATION = (
    "long-term memory: memories (upstream MemoryRecord, content as a salted handle) + memories_fts (FTS5)",
    """
    CREATE TABLE memories (
        record_id TEXT PRIMARY KEY,
        tenant_id TEXT NOT NULL,
        namespace TEXT NOT NULL,
        kind TEXT NOT NULL,
        name TEXT NOT NULL,
        handle TEXT NOT NULL,
        updated_at INTEGER NOT NULL,
        record_json TEXT NOT NULL,
        UNIQUE (tenant_id, namespace, kind, name)
    );
    CREATE INDEX memories_scope ON memories(tenant_id, namespace, updated_at);
    CREATE VIRTUAL TABLE memories_fts USING fts5(
        record_id UNINDEXED, name, description, content, tokenize = 'porter unicode61'
    );
    """,
)
"""Appended to :data:`flightlog.store.sqlite.MIGRATIONS` (a new migration; shipped ones are never edited)."""

_WEIGHTS = "0.0, 2.0, 1.0, 1.0"
"""``bm25()`` column weights: record_id (unindexed), name, description, content."""


def _fts_query(terms: list[str]) -> str:
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


class SqliteMemory(MemoryIndex):
    """:class:`MemoryIndex` on a :class:`~flightlog.store.sqlite.SqliteStore` (its connection and
    transactions)."""

    def __init__(self, store: SqliteStore) -> None:
        self._store = store

    def put(self, record: MemoryRecord, text: str) -> None:
        s, scope = self._store, record.scope
        with s.transaction():
            clash = s._execute(
                "SELECT record_id FROM memories WHERE tenant_id = ? AND namespace = ? AND kind = ? "
                "AND name = ? AND record_id <> ?",
                (scope.tenant_id, scope.namespace, record.kind.value, record.name, record.record_id),
            ).fetchone()
            if clash is not None:
                raise MemoryConflict(record_id=record.record_id, holder=str(clash[0]))
            self._drop_indexed(record.record_id)  # an overwritten text leaves the index too
            s._execute(
                "INSERT INTO memories VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(record_id) DO UPDATE SET "
                "tenant_id = excluded.tenant_id, namespace = excluded.namespace, kind = excluded.kind, "
                "name = excluded.name, handle = excluded.handle, updated_at = excluded.updated_at, "
                "record_json = excluded.record_json",
                (
                    record.record_id,
                    scope.tenant_id,
                    scope.namespace,
                    record.kind.value,
                    record.name,
                    record.content,
                    record.updated_at,
                    record_json(record),
                ),
            )
            s._execute(
                "INSERT INTO memories_fts (record_id, name, description, content) VALUES (?, ?, ?, ?)",
                (record.record_id, record.name, record.description, text),
            )

    def get(self, record_id: str) -> MemoryRow | None:
        if not self._store._has_table("memories"):
            return None
        row = self._store._one("SELECT record_json FROM memories WHERE record_id = ?", (record_id,))
        return row_of(row[0], record_id) if row else None

    def find(self, scope: MemoryScope, kind: MemoryKind, name: str) -> MemoryRow | None:
        if not self._store._has_table("memories"):
            return None
        row = self._store._one(
            "SELECT record_json FROM memories WHERE tenant_id = ? AND namespace = ? AND kind = ? AND name = ?",
            (scope.tenant_id, scope.namespace, kind.value, name),
        )
        return row_of(row[0]) if row else None

    def _where(
        self, scope: MemoryScope | None, kinds: Collection[MemoryKind], alias: str = ""
    ) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        if scope is not None:
            clauses.append(f"{alias}tenant_id = ? AND {alias}namespace = ?")
            params += [scope.tenant_id, scope.namespace]
        if kinds:
            clauses.append(f"{alias}kind IN ({', '.join('?' for _ in kinds)})")
            params += [MemoryKind(k).value for k in kinds]
        return "".join(f" AND {c}" for c in clauses), params

    def rows(
        self, scope: MemoryScope | None = None, kinds: Collection[MemoryKind] = (), *, limit: int = 1000
    ) -> list[MemoryRow]:
        if not self._store._has_table("memories"):
            return []
        where, params = self._where(scope, kinds)
        rows = self._store._all(
            f"SELECT record_json FROM memories WHERE 1 = 1{where} "
            "ORDER BY updated_at DESC, record_id LIMIT ?",
            [*params, limit],
        )
        return [row_of(r[0]) for r in rows]

    def search(
        self, scope: MemoryScope | None, query: str, kinds: Collection[MemoryKind] = (), *, limit: int = 5
    ) -> list[MemoryHit]:
        terms = query_terms(query)
        if not terms or limit < 1 or not self._store._has_table("memories"):
            return []
        where, params = self._where(scope, kinds, "m.")
        rows = self._store._all(
            f"SELECT m.record_json, bm25(memories_fts, {_WEIGHTS}) AS rank FROM memories_fts "
            "JOIN memories m ON m.record_id = memories_fts.record_id "
            f"WHERE memories_fts MATCH ?{where} ORDER BY rank, m.record_id LIMIT ?",
            [_fts_query(terms), *params, limit],
        )
        hits: list[MemoryHit] = []
        for stored, rank in rows:
            strength = max(0.0, -float(rank))
            hits.append(MemoryHit(row_of(stored), strength / (1.0 + strength), float(rank)))
        return hits

    def delete(self, record_id: str) -> MemoryRow | None:
        s = self._store
        with s.transaction():
            found = s._execute(
                "SELECT record_json FROM memories WHERE record_id = ?", (record_id,)
            ).fetchone()
            if found is None:
                return None
            s._execute("DELETE FROM memories WHERE record_id = ?", (record_id,))
            self._drop_indexed(record_id)
        return row_of(found[0])

    def _drop_indexed(self, record_id: str) -> None:
        """Delete ``record_id``'s FTS row so that none of its words stays in the database file: with FTS5's
        ``secure-delete`` (:data:`FTS5_SECURE_DELETE`; switched on, and the index merged once to purge what
        earlier deletes left, the first time), else by merging the index (``optimize``) after the delete.
        Either way the pages freed are zeroed (the connection's ``PRAGMA secure_delete``). In the caller's
        transaction."""
        s = self._store
        if FTS5_SECURE_DELETE:
            on = s._execute("SELECT v FROM memories_fts_config WHERE k = 'secure-delete'").fetchone()
            if on is None or not on[0]:
                s._execute("INSERT INTO memories_fts (memories_fts, rank) VALUES ('secure-delete', 1)")
                s._execute("INSERT INTO memories_fts (memories_fts) VALUES ('optimize')")
            s._execute("DELETE FROM memories_fts WHERE record_id = ?", (record_id,))
            return
        if s._execute("DELETE FROM memories_fts WHERE record_id = ?", (record_id,)).rowcount:
            s._execute("INSERT INTO memories_fts (memories_fts) VALUES ('optimize')")

    def delete_handle(self, handle: str) -> list[str]:
        if not self._store._has_table("memories"):
            return []
        ids = [
            str(r[0]) for r in self._store._all("SELECT record_id FROM memories WHERE handle = ?", (handle,))
        ]
        for record_id in ids:
            self.delete(record_id)
        return ids

    def stored_page(self, after: str, limit: int) -> list[tuple[str, str]]:
        if not self._store._has_table("memories"):
            return []
        rows = self._store._all(
            "SELECT record_id, record_json FROM memories WHERE record_id > ? ORDER BY record_id LIMIT ?",
            (after, limit),
        )
        return [(str(r[0]), str(r[1])) for r in rows]

    def mark_recalled(self, record_ids: Collection[str], at: int) -> None:
        s = self._store
        with s.transaction():
            for record_id in record_ids:
                found = s._execute(
                    "SELECT record_json FROM memories WHERE record_id = ?", (record_id,)
                ).fetchone()
                if found is not None:
                    s._execute(
                        "UPDATE memories SET record_json = ? WHERE record_id = ?",
                        (recalled_json(found[0], at), record_id),
                    )
