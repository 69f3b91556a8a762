"""The memory types follow upstream's ``mm::memory`` field by field (issue 14 item 1, UPSTREAM.md §8); replay
turns each hit into a ``[MEMORY ...]`` user message.

The table below is where each field comes from: deepstrike ``crates/deepstrike-core/src/mm/memory.rs`` at
commit ``39857861c266772e6ca300b91672f2c30b7b2798`` (the snapshot UPSTREAM.md names), with the line of each
declaration, its Rust type and its serde attributes. From them the tests derive what serde does (the same
rules as ``tests/test_wire_conformance.py``): a field with no attribute is required and always written;
``#[serde(default)]`` is written always and defaults on input; ``default, skip_serializing_if`` fields are
omitted when ``None``/empty. Every struct is ``deny_unknown_fields``; the enums are ``rename_all =
"snake_case"``.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from flightlog import events as ev
from flightlog.encoding import canonical_bytes, canonical_json, decode_stored, upcast_invented_memory_hits
from flightlog.messages import Message
from flightlog.replay import MEMORY_ERASED, reconstruct

REQUIRED, DEFAULT, SKIP = "required", "default", "default+skip"

# (field, Rust type, serde rule, mm/memory.rs line)
UPSTREAM: dict[str, list[tuple[str, str, str, int]]] = {
    "MemoryScope": [  # lines 39-44, deny_unknown_fields
        ("tenant_id", "String", REQUIRED, 42),
        ("namespace", "String", REQUIRED, 43),
    ],
    "MemoryProvenance": [  # lines 83-92, deny_unknown_fields
        ("session_id", "Option<String>", SKIP, 87),
        ("author", "MemoryAuthor", REQUIRED, 88),
        ("trust", "MemoryTrustLevel", REQUIRED, 89),
        ("evidence_refs", "Vec<String>", SKIP, 91),
    ],
    "MemoryRecord": [  # lines 94-118, deny_unknown_fields
        ("record_id", "String", REQUIRED, 98),
        ("scope", "MemoryScope", REQUIRED, 99),
        ("name", "String", REQUIRED, 100),
        ("kind", "MemoryKind", REQUIRED, 101),
        ("content", "String", REQUIRED, 102),
        ("description", "String", REQUIRED, 103),
        ("provenance", "MemoryProvenance", REQUIRED, 104),
        ("created_at", "u64", REQUIRED, 105),
        ("updated_at", "u64", REQUIRED, 106),
        ("last_recalled_at", "Option<u64>", SKIP, 108),
        ("recall_count", "u64", DEFAULT, 110),
        ("confidence", "f64", REQUIRED, 111),
        ("links", "Vec<String>", SKIP, 113),
        ("pinned", "bool", DEFAULT, 115),
        ("ttl_days", "Option<u32>", SKIP, 117),
    ],
    "MemoryRecall": [  # lines 377-384, deny_unknown_fields
        ("record", "MemoryRecord", REQUIRED, 381),
        ("score", "f64", REQUIRED, 382),
        ("why", "String", REQUIRED, 383),
    ],
}
ENUMS = {  # rename_all = "snake_case"
    "MemoryKind": ["user", "feedback", "project", "reference"],  # lines 11-22
    "MemoryAuthor": ["model", "host", "extraction"],  # lines 64-71
    "MemoryTrustLevel": ["untrusted", "user_asserted", "host_verified"],  # lines 73-80
}
MODELS: dict[str, type[BaseModel]] = {
    "MemoryScope": ev.MemoryScope,
    "MemoryProvenance": ev.MemoryProvenance,
    "MemoryRecord": ev.MemoryRecord,
    "MemoryRecall": ev.MemoryRecall,
}
RUST_DEFAULT = {"u64": 0, "bool": False}

FULL: dict[str, dict[str, Any]] = {
    "MemoryScope": {"tenant_id": "acme", "namespace": "agent:helper"},
    "MemoryProvenance": {
        "session_id": "s-1",
        "author": "extraction",
        "trust": "user_asserted",
        "evidence_refs": ["turn:3"],
    },
}
FULL["MemoryRecord"] = {
    "record_id": "mem-1",
    "scope": FULL["MemoryScope"],
    "name": "build-tool",
    "kind": "project",
    "content": "use cargo nextest, not cargo test",
    "description": "which test runner the project uses",
    "provenance": FULL["MemoryProvenance"],
    "created_at": 1_700_000_000_000,
    "updated_at": 1_700_000_000_500,
    "last_recalled_at": 12,
    "recall_count": 3,
    "confidence": 0.8,
    "links": ["mem-0"],
    "pinned": True,
    "ttl_days": 30,
}
FULL["MemoryRecall"] = {"record": FULL["MemoryRecord"], "score": 0.61, "why": "bm25: cargo, test"}
"""What serde_json writes for an upstream value with every field set (keys in JCS order once encoded)."""


def _minimal(name: str) -> dict[str, Any]:
    return {f: FULL[name][f] for f, _t, rule, _l in UPSTREAM[name] if rule == REQUIRED}


@pytest.mark.parametrize("name", list(UPSTREAM))
def test_fields_are_exactly_upstreams(name: str) -> None:
    assert list(MODELS[name].model_fields) == [f for f, *_ in UPSTREAM[name]]


@pytest.mark.parametrize("name", list(ENUMS))
def test_enum_wire_names(name: str) -> None:
    assert [m.value for m in getattr(ev, name)] == ENUMS[name]


@pytest.mark.parametrize("name", list(UPSTREAM))
def test_full_value_round_trips_byte_exact(name: str) -> None:
    model = MODELS[name].model_validate(FULL[name])
    assert canonical_json(model.to_wire()) == canonical_json(FULL[name])


@pytest.mark.parametrize("name", list(UPSTREAM))
def test_minimal_value_writes_defaults_and_omits_skipped(name: str) -> None:
    model = MODELS[name].model_validate(_minimal(name))
    wire = model.to_wire()
    for field, rust_type, rule, line in UPSTREAM[name]:
        if rule == DEFAULT:
            assert wire[field] == RUST_DEFAULT[rust_type], f"mm/memory.rs:{line} {field} is #[serde(default)]"
        elif rule == SKIP:
            assert field not in wire, f"mm/memory.rs:{line} {field} is skipped when None/empty"
        else:
            assert field in wire


@pytest.mark.parametrize(
    ("name", "field"),
    [(n, f) for n, rows in UPSTREAM.items() for f, _t, rule, _l in rows if rule == REQUIRED],
)
def test_required_fields_are_required(name: str, field: str) -> None:
    data = copy.deepcopy(FULL[name])
    del data[field]
    with pytest.raises(ValidationError, match=field):
        MODELS[name].model_validate(data)


@pytest.mark.parametrize("name", list(UPSTREAM))
def test_unknown_fields_are_denied(name: str) -> None:
    with pytest.raises(ValidationError, match="extra"):
        MODELS[name].model_validate({**FULL[name], "owner": "x"})


@pytest.mark.parametrize(
    ("field", "bad"),
    [("kind", "belief"), ("created_at", -1), ("ttl_days", 2**32), ("recall_count", 2**64), ("name", 5)],
)
def test_record_refuses_what_serde_refuses(field: str, bad: Any) -> None:
    with pytest.raises(ValidationError, match=field):
        ev.MemoryRecord.model_validate({**FULL["MemoryRecord"], field: bad})


def test_upstream_shaped_hit_in_an_event_decodes_and_reencodes_byte_exact() -> None:
    stored = canonical_json({"kind": "memory_retrieval_result", "hits": [FULL["MemoryRecall"]]})
    event = decode_stored(stored)
    assert isinstance(event, ev.MemoryRetrievalResult)
    assert event.hits[0].record.kind is ev.MemoryKind.PROJECT
    assert canonical_bytes(event) == stored


@given(
    score=st.floats(min_value=0, max_value=1),
    confidence=st.floats(min_value=0, max_value=1),
    recall_count=st.integers(min_value=0, max_value=2**53 - 1),
    ttl=st.none() | st.integers(min_value=0, max_value=2**32 - 1),
    links=st.lists(st.text(max_size=8), max_size=3),
    content=st.text(max_size=40),
)
def test_hits_round_trip_byte_exact(
    score: float, confidence: float, recall_count: int, ttl: int | None, links: list[str], content: str
) -> None:
    record = {**FULL["MemoryRecord"], "confidence": confidence, "recall_count": recall_count, "links": links}
    record["content"] = content
    if ttl is None:
        del record["ttl_days"]
    else:
        record["ttl_days"] = ttl
    if not links:
        del record["links"]
    stored = canonical_json(
        {"hits": [{"record": record, "score": score, "why": ""}], "kind": "memory_retrieval_result"}
    )
    assert canonical_bytes(decode_stored(stored)) == stored


# ─── the invented shape stored before issue 14 ────────────────────────────────────────────────────────

INVENTED = {
    "kind": "memory_retrieval_result",
    "hits": [
        {
            "record": {
                "record_id": "m1",
                "scope": {"tenant_id": "t", "namespace": "n"},
                "memory_kind": "feedback",
                "name": "style",
                "content": "short answers",
            },
            "score": 0.75,
        }
    ],
}


def test_invented_shape_is_upcast_on_read() -> None:
    event = decode_stored(canonical_json(INVENTED))
    assert isinstance(event, ev.MemoryRetrievalResult)
    record = event.hits[0].record
    assert (record.kind, record.content, record.description, event.hits[0].why) == (
        ev.MemoryKind.FEEDBACK,
        "short answers",
        "",
        "",
    )
    assert record.provenance.trust is ev.MemoryTrustLevel.UNTRUSTED
    assert (record.created_at, record.updated_at, record.confidence) == (0, 0, 0.0)


def test_upcaster_leaves_upstream_hits_alone() -> None:
    current = {"kind": "memory_retrieval_result", "hits": [FULL["MemoryRecall"]]}
    assert upcast_invented_memory_hits(current) == current


def test_ledger_with_the_invented_shape_still_verifies_and_reads(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session recorded by the old encoder (its stored bytes hold ``memory_kind``) keeps verifying after
    the change (hashes cover the stored bytes), decodes through the upcaster, and new appends use the new
    form."""
    from typer.testing import CliRunner

    from flightlog import recorder as recorder_module
    from flightlog.cli import app
    from flightlog.recorder import Recorder
    from flightlog.store import SqliteStore

    db = tmp_path / "ledger.db"
    old_bytes = canonical_json(INVENTED)
    real = recorder_module.canonical_bytes
    with monkeypatch.context() as old_release:
        old_release.setattr(
            recorder_module,
            "canonical_bytes",
            lambda event: old_bytes if event.kind == "memory_retrieval_result" else real(event),
        )
        with SqliteStore(str(db)) as store:
            rec = Recorder.create(store, session_id="legacy-mem", notary=None)
            rec.append_many([ev.RunStarted(run_id="r", goal="g"), ev.MemoryRetrievalResult(hits=[])])
    with SqliteStore(str(db)) as store:
        rows = list(store.read_events("legacy-mem"))
        assert rows[1].event_bytes == old_bytes  # stored as the old release wrote it
        rec = Recorder.attach(store, "legacy-mem", notary=None)  # full chain check
        new = ev.MemoryRetrievalResult.model_validate({"hits": [FULL["MemoryRecall"]]})
        rec.append(new)
        decoded = [decode_stored(r.event_bytes) for r in store.read_events("legacy-mem")]
    assert isinstance(decoded[1], ev.MemoryRetrievalResult)
    assert decoded[1].hits[0].record.kind is ev.MemoryKind.FEEDBACK
    assert decoded[2] == new
    result = CliRunner().invoke(app, ["--db", str(db), "verify", "legacy-mem"])
    assert result.exit_code == 0, result.stdout + result.stderr


