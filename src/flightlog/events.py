"""The event vocabulary: every ``SessionEvent`` kind of seed 000, plus ``Custom``.

Wire format: a JSON object tagged by ``"kind"`` (snake_case). Field names, types and the
omit-when-absent rules mirror the serde attributes of seed 000 (``deepstrike_core/runtime/session.rs``)
field by field, so the RFC 8785 form of an event equals the RFC 8785 form of what serde_json writes for it:

* ``Option`` fields marked ``skip_serializing_if = "Option::is_none"`` are omitted when ``None``.
* ``Option`` fields with no ``skip_serializing_if`` (``run_started.agent_id``, ``run_started.system_prompt``,
  ``permission_requested.reason``) are written as ``null`` when ``None``.
* Every ``Option`` defaults to ``None`` on input, written or not (serde reads a missing ``Option`` as
  ``None``), so events stored before ``null`` was written still decode to the same values.
* ``Vec`` fields marked ``skip_serializing_if = "Vec::is_empty"`` are omitted when empty; ``Vec`` fields
  marked only ``default`` (``criteria``, ``pending_call_ids``, ``capabilities_unlocked``) are always written
  and default to ``[]`` on input; ``Vec`` fields with no attribute (``calls``, ``results``, ``hits``) are
  required. ``message_count`` (``default`` only) defaults to 0 and is always written.
* ``u32``/``u64`` fields are range-checked; ``(u64, u64)`` tuples are JSON arrays of two integers.

``tests/test_wire_conformance.py`` parses the seed and checks every field of every kind against this.

``ProviderReplay`` and the memory types (``MemoryScope``, ``MemoryProvenance``, ``MemoryRecord``,
``MemoryRecall``: upstream ``mm::memory``, ``crates/deepstrike-core/src/mm/memory.rs``) are strict
(``deny_unknown_fields``): unknown keys are rejected.
Every other model ignores unknown keys on input, as serde does.

``Custom`` carries everything outside the seed's vocabulary: ``{"kind": "custom", "custom_kind": str,
"payload": JSON}`` (seed 003's ``record_custom(kind, payload)``).

Classification (``category``, ``primitive``) is flightlog's OS analogy for the seed's kinds; the
``is_kernel_os_event`` set is exactly the seed's 22 kinds.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError

from .errors import EventDecodeError
from .messages import U32, U64, ContentPart, Message, ToolCall, ToolResult, WireModel

__all__ = [
    "FATAL_RESULT_PREFIX",
    "KERNEL_OS_KINDS",
    "SEED_KINDS",
    "AgentProcessChanged",
    "BudgetExceeded",
    "BudgetUsageReported",
    "CancellationReason",
    "CapabilityChanged",
    "CheckpointTaken",
    "Compressed",
    "ContextRenewed",
    "Custom",
    "EntropyAlert",
    "EntropySample",
    "Event",
    "LlmCompleted",
    "MemoryAuthor",
    "MemoryKind",
    "MemoryProvenance",
    "MemoryQueried",
    "MemoryRecall",
    "MemoryRecord",
    "MemoryRetrievalResult",
    "MemoryScope",
    "MemoryTrustLevel",
    "MemoryValidationFailed",
    "MemoryWritten",
    "MilestoneAdvanced",
    "MilestoneBlocked",
    "OperationCancelled",
    "PageIn",
    "PageOut",
    "PermissionRequested",
    "PermissionResolved",
    "ProviderReplay",
    "Resumed",
    "RollbackReason",
    "Rollbacked",
    "RunStarted",
    "RunTerminal",
    "SessionEvent",
    "SignalDeliveryDisposed",
    "Suspended",
    "ToolArgumentRepaired",
    "ToolCompleted",
    "ToolDenied",
    "ToolGated",
    "ToolRequested",
    "category",
    "decode_event",
    "event_from_wire",
    "fatal_result_text",
    "is_kernel_os_event",
    "primitive",
    "rollback_text",
]


# ─── Envelopes and shared types ───────────────────────────────────────────────────────────────


class ProviderReplay(WireModel):
    """Provider-native replay payload persisted in ``llm_completed`` (seed 000).

    Strict: ``protocol`` is required and unknown keys (such as a removed ``schema_version``) are
    rejected. Values are kept as given, so the canonical bytes round-trip exactly.

    Attributes:
        protocol: Wire protocol identity, e.g. ``anthropic.messages``, ``openai.responses``.
        provider: Provider name, e.g. ``anthropic``.
        model: Model id the payload came from.
        native_blocks: Provider content blocks, verbatim (thinking signatures byte-exact).
        reasoning_content: Provider reasoning text (e.g. DeepSeek ``reasoning_content``).
        reasoning_details: Provider reasoning details, verbatim.
        native_message: The whole provider message, verbatim.
        tool_calls: Provider-native tool call objects, verbatim.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", ser_json_inf_nan="constants")

    protocol: str
    provider: str | None = None
    model: str | None = None
    native_blocks: list[Any] | None = None
    reasoning_content: str | None = None
    reasoning_details: Any = None
    native_message: Any = None
    tool_calls: list[Any] | None = None


