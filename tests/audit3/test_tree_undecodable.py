"""The dashboard's run tree (a session page's ancestors and its sub-agents) when the ``sessions`` rows of
a parent, a child and a grandchild are edited to ``completed`` while each ledger waits, and one of them
gets a row appended that does not decode. The held runs show the state their events give (with the row
warning); the undecodable one shows ``undecodable`` with a warning naming it and the seq, as the listings
name it (``not listed: undecodable event at seq N``). Before, an undecodable ancestor showed "not in the
runs read model" (class ``unknown``), and every child, held or undecodable, showed the state the row gave
(``terminal``, ``completed``): decided from the unhashed row. On SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from flightlog.events import RunStarted
from flightlog.recorder import Recorder
from flightlog.store import open_store
from flightlog.web import subtree

from .helpers import execute
from .test_held_undecodable import _append_broken
from .test_row_surfaces import dashboard
from .test_undecodable import BROKEN
from .test_wait_pass import suspend

TREE = (("p", None), ("c", "p"), ("g", "c"))
NAMES = [sid for sid, _ in TREE]


def _tree(url: str) -> dict[str, int]:
    """p > c > g, each waiting, each row edited to ``completed``: each session's next seq."""
    with open_store(url) as store:
        for sid, parent in TREE:
            recorder = Recorder.create(store, session_id=sid, source="kernel", parent_session_id=parent)
            recorder.append_many([RunStarted(run_id=sid, goal="g"), suspend()])
        execute(url, "UPDATE sessions SET status = 'completed'")
        return {sid: store.get_session(sid).head_seq + 1 for sid, _ in TREE}


def _states(rows: list[dict[str, object]]) -> dict[object, tuple[object, object]]:
    return {row["id"]: (row["state"], row["state_class"]) for row in rows}


@pytest.mark.parametrize("bad", ["p", "c", "g"])
def test_the_run_tree_names_an_undecodable_run_and_shows_held_ones_as_their_ledger(
    url: str, bad: str
) -> None:
    seqs = _tree(url)
    _append_broken(url, bad, seqs[bad], BROKEN)
    why = f"not listed: undecodable event at seq {seqs[bad]}"
    expected = {
        sid: ("undecodable", "undecodable") if sid == bad else ("waiting_input", "waiting_input")
        for sid, _ in TREE
    }
    with open_store(url, read_only=True) as store:
        for at, (sid, parent) in enumerate(TREE):
            nodes = subtree.lineage(store, sid)
            assert _states(nodes) == {k: expected[k] for k in NAMES[: at + 1]}, (sid, nodes)
            if parent is not None:
                children = subtree.child_rows(store, parent)
                assert _states(children) == {sid: expected[sid]}, children
                warning = str(children[0]["warning"])
                assert warning.startswith(why if sid == bad else "its sessions row says status 'completed'")
        assert all((why in str(n["warning"])) is (n["id"] == bad) for n in subtree.lineage(store, "g")), (
            subtree.lineage(store, "g")
        )
    with dashboard(url) as client:
        for at, (sid, _) in enumerate(TREE):
            page = client.get(f"/session?id={sid}")
            assert page.status_code == 200, page.text
            assert "not in the runs read model" not in page.text
            assert "terminal" not in page.text.split('id="subagents"', 1)[1].split("</section>", 1)[0]
            shown = NAMES.index(bad) <= at + 1  # the bad run is an ancestor, the session or its child
            assert (why in page.text) is shown, sid
            assert ("state state-undecodable" in page.text) is shown, sid
