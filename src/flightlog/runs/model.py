"""The dependency-neutral agent-run read model (seed 002, ``codewhale_protocol/agent_run.rs``).

:class:`AgentRunSnapshot` is a uniform, serializable projection of "one unit of agent work" whatever
subsystem owns it. It carries serialized ids, neutral enums and scalar summaries only, never handles or
owner-internal types, so any surface (CLI, dashboard, integrations) can consume it.

Wire format (exactly the seed's serde attributes):

* enums are snake_case strings (``"core_job"``, ``"waiting_model"``, ``"budget_exhausted"``);
* ``Option`` fields are omitted when ``None`` and default to ``None`` on input;
* ``refs`` is omitted when empty and defaults to ``[]``;
* ``budget`` is always written (``{}`` when every fact is unknown) and defaults to all-unknown;
* unknown keys are ignored on input (serde's default; the seed has no ``deny_unknown_fields``).

Pure: no I/O.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import Field, TypeAdapter

from ..messages import U32, U64, WireModel

__all__ = [
    "ACTIVE_STATES",
    "AgentRunSnapshot",
    "BudgetSummary",
    "ReceiptKind",
    "ReceiptRef",
    "RunSource",
    "RunState",
    "TerminalOutcome",
    "TerminalSummary",
    "snapshot_list_adapter",
]

I64 = Annotated[int, Field(ge=-(2**63), le=2**63 - 1)]
"""A signed 64-bit integer, as the seed's ``i64`` (epoch milliseconds)."""


class RunSource(StrEnum):
    """Which subsystem owns the run behind a snapshot (seed 002 ``RunSource``)."""

    DIRECT = "direct"
    """A directly spawned agent worker (in flightlog: kernel runs, imported transcripts, their sub-agents)."""
    WORKFLOW = "workflow"
    """A workflow VM run."""
    FLEET = "fleet"
    """A fleet run reconstructed from the durable ledger."""
    CORE_JOB = "core_job"
    """A core background job."""
    TASK = "task"
    """A managed background task."""


class RunState(StrEnum):
    """Neutral lifecycle state of a run (seed 002 ``RunState``).

    Every state is exactly one of terminal, active or paused (the seed's ``Status`` trait):
    ``terminal`` is terminal, ``paused`` is paused, every other state is active.
    """

    QUEUED = "queued"
    """Accepted but not started."""
    INITIALIZING = "initializing"
    """Spawn intent recorded; startup in progress."""
    RUNNING = "running"
    """Actively executing."""
    WAITING_MODEL = "waiting_model"
    """Blocked on a model response."""
    WAITING_TOOL = "waiting_tool"
    """Blocked on a tool execution."""
    WAITING_INPUT = "waiting_input"
    """Blocked on user input (an approval, a question)."""
    PAUSED = "paused"
    """Explicitly paused by the user or system."""
    STOPPING = "stopping"
    """Cancellation or shutdown requested, not yet terminal."""
    TERMINAL = "terminal"
    """Finished; see :attr:`AgentRunSnapshot.terminal` for the outcome."""

    def is_terminal(self) -> bool:
        """True for ``terminal`` only (seed 002 ``Status::is_terminal``)."""
        return self is RunState.TERMINAL

    def is_active(self) -> bool:
        """True for every state that is neither terminal nor paused (seed 002 ``Status::is_active``)."""
        return self in ACTIVE_STATES

    def is_paused(self) -> bool:
        """True for ``paused`` only (seed 002 ``Status::is_paused``)."""
        return self is RunState.PAUSED


ACTIVE_STATES: frozenset[RunState] = frozenset(
    {
        RunState.QUEUED,
        RunState.INITIALIZING,
        RunState.RUNNING,
        RunState.WAITING_MODEL,
        RunState.WAITING_TOOL,
        RunState.WAITING_INPUT,
        RunState.STOPPING,
    }
)
"""The seed's ``is_active`` set: every state but ``paused`` and ``terminal``."""


