"""The ``external_effects`` table against the verified ledger: the ledger decides what an effect did.

:meth:`flightlog.recorder.Recorder.record_intent` writes an effect's row and its
``Custom("external_effect_intent", {key, intent_hash, intent, holder})`` in one transaction (``holder``: the
identity of the process about to run the effect, :class:`~flightlog.runs.host.ProcessId` as
:meth:`~flightlog.runs.host.ProcessId.to_wire` writes it; absent in intents recorded before it existed),
``Custom("external_effect_holder", {key, holder})`` when another process runs an in-doubt effect again
(the row and the intent stay as they were), and
:meth:`~flightlog.recorder.Recorder.complete_effect` its completion and
``Custom("external_effect_completed", {key, result})`` in one transaction. The events carry everything the
row holds (the intent, its hash, the result), and the chain, the tree head and the signed checkpoints cover
them; nothing covers the row, which anyone with write access to the database can change. So the row is an
index and a cache of what the ledger records, never the evidence:

* :class:`EffectFold` folds a session's effect events into, per key, the seqs and digests they fix and the
  processes that took it up (:class:`LedgerEffect`), and notes what the ledger itself gets wrong
  (:attr:`EffectFold.problems`: an intent whose ``intent_hash`` is not the sha256 of its intent, a second
  intent or completion of a key, a completion without intent, a holder without an in-doubt intent, a
  payload without its fields or with a malformed ``holder``, the member at fault named);
* :func:`effect_problem` compares one row with its key's ledger entry; :func:`table_divergences` every row
  of a session, and every recorded intent with its row;
* :class:`EffectTail` keeps a verified prefix's fold current while another process appends, each new row
  folded once it links to the chain (a resume waiting for a previous holder's in-doubt effect,
  :mod:`flightlog.kernel.takeover`).

:func:`flightlog.integrity.verify.audit_session` (the full check ``audit``, ``verify`` and every entry point
run, :func:`flightlog.integrity.audit.require_intact`) reports each problem as a divergence, and the
kernel's exactly-once protocol (:class:`flightlog.kernel.effects.Effects`) decides an effect's state from
its run's fold and refuses to act on a row that contradicts it (a forged completion is never fed to the
model; a deleted row never lets an effect run again).

Divergence reasons: :data:`EFFECT_MISMATCH` (the row and the ledger disagree, or the ledger records an
effect inconsistently), :data:`INTENT_HASH_MISMATCH` (an intent event's ``intent_hash`` is not its
intent's: the intent was rewritten after it was hashed).

Known limit: :meth:`EffectFold.feed_row` decodes only the rows whose bytes hold the canonical spelling of
the effect kinds (as :mod:`flightlog.kernel.rowcheck` searches for waits). An effect event re-spelled (a JSON
escape, white space: bytes no flightlog writer makes) and re-chained, possible only where no signature
covers it, is then missed by the audit's fold but not by the kernel's (it decodes every event): with its row
present the audit still reports the row (no intent), with its row deleted too the audit passes and the
kernel's check refuses the missing row when the call comes round.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from ..encoding import canonical_json, decode_stored
from ..errors import Divergence, EventDecodeError, LedgerIntegrityError
from ..events import Custom, SessionEvent
from ..ledger import GENESIS, link_problem
from ..runs.host import ProcessId
from ..store.base import EffectRecord, Store, StoredEvent

__all__ = [
    "EFFECT_COMPLETED",
    "EFFECT_HOLDER",
    "EFFECT_INTENT",
    "EFFECT_MISMATCH",
    "INTENT_HASH_MISMATCH",
    "EffectFold",
    "EffectTail",
    "LedgerEffect",
    "effect_problem",
    "effect_refusal",
    "table_divergences",
]

EFFECT_INTENT = "external_effect_intent"
"""``custom_kind`` of an effect's intent event (:meth:`flightlog.recorder.Recorder.record_intent`)."""
EFFECT_COMPLETED = "external_effect_completed"
"""``custom_kind`` of an effect's completion event (:meth:`flightlog.recorder.Recorder.complete_effect`)."""
EFFECT_HOLDER = "external_effect_holder"
"""``custom_kind`` of the event naming the process that runs an in-doubt effect again
(``{"key", "holder"}``, written by :meth:`flightlog.kernel.effects.Effects.run_once`)."""

