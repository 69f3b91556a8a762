"""``db accept-restore``: keep THIS database as the truth after it was restored from an older copy of it.

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
   Anything diverging there is refused.
3. Find the retained heads the database does not extend: a session head larger than the session or
   with another root at its size, a head of a session the database does not hold, the index head likewise.
   None: nothing to accept, nothing written.
4. Tell an older copy from a rewrite, with the **head history** (every (size, root) each head was moved
   to, :meth:`~flightlog.integrity.heads.HeadStore.history`): an older copy is a prefix of what was
   retained, so its tree has the retained root at every retained size it reaches (RFC 9162 §2.1.4); and
   every row it holds past its latest signed checkpoint lies above every retained size (each retained size
   was signed: a row below one that no signed checkpoint of the copy covers cannot be shown to be the row
   signed there, whether the copy ends at, between or below the retained sizes). Anything else is a
   **fork** (a copy that went on apart, or a history rewritten by someone who can write the file and
   deleted its checkpoints and index leaves, the chain recomputed) or **unsigned**: refused, naming the
   session (or the index log), the size and both roots or the first unsigned seq, unless
   ``--accept-fork`` (``accept_fork=True``) keeps it anyway, recorded as a fork. A true prefix ending at
   a retained size with its checkpoint, or whose rows its own checkpoints all cover, is an older copy.
   What this cannot see: rows past the largest retained size are checked against nothing retained (an
   unanchored tail there is rewritable by whoever writes the file); the history is thinned past
   :data:`~flightlog.integrity.heads.HISTORY_LIMIT` entries; and it is unsigned, kept in the heads folder:
   whoever can write that folder can delete or edit it (a head without a history, as one retained before
   histories existed, is checked against the latest head only, and the CLI warns). A witness's cosigned
   head is the stronger guard, and is never replaced.
5. Move those head files, and their histories, aside into ``<head dir>/<ledger id>/replaced-<ms>/``
   (renamed, never deleted: the other copy's evidence stays readable), each compared-and-set: under the
   head's lock (:func:`~flightlog.integrity.heads.head_lock`, which every writer of it holds), it is read
   again and set aside only when it is still the head judged in 3-4; one a writer moved meanwhile is
   refused (a ``StoreError`` naming it; what was moved goes back, nothing is recorded), since setting it
   aside would record the older head it replaced. A head whose lock another process holds past
   :data:`~flightlog.integrity.heads.LOCK_WAIT` seconds (stopped or hung in a head save) is refused the
   same way, the ``StoreError`` naming the lock file.
6. Record the decision in the ledger: a ``Custom`` event ``heads_replaced`` appended to the ledger-wide
   **restore log**, the session ``flightlog:restores`` (hash-chained; signed, indexed and witnessable like
   any session; never sealed; every entry checkpointed in its transaction, so ``verify`` refuses an
   unanchored tail there), payload ``{reason, operator, replaced_at_ms, set_aside, accept_fork, heads:
   [{session_id, retained_size, retained_root, size, root, fork, unsigned, history_missing}], index: {...} |
   null}``
   (``size``/``root``: what the database holds; ``root`` at the retained size, null when it holds fewer;
   ``fork``: ``{size, retained_root, root}`` at the first retained size whose root differs, else null;
   ``unsigned``: the smallest retained signed size above the database's latest signed checkpoint when it
   holds rows past that checkpoint, else null; ``history_missing``: the head had no history file, only
   the latest head was checked). On failure the
   files are moved back, unless a writer retained a new head meanwhile (a head never moves backwards:
   the set-aside file then stays where it is) and an emptied folder is removed.
7. Retain each affected session's latest verified checkpoint; the restore log's own commit retains the
   index head; each new history starts from the retained entries the database agrees with. Sessions whose
   heads agreed are untouched.

**Effects of the replaced history.** A session whose replaced head covers more events than this database
holds had events only in the other copy: tool calls whose side effects (an e-mail sent, a payment made)
may have been performed, and which a resume of this database may perform again. Neither the retained
heads nor this database record what those events were (a head is a size and a root), so
:attr:`RestoreRecord.behind` names those sessions and the event counts, and the CLI warns: the only guard left is the external
service's idempotency check on the key a tool stamps on what it does
(:func:`flightlog.kernel.effects.current_effect_key`, ``"{session_id}:{turn}:{call_id}"``), and it guards
only a call re-run with the same turn and call id (one the model makes anew has a new key).

Source: ARCHITECTURE.md invariants 5 (refuse, don't guess), 7 (exactly-once effects) and 10 (one live
store per ledger); the erasure log (:mod:`flightlog.integrity.erasure`) for the ledger-wide log session.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import Divergence, FlightlogError, LedgerIntegrityError, SessionNotFound, StoreError
from ..integrity.audit import Auditor
from ..integrity.checkpoints import Checkpoint, open_checkpoint, origin_for
from ..integrity.heads import HeadLockBusy, HeadStore, head_lock, prefix_root, read_history, write_history
from ..integrity.indexlog import index_tree
from ..integrity.notes import NoteError, parse_note
from ..integrity.retirement import load_retirement
from ..integrity.verify import RESTORE_LOG
from ..ledger import CompactRange, leaf_hash
from ..recorder import Recorder

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from ..integrity.notary import Notary
    from ..store.base import Store

__all__ = [
    "RESTORED_KIND",
    "RESTORE_LOG",
    "Fork",
    "ReplacedHead",
    "RestoreRecord",
    "accept_restore",
    "heads_not_extended",
]

RESTORED_KIND = "heads_replaced"
"""``Custom.custom_kind`` of a restore decision."""


@dataclass(frozen=True)
class Fork:
    """The first retained size at which the database's tree does not have the retained root.

    Attributes:
        size: Events (leaves) of that retained head.
        retained_root: Its root, hex.
        root: The database's root over its first ``size`` events (leaves), hex.
    """

    size: int
    retained_root: str
    root: str

    def to_json(self) -> dict[str, Any]:
        """``{size, retained_root, root}``."""
        return {"size": self.size, "retained_root": self.retained_root, "root": self.root}


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
        fork: Where the database is not a prefix of the head history (None: it is an older copy).
        unsigned: The smallest retained (signed) size above the database's latest signed checkpoint,
            when the database holds rows past that checkpoint (``anchored..size-1``): the retained history
            says those seqs were signed and no signed checkpoint of the database shows its rows are the
            ones signed (rewritten, the checkpoints deleted?); None otherwise.
        agreed: The head history entries ``(size, root)`` the database has (its root at that size is the
            retained one): the new history starts from them.
        anchored: Rows the database's latest signed checkpoint covers (None: not known).
        history_missing: The head had no history file beside it (a head retained before head histories
            existed, or the file deleted): only the latest head was checked.
    """

    session_id: str | None
    retained_size: int
    retained_root: str
    size: int
    root: str | None
    path: Path
    fork: Fork | None = None
    unsigned: int | None = None
    agreed: tuple[tuple[int, bytes], ...] = field(default=(), repr=False, compare=False)
    anchored: int | None = None
    history_missing: bool = False

    @property
    def what(self) -> str:
        """``session <id>`` or ``the index log``, for messages."""
        return "the index log" if self.session_id is None else f"session {self.session_id}"

    def problem(self) -> str | None:
        """Why this is not an older copy (one clause), or None when it is."""
        if self.fork is not None:
            return (
                f"{self.what} is not a prefix of its retained head history: at size {self.fork.size} the "
                f"retained root is {self.fork.retained_root[:16]}, this database's {self.fork.root[:16]}"
            )
        if self.unsigned is not None:
            signed = self.anchored or 0
            return (
                f"{self.what} had a signed checkpoint retained at size {self.unsigned}; no signed checkpoint "
                f"of this database covers it (deleted?): its events {signed}..{self.size - 1} lie past its "
                f"latest signed checkpoint (size {signed}), so it cannot show they are the events signed there"
            )
        return None

    def to_json(self) -> dict[str, Any]:
        """The payload entry (module docstring)."""
        return {
            "session_id": self.session_id,
            "retained_size": self.retained_size,
            "retained_root": self.retained_root,
            "size": self.size,
            "root": self.root,
            "fork": None if self.fork is None else self.fork.to_json(),
            "unsigned": self.unsigned,
            "history_missing": self.history_missing,
        }


