"""``db copy``: SQLite → PostgreSQL → SQLite keeps every byte and verifies; refuses to overwrite.

Signed ledgers (ledger id, index log, cosignatures, ``verify --all``) are in ``test_dbcopy_ledger.py``."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from flightlog.errors import LedgerIntegrityError, StoreError
from flightlog.fleet import Worker, submit
from flightlog.integrity.notary import Notary
from flightlog.ops.dbcopy import copy_store
from flightlog.recorder import Recorder, verify_session
from flightlog.runs import list_runs
from flightlog.store import ImportRecord, SqliteStore, Store, open_store
from postgres.server import database_url, fresh_schema, schema_url

from . import fleet_agent

SPEC = "fleet.fleet_agent:agent"


def _fill(store: Store) -> list[str]:
    ids = [submit(store, SPEC, fleet_agent.GOAL, session_id=f"c-{i}") for i in range(3)]
    Worker(store, concurrency=2, poll_s=0.05).run(idle_exit_s=0.3)
    plain = Recorder.create(store, session_id="plain", source="api", notary=Notary.from_env())
    handle = plain.put_artifact(b"\x89PNG artifact bytes", "image/png")
    plain.record_custom("picture", {"ref": handle})
    plain.record_grant_policy("p1", {"allow": ["read"]})
    plain.record_intent("k-pending", {"op": "pay"})
    plain.checkpoint()  # signed (the user's key), so the copy's full check has a checkpoint to verify
    store.record_import(ImportRecord("ef" * 32, "plain", "claude-code", "1", "x.jsonl", 1234))
    return [*ids, "plain"]


def _same(a: Store, b: Store, ids: list[str]) -> None:
    for sid in ids:
        left, right = a.get_session(sid), b.get_session(sid)
        keep = (
            "task",
            "status",
            "source",
            "created_at_ms",
            "head_seq",
            "head_hash",
            "merkle_root",
            "metadata",
        )
        assert [getattr(left, k) for k in keep] == [getattr(right, k) for k in keep]
        assert list(a.read_events(sid)) == list(b.read_events(sid))  # bytes, hashes, timestamps
        assert a.grant_policies(sid) == b.grant_policies(sid)
        assert [(c.size, c.root, c.body) for c in a.checkpoints(sid)] == [
            (c.size, c.root, c.body) for c in b.checkpoints(sid)
        ]
        assert [e.idempotency_key for e in a.pending_effects(sid)] == [
            e.idempotency_key for e in b.pending_effects(sid)
        ]
        assert verify_session(b, sid).ok


def test_sqlite_to_postgres_and_back(tmp_path: Path, out_dir: Path) -> None:
    database_url()
    with SqliteStore(tmp_path / "a.db") as first, fresh_schema("copy") as schema:
        ids = _fill(first)
        with open_store(schema_url(schema)) as pg:
            report = copy_store(first, pg)
            signed = sum(len(list(first.checkpoints(sid))) for sid in ids)  # fleet runs sign by default
            assert report.sessions == ids and report.artifacts == 1 and report.checkpoints == signed > 1
            _same(first, pg, ids)
            assert pg.find_import("ef" * 32) == first.find_import("ef" * 32)
            for key in ("c-0:1:a0", "k-pending"):
                sid = "plain" if key == "k-pending" else "c-0"
                before, after = first.get_effect(sid, key), pg.get_effect(sid, key)
                assert before is not None and after is not None
                assert (before.intent_hash, before.status, before.result_json) == (
                    after.intent_hash,
                    after.status,
                    after.result_json,
                )
            # the projection is rebuilt on arrival: the same runs ("plain" holds no run_started: no run)
            assert (
                {r.run_id for r in list_runs(pg)}
                == {r.run_id for r in list_runs(first)}
                == set(ids) - {"plain"}
            )
            with pytest.raises(
                StoreError, match=r"is retired \(moved to postgresql://.*copy from postgresql://"
            ):
                copy_store(first, pg)  # the source moved: it is no source any more
            with SqliteStore(tmp_path / "clash.db") as clash:
                Recorder.create(clash, session_id="c-0").record_custom("x", 1)
                with pytest.raises(StoreError, match="already has session c-0; refusing to overwrite"):
                    copy_store(clash, pg)
                assert clash.retirement() is None  # refused: nothing written, the source stays live
            with SqliteStore(tmp_path / "b.db") as back:
                copy_store(pg, back)
                _same(first, back, ids)
                digest = hashlib.sha256(b"\x89PNG artifact bytes").hexdigest()
                assert back.get_artifact(digest) == b"\x89PNG artifact bytes"
                info = back.artifact_info(digest)
                assert info is not None and info.media_type == "image/png"


def test_a_source_that_does_not_verify_is_refused(tmp_path: Path) -> None:
    import sqlite3

    with SqliteStore(tmp_path / "a.db") as src:
        Recorder.create(src, session_id="bad").append_many([])
        Recorder.create(src, session_id="good").record_custom("x", 1)
        recorder = Recorder.create(src, session_id="zz-broken")
        for i in range(3):
            recorder.record_custom("n", i)
    raw = sqlite3.connect(tmp_path / "a.db")
    raw.execute("DROP TRIGGER events_no_update")
    raw.execute("UPDATE events SET event = x'7b7d' WHERE session_id = 'zz-broken' AND seq = 1")
    raw.commit()
    raw.close()
    with SqliteStore(tmp_path / "a.db") as src, SqliteStore(tmp_path / "b.db") as dst:
        with pytest.raises(LedgerIntegrityError) as info:
            copy_store(src, dst)
        assert info.value.seq == 1
        assert list(dst.list_sessions()) == []  # one transaction: nothing written
