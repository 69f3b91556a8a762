"""Taking a session over from a process that may still be running one of its side effects.

A resume fences the previous holder off (``Recorder.attach`` bumps the authority epoch): its *appends* are
refused from then on, but a tool it already started runs on, and its effect may land after the resume
asked ``reconcile`` about it. Answered ``not_done`` too early, the call would run a second time (found
looping racing resumes of a sub-agent tree: a child taken over by the holder of its parent while the
child's tool ran in the process it was taken from).

So before a resume reconciles anything, :func:`await_previous_holder` waits while both hold:

* the session's ledger records an in-doubt effect (intent without completion: the verified fold, followed
  as the holder appends, :class:`~flightlog.integrity.effects.EffectTail`; never the ``external_effects``
  rows, which no hash covers) that is not a sub-agent delegation (a
  delegating call is safe to settle at once: re-running it resumes the same child, which takes this
  same care for its own effects);
* another activation still drives the session (:func:`flightlog.live.other_holder`): its live record is
  not gone by the clock-free rule of :class:`flightlog.live.HolderWatch`. On this host a record whose pid
  no longer exists is a crashed holder, gone at once. Any other record (another host's, one naming no
  host or no pid, or this host's of a process that exists) is gone only once this resume has watched it
  unchanged (same owner, same heartbeat value) for a lease (``Kernel.lease_ms``, default
  :data:`flightlog.live.DEFAULT_LEASE_MS`, 30 s) on its own monotonic clock; any change restarts the
  watch. No heartbeat is compared with this host's wall clock: a holder whose clock is a lease behind
  looked crashed while its tool ran, and the effect ran twice (attack pass, session 18).

Kernel.resume calls it twice: before it attaches (the holder is not fenced off yet: it finishes the
effect and records its completion itself) and right after (a holder that recorded an intent between the
two is fenced off now: its tool ends, its completion is refused, its activation stops and clears its
record). Both waits share one watch, so a record already watched unchanged for a lease is not watched
again. Then the in-doubt effect, if any is left, is the previous holder's to no one: ``reconcile`` sees
what it did. The wait is bounded (:data:`HOLDER_WAIT_S`); past it the resume gives up with
:class:`~flightlog.errors.HolderBusy` (a ``SessionBusy``, saying which wait ran out: before, that process
still holds the session and may be writing; after, it is fenced off but its effect may still be running),
the call left in doubt for a later resume (a sub-agent's parent
retries, see :mod:`flightlog.kernel.subagents`). Slower in a rare race, never twice.

The numbers. A dead holder of another host is found gone one lease after the first look, plus at most one
poll pause (0.5 s) and a store read; the bound is :data:`HOLDER_WAIT_LEASES` leases (60 s by default), so
it is found long before the bound, which would otherwise turn every such takeover into ``HolderBusy``
(a bound equal to the lease, 30 s before, would). The cost of the rule: a resume behind a holder that died
on another host (or, on this host, whose pid was reused) waits one lease, whatever the record's age; a
holder killed on this host is still detected at once by its pid, and a cleared record means no holder.
A live holder must change its record more often than the lease (the kernel heartbeats every
``Kernel.heartbeat_s``, 5 s); one whose effect outlasts the bound makes the resume give up, never run it.
"""

from __future__ import annotations

import asyncio
import logging
import time

from ..errors import HolderBusy
from ..integrity.effects import EffectFold, EffectTail
from ..live import DEFAULT_LEASE_MS, HolderWatch, LiveRegistry, LiveRunRecord, host_id, other_holder
from ..store.base import Store
from .agent import Agent
from .subagents import SubAgentTool

__all__ = [
    "HOLDER_WAIT_LEASES",
    "HOLDER_WAIT_LOG",
    "HOLDER_WAIT_S",
    "await_previous_holder",
    "undelegated_in_doubt",
]

log = logging.getLogger("flightlog.kernel")

HOLDER_WAIT_LEASES = 2
"""How many leases a resume waits for a previous holder still running an in-doubt effect: one to watch a
dead holder's record unchanged, one more of margin for polling and slow store reads (module docs)."""

