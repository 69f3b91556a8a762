"""Integrity math against naive references, published vectors and corrupted proofs; canonical round trips.

* Chain rule (seed 003): ``sha256("GENESIS" | prev_hex ‖ u64_le(seq) ‖ bytes)``, lowercase hex.
* RFC 9162 Merkle tree: root, CompactRange, inclusion and consistency proofs, checked against a
  transcription of the RFC's definitions and the Certificate Transparency test vectors (as in
  transparency-dev/merkle ``testonly/reference_test.go``), and rejected when corrupted.
* RFC 8785 encoding: canonical bytes survive decode → encode unchanged (hypothesis), and values JCS cannot
  represent are refused with an ``EncodingError`` naming the JSON path.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from flightlog.encoding import MAX_SAFE_INTEGER, canonical_bytes, canonical_json, decode_stored, parse_json
from flightlog.errors import Divergence, EncodingError
from flightlog.events import Custom, RunStarted, ToolRequested
from flightlog.ledger import (
    EMPTY_ROOT,
    GENESIS,
    CompactRange,
    chain_hash,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    merkle_root,
    node_hash,
    verify_consistency,
    verify_inclusion,
    verify_rows,
)
from flightlog.store.base import StoredEvent

# ─── chain rule ───────────────────────────────────────────────────────────────────────────


def naive_chain(prev: str, seq: int, data: bytes) -> str:
    """Seed 003, spelled out: prev hash text as ASCII, seq as 8 little-endian bytes, then the bytes."""
    return hashlib.sha256(prev.encode("ascii") + seq.to_bytes(8, "little") + data).hexdigest()


def test_chain_hash_genesis_matches_the_seed_rule() -> None:
    data = b'{"kind":"custom"}'
    expected = hashlib.sha256(b"GENESIS" + b"\x00" * 8 + data).hexdigest()
    got = chain_hash(GENESIS, 0, data)
    assert got == expected
    assert len(got) == 64
    assert got == got.lower()
    assert set(got) <= set("0123456789abcdef")


@pytest.mark.parametrize("seq", [0, 1, 255, 256, 2**32, 2**63, 2**64 - 1])
def test_chain_hash_encodes_seq_as_u64_le(seq: int) -> None:
    prev = "ab" * 32
    assert chain_hash(prev, seq, b"x") == naive_chain(prev, seq, b"x")


def test_chain_hash_links_a_chain() -> None:
    prev = GENESIS
    for seq in range(50):
        data = canonical_json({"i": seq, "s": "🦜" * seq})
        digest = chain_hash(prev, seq, data)
        assert digest == naive_chain(prev, seq, data)
        prev = digest


@pytest.mark.parametrize("seq", [-1, 2**64])
def test_chain_hash_refuses_seq_outside_u64(seq: int) -> None:
    with pytest.raises(ValueError, match="u64"):
        chain_hash(GENESIS, seq, b"")


def test_chain_hash_refuses_non_ascii_prev() -> None:
    with pytest.raises(ValueError):
        chain_hash("GENESİS", 0, b"")


# ─── RFC 9162 Merkle tree ─────────────────────────────────────────────────────────────────


def ref_mth(entries: Sequence[bytes]) -> bytes:
    """RFC 9162 §2.1.1 Merkle Tree Hash over *entries* (not leaf hashes), transcribed literally."""
    n = len(entries)
    if n == 0:
        return hashlib.sha256(b"").digest()
    if n == 1:
        return hashlib.sha256(b"\x00" + entries[0]).digest()
    k = 1
    while k * 2 < n:
        k *= 2
    return hashlib.sha256(b"\x01" + ref_mth(entries[:k]) + ref_mth(entries[k:])).digest()


def ref_path(m: int, entries: Sequence[bytes]) -> list[bytes]:
    """RFC 9162 §2.1.3.1 PATH(m, D[n])."""
    n = len(entries)
    if n == 1:
        return []
    k = 1
    while k * 2 < n:
        k *= 2
    if m < k:
        return [*ref_path(m, entries[:k]), ref_mth(entries[k:])]
    return [*ref_path(m - k, entries[k:]), ref_mth(entries[:k])]


def ref_proof(m: int, entries: Sequence[bytes]) -> list[bytes]:
    """RFC 9162 §2.1.4.1 PROOF(m, D[n]) = SUBPROOF(m, D[n], true)."""

    def subproof(m: int, d: Sequence[bytes], b: bool) -> list[bytes]:
        n = len(d)
        if m == n:
            return [] if b else [ref_mth(d)]
        k = 1
        while k * 2 < n:
            k *= 2
        if m <= k:
            return [*subproof(m, d[:k], b), ref_mth(d[k:])]
        return [*subproof(m - k, d[k:], False), ref_mth(d[:k])]

    return subproof(m, entries, True) if 0 < m < len(entries) else []


ENTRIES = [f"entry {i} 🦜".encode() for i in range(70)]
LEAVES = [leaf_hash(e) for e in ENTRIES]
ROOTS = [ref_mth(ENTRIES[:n]) for n in range(len(ENTRIES) + 1)]

# Certificate Transparency (RFC 6962, same hashing as RFC 9162) published vectors.
CT_ENTRIES = [
    bytes.fromhex(h)
    for h in (
        "",
        "00",
        "10",
        "2021",
        "3031",
        "40414243",
        "5051525354555657",
        "606162636465666768696a6b6c6d6e6f",
    )
]
CT_ROOTS = [
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]
CT_INCLUSION = {
    (0, 8): [
        "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
    ],
    (5, 8): [
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    ],
}
CT_CONSISTENCY = {
    (6, 8): [
        "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    ],
}


def test_leaf_and_node_hash_prefixes() -> None:
    assert leaf_hash(b"abc") == hashlib.sha256(b"\x00abc").digest()
    left, right = leaf_hash(b"l"), leaf_hash(b"r")
    assert node_hash(left, right) == hashlib.sha256(b"\x01" + left + right).digest()
    assert node_hash(left, right) != node_hash(right, left)
    assert hashlib.sha256(b"").hexdigest() == EMPTY_ROOT


def test_merkle_root_matches_published_ct_vectors() -> None:
    leaves = [leaf_hash(e) for e in CT_ENTRIES]
    assert [merkle_root(leaves[:n]).hex() for n in range(9)] == CT_ROOTS
    assert [ref_mth(CT_ENTRIES[:n]).hex() for n in range(9)] == CT_ROOTS  # the reference is right too


@pytest.mark.parametrize(("index", "size"), sorted(CT_INCLUSION))
def test_inclusion_proof_matches_published_ct_vectors(index: int, size: int) -> None:
    leaves = [leaf_hash(e) for e in CT_ENTRIES]
    proof = inclusion_proof(leaves[:size], index)
    assert [p.hex() for p in proof] == CT_INCLUSION[index, size]
    assert verify_inclusion(leaves[index], index, size, proof, bytes.fromhex(CT_ROOTS[size]))


@pytest.mark.parametrize(("old", "new"), sorted(CT_CONSISTENCY))
def test_consistency_proof_matches_published_ct_vectors(old: int, new: int) -> None:
    leaves = [leaf_hash(e) for e in CT_ENTRIES]
    proof = consistency_proof(leaves[:new], old)
    assert [p.hex() for p in proof] == CT_CONSISTENCY[old, new]
    assert verify_consistency(old, new, bytes.fromhex(CT_ROOTS[old]), bytes.fromhex(CT_ROOTS[new]), proof)


def test_merkle_root_matches_the_reference_for_sizes_0_to_70() -> None:
    for n in range(len(ENTRIES) + 1):
        assert merkle_root(LEAVES[:n]) == ROOTS[n], n


def test_compact_range_equals_the_root_at_every_size() -> None:
    tree = CompactRange()
    assert tree.root() == ROOTS[0]
    for n, leaf in enumerate(LEAVES, start=1):
        tree.append(leaf)
        assert tree.size == n
        assert tree.root() == ROOTS[n], n
        assert len(tree.hashes) == bin(n).count("1")  # one perfect subtree per set bit: O(log n)


def test_compact_range_copy_is_independent() -> None:
    tree = CompactRange()
    for leaf in LEAVES[:5]:
        tree.append(leaf)
    staged = tree.copy()
    staged.append(LEAVES[5])
    assert (tree.size, tree.root()) == (5, ROOTS[5])
    assert (staged.size, staged.root()) == (6, ROOTS[6])


def _flip(proof: list[bytes], i: int) -> list[bytes]:
    bad = list(proof)
    bad[i] = bytes([bad[i][0] ^ 0x01]) + bad[i][1:]
    return bad


MAX = 33


def test_every_inclusion_proof_verifies_and_matches_the_reference() -> None:
    for size in range(1, MAX + 1):
        for index in range(size):
            proof = inclusion_proof(LEAVES[:size], index)
            assert proof == ref_path(index, ENTRIES[:size]), (index, size)
            assert verify_inclusion(LEAVES[index], index, size, proof, ROOTS[size]), (index, size)


def _inclusion_corruptions(index: int, size: int, proof: list[bytes]) -> list[tuple[str, Callable[[], bool]]]:
    leaf, root = LEAVES[index], ROOTS[size]
    cases: list[tuple[str, Callable[[], bool]]] = [
        (f"flip {i}", lambda i=i: verify_inclusion(leaf, index, size, _flip(proof, i), root))  # type: ignore[misc]
        for i in range(len(proof))
    ]
    cases += [
        ("extra element", lambda: verify_inclusion(leaf, index, size, [*proof, b"\x00" * 32], root)),
        ("wrong leaf", lambda: verify_inclusion(LEAVES[(index + 1) % 70], index, size, proof, root)),
        ("wrong root", lambda: verify_inclusion(leaf, index, size, proof, ROOTS[size - 1])),
        ("index + 1", lambda: verify_inclusion(leaf, index + 1, size, proof, root)),
        ("index - 1", lambda: verify_inclusion(leaf, index - 1, size, proof, root)),
        ("index ^ 2", lambda: verify_inclusion(leaf, index ^ 2, size, proof, root)),
        ("size * 2", lambda: verify_inclusion(leaf, index, size * 2, proof, root)),
        ("size // 2", lambda: verify_inclusion(leaf, index, size // 2, proof, root)),
        ("size + 1 with its root", lambda: verify_inclusion(leaf, index, size + 1, proof, ROOTS[size + 1])),
    ]
    if proof:
        cases.append(("missing last", lambda: verify_inclusion(leaf, index, size, proof[:-1], root)))
        cases.append(("missing first", lambda: verify_inclusion(leaf, index, size, proof[1:], root)))
    if len(proof) >= 2 and proof[0] != proof[1]:
        swapped = [proof[1], proof[0], *proof[2:]]
        cases.append(("swapped", lambda: verify_inclusion(leaf, index, size, swapped, root)))
    return cases


def test_corrupted_inclusion_proofs_fail() -> None:
    for size in range(1, MAX + 1):
        for index in range(size):
            proof = inclusion_proof(LEAVES[:size], index)
            for name, check in _inclusion_corruptions(index, size, proof):
                assert check() is False, (name, index, size)


def test_every_consistency_proof_verifies_and_matches_the_reference() -> None:
    for new in range(0, MAX + 1):
        for old in range(0, new + 1):
            proof = consistency_proof(LEAVES[:new], old)
            assert proof == ref_proof(old, ENTRIES[:new]), (old, new)
            assert verify_consistency(old, new, ROOTS[old], ROOTS[new], proof), (old, new)


def _consistency_corruptions(old: int, new: int, proof: list[bytes]) -> list[tuple[str, Callable[[], bool]]]:
    a, b = ROOTS[old], ROOTS[new]
    cases: list[tuple[str, Callable[[], bool]]] = [
        (f"flip {i}", lambda i=i: verify_consistency(old, new, a, b, _flip(proof, i)))  # type: ignore[misc]
        for i in range(len(proof))
    ]
    cases.append(("extra element", lambda: verify_consistency(old, new, a, b, [*proof, b"\x00" * 32])))
    if old > 0:  # the empty tree is consistent with every tree: those cases are not corruptions
        cases.append(
            ("new size + 1 with its root", lambda: verify_consistency(old, new + 1, a, ROOTS[new + 1], proof))
        )
    if 0 < old < new:
        cases += [
            ("reversed sizes", lambda: verify_consistency(new, old, b, a, proof)),
            ("wrong old root", lambda: verify_consistency(old, new, ROOTS[old - 1], b, proof)),
            ("wrong new root", lambda: verify_consistency(old, new, a, ROOTS[new - 1], proof)),
            ("missing last", lambda: verify_consistency(old, new, a, b, proof[:-1])),
            ("missing first", lambda: verify_consistency(old, new, a, b, proof[1:])),
        ]
        if old > 1:
            cases.append(
                (
                    "old size - 1 with its root",
                    lambda: verify_consistency(old - 1, new, ROOTS[old - 1], b, proof),
                )
            )
        if new - old > 1:
            cases.append(
                (
                    "old size + 1 with its root",
                    lambda: verify_consistency(old + 1, new, ROOTS[old + 1], b, proof),
                )
            )
    if len(proof) >= 2 and proof[0] != proof[1]:
        swapped = [proof[1], proof[0], *proof[2:]]
        cases.append(("swapped", lambda: verify_consistency(old, new, a, b, swapped)))
    if old == new and old > 0:
        cases.append(
            ("equal sizes, other root", lambda: verify_consistency(old, new, a, ROOTS[new - 1], proof))
        )
    return cases


def test_corrupted_consistency_proofs_fail() -> None:
    for new in range(0, MAX + 1):
        for old in range(0, new + 1):
            proof = consistency_proof(LEAVES[:new], old)
            for name, check in _consistency_corruptions(old, new, proof):
                assert check() is False, (name, old, new)


def test_proof_generators_refuse_out_of_range() -> None:
    with pytest.raises(ValueError):
        inclusion_proof(LEAVES[:4], 4)
    with pytest.raises(ValueError):
        inclusion_proof(LEAVES[:4], -1)
    with pytest.raises(ValueError):
        consistency_proof(LEAVES[:4], 5)
    assert verify_inclusion(LEAVES[0], 0, 0, [], ROOTS[0]) is False


# ─── verify_rows over a stored chain ──────────────────────────────────────────────────────


def _chain(n: int) -> list[StoredEvent]:
    rows, prev = [], GENESIS
    for seq in range(n):
        data = canonical_bytes(Custom(custom_kind="k", payload=seq))
        digest = chain_hash(prev, seq, data)
        rows.append(StoredEvent("s", seq, "custom", data, prev, digest, 0))
        prev = digest
    return rows


def test_verify_rows_reports_root_head_and_every_divergence() -> None:
    rows = _chain(12)
    report = verify_rows("s", iter(rows), expected_head=(11, rows[-1].hash))
    assert report.ok
    assert (report.events, report.head) == (12, rows[-1].hash)
    assert report.root == merkle_root([leaf_hash(r.event_bytes) for r in rows]).hex()
    assert report.bytes == sum(len(r.event_bytes) for r in rows)

    tampered = list(rows)
    r3 = rows[3]
    tampered[3] = StoredEvent(
        "s", 3, "custom", b'{"kind":"custom","custom_kind":"x"}', r3.prev_hash, r3.hash, 0
    )
    del tampered[7]
    report = verify_rows("s", tampered, expected_head=(13, "f" * 64))
    assert all(isinstance(d, Divergence) for d in report.divergences)
    assert [(d.seq, d.reason) for d in report.divergences] == [
        (3, "hash_mismatch"),
        (7, "gap"),
        (8, "broken_link"),
        (12, "truncated"),
    ]


def test_verify_rows_empty() -> None:
    report = verify_rows("s", [])
    assert (report.ok, report.events, report.head, report.root) == (True, 0, GENESIS, EMPTY_ROOT)


# ─── canonical encoding: round trips (hypothesis) ─────────────────────────────────────────

SAFE_INTS = st.integers(min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER)


def _not_integral_and_unsafe(x: float) -> bool:
    # Finite floats in [2**53, 1e21) print as integer literals in JCS and decode back as Python ints
    # beyond the safe range; that case has its own test below.
    return not (2**53 <= abs(x) < 1e21)


FINITE_FLOATS = st.floats(allow_nan=False, allow_infinity=False).filter(_not_integral_and_unsafe)
SPECIAL_TEXT = st.sampled_from(
    ["\u2028", "\u2029", "🦜", "👩‍👩‍👧", "\x00", "\x7f", "é", "\ufeff", '"\\/', "\U0010ffff"]
)
TEXT = st.lists(
    st.one_of(st.text(alphabet=st.characters(exclude_categories=["Cs"])), SPECIAL_TEXT), max_size=4
).map("".join)
JSON = st.recursive(
    st.none() | st.booleans() | SAFE_INTS | FINITE_FLOATS | TEXT,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(TEXT, children, max_size=4),
    max_leaves=20,
)


def _round_trips(event: Any) -> None:
    data = canonical_bytes(event)
    decoded = decode_stored(data)
    assert canonical_bytes(decoded) == data
    assert canonical_json(parse_json(data)) == data


@settings(max_examples=300, database=None, deadline=None)
@given(kind=TEXT, payload=JSON)
@example(kind="k", payload={"a": -0.0, "b": 1e21, "c": 5e-324, "d": [MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER]})
@example(kind="\u2028", payload={"\u2028": "🦜", "": None, "z": {"nested": [None, True, 1.5]}})
def test_custom_payload_canonical_round_trip(kind: str, payload: Any) -> None:
    _round_trips(Custom(custom_kind=kind, payload=payload))


@settings(max_examples=200, database=None, deadline=None)
@given(run_id=TEXT, goal=TEXT, criteria=st.lists(TEXT, max_size=3), prompt=st.none() | TEXT)
@example(run_id="r", goal="line\u2028break\u2029 🦜", criteria=[], prompt=None)
def test_run_started_canonical_round_trip(
    run_id: str, goal: str, criteria: list[str], prompt: str | None
) -> None:
    event = RunStarted(run_id=run_id, goal=goal, criteria=criteria, system_prompt=prompt)
    _round_trips(event)
    assert decode_stored(canonical_bytes(event)) == event


@settings(max_examples=200, database=None, deadline=None)
@given(
    turn=st.integers(min_value=0, max_value=2**32 - 1),
    calls=st.lists(st.tuples(TEXT, TEXT, TEXT), max_size=3),
)
def test_tool_requested_canonical_round_trip(turn: int, calls: list[tuple[str, str, str]]) -> None:
    from flightlog.messages import ToolCall

    event = ToolRequested(turn=turn, calls=[ToolCall(id=i, name=n, arguments=a) for i, n, a in calls])
    _round_trips(event)
    assert decode_stored(canonical_bytes(event)) == event


@pytest.mark.parametrize("value", [1e16, 2.0**53, -1e20])
def test_large_integral_float_round_trips(value: float) -> None:
    _round_trips(Custom(custom_kind="k", payload={"x": value}))


# ─── canonical encoding: refusals name the path ───────────────────────────────────────────


@pytest.mark.parametrize(
    ("payload", "path"),
    [
        pytest.param({"a": [1, {"b": 2**53}]}, "$.payload.a[1].b", id="2**53"),
        pytest.param({"a": [1, {"b": -(2**53)}]}, "$.payload.a[1].b", id="-2**53"),
        pytest.param([[[2**60]]], "$.payload[0][0][0]", id="2**60-deep"),
        pytest.param({"x": {"y": "ok\ud800"}}, "$.payload.x.y", id="lone-high-surrogate"),
        pytest.param({"x": ["fine", "\udfff"]}, "$.payload.x[1]", id="lone-low-surrogate"),
        pytest.param({"a": [1, {"b": math.nan}]}, "$.payload.a[1].b", id="nan"),
        pytest.param({"a": {"b": math.inf}}, "$.payload.a.b", id="inf"),
        pytest.param({"a": [-math.inf]}, "$.payload.a[0]", id="-inf"),
        pytest.param({"ok": {"\ud800": 1}}, "$.payload.ok.\ud800", id="surrogate-key"),
    ],
)
def test_encoding_error_names_the_path_in_a_custom_payload(payload: Any, path: str) -> None:
    with pytest.raises(EncodingError) as info:
        canonical_bytes(Custom(custom_kind="k", payload=payload))
    assert info.value.field == path
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ({"a": [1, {"b": math.nan}]}, "$.a[1].b"),
        ({"a": {"b": math.inf}}, "$.a.b"),
        ({"a": [-math.inf]}, "$.a[0]"),
        ({"a": 2**53}, "$.a"),
        ({"a": -(2**53)}, "$.a"),
        ({"s": ["x", "\ud800"]}, "$.s[1]"),
        ({"k": {"\ud800": 1}}, "$.k.\ud800"),
    ],
)
def test_canonical_json_names_the_path(value: Any, path: str) -> None:
    """The JSON-level encoder itself is right; the event-level bugs above come from ``to_wire``."""
    with pytest.raises(EncodingError) as info:
        canonical_json(value)
    assert info.value.field == path


def test_typed_text_with_a_lone_surrogate_names_the_field() -> None:
    with pytest.raises(EncodingError) as info:
        canonical_bytes(RunStarted(run_id="r", goal="a\ud800b"))
    assert info.value.field == "$.goal"


def test_max_safe_integer_is_accepted() -> None:
    data = canonical_bytes(Custom(custom_kind="k", payload=[MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER]))
    assert data.endswith(b"[9007199254740991,-9007199254740991]}")
