"""The ``flightlog ui`` command, mounted on the main app with :func:`register`.

Mounted by :mod:`flightlog.cli.root` (this module imports only typer and rich; the web extra,
:mod:`flightlog.web`, is imported when the command runs, so ``flightlog`` works without it)::

    from .ui import register as register_web
    register_web(app, open_db)   # open_db(read_only: bool) -> ContextManager[Store]
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Annotated

import typer

from ..errors import install_hint
from .console import console

if TYPE_CHECKING:
    from ..store.base import Store

__all__ = ["MIN_TOKEN_CHARS", "OpenDb", "register"]

OpenDb = Callable[[bool], AbstractContextManager["Store"]]
"""``open_db(read_only)``: a context manager yielding an open store, closed on exit."""

ENV_TOKEN = "FLIGHTLOG_UI_TOKEN"
MIN_TOKEN_CHARS = 8
"""Shortest access token, in characters: :data:`flightlog.web.security.MIN_TOKEN_CHARS`, repeated so ``--help``
and the check do not load the web extra (``tests/test_cli_polish.py`` checks they agree)."""
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


def register(app: typer.Typer, open_db: OpenDb) -> None:
    """Add ``ui`` to ``app``; it opens the database through ``open_db(read_only)``."""
    app.command("ui")(_ui_command(open_db))


def _ui_command(open_db: OpenDb) -> Callable[..., None]:
    def ui_cmd(
        ctx: typer.Context,
        host: Annotated[
            str, typer.Option("--host", help="Address to listen on (loopback unless you mean it).")
        ] = "127.0.0.1",
        port: Annotated[
            int, typer.Option("--port", help="Port to listen on (0: any free port).", min=0, max=65535)
        ] = 8765,
        token: Annotated[
            str | None,
            typer.Option(
                "--token",
                envvar=ENV_TOKEN,
                help=f"Access token, at least {MIN_TOKEN_CHARS} characters; prefer ${ENV_TOKEN}: a token on the "
                "command line is visible to other users (ps, /proc) and kept in shell history. Default: a new "
                "random one, printed at start.",
                show_default=False,
                show_envvar=False,
            ),
        ] = None,
    ) -> None:
        """Serve the dashboard: live runs, sessions, replay, verification and the approvals queue."""
        out = console()
        err = console(stderr=True)
        try:
            from ..web.app import create_app
            from ..web.security import new_token
            from ..web.server import DashboardServer
        except ImportError as exc:
            err.print(
                f"flightlog: error: `flightlog ui` needs the web extra ({exc.name or 'a module'} is not "
                f"installed): {install_hint('web')}"
            )
            raise typer.Exit(1) from None
        if token is not None and len(token) < MIN_TOKEN_CHARS:
            raise typer.BadParameter(
                f"must be at least {MIN_TOKEN_CHARS} characters", param_hint=f"--token / ${ENV_TOKEN}"
            )
        source = ctx.get_parameter_source("token")
        if token is not None and source is not None and source.name == "COMMANDLINE":
            err.print(
                f"flightlog: warning: --token on the command line is visible to other users of this machine "
                f"(ps, /proc) and kept in shell history; set ${ENV_TOKEN} instead"
            )
        secret = token or new_token()
        with open_db(False):  # create and migrate the database, so the read-only reader can open it
            pass
        try:
            server = DashboardServer(
                create_app(open_db, token=secret, bind_host=host, token_printed=not token),
                host=host,
                port=port,
                log_level="warning",
                configure_logging=True,
            )
        except OSError as exc:
            err.print(f"flightlog: error: cannot listen on {host}:{port}: {exc.strerror or exc}")
            raise typer.Exit(1) from None
        if host not in LOOPBACK:
            err.print(
                f"flightlog: warning: listening on {host}, not loopback: anyone who can reach it and "
                "holds the token can read every session and decide approvals (plain HTTP)"
            )
        if token:  # the operator's own token is not echoed into terminals and logs
            out.print(f"flightlog dashboard listening on {server.url}/")
            out.print(
                f"open {server.url}/?token=<your token> once (it sets a cookie); Ctrl-C stops the server"
            )
        else:
            out.print(f"flightlog dashboard listening on {server.url}/?token={secret}")
            out.print("open that URL once (it sets a cookie); Ctrl-C stops the server")
        with contextlib.suppress(KeyboardInterrupt):  # uvicorn re-raises the Ctrl-C it shut down on
            server.run()
        err.print("flightlog dashboard stopped")

    return ui_cmd
