"""``replay_session``'s lean read path (issue 19) gives today's transcript at every seq.

``replay_session`` reads raw ``(seq, bytes)`` pages (``Store.read_chain``) up to ``at`` and folds with a
``Rebuilder`` that keeps no ``provider_replay`` (only the messages are returned). Compared here, at every
seq of every session the importers make of the repository's samples (and before the first and past the
last), with the reference: every row from ``read_events``, decoded, fed to a ``Rebuilder`` as the kernel
builds it (``keep_replay`` on), with and without a part cap; and the same at every seq of kernel runs
that compact, page out and rewrite messages in place (``tests/kernel/context_agent.py``), whose final
replay is also the kernel's own history. The fold property is in ``tests/test_replay.py``.
"""

from __future__ import annotations

import gc
import json
import sqlite3
from pathlib import Path

import pytest

from flightlog.encoding import decode_stored
from flightlog.errors import EventDecodeError
from flightlog.events import Compressed, Custom
from flightlog.kernel import Kernel
from flightlog.kernel.state import load_state
from flightlog.messages import Message
from flightlog.recorder import Recorder
from flightlog.replay import IN_PLACE_ACTIONS, SIGNAL_MESSAGE, Rebuilder
from flightlog.sessions import archive_loader, replay_session
from flightlog.store import Store
from flightlog.store.sqlite import SqliteStore
from kernel import context_agent  # tests/kernel: the long run in a small window the context tests use


def wire(messages: list[Message]) -> str:
    return json.dumps([m.to_wire() for m in messages], sort_keys=True)


def assert_replay_matches_at_every_seq(store: Store, session_id: str, max_part_bytes: int | None) -> int:
    """Compare ``replay_session`` at every seq with the reference fold; returns the events compared."""
    reference = Rebuilder(archive_loader(store), max_part_bytes)
    before = replay_session(store, session_id, at=-1, max_part_bytes=max_part_bytes)
    assert before == reference.messages() == []
    count = 0
    for row in store.read_events(session_id):
        reference.feed(row.seq, decode_stored(row.event_bytes, seq=row.seq))
        got = replay_session(store, session_id, at=row.seq, max_part_bytes=max_part_bytes)
        want = reference.messages()
        assert got == want, f"{session_id} at seq {row.seq}"
        assert wire(got) == wire(want), f"{session_id} at seq {row.seq}"
        count += 1
    for at in (None, count, count + 10):
        assert wire(replay_session(store, session_id, at=at, max_part_bytes=max_part_bytes)) == wire(
            reference.messages()
        )
    return count


@pytest.mark.parametrize("max_part_bytes", [None, 64])
def test_every_sample_session_replays_as_before_at_every_seq(
    sample_store: SqliteStore, max_part_bytes: int | None
) -> None:
    sessions = [s.session_id for s in sample_store.list_sessions()]
    assert len(sessions) >= 8
    events = sum(assert_replay_matches_at_every_seq(sample_store, sid, max_part_bytes) for sid in sessions)
    assert events > 100


def test_an_undecodable_event_up_to_at_still_raises_naming_its_seq(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    with SqliteStore(db) as store:
        rec = Recorder.create(store, session_id="s")
        rec.append_many([Custom(custom_kind="step", payload={"i": i}) for i in range(600)])
    conn = sqlite3.connect(db)
    conn.execute("DROP TRIGGER events_no_update")
    conn.execute('UPDATE events SET event = CAST(\'{"kind":"nope"}\' AS BLOB) WHERE seq = 555')
    conn.commit()
    conn.close()
    with SqliteStore(db) as store:
        assert len(replay_session(store, "s", at=554)) == 0  # nothing past at is read or decoded
        with pytest.raises(EventDecodeError) as info:
            replay_session(store, "s")
        assert info.value.seq == 555


@pytest.mark.parametrize(("steps", "chatty", "cap"), [(40, False, None), (24, True, None), (24, True, 200)])
def test_a_compacted_kernel_run_replays_as_before_at_every_seq(
    tmp_path: Path, steps: int, chatty: bool, cap: int | None
) -> None:
    agent, _provider, _summarizer = context_agent.build(steps, chatty=chatty)
    with SqliteStore(tmp_path / "k.db") as store:
        result = Kernel(store, agent).run_sync("do all the steps")
        assert result.status == "completed", result.detail
        sid = result.session_id
        events = [decode_stored(r.event_bytes, seq=r.seq) for r in store.read_events(sid)]
        actions = {e.action for e in events if isinstance(e, Compressed)}
        assert actions - IN_PLACE_ACTIONS, "the run compacted: a summary replaced archived messages"
        assert not chatty or actions & IN_PLACE_ACTIONS, "the chatty run rewrote messages in place"
        assert assert_replay_matches_at_every_seq(store, sid, cap) > 100
        if cap is None:
            assert replay_session(store, sid) == load_state(store, sid).history()


def test_replay_runs_no_collection_and_leaves_the_collector_as_it_found_it(tmp_path: Path) -> None:
    """The fold of a whole session runs with the cyclic collector paused (``replay.collector_paused``): its
    600 kept messages (~4,800 containers) set off 8 young passes with it on (700 allocations each), and with
    it paused one, the young pass over them all once it is back on (here when the messages are listed); it
    is back on after, also when an event refuses to decode; a collector the caller turned off stays off."""
    db = tmp_path / "gc.db"
    with SqliteStore(db) as store:
        rec = Recorder.create(store, session_id="s")
        rec.append_many([Custom(custom_kind=SIGNAL_MESSAGE, payload={"text": f"t{i}"}) for i in range(600)])
    started: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started.append(info["generation"])

    with SqliteStore(db) as store:
        assert gc.isenabled()
        gc.collect()
        gc.callbacks.append(seen)
        try:
            messages = replay_session(store, "s")
        finally:
            gc.callbacks.remove(seen)
        assert len(messages) == 600 and len(started) <= 1 and gc.isenabled()
        gc.disable()
        try:
            assert len(replay_session(store, "s")) == 600
            assert not gc.isenabled()
        finally:
            gc.enable()
    conn = sqlite3.connect(db)
    conn.execute("DROP TRIGGER events_no_update")
    conn.execute('UPDATE events SET event = CAST(\'{"kind":"nope"}\' AS BLOB) WHERE seq = 7')
    conn.commit()
    conn.close()
    with SqliteStore(db) as store, pytest.raises(EventDecodeError):
        replay_session(store, "s")
    assert gc.isenabled()
