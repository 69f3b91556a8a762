"""A task an import cut to ``importers.base.TASK_CHARS`` characters is shown as cut at import: never with
a count of "more characters" that counts only the rest of the 200-character stub (before: "… [40 more
characters]" on the runs tree for a prompt of thousands)."""

from __future__ import annotations

import html
from pathlib import Path

from fastapi.testclient import TestClient
from tests.web.conftest import opener
from tests.web.test_web_http import AUTH, BASE, TOKEN

from flightlog.importers import import_file
from flightlog.importers.base import TASK_CHARS
from flightlog.store import SqliteStore
from flightlog.web.app import create_app
from flightlog.web.views import task_text

SAMPLE = Path(__file__).parents[1] / "data" / "samples" / "claude-code" / "spotter_subagent_parent.jsonl"
SESSION = "claude-code:491e126e-1e71-469c-ade2-fcc8af567c74"
CUT = f"… [cut at import to {TASK_CHARS} characters]"


def test_the_runs_tree_and_the_session_page_say_the_task_was_cut_at_import(tmp_path: Path) -> None:
    db = tmp_path / "cut.db"
    with SqliteStore(db) as store:
        import_file(store, SAMPLE)
        task = store.get_session(SESSION).task
    assert len(task) == TASK_CHARS  # the prompt is longer: the import kept its first 200 characters
    with TestClient(create_app(opener(db), token=TOKEN), base_url=BASE) as client:
        client.cookies.set("flightlog_ui_8000", AUTH.cookie_value)
        tree = html.unescape(client.get("/").text)
        page = html.unescape(client.get("/session", params={"id": SESSION}).text)
    assert task[:160] + "… [40 more characters]" not in tree  # what the tree said before
    assert task[:160] + CUT in tree
    assert task + CUT in page


def test_only_an_imports_task_of_the_cut_length_is_said_cut_at_import() -> None:
    long = "x" * 300
    assert task_text(long, "kernel", 160) == "x" * 160 + "… [140 more characters]"  # the true count
    assert task_text("x" * 199, "import:codex", 600) == "x" * 199
    assert task_text("x" * 200, "import:codex", 600) == "x" * 200 + CUT
