"""Storage backends behind one contract, and ``open_store`` to pick one by URL or path.

=================================================================== ======================================================
URL or path                                                         backend
=================================================================== ======================================================
``path/to/file.db``, ``sqlite:///abs/path.db``, ``sqlite://rel.db`` ``SqliteStore`` (embedded default)
``:memory:``                                                        ``SqliteStore`` in memory (tests)
``postgresql://...`` or ``postgres://...``                          ``PostgresStore`` (many workers, many hosts; needs the
                                                                    ``postgres`` extra); ``?schema=NAME`` optional
=================================================================== ======================================================
"""

from __future__ import annotations

from pathlib import Path

from ..errors import StoreUnavailable
from .base import (
    ArtifactRecord,
    CheckpointRecord,
    EffectRecord,
    ImportRecord,
    NewEvent,
    SessionHead,
    SessionRecord,
    Store,
    StoredEvent,
)
from .sqlite import SqliteStore
from .urls import redact_url

__all__ = [
    "ArtifactRecord",
    "CheckpointRecord",
    "EffectRecord",
    "ImportRecord",
    "NewEvent",
    "SessionHead",
    "SessionRecord",
    "SqliteStore",
    "Store",
    "StoredEvent",
    "open_store",
    "redact_url",
    "sqlite_file",
]


def sqlite_file(path_or_url: str | Path) -> str | None:
    """The SQLite file (or ``:memory:``) a store path or URL opens, as :func:`open_store` reads it (a path,
    ``sqlite:///abs/path``, ``sqlite://relative/path``); None for a ``postgresql://`` URL.

    Raises:
        StoreUnavailable: another URL scheme.
    """
    text = str(path_or_url)
    if text.startswith(("postgres://", "postgresql://")):
        return None
    if text.startswith("sqlite://"):
        text = text.removeprefix("sqlite://")
        return text[1:] if text.startswith("//") else text
    if "://" in text:
        raise StoreUnavailable(url=redact_url(text), reason="unknown URL scheme (use a path or sqlite:///)")
    return text


def open_store(
    path_or_url: str | Path,
    *,
    read_only: bool = False,
    synchronous: str = "FULL",
    group_commit: bool | None = None,
) -> Store:
    """Open (creating and migrating when writable) the store at a path or URL.

    Args:
        path_or_url: A SQLite file path, ``sqlite:///abs/path``, ``sqlite://relative/path``, ``:memory:``,
            or a ``postgresql://`` URL.
        read_only: Open without write access; writes raise ``ReadOnlyStore``.
        synchronous: SQLite durability: ``FULL`` (fsync each commit, default) or ``NORMAL``; on
            PostgreSQL ``NORMAL`` turns ``synchronous_commit`` off (durable against process crashes).
        group_commit: Let transactions of several threads that end together share one commit
            (:mod:`flightlog.store.group`). None: the backend's default, on for SQLite (its one writer
            connection serialises transactions anyway, so sharing commits only saves fsyncs), off for
            PostgreSQL (pooled connections overlap their round trips, and the server already shares
            WAL flushes between concurrent commits).

    Raises:
        StoreUnavailable: unknown scheme, an unreachable server, or a file that cannot be opened.
        ImportError: a PostgreSQL URL without the ``postgres`` extra installed (the message names it).
    """
    text = str(path_or_url)
    if text.startswith(("postgres://", "postgresql://")):
        from .postgres import PostgresStore  # local: psycopg is an optional extra

        commit = "off" if synchronous.upper() == "NORMAL" else "on"
        return PostgresStore(
            text, read_only=read_only, synchronous_commit=commit, group_commit=bool(group_commit)
        )
    file = sqlite_file(text)
    text = "" if file is None else file  # None only for PostgreSQL, opened above
    if read_only and text != ":memory:" and not Path(text).exists():
        raise StoreUnavailable(url=f"sqlite:///{text}", reason="no such database file")
    return SqliteStore(
        text,
        read_only=read_only,
        synchronous=synchronous,
        group_commit=True if group_commit is None else group_commit,
    )
