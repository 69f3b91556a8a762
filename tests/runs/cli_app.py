"""A minimal host app mounting ``flightlog.cli.runs`` (as ``flightlog.cli.root`` does), for CliRunner and subprocesses.

Run as a script: ``python cli_app.py DB_PATH runs --json`` / ``python cli_app.py DB_PATH tail SESSION -f``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer

from flightlog.cli.runs import register
from flightlog.store import SqliteStore, Store


def make_app(db_path: Path) -> typer.Typer:
    """A typer app with ``runs`` and ``tail`` over the database at ``db_path``."""
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

    @app.callback()
    def main() -> None:
        """Test host."""

    @contextmanager
    def open_db(read_only: bool) -> Iterator[Store]:
        store = SqliteStore(db_path, read_only=read_only)
        try:
            yield store
        finally:
            store.close()

    register(app, open_db)
    return app


if __name__ == "__main__":
    make_app(Path(sys.argv[1]))(sys.argv[2:])
