"""Owner adapters: recorded sessions and process-table entries → :class:`AgentRunSnapshot` (seed 002).

Pure functions and folds, no I/O: they take a session's header (its ``SessionRecord``) and its stored events
``(seq, recorded_at_ms, event)`` in seq order. Seed 002's ownership contract applies: adapters never
fabricate (unknown budgets, timestamps and parents stay ``None``), references are logical ids (never paths,
never secrets), ``detail`` is a short human string (never raw logs or reasoning), and every snapshot is
coherent (``state == terminal`` exactly when ``terminal`` is present).

Which run is which
==================

* **No run_started, no run.** A session whose ledger never held a ``run_started`` (and that no parent's
  ``agent_process_changed`` names) is not a unit of agent work: an OpenAI Agents SDK session used only as
  conversation memory (``add_items``/``pop_item``), say. Its projection row is kept (the fold resumes from
  it) with the state column ``not_a_run`` and never listed; it becomes a run at its first ``run_started``.
* **One session = one run.** ``run_id`` is the session id. A session may hold several ``run_started`` /
  ``run_terminal`` cycles (an imported Claude Code session has one per prompt); ``state`` and ``terminal``
  describe the latest, ``budget`` sums the whole session (the unit of work).
* **Source.** A session's ``metadata["run_source"]`` when it names a :class:`RunSource` (issue 6 fleet runs
  set ``fleet``), else its ``source`` when that is a :class:`RunSource` value, else ``direct``: top-level
  kernel runs, API sessions, imported transcripts (``import:claude-code``, ``import:codex``) and every
  sub-agent are directly spawned agent workers.
* **Parent.** The session's ``parent_session_id`` (imported sub-agents, e.g. Claude Code's); for a run
  known only from a parent's process table, the session whose ledger recorded that
  ``agent_process_changed``.
* **Sub-agents.** Each ``agent_process_changed`` is a process-table entry for ``agent_id`` (its run id).
  Importers write them (Claude Code sub-agents), and so does the kernel for the children it spawns
  (:mod:`flightlog.kernel.subagents`: each child is a session whose ``parent_session_id`` is the parent). A
  sub-agent with a recorded session of its own is described by that session, and the
  parent's entry only decides what the child's ledger does not: the child's terminal outcome wins; else a
  terminal entry ("exited") makes it terminal; else the child's own state. A sub-agent without a session of
  its own is described by its latest entry alone (``source`` ``direct``, budget unknown).

State mapping (latest run of a session)
=======================================

===================================================== ==========================================
ledger                                                 state
===================================================== ==========================================
a process entry, but no ``run_started`` yet           ``initializing``
``run_started`` and nothing pending                    ``running``
``checkpoint_taken`` without a later ``llm_completed`` ``waiting_model``
``tool_requested`` call ids without result/denial      ``waiting_tool``
``tool_gated`` / ``permission_requested`` unresolved   ``waiting_input``
``suspended`` for approval/input (pending calls, or    ``waiting_input``
a reason naming approval/permission/input/user)
``suspended`` for anything else                        ``paused``
``operation_cancelled`` not followed by progress or   ``stopping``
a ``suspended``
``run_terminal``                                       ``terminal`` (outcome below)
===================================================== ==========================================

Precedence when several hold: stopping > suspended > approval pending > tool pending > model pending >
running. ``resumed`` clears a suspension and the gates it lists; ``rollbacked`` drops pending calls and
the pending model call (the turn is undone), and so does ``operation_cancelled`` for the model call and
the calls it lists; ``checkpoint_taken``, ``llm_completed``, ``tool_requested`` and ``resumed`` are
progress and clear ``stopping``. A process-table entry maps its ``state`` string:
queued/pending → ``queued``; spawned/spawning/starting/created → ``initializing``; suspended/paused/
blocked → ``paused``; stopping/terminating → ``stopping``; exited/joined/terminated/completed/failed/killed/... →
``terminal``, except the kernel's ``killed`` with ``result_termination="user_abort"`` (a child stopped by
its parent's abort, resumable with it: :data:`RESUMABLE_KILL`) → ``paused``, and never over the child's own
ledger; the seed's state names map to themselves; anything else → ``running`` (listed, not ended).

Terminal outcome (``run_terminal.reason``, or an entry's ``result_termination``/``state``):
``completed``/``end_turn``/``stop``/``done``/``success``... → completed; ``failed``/``error``/
``provider_failure``/``timeout``/``context_overflow`` (the kernel's: the request cannot fit the model's
window)... → failed; ``cancelled``/``aborted``/``rewound``/``killed``... →
cancelled; ``interrupted``/``incomplete`` (an imported transcript that ended mid-run)/``host_shutdown``/
``lease_lost`` → interrupted; ``budget_exhausted``/``max_turns``/``max_steps``/``token_limit``... →
budget_exhausted. Any other reason: budget_exhausted when a ``budget_exceeded`` was recorded in that run,
else failed; ``detail`` keeps the verbatim reason (cut to 120 chars) either way.

Why a run failed: the kernel ends a run whose model call failed for good (retries and route positions
spent) or whose tool failed fatally by recording, in one transaction, ``rollbacked(reason=...)`` (seed 000
``RollbackReason``: ``provider_failure`` with the provider's error text, ``fatal_tool_error``, ``timeout``,
``malformed_replay``...) then ``run_terminal("failed")``. A fatal tool error in a turn the kernel commits
instead (a ``side_effect`` of it had completed, :mod:`flightlog.kernel.execution`) is recorded as the
turn's ``tool_completed`` holding the call's result ``FatalToolError: <error>``
(:data:`flightlog.events.FATAL_RESULT_PREFIX`), then ``run_terminal("failed")``; a request that cannot fit
the model's window as ``Custom("context_budget_exceeded")`` then ``run_terminal("context_overflow")``. The
fold keeps the open run's latest of these (:attr:`SessionFold.failure`): a ``rollbacked``'s reason
(``<kind>[: <error or reason>]``, :func:`flightlog.events.rollback_text`), a ``tool_completed``'s first
fatal result (``fatal_tool_error: <error>``, :func:`flightlog.events.fatal_result_text`; a
``tool_completed`` with none changes nothing), a ``context_budget_exceeded``'s sizes
(:func:`flightlog.runs.context.overflow_text`: ``the system prompt and tools need ~<n> tokens, <model>'s
window holds <m> input tokens``; a record it cannot read changes nothing), each as the kernel's
``RunResult.detail`` says it, verbatim, cut to :data:`FAILURE_CHARS`. A later ``llm_completed`` (the turn
went on: a retry or a failover answered) or ``run_started`` clears it, and so does a ``rollbacked`` that
records no reason. When the run then ends ``failed`` under a reason that is one of the words above
(``failed``, ``error``, ``context_overflow``...: the word says nothing more), ``detail`` is
``<reason>: <failure>`` (``failed: provider_failure: no API key``, ``failed: fatal_tool_error: disk
vanished``, ``context_overflow: the system prompt and tools need ~10500 tokens, tiny's window holds 900
input tokens``), cut to 120 chars;
a reason in the owner's own words (LangGraph's ``error in node <node>: <error>``) is kept alone, and an
outcome other than ``failed`` (a run that ran out of budget while a retry waited) never shows it. Nothing
else is invented: a failed run whose ledger records no rollback reason keeps its reason alone.

``Recorder.finish(status)`` is not an event: the session's ``status`` refines the snapshot only when the
events say nothing terminal (:func:`refine_with_status`): ``completed``, ``failed``/``error``, ``aborted``,
``interrupted``/``incomplete``, ``budget_exhausted`` make an in-flight snapshot terminal with that outcome
(``ended_at_ms`` unknown); ``cancelled`` (the kernel's status for an activation stopped by cancellation,
resumable: no ``run_terminal``) makes it ``paused``; any other status (``running``, ``suspended``...)
changes nothing.

Budget
======

* ``tokens_used``: the sum of ``run_terminal.total_tokens`` over the session's ended runs, plus the open
  run's ``Custom("token_usage" | "model_usage", {"total_tokens"} | {"input_tokens", "output_tokens"})``
  records (``model_usage``: the kernel's per-call record), and the open run's growth of a Codex CLI
  import's running total (``Custom("codex.event_msg.token_count")``'s ``info.total_token_usage.total_tokens``,
  counted as the importer counts a run it ends: the latest total less the one before the run's
  ``run_started``, or the latest total when it fell below that; :mod:`flightlog.importers.codex` rule 2), so
  an import without ``--seal``, whose last run has no ``run_terminal``, still shows what the rollout
  counted; ``None`` when none of these exists. (``budget_usage_reported`` reports a reservation's usage, possibly sub-agents'
  included, and is not counted.)
* ``steps_taken``: the sum of ``run_terminal.turns_used`` plus the open run's ``llm_completed`` count;
  ``None`` before any ``run_started``.
* ``token_budget`` / ``max_steps``: only from ``Custom("budget_configured", {"token_budget", "max_steps"})``
  or the kernel's ``Custom("budget_limits", {"tokens", "turns"})`` (latest record wins; an axis it leaves
  out is unlimited, so ``None``); otherwise ``None``.
* ``duration_ms`` and ``ended_at_ms``: from the rows' ``recorded_at_ms`` (first event → the terminal
  event) for sessions recorded live, and for imports whose rows carry the transcript's own times
  (``metadata["source_times"] is True``: Claude Code, Codex). Other imports' rows are stamped with the
  *import* time, not the transcript's clock, so for them both stay ``None``. A duration the transcript
  itself recorded (Claude Code sub-agents' ``metadata["totalDurationMs"]``) wins for any import. In-flight
  runs have no duration.
* The last event's time (the runs list's "last event", ``updated_at_ms``): the latest row's
  ``recorded_at_ms``, except that an import's ``Custom("session_sealed")`` is the import's own record (the
  importer seals a transcript that ended when it records it, at the import time), not the run's: it does not
  move it, so an import of a transcript with its own clock is last active when its transcript was, and one
  imported a year later does not rank as fresh (seed 002: nothing fabricated; the seal stays in the ledger
  and the dashboard shows it as recorded at import).

Context use (beside the snapshot, not in it)
============================================

The latest run's latest ``Custom("prompt_program_invoked")`` of the ``kernel`` actor gives its context
use (:class:`~flightlog.runs.context.ContextUse`: fill, window, basis); ``run_started`` clears it. None
when no such record exists. The seed 002 snapshot has no field for it, so :meth:`SessionFold.context_use`
serves it to the listings and the dashboard.

Refs (ordered by first appearance, at most :data:`MAX_REFS`, oldest dropped first)
==================================================================================

* ``approval:<session>:<call_id>`` (approval) per ``tool_gated``, labelled ``<tool>: pending``, then
  ``approved``/``denied`` (``resumed``, ``tool_denied``) or ``resolved`` (a result arrived without a
  recorded decision). A gate closed without a decision says how: ``cancelled`` (an ``operation_cancelled``
  listing its call; a later ``resumed`` deciding it relabels it, as after ``flightlog abort`` then
  ``approve`` and ``resume``), ``superseded`` (``rollbacked``, or a new ``run_started``) or ``run ended``
  (``run_terminal``). One approval is one ref (seed 002: "an approval record"), named by its call as
  ``flightlog approve SESSION CALL`` names it: the ``permission_requested`` the kernel and the integrations
  record right after a ``tool_gated`` of the same tool is that gate's, and adds no ref (it keeps the run
  ``waiting_input`` until a ``permission_resolved`` or the call's decision). Any other
  ``permission_requested`` is ``approval:<session>:permission-<seq>``, decided by the next
  ``permission_resolved`` (oldest first), closed as a gate is by ``superseded``/``run ended``.
* ``sha256:<hex>`` (artifact) from ``page_out.archive_ref``, ``context_renewed.handoff_ref`` and
  ``compressed.preserved_refs`` when they are artifact handles (other strings are not references).
* ``milestone:<session>:<phase_id>`` (gate), labelled ``passed`` or ``blocked``.
* ``effect:<session>:<key>`` (receipt) per ``Custom("external_effect_completed")``.
* ``Custom("run_ref", {"kind", "reference", "label"?})``: any owner (checkpoints, gates) attaches its
  own logical id; one that looks like a path (``/``, ``\\``, ``~``, ``..``) or holds whitespace is dropped.

Id components are percent-encoded (``/`` → ``%2F``), so a reference is never a path.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any, Protocol
from urllib.parse import quote

from ..events import (
    AgentProcessChanged,
    BudgetExceeded,
    Compressed,
    ContextRenewed,
    Custom,
    Event,
    MilestoneAdvanced,
    MilestoneBlocked,
    OperationCancelled,
    PageOut,
    PermissionRequested,
    PermissionResolved,
    Resumed,
    Rollbacked,
    RunStarted,
    RunTerminal,
    Suspended,
    ToolCompleted,
    ToolDenied,
    ToolGated,
    ToolRequested,
    fatal_result_text,
    rollback_text,
)
from ..narration import short
from ..notarization import SEAL_KIND
from .context import CONTEXT_BUDGET_EXCEEDED, PROMPT_PROGRAM_INVOKED, ContextUse, overflow_text, stored_int
from .model import (
    AgentRunSnapshot,
    BudgetSummary,
    ReceiptKind,
    ReceiptRef,
    RunSource,
    RunState,
    TerminalOutcome,
    TerminalSummary,
)


class SessionRecordLike(Protocol):
    """The fields of a stored session row (``flightlog.store.base.SessionRecord``) the adapters read."""

    @property
    def session_id(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def parent_session_id(self) -> str | None: ...
    @property
    def metadata(self) -> dict[str, Any]: ...


__all__ = [
    "FAILURE_CHARS",
    "FOLD_VERSION",
    "MAX_REFS",
    "RESUMABLE_KILL",
    "STATUS_OUTCOMES",
    "STATUS_STATES",
    "ProcessEntry",
    "SessionFold",
    "SessionHeader",
    "SessionRecordLike",
    "combine",
    "custom_kind_of",
    "is_logical_ref",
    "is_resumable_kill",
    "outcome_for_reason",
    "process_snapshot",
    "process_state",
    "reads_event",
    "refine_with_status",
    "session_snapshot",
]

FOLD_VERSION = 7
"""Version of the fold rules below and of the stored fold text; a stored projection built by another
version is rebuilt (3: a session that holds no run is no longer listed as ``initializing``, and a
``suspended`` after an ``operation_cancelled`` ends ``stopping``: the run waits again; 4: an import's own
seal, written at the import, is not the run's last event, and the header says whether the session is an
import; 5: the same rules, the stored text leaves out members at their defaults, :meth:`SessionFold.to_json`;
6: a Codex import's token counts count toward the open run's ``tokens_used``; 7: a run that failed keeps
why, :attr:`SessionFold.failure`: a rolled-back turn's reason, a committed turn's fatal tool result, a
``context_budget_exceeded`` record; ``context_overflow`` is a ``failed`` word)."""

MAX_REFS = 64
"""Most refs one snapshot keeps (oldest dropped first), so a row stays small in a long session."""

_DETAIL_CHARS = 120

FAILURE_CHARS = 500
"""Most characters of a failure's text (a rollback's reason, a fatal result's error) the fold keeps (:attr:`SessionFold.failure`); a longer one is cut
to this many, its last an ellipsis."""


def _words(text: str) -> list[str]:
    return text.split()


_REASON_OUTCOMES: dict[str, TerminalOutcome] = {
    **dict.fromkeys(
        _words(
            "completed complete end_turn stop stop_sequence done success succeeded finished goal_met ok exited reaped zombie"
        ),
        TerminalOutcome.COMPLETED,
    ),
    **dict.fromkeys(
        _words(
            "failed failure fail error errored provider_failure fatal_tool_error malformed_replay crashed timeout timed_out "
            "context_overflow"
        ),
        TerminalOutcome.FAILED,
    ),
    **dict.fromkeys(
        _words("cancelled canceled aborted abort user_cancel user_interrupt rewound killed terminated"),
        TerminalOutcome.CANCELLED,
    ),
    **dict.fromkeys(
        ("interrupted", "incomplete", "host_shutdown", "lease_lost", "restarted"),
        TerminalOutcome.INTERRUPTED,
    ),
    **dict.fromkeys(
        _words(
            "budget_exhausted budget_exceeded max_turns max_steps turn_limit step_limit token_limit token_budget out_of_budget max_tokens_budget"
        ),
        TerminalOutcome.BUDGET_EXHAUSTED,
    ),
}

STATUS_OUTCOMES: Mapping[str, TerminalOutcome] = {
    "completed": TerminalOutcome.COMPLETED,
    "failed": TerminalOutcome.FAILED,
    "error": TerminalOutcome.FAILED,
    "aborted": TerminalOutcome.CANCELLED,
    "interrupted": TerminalOutcome.INTERRUPTED,
    "incomplete": TerminalOutcome.INTERRUPTED,
    "budget_exhausted": TerminalOutcome.BUDGET_EXHAUSTED,
}
"""Session statuses (``Recorder.finish``) that end a run the events leave in flight, and how."""

STATUS_STATES: Mapping[str, RunState] = {
    **dict.fromkeys(STATUS_OUTCOMES, RunState.TERMINAL),
    "cancelled": RunState.PAUSED,
    "canceled": RunState.PAUSED,
    "queued": RunState.QUEUED,  # a fleet run submitted and not yet claimed by a worker
}
"""Session statuses that override the state of a run the events leave in flight: the terminal ones, and
``cancelled``, which the kernel sets when an activation stops on cancellation and the run stays resumable
(no ``run_terminal``): stopped, holding no process, continued by a resume → ``paused``."""

_PROCESS_STATES: dict[str, RunState] = {
    **{state.value: state for state in RunState},
    **dict.fromkeys(("pending", "waiting_to_start"), RunState.QUEUED),
    **dict.fromkeys(("spawned", "spawning", "starting", "created"), RunState.INITIALIZING),
    **dict.fromkeys(("active", "started", "resumed"), RunState.RUNNING),
    **dict.fromkeys(("suspended", "sleeping", "blocked"), RunState.PAUSED),
    **dict.fromkeys(("terminating", "cancelling", "canceling"), RunState.STOPPING),
    **dict.fromkeys(
        _words(
            "exited terminated completed done finished failed crashed killed cancelled canceled reaped zombie interrupted "
            "joined"
        ),
        RunState.TERMINAL,
    ),
}

_INPUT_WORDS = ("approval", "approve", "permission", "consent", "confirm", "input", "human", "user")
_HANDLE = re.compile(r"sha256:[0-9a-f]{64}")
_LOGICAL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@%+=#-]{0,255}")


# ─── small pure helpers ───────────────────────────────────────────────────────────────────────


def outcome_for_reason(reason: str, *, budget_exceeded: bool = False) -> TerminalOutcome:
    """Map a terminal reason (``run_terminal.reason``, a process ``result_termination``) to an outcome.

    Args:
        reason: The owner's reason string, any case.
        budget_exceeded: A ``budget_exceeded`` was recorded in the run (decides unknown reasons).

    Returns:
        The mapped outcome; an unknown reason is ``budget_exhausted`` after a ``budget_exceeded``, else
        ``failed``.

    Source: seed 002 ``TerminalOutcome``; module docstring table.
    """
    known = _REASON_OUTCOMES.get(reason.strip().lower())
    if known is not None:
        return known
    return TerminalOutcome.BUDGET_EXHAUSTED if budget_exceeded else TerminalOutcome.FAILED


def process_state(state: str) -> RunState:
    """Map a process-table ``state`` string to a :class:`RunState` (unknown strings → ``running``)."""
    return _PROCESS_STATES.get(state.strip().lower(), RunState.RUNNING)


def is_logical_ref(reference: str) -> bool:
    """True for a logical id: no path separators, ``~``, ``..`` or whitespace, at most 256 characters."""
    return bool(_LOGICAL.fullmatch(reference)) and ".." not in reference


def _id(text: str) -> str:
    """An id component safe inside a logical reference: ``/``, ``\\``, whitespace... percent-encoded."""
    return quote(text, safe=":@._+=-")


def _detail(text: str) -> str:
    return short(text, _DETAIL_CHARS)


def _bounded(text: str, limit: int) -> str:
    """``text`` verbatim (whitespace kept) when it has at most ``limit`` characters, else its first
    ``limit - 1`` and an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _is_word(reason: str) -> bool:
    """Whether a terminal reason is one of the outcome words (module docstring), not the owner's own text."""
    return reason.strip().lower() in _REASON_OUTCOMES