class _FatalToolError(WireModel):
    kind: Literal["fatal_tool_error"] = "fatal_tool_error"
    tool_name: str
    error: str


class _GovernanceDenied(WireModel):
    kind: Literal["governance_denied"] = "governance_denied"
    tool_name: str
    reason: str


class _ProviderFailure(WireModel):
    kind: Literal["provider_failure"] = "provider_failure"
    error: str


class _Timeout(WireModel):
    kind: Literal["timeout"] = "timeout"


class _UserInterrupt(WireModel):
    kind: Literal["user_interrupt"] = "user_interrupt"


class _MalformedReplay(WireModel):
    kind: Literal["malformed_replay"] = "malformed_replay"
    reason: str


class RollbackReason:
    """Why a turn transaction rolled back (seed 000 ``RollbackReason``, tagged by ``"kind"``).

    Use the members: ``RollbackReason.FatalToolError(tool_name=, error=)``,
    ``GovernanceDenied(tool_name=, reason=)``, ``ProviderFailure(error=)``, ``Timeout()``,
    ``UserInterrupt()``, ``MalformedReplay(reason=)``.
    """

    FatalToolError = _FatalToolError
    GovernanceDenied = _GovernanceDenied
    ProviderFailure = _ProviderFailure
    Timeout = _Timeout
    UserInterrupt = _UserInterrupt
    MalformedReplay = _MalformedReplay


RollbackReasonT = Annotated[
    _FatalToolError | _GovernanceDenied | _ProviderFailure | _Timeout | _UserInterrupt | _MalformedReplay,
    Field(discriminator="kind"),
]


def rollback_text(reason: RollbackReasonT) -> str:
    """A rollback reason as one line of text: ``<kind>`` then, when it records one, ``: <text>``.

    Args:
        reason: A ``rollbacked`` event's reason.

    Returns:
        The kind and the text it records, verbatim: ``error`` (``provider_failure``, ``fatal_tool_error``)
        or ``reason`` (``governance_denied``, ``malformed_replay``): ``provider_failure: 401 bad key``,
        ``timeout``. What ``RunResult.detail`` says of a run the kernel failed, and the runs read model's
        ``SessionFold.failure``.

    Source: seed 000 ``RollbackReason`` (its members' fields).
    """
    text = getattr(reason, "error", None) or getattr(reason, "reason", None)
    return f"{reason.kind}: {text}" if text else reason.kind


FATAL_RESULT_PREFIX = "FatalToolError: "
"""How the result of a call that raised the kernel's ``FatalToolError`` starts (then the error's text): the
recorded completion of a ``side_effect`` call, and the call's result in a turn the kernel committed rather
than rolled back (:mod:`flightlog.kernel.execution`)."""


