"""The recorder: write-ahead appends, refuse-to-resume, live fan-out after commit, effects, fencing.

ARCHITECTURE.md invariants 2 (write-ahead; subscribers only after the durable write), 3 (stored bytes are
hashed), 5 (refuse, don't guess: attach names the divergent sequence), 6 (single writer: epoch fencing),
7 (exactly-once effects, ledgered in the same transaction as the effect row).
"""

from __future__ import annotations

import itertools
import math
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flightlog.encoding import canonical_bytes, canonical_json, decode_stored
from flightlog.errors import (
    AppendConflict,
    EffectConflict,
    EncodingError,
    EventDecodeError,
    LedgerIntegrityError,
    SessionBusy,
    SessionNotFound,
    StaleWriter,
    StoreError,
)
from flightlog.events import Custom, EntropySample, RunStarted, SessionEvent, ToolRequested
from flightlog.ledger import EMPTY_ROOT, GENESIS, chain_hash, leaf_hash, merkle_root
from flightlog.messages import ToolCall
from flightlog.recorder import Recorder, intent_hash, verify_session
from flightlog.store import SqliteStore, StoredEvent, open_store

SID = "sess-1"


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "flightlog.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[SqliteStore]:
    store = SqliteStore(db_path)
    yield store
    store.close()


@pytest.fixture
def recorder(store: SqliteStore) -> Recorder:
    return Recorder.create(store, session_id=SID, task="demo")


@pytest.fixture
def other_store(db_path: Path, store: SqliteStore) -> Iterator[SqliteStore]:
    """A second handle (its own connection) on the same file, e.g. another process resuming."""
    other = SqliteStore(db_path)
    yield other
    other.close()


def _event(i: int) -> Custom:
    return Custom(custom_kind="step", payload={"i": i, "text": f"step {i} 🦜\u2028"})


def _events(store: SqliteStore, session_id: str = SID) -> list[StoredEvent]:
    return list(store.read_events(session_id))


def _customs(store: SqliteStore, session_id: str = SID) -> list[tuple[str, Any]]:
    out = []
    for row in store.read_events(session_id):
        event = decode_stored(row.event_bytes, seq=row.seq)
        assert isinstance(event, Custom)
        out.append((event.custom_kind, event.payload))
    return out


def _state(recorder: Recorder) -> tuple[int, str, str, int]:
    return recorder.next_seq, recorder.head, recorder.root, recorder.epoch


# ─── create / append / append_many / record_custom / finish ───────────────────────────────
def test_create_makes_an_empty_session_at_epoch_zero(store: SqliteStore) -> None:
    recorder = Recorder.create(store, session_id="s", task="fix it", source="kernel", metadata={"k": 1})
    assert _state(recorder) == (0, GENESIS, EMPTY_ROOT, 0)
    record = store.get_session("s")
    assert (record.task, record.source, record.status, record.metadata) == (
        "fix it",
        "kernel",
        "running",
        {"k": 1},
    )
    assert (record.head_seq, record.head_hash, record.merkle_root) == (-1, GENESIS, EMPTY_ROOT)
    assert store.authority_epoch("s") == 0
    generated = Recorder.create(store)
    assert len(generated.session_id) == 32
    assert generated.session_id != Recorder.create(store).session_id


def test_create_an_existing_session_conflicts(store: SqliteStore, recorder: Recorder) -> None:
    with pytest.raises(AppendConflict):
        Recorder.create(store, session_id=SID)


def test_append_hashes_the_stored_canonical_bytes(store: SqliteStore, recorder: Recorder) -> None:
    event = RunStarted(run_id="r1", goal="ship it \u2028 🚀", criteria=["tests pass"])
    row = recorder.append(event)
    data = canonical_bytes(event)
    assert (row.session_id, row.seq, row.kind, row.event_bytes) == (SID, 0, "run_started", data)
    assert (row.prev_hash, row.hash) == (GENESIS, chain_hash(GENESIS, 0, data))
    assert _state(recorder) == (1, row.hash, merkle_root([leaf_hash(data)]).hex(), 0)
    assert _events(store) == [row]
    assert decode_stored(row.event_bytes) == event
    record = store.get_session(SID)
    assert (record.head_seq, record.head_hash, record.merkle_root) == (0, row.hash, recorder.root)


