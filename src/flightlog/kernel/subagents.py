"""Sub-agents: an agent handing work to another agent, each child a durable session of its own.

Declare a child with :func:`subagent` (an agent used as a tool: the model calls it with ``{"task"}``) or
:func:`spawner` (one ``spawn`` tool over several roles: ``{"role", "task"}``) and put the tool in the parent
``Agent``'s tools. The model calls it like any tool; the call is a ``side_effect`` (exactly once, see
:mod:`flightlog.kernel.effects`), and calls of one turn that delegate run concurrently (each child writes
only its own session).

What a delegating call does (parent ledger on the left, ``P`` = parent turn, ``c`` = call id)::

    external_effect_intent(key)                               write-ahead: the child id derives from key
    Custom("budget_grant"), agent_process_changed(spawned)    one transaction: the grant is reserved
    agent_process_changed(running)                            the child session is created (or resumed)
        ... the child runs in its own session: run_started ... budget_limits, Custom("spawned_by") (its
        parent, the call, its depth and depth limit: flightlog.integrity.lineage) ... run_terminal, sealed
    agent_process_changed(joined|failed, result_termination), budget_usage_reported, Custom(
        "budget_grant_released")                              one transaction: usage settled
    external_effect_completed(key), tool_completed            the child's final answer is the result

**Exactly once.** The child session id is ``sha256("flightlog-subagent:" + effect key)[:32]`` (hex): the
same call always names the same child, and the intent is durable before the child exists. After a crash
the call is in doubt; its reconciler answers "done" (with the answer) when the child completed, else the
call runs again, which *resumes* the existing child from its own ledger (a finished child is never re-run,
a grant already recorded is reused, never recomputed or refilled).

**Settled once, whoever finished the child.** Only the process holding the parent's authority can write
the release (the epoch fences the others). A child can end without its own call settling it: driven to its
end by a process fenced off in the parent meanwhile (its release refused), while the holder's call was
answered otherwise (an error from its own resume of the child). The holder then writes the missing release
(:func:`finished_children`: the open grants whose child's ledger is terminal) on resume and with each
``tool_completed`` and ``run_terminal``; never twice, since it reads its own ledger's fold.

**Children that stop without finishing.** A child waiting for a human decision makes the parent record
``agent_process_changed(waiting_input)`` then ``suspended(P, reason="sub_agent_await", pending_calls)``
(once every delegating call of the group has stopped); a cancelled or fenced child, ``suspended``. The
child's gates show in ``flightlog pending`` with its parent; after ``approve``, resuming the parent (or the
child: the CLI resumes its root) resumes the child, then the parent.

**Taking a child over.** The process that holds the parent's authority owns its children. A child another
process is still writing (the parent's previous holder, fenced off in the parent by this one's resume, so
nothing it does there can be recorded) is taken over: its resume is retried while it reports
:class:`~flightlog.errors.SessionBusy` (up to :data:`CHILD_TAKEOVER_ATTEMPTS` times, a short growing pause
between tries) until it catches the child between two appends and takes its authority, fencing that
process off. Still busy after that, the error stops the parent's activation fenced off (never a tool result).
The resume never settles a child's in-doubt effect that the process it takes the child from may still be
running (fencing stops its appends, not its tool): it waits for that process first (:mod:`flightlog.kernel.takeover`).

**Budgets.** A grant is the child's requested :class:`~flightlog.kernel.budgets.Budgets` capped by what the
parent has left (its limits minus its own usage and what its children hold or used, see
:mod:`flightlog.kernel.delegation`; wall clock: at most 90% of the parent's remaining, so a child times out
and is settled before its parent's own deadline); it becomes the child's recorded limits. An axis with nothing left
refuses the spawn (``budget_exceeded(operation_id, reservation_id, budget)``, an error result).

**Depth.** ``Agent.max_spawn_depth`` (default 8) bounds how deep a tree may grow *below a run of that
agent*: its own sub-agents are 1 below it, as upstream's ``ResourceQuota.max_spawn_depth`` counts the
children of the agent whose quota it is (its gate puts every child at depth 1). The root's bound
therefore bounds the whole tree (the root's children are depth 1), and a child's own bound only
narrows its subtree: a delegating call is answered with an error result naming the depth (no grant, no
child) when the new child would run deeper than the kernel's ``depth_limit``, the bound its ancestors set
(the stricter of each ancestor's ``its depth + its max_spawn_depth``; the delegating run's own bound, at
least 1, always admits its own children and limits their descendants). The delegating call sets the child kernel's
``spawn_depth`` and ``depth_limit``, and the child records both in its start
(``Custom("spawned_by")``, :mod:`flightlog.integrity.lineage`); a kernel that resumes a session no
delegating call placed (``Kernel(store, agent).resume(child)`` from Python) derives them from the
verified tree: :func:`tree_position` counts the child's parent links up to the root, each proven by the
parent's verified ledger, and reads the limit from the child's verified ``spawned_by``. A child spawned
already (its grant recorded) is resumed whatever the bound.

**Capabilities.** A child's tools must be a subset of its parent's (by name; its own sub-agent tools and
the built-in context tools aside), and its mountable capabilities (MCP servers, skill packs, locked tools)
its parent's by ``<Kind>:<id>`` and identical definition, checked when the parent ``Agent`` is built; ``isolation="readonly"``
keeps only its ``read_only`` tools. ``permitted_capability_ids`` lists them. The parent's policy and
signed grant apply to the child as ceilings (:class:`InheritedPolicy`: the stricter decision wins).

**Cancellation.** Cancelling the parent cancels its running children (each records
``operation_cancelled``); :func:`flightlog.kernel.abort` of a parent aborts its unfinished children first
(recursively) and records ``agent_process_changed(killed, result_termination="user_abort")`` for each.
Resuming an aborted tree whose children still wait for a human re-opens their waits and the parent's
(:mod:`flightlog.kernel.reopen`); a child decided meanwhile runs, the others' waits are re-opened by their
own resume.

Wire values follow upstream (UPSTREAM.md §7): roles, isolations and inheritance names as in
:mod:`flightlog.kernel.delegation`; ``result_termination`` ``completed``, ``max_turns``, ``token_budget``,
``timeout`` (wall clock), ``cost_budget`` (flightlog's cost axis, not upstream), ``user_abort``, ``error``.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..errors import LedgerIntegrityError, SessionBusy, SessionNotFound
from ..events import AgentProcessChanged, BudgetExceeded, BudgetUsageReported, Custom, Suspended
from ..integrity.audit import Auditor, require_intact
from ..integrity.lineage import SpawnedBy, Spawns, TreeProofs, child_session_id, read_start
from ..messages import ContentPart, Message, TextPart
from ..store.base import Store
from ..testing.crashpoints import crash_point
from .agent import Agent
from .budgets import Axis, Budgets, Spent
from .capabilities import label_of
from .delegation import (
    BUDGET_GRANT,
    BUDGET_GRANT_RELEASED,
    INHERITANCE_BY_ROLE,
    ISOLATIONS,
    ROLES,
    Grant,
    Inheritance,
    Isolation,
    Role,
)
from .effects import Effects, current_effect_key, effect_key
from .paging import BUILTIN_TOOLS, current_access
from .planning import calls_in
from .policy import Decision, Policy
from .records import CallPlan
from .state import KernelState, load_state
from .tools import Tool, tool

if TYPE_CHECKING:
    from .loop import Kernel

__all__ = [
    "SUB_AGENT_AWAIT",
    "AwaitingChildren",
    "InheritedPolicy",
    "SubAgent",
    "SubAgentFailed",
    "SubAgentTool",
    "TreePosition",
    "abort_children",
    "awaited_children",
    "child_session_id",
    "finished_children",
    "place",
    "release_events",
    "spawner",
    "subagent",
    "tree_position",
    "waiting_on_children",
]

SUB_AGENT_AWAIT = "sub_agent_await"
"""``suspended.reason`` of a parent whose delegating calls wait for their children (module docs)."""
_STRICTNESS = {"allow": 0, "ask": 1, "deny": 2}
_EXITS = ("joined", "failed")
_WALL_SHARE = 0.9
"""Share of the parent's remaining wall clock a child may get at most: the parent's own deadline would cancel
the child mid-run and end the parent before the child's usage is settled."""
_TERMINATION = {
    "turns": "max_turns",
    "tokens": "token_budget",
    "wall_clock": "timeout",
    "cost": "cost_budget",
}


