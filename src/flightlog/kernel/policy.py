"""Governance: which tool calls run, which are refused, which wait for a human.

A :class:`Policy` is an ordered list of :class:`Rule`\\ s and a default action. The first rule whose every
condition matches a call decides it (``allow``, ``deny`` or ``ask``); when none matches, ``default`` does.

Conditions of a rule (all given ones must hold):

* ``tool``: a glob (``fnmatch``, case-sensitive) on the tool name: ``"write_*"``, ``"*"``.
* ``effect``: the tool's effect class (``read_only``, ``idempotent``, ``side_effect``).
* ``arg`` + ``path``: the named argument is a string that, normalised (``\\`` → ``/``, ``.``/``..``
  segments resolved lexically, so ``src/../etc/passwd`` is ``etc/passwd``), matches the path glob.
  ``*`` and ``?`` stay inside one segment, ``**`` spans segments (``**/`` also matches no directory).
* ``arg`` + ``command_prefix``: the named argument (a shell command string, split with ``shlex``, or a
  list of strings) starts with the prefix's tokens. The first token also matches by base name, so prefix
  ``rm`` matches ``/bin/rm -rf x``. ``git push`` matches ``git push origin`` but not ``git pushx``.
* ``arg`` alone: the named argument is present.

A rule naming an ``arg`` never matches a call without it. Decisions name the rule (its index) for audit.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal, get_args

from .tools import EFFECTS, Effect

__all__ = ["ACTIONS", "Action", "Decision", "Policy", "Rule", "glob_match"]

Action = Literal["allow", "deny", "ask"]
ACTIONS: tuple[Action, ...] = get_args(Action)


@lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    """Compile a path glob: ``**/`` any directories (or none), ``**`` anything, ``*``/``?`` one segment."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and (end := pattern.find("]", i + 2)) > 0:
            body = pattern[i + 1 : end]
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z", re.DOTALL)


def _normalise_path(value: str) -> str:
    path = posixpath.normpath(value.replace("\\", "/"))
    return path[1:] if path.startswith("//") else path


def glob_match(path: str, pattern: str) -> bool:
    """Whether ``path`` (normalised lexically) matches the path glob ``pattern`` (see module docs)."""
    return _glob_regex(pattern).match(_normalise_path(path)) is not None


def _command_tokens(value: Any) -> list[str] | None:
    if isinstance(value, str):
        try:
            return shlex.split(value)
        except ValueError:
            return value.split()
    if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        return list(value)
    return None


def _prefix_match(tokens: Sequence[str], prefix: Sequence[str]) -> bool:
    if not prefix or len(tokens) < len(prefix):
        return False
    first, want = tokens[0], prefix[0]
    if first != want and posixpath.basename(first) != posixpath.basename(want):
        return False
    return list(tokens[1 : len(prefix)]) == list(prefix[1:])


@dataclass(frozen=True)
class Rule:
    """One governance rule (conditions are ANDed; see the module docs).

    Attributes:
        action: ``allow``, ``deny`` or ``ask``.
        tool: Glob on the tool name (default ``*``: every tool).
        effect: Match only tools of this effect class.
        arg: Name of the argument the ``path``/``command_prefix`` conditions look at.
        path: Path glob on ``arg``'s value.
        command_prefix: Command prefix (shell words) on ``arg``'s value.
        reason: Shown in the decision (and to the model on deny); a default is derived otherwise.
    """

    action: Action
    tool: str = "*"
    effect: Effect | None = None
    arg: str | None = None
    path: str | None = None
    command_prefix: str | None = None
    reason: str | None = None

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"rule action must be one of {', '.join(ACTIONS)}, not {self.action!r}")
        if self.effect is not None and self.effect not in EFFECTS:
            raise ValueError(f"rule effect must be one of {', '.join(EFFECTS)}, not {self.effect!r}")
        if (self.path is not None or self.command_prefix is not None) and not self.arg:
            raise ValueError("a rule with path or command_prefix must name the argument (arg=...)")
        if self.path is not None and self.command_prefix is not None:
            raise ValueError("a rule takes path or command_prefix, not both")

    def matches(self, tool_name: str, arguments: Mapping[str, Any], effect: Effect) -> bool:
        """Whether every condition of this rule holds for the call."""
        if not fnmatch.fnmatchcase(tool_name, self.tool):
            return False
        if self.effect is not None and effect != self.effect:
            return False
        if self.arg is None:
            return True
        if self.arg not in arguments:
            return False
        value = arguments[self.arg]
        if self.path is not None:
            return isinstance(value, str) and glob_match(value, self.path)
        if self.command_prefix is not None:
            tokens = _command_tokens(value)
            return tokens is not None and _prefix_match(tokens, shlex.split(self.command_prefix))
        return True

    def describe(self) -> str:
        """A short text naming the conditions, e.g. ``tool=write_* arg=path path=/etc/**``."""
        parts = [f"tool={self.tool}"]
        for name in ("effect", "arg", "path", "command_prefix"):
            value = getattr(self, name)
            if value is not None:
                parts.append(f"{name}={value}")
        return " ".join(parts)


@dataclass(frozen=True)
class Decision:
    """A policy decision for one call: ``action``, a human ``reason``, and the matching rule's index."""

    action: Action
    reason: str
    rule: int | None = None


@dataclass(frozen=True)
class Policy:
    """Ordered rules, first match wins; ``default`` when none matches.

    Attributes:
        rules: The rules, in priority order.
        default: Action for calls no rule matches (``allow`` unless configured).
        on_deny: ``result`` (a denied call gets an error result; its turn goes on) or ``rollback`` (a turn
            with a denied call is rolled back, ``rollbacked(reason=GovernanceDenied)``, and the model is told
            what was refused; after ``Agent.max_retries`` rollbacks of one turn, results again:
            :mod:`flightlog.kernel.denials`).
    """

    rules: tuple[Rule, ...] = field(default_factory=tuple)
    default: Action = "allow"
    on_deny: Literal["result", "rollback"] = "result"

    def __post_init__(self) -> None:
        if self.default not in ACTIONS:
            raise ValueError(f"policy default must be one of {', '.join(ACTIONS)}, not {self.default!r}")
        if self.on_deny not in ("result", "rollback"):
            raise ValueError(f"policy on_deny must be 'result' or 'rollback', not {self.on_deny!r}")
        object.__setattr__(self, "rules", tuple(self.rules))

    def decide(self, tool_name: str, arguments: Mapping[str, Any], effect: Effect) -> Decision:
        """Decide one call.

        Args:
            tool_name: The tool's name.
            arguments: The call's (repaired) JSON arguments.
            effect: The tool's effect class.

        Returns:
            The first matching rule's decision, else the default's (``rule=None``).
        """
        for index, rule in enumerate(self.rules):
            if rule.matches(tool_name, arguments, effect):
                reason = rule.reason or f"policy rule {index} ({rule.describe()})"
                return Decision(rule.action, reason, index)
        return Decision(self.default, f"policy default ({self.default})")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Policy:
        """Build from plain data (TOML/JSON): ``{"default": "ask", "rules": [{"action": ..., ...}]}``.

        Raises:
            ValueError: unknown keys, actions or effects.
        """
        unknown = set(data) - {"default", "rules", "on_deny"}
        if unknown:
            raise ValueError(f"unknown policy keys: {', '.join(sorted(unknown))}")
        try:
            rules = tuple(Rule(**dict(rule)) for rule in data.get("rules", ()))
        except TypeError as exc:
            raise ValueError(f"bad policy rule: {exc}") from None
        return cls(rules=rules, default=data.get("default", "allow"), on_deny=data.get("on_deny", "result"))
