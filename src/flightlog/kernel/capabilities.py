"""Capabilities mounted at run time: the tool surface as a ledger fact.

The tools a model is offered are the agent's ``tools`` plus the capabilities mounted in the run. A
capability is one of:

* :class:`ToolCapability`: one Python tool (label ``Tool:<name>``), e.g. locked until a milestone passes;
* :class:`SkillPack`: a named group of Python tools (label ``Skill:<id>``);
* :class:`~flightlog.kernel.mcp.McpServer`: an MCP server whose tools become kernel tools (label
  ``McpServer:<id>``).

Declared in ``Agent.capabilities``. An unlocked one is mounted before the first model call
(``mounted_by="agent"``, ``mount_reason="declared"``); a ``locked`` one when a milestone passes
(``milestone:<phase>`` / ``phase_advance``, :mod:`flightlog.kernel.milestones`), when its ``unlock_when``
policy says so at a turn boundary (``policy`` / the returned reason), or on request through
:meth:`Kernel.mount <flightlog.kernel.loop.Kernel.mount>` (``sdk:runtime`` / ``dynamic_register``, the
host SDK's pair; any capability object may be mounted that way, declared or not).
:meth:`Kernel.unmount <flightlog.kernel.loop.Kernel.unmount>` removes one. Requests are applied at the next
turn boundary (before the model call), so a turn's tools never change under it.

**Ledger** (one transaction per change; UPSTREAM.md §9 for ``capability_changed``)::

    Custom("capability_refused", {turn, capability, tool, reason})      per tool kept out (below)
    Custom("capability_tools", {turn, capability, tools: [{name, description, parameters, effect}],
                                source?, server?})                      the specs mounted
    capability_changed(turn, added, removed, change_kind, capability_id, version, mounted_by, mount_reason)

``added``/``removed`` hold ``<KindLabel>:<id>`` (``McpServer:fs``, ``Skill:ops``) followed by
``Tool:<name>`` for every tool the capability brings, so the tool surface at any seq is a fold of these
events (:class:`SurfaceFold`); ``replay --check`` verifies every change of the offered tools against it
(:mod:`flightlog.kernel.requests`). ``change_kind`` is ``mount`` (also a remount: ``added`` is then its new
tool list, ``removed`` the tools it no longer has) or ``unmount``; ``mounted_by``/``mount_reason`` only on
``mount``, as upstream. A server that fails to start records ``Custom("capability_failed", {turn,
capability, error})`` and the run goes on without it; a server that dies mid-run records
``Custom("capability_crashed", {turn, capability, error})`` and an ``unmount`` at the next boundary.

**What a capability may not bring** (a server cannot smuggle in an unpermitted tool). Each tool is checked
before it is offered, and refused (``capability_refused``) when:

* its name is not allowed by the server's allow list (:attr:`McpServer.tools`);
* its kernel name would shadow a tool already offered (the agent's, another capability's);
* the session's signed grant does not allow the tool name (``tools_allow``/``tools_deny``,
  :mod:`flightlog.kernel.ceiling`);
* the agent's policy denies it outright (a rule without argument conditions);
* it has a name providers reject or an input schema that is not a JSON object schema.

Every call of a mounted tool is then planned like any other: repair, validation (the server's schema),
the agent's policy, the grant's ceilings, approvals, exactly-once effects for ``side_effect`` tools.

**Resume.** A resumed run (after the full audit, :func:`flightlog.integrity.audit.require_intact`) rebinds what the
ledger says is mounted: Python capabilities from the agent's declarations of the same id; MCP servers are
started again from the recorded ``source`` (command, args, cwd; env values from the agent's declaration of
the same id), and recorded as a ``mount`` with ``mounted_by="kernel"``, ``mount_reason="resume"``, when a
verified signed checkpoint covers the recorded command (a mount signs the ledger at once) or the agent
declares the same server (as for ``agent_spec``, a command an unanchored tail names is never run); a server
whose crash unmounted it is started again the same way with ``mount_reason="restart_after_crash"``. A capability the resumed agent cannot rebind is recorded as ``unmount``.
"""