def fatal_result_text(results: list[ToolResult]) -> str | None:
    """Why a turn committed after a fatal tool error failed, in :func:`rollback_text`'s form.

    Args:
        results: A ``tool_completed`` event's results.

    Returns:
        ``fatal_tool_error: <error>`` (``fatal_tool_error`` for an empty error) for the first result that is
        an error starting with :data:`FATAL_RESULT_PREFIX`, the error verbatim; None when none does. What
        ``RunResult.detail`` says of such a run, and the runs read model's ``SessionFold.failure``.

    Source: the kernel's record of a committed fatal turn (:mod:`flightlog.kernel.execution`); the kind
    word is seed 000 ``RollbackReason::FatalToolError``'s.
    """
    for result in results:
        if result.is_error and result.output.startswith(FATAL_RESULT_PREFIX):
            error = result.output[len(FATAL_RESULT_PREFIX) :]
            return f"fatal_tool_error: {error}" if error else "fatal_tool_error"
    return None


class CancellationReason(StrEnum):
    """Why host-owned I/O was cancelled (seed 000 ``kernel::wire::CancellationReason``)."""

    USER = "user"
    DEADLINE = "deadline"
    LEASE_LOST = "lease_lost"
    HOST_SHUTDOWN = "host_shutdown"


class MemoryKind(StrEnum):
    """What a long-term memory entry is about (upstream ``mm::memory::MemoryKind``, serde ``snake_case``;
    deepstrike ``crates/deepstrike-core/src/mm/memory.rs:11-22``, UPSTREAM.md §8)."""

    USER = "user"
    FEEDBACK = "feedback"
    PROJECT = "project"
    REFERENCE = "reference"


class MemoryAuthor(StrEnum):
    """Who produced a memory record (upstream ``MemoryAuthor``, serde ``snake_case``; ``mm/memory.rs:64-71``)."""

    MODEL = "model"
    HOST = "host"
    EXTRACTION = "extraction"


class MemoryTrustLevel(StrEnum):
    """How far a memory record is trusted, apart from who wrote it (upstream ``MemoryTrustLevel``;
    ``mm/memory.rs:73-80``)."""

    UNTRUSTED = "untrusted"
    USER_ASSERTED = "user_asserted"
    HOST_VERIFIED = "host_verified"


_STRICT = ConfigDict(frozen=True, extra="forbid", ser_json_inf_nan="constants")
"""serde ``deny_unknown_fields``: unknown keys are rejected."""


class MemoryScope(WireModel):
    """Where a memory entry lives (upstream ``MemoryScope``, ``deny_unknown_fields``; ``mm/memory.rs:39-44``).

    Both fields are required strings; both take part in a record's identity.
    """

    model_config = _STRICT

    tenant_id: str
    namespace: str


class MemoryProvenance(WireModel):
    """Origin and evidence of a memory record (upstream ``MemoryProvenance``, ``deny_unknown_fields``;
    ``mm/memory.rs:83-92``).

    Attributes:
        session_id: The session that produced it (omitted when None).
        author: ``model``, ``host`` or ``extraction``.
        trust: ``untrusted``, ``user_asserted`` or ``host_verified``.
        evidence_refs: References backing it (omitted when empty).
    """

    model_config = _STRICT
    _skip_empty = frozenset({"evidence_refs"})

    session_id: str | None = None
    author: MemoryAuthor
    trust: MemoryTrustLevel
    evidence_refs: list[str] = Field(default_factory=list)


