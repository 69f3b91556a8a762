"""Erasure without breaking the chain: salted artifacts, erased content and salt, verify still passes."""

from __future__ import annotations

import base64
import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flightlog.cli import app
from flightlog.errors import ArtifactIntegrityError
from flightlog.events import Custom, RunStarted
from flightlog.integrity.bundle import export_bundle
from flightlog.integrity.erasure import (
    ERASED_KIND,
    ERASURE_LOG,
    ArtifactNotFound,
    erase_artifact,
    get_personal_artifact,
    parse_handle,
    salted_digest,
)
from flightlog.integrity.indexlog import audit_index
from flightlog.integrity.notary import Notary
from flightlog.integrity.verify import audit_session
from flightlog.recorder import Recorder
from flightlog.store import SqliteStore

from .conftest import SID, step, tamper

runner = CliRunner()

PERSONAL = b"Jane Q. Example, 12 Elm Street, Springfield; SSN 078-05-1120; jane.example@mail.test"


def _forms(data: bytes) -> list[bytes]:
    """A secret as it could appear in text: raw, hex, base64."""
    return [data, data.hex().encode(), base64.b64encode(data), base64.urlsafe_b64encode(data)]


def _ledger_bytes(db_path: Path) -> bytes:
    """Every byte of every ledger-side table: events, checkpoints, index log, cosignatures, sessions, grants."""
    raw = sqlite3.connect(db_path)
    try:
        out = b""
        for table in (
            "events",
            "checkpoints",
            "index_leaves",
            "index_checkpoints",
            "cosignatures",
            "sessions",
            "grant_policies",
        ):
            for row in raw.execute(f"SELECT * FROM {table}"):
                out += b"|".join(v if isinstance(v, bytes) else str(v).encode() for v in row)
        return out
    finally:
        raw.close()


@pytest.fixture
def referenced(store: SqliteStore, notary: Notary) -> tuple[Recorder, str, bytes]:
    """A signed session whose event references personal data by salted handle; returns (recorder, handle, salt)."""
    rec = Recorder.create(store, session_id=SID, notary=notary)
    handle = rec.put_personal_artifact(PERSONAL, "text/plain")
    rec.append(step(0))
    rec.append(Custom(custom_kind="customer", payload={"record": handle}))
    for i in range(2, 6):
        rec.append(step(i))
    found = store.get_salted_artifact(parse_handle(handle))
    assert found is not None
    return rec, handle, found[1]


def test_handles_are_salted_digests_and_never_linkable(
    store: SqliteStore, referenced: tuple[Recorder, str, bytes]
) -> None:
    rec, handle, salt = referenced
    assert handle.startswith("salted:sha256:") and len(salt) == 32
    assert parse_handle(handle) == salted_digest(salt, PERSONAL)
    assert get_personal_artifact(store, handle) == PERSONAL
    assert rec.put_personal_artifact(PERSONAL) != handle  # a fresh salt each time: no dedup, no linking
    assert store.artifact_sessions(parse_handle(handle)) == [SID]
    with pytest.raises(ValueError):
        parse_handle("sha256:" + "0" * 64)


def test_the_ledger_never_holds_the_content_or_the_salt(
    db_path: Path, store: SqliteStore, referenced: tuple[Recorder, str, bytes], tmp_path: Path
) -> None:
    rec, handle, salt = referenced
    rec.finish("completed")
    ledger = _ledger_bytes(db_path)
    assert handle.encode() in ledger  # the reference is there...
    for secret in (PERSONAL, salt):
        assert not any(form in ledger for form in _forms(secret))  # ...the data and the salt never are
    export_bundle(store, SID, tmp_path / "b")
    everything = b"".join(p.read_bytes() for p in (tmp_path / "b").iterdir())
    assert not any(form in everything for secret in (PERSONAL, salt) for form in _forms(secret))


