"""The history a model call sees, kept current event by event instead of refolded each turn.

:func:`flightlog.replay.reconstruct` is the rule book; this class feeds the same
:class:`~flightlog.replay.Rebuilder` one event at a time, so a live run, a resumed one and ``flightlog
replay --at`` see exactly the same messages: ``compressed`` replaces its archived range by the summary,
``context_renewed`` restarts from the handoff (loaded from the store's artifacts), ``rollbacked``
truncates, ``page_out``/``page_in`` add nothing.

Cost: O(1) amortised per event for appends; a ``compressed`` or ``context_renewed`` costs O(history).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..events import ProviderReplay, SessionEvent
from ..messages import Message
from ..replay import ArchiveLoader, Rebuilder

__all__ = ["Transcript"]


@dataclass
class Transcript:
    """Incremental ``reconstruct`` (see the module docs).

    Args:
        loader: Resolves ``context_renewed.handoff_ref`` to the handoff messages (the store's artifacts).
    """

    loader: ArchiveLoader | None = None
    _rebuilder: Rebuilder | None = field(default=None, repr=False)

    @property
    def rebuilder(self) -> Rebuilder:
        """The underlying fold (created on first use, with :attr:`loader`)."""
        if self._rebuilder is None:
            self._rebuilder = Rebuilder(self.loader)
        return self._rebuilder

    def feed(self, seq: int, event: SessionEvent) -> None:
        """Fold one event (in seq order)."""
        self.rebuilder.feed(seq, event)

    def messages(self) -> list[Message]:
        """The transcript as of the last event fed."""
        return self.rebuilder.messages()

    def origins(self) -> list[int]:
        """For each message, the seq of the event that put it in the history."""
        return [entry.origin for entry in self.rebuilder.entries]

    def native_seed(self, protocol: str) -> list[ProviderReplay] | None:
        """The surviving ``llm_completed`` payloads when all are of ``protocol``, else None."""
        replays = [entry.replay for entry in self.rebuilder.entries if entry.seq is not None]
        if any(replay is None or replay.protocol != protocol for replay in replays):
            return None
        return [replay for replay in replays if replay is not None]
