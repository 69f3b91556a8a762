"""Budgets per axis: reserved before each model call, settled from recorded usage, derived on resume."""

from __future__ import annotations

import asyncio

import pytest

from flightlog.events import (
    BudgetExceeded,
    Custom,
    OperationCancelled,
    Resumed,
    RunStarted,
    RunTerminal,
    Suspended,
)
from flightlog.kernel import Agent, Budgets, Kernel, Policy, Prices, Rule, approve, tool
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.kernel.state import KernelState
from flightlog.providers.base import Usage
from flightlog.store import SqliteStore

from .helpers import FakeClock, agent, customs, of


def _looping(n: int, usage: Usage | None = None) -> list[object]:
    return [calls(call("echo", {"text": str(i)}, id=f"c{i}"), usage=usage) for i in range(n)] + [
        reply("done")
    ]


def _run(
    store: SqliteStore, budgets: Budgets, script: list[object], **kw: object
) -> tuple[str, ScriptedProvider]:
    provider = ScriptedProvider(script, by_turn=False)  # type: ignore[arg-type]
    clock = kw.pop("clock", None)
    k = Kernel(store, agent(provider, budgets=budgets, **kw), **({"clock": clock} if clock else {}))  # type: ignore[arg-type]
    result = k.run_sync("loop")
    return result.session_id, provider


def test_token_budget_caps_the_reservation_then_stops_the_run(store: SqliteStore) -> None:
    sid, provider = _run(store, Budgets(tokens=40), _looping(10))  # every call uses 15 tokens
    assert [r.max_tokens for r in provider.requests] == [40, 25, 10]
    (exceeded,) = of(store, sid, BudgetExceeded)
    assert exceeded.budget == "tokens" and exceeded.turn == 4
    assert exceeded.reservation_id is not None and exceeded.reservation_id.endswith(":turn-4:r0")
    assert exceeded.operation_id.endswith(":turn-4:model")
    assert of(store, sid, RunTerminal) == [
        RunTerminal(reason="budget_exhausted", turns_used=3, total_tokens=45)
    ]
    assert customs(store, sid, "budget_limits") == [{"tokens": 40}]
    assert store.get_session(sid).status == "budget_exhausted"


def test_turn_budget(store: SqliteStore) -> None:
    sid, provider = _run(store, Budgets(turns=2), _looping(10))
    assert len(provider.requests) == 2
    (exceeded,) = of(store, sid, BudgetExceeded)
    assert (exceeded.budget, exceeded.turn, exceeded.reservation_id) == ("turns", 3, None)
    assert of(store, sid, RunTerminal)[0].turns_used == 2


def test_cost_budget_with_prices(store: SqliteStore) -> None:
    prices = Prices(input_per_1k=1.0, output_per_1k=2.0)
    usage = Usage(input_tokens=100, output_tokens=50)  # 0.1 + 0.1 = 0.2 per call
    sid, provider = _run(store, Budgets(cost=0.5, prices=prices), _looping(10, usage))
    assert [r.max_tokens for r in provider.requests] == [250, 150, 50]  # output the cost left can buy
    assert [u["cost"] for u in customs(store, sid, "model_usage")] == pytest.approx([0.2, 0.2, 0.2])
    (exceeded,) = of(store, sid, BudgetExceeded)
    assert exceeded.budget == "cost"
    result = Kernel(store, agent(provider, budgets=Budgets(cost=0.5, prices=prices))).resume_sync(sid)
    assert result.status == "budget_exhausted" and result.cost == pytest.approx(0.6)
    assert result.detail == "budget exhausted: cost"


def test_per_model_prices_and_missing_prices() -> None:
    p = ScriptedProvider([], model="m", by_turn=False)
    budgets = Budgets(cost=1.0, model_prices={"m": Prices(0.5, 1.5)})
    assert budgets.price_for("m") == Prices(0.5, 1.5) and budgets.price_for("x") is None
    Agent(name="a", route=[p], budgets=budgets)
    with pytest.raises(ValueError, match="needs prices for every route model"):
        Agent(name="a", route=[p], budgets=Budgets(cost=1.0))
    with pytest.raises(ValueError, match="finite number"):
        Budgets(tokens=-1)
    wire = Budgets(tokens=5, cost=1.0, prices=Prices(1, 2), model_prices={"m": Prices(3, 4)}).to_wire()
    assert Budgets.from_wire(wire).to_wire() == wire


def test_wall_clock_budget_between_turns(store: SqliteStore) -> None:
    clock = FakeClock()

    @tool(effect="read_only")
    def slow(text: str) -> str:
        """Takes 600 ms of (fake) time."""
        clock.now += 0.6
        return text

    script = [calls(call("slow", {"text": str(i)}, id=f"c{i}")) for i in range(5)]
    sid, provider = _run(store, Budgets(wall_clock_ms=1000), script, tools=[slow], clock=clock)
    assert len(provider.requests) == 2
    (exceeded,) = of(store, sid, BudgetExceeded)
    assert (exceeded.budget, exceeded.turn) == ("wall_clock", 3)


