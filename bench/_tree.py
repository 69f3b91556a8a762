"""The flightlog tree a benchmark measures: this checkout's ``src``, or another one given by ``--src DIR``
(``FLIGHTLOG_BENCH_SRC`` for ``fleet.py``) to compare trees side by side with the same harness.

A tree is put first on ``sys.path`` (``PYTHONPATH`` for a script's child processes). One without a
``flightlog`` package would not fail: Python would import the installed flightlog (the ``.venv``'s editable
install of this checkout) and the figures would be printed as the other tree's. So such a path is refused
before anything is measured: one line on stderr naming it, exit status 2 (a usage mistake).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def src_arg(argv: list[str]) -> Path | None:
    """The ``--src DIR`` / ``--src=DIR`` of ``argv`` (read before a script's flightlog imports), resolved;
    None when absent."""
    for i, arg in enumerate(argv):
        if arg == "--src" and i + 1 < len(argv):
            return Path(argv[i + 1]).resolve()
        if arg.startswith("--src="):
            return Path(arg.removeprefix("--src=")).resolve()
    return None


def checked(src: Path, how: str) -> Path:
    """``src`` when it holds the ``flightlog`` package (``src/flightlog/__init__.py``); else prints
    ``<script>: <how> <src>: no flightlog package there (...)`` on stderr and exits with status 2.

    ``how`` names where the path came from (``--src``, ``FLIGHTLOG_BENCH_SRC``)."""
    if not (src / "flightlog" / "__init__.py").is_file():
        script = Path(sys.argv[0]).name
        print(
            f"{script}: {how} {src}: no flightlog package there (no {src / 'flightlog' / '__init__.py'}); "
            "give the src directory of a flightlog checkout",
            file=sys.stderr,
        )
        raise SystemExit(2)
    return src


def measured_tree(argv: list[str]) -> Path:
    """The tree a script with a ``--src`` option measures: ``--src DIR`` checked by :func:`checked`, else
    this checkout's ``src``."""
    given = src_arg(argv)
    return ROOT / "src" if given is None else checked(given, "--src")
