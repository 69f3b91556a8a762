"""Log keys: C2SP signed-note key IDs and key text, the manifest, file modes, rotation and endorsements.

Known answers from golang.org/x/mod/sumdb/note's documentation (the reference implementation the C2SP
signed-note spec was written from): key ``PeterNeumann`` with key ID c74f20a3, and the note it signs.
"""

from __future__ import annotations

import json
import os
import pickle
import stat
from pathlib import Path

import pytest

from flightlog.errors import FlightlogError
from flightlog.integrity.keys import (
    DEFAULT_KEY_NAME,
    ENV_KEY,
    KeyManifestError,
    Keyring,
    LogSigner,
    TrustedKey,
    VerifierKey,
    key_id,
    load_keyring,
    load_signer,
    rotate_key,
    trust_key,
    valid_key_name,
)
from flightlog.integrity.notes import NoteError, open_note, parse_note, sign_note
from flightlog.notarization import SessionSealed

GO_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
GO_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
GO_TEXT = (
    "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n"
)
GO_NOTE = (
    GO_TEXT
    + "\n\u2014 PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n"
)


def test_go_reference_key_text_key_id_and_signature() -> None:
    signer = LogSigner.parse(GO_SKEY)
    assert (signer.name, signer.key_id) == ("PeterNeumann", 0xC74F20A3)
    assert str(signer.verifier) == GO_VKEY
    assert signer.secret_text() == GO_SKEY
    assert key_id("PeterNeumann", signer.verifier.public_key) == 0xC74F20A3
    assert sign_note(GO_TEXT, signer) == GO_NOTE  # Ed25519 is deterministic: byte-for-byte the Go output
    verifier = VerifierKey.parse(GO_VKEY)
    assert open_note(GO_NOTE, Keyring([TrustedKey(verifier)])).text == GO_TEXT
    assert "AYEKF" not in repr(signer)  # the secret never shows in a repr


@pytest.mark.parametrize(
    "text",
    [
        "PeterNeumann+c74f20a4+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",  # wrong key id
        "PeterNeumann+C74F20A3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",  # uppercase hex
        "PeterNeumann+c74f20a3+Apc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",  # not 0x01 + 32 bytes
        "PeterNeumann+c74f20a3+AhpcQcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWx",  # bad base64
        "Peter Neumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",  # space in the name
        "c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",  # no name
        "",
    ],
)
def test_malformed_verifier_keys_are_refused(text: str) -> None:
    with pytest.raises(KeyManifestError):
        VerifierKey.parse(text)


@pytest.mark.parametrize(
    "text",
    [
        GO_SKEY.replace("PRIVATE+KEY", "PUBLIC+KEY"),
        GO_SKEY.replace("c74f20a3", "c74f20a4"),
        GO_SKEY[:-4],
        "PRIVATE+KEY+PeterNeumann+c74f20a3",
    ],
)
def test_malformed_signer_keys_are_refused(text: str) -> None:
    with pytest.raises(KeyManifestError):
        LogSigner.parse(text)


def test_key_names() -> None:
    assert valid_key_name("example.com/log") and valid_key_name(DEFAULT_KEY_NAME)
    for bad in ("", "a b", "a+b", "a\u00a0b", "a\nb"):
        assert not valid_key_name(bad), bad


def test_first_use_creates_a_0600_key_and_a_manifest(tmp_path: Path) -> None:
    directory = tmp_path / "keys"
    signer = load_signer()
    files = sorted(p.name for p in directory.iterdir())
    assert files == ["keys.json", f"log-{signer.key_id:08x}.key"]
    key_file = directory / files[1]
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert key_file.read_text().strip() == signer.secret_text()
    assert load_signer().verifier == signer.verifier  # stable across loads
    ring = load_keyring()
    assert [k.verifier for k in ring] == [signer.verifier]
    assert next(iter(ring)).valid_at(0)


def test_a_key_file_readable_by_others_is_refused(tmp_path: Path) -> None:
    signer = load_signer()
    os.chmod(tmp_path / "keys" / f"log-{signer.key_id:08x}.key", 0o644)
    with pytest.raises(KeyManifestError, match="readable by others"):
        load_signer()


def test_no_key_without_create(tmp_path: Path) -> None:
    with pytest.raises(KeyManifestError, match="no log key"):
        load_signer(create=False)