HOLDER_WAIT_S = HOLDER_WAIT_LEASES * DEFAULT_LEASE_MS / 1000
"""The wait's bound (seconds) at the default lease: 60 s (module docs)."""

HOLDER_WAIT_LOG = "waits for the process still running it"
"""Part of the INFO record logged once when a resume starts waiting (tests wait on it, not on a timer)."""


def undelegated_in_doubt(effects: EffectFold, agent: Agent) -> list[str]:
    """The keys of the in-doubt effects (intent without completion) ``effects`` records whose tool is not one
    of ``agent``'s sub-agent tools (an intent without a text ``tool`` counts: it is in doubt all the same),
    oldest intent first. ``effects`` is the session's ledger fold (:class:`EffectTail`), never the
    ``external_effects`` rows: a row deleted or forged cannot make a resume skip the wait, or wait."""
    delegating = {t.name for t in agent.tools if isinstance(t, SubAgentTool)}
    return [e.key for e in effects.in_doubt() if e.tool not in delegating]


async def await_previous_holder(
    store: Store,
    session_id: str,
    agent: Agent,
    own: LiveRegistry | None,
    *,
    effects: EffectTail,
    seq: int,
    fenced: bool,
    watch: HolderWatch | None = None,
    wait_s: float | None = None,
) -> None:
    """Return once no other live activation may still be running an in-doubt effect of ``session_id``.

    Args:
        store: The session's store (its ``live_runs`` are read).
        session_id: The session being resumed.
        agent: The resuming kernel's agent (which tools delegate).
        own: The resuming kernel's live registry (its own record is not another holder), or None.
        effects: The session's effects as its verified ledger records them, refreshed at each look (the
            previous holder's completion ends the wait).
        seq: The head the resume read (named in the error).
        fenced: Whether the resume has taken authority already (the other holder is fenced off): the
            second wait. Only the error's words depend on it.
        watch: What decides that a record is gone (module docs); pass the same one to both waits of a
            resume. None: a new one with the default lease.
        wait_s: The bound on the wait (seconds, monotonic); None: :data:`HOLDER_WAIT_LEASES` times the
            watch's lease. A bound under the lease never finds a holder of another host gone (the resume
            then gives up, never runs the effect twice).

    Raises:
        HolderBusy: the other holder still drives the session with an effect in doubt after the bound
            (``fenced`` as given, ``waited_s`` the bound).
        LedgerIntegrityError: a row appended since ``effects`` was verified does not link
            (:meth:`EffectTail.refresh`).
    """
    watch = HolderWatch() if watch is None else watch
    bound = HOLDER_WAIT_LEASES * watch.lease_ms / 1000 if wait_s is None else wait_s
    deadline = time.monotonic() + bound
    pause, logged = 0.02, False
    while True:
        keys = undelegated_in_doubt(effects.refresh(), agent)
        holder = other_holder(store, session_id, own, watch=watch) if keys else None
        if holder is None:
            return
        if not logged:
            logged = True
            log.info(  # not a warning: a resume that waits its turn is working as designed (CLI stays quiet)
                "resume of %s %s (pid %s): effect %s in doubt; waiting up to %g s",
                session_id,
                HOLDER_WAIT_LOG,
                holder.pid,
                keys[0],
                bound,
            )
        if time.monotonic() >= deadline:
            raise HolderBusy(
                session_id=session_id,
                seq=seq,
                effect=keys[0],
                holder=_holder_words(holder),
                fenced=fenced,
                waited_s=bound,
            )
        await asyncio.sleep(pause)
        pause = min(pause * 2, 0.5)


def _holder_words(record: LiveRunRecord) -> str:
    """``pid N`` (``pid unknown`` when the record names none), then `` on HOST`` unless it is this host's."""
    words = f"pid {record.pid}" if record.pid is not None else "pid unknown"
    if record.host != host_id():
        words += f" on {record.host or 'an unknown host'}"
    return words
