"""The consoles every ``flightlog`` command prints through: plain text (no markup, no highlighting, no
wrapping), and a closed stdout raised as :class:`BrokenPipeError` for the app's one handler
(``flightlog.cli.cli_errors``: exit 141, quietly) instead of rich's own ``SystemExit(1)``."""

from __future__ import annotations

import errno
import re
from collections.abc import Iterable
from typing import Any

from rich.console import Console

__all__ = ["PipeConsole", "console", "terminal_safe"]

# What a terminal acts on instead of showing: C0 controls but newline and tab (ESC starts the CSI/OSC
# sequences that recolour, clear, retitle or hyperlink a terminal), DEL, C1 controls (U+0080-U+009F: 8-bit
# CSI/OSC on some terminals), and the Unicode bidirectional controls (UAX #9 explicit embeddings, overrides
# and isolates, plus the marks) that reorder what follows them ("Trojan Source", CVE-2021-42574).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: str) -> str:
    """``text`` with every character a terminal would act on (controls other than newline and tab, C1
    controls, bidirectional overrides) shown as ``[U+XXXX]``, the notation of
    :func:`flightlog.narration.printable`. Event text is untrusted (an imported transcript, a model's reply):
    printed raw, an ``ESC [ 2 J`` in it would clear the reader's screen and a U+202E would make a line read
    backwards."""
    return _UNSAFE.sub(lambda m: f"[U+{ord(m.group()):04X}]", text)


class PipeConsole(Console):
    """A rich console that hands a broken pipe to the caller (rich's default exits 1, a "problem found")."""

    def on_broken_pipe(self) -> None:
        """Raise :class:`BrokenPipeError` (rich calls this when a write finds the reader gone)."""
        raise BrokenPipeError(errno.EPIPE, "the reader of the output went away")

    def print(self, *objects: Any, **kwargs: Any) -> None:
        """:meth:`rich.console.Console.print` with every ``str`` passed through :func:`terminal_safe`: all
        human-readable output of ``flightlog`` goes through here, so no recorded text reaches the terminal
        as a control sequence. (``--json`` output is written by :mod:`json`, which escapes controls.)"""
        super().print(*(terminal_safe(o) if isinstance(o, str) else o for o in objects), **kwargs)

    def print_lines(self, lines: Iterable[str]) -> None:
        """Each of ``lines`` as :meth:`print` prints it (through :func:`terminal_safe`, then a newline),
        written a thousand at a time: the same text, without rich's per-call rendering (at 100,000 rows,
        most of ``flightlog runs``'s time). A line holding a tab, which rich expands to spaces, and any line
        while rich buffers or records (``with console:``, ``record=True``) go through :meth:`print`."""
        if self.record or self.quiet or self.is_jupyter or self._buffer_index:
            for line in lines:
                self.print(line)
            return
        chunk: list[str] = []
        for line in lines:
            if "\t" in line:
                self._write_chunk(chunk)
                self.print(line)
                continue
            chunk.append(terminal_safe(line))
            if len(chunk) >= 1000:
                self._write_chunk(chunk)
        self._write_chunk(chunk)

    def _write_chunk(self, chunk: list[str]) -> None:
        """Write the lines of ``chunk``, each with a newline, to this console's file, and empty it; a
        reader gone is :meth:`on_broken_pipe`, as rich reports it."""
        if not chunk:
            return
        text = "\n".join(chunk) + "\n"
        chunk.clear()
        try:
            self.file.write(text)
            self.file.flush()
        except BrokenPipeError:
            self.on_broken_pipe()


def console(*, stderr: bool = False) -> PipeConsole:
    """A plain console on stdout (or stderr): markup and emoji codes off, so ``[...]`` in event text and
    ``:watch:`` in an id (``core_job:watch:…``) or a message print as is, not as markup or as ⌚."""
    return PipeConsole(stderr=stderr, highlight=False, markup=False, emoji=False, soft_wrap=True)
