"""Checkpoint-aware verification of a session: :func:`audit_session` (streaming, O(n)) and
:func:`audit_rows` check the chain and tree like :func:`flightlog.recorder.verify_session`, plus every
signed checkpoint, the seal, the retained, witnessed and indexed heads, a retirement record, the
salted artifacts the events reference and the artifacts a linking record names, with what they link to.

**Index log and witnesses.** Each checkpoint is also appended, in the same transaction, to the ledger-wide
index log (:mod:`flightlog.integrity.indexlog`; its own signed checkpoints, origin ``flightlog.local/<ledger id>/_/index``,
its own retained head ``<head dir>/<ledger id>/index.json``), so a session deleted wholesale stays visible.
Heads cosigned by a witness (:mod:`flightlog.integrity.witness`) are passed to :func:`audit_session` as
:class:`~flightlog.integrity.heads.WitnessedHead` and checked like the retained head (``rollback``, ``fork``, ``stale_head``, the detail
naming the witness): that catches a rollback even when the retained-head directory went with the database.
The session's checkpoints the signed index log holds are passed as :class:`~flightlog.integrity.heads.IndexedHead` and checked the same
way (the detail naming the leaf), so a session re-chained after its retained head file was deleted still
diverges; :func:`flightlog.integrity.audit.require_intact` (the check every entry point runs) passes all of these.

**Erasable artifacts.** Events referencing personal data do so by salted digest
(``salted:sha256:<hex>``, :mod:`flightlog.integrity.erasure`); verification lists each such reference (a JSON string
value that is exactly a handle, not a mention inside longer text) as present (stored, and its content and
salt hash to the handle), erased (with the erasure log seq), missing (``artifact_missing``, a divergence) or
corrupt (``artifact_corrupt``, a divergence). The archives kernel events name (``page_out.archive_ref``,
``context_renewed.handoff_ref``: ``sha256:<hex>`` handles of content-addressed artifacts, which
``page_in`` and ``replay`` read back) are listed and checked the same way: present and hashing to the
handle, else ``artifact_missing`` or ``artifact_corrupt``.

**Limits.** The ledger id lives in the database: an attacker who rewrites it *and* deletes every
checkpoint turns sessions into wholly unanchored ones (reported so, never as signed) with no retained
head to compare against. Dropping only the unanchored tail cannot be detected locally. Both need a
witness outside the machine.

Divergence reasons added here (on top of :func:`flightlog.ledger.verify_rows`'s): ``bad_checkpoint``
(malformed, unsigned by a trusted key, bad signature, key not valid at its time, wrong origin),
``checkpoint_mismatch`` (signed root or chain hash differs from the stored rows), ``truncated`` (a signed
checkpoint covers more events than stored), ``rollback`` (the retained head covers more events than
stored), ``stale_head`` (the database's latest checkpoint is older than the retained head), ``fork`` (the
stored rows disagree with the retained head), ``after_seal``, ``bad_seal``, ``artifact_missing`` (a
salted artifact or archive referenced by an event is gone without an erasure record, or a linked artifact
is not stored: :mod:`flightlog.integrity.linked`) and ``artifact_corrupt`` (a salted artifact's, an
archive's or a linked artifact's bytes hash otherwise), ``ref_unreadable`` (a linking record's ``"ref"`` is not a ``sha256:<64 lowercase hex>``
handle: :func:`~flightlog.store.links.unreadable_refs`), ``unanchored_restore`` (events of the restore log
:data:`RESTORE_LOG` no signed checkpoint covers: ``db accept-restore`` checkpoints each entry in the
transaction that records it, so such a tail was not written by it), ``effect_mismatch`` and
``intent_hash_mismatch`` (the session's ``external_effects`` rows against its effect events, and each
intent against its own ``intent_hash``: :mod:`flightlog.integrity.effects`; the rows are read after the
session row and before the events, so a live writer's new effects are never mistaken for a divergence).
``flightlog verify`` and ``audit`` add ``row_mismatch`` to a report that passes: the unhashed
``sessions`` row contradicts the verified ledger (:func:`flightlog.kernel.rowcheck.row_divergences`, above
this layer; its ``source`` is compared by the full check, ``Auditor.session``, with
:mod:`flightlog.integrity.authorship`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..errors import (
    Divergence,
    EventDecodeError,
    StoreError,
)
from ..ledger import GENESIS, CompactRange, verify_rows
from ..narration import plural, state_word
from ..notarization import SEAL_KIND
from ..salted import SALTED_PREFIX
from ..store.links import LINKING_PREFIX, linking_refs, unreadable_refs
from .checkpoints import SignedCheckpoint, open_checkpoint, open_stored_checkpoints, origin_for
from .effects import EffectFold, table_divergences
from .erasure import check_artifacts
from .heads import HeadStore, IndexedHead, RetainedHead, WitnessedHead
from .keys import Keyring, load_keyring
from .linked import check_linked
from .notes import NoteError
from .retirement import StaleCopy, load_retirement, verdict

if TYPE_CHECKING:
    from ..store.base import CheckpointRecord, SessionRecord, Store, StoredEvent
    from .retirement import Pin, RetirementCheck

__all__ = [
    "RESTORE_LOG",
    "ArtifactRef",
    "AuditReport",
    "audit_rows",
    "audit_session",
    "missing_sessions",
    "open_retained",
    "seal_payload",
]

RESTORE_LOG = "flightlog:restores"
"""Session id of the ledger-wide restore log (:mod:`flightlog.ops.restore`): every entry is checkpointed in
the transaction that records it, so an unanchored tail in it is a divergence (``unanchored_restore``)."""

_SEAL_MARK = b'"custom_kind":"session_sealed"'
_SALTED = re.compile(rb'"salted:sha256:([0-9a-f]{64})"')  # a JSON string that is exactly a handle
_ARCHIVE_KINDS = re.compile(rb'"kind":"(?:page_out|context_renewed)"')  # may be one: decode to know
_PLAIN = re.compile(r"sha256:([0-9a-f]{64})")


@dataclass
class ArtifactRef:
    """An artifact referenced by a session's events: a salted (erasable) one, or a content-addressed one a
    kernel event names as stored beside the ledger (``page_out.archive_ref``, ``context_renewed.handoff_ref``).

    Attributes:
        handle: ``salted:sha256:<hex>`` or ``sha256:<hex>``.
        seq: The first event referencing it.
        state: ``present`` (stored, and its bytes hash to the handle), ``erased`` (salted only),
            ``missing``, ``corrupt`` (its bytes hash otherwise) or ``unchecked`` (no store to look in).
        detail: Where the erasure is ledgered, or what is wrong.
    """

    handle: str
    seq: int
    state: str = "unchecked"
    detail: str = ""

    @property
    def salted(self) -> bool:
        """Whether it is a salted (erasable) artifact."""
        return self.handle.startswith(SALTED_PREFIX)

    @property
    def digest(self) -> str:
        """The digest, hex (salted: of salt and content)."""
        return self.handle.removeprefix(SALTED_PREFIX).removeprefix("sha256:")


@dataclass
class AuditReport:
    """Outcome of :func:`audit_session`: the chain and tree check plus what the checkpoints prove.

    Attributes:
        session_id: The session.
        events: Rows read.
        bytes: Stored event bytes read.
        head: Chain hash of the last row.
        root: RFC 9162 root over every row, hex.
        divergences: Every problem found, by seq (empty when intact).
        checkpoints: Signed checkpoints that verified and match the rows.
        mismatched: Signed checkpoints that verified but do not match the rows (their root or chain hash
            differs, or they cover more events than the rows hold): each has a divergence.
        anchored: Events covered by the largest such checkpoint (0 when none).
        sealed: The last event is a valid seal and a verified checkpoint covers it.
        seal_status: The status in the seal, when sealed.
        retained: Size of the retained head (None when there is none or no head store was given).
        ledger_id: The database's ledger id (None when it has none).
        witnessed: Largest size a trusted witness cosigned (None when no cosigned head was found).
        witnessed_by: That witness's key name.
        indexed: Largest size of this session's checkpoints the signed index log holds (None: none, or
            the index log was not consulted).
        indexed_leaf: That checkpoint's leaf index in the index log.
        index_divergences: Problems of the index log itself (by leaf index), when it was consulted for
            this session alone: a damaged index log cannot vouch for the session, so they count against
            :attr:`ok` (``audit --all`` reports them once, on the index log's own row).
        notes: Things not checked and why (an unreachable witness), one line each.
        artifacts: Salted artifacts the events reference, by first seq.
        linking: The plain artifacts the session's linking records name (sha256 hex -> first seq), where
            the link check starts (:mod:`flightlog.integrity.linked`).
        linked: Plain artifacts the session's linking records name, and every artifact their content links
            to, that :func:`~flightlog.integrity.linked.check_linked` read and hashed (0: no such record).
        retired: How the store was retired (``moved to <url> at <time>``, :mod:`flightlog.integrity.retirement`),
            None for a live store.
        moved: ``(head seq before, head seq after)`` the last check when a live writer kept appending while
            the rows were read, past :meth:`flightlog.integrity.audit.Auditor.settled`'s retries: the rows past the
            head read first are not verified (not :attr:`ok`, verdict ``moved``: re-run), while every
            divergence inside what was read is still in :attr:`divergences`. None when the check settled.
    """

    session_id: str
    events: int = 0
    bytes: int = 0
    head: str = GENESIS
    root: str = ""
    divergences: list[Divergence] = field(default_factory=list)
    checkpoints: int = 0
    mismatched: int = 0
    anchored: int = 0
    sealed: bool = False
    seal_status: str | None = None
    retained: int | None = None
    ledger_id: str | None = None
    witnessed: int | None = None
    witnessed_by: str | None = None
    indexed: int | None = None
    indexed_leaf: int | None = None
    index_divergences: list[Divergence] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    artifacts: list[ArtifactRef] = field(default_factory=list)
    linked: int = 0
    retired: str | None = None
    moved: tuple[int, int] | None = None
    tree: CompactRange = field(default_factory=CompactRange, repr=False)
    latest: SignedCheckpoint | None = field(default=None, repr=False)
    linking: dict[str, int] = field(default_factory=dict, repr=False)
    seal_seq: int | None = field(default=None, repr=False)
    effects: EffectFold = field(default_factory=EffectFold, repr=False)

    @property
    def ok(self) -> bool:
        """True when nothing diverges, in the session or in the index log consulted for it, and the check
        settled (:attr:`moved` is None); an unanchored tail is reported, not a divergence."""
        return not self.divergences and not self.index_divergences and self.moved is None

    @property
    def unanchored(self) -> tuple[int, int] | None:
        """``(first, last)`` seqs after the last verified checkpoint, or None when all are anchored."""
        return (self.anchored, self.events - 1) if self.anchored < self.events else None

    def verdict(self) -> Literal["ok", "stale_copy", "diverges", "moved"]:
        """``ok``, ``stale_copy`` (every divergence, the index log's too, is ``stale_copy``: a retired store
        whose session went on in the live store) or ``diverges``
        (:func:`flightlog.integrity.retirement.verdict`); ``moved`` when nothing diverges but a live writer
        kept moving the head during the check (:attr:`moved`: not verified, re-run)."""
        if self.moved is not None and not self.divergences and not self.index_divergences:
            return "moved"
        return verdict(self.ok, [d.reason for d in (*self.divergences, *self.index_divergences)])

    def state(self) -> str:
        """``sealed``, ``open`` or ``empty``."""
        return "sealed" if self.sealed else ("open" if self.events else "empty")

    def summary(self) -> str:
        """One line: state, anchoring, unanchored tail, retained head, witness, erased artifacts."""
        parts = [self.state() + (f" ({state_word(self.seal_status)})" if self.seal_status else "")]
        parts.append(self._anchoring())
        tail = self.unanchored
        if tail is not None:
            parts.append(f"unanchored tail: seqs {tail[0]}..{tail[1]}")
        parts.append(
            "no retained head" if self.retained is None else f"retained head at size {self.retained}"
        )
        if self.witnessed is not None:
            parts.append(f"witnessed up to size {self.witnessed} by {self.witnessed_by}")
        if self.indexed is not None:
            parts.append(f"in the index log up to size {self.indexed}")
        salted = [a for a in self.artifacts if a.salted]
        if salted:
            erased = [a for a in salted if a.state == "erased"]
            parts.append(f"{len(salted)} salted artifact(s), {len(erased)} erased")
        if len(salted) < len(self.artifacts):
            parts.append(f"{len(self.artifacts) - len(salted)} archive artifact(s)")
        if self.linked:
            parts.append(f"{self.linked} artifact(s) of linking records and their links checked")
        if self.retired is not None:
            parts.append(f"read-only: {self.retired}")
        return "; ".join(parts)

    def _anchoring(self) -> str:
        """The summary's clause on signed checkpoints: how many are stored with a valid signature, how
        many of those do not anchor the rows (:attr:`mismatched`: a checkpoint_mismatch or truncated
        divergence says which), and how far the others anchor."""
        if not self.mismatched:
            return f"{self.checkpoints} signed checkpoint(s), anchored through {self.anchored} event(s)"
        total = self.checkpoints + self.mismatched
        differ = "it does not match" if self.mismatched == 1 else "they do not match"
        if not self.checkpoints:
            return f"{plural(total, 'signed checkpoint')}, not anchored: {differ} the rows"
        return (
            f"{total} signed checkpoints, {self.mismatched} not anchoring ({differ} the rows), "
            f"anchored through {self.anchored} event(s)"
        )

    def to_json(self) -> dict[str, Any]:
        """Stable JSON fields for ``--json`` output."""
        tail = self.unanchored
        return {
            "session_id": self.session_id,
            "ok": self.ok,
            "verdict": self.verdict(),
            "state": self.state(),
            "seal_status": self.seal_status,
            "events": self.events,
            "bytes": self.bytes,
            "head": self.head,
            "root": self.root,
            "checkpoints": self.checkpoints,
            "checkpoints_mismatched": self.mismatched,
            "anchored": self.anchored,
            "unanchored": None if tail is None else {"first": tail[0], "last": tail[1]},
            "retained": self.retained,
            "witnessed": self.witnessed,
            "witnessed_by": self.witnessed_by,
            "indexed": self.indexed,
            "ledger_id": self.ledger_id,
            "retired": self.retired,
            "moved": None if self.moved is None else {"from": self.moved[0], "to": self.moved[1]},
            "artifacts": [
                {"handle": a.handle, "seq": a.seq, "state": a.state, "detail": a.detail}
                for a in self.artifacts
            ],
            "linked": self.linked,
            "notes": list(self.notes),
            "divergences": [{"seq": d.seq, "reason": d.reason, "detail": d.detail} for d in self.divergences],
            "index_divergences": [
                {"leaf": d.seq, "reason": d.reason, "detail": d.detail} for d in self.index_divergences
            ],
        }


@dataclass
class _Seal:
    seq: int
    payload: Any
    root_before: str


@dataclass
class _Tee:
    """Folds leaves while rows stream into ``verify_rows``; keeps roots and hashes at wanted sizes, seals,
    salted artifact references and the artifacts linking records name (:func:`~flightlog.store.links.linking_refs`)."""

    wanted: set[int]
    tree: CompactRange = field(default_factory=CompactRange)
    roots: dict[int, tuple[bytes, str]] = field(default_factory=dict)
    seals: list[_Seal] = field(default_factory=list)
    salted: dict[str, int] = field(default_factory=dict)
    archives: dict[str, int] = field(default_factory=dict)
    linking: dict[str, int] = field(default_factory=dict)
    unreadable: list[tuple[int, str]] = field(default_factory=list)
    effects: EffectFold = field(default_factory=EffectFold)

    def __post_init__(self) -> None:
        if 0 in self.wanted:
            self.roots[0] = (self.tree.root(), GENESIS)

    def rows(self, rows: Iterable[StoredEvent]) -> Iterator[StoredEvent]:
        """Pass rows to ``verify_rows(..., tree=self.tree)``, which folds each leaf into :attr:`tree` (one
        leaf hash per row); when a row is asked for, the tree holds every row before it."""
        last = GENESIS
        for row in rows:
            self._snapshot(last)
            data = row.event_bytes
            if _SEAL_MARK in data:
                self._seal(row)
            if b"salted:sha256:" in data:
                for match in _SALTED.finditer(data):
                    self.salted.setdefault(match.group(1).decode("ascii"), row.seq)
            if _ARCHIVE_KINDS.search(data):
                for digest in archive_refs(row):
                    self.archives.setdefault(digest, row.seq)
            if data.startswith(LINKING_PREFIX):
                for digest in linking_refs(data):
                    self.linking.setdefault(digest, row.seq)
                self.unreadable.extend((row.seq, ref) for ref in unreadable_refs(data))
            self.effects.feed_row(row)
            last = row.hash
            yield row
        self._snapshot(last)

    def _snapshot(self, last_hash: str) -> None:
        """Keep the root and chain hash when the tree has reached a wanted size."""
        size = self.tree.size
        if size in self.wanted and size not in self.roots:
            self.roots[size] = (self.tree.root(), last_hash)

    def _seal(self, row: StoredEvent) -> None:
        payload = seal_payload(row)
        if payload is not None:
            self.seals.append(_Seal(row.seq, payload, self.tree.root().hex()))


def archive_refs(row: StoredEvent) -> list[str]:
    """The content-addressed artifacts (hex digests) a kernel event at ``row`` names as stored beside the
    ledger: ``page_out.archive_ref`` and ``context_renewed.handoff_ref`` when they are ``sha256:<64 hex>``
    handles (another value, a path or a note, names no artifact of the store); ``[]`` for any other event
    (or one that does not decode: ``undecodable`` is reported by the chain check)."""
    from ..encoding import decode_stored
    from ..events import ContextRenewed, PageOut

    try:
        event = decode_stored(row.event_bytes, seq=row.seq)
    except EventDecodeError:
        return []
    if isinstance(event, PageOut):
        ref = event.archive_ref
    elif isinstance(event, ContextRenewed):
        ref = event.handoff_ref
    else:
        return []
    match = _PLAIN.fullmatch(ref or "")
    return [match.group(1)] if match else []


def seal_payload(row: StoredEvent) -> Any:
    """The payload of a ``session_sealed`` event at ``row``, or None when the row is another event (or does
    not decode)."""
    from ..encoding import decode_stored
    from ..events import Custom

    try:
        event = decode_stored(row.event_bytes, seq=row.seq)
    except EventDecodeError:
        return None
    if isinstance(event, Custom) and event.custom_kind == SEAL_KIND:
        return event.payload
    return None


def _ledger_id(store: Store) -> str | None:
    try:
        return store.ledger_id()
    except (StoreError, NotImplementedError):
        return None


def open_retained(
    heads: HeadStore | None, ledger_id: str | None, session_id: str, keyring: Keyring
) -> tuple[SignedCheckpoint | None, Divergence | None]:
    """The session's retained head, opened against ``keyring``, or None when none is kept (or no head store
    or ledger id); a head that does not open is returned as a ``bad_checkpoint`` divergence at seq 0."""
    if heads is None or ledger_id is None:
        return None, None
    try:
        head = heads.load(ledger_id, session_id)
        if head is None:
            return None, None
        return open_checkpoint(head.note, keyring, origin=origin_for(ledger_id, session_id)), None
    except (NoteError, StoreError) as exc:
        return None, Divergence(0, "bad_checkpoint", f"retained head: {exc}")


def audit_session(
    store: Store,
    session_id: str,
    *,
    keyring: Keyring | None = None,
    heads: HeadStore | None = None,
    decode: bool = True,
    witnessed: Sequence[WitnessedHead] = (),
    retired: RetirementCheck | Literal["load"] | None = "load",
    indexed: Sequence[IndexedHead] = (),
    artifacts: bool = True,
    tap: Callable[[SessionRecord, Iterable[StoredEvent]], Iterable[StoredEvent]] | None = None,
) -> AuditReport:
    """Stream-verify a session's chain and tree, its signed checkpoints, seal, retained, witnessed and
    indexed heads.

    Everything :func:`flightlog.recorder.verify_session` checks, plus: every stored checkpoint's signature
    (key valid at its time, right origin) and that its root and chain hash match the rows; the seal; that
    the database is not older than, nor inconsistent with, the retained head, any head a witness
    cosigned or any checkpoint of the session the signed index log holds; the state of every salted
    artifact the events reference; and, where the session holds records of a linking format (a LangGraph
    thread), every artifact they name and every one those link to, present and hashing to its name
    (:mod:`flightlog.integrity.linked`); that every ``external_effects`` row of the session matches the
    effect events and every intent its ``intent_hash`` (:mod:`flightlog.integrity.effects`: the ledger
    decides what an effect did, the row is a cache). Reads every row once (O(n)
    hashing, O(log n) memory for the tree, plus one small record per checkpoint; linked artifacts are read
    in batches, each once).

    Args:
        store: The store.
        session_id: The session (exact id).
        keyring: Trusted keys (default :func:`~flightlog.integrity.keys.load_keyring`).
        heads: Retained heads, or None to skip that check.
        decode: Also decode every event (report ``undecodable`` ones).
        witnessed: Heads a trusted witness cosigned, already verified
            (:func:`flightlog.integrity.witness_client.witnessed_heads`).
        retired: The store's retirement (:func:`flightlog.integrity.retirement.load_retirement`, loaded when
            ``"load"``; pass it when checking many sessions). On a retired store, heads beyond the rows it
            held when retired are ``stale_copy``, not ``rollback``/``stale_head`` (module
            :mod:`flightlog.integrity.retirement`); rows that differ from what it held are ``retired_mismatch``.
        indexed: The session's checkpoints the signed index log holds, already authenticated
            (:func:`flightlog.integrity.indexlog.indexed_heads`): with the retained head deleted, they still catch a
            re-chained or rolled-back session. :func:`flightlog.integrity.audit.require_intact` passes them.
        artifacts: Also look up the salted artifacts and read the linked ones (False: the rows, checkpoints,
            seal and heads only; ``report.artifacts`` then stay ``unchecked`` and ``report.linked`` 0: the
            check ``export``, ``tail`` and ``runs`` make; ``show`` and ``replay`` check artifacts too).
        tap: ``tap(record, rows)`` wraps the stream of stored rows the check reads (it must yield them
            unchanged, in order; ``record`` is the session row read before them), so a caller can fold the
            very rows that are verified in the same pass (``verify``/``audit``'s
            :class:`~flightlog.runs.check.ProjectionCheck`); trust what it made only when the report is ok.

    Raises:
        SessionNotFound: no such session.

    Source: RFC 9162 §2.1.1 (tree head); C2SP tlog-checkpoint, signed-note and tlog-cosignature.
    """
    keyring = load_keyring() if keyring is None else keyring
    record = store.get_session(session_id)
    ledger_id = _ledger_id(store)
    retained, problem = open_retained(heads, ledger_id, session_id, keyring)
    if retired == "load":
        retired = load_retirement(store, keyring)
    pin, as_retired, found = _retired_pin(retired, session_id)
    # After the head, before the rows: every effect row read was committed with its intent before the
    # rows are read, and every event at or before the head with its row (table_divergences' ``through``).
    effect_rows = store.session_effects(session_id)
    rows: Iterable[StoredEvent] = store.read_events(session_id)
    report = audit_rows(
        session_id,
        rows if tap is None else tap(record, rows),
        store.checkpoints(session_id),
        keyring=keyring,
        ledger_id=ledger_id,
        expected_head=(record.head_seq, record.head_hash) if record.head_seq >= 0 else None,
        merkle_root=record.merkle_root or None,
        retained=retained,
        witnessed=witnessed,
        indexed=indexed,
        decode=decode,
        extra=([problem] if problem else []) + found,
        pin=pin,
        retired_as=as_retired,
    )
    tail = report.unanchored
    if session_id == RESTORE_LOG and tail is not None:
        report.divergences.append(
            Divergence(
                tail[0],
                "unanchored_restore",
                f"seqs {tail[0]}..{tail[1]} of the restore log are covered by no signed checkpoint: "
                "`db accept-restore` checkpoints each entry in the transaction that records it, so these were "
                "not written by it",
            )
        )
        report.divergences.sort(key=lambda d: d.seq)
    found_effects = table_divergences(
        report.effects, effect_rows, through=record.head_seq, head=report.events - 1
    )
    if found_effects:
        report.divergences.extend(found_effects)
        report.divergences.sort(key=lambda d: d.seq)
    if retired is not None:
        report.retired = retired.describe()
        if pin is not None and not pin.matches(report.events, report.root):
            report.divergences.append(
                Divergence(
                    min(report.events, pin.size),
                    "retired_mismatch",
                    f"the signed record of this database's retirement ({as_retired}) pins {pin.size} events "
                    f"(root {pin.root.hex()[:16]}), the database holds {report.events}: changed after it",
                )
            )
            report.divergences.sort(key=lambda d: d.seq)
    if artifacts and report.artifacts:
        check_artifacts(store, report)
    if artifacts and report.linking:
        check_linked(store, report)
    return report


def _retired_pin(
    retired: RetirementCheck | None, session_id: str
) -> tuple[Pin | None, str, list[Divergence]]:
    """The session's pin in a verified retirement record, the record's phrase, and what is wrong."""
    if retired is None:
        return None, "", []
    if retired.record is None:
        return None, "", [Divergence(0, "bad_retirement", retired.problem or "retirement record unusable")]
    phrase = retired.record.describe()
    pin = retired.record.sessions.get(session_id)
    if pin is None:
        detail = (
            f"the signed record of this database's retirement ({phrase}) does not list this session: "
            "recorded after it"
        )
        return None, phrase, [Divergence(0, "retired_mismatch", detail)]
    return pin, phrase, []


def audit_rows(
    session_id: str,
    rows: Iterable[StoredEvent],
    checkpoints: Iterable[CheckpointRecord],
    *,
    keyring: Keyring,
    ledger_id: str | None,
    expected_head: tuple[int, str] | None = None,
    merkle_root: str | None = None,
    retained: SignedCheckpoint | None = None,
    witnessed: Sequence[WitnessedHead] = (),
    indexed: Sequence[IndexedHead] = (),
    decode: bool = True,
    extra: Sequence[Divergence] = (),
    pin: Pin | None = None,
    retired_as: str = "",
    kinds: bool = True,
) -> AuditReport:
    """The store-free core of :func:`audit_session`: rows and checkpoint records from anywhere (a store,
    an offline bundle), one pass.

    Args:
        session_id: The session.
        rows: Its rows in ascending seq (streamed).
        checkpoints: Its stored checkpoint records (``size``, ``root`` hex and the signed note ``body``).
        keyring: Trusted log keys.
        ledger_id: The ledger the origins must name (None: every checkpoint is ``bad_checkpoint``).
        expected_head: ``(seq, hash)`` recorded elsewhere (the session row), or None.
        merkle_root: The tree head recorded elsewhere (hex), or None.
        retained: The verified retained head, or None.
        witnessed: Verified witness-cosigned heads.
        indexed: The session's checkpoints held by the verified index log.
        decode: Also decode every event.
        extra: Divergences found before (e.g. an unreadable retained head), merged in seq order.
        pin: What a retired store held of this session (verified retirement record), or None.
        retired_as: How it was retired (the record's phrase), for the ``stale_copy`` detail.
        kinds: With ``decode``, compare each row's ``kind`` with its decoded event's (``kind_mismatch``);
            False for rows that hold no kind column (an audit bundle's entries).

    Returns:
        The report; salted artifacts are listed as ``unchecked`` (the caller knows where to look).
    """
    report = AuditReport(session_id, ledger_id=ledger_id)
    report.divergences.extend(extra)
    origin = origin_for(ledger_id, session_id) if ledger_id else None
    signed = open_stored_checkpoints(checkpoints, keyring, origin, report.divergences)
    wanted = {s.size for s in signed} | {h.size for h in witnessed} | {h.size for h in indexed}
    tee = _Tee(wanted | ({retained.size} if retained else set()))
    result = verify_rows(
        session_id, tee.rows(rows), decode=decode, expected_head=expected_head, tree=tee.tree, kinds=kinds
    )
    report.events, report.bytes, report.head, report.root = (
        result.events,
        result.bytes,
        result.head,
        result.root,
    )
    report.divergences.extend(result.divergences)
    if result.ok and merkle_root and result.events and merkle_root != result.root:
        report.divergences.append(
            Divergence(result.events - 1, "head_mismatch", "recorded tree head differs from the stored rows")
        )
    report.tree = tee.tree
    _match_checkpoints(report, signed, tee)
    stale = None
    if pin is not None:
        stale = StaleCopy(pin, retired_as)
    if retained is not None:
        report.retained = retained.size
        _match_head(report, retained, tee, "the retained head", stale)
    for head in sorted(witnessed, key=lambda h: h.size):
        if report.witnessed is None or head.size >= report.witnessed:
            report.witnessed, report.witnessed_by = head.size, head.witness
        _match_head(report, head.checkpoint, tee, f"the head witness {head.witness} cosigned", stale)
    _match_indexed(report, indexed, tee, stale)
    _match_seal(report, tee)
    report.artifacts = sorted(
        [
            *(ArtifactRef(SALTED_PREFIX + d, seq) for d, seq in tee.salted.items()),
            *(ArtifactRef("sha256:" + d, seq) for d, seq in tee.archives.items()),
        ],
        key=lambda a: a.seq,
    )
    report.linking = tee.linking
    report.divergences.extend(
        Divergence(
            seq,
            "ref_unreadable",
            f"the LangGraph record at seq {seq} names ref {ref if len(ref) <= 120 else ref[:120] + '…'}, not a sha256:<64 lowercase hex> "
            "handle: the thread's saver refuses to read it",
        )
        for seq, ref in tee.unreadable
    )
    report.effects = tee.effects
    report.divergences.extend(tee.effects.problems)  # the ledger's own effect records (intent hashes)
    report.divergences.sort(key=lambda d: d.seq)
    return report


def _match_checkpoints(report: AuditReport, signed: list[SignedCheckpoint], tee: _Tee) -> None:
    for cp in sorted(signed, key=lambda s: s.size):
        if cp.size > report.events:
            report.divergences.append(
                Divergence(
                    report.events,
                    "truncated",
                    f"a signed checkpoint covers {cp.size} events, the database holds {report.events}",
                )
            )
            report.mismatched += 1
            continue
        root, chain = tee.roots[cp.size]
        if root != cp.root or (cp.checkpoint.chain is not None and cp.checkpoint.chain != chain):
            what = "root" if root != cp.root else "chain hash"
            report.divergences.append(
                Divergence(
                    cp.size - 1,
                    "checkpoint_mismatch",
                    f"signed {what} at size {cp.size} differs from the rows",
                )
            )
            report.mismatched += 1
            continue
        report.checkpoints += 1
        if cp.size >= report.anchored:
            report.anchored, report.latest = cp.size, cp


def _match_indexed(
    report: AuditReport, indexed: Sequence[IndexedHead], tee: _Tee, stale: StaleCopy | None = None
) -> None:
    """Compare the session's checkpoints the signed index log holds with the rows: the largest like a
    retained head (``rollback``, ``fork``, ``stale_head``), every smaller one for a ``fork`` (so the report
    names the earliest signed size the rows no longer match)."""
    ordered = sorted(indexed, key=lambda h: (h.size, h.leaf), reverse=True)
    for n, head in enumerate(ordered):
        what = f"its checkpoint in the signed index log (leaf {head.leaf})"
        if n == 0:
            report.indexed, report.indexed_leaf = head.size, head.leaf
            _match_head(report, head, tee, what, stale)
        elif head.size and head.size <= report.events and tee.roots[head.size][0] != head.root:
            report.divergences.append(
                Divergence(head.size - 1, "fork", f"the stored rows disagree with {what} at size {head.size}")
            )


def _match_head(
    report: AuditReport,
    head: SignedCheckpoint | IndexedHead,
    tee: _Tee,
    what: str,
    stale: StaleCopy | None = None,
) -> None:
    """Compare a head kept outside the database (retained, cosigned by a witness, or held by the signed
    index log) with the rows; on a retired store, a head beyond the rows it held when retired is a stale
    copy (:mod:`flightlog.integrity.retirement`)."""
    size = head.size
    if stale is not None and not stale.explains(size, report.events, report.root):
        stale = None
    if size > report.events:
        report.divergences.append(
            Divergence(report.events, "stale_copy", stale.detail(what, size, report.events, "events", False))
            if stale is not None
            else Divergence(
                report.events,
                "rollback",
                f"{what} covers {size} events, the database holds {report.events}: "
                "rolled back to an earlier copy or truncated",
            )
        )
    elif size and tee.roots[size][0] != head.root:
        report.divergences.append(
            Divergence(size - 1, "fork", f"the stored rows disagree with {what} at size {size}")
        )
    elif report.anchored < size:
        report.divergences.append(
            Divergence(report.anchored, "stale_copy", stale.detail(what, size, report.events, "events", True))
            if stale is not None
            else Divergence(
                report.anchored,
                "stale_head",
                f"the database's latest signed checkpoint covers {report.anchored} events, older than "
                f"{what} at size {size}: newer checkpoints were removed or an old head replayed",
            )
        )


def _match_seal(report: AuditReport, tee: _Tee) -> None:
    for seal in tee.seals:
        if seal.seq != report.events - 1:
            report.divergences.append(
                Divergence(seal.seq + 1, "after_seal", f"events after the seal at seq {seal.seq}")
            )
            continue
        payload = seal.payload if isinstance(seal.payload, dict) else {}
        if payload.get("size") != seal.seq or payload.get("root") != seal.root_before:
            report.divergences.append(
                Divergence(
                    seal.seq, "bad_seal", "the seal's size or root does not match the events before it"
                )
            )
            continue
        report.seal_seq = seal.seq
        if report.anchored == report.events:
            report.sealed, report.seal_status = True, str(payload.get("status", ""))


def missing_sessions(store: Store, heads: HeadStore) -> list[RetainedHead]:
    """Sessions with a retained head in this ledger but no row in the database: deleted wholesale.

    Returns:
        Their retained heads, by file name (empty when the database has no ledger id).
    """
    ledger_id = _ledger_id(store)
    if ledger_id is None:
        return []
    present = {s.session_id for s in store.list_sessions()}
    return [head for head in heads.sessions(ledger_id) if head.session_id not in present]
