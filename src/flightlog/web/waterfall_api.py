"""``GET /api/waterfall``: a run's turns on a time axis, and its tokens and context fill per turn.

The session page draws this (``static/waterfall.js``) as inline SVG and re-fetches it when the live
stream delivers new events. Built from the stored rows of one session, read in order; time is each row's
``recorded_at_ms`` (when the recorder wrote it: the write time, not covered by the hash, so a picture of
where the time went, not evidence).

Lanes (``spans``, each ``{lane, label, kind, turn, seq, end_seq, start_ms, end_ms, open}``):

=============== ===================================================================================
``model``        ``Custom("prompt_program_invoked")`` by the ``kernel`` actor (seed 003) to the next
                 ``llm_completed``; an ``llm_completed`` with no such record starts at the row before
``compaction``   ``prompt_program_invoked`` by the ``compactor`` actor to the next ``compressed`` (a
                 ``milestone_judge`` actor's record draws no span)
``tool``         ``tool_requested`` to ``tool_completed``; a request ended by ``tool_denied`` or a
                 suspension ends there (labelled so)
``approval``     ``permission_requested`` to ``permission_resolved`` (the wait for a person)
``suspended``    ``suspended`` to ``resumed``
``sub-agent``    each child run (``query_runs(parent=)``): its session's creation to its last write,
                 with ``href`` to its page, ``depth`` (1 for a child, 2 for a grandchild... up to
                 :data:`MAX_DEPTH`, each listed right after its parent) and ``spans``: the child's own
                 model, tool, approval, suspension and compaction spans (``session`` = the child's id),
                 drawn nested inside its bar
=============== ===================================================================================

A ``rollbacked`` or ``operation_cancelled`` row ends the turn's open model and tool spans, ``run_terminal``
every open span (labelled so). A span still open at the
last row has ``open: true`` and ends at that row (the page extends it to
now while the run is live). ``marks`` are instants: ``rollbacked``, ``Custom("provider_retry")``,
``Custom("context_overflow")``, ``context_renewed``, ``budget_exceeded``, ``operation_cancelled``,
``entropy_alert``, ``run_terminal``, ``signal_delivery_disposed``, ``Custom("session_sealed")``,
``Custom("compaction_failed")``, ``Custom("capability_failed" | "capability_crashed")``,
``Custom("route_failover")``, ``Custom("signal_message")`` (who sent what), ``Custom("abort_requested")``
(who asked). An approval span's label ends with who decided (``Custom("approval_decision")``). ``integrity`` marks each stored
signed checkpoint (its signers as the note names them) and each witness cosignature kept for it, at the
time stored; their signatures are checked by the page's Verification section and the in-browser proof
check, not by this picture.

``turns``: per turn, ``input`` (uncached) / ``output`` / ``cache_read`` / ``cache_write`` tokens
(summed over the turn's ``Custom("model_usage")`` records; for a Codex CLI import, its token counts,
:class:`flightlog.web.usage.UsageReader`) and the context fill the kernel recorded with the call
(``fill`` tokens, ``usable`` tokens or null; :class:`flightlog.runs.context.ContextUse`).

An imported session (``source`` ``import:*``) is bounded by its transcript's own clock (its rows carry the
source's times, ``ImportedSession.event_times_ms``): the importer's own records, the ``session_sealed``
mark and every signed checkpoint (with its cosignatures; an import signs when it records), are written at
the import time, maybe months later. They are listed with ``recorded_at_import: true`` and a label saying
"recorded at import" and its date, and left out of ``end_ms`` (the page draws them at the right edge), so
the run is not a sliver of a chart spanning the import. A sub-agent import's bar ends at its last row,
not at its session row's ``updated_at_ms`` (the import time). The runs list's "last event" follows the
same rule (:mod:`flightlog.runs.adapters`).

Every label is display-safe text (:func:`flightlog.web.views.show`); the page puts it in with
``textContent`` only. At most :data:`MAX_ROWS` rows are read (``truncated`` says so).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response

from ..errors import SessionNotFound
from ..integrity.checkpoints import Checkpoint
from ..integrity.notes import NoteError, parse_note
from ..runs.context import PROMPT_PROGRAM_INVOKED, ContextUse
from ..store.base import SessionRecord, Store
from . import views
from .prices import uncached_input
from .usage import CODEX_CONTEXT, CODEX_TOKENS, UsageReader, count

__all__ = ["MAX_ROWS", "register", "waterfall"]

MAX_ROWS = 20_000
"""Rows read for one picture (a longer session is drawn up to there)."""

_MARKS = {
    "rollbacked": "rollback",
    "context_renewed": "context renewed",
    "budget_exceeded": "budget exceeded",
    "operation_cancelled": "cancelled",
    "entropy_alert": "entropy alert",
    "run_terminal": "end",
}
_SEALED = "session_sealed"
_CUSTOM_MARKS = {
    "provider_retry": "provider retry",
    "context_overflow": "context overflow",
    "compaction_failed": "compaction failed",
    "capability_failed": "capability failed",
    "capability_crashed": "capability crashed",
}
MAX_CHILDREN = 100
"""Sub-agents drawn at most, over every level of the tree (the most recently updated first per parent)."""
MAX_DEPTH = 3
"""Levels of sub-agents drawn below the run (a child's children are nested under it)."""
CHILD_ROWS = 5_000
"""Rows read from each sub-agent's session for its inner bars."""
_INNER = ("model", "tool", "approval", "suspended", "compaction")


class _Fold:
    """The fold over one session's rows (in seq order)."""

    def __init__(self, *, from_import: bool = False) -> None:
        self.from_import = from_import
        """An import: its seal is the import's record, not the run's (module docstring)."""
        self.spans: list[dict[str, Any]] = []
        self.marks: list[dict[str, Any]] = []
        self.turns: dict[int, dict[str, Any]] = {}
        self.open: dict[str, list[dict[str, Any]]] = {}
        self.turn = 0
        self.prev_ms: int | None = None
        self.last_ms = 0
        self.imported = UsageReader()
        self.resolved: dict[str, Any] | None = None
        self.unsettled: dict[str, str] = {}
        """Tool calls requested and not yet answered (no result, no denial): call id -> tool name. A call
        held at a suspension (waiting for approval) runs after the ``resumed`` and is drawn from there."""

    def begin(self, lane: str, label: str, kind: str, seq: int, at: int) -> None:
        span = {"lane": lane, "label": views.show(label, 200), "kind": kind, "turn": self.turn, "seq": seq}
        span.update(end_seq=seq, start_ms=at, end_ms=at, open=True)
        self.open.setdefault(lane, []).append(span)
        self.spans.append(span)

    def end(self, lane: str, seq: int, at: int, note: str = "") -> bool:
        pending = self.open.get(lane)
        if not pending:
            return False
        span = pending.pop(0)
        span.update(end_seq=seq, end_ms=at, open=False)
        if note:
            span["label"] = views.show(f"{span['label']} ({note})", 200)
        return True

    def end_all(self, lane: str, seq: int, at: int, note: str) -> None:
        while self.end(lane, seq, at, note):
            pass

    def turn_row(self) -> dict[str, Any]:
        return self.turns.setdefault(
            self.turn,
            {"turn": self.turn, "input": 0, "output": 0, "cache_read": 0, "cache_write": 0, "fill": None},
        )

    def row(self, seq: int, at: int, data: dict[str, Any]) -> None:
        kind = str(data.get("kind", ""))
        if isinstance(data.get("turn"), int):
            self.turn = data["turn"]
        payload = data.get("payload")
        payload = payload if isinstance(payload, dict) else {}
        if kind == "custom":
            custom = str(data.get("custom_kind", ""))
            if custom == _SEALED and self.from_import:
                self.marks.append(_at_import(self._mark("sealed", custom, seq, at)))
                return  # the import's record: the run's time ends before it
            self._custom(custom, payload, seq, at)
        elif kind == "llm_completed":
            if not self.end("model", seq, at):
                self.begin("model", f"model call, turn {self.turn}", kind, seq, self.prev_ms or at)
                self.end("model", seq, at)
        elif kind == "compressed":
            if not self.end("compaction", seq, at):
                self.marks.append(self._mark("compaction", kind, seq, at))
        elif kind == "tool_requested":
            raw = data.get("calls")
            calls = raw if isinstance(raw, list) else []
            names = ", ".join(str(c.get("name", "?")) for c in calls if isinstance(c, dict)) or "tools"
            self.unsettled.update(
                {str(c.get("id", "")): str(c.get("name", "?")) for c in calls if isinstance(c, dict)}
            )
            self.begin("tool", names, kind, seq, at)
        elif kind == "tool_completed":
            raw = data.get("results")
            for result in raw if isinstance(raw, list) else []:
                self.unsettled.pop(str(result.get("call_id", "")) if isinstance(result, dict) else "", None)
            self.end("tool", seq, at)
        elif kind == "tool_denied":
            self.unsettled.pop(str(data.get("call_id", "")), None)
            self.end("tool", seq, at, "denied")
        elif kind == "permission_requested":
            self.begin("approval", f"waiting for approval, turn {self.turn}", kind, seq, at)
        elif kind == "permission_resolved":
            if self.end("approval", seq, at):
                self.resolved = next(s for s in reversed(self.spans) if s["lane"] == "approval")
        elif kind == "signal_delivery_disposed":
            disposition = data.get("disposition", "?")
            self.marks.append(self._mark(f"signal {disposition}", kind, seq, at))
        elif kind == "suspended":
            self.end_all("tool", seq, at, "not run: suspended")
            self.begin("suspended", f"suspended, turn {self.turn}", kind, seq, at)
        elif kind == "resumed":
            self.end("suspended", seq, at)
            raw_denied = data.get("denied")
            denied = raw_denied if isinstance(raw_denied, list) else []
            held = [name for call, name in self.unsettled.items() if call not in denied]
            if held and not self.open.get("tool"):  # the calls held at the suspension run now (once: a
                self.begin("tool", ", ".join(held), kind, seq, at)  # resume after a crash finds it open)
        elif kind in _MARKS:
            if kind in ("rollbacked", "operation_cancelled", "run_terminal"):
                self.unsettled.clear()  # rolled back, cancelled or over: no held call runs after this
            if kind == "rollbacked":  # the turn's model call failed (or its tools did): those spans end here
                self.end_all("model", seq, at, "failed, rolled back")
                self.end_all("tool", seq, at, "rolled back")
            elif kind == "operation_cancelled":
                self.end_all("model", seq, at, "cancelled")
                self.end_all("tool", seq, at, "cancelled")
            elif kind == "run_terminal":
                for lane in list(self.open):
                    self.end_all(lane, seq, at, "run ended")
            self.marks.append(self._mark(_MARKS[kind], kind, seq, at))
        self.prev_ms, self.last_ms = at, at

    def _custom(self, custom: str, payload: dict[str, Any], seq: int, at: int) -> None:
        if custom == PROMPT_PROGRAM_INVOKED:
            if isinstance(payload.get("turn"), int):
                self.turn = payload["turn"]
            if payload.get("actor") == "compactor":
                self.begin("compaction", f"compaction call, turn {self.turn}", custom, seq, at)
                return
            if (
                payload.get("actor", "kernel") != "kernel"
            ):  # a milestone judge's call: no llm_completed ends it
                return
            self.begin("model", f"model call, turn {self.turn}", custom, seq, at)
            use = ContextUse.from_invoked(payload)
            if use is not None:
                self.turn_row()["fill"] = {"fill": use.fill_tokens, "usable": use.usable_tokens}
        elif custom == "model_usage":
            if isinstance(payload.get("turn"), int):
                self.turn = payload["turn"]
            self._usage(payload)
        elif custom in (CODEX_CONTEXT, CODEX_TOKENS):
            self._usage(self.imported.feed({"kind": "custom", "custom_kind": custom, "payload": payload}))
        elif custom == "approval_decision" and self.resolved is not None:
            verb = "approved" if payload.get("approved") else "denied"
            who = payload.get("responder", "?")
            self.resolved["label"] = views.show(f"{self.resolved['label']}: {verb} by {who}", 200)
            self.resolved = None
        elif custom == "abort_requested":
            self.marks.append(
                self._mark(f"abort requested by {payload.get('requested_by', '?')}", custom, seq, at)
            )
        elif custom == "signal_message":
            text = f"{payload.get('kind', 'signal')} from {payload.get('sender', '?')}: {payload.get('text', '')}"
            self.marks.append(self._mark(text, custom, seq, at))
        elif custom == "route_failover":
            self.marks.append(
                self._mark(f"route failover to {payload.get('to_model', '?')}", custom, seq, at)
            )
        elif custom == _SEALED:
            self.marks.append(self._mark("sealed", custom, seq, at))
        elif custom in _CUSTOM_MARKS:
            self.marks.append(self._mark(_CUSTOM_MARKS[custom], custom, seq, at))

    def _usage(self, record: dict[str, Any] | None) -> None:
        """One call's usage added to the current turn; ``input`` counts the uncached input only (an
        OpenAI protocol's ``input_tokens`` includes the cache reads,
        :func:`flightlog.web.prices.uncached_input`), so the stacked bar counts no cache read twice."""
        if record is None:
            return
        row = self.turn_row()
        read = count(record, "cache_read_tokens")
        protocol = record.get("protocol")
        uncached = uncached_input(
            protocol if isinstance(protocol, str) else None, count(record, "input_tokens"), read
        )
        row["input"] += count(record, "input_tokens") if uncached is None else uncached
        row["output"] += count(record, "output_tokens")
        row["cache_read"] += read
        row["cache_write"] += count(record, "cache_write_tokens")

    def _mark(self, label: str, kind: str, seq: int, at: int) -> dict[str, Any]:
        return {
            "label": views.show(f"{label}, turn {self.turn}", 200),
            "kind": kind,
            "turn": self.turn,
            "seq": seq,
            "at_ms": at,
        }


def _at_import(mark: dict[str, Any]) -> dict[str, Any]:
    """``mark`` flagged as the import's own record, its label saying so with the date (UTC)."""
    when = datetime.fromtimestamp(mark["at_ms"] / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    label = views.show(f"{mark['label']} (recorded at import, {when})", 200)
    return {**mark, "label": label, "recorded_at_import": True}


def _integrity(store: Store, session_id: str, *, from_import: bool) -> list[dict[str, Any]]:
    """Signed checkpoints and their witness cosignatures as marks (as stored: the signatures are checked
    by the Verification section and the in-browser proof check, not here); an import's are flagged as
    recorded at import (:func:`_at_import`)."""
    marks = _integrity_marks(store, session_id)
    return [_at_import(m) for m in marks] if from_import else marks


def _integrity_marks(store: Store, session_id: str) -> list[dict[str, Any]]:
    marks: list[dict[str, Any]] = []
    for cp in store.checkpoints(session_id):
        seq = max(cp.size - 1, 0)
        try:
            note = parse_note(cp.body)
            origin = Checkpoint.parse(note.text).origin
        except NoteError as exc:
            label = f"unreadable checkpoint at size {cp.size}: {exc.reason}"
            marks.append(
                {"label": views.show(label, 200), "kind": "checkpoint", "seq": seq, "at_ms": cp.created_at_ms}
            )
            continue
        signers = ", ".join(f"{s.name}+{s.key_id:08x}" for s in note.signatures)
        label = f"signed checkpoint over events 0-{seq} by {signers}"
        marks.append(
            {"label": views.show(label, 200), "kind": "checkpoint", "seq": seq, "at_ms": cp.created_at_ms}
        )
        for co in store.cosignatures(origin):
            if co.size == cp.size and co.root == cp.root:
                label = f"witness {co.witness.split('+', 1)[0]} cosigned size {co.size}"
                marks.append(
                    {
                        "label": views.show(label, 200),
                        "kind": "cosignature",
                        "seq": seq,
                        "at_ms": co.created_at_ms,
                    }
                )
    return marks


def _fold(store: Store, session_id: str, stop: int, *, from_import: bool) -> tuple[_Fold, int | None]:
    """The fold over the first ``stop`` rows of a session, and the first row's write time."""
    fold = _Fold(from_import=from_import)
    start: int | None = None
    for row in store.read_events(session_id, stop=stop):
        start = row.recorded_at_ms if start is None else start
        try:
            data = json.loads(row.event_bytes)
        except ValueError:
            data = {}
        fold.row(row.seq, row.recorded_at_ms, data if isinstance(data, dict) else {})
    return fold, start


def _children(store: Store, session_id: str, depth: int, left: list[int]) -> list[dict[str, Any]]:
    """The sub-agents of ``session_id`` as bars, each followed by its own (depth-first); ``left`` is the
    count still allowed (shared over the tree)."""
    out: list[dict[str, Any]] = []
    for child in store.query_runs(parent=session_id):
        if left[0] <= 0:
            break
        try:
            child_record = store.get_session(child.run_id)
        except SessionNotFound:
            continue
        left[0] -= 1
        from_import = _from_import(child_record)
        fold, _start = _fold(store, child.run_id, CHILD_ROWS, from_import=from_import)
        inner = [
            {**span, "session": views.Exact(child.run_id)} for span in fold.spans if span["lane"] in _INNER
        ]
        out.append(
            {
                "lane": "sub-agent",
                "label": views.show(f"{child.run_id} ({child.state})", 200),
                "href": views.session_href(child.run_id),
                "start_ms": child_record.created_at_ms,
                # an import's session row was last written at the import: its rows' clock ends the bar
                "end_ms": fold.last_ms if from_import else max(child_record.updated_at_ms, fold.last_ms),
                "open": child.state != "terminal",
                "depth": depth,
                "spans": inner,
            }
        )
        if depth < MAX_DEPTH:
            out += _children(store, child.run_id, depth + 1, left)
    return out


def waterfall(store: Store, session_id: str) -> dict[str, Any]:
    """The picture of one session (see the module docstring).

    Returns:
        ``start_ms`` (the first row's write time, epoch ms), ``end_ms`` (the last row's or sub-agent's;
        an import's own records, ``recorded_at_import``, left out),
        ``events``, ``truncated``, ``spans``, ``marks``,
        ``children`` (sub-agent spans), ``integrity``, ``turns``.

    Raises:
        SessionNotFound: no such session.
    """
    record = store.get_session(session_id)
    from_import = _from_import(record)
    fold, start = _fold(store, session_id, MAX_ROWS, from_import=from_import)
    children = _children(store, session_id, 1, [MAX_CHILDREN])
    start = min([record.created_at_ms if start is None else start, *(c["start_ms"] for c in children)])
    integrity = _integrity(store, session_id, from_import=from_import)
    run = [m["at_ms"] for m in integrity if not m.get("recorded_at_import")]
    end = max([fold.last_ms, start, *(c["end_ms"] for c in children), *run])
    return {
        "start_ms": start,
        "end_ms": end,
        "events": record.events,
        "truncated": record.events > MAX_ROWS,
        "spans": fold.spans,
        "marks": fold.marks,
        "integrity": integrity,
        "children": children,
        "turns": [fold.turns[t] for t in sorted(fold.turns)],
    }


def _from_import(record: SessionRecord) -> bool:
    """Whether a session was recorded by an importer (its seal and checkpoints are the import's)."""
    return record.source.startswith("import:")


def register(app: FastAPI, reader: Callable[[], Store]) -> None:
    """Add ``GET /api/waterfall?session=`` to ``app``; ``reader()`` is the shared read-only store."""

    @app.get("/api/waterfall")
    def waterfall_json(session: str = "", id: str = "") -> Response:
        """The run's spans, marks, sub-agents and per-turn tokens and context fill."""
        session, problem = views.api_session(session, id)
        if problem is not None:
            return JSONResponse({"error": problem}, status_code=400)
        try:
            data = waterfall(reader(), session)
        except SessionNotFound:
            return JSONResponse({"error": "no such session"}, status_code=404)
        return JSONResponse(views.sanitize(data), headers={"Cache-Control": "no-store"})
