"""Tool-argument repair under a whitelist of heuristics (recorded as ``tool_argument_repaired``).

Models sometimes wrap otherwise fine arguments in noise. Only these repairs are tried, in this order, each
on the output of the previous one, stopping as soon as the text parses as a JSON object:

1. ``code_fence``: strip one surrounding Markdown fence (```` ```json ... ``` ````).
2. ``json_in_string``: the text is a JSON *string* whose content is a JSON object (double encoding).
3. ``trailing_commas``: drop a ``,`` that directly precedes ``}`` or ``]`` (outside strings).
4. ``single_quotes``: turn single-quoted strings into double-quoted ones (escaping inner ``"``).

Text that already parses as a JSON object is never touched (a property the tests check with hypothesis).
Empty or blank text means "no arguments" (``{}``), without a repair. Anything else (Python literals,
comments, unquoted keys, truncated JSON) is not guessed at: the call gets an error result instead.

An object the ledger cannot hold is unusable too, with the field named: a lone surrogate (``"\\ud800"``,
half of a pair), ``NaN``/``Infinity`` or an integer beyond ±(2**53-1), which Python's ``json`` accepts and
RFC 8785 refuses (:func:`flightlog.encoding.canonical_json`). Upstream's serde_json refuses such text at
parse; here the call gets an error result the model can act on, and the raw text stays recorded as the model
wrote it (``tool_requested``). Running the tool with it instead would put the value in records (the plan,
an approval request) that cannot be written, and leave the turn, its usage with it, unrecorded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..encoding import canonical_json, recordable_text
from ..errors import EncodingError

__all__ = ["REPAIRS", "RepairOutcome", "repair_arguments"]

_FENCE = re.compile(r"^\s*```[A-Za-z0-9_+-]*[ \t]*\n?(.*?)\n?[ \t]*```\s*$", re.DOTALL)


@dataclass(frozen=True)
class RepairOutcome:
    """What :func:`repair_arguments` made of a raw arguments text.

    Attributes:
        arguments: The parsed JSON object, or None when no whitelisted repair made one.
        repaired_text: The repaired text when a repair was needed and worked, else None.
        steps: Names of the repairs applied, in order (empty when none was needed).
        error: Why the text is unusable (``arguments`` is None), else None.
    """

    arguments: dict[str, Any] | None
    repaired_text: str | None = None
    steps: tuple[str, ...] = ()
    error: str | None = None

    @property
    def repaired(self) -> bool:
        """True when a repair changed the text and produced valid arguments."""
        return self.repaired_text is not None


def _strip_fence(text: str) -> str:
    match = _FENCE.match(text)
    return match.group(1).strip() if match else text


def _unwrap_string(text: str) -> str:
    try:
        value = json.loads(text)
    except ValueError:
        return text
    if isinstance(value, str) and value.strip().startswith("{"):
        return value.strip()
    return text


def _scan(text: str, on_char: Callable[[str, int, list[str]], int]) -> str:
    """Copy ``text``, letting ``on_char`` handle characters outside double-quoted strings.

    ``on_char(text, i, out)`` appends what it wants and returns the next index. Double-quoted strings
    (with their escapes) are copied verbatim.
    """
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == '"':
            end = _string_end(text, i, '"')
            end = len(text) if end < 0 else end
            out.append(text[i:end])
            i = end
        else:
            i = on_char(text, i, out)
    return "".join(out)


def _string_end(text: str, start: int, quote: str) -> int:
    """Index just past the string opened at ``start``; -1 when it is not terminated."""
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == quote:
            return i + 1
        i += 1
    return -1


def _drop_trailing_commas(text: str) -> str:
    def on_char(src: str, i: int, out: list[str]) -> int:
        if src[i] == ",":
            j = i + 1
            while j < len(src) and src[j] in " \t\r\n":
                j += 1
            if j < len(src) and src[j] in "}]":
                return i + 1
        out.append(src[i])
        return i + 1

    return _scan(text, on_char)


def _single_to_double(text: str) -> str:
    def on_char(src: str, i: int, out: list[str]) -> int:
        if src[i] != "'":
            out.append(src[i])
            return i + 1
        end = _string_end(src, i, "'")
        if end < 0:
            out.append(src[i:])  # unterminated: leave it, the parse will fail
            return len(src)
        out.append('"' + _requote(src[i + 1 : end - 1]) + '"')
        return end

    return _scan(text, on_char)


def _requote(body: str) -> str:
    """A single-quoted string body as a double-quoted one: ``\\'`` → ``'``, bare ``"`` → ``\\"``."""
    out: list[str] = []
    i = 0
    while i < len(body):
        char = body[i]
        if char == "\\" and i + 1 < len(body):
            pair = body[i : i + 2]
            out.append("'" if pair == "\\'" else pair)
            i += 2
            continue
        out.append('\\"' if char == '"' else char)
        i += 1
    return "".join(out)


REPAIRS: tuple[tuple[str, Callable[[str], str]], ...] = (
    ("code_fence", _strip_fence),
    ("json_in_string", _unwrap_string),
    ("trailing_commas", _drop_trailing_commas),
    ("single_quotes", _single_to_double),
)
"""The whitelist, in application order: ``(name, text -> text)``."""


_UNRECORDABLE = "arguments cannot be recorded: "


def _as_object(text: str) -> tuple[dict[str, Any] | None, str | None]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        return None, f"arguments are not valid JSON: {exc}"
    if not isinstance(value, dict):
        return None, f"arguments must be a JSON object, not {type(value).__name__}"
    try:
        canonical_json(value)
    except EncodingError as exc:  # a lone surrogate, NaN, a long integer (module docs)
        return None, f"{_UNRECORDABLE}{recordable_text(exc.field)}: {exc.reason}"  # a key may hold one too
    return value, None


def repair_arguments(text: str) -> RepairOutcome:
    """Parse a tool call's raw arguments text, repairing it with the whitelisted heuristics if needed.

    Args:
        text: The ``arguments`` string exactly as the model produced it.

    Returns:
        A :class:`RepairOutcome`: the JSON object (``arguments``), whether and how it was repaired, or
        the error when nothing in the whitelist produces a JSON object. Valid JSON object text comes back
        unrepaired with ``steps == ()``; blank text means ``{}``.
    """
    if not text.strip():
        return RepairOutcome(arguments={})
    value, error = _as_object(text)
    if value is not None:
        return RepairOutcome(arguments=value)
    current, steps = text, []
    for name, fix in REPAIRS:
        fixed = fix(current)
        if fixed == current:
            continue
        current = fixed
        steps.append(name)
        repaired, why = _as_object(current)
        if repaired is not None:
            return RepairOutcome(arguments=repaired, repaired_text=current, steps=tuple(steps))
        if why is not None and why.startswith(_UNRECORDABLE):
            error = (
                why  # the repair made an object, one the ledger cannot hold: say that, not the parse error
            )
    return RepairOutcome(arguments=None, steps=tuple(steps), error=error)