def test_wall_clock_deadline_cancels_an_in_flight_model_call(store: SqliteStore) -> None:
    """The budget is read from the kernel's (fake, frozen) clock, so the run reaches its model call
    however slow the machine; the call would take an hour, so the deadline is what ends it."""
    provider = ScriptedProvider([reply("too late")], latency_s=3600, by_turn=False)
    k = Kernel(store, agent(provider, budgets=Budgets(wall_clock_ms=100)), clock=FakeClock())
    result = k.run_sync("hurry")
    sid = result.session_id
    assert result.status == "budget_exhausted" and result.detail == "budget exhausted: wall_clock"
    (cancelled,) = of(store, sid, OperationCancelled)
    assert (cancelled.turn, cancelled.reason.value, cancelled.pending_call_ids) == (1, "deadline", [])
    assert cancelled.operation_id.endswith(":turn-1:model")
    (exceeded,) = of(store, sid, BudgetExceeded)
    assert (exceeded.budget, exceeded.operation_id) == ("wall_clock", cancelled.operation_id)
    assert of(store, sid, RunTerminal)[0].reason == "budget_exhausted"


def test_wall_clock_deadline_cancels_running_tools_and_lists_them(store: SqliteStore) -> None:
    """``fast`` runs inline and never awaits, so it finishes in the first step of its task, before any
    timer can fire; ``forever`` never finishes. The fake clock keeps the budget whole until the tools run."""

    @tool(effect="read_only", in_thread=False)
    def fast(text: str) -> str:
        """Returns at once."""
        return text

    @tool(effect="read_only")
    async def forever(text: str) -> str:
        """Never finishes."""
        await asyncio.Event().wait()
        return text

    provider = ScriptedProvider(
        [calls(call("fast", {"text": "fast"}, id="e"), call("forever", {"text": "x"}, id="f"))], by_turn=False
    )
    k = Kernel(
        store, agent(provider, tools=[fast, forever], budgets=Budgets(wall_clock_ms=300)), clock=FakeClock()
    )
    sid = k.run_sync("hurry").session_id
    (cancelled,) = of(store, sid, OperationCancelled)
    assert cancelled.reason.value == "deadline" and cancelled.pending_call_ids == ["f"]
    assert cancelled.operation_id.endswith(":turn-1:tools")


def test_remaining_budget_is_derived_from_the_ledger_on_resume_and_never_refilled(store: SqliteStore) -> None:
    script = [
        calls(call("echo", {"text": "needs approval"}, id="a")),
        calls(call("echo", {"text": "b"}, id="b")),
        calls(call("echo", {"text": "c"}, id="c")),
        reply("never reached"),
    ]
    policy = Policy(rules=(Rule("ask", tool="echo", arg="text", path="needs*"),))
    first = ScriptedProvider(script, by_turn=True)  # type: ignore[arg-type]
    sid = Kernel(store, agent(first, budgets=Budgets(tokens=25), policy=policy)).run_sync("go").session_id
    approve(store, sid, "a")
    generous = ScriptedProvider(script, by_turn=True)  # type: ignore[arg-type]
    result = Kernel(store, agent(generous, budgets=Budgets(tokens=10**6), policy=policy)).resume_sync(sid)
    assert [r.max_tokens for r in generous.requests] == [10]  # 25 recorded - 15 used
    assert result.status == "budget_exhausted" and result.tokens == 30
    assert of(store, sid, BudgetExceeded)[0].budget == "tokens"
    assert customs(store, sid, "budget_limits") == [{"tokens": 25}]  # recorded once, at run start


def _fold(rows: list[tuple[int, object]]) -> KernelState:
    state = KernelState("s")
    for seq, (at, event) in enumerate(rows):
        state.apply(seq, at, event)  # type: ignore[arg-type]
    return state


def test_wall_clock_counts_active_time_only() -> None:
    started = RunStarted(run_id="r", goal="g")
    suspended = _fold(
        [
            (1000, started),
            (1100, OperationCancelled(turn=1, operation_id="o", reason="user")),  # type: ignore[arg-type]
            (5000, Resumed(turn=1)),
            (5200, Suspended(turn=1, reason="approval")),
            (9000, Resumed(turn=1)),  # the wait for a human is not counted
            (9050, RunTerminal(reason="completed", turns_used=1, total_tokens=0)),
        ]
    )
    assert suspended.wall.used_ms == 100 + 200 + 50
    filler = Custom(custom_kind="x")
    crashed = _fold([(0, started), (300, filler), (10_000, Resumed(turn=1)), (10_100, filler)])
    assert crashed.wall.used_ms == 300 + 100  # a crash ends an activation at its last row
