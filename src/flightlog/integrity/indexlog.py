"""The ledger-wide index log: every session checkpoint, appended to one RFC 9162 log with its own checkpoints.

A session's own checkpoints prove what *that* session holds; nothing in them says the session exists. The
index log does: every signed session checkpoint is appended to it, **in the same transaction** as the
checkpoint itself, and the index log gets its own signed checkpoint after each append. A session deleted
wholesale (rows, checkpoints, session row, even its retained head) leaves its checkpoints in the index,
whose signed root no longer matches if the attacker removes them too; ``flightlog audit --all`` lists
such sessions as missing.

**Leaf.** The session checkpoint's note *text* (C2SP ``tlog-checkpoint`` body: origin, size, base64 root,
``time`` and ``chain`` lines; UTF-8, each line ending in a newline; no signature lines), hashed as an
RFC 9162 §2.1.1 leaf ``sha256(0x00 || text)``. Chosen over a new ``(session id, size, root)`` encoding
because it is already canonical (C2SP fixes every byte), it names the ledger and the session (the
origin), the chain head and the signing time, and it is exactly the message the log key signed, so a
leaf is checked against a stored checkpoint by byte equality. Signatures stay out of the leaf: the index
checkpoint signs the whole set, and cosignatures added later must not change a leaf.

**Index checkpoint.** A C2SP checkpoint with origin ``flightlog.local/<ledger id>/_/index`` (no session
origin can be equal: session ids are percent-encoded, so a session origin never holds a ``/`` after the
ledger id), the size and RFC 9162 root over the leaves, and a ``time`` extension line (no ``chain``
line), signed by the log key. Stored in ``index_checkpoints`` with its compact-range frontier (a cache,
checked against the signed root). The latest one is retained outside the database
(:meth:`~flightlog.integrity.heads.HeadStore.save_index`, ``<head dir>/<ledger id>/index.json``) and may be
cosigned by a witness like any checkpoint.

**Concurrency.** Appends read the index head inside the writer's transaction (SQLite ``BEGIN IMMEDIATE``
serialises writers of one database), so writers of different sessions, even in different processes,
interleave leaves without a fork.

**Proof document** (JSON, hashes lowercase hex)::

    {"format": "flightlog-index-proof/1", "session_id": "...", "leaf_index": 7, "tree_size": 12,
     "leaf": "<session checkpoint note text>", "root": "<hex>", "proof": ["<hex>", ...],
     "index_checkpoint": "<signed note>", "session_checkpoint": "<signed note>"}

Source: RFC 9162 §2.1.1 (hashing), §2.1.3 (inclusion), §2.1.4 (consistency); C2SP tlog-checkpoint,
signed-note.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote, unquote

from ..errors import Divergence, FlightlogError, LedgerIntegrityError, StoreError
from ..ledger import CompactRange, leaf_hash, node_hash, verify_inclusion
from .checkpoints import (
    ORIGIN_HOST,
    Checkpoint,
    SignedCheckpoint,
    decode_frontier,
    encode_frontier,
    open_checkpoint,
    open_stored_checkpoints,
    origin_for,
)
from .heads import HeadStore, IndexedHead, WitnessedHead, copy_hint, extension_problem, prefix_root
from .keys import Keyring, load_keyring
from .notes import NoteError, parse_note
from .retirement import verdict

if TYPE_CHECKING:
    from ..store.base import IndexCheckpointRecord, Store
    from .notary import Notary
    from .retirement import RetirementCheck, StaleCopy

__all__ = [
    "INDEX_PROOF_FORMAT",
    "IndexInclusionProof",
    "IndexReport",
    "MissingSession",
    "append_to_index",
    "audit_index",
    "index_origin",
    "index_tree",
    "indexed_heads",
    "load_index_proof",
    "prove_index_consistency",
    "prove_index_inclusion",
    "session_of_origin",
]

log = logging.getLogger("flightlog.integrity.indexlog")

INDEX_PROOF_FORMAT = "flightlog-index-proof/1"
"""The ``format`` field of an index inclusion proof document."""

_INDEX_SEGMENT = "_/index"
_SAFE = "-._~:"
_INDEX_ID = "(index log)"


def index_origin(ledger_id: str) -> str:
    """``flightlog.local/<ledger id>/_/index``: the index log's checkpoint origin."""
    return f"{ORIGIN_HOST}/{ledger_id}/{_INDEX_SEGMENT}"