EFFECT_MISMATCH = "effect_mismatch"
"""Divergence reason: an ``external_effects`` row contradicts the verified ledger, or the ledger records an
effect inconsistently (module docs)."""
INTENT_HASH_MISMATCH = "intent_hash_mismatch"
"""Divergence reason: an intent event's ``intent_hash`` is not the sha256 of its intent's RFC 8785 bytes."""

_MARK = b'"custom_kind":"external_effect_'
"""What the canonical bytes of every effect event hold (RFC 8785: sorted keys, no spaces)."""


def _digest(text: bytes) -> str:
    return hashlib.sha256(text).hexdigest()


@dataclass
class LedgerEffect:
    """What a session's ledger records of one effect.

    Attributes:
        key: The effect's idempotency key.
        intent_seq: The seq of its (first) ``external_effect_intent``.
        intent_hash: The ``intent_hash`` that event carries (64 hex chars, as written).
        intent_digest: sha256 hex of the RFC 8785 bytes of the intent that event carries.
        completed_seq: The seq of its ``external_effect_completed``, None while in doubt.
        result_digest: sha256 hex of the RFC 8785 bytes of the completion's result, None while in doubt.
        tool: The intent's ``tool`` (:func:`flightlog.kernel.effects.intent_of`), None when the intent is
            not an object with a text ``tool``.
        holder: The process that last took the effect up (its intent's ``holder``, or a later
            ``external_effect_holder``), None when the ledger names none (an intent recorded before
            holders were).
        holders: Every process the ledger names as its holder, in seq order, each once (the intent's, then
            each well-formed ``external_effect_holder`` before its completion). A resume waits while *any*
            of them may still run it (:mod:`flightlog.kernel.takeover`): a later holder record, which
            anyone who can write the database can append at an unsigned tail, cannot hide an earlier
            holder that still runs the effect (attack pass atk4 b05).
    """

    key: str
    intent_seq: int
    intent_hash: str
    intent_digest: str
    completed_seq: int | None = None
    result_digest: str | None = None
    tool: str | None = None
    holder: ProcessId | None = None
    holders: tuple[ProcessId, ...] = ()

    @property
    def completed(self) -> bool:
        """Whether the ledger records its completion."""
        return self.completed_seq is not None


