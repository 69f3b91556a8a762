"""``GET /api/charts?session=``: a run's cumulative cost at list prices and its entropy score per turn.

The session page draws both (``static/charts.js``) under the waterfall's token and context charts and
re-fetches them when the live stream delivers events.

``cost``: one row per turn with model usage (the kernel's ``Custom("model_usage")`` records or a
Codex CLI import's token counts, :class:`flightlog.web.usage.UsageReader`, summed over a turn's calls;
a Claude Code import keeps no per-call usage, so it has no cost): ``{turn, models, cost,
cumulative}``. ``cost`` is the list-price cost in USD of the turn's calls
(:func:`flightlog.web.prices.call_cost`), null when any call's model or protocol has no known price;
``cumulative`` sums the priced turns so far. ``unknown`` names the models without a
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
from ..store.base import Store
from . import prices, views
from .usage import UsageReader, count

__all__ = ["MAX_ROWS", "charts", "register"]

MAX_ROWS = 20_000
"""Rows read for one picture (as the waterfall)."""


def _call_cost(payload: dict[str, Any]) -> float | None:
    model, protocol = payload.get("model"), payload.get("protocol")
    return prices.call_cost(
        model if isinstance(model, str) else None,
        protocol if isinstance(protocol, str) else None,
        input_tokens=count(payload, "input_tokens"),
        output_tokens=count(payload, "output_tokens"),
        cache_read=count(payload, "cache_read_tokens"),
        cache_write=count(payload, "cache_write_tokens"),
    )


class _Fold:
    def __init__(self) -> None:
        self.turns: dict[int, dict[str, Any]] = {}
        self.unknown: list[str] = []
        self.calls = 0
        self.priced = 0
        self.samples: list[dict[str, Any]] = []
        self.threshold: float | None = None
        self.reader = UsageReader()

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

    def row(self, data: dict[str, Any]) -> None:
        kind = data.get("kind")
        record = self.reader.feed(data)
        if record is not None:
            self.usage(record)
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
    def charts_json(session: str = "", id: str = "") -> Response:
        """The run's cumulative cost and entropy per turn."""
        session, problem = views.api_session(session, id)
        if problem is not None:
            return JSONResponse({"error": problem}, status_code=400)
        try:
            data = charts(reader(), session)
        except SessionNotFound:
            return JSONResponse({"error": "no such session"}, status_code=404)
        return JSONResponse(views.sanitize(data), headers={"Cache-Control": "no-store"})
