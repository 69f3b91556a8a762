"""Store-backed RFC 9162 proofs: one event's inclusion in a tree head, and consistency of two heads.

Generation never loads a session's leaves into memory. Every node of a proof is the Merkle Tree Hash of
a contiguous range of events (RFC 9162 §2.1.3.1 ``PATH``, §2.1.4.1 ``SUBPROOF``); it is computed by
streaming that range's rows out of the store and folding their leaf hashes into a fresh
:class:`~flightlog.ledger.CompactRange`. The ranges of one proof are disjoint, so a proof over a tree of
``n`` events reads and hashes each row at most once (a consistency proof's old root may take a second
pass over the first ``old_size`` rows): O(n) hashing, O(log n) memory. That is the price of keeping no
interior nodes; stored checkpoints' frontiers are not used because they only hold the subtrees of their
own size.

A proof is tied to a signed checkpoint whenever one exists at its tree size, so a third party holding
only the log's verifier key can check it (``flightlog verify-proof``). The Merkle math alone proves
nothing: anyone can build a one-leaf "tree" whose root is the hash of any event. So
:meth:`InclusionProof.check` and :meth:`ConsistencyProof.check`, given a keyring, refuse a proof whose
tree head carries no checkpoint (``allow_unsigned=True`` checks the math of an unauthenticated root; its
callers must say the root is NOT authenticated). A consistency proof needs only its *new* head signed:
the proof itself shows the old root is the root of the new tree's first ``old_size`` leaves.

Proof documents (JSON; hashes are lowercase hex, as everywhere in flightlog)::

    {"format": "flightlog-proof/1", "type": "inclusion", "session_id": "...", "seq": 5,
     "tree_size": 64, "leaf_hash": "<hex>", "root": "<hex>", "proof": ["<hex>", ...],
     "event": "<the stored RFC 8785 bytes, as text>", "checkpoint": "<signed note>" | null}

    {"format": "flightlog-proof/1", "type": "consistency", "session_id": "...",
     "old_size": 10, "new_size": 64, "old_root": "<hex>", "new_root": "<hex>", "proof": ["<hex>", ...],
     "old_checkpoint": "<signed note>" | null, "new_checkpoint": "<signed note>" | null}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ..errors import LedgerIntegrityError
from ..ledger import CompactRange, leaf_hash, node_hash, verify_consistency, verify_inclusion
from .checkpoints import Checkpoint, open_checkpoint
from .keys import Keyring
from .notes import NoteError, parse_note

if TYPE_CHECKING:
    from ..store.base import Store

__all__ = [
    "FORMAT",
    "ConsistencyProof",
    "InclusionProof",
    "load_proof",
    "prove_consistency",
    "prove_inclusion",
    "range_root",
]

FORMAT = "flightlog-proof/1"
"""The ``format`` field of every proof document."""


def range_root(store: Store, session_id: str, start: int, end: int) -> bytes:
    """RFC 9162 Merkle Tree Hash of the events ``[start, end)``, streamed (O(end - start) hashing).

    Raises:
        LedgerIntegrityError: a row in the range is missing.
    """
    tree = CompactRange()
    for row in store.read_events(session_id, start=start, stop=end):
        if row.seq != start + tree.size:
            break
        tree.append(leaf_hash(row.event_bytes))
    if tree.size != end - start:
        raise LedgerIntegrityError(
            session_id=session_id, seq=start + tree.size, reason="gap: a row needed for the proof is missing"
        )
    return tree.root()


def _split(n: int) -> int:
    """Largest power of two strictly below ``n`` (RFC 9162 §2.1.1)."""
    return 1 << ((n - 1).bit_length() - 1)


def _path(store: Store, sid: str, index: int, lo: int, hi: int) -> tuple[list[bytes], bytes, bytes]:
    """RFC 9162 §2.1.3.1 ``PATH(index, D[lo:hi])`` with ``MTH(D[lo:hi])`` and the stored leaf bytes."""
    if hi - lo == 1:
        row = next(iter(store.read_events(sid, start=lo, stop=hi)), None)
        if row is None or row.seq != lo:
            raise LedgerIntegrityError(session_id=sid, seq=lo, reason="gap: the event is missing")
        leaf = leaf_hash(row.event_bytes)
        return [], leaf, row.event_bytes
    k = lo + _split(hi - lo)
    if index < k:
        path, left, data = _path(store, sid, index, lo, k)
        right = range_root(store, sid, k, hi)
        return [*path, right], node_hash(left, right), data
    path, right, data = _path(store, sid, index, k, hi)
    left = range_root(store, sid, lo, k)
    return [*path, left], node_hash(left, right), data


def _subproof(store: Store, sid: str, m: int, lo: int, hi: int, complete: bool) -> tuple[list[bytes], bytes]:
    """RFC 9162 §2.1.4.1 ``SUBPROOF(m, D[lo:hi], complete)`` with ``MTH(D[lo:hi])``."""
    if m == hi - lo:
        root = range_root(store, sid, lo, hi)
        return ([] if complete else [root]), root
    k = _split(hi - lo)
    if m <= k:
        proof, left = _subproof(store, sid, m, lo, lo + k, complete)
        right = range_root(store, sid, lo + k, hi)
        return [*proof, right], node_hash(left, right)
    proof, right = _subproof(store, sid, m - k, lo + k, hi, False)
    left = range_root(store, sid, lo, lo + k)
    return [*proof, left], node_hash(left, right)


def _checkpoint_at(store: Store, sid: str, size: int) -> str | None:
    record = store.latest_checkpoint(sid, max_size=size)
    return record.body if record is not None and record.size == size else None


def _signed_root(note: str | None) -> Checkpoint | None:
    return None if note is None else Checkpoint.parse(parse_note(note).text)


def _check_against(sid: str, note: str | None, size: int, root: bytes) -> None:
    checkpoint = _signed_root(note)
    if checkpoint is not None and (checkpoint.size, checkpoint.root) != (size, root):
        raise LedgerIntegrityError(
            session_id=sid,
            seq=size - 1,
            reason=f"checkpoint_mismatch: the stored rows disagree with the signed checkpoint at size {size}",
        )


@dataclass(frozen=True)
class InclusionProof:
    """Event ``seq`` is leaf ``seq`` of the tree of ``tree_size`` events with root ``root``.

    Attributes:
        session_id: The session.
        seq: The event's seq (leaf index).
        tree_size: Events in the tree.
        leaf_hash: RFC 9162 leaf hash of the event, 32 bytes.
        root: The tree's root, 32 bytes.
        path: The audit path, leaf to root (RFC 9162 §2.1.3.1).
        event: The stored canonical bytes of the event, or None.
        checkpoint: The signed checkpoint at ``tree_size``, or None (the tree head is then unsigned).
    """

    session_id: str
    seq: int
    tree_size: int
    leaf_hash: bytes
    root: bytes
    path: tuple[bytes, ...]
    event: bytes | None = None
    checkpoint: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The proof document."""
        return {
            "format": FORMAT,
            "type": "inclusion",
            "session_id": self.session_id,
            "seq": self.seq,
            "tree_size": self.tree_size,
            "leaf_hash": self.leaf_hash.hex(),
            "root": self.root.hex(),
            "proof": [p.hex() for p in self.path],
            "event": None if self.event is None else self.event.decode("utf-8", "replace"),
            "checkpoint": self.checkpoint,
        }

    def unsigned_heads(self) -> list[int]:
        """Tree sizes whose root this proof relies on but no checkpoint signs (the root is then NOT
        authenticated, whatever the math says)."""
        return [self.tree_size] if self.checkpoint is None else []

    def check(self, keyring: Keyring | None = None, *, allow_unsigned: bool = False) -> list[str]:
        """Every reason this proof does not hold (empty when it does).

        Checks the audit path (RFC 9162 §2.1.3.2), the event bytes against the leaf hash, and the signed
        checkpoint (size, root, session in its origin; its signature when ``keyring`` is given). With a
        keyring, a tree head without a checkpoint is a problem unless ``allow_unsigned``; without one, only
        the math is checked and nothing is authenticated.
        """
        problems = []
        if self.event is not None and leaf_hash(self.event) != self.leaf_hash:
            problems.append("the event bytes do not hash to the leaf hash")
        if not verify_inclusion(self.leaf_hash, self.seq, self.tree_size, list(self.path), self.root):
            problems.append(f"the audit path does not lead from leaf {self.seq} to the root")
        problems += _check_note(self.session_id, self.checkpoint, self.tree_size, self.root, keyring)
        if keyring is not None and not allow_unsigned:
            problems += [_UNSIGNED.format(size=size) for size in self.unsigned_heads()]
        return problems