def session_of_origin(origin: str, ledger_id: str) -> str | None:
    """The session id a session checkpoint origin of ``ledger_id`` names, or None when it names none.

    Inverse of :func:`flightlog.integrity.checkpoints.origin_for`; a non-canonical encoding is refused (None).
    """
    prefix = f"{ORIGIN_HOST}/{ledger_id}/"
    if not origin.startswith(prefix):
        return None
    encoded = origin[len(prefix) :]
    if not encoded or "/" in encoded:
        return None
    try:
        session_id = unquote(encoded, errors="strict") if "%" in encoded else encoded
    except UnicodeDecodeError:
        return None
    return session_id if quote(session_id, safe=_SAFE) == encoded else None


# ─── appending (inside the checkpoint's transaction) ─────────────────────────────────────────


def index_tree(store: Store) -> CompactRange:
    """The index log's compact range: from the latest index checkpoint's frontier when it matches the
    stored leaves and its signed root, else rebuilt from every leaf (O(n), a damaged cache only)."""
    size = store.index_size()
    latest = store.latest_index_checkpoint()
    if latest is not None and latest.size == size and latest.frontier is not None:
        try:
            tree = decode_frontier(size, latest.frontier)
        except ValueError:
            tree = None
        if tree is not None and tree.root().hex() == latest.root:
            return tree
    tree = CompactRange()
    for leaf in store.read_index_leaves(stop=size):
        tree.append(leaf_hash(leaf.leaf))
    return tree


def append_to_index(
    store: Store,
    notary: Notary,
    ledger_id: str,
    session_id: str,
    checkpoint_id: int,
    signed: SignedCheckpoint,
) -> SignedCheckpoint | None:
    """Append a session checkpoint to the index log and sign the index's new checkpoint.

    Runs inside the caller's transaction (the one storing the session checkpoint): both commit or
    neither. The index head is retained outside the database after the outermost commit.

    Args:
        store: The store (a backend without an index log is skipped: returns None).
        notary: Signs the index checkpoint with the log key.
        ledger_id: The database's ledger id.
        session_id: The session whose checkpoint this is.
        checkpoint_id: Its id in the store.
        signed: The session checkpoint just stored.

    Returns:
        The index log's new signed checkpoint, or None when the store keeps no index log.

    Raises:
        AppendConflict: another writer appended the same index position (cannot happen under the
            store's write lock; the transaction then rolls back).
        LedgerIntegrityError: the index log does not extend its retained head (``rollback``: the head
            covers more leaves; ``fork``: its root differs at its size): another copy of this database
            went on, or this one was restored from an older copy. The append, and so the whole write, is
            refused and the retained head kept as evidence; the reason starts with "index log leaf N".
        NoteError: the retained index head file is unreadable.
    """
    if not store.index_supported():
        return None
    store.lock_index()  # before reading the head: concurrent appenders queue rather than conflict
    tree = index_tree(store)
    proved = _extends_retained(store, notary.heads, ledger_id, session_id, tree)
    proved[tree.size] = tree.root()
    leaf = parse_note(signed.note).text.encode("utf-8")
    store.append_index_leaf(tree.size, session_id, checkpoint_id, leaf)
    tree.append(leaf_hash(leaf))
    head = notary.sign(index_origin(ledger_id), tree.size, tree.root(), None)
    store.record_index_checkpoint(tree.size, head.root.hex(), head.note, encode_frontier(tree))
    store.call_after_commit(lambda: _retain(notary.heads, ledger_id, head, proved))
    return head


def _extends_retained(
    store: Store, heads: HeadStore, ledger_id: str, session_id: str, tree: CompactRange
) -> dict[int, bytes]:
    """Check that the stored index log (``tree``) extends its retained head; the roots checked, by size."""
    note = heads.load_index(ledger_id)
    if note is None:
        return {}
    cp = Checkpoint.parse(parse_note(note).text)
    frontier = None
    if cp.size < tree.size:
        record = store.latest_index_checkpoint(max_size=cp.size)
        if record is not None and record.size == cp.size and record.frontier is not None:
            try:
                frontier = decode_frontier(cp.size, record.frontier)
            except ValueError:
                frontier = None
    root = prefix_root(tree, cp.size, frontier, _store_leaves(store).hashes)
    problem = extension_problem("the retained index head", "leaves", cp.size, cp.root, tree.size, root)
    if problem is not None:
        reason = f"index log leaf {problem.seq}: {problem.reason}: {problem.detail}"
        raise LedgerIntegrityError(
            session_id=session_id,
            reason=f"{reason}; {copy_hint([problem], index=True)}",
            divergences=[problem],
        )
    return {cp.size: cp.root}


