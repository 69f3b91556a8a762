"""A child that ends without its delegating call settling it still has its grant released, once.

Two racing resumes of a crashed tree (``tests/kernel/test_racing_resumes.py``) could leave a child's grant
open for good: the child was driven to its end by the process that lost the parent (fenced off there, its
release refused), while the call in the process holding the parent was answered otherwise, so nothing ever
wrote ``budget_usage_reported`` for it. Here that interleaving is forced in one process, without timers:
the delegating call's drive of its child finishes the child (as the other process did) and then fails
(as the holder's own resume of the child failed against that writer), so the call is answered with an
error. The holder of the parent must then write the release itself, exactly once: with the turn's
``tool_completed``, or on resume when the process stopped before it.
"""

from __future__ import annotations

from typing import Any

import pytest

from flightlog.errors import LedgerIntegrityError, StaleWriter
from flightlog.events import (
    AgentProcessChanged,
    BudgetUsageReported,
    Custom,
    LlmCompleted,
    Resumed,
    ToolCompleted,
)
from flightlog.kernel import Agent, Budgets, Kernel
from flightlog.kernel import subagents as subagents_module
from flightlog.kernel.delegation import BUDGET_GRANT_RELEASED
from flightlog.kernel.effects import Effects
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.kernel.state import load_state
from flightlog.kernel.subagents import subagent
from flightlog.store import SqliteStore

from .helpers import check_child_settled, echo, events

REFUSAL = "child seq 7: checkpoint written meanwhile"


def _tree() -> Agent:
    child = Agent("child", [ScriptedProvider([reply("child answer")], by_turn=True)], tools=[echo])
    helper = subagent(child, role="explore", budgets=Budgets(tokens=300, turns=3))
    script = [calls(call("child", {"task": "look"}, id="c1")), reply("done")]
    return Agent(
        "parent", [ScriptedProvider(script, by_turn=True)], tools=[echo, helper], budgets=Budgets(tokens=900)
    )


def _kernel(store: SqliteStore) -> Kernel:
    return Kernel(store, _tree(), notary=None, heartbeat_s=None)


@pytest.fixture
def drive_then_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    """The delegating call's drive runs the child to its end, then raises as a refused resume would."""
    real = subagents_module._drive_child

    async def drive(call: Any, grant: Any, task: str) -> None:
        await real(call, grant, task)
        raise LedgerIntegrityError(session_id=call.agent_id, reason=REFUSAL)

    monkeypatch.setattr(subagents_module, "_drive_child", drive)


def _only_child(store: SqliteStore, parent: str) -> str:
    (kid,) = [s.session_id for s in store.list_sessions() if s.parent_session_id == parent]
    return kid


def _settled_once(store: SqliteStore, parent: str) -> list[Any]:
    """Check the child is settled in the parent exactly as a normal join settles it; return the ledger."""
    ledger = events(store, parent)
    kid = _only_child(store, parent)
    check_child_settled(ledger, load_state(store, parent), load_state(store, kid), kid)
    assert sum(isinstance(e, BudgetUsageReported) for e in ledger) == 1
    released = [e for e in ledger if isinstance(e, Custom) and e.custom_kind == BUDGET_GRANT_RELEASED]
    assert len(released) == 1 and released[0].payload["returned"] == {"tokens": 285, "turns": 2}
    return ledger


@pytest.mark.usefixtures("drive_then_fail")
def test_a_child_ended_while_its_call_failed_is_released_with_the_turns_tool_completed(
    store: SqliteStore,
) -> None:
    result = _kernel(store).run_sync("go", session_id="p")
    assert result.status == "completed"
    ledger = _settled_once(store, "p")
    (completed,) = [e for e in ledger if isinstance(e, ToolCompleted)]
    assert completed.results[0].is_error and REFUSAL in completed.results[0].output  # what the call saw
    (joined,) = [e for e in ledger if isinstance(e, AgentProcessChanged) and e.state == "joined"]
    at = ledger.index(joined)
    assert (
        ledger.index(completed)
        < at
        < next(i for i, e in enumerate(ledger) if isinstance(e, LlmCompleted) and e.turn == 2)
    )
    assert [type(e) for e in ledger[at : at + 3]] == [AgentProcessChanged, BudgetUsageReported, Custom]
    assert joined.turn == 1 and joined.result_termination == "completed"
    assert load_state(store, "p").delegation.charge().tokens == 15  # what the child used, not its grant


@pytest.mark.usefixtures("drive_then_fail")
def test_a_resume_writes_the_release_a_stopped_holder_left_missing(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = Effects.complete

    def complete_then_lose(self: Effects, key: str, outcome: Any) -> None:
        real(self, key, outcome)  # the call's error result is durable, then this process loses the parent
        raise StaleWriter(session_id="p", epoch=1, current_epoch=2)

    monkeypatch.setattr(Effects, "complete", complete_then_lose)
    first = _kernel(store).run_sync("go", session_id="p")
    assert first.status == "cancelled" and "fenced off" in (first.detail or "")
    assert not load_state(store, "p").delegation.released  # the child ended; nothing settled it
    assert load_state(store, _only_child(store, "p")).phase == "terminal"

    monkeypatch.setattr(Effects, "complete", real)
    assert _kernel(store).resume_sync("p").status == "completed"
    ledger = _settled_once(store, "p")
    at = next(i for i, e in enumerate(ledger) if isinstance(e, Resumed))
    assert [type(e) for e in ledger[at + 1 : at + 4]] == [AgentProcessChanged, BudgetUsageReported, Custom]
    assert _kernel(store).resume_sync("p").status == "completed"  # ended: nothing more is written
    assert len(events(store, "p")) == len(ledger)
