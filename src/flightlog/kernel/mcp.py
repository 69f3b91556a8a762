"""MCP servers as kernel tools, through the official ``mcp`` Python SDK (the ``mcp`` extra).

:class:`McpServer` declares a server: over stdio (``command`` + ``args``, started as a subprocess) or
streamable HTTP (``url``). The kernel connects when the server is mounted
(:mod:`flightlog.kernel.capabilities`), lists its tools (``tools/list``) and offers each allowed one to the
model as a kernel :class:`~flightlog.kernel.tools.Tool` named ``<prefix><tool>`` (default prefix
``<server id>__``) with the server's own JSON Schema (``inputSchema``) and description. A call validates
the arguments against that schema (``jsonschema``, Draft 2020-12) and sends ``tools/call`` with the
server's own tool name.

Trust: a server's self-description is never a permission. Its annotations (``readOnlyHint``...) are
recorded but do not set the effect class: the agent's :attr:`McpServer.effects` does, default
``side_effect`` (exactly once, :mod:`flightlog.kernel.effects`). Which of its tools are mounted is the
agent's allow list (:attr:`McpServer.tools`), then the signed grant and the agent's policy (see
:mod:`flightlog.kernel.capabilities`).

Each connection runs in its own asyncio task (the SDK's transports are anyio task groups: a server that
dies must not cancel the run's task); calls from the run go through the SDK's ``ClientSession``. A
transport failure (the process exited, the connection dropped) marks the connection crashed
(:attr:`McpConnection.crashed`); the kernel records it at the next turn boundary and remounts the server
on resume.

A stdio server dies with the kernel process (Linux: started through :mod:`flightlog.kernel.tether`, which
kills the server's process group when the kernel dies, ``SIGKILL`` included), so no server finishes a call
for a run that is gone while a resume finds that call in doubt. Elsewhere, and for a remote server over
HTTP (not the kernel's process), a call may still complete after the kernel died: the in-doubt call's
decision (``flightlog pending``) says so.

Upstream (UPSTREAM.md §9): MCP servers are marker capabilities of kind ``mcp_server`` mounted through the
same path as any capability, ``McpServer:<id>``; flightlog also lists each tool it mounts (``Tool:<name>``).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

from ..errors import install_hint
from .tether import tethered
from .tools import Effect, Reconciler, Tool, ToolArgumentsError

_Flag = asyncio.Event

__all__ = ["McpConnection", "McpServer", "McpToolError", "mcp_tool"]

TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""Tool names every provider accepts (OpenAI and Anthropic function-name rules)."""


class McpToolError(RuntimeError):
    """The server answered a call with ``isError: true``; the message is its text content."""


@dataclass(frozen=True)
class McpServer:
    """An MCP server the agent may mount (a capability of kind ``mcp_server``).

    Attributes:
        id: Capability id (``McpServer:<id>`` in ``capability_changed``); letters, digits, ``_``, ``-``.
        command: stdio transport: the executable to start (recorded in the ledger, so a resume can start
            it again once the session passes the full audit).
        args: Its arguments (recorded).
        env: Extra environment variables for the process. Only the names are recorded (values may be
            secrets); a resume takes the values from the agent's declaration of the same id.
        cwd: Working directory of the process (recorded).
        url: streamable HTTP transport: the server's endpoint (instead of ``command``).
        tools: Globs (``fnmatch``) of the server's tool names to mount; default all. Any other tool the
            server lists is refused and recorded (``capability_refused``).
        effects: Effect class per server tool name (default :attr:`default_effect`).
        default_effect: Effect class of a tool not in :attr:`effects` (default ``side_effect``: a server
            cannot make its tools look harmless).
        reconcile: ``side_effect`` reconcilers per server tool name (see :data:`~flightlog.kernel.tools.Reconciler`).
        prefix: Kernel tool name prefix (default ``<id>__``).
        locked: Not mounted at run start: a milestone, a policy unlock or ``Kernel.mount`` mounts it.
        version: Recorded ``capability_changed.version`` (default: the server's ``serverInfo.version``).
        timeout_s: Seconds to wait for the server to start and for each call (None: no limit).
    """

    id: str
    command: str | None = None
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    url: str | None = None
    tools: Sequence[str] = ("*",)
    effects: Mapping[str, Effect] = field(default_factory=dict)
    default_effect: Effect = "side_effect"
    reconcile: Mapping[str, Reconciler] = field(default_factory=dict)
    prefix: str | None = None
    locked: bool = False
    version: str | None = None
    timeout_s: float | None = 30.0

    kind = "mcp_server"

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,48}", self.id):
            raise ValueError(f"MCP server id {self.id!r}: use 1-48 letters, digits, '_' or '-'")
        if (self.command is None) == (self.url is None):
            raise ValueError(f"MCP server {self.id}: give exactly one of command (stdio) or url (HTTP)")
        for attr in ("args", "tools"):
            value = getattr(self, attr)
            if isinstance(value, str):
                raise TypeError(f"MCP server {self.id}: {attr} must be a sequence of strings, not a string")
            object.__setattr__(self, attr, tuple(value))

    @property
    def tool_prefix(self) -> str:
        """The kernel name prefix of its tools."""
        return self.prefix if self.prefix is not None else f"{self.id}__"

    def source(self) -> dict[str, Any]:
        """What the ledger records to start it again: transport, command/args/cwd or url, env names."""
        if self.url is not None:
            return {"transport": "streamable_http", "url": self.url}
        wire: dict[str, Any] = {"transport": "stdio", "command": self.command, "args": list(self.args)}
        if self.cwd is not None:
            wire["cwd"] = self.cwd
        if self.env:
            wire["env_names"] = sorted(self.env)
        return wire

    @classmethod
    def from_source(cls, id: str, source: Mapping[str, Any], declared: McpServer | None) -> McpServer:
        """The server a ledger's ``source`` names, with the agent's declaration for the rest (effects,
        allow list, env values, prefix); raises ``ValueError`` on a source it cannot start."""
        transport = source.get("transport")
        common: dict[str, Any] = {}
        base = declared
        if base is not None:
            common = {
                "tools": base.tools,
                "effects": base.effects,
                "default_effect": base.default_effect,
                "reconcile": base.reconcile,
                "prefix": base.prefix,
                "timeout_s": base.timeout_s,
                "env": base.env,
            }
        if transport == "stdio":
            command, args = source.get("command"), source.get("args", [])
            if not isinstance(command, str) or not all(isinstance(a, str) for a in args):
                raise ValueError(f"MCP server {id}: recorded stdio source is malformed: {source!r}")
            cwd = source.get("cwd")
            return cls(id=id, command=command, args=tuple(args), cwd=cwd, **common)
        if transport == "streamable_http" and isinstance(source.get("url"), str):
            return cls(id=id, url=source["url"], **common)
        raise ValueError(f"MCP server {id}: unknown recorded transport {transport!r}")


