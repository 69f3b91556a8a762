"""``db accept-restore``: keep THIS database as the truth after it was restored from, or diverged from, a copy.

The retained heads (:mod:`flightlog.integrity.heads`) live outside the database, one folder per ledger id,
and never move backwards or onto a fork. A copy of the database made outside ``flightlog db copy``
(``sqlite3 .backup``, ``cp`` with its ``-wal``) keeps the ledger id, so whichever copy writes moves the
heads both share, and the other then reads as rolled back (``rollback``) or forked (``fork``): every
session of it, when the index log is the one behind, is refused. That refusal is right: nothing in the
file says whether it lost events or a copy went on. Only its owner knows. This is the deliberate way out,
on record:

1. Refuse a retired store (``db copy`` moved its ledger: copy from the live one).
2. Verify the database without the retained heads: every session (chain, tree, signed checkpoints,
   seal, its checkpoints in the index log, artifacts) and the index log with its own signed checkpoints.
   Anything diverging there is refused. **Limit**: the retained heads keep only each session's latest
   (size, root), so this cannot tell an older state from a history rewritten by someone who can write the
   file and also deleted its checkpoints and index leaves (the chain recomputed): such a database verifies
   without its heads, and accepting it re-anchors the rewrite (found by this session's attack pass). Run it
   only for a copy you restored or wrote yourself; a witness's cosigned head is never replaced.
3. Find the retained heads the database does not extend: a session head larger than the session or
   with another root at its size, a head of a session the database does not hold, the index head likewise.
   None: nothing to accept, nothing written.
4. Move those head files aside into ``<head dir>/<ledger id>/replaced-<ms>/`` (renamed, never deleted:
   the other copy's evidence stays readable).
5. Record the decision in the ledger: a ``Custom`` event ``heads_replaced`` appended to the ledger-wide
   **restore log**, the session ``flightlog:restores`` (hash-chained; signed, indexed and witnessable like
   any session; never sealed), payload ``{reason, operator, replaced_at_ms, set_aside, heads: [{session_id,
   retained_size, retained_root, size, root}], index: {...} | null}`` (``size``/``root``: what the database
   holds; ``root`` at the retained size, null when it holds fewer). On failure the files are moved back.
6. Retain each affected session's latest verified checkpoint; the restore log's own commit retains the
   index head. Sessions whose heads agreed are untouched.

A head a witness cosigned is not replaced (a witness never goes back): ``verify`` goes on reporting it.

Source: ARCHITECTURE.md invariants 5 (refuse, don't guess) and 10 (one live store per ledger); the erasure
log (:mod:`flightlog.integrity.erasure`) for the ledger-wide log session.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import Divergence, FlightlogError, LedgerIntegrityError, SessionNotFound, StoreError
from ..integrity.audit import Auditor
from ..integrity.checkpoints import Checkpoint, open_checkpoint, origin_for
from ..integrity.heads import HeadStore, prefix_root
from ..integrity.indexlog import index_tree
from ..integrity.notes import parse_note
from ..integrity.retirement import load_retirement
from ..ledger import CompactRange, leaf_hash
from ..recorder import Recorder

if TYPE_CHECKING:
    from ..integrity.notary import Notary
    from ..store.base import Store

__all__ = [
    "RESTORED_KIND",
    "RESTORE_LOG",
    "ReplacedHead",
    "RestoreRecord",
    "accept_restore",
    "heads_not_extended",
]

RESTORE_LOG = "flightlog:restores"
"""Session id of the ledger-wide restore log."""

RESTORED_KIND = "heads_replaced"
"""``Custom.custom_kind`` of a restore decision."""


@dataclass(frozen=True)
class ReplacedHead:
    """A retained head the database does not extend, set aside.

    Attributes:
        session_id: The session, or None for the index log's head.
        retained_size: Events (leaves) the head covers.
        retained_root: Its root, hex.
        size: Events (leaves) the database holds (0 when it has no such session).
        root: The database's root at ``retained_size``, hex; None when it holds fewer.
        path: The head file (before it was moved).
    """

    session_id: str | None
    retained_size: int
    retained_root: str
    size: int
    root: str | None
    path: Path

    def to_json(self) -> dict[str, Any]:
        """The payload entry (module docstring)."""
        return {
            "session_id": self.session_id,
            "retained_size": self.retained_size,
            "retained_root": self.retained_root,
            "size": self.size,
            "root": self.root,
        }


@dataclass
class RestoreRecord:
    """What :func:`accept_restore` did.

    Attributes:
        replaced: The heads set aside (empty: nothing to accept, nothing written).
        set_aside: The folder they were moved to (None when nothing was).
        log_seq: Seq of the ``heads_replaced`` event in :data:`RESTORE_LOG` (None when nothing was written).
        reanchored: Sessions whose head is now the database's latest checkpoint.
    """

    replaced: list[ReplacedHead] = field(default_factory=list)
    set_aside: Path | None = None
    log_seq: int | None = None
    reanchored: list[str] = field(default_factory=list)


def accept_restore(store: Store, *, reason: str, operator: str, notary: Notary) -> RestoreRecord:
    """Re-anchor the retained heads on this database, recording the decision (module docstring).

    Args:
        store: A writable store.
        reason: Why (recorded in the ledger; must not be empty).
        operator: Who decided (the operator-name rule of :func:`flightlog.narration.operator_problem`).
        notary: Signs the restore log and owns the retained heads it moves.

    Returns:
        The record; ``replaced`` empty when every retained head already agrees (nothing written).

    Raises:
        ValueError: an empty reason or an invalid operator name.
        StoreError: the store is retired (its ledger lives elsewhere); a head could not be re-anchored.
        LedgerIntegrityError: the database diverges apart from its retained heads (names the session and
            seq); nothing is moved or written.
    """
    from ..narration import operator_problem

    if not reason.strip():
        raise ValueError("a reason is required: it is recorded in the ledger with the decision")
    problem = operator_problem(operator)
    if problem is not None:
        raise ValueError(f"invalid operator name: {problem}")
    retired = load_retirement(store, notary.keyring)
    if retired is not None:
        raise StoreError(
            f"this store is retired ({retired.describe()}): its ledger lives in the other store; nothing to "
            "accept here"
        )
    ledger_id = store.ledger_id()
    trees = _verified_trees(store, Auditor(notary.keyring, None, [], online=False))
    replaced = list(_disagreeing(store, notary.heads, ledger_id, trees))
    record = RestoreRecord(replaced)
    if not replaced:
        return record
    record.set_aside = notary.heads.index_path(ledger_id).parent / f"replaced-{time.time_ns() // 1_000_000}"
    moved = _move_aside(replaced, record.set_aside)
    try:
        record.log_seq = _ledger(store, notary, reason, operator, record)
    except BaseException:
        for source, target in moved:
            os.replace(target, source)
        raise
    record.reanchored = _reanchor(store, notary, ledger_id, replaced)
    return record


def heads_not_extended(store: Store, heads: HeadStore) -> list[ReplacedHead]:
    """The retained heads of ``store``'s ledger that it does not extend (behind them, or forked), read only:
    what :func:`accept_restore` would set aside, found without its full verification (each head's size and
    root are read from its checkpoint note unverified, and each session's tree is folded from its stored
    rows). For a warning after ``db repair --discard-wal`` dropped commits, whose chains the repair has just
    verified; ``verify`` and ``accept-restore`` make the checks that decide.

    Returns:
        One :class:`ReplacedHead` per head not extended (``session_id`` None: the index log's), in the head
        directory's order; empty when every head agrees.

    Raises:
        StoreError: the store cannot be read, or its ledger id is not 8-64 lowercase hex.
    """
    ledger_id = store.ledger_id()
    held = {s.session_id for s in store.list_sessions()}
    trees: dict[str, tuple[CompactRange, bool]] = {}
    for head in heads.sessions(ledger_id):
        if head.session_id in held:
            tree = CompactRange()
            for row in store.read_events(head.session_id):
                tree.append(leaf_hash(row.event_bytes))
            trees[head.session_id] = (tree, False)
    return list(_disagreeing(store, heads, ledger_id, trees))


def _verified_trees(store: Store, auditor: Auditor) -> dict[str, tuple[CompactRange, bool]]:
    """Every session's tree and sealed flag, each session and the index log verified without retained
    heads; raises on the first divergence."""
    index = auditor.index(store, sessions=True, retired=None)
    if index.divergences or index.missing:
        gone = [
            Divergence(m.leaf, "missing", f"the index log holds session {m.session_id}, the database not")
            for m in index.missing
        ]
        first = (index.divergences or gone)[0]
        raise LedgerIntegrityError(
            session_id="(index log)",
            seq=first.seq,
            reason=f"{first.reason}: {first.detail}; accept-restore re-anchors a consistent database only",
            divergences=[*index.divergences, *gone],
        )
    trees = {}
    for session in store.list_sessions():
        report = auditor.settled(store, session.session_id, index=index, retired=None, shared_index=False)
        if not report.ok:
            first = report.divergences[0]
            raise LedgerIntegrityError(
                session_id=session.session_id,
                seq=first.seq,
                reason=f"{first.reason}: {first.detail}; accept-restore re-anchors a consistent database only",
                divergences=report.divergences,
            )
        trees[session.session_id] = (report.tree, report.sealed)
    return trees


def _disagreeing(
    store: Store, heads: HeadStore, ledger_id: str, trees: dict[str, tuple[CompactRange, bool]]
) -> Iterator[ReplacedHead]:
    for head in heads.sessions(ledger_id):
        cp = Checkpoint.parse(parse_note(head.note).text)
        tree = trees.get(head.session_id, (CompactRange(), False))[0]

        def hashes(start: int, stop: int, sid: str = head.session_id) -> Iterator[bytes]:
            for row in store.read_events(sid, start=start, stop=stop):
                yield leaf_hash(row.event_bytes)

        root = prefix_root(tree, cp.size, None, hashes) if head.session_id in trees else None
        if root != cp.root:
            yield ReplacedHead(head.session_id, cp.size, cp.root.hex(), tree.size, _hex(root), head.path)
    note = heads.load_index(ledger_id)
    if note is not None and store.index_supported():
        cp = Checkpoint.parse(parse_note(note).text)
        tree = index_tree(store)

        def leaves(start: int, stop: int) -> Iterator[bytes]:
            for leaf in store.read_index_leaves(start=start, stop=stop):
                yield leaf_hash(leaf.leaf)

        root = prefix_root(tree, cp.size, None, leaves)
        if root != cp.root:
            path = heads.index_path(ledger_id)
            yield ReplacedHead(None, cp.size, cp.root.hex(), tree.size, _hex(root), path)


def _hex(root: bytes | None) -> str | None:
    return None if root is None else root.hex()


def _move_aside(replaced: list[ReplacedHead], folder: Path) -> list[tuple[Path, Path]]:
    folder.mkdir(mode=0o700)
    moved = []
    for head in replaced:
        target = folder / head.path.name
        os.replace(head.path, target)
        moved.append((head.path, target))
    return moved


def _ledger(store: Store, notary: Notary, reason: str, operator: str, record: RestoreRecord) -> int:
    assert record.set_aside is not None
    payload = {
        "reason": reason,
        "operator": operator,
        "replaced_at_ms": time.time_ns() // 1_000_000,
        "set_aside": record.set_aside.name,
        "heads": [h.to_json() for h in record.replaced if h.session_id is not None],
        "index": next((h.to_json() for h in record.replaced if h.session_id is None), None),
    }
    with store.transaction():
        try:
            store.get_session(RESTORE_LOG)
        except SessionNotFound:
            log = Recorder.create(
                store, session_id=RESTORE_LOG, task="restore log", source="flightlog:restore", notary=notary
            )
        else:
            log = Recorder.attach(store, RESTORE_LOG, notary=notary)
        row = log.record_custom(RESTORED_KIND, payload)
        log.checkpoint()
    return row.seq


def _reanchor(store: Store, notary: Notary, ledger_id: str, replaced: list[ReplacedHead]) -> list[str]:
    done = []
    for head in replaced:
        if head.session_id is None or head.session_id == RESTORE_LOG or head.size == 0:
            continue
        latest = store.latest_checkpoint(head.session_id)
        if latest is None:
            continue
        try:
            signed = open_checkpoint(
                latest.body, notary.keyring, origin=origin_for(ledger_id, head.session_id)
            )
            sealed = _sealed(store, head.session_id, signed.size)
            notary.heads.save(ledger_id, head.session_id, signed, sealed=sealed)
        except (FlightlogError, OSError) as exc:
            raise StoreError(f"re-anchoring the retained head of {head.session_id}: {exc}") from exc
        done.append(head.session_id)
    return done


def _sealed(store: Store, session_id: str, size: int) -> bool:
    from ..integrity.verify import seal_payload

    last = next(iter(store.read_events(session_id, start=size - 1, stop=size)), None)
    return last is not None and seal_payload(last) is not None
