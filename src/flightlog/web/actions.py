"""Who decided what on a run: the human decisions recorded in its ledger, for the session page.

Rows come from the kernel's records (:mod:`flightlog.kernel.records`): ``approval_decision`` (a gated
call approved or denied, with the operator as ``responder``) and ``abort_requested`` (who asked for the
abort the dashboard or :func:`flightlog.kernel.abort` recorded). Every string passes
:func:`flightlog.web.views.show` and is rendered by Jinja2 autoescape.
"""

from __future__ import annotations

import json
from typing import Any

from ..kernel.records import ABORT_REQUESTED, APPROVAL_DECISION
from ..store.base import Store
from .views import show

__all__ = ["MAX_SCAN", "decision_rows"]

MAX_SCAN = 200_000
"""Rows scanned for decisions (a longer session is scanned up to there)."""

_MARKS = tuple(f'"custom_kind":"{kind}"'.encode() for kind in (APPROVAL_DECISION, ABORT_REQUESTED))


def _row(seq: int, at_ms: int, kind: str, payload: dict[str, Any]) -> dict[str, Any] | None:
    if kind == APPROVAL_DECISION:
        verb = "approved" if payload.get("approved") else "denied"
        what = f"{verb} call {payload.get('call_id', '?')} ({payload.get('gate', 'approval')})"
        who = payload.get("responder", "?")
    elif kind == ABORT_REQUESTED:
        what, who = f"aborted the run at turn {payload.get('turn', '?')}", payload.get("requested_by", "?")
    else:
        return None
    reason = payload.get("reason")
    return {
        "seq": seq,
        "at_ms": at_ms,
        "what": show(what, 300),
        "who": show(who, 120),
        "reason": show(reason, 500) if isinstance(reason, str) else "",
        "kind": "abort" if kind == ABORT_REQUESTED else ("approve" if payload.get("approved") else "deny"),
    }


def decision_rows(store: Store, session_id: str) -> list[dict[str, Any]]:
    """The session's decisions in seq order, each ``{seq, at_ms, what, who, reason, kind}`` (``kind``:
    ``approve``, ``deny`` or ``abort``).

    Raises:
        SessionNotFound: no such session.
    """
    rows = []
    for row in store.read_events(session_id, stop=MAX_SCAN):
        if not any(mark in row.event_bytes for mark in _MARKS):
            continue
        try:
            data = json.loads(row.event_bytes)
        except ValueError:
            continue  # not decodable: the Verification section reports the row
        payload = data.get("payload") if isinstance(data, dict) else None
        if data.get("kind") != "custom" or not isinstance(payload, dict):
            continue
        found = _row(row.seq, row.recorded_at_ms, str(data.get("custom_kind")), payload)
        if found is not None:
            rows.append(found)
    return rows
