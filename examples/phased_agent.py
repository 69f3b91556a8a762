"""A phased agent: a milestone contract gates a tool, mounted at run time when the phase passes.

The model is scripted, so it runs offline. Its first answer is judged and blocked (``milestone_blocked``),
its second passes phase ``plan`` (``milestone_advanced``), which mounts the capability the phase unlocks
(``capability_changed``): with ``pip install 'flightlog[mcp]'``, a real MCP server over stdio whose
``words__count`` tool the model then calls; without the extra, the same tool in Python.

From a checkout::

    flightlog run examples.phased_agent:agent --goal "count the words of the release note, after a plan"
    flightlog show SESSION | grep -E "milestone|capability"
    flightlog replay SESSION --check       # every request rebuilt from the ledger, tools included
    flightlog runs                         # the phases are gate receipts of the run

The same agent in Python::

    from flightlog.kernel import Kernel
    from flightlog.store import SqliteStore
    from examples.phased_agent import agent

    with SqliteStore("runs.db") as store:
        result = Kernel(store, agent).run_sync("count the words of the release note, after a plan")
"""

from __future__ import annotations

from flightlog.cli.demo_capabilities import demo_agent

agent = demo_agent()
"""The agent (``flightlog run examples.phased_agent:agent``)."""
