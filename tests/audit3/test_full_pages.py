"""A limited runs listing (``flightlog runs --limit N``, the dashboard's run tree on ``/`` and a ``/runs``
page) lists N runs when the store holds N it can list, though the check after the SQL ``LIMIT`` leaves
some of the first N out: runs the ``sessions`` row ended (edited to ``completed``) while their ledger
waits, the newest of which got a row appended that does not decode (whether they wait cannot be decided:
named, not listed). The listing fetches past them. Before, ``runs --limit 3`` listed 1 run here (3 minus
the 2 left out) and a ``/runs`` page of 3 listed 1, while older runs were there to list. On SQLite and
PostgreSQL."""

from __future__ import annotations

import json
import time

import pytest

from flightlog.events import RunStarted
from flightlog.store import open_store
from flightlog.store.rows import now_ms
from flightlog.web import runs_list, views

from .helpers import cli, execute
from .test_held_undecodable import _append_broken
from .test_row_surfaces import dashboard
from .test_undecodable import BROKEN
from .test_wait_pass import record, suspend

IDS = [f"s{i}" for i in range(6)]
BAD = IDS[-2:]
"""The newest two: the first a newest-first listing meets."""
GOOD = [sid for sid in IDS if sid not in BAD]
"""The runs listable."""


def _store(url: str) -> None:
    """Record ``IDS`` in order, each in a later millisecond than the one before: the listing is newest
    first by ``updated_at_ms`` with ties in ``run_id`` order, so runs recorded in one millisecond would put
    ``s3`` before ``s4`` and a limited listing could list ``s3`` without meeting ``s4`` (it names only the
    runs it meets)."""
    with open_store(url) as store:
        for sid in IDS:
            record(store, sid, RunStarted(run_id=sid, goal="g"), suspend())
            _next_millisecond(store.get_session(sid).updated_at_ms)
        heads = {sid: store.get_session(sid).head_seq for sid in BAD}
    execute(url, "UPDATE sessions SET status = 'completed'")
    for sid in BAD:
        _append_broken(url, sid, heads[sid] + 1, BROKEN)


def _next_millisecond(after_ms: int) -> None:
    """Return once the wall clock (the recorder's, :func:`flightlog.store.rows.now_ms`) is past ``after_ms``:
    waits for the clock to move on, not for a duration."""
    while now_ms() <= after_ms:
        time.sleep(0.0005)


def _warned(err: str) -> set[str]:
    return {sid for sid in BAD if f"{sid}: not listed: undecodable event at seq " in err}


@pytest.mark.parametrize("state", [None, "waiting_input"])
def test_runs_limit_lists_n_runs_past_those_left_out(url: str, state: str | None) -> None:
    _store(url)
    filters = () if state is None else ("--state", state)
    code, out, err = cli(url, "runs", "--json", *filters)
    whole = [
        run["run_id"] for run in json.loads(out)
    ]  # newest first (ties in the same ms: the store's order)
    assert sorted(whole) == sorted(GOOD), out
    for limit in (1, 3, 4, 5):
        code, out, err = cli(url, "runs", "--json", "--limit", str(limit), *filters)
        assert code == 1, (out, err)
        assert [run["run_id"] for run in json.loads(out)] == whole[:limit], (limit, out)
        assert _warned(err) == set(BAD), err
    code, out, err = cli(url, "runs", "--limit", "3", *filters)
    assert code == 1 and [line.split()[0] for line in out.splitlines()[1:]] == whole[:3], out


def test_the_dashboard_tree_lists_its_limit_past_runs_left_out(url: str) -> None:
    _store(url)
    with open_store(url, read_only=True) as store:
        for state in (None, "waiting_input"):
            whole = [node["id"] for node in views.run_tree(store, state=state)]
            assert sorted(whole) == sorted(GOOD), whole
            unreadable: dict[str, str] = {}
            nodes = views.run_tree(store, state=state, limit=3, unreadable=unreadable)
            assert [node["id"] for node in nodes] == whole[:3], (state, nodes)
            assert set(unreadable) == set(BAD), unreadable


@pytest.mark.parametrize("state", ["", "waiting_input"])
def test_a_runs_page_is_filled_past_runs_left_out(
    url: str, monkeypatch: pytest.MonkeyPatch, state: str
) -> None:
    _store(url)
    monkeypatch.setattr(runs_list, "PAGE_SIZE", 3)
    seen: list[str] = []
    query = f"?state={state}" if state else ""
    with dashboard(url) as client:
        for _ in range(len(IDS)):
            data = client.get("/api/runs/page" + query).json()
            ids = [run["run_id"] for run in data["runs"]]
            assert len(ids) == min(3, len(GOOD) - len(seen)), (seen, data)
            seen += ids
            if data["next"] is None:
                break
            query = "?" + "&".join(f"{k}={v}" for k, v in (("state", state), ("cursor", data["next"])) if v)
    assert sorted(seen) == sorted(GOOD)
