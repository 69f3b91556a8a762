"""One readable line per event, for ``show``, ``tail`` and live views (seed 003 ``narration``).

Pure: takes an event, returns text. Event content is untrusted input: callers rendering to a terminal or a
page must escape it (the CLI prints through rich with markup disabled).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:  # annotations only: the CLI imports plural/short without loading the event models
    from . import events as ev
    from .messages import Message

__all__ = [
    "MAX_OPERATOR",
    "STATE_SYNONYMS",
    "narrate",
    "operator_problem",
    "plural",
    "printable",
    "short",
    "spent_of",
    "state_word",
    "summarize_message",
]

_PLURALS = {
    "leaf": "leaves",
    "criterion": "criteria",
    "entry": "entries",
    "match": "matches",
    "memory": "memories",
}


def plural(count: int, noun: str) -> str:
    """``count`` and ``noun`` agreeing in number: ``1 leaf``, ``2 leaves``, ``0 sessions``, ``1 session``."""
    return f"{count} {noun if count == 1 else _PLURALS.get(noun, noun + 's')}"


def spent_of(spent: int | None, limit: int | None) -> str:
    """A budget as every surface shows it (``runs --tree``, the dashboard's tree, lineage and sub-agent
    tables): ``45/300`` (spent/limit), ``45 (no limit)`` for a run that records none, ``-`` for a spend the
    read model does not hold."""
    return ("-" if spent is None else str(spent)) + (f"/{limit}" if limit is not None else " (no limit)")


STATE_SYNONYMS: dict[str, str] = {
    "aborted": "cancelled",
    "abort": "cancelled",
    "canceled": "cancelled",
    "incomplete": "interrupted",
}
"""Words that name one state in other spellings, and the term every surface shows for it: seed 002's
``TerminalOutcome::Cancelled`` ("cancelled by the user or a parent") and ``TerminalOutcome::Interrupted``
("interrupted before completion"). A Claude Code import ends a run the user interrupted as ``aborted`` (its
``run_terminal.reason`` and session status, stored as written); an import whose transcript ends mid-run is
``incomplete`` (its session status, and its ``run_terminal.reason`` when sealed), which the runs read model
folds to the outcome ``interrupted`` (:data:`flightlog.runs.adapters.STATUS_OUTCOMES`)."""


def state_word(word: str) -> str:
    """The word ``ls``, ``show``, ``runs`` and the dashboard print for a stored status or end reason.

    Args:
        word: A session status or a ``run_terminal.reason``, as stored (open-ended: an import keeps its
            source's words).

    Returns:
        Seed 002's term when ``word`` is another spelling of it (:data:`STATE_SYNONYMS`, exact match),
        else ``word`` unchanged. Display only: stored bytes, ``--json``'s ``session_status`` and the runs read
        model keep the stored word.
    """
    return STATE_SYNONYMS.get(word, word)


def short(text: str, limit: int = 80) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _run_started(e: ev.RunStarted, session_id: str | None = None) -> str:
    """``run SESSION started: GOAL (N criteria)``: led by the session id as the caller gives it (``show`` and
    ``tail`` give its shortest unique prefix, ``flightlog.cli.options.short_session``), so it pastes into
    ``show``, ``resume``, ``runs --parent`` (``runs`` lists it as the run); the event's own ``run_id`` (a
    kernel run's random hex, an import's source position, a LangGraph checkpoint id), which no command
    takes, is left to ``--json``. Without a session: ``run RUN_ID started: …``, the run id cut to 24 characters."""
    extra = f" ({plural(len(e.criteria), 'criterion')})" if e.criteria else ""
    who = printable(session_id) if session_id is not None else short(e.run_id, 24)
    return f"run {who} started: {short(e.goal)}{extra}"


def _llm(e: ev.LlmCompleted) -> str:
    from .messages import TextPart, ThinkingPart

    text = " ".join(p.text for p in e.message.content if isinstance(p, TextPart))
    thinking = any(isinstance(p, ThinkingPart) for p in e.message.content)
    calls = f", {len(e.message.tool_calls)} tool call(s)" if e.message.tool_calls else ""
    think = " [thinking]" if thinking else ""
    proto = f" via {e.provider_replay.protocol}" if e.provider_replay else ""
    return f"turn {e.turn}: model replied{think}{calls}{proto}: {short(text, 60) or '(no text)'}"


def _tool_requested(e: ev.ToolRequested) -> str:
    names = ", ".join(f"{c.name}({short(c.arguments, 30)})" for c in e.calls)
    return f"turn {e.turn}: requested {short(names, 100)}"


def _tool_completed(e: ev.ToolCompleted) -> str:
    errors = sum(1 for r in e.results if r.is_error)
    first = short(e.results[0].output, 50) if e.results else ""
    suffix = f", {errors} error(s)" if errors else ""
    return f"turn {e.turn}: {len(e.results)} tool result(s){suffix}: {first}"


_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def printable(text: str) -> str:
    """``text`` with controls, format characters (bidi overrides, zero-width marks), separators and spaces
    other than U+0020 shown as ``[U+XXXX]``: for names that must read as what was recorded."""
    return "".join(
        f"[U+{ord(c):04X}]"
        if (cat := unicodedata.category(c)) in _HIDDEN or (cat == "Zs" and c != " ")
        else c
        for c in text
    )


MAX_OPERATOR = 80
"""Longest operator name, in characters (code points)."""

_REFUSED_CATEGORIES = {
    "Cc": "a control character",
    "Cf": "a format character (bidi control, zero-width mark)",
    "Cs": "a surrogate",
    "Co": "a private-use character",
    "Cn": "an unassigned code point",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
    "Zs": "a space other than U+0020",
}


def operator_problem(name: str) -> str | None:
    """Why ``name`` cannot be recorded as an operator name, or None when it can.

    Rule (one for the CLI, the Python API, the dashboard and the integrations; :mod:`flightlog.kernel.approvals`
    documents it): 1 to :data:`MAX_OPERATOR` characters; none in Unicode categories Cc, Cf, Cs, Co, Cn, Zl, Zp;
    no space but U+0020, and none at either end; no variation selector.

    The reason names the offending code point (``U+001B``) and its position, never the raw character.
    """
    if not name:
        return f"empty; give 1 to {MAX_OPERATOR} characters"
    if len(name) > MAX_OPERATOR:
        return f"{len(name)} characters; at most {MAX_OPERATOR}"
    for position, char in enumerate(name, start=1):
        code = ord(char)
        category = unicodedata.category(char)
        if category == "Zs" and char == " ":
            if position in (1, len(name)):
                return f"a space at the {'start' if position == 1 else 'end'}"
            continue
        if category in _REFUSED_CATEGORIES:
            what = _REFUSED_CATEGORIES[category]
        elif 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF:
            what = "a variation selector"
        else:
            continue
        return f"character {position} is U+{code:04X}, {what} (Unicode category {category})"
    return None


def _approval_decision(payload: dict[str, Any]) -> str:
    """``approval_decision`` (kernel record, :mod:`flightlog.kernel.records`): who decided which call."""
    approved = payload.get("approved") is True
    who = short(printable(str(payload.get("responder", "?"))), 80)
    call = short(printable(str(payload.get("call_id", "?"))), 40)
    gate = " (in-doubt effect)" if payload.get("gate") == "effect_in_doubt" else ""
    line = (
        f"turn {payload.get('turn', '?')}: call {call}{gate} {'approved' if approved else 'denied'} by {who}"
    )
    reason = payload.get("reason")
    if (
        not approved
        and isinstance(reason, str)
        and reason
        and reason != f"denied by {payload.get('responder')}"
    ):
        line += f": {short(printable(reason), 50)}"
    return line


def _agents_item(item: dict[str, Any]) -> str:
    """An OpenAI Agents SDK session item (a Responses API input item) on one line."""
    kind = item.get("type") or ("message" if "role" in item else "item")
    if kind == "message":
        content = item.get("content")
        parts = (
            [content]
            if isinstance(content, str)
            else [p.get("text") for p in content or [] if isinstance(p, dict)]
        )
        text = " ".join(t for t in parts if isinstance(t, str))
        return f"{item.get('role', '?')}: {short(text, 70)}"
    if kind == "function_call":
        return f"call {short(str(item.get('name', '?')), 40)}({short(str(item.get('arguments', '')), 50)})"
    if kind == "function_call_output":
        return (
            f"result of {short(str(item.get('call_id', '?')), 40)}: {short(str(item.get('output', '')), 60)}"
        )
    return short(str(kind), 40)


def _agents(kind: str, payload: dict[str, Any]) -> str | None:
    """The Agents SDK integration's records (:mod:`flightlog.integrations.openai_agents`), or None."""
    if kind == "openai_agents.item":
        return "item " + _agents_item(payload)
    if kind == "openai_agents.pop":
        return f"item at seq {payload.get('seq', '?')} popped"
    if kind == "openai_agents.clear":
        return f"history cleared ({plural(int(payload.get('count') or 0), 'item')})"
    if kind == "openai_agents.handoff":
        return f"handoff {short(str(payload.get('from_agent')), 30)} -> {short(str(payload.get('to_agent')), 30)}"
    if kind == "openai_agents.guardrail":
        return f"guardrail {short(str(payload.get('name')), 40)}: {'tripped' if payload.get('triggered') else 'passed'}"
    return None


