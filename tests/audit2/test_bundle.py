"""Offline audit bundles: export, then verify with no database and no network; forged bundles rejected."""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flightlog.cli import app
from flightlog.integrity.bundle import FILES, BundleError, audit_bundle, export_bundle
from flightlog.integrity.keys import Keyring, LogSigner, TrustedKey, rotate_key
from flightlog.integrity.notary import Notary
from flightlog.integrity.notes import sign_note
from flightlog.integrity.witness import Witness
from flightlog.integrity.witness_client import TrustedWitness, submit_index, submit_session
from flightlog.recorder import Recorder
from flightlog.store import SqliteStore

from .conftest import SID, record, step

runner = CliRunner()


def _pinned(notary: Notary) -> Keyring:
    """What an outside auditor holds: the log's first public key, nothing else."""
    return Keyring([TrustedKey(notary.signer.verifier, pinned=True)])


@pytest.fixture
def sealed_bundle(tmp_path: Path, store: SqliteStore, notary: Notary) -> Path:
    rec = record(store, notary, n=10)
    rec.finish("completed")
    out = tmp_path / "bundle"
    export_bundle(store, SID, out)
    return out


def _resign_manifest(bundle: Path, signer: LogSigner) -> None:
    """What a forger does after editing files: recompute every sha256 and sign a fresh manifest note."""
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["files"] = {name: hashlib.sha256((bundle / name).read_bytes()).hexdigest() for name in FILES}
    data = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
    (bundle / "manifest.json").write_bytes(data)
    text = f"flightlog-bundle/1\nmanifest {hashlib.sha256(data).hexdigest()}\ntime 1\n"
    (bundle / "manifest.note").write_text(sign_note(text, signer))


def _edit_entry(bundle: Path, seq: int) -> None:
    lines = (bundle / "entries.jsonl").read_bytes().splitlines(keepends=True)
    lines[seq] = lines[seq].replace(b'"i":' + str(seq).encode(), b'"i":99')
    (bundle / "entries.jsonl").write_bytes(b"".join(lines))


def test_a_sealed_session_bundle_proves_everything(sealed_bundle: Path, notary: Notary) -> None:
    assert sorted(p.name for p in sealed_bundle.iterdir()) == sorted(
        [*FILES, "manifest.json", "manifest.note"]
    )
    report = audit_bundle(sealed_bundle, keyring=_pinned(notary))
    assert report.ok, report.problems
    assert report.signer == f"{notary.signer.name}+{notary.signer.key_id:08x}"
    findings = report.findings()
    assert (
        findings[0]
        == "complete up to size 11: 11 entries chained, the signed checkpoint at size 11 matches them"
    )
    assert findings[1] == "sealed (completed)"
    assert findings[2] == "not witnessed: the bundle holds no cosignature"
    assert findings[3] == "indexed: the checkpoint at size 11 is leaf 2 of the signed index log of size 3"
    assert report.to_json()["complete"] == 11


def test_the_audit_needs_no_database_and_no_network(
    sealed_bundle: Path, notary: Notary, store: SqliteStore, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db_path}{suffix}").unlink(missing_ok=True)

    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("the offline audit opened a socket")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    assert audit_bundle(sealed_bundle, keyring=_pinned(notary)).ok
    assert not db_path.exists()


def test_an_open_session_reports_its_unanchored_tail(
    tmp_path: Path, store: SqliteStore, notary: Notary
) -> None:
    record(store, notary, n=10)  # anchored through 8
    export_bundle(store, SID, tmp_path / "b")
    report = audit_bundle(tmp_path / "b", keyring=_pinned(notary))
    assert report.ok
    assert report.findings()[:2] == [
        "complete up to size 8: 10 entries chained, the signed checkpoint at size 8 matches them",
        "open (unanchored tail seqs 8..9)",
    ]


def test_witnessed_bundles_count_only_trusted_witness_keys(
    tmp_path: Path, store: SqliteStore, notary: Notary, witness: Witness, trusted_witness: TrustedWitness
) -> None:
    record(store, notary, n=9)
    submit_session(store, SID, trusted_witness.url or "")
    submit_index(store, trusted_witness.url or "")
    export_bundle(store, SID, tmp_path / "b")
    anyone = audit_bundle(tmp_path / "b", keyring=_pinned(notary))
    assert anyone.ok and anyone.findings()[2] == (
        "not witnessed: cosignatures present, but no trusted witness key given (--witness-key)"
    )
    trusting = audit_bundle(tmp_path / "b", keyring=_pinned(notary), witness_keys=[trusted_witness.key])
    assert trusting.ok and trusting.findings()[2] == "witnessed up to size 8 by flightlog.local/witness"
    assert trusting.index_witnessed == 2


