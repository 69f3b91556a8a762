"""One exit-code matrix over every command that takes a session (issue 10, item 10; STYLE.md (f)):

- an unknown session: 2 (a usage mistake), one ``flightlog: error:`` line;
- an ambiguous prefix: 2, the line names the matches;
- a tampered session (one stored event edited): 1 (it ran and found a problem), the seq named;
- an intact session: what the command does on success (0; ``resume`` of a run still waiting: 3).

Every case runs on its own copy of one prepared user (database, log key, retained heads), so a command
that writes (approve, resume, ...) never changes what another case sees.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flightlog.cli import app
from flightlog.integrity.witness import Witness, WitnessServer

runner = CliRunner()
AGENT = "kernel.cli_agents:approval_agent"  # tests/ is on sys.path (rootdir conftest)

# command -> argv after the session (SID is replaced by the session argument)
COMMANDS: dict[str, list[str]] = {
    "show": ["show", "SID"],
    "replay": ["replay", "SID"],
    "verify": ["verify", "SID", "--offline"],
    "audit": ["audit", "SID", "--offline"],
    "export": ["export", "SID"],
    "export -o": ["export", "SID", "-o", "OUT"],
    "export --bundle": ["export", "SID", "--bundle", "BUNDLE"],
    "tail": ["tail", "SID"],
    "prove": ["prove", "SID", "--seq", "0"],
    "resume": ["resume", "SID", "-q"],
    "approve": ["approve", "SID", "n1"],
    "deny": ["deny", "SID", "n1"],
    "abort": ["abort", "SID"],
    "witness submit": ["witness", "submit", "SID", "--url", "URL", "--witness-key", "WKEY"],
}

OK_CODE = {"resume": 3}  # the run asks again for the approval nobody gave: still waiting


def _env(home: Path) -> dict[str, str]:
    return {
        "FLIGHTLOG_KEY_DIR": str(home / "keys"),
        "FLIGHTLOG_HEAD_DIR": str(home / "heads"),
        "FLIGHTLOG_DB": str(home / "ledger.db"),
    }


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A user whose database holds a signed run waiting for approval of call n1, and two more sessions
    sharing the prefix ``twin-`` (ambiguous)."""
    home = tmp_path_factory.mktemp("matrix-user")
    with pytest.MonkeyPatch.context() as patch:
        for name, value in _env(home).items():
            patch.setenv(name, value)
        done = runner.invoke(app, ["run", AGENT, "--goal", "take a note", "--json", "-q"])
        assert done.exit_code == 3, done.stderr
        sid = str(json.loads(done.stdout)["session_id"])
        for twin in ("twin-a", "twin-b"):
            made = runner.invoke(app, ["run", AGENT, "--goal", "g", "--session", twin, "-q"])
            assert made.exit_code == 3, made.stderr
    return home, sid


@pytest.fixture
def user(prepared: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    """A private copy of the prepared user, in the environment."""
    source, sid = prepared
    home = tmp_path / "user"
    shutil.copytree(source, home)
    for name, value in _env(home).items():
        monkeypatch.setenv(name, value)
    return home, sid


@pytest.fixture(scope="module")
def witness_url(prepared: tuple[Path, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real witness trusting the prepared user's log key, for ``witness submit``: "URL VKEY"."""
    home, _ = prepared
    with pytest.MonkeyPatch.context() as patch:
        for name, value in _env(home).items():
            patch.setenv(name, value)
        shown = runner.invoke(app, ["keys", "show", "--json"])
    log_key = json.loads(shown.stdout)["signing"]
    witness = Witness.open(tmp_path_factory.mktemp("witness"), log_keys=[log_key])
    with WitnessServer(witness) as server:
        yield f"{server.url} {witness.cosigner.verifier}"


def _tamper(db: Path, sid: str) -> int:
    """Edit the stored bytes of the run_started event (same length, still JSON): a hash_mismatch there.
    Returns its seq."""
    raw = sqlite3.connect(db)
    raw.execute("DROP TRIGGER IF EXISTS events_no_update")
    [(seq, event)] = raw.execute(
        "SELECT seq, event FROM events WHERE session_id = ? AND kind = 'run_started'", (sid,)
    ).fetchall()
    text = bytes(event).decode("utf-8")
    edited = text.replace("take a note", "take a NOTE")
    assert edited != text and len(edited) == len(text)
    raw.execute("UPDATE events SET event = ? WHERE session_id = ? AND seq = ?", (edited.encode(), sid, seq))
    raw.commit()
    raw.close()
    return int(seq)


def _run(command: str, session: str, home: Path, witness: str) -> tuple[int, str, str]:
    url, key = witness.split(" ")
    names = {
        "SID": session,
        "OUT": str(home / "out.jsonl"),
        "BUNDLE": str(home / "bundle"),
        "URL": url,
        "WKEY": key,
    }
    args = [names.get(a, a) for a in COMMANDS[command]]
    result = runner.invoke(app, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("command", COMMANDS)
def test_unknown_session_exits_2(command: str, user: tuple[Path, str], witness_url: str) -> None:
    home, _ = user
    code, _, err = _run(command, "no-such-session", home, witness_url)
    assert code == 2, err
    assert err.strip().splitlines() == ["flightlog: error: no session matches 'no-such-session'"]


@pytest.mark.parametrize("command", COMMANDS)
def test_ambiguous_prefix_exits_2(command: str, user: tuple[Path, str], witness_url: str) -> None:
    home, _ = user
    code, _, err = _run(command, "twin-", home, witness_url)
    assert code == 2, err
    [line] = err.strip().splitlines()
    assert line.startswith("flightlog: error: session prefix 'twin-' is ambiguous: matches twin-a, twin-b")


@pytest.mark.parametrize("command", COMMANDS)
def test_tampered_session_exits_1_naming_the_seq(
    command: str, user: tuple[Path, str], witness_url: str
) -> None:
    home, sid = user
    seq = _tamper(home / "ledger.db", sid)
    code, out, err = _run(command, sid, home, witness_url)
    assert code == 1, (out, err)
    if command == "prove":  # it rebuilds the signed tree head, which the edited rows no longer match
        assert "checkpoint_mismatch" in err, err
    else:
        assert f"seq {seq}" in out + err or f"sequence {seq}" in out + err, (out, err)


@pytest.mark.parametrize("command", COMMANDS)
def test_intact_session_succeeds(command: str, user: tuple[Path, str], witness_url: str) -> None:
    home, sid = user
    code, out, err = _run(command, sid[:10], home, witness_url)  # a unique prefix resolves
    assert code == OK_CODE.get(command, 0), (out, err)
    assert "error" not in err and "warning" not in err, err