class McpConnection:
    """One live connection to a server (see the module docs). Use :meth:`start`, then :meth:`close`."""

    def __init__(self, server: McpServer) -> None:
        self.server = server
        self.session: Any = None
        self.server_name: str | None = None
        self.server_version: str | None = None
        self.crashed: str | None = None
        self._ready: asyncio.Future[None] | None = None
        self._stop = (
            _Flag()
        )  # an asyncio.Event (aliased: the event-coverage scan reads `Event(` as a ledger event)
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start the transport and the MCP handshake (``initialize``) in a task of its own.

        Raises:
            ImportError: the ``mcp`` extra is not installed.
            RuntimeError: the server did not start or failed the handshake (message says why).
            TimeoutError: not ready within ``timeout_s``.
        """
        try:  # fail early and clearly without the extra
            import mcp  # noqa: F401
        except ImportError as exc:
            raise ImportError(f"MCP servers need the mcp SDK: {install_hint('mcp')}", name=exc.name) from exc

        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        self._task = asyncio.create_task(self._run(), name=f"mcp:{self.server.id}")
        try:
            async with asyncio.timeout(self.server.timeout_s):
                await asyncio.shield(self._ready)
        except BaseException:
            await self.close()
            raise

    async def _run(self) -> None:
        from mcp import ClientSession

        ready = self._ready
        assert ready is not None
        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport())
                session = await stack.enter_async_context(ClientSession(read, write))
                result = await session.initialize()
                info = getattr(result, "server_info", None) or getattr(result, "serverInfo", None)
                self.server_name = getattr(info, "name", None)
                self.server_version = getattr(info, "version", None) or None
                self.session = session
                if not ready.done():
                    ready.set_result(None)
                await self._stop.wait()
        except BaseException as exc:
            self.session = None
            detail = _describe(exc)
            if not ready.done():
                ready.set_exception(RuntimeError(f"MCP server {self.server.id} failed to start: {detail}"))
            elif not self._stop.is_set():
                self.crashed = detail
            if isinstance(exc, asyncio.CancelledError):
                raise

    def _transport(self) -> Any:
        server = self.server
        if server.url is not None:
            from mcp.client import streamable_http

            # mcp 2 names it streamable_http_client; mcp 1.8+ streamablehttp_client.
            names = vars(streamable_http)
            connect = names.get("streamable_http_client") or names["streamablehttp_client"]
            return _two(connect(server.url))
        from mcp import StdioServerParameters, stdio_client
        from mcp.client.stdio import get_default_environment

        env = dict(server.env or {})
        command = server.command or ""
        path = {**get_default_environment(), **env}.get("PATH")
        # The server dies with this process (tether.py); a missing program is named here, as without it.
        argv = tethered([command, *server.args], cwd=server.cwd, path=path)
        params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=server.cwd)
        return stdio_client(params)

    async def list_tools(self) -> list[dict[str, Any]]:
        """The server's tools in wire form (``name``, ``description``, ``inputSchema``, ``annotations``)."""
        session = self._live()
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            result = await session.list_tools(cursor) if cursor else await session.list_tools()
            for item in result.tools:
                tools.append(item.model_dump(mode="json", by_alias=True, exclude_none=True))
            cursor = getattr(result, "next_cursor", None) or getattr(result, "nextCursor", None)
            if not cursor:
                return tools

    async def call(self, name: str, arguments: Mapping[str, Any]) -> str:
        """Call the server's tool ``name``; returns its text (structured content as JSON when no text).

        Raises:
            McpToolError: the server reported ``isError``.
            RuntimeError: the connection is gone (also marks it crashed).
        """
        session = self._live()
        try:
            async with asyncio.timeout(self.server.timeout_s):
                result = await session.call_tool(name, dict(arguments))
        except Exception as exc:
            if (self._task is not None and self._task.done()) or _closed(exc):
                self.crashed = self.crashed or _describe(exc)
            raise RuntimeError(f"MCP server {self.server.id}: call {name} failed: {_describe(exc)}") from exc
        wire = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        texts = [str(c.get("text", "")) for c in wire.get("content", []) if c.get("type") == "text"]
        text = "\n".join(texts)
        if not text and wire.get("structuredContent") is not None:
            text = json.dumps(wire["structuredContent"], sort_keys=True, ensure_ascii=False)
        if wire.get("isError"):
            raise McpToolError(text or "the server reported an error")
        return text

    def _live(self) -> Any:
        if self.session is None or (self._task is not None and self._task.done()):
            reason = self.crashed or "not connected"
            self.crashed = self.crashed or reason
            raise RuntimeError(f"MCP server {self.server.id} is not running ({reason})")
        return self.session

    def failure(self) -> str | None:
        """Why the connection is gone (a call saw it close, or its task ended unasked); None while up."""
        if self.crashed is None and self._task is not None and self._task.done() and not self._stop.is_set():
            self.crashed = "the connection ended"
        return self.crashed

    async def close(self) -> None:
        """Stop the connection (the SDK terminates a stdio server process) and wait for its task."""
        self._stop.set()
        task = self._task
        if task is not None and not task.done():
            try:
                async with asyncio.timeout(10):
                    await asyncio.shield(task)
            except TimeoutError:
                task.cancel()
        self.session = None


