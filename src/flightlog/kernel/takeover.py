"""Taking a session over from a process that may still be running one of its side effects.

A resume fences the previous holder off (``Recorder.attach`` bumps the authority epoch): its *appends* are
refused from then on, but a tool it already started runs on, and its effect may land after the resume
asked ``reconcile`` about it. Answered ``not_done`` too early, the call would run a second time (found
looping racing resumes of a sub-agent tree: a child taken over by the holder of its parent while the
child's tool ran in the process it was taken from).

So before a resume reconciles anything, :func:`await_previous_holder` waits while the session's ledger
records an in-doubt effect (intent without completion: the verified fold, followed as the holder appends,
:class:`~flightlog.integrity.effects.EffectTail`; never the ``external_effects`` rows, which no hash covers)
that is not a sub-agent delegation (a delegating call is safe to settle at once: re-running it resumes the
same child, which takes this same care for its own effects) and whose holder may still be running it.

Who holds an effect is read from the verified ledger: the process that recorded its intent, and each that
recorded an ``external_effect_holder`` for it since (it ran the in-doubt effect again), each written before
its tool ran (:mod:`flightlog.kernel.effects`): a :class:`~flightlog.runs.host.ProcessId` (host, pid,
process start time). The effect is held while *any* of them may still run it (:attr:`LedgerEffect.holders
<flightlog.integrity.effects.LedgerEffect.holders>`), not only the last: a later holder record, which
someone who can write the database can append at the unsigned tail, cannot hide an earlier holder still
running the tool (attack pass atk4 b05: a forged last holder naming a dead pid had the effect run twice).
The ``live_runs`` row, which no hash covers, decides nothing a ledger holder of this host can decide
(attack pass, session 19: deleting the row, forging its pid or its owner, a holder with no heartbeat or one
stopped by SIGSTOP each had the effect run twice). Per holder of an in-doubt effect:

* **holder of this host** (its ``host`` is :func:`~flightlog.runs.host.host_id`): it may be running the
  effect iff a process with its pid *and* start time exists (:func:`~flightlog.runs.host.process_alive`:
  a stopped process counts, a zombie or a reused pid does not) and that process still runs the effect's
  tool (:func:`~flightlog.kernel.running.runs_in`: it holds the effect's mark, an anonymous memory file
  the kernel keeps open from before the intent until the tool returns, a worker thread's included;
  assumed when its descriptors cannot be read), no lease watched. When that process is this one (another
  kernel of this process, a parent taking a child over), its own count decides. When its pid exists but
  its start time is unknown or cannot be read (``/proc`` mounted ``hidepid=2`` and the holder another
  user's, atk4 b02), its mark decides, and a mark that cannot be read either is taken to run: unreadable
  is unknown, never ended. When ``/proc`` is not this pid namespace's (:func:`~flightlog.runs.host.proc_is_own`:
  a pid namespace without its own ``/proc``, atk4 b12, where ``/proc/<pid>`` is another process) or there
  is none (not Linux), neither its start nor its mark can be read: the live record decides, as for an
  intent without holder (the record's pid is checked with ``kill(pid, 0)``, which is this namespace's;
  assuming a holder whose pid exists runs would make a process that lives on after its tool returned
  block every resume until the bound).
* **holder of another host** (no pid of it can be checked here): the session's live record, watched by the
  clock-free rule of :class:`flightlog.live.HolderWatch` (:func:`flightlog.live.watched_holder`): gone once
  watched unchanged (same owner, same heartbeat value) for a lease (``Kernel.lease_ms``, default
  :data:`flightlog.live.DEFAULT_LEASE_MS`, 30 s) on this process's monotonic clock; no record at all is
  gone only once watched absent for a lease; no pid or host the record names is believed. No heartbeat is
  compared with this host's wall clock: a holder whose clock is a lease behind looked crashed while its
  tool ran, and the effect ran twice (attack pass, session 18).
* **no holder** (an intent recorded before holders were): the live record, as before
  (:func:`flightlog.live.other_holder`): on this host a record whose pid no longer exists is a crashed
  holder, gone at once; any other record counts until watched unchanged for a lease; no record, no holder.

Kernel.resume calls it twice: before it attaches (the holder is not fenced off yet: it finishes the
effect and records its completion itself) and right after (a process that recorded an intent or a holder
between the two is fenced off now and named by the ledger: its tool ends, its completion is refused). Both
waits share one watch, so a record already watched unchanged for a lease is not watched again. Then the
in-doubt effect, if any is left, is the previous holder's to no one: ``reconcile`` sees what it did. The
wait is bounded (:data:`HOLDER_WAIT_S`); past it the resume gives up with
:class:`~flightlog.errors.HolderBusy` (a ``SessionBusy``, saying which wait ran out: before, that process
still holds the session and may be writing; after, it is fenced off but its effect may still be running),
the call left in doubt for a later resume (a sub-agent's parent retries, see
:mod:`flightlog.kernel.subagents`). Slower in a rare race, never twice.

The numbers. A holder of this host that died (SIGKILL, a crash) is found gone at the first look. A dead
holder of another host is found gone one lease after the first look, plus at most one poll pause (0.5 s)
and a store read; the bound is :data:`HOLDER_WAIT_LEASES` leases (60 s by default), so it is found long
before the bound. The costs: a resume behind a holder that died on another host waits one lease, whatever
its record's age (also when its record was cleared). A holder process of this host that lives on after its
run stopped with the effect in doubt (a server whose run was fenced off, hit its deadline or was cancelled
while a tool ran) frees the effect once its tool returns. A live holder of another host must
change its record more often than the lease (the kernel heartbeats every ``Kernel.heartbeat_s``, 5 s);
one whose effect outlasts the bound makes the resume give up, never run it.

Known limit: a holder of another host is known alive only by its live record. Someone who can write the
database can delete or freeze that record (the ledger still names the holder, but its pid means nothing
here); one lease later a resume takes it for gone, and an effect that outlasts the lease then runs twice
(``docs/attacks.md``, known limits).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from ..errors import HolderBusy
from ..integrity.effects import EffectFold, EffectTail, LedgerEffect
from ..live import (
    DEFAULT_LEASE_MS,
    HolderWatch,
    LiveRegistry,
    LiveRunRecord,
    host_id,
    other_holder,
    watched_holder,
)
from ..runs.host import ProcessId, proc_is_own, process_alive
from ..store.base import Store
from .agent import Agent
from .running import runs_in
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
    return [e.key for e in _undelegated(effects, agent)]


def _undelegated(effects: EffectFold, agent: Agent) -> list[LedgerEffect]:
    """:func:`undelegated_in_doubt`'s effects, each with its holder."""
    delegating = {t.name for t in agent.tools if isinstance(t, SubAgentTool)}
    return [e for e in effects.in_doubt() if e.tool not in delegating]


