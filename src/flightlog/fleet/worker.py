"""A fleet worker: claims runnable sessions, drives them with the kernel, renews and releases leases.

Loop (one dispatcher thread + ``concurrency`` slots)::

    claim up to <free slots> runnable sessions    (epoch bumped per claim: the fencing token)
    none? wait_for_events(poll)                   (LISTEN/NOTIFY on PostgreSQL, polling on SQLite)
    each claim, in a slot:
        the full check `flightlog audit` makes, then the signed agent spec  (kernel.spec.recorded_spec)
            a session that fails it is refused: one log line, parked (nothing read, imported or written)
        expired lease of another holder, run still in flight  ->  operation_cancelled(reason=lease_lost)
        Kernel(store, load_agent(spec)).resume(session)
        release: park when suspended or ended (runnable again once a human's decision lands)
    a heartbeat thread renews every held lease every ttl/3

A worker that dies keeps its leases until they expire; then another worker claims the sessions (bumping
their epochs, so a writer that is only slow, not dead, fails its next append with ``StaleWriter`` and
writes nothing), records ``operation_cancelled(reason=lease_lost)`` for the calls the old holder left
unanswered, and resumes them (``Kernel.resume``: an in-doubt side effect is reconciled or suspended, never
silently re-run). ``flightlog abort`` fences a fleet run the same way; the worker then lets it go.

A residual risk, as with any lease: a holder paused longer than the lease (not dead) may still be inside a
side-effecting tool when a new holder reconciles that effect. Keep the lease well above the longest
tool call and stall (default 30 s), and let tools check :func:`~flightlog.kernel.current_effect_key`.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from ..errors import LedgerIntegrityError, LedgerRetired, SessionNotFound
from ..events import CancellationReason, OperationCancelled
from ..integrity.audit import Auditor
from ..integrity.notary import USER_NOTARY, Notary, UserNotary, resolve_notary
from ..kernel import AgentSpecError, Kernel, RunResult, load_agent
from ..kernel.spec import recorded_spec
from ..kernel.state import KernelState, load_state
from ..recorder import Recorder
from ..store.base import LeaseClaim, Store
from ..testing.crashpoints import crash_point
from .leases import Leases, leases_for

__all__ = ["Worker", "WorkerStats", "fence_children", "holder_id", "record_takeover"]

log = logging.getLogger("flightlog.fleet")


def holder_id() -> str:
    """A worker's holder name: ``host:pid:random`` (unique per worker process start)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def record_takeover(store: Store, session_id: str) -> bool:
    """Record that the previous holder's lease was lost: ``operation_cancelled(reason=lease_lost)`` listing
    the calls of the current turn that have no result (the old holder's pending calls).

    Attaching verifies the chain and bumps the epoch again (the old holder stays fenced off); the epochs of
    the run's sub-agent sessions are bumped too (:func:`fence_children`).

    Returns:
        True when recorded; False when the run has no start or has ended (nothing written).
    """
    state = load_state(store, session_id)
    if state.run is None or state.phase in ("terminal", "new"):
        return False
    recorder = Recorder.attach(store, session_id)
    event = OperationCancelled(
        turn=state.turn,
        operation_id=f"{state.run_id}:lease_lost",
        reason=CancellationReason.LEASE_LOST,
        pending_call_ids=[plan.call_id for plan in state.plans],
    )
    recorder.append(event)
    fence_children(store, state)
    return True


def fence_children(store: Store, state: KernelState) -> list[str]:
    """Bump the authority epoch of every sub-agent session below ``state``'s session (the children its
    ledger names, recursively): the lost holder drove them in its own process, so a writer of its still
    attached to any of them (even a child that had finished) fails its next append with ``StaleWriter``,
    as on the root (issue 13 item 6). A child the new holder resumes bumps its epoch again on attach.

    Returns:
        The fenced session ids, parents before children.
    """
    fenced: list[str] = []
    for agent_id in state.delegation.processes:
        try:
            store.get_session(agent_id)
        except SessionNotFound:  # spawned in the ledger, never created: nothing can hold it
            continue
        store.bump_authority_epoch(agent_id)
        fenced += [agent_id, *fence_children(store, load_state(store, agent_id))]
    return fenced