@dataclass
class EffectFold:
    """A session's effect events folded by key (feed every event, in seq order).

    Attributes:
        effects: The ledger's effects by key (the first intent of a key; its first completion).
        problems: What the ledger itself records wrongly (module docs), by seq.
    """

    effects: dict[str, LedgerEffect] = field(default_factory=dict)
    problems: list[Divergence] = field(default_factory=list)

    def feed(self, seq: int, event: SessionEvent) -> None:
        """Fold one event (any kind: all but the two effect ``Custom`` kinds are passed over)."""
        if not isinstance(event, Custom) or event.custom_kind not in (
            EFFECT_INTENT,
            EFFECT_COMPLETED,
            EFFECT_HOLDER,
        ):
            return
        payload = event.payload if isinstance(event.payload, dict) else {}
        key = payload.get("key")
        if not isinstance(key, str):
            self._problem(seq, f"{event.custom_kind} without a text key: no effect row can match it")
        elif event.custom_kind == EFFECT_INTENT:
            self._intent(seq, key, payload)
        elif event.custom_kind == EFFECT_HOLDER:
            self._holder(seq, key, payload)
        else:
            self._completion(seq, key, payload)

    def feed_row(self, row: StoredEvent) -> None:
        """Fold one stored row: decoded only when its bytes may hold an effect event. A row that does not
        decode is passed over (the chain check reports it, ``undecodable``)."""
        if _MARK not in row.event_bytes:
            return
        try:
            event = decode_stored(row.event_bytes, seq=row.seq)
        except EventDecodeError:
            return
        self.feed(row.seq, event)

    def copy(self) -> EffectFold:
        """An independent copy (feeding either leaves the other as it was)."""
        return EffectFold({k: replace(v) for k, v in self.effects.items()}, list(self.problems))

    def in_doubt(self) -> list[LedgerEffect]:
        """The effects whose intent the ledger records without a completion, oldest intent first."""
        return sorted((e for e in self.effects.values() if not e.completed), key=lambda e: e.intent_seq)

    def tap(self, rows: Iterable[StoredEvent]) -> Iterable[StoredEvent]:
        """Yield ``rows`` unchanged, folding each on the way (to fold the rows a check verifies)."""
        for row in rows:
            self.feed_row(row)
            yield row

    def _problem(self, seq: int, detail: str, reason: str = EFFECT_MISMATCH) -> None:
        self.problems.append(Divergence(seq, reason, detail))

    def _intent(self, seq: int, key: str, payload: dict[str, Any]) -> None:
        first = self.effects.get(key)
        if first is not None:
            self._problem(
                seq,
                f"effect {key}: a second external_effect_intent (the first at seq {first.intent_seq}): an "
                "intent is recorded once per key, so its row was deleted or replaced and the effect may "
                "have run twice",
            )
            return
        claimed = payload.get("intent_hash")
        if not isinstance(claimed, str) or "intent" not in payload:
            self._problem(seq, f"effect {key}: external_effect_intent without its intent_hash and intent")
            return
        intent = payload["intent"]
        digest = _digest(canonical_json(intent))
        tool = intent.get("tool") if isinstance(intent, dict) else None
        holder = ProcessId.from_wire(payload.get("holder"))
        self.effects[key] = LedgerEffect(
            key,
            seq,
            claimed,
            digest,
            tool=tool if isinstance(tool, str) else None,
            holder=holder,
            holders=() if holder is None else (holder,),
        )
        if digest != claimed:
            self._problem(seq, _hash_detail(key, digest, claimed), INTENT_HASH_MISMATCH)
        if "holder" in payload and holder is None:
            why = ProcessId.wire_problem(payload["holder"])
            self._problem(seq, f"effect {key}: external_effect_intent with a malformed holder ({why})")

    def _holder(self, seq: int, key: str, payload: dict[str, Any]) -> None:
        entry = self.effects.get(key)
        holder = ProcessId.from_wire(payload.get("holder"))
        if entry is None:
            self._problem(seq, f"effect {key}: {EFFECT_HOLDER} without an intent before it")
        elif entry.completed_seq is not None:
            self._problem(
                seq, f"effect {key}: {EFFECT_HOLDER} after its completion at seq {entry.completed_seq}"
            )
        elif holder is None:
            why = (
                "holder is missing" if "holder" not in payload else ProcessId.wire_problem(payload["holder"])
            )
            self._problem(seq, f"effect {key}: {EFFECT_HOLDER} without a well-formed holder ({why})")
        else:
            entry.holder = holder
            if holder not in entry.holders:
                entry.holders += (holder,)

    def _completion(self, seq: int, key: str, payload: dict[str, Any]) -> None:
        entry = self.effects.get(key)
        if entry is None:
            self._problem(seq, f"effect {key}: external_effect_completed without an intent before it")
        elif entry.completed_seq is not None:
            self._problem(
                seq,
                f"effect {key}: a second external_effect_completed (the first at seq {entry.completed_seq})",
            )
        elif "result" not in payload:
            self._problem(seq, f"effect {key}: external_effect_completed without its result")
        else:
            entry.completed_seq, entry.result_digest = seq, _digest(canonical_json(payload["result"]))


def _hash_detail(key: str, digest: str, claimed: str) -> str:
    return (
        f"effect {key}: the intent hashes to {digest[:16]}..., its event says intent_hash {claimed[:16]}...: "
        "the intent was rewritten after it was hashed"
    )


