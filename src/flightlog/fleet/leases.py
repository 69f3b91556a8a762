"""Leases behind one interface for every backend: PostgreSQL's own, and an adapter for SQLite.

PostgreSQL keeps leases in its schema (``leases``, see :mod:`flightlog.store.postgres`) and claims with
``FOR UPDATE SKIP LOCKED``. SQLite's schema has no lease table yet: :class:`SqliteLeases` keeps one
(``fleet_leases``, created on first use, same columns) and claims inside one ``BEGIN IMMEDIATE``
transaction, which serialises claimers on the file (fine: SQLite has one writer anyway). Either way a
claim bumps the session's authority epoch in the claim's transaction: the fencing token.

Runnable (both backends): a free or expired lease, a session status in
:data:`~flightlog.store.postgres.RUNNABLE_STATUSES` (``queued``, ``running``, ``suspended``), and a head that
moved past the seq the lease was parked at (a suspended session becomes runnable again once a human's
decision is appended).
"""

from __future__ import annotations

import time
from typing import Protocol

from ..store.base import LeaseClaim, LeaseRecord, Store
from ..store.sqlite import SqliteStore

__all__ = ["RUNNABLE", "Leases", "SqliteLeases", "leases_for"]

RUNNABLE: tuple[str, ...] = ("queued", "running", "suspended")
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
    """The lease operations of ``store``: its own (PostgreSQL), or :class:`SqliteLeases` for SQLite.

    Raises:
        NotImplementedError: a backend with neither.
    """
    if type(store).claim_sessions is not Store.claim_sessions:
        return store
    if isinstance(store, SqliteStore):
        return SqliteLeases(store)
    raise NotImplementedError(f"{type(store).__name__} keeps no leases")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


_TABLE = """
CREATE TABLE IF NOT EXISTS fleet_leases (
    session_id TEXT PRIMARY KEY,
    holder TEXT,
    epoch INTEGER NOT NULL DEFAULT 0,
    expires_at_ms INTEGER NOT NULL DEFAULT 0,
    acquired_at_ms INTEGER NOT NULL DEFAULT 0,
    parked_seq INTEGER NOT NULL DEFAULT -2,
    queued_at_ms INTEGER NOT NULL
)
"""


class SqliteLeases:
    """Leases for a :class:`~flightlog.store.SqliteStore` (see the module docs).

    Uses the store's connection inside its transactions (``BEGIN IMMEDIATE``), so a claim, its epoch bump
    and the lease update commit together.
    """

    def __init__(self, store: SqliteStore) -> None:
        self.store = store
        self._ready = False

    def _ensure(self) -> None:
        if not self._ready:
            with self.store.transaction():
                self.store._execute(_TABLE)
            self._ready = True

    def open_lease(self, session_id: str) -> None:
        self._ensure()
        with self.store.transaction():
            self.store._execute(
                "INSERT OR IGNORE INTO fleet_leases (session_id, queued_at_ms) VALUES (?, ?)",
                (session_id, _now_ms()),
            )

    def get_lease(self, session_id: str) -> LeaseRecord | None:
        self._ensure()
        row = self.store._one(
            "SELECT session_id, holder, epoch, expires_at_ms, acquired_at_ms, parked_seq FROM fleet_leases "
            "WHERE session_id = ?",
            (session_id,),
        )
        return LeaseRecord(*row) if row else None

    def claim_sessions(
        self, holder: str, *, ttl_ms: int, limit: int = 1, session_id: str | None = None
    ) -> list[LeaseClaim]:
        self._ensure()
        stamp = _now_ms()
        only = " AND l.session_id = ?" if session_id is not None else ""
        params: list[object] = [stamp, *RUNNABLE]
        if session_id is not None:
            params.append(session_id)
        params.append(limit)
        claims: list[LeaseClaim] = []
        with self.store.transaction():
            rows = self.store._all(
                "SELECT l.session_id, l.holder, s.status FROM fleet_leases l JOIN sessions s "
                "ON s.session_id = l.session_id WHERE l.expires_at_ms < ? AND s.status IN (?, ?, ?) "
                f"AND s.head_seq <> l.parked_seq{only} ORDER BY l.queued_at_ms, l.session_id LIMIT ?",
                params,
            )
            for sid, previous, status in rows:
                epoch = self.store.bump_authority_epoch(sid)
                self.store._execute(
                    "UPDATE fleet_leases SET holder = ?, epoch = ?, expires_at_ms = ?, acquired_at_ms = ?, "
                    "parked_seq = -2 WHERE session_id = ?",
                    (holder, epoch, stamp + ttl_ms, stamp, sid),
                )
                claims.append(LeaseClaim(sid, epoch, previous, status))
        return claims

    def renew_lease(self, session_id: str, holder: str, *, ttl_ms: int) -> bool:
        self._ensure()
        with self.store.transaction():
            cur = self.store._execute(
                "UPDATE fleet_leases SET expires_at_ms = ? WHERE session_id = ? AND holder = ?",
                (_now_ms() + ttl_ms, session_id, holder),
            )
            return cur.rowcount > 0

    def release_lease(self, session_id: str, holder: str, *, park: bool = False) -> bool:
        self._ensure()
        with self.store.transaction():
            cur = self.store._execute(
                "UPDATE fleet_leases SET holder = NULL, expires_at_ms = 0, parked_seq = CASE WHEN ? THEN "
                "(SELECT head_seq FROM sessions WHERE session_id = ?) ELSE -2 END "
                "WHERE session_id = ? AND holder = ?",
                (park, session_id, session_id, holder),
            )
            return cur.rowcount > 0
