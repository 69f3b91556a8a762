"""The flightlog dashboard: ``flightlog ui`` (FastAPI + uvicorn + server-sent events, no build step).

* :mod:`~flightlog.web.app`: :func:`create_app` (routes, pages, live streams, approvals);
* :mod:`~flightlog.web.security`: the guard (host allow-list, token, same-origin, CSRF, CSP);
* :mod:`~flightlog.web.views`: what the pages show, as display-safe dicts (every ledger string made
  visible and cut; escaping is the renderer's);
* :mod:`~flightlog.web.server`: :class:`DashboardServer` (uvicorn, foreground or background thread);

The web dependencies are the ``web`` extra (``pip install 'flightlog[web]'``); importing this package does
not need them, importing its submodules does; the ``flightlog ui`` command lives in :mod:`flightlog.cli.ui`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app import create_app
    from .server import DashboardServer

__all__ = ["DashboardServer", "create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from .app import create_app

        return create_app
    if name == "DashboardServer":
        from .server import DashboardServer

        return DashboardServer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