def effect_problem(
    key: str, entry: LedgerEffect | None, row: EffectRecord | None, *, through: int | None = None
) -> Divergence | None:
    """Whether the row of effect ``key`` contradicts what the verified ledger records of it.

    Args:
        key: The effect's idempotency key.
        entry: The ledger's record of it (:attr:`EffectFold.effects`), None when the ledger has no intent.
        row: Its ``external_effects`` row, None when there is none.
        through: The ledger's head seq when ``row`` was read, for a reader that reads the table while a
            writer may append (the row first, the ledger after it): an intent or completion past it may
            have been written after the row was read, so its row is not required; None: every event the
            ledger holds was committed before the row was read (the writer itself).

    Returns:
        An :data:`EFFECT_MISMATCH` divergence naming the key, the row's and the ledger's version and the
        seq that fixes the ledger's (the intent's, the completion's; for a row without intent: ``-1``, no
        seq records it: the caller names the head), or :data:`INTENT_HASH_MISMATCH` when the ledger's
        intent does not hash to its own ``intent_hash``; None when they agree.
    """
    if entry is None:
        if row is None:
            return None
        return Divergence(
            -1,
            EFFECT_MISMATCH,
            f"effect {key}: its external_effects row (status {row.status!r}) has no external_effect_intent in "
            "the ledger: a row the ledger does not record",
        )
    if entry.intent_hash != entry.intent_digest:
        return Divergence(
            entry.intent_seq, INTENT_HASH_MISMATCH, _hash_detail(key, entry.intent_digest, entry.intent_hash)
        )
    return _row_problem(key, entry, row, through)


def _row_problem(
    key: str, entry: LedgerEffect, row: EffectRecord | None, through: int | None
) -> Divergence | None:
    """:func:`effect_problem` for a key the ledger records, without the ledger's own hash check."""
    seq = entry.intent_seq
    if row is None:
        if through is not None and seq > through:
            return None  # written after the table was read
        return _mismatch(seq, key, f"no external_effects row for its intent at seq {seq}")
    if row.intent_hash != entry.intent_hash or _digest(row.intent_json.encode()) != entry.intent_digest:
        return _mismatch(seq, key, f"its external_effects row holds another intent than the one at seq {seq}")
    if row.status == "completed":
        return _completed_problem(key, entry, row)
    if row.status != "pending":
        return _mismatch(
            seq, key, f"its external_effects row has status {row.status!r} (intent at seq {seq})"
        )
    done = entry.completed_seq
    if done is not None and (through is None or done <= through):
        return _mismatch(
            done,
            key,
            f"its external_effects row says pending (in doubt), the ledger records its completion at seq {done}",
        )
    return None


def _completed_problem(key: str, entry: LedgerEffect, row: EffectRecord) -> Divergence | None:
    done = entry.completed_seq
    if done is None:
        return _mismatch(
            entry.intent_seq,
            key,
            "its external_effects row says completed, with a result the ledger never recorded: the ledger "
            f"holds its intent at seq {entry.intent_seq} and no completion (in doubt)",
        )
    if _digest((row.result_json or "").encode()) != entry.result_digest:
        return _mismatch(
            done, key, f"its external_effects row holds another result than the completion at seq {done}"
        )
    return None


def _mismatch(seq: int, key: str, what: str) -> Divergence:
    return Divergence(seq, EFFECT_MISMATCH, f"effect {key}: {what}")


