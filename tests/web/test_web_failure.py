"""The dashboard says why a run failed, from its ledger (a rollback's reason, a kept turn's fatal tool
result: the runs read model's terminal detail): on the session page, in the runs tree and in ``/api/runs``;
a completed run's page adds nothing."""

# ruff: noqa: F811  (the fixtures imported from a sibling test module are parameters here)
from __future__ import annotations

import html
from pathlib import Path

from fastapi.testclient import TestClient
from tests.runs.test_runs_failure import fail_a_kept_turn

from flightlog.kernel import Agent, Kernel
from flightlog.kernel.scripted import ScriptedProvider, reply
from flightlog.providers.base import ProviderError
from flightlog.store import SqliteStore

from .test_web_http import client  # noqa: F401  (shared fixture)

ERROR = "Error code: 401 - invalid API key <sk-…>"
"""What the provider raised (markup in it must come out as text)."""
WHY = f"failed: provider_failure: {ERROR}"


def _run(db_path: Path, session_id: str, *script: ProviderError | object) -> None:
    with SqliteStore(db_path) as store:
        provider = ScriptedProvider(list(script), by_turn=False)  # type: ignore[arg-type]
        Kernel(store, Agent(name="f", route=[provider])).run_sync(
            "go", session_id=session_id, handle_signals=False
        )


def test_the_session_page_and_the_runs_tree_say_why_the_run_failed(client: TestClient, db_path: Path) -> None:
    _run(db_path, "bad-key", ProviderError(ERROR, retryable=False))
    page = client.get("/session", params={"id": "bad-key"})
    assert page.status_code == 200, page.text
    assert '<dd id="state">terminal · failed</dd>' in page.text
    assert f'<dd id="ended">{html.escape(WHY, quote=False)}</dd>' in page.text
    assert ERROR not in page.text  # escaped, never markup
    runs = client.get("/api/runs").json()
    node = next(n for n in runs["runs"] if n["id"] == "bad-key")
    assert (node["outcome"], node["detail"]) == ("failed", WHY)
    assert f'<span class="detail">{html.escape(WHY, quote=False)}</span>' in client.get("/").text


def test_a_completed_runs_page_shows_no_ended_with_line(client: TestClient, db_path: Path) -> None:
    _run(db_path, "fine", reply("done"))
    page = client.get("/session", params={"id": "fine"}).text
    assert '<dd id="state">terminal · completed</dd>' in page
    assert '<dd id="ended" hidden></dd>' in page


def test_a_run_failed_by_a_kept_fatal_turn_says_the_tool_error(client: TestClient, db_path: Path) -> None:
    """The turn charged, then a tool failed fatally: the kernel kept the turn (no ``rollbacked``), and the
    dashboard says why from its ``tool_completed`` result, as ``flightlog runs`` does."""
    why = "failed: fatal_tool_error: disk vanished"
    with SqliteStore(db_path) as store:
        sid = fail_a_kept_turn(store)
    page = client.get("/session", params={"id": sid})
    assert page.status_code == 200, page.text
    assert '<dd id="state">terminal · failed</dd>' in page.text
    assert f'<dd id="ended">{why}</dd>' in page.text
    node = next(n for n in client.get("/api/runs").json()["runs"] if n["id"] == sid)
    assert (node["outcome"], node["detail"]) == ("failed", why)
