"""The runs projection's read declaration (``reads_event``, issue 19's import row): an append of encoded
events (``Recorder.append_encoded``, what ``import_file`` does) decodes only the events the fold reads,
and hands the projection None for the others; the fold, and so every projected row, must be exactly what
folding every decoded event gives.

Pinned here: the fold with None where ``reads_event`` says so equals the fold of every event, after every
row, over every session the importers make of ``tests/data/samples`` and over generated event sequences;
``custom_kind_of`` reads a ``custom_kind`` from the bytes exactly or not at all; an import's projection is
current (never marked stale) and equals a rebuild; the recorder hands events as declared, and records the
same bytes either way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flightlog import events as ev
from flightlog.encoding import canonical_bytes, decode_stored
from flightlog.errors import EventDecodeError, ImportFormatError
from flightlog.events import Event
from flightlog.importers import import_file
from flightlog.recorder import _PROJECTORS as PROJECTORS
from flightlog.recorder import _READS as READS
from flightlog.recorder import Recorder, load_default_projectors, register_projector
from flightlog.runs import SessionFold, SessionHeader, projection_ready, rebuild_projection
from flightlog.runs.adapters import _CUSTOM_HANDLERS, custom_kind_of, reads_event
from flightlog.store import SqliteStore
from flightlog.store.base import StoredEvent

from .conftest import (
    FOLD_EVENTS,
    custom,
    llm,
    requested,
    started,
)

SAMPLES = Path(__file__).parent.parent / "data" / "samples"
SUFFIXES = {".jsonl", ".json", ".traj", ".md"}
FILES = [  # every sample file a format reads (an OpenHands V1 conversation is a folder: left out)
    p
    for p in sorted(SAMPLES.rglob("*"))
    if p.is_file() and p.suffix in SUFFIXES and p.name != "PROVENANCE.md" and "openhands-v1" not in p.parts
]


def _state(fold: SessionFold) -> tuple[dict[str, Any], list[Any]]:
    return fold.to_json(), fold.take_processes()


def assert_same_folds(rows: list[tuple[int, int, str, bytes]], session_id: str = "s") -> int:
    """Fold ``rows`` (seq, time, kind, canonical bytes) with every event and with None where
    ``reads_event`` says so; the two folds are equal after every row. Returns how many were None."""
    header = SessionHeader(session_id, "direct", None, True, None)
    every, declared = SessionFold(header), SessionFold(header)
    skipped = 0
    for seq, at, kind, data in rows:
        event = decode_stored(data)
        assert event.kind == kind
        every.feed(seq, at, event)
        read = reads_event(kind, data)
        skipped += not read
        declared.feed_row(seq, at, kind, event if read else None)
        assert _state(declared) == _state(every), f"seq {seq} ({kind})"
    return skipped


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_fold_is_the_same_without_the_events_it_does_not_read_on_every_sample(
    tmp_path: Path, path: Path
) -> None:
    with SqliteStore(tmp_path / "s.db") as store:
        try:
            import_file(store, path, seal=True)
        except ImportFormatError as exc:  # a sample no importer takes (the pins record the refusal)
            pytest.skip(f"not imported: {exc.reason}")
        for record in store.list_sessions():
            rows = [
                (r.seq, r.recorded_at_ms, r.kind, r.event_bytes) for r in store.read_events(record.session_id)
            ]
            assert_same_folds(rows, record.session_id)
        # the import's own projection (events not read were never decoded) is current and a rebuild's
        assert projection_ready(store)
        runs = [listing.run_id for listing in store.query_runs()]
        incremental = store.get_run_rows(runs)
        rebuild_projection(store)
        assert store.get_run_rows(runs) == incremental


def test_a_claude_code_import_skips_most_decodes(tmp_path: Path) -> None:
    path = SAMPLES / "claude-code" / "spotter_tool_heavy.jsonl"
    with SqliteStore(tmp_path / "s.db") as store:
        import_file(store, path)
        rows = [
            (r.seq, r.recorded_at_ms, r.kind, r.event_bytes)
            for record in store.list_sessions()
            for r in store.read_events(record.session_id)
        ]
    skipped = assert_same_folds([(seq, *row[1:]) for seq, row in enumerate(rows)])
    # llm_completed, run_started and the claude_code.* records are rows only to the fold
    assert skipped > len(rows) // 2


EVENTS = st.sampled_from(
    [
        *FOLD_EVENTS,
        ev.Compressed(turn=1, archived_seq_range=(0, 1), action="compact", summary="s"),
        custom("model_usage", {"input_tokens": 3, "output_tokens": 4}),
        custom("budget_limits", {"tokens": 100}),
        custom("external_effect_completed", {"key": "k"}),
        custom("run_ref", {"kind": "artifact", "reference": "sha256:" + "cd" * 32, "label": "x"}),
        custom("claude_code.progress", {"total_tokens": 5}),
        custom('token_usage"', {"total_tokens": 5}),
    ]
)


@settings(max_examples=200, deadline=None)
@given(st.lists(EVENTS, max_size=30))
def test_the_fold_is_the_same_without_the_events_it_does_not_read(events: list[Event]) -> None:
    assert_same_folds([(seq, 1_000 + seq, e.kind, canonical_bytes(e)) for seq, e in enumerate(events)])


KINDS = st.one_of(st.sampled_from(sorted(_CUSTOM_HANDLERS)), st.text(max_size=30))
PAYLOADS = st.one_of(st.none(), st.dictionaries(st.text(max_size=5), st.integers(-5, 5), max_size=3))


@settings(max_examples=400, deadline=None)
@given(KINDS, PAYLOADS)
def test_custom_kind_of_reads_the_kind_exactly_or_not_at_all(kind: str, payload: Any) -> None:
    try:
        data = canonical_bytes(ev.Custom(custom_kind=kind, payload=payload))
    except Exception:  # a lone surrogate: no bytes to read
        return
    found = custom_kind_of(data)
    assert found is None or found == kind
    if not any(c in kind for c in '"\\') and all(c >= " " for c in kind):
        assert found == kind  # only escapes make it undecided
    # undecided or a handled kind: the fold reads it
    assert reads_event("custom", data) == (found is None or found in _CUSTOM_HANDLERS)


def test_custom_kind_of_other_shapes_is_undecided() -> None:
    assert custom_kind_of(b'{"kind":"custom"}') is None
    assert custom_kind_of(b'{"custom_kind":"unterminated') is None
    assert custom_kind_of(b'{"custom_kind":"\xff"}') is None
    assert custom_kind_of(b'{"custom_kind":"a\\"b","kind":"custom"}') is None
    assert custom_kind_of(json.dumps({"custom_kind": "x", "kind": "custom"}).encode()) is None  # spaces


# ─── the recorder hands events as declared ────────────────────────────────────────────────────

Seen = list[tuple[int, str, Event | None]]


def _recording(seen: Seen) -> Any:
    def projector(recorder: Recorder, batch: list[tuple[StoredEvent, Event | None]]) -> None:
        seen.extend((row.seq, row.kind, event) for row, event in batch)

    return projector


@pytest.fixture
def projectors() -> Any:
    load_default_projectors()  # before saving: restoring must not leave a process without them
    saved, saved_reads = list(PROJECTORS), dict(READS)
    yield
    PROJECTORS[:] = saved
    READS.clear()
    READS.update(saved_reads)


def test_append_encoded_decodes_only_what_a_projector_reads(tmp_path: Path, projectors: Any) -> None:
    events: list[Event] = [
        started(),
        llm(1, "c1"),
        custom("claude_code.progress", {"a": 1}),
        custom("token_usage", {"total_tokens": 5}),
        requested("c1"),
    ]
    encoded = [canonical_bytes(e) for e in events]
    declared: Seen = []
    every: Seen = []
    heard: list[tuple[int, Event]] = []
    with SqliteStore(tmp_path / "a.db") as one, SqliteStore(tmp_path / "b.db") as two:
        plain = Recorder.create(one, session_id="s")
        plain.append_many(events)
        given_rows = Recorder.create(two, session_id="s")
        register_projector(_recording(declared), reads=reads_event)
        register_projector(_recording(every))
        given_rows.subscribe(lambda row, event: heard.append((row.seq, event)))
        given_rows.append_encoded([(e.kind, data) for e, data in zip(events, encoded, strict=True)])
        assert given_rows.head == plain.head and given_rows.root == plain.root
        assert [r.event_bytes for r in two.read_events("s")] == encoded
    assert every == [(seq, e.kind, e) for seq, e in enumerate(events)]
    assert heard == list(enumerate(events))
    reads = [reads_event(e.kind, data) for e, data in zip(events, encoded, strict=True)]
    assert reads == [False, False, False, True, True]
    assert declared == [
        (seq, e.kind, e if read else None) for seq, (e, read) in enumerate(zip(events, reads, strict=True))
    ]


def test_append_many_hands_every_event_whatever_a_projector_declares(tmp_path: Path, projectors: Any) -> None:
    events: list[Event] = [started(), custom("claude_code.progress", {"a": 1})]
    declared: Seen = []
    with SqliteStore(tmp_path / "a.db") as store:
        recorder = Recorder.create(store, session_id="s")
        register_projector(_recording(declared), reads=reads_event)
        recorder.append_many(events)
    assert declared == [(seq, e.kind, e) for seq, e in enumerate(events)]


def test_append_encoded_refuses_bytes_a_reader_cannot_decode(tmp_path: Path, projectors: Any) -> None:
    with SqliteStore(tmp_path / "a.db") as store:
        recorder = Recorder.create(store, session_id="s")
        recorder.subscribe(lambda row, event: None)  # a subscriber reads every event
        with pytest.raises(EventDecodeError):
            recorder.append_encoded([("run_started", b'{"kind":"run_started"')])
        assert list(store.read_events("s")) == [] and recorder.next_seq == 0
