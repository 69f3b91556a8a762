"""Folds over a session's stored events: messages, pending calls, provider seeds.

Every function takes ``events``: an iterable of ``(seq, event)`` pairs in strictly ascending ``seq``
(as a store reads them). Each consumes the iterable once, front to back, and stops pulling as soon as
it has passed ``at`` (the event *at* ``at`` is the last one pulled when present), so a lazy store cursor
is read only as far as needed. Memory is bounded by the result (the reconstructed messages, the pending
calls), never by the number of events; the only look-ahead buffer is the one
:func:`reconstruct` keeps after a ``compressed`` event, and it holds at most the rest of that turn.

No I/O: archived messages come in through a caller-supplied ``archive_loader``.

Message reconstruction rules (seed 000 event kinds; the rules are flightlog's, see :func:`reconstruct`):

=================== ============================================================================
``run_started``      ``user`` message: goal, then ``Criteria:`` and numbered criteria; attachments
                     follow as further parts of the same message
``llm_completed``    the assistant ``message`` as recorded
``tool_completed``   one ``tool`` message per result, in order
``compressed``       ``system`` summary, unless a later ``page_out`` of the same turn has an
                     ``archive_ref`` (that page-out stands for it)
``page_out``         the archived messages (``archive_loader``), else a ``system`` summary
``rollbacked``       history truncated to ``checkpoint_history_len`` messages
anything else        nothing (the other kernel OS kinds, ``custom``, tool requests, permissions...)
=================== ============================================================================
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from .events import (
    Compressed,
    LlmCompleted,
    PageOut,
    ProviderReplay,
    Rollbacked,
    RunStarted,
    SessionEvent,
    ToolCompleted,
    ToolDenied,
    ToolRequested,
)
from .messages import ContentPart, Message, TextPart, ThinkingPart, ToolCall, ToolCallPart, ToolResultPart

__all__ = [
    "TRUNCATION_SUFFIX",
    "ArchiveLoader",
    "pending_tool_calls",
    "provider_replay_seed",
    "reconstruct",
    "replay_is_native",
    "truncate_utf8",
]

TRUNCATION_SUFFIX = "… [replay truncated]"
"""Appended to a part cut by ``max_part_bytes`` (22 UTF-8 bytes; counts toward the cap)."""

_SUFFIX_BYTES = len(TRUNCATION_SUFFIX.encode("utf-8"))

ArchiveLoader = Callable[[str], Sequence[Message] | None]
"""Maps a ``page_out.archive_ref`` to the archived messages; ``None`` or ``LookupError`` when unknown."""

Events = Iterable[tuple[int, SessionEvent]]
_Handler = Callable[[Any, int, Any], None]


# ─── Shared plumbing ──────────────────────────────────────────────────────────────────────────


def _window(events: Events, at: int | None) -> Iterator[tuple[int, SessionEvent]]:
    """Yield ``(seq, event)`` up to ``at`` inclusive, pulling nothing past it; check ascending seqs.

    Raises:
        ValueError: a seq is not greater than the one before it.
    """
    previous: int | None = None
    for seq, event in events:
        if previous is not None and seq <= previous:
            raise ValueError(f"events must be in ascending seq order: seq {seq} after {previous}")
        if at is not None and seq > at:
            return
        yield seq, event
        if at is not None and seq >= at:
            return
        previous = seq


def _turn_of(event: SessionEvent) -> int | None:
    """The event's ``turn`` (None for kinds without one: run_started, run_terminal, custom...)."""
    turn = getattr(event, "turn", None)
    return turn if isinstance(turn, int) else None


# ─── Truncation ───────────────────────────────────────────────────────────────────────────────


def truncate_utf8(text: str, max_bytes: int) -> str:
    """Cut ``text`` to at most ``max_bytes`` UTF-8 bytes, never inside a character.

    Args:
        text: Any string without lone surrogates (event text never has them: encoding refuses them).
        max_bytes: The cap in UTF-8 bytes, suffix included; >= 0.

    Returns:
        ``text`` unchanged when it fits. Otherwise the longest prefix that, followed by
        :data:`TRUNCATION_SUFFIX`, fits in ``max_bytes``, plus that suffix; when ``max_bytes`` is below the
        suffix's 22 bytes, the longest prefix that fits, without suffix.

    Raises:
        ValueError: ``max_bytes`` is negative.
    """
    if max_bytes < 0:
        raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes:
        return text
    suffix = TRUNCATION_SUFFIX if max_bytes >= _SUFFIX_BYTES else ""
    budget = max_bytes - len(suffix.encode("utf-8"))
    # A cut inside a multi-byte character leaves an incomplete tail sequence; "ignore" drops just that.
    return encoded[:budget].decode("utf-8", errors="ignore") + suffix


