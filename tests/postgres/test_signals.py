"""Signals on PostgreSQL: a message sent mid-turn is disposed once at the next boundary, in the append's
transaction; an interrupt cuts the model call short (the kernel flow of tests/kernel/test_signals.py)."""

from __future__ import annotations

import asyncio

from flightlog.events import Rollbacked, SignalDeliveryDisposed
from flightlog.kernel import Agent, Kernel, send_signal, tool
from flightlog.kernel.requests import check_session
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.providers.base import ModelRequest, ModelResponse
from flightlog.sessions import iter_events
from flightlog.store.postgres import PostgresStore
from flightlog.store.signals import pending_signals


@tool(effect="read_only")
def echo(text: str) -> str:
    """Echo the text back."""
    return text


def test_signals_are_delivered_once_and_interrupts_roll_back(pg_store: PostgresStore) -> None:
    async def turn_one(request: ModelRequest) -> ModelResponse:
        send_signal(pg_store, "pg-s1", "message", "also /etc")
        return calls(call("echo", {"text": "x"}, id="c1"))

    async def hang(request: ModelRequest) -> ModelResponse:
        send_signal(pg_store, "pg-s1", "interrupt", "stop")
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    provider = ScriptedProvider([turn_one, hang, reply("stopped")], by_turn=False)
    agent = Agent(name="pg-signals", route=[provider], tools=[echo])
    kernel = Kernel(pg_store, agent, notary=None, heartbeat_s=None, signal_poll_s=0.01)
    result = kernel.run_sync("task", session_id="pg-s1")
    assert result.status == "completed"
    ledger = [event for _row, event in iter_events(pg_store, "pg-s1")]
    disposed = [e for e in ledger if isinstance(e, SignalDeliveryDisposed)]
    assert [(d.turn, d.disposition) for d in disposed] == [(2, "queue"), (2, "interrupt_now")]
    assert [e.reason.kind for e in ledger if isinstance(e, Rollbacked) and e.reason] == ["user_interrupt"]
    user = [m.text_content() for m in provider.requests[2].messages if m.role == "user"]
    assert user[-2:] == ["[SIGNAL] also /etc", "[INTERRUPT] stop"]
    assert pending_signals(pg_store, "pg-s1") == [] and check_session(pg_store, "pg-s1").ok