def test_append_many_links_every_row_in_one_transaction(store: SqliteStore, recorder: Recorder) -> None:
    recorder.append(_event(0))
    rows = recorder.append_many([_event(i) for i in range(1, 6)])
    assert [r.seq for r in rows] == [1, 2, 3, 4, 5]
    assert len({r.recorded_at_ms for r in rows}) == 1
    stored = _events(store)
    assert stored[1:] == rows
    for before, after in itertools.pairwise(stored):
        assert after.prev_hash == before.hash
    assert recorder.head == rows[-1].hash
    assert recorder.root == merkle_root([leaf_hash(r.event_bytes) for r in stored]).hex()
    assert verify_session(store, SID).ok
    assert recorder.append_many([]) == []
    assert recorder.next_seq == 6


def _started() -> RunStarted:
    return RunStarted(run_id="r", goal="g", criteria=[], agent_id=None, system_prompt=None)


def test_append_encoded_refuses_a_kind_its_bytes_do_not_say(store: SqliteStore, recorder: Recorder) -> None:
    """No subscriber or projector decodes these rows: the refusal is the kind check itself, up front."""
    recorder.append(_event(0))
    before = _state(recorder)
    good = (_started().kind, canonical_bytes(_started()))
    mislabelled = ("run_started", canonical_bytes(_event(1)))
    with pytest.raises(
        EventDecodeError, match=r"seq 2: kind 'run_started' given, but the bytes are a 'custom'"
    ):
        recorder.append_encoded([good, mislabelled])  # all or none: the good one is not written either
    # a custom payload holding a "kind" of its own is parsed, not trusted on a byte match
    nested = Custom(custom_kind="x", payload={"kind": "run_started"})
    with pytest.raises(
        EventDecodeError, match=r"seq 1: kind 'run_started' given, but the bytes are a 'custom'"
    ):
        recorder.append_encoded([("run_started", canonical_bytes(nested))])
    decoy = (
        b'{"a":{"kind":"run_started"},"custom_kind":"x","kind":"custom","payload":null}'  # nested one first
    )
    with pytest.raises(
        EventDecodeError, match=r"seq 1: kind 'run_started' given, but the bytes are a 'custom'"
    ):
        recorder.append_encoded([("run_started", decoy)])
    with pytest.raises(EventDecodeError, match=r"kind 'custom' given with bytes that are not JSON"):
        recorder.append_encoded([("custom", b'{"kind": custom}')])
    with pytest.raises(EventDecodeError, match=r"the bytes are no event \(no top-level string kind\)"):
        recorder.append_encoded([("custom", b"[1]")])
    assert _state(recorder) == before and len(_events(store)) == 1
    rows = recorder.append_encoded([("custom", canonical_bytes(nested)), good])
    assert [(r.seq, r.kind) for r in rows] == [(1, "custom"), (2, "run_started")]
    assert verify_session(store, SID).ok


def test_append_many_is_all_or_nothing(store: SqliteStore, recorder: Recorder) -> None:
    recorder.append(_event(0))
    before = _state(recorder)
    bad = Custom(custom_kind="bad", payload={"n": 2**60})
    with pytest.raises(EncodingError):
        recorder.append_many([_event(1), _event(2), bad, _event(3)])
    assert _state(recorder) == before
    assert [e.seq for e in _events(store)] == [0]