def _retain(heads: HeadStore, ledger_id: str, head: SignedCheckpoint, proved: dict[int, bytes]) -> None:
    try:
        heads.save_index(ledger_id, head, proved)
    except (OSError, FlightlogError) as exc:  # one line naming the file and the OS error; goes on
        log.warning(
            "could not retain the index head of ledger %s at size %d (it lags until a later commit): %s",
            ledger_id,
            head.size,
            str(exc).replace("\n", " "),
        )


# ─── streaming proofs over the stored leaves ─────────────────────────────────────────────────


def _split(n: int) -> int:
    """Largest power of two strictly below ``n`` (RFC 9162 §2.1.1)."""
    return 1 << ((n - 1).bit_length() - 1)


@dataclass(frozen=True)
class _Leaves:
    """RFC 9162 proof generation over leaf hashes streamed from storage (O(n) hashing, O(log n) memory)."""

    hashes: Callable[[int, int], Iterator[bytes]]

    def range_root(self, start: int, end: int) -> bytes:
        tree = CompactRange()
        for h in self.hashes(start, end):
            tree.append(h)
        if tree.size != end - start:
            raise LedgerIntegrityError(
                session_id=_INDEX_ID, seq=start + tree.size, reason="gap: an index leaf is missing"
            )
        return tree.root()

    def path(self, index: int, lo: int, hi: int) -> tuple[list[bytes], bytes]:
        """RFC 9162 §2.1.3.1 ``PATH(index, D[lo:hi])`` and ``MTH(D[lo:hi])``."""
        if hi - lo == 1:
            return [], self.range_root(lo, hi)
        k = lo + _split(hi - lo)
        if index < k:
            proof, left = self.path(index, lo, k)
            right = self.range_root(k, hi)
            return [*proof, right], node_hash(left, right)
        proof, right = self.path(index, k, hi)
        left = self.range_root(lo, k)
        return [*proof, left], node_hash(left, right)

    def subproof(self, m: int, lo: int, hi: int, complete: bool) -> tuple[list[bytes], bytes]:
        """RFC 9162 §2.1.4.1 ``SUBPROOF(m, D[lo:hi], complete)`` and ``MTH(D[lo:hi])``."""
        if m == hi - lo:
            root = self.range_root(lo, hi)
            return ([] if complete else [root]), root
        k = _split(hi - lo)
        if m <= k:
            proof, left = self.subproof(m, lo, lo + k, complete)
            right = self.range_root(lo + k, hi)
            return [*proof, right], node_hash(left, right)
        proof, right = self.subproof(m - k, lo + k, hi, False)
        left = self.range_root(lo, lo + k)
        return [*proof, left], node_hash(left, right)


def _store_leaves(store: Store) -> _Leaves:
    def hashes(start: int, stop: int) -> Iterator[bytes]:
        for leaf in store.read_index_leaves(start=start, stop=stop):
            yield leaf_hash(leaf.leaf)

    return _Leaves(hashes)


def prove_index_consistency(
    store: Store, old_size: int, new_size: int | None = None
) -> tuple[list[bytes], bytes, bytes]:
    """RFC 9162 §2.1.4 consistency proof between two sizes of the index log.

    Args:
        store: The store.
        old_size: The older size (0 gives an empty proof).
        new_size: The newer size (default: every leaf).

    Returns:
        ``(proof, old_root, new_root)``.

    Raises:
        ValueError: sizes out of range.
        LedgerIntegrityError: a leaf is missing.
    """
    leaves = _store_leaves(store)
    size = store.index_size()
    new_size = size if new_size is None else new_size
    if not 0 <= old_size <= new_size <= size:
        raise ValueError(f"index sizes must satisfy 0 <= {old_size} <= {new_size} <= {size}")
    new_root = leaves.range_root(0, new_size)
    if old_size in (0, new_size):
        return [], leaves.range_root(0, old_size), new_root
    proof, _ = leaves.subproof(old_size, 0, new_size, True)
    return proof, leaves.range_root(0, old_size), new_root


