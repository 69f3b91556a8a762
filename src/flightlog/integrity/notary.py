"""The notary: the signing key, the trusted keys and the retained heads a recorder signs and resumes with.

:class:`Notary` is what ``notary=`` takes everywhere (``Recorder.create``/``attach``, the kernel, the
importers, the integrations, the worker fleet); it implements :class:`flightlog.notarization.Notarizer`,
the interface the recorder is written against, so the write path never imports this package.

**Default notary.** :data:`USER_NOTARY` is the default ``notary=`` of what records sessions for the user
(``Kernel``, the integrations, ``submit``, ``Worker``, ``approve``/``deny``/``abort``): :meth:`Notary.from_env`,
what ``flightlog run`` uses; ``notary=None`` opts out.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..notarization import Anchor
from .checkpoints import Checkpoint, SignedCheckpoint
from .heads import HeadStore
from .keys import KeyManifestError, Keyring, LogSigner, TrustedKey, load_keyring, load_signer, now_ms
from .notes import sign_note
from .signing import SessionNotary, resume

if TYPE_CHECKING:
    from ..store.base import Store

__all__ = [
    "USER_NOTARY",
    "Notary",
    "UserNotary",
    "resolve_notary",
]

# ─── the notary: signing key + trusted keys + retained heads ──────────────────────────────────


@dataclass
class Notary:
    """What a recorder needs to sign checkpoints and check heads.

    Attributes:
        signer: The key that signs new checkpoints.
        keyring: The keys trusted when verifying (must trust ``signer``).
        heads: Where retained heads live.
        every: Sign at the end of an ``append_many`` once this many events are unanchored (>= 1).
        clock: Epoch-ms clock for the ``time`` line.
        index: Also append each checkpoint to the ledger-wide index log (:mod:`flightlog.integrity.indexlog`) when
            the store keeps one (default True).
    """

    signer: LogSigner
    keyring: Keyring
    heads: HeadStore
    every: int = 64
    clock: Callable[[], int] = now_ms
    index: bool = True

    def __post_init__(self) -> None:
        if self.every < 1:
            raise ValueError("every must be >= 1")
        if not self.keyring.find(self.signer.name, self.signer.key_id):
            raise KeyManifestError(path="", reason=f"signing key {self.signer.verifier} is not trusted")

    @classmethod
    def from_env(cls, *, every: int = 64, key_dir: Path | None = None) -> Notary:
        """The user's notary: :func:`~flightlog.integrity.keys.load_signer` (creating a key on first use),
        :func:`~flightlog.integrity.keys.load_keyring` and :meth:`HeadStore.default`.
        """
        signer = load_signer(key_dir)
        return cls(signer, load_keyring(key_dir), HeadStore.default(), every)

    @classmethod
    def for_signer(cls, signer: LogSigner, heads: HeadStore, *, every: int = 64) -> Notary:
        """A notary that trusts exactly its own key (tests, single-key setups)."""
        return cls(signer, Keyring([TrustedKey(signer.verifier)]), heads, every)

    def sign(self, origin: str, size: int, root: bytes, chain: str | None) -> SignedCheckpoint:
        """Sign a checkpoint over ``size`` entries with root ``root`` and chain head ``chain`` (None: no
        ``chain`` line, as for the index log).

        Raises:
            KeyManifestError: the signing key is not valid now (retired by a rotation, or not yet valid):
                refusing beats writing checkpoints that no verifier will accept.
        """
        now = self.clock()
        keys = [k for k in self.keyring.find(self.signer.name, self.signer.key_id) if k.valid_at(now)]
        if not keys:
            raise KeyManifestError(
                path="", reason=f"signing key {self.signer.verifier} is not valid at {now} ms"
            )
        checkpoint = Checkpoint.make(origin, size, root, time_ms=now, chain=chain)
        return SignedCheckpoint(checkpoint, sign_note(checkpoint.text(), self.signer), keys[0])

    def start(self, store: Store, session_id: str) -> SessionNotary:
        """The signing state of a session about to be created (:meth:`SessionNotary.for_new_session`).

        Raises:
            LedgerIntegrityError: a head of this session id is already retained (a rolled-back database).
        """
        return SessionNotary.for_new_session(store, session_id, self)

    def resume(self, store: Store, session_id: str, *, full: bool = True, retain: bool = True) -> Anchor:
        """Verify a session for resuming under this notary and return where to continue
        (:func:`flightlog.integrity.signing.resume`; raises as it does). ``retain=False`` for a read: a
        lagging retained head is not written (nothing is)."""
        return resume(store, session_id, self, full=full, retain=retain)


class UserNotary(enum.Enum):
    """Type of :data:`USER_NOTARY` (an enum so type checkers can tell it from a ``Notary`` and ``None``)."""

    USER = "user"


USER_NOTARY = UserNotary.USER
"""Default of ``notary=`` wherever flightlog records a session for you: the user's notary,
:meth:`Notary.from_env` (the log key of ``$FLIGHTLOG_LOG_KEY`` or the key directory, created on first use,
and the default retained-head directory), exactly what ``flightlog run``, ``import`` and ``worker`` use.
Pass ``notary=None`` to record an unsigned, unsealed chain instead (``verify`` then reports it as wholly
unanchored), or a :class:`Notary` of your own."""


def resolve_notary(notary: Notary | UserNotary | None) -> Notary | None:
    """The notary a ``notary=`` argument stands for: :meth:`Notary.from_env` for :data:`USER_NOTARY`.

    Raises:
        KeyManifestError: the user's key directory is unreadable or its manifest untrusted.
    """
    if isinstance(notary, UserNotary):
        return Notary.from_env()
    return notary
