"""Round trips per append on PostgreSQL (issue 19: at most 2), counted, not timed.

libpq traces every protocol message the store's one pooled connection sends; a round trip is a message the
client then waits on (``Sync`` ends an extended-protocol batch or pipeline, ``Query`` is a simple query).
The usual append sends two: ``BEGIN`` with the one-statement check-and-insert (the head it locked comes
back), then the deferred runs-row compare-and-set, the retirement check, ``NOTIFY`` and ``COMMIT``.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from psycopg import pq

from flightlog import events as ev
from flightlog.errors import AppendConflict, StaleWriter
from flightlog.recorder import Recorder
from flightlog.runs import list_runs, projection_ready
from flightlog.store.base import NewEvent, SessionHead
from flightlog.store.postgres import PostgresStore


@contextlib.contextmanager
def traced(store: PostgresStore) -> Iterator[Callable[[], int]]:
    """Trace the store's single pooled connection; yields a function counting the round trips so far."""
    with tempfile.TemporaryDirectory() as tmp, (Path(tmp) / "trace").open("w") as sink:
        with store._pool.connection() as conn:
            pgconn = conn.pgconn
        pgconn.trace(sink.fileno())  # libpq writes it line-buffered
        pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)

        def count() -> int:
            sent = [line.split("\t") for line in Path(sink.name).read_text().splitlines()]
            return sum(1 for parts in sent if parts[0] == "F" and parts[2] in ("Sync", "Query"))

        try:
            yield count
        finally:
            pgconn.untrace()


def test_an_append_is_two_round_trips(open_pg: Callable[..., PostgresStore]) -> None:
    store = open_pg(min_size=1, max_size=1)
    recorder = Recorder.create(store, session_id="s1")
    recorder.append(ev.RunStarted(run_id="r1", goal="count round trips"))
    with traced(store) as round_trips:
        for turn in range(10):
            before = round_trips()
            recorder.append(ev.CheckpointTaken(turn=turn, history_len=turn))
            assert round_trips() - before <= 2, f"append {turn}: {round_trips() - before} round trips"
        recorder.append_many([ev.CheckpointTaken(turn=n, history_len=n) for n in range(5)])
        assert round_trips() <= 22
    assert store.get_session("s1").head_seq == 15
    assert projection_ready(store) and list_runs(store)[0].run_id == "s1"


def test_the_one_statement_append_refuses_as_the_shared_checks(
    open_pg: Callable[..., PostgresStore],
) -> None:
    """A stale epoch or a taken seq: the shared checks' error, nothing written, the transaction usable."""
    store = open_pg(min_size=1, max_size=1)
    recorder = Recorder.create(store, session_id="s1")
    recorder.append(ev.RunStarted(run_id="r1", goal="g"))
    rival = Recorder.attach(store, "s1")  # bumps the epoch: the first recorder is fenced
    with pytest.raises(StaleWriter):
        recorder.append(ev.CheckpointTaken(turn=1, history_len=1))
    rival.append(ev.CheckpointTaken(turn=1, history_len=1))
    stale_head = SessionHead(1, "1" * 64, rival.root)
    with store.transaction():
        with pytest.raises(AppendConflict) as conflict:
            store.append_events("s1", [NewEvent(1, "custom", b"{}", "0" * 64, "1" * 64)], stale_head)
        assert conflict.value.seq == 1
        rival.append(ev.CheckpointTaken(turn=2, history_len=2))  # the transaction goes on
    assert store.get_session("s1").head_seq == 2
    assert [(e.seq, e.kind) for e in store.read_events("s1")][1:] == [
        (1, "checkpoint_taken"),
        (2, "checkpoint_taken"),
    ]
    assert list_runs(store)[0].run_id == "s1" and projection_ready(store)
