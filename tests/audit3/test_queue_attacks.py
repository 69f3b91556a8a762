"""Attacks on the approvals queue's wait pre-filter (:func:`sessions_may_wait`, :meth:`SqlStore.marked_ends`,
:func:`decodes_without`), as someone who can write the database, each once a bug: a row no other reader reads
hid a wait from ``flightlog pending`` and the dashboard's queue, or broke both; a TEXT row that is not UTF-8
made a traceback; an upcaster ran on an event whose bytes never spell its kind. One is a known limit, marked
``xfail(strict=True)``: a wait spelled without the canonical mark is acted on by the fold, missed by the queue. On SQLite and PostgreSQL where
both hold the bytes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flightlog import encoding
from flightlog.encoding import canonical_bytes, decode_stored, decodes_without, register_upcaster
from flightlog.errors import EventDecodeError
from flightlog.events import Custom, RunStarted, RunTerminal, Suspended
from flightlog.kernel.rowcheck import session_may_wait, sessions_may_wait
from flightlog.kernel.state import load_state
from flightlog.recorder import Recorder
from flightlog.store import open_store
from flightlog.store.rows import MAX_SEQ
from flightlog.web import views

from .helpers import cli, execute, rechain, suspended_run
from .test_row_surfaces import dashboard
from .test_row_trust import set_status

END = canonical_bytes(RunTerminal(reason="completed", turns_used=1, total_tokens=10))
"""A canonical ``run_terminal``: what a row must decode to for the pre-filter to call the run ended."""


def insert(url: str, session_id: str, seq: str, event: str) -> None:
    """One ``events`` row behind flightlog's back; ``seq`` and ``event`` are SQL literals."""
    execute(
        url,
        "INSERT INTO events (session_id, seq, kind, event, prev_hash, hash, recorded_at_ms) "
        f"VALUES ('{session_id}', {seq}, 'custom', {event}, 'x', 'y', 0)",
    )


def blob(url: str, data: bytes) -> str:
    """``data`` as a SQL bytes literal of the backend."""
    return f"decode('{data.hex()}', 'hex')" if "://" in url else f"X'{data.hex()}'"


def listed(url: str) -> list[str]:
    """The sessions ``flightlog pending --json`` lists (asserting it exits 0)."""
    code, out, err = cli(url, "pending", "--json")
    assert code == 0, (out, err)
    return sorted({row["session_id"] for row in json.loads(out)})


def dashboard_pending(url: str) -> list[tuple[str, str]]:
    """``(session, call)`` of the waits the dashboard's ``/api/runs`` lists (asserting it answers 200)."""
    with dashboard(url) as client:
        response = client.get("/api/runs")
    assert response.status_code == 200, response.text
    return [(c["session"], c["call"]) for c in response.json()["pending"]]


def verify_says(url: str, session_id: str, text: str) -> str:
    """``flightlog verify SESSION`` exits 1 and its output holds ``text``; the output."""
    code, out, _ = cli(url, "verify", session_id)
    assert code == 1 and text in out, out
    return out


def test_an_end_no_other_reader_reads_does_not_hide_the_wait(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = suspended_run(url)
    insert(url, sid, str(MAX_SEQ), blob(url, END))
    set_status(url, sid, "completed")
    out = verify_says(url, sid, "row_mismatch")  # verify never reads the row: only the edited status
    assert str(MAX_SEQ) not in out, out
    with open_store(url, read_only=True) as store:
        assert load_state(store, sid).phase == "suspended"
        assert session_may_wait(store, store.get_session(sid))  # the per-session rule: it may wait
        assert sid in sessions_may_wait(store)  # the pass says it ended
        monkeypatch.setattr(views, "SET_PASS", 0)
        assert list(views.PendingCache().queue(store).suspended) == [sid]
    assert listed(url) == [sid]


def test_a_row_with_a_text_seq_does_not_break_the_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = str(tmp_path / "flightlog.db")
    sid = suspended_run(db)
    insert(db, "stray", "'zz'", blob(db, b'{"kind":"suspended"}'))
    assert cli(db, "verify", sid)[0] == 0
    assert listed(db) == [sid]
    monkeypatch.setattr(views, "SET_PASS", 0)
    assert dashboard_pending(db) == [(sid, "n1")]


@pytest.mark.xfail(
    strict=True,
    reason="known limit: rowcheck searches the stored bytes for the canonical SUSPENDED_MARK, but decode_stored "
    "also decodes a re-spelled wait (a JSON escape, white space: bytes no flightlog writer makes, re-chained), "
    "so the fold acts on a wait pending and the queue do not list. Refusing such bytes in decode_stored was "
    "tried and reverted: it turns a re-spelled wait into an undecodable session, which `pending`, `runs` "
    "(with or without --rebuild) and the dashboard now name and pass over (tests/audit3/test_undecodable.py): "
    "that refusal may be tried again",
)
@pytest.mark.parametrize("spelling", [b'"kind":"\\u0073uspended"', b'"kind": "suspended"'])
def test_a_wait_spelled_without_the_mark_is_still_listed(
    url: str, spelling: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open_store(url) as store:
        recorder = Recorder.create(store, session_id="w", source="kernel")
        recorder.append_many(
            [
                RunStarted(run_id="w", goal="g"),
                Suspended(turn=1, reason="awaiting approval", pending_calls=[]),
            ]
        )
    rechain(url, "w", lambda seq, data: data.replace(b'"kind":"suspended"', spelling))  # hashes recomputed
    set_status(url, "w", "completed")
    with open_store(url, read_only=True) as store:
        assert load_state(store, "w").phase == "suspended"  # the ledger waits
        assert session_may_wait(store, store.get_session("w"))
        assert "w" in sessions_may_wait(store)
        monkeypatch.setattr(views, "SET_PASS", 0)
        assert "w" in views.PendingCache().queue(store).suspended
    verify_says(url, "w", "row_mismatch")


def test_a_text_row_that_is_not_utf8_does_not_break_the_dashboard(tmp_path: Path) -> None:
    db = str(tmp_path / "flightlog.db")
    sid = suspended_run(db)
    with open_store(db) as store:
        recorder = Recorder.create(store, session_id="quiet", source="kernel")
        recorder.append_many([RunStarted(run_id="quiet", goal="g"), Custom(custom_kind="note", payload={})])
    insert(db, "quiet", "2", "CAST(X'7b226b696e64223aff7d' AS TEXT)")  # {"kind":<0xff>}
    verify_says(db, "quiet", "seq 2")
    assert dashboard_pending(db) == [(sid, "n1")]


def test_an_upcaster_runs_only_on_the_kind_its_bytes_spell(monkeypatch: pytest.MonkeyPatch) -> None:
    """An upcaster registered for ``"None"`` once ran on ``{"kind":null}`` (looked up by ``str(kind)``), so
    ``decodes_without`` said "no run_terminal" of bytes that decoded to one. Upcasters run on string kinds
    only; those bytes are no event."""
    monkeypatch.setattr(encoding, "_UPCASTERS", {})
    monkeypatch.setattr(encoding, "_UPCAST_KINDS", [])
    register_upcaster("None", lambda raw: json.loads(END))
    data = b'{"kind":null}'
    with pytest.raises(EventDecodeError):
        decode_stored(data, seq=1)
    assert decodes_without(data, (b"run_terminal",))
    assert isinstance(decode_stored(b'{"kind":"None"}', seq=1), RunTerminal)  # its own kind: upcast
