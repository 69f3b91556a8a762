"""Property tests: proofs streamed from a real SQLite store equal RFC 9162's definitions, at any size.

Sessions of random length are written through a notarised :class:`~flightlog.recorder.Recorder` in random
batches, with a random checkpoint cadence (``Notary.every``) and random explicit checkpoints (what the
kernel does before a side effect). Every inclusion and consistency proof drawn from the store is compared
with a reference written here straight from RFC 9162 §2.1 (``MTH``, ``PATH``, ``PROOF``/``SUBPROOF`` over
the stored event bytes), which is itself pinned to transparency-dev's reference tree and proof vectors
(tests/data/merkle). The proofs must also check, and be tied to a signed checkpoint exactly when one
exists at their tree size.
"""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flightlog.integrity.heads import HeadStore
from flightlog.integrity.keys import LogSigner
from flightlog.integrity.notary import Notary
from flightlog.integrity.proofs import prove_consistency, prove_inclusion
from flightlog.recorder import Recorder
from flightlog.store import SqliteStore

from .conftest import SID, step
from .test_merkle_vectors import LEAF_INPUTS, ROOT_HASHES, _b64, _probes

# ─── RFC 9162 §2.1, as written there, over the leaf inputs ────────────────────────────────────


def _sha(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _k(n: int) -> int:
    """The largest power of two smaller than ``n`` (n > 1)."""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def mth(d: list[bytes]) -> bytes:
    """§2.1.1 Merkle Tree Hash."""
    if not d:
        return _sha(b"")
    if len(d) == 1:
        return _sha(b"\x00" + d[0])
    k = _k(len(d))
    return _sha(b"\x01" + mth(d[:k]) + mth(d[k:]))


def path(m: int, d: list[bytes]) -> list[bytes]:
    """§2.1.3.1 ``PATH(m, D[n])``: the inclusion proof of leaf ``m``."""
    if len(d) == 1:
        return []
    k = _k(len(d))
    if m < k:
        return [*path(m, d[:k]), mth(d[k:])]
    return [*path(m - k, d[k:]), mth(d[:k])]


def subproof(m: int, d: list[bytes], b: bool) -> list[bytes]:
    """§2.1.4.1 ``SUBPROOF(m, D[n], b)``."""
    if m == len(d):
        return [] if b else [mth(d)]
    k = _k(len(d))
    if m <= k:
        return [*subproof(m, d[:k], b), mth(d[k:])]
    return [*subproof(m - k, d[k:], False), mth(d[:k])]


def proof(m: int, d: list[bytes]) -> list[bytes]:
    """§2.1.4.1 ``PROOF(m, D[n])``: the consistency proof from size ``m`` to ``n``."""
    return subproof(m, d, True)


def test_the_reference_reproduces_the_upstream_tree_and_vectors() -> None:
    assert [mth(LEAF_INPUTS[:n]) for n in range(1, 9)] == ROOT_HASHES
    assert mth([]).hex() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    compared = 0
    for probe in [p.values[0] for p in _probes("inclusion")]:
        if not probe["wantErr"] and probe["treeSize"] == 8:
            assert path(probe["leafIdx"], LEAF_INPUTS) == [_b64(p) for p in probe["proof"] or []]
            compared += 1
    for probe in [p.values[0] for p in _probes("consistency")]:
        if not probe["wantErr"] and probe["size2"] == 8 and 0 < probe["size1"] < 8:
            assert proof(probe["size1"], LEAF_INPUTS) == [_b64(p) for p in probe["proof"] or []]
            compared += 1
    assert compared >= 4


# ─── random sessions on a real store ──────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Plan:
    """How a session is written: batch sizes, the cadence, and after which batches to checkpoint."""

    batches: tuple[int, ...]
    every: int
    explicit: frozenset[int]

    @property
    def size(self) -> int:
        return sum(self.batches)

    def checkpoint_sizes(self) -> list[int]:
        """Where signed checkpoints must be: the cadence is checked at the end of each ``append_many``
        (sign once ``every`` events are unanchored), and an explicit checkpoint anchors everything."""
        sizes, anchored, written = [], 0, 0
        for i, batch in enumerate(self.batches):
            written += batch
            if written - anchored >= self.every or (i in self.explicit and written > anchored):
                sizes.append(written)
                anchored = written
        return sizes


@st.composite
def plans(draw: Any) -> Plan:
    batches = tuple(draw(st.lists(st.integers(1, 9), min_size=1, max_size=12)))
    every = draw(st.integers(1, 24))
    explicit = frozenset(draw(st.sets(st.integers(0, len(batches) - 1), max_size=3)))
    return Plan(batches, every, explicit)


def _write(plan: Plan, directory: Path) -> tuple[SqliteStore, Notary, list[bytes]]:
    signer = LogSigner.generate("proofs.test/log")
    notary = Notary.for_signer(signer, HeadStore(directory / "heads"), every=plan.every)
    store = SqliteStore(directory / "proofs.db")
    rec = Recorder.create(store, session_id=SID, notary=notary)
    n = 0
    for i, batch in enumerate(plan.batches):
        rec.append_many([step(n + j) for j in range(batch)])
        n += batch
        if i in plan.explicit:
            rec.checkpoint()
    data = [r.event_bytes for r in store.read_events(SID)]
    assert len(data) == plan.size
    return store, notary, data


PROPERTY = settings(
    max_examples=40,
    deadline=None,  # a loaded machine is slow, never wrong
    suppress_health_check=[HealthCheck.too_slow],
)


@PROPERTY
@given(plan=plans(), picks=st.data())
def test_inclusion_proofs_from_the_store_are_rfc9162_paths(plan: Plan, picks: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store, notary, data = _write(plan, Path(tmp))
        try:
            signed = plan.checkpoint_sizes()
            latest = store.latest_checkpoint(SID)
            assert (latest.size if latest else None) == (signed[-1] if signed else None)
            for _ in range(picks.draw(st.integers(1, 6))):
                size = picks.draw(st.integers(1, plan.size), label="tree_size")
                seq = picks.draw(st.integers(0, size - 1), label="seq")
                got = prove_inclusion(store, SID, seq, tree_size=size)
                assert list(got.path) == path(seq, data[:size])
                assert got.root == mth(data[:size])
                assert got.leaf_hash == mth([data[seq]]) and got.event == data[seq]
                assert (got.checkpoint is not None) == (size in signed)
                assert got.check() == []
                assert got.check(notary.keyring, allow_unsigned=True) == []
                assert (got.check(notary.keyring) == []) == (size in signed)
                # Without a size: the latest checkpoint when it covers seq, else the whole session.
                default = prove_inclusion(store, SID, seq)
                anchored = signed and seq < signed[-1]
                assert default.tree_size == (signed[-1] if anchored else plan.size)
                assert list(default.path) == path(seq, data[: default.tree_size])
        finally:
            store.close()


@PROPERTY
@given(plan=plans(), picks=st.data())
def test_consistency_proofs_from_the_store_are_rfc9162_proofs(plan: Plan, picks: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store, notary, data = _write(plan, Path(tmp))
        try:
            signed = plan.checkpoint_sizes()
            for _ in range(picks.draw(st.integers(1, 6))):
                new = picks.draw(st.integers(1, plan.size), label="new_size")
                old = picks.draw(st.integers(1, new), label="old_size")
                got = prove_consistency(store, SID, old, new)
                assert list(got.path) == proof(old, data[:new])
                assert (got.old_root, got.new_root) == (mth(data[:old]), mth(data[:new]))
                assert (got.old_checkpoint is not None) == (old in signed)
                assert (got.new_checkpoint is not None) == (new in signed)
                assert got.check() == []
                assert (got.check(notary.keyring) == []) == (new in signed)
                # Without a new size: the latest checkpoint when it is at least old, else every event.
                default = prove_consistency(store, SID, old)
                anchored = signed and old <= signed[-1]
                assert default.new_size == (signed[-1] if anchored else plan.size)
                assert list(default.path) == proof(old, data[: default.new_size])
        finally:
            store.close()
