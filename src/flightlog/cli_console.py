"""The consoles every ``flightlog`` command prints through: plain text (no markup, no highlighting, no
wrapping), and a closed stdout raised as :class:`BrokenPipeError` for the app's one handler
(``flightlog.cli.cli_errors``: exit 141, quietly) instead of rich's own ``SystemExit(1)``."""

from __future__ import annotations

import errno

from rich.console import Console

__all__ = ["PipeConsole", "console"]


class PipeConsole(Console):
    """A rich console that hands a broken pipe to the caller (rich's default exits 1, a "problem found")."""

    def on_broken_pipe(self) -> None:
        """Raise :class:`BrokenPipeError` (rich calls this when a write finds the reader gone)."""
        raise BrokenPipeError(errno.EPIPE, "the reader of the output went away")


def console(*, stderr: bool = False) -> Console:
    """A plain console on stdout (or stderr): markup off, so ``[...]`` in event text prints as is."""
    return PipeConsole(stderr=stderr, highlight=False, markup=False, soft_wrap=True)