# ─── replay: one [MEMORY ...] user message per hit (UPSTREAM.md §8) ─────────────────────────────────


def _hit(record_id: str, content: str) -> ev.MemoryRecall:
    record = {**FULL["MemoryRecord"], "record_id": record_id, "content": content}
    return ev.MemoryRecall.model_validate({**FULL["MemoryRecall"], "record": record})


HANDLE = "salted:sha256:" + "ab" * 32


def test_each_hit_becomes_a_user_message_in_order() -> None:
    events = [
        (0, ev.RunStarted(run_id="r", goal="g")),
        (1, ev.MemoryRetrievalResult(hits=[_hit("m1", "plain text"), _hit("m2", HANDLE)])),
    ]
    texts = {HANDLE: [Message.text("user", "from salted storage")]}
    messages = reconstruct(events, archive_loader=texts.get)
    assert messages[1:] == [
        Message.text("user", "[MEMORY record_id=m1 kind=project] plain text"),
        Message.text("user", "[MEMORY record_id=m2 kind=project] from salted storage"),
    ]
    assert reconstruct(events, at=0) == messages[:1]


def test_an_erased_text_reads_erased() -> None:
    events = [(0, ev.MemoryRetrievalResult(hits=[_hit("m2", HANDLE)]))]
    expected = [Message.text("user", f"[MEMORY record_id=m2 kind=project] {MEMORY_ERASED}")]
    assert reconstruct(events, archive_loader=lambda ref: None) == expected
    assert reconstruct(events) == expected
