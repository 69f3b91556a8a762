"""Long-term memory on PostgreSQL through the same functions as on SQLite: remember (text in salted
storage), recall ranked by ``ts_rank``, ``flightlog erase`` of a memory's handle deleting it, forget."""

from __future__ import annotations

from flightlog import events as ev
from flightlog.integrity.erasure import erase_artifact
from flightlog.kernel.memory_bank import forget, recall, remember, text_of
from flightlog.store.postgres import PostgresStore

SCOPE = ev.MemoryScope(tenant_id="acme", namespace="ops")


def test_remember_recall_erase_forget(pg_store: PostgresStore) -> None:
    deploy = remember(
        pg_store, scope=SCOPE, kind=ev.MemoryKind.PROJECT, name="deploy-day", content="Deploys on Thursdays."
    )
    editor = remember(
        pg_store, scope=SCOPE, kind=ev.MemoryKind.USER, name="editor", content="The user edits in vim."
    )
    (hit,) = recall(pg_store, SCOPE, "when are deploys", top_k=5)
    assert hit.record.record_id == deploy.record.record_id and hit.why.startswith("ts_rank")
    assert 0.0 < hit.score < 1.0 and text_of(pg_store, hit.record.content) == "Deploys on Thursdays."
    assert pg_store.memory.get(deploy.record.record_id).record.recall_count == 1  # type: ignore[union-attr]
    erase_artifact(pg_store, deploy.record.content, reason="test", notary=None)
    assert pg_store.memory.get(deploy.record.record_id) is None
    assert recall(pg_store, SCOPE, "deploys thursdays") == []
    assert forget(pg_store, editor.record.record_id) is not None
    assert text_of(pg_store, editor.record.content) is None and pg_store.memory.rows() == []