class MemoryRecord(WireModel):
    """One durable memory fact (upstream ``MemoryRecord``, ``deny_unknown_fields``; ``mm/memory.rs:94-118``).

    Field by field as serde writes it: ``last_recalled_at`` and ``ttl_days`` are omitted when None,
    ``links`` when empty; ``recall_count`` (default 0) and ``pinned`` (default false) are always written;
    every other field is required. Times (``created_at``, ``updated_at``, ``last_recalled_at``) are
    ``u64`` as the writer defines them (flightlog's store: epoch ms). ``confidence`` is the stored
    confidence in [0, 1], distinct from a recall's relevance ``score``.

    In flightlog's ledger a hit's ``content`` is the salted handle of the memory's text
    (``salted:sha256:<hex>``, :mod:`flightlog.integrity.erasure`), never the text itself.
    """

    model_config = _STRICT
    _skip_empty = frozenset({"links"})

    record_id: str
    scope: MemoryScope
    name: str
    kind: MemoryKind
    content: str
    description: str
    provenance: MemoryProvenance
    created_at: U64
    updated_at: U64
    last_recalled_at: U64 | None = None
    recall_count: U64 = 0
    confidence: float
    links: list[str] = Field(default_factory=list)
    pinned: bool = False
    ttl_days: U32 | None = None


class MemoryRecall(WireModel):
    """One retrieval hit (upstream ``MemoryRecall``, ``deny_unknown_fields``; ``mm/memory.rs:377-384``): the
    ``record``, its relevance ``score`` (finite, in [0, 1]) and ``why`` it matched, all required."""

    model_config = _STRICT

    record: MemoryRecord
    score: float
    why: str


# ─── 1. Execution & inference loop ────────────────────────────────────────────────────────────


class _Event(WireModel):
    """Base of all events; ``kind`` is the snake_case tag."""

    kind: str


class RunStarted(_Event):
    """A run began: the user's goal, acceptance criteria and attachments seed the history."""

    kind: Literal["run_started"] = "run_started"
    run_id: str
    goal: str
    criteria: list[str] = Field(default_factory=list)
    agent_id: str | None = None
    system_prompt: str | None = None
    attachments: list[ContentPart] = Field(default_factory=list)
    _skip_empty = frozenset({"attachments"})
    _write_null = frozenset({"agent_id", "system_prompt"})


class LlmCompleted(_Event):
    """The model answered; ``provider_replay`` keeps the provider-native payload byte-exact."""

    kind: Literal["llm_completed"] = "llm_completed"
    turn: U32
    message: Message
    provider_replay: ProviderReplay | None = None


class ToolRequested(_Event):
    """The model requested tool calls in this turn."""

    kind: Literal["tool_requested"] = "tool_requested"
    turn: U32
    calls: list[ToolCall]


class ToolCompleted(_Event):
    """Tool results for this turn, in call order."""

    kind: Literal["tool_completed"] = "tool_completed"
    turn: U32
    results: list[ToolResult]


class Compressed(_Event):
    """Earlier history (``archived_seq_range``, inclusive seqs) was compressed into ``summary``."""

    kind: Literal["compressed"] = "compressed"
    turn: U32
    archived_seq_range: tuple[U64, U64]
    action: str | None = None
    summary: str | None = None
    summary_tokens: U32 | None = None
    preserved_refs: list[str] = Field(default_factory=list)
    _skip_empty = frozenset({"preserved_refs"})


class PageOut(_Event):
    """Working memory paged out for long-term storage (kernel ``page_out``)."""

    kind: Literal["page_out"] = "page_out"
    turn: U32
    action: str | None = None
    summary: str | None = None
    tier_hint: str | None = None
    message_count: U32 = 0
    archive_ref: str | None = None


class PageIn(_Event):
    """Long-term entries injected into the knowledge partition (SDK ``page_in``)."""

    kind: Literal["page_in"] = "page_in"
    turn: U32
    entry_count: U32


class RunTerminal(_Event):
    """The run ended: ``reason``, turns used and total tokens."""

    kind: Literal["run_terminal"] = "run_terminal"
    reason: str
    turns_used: U32
    total_tokens: U64


# ─── 2. Governance and security gates ─────────────────────────────────────────────────────────


class ToolArgumentRepaired(_Event):
    """Tool arguments were repaired under a whitelisted heuristic (original and repaired text)."""

    kind: Literal["tool_argument_repaired"] = "tool_argument_repaired"
    turn: U32
    tool: str
    original_arguments: str
    repaired_arguments: str


