"""Signed grant policies: DSSE envelopes, a policy key distinct from the log key, ledgered digests."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import pickle
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from typer.testing import CliRunner

from flightlog.cli import app
from flightlog.encoding import canonical_json
from flightlog.errors import GrantError
from flightlog.integrity.grants import (
    PAYLOAD_TYPE,
    GrantPolicy,
    load_policy_keys,
    load_policy_signer,
    pae,
    policy_digest,
    record_grant,
    session_policy_digest,
    sign_grant,
    trust_policy_key,
    verify_grant,
)
from flightlog.integrity.keys import KeyManifestError, LogSigner, key_dir, load_signer
from flightlog.recorder import Recorder
from flightlog.store import SqliteStore

from .conftest import SID, step

runner = CliRunner()

POLICY = GrantPolicy(
    policy_id="ci-readonly",
    tools_allow=["read_*", "grep", "shell"],
    tools_deny=["read_secrets"],
    path_globs=["src/**", "tests/**"],
    command_prefixes=["git status", "pytest"],
    network_hosts=["*.pypi.org"],
    approval_required=["side_effect", "idempotent"],
    authority_epoch=0,
    not_before_ms=0,
    not_after_ms=4_102_444_800_000,
)


def test_pae_matches_the_dsse_test_vector() -> None:
    assert pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )


def test_pae_verifies_the_dsse_spec_signature() -> None:
    """The spec's ECDSA P-256 example envelope verifies over our PAE bytes (protocol.md, Test Vectors)."""
    x = 46950820868899156662930047687818585632848591499744589407958293238635476079160
    y = 5640078356564379163099075877009565129882514886557779369047442380624545832820
    key = ec.EllipticCurvePublicNumbers(x, y, ec.SECP256R1()).public_key()
    raw = base64.b64decode(
        "A3JqsQGtVsJ2O2xqrI5IcnXip5GToJ3F+FnZ+O88SjtR6rDAajabZKciJTfUiHqJPcIAriEGAHTVeCUjW2JIZA=="
    )
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    key.verify(der, pae("http://example.com/HelloWorld", b"hello world"), ec.ECDSA(hashes.SHA256()))


def test_sign_and_verify_round_trip() -> None:
    signer = load_policy_signer()
    envelope = sign_grant(POLICY, signer)
    assert envelope["payloadType"] == PAYLOAD_TYPE
    assert base64.b64decode(envelope["payload"]) == canonical_json(POLICY.model_dump(mode="json"))
    verified = verify_grant(json.dumps(envelope), load_policy_keys())
    assert verified.policy == POLICY and verified.key == signer.verifier
    assert (
        verified.digest == policy_digest(POLICY) == "sha256:" + hashlib.sha256(verified.payload).hexdigest()
    )
    assert (key_dir() / "policy.key").stat().st_mode & 0o777 == 0o600


def test_a_policy_signed_by_the_log_key_is_rejected() -> None:
    log_key = load_signer()  # the log key, in the same key directory
    load_policy_signer()
    with pytest.raises(GrantError, match="no signature by a trusted policy key") as info:
        verify_grant(sign_grant(POLICY, log_key), load_policy_keys())
    assert info.value.key_id == f"{log_key.name}+{log_key.key_id:08x}"