def _count(value: Any) -> int | None:
    """``value`` when it is a non-negative int (not a bool: payloads are untrusted), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _seconds(value: Any) -> str | None:
    """A payload's seconds as ``1.2``, ``2``, ``0.05`` (two decimals at most); None for what is no number."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value or value < 0:
        return None
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _provider_retry(payload: dict[str, Any]) -> str:
    """``provider_retry`` (kernel record, :mod:`flightlog.kernel.records`): ``turn 3: retry 2/5 after 1.2 s
    (503 overloaded)``; ``retry 2`` without the ``/5`` for a record written before ``max_retries`` was, ``?``
    for what the payload lacks; the error cut to 80 characters."""
    attempt = _count(payload.get("attempt"))
    most = _count(payload.get("max_retries"))
    nth = ("?" if attempt is None else str(attempt)) + (f"/{most}" if most is not None else "")
    delay = _seconds(payload.get("delay_s"))
    line = f"turn {payload.get('turn', '?')}: retry {nth} after {'?' if delay is None else delay} s"
    error = payload.get("error")
    return line + (f" ({short(printable(error), 80)})" if isinstance(error, str) and error else "")


def _custom(e: ev.Custom) -> str:
    payload = e.payload if isinstance(e.payload, dict) else {}
    agents = _agents(e.custom_kind, payload) if e.custom_kind.startswith("openai_agents.") else None
    if agents is not None:
        return agents
    if e.custom_kind == "approval_decision":
        return _approval_decision(payload)
    if e.custom_kind == "provider_retry":
        return _provider_retry(payload)
    if e.custom_kind == "abort_requested":  # kernel record: who asked for the abort beside it
        who = short(printable(str(payload.get("requested_by", "?"))), 80)
        return f"turn {payload.get('turn', '?')}: abort requested by {who}"
    if e.custom_kind == "signal_message":  # replay.SIGNAL_MESSAGE: a delivered signal, now a user message
        who = short(printable(str(payload.get("sender") or "?")), 40)
        kind = short(printable(str(payload.get("kind") or "signal")), 20)
        return f"{kind} from {who} delivered: {short(str(payload.get('text', '')), 60)}"
    if e.custom_kind == "kernel_note":  # replay.KERNEL_NOTE: what the kernel told the model after a rollback
        # as long as a rollback's error (its line above): a fatal error's note holds the error text
        return f"turn {payload.get('turn', '?')}: kernel told the model: {short(str(payload.get('text', '')), 160)}"
    if e.custom_kind == "memory_already_in_history":  # kernel.memory.MEMORY_ALREADY_IN_HISTORY
        ids = [str(i) for i in _of(payload.get("record_ids"), list)]
        return (
            f"turn {payload.get('turn', '?')}: memory recall: {plural(len(ids), 'memory')} already in the "
            f"conversation, not added again ({short(printable(', '.join(ids)), 60)})"
        )
    if e.custom_kind.startswith("langgraph.") and (line := _langgraph(e.custom_kind, payload)) is not None:
        return line
    hint = payload.get("key") or payload.get("type") or payload.get("role") or ""
    return f"{e.custom_kind}" + (f" {short(str(hint), 40)}" if hint else "")


