"""Every issue-19 benchmark in one command: one table of flightlog against its floor or peer, with ``met``.

Run ``.venv/bin/python bench/all.py [--quick] [--json] [--only ledger,startup]``.

Each script below runs in its own subprocess with this interpreter, ``--json`` (and ``--quick`` when given);
it prints on stdout ``{"rows": [...]}`` in the shared row schema (``path``, ``flightlog``, ``floor``,
``ratio``, ``spread``, ``target``, ``met``, ``detail``; progress goes to stderr, which is passed through).
The rows are merged into one table in the order of :data:`SCRIPTS`. A script that is absent, whose peer or
driver is not installed (:data:`REQUIRES`), that fails, or that prints no rows is listed under the table
with the reason, never silently dropped. Nothing asserts on timings; the exit status is 1 only when a
script that ran failed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

SCRIPTS = ("ledger.py", "startup.py", "import_scaling.py", "runs.py", "fleet.py", "langgraph.py")
"""The scripts that measure issue-19 rows, in table order."""

REQUIRES: dict[str, tuple[str, ...]] = {
    "fleet.py": ("psycopg",),
    "langgraph.py": ("langgraph",),
}
"""Modules a script needs before it can measure anything (a peer or a driver); it is skipped without them.
Peers a script can run without (eventsourcing in ``fleet.py``) are the script's to report in its rows."""

COLUMNS = ("path", "flightlog", "floor", "ratio", "spread", "target", "met")


def _missing(script: str) -> list[str]:
    return [name for name in REQUIRES.get(script, ()) if importlib.util.find_spec(name) is None]


def run_script(
    script: str, *, quick: bool, timeout_s: float, directory: Path = HERE
) -> tuple[list[dict[str, Any]], str | None]:
    """Run ``directory/script`` with ``--json``; returns its rows, and a reason when it gave none."""
    path = directory / script
    if not path.is_file():
        return [], "absent"
    missing = _missing(script)
    if missing:
        return [], f"skipped: {', '.join(missing)} not installed (pip install -e '.[bench]')"
    command = [sys.executable, str(path), "--json", *(["--quick"] if quick else [])]
    print(f"bench/all: running {' '.join(command[1:])}", file=sys.stderr, flush=True)
    started = time.perf_counter()
    try:
        done = subprocess.run(
            command, stdout=subprocess.PIPE, text=True, timeout=timeout_s, cwd=directory.parent, check=False
        )
    except subprocess.TimeoutExpired:
        return [], f"failed: no result within {timeout_s:.0f} s"
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        return [], f"failed: exit status {done.returncode} after {elapsed:.0f} s (its stderr is above)"
    try:
        rows = json.loads(done.stdout)["rows"]
    except (json.JSONDecodeError, KeyError, TypeError):
        return [], "failed: stdout is not one JSON object with a 'rows' list (does it take --json yet?)"
    if not rows:
        return [], "ran, but reported no rows"
    for row in rows:
        row.setdefault("script", script)
    return rows, None


def _ratio(row: dict[str, Any]) -> str:
    ratio = row.get("ratio")
    return "" if ratio is None else f"{ratio:.2f}x"


def _spread(row: dict[str, Any]) -> str:
    spread = row.get("spread")
    return "" if not spread else f"{spread[0]:.2f}-{spread[1]:.2f}x"


def _met(row: dict[str, Any]) -> str:
    met = row.get("met")
    return "" if met is None else ("yes" if met else "NO")


def _cells(row: dict[str, Any]) -> list[str]:
    text = [str(row.get(key, "")) for key in ("path", "flightlog", "floor", "target")]
    return [*text[:3], _ratio(row), _spread(row), text[3], _met(row)]


def render(rows: list[dict[str, Any]], notes: list[str]) -> str:
    """The merged table (one line per row, its ``detail`` under it) and the notes on scripts without rows."""
    cells = [_cells(r) for r in rows]
    widths = [max([len(h), *(len(c[i]) for c in cells)]) for i, h in enumerate(COLUMNS)]
    right = {3, 4}

    def line(values: list[str] | tuple[str, ...]) -> str:
        return "  ".join(
            v.rjust(w) if i in right else v.ljust(w)
            for i, (v, w) in enumerate(zip(values, widths, strict=True))
        )

    out = [line(COLUMNS).rstrip(), "  ".join("-" * w for w in widths)]
    for row, values in zip(rows, cells, strict=True):
        out.append(line(values).rstrip())
        if row.get("detail"):
            out.append(f"    {row['detail']}")
    met = [r.get("met") for r in rows if r.get("met") is not None]
    out.append("")
    out.append(f"met {sum(bool(m) for m in met)} of {len(met)} rows with a target")
    out.extend(notes)
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="pass --quick to every script (each < 60 s)")
    parser.add_argument("--json", action="store_true", help="print {'rows': [...], 'notes': [...]} instead")
    parser.add_argument("--only", default="", help="comma-separated script names (ledger,startup,...)")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per script (300 quick, 3600)")
    args = parser.parse_args(argv)
    wanted = [s if s.endswith(".py") else f"{s}.py" for s in filter(None, args.only.split(","))]
    unknown = sorted(set(wanted) - set(SCRIPTS))
    if unknown:
        parser.error(f"--only: unknown script(s) {', '.join(unknown)} (one of: {', '.join(SCRIPTS)})")
    timeout_s = args.timeout or (300.0 if args.quick else 3600.0)
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    failed = False
    for script in wanted or SCRIPTS:
        got, reason = run_script(script, quick=args.quick, timeout_s=timeout_s)
        rows.extend(got)
        if reason is not None:
            notes.append(f"bench/{script}: {reason}")
            failed = failed or reason.startswith("failed")
    if args.json:
        print(json.dumps({"rows": rows, "notes": notes}, indent=2))
    else:
        print(render(rows, notes))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
