"""A run tree (the ``flightlog demo`` sub-agent agent): a lead delegates to two researchers in parallel, then
to a writer that asks its own fact checker before it publishes; publishing waits for a human.

The models are scripted, so it runs offline. Every sub-agent is a session of its own (its own chain, signed
and sealed), its parent set; the lead's ledger records each child's states (``agent_process_changed``), its
budget grant and its usage (``budget_usage_reported``). The side effects append to ``subagents-notes.txt``
in ``$FLIGHTLOG_SUBAGENTS_DIR`` (default: the working directory).

From a checkout::

    flightlog run examples.subagents_agent:agent --goal "research, then publish"   # exit 3: waits
    flightlog pending                      # the writer's publish, with its parent
    flightlog approve CHILD p1
    flightlog resume LEAD                  # (or CHILD: resume follows the tree to its root)
    flightlog runs --tree
    flightlog verify --all

Kill the first ``run`` at any point (Ctrl-C, ``kill -9``) and ``flightlog resume LEAD`` continues the whole
tree, each child from its own ledger; a finished child is not run again.
"""

from __future__ import annotations

from flightlog.cli.demo_subagents import tree_agent

agent = tree_agent()
"""The lead agent (``flightlog run examples.subagents_agent:agent``)."""
