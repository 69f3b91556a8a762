"""Pure integrity math: the hash chain, RFC 9162 Merkle hashing and proofs, and streaming verification.

Two structures cover every session's stored event bytes:

* **Chain** (seed 003, perspt ledger): ``hash_n = sha256(prev_hash_text ‖ u64_le(n) ‖ event_bytes)`` as
  64 lowercase hex chars, with ``prev_hash_text = "GENESIS"`` at seq 0 and the previous hash's hex text
  (ASCII) after that. It links every event to all before it.
* **Merkle tree** (RFC 9162 §2.1.1): ``leaf = sha256(0x00 ‖ event_bytes)``,
  ``node = sha256(0x01 ‖ left ‖ right)``, split at the largest power of two below the size. Its root (the
  tree head) at any size, and inclusion (§2.1.3) and consistency (§2.1.4) proofs, let an outside party check
  one entry or an append-only extension without the whole log.

What a plain chain can and cannot detect: an edited event, a deleted or reordered row, a forged hash, or a
missing middle row are all detected (hash mismatch, broken link, gap). A truncated tail is detected only
against a head recorded elsewhere (the session row's ``head_seq``/``head_hash``, a retained tree head, or a
signed checkpoint); an attacker who truncates the events *and* rewrites the session row yields a shorter chain
that verifies. Sealing and witnessing (issue 5) close that gap.

No I/O here: functions take bytes and iterables of rows, so they are testable against the RFC directly.
"""

from __future__ import annotations

import hashlib
import operator
import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .errors import Divergence, EventDecodeError

__all__ = [
    "EMPTY_ROOT",
    "GENESIS",
    "ROWS_PAST",
    "ChainCheck",
    "ChainRow",
    "ChainTuple",
    "CompactRange",
    "KindedChainTuple",
    "VerifyReport",
    "chain_hash",
    "consistency_proof",
    "inclusion_proof",
    "kind_mismatch",
    "leaf_hash",
    "link_problem",
    "merkle_root",
    "node_hash",
    "verify_consistency",
    "verify_inclusion",
    "verify_rows",
]

GENESIS = "GENESIS"
"""``prev_hash`` text of seq 0 (seed 003)."""

EMPTY_ROOT = hashlib.sha256(b"").hexdigest()
"""RFC 9162 §2.1.1: the hash of an empty tree is sha256 of the empty string."""

_U64 = struct.Struct("<Q")
_sha256 = hashlib.sha256


def chain_hash(prev_hash: str, seq: int, event_bytes: bytes) -> str:
    """Link one event into its session's hash chain.

    Args:
        prev_hash: Previous hash, 64 lowercase hex chars (``"GENESIS"`` at seq 0), hashed as ASCII.
        seq: 0-based position in the session, hashed as u64 little-endian (8 bytes).
        event_bytes: The stored RFC 8785 bytes; never re-serialized.

    Returns:
        ``sha256(prev_hash ‖ u64_le(seq) ‖ event_bytes)``, 64 lowercase hex chars.

    Raises:
        ValueError: ``seq`` is negative or >= 2**64, or ``prev_hash`` is not ASCII.

    Source: seed 003 (recorder chain rule); ARCHITECTURE.md invariant 4.
    """
    if not 0 <= seq < 2**64:
        raise ValueError(f"seq {seq} is outside u64")
    h = hashlib.sha256(prev_hash.encode("ascii"))
    h.update(_U64.pack(seq))
    h.update(event_bytes)
    return h.hexdigest()


