"""Who wrote a session, as its verified ledger says, against the ``source`` its ``sessions`` row names.

The row's ``source`` (``kernel``, ``import:FORMAT``, ``langgraph``...) is covered by no hash, yet ``abort``,
``signal`` and ``resume`` decide from it whether the flightlog kernel runs the session. The ledger says it
with its first events, which the chain covers:

* the kernel (``Kernel.run``, a fleet ``submit``, a kernel sub-agent) starts every run in one transaction:
  ``run_started`` at seq 0, a ``provider_capability_evidence`` per route position, then ``budget_limits``;
  the ledger's source is then :data:`KERNEL_SOURCE`;
* an importer (:mod:`flightlog.importers`) writes an ``import_source`` record at seq 0 whose payload's
  ``format`` names the document's format: the ledger's source is ``import:FORMAT``;
* a ``run_started`` at seq 0 that an integration's namespaced record follows (``langgraph.checkpoint``: the
  kernel's record kinds hold no dot) is neither, as below;
* a ``run_started`` at seq 0 that no ``budget_limits`` follows in the start (a core job, a run recorded
  through the ``Recorder`` API, a kernel run built by hand or by an older writer) says only that it is no
  import: the row may name ``kernel`` or any other source, never ``import:...``;
* anything else (an integration's first event, an ``api`` recorder's first custom event) is neither: the
  row must then name neither ``kernel`` nor an import.

A session with no events (an integration's session created before its first write, a row without a
ledger) says nothing: its row is not compared, and the row stays the only record of its source, as before
this check. Integrations are not told apart (a LangGraph thread's row edited to ``openai-agents`` is not
caught): each refuses the kernel's acts the same way.

:class:`SourceCheck` reads the first rows as the full check streams them (``Auditor.session``'s tap), so
``audit``, ``verify``, ``require_intact`` compare the row without another read; :func:`source_divergence`
reads them itself (the quick check ``show`` and ``runs --rebuild`` run). Listings (``ls``, ``runs``) never
run it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ..encoding import decode_stored, decodes_without
from ..errors import Divergence, EventDecodeError
from ..events import Custom, RunStarted
from ..store.base import SessionRecord, Store, StoredEvent

__all__ = [
    "BUDGET_LIMITS",
    "CAPABILITY_EVIDENCE",
    "IMPORT_SOURCE",
    "IMPORT_SOURCE_PREFIX",
    "KERNEL_SOURCE",
    "ROW_MISMATCH",
    "LedgerSource",
    "SourceCheck",
    "source_divergence",
]

ROW_MISMATCH = "row_mismatch"
"""Divergence reason: a field of the ``sessions`` row contradicts the verified ledger."""
KERNEL_SOURCE = "kernel"
"""``Session.source`` of a run the kernel records (``Kernel.run``, a fleet ``submit``)."""
IMPORT_SOURCE_PREFIX = "import:"
"""``Session.source`` prefix of a transcript written by :mod:`flightlog.importers` (``import:FORMAT``)."""
IMPORT_SOURCE = "import_source"
"""``custom_kind`` of an imported session's first event (seq 0), its payload's ``format`` the document's."""
BUDGET_LIMITS = "budget_limits"
"""``custom_kind`` of the kernel's budget record, the last event of a kernel run's start."""
CAPABILITY_EVIDENCE = "provider_capability_evidence"
"""``custom_kind`` of the kernel's per-route-position evidence, between ``run_started`` and ``budget_limits``."""

_SPELLINGS = (IMPORT_SOURCE.encode(), b"run_started")
"""What seq 0 holds when it is an import record or a ``run_started`` (else it is neither, undecoded)."""


@dataclass(frozen=True)
class LedgerSource:
    """What the ledger's first events say about who wrote the session.

    Attributes:
        source: ``kernel``, ``import:FORMAT``, or None: neither (an integration, a job, an API recorder).
        seq: The seq that says it (``budget_limits`` for the kernel; 0 otherwise).
        why: A few words naming that evidence (for the divergence's detail).
        may_be_kernel: With ``source`` None: the ledger starts as a run (``run_started``), so a row naming
            ``kernel`` does not contradict it (only an import's source does).
    """

    source: str | None
    seq: int
    why: str
    may_be_kernel: bool = False

    def contradicts(self, row_source: str) -> bool:
        """Whether a row naming ``row_source`` contradicts this: another source than a kernel's or an
        import's, or ``kernel``/``import:...`` where the ledger is neither."""
        if self.source is not None:
            return row_source != self.source
        if row_source == KERNEL_SOURCE:
            return not self.may_be_kernel
        return row_source.startswith(IMPORT_SOURCE_PREFIX)

    def divergence(self, row_source: str) -> Divergence | None:
        """The ``row_mismatch`` divergence (at :attr:`seq`) when a row naming ``row_source`` contradicts
        this, else None."""
        if not self.contradicts(row_source):
            return None
        ledger = repr(self.source) if self.source is not None else self._neither()
        return Divergence(
            self.seq, ROW_MISMATCH, f"sessions row source {row_source!r}, the ledger's {ledger}: {self.why}"
        )

    def _neither(self) -> str:
        return "not an import" if self.may_be_kernel else "neither 'kernel' nor an import"