@dataclass
class RestoreRecord:
    """What :func:`accept_restore` did.

    Attributes:
        replaced: The heads set aside (empty: nothing to accept, nothing written).
        set_aside: The folder they were moved to (None when nothing was).
        log_seq: Seq of the ``heads_replaced`` event in :data:`RESTORE_LOG` (None when nothing was written).
        reanchored: Sessions whose head is now the database's latest checkpoint.
        accepted_fork: True when a fork was kept with ``accept_fork``.
    """

    replaced: list[ReplacedHead] = field(default_factory=list)
    set_aside: Path | None = None
    log_seq: int | None = None
    reanchored: list[str] = field(default_factory=list)
    accepted_fork: bool = False

    @property
    def behind(self) -> list[ReplacedHead]:
        """Replaced session heads covering more events than this database holds of the session: events
        recorded only in the other copy (effects they performed may be performed again; module docstring)."""
        return [h for h in self.replaced if h.session_id is not None and h.retained_size > h.size]


@dataclass(frozen=True)
class _Held:
    """A session of the database: its tree and the size its latest signed checkpoint covers (None: not
    known, no signed-checkpoint check)."""

    tree: CompactRange
    anchored: int | None


def accept_restore(
    store: Store, *, reason: str, operator: str, notary: Notary, accept_fork: bool = False
) -> RestoreRecord:
    """Re-anchor the retained heads on this database, recording the decision (module docstring).

    Args:
        store: A writable store.
        reason: Why (recorded in the ledger; must not be empty).
        operator: Who decided (the operator-name rule of :func:`flightlog.narration.operator_problem`).
        notary: Signs the restore log and owns the retained heads it moves.
        accept_fork: Keep the database even where it is not an older copy of what was retained (a fork,
            or signed checkpoints gone): recorded as such.

    Returns:
        The record; ``replaced`` empty when every retained head already agrees (nothing written).

    Raises:
        ValueError: an empty reason or an invalid operator name.
        StoreError: the store is retired (its ledger lives elsewhere); a head could not be re-anchored; a
            head moved between its judging and its setting aside (another process retained one
            meanwhile: nothing is moved or written, run it again).
        LedgerIntegrityError: the database diverges apart from its retained heads (names the session and
            seq), or, without ``accept_fork``, is not an older copy of what was retained (a ``fork`` at the
            retained size's last seq, or ``unsigned``); nothing is moved or written.
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
    held, index_anchored = _verified(store, Auditor(notary.keyring, None, [], online=False))
    replaced = list(_disagreeing(store, notary.heads, ledger_id, held, index_anchored))
    record = RestoreRecord(replaced)
    if not replaced:
        return record
    forks = [h for h in replaced if h.problem() is not None]
    if forks and not accept_fork:
        raise _fork_refused(forks)
    record.accepted_fork = bool(forks)
    record.set_aside = notary.heads.index_path(ledger_id).parent / f"replaced-{time.time_ns() // 1_000_000}"
    moved = _move_aside(replaced, record.set_aside, notary.heads, ledger_id)
    try:
        record.log_seq = _ledger(store, notary, reason, operator, record)
    except BaseException:
        _put_back(moved, record.set_aside)
        raise
    _restart_histories(replaced)
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
        NoteError: a head history is unreadable.
    """
    ledger_id = store.ledger_id()
    sessions = {s.session_id for s in store.list_sessions()}
    held: dict[str, _Held] = {}
    for head in heads.sessions(ledger_id):
        if head.session_id in sessions:
            tree = CompactRange()
            for row in store.read_events(head.session_id):
                tree.append(leaf_hash(row.event_bytes))
            held[head.session_id] = _Held(tree, None)
    return list(_disagreeing(store, heads, ledger_id, held))


