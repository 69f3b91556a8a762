"""An import streams in bounded memory (ARCHITECTURE.md invariant 9; issue 17 item 6): the peak RSS of a
process importing a ~30 MB Claude Code transcript stays under 100 MB (it was 434 MB for 100 MB before the
importer spooled its events to disk and the recorder stopped queueing events nobody listens to)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SAMPLE = Path(__file__).parent / "data" / "samples" / "claude-code" / "spotter_tool_heavy.jsonl"

CHILD = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from flightlog.importers import import_file
    from flightlog.store import SqliteStore

    sample, folder, target = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    records = [json.loads(line) for line in sample.read_text(encoding="utf-8").splitlines() if line.strip()]
    ids = {"uuid", "parentUuid", "id", "tool_use_id", "leafUuid", "promptId", "requestId"}

    def renamed(value, suffix):
        if isinstance(value, dict):
            return {k: (f"{v}-{suffix}" if k in ids and isinstance(v, str) else renamed(v, suffix))
                    for k, v in value.items()}
        if isinstance(value, list):
            return [renamed(v, suffix) for v in value]
        return value

    source = folder / "big.jsonl"
    size = copy = 0
    with source.open("w", encoding="utf-8") as out:
        while size < target:
            for record in records:
                line = json.dumps(renamed(record, f"c{copy}"), ensure_ascii=False) + "\\n"
                out.write(line)
                size += len(line.encode("utf-8"))
            copy += 1
    with SqliteStore(folder / "db.sqlite") as store:
        result = import_file(store, source)
    # VmHWM: this process's own peak RSS (getrusage's ru_maxrss keeps the parent's across exec on Linux)
    status = Path("/proc/self/status").read_text()
    peak_mb = int(next(l for l in status.splitlines() if l.startswith("VmHWM:")).split()[1]) / 1024
    print(json.dumps({"bytes": size, "events": result.events, "peak_mb": peak_mb}))
    """
)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmHWM from Linux's /proc")
def test_importing_a_30_mb_transcript_peaks_under_100_mb(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-c", CHILD, str(SAMPLE), str(tmp_path), str(30 * 10**6)],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["bytes"] >= 30 * 10**6 and report["events"] > 25_000
    assert report["peak_mb"] < 100, report
