"""A run its ``sessions`` row ended (edited to ``completed``) while its ledger waits, and one row appended to
that ledger that does not decode: whether its ledger still waits cannot be decided, so the surfaces that put
such runs back (:mod:`flightlog.kernel.rowheld`) name the session and the seq and show the rest. Before,
the check raised for the whole request: the dashboard's ``/`` and ``/api/runs`` failed (500), the held
session's page too, ``/runs`` and ``/api/runs/page`` refused the page (400) naming no session, and
``flightlog runs`` and ``ls`` exited 1 with ``undecodable event at seq N`` and no listing. On SQLite and
PostgreSQL, with bad bytes the store-wide wait pass skips (no end spelled) and with bytes it must decode
(``run_terminal`` spelled: the pass fails, and each candidate is decided on its own).
"""

from __future__ import annotations

import json

import pytest

from flightlog.store import open_store

from .helpers import cli, execute, suspended_run
from .test_row_surfaces import dashboard
from .test_row_trust import set_status
from .test_undecodable import BROKEN

BAD = {"skipped": BROKEN, "decoded": b'{"kind":"suspended","x":"run_terminal",'}
"""Bytes that do not decode: the first the pass proves ends nothing unread, the second it decodes."""


def _hold_and_break(url: str) -> tuple[str, str, int]:
    """Two waiting runs, the second's row edited to ``completed``: (good, held, the seq its bad row gets)."""
    good, held = suspended_run(url), suspended_run(url)
    set_status(url, held, "completed")
    with open_store(url, read_only=True) as store:
        return good, held, store.get_session(held).head_seq + 1


def _append_broken(url: str, session_id: str, seq: int, bad: bytes) -> None:
    """An ``INSERT`` of bytes that do not decode at ``seq`` (the append-only triggers allow it)."""
    literal = f"decode('{bad.hex()}', 'hex')" if "://" in url else f"X'{bad.hex()}'"
    execute(
        url,
        "INSERT INTO events (session_id, seq, kind, event, prev_hash, hash, recorded_at_ms) "
        f"VALUES ('{session_id}', {seq}, 'custom', {literal}, 'x', 'y', 0)",
    )


@pytest.mark.parametrize("bad", list(BAD))
def test_the_dashboard_names_the_held_session_it_cannot_read(url: str, bad: str) -> None:
    good, held, seq = _hold_and_break(url)
    why = f"not listed: undecodable event at seq {seq}"
    with dashboard(url) as client:
        assert client.get(f"/session?id={held}").status_code == 200  # the queue's cache holds its fold
        _append_broken(url, held, seq, BAD[bad])  # the row's key does not move: the cache keeps the old fold
        for api, page, query in (
            ("/api/runs", "/", ""),
            ("/api/runs", "/", "?state=waiting_input"),
            ("/api/runs/page", "/runs", ""),
            ("/api/runs/page", "/runs", "?state=waiting_input"),
        ):
            response = client.get(api + query)
            assert response.status_code == 200, (api, query, response.text)
            data = response.json()
            ids = [run.get("id", run.get("run_id")) for run in data["runs"]]
            assert good in ids and held not in ids, (api, query, ids)
            named = [(u["session"], u["warning"]) for u in data["unreadable"] if u["session"] == held]
            assert len(named) == 1 and named[0][1].startswith(why), (api, query, data["unreadable"])
            text = client.get(page + query)
            assert text.status_code == 200 and why in text.text, (page, query)
        response = client.get(f"/session?id={held}")
        assert response.status_code == 200, response.text
        assert f"its waits cannot be read: undecodable event at seq {seq}" in response.text
        assert client.get(f"/session?id={good}").status_code == 200


@pytest.mark.parametrize("bad", list(BAD))
def test_runs_and_ls_list_the_rest_and_name_the_held_session_they_cannot_read(url: str, bad: str) -> None:
    good, held, seq = _hold_and_break(url)
    _append_broken(url, held, seq, BAD[bad])
    for args in (("runs",), ("runs", "--json"), ("runs", "--state", "waiting_input"), ("runs", "--tree")):
        code, out, err = cli(url, *args)
        assert code == 1, (args, out, err)
        assert good in out and held not in out, (args, out)
        assert f"{held}: not listed: undecodable event at seq {seq}" in err, (args, err)
    code, out, err = cli(url, "ls", "--json")
    assert code == 1, (out, err)
    rows = {row["session_id"]: row for row in json.loads(out)}
    assert rows[held]["status"] == "completed" and rows[good]["status"] == "suspended", rows
    assert f"{held}: its waits cannot be read: undecodable event at seq {seq}" in err, err
    code, out, err = cli(url, "ls")
    assert code == 1 and good in out and held in out, (out, err)
    assert f"{held}: its waits cannot be read: undecodable event at seq {seq}" in err, err
