"""The paged runs list on PostgreSQL: the same pages, filters and sorts as on SQLite."""

from __future__ import annotations

from flightlog.store.postgres import PostgresStore
from runs.runs_page_cases import check_pages


def test_pages_sort_and_filter(pg_store: PostgresStore) -> None:
    check_pages(pg_store)