def test_erase_removes_content_and_salt_and_verify_still_passes(
    db_path: Path, store: SqliteStore, notary: Notary, referenced: tuple[Recorder, str, bytes]
) -> None:
    _, handle, salt = referenced
    before = audit_session(store, SID, keyring=notary.keyring, heads=notary.heads)
    assert [(a.handle, a.seq, a.state) for a in before.artifacts] == [(handle, 1, "present")]
    files = b"".join(p.read_bytes() for p in db_path.parent.glob(db_path.name + "*"))
    assert PERSONAL in files and salt in files  # the check below is not vacuous
    record = erase_artifact(store, handle, reason="GDPR art. 17 request #42", notary=notary)
    assert (record.log_session_id, record.log_seq) == (ERASURE_LOG, 0)
    assert get_personal_artifact(store, handle) is None and store.salted_artifact_info(record.digest) is None
    after = audit_session(store, SID, keyring=notary.keyring, heads=notary.heads)
    assert after.ok and after.root == before.root  # not one ledger byte changed
    assert [(a.state, a.detail) for a in after.artifacts] == [("erased", f"erased at {ERASURE_LOG} seq 0")]
    assert "1 salted artifact(s), 1 erased" in after.summary()
    log = audit_session(store, ERASURE_LOG, keyring=notary.keyring, heads=notary.heads)
    assert log.ok and log.events == 1 and log.state() == "open"
    (row,) = list(store.read_events(ERASURE_LOG))
    event = json.loads(row.event_bytes)
    assert event["custom_kind"] == ERASED_KIND
    assert event["payload"]["handle"] == handle and event["payload"]["sessions"] == [SID]
    assert audit_index(store, keyring=notary.keyring, heads=notary.heads).ok
    store.close()
    files = b"".join(p.read_bytes() for p in db_path.parent.glob(db_path.name + "*"))
    assert not any(form in files for secret in (PERSONAL, salt) for form in _forms(secret))


def test_an_erasure_inside_a_transaction_purges_the_pages_once_it_commits(
    db_path: Path, store: SqliteStore, notary: Notary, referenced: tuple[Recorder, str, bytes]
) -> None:
    """An erasure that joins an open transaction (the kernel's ``memory_write`` erases an overwritten
    memory text in its write's transaction) still purges the freed pages from the WAL, after the commit;
    the store is still open (closing it checkpoints anyway)."""
    _, handle, salt = referenced
    files = b"".join(p.read_bytes() for p in db_path.parent.glob(db_path.name + "*"))
    assert PERSONAL in files and salt in files  # the check below is not vacuous
    with store.transaction():
        erase_artifact(store, handle, reason="memory updated", notary=notary)
    files = b"".join(p.read_bytes() for p in db_path.parent.glob(db_path.name + "*"))
    assert not any(form in files for secret in (PERSONAL, salt) for form in _forms(secret))


def test_erase_is_idempotent_and_refuses_unknown_handles(
    store: SqliteStore, notary: Notary, referenced: tuple[Recorder, str, bytes]
) -> None:
    _, handle, _ = referenced
    first = erase_artifact(store, handle, notary=notary)
    assert erase_artifact(store, handle, notary=notary) == first
    assert len(list(store.read_events(ERASURE_LOG))) == 1
    with pytest.raises(ArtifactNotFound):
        erase_artifact(store, "salted:sha256:" + "ab" * 32)
    with pytest.raises(ValueError):
        erase_artifact(store, "not-a-handle")


def test_content_gone_without_an_erasure_record_is_a_divergence(
    db_path: Path, store: SqliteStore, notary: Notary, referenced: tuple[Recorder, str, bytes]
) -> None:
    tamper(db_path, "DELETE FROM salted_artifacts")
    report = audit_session(store, SID, keyring=notary.keyring, heads=notary.heads)
    assert [(d.seq, d.reason) for d in report.divergences] == [(1, "artifact_missing")]
    assert report.artifacts[0].state == "missing"


