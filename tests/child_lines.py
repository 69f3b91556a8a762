"""Reading a child process's stdout line by line with an overall deadline: ``proc.stdout.readline()``
blocks for ever on a child that is stuck before it prints, which hangs the whole run instead of failing
one test."""

from __future__ import annotations

import io
import os
import select
import subprocess
import time

import pytest

LINE_WAIT_S = 60.0
"""How long :func:`read_line` waits for a line by default (a hang, not a slow machine)."""


def read_line(proc: subprocess.Popen[str], what: str, *, timeout_s: float = LINE_WAIT_S) -> str:
    """The next line ``proc`` (started with ``stdout=PIPE, text=True``) prints, newline included, as
    ``proc.stdout.readline()`` returns it ("" or the last unterminated line at end of file), waiting at most
    ``timeout_s`` seconds overall. When it does not come the test fails naming ``what`` it waited for, what
    the child printed of the line so far and whether it has exited.

    It reads the pipe's file descriptor a byte at a time (never past the newline, so a later
    ``communicate()`` or ``read()`` gets the rest); do not mix it with the stream's own reads before it,
    which may buffer what it would wait for."""
    stream = proc.stdout
    assert isinstance(stream, io.TextIOWrapper), (
        f"waiting for {what}: pid {proc.pid}'s stdout is no text pipe"
    )
    fd = stream.fileno()
    got = bytearray()
    deadline = time.monotonic() + timeout_s
    while not got.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            status = proc.poll()
            state = "still running" if status is None else f"exited with status {status}"
            pytest.fail(
                f"no line from pid {proc.pid} ({state}) within {timeout_s:g} s, waiting for {what}; "
                f"the line so far: {bytes(got)!r}"
            )
        byte = os.read(fd, 1)
        if not byte:  # end of file: the child closed its stdout (exited)
            break
        got += byte
    return got.decode(stream.encoding, stream.errors or "strict")
