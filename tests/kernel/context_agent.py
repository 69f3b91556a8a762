"""The agent the context tests, the crash test and the bench share: a long step-by-step run in a small
window (``StepProvider`` enforces the window the way Anthropic does), a summarizer, a tool whose output
is sometimes large (paged out on arrival)."""

from __future__ import annotations

import sys
from typing import Any

from flightlog.errors import SessionNotFound
from flightlog.kernel import Agent, Kernel, tool
from flightlog.kernel.context import ContextPolicy, ContextWindow
from flightlog.kernel.scripted import StepProvider, SummaryProvider
from flightlog.store import open_store

WINDOW = 4000
MAX_TOKENS = 200


@tool(effect="read_only")
def work(step: int) -> str:
    """Do one step of the job.

    Args:
        step: The step number.
    """
    bulk = "x" * 2400 if step % 7 == 0 else ""  # every 7th step: an output too large to keep
    return f"step {step} done{bulk}"


@tool(effect="read_only")
def work_long(step: int) -> str:
    """Do one step of the job, reporting at length.

    Args:
        step: The step number.
    """
    if step % 7 == 0:
        return f"step {step} done" + "x" * 2400  # too large to keep: paged out on arrival
    if step % 3 == 0:
        return f"step {step} done; details: " + "y" * 1100  # mid-sized: what micro-compaction cuts
    return f"step {step} done"


CHATTY_PAGE_OUT_TOKENS = 400
"""The page-out limit of a chatty run: its mid-sized outputs (~280 tokens) stay in the history."""


def build(
    steps: int = 300, *, window: int = WINDOW, chatty: bool = False, **policy: Any
) -> tuple[Agent, StepProvider, SummaryProvider]:
    """The long-run agent; ``chatty``: every 4th answer narrates at length (snip) and every 3rd output is
    mid-sized (micro), with a page-out limit that keeps those in the history."""
    if chatty:
        policy.setdefault("page_out_tokens", CHATTY_PAGE_OUT_TOKENS)
    tool_name = "work_long" if chatty else "work"
    provider = StepProvider(
        steps, window=window, tool=tool_name, narrate_every=4 if chatty else 0, narration_chars=1000
    )
    summarizer = SummaryProvider()
    context = ContextPolicy(
        windows={
            provider.model: ContextWindow(window, MAX_TOKENS),
            summarizer.model: ContextWindow(100_000, 2000),
        },
        summarizer=summarizer,
        summary_max_tokens=300,
        **policy,
    )
    tools = [work_long] if chatty else [work]
    agent = Agent(name="long", route=[provider], tools=tools, max_tokens=MAX_TOKENS, context=context)
    return agent, provider, summarizer


def child_main(db: str, session_id: str, steps: int, chatty: bool) -> int:
    """Run (or resume) the session to its end; the crash test makes the process SIGKILL itself at a named
    point (``$FLIGHTLOG_TEST_CRASH_AT``, :mod:`flightlog.testing.crashpoints`)."""
    agent, _provider, _summarizer = build(steps, chatty=chatty)
    with open_store(db) as store:
        kernel = Kernel(store, agent)
        try:
            store.get_session(session_id)
            exists = True
        except SessionNotFound:
            exists = False
        result = (
            kernel.resume_sync(session_id, handle_signals=False)
            if exists
            else kernel.run_sync("do all the steps", session_id=session_id, handle_signals=False)
        )
    print(result.status, flush=True)
    return 0


if __name__ == "__main__":
    db, sid, steps, chatty = sys.argv[1:5]
    sys.exit(child_main(db, sid, int(steps), chatty == "1"))