@dataclass(frozen=True)
class IndexInclusionProof:
    """A session checkpoint is leaf ``leaf_index`` of the index log of ``tree_size`` leaves.

    Attributes:
        session_id: The session.
        leaf_index: The leaf's index.
        tree_size: Leaves in the index tree proved against.
        leaf: The leaf: the session checkpoint's note text.
        root: The index tree's root, 32 bytes.
        path: The audit path, leaf to root (RFC 9162 §2.1.3.1).
        index_checkpoint: The signed index checkpoint at ``tree_size``, or None.
        session_checkpoint: The signed session checkpoint whose text is the leaf, or None.
    """

    session_id: str
    leaf_index: int
    tree_size: int
    leaf: str
    root: bytes
    path: tuple[bytes, ...]
    index_checkpoint: str | None = None
    session_checkpoint: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The proof document (module docstring)."""
        return {
            "format": INDEX_PROOF_FORMAT,
            "session_id": self.session_id,
            "leaf_index": self.leaf_index,
            "tree_size": self.tree_size,
            "leaf": self.leaf,
            "root": self.root.hex(),
            "proof": [p.hex() for p in self.path],
            "index_checkpoint": self.index_checkpoint,
            "session_checkpoint": self.session_checkpoint,
        }

    def check(self, keyring: Keyring | None = None) -> list[str]:
        """Every reason this proof does not hold (empty when it does).

        Checks the audit path (RFC 9162 §2.1.3.2); that the leaf is the session checkpoint's text and
        names this session; and the index checkpoint (size, root, the index origin of the same ledger;
        both signatures when ``keyring`` is given).
        """
        problems: list[str] = []
        leaf = self.leaf.encode("utf-8")
        if not verify_inclusion(leaf_hash(leaf), self.leaf_index, self.tree_size, list(self.path), self.root):
            problems.append(f"the audit path does not lead from leaf {self.leaf_index} to the index root")
        try:
            cp = Checkpoint.parse(self.leaf)
        except NoteError as exc:
            return [*problems, f"the leaf is not a checkpoint: {exc.reason}"]
        ledger_id = cp.origin.split("/")[1] if cp.origin.count("/") >= 2 else ""
        if session_of_origin(cp.origin, ledger_id) != self.session_id:
            problems.append(f"the leaf is a checkpoint of {cp.origin}, not of session {self.session_id}")
        problems += self._check_session_note(keyring)
        problems += self._check_index_note(keyring, ledger_id)
        return problems

    def _check_session_note(self, keyring: Keyring | None) -> list[str]:
        if self.session_checkpoint is None:
            return []
        try:
            text = parse_note(self.session_checkpoint).text
            if keyring is not None:
                open_checkpoint(self.session_checkpoint, keyring)
        except NoteError as exc:
            return [f"session checkpoint: {exc.reason}"]
        return [] if text == self.leaf else ["the leaf is not the session checkpoint's text"]

    def _check_index_note(self, keyring: Keyring | None, ledger_id: str) -> list[str]:
        if self.index_checkpoint is None:
            return []
        origin = index_origin(ledger_id)
        try:
            if keyring is not None:
                cp = open_checkpoint(self.index_checkpoint, keyring, origin=origin).checkpoint
            else:
                cp = Checkpoint.parse(parse_note(self.index_checkpoint).text)
        except NoteError as exc:
            return [f"index checkpoint: {exc.reason}"]
        problems = []
        if cp.origin != origin:
            problems.append(f"the index checkpoint is for {cp.origin}, not {origin}")
        if (cp.size, cp.root) != (self.tree_size, self.root):
            problems.append(f"the index checkpoint signs another size or root than {self.tree_size}")
        return problems


def prove_index_inclusion(store: Store, session_id: str, *, size: int | None = None) -> IndexInclusionProof:
    """Prove a session checkpoint is in the index log's latest signed head.

    Args:
        store: The store.
        session_id: The session (exact id).
        size: The session checkpoint's size (default: the largest indexed one).

    Raises:
        ValueError: the session has no indexed checkpoint (of that size).
        LedgerIntegrityError: an index leaf is missing, or the leaves disagree with the signed index head.
    """
    candidates = [
        (Checkpoint.parse(leaf.leaf.decode("utf-8")).size, leaf) for leaf in store.index_leaves_of(session_id)
    ]
    chosen = [c for c in candidates if size is None or c[0] == size]
    if not chosen:
        what = "" if size is None else f" of size {size}"
        raise ValueError(f"session {session_id} has no indexed checkpoint{what}")
    _, leaf = max(chosen, key=lambda c: (c[0], c[1].idx))
    head = store.latest_index_checkpoint()
    if head is None or head.size <= leaf.idx:
        raise LedgerIntegrityError(
            session_id=_INDEX_ID, seq=leaf.idx, reason="no signed index head covers the leaf"
        )
    path, root = _store_leaves(store).path(leaf.idx, 0, head.size)
    if root.hex() != head.root:
        raise LedgerIntegrityError(
            session_id=_INDEX_ID,
            seq=head.size - 1,
            reason=f"checkpoint_mismatch: the index leaves disagree with the signed index head at size {head.size}",
        )
    text = leaf.leaf.decode("utf-8")
    note = next((c.body for c in store.checkpoints(session_id) if _text(c.body) == text), None)
    return IndexInclusionProof(session_id, leaf.idx, head.size, text, root, tuple(path), head.body, note)


def _text(note: str) -> str | None:
    try:
        return parse_note(note).text
    except NoteError:
        return None


def load_index_proof(doc: Any) -> IndexInclusionProof:
    """Parse an index proof document (module docstring).

    Raises:
        ValueError: not an index proof, a missing or mistyped field, or a hash that is not hex.
    """
    if not isinstance(doc, dict) or doc.get("format") != INDEX_PROOF_FORMAT:
        raise ValueError(f"not a {INDEX_PROOF_FORMAT} document")
    try:
        fields = (doc["session_id"], doc["leaf"])
        numbers = (doc["leaf_index"], doc["tree_size"])
        notes = (doc.get("index_checkpoint"), doc.get("session_checkpoint"))
        if not all(isinstance(f, str) for f in fields) or not all(
            isinstance(n, int) and not isinstance(n, bool) for n in numbers
        ):
            raise TypeError("session_id/leaf must be strings, leaf_index/tree_size integers")
        if not all(n is None or isinstance(n, str) for n in notes):
            raise TypeError("checkpoints must be strings or null")
        return IndexInclusionProof(
            fields[0],
            numbers[0],
            numbers[1],
            fields[1],
            bytes.fromhex(doc["root"]),
            tuple(bytes.fromhex(p) for p in doc["proof"]),
            notes[0],
            notes[1],
        )
    except (KeyError, TypeError) as exc:
        raise ValueError(f"malformed index proof document: {exc}") from exc


# ─── auditing the index log ──────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class MissingSession:
    """A session whose checkpoint is in the signed index log but which the database no longer holds.

    Attributes:
        session_id: The session.
        leaf: The index leaf of its largest indexed checkpoint.
        size: That checkpoint's size (events the session had at least).
    """

    session_id: str
    leaf: int
    size: int


@dataclass
class IndexReport:
    """Outcome of :func:`audit_index`.

    Attributes:
        ledger_id: The database's ledger id (None when it has none).
        leaves: Leaves read.
        root: RFC 9162 root over them, hex.
        checkpoints: Signed index checkpoints that verified and match the leaves.
        anchored: Leaves covered by the largest such checkpoint.
        retained: Size of the retained index head, or None.
        witnessed: Largest index size a trusted witness cosigned, or None.
        witnessed_by: That witness's key name.
        divergences: Every problem, by leaf index (reasons as for sessions, plus ``bad_leaf`` and
            ``index_mismatch``: a leaf names a checkpoint the database no longer holds).
        missing: Sessions the index knows and the database does not.
        notes: What was not checked and why.
        retired: How the store was retired (:mod:`flightlog.integrity.retirement`), None for a live store.
    """

    ledger_id: str | None
    leaves: int = 0
    root: str = ""
    checkpoints: int = 0
    anchored: int = 0
    retained: int | None = None
    witnessed: int | None = None
    witnessed_by: str | None = None
    divergences: list[Divergence] = field(default_factory=list)
    missing: list[MissingSession] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    retired: str | None = None
    latest: SignedCheckpoint | None = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        """True when nothing diverges and no indexed session is missing."""
        return not self.divergences and not self.missing

    def summary(self) -> str:
        """One line: leaves, signed coverage, retained and witnessed heads."""
        parts = [
            f"{self.leaves} {'leaf' if self.leaves == 1 else 'leaves'}",
            f"signed through {self.anchored}",
        ]
        parts.append(
            "no retained head" if self.retained is None else f"retained head at size {self.retained}"
        )
        if self.witnessed is not None:
            parts.append(f"witnessed up to size {self.witnessed} by {self.witnessed_by}")
        if self.missing:
            parts.append(f"{len(self.missing)} indexed session(s) missing from the database")
        if self.retired is not None:
            parts.append(f"read-only: {self.retired}")
        return "; ".join(parts + self.notes)

    def verdict(self) -> Literal["ok", "stale_copy", "diverges"]:
        """``ok``, ``stale_copy`` (every divergence is ``stale_copy``: a retired store's index log that
        went on in the live store) or ``diverges`` (:func:`flightlog.integrity.retirement.verdict`); an
        indexed session missing from the database makes it ``diverges``."""
        reasons = [d.reason for d in self.divergences] + ["missing"] * bool(self.missing)
        return verdict(self.ok, reasons)

    def to_json(self) -> dict[str, Any]:
        """Stable JSON fields (the ``state: "index"`` row of ``audit --all --json``)."""
        return {
            "session_id": None,
            "state": "index",
            "ok": self.ok,
            "verdict": self.verdict(),
            "ledger_id": self.ledger_id,
            "leaves": self.leaves,
            "root": self.root,
            "checkpoints": self.checkpoints,
            "anchored": self.anchored,
            "retained": self.retained,
            "witnessed": self.witnessed,
            "witnessed_by": self.witnessed_by,
            "retired": self.retired,
            "missing": [{"session_id": m.session_id, "leaf": m.leaf, "size": m.size} for m in self.missing],
            "notes": list(self.notes),
            "divergences": [{"seq": d.seq, "reason": d.reason, "detail": d.detail} for d in self.divergences],
        }


@dataclass
class _LeafCheck:
    """Per-leaf checks against the database, caching each session's stored checkpoint texts (digests).

    With ``sessions`` False only what makes the leaves trustworthy as a whole is checked (each leaf is a
    checkpoint of the session its ``session_id`` column names, so :func:`indexed_heads` may look leaves up
    by that column): the per-session comparisons are left to the session's own audit."""

    store: Store
    ledger_id: str
    present: set[str]
    sessions: bool = True
    stored: dict[str, set[bytes]] = field(default_factory=dict)
    missing: dict[str, MissingSession] = field(default_factory=dict)

    def check(self, idx: int, column_sid: str, leaf: bytes) -> Divergence | None:
        try:
            cp = Checkpoint.parse(leaf.decode("utf-8"))
        except (NoteError, UnicodeDecodeError) as exc:
            return Divergence(idx, "bad_leaf", f"leaf {idx} is not a checkpoint: {exc}")
        sid = session_of_origin(cp.origin, self.ledger_id)
        if sid is None or sid != column_sid:
            return Divergence(idx, "bad_leaf", f"leaf {idx} names {cp.origin}, stored for {column_sid!r}")
        if not self.sessions:
            return None
        if sid not in self.present:
            known = self.missing.get(sid)
            if known is None or cp.size >= known.size:
                self.missing[sid] = MissingSession(sid, idx, cp.size)
            return None
        if hashlib.sha256(leaf).digest() not in self._stored(sid):
            return Divergence(
                idx,
                "index_mismatch",
                f"the index holds a checkpoint of {sid} at size {cp.size} that the database does not",
            )
        return None

    def _stored(self, sid: str) -> set[bytes]:
        if sid not in self.stored:
            texts = (_text(c.body) for c in self.store.checkpoints(sid))
            self.stored[sid] = {hashlib.sha256(t.encode("utf-8")).digest() for t in texts if t is not None}
        return self.stored[sid]


