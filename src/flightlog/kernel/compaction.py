"""Compaction: which part of the history to archive, the summary request, and the rule summary.

Pure functions over the kernel's history fold (:class:`~flightlog.replay.Rebuilder` entries, each with the
seq of the event that put it there); the activation (:mod:`flightlog.kernel.activation_context`) records the
decisions.

**Selection** (:func:`plan_compaction`). The history is the pinned head (the ``run_started`` goal with its
criteria and attachments, or a ``context_renewed`` handoff; never archived), then *units*: a model answer
with the tool results that follow it (a tool call and its result are never split), or an earlier summary.
The last ``keep_turns`` answer units are never archived (upstream ``preserve_recent_turns`` 2). From the
oldest unit on, whole units are archived until the estimated fill is at most the target (upstream
``target_after_compress`` 0.65 of the usable window); a forced compaction (the provider said "too long")
archives every unit it may (upstream's target 0). The archived entries' origins must form one seq range
that no kept message comes from (``compressed.archived_seq_range`` replaces exactly that range on replay);
the selection grows by whole units until they do.

**Pinned content** is preserved and named in ``preserved_refs``: ``goal``, ``criteria``,
``attachment:<ref>`` (kept in the head), and ``call:<id>`` for each tool result the agent pinned with
the built-in ``pin`` tool: a pinned result inside the archived range is copied verbatim into the summary.

**Summary** (:func:`summary_request`): one model call (a turn transaction of its own, tokens against the
budget) with a fixed system prompt asking for upstream's six slots (``constraints``, ``decisions``,
``artifacts``, ``open_questions``, ``failures``, ``next_actions``) over a plain-text rendering of the
archived messages. When that call keeps failing, :func:`rule_summary` writes a deterministic summary in
the same layout (upstream ``RuleSummarizer``: ``[Compressed: <label>]``, counts, six slots).

Records: ``Custom("compaction_started", Plan.to_wire())`` + ``prompt_program_invoked(actor="compactor")``
before the call; then ``model_usage``, ``page_out`` (the archived messages in a content-addressed
artifact, ``tier_hint`` ``semantic`` as upstream for collapse/auto) and ``compressed(turn,
archived_seq_range, action, summary, summary_tokens, preserved_refs)`` in one transaction.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from ..messages import Message, ToolResultPart
from ..providers.base import ModelRequest
from ..replay import Rebuilder
from .records import COMPACTION_FAILED, COMPACTION_STARTED

__all__ = [
    "COMPACTION_FAILED",
    "COMPACTION_STARTED",
    "SLOTS",
    "SUMMARY_SYSTEM_PROMPT",
    "Plan",
    "messages_text",
    "plan_compaction",
    "rule_summary",
    "summary_request",
]

SLOTS = ("constraints", "decisions", "artifacts", "open_questions", "failures", "next_actions")
"""Upstream's six summary slots, in order (UPSTREAM.md §1, deepstrike ``context/summarizer.rs``)."""

SUMMARY_SYSTEM_PROMPT = (
    "You compress the working history of an autonomous agent so it can continue its task with less "
    "context. Write a faithful summary of the archived messages you are given, under exactly these "
    "headings, in this order, each followed by at most six '- ' bullet lines ('- none' when empty): "
    + ", ".join(f"{slot}:" for slot in SLOTS)
    + ". Keep file names, identifiers, numbers and error messages exact. Do not invent anything."
)
"""The compactor's system prompt (part of its ``prompt_program_compiled``; changing it changes digests)."""

_HEAD_KINDS = frozenset({"run_started", "context_renewed"})