def _of(value: Any, kind: type) -> Any:
    """``value`` when it is a ``kind`` (list or dict), else an empty one."""
    return value if isinstance(value, kind) else kind()


def _seqs(value: Any) -> str:
    """A head record's list of seqs as ``1, 5, 7`` (cut to 40 characters); ``-`` when empty."""
    return short(", ".join(str(s) for s in _of(value, list)), 40) or "-"


def _langgraph(kind: str, payload: dict[str, Any]) -> str | None:
    """A LangGraph saver record (:mod:`flightlog.integrations.langgraph`): which checkpoint, which channels;
    for a head record (the saver's read index, written at each graph stop) which rows it reads from; for
    the thread operations (delete, prune, copy) what they did. None for a kind the saver does not write."""
    ns = payload.get("checkpoint_ns") or ""
    where = f" in {short(printable(str(ns)), 30)}" if ns else ""
    checkpoint = short(printable(str(payload.get("checkpoint_id", "?"))), 24)
    thread = short(printable(str(payload.get("thread_id", "?"))), 40)
    if kind == "langgraph.interrupt_call":  # interrupt -> gated call link
        interrupt_id = short(printable(str(payload.get("interrupt_id", "?"))), 40)
        return f"langgraph interrupt {interrupt_id} gates call {short(printable(str(payload.get('call_id', '?'))), 60)}"
    if kind == "langgraph.subgraph_step":  # closes each write to a subgraph run's session
        return f"langgraph subgraph step: checkpoint {checkpoint}{where} (kept in thread {thread})"
    if kind == "langgraph.static_interrupt":
        status = short(printable(str(payload.get("status", "?"))), 20)
        return f"langgraph static interrupt ({status}) at checkpoint {checkpoint}"
    if kind == "langgraph.thread_deleted":
        return f"langgraph thread {thread} deleted (its rows stay in the ledger)"
    if kind == "langgraph.runs_deleted":
        runs = ", ".join(str(r) for r in _of(payload.get("run_ids"), list))
        return f"langgraph runs deleted: {short(printable(runs), 60) or '-'}"
    if kind == "langgraph.pruned":
        return f"langgraph thread pruned ({short(printable(str(payload.get('strategy', '?'))), 20)})"
    if kind == "langgraph.thread_copied":
        source = short(printable(str(payload.get("source_thread_id", "?"))), 40)
        return f"langgraph thread copied from {source}: {plural(len(_of(payload.get('checkpoints'), list)), 'checkpoint')}"
    if kind == "langgraph.head":
        values = plural(len(_of(payload.get("values"), dict)), "channel value")
        if "checkpoint_id" not in payload:  # since 2026-12-06: the checkpoint of the last body row
            last = _of(payload.get("bodies"), list)[-1:]
            checkpoint = f"of seq {short(printable(str(last[0])), 20)}" if last else "?"
        return (
            f"langgraph head: checkpoint {checkpoint}{where} reads bodies at seqs {_seqs(payload.get('bodies'))},"
            f" writes at {_seqs(payload.get('writes'))}, {values}"
        )
    if kind == "langgraph.writes":
        task = str(payload.get("task_path") or payload.get("task_id") or "?").rsplit(", ", 1)[-1]
        writes: list[Any] = _of(payload.get("writes"), list)
        names = ", ".join(str(w.get("channel")) for w in writes if isinstance(w, dict))
        return f"langgraph writes of {short(printable(task), 30)}{where} to checkpoint {checkpoint}: {short(names, 60)}"
    if kind != "langgraph.checkpoint":
        return None
    info: dict[str, Any] = _of(_of(payload.get("metadata"), dict).get("json"), dict)
    channels: dict[str, Any] = _of(payload.get("channels"), dict)
    names = ", ".join(str(c) for c in channels if not str(c).startswith("branch:to:"))
    step = f"step {info['step']} " if "step" in info else ""
    source = f"({printable(str(info['source']))}) " if "source" in info else ""
    return f"langgraph checkpoint {checkpoint}{where} {step}{source}changed: {short(names, 60) or '-'}"