def audit_index(
    store: Store,
    *,
    keyring: Keyring | None = None,
    heads: HeadStore | None = None,
    witnessed: Sequence[WitnessedHead] = (),
    retired: RetirementCheck | Literal["load"] | None = "load",
    sessions: bool = True,
) -> IndexReport:
    """Verify the index log: signed index checkpoints, leaves against them, retained and witnessed heads,
    and every leaf against the database (its session present, its checkpoint still stored).

    Streams the leaves once (O(n) hashing, O(log n) memory for the tree, one digest per indexed
    checkpoint for the comparison). The retained head is read before the stored index checkpoints, so a
    writer appending meanwhile can only make the database look newer than the retained head, never older.

    Args:
        store: The store.
        keyring: Trusted log keys (default :func:`~flightlog.integrity.keys.load_keyring`).
        heads: Retained heads, or None to skip that check.
        witnessed: Verified witness-cosigned index heads (:func:`flightlog.integrity.witness_client.witnessed_heads`).
        retired: The store's retirement (loaded when ``"load"``): on a retired store, index heads beyond
            the leaves it held when retired are ``stale_copy``, not ``rollback``/``stale_head``.
        sessions: Also compare every leaf with its session in the database (missing sessions,
            ``index_mismatch``) and verify every stored index checkpoint. False checks the index log
            alone, for consulting it about one session (:func:`indexed_heads`; the session's own audit
            then compares its leaves with its rows): only the latest stored index checkpoint is verified
            (its signed root authenticates every leaf below it; one signature instead of one per leaf).

    Source: RFC 9162 §2.1.1; C2SP tlog-checkpoint, signed-note, tlog-cosignature.
    """
    keyring = load_keyring() if keyring is None else keyring
    try:
        ledger_id: str | None = store.ledger_id()
    except (StoreError, NotImplementedError):
        ledger_id = None
    report = IndexReport(ledger_id)
    if ledger_id is None or not store.index_supported():
        report.notes.append("this database keeps no index log")
        return report
    from .retirement import StaleCopy, load_retirement  # local: kept out of the import-time graph

    if retired == "load":
        retired = load_retirement(store, keyring)
    stale: StaleCopy | None = None
    if retired is not None:
        report.retired = retired.describe()
        if retired.record is None:
            report.divergences.append(Divergence(0, "bad_retirement", retired.problem or "unusable record"))
        else:
            stale = StaleCopy(retired.record.index, retired.record.describe())
    origin = index_origin(ledger_id)
    retained = _open_retained_index(heads, ledger_id, keyring, origin, report.divergences)
    records: Iterable[IndexCheckpointRecord]
    if sessions:
        records = store.index_checkpoints()
    else:
        latest = store.latest_index_checkpoint()
        records = [latest] if latest is not None else []
    signed = open_stored_checkpoints(records, keyring, origin, report.divergences, label="index checkpoint")
    wanted = {s.size for s in signed} | {h.size for h in witnessed} | ({retained.size} if retained else set())
    present = {s.session_id for s in store.list_sessions()} if sessions else set()
    roots = _fold_leaves(store, report, wanted, _LeafCheck(store, ledger_id, present, sessions))
    for cp in sorted(signed, key=lambda c: c.size):
        _match_index_checkpoint(report, cp, roots)
    if stale is not None and not stale.pin.matches(report.leaves, report.root):
        report.divergences.append(
            Divergence(
                min(report.leaves, stale.pin.size),
                "retired_mismatch",
                f"the signed record of this database's retirement ({stale.retired_as}) pins {stale.pin.size} "
                f"index leaves, the database holds {report.leaves}: changed after it",
            )
        )
    if retained is not None:
        report.retained = retained.size
        _match_index_head(report, retained, roots, "the retained index head", stale)
    for head in sorted(witnessed, key=lambda h: h.size):
        if report.witnessed is None or head.size >= report.witnessed:
            report.witnessed, report.witnessed_by = head.size, head.witness
        what = f"the index head witness {head.witness} cosigned"
        _match_index_head(report, head.checkpoint, roots, what, stale)
    report.divergences.sort(key=lambda d: d.seq)
    return report