def _uint(value: Any) -> int | None:
    """``value`` as a stored integer (:func:`~flightlog.runs.context.stored_int`: an integral float as the
    int its bytes hold) when it is non-negative and fits u64, else None."""
    number = stored_int(value)
    return number if number is not None and 0 <= number < 2**64 else None


# ─── the session header ───────────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class SessionHeader:
    """The immutable facts of a session row a snapshot needs (from its ``SessionRecord``).

    Attributes:
        session_id: The session (= run) id.
        source: The :class:`RunSource` value (see the module docstring).
        parent: ``parent_session_id``, or None.
        imported: True for ``import:*`` sessions whose row timestamps are import time, not run time
            (those without ``metadata["source_times"] is True``).
        duration_hint_ms: A duration (ms) the transcript itself recorded, else None.
        from_import: True for every ``import:*`` session (its seal is the import's record, not the run's).
    """

    session_id: str
    source: str = RunSource.DIRECT.value
    parent: str | None = None
    imported: bool = False
    duration_hint_ms: int | None = None
    from_import: bool = False

    def to_json(self) -> dict[str, Any]:
        """The stored form: ``session_id``, then each other field in declaration order when it is not its
        default (``SessionHeader(**header.to_json()) == header``)."""
        header: dict[str, Any] = {"session_id": self.session_id}
        if self.source != RunSource.DIRECT.value:
            header["source"] = self.source
        if self.parent is not None:
            header["parent"] = self.parent
        if self.imported is not False:
            header["imported"] = self.imported
        if self.duration_hint_ms is not None:
            header["duration_hint_ms"] = self.duration_hint_ms
        if self.from_import is not False:
            header["from_import"] = self.from_import
        return header

    @classmethod
    def of(cls, record: SessionRecordLike) -> SessionHeader:
        """The header of a stored session row."""
        metadata = record.metadata if isinstance(record.metadata, dict) else {}
        # An import whose rows carry the transcript's own times (``source_times``) reads like a live run.
        from_import = record.source.startswith("import:")
        imported = from_import and metadata.get("source_times") is not True
        hint = _uint(metadata.get("totalDurationMs")) if from_import else None
        return cls(
            record.session_id,
            _source_of(record.source, metadata),
            record.parent_session_id,
            imported,
            hint,
            from_import,
        )