def _clip_part(part: ContentPart, limit: int) -> ContentPart:
    """The part with its text, thinking or tool output cut to ``limit`` bytes (other parts as they are)."""
    if isinstance(part, TextPart):
        return _clipped(part, "text", part.text, limit)
    if isinstance(part, ThinkingPart):
        return _clipped(part, "thinking", part.thinking, limit)
    if isinstance(part, ToolResultPart):
        return _clipped(part, "output", part.output, limit)
    return part


def _clipped(part: ContentPart, name: str, value: str, limit: int) -> ContentPart:
    cut = truncate_utf8(value, limit)
    return part if cut is value else part.model_copy(update={name: cut})


def _clip_message(message: Message, limit: int | None) -> Message:
    """The message with every long part cut (signatures, opaque data, tool-call arguments untouched)."""
    if limit is None:
        return message
    parts = [_clip_part(part, limit) for part in message.content]
    if all(new is old for new, old in zip(parts, message.content, strict=True)):
        return message
    return message.model_copy(update={"content": parts})


# ─── Message reconstruction ───────────────────────────────────────────────────────────────────


@dataclass(slots=True)
class _Entry:
    """One history message; ``seq``/``replay`` are set for ``llm_completed`` messages only."""

    message: Message
    seq: int | None = None
    replay: ProviderReplay | None = None


def _run_started_message(event: RunStarted) -> Message:
    text = event.goal
    if event.criteria:
        numbered = "\n".join(f"{i}. {c}" for i, c in enumerate(event.criteria, start=1))
        text = f"{text}\n\nCriteria:\n{numbered}"
    return Message(role="user", content=[TextPart(text=text), *event.attachments])


def _tool_message(call_id: str, output: str, is_error: bool) -> Message:
    part = ToolResultPart(call_id=call_id, output=output, is_error=True if is_error else None)
    return Message(role="tool", content=[part])


def _summary_message(label: str, turn: int, summary: str | None) -> Message:
    return Message.text("system", f"[{label} turn {turn}] {summary or '(no summary recorded)'}")


class _Rebuilder:
    """Mutable fold state for :func:`reconstruct` and the provider-replay queries."""

    def __init__(self, loader: ArchiveLoader | None, max_part_bytes: int | None) -> None:
        self.entries: list[_Entry] = []
        self._loader = loader
        self._limit = max_part_bytes
        self._held: list[tuple[int, SessionEvent]] = []
        self._held_turn = 0

    def feed(self, seq: int, event: SessionEvent) -> None:
        """Fold one event, holding it back while an earlier ``compressed`` is undecided."""
        if self._held and not self._decide(event):
            if event.kind in _REBUILD_HANDLERS:  # the rest contributes nothing: not worth holding
                self._held.append((seq, event))
            return
        if isinstance(event, Compressed):
            self._held, self._held_turn = [(seq, event)], event.turn
            return
        self._apply(seq, event)

    def _decide(self, event: SessionEvent) -> bool:
        """Settle held events if ``event`` decides them; True when it did (``event`` is not held)."""
        if isinstance(event, PageOut) and event.turn == self._held_turn and event.archive_ref is not None:
            self._release(drop_compressed=True)
            return True
        turn = _turn_of(event)
        if turn is not None and turn != self._held_turn:
            self._release(drop_compressed=False)
            return True
        return False

    def _release(self, *, drop_compressed: bool) -> None:
        held, self._held = self._held, []
        for seq, event in held:
            if not (drop_compressed and isinstance(event, Compressed)):
                self._apply(seq, event)

    def finish(self) -> list[_Entry]:
        """End of input (or of ``at``): no later page-out can come, so held summaries stand."""
        self._release(drop_compressed=False)
        return self.entries

    def _apply(self, seq: int, event: SessionEvent) -> None:
        handler = _REBUILD_HANDLERS.get(event.kind)
        if handler is not None:
            handler(self, seq, event)

    def _add(self, message: Message, seq: int | None = None, replay: ProviderReplay | None = None) -> None:
        self.entries.append(_Entry(_clip_message(message, self._limit), seq, replay))

    def _on_run_started(self, seq: int, event: RunStarted) -> None:
        self._add(_run_started_message(event))

    def _on_llm_completed(self, seq: int, event: LlmCompleted) -> None:
        self._add(event.message, seq, event.provider_replay)

    def _on_tool_completed(self, seq: int, event: ToolCompleted) -> None:
        for result in event.results:
            self._add(_tool_message(result.call_id, result.output, result.is_error))

    def _on_compressed(self, seq: int, event: Compressed) -> None:
        self._add(_summary_message("compressed", event.turn, event.summary))

    def _on_page_out(self, seq: int, event: PageOut) -> None:
        archived = self._load(event.archive_ref)
        if archived:
            for message in archived:
                self._add(message)
        else:
            self._add(_summary_message("paged out", event.turn, event.summary))

    def _load(self, ref: str | None) -> Sequence[Message] | None:
        if ref is None or self._loader is None:
            return None
        try:
            return self._loader(ref)
        except LookupError:
            return None

    def _on_rollbacked(self, seq: int, event: Rollbacked) -> None:
        del self.entries[event.checkpoint_history_len :]