def table_divergences(
    fold: EffectFold, rows: Iterable[EffectRecord], *, through: int, head: int
) -> list[Divergence]:
    """Every disagreement between a session's ``external_effects`` rows and its ledger's effects.

    Args:
        fold: The session's verified events, folded (:class:`EffectFold`).
        rows: Its effect rows (:meth:`flightlog.store.base.Store.session_effects`), read after its head
            was read and before the events were.
        through: That head's seq (:func:`effect_problem`'s ``through``).
        head: The last seq the events read hold: where a row without intent is reported (no seq
            records it).

    Returns:
        :data:`EFFECT_MISMATCH` divergences by seq: each row that contradicts the ledger, each intent at or
        before ``through`` without a row. The fold's own problems (:attr:`EffectFold.problems`, an
        intent that does not hash to its ``intent_hash`` among them) are not repeated here.
    """
    found: list[Divergence] = []
    seen: set[str] = set()
    for row in rows:
        key = row.idempotency_key
        seen.add(key)
        entry = fold.effects.get(key)
        problem = effect_problem(key, None, row) if entry is None else _row_problem(key, entry, row, through)
        if problem is not None:
            found.append(
                Divergence(max(head, 0), problem.reason, problem.detail) if problem.seq < 0 else problem
            )
    for key, entry in fold.effects.items():
        problem = None if key in seen else _row_problem(key, entry, None, through)
        if problem is not None:
            found.append(problem)
    return sorted(found, key=lambda d: d.seq)


class EffectTail:
    """A session's effects as its ledger records them, kept current while another process appends.

    Starts from the fold of a prefix the caller verified (``fold``, of the rows before ``next_seq``: a
    resume's after ``require_intact``); each :meth:`refresh` reads the rows appended since and folds each
    once it links to the one before it (:func:`flightlog.ledger.link_problem`, from the stored hash of row
    ``next_seq - 1``), so what it says comes from the chained ledger, never from the ``external_effects``
    rows (which no hash covers). What the tail reads is chained, not signed: a signed checkpoint covering
    it is checked when the reader attaches (:meth:`flightlog.recorder.Recorder.attach`).

    Args:
        store: The session's store.
        session_id: The session.
        fold: Its effects through seq ``next_seq - 1`` (copied: the caller's fold is left as it is).
        next_seq: The first seq ``fold`` has not seen.
    """

    def __init__(self, store: Store, session_id: str, fold: EffectFold, *, next_seq: int) -> None:
        self.store, self.session_id = store, session_id
        self.fold = fold.copy()
        self.next_seq = next_seq
        self._prev = GENESIS
        if next_seq > 0:
            last = next(iter(store.read_events(session_id, start=next_seq - 1, stop=next_seq)), None)
            if last is None:
                raise LedgerIntegrityError(
                    session_id=session_id,
                    seq=next_seq - 1,
                    reason=f"truncated: seq {next_seq - 1}, read a moment ago, is no longer stored",
                )
            self._prev = last.hash

    def refresh(self) -> EffectFold:
        """Fold the rows appended since the last call (or construction); the fold, current.

        Raises:
            LedgerIntegrityError: a row read does not link to the one before it (``gap``, ``broken_link``,
                ``hash_mismatch``), naming its seq; nothing of it or after it is folded.
        """
        for row in self.store.read_events(self.session_id, start=self.next_seq):
            problem = link_problem(row, self.next_seq, self._prev)
            if problem is not None:
                raise LedgerIntegrityError(
                    session_id=self.session_id,
                    seq=row.seq,
                    reason=f"{problem}: a row appended since the check does not link to the ledger before it",
                )
            self.fold.feed_row(row)
            self.next_seq, self._prev = row.seq + 1, row.hash
        return self.fold


def effect_refusal(session_id: str, problem: Divergence, head: int) -> LedgerIntegrityError:
    """The error an actor raises instead of deciding from a row that contradicts the ledger
    (:func:`effect_problem`); a row without intent is named at ``head`` (the ledger's last seq)."""
    seq = problem.seq if problem.seq >= 0 else max(head, 0)
    found = Divergence(seq, problem.reason, problem.detail)
    return LedgerIntegrityError(
        session_id=session_id,
        seq=seq,
        reason=f"{problem.reason}: {problem.detail}; nothing is decided from the external_effects row "
        f"(`flightlog audit {session_id}` lists every divergence)",
        divergences=[found],
    )
