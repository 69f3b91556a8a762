"""Folds over a session's stored events: messages, pending calls, provider seeds.

Every function takes ``events``: an iterable of ``(seq, event)`` pairs in strictly ascending ``seq``
(as a store reads them). Each consumes the iterable once, front to back, and stops pulling as soon as
it has passed ``at`` (the event *at* ``at`` is the last one pulled when present), so a lazy store cursor
is read only as far as needed. Memory is bounded by the result (the reconstructed messages, the pending
calls), never by the number of events; there is no look-ahead.

No I/O: handoff messages come in through a caller-supplied ``archive_loader``.

Message reconstruction rules (seed 000 event kinds; the rules are flightlog's, see :func:`reconstruct`):

=================== ============================================================================
``run_started``      ``user`` message: goal, then ``Criteria:`` and numbered criteria; attachments
                     follow as further parts of the same message
``llm_completed``    the assistant ``message`` as recorded
``tool_completed``   one ``tool`` message per result, in order
``compressed``       every message put there by an event whose seq is in ``archived_seq_range``
                     (earlier summaries included) is replaced by one ``system`` summary, at the
                     place of the first of them (at the end when none is left); but an in-place
                     action (``snip_compact``, ``micro_compact``: :data:`IN_PLACE_ACTIONS`) removes
                     nothing: it applies the rewrites of the ``Custom("context_rewrite")`` recorded
                     just before it (each names a message by origin seq and ordinal, a content
                     part, and that part's new text), or nothing without one
``context_renewed``  the history restarts: the handoff's messages (``archive_loader`` on
                     ``handoff_ref``), else one ``system`` note naming the handoff
``rollbacked``       history truncated to ``checkpoint_history_len`` messages
``milestone_*``      a ``user`` message telling the model how its milestone was judged:
                     ``[MILESTONE BLOCKED: <phase> — <reason>. Address the criteria and try again.]``
                     (UPSTREAM.md §5) or ``[MILESTONE PASSED: <phase> — unlocked: <labels>]``
``custom``           ``signal_message`` and ``kernel_note`` only: a ``user`` message with its ``text`` (a
                     signal the kernel delivered at a turn boundary, :mod:`flightlog.kernel.attention`;
                     what a rolled-back turn was refused, :mod:`flightlog.kernel.denials`, or why
                     it failed, :mod:`flightlog.kernel.execution`, or that its model call timed out,
                     :mod:`flightlog.kernel.loop`)
``custom`` in an     the history is the session's items (``openai_agents.item``: one message per
OpenAI Agents SDK    Responses API item, :func:`agents_item_message`), less those a ``pop`` names and
session              those before a ``clear``; ``run_started``, ``llm_completed`` and ``tool_completed``
                     (written beside the items by ``record_result`` and the tracing processor) add nothing
anything else        nothing: ``page_out`` (its stub is already in the history: the summary of the
                     ``compressed`` it archives, or the stub output a ``tool_completed`` recorded),
                     ``page_in`` (the restored entries arrive as the ``page_in`` tool's result),
                     the other kernel OS kinds, ``custom`` (a ``context_rewrite`` is only held for
                     the ``compressed`` after it), tool requests, permissions...
=================== ============================================================================

And ``memory_retrieval_result`` adds one ``user`` message per hit, ``[MEMORY record_id=<id> kind=<kind>]
<text>`` (upstream's host form, UPSTREAM.md §8): the text is ``record.content`` read through
``archive_loader`` when it is a salted handle (``[erased]`` once the memory is erased, or with no loader),
else ``record.content`` itself.

So the history at any seq is exactly what the next model request carried: nothing archived stays
beside its summary and nothing paged out comes back twice (upstream's replay, UPSTREAM.md §10, keeps
the archived messages and adds the summary).
"""

from __future__ import annotations

import copy
import gc
import json
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from pydantic import BaseModel

from .errors import ArtifactIntegrityError
from .events import (
    Compressed,
    ContextRenewed,
    Custom,
    LlmCompleted,
    MemoryRetrievalResult,
    MilestoneAdvanced,
    MilestoneBlocked,
    ProviderReplay,
    Rollbacked,
    RunStarted,
    SessionEvent,
    ToolCompleted,
    ToolDenied,
    ToolRequested,
)
from .messages import (
    ContentPart,
    ImagePart,
    Message,
    Role,
    TextPart,
    ThinkingPart,
    ToolCall,
    ToolCallPart,
    ToolResultPart,
)

