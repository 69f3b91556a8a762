"""The shared contract every :class:`~flightlog.store.base.Store` backend must pass.

Subclass :class:`StoreContract` in a test module as ``TestXStore(StoreContract)`` and supply three
fixtures (the class itself has no ``Test`` prefix, so pytest does not collect it on its own)::

    class TestSqliteStore(StoreContract):
        @pytest.fixture
        def store(self, tmp_path):                      # a fresh, empty, writable store; closed after
            with SqliteStore(tmp_path / "f.db") as s:
                yield s

        @pytest.fixture
        def reopen(self):                               # callable: same database, new writable handle
            ...

        @pytest.fixture
        def reopen_read_only(self):                     # callable: same database, new read-only handle
            ...

Handles returned by ``reopen``/``reopen_read_only`` are owned (and closed) by those fixtures. A fourth,
optional, ``store_past_head``: a callable ``(store, session_id, row)`` that stores ``row`` (a
:class:`~flightlog.store.base.NewEvent`) without moving the session's head, as only an edit of the database
outside flightlog can; without it the tests of such a store skip, naming the fixture. A fifth, optional,
``store_null_id``: a callable ``(store, created_at_ms, status)`` that writes a ``sessions`` row whose id is
NULL, as an outside edit can where the backend's primary key accepts one (SQLite's ``TEXT PRIMARY KEY``);
a backend that refuses it supplies none, and the test skips. A sixth, optional, ``store_odd_id``: a
callable ``(store, session_id, raw, as_text)`` that re-keys a session's ``sessions`` row to the bytes
``raw``, stored as TEXT (``as_text``) or as a BLOB, as an outside edit can where the key takes them
(SQLite); a backend whose key holds only UTF-8 text (PostgreSQL's ``text``) supplies none.

What it pins (STYLE.md section d, ARCHITECTURE.md invariants 1, 3, 6, 7): stored bytes come back
identical; ``append_events`` is all-or-nothing and moves the head in the same transaction; a taken
``(session_id, seq)`` raises ``AppendConflict`` (naming the lowest taken seq, a row stored past the head
included) and a stale authority epoch ``StaleWriter``, both writing nothing; reads stream in ascending seq over any range; effect intents are idempotent per key and bytes,
completions happen once, and neither an intent nor a completion is written for a stale epoch (``StaleWriter``); artifacts are content-addressed and deduplicated; checkpoints, grants and imports
are recorded; read-only handles refuse every write; reopening (migrating again) changes nothing; session
prefixes resolve exactly, uniquely, after a ``format:`` part, and refuse ambiguity. Also (issue 6, every
backend the same): the ledger id, checkpoint frontiers and latest checkpoint; the ``runs`` projection rows,
their queries and the status trigger; live-run heartbeats; the index log, cosignatures and salted
artifacts; ``wait_for_events`` (returns on a commit to the session, times out otherwise); and fleet leases
(open/get, a claim bumps the epoch in its transaction, a held lease is claimable only once expired, renewal
by the holder only, release with and without parking, claims of one session, the limit, runnable statuses,
and concurrent claimers never sharing a session); a retired store (``retire``) refuses every write in
the words of ``refuse_if_retired``, writing nothing; long-term memory (issue 14: records per scope, full-text
ranking on a small corpus, filters, update, delete; :mod:`flightlog.testing.memory_contract`).

Backend-specific checks (pragmas, triggers, URLs, driver error mapping) belong in the backend's own
test module. Runs under pytest, which flightlog itself does not need: importing this module without it
raises an ImportError naming the extra, ``pip install 'flightlog[testing]'`` (the rest of
``flightlog.testing`` imports without pytest).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..errors import install_hint

try:
    import pytest
except ImportError as exc:  # STYLE.md (b) 13: a missing extra fails with an ImportError naming it
    raise ImportError(
        f"flightlog.testing.store_contract is a pytest suite: {install_hint('testing')}", name="pytest"
    ) from exc

from ..encoding import canonical_json
from ..errors import (
    AppendConflict,
    ArtifactIntegrityError,
    EffectConflict,
    LedgerRetired,
    ReadOnlyStore,
    SessionNotFound,
    StaleWriter,
    StoreError,
)
from ..ledger import GENESIS, CompactRange, chain_hash, leaf_hash, verify_rows
from ..store.base import (
    NOT_A_RUN,
    CosignatureRecord,
    ErasureRecord,
    ImportRecord,
    LeaseClaim,
    LeaseRecord,
    LiveRunRecord,
    NewEvent,
    RunPageQuery,
    RunRow,
    SessionHead,
    SessionRecord,
    Store,
    StoredEvent,
)
from .memory_contract import MemoryContract

__all__ = ["StoreContract", "chained_rows"]

Reopen = Callable[[Store], Store]
PastHead = Callable[[Store, str, NewEvent], None]
"""``store_past_head(store, session_id, row)``: store ``row`` without moving the head (an outside edit)."""
AlterArtifact = Callable[[Store, str, bytes], None]
"""``store_alter_artifact(store, sha256, content)``: replace the stored bytes of artifact ``sha256`` (hex) with
``content``, keeping its digest (an outside edit)."""
NullId = Callable[[Store, int, str], None]
"""``store_null_id(store, created_at_ms, status)``: write a ``sessions`` row with a NULL id (an outside edit)."""
OddId = Callable[[Store, str, bytes, bool], None]
"""``store_odd_id(store, session_id, raw, as_text)``: re-key a ``sessions`` row to ``raw`` (an outside edit)."""


def chained_rows(
    payloads: Sequence[Any],
    *,
    start: int = 0,
    prev: str = GENESIS,
    tree: CompactRange | None = None,
) -> tuple[list[NewEvent], SessionHead]:
    """Rows for ``append_events`` with a valid chain, and the head they move the session to.

    Args:
        payloads: One JSON value per row (``bytes`` are stored as given), wrapped as ``custom`` events.
        start: Seq of the first row.
        prev: Chain hash of ``start - 1`` (``"GENESIS"`` at 0).
        tree: Tree over the rows before ``start``; extended in place (a fresh one when None).

    Returns:
        (rows in ascending seq, head after the last row).
    """
    tree = tree if tree is not None else CompactRange()
    rows: list[NewEvent] = []
    for offset, payload in enumerate(payloads):
        seq = start + offset
        data = payload if isinstance(payload, bytes) else _custom_bytes(payload)
        digest = chain_hash(prev, seq, data)
        rows.append(NewEvent(seq, "custom", data, prev, digest))
        tree.append(leaf_hash(data))
        prev = digest
    last = rows[-1] if rows else None
    head = SessionHead(last.seq if last else start - 1, last.hash if last else prev, tree.root().hex())
    return rows, head


def _custom_bytes(payload: Any) -> bytes:
    return canonical_json({"kind": "custom", "custom_kind": "contract", "payload": payload})


def _park(store: Store, sid: str) -> None:
    """A fleet session ``sid`` (one event) claimed by ``w1``, suspended, and parked on its head."""
    _new_session(store, sid, status="queued")
    _append(store, sid, ["started"])
    store.open_lease(sid)
    store.claim_sessions("w1", ttl_ms=60_000)
    store.set_session_status(sid, "suspended")
    assert store.release_lease(sid, "w1", park=True)


def _new_session(store: Store, session_id: str = "s-1", **fields: Any) -> str:
    store.create_session(SessionRecord(session_id=session_id, **fields))
    return session_id


def _three_effects(store: Store) -> None:
    """Sessions ``s-1`` (effects ``k1`` completed with ``"done"``, then ``k2`` pending) and ``s-2`` (``k3``
    pending)."""
    _new_session(store, "s-1")
    _new_session(store, "s-2")
    store.record_intent("s-1", "k1", "aa" * 32, "1")
    store.record_intent("s-1", "k2", "bb" * 32, "2")
    store.record_intent("s-2", "k3", "cc" * 32, "3")
    store.complete_effect("s-1", "k1", "done")


def _append(store: Store, session_id: str, payloads: Sequence[Any]) -> list[NewEvent]:
    """Append ``payloads`` after whatever the session holds; returns the rows written."""
    existing = list(store.read_events(session_id))
    tree = CompactRange()
    for row in existing:
        tree.append(leaf_hash(row.event_bytes))
    prev = existing[-1].hash if existing else GENESIS
    rows, head = chained_rows(payloads, start=len(existing), prev=prev, tree=tree)
    store.append_events(session_id, rows, head)
    return rows


def _snapshot(store: Store, session_id: str) -> tuple[SessionRecord, list[StoredEvent]]:
    return store.get_session(session_id), list(store.read_events(session_id))


# Every write a read-only handle must refuse (session "s-1" with one event and intent "k" exist).
_WRITES: dict[str, Callable[[Store], object]] = {
    "create_session": lambda s: s.create_session(SessionRecord("s-new")),
    "set_session_status": lambda s: s.set_session_status("s-1", "failed"),
    "set_session_details": lambda s: s.set_session_details("s-1", task="t", created_at_ms=1, metadata={}),
    "append_events": lambda s: s.append_events("s-1", *chained_rows(["x"], start=1, prev="0" * 64)),
    "bump_authority_epoch": lambda s: s.bump_authority_epoch("s-1"),
    "record_grant_policy": lambda s: s.record_grant_policy("s-1", "p", "{}"),
    "record_intent": lambda s: s.record_intent("s-1", "k2", "aa" * 32, "{}"),
    "complete_effect": lambda s: s.complete_effect("s-1", "k", "{}"),
    "put_artifact": lambda s: s.put_artifact(b"new", "text/plain"),
    "record_checkpoint": lambda s: s.record_checkpoint("s-1", 1, "aa" * 32, "b"),
    "record_import": lambda s: s.record_import(ImportRecord("cd" * 32, "s-1", "x", "1", "f", 1)),
    "open_lease": lambda s: s.open_lease("s-1"),
    "claim_sessions": lambda s: s.claim_sessions("w", ttl_ms=1000),
    "renew_lease": lambda s: s.renew_lease("s-1", "w", ttl_ms=1000),
    "release_lease": lambda s: s.release_lease("s-1", "w"),
}


# Every write a retired store must refuse: those of a read-only handle, and an append that chains on.
_RETIRED_WRITES: dict[str, Callable[[Store], object]] = {
    **_WRITES,
    "append_events": lambda s: _append(s, "s-1", ["b"]),
}


class StoreContract(MemoryContract):
    """Backend-independent tests; subclass and supply ``store``, ``reopen`` and ``reopen_read_only``."""

    @pytest.fixture
    def store(self) -> Iterator[Store]:
        raise NotImplementedError("the backend's test class must supply a `store` fixture")

    @pytest.fixture
    def reopen(self) -> Iterator[Reopen]:
        raise NotImplementedError("the backend's test class must supply a `reopen` fixture")

    @pytest.fixture
    def reopen_read_only(self) -> Iterator[Reopen]:
        raise NotImplementedError("the backend's test class must supply a `reopen_read_only` fixture")

    @pytest.fixture
    def store_past_head(self) -> PastHead:
        pytest.skip("the backend's test class supplies no `store_past_head` fixture (an outside edit)")

    @pytest.fixture
    def store_alter_artifact(self) -> AlterArtifact:
        pytest.skip("the backend's test class supplies no `store_alter_artifact` fixture (an outside edit)")

    @pytest.fixture
    def store_null_id(self) -> NullId:
        pytest.skip("the backend's test class supplies no `store_null_id` fixture (its key refuses NULL)")

    @pytest.fixture
    def store_odd_id(self) -> OddId:
        pytest.skip("the backend's test class supplies no `store_odd_id` fixture (its key holds UTF-8 text)")

    # ─── sessions ─────────────────────────────────────────────────────────────────────────
    def test_set_session_details_replaces_task_creation_time_and_metadata(self, store: Store) -> None:
        _new_session(store, "s-1", metadata={"created_from": "import"})
        _append(store, "s-1", ["a"])
        store.set_session_details(
            "s-1", task="fix it", created_at_ms=1234, metadata={"created_from": "source"}
        )
        record = store.get_session("s-1")
        assert (record.task, record.created_at_ms, record.metadata) == (
            "fix it",
            1234,
            {"created_from": "source"},
        )
        assert (record.events, record.status) == (1, "running")  # nothing else changes
        with pytest.raises(SessionNotFound):
            store.set_session_details("nope", task="", created_at_ms=1, metadata={})

    def test_create_session_starts_empty_at_epoch_zero(self, store: Store) -> None:
        _new_session(
            store, "s-1", task="fix the bug", source="kernel", parent_session_id="p", metadata={"n": 1}
        )
        record = store.get_session("s-1")
        assert (record.head_seq, record.head_hash, record.events) == (-1, GENESIS, 0)
        assert (record.task, record.source, record.status) == ("fix the bug", "kernel", "running")
        assert (record.parent_session_id, record.metadata) == ("p", {"n": 1})
        assert record.created_at_ms > 0
        assert store.authority_epoch("s-1") == 0
        assert list(store.read_events("s-1")) == []

    def test_creating_an_existing_session_conflicts_and_keeps_the_first(self, store: Store) -> None:
        _new_session(store, "s-1", task="first")
        with pytest.raises(AppendConflict) as info:
            _new_session(store, "s-1", task="second")
        assert info.value.session_id == "s-1"
        assert store.get_session("s-1").task == "first"

    def test_unknown_session_raises_session_not_found(self, store: Store) -> None:
        with pytest.raises(SessionNotFound) as info:
            store.get_session("nope")
        assert isinstance(info.value, LookupError)
        assert info.value.session_id == "nope"
        with pytest.raises(SessionNotFound):
            store.set_session_status("nope", "completed")
        with pytest.raises(SessionNotFound):
            store.authority_epoch("nope")
        with pytest.raises(SessionNotFound):
            store.bump_authority_epoch("nope")

    def test_list_sessions_oldest_first(self, store: Store) -> None:
        for sid, created in (("b", 3000), ("a", 1000), ("c", 2000)):
            _new_session(store, sid, created_at_ms=created)
        assert [r.session_id for r in store.list_sessions()] == ["a", "c", "b"]
        assert [r.created_at_ms for r in store.list_sessions()] == [1000, 2000, 3000]

    def test_keys_among_and_positions_follow_the_listing(self, store: Store) -> None:
        """``session_keys_among`` and ``session_positions`` answer as the listing (``session_keys``) read
        in Python would, ties in ``created_at_ms`` broken by id as the listing breaks them, at every
        ``start``, for more ids than SQLite takes parameters."""
        rows = [
            ("b", 3000, "running"),
            ("a", 1000, "suspended"),
            ("c", 2000, "completed"),
            ("B", 1000, "queued"),
        ]
        rows += [
            ("a:x", 1000, "suspended"),
            ("é", 2000, "running"),
            ("z", 4000, "cancelled"),
            ("Z", 2000, "failed"),
        ]
        for sid, created, status in rows:
            _new_session(store, sid, created_at_ms=created, status=status)
        keys = store.session_keys()
        assert [k[0] for k in keys] == [r.session_id for r in store.list_sessions()]
        many = [f"none-{i}" for i in range(40_000)] + ["c"]
        for ids in ([], ["a", "z", "nope"], [k[0] for k in keys], many):
            wanted = set(ids)
            found = [(i, k) for i, k in enumerate(keys) if k[0] in wanted or k[1] == "suspended"]
            for start in range(len(keys) + 2):
                before = sum(1 for i, _ in found if i < start)
                assert store.session_keys_among(ids, "suspended", start) == (before, [k for _, k in found])
        assert store.session_keys_among(["a"], "nothing") == (0, [k for k in keys if k[0] == "a"])
        assert store.session_positions([*(sid for sid, _, _ in rows), "nope"]) == {
            k[0]: i for i, k in enumerate(keys)
        }
        assert store.session_positions([]) == {}

    def test_a_row_with_a_null_id_is_in_no_listing(self, store: Store, store_null_id: NullId) -> None:
        """A ``sessions`` row whose id is NULL (an outside edit) names no session: every listing leaves it
        out alike, so ``session_keys_among``'s ``before`` and ``session_positions`` count the sessions
        ``session_keys`` and ``list_sessions`` list (the approvals queue's pages, its ``later`` link)."""
        for sid, created, status in (
            ("a", 1000, "suspended"),
            ("b", 1000, "running"),
            ("c", 2000, "suspended"),
        ):
            _new_session(store, sid, created_at_ms=created, status=status)
        for created in (0, 1000, 3000):
            store_null_id(store, created, "suspended")
        keys = store.session_keys()
        assert [k[0] for k in keys] == ["a", "b", "c"]
        assert [r.session_id for r in store.list_sessions()] == ["a", "b", "c"]
        assert store.session_positions(["a", "b", "c"]) == {"a": 0, "b": 1, "c": 2}
        for start in range(5):  # a, c by their status, b by its id: every session, min(start, 3) before
            assert store.session_keys_among(["b"], "suspended", start) == (min(start, 3), keys), start
            assert store.session_keys_among([], "suspended", start) == (
                min(start, 3) - (start > 1),
                [keys[0], keys[2]],
            )

    def test_list_sessions_and_session_keys_never_hand_over_an_id_that_is_not_text(
        self, store: Store, store_odd_id: OddId
    ) -> None:
        """A BLOB id and a TEXT id whose bytes are not UTF-8 (outside edits): ``list_sessions`` yields
        neither (it yielded the BLOB one as ``bytes``, against its ``str`` type; no session is found by
        it), ``session_keys`` and ``session_keys_among`` list both under their bytes decoded with
        ``backslashreplace``, as ``str`` (they raised on the TEXT one), so the approvals queue counts and
        names them; ``unnamed_sessions`` names every one."""
        for created, sid in enumerate(["a", "b", "c", "d"]):
            _new_session(store, sid, created_at_ms=1000 + created, status="running")
        store_odd_id(store, "b", b"b", False)
        store_odd_id(store, "c", b"\xffc", True)
        store_odd_id(store, "d", b"\xffd", False)
        assert [r.session_id for r in store.list_sessions()] == ["a"]
        keys = store.session_keys()
        assert [(k[0], k[1]) for k in keys] == [
            ("a", "running"),
            ("b", "running"),
            ("\\xffc", "running"),
            ("\\xffd", "running"),
        ]
        assert all(isinstance(k[0], str) for k in keys)
        assert store.session_keys_among([], "running", 0) == (0, keys)
        assert store.session_keys_among(["b"], "nothing", 4) == (1, [keys[1]])
        assert len(store.unnamed_sessions()) == 3

    def test_an_id_that_is_not_text_is_found_by_the_spelling_the_listing_gives(
        self, store: Store, store_odd_id: OddId
    ) -> None:
        """Every lookup of many ids finds a row by the one spelling :meth:`Store.session_keys` lists it
        under (its bytes decoded with ``backslashreplace``): a TEXT id and a BLOB id whose bytes are not
        UTF-8 (outside edits) are found by ``session_keys_among`` and ``session_positions`` as the listing
        counts them, and ``unnamed_sessions`` names them so too (the TEXT one was named in hex and neither
        was found: the approvals queue left them out of the page the listing counted them on)."""
        for created, sid in enumerate(["a", "b", "c", "d"]):
            _new_session(store, sid, created_at_ms=1000 + created, status="running")
        store_odd_id(store, "b", b"\xffb", True)
        store_odd_id(store, "c", b"c\xfe\xff", False)
        keys = store.session_keys()
        spellings = ["a", "\\xffb", "c\\xfe\\xff", "d"]
        assert [k[0] for k in keys] == spellings
        assert store.session_positions([*spellings, "\\xff", "b"]) == {
            sid: i for i, sid in enumerate(spellings)
        }
        for start in range(5):
            assert store.session_keys_among(spellings[1:3], "nothing", start) == (
                sum(1 for i in (1, 2) if i < start),
                keys[1:3],
            ), start
        assert store.session_keys_among(["\\xffb"], "running", 0) == (0, keys)  # by status and id: once
        assert sorted(row.session_id or "" for row in store.unnamed_sessions()) == sorted(spellings[1:3])
        assert [r.session_id for r in store.list_sessions()] == ["a", "d"]  # only text: no filter needed

    def test_unnamed_sessions_names_a_null_id_row(self, store: Store, store_null_id: NullId) -> None:
        """A ``sessions`` row whose id is NULL is in no listing, and ``unnamed_sessions`` names it (with its
        ``created_at_ms`` and status) so ``verify --all`` can report it; the sessions with ids are not."""
        _new_session(store, "a", created_at_ms=1000, status="running")
        assert store.unnamed_sessions() == []
        store_null_id(store, 2000, "suspended")
        assert store.unnamed_sessions() == [(None, "null", 2000, "suspended")]
        assert [r.session_id for r in store.list_sessions()] == ["a"]

    def test_orphan_events_names_rows_no_session_holds(self, store: Store, store_past_head: PastHead) -> None:
        """``events`` rows whose session id has no ``sessions`` row (an outside write) are named with their
        count, ordered by id; a session's own rows, and a session with none, are not."""
        _new_session(store, "a")
        _new_session(store, "empty")
        rows = _append(store, "a", ["x", "y"])
        assert store.orphan_events() == []
        for row in rows:
            store_past_head(store, "ghost", row)
        store_past_head(store, "b-ghost", rows[0])
        assert store.orphan_events() == [("b-ghost", 1), ("ghost", 2)]
        assert [r.session_id for r in store.list_sessions()] == ["a", "empty"]

    def test_orphan_effects_names_effect_rows_no_session_holds(self, store: Store) -> None:
        """``external_effects`` rows whose session id has no ``sessions`` row (an outside write, or a session
        deleted under them) are named with their count, ordered by id; a session's own rows are not."""
        _new_session(store, "a")
        store.record_intent("a", "a:1:c1", "a" * 64, "{}")
        assert store.orphan_effects() == []
        for key in ("g:1", "g:2"):
            store.record_intent("ghost", key, "b" * 64, "{}")
        store.record_intent("b-ghost", "b:1", "c" * 64, "{}")
        store.complete_effect("ghost", "g:2", "{}")  # completed or pending: no session holds it
        assert store.orphan_effects() == [("b-ghost", 1), ("ghost", 2)]

    def test_ledger_marks_move_with_the_events_rows_not_the_session_row(
        self, store: Store, store_past_head: PastHead
    ) -> None:
        """``ledger_marks`` reads the ``events`` rows: an append moves a session's mark, and so does a row
        stored past the head (an outside edit that leaves the ``sessions`` row as it was); a session with
        no rows, or none of that id, is left out."""
        for sid in ("s-1", "s-2", "empty"):
            _new_session(store, sid)
        _append(store, "s-1", ["a", "b"])
        _append(store, "s-2", ["c"])
        marks = store.ledger_marks(["s-1", "s-2", "empty", "nope"])
        assert set(marks) == {"s-1", "s-2"}
        rows = {sid: list(store.read_events(sid)) for sid in ("s-1", "s-2")}
        for sid, (count, last, digest, _) in marks.items():
            assert (count, last, digest) == (len(rows[sid]), rows[sid][-1].seq, rows[sid][-1].hash)
        assert store.ledger_marks([]) == {}
        head = store.get_session("s-1")
        past, _ = chained_rows(["d"], start=head.head_seq + 1, prev=head.head_hash)
        store_past_head(store, "s-1", past[0])
        assert store.get_session("s-1").head_seq == head.head_seq  # the row did not move
        moved = store.ledger_marks(["s-1", "s-2"])
        assert moved["s-1"][:2] == (3, head.head_seq + 1) and moved["s-1"] != marks["s-1"]
        assert moved["s-2"] == marks["s-2"]

    def test_no_session_an_honest_writer_creates_is_unnamed(self, store: Store) -> None:
        for sid, created in (("a", 1000), ("b", 1000), ("c", 2000)):
            _new_session(store, sid, created_at_ms=created, status="suspended")
        assert store.unnamed_sessions() == []

    def test_set_session_status_is_not_a_ledger_row(self, store: Store) -> None:
        _new_session(store)
        _append(store, "s-1", [1])
        store.set_session_status("s-1", "completed")
        record = store.get_session("s-1")
        assert record.status == "completed"
        assert record.head_seq == 0
        assert len(list(store.read_events("s-1"))) == 1

    # ─── events: bytes, head, atomicity ───────────────────────────────────────────────────
    def test_event_bytes_come_back_identical(self, store: Store) -> None:
        _new_session(store)
        payloads: list[Any] = [
            {"text": 'line\u2028sep\u2029 emoji 🦜 zero-width \u200b tab\t quote" backslash\\'},
            b"\x00\xff\xfe not json, not utf-8 \x80",
            {"big": "x" * 300_000},
            b"",
        ]
        rows, head = chained_rows(payloads)
        stamp = store.append_events("s-1", rows, head)
        stored = list(store.read_events("s-1"))
        assert [type(s.event_bytes) for s in stored] == [bytes] * len(rows)
        assert [s.event_bytes for s in stored] == [r.event_bytes for r in rows]
        assert [(s.seq, s.kind, s.prev_hash, s.hash) for s in stored] == [
            (r.seq, r.kind, r.prev_hash, r.hash) for r in rows
        ]
        assert {s.session_id for s in stored} == {"s-1"}
        assert {s.recorded_at_ms for s in stored} == {stamp}
        assert verify_rows("s-1", stored, decode=False).ok

    def test_rows_keep_the_times_given_per_row(self, store: Store) -> None:
        _new_session(store)
        rows, head = chained_rows([1, 2, 3])
        source_times = [1_700_000_000_000, 1_700_000_000_000, 1_700_000_061_500]  # an imported transcript's
        stamp = store.append_events("s-1", rows, head, recorded_at_ms=source_times)
        assert [s.recorded_at_ms for s in store.read_events("s-1")] == source_times
        assert store.get_session("s-1").updated_at_ms == stamp  # the session moved at append time
        more, head = chained_rows([4], start=3, prev=rows[-1].hash)
        with pytest.raises(ValueError):
            store.append_events("s-1", more, head, recorded_at_ms=[1, 2])  # not one time per row
        assert store.get_session("s-1").head_seq == 2

    def test_append_moves_the_session_head(self, store: Store) -> None:
        _new_session(store)
        rows, head = chained_rows([1, 2, 3])
        store.append_events("s-1", rows, head)
        record = store.get_session("s-1")
        assert (record.head_seq, record.head_hash, record.merkle_root) == (2, rows[-1].hash, head.root)
        assert record.events == 3

    def test_batch_with_one_taken_seq_writes_nothing(self, store: Store) -> None:
        _new_session(store)
        _append(store, "s-1", [0, 1, 2])
        before = _snapshot(store, "s-1")
        good, _ = chained_rows([3, 4], start=3, prev=before[1][-1].hash)
        taken = NewEvent(2, "custom", _custom_bytes("again"), before[1][1].hash, "0" * 64)
        head = SessionHead(4, good[-1].hash, "f" * 64)
        with pytest.raises(AppendConflict) as info:
            store.append_events("s-1", [*good, taken], head)
        assert info.value.session_id == "s-1"
        assert _snapshot(store, "s-1") == before

    def test_duplicate_seq_raises_append_conflict_and_keeps_the_first(self, store: Store) -> None:
        _new_session(store)
        first = _append(store, "s-1", ["a", "b", "c"])
        before = _snapshot(store, "s-1")
        rival, head = chained_rows(["rival"], start=2, prev=first[1].hash)
        with pytest.raises(AppendConflict) as info:
            store.append_events("s-1", rival, head)
        assert (info.value.session_id, info.value.seq) == ("s-1", 2)
        assert _snapshot(store, "s-1") == before

    def test_append_conflict_names_the_taken_seq(self, store: Store) -> None:
        _new_session(store)
        existing = _append(store, "s-1", [0, 1, 2])
        good, _ = chained_rows([3, 4], start=3, prev=existing[-1].hash)
        taken = NewEvent(2, "custom", _custom_bytes("again"), existing[1].hash, "0" * 64)
        with pytest.raises(AppendConflict) as info:
            store.append_events("s-1", [*good, taken], SessionHead(4, good[-1].hash, "f" * 64))
        assert info.value.seq == 2

    @pytest.mark.parametrize("in_transaction", [False, True])
    @pytest.mark.parametrize(
        ("shape", "past"),
        [("one", 0), ("batch", 0), ("batch", 2), ("repeated", 1), ("gap", 2)],
    )
    def test_a_row_stored_past_the_head_refuses_the_batch_naming_its_seq(
        self, store: Store, store_past_head: PastHead, shape: str, past: int, in_transaction: bool
    ) -> None:
        """A store edited outside flightlog holds a row past the session's head: an append whose rows
        reach its seq raises ``AppendConflict`` naming that seq (the lowest that cannot be written), and
        writes none of its rows (those before the taken one included), in a transaction or not; the head
        stays. ``repeated``: the batch also repeats a later seq; ``gap``: its seqs skip one (shapes a
        backend may send down another path than its batch of consecutive rows)."""
        _new_session(store)
        existing = _append(store, "s-1", ["a", "b"])
        rows, head = chained_rows(
            [f"n{i}" for i in range(1 if shape == "one" else 4)], start=2, prev=existing[-1].hash
        )
        if shape == "repeated":
            rows = [*rows, rows[-1]]
        elif shape == "gap":
            rows = [*rows[:1], *rows[2:]]
        outside = rows[past]
        store_past_head(store, "s-1", outside)
        before = _snapshot(store, "s-1")
        assert before[0].head_seq == 1 and [e.seq for e in before[1]] == [0, 1, outside.seq]
        with pytest.raises(AppendConflict) as info:
            if in_transaction:
                with store.transaction():
                    store.append_events("s-1", rows, head)
            else:
                store.append_events("s-1", rows, head)
        assert (info.value.session_id, info.value.seq) == ("s-1", outside.seq)
        assert _snapshot(store, "s-1") == before

    def test_stale_epoch_raises_stale_writer_and_writes_nothing(self, store: Store) -> None:
        _new_session(store)
        _append(store, "s-1", ["a"])
        assert store.bump_authority_epoch("s-1") == 1
        before = _snapshot(store, "s-1")
        rows, head = chained_rows(["late"], start=1, prev=before[1][-1].hash)
        with pytest.raises(StaleWriter) as info:
            store.append_events("s-1", rows, head, epoch=0)
        assert (info.value.session_id, info.value.epoch, info.value.current_epoch) == ("s-1", 0, 1)
        assert _snapshot(store, "s-1") == before
        store.append_events("s-1", rows, head, epoch=1)
        assert [e.seq for e in store.read_events("s-1")] == [0, 1]

    @pytest.mark.parametrize("size", [1, 3])
    @pytest.mark.parametrize("wrong", ["epoch", "prev_hash", "seq_ahead", "seq_behind", "session"])
    def test_refused_append_in_a_transaction_writes_nothing(
        self, store: Store, wrong: str, size: int
    ) -> None:
        """Inside an open transaction (a recorder's, where a backend may check the head and the fencing
        token inside the write itself) a refused batch raises the error the checks name, writes nothing,
        and leaves the transaction usable: the right append after it commits."""
        _new_session(store)
        _append(store, "s-1", ["a", "b"])
        assert store.bump_authority_epoch("s-1") == 1
        before = _snapshot(store, "s-1")
        tree = CompactRange()
        for row in before[1]:
            tree.append(leaf_hash(row.event_bytes))
        good, head = chained_rows(list(range(size)), start=2, prev=before[1][-1].hash, tree=tree)
        rows, epoch, session = good, 1, "s-1"
        if wrong == "epoch":
            epoch = 0
        elif wrong == "prev_hash":
            rows = [dataclasses.replace(good[0], prev_hash="0" * 64), *good[1:]]
        elif wrong == "seq_ahead":
            rows, _ = chained_rows(list(range(size)), start=3, prev=before[1][-1].hash)
        elif wrong == "seq_behind":
            rows, _ = chained_rows(list(range(size)), start=1, prev=before[1][0].hash)
        else:
            session = "s-missing"
        expected: type[Exception] = {"epoch": StaleWriter, "session": SessionNotFound}.get(
            wrong, AppendConflict
        )
        with store.transaction():
            with pytest.raises(expected) as info:
                store.append_events(session, rows, head, epoch=epoch)
            assert _snapshot(store, "s-1") == before
            store.append_events("s-1", good, head, epoch=1)
        if isinstance(info.value, StaleWriter):
            assert (info.value.epoch, info.value.current_epoch) == (0, 1)
        if isinstance(info.value, AppendConflict):
            assert info.value.seq == (1 if wrong == "seq_behind" else 2)
        assert [e.seq for e in store.read_events("s-1")] == list(range(2 + size))
        assert store.get_session("s-1").head_seq == 1 + size

    def test_bump_authority_epoch_increments(self, store: Store) -> None:
        _new_session(store)
        assert [store.bump_authority_epoch("s-1") for _ in range(3)] == [1, 2, 3]
        assert store.authority_epoch("s-1") == 3

    # ─── streaming reads ──────────────────────────────────────────────────────────────────
    def test_read_events_streams_many_rows_in_order(self, store: Store) -> None:
        _new_session(store)
        written: list[NewEvent] = []
        for chunk in range(4):
            written += _append(store, "s-1", [{"i": chunk * 300 + i} for i in range(300)])
        stream = store.read_events("s-1")
        assert isinstance(stream, Iterator)
        first = next(stream)
        rest = list(stream)
        stored = [first, *rest]
        assert [e.seq for e in stored] == list(range(1200))
        assert [e.event_bytes for e in stored] == [r.event_bytes for r in written]
        assert verify_rows("s-1", iter(stored)).ok

    @pytest.mark.parametrize(
        ("start", "stop", "expected"),
        [
            (0, None, range(0, 1100)),
            (0, 1, range(0, 1)),
            (10, 20, range(10, 20)),
            (500, 1050, range(500, 1050)),
            (1099, None, range(1099, 1100)),
            (1099, 5000, range(1099, 1100)),
            (500, 500, range(0)),
            (20, 10, range(0)),
            (1100, None, range(0)),
        ],
    )
    def test_read_events_ranges(self, store: Store, start: int, stop: int | None, expected: range) -> None:
        _new_session(store)
        _append(store, "s-1", list(range(1100)))
        assert [e.seq for e in store.read_events("s-1", start=start, stop=stop)] == list(expected)

    @pytest.mark.parametrize(("start", "stop"), [(0, None), (10, 20), (500, 1050), (1099, None), (20, 10)])
    def test_read_chain_pages_the_rows_read_events_gives(
        self, store: Store, start: int, stop: int | None
    ) -> None:
        _new_session(store)
        _append(store, "s-1", list(range(1100)))
        pages = list(store.read_chain("s-1", start=start, stop=stop))
        assert all(isinstance(page, list) and page for page in pages)
        rows = [row for page in pages for row in page]
        assert rows == [
            (e.seq, e.event_bytes, e.prev_hash, e.hash)
            for e in store.read_events("s-1", start=start, stop=stop)
        ]
        assert all(type(row[1]) is bytes for row in rows)
        # the base class's default (pages of 512 over read_events), for a backend that keeps it
        default = list(Store.read_chain(store, "s-1", start=start, stop=stop))
        assert default == [rows[i : i + 512] for i in range(0, len(rows), 512)]
        # kinds=True: the same rows with the stored kind column fifth (what a decoding verify compares)
        kinded = [row for page in store.read_chain("s-1", start=start, stop=stop, kinds=True) for row in page]
        events = store.read_events("s-1", start=start, stop=stop)
        assert kinded == [(*row, e.kind) for row, e in zip(rows, events, strict=True)]
        assert [
            row for page in Store.read_chain(store, "s-1", start=start, stop=stop, kinds=True) for row in page
        ] == kinded

    def test_reads_do_not_mix_sessions(self, store: Store) -> None:
        _new_session(store, "s-1")
        _new_session(store, "s-2")
        a = _append(store, "s-1", ["a0", "a1"])
        b = _append(store, "s-2", ["b0"])
        assert [e.event_bytes for e in store.read_events("s-1")] == [r.event_bytes for r in a]
        assert [e.event_bytes for e in store.read_events("s-2")] == [r.event_bytes for r in b]
        assert list(store.read_events("unknown")) == []

    # ─── transactions ─────────────────────────────────────────────────────────────────────
    def test_transaction_groups_writes_all_or_nothing(self, store: Store) -> None:
        _new_session(store)
        with pytest.raises(RuntimeError, match="boom"), store.transaction():
            _append(store, "s-1", ["a"])
            store.record_checkpoint("s-1", 1, "ab" * 32, "body")
            raise RuntimeError("boom")
        assert list(store.read_events("s-1")) == []
        assert store.checkpoints("s-1") == []
        assert store.get_session("s-1").head_seq == -1

    def test_nested_transaction_rolls_back_alone(self, store: Store) -> None:
        _new_session(store)
        with store.transaction():
            _append(store, "s-1", ["kept"])
            with pytest.raises(RuntimeError), store.transaction():
                store.record_checkpoint("s-1", 1, "ab" * 32, "dropped")
                raise RuntimeError("inner")
            store.record_checkpoint("s-1", 1, "cd" * 32, "kept")
        assert [c.body for c in store.checkpoints("s-1")] == ["kept"]
        assert [e.seq for e in store.read_events("s-1")] == [0]

    # ─── external effects ─────────────────────────────────────────────────────────────────
    def test_effect_intent_same_bytes_is_a_noop(self, store: Store) -> None:
        _new_session(store)
        assert store.record_intent("s-1", "k1", "aa" * 32, '{"op":"pay"}') is True
        first = store.get_effect("s-1", "k1")
        assert store.record_intent("s-1", "k1", "aa" * 32, '{"op":"pay"}') is False
        assert store.get_effect("s-1", "k1") == first
        assert first is not None
        assert (first.intent_hash, first.intent_json, first.status) == ("aa" * 32, '{"op":"pay"}', "pending")
        assert (first.result_json, first.completed_at_ms) == (None, None)

    def test_effect_intent_other_bytes_raise_effect_conflict(self, store: Store) -> None:
        _new_session(store)
        store.record_intent("s-1", "k1", "aa" * 32, '{"op":"pay"}')
        first = store.get_effect("s-1", "k1")
        with pytest.raises(EffectConflict) as info:
            store.record_intent("s-1", "k1", "bb" * 32, '{"op":"refund"}')
        err = info.value
        assert (err.idempotency_key, err.stored_hash, err.new_hash) == ("k1", "aa" * 32, "bb" * 32)
        assert store.get_effect("s-1", "k1") == first

    def test_effect_keys_are_per_session(self, store: Store) -> None:
        _new_session(store, "s-1")
        _new_session(store, "s-2")
        assert store.record_intent("s-1", "k", "aa" * 32, "1") is True
        assert store.record_intent("s-2", "k", "bb" * 32, "2") is True
        assert store.get_effect("s-2", "k") is not None
        assert store.get_effect("s-3", "k") is None

    def test_effect_completes_once(self, store: Store) -> None:
        _new_session(store)
        store.record_intent("s-1", "k1", "aa" * 32, "{}")
        assert store.complete_effect("s-1", "k1", '{"ok":true}') is True
        done = store.get_effect("s-1", "k1")
        assert done is not None
        assert (done.status, done.result_json) == ("completed", '{"ok":true}')
        assert done.completed_at_ms is not None
        assert store.complete_effect("s-1", "k1", '{"ok":true}') is False
        with pytest.raises(EffectConflict) as info:
            store.complete_effect("s-1", "k1", '{"ok":false}')
        assert info.value.idempotency_key == "k1"
        assert info.value.stored_hash != info.value.new_hash
        assert store.get_effect("s-1", "k1") == done

    def test_a_fenced_writer_records_and_completes_no_effect(self, store: Store) -> None:
        # The epoch is the fencing token of effect rows too: after a bump, the old holder can neither record
        # an intent nor complete one (nor learn a result through EffectConflict); the new holder can.
        _new_session(store)
        assert store.record_intent("s-1", "k1", "aa" * 32, "{}", epoch=0) is True
        now = store.bump_authority_epoch("s-1")
        with pytest.raises(StaleWriter) as info:
            store.complete_effect("s-1", "k1", '{"ok":"stale"}', epoch=0)
        assert (info.value.session_id, info.value.epoch, info.value.current_epoch) == ("s-1", 0, now)
        with pytest.raises(StaleWriter):
            store.record_intent("s-1", "k2", "bb" * 32, "{}", epoch=0)
        record = store.get_effect("s-1", "k1")
        assert record is not None and (record.status, record.result_json) == ("pending", None)
        assert store.get_effect("s-1", "k2") is None
        assert store.complete_effect("s-1", "k1", '{"ok":true}', epoch=now) is True
        with pytest.raises(StaleWriter):  # completed already, other bytes: still the fence first
            store.complete_effect("s-1", "k1", '{"ok":false}', epoch=0)
        with pytest.raises(SessionNotFound):
            store.complete_effect("s-404", "k1", "{}", epoch=0)

    def test_completion_without_intent_raises_lookup_error(self, store: Store) -> None:
        _new_session(store)
        with pytest.raises(LookupError):
            store.complete_effect("s-1", "never-intended", "{}")
        assert store.get_effect("s-1", "never-intended") is None

    def test_pending_effects_lists_in_doubt_intents(self, store: Store) -> None:
        _three_effects(store)
        assert [e.idempotency_key for e in store.pending_effects("s-1")] == ["k2"]
        assert {(e.session_id, e.idempotency_key) for e in store.pending_effects()} == {
            ("s-1", "k2"),
            ("s-2", "k3"),
        }
        assert all(e.status == "pending" for e in store.pending_effects())

    def test_session_effects_lists_every_row_of_one_session_oldest_first(self, store: Store) -> None:
        _three_effects(store)
        rows = store.session_effects("s-1")
        assert [(e.idempotency_key, e.status, e.result_json) for e in rows] == [
            ("k1", "completed", "done"),
            ("k2", "pending", None),
        ]
        assert rows == [store.get_effect("s-1", "k1"), store.get_effect("s-1", "k2")]
        assert store.session_effects("no-such-session") == []

    # ─── artifacts ────────────────────────────────────────────────────────────────────────
    def test_artifacts_are_content_addressed_and_deduplicated(self, store: Store) -> None:
        content = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 10
        digest = hashlib.sha256(content).hexdigest()
        first = store.put_artifact(content, "image/png")
        assert (first.sha256, first.media_type, first.size_bytes) == (digest, "image/png", len(content))
        assert first.handle == f"sha256:{digest}"
        again = store.put_artifact(content, "application/octet-stream")
        assert again == first
        assert store.artifact_info(digest) == first
        assert store.get_artifact(digest) == content
        assert store.get_artifact(first.handle) == content
        assert store.artifact_info("0" * 64) is None
        assert store.get_artifact("0" * 64) is None

    def test_several_artifacts_are_read_at_once(self, store: Store) -> None:
        contents = [bytes([i % 256]) * (i + 1) for i in range(1200)]
        records = [store.put_artifact(c, "application/octet-stream") for c in contents]
        wanted = (
            [r.handle for r in records[::2]] + [r.sha256 for r in records[1::400]] + ["sha256:" + "0" * 64]
        )
        found = store.get_artifacts(wanted)  # more handles than one statement's batch
        assert set(found) == set(wanted[:-1])  # keyed as given; the missing one left out
        assert all(found[h] == contents[2 * i] for i, h in enumerate(wanted[:600]))
        assert store.get_artifacts([]) == {}

    def test_an_altered_artifact_is_never_read(
        self, store: Store, store_alter_artifact: AlterArtifact
    ) -> None:
        """Bytes that do not hash to their digest are refused by every read, naming the artifact; the
        other artifacts of a batch read as before."""
        kept = store.put_artifact(b"kept", "text/plain")
        altered = store.put_artifact(b"original", "text/plain")
        store_alter_artifact(store, altered.sha256, b"forged")
        reads = (
            lambda: store.get_artifact(altered.sha256),
            lambda: store.get_artifact(altered.handle),
            lambda: store.get_artifacts([kept.handle, altered.handle]),
        )
        for read in reads:
            with pytest.raises(ArtifactIntegrityError) as caught:
                read()
            assert caught.value.handle == altered.handle
            assert "altered in the store" in str(caught.value)
        assert store.get_artifacts([kept.handle]) == {kept.handle: b"kept"}

    def test_empty_artifact(self, store: Store) -> None:
        record = store.put_artifact(b"", "text/plain")
        assert record.sha256 == hashlib.sha256(b"").hexdigest()
        assert record.size_bytes == 0
        assert store.get_artifact(record.sha256) == b""

    # ─── checkpoints, grants, imports ─────────────────────────────────────────────────────
    def test_checkpoints_are_recorded_and_listed_oldest_first(self, store: Store) -> None:
        _new_session(store, "s-1")
        _new_session(store, "s-2")
        first = store.record_checkpoint("s-1", 3, "aa" * 32, "body-3")
        second = store.record_checkpoint("s-1", 7, "bb" * 32, "body-7")
        store.record_checkpoint("s-2", 1, "cc" * 32, "other")
        assert second > first
        listed = store.checkpoints("s-1")
        assert [(c.checkpoint_id, c.size, c.root, c.body) for c in listed] == [
            (first, 3, "aa" * 32, "body-3"),
            (second, 7, "bb" * 32, "body-7"),
        ]
        assert {c.session_id for c in listed} == {"s-1"}
        assert store.checkpoints("unknown") == []

    def test_grant_policy_same_bytes_noop_other_bytes_error(self, store: Store) -> None:
        _new_session(store)
        store.record_grant_policy("s-1", "p1", '{"allow":["read"]}')
        store.record_grant_policy("s-1", "p1", '{"allow":["read"]}')
        store.record_grant_policy("s-1", "p0", '{"allow":[]}')
        with pytest.raises(StoreError):
            store.record_grant_policy("s-1", "p1", '{"allow":["write"]}')
        assert store.grant_policies("s-1") == [("p1", '{"allow":["read"]}'), ("p0", '{"allow":[]}')]
        assert store.grant_policies("other") == []

    def test_imports_are_remembered_by_source_sha256(self, store: Store) -> None:
        _new_session(store)
        record = ImportRecord("ab" * 32, "s-1", "claude-code", "1", "session.jsonl", 1234)
        assert store.find_import("ab" * 32) is None
        store.record_import(record)
        assert store.find_import("ab" * 32) == record

    # ─── read-only handles ────────────────────────────────────────────────────────────────
    def test_read_only_handle_reads_everything(self, store: Store, reopen_read_only: Reopen) -> None:
        _new_session(store)
        rows = _append(store, "s-1", ["a", {"b": 2}])
        art = store.put_artifact(b"bytes", "text/plain")
        store.record_intent("s-1", "k", "aa" * 32, "{}")
        store.open_lease("s-1")
        ro = reopen_read_only(store)
        assert ro.read_only is True
        assert ro.get_lease("s-1") == store.get_lease("s-1") == LeaseRecord("s-1", None, 0, 0, 0, -2)
        assert ro.get_session("s-1") == store.get_session("s-1")
        assert [e.event_bytes for e in ro.read_events("s-1")] == [r.event_bytes for r in rows]
        assert ro.get_artifact(art.sha256) == b"bytes"
        assert ro.pending_effects("s-1") == store.pending_effects("s-1")
        assert ro.schema_version() == store.schema_version()
        assert ro.resolve_session("s-") == "s-1"

    @pytest.mark.parametrize("write", sorted(_WRITES))
    def test_read_only_handle_refuses_writes(
        self, store: Store, reopen_read_only: Reopen, write: str
    ) -> None:
        _new_session(store)
        _append(store, "s-1", ["a"])
        store.record_intent("s-1", "k", "aa" * 32, "{}")
        store.open_lease("s-1")
        before = (
            _snapshot(store, "s-1"),
            store.authority_epoch("s-1"),
            store.get_effect("s-1", "k"),
            store.get_lease("s-1"),
        )
        ro = reopen_read_only(store)
        with pytest.raises(ReadOnlyStore) as info:
            _WRITES[write](ro)
        assert isinstance(info.value, StoreError)
        after = (
            _snapshot(store, "s-1"),
            store.authority_epoch("s-1"),
            store.get_effect("s-1", "k"),
            store.get_lease("s-1"),
        )
        assert after == before
        assert store.get_artifact(hashlib.sha256(b"new").hexdigest()) is None
        assert store.checkpoints("s-1") == []
        assert store.grant_policies("s-1") == []
        assert [r.session_id for r in store.list_sessions()] == ["s-1"]

    def test_read_only_handle_refuses_a_transaction(self, store: Store, reopen_read_only: Reopen) -> None:
        ro = reopen_read_only(store)
        with pytest.raises(ReadOnlyStore), ro.transaction():
            pass

    # ─── migrations ───────────────────────────────────────────────────────────────────────
    def test_migrating_again_changes_nothing(self, store: Store, reopen: Reopen) -> None:
        version = store.schema_version()
        assert version >= 1
        _new_session(store)
        rows = _append(store, "s-1", ["a", "b"])
        store.put_artifact(b"kept", "text/plain")
        store.record_intent("s-1", "k", "aa" * 32, "{}")
        before = _snapshot(store, "s-1")
        for _ in range(2):
            again = reopen(store)
            assert again.schema_version() == version
            assert _snapshot(again, "s-1") == before
            assert [e.event_bytes for e in again.read_events("s-1")] == [r.event_bytes for r in rows]
            assert again.get_artifact(hashlib.sha256(b"kept").hexdigest()) == b"kept"
            assert [e.idempotency_key for e in again.pending_effects()] == ["k"]
        assert store.schema_version() == version

    # ─── session ids ──────────────────────────────────────────────────────────────────────
    def test_resolve_session(self, store: Store) -> None:
        for sid in ("abc123", "abc1234", "abd999", "claude-code:f00dcafe", "codex:beef01", "a_x", "ayy"):
            _new_session(store, sid)
        assert store.resolve_session("abc123") == "abc123"  # exact wins over a longer match
        assert store.resolve_session("abc1234") == "abc1234"
        assert store.resolve_session("abd") == "abd999"
        assert store.resolve_session("claude-code:f0") == "claude-code:f00dcafe"
        assert store.resolve_session("f00d") == "claude-code:f00dcafe"  # after the format: part
        assert store.resolve_session("beef") == "codex:beef01"
        assert store.resolve_session("a_") == "a_x"  # LIKE wildcards are literal

    def test_an_exact_lookup_of_a_prefix_says_how_to_resolve_it(self, store: Store) -> None:
        """``get_session`` (what every Python entry point taking a session id uses) takes the full id; a
        prefix the command line would resolve is refused with a message naming ``resolve_session``."""
        _new_session(store, "claude-code:491e126e")
        with pytest.raises(SessionNotFound) as info:
            store.get_session("491e")
        assert info.value.exact and info.value.session_id == "491e"
        assert "store.resolve_session('491e')" in str(info.value) and "full id" in str(info.value)
        assert store.get_session(store.resolve_session("491e")).session_id == "claude-code:491e126e"

    def test_a_session_recorded_under_another_key_is_found_by_its_sources_id(self, store: Store) -> None:
        """A Claude Code file imported before its ``sessionId`` line is recorded under its stem; its identity
        row names the real id, so that id or a prefix of it (as a session id's) finds the session, its
        sub-agent's row does not make the prefix ambiguous, and a plain sha256 dedup row is no id."""
        real = "claude-code:55604662-cf2a-4331-851a-ec234028f8ca"
        _new_session(store, "claude-code:renamed-copy")
        _new_session(store, "claude-code:renamed-copy:agent:a1", parent_session_id="claude-code:renamed-copy")
        for key, sid in (
            (f"source:{real}", "claude-code:renamed-copy"),
            (f"source:{real}:agent:a1", "claude-code:renamed-copy:agent:a1"),
            ("5560aa" + "0" * 58, "claude-code:renamed-copy"),
        ):
            store.record_import(ImportRecord(key, sid, "claude-code", "1", "renamed-copy.jsonl", 0))
        assert store.resolve_session("5560") == "claude-code:renamed-copy"
        assert store.resolve_session(real) == "claude-code:renamed-copy"
        assert store.resolve_session("claude-code:5560") == "claude-code:renamed-copy"
        assert store.resolve_session(real + ":agent:a") == "claude-code:renamed-copy:agent:a1"
        with pytest.raises(SessionNotFound):
            store.resolve_session("5560aa0")  # a dedup row's sha256 is not a session's id
        _new_session(store, "claude-code:other")
        store.record_import(
            ImportRecord("source:claude-code:5560ff", "claude-code:other", "claude-code", "1", "o", 0)
        )
        with pytest.raises(SessionNotFound) as two:
            store.resolve_session("5560")
        assert two.value.matches == ("claude-code:other", "claude-code:renamed-copy")

    def test_a_prefix_names_a_session_apart_from_its_own_streams(self, store: Store) -> None:
        """A Claude Code session's sub-agents (``<id>:agent:<x>``, nested ``...:task:<y>``) match any prefix
        of it: they do not make the prefix ambiguous, a second parent does; a child whose id does not extend
        its parent's (a kernel sub-agent's hash id) is a session of its own."""
        _new_session(store, "claude-code:ab12")
        _new_session(store, "claude-code:ab12:agent:x", parent_session_id="claude-code:ab12")
        _new_session(store, "claude-code:ab12:agent:x:task:y", parent_session_id="claude-code:ab12:agent:x")
        _new_session(store, "claude-code:ab12:task:z", parent_session_id="claude-code:ab12")
        assert store.resolve_session("ab") == "claude-code:ab12"
        assert store.resolve_session("claude-code:a") == "claude-code:ab12"
        assert store.resolve_session("claude-code:ab12:agent") == "claude-code:ab12:agent:x"
        assert store.resolve_session("ab12:agent:x:t") == "claude-code:ab12:agent:x:task:y"
        _new_session(store, "claude-code:ab34")
        _new_session(store, "claude-code:ab34:agent:q", parent_session_id="claude-code:ab34")
        with pytest.raises(SessionNotFound) as two:
            store.resolve_session("ab")
        assert two.value.matches == ("claude-code:ab12", "claude-code:ab34")  # the parents, not their streams
        assert store.resolve_session("ab3") == "claude-code:ab34"
        _new_session(store, "k-1")
        _new_session(store, "k-9f", parent_session_id="k-1")  # a kernel child: its id is not "k-1:..."
        with pytest.raises(SessionNotFound) as kernel:
            store.resolve_session("k-")
        assert kernel.value.matches == ("k-1", "k-9f")

    def test_resolve_session_refuses_ambiguity_and_unknowns(self, store: Store) -> None:
        for sid in ("abc123", "abc456", "codex:abc789"):
            _new_session(store, sid)
        with pytest.raises(SessionNotFound) as info:
            store.resolve_session("abc")
        assert info.value.session_id == "abc"
        assert set(info.value.matches) == {"abc123", "abc456", "codex:abc789"}
        with pytest.raises(SessionNotFound) as none:
            store.resolve_session("zzz")
        assert none.value.matches == ()
        with pytest.raises(SessionNotFound):
            store.resolve_session("")
        with pytest.raises(SessionNotFound):
            store.resolve_session("%")

    # ─── ledger id, frontiers, latest checkpoint ──────────────────────────────────────────
    def test_ledger_id_frontiers_and_latest_checkpoint(self, store: Store, reopen: Reopen) -> None:
        ledger = store.ledger_id()
        assert len(ledger) == 32 and int(ledger, 16) >= 0
        assert reopen(store).ledger_id() == ledger
        _new_session(store)
        assert store.latest_checkpoint("s-1") is None
        ids = [store.record_checkpoint("s-1", n, f"{n:02x}" * 32, f"body-{n}") for n in (4, 8, 12)]
        store.record_checkpoint_frontier(ids[1], b"\x01" * 64)
        assert store.checkpoint_frontier(ids[1]) == b"\x01" * 64
        assert store.checkpoint_frontier(ids[0]) is None
        latest = store.latest_checkpoint("s-1")
        assert latest is not None and (latest.size, latest.body) == (12, "body-12")
        below = store.latest_checkpoint("s-1", max_size=11)
        assert below is not None and below.size == 8
        assert store.latest_checkpoint("s-1", max_size=3) is None

    # ─── retirement (flightlog db copy) ───────────────────────────────────────────────────
    @pytest.mark.parametrize("write", sorted(_RETIRED_WRITES))
    def test_a_retired_store_refuses_early_as_every_write_does(self, store: Store, write: str) -> None:
        _new_session(store)
        _append(store, "s-1", ["a"])
        store.record_intent("s-1", "k", "aa" * 32, "{}")
        store.open_lease("s-1")
        store.refuse_if_retired()  # live: nothing to refuse
        before = (_snapshot(store, "s-1"), store.authority_epoch("s-1"), store.get_effect("s-1", "k"))
        store.retire('{"state": "moved", "peer": "/live/ledger.db", "at_ms": 1700000000000}', "record")
        with pytest.raises(LedgerRetired) as early:
            store.refuse_if_retired()
        assert (early.value.url, early.value.state, early.value.peer) == (
            store.url,
            "moved",
            "/live/ledger.db",
        )
        with pytest.raises(LedgerRetired) as refused:
            _RETIRED_WRITES[write](store)
        assert str(refused.value) == str(early.value)  # one rule, one wording
        assert (_snapshot(store, "s-1"), store.authority_epoch("s-1"), store.get_effect("s-1", "k")) == before
        assert [r.session_id for r in store.list_sessions()] == ["s-1"]

    # ─── runs projection ──────────────────────────────────────────────────────────────────
    def test_run_rows_upsert_query_and_follow_the_session_status(self, store: Store) -> None:
        from ..runs.adapters import FOLD_VERSION

        # a fresh database is current for this fold version (bumping it takes a migration: ddl.RUNS_FOLD_2)
        assert store.run_projection_version() == FOLD_VERSION
        _new_session(store, "r-1")
        _new_session(store, "r-2")
        rows = [
            RunRow("r-1", None, "fleet", "running", None, 2000, 3, "running", '{"a":1}', "{}"),
            RunRow("r-2", "r-1", "direct", "terminal", "completed", 1000, 5, "completed", '{"b":2}', "{}"),
            RunRow("p-9", "r-1", "direct", "queued", None, 3000, -1, None, '{"c":3}', "{}"),
        ]
        store.put_run_rows(rows)
        assert store.get_run_rows(["r-1", "nope", "r-1"]) == {"r-1": rows[0]}
        assert [r.run_id for r in store.query_runs()] == ["p-9", "r-1", "r-2"]
        assert [r.run_id for r in store.query_runs(source="fleet")] == ["r-1"]
        assert [r.run_id for r in store.query_runs(parent="r-1", limit=1)] == ["p-9"]
        assert [r.run_id for r in store.query_runs(states=["terminal"])] == ["r-2"]
        assert store.query_runs(states=[]) == []
        store.set_session_status("r-1", "cancelled")
        assert store.get_run_rows(["r-1"])["r-1"].session_status == "cancelled"
        refined = {"cancelled": "paused", "completed": "terminal"}
        assert [r.run_id for r in store.query_runs(states=["paused"], refined_statuses=refined)] == ["r-1"]
        assert [r.run_id for r in store.query_runs(states=["running"], refined_statuses=refined)] == []
        assert store.settled_runs(["cancelled"]) == ["r-1"]  # in flight by its events, settled by its status
        assert store.settled_runs(["cancelled"], "running") == ["r-1"]
        assert store.settled_runs(["cancelled"], "queued") == []
        assert (
            store.settled_runs(["completed"]) == []
        )  # r-2's events end it: nothing for the status to settle
        assert Store.settled_runs(store, ["cancelled"]) == ["r-1"]  # the backend-neutral default
        moved = RunRow("r-1", None, "fleet", "waiting_tool", None, 4000, 4, "cancelled", "{}", '{"f":1}')
        store.put_run_rows([moved])
        assert store.get_run_rows(["r-1"])["r-1"] == moved
        store.set_run_projection_version(0)
        assert store.run_projection_version() == 0
        store.clear_run_rows()
        assert store.query_runs() == []

    def test_a_row_that_is_not_a_run_is_never_listed_or_paged(self, store: Store) -> None:
        """A ``NOT_A_RUN`` row (a session that holds no run) is kept for the projection but left out of
        every listing and page, whatever the filters, the status refinement or the sort (issue: an Agents SDK
        session used only as memory was listed as a stuck ``initializing`` run)."""
        _new_session(store, "run", task="chat with memory")
        _new_session(store, "mem", task="chat with memory")
        run = RunRow("run", None, "direct", "running", None, 2000, 3, "completed", '{"a":1}', "{}")
        memory = RunRow("mem", None, "direct", NOT_A_RUN, None, 3000, 2, "completed", '{"m":1}', "{}")
        store.put_run_rows([run, memory])
        assert store.get_run_rows(["mem"]) == {"mem": memory}  # kept: the fold resumes from it
        refined = {"completed": "terminal"}
        assert [r.run_id for r in store.query_runs()] == ["run"]
        assert [r.run_id for r in store.query_runs(source="direct", limit=5)] == ["run"]
        assert [r.run_id for r in store.query_runs(states=["terminal"], refined_statuses=refined)] == ["run"]
        assert [r[0] for r in store.query_run_tuples()] == ["run"]
        for sort in ("started", "updated"):
            for query in (
                RunPageQuery(sort=sort),
                RunPageQuery(sort=sort, descending=False, source="direct"),
                RunPageQuery(sort=sort, states=["terminal"], refined_statuses=refined),
                RunPageQuery(sort=sort, text="memory"),
            ):
                assert [r[0] for r in store.page_runs(query)] == ["run"], query

    def test_lock_run_rows_reads_the_rows_and_leaves_no_placeholder(self, store: Store) -> None:
        """``lock_run_rows`` (the projector's general path) answers as ``get_run_rows``; an absent id the
        transaction then writes is stored as written, one it does not write (the block failed) is not."""
        run = RunRow("r-1", None, "direct", "running", None, 1000, 2, "running", '{"a":1}', '{"v":1}')
        store.put_run_rows([run])
        with store.transaction():
            store.hold_run_rows()
            assert store.lock_run_rows(["r-1", "new", "r-1"]) == {"r-1": run}
            store.put_run_rows([run, dataclasses.replace(run, run_id="new")])
        assert store.get_run_rows(["r-1", "new"]) == {
            "r-1": run,
            "new": dataclasses.replace(run, run_id="new"),
        }
        with pytest.raises(KeyError), store.transaction():
            assert store.lock_run_rows(["gone", "r-1"]) == {"r-1": run}
            raise KeyError("abort")
        assert store.get_run_rows(["gone"]) == {}
        assert {r.run_id for r in store.query_runs()} == {"r-1", "new"}

    def test_replace_run_row_is_a_compare_and_set(self, store: Store) -> None:
        first = RunRow("r", None, "direct", "running", None, 1, 0, "running", "{}", '{"f":0}')
        store.put_run_rows([first])
        moved = RunRow("r", None, "direct", "waiting_tool", None, 2, 1, "running", '{"s":1}', '{"f":1}')
        assert store.replace_run_row(moved, first)
        assert store.get_run_rows(["r"]) == {"r": moved}
        later = RunRow("r", "p", "fleet", "terminal", "completed", 3, 2, "completed", "{}", '{"f":2}')
        assert not store.replace_run_row(later, first)  # the stored row is no longer ``first``
        # The comparison is of every column (session_status and fold would do against flightlog's own
        # writers; the rest catch a row edited outside flightlog): any difference, NULL against a value
        # included, misses.
        changes: list[dict[str, Any]] = [
            {"session_status": None},
            {"session_status": "completed"},
            {"fold": '{"f":0}'},
            {"fold": '{"f":1} '},
            {"fold": '{"f":1,"process":{"agent_id":"r"}}'},
        ]
        for change in changes:
            assert not store.replace_run_row(later, dataclasses.replace(moved, **change))
        # A row edited outside flightlog with its status and fold left alone misses too (the projector's
        # general path then rewrites it from the fold): no edit survives the session's next append.
        next_fold = dataclasses.replace(moved, fold='{"f":1,"n":1}')
        edits: list[dict[str, Any]] = [
            {"state": "terminal"},
            {"outcome": "completed"},
            {"parent": "evil"},
            {"source": "evil"},
            {"snapshot": '{"s":9}'},
            {"updated_at_ms": 9},
            {"last_seq": 9},
        ]
        for edit in edits:
            store.put_run_rows([dataclasses.replace(moved, **edit)])
            assert not store.replace_run_row(next_fold, moved), edit
            assert store.get_run_rows(["r"]) == {"r": dataclasses.replace(moved, **edit)}, edit  # not written
        store.put_run_rows([moved])
        unset = dataclasses.replace(moved, session_status=None)
        store.put_run_rows([unset])
        assert not store.replace_run_row(later, moved)  # a stored NULL status is not "running"
        store.put_run_rows([moved])
        assert store.get_run_rows(["r"]) == {"r": moved}  # nothing written
        assert store.replace_run_row(later, moved)  # every column may change, indexed ones included
        assert store.get_run_rows(["r"]) == {"r": later}
        assert [r.run_id for r in store.query_runs(states=["terminal"], parent="p", source="fleet")] == ["r"]
        assert not store.replace_run_row(
            RunRow("n", *dataclasses.astuple(first)[1:]), RunRow("n", *dataclasses.astuple(first)[1:])
        )
        assert store.get_run_rows(["n"]) == {}  # absent: nothing inserted
        with pytest.raises(ValueError):
            store.replace_run_row(first, RunRow("n", *dataclasses.astuple(later)[1:]))
        with pytest.raises(KeyError), store.transaction():  # joins an open transaction, rolls back with it
            assert store.replace_run_row(first, later)
            assert store.get_run_rows(["r"]) == {"r": first}
            raise KeyError("abort")
        assert store.get_run_rows(["r"]) == {"r": later}
        with store.transaction():
            assert store.replace_run_row(first, later)
            assert not store.replace_run_row(first, later)
            store.set_run_projection_version(1)  # the transaction is still usable after a miss
        assert store.get_run_rows(["r"]) == {"r": first}

    def test_live_runs_are_upserted_and_deleted(self, store: Store) -> None:
        first = LiveRunRecord("r-1", "waiting_model", 1000, 900, 5, 1, pid=42, host="h1", owner="a")
        store.put_live_run(first)
        store.put_live_run(LiveRunRecord("r-0", "running", 1000, 1000))
        later = LiveRunRecord("r-1", "waiting_tool", 2000, 1900, 9, 2, pid=7, host="h2", owner="b")
        store.put_live_run(later)
        assert store.live_runs() == [LiveRunRecord("r-0", "running", 1000, 1000), later]
        assert not store.put_live_run(
            dataclasses.replace(first, heartbeat_at_ms=3000), own_only=True
        )  # b's: kept
        beat = dataclasses.replace(later, heartbeat_at_ms=3000)
        assert store.put_live_run(beat, own_only=True)
        fresh = LiveRunRecord("r-2", "running", 3000, 3000, owner="c")
        assert store.put_live_run(fresh, own_only=True)  # none stored: written
        assert store.live_runs() == [LiveRunRecord("r-0", "running", 1000, 1000), beat, fresh]
        store.delete_live_run("r-2", owner="c")
        store.delete_live_run("r-1", owner="a")  # no longer a's record: it stays
        store.delete_live_run("r-0", owner="a")  # a record that names no owner is not a's
        assert [r.run_id for r in store.live_runs()] == ["r-0", "r-1"]
        store.delete_live_run("r-1", owner="b")
        store.delete_live_run("never", owner="b")
        assert [r.run_id for r in store.live_runs()] == ["r-0"]
        store.delete_live_run("r-0", owner=None)  # None matches a record that names no owner
        assert store.live_runs() == []

    # ─── index log, cosignatures, salted artifacts ────────────────────────────────────────
    def test_index_log_is_dense_and_streams(self, store: Store) -> None:
        if not store.index_supported():
            pytest.skip("this backend keeps no index log")
        for idx in range(5):
            store.append_index_leaf(idx, f"s-{idx % 2}", idx + 10, f"leaf {idx}".encode())
        with pytest.raises(AppendConflict):
            store.append_index_leaf(3, "s-0", 99, b"again")
        with pytest.raises(AppendConflict):
            store.append_index_leaf(7, "s-0", 99, b"gap")
        assert store.index_size() == 5
        assert [leaf.leaf for leaf in store.read_index_leaves(start=1, stop=3)] == [b"leaf 1", b"leaf 2"]
        assert [leaf.idx for leaf in store.index_leaves_of("s-1")] == [1, 3]
        first = store.record_index_checkpoint(2, "aa" * 32, "two", b"\x02" * 32)
        second = store.record_index_checkpoint(5, "bb" * 32, "five", b"\x05" * 32)
        assert second > first
        latest = store.latest_index_checkpoint()
        assert latest is not None and (latest.size, latest.frontier) == (5, b"\x05" * 32)
        below = store.latest_index_checkpoint(max_size=4)
        assert below is not None and below.body == "two"
        assert [c.size for c in store.index_checkpoints()] == [2, 5]

    def test_cosignatures_newer_note_wins(self, store: Store) -> None:
        if not store.index_supported():
            pytest.skip("this backend keeps no cosignatures")
        store.record_cosignature(CosignatureRecord("o", 3, "aa" * 32, "w1", "note-1", 1))
        store.record_cosignature(CosignatureRecord("o", 3, "aa" * 32, "w1", "note-2", 2))
        store.record_cosignature(CosignatureRecord("o", 2, "bb" * 32, "w2", "note-3", 3))
        assert [(c.size, c.note) for c in store.cosignatures("o")] == [(2, "note-3"), (3, "note-2")]
        assert store.cosignatures("other") == []

    def test_salted_artifacts_are_erasable(self, store: Store) -> None:
        if not store.index_supported():
            pytest.skip("this backend keeps no salted artifacts")
        salt = b"s" * 32
        dd = hashlib.sha256(salt + b"personal").hexdigest()
        record = store.put_salted_artifact(dd, salt, b"personal", "text/plain", session_id="s-1")
        assert record.handle == f"salted:sha256:{dd}"
        assert store.get_salted_artifact(dd) == (b"personal", salt)
        assert store.artifact_sessions(dd) == ["s-1"]
        erasure = ErasureRecord(dd, 123, "log", 0)
        assert store.erase_salted_artifact(erasure) is True
        assert store.erase_salted_artifact(erasure) is False
        assert store.get_salted_artifact(dd) is None
        assert store.erasure(dd) == erasure

    def test_a_salted_artifact_that_does_not_hash_to_its_digest_is_never_read(self, store: Store) -> None:
        if not store.index_supported():
            pytest.skip("this backend keeps no salted artifacts")
        store.put_salted_artifact(
            "ee" * 32, b"s" * 32, b"forged", "text/plain"
        )  # as an outside edit leaves it
        with pytest.raises(ArtifactIntegrityError) as caught:
            store.get_salted_artifact("ee" * 32)
        assert caught.value.handle == f"salted:sha256:{'ee' * 32}"
        assert "does not match its digest" in str(caught.value)

    def test_a_salted_artifact_whose_bytes_moved_into_its_salt_is_never_read(self, store: Store) -> None:
        if not store.index_supported():
            pytest.skip("this backend keeps no salted artifacts")
        salt, content = b"s" * 32, b"DO NOT wire the money"
        dd = hashlib.sha256(salt + content).hexdigest()
        # the same sha256(salt || content) with "DO NOT " moved from the content into the salt, as an outside
        # edit leaves it: the text would read back shortened, its meaning reversed
        store.put_salted_artifact(dd, salt + b"DO NOT ", b"wire the money", "text/plain")
        with pytest.raises(ArtifactIntegrityError) as caught:
            store.get_salted_artifact(dd)
        assert caught.value.handle == f"salted:sha256:{dd}"
        assert "a salt of 39 bytes, not 32" in str(caught.value)

    # ─── fleet leases ─────────────────────────────────────────────────────────────────────
    def test_open_lease_makes_a_free_lease_once(self, store: Store) -> None:
        _new_session(store, "q-1", status="queued")
        assert store.get_lease("q-1") is None
        store.open_lease("q-1")
        assert store.get_lease("q-1") == LeaseRecord("q-1", None, 0, 0, 0, -2)
        (claim,) = store.claim_sessions("w1", ttl_ms=60_000)
        held = store.get_lease("q-1")
        store.open_lease("q-1")  # no-op: the lease is kept as it is
        assert store.get_lease("q-1") == held
        assert held is not None and (held.holder, held.epoch) == ("w1", claim.epoch)
        assert store.get_lease("nope") is None

    def test_a_claim_bumps_the_epoch_in_its_transaction(self, store: Store) -> None:
        _new_session(store, "q-1", status="queued")
        store.open_lease("q-1")
        assert store.claim_sessions("w1", ttl_ms=60_000) == [LeaseClaim("q-1", 1, None, "queued")]
        assert store.authority_epoch("q-1") == 1
        lease = store.get_lease("q-1")
        assert lease is not None and (lease.holder, lease.epoch, lease.parked_seq) == ("w1", 1, -2)
        assert lease.acquired_at_ms > 0 and lease.expires_at_ms == lease.acquired_at_ms + 60_000
        assert store.renew_lease("q-1", "w1", ttl_ms=-1)  # expired: claimable again
        with pytest.raises(KeyError), store.transaction():  # a claim rolls back with its epoch bump
            (claim,) = store.claim_sessions("w2", ttl_ms=60_000)
            assert (claim.epoch, store.authority_epoch("q-1")) == (2, 2)
            raise KeyError("abort")
        assert store.authority_epoch("q-1") == 1
        after = store.get_lease("q-1")
        assert after is not None and (after.holder, after.epoch) == ("w1", 1)

    def test_a_claimed_lease_is_not_claimable_until_it_expires(self, store: Store) -> None:
        _new_session(store, "q-1", status="queued")
        store.open_lease("q-1")
        (first,) = store.claim_sessions("w1", ttl_ms=60_000)
        assert store.claim_sessions("w2", ttl_ms=60_000) == []
        assert store.claim_sessions("w2", ttl_ms=60_000, session_id="q-1") == []
        assert store.renew_lease("q-1", "w1", ttl_ms=-1)  # w1's lease runs out
        (taken,) = store.claim_sessions("w2", ttl_ms=60_000)
        assert (taken.session_id, taken.epoch, taken.previous_holder) == ("q-1", first.epoch + 1, "w1")
        assert store.authority_epoch("q-1") == taken.epoch
        assert store.claim_sessions("w1", ttl_ms=60_000) == []
        assert not store.renew_lease("q-1", "w1", ttl_ms=60_000)  # w1 lost it
        assert not store.release_lease("q-1", "w1")
        lease = store.get_lease("q-1")
        assert lease is not None and (lease.holder, lease.epoch) == ("w2", taken.epoch)

    def test_renew_lease_by_the_holder_only(self, store: Store) -> None:
        _new_session(store, "q-1", status="queued")
        store.open_lease("q-1")
        store.claim_sessions("w1", ttl_ms=60_000)
        before = store.get_lease("q-1")
        assert before is not None
        assert not store.renew_lease("q-1", "w2", ttl_ms=120_000)
        assert not store.renew_lease("nope", "w1", ttl_ms=120_000)
        assert store.get_lease("q-1") == before
        assert store.renew_lease("q-1", "w1", ttl_ms=120_000)
        after = store.get_lease("q-1")
        assert after is not None and after.expires_at_ms > before.expires_at_ms
        assert dataclasses.replace(after, expires_at_ms=before.expires_at_ms) == before  # only expiry moved

    def test_release_lease_frees_it_for_the_next_claim(self, store: Store) -> None:
        _new_session(store, "q-1", status="queued")
        store.open_lease("q-1")
        store.claim_sessions("w1", ttl_ms=60_000)
        assert not store.release_lease("q-1", "w2")
        assert store.release_lease("q-1", "w1")
        lease = store.get_lease("q-1")
        assert lease is not None
        assert (lease.holder, lease.epoch, lease.expires_at_ms, lease.parked_seq) == (None, 1, 0, -2)
        assert not store.release_lease("q-1", "w1")  # released already
        assert store.claim_sessions("w2", ttl_ms=60_000) == [LeaseClaim("q-1", 2, None, "queued")]

    def test_a_parked_lease_is_runnable_again_once_the_head_moves(self, store: Store) -> None:
        _park(store, "p-1")
        lease = store.get_lease("p-1")
        assert lease is not None and (lease.holder, lease.expires_at_ms, lease.parked_seq) == (None, 0, 0)
        assert store.claim_sessions("w2", ttl_ms=60_000) == []  # parked: nothing changed
        assert store.claim_sessions("w2", ttl_ms=60_000, session_id="p-1") == []
        _append(store, "p-1", ["decision"])
        assert store.claim_sessions("w2", ttl_ms=60_000) == [LeaseClaim("p-1", 2, None, "suspended")]
        claimed = store.get_lease("p-1")
        assert claimed is not None and (claimed.holder, claimed.parked_seq) == ("w2", -2)

    def test_wake_lease_makes_a_parked_lease_runnable_without_a_new_event(self, store: Store) -> None:
        _park(store, "w-1")
        assert store.claim_sessions("w2", ttl_ms=60_000) == []  # parked
        assert store.wake_lease("w-1")  # a decision landed in a sub-agent's ledger, not this one
        assert store.claim_sessions("w2", ttl_ms=60_000) == [LeaseClaim("w-1", 2, None, "suspended")]
        assert not store.wake_lease("no-lease")  # not a fleet session: nothing to wake

    def test_claim_a_specific_session(self, store: Store) -> None:
        for sid in ("q-1", "q-2"):
            _new_session(store, sid, status="queued")
            store.open_lease(sid)
        (claim,) = store.claim_sessions("w1", ttl_ms=60_000, session_id="q-2")  # not the oldest
        assert claim.session_id == "q-2"
        assert store.claim_sessions("w1", ttl_ms=60_000, session_id="q-2") == []  # held
        assert store.claim_sessions("w1", ttl_ms=60_000, session_id="nope") == []
        assert [c.session_id for c in store.claim_sessions("w1", ttl_ms=60_000)] == ["q-1"]

    def test_claim_sessions_honours_the_limit_oldest_first(self, store: Store) -> None:
        for sid in ("q-1", "q-2", "q-3"):
            _new_session(store, sid, status="queued")
            store.open_lease(sid)
        assert [c.session_id for c in store.claim_sessions("w1", ttl_ms=60_000, limit=2)] == ["q-1", "q-2"]
        assert [c.session_id for c in store.claim_sessions("w2", ttl_ms=60_000, limit=5)] == ["q-3"]
        assert store.claim_sessions("w2", ttl_ms=60_000, limit=5) == []
        assert [store.authority_epoch(sid) for sid in ("q-1", "q-2", "q-3")] == [1, 1, 1]

    def test_claim_sessions_skips_sessions_that_are_not_runnable(self, store: Store) -> None:
        statuses = ("queued", "running", "suspended", "completed", "failed", "cancelled", "incomplete")
        for status in statuses:
            _new_session(store, f"s-{status}", status=status)
            store.open_lease(f"s-{status}")
        _new_session(store, "no-lease", status="queued")
        store.open_lease("no-session")
        claims = store.claim_sessions("w1", ttl_ms=60_000, limit=20)
        assert sorted((c.session_id, c.status) for c in claims) == [
            ("s-queued", "queued"),
            ("s-running", "running"),
            ("s-suspended", "suspended"),
        ]
        assert store.claim_sessions("w1", ttl_ms=60_000, session_id="s-completed") == []
        for status in statuses[3:]:
            assert store.authority_epoch(f"s-{status}") == 0
        assert store.authority_epoch("no-lease") == 0
        store.set_session_status("s-completed", "running")  # runnable once its status is
        assert [c.session_id for c in store.claim_sessions("w1", ttl_ms=60_000)] == ["s-completed"]

    def test_concurrent_claimers_never_share_a_session(self, store: Store, reopen: Reopen) -> None:
        import threading

        ids = [f"q-{i:02d}" for i in range(12)]
        for sid in ids:
            _new_session(store, sid, status="queued")
            store.open_lease(sid)
        handles = [store, reopen(store)]
        claimed: list[str] = []
        errors: list[BaseException] = []
        barrier = threading.Barrier(4)

        def claim_all(handle: Store, holder: str) -> None:
            try:
                barrier.wait()
                while batch := handle.claim_sessions(holder, ttl_ms=60_000, limit=2):
                    claimed.extend(c.session_id for c in batch)
            except BaseException as exc:  # collected and asserted below
                errors.append(exc)

        threads = [threading.Thread(target=claim_all, args=(handles[i % 2], f"w{i}")) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert errors == []
        assert sorted(claimed) == ids  # every session once
        assert {store.authority_epoch(sid) for sid in ids} == {1}

    # ─── live wake-ups ────────────────────────────────────────────────────────────────────
    def test_wait_for_events_times_out_then_sees_a_commit(self, store: Store, reopen: Reopen) -> None:
        """A quiet session's wait times out; a wait sees a commit made while it waits. Nothing is timed:
        the session id is unique (no other database's session of that name can wake it), and the writer
        commits again and again until the wait returns, so a commit lands after the wait began however
        the threads are scheduled."""
        import threading
        import uuid

        sid = _new_session(store, f"s-{uuid.uuid4().hex[:12]}")
        store.wait_for_events(0, session_id=sid)  # a backend may start listening on the first call
        assert store.wait_for_events(0.1, session_id=sid) is False
        writer = reopen(store)
        stop = threading.Event()

        def commit_until_woken() -> None:
            while not stop.is_set():
                _append(writer, sid, ["woken"])
                stop.wait(0.05)  # a pace, not a race: the wait below returns on any of these commits

        thread = threading.Thread(target=commit_until_woken)
        thread.start()
        try:
            assert store.wait_for_events(60, session_id=sid) is True
        finally:
            stop.set()
            thread.join(60)
        assert [e.seq for e in store.read_events(sid)][:1] == [0]

    # ─── signal queue (flightlog.store.signals) ───────────────────────────────────────────
    def test_the_signal_queue_is_disposed_once_and_only_with_its_transaction(self, store: Store) -> None:
        """Queued signals come back oldest first; marking one disposed inside a transaction that rolls back
        leaves it queued; once disposed it is gone from the queue and cannot be disposed again; a full
        queue (64) stores the next signal ``dropped``."""
        from ..errors import StoreError
        from ..store.signals import QUEUE_SIZE, enqueue_signal, mark_disposed, pending_signals, signal_record

        sid = _new_session(store, "s-signals")
        first = enqueue_signal(store, sid, "message", "one", urgency="normal", sender="a", now_ms=1)
        second = enqueue_signal(
            store, sid, "steer", "two", urgency="high", sender="b", dedupe_key="k", now_ms=2
        )
        assert [r.signal_id for r in pending_signals(store, sid)] == [first.signal_id, second.signal_id]
        assert pending_signals(store, sid)[1] == second
        with pytest.raises(RuntimeError), store.transaction():
            mark_disposed(store, first.signal_id, "run", 7)
            raise RuntimeError("the append failed")
        assert [r.signal_id for r in pending_signals(store, sid)] == [first.signal_id, second.signal_id]
        with store.transaction():
            mark_disposed(store, first.signal_id, "run", 7)
        record = signal_record(store, first.signal_id)
        assert record is not None and (record.state, record.disposition) == ("disposed", "run")
        with pytest.raises(StoreError, match="disposed already"):
            mark_disposed(store, first.signal_id, "run", 9)
        for i in range(QUEUE_SIZE - 1):
            enqueue_signal(store, sid, "message", f"m{i}", urgency="low", sender="a", now_ms=10 + i)
        full = enqueue_signal(store, sid, "message", "late", urgency="low", sender="a", now_ms=999)
        assert full.state == "dropped" and len(pending_signals(store, sid)) == QUEUE_SIZE + 1
