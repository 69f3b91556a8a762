"""``GET /api/charts?session=``: a run's cumulative cost at list prices and its entropy score per turn.

The session page draws both (``static/charts.js``) under the waterfall's token and context charts and
re-fetches them when the live stream delivers events.

``cost``: one row per turn with model usage (the kernel's ``Custom("model_usage")`` records, summed
over a turn's calls; for a Codex CLI import, the rollout's ``token_count`` records, kept as
``Custom("codex.event_msg.token_count")``: the growth of ``total_token_usage`` since the one before,
for the model of the last ``turn_context``, counted as OpenAI Responses usage; a Claude Code import
keeps no per-call usage, so it has no cost): ``{turn, models, cost, cumulative}``. ``cost`` is the list-price cost in USD of
the turn's calls (:func:`flightlog.web.prices.call_cost`), null when any call's model or protocol has
no known price; ``cumulative`` sums the priced turns so far. ``unknown`` names the models without a
price (their cost is never guessed), ``total`` is null when no call was priced, ``partial`` says some
were not.

``entropy``: the entropy watch's ``entropy_sample`` per turn (``{turn, score, alert}``, ``alert`` when
an ``entropy_alert`` fired at that turn) and the ``threshold`` of the last alert (null without one: the
watch records its threshold only when it trips; :mod:`flightlog.kernel.entropy`).

Read from the stored rows in seq order (the first :data:`MAX_ROWS`); labels are display-safe
(:func:`flightlog.web.views.sanitize`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response

from ..errors import SessionNotFound
from ..kernel.records import MODEL_USAGE
from ..store.base import Store
from . import prices, views

__all__ = ["MAX_ROWS", "charts", "register"]

MAX_ROWS = 20_000
"""Rows read for one picture (as the waterfall)."""
CODEX_CONTEXT = "codex.turn_context"
CODEX_TOKENS = "codex.event_msg.token_count"
"""A Codex CLI import keeps the rollout's records as these customs (:mod:`flightlog.importers.codex`)."""


def _count(payload: dict[str, Any], key: str) -> int:
    value = payload.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _call_cost(payload: dict[str, Any]) -> float | None:
    model, protocol = payload.get("model"), payload.get("protocol")
    return prices.call_cost(
        model if isinstance(model, str) else None,
        protocol if isinstance(protocol, str) else None,
        input_tokens=_count(payload, "input_tokens"),
        output_tokens=_count(payload, "output_tokens"),
        cache_read=_count(payload, "cache_read_tokens"),
        cache_write=_count(payload, "cache_write_tokens"),
    )


class _Fold:
    def __init__(self) -> None:
        self.turns: dict[int, dict[str, Any]] = {}
        self.unknown: list[str] = []
        self.calls = 0
        self.priced = 0
        self.samples: list[dict[str, Any]] = []
        self.threshold: float | None = None
        self.turn = -1
        self.codex_model: str | None = None
        self.codex_total: dict[str, int] = {}

    def usage(self, payload: dict[str, Any]) -> None:
        turn = payload.get("turn")
        turn = turn if isinstance(turn, int) else -1
        model = str(payload.get("model") or "?")
        row = self.turns.setdefault(turn, {"turn": turn, "models": [], "cost": 0.0})
        if model not in row["models"]:
            row["models"].append(model)
        cost = _call_cost(payload)
        self.calls += 1
        if cost is None:
            row["cost"] = None
            if model not in self.unknown:
                self.unknown.append(model)
        else:
            self.priced += 1
            if row["cost"] is not None:
                row["cost"] += cost

    def codex(self, custom: str, payload: dict[str, Any]) -> None:
        """A Codex CLI import's model (``turn_context``) and usage (``token_count``, as deltas of its
        running ``total_token_usage``: Codex reports each count twice)."""
        if custom == CODEX_CONTEXT and isinstance(payload.get("model"), str):
            self.codex_model = payload["model"]
            return
        info = payload.get("info")
        total = info.get("total_token_usage") if isinstance(info, dict) else None
        if custom != CODEX_TOKENS or not isinstance(total, dict):
            return
        keys = ("input_tokens", "cached_input_tokens", "output_tokens")
        delta = {k: _count(total, k) - self.codex_total.get(k, 0) for k in keys}
        self.codex_total = {k: _count(total, k) for k in keys}
        if any(v > 0 for v in delta.values()):
            usage = {"turn": self.turn, "model": self.codex_model, "protocol": "openai.responses"}
            usage.update(input_tokens=delta["input_tokens"], output_tokens=delta["output_tokens"])
            self.usage({**usage, "cache_read_tokens": delta["cached_input_tokens"]})

    def row(self, data: dict[str, Any]) -> None:
        kind, custom = data.get("kind"), data.get("custom_kind")
        raw = data.get("payload")
        payload: dict[str, Any] = raw if isinstance(raw, dict) else {}
        if isinstance(data.get("turn"), int):
            self.turn = data["turn"]
        if kind == "custom" and custom == MODEL_USAGE:
            self.usage(payload)
        elif kind == "custom" and custom in (CODEX_CONTEXT, CODEX_TOKENS):
            self.codex(str(custom), payload)
        elif kind == "entropy_sample" and isinstance(data.get("score"), int | float):
            self.samples.append({"turn": data.get("turn"), "score": float(data["score"]), "alert": False})
        elif kind == "entropy_alert" and isinstance(data.get("threshold"), int | float):
            self.threshold = float(data["threshold"])
            for sample in self.samples:
                if sample["turn"] == data.get("turn"):
                    sample["alert"] = True

    def cost(self) -> dict[str, Any]:
        rows, running = [], 0.0
        for turn in sorted(self.turns):
            row = self.turns[turn]
            running += row["cost"] or 0.0
            rows.append({**row, "cumulative": running})
        return {
            "turns": rows,
            "unknown": self.unknown,
            "calls": self.calls,
            "priced_calls": self.priced,
            "total": running if self.priced else None,
            "partial": 0 < self.priced < self.calls,
            "currency": "USD",
            "checked": prices.CHECKED,
            "sources": sorted(
                {p.source for m, p in prices.LIST_PRICES.items() if any(m in r["models"] for r in rows)}
            ),
        }


def charts(store: Store, session_id: str) -> dict[str, Any]:
    """The cost and entropy series of one session (see the module docs).

    Raises:
        SessionNotFound: no such session.
    """
    store.get_session(session_id)
    fold = _Fold()
    for row in store.read_events(session_id, stop=MAX_ROWS):
        try:
            data = json.loads(row.event_bytes)
        except ValueError:
            continue  # an undecodable row: verification names it; a chart has nothing to draw from it
        if isinstance(data, dict):
            fold.row(data)
    return {"cost": fold.cost(), "entropy": {"samples": fold.samples, "threshold": fold.threshold}}


def register(app: FastAPI, reader: Callable[[], Store]) -> None:
    """Add ``GET /api/charts?session=`` to ``app``; ``reader()`` is the shared read-only store."""

    @app.get("/api/charts")
    def charts_json(session: str = "") -> Response:
        """The run's cumulative cost and entropy per turn."""
        try:
            data = charts(reader(), session)
        except SessionNotFound:
            return JSONResponse({"error": "no such session"}, status_code=404)
        return JSONResponse(views.sanitize(data), headers={"Cache-Control": "no-store"})
