"""Verification of linked artifacts: what a session's records of a linking format name, and every artifact
their content links to (:mod:`flightlog.store.links`), exists and hashes to its name.

A LangGraph thread stores a list channel as content-linked deltas: the event names only the newest
delta, whose content names the artifact it extends and the elements it adds, by sha256 digest. An
artifact only such a link names is invisible to a check of the events alone; deleting or altering one
leaves the thread unreadable (the saver refuses the read). So :func:`check_linked` walks, from the
artifacts the session's linking records name (:func:`~flightlog.store.links.linking_refs`: the
``"ref"`` members of the ``langgraph.*`` records, which the saver stores in the same transaction as the
record), every artifact they link to, transitively, reading each once in batches of
:data:`~flightlog.store.links.WALK_BATCH` (:class:`~flightlog.store.links.LinkWalk`), and hashes it.

Divergences (at the seq of the first event naming the root the artifact was reached from):
``artifact_missing`` (the store does not hold it) and ``artifact_corrupt`` (its bytes hash otherwise),
the detail naming the handle, the artifact that links to it and the record's seq. A session holding no
linking record costs one prefix test per row (:func:`~flightlog.integrity.verify.audit_rows` collects
the roots as the rows stream, into ``AuditReport.linking``) and no artifact read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import Divergence
from ..store.links import LinkWalk

if TYPE_CHECKING:
    from ..store.base import Store
    from .verify import AuditReport

__all__ = ["check_linked"]


def check_linked(store: Store, report: AuditReport) -> None:
    """Check every artifact of ``report.linking`` (sha256 hex -> first seq of a linking record naming it)
    and every one their content links to, transitively: present and hashing to its digest. Adds ``artifact_missing`` /
    ``artifact_corrupt`` divergences to ``report`` and counts the artifacts checked in ``report.linked``.

    Memory: one batch of artifact contents at a time plus one parent pointer per artifact reached.
    """
    walk = LinkWalk(store, report.linking)
    for item in walk:
        report.linked += 1
        if item.state == "present":
            continue
        if item.parent is None:
            where = f"named by the record at seq {item.seq}"
        else:
            path = walk.path(item.digest)
            where = f"linked from artifact sha256:{item.parent}" + (
                f" ({len(path)} link(s) down from sha256:{path[0]}, named by the record at seq {item.seq})"
                if len(path) > 1
                else f" (named by the record at seq {item.seq})"
            )
        if item.state == "missing":
            reason, what = "artifact_missing", "is missing from the store"
        else:
            reason, what = "artifact_corrupt", "holds bytes of another sha256"
        report.divergences.append(Divergence(item.seq, reason, f"artifact {item.handle}, {where}, {what}"))
    report.divergences.sort(key=lambda d: d.seq)