@dataclass(frozen=True)
class Plan:
    """One compaction decision (``compaction_started`` payload).

    Attributes:
        turn: The turn whose model call it precedes.
        action: ``context_collapse`` or ``auto_compact`` (upstream labels).
        trigger: ``threshold`` (fill above ``compact_at``), ``overflow`` (the provider said "too long")
            or ``renewal`` (before a context renewal).
        seq_range: ``(first, last)`` seqs whose messages are archived, inclusive.
        message_count: Messages archived.
        archived_tokens: Their estimated size, in tokens.
        fill_tokens: Estimated fill before compacting, in tokens.
        preserved_refs: Pinned content kept (see the module docs).
    """

    turn: int
    action: str
    trigger: str
    seq_range: tuple[int, int]
    message_count: int
    archived_tokens: int
    fill_tokens: int
    preserved_refs: tuple[str, ...]

    def to_wire(self) -> dict[str, Any]:
        """The ``compaction_started`` payload."""
        return {
            "turn": self.turn,
            "action": self.action,
            "trigger": self.trigger,
            "archived_seq_range": list(self.seq_range),
            "message_count": self.message_count,
            "archived_tokens": self.archived_tokens,
            "fill_tokens": self.fill_tokens,
            "preserved_refs": list(self.preserved_refs),
        }

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> Plan:
        """Inverse of :meth:`to_wire`."""
        low, high = data["archived_seq_range"]
        return cls(
            turn=int(data["turn"]),
            action=str(data["action"]),
            trigger=str(data["trigger"]),
            seq_range=(int(low), int(high)),
            message_count=int(data["message_count"]),
            archived_tokens=int(data["archived_tokens"]),
            fill_tokens=int(data["fill_tokens"]),
            preserved_refs=tuple(data.get("preserved_refs", [])),
        )


def _units(kinds: Sequence[str], origins: Sequence[int], start: int) -> list[list[int]]:
    """Indexes from ``start`` grouped into units: an answer with the tool results after it, or one other
    message (a summary...)."""
    units: list[list[int]] = []
    for index in range(start, len(origins)):
        kind = kinds[origins[index]] if origins[index] < len(kinds) else "unknown"
        if kind == "tool_completed" and units:
            units[-1].append(index)
        else:
            units.append([index])
    return units


def _head(kinds: Sequence[str], origins: Sequence[int]) -> int:
    """Number of leading messages that are the pinned head (goal or handoff)."""
    count = 0
    while count < len(origins) and kinds[origins[count]] in _HEAD_KINDS:
        count += 1
    return count


def plan_compaction(
    entries_origins: Sequence[int],
    kinds: Sequence[str],
    sizes: Sequence[int],
    *,
    turn: int,
    action: str,
    trigger: str,
    fill_tokens: int,
    target_tokens: int,
    keep_turns: int,
    preserved_refs: Sequence[str],
    force: bool = False,
) -> Plan | None:
    """Choose what to archive (see the module docs).

    Args:
        entries_origins: For each history message, the seq of the event that put it there.
        kinds: Event kind by seq.
        sizes: Estimated tokens of each history message.
        turn: The turn the compaction precedes.
        action: Upstream label to record.
        trigger: ``threshold``, ``overflow`` or ``renewal``.
        fill_tokens: Estimated fill now, in tokens.
        target_tokens: Fill to get down to, in tokens.
        keep_turns: Most recent answer units never archived.
        preserved_refs: Pinned refs to record.
        force: Archive every unit that may be archived (ignore the target).

    Returns:
        The plan, or None when nothing can be archived (only the head and the kept turns).
    """
    units = _units(kinds, entries_origins, _head(kinds, entries_origins))
    answers = [i for i, unit in enumerate(units) if kinds[entries_origins[unit[0]]] == "llm_completed"]
    protected = answers[-keep_turns] if keep_turns and len(answers) >= keep_turns else len(units)
    if keep_turns and len(answers) < keep_turns:
        protected = answers[0] if answers else len(units)
    candidates = units[:protected]
    chosen = 0
    removed = 0
    while chosen < len(candidates) and (force or fill_tokens - removed > target_tokens):
        removed += sum(sizes[i] for i in candidates[chosen])
        chosen += 1
    while chosen <= len(candidates):
        indexes = [i for unit in candidates[:chosen] for i in unit]
        if not indexes:
            return None
        low = min(entries_origins[i] for i in indexes)
        high = max(entries_origins[i] for i in indexes)
        chosen_set = set(indexes)
        clash = any(low <= origin <= high for i, origin in enumerate(entries_origins) if i not in chosen_set)
        if not clash:
            return Plan(
                turn=turn,
                action=action,
                trigger=trigger,
                seq_range=(low, high),
                message_count=len(indexes),
                archived_tokens=sum(sizes[i] for i in indexes),
                fill_tokens=fill_tokens,
                preserved_refs=tuple(preserved_refs),
            )
        chosen += 1
    return None


def archived_messages(rebuilder: Rebuilder, seq_range: Sequence[int]) -> list[Message]:
    """The history messages whose origin lies in ``seq_range`` (inclusive), in history order."""
    low, high = seq_range
    return [entry.message for entry in rebuilder.entries if low <= entry.origin <= high]


