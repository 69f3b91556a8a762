"""Group commit: several threads' transactions on one connection share a single ``COMMIT`` (one fsync).

A live agent commits every event before it moves on (write-ahead), so a process driving many sessions at
once (``flightlog worker --concurrency N``) would pay one durable commit per event per session. Group
commit, as databases do it for their own log (PostgreSQL's WAL flush, InnoDB's binlog group commit), lets
the commits that are *ready at the same time* share one:

* The store has one writer connection behind a :class:`Gate` (a re-entrant lock that knows how many
  threads are waiting for it).
* The first transaction opens the group (``BEGIN``); a transaction that starts while the group is open
  joins it inside a ``SAVEPOINT``, so its failure rolls back its own writes only.
* When a block ends and another thread is already waiting for the gate, the block does not commit: it
  releases the gate and waits until the group commits. The last block of the group (no one waiting, or
  :data:`MAX_GROUP` blocks in it) commits for everyone and wakes them. Nothing returns before its commit is
  durable, so write-ahead holds: an ``append`` that returned is on disk.
* If the ``COMMIT`` fails, every block of the group fails with that error and runs its rollback callbacks
  (the recorder restores its in-memory head): all or nothing, as for one transaction.
* A call outside any transaction (a read, an autocommit write) first commits an open group, so it never
  sees, or mixes its writes into, blocks that have not committed.
* A block's commit callbacks all run, in order, even when one raises (:func:`run_all`): a failing one (a
  purge of freed pages) never keeps a later one (a recorder moving its head past its committed rows) from
  running; the first failure is raised after them.

With one thread (or no contention) nothing waits and every transaction commits on its own, as before:
group commit costs one comparison per commit then. See ``bench/fleet.py`` for what it buys.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

__all__ = ["MAX_GROUP", "CommitGroup", "Gate", "run_all"]

MAX_GROUP = 64
"""Most transactions sharing one commit (bounds the wait of the first one in a group)."""

LINGER_S = 0.05
"""A waiting block re-checks its group this often (seconds) and commits it itself if nobody else will
(the thread it deferred to was interrupted before it could)."""


class CommitGroup:
    """One open transaction shared by the blocks of several threads, committed once for all."""

    __slots__ = ("done", "error", "notify", "size")

    def __init__(self) -> None:
        self.size = 0
        """Blocks that ended successfully inside this group so far."""
        self.notify: set[str] = set()
        """Sessions whose listeners to wake when the group commits (PostgreSQL ``NOTIFY``)."""
        self.done: threading.Event | None = None
        """Created (gate held) by the first block that defers to the group; set once the group committed
        (``error`` is None) or failed (``error`` is the exception). None while nobody waits: a group of
        one, the common case, costs no event."""
        self.error: BaseException | None = None

    def finished(self) -> None:
        """Wake the blocks waiting for this group (call once it committed or failed, gate held)."""
        if self.done is not None:
            self.done.set()


class Gate:
    """The lock over a store's writer connection, counting the threads waiting for it.

    Re-entrant like :class:`threading.RLock`. ``holds`` is how many times the owning thread holds it
    (meaningful to that thread only); ``group`` is the open :class:`CommitGroup`, if any.
    """

    def __init__(self, *, enabled: bool = True, max_group: int = MAX_GROUP) -> None:
        self.enabled = enabled
        self.max_group = max_group
        self.group: CommitGroup | None = None
        self.holds = 0
        self._mutex = threading.RLock()
        self._entering: list[None] = []  # one item per thread waiting; list append/pop are atomic in CPython

    def acquire(self) -> None:
        entering = self._entering
        entering.append(None)
        acquired = False
        try:
            acquired = self._mutex.acquire()
            self.holds += 1
        except BaseException:
            if acquired:  # interrupted (KeyboardInterrupt) just after taking it: give it back
                self._mutex.release()
            raise
        finally:
            entering.pop()

    def release(self) -> None:
        self.holds -= 1
        self._mutex.release()

    @property
    def waiting(self) -> int:
        """Threads waiting to take the gate right now (a snapshot)."""
        return len(self._entering)

    def should_defer(self, group: CommitGroup) -> bool:
        """True when the block that just ended in ``group`` should leave the commit to a waiting thread:
        group commit is on, this thread holds the gate once only (no enclosing block of its own would
        be stuck behind the wait), someone is waiting, and the group has room."""
        if self.enabled and self.holds == 1 and self._entering and group.size < self.max_group:
            if group.done is None:
                group.done = threading.Event()
            return True
        return False

    def end_member(self, group: CommitGroup, commit: Callable[[CommitGroup], None]) -> bool:
        """A block ended successfully in ``group`` (gate held): count it, and ``commit`` the group now
        unless :meth:`should_defer`. Returns whether the block deferred (it must then :meth:`conclude`
        with ``deferred=True``: wait for the group)."""
        group.size += 1
        deferred = self.should_defer(group)
        if not deferred:
            commit(group)
        return deferred

    def abandon_member(
        self, group: CommitGroup, undo: Callable[[], None], commit: Callable[[CommitGroup], None]
    ) -> None:
        """A block that joined ``group`` failed: ``undo`` its savepoint (the group goes on, and is committed
        here unless someone is waiting to join it). If the undo itself fails the transaction is unusable:
        the whole group fails with that error."""
        try:
            undo()
        except Exception as exc:
            group.error = exc
            commit(group)
            return
        if not self.should_defer(group):
            commit(group)

    def conclude(
        self,
        group: CommitGroup,
        *,
        deferred: bool,
        commit: Callable[[CommitGroup], None],
        after_commit: list[Callable[[], None]],
        after_rollback: list[Callable[[], None]],
        translate: Callable[[BaseException], BaseException],
    ) -> None:
        """End a successful block (gate released): wait for its group when it ``deferred`` the commit,
        then run its commit callbacks, or on a failed group its rollback callbacks (last first) and raise
        ``translate(group.error)``."""
        interrupted: BaseException | None = None
        while deferred:
            try:
                self.wait(group, commit)
                deferred = False
            except BaseException as exc:
                # A KeyboardInterrupt (or any exception) cannot take the block out of its group: its writes
                # commit or fail with the group. Wait for the outcome, settle the callbacks, then re-raise,
                # so the caller's view (head, subscribers) matches what the database holds.
                interrupted = exc
        if group.error is not None:
            for callback in reversed(after_rollback):
                callback()
            if interrupted is not None:
                raise interrupted
            error = translate(group.error)
            if error is group.error:
                raise error
            raise error from group.error
        try:
            run_all(after_commit)
        finally:
            if interrupted is not None:
                raise interrupted

    def wait(self, group: CommitGroup, commit: Callable[[CommitGroup], None]) -> None:
        """Wait (gate released) until ``group`` committed or failed; if it is still open after
        :data:`LINGER_S` with nobody inside a block, commit it from here."""
        done = group.done
        assert done is not None, "should_defer arms the group's event before a block waits on it"
        while not done.wait(LINGER_S):
            acquired = False
            try:
                self.acquire()
                acquired = True
                if self.group is group:
                    commit(group)
            finally:
                if acquired:
                    self.release()


def run_all(
    callbacks: Iterable[Callable[[], None] | tuple[Callable[[], None], str]], *, first_note: str | None = None
) -> None:
    """Run every callback in order, even after one raised, then raise the first failure (each later one
    added to it as a note): what was committed is committed, so every callback that reflects it runs.

    Args:
        callbacks: Each a callback, or ``(callback, what)``: ``what`` names its failure in the notes
            (default ``"commit callback failed"``; the recorder's: ``"subscriber S failed on SESSION seq N"``).
        first_note: Also note on the first failure ``"{what}; {first_note}"`` (None: the first failure is
            raised as it is).

    Raises:
        Exception: the first callback's failure, each later one noted ``"a later {what} too: {error!r}"``
            (a ``BaseException`` such as ``KeyboardInterrupt`` stops at once).
    """
    failure: Exception | None = None
    for item in callbacks:
        callback, what = item if isinstance(item, tuple) else (item, "commit callback failed")
        try:
            callback()
        except Exception as exc:
            if failure is None:
                failure = exc
                if first_note is not None:
                    failure.add_note(f"{what}; {first_note}")
            else:
                failure.add_note(f"a later {what} too: {exc!r}")
    if failure is not None:
        raise failure