@dataclass
class WorkerStats:
    """What a worker did: sessions claimed, taken over (from a lost lease), their results, sessions
    refused (they failed the full check, or name no signed ``module:attribute`` agent) and errors."""

    claimed: int = 0
    takeovers: int = 0
    results: dict[str, int] = field(default_factory=dict)
    errors: int = 0
    refused: int = 0


class Worker:
    """Claims and drives fleet sessions (see the module docs).

    Args:
        store: The fleet's store (shared by the worker's threads).
        concurrency: Sessions driven at once (one thread each).
        lease_ttl_s: Lease length in seconds; renewed every third of it.
        poll_s: Longest wait between claim attempts when idle, in seconds (PostgreSQL wakes earlier on
            a notification).
        holder: Holder name (default :func:`holder_id`).
        on_result: Called with each finished activation's result (from the slot's thread).
        on_claim: Called with each lease just claimed, before its activation starts (from the claiming
            thread; ``previous_holder`` set and status ``running``: a takeover of a dead worker's run).
        notary: Sign as the kernel runs and seal each session when its run ends; its keys and retained
            heads are what the full check before each session trusts. Default
            :data:`~flightlog.integrity.notary.USER_NOTARY` (the user's log key, as ``flightlog worker``);
            None records unsigned (and checks against the user's keys).
    """

    def __init__(
        self,
        store: Store,
        *,
        concurrency: int = 1,
        lease_ttl_s: float = 30.0,
        poll_s: float = 1.0,
        holder: str | None = None,
        on_result: Callable[[RunResult], None] | None = None,
        notary: Notary | UserNotary | None = USER_NOTARY,
        on_claim: Callable[[LeaseClaim], None] | None = None,
    ) -> None:
        if concurrency < 1 or lease_ttl_s <= 0:
            raise ValueError("concurrency must be >= 1 and lease_ttl_s > 0")
        self.store = store
        self.leases: Leases = leases_for(store)
        self.concurrency = concurrency
        self.ttl_ms = int(lease_ttl_s * 1000)
        self.poll_s = poll_s
        self.holder = holder or holder_id()
        self.on_result = on_result
        self.on_claim = on_claim
        self.notary = resolve_notary(notary)
        self.auditor = Auditor.for_notary(self.notary)
        self.stats = WorkerStats()
        self._held: set[str] = set()
        self._lock = threading.Lock()
        self._free = threading.Semaphore(concurrency)
        self._stop = threading.Event()
        self._freed = threading.Event()
        self._drained = threading.Event()

    # ─── control ──────────────────────────────────────────────────────────────────────────
    def stop(self) -> None:
        """Stop claiming; sessions being driven finish their activation (safe from a signal handler)."""
        self._stop.set()

    def run(self, *, idle_exit_s: float | None = None, max_sessions: int | None = None) -> WorkerStats:
        """Claim and drive sessions until :meth:`stop` (or a limit, or the store is retired by ``db copy``:
        it then takes no writes, see :mod:`flightlog.integrity.retirement`), then wait for the slots to finish.

        Args:
            idle_exit_s: Return after this many seconds with nothing to claim and nothing running.
            max_sessions: Stop claiming after this many sessions (tests, batch jobs).
        """
        self._drained.clear()
        beat = threading.Thread(target=self._heartbeat, name="flightlog-lease-heartbeat", daemon=True)
        beat.start()
        idle_since: float | None = None
        try:
            with ThreadPoolExecutor(self.concurrency, thread_name_prefix="flightlog-slot") as pool:
                while not self._stop.is_set():
                    if max_sessions is not None and self.stats.claimed >= max_sessions:
                        break
                    if self._claim_into(pool, max_sessions):
                        idle_since = None
                        continue
                    if self._busy():
                        idle_since = None
                    else:
                        idle_since = idle_since if idle_since is not None else time.monotonic()
                        if idle_exit_s is not None and time.monotonic() - idle_since >= idle_exit_s:
                            break
                    self._wait_for_work()
        finally:
            self._stop.set()
            self._drained.set()
            beat.join()
        return self.stats

    def _wait_for_work(self) -> None:
        """Sleep until a slot frees (all busy) or the store may have something new (else ``poll_s``)."""
        if self._free.acquire(blocking=False):
            self._free.release()
            self.store.wait_for_events(self.poll_s)
        else:
            self._freed.wait(self.poll_s)
            self._freed.clear()

    def _claim_into(self, pool: ThreadPoolExecutor, max_sessions: int | None) -> int:
        slots = 0
        while slots < self.concurrency and self._free.acquire(blocking=False):
            slots += 1
        if max_sessions is not None:
            slots_left = max(0, max_sessions - self.stats.claimed)
            for _ in range(max(0, slots - slots_left)):
                self._free.release()
            slots = min(slots, slots_left)
        if not slots:
            return 0
        try:
            claims = self.leases.claim_sessions(self.holder, ttl_ms=self.ttl_ms, limit=slots)
        except LedgerRetired as exc:  # db copy moved the ledger: nothing here will run again
            log.error("stopping: %s", exc)
            self._stop.set()
            claims = []
        except Exception:
            log.exception("claim failed")
            claims = []
        for _ in range(slots - len(claims)):
            self._free.release()
        for claim in claims:
            with self._lock:
                self._held.add(claim.session_id)
                self.stats.claimed += 1
            if self.on_claim is not None:
                try:
                    self.on_claim(claim)
                except Exception:  # a reporting hook never strands a claimed session
                    log.exception("on_claim hook failed for %s", claim.session_id)
            future = pool.submit(self._drive, claim)
            future.add_done_callback(self._slot_done(claim.session_id))
        return len(claims)

    def _slot_done(self, session_id: str) -> Callable[[Future[None]], None]:
        def done(_future: Future[None]) -> None:
            with self._lock:
                self._held.discard(session_id)
            self._free.release()
            self._freed.set()

        return done

    # ─── one session ──────────────────────────────────────────────────────────────────────
    def _drive(self, claim: LeaseClaim) -> None:
        sid = claim.session_id
        crash_point("fleet.claimed")  # test-only fault injection (flightlog.testing.crashpoints)
        park = True
        try:
            # The full check before anything else (the claim only bumped the epoch): then the spec, from
            # the signed ledger, never the session row.
            spec = recorded_spec(self.store, sid, auditor=self.auditor)
            if not spec:
                raise AgentSpecError(spec="", reason=f"session {sid} records no agent spec")
        except (LedgerIntegrityError, AgentSpecError) as exc:
            log.error("refused session %s: %s", sid, exc)
            self.stats.refused += 1
            self._release(sid, park=True)  # not claimable again until its ledger moves
            return
        except Exception:
            log.exception("session %s could not be checked; its lease will expire and be retried", sid)
            self.stats.errors += 1
            return
        try:
            if (
                claim.previous_holder is not None
                and claim.status == "running"
                and record_takeover(self.store, sid)
            ):
                self.stats.takeovers += 1
                log.info("took over %s from %s (lease lost)", sid, claim.previous_holder)
            result = Kernel(self.store, load_agent(spec), notary=self.notary).resume_sync(
                sid, handle_signals=False
            )
            with self._lock:
                self.stats.results[result.status] = self.stats.results.get(result.status, 0) + 1
            if self.on_result is not None:
                self.on_result(result)
        except Exception:
            log.exception("session %s failed in this worker; its lease will expire and be retried", sid)
            self.stats.errors += 1
            return  # keep the lease: it expires, and a worker (maybe this one) retries after it
        self._release(sid, park)

    def _release(self, session_id: str, park: bool) -> None:
        try:
            self.leases.release_lease(session_id, self.holder, park=park)
        except Exception:
            log.exception("could not release the lease of %s; it will expire", session_id)

    def _heartbeat(self) -> None:
        """Renew every held lease each third of the lease, until the slots have drained."""
        while not self._drained.wait(self.ttl_ms / 3000):
            with self._lock:
                held = sorted(self._held)
            for sid in held:
                try:
                    if not self.leases.renew_lease(sid, self.holder, ttl_ms=self.ttl_ms):
                        log.warning(
                            "lost the lease of %s; another worker takes over (we are fenced off)", sid
                        )
                except Exception:
                    log.exception("lease renewal of %s failed", sid)

    def _busy(self) -> bool:
        with self._lock:
            return bool(self._held)
