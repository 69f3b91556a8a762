"""``bench/all.py`` merges every script's rows and names each script that gave none (issue 19); the bench
README's commands run with the repository's own ``.venv`` (no interpreter path from a development machine).

The scripts here are tiny stand-ins in a temporary directory: the real benchmarks take minutes and assert
nothing, so CI runs only the collector's behaviour, never a timing.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _bench_all() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_all", ROOT / "bench" / "all.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ROW = {
    "path": "append FULL, 1 event/txn",
    "flightlog": "2,000 events/s",
    "floor": "2,500 events/s",
    "ratio": 0.8,
    "spread": [0.78, 0.83],
    "target": ">= 0.8x",
    "met": True,
    "detail": "floor: raw",
}


@pytest.fixture
def scripts(tmp_path: Path) -> Path:
    bench = tmp_path / "bench"
    bench.mkdir()
    rows = json.dumps({"rows": [ROW]})
    (bench / "good.py").write_text(
        f"import sys\nassert sys.argv[1:] == ['--json', '--quick'], sys.argv\nprint({rows!r})\n",
        encoding="utf-8",
    )
    (bench / "crash.py").write_text("raise SystemExit(3)\n", encoding="utf-8")
    (bench / "table.py").write_text("print('a table, not JSON')\n", encoding="utf-8")
    return bench


def test_rows_of_a_script_are_collected_with_json_and_quick(scripts: Path) -> None:
    bench = _bench_all()
    rows, reason = bench.run_script("good.py", quick=True, timeout_s=60, directory=scripts)
    assert reason is None
    assert rows == [{**ROW, "script": "good.py"}]
    table = bench.render(rows, [])
    assert "append FULL, 1 event/txn" in table and "0.78-0.83x" in table and "yes" in table
    assert "met 1 of 1 rows with a target" in table


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        ("absent.py", "absent"),
        ("crash.py", "failed: exit status 3"),
        ("table.py", "failed: stdout is not one JSON object"),
    ],
)
def test_a_script_without_rows_is_named_with_the_reason(scripts: Path, script: str, reason: str) -> None:
    rows, got = _bench_all().run_script(script, quick=True, timeout_s=60, directory=scripts)
    assert rows == [] and got is not None and got.startswith(reason), got


def test_a_script_whose_peer_is_missing_is_skipped_saying_so(
    scripts: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench = _bench_all()
    monkeypatch.setitem(bench.REQUIRES, "good.py", ("no_such_peer_module_xyz",))
    rows, reason = bench.run_script("good.py", quick=True, timeout_s=60, directory=scripts)
    assert rows == [] and reason is not None
    assert reason.startswith("skipped: no_such_peer_module_xyz not installed")


def test_every_issue_script_is_known_and_the_table_lists_missing_ones() -> None:
    bench = _bench_all()
    assert {"ledger.py", "startup.py"} <= set(bench.SCRIPTS)
    assert "bench/x.py: absent" in bench.render([], ["bench/x.py: absent"])


def test_the_bench_readme_runs_every_command_with_the_repos_venv() -> None:
    text = (ROOT / "bench" / "README.md").read_text(encoding="utf-8")
    commands = re.findall(r"^`?(\S*python\S*) (bench/\S+\.py)", text, flags=re.MULTILINE)
    assert commands, "no bench command found"
    for interpreter, script in commands:
        assert interpreter == ".venv/bin/python", (interpreter, script)
        assert (ROOT / script).is_file(), script
