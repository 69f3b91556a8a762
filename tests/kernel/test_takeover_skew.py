"""A resume never runs a side effect twice because two hosts' clocks disagree (attack pass, session 18).

A live record's heartbeat is stamped with its writer's wall clock. Judged by the reader's wall clock (``now
- heartbeat > lease``), the record of a holder whose clock is 60 s behind looked 60 s stale at once: a
resume from another host took the holder for crashed while its tool still ran, ``reconcile`` answered
``not_done`` and the effect ran twice. The other way (holder clock ahead), a truly dead holder looked fresh
for the skew plus the lease, and the resume gave up with ``HolderBusy``.

Now a record of another host counts as gone only once this process has watched it unchanged for a lease
on its own monotonic clock (:class:`flightlog.live.HolderWatch`). The holders here are real subprocesses
(``kernel.skew_agents``) writing as another host would, their registry clock 60 s off; the test waits on
states (a printed line, a logged wait, the holder's heartbeat moving on), with short leases set through
``Kernel.lease_ms`` so a dead holder costs a second.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from child_lines import read_line
from flightlog.errors import SessionBusy
from flightlog.kernel import Kernel
from flightlog.kernel.takeover import HOLDER_WAIT_LEASES, HOLDER_WAIT_LOG, HOLDER_WAIT_S
from flightlog.live import DEFAULT_LEASE_MS, HolderWatch, LiveRunRecord
from flightlog.recorder import verify_session
from flightlog.store import SqliteStore

from .helpers import customs, logged
from .skew_agents import OTHER_HOST, performed_keys, publishing_agent

TESTS = Path(__file__).parents[1]
WAIT_S = 60.0
"""Generous bound on waiting for a state another process or thread reaches (never expected to run out)."""
SKEWS = pytest.mark.parametrize("skew_ms", [-60_000, 60_000], ids=["holder_behind", "holder_ahead"])


@contextmanager
def skewed_holder(
    db: Path, performed: Path, skew_ms: int, heartbeat_s: float
) -> Iterator[subprocess.Popen[str]]:
    """The holder of session ``s`` in a subprocess (``kernel.skew_agents``), once its side effect's intent is
    durable and its tool waits for a line on stdin; killed on exit if still running."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    argv = [
        sys.executable,
        "-m",
        "kernel.skew_agents",
        str(db),
        str(performed),
        str(skew_ms),
        str(heartbeat_s),
    ]
    with subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as child:
        try:
            assert read_line(child, "the holder's tool to start") == "started\n"
            yield child
        finally:
            if child.poll() is None:
                child.kill()
            child.wait()


def _record(store: SqliteStore) -> LiveRunRecord | None:
    return next((r for r in store.live_runs() if r.run_id == "s"), None)


@SKEWS
def test_a_live_holder_of_another_host_with_a_skewed_clock_is_waited_for(
    tmp_path: Path, skew_ms: int
) -> None:
    """Before (``holder_behind``): the resume read the 60 s old heartbeat as a crash, did not wait, ran
    the effect, and the released holder ran it again."""
    db, performed, lease_ms = tmp_path / "s.db", tmp_path / "performed", 2_000
    results: dict[str, Any] = {}
    with skewed_holder(db, performed, skew_ms, heartbeat_s=0.05) as holder, SqliteStore(db) as store:
        first = _record(store)
        assert first is not None and first.host == OTHER_HOST
        kernel = Kernel(store, publishing_agent(performed, hold=False), notary=None)
        kernel.lease_ms = lease_ms
        b_done = threading.Event()

        def resume() -> None:
            try:
                results["b"] = kernel.resume_sync("s", handle_signals=False)
            except BaseException as exc:  # reported by the assertions below
                results["b"] = exc
            finally:
                b_done.set()

        with logged(HOLDER_WAIT_LOG) as waiting:
            thread = threading.Thread(target=resume)
            thread.start()
            while not (b_done.is_set() or waiting.is_set()):
                b_done.wait(0.01)
            # Keep the holder busy while its own clock moves more than a lease on: the resume watches its
            # record change all along, so it must still be waiting (a state, read from the holder's beats).
            seen = _record(store)
            deadline = time.monotonic() + WAIT_S
            while not b_done.is_set() and time.monotonic() < deadline:
                now = _record(store)
                if (
                    seen is None
                    or now is None
                    or now.heartbeat_at_ms - seen.heartbeat_at_ms > lease_ms * 5 // 4
                ):
                    break
                b_done.wait(0.02)
            waited_past_a_lease = not b_done.is_set()
            assert holder.stdin is not None
            holder.stdin.write("go\n")
            holder.stdin.flush()
            ended = read_line(holder, "the holder's run to end")
            thread.join(WAIT_S)
        assert not thread.is_alive()

        assert performed_keys(performed) == ["s:1:p1"], f"the effect ran twice: {results['b']!r}"
        assert waiting.is_set() and waited_past_a_lease  # the holder's beats kept it alive past a lease
        assert ended == "ended completed\n"  # the holder finished its own effect and run
        b = results["b"]
        # The holder's completion is the one; the resume either carried on after it or gave up waiting.
        assert isinstance(b, SessionBusy) or b.status == "completed", b
        effect = store.get_effect("s", "s:1:p1")
        assert (
            effect is not None
            and effect.status == "completed"
            and '"published"' in (effect.result_json or "")
        )
        assert all(p["outcome"] == "completed" for p in customs(store, "s", "effect_reconciled"))
        assert verify_session(store, "s").ok