@dataclass(frozen=True)
class _Held:
    """An in-doubt effect whose holder may still be running it: its key, the holder's pid (None: unknown)
    and how the error names the holder."""

    key: str
    pid: int | None
    words: str


def _held(
    effect: LedgerEffect, store: Store, session_id: str, own: LiveRegistry | None, watch: HolderWatch
) -> _Held | None:
    """Whether any holder the ledger names for ``effect`` may still be running it, by the module docs'
    rule; each call is a sighting for ``watch`` where a live record decides."""
    elsewhere = by_record = False
    for holder in effect.holders:
        if holder.host != host_id():
            elsewhere = True  # no pid of it can be checked here: the live record, watched
            continue
        alive = process_alive(holder)
        if alive is False:
            continue
        if alive is None and not proc_is_own():  # neither its start nor its mark can be read here
            by_record = True
            continue
        # alive, or its pid exists with its start unknown or unreadable: its mark decides (a pid reused by
        # a process without the mark runs nothing of it); marks that cannot be read: assume it runs
        if runs_in(holder.pid, effect.key) is not False:
            return _Held(effect.key, holder.pid, _process_words(holder))
    if elsewhere:
        held, record = watched_holder(store, session_id, own, watch=watch)
        if held:
            last = next(h for h in reversed(effect.holders) if h.host != host_id())
            words = _holder_words(record) if record is not None else f"{_process_words(last)}, no live record"
            return _Held(effect.key, last.pid if record is None else record.pid, words)
    if by_record or not effect.holders:  # no holder named, or one of this host judged by its record
        record = other_holder(store, session_id, own, watch=watch)
        if record is not None:
            return _Held(effect.key, record.pid, _holder_words(record))
    return None


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
        held = None
        for effect in _undelegated(effects.refresh(), agent):
            held = _held(effect, store, session_id, own, watch)
            if held is not None:
                break
        if held is None:
            return
        if not logged:
            logged = True
            log.info(  # not a warning: a resume that waits its turn is working as designed (CLI stays quiet)
                "resume of %s %s (%s): effect %s in doubt; waiting up to %g s",
                session_id,
                HOLDER_WAIT_LOG,
                held.words,
                held.key,
                bound,
            )
        if time.monotonic() >= deadline:
            raise HolderBusy(
                session_id=session_id,
                seq=seq,
                effect=held.key,
                holder=held.words,
                fenced=fenced,
                waited_s=bound,
            )
        await asyncio.sleep(pause)
        pause = min(pause * 2, 0.5)


def _process_words(process: ProcessId) -> str:
    """``pid N`` (the process the ledger names), then `` on HOST`` unless it is this host's."""
    return f"pid {process.pid}" + ("" if process.host == host_id() else f" on {process.host}")


def _holder_words(record: LiveRunRecord) -> str:
    """``pid N`` (``pid unknown`` when the record names none), then `` on HOST`` unless it is this host's."""
    words = f"pid {record.pid}" if record.pid is not None else "pid unknown"
    if record.host != host_id():
        words += f" on {record.host or 'an unknown host'}"
    return words
