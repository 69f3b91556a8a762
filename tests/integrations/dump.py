"""The whole content of a SQLite database as SQL text, to show that an operation wrote nothing."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def dump(db: Path) -> list[str]:
    """Every row of every table of the database at ``db`` as SQL text (``iterdump``): the events, the
    session rows, the authority epochs, the checkpoints."""
    raw = sqlite3.connect(db)
    try:
        return list(raw.iterdump())
    finally:
        raw.close()
