"""A real MCP server over stdio for the capability tests (run as ``python mcp_server.py``).

Built with the official ``mcp`` SDK (``MCPServer`` in mcp 2, ``FastMCP`` in mcp 1). Tools:

* ``echo(text)``: returns ``text``.
* ``add(a, b)``: returns ``a + b``.
* ``append_note(note)``: a side effect: appends ``note`` as a line to ``$NOTES_FILE`` and returns the line
  count (the tests count lines to check exactly-once).
* ``run_shell(command)``: a tool no test agent permits (smuggling checks); it would only echo.
* ``fail()``: answers with an MCP tool error (``isError``).
* ``crash()``: the server process exits at once (a crashed server).
* ``block(note)``: starts a child process of its own (``sleep``), writes ``<server pid> <child pid>`` to
  ``$BLOCK_FILE``, waits (up to 300 s) for ``$RELEASE_FILE`` to exist, then appends ``note`` like
  ``append_note`` (a slow side effect, for the tests that kill the kernel while it runs).

Each start appends a line to ``$STARTS_FILE`` when set, so tests can count (re)starts. ``python mcp_server.py
http PORT`` serves over streamable HTTP instead (``http://127.0.0.1:PORT/mcp``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

try:
    from mcp.server.mcpserver import MCPServer as Server
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as Server  # type: ignore[no-redef]
    from mcp.server.fastmcp.exceptions import ToolError  # type: ignore[no-redef]

server = Server("flightlog-test-server")


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@server.tool()
def append_note(note: str) -> str:
    """Append a note to the notes file; returns the number of notes."""
    path = Path(os.environ["NOTES_FILE"])
    with path.open("a", encoding="utf-8") as fh:
        fh.write(note + "\n")
    return str(len(path.read_text(encoding="utf-8").splitlines()))


@server.tool()
def run_shell(command: str) -> str:
    """Run a shell command (never permitted by the tests' agents)."""
    return f"would run {command}"


@server.tool()
def fail() -> str:
    """Always fails."""
    raise ToolError("this tool always fails")


@server.tool()
def crash() -> str:
    """Exit the server process at once."""
    os._exit(3)


@server.tool()
def block(note: str) -> str:
    """Append a note once released (see the module docs)."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    Path(os.environ["BLOCK_FILE"]).write_text(f"{os.getpid()} {child.pid}", encoding="utf-8")
    release = Path(os.environ["RELEASE_FILE"])
    for _ in range(3000):
        if release.exists():
            break
        time.sleep(0.1)
    return append_note(note)


def serve_http(port: int) -> None:
    """Serve over streamable HTTP at ``http://127.0.0.1:PORT/mcp`` (uvicorn logs when it listens)."""
    try:
        server.run("streamable-http", host="127.0.0.1", port=port)
    except TypeError:  # mcp 1.x: host and port are settings
        server.settings.host, server.settings.port = "127.0.0.1", port
        server.run("streamable-http")


if __name__ == "__main__":
    starts = os.environ.get("STARTS_FILE")
    if starts:
        with open(starts, "a", encoding="utf-8") as fh:
            fh.write(f"{os.getpid()}\n")
    if sys.argv[1:2] == ["http"]:
        serve_http(int(sys.argv[2]))
    else:
        server.run()
