"""A memory hit's relevance is shown as a meaningful figure: its rank and the score to 3 significant
digits (BM25 over a few records gives ~1.7e-06, which ``memory search`` showed as ``0.000`` and the
dashboard rounded to ``0.0``), in the CLI and on the dashboard."""

from __future__ import annotations

import json
from pathlib import Path

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from flightlog import events as ev
from flightlog.cli import app
from flightlog.cli.demo_memory import FACT, SCOPE
from flightlog.kernel.memory_bank import recall, remember
from flightlog.store import SqliteStore
from flightlog.web.app import create_app
from flightlog.web.security import Auth

from .conftest import TOKEN, opener

runner = CliRunner()


def test_memory_search_shows_the_rank_and_the_score_in_significant_digits(db_path: Path) -> None:
    with SqliteStore(db_path) as store:
        remember(store, scope=SCOPE, kind=ev.MemoryKind.PROJECT, name="deploy-day", content=FACT)
        (hit,) = recall(store, SCOPE, "deploys", mark=False)
    assert 0 < hit.score < 0.0005  # one record: BM25's IDF is tiny, as in `flightlog demo`
    shown = f"{hit.score:.3g}"
    result = runner.invoke(app, ["--db", str(db_path), "memory", "search", "deploys"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"#1  relevance {shown}  mem-"), result.stdout
    assert "0.000 " not in result.stdout
    wire = json.loads(
        runner.invoke(app, ["--db", str(db_path), "memory", "search", "deploys", "--json"]).stdout
    )
    assert wire[0]["score"] == hit.score
    with TestClient(create_app(opener(db_path), token=TOKEN), base_url="http://127.0.0.1:8000") as client:
        client.cookies.set("flightlog_ui_8000", Auth(TOKEN).cookie_value)
        (row,) = client.get("/api/memory", params={"q": "deploys"}).json()
        page = client.get("/memory", params={"q": "deploys"}).text
    assert (row["rank"], row["score"], row["score_text"]) == (1, hit.score, shown)
    assert f"#1 · {shown}" in page
