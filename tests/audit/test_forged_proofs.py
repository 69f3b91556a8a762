"""A proof whose tree head no trusted key signed is refused: the Merkle math alone authenticates nothing.

Forgeries: a one-leaf "tree" whose root is the leaf hash of any event, with the checkpoint set to null
or deleted; the same for consistency and index proofs. ``--unsigned-root-ok`` checks the math alone and
says the root is NOT authenticated.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from flightlog.cli import audit as cli_audit
from flightlog.cli import options
from flightlog.cli import root as cli_root
from flightlog.cli.audit import audit_app
from flightlog.integrity.keys import ENV_KEY_DIR
from flightlog.integrity.notary import Notary
from flightlog.integrity.proofs import load_proof, prove_consistency, prove_inclusion
from flightlog.ledger import leaf_hash
from flightlog.recorder import Recorder
from flightlog.store import SqliteStore

from .conftest import SID, step

runner = CliRunner()


@pytest.fixture
def root() -> typer.Typer:
    app = typer.Typer(cls=options.Group, no_args_is_help=True, add_completion=False)
    app.callback()(cli_root.main_options)
    app.add_typer(audit_app)
    return app


@pytest.fixture
def recorded(db_path: Path, store: SqliteStore) -> Path:
    rec = Recorder.create(store, session_id=SID, notary=Notary.from_env(every=4))
    for i in range(10):
        rec.append(step(i))  # checkpoints at 4 and 8
    store.close()
    return db_path


def _verify(root: typer.Typer, db: Path, doc: dict[str, Any], *args: str) -> tuple[int, str]:
    result = runner.invoke(root, ["--db", str(db), "verify-proof", *args], input=json.dumps(doc))
    return result.exit_code, result.stdout


def _prove(root: typer.Typer, db: Path, *args: str) -> dict[str, Any]:
    result = runner.invoke(root, ["--db", str(db), "prove", SID, *args])
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def _forged_inclusion(root: typer.Typer, db: Path) -> dict[str, Any]:
    doc = _prove(root, db, "--seq", "3")
    event = doc["event"]
    forged_leaf = leaf_hash(event.encode("utf-8")).hex()
    return doc | {"seq": 0, "tree_size": 1, "leaf_hash": forged_leaf, "root": forged_leaf, "proof": []}


@pytest.mark.parametrize("how", ["null", "deleted"])
def test_forged_inclusion_proof_without_checkpoint_is_refused(
    root: typer.Typer, recorded: Path, how: str
) -> None:
    doc = _forged_inclusion(root, recorded)
    if how == "null":
        doc["checkpoint"] = None
    else:
        del doc["checkpoint"]
    code, out = _verify(root, recorded, doc)
    assert code == 1
    assert "ok" not in out.split(":")[0]
    assert "tree head at size 1 is unsigned" in out
    code, out = _verify(root, recorded, doc, "--json")
    result = json.loads(out)
    assert code == 1 and (result["ok"], result["authenticated"], result["unsigned_heads"]) == (
        False,
        False,
        [1],
    )


def test_forged_inclusion_proof_is_refused_with_no_trusted_keys(
    root: typer.Typer, recorded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = _forged_inclusion(root, recorded) | {"checkpoint": None}
    monkeypatch.setenv(ENV_KEY_DIR, str(tmp_path / "empty-keys"))
    code, out = _verify(root, recorded, doc)
    assert code == 1 and "unsigned" in out and "no trusted log keys" in out


def test_unsigned_root_ok_checks_the_math_and_says_not_authenticated(
    root: typer.Typer, recorded: Path
) -> None:
    doc = _forged_inclusion(root, recorded) | {"checkpoint": None}
    code, out = _verify(root, recorded, doc, "--unsigned-root-ok")
    assert code == 0 and "root is NOT authenticated" in out and "ok: proof holds" not in out
    code, out = _verify(root, recorded, doc, "--unsigned-root-ok", "--json")
    assert code == 0 and json.loads(out) == {
        "ok": True,
        "authenticated": False,
        "unsigned_heads": [1],
        "problems": [],
    }
    bad_math = doc | {"root": "00" * 32}
    assert _verify(root, recorded, bad_math, "--unsigned-root-ok")[0] == 1


def test_a_signed_proof_still_holds(root: typer.Typer, recorded: Path) -> None:
    doc = _prove(root, recorded, "--seq", "3")
    code, out = _verify(root, recorded, doc, "--json")
    assert code == 0 and json.loads(out)["authenticated"] is True


def test_forged_consistency_proof_without_a_signed_new_head_is_refused(
    root: typer.Typer, recorded: Path
) -> None:
    signed = _prove(root, recorded, "--from", "4", "--to", "8")
    one = _forged_inclusion(root, recorded)["root"]
    forged = signed | {
        "old_size": 1,
        "new_size": 1,
        "old_root": one,
        "new_root": one,
        "proof": [],
        "old_checkpoint": None,
        "new_checkpoint": None,
    }
    code, out = _verify(root, recorded, forged)
    assert code == 1 and "tree head at size 1 is unsigned" in out
    del forged["old_checkpoint"], forged["new_checkpoint"]
    assert _verify(root, recorded, forged)[0] == 1
    # a signed old head does not vouch for a new one
    code, out = _verify(root, recorded, signed | {"new_checkpoint": None})
    assert code == 1 and "tree head at size 8 is unsigned" in out
    # a signed new head vouches for the old root through the proof
    assert _verify(root, recorded, signed | {"old_checkpoint": None})[0] == 0


def test_forged_index_proof_without_index_checkpoint_is_refused(root: typer.Typer, recorded: Path) -> None:
    doc = _prove(root, recorded, "--index")
    assert _verify(root, recorded, doc)[0] == 0
    forged_root = leaf_hash(doc["leaf"].encode("utf-8")).hex()
    forged = doc | {
        "leaf_index": 0,
        "tree_size": 1,
        "root": forged_root,
        "proof": [],
        "index_checkpoint": None,
    }
    code, out = _verify(root, recorded, forged)
    assert code == 1 and "index log's tree head at size 1 is unsigned" in out
    del forged["index_checkpoint"]
    assert _verify(root, recorded, forged)[0] == 1
    code, out = _verify(root, recorded, forged, "--unsigned-root-ok")
    assert code == 0 and "NOT authenticated" in out


def test_check_with_a_keyring_refuses_unsigned_heads(store: SqliteStore, notary: Notary) -> None:
    rec = Recorder.create(store, session_id=SID, notary=notary)
    for i in range(6):
        rec.append(step(i))  # checkpoint at 4; 4..5 unanchored
    tail = prove_inclusion(store, SID, 5)
    assert tail.checkpoint is None and tail.unsigned_heads() == [6]
    assert any("unsigned" in p for p in tail.check(notary.keyring))
    assert tail.check(notary.keyring, allow_unsigned=True) == []
    assert tail.check() == []  # no keyring: the math only
    consistency = prove_consistency(store, SID, 2, 6)
    assert any("unsigned" in p for p in consistency.check(notary.keyring))
    anchored = prove_consistency(store, SID, 2, 4)
    assert anchored.unsigned_heads() == [] and anchored.check(notary.keyring) == []
    forged = load_proof(prove_inclusion(store, SID, 1, tree_size=4).to_json() | {"checkpoint": None})
    assert forged.check(notary.keyring)


def test_verify_proof_without_file_on_a_tty_is_a_usage_error(
    root: typer.Typer, recorded: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli_audit, "_stdin_is_tty", lambda: True)
    result = runner.invoke(root, ["--db", str(recorded), "verify-proof"])
    assert result.exit_code == 2 and result.stdout == ""
    assert "FILE" in result.stderr