class _Reader:
    """Decides :class:`LedgerSource` from the rows fed in seq order (:meth:`feed` returns True once decided)."""

    def __init__(self) -> None:
        self.found: LedgerSource | None = None
        self._kernel_start = False

    def feed(self, seq: int, data: bytes) -> bool:
        """Read one more row; True once :attr:`found` is decided (the rows after it say nothing more).

        Raises:
            EventDecodeError: a row read to decide does not decode (names its seq).
        """
        if seq == 0:
            return self._first(data)
        if not self._kernel_start:  # a gap before seq 0: decided as nothing (the audit reports the gap)
            return True
        event = decode_stored(data, seq=seq)
        kind = event.custom_kind if isinstance(event, Custom) else None
        if kind == BUDGET_LIMITS:
            self.found = LedgerSource(
                KERNEL_SOURCE, seq, f"seq 0 is a kernel run's run_started, its budget_limits at seq {seq}"
            )
            return True
        if kind == CAPABILITY_EVIDENCE:
            return False
        if kind is not None and "." in kind:  # an integration's namespaced record (``langgraph.checkpoint``)
            self.found = _neither(
                f"seq 0 is a run_started an integration's {kind} record follows at seq {seq}", seq
            )
            return True
        self.found = _a_run(
            f"seq 0 is a run_started the kernel's budget_limits does not follow (seq {seq} is {event.kind})"
        )
        return True

    def _first(self, data: bytes) -> bool:
        if decodes_without(data, _SPELLINGS):
            self.found = _neither("seq 0 is neither a kernel run's run_started nor an import_source record")
            return True
        event = decode_stored(data, seq=0)
        if isinstance(event, RunStarted):
            self._kernel_start = True
            return False
        if isinstance(event, Custom) and event.custom_kind == IMPORT_SOURCE:
            fmt = event.payload.get("format")
            source = f"{IMPORT_SOURCE_PREFIX}{fmt}" if isinstance(fmt, str) else None
            self.found = LedgerSource(source, 0, f"seq 0 is an import_source record of format {fmt!r}")
            return True
        self.found = _neither(
            f"seq 0 is {event.kind}, neither a kernel run's run_started nor an import_source record"
        )
        return True

    def end(self) -> LedgerSource | None:
        """What was decided; a ``run_started`` the rows end after, with no ``budget_limits``, is a run."""
        if self.found is None and self._kernel_start:
            return _a_run("seq 0 is a run_started no kernel budget_limits follows")
        return self.found


def _neither(why: str, seq: int = 0) -> LedgerSource:
    return LedgerSource(None, seq, why)


def _a_run(why: str) -> LedgerSource:
    return LedgerSource(None, 0, why, may_be_kernel=True)


class SourceCheck:
    """The row's ``source`` against the first rows the full check streams (``Auditor.session``)."""

    def __init__(self) -> None:
        self._row: str | None = None
        self._reader = _Reader()
        self._broken = False

    def tap(self, record: SessionRecord, stream: Iterable[StoredEvent]) -> Iterator[StoredEvent]:
        """Wrap the audit's row stream of ``record``'s session (the row it read before the rows): read the
        first rows until the ledger's source is decided, rows unchanged, same order. A row that does not
        decode leaves the check undecided (the audit reports it ``undecodable``)."""
        self._row, self._reader, self._broken = record.source, _Reader(), False
        decided = False
        for row in stream:
            if not decided and not self._broken:
                try:
                    decided = self._reader.feed(row.seq, row.event_bytes)
                except EventDecodeError:
                    self._broken = True
            yield row

    def divergence(self) -> Divergence | None:
        """The ``row_mismatch`` of the session :meth:`tap` read last (call once its audit passed), or None:
        no contradiction, no events, or a row that did not decode."""
        if self._row is None or self._broken:
            return None
        found = self._reader.end()
        return None if found is None else found.divergence(self._row)


def source_divergence(store: Store, record: SessionRecord) -> Divergence | None:
    """:class:`SourceCheck` for ``record``'s session, reading its first rows (until decided: seq 0, and
    for a ``run_started`` the kernel's start after it) instead of tapping the audit's stream.

    Raises:
        EventDecodeError: a row read to decide does not decode (names its seq).
    """
    reader = _Reader()
    for page in store.read_chain(record.session_id):
        if any(reader.feed(row[0], row[1]) for row in page):
            break
    found = reader.end()
    return None if found is None else found.divergence(record.source)
