"""Tools: plain Python functions the model may call.

``@tool(effect=...)`` turns a function (sync or async) into a :class:`Tool`. The JSON Schema the model sees
comes from the type hints (via a pydantic model built with ``create_model``) and the Google-style docstring
(summary → description, ``Args:`` entries → parameter descriptions). Arguments are validated with the same
model before the function runs, so the function receives typed values (``Path``, ``int``...).

Effect classes decide how the kernel runs a call:

================ ==============================================================================
``read_only``     no external effect; calls of one turn may run concurrently (``asyncio.gather``)
``idempotent``    safe to run twice (a retry after a crash re-runs it)
``side_effect``   exactly once: the intent is durable before it runs and the result after; after a
                  crash an unfinished call is *in doubt* and ``reconcile`` (or a human) decides
================ ==============================================================================

``effect`` defaults to ``side_effect``: the conservative class.

``paths``, ``commands`` and ``urls`` (optional) name the arguments that are file paths, shell commands and
URLs/hosts, for the signed grant's path, command and network ceilings (:mod:`flightlog.kernel.ceiling`,
which also classifies undeclared arguments by conventional names). Each must be a parameter of the function.
The kernel checks them when the call is planned and, for paths, again on the filesystem right before the
call runs; a tool that opens files with :func:`~flightlog.kernel.confine.open_path` and runs commands with
:func:`~flightlog.kernel.confine.run_command` (argv, no shell) has the grant applied at the moment of use.

Example::

    @tool(effect="read_only")
    def read_file(path: str, max_bytes: int = 65536) -> str:
        '''Read a text file.

        Args:
            path: File path, relative to the workspace.
            max_bytes: Read at most this many bytes.
        '''
        with open_path(path) as fh:  # flightlog.kernel.open_path: confined under a signed grant
            return fh.read(max_bytes)
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args, get_type_hints, overload

import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from ..encoding import recordable_text
from ..providers.base import ToolSpec
from .holding import current_hold
from .running import in_thread

__all__ = [
    "EFFECTS",
    "Effect",
    "Reconciler",
    "Tool",
    "ToolArgumentsError",
    "parse_docstring",
    "render_output",
    "tool",
]

Effect = Literal["read_only", "idempotent", "side_effect"]
"""A tool's effect class (see the module docs): how the kernel runs its calls."""
EFFECTS: tuple[Effect, ...] = get_args(Effect)
"""Every effect class, in order of increasing caution."""

Reconciler = Callable[[dict[str, Any]], Any]
"""``reconcile(intent) -> result | None`` (sync or async): did the effect of ``intent`` happen?

``intent`` is ``{"tool": name, "arguments": {...}}`` exactly as recorded before the call ran. Return the
call's result when the effect is observably done (it is recorded as the completion, the tool does not run
again), or None when it did not happen (the kernel then runs the call).
"""

_SECTION = re.compile(r"^(\w[\w ]*):\s*$")
_ARG_LINE = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_ARGS_HEADERS = frozenset({"Args", "Arguments", "Parameters", "Params"})


