"""A looping agent caught by the entropy watch and steered by a signal (the ``flightlog demo`` step 8 agent).

The model is scripted (:class:`flightlog.cli.demo_watch.LoopingModel`): it calls ``probe("/missing")`` every
turn, every call fails, and it stops only when a ``[SIGNAL]`` message tells it to. The entropy watch
(threshold 0.6, action ``ask``) trips at turn 6 and suspends the run on the gate ``entropy:6``.

From a checkout::

    flightlog run examples.watch_agent:agent --goal "find the config file"    # exit 3: suspended
    flightlog pending                                                          # entropy:6, tool entropy_watch
    flightlog signal SESSION --steer "stop probing /missing; answer with what you know"
    flightlog approve SESSION entropy:6 --as alice
    flightlog resume SESSION                                                   # the steer is delivered; exit 0
    flightlog show SESSION | grep -E "entropy|signal"
    flightlog replay SESSION --check
"""

from __future__ import annotations

from flightlog.cli.demo_watch import watch_agent

agent = watch_agent()
"""The agent (``flightlog run examples.watch_agent:agent``)."""
