"""Context use of a run: how full its model's context window was at its latest model call.

Derived from the ledger only: the kernel records, with every model call, the estimated fill of the
request it is about to send (``Custom("prompt_program_invoked", {..., "context": {...}})``, see
:mod:`flightlog.kernel.requests` and :class:`flightlog.kernel.context.Fill`). The run's context use is
that record of its latest call by the ``kernel`` actor (a compaction's summary call, actor
``compactor``, measures another request and is left out). Nothing is estimated here and nothing is
invented: a field the record does not hold stays None (no window known for the model: no window, no
ratio), and a session with no such record (an import, a run recorded before requests were ledgered)
has no context use at all.

Pure: no I/O. Not part of the seed 002 snapshot (whose wire form is fixed); the ``runs`` listing and the
dashboard show it beside the snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["CONTEXT_BUDGET_EXCEEDED", "PROMPT_PROGRAM_INVOKED", "ContextUse", "overflow_text"]

PROMPT_PROGRAM_INVOKED = "prompt_program_invoked"
"""The ``custom_kind`` of the kernel's per-call request record (seed 003 name)."""

CONTEXT_BUDGET_EXCEEDED = "context_budget_exceeded"
"""The ``custom_kind`` of the kernel's record of a request that cannot fit its model's window, written with
``run_terminal(reason="context_overflow")`` (:mod:`flightlog.kernel.records`, the same name)."""


def stored_int(value: Any) -> int | None:
    """The integer a recorded JSON number is once stored: an int (bool excluded) as it is, and a float with
    no fraction within ±(2**53-1) as its int (RFC 8785 writes it as that integer literal, ``100.0`` as
    ``100`` and ``-0.0`` as ``0``, which decodes to the int); anything else None. A fold reading a count
    this way gives the same result for an event as appended and as decoded from its stored bytes (a larger
    float is stored as digits that decode back to the float)."""
    kind = type(value)
    if kind is int:
        return value  # type: ignore[no-any-return]
    if kind is float:
        return int(value) if value.is_integer() and -_SAFE <= value <= _SAFE else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


_SAFE = 2**53 - 1


def _count(value: Any) -> int | None:
    """``value`` as a stored non-negative integer (:func:`stored_int`), else None."""
    count = stored_int(value)
    return count if count is not None and count >= 0 else None


def overflow_text(payload: Mapping[str, Any]) -> str | None:
    """What a ``context_budget_exceeded`` record says, sizes in tokens, as the kernel's ``RunResult.detail``
    and the runs read model's terminal detail give it.

    Args:
        payload: The record's payload: ``{turn, model, route_position, overflow_kind, required_tokens,
            max_tokens?}`` (:meth:`flightlog.kernel.activation_context.ContextActivation.unfit`).

    Returns:
        ``fixed_context``: ``the system prompt and tools need ~<required> tokens, <model>'s window holds
        <max> input tokens``; ``provider``: ``<model> refused the request as too long (~<required> tokens
        estimated, window <max> input tokens) and nothing is left to archive`` (``an unknown size`` for a
        window the record leaves out). None when the record holds no ``model`` text, no
        ``required_tokens`` count or another ``overflow_kind``: nothing is said that it does not record.
    """
    model, required = payload.get("model"), _count(payload.get("required_tokens"))
    if not isinstance(model, str) or required is None:
        return None
    usable = _count(payload.get("max_tokens"))
    room = "an unknown size" if usable is None else f"{usable} input tokens"
    kind = payload.get("overflow_kind")
    if kind == "fixed_context":
        return f"the system prompt and tools need ~{required} tokens, {model}'s window holds {room}"
    if kind == "provider":
        return (
            f"{model} refused the request as too long (~{required} tokens estimated, window {room}) "
            "and nothing is left to archive"
        )
    return None


@dataclass(frozen=True)
class ContextUse:
    """The recorded window fill of a run's latest model call.

    Attributes:
        turn: The turn of that call.
        fill_tokens: Estimated input tokens of the request, in tokens.
        basis: How the kernel estimated it: ``reported+estimate`` (the previous call's reported input
            tokens plus the calibrated estimate of what was added since) or ``estimate``.
        window_tokens: The model's whole context window, in tokens (None when no window is known).
        output_reserve: Tokens the window keeps for the answer (None when no window is known).
        model: The model of that call, when recorded.
    """

    turn: int
    fill_tokens: int
    basis: str
    window_tokens: int | None = None
    output_reserve: int | None = None
    model: str | None = None

    @property
    def usable_tokens(self) -> int | None:
        """The tokens the input may fill: ``window_tokens - output_reserve`` (None without a window)."""
        if self.window_tokens is None or self.output_reserve is None:
            return None
        return self.window_tokens - self.output_reserve

    @property
    def ratio(self) -> float | None:
        """``fill_tokens / usable_tokens`` (None without a window)."""
        usable = self.usable_tokens
        return None if not usable else self.fill_tokens / usable

    def label(self) -> str:
        """A short cell: ``2,980/3,800 (78%)``, or ``2,980 tok`` without a known window."""
        usable, ratio = self.usable_tokens, self.ratio
        if usable is None or ratio is None:
            return f"{self.fill_tokens:,} tok"
        return f"{self.fill_tokens:,}/{usable:,} ({ratio:.0%})"

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (the projection's stored form; None fields kept)."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ContextUse | None:
        """Inverse of :meth:`to_json`; None for anything that is not one."""
        turn, fill = _count(data.get("turn")), _count(data.get("fill_tokens"))
        basis = data.get("basis")
        if turn is None or fill is None or not isinstance(basis, str):
            return None
        model = data.get("model")
        return cls(
            turn=turn,
            fill_tokens=fill,
            basis=basis,
            window_tokens=_count(data.get("window_tokens")),
            output_reserve=_count(data.get("output_reserve")),
            model=model if isinstance(model, str) else None,
        )

    @classmethod
    def from_invoked(cls, payload: Mapping[str, Any]) -> ContextUse | None:
        """The context use a ``prompt_program_invoked`` payload records.

        Args:
            payload: The record's payload: ``{actor, turn, model, context: {fill_tokens, basis,
                tokens?, output_reserve?, fill_ratio?}, ...}``.

        Returns:
            None when the record is not a ``kernel`` call's or carries no usable ``context`` (a bad
            count, a missing basis); the window only when both ``tokens`` and ``output_reserve`` are
            recorded with ``output_reserve < tokens``.
        """
        if payload.get("actor", "kernel") != "kernel":
            return None
        context = payload.get("context")
        if not isinstance(context, Mapping):
            return None
        turn, fill, basis = (
            _count(payload.get("turn")),
            _count(context.get("fill_tokens")),
            context.get("basis"),
        )
        if turn is None or fill is None or not isinstance(basis, str):
            return None
        window, reserve = _count(context.get("tokens")), _count(context.get("output_reserve"))
        if window is None or reserve is None or reserve >= window:
            window = reserve = None
        model = payload.get("model")
        return cls(turn, fill, basis, window, reserve, model if isinstance(model, str) else None)