_NARRATORS: dict[str, Callable[[Any], str]] = {
    "llm_completed": _llm,
    "tool_requested": _tool_requested,
    "tool_completed": _tool_completed,
    "custom": _custom,
    # turns_used is what runs and the dashboard count as steps (runs.adapters: steps_taken)
    "run_terminal": lambda e: (
        f"run ended: {state_word(e.reason)} after {plural(e.turns_used, 'step')}, {plural(e.total_tokens, 'token')}"
    ),
    "compressed": lambda e: (
        f"turn {e.turn}: compressed seqs {e.archived_seq_range[0]}..{e.archived_seq_range[1]}"
        + (f" ({e.action})" if e.action else "")
        + (f": {short(e.summary, 50)}" if e.summary else "")
    ),
    "page_out": lambda e: (
        f"turn {e.turn}: paged out {e.message_count} message(s)"
        + (f" to {e.archive_ref}" if e.archive_ref else "")
    ),
    "page_in": lambda e: f"turn {e.turn}: paged in {e.entry_count} entr(ies)",
    "tool_argument_repaired": lambda e: f"turn {e.turn}: repaired arguments of {e.tool}",
    "permission_requested": lambda e: (
        f"turn {e.turn}: approval requested for {e.tool}" + (f" ({short(e.reason, 40)})" if e.reason else "")
    ),
    # responder is the seed's "user" | "policy_gate"; the operator's name is in the approval_decision
    # record that follows a human decision (narrated as "call X approved by NAME").
    "permission_resolved": lambda e: (
        f"turn {e.turn}: {'approved' if e.approved else 'denied'} (responder: {short(printable(e.responder), 40)})"
    ),
    "tool_denied": lambda e: f"turn {e.turn}: {e.tool_name} {e.call_id} denied: {short(e.reason, 50)}",
    "tool_gated": lambda e: f"turn {e.turn}: {e.tool} {e.call_id} needs approval: {short(e.reason, 50)}",
    "capability_changed": lambda e: _capability_line(e),
    "context_renewed": lambda e: f"turn {e.turn}: context renewed, sprint {e.sprint}",
    "suspended": lambda e: (
        f"turn {e.turn}: suspended ({short(e.reason, 40)}), {len(e.pending_calls)} pending"
    ),
    "resumed": lambda e: f"turn {e.turn}: resumed, {len(e.approved)} approved, {len(e.denied)} denied",
    "signal_delivery_disposed": lambda e: f"turn {e.turn}: signal {e.signal_id} {e.disposition}",
    "budget_exceeded": lambda e: f"turn {e.turn}: budget exceeded: {e.budget}",
    "budget_usage_reported": lambda e: (
        f"turn {e.turn}: usage {plural(e.tokens, 'token')}, {e.rounds} round(s)"
    ),
    "operation_cancelled": lambda e: (
        f"turn {e.turn}: cancelled ({e.reason.value}), {len(e.pending_call_ids)} pending call(s)"
    ),
    "checkpoint_taken": lambda e: f"turn {e.turn}: checkpoint at {e.history_len} message(s)",
    "entropy_sample": lambda e: f"turn {e.turn}: entropy {e.score:.3f}",
    "entropy_alert": lambda e: f"turn {e.turn}: entropy alert {e.score:.3f} >= {e.threshold:.3f}",
    "rollbacked": lambda e: (
        f"turn {e.turn}: rolled back to {e.checkpoint_history_len} message(s)"
        + (f" ({e.reason.kind})" if e.reason else "")
        + (f": {short(e.reason.error, 160)}" if isinstance(getattr(e.reason, "error", None), str) else "")
    ),
    "agent_process_changed": lambda e: (
        f"turn {e.turn}: sub-agent {short(e.agent_id, 40)} {e.state}"
        + (f" ({e.result_termination})" if e.result_termination else "")
    ),
    "milestone_advanced": lambda e: f"turn {e.turn}: milestone {e.phase_id} advanced",
    "milestone_blocked": lambda e: f"turn {e.turn}: milestone {e.phase_id} blocked: {short(e.reason, 40)}",
    "memory_written": lambda e: f"turn {e.turn}: memory {e.name} written ({plural(e.size_bytes, 'byte')})",
    "memory_queried": lambda e: f"turn {e.turn}: memory queried: {short(e.query, 40)}",
    "memory_validation_failed": lambda e: (
        f"turn {e.turn}: memory {e.record_id} rejected: {short(e.error, 40)}"
    ),
    # each hit is one [MEMORY ...] message (flightlog.replay); a hit already in the conversation is named
    # by the memory_already_in_history record after it, not counted here
    "memory_retrieval_result": lambda e: (
        f"memory recall: {plural(len(e.hits), 'hit')} added to the conversation"
        + (f" ({short(', '.join(h.record.record_id for h in e.hits), 60)})" if e.hits else "")
    ),
}


