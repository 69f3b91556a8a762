"""flightlog's own long jobs recorded as runs of source ``core_job`` (seed 002 ``RunSource::CoreJob``).

``flightlog watch``, a folder ``import``, a ``verify --all`` sweep and ``db copy`` each record one session
of ``source="core_job"`` while they work, so ``flightlog runs`` and the dashboard list them beside the agent
runs they concern, through the same adapters (:mod:`flightlog.runs.adapters`: one session = one run):

* ``run_started(run_id=<session id>, goal=<what the job does>)`` when the job starts;
* ``Custom("core_job.progress", {"done", "total", "failed"})`` as it goes, at most one a second (the run's
  steps are ``done``); ``total`` is None when unknown (``watch``);
* ``Custom("core_job.summary", {...})`` then ``run_terminal(reason, turns_used=<done>, total_tokens=0)``
  (a core job spends no model tokens) and the session's status, when it ends: ``completed``, ``failed``
  (the job found problems or could not finish), ``cancelled`` (stopped by the user, e.g. Ctrl-C on
  ``watch``) or ``interrupted`` (the process died: found by the next job of the same kind, see
  :func:`close_abandoned`).

The session id is ``core_job:<job>:<12 hex>``; metadata holds ``job``, ``host`` and ``pid`` (no paths):
``host`` is :func:`flightlog.runs.host.host_id` (host name, boot id and pid namespace, the rule live records
use), where ``pid`` means something; a row written before host ids holds the bare host name.
With a notary the session is signed like any other and sealed when the job ends.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from typing import TYPE_CHECKING, Any

from ..errors import SessionNotFound
from ..events import Custom, RunStarted, RunTerminal
from ..recorder import Recorder
from .host import host_id, pid_exists

if TYPE_CHECKING:
    from ..notarization import Notarizer
    from ..store.base import Store

__all__ = ["JOB_SOURCE", "CoreJob", "close_abandoned"]

JOB_SOURCE = "core_job"
"""``SessionRecord.source`` of core job sessions (the seed 002 ``RunSource`` value)."""

_PROGRESS_EVERY_S = 1.0
_STATUS = {
    "completed": "completed",
    "failed": "failed",
    "cancelled": "cancelled",
    "interrupted": "interrupted",
}


class CoreJob:
    """One running core job and its session. Build with :meth:`start`."""

    def __init__(self, recorder: Recorder, job: str) -> None:
        self.recorder = recorder
        self.job = job
        self.done = 0
        self.failed = 0
        self.total: int | None = None
        self._last_progress = 0.0
        self.ended: str | None = None

    @classmethod
    def start(
        cls,
        store: Store,
        job: str,
        goal: str,
        *,
        notary: Notarizer | None = None,
        metadata: dict[str, Any] | None = None,
        total: int | None = None,
        started_at_ms: int | None = None,
    ) -> CoreJob:
        """Create the job's session and record its ``run_started``.

        Args:
            store: A writable store.
            job: The job's kind: ``watch``, ``import``, ``verify``, ``db_copy``.
            goal: One line saying what it does (no paths of the user's files beyond what they typed).
            notary: Sign the session (None: unsigned).
            metadata: Extra JSON-ready facts (counts, options).
            total: Items it will process, when known.
            started_at_ms: When the job started, epoch ms, for a job recorded once it is done (``db copy``
                records itself in the store that is live after the copy); None: now.

        Raises:
            StoreError: the store refused the write (read-only, retired, unavailable).
        """
        session_id = f"{JOB_SOURCE}:{job}:{uuid.uuid4().hex[:12]}"
        facts = {"job": job, "host": host_id(), "pid": os.getpid(), **(metadata or {})}
        recorder = Recorder.create(
            store,
            session_id=session_id,
            task=goal,
            source=JOB_SOURCE,
            metadata=facts,
            notary=notary,
            created_at_ms=started_at_ms,
        )
        stamps = [started_at_ms] if started_at_ms is not None else None
        recorder.append_many([RunStarted(run_id=session_id, goal=goal)], recorded_at_ms=stamps)
        created = cls(recorder, job)
        created.total = total
        return created

    @property
    def session_id(self) -> str:
        """The job's session (= run) id."""
        return self.recorder.session_id

    def advance(self, *, done: int = 1, failed: int = 0, total: int | None = None) -> None:
        """Count ``done`` items (``failed`` of them failed); records progress at most once a second."""
        self.done += done
        self.failed += failed
        self.total = total if total is not None else self.total
        now = time.monotonic()
        if now - self._last_progress >= _PROGRESS_EVERY_S:
            self._last_progress = now
            self._record_progress()

    def _record_progress(self) -> None:
        payload = {"done": self.done, "total": self.total, "failed": self.failed}
        self.recorder.append(Custom(custom_kind="core_job.progress", payload=payload))

    def finish(self, reason: str, summary: dict[str, Any] | None = None) -> None:
        """End the run: the last progress, ``core_job.summary``, ``run_terminal(reason)`` and the status
        (sealed with a notary). ``reason``: ``completed``, ``failed``, ``cancelled`` or ``interrupted``.

        Raises:
            ValueError: another reason, or the job already ended.
        """
        if reason not in _STATUS:
            raise ValueError(f"reason must be one of {', '.join(_STATUS)}, not {reason!r}")
        if self.ended is not None:
            raise ValueError(f"job {self.session_id} already ended ({self.ended})")
        self.ended = reason
        with self.recorder.atomic():
            self._record_progress()
            facts = {"done": self.done, "total": self.total, "failed": self.failed, **(summary or {})}
            self.recorder.append(Custom(custom_kind="core_job.summary", payload=facts))
            self.recorder.append(RunTerminal(reason=reason, turns_used=self.done, total_tokens=0))
            self.recorder.finish(_STATUS[reason])


def close_abandoned(store: Store, job: str, *, notary: Notarizer | None = None) -> list[str]:
    """End, as ``interrupted``, the runs of ``job`` on this host whose process is gone (killed before it
    could record its end); returns their session ids. Runs of other hosts, or of a live process, are
    left alone.

    "This host" is where a pid check by this process is true of the run's pid: its recorded ``host`` is
    this process's :func:`~flightlog.runs.host.host_id` (same host name, boot and pid namespace; a run of
    another container or boot sharing the host name is another host's), or, for a row written before host
    ids (its ``host`` a bare host name, no ``/``), this host name, as that row was judged then.

    Raises:
        StoreError: the store refused a write (read-only, retired, unavailable).
    """
    closed: list[str] = []
    here = host_id()
    legacy = socket.gethostname()
    for record in list(store.list_sessions()):
        meta = record.metadata if isinstance(record.metadata, dict) else {}
        if record.source != JOB_SOURCE or meta.get("job") != job or record.status != "running":
            continue
        pid = meta.get("pid")
        host = meta.get("host")
        ours = host == here or (isinstance(host, str) and "/" not in host and host == legacy)
        if not ours or not isinstance(pid, int) or pid_exists(pid):
            continue
        try:
            recorder = Recorder.attach(store, record.session_id, notary=notary)
        except SessionNotFound:  # pragma: no cover - listed a moment ago, sessions are never deleted
            continue
        with recorder.atomic():
            recorder.append(Custom(custom_kind="core_job.summary", payload={"abandoned_by_pid": pid}))
            recorder.append(RunTerminal(reason="interrupted", turns_used=0, total_tokens=0))
            recorder.finish("interrupted")
        closed.append(record.session_id)
    return closed