class SubAgentFailed(Exception):
    """A child ended without completing (failed, budget exhausted); the message is the tool's error result."""


class AwaitingChildren(BaseException):
    """Raised by a delegating call whose child stopped without finishing (see the module docs).

    A ``BaseException`` so that tool execution does not turn it into an error result: the call stays
    unfinished (intent without completion) and the parent's turn suspends.
    """

    def suspended(self, turn: int, plans: Sequence[CallPlan], effects: Effects, session_id: str) -> Suspended:
        """``suspended(turn, "sub_agent_await", pending_calls)``: the calls whose intent has no completion."""
        waiting = [
            p.call_id for p in plans if effects.state(effect_key(session_id, turn, p.call_id)) == "pending"
        ]
        return Suspended(turn=turn, reason=SUB_AGENT_AWAIT, pending_calls=waiting)


@dataclass(frozen=True)
class InheritedPolicy(Policy):
    """A child's policy under its parent's: both decide, the stricter action wins (deny > ask > allow).

    Attributes:
        ceiling: The parent's (effective) policy.
    """

    ceiling: Policy = field(default_factory=Policy)

    def decide(self, tool_name: str, arguments: Any, effect: Any) -> Decision:
        """The stricter of the child's own decision and its parent's (the parent's on a tie)."""
        own = super().decide(tool_name, arguments, effect)
        parent = self.ceiling.decide(tool_name, arguments, effect)
        if _STRICTNESS[own.action] > _STRICTNESS[parent.action]:
            return own
        if parent.action == own.action:
            return own
        return Decision(parent.action, f"parent policy: {parent.reason}", parent.rule)


@dataclass(frozen=True)
class SubAgent:
    """A child agent the parent may delegate to.

    Attributes:
        agent: The child's definition (its tools must be a subset of the parent's, see the module docs).
        role: ``explore``, ``plan``, ``implement``, ``verify`` or ``custom`` (UPSTREAM.md §7).
        isolation: ``shared`` (its tools as declared) or ``readonly`` (only its ``read_only`` tools).
        context: What of the parent it starts with (``none``, ``systemonly``, ``full``); default derived
            from ``role`` as upstream does (:data:`~flightlog.kernel.delegation.INHERITANCE_BY_ROLE`).
        budgets: The grant it asks for (tokens, turns, wall_clock_ms, cost); capped by what the parent has
            left at spawn time. Unlimited axes take all the parent has left on that axis.
    """

    agent: Agent
    role: Role = "custom"
    isolation: Isolation = "shared"
    context: Inheritance | None = None
    budgets: Budgets = field(default_factory=Budgets)

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"sub-agent role must be one of {', '.join(ROLES)}, not {self.role!r}")
        if self.isolation not in ISOLATIONS:
            raise ValueError(
                f"sub-agent isolation must be one of {', '.join(ISOLATIONS)}, not {self.isolation!r} "
                "(worktree and remote isolation are not performed by flightlog)"
            )
        if self.context is not None and self.context not in INHERITANCE_BY_ROLE.values():
            raise ValueError(f"sub-agent context must be none, systemonly or full, not {self.context!r}")

    @property
    def inheritance(self) -> Inheritance:
        """The context inheritance recorded and performed."""
        return self.context if self.context is not None else INHERITANCE_BY_ROLE[self.role]

    def tools(self) -> tuple[Tool, ...]:
        """The child's tools after isolation (``readonly``: its ``read_only`` tools only)."""
        if self.isolation == "readonly":
            return tuple(t for t in self.agent.tools if t.effect == "read_only")
        return tuple(self.agent.tools)