from __future__ import annotations

import fnmatch
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..events import CapabilityChanged, Custom, Event, SessionEvent
from ..providers.base import ToolSpec
from .mcp import TOOL_NAME, McpConnection, McpServer, mcp_tool
from .tools import Tool

if TYPE_CHECKING:
    from .agent import Agent
    from .ceiling import Ceiling
    from .state import KernelState

__all__ = [
    "CAPABILITY_CRASHED",
    "CAPABILITY_FAILED",
    "CAPABILITY_REFUSED",
    "CAPABILITY_TOOLS",
    "Capability",
    "Prepared",
    "SkillPack",
    "SurfaceFold",
    "ToolCapability",
    "ToolSurface",
    "UnlockPolicy",
    "label_of",
]

CAPABILITY_TOOLS = "capability_tools"
"""``Custom`` kind recorded with a mount: the specs (name, description, JSON schema) of the tools it adds."""
CAPABILITY_REFUSED = "capability_refused"
"""``Custom`` kind: one tool a mounted capability offered and the kernel refused (allow list, shadowing,
policy, grant, bad name or schema), with the reason."""
CAPABILITY_FAILED = "capability_failed"
"""``Custom`` kind: a capability that could not be mounted (a server that would not start), with the error."""
CAPABILITY_CRASHED = "capability_crashed"
"""``Custom`` kind: a mounted MCP server found dead at a turn boundary; it is remounted on resume."""

KIND_LABELS = {"tool": "Tool", "skill": "Skill", "mcp_server": "McpServer"}
"""PascalCase labels of ``added``/``removed`` entries (upstream ``types/capability.rs``)."""

UnlockPolicy = Callable[["KernelState"], str | None]
"""``unlock_when(state) -> reason | None``: checked at each turn boundary while a locked capability is
not mounted; a reason mounts it (``mounted_by="policy"``, ``mount_reason=reason``)."""


@dataclass(frozen=True)
class ToolCapability:
    """One Python tool as a capability (label ``Tool:<name>``).

    Attributes:
        tool: The tool.
        locked: Not mounted at run start (a milestone, ``unlock_when`` or ``Kernel.mount`` mounts it).
        unlock_when: Policy unlock (see :data:`UnlockPolicy`).
        version: Recorded ``capability_changed.version``.
    """

    tool: Tool
    locked: bool = True
    unlock_when: UnlockPolicy | None = None
    version: str | None = None

    kind = "tool"

    @property
    def id(self) -> str:
        """The tool's name."""
        return self.tool.name


@dataclass(frozen=True)
class SkillPack:
    """A named group of Python tools (label ``Skill:<id>``).

    Attributes:
        id: Capability id.
        tools: Its tools (names unique across everything the agent may be offered).
        locked: Not mounted at run start.
        unlock_when: Policy unlock (see :data:`UnlockPolicy`).
        version: Recorded ``capability_changed.version``.
    """

    id: str
    tools: Sequence[Tool]
    locked: bool = False
    unlock_when: UnlockPolicy | None = None
    version: str | None = None

    kind = "skill"

    def __post_init__(self) -> None:
        object.__setattr__(self, "tools", tuple(self.tools))
        for item in self.tools:
            if not isinstance(item, Tool):
                raise TypeError(
                    f"skill pack {self.id}: tools must be Tool objects, not {type(item).__name__}"
                )


Capability = ToolCapability | SkillPack | McpServer
"""Anything ``Agent.capabilities`` may declare and ``Kernel.mount`` may mount."""


def label_of(kind: str, capability_id: str) -> str:
    """``<KindLabel>:<id>`` (``McpServer:fs``)."""
    return f"{KIND_LABELS.get(kind, kind)}:{capability_id}"


def _spec_wire(item: Tool) -> dict[str, Any]:
    return {
        "name": item.name,
        "description": item.description,
        "parameters": item.parameters,
        "effect": item.effect,
    }


# ─── the fold ─────────────────────────────────────────────────────────────────────────────────