_REBUILD_HANDLERS: dict[str, _Handler] = {
    "run_started": _Rebuilder._on_run_started,
    "llm_completed": _Rebuilder._on_llm_completed,
    "tool_completed": _Rebuilder._on_tool_completed,
    "compressed": _Rebuilder._on_compressed,
    "page_out": _Rebuilder._on_page_out,
    "rollbacked": _Rebuilder._on_rollbacked,
}


def _rebuild(
    events: Events, at: int | None, loader: ArchiveLoader | None, max_part_bytes: int | None
) -> list[_Entry]:
    rebuilder = _Rebuilder(loader, max_part_bytes)
    for seq, event in _window(events, at):
        rebuilder.feed(seq, event)
    return rebuilder.finish()


def reconstruct(
    events: Events,
    *,
    at: int | None = None,
    archive_loader: ArchiveLoader | None = None,
    max_part_bytes: int | None = None,
) -> list[Message]:
    """Rebuild the provider-neutral transcript a session had, optionally as of sequence ``at``.

    Rules, per event kind:

    * ``run_started``: a ``user`` message whose first part is the goal text, followed when ``criteria``
      is non-empty by a blank line, ``Criteria:`` and lines ``1. <c>``, ``2. <c>``...; the attachments
      follow as further parts of the same message. ``system_prompt`` is not turned into a message.
    * ``llm_completed``: its assistant ``message``, as recorded.
    * ``tool_completed``: one ``tool`` message per result, in order, each holding one
      ``ToolResultPart(call_id, output, is_error=True or None)`` (``token_count`` is dropped).
    * ``compressed``: ``system`` message ``"[compressed turn N] <summary>"`` (``(no summary recorded)``
      without one), unless a later ``page_out`` of the same turn carries an ``archive_ref``; then it adds
      nothing. "Later" looks ahead only until the first event of another turn (turns only move forward
      in a session), or the end of the input or of ``at``: events after the ``compressed`` are held back
      until then and folded in order, so the summary keeps its place.
    * ``page_out``: with an ``archive_ref`` the loader resolves to a non-empty sequence, those messages;
      otherwise (no ref, no loader, ``None``, an empty sequence, or a ``LookupError`` such as ``KeyError``)
      ``system`` message ``"[paged out turn N] <summary>"``. Other loader errors propagate.
    * ``rollbacked``: the history is truncated to its first ``checkpoint_history_len`` messages (no-op
      when it is not longer). Messages are not deleted for ``compressed.archived_seq_range``.
    * every other kind (the remaining kernel OS kinds, ``tool_requested``, ``permission_*``,
      ``tool_denied``, ``run_terminal``, ``memory_retrieval_result``, ``custom``): nothing.

    Args:
        events: ``(seq, event)`` pairs, strictly ascending seq; consumed once and lazily.
        at: Last seq to fold, inclusive; later events are never pulled. None folds everything.
        archive_loader: Maps an ``archive_ref`` to the archived messages (see ``page_out``).
        max_part_bytes: Cap in UTF-8 bytes for each text part, thinking text and tool result output
            (loaded archive messages included), applied with :func:`truncate_utf8`. None: no cap.

    Returns:
        The messages in transcript order; a list with one entry per message.

    Raises:
        ValueError: seqs are not strictly ascending, or ``max_part_bytes`` is negative.

    Source: seed 000 ``SessionEvent``; the rules are flightlog's (ARCHITECTURE.md, ``replay``).
    """
    if max_part_bytes is not None and max_part_bytes < 0:
        raise ValueError(f"max_part_bytes must be >= 0, got {max_part_bytes}")
    return [entry.message for entry in _rebuild(events, at, archive_loader, max_part_bytes)]


# ─── Pending tool calls ───────────────────────────────────────────────────────────────────────


def _calls_in(message: Message) -> Iterator[ToolCall]:
    """Tool calls of a message: its ``tool_calls``, then its ``tool_call`` content parts."""
    yield from message.tool_calls
    for part in message.content:
        if isinstance(part, ToolCallPart):
            yield ToolCall(id=part.id, name=part.name, arguments=part.arguments)