class BudgetSummary(WireModel):
    """Scalar budget and spend facts; every field optional, never invented (seed 002 ``BudgetSummary``).

    Attributes:
        token_budget: Token ceiling configured for the run (tokens), if any was recorded.
        tokens_used: Tokens consumed so far (tokens), when the owner tracks spend.
        steps_taken: Steps (model turns) taken so far, when the owner counts them.
        max_steps: Step ceiling configured for the run (turns), if any was recorded.
        duration_ms: Wall-clock duration (ms), when known.
    """

    token_budget: U64 | None = None
    tokens_used: U64 | None = None
    steps_taken: U32 | None = None
    max_steps: U32 | None = None
    duration_ms: U64 | None = None


class TerminalOutcome(StrEnum):
    """How a terminal run ended (seed 002 ``TerminalOutcome``)."""

    COMPLETED = "completed"
    """Ended successfully."""
    FAILED = "failed"
    """Ended with an error."""
    CANCELLED = "cancelled"
    """Cancelled by the user or a parent."""
    INTERRUPTED = "interrupted"
    """Interrupted (e.g. process restart, transcript cut off) before completion."""
    BUDGET_EXHAUSTED = "budget_exhausted"
    """Stopped because it exhausted its own budget."""


class TerminalSummary(WireModel):
    """Scalar summary of a terminal run (seed 002 ``TerminalSummary``).

    Attributes:
        outcome: How it ended.
        ended_at_ms: Epoch ms when the run ended, when the owner recorded it.
        detail: Short human-readable detail (result summary or error text); never raw logs, reasoning
            text or secrets.
    """

    outcome: TerminalOutcome
    ended_at_ms: I64 | None = None
    detail: str | None = None


class ReceiptKind(StrEnum):
    """Category of a durable reference attached to a run (seed 002 ``ReceiptKind``)."""

    ARTIFACT = "artifact"
    """A produced artifact."""
    GATE = "gate"
    """A gate/verification result."""
    RECEIPT = "receipt"
    """A durable completion receipt."""
    APPROVAL = "approval"
    """An approval record."""


class ReceiptRef(WireModel):
    """Reference to a durable artifact, gate, receipt or approval (seed 002 ``ReceiptRef``).

    Attributes:
        kind: Its category.
        reference: A logical id within the owner's namespace (``sha256:<hex>``,
            ``approval:<session>:<call_id>``...): never a filesystem path, never secret-bearing.
        label: Optional short human-readable label.
    """

    kind: ReceiptKind
    reference: str
    label: str | None = None


class AgentRunSnapshot(WireModel):
    """Dependency-neutral snapshot of a single agent run (seed 002 ``AgentRunSnapshot``).

    Attributes:
        run_id: Serialized run id in the owner's scheme (flightlog: the session id).
        parent: Serialized id of the parent run, when the owner records one.
        source: Which subsystem owns the run.
        state: Neutral lifecycle state.
        budget: Scalar budget facts; all-unknown by default.
        terminal: Terminal outcome; present exactly when ``state`` is ``terminal``.
        refs: Durable references produced by the run (omitted from the wire when empty).
    """

    run_id: str
    parent: str | None = None
    source: RunSource
    state: RunState
    budget: BudgetSummary = Field(default_factory=BudgetSummary)
    terminal: TerminalSummary | None = None
    refs: list[ReceiptRef] = Field(default_factory=list)
    _skip_empty = frozenset({"refs"})

    def is_coherent(self) -> bool:
        """True when ``state == terminal`` exactly when a terminal summary is present (seed 002)."""
        return (self.state is RunState.TERMINAL) == (self.terminal is not None)


_LIST_ADAPTER: TypeAdapter[list[AgentRunSnapshot]] = TypeAdapter(list[AgentRunSnapshot])


def snapshot_list_adapter() -> TypeAdapter[list[AgentRunSnapshot]]:
    """The shared ``TypeAdapter`` for a JSON array of snapshots (one Rust-side parse for many rows)."""
    return _LIST_ADAPTER
