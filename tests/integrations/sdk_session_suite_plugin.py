"""pytest plugin (``-p sdk_session_suite_plugin``) running the OpenAI Agents SDK's own session tests against
:class:`~flightlog.integrations.openai_agents.FlightlogSession`.

Loaded by ``tests/integrations/test_openai_agents_sdk_suite.py`` into a pytest subprocess whose root is the
SDK's extracted sdist (its ``pyproject.toml``, ``tests/conftest.py`` and helpers). Before the SDK's test modules
are imported it rebinds ``agents.SQLiteSession`` (the name they import) to :class:`SQLiteSession` below, a
``FlightlogSession`` with ``SQLiteSession``'s constructor; it deselects :data:`DESELECTED` by test function name
and writes a JSON report (collected, deselected, stale names, outcomes) to ``$FLIGHTLOG_SDK_SUITE_REPORT``.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
from importlib.metadata import version
from pathlib import Path
from typing import Any, NamedTuple

import agents
import agents.memory
import pytest
from packaging.version import Version

from flightlog.integrations.openai_agents import FlightlogSession

REPORT_ENV = "FLIGHTLOG_SDK_SUITE_REPORT"
"""Environment variable naming the JSON report file this plugin writes at the end of the session."""


class Deselected(NamedTuple):
    """One deselected test: ``since``, the first release checked whose session tests define it (0.13.0 to
    0.22.0 by minor release, then 0.24.0; none of these is in 0.13.0, whose 44 session tests all pass), and
    ``reason``, in short (the comment above each entry says it in full)."""

    since: str
    reason: str


# The SDK's session tests that test SQLiteSession itself, not the Session protocol, by test function name
# (tests/test_session*.py up to 0.15, tests/memory/ from 0.16). Each reason says what the test needs that a
# FlightlogSession does not have, or why flightlog must behave otherwise. A name is stale when the installed
# release is at least its `since` and defines no such test.
DESELECTED: dict[str, Deselected] = {
    # SQLiteSession keeps one sqlite3 connection per worker thread in `session._connections` (a private set,
    # closed on close(), reaped when a thread exits, retired before the next allocation). FlightlogSession
    # has one Store; the tests read and patch those private attributes and sqlite3.connect.
    "test_sqlite_session_close_closes_worker_thread_connections": Deselected(
        "0.15.0", "SQLiteSession._connections pool"
    ),
    "test_sqlite_session_reaps_connections_from_exited_worker_threads": Deselected(
        "0.24.0", "SQLiteSession._connections pool"
    ),
    "test_sqlite_session_closes_retired_connections_before_the_next_allocation": Deselected(
        "0.24.0", "_connections pool"
    ),
    "test_sqlite_session_keeps_connections_of_live_worker_threads": Deselected(
        "0.24.0", "SQLiteSession._connections pool"
    ),
    # SQLiteSession shares one threading lock per database file between instances (`_lock`,
    # `SQLiteSession._file_locks`, `_file_lock_counts`); flightlog serialises writers with the store's
    # transactions and fences older writers by authority epoch (StaleWriter) instead.
    "test_sqlite_session_file_lock_is_shared_across_instances": Deselected(
        "0.14.0", "SQLiteSession._file_locks"
    ),
    # These break SQLiteSession's own storage from outside (a second raw sqlite3 connection drops its
    # `agent_sessions`/`agent_messages` table, or `session._get_connection` is swapped for a connection whose
    # rollback or close fails) and check its rollback, `_connections` and `_quarantined_connections`.
    # FlightlogSession's atomicity (all items of one call in one transaction; a refused item writes nothing
    # and the session stays usable) is tested on its own store in tests/integrations/test_openai_agents.py.
    # Three of them also expect json.dumps's TypeError for an item holding object(): FlightlogSession raises
    # one (ItemEncodingError, a TypeError and an EncodingError naming the item), checked on its own by
    # test_openai_agents.py::test_an_item_the_sdk_cannot_serialize_is_a_type_error_naming_it. Run against
    # FlightlogSession, failed_add_items_releases_write_lock gets past that check and fails on its raw probe
    # ("no such table: agent_sessions"); the other two stop before it, at session._connections_lock.
    "test_sqlite_session_failed_add_items_releases_write_lock": Deselected(
        "0.20.0", "raw sqlite3 probe of SQLiteSession's table"
    ),
    "test_sqlite_session_failed_clear_session_rolls_back": Deselected(
        "0.20.0", "drops SQLiteSession's agent_sessions table"
    ),
    "test_sqlite_session_failed_pop_item_releases_write_lock": Deselected(
        "0.20.0", "drops SQLiteSession's agent_messages table"
    ),
    "test_sqlite_session_rollback_failure_evicts_connection": Deselected(
        "0.20.0", "SQLiteSession._get_connection patched"
    ),
    "test_sqlite_session_close_retries_quarantined_connection": Deselected(
        "0.20.0", "SQLiteSession._quarantined_connections"
    ),
    # Cancellation after the write committed propagates and the outcome stays (add, pop, clear): the rule
    # FlightlogSession follows too (_await_mutation), but the test pauses SQLiteSession's commit by swapping
    # `session._get_connection` for a sqlite3 connection of its own; FlightlogSession's version of it is
    # test_openai_agents.py::test_cancelled_mutation_still_finishes_its_write (add, pop and clear).
    "test_sqlite_session_post_commit_cancellation_propagates_after_known_outcome": Deselected(
        "0.20.0", "_get_connection patched"
    ),
    # A row of invalid JSON inserted through SQLiteSession's private `_locked_connection()` into its
    # `agent_messages` table, which SQLiteSession then skips (pop_item drops it, get_items(limit) reads past
    # it). flightlog has no such table and cannot honestly skip such a row: every stored item is a
    # hash-chained ledger row, so a row added behind the session's back breaks the chain and the session
    # refuses to open, naming the seq (test_openai_agents.py::test_a_row_inserted_behind_the_session_is_named);
    # skipping it silently would hide tampering, which is what the ledger exists to reveal.
    "test_sqlite_session_pop_item_skips_corrupt_most_recent": Deselected(
        "0.18.0", "tampered row refused, not skipped"
    ),
    "test_sqlite_session_pop_item_returns_none_after_dropping_only_corrupt_rows": Deselected(
        "0.18.0", "tampered row refused"
    ),
    "test_sqlite_session_get_items_limit_skips_corrupt_newest_rows": Deselected(
        "0.20.0", "tampered row refused, not skipped"
    ),
    "test_sqlite_session_get_items_session_settings_limit_skips_corrupt_rows": Deselected(
        "0.20.0", "tampered row refused"
    ),
}


class SQLiteSession(FlightlogSession):
    """The SDK's ``SQLiteSession`` constructor, building a :class:`FlightlogSession` on the same database path.

    ``db_path`` (``":memory:"`` by default, as in the SDK: each such session has its own in-memory store) is
    the flightlog store; ``session_settings`` as in the SDK. The two table names are SQLiteSession's own
    schema: flightlog has a fixed one, so anything but the defaults is refused (TypeError naming the field).
    """

    def __init__(
        self,
        session_id: str,
        db_path: str | Path = ":memory:",
        sessions_table: str = "agent_sessions",
        messages_table: str = "agent_messages",
        session_settings: Any = None,
    ) -> None:
        for name, value, default in (
            ("sessions_table", sessions_table, "agent_sessions"),
            ("messages_table", messages_table, "agent_messages"),
        ):
            if value != default:
                raise TypeError(f"{name}={value!r}: a FlightlogSession has no table names to choose")
        super().__init__(session_id, str(db_path), session_settings=session_settings)


def _has_pytest_asyncio() -> bool:
    try:
        import pytest_asyncio  # noqa: F401
    except ImportError:
        return False
    return True


def pytest_configure(config: pytest.Config) -> None:
    """Rebind the SDK's ``SQLiteSession`` names before any test module imports them."""
    agents.SQLiteSession = SQLiteSession  # type: ignore[misc,assignment]
    agents.memory.SQLiteSession = SQLiteSession  # type: ignore[misc,assignment]
    config.stash[_STATE] = {"collected": [], "deselected": [], "stale": [], "outcomes": {}}
    if not _has_pytest_asyncio():
        config.addinivalue_line("markers", "asyncio: run the coroutine test in a new event loop")


