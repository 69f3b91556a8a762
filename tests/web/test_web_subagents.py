"""The dashboard over a real sub-agent tree run through the kernel: a child's page links to its parent, a
parent's page lists its children (full ids, state, spent/granted tokens and steps from the runs read model),
and the runs tree shows spent/limit per run as ``flightlog runs --tree`` does. Hostile text stays inert."""

# ruff: noqa: F811  (the fixtures imported from a sibling test module are parameters here)
from __future__ import annotations

import re
from html import unescape
from pathlib import Path

import httpx
from fastapi.testclient import TestClient

from flightlog.kernel import Agent, Budgets, Kernel
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.kernel.subagents import subagent
from flightlog.live import list_run_views
from flightlog.store import SqliteStore
from flightlog.web.app import create_app
from flightlog.web.server import DashboardServer
from flightlog.web.views import session_href

from .conftest import IMG, SCRIPT, TOKEN, echo, opener
from .test_web_http import _sse, anonymous, client  # noqa: F401  (shared fixtures)

HOSTILE = f"{SCRIPT}{IMG}"


def _tree(db_path: Path) -> tuple[str, list[str]]:
    """Run a parent (2,000 tokens, 30 turns) that delegates two tasks in parallel to a child granted 300
    tokens and 5 turns, whose answer and task are hostile markup; return the parent and child ids."""
    child = Agent(
        "researcher",
        [ScriptedProvider([calls(call("echo", {"text": HOSTILE}, id="e")), reply(HOSTILE)], by_turn=True)],
        tools=[echo],
    )
    helper = subagent(child, role="explore", budgets=Budgets(tokens=300, turns=5))
    first = calls(
        call("researcher", {"task": f"A {HOSTILE}"}, id="a"),
        call("researcher", {"task": f"B {HOSTILE}"}, id="b"),
    )
    parent = Agent(
        "lead",
        [ScriptedProvider([first, reply("done")], by_turn=True)],
        tools=[echo, helper],
        budgets=Budgets(tokens=2000, turns=30),
    )
    with SqliteStore(db_path) as store:
        result = Kernel(store, parent, notary=None, heartbeat_s=None).run_sync("go", session_id="lead-1")
        assert result.status == "completed"
        kids = sorted(s.session_id for s in store.list_sessions() if s.parent_session_id == "lead-1")
    assert len(kids) == 2
    return "lead-1", kids


def _budgets(db_path: Path) -> dict[str, tuple[int | None, int | None, int | None, int | None]]:
    """Per run, what the runs read model holds: (tokens used, token budget, steps taken, max steps)."""
    with SqliteStore(db_path, read_only=True) as store:
        return {
            v.snapshot.run_id: (
                v.snapshot.budget.tokens_used,
                v.snapshot.budget.token_budget,
                v.snapshot.budget.steps_taken,
                v.snapshot.budget.max_steps,
            )
            for v in list_run_views(store)
        }


def _hrefs(html: str) -> set[str]:
    return {unescape(h) for h in re.findall(r'href="([^"]*)"', html)}


def test_a_parent_page_lists_its_children_with_spent_and_granted_budget(
    client: TestClient, db_path: Path
) -> None:
    lead, kids = _tree(db_path)
    budgets = _budgets(db_path)
    for kid in kids:  # the read model holds the grant as the child's limits, and real spend under it
        used, limit, steps, max_steps = budgets[kid]
        assert (limit, max_steps) == (300, 5) and used is not None and 0 < used <= 300 and steps == 2
    html = client.get("/session", params={"id": lead}).text
    section = html[html.index('id="subagents"') :]
    rows = re.findall(r'<tr class="child" data-child="([^"]+)">(.*?)</tr>', section, re.S)
    assert sorted(r[0] for r in rows) == kids  # full ids, every child, nothing else
    for kid, row in rows:
        used, _, steps, _ = budgets[kid]
        assert f'href="{session_href(kid).replace("&", "&amp;")}"' in row
        assert '<td class="state"><span class="badge state state-terminal">terminal</span></td>' in row
        assert '<td class="source"><span class="badge source source-direct">direct</span></td>' in row
        assert '<td class="outcome">completed</td>' in row
        assert f'<td class="tokens">{used}/300</td>' in row and f'<td class="steps">{steps}/5</td>' in row
    # the parent itself is a root: no parent link
    assert 'id="parent-link"' not in html
    for kid in kids:  # each child links back to its parent
        page = client.get("/session", params={"id": kid}).text
        assert f'<a id="parent-link" href="{session_href(lead)}">{lead}</a>' in page
        assert session_href(lead) in _hrefs(page)
        assert 'id="subagents" hidden' in page  # a leaf lists no children
        assert SCRIPT not in page and IMG not in page and "&lt;script&gt;" in page


def test_a_session_without_children_hides_the_list_and_unknown_spend_shows_a_dash(db_path: Path) -> None:
    from flightlog.runs import BudgetSummary
    from flightlog.web.budget import budget_cells, budget_label

    assert budget_cells(BudgetSummary()) == {
        "tokens": "-",
        "token_limit": "-",
        "steps": "-",
        "step_limit": "-",
        "tokens_of": "- (no limit)",
        "steps_of": "- (no limit)",
    }
    assert budget_cells(BudgetSummary(tokens_used=1245, steps_taken=2))["tokens_of"] == "1245 (no limit)"
    assert budget_label(BudgetSummary()) == "tokens - (no limit)  steps - (no limit)"
    assert (
        budget_label(BudgetSummary(tokens_used=45, token_budget=300, steps_taken=3))
        == "tokens 45/300  steps 3 (no limit)"
    )