def indexed_heads(store: Store, session_id: str, index: IndexReport) -> list[IndexedHead]:
    """The session's checkpoints the index log holds under its largest verified signed index checkpoint.

    Only leaves below ``index.anchored`` count: the signed index root covers them, so an attacker can
    neither add nor hide one without an index divergence (``gap``, ``checkpoint_mismatch``, ``bad_leaf``,
    ``truncated``, ``rollback``) in ``index``, which the caller must not ignore. Leaves are looked up by
    their ``session_id`` column, which ``audit_index`` checked against each leaf's origin.

    Args:
        store: The store.
        session_id: The session (exact id).
        index: :func:`audit_index` of the same store (``sessions=False`` is enough).

    Returns:
        ``IndexedHead`` per leaf, ascending leaf index (empty without a ledger id or index log).
    """
    if index.ledger_id is None or not index.anchored or not store.index_supported():
        return []
    origin = origin_for(index.ledger_id, session_id)
    found = []
    for leaf in store.index_leaves_of(session_id):
        if leaf.idx >= index.anchored:
            continue
        try:
            cp = Checkpoint.parse(leaf.leaf.decode("utf-8"))
        except (NoteError, UnicodeDecodeError):
            continue  # audit_index reports it (bad_leaf)
        if cp.origin == origin:
            found.append(IndexedHead(cp, leaf.idx))
    return found


