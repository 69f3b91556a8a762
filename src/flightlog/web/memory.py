"""The dashboard's memory page (``/memory``): the long-term memories in the store, searchable.

Read-only. ``/memory?q=WORDS&scope=TENANT/NAMESPACE&kind=KIND``: with ``q``, full-text hits best first
(the backend's ranking, :mod:`flightlog.store.memory`; viewing does not count as a recall), else every
memory newest first. The text is read from salted storage (``[erased]`` once erased); every string is
escaped by the templates. ``/api/memory`` returns the same rows as JSON.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Response
from fastapi.responses import HTMLResponse, JSONResponse

from ..events import MemoryKind, MemoryRecord, MemoryScope
from ..kernel.memory_bank import recall, text_of
from ..replay import MEMORY_ERASED
from ..store.base import Store

if TYPE_CHECKING:
    from .app import _Dashboard

__all__ = ["memory_rows", "register"]

KINDS = tuple(k.value for k in MemoryKind)


def _row(store: Store, record: MemoryRecord, score: float | None = None) -> dict[str, Any]:
    text = text_of(store, record.content)
    return {
        "record_id": record.record_id,
        "scope": f"{record.scope.tenant_id}/{record.scope.namespace}",
        "kind": record.kind.value,
        "name": record.name,
        "description": record.description,
        "text": MEMORY_ERASED if text is None else text,
        "recall_count": record.recall_count,
        "updated_at": record.updated_at,
        "author": record.provenance.author.value,
        "session_id": record.provenance.session_id,
        "score": score,  # as the engine gave it (BM25 over a few records: 1.69e-06; rounding made it 0.0)
        "score_text": "" if score is None else f"{score:.3g}",
    }


def memory_rows(store: Store, q: str, scope: str, kind: str) -> list[dict[str, Any]]:
    """The rows of the page (see the module docs).

    Raises:
        ValueError: ``scope`` not ``TENANT/NAMESPACE`` or ``kind`` unknown.
    """
    scoped: MemoryScope | None = None
    if scope:
        tenant, _, namespace = scope.partition("/")
        if not tenant or not namespace:
            raise ValueError("scope must be TENANT/NAMESPACE")
        scoped = MemoryScope(tenant_id=tenant, namespace=namespace)
    kinds = [MemoryKind(kind)] if kind else []
    if q.strip():
        return [
            {**_row(store, h.record, h.score), "rank": rank}
            for rank, h in enumerate(recall(store, scoped, q, kinds=kinds, top_k=50, mark=False), start=1)
        ]
    return [_row(store, r.record) for r in store.memory.rows(scoped, kinds, limit=500)]


def register(app: FastAPI, dash: _Dashboard) -> None:
    """Add ``/memory`` and ``/api/memory`` to the dashboard."""

    @app.get("/memory", response_class=HTMLResponse)
    def memory_page(q: str = "", scope: str = "", kind: str = "") -> Response:
        """The memories (a search with ``q``)."""
        try:
            rows = memory_rows(dash.reader, q, scope, kind)
        except ValueError as exc:
            return dash.error(400, str(exc))
        return dash.page("memory.html", title="Memory", rows=rows, q=q, scope=scope, kind=kind, kinds=KINDS)

    @app.get("/api/memory")
    def memory_json(q: str = "", scope: str = "", kind: str = "") -> Response:
        """The page's rows as JSON."""
        try:
            return JSONResponse(memory_rows(dash.reader, q, scope, kind))
        except ValueError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
