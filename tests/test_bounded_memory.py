"""Verify, replay and export stream a session: their peak memory does not grow with its length (issue 19).

Each operation runs under ``tracemalloc`` on a session of N events and on one of 10N events in the same
store; the larger session's peak must stay within 1.5x (+256 KiB) of the smaller's, and far below the
session's own size. ``read_events`` pages in batches (512 rows in SQLite), so N is chosen to span
several batches on both sides. Replay's output is the transcript, which grows by nature: the sessions
here are ``run_started`` and ``custom`` events that add no message, so what is measured is the reading.
tracemalloc sees Python allocations only (not SQLite's page cache, bounded by ``cache_size``).
"""

from __future__ import annotations

import gc
import io
import os
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from flightlog.events import Custom, RunStarted
from flightlog.recorder import Recorder, verify_session
from flightlog.sessions import export_jsonl, replay_session
from flightlog.store.sqlite import SqliteStore

SMALL = 1_200
LARGE = 10 * SMALL
PAYLOAD = "x" * 900 + '\u00e9\\"\n' * 20  # ~1 KB of canonical bytes, escapes exercised


def _record(store: SqliteStore, session_id: str, events: int) -> int:
    recorder = Recorder.create(store, session_id=session_id, task="memory")
    recorder.append(RunStarted(run_id=session_id, goal="bounded memory"))
    for first in range(1, events, 500):
        recorder.append_many(
            [
                Custom(custom_kind="blob", payload={"i": i, "text": PAYLOAD})
                for i in range(first, min(first + 500, events))
            ]
        )
    return sum(len(row.event_bytes) for row in store.read_events(session_id))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SqliteStore, int]]:
    path: Path = tmp_path_factory.mktemp("memory") / "m.db"
    opened = SqliteStore(path, synchronous="NORMAL")
    _record(opened, "small", SMALL)
    large_bytes = _record(opened, "large", LARGE)
    yield opened, large_bytes
    opened.close()


def _peak(fn: Callable[[], Any]) -> int:
    """Peak traced bytes while ``fn`` runs, above what was allocated when it started."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        fn()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def _verify(decode: bool) -> Callable[[SqliteStore, str], Any]:
    def run(store: SqliteStore, sid: str) -> None:
        assert verify_session(store, sid, decode=decode).ok

    return run


def _replay(store: SqliteStore, sid: str) -> None:
    assert len(replay_session(store, sid)) == 1  # the goal; custom events add no message


def _export(store: SqliteStore, sid: str) -> None:
    with open(os.devnull, "w", encoding="utf-8") as sink:
        assert export_jsonl(store, sid, sink) == (SMALL if sid == "small" else LARGE)


@pytest.mark.parametrize(
    "operation",
    [_verify(False), _verify(True), _replay, _export],
    ids=["verify", "verify-decode", "replay", "export"],
)
def test_peak_memory_does_not_grow_with_the_session(
    store: tuple[SqliteStore, int], operation: Callable[[SqliteStore, str], Any]
) -> None:
    opened, large_bytes = store
    small = _peak(lambda: operation(opened, "small"))
    large = _peak(lambda: operation(opened, "large"))
    assert large <= 1.5 * small + 256 * 1024, (small, large)
    assert large < large_bytes / 4, (large, large_bytes)  # nowhere near holding the 12 MB session


def test_a_materialising_reader_would_fail_this_check(store: tuple[SqliteStore, int]) -> None:
    """The check can fail: reading the whole session into a list peaks at about its size, 10x the small."""
    opened, large_bytes = store

    def materialise(sid: str) -> None:
        rows = list(opened.read_events(sid))
        io.BytesIO(b"".join(row.event_bytes for row in rows))

    small = _peak(lambda: materialise("small"))
    large = _peak(lambda: materialise("large"))
    assert large > 1.5 * small + 256 * 1024 and large > large_bytes / 4
