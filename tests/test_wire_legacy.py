"""Events stored before ``Option`` fields without ``skip_serializing_if`` were written as ``null``.

Releases up to this change omitted ``run_started.agent_id``/``system_prompt`` and
``permission_requested.reason`` when absent. Stored bytes are never rewritten, so such ledgers must keep
verifying (every hash is over the stored bytes), decode to the same values as the new form (serde reads a
missing ``Option`` as ``None``, so no upcaster is needed), and leave every copy, export and bundle with the
stored bytes; new appends use the new form. The old encoder is reproduced by clearing the models'
``_write_null`` sets while the legacy rows are recorded.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flightlog import events as ev
from flightlog.cli import app
from flightlog.encoding import canonical_json, decode_stored, parse_json
from flightlog.integrity.notary import Notary
from flightlog.recorder import Recorder
from flightlog.store import SqliteStore

runner = CliRunner()
SID = "legacy-session"


def _events(run: str) -> list[ev.Event]:
    return [
        ev.RunStarted(run_id=run, goal="fix the build", criteria=["tests pass"]),
        ev.PermissionRequested(turn=1, tool="bash", arguments='{"cmd": "make"}'),
        ev.PermissionRequested(turn=1, tool="bash", arguments="{}", reason="writes outside the repo"),
        ev.RunStarted(run_id=run + "-b", goal="again", agent_id="a1", system_prompt="be brief"),
    ]


def _cli(db: Path, *args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["--db", str(db), *args])
    return result.exit_code, result.stdout + result.stderr


@pytest.fixture
def legacy_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A signed session whose first rows were written by the old encoder, then resumed and sealed by the
    new one."""
    db = tmp_path / "ledger.db"
    notary = Notary.from_env(every=2)
    with monkeypatch.context() as old_release:
        old_release.setattr(ev.RunStarted, "_write_null", frozenset())
        old_release.setattr(ev.PermissionRequested, "_write_null", frozenset())
        with SqliteStore(str(db)) as store:
            Recorder.create(store, session_id=SID, notary=notary).append_many(_events("old"))
    with SqliteStore(str(db)) as store:
        rec = Recorder.attach(store, SID, notary=notary)  # full check: chain, signatures, retained head
        rec.append_many(_events("new"))
        rec.finish("completed")
    return db


def test_old_rows_keep_their_bytes_and_decode_to_the_values_new_rows_hold(legacy_db: Path) -> None:
    with SqliteStore(str(legacy_db)) as store:
        rows = list(store.read_events(SID))
    old, new = rows[0:4], rows[4:8]
    assert [parse_json(r.event_bytes) for r in old] == [
        {"kind": "run_started", "run_id": "old", "goal": "fix the build", "criteria": ["tests pass"]},
        {"kind": "permission_requested", "turn": 1, "tool": "bash", "arguments": '{"cmd": "make"}'},
        {
            "kind": "permission_requested",
            "turn": 1,
            "tool": "bash",
            "arguments": "{}",
            "reason": "writes outside the repo",
        },
        {
            "kind": "run_started",
            "run_id": "old-b",
            "goal": "again",
            "criteria": [],
            "agent_id": "a1",
            "system_prompt": "be brief",
        },
    ]
    assert parse_json(new[0].event_bytes)["agent_id"] is None
    assert parse_json(new[0].event_bytes)["system_prompt"] is None
    assert parse_json(new[1].event_bytes)["reason"] is None
    assert b'"agent_id":null' in new[0].event_bytes and b'"reason":null' in new[1].event_bytes
    # Present values never changed form: those rows are byte-identical apart from the run id.
    assert new[2].event_bytes == old[2].event_bytes
    for before, after in zip(old, new, strict=True):
        back, now = decode_stored(before.event_bytes), decode_stored(after.event_bytes)
        assert back.model_copy(update={"run_id": "x"} if isinstance(back, ev.RunStarted) else {}) == (
            now.model_copy(update={"run_id": "x"} if isinstance(now, ev.RunStarted) else {})
        )


def test_verify_export_bundle_and_copy_keep_the_stored_bytes(legacy_db: Path, tmp_path: Path) -> None:
    code, out = _cli(legacy_db, "verify", SID)
    assert code == 0, out
    with SqliteStore(str(legacy_db)) as store:
        stored = [r.event_bytes for r in store.read_events(SID)]

    code, out = _cli(legacy_db, "export", SID, "-o", str(tmp_path / "s.jsonl"))
    assert code == 0, out
    lines = (tmp_path / "s.jsonl").read_text(encoding="utf-8").splitlines()
    assert [
        canonical_json(json.loads(line)["event"]) for line in lines
    ] == stored  # RFC 8785 of event == stored
    assert all(
        line.endswith(',"event":' + data.decode("utf-8") + "}")
        for line, data in zip(lines, stored, strict=True)
    )

    code, out = _cli(legacy_db, "export", SID, "--bundle", str(tmp_path / "bundle"))
    assert code == 0, out
    code, out = _cli(tmp_path / "none.db", "audit", "--bundle", str(tmp_path / "bundle"))
    assert code == 0, out

    copy = tmp_path / "copy.db"
    code, out = _cli(legacy_db, "db", "copy", str(legacy_db), str(copy))
    assert code == 0, out
    with SqliteStore(str(copy)) as store:
        assert [r.event_bytes for r in store.read_events(SID)] == stored
    code, out = _cli(copy, "verify", SID)
    assert code == 0, out

    code, out = _cli(legacy_db, "show", SID, "--json")
    assert code == 0, out
    shown = [json.loads(line)["event"] for line in out.splitlines() if line.startswith("{")]
    assert shown[0]["agent_id"] is None and shown[4]["agent_id"] is None  # decoded values, one form
