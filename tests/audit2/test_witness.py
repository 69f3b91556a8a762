"""The witness (C2SP tlog-witness add-checkpoint, tlog-cosignature v1) and its client."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from child_lines import read_line
from flightlog.cli import app
from flightlog.errors import FlightlogError
from flightlog.integrity.checkpoints import origin_for
from flightlog.integrity.keys import KeyManifestError, LogSigner, key_id
from flightlog.integrity.notary import Notary
from flightlog.integrity.notes import parse_note
from flightlog.integrity.proofs import prove_consistency
from flightlog.integrity.verify import audit_session
from flightlog.integrity.witness import (
    COSIGNATURE_TYPE,
    SIZE_CONTENT_TYPE,
    Cosigner,
    CosignerKey,
    Witness,
    WitnessError,
    WitnessServer,
    cosignature_message,
)
from flightlog.integrity.witness_client import (
    TrustedWitness,
    fetch_checkpoint,
    load_witnesses,
    submit_index,
    submit_session,
    witness_checkpoint,
    witnessed_heads,
)
from flightlog.ledger import EMPTY_ROOT
from flightlog.store import SqliteStore

from .conftest import SID, record, step

runner = CliRunner()


# ─── keys and the cosigned message ────────────────────────────────────────────────────────────
def test_cosigned_message_is_the_spec_example() -> None:
    body = "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
    assert cosignature_message(body, 1679315147) == (
        b"cosignature/v1\ntime 1679315147\n"
        b"example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
    )


def test_cosigner_keys_use_type_0x04_and_round_trip() -> None:
    cosigner = Cosigner.generate("witness.example/w1")
    vkey = cosigner.verifier
    digest = hashlib.sha256(b"witness.example/w1\n\x04" + vkey.public_key).digest()
    assert vkey.key_id == int.from_bytes(digest[:4], "big") == key_id(vkey.name, vkey.public_key, 0x04)
    text = str(vkey)
    assert base64.b64decode(text.split("+", 2)[2])[0] == COSIGNATURE_TYPE
    assert CosignerKey.parse(text) == vkey
    assert Cosigner.parse(cosigner.secret_text()).verifier == vkey
    assert "PRIVATE" not in repr(cosigner)
    with pytest.raises(KeyManifestError, match="0x04"):
        CosignerKey.parse(str(LogSigner.generate().verifier))  # a note key (0x01) is no cosigner key
    with pytest.raises(KeyManifestError):
        CosignerKey.parse(text[:-4] + "AAAA")


def test_a_cosignature_is_timestamp_then_signature_and_verifies() -> None:
    cosigner = Cosigner.generate()
    text = "o\n1\n" + base64.b64encode(bytes(32)).decode() + "\n"
    sig = cosigner.cosign(text, 1700000000)
    assert len(sig.signature) == 72 and int.from_bytes(sig.signature[:8], "big") == 1700000000
    assert cosigner.verifier.verify(text, sig) == 1700000000
    assert cosigner.verifier.verify(text.replace("1", "2", 1), sig) is None
    assert Cosigner.generate().verifier.verify(text, sig) is None
    with pytest.raises(ValueError):
        cosigner.cosign(text, 0)


# ─── the add-checkpoint protocol, status by status ───────────────────────────────────────────
def _body(note: str, old: int, proof: Sequence[bytes] = ()) -> bytes:
    lines = "".join(base64.b64encode(p).decode() + "\n" for p in proof)
    return f"old {old}\n{lines}\n{note}".encode()


@pytest.fixture
def notes(store: SqliteStore, notary: Notary) -> list[str]:
    """Checkpoints of SID at sizes 4, 8 and 12."""
    record(store, notary, n=12)
    return [c.body for c in store.checkpoints(SID)]


def test_cosign_then_conflict_then_extend(witness: Witness, notes: list[str], store: SqliteStore) -> None:
    first = witness.add_checkpoint(_body(notes[0], 0))
    assert first.status == 200
    line = first.body.decode()
    assert line.startswith("— flightlog.local/witness ") and line.endswith("\n") and line.count("\n") == 1
    cosig = parse_note("-\n\n" + line).signatures[0]
    assert witness.cosigner.verifier.verify(parse_note(notes[0]).text, cosig) is not None
    again = witness.add_checkpoint(_body(notes[0], 0))
    assert (again.status, again.content_type, again.body) == (409, SIZE_CONTENT_TYPE, b"4\n")
    proof = list(prove_consistency(store, SID, 4, 8).path)
    assert witness.add_checkpoint(_body(notes[1], 4, proof)).status == 200
    assert witness.add_checkpoint(_body(notes[1], 8)).status == 200  # same head again: a fresh cosignature
    stale = witness.add_checkpoint(_body(notes[2], 4, list(prove_consistency(store, SID, 4, 12).path)))
    assert (stale.status, stale.body) == (409, b"8\n")


def test_older_heads_are_refused(witness: Witness, notes: list[str], store: SqliteStore) -> None:
    assert witness.add_checkpoint(_body(notes[1], 0)).status == 200
    older = witness.add_checkpoint(_body(notes[0], 8))
    assert older.status == 400 and b"above the checkpoint size" in older.body
    assert witness.add_checkpoint(_body(notes[0], 0)).status == 409


def test_inconsistent_heads_are_refused_and_kept_as_evidence(
    witness: Witness, notes: list[str], store: SqliteStore, notary: Notary
) -> None:
    assert witness.add_checkpoint(_body(notes[0], 0)).status == 200
    bogus = witness.add_checkpoint(_body(notes[1], 4, [bytes(32)] * 3))
    assert bogus.status == 422
    forked = notary.sign(origin_for(store.ledger_id(), SID), 4, bytes(32), "0" * 64)
    assert witness.add_checkpoint(_body(forked.note, 4)).status == 422  # same size, another root
    evidence = (witness.directory / "evidence.jsonl").read_text().splitlines()
    assert len(evidence) == 2 and json.loads(evidence[0])["reason"] == "inconsistent with size 4"
    assert witness.latest(forked.checkpoint.origin).size == 4  # never moved


def test_signatures_and_origins(witness: Witness, notes: list[str], notary: Notary) -> None:
    forger = LogSigner.generate(notary.signer.name)
    text = parse_note(notes[0]).text
    from flightlog.integrity.notes import sign_note

    assert witness.add_checkpoint(_body(sign_note(text, forger), 0)).status == 403
    sig_line = notes[0].rstrip("\n").rsplit("\n", 1)[1]
    blob = bytearray(base64.b64decode(sig_line.split(" ")[-1]))
    blob[-1] ^= 1
    broken = notes[0].replace(sig_line.split(" ")[-1], base64.b64encode(bytes(blob)).decode())
    refused = witness.add_checkpoint(_body(broken, 0))
    assert refused.status == 403 and b"does not verify" in refused.body
    foreign = sign_note(text.replace("flightlog.local/", "example.com/", 1), notary.signer)
    assert witness.add_checkpoint(_body(foreign, 0)).status == 404


@pytest.mark.parametrize(
    ("body", "status"),
    [
        (b"\xff\xfe", 400),
        (b"new 0\n\nx", 400),
        (b"old 01\n\nx", 400),
        (b"old 0\n", 400),
        (b"old 0\nnot base64!\n\nx\n", 400),
        (b"old 0\n" + b"AAAA\n" + b"\nx\n", 400),
        (b"old 0\n" + b"".join(base64.b64encode(bytes(32)) + b"\n" for _ in range(64)) + b"\nx\n", 400),
        (b"old 0\n\nnot a checkpoint\n", 400),
    ],
)
def test_malformed_requests_are_400(witness: Witness, body: bytes, status: int) -> None:
    assert witness.add_checkpoint(body).status == status


def test_old_size_zero_takes_no_proof_and_size_zero_needs_the_empty_root(
    witness: Witness, notes: list[str], notary: Notary, store: SqliteStore
) -> None:
    assert witness.add_checkpoint(_body(notes[0], 0, [bytes(32)])).status == 422
    origin = origin_for(store.ledger_id(), "empty")
    wrong = notary.sign(origin, 0, bytes(32), None)
    assert witness.add_checkpoint(_body(wrong.note, 0)).status == 422
    empty = notary.sign(origin, 0, bytes.fromhex(EMPTY_ROOT), None)
    assert witness.add_checkpoint(_body(empty.note, 0)).status == 200


def test_state_survives_a_restart_and_the_key_file_is_private(
    witness: Witness, notes: list[str], tmp_path: Path
) -> None:
    assert witness.add_checkpoint(_body(notes[0], 0)).status == 200
    again = Witness.open(witness.directory)
    assert again.cosigner.verifier == witness.cosigner.verifier and again.logs == witness.logs
    assert again.add_checkpoint(_body(notes[0], 0)).body == b"4\n"
    key = witness.directory / "witness.key"
    assert key.stat().st_mode & 0o777 == 0o600
    os.chmod(key, 0o644)
    with pytest.raises(KeyManifestError, match="readable by others"):
        Witness.open(witness.directory)


def test_concurrent_submissions_cannot_roll_the_witness_back(
    witness: Witness, notes: list[str], store: SqliteStore
) -> None:
    assert witness.add_checkpoint(_body(notes[0], 0)).status == 200
    to8 = _body(notes[1], 4, list(prove_consistency(store, SID, 4, 8).path))
    to12 = _body(notes[2], 4, list(prove_consistency(store, SID, 4, 12).path))
    results: list[int] = []
    threads = [
        threading.Thread(target=lambda b=b: results.append(witness.add_checkpoint(b).status))
        for b in [to8, to12] * 4
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [200] + [409] * 7
    assert witness.latest(origin_for(store.ledger_id(), SID)).size in (8, 12)


# ─── over HTTP ───────────────────────────────────────────────────────────────────────────────
def test_http_round_trip_and_monitoring(
    witness: Witness, witness_server: WitnessServer, notes: list[str], store: SqliteStore
) -> None:
    key = witness.cosigner.verifier
    cosigned = witness_checkpoint(witness_server.url, notes[0], old_size=0, proof=[], witness_key=key)
    assert cosigned.startswith(parse_note(notes[0]).text) and len(parse_note(cosigned).signatures) == 2
    with pytest.raises(WitnessError) as info:
        witness_checkpoint(witness_server.url, notes[0], old_size=0, proof=[])
    assert (info.value.status, info.value.size) == (409, 4)
    origin = origin_for(store.ledger_id(), SID)
    assert fetch_checkpoint(witness_server.url, origin) == cosigned
    assert fetch_checkpoint(witness_server.url, origin_for(store.ledger_id(), "nobody")) is None
    with pytest.raises(WitnessError, match="no valid cosignature"):
        witness_checkpoint(
            witness_server.url, notes[0], old_size=4, proof=[], witness_key=Cosigner.generate().verifier
        )


def test_an_unreachable_witness_is_an_error_not_a_hang(notes: list[str]) -> None:
    with pytest.raises(WitnessError, match="unreachable"):
        witness_checkpoint("http://127.0.0.1:9", notes[0], old_size=0, proof=[], timeout=2)
    with pytest.raises(WitnessError, match="http"):
        witness_checkpoint("ftp://x", notes[0], old_size=0, proof=[])


# ─── client: submit, recover from 409, detect rollback ──────────────────────────────────────
def test_submit_session_tracks_the_witnessed_size(
    store: SqliteStore, notary: Notary, witness: Witness, trusted_witness: TrustedWitness
) -> None:
    rec = record(store, notary, n=5)
    url = trusted_witness.url or ""
    first = submit_session(store, SID, url)
    assert (first.size, first.old_size, first.witness) == (4, 0, "flightlog.local/witness")
    for i in range(5, 9):
        rec.append(step(i))
    second = submit_session(store, SID, url)
    assert (second.size, second.old_size) == (8, 4)
    assert [c.size for c in store.cosignatures(first.origin)] == [4, 8]
    store._execute("DELETE FROM cosignatures")  # the database forgot: a 409 tells the client the size
    third = submit_session(store, SID, url)
    assert (third.size, third.old_size) == (8, 8)
    index = submit_index(store, url)
    assert index.size == store.index_size() and index.old_size == 0


def test_submit_refuses_when_the_witness_saw_a_newer_head(
    store: SqliteStore, notary: Notary, witness: Witness, trusted_witness: TrustedWitness, db_path: Path
) -> None:
    rec = record(store, notary, n=8)
    url = trusted_witness.url or ""
    submit_session(store, SID, url)
    for i in range(8, 12):
        rec.append(step(i))
    submit_session(store, SID, url)  # the witness holds 12
    store._execute("DELETE FROM cosignatures")
    store._execute("DELETE FROM checkpoints WHERE size = 12")  # an attacker's rollback of the newest head
    with pytest.raises(WitnessError, match=r"cosigned size 12 .* covers 8: the database was rolled back"):
        submit_session(store, SID, url)


def test_submit_needs_a_trusted_witness_key(
    store: SqliteStore, notary: Notary, witness_server: WitnessServer
) -> None:
    record(store, notary, n=4)
    with pytest.raises(WitnessError, match="no trusted witness key"):
        submit_session(store, SID, witness_server.url)
    with pytest.raises(WitnessError, match="no signed checkpoint"):
        from flightlog.recorder import Recorder

        Recorder.create(store, session_id="blank", notary=notary)
        submit_session(store, "blank", witness_server.url, witness_key=Cosigner.generate().verifier)


def test_witnessed_heads_and_the_audit_report(
    store: SqliteStore, notary: Notary, witness: Witness, trusted_witness: TrustedWitness
) -> None:
    record(store, notary, n=9)
    submit_session(store, SID, trusted_witness.url or "")
    origin = origin_for(store.ledger_id(), SID)
    heads, notes = witnessed_heads(store, origin, keyring=notary.keyring, witnesses=load_witnesses())
    assert notes == [] and {(h.size, h.online) for h in heads} == {(8, True)}
    offline, _ = witnessed_heads(
        store, origin, keyring=notary.keyring, witnesses=load_witnesses(), online=False
    )
    assert {(h.size, h.online) for h in offline} == {(8, False)}
    report = audit_session(store, SID, keyring=notary.keyring, heads=notary.heads, witnessed=heads)
    assert report.ok and report.witnessed == 8
    assert "witnessed up to size 8 by flightlog.local/witness" in report.summary()
    assert report.to_json()["witnessed"] == 8


def test_an_unreachable_witness_is_a_note_not_a_divergence(store: SqliteStore, notary: Notary) -> None:
    record(store, notary, n=4)
    away = TrustedWitness(Cosigner.generate().verifier, "http://127.0.0.1:9")
    heads, notes = witnessed_heads(
        store, origin_for(store.ledger_id(), SID), keyring=notary.keyring, witnesses=[away], timeout=2
    )
    assert heads == [] and len(notes) == 1 and "not checked" in notes[0]


def test_witness_errors_pickle() -> None:
    import pickle

    for error in (WitnessError(url="u", reason="r", status=409, size=3), WitnessError(url="u", reason="r")):
        back = pickle.loads(pickle.dumps(error))
        assert isinstance(back, FlightlogError) and str(back) == str(error) and back.size == error.size


# ─── CLI ─────────────────────────────────────────────────────────────────────────────────────
def test_cli_serve_trust_submit_verify(
    tmp_path: Path, store: SqliteStore, notary: Notary, db_path: Path
) -> None:
    record(store, notary, n=9)
    flightlog = Path(sys.executable).parent / "flightlog"
    server = subprocess.Popen(
        [str(flightlog), "witness", "serve", "--port", "0", "--store", str(tmp_path / "w")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    try:
        assert server.stdout is not None
        key_line, trusted_line, listen_line = (
            read_line(server, f"line {i} of 3 `witness serve` prints (key, trusted, listening)")
            for i in (1, 2, 3)
        )
        assert key_line.startswith("witness key: ") and str(notary.signer.verifier) in trusted_line
        url = listen_line.split()[-1]
        vkey = key_line.split()[-1]
        result = runner.invoke(app, ["--db", str(db_path), "witness", "trust", vkey, "--url", url])
        assert result.exit_code == 0, result.output
        result = runner.invoke(app, ["--db", str(db_path), "witness", "submit", SID, "--index", "--url", url])
        assert result.exit_code == 0, result.output
        assert (
            "at size 8 by flightlog.local/witness" in result.stdout and "/_/index at size 2" in result.stdout
        )
        result = runner.invoke(app, ["--db", str(db_path), "verify", SID])
        assert result.exit_code == 0 and "witnessed up to size 8" in result.stdout
        result = runner.invoke(app, ["--db", str(db_path), "verify", "--all", "--json"])
        rows = json.loads(result.stdout)
        assert rows[-1]["state"] == "index" and rows[-1]["witnessed"] == 2
    finally:
        server.terminate()
        server.communicate(timeout=60)


def test_cli_usage_mistakes(db_path: Path, store: SqliteStore) -> None:
    for args in (
        ["witness", "submit", SID],
        ["witness", "submit", "--url", "http://x"],
        ["witness", "submit", SID, "--url", "http://x", "--witness-key", "bad"],
    ):
        assert runner.invoke(app, ["--db", str(db_path), *args]).exit_code == 2, args
    result = runner.invoke(app, ["--db", str(db_path), "witness", "trust", "garbage"])
    assert result.exit_code == 1 and "flightlog: error:" in result.stderr


def test_a_broken_state_file_is_a_500_never_a_cosignature(
    witness: Witness, notes: list[str], store: SqliteStore
) -> None:
    assert witness.add_checkpoint(_body(notes[0], 0)).status == 200
    origin = origin_for(store.ledger_id(), SID)
    witness._state_path(origin).write_text("{broken")
    assert witness.add_checkpoint(_body(notes[1], 4)).status == 500
    assert witness.get_checkpoint(f"/{hashlib.sha256(origin.encode()).hexdigest()}/checkpoint").status == 500
    assert witness.get_checkpoint("/nope").status == 404