def leaf_hash(event_bytes: bytes) -> bytes:
    """RFC 9162 §2.1.1 leaf hash: ``sha256(0x00 ‖ event_bytes)``, 32 bytes."""
    return hashlib.sha256(b"\x00" + event_bytes).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """RFC 9162 §2.1.1 interior node hash: ``sha256(0x01 ‖ left ‖ right)``, 32 bytes."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    """Largest power of two strictly less than ``n`` (n >= 2), RFC 9162 §2.1.1."""
    return 1 << ((n - 1).bit_length() - 1)


def merkle_root(leaves: Sequence[bytes]) -> bytes:
    """RFC 9162 Merkle Tree Hash (MTH) of a list of leaf hashes (not entries), 32 bytes.

    A direct, recursive transcription of the RFC; :class:`CompactRange` computes the same root
    incrementally in O(log n) memory.
    """
    n = len(leaves)
    if n == 0:
        return bytes.fromhex(EMPTY_ROOT)
    if n == 1:
        return leaves[0]
    k = _split(n)
    return node_hash(merkle_root(leaves[:k]), merkle_root(leaves[k:]))


@dataclass
class CompactRange:
    """Incremental RFC 9162 tree head: the roots of the perfect subtrees covering ``[0, size)``.

    ``append`` is amortised O(1) hashes; ``root`` is O(log n). Memory is O(log n) whatever the size.
    """

    size: int = 0
    hashes: list[bytes] = field(default_factory=list)

    def append(self, leaf: bytes) -> None:
        """Add one leaf hash (32 bytes) at index ``size``."""
        hashes = self.hashes
        self.size += 1
        n = self.size
        while n & 1 == 0:  # node_hash(left, right) inline: no Python call per node
            leaf = _sha256(b"\x01" + hashes.pop() + leaf).digest()
            n >>= 1
        hashes.append(leaf)

    def root(self) -> bytes:
        """The tree head of the leaves appended so far (``EMPTY_ROOT`` bytes when none)."""
        if not self.hashes:
            return bytes.fromhex(EMPTY_ROOT)
        acc = self.hashes[-1]
        for left in reversed(self.hashes[:-1]):
            acc = _sha256(b"\x01" + left + acc).digest()  # node_hash(left, acc), inline
        return acc

    def copy(self) -> CompactRange:
        """An independent copy (for staging an append without touching this one)."""
        return CompactRange(self.size, list(self.hashes))


def inclusion_proof(leaves: Sequence[bytes], index: int) -> list[bytes]:
    """RFC 9162 §2.1.3.1 audit path for leaf ``index`` in the tree of ``leaves`` (leaf hashes).

    Raises:
        ValueError: ``index`` is outside ``[0, len(leaves))``.
    """
    n = len(leaves)
    if not 0 <= index < n:
        raise ValueError(f"leaf index {index} is outside a tree of size {n}")
    if n == 1:
        return []
    k = _split(n)
    if index < k:
        return [*inclusion_proof(leaves[:k], index), merkle_root(leaves[k:])]
    return [*inclusion_proof(leaves[k:], index - k), merkle_root(leaves[:k])]


def consistency_proof(leaves: Sequence[bytes], old_size: int) -> list[bytes]:
    """RFC 9162 §2.1.4.1 consistency proof from ``old_size`` to ``len(leaves)``.

    Raises:
        ValueError: ``old_size`` is outside ``[0, len(leaves)]``.
    """
    n = len(leaves)
    if not 0 <= old_size <= n:
        raise ValueError(f"old size {old_size} is outside [0, {n}]")
    if old_size in (0, n):
        return []
    return _subproof(old_size, leaves, True)


def _subproof(m: int, leaves: Sequence[bytes], complete: bool) -> list[bytes]:
    n = len(leaves)
    if m == n:
        return [] if complete else [merkle_root(leaves)]
    k = _split(n)
    if m <= k:
        return [*_subproof(m, leaves[:k], complete), merkle_root(leaves[k:])]
    return [*_subproof(m - k, leaves[k:], False), merkle_root(leaves[:k])]


def _hashes(*values: bytes | Sequence[bytes]) -> bool:
    """True when every value (or every element of a sequence of them) is a 32-byte SHA-256 hash."""
    return all(
        len(v) == 32 if isinstance(v, bytes) else all(isinstance(p, bytes) and len(p) == 32 for p in v)
        for v in values
    )


def verify_inclusion(leaf: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes) -> bool:
    """RFC 9162 §2.1.3.2: does ``proof`` show leaf hash ``leaf`` at ``index`` in the tree ``root``?

    The leaf and every proof element must be 32 bytes: a short or empty "hash" is refused rather than
    compared (transparency-dev/merkle ``testdata/inclusion/single-entry/empty-root-and-leaf.json``).
    """
    if not 0 <= index < size or not _hashes(leaf, proof):
        return False
    fn, sn = index, size - 1
    r = leaf
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


def verify_consistency(
    old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> bool:
    """RFC 9162 §2.1.4.2: does ``proof`` show tree ``new_root`` extends tree ``old_root``?

    RFC 9162 defines proofs for ``0 < old_size < new_size`` (and an empty proof for equal sizes). The empty
    tree is a prefix of every tree, so ``old_size == 0`` takes an empty proof, but only with ``old_root``
    the empty-tree hash (§2.1.1) and a 32-byte ``new_root``: any other "root of size 0" is refused.
    Proof elements must be 32 bytes. Checked against transparency-dev/merkle ``testdata/consistency``
    (vendored in ``tests/data/merkle``).
    """
    if not 0 <= old_size <= new_size or not _hashes(proof):
        return False
    if old_size == 0:
        empty = bytes.fromhex(EMPTY_ROOT)
        new_ok = new_root == empty if new_size == 0 else _hashes(new_root)
        return not proof and old_root == empty and new_ok
    if old_size == new_size:
        return not proof and old_root == new_root
    path = list(proof)
    if old_size & (old_size - 1) == 0:  # exact power of two: old root is the first node
        path.insert(0, old_root)
    if not path:
        return False
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return sn == 0 and fr == old_root and sr == new_root


class ChainRow(Protocol):
    """What verification reads of a stored event row."""

    @property
    def seq(self) -> int:
        """0-based position in the session."""
        ...

    @property
    def prev_hash(self) -> str:
        """Chain hash of the previous row (``"GENESIS"`` at seq 0)."""
        ...

    @property
    def hash(self) -> str:
        """This row's chain hash, 64 lowercase hex chars."""
        ...

    @property
    def event_bytes(self) -> bytes:
        """The stored canonical (RFC 8785) event bytes."""
        ...


