"""Loading an :class:`~flightlog.kernel.agent.Agent` from a spec: ``module:attribute`` or a TOML file.

``module:attribute``
    ``module`` is a dotted module name (imported) or a path to a ``.py`` file (loaded under a private
    name); ``attribute`` may be dotted. Only a logical spec (dotted identifiers, :func:`is_logical`) is
    recorded by ``run``, and only such a recorded spec, under a verified signed checkpoint, is imported
    again by ``resume`` and the fleet (:func:`recorded_spec`). It names an ``Agent``, or a zero-argument callable returning one.
    A dotted module that is not importable but lives in the working directory is imported from there
    (as ``python -m`` would: ``flightlog run examples.city_agent:agent`` works from a checkout).

``path/to/agent.toml``
    A table describing the agent; references are ``module:attribute`` strings (``.py`` paths in them are
    relative to the TOML file)::

        name = "coder"
        system_prompt = "You are careful."
        max_retries = 2                       # any scalar Agent field: backoff_base_s, backoff_max_s,
                                              # model_timeout_s, max_tokens, stream, on_fatal_tool_error,
                                              # parallel_read_only, max_spawn_depth
        tools = ["mypkg.tools:read_file",     # a Tool (made with @tool) ...
                 {ref = "mypkg.tools:grep", effect = "read_only"}]   # ... or a plain function + effect
        route = ["mypkg.models:primary",      # a ModelProvider, or a zero-argument factory of one ...
                 {ref = "flightlog.kernel.scripted:ScriptedProvider", kwargs = {model = "m"}}]

        [budgets]                             # Budgets fields; prices per 1k tokens
        tokens = 200000
        cost = 5.0
        prices = {input_per_1k = 0.003, output_per_1k = 0.015}

        [context]                             # ContextPolicy (see flightlog.kernel.context)
        compact_at = 0.9
        summarizer = "mypkg.models:cheap"     # a provider reference, like a route entry
        windows = {"my-model" = {tokens = 32000, output_reserve = 4000}}

        [memory]                              # MemoryPolicy (see flightlog.kernel.memory)
        scope = "acme/coder"                  # TENANT/NAMESPACE the agent reads and writes
        inject = 3                            # memories relevant to the goal, injected at run start
        service = "mypkg.memory:service"      # optional: an asynchronous MemoryService (or a factory)

        [policy]
        default = "allow"
        [[policy.rules]]
        action = "ask"
        tool = "write_*"
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import re
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from ..encoding import decode_stored
from ..errors import EventDecodeError
from ..events import Custom
from ..integrity.audit import Auditor, require_intact
from ..integrity.verify import AuditReport
from ..providers.base import ModelProvider, ProviderError
from ..store.base import Store
from .agent import Agent
from .budgets import Budgets
from .context import ContextPolicy
from .errors import AgentSpecError
from .memory import MemoryPolicy, MemoryService
from .policy import Policy
from .tools import Tool, tool

__all__ = [
    "AGENT_SPEC",
    "agent_from_dict",
    "is_logical",
    "load_agent",
    "recorded_spec",
    "records_spec",
    "resolve",
    "spec_of_checked",
]

_SCALARS = frozenset(
    {
        "system_prompt",
        "max_retries",
        "backoff_base_s",
        "backoff_max_s",
        "model_timeout_s",
        "max_tokens",
        "stream",
        "on_fatal_tool_error",
        "parallel_read_only",
        "max_spawn_depth",
    }
)
_KEYS = _SCALARS | {"name", "tools", "route", "budgets", "policy", "context", "memory"}


def _import_module(name: str, base: Path | None) -> Any:
    if name.endswith(".py"):
        path = Path(name)
        if not path.is_absolute() and base is not None:
            path = base / path
        if not path.is_file():
            raise ImportError(f"no such file {path}")
        digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
        module_name = f"_flightlog_spec_{digest}"
        if module_name in sys.modules:
            return sys.modules[module_name]
        loaded = importlib.util.spec_from_file_location(module_name, path)
        if loaded is None or loaded.loader is None:
            raise ImportError(f"cannot load {path}")
        module = importlib.util.module_from_spec(loaded)
        sys.modules[module_name] = module
        loaded.loader.exec_module(module)
        return module
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if not _add_working_directory(name, exc):
            raise
    return importlib.import_module(name)


def _add_working_directory(name: str, exc: ModuleNotFoundError) -> bool:
    """Put the working directory on ``sys.path`` when the missing ``name`` lives there (as ``python -m``)."""
    cwd = os.getcwd()
    top = name.partition(".")[0]
    missing = exc.name or ""
    ours = name == missing or name.startswith(missing + ".")  # not a missing dependency of the module
    here = Path(cwd, top).is_dir() or Path(cwd, top + ".py").is_file()
    if not ours or not here or cwd in sys.path or "" in sys.path:
        return False
    sys.path.insert(0, cwd)
    importlib.invalidate_caches()
    return True


def resolve(ref: str, *, base: Path | None = None) -> Any:
    """The object a ``module:attribute`` reference names.

    Raises:
        AgentSpecError: malformed reference, module not importable (or a model provider it builds at import
            raises :class:`~flightlog.providers.base.ProviderError`, e.g. no API key), attribute missing.
    """
    module_name, sep, attribute = ref.rpartition(":")
    if not sep or not module_name or not attribute:
        raise AgentSpecError(spec=ref, reason="expected module:attribute")
    try:
        obj = _import_module(module_name, base)
    except ImportError as exc:
        raise AgentSpecError(spec=ref, reason=f"cannot import {module_name}: {exc}") from exc
    except ProviderError as exc:  # a provider built at import refused (e.g. the openai SDK finds no API key)
        raise AgentSpecError(
            spec=ref, reason=f"importing {module_name}: a model provider failed: {exc}"
        ) from exc
    for part in attribute.split("."):
        if not hasattr(obj, part):
            raise AgentSpecError(spec=ref, reason=f"{module_name} has no attribute {attribute!r}")
        obj = getattr(obj, part)
    return obj


def _tool(item: Any, base: Path | None) -> Tool:
    if isinstance(item, str):
        item = {"ref": item}
    if not isinstance(item, Mapping) or "ref" not in item:
        raise AgentSpecError(spec=str(item), reason="a tool is 'module:attr' or {ref = ..., effect = ...}")
    obj = resolve(str(item["ref"]), base=base)
    if isinstance(obj, Tool):
        return obj
    if not callable(obj) or "effect" not in item:
        raise AgentSpecError(spec=str(item["ref"]), reason="not a Tool; give effect = ... to wrap a function")
    reconcile = resolve(str(item["reconcile"]), base=base) if "reconcile" in item else None
    return tool(effect=item["effect"], name=item.get("name"), reconcile=reconcile)(obj)


def _provider(item: Any, base: Path | None) -> ModelProvider:
    if isinstance(item, str):
        item = {"ref": item}
    if not isinstance(item, Mapping) or "ref" not in item:
        raise AgentSpecError(
            spec=str(item), reason="a route entry is 'module:attr' or {ref = ..., kwargs = {}}"
        )
    obj = resolve(str(item["ref"]), base=base)
    kwargs = dict(item.get("kwargs") or {})
    if not isinstance(obj, ModelProvider) or kwargs:
        if not callable(obj):
            raise AgentSpecError(spec=str(item["ref"]), reason="not a ModelProvider or a factory of one")
        obj = obj(**kwargs)
    if not isinstance(obj, ModelProvider):
        raise AgentSpecError(spec=str(item["ref"]), reason="does not produce a ModelProvider")
    return obj


def _context(table: Mapping[str, Any], base: Path | None) -> ContextPolicy:
    """The ``[context]`` table: :meth:`ContextPolicy.from_dict`, with ``summarizer`` a provider reference."""
    values = dict(table)
    summarizer = values.pop("summarizer", None)
    policy = ContextPolicy.from_dict(values)
    return policy if summarizer is None else replace(policy, summarizer=_provider(summarizer, base))


def _memory(table: Mapping[str, Any], base: Path | None) -> MemoryPolicy:
    """The ``[memory]`` table: :meth:`MemoryPolicy.from_dict`, with ``service`` a reference to a
    :class:`~flightlog.kernel.memory.MemoryService` or a zero-argument factory of one."""
    if not isinstance(table, Mapping):
        raise ValueError("memory must be a table")
    service = None
    if "service" in table:
        found = resolve(str(table["service"]), base=base)
        service = found if isinstance(found, MemoryService) or not callable(found) else found()
        if not isinstance(service, MemoryService):
            raise ValueError(f"[memory] service {table['service']!r} is not a MemoryService (submit, poll)")
    return MemoryPolicy.from_dict(table, service)


def _budgets(table: Mapping[str, Any], source: str) -> Budgets:
    """The ``[budgets]`` table: a misspelt limit (``token = 1000``) would otherwise leave the run unlimited."""
    if not isinstance(table, Mapping):
        raise AgentSpecError(spec=source, reason="budgets must be a table")
    unknown = set(table) - {f.name for f in fields(Budgets)}
    if unknown:
        raise AgentSpecError(spec=source, reason=f"unknown keys in [budgets]: {', '.join(sorted(unknown))}")
    return Budgets.from_wire(table)


def agent_from_dict(data: Mapping[str, Any], *, source: str = "<dict>", base: Path | None = None) -> Agent:
    """Build an agent from plain data (the TOML schema in the module docs).

    Raises:
        AgentSpecError: unknown keys, missing ``name``/``route``, bad references or values.
    """
    unknown = set(data) - _KEYS
    if unknown:
        raise AgentSpecError(spec=source, reason=f"unknown keys: {', '.join(sorted(unknown))}")
    if "name" not in data or not data.get("route"):
        raise AgentSpecError(spec=source, reason="an agent needs a name and a non-empty route")
    try:
        return Agent(
            name=str(data["name"]),
            route=[_provider(item, base) for item in data["route"]],
            tools=[_tool(item, base) for item in data.get("tools", ())],
            policy=Policy.from_dict(data.get("policy", {})),
            budgets=_budgets(data.get("budgets", {}), source),
            context=_context(data["context"], base) if "context" in data else None,
            memory=_memory(data["memory"], base) if "memory" in data else None,
            **{key: data[key] for key in _SCALARS if key in data},
        )
    except (TypeError, ValueError) as exc:
        if isinstance(exc, AgentSpecError):
            raise
        raise AgentSpecError(spec=source, reason=str(exc)) from exc


def load_agent(spec: str) -> Agent:
    """Load an agent from ``module:attribute`` or a ``.toml`` file (see the module docs).

    Raises:
        AgentSpecError: the spec cannot be loaded or does not name an agent, or the factory it names raised
            (any ``Exception``: the message names the spec, the exception's type and text).
    """
    if spec.endswith(".toml"):
        path = Path(spec)
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise AgentSpecError(spec=spec, reason=str(exc)) from exc
        return agent_from_dict(data, source=spec, base=path.parent)
    obj = resolve(spec)
    if not isinstance(obj, Agent) and callable(obj):
        try:
            obj = obj()
        except Exception as exc:  # the user's factory: any mistake in it is a bad spec, said in one line
            raise AgentSpecError(spec=spec, reason=f"its factory raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(obj, Agent):
        raise AgentSpecError(spec=spec, reason=f"names a {type(obj).__name__}, not an Agent")
    return obj


_DOTTED = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
_LOGICAL = re.compile(rf"(?P<module>{_DOTTED}):{_DOTTED}")


def is_logical(spec: str) -> bool:
    """Whether ``spec`` is a logical ``module:attribute`` reference: dotted ASCII identifiers on both
    sides of one colon, the module not ending in ``.py``. Only such a spec is recorded by ``run`` and
    ``submit``, and only such a recorded spec is ever imported again (never a file path or a TOML file).
    """
    match = _LOGICAL.fullmatch(spec)
    return match is not None and not match.group("module").endswith(".py")


AGENT_SPEC = "agent_spec"
"""``Custom`` kind recording the ``module:attr`` spec a run was started with (payload ``{"spec"}``)."""

_SPEC_WINDOW = 64
"""Events at the start of a session searched for its ``agent_spec`` (a run records it in its first
transaction)."""


def recorded_spec(store: Store, session_id: str, *, auditor: Auditor | None = None) -> str | None:
    """The agent spec a run recorded in its ledger (``agent_spec`` custom), for ``resume`` and the fleet.

    Nothing is read before the session passes the full check ``flightlog audit`` makes
    (:func:`flightlog.integrity.audit.require_intact`: chain, signed checkpoints, seal, retained, witnessed and
    indexed heads). Then the spec must be a logical ``module:attribute`` (:func:`is_logical`; resolved by
    :func:`load_agent` the way ``run`` resolved it) recorded at a seq a verified signed checkpoint covers:
    an unanchored tail (or an unsigned session) can be rewritten by anyone who can write the database,
    and must not choose the code an operator's ``resume`` imports. Never the session row's metadata: no
    hash covers it.

    Args:
        store: The store.
        session_id: The session (exact id).
        auditor: What the check trusts (default: the user's keys, retained heads and witnesses).

    Returns:
        The spec, or None when the session records none (give the agent explicitly then).

    Raises:
        LedgerIntegrityError: the session fails the full check (names the first divergent seq).
        AgentSpecError: the recorded spec is not a logical ``module:attribute``, or no verified signed
            checkpoint covers it; the message names the seq and the field (``agent_spec`` payload
            ``spec``).
    """
    return spec_of_checked(store, session_id, require_intact(store, session_id, auditor=auditor))


def spec_of_checked(store: Store, session_id: str, report: AuditReport) -> str | None:
    """:func:`recorded_spec` of a session that has just passed the full check (``report``: what
    :func:`~flightlog.integrity.audit.require_intact` returned for it), for a caller that ran the check
    itself before reading anything else the session stores (``flightlog resume``: its source).

    Raises:
        AgentSpecError: as :func:`recorded_spec`.
    """
    for row in store.read_events(session_id, stop=_SPEC_WINDOW):
        if row.kind != "custom":
            continue
        event = decode_stored(row.event_bytes, seq=row.seq)
        if isinstance(event, Custom) and event.custom_kind == AGENT_SPEC:
            return _checked_spec(event.payload, row.seq, report.anchored)
    return None


def records_spec(store: Store, session_id: str) -> bool:
    """Whether a session holds an ``agent_spec`` custom among its first events (what ``flightlog resume``
    runs without ``--spec``): False for a run started from Python (``Kernel(...).run_sync``), an
    ``agent.toml`` or a ``.py`` path. A hint's question only: nothing read here is trusted or imported
    (:func:`recorded_spec` checks the session first); an event that does not decode is not read as a spec
    (``resume`` refuses that session at its full check anyway).

    Raises:
        SessionNotFound: no such session.
    """
    for row in store.read_events(session_id, stop=_SPEC_WINDOW):
        if row.kind != "custom":
            continue
        try:
            event = decode_stored(row.event_bytes, seq=row.seq)
        except EventDecodeError:
            continue
        if isinstance(event, Custom) and event.custom_kind == AGENT_SPEC:
            return True
    return False


def _checked_spec(payload: Any, seq: int, anchored: int) -> str:
    field = f"the {AGENT_SPEC} event at seq {seq} (payload field 'spec')"
    spec = payload.get("spec") if isinstance(payload, dict) else None
    if not isinstance(spec, str) or not is_logical(spec):
        raise AgentSpecError(
            spec=str(spec)[:200],
            reason=f"{field} is not a module:attribute reference; refusing to import what the ledger "
            "names in another form (give --spec)",
        )
    if seq >= anchored:
        signed = (
            f"signed checkpoints cover only seqs 0..{anchored - 1}" if anchored else "no signed checkpoint"
        )
        raise AgentSpecError(
            spec=spec,
            reason=f"{field} is not covered by a verified signed checkpoint ({signed}): anyone who can "
            "write the database could have chosen it; refusing to import it (give --spec)",
        )
    return spec
