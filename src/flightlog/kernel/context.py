"""Context-window accounting: how big each route position's window is and how full the next request is.

Windows come from :data:`KNOWN_WINDOWS` (the vendors' published limits for the models in the recorded
cassettes), overridden per model id by :attr:`ContextPolicy.windows` (``Agent(context=...)`` or the
``[context]`` table of an ``agent.toml``). A model found in neither has no known window: the kernel
then compacts only when the provider answers "too long" (:func:`flightlog.providers.base.ProviderError`
``context_overflow``).

The fill of the next request is never counted over the network. It is the previous call's reported
``input_tokens`` on the same route position plus the calibrated estimate of what was added since
(:func:`estimate_fill`): the request's size in characters of its canonical JSON body times the
route's tokens-per-character ratio, learned from reported usage (Σ input_tokens / Σ chars of the calls on
that position so far, from the ledger, so a resumed run estimates exactly as the original would have),
:data:`DEFAULT_TOKENS_PER_CHAR` before any call.

Thresholds and labels are upstream's (UPSTREAM.md §1, deepstrike ``context/config.rs``): on
``rho = fill / usable`` (strict ``>``), ``snip_compact`` above 0.70 and ``micro_compact`` above 0.80
(in place, :mod:`flightlog.kernel.inplace`), ``context_collapse`` above 0.90, ``auto_compact`` above 0.95
(and for a provider "too long" answer), renewal above 0.98; compaction aims at 0.65 and keeps the last
2 turns. The in-place tiers run first (once per turn); a summary compaction follows when the fill is
still above ``compact_at`` (default the collapse threshold). Large tool outputs are also paged out when
they arrive (``page_out_tokens``). A request whose system prompt and tool specs alone exceed ``usable`` is
never sent (upstream's fixed-context refusal: the run fails over or ends ``context_overflow``,
:meth:`flightlog.kernel.activation_context.ContextActivation.refuse_fixed_overflow`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..providers.base import ModelProvider

__all__ = [
    "AUTO_THRESHOLD",
    "COLLAPSE_THRESHOLD",
    "DEFAULT_TOKENS_PER_CHAR",
    "KNOWN_WINDOWS",
    "MICRO_THRESHOLD",
    "RENEWAL_THRESHOLD",
    "SNIP_THRESHOLD",
    "TARGET_AFTER_COMPRESS",
    "Calibration",
    "ContextPolicy",
    "ContextWindow",
    "Fill",
    "action_for",
    "cap_output",
    "estimate_fill",
    "estimate_tokens",
    "window_for",
]

SNIP_THRESHOLD = 0.70
"""Upstream ``snip_threshold``: above it, oversized text messages are cut in place (``snip_compact``)."""
MICRO_THRESHOLD = 0.80
"""Upstream ``micro_threshold``: above it, large tool results are excerpted in place too (``micro_compact``)."""
COLLAPSE_THRESHOLD = 0.90
"""Upstream ``collapse_threshold``: above it, compaction is labelled ``context_collapse``."""
AUTO_THRESHOLD = 0.95
"""Upstream ``auto_threshold``: above it (or on a "too long" answer), ``auto_compact``."""
RENEWAL_THRESHOLD = 0.98
"""Upstream ``renewal_threshold``: still above it after compacting, the context is renewed."""
TARGET_AFTER_COMPRESS = 0.65
"""Upstream ``target_after_compress``: compaction archives until the estimate is at most this."""
DEFAULT_TOKENS_PER_CHAR = 0.25
"""Tokens per character of canonical request JSON before a route has reported any usage."""

Action = Literal["context_collapse", "auto_compact"]
InPlaceAction = Literal["snip_compact", "micro_compact"]


@dataclass(frozen=True)
class ContextWindow:
    """One model's context window.

    Attributes:
        tokens: The whole window (input + output), in tokens.
        output_reserve: Tokens kept free for the answer, in tokens: a turn's request asks for at most
            this many (its ``max_tokens`` is the agent's ``max_tokens`` capped by it; a reserve of 0 caps
            nothing), and the budget reservation is made for the capped figure.
    """

    tokens: int
    output_reserve: int

    def __post_init__(self) -> None:
        if self.tokens < 1 or not 0 <= self.output_reserve < self.tokens:
            raise ValueError(
                f"a context window needs tokens >= 1 and 0 <= output_reserve < tokens, got {self}"
            )

    @property
    def usable(self) -> int:
        """Tokens the input may fill: ``tokens - output_reserve``."""
        return self.tokens - self.output_reserve

    def to_wire(self) -> dict[str, int]:
        """``{"tokens", "output_reserve"}``."""
        return {"tokens": self.tokens, "output_reserve": self.output_reserve}


def cap_output(asked: int, window: ContextWindow | None) -> int:
    """The ``max_tokens`` a request may ask for on a model with ``window`` (tokens).

    Args:
        asked: What the caller wants for the answer, in tokens (an agent's ``max_tokens``, a summary's or
            a judge's cap).
        window: The model's window, None when unknown.

    Returns:
        ``asked``, capped by ``window.output_reserve`` when the window is known and reserves any (a
        reserve of 0 caps nothing), so input within ``usable`` plus the answer fit the window.
    """
    if window is None or window.output_reserve < 1:
        return asked
    return min(asked, window.output_reserve)


def _w(tokens: int, output: int) -> ContextWindow:
    return ContextWindow(tokens, output)


KNOWN_WINDOWS: Mapping[str, ContextWindow] = {
    # Anthropic models overview (context window 200K, max output 64K for Sonnet 4 / 4.5).
    "claude-sonnet-4-0": _w(200_000, 64_000),
    "claude-sonnet-4-20250514": _w(200_000, 64_000),
    "claude-sonnet-4-5": _w(200_000, 64_000),
    "claude-sonnet-4-5-20250929": _w(200_000, 64_000),
    # OpenAI model pages: GPT-4o / 4o mini 128K context, 16,384 max output; GPT-4.1 1,047,576 / 32,768;
    # GPT-5 400,000 / 128,000.
    "gpt-4o": _w(128_000, 16_384),
    "gpt-4o-2024-08-06": _w(128_000, 16_384),
    "gpt-4o-mini": _w(128_000, 16_384),
    "gpt-4o-mini-2024-07-18": _w(128_000, 16_384),
    "gpt-4.1": _w(1_047_576, 32_768),
    "gpt-4.1-2025-04-14": _w(1_047_576, 32_768),
    "gpt-5": _w(400_000, 128_000),
    "gpt-5-2025-08-07": _w(400_000, 128_000),
}
"""Published windows of the models in the recorded cassettes (``src/flightlog/data/cassettes``,
``tests/data/provider``). Models whose limits we could not confirm (``gpt-5.5``) are left out, not
guessed: give them a window in :attr:`ContextPolicy.windows`."""

_DATED = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8})$")


def window_for(model: str, overrides: Mapping[str, ContextWindow] | None = None) -> ContextWindow | None:
    """The context window of ``model``: the override, else the table, else the table entry of the model
    id without its date suffix (``-2024-08-06``, ``-20250514``); None when unknown."""
    for table in (overrides or {}, KNOWN_WINDOWS):
        if model in table:
            return table[model]
    undated = _DATED.sub("", model)
    return (overrides or {}).get(undated) or KNOWN_WINDOWS.get(undated)


@dataclass(frozen=True)
class ContextPolicy:
    """How the kernel manages a run's context (``Agent.context``).

    Attributes:
        windows: Context windows by model id, over :data:`KNOWN_WINDOWS`.
        snip_at: Fill ratio above which oversized text messages are cut in place before a call
            (``snip_compact``; None: never).
        micro_at: Fill ratio above which large tool results are excerpted in place too
            (``micro_compact``; None: never).
        compact_at: Fill ratio (of the usable window) above which the kernel compacts before a call.
        target: Fill ratio compaction aims at (upstream ``target_after_compress``).
        keep_turns: Most recent turns (model answer + its tool results) never archived.
        page_out_tokens: A tool result estimated above this many tokens is paged out when it arrives:
            the output goes to an artifact and the history keeps a stub (None: upstream's per-message cap,
            ``max(50, floor(usable x 0.05))``; 0: never).
        renew_after: Renew the context (``context_renewed``) after this many compactions in a sprint
            (None: only above :data:`RENEWAL_THRESHOLD` after compacting, or when the agent asks).
        summarizer: The route compaction summaries are asked from (None: the run's current provider).
            Its tokens count against the run's budget.
        summary_max_tokens: Output cap of a summary call, in tokens.
        tools: Offer the built-in ``page_in`` and ``renew_context`` tools to the model.
    """

    windows: Mapping[str, ContextWindow] = field(default_factory=dict)
    snip_at: float | None = SNIP_THRESHOLD
    micro_at: float | None = MICRO_THRESHOLD
    compact_at: float = COLLAPSE_THRESHOLD
    target: float = TARGET_AFTER_COMPRESS
    keep_turns: int = 2
    page_out_tokens: int | None = None
    renew_after: int | None = None
    summarizer: ModelProvider | None = None
    summary_max_tokens: int = 1024
    tools: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "windows", dict(self.windows))
        if not 0 < self.target < self.compact_at <= 1:
            raise ValueError(f"need 0 < target < compact_at <= 1, got {self.target}, {self.compact_at}")
        if self.keep_turns < 0 or self.summary_max_tokens < 1:
            raise ValueError("keep_turns must be >= 0 and summary_max_tokens >= 1")
        if self.renew_after is not None and self.renew_after < 1:
            raise ValueError("renew_after must be >= 1")
        for name in ("snip_at", "micro_at"):
            value = getattr(self, name)
            if value is not None and not 0 < value <= 1:
                raise ValueError(f"{name} must be in (0, 1] or None, got {value}")

    def in_place_action(self, ratio: float | None) -> InPlaceAction | None:
        """The in-place tier a fill ``ratio`` calls for: ``micro_compact`` above ``micro_at``, else
        ``snip_compact`` above ``snip_at``, else None (strict ``>``, as upstream)."""
        if ratio is None:
            return None
        if self.micro_at is not None and ratio > self.micro_at:
            return "micro_compact"
        if self.snip_at is not None and ratio > self.snip_at:
            return "snip_compact"
        return None

    def window(self, model: str) -> ContextWindow | None:
        """:func:`window_for` with this policy's overrides."""
        return window_for(model, self.windows)

    def page_limit(self, window: ContextWindow | None) -> int | None:
        """Tokens above which a tool result is paged out on arrival (None: never)."""
        if self.page_out_tokens is not None:
            return self.page_out_tokens or None
        return None if window is None else max(50, math.floor(window.usable * 0.05))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ContextPolicy:
        """From an ``agent.toml`` ``[context]`` table: scalar fields by name (``snip_at = false`` /
        ``micro_at = false`` turn a tier off), ``windows`` as ``{model = {tokens = N, output_reserve = M}}``.

        Raises:
            ValueError: an unknown key or a bad value (named).
        """
        known = {"windows", "snip_at", "micro_at", "compact_at", "target", "keep_turns", "page_out_tokens"}
        known |= {"renew_after"}
        known |= {"summary_max_tokens", "tools"}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown [context] keys: {sorted(unknown)}")
        values = dict(data)
        for tier in ("snip_at", "micro_at"):  # TOML has no null: `false` turns a tier off
            if values.get(tier) is False:
                values[tier] = None
        windows = values.pop("windows", {})
        parsed = {str(model): ContextWindow(**spec) for model, spec in windows.items()}
        return cls(windows=parsed, **values)


@dataclass
class Calibration:
    """Reported usage of one route position, folded from the ledger.

    Attributes:
        input_tokens: Σ reported ``input_tokens`` of its calls, in tokens.
        chars: Σ canonical request sizes of the same calls, in characters.
        last_input: ``input_tokens`` of its latest call (None before any).
        last_chars: Request size of its latest call, in characters.
    """

    input_tokens: int = 0
    chars: int = 0
    last_input: int | None = None
    last_chars: int = 0

    def add(self, input_tokens: int, chars: int) -> None:
        """Fold one call's reported input tokens and request size."""
        if input_tokens <= 0 or chars <= 0:
            return
        self.input_tokens += input_tokens
        self.chars += chars
        self.last_input, self.last_chars = input_tokens, chars

    @property
    def tokens_per_char(self) -> float:
        """Σ input_tokens / Σ chars, or :data:`DEFAULT_TOKENS_PER_CHAR` before any call."""
        return self.input_tokens / self.chars if self.chars else DEFAULT_TOKENS_PER_CHAR


@dataclass(frozen=True)
class Fill:
    """How full the next request makes the window.

    Attributes:
        tokens: Estimated input tokens of the request.
        basis: ``reported+estimate`` (previous reported input plus the estimated delta) or ``estimate``.
        window: The route position's window, None when unknown.
    """

    tokens: int
    basis: str
    window: ContextWindow | None

    @property
    def ratio(self) -> float | None:
        """``tokens / window.usable`` (None without a window)."""
        return None if self.window is None else self.tokens / self.window.usable

    def to_wire(self) -> dict[str, Any]:
        """The ``context`` object recorded with each model call."""
        wire: dict[str, Any] = {"fill_tokens": self.tokens, "basis": self.basis}
        if self.window is not None:
            wire.update(self.window.to_wire())
            wire["fill_ratio"] = round(self.tokens / self.window.usable, 4)
        return wire


def estimate_fill(chars: int, calibration: Calibration | None, window: ContextWindow | None) -> Fill:
    """The fill of a request of ``chars`` characters (canonical JSON) on a route position.

    Returns:
        With a previous call on the position: ``last_input + ratio x (chars - last_chars)`` (never below
        0), basis ``reported+estimate``; otherwise ``ceil(ratio x chars)``, basis ``estimate``.
    """
    calib = calibration or Calibration()
    ratio = calib.tokens_per_char
    if calib.last_input is not None:
        tokens = max(0, calib.last_input + math.ceil(ratio * (chars - calib.last_chars)))
        return Fill(tokens, "reported+estimate", window)
    return Fill(math.ceil(ratio * chars), "estimate", window)


def estimate_tokens(chars: int, calibration: Calibration | None) -> int:
    """``ceil(chars x tokens_per_char)`` for a piece of text (tokens)."""
    return math.ceil(chars * (calibration or Calibration()).tokens_per_char)


def action_for(ratio: float | None, *, overflow: bool = False) -> Action:
    """The upstream label of a compaction at fill ``ratio``: ``auto_compact`` above
    :data:`AUTO_THRESHOLD` or after a "too long" answer, else ``context_collapse``."""
    if overflow or (ratio is not None and ratio > AUTO_THRESHOLD):
        return "auto_compact"
    return "context_collapse"