@dataclass
class VerifyReport:
    """Outcome of verifying one session's stored rows.

    Attributes:
        session_id: The session verified.
        events: Rows read.
        bytes: Total stored event bytes read.
        head: Stored hash of the last row read (``"GENESIS"`` when none).
        root: RFC 9162 tree head (hex) over every row read, in order.
        divergences: Every divergent sequence found, ascending (empty when intact).
    """

    session_id: str
    events: int = 0
    bytes: int = 0
    head: str = GENESIS
    root: str = EMPTY_ROOT
    divergences: list[Divergence] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no divergence was found."""
        return not self.divergences


ChainTuple = tuple[int, bytes, str, str]
"""A stored row as verification reads it: ``(seq, event_bytes, prev_hash, hash)``."""

KindedChainTuple = tuple[int, bytes, str, str, str | None]
"""A :data:`ChainTuple` with the row's stored ``kind`` column fifth (what a decoding check compares; None:
not compared)."""

_CHAIN_FIELDS = operator.attrgetter("seq", "event_bytes", "prev_hash", "hash")


def _kinded_fields(row: ChainRow) -> KindedChainTuple:
    """A row's :data:`KindedChainTuple` (its kind None when the row has no ``kind``: not compared)."""
    return row.seq, row.event_bytes, row.prev_hash, row.hash, getattr(row, "kind", None)


def kind_mismatch(seq: int, stored: str, decoded: str) -> Divergence:
    """The divergence of a row whose ``kind`` column says ``stored`` while its bytes decode to ``decoded``."""
    return Divergence(
        seq, "kind_mismatch", f"kind column {stored!r}, the stored bytes are a {decoded!r} event"
    )


def link_problem(row: ChainRow, expected_seq: int, prev: str) -> str | None:
    """Whether ``row`` is the next link of a chain whose last row has seq ``expected_seq - 1`` and stored hash
    ``prev`` (``GENESIS`` before seq 0): ``"gap"`` (another seq), ``"broken_link"`` (its ``prev_hash`` is not
    ``prev``), ``"hash_mismatch"`` (its hash is not :func:`chain_hash` of its own bytes), None when it links.
    For a reader that follows a chain row by row from a point already verified (:class:`ChainCheck` does
    the same checks, reporting every divergence, from seq 0)."""
    if row.seq != expected_seq:
        return "gap"
    if row.prev_hash != prev:
        return "broken_link"
    if chain_hash(prev, row.seq, row.event_bytes) != row.hash:
        return "hash_mismatch"
    return None