__all__ = [
    "AGENTS_CLEAR",
    "AGENTS_ITEM",
    "AGENTS_POP",
    "AGENTS_SESSION",
    "CONTEXT_REWRITE",
    "IN_PLACE_ACTIONS",
    "KERNEL_NOTE",
    "MEMORY_ERASED",
    "SIGNAL_MESSAGE",
    "TRUNCATION_SUFFIX",
    "ArchiveLoader",
    "Rebuilder",
    "agents_item_message",
    "collector_paused",
    "memory_message",
    "milestone_message",
    "pending_tool_calls",
    "provider_replay_seed",
    "reconstruct",
    "renewal_message",
    "replay_is_native",
    "summary_message",
    "system_prompt",
    "truncate_utf8",
]

_collector_lock = threading.Lock()
_collector_pauses = 0  # bulk folds currently holding the collector off (guarded by _collector_lock)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for a bulk fold, then resume it if it was on.

    A bulk fold (a whole session's replay, a LangGraph thread's index) allocates many small containers
    that stay alive (the transcript, the index) or die by reference counting; the collector's passes over
    the live ones meanwhile (young, middle and, each time the kept objects tip the long-lived threshold,
    full passes over the whole heap) find nothing to free. Nothing is left uncollected: cycles made
    meanwhile, in any thread, are collected once it is on again (the containers allocated meanwhile are
    young then, and the next young pass walks them once). Counted across threads (one lock): the collector
    is turned back on when the last overlapping pause that found it on ends, so two threads folding at
    once never leave it off; a host that turned it off itself finds it off afterwards.
    """
    global _collector_pauses
    with _collector_lock:
        if _collector_pauses == 0 and not gc.isenabled():
            paused = False  # the host turned it off: leave it as it is
        else:
            paused = True
            _collector_pauses += 1
            gc.disable()
    try:
        yield
    finally:
        if paused:
            with _collector_lock:
                _collector_pauses -= 1
                if _collector_pauses == 0:
                    gc.enable()


TRUNCATION_SUFFIX = "… [replay truncated]"
"""Appended to a part cut by ``max_part_bytes`` (22 UTF-8 bytes; counts toward the cap)."""

SIGNAL_MESSAGE = "signal_message"
"""``Custom`` kind of a delivered signal: ``{signal_id, kind, sender, disposition, text}``; replay adds
``Message.text("user", text)`` (written by :mod:`flightlog.kernel.attention`)."""

KERNEL_NOTE = "kernel_note"
"""``Custom`` kind of a note the kernel tells the model after a rollback: ``{turn, text}``; replay adds
``Message.text("user", text)`` (written by :mod:`flightlog.kernel.denials` after a denial's rollback, by
:mod:`flightlog.kernel.execution` after a ``FatalToolError``'s and by :mod:`flightlog.kernel.loop` after a
timed-out model call's)."""

_USER_NOTES = frozenset({SIGNAL_MESSAGE, KERNEL_NOTE})

AGENTS_SESSION = "openai_agents.session"
"""``Custom`` kind of seq 0 of an OpenAI Agents SDK session (:mod:`flightlog.integrations.openai_agents`):
``{"session_id"}``. From it on, the history replay rebuilds is the session's items."""
AGENTS_ITEM = "openai_agents.item"
"""``Custom`` kind of one item added to an Agents SDK session; the payload is the Responses API item."""
AGENTS_POP = "openai_agents.pop"
"""``Custom`` kind of an Agents SDK ``pop_item``: ``{"seq": <seq of the item removed>}``."""
AGENTS_CLEAR = "openai_agents.clear"
"""``Custom`` kind of an Agents SDK ``clear_session``: ``{"count"}``; the items before it are gone."""

_AGENTS_NARRATED = frozenset({"run_started", "llm_completed", "tool_completed"})
"""Kinds that add no message in an Agents SDK session: its items already hold the same conversation."""


CONTEXT_REWRITE = "context_rewrite"
"""``Custom`` kind carrying the exact rewrites of an in-place ``compressed`` (recorded just before it):
``{turn, action, rewrites: [{origin, index, part, stage, tokens_before, text}]}`` (see
:class:`Rebuilder`)."""

IN_PLACE_ACTIONS = frozenset({"snip_compact", "micro_compact"})
"""``compressed.action`` values that rewrite messages in place and archive nothing (UPSTREAM.md §1:
upstream's snip and micro tiers)."""

ArchiveLoader = Callable[[str], Sequence[Message] | None]
"""Maps an artifact ref (``context_renewed.handoff_ref``, ``page_out.archive_ref``) to its messages;
``None`` or ``LookupError`` when unknown; :class:`~flightlog.errors.ArtifactIntegrityError` when the artifact is
there but cannot be used (altered, not an archive), which the fold raises again naming the event's seq."""

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


def truncate_utf8(text: str, max_bytes: int, suffix: str = TRUNCATION_SUFFIX) -> str:
    """Cut ``text`` to at most ``max_bytes`` UTF-8 bytes, never inside a character.

    Args:
        text: Any string without lone surrogates (event text never has them: encoding refuses them).
        max_bytes: The cap in UTF-8 bytes, suffix included; >= 0.
        suffix: The marker ending a cut text (default :data:`TRUNCATION_SUFFIX`; ``""``: none, for a
            caller that marks cuts itself, as ``flightlog replay`` does).

    Returns:
        ``text`` unchanged when it fits. Otherwise the longest prefix that, followed by ``suffix``, fits in
        ``max_bytes``, plus that suffix; when ``max_bytes`` is below the suffix's bytes (22 for
        :data:`TRUNCATION_SUFFIX`), the longest prefix that fits, without suffix.

    Raises:
        ValueError: ``max_bytes`` is negative.
    """
    if max_bytes < 0:
        raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes:
        return text
    if len(suffix.encode("utf-8")) > max_bytes:
        suffix = ""
    budget = max_bytes - len(suffix.encode("utf-8"))
    # A cut inside a multi-byte character leaves an incomplete tail sequence; "ignore" drops just that.
    return encoded[:budget].decode("utf-8", errors="ignore") + suffix


@dataclass(frozen=True, slots=True)
class _Cap:
    """``max_part_bytes`` and the marker a cut part ends with (:func:`truncate_utf8`)."""

    max_bytes: int
    suffix: str


def _clip_part(part: ContentPart, limit: _Cap) -> ContentPart:
    """The part with its text, thinking or tool output cut to ``limit`` bytes (other parts as they are); a
    cut thinking part loses its signature (it signs the whole text: the cut part could not be replayed)."""
    if isinstance(part, TextPart):
        return _clipped(part, "text", part.text, limit)
    if isinstance(part, ThinkingPart):
        cut = _clipped(part, "thinking", part.thinking, limit)
        return cut if cut is part else cut.model_copy(update={"signature": None})
    if isinstance(part, ToolResultPart):
        return _clipped(part, "output", part.output, limit)
    return part


def _clipped(part: ContentPart, name: str, value: str, limit: _Cap) -> ContentPart:
    cut = truncate_utf8(value, limit.max_bytes, limit.suffix)
    return part if cut is value else part.model_copy(update={name: cut})


def _part_bytes(part: ContentPart) -> int:
    """UTF-8 bytes of the part's text, thinking or tool output (0 for other parts)."""
    if isinstance(part, TextPart):
        return len(part.text.encode("utf-8"))
    if isinstance(part, ThinkingPart):
        return len(part.thinking.encode("utf-8"))
    if isinstance(part, ToolResultPart):
        return len(part.output.encode("utf-8"))
    return 0


def _clip_message(message: Message, limit: _Cap | None) -> tuple[Message, dict[int, int] | None]:
    """The message with every long part cut (opaque data, tool-call arguments untouched; a cut thinking
    part without its signature), and the cuts: part index -> the part's UTF-8 bytes before the cut (None
    when nothing was cut)."""
    if limit is None:
        return message, None
    parts = [_clip_part(part, limit) for part in message.content]
    if all(new is old for new, old in zip(parts, message.content, strict=True)):
        return message, None
    cuts = {
        index: _part_bytes(old)
        for index, (new, old) in enumerate(zip(parts, message.content, strict=True))
        if new is not old
    }
    return message.model_copy(update={"content": parts}), cuts


# ─── Message reconstruction ───────────────────────────────────────────────────────────────────


@dataclass(slots=True)
class _Entry:
    """One history message: the seq of the event that put it there (``origin``), and for
    ``llm_completed`` messages that seq and payload again (``seq``/``replay``)."""

    message: Message
    origin: int
    seq: int | None = None
    replay: ProviderReplay | None = None
    cuts: dict[int, int] | None = None
    """The parts ``max_part_bytes`` cut: part index -> its UTF-8 bytes before the cut (None: none)."""

    @classmethod
    def clipped(
        cls, message: Message, limit: _Cap | None, origin: int, seq: int | None = None, replay: Any = None
    ) -> _Entry:
        """The entry of ``message`` with its parts cut to ``limit`` bytes (:func:`_clip_message`)."""
        clipped, cuts = _clip_message(message, limit)
        return cls(clipped, origin, seq, replay, cuts)


def _run_started_message(event: RunStarted) -> Message:
    text = event.goal
    if event.criteria:
        numbered = "\n".join(f"{i}. {c}" for i, c in enumerate(event.criteria, start=1))
        text = f"{text}\n\nCriteria:\n{numbered}"
    return Message(role="user", content=[TextPart(text=text), *event.attachments])


def _tool_message(call_id: str, output: str, is_error: bool) -> Message:
    """``Message(role="tool", content=[ToolResultPart(call_id, output, is_error=True or None)])``.

    The values come from a validated ``ToolResult`` (``str``, ``str``, ``bool``), so where they are exact
    ``str`` the two models are assembled as pydantic's validation would leave them (:func:`_assembled`:
    the same field values and fields-set), without validating them again: ~1.6 µs instead of ~3.5 µs, once
    per tool result on every replay. Anything else, or a pydantic whose models are laid out otherwise
    (:data:`_ASSEMBLE`, probed at import), takes the validating constructors.
    """
    flag = True if is_error else None
    if _ASSEMBLE and type(call_id) is str and type(output) is str:
        part = _assembled(
            ToolResultPart,
            {"type": "tool_result", "call_id": call_id, "output": output, "is_error": flag},
            {"call_id", "output", "is_error"},
        )
        return _assembled(
            Message, {"role": "tool", "content": [part], "tool_calls": [], "name": None}, {"role", "content"}
        )
    return Message(role="tool", content=[ToolResultPart(call_id=call_id, output=output, is_error=flag)])


_Model = TypeVar("_Model", bound=BaseModel)
_set_slot = object.__setattr__


def _assembled(cls: type[_Model], values: dict[str, Any], fields_set: set[str]) -> _Model:
    """An instance of ``cls`` holding ``values`` (every field, in declaration order, already valid) and
    ``fields_set`` (the fields the caller passed): the four slots validation fills, set directly (what
    pydantic's ``model_construct`` does, without its per-field default handling; ~0.4 µs)."""
    model = object.__new__(cls)
    _set_slot(model, "__dict__", values)
    _set_slot(model, "__pydantic_fields_set__", fields_set)
    _set_slot(model, "__pydantic_extra__", None)
    _set_slot(model, "__pydantic_private__", None)
    return model


def _assembly_matches() -> bool:
    """Whether :func:`_assembled` tool messages equal validated ones on this pydantic (same values, same
    fields-set, no extra or private values, same dump), for an error and a non-error result."""
    for flag in (True, None):
        validated = Message(role="tool", content=[ToolResultPart(call_id="c", output="o", is_error=flag)])
        part = _assembled(
            ToolResultPart,
            {"type": "tool_result", "call_id": "c", "output": "o", "is_error": flag},
            {"call_id", "output", "is_error"},
        )
        made = _assembled(
            Message, {"role": "tool", "content": [part], "tool_calls": [], "name": None}, {"role", "content"}
        )
        pairs = ((validated, made), (validated.content[0], part))
        if any(
            a.__dict__ != b.__dict__
            or list(a.__dict__) != list(b.__dict__)
            or a.model_fields_set != b.model_fields_set
            or (a.__pydantic_extra__, a.__pydantic_private__) != (None, None)
            or a.model_dump_json() != b.model_dump_json()
            for a, b in pairs
        ):
            return False
    return True


_ASSEMBLE = _assembly_matches()
"""True where :func:`_tool_message` may assemble its models (checked once, at import)."""


def summary_message(turn: int, summary: str | None) -> Message:
    """The ``system`` message a ``compressed`` event stands for in the history.

    Returns:
        ``"[compressed turn <turn>] <summary>"`` (``(no summary recorded)`` without one).
    """
    return Message.text("system", f"[compressed turn {turn}] {summary or '(no summary recorded)'}")


def renewal_message(event: ContextRenewed) -> Message:
    """The ``system`` message a ``context_renewed`` stands for when its handoff cannot be loaded."""
    ref = event.handoff_ref or "(none)"
    return Message.text(
        "system", f"[context renewed turn {event.turn}, sprint {event.sprint}] handoff {ref} (not loaded)"
    )


def milestone_message(event: MilestoneAdvanced | MilestoneBlocked) -> Message:
    """The ``user`` message a ``milestone_blocked``/``milestone_advanced`` stands for (module docs)."""
    if isinstance(event, MilestoneBlocked):
        text = f"[MILESTONE BLOCKED: {event.phase_id} — {event.reason}. Address the criteria and try again.]"
    else:
        unlocked = ", ".join(event.capabilities_unlocked) or "nothing"
        text = f"[MILESTONE PASSED: {event.phase_id} — unlocked: {unlocked}]"
    return Message.text("user", text)


MEMORY_ERASED = "[erased]"
"""The text of a recalled memory whose salted text is gone (erased) or cannot be read."""


def memory_message(record_id: str, kind: str, text: str) -> Message:
    """The history message of one recalled memory (upstream host form, UPSTREAM.md §8)."""
    return Message.text("user", f"[MEMORY record_id={record_id} kind={kind}] {text}")


_AGENTS_ROLES: dict[str, Role] = {
    "user": "user",
    "assistant": "assistant",
    "system": "system",
    "developer": "system",
}


def _json_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)