_STATE = pytest.StashKey[dict[str, Any]]()


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run a coroutine test in a new event loop when pytest-asyncio is not installed (the SDK's CI runs
    these with pytest-asyncio's auto mode; none of the session tests uses an async fixture, so a loop per
    test, as pytest-asyncio's function scope gives, is all they need)."""
    if _has_pytest_asyncio() or not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    names = pyfuncitem._fixtureinfo.argnames
    asyncio.run(pyfuncitem.obj(**{name: pyfuncitem.funcargs[name] for name in names}))
    return True


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect :data:`DESELECTED` by function name; remember the names the installed release should define
    (at least their ``since``) that matched no test (stale)."""
    state = config.stash[_STATE]
    kept, dropped = [], []
    for item in items:
        name = getattr(item, "originalname", item.name)
        (dropped if name in DESELECTED else kept).append(item)
    state["collected"] = [item.nodeid for item in items]
    state["deselected"] = [item.nodeid for item in dropped]
    matched = {getattr(item, "originalname", item.name) for item in dropped}
    release = Version(version("openai-agents"))
    expected = {name for name, entry in DESELECTED.items() if release >= Version(entry.since)}
    state["stale"] = sorted(expected - matched)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Record each test's outcome (a failure in setup or teardown counts as the test's outcome)."""
    state = _CONFIG[0].stash[_STATE] if _CONFIG else None
    if state is None:
        return
    if report.when == "call" or report.outcome != "passed":
        previous = state["outcomes"].get(report.nodeid)
        if previous in (None, "passed"):
            state["outcomes"][report.nodeid] = report.outcome


_CONFIG: list[pytest.Config] = []


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Keep the config for the report hook (it gets no config argument)."""
    _CONFIG.append(session.config)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Write the JSON report to ``$FLIGHTLOG_SDK_SUITE_REPORT`` when it is set."""
    target = os.environ.get(REPORT_ENV)
    if target:
        report = dict(session.config.stash[_STATE], exitstatus=int(exitstatus))
        Path(target).write_text(json.dumps(report, indent=1, sort_keys=True), encoding="utf-8")
