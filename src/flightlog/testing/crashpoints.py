"""Test-only fault injection: a process SIGKILLs itself at a named point of the write path.

Crash tests used to SIGKILL a writer after a random delay and then count how many kills "found work"; on
a slow, loaded machine the delay could end before the process had done anything, and the count fell short.
Here the process kills itself exactly where the test asked, however slow the machine is::

    FLIGHTLOG_TEST_CRASH_AT=<point>[:<n>]     # die at the n-th hit of <point> in this process (n >= 1,
                                              # default 1)

Nothing else reads the variable. Unset (every real run), :func:`crash_point` costs one environment lookup.
Set, it counts the hits of the named point in this process (all threads together; a forked child starts
its own count) and calls ``os.kill(os.getpid(), SIGKILL)`` on the n-th: no ``finally`` block, ``atexit``
hook or buffered write runs, exactly as when another process sends the signal. A value naming an unknown
point raises ``ValueError`` at the first crash point reached, so a typo cannot pass as "never reached".

The points (:data:`POINTS`), each placed where a crash leaves a distinct state behind:

``append.written``
    ``Recorder.append_many``: the batch's rows are written in the open transaction, not committed.
``append.committed``
    ``Recorder.append_many``: the batch is durable; ``append`` has not returned (nothing acknowledged).
``commit.before`` / ``commit.after``
    The store's group commit (SQLite and PostgreSQL): just before / just after the ``COMMIT`` of a group,
    before any of the group's blocks (possibly several threads') has returned.
``effect.intent``
    ``Effects.run_once``: the side effect's intent is durable; the tool has not run (in doubt, not done).
``effect.ran``
    ``Effects.run_once``: the tool has run; its completion is not recorded (in doubt, done).
``model.call``
    The kernel's turn: ``checkpoint_taken`` is durable, the model call is about to start (phase
    ``calling``).
``compaction.call``
    The kernel's summary call of a compaction: ``compaction_started`` (and the call's request record) is
    durable, the call is about to start (phase ``compacting``: mid-compaction).
``compaction.archived``
    The summary is back and the archived messages are stored as an artifact; ``page_out`` and
    ``compressed`` are not recorded yet.
``context.rewrite``
    An in-place (snip/micro) compaction is decided and its originals archived; its records are not
    written yet.
``fleet.claimed``
    A fleet worker claimed a session's lease and is about to drive it.
``subagent.spawned``
    A delegating call's ``budget_grant`` and ``agent_process_changed(spawned)`` are durable in the parent;
    the child session does not exist yet (:mod:`flightlog.kernel.subagents`).
``subagent.settled``
    The child's exit and ``budget_usage_reported`` are durable in the parent; the call's completion is not.
``memory.stored``
    The built-in ``memory_write``: the memory is upserted into the store's index in the open transaction;
    its ``memory_written`` is not written yet, nothing is committed (:mod:`flightlog.kernel.memory`).
``memory.recorded``
    The memory and its ``memory_written`` are durable together; the turn's ``tool_completed`` is not.
``signals.disposed``
    A turn boundary's ``signal_delivery_disposed`` events are written and their queue rows marked disposed,
    in the open transaction, not committed (:mod:`flightlog.kernel.attention`).
"""

from __future__ import annotations

import functools
import operator
import os
import signal
import threading
from collections.abc import Callable

__all__ = ["ENV", "POINTS", "crash_point"]

ENV = "FLIGHTLOG_TEST_CRASH_AT"
"""The environment variable naming the crash point: ``<point>`` or ``<point>:<n>``."""

POINTS = frozenset(
    {
        "append.written",
        "append.committed",
        "commit.before",
        "commit.after",
        "effect.intent",
        "effect.ran",
        "model.call",
        "compaction.call",
        "compaction.archived",
        "context.rewrite",
        "fleet.claimed",
        "subagent.spawned",
        "subagent.settled",
        "signals.disposed",
        "memory.stored",
        "memory.recorded",
    }
)
"""Every point the code reaches (see the module docs)."""


def _environment_lookup() -> Callable[[], object]:
    """A function telling whether :data:`ENV` may be set, at a dictionary lookup's cost.

    ``os.environ.get`` encodes the name and decodes the value on every call (~1 µs on a slow machine, and an
    append passes four crash points). On POSIX ``os.environ`` keeps its entries in a dict of encoded names
    (``_data``), which every ``os.environ[...] =`` and ``del`` (so ``monkeypatch.setenv``) update: a
    lookup there sees exactly what ``os.environ.get`` sees. The lookup is ``operator.contains`` bound by
    ``functools.partial``, both in C, so it runs no Python frame of its own (a lambda would: one per crash
    point). Where that dict is not there (another platform or implementation), the plain ``os.environ.get``.
    """
    data = getattr(os.environ, "_data", None)
    encodekey = getattr(os.environ, "encodekey", None)
    if isinstance(data, dict) and callable(encodekey):
        return functools.partial(operator.contains, data, encodekey(ENV))
    return functools.partial(os.environ.get, ENV)


_lookup = _environment_lookup()

_hits: dict[tuple[int, str], int] = {}
_lock = threading.Lock()


def crash_point(name: str) -> None:
    """SIGKILL this process if ``$FLIGHTLOG_TEST_CRASH_AT`` names ``name`` and this is its n-th hit here.

    Args:
        name: One of :data:`POINTS`.

    Raises:
        ValueError: the variable is set to something other than ``<point>`` or ``<point>:<n>`` with a
            known point and an integer ``n >= 1``.
    """
    if _lookup():
        spec = os.environ.get(ENV)
        if spec:
            _hit(spec, name)


def _hit(spec: str, name: str) -> None:
    point, _, nth = spec.partition(":")
    if point not in POINTS or not (nth or "1").isdigit() or int(nth or "1") < 1:
        raise ValueError(f"{ENV}={spec!r}: expected <point>[:<n>] with n >= 1, points: {sorted(POINTS)}")
    if point != name:
        return
    key = (os.getpid(), spec)
    with _lock:
        hits = _hits[key] = _hits.get(key, 0) + 1
    if hits == int(nth or "1"):
        os.kill(os.getpid(), signal.SIGKILL)