@dataclass(frozen=True, eq=False)
class SubAgentTool(Tool):
    """A tool that delegates to a child agent (build with :func:`subagent` or :func:`spawner`).

    Attributes:
        children: The sub-agents by the role the model names (one entry, keyed ``""``, for
            :func:`subagent`).
    """

    children: dict[str, SubAgent] = field(default_factory=dict)

    def check_parent(self, parent: Agent) -> None:
        """Refuse a child with a capability its parent lacks (see the module docs).

        Raises:
            ValueError: names the tool, the child and the capabilities the parent does not have, or the
                child's route models a cost-limited parent cannot price.
        """
        have = {t.name for t in parent.tools}
        builtin = {t.name for t in BUILTIN_TOOLS}
        for sub in self.children.values():
            own = [t.name for t in sub.tools() if not isinstance(t, SubAgentTool) and t.name not in builtin]
            extra = sorted(set(own) - have)
            if extra:
                raise ValueError(
                    f"sub-agent tool {self.name}: child {sub.agent.name!r} has capabilities its parent "
                    f"{parent.name!r} lacks: {', '.join(extra)} (a child's tools are a subset of its parent's)"
                )
            self._check_mounts(parent, sub)
            if parent.budgets.cost is not None:
                unpriced = [p.model for p in sub.agent.route if _prices(sub, parent, p.model) is None]
                if unpriced:
                    raise ValueError(f"sub-agent tool {self.name}: a cost budget needs prices for {unpriced}")

    def _check_mounts(self, parent: Agent, sub: SubAgent) -> None:
        """A child's mountable capabilities (MCP servers, skill packs, locked tools) are its parent's, by
        ``<Kind>:<id>`` and by definition: a child declaring ``McpServer:fs`` with another command than its
        parent's would run a server the parent was never given (issue 14 item 4)."""
        theirs = {label_of(c.kind, c.id): c for c in parent.capabilities}
        for cap in sub.agent.capabilities:
            label = label_of(cap.kind, cap.id)
            if label not in theirs:
                raise ValueError(
                    f"sub-agent tool {self.name}: child {sub.agent.name!r} declares {label}, which its parent "
                    f"{parent.name!r} lacks (a child's capabilities are a subset of its parent's)"
                )
            if theirs[label] != cap:
                raise ValueError(
                    f"sub-agent tool {self.name}: child {sub.agent.name!r} declares {label} unlike its parent "
                    f"{parent.name!r} does (a child mounts only what its parent was given, as given)"
                )

    def child_for(self, role: str) -> SubAgent:
        """The sub-agent for ``role`` (``""`` for :func:`subagent` tools).

        Raises:
            ValueError: unknown role (the model sees the message).
        """
        sub = self.children.get(role)
        if sub is None:
            raise ValueError(f"unknown role {role!r}; roles: {', '.join(sorted(self.children))}")
        return sub


def _prices(sub: SubAgent, parent: Agent, model: str) -> Any:
    return sub.agent.budgets.price_for(model) or parent.budgets.price_for(model)


def _as_subagent_tool(base: Tool, children: dict[str, SubAgent]) -> SubAgentTool:
    values = {f.name: getattr(base, f.name) for f in dataclasses.fields(Tool)}
    return SubAgentTool(**values, children=children)


def subagent(
    agent: Agent,
    *,
    role: Role = "custom",
    isolation: Isolation = "shared",
    context: Inheritance | None = None,
    budgets: Budgets | None = None,
    name: str | None = None,
    description: str | None = None,
) -> SubAgentTool:
    """An agent used as a tool: the model calls ``name(task)`` and gets the child's final answer.

    Args:
        agent: The child.
        role, isolation, context, budgets: As :class:`SubAgent`.
        name: Tool name (default: the child agent's name).
        description: What the model reads (default: ``Delegate a task to the <role> sub-agent <name>``).

    Raises:
        ValueError: an unknown role, isolation or context name.
    """
    sub = SubAgent(agent, role, isolation, context, budgets or Budgets())
    tool_name = name or agent.name
    holder: list[SubAgentTool] = []

    async def delegate(task: str) -> str:
        """Delegate a task.

        Args:
            task: What the sub-agent should do, stated completely (it does not see this conversation
                unless it inherits it).
        """
        return await _delegate(holder[0], "", task)

    text = description or f"Delegate a task to the {role} sub-agent {agent.name!r}; returns its final answer."
    base = tool(effect="side_effect", name=tool_name, description=text, reconcile=_reconcile_for(holder))(
        delegate
    )
    built = _as_subagent_tool(base, {"": sub})
    holder.append(built)
    return built


