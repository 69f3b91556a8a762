"""The paged runs list on SQLite (``flightlog.runs.run_page``): keyset pages, filters, both sorts."""

from __future__ import annotations

from pathlib import Path

import pytest

from flightlog.runs import run_page
from flightlog.store import SqliteStore

from .runs_page_cases import check_pages, record_runs


def test_pages_sort_and_filter(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "runs.db") as store:
        check_pages(store)


def test_a_stale_projection_pages_from_the_ledgers(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "runs.db") as store:
        record_runs(store)
        indexed = [run_page(store, text="needle"), run_page(store, state="terminal", limit=2)]
        store.set_run_projection_version(0)
        assert [run_page(store, text="needle"), run_page(store, state="terminal", limit=2)] == indexed


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"sort": "goal"}, "sort must be"),
        ({"limit": 0}, "limit must be"),
        ({"cursor": "nonsense"}, "not a runs-list cursor"),
        ({"cursor": "--5:r01"}, "not a runs-list cursor"),
        ({"cursor": "\u00b2:r01"}, "not a runs-list cursor"),  # str.isdigit's superscript two
        ({"cursor": f"{2**63}:r01"}, "out of range"),  # past SQLite INTEGER: an OverflowError in SQL
        ({"cursor": f"-{2**63 + 1}:r01"}, "out of range"),
        ({"state": "sleeping"}, "sleeping"),
    ],
)
def test_bad_requests_name_the_option(tmp_path: Path, options: dict[str, object], message: str) -> None:
    with SqliteStore(tmp_path / "runs.db") as store, pytest.raises(ValueError, match=message):
        run_page(store, **options)  # type: ignore[arg-type]
