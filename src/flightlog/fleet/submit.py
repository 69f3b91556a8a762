"""Queueing a run for the fleet: the session and its start are recorded now, a worker drives it later.

``submit`` records exactly what ``Kernel.run`` records at a start (``run_started``, the route's
``provider_capability_evidence``, ``budget_limits``), in one transaction, with the session status
``queued``, metadata ``{"agent", "agent_spec", "run_source": "fleet"}`` (so the read model lists it as a
``fleet`` run) and a free lease. A worker then claims it and continues it with ``Kernel.resume`` (which
records ``resumed`` and drives it), exactly as after any other stop.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from ..events import Custom, RunStarted
from ..integrity.notary import USER_NOTARY, Notary, UserNotary, resolve_notary
from ..kernel import Agent, load_agent
from ..kernel.errors import AgentSpecError
from ..kernel.records import BUDGET_LIMITS, capability_evidence
from ..kernel.spec import AGENT_SPEC, is_logical
from ..kernel.state import KERNEL_SOURCE
from ..recorder import Recorder
from ..runs import RunSource
from ..store.base import Store
from .leases import leases_for

__all__ = ["QUEUED", "submit"]

QUEUED = "queued"
"""The session status of a submitted run no worker has started yet."""


def submit(
    store: Store,
    spec: str,
    goal: str,
    criteria: Sequence[str] = (),
    *,
    session_id: str | None = None,
    agent: Agent | None = None,
    notary: Notary | UserNotary | None = USER_NOTARY,
) -> str:
    """Queue a run of the agent ``spec`` on ``goal`` for the fleet; returns its session id.

    Args:
        store: Where the fleet's sessions live.
        spec: The agent as ``module:attribute`` (recorded; every worker loads it).
        goal: The goal (first user message).
        criteria: Acceptance criteria.
        session_id: The session id to create (default: random hex).
        agent: The loaded agent (default: ``load_agent(spec)``).
        notary: Sign the session from its first events (a checkpoint over the start, so the agent spec
            workers import is signed; retained head); workers keep signing it and seal it when the run
            ends (:mod:`flightlog.integrity.checkpoints`). Default :data:`~flightlog.integrity.notary.USER_NOTARY`, the
            user's log key (as ``flightlog submit``); None records unsigned, and then no worker imports
            the unsigned spec.

    Raises:
        AgentSpecError: ``spec`` is not a logical ``module:attribute`` (workers import nothing else), or
            does not load.
        AppendConflict: ``session_id`` exists already (nothing written).
    """
    if not is_logical(spec):
        raise AgentSpecError(spec=spec, reason="a fleet spec must be module:attribute (workers import it)")
    agent = agent if agent is not None else load_agent(spec)
    started = RunStarted(
        run_id=uuid.uuid4().hex,
        goal=goal,
        criteria=list(criteria),
        agent_id=agent.name,
        system_prompt=agent.system_prompt,
        attachments=[],
    )
    evidence = [capability_evidence(p, i) for i, p in enumerate(agent.route)]
    limits = Custom(custom_kind=BUDGET_LIMITS, payload=agent.budgets.to_wire())
    metadata = {"agent": agent.name, "agent_spec": spec, "run_source": RunSource.FLEET.value}
    leases = leases_for(store)
    with store.transaction():
        recorder = Recorder.create(
            store,
            session_id=session_id,
            task=goal,
            source=KERNEL_SOURCE,
            metadata=metadata,
            status=QUEUED,
            notary=resolve_notary(notary),
        )
        named = Custom(custom_kind=AGENT_SPEC, payload={"spec": spec})  # resume reads it from the ledger
        recorder.append_many([started, *evidence, limits, named])
        recorder.checkpoint()  # the spec a worker imports is signed from the start (no-op without a notary)
        leases.open_lease(recorder.session_id)
    return recorder.session_id