def _source_of(source: str, metadata: Mapping[str, Any]) -> str:
    declared = metadata.get("run_source")
    for candidate in (declared, source):
        if isinstance(candidate, str) and candidate in RunSource._value2member_map_:
            return candidate
    return RunSource.DIRECT.value


# ─── process-table entries ────────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class ProcessEntry:
    """The latest ``agent_process_changed`` for one sub-agent, as the projection keeps it.

    Attributes:
        agent_id: The sub-agent's run id.
        recorded_by: The session whose ledger holds the entry (the parent).
        seq: Its seq in that session.
        at_ms: Its ``recorded_at_ms`` (epoch ms).
        state: The entry's ``state`` string.
        result_termination: The entry's ``result_termination``, or None.
        role: The sub-agent's role.
    """

    agent_id: str
    recorded_by: str
    seq: int
    at_ms: int
    state: str
    result_termination: str | None = None
    role: str = ""

    def sort_key(self) -> tuple[int, str, int]:
        """Total order deciding which entry is latest when two ledgers name one agent."""
        return (self.at_ms, self.recorded_by, self.seq)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (the projection's stored form)."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProcessEntry:
        """Inverse of :meth:`to_json`, checking each field (the stored form is unhashed text a raw write can
        change: an entry that would crash a reader later is refused here instead).

        Raises:
            ValueError: ``data`` is not a JSON object, lacks a required field, holds an unknown one, or a
                field holds what no entry holds (another type, a string with a lone surrogate, which no
                event holds: RFC 8785 §3.2.2.2, the canonical encoding; an integer outside 64 bits); the
                message names the field and what it holds.
        """
        checked = _checked("process entry", data, _ENTRY_CHECKS)
        for f in fields(cls):
            if f.name not in checked and f.default is MISSING:
                raise ValueError(f"process entry lacks its {f.name!r} field")
        return cls(**checked)


RESUMABLE_KILL = ("killed", "user_abort")
"""``(state, result_termination)`` of the entry the kernel writes per child when their parent is aborted
(:func:`flightlog.kernel.abort.abort`): the child was stopped with its parent and resumes with it
(:data:`flightlog.kernel.delegation.PROCESS_STATES`), so it reads ``paused``, not ``terminal``."""


def is_resumable_kill(entry: ProcessEntry) -> bool:
    """Whether ``entry`` is the kernel's ``killed`` by a parent's abort (:data:`RESUMABLE_KILL`)."""
    return (entry.state.strip().lower(), entry.result_termination) == RESUMABLE_KILL


def process_snapshot(entry: ProcessEntry) -> AgentRunSnapshot:
    """The snapshot of a sub-agent known only from its parent's process table (source ``direct``); the
    kernel's ``killed`` by a parent's abort (:func:`is_resumable_kill`) is ``paused``."""
    state = RunState.PAUSED if is_resumable_kill(entry) else process_state(entry.state)
    terminal = None
    if state is RunState.TERMINAL:
        reason = entry.result_termination or entry.state
        detail = entry.state + (f": {entry.result_termination}" if entry.result_termination else "")
        terminal = TerminalSummary(outcome=outcome_for_reason(reason), detail=_detail(detail))
    return AgentRunSnapshot(
        run_id=entry.agent_id,
        parent=entry.recorded_by,
        source=RunSource.DIRECT,
        state=state,
        terminal=terminal,
    )


# ─── the session fold ─────────────────────────────────────────────────────────────────────────


@dataclass
class SessionFold:
    """Incremental fold of one session's events into the facts a snapshot needs.

    Feed ``(seq, recorded_at_ms, event)`` in seq order with :meth:`feed`; :meth:`snapshot` renders the
    current snapshot; :meth:`to_json` / :meth:`from_json` persist the state between batches, so folding a
    session in any number of batches gives exactly the state of folding it at once. ``processes`` (the
    ``agent_process_changed`` entries seen since the last :meth:`take_processes`) is not persisted.

    Source: seed 002 adapter contract; module docstring for every rule.
    """

    header: SessionHeader
    last_seq: int = -1
    first_at_ms: int | None = None
    last_at_ms: int | None = None
    phase: str = "none"  # none | open | closed
    terminal_reason: str | None = None
    terminal_at_ms: int | None = None
    terminal_budget: bool = False
    failure: str | None = None  # why the open (or ended) run's latest turn failed, module docstring
    closed_tokens: int | None = None
    closed_turns: int = 0
    open_tokens: int | None = None
    open_steps: int = 0
    codex_total: int = 0  # a Codex import's latest running total_tokens (session-wide)
    codex_start: int = 0  # that total when the open run started
    budget_axis: str | None = None
    token_budget: int | None = None
    max_steps: int | None = None
    awaiting_model: bool = False
    stopping: bool = False
    suspended: str | None = None  # input | paused
    tools: list[str] = field(default_factory=list)
    gates: dict[str, str] = field(default_factory=dict)  # call_id -> approval ref
    permissions: list[str] = field(default_factory=list)  # approval refs, oldest first (a gate's: its own)
    asked: str | None = None  # the ref of the latest tool_gated, until a permission_requested pairs with it
    asked_tool: str | None = None  # its tool
    refs: dict[str, list[Any]] = field(default_factory=dict)  # reference -> [kind, label]
    context: dict[str, Any] | None = None  # ContextUse.to_json() of the open run's latest model call
    processes: list[ProcessEntry] = field(default_factory=list, compare=False)

    # ── persistence ──
    def to_json(self) -> dict[str, Any]:
        """The persisted state: a JSON-ready dict of the members that differ from their defaults (copies of
        the containers; ``processes`` excluded); :meth:`from_json` gives the defaults back.

        Keys, each only when not its field's default (None, False, 0, ``"none"``, empty): the scalar fields
        in sorted order (:data:`_SCALARS`; ``last_seq`` always), then ``header`` (always: ``session_id``,
        then its other fields in declaration order, each only when not its default), ``tools``, ``gates``,
        ``permissions``, ``refs``, ``context``. The stored fold text is this dict's JSON, so the order is part
        of it (``tests/runs/test_runs_adapters.py`` pins it). A default is left out only when the value is
        the default exactly (an ``int`` 0 is left out, a ``0.0`` or ``False`` in a count is written; a
        ``False`` flag is left out, a ``0`` is written), so :meth:`from_json` gives back an equal fold of the
        same types (or refuses a member no event history makes, a count ``False`` say, naming it). Since ``FOLD_VERSION`` 5 (until then every member was written: 30, each ~700
        instructions of ``pydantic_core.to_json`` on every append; bench/HISTORY.md, appendproj).
        """
        # One test per field, a store only for the few set: bench/ledger.py's appends write 5 or 6 of the
        # 30 members (a dict display of all 30 cost more to encode than these tests cost to run).
        state: dict[str, Any] = {}
        if self.asked is not None:
            state["asked"] = self.asked
        if self.asked_tool is not None:
            state["asked_tool"] = self.asked_tool
        if self.awaiting_model is not False:
            state["awaiting_model"] = self.awaiting_model
        if self.budget_axis is not None:
            state["budget_axis"] = self.budget_axis
        if self.closed_tokens is not None:
            state["closed_tokens"] = self.closed_tokens
        if self.closed_turns or type(self.closed_turns) is not int:
            state["closed_turns"] = self.closed_turns
        if self.codex_start or type(self.codex_start) is not int:
            state["codex_start"] = self.codex_start
        if self.codex_total or type(self.codex_total) is not int:
            state["codex_total"] = self.codex_total
        if self.failure is not None:
            state["failure"] = self.failure
        if self.first_at_ms is not None:
            state["first_at_ms"] = self.first_at_ms
        if self.last_at_ms is not None:
            state["last_at_ms"] = self.last_at_ms
        state["last_seq"] = self.last_seq
        if self.max_steps is not None:
            state["max_steps"] = self.max_steps
        if self.open_steps or type(self.open_steps) is not int:
            state["open_steps"] = self.open_steps
        if self.open_tokens is not None:
            state["open_tokens"] = self.open_tokens
        if self.phase != "none":
            state["phase"] = self.phase
        if self.stopping is not False:
            state["stopping"] = self.stopping
        if self.suspended is not None:
            state["suspended"] = self.suspended
        if self.terminal_at_ms is not None:
            state["terminal_at_ms"] = self.terminal_at_ms
        if self.terminal_budget is not False:
            state["terminal_budget"] = self.terminal_budget
        if self.terminal_reason is not None:
            state["terminal_reason"] = self.terminal_reason
        if self.token_budget is not None:
            state["token_budget"] = self.token_budget
        state["header"] = self.header.to_json()
        if self.tools:
            state["tools"] = list(self.tools)
        if self.gates:
            state["gates"] = dict(self.gates)
        if self.permissions:
            state["permissions"] = list(self.permissions)
        if self.refs:
            state["refs"] = {reference: list(entry) for reference, entry in self.refs.items()}
        if self.context is not None:
            state["context"] = dict(self.context)
        return state

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SessionFold:
        """Inverse of :meth:`to_json` (takes ownership of ``data``'s containers), checking every member:
        the stored form is unhashed text a raw write can change, and a member of another type or value
        would fold or render wrongly, or fail, at some later append or read; it is refused here instead.

        Raises:
            ValueError: ``data`` or its ``header`` is not a JSON object, lacks ``header``, ``last_seq`` or
                the header's ``session_id``, holds a field no fold has, or a member holds what no fold
                holds (:data:`_FOLD_CHECKS`: another type, a bool for an integer, an integer outside its
                range, a ``phase``, ``suspended``, ``source`` or ref kind outside its values, a string with
                a lone surrogate, a ``context`` that is no :class:`~flightlog.runs.context.ContextUse`).
                The message names the field and what it holds.
        """
        state = _checked("session fold", data, _FOLD_CHECKS)
        for required in ("header", "last_seq"):
            if required not in state:
                raise ValueError(f"session fold lacks its {required!r} field")
        header = _checked("session fold header", state.pop("header"), _HEADER_CHECKS)
        if "session_id" not in header:
            raise ValueError("session fold header lacks its 'session_id' field")
        return cls(header=SessionHeader(**header), **state)

    def take_processes(self) -> list[ProcessEntry]:
        """The process-table entries fed since the last call (then forgotten)."""
        taken, self.processes = self.processes, []
        return taken

    # ── feeding ──
    def feed(self, seq: int, at_ms: int, event: Event) -> None:
        """Fold one stored event.

        Raises:
            ValueError: ``seq`` is not greater than the last one fed.
        """
        self.feed_row(seq, at_ms, event.kind, event)

    def feed_row(self, seq: int, at_ms: int, kind: str, event: Event | None) -> None:
        """Fold one stored row of ``kind``: as :meth:`feed` with its event, which may be None when
        :func:`reads_event` says the fold does not read the event of that row (the fold is the same).

        Raises:
            ValueError: ``seq`` is not greater than the last one fed.
        """
        if seq <= self.last_seq:
            raise ValueError(f"events must be fed in ascending seq order: seq {seq} after {self.last_seq}")
        self.last_seq = seq
        if self.first_at_ms is None:
            self.first_at_ms = at_ms
        if kind != "custom" or not self.header.from_import or not _is_seal(event):
            self.last_at_ms = at_ms  # an import's seal is the import's record (module docstring)
        handler = _HANDLERS.get(kind)
        if handler is not None:
            handler(self, seq, at_ms, event)

    def feed_all(self, events: Iterable[tuple[int, int, Event]]) -> SessionFold:
        """Fold ``(seq, recorded_at_ms, event)`` triples; returns self."""
        for seq, at_ms, event in events:
            self.feed(seq, at_ms, event)
        return self

    def _ref(self, kind: ReceiptKind, reference: str, label: str | None) -> None:
        if reference not in self.refs and len(self.refs) >= MAX_REFS:
            del self.refs[next(iter(self.refs))]
        self.refs[reference] = [kind.value, label]

    def _label(self, reference: str, label: str) -> None:
        if reference in self.refs:
            self.refs[reference][1] = label

    def _approval(self, reference: str, decision: str) -> None:
        current = self.refs.get(reference)
        if current is not None and isinstance(current[1], str):
            self._label(reference, current[1].rsplit(": ", 1)[0] + f": {decision}")

    def _progress(self) -> None:
        self.stopping = False

    def _on_run_started(self, seq: int, at: int, e: RunStarted) -> None:
        self.phase = "open"
        self.terminal_reason = self.terminal_at_ms = None
        self.terminal_budget = False
        self.failure = None
        self.open_tokens, self.open_steps, self.budget_axis = None, 0, None
        self.codex_start = self.codex_total
        self._clear_pending("superseded")  # a new run: the previous one's open approvals wait no more
        self.suspended = None
        self.stopping = False
        self.context = None

    def _clear_pending(self, closed: str | None = None) -> None:
        """Drop every pending call and open approval; label the approvals ``closed`` (when given)."""
        if closed is not None:
            for reference in [*self.gates.values(), *self.permissions]:
                self._approval(reference, closed)
        self.asked = self.asked_tool = None
        self.awaiting_model = False
        self.tools = []
        self.gates = {}
        self.permissions = []

    def _on_run_terminal(self, seq: int, at: int, e: RunTerminal) -> None:
        self.closed_tokens = (self.closed_tokens or 0) + e.total_tokens
        self.closed_turns += e.turns_used
        self.phase = "closed"
        self.terminal_reason, self.terminal_at_ms = e.reason, at
        self.terminal_budget = self.budget_axis is not None
        self.open_tokens, self.open_steps = None, 0
        self._clear_pending("run ended")
        self.suspended = None
        self.stopping = False

    def _on_checkpoint_taken(self, seq: int, at: int, e: Event) -> None:
        self.awaiting_model = True
        self._progress()

    def _on_llm_completed(self, seq: int, at: int, e: Event) -> None:
        self.awaiting_model = False
        if self.phase == "open":  # the model answered after the rollback: the run went past it
            self.failure = None
        self.open_steps += 1
        self._progress()

    def _on_tool_requested(self, seq: int, at: int, e: ToolRequested) -> None:
        self.awaiting_model = False
        self.tools.extend(c.id for c in e.calls if c.id not in self.tools)
        self._progress()

    def _drop_call(self, call_id: str, closed: str | None = None) -> None:
        if call_id in self.tools:
            self.tools.remove(call_id)
        reference = self.gates.pop(call_id, None)
        if reference is not None:
            if closed is not None:
                self._approval(reference, closed)
            if reference in self.permissions:  # its permission_requested is answered with it
                self.permissions.remove(reference)

    def _on_tool_completed(self, seq: int, at: int, e: ToolCompleted) -> None:
        fatal = fatal_result_text(e.results) if self.phase == "open" else None
        if fatal is not None:  # a turn committed after a fatal tool error (module docstring)
            self.failure = _bounded(fatal, FAILURE_CHARS)
        for result in e.results:
            reference = self.gates.get(result.call_id)
            if reference is not None:
                self._approval(reference, "resolved")
            self._drop_call(result.call_id)

    def _on_tool_denied(self, seq: int, at: int, e: ToolDenied) -> None:
        reference = self.gates.get(e.call_id)
        if reference is not None:
            self._approval(reference, "denied")
        self._drop_call(e.call_id)

    def _on_tool_gated(self, seq: int, at: int, e: ToolGated) -> None:
        reference = f"approval:{_id(self.header.session_id)}:{_id(e.call_id)}"
        self.gates[e.call_id] = reference
        self.asked, self.asked_tool = reference, e.tool
        self._ref(ReceiptKind.APPROVAL, reference, _detail(f"{e.tool}: pending"))

    def _on_permission_requested(self, seq: int, at: int, e: PermissionRequested) -> None:
        # The kernel and the integrations record a gated call as tool_gated + permission_requested (which
        # names no call): one approval, so one ref, the gate's, which the permission only keeps waiting.
        asked, self.asked = self.asked, None
        if asked is not None and e.tool == self.asked_tool and asked in self.gates.values():
            self.permissions.append(asked)
            return
        reference = f"approval:{_id(self.header.session_id)}:permission-{seq}"
        self.permissions.append(reference)
        self._ref(ReceiptKind.APPROVAL, reference, _detail(f"{e.tool}: pending"))

    def _on_permission_resolved(self, seq: int, at: int, e: PermissionResolved) -> None:
        if not self.permissions:
            return
        reference = self.permissions.pop(0)
        # A gate's decision names its call (resumed, tool_denied, tool_completed), a permission_resolved
        # none: answered oldest first, it must not label a gate that may not be the one decided.
        if reference not in self.gates.values():
            self._approval(reference, "approved" if e.approved else "denied")

    def _on_suspended(self, seq: int, at: int, e: Suspended) -> None:
        wants_input = bool(e.pending_calls) or any(w in e.reason.lower() for w in _INPUT_WORDS)
        self.suspended = "input" if wants_input else "paused"
        self.stopping = False  # a wait a resume re-opened after an abort: the run waits, it is not stopping

    def _on_resumed(self, seq: int, at: int, e: Resumed) -> None:
        self.suspended = None
        for decision, call_ids in (("approved", e.approved), ("denied", e.denied)):
            for call_id in call_ids:
                reference = self.gates.pop(call_id, None)
                if reference is None:  # a gate an abort closed, decided after it (the run stays resumable)
                    reference = f"approval:{_id(self.header.session_id)}:{_id(call_id)}"
                elif reference in self.permissions:
                    self.permissions.remove(reference)
                self._approval(reference, decision)
        self._progress()

    def _on_operation_cancelled(self, seq: int, at: int, e: OperationCancelled) -> None:
        self.stopping = self.phase == "open"
        self.awaiting_model = False  # the cancelled operation (a model call, tool I/O) is not pending
        for call_id in e.pending_call_ids:
            self._drop_call(call_id, "cancelled")

    def _on_rollbacked(self, seq: int, at: int, e: Rollbacked) -> None:
        if self.phase == "open":  # a rollback between runs (an import's rewind) is no run's failure
            self.failure = None if e.reason is None else _bounded(rollback_text(e.reason), FAILURE_CHARS)
        self.awaiting_model = False
        self.tools = []
        for reference in self.gates.values():
            self._approval(reference, "superseded")
            if reference in self.permissions:
                self.permissions.remove(reference)
        self.gates = {}
        self.asked = self.asked_tool = None

    def _on_budget_exceeded(self, seq: int, at: int, e: BudgetExceeded) -> None:
        self.budget_axis = e.budget

    def _on_page_out(self, seq: int, at: int, e: PageOut) -> None:
        self._artifact(e.archive_ref, "page-out archive")

    def _on_context_renewed(self, seq: int, at: int, e: ContextRenewed) -> None:
        self._artifact(e.handoff_ref, f"handoff, sprint {e.sprint}")

    def _on_compressed(self, seq: int, at: int, e: Compressed) -> None:
        for reference in e.preserved_refs:
            self._artifact(reference, "preserved by compression")

    def _artifact(self, reference: str | None, label: str) -> None:
        if reference is not None and _HANDLE.fullmatch(reference):
            self._ref(ReceiptKind.ARTIFACT, reference, label)

    def _on_milestone(self, seq: int, at: int, e: MilestoneAdvanced | MilestoneBlocked) -> None:
        reference = f"milestone:{_id(self.header.session_id)}:{_id(e.phase_id)}"
        self._ref(ReceiptKind.GATE, reference, "passed" if isinstance(e, MilestoneAdvanced) else "blocked")

    def _on_agent_process_changed(self, seq: int, at: int, e: AgentProcessChanged) -> None:
        entry = ProcessEntry(
            e.agent_id, self.header.session_id, seq, at, e.state, e.result_termination, e.role
        )
        self.processes.append(entry)

    def _on_custom(self, seq: int, at: int, e: Custom | None) -> None:
        if e is None:  # reads_event read its custom_kind from the bytes: no handler for it
            return
        payload = e.payload if isinstance(e.payload, dict) else {}
        handler = _CUSTOM_HANDLERS.get(e.custom_kind)
        if handler is not None:
            handler(self, payload)

    def _on_budget_configured(self, payload: dict[str, Any]) -> None:
        if "token_budget" in payload:
            self.token_budget = _uint(payload["token_budget"])
        if "max_steps" in payload:
            steps = _uint(payload["max_steps"])
            self.max_steps = steps if steps is not None and steps < 2**32 else None

    def _on_budget_limits(self, payload: dict[str, Any]) -> None:
        """The kernel's ``budget_limits`` record: ``tokens`` and ``turns`` ceilings (absent = unlimited)."""
        self._on_budget_configured({"token_budget": payload.get("tokens"), "max_steps": payload.get("turns")})

    def _on_token_usage(self, payload: dict[str, Any]) -> None:
        total = _uint(payload.get("total_tokens"))
        if total is None:
            parts = [_uint(payload.get("input_tokens")), _uint(payload.get("output_tokens"))]
            total = sum(p for p in parts if p is not None) if any(p is not None for p in parts) else None
        if total is not None and self.phase == "open":
            self.open_tokens = (self.open_tokens or 0) + total

    def _codex_used(self, total: int) -> int:
        """The open run's tokens at running total ``total`` (the importer's ``RunTerminal.total_tokens``)."""
        return total - self.codex_start if total >= self.codex_start else total

    def _on_codex_token_count(self, payload: dict[str, Any]) -> None:
        """A Codex rollout's ``token_count``: the open run's tokens grow as its running total does."""
        info = payload.get("info")
        usage = info.get("total_token_usage") if isinstance(info, dict) else None
        total = _uint(usage.get("total_tokens")) if isinstance(usage, dict) else None
        if total is None:
            return  # "info": null (rate limits only), or no count: nothing counted
        if self.phase == "open":  # the growth since the last count (a repeated count adds nothing)
            grown = self._codex_used(total) - self._codex_used(self.codex_total)
            self.open_tokens = max(0, (self.open_tokens or 0) + grown)
        self.codex_total = total

    def _on_effect_completed(self, payload: dict[str, Any]) -> None:
        key = payload.get("key")
        if isinstance(key, str):
            self._ref(
                ReceiptKind.RECEIPT, f"effect:{_id(self.header.session_id)}:{_id(key)}", "effect completed"
            )

    def _on_prompt_program_invoked(self, payload: dict[str, Any]) -> None:
        use = ContextUse.from_invoked(payload)
        if use is not None:
            self.context = use.to_json()

    def _on_context_budget_exceeded(self, payload: dict[str, Any]) -> None:
        """The kernel's record of a request that cannot fit, before its ``run_terminal("context_overflow")``."""
        text = overflow_text(payload) if self.phase == "open" else None
        if text is not None:
            self.failure = _bounded(text, FAILURE_CHARS)

    def _on_run_ref(self, payload: dict[str, Any]) -> None:
        kind, reference, label = payload.get("kind"), payload.get("reference"), payload.get("label")
        if not isinstance(kind, str) or kind not in ReceiptKind._value2member_map_:
            return
        if not isinstance(reference, str):
            return
        if is_logical_ref(reference):
            self._ref(ReceiptKind(kind), reference, _detail(label) if isinstance(label, str) else None)

    # ── rendering ──
    def state(self) -> RunState:
        """The lifecycle state of the latest run (module docstring table)."""
        if self.phase == "closed":
            return RunState.TERMINAL
        if self.phase == "none":
            return RunState.INITIALIZING
        if self.stopping:
            return RunState.STOPPING
        if self.suspended is not None:
            return RunState.WAITING_INPUT if self.suspended == "input" else RunState.PAUSED
        if self.gates or self.permissions:
            return RunState.WAITING_INPUT
        if self.tools:
            return RunState.WAITING_TOOL
        return RunState.WAITING_MODEL if self.awaiting_model else RunState.RUNNING

    def budget(self) -> BudgetSummary:
        """Budget facts recorded so far (module docstring: never invented)."""
        return BudgetSummary(**dict(zip(_BUDGET_FIELDS, self._budget_values(), strict=True)))

    def _budget_values(self) -> tuple[int | None, ...]:
        """:class:`BudgetSummary`'s fields in declaration order (:data:`_BUDGET_FIELDS`)."""
        tokens = self.closed_tokens
        if self.open_tokens is not None:
            tokens = (tokens or 0) + self.open_tokens
        steps = None if self.phase == "none" else self.closed_turns + self.open_steps
        return (
            self.token_budget,
            min(tokens, 2**64 - 1) if tokens is not None else None,
            min(steps, 2**32 - 1) if steps is not None else None,
            self.max_steps,
            self._duration(),
        )

    def _duration(self) -> int | None:
        if self.phase != "closed":
            return None
        if self.header.imported or self.header.duration_hint_ms is not None:
            return self.header.duration_hint_ms
        if self.first_at_ms is None or self.terminal_at_ms is None:
            return None
        return max(0, self.terminal_at_ms - self.first_at_ms)

    def terminal(self) -> TerminalSummary | None:
        """The terminal summary of the latest run, when it ended."""
        values = self._terminal_values()
        if values is None:
            return None
        outcome, ended, detail = values
        return TerminalSummary(outcome=outcome, ended_at_ms=ended, detail=detail)

    def _terminal_values(self) -> tuple[TerminalOutcome, int | None, str] | None:
        """:class:`TerminalSummary`'s fields (outcome, ended_at_ms, detail), None while no run ended."""
        if self.phase != "closed" or self.terminal_reason is None:
            return None
        reason = self.terminal_reason
        outcome = outcome_for_reason(reason, budget_exceeded=self.terminal_budget)
        detail = reason if self.budget_axis is None else f"{reason} ({self.budget_axis} budget exceeded)"
        if self.failure is not None and outcome is TerminalOutcome.FAILED and _is_word(reason):
            detail = f"{reason}: {self.failure}"  # the word says failed; the rollback says why
        return outcome, None if self.header.imported else self.terminal_at_ms, _detail(detail)

    def context_use(self) -> ContextUse | None:
        """The window fill recorded with the latest run's latest model call (:mod:`flightlog.runs.context`),
        None when none was recorded."""
        return None if self.context is None else ContextUse.from_json(self.context)

    def ref_list(self) -> list[ReceiptRef]:
        """The refs, in first-appearance order."""
        return [
            ReceiptRef(kind=ReceiptKind(kind), reference=reference, label=label)
            for reference, (kind, label) in self.refs.items()
        ]

    def holds_run(self) -> bool:
        """Whether the session's ledger held a ``run_started`` (else it is no run of its own)."""
        return self.phase != "none"

    def snapshot(self) -> AgentRunSnapshot:
        """The session's snapshot from its events alone (no status refinement, no process entry)."""
        return AgentRunSnapshot(
            run_id=self.header.session_id,
            parent=self.header.parent,
            source=RunSource(self.header.source),
            state=self.state(),
            budget=self.budget(),
            terminal=self.terminal(),
            refs=self.ref_list(),
        )

    def snapshot_wire(self) -> dict[str, Any] | None:
        """:meth:`snapshot`'s wire form built without pydantic models, or None where it is not built so.

        Returns:
            A dict equal to ``self.snapshot().to_wire()``, with its keys in the same order, so that
            ``pydantic_core.to_json`` of it gives ``self.snapshot().model_dump_json()`` byte for byte
            (``tests/runs/test_runs_projection.py`` checks both on generated folds). None when a value is
            one the models would have to validate (an id that is not a ``str``, an integer outside its
            field's range, a ref of an unknown kind): :meth:`snapshot` then builds it, or raises.

        Raises:
            ValueError: the header's ``source`` is not a :class:`RunSource` value (as :meth:`snapshot`).
        """
        header = self.header
        run_id, parent, source = header.session_id, header.parent, header.source
        if type(run_id) is not str or not (parent is None or type(parent) is str):
            return None
        wire: dict[str, Any] = {"run_id": run_id}
        if parent is not None:
            wire["parent"] = parent
        # Plain lookups for the two enum values (``RunSource(...)`` and ``.value`` run Python code in the
        # enum module); anything not a source's value takes ``RunSource``, which raises ValueError.
        known = _SOURCE_VALUES.get(source) if type(source) is str else None
        wire["source"] = known if known is not None else RunSource(source).value
        wire["state"] = _STATE_VALUES[self.state()]
        budget = _in_range(_BUDGET_FIELDS, self._budget_values(), _BUDGET_LIMITS)
        terminal = self._terminal_wire()
        refs = self._refs_wire()
        if budget is None or terminal is False or refs is None:
            return None
        wire["budget"] = budget
        for name, value in (("terminal", terminal), ("refs", refs)):  # absent: None / no refs
            if value:
                wire[name] = value
        return wire

    def _terminal_wire(self) -> dict[str, Any] | bool | None:
        """:meth:`terminal`'s wire dict; None while no run ended; False when it needs the model."""
        values = self._terminal_values()
        if values is None:
            return None
        outcome, ended, detail = values
        terminal = _in_range(_TERMINAL_FIELDS, (outcome.value, ended, detail), _TERMINAL_LIMITS)
        return False if terminal is None else terminal

    def _refs_wire(self) -> list[dict[str, Any]] | None:
        """:meth:`ref_list`'s wire dicts; None when one needs the model (unknown kind, non-str text)."""
        refs: list[dict[str, Any]] = []
        for reference, (kind, label) in self.refs.items():
            if kind not in ReceiptKind._value2member_map_ or not _is_text(reference):
                return None
            if label is None:
                refs.append({"kind": kind, "reference": reference})
            elif _is_text(label):
                refs.append({"kind": kind, "reference": reference, "label": label})
            else:
                return None
        return refs


_BUDGET_FIELDS = tuple(BudgetSummary.model_fields)
_U32, _U64 = (0, 2**32 - 1), (0, 2**64 - 1)
_BUDGET_LIMITS: tuple[tuple[int, int] | None, ...] = (_U64, _U64, _U32, _U32, _U64)
"""Each :class:`BudgetSummary` field's range (its ``U32``/``U64`` type), in :data:`_BUDGET_FIELDS` order."""
_TERMINAL_FIELDS = tuple(TerminalSummary.model_fields)
_TERMINAL_LIMITS: tuple[tuple[int, int] | None, ...] = (None, (-(2**63), 2**63 - 1), None)
"""``ended_at_ms``'s range (``I64``); ``outcome`` and ``detail`` are ``str`` (None: a string field)."""


_SOURCE_VALUES = {source.value: source.value for source in RunSource}
_STATE_VALUES = {state: state.value for state in RunState}
"""The ``value`` of each :class:`RunSource` (by value) and :class:`RunState` (by member)."""


def _is_text(value: Any) -> bool:
    return type(value) is str


def _in_range(
    names: tuple[str, ...], values: tuple[Any, ...], limits: tuple[tuple[int, int] | None, ...]
) -> dict[str, Any] | None:
    """The wire dict of a model's fields (``None`` values left out, as ``WireModel`` writes them), or None
    when a value is not what the field holds without validation: an ``int`` (bool excluded) within the
    field's range, or a ``str`` where the range is None."""
    wire: dict[str, Any] = {}
    for name, value, limit in zip(names, values, limits, strict=True):
        if value is None:
            continue
        if limit is None:
            if not _is_text(value):
                return None
        elif type(value) is not int or not limit[0] <= value <= limit[1]:
            return None
        wire[name] = value
    return wire


_HEADER_FIELDS = tuple(f.name for f in fields(SessionHeader))
_STATE_FIELDS = frozenset(f.name for f in fields(SessionFold)) - {"header", "processes"}
_SCALARS = tuple(sorted(_STATE_FIELDS - {"tools", "gates", "permissions", "refs", "context"}))


# ─── the stored forms' checks (ProcessEntry.from_json, SessionFold.from_json) ─────────────────

_Check = Callable[[Any], str | None]
"""A stored member's check: None when the value is one the member holds, else why not (``not int``...)."""


def _checked(owner: str, data: Any, checks: Mapping[str, _Check]) -> dict[str, Any]:
    """``data`` as a dict once every member passes its check in ``checks``.

    Raises:
        ValueError: ``data`` is not a JSON object, holds a member ``checks`` does not name, or one that
            fails its check: ``{owner} field 'name' holds <value> (<type>), <why>``.
    """
    if not isinstance(data, Mapping):
        raise ValueError(f"{owner} is a {type(data).__name__}, not a JSON object")
    for name, value in data.items():
        check = checks.get(name)
        if check is None:
            raise ValueError(f"{owner} holds an unknown field {short(repr(name), 40)}")
        why = check(value)
        if why is not None:
            raise ValueError(
                f"{owner} field {name!r} holds {short(repr(value), 40)} ({type(value).__name__}), {why}"
            )
    return dict(data)


def _text_fault(value: Any) -> str | None:
    """Why ``value`` is no stored text: not a ``str``, or one with a lone surrogate (no event holds one:
    the canonical encoding refuses it, RFC 8785 §3.2.2.2, so no fold or entry does)."""
    if type(value) is not str:
        return "not str"
    try:
        value.encode()
    except UnicodeEncodeError:
        return "a string with a lone surrogate"
    return None


def _text(*values: str, null: bool = False) -> _Check:
    """A text member (one of ``values`` when given; None too when ``null``)."""

    def check(value: Any) -> str | None:
        if value is None:
            return None if null else "not str"
        why = _text_fault(value)
        if why is None and values and value not in values:
            return "not one of " + ", ".join(map(repr, values))
        return why

    return check


def _integer(low: int, high: int, *, null: bool = False) -> _Check:
    """An integer member in ``low..high`` (a bool is none; None too when ``null``)."""

    def check(value: Any) -> str | None:
        if value is None:
            return None if null else "not int"
        if type(value) is not int:
            return "not int" + (" or None" if null else "")
        return None if low <= value <= high else f"not in {low}..{high}"

    return check


def _flag(value: Any) -> str | None:
    return None if type(value) is bool else "not bool"


def _texts(value: Any) -> str | None:
    """A list of texts (call ids, approval refs)."""
    if type(value) is not list:
        return "not a list"
    return next((f"item {i}: {why}" for i, v in enumerate(value) if (why := _text_fault(v))), None)


def _text_map(value: Any) -> str | None:
    """A JSON object of texts to texts (call id -> approval ref)."""
    if type(value) is not dict:
        return "not a JSON object"
    return next(
        (f"entry {short(repr(k), 40)}: {why}" for k, v in value.items() if (why := _text_fault(v))), None
    )


def _ref_map(value: Any) -> str | None:
    """``refs``: reference -> ``[kind, label]``, the kind a :class:`ReceiptKind` value, the label text or
    None."""
    if type(value) is not dict:
        return "not a JSON object"
    for reference, entry in value.items():
        why = _text_fault(reference)
        if why is None and (type(entry) is not list or len(entry) != 2):
            why = "not a [kind, label] pair"
        why = why or _REF_KIND(entry[0]) or _LABEL(entry[1])
        if why is not None:
            return f"entry {short(repr(reference), 40)}: {why}"
    return None


def _context_fault(value: Any) -> str | None:
    """``context``: None or a :class:`~flightlog.runs.context.ContextUse`'s JSON."""
    if value is None or (type(value) is dict and ContextUse.from_json(value) is not None):
        return None
    return "not a context use (turn, fill_tokens, basis...)"


_I64 = (-(2**63), 2**63 - 1)
"""A stored time's range (epoch ms; the store's ``recorded_at_ms`` is a signed 64-bit integer)."""
_COUNTS = (0, 2**64 - 1)
"""A count's range (tokens, turns, steps: sums of events' ``U32``/``U64`` fields; the snapshot clamps)."""
_REF_KIND, _LABEL = _text(*(kind.value for kind in ReceiptKind)), _text(null=True)

_ENTRY_CHECKS: dict[str, _Check] = {
    "agent_id": _text(),
    "recorded_by": _text(),
    "seq": _integer(0, 2**63 - 1),
    "at_ms": _integer(*_I64),
    "state": _text(),
    "result_termination": _text(null=True),
    "role": _text(),
}
"""What each :class:`ProcessEntry` field holds in its stored form (:meth:`ProcessEntry.from_json`)."""

_HEADER_CHECKS: dict[str, _Check] = {
    "session_id": _text(),
    "source": _text(*_SOURCE_VALUES),
    "parent": _text(null=True),
    "imported": _flag,
    "duration_hint_ms": _integer(*_COUNTS, null=True),
    "from_import": _flag,
}
"""What each :class:`SessionHeader` field holds in a stored fold (:meth:`SessionFold.from_json`)."""

_FOLD_CHECKS: dict[str, _Check] = {
    "header": lambda value: None,  # checked member by member (_HEADER_CHECKS)
    "last_seq": _integer(-1, 2**63 - 1),
    "first_at_ms": _integer(*_I64, null=True),
    "last_at_ms": _integer(*_I64, null=True),
    "phase": _text("none", "open", "closed"),
    "terminal_reason": _text(null=True),
    "terminal_at_ms": _integer(*_I64, null=True),
    "terminal_budget": _flag,
    "closed_tokens": _integer(*_COUNTS, null=True),
    "closed_turns": _integer(*_COUNTS),
    "open_tokens": _integer(*_COUNTS, null=True),
    "open_steps": _integer(*_COUNTS),
    "codex_total": _integer(*_COUNTS),
    "codex_start": _integer(*_COUNTS),
    "budget_axis": _text(null=True),
    "token_budget": _integer(*_COUNTS, null=True),
    "max_steps": _integer(0, 2**32 - 1, null=True),
    "awaiting_model": _flag,
    "stopping": _flag,
    "suspended": _text("input", "paused", null=True),
    "tools": _texts,
    "gates": _text_map,
    "permissions": _texts,
    "asked": _text(null=True),
    "asked_tool": _text(null=True),
    "refs": _ref_map,
    "context": _context_fault,
    "failure": _text(null=True),
}
"""What each :class:`SessionFold` member holds in its stored form (:meth:`SessionFold.from_json`): what the
handlers above can set, so the fold of any history passes and an edited one that would fold or render
otherwise (or fail) does not."""

_HANDLERS: dict[str, Any] = {
    "run_started": SessionFold._on_run_started,
    "run_terminal": SessionFold._on_run_terminal,
    "checkpoint_taken": SessionFold._on_checkpoint_taken,
    "llm_completed": SessionFold._on_llm_completed,
    "tool_requested": SessionFold._on_tool_requested,
    "tool_completed": SessionFold._on_tool_completed,
    "tool_denied": SessionFold._on_tool_denied,
    "tool_gated": SessionFold._on_tool_gated,
    "permission_requested": SessionFold._on_permission_requested,
    "permission_resolved": SessionFold._on_permission_resolved,
    "suspended": SessionFold._on_suspended,
    "resumed": SessionFold._on_resumed,
    "operation_cancelled": SessionFold._on_operation_cancelled,
    "rollbacked": SessionFold._on_rollbacked,
    "budget_exceeded": SessionFold._on_budget_exceeded,
    "page_out": SessionFold._on_page_out,
    "context_renewed": SessionFold._on_context_renewed,
    "compressed": SessionFold._on_compressed,
    "milestone_advanced": SessionFold._on_milestone,
    "milestone_blocked": SessionFold._on_milestone,
    "agent_process_changed": SessionFold._on_agent_process_changed,
    "custom": SessionFold._on_custom,
}


def _is_seal(event: Event | None) -> bool:
    """Whether ``event`` is a ``Custom("session_sealed")`` (decoded: :func:`reads_event` asks for it)."""
    return isinstance(event, Custom) and event.custom_kind == SEAL_KIND


def _on_seal(fold: SessionFold, payload: dict[str, Any]) -> None:
    """Nothing to fold: listed so that :func:`reads_event` has the seal decoded for :meth:`feed_row`."""


_CUSTOM_HANDLERS: dict[str, Any] = {
    "budget_configured": SessionFold._on_budget_configured,
    "budget_limits": SessionFold._on_budget_limits,
    "token_usage": SessionFold._on_token_usage,
    "model_usage": SessionFold._on_token_usage,
    "codex.event_msg.token_count": SessionFold._on_codex_token_count,
    "external_effect_completed": SessionFold._on_effect_completed,
    "run_ref": SessionFold._on_run_ref,
    PROMPT_PROGRAM_INVOKED: SessionFold._on_prompt_program_invoked,
    CONTEXT_BUDGET_EXCEEDED: SessionFold._on_context_budget_exceeded,
    SEAL_KIND: _on_seal,
}

_ROW_ONLY = frozenset({"run_started", "checkpoint_taken", "llm_completed"})
"""Kinds whose handler reads the row (seq, time) and never the event."""

_CUSTOM_PREFIX = b'{"custom_kind":"'
"""How the canonical bytes of every ``custom`` event begin: RFC 8785 sorts ``custom_kind`` before ``kind``
and ``payload``."""


def reads_event(kind: str, data: bytes) -> bool:
    """Whether :meth:`SessionFold.feed_row` reads the event of a row (else it may be given None).

    Args:
        kind: The row's event kind.
        data: The row's canonical (RFC 8785) event bytes.

    Returns:
        False for a kind the fold has no handler for, a kind in :data:`_ROW_ONLY`, and a ``custom`` event
        whose ``custom_kind``, read from the bytes, has no handler; True otherwise (and whenever the
        ``custom_kind`` cannot be read plainly: bytes of another shape, or an escape in the string).

    Source: :data:`_HANDLERS` and :data:`_CUSTOM_HANDLERS`; the projector's declaration
    (:data:`flightlog.recorder.EventReads`).
    """
    if kind not in _HANDLERS or kind in _ROW_ONLY:
        return False
    if kind != "custom":
        return True
    custom_kind = custom_kind_of(data)
    return custom_kind is None or custom_kind in _CUSTOM_HANDLERS


def custom_kind_of(data: bytes) -> str | None:
    """The ``custom_kind`` of a ``custom`` event's canonical bytes, read without decoding them; None when
    the bytes do not start as RFC 8785 writes such an event, or the string holds an escape (a backslash:
    its first unescaped quote is then not found this way).

    In RFC 8785 a string's ``"`` is always escaped as ``\\"``, so a string with no backslash ends at its
    first ``"`` and its bytes are its UTF-8 text.
    """
    if not data.startswith(_CUSTOM_PREFIX):
        return None
    start = len(_CUSTOM_PREFIX)
    end = data.find(b'"', start)
    if end < 0:
        return None
    text = data[start:end]
    if b"\\" in text:
        return None
    try:
        return text.decode("utf-8")
    except UnicodeDecodeError:
        return None


# ─── whole-run adapters ───────────────────────────────────────────────────────────────────────


def session_snapshot(record: SessionRecordLike, events: Iterable[tuple[int, int, Event]]) -> AgentRunSnapshot:
    """The snapshot of a recorded session (kernel run or imported transcript), status refinement applied.

    Args:
        record: The session row.
        events: ``(seq, recorded_at_ms, event)`` in ascending seq.

    Source: seed 002 (owner adapter, durable record only).
    """
    fold = SessionFold(SessionHeader.of(record)).feed_all(events)
    return refine_with_status(fold.snapshot(), record.status)


def combine(session: AgentRunSnapshot | None, process: ProcessEntry | None) -> AgentRunSnapshot:
    """One run's snapshot from its own session (if recorded) and its parent's process entry (if any).

    The child's ledger decides when it says terminal; else a terminal process entry does; else the child's
    own state. The kernel's ``killed`` by a parent's abort (:func:`is_resumable_kill`) is not terminal: the
    child's own ledger (its abort, status ``cancelled``: ``paused``) describes it. Budget and refs come
    from the child's session only.

    Raises:
        ValueError: both are None.
    """
    if process is None:
        if session is None:
            raise ValueError("combine needs a session snapshot or a process entry")
        return session
    from_process = process_snapshot(process)
    if session is None:
        return from_process
    update: dict[str, Any] = {}
    if session.parent is None:
        update["parent"] = from_process.parent
    if not session.state.is_terminal() and from_process.state.is_terminal():  # never a resumable kill
        update["state"], update["terminal"] = from_process.state, from_process.terminal
    return session.model_copy(update=update) if update else session


def refine_with_status(snapshot: AgentRunSnapshot, status: str | None) -> AgentRunSnapshot:
    """Let a session's ``status`` settle a snapshot its events leave in flight (never a terminal one).

    Args:
        snapshot: The event-derived snapshot.
        status: The session row's status (``Recorder.finish``, the kernel's status updates), or None.

    Returns:
        ``snapshot`` unchanged when it is terminal or the status is not in :data:`STATUS_STATES`; a
        ``paused`` copy for ``cancelled`` (resumable); else a terminal copy with the
        :data:`STATUS_OUTCOMES` outcome, ``detail`` ``session marked <status>``, ``ended_at_ms`` unknown.

    Why the row may end a run: ``Recorder.finish(status)`` writes no ``run_terminal`` (an integration's or a
    plain recorder's session; an import whose document says how it ended), so the row is the only record
    of that end. The row is unhashed, though: the surfaces that list runs (``flightlog runs``, the
    dashboard) put a run whose ledger holds an open wait back in the state its events give
    (:func:`flightlog.kernel.rowheld.held_by_ledger`; deciding a wait takes the kernel's fold, above this layer).
    """
    state = STATUS_STATES.get(status or "")
    if state is None or snapshot.state.is_terminal() or state is snapshot.state:
        return snapshot
    if state is not RunState.TERMINAL:
        return snapshot.model_copy(update={"state": state})
    summary = TerminalSummary(
        outcome=STATUS_OUTCOMES[status or ""], detail=_detail(f"session marked {status}")
    )
    return snapshot.model_copy(update={"state": RunState.TERMINAL, "terminal": summary})