class PermissionRequested(_Event):
    """An escalated permission gate was requested for a tool; execution suspends."""

    kind: Literal["permission_requested"] = "permission_requested"
    turn: U32
    tool: str
    arguments: str
    reason: str | None = None
    _write_null = frozenset({"reason"})


class PermissionResolved(_Event):
    """A permission decision, by ``responder`` ``"user"`` or ``"policy_gate"``."""

    kind: Literal["permission_resolved"] = "permission_resolved"
    turn: U32
    approved: bool
    responder: str


class ToolDenied(_Event):
    """A tool call was blocked by policy or by denial of consent."""

    kind: Literal["tool_denied"] = "tool_denied"
    turn: U32
    call_id: str
    tool_name: str
    reason: str


# ─── 3. Capability and context restructuring ──────────────────────────────────────────────────


class CapabilityChanged(_Event):
    """Model-visible capabilities changed (skills loaded, MCP servers mounted)."""

    kind: Literal["capability_changed"] = "capability_changed"
    turn: U32
    added: list[str] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list)
    change_kind: str | None = None
    capability_id: str | None = None
    version: str | None = None
    mounted_by: str | None = None
    mount_reason: str | None = None
    _skip_empty = frozenset({"added", "removed"})


class ContextRenewed(_Event):
    """The context was reset and the sprint rotated after a handoff (``handoff_ref``)."""

    kind: Literal["context_renewed"] = "context_renewed"
    turn: U32
    sprint: U32
    handoff_ref: str


class Suspended(_Event):
    """Execution paused (human-in-the-loop approval or long-running work); ``pending_calls`` are ids."""

    kind: Literal["suspended"] = "suspended"
    turn: U32
    reason: str
    pending_calls: list[str] = Field(default_factory=list)
    _skip_empty = frozenset({"pending_calls"})


class Resumed(_Event):
    """Execution resumed with the approved and denied call ids."""

    kind: Literal["resumed"] = "resumed"
    turn: U32
    approved: list[str] = Field(default_factory=list)
    denied: list[str] = Field(default_factory=list)
    _skip_empty = frozenset({"approved", "denied"})


class ToolGated(_Event):
    """Kernel governance gate: the call needs approval before it runs."""

    kind: Literal["tool_gated"] = "tool_gated"
    turn: U32
    call_id: str
    tool: str
    reason: str


class SignalDeliveryDisposed(_Event):
    """In-kernel signal disposition (attention policy)."""

    kind: Literal["signal_delivery_disposed"] = "signal_delivery_disposed"
    turn: U32
    operation_id: str
    delivery_id: str
    attempt: U32
    signal_id: str
    disposition: str
    queue_depth: U32


class BudgetExceeded(_Event):
    """A scheduler budget axis (``budget``: tokens, turns, wall_clock, cost...) was exhausted."""

    kind: Literal["budget_exceeded"] = "budget_exceeded"
    turn: U32
    operation_id: str
    reservation_id: str | None = None
    budget: str


class BudgetUsageReported(_Event):
    """Terminal usage for a reservation-backed budget grant (tokens, sub-agents, rounds)."""

    kind: Literal["budget_usage_reported"] = "budget_usage_reported"
    turn: U32
    operation_id: str
    reservation_id: str
    tokens: U64
    subagents: U32
    rounds: U32


class OperationCancelled(_Event):
    """Host-owned external I/O stopped and the correlated operation cancelled."""

    kind: Literal["operation_cancelled"] = "operation_cancelled"
    turn: U32
    operation_id: str
    reason: CancellationReason
    pending_call_ids: list[str] = Field(default_factory=list)


class CheckpointTaken(_Event):
    """Checkpoint at the start of a turn transaction, before the model call (``history_len`` messages)."""

    kind: Literal["checkpoint_taken"] = "checkpoint_taken"
    turn: U32
    history_len: U32


class EntropySample(_Event):
    """Session-entropy sample at a completed turn boundary."""

    kind: Literal["entropy_sample"] = "entropy_sample"
    turn: U32
    score: float
    rho: float
    repeat_pressure: float
    failure_rate: float
    rollbacks_in_window: U32
    window_turns: U32


