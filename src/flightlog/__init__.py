"""flightlog: a durable, verifiable session kernel for LLM agents.

Every agent session is an append-only, hash-chained stream of typed events in a database; resume, replay,
audit and run views are folds over that stream. See ARCHITECTURE.md.
"""

from __future__ import annotations

# Importing the read model registers its projector, so every process that appends keeps the ``runs``
# projection current in the same transaction (flightlog.runs).
from . import runs as _runs  # noqa: F401  (import for its side effect)
from ._moved import install as _install_moved
from .errors import (
    AppendConflict,
    EffectConflict,
    EncodingError,
    EventDecodeError,
    FlightlogError,
    ImportFormatError,
    LedgerIntegrityError,
    LedgerRetired,
    ReadOnlyStore,
    RepairError,
    SessionNotFound,
    StaleWriter,
    StoreError,
    StoreUnavailable,
)
from .recorder import Recorder, verify_session
from .recorder_async import AsyncRecorder
from .store import Store, open_store

_install_moved()  # old module paths (flightlog.checkpoints, flightlog.cli_audit, ...) for one release

__version__ = "0.1.0"
"""The package version (PEP 440), as in ``pyproject.toml``."""

__all__ = [
    "AppendConflict",
    "AsyncRecorder",
    "EffectConflict",
    "EncodingError",
    "EventDecodeError",
    "FlightlogError",
    "ImportFormatError",
    "LedgerIntegrityError",
    "LedgerRetired",
    "ReadOnlyStore",
    "Recorder",
    "RepairError",
    "SessionNotFound",
    "StaleWriter",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "__version__",
    "open_store",
    "verify_session",
]
