"""Tamper helpers for the issue-10 attack tests: the attacker can write the database file (and delete files
outside it), never read the log key."""

from __future__ import annotations

import json
import os
import sqlite3
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from click.testing import Result
from typer.testing import CliRunner

from flightlog.cli import app
from flightlog.encoding import canonical_json
from flightlog.integrity.keys import LogSigner
from flightlog.integrity.notes import parse_note, sign_note
from flightlog.ledger import GENESIS, CompactRange, chain_hash, leaf_hash

SPEC = "kernel.cli_agents:approval_agent"
"""The CLI tests' agent (``tests/kernel/cli_agents.py``): asks before writing note ``n1``."""

_runner = CliRunner()

Edit = Callable[[int, bytes], bytes]


def invoke(db: Path | str, *args: str) -> Result:
    """``flightlog --db DB ARGS...`` (a file path or a store URL) in this process: click's ``Result``."""
    return _runner.invoke(app, ["--db", str(db), *args])


def cli(db: Path | str, *args: str) -> tuple[int, str, str]:
    """``flightlog --db DB ARGS...`` (a file path or a store URL): exit code, stdout, stderr."""
    result = invoke(db, *args)
    return result.exit_code, result.stdout, result.stderr


def described(result: Result) -> str:
    """An assertion message for a command that exited otherwise than expected: its exit code, stdout,
    stderr and, when it raised (click's runner exits 1 then with an EMPTY stderr), the traceback."""
    said = f"exit code {result.exit_code}\n--- stdout ---\n{result.stdout}\n--- stderr ---\n{result.stderr}"
    if result.exc_info is not None and not isinstance(result.exception, SystemExit):
        said += "\n--- raised ---\n" + "".join(traceback.format_exception(*result.exc_info))
    return said


def refused(db: Path, *args: str, reason: str) -> str:
    """Run a command that must refuse the session: exit 1 and a stderr error naming ``reason``.

    A ledger that fails its own checks is refused in one line (``ledger of session ... diverges``); one the
    retained heads outrun is refused in one block (``refusing to act on session ...``, then ``found:``,
    ``next:`` and ``why:`` lines wrapped at 100 columns). Returns the error as one line (the block's lines
    unwrapped and joined by spaces), so ``reason`` may span a wrap.
    """
    code, out, err = cli(db, *args)
    assert code == 1, (code, out, err)
    lines = err.strip().splitlines()
    assert lines[0].startswith(
        ("flightlog: error: ledger of session ", "flightlog: error: refusing to act on session ")
    ), lines[0]
    if lines[0].startswith("flightlog: error: ledger of session "):
        assert len(lines) == 1, err
    else:
        assert all(len(line) <= 100 for line in lines), err
    said = " ".join(line.strip() for line in lines)
    assert reason in said, said
    return said


def suspended_run(db: Path | str) -> str:
    """``flightlog run`` the approval agent until it waits for a decision on ``n1``; its session id."""
    result = invoke(db, "run", SPEC, "--goal", "take a note", "--json", "--quiet")
    assert result.exit_code == 3, described(result)
    return str(json.loads(result.stdout)["session_id"])


def backup(source: Path, target: Path) -> None:
    """``sqlite3 SOURCE ".backup TARGET"``: a copy with the same ledger id."""
    src, dst = sqlite3.connect(source), sqlite3.connect(target)
    src.backup(dst)
    src.close()
    dst.close()


def head_files() -> dict[str, bytes]:
    """Every retained head file and head history (relative path -> bytes)."""
    root = Path(os.environ["FLIGHTLOG_HEAD_DIR"])
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.json*"))}


def _raw(db: Path) -> sqlite3.Connection:
    raw = sqlite3.connect(db)
    for trigger in (
        "events_no_update",
        "events_no_delete",
        "index_leaves_no_update",
        "index_leaves_no_delete",
    ):
        raw.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    return raw


def execute(db: Path | str, *statements: str) -> None:
    """Edit the database behind flightlog's back (:func:`connect`: append-only triggers off first)."""
    raw = connect(db)
    try:
        for statement in statements:
            raw.execute(statement)
        raw.commit()
    finally:
        raw.close()


