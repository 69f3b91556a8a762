"""The memory index on PostgreSQL: a ``memories`` table with a weighted ``tsvector`` (GIN index) ranked by
``ts_rank`` (see :mod:`flightlog.store.memory`)."""

from __future__ import annotations

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
    from .postgres import PostgresStore

__all__ = ["MIGRATION", "PostgresMemory"]

MIGRATION = (
    "long-term memory: memories (upstream MemoryRecord, content as a salted handle) with a weighted tsvector",
    """
    CREATE TABLE memories (
        record_id TEXT PRIMARY KEY,
        tenant_id TEXT NOT NULL,
        namespace TEXT NOT NULL,
        kind TEXT NOT NULL,
        name TEXT NOT NULL,
        handle TEXT NOT NULL,
        updated_at BIGINT NOT NULL,
        record_json TEXT NOT NULL,
        tsv TSVECTOR NOT NULL,
        UNIQUE (tenant_id, namespace, kind, name)
    );
    CREATE INDEX memories_scope ON memories(tenant_id, namespace, updated_at);
    CREATE INDEX memories_tsv ON memories USING GIN (tsv);
    """,
)
"""Appended to :data:`flightlog.store.postgres.MIGRATIONS` (a new migration; shipped ones are never edited)."""

_TSV = (
    "setweight(to_tsvector('english', %s), 'A') || setweight(to_tsvector('english', %s), 'B') "
    "|| setweight(to_tsvector('english', %s), 'D')"
)
"""The indexed vector: name (A), description (B), content text (D). Only lexemes are kept, not the text."""


class PostgresMemory(MemoryIndex):
    """:class:`MemoryIndex` on a :class:`~flightlog.store.postgres.PostgresStore`."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    def put(self, record: MemoryRecord, text: str) -> None:
        s, scope = self._store, record.scope
        with s.transaction():
            clash = s._one(
                "SELECT record_id FROM memories WHERE tenant_id = %s AND namespace = %s AND kind = %s "
                "AND name = %s AND record_id <> %s",
                (scope.tenant_id, scope.namespace, record.kind.value, record.name, record.record_id),
            )
            if clash is not None:
                raise MemoryConflict(record_id=record.record_id, holder=str(clash[0]))
            s._write(
                f"INSERT INTO memories VALUES (%s, %s, %s, %s, %s, %s, %s, %s, {_TSV}) "
                "ON CONFLICT (record_id) DO UPDATE SET tenant_id = EXCLUDED.tenant_id, "
                "namespace = EXCLUDED.namespace, kind = EXCLUDED.kind, name = EXCLUDED.name, "
                "handle = EXCLUDED.handle, updated_at = EXCLUDED.updated_at, "
                "record_json = EXCLUDED.record_json, tsv = EXCLUDED.tsv",
                (
                    record.record_id,
                    scope.tenant_id,
                    scope.namespace,
                    record.kind.value,
                    record.name,
                    record.content,
                    record.updated_at,
                    record_json(record),
                    record.name,
                    record.description,
                    text,
                ),
            )

    def get(self, record_id: str) -> MemoryRow | None:
        row = self._store._one("SELECT record_json FROM memories WHERE record_id = %s", (record_id,))
        return row_of(row[0], record_id) if row else None

    def find(self, scope: MemoryScope, kind: MemoryKind, name: str) -> MemoryRow | None:
        row = self._store._one(
            "SELECT record_json FROM memories WHERE tenant_id = %s AND namespace = %s AND kind = %s "
            "AND name = %s",
            (scope.tenant_id, scope.namespace, kind.value, name),
        )
        return row_of(row[0]) if row else None

    @staticmethod
    def _where(scope: MemoryScope | None, kinds: Collection[MemoryKind]) -> tuple[str, list[Any]]:
        sql = ""
        params: list[Any] = []
        if scope is not None:
            sql += " AND tenant_id = %s AND namespace = %s"
            params += [scope.tenant_id, scope.namespace]
        if kinds:
            sql += " AND kind = ANY(%s)"
            params.append([MemoryKind(k).value for k in kinds])
        return sql, params

    def rows(
        self, scope: MemoryScope | None = None, kinds: Collection[MemoryKind] = (), *, limit: int = 1000
    ) -> list[MemoryRow]:
        where, params = self._where(scope, kinds)
        rows = self._store._all(
            f"SELECT record_json FROM memories WHERE TRUE{where} ORDER BY updated_at DESC, record_id LIMIT %s",
            [*params, limit],
        )
        return [row_of(r[0]) for r in rows]

    def search(
        self, scope: MemoryScope | None, query: str, kinds: Collection[MemoryKind] = (), *, limit: int = 5
    ) -> list[MemoryHit]:
        terms = query_terms(query)
        if not terms or limit < 1:
            return []
        where, params = self._where(scope, kinds)
        # Each word through plainto_tsquery (stemmed, stop words dropped, no query syntax), OR-ed together.
        ors = " || ".join("plainto_tsquery('english', %s)" for _ in terms)
        rows = self._store._all(
            f"WITH q AS (SELECT ({ors}) AS q) SELECT record_json, ts_rank(tsv, q.q, 32) AS rank "
            f"FROM memories, q WHERE tsv @@ q.q{where} ORDER BY rank DESC, record_id LIMIT %s",
            [*terms, *params, limit],
        )
        return [MemoryHit(row_of(r[0]), float(r[1]), float(r[1])) for r in rows]

    def delete(self, record_id: str) -> MemoryRow | None:
        s = self._store
        with s.transaction():
            found = s._one("SELECT record_json FROM memories WHERE record_id = %s FOR UPDATE", (record_id,))
            if found is None:
                return None
            s._write("DELETE FROM memories WHERE record_id = %s", (record_id,))
        return row_of(found[0])

    def delete_handle(self, handle: str) -> list[str]:
        ids = [
            str(r[0]) for r in self._store._all("SELECT record_id FROM memories WHERE handle = %s", (handle,))
        ]
        for record_id in ids:
            self.delete(record_id)
        return ids

    def stored_page(self, after: str, limit: int) -> list[tuple[str, str]]:
        rows = self._store._all(
            # byte order on both sides of the keyset (SQLite's order), whatever the database's collation
            'SELECT record_id, record_json FROM memories WHERE record_id COLLATE "C" > %s '
            'ORDER BY record_id COLLATE "C" LIMIT %s',
            (after, limit),
        )
        return [(str(r[0]), str(r[1])) for r in rows]

    def mark_recalled(self, record_ids: Collection[str], at: int) -> None:
        s = self._store
        with s.transaction():
            for record_id in record_ids:
                found = s._one(
                    "SELECT record_json FROM memories WHERE record_id = %s FOR UPDATE", (record_id,)
                )
                if found is not None:
                    s._write(
                        "UPDATE memories SET record_json = %s WHERE record_id = %s",
                        (recalled_json(found[0], at), record_id),
                    )