def spawner(
    children: Sequence[SubAgent], *, name: str = "spawn", description: str | None = None
) -> SubAgentTool:
    """One tool spawning a sub-agent by role: the model calls ``spawn(role, task)``.

    Raises:
        ValueError: no children, or two children with one role.
    """
    by_role: dict[str, SubAgent] = {sub.role: sub for sub in children}
    if not children or len(by_role) != len(children):
        raise ValueError("spawner needs one sub-agent per role (at least one)")
    holder: list[SubAgentTool] = []

    async def spawn(role: str, task: str) -> str:
        """Spawn a sub-agent.

        Args:
            role: The sub-agent's role.
            task: What the sub-agent should do, stated completely.
        """
        return await _delegate(holder[0], role, task)

    roles = ", ".join(f"{r} ({s.agent.name})" for r, s in sorted(by_role.items()))
    text = description or f"Spawn a sub-agent for a task; returns its final answer. Roles: {roles}."
    base = tool(effect="side_effect", name=name, description=text, reconcile=_reconcile_for(holder))(spawn)
    built = _as_subagent_tool(base, by_role)
    holder.append(built)
    return built


# ─── the running parent ───────────────────────────────────────────────────────────────────────


@runtime_checkable
class ParentRun(Protocol):
    """What delegation needs from the parent's running activation (:mod:`flightlog.kernel.loop`)."""

    kernel: Kernel
    agent: Agent
    state: KernelState
    session_id: str
    effects: Effects

    def append(self, *events: Any, status: str | None = None) -> None:
        """Durably append events in one transaction."""
        ...

    def spent(self) -> Spent:
        """The parent's usage, its children's charge included."""
        ...

    @property
    def limits(self) -> Budgets:
        """The parent's recorded limits."""
        ...


def _parent() -> ParentRun:
    access = current_access().get()
    if not isinstance(access, ParentRun) or current_effect_key() is None:
        raise RuntimeError("sub-agent tools run inside a kernel turn (the model calls them)")
    return access


@dataclass(frozen=True)
class _Call:
    """One delegating call of the parent's current turn."""

    parent: ParentRun
    tool: SubAgentTool
    sub: SubAgent
    plan: CallPlan
    agent_id: str

    @property
    def turn(self) -> int:
        return self.parent.state.turn

    @property
    def store(self) -> Store:
        return self.parent.kernel.store

    def ids(self) -> tuple[str, str]:
        """``(operation_id, reservation_id)`` of this spawn."""
        run_id, call_id = self.parent.state.run_id, self.plan.call_id
        return f"{run_id}:turn-{self.turn}:agent-{call_id}", f"{run_id}:turn-{self.turn}:grant-{call_id}"

    def capabilities(self) -> list[str]:
        return [t.name for t in self.sub.tools()]

    def process(self, state: str, termination: str | None = None) -> AgentProcessChanged:
        return AgentProcessChanged(
            turn=self.turn,
            agent_id=self.agent_id,
            parent_session_id=self.parent.session_id,
            role=self.sub.role,
            isolation=self.sub.isolation,
            context_inheritance=self.sub.inheritance,
            state=state,
            permitted_capability_ids=self.capabilities(),
            result_termination=termination,
        )

    def last_state(self) -> str | None:
        entry = self.parent.state.delegation.processes.get(self.agent_id)
        return entry.state if entry is not None else None

    def mark(self, state: str) -> None:
        """Record ``state`` unless it is already the child's latest."""
        if self.last_state() != state:
            self.parent.append(self.process(state))


def _this_call(tool: SubAgentTool, role: str) -> _Call:
    parent = _parent()
    key = current_effect_key()
    st = parent.state
    plan = next(
        (
            p
            for p in st.plans
            if effect_key(parent.session_id, st.turn, p.call_id) == key and p.tool == tool.name
        ),
        None,
    )
    if plan is None or key is None:
        raise RuntimeError(f"sub-agent tool {tool.name}: no planned call of this turn has effect key {key}")
    return _Call(parent, tool, tool.child_for(role), plan, child_session_id(key))


# ─── grants ───────────────────────────────────────────────────────────────────────────────────


def _cap(limit: float | None, used: float, wanted: float | None) -> float | bool | None:
    """What is left of ``limit`` after ``used``, capped by ``wanted``; False when nothing is left."""
    if limit is None:
        return wanted
    left = limit - used
    if left <= 0:
        return False
    return left if wanted is None else min(wanted, left)


def _reserve(call: _Call) -> Grant | Axis:
    """The grant for ``call`` from what the parent has left, or the axis with nothing left."""
    limits, spent, want = call.parent.limits, call.parent.spent(), call.sub.budgets
    caps: dict[str, Any] = {}
    checks: list[tuple[Axis, str, float | None, float, float | None]] = [
        ("wall_clock", "wall_clock_ms", limits.wall_clock_ms, spent.wall_clock_ms, want.wall_clock_ms),
        ("tokens", "tokens", limits.tokens, spent.tokens, want.tokens),
        ("turns", "turns", limits.turns, spent.turns, want.turns),
        ("cost", "cost", limits.cost, spent.cost, want.cost),
    ]
    for axis, attr, limit, used, wanted in checks:
        value = _cap(limit, used, wanted)
        if value is False:
            return axis
        if attr == "wall_clock_ms" and limit is not None and value is not None:
            value = min(value, (limit - used) * _WALL_SHARE)  # the child times out (and is settled) first
        caps[attr] = None if value is None else (float(value) if attr == "cost" else int(value))
    _, reservation_id = call.ids()
    return Grant(reservation_id, call.agent_id, call.plan.call_id, call.turn, **caps)


