"""The ``flightlog`` command line (typer): :mod:`.root` builds the app and mounts the command modules
(:mod:`.audit`, :mod:`.kernel`, :mod:`.runs`, :mod:`.fleet`, :mod:`.ui`),
which share :mod:`.options` and never import each other; :mod:`.demo` is ``flightlog demo``.

The console script ``flightlog`` runs :func:`main`. ``app`` and ``EXIT_CLOSED_PIPE`` load :mod:`.root` on
first use (PEP 562), so ``flightlog --version`` alone is answered before typer, rich and the command modules
load (issue 19: start-up).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .root import EXIT_CLOSED_PIPE, app

__all__ = ["EXIT_CLOSED_PIPE", "app", "main"]


def main() -> None:
    """Console entry point: :func:`flightlog.cli.root.main`, the whole command line.

    ``flightlog --version`` with no other argument prints ``flightlog <version>`` (what the root's eager
    ``--version`` option prints: plain text, no markup or highlighting) without loading the command line;
    a closed stdout then exits 141 quietly, as every command does. Any other argument list, ``--version``
    among others included, goes through typer.
    """
    if sys.argv[1:] == ["--version"]:
        from .. import __version__

        try:
            sys.stdout.write(f"flightlog {__version__}\n")
            sys.stdout.flush()
        except BrokenPipeError:
            import typer

            from .options import closed_pipe

            try:
                closed_pipe()
            except typer.Exit as done:  # 141, as root.main turns it into the process's exit status
                raise SystemExit(done.exit_code) from None
        return
    from .root import main as run

    run()


def __getattr__(name: str) -> Any:
    if name in ("EXIT_CLOSED_PIPE", "app"):
        from . import root

        return getattr(root, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
