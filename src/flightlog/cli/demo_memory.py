"""``flightlog demo``, memory part: an agent remembers a fact in one run and uses it in the next.

Two agents share one memory scope (``demo/ops-assistant``) in the store. The first run's (scripted) model
calls ``memory_write``: the kernel validates the write (upstream's rules, secrets by detect-secrets), keeps
the text in erasable salted storage and records ``memory_written``. The second run is a new session: the
agent's policy injects memories relevant to the goal at run start, the model also calls
``memory_query``, and its answer is built from the ``[MEMORY ...]`` messages in its history (the scripted
model reads them; nothing is hard-coded in the answer). Also ``examples/memory_agent.py``.
"""

from __future__ import annotations

import re

from rich.console import Console

from ..events import MemoryQueried, MemoryScope, MemoryWritten
from ..kernel import Agent, Kernel
from ..kernel.memory import MemoryPolicy
from ..kernel.scripted import ScriptedProvider, call, calls, reply
from ..messages import Message
from ..providers.base import ModelRequest, ModelResponse
from ..sessions import iter_events, replay_session
from ..store import Store

__all__ = [
    "FACT",
    "SCOPE",
    "answer_from_memory",
    "recall_agent",
    "recall_model",
    "remember_agent",
    "remember_model",
    "run_memory_demo",
]

SCOPE = MemoryScope(tenant_id="demo", namespace="ops-assistant")
"""The memory scope both demo agents share."""
FACT = "Production deploys happen on Thursdays after the 14:00 standup."
"""What the first run remembers."""

_MEMORY = re.compile(r"^\[MEMORY record_id=(\S+) kind=(\w+)\] (.*)$", re.S)


def remember_model() -> ScriptedProvider:
    """The first run's scripted model: one ``memory_write`` of :data:`FACT`, then an answer."""
    write = call(
        "memory_write",
        {"name": "deploy-day", "content": FACT, "kind": "project", "description": "when deploys happen"},
        id="write-1",
    )
    return ScriptedProvider(
        [calls(write), reply("Noted: I will remember when deploys happen.")], by_turn=True
    )


def remember_agent() -> Agent:
    """First run: the model writes :data:`FACT` to memory, then answers."""
    return Agent(
        name="ops-remember", route=[remember_model()], memory=MemoryPolicy(scope=SCOPE), max_tokens=200
    )


def answer_from_memory(request: ModelRequest) -> ModelResponse:
    """The scripted model's answer: the text of the last ``[MEMORY ...]`` message it was given."""
    found = [m for m in (_MEMORY.match(_text(msg)) for msg in request.messages if msg.role == "user") if m]
    if not found:
        return reply("I do not remember anything about that.")
    return reply(f"From memory ({found[-1].group(1)}): {found[-1].group(3)}")


def _text(message: Message) -> str:
    return message.text_content()


def recall_model() -> ScriptedProvider:
    """The second run's scripted model: one ``memory_query``, then :func:`answer_from_memory`."""
    query = call("memory_query", {"query": "when do deploys happen", "top_k": 3}, id="query-1")
    return ScriptedProvider([calls(query), answer_from_memory], by_turn=True)


def recall_agent() -> Agent:
    """Second run (a new session): memories injected at start, one ``memory_query``, an answer from them."""
    policy = MemoryPolicy(scope=SCOPE, inject=3)
    return Agent(name="ops-recall", route=[recall_model()], memory=policy, max_tokens=200)


def run_memory_demo(store: Store, console: Console) -> int:
    """Run the memory demo (module docs) against ``store``; returns 0 when the second run used the fact."""
    console.print("Long-term memory across runs (flightlog.cli.demo_memory)")
    first = Kernel(store, remember_agent()).run_sync("remember when deploys happen", handle_signals=False)
    written = [e for _r, e in iter_events(store, first.session_id) if isinstance(e, MemoryWritten)]
    for event in written:
        console.print(
            f"   run 1 {first.session_id}: memory_written {event.record_id} "
            f"{event.name} ({event.size_bytes} bytes)"
        )
    second = Kernel(store, recall_agent()).run_sync(
        "When do production deploys happen?", handle_signals=False
    )
    queried = [e for _r, e in iter_events(store, second.session_id) if isinstance(e, MemoryQueried)]
    console.print(f"   run 2 {second.session_id}: {len(queried)} memory queries (run start + memory_query)")
    for message in replay_session(store, second.session_id):
        text = message.text_content()
        if text.startswith("[MEMORY"):
            console.print(f"   in its history: {text}")
    console.print(f"   answer: {second.final_message or ''}")
    ok = bool(written) and FACT in (second.final_message or "")
    console.print("   the second run used what the first remembered" if ok else "   memory was NOT used")
    return 0 if ok else 1