def _open_grant(call: _Call) -> Grant:
    """The recorded grant of ``call``, else reserve and record it (with ``spawned``).

    Raises:
        SubAgentFailed: nothing is left on an axis (``budget_exceeded`` recorded first).
    """
    grant = call.parent.state.delegation.grants.get(call.agent_id)
    if grant is not None:
        return grant  # derived from the ledger: never recomputed, never refilled
    reserved = _reserve(call)
    if not isinstance(reserved, Grant):
        operation_id, reservation_id = call.ids()
        call.parent.append(
            BudgetExceeded(
                turn=call.turn, operation_id=operation_id, reservation_id=reservation_id, budget=reserved
            )
        )
        raise SubAgentFailed(f"not spawned: the parent's {reserved} budget is exhausted")
    call.parent.append(Custom(custom_kind=BUDGET_GRANT, payload=reserved.to_wire()), call.process("spawned"))
    crash_point("subagent.spawned")  # test-only fault injection (flightlog.testing.crashpoints)
    return reserved


# ─── the child ────────────────────────────────────────────────────────────────────────────────


def _child_agent(call: _Call, grant: Grant) -> Agent:
    """The child's definition under its grant, capabilities and the parent's ceilings."""
    sub, parent = call.sub, call.parent.agent
    own = sub.agent.budgets
    prices = own.prices or parent.budgets.prices
    model_prices = {**parent.budgets.model_prices, **own.model_prices}
    budgets = Budgets(
        tokens=grant.tokens,
        turns=grant.turns,
        wall_clock_ms=grant.wall_clock_ms,
        cost=grant.cost,
        prices=prices,
        model_prices=model_prices,
    )
    policy = InheritedPolicy(
        rules=sub.agent.policy.rules, default=sub.agent.policy.default, ceiling=parent.policy
    )
    grant_env = parent.grant if parent.grant is not None else sub.agent.grant
    keys = parent.grant_keys if parent.grant is not None else sub.agent.grant_keys
    tools = [t for t in sub.tools() if t.name not in {b.name for b in BUILTIN_TOOLS}]
    return dataclasses.replace(
        sub.agent,
        tools=tools,
        policy=policy,
        budgets=budgets,
        grant=grant_env,
        grant_keys=keys,
        system_prompt=_system_prompt(call),
    )


def _stricter(first: int | None, second: int | None) -> int | None:
    """The smaller depth bound (None: no bound)."""
    return second if first is None else first if second is None else min(first, second)


def _subtree_limit(kernel: Kernel, agent: Agent) -> int | None:
    """The deepest depth a descendant of ``kernel``'s run may reach: the stricter of its ancestors'
    ``Kernel.depth_limit`` and its own ``spawn_depth + max_spawn_depth`` (module
    docs, "Depth")."""
    own = agent.max_spawn_depth
    return _stricter(kernel.depth_limit, None if own is None else kernel.spawn_depth + own)


def _system_prompt(call: _Call) -> str | None:
    own = call.sub.agent.system_prompt
    if call.sub.inheritance == "none":
        return own
    run = call.parent.state.run
    inherited = run.system_prompt if run is not None else call.parent.agent.system_prompt
    parts = [p for p in (inherited, own) if p]
    return "\n\n".join(parts) or None


def _attachments(call: _Call) -> list[ContentPart]:
    if call.sub.inheritance != "full":
        return []
    lines = [_render(m) for m in call.parent.state.history()]
    return [
        TextPart(
            text="The conversation of the agent that delegated this task, so far:\n\n" + "\n".join(lines)
        )
    ]


def _render(message: Message) -> str:
    parts = [f"[{message.role}] {message.text_content()}".rstrip()]
    parts += [f"  -> {c.name}({c.arguments})" for c in calls_in(message)]
    parts += [f"  <- {getattr(p, 'output', '')}" for p in message.content if p.type == "tool_result"]
    return "\n".join(parts)


def _exists(store: Store, session_id: str, parent: str) -> bool:
    """Whether ``parent``'s child session ``session_id`` exists.

    Raises:
        SubAgentFailed: a session of that id exists but is not ``parent``'s child (created beforehand by
            anyone with write access, who would otherwise choose the answer the parent reads): never adopted.
    """
    try:
        info = store.get_session(session_id)
    except SessionNotFound:
        return False
    if info.parent_session_id != parent:
        raise SubAgentFailed(
            f"session {session_id} exists but is not a sub-agent of {parent} "
            f"(its parent: {info.parent_session_id}); refusing to adopt it"
        )
    return True


async def _drive_child(call: _Call, grant: Grant, task: str) -> None:
    """Create or resume the child, in a task of its own (a fresh context: none of the parent's call state)."""
    parent_kernel = call.parent.kernel
    # The parent's own kernel class (flightlog.kernel.loop imports this module: no import back).
    kernel = type(parent_kernel)(
        call.store,
        _child_agent(call, grant),
        sleep=parent_kernel.sleep,
        clock=parent_kernel.clock,
        notary=parent_kernel.notary,
        heartbeat_s=parent_kernel.heartbeat_s,
    )
    kernel.spawn_depth = parent_kernel.spawn_depth + 1
    kernel.lease_ms = parent_kernel.lease_ms  # its resume judges a previous holder as the parent's does
    kernel.depth_limit = _subtree_limit(parent_kernel, call.parent.agent)
    kernel.spawned_by = SpawnedBy(
        0, call.parent.session_id, call.turn, call.plan.call_id, kernel.spawn_depth, kernel.depth_limit
    ).payload()
    kernel.trees = _spawns_of(call.parent.state)
    if _exists(call.store, call.agent_id, call.parent.session_id):
        await _resume_child(kernel, call.agent_id, parent_kernel.sleep)
        return
    meta = {
        "subagent": {"parent": call.parent.session_id, "call_id": call.plan.call_id, "role": call.sub.role}
    }
    coro = kernel.run(
        task,
        attachments=_attachments(call),
        session_id=call.agent_id,
        metadata=meta,
        parent_session_id=call.parent.session_id,
    )
    await asyncio.create_task(coro, context=contextvars.Context())