def _pinned_results(messages: Sequence[Message], refs: Collection[str]) -> list[str]:
    pinned = {ref.removeprefix("call:") for ref in refs if ref.startswith("call:")}
    lines: list[str] = []
    for message in messages:
        for part in message.content:
            if isinstance(part, ToolResultPart) and part.call_id in pinned:
                lines.append(f"[pinned result {part.call_id}]\n{part.output}")
    return lines


def summary_request(rebuilder: Rebuilder, plan: dict[str, Any], max_tokens: int) -> ModelRequest:
    """The summary call for a ``compaction_started`` payload, rebuilt from the history fold.

    Deterministic: the same history and plan always give the same request (``replay --check`` relies on it).
    """
    archived = archived_messages(rebuilder, plan["archived_seq_range"])
    text = (
        f"Archived messages ({len(archived)}, compaction before turn {plan['turn']}, "
        f"action {plan['action']}):\n\n{messages_text(archived)}\n\nWrite the summary now."
    )
    return ModelRequest(
        system_prompt=SUMMARY_SYSTEM_PROMPT,
        messages=[Message.text("user", text)],
        tools=(),
        native_seed=None,
        max_tokens=max_tokens,
        stream=False,
    )


def finished_summary(text: str, archived: Sequence[Message], plan: Plan, archive_ref: str | None) -> str:
    """The recorded summary: the model's (or rule) text, pinned results verbatim, and the archive ref."""
    parts = [text.strip()]
    parts += _pinned_results(archived, plan.preserved_refs)
    if archive_ref:
        parts.append(
            f"(The {plan.message_count} archived messages are in {archive_ref}; "
            f"call page_in with that ref to read them again.)"
        )
    return "\n\n".join(part for part in parts if part)


def rule_summary(archived: Sequence[Message], plan: Plan) -> str:
    """A deterministic six-slot summary (upstream ``RuleSummarizer`` layout) for when the model call fails."""
    slots: dict[str, list[str]] = {slot: [] for slot in SLOTS}
    for message in archived:
        text = message.text_content().strip()
        if message.role == "assistant" and text:
            slots["decisions"].append(text.splitlines()[0][:200])
        for call in message.tool_calls:
            slots["artifacts"].append(f"{call.name}({call.arguments[:120]})")
        for part in message.content:
            if isinstance(part, ToolResultPart) and part.is_error:
                slots["failures"].append(
                    f"{part.call_id}: {part.output.splitlines()[0][:200] if part.output else ''}"
                )
        if text.endswith("?"):
            slots["open_questions"].append(text[-200:])
    lines = [
        f"[Compressed: {plan.action}]",
        f"archived_messages: {plan.message_count}; archived_tokens: {plan.archived_tokens}",
    ]
    for slot in SLOTS:
        items = slots[slot]
        lines.append(f"{slot}:")
        lines += [f"- {item}" for item in items[:6]] or ["- none"]
        if len(items) > 6:
            lines.append(f"- (+{len(items) - 6} more)")
    return "\n".join(lines)


def summary_tokens(text: str, reported_output: int) -> int:
    """Tokens of a summary: the provider's reported output tokens, else ``max(1, ceil(chars / 4))``
    (upstream Node/Python rule)."""
    return reported_output if reported_output > 0 else max(1, math.ceil(len(text) / 4))


def messages_text(messages: Sequence[Message]) -> str:
    """A plain-text rendering of messages: ``role: text``, tool calls and results named, one block each."""
    blocks: list[str] = []
    for message in messages:
        lines = [message.text_content()]
        lines += [f"[call {c.id} {c.name}({c.arguments})]" for c in message.tool_calls]
        for part in message.content:
            wire = part.to_wire()
            if wire.get("type") == "tool_call":
                lines.append(f"[call {wire.get('id')} {wire.get('name')}({wire.get('arguments')})]")
            elif wire.get("type") == "tool_result":
                lines.append(f"[result {wire.get('call_id')}] {wire.get('output')}")
        body = "\n".join(line for line in lines if line)
        blocks.append(f"{message.role}: {body}")
    return "\n\n".join(blocks)


def archive_bytes(messages: Sequence[Message]) -> bytes:
    """The page-out artifact: the messages as a JSON list of wire messages (what
    :func:`flightlog.sessions.archive_loader` reads back), compact, keys sorted."""
    return json.dumps(
        [m.to_wire() for m in messages], sort_keys=True, separators=(",", ":"), ensure_ascii=False
    ).encode("utf-8")