def _fork_refused(forks: list[ReplacedHead]) -> LedgerIntegrityError:
    """The refusal of a database that is not an older copy (names the first, counts the rest)."""
    first = forks[0]
    reason = "fork" if first.fork is not None else "unsigned"
    more = f" (and {len(forks) - 1} more head(s))" if len(forks) > 1 else ""
    divergences = [
        Divergence(
            _refused_seq(h),
            "fork" if h.fork is not None else "unsigned",
            h.problem() or "",
        )
        for h in forks
    ]
    seq = divergences[0].seq
    return LedgerIntegrityError(
        session_id=first.session_id or "(index log)",
        seq=seq,
        reason=(
            f"{reason}: {first.problem()}{more}; accept-restore accepts an older copy (a prefix of what was "
            "retained) only: this may be a history rewritten after its checkpoints were deleted; "
            "`--accept-fork` keeps it anyway, recorded as a fork in flightlog:restores"
        ),
        divergences=divergences,
    )


def _refused_seq(head: ReplacedHead) -> int:
    """The seq a refusal names: a fork's retained size's last seq; for ``unsigned``, the first row past
    the database's latest signed checkpoint."""
    if head.fork is not None:
        return head.fork.size - 1
    return head.anchored or 0


def _verified(store: Store, auditor: Auditor) -> tuple[dict[str, _Held], int]:
    """Every session's tree and anchoring, and the leaves the index log's latest signed checkpoint covers,
    each session and the index log verified without retained heads; raises on the first divergence."""
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
    held = {}
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
        held[session.session_id] = _Held(report.tree, report.anchored)
    return held, index.anchored