class EntropyAlert(_Event):
    """The opt-in entropy watch tripped (``score`` crossed ``threshold``)."""

    kind: Literal["entropy_alert"] = "entropy_alert"
    turn: U32
    score: float
    threshold: float


class Rollbacked(_Event):
    """State was restored to a checkpoint: history truncated to ``checkpoint_history_len`` messages."""

    kind: Literal["rollbacked"] = "rollbacked"
    turn: U32
    checkpoint_history_len: U32
    reason: RollbackReasonT | None = None


# ─── 4. Process table ─────────────────────────────────────────────────────────────────────────


class AgentProcessChanged(_Event):
    """The kernel process table changed for a spawned sub-agent (``agent_id`` is its session/run id)."""

    kind: Literal["agent_process_changed"] = "agent_process_changed"
    turn: U32
    agent_id: str
    parent_session_id: str
    role: str
    isolation: str
    context_inheritance: str
    state: str
    permitted_capability_ids: list[str] = Field(default_factory=list)
    result_termination: str | None = None
    _skip_empty = frozenset({"permitted_capability_ids"})


# ─── 5. Milestone contracts ───────────────────────────────────────────────────────────────────


class MilestoneAdvanced(_Event):
    """Milestone phase criteria passed: capabilities unlocked, phase advanced."""

    kind: Literal["milestone_advanced"] = "milestone_advanced"
    turn: U32
    phase_id: str
    capabilities_unlocked: list[str] = Field(default_factory=list)


class MilestoneBlocked(_Event):
    """Milestone phase criteria not met; the run continues without advancing."""

    kind: Literal["milestone_blocked"] = "milestone_blocked"
    turn: U32
    phase_id: str
    reason: str


# ─── 6. Long-term memory ──────────────────────────────────────────────────────────────────────


class MemoryWritten(_Event):
    """A memory entry was written (``size_bytes`` of content)."""

    kind: Literal["memory_written"] = "memory_written"
    turn: U32
    record_id: str
    scope: MemoryScope
    memory_kind: MemoryKind
    name: str
    size_bytes: U32


class MemoryQueried(_Event):
    """A memory query was issued (kernel to SDK)."""

    kind: Literal["memory_queried"] = "memory_queried"
    turn: U32
    scope: MemoryScope
    query: str
    requested_k: U64
    requires_async_response: bool


class MemoryValidationFailed(_Event):
    """The kernel rejected a memory write."""

    kind: Literal["memory_validation_failed"] = "memory_validation_failed"
    turn: U32
    record_id: str
    error: str


class MemoryRetrievalResult(_Event):
    """Memory retrieval hits (SDK to kernel)."""

    kind: Literal["memory_retrieval_result"] = "memory_retrieval_result"
    hits: list[MemoryRecall]


# ─── Custom ───────────────────────────────────────────────────────────────────────────────────


class Custom(_Event):
    """Anything outside the seed vocabulary: ``custom_kind`` names it, ``payload`` is any JSON value.

    Source: seed 003 ``record_custom(kind, payload)`` (``external_effect_intent``,
    ``provider_capability_evidence``, importer records it does not map, ...).
    """

    kind: Literal["custom"] = "custom"
    custom_kind: str
    payload: Any = None


SessionEvent = Annotated[
    RunStarted
    | LlmCompleted
    | ToolRequested
    | ToolCompleted
    | Compressed
    | PageOut
    | PageIn
    | RunTerminal
    | ToolArgumentRepaired
    | PermissionRequested
    | PermissionResolved
    | ToolDenied
    | CapabilityChanged
    | ContextRenewed
    | Suspended
    | Resumed
    | ToolGated
    | SignalDeliveryDisposed
    | BudgetExceeded
    | BudgetUsageReported
    | OperationCancelled
    | CheckpointTaken
    | EntropySample
    | EntropyAlert
    | Rollbacked
    | AgentProcessChanged
    | MilestoneAdvanced
    | MilestoneBlocked
    | MemoryWritten
    | MemoryQueried
    | MemoryValidationFailed
    | MemoryRetrievalResult
    | Custom,
    Field(discriminator="kind"),
]
"""Any event: the 32 seed kinds and ``Custom``, discriminated by ``kind``."""

