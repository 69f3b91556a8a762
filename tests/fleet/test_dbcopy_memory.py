"""``db copy`` moves the long-term memories with the ledger (a new user's finding).

Before: a whole copy retired the source but left its ``memories`` rows behind; ``memory ls`` on the copy
said "no memories" and ``memory forget ID`` failed there, while the retired source refused the writes a
forget needs: the memories were stranded. Now they are copied (``record_json`` verbatim, the text with its
salt), read back byte for byte, and searchable in the copy. SQLite -> PostgreSQL and PostgreSQL -> SQLite.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.audit3.helpers import execute, invoke

from flightlog.errors import StoreError
from flightlog.events import MemoryKind, MemoryScope
from flightlog.kernel.memory_bank import remember, text_of
from flightlog.ops.dbcopy import CopyNotVerified, copy_store
from flightlog.recorder import Recorder
from flightlog.store import open_store
from postgres.server import backend_url

SCOPE = MemoryScope(tenant_id="acme", namespace="ops")


@pytest.fixture(params=["sqlite->postgres", "postgres->sqlite"])
def pair(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A source and a destination store URL, one on each backend."""
    first, _, second = request.param.partition("->")
    with (
        backend_url(first, tmp_path / "src.db", "memcopy") as src,
        backend_url(second, tmp_path / "dst.db", "memcopy") as dst,
    ):
        yield src, dst


def _remembered(url: str) -> dict[str, str]:
    """A session that remembers two things, and a host memory of no session; record id -> text."""
    texts: dict[str, str] = {}
    with open_store(url) as store:
        Recorder.create(store, session_id="s1", task="t").record_custom("step", {"i": 1})
        for name, text, session in (
            ("deploy", "deploys go out on tuesdays — ünïcode kept", "s1"),
            ("editor", "the team uses vim", "s1"),
            ("host", "remembered by the host, no session", None),
        ):
            done = remember(
                store, scope=SCOPE, kind=MemoryKind.PROJECT, name=name, content=text, session_id=session
            )
            texts[done.record.record_id] = text
        store.memory.mark_recalled([next(iter(texts))], 1234)  # recall stats travel too
    return texts


def _stored(url: str) -> list[tuple[str, str]]:
    with open_store(url, read_only=True) as store:
        return list(store.memory.stored())


def test_a_whole_copy_carries_the_memories_byte_for_byte(pair: tuple[str, str]) -> None:
    src, dst = pair
    texts = _remembered(src)
    before = _stored(src)
    assert len(before) == 3

    result = invoke(src, "db", "copy", src, dst, "--offline", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["memories"] == 3

    assert _stored(dst) == before  # record_json verbatim, same ids, same order
    with open_store(dst, read_only=True) as store:
        for row_id, _ in before:
            row = store.memory.get(row_id)
            assert row is not None and text_of(store, row.handle) == texts[row_id]
        hits = store.memory.search(SCOPE, "tuesdays")  # the copy's own full-text index has the text
        assert [hit.row.record.name for hit in hits] == ["deploy"]

    listed = invoke(dst, "memory", "ls", "--json")
    assert listed.exit_code == 0, listed.stderr
    shown = {m["record"]["record_id"]: m["text"] for m in json.loads(listed.stdout)}
    assert shown == texts
    forgotten = next(iter(texts))
    gone = invoke(dst, "memory", "forget", forgotten)
    assert gone.exit_code == 0, gone.stderr
    assert forgotten not in {row_id for row_id, _ in _stored(dst)}


def test_a_destination_holding_memories_is_refused(pair: tuple[str, str]) -> None:
    src, dst = pair
    _remembered(src)
    with open_store(dst) as store:
        remember(store, scope=SCOPE, kind=MemoryKind.USER, name="mine", content="already here")
    with open_store(src) as source, open_store(dst) as target, pytest.raises(StoreError, match="memories"):
        copy_store(source, target, witnesses=[])
    assert [json.loads(j)["name"] for _, j in _stored(dst)] == ["mine"]  # nothing written
    assert invoke(src, "memory", "forget", _stored(src)[0][0]).exit_code == 0  # the source stays live


def test_a_memory_whose_text_is_gone_refuses_the_copy(pair: tuple[str, str]) -> None:
    src, dst = pair
    texts = _remembered(src)
    victim = sorted(texts)[0]
    with open_store(src, read_only=True) as store:
        row = store.memory.get(victim)
        assert row is not None
        digest = row.handle.removeprefix("salted:sha256:")
    execute(src, f"DELETE FROM salted_artifacts WHERE digest = '{digest}'")
    with (
        open_store(src) as source,
        open_store(dst) as target,
        pytest.raises(CopyNotVerified, match=f"memory {victim} .*not in the source"),
    ):
        copy_store(source, target, witnesses=[])
    assert _stored(dst) == []
    with open_store(src) as store:
        assert store.retirement() is None  # not retired: the memories stay where they can be used
