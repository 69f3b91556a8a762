"""The parent's side of delegation, folded from its own ledger: budget grants and the process table.

Pure (no I/O): :class:`Delegation` folds a parent session's events, so what a resumed parent knows about
its children (which grant each holds, which state each was last seen in, what each spent) is exactly what
its ledger says. Grants are never recomputed on resume, and never refilled.

Records (in the parent's ledger; see :mod:`flightlog.kernel.subagents` for when each is written):

* ``Custom("budget_grant", {reservation_id, agent_id, call_id, turn, tokens?, turns?, wall_clock_ms?,
  cost?})``: the part of the parent's remaining budget reserved for one child (absent axis: the parent had
  no limit there). Written with the child's first ``agent_process_changed`` (``spawned``), one transaction.
* ``agent_process_changed(turn, agent_id, parent_session_id, role, isolation, context_inheritance, state,
  permitted_capability_ids, result_termination?)``: seed 000, one per state the child passes.
* ``budget_usage_reported(turn, operation_id, reservation_id, tokens, subagents, rounds)``: seed 000, the
  child's terminal usage under its grant (``tokens``: its own and its descendants' tokens; ``rounds``: model
  turns, its own and its descendants'; ``subagents``: agents spawned under the reservation, the child
  included), with ``Custom("budget_grant_released", {reservation_id, agent_id, cost?, returned})`` in the
  same transaction (``cost``: the subtree's cost in the price unit; ``returned``: the unused part per axis).

**Charge.** What the parent has committed through its children: for a released grant, what the child
used; for an open grant, the whole grant (reserved). The kernel adds the charge to the parent's own usage
when it reserves its next call or grants the next child, so a parent never overspends through its
children, and concurrent siblings never share one remainder.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ..events import AgentProcessChanged, BudgetUsageReported, Custom, SessionEvent

__all__ = [
    "BUDGET_GRANT",
    "BUDGET_GRANT_RELEASED",
    "INHERITANCE_BY_ROLE",
    "ISOLATIONS",
    "PROCESS_STATES",
    "ROLES",
    "Charge",
    "Delegation",
    "Grant",
    "Inheritance",
    "Isolation",
    "Role",
]

BUDGET_GRANT = "budget_grant"
"""``Custom`` kind of a child's grant, recorded in the parent (module docs)."""
BUDGET_GRANT_RELEASED = "budget_grant_released"
"""``Custom`` kind recorded with ``budget_usage_reported``: the subtree's cost and the unused grant."""

Role = Literal["explore", "plan", "implement", "verify", "custom"]
"""Sub-agent roles, as upstream writes them (UPSTREAM.md §7: Rust Debug names lower-cased)."""
ROLES: tuple[Role, ...] = ("explore", "plan", "implement", "verify", "custom")
"""Every role, in upstream's order."""

Isolation = Literal["shared", "readonly"]
"""The isolations flightlog performs (upstream also names ``worktree`` and ``remote``; not performed here,
so not accepted). ``readonly``: the child keeps only its ``read_only`` tools."""
ISOLATIONS: tuple[Isolation, ...] = ("shared", "readonly")
"""Every isolation flightlog performs."""

Inheritance = Literal["none", "systemonly", "full"]
"""What of the parent the child starts with (UPSTREAM.md §7 wire names): ``none`` (its own system prompt
and the task), ``systemonly`` (the parent's system prompt too), ``full`` (also the parent's conversation so
far, as a text attachment of its first message)."""

INHERITANCE_BY_ROLE: dict[Role, Inheritance] = {
    "explore": "systemonly",
    "verify": "systemonly",
    "plan": "full",
    "implement": "full",
    "custom": "none",
}
"""Inheritance derived from the role, as upstream (UPSTREAM.md §7, ``types/agent.rs:169-175``)."""

PROCESS_STATES = ("spawned", "running", "waiting_input", "suspended", "joined", "failed", "killed")
"""``agent_process_changed.state`` values the kernel writes: ``spawned`` (session about to be created under
its grant), ``running`` (driven), ``waiting_input`` (suspended on a human decision, its own or a
descendant's), ``suspended`` (stopped resumable: cancelled, fenced), then upstream's exits ``joined``
(completed) and ``failed`` (any other end), or ``killed`` (the parent was aborted; resumable)."""


