"""Live run state on top of the durable read model: durable outranks live (seed 002).

Running kernels publish what the ledger cannot know yet (waiting on the model, on a tool, on input; spend
so far) with a heartbeat, through a :class:`LiveRegistry`: in the process (a dict) and across processes
(the store's ``live_runs`` table, which the CLI and dashboard read from the same database). Live state is
never a durable fact: it is not hashed, not in the ledger, and lost on restart by design.

Merge rule (:func:`merge`, seed 002 "durable outranks live"):

* a run whose durable snapshot is ``terminal`` stays exactly as the ledger says; a lagging live record
  is ignored (and live never reports ``terminal`` itself: :meth:`LiveRegistry.publish` refuses);
* a run the ledger still holds in flight takes the larger of the durable and live ``tokens_used`` /
  ``steps_taken`` when the live heartbeat is fresh (younger than the lease), and the live ``state`` too
  unless the ledger has an event no older than that state's publication (``changed_at_ms`` before the
  run's last durable event, or in the same ms: which came first is then unknown): a durable fact outranks an older live state, and the heartbeat still counts
  for liveness, except when the ledger has since *paused* the run (an ``abort`` fences the writer off; it
  may heartbeat on while a tool of its finishes): a record older than the pause is not shown as live;
* everything else (ids, parent, source, refs, budgets configured, terminal summary) is durable only.

Abandoned runs: a run is *abandoned* when the ledger holds it in a state that needs a process driving it
(``initializing``, ``running``, ``waiting_model``, ``waiting_tool``, ``stopping``) and neither a live
heartbeat nor a durable event is younger than the lease (default 30 s). ``queued``, ``waiting_input`` and
``paused`` runs need no process (a suspended run is resumed later by attaching), so they are never
abandoned. The snapshot keeps the ledger's state, because no owner recorded an end and a terminal outcome
would be invented; the flag travels beside it in :class:`RunView` (``runs --abandoned`` lists them, the
table shows ``abandoned``). ``runs --json`` stays the seed wire format.

Two liveness rules. Display (:func:`merge`, :func:`is_abandoned`: ``live``/``abandoned`` in ``runs``,
``pending`` and the dashboard) compares a heartbeat, stamped by its writer's wall clock, with the reader's
wall clock: across hosts whose clocks differ by more than the lease it shows a live run abandoned, or a dead
one live for the skew longer. Safety (:func:`other_holder`, before a resume settles an effect another
process may still be running) compares no clocks: :class:`HolderWatch` takes a record for gone only once
this process has watched it unchanged for a lease on its own monotonic clock (on this host a record whose
pid no longer exists is gone at once).

:func:`follow_events` is the read side of ``flightlog tail``: it polls the ``events`` table by seq from any
process, so it sees events as soon as they are durable.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

from .encoding import decode_stored
from .events import SessionEvent
from .runs.adapters import STATUS_OUTCOMES
from .runs.host import host_id, pid_exists
from .runs.model import AgentRunSnapshot, RunSource, RunState
from .runs.projection import RunEntry, Undecodable, parse_wires, run_entries
from .store.base import LiveRunRecord, Store, StoredEvent

__all__ = [
    "DEFAULT_LEASE_MS",
    "DRIVEN_STATES",
    "HolderWatch",
    "LiveRegistry",
    "LiveRunRecord",
    "RunView",
    "ends_session",
    "follow_events",
    "host_id",
    "is_abandoned",
    "list_run_views",
    "list_runs_json_live",
    "live_records",
    "merge",
    "other_holder",
    "wall_ms",
    "watched_holder",
]

log = logging.getLogger("flightlog.live")

DEFAULT_LEASE_MS = 30_000
"""How long (ms) a heartbeat or a durable event keeps an in-flight run from counting as abandoned."""

DRIVEN_STATES: frozenset[RunState] = frozenset(
    {
        RunState.INITIALIZING,
        RunState.RUNNING,
        RunState.WAITING_MODEL,
        RunState.WAITING_TOOL,
        RunState.STOPPING,
    }
)
"""States that need a live process; only these can be abandoned."""

_END_CUSTOM_KINDS = frozenset({"seal", "session_sealed", "sealed"})


def wall_ms() -> int:
    """Current wall-clock time in epoch milliseconds."""
    return time.time_ns() // 1_000_000


# ─── publishing ───────────────────────────────────────────────────────────────────────────────


class LiveRegistry:
    """Where a running kernel publishes live state: this process's registry and (with a store) the
    ``live_runs`` table other processes read.

    Each record it writes names this process (``pid``), where that pid means something (``host``,
    :func:`host_id`) and this registry (``owner``, a random token drawn here): :meth:`clear` deletes a
    stored record only while it is still this registry's, so a holder fenced off and ending does not
    delete the record of the activation that took the run over.

    Args:
        store: A writable store shared with readers, or None for in-process only.
        clock: Epoch-ms clock (tests inject one).

    Attributes:
        owner: This registry's token (32 hex chars), the ``owner`` of every record it writes.

    Thread-safe.
    """

    def __init__(self, store: Store | None = None, *, clock: Callable[[], int] = wall_ms) -> None:
        self.store = store
        self.owner = secrets.token_hex(16)
        self._clock = clock
        self._lock = threading.Lock()
        self._records: dict[str, LiveRunRecord] = {}

    def publish(
        self,
        session_id: str,
        state: RunState | str,
        *,
        tokens_used: int | None = None,
        steps_taken: int | None = None,
    ) -> LiveRunRecord:
        """Publish a run's live state (and heartbeat).

        Args:
            session_id: The run (session) id.
            state: A non-terminal :class:`RunState`.
            tokens_used: Tokens spent so far (tokens), if counted; kept from the last publish when None.
            steps_taken: Model turns so far, if counted; kept from the last publish when None.

        Raises:
            ValueError: ``state`` is ``terminal`` (only the ledger ends a run) or unknown, or a count is
                negative.
        """
        value = RunState(state)
        if value.is_terminal():
            raise ValueError("live state cannot be terminal: record run_terminal in the ledger instead")
        for name, count in (("tokens_used", tokens_used), ("steps_taken", steps_taken)):
            if count is not None and count < 0:
                raise ValueError(f"{name} must be >= 0, not {count}")
        at = self._clock()
        with self._lock:
            previous = self._records.get(session_id)
            record = LiveRunRecord(
                session_id, value.value, at, at, tokens_used, steps_taken, os.getpid(), host_id(), self.owner
            )
            if previous is not None:
                record = replace(
                    record,
                    changed_at_ms=previous.changed_at_ms if previous.state == record.state else at,
                    tokens_used=previous.tokens_used if tokens_used is None else tokens_used,
                    steps_taken=previous.steps_taken if steps_taken is None else steps_taken,
                )
            self._records[session_id] = record
        self._write(record)
        return record

    def heartbeat(self, session_id: str) -> LiveRunRecord | None:
        """Refresh the heartbeat of a published run; None (nothing written) when it was never published or
        the stored record is another registry's (:meth:`heartbeat_many`)."""
        written = self.heartbeat_many([session_id])
        return written[0] if written else None

    def heartbeat_many(self, session_ids: Iterable[str]) -> list[LiveRunRecord]:
        """Refresh the heartbeats of several published runs, all at one clock reading, in one store
        transaction (one commit, where :meth:`heartbeat` commits once per run: on SQLite with
        ``synchronous=FULL`` each commit is an fsync). Runs never published are skipped; so, in the store,
        is a run whose stored record another registry has published since (the activation that took it
        over: a fenced-off holder beating on does not take its record back; its own record here is kept).
        Returns the records written (this registry's alone without a store), in the order of
        ``session_ids``.

        Raises:
            StoreError: the store refused the write (no heartbeat of this call is stored then).
        """
        at = self._clock()
        with self._lock:
            records = [
                replace(previous, heartbeat_at_ms=at)
                for previous in (self._records.get(session_id) for session_id in session_ids)
                if previous is not None
            ]
            self._records.update((record.run_id, record) for record in records)
        if self.store is None or not records:
            return records
        with self.store.transaction():
            return [record for record in records if self.store.put_live_run(record, own_only=True)]

    def clear(self, session_id: str) -> None:
        """Forget a run's live state (call when the run ends or the process leaves it): this registry's
        record, and the stored one while this registry wrote it (a record another registry has published
        since, e.g. of the resume that took the run over, stays).

        Raises:
            StoreError: the store refused the delete (this registry's in-process record is gone already).
        """
        with self._lock:
            self._records.pop(session_id, None)
        if self.store is not None:
            self.store.delete_live_run(session_id, owner=self.owner)

    def get(self, session_id: str) -> LiveRunRecord | None:
        """This process's live record of a run, or None."""
        with self._lock:
            return self._records.get(session_id)

    def records(self) -> dict[str, LiveRunRecord]:
        """A copy of this process's live records, by run id."""
        with self._lock:
            return dict(self._records)

    def reclaim(self, session_id: str, holds: Callable[[], bool]) -> LiveRunRecord | None:
        """Write this registry's record of ``session_id`` over the stored one, in one store transaction,
        when ``holds()`` (read in that transaction) says this registry's activation still holds the session
        (its authority epoch is the session's: no successor has taken it over), and log a WARNING naming the
        session and the stored record's owner and pid; the record written, else None (nothing written or
        logged: never published here, no store, or fenced off: a successor's record stays).

        For a heartbeat refused although no successor took over (the stored record was edited under its
        holder, e.g. its ``owner``): left so, the record would freeze and a resume watching it would take
        the live holder for gone (attack pass, session 19).

        Raises:
            StoreError: the store refused the read or the write.
        """
        with self._lock:
            record = self._records.get(session_id)
        if record is None or self.store is None:
            return None
        with self.store.transaction():
            if not holds():
                return None
            stored = next((r for r in self.store.live_runs() if r.run_id == session_id), None)
            self.store.put_live_run(record)
        log.warning(
            "live record of %s was changed under its holder (stored owner %s, pid %s; this holder's owner "
            "%s): heartbeat refused, record written back",
            session_id,
            stored.owner if stored is not None else None,
            stored.pid if stored is not None else None,
            self.owner,
        )
        return record

    def beat(self, session_id: str, holds: Callable[[], bool] | None) -> None:
        """One heartbeat of a background heartbeat loop (:meth:`pulse`, the kernel's
        :class:`~flightlog.kernel.holding.Hold`): :meth:`heartbeat`, and when it is refused (the stored
        record is not this registry's) and ``holds()`` says this activation still holds the session,
        :meth:`reclaim`. Never raises: a failure is logged as a WARNING (a missed beat is not fatal to the
        run; the next one retries)."""
        try:
            if self.heartbeat(session_id) is None and holds is not None:
                self.reclaim(session_id, holds)
        except Exception:
            log.warning("live heartbeat of %s failed", session_id, exc_info=True)

    @contextmanager
    def pulse(
        self, session_id: str, *, every_s: float = 5.0, holds: Callable[[], bool] | None = None
    ) -> Iterator[None]:
        """Heartbeat ``session_id`` every ``every_s`` seconds from a daemon thread while the block runs,
        then :meth:`clear` it. Publish a state first (a run never published is not heartbeated).

        ``holds``: whether this activation still holds the session (its authority epoch is current). When a
        heartbeat is refused (the stored record is not this registry's) and ``holds()`` says so, the record is
        written back with a WARNING (:meth:`reclaim`); a holder fenced off leaves its successor's record as it
        is. None: a refused heartbeat is left refused."""
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(every_s):
                self.beat(session_id, holds)

        thread = threading.Thread(target=beat, name=f"flightlog-pulse-{session_id}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            self.clear(session_id)

    def _write(self, record: LiveRunRecord) -> None:
        if self.store is not None:
            self.store.put_live_run(record)


def live_records(
    store: Store | None = None, registry: LiveRegistry | None = None
) -> dict[str, LiveRunRecord]:
    """Live records by run id from the store's table and a registry; the newest heartbeat wins."""
    merged: dict[str, LiveRunRecord] = {}
    sources = [
        *(store.live_runs() if store is not None else []),
        *(registry.records().values() if registry else []),
    ]
    for record in sources:
        current = merged.get(record.run_id)
        if current is None or record.heartbeat_at_ms >= current.heartbeat_at_ms:
            merged[record.run_id] = record
    return merged


# ─── merging ──────────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class RunView:
    """A run as a surface shows it: the merged snapshot plus liveness beside it.

    Attributes:
        snapshot: The durable snapshot, refined by fresh live state (seed 002 wire format).
        durable_state: The state the ledger says.
        live: The live record that refined it (fresh, run in flight), else None.
        abandoned: The ledger holds the run in a driven state, but nothing was heard within the lease.
        last_seen_ms: Latest of the live heartbeat and the last durable event (epoch ms), if any.
    """

    snapshot: AgentRunSnapshot
    durable_state: RunState
    live: LiveRunRecord | None
    abandoned: bool
    last_seen_ms: int | None


def _max(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def is_abandoned(state: RunState, last_seen_ms: int | None, *, now_ms: int, lease_ms: int) -> bool:
    """True when ``state`` needs a driving process and nothing was heard within ``lease_ms`` of ``now_ms``.

    A display judgement (``runs``, ``pending``, the dashboard): ``last_seen_ms`` was stamped by its
    writer's wall clock and ``now_ms`` is the reader's, so clocks skewed by more than the lease misjudge
    it. Nothing that may run an effect acts on it (a resume waits by :class:`HolderWatch`)."""
    return state in DRIVEN_STATES and (last_seen_ms is None or now_ms - last_seen_ms > lease_ms)


class HolderWatch:
    """Clock-free liveness of other activations' live records, as this process watches them: the rule
    behind every decision that may lead to running a side effect (:func:`other_holder`, used by
    :mod:`flightlog.kernel.takeover`).

    A heartbeat is stamped by its writer's wall clock; comparing it with the reader's wall clock (as
    :func:`is_abandoned` does for display) takes a live holder whose clock is a lease behind for crashed
    (its effect would run twice) and keeps a dead one whose clock is ahead alive for the skew. So here no
    wall-clock value is compared with any clock: a record counts as *gone* (:meth:`lapsed`) only once this
    watch has seen it unchanged (equal in every field: same ``owner``, same ``heartbeat_at_ms`` value, ...)
    for ``lease_ms`` on its own monotonic clock. Any change, a later or an earlier heartbeat value (the
    writer's clock may be stepped back) or another owner (another activation took the run over), means
    someone wrote it: alive, and the watch restarts from that sighting. A writer must therefore change its
    record more often than the lease (the kernel heartbeats every ``Kernel.heartbeat_s``, 5 s, against
    :data:`DEFAULT_LEASE_MS`, 30 s); one whose wall clock stands still between beats would look gone.

    The cost: a holder that died on another host is taken for gone one lease after this process first
    looked, whatever its record's age (a new watch, e.g. in a new process, starts over).

    Args:
        lease_ms: How long (ms) a record must stay unchanged under watch to count as gone.
        monotonic: The clock (seconds, monotonic) the watch measures with; tests inject one.

    Raises:
        ValueError: ``lease_ms`` is not positive.

    Not thread-safe: one watch per waiting task.
    """

    def __init__(
        self, lease_ms: int = DEFAULT_LEASE_MS, *, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        if lease_ms <= 0:
            raise ValueError(f"lease_ms must be > 0 ms, not {lease_ms}")
        self.lease_ms = lease_ms
        self._monotonic = monotonic
        self._seen: dict[str, tuple[LiveRunRecord | None, float]] = {}

    def lapsed(self, record: LiveRunRecord) -> bool:
        """Whether ``record`` is what this watch last saw of its run and has been for at least the lease
        (then its writer counts as gone); else the sighting is noted (a changed or first-seen record
        starts the watch now) and False is returned."""
        return self._lapsed(record.run_id, record)

    def lapsed_absence(self, run_id: str) -> bool:
        """Whether this watch has seen no record of ``run_id`` for at least the lease (every look since the
        first one without a record found none); else the sighting is noted and False is returned. For a
        holder the verified ledger names on another host: a record deleted under it is not taken for its
        end at once."""
        return self._lapsed(run_id, None)

    def _lapsed(self, run_id: str, record: LiveRunRecord | None) -> bool:
        now = self._monotonic()
        seen = self._seen.get(run_id)
        if seen is None or seen[0] != record:
            self._seen[run_id] = (record, now)
            return False
        return (now - seen[1]) * 1000 >= self.lease_ms


def other_holder(
    store: Store,
    session_id: str,
    own: LiveRegistry | None,
    *,
    watch: HolderWatch,
) -> LiveRunRecord | None:
    """The live record of another activation still driving ``session_id``, else None.

    Another: not written by ``own`` (this kernel's registry: its ``owner`` token). Still driving, judged
    without comparing clocks (:class:`HolderWatch`): when its ``host`` is this process's (:func:`host_id`)
    and its ``pid`` no longer exists, it is a crashed holder whose record was never cleared, gone at once;
    otherwise it drives the session until ``watch`` has seen the record unchanged for its lease. A record of
    another host has no pid check (a pid free here may be alive there, one alive here may be another
    process), nor has one that names no host (written before the store's ``LIVE_RUNS_OWNER`` migration:
    where it ran is unknown) or no pid. So a crashed holder of another host counts until watched unchanged
    for a lease: slower, never taken for crashed while it runs, whatever its clock says.

    Each call is a sighting for ``watch``: call it repeatedly (a poll) with the same watch.
    """
    record = next((r for r in store.live_runs() if r.run_id == session_id), None)
    if record is None or (own is not None and record.owner == own.owner):
        return None
    if record.host == host_id() and not _process_exists(record.pid):
        return None
    if watch.lapsed(record):
        return None
    return record


def watched_holder(
    store: Store,
    session_id: str,
    own: LiveRegistry | None,
    *,
    watch: HolderWatch,
) -> tuple[bool, LiveRunRecord | None]:
    """Whether another activation may still drive ``session_id``, judged by watching alone: for a holder the
    verified ledger names on another host, where no pid can be checked.

    Returns ``(held, record)``: the session's live record not written by ``own`` (None when there is
    none), and whether it still counts: until ``watch`` has seen it unchanged for its lease
    (:meth:`HolderWatch.lapsed`), or, with no record at all, until it has seen none for its lease
    (:meth:`HolderWatch.lapsed_absence`). Unlike :func:`other_holder` no pid or host a record names is
    believed (the record is not hashed: anyone who can write the database can forge or delete it). A record
    of ``own`` counts as no other holder.

    Each call is a sighting for ``watch``: call it repeatedly (a poll) with the same watch.
    """
    record = next((r for r in store.live_runs() if r.run_id == session_id), None)
    if record is None:
        return not watch.lapsed_absence(session_id), None
    if own is not None and record.owner == own.owner:
        return False, None
    return not watch.lapsed(record), record


def _process_exists(pid: int | None) -> bool:
    return pid is None or pid_exists(pid)


def _fresh_state(live: LiveRunRecord | None, *, now_ms: int, lease_ms: int) -> RunState | None:
    """The state a live record may refine with: fresh, and a non-terminal ``RunState`` (else None)."""
    if live is None or now_ms - live.heartbeat_at_ms > lease_ms:
        return None
    state = RunState._value2member_map_.get(live.state)
    return state if isinstance(state, RunState) and not state.is_terminal() else None


def merge(
    durable: AgentRunSnapshot,
    live: LiveRunRecord | None,
    *,
    now_ms: int,
    lease_ms: int = DEFAULT_LEASE_MS,
    last_durable_ms: int | None = None,
) -> RunView:
    """Apply the durable-outranks-live rule to one run (module docstring).

    Args:
        durable: The snapshot the ledger gives.
        live: The run's live record, if any.
        now_ms: The current epoch ms.
        lease_ms: Heartbeat lease (ms).
        last_durable_ms: ``recorded_at_ms`` of the run's last durable event, if known.

    Source: seed 002 (adapters apply the durable-outranks-live rule).
    """
    heartbeat = live.heartbeat_at_ms if live is not None else None
    last_seen = _max(heartbeat, last_durable_ms)
    if durable.state.is_terminal():
        return RunView(durable, durable.state, None, False, last_seen)
    state = _fresh_state(live, now_ms=now_ms, lease_ms=lease_ms)
    if live is None or state is None:
        abandoned = is_abandoned(durable.state, last_seen, now_ms=now_ms, lease_ms=lease_ms)
        return RunView(durable, durable.state, None, abandoned, last_seen)
    if last_durable_ms is not None and live.changed_at_ms <= last_durable_ms:
        # The ledger moved on since this live state was published; in the same ms, which came first is
        # unknown and the durable fact outranks it (seed 002).
        if durable.state is RunState.PAUSED:  # stopped since (aborted: its writer fenced off): not live
            return RunView(durable, durable.state, None, False, last_seen)
        state = durable.state
    budget = durable.budget.model_copy(
        update={
            "tokens_used": _max(durable.budget.tokens_used, live.tokens_used),
            "steps_taken": _max(durable.budget.steps_taken, live.steps_taken),
        }
    )
    merged = durable.model_copy(update={"state": state, "budget": budget})
    return RunView(merged, durable.state, live, False, last_seen)


def _entries_for(
    store: Store,
    wanted: RunState | None,
    source: RunSource | str | None,
    parent: str | None,
    limit: int | None,
    undecodable: Undecodable | None,
    driven_only: bool = False,
) -> list[RunEntry]:
    """Durable entries that may end up in ``wanted`` after merging (live never changes terminality).

    ``limit`` is applied here only when merging cannot drop a row (no in-flight state wanted);
    ``undecodable`` as :func:`~flightlog.runs.projection.run_entries` takes it. ``driven_only``: only
    entries whose durable state is one of :data:`DRIVEN_STATES`, the only ones :func:`merge` can find
    abandoned (it tests the durable state), so ``--abandoned`` and the abandoned notes read those rows
    from the index instead of parsing every run."""
    if wanted is None:
        states = None
    elif wanted.is_terminal():
        states = [RunState.TERMINAL.value]
    else:
        states, limit = [s.value for s in RunState if not s.is_terminal()], None
    if driven_only:
        states = [s.value for s in RunState if s in DRIVEN_STATES and (states is None or s.value in states)]
    source_value = None if source is None else RunSource(source).value
    return run_entries(
        store, states=states, source=source_value, parent=parent, limit=limit, undecodable=undecodable
    )


def list_run_views(
    store: Store,
    *,
    state: RunState | str | None = None,
    source: RunSource | str | None = None,
    parent: str | None = None,
    registry: LiveRegistry | None = None,
    now_ms: int | None = None,
    lease_ms: int = DEFAULT_LEASE_MS,
    abandoned_only: bool = False,
    limit: int | None = None,
    undecodable: Undecodable | None = None,
) -> list[RunView]:
    """Durable snapshots merged with live state, most recently updated first.

    Args:
        store: Any store (read-only is fine).
        state: Keep runs in this state after merging.
        source: Keep runs of this source.
        parent: Keep children of this run.
        registry: An in-process :class:`LiveRegistry` to merge besides the store's ``live_runs`` table.
        now_ms: Current epoch ms (default: the clock).
        lease_ms: Heartbeat lease (ms).
        abandoned_only: Keep abandoned runs only.
        limit: At most this many views (the most recently updated); None for all.
        undecodable: When given and the projection is missing or stale (the ledgers are folded): each
            session whose stored events do not decode is left out and added here as ``(session id, error
            naming the seq)`` (:func:`~flightlog.runs.projection.compute_runs`).

    Raises:
        ValueError: ``state`` or ``source`` is not a seed 002 value.
        EventDecodeError: the ledgers are folded, a session's events do not decode and ``undecodable``
            is None.
    """
    wanted = RunState(state) if state is not None else None
    entries = _entries_for(
        store, wanted, source, parent, None if abandoned_only else limit, undecodable, abandoned_only
    )
    lives = live_records(store, registry)
    now = wall_ms() if now_ms is None else now_ms
    snapshots = parse_wires([entry.wire for entry in entries])
    views = [
        merge(
            snapshot,
            lives.get(entry.run_id),
            now_ms=now,
            lease_ms=lease_ms,
            last_durable_ms=entry.updated_at_ms,
        )
        for snapshot, entry in zip(snapshots, entries, strict=True)
    ]
    kept = [
        view
        for view in views
        if (wanted is None or view.snapshot.state is wanted) and (view.abandoned or not abandoned_only)
    ]
    return kept[:limit]


def list_runs_json_live(
    store: Store,
    *,
    state: RunState | str | None = None,
    source: RunSource | str | None = None,
    parent: str | None = None,
    registry: LiveRegistry | None = None,
    now_ms: int | None = None,
    lease_ms: int = DEFAULT_LEASE_MS,
    limit: int | None = None,
    undecodable: Undecodable | None = None,
) -> str:
    """:func:`list_run_views` as a seed 002 JSON array; runs no live record touches pass through as stored.

    ``undecodable`` as :func:`list_run_views` takes it.

    Raises:
        ValueError: ``state`` or ``source`` is not a seed 002 value.
        EventDecodeError: the ledgers are folded, a session's events do not decode and ``undecodable``
            is None.
    """
    wanted = RunState(state) if state is not None else None
    lives = live_records(store, registry)
    now = wall_ms() if now_ms is None else now_ms
    out: list[str] = []
    for entry in _entries_for(store, wanted, source, parent, limit, undecodable):
        if limit is not None and len(out) >= limit:
            break
        live = lives.get(entry.run_id)
        if live is None or entry.state == RunState.TERMINAL.value:
            if wanted is None or entry.state == wanted.value:
                out.append(entry.wire)
            continue
        durable = AgentRunSnapshot.model_validate_json(entry.wire)
        view = merge(durable, live, now_ms=now, lease_ms=lease_ms, last_durable_ms=entry.updated_at_ms)
        if wanted is None or view.snapshot.state is wanted:
            out.append(view.snapshot.model_dump_json())
    return "[" + ",".join(out) + "]"


# ─── tail ─────────────────────────────────────────────────────────────────────────────────────


def ends_session(event: SessionEvent) -> bool:
    """True for an event after which ``tail -f`` stops: ``run_terminal`` or a ``Custom`` seal."""
    return event.kind == "run_terminal" or (
        event.kind == "custom" and getattr(event, "custom_kind", "") in _END_CUSTOM_KINDS
    )


def follow_events(
    store: Store,
    session_id: str,
    *,
    start: int = 0,
    follow: bool = False,
    poll_s: float = 0.2,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[tuple[StoredEvent, SessionEvent]]:
    """Yield a session's durable events from ``start`` on; with ``follow``, keep polling for new ones.

    Following stops after an event that ends the session (:func:`ends_session`) once nothing newer is
    stored, or when the session's status says it ended (``Recorder.finish``) and nothing new arrived;
    else it runs until the caller stops iterating (Ctrl-C). Works from any process: each poll is one
    indexed read of ``events`` by ``(session_id, seq)``.

    Raises:
        SessionNotFound: no such session.
        EventDecodeError: a stored event does not decode.
    """
    store.get_session(session_id)
    position, last = start, None
    while True:
        for row in store.read_events(session_id, start=position):
            event = decode_stored(row.event_bytes, seq=row.seq)
            position, last = row.seq + 1, event
            yield row, event
        if not follow or (last is not None and ends_session(last)):
            return
        record = store.get_session(session_id)
        if record.status in STATUS_OUTCOMES and record.head_seq < position:
            return
        sleep(poll_s)