def test_the_log_key_can_never_become_a_policy_key(tmp_path: Path) -> None:
    log_key = load_signer()
    with pytest.raises(KeyManifestError, match="distinct"):
        trust_policy_key(str(log_key.verifier))
    (key_dir() / "policy-keys.json").write_text(
        json.dumps({"format": "flightlog-policy-keys/1", "keys": [str(log_key.verifier)]})
    )
    with pytest.raises(KeyManifestError, match="distinct"):
        load_policy_keys()
    (key_dir() / "policy-keys.json").unlink()
    fd = os.open(key_dir() / "policy.key", os.O_WRONLY | os.O_CREAT, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(log_key.secret_text())
    with pytest.raises(KeyManifestError, match="distinct"):
        load_policy_signer()


@pytest.mark.parametrize(
    "tamper",
    [
        lambda e: e.update(
            payload=base64.b64encode(base64.b64decode(e["payload"]).replace(b"ci-", b"cx-")).decode()
        ),
        lambda e: e.update(payloadType="application/vnd.other+json"),
        lambda e: e["signatures"][0].update(sig=base64.b64encode(bytes(64)).decode()),
        lambda e: e.update(signatures=[]),
        lambda e: e.pop("payload"),
    ],
    ids=["payload", "payload-type", "signature", "no-signatures", "no-payload"],
)
def test_a_tampered_policy_is_rejected(tamper: object) -> None:
    envelope = sign_grant(POLICY, load_policy_signer())
    tamper(envelope)  # type: ignore[operator]
    with pytest.raises(GrantError):
        verify_grant(envelope, load_policy_keys())


def test_an_embedded_key_is_never_a_trust_anchor() -> None:
    load_policy_signer()
    attacker = LogSigner.generate("flightlog.local/policy")
    envelope = sign_grant(POLICY.model_copy(update={"tools_deny": []}), attacker)
    envelope["publicKey"] = str(attacker.verifier)  # DSSE: unknown fields are ignored
    envelope["signatures"][0]["publicKey"] = str(attacker.verifier)
    with pytest.raises(GrantError, match="no signature by a trusted policy key"):
        verify_grant(envelope, load_policy_keys())


def test_signed_by_the_trusted_key_for_another_payload_type() -> None:
    signer = load_policy_signer()
    body = canonical_json(POLICY.model_dump(mode="json"))
    sig = signer.sign(pae("application/json", body))
    envelope = {
        "payloadType": "application/json",
        "payload": base64.b64encode(body).decode(),
        "signatures": [{"sig": base64.b64encode(sig).decode()}],
    }
    with pytest.raises(GrantError, match="payload type"):
        verify_grant(envelope, load_policy_keys())


def test_url_safe_base64_and_a_missing_keyid_are_accepted() -> None:
    envelope = sign_grant(POLICY, load_policy_signer())
    envelope["payload"] = base64.urlsafe_b64encode(base64.b64decode(envelope["payload"])).decode().rstrip("=")
    envelope["signatures"][0]["sig"] = base64.urlsafe_b64encode(
        base64.b64decode(envelope["signatures"][0]["sig"])
    ).decode()
    del envelope["signatures"][0]["keyid"]
    assert verify_grant(envelope, load_policy_keys()).policy == POLICY


def test_a_signed_payload_that_is_not_a_policy_is_rejected() -> None:
    signer = load_policy_signer()
    body = b'{"policy_id": "x", "root": true}'
    envelope = {
        "payloadType": PAYLOAD_TYPE,
        "payload": base64.b64encode(body).decode(),
        "signatures": [{"sig": base64.b64encode(signer.sign(pae(PAYLOAD_TYPE, body))).decode()}],
    }
    with pytest.raises(GrantError, match="not a grant policy"):
        verify_grant(envelope, load_policy_keys())
    for bad in ("not json", "[]", {"payload": "", "payloadType": PAYLOAD_TYPE}):
        with pytest.raises(GrantError):
            verify_grant(bad, load_policy_keys())  # type: ignore[arg-type]


def test_validity_window_and_authority_epoch() -> None:
    envelope = sign_grant(
        POLICY.model_copy(update={"not_before_ms": 1000, "not_after_ms": 2000}), load_policy_signer()
    )
    keys = load_policy_keys()
    assert verify_grant(envelope, keys, at_ms=1000).policy.policy_id == "ci-readonly"
    for at in (999, 2000):
        with pytest.raises(GrantError, match="not valid at"):
            verify_grant(envelope, keys, at_ms=at)
    assert verify_grant(envelope, keys, at_ms=5000, check_window=False)
    with pytest.raises(GrantError, match="authority epoch 0, the writer holds 1"):
        verify_grant(envelope, keys, at_ms=1500, epoch=1)


def test_policy_ceilings() -> None:
    assert POLICY.allows_tool("read_file") and POLICY.allows_tool("shell")
    assert not POLICY.allows_tool("read_secrets") and not POLICY.allows_tool("write_file")
    assert POLICY.needs_approval("idempotent") and not POLICY.needs_approval("read_only")
    assert POLICY.allows_host("files.PyPI.org") and not POLICY.allows_host("evil.example")
    with pytest.raises(ValueError):
        GrantPolicy.model_validate({"policy_id": "x", "unknown": 1})
    with pytest.raises(ValueError):
        GrantPolicy(policy_id="")


def test_record_grant_ledgers_the_policy_and_its_digest(store: SqliteStore) -> None:
    envelope = sign_grant(POLICY, load_policy_signer())
    rec = Recorder.create(store, session_id=SID)
    verified = record_grant(rec, envelope, load_policy_keys())
    (row,) = list(store.read_events(SID))
    event = json.loads(row.event_bytes)
    assert event["custom_kind"] == "grant_policy"
    assert event["payload"]["digest"] == verified.digest == session_policy_digest(store, SID)
    assert event["payload"]["signed"] is True and event["payload"]["key"] == str(verified.key)
    assert event["payload"]["policy"]["policy_id"] == "ci-readonly"
    assert json.loads(store.grant_policies(SID)[0][1]) == envelope  # the envelope is kept beside the ledger
    assert session_policy_digest(store, "nobody") is None


def test_record_grant_refuses_another_epoch_and_records_nothing(store: SqliteStore) -> None:
    envelope = sign_grant(POLICY, load_policy_signer())  # for authority epoch 0
    Recorder.create(store, session_id=SID).append(step(0))
    resumed = Recorder.attach(store, SID)  # takes authority: epoch 1
    with pytest.raises(GrantError, match="authority epoch 0, the writer holds 1"):
        record_grant(resumed, envelope, load_policy_keys())
    assert len(list(store.read_events(SID))) == 1 and store.grant_policies(SID) == []


def test_unsigned_policies_get_a_digest_too(store: SqliteStore) -> None:
    rec = Recorder.create(store, session_id=SID)
    rec.record_grant_policy("p1", {"allow": ["read"]})
    assert (
        session_policy_digest(store, SID)
        == "sha256:" + hashlib.sha256(canonical_json({"allow": ["read"]})).hexdigest()
    )


def test_grant_error_pickles() -> None:
    error = GrantError(reason="no", key_id="k+00000000")
    back = pickle.loads(pickle.dumps(error))
    assert str(back) == str(error) == "grant policy (key k+00000000): no" and back.key_id == error.key_id


def test_cli_sign_verify_key_trust(tmp_path: Path) -> None:
    policy_file, envelope_file = tmp_path / "policy.json", tmp_path / "envelope.json"
    policy_file.write_text(POLICY.model_dump_json())
    result = runner.invoke(app, ["grants", "sign", str(policy_file), "-o", str(envelope_file)])
    assert result.exit_code == 0 and policy_digest(POLICY) in result.stdout
    result = runner.invoke(app, ["grants", "verify", str(envelope_file)])
    assert result.exit_code == 0 and result.stdout.startswith(
        "ok: ci-readonly signed by flightlog.local/policy+"
    )
    result = runner.invoke(app, ["grants", "verify", str(envelope_file), "--json"])
    assert json.loads(result.stdout)["digest"] == policy_digest(POLICY)
    result = runner.invoke(app, ["grants", "verify", str(envelope_file), "--epoch", "3"])
    assert result.exit_code == 1 and "authority epoch" in result.stderr
    envelope_file.write_text(json.dumps(sign_grant(POLICY, load_signer())))  # the log key
    result = runner.invoke(app, ["grants", "verify", str(envelope_file)])
    assert result.exit_code == 1 and "no signature by a trusted policy key" in result.stderr
    key = runner.invoke(app, ["grants", "key"]).stdout.strip()
    assert key == str(load_policy_signer().verifier)
    other = LogSigner.generate("elsewhere/policy")
    assert runner.invoke(app, ["grants", "trust", str(other.verifier)]).exit_code == 0
    assert other.verifier in load_policy_keys()
    assert runner.invoke(app, ["grants", "sign", str(tmp_path / "nope.json"), "-o", "x"]).exit_code == 2
    assert runner.invoke(app, ["grants", "verify", str(tmp_path / "nope.json")]).exit_code == 2


def test_cli_sign_names_each_field_of_a_bad_policy_on_its_own_line(tmp_path: Path) -> None:
    """One ``flightlog: error: FILE: FIELD: message`` line per validation error, no pydantic URLs (before:
    the raw ValidationError on one line, with errors.pydantic.dev links)."""
    policy_file = tmp_path / "bad.json"
    policy_file.write_text(json.dumps({**POLICY.model_dump(mode="json"), "policy_id": 5, "bogus": 1}))
    result = runner.invoke(app, ["grants", "sign", str(policy_file), "-o", str(tmp_path / "out.json")])
    assert result.exit_code == 2 and not (tmp_path / "out.json").exists()
    assert result.stderr.splitlines() == [
        f"flightlog: error: {policy_file}: policy_id: Input should be a valid string (got 5)",
        f"flightlog: error: {policy_file}: bogus: Extra inputs are not permitted (got 1)",
    ]
    policy_file.write_text('{"policy_id": "p"')
    result = runner.invoke(app, ["grants", "sign", str(policy_file), "-o", str(tmp_path / "out.json")])
    assert result.exit_code == 2 and "pydantic.dev" not in result.stderr
    assert (
        result.stderr
        == f"flightlog: error: {policy_file}: not JSON: EOF while parsing an object at line 1 column 17\n"
    )
