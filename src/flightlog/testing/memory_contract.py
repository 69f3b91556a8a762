"""The memory part of the Store contract (:mod:`flightlog.store.memory`): mixed into
:class:`~flightlog.testing.store_contract.StoreContract`, so every backend runs it.

What it pins: records per scope (the same name in two scopes or two kinds is two records; a record id
cannot take another's key); listing by scope and kind, newest first; full-text retrieval ranked by the
backend's relevance on a small corpus with known best hits (a record matching rarer and more of the
query words first, name matches above body matches), scores in [0, 1), filters by scope and kind, a query
without words finding nothing and no query syntax reaching the engine; update in place (the old text is
no longer found); delete and delete by handle (gone from search too); recall counting.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..events import MemoryAuthor, MemoryKind, MemoryProvenance, MemoryRecord, MemoryScope, MemoryTrustLevel
from ..store.base import Store
from ..store.memory import MemoryConflict, MemoryHit

__all__ = ["CORPUS", "MemoryContract", "memory_record"]

OPS = MemoryScope(tenant_id="acme", namespace="ops")
OTHER = MemoryScope(tenant_id="acme", namespace="research")

CORPUS: list[tuple[str, MemoryKind, str, str]] = [
    (
        "deploy-day",
        MemoryKind.PROJECT,
        "when deploys happen",
        "Production deploys happen on Thursdays after standup.",
    ),
    (
        "test-runner",
        MemoryKind.PROJECT,
        "how tests run",
        "Run the tests with cargo nextest, never plain cargo test.",
    ),
    ("editor", MemoryKind.USER, "editor preference", "The user edits in vim and wants tabs, not spaces."),
    (
        "tone",
        MemoryKind.FEEDBACK,
        "answer style",
        "Keep answers short; no apologies; cite the file and line.",
    ),
    (
        "oncall",
        MemoryKind.REFERENCE,
        "who is on call",
        "The on-call rota lives in the ops wiki under rotations.",
    ),
    (
        "database",
        MemoryKind.PROJECT,
        "which database",
        "Orders are stored in PostgreSQL 16; analytics in DuckDB.",
    ),
    ("deploy-freeze", MemoryKind.PROJECT, "freeze windows", "No deploys during the December freeze window."),
    ("coffee", MemoryKind.USER, "small talk", "The user likes espresso and dislikes meetings before ten."),
]
"""A small corpus: (name, kind, description, text), all in scope ``acme/ops``."""


def memory_record(
    name: str,
    kind: MemoryKind,
    description: str,
    *,
    scope: MemoryScope = OPS,
    record_id: str | None = None,
    updated_at: int = 1,
) -> MemoryRecord:
    """A record whose content is a (fake) salted handle derived from its id."""
    rid = record_id or f"mem-{scope.namespace}-{name}"
    return MemoryRecord(
        record_id=rid,
        scope=scope,
        name=name,
        kind=kind,
        content=f"salted:sha256:{abs(hash(rid)):064d}"[:78],
        description=description,
        provenance=MemoryProvenance(author=MemoryAuthor.MODEL, trust=MemoryTrustLevel.UNTRUSTED),
        created_at=1,
        updated_at=updated_at,
        confidence=0.9,
    )


def _load(store: Store) -> None:
    for i, (name, kind, description, text) in enumerate(CORPUS):
        store.memory.put(memory_record(name, kind, description, updated_at=i + 1), text)


def _names(hits: Sequence[MemoryHit]) -> list[str]:
    return [hit.row.record.name for hit in hits]


class MemoryContract:
    """Memory index tests; mixed into ``StoreContract`` (fixtures ``store`` and ``reopen`` from there)."""

    def test_memory_records_live_per_scope_and_kind(self, store: Store) -> None:
        a = memory_record("style", MemoryKind.FEEDBACK, "d")
        b = memory_record("style", MemoryKind.FEEDBACK, "d", scope=OTHER)
        c = memory_record("style", MemoryKind.USER, "d", record_id="mem-user-style")
        for record in (a, b, c):
            store.memory.put(record, "short answers")
        assert store.memory.get(a.record_id) is not None
        assert store.memory.get(a.record_id).record == a  # type: ignore[union-attr]
        found = store.memory.find(OTHER, MemoryKind.FEEDBACK, "style")
        assert found is not None and found.record == b
        assert store.memory.find(OPS, MemoryKind.REFERENCE, "style") is None
        assert {r.record.record_id for r in store.memory.rows(OPS)} == {a.record_id, c.record_id}
        assert [r.record.record_id for r in store.memory.rows(OPS, [MemoryKind.USER])] == [c.record_id]
        assert len(store.memory.rows()) == 3
        import pytest  # here: the module imports without pytest (store_contract, which needs it, says so)

        with pytest.raises(MemoryConflict, match="held by record"):
            store.memory.put(memory_record("style", MemoryKind.FEEDBACK, "d", record_id="mem-new"), "x")

    def test_memory_rows_newest_first(self, store: Store) -> None:
        _load(store)
        names = [r.record.name for r in store.memory.rows(OPS)]
        assert names == [name for name, *_ in reversed(CORPUS)]
        assert [r.record.name for r in store.memory.rows(OPS, limit=2)] == ["coffee", "deploy-freeze"]

    def test_memory_search_ranks_the_expected_hits(self, store: Store) -> None:
        _load(store)
        best = store.memory.search(OPS, "how do I run the tests with cargo", limit=3)
        assert _names(best)[0] == "test-runner"
        deploys = store.memory.search(OPS, "deploys", limit=5)
        assert set(_names(deploys)) == {"deploy-day", "deploy-freeze"}
        assert _names(store.memory.search(OPS, "when do production deploys happen", limit=1)) == [
            "deploy-day"
        ]
        assert _names(store.memory.search(OPS, "freeze december", limit=1)) == ["deploy-freeze"]
        assert _names(store.memory.search(OPS, "vim tabs", limit=1)) == ["editor"]
        assert _names(store.memory.search(OPS, "postgresql", limit=5)) == ["database"]
        for hit in best + deploys:
            assert 0.0 <= hit.score < 1.0
        assert [h.score for h in best] == sorted((h.score for h in best), reverse=True)

    def test_memory_search_filters_by_scope_and_kind(self, store: Store) -> None:
        _load(store)
        store.memory.put(
            memory_record("deploy-notes", MemoryKind.PROJECT, "d", scope=OTHER), "deploys weekly"
        )
        assert "deploy-notes" not in _names(store.memory.search(OPS, "deploys", limit=10))
        assert _names(store.memory.search(OTHER, "deploys", limit=10)) == ["deploy-notes"]
        assert len(store.memory.search(None, "deploys", limit=10)) == 3
        assert _names(store.memory.search(OPS, "user", [MemoryKind.USER], limit=10)) != []
        assert _names(store.memory.search(OPS, "deploys", [MemoryKind.USER], limit=10)) == []

    def test_memory_search_takes_words_not_query_syntax(self, store: Store) -> None:
        _load(store)
        assert store.memory.search(OPS, "  --- ** () ", limit=5) == []
        assert _names(store.memory.search(OPS, 'vim" OR NEAR(tabs', limit=1)) == ["editor"]
        assert store.memory.search(OPS, "zebra", limit=5) == []

    def test_memory_update_replaces_the_indexed_text(self, store: Store) -> None:
        record = memory_record("deploy-day", MemoryKind.PROJECT, "when deploys happen")
        store.memory.put(record, "deploys on thursdays")
        store.memory.put(record.model_copy(update={"updated_at": 5}), "deploys on mondays")
        assert store.memory.search(OPS, "thursdays", limit=5) == []
        assert _names(store.memory.search(OPS, "mondays", limit=5)) == ["deploy-day"]
        assert store.memory.get(record.record_id).record.updated_at == 5  # type: ignore[union-attr]

    def test_memory_delete_and_delete_by_handle(self, store: Store) -> None:
        _load(store)
        gone = store.memory.delete("mem-ops-editor")
        assert gone is not None and gone.record.name == "editor"
        assert store.memory.delete("mem-ops-editor") is None
        assert store.memory.get("mem-ops-editor") is None
        assert store.memory.search(OPS, "vim tabs", limit=5) == []
        tone = store.memory.get("mem-ops-tone")
        assert tone is not None
        assert store.memory.delete_handle(tone.handle) == ["mem-ops-tone"]
        assert store.memory.search(OPS, "apologies", limit=5) == []

    def test_memory_recalls_are_counted(self, store: Store) -> None:
        _load(store)
        store.memory.mark_recalled(["mem-ops-tone", "mem-ops-nothing"], 42)
        store.memory.mark_recalled(["mem-ops-tone"], 43)
        tone = store.memory.get("mem-ops-tone")
        assert tone is not None
        assert (tone.record.recall_count, tone.record.last_recalled_at) == (2, 43)

    def test_memory_survives_reopening(self, store: Store, reopen: Callable[[Store], Store]) -> None:
        _load(store)
        again = reopen(store)
        assert _names(again.memory.search(OPS, "vim", limit=1)) == ["editor"]