@dataclass
class Mounted:
    """One mounted capability as the ledger says: label, kind, id, its tools' specs, its source."""

    label: str
    kind: str
    capability_id: str
    tools: list[dict[str, Any]] = field(default_factory=list)
    source: dict[str, Any] | None = None
    source_seq: int | None = None


@dataclass
class SurfaceFold:
    """The mounted capabilities at a seq: a fold of ``capability_tools`` + ``capability_changed``."""

    mounted: dict[str, Mounted] = field(default_factory=dict)
    crashed: dict[str, str] = field(default_factory=dict)
    lost: dict[str, Mounted] = field(default_factory=dict)
    """Servers unmounted because they crashed (and not mounted since): a resume starts them again."""
    _staged: dict[str, dict[str, Any]] = field(default_factory=dict)

    def feed(self, seq: int, event: SessionEvent) -> bool:
        """Fold one event; True when the mounted tool set changed."""
        if isinstance(event, Custom) and isinstance(event.payload, dict):
            if event.custom_kind == CAPABILITY_TOOLS:
                self._staged[str(event.payload.get("capability"))] = {**event.payload, "seq": seq}
            elif event.custom_kind == CAPABILITY_CRASHED:
                self.crashed[str(event.payload.get("capability"))] = str(event.payload.get("error", ""))
            return False
        if not isinstance(event, CapabilityChanged):
            return False
        heads = [e for e in (event.added or event.removed) if not e.startswith("Tool:")]
        label = heads[0] if heads else (event.added or event.removed or [""])[0]
        if event.change_kind == "unmount":
            gone = self.mounted.pop(label, None)
            if gone is not None and label in self.crashed:
                self.lost[label] = gone
            return True
        if event.change_kind == "mount":
            kind = next((k for k, v in KIND_LABELS.items() if label.startswith(f"{v}:")), "tool")
            staged = self._staged.pop(label, {})
            tools = list(staged.get("tools", []))
            self.mounted.pop(label, None)  # a remount moves to the end, as the live surface does
            self.mounted[label] = Mounted(
                label, kind, event.capability_id or "", tools, staged.get("source"), staged.get("seq")
            )
            self.crashed.pop(label, None)
            self.lost.pop(label, None)
            return True
        return False

    def tool_specs(self) -> dict[str, dict[str, Any]]:
        """Every mounted tool's spec by name, in mount order."""
        return {spec["name"]: spec for m in self.mounted.values() for spec in m.tools}


# ─── the runtime ──────────────────────────────────────────────────────────────────────────────


@dataclass
class _Live:
    capability: Capability
    label: str
    tools: dict[str, Tool]
    connection: McpConnection | None = None


@dataclass
class Prepared:
    """A capability started and checked, with the events that record its mount (not yet appended)."""

    live: _Live
    events: list[Event]

    async def discard(self) -> None:
        """Drop it (its events were not recorded): stop its server connection, if any."""
        if self.live.connection is not None:
            await self.live.connection.close()


@dataclass(frozen=True)
class _Request:
    action: Literal["mount", "unmount"]
    target: Capability | str
    mounted_by: str
    reason: str


