"""Old import paths of the modules that moved into packages (issue 11: ``flightlog.cli``,
``flightlog.integrity``, ``flightlog.ops``), kept for one release.

``import flightlog.checkpoints`` (or ``from flightlog.keys import load_keyring``) still works: a finder on
``sys.meta_path``, installed by ``flightlog/__init__.py``, builds a module under the old name that re-exports
the public names of the module(s) it moved to, and emits a :class:`DeprecationWarning` naming
the new path. One table, so removing the old paths next release is deleting this module. Agent specs stored
in ledgers by the old demo (``flightlog.demo_kernel:demo_agent``) keep resolving the same way.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType
from typing import Any

__all__ = ["MOVED", "install"]

_INTEGRITY = ("keys", "proofs", "indexlog", "bundle", "grants", "erasure", "retirement", "audit")

MOVED: dict[str, tuple[str, ...]] = {
    **{f"flightlog.{name}": (f"flightlog.integrity.{name}",) for name in _INTEGRITY},
    "flightlog.checkpoints": (  # split in five, plus the recorder's interface and salted handles
        "flightlog.integrity.notes",
        "flightlog.integrity.checkpoints",
        "flightlog.integrity.heads",
        "flightlog.integrity.notary",
        "flightlog.integrity.signing",
        "flightlog.integrity.verify",
        "flightlog.notarization",
        "flightlog.salted",
    ),
    "flightlog.witness": ("flightlog.integrity.witness", "flightlog.integrity.witness_client"),
    "flightlog.dbcopy": ("flightlog.ops.dbcopy",),
    "flightlog.repair": ("flightlog.ops.repair",),
    **{f"flightlog.cli_{name}": (f"flightlog.cli.{name}",) for name in ("audit", "kernel", "runs", "fleet")},
    "flightlog.cli_console": ("flightlog.cli.console",),
    "flightlog.web.cli": ("flightlog.cli.ui",),
    "flightlog.demo": ("flightlog.cli.demo",),
    "flightlog.demo_kernel": ("flightlog.cli.demo_kernel",),
    "flightlog.demo_context": ("flightlog.cli.demo_context",),
}
"""Old module path -> the module(s) its public names moved to (several when a module was split)."""


class _Loader:
    """A loader by the import protocol (``create_module``/``exec_module``); not an ``importlib.abc``
    subclass, whose import (``importlib.resources`` with it) would cost every ``flightlog`` start-up ~30 ms."""

    def __init__(self, targets: Sequence[str]) -> None:
        self.targets = tuple(targets)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None  # the default: a plain module

    def exec_module(self, module: ModuleType) -> None:
        warnings.warn(
            f"{module.__name__} moved to {', '.join(self.targets)}; the old path goes away in the next "
            "release",
            DeprecationWarning,
            stacklevel=2,
        )
        exported: set[str] = set()
        for target in reversed(self.targets):  # the first target wins a name two of them define
            moved = importlib.import_module(target)
            # every public name, not only __all__: what was importable before (keys.now_ms) still is
            for name, value in vars(moved).items():
                if not name.startswith("_"):
                    setattr(module, name, value)
            exported.update(getattr(moved, "__all__", ()))
        module.__all__ = sorted(exported)  # type: ignore[attr-defined]
        module.__doc__ = f"Deprecated alias of {', '.join(self.targets)}."


class _Finder:
    """A meta path finder by the import protocol (``find_spec``), for the names in :data:`MOVED`."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        targets = MOVED.get(fullname)
        if targets is None:
            return None
        loader: Any = _Loader(targets)  # the protocol's two methods; typeshed asks for importlib.abc.Loader
        return importlib.machinery.ModuleSpec(fullname, loader)


def install() -> None:
    """Put the old-path finder on ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.append(_Finder())