def _requested(event: SessionEvent) -> Iterable[ToolCall]:
    if isinstance(event, ToolRequested):
        return event.calls
    if isinstance(event, LlmCompleted):
        return _calls_in(event.message)
    return ()


def _settled(event: SessionEvent) -> Iterable[str]:
    if isinstance(event, ToolCompleted):
        return (result.call_id for result in event.results)
    if isinstance(event, ToolDenied):
        return (event.call_id,)
    return ()


def pending_tool_calls(events: Events, *, at: int | None = None) -> list[ToolCall]:
    """Tool calls requested but neither answered nor denied, as of ``at``.

    A call is requested by ``tool_requested.calls`` or by an ``llm_completed`` message (its ``tool_calls``
    and ``tool_call`` parts); the first request of an id counts, repeats are ignored. It is settled by a
    later ``tool_completed`` result with its id (error results included) or a ``tool_denied`` for it. Call
    ids are unique within a session, so a settled id stays settled: a result or denial seen before the
    request also settles it, and a re-request does not resurrect it. Nothing else settles a call:
    ``rollbacked`` neither cancels nor resurrects calls (a call from a rolled-back turn with no result is
    still pending, as the ledger records no outcome for it), nor do ``resumed.denied`` or
    ``operation_cancelled.pending_call_ids`` (only a ``tool_denied`` or a result settles a call here).

    Args:
        events: ``(seq, event)`` pairs, strictly ascending seq; consumed once and lazily.
        at: Last seq to fold, inclusive. None folds everything.

    Returns:
        The pending calls in request order. Memory: the pending calls plus the settled ids.

    Raises:
        ValueError: seqs are not strictly ascending.
    """
    pending: dict[str, ToolCall] = {}
    settled: set[str] = set()
    for _seq, event in _window(events, at):
        for call in _requested(event):
            if call.id not in settled:
                pending.setdefault(call.id, call)
        for call_id in _settled(event):
            settled.add(call_id)
            pending.pop(call_id, None)
    return list(pending.values())


# ─── Provider-native replay ───────────────────────────────────────────────────────────────────


def provider_replay_seed(
    events: Events,
    protocol: str,
    *,
    at: int | None = None,
    archive_loader: ArchiveLoader | None = None,
) -> list[tuple[int, ProviderReplay]]:
    """The provider-native payloads a kernel can seed a provider with on resume.

    Only ``llm_completed`` messages still in the history reconstructed as of ``at`` count (a
    ``rollbacked`` drops those past its checkpoint, exactly as :func:`reconstruct` does; pass the same
    ``archive_loader`` so page-outs contribute the same number of messages).

    Args:
        events: ``(seq, event)`` pairs, strictly ascending seq; consumed once and lazily.
        protocol: Wire protocol identity to match exactly, e.g. ``anthropic.messages``.
        at: Last seq to fold, inclusive. None folds everything.
        archive_loader: As for :func:`reconstruct`.

    Returns:
        ``(seq, provider_replay)`` for each surviving ``llm_completed`` whose ``provider_replay.protocol``
        equals ``protocol``, in seq order; the payloads are the stored models, byte-exact.

    Source: seed 000 ``ProviderReplay`` ("persisted in ``llm_completed`` for wake/preload recovery").
    """
    entries = _rebuild(events, at, archive_loader, None)
    return [
        (entry.seq, entry.replay)
        for entry in entries
        if entry.seq is not None and entry.replay is not None and entry.replay.protocol == protocol
    ]


def replay_is_native(
    events: Events,
    protocol: str,
    *,
    at: int | None = None,
    archive_loader: ArchiveLoader | None = None,
) -> bool:
    """Whether every ``llm_completed`` left in the history has a ``provider_replay`` of ``protocol``.

    When False the kernel must render the neutral transcript (:func:`reconstruct`) instead of seeding
    native blocks. A history with no ``llm_completed`` is trivially native (True). History as of ``at``,
    after rollbacks, as in :func:`provider_replay_seed`.

    Args:
        events: ``(seq, event)`` pairs, strictly ascending seq; consumed once and lazily.
        protocol: Wire protocol identity to match exactly.
        at: Last seq to fold, inclusive. None folds everything.
        archive_loader: As for :func:`reconstruct`.

    Returns:
        True when no surviving ``llm_completed`` lacks a payload of ``protocol``.
    """
    entries = _rebuild(events, at, archive_loader, None)
    return all(
        entry.replay is not None and entry.replay.protocol == protocol
        for entry in entries
        if entry.seq is not None
    )
