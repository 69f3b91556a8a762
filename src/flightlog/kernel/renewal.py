"""Context renewal: rotate a run to a new sprint whose history starts from a handoff.

The handoff is one ``user`` message (goal, criteria, progress, open items, the latest compaction summary,
pinned results, and the run's attachments as further parts), stored as a content-addressed artifact (a
JSON message list, what :func:`flightlog.sessions.archive_loader` reads). The kernel records
``context_renewed(turn, sprint, handoff_ref)`` with ``handoff_ref = "sha256:<hex>"`` of that artifact;
replay and the kernel restart the history from it (the system prompt stays). Upstream always writes an
empty ``handoff_ref`` and the Rust SDK writes no event at all (UPSTREAM.md §3); here the handoff is
named, stored and bound to the chain by its digest.

Triggers: the agent's ``renew_context`` tool (after that turn's results), the policy
(``ContextPolicy.renew_after`` compactions in a sprint), and a fill still above the upstream renewal
threshold (0.98) when nothing more can be compacted.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..events import RunStarted
from ..messages import ContentPart, Message, TextPart

__all__ = ["handoff_message"]


def _bullets(items: Sequence[str]) -> str:
    return "\n".join(f"- {item}" for item in items) if items else "- none"


def handoff_message(
    run: RunStarted,
    *,
    sprint: int,
    progress: str,
    open_items: Sequence[str],
    summary: str | None,
    pinned: Sequence[str],
) -> Message:
    """The handoff a renewed context starts from.

    Args:
        run: The run's ``run_started`` (goal, criteria, attachments are carried over).
        sprint: The new sprint number.
        progress: What is done (the agent's words, or the latest assistant text).
        open_items: What is left.
        summary: The latest compaction summary in the old sprint, if any.
        pinned: Pinned tool results, verbatim (``[pinned result <id>]`` blocks).

    Returns:
        One ``user`` message: a text part with the sections, then the run's attachments.
    """
    criteria = "\n".join(f"{i}. {c}" for i, c in enumerate(run.criteria, start=1)) or "none"
    sections = [
        f"[context handoff: sprint {sprint}]",
        f"Goal:\n{run.goal}",
        f"Criteria:\n{criteria}",
        f"Progress:\n{progress.strip() or 'none recorded'}",
        f"Open items:\n{_bullets(open_items)}",
    ]
    if summary:
        sections.append(f"Summary of earlier work:\n{summary}")
    sections += list(pinned)
    parts: list[ContentPart] = [TextPart(text="\n\n".join(sections)), *run.attachments]
    return Message(role="user", content=parts)