def _open_retained_index(
    heads: HeadStore | None, ledger_id: str, keyring: Keyring, origin: str, bad: list[Divergence]
) -> SignedCheckpoint | None:
    if heads is None:
        return None
    try:
        note = heads.load_index(ledger_id)
        return None if note is None else open_checkpoint(note, keyring, origin=origin)
    except (NoteError, StoreError) as exc:
        bad.append(Divergence(0, "bad_checkpoint", f"retained index head: {exc}"))
        return None


def _fold_leaves(store: Store, report: IndexReport, wanted: set[int], check: _LeafCheck) -> dict[int, bytes]:
    tree = CompactRange()
    roots = {0: tree.root()} if 0 in wanted else {}
    expected = 0
    for leaf in store.read_index_leaves():
        if leaf.idx != expected:
            report.divergences.append(
                Divergence(expected, "gap", f"index leaves {expected}..{leaf.idx - 1} missing")
            )
        problem = check.check(leaf.idx, leaf.session_id, leaf.leaf)
        if problem is not None:
            report.divergences.append(problem)
        tree.append(leaf_hash(leaf.leaf))
        if tree.size in wanted:
            roots[tree.size] = tree.root()
        expected = leaf.idx + 1
    report.leaves, report.root = tree.size, tree.root().hex()
    report.missing = sorted(check.missing.values(), key=lambda m: m.leaf)
    return roots