@dataclass(frozen=True)
class ConsistencyProof:
    """The tree of ``new_size`` events extends the tree of ``old_size`` (RFC 9162 §2.1.4).

    Attributes:
        session_id: The session.
        old_size: Events in the older tree (>= 1).
        new_size: Events in the newer tree.
        old_root: Older root, 32 bytes.
        new_root: Newer root, 32 bytes.
        path: The consistency proof (RFC 9162 §2.1.4.1).
        old_checkpoint: Signed checkpoint at ``old_size``, or None.
        new_checkpoint: Signed checkpoint at ``new_size``, or None.
    """

    session_id: str
    old_size: int
    new_size: int
    old_root: bytes
    new_root: bytes
    path: tuple[bytes, ...]
    old_checkpoint: str | None = None
    new_checkpoint: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The proof document."""
        return {
            "format": FORMAT,
            "type": "consistency",
            "session_id": self.session_id,
            "old_size": self.old_size,
            "new_size": self.new_size,
            "old_root": self.old_root.hex(),
            "new_root": self.new_root.hex(),
            "proof": [p.hex() for p in self.path],
            "old_checkpoint": self.old_checkpoint,
            "new_checkpoint": self.new_checkpoint,
        }

    def unsigned_heads(self) -> list[int]:
        """Tree sizes whose root this proof relies on but no checkpoint signs: the new head's, when it has
        no checkpoint (a holding proof authenticates the old root through a signed new root)."""
        return [self.new_size] if self.new_checkpoint is None else []

    def check(self, keyring: Keyring | None = None, *, allow_unsigned: bool = False) -> list[str]:
        """Every reason this proof does not hold (empty when it does): RFC 9162 §2.1.4.2, and the
        signed checkpoints at either size (signatures checked when ``keyring`` is given). With a keyring,
        a new head without a checkpoint is a problem unless ``allow_unsigned``."""
        problems = []
        if not verify_consistency(
            self.old_size, self.new_size, self.old_root, self.new_root, list(self.path)
        ):
            problems.append(f"the proof does not show size {self.new_size} extends size {self.old_size}")
        problems += _check_note(self.session_id, self.old_checkpoint, self.old_size, self.old_root, keyring)
        problems += _check_note(self.session_id, self.new_checkpoint, self.new_size, self.new_root, keyring)
        if keyring is not None and not allow_unsigned:
            problems += [_UNSIGNED.format(size=size) for size in self.unsigned_heads()]
        return problems


_UNSIGNED = (
    "the tree head at size {size} is unsigned: no checkpoint signed by a trusted key authenticates its root"
)


def _check_note(
    session_id: str, note: str | None, size: int, root: bytes, keyring: Keyring | None
) -> list[str]:
    if note is None:
        return []
    try:
        checkpoint = _signed_root(note) if keyring is None else open_checkpoint(note, keyring).checkpoint
    except NoteError as exc:
        return [f"checkpoint at size {size}: {exc.reason}"]
    assert checkpoint is not None
    problems = []
    if (checkpoint.size, checkpoint.root) != (size, root):
        problems.append(f"the checkpoint at size {size} signs another size or root")
    if not checkpoint.origin.endswith("/" + quote(session_id, safe="-._~:")):
        problems.append(f"the checkpoint at size {size} is for another session ({checkpoint.origin})")
    return problems


def prove_inclusion(
    store: Store, session_id: str, seq: int, *, tree_size: int | None = None, check: bool = True
) -> InclusionProof:
    """Prove event ``seq`` is in the session's tree head.

    Args:
        store: The store.
        session_id: The session (exact id).
        seq: The event.
        tree_size: The tree to prove against (``seq < tree_size <= events``). Default: the latest signed
            checkpoint when it covers ``seq``, else the whole session (unsigned head).
        check: Refuse a proof whose stored rows disagree with the signed checkpoint (default). False
            returns it anyway, for a verifier that checks it itself and reports the mismatch (the
            dashboard's in-browser check, :mod:`flightlog.web.proof_api`).

    Raises:
        SessionNotFound: no such session.
        ValueError: ``seq`` or ``tree_size`` out of range.
        LedgerIntegrityError: a row is missing, or (``check``) the rows disagree with the signed checkpoint.
    """
    events = store.get_session(session_id).events
    if not 0 <= seq < events:
        raise ValueError(f"seq {seq} is not in the session (0..{events - 1})")
    if tree_size is None:
        latest = store.latest_checkpoint(session_id)
        tree_size = latest.size if latest is not None and seq < latest.size <= events else events
    if not seq < tree_size <= events:
        raise ValueError(f"tree size {tree_size} must be in {seq + 1}..{events}")
    note = _checkpoint_at(store, session_id, tree_size)
    path, root, data = _path(store, session_id, seq, 0, tree_size)
    if check:
        _check_against(session_id, note, tree_size, root)
    return InclusionProof(session_id, seq, tree_size, leaf_hash(data), root, tuple(path), data, note)


def prove_consistency(
    store: Store, session_id: str, old_size: int, new_size: int | None = None
) -> ConsistencyProof:
    """Prove the session's tree at ``new_size`` extends its tree at ``old_size``.

    Args:
        store: The store.
        session_id: The session (exact id).
        old_size: The older tree size (>= 1; the empty tree needs no proof).
        new_size: The newer size (default: the latest signed checkpoint when >= ``old_size``, else every
            event).

    Raises:
        SessionNotFound: no such session.
        ValueError: sizes out of range.
        LedgerIntegrityError: a row is missing, or the rows disagree with a signed checkpoint.
    """
    events = store.get_session(session_id).events
    if new_size is None:
        latest = store.latest_checkpoint(session_id)
        new_size = latest.size if latest is not None and old_size <= latest.size <= events else events
    if not 1 <= old_size <= new_size <= events:
        raise ValueError(f"sizes must satisfy 1 <= from ({old_size}) <= to ({new_size}) <= {events}")
    path, new_root = (
        _subproof(store, session_id, old_size, 0, new_size, True) if old_size < new_size else ([], b"")
    )
    old_root = range_root(store, session_id, 0, old_size)
    new_root = new_root or old_root
    old_note, new_note = (
        _checkpoint_at(store, session_id, old_size),
        _checkpoint_at(store, session_id, new_size),
    )
    _check_against(session_id, old_note, old_size, old_root)
    _check_against(session_id, new_note, new_size, new_root)
    return ConsistencyProof(
        session_id, old_size, new_size, old_root, new_root, tuple(path), old_note, new_note
    )


def load_proof(doc: Any) -> InclusionProof | ConsistencyProof:
    """Parse a proof document (see the module docstring).

    Raises:
        ValueError: not a flightlog proof, a missing or mistyped field, or a hash that is not hex.
    """
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"not a {FORMAT} document")
    try:
        if doc["type"] == "inclusion":
            event = doc.get("event")
            return InclusionProof(
                _text(doc["session_id"]),
                _int(doc["seq"]),
                _int(doc["tree_size"]),
                bytes.fromhex(doc["leaf_hash"]),
                bytes.fromhex(doc["root"]),
                tuple(bytes.fromhex(p) for p in doc["proof"]),
                None if event is None else _text(event).encode("utf-8"),
                _note(doc.get("checkpoint")),
            )
        if doc["type"] == "consistency":
            return ConsistencyProof(
                _text(doc["session_id"]),
                _int(doc["old_size"]),
                _int(doc["new_size"]),
                bytes.fromhex(doc["old_root"]),
                bytes.fromhex(doc["new_root"]),
                tuple(bytes.fromhex(p) for p in doc["proof"]),
                _note(doc.get("old_checkpoint")),
                _note(doc.get("new_checkpoint")),
            )
    except (KeyError, TypeError) as exc:
        raise ValueError(f"malformed proof document: {exc}") from exc
    raise ValueError(f"unknown proof type {doc.get('type')!r}")


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{value!r} is not an integer")
    return value


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{value!r} is not a string")
    return value


def _note(value: Any) -> str | None:
    return None if value is None else _text(value)
