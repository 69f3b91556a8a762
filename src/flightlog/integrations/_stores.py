"""The store an integration was given: open already (the caller's), or a path/URL it opens and closes; and
the verified view an integration reads a session through before its first write (:func:`read_view`)."""

from __future__ import annotations

import os

from ..errors import SessionNotFound
from ..notarization import Notarizer
from ..recorder import Recorder
from ..store import open_store
from ..store.base import Store

__all__ = ["StoreHandle", "read_view", "still_current"]


def read_view(store: Store, session_id: str, notary: Notarizer | None) -> Recorder | None:
    """A session verified for reading, or None when it does not exist. Verified as a writer's attach
    verifies it (the whole chain; with ``notary`` the signed checkpoints, seal and retained head), but
    nothing is written: no authority epoch bump (a writer of the session is not fenced off by a reader)
    and no retained head. Its ``next_seq``/``head`` are what was verified; never append through it.

    Raises:
        LedgerIntegrityError: the session diverges (names the first seq).
    """
    try:
        return Recorder.attach(store, session_id, notary=notary, take_authority=False, retain=False)
    except SessionNotFound:
        return None


def still_current(store: Store, view: Recorder) -> bool:
    """Whether the session's recorded head is still the one ``view`` verified (nobody appended since)."""
    record = store.get_session(view.session_id)
    return (record.head_seq + 1, record.head_hash) == (view.next_seq, view.head)


class StoreHandle:
    """A :class:`~flightlog.store.base.Store` given open (left open by :meth:`close`), or a path or URL for
    :func:`flightlog.open_store`, opened on first :meth:`get` and closed by :meth:`close`. Not locked: the
    integration holding it serialises its calls."""

    def __init__(self, store: Store | str | os.PathLike[str]) -> None:
        self._store: Store | None = store if isinstance(store, Store) else None
        self._location = None if isinstance(store, Store) else os.fspath(store)

    def get(self) -> Store:
        """The store, opening it on first use (``StoreUnavailable`` when it cannot be opened)."""
        if self._store is None:
            assert self._location is not None
            self._store = open_store(self._location)
        return self._store

    def close(self) -> None:
        """Close the store when this handle opened it (a later :meth:`get` opens it again)."""
        if self._location is not None and self._store is not None:
            self._store.close()
            self._store = None