def _two(context: Any) -> Any:
    """Adapt ``streamable_http_client`` (yields read, write and a session-id getter) to ``(read, write)``."""
    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def wrapped() -> Any:
        async with context as streams:
            yield streams[0], streams[1]

    return wrapped()


def _closed(exc: BaseException) -> bool:
    name = type(exc).__name__
    return (
        name in {"ClosedResourceError", "BrokenResourceError", "EndOfStream"} or "closed" in str(exc).lower()
    )


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


@dataclass(frozen=True, eq=False)
class _McpTool(Tool):
    """A kernel tool backed by a server tool: arguments validated against the server's JSON Schema."""

    server_tool: str = ""

    def validate(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Check ``arguments`` against the server's ``inputSchema``; returns them as a dict.

        Raises:
            ToolArgumentsError: the arguments do not fit the schema (one line per problem).
        """
        import jsonschema

        validator = jsonschema.Draft202012Validator(self.parameters)
        problems = sorted(validator.iter_errors(dict(arguments)), key=lambda e: list(e.absolute_path))
        if problems:
            lines = "; ".join(
                f"{'.'.join(str(p) for p in e.absolute_path) or '$'}: {e.message}" for e in problems
            )
            raise ToolArgumentsError(f"invalid arguments for {self.name}: {lines}")
        return dict(arguments)

    async def invoke(self, arguments: Mapping[str, Any]) -> Any:
        """Validate, then call the server's tool (``tools/call``)."""
        return await self.fn(**{"arguments": self.validate(arguments)})


def mcp_tool(connection: McpConnection, wire: Mapping[str, Any]) -> Tool:
    """The kernel tool for one listed server tool (``wire``: its ``tools/list`` entry).

    Raises:
        ValueError: a name providers would reject, or an ``inputSchema`` that is not an object schema.
    """
    server = connection.server
    name = str(wire.get("name", ""))
    kernel_name = f"{server.tool_prefix}{name}"
    if not TOOL_NAME.fullmatch(kernel_name):
        raise ValueError(f"tool name {kernel_name!r} is not 1-64 letters, digits, '_' or '-'")
    schema = wire.get("inputSchema")
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise ValueError(f"inputSchema of {name!r} is not a JSON object schema")
    import jsonschema

    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ValueError(f"inputSchema of {name!r} is not a valid JSON Schema: {exc.message}") from None
    effect = server.effects.get(name, server.default_effect)

    async def call(arguments: dict[str, Any]) -> str:
        return await connection.call(name, arguments)

    return _McpTool(
        name=kernel_name,
        description=str(wire.get("description") or ""),
        effect=effect,
        fn=call,
        parameters=dict(schema),
        reconcile=server.reconcile.get(name) if effect == "side_effect" else None,
        server_tool=name,
    )