def _kinds_apart(rows: Iterable[tuple[Any, ...]], current: list[str | None]) -> Iterator[ChainTuple]:
    """``rows`` as :data:`ChainTuple`, each row's fifth field (its kind column, if any) put in ``current[0]``
    as the row is yielded."""
    for row in rows:
        current[0] = row[4] if len(row) > 4 else None
        yield row[0], row[1], row[2], row[3]


class ChainCheck:
    """The streaming state of :func:`verify_rows`: feed rows in ascending seq, in one or more batches of
    :data:`ChainTuple`, then :meth:`finish`.

    Each row's chain hash is recomputed from its own stored ``prev_hash`` and bytes, its stored
    ``prev_hash`` is compared with the previous row's stored ``hash``, its seq with the one expected, its
    RFC 9162 leaf hash folded into the tree, and (with ``decode``) its bytes decoded; every divergence is
    recorded at its seq. Memory is O(log n) whatever the number of rows.

    Args:
        session_id: For the report.
        decode: Also decode each event (upcasters included) and report ``undecodable`` ones.
        tree: Fold the leaf hashes into this tree (the caller's) instead of a private one (see
            :func:`verify_rows`); it holds every row fed so far whenever the next row is pulled.
    """

    def __init__(self, session_id: str, *, decode: bool = True, tree: CompactRange | None = None) -> None:
        self.report = VerifyReport(session_id=session_id)
        self.tree = CompactRange() if tree is None else tree
        self.decode = decode
        self.next_seq = 0
        """The last row's seq + 1 (0 before any row): the seq the next row should have."""

    def feed(self, rows: Iterable[tuple[Any, ...]]) -> None:
        """Check ``rows`` (:data:`ChainTuple`, ascending seq) after those fed before.

        With ``decode``, a row may carry its stored ``kind`` column fifth (:data:`KindedChainTuple`,
        ``Store.read_chain(kinds=True)``): a decoded event of another kind is a ``kind_mismatch`` at its
        seq (the chain hash covers the bytes, not that column, which readers pick rows by).

        One tight loop: the RFC 9162 compact-range append is inlined (same result as
        :meth:`CompactRange.append`), and the tree's ``size`` is kept current row by row.
        """
        from .encoding import decode_stored  # local: keeps the hashing core import-light

        report, tree, decode = self.report, self.tree, self.decode
        stored_kind: list[str | None] = [None]  # the current row's kind column, when it came with one
        if decode:
            rows = _kinds_apart(rows, stored_kind)
        bad = report.divergences.append
        sha256, pack, u64_error = hashlib.sha256, _U64.pack, struct.error
        hashes = tree.hashes
        push, pop = hashes.append, hashes.pop
        expected_seq, prev, size = self.next_seq, report.head, tree.size
        count, total = report.events, report.bytes
        try:
            for seq, data, stored_prev, stored_hash in rows:
                if seq != expected_seq:
                    if seq > expected_seq:
                        bad(Divergence(expected_seq, "gap", f"seqs {expected_seq}..{seq - 1} missing"))
                    else:
                        bad(Divergence(seq, "gap", f"seq {seq} out of order after {expected_seq - 1}"))
                if stored_prev != prev:
                    bad(Divergence(seq, "broken_link", "prev_hash does not match the previous row's hash"))
                try:
                    packed = pack(seq)
                except u64_error:  # a negative seq (a tampered row): hashed without it, so it mismatches
                    packed = b""
                if sha256(stored_prev.encode("ascii", "replace") + packed + data).hexdigest() != stored_hash:
                    bad(Divergence(seq, "hash_mismatch", "stored hash does not match the stored bytes"))
                if decode:
                    try:
                        decoded = decode_stored(data, seq=seq).kind
                    except EventDecodeError as exc:
                        bad(Divergence(seq, "undecodable", exc.reason))
                    else:
                        if stored_kind[0] is not None and stored_kind[0] != decoded:
                            bad(kind_mismatch(seq, stored_kind[0], decoded))
                push(sha256(b"\x00" + data).digest())
                size += 1
                n = size
                while not n & 1:  # merge equal perfect subtrees: RFC 9162 node = sha256(0x01 ‖ l ‖ r)
                    right = pop()
                    hashes[-1] = sha256(b"\x01" + hashes[-1] + right).digest()
                    n >>= 1
                tree.size = size
                count += 1
                total += len(data)
                prev = stored_hash
                expected_seq = seq + 1
        finally:
            report.events, report.bytes, report.head = count, total, prev
            self.next_seq = expected_seq

    def finish(self, expected_head: tuple[int, str] | None = None) -> VerifyReport:
        """The report: its tree head set, and compared with ``expected_head`` (``(seq, hash)`` recorded
        elsewhere) when given (``truncated`` or ``head_mismatch``, as :func:`check_head`)."""
        self.report.root = self.tree.root().hex()
        if expected_head is not None:
            _check_head(self.report, self.next_seq, expected_head)
        return self.report