@dataclass(frozen=True)
class Grant:
    """One child's budget grant, as recorded in ``budget_grant`` (None: unlimited on that axis)."""

    reservation_id: str
    agent_id: str
    call_id: str
    turn: int
    tokens: int | None = None
    turns: int | None = None
    wall_clock_ms: int | None = None
    cost: float | None = None

    def to_wire(self) -> dict[str, Any]:
        """The ``budget_grant`` payload (None axes omitted)."""
        wire: dict[str, Any] = {
            "reservation_id": self.reservation_id,
            "agent_id": self.agent_id,
            "call_id": self.call_id,
            "turn": self.turn,
        }
        for axis in ("tokens", "turns", "wall_clock_ms", "cost"):
            if getattr(self, axis) is not None:
                wire[axis] = getattr(self, axis)
        return wire

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> Grant:
        """Inverse of :meth:`to_wire`."""
        return cls(
            reservation_id=str(data["reservation_id"]),
            agent_id=str(data["agent_id"]),
            call_id=str(data["call_id"]),
            turn=int(data["turn"]),
            tokens=data.get("tokens"),
            turns=data.get("turns"),
            wall_clock_ms=data.get("wall_clock_ms"),
            cost=data.get("cost"),
        )


@dataclass(frozen=True)
class Charge:
    """What a parent has committed through its children (tokens, cost in the price unit, model rounds)."""

    tokens: int = 0
    cost: float = 0.0
    rounds: int = 0


@dataclass
class Delegation:
    """The fold of a parent's delegation records (see the module docs)."""

    grants: dict[str, Grant] = field(default_factory=dict)
    """Grants by ``agent_id`` (the child session id)."""
    released: dict[str, BudgetUsageReported] = field(default_factory=dict)
    """Terminal usage by reservation id."""
    released_cost: dict[str, float] = field(default_factory=dict)
    """The subtree cost of each released reservation."""
    processes: dict[str, AgentProcessChanged] = field(default_factory=dict)
    """The latest process-table entry by ``agent_id``."""

    def feed(self, event: SessionEvent) -> None:
        """Fold one event of the parent's ledger (in seq order)."""
        if isinstance(event, AgentProcessChanged):
            self.processes[event.agent_id] = event
        elif isinstance(event, BudgetUsageReported):
            self.released[event.reservation_id] = event
        elif isinstance(event, Custom) and isinstance(event.payload, dict):
            if event.custom_kind == BUDGET_GRANT:
                grant = Grant.from_wire(event.payload)
                self.grants[grant.agent_id] = grant
            elif event.custom_kind == BUDGET_GRANT_RELEASED:
                reservation = str(event.payload.get("reservation_id", ""))
                self.released_cost[reservation] = float(event.payload.get("cost", 0.0))

    def is_released(self, agent_id: str) -> bool:
        """Whether the child's grant has been settled (its usage reported)."""
        grant = self.grants.get(agent_id)
        return grant is not None and grant.reservation_id in self.released

    def charge(self) -> Charge:
        """Usage of released grants plus the whole of open ones (see the module docs)."""
        tokens, cost, rounds = 0, 0.0, 0
        for grant in self.grants.values():
            usage = self.released.get(grant.reservation_id)
            if usage is not None:
                tokens += usage.tokens
                rounds += usage.rounds
                cost += self.released_cost.get(grant.reservation_id, 0.0)
            else:
                tokens += grant.tokens or 0
                rounds += grant.turns or 0
                cost += grant.cost or 0.0
        return Charge(tokens=tokens, cost=cost, rounds=rounds)

    def subtree(self) -> tuple[int, int, int]:
        """``(tokens, rounds, subagents)`` reported by every released child (for the parent's own report)."""
        usages = list(self.released.values())
        return (
            sum(u.tokens for u in usages),
            sum(u.rounds for u in usages),
            sum(u.subagents for u in usages),
        )
