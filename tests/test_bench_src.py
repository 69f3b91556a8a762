"""A benchmark asked to measure another flightlog tree measures that tree or refuses: bench/README.md's
``--src ../other-checkout/src`` (``FLIGHTLOG_BENCH_SRC`` for ``fleet.py``) with a path that holds no
``flightlog`` package must not fall back silently to the installed one and print its figures as the other
tree's (a new user's pass of issue 19 found ``bench/ledger.py --quick --src ../other-checkout/src`` exit 0)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCRIPTS = {
    "append_instructions.py": ["--src", "{src}"],
    "ledger.py": ["--quick", "--src", "{src}"],
    "import_scaling.py": ["--json", "--quick", "--src={src}"],
    "startup.py": ["--rounds", "1", "--runs", "1", "--src", "{src}"],
    "fleet.py": ["--json", "--quick"],  # the tree comes from FLIGHTLOG_BENCH_SRC
}


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_a_src_without_flightlog_is_refused_naming_it(script: str, tmp_path: Path) -> None:
    src = tmp_path / "other-checkout" / "src"  # absent, as a mistyped path is
    args = [a.format(src=src) for a in SCRIPTS[script]]
    env = {**os.environ, "FLIGHTLOG_BENCH_SRC": str(src)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    [line] = done.stderr.strip().splitlines()
    assert str(src) in line and "no flightlog package" in line, line
    assert done.stdout == ""
