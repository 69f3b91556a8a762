"""A LangGraph thread whose ledger an attacker re-chained: nothing it names may be imported before it verifies.

Found trying issue 16 as a user (session 6). The attacker can write the database file: they store an
artifact whose msgpack names a module (LangGraph's serde imports ``module.name`` to rebuild the value), point
a ``langgraph.checkpoint`` event's channel at it, and recompute every chain hash and the session row's head,
so the plain chain verifies. The thread was signed (the default notary): its signed checkpoint and retained
head disagree with the rows, and ``flightlog audit`` says so (``checkpoint_mismatch``, ``fork``). The saver's
read path checks only the plain chain against the session row, so ``get_tuple`` loads the artifact and
LangGraph imports the module. The saver's first read of a thread in a process now checks the signatures as
``audit`` does (the latest signed checkpoint and retained head, and the rows' leaf hashes against its tree
head in the same pass as the chain), so the read is refused before anything is deserialized.
"""

from __future__ import annotations

import json
import operator
import sys
import uuid
from pathlib import Path
from typing import Annotated, Any, TypedDict

import ormsgpack
import pytest
from langgraph.graph import END, START, StateGraph
from typer.testing import CliRunner

import flightlog
from flightlog.cli import app
from flightlog.errors import LedgerIntegrityError
from flightlog.integrations.langgraph import CHECKPOINT_KIND, FlightlogSaver, session_id_for
from flightlog.recorder import verify_session

from .rechain import rechain


class State(TypedDict):
    steps: Annotated[list[str], operator.add]


def _graph(saver: FlightlogSaver) -> Any:
    g = StateGraph(State)
    g.add_node("a", lambda _s: {"steps": ["a"]})
    g.add_edge(START, "a")
    g.add_edge("a", END)
    return g.compile(checkpointer=saver)


def test_a_rechained_signed_thread_is_refused_before_anything_is_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = f"flightlog_rechain_probe_{uuid.uuid4().hex}"
    (tmp_path / f"{probe}.py").write_text("class Probe:\n    def __init__(self, *args):\n        pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    db = tmp_path / "lg.db"
    cfg: Any = {"configurable": {"thread_id": "t"}}
    sid = session_id_for("t")
    with flightlog.open_store(str(db)) as store:
        _graph(FlightlogSaver(store)).invoke({"steps": []}, cfg)  # signed with the (isolated) user key
        rows = list(store.read_events(sid))
        payload = ormsgpack.packb(ormsgpack.Ext(0, ormsgpack.packb((probe, "Probe", "x"))))
        ref = store.put_artifact(payload, "application/octet-stream").handle
    last = [r for r in rows if json.loads(r.event_bytes).get("custom_kind") == CHECKPOINT_KIND][-1]
    wire = json.loads(last.event_bytes)
    channel = next(c for c in wire["payload"]["channels"].values() if c.get("type") == "msgpack")
    channel["ref"] = ref
    channel.pop("base", None)  # a whole value, not a delta on the parent's list
    forged = json.dumps(wire, separators=(",", ":"), sort_keys=True).encode()
    rechain(db, sid, lambda seq, data: forged if seq == last.seq else data)
    audit = CliRunner().invoke(app, ["--db", str(db), "audit", "t", "--json"])
    assert audit.exit_code == 1 and not json.loads(audit.output)[0]["ok"]  # the signatures see it
    refused: LedgerIntegrityError | None = None
    try:
        with flightlog.open_store(str(db)) as store:
            assert verify_session(store, sid).ok  # the plain chain cannot
            try:
                FlightlogSaver(store).get_tuple(cfg)
            except LedgerIntegrityError as exc:
                refused = exc
        assert probe not in sys.modules, "a module named by unverified stored data was imported"
        assert refused is not None and refused.seq is not None
        assert "signed checkpoint" in str(refused)
    finally:
        sys.modules.pop(probe, None)
