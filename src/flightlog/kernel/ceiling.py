"""The signed grant policy as a ceiling over the agent's own governance (seed 003).

An :class:`~flightlog.kernel.agent.Agent` may carry ``grant`` (a DSSE envelope of a
:class:`~flightlog.integrity.grants.GrantPolicy`, signed by a policy key) and ``grant_keys`` (the trusted policy keys;
default :func:`~flightlog.integrity.grants.load_policy_keys`). The grant is a ceiling: it can only make the agent's
:class:`~flightlog.kernel.policy.Policy` stricter, never looser.

**Run start.** ``Kernel.run`` verifies the envelope *before touching the store* (signature by a trusted
policy key, payload type, validity window now, authority epoch 0 — the epoch every new session starts at).
Anything wrong raises :class:`~flightlog.errors.GrantError` and nothing is written: no session row, no event.
A valid grant is ledgered with :func:`~flightlog.integrity.grants.record_grant` in the start transaction, after
``run_started``, the capability evidence and ``budget_limits``: ``custom:grant_policy {policy_id, policy,
signed, digest, key}``, the envelope kept in ``grant_policies``.

**Decisions.** Every governance decision record carries the digest as ``policy_digest``: the
``tool_decisions`` custom of each turn and the ``approval_decision`` of each human decision. Sessions
without a grant keep their records unchanged (no ``policy_digest`` key). Ceilings applied after the agent's
policy decided (:meth:`Ceiling.apply`):

* a tool outside the grant's tool ceiling (``tools_allow`` / ``tools_deny``) → ``deny``, whatever the agent's
  policy said (``tool_denied`` is recorded, the model sees the reason);
* a call with an argument outside the grant's path, command or network ceiling → ``deny`` (below);
* a call the agent's policy allows whose effect class is in ``approval_required`` → ``ask``.

A plan changed by the ceiling has ``ceiling: "grant"`` and ``rule`` unset.

**Argument ceilings** (``path_globs``, ``command_prefixes``, ``network_hosts``). Which arguments they bind:

* *Declared*: ``@tool(paths=("src",), commands=("script",), urls=("target",))`` (:class:`~flightlog.kernel.tools.Tool`
  ``paths`` / ``commands`` / ``urls``). A declared argument is checked on the axes it is declared for, and
  only those: the declaration beats the name convention.
* *Conventional names*, for every argument the tool does not declare: ``path``, ``file_path``,
  ``filename``, ``dir``, ``directory`` are paths; ``command``, ``cmd`` are commands; ``url``, ``uri``,
  ``host``, ``endpoint`` are URLs/hosts. A tool cannot opt an argument out of the convention except by
  declaring it on another axis.
* :meth:`Ceiling.apply` is given the planned call's :class:`Tool` (planning always passes it) and uses its
  declarations; without one it uses the convention alone.

Each classified argument of the (repaired) JSON arguments is checked: ``None`` (absent) is skipped, a string
is one value, a list of strings is each of its items; any other value cannot be checked and is denied. Any
value outside its ceiling denies the call, the reason naming the argument and the ceiling field.

* Paths, at planning: normalised lexically (``\\`` → ``/``, :func:`posixpath.normpath`); a path that
  still climbs out (``..`` or ``../…`` after normalising, e.g. ``src/../../etc``) is refused under any
  grant; otherwise it must match one of ``path_globs`` with the kernel's glob rules
  (:func:`~flightlog.kernel.policy.glob_match`: ``*`` within one segment, ``**`` across segments).
* Paths, when the call runs: planning is lexical and may happen long before the call runs (an approval
  can take days), so the kernel checks again, on the filesystem, right before the tool runs: each path
  argument is resolved (every symlink followed) and must lie where a glob's directories really are
  (:func:`~flightlog.kernel.confine.real_path_problem`); a call whose path resolves outside gets an error
  result and the tool does not run. While it runs, the tool can open paths with
  :func:`~flightlog.kernel.confine.open_path`, which closes the race between that check and the open
  (see :mod:`flightlog.kernel.confine` for the guarantee and its limits).
* Commands: parsed by :func:`~flightlog.kernel.shell.parse_command` (tree-sitter's Bash grammar): a
  command must be one plain command of literal words, so every redirection (``>``, ``>>``, ``<``, ``2>``,
  ``&>``, here-documents), expansion (``$VAR``, ``${...}``, ``$(...)``, backticks, globs, ``{a,b}``,
  ``~``), chaining (``;``, ``&``, ``&&``, ``||``, ``|``, a newline), subshell or compound is refused,
  the reason naming the construct, even inside quotes where Bash would still interpret it. The argv
  it yields (quotes removed) must start with the tokens of one of ``command_prefixes`` (whole tokens,
  first token exact: ``git status`` allows ``git status -s``, not ``git statusx`` nor
  ``/tmp/git status``). A list argument is several commands, each checked (not an argv). Tools run an
  allowed command without a shell with :func:`~flightlog.kernel.confine.run_command`.
* URLs/hosts: a value with ``://`` is parsed with :func:`urllib.parse.urlsplit`, a bare value as
  ``//value`` (``host``, ``host:port``); the ``hostname`` must be allowed by
  :meth:`~flightlog.integrity.grants.GrantPolicy.allows_host` (exactly, or ``*.domain`` for a subdomain, or ``*``).
  No host (``file:///x``), whitespace, control characters or backslashes → denied.

*Absent vs empty* follows :class:`~flightlog.integrity.grants.GrantPolicy`: the signed payload holds every field with
its default, so an absent list is its default. ``path_globs`` defaults to ``["**"]`` (any path that does not
climb out); ``command_prefixes`` and ``network_hosts`` default to ``[]``, which the policy defines as *no*
shell command and *no* host: under such a grant a call with a command or URL argument is denied. An empty
``path_globs`` likewise allows no path. There is no "unrestricted" empty list: a grant only tightens.

**Resume and the epoch rule.** ``Recorder.attach`` (a resume, an approve/deny) bumps the authority epoch,
so a policy pinned to epoch ``N`` can only *start* a session when ``N`` is 0, and is not re-checked against
the epoch afterwards: the epoch rule binds the writer that records the grant, and later writers are fenced
by the epoch mechanism itself, continuing under the grant the ledger holds. A resume takes the grant from
the ledger, not from the agent: the ledgered ``grant_policy`` event (hash-chained) gives the policy and
digest; :func:`~flightlog.integrity.grants.session_policy_digest` (the stored envelope) must name the same digest; the
stored envelope must still verify against the trusted policy keys and be inside its validity window (an
expired grant or a revoked key stops the run from resuming, nothing written). An agent whose ``grant``
differs from the ledgered one, or that brings a grant to a session started without one, is refused
(``KernelError``): a grant cannot be swapped or added mid-session.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any, Literal
from urllib.parse import urlsplit

from ..errors import GrantError
from ..integrity.grants import (
    GrantPolicy,
    VerifiedGrant,
    envelope_digest,
    load_policy_keys,
    session_policy_digest,
    verify_grant,
)
from ..integrity.keys import VerifierKey, now_ms
from ..store.base import Store
from .agent import Agent
from .errors import CommandRefused, KernelError
from .policy import glob_match
from .records import CallPlan
from .shell import parse_command
from .tools import Tool

__all__ = [
    "AXES",
    "CONVENTIONAL_NAMES",
    "Ceiling",
    "active",
    "argv_problem",
    "classify",
    "command_problem",
    "current_ceiling",
    "path_problem",
    "resume_ceiling",
    "start_grant",
    "url_problem",
]

START_EPOCH = 0
"""The authority epoch of a session ``Kernel.run`` creates."""


@dataclass(frozen=True)
class Ceiling:
    """A verified grant policy in force for a session, and its digest."""

    policy: GrantPolicy
    digest: str

    def apply(self, plan: CallPlan, tool: Tool | None = None) -> CallPlan:
        """Tighten one planned call to the grant (deny and invalid plans are left alone).

        Args:
            plan: The call as the agent's policy decided it.
            tool: The tool called, for its argument declarations (default: the live tools of that name).
        """
        if plan.decision in ("deny", "invalid"):
            return plan
        if not self.policy.allows_tool(plan.tool):
            reason = f"grant policy {self.policy.policy_id}: tool {plan.tool!r} is outside the grant"
            return replace(plan, decision="deny", reason=reason, rule=None, ceiling="grant")
        problem = self.argument_problem(plan, tool)
        if problem is not None:
            reason = f"grant policy {self.policy.policy_id}: {problem}"
            return replace(plan, decision="deny", reason=reason, rule=None, ceiling="grant")
        if plan.decision == "allow" and plan.effect is not None and self.policy.needs_approval(plan.effect):
            reason = f"grant policy {self.policy.policy_id}: {plan.effect} calls need a human approval"
            return replace(plan, decision="ask", reason=reason, rule=None, ceiling="grant")
        return plan

    def argument_problem(self, plan: CallPlan, tool: Tool | None = None) -> str | None:
        """Why an argument of the call is outside the path/command/network ceilings; None when none is."""
        arguments = plan.arguments or {}
        for name, axes in classify(arguments, tool if tool is not None else ()).items():
            raw = arguments.get(name)
            if raw is None:
                continue
            values = _string_values(raw)
            for axis in AXES:
                if axis not in axes:
                    continue
                if values is None:
                    return f"argument {name!r} ({axis}) is not a string or a list of strings; {_FIELD[axis]} cannot check it"
                for value in values:
                    problem = _CHECKS[axis](self.policy, value)
                    if problem is not None:
                        return f"argument {name!r} = {value!r}: {problem}"
        return None

    def path_arguments(self, plan: CallPlan, tool: Tool | None = None) -> list[tuple[str, str]]:
        """The call's path values as ``(argument name, value)``, in argument order (lists flattened)."""
        arguments = plan.arguments or {}
        found: list[tuple[str, str]] = []
        for name, axes in classify(arguments, tool if tool is not None else ()).items():
            values = _string_values(arguments.get(name))
            if "path" in axes and values is not None:
                found.extend((name, value) for value in values)
        return found