def _disagreeing(
    store: Store, heads: HeadStore, ledger_id: str, held: dict[str, _Held], index_anchored: int | None = None
) -> Iterator[ReplacedHead]:
    """The retained heads the database does not extend, each judged (:func:`_judged`); ``index_anchored``:
    leaves the index log's latest signed checkpoint covers (None: not known, no ``unsigned`` check)."""
    for head in heads.sessions(ledger_id):
        cp = Checkpoint.parse(parse_note(head.note).text)
        ours = held.get(head.session_id)
        tree = CompactRange() if ours is None else ours.tree

        def hashes(start: int, stop: int, sid: str = head.session_id) -> Iterator[bytes]:
            for row in store.read_events(sid, start=start, stop=stop):
                yield leaf_hash(row.event_bytes)

        root = prefix_root(tree, cp.size, None, hashes) if ours is not None else None
        if root != cp.root:
            history = heads.history(ledger_id, head.session_id)
            yield _judged(
                head.session_id,
                cp,
                tree,
                _hex(root),
                head.path,
                history,
                hashes,
                None if ours is None else ours.anchored,
            )
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
            history = heads.history(ledger_id, None)
            yield _judged(None, cp, tree, _hex(root), path, history, leaves, index_anchored)


def _judged(
    session_id: str | None,
    cp: Checkpoint,
    tree: CompactRange,
    root: str | None,
    path: Path,
    history: list[tuple[int, bytes]],
    hashes: Callable[[int, int], Iterable[bytes]],
    anchored: int | None,
) -> ReplacedHead:
    """A head the database does not extend, judged against its history: older copy or fork."""
    reached = [(size, want) for size, want in history if size <= tree.size]
    ours = _roots_at([size for size, _ in reached], hashes)
    agreed = tuple((size, want) for size, want in reached if ours.get(size) == want)
    fork = next(
        (Fork(size, want.hex(), ours[size].hex()) for size, want in reached if ours.get(size) != want), None
    )
    unsigned = None if fork is not None else _unsigned([size for size, _ in history], tree.size, anchored)
    missing = not os.path.lexists(HeadStore.history_path(path))
    return ReplacedHead(
        session_id, cp.size, cp.root.hex(), tree.size, root, path, fork, unsigned, agreed, anchored, missing
    )


def _unsigned(retained: list[int], size: int, anchored: int | None) -> int | None:
    """The smallest retained size covering a row past the database's latest signed checkpoint, or None.

    ``retained``: the head history's sizes (each signed when it was retained); ``size``: the rows the
    database holds; ``anchored``: the size its latest signed checkpoint covers (None: not known, no
    check). Rows ``anchored..size-1`` are signed by no checkpoint the database holds; when one of them lies
    below a retained size, the retained history says that seq was signed and the database cannot show its
    row is the one signed (it may have been rewritten, the checkpoints covering it deleted).
    """
    if anchored is None or size <= anchored:
        return None
    return min((s for s in retained if s > anchored), default=None)


def _roots_at(sizes: list[int], hashes: Callable[[int, int], Iterable[bytes]]) -> dict[int, bytes]:
    """The log's root over its first ``n`` leaves for each ``n`` of ``sizes`` (ascending, each at most the
    log's size), in one pass over ``hashes(0, max)``."""
    if not sizes:
        return {}
    wanted, roots, tree = set(sizes), {}, CompactRange()
    if 0 in wanted:
        roots[0] = tree.root()
    for leaf in hashes(0, max(sizes)):
        tree.append(leaf)
        if tree.size in wanted:
            roots[tree.size] = tree.root()
    return roots


def _hex(root: bytes | None) -> str | None:
    return None if root is None else root.hex()


def _move_aside(
    replaced: list[ReplacedHead], folder: Path, heads: HeadStore, ledger_id: str
) -> list[tuple[Path, Path]]:
    """Move each head file and its history into ``folder``, each head compared-and-set: under its
    :func:`~flightlog.integrity.heads.head_lock` (which every writer of a head holds), the head is read
    again and moved only when it is still the one judged; the (source, target) pairs moved.

    Raises:
        StoreError: a head moved (or went) since it was judged, or its lock stayed held by another process
            (:class:`~flightlog.integrity.heads.HeadLockBusy`, naming the lock file): everything moved is
            put back, nothing is recorded.
        NoteError: a head file became unreadable.
    """
    folder.mkdir(mode=0o700)
    moved: list[tuple[Path, Path]] = []
    try:
        for head in replaced:
            with _locked(head):
                _still_judged(head, heads, ledger_id)
                for source in (head.path, HeadStore.history_path(head.path)):
                    target = folder / source.name
                    try:
                        os.replace(source, target)
                    except FileNotFoundError:
                        if source == head.path:
                            raise
                        continue
                    moved.append((source, target))
    except BaseException:
        _put_back(moved, folder)
        raise
    return moved