def test_key_rotations_are_followed_only_through_endorsements(
    tmp_path: Path, store: SqliteStore, notary: Notary
) -> None:
    first = notary.signer.verifier
    rec = record(store, notary, n=4)
    rotate_key()
    rotated = Notary.from_env(every=4)
    again = Recorder.attach(store, SID, notary=rotated)
    for i in range(4, 8):
        again.append(step(i))
    export_bundle(store, SID, tmp_path / "b", signer=rotated.signer, keyring=rotated.keyring)
    del rec
    report = audit_bundle(tmp_path / "b", keyring=Keyring([TrustedKey(first, pinned=True)]))
    assert report.ok, report.problems  # keys.json carries the endorsement by the pinned first key
    keys = json.loads((tmp_path / "b" / "keys.json").read_text())
    keys["keys"][1]["endorsement"] = None
    keys["keys"][1]["pinned"] = True  # the bundle cannot make a key trusted by saying so
    (tmp_path / "b" / "keys.json").write_text(json.dumps(keys))
    report = audit_bundle(tmp_path / "b", keyring=Keyring([TrustedKey(first, pinned=True)]))
    assert any(p.startswith("manifest.note: no signature by a trusted key") for p in report.problems)


# ─── forged bundles ──────────────────────────────────────────────────────────────────────────
def test_an_edited_entry_is_named_by_file_and_seq(sealed_bundle: Path, notary: Notary) -> None:
    _edit_entry(sealed_bundle, 3)
    report = audit_bundle(sealed_bundle, keyring=_pinned(notary))
    assert not report.ok
    assert report.problems == ["entries.jsonl: sha256 differs from manifest.json (edited after export)"]
    assert report.audit is not None
    assert (3, "hash_mismatch") in {(d.seq, d.reason) for d in report.audit.divergences}
    assert report.findings()[0].startswith("not complete: seq 3: hash_mismatch")