def connect(db: Path | str) -> Any:
    """A raw DB-API connection to the store behind flightlog's back: the SQLite file with its append-only
    triggers dropped, or the PostgreSQL schema of a store URL (``...?schema=NAME``) with the ``events``
    triggers disabled (an attacker who owns the database can). Commit and close it."""
    if "://" not in str(db):
        return _raw(Path(db))
    import psycopg

    base, _, schema = str(db).partition("?schema=")
    conn = psycopg.connect(base, options=f"-c search_path={schema}")
    conn.execute("ALTER TABLE events DISABLE TRIGGER USER")
    conn.execute("ALTER TABLE index_leaves DISABLE TRIGGER USER")
    return conn


def rechain(
    db: Path | str,
    session_id: str,
    edit: Edit,
    *,
    keep: int | None = None,
    drop_checkpoints: bool = True,
) -> None:
    """Rewrite a session's rows through ``edit(seq, bytes)`` (keeping the first ``keep`` when given),
    recompute every chain hash and the tree head, delete its checkpoints (the attacker cannot sign new
    ones; ``drop_checkpoints=False`` leaves the old ones, which then contradict the rows) and rewrite the
    session row: a perfect ledger to a chain-only check. ``db``: a SQLite file or a PostgreSQL store URL."""
    raw = connect(db)
    mark = "%s" if "://" in str(db) else "?"

    def run(sql: str, params: tuple[Any, ...]) -> Any:
        return raw.execute(sql.replace("?", mark), params)

    try:
        rows = run(
            "SELECT seq, kind, event, recorded_at_ms FROM events WHERE session_id = ? ORDER BY seq",
            (session_id,),
        ).fetchall()[:keep]
        run("DELETE FROM events WHERE session_id = ?", (session_id,))
        if drop_checkpoints:
            run(
                "DELETE FROM checkpoint_frontiers WHERE checkpoint_id IN "
                "(SELECT checkpoint_id FROM checkpoints WHERE session_id = ?)",
                (session_id,),
            )
            run("DELETE FROM checkpoints WHERE session_id = ?", (session_id,))
        prev, tree = GENESIS, CompactRange()
        for seq, kind, data, at in rows:
            data = edit(seq, bytes(data))
            digest = chain_hash(prev, seq, data)
            run(
                "INSERT INTO events (session_id, seq, kind, event, prev_hash, hash, recorded_at_ms) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (session_id, seq, kind, data, prev, digest, at),
            )
            tree.append(leaf_hash(data))
            prev = digest
        run(
            "UPDATE sessions SET head_seq = ?, head_hash = ?, merkle_root = ? WHERE session_id = ?",
            (len(rows) - 1, prev, tree.root().hex(), session_id),
        )
        raw.commit()
    finally:
        raw.close()


def unchanged(seq: int, data: bytes) -> bytes:
    """An ``Edit`` that keeps the row."""
    return data


def swap_spec(spec: str) -> Edit:
    """An ``Edit`` replacing the recorded ``agent_spec`` with ``spec``."""

    def edit(seq: int, data: bytes) -> bytes:
        if b'"custom_kind":"agent_spec"' not in data:
            return data
        return canonical_json({"kind": "custom", "custom_kind": "agent_spec", "payload": {"spec": spec}})

    return edit


def swap_goal(goal: str) -> Edit:
    """An ``Edit`` rewriting the goal in ``run_started``."""

    def edit(seq: int, data: bytes) -> bytes:
        if b'"kind":"run_started"' not in data:
            return data
        event = json.loads(data)
        event["goal"] = goal
        return canonical_json(event)

    return edit


def resign_checkpoints(db: Path, session_id: str, forger: LogSigner) -> None:
    """Replace the signature of every stored checkpoint of the session with ``forger``'s (rows untouched)."""
    raw = sqlite3.connect(db)
    try:
        for checkpoint_id, body in raw.execute(
            "SELECT checkpoint_id, body FROM checkpoints WHERE session_id = ?", (session_id,)
        ).fetchall():
            forged = sign_note(parse_note(body).text, forger)
            raw.execute("UPDATE checkpoints SET body = ? WHERE checkpoint_id = ?", (forged, checkpoint_id))
        raw.commit()
    finally:
        raw.close()