def narrate(event: ev.Event, session_id: str | None = None) -> str:
    """A one-line human description of ``event`` (at most a few hundred characters plus the session id).

    Args:
        event: The decoded event.
        session_id: The session holding it, when the caller knows it: a ``run_started`` line then leads
            with it (:func:`_run_started`), the id every command takes.
    """
    if event.kind == "run_started":
        return _run_started(cast("ev.RunStarted", event), session_id)
    narrator = _NARRATORS.get(event.kind)
    return narrator(event) if narrator else event.kind


def summarize_message(message: Message, limit: int = 90) -> str:
    """One line for a replayed message: its text, else its tool calls, else its tool result output."""
    from .messages import ThinkingPart, ToolResultPart

    if text := message.text_content():
        return short(text, limit)
    if message.tool_calls:
        return short("calls " + ", ".join(f"{c.name}({c.arguments})" for c in message.tool_calls), limit)
    for part in message.content:
        if isinstance(part, ToolResultPart):
            flag = "error " if part.is_error else ""
            return short(f"{flag}result {part.call_id}: {part.output}", limit)
        if isinstance(part, ThinkingPart):
            return short(f"(thinking) {part.thinking}", limit)
    return "(no content)"


def _capability_line(e: ev.CapabilityChanged) -> str:
    """``turn N: mount McpServer:fs (+3 tools) by milestone:plan (phase_advance)``-style line."""
    head = (e.added or e.removed or ["?"])[0]
    tools = len(e.added or e.removed) - 1
    line = f"turn {e.turn}: {e.change_kind or 'change'} {head}"
    if tools > 0:
        line += (
            f" (+{tools} tool{'s' if tools != 1 else ''})"
            if e.added
            else f" (-{tools} tool{'s' if tools != 1 else ''})"
        )
    if e.mounted_by:
        line += f" by {e.mounted_by} ({e.mount_reason or 'no reason'})"
    return line
