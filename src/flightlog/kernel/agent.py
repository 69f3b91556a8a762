"""The agent definition: route, prompt, tools, policy, budgets and fault-handling knobs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..integrity.keys import VerifierKey
from ..providers.base import ModelProvider, ToolSpec
from .budgets import Budgets
from .capabilities import Capability, label_of
from .context import ContextPolicy
from .entropy import EntropyWatch
from .memory import MemoryPolicy, memory_tools
from .milestones import Phase
from .paging import builtin_tools
from .policy import Policy
from .tools import Tool

__all__ = ["DEFAULT_MAX_SPAWN_DEPTH", "Agent"]

DEFAULT_MAX_SPAWN_DEPTH = 8
"""The default :attr:`Agent.max_spawn_depth`: sub-agents of sub-agents, eight levels down at most."""


@dataclass(frozen=True)
class Agent:
    """Everything the kernel needs to run an agent (code, not data: resume takes the same definition).

    Attributes:
        name: Agent id, recorded as ``run_started.agent_id``.
        route: Model route: the primary provider first, then fallbacks in failover order (non-empty).
        system_prompt: System prompt, recorded in ``run_started`` (a resume uses the recorded one).
        tools: Tools the model may call (unique names).
        policy: Governance rules (see :mod:`flightlog.kernel.policy`); default allows everything.
        budgets: Run limits (see :mod:`flightlog.kernel.budgets`); recorded at run start.
        max_retries: Retries of a failed model call on one route position before failing over (so each
            position gets ``max_retries + 1`` attempts); also the retries of a turn rolled back by a
            ``FatalToolError``.
        backoff_base_s: First retry delay in seconds; doubles per attempt.
        backoff_max_s: Cap on any retry delay, ``retry_after_s`` hints included, in seconds.
        model_timeout_s: Timeout of one model call in seconds (None: none); a timeout rolls the turn back
            (``rollbacked(reason=Timeout)``) and counts as a failed attempt.
        max_tokens: Output cap per model call, in tokens (the budget reservation estimate).
        stream: Ask providers to stream; token deltas go to live subscribers only, never to the ledger.
        on_fatal_tool_error: After a ``FatalToolError``: ``retry`` the turn (up to ``max_retries`` times)
            or ``fail`` the run. A turn a completed ``side_effect`` call makes irreversible is committed,
            not rolled back (:mod:`flightlog.kernel.execution`): ``retry`` then goes on to the next turn.
        parallel_read_only: Run consecutive ``read_only`` calls of one turn concurrently.
        grant: A signed grant policy (DSSE envelope, as a mapping or its JSON text) the run is held to:
            verified and ledgered at run start, a ceiling over ``policy`` (see
            :mod:`flightlog.kernel.ceiling`). None: no grant.
        grant_keys: The trusted policy keys ``grant`` must be signed by (default, when None:
            :func:`flightlog.integrity.grants.load_policy_keys`, read at run start and resume).
        context: How the kernel manages the context window (windows, thresholds, paging, renewal,
            built-in tools; see :mod:`flightlog.kernel.context`). None: the defaults, without the
            built-in tools (so the tool surface is exactly ``tools``). With a policy whose ``tools`` is
            true, ``page_in``, ``pin`` and ``renew_context`` are appended to ``tools``.
        capabilities: Capabilities the run may mount (MCP servers, skill packs, single tools): unlocked
            ones at run start, locked ones by a milestone, a policy unlock or ``Kernel.mount`` (see
            :mod:`flightlog.kernel.capabilities`). Ids unique per kind.
        milestones: Phases the run must pass, in order (see :mod:`flightlog.kernel.milestones`); each
            phase's ``unlocks`` name ids of ``capabilities``.
        memory: Long-term memory (:class:`~flightlog.kernel.memory.MemoryPolicy`: scope, injection at run
            start, an asynchronous service); with ``memory.tools``, ``memory_write`` and ``memory_query``
            are appended to ``tools``. None: no memory.
        entropy_watch: The opt-in entropy alert and its action (:mod:`flightlog.kernel.entropy`); None:
            samples are still recorded at every completed turn, no alert.
        max_spawn_depth: How deep a tree of sub-agents may grow below a run of this agent, counted from
            that run (its own sub-agents are 1 below it, as upstream's ``ResourceQuota.max_spawn_depth``
            counts the children of the agent whose quota it is); a delegating call that would start a
            child deeper than this bound, or than any ancestor's (each counted from its own run), is
            answered with an error result naming the depth, no child started
            (:mod:`flightlog.kernel.subagents`, "Depth"). The root's therefore bounds the whole tree (its
            children are depth 1), and a sub-agent's own can only narrow its subtree. Default
            :data:`DEFAULT_MAX_SPAWN_DEPTH` (8); at least 1; None: no bound (an agent that is its own
            sub-agent then recurses until a budget stops it).
    """

    name: str
    route: Sequence[ModelProvider]
    system_prompt: str | None = None
    tools: Sequence[Tool] = field(default_factory=tuple)
    policy: Policy = field(default_factory=Policy)
    budgets: Budgets = field(default_factory=Budgets)
    max_retries: int = 2
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    model_timeout_s: float | None = 300.0
    max_tokens: int = 4096
    stream: bool = False
    on_fatal_tool_error: Literal["retry", "fail"] = "retry"
    parallel_read_only: bool = True
    grant: Mapping[str, Any] | str | bytes | None = None
    grant_keys: Sequence[VerifierKey] | None = None
    context: ContextPolicy | None = None
    capabilities: Sequence[Capability] = field(default_factory=tuple)
    milestones: Sequence[Phase] = field(default_factory=tuple)
    memory: MemoryPolicy | None = None
    entropy_watch: EntropyWatch | None = None
    max_spawn_depth: int | None = DEFAULT_MAX_SPAWN_DEPTH

    def __post_init__(self) -> None:
        object.__setattr__(self, "route", tuple(self.route))
        object.__setattr__(self, "capabilities", tuple(self.capabilities))
        object.__setattr__(self, "milestones", tuple(self.milestones))
        object.__setattr__(self, "tools", tuple(self.tools))
        if self.context is not None and self.context.tools:
            object.__setattr__(self, "tools", (*self.tools, *builtin_tools(self.tools)))
        if self.memory is not None and self.memory.tools:
            object.__setattr__(self, "tools", (*self.tools, *memory_tools(self.tools)))
        if self.grant_keys is not None:
            object.__setattr__(self, "grant_keys", tuple(self.grant_keys))
        if not self.route:
            raise ValueError("an agent needs at least one model provider in its route")
        for item in self.tools:
            if not isinstance(item, Tool):
                raise TypeError(f"agent tools must be Tool objects (use @tool), not {type(item).__name__}")
        names = [t.name for t in self.tools]
        if len(set(names)) != len(names):
            raise ValueError(f"tool names must be unique: {sorted(names)}")
        self._check_capabilities()
        for item in self.tools:  # a sub-agent tool (kernel.subagents) checks its child's capabilities
            check = getattr(item, "check_parent", None)
            if check is not None:
                check(self)
        if self.max_retries < 0 or self.max_tokens < 1:
            raise ValueError("max_retries must be >= 0 and max_tokens >= 1")
        if self.max_spawn_depth is not None and (
            isinstance(self.max_spawn_depth, bool) or not isinstance(self.max_spawn_depth, int)
        ):
            raise TypeError(f"max_spawn_depth must be an int or None, not {self.max_spawn_depth!r}")
        if self.max_spawn_depth is not None and self.max_spawn_depth < 1:
            raise ValueError(
                f"max_spawn_depth must be at least 1 (None: no bound), not {self.max_spawn_depth}"
            )
        if self.on_fatal_tool_error not in ("retry", "fail"):
            raise ValueError("on_fatal_tool_error must be 'retry' or 'fail'")
        if self.budgets.cost is not None:
            unpriced = [p.model for p in self.route if self.budgets.price_for(p.model) is None]
            if unpriced:
                raise ValueError(f"a cost budget needs prices for every route model; missing: {unpriced}")

    def _check_capabilities(self) -> None:
        labels = [label_of(c.kind, c.id) for c in self.capabilities]
        if len(set(labels)) != len(labels):
            raise ValueError(f"capability ids must be unique per kind: {sorted(labels)}")
        ids = {c.id for c in self.capabilities}
        phase_ids = [p.id for p in self.milestones]
        if len(set(phase_ids)) != len(phase_ids):
            raise ValueError(f"milestone phase ids must be unique: {phase_ids}")
        for phase in self.milestones:
            unknown = [u for u in phase.unlocks if u not in ids]
            if unknown:
                raise ValueError(f"milestone phase {phase.id} unlocks undeclared capabilities: {unknown}")

    @property
    def context_policy(self) -> ContextPolicy:
        """:attr:`context`, or the default policy when None."""
        return self.context if self.context is not None else _DEFAULT_CONTEXT

    def tool(self, name: str) -> Tool | None:
        """The tool called ``name``, or None."""
        for item in self.tools:
            if item.name == name:
                return item
        return None

    def tool_specs(self) -> list[ToolSpec]:
        """The tools as the model sees them."""
        return [item.spec() for item in self.tools]


_DEFAULT_CONTEXT = ContextPolicy(tools=False)
