"""An imported session is bounded by its transcript's own clock: the seal and signed checkpoint the import
writes (at the import time, months after the run) are shown as recorded at import, outside the run's span,
and the runs list's last event is the transcript's last, not the import's (both backends)."""

from __future__ import annotations

import calendar
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flightlog.cli import app
from flightlog.store import open_store
from flightlog.web.waterfall_api import waterfall

SAMPLE = Path(__file__).parents[1] / "data" / "samples" / "claude-code" / "spotter_short.jsonl"
SESSION = "claude-code:55604662-cf2a-4331-851a-ec234028f8ca"
FIRST_MS = calendar.timegm((2026, 2, 10, 21, 11, 52, 0, 0, 0)) * 1000 + 438  # the transcript's first line
LAST_MS = calendar.timegm((2026, 2, 10, 21, 16, 12, 0, 0, 0)) * 1000 + 381  # and its last
runner = CliRunner()


@pytest.fixture(params=["sqlite", "postgres"])
def imported(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store holding the sample, imported now, signed and sealed (``--seal``: ended)."""
    from postgres.server import backend_url

    with backend_url(request.param, tmp_path / "clock.db", "import_clock") as url:
        result = runner.invoke(app, ["--db", url, "import", "--seal", str(SAMPLE)])
        assert result.exit_code == 0, result.output
        yield url


def test_the_waterfall_spans_the_transcript_and_marks_the_imports_records(imported: str) -> None:
    before = int(time.time() * 1000) - 3_600_000
    with open_store(imported, read_only=True) as store:
        picture = waterfall(store, SESSION)
    assert (picture["start_ms"], picture["end_ms"]) == (FIRST_MS, LAST_MS)  # 4 minutes, not 297 days
    sealed = [m for m in picture["marks"] if m["kind"] == "session_sealed"]
    assert len(sealed) == 1 and sealed[0]["recorded_at_import"] is True
    assert sealed[0]["at_ms"] > before and "(recorded at import, 20" in sealed[0]["label"]
    assert picture["integrity"] and all(m["recorded_at_import"] is True for m in picture["integrity"])
    assert all("recorded at import" in m["label"] for m in picture["integrity"])
    assert not any(m.get("recorded_at_import") for m in picture["marks"] if m["kind"] != "session_sealed")


def test_the_runs_lists_last_event_is_the_transcripts_last(imported: str) -> None:
    with open_store(imported, read_only=True) as store:
        (row,) = [r for r in store.query_runs() if r.run_id == SESSION]
    assert row.updated_at_ms == LAST_MS
    result = runner.invoke(app, ["--db", imported, "runs", "--rebuild"])
    assert result.exit_code == 0, result.output
    with open_store(imported, read_only=True) as store:
        (row,) = [r for r in store.query_runs() if r.run_id == SESSION]
    assert row.updated_at_ms == LAST_MS
