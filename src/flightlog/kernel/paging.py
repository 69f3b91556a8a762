"""Paging: large tool outputs to content-addressed artifacts, and the built-in context tools.

**Page-out on arrival.** A tool result estimated above the policy's limit
(:meth:`~flightlog.kernel.context.ContextPolicy.page_limit`) is written to the artifact store as a
one-message archive (the JSON message list :func:`flightlog.sessions.archive_loader` reads), and the
``tool_completed`` records a stub in its place (upstream micro-compaction's
``[tool result: <call_id> | <tool> | <N> tokens]`` header, the archive ref, a head and tail excerpt), so
the call and its result stay paired and the history never holds the full output. In the same
transaction, after the ``tool_completed``: ``page_out(turn, action="micro_compact", summary=<stub
header>, tier_hint="durable", message_count=1, archive_ref)`` (upstream: ``durable`` for snip/micro).
The artifact's sha256 is in the ledger, so the output stays bound to the chain.

**Built-in tools** (offered when ``ContextPolicy.tools``; ``read_only``):

``page_in(ref, start=0, count=20)``  the archived messages of ``ref`` (a compaction archive or a paged-out
                                     output) as text; recorded as ``page_in(turn, entry_count)`` with the
                                     ``tool_completed`` that carries them (so replay shows them once, in
                                     the tool result)
``pin(call_id)``                     keep a tool result through compactions (``Custom("context_pin")``;
                                     named in ``compressed.preserved_refs`` as ``call:<id>``)
``renew_context(progress, open_items)`` rotate to a new sprint after this turn
                                     (:mod:`flightlog.kernel.renewal`)

The tools reach the running kernel through a context variable set while a turn's calls execute.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..messages import Message, ToolResult, ToolResultPart
from .compaction import messages_text
from .tools import Tool, tool

__all__ = [
    "BUILTIN_TOOLS",
    "ContextAccess",
    "Notes",
    "builtin_tools",
    "current_access",
    "stub_output",
]

PAGE_IN = "page_in"
"""Name of the built-in tool that reads an archive back."""
PIN = "pin"
"""Name of the built-in tool that pins a tool result."""
RENEW = "renew_context"
"""Name of the built-in tool that renews the context."""


@dataclass
class Notes:
    """What the built-in tools asked for during one turn's execution (in memory; re-run after a crash)."""

    page_ins: dict[str, int] = field(default_factory=dict)
    pins: list[str] = field(default_factory=list)
    renew: dict[str, Any] | None = None


class ContextAccess(Protocol):
    """What the built-in tools need from the running kernel."""

    notes: Notes

    def load_archive(self, ref: str) -> list[Message] | None:
        """The messages of an archive ref, or None when unknown (``ArtifactIntegrityError`` when stored
        altered: ``page_in`` then stops the run, never answers with forged messages)."""
        ...


_ACCESS: ContextVar[ContextAccess | None] = ContextVar("flightlog_context_access", default=None)


def current_access() -> ContextVar[ContextAccess | None]:
    """The context variable the kernel sets while a turn's calls run."""
    return _ACCESS


def _access() -> ContextAccess:
    access = _ACCESS.get()
    if access is None:
        raise RuntimeError("context tools only run inside a kernel turn")
    return access


@tool(effect="read_only")
def page_in(ref: str, start: int = 0, count: int = 20) -> str:
    """Read archived messages back: a compaction archive or a paged-out tool output.

    Args:
        ref: The archive reference, ``sha256:...``, as named by a compaction summary or a stub.
        start: Index of the first archived message to return (0-based).
        count: How many archived messages to return (1 to 200).
    """
    access = _access()
    messages = access.load_archive(ref)
    if messages is None:
        raise LookupError(f"no archive {ref!r} in this store")
    count = max(1, min(count, 200))
    chosen = messages[max(0, start) : max(0, start) + count]
    access.notes.page_ins[_call_key(ref, start, count)] = len(chosen)
    header = f"[archive {ref}: messages {start}..{start + len(chosen) - 1} of {len(messages)}]"
    return f"{header}\n\n{messages_text(chosen)}" if chosen else f"{header} (none in that range)"


def _call_key(ref: str, start: int, count: int) -> str:
    return f"{ref}|{start}|{count}"


@tool(effect="read_only")
def pin(call_id: str) -> str:
    """Keep a tool result in context: compactions copy it verbatim into their summary.

    Args:
        call_id: The id of the tool call whose result must be kept.
    """
    access = _access()
    if call_id not in access.notes.pins:
        access.notes.pins.append(call_id)
    return f"pinned {call_id}"


@tool(effect="read_only")
def renew_context(progress: str, open_items: list[str] | None = None) -> str:
    """Start a fresh context after this turn: the history restarts from a handoff note.

    Args:
        progress: What is done so far (goes into the handoff).
        open_items: What is still to do (goes into the handoff).
    """
    _access().notes.renew = {"progress": progress, "open_items": list(open_items or [])}
    return "the context will be renewed after this turn"


BUILTIN_TOOLS: tuple[Tool, ...] = (page_in, pin, renew_context)
"""The built-in context tools, in the order they are offered."""


def builtin_tools(existing: Sequence[Tool]) -> tuple[Tool, ...]:
    """The built-in tools whose names the agent's own tools do not already take."""
    names = {t.name for t in existing}
    return tuple(t for t in BUILTIN_TOOLS if t.name not in names)


def stub_output(result: ToolResult, tool_name: str, tokens: int, ref: str, limit_tokens: int) -> str:
    """The stub a paged-out result keeps: header, archive ref, head and tail excerpts.

    Args:
        result: The full result.
        tool_name: Its tool.
        tokens: Its estimated size, in tokens.
        ref: The archive ref (``sha256:<hex>``).
        limit_tokens: The page-out limit; the excerpts take about a quarter of it (4 chars a token).
    """
    budget = max(40, limit_tokens) * 4 // 4
    head, tail = budget * 3 // 4, budget // 4
    text = result.output
    excerpt = (
        text if len(text) <= head + tail else f"{text[:head]}\n…\n{text[-tail:]}" if tail else text[:head]
    )
    return (
        f"[tool result: {result.call_id} | {tool_name} | {tokens} tokens | paged out to {ref}; "
        f'call page_in(ref="{ref}") to read it]\n{excerpt}'
    )


def archived_result(result: ToolResult) -> Message:
    """The one message a paged-out result's archive holds."""
    part = ToolResultPart(
        call_id=result.call_id, output=result.output, is_error=True if result.is_error else None
    )
    return Message(role="tool", content=[part])


def tokens_of(text: str, tokens_per_char: float) -> int:
    """Estimated tokens of a text: ``ceil(len(text) x tokens_per_char)``."""
    return math.ceil(len(text) * tokens_per_char)