Event = _Event
"""The common base class (for ``isinstance`` checks)."""

_ADAPTER: TypeAdapter[SessionEvent] = TypeAdapter(SessionEvent)
_VALIDATE_JSON = _ADAPTER.validator.validate_json
"""The adapter's core validator, called straight (what ``TypeAdapter.validate_json`` calls after checking its
keyword options; once per stored event on the read path, so the wrapper's Python frame is skipped)."""

SEED_KINDS: tuple[str, ...] = (
    "run_started",
    "llm_completed",
    "tool_requested",
    "tool_completed",
    "compressed",
    "page_out",
    "page_in",
    "run_terminal",
    "tool_argument_repaired",
    "permission_requested",
    "permission_resolved",
    "tool_denied",
    "capability_changed",
    "context_renewed",
    "suspended",
    "resumed",
    "tool_gated",
    "signal_delivery_disposed",
    "budget_exceeded",
    "budget_usage_reported",
    "operation_cancelled",
    "checkpoint_taken",
    "entropy_sample",
    "entropy_alert",
    "rollbacked",
    "agent_process_changed",
    "milestone_advanced",
    "milestone_blocked",
    "memory_written",
    "memory_queried",
    "memory_validation_failed",
    "memory_retrieval_result",
)
"""The 32 kinds of seed 000's ``SessionEvent``, in declaration order."""

KERNEL_OS_KINDS: frozenset[str] = frozenset(
    {
        "compressed",
        "page_out",
        "page_in",
        "capability_changed",
        "context_renewed",
        "suspended",
        "resumed",
        "tool_gated",
        "signal_delivery_disposed",
        "budget_exceeded",
        "budget_usage_reported",
        "operation_cancelled",
        "checkpoint_taken",
        "entropy_sample",
        "entropy_alert",
        "rollbacked",
        "agent_process_changed",
        "milestone_advanced",
        "milestone_blocked",
        "memory_written",
        "memory_queried",
        "memory_validation_failed",
    }
)
"""Exactly the 22 kinds seed 000's ``is_kernel_os_event`` matches."""

_CATEGORY: dict[str, str] = {
    **dict.fromkeys(
        (
            "llm_completed",
            "tool_requested",
            "tool_completed",
            "tool_argument_repaired",
            "permission_requested",
            "permission_resolved",
            "tool_denied",
            "tool_gated",
            "capability_changed",
        ),
        "syscall",
    ),
    **dict.fromkeys(
        (
            "run_started",
            "run_terminal",
            "suspended",
            "resumed",
            "budget_exceeded",
            "budget_usage_reported",
            "operation_cancelled",
            "checkpoint_taken",
            "entropy_sample",
            "entropy_alert",
            "rollbacked",
            "milestone_advanced",
            "milestone_blocked",
        ),
        "sched",
    ),
    **dict.fromkeys(
        (
            "compressed",
            "page_out",
            "page_in",
            "context_renewed",
            "memory_written",
            "memory_queried",
            "memory_validation_failed",
            "memory_retrieval_result",
        ),
        "mm",
    ),
    "agent_process_changed": "proc",
    "signal_delivery_disposed": "ipc",
}