def test_env_key_signs_and_is_trusted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(ENV_KEY, GO_SKEY)
    assert str(load_signer().verifier) == GO_VKEY
    assert not (tmp_path / "keys").exists()  # nothing written
    assert [str(k.verifier) for k in load_keyring()] == [GO_VKEY]
    monkeypatch.setenv(ENV_KEY, "PRIVATE+KEY+broken")
    with pytest.raises(KeyManifestError, match=ENV_KEY):
        load_signer()


def test_rotation_endorses_the_new_key_and_closes_the_old_window(tmp_path: Path) -> None:
    old = load_signer()
    new = rotate_key(at_ms=5_000)
    assert new.key_id != old.key_id and new.name == old.name
    assert load_signer().verifier == new.verifier
    first, second = list(load_keyring())
    assert (first.not_before_ms, first.not_after_ms) == (0, 5_000)
    assert (second.not_before_ms, second.not_after_ms) == (5_000, None)
    assert second.endorsement is not None
    note = open_note(second.endorsement, Keyring([first]), at_ms=4_999)
    assert note.text == f"flightlog key endorsement\n{new.verifier}\n5000\n"
    assert first.valid_at(4_999) and not first.valid_at(5_000) and second.valid_at(5_000)
    third = rotate_key(at_ms=9_000, name="test.example/log2")
    assert third.name == "test.example/log2"
    assert [k.not_after_ms for k in load_keyring()] == [5_000, 9_000, None]
    with pytest.raises(KeyManifestError, match="not after"):
        rotate_key(at_ms=8_000)


def _manifest(tmp_path: Path) -> dict:  # type: ignore[type-arg]
    return json.loads((tmp_path / "keys" / "keys.json").read_text())  # type: ignore[no-any-return]


def _write(tmp_path: Path, doc: dict) -> None:  # type: ignore[type-arg]
    (tmp_path / "keys" / "keys.json").write_text(json.dumps(doc))


def test_a_forged_endorsement_makes_the_manifest_refused(tmp_path: Path) -> None:
    load_signer()
    rotate_key(at_ms=5_000)
    doc = _manifest(tmp_path)
    intruder = LogSigner.generate("test.example/intruder")
    endorsement = parse_note(doc["keys"][1]["endorsement"])
    doc["keys"].append(
        {
            "vkey": str(intruder.verifier),
            "not_before_ms": 6_000,
            "not_after_ms": None,
            "endorsement": sign_note(endorsement.text, intruder),
        }
    )
    _write(tmp_path, doc)
    with pytest.raises(KeyManifestError, match="does not verify"):
        load_keyring()
    doc["keys"][-1]["endorsement"] = None
    _write(tmp_path, doc)
    with pytest.raises(KeyManifestError, match="neither pinned nor endorsed"):
        load_keyring()


def test_an_endorsement_for_another_window_is_refused(tmp_path: Path) -> None:
    load_signer()
    rotate_key(at_ms=5_000)
    doc = _manifest(tmp_path)
    doc["keys"][1]["not_before_ms"] = 1_000  # backdated: the endorsement says 5000
    _write(tmp_path, doc)
    with pytest.raises(KeyManifestError, match="does not verify"):
        load_keyring()


@pytest.mark.parametrize(
    "content", ["{", '{"format": "other", "keys": []}', '{"format": "flightlog-keys/1"}']
)
def test_an_unreadable_manifest_is_refused(tmp_path: Path, content: str) -> None:
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "keys.json").write_text(content)
    with pytest.raises(KeyManifestError, match=r"keys\.json"):
        load_keyring()


def test_trusting_another_logs_key(tmp_path: Path) -> None:
    mine = load_signer()
    entry = trust_key(GO_VKEY, not_before_ms=10)
    assert entry.pinned and str(entry.verifier) == GO_VKEY
    assert trust_key(GO_VKEY) == entry  # idempotent
    ring = load_keyring()
    assert [k.verifier for k in ring] == [mine.verifier, VerifierKey.parse(GO_VKEY)]
    assert ring.find("PeterNeumann", 0xC74F20A3)[0].valid_at(10)


@pytest.mark.parametrize(
    "error",
    [
        KeyManifestError(path="/k/keys.json", reason="bad"),
        NoteError(reason="bad note"),
        SessionSealed(session_id="s"),
    ],
    ids=["KeyManifestError", "NoteError", "SessionSealed"],
)
def test_audit_errors_pickle_and_keep_their_fields(error: Exception) -> None:
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error) and str(again) == str(error) and isinstance(again, FlightlogError)
    assert vars(again) == vars(error)
