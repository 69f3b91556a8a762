"""Leases behind one interface for every backend: the store's own lease methods.

Leases are part of the :class:`~flightlog.store.Store` contract: every backend keeps them in its schema
(table ``leases``, one row per fleet session: holder, epoch, expiry). PostgreSQL claims with ``FOR UPDATE
SKIP LOCKED``; SQLite claims inside one ``BEGIN IMMEDIATE`` transaction, which serialises claimers on the
file (fine: SQLite has one writer anyway). Either way a claim bumps the session's authority epoch in the
claim's transaction: the fencing token.

Runnable (every backend): a free or expired lease, a session status in :data:`RUNNABLE` (``queued``,
``running``, ``suspended``), and a head that moved past the seq the lease was parked at (a suspended session
becomes runnable again once a human's decision is appended).
"""

from __future__ import annotations

from typing import Protocol

from ..store.base import RUNNABLE_STATUSES, LeaseClaim, LeaseRecord, Store

__all__ = ["RUNNABLE", "Leases", "leases_for"]

RUNNABLE: tuple[str, ...] = RUNNABLE_STATUSES
"""Session statuses a worker may claim (see the module docs)."""


class Leases(Protocol):
    """The lease operations a fleet needs (``Store``'s lease methods, see :class:`~flightlog.store.Store`)."""

    def open_lease(self, session_id: str) -> None:
        """Make a session claimable (no-op when it has a lease)."""

    def get_lease(self, session_id: str) -> LeaseRecord | None:
        """The session's lease, or None."""

    def claim_sessions(
        self, holder: str, *, ttl_ms: int, limit: int = 1, session_id: str | None = None
    ) -> list[LeaseClaim]:
        """Claim up to ``limit`` runnable sessions for ``ttl_ms`` ms, bumping each one's epoch."""

    def renew_lease(self, session_id: str, holder: str, *, ttl_ms: int) -> bool:
        """Extend the lease; False when ``holder`` lost it."""

    def release_lease(self, session_id: str, holder: str, *, park: bool = False) -> bool:
        """Free the lease (``park``: until the head moves); False when ``holder`` lost it."""


def leases_for(store: Store) -> Leases:
    """The lease operations of ``store``: the store itself (every backend implements them).

    Kept so callers need not know that leases live on the store.
    """
    return store
