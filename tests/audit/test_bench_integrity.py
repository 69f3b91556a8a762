"""``bench/integrity.py`` keeps running (tiny sizes): a benchmark that rots is worse than none."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "integrity.py"


def test_the_integrity_bench_runs_and_reports_every_size(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(BENCH), "--sizes", "100,300", "--rounds", "1", "--batch", "50", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)["rows"]
    assert [r["events"] for r in rows] == [100, 300]
    assert all(r["cheap_resume_ms"] > 0 and r["full_resume_mb_s"] for r in rows)
