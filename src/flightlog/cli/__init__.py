"""The ``flightlog`` command line (typer): :mod:`.root` builds the app and mounts the command modules
(:mod:`.audit`, :mod:`.kernel`, :mod:`.runs`, :mod:`.fleet`, :mod:`.ui`),
which share :mod:`.options` and never import each other; :mod:`.demo` is ``flightlog demo``.

The console script ``flightlog`` runs :func:`main`.
"""

from .root import EXIT_CLOSED_PIPE, app, main

__all__ = ["EXIT_CLOSED_PIPE", "app", "main"]