def _agents_parts(content: Any) -> list[ContentPart]:
    """A Responses API message's content: a string, or parts (``input_text``/``output_text``/``refusal``
    as text, ``input_image`` by its URL or file id; other parts, such as ``input_file``, as their JSON)."""
    if isinstance(content, str):
        return [TextPart(text=content)]
    parts: list[ContentPart] = []
    for part in content if isinstance(content, list) else []:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("input_text", "output_text", "text") and isinstance(part.get("text"), str):
            parts.append(TextPart(text=part["text"]))
        elif kind == "refusal" and isinstance(part.get("refusal"), str):
            parts.append(TextPart(text=part["refusal"]))
        elif kind == "input_image" and isinstance(part.get("image_url") or part.get("file_id"), str):
            parts.append(ImagePart(ref=part.get("image_url") or part["file_id"]))
        else:
            parts.append(TextPart(text=_json_text(part)))
    return parts


def agents_item_message(item: Any) -> Message | None:
    """The history message of one OpenAI Agents SDK session item (a Responses API input item).

    * a message (``type: "message"``, or a ``role`` without ``type``): that role (``developer`` as
      ``system``) and its content: a string, or parts (``input_text``/``output_text``/``refusal`` as text,
      ``input_image`` as an image by its URL or file id, any other part as its JSON text);
    * ``reasoning``: an ``assistant`` message of ``thinking`` parts, one per summary text (None without);
    * a client tool call (``function_call``, ``custom_tool_call``, ``computer_call``, ``shell_call``...: a
      ``type`` ending in ``_call`` with a ``call_id``): an ``assistant`` message with one ``ToolCall`` (``id``
      = ``call_id``; ``name``, else the type; ``arguments``, else ``input``, else the item's other fields as
      JSON);
    * its output (a ``type`` ending in ``_output`` with a ``call_id``): a ``tool`` message with one
      ``ToolResultPart`` (the ``output``, as JSON text when it is not a string);
    * anything else (hosted tool calls that ran inside a response, such as ``web_search_call``, unknown
      types): None.

    Returns:
        A new :class:`Message`, or None when the item adds no message.
    """
    if not isinstance(item, dict):
        return None
    kind = item.get("type") or ("message" if "role" in item else None)
    if kind == "message":
        role = _AGENTS_ROLES.get(str(item.get("role")))
        return None if role is None else Message(role=role, content=_agents_parts(item.get("content")))
    if kind == "reasoning":
        texts = [s.get("text") for s in item.get("summary") or [] if isinstance(s, dict)]
        parts: list[ContentPart] = [ThinkingPart(thinking=t) for t in texts if isinstance(t, str) and t]
        return Message(role="assistant", content=parts) if parts else None
    call_id = item.get("call_id")
    if not isinstance(kind, str) or not isinstance(call_id, str):
        return None
    if kind.endswith("_call"):
        rest = {k: v for k, v in item.items() if k not in ("type", "id", "call_id", "status")}
        arguments = item.get("arguments", item.get("input", rest))
        call = ToolCall(id=call_id, name=str(item.get("name") or kind), arguments=_json_text(arguments))
        return Message(role="assistant", tool_calls=[call])
    if kind.endswith("_output"):
        return Message(
            role="tool", content=[ToolResultPart(call_id=call_id, output=_json_text(item.get("output")))]
        )
    return None