_ACTIVE: ContextVar[Ceiling | None] = ContextVar("flightlog_ceiling", default=None)


def current_ceiling() -> Ceiling | None:
    """The grant in force for the tool call running now (None: no grant, or not inside a tool call).

    The kernel sets it around each tool call of a session with a grant; sync tools in a worker thread
    see it too (``asyncio.to_thread`` copies the context). :mod:`flightlog.kernel.confine` reads it.
    """
    return _ACTIVE.get()


@contextmanager
def active(ceiling: Ceiling | None) -> Iterator[None]:
    """Make ``ceiling`` the :func:`current_ceiling` inside the block (None: no grant)."""
    token = _ACTIVE.set(ceiling)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


Axis = Literal["path", "command", "url"]
AXES: tuple[Axis, ...] = ("path", "command", "url")

CONVENTIONAL_NAMES: Mapping[Axis, frozenset[str]] = {
    "path": frozenset({"path", "file_path", "filename", "dir", "directory"}),
    "command": frozenset({"command", "cmd"}),
    "url": frozenset({"url", "uri", "host", "endpoint"}),
}
"""Argument names classified by convention when the tool does not declare them."""

_FIELD: Mapping[Axis, str] = {"path": "path_globs", "command": "command_prefixes", "url": "network_hosts"}


