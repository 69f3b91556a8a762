"""flightlog: a durable, verifiable session kernel for LLM agents.

Every agent session is an append-only, hash-chained stream of typed events in a database; resume, replay,
audit and run views are folds over that stream. See ARCHITECTURE.md.

The public names below load on first use (PEP 562 ``__getattr__``): ``import flightlog`` (and therefore
any ``flightlog.*`` import, which runs this module first) costs only this module and the old-path finder,
so the ``flightlog`` command starts without the event models, the store or the recorder
(``tests/test_cli_startup.py``, ``bench/startup.py``). ``from flightlog import Recorder`` gives the same
object as ``from flightlog.recorder import Recorder``. The ``runs`` projector is registered by the recorder
itself when the first recorder of a process is made (:mod:`flightlog.recorder`), not by importing a package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._moved import install as _install_moved

if TYPE_CHECKING:
    from .errors import (
        AppendConflict,
        ArtifactIntegrityError,
        EffectConflict,
        EncodingError,
        EventDecodeError,
        FlightlogError,
        ImportFormatError,
        ItemEncodingError,
        LedgerIntegrityError,
        LedgerRetired,
        ReadOnlyStore,
        RepairError,
        SessionBusy,
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

_ERRORS = (
    "AppendConflict",
    "ArtifactIntegrityError",
    "EffectConflict",
    "EncodingError",
    "EventDecodeError",
    "FlightlogError",
    "ImportFormatError",
    "ItemEncodingError",
    "LedgerIntegrityError",
    "LedgerRetired",
    "ReadOnlyStore",
    "RepairError",
    "SessionBusy",
    "SessionNotFound",
    "StaleWriter",
    "StoreError",
    "StoreUnavailable",
)
_HOMES: dict[str, str] = {
    **dict.fromkeys(_ERRORS, ".errors"),
    "AsyncRecorder": ".recorder_async",
    "Recorder": ".recorder",
    "Store": ".store",
    "open_store": ".store",
    "verify_session": ".recorder",
}
"""Each lazily loaded public name -> the module (relative to this package) that defines it."""

__all__ = [
    "AppendConflict",
    "ArtifactIntegrityError",
    "AsyncRecorder",
    "EffectConflict",
    "EncodingError",
    "EventDecodeError",
    "FlightlogError",
    "ImportFormatError",
    "ItemEncodingError",
    "LedgerIntegrityError",
    "LedgerRetired",
    "ReadOnlyStore",
    "Recorder",
    "RepairError",
    "SessionBusy",
    "SessionNotFound",
    "StaleWriter",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "__version__",
    "open_store",
    "verify_session",
]


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first use and keep it here (PEP 562).

    Raises:
        AttributeError: ``name`` is neither a public name of the package nor one of its submodules.
    """
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'flightlog' has no attribute {name!r}")
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
