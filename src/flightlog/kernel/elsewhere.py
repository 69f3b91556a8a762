"""Sessions the flightlog kernel does not run, and how a refusal of a kernel-only act words them.

Only a session of source ``kernel`` (``Kernel.run``, a fleet ``submit``, a kernel sub-agent) is run by the
kernel; an integration's session (LangGraph, OpenAI Agents SDK, Pydantic AI) is run by its own app, an
imported transcript (source ``import:FORMAT``) records another agent's run. A signal
(:func:`flightlog.kernel.attention.no_signal_reader`) or an abort (:func:`flightlog.kernel.abort.no_abort_target`)
to such a session would reach nothing, so both are refused with :func:`run_elsewhere`'s sentence.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..store.base import SessionRecord

__all__ = ["FRAMEWORKS", "run_elsewhere"]

FRAMEWORKS = {
    "langgraph": "a LangGraph thread",
    "langgraph.subgraph": "a LangGraph subgraph run",
    "openai-agents": "an OpenAI Agents SDK session",
    "pydantic-ai": "a Pydantic AI history",
}
"""What a session of each integration's source is, in a few words."""


def run_elsewhere(
    record: SessionRecord, *, unread: str, instead: Mapping[str, str], imported: str
) -> str | None:
    """Why a kernel-only act on ``record``'s session would reach nothing, or None when the kernel runs it
    (source ``kernel``).

    Args:
        record: The session's row (its ``source`` decides).
        unread: The clause saying what the act would fail to reach (after "its app runs it: ").
        instead: What works instead, per integration source of :data:`FRAMEWORKS`.
        imported: What works instead for an imported transcript.

    Returns:
        One sentence naming the session, what it is and its source, ``unread``, then what works instead;
        no trailing period. A source neither kernel, integration nor import gets no instead-clause.
    """
    from .approvals import IMPORT_SOURCE_PREFIX
    from .state import KERNEL_SOURCE

    source, sid = record.source, record.session_id
    if source == KERNEL_SOURCE:
        return None
    if source in FRAMEWORKS and source in instead:
        return f"session {sid} is {FRAMEWORKS[source]} (source {source}) and its app runs it: {unread}; {instead[source]}"
    if source.startswith(IMPORT_SOURCE_PREFIX):
        fmt = source[len(IMPORT_SOURCE_PREFIX) :] or "?"
        return (
            f"session {sid} is an imported {fmt} transcript (source {source}), a record of another agent's "
            f"run: {unread}; {imported}"
        )
    return f"session {sid} (source {source}): {unread}"
