"""Verification's lean read path (issue 19) reports exactly what the row-by-row check reported.

``ChainCheck`` (the loop behind ``verify_rows`` and ``verify_session``) inlines the compact-range append
and reads raw row tuples in pages (``Store.read_chain``). Here it is compared with a plain transcription
of the rules, one row at a time through :func:`flightlog.ledger.chain_hash`-style hashing and
:class:`~flightlog.ledger.CompactRange`, on generated sessions with every kind of tampering, fed in
arbitrary page splits; and ``verify_session`` on a SQLite file with tampered rows (edited, deleted, a TEXT
or INTEGER value in the event column, a rewritten hash) against the same reference over ``read_events``.
"""

from __future__ import annotations

import hashlib
import itertools
import sqlite3
import struct
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flightlog.errors import Divergence
from flightlog.events import Custom
from flightlog.ledger import GENESIS, ChainCheck, CompactRange, VerifyReport, check_head, verify_rows
from flightlog.recorder import Recorder, verify_session
from flightlog.store.base import StoredEvent
from flightlog.store.sqlite import SqliteStore

Row = tuple[int, bytes, str, str]


def reference(session_id: str, rows: Sequence[Row], expected_head: tuple[int, str] | None) -> VerifyReport:
    """The rules row by row (what ``verify_rows`` did before the lean loop), with no shared code."""
    report = VerifyReport(session_id=session_id)
    tree = CompactRange()
    expected, prev = 0, GENESIS
    for seq, data, stored_prev, stored_hash in rows:
        if seq > expected:
            report.divergences.append(Divergence(expected, "gap", f"seqs {expected}..{seq - 1} missing"))
        elif seq < expected:
            report.divergences.append(Divergence(seq, "gap", f"seq {seq} out of order after {expected - 1}"))
        if stored_prev != prev:
            report.divergences.append(
                Divergence(seq, "broken_link", "prev_hash does not match the previous row's hash")
            )
        h = hashlib.sha256(stored_prev.encode("ascii", "replace"))
        h.update(struct.pack("<Q", seq) if 0 <= seq < 2**64 else b"")
        h.update(data)
        if h.hexdigest() != stored_hash:
            report.divergences.append(
                Divergence(seq, "hash_mismatch", "stored hash does not match the stored bytes")
            )
        tree.append(hashlib.sha256(b"\x00" + data).digest())
        report.events += 1
        report.bytes += len(data)
        prev, expected = stored_hash, seq + 1
    report.head, report.root = prev, tree.root().hex()
    if expected_head is not None:
        check_head(report, expected, expected_head)
    return report


def chained(payloads: Sequence[bytes]) -> list[Row]:
    rows: list[Row] = []
    prev = GENESIS
    for seq, data in enumerate(payloads):
        digest = hashlib.sha256(prev.encode("ascii") + struct.pack("<Q", seq) + data).hexdigest()
        rows.append((seq, data, prev, digest))
        prev = digest
    return rows


def tamper(rows: list[Row], op: str, at: int, value: bytes) -> list[Row]:
    if not rows:
        return rows
    i = at % len(rows)
    seq, data, prev, digest = rows[i]
    if op == "edit":
        rows[i] = (seq, data + value, prev, digest)
    elif op == "rehash":
        rows[i] = (seq, data, prev, hashlib.sha256(value).hexdigest())
    elif op == "relink":
        rows[i] = (seq, data, "x" * 64, digest)
    elif op == "drop":
        del rows[i]
    elif op == "swap" and i + 1 < len(rows):
        rows[i], rows[i + 1] = rows[i + 1], rows[i]
    elif op == "negative":
        rows[i] = (-1 - seq, data, prev, digest)
    elif op == "huge":
        rows[i] = (2**64 + seq, data, prev, digest)
    elif op == "non-ascii":
        rows[i] = (seq, data, "é" + prev[1:], digest)
    elif op == "truncate":
        del rows[i:]
    return rows


def same(a: VerifyReport, b: VerifyReport) -> None:
    assert (a.events, a.bytes, a.head, a.root) == (b.events, b.bytes, b.head, b.root)
    assert [(d.seq, d.reason, d.detail) for d in a.divergences] == [
        (d.seq, d.reason, d.detail) for d in b.divergences
    ]


OPS = st.sampled_from(
    ["edit", "rehash", "relink", "drop", "swap", "negative", "huge", "non-ascii", "truncate"]
)


