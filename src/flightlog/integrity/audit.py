"""The full check ``flightlog audit`` makes, as one library function every entry point runs before acting.

:func:`require_intact` is what ``resume``, ``approve``, ``deny``, ``abort``, ``signal``, the fleet ``worker``
and the dashboard's decisions, signals and aborts call first (through :class:`~flightlog.kernel.Kernel`,
:func:`~flightlog.kernel.approve`, :func:`~flightlog.kernel.deny`, :func:`~flightlog.kernel.abort`,
:func:`~flightlog.kernel.attention.send_signal`, :func:`~flightlog.kernel.spec.recorded_spec`):
nothing the ledger names (a module to import, a call to run, a status to report) is acted on before the
session passes it. It checks, in one streaming pass over the session's rows:

* the chain rule and the RFC 9162 tree head (:func:`flightlog.ledger.verify_rows`);
* every stored checkpoint's signature by a trusted log key, its origin, root and chain hash;
* the seal (an event after it, a seal over the wrong root);
* the retained head outside the database (rollback, stale head, fork);
* heads trusted witnesses cosigned (asked online unless ``online=False``; an unreachable witness is a note);
* the ledger-wide index log: its own signed checkpoints, retained and witnessed heads, and the session's
  checkpoints it holds, compared with the rows like the retained head. A re-chained session whose retained
  head file was deleted still disagrees with the index log (``fork``/``stale_head``), and a session whose
  retained head is missing while the index log knows it gets a note saying so;
* salted artifacts (present, erased with a record, or missing);
* the session's ``external_effects`` rows against its effect events, and each intent against its
  ``intent_hash`` (:mod:`flightlog.integrity.effects`): a row that says completed with a result the ledger
  does not record, a deleted row, a rewritten intent are refused, naming the effect and the seq;
* the ``source`` the session's row names against the one its first verified events fix (a kernel run's
  start, an import's ``import_source`` record: :mod:`flightlog.integrity.authorship`), as ``row_mismatch``:
  ``abort``, ``signal`` and ``resume`` decide from that ``source`` whether the kernel runs the session;
* a kernel run's ``parent_session_id`` against its parent's ledger (checked in full too: it must record
  spawning this session) and the session's own ``spawned_by`` start record, as ``row_mismatch``
  (:mod:`flightlog.integrity.lineage`): ``resume`` and the depth bound decide from the parent where a run
  sits in its tree;
* the session's ``runs`` row against the fold of the rows verified (:class:`flightlog.runs.check.ProjectionCheck`,
  as ``audit`` compares it): an act appends, and an append rewrites that row from the fold, so acting on an
  edited row would erase the ``projection_mismatch`` evidence; :meth:`Auditor.require` refuses it instead
  (``flightlog runs --rebuild`` rewrites the projection deliberately). A projection marked stale is no refusal.

Cost: O(n) hashing over the session's rows plus O(L) over the index log's L leaves (one per checkpoint
ledger-wide, about one per 64 events), O(log n) memory.

:class:`Auditor` carries what the check trusts (log keys, retained heads, witnesses); ``audit``/``verify``
use it too, so the commands and the entry points cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from ..errors import Divergence, FlightlogError, LedgerIntegrityError, SessionBusy, StoreError
from ..ledger import ROWS_PAST
from ..store.base import SessionRecord, Store, StoredEvent
from .authorship import SourceCheck
from .checkpoints import origin_for
from .heads import HeadStore, WitnessedHead, copy_hint
from .indexlog import IndexReport, audit_index, index_origin, indexed_heads
from .keys import Keyring, load_keyring
from .lineage import ParentCheck, ParentLedger, SpawnScan, TreeProofs
from .notary import Notary
from .verify import AuditReport, audit_session
from .witness_client import TrustedWitness, load_witnesses, witnessed_heads

if TYPE_CHECKING:
    from .retirement import RetirementCheck


__all__ = ["Auditor", "require_intact"]

_ATTEMPTS = 5
"""Full checks :meth:`Auditor.require` runs while a live writer keeps moving the session's head."""


