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
* :data:`LANGGRAPH_DELTA_MAGIC_2`, the same delta with its links as raw digests (the saver writes it since
  2026-12-05; half the bytes of hex): the magic, the canonical JSON of its other members (``t``, ``d``,
  ``bt``, ``at``, ``ht``), a newline, then 32-byte sha256 digests: ``e``, ``b`` and, on an anchor (``ht``
  present), ``a`` then each of ``h``. :func:`langgraph_delta_header` reads both forms to one header, digests
  as hex.

A link names a digest only; nothing here trusts it further: a copy stores the named content, and the
destination computes its sha256 itself, so a link to tampered bytes leaves the named artifact missing.

Which events can name an artifact of a declared format is declared here too (:func:`linking_refs`), so a
check walks links only from those events' artifacts, never reading every artifact an event mentions:
the LangGraph records (``custom`` events of kind ``langgraph.*``) name every artifact they store by an
exact ``"ref":"sha256:<hex>"`` member, stored in the same transaction as the record. :class:`LinkWalk`
reads such roots and everything they link to, in batches, each artifact once.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..encoding import canonical_json, parse_json
from ..errors import ArtifactIntegrityError

if TYPE_CHECKING:
    from .base import Store

__all__ = [
    "LANGGRAPH_DELTA_MAGIC",
    "LANGGRAPH_DELTA_MAGIC_2",
    "LINKING_PREFIX",
    "LinkWalk",
    "Linked",
    "artifact_links",
    "langgraph_delta_bytes",
    "langgraph_delta_header",
    "linking_refs",
    "unreadable_refs",
]

LANGGRAPH_DELTA_MAGIC = b"flightlog.lg.delta/1\n"
"""First bytes of a LangGraph content-linked list delta artifact (module docstring)."""

LANGGRAPH_DELTA_MAGIC_2 = b"flightlog.lg.delta/2\n"
"""First bytes of a LangGraph content-linked list delta artifact in the binary form (module docstring)."""

_HEX64 = re.compile(r"[0-9a-f]{64}")
_DELTA_LINKS = ("e", "b", "a")
_DELTA_RUNS = ("h",)
_DIGEST = 32


def langgraph_delta_bytes(header: Mapping[str, object]) -> bytes:
    """A LangGraph content-linked delta in the binary form (:data:`LANGGRAPH_DELTA_MAGIC_2`) of ``header``:
    ``e`` and ``b`` sha256 hex digests, on an anchor (``ht`` present) ``a`` and the list ``h`` too, its
    other members (``t``, ``d``, ``bt``, ``at``, ``ht``) JSON values.

    Raises:
        ValueError: a link is missing or not 64 lowercase hex digits, or ``h`` is not a list of them
            (names the member).
    """
    anchor = "ht" in header
    names = ("e", "b", "a") if anchor else ("e", "b")
    run = header.get("h", []) if anchor else []
    if not isinstance(run, list):
        raise ValueError(f"delta member 'h' is not a list of digests: {run!r}")
    digests = [*(header.get(name) for name in names), *run]
    for name, value in zip([*names, *("h" for _ in run)], digests, strict=True):
        if not (isinstance(value, str) and _HEX64.fullmatch(value)):
            raise ValueError(f"delta member {name!r} is not a sha256 hex digest: {value!r}")
    rest = {k: v for k, v in header.items() if k not in _DELTA_LINKS and k not in _DELTA_RUNS}
    return b"".join(
        [LANGGRAPH_DELTA_MAGIC_2, canonical_json(rest), b"\n", *(bytes.fromhex(str(d)) for d in digests)]
    )


def _binary_header(body: bytes) -> dict[str, object] | None:
    """The header of a binary delta's ``body`` (after the magic), links as hex; None when not laid out so."""
    end = body.find(b"\n")
    if end < 0:
        return None
    try:
        header = parse_json(body[:end])
    except ValueError:
        return None
    links = body[end + 1 :]
    if not isinstance(header, dict) or any(k in header for k in (*_DELTA_LINKS, *_DELTA_RUNS)):
        return None
    anchor = "ht" in header
    count, odd = divmod(len(links), _DIGEST)
    if odd or (count < 3 if anchor else count != 2):  # e and b; an anchor's a and h too
        return None
    digests = [links[i : i + _DIGEST].hex() for i in range(0, len(links), _DIGEST)]
    header.update(zip(("e", "b", "a"), digests, strict=False))
    if anchor:
        header["h"] = digests[3:]
    return header


def langgraph_delta_header(content: bytes) -> dict[str, object] | None:
    """The header of a LangGraph content-linked delta artifact in either form (module docstring), its links
    as sha256 hex digests; None when ``content`` is not one (no magic, a header that does not parse, or
    links that are not whole digests)."""
    if content.startswith(LANGGRAPH_DELTA_MAGIC_2):
        return _binary_header(content[len(LANGGRAPH_DELTA_MAGIC_2) :])
    if not content.startswith(LANGGRAPH_DELTA_MAGIC):
        return None
    try:
        header = parse_json(content[len(LANGGRAPH_DELTA_MAGIC) :])
    except ValueError:
        return None
    return header if isinstance(header, dict) else None


def artifact_links(content: bytes) -> list[str]:
    """The artifacts ``content`` names by a declared link format, as sha256 hex digests (in field order,
    without repeats; ``[]`` for content of no declared format).

    Only values that are exactly 64 lowercase hex digits are links; a delta whose header does not parse
    names none (the integration that reads it refuses it on its own).
    """
    header = langgraph_delta_header(content)
    if header is None:
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


