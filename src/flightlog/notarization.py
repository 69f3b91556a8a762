"""What the write path asks of a notary, as interfaces: the recorder signs checkpoints, seals and resumes
through these Protocols and never imports :mod:`flightlog.integrity` (which builds on the recorder).

:class:`flightlog.integrity.notary.Notary` implements :class:`Notarizer`, and its per-session state
(:class:`flightlog.integrity.signing.SessionNotary`) implements :class:`SessionSigner`; a fake behind the
same seam needs only these methods. The formats (signed checkpoints, the seal event) are described in
:mod:`flightlog.integrity.checkpoints` and :mod:`flightlog.integrity.signing`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from .errors import FlightlogError
from .ledger import CompactRange

if TYPE_CHECKING:
    from .store.base import Store

__all__ = ["SEAL_KIND", "Anchor", "Notarizer", "SessionSealed", "SessionSigner", "SignedHead"]

SEAL_KIND = "session_sealed"
"""``Custom.custom_kind`` of the close entry (reserved)."""


class SessionSealed(FlightlogError):
    """An append was attempted on a sealed (finished and signed) session; nothing was written."""

    session_id: str

    def __init__(self, *, session_id: str) -> None:
        super().__init__(f"session {session_id} is sealed; nothing written", session_id=session_id)


class SignedHead(Protocol):
    """A signed checkpoint as the recorder hands it back: the events it covers, their root, the note."""

    @property
    def size(self) -> int:
        """Events covered: seqs ``[0, size)``."""
        ...

    @property
    def root(self) -> bytes:
        """RFC 9162 root hash over them (32 bytes)."""
        ...

    @property
    def note(self) -> str:
        """The whole signed note (C2SP signed-note)."""
        ...


class SessionSigner(Protocol):
    """One session's signing state, driven by its recorder inside the append transaction."""

    sealed: bool
    """Whether the session is sealed (appends are then refused with :class:`SessionSealed`)."""

    def due(self, size: int) -> bool:
        """Whether the cadence calls for a checkpoint at ``size`` events."""
        ...

    def checkpoint(self, store: Store, tree: CompactRange, chain: str) -> SignedHead | None:
        """Sign and store a checkpoint over ``tree`` (chain head ``chain``) in the caller's transaction;
        None when the tree is empty."""
        ...

    def seal(self, store: Store) -> None:
        """Mark the session sealed (in the caller's transaction; undone if it rolls back)."""
        ...


@dataclass
class Anchor:
    """Where a resumed recorder continues: next seq, chain head, tree, and its signing state."""

    size: int
    head: str
    tree: CompactRange
    state: SessionSigner


class Notarizer(Protocol):
    """What ``Recorder.create``/``attach`` take as ``notary=``."""

    def start(self, store: Store, session_id: str) -> SessionSigner:
        """The signing state of a session about to be created.

        Raises:
            LedgerIntegrityError: a head of this session id is already retained (a rolled-back database).
        """
        ...

    def resume(self, store: Store, session_id: str, *, full: bool = True, retain: bool = True) -> Anchor:
        """Verify an existing session (in full, or from its latest signed checkpoint with ``full=False``)
        and return where to continue; ``retain=False`` for a read: nothing is written (a retained head that
        lags the database's latest checkpoint is left for a writer to retain).

        Raises:
            SessionNotFound: no such session.
            LedgerIntegrityError: empty ledger, or any divergence (names the first seq and reason).
        """
        ...