CHILD_TAKEOVER_ATTEMPTS = 8
"""How many times a delegating call resumes a child another process is writing (``SessionBusy``) before it
gives up (module docs, "Taking a child over")."""


async def _resume_child(kernel: Any, child_id: str, sleep: Callable[[float], Any]) -> None:
    """Resume an existing child, taking it over from a process still writing it (module docs)."""
    for attempt in range(CHILD_TAKEOVER_ATTEMPTS):
        try:
            await asyncio.create_task(kernel.resume(child_id), context=contextvars.Context())
            return
        except SessionBusy:
            if attempt + 1 == CHILD_TAKEOVER_ATTEMPTS:
                raise  # the parent's activation stops fenced off (kernel.execution)
        await sleep(0.05 * (attempt + 1))


def _termination(state: KernelState) -> str:
    terminal = state.terminal
    if terminal is None:
        return "error"
    if terminal.reason == "completed":
        return "completed"
    if terminal.reason == "budget_exhausted":
        exceeded = next((e for _, e in reversed(state.events) if isinstance(e, BudgetExceeded)), None)
        return _TERMINATION.get(exceeded.budget, "token_budget") if exceeded is not None else "token_budget"
    return "error"


def _settle(call: _Call, child: KernelState) -> None:
    """Record the child's exit and its usage under the grant (once: nothing when the parent's fold already
    holds its release, :func:`finished_children` may have written it)."""
    if call.parent.state.delegation.is_released(call.agent_id):
        return
    grant = call.parent.state.delegation.grants[call.agent_id]
    operation_id, _reservation_id = call.ids()
    call.parent.append(*release_events(grant, call.process("running"), child, operation_id))
    crash_point("subagent.settled")


def release_events(
    grant: Grant, entry: AgentProcessChanged, child: KernelState, operation_id: str
) -> list[AgentProcessChanged | BudgetUsageReported | Custom]:
    """The records settling a finished child's grant, for one transaction of its parent (module docs):
    ``agent_process_changed(joined|failed, result_termination)`` (``entry``'s fields, the grant's turn),
    ``budget_usage_reported`` (tokens and model turns: the child's own plus its released children's;
    ``subagents``: its released children's plus itself) and ``Custom("budget_grant_released", {reservation_id,
    agent_id, returned, cost?})`` (``returned``: the unused grant per limited axis, never below 0).

    Args:
        grant: The parent's recorded grant of the child.
        entry: A process-table entry of the child (its role, isolation, inheritance, capabilities).
        child: The child's fold; its run has ended (``phase == "terminal"``).
        operation_id: ``<run_id>:turn-<turn>:agent-<call_id>`` of the delegating call.
    """
    tokens, rounds, subagents = child.delegation.subtree()
    used_tokens, used_rounds = child.tokens_used + tokens, child.turn + rounds
    cost = child.cost_used + sum(child.delegation.released_cost.values())
    termination = _termination(child)
    returned: dict[str, Any] = {}
    if grant.tokens is not None:
        returned["tokens"] = max(0, grant.tokens - used_tokens)
    if grant.turns is not None:
        returned["turns"] = max(0, grant.turns - used_rounds)
    if grant.cost is not None:
        returned["cost"] = max(0.0, grant.cost - cost)
    payload: dict[str, Any] = {
        "reservation_id": grant.reservation_id,
        "agent_id": grant.agent_id,
        "returned": returned,
    }
    if cost:
        payload["cost"] = cost
    exit_state = "joined" if termination == "completed" else "failed"
    update = {"turn": grant.turn, "state": exit_state, "result_termination": termination}
    return [
        entry.model_copy(update=update),
        BudgetUsageReported(
            turn=grant.turn,
            operation_id=operation_id,
            reservation_id=grant.reservation_id,
            tokens=used_tokens,
            subagents=subagents + 1,
            rounds=used_rounds,
        ),
        Custom(custom_kind=BUDGET_GRANT_RELEASED, payload=payload),
    ]


def finished_children(
    store: Store, state: KernelState
) -> list[AgentProcessChanged | BudgetUsageReported | Custom]:
    """The release records (:func:`release_events`) of every child of ``state``'s session whose run has
    ended while its parent's ledger still holds its grant open, in grant order; ``[]`` when there is none
    (the usual case: only open grants are looked at, one child fold each).

    The process holding the parent appends them (fenced by its epoch, so exactly once): on resume, and with
    each ``tool_completed`` and ``run_terminal``. A child can end without its delegating call settling it:
    it was driven to its end by a process fenced off in the parent meanwhile (its release was refused),
    or the call's outcome was recorded otherwise (an error result, a completion recorded earlier). A
    session holding a child's derived id that is not this parent's child is left alone (never adopted).
    """
    events: list[AgentProcessChanged | BudgetUsageReported | Custom] = []
    delegation = state.delegation
    for agent_id, grant in delegation.grants.items():
        entry = delegation.processes.get(agent_id)
        if delegation.is_released(agent_id) or entry is None:
            continue
        try:
            if not _exists(store, agent_id, state.session_id):
                continue
        except SubAgentFailed:
            continue
        child = load_state(store, agent_id)
        if child.phase == "terminal":
            operation_id = f"{state.run_id}:turn-{grant.turn}:agent-{grant.call_id}"
            events += release_events(grant, entry, child, operation_id)
    return events


def _answer(call: _Call, child: KernelState) -> str:
    """The child's final answer, or :class:`SubAgentFailed` naming how it ended."""
    termination = _termination(child)
    final = child.final_message() or ""
    if termination == "completed":
        return final
    raise SubAgentFailed(f"sub-agent {call.agent_id} ended: {termination}" + (f": {final}" if final else ""))


