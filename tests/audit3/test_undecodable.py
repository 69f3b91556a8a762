"""One session whose stored bytes do not decode (a corrupt or tampered row) is named, and the rest of the
store stays readable: ``flightlog pending`` lists the other sessions' waits and ``flightlog runs --rebuild``
folds the other runs, and ``flightlog runs`` on a stale projection (the ledgers folded at read time) lists
them, each naming the bad session and its seq and exiting 1. Before, each command failed for the whole store
(``runs`` on a stale projection and ``pending`` without naming the session), and ``runs --rebuild`` left the
projection empty. The dashboard names such a session too (``unreadable`` in ``/api/runs`` and
``/api/runs/page``, on the runs pages and the session page's row warning): before, it dropped the session's
waits to the server log only, and on a stale projection ``/``, ``/api/runs`` failed (500) and ``/runs``
refused the page (400) without naming the session. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import json

from flightlog.store import open_store

from .helpers import cli, execute, suspended_run
from .test_row_surfaces import dashboard

BROKEN = b'{"kind":"suspended",'
"""Bytes that are not JSON, holding the wait mark (so the store-wide pass reads this session's tail)."""


def _break(url: str) -> tuple[str, str, int]:
    """Two waiting runs, the second given a row at its next seq that does not decode: (good, bad, seq)."""
    good, bad = suspended_run(url), suspended_run(url)
    with open_store(url, read_only=True) as store:
        seq = store.get_session(bad).head_seq + 1
    literal = f"decode('{BROKEN.hex()}', 'hex')" if "://" in url else f"X'{BROKEN.hex()}'"
    execute(
        url,
        "INSERT INTO events (session_id, seq, kind, event, prev_hash, hash, recorded_at_ms) "
        f"VALUES ('{bad}', {seq}, 'custom', {literal}, 'x', 'y', 0)",
    )
    return good, bad, seq


def test_pending_names_the_session_it_cannot_read_and_lists_the_others(url: str) -> None:
    good, bad, seq = _break(url)
    code, out, err = cli(url, "pending")
    assert code == 1, (out, err)
    assert good in out and bad not in out, out
    assert f"{bad}: its waits cannot be read: undecodable event at seq {seq}" in err, err
    code, out, err = cli(url, "pending", "--json")
    assert code == 1 and [row["session_id"] for row in json.loads(out)] == [good], (out, err)


def test_runs_rebuild_folds_the_other_runs_and_names_the_one_it_cannot(url: str) -> None:
    good, bad, seq = _break(url)
    code, out, err = cli(url, "runs", "--rebuild")
    assert code == 1, (out, err)
    assert f"{bad}: not in the runs projection: undecodable event at seq {seq}" in err, err
    assert good in out and bad not in out, out
    code, out, err = cli(url, "runs", "--json")  # the projection is current: the good run is listed
    assert code == 0, err
    assert [run["run_id"] for run in json.loads(out)] == [good]


def test_runs_on_a_stale_projection_lists_the_other_runs_and_names_the_one_it_cannot(url: str) -> None:
    good, bad, seq = _break(url)
    with open_store(url) as store:
        store.set_run_projection_version(0)  # what a failed projector leaves: readers fold the ledgers
    for args in (("runs",), ("runs", "--tree"), ("runs", "--state", "waiting_input")):
        code, out, err = cli(url, *args)
        assert code == 1, (args, out, err)
        assert f"{bad}: not listed: undecodable event at seq {seq}" in err, (args, err)
        assert good in out and bad not in out, (args, out)
    code, out, err = cli(url, "runs", "--json")
    assert code == 1, (out, err)
    assert [run["run_id"] for run in json.loads(out)] == [good]
    assert f"{bad}: not listed: undecodable event at seq {seq}" in err, err


def test_the_dashboard_names_the_session_whose_waits_it_cannot_read(url: str) -> None:
    good, bad, seq = _break(url)
    why = f"its waits cannot be read: undecodable event at seq {seq}"
    with dashboard(url) as client:
        data = client.get("/api/runs").json()
        assert [(c["session"], c["call"]) for c in data["pending"]] == [(good, "n1")]
        [named] = data["unreadable"]
        assert (named["session"], named["href"]) == (bad, f"/session?id={bad}")
        assert named["warning"].startswith(why) and f"flightlog verify {bad}" in named["warning"], named
        nodes = {node["id"]: node for node in data["runs"]}
        assert nodes[bad]["unreadable"].startswith(why) and nodes[good]["unreadable"] == ""
        assert why in client.get("/").text
        assert why in client.get(f"/session?id={bad}").text


def test_the_dashboard_on_a_stale_projection_lists_the_other_runs_and_names_the_one_it_cannot(
    url: str,
) -> None:
    good, bad, seq = _break(url)
    with open_store(url) as store:
        store.set_run_projection_version(0)
    why = f"not listed: undecodable event at seq {seq}"
    with dashboard(url) as client:
        for api, page, key in (("/api/runs", "/", "id"), ("/api/runs/page", "/runs", "run_id")):
            response = client.get(api)
            assert response.status_code == 200, (api, response.text)
            data = response.json()
            assert [run[key] for run in data["runs"]] == [good], api
            assert [(u["session"], u["warning"].startswith(why)) for u in data["unreadable"]] == [(bad, True)]
            assert why in client.get(page).text, page