@SKEWS
def test_a_dead_holder_of_another_host_is_taken_over_after_one_watched_lease(
    tmp_path: Path, skew_ms: int
) -> None:
    """The holder is killed with SIGKILL mid-tool, before its effect: its record stays, unchanged. Before
    (``holder_ahead``): its heartbeat in the future looked fresh past the wait, ``HolderBusy``; now the
    resume watches it unchanged for one lease, then reconciles (``not_done``) and runs the effect once."""
    db, performed = tmp_path / "s.db", tmp_path / "performed"
    with skewed_holder(db, performed, skew_ms, heartbeat_s=0.05) as holder:
        holder.kill()
        holder.wait()
    with SqliteStore(db) as store, logged(HOLDER_WAIT_LOG) as waiting:
        left = _record(store)
        assert left is not None and left.host == OTHER_HOST  # no one cleared it: the host's pid is not probed
        kernel = Kernel(store, publishing_agent(performed, hold=False), notary=None)
        kernel.lease_ms = 1_000  # the wait bound, two leases, leaves a lease of margin for slow polls
        result = kernel.resume_sync("s", handle_signals=False)
        assert result.status == "completed", result.detail
        assert waiting.is_set()  # it waited (the record was another host's), then took it for gone
        assert performed_keys(performed) == ["s:1:p1"]
        assert [p["outcome"] for p in customs(store, "s", "effect_reconciled")] == ["not_done"]
        assert verify_session(store, "s").ok


# ─── the watch rule ───────────────────────────────────────────────────────────────────────────


class Clock:
    """A monotonic clock the test moves (seconds)."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _beat(heartbeat_ms: int, owner: str = "a" * 32, run_id: str = "s") -> LiveRunRecord:
    return LiveRunRecord(run_id, "waiting_tool", heartbeat_ms, 0, pid=7, host=OTHER_HOST, owner=owner)


def test_a_record_is_gone_once_watched_unchanged_for_a_full_lease() -> None:
    clock = Clock()
    watch = HolderWatch(1_000, monotonic=clock)
    record = _beat(5)
    assert not watch.lapsed(record)  # first sight: the watch starts, whatever the heartbeat's wall time
    clock.now += 0.999
    assert not watch.lapsed(record)
    clock.now += 0.001
    assert watch.lapsed(record)  # a full lease unchanged, on this process's clock
    assert watch.lapsed(record)  # and stays gone while unchanged


@pytest.mark.parametrize(
    "changed",
    [_beat(6), _beat(4), _beat(5, owner="b" * 32)],
    ids=["heartbeat_later", "heartbeat_earlier", "another_owner"],
)
def test_any_change_of_the_record_restarts_the_watch(changed: LiveRunRecord) -> None:
    """A new heartbeat value (later or earlier: the writer's clock may be stepped back) or a new owner (a
    takeover by another activation) means someone wrote it: alive, watched afresh from now."""
    clock = Clock()
    watch = HolderWatch(1_000, monotonic=clock)
    assert not watch.lapsed(_beat(5))
    clock.now += 0.9
    assert not watch.lapsed(changed)
    clock.now += 0.9  # 1.8 s since the first sight, 0.9 s since the change
    assert not watch.lapsed(changed)
    clock.now += 0.1
    assert watch.lapsed(changed)


def test_the_wall_clock_values_never_decide() -> None:
    """Heartbeats an hour old or an hour ahead of any clock are judged alike: by change alone."""
    for heartbeat_ms in (0, time.time_ns() // 1_000_000 - 3_600_000, time.time_ns() // 1_000_000 + 3_600_000):
        clock = Clock()
        watch = HolderWatch(30_000, monotonic=clock)
        assert not watch.lapsed(_beat(heartbeat_ms))
        clock.now += 29.9
        assert not watch.lapsed(_beat(heartbeat_ms))
        clock.now += 0.1
        assert watch.lapsed(_beat(heartbeat_ms))


def test_runs_are_watched_apart() -> None:
    clock = Clock()
    watch = HolderWatch(1_000, monotonic=clock)
    assert not watch.lapsed(_beat(5, run_id="a"))
    clock.now += 0.6
    assert not watch.lapsed(_beat(5, run_id="b"))
    clock.now += 0.6
    assert watch.lapsed(_beat(5, run_id="a")) and not watch.lapsed(_beat(5, run_id="b"))


@pytest.mark.parametrize("lease_ms", [0, -1])
def test_a_lease_must_be_positive(lease_ms: int) -> None:
    with pytest.raises(ValueError, match=f"lease_ms must be > 0 ms, not {lease_ms}"):
        HolderWatch(lease_ms)


def test_the_wait_bound_outlasts_the_lease() -> None:
    """A dead holder of another host is found gone one lease after the first look (plus a poll pause): the
    default bound leaves as long again, so it is found before the resume gives up."""
    assert HOLDER_WAIT_S == HOLDER_WAIT_LEASES * DEFAULT_LEASE_MS / 1000 == 60.0
