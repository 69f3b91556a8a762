"""A fleet of workers driving agent runs from one database (issue 6).

``submit`` queues a run (the session with its start recorded, status ``queued``, ``run_source`` =
``fleet``); :class:`Worker` claims runnable sessions under leases whose claims bump the authority epoch
(fencing), drives them with ``Kernel.resume``, heartbeats, and releases them at suspension or end; a
worker that dies loses its leases and another finishes its sessions. Works on PostgreSQL (``FOR UPDATE
SKIP LOCKED``, ``LISTEN/NOTIFY``) and on SQLite (``BEGIN IMMEDIATE`` claims, polling).

Modules: ``leases`` (the lease interface: the store's own lease methods), ``submit``, ``worker``.
"""

from __future__ import annotations

from .leases import Leases, leases_for
from .submit import QUEUED, submit
from .worker import Worker, WorkerStats, holder_id, record_takeover

__all__ = [
    "QUEUED",
    "Leases",
    "Worker",
    "WorkerStats",
    "holder_id",
    "leases_for",
    "record_takeover",
    "submit",
]
