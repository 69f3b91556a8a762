"""``flightlog demo``'s step 3 lists the sessions it imported in ``flightlog ls``'s order, newest first."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console
from typer.testing import CliRunner

from flightlog.cli import app
from flightlog.cli.demo import example_transcripts, list_step
from flightlog.importers import import_file
from flightlog.recorder import Recorder
from flightlog.store import SqliteStore


def test_the_demo_lists_its_sessions_newest_first_as_ls_does(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    with SqliteStore(db) as store:
        Recorder.create(store, session_id="users-own", task="not the demo's")  # left out of the step
        imported = [
            sid for path in example_transcripts() for sid in import_file(store, path, seal=True).session_ids
        ]
        oldest_first = [r.session_id for r in store.list_sessions() if r.session_id in imported]
        buffer = io.StringIO()
        list_step(store, imported, Console(file=buffer, width=200))
    lines = buffer.getvalue().splitlines()
    assert lines[1] == "3. list sessions (newest first, as `flightlog ls`)"
    listed = [line.split()[0] for line in lines[2:]]
    result = CliRunner().invoke(app, ["--db", str(db), "ls", "--json"])
    assert result.exit_code == 0, result.stderr
    ls_order = [row["session_id"] for row in json.loads(result.stdout) if row["session_id"] in imported]
    assert listed == ls_order and sorted(listed) == sorted(imported)
    assert listed != oldest_first  # what the step printed before: Store.list_sessions' order
    assert "users-own" not in buffer.getvalue()  # short: only what the demo imported
