"""A benchmark asked to measure another flightlog tree measures that tree or refuses: bench/README.md's
``--src ../other-checkout/src`` (``FLIGHTLOG_BENCH_SRC`` for ``fleet.py``) with a path that holds no
``flightlog`` package must not fall back silently to the installed one and print its figures as the other
tree's (a new user's pass of issue 19 found ``bench/ledger.py --quick --src ../other-checkout/src`` exit 0)."""

from __future__ import annotations

import os
import re
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
    "queue_cold.py": ["--rounds", "1", "--src", "{src}"],
    "watch_heartbeat.py": ["--sessions", "1", "--window", "1", "--src", "{src}"],
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


def test_the_readme_names_every_script_that_takes_src() -> None:
    """bench/README.md's ``--src DIR (...)`` sentence lists every script that reads ``--src`` (imports
    ``bench/_tree.py``; ``fleet.py`` reads FLIGHTLOG_BENCH_SRC instead), and this test runs each: the
    sentence once missed ``queue_cold.py`` and ``append_instructions.py``."""
    takers = {
        path.name
        for path in (ROOT / "bench").glob("*.py")
        if re.search(r"^from _tree import", path.read_text(encoding="utf-8"), re.M)
        and path.name != "fleet.py"
    }
    readme = (ROOT / "bench" / "README.md").read_text(encoding="utf-8")
    sentence = re.search(r"`--src DIR` \(([^)]*)\)", readme)
    assert sentence is not None, "bench/README.md: no `--src DIR` (...) sentence"
    assert set(re.findall(r"`([a-z_]+\.py)`", sentence.group(1))) == takers
    assert takers <= set(SCRIPTS)
