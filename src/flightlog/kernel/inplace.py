"""In-place compaction: upstream's snip and micro tiers (``snip_compact``, ``micro_compact``).

Pure functions over the kernel's history fold (:class:`~flightlog.replay.Rebuilder` entries); the loop
records the decision. Upstream (UPSTREAM.md §1, deepstrike ``context/compression.rs``) runs these two
stages before archiving anything, on ``rho = fill / window``:

* **snip** (above ``snip_at``, 0.70): every *text* message over the per-message cap
  (``max(50, floor(usable x 0.05))`` tokens, and over 10 tokens) keeps a head of ``cap // 2`` tokens and
  a tail of ``cap - cap // 2``, joined by ``… [… N tokens omitted …] …``;
* **micro** (above ``micro_at``, 0.80; it snips first): every tool result of 200 tokens or more whose
  call is not pinned becomes ``[tool result: <call_id> | <tool> | <N> tokens]`` plus an excerpt: for
  outputs over 2000 tokens a JSON outline (keys and short scalar fields, or an array's length and first
  keys) when the output is JSON, else a 30/10-token head/tail; otherwise a 150/50-token head/tail.

The cascade stops after a stage once the estimate is at most the target (0.65 of the usable window).
Upstream archives nothing and writes no summary for these tiers. flightlog differs where it can do
better, and says so:

* it never rewrites the pinned head (goal, criteria, attachments, a renewal handoff), the last
  ``keep_turns`` turns (upstream only protects a cache prefix), results already paged out, or
  ``page_in`` results;
* with the built-in context tools on, the original messages go to a content-addressed archive first
  (``page_out``, ``tier_hint`` ``durable`` as upstream labels these tiers) and every cut names it
  (``page_in(ref, start)`` restores the message), so nothing the model saw is lost to it;
* the exact new text of every rewritten part is recorded (``Custom("context_rewrite")``, just before the
  ``compressed``), so replay reproduces the request byte for byte (``replay --check``) instead of
  re-running a tokenizer.

Records, one transaction: ``Custom("context_rewrite", {turn, action, rewrites: [{origin, index, part,
stage, tokens_before, text}]})``, [``page_out(turn, action, summary, tier_hint="durable", message_count,
archive_ref)``], ``compressed(turn, archived_seq_range=(first, last) origin seqs of the rewritten
messages, action, preserved_refs)`` with no ``summary`` (upstream: none when nothing is archived).
The label is the tier asked for (upstream attributes a cascade to the requested action); each rewrite
names the ``stage`` that made it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from ..events import Compressed, Custom, Event, PageOut
from ..messages import Message, TextPart, ToolResultPart
from ..replay import CONTEXT_REWRITE, Rebuilder
from .compaction import _HEAD_KINDS, _units, archive_bytes

__all__ = ["CONTEXT_REWRITE", "InPlacePlan", "Target", "excerpt", "json_outline", "plan_in_place"]

SNIP_MIN_TOKENS = 10
"""Upstream: a text message of at most this many tokens is never snipped."""
MICRO_MIN_TOKENS = 200
"""Upstream: only messages of at least this many tokens have their tool results excerpted."""
MICRO_LARGE_TOKENS = 2000
"""Upstream: above this, a tool result is outlined (JSON) or cut to 30/10 tokens instead of 150/50."""
STUB_PREFIX = "[tool result: "
_SNIPPED = re.compile(r"… \[… \d+ tokens omitted")
"""How a paged-out or micro-compacted result starts (never rewritten again)."""


def excerpt(
    text: str, head_tokens: int, tail_tokens: int, total_tokens: int, per_char: float, hint: str
) -> str:
    """``text`` cut to a head and a tail (upstream ``excerpt_text``), or unchanged when it fits.

    Args:
        text: The text.
        head_tokens: Tokens to keep at the start.
        tail_tokens: Tokens to keep at the end.
        total_tokens: The text's estimated size, in tokens (names the omitted count).
        per_char: Tokens per character (the route's calibration) to turn tokens into characters.
        hint: Appended inside the marker (how to read the whole text back), may be empty.

    Returns:
        ``<head>… [… N tokens omitted<hint> …] …<tail>``.
    """
    if total_tokens <= head_tokens + tail_tokens:
        return text
    head_chars = math.floor(head_tokens / per_char)
    tail_chars = math.floor(tail_tokens / per_char)
    omitted = total_tokens - head_tokens - tail_tokens
    tail = text[len(text) - tail_chars :] if tail_chars else ""
    return f"{text[:head_chars]}… [… {omitted} tokens omitted{hint} …] …{tail}"


def json_outline(output: str) -> str | None:
    """Upstream's JSON excerpt of a large tool result: an object's keys and its numbers, booleans and
    strings of at most 50 characters; an array's length and its first item's keys; None otherwise."""
    try:
        value = json.loads(output)
    except ValueError:
        return None
    if isinstance(value, dict):
        fields = []
        for key, item in value.items():
            if isinstance(item, bool):
                fields.append(f"{key}: {'true' if item else 'false'}")
            elif isinstance(item, int | float):
                fields.append(f"{key}: {item}")
            elif isinstance(item, str) and len(item) <= 50:
                fields.append(f'{key}: "{item}"')
        return f"JSON Keys: [{', '.join(value)}]\nJSON Fields: {{{', '.join(fields)}}}"
    if isinstance(value, list):
        if not value:
            return "JSON Array: []"
        keys = list(value[0]) if isinstance(value[0], dict) else []
        return f"JSON Array: {len(value)} items. Keys: [{', '.join(keys)}]"
    return None


@dataclass(frozen=True)
class Target:
    """One part to rewrite.

    Attributes:
        entry: Index of the message in the history.
        origin: Seq of the event that put the message there.
        index: Ordinal of the message among those of the same origin.
        part: Index of the content part.
        stage: ``snip`` or ``micro``.
        tokens: The part's estimated size before, in tokens.
        tool: The tool of a result (``unknown`` when no call names it), "" for text.
    """

    entry: int
    origin: int
    index: int
    part: int
    stage: str
    tokens: int
    tool: str = ""


@dataclass(frozen=True)
class InPlacePlan:
    """An in-place compaction decision (see the module docs).

    Attributes:
        turn: The turn whose model call it precedes.
        action: ``snip_compact`` or ``micro_compact``.
        cap_tokens: The snip per-message cap, in tokens.
        per_char: Tokens per character used for every estimate.
        targets: The parts to rewrite, in history order.
        originals: The messages they belong to (one per distinct message, history order).
    """

    turn: int
    action: str
    cap_tokens: int
    per_char: float
    targets: tuple[Target, ...]
    originals: tuple[Message, ...]

    def archive(self) -> bytes:
        """The page-out artifact of the original messages (:func:`~flightlog.kernel.compaction.archive_bytes`)."""
        return archive_bytes(self.originals)

    def rewrites(self, entries: Sequence[Message], ref: str | None) -> list[dict[str, Any]]:
        """The ``context_rewrite`` items: each target's new text (naming ``ref`` when given)."""
        positions: dict[int, int] = {}
        items: list[dict[str, Any]] = []
        for target in self.targets:
            start = positions.setdefault(target.entry, len(positions))
            part = entries[target.entry].content[target.part]
            text = self._text(target, part, ref, start)
            items.append(
                {
                    "origin": target.origin,
                    "index": target.index,
                    "part": target.part,
                    "stage": target.stage,
                    "tokens_before": target.tokens,
                    "text": text,
                }
            )
        return items

    def _text(self, target: Target, part: Any, ref: str | None, start: int) -> str:
        hint = f'; page_in(ref="{ref}", start={start}) restores it' if ref else ""
        if target.stage == "snip":
            head = self.cap_tokens // 2
            return excerpt(part.text, head, self.cap_tokens - head, target.tokens, self.per_char, hint)
        output, tokens = part.output, target.tokens
        where = f' | page_in(ref="{ref}", start={start}) restores it' if ref else ""
        header = f"{STUB_PREFIX}{part.call_id} | {target.tool} | {tokens} tokens{where}]"
        if tokens > MICRO_LARGE_TOKENS:
            body = json_outline(output) or excerpt(output, 30, 10, tokens, self.per_char, "")
        else:
            body = excerpt(output, 150, 50, tokens, self.per_char, "")
        return f"{header}\n{body}"

    def events(
        self, entries: Sequence[Message], ref: str | None, preserved_refs: Sequence[str]
    ) -> list[Event]:
        """The records of this decision, in transaction order (module docs)."""
        rewrites = self.rewrites(entries, ref)
        origins = [t.origin for t in self.targets]
        events: list[Event] = [
            Custom(
                custom_kind=CONTEXT_REWRITE,
                payload={"turn": self.turn, "action": self.action, "rewrites": rewrites},
            )
        ]
        if ref is not None:
            stages = sorted({t.stage for t in self.targets})
            events.append(
                PageOut(
                    turn=self.turn,
                    action=self.action,
                    summary=f"{len(self.originals)} messages cut in place by {'+'.join(stages)}; originals kept",
                    tier_hint="durable",
                    message_count=len(self.originals),
                    archive_ref=ref,
                )
            )
        events.append(
            Compressed(
                turn=self.turn,
                archived_seq_range=(min(origins), max(origins)),
                action=self.action,
                preserved_refs=list(preserved_refs),
            )
        )
        return events


def _tokens(text: str, per_char: float) -> int:
    return math.ceil(len(text) * per_char)


def _tool_names(messages: Sequence[Message]) -> dict[str, str]:
    names: dict[str, str] = {}
    for message in messages:
        for call in message.tool_calls:
            names[call.id] = call.name
        for part in message.content:
            wire = part.to_wire()
            if wire.get("type") == "tool_call":
                names[str(wire.get("id"))] = str(wire.get("name"))
    return names


def _eligible(kinds: Sequence[str], origins: Sequence[int], keep_turns: int) -> range:
    """History indexes that may be rewritten: after the pinned head, before the last ``keep_turns``
    answer units."""
    head = 0
    while head < len(origins) and kinds[origins[head]] in _HEAD_KINDS:
        head += 1
    units = _units(kinds, origins, head)
    answers = [unit[0] for unit in units if kinds[origins[unit[0]]] == "llm_completed"]
    end = len(origins)
    if keep_turns:
        end = answers[-keep_turns] if len(answers) >= keep_turns else (answers[0] if answers else head)
    return range(head, max(head, end))


def _snips(messages: Sequence[Message], span: range, cap: int, per_char: float) -> list[tuple[int, int, int]]:
    """``(entry, part, tokens)`` of the text messages over the cap (exactly one text part each)."""
    found = []
    for i in span:
        texts = [j for j, part in enumerate(messages[i].content) if isinstance(part, TextPart)]
        if len(texts) != 1 or messages[i].role == "tool":
            continue
        part = messages[i].content[texts[0]]
        assert isinstance(part, TextPart)
        if _SNIPPED.search(part.text):  # cut already (upstream counts it at the cap from then on)
            continue
        tokens = _tokens(part.text, per_char)
        if tokens > cap and tokens > SNIP_MIN_TOKENS:
            found.append((i, texts[0], tokens))
    return found


def _micros(
    messages: Sequence[Message], span: range, pinned: Collection[str], skip: Collection[str], per_char: float
) -> list[tuple[int, int, int, str]]:
    """``(entry, part, tokens, call_id)`` of the tool results upstream's micro tier excerpts."""
    found = []
    for i in span:
        message = messages[i]
        size = sum(_tokens(p.output, per_char) for p in message.content if isinstance(p, ToolResultPart))
        if size < MICRO_MIN_TOKENS:
            continue
        for j, part in enumerate(message.content):
            if not isinstance(part, ToolResultPart) or part.call_id in pinned or part.call_id in skip:
                continue
            if part.output.startswith(STUB_PREFIX):
                continue
            found.append((i, j, _tokens(part.output, per_char), part.call_id))
    return found


def plan_in_place(
    rebuilder: Rebuilder,
    kinds: Sequence[str],
    *,
    turn: int,
    action: str,
    per_char: float,
    usable_tokens: int,
    fill_tokens: int,
    target_tokens: int,
    keep_turns: int,
    pinned: Collection[str],
    skip_tools: Collection[str] = (),
    archived: bool = True,
) -> InPlacePlan | None:
    """Choose what the snip (and for ``micro_compact`` the micro) tier rewrites (module docs).

    Args:
        rebuilder: The history fold (entries with their origin seqs).
        kinds: Event kind by seq.
        turn: The turn the rewrite precedes.
        action: ``snip_compact`` or ``micro_compact``.
        per_char: The route's tokens per character.
        usable_tokens: The usable window, in tokens (the snip cap is ``max(50, floor(usable x 0.05))``).
        fill_tokens: Estimated fill now, in tokens.
        target_tokens: The cascade stops once the estimate is at most this, in tokens.
        keep_turns: Most recent answer units never rewritten.
        pinned: Call ids whose results are never rewritten.
        skip_tools: Tools whose results are never rewritten (``page_in``).
        archived: The originals will be archived (the new texts then name the archive).

    Returns:
        The plan, or None when nothing would change (upstream records nothing then either). A part whose
        new text would not be shorter than the old one is left alone.
    """
    entries = rebuilder.entries
    messages = [e.message for e in entries]
    origins = [e.origin for e in entries]
    span = _eligible(kinds, origins, keep_turns)
    cap = max(50, math.floor(usable_tokens * 0.05))
    chosen: list[tuple[int, int, str, int, str]] = []
    saved = 0
    for i, j, tokens in _snips(messages, span, cap, per_char):
        chosen.append((i, j, "snip", tokens, ""))
        saved += tokens - cap
    if action == "micro_compact" and fill_tokens - saved > target_tokens:
        names = _tool_names(messages)
        skip = {call_id for call_id, name in names.items() if name in skip_tools}
        for i, j, tokens, call_id in _micros(messages, span, pinned, skip, per_char):
            chosen.append((i, j, "micro", tokens, names.get(call_id, "unknown")))
    chosen.sort()
    ordinals = {i: sum(1 for k in range(i) if origins[k] == origins[i]) for i, *_ in chosen}
    targets = [
        Target(i, origins[i], ordinals[i], j, stage, tokens, tool) for i, j, stage, tokens, tool in chosen
    ]
    # Same length as any real handle: the shortening check holds for the texts actually recorded.
    ref = "sha256:" + "0" * 64 if archived else None
    trial = InPlacePlan(turn, action, cap, per_char, tuple(targets), ())
    shorter = [
        target
        for target, item in zip(targets, trial.rewrites(messages, ref), strict=True)
        if len(item["text"]) < len(_part_text(messages[target.entry].content[target.part]))
    ]
    if not shorter:
        return None
    originals = tuple(messages[i] for i in sorted({t.entry for t in shorter}))
    return InPlacePlan(turn, action, cap, per_char, tuple(shorter), originals)


def _part_text(part: Any) -> str:
    return (
        part.text if isinstance(part, TextPart) else part.output if isinstance(part, ToolResultPart) else ""
    )