@dataclass
class Auditor:
    """What the full check trusts: log keys, retained heads, witnesses (asked over the network if online).

    Attributes:
        keyring: Trusted log keys.
        heads: Retained heads (None: that check is skipped, e.g. for a database from elsewhere).
        witnesses: Trusted witnesses; those with a URL are asked for their latest heads when ``online``.
        online: Ask witnesses over the network (False: stored cosignatures only).
        trees: When not None, what the checks learn about run trees, kept for one sweep
            (:class:`~flightlog.integrity.lineage.TreeProofs`): each session that passes its check keeps
            the children its ledger spawned, which proves their parent links without checking it again
            while its head stands still (``audit --all``); a kernel adds its fold of a parent it checked or
            holds, which proves them whatever the head does (a resume's checks of a tree, a delegating
            call's resume of its child). None (default): every proof checks the parent.
    """

    keyring: Keyring
    heads: HeadStore | None
    witnesses: Sequence[TrustedWitness] = field(default_factory=list)
    online: bool = True
    trees: TreeProofs | None = None

    @classmethod
    def from_env(cls, *, online: bool = True) -> Auditor:
        """The user's: :func:`~flightlog.integrity.keys.load_keyring`, :meth:`HeadStore.default`,
        :func:`~flightlog.integrity.witness_client.load_witnesses` (what ``flightlog audit`` trusts).

        Raises:
            KeyManifestError: an unreadable or untrusted key manifest or witness list.
        """
        return cls(load_keyring(), HeadStore.default(), load_witnesses(), online)

    @classmethod
    def for_notary(cls, notary: Notary | None, *, online: bool = True) -> Auditor:
        """The keys and retained heads of ``notary`` (the ones a writer with it signs and retains with),
        plus the user's trusted witnesses; :meth:`from_env` when ``notary`` is None."""
        if notary is None:
            return cls.from_env(online=online)
        return cls(notary.keyring, notary.heads, load_witnesses(), online)

    # ─── checks ───────────────────────────────────────────────────────────────────────────
    def witnessed(self, store: Store, origin: str | None) -> tuple[list[WitnessedHead], list[str]]:
        """Verified heads the trusted witnesses cosigned for ``origin``, and notes on what was not checked."""
        if not self.witnesses or origin is None:
            return [], []
        return witnessed_heads(
            store, origin, keyring=self.keyring, witnesses=self.witnesses, online=self.online
        )

    def retirement(self, store: Store) -> RetirementCheck | None:
        """The store's retirement (:func:`flightlog.integrity.retirement.load_retirement`) under these keys."""
        from .retirement import load_retirement  # local: kept out of the import-time graph

        return load_retirement(store, self.keyring)

    def index(
        self,
        store: Store,
        *,
        sessions: bool = True,
        retired: RetirementCheck | Literal["load"] | None = "load",
    ) -> IndexReport:
        """:func:`~flightlog.integrity.indexlog.audit_index` with these keys, retained and witnessed index heads.

        Args:
            store: The store.
            sessions: Also compare every leaf with its session (``audit --all``); False checks the index
                log alone (what a single-session check needs).
            retired: The store's retirement (:meth:`retirement`; loaded when ``"load"``).
        """
        ledger_id = _ledger(store)
        witnessed, notes = self.witnessed(store, index_origin(ledger_id) if ledger_id else None)
        report = audit_index(
            store,
            keyring=self.keyring,
            heads=self.heads,
            witnessed=witnessed,
            retired=retired,
            sessions=sessions,
        )
        report.notes.extend(notes)
        return report

    def session(
        self,
        store: Store,
        session_id: str,
        *,
        index: IndexReport | None = None,
        retired: RetirementCheck | Literal["load"] | None = "load",
        tap: Callable[[SessionRecord, Iterable[StoredEvent]], Iterable[StoredEvent]] | None = None,
        lineage: bool = True,
    ) -> AuditReport:
        """The full check of one session (see the module docs); never raises on a divergence.

        Args:
            store: The store.
            session_id: The session (exact id).
            index: An index report already made for this store (``audit --all`` makes one for every
                session); None checks the index log here, and its problems go to
                ``report.index_divergences``.
            retired: The store's retirement (:meth:`retirement`; loaded when ``"load"``; pass it when
                checking many sessions): on a retired store, heads beyond what it held are ``stale_copy``.
            tap: Wraps the stream of the session's rows (:func:`~flightlog.integrity.verify.audit_session`).
            lineage: Also prove the row's ``parent_session_id`` by the parent's ledger, checked with
                :meth:`settled` (:mod:`flightlog.integrity.lineage`); False when this check is that proof.

        Raises:
            SessionNotFound: no such session.
        """
        ledger_id = _ledger(store)
        if retired == "load":
            retired = self.retirement(store)
        own_index = index is None
        if index is None:
            index = self.index(store, sessions=False, retired=retired)
        # Heads from outside the session's rows are read before the rows: a live writer can then only
        # make the rows look newer than they are, never older (no false "rollback").
        indexed = indexed_heads(store, session_id, index)
        witnessed, notes = self.witnessed(store, origin_for(ledger_id, session_id) if ledger_id else None)
        source = SourceCheck()  # the row's source against the first rows, read in the same pass
        parent = ParentCheck()  # and its parent, which the parent's ledger must prove
        own = SpawnScan() if self.trees is not None else None  # its children, to prove their links
        taps = _both(source.tap, _both(parent.tap, tap))
        report = audit_session(
            store,
            session_id,
            keyring=self.keyring,
            heads=self.heads,
            witnessed=witnessed,
            retired=retired,
            indexed=indexed,
            tap=taps if own is None else _both(taps, own.tap),
        )
        if own is not None and self.trees is not None and report.ok:
            self.trees.spawns[session_id] = (report.events - 1, dict(own.children))
            self.trees.unkeyed[session_id] = dict(own.unkeyed)
            if parent.root_at is not None:
                self.trees.roots[session_id] = parent.root_at
        report.notes.extend(notes)
        forged = source.divergence() if report.ok else None  # unverified rows are no evidence
        if forged is not None:  # the source never changes with an append: no live writer can explain it
            report.divergences.append(forged)
        if report.ok and lineage:  # the parent never changes with an append either
            shared, pinned = index, retired

            def verify(parent_id: str) -> ParentLedger:
                return self._parent_ledger(store, parent_id, shared, pinned)

            moved = parent.divergence(verify)
            if moved is not None:
                report.divergences.append(moved)
        if own_index:
            report.index_divergences.extend(index.divergences)
            report.notes.extend(f"index: {note}" for note in index.notes)
        missing = self._missing_head(ledger_id, session_id, report)
        if missing is not None:
            report.notes.append(missing)
        return report

    def _parent_ledger(
        self, store: Store, parent_id: str, index: IndexReport, retired: RetirementCheck | None
    ) -> ParentLedger:
        """The full check of a session's parent (its own parent not proven here) and the children its
        verified ledger spawned; from :attr:`trees` when it holds the parent's fold, or its spawns at its
        current head. A parent a live writer kept appending to through every check, with nothing diverging
        in what was read (:meth:`settled`'s ``moved``), proves the spawns those verified rows hold (not
        kept)."""
        trees = self.trees
        if trees is not None and parent_id in trees.held:
            head, children = trees.held[parent_id]
            return ParentLedger(children, head + 1)
        kept = trees.spawns.get(parent_id) if trees is not None else None
        if kept is not None and kept[0] == store.get_session(parent_id).head_seq:
            return ParentLedger(
                kept[1], kept[0] + 1, unkeyed=trees.unkeyed.get(parent_id, {}) if trees else {}
            )
        scan = SpawnScan()
        report = self.settled(
            store, parent_id, index=index, retired=retired, tap=scan.tap, shared_index=False, lineage=False
        )
        if report.divergences:  # (its index log's problems are the checked session's, not counted here)
            first = report.divergences[0]
            return ParentLedger({}, report.events, f"seq {first.seq}: {_reason(first)}")
        if report.ok and trees is not None:  # settled: kept (a moving head only proves what was read)
            trees.spawns[parent_id] = (report.events - 1, dict(scan.children))
            trees.unkeyed[parent_id] = dict(scan.unkeyed)
        return ParentLedger(scan.children, report.events, unkeyed=scan.unkeyed)

    def _missing_head(self, ledger_id: str | None, session_id: str, report: AuditReport) -> str | None:
        """A note when the index log knows the session but no retained head file exists for it."""
        if self.heads is None or ledger_id is None or report.indexed is None or report.retained is not None:
            return None
        try:
            path = self.heads.path(ledger_id, session_id)
        except StoreError:
            return None  # a malformed ledger id: every checkpoint is bad_checkpoint already
        if path.exists():
            return None  # there is one, and it did not verify: a divergence says so already
        return (
            f"no retained head ({path}), but the signed index log holds this session's checkpoint at "
            f"size {report.indexed} (leaf {report.indexed_leaf}): the head file was deleted, or this "
            "machine never wrote the session"
        )

    def require(self, store: Store, session_id: str) -> AuditReport:
        """:meth:`settled`, raising on any divergence or a head that would not settle, or on a ``runs`` row
        that contradicts the verified ledger (see :func:`require_intact`)."""
        return self._required(store, session_id)

    def _required(
        self,
        store: Store,
        session_id: str,
        *,
        index: IndexReport | None = None,
        retired: RetirementCheck | Literal["load"] | None = "load",
    ) -> AuditReport:
        """:meth:`require`, with a shared index report and retirement (``require_each``) when given."""
        from ..runs.check import ProjectionCheck  # local: kept out of the import-time graph

        runs = ProjectionCheck(store)  # folds the rows the check verifies, in the same pass
        report = self.settled(store, session_id, index=index, retired=retired, tap=runs.tap)
        if report.ok:
            found, _ = runs.session(session_id, ok=True, events=report.events)
            if not found:
                return report
            first = found[0]  # an act would rewrite the row: refused, so the evidence stays
            raise LedgerIntegrityError(
                session_id=session_id,
                seq=first.seq,
                reason=_hinted(_reason(first), _PROJECTION_HINT),
                divergences=found,
            )
        raise _refusal(report)

    def settled(
        self,
        store: Store,
        session_id: str,
        *,
        index: IndexReport | None = None,
        retired: RetirementCheck | Literal["load"] | None = "load",
        tap: Callable[[SessionRecord, Iterable[StoredEvent]], Iterable[StoredEvent]] | None = None,
        shared_index: bool = True,
        lineage: bool = True,
    ) -> AuditReport:
        """:meth:`session` until it passes or the session's head stands still during a check, so a live
        writer that appends while the rows are read is never mistaken for tampering.

        The session row is read before the rows, so an append during the check shows as rows past the
        recorded head (a ``head_mismatch`` whose detail starts with :data:`flightlog.ledger.ROWS_PAST`,
        beyond the head read before the check). When the head moved during a check:

        * any other divergence of the session is inside what was read (the chain, the tree, the
          checkpoints and heads of that prefix are checked whatever comes after): it is reported at once
          as the tampering it is, with ``AuditReport.moved`` set and the
          writer's rows-past divergence left out;
        * else the check runs again (at most ``_ATTEMPTS`` = 5 checks); still moving after the last, the
          report has no such divergence, ``moved`` is ``(head seq before, head seq after)`` and its
          verdict is ``moved`` (not ok: re-run; :func:`require_intact` raises ``SessionBusy``).

        A head that stood still during a check leaves its report as it is (every divergence is real).

        Args:
            store: The store.
            session_id: The session (exact id).
            index: A shared index log report (:meth:`index`), or None for the session's own.
            retired: As :meth:`session`.
            tap: As :meth:`session` (called once per check: the last call's fold goes with the report).
            shared_index: With ``index``, count its divergences and notes against the session (as
                :meth:`session` does with its own); False when they are reported once elsewhere
                (``audit --all``).
            lineage: As :meth:`session`.

        Raises:
            SessionNotFound: no such session.
        """
        for attempt in range(_ATTEMPTS):
            before = store.get_session(session_id).head_seq
            report = self.session(store, session_id, index=index, retired=retired, tap=tap, lineage=lineage)
            if index is not None and shared_index:
                report.index_divergences.extend(index.divergences)
                report.notes.extend(f"index: {note}" for note in index.notes)
            if report.ok:
                return report
            after = store.get_session(session_id).head_seq
            if after == before:
                return report  # settled: the divergence is real
            real = [d for d in report.divergences if not _written_meanwhile(d, before)]
            if real or attempt + 1 == _ATTEMPTS:
                if len(real) < len(report.divergences) or not real:
                    report.divergences = real
                    report.moved = (before, after)
                return report
        raise AssertionError("unreachable")  # pragma: no cover

    def require_each(
        self, store: Store, session_ids: Sequence[str]
    ) -> Iterator[tuple[str, AuditReport | LedgerIntegrityError | SessionBusy]]:
        """:meth:`require` of each of ``session_ids`` in order, yielding ``(session_id, passing report)`` or
        ``(session_id, the LedgerIntegrityError or SessionBusy require would raise)``; the store's retirement and the index
        log are checked once for all of them (as ``audit --all`` shares them), not once per session: an
        index log that diverges refuses every session, as it does in :meth:`require`.

        Raises:
            SessionNotFound: a session of ``session_ids`` does not exist.
        """
        retired = self.retirement(store)
        index = self.index(store, sessions=False, retired=retired)
        for session_id in session_ids:
            try:
                yield session_id, self._required(store, session_id, index=index, retired=retired)
            except (LedgerIntegrityError, SessionBusy) as refused:
                yield session_id, refused


