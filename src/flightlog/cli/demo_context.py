"""``flightlog demo``, context part: a run that outgrows its window, compacts, pages, and finishes.

The agent (:func:`demo_agent`, spec ``flightlog.cli.demo_context:demo_agent``; also ``examples/context_agent.py``)
works through 40 numbered steps with a scripted model (:class:`~flightlog.kernel.scripted.StepProvider`)
whose context window is 2,500 tokens, enforced the way Anthropic enforces it (a "prompt is too long" 400).
Every 7th step returns a large output, paged out to an artifact on arrival. Before the history passes 90%
of the window, the kernel asks a summarizer for a six-slot summary of the oldest turns and records
``compressed``. The demo then prints what the model saw at one turn after a compaction (``replay --at``)
and rebuilds every recorded request from the ledger (``replay --check``).
"""

from __future__ import annotations

from typing import Any

from rich.console import Console

from ..events import Compressed, Custom, PageOut
from ..kernel import Agent, Kernel, tool
from ..kernel.context import ContextPolicy, ContextWindow
from ..kernel.requests import check_session
from ..kernel.scripted import StepProvider, SummaryProvider
from ..narration import plural, summarize_message
from ..sessions import iter_events, replay_session
from ..store import Store

__all__ = ["STEPS", "WINDOW", "demo_agent", "run_context_demo", "step"]

STEPS = 40
"""Steps the demo agent works through."""
WINDOW = 2500
"""Its model's context window, in tokens."""


@tool(effect="read_only")
def step(step: int) -> str:
    """Do one numbered step of the job.

    Args:
        step: The step number.
    """
    bulk = "\n".join(f"line {i}: output of step {step}" for i in range(60)) if step % 7 == 0 else ""
    return f"step {step} done\n{bulk}".rstrip()


def demo_agent() -> Agent:
    """The demo agent: 40 steps, a 2,500-token window, a summarizer, the built-in context tools."""
    model = StepProvider(STEPS, tool="step", window=WINDOW)
    summarizer = SummaryProvider()
    windows = {model.model: ContextWindow(WINDOW, 200), summarizer.model: ContextWindow(100_000, 2000)}
    context = ContextPolicy(windows=windows, summarizer=summarizer, summary_max_tokens=250)
    return Agent(name="outgrowing", route=[model], tools=[step], max_tokens=200, context=context)


def _fill(context: dict[str, Any]) -> str:
    """A request's recorded fill as ``runs`` prints a run's (its latest): ``2,045/2,300 (89%)`` of the
    usable window (window minus the output reserve), so the two read alike."""
    usable = context["tokens"] - context["output_reserve"]
    return f"{context['fill_tokens']:,}/{usable:,} ({context['fill_tokens'] / usable:.0%})"


def run_context_demo(store: Store, console: Console) -> int:
    """Run the context demo (module docs) against ``store``; returns 0 when it went as expected."""
    console.print("A run that outgrows its context window (flightlog.cli.demo_context)")
    result = Kernel(store, demo_agent()).run_sync("do all the steps", handle_signals=False)
    sid = result.session_id
    pairs = [(row.seq, event) for row, event in iter_events(store, sid)]
    compressions = [(seq, e) for seq, e in pairs if isinstance(e, Compressed)]
    pages = [e for _s, e in pairs if isinstance(e, PageOut) and e.action == "micro_compact"]
    console.print(f"  {result.status} after {plural(result.turns, 'step')}: {result.final_message!r}")
    console.print(
        f"  window {WINDOW} tokens; {len(compressions)} compactions, {len(pages)} large outputs paged out"
    )
    fills = [
        e.payload["context"]
        for _s, e in pairs
        if isinstance(e, Custom)
        and e.custom_kind == "prompt_program_invoked"
        and e.payload["actor"] == "kernel"
    ]
    fullest = max(fills, key=lambda context: int(context["fill_tokens"]))
    console.print(f"  usable window filled: {_fill(fullest)} at most, {_fill(fills[-1])} by the last request")
    console.print("  (`flightlog runs` shows the last)")
    if not compressions:
        console.print("  expected at least one compaction")
        return 1
    seq, first = compressions[0]
    low, high = first.archived_seq_range
    console.print(
        f"  seq {seq}: compressed(turn={first.turn}, archived_seq_range=({low}, {high}), action={first.action})"
    )
    at = next(
        s for s, e in pairs if s > seq and isinstance(e, Custom) and e.custom_kind == "prompt_program_invoked"
    )
    console.print(f"  $ flightlog replay {sid[:12]} --at {at}   (what the model saw at turn {first.turn})")
    for index, message in enumerate(replay_session(store, sid, at=at)[:4]):
        console.print(f"    [{index}] {summarize_message(message, 100)}")
    report = check_session(store, sid)
    console.print(f"  $ flightlog replay {sid[:12]} --check")
    console.print(
        f"    {report.checked} model requests rebuilt from the ledger; {'all reproduce' if report.ok else 'MISMATCH'}"
    )
    return 0 if report.ok and result.status == "completed" else 1
