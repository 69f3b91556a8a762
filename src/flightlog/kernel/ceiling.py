"""The signed grant policy as a ceiling over the agent's own governance (seed 003).

An :class:`~flightlog.kernel.agent.Agent` may carry ``grant`` (a DSSE envelope of a
:class:`~flightlog.grants.GrantPolicy`, signed by a policy key) and ``grant_keys`` (the trusted policy keys;
default :func:`~flightlog.grants.load_policy_keys`). The grant is a ceiling: it can only make the agent's
:class:`~flightlog.kernel.policy.Policy` stricter, never looser.

**Run start.** ``Kernel.run`` verifies the envelope *before touching the store* (signature by a trusted
policy key, payload type, validity window now, authority epoch 0 — the epoch every new session starts at).
Anything wrong raises :class:`~flightlog.errors.GrantError` and nothing is written: no session row, no event.
A valid grant is ledgered with :func:`~flightlog.grants.record_grant` in the start transaction, after
``run_started``, the capability evidence and ``budget_limits``: ``custom:grant_policy {policy_id, policy,
signed, digest, key}``, the envelope kept in ``grant_policies``.

**Decisions.** Every governance decision record carries the digest as ``policy_digest``: the
``tool_decisions`` custom of each turn and the ``approval_decision`` of each human decision. Sessions
without a grant keep their records unchanged (no ``policy_digest`` key). Ceilings applied after the agent's
policy decided (:meth:`Ceiling.apply`):

* a tool outside the grant's tool ceiling (``tools_allow`` / ``tools_deny``) → ``deny``, whatever the agent's
  policy said (``tool_denied`` is recorded, the model sees the reason);
* a call the agent's policy allows whose effect class is in ``approval_required`` → ``ask``.

A plan changed by the ceiling has ``ceiling: "grant"`` and ``rule`` unset. The grant's path globs, command
prefixes and network hosts do not map onto the kernel's rules (the kernel does not know which argument of
a tool is a path, a command or a host), so the kernel does not enforce them; they are ledgered with the
policy for tools and auditors.

**Resume and the epoch rule.** ``Recorder.attach`` (a resume, an approve/deny) bumps the authority epoch,
so a policy pinned to epoch ``N`` can only *start* a session when ``N`` is 0, and is not re-checked against
the epoch afterwards: the epoch rule binds the writer that records the grant, and later writers are fenced
by the epoch mechanism itself, continuing under the grant the ledger holds. A resume takes the grant from
the ledger, not from the agent: the ledgered ``grant_policy`` event (hash-chained) gives the policy and
digest; :func:`~flightlog.grants.session_policy_digest` (the stored envelope) must name the same digest; the
stored envelope must still verify against the trusted policy keys and be inside its validity window (an
expired grant or a revoked key stops the run from resuming, nothing written). An agent whose ``grant``
differs from the ledgered one, or that brings a grant to a session started without one, is refused
(``KernelError``): a grant cannot be swapped or added mid-session.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..errors import GrantError
from ..grants import (
    GrantPolicy,
    VerifiedGrant,
    envelope_digest,
    load_policy_keys,
    session_policy_digest,
    verify_grant,
)
from ..keys import VerifierKey, now_ms
from ..store.base import Store
from .agent import Agent
from .errors import KernelError
from .records import CallPlan

__all__ = ["Ceiling", "resume_ceiling", "start_grant"]

START_EPOCH = 0
"""The authority epoch of a session ``Kernel.run`` creates."""


@dataclass(frozen=True)
class Ceiling:
    """A verified grant policy in force for a session, and its digest."""

    policy: GrantPolicy
    digest: str

    def apply(self, plan: CallPlan) -> CallPlan:
        """Tighten one planned call to the grant (deny and invalid plans are left alone)."""
        if plan.decision in ("deny", "invalid"):
            return plan
        if not self.policy.allows_tool(plan.tool):
            reason = f"grant policy {self.policy.policy_id}: tool {plan.tool!r} is outside the grant"
            return replace(plan, decision="deny", reason=reason, rule=None, ceiling="grant")
        if plan.decision == "allow" and plan.effect is not None and self.policy.needs_approval(plan.effect):
            reason = f"grant policy {self.policy.policy_id}: {plan.effect} calls need a human approval"
            return replace(plan, decision="ask", reason=reason, rule=None, ceiling="grant")
        return plan


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