def test_record_custom_and_finish(store: SqliteStore, recorder: Recorder) -> None:
    row = recorder.record_custom("provider_capability_evidence", {"model": "m", "route_position": 0})
    assert row.kind == "custom"
    assert _customs(store) == [("provider_capability_evidence", {"model": "m", "route_position": 0})]
    recorder.finish("completed")
    assert store.get_session(SID).status == "completed"
    assert len(_events(store)) == 1  # the status is not a ledger row


def test_tool_requested_round_trips_through_the_ledger(store: SqliteStore, recorder: Recorder) -> None:
    event = ToolRequested(turn=3, calls=[ToolCall(id="call_1", name="grep", arguments='{"q": "\u2028"}')])
    row = recorder.append(event)
    assert decode_stored(_events(store)[0].event_bytes) == event
    assert row.kind == "tool_requested"


# ─── write-ahead ──────────────────────────────────────────────────────────────────────────
def test_failed_store_write_leaves_the_head_unchanged(
    store: SqliteStore, recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder.append_many([_event(0), _event(1)])
    before = _state(recorder)
    real = store.append_events
    calls = {"n": 0}

    def fail_once(*args: Any, **kwargs: Any) -> int:
        calls["n"] += 1
        if calls["n"] == 1:
            raise StoreError("disk I/O error (injected)")
        return real(*args, **kwargs)

    monkeypatch.setattr(store, "append_events", fail_once)
    with pytest.raises(StoreError, match="injected"):
        recorder.append(_event(2))
    assert _state(recorder) == before
    assert [e.seq for e in _events(store)] == [0, 1]
    assert store.get_session(SID).head_seq == 1

    row = recorder.append(_event(2))
    assert (row.seq, row.prev_hash) == (2, before[1])
    assert verify_session(store, SID).ok
    resumed = Recorder.attach(store, SID)
    assert (resumed.next_seq, resumed.head, resumed.root) == (3, recorder.head, recorder.root)


def test_encoding_error_writes_nothing_and_names_the_field(store: SqliteStore, recorder: Recorder) -> None:
    recorder.append(_event(0))
    before = _state(recorder)
    with pytest.raises(EncodingError) as info:
        recorder.record_custom("x", {"outer": [{"ok": 1}, {"big": 2**60}]})
    assert info.value.field == "$.payload.outer[1].big"
    assert isinstance(info.value, ValueError)
    assert _state(recorder) == before
    assert len(_events(store)) == 1


def test_nan_in_a_typed_float_field_is_refused(store: SqliteStore, recorder: Recorder) -> None:
    sample = EntropySample(
        turn=1,
        score=math.nan,
        rho=0.5,
        repeat_pressure=0.0,
        failure_rate=0.0,
        rollbacks_in_window=0,
        window_turns=4,
    )
    try:
        with pytest.raises(EncodingError) as info:
            recorder.append(sample)
        assert info.value.field == "$.score"
    finally:
        assert _events(store) == [], "a NaN sample was stored (as null) and poisons the ledger"


# ─── live subscribers ─────────────────────────────────────────────────────────────────────
def test_subscribers_hear_only_after_commit(db_path: Path, store: SqliteStore, recorder: Recorder) -> None:
    seen: list[tuple[int, bytes | None]] = []
    with open_store(db_path, read_only=True) as reader:

        def from_another_connection(row: StoredEvent, event: SessionEvent) -> None:
            found = list(reader.read_events(SID, start=row.seq, stop=row.seq + 1))
            seen.append((row.seq, found[0].event_bytes if found else None))

        recorder.subscribe(from_another_connection)
        first = recorder.append(_event(0))
        batch = recorder.append_many([_event(1), _event(2)])
    assert seen == [(r.seq, r.event_bytes) for r in [first, *batch]]


def test_subscriber_gets_the_row_and_the_event(recorder: Recorder) -> None:
    heard: list[tuple[StoredEvent, SessionEvent]] = []
    unsubscribe = recorder.subscribe(lambda row, event: heard.append((row, event)))
    row = recorder.append(_event(0))
    assert heard == [(row, _event(0))]
    unsubscribe()
    unsubscribe()  # idempotent
    recorder.append(_event(1))
    assert len(heard) == 1


def test_a_raising_subscriber_fails_the_append_after_every_subscriber_heard(
    store: SqliteStore, recorder: Recorder
) -> None:
    """A subscriber's failure is never swallowed: the events are durable and every other subscriber hears of
    each of them, then the append raises the first failure, saying where it failed and that the events are
    durable (a subscriber folding the session, as the kernel's does, must not go on without an event)."""
    heard: list[int] = []

    def broken(row: StoredEvent, event: SessionEvent) -> None:
        raise RuntimeError(f"subscriber bug at {row.seq}")

    recorder.subscribe(lambda row, event: heard.append(row.seq))
    recorder.subscribe(broken)
    recorder.subscribe(lambda row, event: heard.append(row.seq * 10))
    with pytest.raises(RuntimeError, match="subscriber bug at 0") as failed:
        recorder.append_many([_event(0), _event(1)])
    assert heard == [0, 0, 1, 10]
    assert [e.seq for e in _events(store)] == [0, 1]  # durable
    notes = failed.value.__notes__
    assert f"failed on {SID} seq 0; the event is durable" in notes[0]
    assert f"{SID} seq 1" in notes[1] and "subscriber bug at 1" in notes[1]
    recorder.subscribe(lambda row, event: None)
    with pytest.raises(RuntimeError, match="subscriber bug at 2"):
        recorder.append(_event(2))
    assert recorder.next_seq == 3  # the head moved past the durable row


# ─── atomic() ─────────────────────────────────────────────────────────────────────────────
def test_atomic_rollback_restores_head_and_drops_notifications(
    store: SqliteStore, recorder: Recorder
) -> None:
    recorder.append(_event(0))
    heard: list[int] = []
    recorder.subscribe(lambda row, event: heard.append(row.seq))
    before = _state(recorder)
    with pytest.raises(RuntimeError, match="abort turn"), recorder.atomic():
        recorder.append(_event(1))
        recorder.append_many([_event(2), _event(3)])
        store.put_artifact(b"turn artifact", "text/plain")
        assert recorder.next_seq == 4
        assert heard == []
        raise RuntimeError("abort turn")
    assert _state(recorder) == before
    assert heard == []
    assert [e.seq for e in _events(store)] == [0]
    assert store.get_artifact(canonical_sha(b"turn artifact")) is None
    assert recorder.append(_event(9)).seq == 1
    assert heard == [1]
    assert verify_session(store, SID).ok


def test_atomic_commits_and_notifies_once_at_the_end(store: SqliteStore, recorder: Recorder) -> None:
    heard: list[int] = []
    recorder.subscribe(lambda row, event: heard.append(row.seq))
    with recorder.atomic():
        recorder.append(_event(0))
        with pytest.raises(ValueError), recorder.atomic():  # an inner block fails alone
            recorder.append(_event(99))
            raise ValueError("inner")
        assert recorder.next_seq == 1
        recorder.append(_event(1))
        assert heard == []
    assert heard == [0, 1]
    assert [p["i"] for _, p in _customs(store)] == [0, 1]
    assert verify_session(store, SID).ok


def test_append_inside_an_outer_store_transaction_that_rolls_back(
    store: SqliteStore, recorder: Recorder
) -> None:
    recorder.append(_event(0))
    heard: list[int] = []
    recorder.subscribe(lambda row, event: heard.append(row.seq))
    with pytest.raises(RuntimeError), store.transaction():
        recorder.append(_event(1))
        raise RuntimeError("outer rollback")
    assert heard == [], "a subscriber heard of a row that was rolled back"
    assert recorder.next_seq == 1
    recorder.append(_event(2))
    assert verify_session(store, SID).ok


# ─── attach: refuse, don't guess ──────────────────────────────────────────────────────────
def test_attach_rebuilds_the_head_and_takes_authority(
    store: SqliteStore, other_store: SqliteStore, recorder: Recorder
) -> None:
    recorder.append_many([_event(i) for i in range(7)])
    resumed = Recorder.attach(other_store, SID)
    assert (resumed.next_seq, resumed.head, resumed.root) == (7, recorder.head, recorder.root)
    assert resumed.epoch == 1 == store.authority_epoch(SID)
    observer = Recorder.attach(other_store, SID, take_authority=False)
    assert observer.epoch == 1
    assert resumed.append(_event(7)).prev_hash == recorder.head


def test_attach_leaves_a_session_another_writer_appends_to_before_the_bump(
    store: SqliteStore, other_store: SqliteStore, recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The live writer appends after the rows were verified, right before the epoch bump: the bump and a
    look at the head share one transaction, so the head is not the verified one, the bump rolls back, and
    attach says another writer holds the session (never a stale head that a later append would trip on)."""
    recorder.append_many([_event(i) for i in range(7)])
    real = other_store.transaction

    def racing() -> Any:
        monkeypatch.setattr(other_store, "transaction", real)
        recorder.append(_event(7))  # the live writer, between the check and the bump
        return real()

    monkeypatch.setattr(other_store, "transaction", racing)
    with pytest.raises(SessionBusy, match=f"session {SID} is held by another writer") as info:
        Recorder.attach(other_store, SID)
    assert isinstance(info.value, AppendConflict) and info.value.seq == 7
    assert store.authority_epoch(SID) == 0  # not taken: the live writer goes on
    assert recorder.append(_event(8)).seq == 8
    resumed = Recorder.attach(other_store, SID)  # once it stops, a resume takes over
    assert (resumed.next_seq, resumed.head, resumed.epoch) == (9, recorder.head, 1)


def test_attach_refuses_an_empty_session(store: SqliteStore, recorder: Recorder) -> None:
    with pytest.raises(LedgerIntegrityError, match="no durable ledger") as info:
        Recorder.attach(store, SID)
    assert info.value.session_id == SID
    assert store.authority_epoch(SID) == 0  # refused before taking authority


def test_attach_unknown_session(store: SqliteStore) -> None:
    with pytest.raises(SessionNotFound):
        Recorder.attach(store, "missing")


def _tamper(db_path: Path, *statements: str) -> None:
    """Edit the file behind flightlog's back: drop the append-only triggers, then run ``statements``."""
    raw = sqlite3.connect(db_path)
    try:
        raw.execute("DROP TRIGGER events_no_update")
        raw.execute("DROP TRIGGER events_no_delete")
        for statement in statements:
            raw.execute(statement)
        raw.commit()
    finally:
        raw.close()


_FORGED = canonical_json({"kind": "custom", "custom_kind": "step", "payload": {"i": 3, "text": "forged"}})


@pytest.mark.parametrize(
    ("statements", "first_seq", "divergences"),
    [
        pytest.param(
            [f"UPDATE events SET event = x'{_FORGED.hex()}' WHERE seq = 3"],
            3,
            {(3, "hash_mismatch")},
            id="edit-one-event",
        ),
        pytest.param(
            ["DELETE FROM events WHERE seq = 3"],
            3,
            {(3, "gap"), (4, "broken_link")},
            id="delete-a-middle-row",
        ),
        pytest.param(
            [
                "UPDATE events SET event = (SELECT event FROM events WHERE seq = 5) WHERE seq = 2",
                "UPDATE events SET event = (SELECT event FROM events WHERE seq = 1) WHERE seq = 5",
                "UPDATE events SET event = (SELECT event FROM events WHERE seq = 2) WHERE seq = 1",
            ],
            1,
            {(1, "hash_mismatch"), (2, "hash_mismatch"), (5, "hash_mismatch")},
            id="rotate-three-rows-bytes",
        ),
        pytest.param(
            ["DELETE FROM events WHERE seq >= 7"],
            7,
            {(7, "truncated")},
            id="truncate-the-tail",
        ),
        pytest.param(
            ["DELETE FROM events WHERE seq = 9"],
            9,
            {(9, "truncated")},
            id="drop-the-last-row",
        ),
        pytest.param(
            ["UPDATE events SET hash = '" + "0" * 64 + "' WHERE seq = 4"],
            4,
            {(4, "hash_mismatch"), (5, "broken_link")},
            id="forge-a-hash",
        ),
        pytest.param(
            ["UPDATE events SET event = x'7b7d' WHERE seq = 6"],
            6,
            {(6, "hash_mismatch"), (6, "undecodable")},
            id="garbage-event",
        ),
    ],
)
def test_attach_refuses_a_tampered_ledger(
    db_path: Path,
    store: SqliteStore,
    recorder: Recorder,
    statements: list[str],
    first_seq: int,
    divergences: set[tuple[int, str]],
) -> None:
    recorder.append_many([_event(i) for i in range(10)])
    _tamper(db_path, *statements)
    with SqliteStore(db_path) as fresh:
        with pytest.raises(LedgerIntegrityError) as info:
            Recorder.attach(fresh, SID)
        err = info.value
        assert (err.session_id, err.seq) == (SID, first_seq)
        assert f"sequence {first_seq}" in str(err)
        assert {(d.seq, d.reason) for d in err.divergences} == divergences
        report = verify_session(fresh, SID)
        assert not report.ok
        assert {(d.seq, d.reason) for d in report.divergences} == divergences
        assert fresh.authority_epoch(SID) == 0  # refused: authority not taken


def test_swapping_two_rows_bytes_is_detected_at_both(
    db_path: Path, store: SqliteStore, recorder: Recorder
) -> None:
    rows = recorder.append_many([_event(i) for i in range(10)])
    _tamper(
        db_path,
        f"UPDATE events SET event = x'{rows[5].event_bytes.hex()}' WHERE seq = 2",
        f"UPDATE events SET event = x'{rows[2].event_bytes.hex()}' WHERE seq = 5",
    )
    with SqliteStore(db_path) as fresh:
        with pytest.raises(LedgerIntegrityError) as info:
            Recorder.attach(fresh, SID)
        assert info.value.seq == 2
        assert {(d.seq, d.reason) for d in info.value.divergences} == {
            (2, "hash_mismatch"),
            (5, "hash_mismatch"),
        }


def test_a_text_value_in_the_event_column_is_a_divergence_not_a_crash(
    db_path: Path, store: SqliteStore, recorder: Recorder
) -> None:
    recorder.append_many([_event(i) for i in range(5)])
    _tamper(db_path, "UPDATE events SET event = 'tampered text' WHERE seq = 3")
    with SqliteStore(db_path) as fresh:
        with pytest.raises(LedgerIntegrityError) as info:
            Recorder.attach(fresh, SID)
        assert info.value.seq == 3


def test_a_plain_chain_cannot_detect_truncation_with_a_rewritten_session_row(
    db_path: Path, store: SqliteStore, recorder: Recorder
) -> None:
    """Known limitation, pinned so it stays explicit (see flightlog.ledger's module docstring).

    The chain links each event to all *earlier* ones; nothing in the events table says how many there
    should be. Tail truncation is caught only against a head recorded elsewhere: the session row's
    ``head_seq``/``head_hash``/``merkle_root`` (see ``truncate-the-tail`` above). An attacker who deletes
    the last rows *and* rewrites the session row to the new last row's hash and tree head leaves a shorter
    chain that verifies and attaches "ok". Closing this needs a head retained outside the database (a signed
    checkpoint or witness), which this test does not have.
    """
    rows = recorder.append_many([_event(i) for i in range(10)])
    kept = rows[:6]
    root = merkle_root([leaf_hash(r.event_bytes) for r in kept]).hex()
    _tamper(
        db_path,
        "DELETE FROM events WHERE seq >= 6",
        f"UPDATE sessions SET head_seq = 5, head_hash = '{kept[-1].hash}', merkle_root = '{root}'",
    )
    with SqliteStore(db_path) as fresh:
        report = verify_session(fresh, SID)
        assert report.ok
        assert (report.events, report.head, report.root) == (6, kept[-1].hash, root)
        resumed = Recorder.attach(fresh, SID)
        assert resumed.next_seq == 6  # the four dropped events are silently gone


# ─── external effects (seed 003) ──────────────────────────────────────────────────────────
def test_effect_intent_and_completion_are_ledgered(store: SqliteStore, recorder: Recorder) -> None:
    intent = {"op": "charge", "amount_cents": 1299, "to": "acct_1"}
    assert recorder.record_intent("pay-1", intent) is True
    effect = recorder.effect("pay-1")
    assert effect is not None
    assert (effect.status, effect.intent_hash) == ("pending", intent_hash(intent))
    assert effect.intent_json == canonical_json(intent).decode()
    assert [e.idempotency_key for e in recorder.pending_effects()] == ["pay-1"]

    assert recorder.complete_effect("pay-1", {"charge_id": "ch_1"}) is True
    assert recorder.pending_effects() == []
    assert _customs(store) == [
        ("external_effect_intent", {"key": "pay-1", "intent_hash": intent_hash(intent), "intent": intent}),
        ("external_effect_completed", {"key": "pay-1", "result": {"charge_id": "ch_1"}}),
    ]
    assert verify_session(store, SID).ok


def test_repeated_intent_and_completion_are_noops(store: SqliteStore, recorder: Recorder) -> None:
    recorder.record_intent("k", {"a": 1})
    assert recorder.record_intent("k", {"a": 1}) is False
    recorder.complete_effect("k", {"ok": True})
    assert recorder.complete_effect("k", {"ok": True}) is False
    assert [kind for kind, _ in _customs(store)] == ["external_effect_intent", "external_effect_completed"]


def test_conflicting_effect_bytes_raise_and_ledger_nothing(store: SqliteStore, recorder: Recorder) -> None:
    recorder.record_intent("k", {"a": 1})
    before = _state(recorder)
    with pytest.raises(EffectConflict) as info:
        recorder.record_intent("k", {"a": 2})
    assert (info.value.stored_hash, info.value.new_hash) == (intent_hash({"a": 1}), intent_hash({"a": 2}))
    recorder.complete_effect("k", "done")
    with pytest.raises(EffectConflict):
        recorder.complete_effect("k", "done differently")
    with pytest.raises(LookupError):
        recorder.complete_effect("never-intended", "x")
    assert _state(recorder)[0] == before[0] + 1
    assert [kind for kind, _ in _customs(store)] == ["external_effect_intent", "external_effect_completed"]


def test_effect_row_and_ledger_event_share_one_transaction(
    store: SqliteStore, recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: Any, **kwargs: Any) -> int:
        raise StoreError("ledger write failed (injected)")

    with monkeypatch.context() as patch:
        patch.setattr(store, "append_events", refuse)
        with pytest.raises(StoreError, match="injected"):
            recorder.record_intent("k", {"a": 1})
    assert recorder.effect("k") is None  # the intent row rolled back with the ledger event
    assert _events(store) == []

    recorder.record_intent("k", {"a": 1})
    with monkeypatch.context() as patch:
        patch.setattr(store, "append_events", refuse)
        with pytest.raises(StoreError):
            recorder.complete_effect("k", {"ok": 1})
    effect = recorder.effect("k")
    assert effect is not None
    assert effect.status == "pending"  # the completion rolled back with its ledger event
    assert [kind for kind, _ in _customs(store)] == ["external_effect_intent"]


def test_intent_without_completion_is_in_doubt_after_a_restart(
    store: SqliteStore, other_store: SqliteStore, recorder: Recorder
) -> None:
    recorder.record_intent("k", {"a": 1})
    resumed = Recorder.attach(other_store, SID)
    assert [e.idempotency_key for e in resumed.pending_effects()] == ["k"]
    assert resumed.record_intent("k", {"a": 1}) is False  # never silently re-run
    assert resumed.complete_effect("k", "reconciled") is True
    assert resumed.pending_effects() == []


def test_grant_policy_is_stored_and_ledgered(store: SqliteStore, recorder: Recorder) -> None:
    recorder.record_grant_policy("p1", {"allow": ["read"]}, signed=True)
    assert store.grant_policies(SID) == [("p1", '{"allow": ["read"]}')]
    assert _customs(store) == [
        ("grant_policy", {"policy_id": "p1", "policy": {"allow": ["read"]}, "signed": True})
    ]
    with pytest.raises(StoreError):
        recorder.record_grant_policy("p1", {"allow": ["write"]})
    assert len(_events(store)) == 1


def test_artifacts_via_the_recorder(recorder: Recorder) -> None:
    handle = recorder.put_artifact(b"screenshot", "image/png")
    assert handle == "sha256:" + canonical_sha(b"screenshot")
    assert recorder.get_artifact(handle) == b"screenshot"
    assert recorder.get_artifact("sha256:" + "0" * 64) is None


# ─── epoch fencing ────────────────────────────────────────────────────────────────────────
def test_attach_fences_off_the_old_writer(
    store: SqliteStore, other_store: SqliteStore, recorder: Recorder
) -> None:
    recorder.append_many([_event(0), _event(1)])
    new = Recorder.attach(other_store, SID)
    assert (recorder.epoch, new.epoch) == (0, 1)
    before = _state(recorder)
    with pytest.raises(StaleWriter) as info:
        recorder.append(_event(2))
    assert (info.value.session_id, info.value.epoch, info.value.current_epoch) == (SID, 0, 1)
    with pytest.raises(StaleWriter):
        recorder.append_many([_event(2), _event(3)])
    assert _state(recorder) == before
    assert [e.seq for e in _events(store)] == [0, 1]
    assert new.append(_event(2)).seq == 2
    assert verify_session(store, SID).ok


def canonical_sha(content: bytes) -> str:
    import hashlib

    return hashlib.sha256(content).hexdigest()


def test_verify_session_takes_a_full_id_and_says_how_to_resolve_a_prefix(store: SqliteStore) -> None:
    """The command line resolves a unique prefix; a Python call given one raised a bare "no session matches"
    and nothing said why: the message now names the full-id rule and ``store.resolve_session``."""
    Recorder.create(store, session_id="claude-code:491e126e").append(Custom(custom_kind="c", payload={}))
    with pytest.raises(SessionNotFound, match=r"full id.*store\.resolve_session\('491e'\)"):
        verify_session(store, "491e")
    assert verify_session(store, store.resolve_session("491e")).ok


def test_every_python_entry_point_taking_a_session_id_says_how_to_resolve_a_prefix(
    store: SqliteStore,
) -> None:
    """User pass (session 10): ``replay_session`` returned ``[]`` for a prefix (and for an id no session
    has), and ``abort`` raised the bare "no session matches"; both now raise the exact-id message."""
    from flightlog.kernel.abort import abort
    from flightlog.sessions import replay_session

    Recorder.create(store, session_id="claude-code:491e126e").append(Custom(custom_kind="c", payload={}))
    Recorder.create(store, session_id="empty-but-real")
    for call in (
        lambda sid: replay_session(store, sid),
        lambda sid: abort(store, sid),
        lambda sid: store.authority_epoch(sid),
        lambda sid: store.set_session_status(sid, "failed"),
    ):
        with pytest.raises(SessionNotFound, match=r"full id.*store\.resolve_session\('491e'\)"):
            call("491e")
    assert replay_session(store, "empty-but-real") == []  # a session with no messages is still []
