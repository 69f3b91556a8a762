"""In-flight operations: what a cancellation or a deadline interrupts, and the deadline scope.

An operation is the model call of a turn (``"{run_id}:turn-{n}:model"``) or its tool execution
(``"{run_id}:turn-{n}:tools"``, with the call ids). When a signal or the wall-clock budget stops it, the
kernel records ``operation_cancelled(turn, operation_id, reason, pending_call_ids)`` with the calls that
have no result yet.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

__all__ = ["DeadlineHit", "Operation", "deadline"]


class DeadlineHit(Exception):
    """The run's wall-clock budget ran out while an operation was in flight."""


@dataclass
class Operation:
    """One in-flight operation: its id, the call ids it covers, and those already answered."""

    operation_id: str
    call_ids: tuple[str, ...] = ()
    done: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, operation_id: str, call_ids: Iterable[str] = ()) -> Operation:
        """An operation over ``call_ids`` (none for a model call)."""
        return cls(operation_id, tuple(call_ids))

    def pending(self) -> list[str]:
        """Call ids without a result yet, in call order."""
        return [call_id for call_id in self.call_ids if call_id not in self.done]


@asynccontextmanager
async def deadline(left_s: float | None) -> AsyncIterator[None]:
    """Run the body within ``left_s`` seconds (None: no limit); raise :class:`DeadlineHit` when it runs out.

    A ``TimeoutError`` the body raises by itself propagates unchanged.
    """
    if left_s is None:
        yield
        return
    scope = asyncio.timeout(left_s)
    try:
        async with scope:
            yield
    except TimeoutError:
        if scope.expired():
            raise DeadlineHit from None
        raise