def test_an_erasure_record_must_point_at_its_erasure_event(
    db_path: Path, store: SqliteStore, notary: Notary, referenced: tuple[Recorder, str, bytes]
) -> None:
    _, handle, _ = referenced
    erase_artifact(store, handle, notary=notary)
    tamper(db_path, "UPDATE artifact_erasures SET log_seq = 7")
    report = audit_session(store, SID, keyring=notary.keyring)
    assert [d.reason for d in report.divergences] == ["artifact_missing"]
    assert "does not record this erasure" in report.divergences[0].detail


def test_tampered_content_does_not_match_its_handle(
    db_path: Path, store: SqliteStore, referenced: tuple[Recorder, str, bytes]
) -> None:
    _, handle, _ = referenced
    tamper(db_path, "UPDATE salted_artifacts SET content = CAST('someone else' AS BLOB)")
    with pytest.raises(ArtifactIntegrityError, match="does not match") as refused:
        get_personal_artifact(store, handle)
    assert refused.value.handle == handle
    result = runner.invoke(app, ["--db", str(db_path), "verify", SID])  # it said "present"
    assert result.exit_code == 1, result.output
    assert f"artifact {handle}: corrupt" in result.stdout and "artifact_corrupt" in result.stdout


def test_cli_erase_then_verify(
    db_path: Path, store: SqliteStore, referenced: tuple[Recorder, str, bytes]
) -> None:
    _, handle, _ = referenced
    result = runner.invoke(app, ["--db", str(db_path), "erase", handle, "--reason", "request #7"])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip().endswith(f"ledgered at {ERASURE_LOG} seq 0")
    result = runner.invoke(app, ["--db", str(db_path), "verify", SID])
    assert result.exit_code == 0
    assert f"artifact {handle}: erased (erased at {ERASURE_LOG} seq 0)" in result.stdout
    result = runner.invoke(app, ["--db", str(db_path), "verify", "--all"])
    assert result.exit_code == 0, result.stdout
    for bad in ("salted:sha256:" + "cd" * 32, "nonsense"):
        result = runner.invoke(app, ["--db", str(db_path), "erase", bad])
        assert result.exit_code == 2 and result.stderr


def test_artifact_not_found_pickles() -> None:
    import pickle

    error = ArtifactNotFound(handle="salted:sha256:00")
    back = pickle.loads(pickle.dumps(error))
    assert isinstance(back, LookupError) and str(back) == str(error)


def test_only_exact_handle_strings_count_as_references(store: SqliteStore, notary: Notary) -> None:
    rec = Recorder.create(store, session_id=SID, notary=notary)
    handle = "salted:sha256:" + "ef" * 32
    rec.append(Custom(custom_kind="note", payload={"text": f"the doc mentions {handle} in passing"}))
    assert audit_session(store, SID, keyring=notary.keyring).artifacts == []
    rec.append(Custom(custom_kind="ref", payload={"record": handle}))
    report = audit_session(store, SID, keyring=notary.keyring)
    assert [(a.seq, a.state) for a in report.artifacts] == [(1, "missing")]
    assert [d.reason for d in report.divergences] == ["artifact_missing"]


def test_the_erasure_log_is_a_session_but_not_a_run(
    store: SqliteStore, notary: Notary, referenced: tuple[Recorder, str, bytes]
) -> None:
    """`flightlog runs` lists units of agent work (seed 002); flightlog's own erasure log is not one, in the
    incrementally kept projection, after a rebuild, and when the runs are folded from the ledgers."""
    from flightlog.runs.projection import INTERNAL_PREFIX, compute_runs, list_runs, rebuild_projection

    rec, handle, _ = referenced
    rec.append(RunStarted(run_id="r-1", goal="use the picture"))  # a run (a session of custom events is none)
    erase_artifact(store, handle, reason="test", notary=notary)
    assert ERASURE_LOG.startswith(INTERNAL_PREFIX)
    assert ERASURE_LOG in {r.session_id for r in store.list_sessions()}
    incremental = [s.run_id for s in list_runs(store)]
    assert incremental == [SID]
    rebuild_projection(store)
    assert [s.run_id for s in list_runs(store)] == incremental
    assert [s.run_id for s, _ in compute_runs(store)] == incremental
