"""The store an integration was given: open already (the caller's), or a path/URL it opens and closes."""

from __future__ import annotations

import os

from ..store import open_store
from ..store.base import Store

__all__ = ["StoreHandle"]


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