class Rebuilder:
    """Incremental :func:`reconstruct`: feed events in seq order, read :attr:`entries` at any point.

    The kernel keeps one per running session (the history it sends is this fold, event by event);
    :func:`reconstruct` and the provider-replay queries run one over a window of stored events.
    """

    def __init__(
        self,
        loader: ArchiveLoader | None = None,
        max_part_bytes: int | None = None,
        *,
        keep_replay: bool = True,
        mark_cuts: bool = True,
    ) -> None:
        """Start an empty history.

        Args:
            loader: The archive loader (see :func:`reconstruct`).
            max_part_bytes: Cap per part in UTF-8 bytes (see :func:`reconstruct`); None: no cap.
            keep_replay: Keep each ``llm_completed``'s ``provider_replay`` in its entry (what
            :func:`provider_replay_seed` reads); False leaves ``entry.replay`` None, for a fold that
            returns only the messages (fewer objects kept alive, so less work for the garbage collector).
            mark_cuts: End a cut part with :data:`TRUNCATION_SUFFIX` (counted in the cap); False cuts it to
                the cap with no marker, for a caller that marks it from :meth:`cuts` (``flightlog replay``).

        Raises:
            ValueError: ``max_part_bytes`` is negative.
        """
        if max_part_bytes is not None and max_part_bytes < 0:
            raise ValueError(f"max_part_bytes must be >= 0, got {max_part_bytes}")
        self.entries: list[_Entry] = []
        self._loader = loader
        self._limit = (
            None if max_part_bytes is None else _Cap(max_part_bytes, TRUNCATION_SUFFIX if mark_cuts else "")
        )
        self._rewrite: dict[str, Any] | None = None
        self._keep_replay = keep_replay
        self._agents: set[int] | None = None  # an Agents SDK session: the seqs of its live item messages

    def feed(self, seq: int, event: SessionEvent) -> None:
        """Fold one event (in ascending seq order)."""
        self.feed_all(((seq, event),))

    def feed_all(self, events: Iterable[tuple[int, SessionEvent]]) -> None:
        """Fold ``(seq, event)`` pairs in ascending seq order (:meth:`feed` of each, in one loop)."""
        handlers = _REBUILD_HANDLERS
        for seq, event in events:
            kind = event.kind
            handler = handlers.get(kind)
            if handler is not None and (self._agents is None or kind not in _AGENTS_NARRATED):
                handler(self, seq, event)

    def fork(self) -> Rebuilder:
        """An independent copy of this fold as of the last event fed: feeding either leaves the other as it is.

        Entries are never changed in place (a rewrite replaces its entry), so the copy shares them and
        costs one list copy (O(messages) pointers); the loader and the cap are shared too.
        """
        twin = copy.copy(self)
        twin.entries = list(self.entries)
        twin._agents = None if self._agents is None else set(self._agents)
        return twin

    def messages(self) -> list[Message]:
        """The history as of the last event fed."""
        return [entry.message for entry in self.entries]

    def cuts(self) -> list[dict[int, int]]:
        """Per message of :meth:`messages`, the parts ``max_part_bytes`` cut: part index -> the part's UTF-8
        bytes before the cut (its text, thinking or tool output); ``{}`` for a message cut nowhere."""
        return [entry.cuts or {} for entry in self.entries]

    def _add(self, message: Message, origin: int) -> None:
        limit = self._limit  # no cap (every replay but --max-part-bytes): no clip call, no cuts tuple
        self.entries.append(
            _Entry(message, origin) if limit is None else _Entry.clipped(message, limit, origin)
        )

    def _on_run_started(self, seq: int, event: RunStarted) -> None:
        self._add(_run_started_message(event), seq)

    def _on_llm_completed(self, seq: int, event: LlmCompleted) -> None:
        replay = event.provider_replay if self._keep_replay else None
        limit = self._limit
        self.entries.append(
            _Entry(event.message, seq, seq, replay)
            if limit is None
            else _Entry.clipped(event.message, limit, seq, seq, replay)
        )

    def _on_tool_completed(self, seq: int, event: ToolCompleted) -> None:
        if self._limit is not None:
            for result in event.results:
                self._add(_tool_message(result.call_id, result.output, result.is_error), seq)
            return
        append = self.entries.append  # no cap: :meth:`_add` without its call per result
        for result in event.results:
            append(_Entry(_tool_message(result.call_id, result.output, result.is_error), seq))

    def _on_custom(self, seq: int, event: Custom) -> None:
        if event.custom_kind == CONTEXT_REWRITE and isinstance(event.payload, dict):
            self._rewrite = event.payload
        elif event.custom_kind in _USER_NOTES and isinstance(event.payload, dict):
            self._add(Message.text("user", str(event.payload.get("text", ""))), seq)
        elif event.custom_kind == AGENTS_SESSION and seq == 0:
            self._agents = set()
        elif self._agents is not None:
            self._on_agents_record(seq, event.custom_kind, event.payload, self._agents)

    def _on_agents_record(self, seq: int, kind: str, payload: Any, items: set[int]) -> None:
        """An Agents SDK session's item (a message), pop (the item it names goes) or clear (all go)."""
        if kind == AGENTS_ITEM:
            message = agents_item_message(payload)
            if message is not None:
                self._add(message, seq)
                items.add(seq)
            return
        if kind == AGENTS_POP and isinstance(payload, dict):
            gone = {payload.get("seq")}
        elif kind == AGENTS_CLEAR:
            gone = set(items)
        else:
            return
        self.entries = [entry for entry in self.entries if entry.origin not in gone]
        items.difference_update(g for g in gone if isinstance(g, int))

    def _on_compressed(self, seq: int, event: Compressed) -> None:
        if event.action in IN_PLACE_ACTIONS:
            rewrite, self._rewrite = self._rewrite, None
            if rewrite is not None and rewrite.get("turn") == event.turn:
                self._apply_rewrites(rewrite.get("rewrites"))
            return
        low, high = event.archived_seq_range
        kept = [entry for entry in self.entries if not low <= entry.origin <= high]
        at = next((i for i, entry in enumerate(self.entries) if low <= entry.origin <= high), None)
        position = len(kept) if at is None else at
        kept.insert(position, _Entry.clipped(summary_message(event.turn, event.summary), self._limit, seq))
        self.entries = kept

    def _apply_rewrites(self, rewrites: Any) -> None:
        """Replace the named parts' text in place; a rewrite that names no such text or tool-result part
        (a changed ledger) is skipped, so the rebuilt request differs and ``replay --check`` says so."""
        for rewrite in rewrites if isinstance(rewrites, list) else ():
            if not isinstance(rewrite, dict) or not isinstance(rewrite.get("text"), str):
                continue
            matching = [i for i, e in enumerate(self.entries) if e.origin == rewrite.get("origin")]
            index, part = rewrite.get("index"), rewrite.get("part")
            if not isinstance(index, int) or not 0 <= index < len(matching) or not isinstance(part, int):
                continue
            entry = self.entries[matching[index]]
            content = list(entry.message.content)
            if not 0 <= part < len(content):
                continue
            target = content[part]
            if isinstance(target, TextPart):
                content[part] = target.model_copy(update={"text": rewrite["text"]})
            elif isinstance(target, ToolResultPart):
                content[part] = target.model_copy(update={"output": rewrite["text"]})
            else:
                continue
            message, cuts = _clip_message(entry.message.model_copy(update={"content": content}), self._limit)
            self.entries[matching[index]] = replace(
                entry, message=message, cuts=cuts
            )  # never in place: fork()

    def _on_context_renewed(self, seq: int, event: ContextRenewed) -> None:
        handoff = self._load(event.handoff_ref, seq)
        messages = list(handoff) if handoff else [renewal_message(event)]
        self.entries = [_Entry.clipped(message, self._limit, seq) for message in messages]

    def _load(self, ref: str | None, seq: int) -> Sequence[Message] | None:
        """What the loader gives for ``ref`` (None: no ref, no loader, or ``LookupError``: unknown); an
        :class:`~flightlog.errors.ArtifactIntegrityError` it raises is raised again naming ``seq``, the event
        that references the artifact."""
        if not ref or self._loader is None:
            return None
        try:
            return self._loader(ref)
        except LookupError:
            return None
        except ArtifactIntegrityError as exc:
            raise exc.named_by(seq=seq) from exc

    def _on_rollbacked(self, seq: int, event: Rollbacked) -> None:
        del self.entries[event.checkpoint_history_len :]

    def _on_milestone(self, seq: int, event: MilestoneAdvanced | MilestoneBlocked) -> None:
        self._add(milestone_message(event), seq)

    def _on_memory_retrieval_result(self, seq: int, event: MemoryRetrievalResult) -> None:
        for hit in event.hits:
            content = hit.record.content
            if content.startswith("salted:"):
                loaded = self._load(content, seq)
                text = loaded[0].text_content() if loaded else MEMORY_ERASED
            else:
                text = content
            self._add(memory_message(hit.record.record_id, hit.record.kind.value, text), seq)


