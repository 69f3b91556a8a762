"""RFC 9162 proofs against transparency-dev/merkle's published vectors (tests/data/merkle, Apache-2.0).

Every probe upstream marks valid must verify; every malformed or corrupted one (modified, truncated,
extended or reordered proofs, wrong leaves, roots, indices and sizes, garbage hashes) must be rejected.
The reference tree of ``testonly/constants.go`` pins leaf, node and root hashing and the compact range.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import pytest

from flightlog.ledger import (
    CompactRange,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    merkle_root,
    node_hash,
    verify_consistency,
    verify_inclusion,
)

DATA = Path(__file__).parent.parent / "data" / "merkle"


def _probes(kind: str) -> list[Any]:
    files = sorted((DATA / kind).rglob("*.json"))
    assert files, f"no {kind} vectors under {DATA}"
    return [pytest.param(json.loads(f.read_text()), id=str(f.relative_to(DATA / kind))) for f in files]


def _b64(text: str | None) -> bytes:
    return base64.b64decode(text) if text else b""


def _proof(probe: dict[str, Any]) -> list[bytes]:
    return [_b64(p) for p in probe["proof"] or []]


@pytest.mark.parametrize("probe", _probes("inclusion"))
def test_inclusion_probe(probe: dict[str, Any]) -> None:
    ok = verify_inclusion(
        _b64(probe["leafHash"]), probe["leafIdx"], probe["treeSize"], _proof(probe), _b64(probe["root"])
    )
    assert ok is not probe["wantErr"], probe["desc"]


@pytest.mark.parametrize("probe", _probes("consistency"))
def test_consistency_probe(probe: dict[str, Any]) -> None:
    ok = verify_consistency(
        probe["size1"], probe["size2"], _b64(probe["root1"]), _b64(probe["root2"]), _proof(probe)
    )
    assert ok is not probe["wantErr"], probe["desc"]


def test_the_vectors_hold_both_valid_and_invalid_probes() -> None:
    for kind in ("inclusion", "consistency"):
        wants = [p.values[0]["wantErr"] for p in _probes(kind)]
        assert wants.count(False) >= 5 and wants.count(True) >= 50, kind


# ─── the reference tree of testonly/constants.go ──────────────────────────────────────────────
_GO = (DATA / "constants.go").read_text()


def _go_hex_block(func: str) -> list[str]:
    body = _GO[_GO.index(f"func {func}()") :]
    body = body[: body.index("\n}\n")]
    return re.findall(r'hd\("([0-9a-f]*)"\)', body)


LEAF_INPUTS = [bytes.fromhex(h) for h in _go_hex_block("LeafInputs")]
ROOT_HASHES = [bytes.fromhex(h) for h in _go_hex_block("RootHashes")]
NODE_LEVELS = [8, 4, 2, 1]
NODE_HASHES = [bytes.fromhex(h) for h in _go_hex_block("NodeHashes")]


def test_reference_tree_roots() -> None:
    assert len(LEAF_INPUTS) == 8 and len(ROOT_HASHES) == 8  # RootHashes()[0] is EmptyRootHash(), not hd()
    leaves = [leaf_hash(x) for x in LEAF_INPUTS]
    assert [merkle_root(leaves[:n]) for n in range(1, 9)] == ROOT_HASHES
    tree = CompactRange()
    for n, leaf in enumerate(leaves, start=1):
        tree.append(leaf)
        assert tree.root() == ROOT_HASHES[n - 1]


def test_reference_tree_node_hashes_and_compact_ranges() -> None:
    levels, at = [], 0
    for width in NODE_LEVELS:
        levels.append(NODE_HASHES[at : at + width])
        at += width
    assert levels[0] == [leaf_hash(x) for x in LEAF_INPUTS]
    for level in range(1, 4):
        below = levels[level - 1]
        assert levels[level] == [node_hash(below[2 * i], below[2 * i + 1]) for i in range(len(below) // 2)]
    # CompactTrees(): the perfect subtrees covering [0, n), left to right.
    expected = {
        1: [levels[0][0]],
        2: [levels[1][0]],
        3: [levels[1][0], levels[0][2]],
        4: [levels[2][0]],
        5: [levels[2][0], levels[0][4]],
        6: [levels[2][0], levels[1][2]],
        7: [levels[2][0], levels[1][2], levels[0][6]],
        8: [levels[3][0]],
    }
    tree = CompactRange()
    for n in range(1, 9):
        tree.append(levels[0][n - 1])
        assert tree.hashes == expected[n], n


def test_generated_proofs_match_the_upstream_happy_paths() -> None:
    leaves = [leaf_hash(x) for x in LEAF_INPUTS]
    compared = 0
    for probe in [p.values[0] for p in _probes("inclusion")]:
        if probe["wantErr"] or probe["treeSize"] != 8:
            continue
        assert inclusion_proof(leaves, probe["leafIdx"]) == _proof(probe), probe
        compared += 1
    for probe in [p.values[0] for p in _probes("consistency")]:
        if probe["wantErr"] or probe["size2"] != 8 or probe["size1"] in (0, 8):
            continue
        assert consistency_proof(leaves, probe["size1"]) == _proof(probe), probe
        compared += 1
    assert compared >= 4