def _check_depth(call: _Call) -> None:
    """Refuse a new child deeper than the bounds of the delegating run and its ancestors allow (module
    docs, "Depth"; the run's own bound, at least 1, always lets its children be, so only its ancestors'
    limit and, for its descendants, its own can refuse).

    Raises:
        SubAgentFailed: it would be; nothing recorded, no child started.
    """
    if call.agent_id in call.parent.state.delegation.grants:
        return  # spawned already: resumed whatever the bound
    kernel = call.parent.kernel
    depth, limit = kernel.spawn_depth + 1, _subtree_limit(kernel, call.parent.agent)
    if limit is None or depth <= limit:
        return
    raise SubAgentFailed(
        f"not spawned: a sub-agent here would run at depth {depth}, beyond the depth limit {limit} of its "
        "run tree (each agent's max_spawn_depth bounds the tree below its own run; the root's sub-agents "
        "are depth 1); do this part of the task yourself"
    )


async def _delegate(tool: SubAgentTool, role: str, task: str) -> str:
    """The body of a delegating call (see the module docs)."""
    call = _this_call(tool, role)
    _check_depth(call)
    grant = _open_grant(call)
    child = (
        load_state(call.store, call.agent_id)
        if _exists(call.store, call.agent_id, call.parent.session_id)
        else None
    )
    if child is None or child.phase != "terminal":
        if child is None or not _idle_tree(call.store, child):
            call.mark("running")
        # a child whose tree waits for humans is resumed too: that writes nothing, or re-opens the waits an
        # abort closed (kernel.reopen), and drives nothing
        await _drive_child(call, grant, task)
        child = load_state(call.store, call.agent_id)
    if child.phase == "terminal":
        _settle(call, child)
        return _answer(call, child)
    waiting = child.phase == "suspended" or _descendant_waits(call.store, child)
    call.mark("waiting_input" if waiting else "suspended")
    current = asyncio.current_task()
    if current is not None and current.cancelling():
        raise asyncio.CancelledError  # the parent is being cancelled: the child recorded its own cancel
    raise AwaitingChildren(call.agent_id)


def _descendant_waits(store: Store, state: KernelState) -> bool:
    return _idle_tree(store, state)


def _idle_tree(store: Store, state: KernelState) -> bool:
    """Nothing to do in ``state``'s tree until a human decides: it waits on its own gates, or on children
    that all do (resuming it would only record that it still waits)."""
    if state.phase == "suspended" and state.gates:
        return True
    return waiting_on_children(store, state)


def waiting_on_children(store: Store, state: KernelState) -> bool:
    """Whether a session suspended on ``sub_agent_await`` has every awaited child waiting for a human
    (directly or further down); :meth:`Kernel.resume <flightlog.kernel.Kernel.resume>` then writes nothing."""
    suspension = state.suspension
    if state.phase != "suspended" or suspension is None or suspension.reason != SUB_AGENT_AWAIT:
        return False
    for agent_id in awaited_children(state):
        if not _exists(store, agent_id, state.session_id) or not _idle_tree(
            store, load_state(store, agent_id)
        ):
            return False
    return bool(suspension.pending_calls)


def awaited_children(state: KernelState) -> list[str]:
    """The child session ids a session suspended on ``sub_agent_await`` waits for (one per pending
    delegating call of its turn, :func:`child_session_id`); ``[]`` for any other state."""
    suspension = state.suspension
    if state.phase != "suspended" or suspension is None or suspension.reason != SUB_AGENT_AWAIT:
        return []
    return [
        child_session_id(effect_key(state.session_id, state.turn, call_id))
        for call_id in suspension.pending_calls
    ]


def require_children_intact(store: Store, state: KernelState, auditor: Auditor) -> None:
    """The full check of :func:`~flightlog.integrity.audit.require_intact` on every child of ``state``'s
    session a resume may read or drive (each not yet ``joined``, ``failed`` or ``killed``), and on theirs,
    before the parent writes anything. Cost: one audit per unfinished descendant, O(its rows); each
    child's parent link is proven by ``state`` (the fold of its parent's verified ledger), not by checking
    the parent again.

    A child whose row names another parent (or none) is checked too: its full check proves its parent by
    the ledgers (:mod:`flightlog.integrity.lineage`), so an edited row refuses the tree, while a session
    of another tree holding the id (created beforehand) passes and is left alone, never adopted.

    Raises:
        LedgerIntegrityError: a descendant's ledger fails it, its parent link included; the message names
            that session and the sequence (without this, the child's own resume raised inside the
            parent's delegating call, which recorded it as an error result and went on).
    """
    # the parent's fold is of its verified ledger: it proves each child's parent link without another check
    # of the parent (Auditor.trees)
    auditor = dataclasses.replace(auditor, trees=_spawns_of(state, auditor.trees))
    for agent_id, entry in state.delegation.processes.items():
        if entry.state in (*_EXITS, "killed"):
            continue
        try:
            ours = _exists(store, agent_id, state.session_id)
        except SubAgentFailed:  # its row names another parent, or none
            # a row edited so is refused here, naming the field (its ledger proves this parent:
            # flightlog.integrity.lineage); a session of another tree that holds the id passes and is left alone
            require_intact(store, agent_id, auditor=auditor)
            continue
        if ours:
            require_intact(store, agent_id, auditor=auditor)
            require_children_intact(store, load_state(store, agent_id), auditor)


