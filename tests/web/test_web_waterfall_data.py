"""The waterfall's data (:func:`flightlog.web.waterfall_api.waterfall`) for kernel runs with retries, a
route failover and an abort: failed model calls end at their rollback, every mark names what happened."""

from __future__ import annotations

from pathlib import Path

from flightlog.kernel import Agent, Kernel, abort
from flightlog.kernel.scripted import ScriptedProvider, reply
from flightlog.providers.base import ProviderError
from flightlog.store import SqliteStore
from flightlog.web.waterfall_api import waterfall

from .conftest import echo, run_gated


def test_retries_and_a_failover_end_the_failed_calls_at_their_rollback(db_path: Path) -> None:
    primary = ScriptedProvider(
        [
            ProviderError("rate limited", retryable=True, retry_after_s=0.0),
            ProviderError("bad key", retryable=False),
        ],
        by_turn=False,
    )
    backup = ScriptedProvider([reply("ok")], model="backup-model", by_turn=False)

    async def sleep(delay: float) -> None:
        return None

    with SqliteStore(db_path) as store:
        agent = Agent(name="retrying", route=[primary, backup], tools=[echo])
        assert (
            Kernel(store, agent, sleep=sleep, notary=None).run_sync("go", session_id="r1").status
            == "completed"
        )
        data = waterfall(store, "r1")
    model = [s for s in data["spans"] if s["lane"] == "model"]
    assert [s["label"] for s in model] == [
        "model call, turn 1 (failed, rolled back)",
        "model call, turn 1 (failed, rolled back)",
        "model call, turn 1",
    ]
    assert not any(s["open"] for s in data["spans"])  # nothing left dangling
    marks = [m["label"] for m in data["marks"]]
    assert marks.count("rollback, turn 1") == 2
    assert "provider retry, turn 1" in marks
    assert "route failover to backup-model, turn 1" in marks
    assert marks[-1] == "end, turn 1"


def test_an_abort_and_an_approval_name_who(db_path: Path) -> None:
    from flightlog.kernel import approve

    run_gated(db_path, "r2")
    with SqliteStore(db_path) as store:
        approve(store, "r2", "w1", responder="ada")
        assert abort(store, "r2", requested_by="bob", notary=None)
        data = waterfall(store, "r2")
    (wait,) = [s for s in data["spans"] if s["lane"] == "approval"]
    assert wait["label"] == "waiting for approval, turn 2: approved by ada" and not wait["open"]
    (suspended,) = [s for s in data["spans"] if s["lane"] == "suspended"]
    assert suspended["open"]  # aborted, not ended: the run stays resumable
    labels = [m["label"] for m in data["marks"]]
    assert "cancelled, turn 2" in labels and "abort requested by bob, turn 2" in labels