def test_a_run_without_limits_reads_no_limit_in_one_word_per_thing(client: TestClient, db_path: Path) -> None:
    """The page said ``source kernel`` beside a ``direct`` badge, ``turns 2/-`` where ``runs`` says steps,
    and never explained ``-``: the ledger's writer is "recorded by", the badge the run source, a run with
    no limit reads "(no limit)"."""
    script = ScriptedProvider([calls(call("echo", {"text": "x"}, id="e")), reply("ok")], by_turn=True)
    agent = Agent("solo", [script], tools=[echo])
    with SqliteStore(db_path) as store:
        result = Kernel(store, agent, notary=None, heartbeat_s=None).run_sync("go", session_id="solo-1")
    assert result.status == "completed"
    (used, limit, steps, max_steps) = _budgets(db_path)["solo-1"]
    assert (limit, max_steps) == (None, None) and used is not None and steps == 2
    html = client.get("/session", params={"id": "solo-1"}).text
    assert re.search(r'>recorded by</dt><dd id="recorded-by">kernel</dd>', html)
    lineage = html[html.index('id="lineage"') : html.index('id="subagents"')]
    assert "source-direct" in lineage and 'title="run source (seed 002 RunSource)"' in lineage
    assert f"tokens {used} (no limit), steps 2 (no limit)</span>" in lineage
    assert "turns" not in lineage and "/-" not in lineage
    # the tree badge and `runs --tree` mark it too, as the tables do (they printed "tokens N  steps 2")
    from typer.testing import CliRunner

    from flightlog.cli import app

    (node,) = client.get("/api/runs").json()["runs"]
    assert node["budget"] == f"tokens {used} (no limit)  steps 2 (no limit)"
    tree = CliRunner().invoke(app, ["--db", str(db_path), "runs", "--tree"])
    assert tree.exit_code == 0, tree.output
    assert f"solo-1  terminal (completed)  tokens {used} (no limit)  steps 2 (no limit)" in tree.stdout


def test_the_runs_tree_shows_spent_over_limit_per_run_as_runs_tree(client: TestClient, db_path: Path) -> None:
    lead, kids = _tree(db_path)
    budgets = _budgets(db_path)
    data = client.get("/api/runs").json()
    (root,) = data["runs"]
    used, limit, steps, max_steps = budgets[lead]
    assert (root["id"], limit, max_steps) == (lead, 2000, 30)
    assert root["budget"] == f"tokens {used}/2000  steps {steps}/30"
    assert sorted(c["id"] for c in root["children"]) == kids
    for node in root["children"]:
        used, _, steps, _ = budgets[node["id"]]
        assert node["budget"] == f"tokens {used}/300  steps {steps}/5"
    # the very numbers `flightlog runs --tree` prints for each run
    from typer.testing import CliRunner

    from flightlog.cli import app

    tree = CliRunner().invoke(app, ["--db", str(db_path), "runs", "--tree"])
    assert tree.exit_code == 0, tree.output
    for line in tree.stdout.splitlines():
        run_id = line.split("── ")[-1].split()[0]
        # (a parent's line adds its tree's total after its own tokens: "(with sub-agents 90/2000)")
        printed = re.search(r"tokens (\S+)(?: \(with sub-agents [^)]*\))?  steps (\S+)", line)
        assert printed is not None
        assert f"tokens {printed[1]}  steps {printed[2]}" == _label(data["runs"], run_id)
    html = client.get("/").text
    for run_id in (lead, *kids):
        u, lim, s, ms = budgets[run_id]
        label = re.escape(f">tokens {u}/{lim}  steps {s}/{ms}</span>")
        assert re.search(r'<span class="muted budget"[^>]*' + label, html)
    assert SCRIPT not in html and IMG not in html


def _label(nodes: list[dict[str, object]], run_id: str) -> str:
    for node in nodes:
        if node["id"] == run_id:
            return str(node["budget"])
        found = _label(node["children"], run_id)  # type: ignore[arg-type]
        if found:
            return found
    return ""


def test_the_session_status_stream_carries_the_children(db_path: Path) -> None:
    """A real server (TestClient buffers whole bodies): the parent's status message lists its children."""
    lead, kids = _tree(db_path)
    budgets = _budgets(db_path)
    app = create_app(opener(db_path), token=TOKEN, poll_s=0.05)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with (
        DashboardServer(app) as server,
        httpx.Client(base_url=server.url, headers=headers, timeout=60) as http,
        http.stream("GET", "/api/stream/session", params={"id": lead}) as stream,
    ):
        status = _sse(stream.iter_lines(), "status")
    rows = {c["id"]: c for c in status["children"]}  # type: ignore[attr-defined]
    assert sorted(rows) == kids
    for kid in kids:
        used, _, steps, _ = budgets[kid]
        cells = {"tokens": str(used), "token_limit": "300", "steps": str(steps), "step_limit": "5"}
        cells.update(tokens_of=f"{used}/300", steps_of=f"{steps}/5")
        assert rows[kid]["budget"] == cells and rows[kid]["href"] == session_href(kid)
        assert (rows[kid]["state"], rows[kid]["outcome"]) == ("terminal", "completed")


def test_the_children_list_keeps_the_token_gate(anonymous: TestClient, db_path: Path) -> None:
    lead, _ = _tree(db_path)
    assert anonymous.get("/session", params={"id": lead}).status_code == 401
    assert anonymous.get("/api/runs").status_code == 401