def _spawns_of(state: KernelState, trees: TreeProofs | None = None) -> TreeProofs:
    """``trees`` (a new one when None) holding (:attr:`~flightlog.integrity.lineage.TreeProofs.held`) the
    children ``state``'s fold proves it spawned (:class:`~flightlog.integrity.lineage.Spawns`: an entry
    whose child id one of its calls' keys derives): a session's fold of its verified ledger, or of the
    ledger this process holds and appends to."""
    spawns = Spawns(state.session_id)  # an entry proves a child only with its call's key (atk4 b06)
    for seq, event in state.events:
        spawns.note(seq, event)
    kept = trees if trees is not None else TreeProofs()
    kept.held[state.session_id] = (len(state.events) - 1, spawns.children)
    return kept


def abort_children(
    store: Store,
    state: KernelState,
    abort_one: Callable[[str], bool],
    check: Callable[[str], object] | None = None,
) -> list[AgentProcessChanged]:
    """Abort every unfinished child of ``state``'s session with ``abort_one(child_id)`` (which recurses into
    its own children); returns the ``agent_process_changed(killed, result_termination="user_abort")`` entries
    the parent records with its own ``operation_cancelled``.

    A session holding a child's id whose row names another parent (or none) is not aborted: ``check``
    (the full check, :func:`~flightlog.integrity.audit.require_intact`) runs on it first, so a child whose
    row was edited is refused as tampered, naming it (its ledger proves this parent:
    :mod:`flightlog.integrity.lineage`), while a session of another tree holding the id is left alone.

    Raises:
        LedgerIntegrityError: from ``check``, for a child whose row names another parent.
    """
    killed: list[AgentProcessChanged] = []
    for agent_id, entry in state.delegation.processes.items():
        if entry.state in (*_EXITS, "killed"):
            continue
        try:
            ours = _exists(store, agent_id, state.session_id)
        except SubAgentFailed:
            if check is not None:
                check(agent_id)
            ours = False
        if ours:
            abort_one(agent_id)
        update = {"turn": state.turn, "state": "killed", "result_termination": "user_abort"}
        killed.append(entry.model_copy(update=update))
    return killed


def _reconcile_for(holder: list[SubAgentTool]) -> Any:
    """The reconciler of a delegating call: done (with the answer) when its child completed, else not."""

    def reconcile(intent: dict[str, Any]) -> str | None:
        arguments = intent.get("arguments") or {}
        call = _this_call(holder[0], str(arguments.get("role", "")))
        if (
            not _exists(call.store, call.agent_id, call.parent.session_id)
            or call.agent_id not in call.parent.state.delegation.grants
        ):
            return None
        child = load_state(call.store, call.agent_id)
        if child.phase != "terminal" or _termination(child) != "completed":
            return None  # running the call again resumes (or reads) the child: nothing is created twice
        _settle(call, child)
        return _answer(call, child)

    return reconcile


@dataclass(frozen=True)
class TreePosition:
    """Where a session sits in its run tree, as the verified ledgers prove it (:func:`tree_position`).

    Attributes:
        ancestors: Its parent, its parent's parent... up to the root (empty for a root).
        depth_limit: The limit its verified ``spawned_by`` record holds (None: none recorded, or no bound).
    """

    ancestors: tuple[str, ...]
    depth_limit: int | None

    @property
    def depth(self) -> int:
        """Its depth: the number of proven parent links up to the root (the root's children are 1)."""
        return len(self.ancestors)


def tree_position(store: Store, session_id: str, auditor: Auditor, *, checked: bool = False) -> TreePosition:
    """Walk ``session_id``'s parent links up to its tree's root, each proven by the parent's verified
    ledger: every session on the way passes :func:`~flightlog.integrity.audit.require_intact`, whose full
    check proves the session's ``parent_session_id`` by its parent's ledger
    (:mod:`flightlog.integrity.lineage`). ``checked``: ``session_id`` itself passed it just now (not
    checked again). Cost: two full checks per level (each session's, and its parent's within it).

    Raises:
        SessionNotFound: no such session.
        LedgerIntegrityError: a session on the way fails the full check, its parent link included (names
            that session, the seq and the field), or the links loop back (names the session met twice).
        SessionBusy: as :func:`~flightlog.integrity.audit.require_intact`.
    """
    ancestors: list[str] = []
    seen, current = {session_id}, session_id
    if not checked:
        require_intact(store, current, auditor=auditor)
    _, spawned = read_start(store, session_id)
    while (parent := store.get_session(current).parent_session_id) is not None:
        if parent in seen:
            raise LedgerIntegrityError(
                session_id=current,
                reason=f"row_mismatch: parent_session_id {parent!r} is met twice going up from {session_id}",
            )
        require_intact(store, parent, auditor=auditor)  # its own link proven with it
        seen.add(parent)
        ancestors.append(parent)
        current = parent
    return TreePosition(tuple(ancestors), spawned.depth_limit if spawned is not None else None)


def place(kernel: Kernel, session_id: str, auditor: Auditor) -> None:
    """Set ``kernel``'s ``Kernel.spawn_depth`` and ``depth_limit`` for resuming
    ``session_id`` (module docs, "Depth"): from :func:`tree_position` when no delegating call placed the
    kernel (``spawned_by`` is None), else the delegating call's, its ``depth_limit`` narrowed by the one
    the session's verified ``spawned_by`` record holds. Call once the session passed its full check.

    Raises:
        LedgerIntegrityError, SessionBusy: as :func:`tree_position`.
    """
    if kernel.spawned_by is None:
        position = tree_position(kernel.store, session_id, auditor, checked=True)
        kernel.spawn_depth, kernel.depth_limit = position.depth, position.depth_limit
        return
    _, spawned = read_start(kernel.store, session_id)
    if spawned is not None:
        kernel.depth_limit = _stricter(kernel.depth_limit, spawned.depth_limit)