_PRIMITIVE: dict[str, str] = {
    "run_started": "spawn",
    "llm_completed": "infer",
    "tool_requested": "syscall_enter",
    "tool_completed": "syscall_exit",
    "compressed": "compact",
    "page_out": "page_out",
    "page_in": "page_in",
    "run_terminal": "exit",
    "tool_argument_repaired": "repair",
    "permission_requested": "gate_request",
    "permission_resolved": "gate_resolve",
    "tool_denied": "deny",
    "capability_changed": "mount",
    "context_renewed": "context_switch",
    "suspended": "suspend",
    "resumed": "resume",
    "tool_gated": "gate",
    "signal_delivery_disposed": "signal",
    "budget_exceeded": "quota_exceeded",
    "budget_usage_reported": "quota_report",
    "operation_cancelled": "cancel",
    "checkpoint_taken": "checkpoint",
    "entropy_sample": "sample",
    "entropy_alert": "alert",
    "rollbacked": "rollback",
    "agent_process_changed": "process_table",
    "milestone_advanced": "advance",
    "milestone_blocked": "block",
    "memory_written": "mem_write",
    "memory_queried": "mem_query",
    "memory_validation_failed": "mem_reject",
    "memory_retrieval_result": "mem_recall",
    "custom": "custom",
}


def _kind_of(event_or_kind: _Event | str) -> str:
    return event_or_kind if isinstance(event_or_kind, str) else event_or_kind.kind


def category(event_or_kind: _Event | str) -> str:
    """The OS category of an event kind: ``syscall``, ``sched``, ``mm``, ``proc`` or ``ipc``.

    Unknown kinds (and ``custom``) are ``sched``.
    """
    return _CATEGORY.get(_kind_of(event_or_kind), "sched")


def primitive(event_or_kind: _Event | str) -> str:
    """The kernel primitive an event kind records (``spawn``, ``infer``, ``syscall_enter``...).

    Unknown kinds map to ``custom``.
    """
    return _PRIMITIVE.get(_kind_of(event_or_kind), "custom")


def is_kernel_os_event(event_or_kind: _Event | str) -> bool:
    """True for the 22 kernel OS decision kinds (replay ignores them), per seed 000."""
    return _kind_of(event_or_kind) in KERNEL_OS_KINDS


def _describe(exc: ValidationError) -> str:
    first = exc.errors()[0]
    loc = ".".join(str(p) for p in first.get("loc", ()))
    return f"{loc or '$'}: {first.get('msg', 'invalid')}" + (
        f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    )


def event_from_wire(data: Any, *, seq: int | None = None) -> SessionEvent:
    """Build an event from its decoded JSON wire form (a dict tagged by ``kind``).

    Raises:
        EventDecodeError: unknown ``kind``, missing or ill-typed fields, unknown keys in a strict
            envelope; the message names the field (and ``seq`` when given).
    """
    try:
        return _ADAPTER.validate_python(data)
    except ValidationError as exc:
        raise EventDecodeError(reason=_describe(exc), seq=seq) from exc


def kind_schemas() -> dict[str, Any]:
    """Each event kind's pydantic core (validation) schema, by ``kind``: the event adapter's tagged union's
    choices (read by :mod:`flightlog.encoding` to tell which kinds can hold an integer beyond 2**53)."""
    return dict(_ADAPTER.core_schema["choices"])


def event_from_json_or_none(data: bytes) -> SessionEvent | None:
    """Build an event straight from JSON bytes with pydantic's JSON parser, or ``None`` if it refuses them.

    The fast path of :func:`flightlog.encoding.decode_stored`, which uses it only where it gives the same
    event as ``json`` + :func:`event_from_wire` (tested by property in ``tests/test_decode_fast.py``). A
    refusal is not an error here: the caller decodes the same bytes on the reference path, which raises
    the :class:`~flightlog.errors.EventDecodeError` naming the field and ``seq``.
    """
    try:
        event: SessionEvent = _VALIDATE_JSON(data)
    except ValidationError:
        return None
    return event


def decode_event(data: bytes | str, *, seq: int | None = None) -> SessionEvent:
    """Parse an event from its JSON bytes (stored canonical bytes or any JSON text).

    Raises:
        EventDecodeError: invalid JSON or an invalid event; names ``seq`` when given.
    """
    try:
        return _ADAPTER.validate_json(data)
    except ValidationError as exc:
        raise EventDecodeError(reason=_describe(exc), seq=seq) from exc