class ToolArgumentsError(ValueError):
    """Arguments do not fit the tool's signature; the message lists what is wrong (shown to the model)."""


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its description and per-argument descriptions.

    Args:
        doc: The raw docstring (``None`` allowed).

    Returns:
        ``(description, {arg_name: description})``: the text before the first section header (paragraphs
        kept, stripped), and each ``Args:`` entry (``name: text`` or ``name (type): text``) with its
        more-indented continuation lines joined by spaces.
    """
    description: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    entry_indent: int | None = None
    current: str | None = None
    for line in inspect.cleandoc(doc or "").splitlines():
        header = _SECTION.match(line)
        if header and not line.startswith(" "):
            section, entry_indent, current = header.group(1), None, None
            continue
        if section is None:
            description.append(line)
            continue
        if section not in _ARGS_HEADERS or not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        entry = _ARG_LINE.match(line.strip())
        if entry and (entry_indent is None or indent <= entry_indent):
            entry_indent, current = indent, entry.group(1)
            args[current] = entry.group(2).strip()
        elif current is not None:
            args[current] = f"{args[current]} {line.strip()}".strip()
    return "\n".join(description).strip(), args


def render_output(value: Any) -> str:
    """The text a tool result shows the model.

    Returns:
        ``value`` itself for a ``str``, ``""`` for None, else compact JSON (keys sorted, UTF-8 kept) of
        its JSON-able form (pydantic models, dataclasses, paths, datetimes... via ``pydantic_core``);
        a lone surrogate in it as its ``\\udXXX`` escape text (:func:`~flightlog.encoding.recordable_text`:
        the ledger cannot hold one, and a result it cannot record would stop the turn).
    """
    if isinstance(value, str):
        return recordable_text(value)
    if value is None:
        return ""
    jsonable = pydantic_core.to_jsonable_python(value, fallback=str)
    return recordable_text(json.dumps(jsonable, ensure_ascii=False, sort_keys=True, separators=(",", ":")))


@dataclass(frozen=True, eq=False)
class Tool:
    """A callable the model may request, with its schema, effect class and optional reconciler.

    Build with :func:`tool`. Calling the ``Tool`` calls the wrapped function unchanged.

    Attributes:
        name: Name the model uses (unique within an agent).
        description: What it does (the docstring summary unless given).
        effect: ``read_only``, ``idempotent`` or ``side_effect`` (see the module docs).
        fn: The wrapped function (sync or async).
        parameters: JSON Schema (a dict) of the arguments object.
        reconcile: For side effects: ``reconcile(intent) -> result | None`` (see :data:`Reconciler`).
        in_thread: Run a sync function in a worker thread (default) so the event loop stays responsive
            to cancellation; False runs it inline (cheaper, blocks the loop).
        paths: Arguments declared as file paths (grant path ceiling); empty: none declared.
        commands: Arguments declared as shell commands (grant command ceiling); empty: none declared.
        urls: Arguments declared as URLs or host names (grant network ceiling); empty: none declared.
    """

    name: str
    description: str
    effect: Effect
    fn: Callable[..., Any]
    parameters: dict[str, Any]
    reconcile: Reconciler | None = None
    in_thread: bool = True
    paths: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    urls: tuple[str, ...] = ()
    _model: type[BaseModel] = field(default=BaseModel, repr=False)

    def __post_init__(self) -> None:
        for attr in ("paths", "commands", "urls"):
            value = getattr(self, attr)
            if isinstance(value, str):
                raise TypeError(
                    f"tool {self.name}: {attr} must be a sequence of argument names, not a string"
                )
            object.__setattr__(self, attr, tuple(value))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def spec(self) -> ToolSpec:
        """The provider-neutral :class:`~flightlog.providers.base.ToolSpec` for model requests."""
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)

    def validate(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Validate JSON arguments against the signature; returns the keyword arguments to call with.

        Raises:
            ToolArgumentsError: missing, unknown or ill-typed arguments (one line per problem).
        """
        try:
            instance = self._model.model_validate(dict(arguments))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '$'}: {err['msg']}" for err in exc.errors()
            )
            raise ToolArgumentsError(f"invalid arguments for {self.name}: {problems}") from None
        return {name: getattr(instance, name) for name in type(instance).model_fields}

    @property
    def threaded(self) -> bool:
        """Whether a call runs the function in a worker thread (sync, ``in_thread``): once started it cannot
        be cancelled, it runs to its end whatever the caller does."""
        return self.in_thread and not inspect.iscoroutinefunction(self.fn)

    async def invoke(self, arguments: Mapping[str, Any]) -> Any:
        """Validate ``arguments`` and run the function; returns its value (awaited when async).

        Raises:
            ToolArgumentsError: the arguments do not validate (the function does not run).
            Exception: whatever the function raises, unchanged.
        """
        kwargs = self.validate(arguments)
        if inspect.iscoroutinefunction(self.fn):
            return await self.fn(**kwargs)
        if self.in_thread:
            hold = current_hold()  # the activation's: counted until the thread returns (kernel.holding)
            # in_thread: a running side effect's mark is kept until the thread returns (kernel.running)
            return await in_thread(self.fn, kwargs, run=None if hold is None else hold.run_in_thread)
        return self.fn(**kwargs)

    async def check_intent(self, intent: dict[str, Any]) -> Any:
        """Run ``reconcile(intent)`` (sync or async); None without a reconciler."""
        if self.reconcile is None:
            return None
        outcome = self.reconcile(intent)
        if inspect.isawaitable(outcome):
            outcome = await outcome
        return outcome


