"""``python -m flightlog``: the ``flightlog`` command (what the demo's child processes run)."""

from __future__ import annotations

from .cli import main

if __name__ == "__main__":
    main()