_REBUILD_HANDLERS: dict[str, _Handler] = {
    "run_started": Rebuilder._on_run_started,
    "llm_completed": Rebuilder._on_llm_completed,
    "tool_completed": Rebuilder._on_tool_completed,
    "compressed": Rebuilder._on_compressed,
    "custom": Rebuilder._on_custom,
    "context_renewed": Rebuilder._on_context_renewed,
    "rollbacked": Rebuilder._on_rollbacked,
    "milestone_advanced": Rebuilder._on_milestone,
    "milestone_blocked": Rebuilder._on_milestone,
    "memory_retrieval_result": Rebuilder._on_memory_retrieval_result,
}


def _rebuild(
    events: Events,
    at: int | None,
    loader: ArchiveLoader | None,
    max_part_bytes: int | None,
    *,
    keep_replay: bool = True,
) -> list[_Entry]:
    rebuilder = Rebuilder(loader, max_part_bytes, keep_replay=keep_replay)
    for seq, event in _window(events, at):
        rebuilder.feed(seq, event)
    return rebuilder.entries


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
    * ``compressed``: every history message put there by an event whose seq lies in
      ``archived_seq_range`` (inclusive; an earlier ``compressed``'s summary included) is removed, and
      :func:`summary_message` (``"[compressed turn N] <summary>"``, ``(no summary recorded)`` without one)
      takes the place of the first removed message, or goes last when none was left. An in-place action
      (:data:`IN_PLACE_ACTIONS`) removes nothing: the rewrites of the ``Custom("context_rewrite")`` just
      before it (same ``turn``) replace the named text or tool output in place; without one, nothing.
    * ``context_renewed``: the history restarts from the handoff: the messages ``archive_loader`` returns
      for ``handoff_ref``; with none (no ref, no loader, ``None``, empty, or a ``LookupError``),
      :func:`renewal_message`. Other loader errors propagate (an
      :class:`~flightlog.errors.ArtifactIntegrityError` naming the event's seq).
    * ``rollbacked``: the history is truncated to its first ``checkpoint_history_len`` messages (no-op
      when it is not longer).
    * ``custom`` of kind ``signal_message`` (:data:`SIGNAL_MESSAGE`) or ``kernel_note``
      (:data:`KERNEL_NOTE`): a ``user`` message holding the payload's ``text``; other ``custom`` kinds add
      nothing.
    * ``page_out`` and ``page_in``: nothing (see the module table: their stubs and restored entries
      are carried by the events around them, so nothing appears twice).
    * ``memory_retrieval_result``: one ``user`` message per hit, :func:`memory_message`
      (``"[MEMORY record_id=<id> kind=<kind>] <text>"``, upstream's host form, UPSTREAM.md §8); the text
      is the first message ``archive_loader`` returns for a salted ``record.content`` handle
      (:data:`MEMORY_ERASED` when it returns none), else ``record.content`` itself.
    * an OpenAI Agents SDK session (seq 0 is ``custom`` :data:`AGENTS_SESSION`): from then on the history is
      the session's items, what the SDK sends its model: each ``custom`` :data:`AGENTS_ITEM` adds
      :func:`agents_item_message` of its payload (nothing when that is None), an :data:`AGENTS_POP` removes
      the message of the item whose seq it names, an :data:`AGENTS_CLEAR` removes every item's message; and
      ``run_started``, ``llm_completed`` and ``tool_completed`` add nothing there (``record_result`` and the
      tracing processor write them beside the items, about the same messages).
    * every other kind (the remaining kernel OS kinds, ``tool_requested``, ``permission_*``,
      ``tool_denied``, ``run_terminal``, other ``custom``): nothing (a
      ``context_rewrite`` custom is held for the in-place ``compressed`` that follows it).

    Args:
        events: ``(seq, event)`` pairs, strictly ascending seq; consumed once and lazily.
        at: Last seq to fold, inclusive; later events are never pulled. None folds everything.
        archive_loader: Maps a ``handoff_ref`` to the handoff's messages (see ``context_renewed``).
        max_part_bytes: Cap in UTF-8 bytes for each text part, thinking text and tool result output
            (loaded archive messages included), applied with :func:`truncate_utf8`. None: no cap.

    Returns:
        The messages in transcript order; a list with one entry per message.

    Raises:
        ValueError: seqs are not strictly ascending, or ``max_part_bytes`` is negative.

    Source: seed 000 ``SessionEvent``; the rules are flightlog's (ARCHITECTURE.md, ``replay``).
    """
    entries = _rebuild(events, at, archive_loader, max_part_bytes, keep_replay=False)
    return [entry.message for entry in entries]


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


def system_prompt(events: Events, *, at: int | None = None) -> str | None:
    """The system prompt the model had as of seq ``at`` (inclusive; None: the head): the
    ``system_prompt`` of the last ``run_started`` up to there (seed 000 ``RunStarted.system_prompt``; the
    kernel sends it beside the history, so :func:`reconstruct` does not make it a message).

    Returns:
        The prompt, or None when no run started by then or the run has none.

    Raises:
        ValueError: seqs are not strictly ascending.
    """
    prompt: str | None = None
    for _seq, event in _window(events, at):
        if isinstance(event, RunStarted):
            prompt = event.system_prompt
    return prompt


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
    ``archive_loader`` so renewals contribute the same handoff messages).

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