class ToolSurface:
    """The tool surface of one activation: the agent's tools plus the live capabilities.

    Args:
        agent: The agent (its ``tools``, ``capabilities`` and ``policy``).
        ceiling: The session's signed grant, if any.
        append: Appends events in one transaction (the activation's).
        checkpoint: Signs the ledger head (after a server is mounted: its start command is then covered
            by a signed checkpoint before any resume reads it).
    """

    def __init__(
        self,
        agent: Agent,
        ceiling: Ceiling | None,
        append: Callable[..., None],
        checkpoint: Callable[[], object] = lambda: None,
    ) -> None:
        self.agent = agent
        self.ceiling = ceiling
        self._append = append
        self._checkpoint = checkpoint
        self.base: dict[str, Tool] = {t.name: t for t in agent.tools}
        self.live: dict[str, _Live] = {}
        self._lock = threading.Lock()
        self._requests: list[_Request] = []
        self._opened = False
        self.anchored = 0
        """Events a verified signed checkpoint covers (a resume sets it from the audit): a recorded
        start command is run again only from that range (or when the agent declares the same one)."""

    # ─── the surface ──────────────────────────────────────────────────────────────────────
    def tool(self, name: str) -> Tool | None:
        """The offered tool called ``name`` (the agent's or a mounted one), or None."""
        found = self.base.get(name)
        if found is not None:
            return found
        for live in self.live.values():
            if name in live.tools:
                return live.tools[name]
        return None

    @property
    def tools(self) -> list[Tool]:
        """Every offered tool: the agent's, then each capability's in mount order."""
        return [*self.base.values(), *(t for live in self.live.values() for t in live.tools.values())]

    def specs(self) -> list[ToolSpec]:
        """The offered tools as the model sees them."""
        return [item.spec() for item in self.tools]

    def declared(self, capability_id: str) -> Capability | None:
        """The agent's declared capability with this id, or None."""
        return next((c for c in self.agent.capabilities if c.id == capability_id), None)

    # ─── requests from the host (any thread) ──────────────────────────────────────────────
    def request(
        self, action: Literal["mount", "unmount"], target: Capability | str, by: str, reason: str
    ) -> None:
        """Queue a mount or unmount for the next turn boundary (thread-safe)."""
        with self._lock:
            self._requests.append(_Request(action, target, by, reason))

    # ─── lifecycle ────────────────────────────────────────────────────────────────────────
    async def open(self, state: KernelState) -> None:
        """Rebind what the ledger says is mounted (a resume), once per activation."""
        if self._opened:
            return
        self._opened = True
        fold = SurfaceFold()
        for seq, event in state.events:
            fold.feed(seq, event)
        for label, mounted in list(fold.mounted.items()):
            await self._rebind(state.turn, label, mounted, "resume")
        for label, mounted in list(fold.lost.items()):
            if mounted.kind == "mcp_server":
                await self._rebind(state.turn, label, mounted, "restart_after_crash")

    async def _rebind(self, turn: int, label: str, mounted: Mounted, reason: str) -> None:
        declared = self.declared(mounted.capability_id)
        if mounted.kind == "mcp_server":
            base = declared if isinstance(declared, McpServer) else None
            signed = mounted.source_seq is not None and mounted.source_seq < self.anchored
            if not signed and (base is None or base.source() != mounted.source):
                why = (
                    f"its start command (seq {mounted.source_seq}) is not covered by a verified signed "
                    "checkpoint and the agent does not declare it: not run"
                )
                self._lost(turn, mounted, why)
                return
            try:
                if mounted.source is None:
                    raise ValueError("no recorded source")
                server = McpServer.from_source(mounted.capability_id, mounted.source, base)
            except ValueError as exc:
                self._lost(turn, mounted, f"cannot start it again: {exc}")
                return
            await self.mount(server, turn, "kernel", reason)
            return
        if declared is None or label_of(declared.kind, declared.id) != label:
            self._lost(turn, mounted, "the resumed agent does not declare it")
            return
        tools = _python_tools(declared)
        if sorted(t.name for t in tools) != sorted(s["name"] for s in mounted.tools):
            await self.mount(declared, turn, "kernel", "resume")
            return
        self.live[label] = _Live(declared, label, {t.name: t for t in tools})

    def _lost(self, turn: int, mounted: Mounted, why: str) -> None:
        names = [s["name"] for s in mounted.tools]
        self._remove(
            turn,
            mounted.label,
            mounted.capability_id,
            names,
            _failed(turn, mounted.label, why),
        )

    def _remove(
        self, turn: int, label: str, capability_id: str, names: Iterable[str], *before: Event
    ) -> None:
        """Record an ``unmount`` of ``label`` (after ``before``, in one transaction)."""
        removed = _entries(label, names)
        self._append(
            *before,
            CapabilityChanged(turn=turn, removed=removed, change_kind="unmount", capability_id=capability_id),
        )

    async def boundary(self, state: KernelState) -> None:
        """At a turn boundary: record crashed servers, mount declared capabilities at run start,
        policy unlocks, then the host's requests (in order)."""
        await self.open(state)
        turn = state.turn
        for live in list(self.live.values()):
            connection = live.connection
            failure = connection.failure() if connection is not None else None
            if failure is not None:
                self._crashed(turn, live, failure)
        if turn == 0 and not any(e.kind == "capability_changed" for _s, e in state.events):
            for capability in self.agent.capabilities:
                if not capability.locked:
                    await self.mount(capability, turn, "agent", "declared")
        for capability in self.agent.capabilities:
            unlock = getattr(capability, "unlock_when", None)
            label = label_of(capability.kind, capability.id)
            if capability.locked and unlock is not None and label not in self.live:
                reason = unlock(state)
                if reason:
                    await self.mount(capability, turn, "policy", reason)
        with self._lock:
            requests, self._requests = self._requests, []
        for item in requests:
            if item.action == "unmount":
                target = item.target if isinstance(item.target, str) else item.target.id
                await self.unmount(target, turn)
                continue
            found = item.target if not isinstance(item.target, str) else self.declared(item.target)
            if found is None:
                self._append(_failed(turn, str(item.target), "not declared by the agent"))
                continue
            await self.mount(found, turn, item.mounted_by, item.reason)

    def _crashed(self, turn: int, live: _Live, error: str) -> None:
        self.live.pop(live.label, None)
        self._remove(
            turn,
            live.label,
            live.capability.id,
            live.tools,
            _crash(turn, live.label, error),
        )

    async def close(self) -> None:
        """Stop every server connection of this activation."""
        for live in list(self.live.values()):
            if live.connection is not None:
                await live.connection.close()

    # ─── mount / unmount ──────────────────────────────────────────────────────────────────
    async def mount(self, capability: Capability, turn: int, mounted_by: str, reason: str) -> list[str]:
        """Mount ``capability`` now and record it (see the module docs); returns the labels added
        (empty when it failed to start, which is recorded too)."""
        prepared = await self.prepare(capability, turn, mounted_by, reason)
        if prepared is None:
            return []
        try:
            self._append(*prepared.events)
        except BaseException:
            await prepared.discard()
            raise
        return await self.commit(prepared)

    async def prepare(
        self, capability: Capability, turn: int, mounted_by: str, reason: str
    ) -> Prepared | None:
        """Start ``capability`` (an MCP server: connect and list its tools), check its tools, and build
        the events of its mount without recording them; None when it failed to start (recorded:
        ``capability_failed``). Record :attr:`Prepared.events`, then :meth:`commit` (or
        :meth:`Prepared.discard`)."""
        label = label_of(capability.kind, capability.id)
        connection: McpConnection | None = None
        events: list[Event] = []
        version = capability.version
        source: dict[str, Any] | None = None
        server_info: dict[str, Any] | None = None
        if isinstance(capability, McpServer):
            connection = McpConnection(capability)
            try:
                await connection.start()
                listed = await connection.list_tools()
            except Exception as exc:
                await connection.close()
                self._append(_failed(turn, label, f"{type(exc).__name__}: {exc}"))
                return None
            version = version or connection.server_version
            source = capability.source()
            server_info = {"name": connection.server_name, "version": connection.server_version}
            candidates = self._server_tools(capability, connection, listed, label, turn, events)
        else:
            candidates = _python_tools(capability)
        previous = self.live.get(label)
        accepted: dict[str, Tool] = {}
        for item in candidates:
            problem = self._problem(item, accepted, label)
            if problem is not None:
                events.append(_refused(turn, label, item.name, problem))
                continue
            accepted[item.name] = item
        payload: dict[str, Any] = {
            "turn": turn,
            "capability": label,
            "tools": [_spec_wire(t) for t in accepted.values()],
        }
        if source is not None:
            payload["source"] = source
        if server_info is not None:
            payload["server"] = server_info
        events.append(Custom(custom_kind=CAPABILITY_TOOLS, payload=payload))
        old = set(previous.tools) if previous is not None else set()
        events.append(
            CapabilityChanged(
                turn=turn,
                added=_entries(label, accepted),
                removed=[f"Tool:{n}" for n in sorted(old - set(accepted))],
                change_kind="mount",
                capability_id=capability.id,
                version=version,
                mounted_by=mounted_by,
                mount_reason=reason,
            )
        )
        return Prepared(_Live(capability, label, accepted, connection), events)

    async def commit(self, prepared: Prepared) -> list[str]:
        """Put a prepared capability on the surface once its events are durable; returns its labels."""
        live = prepared.live
        previous = self.live.pop(live.label, None)
        if previous is not None and previous.connection is not None:
            await previous.connection.close()
        self.live[live.label] = live
        if live.connection is not None:
            self._checkpoint()
        return _entries(live.label, live.tools)

    def _server_tools(
        self,
        server: McpServer,
        connection: McpConnection,
        listed: Iterable[Mapping[str, Any]],
        label: str,
        turn: int,
        events: list[Event],
    ) -> list[Tool]:
        tools: list[Tool] = []
        for wire in listed:
            name = str(wire.get("name", ""))
            if not any(fnmatch.fnmatchcase(name, pattern) for pattern in server.tools):
                events.append(
                    _refused(turn, label, f"{server.tool_prefix}{name}", "not in the server's allow list")
                )
                continue
            try:
                tools.append(mcp_tool(connection, wire))
            except ValueError as exc:
                events.append(_refused(turn, label, f"{server.tool_prefix}{name}", str(exc)))
        return tools

    def _problem(self, item: Tool, accepted: Mapping[str, Tool], label: str) -> str | None:
        """Why ``item`` may not be offered (None: it may); ``label``'s own current tools do not count
        (a remount replaces them)."""
        if not TOOL_NAME.fullmatch(item.name):
            return "a name providers reject"
        if (
            item.name in self.base
            or item.name in accepted
            or any(item.name in live.tools for other, live in self.live.items() if other != label)
        ):
            return "would shadow a tool already offered"
        if self.ceiling is not None and not self.ceiling.policy.allows_tool(item.name):
            return f"outside grant policy {self.ceiling.policy.policy_id}"
        decision = self.agent.policy.decide(item.name, {}, item.effect)
        if decision.action == "deny":
            return f"denied by the agent's policy: {decision.reason}"
        return None

    async def unmount(self, capability_id: str, turn: int) -> bool:
        """Unmount the live capability with this id now and record it; False when none is mounted."""
        live = next((v for v in self.live.values() if v.capability.id == capability_id), None)
        if live is None:
            return False
        self._remove(turn, live.label, capability_id, live.tools)
        self.live.pop(live.label, None)
        if live.connection is not None:
            await live.connection.close()
        return True


def _entries(label: str, names: Iterable[str]) -> list[str]:
    """``added``/``removed`` of a capability: its label, then ``Tool:<name>`` per tool (a single-tool
    capability is its one entry)."""
    return [label, *(f"Tool:{n}" for n in names if f"Tool:{n}" != label)]


def _python_tools(capability: Capability) -> list[Tool]:
    if isinstance(capability, ToolCapability):
        return [capability.tool]
    if isinstance(capability, SkillPack):
        return list(capability.tools)
    return []


def _failed(turn: int, label: str, error: str) -> Custom:
    """A ``capability_failed`` record."""
    return Custom(custom_kind=CAPABILITY_FAILED, payload={"turn": turn, "capability": label, "error": error})


def _crash(turn: int, label: str, error: str) -> Custom:
    """A ``capability_crashed`` record."""
    return Custom(custom_kind=CAPABILITY_CRASHED, payload={"turn": turn, "capability": label, "error": error})


def _refused(turn: int, label: str, tool: str, reason: str) -> Custom:
    return Custom(
        custom_kind=CAPABILITY_REFUSED,
        payload={"turn": turn, "capability": label, "tool": tool, "reason": reason},
    )
