"""An agent remembers a fact in one run and uses it in the next (long-term memory, issue 14).

Two agents on the scripted provider share the memory scope ``demo/ops-assistant`` in the store (see
:mod:`flightlog.cli.demo_memory`): ``remember`` calls ``memory_write``; ``recall`` is a new session whose
policy injects memories relevant to the goal at run start, calls ``memory_query`` too, and answers from
the ``[MEMORY ...]`` messages in its history.

From a checkout::

    flightlog run examples.memory_agent:remember --goal "remember when deploys happen"
    flightlog run examples.memory_agent:recall --goal "When do production deploys happen?"
    flightlog memory ls
    flightlog memory search "deploys thursday"
    flightlog show SESSION | grep memory_
    flightlog memory forget RECORD_ID      # erases the text; every chain still verifies
"""

from __future__ import annotations

from flightlog.cli.demo_memory import recall_agent, remember_agent

remember = remember_agent()
"""Writes the fact (``flightlog run examples.memory_agent:remember``)."""

recall = recall_agent()
"""Uses it in a new session (``flightlog run examples.memory_agent:recall``)."""