def _arguments_model(fn: Callable[..., Any], name: str, docs: Mapping[str, str]) -> type[BaseModel]:
    signature = inspect.signature(fn)
    hints = get_type_hints(fn, include_extras=True)
    fields: dict[str, Any] = {}
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise TypeError(f"tool {name}: parameter {param.name!r} must be a plain keyword parameter")
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (hints.get(param.name, Any), Field(default, description=docs.get(param.name)))
    config = ConfigDict(extra="forbid", arbitrary_types_allowed=False)
    return create_model(f"{name}_arguments", __config__=config, **fields)


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        if isinstance(prop, dict):
            prop.pop("title", None)
    schema.setdefault("properties", {})
    return schema


def _build(
    fn: Callable[..., Any],
    *,
    effect: Effect,
    name: str | None,
    description: str | None,
    reconcile: Reconciler | None,
    in_thread: bool,
    paths: tuple[str, ...] | list[str],
    commands: tuple[str, ...] | list[str],
    urls: tuple[str, ...] | list[str],
) -> Tool:
    if effect not in EFFECTS:
        raise ValueError(f"effect must be one of {', '.join(EFFECTS)}, not {effect!r}")
    if reconcile is not None and effect != "side_effect":
        raise ValueError("reconcile only applies to side_effect tools")
    tool_name = name or fn.__name__
    summary, docs = parse_docstring(fn.__doc__)
    model = _arguments_model(fn, tool_name, docs)
    for what, names in (("paths", paths), ("commands", commands), ("urls", urls)):
        if isinstance(names, str):
            raise TypeError(f"tool {tool_name}: {what} must be a sequence of argument names, not a string")
        unknown = [n for n in names if n not in model.model_fields]
        if unknown:
            raise ValueError(f"tool {tool_name}: {what} names unknown arguments: {', '.join(unknown)}")
    return Tool(
        name=tool_name,
        description=description if description is not None else summary,
        effect=effect,
        fn=fn,
        parameters=_schema(model),
        reconcile=reconcile,
        in_thread=in_thread,
        paths=tuple(paths),
        commands=tuple(commands),
        urls=tuple(urls),
        _model=model,
    )


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    effect: Effect = "side_effect",
    name: str | None = None,
    description: str | None = None,
    reconcile: Reconciler | None = None,
    in_thread: bool = True,
    paths: tuple[str, ...] | list[str] = (),
    commands: tuple[str, ...] | list[str] = (),
    urls: tuple[str, ...] | list[str] = (),
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    effect: Effect = "side_effect",
    name: str | None = None,
    description: str | None = None,
    reconcile: Reconciler | None = None,
    in_thread: bool = True,
    paths: tuple[str, ...] | list[str] = (),
    commands: tuple[str, ...] | list[str] = (),
    urls: tuple[str, ...] | list[str] = (),
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Decorator: make a :class:`Tool` of a function (``@tool`` or ``@tool(effect=..., ...)``).

    Args:
        fn: The function (when used bare, ``@tool``).
        effect: ``read_only``, ``idempotent`` or ``side_effect`` (default, the conservative class).
        name: Tool name; defaults to the function's name.
        description: Overrides the docstring summary.
        reconcile: ``side_effect`` only: ``reconcile(intent) -> result | None`` (see :data:`Reconciler`).
        in_thread: Run a sync function in a worker thread (default True).
        paths: Argument names that are file paths (grant path ceiling).
        commands: Argument names that are shell commands (grant command ceiling).
        urls: Argument names that are URLs or host names (grant network ceiling).

    Raises:
        ValueError: unknown effect, ``reconcile`` on a tool that is not ``side_effect``, or ``paths`` /
            ``commands`` / ``urls`` naming an argument the function does not have.
        TypeError: ``*args``/``**kwargs``/positional-only parameters (arguments arrive by name).
    """
    if fn is not None:
        return _build(
            fn,
            effect=effect,
            name=name,
            description=description,
            reconcile=reconcile,
            in_thread=in_thread,
            paths=paths,
            commands=commands,
            urls=urls,
        )

    def decorate(func: Callable[..., Any]) -> Tool:
        return _build(
            func,
            effect=effect,
            name=name,
            description=description,
            reconcile=reconcile,
            in_thread=in_thread,
            paths=paths,
            commands=commands,
            urls=urls,
        )

    return decorate