def verify_rows(
    session_id: str,
    rows: Iterable[ChainRow],
    *,
    decode: bool = True,
    expected_head: tuple[int, str] | None = None,
    tree: CompactRange | None = None,
    kinds: bool = True,
) -> VerifyReport:
    """Recompute a session's chain and tree head from its stored rows, reporting every divergence.

    Streams: memory is O(log n) whatever the number of rows. Each row's hash is recomputed from its own
    stored ``prev_hash`` and bytes, so one edited event yields one ``hash_mismatch`` at its seq, and a
    rewritten hash shows as a ``broken_link`` at the next seq.

    Args:
        session_id: For the report.
        rows: Stored rows in ascending ``seq`` order.
        decode: Also decode each event (upcasters included) and report ``undecodable`` ones, and a row
            with a ``kind`` attribute (a stored row) whose bytes decode to another kind (``kind_mismatch``).
        expected_head: ``(seq, hash)`` of the head recorded elsewhere (the session row, a checkpoint);
            a missing or different head is reported as ``truncated`` or ``head_mismatch``.
        tree: Fold the leaf hashes into this tree (the caller's) instead of a private one, so a caller
            that needs the tree (checkpoint roots, a frontier) does not hash every leaf again. Each row's
            leaf is appended after the row is taken from ``rows``: a generator feeding ``rows`` sees, when
            asked for the next row, the tree holding every row before it. ``report.root`` is this tree's
            root at the end (pass an empty tree for the session's tree head).
        kinds: With ``decode``, compare each row's ``kind`` with its decoded event's (False: rows that hold
            no kind column, such as an audit bundle's entries).

    Returns:
        A :class:`VerifyReport`; ``report.ok`` is True when everything matched.

    Source: seed 003 ``attach`` (recompute and compare every row); RFC 9162 §2.1.1. The loop is
    :class:`ChainCheck` (which a store's raw row tuples can feed directly).
    """
    check = ChainCheck(session_id, decode=decode, tree=tree)
    check.feed(map(_kinded_fields if decode and kinds else _CHAIN_FIELDS, rows))
    return check.finish(expected_head)


ROWS_PAST = "rows past the recorded head seq"
"""How a ``head_mismatch`` divergence's detail starts when rows follow the recorded head (the head seq
follows): what a live writer's append made, when the head was read before the rows
(:meth:`flightlog.integrity.audit.Auditor.settled` tells it from tampering)."""


def check_head(report: VerifyReport, next_seq: int, expected_head: tuple[int, str]) -> None:
    """Compare a finished report's head with a head recorded elsewhere (``(seq, hash)``), appending a
    ``truncated`` or ``head_mismatch`` divergence when they disagree (what ``verify_rows`` does with its
    ``expected_head``, for a caller that learns the recorded head only after streaming the rows).
    ``next_seq`` is the last streamed row's seq + 1 (0 when there was none)."""
    _check_head(report, next_seq, expected_head)


def _check_head(report: VerifyReport, next_seq: int, expected_head: tuple[int, str]) -> None:
    head_seq, head_hash = expected_head
    if head_seq >= next_seq:
        report.divergences.append(
            Divergence(
                next_seq, "truncated", f"recorded head is seq {head_seq}, last stored is {next_seq - 1}"
            )
        )
    elif head_seq == next_seq - 1 and head_hash != report.head:
        report.divergences.append(Divergence(head_seq, "head_mismatch", "recorded head hash differs"))
    elif head_seq < next_seq - 1:
        report.divergences.append(Divergence(head_seq + 1, "head_mismatch", f"{ROWS_PAST} {head_seq}"))