def _declared(tool: Tool) -> dict[str, set[Axis]]:
    declared: dict[str, set[Axis]] = {}
    by_axis: tuple[tuple[Axis, tuple[str, ...]], ...] = (
        ("path", tool.paths),
        ("command", tool.commands),
        ("url", tool.urls),
    )
    for axis, names in by_axis:
        for name in names:
            declared.setdefault(name, set()).add(axis)
    return declared


def classify(arguments: Mapping[str, Any], tools: Tool | Iterable[Tool] = ()) -> dict[str, set[Axis]]:
    """The axes each argument is checked on: declared by the tool(s), else by conventional name.

    Args:
        arguments: The call's JSON arguments.
        tools: The tool called, or several tools of that name (their classifications are united), or
            none (the convention alone).
    """
    candidates = [tools] if isinstance(tools, Tool) else list(tools)
    declarations = [_declared(t) for t in candidates] or [{}]
    out: dict[str, set[Axis]] = {}
    for name in arguments:
        for declared in declarations:
            if name in declared:
                axes = declared[name]
            else:
                axes = {axis for axis in AXES if name in CONVENTIONAL_NAMES[axis]}
            if axes:
                out.setdefault(name, set()).update(axes)
    return out


def _string_values(raw: Any) -> list[str] | None:
    if isinstance(raw, str):
        return [raw]
    if isinstance(raw, list | tuple) and all(isinstance(item, str) for item in raw):
        return list(raw)
    return None


def path_problem(policy: GrantPolicy, value: str) -> str | None:
    """Why ``value`` is outside the grant's path ceiling (None: inside)."""
    norm = posixpath.normpath(value.replace("\\", "/"))
    if norm == ".." or norm.startswith("../"):
        return f"the path climbs out of the workspace ({norm!r}); path_globs {policy.path_globs}"
    if not policy.path_globs:
        return "the grant allows no path (path_globs is empty)"
    if not any(glob_match(value, glob) for glob in policy.path_globs):
        return f"the path is outside path_globs {policy.path_globs}"
    return None


