"""The history a model call sees, kept current event by event instead of refolded each turn.

:func:`flightlog.replay.reconstruct` is the rule book; this class applies it incrementally. Three kinds
contribute messages that depend on the event alone (``run_started``, ``llm_completed``,
``tool_completed``): their messages are ``reconstruct([(seq, event)])``, appended. ``rollbacked``
truncates to ``checkpoint_history_len``, exactly as ``reconstruct`` does. Every other kind the kernel writes
contributes nothing. ``compressed`` and ``page_out`` need look-ahead (and an archive loader): after the first
one the transcript stops being incremental and each query refolds the whole session with ``reconstruct``,
``replay_is_native`` and ``provider_replay_seed`` (the kernel itself never writes them).

Cost: O(1) amortised per event instead of O(events) per model call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..events import LlmCompleted, ProviderReplay, Rollbacked, SessionEvent
from ..messages import Message
from ..replay import provider_replay_seed, reconstruct, replay_is_native

__all__ = ["Transcript"]

_LOCAL = frozenset({"run_started", "llm_completed", "tool_completed"})
_LOOKAHEAD = frozenset({"compressed", "page_out"})

Events = Sequence[tuple[int, SessionEvent]]


@dataclass(slots=True)
class _Entry:
    message: Message
    from_llm: bool
    replay: ProviderReplay | None


@dataclass
class Transcript:
    """Incremental ``reconstruct`` (see the module docs)."""

    _entries: list[_Entry] = field(default_factory=list)
    _incremental: bool = True

    def feed(self, seq: int, event: SessionEvent) -> None:
        """Fold one event (in seq order)."""
        if not self._incremental:
            return
        if event.kind in _LOCAL:
            from_llm = isinstance(event, LlmCompleted)
            replay = event.provider_replay if isinstance(event, LlmCompleted) else None
            for message in reconstruct([(seq, event)]):
                self._entries.append(_Entry(message, from_llm, replay))
        elif isinstance(event, Rollbacked):
            del self._entries[event.checkpoint_history_len :]
        elif event.kind in _LOOKAHEAD:
            self._incremental, self._entries = False, []

    def messages(self, events: Events) -> list[Message]:
        """The transcript (``events`` is the whole session, used when not incremental)."""
        if not self._incremental:
            return reconstruct(events)
        return [entry.message for entry in self._entries]

    def native_seed(self, events: Events, protocol: str) -> list[ProviderReplay] | None:
        """The surviving ``llm_completed`` payloads when all are of ``protocol``, else None."""
        if not self._incremental:
            if not replay_is_native(events, protocol):
                return None
            return [replay for _seq, replay in provider_replay_seed(events, protocol)]
        replays = [entry.replay for entry in self._entries if entry.from_llm]
        if any(replay is None or replay.protocol != protocol for replay in replays):
            return None
        return [replay for replay in replays if replay is not None]