@settings(max_examples=300, deadline=None)
@given(
    payloads=st.lists(st.binary(max_size=80), max_size=40),
    tampering=st.lists(st.tuples(OPS, st.integers(0, 100), st.binary(min_size=1, max_size=4)), max_size=3),
    cuts=st.lists(st.integers(0, 40), max_size=6),
    head=st.one_of(st.none(), st.tuples(st.integers(-1, 45), st.sampled_from(["", "keep"]))),
)
def test_the_lean_loop_reports_what_the_row_by_row_rules_report(
    payloads: list[bytes],
    tampering: list[tuple[str, int, bytes]],
    cuts: list[int],
    head: tuple[int, str] | None,
) -> None:
    honest = chained(payloads)
    rows = list(honest)
    for op, at, value in tampering:
        rows = tamper(rows, op, at, value)
    expected_head = None
    if head is not None:
        seq, how = head
        recorded = honest[seq][3] if how == "keep" and 0 <= seq < len(honest) else "f" * 64
        expected_head = (seq, recorded)
    want = reference("s", rows, expected_head)

    check = ChainCheck("s", decode=False)
    bounds = sorted({0, len(rows), *(c for c in cuts if c <= len(rows))})
    for low, high in itertools.pairwise(bounds):
        check.feed(rows[low:high])  # any page split gives one report
    same(check.finish(expected_head), want)

    stored = [StoredEvent("s", seq, "custom", data, prev, digest, 0) for seq, data, prev, digest in rows]
    same(verify_rows("s", stored, decode=False, expected_head=expected_head), want)


def test_a_callers_tree_holds_every_earlier_row_when_the_next_is_pulled() -> None:
    rows = chained([bytes([i]) * i for i in range(37)])
    tree = CompactRange()
    sizes: list[int] = []

    def pulled() -> object:
        for seq, data, prev, digest in rows:
            sizes.append(tree.size)
            yield StoredEvent("s", seq, "custom", data, prev, digest, 0)

    report = verify_rows("s", pulled(), decode=False, tree=tree)  # type: ignore[arg-type]
    assert sizes == list(range(37)) and tree.size == 37
    assert report.ok and report.root == reference("s", rows, None).root == tree.root().hex()


def test_decode_reports_undecodable_rows_by_seq() -> None:
    rows = chained([b'{"kind":"custom","custom_kind":"k","payload":1}', b'{"kind":"nope"}', b"not json"])
    report = verify_rows("s", [StoredEvent("s", *r[:1], "custom", *r[1:], 0) for r in rows])
    assert [(d.seq, d.reason) for d in report.divergences] == [(1, "undecodable"), (2, "undecodable")]


# ─── verify_session over a SQLite file ─────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    "statement",
    [
        None,
        "UPDATE events SET event = 'tampered text' WHERE seq = 3",
        "UPDATE events SET event = 12345 WHERE seq = 700",
        "UPDATE events SET event = CAST(REPLACE(CAST(event AS TEXT), '\"i\":5', '\"i\":6') AS BLOB) WHERE seq = 5",
        "UPDATE events SET hash = 'f' || substr(hash, 2) WHERE seq = 511",
        "DELETE FROM events WHERE seq = 512",
        "DELETE FROM events WHERE seq >= 1100",
        "UPDATE events SET seq = -5 WHERE seq = 0",
    ],
)
@pytest.mark.parametrize("decode", [False, True])
def test_verify_session_reports_what_the_rules_report_over_read_events(
    tmp_path: Path, statement: str | None, decode: bool
) -> None:
    db = tmp_path / "v.db"
    with SqliteStore(db) as store:
        rec = Recorder.create(store, session_id="s")
        rec.append_many([Custom(custom_kind="step", payload={"i": i}) for i in range(1200)])
    if statement is not None:
        conn = sqlite3.connect(db)
        conn.execute("DROP TRIGGER IF EXISTS events_no_update")
        conn.execute("DROP TRIGGER IF EXISTS events_no_delete")
        conn.execute(statement)
        conn.commit()
        conn.close()
    with SqliteStore(db) as store:
        rows = [(r.seq, r.event_bytes, r.prev_hash, r.hash) for r in store.read_events("s")]
        pages = list(store.read_chain("s"))
        assert [row for page in pages for row in page] == rows
        assert all(0 < len(page) <= 512 for page in pages)
        got = verify_session(store, "s", decode=decode)
        record = store.get_session("s")
    want = reference("s", rows, (record.head_seq, record.head_hash))
    if want.ok and record.merkle_root != want.root:
        want.divergences.append(
            Divergence(want.events - 1, "head_mismatch", "recorded tree head differs from the stored rows")
        )
    if decode:  # the rules above do not decode: the two rows that are not JSON events are undecodable
        bad = {d.seq for d in got.divergences if d.reason == "undecodable"}
        assert bad == (
            {3} if "'tampered text'" in str(statement) else {700} if "12345" in str(statement) else set()
        )
        got.divergences = [d for d in got.divergences if d.reason != "undecodable"]
    same(got, want)
    assert got.ok is (statement is None)