@contextlib.contextmanager
def _locked(head: ReplacedHead) -> Iterator[None]:
    """``head``'s :func:`~flightlog.integrity.heads.head_lock`, held for the block.

    Raises:
        StoreError: another process held the lock for ``LOCK_WAIT`` seconds (names the head and the lock
            file; from :class:`~flightlog.integrity.heads.HeadLockBusy`).
    """
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(head_lock(head.path))
        except HeadLockBusy as exc:
            raise StoreError(
                f"cannot set aside the retained head of {head.what}: {exc}: nothing was set aside or "
                "recorded; run accept-restore again once that process goes on or exits"
            ) from exc
        yield


def _still_judged(head: ReplacedHead, heads: HeadStore, ledger_id: str) -> None:
    """Refuse when ``head``'s file no longer holds the checkpoint it was judged by (a writer retained a
    newer one meanwhile: setting that aside would record the older one; call under its lock).

    Raises:
        StoreError: it moved or is gone (names the head, both sizes).
        NoteError: it is unreadable.
    """
    if head.session_id is None:
        note = heads.load_index(ledger_id)
    else:
        kept = heads.load(ledger_id, head.session_id)
        note = None if kept is None else kept.note
    cp = None if note is None else Checkpoint.parse(parse_note(note).text)
    if cp is not None and (cp.size, cp.root.hex()) == (head.retained_size, head.retained_root):
        return
    now = "is gone" if cp is None else f"is now at size {cp.size}, root {cp.root.hex()[:16]}"
    raise StoreError(
        f"the retained head of {head.what} moved while accept-restore judged it (judged at size "
        f"{head.retained_size}, root {head.retained_root[:16]}; it {now}: another process retained a head "
        f"meanwhile): nothing was set aside or recorded; run accept-restore again ({head.path})"
    )


def _put_back(moved: list[tuple[Path, Path]], folder: Path) -> None:
    """Undo :func:`_move_aside` without moving a head backwards: a head file a writer retained meanwhile is
    kept (the set-aside one stays in ``folder`` as evidence), a history written meanwhile gets the
    set-aside entries merged into it (both kept as they are when either is damaged); ``folder`` is removed
    when emptied."""
    for source, target in moved:
        with head_lock(source):
            _put_back_one(source, target)
    with contextlib.suppress(OSError):  # not empty: a head kept aside, a newer one retained meanwhile
        folder.rmdir()


def _put_back_one(source: Path, target: Path) -> None:
    """Put one set-aside file back (:func:`_put_back`; called under its head's lock, which a writer of it
    holds too)."""
    if source.name.endswith(".json"):
        try:
            os.link(target, source)  # fails when a writer retained a head meanwhile: theirs is newer
        except FileExistsError:
            return
        except OSError:  # no hard links here: the lock keeps writers out between the check and the rename
            if not source.exists():
                os.replace(target, source)
            return
        target.unlink()
        return
    try:
        live = read_history(source)  # written meanwhile by a writer retaining a head
        if not live:
            os.replace(target, source)
            return
        write_history(source, sorted({**read_history(target), **live}.items()))
    except NoteError:  # one of them is damaged: the set-aside one stays in ``folder``
        return
    target.unlink()


def _restart_histories(replaced: list[ReplacedHead]) -> None:
    """Start each replaced head's new history from the retained entries the database agrees with (the
    old history stays in the set-aside folder); entries a writer appended since are kept."""
    for head in replaced:
        if head.agreed:
            path = HeadStore.history_path(head.path)
            with head_lock(path):  # what a writer appends meanwhile waits, then lands in the new file
                write_history(path, sorted({**dict(head.agreed), **read_history(path)}.items()))


def _ledger(store: Store, notary: Notary, reason: str, operator: str, record: RestoreRecord) -> int:
    assert record.set_aside is not None
    payload = {
        "reason": reason,
        "operator": operator,
        "replaced_at_ms": time.time_ns() // 1_000_000,
        "set_aside": record.set_aside.name,
        "accept_fork": record.accepted_fork,
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
