"""``prove``, ``verify-proof``, ``audit`` and ``keys`` through a root command like ``flightlog``'s.

The root is built here (``flightlog.cli.root``'s ``--db`` callback and error handler, plus
``app.add_typer(audit_app)``), so these tests do not depend on where the lead mounts the commands.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from flightlog.cli import options
from flightlog.cli import root as cli_root
from flightlog.cli.audit import audit_app
from flightlog.integrity.notary import Notary
from flightlog.recorder import Recorder
from flightlog.store import SqliteStore

from .conftest import SID, step, tamper

runner = CliRunner()


@pytest.fixture
def root() -> typer.Typer:
    app = typer.Typer(cls=options.Group, no_args_is_help=True, add_completion=False)
    app.callback()(cli_root.main_options)
    app.add_typer(audit_app)
    return app


@pytest.fixture
def recorded(db_path: Path, store: SqliteStore) -> Path:
    notary = Notary.from_env(every=4)  # the user's key, in $FLIGHTLOG_KEY_DIR
    rec = Recorder.create(store, session_id=SID, notary=notary)
    for i in range(10):
        rec.append(step(i))  # checkpoints at 4 and 8; seqs 8..9 unanchored
    store.close()
    return db_path


def _run(root: typer.Typer, db: Path, *args: str, input: str | None = None) -> tuple[int, str, str]:
    result = runner.invoke(root, ["--db", str(db), *args], input=input)
    return result.exit_code, result.stdout, result.stderr


def test_commands_mount_at_the_top_level(root: typer.Typer) -> None:
    result = runner.invoke(root, ["--help"])
    for name in ("prove", "verify-proof", "audit", "keys"):
        assert name in result.stdout
    for args in (
        ["prove", "--help"],
        ["verify-proof", "--help"],
        ["audit", "--help"],
        ["keys", "rotate", "--help"],
    ):
        assert runner.invoke(root, args).exit_code == 0, args


def test_prove_and_verify_an_inclusion_proof(root: typer.Typer, recorded: Path, tmp_path: Path) -> None:
    code, out, _ = _run(root, recorded, "prove", SID[:5], "--seq", "3")
    assert code == 0
    doc = json.loads(out)
    assert (doc["type"], doc["seq"], doc["tree_size"]) == ("inclusion", 3, 8)
    assert doc["checkpoint"].startswith("flightlog.local/")
    proof_file = tmp_path / "proof.json"
    proof_file.write_text(out)
    assert _run(root, recorded, "verify-proof", str(proof_file))[:2] == (0, "ok: proof holds\n")
    assert _run(root, recorded, "verify-proof", input=out)[0] == 0  # stdin
    doc["seq"] = 4
    code, out, _ = _run(root, recorded, "verify-proof", "--json", input=json.dumps(doc))
    assert code == 1 and json.loads(out)["ok"] is False


def test_prove_consistency(root: typer.Typer, recorded: Path) -> None:
    code, out, _ = _run(root, recorded, "prove", SID, "--from", "4", "--to", "10")
    assert code == 0
    doc = json.loads(out)
    assert (doc["type"], doc["old_size"], doc["new_size"], doc["new_checkpoint"]) == (
        "consistency",
        4,
        10,
        None,
    )
    assert doc["old_checkpoint"] is not None
    code, text, _ = _run(root, recorded, "verify-proof", input=out)  # the new head (10) is unsigned
    assert code == 1 and "tree head at size 10 is unsigned" in text
    code, text, _ = _run(root, recorded, "verify-proof", "--unsigned-root-ok", input=out)
    assert code == 0 and "root is NOT authenticated" in text
    code, out, _ = _run(root, recorded, "prove", SID, "--from", "4", "--to", "8")
    assert json.loads(out)["new_checkpoint"] is not None
    assert _run(root, recorded, "verify-proof", input=out)[:2] == (0, "ok: proof holds\n")


@pytest.mark.parametrize(
    "args",
    [
        ["prove", SID],
        ["prove", SID, "--seq", "1", "--from", "2"],
        ["prove", SID, "--seq", "99"],
        ["prove", SID, "--from", "0"],
        ["prove", "nope", "--seq", "1"],
        ["verify-proof", "/no/such/file.json"],
        ["audit"],
    ],
)
def test_usage_mistakes_exit_2(root: typer.Typer, recorded: Path, args: list[str]) -> None:
    code, out, _ = _run(root, recorded, *args)
    assert code == 2 and out == ""


def test_verify_proof_rejects_garbage(root: typer.Typer, recorded: Path) -> None:
    assert _run(root, recorded, "verify-proof", input="{not json")[0] == 2


def test_audit_reports_open_and_sealed(root: typer.Typer, recorded: Path) -> None:
    code, out, _ = _run(root, recorded, "audit", SID)
    assert code == 0
    assert out.startswith(f"ok        {SID}  10 events")
    assert "open; 2 signed checkpoint(s), anchored through 8 event(s); unanchored tail: seqs 8..9" in out
    with SqliteStore(recorded) as store:
        Recorder.attach(store, SID, notary=Notary.from_env()).finish("completed")
    code, out, _ = _run(root, recorded, "audit", "--all", "--json")
    assert code == 0
    *sessions, index = json.loads(out)  # --all ends with the index log's row
    assert (index["state"], index["ok"], index["leaves"]) == ("index", True, 3)
    (doc,) = sessions
    assert (doc["state"], doc["seal_status"], doc["unanchored"], doc["retained"]) == (
        "sealed",
        "completed",
        None,
        11,
    )


def test_audit_exits_1_naming_the_divergence(root: typer.Typer, recorded: Path) -> None:
    tamper(recorded, "DELETE FROM checkpoints WHERE size > 4")
    code, out, _ = _run(root, recorded, "audit", SID)
    assert code == 1
    assert "DIVERGES" in out and "seq 4: stale_head" in out


def test_keys_show_rotate_and_trust(root: typer.Typer, recorded: Path) -> None:
    code, out, _ = _run(root, recorded, "keys", "show", "--json")
    assert code == 0
    first = json.loads(out)
    assert len(first["trusted"]) == 1 and first["signing"] == first["trusted"][0]["vkey"]
    code, out, _ = _run(root, recorded, "keys", "rotate")
    assert code == 0 and out.startswith("new signing key: flightlog.local/log+")
    shown = json.loads(_run(root, recorded, "keys", "show", "--json")[1])
    assert len(shown["trusted"]) == 2 and shown["signing"] == shown["trusted"][1]["vkey"]
    assert _run(root, recorded, "audit", SID)[0] == 0  # old checkpoints still verify with the old key
    code, out, _ = _run(
        root, recorded, "keys", "trust", "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
    )
    assert code == 0 and "PeterNeumann" in out
    code, _, err = _run(root, recorded, "keys", "trust", "garbage")
    assert code == 1 and err.startswith("flightlog: error: log key")
    assert "trusted" in _run(root, recorded, "keys", "show")[1]


def test_audit_all_lists_sessions_deleted_wholesale(root: typer.Typer, recorded: Path) -> None:
    tamper(
        recorded,
        f"DELETE FROM events WHERE session_id = '{SID}'",
        f"DELETE FROM sessions WHERE session_id = '{SID}'",
    )
    code, out, _ = _run(root, recorded, "audit", "--all")
    assert code == 1 and out.startswith(f"MISSING   {SID}  a head is retained")
    code, out, _ = _run(root, recorded, "audit", "--all", "--json")
    missing, index = json.loads(out)
    assert code == 1 and missing == {
        "session_id": SID,
        "ok": False,
        "state": "missing",
        "retained_file": missing["retained_file"],
        "index_leaf": 1,  # the index log knows it too: its checkpoint at size 8 is leaf 1
    }
    assert index["state"] == "index" and index["missing"] == [{"session_id": SID, "leaf": 1, "size": 8}]
