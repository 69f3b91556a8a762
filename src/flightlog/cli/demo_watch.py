"""``flightlog demo``, watch part: a looping agent caught by the entropy watch, steered by a signal.

The agent (:func:`watch_agent`, spec ``flightlog.cli.demo_watch:agent``; also ``examples/watch_agent.py``) looks
for a file with a scripted model (:class:`LoopingModel`) that calls ``probe("/missing")`` again and again,
and every call fails. Its entropy score climbs (repeat pressure and failure rate, :mod:`flightlog.kernel.entropy`)
until, at turn 6, the watch (threshold 0.6) trips and hands the run to a human: the run suspends on the gate ``entropy:6``.
The human sends a steer (``flightlog signal SESSION --steer ...``, here :func:`~flightlog.kernel.send_signal`),
approves the gate, and resumes; at the next turn boundary the kernel delivers the steer into the history
(``signal_delivery_disposed``), the model reads it and answers. Every request is then rebuilt from the ledger.
"""

from __future__ import annotations

from rich.console import Console

from ..events import EntropyAlert, EntropySample, SignalDeliveryDisposed
from ..kernel import Agent, Budgets, EntropyWatch, Kernel, approve, pending, send_signal, tool
from ..kernel.requests import check_session
from ..kernel.scripted import calls, reply
from ..messages import ToolCall
from ..providers.base import Capabilities, ModelRequest, ModelResponse, TokenCallback
from ..sessions import iter_events
from ..store import Store

__all__ = ["STEER", "THRESHOLD", "LoopingModel", "agent", "probe", "run_watch_demo", "watch_agent"]

STEER = "stop probing /missing: the file is not there. Answer with what you know."
"""The steer the demo's human sends."""


@tool(effect="read_only")
def probe(path: str) -> str:
    """Look at a path (the demo's file system has none)."""
    raise FileNotFoundError(f"no such file: {path}")


class LoopingModel:
    """A scripted model stuck in a loop: it probes ``/missing`` until a user message starting ``[SIGNAL]``
    tells it otherwise, then answers. Restart-safe (it reads only the request)."""

    protocol = "scripted"
    model = "looping-model"

    def capabilities(self) -> Capabilities:
        """Declares nothing."""
        return Capabilities()

    async def complete(
        self, request: ModelRequest, *, on_token: TokenCallback | None = None
    ) -> ModelResponse:
        """Probe again, or answer once steered."""
        users = [m.text_content() for m in request.messages if m.role == "user"]
        if any(text.startswith("[SIGNAL]") for text in users):
            return reply("I could not find the file: /missing does not exist. Stopping as asked.")
        turn = sum(1 for m in request.messages if m.role == "assistant") + 1
        return calls(ToolCall(id=f"probe-{turn}", name="probe", arguments='{"path": "/missing"}'))


THRESHOLD = 0.6
"""The demo watch's threshold: the loop's score is 0.35 x min(1, (turn - 1) / 5) + 0.30 (every call fails),
0.58 at turn 5 and 0.65 from turn 6 on (upstream's default 0.65 would need the float sum 0.35 + 0.30, which
is 0.6499999999999999, to reach it)."""


def watch_agent() -> Agent:
    """The looping agent with the entropy watch on (threshold 0.6, action ``ask``) and a 20-turn budget."""
    watch = EntropyWatch(threshold=THRESHOLD)
    return Agent(
        name="looper", route=[LoopingModel()], tools=[probe], entropy_watch=watch, budgets=Budgets(turns=20)
    )


agent = watch_agent()
"""The agent (``flightlog run flightlog.cli.demo_watch:agent``)."""


def run_watch_demo(store: Store, console: Console, *, step: str = "") -> int:
    """Run the watch demo (module docs) against ``store``; returns 0 when it went as expected.

    Args:
        step: Printed before the heading (the demo's step number).
    """
    console.print(
        f"{step}A looping agent caught by the entropy watch, steered by a signal (flightlog.cli.demo_watch)"
    )
    kernel = Kernel(store, watch_agent())
    first = kernel.run_sync("find the config file", handle_signals=False)
    sid = first.session_id
    samples = [e for _r, e in iter_events(store, sid) if isinstance(e, EntropySample)]
    scores = ", ".join(f"{s.turn}: {s.score:.2f}" for s in samples)
    console.print(f"   entropy per turn  {scores}")
    alerts = [e for _r, e in iter_events(store, sid) if isinstance(e, EntropyAlert)]
    gates = pending(store, sid)
    if first.status != "suspended" or len(alerts) != 1 or [g.call_id for g in gates] != ["entropy:6"]:
        console.print(f"   expected a suspension on entropy:6, got {first.status} {first.pending_calls}")
        return 1
    alert = alerts[0]
    console.print(
        f"   entropy_alert at turn {alert.turn} (score {alert.score:.4f} >= {alert.threshold}): suspended"
    )
    signal = send_signal(store, sid, "steer", STEER, sender="demo")
    console.print(f"   flightlog signal {sid[:8]} --steer '{STEER}'")
    console.print(f"     -> queued {signal.signal_id[:12]}…; flightlog approve {sid[:8]} entropy:6; resume")
    approve(store, sid, "entropy:6", responder="demo")
    final = kernel.resume_sync(sid, handle_signals=False)
    disposed = [e for _r, e in iter_events(store, sid) if isinstance(e, SignalDeliveryDisposed)]
    check = check_session(store, sid)
    console.print(
        f"   approved, resumed: the steer was disposed '{disposed[0].disposition}' at turn {disposed[0].turn}"
    )
    console.print(f"   the model answered: {final.final_message or ''}")
    console.print(
        f"   replay --check: {check.checked} requests rebuilt from the ledger, all reproduce: {check.ok}"
    )
    ok = final.status == "completed" and len(disposed) == 1 and check.ok
    return 0 if ok else 1