def test_an_edited_manifest_is_caught_by_the_signed_note(sealed_bundle: Path, notary: Notary) -> None:
    _edit_entry(sealed_bundle, 3)
    manifest = json.loads((sealed_bundle / "manifest.json").read_text())
    manifest["files"]["entries.jsonl"] = hashlib.sha256(
        (sealed_bundle / "entries.jsonl").read_bytes()
    ).hexdigest()
    (sealed_bundle / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    report = audit_bundle(sealed_bundle, keyring=_pinned(notary))
    assert report.problems == [
        "manifest.json: sha256 differs from the signed manifest.note (edited after export)"
    ]
    assert report.audit is not None and not report.audit.ok  # and the chain still names seq 3


def test_a_swapped_key_and_resigned_manifest_are_rejected(sealed_bundle: Path, notary: Notary) -> None:
    evil = LogSigner.generate(notary.signer.name)  # same name, another key
    _edit_entry(sealed_bundle, 3)
    (sealed_bundle / "keys.json").write_text(
        json.dumps({"format": "flightlog-keys/1", "keys": [TrustedKey(evil.verifier).to_json()]})
    )
    _resign_manifest(sealed_bundle, evil)
    report = audit_bundle(sealed_bundle, keyring=_pinned(notary))
    assert not report.ok and report.signer is None
    assert report.problems[0] == (
        f"manifest.note: no signature by a trusted key (signed by {evil.name}+{evil.key_id:08x})"
    )


def test_a_fully_resigned_bundle_with_forged_checkpoints_is_still_unsigned(
    sealed_bundle: Path, notary: Notary
) -> None:
    """Even a forger who re-signs the manifest and every checkpoint with their key gets nothing."""
    evil = Notary.for_signer(LogSigner.generate(notary.signer.name), notary.heads)
    cps = json.loads((sealed_bundle / "checkpoints.json").read_text())
    for cp in cps["checkpoints"]:
        text = cp["note"].split("\n\n")[0] + "\n"
        cp["note"] = sign_note(text, evil.signer)
    (sealed_bundle / "checkpoints.json").write_text(json.dumps(cps))
    _resign_manifest(sealed_bundle, evil.signer)
    report = audit_bundle(sealed_bundle, keyring=_pinned(notary))
    assert not report.ok and report.audit is not None
    assert report.audit.anchored == 0 and {d.reason for d in report.audit.divergences} == {"bad_checkpoint"}


def test_missing_and_malformed_files_are_named(sealed_bundle: Path, notary: Notary) -> None:
    (sealed_bundle / "grants.json").unlink()
    (sealed_bundle / "stray.txt").write_text("x")
    report = audit_bundle(sealed_bundle, keyring=_pinned(notary))
    assert any(p.startswith("grants.json: unreadable") for p in report.problems)
    assert any("stray.txt" in n for n in report.notes)
    (sealed_bundle / "manifest.note").unlink()
    assert (
        audit_bundle(sealed_bundle, keyring=_pinned(notary))
        .problems[0]
        .startswith("manifest.note: unreadable")
    )
    with pytest.raises(BundleError, match="no such directory"):
        audit_bundle(sealed_bundle / "nope")


def test_export_refuses_a_non_empty_directory(sealed_bundle: Path, store: SqliteStore) -> None:
    with pytest.raises(BundleError, match="not empty"):
        export_bundle(store, SID, sealed_bundle)


def test_an_unindexed_session_says_so(tmp_path: Path, store: SqliteStore, notary: Notary) -> None:
    notary.index = False
    record(store, notary, n=4)
    export_bundle(store, SID, tmp_path / "b")
    report = audit_bundle(tmp_path / "b", keyring=_pinned(notary))
    assert report.ok and report.findings()[3] == (
        "not indexed: the bundle holds no index inclusion proof (the session was never indexed)"
    )


# ─── CLI ─────────────────────────────────────────────────────────────────────────────────────
def test_cli_export_bundle_and_offline_audit(
    tmp_path: Path, store: SqliteStore, notary: Notary, db_path: Path
) -> None:
    record(store, notary, n=10).finish("completed")
    out = tmp_path / "b"
    result = runner.invoke(app, ["--db", str(db_path), "export", SID[:4], "--bundle", str(out)])
    assert result.exit_code == 0 and "wrote a bundle of 11 events" in result.stderr
    vkey = str(notary.signer.verifier)
    result = runner.invoke(
        app, ["--db", str(tmp_path / "absent.db"), "audit", "--bundle", str(out), "--key", vkey]
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[:3] == [
        f"ok        bundle {out}  session {SID}",
        f"          manifest signed by {notary.signer.name}+{notary.signer.key_id:08x}",
        "          complete up to size 11: 11 entries chained, the signed checkpoint at size 11 matches them",
    ]
    assert not (tmp_path / "absent.db").exists()
    result = runner.invoke(app, ["audit", "--bundle", str(out), "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)["complete"] == 11
    shutil.copytree(out, tmp_path / "forged")
    _edit_entry(tmp_path / "forged", 2)
    result = runner.invoke(app, ["audit", "--bundle", str(tmp_path / "forged"), "--key", vkey])
    assert result.exit_code == 1
    assert "REJECTED" in result.stdout and "PROBLEM: entries.jsonl: sha256 differs" in result.stdout
    assert "seq 2: hash_mismatch" in result.stdout


def test_cli_audit_of_a_bundle_from_an_untrusted_signer_names_the_key_flag(
    tmp_path: Path, sealed_bundle: Path, notary: Notary, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An auditor on another machine (another key dir) ran `audit --bundle` and got ten "no signature by a
    trusted key" lines and no word of --key: one hint names it, one line says what was checked anyway."""
    monkeypatch.setenv("FLIGHTLOG_KEY_DIR", str(tmp_path / "auditor-keys"))
    result = runner.invoke(app, ["audit", "--bundle", str(sealed_bundle)])
    assert result.exit_code == 1 and "REJECTED" in result.stdout
    signer = f"{notary.signer.name}+{notary.signer.key_id:08x}"
    assert result.stdout.splitlines()[-2:] == [
        f"hint: pass --key VKEY to check the signatures: no key of {signer} is trusted here"
        " (`flightlog keys show` prints its VKEY where the bundle was made)",
        "      without it: the hash chain of its 11 events and the files' sha256 (against manifest.json)"
        " were checked and agree; who signed them was not",
    ]
    _edit_entry(sealed_bundle, 2)  # something else wrong too: the hint only, no "agree"
    result = runner.invoke(app, ["audit", "--bundle", str(sealed_bundle)])
    assert result.stdout.splitlines()[-1].startswith("hint: pass --key VKEY") and "agree" not in result.stdout
    vkey = str(notary.signer.verifier)
    result = runner.invoke(app, ["audit", "--bundle", str(sealed_bundle), "--key", vkey])
    assert "seq 2: hash_mismatch" in result.stdout and "hint:" not in result.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["audit", "--bundle", "/no/such/dir"],
        ["audit", "--bundle", ".", "--key", "garbage"],
        ["audit", SID, "--bundle", "."],
        ["export", SID, "--bundle", "x", "-o", "y"],
    ],
)
def test_cli_bundle_usage_mistakes(
    args: list[str], db_path: Path, store: SqliteStore, notary: Notary
) -> None:
    record(store, notary, n=1)
    assert runner.invoke(app, ["--db", str(db_path), *args]).exit_code == 2
