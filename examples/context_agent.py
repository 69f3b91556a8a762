"""A run that outgrows its context window, compacts, pages and finishes (the ``flightlog demo`` agent).

The model is scripted (:class:`flightlog.kernel.scripted.StepProvider`: 40 numbered steps, a 2,500-token
window enforced like Anthropic's "prompt is too long"), so it runs offline. Every 7th step's output is
large and is paged out to an artifact on arrival; before the history fills 90% of the window the kernel
summarizes the oldest turns (``compressed``), and the run finishes inside its window.

From a checkout::

    flightlog run examples.context_agent:agent --goal "do all the steps"
    flightlog show SESSION | grep -E "compressed|page_out"
    flightlog replay SESSION --at SEQ      # what the model saw at that point
    flightlog replay SESSION --check       # every request rebuilt from the ledger, digests compared
"""

from __future__ import annotations

from flightlog.cli.demo_context import demo_agent

agent = demo_agent()
"""The agent (``flightlog run examples.context_agent:agent``)."""