LINKING_PREFIX = b'{"custom_kind":"langgraph.'
"""How every stored event that can name an artifact of a declared link format begins (a LangGraph record:
a ``custom`` event, stored as RFC 8785 JSON, so ``custom_kind`` is its first member); a reader scanning many
rows tests ``row.event_bytes.startswith(LINKING_PREFIX)`` (constant time) before calling
:func:`linking_refs`."""
_REF = re.compile(rb'"ref":"sha256:([0-9a-f]{64})"')
WALK_BATCH = 128
"""Artifacts :class:`LinkWalk` holds in memory at once (one ``get_artifacts`` call)."""


def linking_refs(event: bytes) -> list[str]:
    """The artifacts a stored event names that can be of a declared link format, as sha256 hex digests (in
    order, repeats kept): the ``"ref":"sha256:<hex>"`` members of a LangGraph record (module docs); ``[]``
    for any other event (one prefix test, so a session of no linking integration costs one per row)."""
    if not event.startswith(LINKING_PREFIX):
        return []
    return [m.group(1).decode("ascii") for m in _REF.finditer(event)]


_ANY_REF = re.compile(rb'"ref":("(?:[^"\\]|\\.)*"|[^,}\]"]*)(?=,"type":")')
_GOOD_REF = re.compile(rb'"sha256:[0-9a-f]{64}"')


def unreadable_refs(event: bytes) -> list[str]:
    """The value entries of a LangGraph record (module docs) whose ``"ref"`` is not a ``sha256:<64
    lowercase hex>`` handle (the saver refuses to read such a record; :func:`linking_refs` skips them),
    each as its JSON text (a string keeps its quotes: ``'"sha256:NOT-HEX"'``, ``'null'``), in order; ``[]``
    for any other event. An entry is a ``"ref"`` member followed by its ``"type"`` (every entry the saver
    writes with a ``ref`` has both, and RFC 8785 orders them so; a ``null`` entry it writes without one
    names no artifact), so a user's metadata key ``ref`` is not mistaken for one."""
    if not event.startswith(LINKING_PREFIX):
        return []
    return [
        m.group(1).decode("utf-8", "replace")
        for m in _ANY_REF.finditer(event)
        if not _GOOD_REF.fullmatch(m.group(1))
    ]


@dataclass(frozen=True)
class Linked:
    """One artifact a :class:`LinkWalk` reached.

    Attributes:
        digest: Its sha256, hex.
        state: ``present`` (its bytes hash to ``digest``), ``missing`` (the store does not hold it) or
            ``corrupt`` (its bytes hash otherwise; its links are not followed).
        parent: The artifact whose content links to it (hex), None for a root (named by an event).
        seq: The first event naming the root it was reached from.
        content: Its bytes (None when missing or corrupt: the store never hands out bytes that hash otherwise).
    """

    digest: str
    state: str
    parent: str | None
    seq: int
    content: bytes | None = field(repr=False)

    @property
    def handle(self) -> str:
        """``sha256:<digest>``."""
        return "sha256:" + self.digest


@dataclass
class LinkWalk:
    """Breadth-first over ``roots`` (digest -> first seq of an event naming it) and, transitively, the
    artifacts their content links to (:func:`artifact_links`), each read once, at most :data:`WALK_BATCH`
    at a time: memory is one batch of contents plus one parent pointer per artifact reached.

    Iterate it for :class:`Linked` items (roots in ``roots`` order first); :meth:`path` names how one was
    reached. The reads go through ``store.get_artifacts`` (a few statements per batch).
    """

    store: Store
    roots: Mapping[str, int]
    batch: int = WALK_BATCH
    parents: dict[str, str | None] = field(default_factory=dict, repr=False)

    def __iter__(self) -> Iterator[Linked]:
        pending: deque[tuple[str, str | None, int]] = deque((d, None, s) for d, s in self.roots.items())
        self.parents.update(dict.fromkeys(self.roots))
        while pending:
            taken = [pending.popleft() for _ in range(min(self.batch, len(pending)))]
            found, corrupt = self._read([d for d, _, _ in taken])
            for digest, parent, seq in taken:
                content = found.get(digest)
                if digest in corrupt:
                    yield Linked(digest, "corrupt", parent, seq, None)
                    continue
                if content is None:
                    yield Linked(digest, "missing", parent, seq, None)
                    continue
                for link in artifact_links(content):
                    if link not in self.parents:
                        self.parents[link] = digest
                        pending.append((link, digest, seq))
                yield Linked(digest, "present", parent, seq, content)

    def _read(self, digests: list[str]) -> tuple[dict[str, bytes], set[str]]:
        """The batch's stored contents (each checked against its digest by the store) and the digests whose
        bytes hash otherwise: the store's read raises on the first such one
        (:class:`~flightlog.errors.ArtifactIntegrityError`), which is set aside and the rest read again."""
        corrupt: set[str] = set()
        wanted = list(digests)
        while True:
            try:
                return self.store.get_artifacts(wanted), corrupt
            except ArtifactIntegrityError as exc:
                bad = exc.handle.removeprefix("sha256:")
                if bad not in wanted:  # not one of this batch: nothing to set aside
                    raise
                corrupt.add(bad)
                wanted.remove(bad)

    def path(self, digest: str) -> list[str]:
        """The digests from a root down to the artifact that links to ``digest`` (``[]`` for a root or an
        artifact not reached), each one linking to the next: the shortest way the walk found."""
        out: list[str] = []
        parent = self.parents.get(digest)
        while parent is not None:
            out.append(parent)
            parent = self.parents.get(parent)
        return out[::-1]
