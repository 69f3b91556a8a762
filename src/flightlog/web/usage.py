"""Model usage per call, read from a session's stored rows (decoded JSON objects, in seq order).

Two sources:

* the kernel's ``Custom("model_usage")`` record of each model call
  (:func:`flightlog.kernel.records.model_usage`): ``turn``, ``model``, ``protocol``, token counts;
* a Codex CLI import (:mod:`flightlog.importers.codex` keeps the rollout's records as customs): the
  model of the last ``Custom("codex.turn_context")``, and the usage of each
  ``Custom("codex.event_msg.token_count")`` as the growth of its running ``info.total_token_usage``
  since the one before (Codex writes each count twice; a repeat adds nothing), counted as OpenAI
  Responses usage (``input_tokens`` includes ``cached_input_tokens``), for the turn of the latest row
  that named one.

A Claude Code import keeps no per-call usage (only the run's total), so it yields nothing.
"""

from __future__ import annotations

from typing import Any

from ..kernel.records import MODEL_USAGE

__all__ = ["CODEX_CONTEXT", "CODEX_TOKENS", "UsageReader", "count"]

CODEX_CONTEXT = "codex.turn_context"
CODEX_TOKENS = "codex.event_msg.token_count"
_CODEX_KEYS = ("input_tokens", "cached_input_tokens", "output_tokens")


def count(payload: dict[str, Any], key: str) -> int:
    """``payload[key]`` when it is an int >= 0 (not a bool), else 0."""
    value = payload.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


class UsageReader:
    """Feed rows in seq order; :meth:`feed` returns the usage record a row carries, if any.

    A record is ``{turn, model, protocol, input_tokens, output_tokens, cache_read_tokens,
    cache_write_tokens}`` (``model_usage``'s own payload for a kernel row).
    """

    def __init__(self) -> None:
        self.turn = -1
        self._codex_model: str | None = None
        self._codex_total: dict[str, int] = {}

    def feed(self, data: dict[str, Any]) -> dict[str, Any] | None:
        """The usage record of one stored row (a decoded JSON object), or None."""
        if isinstance(data.get("turn"), int):
            self.turn = data["turn"]
        raw = data.get("payload")
        payload: dict[str, Any] = raw if isinstance(raw, dict) else {}
        custom = data.get("custom_kind") if data.get("kind") == "custom" else None
        if custom == MODEL_USAGE:
            return payload
        if custom == CODEX_CONTEXT and isinstance(payload.get("model"), str):
            self._codex_model = payload["model"]
        elif custom == CODEX_TOKENS:
            return self._codex(payload)
        return None

    def _codex(self, payload: dict[str, Any]) -> dict[str, Any] | None:
        info = payload.get("info")
        total = info.get("total_token_usage") if isinstance(info, dict) else None
        if not isinstance(total, dict):
            return None
        delta = {k: count(total, k) - self._codex_total.get(k, 0) for k in _CODEX_KEYS}
        self._codex_total = {k: count(total, k) for k in _CODEX_KEYS}
        if not any(v > 0 for v in delta.values()):
            return None
        return {
            "turn": self.turn,
            "model": self._codex_model,
            "protocol": "openai.responses",
            "input_tokens": max(delta["input_tokens"], 0),
            "output_tokens": max(delta["output_tokens"], 0),
            "cache_read_tokens": max(delta["cached_input_tokens"], 0),
        }
