"""List prices of the models in the samples and the demo, to draw a run's cost (never to bill anyone).

A cost is drawn only for a model in :data:`LIST_PRICES` whose usage the protocol reports in a known
way; any other model's cost is *unknown* and the dashboard says so (nothing is guessed from a similar
name). The prices are the providers' published list prices for standard (not batch, not priority, not
long-context) requests, in USD per million tokens, as read on :data:`CHECKED` from the source named in
each entry. Prices change: this table is a picture of that day, not a quote.

How each protocol counts (the kernel's ``model_usage`` record; :class:`flightlog.providers.base.Usage`):

* ``anthropic.messages``: ``input_tokens`` excludes the cached tokens; cache reads and cache writes
  (5-minute writes assumed: the record does not say which) are priced apart. Source: the Anthropic
  Messages API usage object (``input_tokens``, ``cache_read_input_tokens``,
  ``cache_creation_input_tokens``).
* ``openai.chat`` / ``openai.responses``: ``input_tokens`` includes the cached ones (``cached_tokens``
  is a detail of the prompt tokens), so the uncached input is ``input - cache_read``; OpenAI bills no
  cache writes. Source: OpenAI API reference, ``usage.prompt_tokens_details.cached_tokens`` /
  ``usage.input_tokens_details.cached_tokens``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CHECKED", "LIST_PRICES", "ListPrice", "call_cost", "uncached_input"]

CHECKED = "2026-12-02"
"""The day the prices below were read."""

_ANTHROPIC = "https://platform.claude.com/docs/en/about-claude/pricing"
_OPUS_46 = "https://platform.claude.com/docs/en/models/opus-4-6/overview"
_GPT_53_CODEX = "https://vercel.com/ai-gateway/models/gpt-5.3-codex (row 'OpenAI': OpenAI's list price)"


@dataclass(frozen=True)
class ListPrice:
    """One model's list prices in USD per million tokens.

    Attributes:
        input: Uncached input tokens.
        output: Output tokens (reasoning included).
        cache_read: Input tokens read from the prompt cache.
        cache_write: Input tokens written to the prompt cache (None: the provider bills none apart).
        source: Where the prices were read.
    """

    input: float
    output: float
    cache_read: float
    cache_write: float | None
    source: str


_SONNET_4 = ListPrice(3.0, 15.0, 0.30, 3.75, _ANTHROPIC)
_OPUS_4_6 = ListPrice(5.0, 25.0, 0.50, 6.25, _OPUS_46)

LIST_PRICES: dict[str, ListPrice] = {
    "claude-sonnet-4-0": _SONNET_4,
    "claude-sonnet-4-20250514": _SONNET_4,
    "claude-opus-4-6": _OPUS_4_6,
    "gpt-5.3-codex": ListPrice(1.75, 14.0, 0.175, None, _GPT_53_CODEX),
}
"""Model id (as the provider names it in a response) → list prices."""


def uncached_input(protocol: str | None, input_tokens: int, cache_read: int) -> int | None:
    """The input tokens not read from a cache, by the protocol's way of counting (module docs); None
    for a protocol whose counting is not known here."""
    if protocol is None:
        return None
    if protocol.startswith("anthropic."):
        return input_tokens
    if protocol.startswith("openai."):
        return max(input_tokens - cache_read, 0)
    return None


def call_cost(
    model: str | None,
    protocol: str | None,
    *,
    input_tokens: int,
    output_tokens: int,
    cache_read: int = 0,
    cache_write: int = 0,
) -> float | None:
    """The list-price cost of one model call in USD, or None when it cannot be known.

    None when the model has no entry in :data:`LIST_PRICES`, the protocol is not one whose counting is
    known (module docs), or the call wrote to a cache the table has no price for.
    """
    price = LIST_PRICES.get(model or "")
    uncached = uncached_input(protocol, input_tokens, cache_read)
    if price is None or uncached is None:
        return None
    if cache_write and price.cache_write is None:
        return None
    total = uncached * price.input + output_tokens * price.output + cache_read * price.cache_read
    total += cache_write * (price.cache_write or 0.0)
    return total / 1_000_000
