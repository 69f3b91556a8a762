"""Links inside artifact content: the artifacts an artifact names, per a declared link format.

Events name artifacts by handle (``sha256:<hex>``, ``salted:sha256:<hex>``). Some artifacts name further
artifacts inside their own content, by bare hex digest; whatever carries or checks "the artifacts a session
needs" (``flightlog db copy``, :mod:`flightlog.ops.dbcopy`) must follow those links too, and it sits below the
integrations that write them. So each such layout is declared here, in the store layer, where both the
integration that writes it and the tools that follow it can import it (imports point down: ARCHITECTURE.md,
"Layers").

Declared formats:

* :data:`LANGGRAPH_DELTA_MAGIC`, a content-linked list delta of
  :class:`~flightlog.integrations.langgraph.FlightlogSaver` (that module's docstring, ``depth``): the magic,
  then canonical JSON whose ``e`` (the appended elements), ``b`` (the value it extends) and, on an anchor,
  ``a`` (the value ``SEGMENT`` deltas down) and ``h`` (elements of the deltas below) are sha256 hex digests.

A link names a digest only; nothing here trusts it further: a copy stores the named content, and the
destination computes its sha256 itself, so a link to tampered bytes leaves the named artifact missing.
"""

from __future__ import annotations

import re

from ..encoding import parse_json

__all__ = ["LANGGRAPH_DELTA_MAGIC", "artifact_links"]

LANGGRAPH_DELTA_MAGIC = b"flightlog.lg.delta/1\n"
"""First bytes of a LangGraph content-linked list delta artifact (module docstring)."""

_HEX64 = re.compile(r"[0-9a-f]{64}")
_DELTA_LINKS = ("e", "b", "a")
_DELTA_RUNS = ("h",)


def artifact_links(content: bytes) -> list[str]:
    """The artifacts ``content`` names by a declared link format, as sha256 hex digests (in field order,
    without repeats; ``[]`` for content of no declared format).

    Only values that are exactly 64 lowercase hex digits are links; a delta whose JSON header does not parse
    names none (the integration that reads it refuses it on its own).
    """
    if not content.startswith(LANGGRAPH_DELTA_MAGIC):
        return []
    try:
        header = parse_json(content[len(LANGGRAPH_DELTA_MAGIC) :])
    except ValueError:
        return []
    if not isinstance(header, dict):
        return []
    values: list[object] = [header.get(name) for name in _DELTA_LINKS]
    for name in _DELTA_RUNS:
        run = header.get(name)
        if isinstance(run, list):
            values.extend(run)
    out: dict[str, None] = {}
    for value in values:
        if isinstance(value, str) and _HEX64.fullmatch(value):
            out[value] = None
    return list(out)