def command_problem(policy: GrantPolicy, value: str) -> str | None:
    """Why ``value`` is outside the grant's command ceiling (None: inside)."""
    if not policy.command_prefixes:
        return "the grant allows no shell command (command_prefixes is empty)"
    try:
        argv = parse_command(value)
    except CommandRefused as exc:
        return f"{exc.construct} is refused under command_prefixes {policy.command_prefixes}"
    return argv_problem(policy, argv)


def argv_problem(policy: GrantPolicy, argv: list[str]) -> str | None:
    """Why an argv (already split, run without a shell) is outside ``command_prefixes`` (None: inside)."""
    for prefix in policy.command_prefixes:
        want = shlex.split(prefix)
        if want and argv[: len(want)] == want:
            return None
    if not policy.command_prefixes:
        return "the grant allows no shell command (command_prefixes is empty)"
    return f"the command is outside command_prefixes {policy.command_prefixes}"


def url_problem(policy: GrantPolicy, value: str) -> str | None:
    """Why ``value`` (a URL or a host) is outside the grant's network ceiling (None: inside)."""
    if not policy.network_hosts:
        return "the grant allows no network host (network_hosts is empty)"
    if any(c.isspace() or c == "\\" or not c.isprintable() for c in value):
        return (
            f"the URL has whitespace, control characters or backslashes; network_hosts {policy.network_hosts}"
        )
    try:
        host = urlsplit(value if "://" in value else "//" + value).hostname
    except ValueError:
        host = None
    if not host:
        return f"the URL names no host; network_hosts {policy.network_hosts}"
    if not policy.allows_host(host):
        return f"host {host!r} is outside network_hosts {policy.network_hosts}"
    return None


_CHECKS: Mapping[Axis, Callable[[GrantPolicy, str], str | None]] = {
    "path": path_problem,
    "command": command_problem,
    "url": url_problem,
}


def _keys(agent: Agent) -> list[VerifierKey]:
    return list(agent.grant_keys) if agent.grant_keys is not None else load_policy_keys()


def start_grant(agent: Agent, *, at_ms: int | None = None) -> VerifiedGrant | None:
    """Verify the agent's grant for a new session (epoch 0, now); None when the agent has none.

    Raises:
        GrantError: not signed by a trusted policy key, tampered, not a grant policy, outside its
            validity window, or pinned to an authority epoch other than 0.
    """
    if agent.grant is None:
        return None
    return verify_grant(
        agent.grant, _keys(agent), at_ms=now_ms() if at_ms is None else at_ms, epoch=START_EPOCH
    )


def resume_ceiling(
    store: Store, session_id: str, ledgered: Mapping[str, Any] | None, agent: Agent
) -> Ceiling | None:
    """The grant a resumed session runs under (see the module docs); None when it has none.

    Args:
        store: The session's store.
        session_id: The session.
        ledgered: The payload of the session's last ``grant_policy`` event (None: no grant).
        agent: The agent resuming.

    Raises:
        KernelError: the stored envelope disagrees with the ledger, or the agent brings another grant.
        GrantError: the stored envelope no longer verifies (key not trusted, expired).
    """
    if ledgered is None:
        if agent.grant is not None:
            raise KernelError(
                f"session {session_id} was started without a grant policy; a grant cannot be added on resume"
            )
        return None
    digest = ledgered.get("digest")
    stored = store.grant_policies(session_id)
    if not isinstance(digest, str) or not stored or session_policy_digest(store, session_id) != digest:
        raise KernelError(
            f"session {session_id}: the stored grant policy does not match the ledgered digest {digest}"
        )
    verified = verify_grant(stored[-1][1], _keys(agent))
    if verified.digest != digest:
        raise KernelError(
            f"session {session_id}: the stored grant policy does not match the ledgered digest {digest}"
        )
    if agent.grant is not None:
        try:
            mine = envelope_digest(agent.grant)
        except GrantError as exc:
            raise KernelError(f"session {session_id}: the agent's grant is unreadable: {exc}") from exc
        if mine != digest:
            raise KernelError(
                f"session {session_id} runs under grant {digest}; the agent brings {mine} (a grant cannot be swapped)"
            )
    return Ceiling(verified.policy, digest)