def require_intact(store: Store, session_id: str, *, auditor: Auditor | None = None) -> AuditReport:
    """Run the full check ``flightlog audit`` makes and refuse a session that fails it.

    Call before acting on a session (importing the agent it names, running, deciding, reporting its
    status). When a live writer moves the session's head during the check, it is run again on the
    settled ledger (up to 5 times) so a concurrent append is never mistaken for tampering; a head still
    moving after that is ``SessionBusy``, while a divergence inside the rows read is refused at once
    whatever the head does (:meth:`Auditor.settled`).

    Args:
        store: The store.
        session_id: The session (exact id).
        auditor: What to trust (default :meth:`Auditor.from_env`: the user's keys, retained heads and
            witnesses).

    Returns:
        The passing report (``anchored`` tells how much of the session a trusted key signed).

    Raises:
        SessionNotFound: no such session.
        LedgerIntegrityError: any divergence of the session, or of the index log that vouches for it, or
            a ``runs`` row that contradicts the verified ledger (``projection_mismatch``/``projection_missing``);
            ``seq`` and ``reason`` name the first (when only the index log diverges, ``seq`` is None and
            the reason starts with "index log leaf N"); a divergence from a retained head says what it means
            and what to do (:func:`flightlog.integrity.heads.copy_hint`).
        SessionBusy: nothing diverges in what was read, but another writer kept appending through every
            check (``seq``: the head it had reached); the session is not verified, try again later.
        KeyManifestError: with the default auditor, an unreadable key manifest or witness list.
    """
    return (auditor or Auditor.from_env()).require(store, session_id)


