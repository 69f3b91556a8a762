"""``flightlog memory ls/search/forget``: the long-term memory kept in the store (issue 14 item 4).

Mounted by :mod:`flightlog.cli.root` (``_mount``)::

    from .memory import register as register_memory
    register_memory(app, open_db)

The text of a memory is read from salted storage (:mod:`flightlog.kernel.memory_bank`); an erased one shows as
``[erased]``. ``forget`` deletes the record and its index rows and erases the text (ledgered in the erasure
log, signed with the user's key); no chain is touched.

Exit codes: 0 done; 1 a store problem; 2 a usage error (unknown record, bad scope or kind).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .console import console
from .options import count_option

if TYPE_CHECKING:  # the event models load inside the commands: `flightlog --version` stays fast
    from ..events import MemoryKind, MemoryRecord, MemoryScope
    from ..store import Store

__all__ = ["register"]

OpenDb = Callable[[bool], AbstractContextManager["Store"]]

_out = console()

ScopeOpt = Annotated[
    str | None, typer.Option("--scope", help="TENANT/NAMESPACE (default: every scope).", show_default=False)
]
KindOpt = Annotated[
    list[str] | None, typer.Option("--kind", help="Only this kind (user, feedback, project, reference).")
]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print JSON (records in upstream's MemoryRecord form).")
]


def _scope(text: str | None) -> MemoryScope | None:
    from ..events import MemoryScope

    if text is None:
        return None
    tenant, sep, namespace = text.partition("/")
    if not sep or not tenant or not namespace:
        raise typer.BadParameter(f"{text!r} is not TENANT/NAMESPACE (both non-empty)", param_hint="--scope")
    return MemoryScope(tenant_id=tenant, namespace=namespace)


def _kinds(values: list[str] | None) -> list[MemoryKind]:
    from ..events import MemoryKind

    try:
        return [MemoryKind(v) for v in values or []]
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--kind") from exc


def _wire(store: Store, record: MemoryRecord, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    from ..kernel.memory_bank import text_of

    text = text_of(store, record.content)
    return {"record": record.to_wire(), "text": text, **(extra or {})}


def score_text(score: float) -> str:
    """A relevance score in [0, 1) to 3 significant digits (BM25 over a few records gives scores like
    1.69e-06, which a fixed ``.3f`` shows as 0.000 for every hit)."""
    return f"{score:.3g}"


def _line(store: Store, record: MemoryRecord, prefix: str = "") -> str:
    from ..kernel.memory_bank import text_of
    from ..replay import MEMORY_ERASED

    text = text_of(store, record.content)
    shown = MEMORY_ERASED if text is None else text.replace("\n", " ")
    if len(shown) > 100:
        shown = shown[:99] + "…"
    scope = f"{record.scope.tenant_id}/{record.scope.namespace}"
    return f"{prefix}{record.record_id}  {scope}  {record.kind.value:<9} {record.name}: {shown}"


def register(app: typer.Typer, open_db: OpenDb) -> None:
    """Add the ``memory`` group (``ls``, ``search``, ``forget``) to ``app``."""
    group = typer.Typer(
        help="Long-term memory kept in the store: list, search, forget.", no_args_is_help=True
    )

    @group.command("ls")
    def ls_cmd(scope: ScopeOpt = None, kind: KindOpt = None, json_out: JsonOpt = False) -> None:
        """List memories, newest first."""
        with open_db(True) as store:
            rows = store.memory.rows(_scope(scope), _kinds(kind))
            if json_out:
                _out.print_json(json.dumps([_wire(store, r.record) for r in rows]))
                return
            for row in rows:
                _out.print(_line(store, row.record), markup=False, highlight=False)
            if not rows:
                _out.print("no memories", markup=False)

    @group.command("search")
    def search_cmd(
        query: Annotated[str, typer.Argument(metavar="QUERY", help="Words to look for.")],
        scope: ScopeOpt = None,
        kind: KindOpt = None,
        limit: Annotated[int, count_option("--limit", "-k", low=1, help="Hits at most.")] = 5,
        json_out: JsonOpt = False,
    ) -> None:
        """Full-text search, best first (BM25 on SQLite, ts_rank on PostgreSQL); does not count as a recall."""
        from ..kernel.memory_bank import recall

        with open_db(True) as store:
            hits = recall(store, _scope(scope), query, kinds=_kinds(kind), top_k=limit, mark=False)
            if json_out:
                _out.print_json(
                    json.dumps([_wire(store, h.record, {"score": h.score, "why": h.why}) for h in hits])
                )
                return
            for rank, hit in enumerate(hits, start=1):
                line = _line(store, hit.record, f"#{rank}  relevance {score_text(hit.score)}  ")
                _out.print(line, markup=False, highlight=False)
            if not hits:
                _out.print("no memories matched", markup=False)

    @group.command("forget")
    def forget_cmd(
        record_id: Annotated[
            str, typer.Argument(metavar="RECORD_ID", help="The memory's record id (mem-...).")
        ],
        reason: Annotated[str, typer.Option("--reason", help="Why (ledgered: no personal data here).")] = "",
        json_out: JsonOpt = False,
    ) -> None:
        """Delete a memory and erase its text (the erasure is ledgered; every chain still verifies)."""
        from ..integrity.notary import Notary
        from ..kernel.memory_bank import forget

        with open_db(False) as store:
            record = forget(store, record_id, reason=reason or "memory forgotten", notary=Notary.from_env())
        if record is None:
            raise typer.BadParameter(f"no memory {record_id!r}", param_hint="RECORD_ID")
        if json_out:
            _out.print_json(json.dumps({"forgotten": record.record_id, "erased": record.content}))
            return
        _out.print(f"forgot {record.record_id} ({record.name}); erased {record.content}", markup=False)

    app.add_typer(group, name="memory")