def _match_index_checkpoint(report: IndexReport, cp: SignedCheckpoint, roots: dict[int, bytes]) -> None:
    if cp.size > report.leaves:
        report.divergences.append(
            Divergence(
                report.leaves,
                "truncated",
                f"a signed index checkpoint covers {cp.size} leaves, the database holds {report.leaves}",
            )
        )
    elif roots.get(cp.size) != cp.root:
        report.divergences.append(
            Divergence(
                cp.size - 1,
                "checkpoint_mismatch",
                f"signed index root at size {cp.size} differs from the leaves",
            )
        )
    else:
        report.checkpoints += 1
        if cp.size >= report.anchored:
            report.anchored, report.latest = cp.size, cp


def _match_index_head(
    report: IndexReport,
    head: SignedCheckpoint,
    roots: dict[int, bytes],
    what: str,
    stale: StaleCopy | None = None,
) -> None:
    size = head.size
    if stale is not None and not stale.explains(size, report.leaves, report.root):
        stale = None
    if size > report.leaves:
        report.divergences.append(
            Divergence(report.leaves, "stale_copy", stale.detail(what, size, report.leaves, "leaves", False))
            if stale is not None
            else Divergence(
                report.leaves,
                "rollback",
                f"{what} covers {size} leaves, the database holds {report.leaves}: rolled back or truncated",
            )
        )
    elif size and roots.get(size) != head.root:
        report.divergences.append(
            Divergence(size - 1, "fork", f"the index leaves disagree with {what} at size {size}")
        )
    elif report.anchored < size:
        report.divergences.append(
            Divergence(report.anchored, "stale_copy", stale.detail(what, size, report.leaves, "leaves", True))
            if stale is not None
            else Divergence(
                report.anchored,
                "stale_head",
                f"the latest signed index checkpoint covers {report.anchored} leaves, older than {what} at size {size}",
            )
        )