_Tap = Callable[[SessionRecord, Iterable[StoredEvent]], Iterable[StoredEvent]]


def _both(first: _Tap, then: _Tap | None) -> _Tap:
    """One tap running ``then`` (when given) on the rows, then ``first`` on what it yields."""
    if then is None:
        return first
    return lambda record, rows: first(record, then(record, rows))


def _written_meanwhile(divergence: Divergence, before: int) -> bool:
    """Whether ``divergence`` is what an append made while the check read the rows: rows past the head the
    session row recorded (read first), beyond ``before``, the head seq read before the check."""
    return (
        divergence.reason == "head_mismatch"
        and divergence.seq > before
        and divergence.detail.startswith(ROWS_PAST)
    )


def _refusal(report: AuditReport) -> LedgerIntegrityError | SessionBusy:
    if not report.divergences and not report.index_divergences and report.moved is not None:
        return SessionBusy(session_id=report.session_id, seq=report.moved[1])
    whole = bool(copy_hint(report.index_divergences))  # the index log is behind: every session is refused
    hint = copy_hint([*report.divergences, *report.index_divergences], index=whole)
    if report.divergences:
        first = report.divergences[0]
        return LedgerIntegrityError(
            session_id=report.session_id,
            seq=first.seq,
            reason=_hinted(_reason(first), hint),
            divergences=report.divergences,
        )
    first = report.index_divergences[0]
    return LedgerIntegrityError(
        session_id=report.session_id,
        reason=_hinted(f"index log leaf {first.seq}: {_reason(first)}", hint),
        divergences=report.index_divergences,
    )


_PROJECTION_HINT = (
    "acting would rewrite the runs row and erase this evidence of an edit: `flightlog audit SESSION` lists every "
    "column; `flightlog runs --rebuild` rewrites the projection from the verified ledgers, deliberately"
)


def _hinted(reason: str, hint: str) -> str:
    return f"{reason}; {hint}" if hint else reason


def _reason(divergence: Divergence) -> str:
    return f"{divergence.reason}: {divergence.detail}" if divergence.detail else divergence.reason


def _ledger(store: Store) -> str | None:
    try:
        return store.ledger_id()
    except (NotImplementedError, FlightlogError):
        return None
